/* Reductions of the LLVM CPU backend, one emitter for static and run-time shapes (llvm/dims.h):
 * ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare and GlobalAverage/MaxPool (f32
 * Sum/Mean/Max/Min over one block of adjacent axes as rows through cpu/codegen.c's row kernel,
 * the rest per output point with floats accumulated in f64 like the interpreter), and the rows
 * along one axis: ArgMax/ArgMin, Hardmax, CumSum. Axes are constants, or given at run time on
 * static shapes (one body per set of axes the compiled output shape allows).
 */
#include "backend/cpu/cpu.h"


/* Fails the run with msg when cond holds; in a kernel in parts only part 0 (or -1) reports. */
static void fail_once(LlvmEmit *e, LLVMValueRef cond, const char *msg) {
    if (e->part) cond = LLVMBuildAnd(e->b, cond, LLVMBuildICmp(e->b, LLVMIntSLE, e->part, lo_i64(e, 0), ""), "");
    lo_fail_if(e, cond, msg);
}

/* s with the dims where red[k] == which kept and the others the constant 1. */
static void dims_pick(LlvmEmit *e, const LlvmDims *s, const bool *red, bool which, LlvmDims *out) {
    out->rank = s->rank;
    for (uint32_t k = 0; k < s->rank; k++) {
        bool on = red[k] == which;
        out->dim[k] = on ? s->dim[k] : lo_i64(e, 1);
        out->cd[k] = on ? s->cd[k] : 1;
        out->ex[k] = on ? s->ex[k] : 0;
    }
}

/* The 2-D shape [outer, inner] of values over s's dims [0, first) and [end, rank). */
static void dims_outer_inner(LlvmEmit *e, const LlvmDims *s, uint32_t first, uint32_t end, LlvmDims *out) {
    *out = (LlvmDims){.rank = 2};
    out->dim[0] = llvm_dims_prod(e, s, 0, first);
    out->dim[1] = llvm_dims_prod(e, s, end, s->rank);
    out->cd[0] = llvm_dims_cprod(s, 0, first);
    out->cd[1] = llvm_dims_cprod(s, end, s->rank);
}

/* ---- which dims a reduction reduces ----------------------------------------------------------- */

/* red[k] for the dims of a rank-r input the node reduces (GlobalPools: all after N and C; else
 * the axes attribute or constant axes operand; none given: all, or none with
 * noop_with_empty_axes). *va: the axes operand when its values come at run time (red unset).
 * NULL, or why the axes cannot be compiled. */
static const char *reduce_axes(const IrGraph *g, IrNodeId n, uint32_t r, bool *red, IrValueId *va) {
    IrOp op = ir_node_op(g, n);
    int64_t axes[IR_MAX_RANK];
    uint32_t na = 0;
    bool found;
    IrAttrValue av;
    IrValueId vax = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    *va = 0;
    for (uint32_t k = 0; k < IR_MAX_RANK; k++) red[k] = false;
    if (op == IR_OP_GLOBAL_MAX_POOL || op == IR_OP_GLOBAL_AVERAGE_POOL) {
        if (r < 3) return "with rank < 3";
        for (uint32_t k = 2; k < r; k++) red[k] = true;
        return NULL;
    }
    if (ir_node_attr(g, n, "axes", &av) && av.kind == IR_ATTR_INTS) {
        if (av.count > IR_MAX_RANK) return "with these axes";
        for (uint32_t i = 0; i < av.count; i++) axes[na++] = av.ints[i];
    } else if (vax && lower_value_nbytes(g, vax) > 0 && !lower_const_ints(g, vax, axes, &na, IR_MAX_RANK)) {
        *va = vax;
        return NULL;
    }
    if (na == 0) {
        bool noop = ir_node_attr_int(g, n, "noop_with_empty_axes", &found) != 0;
        for (uint32_t k = 0; k < r; k++) red[k] = !noop;
    }
    for (uint32_t i = 0; i < na; i++) {
        int64_t a = ir_shape_axis(axes[i], r);
        if (a < 0 || a >= (int64_t)r) return "with these axes";
        if (red[a]) return "with a repeated axis"; /* the interpreter refuses it */
        red[a] = true;
    }
    return NULL;
}

/* ---- f32 Sum/Mean/Max/Min over adjacent axes: rows of cpu/codegen.c's row kernel ------------- */

/* One row per point (o, i) of [outer, inner]: x at o * len * inner + i, step inner; y at
 * o * inner + i. */
static void rows_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    LlvmRow r = *(const LlvmRow *)user;
    r.xoff = o[0];
    r.yoff = o[1];
    llvm_row_f32(e, &r);
}

/* The block [first, end) of reduced dims, when they are adjacent and not empty; false else. */
static bool adjacent_block(const LlvmDims *s, const bool *red, uint32_t *first, uint32_t *end) {
    *first = s->rank, *end = 0;
    for (uint32_t k = 0; k < s->rank; k++)
        if (red[k]) {
            if (*first == s->rank) *first = k;
            *end = k + 1;
        }
    if (*first == s->rank) return false;
    for (uint32_t k = *first; k < *end; k++)
        if (!red[k]) return false;
    return llvm_dims_cprod(s, *first, *end) != 0; /* a block known empty: the general kernel */
}

static void reduce_rows(LlvmEmit *e, IrOp op, const LlvmDims *s, uint32_t first, uint32_t end) {
    const IrGraph *g = e->g;
    LlvmRow c = {.op = op, .x = lo_buf(e, ir_node_operand(g, e->node, 0)), .y = lo_buf(e, ir_node_result(g, e->node, 0))};
    c.len = llvm_dims_prod(e, s, first, end);
    c.step = llvm_dims_prod(e, s, end, s->rank);
    LlvmDims oi;
    dims_outer_inner(e, s, first, end, &oi);
    LLVMValueRef st[2][IR_MAX_RANK] = {{LLVMBuildNSWMul(e->b, c.len, c.step, ""), lo_i64(e, 1)}, {c.step, lo_i64(e, 1)}};
    llvm_nest(e, &oi, 2, st, NULL, rows_body, &c);
}

/* ---- any reduction per output point ----------------------------------------------------------- */

typedef struct Red {
    IrOp op;
    IrDType dt;
    LLVMValueRef x, y, acc, mx, count; /* count: elements reduced into each output (i64) */
    LlvmDims rd;                       /* the reduced dims (the others 1) */
    LLVMValueRef in_st[1][IR_MAX_RANK]; /* x's strides */
    int pass;
} Red;

static bool red_float(const Red *c) { return lo_is_float(c->dt); }

/* Each reduction's step, acc a with element v in the accumulator type at (f64 for floats,
 * i64 for integers), and its initial accumulator; a reduction without a step keeps a, one
 * without an init starts at 0. */
typedef struct RedOp {
    LLVMValueRef (*step)(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, LLVMTypeRef at);
    LLVMValueRef (*init)(LlvmEmit *e, const Red *c, LLVMTypeRef at);
} RedOp;

static LLVMValueRef step_sum(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, LLVMTypeRef at) {
    (void)at;
    return red_float(c) ? LLVMBuildFAdd(e->b, a, v, "") : LLVMBuildAdd(e->b, a, v, "");
}
static LLVMValueRef step_prod(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, LLVMTypeRef at) {
    (void)at;
    return red_float(c) ? LLVMBuildFMul(e->b, a, v, "") : LLVMBuildMul(e->b, a, v, "");
}
static LLVMValueRef step_l1(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, LLVMTypeRef at) {
    LLVMBuilderRef b = e->b;
    return red_float(c) ? LLVMBuildFAdd(b, a, lo_intrinsic(e, "llvm.fabs", at, &v, 1), "")
                        : LLVMBuildAdd(b, a, LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, v, lo_i64(e, 0), ""), LLVMBuildNeg(b, v, ""), v, ""), "");
}
static LLVMValueRef step_sum_square(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, LLVMTypeRef at) {
    (void)at;
    LLVMBuilderRef b = e->b;
    return red_float(c) ? LLVMBuildFAdd(b, a, LLVMBuildFMul(b, v, v, ""), "") : LLVMBuildAdd(b, a, LLVMBuildMul(b, v, v, ""), "");
}
static LLVMValueRef step_log_sum(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, LLVMTypeRef at) {
    (void)c, (void)at;
    return LLVMBuildFAdd(e->b, a, v, "");
}
/* pass 0 finds the max, pass 1 sums exp(v - max) */
static LLVMValueRef step_log_sum_exp(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, LLVMTypeRef at) {
    LLVMBuilderRef b = e->b;
    if (c->pass == 0) return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, v, a, ""), v, a, "");
    LLVMValueRef t = LLVMBuildFSub(b, v, LLVMBuildLoad2(b, at, c->mx, ""), "");
    return LLVMBuildFAdd(b, a, lo_intrinsic(e, "llvm.exp", at, &t, 1), "");
}
/* Max and Min keep a NaN */
static LLVMValueRef step_extreme(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, bool mx) {
    LLVMBuilderRef b = e->b;
    if (red_float(c)) {
        LLVMValueRef k = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""),
                                     LLVMBuildFCmp(b, mx ? LLVMRealOGT : LLVMRealOLT, v, a, ""), "");
        return LLVMBuildSelect(b, k, v, a, "");
    }
    bool u = c->dt == IR_DTYPE_U64;
    return LLVMBuildSelect(b, LLVMBuildICmp(b, mx ? (u ? LLVMIntUGT : LLVMIntSGT) : (u ? LLVMIntULT : LLVMIntSLT), v, a, ""), v, a, "");
}
static LLVMValueRef step_max(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, LLVMTypeRef at) {
    (void)at;
    return step_extreme(e, c, a, v, true);
}
static LLVMValueRef step_min(LlvmEmit *e, const Red *c, LLVMValueRef a, LLVMValueRef v, LLVMTypeRef at) {
    (void)at;
    return step_extreme(e, c, a, v, false);
}

static LLVMValueRef init_prod(LlvmEmit *e, const Red *c, LLVMTypeRef at) {
    return red_float(c) ? LLVMConstReal(at, 1) : lo_i64(e, 1);
}
static LLVMValueRef init_max(LlvmEmit *e, const Red *c, LLVMTypeRef at) {
    return red_float(c) ? LLVMConstReal(at, -INFINITY) : lo_i64(e, c->dt == IR_DTYPE_U64 ? 0 : INT64_MIN);
}
static LLVMValueRef init_min(LlvmEmit *e, const Red *c, LLVMTypeRef at) {
    if (red_float(c)) return LLVMConstReal(at, INFINITY);
    return c->dt != IR_DTYPE_U64 ? lo_i64(e, INT64_MAX) : LLVMConstAllOnes(at);
}
static LLVMValueRef init_log_sum_exp(LlvmEmit *e, const Red *c, LLVMTypeRef at) {
    (void)e, (void)c;
    return LLVMConstReal(at, -INFINITY);
}

static const RedOp red_ops[IR_OP_COUNT] = {
    [IR_OP_REDUCE_SUM] = {step_sum, NULL},
    [IR_OP_REDUCE_MEAN] = {step_sum, NULL},
    [IR_OP_REDUCE_PROD] = {step_prod, init_prod},
    [IR_OP_REDUCE_L1] = {step_l1, NULL},
    [IR_OP_REDUCE_L2] = {step_sum_square, NULL},
    [IR_OP_REDUCE_SUM_SQUARE] = {step_sum_square, NULL},
    [IR_OP_REDUCE_LOG_SUM] = {step_log_sum, NULL},
    [IR_OP_REDUCE_LOG_SUM_EXP] = {step_log_sum_exp, init_log_sum_exp},
    [IR_OP_REDUCE_MAX] = {step_max, init_max},
    [IR_OP_REDUCE_MIN] = {step_min, init_min},
};

static void red_inner(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Red *c = user;
    LLVMBuilderRef b = e->b;
    LLVMValueRef v = lo_load(e, c->dt, c->x, o[0]);
    bool fl = red_float(c);
    LLVMTypeRef at = fl ? lo_f64_t(e) : lo_i64_t(e);
    if (fl && LLVMTypeOf(v) != at) v = LLVMBuildFPExt(b, v, at, "");
    if (!fl) v = c->dt == IR_DTYPE_U8 || c->dt == IR_DTYPE_U16 || c->dt == IR_DTYPE_U32 || c->dt == IR_DTYPE_BOOL
                     ? LLVMBuildZExt(b, v, at, "")
                     : (LLVMTypeOf(v) == at ? v : LLVMBuildSExt(b, v, at, ""));
    LLVMValueRef a = LLVMBuildLoad2(b, at, c->acc, "");
    LLVMValueRef r = red_ops[c->op].step ? red_ops[c->op].step(e, c, a, v, at) : a;
    LLVMBuildStore(b, r, c->acc);
}

/* One output point: o[0] its offset in y, o[1] its first element in x. */
static void red_outer(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Red *c = user;
    LLVMBuilderRef b = e->b;
    bool fl = red_float(c);
    LLVMTypeRef at = fl ? lo_f64_t(e) : lo_i64_t(e);
    LLVMValueRef init = red_ops[c->op].init ? red_ops[c->op].init(e, c, at) : LLVMConstNull(at);
    LLVMBuildStore(b, init, c->acc);
    /* the reduced dims from this output point's first input element o[1] */
    c->pass = 0;
    llvm_nest(e, &c->rd, 1, c->in_st, &o[1], red_inner, c);
    LLVMValueRef v = LLVMBuildLoad2(b, at, c->acc, "");
    if (c->op == IR_OP_REDUCE_LOG_SUM_EXP) {
        LLVMBuildStore(b, v, c->mx);
        LLVMBuildStore(b, LLVMConstReal(at, 0), c->acc);
        c->pass = 1;
        llvm_nest(e, &c->rd, 1, c->in_st, &o[1], red_inner, c);
        LLVMValueRef s = LLVMBuildLoad2(b, at, c->acc, "");
        LLVMValueRef lg = LLVMBuildFAdd(b, v, lo_intrinsic(e, "llvm.log", at, &s, 1), "");
        LLVMValueRef fin = LLVMBuildFCmp(b, LLVMRealONE, LLVMBuildFSub(b, v, v, ""), LLVMConstReal(at, 0), ""); /* v not finite */
        v = LLVMBuildSelect(b, fin, v, lg, "");
    } else if (c->op == IR_OP_REDUCE_L2) {
        v = fl ? lo_intrinsic(e, "llvm.sqrt", at, &v, 1) : v;
    } else if (c->op == IR_OP_REDUCE_LOG_SUM) {
        v = lo_intrinsic(e, "llvm.log", at, &v, 1);
    } else if (c->op == IR_OP_REDUCE_MEAN) {
        LLVMValueRef nz = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, c->count, lo_i64(e, 0), ""), lo_i64(e, 1), c->count, "");
        v = fl ? LLVMBuildFDiv(b, v, LLVMBuildSIToFP(b, c->count, at, ""), "") : LLVMBuildSDiv(b, v, nz, "");
    }
    if (c->op == IR_OP_REDUCE_L2 && !fl) {
        LLVMValueRef fv = LLVMBuildSIToFP(b, v, lo_f64_t(e), "");
        fv = lo_intrinsic(e, "llvm.sqrt", lo_f64_t(e), &fv, 1);
        v = LLVMBuildFPToSI(b, fv, at, "");
    }
    LLVMTypeRef ct = lo_comp_t(e, c->dt);
    if (fl && ct != at) v = LLVMBuildFPTrunc(b, v, ct, "");
    if (!fl && ct != at) v = LLVMBuildTrunc(b, v, ct, "");
    lo_store(e, c->dt, c->y, o[0], v);
}

/* The reduction of x (shape s) over the dims flagged in red. */
static void reduce_masked(LlvmEmit *e, const Red *proto, const LlvmDims *s, const bool *red) {
    Red c = *proto;
    LlvmDims od;
    dims_pick(e, s, red, false, &od);
    dims_pick(e, s, red, true, &c.rd);
    LLVMValueRef st[2][IR_MAX_RANK];
    llvm_dims_strides(e, &od, st[0]); /* y has x's dims with the reduced ones 1 (or dropped) */
    llvm_dims_strides(e, s, st[1]);
    for (uint32_t k = 0; k < s->rank; k++) c.in_st[0][k] = st[1][k];
    c.count = llvm_dims_prod(e, &c.rd, 0, c.rd.rank);
    llvm_nest(e, &od, 2, st, NULL, red_outer, &c);
}

/* Whether dim k of a and dim j of b are known equal. */
static bool same_dim(const LlvmDims *a, uint32_t k, const LlvmDims *b, uint32_t j) {
    return (a->cd[k] >= 0 && a->cd[k] == b->cd[j]) || (a->ex[k] && a->ex[k] == b->ex[j]);
}

/* Whether reducing the dims of mask m (bit k: dim k) of s gives the output shape o; a dim of o
 * that the axes decide (free[j]: computed from them before the kernel) fits either way. */
static bool reduce_mask_fits(const LlvmDims *s, uint32_t m, bool keep, const LlvmDims *o, const bool *free) {
    uint32_t j = 0;
    for (uint32_t k = 0; k < s->rank; k++) {
        bool rk = (m >> k) & 1;
        if (keep) {
            if (j >= o->rank || !(free[j] || (rk ? o->cd[j] == 1 : same_dim(s, k, o, j)))) return false;
            j++;
        } else if (!rk) {
            if (j >= o->rank || !(free[j] || same_dim(s, k, o, j))) return false;
            j++;
        }
    }
    return j == o->rank;
}

/* Axes given at run time (ReduceSum's second operand, ...): the output's shape leaves a few
 * possible sets of reduced dims (with keepdims one, up to dims of size 1); the kernel has one
 * body per set, and the run's axes choose it. Axes out of range, or naming a set that does not
 * give the compiled output shape, fail the run. */
static IrStatus reduce_runtime_axes(LlvmEmit *e, const Red *c, const LlvmDims *s, IrValueId va, bool keep) {
    const IrGraph *g = e->g;
    LlvmDims o, sa;
    if (!llvm_dims_of(e, ir_node_result(g, e->node, 0), &o) || !llvm_dims_of(e, va, &sa))
        return lo_unsupported(e, "with an unknown shape");
    IrDType at = lo_dtype(e, va);
    int64_t na = llvm_dims_cprod(&sa, 0, sa.rank);
    LowerValueDim vd[IR_SYM_PLAN_MAX];
    bool free[IR_MAX_RANK] = {0};
    uint32_t nv = lower_value_dim_syms(g, e->node, vd, IR_SYM_PLAN_MAX), n_free = 0;
    for (uint32_t i = 0; i < nv && i < IR_SYM_PLAN_MAX; i++)
        if (vd[i].result == 0 && vd[i].dim < IR_MAX_RANK) free[vd[i].dim] = true, n_free++;
    bool rt_count = na < 0 && n_free > 0 && sa.rank == 1; /* the count too is read at run time */
    if ((at != IR_DTYPE_I64 && at != IR_DTYPE_I32) || (!rt_count && (na < 1 || na > 64)) || s->rank > 16 || n_free > 6)
        return lo_unsupported(e, "with these axes given at run time");
    LLVMBuilderRef b = e->b;
    LLVMTypeRef i1 = LLVMInt1TypeInContext(e->ctx), i64 = lo_i64_t(e);
    LLVMValueRef badv = lo_var(e, i1, LLVMConstInt(i1, 0, 0)), maskv = lo_var(e, i64, lo_i64(e, 0));
    LlvmLoop l;
    if (rt_count) llvm_loop_begin_v(b, e->fn, &l, sa.dim[0]);
    for (int64_t i = 0; i < (rt_count ? 1 : na); i++) { /* out of range or repeated (the interpreter refuses both): bad */
        LLVMValueRef a = lo_load_int(e, at, lo_buf(e, va), rt_count ? l.iv : lo_i64(e, i)), mask = LLVMBuildLoad2(b, i64, maskv, "");
        a = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, a, lo_i64(e, 0), ""), LLVMBuildAdd(b, a, lo_i64(e, s->rank), ""), a, "");
        LLVMValueRef out = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, a, lo_i64(e, 0), ""),
                                       LLVMBuildICmp(b, LLVMIntSGE, a, lo_i64(e, s->rank), ""), "");
        a = LLVMBuildSelect(b, out, lo_i64(e, 0), a, "");
        LLVMValueRef bit = LLVMBuildShl(b, lo_i64(e, 1), a, "");
        LLVMValueRef seen = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, mask, bit, ""), lo_i64(e, 0), "");
        LLVMBuildStore(b, LLVMBuildOr(b, LLVMBuildLoad2(b, i1, badv, ""), LLVMBuildOr(b, out, seen, ""), ""), badv);
        LLVMBuildStore(b, LLVMBuildOr(b, mask, bit, ""), maskv);
    }
    if (rt_count) llvm_loop_end(b, e->fn, &l);
    LLVMValueRef bad = LLVMBuildLoad2(b, i1, badv, ""), mask = LLVMBuildLoad2(b, i64, maskv, "");
    if (rt_count) { /* no axes: all reduced, or none with noop_with_empty_axes */
        bool found;
        bool noop = ir_node_attr_int(g, e->node, "noop_with_empty_axes", &found) != 0;
        LLVMValueRef none = LLVMBuildICmp(b, LLVMIntEQ, sa.dim[0], lo_i64(e, 0), "");
        mask = LLVMBuildSelect(b, none, lo_i64(e, noop ? 0 : (int64_t)((1u << s->rank) - 1)), mask, "");
    }
    LLVMValueRef hit = lo_var(e, i1, LLVMConstInt(i1, 0, 0));
    uint32_t fits = 0;
    for (uint32_t m = 0; m < (1u << s->rank); m++) {
        if (!reduce_mask_fits(s, m, keep, &o, free)) continue;
        fits++;
        bool red[IR_MAX_RANK] = {0};
        for (uint32_t k = 0; k < s->rank; k++) red[k] = (m >> k) & 1;
        LLVMValueRef is = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, mask, lo_i64(e, m), ""), LLVMBuildNot(b, bad, ""), "");
        LLVMBasicBlockRef after = lo_if_begin(e, is);
        LLVMBuildStore(b, LLVMConstInt(i1, 1, 0), hit);
        e->part_used = false; /* one body runs: its nest takes the parts */
        reduce_masked(e, c, s, red);
        lo_if_end(e, after);
    }
    if (fits == 0) return lo_unsupported(e, "with these shapes");
    char msg[200];
    snprintf(msg, sizeof msg, "%s: the axes given at run time are out of range, repeated or do not give the compiled output shape",
             ir_op_name(ir_node_op(g, e->node)));
    fail_once(e, LLVMBuildNot(b, LLVMBuildLoad2(b, i1, hit, ""), ""), msg);
    return IR_OK;
}

/* Every reduction op and the GlobalPools: f32 Sum/Mean/Max/Min over one block of adjacent dims as
 * rows (vectorized f32), anything else per output point. */
IrStatus cpu_reduce(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrOp op = ir_node_op(g, n);
    Red c = {.op = op, .dt = lo_dtype(e, x)};
    LlvmDims s;
    if (!llvm_dims_of(e, x, &s)) return lo_unsupported(e, "with an unknown shape");
    if (!lo_store_t(e, c.dt) || c.dt == IR_DTYPE_BOOL) return lo_unsupported_dtype(e, c.dt);
    if ((op == IR_OP_REDUCE_LOG_SUM || op == IR_OP_REDUCE_LOG_SUM_EXP) && !red_float(&c)) return lo_unsupported_dtype(e, c.dt);
    bool red[IR_MAX_RANK], found;
    IrValueId va;
    const char *why = reduce_axes(g, n, s.rank, red, &va);
    if (why) return lo_unsupported(e, why);
    if (op == IR_OP_GLOBAL_MAX_POOL) c.op = IR_OP_REDUCE_MAX;
    if (op == IR_OP_GLOBAL_AVERAGE_POOL) c.op = IR_OP_REDUCE_MEAN;
    uint32_t first, end;
    bool rows_op = c.op == IR_OP_REDUCE_SUM || c.op == IR_OP_REDUCE_MEAN || c.op == IR_OP_REDUCE_MAX || c.op == IR_OP_REDUCE_MIN;
    if (!va && rows_op && c.dt == IR_DTYPE_F32 && lo_dtype(e, y) == IR_DTYPE_F32 && adjacent_block(&s, red, &first, &end)) {
        reduce_rows(e, c.op, &s, first, end);
        return IR_OK;
    }
    c.x = lo_buf(e, x);
    c.y = lo_buf(e, y);
    LLVMTypeRef at = red_float(&c) ? lo_f64_t(e) : lo_i64_t(e);
    c.acc = lo_var(e, at, LLVMConstNull(at));
    c.mx = lo_var(e, at, LLVMConstNull(at));
    if (va) {
        IrAttrValue av;
        bool keep = !ir_node_attr(g, n, "keepdims", &av) || ir_node_attr_int(g, n, "keepdims", &found) != 0;
        return reduce_runtime_axes(e, &c, &s, va, keep);
    }
    reduce_masked(e, &c, &s, red);
    return IR_OK;
}

/* ---- rows along one axis: CumSum, ArgMax/ArgMin, Hardmax --------------------------------------- */

typedef struct Row {
    IrOp op;
    IrDType dt;
    LLVMValueRef x, y, len, inner; /* the row: len elements, stride inner */
    bool exclusive, reverse, last;
} Row;

/* o[0]: the row's first element (x and y alike). */
static void cumsum_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Row *c = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef ct = lo_comp_t(e, c->dt);
    LLVMValueRef acc = lo_var(e, ct, LLVMConstNull(ct));
    LlvmLoop l;
    llvm_loop_n(e, &l, c->len);
    LLVMValueRef j = c->reverse ? LLVMBuildSub(b, LLVMBuildSub(b, c->len, lo_i64(e, 1), ""), l.iv, "") : l.iv;
    LLVMValueRef off = LLVMBuildAdd(b, o[0], LLVMBuildMul(b, j, c->inner, ""), "");
    LLVMValueRef v = lo_load(e, c->dt, c->x, off), a = LLVMBuildLoad2(b, ct, acc, "");
    bool fl = lo_is_float(c->dt);
    LLVMValueRef na = fl ? LLVMBuildFAdd(b, a, v, "") : LLVMBuildAdd(b, a, v, "");
    lo_store(e, c->dt, c->y, off, c->exclusive ? a : na);
    LLVMBuildStore(b, na, acc);
    llvm_loop_end(e->b, e->fn, &l);
}

/* o[0]: the row's first element of x, o[1] its index's place in y (Hardmax: y along the row). */
static void argext_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Row *c = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef ct = lo_comp_t(e, c->dt);
    bool fl = lo_is_float(c->dt), mx = c->op != IR_OP_ARG_MIN, uns = c->dt == IR_DTYPE_U8 || c->dt == IR_DTYPE_U16 ||
                                                                  c->dt == IR_DTYPE_U32 || c->dt == IR_DTYPE_U64;
    LLVMValueRef best = lo_var(e, ct, lo_load(e, c->dt, c->x, o[0]));
    LLVMValueRef bi = lo_var(e, lo_i64_t(e), lo_i64(e, 0));
    if (!LLVMIsAConstantInt(c->len) || LLVMConstIntGetSExtValue(c->len) > 1) {
        LlvmLoop l;
        llvm_loop_n(e, &l, LLVMBuildSub(b, c->len, lo_i64(e, 1), ""));
        LLVMValueRef j = LLVMBuildAdd(b, l.iv, lo_i64(e, 1), "");
        LLVMValueRef v = lo_load(e, c->dt, c->x, LLVMBuildAdd(b, o[0], LLVMBuildMul(b, j, c->inner, ""), ""));
        LLVMValueRef cur = LLVMBuildLoad2(b, ct, best, ""), better;
        if (fl) better = LLVMBuildFCmp(b, mx ? (c->last ? LLVMRealOGE : LLVMRealOGT) : (c->last ? LLVMRealOLE : LLVMRealOLT), v, cur, "");
        else
            better = LLVMBuildICmp(b,
                                   mx ? (c->last ? (uns ? LLVMIntUGE : LLVMIntSGE) : (uns ? LLVMIntUGT : LLVMIntSGT))
                                      : (c->last ? (uns ? LLVMIntULE : LLVMIntSLE) : (uns ? LLVMIntULT : LLVMIntSLT)),
                                   v, cur, "");
        LLVMBuildStore(b, LLVMBuildSelect(b, better, v, cur, ""), best);
        LLVMBuildStore(b, LLVMBuildSelect(b, better, j, LLVMBuildLoad2(b, lo_i64_t(e), bi, ""), ""), bi);
        llvm_loop_end(e->b, e->fn, &l);
    }
    if (c->op != IR_OP_HARDMAX) {
        lo_store(e, IR_DTYPE_I64, c->y, o[1], LLVMBuildLoad2(b, lo_i64_t(e), bi, ""));
        return;
    }
    /* Hardmax: 1 at the first largest element of the row, 0 elsewhere (x's dtype and shape) */
    LLVMValueRef at = LLVMBuildLoad2(b, lo_i64_t(e), bi, "");
    LlvmLoop l;
    llvm_loop_n(e, &l, c->len);
    LLVMValueRef off = LLVMBuildAdd(b, o[0], LLVMBuildMul(b, l.iv, c->inner, ""), "");
    LLVMValueRef hit = LLVMBuildICmp(b, LLVMIntEQ, l.iv, at, "");
    LLVMValueRef one = fl ? LLVMConstReal(ct, 1.0) : LLVMConstInt(ct, 1, 0), zero = LLVMConstNull(ct);
    lo_store(e, c->dt, c->y, off, LLVMBuildSelect(b, hit, one, zero, ""));
    llvm_loop_end(e->b, e->fn, &l);
}

/* The rows of x (shape s) along axis, one body call per [outer, inner] point. */
static void rows_along(LlvmEmit *e, Row *c, const LlvmDims *s, uint32_t axis, LlvmNestBody body) {
    LlvmDims oi;
    dims_outer_inner(e, s, axis, axis + 1, &oi);
    c->len = s->dim[axis];
    c->inner = oi.dim[1];
    LLVMValueRef st[2][IR_MAX_RANK] = {{LLVMBuildNSWMul(e->b, c->len, c->inner, ""), lo_i64(e, 1)}, {c->inner, lo_i64(e, 1)}};
    llvm_nest(e, &oi, 2, st, NULL, body, c);
}

/* CumSum along a known axis; with the axis given at run time, one body per axis, the run's axis
 * choosing. */
static IrStatus gen_cumsum(LlvmEmit *e, Row *c, const LlvmDims *s) {
    const IrGraph *g = e->g;
    IrValueId va = ir_node_operand(g, e->node, 1);
    bool found;
    int64_t ax[1];
    uint32_t na;
    c->exclusive = ir_node_attr_int(g, e->node, "exclusive", &found) != 0;
    c->reverse = ir_node_attr_int(g, e->node, "reverse", &found) != 0;
    if (s->rank == 0) return lo_unsupported(e, "on scalars");
    if (lower_const_ints(g, va, ax, &na, 1) && na == 1) {
        int64_t axis = ir_shape_axis(ax[0], s->rank);
        if (axis < 0 || axis >= (int64_t)s->rank) return lo_unsupported(e, "with this axis");
        rows_along(e, c, s, (uint32_t)axis, cumsum_body);
        return IR_OK;
    }
    IrDType at = lo_dtype(e, va);
    if (at != IR_DTYPE_I64 && at != IR_DTYPE_I32) return lo_unsupported(e, "with this axis");
    LLVMBuilderRef b = e->b;
    LLVMValueRef a = lo_load_int(e, at, lo_buf(e, va), lo_i64(e, 0));
    a = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, a, lo_i64(e, 0), ""), LLVMBuildAdd(b, a, lo_i64(e, s->rank), ""), a, "");
    LLVMValueRef none = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, a, lo_i64(e, 0), ""),
                                    LLVMBuildICmp(b, LLVMIntSGE, a, lo_i64(e, s->rank), ""), "");
    fail_once(e, none, "CumSum: the axis given at run time is out of range");
    for (uint32_t k = 0; k < s->rank; k++) {
        LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildICmp(b, LLVMIntEQ, a, lo_i64(e, k), ""));
        e->part_used = false; /* one body runs: its nest takes the parts */
        rows_along(e, c, s, k, cumsum_body);
        lo_if_end(e, after);
    }
    return IR_OK;
}

/* ArgMax, ArgMin, Hardmax and CumSum: a loop along one axis per [outer, inner] point. */
IrStatus cpu_reduce_along(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrOp op = ir_node_op(g, e->node);
    IrValueId x = ir_node_operand(g, e->node, 0), y = ir_node_result(g, e->node, 0);
    Row c = {.op = op, .dt = lo_dtype(e, x), .x = lo_buf(e, x), .y = lo_buf(e, y)};
    LlvmDims s;
    bool found;
    if (!llvm_dims_of(e, x, &s)) return lo_unsupported(e, "with an unknown shape");
    if (!lo_store_t(e, c.dt) || c.dt == IR_DTYPE_BOOL) return lo_unsupported_dtype(e, c.dt);
    if (op == IR_OP_CUM_SUM) return gen_cumsum(e, &c, &s);
    int64_t axis = ir_node_attr_int(g, e->node, "axis", &found);
    if (op == IR_OP_HARDMAX && !found) axis = -1;
    if (op != IR_OP_HARDMAX) {
        c.last = ir_node_attr_int(g, e->node, "select_last_index", &found) != 0;
        if (lo_dtype(e, y) != IR_DTYPE_I64) return lo_unsupported_dtype(e, lo_dtype(e, y));
    }
    if (s.rank == 0) return lo_unsupported(e, "on scalars");
    axis = ir_shape_axis(axis, s.rank);
    if (axis < 0 || axis >= (int64_t)s.rank) return lo_unsupported(e, "with this axis");
    LLVMValueRef len = s.dim[axis];
    if (s.cd[axis] == 0) { /* no rows to scan: nothing to do, unless there are rows to answer */
        int64_t outer = llvm_dims_cprod(&s, 0, (uint32_t)axis), inner = llvm_dims_cprod(&s, (uint32_t)axis + 1, s.rank);
        if (outer == 0 || inner == 0) return IR_OK;
        if (outer > 0 && inner > 0) return op == IR_OP_HARDMAX ? IR_OK : lo_unsupported(e, "over an empty axis");
    }
    if (s.cd[axis] > 0) {
        rows_along(e, &c, &s, (uint32_t)axis, argext_body);
        return IR_OK;
    }
    /* a row length known at run time: an empty row (with other elements) fails the run */
    LLVMBuilderRef b = e->b;
    LLVMValueRef empty = LLVMBuildICmp(b, LLVMIntEQ, len, lo_i64(e, 0), "");
    LLVMValueRef others = LLVMBuildICmp(b, LLVMIntSGT, LLVMBuildMul(b, llvm_dims_prod(e, &s, 0, (uint32_t)axis),
                                                                    llvm_dims_prod(e, &s, (uint32_t)axis + 1, s.rank), ""),
                                        lo_i64(e, 0), "");
    char msg[120];
    snprintf(msg, sizeof msg, "%s: the axis is empty at run time", ir_op_name(op));
    if (op != IR_OP_HARDMAX) fail_once(e, LLVMBuildAnd(b, empty, others, ""), msg);
    LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildNot(b, empty, ""));
    rows_along(e, &c, &s, (uint32_t)axis, argext_body);
    lo_if_end(e, after);
    return IR_OK;
}
