/* One block per row: Softmax, LogSoftmax, LayerNormalization and the Reduce* ops over
 * adjacent axes, folded per thread then across the block with warp shuffles.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- rows: softmax, layer norm, reductions ---------------------------------------------------- */

static uint32_t row_block(int64_t len) {
    uint32_t b = 32;
    while (b < 256 && b < len) b *= 2;
    return b;
}

/* Per row (one block): base offset of the row, thread loop j = tid; j < len; j += block. */
typedef struct Row {
    LLVMValueRef row, tid;
    uint32_t block;
} Row;

static void row_enter(Cu *c, Row *r, uint32_t block) {
    r->block = block;
    r->row = cu_sreg(c, "llvm.nvvm.read.ptx.sreg.ctaid.x");
    r->tid = cu_sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x");
}

/* len: the row's length as a value (a constant unless the row follows a symbol) */
static void row_loop(Cu *c, Row *r, Loop *l, LLVMValueRef len) { cu_loop_begin(c, l, r->tid, len, ci(c, r->block)); }
static void row_loop_acc(Cu *c, Row *r, Loop *l, LLVMValueRef len, double init, LLVMValueRef *acc) {
    cu_loop_begin_acc(c, l, r->tid, len, ci(c, r->block), cf(c, init), acc);
}

/* Folds x[base + j*step] over the row in each thread, then across the block. */
static LLVMValueRef row_fold(Cu *c, Row *r, LLVMValueRef x, LLVMValueRef base, LLVMValueRef len, int64_t step, int kind,
                             LLVMValueRef shift) {
    double init = kind == RED_MAX ? -INFINITY : kind == RED_MIN ? INFINITY : 0.0;
    Loop l;
    LLVMValueRef acc;
    row_loop_acc(c, r, &l, len, init, &acc);
    LLVMValueRef off = LLVMBuildNSWAdd(c->b, base, step == 1 ? l.iv : LLVMBuildNSWMul(c->b, l.iv, ci(c, step), ""), "");
    LLVMValueRef v = ld(c, c->f32, x, off);
    if (shift) {
        LLVMValueRef t = LLVMBuildFSub(c->b, v, shift, "");
        v = LLVMBuildFMul(c->b, t, t, "");
    }
    cu_loop_acc_next(c, acc, cu_red_op(c, kind == 3 ? RED_SUM : kind, acc, v));
    cu_loop_end(c, &l);
    return cu_block_reduce(c, kind == 3 ? RED_SUM : kind, acc, r->block);
}

static IrStatus gen_softmax_layernorm(Cu *c, IrOp op) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (lower_value_dtype(g, x) != IR_DTYPE_F32) return cu_unsupported(c, "on non-f32 tensors");
    if (!cu_value_shape(c, x, &r, d)) return cu_unsupported(c, "with an unknown dim");
    bool found;
    int64_t axis = ir_shape_axis(ir_node_attr_int(g, n, "axis", &found), r);
    if (!found) axis = r ? r - 1 : 0;
    if (axis < 0 || axis >= (int64_t)r) return cu_unsupported(c, "with this axis");
    /* symbolic shapes: the row count may follow symbols, and a softmax's row length */
    for (uint32_t k = (uint32_t)axis + (op == IR_OP_SOFTMAX || op == IR_OP_LOG_SOFTMAX); k < r; k++)
        if (d[k] < 0) return cu_unsupported(c, "with symbolic dims in its rows");
    int64_t outer = cu_fx_prod(c, x, 0, (uint32_t)axis, 1); /* a formula (CU_FX) when symbolic */
    IrStatus s;
    Row rw;
    Loop l;
    if (op == IR_OP_SOFTMAX || op == IR_OP_LOG_SOFTMAX) {
        int64_t inner = ir_shape_numel(r - (uint32_t)axis - 1, d + axis + 1), len = d[axis]; /* len -1: symbolic */
        if (len == 0 || outer == 0 || inner == 0) return IR_OK;
        uint32_t slots[2] = {y, x}, block = len < 0 ? 256 : row_block(len);
        if ((s = cu_kbegin(c, slots, 2, block, true))) return s;
        LLVMValueRef X = pslot(c, x), Y = pslot(c, y);
        row_enter(c, &rw, block);
        LLVMValueRef lv = len < 0 ? cu_dim(c, ir_type_dims(g, ir_value_type(g, x))[axis]) : ci(c, len);
        /* row = o * inner + i  ->  base = o * len * inner + i */
        LLVMValueRef o = LLVMBuildUDiv(c->b, rw.row, ci(c, inner), ""), i = LLVMBuildURem(c->b, rw.row, ci(c, inner), "");
        LLVMValueRef base = LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, o, LLVMBuildNSWMul(c->b, lv, ci(c, inner), ""), ""), i, "");
        LLVMValueRef m = row_fold(c, &rw, X, base, lv, inner, RED_MAX, NULL);
        /* sum of exp(x - m), storing exp for softmax */
        LLVMValueRef acc;
        row_loop_acc(c, &rw, &l, lv, 0.0, &acc);
        LLVMValueRef off = LLVMBuildNSWAdd(c->b, base, LLVMBuildNSWMul(c->b, l.iv, ci(c, inner), ""), "");
        LLVMValueRef ex = cu_exp(c, LLVMBuildFSub(c->b, ld(c, c->f32, X, off), m, ""));
        if (op == IR_OP_SOFTMAX) st(c, c->f32, Y, off, ex);
        cu_loop_acc_next(c, acc, LLVMBuildFAdd(c->b, acc, ex, ""));
        cu_loop_end(c, &l);
        LLVMValueRef total = cu_block_reduce(c, RED_SUM, acc, rw.block);
        LLVMValueRef inv = LLVMBuildFDiv(c->b, cf(c, 1.0), total, "");
        LLVMValueRef shift = LLVMBuildFAdd(c->b, m, cu_log(c, total), "");
        row_loop(c, &rw, &l, lv);
        off = LLVMBuildNSWAdd(c->b, base, LLVMBuildNSWMul(c->b, l.iv, ci(c, inner), ""), "");
        if (op == IR_OP_LOG_SOFTMAX) st(c, c->f32, Y, off, LLVMBuildFSub(c->b, ld(c, c->f32, X, off), shift, ""));
        else st(c, c->f32, Y, off, LLVMBuildFMul(c->b, ld(c, c->f32, Y, off), inv, ""));
        cu_loop_end(c, &l);
        return cu_kend(c, cu_fx_scale(c, outer, inner), NULL);
    }
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) return cu_unsupported(c, "with Mean/InvStdDev outputs");
    int64_t len = ir_shape_numel(r - (uint32_t)axis, d + axis);
    double eps = ir_node_attr_float(g, n, "epsilon", &found);
    IrValueId sc = ir_node_operand(g, n, 1), bi = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    for (int k = 0; k < 2; k++) {
        IrValueId v = k ? bi : sc;
        if (!v) continue;
        uint32_t vr;
        int64_t vd[IR_MAX_RANK];
        lower_value_shape(g, v, &vr, vd);
        if (ir_shape_numel(vr, vd) != len || lower_value_dtype(g, v) != IR_DTYPE_F32) return cu_unsupported(c, "with broadcast scale or bias");
    }
    if (!sc) return cu_unsupported(c, "without scale");
    if (len == 0 || outer == 0) return IR_OK;
    uint32_t slots[4] = {y, x, sc, bi ? bi : sc};
    if ((s = cu_kbegin(c, slots, 4, row_block(len), true))) return s;
    LLVMValueRef X = pslot(c, x), Y = pslot(c, y);
    row_enter(c, &rw, row_block(len));
    LLVMValueRef base = LLVMBuildNSWMul(c->b, rw.row, ci(c, len), "");
    LLVMValueRef nf = cf(c, (double)len);
    LLVMValueRef mean = LLVMBuildFDiv(c->b, row_fold(c, &rw, X, base, ci(c, len), 1, RED_SUM, NULL), nf, "");
    LLVMValueRef var = LLVMBuildFDiv(c->b, row_fold(c, &rw, X, base, ci(c, len), 1, 3, mean), nf, "");
    LLVMValueRef inv = LLVMBuildFDiv(c->b, cf(c, 1.0), cu_f32_intr(c, "llvm.sqrt", LLVMBuildFAdd(c->b, var, cf(c, eps), "")), "");
    row_loop(c, &rw, &l, ci(c, len));
    LLVMValueRef off = LLVMBuildNSWAdd(c->b, base, l.iv, "");
    LLVMValueRef t = LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, ld(c, c->f32, X, off), mean, ""), inv, "");
    t = LLVMBuildFMul(c->b, t, ld(c, c->f32, pslot(c, sc), l.iv), "");
    if (bi) t = LLVMBuildFAdd(c->b, t, ld(c, c->f32, pslot(c, bi), l.iv), "");
    st(c, c->f32, Y, off, t);
    cu_loop_end(c, &l);
    return cu_kend(c, outer, NULL);
}

/* [outer, len, inner] of a reduction over adjacent axes [first, end); with symbolic shapes the
 * inner dims static, outer a formula (CU_FX) and len -1 when a reduced dim is symbolic. */
static const char *reduce_geom(Cu *c, IrOp op, int64_t *outer, int64_t *len, int64_t *inner, uint32_t *first_out,
                               uint32_t *end_out) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0);
    LowerReduceShape rs;
    if (cu_static(g, x)) {
        const char *why = lower_reduce_shape(g, n, op, &rs);
        *outer = rs.outer, *len = rs.len, *inner = rs.inner;
        return why;
    }
    uint32_t r, na = 0;
    int64_t d[IR_MAX_RANK], axes[IR_MAX_RANK];
    if (!cu_value_shape(c, x, &r, d)) return "with an unknown dim";
    IrAttrValue av;
    if (op == IR_OP_GLOBAL_AVERAGE_POOL || op == IR_OP_GLOBAL_MAX_POOL) {
        for (uint32_t k = 2; k < r; k++) axes[na++] = k;
    } else if (ir_node_attr(g, n, "axes", &av) && av.kind == IR_ATTR_INTS && av.count <= IR_MAX_RANK) {
        for (uint32_t i = 0; i < av.count; i++) axes[na++] = av.ints[i];
    } else if (ir_node_num_operands(g, n) > 1 && ir_node_operand(g, n, 1) &&
               !lower_const_ints(g, ir_node_operand(g, n, 1), axes, &na, IR_MAX_RANK)) {
        return "with non-constant axes";
    }
    if (!na) { /* none: every axis */
        bool found;
        if (ir_node_attr_int(g, n, "noop_with_empty_axes", &found)) return "with noop_with_empty_axes";
        for (uint32_t k = 0; k < r; k++) axes[na++] = k;
    }
    if (!na) return "on a scalar";
    bool red[IR_MAX_RANK] = {0};
    uint32_t first = r, end = 0;
    for (uint32_t i = 0; i < na; i++) {
        int64_t a = ir_shape_axis(axes[i], r);
        if (a < 0 || a >= (int64_t)r || red[a]) return "with these axes";
        red[a] = true;
        first = (uint32_t)a < first ? (uint32_t)a : first;
        end = (uint32_t)a + 1 > end ? (uint32_t)a + 1 : end;
    }
    bool sym_len = false;
    for (uint32_t k = first; k < r; k++) {
        if (k < end && !red[k]) return "over non-adjacent axes";
        if (d[k] < 0 && k >= end) return "with symbolic dims after the reduced ones";
        sym_len |= d[k] < 0;
    }
    *inner = ir_shape_numel(r - end, d + end);
    *len = sym_len ? -1 : ir_shape_numel(end - first, d + first);
    *outer = cu_fx_prod(c, x, 0, first, 1);
    *first_out = first, *end_out = end;
    return *len ? NULL : "over empty axes";
}

static IrStatus gen_reduce(Cu *c, IrOp op) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (lower_value_dtype(g, x) != IR_DTYPE_F32) return cu_unsupported(c, "on non-f32 tensors");
    int64_t inner, outer, len;
    uint32_t first = 0, end = 0;
    const char *why = reduce_geom(c, op, &outer, &len, &inner, &first, &end);
    if (why) return cu_unsupported(c, why);
    if (outer == 0 || inner == 0) return IR_OK;
    uint32_t slots[2] = {y, x}, block = len < 0 ? 256 : row_block(len);
    IrStatus s = cu_kbegin(c, slots, 2, block, true);
    if (s) return s;
    Row rw;
    row_enter(c, &rw, block);
    CuDims xd; /* a symbolic reduced length: its value */
    if (len < 0 && !cu_dims_of(c, x, &xd)) return cu_unsupported(c, "with an unknown dim");
    LLVMValueRef lv = len < 0 ? cu_dims_prod(c, &xd, first, end) : ci(c, len);
    LLVMValueRef o = LLVMBuildUDiv(c->b, rw.row, ci(c, inner), ""), i = LLVMBuildURem(c->b, rw.row, ci(c, inner), "");
    LLVMValueRef base = LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, o, LLVMBuildNSWMul(c->b, lv, ci(c, inner), ""), ""), i, "");
    int kind = op == IR_OP_REDUCE_MAX ? RED_MAX : op == IR_OP_REDUCE_MIN ? RED_MIN : RED_SUM;
    LLVMValueRef v = row_fold(c, &rw, pslot(c, x), base, lv, inner, kind, NULL);
    if (op == IR_OP_REDUCE_MEAN || op == IR_OP_GLOBAL_AVERAGE_POOL)
        v = LLVMBuildFDiv(c->b, v, len < 0 ? LLVMBuildSIToFP(c->b, lv, c->f32, "") : cf(c, (double)len), "");
    LLVMBasicBlockRef w = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "w"), j = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "j");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, rw.tid, ci(c, 0), ""), w, j);
    LLVMPositionBuilderAtEnd(c->b, w);
    st(c, c->f32, pslot(c, y), rw.row, v);
    LLVMBuildBr(c->b, j);
    LLVMPositionBuilderAtEnd(c->b, j);
    return cu_kend(c, cu_fx_scale(c, outer, inner), NULL);
}


/* ---- rows of backend/cuda/cuda_ops.def ---- */

/* LayerNormalization in f32 with same-shape scale and bias and no statistics outputs: one block
 * per row; otherwise one thread per row in double (norm.c). */
static bool ln_block_rows(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0);
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) return false;
    uint32_t r, vr;
    int64_t d[IR_MAX_RANK], vd[IR_MAX_RANK];
    if (!cu_value_shape(c, x, &r, d)) return false;
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (!found) axis = -1;
    if (lower_value_dtype(g, x) != IR_DTYPE_F32 || !ir_shape_axis_checked(&axis, r)) return false;
    for (uint32_t k = (uint32_t)axis; k < r; k++)
        if (d[k] < 0) return false;
    for (uint32_t i = 1; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v) continue;
        lower_value_shape(g, v, &vr, vd);
        if (lower_value_dtype(g, v) != IR_DTYPE_F32 || ir_shape_numel(vr, vd) != ir_shape_numel(r - (uint32_t)axis, d + axis)) return false;
    }
    return true;
}

IrStatus cuda_emit_rows(Cu *c) {
    IrOp op = ir_node_op(c->g, c->node);
    if (op == IR_OP_LAYER_NORMALIZATION && !ln_block_rows(c))
        return cu_static(c->g, ir_node_operand(c->g, c->node, 0)) ? cu_gen_layernorm_typed(c)
                                                                  : cu_unsupported(c, "with symbolic shapes other than f32 rows");
    return gen_softmax_layernorm(c, op);
}
/* f32 reductions over adjacent axes: one block per row; the rest one thread per output (reduce.c) */
IrStatus cuda_emit_reduce(Cu *c) {
    IrOp op = ir_node_op(c->g, c->node);
    bool rows = op == IR_OP_REDUCE_MAX || op == IR_OP_REDUCE_MIN || op == IR_OP_REDUCE_SUM || op == IR_OP_REDUCE_MEAN;
    int64_t outer, len, inner;
    uint32_t first, end;
    if (op == IR_OP_GLOBAL_AVERAGE_POOL || (rows && lower_value_dtype(c->g, ir_node_operand(c->g, c->node, 0)) == IR_DTYPE_F32 &&
                                            !reduce_geom(c, op, &outer, &len, &inner, &first, &end)))
        return gen_reduce(c, op);
    if (!cu_static(c->g, ir_node_operand(c->g, c->node, 0))) return cu_unsupported(c, "with these axes and symbolic shapes");
    return cu_gen_reduce_any(c);
}
