/* Element-wise comparison of two tensors: error metrics, ULP distance in the output dtype, the
 * smallest tolerances that would have passed, and the default tolerance per dtype.
 * Everything is computed in double in element order, so results are deterministic.
 */
#include "ir/shape.h"
#include "validate/validate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

IrTolerance ir_tolerance_default(IrDType dt, bool fp8) {
    IrTolerance t = {1e-5, 1e-6, 0.0, false};
    if (fp8 || dt == IR_DTYPE_F8E4M3FN || dt == IR_DTYPE_F8E5M2) {
        t.by_cosine = true;
        t.min_cosine = 0.99;
    } else if (dt == IR_DTYPE_F16 || dt == IR_DTYPE_BF16) {
        t.rtol = 1e-3, t.atol = 1e-3;
    } else if (!ir_dtype_is_float(dt)) {
        t.rtol = 0, t.atol = 0;
    }
    return t;
}

static bool region_has_fp8(const IrGraph *g, IrRegionId r) {
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n)) {
        IrOp op = ir_node_op(g, n);
        if (op == IR_OP_QUANTIZE_FP8 || op == IR_OP_DEQUANTIZE_FP8 || op == IR_OP_FP8_MAT_MUL) return true;
        for (uint32_t i = 0; i < ir_node_num_regions(g, n); i++)
            if (region_has_fp8(g, ir_node_region_at(g, n, i))) return true;
    }
    return false;
}

bool ir_graph_has_fp8(const IrGraph *g) { return region_has_fp8(g, IR_ROOT_REGION); }

/* Sign-magnitude bit pattern -> an integer line where adjacent floats differ by 1. */
static int64_t ordered(uint64_t bits, int width) {
    uint64_t sign = (uint64_t)1 << (width - 1);
    int64_t mag = (int64_t)(bits & (sign - 1));
    return (bits & sign) ? -mag : mag;
}

static int64_t ulp_line(IrDType dt, double v) {
    switch (dt) {
    case IR_DTYPE_F64: {
        uint64_t b;
        memcpy(&b, &v, 8);
        return ordered(b, 64);
    }
    case IR_DTYPE_F16: return ordered(ir_f32_to_f16((float)v), 16);
    case IR_DTYPE_BF16: return ordered(ir_f32_to_bf16((float)v), 16);
    case IR_DTYPE_F8E4M3FN: return ordered(ir_f32_to_f8e4m3fn((float)v, true), 8);
    case IR_DTYPE_F8E5M2: return ordered(ir_f32_to_f8e5m2((float)v, true), 8);
    default: {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, 4);
        return ordered(b, 32);
    }
    }
}

uint64_t ir_ulp_distance(IrDType dt, double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : UINT64_MAX;
    if (!ir_dtype_is_float(dt)) return (uint64_t)fabs(a - b);
    int64_t x = ulp_line(dt, a), y = ulp_line(dt, b);
    return x > y ? (uint64_t)(x - y) : (uint64_t)(y - x);
}

static double argmax_agreement(const IrTensor *ref, const IrTensor *cand) {
    if (ref->rank != 2 || ref->dims[1] == 0) return -1;
    int64_t rows = ref->dims[0], cols = ref->dims[1], agree = 0;
    if (!rows) return -1;
    for (int64_t r = 0; r < rows; r++) {
        int64_t ar = 0, ac = 0;
        for (int64_t c = 1; c < cols; c++) {
            size_t k = (size_t)(r * cols + c);
            if (ir_elem_get_f64(ref->dtype, ref->data, k) > ir_elem_get_f64(ref->dtype, ref->data, (size_t)(r * cols + ar))) ar = c;
            if (ir_elem_get_f64(cand->dtype, cand->data, k) > ir_elem_get_f64(cand->dtype, cand->data, (size_t)(r * cols + ac))) ac = c;
        }
        agree += ar == ac;
    }
    return (double)agree / (double)rows;
}

/* Sequences and optionals: same form and element count, then element by element; the metrics
 * combine the elements' (maxima, element-weighted means, the smallest cosine, the worst element
 * of the element with the largest error), and pass when every element passes. */
static void compare_containers(const IrTensor *ref, const IrTensor *cand, const IrTolerance *tol, IrCompareMetrics *m) {
    if (ref->form != cand->form || ref->n_items != cand->n_items) {
        char a[72], b[72];
        ir_tensor_shape_str(ref, a, sizeof a);
        ir_tensor_shape_str(cand, b, sizeof b);
        snprintf(m->reason, sizeof m->reason, "mismatch: reference %s, candidate %s", a, b);
        return;
    }
    m->comparable = true;
    m->pass = true;
    m->cosine = 1;
    double sum_abs = 0, sum_sq = 0, within = 0, worst_abs = -1;
    for (uint32_t k = 0; k < ref->n_items; k++) {
        IrCompareMetrics e;
        ir_compare_tensors(&ref->items[k], &cand->items[k], tol, &e);
        if (!e.comparable) {
            snprintf(m->reason, sizeof m->reason, "element %u: %.170s", k, e.reason);
            m->comparable = m->pass = false;
            return;
        }
        m->numel += e.numel;
        sum_abs += e.mean_abs_err * (double)e.numel;
        sum_sq += e.rms_err * e.rms_err * (double)e.numel;
        within += e.frac_within * (double)e.numel;
        if (e.max_abs_err > m->max_abs_err) m->max_abs_err = e.max_abs_err;
        if (e.max_rel_err > m->max_rel_err) m->max_rel_err = e.max_rel_err;
        if (e.max_ulp > m->max_ulp) m->max_ulp = e.max_ulp;
        if (e.min_rtol > m->min_rtol) m->min_rtol = e.min_rtol;
        if (e.min_atol > m->min_atol) m->min_atol = e.min_atol;
        if (e.cosine < m->cosine) m->cosine = e.cosine;
        m->nan_mismatch += e.nan_mismatch;
        m->pass &= e.pass;
        if (e.max_abs_err > worst_abs && e.numel) {
            worst_abs = e.max_abs_err;
            m->rank = e.rank;
            memcpy(m->worst_index, e.worst_index, sizeof m->worst_index);
            m->worst_ref = e.worst_ref;
            m->worst_cand = e.worst_cand;
        }
    }
    if (m->numel) {
        m->mean_abs_err = sum_abs / (double)m->numel;
        m->rms_err = sqrt(sum_sq / (double)m->numel);
        m->frac_within = within / (double)m->numel;
    } else {
        m->frac_within = 1;
    }
}

void ir_compare_tensors(const IrTensor *ref, const IrTensor *cand, const IrTolerance *tol, IrCompareMetrics *m) {
    memset(m, 0, sizeof *m);
    m->argmax_agreement = -1;
    if (ref->form != IR_TYPE_TENSOR || cand->form != IR_TYPE_TENSOR) {
        compare_containers(ref, cand, tol, m);
        return;
    }
    bool same = ref->rank == cand->rank;
    for (uint32_t d = 0; same && d < ref->rank; d++) same = ref->dims[d] == cand->dims[d];
    if (!same) {
        char a[64], b[64];
        ir_tensor_shape_str(ref, a, sizeof a);
        ir_tensor_shape_str(cand, b, sizeof b);
        snprintf(m->reason, sizeof m->reason, "shape mismatch: reference %s, candidate %s", a, b);
        return;
    }
    if (ref->dtype == IR_DTYPE_STRING || cand->dtype == IR_DTYPE_STRING) { /* exact, by content */
        int64_t n = ir_tensor_numel(ref);
        if (ref->dtype != cand->dtype) {
            snprintf(m->reason, sizeof m->reason, "dtype mismatch: reference %s, candidate %s",
                     ir_dtype_name(ref->dtype), ir_dtype_name(cand->dtype));
            return;
        }
        const IrStringElem *a = ref->data, *b = cand->data;
        for (int64_t i = 0; i < n; i++)
            if (a[i].len != b[i].len || (a[i].len && memcmp(a[i].data, b[i].data, a[i].len) != 0)) {
                snprintf(m->reason, sizeof m->reason, "string element %lld differs", (long long)i);
                return;
            }
    }
    m->comparable = true;
    m->rank = ref->rank;
    int64_t n = ir_tensor_numel(ref), within = 0, worst = -1;
    m->numel = n;
    double sum_abs = 0, sum_sq = 0, dot = 0, nr = 0, nc = 0, worst_score = -1;
    for (int64_t i = 0; i < n; i++) {
        double r = ir_elem_get_f64(ref->dtype, ref->data, (size_t)i);
        double c = ir_elem_get_f64(cand->dtype, cand->data, (size_t)i);
        if (isnan(r) || isnan(c)) {
            if (isnan(r) && isnan(c)) {
                within++;
                continue;
            }
            m->nan_mismatch++;
            m->max_abs_err = m->max_rel_err = INFINITY;
            m->min_rtol = m->min_atol = INFINITY;
            if (worst_score < INFINITY) worst = i, worst_score = INFINITY;
            continue;
        }
        double e = fabs(c - r), ar = fabs(r);
        if (r == c) e = 0; /* equal infinities */
        double rel = e == 0 ? 0 : ar > 0 ? e / ar : INFINITY;
        double bound = tol->atol + tol->rtol * ar;
        if (e <= bound) within++;
        double score = bound > 0 ? e / bound : (e > 0 ? INFINITY : 0);
        if (score > worst_score) worst = i, worst_score = score;
        if (e > m->max_abs_err) m->max_abs_err = e;
        if (rel > m->max_rel_err) m->max_rel_err = rel;
        uint64_t u = ir_ulp_distance(cand->dtype, r, c);
        if (u > m->max_ulp) m->max_ulp = u;
        /* smallest rtol with this atol, and smallest atol with this rtol */
        if (e > tol->atol) {
            double need = ar > 0 ? (e - tol->atol) / ar : INFINITY;
            if (need > m->min_rtol) m->min_rtol = need;
        }
        double need_a = e - tol->rtol * ar;
        if (need_a > m->min_atol) m->min_atol = need_a;
        sum_abs += e;
        sum_sq += e * e;
        if (isfinite(r) && isfinite(c)) dot += r * c, nr += r * r, nc += c * c;
    }
    if (n) {
        m->mean_abs_err = sum_abs / (double)n;
        m->rms_err = sqrt(sum_sq / (double)n);
        m->frac_within = (double)within / (double)n;
    } else {
        m->frac_within = 1;
    }
    m->cosine = nr == 0 && nc == 0 ? 1.0 : (nr == 0 || nc == 0) ? 0.0 : dot / (sqrt(nr) * sqrt(nc));
    if (worst >= 0) {
        ir_shape_unravel(worst, ref->rank, ref->dims, m->worst_index);
        m->worst_ref = ir_elem_get_f64(ref->dtype, ref->data, (size_t)worst);
        m->worst_cand = ir_elem_get_f64(cand->dtype, cand->data, (size_t)worst);
    }
    m->argmax_agreement = argmax_agreement(ref, cand);
    if (tol->by_cosine) m->pass = m->nan_mismatch == 0 && m->cosine >= tol->min_cosine;
    else m->pass = within == n && (tol->min_cosine <= 0 || m->cosine >= tol->min_cosine);
}
