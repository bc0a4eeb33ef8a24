/* Numeric cores shared by the reference interpreter (validate/) and the runtime's helpers
 * (backend/runtime/kernels.c), so compiled code computes exactly what the interpreter does.
 * Header-only: the runtime links nothing of ir/.
 */
#ifndef IRTOOL_IR_KERNELS_SHARED_H
#define IRTOOL_IR_KERNELS_SHARED_H

#include <math.h>
#include <stdint.h>

/* Determinant of the m x m matrix in lu (overwritten): LU with partial pivoting. */
static inline double ir_det_lu(double *lu, int64_t m) {
    double det = 1;
    for (int64_t c = 0; c < m; c++) {
        int64_t piv = c;
        for (int64_t r = c + 1; r < m; r++)
            if (fabs(lu[r * m + c]) > fabs(lu[piv * m + c])) piv = r;
        if (lu[piv * m + c] == 0) return 0;
        if (piv != c) {
            for (int64_t k = 0; k < m; k++) {
                double t = lu[c * m + k];
                lu[c * m + k] = lu[piv * m + k];
                lu[piv * m + k] = t;
            }
            det = -det;
        }
        det *= lu[c * m + c];
        for (int64_t r = c + 1; r < m; r++) {
            double f = lu[r * m + c] / lu[c * m + c];
            for (int64_t k = c; k < m; k++) lu[r * m + k] -= f * lu[c * m + k];
        }
    }
    return det;
}

/* A RoiAlign roi (x1, y1, x2, y2, scaled by spatial_scale; half_pixel shifts by -0.5, the other
 * mode makes it at least 1 x 1) split into oh x ow bins of gh x gw samples (sampling_ratio, or
 * enough to cover a bin when it is 0). too_many: a roi so large (or not finite) that its bins would
 * need more than IR_ROI_MAX_SAMPLES samples each; callers refuse it rather than run for hours. */
#define IR_ROI_MAX_SAMPLES (1 << 20)
typedef struct IrRoiGeom {
    double sh, sw, bh, bw, count;
    int64_t gh, gw;
    int too_many;
} IrRoiGeom;

static inline IrRoiGeom ir_roi_align_geom(double x1, double y1, double x2, double y2, double scale, int half, int64_t oh,
                                          int64_t ow, int64_t sr) {
    double off = half ? 0.5 : 0.0;
    IrRoiGeom g;
    g.sw = x1 * scale - off, g.sh = y1 * scale - off;
    double rw = x2 * scale - off - g.sw, rh = y2 * scale - off - g.sh;
    if (!half) {
        if (rw < 1) rw = 1;
        if (rh < 1) rh = 1;
    }
    g.bh = rh / (double)oh, g.bw = rw / (double)ow;
    double gh = sr > 0 ? (double)sr : ceil(rh / (double)oh), gw = sr > 0 ? (double)sr : ceil(rw / (double)ow);
    if (!(gh > 0)) gh = 0; /* an empty or NaN roi: no samples, the cell is 0 */
    if (!(gw > 0)) gw = 0;
    if (gh > IR_ROI_MAX_SAMPLES) gh = IR_ROI_MAX_SAMPLES + 1.0; /* keeps the conversions defined */
    if (gw > IR_ROI_MAX_SAMPLES) gw = IR_ROI_MAX_SAMPLES + 1.0;
    g.too_many = gh * gw > IR_ROI_MAX_SAMPLES;
    g.gh = (int64_t)gh, g.gw = (int64_t)gw;
    g.count = (double)(g.gh * g.gw > 1 ? g.gh * g.gw : 1);
    return g;
}

/* One RoiAlign output cell (ph, pw) of a roi starting at (sh, sw) with bins bh x bw, gh x gw
 * bilinear samples per bin over an H x W map read through at(ctx, offset from base): their
 * average (divided by count) or their max. Samples outside [-1, H] x [-1, W] (NaN included)
 * count as 0. */
static inline double ir_roi_align_cell(double (*at)(const void *, int64_t), const void *ctx, int64_t base, int64_t H,
                                       int64_t W, double sh, double sw, double bh, double bw, int64_t ph, int64_t pw,
                                       int64_t gh, int64_t gw, int is_max, double count) {
    double acc = 0;
    int first = 1;
    for (int64_t iy = 0; iy < gh; iy++) {
        double y = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
        for (int64_t ix = 0; ix < gw; ix++) {
            double x = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
            double v[4] = {0, 0, 0, 0}, w[4] = {0, 0, 0, 0};
            if (y >= -1.0 && y <= (double)H && x >= -1.0 && x <= (double)W) {
                double yy = y <= 0 ? 0 : y, xx = x <= 0 ? 0 : x;
                int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
                if (yl >= H - 1) yh = yl = H - 1, yy = (double)yl;
                else yh = yl + 1;
                if (xl >= W - 1) xh = xl = W - 1, xx = (double)xl;
                else xh = xl + 1;
                double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
                w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;
                v[0] = at(ctx, base + yl * W + xl), v[1] = at(ctx, base + yl * W + xh);
                v[2] = at(ctx, base + yh * W + xl), v[3] = at(ctx, base + yh * W + xh);
            }
            if (is_max) {
                double m = w[0] * v[0];
                for (int q = 1; q < 4; q++)
                    if (w[q] * v[q] > m) m = w[q] * v[q];
                if (first || m > acc) acc = m;
                first = 0;
            } else {
                acc += w[0] * v[0] + w[1] * v[1] + w[2] * v[2] + w[3] * v[3];
            }
        }
    }
    return is_max ? acc : acc / count;
}

/* Element i of a window function (kind 0 Blackman, 1 Hamming, 2 Hann) with denominator N (the
 * size when periodic, else size - 1), as ONNX's reference computes it. */
static inline double ir_window_value(int kind, int64_t i, double N) {
    double x = (double)i;
    if (kind == 2) {
        double s = sin(x * M_PI / N);
        return s * s;
    }
    if (kind == 1) {
        double alpha = 25.0 / 46.0;
        return alpha - cos(x * M_PI * 2 / N) * (1 - alpha);
    }
    return cos((x * (M_PI * 2)) / N) * -0.5 + cos((x * (M_PI * 4)) / N) * 0.08 + 0.42;
}

#endif
