/* Resize's taps along one axis (reference: onnx/reference/ops/op_resize.py): per output
 * coordinate, the input indices and weights it combines. Shared by the interpreter (run time),
 * the LLVM backend (constant tables at compile time) and the runtime (scales or roi given at run
 * time), header-only so the runtime links nothing of ir/.
 */
#ifndef IRTOOL_IR_RESIZE_TAPS_H
#define IRTOOL_IR_RESIZE_TAPS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

enum { IR_RESIZE_NEAREST = 0, IR_RESIZE_LINEAR = 1, IR_RESIZE_CUBIC = 2 };
enum {
    IR_RESIZE_HALF_PIXEL = 0, IR_RESIZE_ALIGN_CORNERS = 1, IR_RESIZE_ASYMMETRIC = 2, IR_RESIZE_TF_CROP = 3,
    IR_RESIZE_PYTORCH_HALF_PIXEL = 4, IR_RESIZE_HALF_PIXEL_SYMMETRIC = 5, IR_RESIZE_TF_HALF_PIXEL_NN = 6
};
enum { IR_RESIZE_ROUND_PREFER_FLOOR = 0, IR_RESIZE_ROUND_PREFER_CEIL = 1, IR_RESIZE_FLOOR = 2, IR_RESIZE_CEIL = 3 };

/* The attributes that decide the taps, as codes. */
typedef struct IrResizeMode {
    int mode, ctm, nearest; /* IR_RESIZE_*: mode, coordinate_transformation_mode, nearest_mode */
    double A;               /* cubic_coeff_a */
    bool exclude, antialias;
} IrResizeMode;

/* The codes of the attribute strings (NULL: the default); false for an unknown string. */
static inline bool ir_resize_mode_parse(const char *mode, const char *ctm, const char *nearest, IrResizeMode *m) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const ctms[] = {"half_pixel",         "align_corners",        "asymmetric",          "tf_crop_and_resize",
                                       "pytorch_half_pixel", "half_pixel_symmetric", "tf_half_pixel_for_nn"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    m->mode = m->ctm = m->nearest = -1;
    for (int i = 0; i < 3; i++)
        if (!mode ? i == 0 : strcmp(mode, modes[i]) == 0) m->mode = i;
    for (int i = 0; i < 7; i++)
        if (!ctm ? i == 0 : strcmp(ctm, ctms[i]) == 0) m->ctm = i;
    for (int i = 0; i < 4; i++)
        if (!nearest ? i == 0 : strcmp(nearest, nearests[i]) == 0) m->nearest = i;
    return m->mode >= 0 && m->ctm >= 0 && m->nearest >= 0;
}

/* Taps per output coordinate at this scale (antialias widens them when scale < 1), and the
 * offset of the first from the coordinate's floor. */
static inline int ir_resize_tap_count(const IrResizeMode *m, double scale, int64_t *start) {
    bool antialias = m->antialias && m->mode != IR_RESIZE_NEAREST, cubic = m->mode == IR_RESIZE_CUBIC;
    double s_aa = scale < 1 ? scale : 1;
    if (m->mode == IR_RESIZE_NEAREST) return *start = 0, 1;
    if (!antialias) return *start = cubic ? -1 : 0, cubic ? 4 : 2;
    *start = (int64_t)floor((cubic ? -2 : -1) / s_aa) + 1;
    double n = 2 - 2 * (double)*start;
    return n > 1e6 ? -1 : (int)n;
}

static inline double ir_resize_cubic_w(double x, double A) {
    x = fabs(x);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
}

/* The taps of one axis of `in` -> `out` elements at this scale and roi (tf_crop_and_resize), n
 * from ir_resize_tap_count, written `stride` (>= n) apart: idx[x * stride + q], w[...]; taps
 * n..stride-1 of a coordinate get index 0 and weight 0. outside[x] (tf_crop_and_resize): the
 * coordinate takes extrapolation_value. Returns whether any coordinate is outside. */
static inline bool ir_resize_taps_fill(const IrResizeMode *m, int64_t in, int64_t out, double scale, double roi_lo,
                                       double roi_hi, int n, int64_t start, int stride, int64_t *idx, double *w,
                                       bool *outside) {
    bool nearest = m->mode == IR_RESIZE_NEAREST, cubic = m->mode == IR_RESIZE_CUBIC;
    bool antialias = m->antialias && !nearest, any = false;
    double s_aa = scale < 1 ? scale : 1;
    double ow = scale * (double)in; /* the reference's (float) output width */
    for (int64_t x = 0; x < out; x++) {
        double xo, xr = (double)x;
        outside[x] = false;
        switch (m->ctm) {
        case IR_RESIZE_ALIGN_CORNERS: xo = ow == 1 ? 0 : xr * (double)(in - 1) / (ow - 1); break;
        case IR_RESIZE_ASYMMETRIC: xo = xr / scale; break;
        case IR_RESIZE_TF_CROP:
            xo = ow == 1 ? (roi_hi - roi_lo) * (double)(in - 1) / 2 : xr * (roi_hi - roi_lo) * (double)(in - 1) / (ow - 1);
            xo += roi_lo * (double)(in - 1);
            if (xo < 0 || xo > (double)(in - 1)) outside[x] = any = true;
            break;
        case IR_RESIZE_PYTORCH_HALF_PIXEL: xo = ow == 1 ? -0.5 : (xr + 0.5) / scale - 0.5; break;
        case IR_RESIZE_HALF_PIXEL_SYMMETRIC: {
            double adj = (double)out / ow, center = (double)in / 2;
            xo = center * (1 - adj) + (xr + 0.5) / scale - 0.5;
            break;
        }
        case IR_RESIZE_TF_HALF_PIXEL_NN: xo = (xr + 0.5) / scale; break;
        default: xo = (xr + 0.5) / scale - 0.5; break; /* half_pixel */
        }
        /* a coordinate beyond any index (a huge or NaN roi, a tiny scale) is clamped first so the
         * integer arithmetic below stays defined; for tf_crop_and_resize it is outside anyway */
        if (!(xo >= -1e15 && xo <= 1e15)) {
            if (m->ctm == IR_RESIZE_TF_CROP) outside[x] = any = true;
            xo = xo > 0 ? 1e15 : -1e15; /* NaN too */
        }
        /* ratio in (0, 1]: an exact integer is taken as the right end of the previous cell */
        double fl = floor(xo);
        double ratio = xo - fl;
        if (ratio == 0) fl -= 1, ratio = 1;
        int64_t *ix = idx + x * stride;
        double *wx = w + x * stride;
        if (nearest) {
            bool up;
            if (ratio == 1) up = true;
            else if (m->nearest == IR_RESIZE_ROUND_PREFER_CEIL) up = ratio >= 0.5;
            else if (m->nearest == IR_RESIZE_FLOOR) up = false;
            else if (m->nearest == IR_RESIZE_CEIL) up = true;
            else up = ratio > 0.5;
            ix[0] = (int64_t)fl + (up ? 1 : 0);
            wx[0] = 1;
        } else if (!antialias) {
            for (int q = 0; q < n; q++) ix[q] = (int64_t)fl + start + q;
            if (cubic) {
                for (int q = 0; q < 4; q++) wx[q] = ir_resize_cubic_w(ratio - (double)(start + q), m->A);
            } else {
                wx[0] = 1 - ratio, wx[1] = ratio;
            }
        } else {
            double sum = 0;
            for (int q = 0; q < n; q++) {
                double arg = ((double)(start + q) - ratio) * s_aa;
                ix[q] = (int64_t)fl + start + q;
                wx[q] = cubic ? ir_resize_cubic_w(arg, m->A) : (1 - fabs(arg) > 0 ? (1 - fabs(arg) < 1 ? 1 - fabs(arg) : 1) : 0);
                sum += wx[q];
            }
            for (int q = 0; q < n; q++) wx[q] /= sum;
        }
        if (m->exclude && !nearest) {
            double sum = 0;
            for (int q = 0; q < n; q++) {
                if (ix[q] < 0 || ix[q] >= in) wx[q] = 0;
                sum += wx[q];
            }
            for (int q = 0; q < n; q++) wx[q] = sum != 0 ? wx[q] / sum : 0;
        }
        for (int q = 0; q < n; q++) ix[q] = ix[q] < 0 ? 0 : ix[q] >= in ? in - 1 : ix[q];
        for (int q = n; q < stride; q++) ix[q] = 0, wx[q] = 0;
    }
    return any;
}

#endif
