/* Kernels whose parameters are tensors known only at run time while the output shape is static
 * (specialized): Slice with starts/axes/steps, Pad with its pads, CumSum with its axis, each read
 * on the device by every thread and clamped as the interpreter clamps them, one thread per
 * output element. CumSum then sums its line up to the element in the interpreter's order.
 */
#include "backend/cuda/cu.h"

#include <string.h>

static LLVMValueRef i64c(Cu *c, int64_t v) { return LLVMConstInt(c->i64, (unsigned long long)v, 1); }
static LLVMValueRef smin(Cu *c, LLVMValueRef a, LLVMValueRef b) { return sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, a, b, ""), a, b); }
static LLVMValueRef smax(Cu *c, LLVMValueRef a, LLVMValueRef b) { return sel(c, LLVMBuildICmp(c->b, LLVMIntSGT, a, b, ""), a, b); }

typedef struct RtCtx {
    IrOp op;
    IrValueId y, x, starts, axes, steps, pads, fill, axis;
    int64_t axes_c[IR_MAX_RANK]; /* constant axes (when axes == 0 and have_axes) */
    bool have_axes;
    uint32_t rank, na;
    int64_t xd[IR_MAX_RANK], od[IR_MAX_RANK], xs[IR_MAX_RANK];
    LLVMTypeRef et;
    IrDType dt;
    int mode;
    bool excl, rev;
} RtCtx;

static LLVMValueRef rd(Cu *c, IrValueId v, uint32_t i) {
    return cu_load_typed(c, lower_value_dtype(c->g, v), pslot(c, v), ci(c, i));
}

/* entry i's axis, normalized (i64) */
static LLVMValueRef axis_of(Cu *c, const RtCtx *p, uint32_t i) {
    LLVMValueRef a = p->axes ? rd(c, p->axes, i) : i64c(c, p->have_axes ? p->axes_c[i] : (int64_t)i);
    return sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, a, i64c(c, 0), ""), LLVMBuildAdd(c->b, a, i64c(c, p->rank), ""), a);
}

static LLVMValueRef to_it(Cu *c, LLVMValueRef v) { return c->it == c->i64 ? v : LLVMBuildTrunc(c->b, v, c->it, ""); }

static void rt_body(Cu *c, LLVMValueRef *o, void *user) {
    RtCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef co[IR_MAX_RANK], rem = o[0];
    for (uint32_t k = p->rank; k-- > 0;) {
        co[k] = k == 0 ? rem : LLVMBuildURem(b, rem, ci(c, p->od[k]), "");
        if (k > 0) rem = LLVMBuildUDiv(b, rem, ci(c, p->od[k]), "");
        co[k] = LLVMBuildZExt(b, co[k], c->i64, "");
    }
    LLVMValueRef Y = pslot(c, p->y), X = pslot(c, p->x);
    if (p->op == IR_OP_SLICE || p->op == IR_OP_PAD) {
        LLVMValueRef begin[IR_MAX_RANK], step[IR_MAX_RANK];
        for (uint32_t k = 0; k < p->rank; k++) begin[k] = i64c(c, 0), step[k] = i64c(c, 1);
        for (uint32_t i = 0; i < p->na; i++) {
            LLVMValueRef a = axis_of(c, p, i);
            for (uint32_t k = 0; k < p->rank; k++) {
                LLVMValueRef hit = LLVMBuildICmp(b, LLVMIntEQ, a, i64c(c, k), ""), bg, stp = i64c(c, 1);
                if (p->op == IR_OP_SLICE) {
                    LLVMValueRef dim = i64c(c, p->xd[k]), s0 = rd(c, p->starts, i);
                    stp = p->steps ? rd(c, p->steps, i) : i64c(c, 1);
                    s0 = sel(c, LLVMBuildICmp(b, LLVMIntSLT, s0, i64c(c, 0), ""), LLVMBuildAdd(b, s0, dim, ""), s0);
                    LLVMValueRef pos = LLVMBuildICmp(b, LLVMIntSGT, stp, i64c(c, 0), "");
                    bg = sel(c, pos, smin(c, smax(c, s0, i64c(c, 0)), dim), smin(c, smax(c, s0, i64c(c, -1)), i64c(c, p->xd[k] - 1)));
                } else {
                    bg = LLVMBuildNeg(b, rd(c, p->pads, i), ""); /* the source coordinate is out - pad_begin */
                }
                begin[k] = sel(c, hit, bg, begin[k]);
                step[k] = sel(c, hit, stp, step[k]);
            }
        }
        LLVMValueRef off = i64c(c, 0), inside = LLVMConstInt(c->i1, 1, 0);
        for (uint32_t k = 0; k < p->rank; k++) {
            LLVMValueRef s = LLVMBuildAdd(b, begin[k], LLVMBuildMul(b, co[k], step[k], ""), "");
            if (p->op == IR_OP_PAD) {
                int64_t n = p->xd[k];
                LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, s, i64c(c, 0), ""), LLVMBuildICmp(b, LLVMIntSLT, s, i64c(c, n), ""), "");
                LLVMValueRef r;
                if (p->mode == 0 || n == 0) {
                    inside = LLVMBuildAnd(b, inside, in, "");
                    r = i64c(c, 0);
                } else if (p->mode == 1) {
                    r = sel(c, LLVMBuildICmp(b, LLVMIntSLT, s, i64c(c, 0), ""), i64c(c, 0), i64c(c, n - 1));
                } else if (p->mode == 3 || n == 1) {
                    r = n == 1 ? i64c(c, 0) : LLVMBuildSRem(b, LLVMBuildAdd(b, LLVMBuildSRem(b, s, i64c(c, n), ""), i64c(c, n), ""), i64c(c, n), "");
                } else {
                    int64_t pp = 2 * (n - 1);
                    LLVMValueRef q = LLVMBuildSRem(b, LLVMBuildAdd(b, LLVMBuildSRem(b, s, i64c(c, pp), ""), i64c(c, pp), ""), i64c(c, pp), "");
                    r = sel(c, LLVMBuildICmp(b, LLVMIntSLT, q, i64c(c, n), ""), q, LLVMBuildSub(b, i64c(c, pp), q, ""));
                }
                s = sel(c, in, s, r);
            }
            /* a coordinate outside the input (bad run-time parameters) reads element 0 */
            LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, s, i64c(c, p->xd[k] ? p->xd[k] : 1), "");
            off = LLVMBuildAdd(b, off, LLVMBuildMul(b, sel(c, ok, s, i64c(c, 0)), i64c(c, p->xs[k]), ""), "");
        }
        LLVMValueRef v = ld(c, p->et, X, to_it(c, off));
        if (p->op == IR_OP_PAD) v = sel(c, inside, v, p->fill ? ld(c, p->et, pslot(c, p->fill), ci(c, 0)) : LLVMConstInt(p->et, 0, 0));
        st(c, p->et, Y, o[0], v);
        return;
    }
    /* CumSum over the run-time axis: the line's elements before (or after, reverse) this one */
    LLVMValueRef a = rd(c, p->axis, 0);
    a = sel(c, LLVMBuildICmp(b, LLVMIntSLT, a, i64c(c, 0), ""), LLVMBuildAdd(b, a, i64c(c, p->rank), ""), a);
    LLVMValueRef n = i64c(c, 1), inner = i64c(c, 1), pos = i64c(c, 0);
    for (uint32_t k = 0; k < p->rank; k++) {
        LLVMValueRef hit = LLVMBuildICmp(b, LLVMIntEQ, a, i64c(c, k), "");
        n = sel(c, hit, i64c(c, p->xd[k]), n);
        inner = sel(c, hit, i64c(c, p->xs[k]), inner);
        pos = sel(c, hit, co[k], pos);
    }
    LLVMValueRef i64 = LLVMBuildZExt(b, o[0], c->i64, "");
    LLVMValueRef base = LLVMBuildSub(b, i64, LLVMBuildMul(b, pos, inner, ""), "");
    bool fl = cu_kind(p->dt) == CU_KF;
    LLVMValueRef lo, hi; /* the summed positions [lo, hi) along the line, in the order taken */
    if (!p->rev) lo = i64c(c, 0), hi = p->excl ? pos : LLVMBuildAdd(b, pos, i64c(c, 1), "");
    else lo = p->excl ? LLVMBuildAdd(b, pos, i64c(c, 1), "") : pos, hi = n;
    Loop l;
    LLVMValueRef acc;
    cu_loop_begin_acc(c, &l, i64c(c, 0), LLVMBuildSub(b, hi, lo, ""), i64c(c, 1), fl ? LLVMConstReal(c->f64, 0.0) : i64c(c, 0), &acc);
    LLVMValueRef j = p->rev ? LLVMBuildSub(b, LLVMBuildSub(b, hi, i64c(c, 1), ""), l.iv, "") : LLVMBuildAdd(b, lo, l.iv, "");
    LLVMValueRef v = cu_load_typed(c, p->dt, X, to_it(c, LLVMBuildAdd(b, base, LLVMBuildMul(b, j, inner, ""), "")));
    cu_loop_acc_next(c, acc, fl ? LLVMBuildFAdd(b, acc, v, "") : LLVMBuildAdd(b, acc, v, ""));
    cu_loop_end(c, &l);
    cu_store_typed(c, p->dt, Y, o[0], acc);
}

static IrStatus rt_kernel(Cu *c, RtCtx *p) {
    int64_t total = ir_shape_numel(p->rank, p->od), s1[1][IR_MAX_RANK] = {{1}};
    if (!total) return IR_OK;
    uint32_t slots[6] = {p->y, p->x}, ns = 2;
    IrValueId more[5] = {p->starts, p->axes, p->steps, p->pads ? p->pads : p->fill, p->pads ? p->fill : p->axis};
    for (int i = 0; i < 5; i++)
        if (more[i] && ns < 6) slots[ns++] = more[i];
    IrStatus st_ = cu_kbegin(c, slots, ns, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, rt_body, p);
    return cu_kend(c, total, NULL);
}

static bool idx_dtype(const IrGraph *g, IrValueId v) {
    IrDType t = lower_value_dtype(g, v);
    return t == IR_DTYPE_I64 || t == IR_DTYPE_I32;
}

static IrStatus rt_begin(Cu *c, RtCtx *p) {
    const IrGraph *g = c->g;
    p->op = ir_node_op(g, c->node);
    p->x = ir_node_operand(g, c->node, 0);
    p->y = ir_node_result(g, c->node, 0);
    p->dt = lower_value_dtype(g, p->x);
    if (p->dt == IR_DTYPE_STRING) return cu_unsupported_dtype(c, p->dt);
    p->et = int_type(c, ir_dtype_size(p->dt));
    uint32_t ry;
    lower_value_shape(g, p->x, &p->rank, p->xd);
    lower_value_shape(g, p->y, &ry, p->od);
    if (ry != p->rank || !p->rank) return cu_unsupported(c, "with these ranks");
    ir_shape_strides(p->rank, p->xd, p->xs);
    return IR_OK;
}

static uint32_t count_of(const IrGraph *g, IrValueId v) {
    size_t es = ir_dtype_size(lower_value_dtype(g, v));
    return es ? (uint32_t)(lower_value_nbytes(g, v) / es) : 0;
}

/* Slice whose starts, ends, axes or steps are given at run time (the output shape says where the
 * ends fall, so only starts, axes and steps are read). */
IrStatus cu_gen_slice_rt(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    RtCtx p = {0};
    IrStatus s = rt_begin(c, &p);
    if (s) return s;
    uint32_t no = ir_node_num_operands(g, n);
    if (no < 3) return cu_unsupported(c, "without starts and ends");
    p.starts = ir_node_operand(g, n, 1);
    p.axes = no > 3 ? ir_node_operand(g, n, 3) : 0;
    p.steps = no > 4 ? ir_node_operand(g, n, 4) : 0;
    p.na = count_of(g, p.starts);
    if (p.na > IR_MAX_RANK || !idx_dtype(g, p.starts)) return cu_unsupported(c, "with these starts");
    if (p.axes && (!idx_dtype(g, p.axes) || count_of(g, p.axes) != p.na)) return cu_unsupported(c, "with these axes");
    if (p.steps && (!idx_dtype(g, p.steps) || count_of(g, p.steps) != p.na)) return cu_unsupported(c, "with these steps");
    return rt_kernel(c, &p);
}

IrStatus cu_gen_pad_rt(Cu *c, int mode) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    RtCtx p = {.mode = mode};
    IrStatus s = rt_begin(c, &p);
    if (s) return s;
    uint32_t no = ir_node_num_operands(g, n);
    p.pads = ir_node_operand(g, n, 1);
    p.axes = no > 3 ? ir_node_operand(g, n, 3) : 0;
    if (p.axes && lower_value_nbytes(g, p.axes) == 0) p.axes = 0;
    p.na = p.axes ? count_of(g, p.axes) : p.rank;
    if (!idx_dtype(g, p.pads) || count_of(g, p.pads) != 2 * p.na || p.na > IR_MAX_RANK) return cu_unsupported(c, "with these pads");
    if (p.axes && !idx_dtype(g, p.axes)) return cu_unsupported(c, "with these axes");
    for (uint32_t k = 0; k < p.rank; k++)
        if (mode && p.xd[k] == 0 && p.od[k] > 0) return cu_unsupported(c, "of an empty dim in this mode");
    IrValueId cv = no > 2 ? ir_node_operand(g, n, 2) : 0;
    if (cv && lower_value_nbytes(g, cv) > 0) {
        if (lower_value_dtype(g, cv) != p.dt) return cu_unsupported(c, "with a constant of another dtype");
        p.fill = cv;
    }
    return rt_kernel(c, &p);
}

IrStatus cu_gen_cumsum_rt(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    RtCtx p = {0};
    IrStatus s = rt_begin(c, &p);
    if (s) return s;
    if (!cu_typed_ok(p.dt) || p.dt == IR_DTYPE_BOOL) return cu_unsupported_dtype(c, p.dt);
    p.axis = ir_node_operand(g, n, 1);
    if (!idx_dtype(g, p.axis) || count_of(g, p.axis) != 1) return cu_unsupported(c, "with this axis");
    bool found;
    p.excl = ir_node_attr_int(g, n, "exclusive", &found) != 0;
    p.rev = ir_node_attr_int(g, n, "reverse", &found) != 0;
    return rt_kernel(c, &p);
}
