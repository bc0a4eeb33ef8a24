/* Resize for the LLVM backend: the per-axis taps (input index and weight per output coordinate
 * and tap: nearest, linear, cubic, antialias, exclude_outside, every coordinate transformation
 * mode) are computed at compile time by the interpreter's function (ir_resize_axis_taps in
 * validate.h, from ONNX's reference) and emitted as constant tables; the kernel sums weight *
 * input over the tap product in f64.
 * Scales and roi must be constants after specialization; sizes given at run time (stretch
 * policy) are taken as the output's static dims the kernel is compiled for. Float dtypes only.
 */
#include "backend/llvm_ops.h"
#include "validate/validate.h"

typedef struct Rs {
    IrDType dt;
    uint32_t r;
    bool active[IR_MAX_RANK], any_outside;
    int n[IR_MAX_RANK];
    int64_t istr[IR_MAX_RANK];
    LLVMValueRef x, y, idx_tab[IR_MAX_RANK], w_tab[IR_MAX_RANK], out_tab[IR_MAX_RANK], acc;
    double extrap;
} Rs;

/* o[0] output offset, idx the output coordinates */
static void rs_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Rs *p = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e), i64 = lo_i64_t(e);
    LLVMBuildStore(b, LLVMConstReal(f64, 0), p->acc);
    LoLoop l[IR_MAX_RANK];
    LLVMValueRef w = LLVMConstReal(f64, 1), off = lo_i64(e, 0);
    for (uint32_t i = 0; i < p->r; i++) {
        LLVMValueRef c = idx[i];
        if (p->active[i]) {
            lo_loop_begin(e, &l[i], p->n[i]);
            LLVMValueRef k = LLVMBuildAdd(b, LLVMBuildMul(b, idx[i], lo_i64(e, p->n[i]), ""), l[i].iv, "");
            c = LLVMBuildLoad2(b, i64, LLVMBuildGEP2(b, i64, p->idx_tab[i], &k, 1, ""), "");
            w = LLVMBuildFMul(b, w, LLVMBuildLoad2(b, f64, LLVMBuildGEP2(b, f64, p->w_tab[i], &k, 1, ""), ""), "");
        }
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, c, lo_i64(e, p->istr[i]), ""), "");
    }
    LLVMValueRef v = lo_load(e, p->dt, p->x, off);
    v = lo_to_f64(e, v);
    LLVMValueRef a = LLVMBuildLoad2(b, f64, p->acc, "");
    LLVMValueRef nz = LLVMBuildFCmp(b, LLVMRealUNE, w, LLVMConstReal(f64, 0), "");
    LLVMBuildStore(b, LLVMBuildSelect(b, nz, LLVMBuildFAdd(b, a, LLVMBuildFMul(b, w, v, ""), ""), a, ""), p->acc);
    for (uint32_t i = p->r; i-- > 0;)
        if (p->active[i]) lo_loop_end(e, &l[i]);
    LLVMValueRef r = LLVMBuildLoad2(b, f64, p->acc, "");
    if (p->any_outside) {
        LLVMValueRef out = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
        for (uint32_t i = 0; i < p->r; i++) {
            if (!p->out_tab[i]) continue;
            LLVMValueRef f = LLVMBuildLoad2(b, lo_i8_t(e), LLVMBuildGEP2(b, lo_i8_t(e), p->out_tab[i], &idx[i], 1, ""), "");
            out = LLVMBuildOr(b, out, LLVMBuildICmp(b, LLVMIntNE, f, LLVMConstInt(lo_i8_t(e), 0, 0), ""), "");
        }
        r = LLVMBuildSelect(b, out, LLVMConstReal(f64, p->extrap), r, "");
    }
    r = lo_from_f64(e, r, p->dt);
    lo_store(e, p->dt, p->y, o[0], r);
}

static bool const_f64s(const IrGraph *g, IrValueId v, double *out, uint32_t *n, uint32_t cap) {
    const void *data = v ? llvm_value_const_data(g, v) : NULL;
    int64_t cnt;
    if (!data || !ir_type_numel(g, ir_value_type(g, v), &cnt) || cnt > (int64_t)cap) return false;
    IrDType dt = ir_type_dtype(g, ir_value_type(g, v));
    for (int64_t i = 0; i < cnt; i++) out[i] = ir_elem_get_f64(dt, data, (size_t)i);
    *n = (uint32_t)cnt;
    return true;
}

IrStatus llvm_ops_resize_gen(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    uint32_t no = ir_node_num_operands(g, n);
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrValueId roi = no > 1 ? ir_node_operand(g, n, 1) : 0, scales = no > 2 ? ir_node_operand(g, n, 2) : 0;
    IrValueId sizes = no > 3 ? ir_node_operand(g, n, 3) : 0;
    Rs p = {.dt = lo_dtype(e, x)};
    uint32_t ry;
    int64_t d[IR_MAX_RANK], od[IR_MAX_RANK];
    lo_shape(e, x, &p.r, d);
    lo_shape(e, y, &ry, od);
    if (!lo_is_float(p.dt)) return lo_unsupported_dtype(e, p.dt);
    if (ry != p.r || p.r == 0) return lo_unsupported(e, "with these shapes");
    bool found;
    IrResizeCfg cfg;
    cfg.mode = ir_node_attr_string(g, n, "mode", &found);
    cfg.ctm = ir_node_attr_string(g, n, "coordinate_transformation_mode", &found);
    cfg.nearest = ir_node_attr_string(g, n, "nearest_mode", &found);
    if (!cfg.mode) cfg.mode = "nearest";
    if (!cfg.ctm) cfg.ctm = "half_pixel";
    if (!cfg.nearest) cfg.nearest = "round_prefer_floor";
    cfg.A = ir_node_attr_float(g, n, "cubic_coeff_a", &found);
    cfg.extrap = ir_node_attr_float(g, n, "extrapolation_value", &found);
    cfg.exclude = ir_node_attr_int(g, n, "exclude_outside", &found) != 0;
    cfg.antialias = ir_node_attr_int(g, n, "antialias", &found) != 0;
    if (strcmp(cfg.mode, "nearest") && strcmp(cfg.mode, "linear") && strcmp(cfg.mode, "cubic")) return lo_unsupported(e, "with this mode");
    if (cfg.antialias && strcmp(cfg.mode, "nearest") == 0) cfg.antialias = false;
    int64_t axes[IR_MAX_RANK];
    uint32_t nax = 0;
    IrAttrValue av;
    if (ir_node_attr(g, n, "axes", &av) && av.kind == IR_ATTR_INTS && av.count <= IR_MAX_RANK && av.count > 0) {
        for (uint32_t i = 0; i < av.count; i++) axes[nax++] = lo_norm_axis(av.ints[i], p.r);
    } else {
        for (uint32_t i = 0; i < p.r; i++) axes[nax++] = i;
    }
    double sc[IR_MAX_RANK], rlo[IR_MAX_RANK], rhi[IR_MAX_RANK], v[2 * IR_MAX_RANK];
    uint32_t nv;
    for (uint32_t i = 0; i < p.r; i++) sc[i] = 1, rlo[i] = 0, rhi[i] = 1;
    for (uint32_t i = 0; i < nax; i++) {
        if (axes[i] < 0 || axes[i] >= (int64_t)p.r) return lo_unsupported(e, "with these axes");
        p.active[axes[i]] = true;
    }
    if (roi && const_f64s(g, roi, v, &nv, 2 * IR_MAX_RANK) && nv > 0) {
        if (nv != 2 * nax) return lo_unsupported(e, "with this roi");
        for (uint32_t i = 0; i < nax; i++) rlo[axes[i]] = v[i], rhi[axes[i]] = v[nax + i];
    } else if (roi && !llvm_value_const_data(g, roi) && llvm_value_nbytes(g, roi)) {
        return lo_unsupported(e, "with a roi given at run time");
    }
    bool have_scales = scales && const_f64s(g, scales, v, &nv, 2 * IR_MAX_RANK) && nv > 0;
    if (have_scales) {
        if (nv != nax) return lo_unsupported(e, "with these scales");
        for (uint32_t i = 0; i < nax; i++) sc[axes[i]] = v[i];
    } else if (sizes) {
        const char *pol = ir_node_attr_string(g, n, "keep_aspect_ratio_policy", &found);
        bool stretch = !pol || strcmp(pol, "stretch") == 0;
        if (!const_f64s(g, sizes, v, &nv, 2 * IR_MAX_RANK)) {
            /* sizes given at run time: with the stretch policy they are the output's static dims
             * (the kernel is compiled for that output shape) */
            if (!stretch) return lo_unsupported(e, "with sizes given at run time and keep_aspect_ratio_policy");
            nv = nax;
            for (uint32_t i = 0; i < nax; i++) v[i] = (double)od[axes[i]];
        }
        if (nv != nax) return lo_unsupported(e, "with these sizes");
        for (uint32_t i = 0; i < nax; i++) sc[axes[i]] = v[i] / (double)d[axes[i]];
        if (pol && strcmp(pol, "stretch") != 0) {
            bool larger = strcmp(pol, "not_smaller") == 0;
            double s = sc[axes[0]];
            for (uint32_t i = 1; i < nax; i++) s = larger ? fmax(s, sc[axes[i]]) : fmin(s, sc[axes[i]]);
            for (uint32_t i = 0; i < nax; i++) sc[axes[i]] = s;
        }
    } else {
        return lo_unsupported(e, "with scales given at run time");
    }
    IrStatus s = IR_OK;
    IrResizeTaps taps[IR_MAX_RANK];
    memset(taps, 0, sizeof taps);
    lo_strides(p.r, d, p.istr);
    for (uint32_t i = 0; i < p.r && !s; i++) {
        if (!p.active[i]) continue;
        if (!(sc[i] > 0) || d[i] == 0) {
            s = lo_unsupported(e, "with these scales");
            break;
        }
        if (!ir_resize_axis_taps(&cfg, d[i], od[i], sc[i], rlo[i], rhi[i], 64, &taps[i])) {
            s = lo_unsupported(e, "with these taps");
            break;
        }
        p.n[i] = taps[i].n;
        int64_t cnt = od[i] * taps[i].n;
        LLVMValueRef *iv = malloc((size_t)(cnt + 1) * sizeof *iv), *wv = malloc((size_t)(cnt + 1) * sizeof *wv);
        if (!iv || !wv) s = IR_ENOMEM;
        for (int64_t k = 0; !s && k < cnt; k++) {
            iv[k] = lo_i64(e, taps[i].idx[k]);
            wv[k] = LLVMConstReal(lo_f64_t(e), taps[i].w[k]);
        }
        if (!s) {
            p.idx_tab[i] = lo_const_array(e, lo_i64_t(e), iv, (uint64_t)cnt, "resize_taps");
            p.w_tab[i] = lo_const_array(e, lo_f64_t(e), wv, (uint64_t)cnt, "resize_taps");
        }
        if (!s && taps[i].any_outside) {
            for (int64_t k = 0; k < od[i]; k++) iv[k] = LLVMConstInt(lo_i8_t(e), taps[i].outside[k], 0);
            p.out_tab[i] = lo_const_array(e, lo_i8_t(e), iv, (uint64_t)od[i], "resize_taps");
            p.any_outside = true;
        }
        free(iv);
        free(wv);
    }
    for (uint32_t i = 0; i < p.r; i++) ir_resize_taps_free(&taps[i]);
    if (s) return s;
    for (uint32_t i = 0; i < p.r; i++)
        if (!p.active[i] && od[i] != d[i]) return lo_unsupported(e, "with these shapes");
    p.extrap = cfg.extrap;
    p.x = lo_buf(e, x);
    p.y = lo_buf(e, y);
    p.acc = lo_var(e, lo_f64_t(e), LLVMConstReal(lo_f64_t(e), 0));
    int64_t st[1][LLVM_OPS_MAX_NEST] = {{0}};
    lo_strides(p.r, od, st[0]);
    if (lo_numel(p.r, d) == 0) return lo_numel(p.r, od) ? lo_unsupported(e, "of an empty input") : IR_OK;
    lo_nest(e, p.r, od, 1, st, NULL, rs_body, &p);
    return IR_OK;
}
