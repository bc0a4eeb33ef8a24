/* Normalization kernels: BatchNormalization (inference and training mode), Instance, Layer,
 * Group, Lp and MeanVariance normalization, LRN.
 *
 * Statistics are computed in double with two passes (mean, then the mean of squared
 * deviations), in a fixed order; results are rounded once into the output dtype. Every
 * kernel is written over (outer, reduced, inner) blocks of the row-major layout.
 */
#include "validate/interp.h"

#include <math.h>
#include <stdlib.h>

#define MAXR IR_MAX_RANK

static IrStatus need_input(KernelArgs *a, uint32_t i) {
    if (i < a->n_in && a->in[i]) return IR_OK;
    return interp_error(a, "input %u is missing", i);
}

static IrStatus need_float(KernelArgs *a, const IrTensor *t) {
    if (ir_dtype_is_float(t->dtype)) return IR_OK;
    char msg[64];
    snprintf(msg, sizeof msg, "dtype %s", ir_dtype_name(t->dtype));
    return interp_unsupported(a, msg);
}

static bool want_output(KernelArgs *a, uint32_t i) {
    return i < a->n_out && ir_node_result(a->g, a->node, i) != 0;
}

/* A per-channel parameter vector of length c (1-D, or any shape with c elements). */
static IrStatus check_vec(KernelArgs *a, uint32_t i, int64_t c, const char *what) {
    IrStatus s = need_input(a, i);
    if (s) return s;
    if (ir_tensor_numel(a->in[i]) != c)
        return interp_error(a, "%s has %lld elements, expected %lld", what,
                            (long long)ir_tensor_numel(a->in[i]), (long long)c);
    return IR_OK;
}

/* Mean and population variance of n elements at base, base+stride, ... */
static void stats(const IrTensor *x, int64_t base, int64_t stride, int64_t n, double *mean, double *var) {
    double s = 0;
    for (int64_t k = 0; k < n; k++) s += interp_get_f(x, base + k * stride);
    double m = n ? s / (double)n : 0, q = 0;
    for (int64_t k = 0; k < n; k++) {
        double d = interp_get_f(x, base + k * stride) - m;
        q += d * d;
    }
    *mean = m;
    *var = n ? q / (double)n : 0;
}

/* ---- BatchNormalization ----------------------------------------------------------------- */

/* y[n, c, ...] = (x - mean[c]) * scale[c] / sqrt(var[c] + eps) + b[c] */
static void bn_apply(const IrTensor *x, IrTensor *y, int64_t N, int64_t C, int64_t S,
                     const double *mean, const double *k, const double *b) {
    if (x->dtype == IR_DTYPE_F32) {
        const float *xp = x->data;
        float *yp = y->data;
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++) {
                int64_t base = (n * C + c) * S;
                double m = mean[c], kk = k[c], bb = b[c];
                for (int64_t i = 0; i < S; i++) yp[base + i] = (float)((xp[base + i] - m) * kk + bb);
            }
        return;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            int64_t base = (n * C + c) * S;
            for (int64_t i = 0; i < S; i++)
                interp_set_f(y, base + i, (interp_get_f(x, base + i) - mean[c]) * k[c] + b[c]);
        }
}

IrStatus interp_BATCH_NORMALIZATION(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if ((s = need_float(a, x))) return s;
    if (x->rank < 2) return interp_error(a, "input has rank %u, expected at least 2", x->rank);
    int64_t N = x->dims[0], C = x->dims[1], S = ir_shape_numel(x->rank - 2, x->dims + 2);
    if ((s = check_vec(a, 1, C, "scale")) || (s = check_vec(a, 2, C, "B")) ||
        (s = check_vec(a, 3, C, "input_mean")) || (s = check_vec(a, 4, C, "input_var")))
        return s;
    double eps = interp_attr_float(a, "epsilon"), mom = interp_attr_float(a, "momentum");
    bool training = interp_attr_int(a, "training_mode") != 0;
    double *buf = malloc((size_t)(C ? C : 1) * 5 * sizeof *buf);
    if (!buf) return interp_error(a, "out of memory");
    double *mean = buf, *var = buf + C, *k = buf + 2 * C, *b = buf + 3 * C, *tmp = buf + 4 * C;
    for (int64_t c = 0; c < C; c++) {
        mean[c] = interp_get_f(a->in[3], c);
        var[c] = interp_get_f(a->in[4], c);
        b[c] = interp_get_f(a->in[2], c);
        tmp[c] = mean[c]; /* running mean and var: the inputs unless training */
        k[c] = var[c];
    }
    if (training) {
        /* batch statistics over every axis but 1; running stats blend with momentum */
        for (int64_t c = 0; c < C; c++) {
            double sum = 0, q = 0;
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) sum += interp_get_f(x, (n * C + c) * S + i);
            double m = N * S != 0 ? sum / (double)(N * S) : 0;
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) {
                    double d = interp_get_f(x, (n * C + c) * S + i) - m;
                    q += d * d;
                }
            tmp[c] = N * S != 0 ? q / (double)(N * S) : 0;
            double rm = mean[c] * mom + m * (1 - mom), rv = var[c] * mom + tmp[c] * (1 - mom);
            mean[c] = m;
            var[c] = tmp[c];
            tmp[c] = rm;
            k[c] = rv; /* parked until the outputs exist */
        }
    }
    for (uint32_t i = 1; i < 3; i++) {
        if (!want_output(a, i)) continue;
        const IrTensor *like = a->in[2 + i];
        if ((s = interp_alloc_output(a, i, like->dtype, like->rank, like->dims))) goto out;
        for (int64_t c = 0; c < C; c++) interp_set_f(&a->out[i], c, i == 1 ? tmp[c] : k[c]);
    }
    for (int64_t c = 0; c < C; c++) k[c] = interp_get_f(a->in[1], c) / sqrt(var[c] + eps);
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) goto out;
    bn_apply(x, &a->out[0], N, C, S, mean, k, b);
out:
    free(buf);
    return s;
}

/* ---- InstanceNormalization / GroupNormalization ----------------------------------------- */

/* Normalizes each of N*G contiguous groups of (C/G)*S elements; scale and bias per channel
 * (numel C) or per group (numel G). */
static IrStatus group_norm(KernelArgs *a, int64_t G) {
    const IrTensor *x = a->in[0];
    int64_t N = x->dims[0], C = x->dims[1], S = ir_shape_numel(x->rank - 2, x->dims + 2);
    if (G <= 0 || C % G) return interp_error(a, "num_groups %lld does not divide %lld channels", (long long)G, (long long)C);
    IrStatus s;
    if ((s = need_input(a, 1)) || (s = need_input(a, 2))) return s;
    const IrTensor *sc = a->in[1], *bi = a->in[2];
    int64_t ns = ir_tensor_numel(sc), nb = ir_tensor_numel(bi);
    if ((ns != C && ns != G) || (nb != C && nb != G))
        return interp_error(a, "scale and bias need %lld (channels) or %lld (groups) elements, have %lld and %lld",
                            (long long)C, (long long)G, (long long)ns, (long long)nb);
    double eps = interp_attr_float(a, "epsilon");
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
    IrTensor *y = &a->out[0];
    int64_t cg = C / G;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            int64_t base = (n * C + g * cg) * S;
            double m, v;
            stats(x, base, 1, cg * S, &m, &v);
            double inv = 1.0 / sqrt(v + eps);
            for (int64_t c = 0; c < cg; c++) {
                int64_t ch = g * cg + c;
                double k = interp_get_f(sc, ns == C ? ch : g), b = interp_get_f(bi, nb == C ? ch : g);
                for (int64_t i = 0; i < S; i++) {
                    int64_t p = base + c * S + i;
                    interp_set_f(y, p, (interp_get_f(x, p) - m) * inv * k + b);
                }
            }
        }
    return IR_OK;
}

IrStatus interp_INSTANCE_NORMALIZATION(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if ((s = need_float(a, x))) return s;
    if (x->rank < 2) return interp_error(a, "input has rank %u, expected at least 2", x->rank);
    return group_norm(a, x->dims[1]);
}

IrStatus interp_GROUP_NORMALIZATION(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if ((s = need_float(a, x))) return s;
    if (x->rank < 2) return interp_error(a, "input has rank %u, expected at least 2", x->rank);
    return group_norm(a, interp_attr_int(a, "num_groups"));
}

/* ---- LayerNormalization ----------------------------------------------------------------- */

/* Index of a parameter tensor t broadcast (numpy rules) to the shape dims[0..nd), for each
 * row-major position j of that shape; false when t does not broadcast. */
static bool bcast_map(const IrTensor *t, uint32_t nd, const int64_t *dims, int64_t *map, int64_t count) {
    int64_t st[MAXR], idx[MAXR] = {0};
    if (!ir_shape_broadcast_strides(t->rank, t->dims, nd, dims, st)) return false;
    for (int64_t j = 0; j < count; j++) {
        int64_t off = 0;
        for (uint32_t i = 0; i < nd; i++) off += idx[i] * st[i];
        map[j] = off;
        ir_shape_index_next(nd, dims, idx);
    }
    return true;
}

IrStatus interp_LAYER_NORMALIZATION(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *sc = a->in[1], *bi = a->n_in > 2 ? a->in[2] : NULL;
    if ((s = need_float(a, x))) return s;
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, x->rank))
        return interp_error(a, "axis %lld is out of range for rank %u", (long long)interp_attr_int(a, "axis"), x->rank);
    double eps = interp_attr_float(a, "epsilon");
    int64_t outer = ir_shape_numel((uint32_t)axis, x->dims), inner = ir_shape_numel(x->rank - (uint32_t)axis, x->dims + axis);
    uint32_t nd = x->rank - (uint32_t)axis;
    int64_t *map = malloc((size_t)(inner ? inner : 1) * 2 * sizeof *map);
    if (!map) return interp_error(a, "out of memory");
    int64_t *bmap = map + inner;
    if (!bcast_map(sc, nd, x->dims + axis, map, inner)) {
        free(map);
        return interp_error(a, "Scale does not broadcast to the normalized shape");
    }
    if (bi && !bcast_map(bi, nd, x->dims + axis, bmap, inner)) {
        free(map);
        return interp_error(a, "B does not broadcast to the normalized shape");
    }
    int64_t sdims[MAXR];
    for (uint32_t d = 0; d < x->rank; d++) sdims[d] = d < axis ? x->dims[d] : 1;
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) goto out;
    for (uint32_t i = 1; i < 3; i++)
        if (want_output(a, i) && (s = interp_alloc_output(a, i, IR_DTYPE_F32, x->rank, sdims))) goto out;
    IrTensor *y = &a->out[0];
    for (int64_t o = 0; o < outer; o++) {
        double m, v;
        stats(x, o * inner, 1, inner, &m, &v);
        double inv = 1.0 / sqrt(v + eps);
        for (int64_t j = 0; j < inner; j++) {
            int64_t p = o * inner + j;
            double r = (interp_get_f(x, p) - m) * inv * interp_get_f(sc, map[j]);
            if (bi) r += interp_get_f(bi, bmap[j]);
            interp_set_f(y, p, r);
        }
        if (want_output(a, 1)) interp_set_f(&a->out[1], o, m);
        if (want_output(a, 2)) interp_set_f(&a->out[2], o, inv);
    }
out:
    free(map);
    return s;
}

/* ---- LpNormalization -------------------------------------------------------------------- */

IrStatus interp_LP_NORMALIZATION(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if ((s = need_float(a, x))) return s;
    int64_t axis = interp_attr_int(a, "axis"), p = interp_attr_int(a, "p");
    if (!ir_shape_axis_checked(&axis, x->rank))
        return interp_error(a, "axis %lld is out of range for rank %u", (long long)interp_attr_int(a, "axis"), x->rank);
    if (p != 1 && p != 2) return interp_error(a, "p must be 1 or 2, not %lld", (long long)p);
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
    IrTensor *y = &a->out[0];
    int64_t outer, n, inner;
    ir_shape_split(x->rank, x->dims, (uint32_t)axis, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double acc = 0;
            for (int64_t k = 0; k < n; k++) {
                double v = interp_get_f(x, base + k * inner);
                acc += p == 1 ? fabs(v) : v * v;
            }
            double norm = p == 1 ? acc : sqrt(acc);
            for (int64_t k = 0; k < n; k++) {
                int64_t q = base + k * inner;
                interp_set_f(y, q, norm == 0 ? 0.0 : interp_get_f(x, q) / norm);
            }
        }
    return IR_OK;
}

/* ---- LRN -------------------------------------------------------------------------------- */

IrStatus interp_LRN(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if ((s = need_float(a, x))) return s;
    if (x->rank < 2) return interp_error(a, "input has rank %u, expected at least 2", x->rank);
    int64_t size = interp_attr_int(a, "size");
    if (size <= 0) return interp_error(a, "size must be positive, not %lld", (long long)size);
    double alpha = interp_attr_float(a, "alpha"), beta = interp_attr_float(a, "beta"),
           bias = interp_attr_float(a, "bias");
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
    IrTensor *y = &a->out[0];
    int64_t N = x->dims[0], C = x->dims[1], S = ir_shape_numel(x->rank - 2, x->dims + 2);
    int64_t lo_off = (size - 1) / 2, hi_off = size - 1 - lo_off;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            int64_t lo = c - lo_off < 0 ? 0 : c - lo_off, hi = c + hi_off >= C ? C - 1 : c + hi_off;
            for (int64_t i = 0; i < S; i++) {
                double sq = 0;
                for (int64_t j = lo; j <= hi; j++) {
                    double v = interp_get_f(x, (n * C + j) * S + i);
                    sq += v * v;
                }
                int64_t p = (n * C + c) * S + i;
                interp_set_f(y, p, interp_get_f(x, p) / pow(bias + alpha / (double)size * sq, beta));
            }
        }
    return IR_OK;
}

/* ---- MeanVarianceNormalization ---------------------------------------------------------- */

/* (x - mean) / (sqrt(var) + 1e-9) with mean and variance over `axes` (default 0, 2, 3), as
 * the ONNX function body defines it. */
IrStatus interp_MEAN_VARIANCE_NORMALIZATION(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if ((s = need_float(a, x))) return s;
    int64_t axes[MAXR];
    int nax = interp_attr_ints(a, "axes", axes, MAXR);
    if (nax < 0) {
        nax = 3;
        axes[0] = 0;
        axes[1] = 2;
        axes[2] = 3;
    }
    if (nax > MAXR) return interp_error(a, "too many axes");
    bool mask[MAXR] = {0};
    for (int i = 0; i < nax; i++) {
        int64_t ax = axes[i];
        if (!ir_shape_axis_checked(&ax, x->rank))
            return interp_error(a, "axis %lld is out of range for rank %u", (long long)axes[i], x->rank);
        mask[ax] = true;
    }
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
    IrTensor *y = &a->out[0];
    int64_t n = ir_tensor_numel(x);
    /* per-element index of its statistics slot: the position among kept dims */
    int64_t ost[MAXR], nslots = 1;
    for (uint32_t d = x->rank; d-- > 0;) {
        ost[d] = mask[d] ? 0 : nslots;
        if (!mask[d]) nslots *= x->dims[d];
    }
    double *acc = calloc((size_t)(nslots ? nslots : 1) * 3, sizeof *acc);
    int64_t *slot = malloc((size_t)(n ? n : 1) * sizeof *slot);
    if (!acc || !slot) {
        free(acc);
        free(slot);
        return interp_error(a, "out of memory");
    }
    double *sum = acc, *sq = acc + nslots, *cnt = acc + 2 * nslots;
    int64_t idx[MAXR] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t o = 0;
        for (uint32_t d = 0; d < x->rank; d++) o += idx[d] * ost[d];
        slot[i] = o;
        ir_shape_index_next(x->rank, x->dims, idx);
    }
    for (int64_t i = 0; i < n; i++) {
        sum[slot[i]] += interp_get_f(x, i);
        cnt[slot[i]] += 1;
    }
    for (int64_t j = 0; j < nslots; j++) sum[j] = cnt[j] ? sum[j] / cnt[j] : 0;
    for (int64_t i = 0; i < n; i++) {
        double d = interp_get_f(x, i) - sum[slot[i]];
        sq[slot[i]] += d * d;
    }
    for (int64_t j = 0; j < nslots; j++) sq[j] = sqrt(cnt[j] ? sq[j] / cnt[j] : 0) + 1e-9;
    for (int64_t i = 0; i < n; i++) interp_set_f(y, i, (interp_get_f(x, i) - sum[slot[i]]) / sq[slot[i]]);
    free(acc);
    free(slot);
    return IR_OK;
}
