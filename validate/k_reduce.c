/* Reduction kernels: ReduceX, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax and CumSum.
 *
 * ReduceX accumulates in input order (row-major) into one accumulator per output element, in
 * double for floats (and for the float-valued reductions of integers, truncated at the end),
 * in 64-bit wrap-around arithmetic for integer sums, products and extrema. The order is fixed,
 * so results never depend on anything but the inputs.
 */
#include "validate/interp.h"

#include <math.h>
#include <stdlib.h>

#define MAXR IR_MAX_RANK

static IrStatus need_input(KernelArgs *a, uint32_t i) {
    if (i < a->n_in && a->in[i]) return IR_OK;
    return interp_error(a, "input %u is missing", i);
}

static IrStatus bad_dtype(KernelArgs *a, IrDType t) {
    char msg[64];
    snprintf(msg, sizeof msg, "dtype %s", ir_dtype_name(t));
    return interp_unsupported(a, msg);
}

static double d_max(double x, double y) { return (x != x || x >= y) ? x : y; }
static double d_min(double x, double y) { return (x != x || x <= y) ? x : y; }

/* ---- ReduceX ---------------------------------------------------------------------------- */

/* Reads the axes (attribute, or input 1 for ReduceSum) into a mask. *none_given is set when no axes
 * are given. */
static IrStatus reduce_axes(KernelArgs *a, IrOp op, bool *mask, bool *none_given) {
    const IrTensor *x = a->in[0];
    int64_t axes[MAXR];
    int nax = 0;
    if (op == IR_OP_REDUCE_SUM) {
        const IrTensor *t = a->n_in > 1 ? a->in[1] : NULL;
        if (t) {
            int64_t n = ir_tensor_numel(t);
            if (n > MAXR) return interp_error(a, "too many axes (%lld)", (long long)n);
            for (int64_t i = 0; i < n; i++) axes[nax++] = interp_get_i(t, i);
        }
    } else {
        nax = interp_attr_ints(a, "axes", axes, MAXR);
        if (nax > MAXR) return interp_error(a, "too many axes (%d)", nax);
        if (nax < 0) nax = 0;
    }
    for (uint32_t d = 0; d < x->rank; d++) mask[d] = nax == 0;
    *none_given = nax == 0;
    for (int i = 0; i < nax; i++) {
        int64_t ax = axes[i];
        if (!ir_shape_axis_checked(&ax, x->rank))
            return interp_error(a, "axis %lld is out of range for rank %u", (long long)axes[i], x->rank);
        if (mask[ax]) return interp_error(a, "axis %lld is repeated", (long long)axes[i]);
        mask[ax] = true;
    }
    return IR_OK;
}

static bool reduce_in_double(IrOp op, IrDType dt) {
    if (ir_dtype_is_float(dt)) return true;
    return op == IR_OP_REDUCE_L2 || op == IR_OP_REDUCE_LOG_SUM || op == IR_OP_REDUCE_LOG_SUM_EXP ||
           op == IR_OP_REDUCE_MEAN;
}

static double red_init_f(IrOp op) {
    switch (op) {
    case IR_OP_REDUCE_PROD: return 1.0;
    case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_LOG_SUM_EXP: return -INFINITY;
    case IR_OP_REDUCE_MIN: return INFINITY;
    default: return 0.0;
    }
}

static double red_step_f(IrOp op, double acc, double v) {
    switch (op) {
    case IR_OP_REDUCE_L1: return acc + fabs(v);
    case IR_OP_REDUCE_L2: case IR_OP_REDUCE_SUM_SQUARE: return acc + v * v;
    case IR_OP_REDUCE_PROD: return acc * v;
    case IR_OP_REDUCE_MAX: return d_max(acc, v);
    case IR_OP_REDUCE_MIN: return d_min(acc, v);
    default: return acc + v; /* SUM, MEAN, LOG_SUM */
    }
}

static int64_t red_step_i(IrOp op, int64_t acc, int64_t v, bool uns) {
    uint64_t ua = (uint64_t)acc, uv = (uint64_t)v;
    switch (op) {
    case IR_OP_REDUCE_L1: return (int64_t)(ua + (uns || v >= 0 ? uv : 0 - uv));
    case IR_OP_REDUCE_SUM_SQUARE: return (int64_t)(ua + uv * uv);
    case IR_OP_REDUCE_PROD: return (int64_t)(ua * uv);
    case IR_OP_REDUCE_MAX: return uns ? (uv > ua ? v : acc) : (v > acc ? v : acc);
    case IR_OP_REDUCE_MIN: return uns ? (uv < ua ? v : acc) : (v < acc ? v : acc);
    default: return (int64_t)(ua + uv);
    }
}

/* Calls the odometer over x's dims, yielding (input offset, output offset) pairs in input
 * order; ost are the output strides per input dim (0 on reduced dims). */
typedef struct RedWalk {
    uint32_t rank;
    int64_t dims[MAXR], ost[MAXR], idx[MAXR];
    int64_t o;
} RedWalk;

static void redwalk_next(RedWalk *w) {
    for (int d = (int)w->rank - 1; d >= 0; d--) {
        w->o += w->ost[d];
        if (++w->idx[d] < w->dims[d]) return;
        w->o -= w->ost[d] * w->dims[d];
        w->idx[d] = 0;
    }
}

/* Float accumulation (floats, and the float-valued reductions of integers). */
static IrStatus reduce_f(KernelArgs *a, IrOp op, RedWalk *w, int64_t count) {
    const IrTensor *x = a->in[0];
    IrTensor *y = &a->out[0];
    int64_t on = ir_tensor_numel(y), in = ir_tensor_numel(x);
    double *acc = malloc((size_t)on * sizeof *acc), *mx = NULL;
    if (!acc) return interp_error(a, "out of memory");
    if (op == IR_OP_REDUCE_LOG_SUM_EXP) {
        /* pass 1: the maximum, so exp never overflows */
        mx = malloc((size_t)on * sizeof *mx);
        if (!mx) {
            free(acc);
            return interp_error(a, "out of memory");
        }
        for (int64_t i = 0; i < on; i++) mx[i] = -INFINITY;
        RedWalk w1 = *w;
        for (int64_t i = 0; i < in; i++, redwalk_next(&w1)) mx[w1.o] = d_max(mx[w1.o], interp_get_f(x, i));
    }
    double init = op == IR_OP_REDUCE_LOG_SUM_EXP ? 0.0 : red_init_f(op);
    for (int64_t i = 0; i < on; i++) acc[i] = init;
    if (x->dtype == IR_DTYPE_F32 && op == IR_OP_REDUCE_MEAN) {
        const float *xp = x->data;
        for (int64_t i = 0; i < in; i++, redwalk_next(w)) acc[w->o] += xp[i];
    } else if (mx) {
        for (int64_t i = 0; i < in; i++, redwalk_next(w)) {
            double m = mx[w->o];
            if (isfinite(m)) acc[w->o] += exp(interp_get_f(x, i) - m);
        }
    } else {
        for (int64_t i = 0; i < in; i++, redwalk_next(w)) acc[w->o] = red_step_f(op, acc[w->o], interp_get_f(x, i));
    }
    for (int64_t i = 0; i < on; i++) {
        double v = acc[i];
        switch (op) {
        case IR_OP_REDUCE_L2: v = sqrt(v); break;
        case IR_OP_REDUCE_LOG_SUM: v = log(v); break;
        case IR_OP_REDUCE_MEAN: v = v / (double)count; break;
        case IR_OP_REDUCE_LOG_SUM_EXP: v = isfinite(mx[i]) ? mx[i] + log(v) : mx[i]; break;
        default: break;
        }
        interp_set_f(y, i, v);
    }
    free(acc);
    free(mx);
    return IR_OK;
}

/* Exact 64-bit integer accumulation with wrap-around. */
static IrStatus reduce_i(KernelArgs *a, IrOp op, RedWalk *w) {
    const IrTensor *x = a->in[0];
    IrTensor *y = &a->out[0];
    int64_t on = ir_tensor_numel(y), in = ir_tensor_numel(x);
    bool uns = !ir_dtype_is_signed(x->dtype);
    int64_t *acc = malloc((size_t)on * sizeof *acc);
    if (!acc) return interp_error(a, "out of memory");
    int64_t init = 0;
    if (op == IR_OP_REDUCE_PROD) init = 1;
    else if (op == IR_OP_REDUCE_MAX) init = uns ? 0 : INT64_MIN;
    else if (op == IR_OP_REDUCE_MIN) init = uns ? (int64_t)UINT64_MAX : INT64_MAX;
    for (int64_t i = 0; i < on; i++) acc[i] = init;
    for (int64_t i = 0; i < in; i++, redwalk_next(w)) acc[w->o] = red_step_i(op, acc[w->o], interp_get_i(x, i), uns);
    for (int64_t i = 0; i < on; i++) interp_set_i(y, i, acc[i]);
    free(acc);
    return IR_OK;
}

static IrStatus reduce(KernelArgs *a, IrOp op) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (x->dtype == IR_DTYPE_BOOL) return bad_dtype(a, x->dtype);
    bool mask[MAXR] = {0}, none = false;
    if ((s = reduce_axes(a, op, mask, &none))) return s;
    bool keep = interp_attr_int(a, "keepdims") != 0;
    if (op == IR_OP_REDUCE_SUM && none && interp_attr_int(a, "noop_with_empty_axes") != 0) {
        if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
        if (ir_tensor_numel(x)) memcpy(a->out[0].data, x->data, ir_tensor_nbytes(x));
        return IR_OK;
    }
    int64_t odims[MAXR], count = 1;
    uint32_t orank = 0;
    RedWalk w = {.rank = x->rank, .o = 0};
    for (uint32_t d = 0; d < x->rank; d++) {
        w.dims[d] = x->dims[d];
        w.idx[d] = 0;
        if (mask[d]) count *= x->dims[d];
        if (!mask[d]) odims[orank++] = x->dims[d];
        else if (keep) odims[orank++] = 1;
    }
    int64_t st = 1;
    for (uint32_t d = x->rank; d-- > 0;) {
        w.ost[d] = mask[d] ? 0 : st;
        if (!mask[d]) st *= x->dims[d];
    }
    if ((s = interp_alloc_output(a, 0, x->dtype, orank, odims))) return s;
    if (ir_tensor_numel(&a->out[0]) == 0) return IR_OK;
    if (reduce_in_double(op, x->dtype)) return reduce_f(a, op, &w, count);
    return reduce_i(a, op, &w);
}

IrStatus interp_REDUCE_L1(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_L1); }
IrStatus interp_REDUCE_L2(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_L2); }
IrStatus interp_REDUCE_LOG_SUM(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_LOG_SUM); }
IrStatus interp_REDUCE_LOG_SUM_EXP(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_LOG_SUM_EXP); }
IrStatus interp_REDUCE_MAX(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_MAX); }
IrStatus interp_REDUCE_MEAN(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_MEAN); }
IrStatus interp_REDUCE_MIN(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_MIN); }
IrStatus interp_REDUCE_PROD(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_PROD); }
IrStatus interp_REDUCE_SUM(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_SUM); }
IrStatus interp_REDUCE_SUM_SQUARE(KernelArgs *a) { return reduce(a, IR_OP_REDUCE_SUM_SQUARE); }

/* ---- ArgMax / ArgMin -------------------------------------------------------------------- */

static IrStatus arg_reduce(KernelArgs *a, bool is_max) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (x->dtype == IR_DTYPE_BOOL) return bad_dtype(a, x->dtype);
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, x->rank))
        return interp_error(a, "axis %lld is out of range for rank %u", (long long)interp_attr_int(a, "axis"), x->rank);
    bool keep = interp_attr_int(a, "keepdims") != 0, last = interp_attr_int(a, "select_last_index") != 0;
    int64_t odims[MAXR], outer, n, inner;
    uint32_t orank = 0;
    for (uint32_t d = 0; d < x->rank; d++) {
        if (d != axis) odims[orank++] = x->dims[d];
        else if (keep) odims[orank++] = 1;
    }
    ir_shape_split(x->rank, x->dims, (uint32_t)axis, &outer, &n, &inner);
    if (n == 0 && outer * inner > 0) return interp_error(a, "reduced axis has size 0");
    if ((s = interp_alloc_output(a, 0, IR_DTYPE_I64, orank, odims))) return s;
    int64_t *y = a->out[0].data;
    bool fl = ir_dtype_is_float(x->dtype), uns = ir_dtype_is_int(x->dtype) && !ir_dtype_is_signed(x->dtype);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i, best = 0;
            for (int64_t k = 1; k < n; k++) {
                int64_t p = base + k * inner, q = base + best * inner;
                int c; /* +1: x[p] is preferred over the best so far, 0: tie */
                if (fl) {
                    double v = interp_get_f(x, p), b = interp_get_f(x, q);
                    if (b != b) c = -1; /* the first NaN wins (numpy) */
                    else if (v != v) c = 1;
                    else c = v == b ? 0 : ((v > b) == is_max ? 1 : -1);
                } else if (uns) {
                    uint64_t v = (uint64_t)interp_get_i(x, p), b = (uint64_t)interp_get_i(x, q);
                    c = v == b ? 0 : ((v > b) == is_max ? 1 : -1);
                } else {
                    int64_t v = interp_get_i(x, p), b = interp_get_i(x, q);
                    c = v == b ? 0 : ((v > b) == is_max ? 1 : -1);
                }
                if (c > 0 || (c == 0 && last)) best = k;
            }
            y[o * inner + i] = best;
        }
    }
    return IR_OK;
}

IrStatus interp_ARG_MAX(KernelArgs *a) { return arg_reduce(a, true); }
IrStatus interp_ARG_MIN(KernelArgs *a) { return arg_reduce(a, false); }

/* ---- Softmax / LogSoftmax / Hardmax (opset 13: one axis) -------------------------------- */

static IrStatus softmax_like(KernelArgs *a, IrOp op) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (!ir_dtype_is_float(x->dtype)) return bad_dtype(a, x->dtype);
    int64_t axis = interp_attr_int(a, "axis");
    if (x->rank == 0) {
        if (axis != 0 && axis != -1) return interp_error(a, "axis %lld is out of range for rank 0", (long long)axis);
    } else if (!ir_shape_axis_checked(&axis, x->rank)) {
        return interp_error(a, "axis %lld is out of range for rank %u", (long long)interp_attr_int(a, "axis"), x->rank);
    }
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
    IrTensor *y = &a->out[0];
    int64_t outer = 1, n = 1, inner = 1;
    if (x->rank) ir_shape_split(x->rank, x->dims, (uint32_t)axis, &outer, &n, &inner);
    if (outer * n * inner == 0) return IR_OK;
    double *buf = malloc((size_t)n * sizeof *buf);
    if (!buf) return interp_error(a, "out of memory");
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double mx = -INFINITY;
            int64_t arg = 0;
            for (int64_t k = 0; k < n; k++) {
                buf[k] = interp_get_f(x, base + k * inner);
                if (buf[k] > mx) {
                    mx = buf[k];
                    arg = k;
                }
            }
            if (op == IR_OP_HARDMAX) {
                for (int64_t k = 0; k < n; k++) interp_set_f(y, base + k * inner, k == arg ? 1.0 : 0.0);
                continue;
            }
            double sum = 0;
            for (int64_t k = 0; k < n; k++) sum += exp(buf[k] - mx);
            for (int64_t k = 0; k < n; k++) {
                double v = op == IR_OP_SOFTMAX ? exp(buf[k] - mx) / sum : buf[k] - mx - log(sum);
                interp_set_f(y, base + k * inner, v);
            }
        }
    }
    free(buf);
    return IR_OK;
}

IrStatus interp_SOFTMAX(KernelArgs *a) { return softmax_like(a, IR_OP_SOFTMAX); }
IrStatus interp_LOG_SOFTMAX(KernelArgs *a) { return softmax_like(a, IR_OP_LOG_SOFTMAX); }
IrStatus interp_HARDMAX(KernelArgs *a) { return softmax_like(a, IR_OP_HARDMAX); }

/* ---- CumSum ----------------------------------------------------------------------------- */

IrStatus interp_CUM_SUM(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *ax = a->in[1];
    if (x->dtype == IR_DTYPE_BOOL) return bad_dtype(a, x->dtype);
    if (ir_tensor_numel(ax) != 1 || ax->rank > 1 || !ir_dtype_is_int(ax->dtype))
        return interp_error(a, "axis must be an integer scalar");
    int64_t axis = interp_get_i(ax, 0);
    if (!ir_shape_axis_checked(&axis, x->rank))
        return interp_error(a, "axis %lld is out of range for rank %u", (long long)interp_get_i(ax, 0), x->rank);
    bool excl = interp_attr_int(a, "exclusive") != 0, rev = interp_attr_int(a, "reverse") != 0;
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
    IrTensor *y = &a->out[0];
    int64_t outer, n, inner;
    ir_shape_split(x->rank, x->dims, (uint32_t)axis, &outer, &n, &inner);
    bool fl = ir_dtype_is_float(x->dtype);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            double fa = 0;
            uint64_t ia = 0;
            for (int64_t j = 0; j < n; j++) {
                int64_t k = rev ? n - 1 - j : j, p = o * n * inner + k * inner + i;
                if (fl) {
                    double v = interp_get_f(x, p);
                    if (!excl) fa += v;
                    interp_set_f(y, p, fa);
                    if (excl) fa += v;
                } else {
                    uint64_t v = (uint64_t)interp_get_i(x, p);
                    if (!excl) ia += v;
                    interp_set_i(y, p, (int64_t)ia);
                    if (excl) ia += v;
                }
            }
        }
    }
    return IR_OK;
}
