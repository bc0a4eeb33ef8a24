/* Resize (nearest, linear, cubic; every coordinate transformation mode, exclude_outside,
 * tf_crop_and_resize's extrapolation), one thread per output element: the taps of each axis are
 * computed in the kernel as ir/resize_taps.h computes them, from scales and roi that are
 * constants or read on the device (so scales given at run time are honoured), then the tap
 * product is summed in double. Antialiasing is refused (its tap count follows the scale).
 */
#include "backend/cuda/cu.h"
#include "ir/resize_taps.h"

#include <math.h>
#include <string.h>

#define RS_TAPS 4

typedef struct RsCtx {
    IrValueId x, y, roi, scales;
    IrDType xt, yt;
    IrResizeMode m;
    double extrap;
    uint32_t r;
    int64_t d[IR_MAX_RANK], od[IR_MAX_RANK], xs[IR_MAX_RANK];
    bool active[IR_MAX_RANK];
    int scale_at[IR_MAX_RANK], roi_at[IR_MAX_RANK]; /* entry of the scales/roi operand (-1: constant) */
    int nax;
    double sc[IR_MAX_RANK], rlo[IR_MAX_RANK], rhi[IR_MAX_RANK];
} RsCtx;

static LLVMValueRef dc(Cu *c, double v) { return LLVMConstReal(c->f64, v); }
static LLVMValueRef fl64(Cu *c, const char *n, LLVMValueRef x) { return cu_intr(c, n, &c->f64, 1, &x, 1); }

static LLVMValueRef cubic_w(Cu *c, LLVMValueRef x, double A) {
    LLVMBuilderRef b = c->b;
    x = fl64(c, "llvm.fabs", x);
    LLVMValueRef in1 = LLVMBuildFAdd(b, LLVMBuildFMul(b, LLVMBuildFSub(b, LLVMBuildFMul(b, dc(c, A + 2), x, ""), dc(c, A + 3), ""),
                                                      LLVMBuildFMul(b, x, x, ""), ""), dc(c, 1.0), "");
    LLVMValueRef t = LLVMBuildFAdd(b, LLVMBuildFMul(b, LLVMBuildFSub(b, LLVMBuildFMul(b, dc(c, A), x, ""), dc(c, 5 * A), ""), x, ""), dc(c, 8 * A), "");
    LLVMValueRef in2 = LLVMBuildFSub(b, LLVMBuildFMul(b, t, x, ""), dc(c, 4 * A), "");
    return sel(c, fcmp(c, LLVMRealOLE, x, dc(c, 1.0)), in1, sel(c, fcmp(c, LLVMRealOLT, x, dc(c, 2.0)), in2, dc(c, 0.0)));
}

static LLVMValueRef operand_f(Cu *c, IrValueId v, int at, double dflt) {
    if (at < 0) return dc(c, dflt);
    return cu_load_typed(c, lower_value_dtype(c->g, v), pslot(c, v), ci(c, at));
}

/* The taps of axis i at output coordinate x: n indices (index type) and weights (double). */
static int axis_taps(Cu *c, const RsCtx *p, uint32_t i, LLVMValueRef x, LLVMValueRef *idx, LLVMValueRef *w,
                     LLVMValueRef *outside) {
    LLVMBuilderRef b = c->b;
    const IrResizeMode *m = &p->m;
    int64_t in = p->d[i], out = p->od[i];
    if (!p->active[i]) {
        idx[0] = x;
        w[0] = dc(c, 1.0);
        return 1;
    }
    LLVMValueRef scale = operand_f(c, p->scales, p->scale_at[i], p->sc[i]);
    LLVMValueRef xr = LLVMBuildSIToFP(b, x, c->f64, ""), ow = LLVMBuildFMul(b, scale, dc(c, (double)in), "");
    LLVMValueRef ow1 = fcmp(c, LLVMRealOEQ, ow, dc(c, 1.0)), xo, half = dc(c, 0.5), inm1 = dc(c, (double)(in - 1));
    LLVMValueRef xh = LLVMBuildFSub(b, LLVMBuildFDiv(b, LLVMBuildFAdd(b, xr, half, ""), scale, ""), half, "");
    switch (m->ctm) {
    case IR_RESIZE_ALIGN_CORNERS:
        xo = sel(c, ow1, dc(c, 0.0), LLVMBuildFDiv(b, LLVMBuildFMul(b, xr, inm1, ""), LLVMBuildFSub(b, ow, dc(c, 1.0), ""), ""));
        break;
    case IR_RESIZE_ASYMMETRIC: xo = LLVMBuildFDiv(b, xr, scale, ""); break;
    case IR_RESIZE_TF_CROP: {
        LLVMValueRef lo = operand_f(c, p->roi, p->roi_at[i], p->rlo[i]);
        LLVMValueRef hi = operand_f(c, p->roi, p->roi_at[i] < 0 ? -1 : p->roi_at[i] + p->nax, p->rhi[i]);
        LLVMValueRef span = LLVMBuildFMul(b, LLVMBuildFSub(b, hi, lo, ""), inm1, "");
        xo = sel(c, ow1, LLVMBuildFDiv(b, span, dc(c, 2.0), ""), LLVMBuildFDiv(b, LLVMBuildFMul(b, xr, span, ""), LLVMBuildFSub(b, ow, dc(c, 1.0), ""), ""));
        xo = LLVMBuildFAdd(b, xo, LLVMBuildFMul(b, lo, inm1, ""), "");
        *outside = LLVMBuildOr(b, *outside, LLVMBuildOr(b, fcmp(c, LLVMRealOLT, xo, dc(c, 0.0)), fcmp(c, LLVMRealOGT, xo, inm1), ""), "");
        break;
    }
    case IR_RESIZE_PYTORCH_HALF_PIXEL: xo = sel(c, ow1, dc(c, -0.5), xh); break;
    case IR_RESIZE_HALF_PIXEL_SYMMETRIC: {
        LLVMValueRef adj = LLVMBuildFDiv(b, dc(c, (double)out), ow, ""), center = dc(c, (double)in / 2);
        xo = LLVMBuildFAdd(b, LLVMBuildFMul(b, center, LLVMBuildFSub(b, dc(c, 1.0), adj, ""), ""), xh, "");
        break;
    }
    case IR_RESIZE_TF_HALF_PIXEL_NN: xo = LLVMBuildFDiv(b, LLVMBuildFAdd(b, xr, half, ""), scale, ""); break;
    default: xo = xh; break;
    }
    LLVMValueRef sane = LLVMBuildAnd(b, fcmp(c, LLVMRealOGE, xo, dc(c, -1e15)), fcmp(c, LLVMRealOLE, xo, dc(c, 1e15)), "");
    if (m->ctm == IR_RESIZE_TF_CROP) *outside = LLVMBuildOr(b, *outside, LLVMBuildNot(b, sane, ""), "");
    xo = sel(c, sane, xo, sel(c, fcmp(c, LLVMRealOGT, xo, dc(c, 0.0)), dc(c, 1e15), dc(c, -1e15)));
    LLVMValueRef f = fl64(c, "llvm.floor", xo), ratio = LLVMBuildFSub(b, xo, f, "");
    LLVMValueRef exact = fcmp(c, LLVMRealOEQ, ratio, dc(c, 0.0));
    f = sel(c, exact, LLVMBuildFSub(b, f, dc(c, 1.0), ""), f);
    ratio = sel(c, exact, dc(c, 1.0), ratio);
    LLVMValueRef fi = LLVMBuildFPToSI(b, f, c->i64, "");
    int n;
    LLVMValueRef qi[RS_TAPS];
    if (m->mode == IR_RESIZE_NEAREST) {
        LLVMValueRef up;
        LLVMValueRef one = fcmp(c, LLVMRealOEQ, ratio, dc(c, 1.0));
        switch (m->nearest) {
        case IR_RESIZE_ROUND_PREFER_CEIL: up = fcmp(c, LLVMRealOGE, ratio, half); break;
        case IR_RESIZE_FLOOR: up = LLVMConstInt(c->i1, 0, 0); break;
        case IR_RESIZE_CEIL: up = LLVMConstInt(c->i1, 1, 0); break;
        default: up = fcmp(c, LLVMRealOGT, ratio, half); break;
        }
        up = LLVMBuildOr(b, up, one, "");
        n = 1;
        qi[0] = LLVMBuildAdd(b, fi, LLVMBuildZExt(b, up, c->i64, ""), "");
        w[0] = dc(c, 1.0);
    } else if (m->mode == IR_RESIZE_LINEAR) {
        n = 2;
        qi[0] = fi;
        qi[1] = LLVMBuildAdd(b, fi, LLVMConstInt(c->i64, 1, 0), "");
        w[0] = LLVMBuildFSub(b, dc(c, 1.0), ratio, "");
        w[1] = ratio;
    } else {
        n = 4;
        for (int q = 0; q < 4; q++) {
            qi[q] = LLVMBuildAdd(b, fi, LLVMConstInt(c->i64, (unsigned long long)(q - 1), 1), "");
            w[q] = cubic_w(c, LLVMBuildFSub(b, ratio, dc(c, (double)(q - 1)), ""), m->A);
        }
    }
    if (m->exclude && m->mode != IR_RESIZE_NEAREST) {
        LLVMValueRef sum = dc(c, 0.0);
        for (int q = 0; q < n; q++) {
            LLVMValueRef in_ = LLVMBuildICmp(b, LLVMIntULT, qi[q], LLVMConstInt(c->i64, (unsigned long long)in, 0), "");
            w[q] = sel(c, in_, w[q], dc(c, 0.0));
            sum = LLVMBuildFAdd(b, sum, w[q], "");
        }
        LLVMValueRef nz = fcmp(c, LLVMRealONE, sum, dc(c, 0.0));
        for (int q = 0; q < n; q++) w[q] = sel(c, nz, LLVMBuildFDiv(b, w[q], sum, ""), dc(c, 0.0));
    }
    for (int q = 0; q < n; q++) {
        LLVMValueRef v = qi[q];
        v = sel(c, LLVMBuildICmp(b, LLVMIntSLT, v, LLVMConstInt(c->i64, 0, 0), ""), LLVMConstInt(c->i64, 0, 0), v);
        v = sel(c, LLVMBuildICmp(b, LLVMIntSGE, v, LLVMConstInt(c->i64, (unsigned long long)in, 0), ""),
                LLVMConstInt(c->i64, (unsigned long long)(in - 1), 0), v);
        idx[q] = c->it == c->i64 ? v : LLVMBuildTrunc(b, v, c->it, "");
    }
    return n;
}

static void rs_body(Cu *c, LLVMValueRef *o, void *user) {
    RsCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef co[IR_MAX_RANK], rem = o[0];
    for (uint32_t k = p->r; k-- > 0;) {
        co[k] = k == 0 ? rem : LLVMBuildURem(b, rem, ci(c, p->od[k]), "");
        if (k > 0) rem = LLVMBuildUDiv(b, rem, ci(c, p->od[k]), "");
    }
    LLVMValueRef idx[IR_MAX_RANK][RS_TAPS], w[IR_MAX_RANK][RS_TAPS], outside = LLVMConstInt(c->i1, 0, 0);
    int n[IR_MAX_RANK];
    for (uint32_t i = 0; i < p->r; i++) n[i] = axis_taps(c, p, i, co[i], idx[i], w[i], &outside);
    /* the tap product, unrolled (at most 4 taps on each resized axis) */
    int q[IR_MAX_RANK] = {0};
    LLVMValueRef acc = dc(c, 0.0), X = pslot(c, p->x);
    for (;;) {
        LLVMValueRef wt = dc(c, 1.0), off = ci(c, 0);
        for (uint32_t i = 0; i < p->r; i++) {
            if (n[i] > 1 || p->active[i]) wt = LLVMBuildFMul(b, wt, w[i][q[i]], "");
            off = LLVMBuildAdd(b, off, LLVMBuildMul(b, idx[i][q[i]], ci(c, p->xs[i]), ""), "");
        }
        LLVMValueRef v = cu_load_typed(c, p->xt, X, off);
        acc = sel(c, fcmp(c, LLVMRealONE, wt, dc(c, 0.0)), LLVMBuildFAdd(b, acc, LLVMBuildFMul(b, wt, v, ""), ""), acc);
        uint32_t i = p->r;
        while (i-- > 0) {
            if (++q[i] < n[i]) break;
            q[i] = 0;
        }
        if (i == UINT32_MAX) break;
    }
    acc = sel(c, outside, dc(c, p->extrap), acc);
    cu_store_typed(c, p->yt, pslot(c, p->y), o[0], acc);
}

/* a float operand's constant values; false when it is not a constant */
static bool const_f(const IrGraph *g, IrValueId v, double *out, uint32_t cap, uint32_t *n) {
    const void *data = lower_value_const_data(g, v);
    if (!data) return false;
    IrDType dt = lower_value_dtype(g, v);
    size_t es = ir_dtype_size(dt);
    *n = es ? (uint32_t)(lower_value_nbytes(g, v) / es) : 0;
    if (*n > cap) return false;
    for (uint32_t i = 0; i < *n; i++) out[i] = ir_elem_get_f64(dt, data, i);
    return true;
}

IrStatus cuda_emit_resize(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    RsCtx p = {.x = ir_node_operand(g, n, 0), .y = ir_node_result(g, n, 0)};
    uint32_t no = ir_node_num_operands(g, n), ry;
    IrValueId roi = no > 1 ? ir_node_operand(g, n, 1) : 0, scales = no > 2 ? ir_node_operand(g, n, 2) : 0,
              sizes = no > 3 ? ir_node_operand(g, n, 3) : 0;
    if (roi && lower_value_nbytes(g, roi) == 0) roi = 0;
    if (scales && lower_value_nbytes(g, scales) == 0) scales = 0;
    if (sizes && lower_value_nbytes(g, sizes) == 0) sizes = 0;
    p.xt = lower_value_dtype(g, p.x);
    p.yt = lower_value_dtype(g, p.y);
    if (cu_kind(p.xt) != CU_KF || !cu_typed_ok(p.xt)) return cu_unsupported_dtype(c, p.xt);
    lower_value_shape(g, p.x, &p.r, p.d);
    lower_value_shape(g, p.y, &ry, p.od);
    if (ry != p.r || p.r == 0) return cu_unsupported(c, "with these shapes");
    ir_shape_strides(p.r, p.d, p.xs);
    bool found;
    const char *mode = ir_node_attr_string(g, n, "mode", &found), *ctm = ir_node_attr_string(g, n, "coordinate_transformation_mode", &found),
               *nearest = ir_node_attr_string(g, n, "nearest_mode", &found);
    if (!ir_resize_mode_parse(mode, ctm, nearest, &p.m)) return cu_unsupported(c, "with this mode");
    p.m.A = ir_node_attr_float(g, n, "cubic_coeff_a", &found);
    if (!found) p.m.A = -0.75;
    p.m.exclude = ir_node_attr_int(g, n, "exclude_outside", &found) != 0;
    if (ir_node_attr_int(g, n, "antialias", &found) != 0 && p.m.mode != IR_RESIZE_NEAREST) return cu_unsupported(c, "with antialias");
    p.extrap = ir_node_attr_float(g, n, "extrapolation_value", &found);
    int64_t axes[IR_MAX_RANK];
    IrAttrValue av;
    p.nax = 0;
    if (ir_node_attr(g, n, "axes", &av) && av.count > 0 && av.count <= IR_MAX_RANK) {
        for (uint32_t i = 0; i < av.count; i++) {
            axes[p.nax] = av.ints[i];
            if (!ir_shape_axis_checked(&axes[p.nax], p.r)) return cu_unsupported(c, "with these axes");
            p.nax++;
        }
    } else {
        for (uint32_t i = 0; i < p.r; i++) axes[p.nax++] = i;
    }
    for (uint32_t i = 0; i < p.r; i++) p.sc[i] = 1, p.rlo[i] = 0, p.rhi[i] = 1, p.scale_at[i] = p.roi_at[i] = -1;
    double v[2 * IR_MAX_RANK];
    uint32_t nv;
    if (!scales == !sizes) return cu_unsupported(c, "without exactly one of scales and sizes");
    if (scales) {
        if (lower_value_nbytes(g, scales) != (size_t)p.nax * ir_dtype_size(lower_value_dtype(g, scales)))
            return cu_unsupported(c, "with these scales");
        bool k = const_f(g, scales, v, 2 * IR_MAX_RANK, &nv);
        for (int i = 0; i < p.nax; i++) {
            if (k) p.sc[axes[i]] = v[i];
            else p.scale_at[axes[i]] = i, p.scales = scales;
        }
    } else {
        const char *pol = ir_node_attr_string(g, n, "keep_aspect_ratio_policy", &found);
        if (pol && strcmp(pol, "stretch") != 0) return cu_unsupported(c, "with keep_aspect_ratio_policy other than stretch");
        for (int i = 0; i < p.nax; i++) {
            if (p.d[axes[i]] == 0) return cu_unsupported(c, "on an empty axis");
            p.sc[axes[i]] = (double)p.od[axes[i]] / (double)p.d[axes[i]];
        }
    }
    if (roi && p.m.ctm == IR_RESIZE_TF_CROP) {
        if (lower_value_nbytes(g, roi) != (size_t)(2 * p.nax) * ir_dtype_size(lower_value_dtype(g, roi)))
            return cu_unsupported(c, "with a roi of the wrong length");
        bool k = const_f(g, roi, v, 2 * IR_MAX_RANK, &nv);
        for (int i = 0; i < p.nax; i++) {
            if (k) p.rlo[axes[i]] = v[i], p.rhi[axes[i]] = v[p.nax + i];
            else p.roi_at[axes[i]] = i, p.roi = roi;
        }
    }
    for (int i = 0; i < p.nax; i++) {
        int64_t a = axes[i];
        /* an axis whose constant scale is 1 at the same size maps each output to its input */
        bool ident = p.scale_at[a] < 0 && p.sc[a] == 1.0 && p.od[a] == p.d[a] && p.m.ctm != IR_RESIZE_TF_CROP &&
                     p.m.ctm != IR_RESIZE_HALF_PIXEL_SYMMETRIC;
        p.active[a] = !ident;
        if (p.active[a] && p.d[a] == 0) return cu_unsupported(c, "on an empty axis");
    }
    for (uint32_t i = 0; i < p.r; i++)
        if (!p.active[i] && p.od[i] != p.d[i]) return cu_unsupported(c, "with these shapes");
    int64_t total = ir_shape_numel(p.r, p.od), s1[1][IR_MAX_RANK] = {{1}};
    if (!total) return IR_OK;
    uint32_t slots[4] = {p.y, p.x, p.scales ? p.scales : p.x, p.roi ? p.roi : p.x};
    IrStatus st_ = cu_kbegin(c, slots, 4, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, rs_body, &p);
    return cu_kend(c, total, NULL);
}
