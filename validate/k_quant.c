/* Quantization kernels: ONNX QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and
 * irtool's FP8 quantize/dequantize.
 *
 * Arithmetic follows the ONNX reference bit for bit where it matters: x / scale is computed in
 * f32 (as numpy does on f32 arrays) before rounding half to even and saturating, and
 * dequantization multiplies in f32. Scales and zero points are scalars (per tensor) or 1-D along
 * `axis` (per channel).
 */
#include "validate/interp.h"

#include <math.h>
#include <stdlib.h>

static int64_t numel(const IrTensor *t) { return ir_tensor_numel(t); }

/* Resolves the per-channel layout: *inner = product of dims after axis, *ch = dims[axis]; a
 * scalar (or single-element) parameter gives ch = 1. */
static IrStatus channel_layout(KernelArgs *a, const IrTensor *x, const IrTensor *scale, bool need_axis_attr,
                               int64_t *inner, int64_t *ch) {
    int64_t ns = numel(scale);
    *inner = 1, *ch = 1;
    if (ns == 1) return IR_OK;
    if (scale->rank != 1) return interp_error(a, "scale must be a scalar or 1-D (per axis)");
    if (need_axis_attr && !interp_has_attr(a, "axis")) return interp_error(a, "a per-channel scale needs the axis attribute");
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, x->rank)) return interp_error(a, "axis %lld out of range", (long long)interp_attr_int(a, "axis"));
    if (x->dims[axis] != ns) return interp_error(a, "scale has %lld entries, axis %lld has %lld", (long long)ns, (long long)axis, (long long)x->dims[axis]);
    *inner = ir_shape_numel(x->rank - (uint32_t)axis - 1, x->dims + axis + 1);
    *ch = ns;
    return IR_OK;
}


static bool is_fp8(IrDType dt) { return dt == IR_DTYPE_F8E4M3FN || dt == IR_DTYPE_F8E5M2; }

static uint8_t to_fp8(IrDType dt, float v, bool sat) {
    return dt == IR_DTYPE_F8E4M3FN ? ir_f32_to_f8e4m3fn(v, sat) : ir_f32_to_f8e5m2(v, sat);
}

static float from_fp8(IrDType dt, uint8_t v) {
    return dt == IR_DTYPE_F8E4M3FN ? ir_f8e4m3fn_to_f32(v) : ir_f8e5m2_to_f32(v);
}

/* ---- QuantizeLinear / DequantizeLinear ---------------------------------------------------- */

IrStatus interp_QUANTIZE_LINEAR(KernelArgs *a) {
    const IrTensor *x = a->in[0], *s = a->in[1], *zp = a->n_in > 2 ? a->in[2] : NULL;
    if (zp && numel(zp) == 0) zp = NULL;
    IrDType odt = zp ? zp->dtype : IR_DTYPE_U8;
    double lo = 0, hi = 0;
    if (!is_fp8(odt) && !ir_dtype_quant_range(odt, &lo, &hi)) return interp_unsupported(a, "this zero point dtype");
    if (zp && numel(zp) != numel(s)) return interp_error(a, "zero point and scale differ in size");
    int64_t inner, ch;
    IrStatus st = channel_layout(a, x, s, false, &inner, &ch);
    if (st) return st;
    if ((st = interp_alloc_output(a, 0, odt, x->rank, x->dims))) return st;
    bool sat = interp_attr_int(a, "saturate") != 0;
    for (int64_t i = 0; i < numel(x); i++) {
        int64_t c = ch == 1 ? 0 : (i / inner) % ch;
        float q = (float)interp_get_f(x, i) / (float)interp_get_f(s, c);
        if (is_fp8(odt)) {
            float z = zp ? from_fp8(odt, ((const uint8_t *)zp->data)[c]) : 0.0f;
            ((uint8_t *)a->out[0].data)[i] = to_fp8(odt, q + z, sat);
            continue;
        }
        double r = nearbyint((double)q) + (zp ? (double)interp_get_i(zp, c) : 0.0);
        if (!(r >= lo)) r = lo;
        if (r > hi) r = hi;
        interp_set_i(&a->out[0], i, (int64_t)r);
    }
    return IR_OK;
}

IrStatus interp_DEQUANTIZE_LINEAR(KernelArgs *a) {
    const IrTensor *x = a->in[0], *s = a->in[1], *zp = a->n_in > 2 ? a->in[2] : NULL;
    if (zp && numel(zp) == 0) zp = NULL;
    if (zp && numel(zp) != numel(s)) return interp_error(a, "zero point and scale differ in size");
    int64_t inner, ch;
    IrStatus st = channel_layout(a, x, s, false, &inner, &ch);
    if (st) return st;
    if ((st = interp_alloc_output(a, 0, s->dtype, x->rank, x->dims))) return st;
    bool fp8 = is_fp8(x->dtype);
    for (int64_t i = 0; i < numel(x); i++) {
        int64_t c = ch == 1 ? 0 : (i / inner) % ch;
        float v = fp8 ? from_fp8(x->dtype, ((const uint8_t *)x->data)[i]) : (float)interp_get_i(x, i);
        float z = !zp ? 0.0f : fp8 ? from_fp8(zp->dtype, ((const uint8_t *)zp->data)[c]) : (float)interp_get_i(zp, c);
        float y = (v - z) * (float)interp_get_f(s, c);
        interp_set_f(&a->out[0], i, (double)y);
    }
    return IR_OK;
}

/* y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point = saturate(round(-min / scale)),
 * y = saturate(round(x / scale) + zero point), all in f32 (uint8 output). */
IrStatus interp_DYNAMIC_QUANTIZE_LINEAR(KernelArgs *a) {
    const IrTensor *x = a->in[0];
    int64_t n = numel(x);
    float mn = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = (float)interp_get_f(x, i);
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    float scale = (mx - mn) / 255.0f;
    float izp = scale != 0 ? 0.0f - mn / scale : 0.0f;
    double zpd = nearbyint((double)(izp < 0 ? 0 : izp > 255 ? 255 : izp));
    IrStatus st = interp_alloc_output(a, 0, IR_DTYPE_U8, x->rank, x->dims);
    if (!st) st = interp_alloc_output(a, 1, IR_DTYPE_F32, 0, NULL);
    if (!st) st = interp_alloc_output(a, 2, IR_DTYPE_U8, 0, NULL);
    if (st) return st;
    ((float *)a->out[1].data)[0] = scale;
    ((uint8_t *)a->out[2].data)[0] = (uint8_t)zpd;
    for (int64_t i = 0; i < n; i++) {
        double r = scale != 0 ? nearbyint((double)((float)interp_get_f(x, i) / scale)) + zpd : zpd;
        if (!(r >= 0)) r = 0;
        if (r > 255) r = 255;
        ((uint8_t *)a->out[0].data)[i] = (uint8_t)r;
    }
    return IR_OK;
}

/* ---- irtool FP8 ------------------------------------------------------------------------------ */

/* y = fp8(x / scale): the quotient is computed in f32, like the hardware, then rounded to nearest
 * even into the format (saturating to the largest finite value when `saturate`, NaN kept). */
IrStatus interp_QUANTIZE_FP8(KernelArgs *a) {
    const IrTensor *x = a->in[0], *s = a->in[1];
    const char *fmt = interp_attr_string(a, "format");
    IrDType odt;
    if (!fmt || strcmp(fmt, "e4m3fn") == 0) odt = IR_DTYPE_F8E4M3FN;
    else if (strcmp(fmt, "e5m2") == 0) odt = IR_DTYPE_F8E5M2;
    else return interp_error(a, "format must be \"e4m3fn\" or \"e5m2\", got \"%s\"", fmt);
    if (!ir_dtype_is_float(x->dtype)) return interp_error(a, "input must be floating point");
    int64_t inner, ch;
    IrStatus st = channel_layout(a, x, s, true, &inner, &ch);
    if (st) return st;
    if ((st = interp_alloc_output(a, 0, odt, x->rank, x->dims))) return st;
    bool sat = interp_attr_int(a, "saturate") != 0;
    uint8_t *y = a->out[0].data;
    for (int64_t i = 0; i < numel(x); i++) {
        int64_t c = ch == 1 ? 0 : (i / inner) % ch;
        float xv = x->dtype == IR_DTYPE_F32 ? ((const float *)x->data)[i] : (float)interp_get_f(x, i);
        float q = xv / (float)interp_get_f(s, c);
        y[i] = to_fp8(odt, q, sat);
    }
    return IR_OK;
}

/* y = decode(x) * scale, multiplied in f32 (in f64 when `to` is f64) and rounded once to `to`. */
IrStatus interp_DEQUANTIZE_FP8(KernelArgs *a) {
    const IrTensor *x = a->in[0], *s = a->in[1];
    if (!is_fp8(x->dtype)) return interp_error(a, "input must be f8e4m3fn or f8e5m2, got %s", ir_dtype_name(x->dtype));
    IrDType odt = (IrDType)interp_attr_int(a, "to");
    if (!ir_dtype_is_float(odt)) return interp_error(a, "to must be a floating-point dtype");
    int64_t inner, ch;
    IrStatus st = channel_layout(a, x, s, true, &inner, &ch);
    if (st) return st;
    if ((st = interp_alloc_output(a, 0, odt, x->rank, x->dims))) return st;
    const uint8_t *xv = x->data;
    for (int64_t i = 0; i < numel(x); i++) {
        int64_t c = ch == 1 ? 0 : (i / inner) % ch;
        float d = from_fp8(x->dtype, xv[i]);
        if (odt == IR_DTYPE_F64) interp_set_f(&a->out[0], i, (double)d * interp_get_f(s, c));
        else interp_set_f(&a->out[0], i, (double)(d * (float)interp_get_f(s, c)));
    }
    return IR_OK;
}
