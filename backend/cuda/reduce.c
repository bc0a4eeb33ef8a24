/* Reductions over any axes on every typed dtype, one thread per output element walking its
 * reduced elements in input order (the interpreter's order): the Reduce* family (floats and the
 * float-valued reductions of integers accumulate in double, integer sums in i64 wrap-around),
 * ArgMax/ArgMin (NaN first wins, select_last_index), Hardmax and CumSum one thread per line.
 * Adjacent-axis f32 reductions keep the block-per-row kernels of rows.c.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <string.h>

static LLVMValueRef get(Cu *c, LLVMTypeRef t, LLVMValueRef v) { return LLVMBuildLoad2(c->b, t, v, ""); }
static void set(Cu *c, LLVMValueRef v, LLVMValueRef x) { LLVMBuildStore(c->b, x, v); }
static LLVMValueRef d(Cu *c, double v) { return LLVMConstReal(c->f64, v); }
static LLVMValueRef i64c(Cu *c, int64_t v) { return LLVMConstInt(c->i64, (unsigned long long)v, 1); }

/* Offset of reduced element r (flat over the reduced dims, row-major) from the output's base. */
static LLVMValueRef red_off(Cu *c, uint32_t nr, const int64_t *rd, const int64_t *rs, LLVMValueRef r) {
    LLVMValueRef off = ci(c, 0), rem = r;
    for (uint32_t k = nr; k-- > 0;) {
        if (rd[k] == 1) continue;
        LLVMValueRef coord = k == 0 ? rem : LLVMBuildURem(c->b, rem, ci(c, rd[k]), "");
        if (k > 0) rem = LLVMBuildUDiv(c->b, rem, ci(c, rd[k]), "");
        off = LLVMBuildAdd(c->b, off, LLVMBuildMul(c->b, coord, ci(c, rs[k]), ""), "");
    }
    return off;
}

typedef struct RedCtx {
    IrOp op;
    IrValueId x, y;
    IrDType xt, yt;
    bool dbl, uns;
    uint32_t nr;
    int64_t rd[IR_MAX_RANK], rs[IR_MAX_RANK], count;
} RedCtx;

/* Each reduction's step on doubles (acc, v) and on 64-bit integers (NULL: a sum), its initial
 * accumulator (double; signed; unsigned), whether a first pass finds the maximum (mx), whether
 * integers accumulate in double, and its
 * finish on the accumulated r (NULL: r itself); keyed by op id in red_ops. */
typedef struct RedOp {
    LLVMValueRef (*step_f)(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v);
    LLVMValueRef (*step_i)(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v);
    double init_f;
    int64_t init_s, init_u;
    bool max_pass, dbl; /* dbl: accumulates in double on integers too */
    LLVMValueRef (*finish)(Cu *c, const RedCtx *p, LLVMValueRef r, LLVMValueRef mx);
} RedOp;

static LLVMValueRef f_l1(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    (void)p;
    return LLVMBuildFAdd(c->b, acc, cu_intr(c, "llvm.fabs", &c->f64, 1, &v, 1), "");
}
static LLVMValueRef f_sum_square(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    (void)p;
    return LLVMBuildFAdd(c->b, acc, LLVMBuildFMul(c->b, v, v, ""), "");
}
static LLVMValueRef f_prod(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    (void)p;
    return LLVMBuildFMul(c->b, acc, v, "");
}
/* Max and Min keep a NaN */
static LLVMValueRef f_extreme(Cu *c, LLVMValueRef acc, LLVMValueRef v, bool mx) {
    LLVMValueRef k = LLVMBuildOr(c->b, fcmp(c, LLVMRealUNO, acc, acc), fcmp(c, mx ? LLVMRealOGE : LLVMRealOLE, acc, v), "");
    return sel(c, k, acc, v);
}
static LLVMValueRef f_max(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    (void)p;
    return f_extreme(c, acc, v, true);
}
static LLVMValueRef f_min(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    (void)p;
    return f_extreme(c, acc, v, false);
}
static LLVMValueRef i_l1(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    LLVMBuilderRef b = c->b;
    return LLVMBuildAdd(b, acc, p->uns ? v : sel(c, LLVMBuildICmp(b, LLVMIntSLT, v, i64c(c, 0), ""), LLVMBuildNeg(b, v, ""), v), "");
}
static LLVMValueRef i_sum_square(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    (void)p;
    return LLVMBuildAdd(c->b, acc, LLVMBuildMul(c->b, v, v, ""), "");
}
static LLVMValueRef i_prod(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    (void)p;
    return LLVMBuildMul(c->b, acc, v, "");
}
static LLVMValueRef i_max(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    return sel(c, LLVMBuildICmp(c->b, p->uns ? LLVMIntUGT : LLVMIntSGT, v, acc, ""), v, acc);
}
static LLVMValueRef i_min(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    return sel(c, LLVMBuildICmp(c->b, p->uns ? LLVMIntULT : LLVMIntSLT, v, acc, ""), v, acc);
}
static LLVMValueRef fin_l2(Cu *c, const RedCtx *p, LLVMValueRef r, LLVMValueRef mx) {
    (void)p, (void)mx;
    return cu_intr(c, "llvm.sqrt", &c->f64, 1, &r, 1);
}
static LLVMValueRef fin_log_sum(Cu *c, const RedCtx *p, LLVMValueRef r, LLVMValueRef mx) {
    (void)p, (void)mx;
    return cu_libm1(c, "__nv_log", r);
}
static LLVMValueRef fin_mean(Cu *c, const RedCtx *p, LLVMValueRef r, LLVMValueRef mx) {
    (void)mx;
    return LLVMBuildFDiv(c->b, r, d(c, (double)p->count), "");
}
static LLVMValueRef fin_log_sum_exp(Cu *c, const RedCtx *p, LLVMValueRef r, LLVMValueRef mx) {
    (void)p;
    LLVMValueRef fin = fcmp(c, LLVMRealOLT, cu_intr(c, "llvm.fabs", &c->f64, 1, &mx, 1), d(c, INFINITY));
    return sel(c, fin, LLVMBuildFAdd(c->b, mx, cu_libm1(c, "__nv_log", r), ""), mx);
}

static const RedOp red_ops[IR_OP_COUNT] = {
    [IR_OP_REDUCE_L1] = {.step_f = f_l1, .step_i = i_l1},
    [IR_OP_REDUCE_L2] = {.step_f = f_sum_square, .dbl = true, .finish = fin_l2},
    [IR_OP_REDUCE_SUM_SQUARE] = {.step_f = f_sum_square, .step_i = i_sum_square},
    [IR_OP_REDUCE_PROD] = {.step_f = f_prod, .step_i = i_prod, .init_f = 1.0, .init_s = 1, .init_u = 1},
    [IR_OP_REDUCE_MAX] = {.step_f = f_max, .step_i = i_max, .init_f = -INFINITY, .init_s = INT64_MIN, .init_u = 0},
    [IR_OP_REDUCE_MIN] = {.step_f = f_min, .step_i = i_min, .init_f = INFINITY, .init_s = INT64_MAX, .init_u = -1},
    [IR_OP_REDUCE_LOG_SUM] = {.dbl = true, .finish = fin_log_sum},
    [IR_OP_REDUCE_MEAN] = {.dbl = true, .finish = fin_mean},
    [IR_OP_REDUCE_LOG_SUM_EXP] = {.max_pass = true, .dbl = true, .finish = fin_log_sum_exp},
};

static LLVMValueRef red_step(Cu *c, const RedCtx *p, LLVMValueRef acc, LLVMValueRef v) {
    const RedOp *ro = &red_ops[p->op];
    if (p->dbl) return ro->step_f ? ro->step_f(c, p, acc, v) : LLVMBuildFAdd(c->b, acc, v, "");
    return ro->step_i ? ro->step_i(c, p, acc, v) : LLVMBuildAdd(c->b, acc, v, "");
}

static LLVMValueRef red_load(Cu *c, const RedCtx *p, LLVMValueRef base, LLVMValueRef r) {
    LLVMValueRef v = cu_load_typed(c, p->xt, pslot(c, p->x), LLVMBuildAdd(c->b, base, red_off(c, p->nr, p->rd, p->rs, r), ""));
    return p->dbl && cu_kind(p->xt) != CU_KF ? cu_convert(c, v, p->xt, IR_DTYPE_F64) : v;
}

static void red_body(Cu *c, LLVMValueRef *o, void *user) {
    RedCtx *p = user;
    LLVMBuilderRef b = c->b;
    const RedOp *ro = &red_ops[p->op];
    LLVMValueRef init, acc, mx = NULL;
    Loop l;
    if (ro->max_pass) { /* pass 1: the maximum, so exp never overflows */
        cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->count), ci(c, 1), d(c, -INFINITY), &acc);
        LLVMValueRef v = red_load(c, p, o[1], l.iv);
        LLVMValueRef k = LLVMBuildOr(b, fcmp(c, LLVMRealUNO, acc, acc), fcmp(c, LLVMRealOGE, acc, v), "");
        cu_loop_acc_next(c, acc, sel(c, k, acc, v));
        cu_loop_end(c, &l);
        mx = acc;
    }
    init = p->dbl ? d(c, ro->init_f) : i64c(c, p->uns ? ro->init_u : ro->init_s);
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->count), ci(c, 1), init, &acc);
    LLVMValueRef v = red_load(c, p, o[1], l.iv);
    if (mx) {
        LLVMValueRef e = cu_libm1(c, "__nv_exp", LLVMBuildFSub(b, v, mx, ""));
        LLVMValueRef fin = fcmp(c, LLVMRealOLT, cu_intr(c, "llvm.fabs", &c->f64, 1, &mx, 1), d(c, INFINITY));
        cu_loop_acc_next(c, acc, sel(c, fin, LLVMBuildFAdd(b, acc, e, ""), acc));
    } else {
        cu_loop_acc_next(c, acc, red_step(c, p, acc, v));
    }
    cu_loop_end(c, &l);
    LLVMValueRef r = ro->finish ? ro->finish(c, p, acc, mx) : acc;
    if (p->dbl && cu_kind(p->yt) != CU_KF) r = cu_convert(c, r, IR_DTYPE_F64, p->yt);
    cu_store_typed(c, p->yt, pslot(c, p->y), o[0], r);
}

/* Axes given at run time: the static output shape tells which dims are reduced, up to dims of
 * size 1 (reducing those or not gives the same elements in the same order). */
static const char *mask_from_shapes(const IrGraph *g, IrNodeId n, IrValueId axes, uint32_t r, bool *mask, bool *none) {
    uint32_t orank, xr;
    int64_t od[IR_MAX_RANK], d[IR_MAX_RANK];
    lower_value_shape(g, ir_node_operand(g, n, 0), &xr, d);
    lower_value_shape(g, ir_node_result(g, n, 0), &orank, od);
    *none = lower_value_nbytes(g, axes) == 0;
    bool found;
    if (*none) {
        bool noop = ir_node_attr_int(g, n, "noop_with_empty_axes", &found) != 0;
        for (uint32_t k = 0; k < r; k++) mask[k] = !noop;
        return NULL;
    }
    if (ir_node_attr_int(g, n, "keepdims", &found) != 0 || !found) {
        if (orank != r) return "with these shapes";
        for (uint32_t k = 0; k < r; k++) mask[k] = od[k] != d[k];
        return NULL;
    }
    bool have = false;
    for (uint32_t m = 0; m < (1u << r); m++) {
        uint32_t kept = 0;
        bool ok = true;
        for (uint32_t k = 0; k < r && ok; k++)
            if (!(m >> k & 1)) ok = kept < orank && od[kept++] == d[k];
        if (!ok || kept != orank) continue;
        bool cand[IR_MAX_RANK];
        for (uint32_t k = 0; k < r; k++) cand[k] = m >> k & 1;
        if (have) {
            for (uint32_t k = 0; k < r; k++)
                if (cand[k] != mask[k] && d[k] != 1) return "with run-time axes the output shape does not decide";
        } else {
            memcpy(mask, cand, r * sizeof *mask);
            have = true;
        }
    }
    return have ? NULL : "with these shapes";
}

/* The reduced axes of a Reduce* node (attribute axes, or a constant operand 1); NULL or why not. */
static const char *reduce_mask(const IrGraph *g, IrNodeId n, uint32_t rank, bool *mask, bool *none) {
    int64_t axes[IR_MAX_RANK];
    uint32_t nax = 0;
    IrAttrValue av;
    IrValueId av1 = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    if (av1 && !lower_const_ints(g, av1, axes, &nax, IR_MAX_RANK)) return mask_from_shapes(g, n, av1, rank, mask, none);
    if (!av1 && ir_node_attr(g, n, "axes", &av)) {
        if (av.count > IR_MAX_RANK) return "with these axes";
        for (uint32_t i = 0; i < av.count; i++) axes[nax++] = av.ints[i];
    }
    *none = nax == 0;
    for (uint32_t k = 0; k < rank; k++) mask[k] = nax == 0;
    for (uint32_t i = 0; i < nax; i++) {
        int64_t a = axes[i];
        if (!ir_shape_axis_checked(&a, rank)) return "with an axis out of range";
        mask[a] = true;
    }
    return NULL;
}

IrStatus cu_gen_reduce_any(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    RedCtx p = {.op = ir_node_op(g, n), .x = ir_node_operand(g, n, 0), .y = ir_node_result(g, n, 0)};
    p.xt = lower_value_dtype(g, p.x);
    p.yt = lower_value_dtype(g, p.y);
    if (!cu_typed_ok(p.xt) || p.xt == IR_DTYPE_BOOL) return cu_unsupported_dtype(c, p.xt);
    uint32_t r;
    int64_t dd[IR_MAX_RANK], xs[IR_MAX_RANK];
    lower_value_shape(g, p.x, &r, dd);
    ir_shape_strides(r, dd, xs);
    bool mask[IR_MAX_RANK], none;
    const char *why = p.op == IR_OP_GLOBAL_MAX_POOL ? NULL : reduce_mask(g, n, r, mask, &none);
    if (why) return cu_unsupported(c, why);
    if (p.op == IR_OP_GLOBAL_MAX_POOL) { /* the spatial dims */
        if (r < 2) return cu_unsupported(c, "with rank < 2");
        for (uint32_t k = 0; k < r; k++) mask[k] = k >= 2;
        none = false;
        p.op = IR_OP_REDUCE_MAX;
    }
    bool found;
    if (none && ir_node_attr_int(g, n, "noop_with_empty_axes", &found) != 0) {
        for (uint32_t k = 0; k < r; k++) mask[k] = false;
    }
    p.dbl = cu_kind(p.xt) == CU_KF || red_ops[p.op].dbl;
    p.uns = cu_kind(p.xt) == CU_KU;
    /* iteration space: the kept dims; y contiguous over them, x at its strides */
    uint32_t kr = 0;
    int64_t kd[IR_MAX_RANK], s[2][IR_MAX_RANK];
    p.count = 1;
    for (uint32_t k = 0; k < r; k++) {
        if (mask[k]) {
            p.rd[p.nr] = dd[k];
            p.rs[p.nr++] = xs[k];
            p.count *= dd[k];
        } else {
            kd[kr] = dd[k];
            s[1][kr++] = xs[k];
        }
    }
    ir_shape_strides(kr, kd, s[0]);
    int64_t total = ir_shape_numel(kr, kd);
    if (!total) return IR_OK;
    uint32_t slots[2] = {p.y, p.x};
    IrStatus st_ = cu_kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, kr, kd, 2, s, NULL, red_body, &p);
    return cu_kend(c, total, NULL);
}

/* ---- ArgMax / ArgMin / Hardmax / CumSum: one thread per line along one axis ------------------- */

typedef struct LineCtx {
    IrOp op;
    IrValueId x, y;
    IrDType xt, yt;
    int64_t n, inner;
    bool is_max, last, excl, rev;
} LineCtx;

/* +1 when v is preferred over the best b so far, 0 on a tie, -1 otherwise (as the interpreter) */
static LLVMValueRef arg_pref(Cu *c, const LineCtx *p, LLVMValueRef v, LLVMValueRef bst) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef one = c32(c, 1), zero = c32(c, 0), m1 = c32(c, -1), better, eq;
    if (cu_kind(p->xt) == CU_KF) {
        better = fcmp(c, p->is_max ? LLVMRealOGT : LLVMRealOLT, v, bst);
        eq = fcmp(c, LLVMRealOEQ, v, bst);
        LLVMValueRef r = sel(c, eq, zero, sel(c, better, one, m1));
        r = sel(c, fcmp(c, LLVMRealUNO, v, v), one, r);
        return sel(c, fcmp(c, LLVMRealUNO, bst, bst), m1, r);
    }
    bool u = cu_kind(p->xt) == CU_KU;
    better = LLVMBuildICmp(b, p->is_max ? (u ? LLVMIntUGT : LLVMIntSGT) : (u ? LLVMIntULT : LLVMIntSLT), v, bst, "");
    eq = LLVMBuildICmp(b, LLVMIntEQ, v, bst, "");
    return sel(c, eq, zero, sel(c, better, one, m1));
}

static void line_body(Cu *c, LLVMValueRef *o, void *user) {
    LineCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef base = o[0], X = pslot(c, p->x), Y = pslot(c, p->y);
    LLVMValueRef step = ci(c, p->inner);
    Loop l;
    if (p->op == IR_OP_ARG_MAX || p->op == IR_OP_ARG_MIN || p->op == IR_OP_HARDMAX) {
        LLVMTypeRef vt = cu_value_type(c, p->xt);
        bool hm = p->op == IR_OP_HARDMAX; /* the first v > max so far from -inf, as the interpreter */
        LLVMValueRef best = cu_var(c, c->it, ci(c, 0)), bv = cu_var(c, vt, hm ? d(c, -INFINITY) : cu_load_typed(c, p->xt, X, base));
        cu_loop_begin(c, &l, ci(c, hm ? 0 : 1), ci(c, p->n), ci(c, 1));
        LLVMValueRef v = cu_load_typed(c, p->xt, X, LLVMBuildAdd(b, base, LLVMBuildMul(b, l.iv, step, ""), ""));
        LLVMValueRef take;
        if (hm) take = fcmp(c, LLVMRealOGT, v, get(c, vt, bv));
        else take = LLVMBuildICmp(b, p->last ? LLVMIntSGE : LLVMIntSGT, arg_pref(c, p, v, get(c, vt, bv)), c32(c, 0), "");
        set(c, best, sel(c, take, l.iv, get(c, c->it, best)));
        set(c, bv, sel(c, take, v, get(c, vt, bv)));
        cu_loop_end(c, &l);
        if (p->op != IR_OP_HARDMAX) {
            cu_store_typed(c, p->yt, Y, o[1], LLVMBuildSExt(b, get(c, c->it, best), c->i64, ""));
            return;
        }
        cu_loop_begin(c, &l, ci(c, 0), ci(c, p->n), ci(c, 1));
        LLVMValueRef hit = LLVMBuildICmp(b, LLVMIntEQ, l.iv, get(c, c->it, best), "");
        cu_store_typed(c, p->yt, Y, LLVMBuildAdd(b, base, LLVMBuildMul(b, l.iv, step, ""), ""), sel(c, hit, d(c, 1.0), d(c, 0.0)));
        cu_loop_end(c, &l);
        return;
    }
    /* CumSum */
    bool fl = cu_kind(p->xt) == CU_KF;
    LLVMValueRef acc;
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->n), ci(c, 1), fl ? d(c, 0.0) : i64c(c, 0), &acc);
    LLVMValueRef k = p->rev ? LLVMBuildSub(b, ci(c, p->n - 1), l.iv, "") : l.iv;
    LLVMValueRef off = LLVMBuildAdd(b, base, LLVMBuildMul(b, k, step, ""), "");
    LLVMValueRef v = cu_load_typed(c, p->xt, X, off);
    LLVMValueRef next = fl ? LLVMBuildFAdd(b, acc, v, "") : LLVMBuildAdd(b, acc, v, "");
    cu_store_typed(c, p->yt, Y, off, p->excl ? acc : next);
    cu_loop_acc_next(c, acc, next);
    cu_loop_end(c, &l);
}

IrStatus cu_gen_line(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    LineCtx p = {.op = ir_node_op(g, n), .x = ir_node_operand(g, n, 0), .y = ir_node_result(g, n, 0)};
    p.xt = lower_value_dtype(g, p.x);
    p.yt = lower_value_dtype(g, p.y);
    if (!cu_typed_ok(p.xt) || p.xt == IR_DTYPE_BOOL || !cu_typed_ok(p.yt)) return cu_unsupported_dtype(c, p.xt);
    if (p.op == IR_OP_HARDMAX && cu_kind(p.xt) != CU_KF) return cu_unsupported_dtype(c, p.xt);
    uint32_t r;
    int64_t dd[IR_MAX_RANK];
    lower_value_shape(g, p.x, &r, dd);
    bool found;
    int64_t axis;
    if (p.op == IR_OP_CUM_SUM) {
        uint32_t na = 0;
        if (!lower_const_ints(g, ir_node_operand(g, n, 1), &axis, &na, 1) || na != 1) return cu_gen_cumsum_rt(c);
        p.excl = ir_node_attr_int(g, n, "exclusive", &found) != 0;
        p.rev = ir_node_attr_int(g, n, "reverse", &found) != 0;
    } else {
        axis = ir_node_attr_int(g, n, "axis", &found);
        if (!found) axis = p.op == IR_OP_HARDMAX ? -1 : 0;
        p.is_max = p.op == IR_OP_ARG_MAX;
        p.last = ir_node_attr_int(g, n, "select_last_index", &found) != 0;
    }
    if (r == 0 || !ir_shape_axis_checked(&axis, r)) return cu_unsupported(c, "with this axis");
    int64_t outer;
    ir_shape_split(r, dd, (uint32_t)axis, &outer, &p.n, &p.inner);
    int64_t lines = outer * p.inner;
    if (!lines) return IR_OK;
    if (p.n == 0) return p.op == IR_OP_CUM_SUM || p.op == IR_OP_HARDMAX ? IR_OK : cu_unsupported(c, "over an empty axis");
    /* lines (o, i): x base o*n*inner + i, the arg output o*inner + i */
    int64_t ld2[2] = {outer, p.inner}, s[2][IR_MAX_RANK] = {{p.n * p.inner, 1}, {p.inner, 1}};
    uint32_t slots[2] = {p.y, p.x};
    IrStatus st_ = cu_kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 2, ld2, 2, s, NULL, line_body, &p);
    return cu_kend(c, lines, NULL);
}

IrStatus cuda_emit_line(Cu *c) { return cu_gen_line(c); }

/* ---- TopK: one thread per line selects the k first elements of the sorted order, one pass
 * each (value, then the lower index on ties; NaN above every number), as the interpreter's
 * stable sort orders them ----------------------------------------------------------------------- */

typedef struct TkCtx {
    IrValueId x, y, yi;
    IrDType xt, yt;
    int64_t n, k, inner;
    bool largest;
} TkCtx;

static LLVMValueRef tk_gt(Cu *c, CuKind k, LLVMValueRef a, LLVMValueRef b) {
    if (k == CU_KF)
        return LLVMBuildOr(c->b, LLVMBuildAnd(c->b, fcmp(c, LLVMRealUNO, a, a), fcmp(c, LLVMRealORD, b, b), ""), fcmp(c, LLVMRealOGT, a, b), "");
    return LLVMBuildICmp(c->b, k == CU_KU ? LLVMIntUGT : LLVMIntSGT, a, b, "");
}
static LLVMValueRef tk_eq(Cu *c, CuKind k, LLVMValueRef a, LLVMValueRef b) {
    if (k == CU_KF)
        return LLVMBuildOr(c->b, LLVMBuildAnd(c->b, fcmp(c, LLVMRealUNO, a, a), fcmp(c, LLVMRealUNO, b, b), ""), fcmp(c, LLVMRealOEQ, a, b), "");
    return LLVMBuildICmp(c->b, LLVMIntEQ, a, b, "");
}
/* whether (va, ia) comes before (vb, ib) in the output order */
static LLVMValueRef tk_before(Cu *c, const TkCtx *p, LLVMValueRef va, LLVMValueRef ia, LLVMValueRef vb, LLVMValueRef ib) {
    CuKind k = cu_kind(p->xt);
    LLVMValueRef first = p->largest ? tk_gt(c, k, va, vb) : tk_gt(c, k, vb, va);
    LLVMValueRef tie = LLVMBuildAnd(c->b, tk_eq(c, k, va, vb), LLVMBuildICmp(c->b, LLVMIntSLT, ia, ib, ""), "");
    return LLVMBuildOr(c->b, first, tie, "");
}

static void tk_body(Cu *c, LLVMValueRef *o, void *user) {
    TkCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMTypeRef vt = cu_value_type(c, p->xt);
    LLVMValueRef X = pslot(c, p->x), step = ci(c, p->inner);
    LLVMValueRef pv = cu_var(c, vt, LLVMConstNull(vt)), pi = cu_var(c, c->it, ci(c, -1));
    LLVMValueRef bv = cu_var(c, vt, LLVMConstNull(vt)), bi = cu_var(c, c->it, ci(c, -1));
    Loop lj, le;
    cu_loop_begin(c, &lj, ci(c, 0), ci(c, p->k), ci(c, 1));
    set(c, bi, ci(c, -1));
    cu_loop_begin(c, &le, ci(c, 0), ci(c, p->n), ci(c, 1));
    LLVMValueRef v = cu_load_typed(c, p->xt, X, LLVMBuildAdd(b, o[0], LLVMBuildMul(b, le.iv, step, ""), ""));
    LLVMValueRef after = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, get(c, c->it, pi), ci(c, 0), ""),
                                     tk_before(c, p, get(c, vt, pv), get(c, c->it, pi), v, le.iv), "");
    LLVMValueRef better = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, get(c, c->it, bi), ci(c, 0), ""),
                                      tk_before(c, p, v, le.iv, get(c, vt, bv), get(c, c->it, bi)), "");
    LLVMValueRef take = LLVMBuildAnd(b, after, better, "");
    set(c, bv, sel(c, take, v, get(c, vt, bv)));
    set(c, bi, sel(c, take, le.iv, get(c, c->it, bi)));
    cu_loop_end(c, &le);
    set(c, pv, get(c, vt, bv));
    set(c, pi, get(c, c->it, bi));
    LLVMValueRef out = LLVMBuildAdd(b, o[1], LLVMBuildMul(b, lj.iv, step, ""), "");
    cu_store_typed(c, p->yt, pslot(c, p->y), out, get(c, vt, bv));
    if (p->yi) cu_store_typed(c, IR_DTYPE_I64, pslot(c, p->yi), out, LLVMBuildSExt(b, get(c, c->it, bi), c->i64, ""));
    cu_loop_end(c, &lj);
}

IrStatus cuda_emit_topk(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    TkCtx p = {.x = ir_node_operand(g, n, 0), .y = ir_node_result(g, n, 0)};
    p.yi = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    p.xt = lower_value_dtype(g, p.x);
    p.yt = lower_value_dtype(g, p.y);
    if (!cu_typed_ok(p.xt) || p.xt == IR_DTYPE_BOOL) return cu_unsupported_dtype(c, p.xt);
    if (p.yi && lower_value_dtype(g, p.yi) != IR_DTYPE_I64) return cu_unsupported(c, "with Indices other than i64");
    uint32_t r, ry;
    int64_t d[IR_MAX_RANK], yd[IR_MAX_RANK];
    lower_value_shape(g, p.x, &r, d);
    lower_value_shape(g, p.y, &ry, yd);
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (!found) axis = -1;
    if (r == 0 || ry != r || !ir_shape_axis_checked(&axis, r)) return cu_unsupported(c, "with this axis");
    p.largest = ir_node_attr_int(g, n, "largest", &found) != 0 || !found;
    int64_t outer;
    ir_shape_split(r, d, (uint32_t)axis, &outer, &p.n, &p.inner);
    p.k = yd[axis];
    int64_t lines = outer * p.inner;
    if (!lines || !p.k) return IR_OK;
    int64_t ld2[2] = {outer, p.inner}, s[2][IR_MAX_RANK] = {{p.n * p.inner, 1}, {p.k * p.inner, 1}};
    uint32_t slots[3] = {p.y, p.x, p.yi ? p.yi : p.y};
    IrStatus st_ = cu_kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 2, ld2, 2, s, NULL, tk_body, &p);
    return cu_kend(c, lines, NULL);
}
