/* Elementwise kernels: unary math, Cast, Dropout, binary and n-ary ops with numpy
 * broadcasting, comparisons, logic and Where.
 *
 * Floats are computed in double through interp_get_f/interp_set_f (correctly rounded + - * /
 * sqrt for f32/f16/bf16); integers in 64 bits with C/numpy wrap-around (unsigned arithmetic,
 * so overflow is defined), u64 compared and divided as unsigned. Broadcasting walks the output
 * in row-major order with per-operand strides (0 on broadcast dims) after merging contiguous
 * dims, so f32 rows run as plain float loops. Same inputs, same bytes, always.
 */
#include "validate/interp.h"

#include <math.h>
#include <stdlib.h>

#define MAXR IR_MAX_RANK
#define MAX_OPS 64 /* operands of one n-ary op (output included) */

/* ---- dtype classes ---------------------------------------------------------------------- */

enum { K_F = 1, K_S = 2, K_U = 4, K_B = 8 };
#define K_INT (K_S | K_U)
#define K_NUM (K_F | K_S | K_U)
#define K_ALL (K_NUM | K_B)

static int dkind(IrDType t) {
    if (ir_dtype_is_float(t)) return K_F;
    if (ir_dtype_is_signed(t)) return K_S;
    if (ir_dtype_is_int(t)) return K_U;
    return K_B;
}

static IrStatus bad_dtype(KernelArgs *a, IrDType t) {
    char msg[64];
    snprintf(msg, sizeof msg, "dtype %s", ir_dtype_name(t));
    return interp_unsupported(a, msg);
}

static IrStatus need_input(KernelArgs *a, uint32_t i) {
    if (i < a->n_in && a->in[i]) return IR_OK;
    return interp_error(a, "input %u is missing", i);
}

/* ---- broadcast iteration ---------------------------------------------------------------- */

/* Walks the output of an n-ary op row by row. Operand 0 is the output, 1.. the inputs. After
 * setup, dims[rank-1] is the row length and st[k][rank-1] the in-row stride of operand k;
 * off[k] is the element offset of the current row's start. */
typedef struct Bcast {
    uint32_t nops, rank;
    int64_t dims[MAXR];
    int64_t st[MAX_OPS][MAXR];
    int64_t idx[MAXR];
    int64_t off[MAX_OPS];
    int64_t rows;
} Bcast;

/* Sets up iteration of `out` (already allocated with the broadcast shape) over inputs. */
static void bcast_init(Bcast *b, const IrTensor *out, const IrTensor *const *ins, uint32_t n) {
    uint32_t r = out->rank;
    b->nops = n + 1;
    int64_t st[MAX_OPS][MAXR];
    for (uint32_t k = 0; k <= n; k++) {
        const IrTensor *t = k ? ins[k - 1] : out;
        ir_shape_broadcast_strides(t->rank, t->dims, r, NULL, st[k]); /* out is their broadcast */
    }
    /* drop size-1 dims and merge a dim into the next when every operand is contiguous over
     * the pair */
    uint32_t m = 0;
    for (uint32_t i = 0; i < r; i++) {
        if (out->dims[i] == 1) continue;
        bool merge = m > 0;
        for (uint32_t k = 0; merge && k <= n; k++)
            if (b->st[k][m - 1] != st[k][i] * out->dims[i]) merge = false;
        if (merge) {
            b->dims[m - 1] *= out->dims[i];
            for (uint32_t k = 0; k <= n; k++) b->st[k][m - 1] = st[k][i];
            continue;
        }
        b->dims[m] = out->dims[i];
        for (uint32_t k = 0; k <= n; k++) b->st[k][m] = st[k][i];
        m++;
    }
    if (m == 0) {
        b->dims[0] = 1;
        for (uint32_t k = 0; k <= n; k++) b->st[k][0] = 0;
        m = 1;
    }
    b->rank = m;
    for (uint32_t i = 0; i < m; i++) b->idx[i] = 0;
    for (uint32_t k = 0; k <= n; k++) b->off[k] = 0;
    int64_t total = ir_tensor_numel(out);
    b->rows = total == 0 ? 0 : total / b->dims[m - 1];
}

static void bcast_next_row(Bcast *b) {
    for (int d = (int)b->rank - 2; d >= 0; d--) {
        if (++b->idx[d] < b->dims[d]) {
            for (uint32_t k = 0; k < b->nops; k++) b->off[k] += b->st[k][d];
            return;
        }
        b->idx[d] = 0;
        for (uint32_t k = 0; k < b->nops; k++) b->off[k] -= b->st[k][d] * (b->dims[d] - 1);
    }
}

/* Allocates output 0 with the broadcast shape of ins[0..n) and dtype dt. */
static IrStatus bcast_alloc(KernelArgs *a, const IrTensor *const *ins, uint32_t n, IrDType dt) {
    uint32_t rank;
    int64_t dims[MAXR];
    if (n + 1 > MAX_OPS) return interp_unsupported(a, "more than 63 inputs");
    IrStatus s = interp_broadcast(a, ins, n, &rank, dims);
    return s ? s : interp_alloc_output(a, 0, dt, rank, dims);
}

/* ---- unary ops -------------------------------------------------------------------------- */

typedef struct UParams {
    double alpha, beta, gamma, lambd, bias;
    bool neg, pos, tanh_approx;
} UParams;

static double d_round_even(double x) {
    double r = floor(x), diff = x - r;
    if (diff > 0.5 || (diff == 0.5 && fmod(r, 2.0) != 0)) r += 1.0;
    return isfinite(x) ? r : x;
}

static double d_softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static double un_f(IrOp op, double x, const UParams *p) {
    switch (op) {
    case IR_OP_ABS: return fabs(x);
    case IR_OP_ACOS: return acos(x);
    case IR_OP_ACOSH: return acosh(x);
    case IR_OP_ASIN: return asin(x);
    case IR_OP_ASINH: return asinh(x);
    case IR_OP_ATAN: return atan(x);
    case IR_OP_ATANH: return atanh(x);
    case IR_OP_CEIL: return ceil(x);
    case IR_OP_CELU: return fmax(0.0, x) + fmin(0.0, p->alpha * expm1(x / p->alpha));
    case IR_OP_COS: return cos(x);
    case IR_OP_COSH: return cosh(x);
    case IR_OP_ELU: return x < 0 ? p->alpha * expm1(x) : x;
    case IR_OP_ERF: return erf(x);
    case IR_OP_EXP: return exp(x);
    case IR_OP_FLOOR: return floor(x);
    case IR_OP_GELU:
        if (p->tanh_approx)
            return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        return 0.5 * x * erfc(-x / sqrt(2.0)); /* = 1 + erf(x / sqrt 2), without its cancellation for x << 0 */
    case IR_OP_HARD_SIGMOID: return fmax(0.0, fmin(1.0, p->alpha * x + p->beta));
    case IR_OP_HARD_SWISH: return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
    case IR_OP_IDENTITY: return x;
    case IR_OP_LEAKY_RELU: return x < 0 ? p->alpha * x : x;
    case IR_OP_LOG: return log(x);
    case IR_OP_MISH: return x * tanh(d_softplus(x));
    case IR_OP_NEG: return -x;
    case IR_OP_RECIPROCAL: return 1.0 / x;
    case IR_OP_RELU: return x < 0 ? 0.0 : x;
    case IR_OP_ROUND: return d_round_even(x);
    case IR_OP_SELU: return x > 0 ? p->gamma * x : p->gamma * (p->alpha * exp(x) - p->alpha);
    case IR_OP_SHRINK: return x < -p->lambd ? x + p->bias : x > p->lambd ? x - p->bias : 0.0;
    case IR_OP_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case IR_OP_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
    case IR_OP_SIN: return sin(x);
    case IR_OP_SINH: return sinh(x);
    case IR_OP_SOFTPLUS: return d_softplus(x);
    case IR_OP_SOFTSIGN: return x / (1.0 + fabs(x));
    case IR_OP_SQRT: return sqrt(x);
    case IR_OP_TAN: return tan(x);
    case IR_OP_TANH: return tanh(x);
    case IR_OP_THRESHOLDED_RELU: return x > p->alpha ? x : 0.0;
    default: return NAN;
    }
}

/* Integer versions (wrap-around like C/numpy); `uns` for unsigned dtypes. */
static int64_t un_i(IrOp op, int64_t x, bool uns) {
    switch (op) {
    case IR_OP_ABS: return (!uns && x < 0) ? (int64_t)(0 - (uint64_t)x) : x;
    case IR_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case IR_OP_SIGN: return uns ? (x != 0) : (x > 0) - (x < 0);
    case IR_OP_RELU: return (!uns && x < 0) ? 0 : x;
    case IR_OP_BITWISE_NOT: return (int64_t)~(uint64_t)x;
    case IR_OP_NOT: return x == 0;
    default: return x;
    }
}

/* dtype kinds each unary op accepts */
static int unary_kinds(IrOp op) {
    switch (op) {
    case IR_OP_ABS: case IR_OP_SIGN: case IR_OP_SHRINK: return K_NUM;
    case IR_OP_NEG: case IR_OP_RELU: return K_F | K_S;
    case IR_OP_IDENTITY: return K_ALL;
    case IR_OP_NOT: return K_B;
    case IR_OP_BITWISE_NOT: return K_INT;
    default: return K_F;
    }
}

static IrStatus unary(KernelArgs *a, IrOp op) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (op == IR_OP_IDENTITY && x->form != IR_TYPE_TENSOR) {
        /* Identity of a sequence or an optional: a deep copy */
        s = ir_tensor_copy(&a->out[0], x);
        return s ? interp_error(a, "out of memory") : IR_OK;
    }
    int kind = dkind(x->dtype);
    if (!(unary_kinds(op) & kind)) return bad_dtype(a, x->dtype);
    s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims);
    if (s) return s;
    IrTensor *y = &a->out[0];
    int64_t n = ir_tensor_numel(x);
    if (n == 0) return IR_OK;
    if (op == IR_OP_IDENTITY) {
        memcpy(y->data, x->data, ir_tensor_nbytes(x));
        return IR_OK;
    }
    UParams p = {0};
    switch (op) {
    case IR_OP_CELU: case IR_OP_ELU: case IR_OP_LEAKY_RELU: case IR_OP_THRESHOLDED_RELU:
        p.alpha = interp_attr_float(a, "alpha");
        break;
    case IR_OP_HARD_SIGMOID:
        p.alpha = interp_attr_float(a, "alpha");
        p.beta = interp_attr_float(a, "beta");
        break;
    case IR_OP_SELU:
        p.alpha = interp_attr_float(a, "alpha");
        p.gamma = interp_attr_float(a, "gamma");
        break;
    case IR_OP_SHRINK:
        p.lambd = interp_attr_float(a, "lambd");
        p.bias = interp_attr_float(a, "bias");
        break;
    case IR_OP_GELU: {
        const char *ap = interp_attr_string(a, "approximate");
        if (ap && strcmp(ap, "tanh") == 0) p.tanh_approx = true;
        else if (ap && strcmp(ap, "none") != 0) return interp_error(a, "unknown approximate '%s'", ap);
        break;
    }
    default: break;
    }
    if (x->dtype == IR_DTYPE_F32) {
        const float *xp = x->data;
        float *yp = y->data;
        if (op == IR_OP_RELU) {
            for (int64_t i = 0; i < n; i++) yp[i] = xp[i] < 0 ? 0.0f : xp[i];
        } else {
            for (int64_t i = 0; i < n; i++) yp[i] = (float)un_f(op, xp[i], &p);
        }
        return IR_OK;
    }
    if (kind == K_F) {
        for (int64_t i = 0; i < n; i++) interp_set_f(y, i, un_f(op, interp_get_f(x, i), &p));
    } else if (op == IR_OP_SHRINK) {
        for (int64_t i = 0; i < n; i++) interp_set_f(y, i, un_f(op, interp_get_f(x, i), &p));
    } else {
        bool uns = kind == K_U;
        for (int64_t i = 0; i < n; i++) interp_set_i(y, i, un_i(op, interp_get_i(x, i), uns));
    }
    return IR_OK;
}

#define UNARY(ID)                                                                              \
    IrStatus interp_##ID(KernelArgs *a) { return unary(a, IR_OP_##ID); }
UNARY(ABS)
UNARY(ACOS)
UNARY(ACOSH)
UNARY(ASIN)
UNARY(ASINH)
UNARY(ATAN)
UNARY(ATANH)
UNARY(CEIL)
UNARY(CELU)
UNARY(COS)
UNARY(COSH)
UNARY(ELU)
UNARY(ERF)
UNARY(EXP)
UNARY(FLOOR)
UNARY(GELU)
UNARY(HARD_SIGMOID)
UNARY(HARD_SWISH)
UNARY(IDENTITY)
UNARY(LEAKY_RELU)
UNARY(LOG)
UNARY(MISH)
UNARY(NEG)
UNARY(NOT)
UNARY(RECIPROCAL)
UNARY(RELU)
UNARY(ROUND)
UNARY(SELU)
UNARY(SHRINK)
UNARY(SIGMOID)
UNARY(SIGN)
UNARY(SIN)
UNARY(SINH)
UNARY(SOFTPLUS)
UNARY(SOFTSIGN)
UNARY(SQRT)
UNARY(TAN)
UNARY(TANH)
UNARY(THRESHOLDED_RELU)
UNARY(BITWISE_NOT)
#undef UNARY

/* IsInf / IsNaN: float in, bool out. */
static IrStatus float_test(KernelArgs *a, bool nan_test) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (!ir_dtype_is_float(x->dtype)) return bad_dtype(a, x->dtype);
    bool neg = true, pos = true;
    if (!nan_test) {
        neg = interp_attr_int(a, "detect_negative") != 0;
        pos = interp_attr_int(a, "detect_positive") != 0;
    }
    s = interp_alloc_output(a, 0, IR_DTYPE_BOOL, x->rank, x->dims);
    if (s) return s;
    uint8_t *y = a->out[0].data;
    int64_t n = ir_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        double v = interp_get_f(x, i);
        y[i] = nan_test ? isnan(v) : (isinf(v) && ((v > 0 && pos) || (v < 0 && neg)));
    }
    return IR_OK;
}

IrStatus interp_IS_INF(KernelArgs *a) { return float_test(a, false); }
IrStatus interp_IS_NAN(KernelArgs *a) { return float_test(a, true); }

/* Clip: optional scalar min (input 1) and max (input 2); absent bounds do not clip. */
IrStatus interp_CLIP(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    const IrTensor *lo = a->n_in > 1 ? a->in[1] : NULL, *hi = a->n_in > 2 ? a->in[2] : NULL;
    int kind = dkind(x->dtype);
    if (!(kind & K_NUM)) return bad_dtype(a, x->dtype);
    if (lo && ir_tensor_numel(lo) == 0) lo = NULL;
    if (hi && ir_tensor_numel(hi) == 0) hi = NULL;
    if ((lo && ir_tensor_numel(lo) != 1) || (hi && ir_tensor_numel(hi) != 1))
        return interp_error(a, "min and max must be scalars");
    s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims);
    if (s) return s;
    IrTensor *y = &a->out[0];
    int64_t n = ir_tensor_numel(x);
    if (kind == K_F) {
        double l = lo ? interp_get_f(lo, 0) : -INFINITY, h = hi ? interp_get_f(hi, 0) : INFINITY;
        for (int64_t i = 0; i < n; i++) {
            double v = interp_get_f(x, i);
            if (v < l) v = l;
            if (v > h) v = h;
            interp_set_f(y, i, v);
        }
    } else if (kind == K_S) {
        int64_t l = lo ? interp_get_i(lo, 0) : INT64_MIN, h = hi ? interp_get_i(hi, 0) : INT64_MAX;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = interp_get_i(x, i);
            if (v < l) v = l;
            if (v > h) v = h;
            interp_set_i(y, i, v);
        }
    } else {
        uint64_t l = lo ? (uint64_t)interp_get_i(lo, 0) : 0,
                 h = hi ? (uint64_t)interp_get_i(hi, 0) : UINT64_MAX;
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = (uint64_t)interp_get_i(x, i);
            if (v < l) v = l;
            if (v > h) v = h;
            interp_set_i(y, i, (int64_t)v);
        }
    }
    return IR_OK;
}

/* ---- Cast ------------------------------------------------------------------------------- */

/* Converts n elements of src into dst (same element count; dtypes may differ). */
static void cast_elems(const IrTensor *src, IrTensor *dst, int64_t n, bool saturate) {
    IrDType st = src->dtype, dt = dst->dtype;
    if (n == 0) return;
    if (st == dt) {
        memcpy(dst->data, src->data, (size_t)n * ir_dtype_size(st));
        return;
    }
    int sk = dkind(st), tk = dkind(dt);
    for (int64_t i = 0; i < n; i++) {
        if (sk == K_F) {
            double v = interp_get_f(src, i);
            if (tk == K_F) {
                if (!saturate && (dt == IR_DTYPE_F8E4M3FN || dt == IR_DTYPE_F8E5M2) &&
                    !(fabs(v) <= (dt == IR_DTYPE_F8E4M3FN ? 448.0 : 57344.0))) {
                    uint8_t *o = dst->data;
                    o[i] = dt == IR_DTYPE_F8E4M3FN ? ir_f32_to_f8e4m3fn((float)v, false)
                                                   : ir_f32_to_f8e5m2((float)v, false);
                } else {
                    interp_set_f(dst, i, v);
                }
            } else if (dt == IR_DTYPE_U64 && v >= 9.2233720368547758e18 && v < 1.8446744073709552e19) {
                ((uint64_t *)dst->data)[i] = (uint64_t)v;
            } else {
                interp_set_f(dst, i, v); /* ints truncate toward zero, NaN -> 0; bool v != 0 */
            }
        } else {
            int64_t v = interp_get_i(src, i);
            if (tk != K_F) {
                interp_set_i(dst, i, tk == K_B ? v != 0 : v);
            } else if (dt == IR_DTYPE_F32) {
                ((float *)dst->data)[i] = st == IR_DTYPE_U64 ? (float)(uint64_t)v : (float)v;
            } else {
                double d = st == IR_DTYPE_U64 ? (double)(uint64_t)v : (double)v;
                if (!saturate && (dt == IR_DTYPE_F8E4M3FN || dt == IR_DTYPE_F8E5M2) &&
                    !(fabs(d) <= (dt == IR_DTYPE_F8E4M3FN ? 448.0 : 57344.0))) {
                    uint8_t *o = dst->data;
                    o[i] = dt == IR_DTYPE_F8E4M3FN ? ir_f32_to_f8e4m3fn((float)d, false)
                                                   : ir_f32_to_f8e5m2((float)d, false);
                } else {
                    interp_set_f(dst, i, d);
                }
            }
        }
    }
}

static IrStatus cast_to(KernelArgs *a, IrDType to) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (to <= IR_DTYPE_NONE || to >= IR_DTYPE_COUNT) return interp_error(a, "target is not a dtype");
    if (to == IR_DTYPE_STRING || x->dtype == IR_DTYPE_STRING) return interp_cast_strings(a, x, to);
    s = interp_alloc_output(a, 0, to, x->rank, x->dims);
    if (s) return s;
    cast_elems(x, &a->out[0], ir_tensor_numel(x), interp_attr_int(a, "saturate") != 0);
    return IR_OK;
}

IrStatus interp_CAST(KernelArgs *a) { return cast_to(a, (IrDType)interp_attr_int(a, "to")); }

IrStatus interp_CAST_LIKE(KernelArgs *a) {
    IrStatus s = need_input(a, 1);
    if (s) return s;
    return cast_to(a, a->in[1]->dtype);
}

/* Dropout in inference: the identity, mask all true. Training with ratio > 0 is random. */
IrStatus interp_DROPOUT(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    double ratio = 0.5;
    if (a->n_in > 1 && a->in[1] && ir_tensor_numel(a->in[1]) > 0) ratio = interp_get_f(a->in[1], 0);
    bool training = a->n_in > 2 && a->in[2] && ir_tensor_numel(a->in[2]) > 0 &&
                    interp_get_i(a->in[2], 0) != 0;
    if (training && ratio > 0)
        return interp_unsupported(a, "training_mode = true with ratio > 0 (random masks)");
    s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims);
    if (s) return s;
    if (ir_tensor_numel(x)) memcpy(a->out[0].data, x->data, ir_tensor_nbytes(x));
    if (a->n_out > 1 && ir_node_result(a->g, a->node, 1)) {
        s = interp_alloc_output(a, 1, IR_DTYPE_BOOL, x->rank, x->dims);
        if (s) return s;
        if (ir_tensor_numel(x)) memset(a->out[1].data, 1, (size_t)ir_tensor_numel(x));
    }
    return IR_OK;
}

/* ---- binary ops ------------------------------------------------------------------------- */

static double d_max(double x, double y) { return (x != x || x >= y) ? x : y; }
static double d_min(double x, double y) { return (x != x || x <= y) ? x : y; }

static double bin_f(IrOp op, double x, double y, bool fmod_mode) {
    switch (op) {
    case IR_OP_ADD: case IR_OP_SUM: case IR_OP_MEAN: return x + y;
    case IR_OP_SUB: return x - y;
    case IR_OP_MUL: return x * y;
    case IR_OP_DIV: return x / y;
    case IR_OP_POW: return pow(x, y);
    case IR_OP_MOD: {
        double r = fmod(x, y);
        if (!fmod_mode && r != 0 && ((r < 0) != (y < 0))) r += y;
        return r;
    }
    case IR_OP_PRELU: return x < 0 ? x * y : x;
    case IR_OP_MAX: return d_max(x, y);
    case IR_OP_MIN: return d_min(x, y);
    default: return NAN;
    }
}

static int64_t ipow(int64_t x, int64_t y) {
    if (y < 0) return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)x;
    while (y) {
        if (y & 1) r *= b;
        b *= b;
        y >>= 1;
    }
    return (int64_t)r;
}

/* Integer arithmetic with wrap-around; division by zero sets *err. */
static int64_t bin_i(IrOp op, int64_t x, int64_t y, bool uns, bool fmod_mode, bool left,
                     bool *err) {
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    switch (op) {
    case IR_OP_ADD: case IR_OP_SUM: return (int64_t)(ux + uy);
    case IR_OP_SUB: return (int64_t)(ux - uy);
    case IR_OP_MUL: return (int64_t)(ux * uy);
    case IR_OP_DIV:
        if (y == 0) {
            *err = true;
            return 0;
        }
        if (uns) return (int64_t)(ux / uy);
        if (x == INT64_MIN && y == -1) return x;
        return x / y;
    case IR_OP_MOD: {
        if (y == 0) {
            *err = true;
            return 0;
        }
        if (uns) return (int64_t)(ux % uy);
        if (y == -1) return 0;
        int64_t r = x % y;
        if (!fmod_mode && r != 0 && ((r < 0) != (y < 0))) r += y;
        return r;
    }
    case IR_OP_POW: return ipow(x, y);
    case IR_OP_PRELU: return (!uns && x < 0) ? (int64_t)(ux * uy) : x;
    case IR_OP_MAX: return uns ? (ux >= uy ? x : y) : (x >= y ? x : y);
    case IR_OP_MIN: return uns ? (ux <= uy ? x : y) : (x <= y ? x : y);
    case IR_OP_BIT_SHIFT:
        if (uy >= 64) return 0;
        return (int64_t)(left ? ux << uy : ux >> uy);
    case IR_OP_BITWISE_AND: return (int64_t)(ux & uy);
    case IR_OP_BITWISE_OR: return (int64_t)(ux | uy);
    case IR_OP_BITWISE_XOR: return (int64_t)(ux ^ uy);
    default: return 0;
    }
}

static bool cmp_f(IrOp op, double x, double y) {
    switch (op) {
    case IR_OP_EQUAL: return x == y;
    case IR_OP_GREATER: return x > y;
    case IR_OP_GREATER_OR_EQUAL: return x >= y;
    case IR_OP_LESS: return x < y;
    case IR_OP_LESS_OR_EQUAL: return x <= y;
    default: return false;
    }
}

static bool cmp_i(IrOp op, int64_t x, int64_t y, bool uns) {
    if (uns) {
        uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
        switch (op) {
        case IR_OP_EQUAL: return ux == uy;
        case IR_OP_GREATER: return ux > uy;
        case IR_OP_GREATER_OR_EQUAL: return ux >= uy;
        case IR_OP_LESS: return ux < uy;
        case IR_OP_LESS_OR_EQUAL: return ux <= uy;
        default: return false;
        }
    }
    switch (op) {
    case IR_OP_EQUAL: return x == y;
    case IR_OP_GREATER: return x > y;
    case IR_OP_GREATER_OR_EQUAL: return x >= y;
    case IR_OP_LESS: return x < y;
    case IR_OP_LESS_OR_EQUAL: return x <= y;
    default: return false;
    }
}

static bool is_compare(IrOp op) {
    return op == IR_OP_EQUAL || op == IR_OP_GREATER || op == IR_OP_GREATER_OR_EQUAL ||
           op == IR_OP_LESS || op == IR_OP_LESS_OR_EQUAL;
}

static bool is_logic(IrOp op) { return op == IR_OP_AND || op == IR_OP_OR || op == IR_OP_XOR; }

static int binary_kinds(IrOp op) {
    switch (op) {
    case IR_OP_BIT_SHIFT: return K_U;
    case IR_OP_BITWISE_AND: case IR_OP_BITWISE_OR: case IR_OP_BITWISE_XOR: return K_INT;
    case IR_OP_AND: case IR_OP_OR: case IR_OP_XOR: return K_B;
    case IR_OP_EQUAL: return K_ALL;
    default: return K_NUM;
    }
}

/* A float row: out[i] = x[i*sx] op y[i*sy], in float for f32 (identical to double then
 * rounding for + - * /). Returns false when op has no fast form. */
static bool row_f32(IrOp op, float *o, const float *x, int64_t sx, const float *y, int64_t sy,
                    int64_t n) {
    switch (op) {
    case IR_OP_ADD:
        for (int64_t i = 0; i < n; i++) o[i] = x[i * sx] + y[i * sy];
        return true;
    case IR_OP_SUB:
        for (int64_t i = 0; i < n; i++) o[i] = x[i * sx] - y[i * sy];
        return true;
    case IR_OP_MUL:
        for (int64_t i = 0; i < n; i++) o[i] = x[i * sx] * y[i * sy];
        return true;
    case IR_OP_DIV:
        for (int64_t i = 0; i < n; i++) o[i] = x[i * sx] / y[i * sy];
        return true;
    default: return false;
    }
}

static IrStatus binary(KernelArgs *a, IrOp op) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *y = a->in[1];
    if (x->dtype == IR_DTYPE_STRING || y->dtype == IR_DTYPE_STRING)
        return op == IR_OP_EQUAL ? interp_equal_strings(a) : bad_dtype(a, IR_DTYPE_STRING);
    int kx = dkind(x->dtype), ky = dkind(y->dtype);
    if (!(binary_kinds(op) & kx)) return bad_dtype(a, x->dtype);
    if (op == IR_OP_POW) {
        if (!(ky & K_NUM)) return bad_dtype(a, y->dtype);
    } else if (x->dtype != y->dtype) {
        char msg[96];
        snprintf(msg, sizeof msg, "mixed dtypes %s and %s", ir_dtype_name(x->dtype), ir_dtype_name(y->dtype));
        return interp_unsupported(a, msg);
    }
    bool fmod_mode = op == IR_OP_MOD && interp_attr_int(a, "fmod") != 0;
    bool left = false;
    if (op == IR_OP_BIT_SHIFT) {
        const char *dir = interp_attr_string(a, "direction");
        if (dir && strcmp(dir, "LEFT") == 0) left = true;
        else if (!dir || strcmp(dir, "RIGHT") != 0)
            return interp_error(a, "direction must be LEFT or RIGHT, not '%s'", dir ? dir : "");
    }
    bool to_bool = is_compare(op) || is_logic(op);
    const IrTensor *ins[2] = {x, y};
    if ((s = bcast_alloc(a, ins, 2, to_bool ? IR_DTYPE_BOOL : x->dtype))) return s;
    IrTensor *out = &a->out[0];
    Bcast b;
    bcast_init(&b, out, ins, 2);
    int64_t n = b.dims[b.rank - 1], so = b.st[0][b.rank - 1], sx = b.st[1][b.rank - 1],
            sy = b.st[2][b.rank - 1];
    bool fast = x->dtype == IR_DTYPE_F32 && y->dtype == IR_DTYPE_F32 && !to_bool && so == 1;
    bool uns = kx == K_U, err = false;
    for (int64_t r = 0; r < b.rows; r++, bcast_next_row(&b)) {
        int64_t oo = b.off[0], ox = b.off[1], oy = b.off[2];
        if (fast && row_f32(op, (float *)out->data + oo, (const float *)x->data + ox, sx,
                            (const float *)y->data + oy, sy, n))
            continue;
        for (int64_t i = 0; i < n; i++, oo += so, ox += sx, oy += sy) {
            if (is_logic(op)) {
                bool p = interp_get_i(x, ox) != 0, q = interp_get_i(y, oy) != 0;
                bool v = op == IR_OP_AND ? (p && q) : op == IR_OP_OR ? (p || q) : (p != q);
                ((uint8_t *)out->data)[oo] = v;
            } else if (is_compare(op)) {
                bool v = kx == K_F ? cmp_f(op, interp_get_f(x, ox), interp_get_f(y, oy))
                                   : cmp_i(op, interp_get_i(x, ox), interp_get_i(y, oy), uns);
                ((uint8_t *)out->data)[oo] = v;
            } else if (kx == K_F) {
                interp_set_f(out, oo, bin_f(op, interp_get_f(x, ox), interp_get_f(y, oy), fmod_mode));
            } else if (op == IR_OP_POW && ky == K_F) {
                interp_set_f(out, oo, pow((double)interp_get_i(x, ox), interp_get_f(y, oy)));
            } else {
                interp_set_i(out, oo, bin_i(op, interp_get_i(x, ox), interp_get_i(y, oy), uns,
                                            fmod_mode, left, &err));
            }
        }
    }
    if (err) return interp_error(a, "integer division by zero");
    return IR_OK;
}

#define BINARY(ID)                                                                             \
    IrStatus interp_##ID(KernelArgs *a) { return binary(a, IR_OP_##ID); }
BINARY(ADD)
BINARY(SUB)
BINARY(MUL)
BINARY(DIV)
BINARY(POW)
BINARY(MOD)
BINARY(PRELU)
BINARY(BIT_SHIFT)
BINARY(BITWISE_AND)
BINARY(BITWISE_OR)
BINARY(BITWISE_XOR)
BINARY(AND)
BINARY(OR)
BINARY(XOR)
BINARY(EQUAL)
BINARY(GREATER)
BINARY(GREATER_OR_EQUAL)
BINARY(LESS)
BINARY(LESS_OR_EQUAL)
#undef BINARY

/* ---- variadic Max / Min / Sum / Mean ---------------------------------------------------- */

static IrStatus variadic(KernelArgs *a, IrOp op) {
    if (a->n_in == 0) return interp_error(a, "needs at least one input");
    for (uint32_t k = 0; k < a->n_in; k++) {
        IrStatus s = need_input(a, k);
        if (s) return s;
        if (a->in[k]->dtype != a->in[0]->dtype) {
            char msg[96];
            snprintf(msg, sizeof msg, "mixed dtypes %s and %s", ir_dtype_name(a->in[0]->dtype),
                     ir_dtype_name(a->in[k]->dtype));
            return interp_unsupported(a, msg);
        }
    }
    IrDType dt = a->in[0]->dtype;
    int kind = dkind(dt);
    if (!(kind & (op == IR_OP_MEAN ? K_F : K_NUM))) return bad_dtype(a, dt);
    uint32_t n_in = a->n_in;
    IrStatus s = bcast_alloc(a, a->in, n_in, dt);
    if (s) return s;
    IrTensor *out = &a->out[0];
    Bcast *b = malloc(sizeof *b);
    if (!b) return interp_error(a, "out of memory");
    bcast_init(b, out, a->in, n_in);
    int64_t n = b->dims[b->rank - 1];
    bool uns = kind == K_U, err = false;
    IrOp fold = op == IR_OP_MEAN ? IR_OP_SUM : op;
    if (dt == IR_DTYPE_F32 && n_in == 2 && op != IR_OP_MEAN && b->st[0][b->rank - 1] == 1) {
        /* two f32 operands: one rounding either way, so a float loop gives the same bits */
        int64_t s1 = b->st[1][b->rank - 1], s2 = b->st[2][b->rank - 1];
        const float *x = a->in[0]->data, *y = a->in[1]->data;
        for (int64_t r = 0; r < b->rows; r++, bcast_next_row(b)) {
            float *o = (float *)out->data + b->off[0];
            const float *xp = x + b->off[1], *yp = y + b->off[2];
            if (op == IR_OP_SUM)
                for (int64_t i = 0; i < n; i++) o[i] = xp[i * s1] + yp[i * s2];
            else
                for (int64_t i = 0; i < n; i++) o[i] = (float)bin_f(op, xp[i * s1], yp[i * s2], false);
        }
        free(b);
        return IR_OK;
    }
    for (int64_t r = 0; r < b->rows; r++, bcast_next_row(b)) {
        for (int64_t i = 0; i < n; i++) {
            int64_t oo = b->off[0] + i * b->st[0][b->rank - 1];
            const IrTensor *t0 = a->in[0];
            int64_t o0 = b->off[1] + i * b->st[1][b->rank - 1];
            if (kind == K_F) {
                double acc = interp_get_f(t0, o0);
                for (uint32_t k = 1; k < n_in; k++)
                    acc = bin_f(fold, acc, interp_get_f(a->in[k], b->off[k + 1] + i * b->st[k + 1][b->rank - 1]), false);
                if (op == IR_OP_MEAN) acc /= n_in;
                interp_set_f(out, oo, acc);
            } else {
                int64_t acc = interp_get_i(t0, o0);
                for (uint32_t k = 1; k < n_in; k++)
                    acc = bin_i(fold, acc, interp_get_i(a->in[k], b->off[k + 1] + i * b->st[k + 1][b->rank - 1]), uns, false, false, &err);
                interp_set_i(out, oo, acc);
            }
        }
    }
    free(b);
    return IR_OK;
}

IrStatus interp_MAX(KernelArgs *a) { return variadic(a, IR_OP_MAX); }
IrStatus interp_MIN(KernelArgs *a) { return variadic(a, IR_OP_MIN); }
IrStatus interp_SUM(KernelArgs *a) { return variadic(a, IR_OP_SUM); }
IrStatus interp_MEAN(KernelArgs *a) { return variadic(a, IR_OP_MEAN); }

/* ---- Where ------------------------------------------------------------------------------ */

IrStatus interp_WHERE(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1)) || (s = need_input(a, 2))) return s;
    const IrTensor *c = a->in[0], *x = a->in[1], *y = a->in[2];
    if (c->dtype != IR_DTYPE_BOOL) return interp_error(a, "condition must be bool, not %s", ir_dtype_name(c->dtype));
    if (x->dtype != y->dtype)
        return interp_error(a, "X is %s but Y is %s", ir_dtype_name(x->dtype), ir_dtype_name(y->dtype));
    const IrTensor *ins[3] = {c, x, y};
    if ((s = bcast_alloc(a, ins, 3, x->dtype))) return s;
    IrTensor *out = &a->out[0];
    Bcast *b = malloc(sizeof *b);
    if (!b) return interp_error(a, "out of memory");
    bcast_init(b, out, ins, 3);
    size_t es = ir_dtype_size(x->dtype);
    int64_t n = b->dims[b->rank - 1], R = b->rank - 1;
    const uint8_t *cp = c->data;
    for (int64_t r = 0; r < b->rows; r++, bcast_next_row(b)) {
        for (int64_t i = 0; i < n; i++) {
            bool take_x = cp[b->off[1] + i * b->st[1][R]] != 0;
            const IrTensor *src = take_x ? x : y;
            int64_t so = take_x ? b->off[2] + i * b->st[2][R] : b->off[3] + i * b->st[3][R];
            memcpy((char *)out->data + (size_t)(b->off[0] + i * b->st[0][R]) * es,
                   (const char *)src->data + (size_t)so * es, es);
        }
    }
    free(b);
    return IR_OK;
}
