/* Box geometry of NonMaxSuppression, shared by the interpreter and the runtime (header-only, so
 * the runtime links nothing of ir/): corners from a box as given, and the IoU test. */
#ifndef IRTOOL_IR_NMS_H
#define IRTOOL_IR_NMS_H

#include <math.h>
#include <stdint.h>

/* A candidate box: its score and index; ir_nms_cmp orders them by descending score, then index
 * (qsort comparator). */
typedef struct IrNmsCand {
    float score;
    int64_t idx;
} IrNmsCand;

static inline int ir_nms_cmp(const void *x, const void *y) {
    const IrNmsCand *a = x, *b = y;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* y1 x1 y2 x2 of box v: given as corners (either order), or as [x_center, y_center, w, h]. */
static inline void ir_nms_corners(const float *v, int center, float *c) {
    if (center) {
        c[1] = v[0] - v[2] / 2.0f, c[3] = v[0] + v[2] / 2.0f;
        c[0] = v[1] - v[3] / 2.0f, c[2] = v[1] + v[3] / 2.0f;
    } else {
        c[0] = fminf(v[0], v[2]), c[2] = fmaxf(v[0], v[2]);
        c[1] = fminf(v[1], v[3]), c[3] = fmaxf(v[1], v[3]);
    }
}

/* Whether box b suppresses box a: their IoU exceeds thr (empty boxes never do). */
static inline int ir_nms_suppress(const float *a, const float *b, float thr) {
    float ymin = fmaxf(a[0], b[0]), ymax = fminf(a[2], b[2]);
    float xmin = fmaxf(a[1], b[1]), xmax = fminf(a[3], b[3]);
    if (xmax <= xmin || ymax <= ymin) return 0;
    float inter = (ymax - ymin) * (xmax - xmin);
    float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    if (area_a <= 0 || area_b <= 0) return 0;
    float uni = area_a + area_b - inter;
    return uni > 0 && inter / uni > thr;
}

#endif
