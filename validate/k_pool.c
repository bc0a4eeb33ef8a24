/* Pooling and sampling kernels: Average/Max/Lp pools (windowed and global), MaxRoiPool,
 * MaxUnpool, RoiAlign, Resize, GridSample, Col2Im and NonMaxSuppression.
 *
 * Values are read into double, combined in double in a fixed order and rounded once into the
 * output dtype; spatial dims are padded to three (leading size-1 dims) so every windowed loop is
 * 3-D. Semantics follow ONNX opset 17 and its reference implementation.
 */
#include "validate/interp.h"
#include "ir/kernels_shared.h"
#include "ir/nms.h"
#include "ir/resize_taps.h"

#include <math.h>
#include <stdlib.h>

static int64_t numel(const IrTensor *t) { return ir_tensor_numel(t); }

static IrStatus oom(KernelArgs *a) {
    interp_error(a, "out of memory");
    return IR_ENOMEM;
}

static double *to_f64(const IrTensor *t) {
    int64_t n = numel(t);
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (!d) return NULL;
    if (t->dtype == IR_DTYPE_F32)
        for (int64_t i = 0; i < n; i++) d[i] = ((const float *)t->data)[i];
    else
        for (int64_t i = 0; i < n; i++) d[i] = interp_get_f(t, i);
    return d;
}

static void store_f64(IrTensor *t, const double *v, int64_t n) {
    if (t->dtype == IR_DTYPE_F32)
        for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = (float)v[i];
    else
        for (int64_t i = 0; i < n; i++) interp_set_f(t, i, v[i]);
}

/* ---- windowed pools ------------------------------------------------------------------------ */

typedef InterpWindow PoolGeom;

static IrStatus pool_geom(KernelArgs *a, const IrTensor *X, PoolGeom *g, bool allow_ceil) {
    if (X->rank < 3 || X->rank > 5) return interp_error(a, "input must have rank 3..5 (got %u)", X->rank);
    uint32_t r = X->rank - 2;
    g->r = r;
    g->N = X->dims[0];
    g->C = X->dims[1];
    int64_t v[6];
    int n = interp_attr_ints(a, "kernel_shape", v, 6);
    if (n != (int)r) return interp_error(a, "kernel_shape must have %u entries", r);
    for (uint32_t i = 0; i < r; i++) {
        g->in[i] = X->dims[2 + i];
        g->k[i] = v[i];
        if (g->k[i] < 1) return interp_error(a, "kernel_shape entries must be positive");
    }
    return interp_window_finish(a, g, allow_ceil && interp_attr_int(a, "ceil_mode") != 0);
}

typedef enum PoolKind { POOL_AVG, POOL_MAX, POOL_LP } PoolKind;

static IrStatus pool_run(KernelArgs *a, PoolKind kind) {
    const IrTensor *X = a->in[0];
    PoolGeom g = {0};
    IrStatus st = pool_geom(a, X, &g, kind != POOL_LP);
    if (st) return st;
    int64_t od[5] = {g.N, g.C};
    for (uint32_t i = 0; i < g.r; i++) od[2 + i] = g.out[3 - g.r + i];
    if ((st = interp_alloc_output(a, 0, X->dtype, X->rank, od))) return st;
    bool want_idx = kind == POOL_MAX && a->n_out > 1 && ir_node_result(a->g, a->node, 1) != 0;
    if (want_idx && (st = interp_alloc_output(a, 1, IR_DTYPE_I64, X->rank, od))) return st;
    bool include_pad = kind == POOL_AVG && interp_attr_int(a, "count_include_pad") != 0;
    bool col_major = want_idx && interp_attr_int(a, "storage_order") != 0;
    double p = kind == POOL_LP ? (double)interp_attr_int(a, "p") : 0;
    int64_t total = numel(&a->out[0]);
    double *x = to_f64(X), *y = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    if (!x || !y) {
        free(x), free(y);
        return oom(a);
    }
    int64_t isz = g.in[0] * g.in[1] * g.in[2];
    int64_t e = 0;
    for (int64_t nc = 0; nc < g.N * g.C; nc++) {
        const double *xc = x + nc * isz;
        for (int64_t o0 = 0; o0 < g.out[0]; o0++)
            for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                for (int64_t o2 = 0; o2 < g.out[2]; o2++, e++) {
                    int64_t o[3] = {o0, o1, o2}, lo[3], hi[3];
                    int64_t padded = 1;
                    for (int i = 0; i < 3; i++) {
                        lo[i] = o[i] * g.s[i] - g.pb[i];
                        /* window extent clipped to the explicitly padded input (count_include_pad) */
                        int64_t last = lo[i] + (g.k[i] - 1) * g.d[i];
                        int64_t lim = g.in[i] + g.pe[i] - 1;
                        int64_t cnt = 0;
                        for (int64_t q = lo[i]; q <= last; q += g.d[i])
                            if (q <= lim) cnt++;
                        padded *= cnt;
                        hi[i] = last;
                    }
                    double acc = kind == POOL_MAX ? -INFINITY : 0;
                    int64_t arg = -1, cnt = 0;
                    for (int64_t i0 = lo[0]; i0 <= hi[0]; i0 += g.d[0]) {
                        if (i0 < 0 || i0 >= g.in[0]) continue;
                        for (int64_t i1 = lo[1]; i1 <= hi[1]; i1 += g.d[1]) {
                            if (i1 < 0 || i1 >= g.in[1]) continue;
                            for (int64_t i2 = lo[2]; i2 <= hi[2]; i2 += g.d[2]) {
                                if (i2 < 0 || i2 >= g.in[2]) continue;
                                int64_t off = (i0 * g.in[1] + i1) * g.in[2] + i2;
                                double v = xc[off];
                                cnt++;
                                if (kind == POOL_MAX) {
                                    if (arg < 0 || v > acc || (isnan(v) && !isnan(acc))) acc = v, arg = off; /* the first NaN wins */
                                } else if (kind == POOL_AVG) {
                                    acc += v;
                                } else {
                                    acc += pow(fabs(v), p);
                                }
                            }
                        }
                    }
                    if (kind == POOL_AVG) acc = acc / (double)(include_pad ? padded : cnt);
                    else if (kind == POOL_LP) acc = pow(acc, 1.0 / p);
                    y[e] = acc;
                    if (want_idx) {
                        int64_t idx = arg < 0 ? 0 : arg;
                        if (col_major) {
                            /* column-major within the spatial block: the first spatial axis
                             * varies fastest (the padded leading axes have size 1) */
                            int64_t j[3] = {idx / (g.in[1] * g.in[2]), (idx / g.in[2]) % g.in[1], idx % g.in[2]};
                            idx = j[0] + g.in[0] * (j[1] + g.in[1] * j[2]);
                        }
                        ((int64_t *)a->out[1].data)[e] = nc * isz + idx;
                    }
                }
    }
    store_f64(&a->out[0], y, total);
    free(x), free(y);
    return IR_OK;
}

IrStatus interp_AVERAGE_POOL(KernelArgs *a) { return pool_run(a, POOL_AVG); }
IrStatus interp_MAX_POOL(KernelArgs *a) { return pool_run(a, POOL_MAX); }
IrStatus interp_LP_POOL(KernelArgs *a) { return pool_run(a, POOL_LP); }

static IrStatus global_pool(KernelArgs *a, PoolKind kind) {
    const IrTensor *X = a->in[0];
    if (X->rank < 2) return interp_error(a, "input must have rank >= 2");
    int64_t od[IR_MAX_RANK];
    od[0] = X->dims[0];
    od[1] = X->dims[1];
    int64_t sp = 1;
    for (uint32_t i = 2; i < X->rank; i++) od[i] = 1, sp *= X->dims[i];
    IrStatus st = interp_alloc_output(a, 0, X->dtype, X->rank, od);
    if (st) return st;
    double p = kind == POOL_LP ? (double)interp_attr_int(a, "p") : 0;
    int64_t nc = X->dims[0] * X->dims[1];
    for (int64_t c = 0; c < nc; c++) {
        double acc = kind == POOL_MAX ? -INFINITY : 0;
        for (int64_t i = 0; i < sp; i++) {
            double v = X->dtype == IR_DTYPE_F32 ? ((const float *)X->data)[c * sp + i] : interp_get_f(X, c * sp + i);
            if (kind == POOL_MAX) acc = v > acc || v != v ? v : acc;
            else if (kind == POOL_AVG) acc += v;
            else acc += pow(fabs(v), p);
        }
        if (kind == POOL_AVG) acc /= (double)sp;
        else if (kind == POOL_LP) acc = pow(acc, 1.0 / p);
        interp_set_f(&a->out[0], c, acc);
    }
    return IR_OK;
}

IrStatus interp_GLOBAL_AVERAGE_POOL(KernelArgs *a) { return global_pool(a, POOL_AVG); }
IrStatus interp_GLOBAL_MAX_POOL(KernelArgs *a) { return global_pool(a, POOL_MAX); }
IrStatus interp_GLOBAL_LP_POOL(KernelArgs *a) { return global_pool(a, POOL_LP); }

/* ---- MaxRoiPool (Caffe semantics) ---------------------------------------------------------- */

IrStatus interp_MAX_ROI_POOL(KernelArgs *a) {
    const IrTensor *X = a->in[0], *R = a->in[1];
    if (X->rank != 4 || R->rank != 2 || R->dims[1] != 5) return interp_error(a, "expects X [N, C, H, W] and rois [R, 5]");
    int64_t ps[2];
    if (interp_attr_ints(a, "pooled_shape", ps, 2) != 2) return interp_error(a, "pooled_shape must have 2 entries");
    double scale = interp_attr_float(a, "spatial_scale");
    int64_t C = X->dims[1], H = X->dims[2], W = X->dims[3], nr = R->dims[0];
    if (H == 0 || W == 0) return interp_error(a, "the feature map is empty");
    int64_t od[4] = {nr, C, ps[0], ps[1]};
    IrStatus st = interp_alloc_output(a, 0, X->dtype, 4, od);
    if (st) return st;
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = (int64_t)interp_get_f(R, r * 5);
        if (b < 0 || b >= X->dims[0]) return interp_error(a, "roi %lld has batch index %lld out of range", (long long)r, (long long)b);
        int64_t x1 = (int64_t)round(interp_get_f(R, r * 5 + 1) * scale), y1 = (int64_t)round(interp_get_f(R, r * 5 + 2) * scale);
        int64_t x2 = (int64_t)round(interp_get_f(R, r * 5 + 3) * scale), y2 = (int64_t)round(interp_get_f(R, r * 5 + 4) * scale);
        int64_t rh = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1, rw = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1;
        double bh = (double)rh / (double)ps[0], bw = (double)rw / (double)ps[1];
        for (int64_t c = 0; c < C; c++)
            for (int64_t ph = 0; ph < ps[0]; ph++)
                for (int64_t pw = 0; pw < ps[1]; pw++) {
                    int64_t hs = (int64_t)floor((double)ph * bh) + y1, he = (int64_t)ceil((double)(ph + 1) * bh) + y1;
                    int64_t ws = (int64_t)floor((double)pw * bw) + x1, we = (int64_t)ceil((double)(pw + 1) * bw) + x1;
                    hs = hs < 0 ? 0 : hs > H ? H : hs;
                    he = he < 0 ? 0 : he > H ? H : he;
                    ws = ws < 0 ? 0 : ws > W ? W : ws;
                    we = we < 0 ? 0 : we > W ? W : we;
                    double m = -INFINITY;
                    bool empty = he <= hs || we <= ws;
                    for (int64_t h = hs; h < he; h++)
                        for (int64_t w = ws; w < we; w++) {
                            double v = interp_get_f(X, ((b * C + c) * H + h) * W + w);
                            if (v > m) m = v;
                        }
                    interp_set_f(&a->out[0], ((r * C + c) * ps[0] + ph) * ps[1] + pw, empty ? 0 : m);
                }
    }
    return IR_OK;
}

/* ---- MaxUnpool ------------------------------------------------------------------------------ */

IrStatus interp_MAX_UNPOOL(KernelArgs *a) {
    const IrTensor *X = a->in[0], *I = a->in[1], *S = a->n_in > 2 ? a->in[2] : NULL;
    if (X->rank < 3 || numel(I) != numel(X)) return interp_error(a, "indices must match X, rank >= 3");
    uint32_t r = X->rank - 2;
    int64_t k[IR_MAX_RANK], s[IR_MAX_RANK], p[2 * IR_MAX_RANK];
    if (interp_attr_ints(a, "kernel_shape", k, IR_MAX_RANK) != (int)r) return interp_error(a, "kernel_shape must have %u entries", r);
    for (uint32_t i = 0; i < r; i++) s[i] = 1, p[i] = p[r + i] = 0;
    int n;
    if ((n = interp_attr_ints(a, "strides", s, IR_MAX_RANK)) > 0 && n != (int)r) return interp_error(a, "strides must have %u entries", r);
    if ((n = interp_attr_ints(a, "pads", p, 2 * IR_MAX_RANK)) > 0 && n != 2 * (int)r) return interp_error(a, "pads must have %u entries", 2 * r);
    /* scatter into the inferred shape, then place that block at the origin of output_shape
     * (as the ONNX reference does) */
    int64_t inf[IR_MAX_RANK], od[IR_MAX_RANK];
    inf[0] = X->dims[0];
    inf[1] = X->dims[1];
    for (uint32_t i = 0; i < r; i++) inf[2 + i] = (X->dims[2 + i] - 1) * s[i] + k[i] - p[i] - p[r + i];
    memcpy(od, inf, sizeof inf);
    if (S && numel(S) > 0) {
        if (numel(S) != X->rank) return interp_error(a, "output_shape must have %u entries", X->rank);
        for (uint32_t i = 0; i < X->rank; i++) {
            od[i] = interp_get_i(S, i);
            if (od[i] < inf[i]) return interp_error(a, "output_shape is smaller than the inferred shape");
        }
    }
    IrStatus st = interp_alloc_output(a, 0, X->dtype, X->rank, od);
    if (st) return st;
    int64_t total = 1;
    for (uint32_t i = 0; i < X->rank; i++) total *= inf[i];
    size_t es = ir_dtype_size(X->dtype);
    int64_t ostr[IR_MAX_RANK];
    ir_shape_strides(X->rank, od, ostr);
    for (int64_t i = 0; i < numel(X); i++) {
        int64_t idx = interp_get_i(I, i);
        if (idx < 0 || idx >= total) return interp_error(a, "index %lld out of range", (long long)idx);
        int64_t off = 0, rem = idx;
        for (uint32_t d = X->rank; d-- > 0;) off += (rem % inf[d]) * ostr[d], rem /= inf[d];
        memcpy((char *)a->out[0].data + (size_t)off * es, (const char *)X->data + (size_t)i * es, es);
    }
    return IR_OK;
}

/* ---- RoiAlign ------------------------------------------------------------------------------- */

static double roi_at(const void *x, int64_t i) { return interp_get_f(x, i); }

IrStatus interp_ROI_ALIGN(KernelArgs *a) {
    const IrTensor *X = a->in[0], *R = a->in[1], *B = a->in[2];
    if (X->rank != 4 || R->rank != 2 || R->dims[1] != 4 || numel(B) != R->dims[0])
        return interp_error(a, "expects X [N, C, H, W], rois [R, 4], batch_indices [R]");
    int64_t oh = interp_attr_int(a, "output_height"), ow = interp_attr_int(a, "output_width");
    int64_t sr = interp_attr_int(a, "sampling_ratio");
    double scale = interp_attr_float(a, "spatial_scale");
    const char *mode = interp_attr_string(a, "mode");
    bool is_max = mode && strcmp(mode, "max") == 0;
    const char *ctm = interp_attr_string(a, "coordinate_transformation_mode");
    bool half = !ctm || strcmp(ctm, "half_pixel") == 0;
    int64_t C = X->dims[1], H = X->dims[2], W = X->dims[3], nr = R->dims[0];
    if (H == 0 || W == 0) return interp_error(a, "the feature map is empty");
    int64_t od[4] = {nr, C, oh, ow};
    IrStatus st = interp_alloc_output(a, 0, X->dtype, 4, od);
    if (st) return st;
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = interp_get_i(B, r);
        if (b < 0 || b >= X->dims[0]) return interp_error(a, "batch index %lld out of range", (long long)b);
        IrRoiGeom q = ir_roi_align_geom(interp_get_f(R, r * 4), interp_get_f(R, r * 4 + 1), interp_get_f(R, r * 4 + 2),
                                        interp_get_f(R, r * 4 + 3), scale, half, oh, ow, sr);
        if (q.too_many)
            return interp_error(a, "roi %lld needs more than 2^20 samples per bin (sampling_ratio 0 and a huge roi)",
                                (long long)r);
        for (int64_t c = 0; c < C; c++)
            for (int64_t ph = 0; ph < oh; ph++)
                for (int64_t pw = 0; pw < ow; pw++)
                    interp_set_f(&a->out[0], ((r * C + c) * oh + ph) * ow + pw,
                                 ir_roi_align_cell(roi_at, X, (b * C + c) * H * W, H, W, q.sh, q.sw, q.bh, q.bw, ph, pw, q.gh,
                                                   q.gw, is_max, q.count));
    }
    return IR_OK;
}

/* ---- Resize ----------------------------------------------------------------------------------- */

bool ir_resize_axis_taps(const IrResizeCfg *cfg, int64_t in, int64_t out, double scale, double roi_lo, double roi_hi,
                         int max_taps, IrResizeTaps *t) {
    IrResizeMode m;
    if (!ir_resize_mode_parse(cfg->mode, cfg->ctm, cfg->nearest, &m)) return false;
    m.A = cfg->A;
    m.exclude = cfg->exclude;
    m.antialias = cfg->antialias;
    int64_t start;
    int n = ir_resize_tap_count(&m, scale, &start);
    if (n < 1 || (max_taps > 0 && n > max_taps)) return false;
    t->n = n;
    t->idx = malloc((size_t)(out > 0 ? out : 1) * (size_t)n * sizeof(int64_t));
    t->w = malloc((size_t)(out > 0 ? out : 1) * (size_t)n * sizeof(double));
    t->outside = calloc((size_t)(out > 0 ? out : 1), sizeof(bool));
    if (!t->idx || !t->w || !t->outside) return false;
    t->any_outside = ir_resize_taps_fill(&m, in, out, scale, roi_lo, roi_hi, n, start, n, t->idx, t->w, t->outside);
    return true;
}

void ir_resize_taps_free(IrResizeTaps *t) {
    free(t->idx);
    free(t->w);
    free(t->outside);
    t->idx = NULL;
    t->w = NULL;
    t->outside = NULL;
}

IrStatus interp_RESIZE(KernelArgs *a) {
    const IrTensor *X = a->in[0];
    const IrTensor *roi = a->n_in > 1 ? a->in[1] : NULL, *scales = a->n_in > 2 ? a->in[2] : NULL;
    const IrTensor *sizes = a->n_in > 3 ? a->in[3] : NULL;
    if (roi && numel(roi) == 0) roi = NULL;
    if (scales && numel(scales) == 0) scales = NULL;
    if (sizes && numel(sizes) == 0) sizes = NULL;
    if (!scales == !sizes) return interp_error(a, "exactly one of scales and sizes must be given");
    uint32_t r = X->rank;
    IrResizeCfg cfg;
    cfg.mode = interp_attr_string(a, "mode");
    cfg.ctm = interp_attr_string(a, "coordinate_transformation_mode");
    cfg.nearest = interp_attr_string(a, "nearest_mode");
    if (!cfg.mode) cfg.mode = "nearest";
    if (!cfg.ctm) cfg.ctm = "half_pixel";
    if (!cfg.nearest) cfg.nearest = "round_prefer_floor";
    cfg.A = interp_attr_float(a, "cubic_coeff_a");
    cfg.extrap = interp_attr_float(a, "extrapolation_value");
    cfg.exclude = interp_attr_int(a, "exclude_outside") != 0;
    cfg.antialias = interp_attr_int(a, "antialias") != 0;
    IrResizeMode rm;
    if (!ir_resize_mode_parse(cfg.mode, cfg.ctm, cfg.nearest, &rm))
        return interp_error(a, "unknown mode '%s', coordinate_transformation_mode '%s' or nearest_mode '%s'", cfg.mode,
                            cfg.ctm, cfg.nearest);
    if (cfg.antialias && strcmp(cfg.mode, "nearest") == 0) cfg.antialias = false;
    int64_t axes[IR_MAX_RANK];
    int nax = interp_attr_ints(a, "axes", axes, IR_MAX_RANK);
    bool have_axes = nax > 0;
    if (!have_axes) {
        nax = (int)r;
        for (int i = 0; i < nax; i++) axes[i] = i;
    }
    bool active[IR_MAX_RANK] = {0};
    for (int i = 0; i < nax; i++) {
        if (axes[i] < 0) axes[i] += r;
        if (axes[i] < 0 || axes[i] >= (int64_t)r) return interp_error(a, "axis out of range");
        active[axes[i]] = true;
    }
    double sc[IR_MAX_RANK], rlo[IR_MAX_RANK], rhi[IR_MAX_RANK];
    int64_t od[IR_MAX_RANK];
    for (uint32_t i = 0; i < r; i++) sc[i] = 1, od[i] = X->dims[i], rlo[i] = 0, rhi[i] = 1;
    if (roi) {
        if (numel(roi) != 2 * nax) return interp_error(a, "roi must have %d entries", 2 * nax);
        for (int i = 0; i < nax; i++) rlo[axes[i]] = interp_get_f(roi, i), rhi[axes[i]] = interp_get_f(roi, nax + i);
    }
    if (scales) {
        if (numel(scales) != nax) return interp_error(a, "scales must have %d entries", nax);
        for (int i = 0; i < nax; i++) {
            sc[axes[i]] = interp_get_f(scales, i);
            if (!(sc[axes[i]] > 0)) return interp_error(a, "scales must be positive");
            od[axes[i]] = (int64_t)(sc[axes[i]] * (double)X->dims[axes[i]]);
        }
    } else {
        if (numel(sizes) != nax) return interp_error(a, "sizes must have %d entries", nax);
        for (int i = 0; i < nax; i++) {
            od[axes[i]] = interp_get_i(sizes, i);
            sc[axes[i]] = (double)od[axes[i]] / (double)X->dims[axes[i]];
        }
        const char *pol = interp_attr_string(a, "keep_aspect_ratio_policy");
        if (pol && strcmp(pol, "stretch") != 0) {
            bool larger = strcmp(pol, "not_smaller") == 0;
            if (!larger && strcmp(pol, "not_larger") != 0) return interp_error(a, "unknown keep_aspect_ratio_policy '%s'", pol);
            double s = sc[axes[0]];
            for (int i = 1; i < nax; i++) s = larger ? fmax(s, sc[axes[i]]) : fmin(s, sc[axes[i]]);
            for (int i = 0; i < nax; i++) {
                sc[axes[i]] = s;
                od[axes[i]] = (int64_t)(s * (double)X->dims[axes[i]] + 0.5);
            }
        }
    }
    IrStatus st = interp_alloc_output(a, 0, X->dtype, r, od);
    if (st) return st;
    IrResizeTaps taps[IR_MAX_RANK];
    memset(taps, 0, sizeof taps);
    bool ok = true;
    for (uint32_t i = 0; i < r && ok; i++) {
        if (!active[i]) {
            /* not resized: identity */
            taps[i].n = 1;
            taps[i].idx = malloc((size_t)(od[i] > 0 ? od[i] : 1) * sizeof(int64_t));
            taps[i].w = malloc((size_t)(od[i] > 0 ? od[i] : 1) * sizeof(double));
            taps[i].outside = calloc((size_t)(od[i] > 0 ? od[i] : 1), sizeof(bool));
            ok = taps[i].idx && taps[i].w && taps[i].outside;
            for (int64_t x = 0; ok && x < od[i]; x++) taps[i].idx[x] = x, taps[i].w[x] = 1;
            continue;
        }
        ok = ir_resize_axis_taps(&cfg, X->dims[i], od[i], sc[i], rlo[i], rhi[i], 0, &taps[i]);
    }
    double *x = ok ? to_f64(X) : NULL;
    int64_t total = numel(&a->out[0]);
    double *y = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    if (!ok || !x || !y) {
        for (uint32_t i = 0; i < r; i++) ir_resize_taps_free(&taps[i]);
        free(x), free(y);
        return oom(a);
    }
    int64_t istr[IR_MAX_RANK];
    ir_shape_strides(r, X->dims, istr);
    int64_t oidx[IR_MAX_RANK] = {0};
    for (int64_t e = 0; e < total; e++) {
        bool outside = false;
        for (uint32_t i = 0; i < r; i++) outside |= taps[i].outside[oidx[i]];
        double acc = 0;
        if (outside) {
            acc = cfg.extrap;
        } else {
            /* iterate the tap product; skip zero weights */
            int q[IR_MAX_RANK] = {0};
            for (;;) {
                double w = 1;
                int64_t off = 0;
                for (uint32_t i = 0; i < r; i++) {
                    int64_t k = oidx[i] * taps[i].n + q[i];
                    w *= taps[i].w[k];
                    off += taps[i].idx[k] * istr[i];
                }
                if (w != 0) acc += w * x[off];
                uint32_t i = r;
                while (i-- > 0) {
                    if (++q[i] < taps[i].n) break;
                    q[i] = 0;
                }
                if (i == UINT32_MAX) break;
            }
        }
        y[e] = acc;
        for (uint32_t i = r; i-- > 0;) {
            if (++oidx[i] < od[i]) break;
            oidx[i] = 0;
        }
    }
    store_f64(&a->out[0], y, total);
    for (uint32_t i = 0; i < r; i++) ir_resize_taps_free(&taps[i]);
    free(x), free(y);
    return IR_OK;
}

/* ---- GridSample ------------------------------------------------------------------------------ */

static double gs_reflect(double x, double lo, double hi) {
    double rng = hi - lo;
    if (x < lo) {
        double dx = lo - x;
        int64_t n = (int64_t)(dx / rng);
        double r = dx - (double)n * rng;
        return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi;
        int64_t n = (int64_t)(dx / rng);
        double r = dx - (double)n * rng;
        return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

typedef struct GsCtx {
    const double *img; /* one (n, c) plane */
    uint32_t r;
    int64_t dims[3];
    double lo[3], hi[3];
    int pad; /* 0 zeros, 1 border, 2 reflection */
} GsCtx;

static double gs_pixel(const GsCtx *c, const int64_t *i) {
    int64_t off = 0;
    for (uint32_t d = 0; d < c->r; d++) {
        int64_t v = i[d];
        if (c->pad == 0) {
            if (v < 0 || v >= c->dims[d]) return 0;
        } else if (c->pad == 1) {
            v = v < 0 ? 0 : v >= c->dims[d] ? c->dims[d] - 1 : v;
        } else {
            v = (int64_t)gs_reflect((double)v, c->lo[d], c->hi[d]);
            v = v < 0 ? 0 : v >= c->dims[d] ? c->dims[d] - 1 : v;
        }
        off = off * c->dims[d] + v;
    }
    return c->img[off];
}

static void gs_cubic(double t, double *w) {
    const double A = -0.75;
    t = fabs(t);
    w[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
    w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    w[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
    w[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
}

IrStatus interp_GRID_SAMPLE(KernelArgs *a) {
    const IrTensor *X = a->in[0], *G = a->in[1];
    if (X->rank < 3 || X->rank > 5 || G->rank != X->rank || G->dims[0] != X->dims[0] || G->dims[G->rank - 1] != X->rank - 2)
        return interp_error(a, "expects X [N, C, D...] and grid [N, D_out..., r] with r = spatial rank");
    uint32_t r = X->rank - 2;
    const char *mode = interp_attr_string(a, "mode"), *pm = interp_attr_string(a, "padding_mode");
    int m;
    if (!mode || strcmp(mode, "bilinear") == 0 || strcmp(mode, "linear") == 0) m = 1;
    else if (strcmp(mode, "nearest") == 0) m = 0;
    else if (strcmp(mode, "bicubic") == 0 || strcmp(mode, "cubic") == 0) m = 2;
    else return interp_error(a, "unknown mode '%s'", mode);
    GsCtx c;
    c.r = r;
    c.pad = !pm || strcmp(pm, "zeros") == 0 ? 0 : strcmp(pm, "border") == 0 ? 1 : strcmp(pm, "reflection") == 0 ? 2 : -1;
    if (c.pad < 0) return interp_error(a, "unknown padding_mode '%s'", pm);
    bool ac = interp_attr_int(a, "align_corners") != 0;
    int64_t N = X->dims[0], C = X->dims[1], od[IR_MAX_RANK];
    od[0] = N;
    od[1] = C;
    int64_t osz = 1, isz = 1;
    for (uint32_t i = 0; i < r; i++) {
        od[2 + i] = G->dims[1 + i];
        osz *= od[2 + i];
        c.dims[i] = X->dims[2 + i];
        isz *= c.dims[i];
        c.lo[i] = ac ? 0 : -0.5;
        c.hi[i] = ac ? (double)c.dims[i] - 1 : (double)c.dims[i] - 0.5;
    }
    IrStatus st = interp_alloc_output(a, 0, X->dtype, X->rank, od);
    if (st) return st;
    double *x = to_f64(X);
    if (!x) return oom(a);
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < osz; p++) {
            double pos[3];
            for (uint32_t i = 0; i < r; i++) {
                /* grid holds (x, y[, z]): the innermost spatial axis first */
                double nv = interp_get_f(G, (n * osz + p) * r + (r - 1 - i));
                double len = (double)c.dims[i];
                double v = ac ? (nv + 1) / 2.0 * (len - 1) : ((nv + 1) * len - 1) / 2.0;
                if (m == 0) v = r == 3 ? (v >= 0 ? floor(v + 0.5) : ceil(v - 0.5)) : nearbyint(v);
                if (v < c.lo[i] || v > c.hi[i]) {
                    if (c.pad == 1) v = v < 0 ? 0 : v > len - 1 ? len - 1 : v;
                    else if (c.pad == 2) v = gs_reflect(v, c.lo[i], c.hi[i]);
                }
                pos[i] = v;
            }
            for (int64_t ch = 0; ch < C; ch++) {
                c.img = x + (n * C + ch) * isz;
                double out = 0;
                if (m == 0) {
                    int64_t ii[3];
                    for (uint32_t i = 0; i < r; i++) ii[i] = (int64_t)pos[i];
                    out = gs_pixel(&c, ii);
                } else {
                    int taps = m == 1 ? 2 : 4;
                    int64_t base[3];
                    double w[3][4];
                    for (uint32_t i = 0; i < r; i++) {
                        double f = floor(pos[i]);
                        double t = pos[i] - f;
                        if (m == 1) base[i] = (int64_t)f, w[i][0] = 1 - t, w[i][1] = t;
                        else base[i] = (int64_t)f - 1, gs_cubic(t, w[i]);
                    }
                    int q[3] = {0, 0, 0};
                    for (;;) {
                        int64_t ii[3];
                        double wt = 1;
                        for (uint32_t i = 0; i < r; i++) ii[i] = base[i] + q[i], wt *= w[i][q[i]];
                        out += wt * gs_pixel(&c, ii);
                        uint32_t i = r;
                        while (i-- > 0) {
                            if (++q[i] < taps) break;
                            q[i] = 0;
                        }
                        if (i == UINT32_MAX) break;
                    }
                }
                interp_set_f(&a->out[0], (n * C + ch) * osz + p, out);
            }
        }
    free(x);
    return IR_OK;
}

/* ---- Col2Im ----------------------------------------------------------------------------------- */

IrStatus interp_COL2IM(KernelArgs *a) {
    const IrTensor *X = a->in[0], *IS = a->in[1], *BS = a->in[2];
    int64_t r = numel(IS);
    if (r < 1 || r > 8 || numel(BS) != r || X->rank != 3) return interp_error(a, "expects input [N, C*prod(block), L] and matching image/block shapes");
    int64_t img[8], blk[8], s[8], d[8], p[16], nb[8], bprod = 1, L = 1;
    for (int64_t i = 0; i < r; i++) {
        img[i] = interp_get_i(IS, i);
        blk[i] = interp_get_i(BS, i);
        s[i] = d[i] = 1;
        p[i] = p[r + i] = 0;
        bprod *= blk[i];
    }
    int n;
    if ((n = interp_attr_ints(a, "strides", s, 8)) > 0 && n != r) return interp_error(a, "strides must have %lld entries", (long long)r);
    if ((n = interp_attr_ints(a, "dilations", d, 8)) > 0 && n != r) return interp_error(a, "dilations must have %lld entries", (long long)r);
    if ((n = interp_attr_ints(a, "pads", p, 16)) > 0 && n != 2 * r) return interp_error(a, "pads must have %lld entries", (long long)(2 * r));
    for (int64_t i = 0; i < r; i++) {
        nb[i] = (img[i] + p[i] + p[r + i] - ((blk[i] - 1) * d[i] + 1)) / s[i] + 1;
        L *= nb[i];
    }
    if (X->dims[1] % bprod || X->dims[2] != L) return interp_error(a, "input shape does not match the image and block shapes");
    int64_t N = X->dims[0], C = X->dims[1] / bprod, od[IR_MAX_RANK];
    od[0] = N;
    od[1] = C;
    int64_t isz = 1;
    for (int64_t i = 0; i < r; i++) od[2 + i] = img[i], isz *= img[i];
    IrStatus st = interp_alloc_output(a, 0, X->dtype, (uint32_t)(2 + r), od);
    if (st) return st;
    int64_t total = numel(&a->out[0]);
    double *y = calloc((size_t)(total > 0 ? total : 1), sizeof(double));
    if (!y) return oom(a);
    for (int64_t nn = 0; nn < N; nn++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t b = 0; b < bprod; b++)
                for (int64_t l = 0; l < L; l++) {
                    int64_t rb = b, rl = l, off = 0;
                    bool in = true;
                    int64_t bi[8], li[8];
                    for (int64_t i = r; i-- > 0;) bi[i] = rb % blk[i], rb /= blk[i], li[i] = rl % nb[i], rl /= nb[i];
                    for (int64_t i = 0; i < r; i++) {
                        int64_t pos = li[i] * s[i] - p[i] + bi[i] * d[i];
                        if (pos < 0 || pos >= img[i]) in = false;
                        off = off * img[i] + pos;
                    }
                    if (!in) continue;
                    y[(nn * C + c) * isz + off] += interp_get_f(X, (nn * X->dims[1] + c * bprod + b) * L + l);
                }
    store_f64(&a->out[0], y, total);
    free(y);
    return IR_OK;
}

/* ---- NonMaxSuppression --------------------------------------------------------------------- */


static void nms_corners(const IrTensor *B, int64_t off, bool center, float *c) {
    float v[4];
    for (int i = 0; i < 4; i++) v[i] = (float)interp_get_f(B, off + i);
    ir_nms_corners(v, center, c);
}

IrStatus interp_NON_MAX_SUPPRESSION(KernelArgs *a) {
    const IrTensor *B = a->in[0], *S = a->in[1];
    const IrTensor *MO = a->n_in > 2 ? a->in[2] : NULL, *IT = a->n_in > 3 ? a->in[3] : NULL;
    const IrTensor *ST = a->n_in > 4 ? a->in[4] : NULL;
    if (B->rank != 3 || B->dims[2] != 4 || S->rank != 3 || S->dims[0] != B->dims[0] || S->dims[2] != B->dims[1])
        return interp_error(a, "expects boxes [B, S, 4] and scores [B, C, S]");
    int64_t nb = B->dims[0], ncls = S->dims[1], ns = B->dims[1];
    int64_t maxo = MO && numel(MO) ? interp_get_i(MO, 0) : 0;
    float iou = IT && numel(IT) ? (float)interp_get_f(IT, 0) : 0.0f;
    bool has_st = ST && numel(ST);
    float sthr = has_st ? (float)interp_get_f(ST, 0) : 0.0f;
    bool center = interp_attr_int(a, "center_point_box") != 0;
    int64_t cap = maxo > 0 ? nb * ncls * (maxo < ns ? maxo : ns) : 0;
    int64_t *sel = malloc((size_t)(cap > 0 ? cap : 1) * 3 * sizeof(int64_t));
    IrNmsCand *cand = malloc((size_t)(ns > 0 ? ns : 1) * sizeof(IrNmsCand));
    float *corners = malloc((size_t)(ns > 0 ? ns : 1) * 4 * sizeof(float));
    int64_t *picked = malloc((size_t)(ns > 0 ? ns : 1) * sizeof(int64_t));
    if (!sel || !cand || !corners || !picked) {
        free(sel), free(cand), free(corners), free(picked);
        return oom(a);
    }
    int64_t nsel = 0;
    for (int64_t b = 0; b < nb && maxo > 0; b++) {
        for (int64_t i = 0; i < ns; i++) nms_corners(B, (b * ns + i) * 4, center, corners + i * 4);
        for (int64_t c = 0; c < ncls; c++) {
            int64_t nc = 0;
            for (int64_t i = 0; i < ns; i++) {
                float sc = (float)interp_get_f(S, (b * ncls + c) * ns + i);
                if (has_st && !(sc > sthr)) continue;
                cand[nc].score = sc, cand[nc].idx = i, nc++;
            }
            qsort(cand, (size_t)nc, sizeof *cand, ir_nms_cmp);
            int64_t np = 0;
            for (int64_t k = 0; k < nc && np < maxo; k++) {
                bool keep = true;
                for (int64_t j = 0; j < np && keep; j++)
                    if (ir_nms_suppress(corners + cand[k].idx * 4, corners + picked[j] * 4, iou)) keep = false;
                if (!keep) continue;
                picked[np++] = cand[k].idx;
                sel[nsel * 3] = b, sel[nsel * 3 + 1] = c, sel[nsel * 3 + 2] = cand[k].idx;
                nsel++;
            }
        }
    }
    int64_t od[2] = {nsel, 3};
    IrStatus st = interp_alloc_output(a, 0, IR_DTYPE_I64, 2, od);
    if (!st && nsel) memcpy(a->out[0].data, sel, (size_t)nsel * 3 * sizeof(int64_t));
    free(sel), free(cand), free(corners), free(picked);
    return st;
}
