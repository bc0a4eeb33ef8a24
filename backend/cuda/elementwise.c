/* Elementwise kernels: single f32 nodes and `irtool.fused` groups (128-bit vector accesses
 * when rows allow), comparisons and logic on bools; broadcast through loop-nest strides.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- elementwise ------------------------------------------------------------------------------ */


/* The f32 formulas, keyed by op id in f32_ops: x[i] operand values (NULL for an absent
 * optional operand). Single nodes of these ops on f32 take this vectorized path (f32_path). */
#define F32_U __attribute__((unused))
#define F32_OP(name) static LLVMValueRef name(Cu *c F32_U, uint32_t n_in F32_U, LLVMValueRef *x, double alpha F32_U)
F32_OP(f32_add) { return LLVMBuildFAdd(c->b, x[0], x[1], ""); }
F32_OP(f32_sum) {
    LLVMValueRef acc = x[0];
    for (uint32_t i = 1; i < n_in; i++) acc = LLVMBuildFAdd(c->b, acc, x[i], "");
    return acc;
}
F32_OP(f32_mean) { return LLVMBuildFDiv(c->b, f32_sum(c, n_in, x, alpha), cf(c, (double)n_in), ""); }
F32_OP(f32_sub) { return LLVMBuildFSub(c->b, x[0], x[1], ""); }
F32_OP(f32_mul) { return LLVMBuildFMul(c->b, x[0], x[1], ""); }
F32_OP(f32_div) { return LLVMBuildFDiv(c->b, x[0], x[1], ""); }
F32_OP(f32_pow) { return cu_pow(c, x[0], x[1]); }
F32_OP(f32_max) {
    LLVMValueRef acc = x[0];
    for (uint32_t i = 1; i < n_in; i++) acc = cu_nan_max(c, acc, x[i], true);
    return acc;
}
F32_OP(f32_min) {
    LLVMValueRef acc = x[0];
    for (uint32_t i = 1; i < n_in; i++) acc = cu_nan_max(c, acc, x[i], false);
    return acc;
}
F32_OP(f32_relu) { return sel(c, fcmp(c, LLVMRealUGT, x[0], cf(c, 0.0)), x[0], cf(c, 0.0)); }
F32_OP(f32_neg) { return LLVMBuildFNeg(c->b, x[0], ""); }
F32_OP(f32_abs) { return cu_f32_intr(c, "llvm.fabs", x[0]); }
F32_OP(f32_exp) { return cu_exp(c, x[0]); }
F32_OP(f32_log) { return cu_log(c, x[0]); }
F32_OP(f32_sqrt) { return cu_f32_intr(c, "llvm.sqrt", x[0]); }
F32_OP(f32_floor) { return cu_f32_intr(c, "llvm.floor", x[0]); }
F32_OP(f32_ceil) { return cu_f32_intr(c, "llvm.ceil", x[0]); }
F32_OP(f32_reciprocal) { return LLVMBuildFDiv(c->b, cf(c, 1.0), x[0], ""); }
F32_OP(f32_tanh) { return cu_tanh(c, x[0]); }
F32_OP(f32_erf) { return cu_erf(c, x[0]); }
F32_OP(f32_identity) { return x[0]; }
F32_OP(f32_sigmoid) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef one = cf(c, 1.0);
    return LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, cu_exp(c, LLVMBuildFNeg(b, x[0], "")), ""), "");
}
F32_OP(f32_leaky_relu) {
    return sel(c, fcmp(c, LLVMRealOLT, x[0], cf(c, 0.0)), LLVMBuildFMul(c->b, x[0], cf(c, alpha), ""), x[0]);
}
F32_OP(f32_clip) {
    LLVMValueRef v = x[0];
    if (n_in > 1 && x[1]) v = sel(c, fcmp(c, LLVMRealOLT, v, x[1]), x[1], v);
    if (n_in > 2 && x[2]) v = sel(c, fcmp(c, LLVMRealOGT, v, x[2]), x[2], v);
    return v;
}
F32_OP(f32_where) { return sel(c, LLVMBuildICmp(c->b, LLVMIntNE, x[0], LLVMConstInt(c->i8, 0, 0), ""), x[1], x[2]); }

static LLVMValueRef (*const f32_ops[IR_OP_COUNT])(Cu *, uint32_t, LLVMValueRef *, double) = {
    [IR_OP_ADD] = f32_add, [IR_OP_SUM] = f32_sum, [IR_OP_MEAN] = f32_mean, [IR_OP_SUB] = f32_sub,
    [IR_OP_MUL] = f32_mul, [IR_OP_DIV] = f32_div, [IR_OP_POW] = f32_pow, [IR_OP_MAX] = f32_max,
    [IR_OP_MIN] = f32_min, [IR_OP_RELU] = f32_relu, [IR_OP_NEG] = f32_neg, [IR_OP_ABS] = f32_abs,
    [IR_OP_EXP] = f32_exp, [IR_OP_LOG] = f32_log, [IR_OP_SQRT] = f32_sqrt, [IR_OP_FLOOR] = f32_floor,
    [IR_OP_CEIL] = f32_ceil, [IR_OP_RECIPROCAL] = f32_reciprocal, [IR_OP_TANH] = f32_tanh, [IR_OP_ERF] = f32_erf,
    [IR_OP_IDENTITY] = f32_identity, [IR_OP_SIGMOID] = f32_sigmoid, [IR_OP_LEAKY_RELU] = f32_leaky_relu,
    [IR_OP_CLIP] = f32_clip, [IR_OP_WHERE] = f32_where,
};

LLVMValueRef cu_ew_value(Cu *c, IrOp op, uint32_t n_in, LLVMValueRef *x, double alpha) {
    return f32_ops[op] ? f32_ops[op](c, n_in, x, alpha) : NULL;
}

bool cu_ew_f32_op(IrOp op) { return f32_ops[op] != NULL; }

/* One kernel for a single elementwise node or an elementwise `irtool.fused` group: the loads are
 * the group's operands (or the node's), the members are evaluated on scalars in order, only
 * the results are stored. With every operand of the output's shape (or one element) and the
 * element count a multiple of 4, each thread handles 4 elements with 128-bit loads and stores. */
typedef struct EwPlan {
    uint32_t n_load, n_store;
    IrValueId load_v[CU_MAX_ARGS], store_v[CU_MAX_ARGS]; /* values inside the group */
    uint32_t load_slot[CU_MAX_ARGS], store_slot[CU_MAX_ARGS];
    bool load_bool[CU_MAX_ARGS], scalar[CU_MAX_ARGS];
    int64_t strides[CU_MAX_ARGS + 8][IR_MAX_RANK];
    IrRegionId body; /* 0: a single node */
    LLVMValueRef *vals;
    int vec;
} EwPlan;

void cu_ew_eval_members(Cu *c, IrRegionId body, LLVMValueRef *vals) {
    const IrGraph *g = c->g;
    IrNodeId first = body ? ir_region_first(g, body) : c->node;
    for (IrNodeId m = first; m; m = body ? ir_node_next(g, m) : 0) {
        uint32_t n_in = ir_node_num_operands(g, m);
        LLVMValueRef x[CU_MAX_ARGS];
        for (uint32_t i = 0; i < n_in && i < CU_MAX_ARGS; i++) {
            IrValueId v = ir_node_operand(g, m, i);
            x[i] = v ? vals[v] : NULL;
        }
        bool found;
        double alpha = ir_node_attr_float(g, m, "alpha", &found);
        vals[ir_node_result(g, m, 0)] = cu_ew_value(c, ir_node_op(g, m), n_in, x, alpha);
    }
}

static void ew_eval(Cu *c, EwPlan *p) { cu_ew_eval_members(c, p->body, p->vals); }

static void ew_body(Cu *c, LLVMValueRef *offs, void *user) {
    EwPlan *p = user;
    for (uint32_t j = 0; j < p->n_load; j++)
        if (!p->scalar[j])
            p->vals[p->load_v[j]] = ld(c, p->load_bool[j] ? c->i8 : c->f32, pslot(c, p->load_slot[j]), offs[p->n_store + j]);
    ew_eval(c, p);
    for (uint32_t j = 0; j < p->n_store; j++) st(c, c->f32, pslot(c, p->store_slot[j]), offs[j], p->vals[p->store_v[j]]);
}

/* 4 consecutive outputs of one row per iteration: operands with unit last stride are read with
 * one 128-bit load (their offset is a multiple of 4), operands broadcast along the last dim with
 * one scalar load. */
static void ew_body_vec(Cu *c, EwPlan *p, LLVMValueRef i, uint32_t rank, const int64_t *od) {
    LLVMValueRef flat = LLVMBuildNSWMul(c->b, i, ci(c, 4), ""), offs[CU_MAX_ARGS + 8];
    cu_nest_offsets(c, rank, od, p->n_store + p->n_load, p->strides, NULL, flat, offs);
    LLVMValueRef lanes[CU_MAX_ARGS], one[CU_MAX_ARGS];
    for (uint32_t j = 0; j < p->n_load; j++) {
        if (p->scalar[j]) continue;
        LLVMTypeRef et = p->load_bool[j] ? c->i8 : c->f32, vt = LLVMVectorType(et, 4);
        LLVMValueRef ptr = gep(c, et, pslot(c, p->load_slot[j]), offs[p->n_store + j]);
        lanes[j] = one[j] = NULL;
        if (rank && p->strides[p->n_store + j][rank - 1] == 0) {
            one[j] = LLVMBuildLoad2(c->b, et, ptr, "");
        } else {
            lanes[j] = LLVMBuildLoad2(c->b, vt, ptr, "");
            LLVMSetAlignment(lanes[j], p->load_bool[j] ? 4 : 16);
        }
    }
    LLVMValueRef out[CU_MAX_ARGS];
    for (uint32_t j = 0; j < p->n_store; j++) out[j] = LLVMGetUndef(LLVMVectorType(c->f32, 4));
    for (int k = 0; k < 4; k++) {
        for (uint32_t j = 0; j < p->n_load; j++)
            if (!p->scalar[j])
                p->vals[p->load_v[j]] = one[j] ? one[j] : LLVMBuildExtractElement(c->b, lanes[j], c32(c, k), "");
        ew_eval(c, p);
        for (uint32_t j = 0; j < p->n_store; j++)
            out[j] = LLVMBuildInsertElement(c->b, out[j], p->vals[p->store_v[j]], c32(c, k), "");
    }
    for (uint32_t j = 0; j < p->n_store; j++) {
        LLVMValueRef st_ = LLVMBuildStore(c->b, out[j], gep(c, c->f32, pslot(c, p->store_slot[j]), offs[j]));
        LLVMSetAlignment(st_, 16);
    }
}

static IrStatus ew_add_load(Cu *c, EwPlan *p, IrValueId inner, IrValueId src, uint32_t orank) {
    for (uint32_t j = 0; j < p->n_load; j++)
        if (p->load_v[j] == inner) return IR_OK;
    if (p->n_store + p->n_load >= CU_MAX_ARGS) return cu_unsupported(c, "with this many operands");
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    lower_value_shape(c->g, src, &r, d);
    uint32_t j = p->n_load++;
    p->load_v[j] = inner;
    p->load_slot[j] = src;
    p->load_bool[j] = lower_value_dtype(c->g, src) == IR_DTYPE_BOOL;
    p->scalar[j] = ir_shape_numel(r, d) == 1;
    ir_shape_broadcast_strides(r, d, orank, NULL, p->strides[p->n_store + j]);
    return IR_OK;
}

static IrStatus gen_ew(Cu *c, bool fused) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    EwPlan p = {0};
    uint32_t orank;
    int64_t od[IR_MAX_RANK];
    IrValueId out0 = ir_node_result(g, n, 0);
    lower_value_shape(g, out0, &orank, od);
    if (fused) {
        if (!lower_fused_ew_group(g, n, true)) return cu_unsupported(c, "group with these members or shapes");
        p.body = ir_node_region_at(g, n, 0);
        for (IrNodeId m = ir_region_first(g, p.body); m; m = ir_node_next(g, m))
            if (!lower_core_ew_op(ir_node_op(g, m))) {
                ir_diag_at_node(c->diag, g, m, IR_SEV_ERROR, "the cuda backend (%s) does not support %s in a fused group",
                                c->target, ir_op_name(ir_node_op(g, m)));
                return IR_EUNSUPPORTED;
            }
    } else {
        if (lower_value_dtype(g, out0) != IR_DTYPE_F32) return cu_unsupported(c, "on non-f32 tensors");
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrValueId v = ir_node_operand(g, n, i);
            bool cond = ir_node_op(g, n) == IR_OP_WHERE && i == 0;
            if (v && lower_value_dtype(g, v) != (cond ? IR_DTYPE_BOOL : IR_DTYPE_F32)) return cu_unsupported(c, "on non-f32 tensors");
        }
    }
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId res = ir_node_result(g, n, i);
        if (!res) continue;
        if (p.n_store >= CU_MAX_ARGS) return cu_unsupported(c, "with this many results");
        p.store_v[p.n_store] = fused ? ir_region_output(g, p.body, i) : res;
        p.store_slot[p.n_store] = res;
        ir_shape_strides(orank, od, p.strides[p.n_store]);
        p.n_store++;
    }
    IrStatus s = IR_OK;
    if (fused) {
        for (IrNodeId m = ir_region_first(g, p.body); m && !s; m = ir_node_next(g, m))
            for (uint32_t i = 0; i < ir_node_num_operands(g, m) && !s; i++) {
                IrValueId v = ir_node_operand(g, m, i), src = v;
                if (!v || ir_value_kind(g, v) == IR_VALUE_RESULT) continue;
                for (uint32_t a = 0; a < ir_region_num_args(g, p.body); a++)
                    if (ir_region_arg(g, p.body, a) == v) src = ir_node_operand(g, n, a);
                if (!src) return cu_unsupported(c, "group with these operands");
                s = ew_add_load(c, &p, v, src, orank);
            }
    } else {
        for (uint32_t i = 0; i < ir_node_num_operands(g, n) && !s; i++) {
            IrValueId v = ir_node_operand(g, n, i);
            if (v) s = ew_add_load(c, &p, v, v, orank);
        }
    }
    if (s) return s;
    int64_t total = ir_shape_numel(orank, od);
    /* vector path: rows of a multiple of 4; every operand contiguous along the row (its other
     * strides then multiples of 4, so 16-byte aligned) or broadcast along it */
    bool vec = orank > 0 && od[orank - 1] % 4 == 0 && total >= 4;
    for (uint32_t j = 0; j < p.n_load && vec; j++) {
        if (p.scalar[j]) continue;
        const int64_t *sj = p.strides[p.n_store + j];
        vec = sj[orank - 1] == 0 || sj[orank - 1] == 1;
        for (uint32_t k = 0; k + 1 < orank && vec && sj[orank - 1] == 1; k++) vec = sj[k] % 4 == 0;
    }
    uint32_t slots[CU_MAX_ARGS];
    for (uint32_t j = 0; j < p.n_store; j++) slots[j] = p.store_slot[j];
    for (uint32_t j = 0; j < p.n_load; j++) slots[p.n_store + j] = p.load_slot[j];
    if ((s = cu_kbegin(c, slots, p.n_store + p.n_load, CU_BLOCK, false))) return s;
    p.vals = calloc(ir_graph_num_values(g) + 1, sizeof *p.vals);
    if (!p.vals) return IR_ENOMEM;
    for (uint32_t j = 0; j < p.n_load; j++) /* one-element operands: loaded once */
        if (p.scalar[j]) p.vals[p.load_v[j]] = ld(c, p.load_bool[j] ? c->i8 : c->f32, pslot(c, p.load_slot[j]), ci(c, 0));
    if (vec) {
        Loop l;
        cu_grid_begin(c, &l, total / 4);
        ew_body_vec(c, &p, l.iv, orank, od);
        cu_loop_end(c, &l);
    } else {
        cu_emit_nest(c, orank, od, p.n_store + p.n_load, p.strides, NULL, ew_body, &p);
    }
    free(p.vals);
    return cu_kend(c, vec ? total / 4 : total, NULL);
}

/* Comparisons (f32 -> bool) and logic on bools: a grid-stride kernel with broadcast indexing. */
typedef struct CmpCtx {
    IrOp op;
    uint32_t y, a, b;
    bool logic;
} CmpCtx;

/* Each comparison's predicate on f32, or each logic op's builder on the operands' truth. */
static const struct {
    LLVMRealPredicate pred;
    LLVMValueRef (*logic)(LLVMBuilderRef, LLVMValueRef, LLVMValueRef, const char *);
} cmp_ops[IR_OP_COUNT] = {
    [IR_OP_EQUAL] = {LLVMRealOEQ, NULL},
    [IR_OP_GREATER] = {LLVMRealOGT, NULL},
    [IR_OP_GREATER_OR_EQUAL] = {LLVMRealOGE, NULL},
    [IR_OP_LESS] = {LLVMRealOLT, NULL},
    [IR_OP_LESS_OR_EQUAL] = {LLVMRealOLE, NULL},
    [IR_OP_AND] = {0, LLVMBuildAnd},
    [IR_OP_OR] = {0, LLVMBuildOr},
    [IR_OP_XOR] = {0, LLVMBuildXor},
};

static void cmp_body(Cu *c, LLVMValueRef *o, void *user) {
    CmpCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMTypeRef t = p->logic ? c->i8 : c->f32;
    LLVMValueRef x = ld(c, t, pslot(c, p->a), o[1]), r;
    LLVMValueRef z = LLVMConstInt(c->i8, 0, 0);
    if (p->op == IR_OP_NOT) {
        r = LLVMBuildICmp(b, LLVMIntEQ, x, z, "");
    } else {
        LLVMValueRef yv = ld(c, t, pslot(c, p->b), o[2]);
        if (cmp_ops[p->op].pred) {
            r = fcmp(c, cmp_ops[p->op].pred, x, yv);
        } else {
            LLVMValueRef xa = LLVMBuildICmp(b, LLVMIntNE, x, z, ""), ya = LLVMBuildICmp(b, LLVMIntNE, yv, z, "");
            r = cmp_ops[p->op].logic(b, xa, ya, "");
        }
    }
    st(c, c->i8, pslot(c, p->y), o[0], LLVMBuildZExt(b, r, c->i8, ""));
}


static IrStatus gen_cmp(Cu *c, IrOp op) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    bool logic = op == IR_OP_NOT || op == IR_OP_AND || op == IR_OP_OR || op == IR_OP_XOR;
    uint32_t na = op == IR_OP_NOT ? 1 : 2, orank, r;
    CmpCtx p = {op, ir_node_result(g, n, 0), ir_node_operand(g, n, 0), na > 1 ? ir_node_operand(g, n, 1) : 0, logic};
    for (uint32_t i = 0; i < na; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v || lower_value_dtype(g, v) != (logic ? IR_DTYPE_BOOL : IR_DTYPE_F32))
            return cu_unsupported(c, logic ? "on non-bool tensors" : "on non-f32 tensors");
    }
    int64_t od[IR_MAX_RANK], d[IR_MAX_RANK], s[3][IR_MAX_RANK];
    lower_value_shape(g, p.y, &orank, od);
    ir_shape_strides(orank, od, s[0]);
    for (uint32_t i = 0; i < na; i++) {
        lower_value_shape(g, ir_node_operand(g, n, i), &r, d);
        ir_shape_broadcast_strides(r, d, orank, NULL, s[1 + i]);
    }
    int64_t total = ir_shape_numel(orank, od);
    if (!total) return IR_OK;
    uint32_t slots[3] = {p.y, p.a, p.b ? p.b : p.a};
    IrStatus st_ = cu_kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, orank, od, na + 1, s, NULL, cmp_body, &p);
    return cu_kend(c, total, NULL);
}


/* ---- rows of backend/cuda/cuda_ops.def ---- */

/* Single nodes that cu_ew_value computes in f32 (vectorized); everything else in the typed kernels. */
static bool f32_path(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    if (!cu_ew_f32_op(ir_node_op(g, n))) return false;
    if (ir_node_num_results(g, n) != 1 || lower_value_dtype(g, ir_node_result(g, n, 0)) != IR_DTYPE_F32) return false;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        bool cond = ir_node_op(g, n) == IR_OP_WHERE && i == 0;
        if (!v) continue;
        if (lower_value_dtype(g, v) != (cond ? IR_DTYPE_BOOL : IR_DTYPE_F32) || lower_value_nbytes(g, v) == 0) return false;
    }
    return true;
}

IrStatus cuda_emit_ew(Cu *c) { return f32_path(c) ? gen_ew(c, false) : cu_gen_ew_typed(c); }
IrStatus cuda_emit_fused(Cu *c) { return gen_ew(c, true); }
IrStatus cuda_emit_cmp(Cu *c) {
    const IrGraph *g = c->g;
    IrOp op = ir_node_op(g, c->node);
    bool logic = op == IR_OP_NOT || op == IR_OP_AND || op == IR_OP_OR || op == IR_OP_XOR;
    bool fast = true;
    for (uint32_t i = 0; i < ir_node_num_operands(g, c->node); i++) {
        IrValueId v = ir_node_operand(g, c->node, i);
        fast &= v && lower_value_dtype(g, v) == (logic ? IR_DTYPE_BOOL : IR_DTYPE_F32);
    }
    return fast ? gen_cmp(c, op) : cu_gen_ew_typed(c);
}
