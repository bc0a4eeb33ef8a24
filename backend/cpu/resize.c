/* Resize for the LLVM backend: the per-axis taps (input index and weight per output coordinate
 * and tap: nearest, linear, cubic, antialias, exclude_outside, every coordinate transformation
 * mode) come from the interpreter's own code (ir/resize_taps.h, from ONNX's reference): at
 * compile time as constant tables when scales and roi are constants, else at run time into the
 * kernel's scratch through the runtime's irt_resize_taps. The kernel sums weight * input over
 * the tap product in f64.
 * The output shape is static: scales given at run time must give it (trunc(scale * size) is
 * the compiled output size) and sizes given at run time (stretch policy) must equal it, else
 * the run fails naming the node; as the output size bounds the scale from below, it also
 * bounds antialias's taps. Float dtypes only.
 */
#include "backend/cpu/cpu.h"
#include "backend/runtime/abi.h"
#include "ir/resize_taps.h"
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
    const void *data = v ? lower_value_const_data(g, v) : NULL;
    int64_t cnt;
    if (!data || !ir_type_numel(g, ir_value_type(g, v), &cnt) || cnt > (int64_t)cap) return false;
    IrDType dt = ir_type_dtype(g, ir_value_type(g, v));
    for (int64_t i = 0; i < cnt; i++) out[i] = ir_elem_get_f64(dt, data, (size_t)i);
    *n = (uint32_t)cnt;
    return true;
}

/* Elements of v (0 when absent) and whether they are known at compile time. */
static int64_t operand_count(const IrGraph *g, IrValueId v) {
    int64_t cnt;
    return v && ir_type_numel(g, ir_value_type(g, v), &cnt) ? cnt : 0;
}

/* What a Resize node needs: its shapes, attributes and, per axis, where scale and roi come from. */
typedef struct RsPlan {
    uint32_t r, nax;
    int64_t d[IR_MAX_RANK], od[IR_MAX_RANK], axes[IR_MAX_RANK];
    bool active[IR_MAX_RANK];
    IrResizeCfg cfg;
    IrResizeMode mode;
    double sc[IR_MAX_RANK], rlo[IR_MAX_RANK], rhi[IR_MAX_RANK];
    IrValueId roi, scales, sizes;
    bool rt_scales, rt_roi, rt_sizes; /* given at run time */
    int stride[IR_MAX_RANK];          /* run-time taps: taps stored per output coordinate */
} RsPlan;

static bool rs_runtime_taps(const RsPlan *p) { return p->rt_scales || p->rt_roi; }

/* NULL, or why the node cannot compile. */
static const char *rs_plan(const IrGraph *g, IrNodeId n, RsPlan *p) {
    memset(p, 0, sizeof *p);
    uint32_t no = ir_node_num_operands(g, n), ry;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    p->roi = no > 1 ? ir_node_operand(g, n, 1) : 0;
    p->scales = no > 2 ? ir_node_operand(g, n, 2) : 0;
    p->sizes = no > 3 ? ir_node_operand(g, n, 3) : 0;
    if (!lower_value_shape(g, x, &p->r, p->d) || !lower_value_shape(g, y, &ry, p->od)) return "with these shapes";
    if (!lo_is_float(ir_type_dtype(g, ir_value_type(g, x)))) return "on this dtype";
    if (ry != p->r || p->r == 0) return "with these shapes";
    bool found;
    IrResizeCfg *cfg = &p->cfg;
    cfg->mode = ir_node_attr_string(g, n, "mode", &found);
    cfg->ctm = ir_node_attr_string(g, n, "coordinate_transformation_mode", &found);
    cfg->nearest = ir_node_attr_string(g, n, "nearest_mode", &found);
    if (!cfg->mode) cfg->mode = "nearest";
    if (!cfg->ctm) cfg->ctm = "half_pixel";
    if (!cfg->nearest) cfg->nearest = "round_prefer_floor";
    cfg->A = ir_node_attr_float(g, n, "cubic_coeff_a", &found);
    cfg->extrap = ir_node_attr_float(g, n, "extrapolation_value", &found);
    cfg->exclude = ir_node_attr_int(g, n, "exclude_outside", &found) != 0;
    cfg->antialias = ir_node_attr_int(g, n, "antialias", &found) != 0;
    if (!ir_resize_mode_parse(cfg->mode, cfg->ctm, cfg->nearest, &p->mode)) return "with this mode";
    if (cfg->antialias && p->mode.mode == IR_RESIZE_NEAREST) cfg->antialias = false;
    p->mode.A = cfg->A;
    p->mode.exclude = cfg->exclude;
    p->mode.antialias = cfg->antialias;
    IrAttrValue av;
    if (ir_node_attr(g, n, "axes", &av) && av.kind == IR_ATTR_INTS && av.count <= IR_MAX_RANK && av.count > 0) {
        for (uint32_t i = 0; i < av.count; i++) p->axes[p->nax++] = ir_shape_axis(av.ints[i], p->r);
    } else {
        for (uint32_t i = 0; i < p->r; i++) p->axes[p->nax++] = i;
    }
    for (uint32_t i = 0; i < p->r; i++) p->sc[i] = 1, p->rlo[i] = 0, p->rhi[i] = 1;
    for (uint32_t i = 0; i < p->nax; i++) {
        if (p->axes[i] < 0 || p->axes[i] >= (int64_t)p->r) return "with these axes";
        p->active[p->axes[i]] = true;
    }
    for (uint32_t i = 0; i < p->r; i++)
        if (!p->active[i] && p->od[i] != p->d[i]) return "with these shapes";
    double v[2 * IR_MAX_RANK];
    uint32_t nv;
    bool crop = p->mode.ctm == IR_RESIZE_TF_CROP;
    int64_t nroi = operand_count(g, p->roi);
    if (nroi > 0 && nroi != 2 * (int64_t)p->nax) return "with a roi of the wrong length"; /* the interpreter refuses it */
    if (nroi > 0 && crop) {
        if (const_f64s(g, p->roi, v, &nv, 2 * IR_MAX_RANK)) {
            for (uint32_t i = 0; i < p->nax; i++) p->rlo[p->axes[i]] = v[i], p->rhi[p->axes[i]] = v[p->nax + i];
        } else {
            p->rt_roi = true;
        }
    }
    int64_t nsc = operand_count(g, p->scales), nsz = operand_count(g, p->sizes);
    if ((nsc > 0) == (nsz > 0)) return "without exactly one of scales and sizes";
    if (nsc > 0) {
        if (nsc != (int64_t)p->nax) return "with these scales";
        if (const_f64s(g, p->scales, v, &nv, 2 * IR_MAX_RANK)) {
            for (uint32_t i = 0; i < p->nax; i++) p->sc[p->axes[i]] = v[i];
        } else {
            /* the output size bounds the scale: trunc(scale * size) == out */
            p->rt_scales = true;
            for (uint32_t i = 0; i < p->nax; i++) {
                int64_t k = p->axes[i];
                if (p->d[k] == 0 || p->od[k] == 0) return "with scales given at run time and an empty axis";
                p->sc[k] = (double)p->od[k] / (double)p->d[k];
            }
        }
    } else {
        if (nsz != (int64_t)p->nax) return "with these sizes";
        const char *pol = ir_node_attr_string(g, n, "keep_aspect_ratio_policy", &found);
        bool stretch = !pol || strcmp(pol, "stretch") == 0;
        if (!const_f64s(g, p->sizes, v, &nv, 2 * IR_MAX_RANK)) {
            /* sizes given at run time: with the stretch policy they must be the output's static dims */
            if (!stretch) return "with sizes given at run time and keep_aspect_ratio_policy";
            p->rt_sizes = true;
            for (uint32_t i = 0; i < p->nax; i++) v[i] = (double)p->od[p->axes[i]];
        }
        for (uint32_t i = 0; i < p->nax; i++) p->sc[p->axes[i]] = v[i] / (double)p->d[p->axes[i]];
        if (!stretch) {
            bool larger = strcmp(pol, "not_smaller") == 0;
            double s = p->sc[p->axes[0]];
            for (uint32_t i = 1; i < p->nax; i++) s = larger ? fmax(s, p->sc[p->axes[i]]) : fmin(s, p->sc[p->axes[i]]);
            for (uint32_t i = 0; i < p->nax; i++) p->sc[p->axes[i]] = s;
        }
    }
    for (uint32_t i = 0; i < p->r; i++) {
        if (!p->active[i]) continue;
        if (!(p->sc[i] > 0) || p->d[i] == 0) return "with these scales";
        int64_t start;
        int nt = ir_resize_tap_count(&p->mode, p->sc[i], &start);
        if (nt < 1 || nt > 64) return "with these taps";
        /* a run-time scale may sit a rounding below out / size: room for the wider count */
        p->stride[i] = nt + (p->rt_scales && p->mode.antialias ? 2 : 0);
    }
    return NULL;
}

static int64_t up8(int64_t v) { return (v + 7) / 8 * 8; }

int64_t llvm_ops_resize_scratch_bytes(const IrGraph *g, IrNodeId n) {
    RsPlan p;
    if (ir_node_op(g, n) != IR_OP_RESIZE || rs_plan(g, n, &p) || !rs_runtime_taps(&p)) return 0;
    int64_t bytes = 0;
    for (uint32_t i = 0; i < p.r; i++)
        if (p.active[i]) bytes += p.od[i] * p.stride[i] * 16 + up8(p.od[i]);
    return bytes + 64; /* + the call's parameters */
}

/* v[k] of a float or integer tensor as f64. */
static LLVMValueRef load_f64(LlvmEmit *e, IrValueId v, int64_t k) {
    IrDType dt = lo_dtype(e, v);
    if (lo_is_float(dt)) return lo_to_f64(e, lo_load(e, dt, lo_buf(e, v), lo_i64(e, k)));
    return LLVMBuildSIToFP(e->b, lo_load_int(e, dt, lo_buf(e, v), lo_i64(e, k)), lo_f64_t(e), "");
}

/* The run-time checks: scales that give the compiled output sizes, sizes equal to them. */
static LLVMValueRef rs_inputs_ok(LlvmEmit *e, const RsPlan *pl, LLVMValueRef *scale) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef ok = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 1, 0);
    for (uint32_t i = 0; i < pl->nax; i++) {
        int64_t k = pl->axes[i];
        if (pl->rt_scales) {
            LLVMValueRef s = load_f64(e, pl->scales, i);
            scale[k] = s;
            LLVMValueRef pos = LLVMBuildFCmp(b, LLVMRealOGT, s, LLVMConstReal(lo_f64_t(e), 0), "");
            LLVMValueRef prod = LLVMBuildFMul(b, s, LLVMConstReal(lo_f64_t(e), (double)pl->d[k]), "");
            /* trunc, below 2^62 so the conversion is defined */
            LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, prod, LLVMConstReal(lo_f64_t(e), 4.6e18), "");
            prod = LLVMBuildSelect(b, small, prod, LLVMConstReal(lo_f64_t(e), 0), "");
            LLVMValueRef out = LLVMBuildFPToSI(b, prod, lo_i64_t(e), "");
            LLVMValueRef eq = LLVMBuildICmp(b, LLVMIntEQ, out, lo_i64(e, pl->od[k]), "");
            ok = LLVMBuildAnd(b, ok, LLVMBuildAnd(b, pos, LLVMBuildAnd(b, small, eq, ""), ""), "");
        }
        if (pl->rt_sizes) {
            LLVMValueRef s = lo_load_int(e, lo_dtype(e, pl->sizes), lo_buf(e, pl->sizes), lo_i64(e, i));
            ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, s, lo_i64(e, pl->od[k]), ""), "");
        }
    }
    return ok;
}

/* Taps of every resized axis into the node's scratch through irt_resize_taps. */
static void rs_runtime_tables(LlvmEmit *e, const RsPlan *pl, Rs *p, LLVMValueRef *scale) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e), i8 = lo_i8_t(e);
    LLVMValueRef scratch = lo_buf(e, ir_graph_num_values(e->g) + 1 + e->index);
    LLVMValueRef fp = LLVMBuildAlloca(e->ab, LLVMArrayType(f64, 4), "");
    int64_t at = 0;
    for (uint32_t i = 0; i < pl->r; i++) {
        if (!pl->active[i]) continue;
        int64_t cnt = pl->od[i] * pl->stride[i];
        LLVMValueRef off = lo_i64(e, at);
        p->idx_tab[i] = LLVMBuildGEP2(b, i8, scratch, &off, 1, "");
        off = lo_i64(e, at + cnt * 8);
        p->w_tab[i] = LLVMBuildGEP2(b, i8, scratch, &off, 1, "");
        off = lo_i64(e, at + cnt * 16);
        LLVMValueRef outside = LLVMBuildGEP2(b, i8, scratch, &off, 1, "");
        at += cnt * 16 + up8(pl->od[i]);
        p->n[i] = pl->stride[i];
        if (pl->mode.ctm == IR_RESIZE_TF_CROP) {
            p->out_tab[i] = outside;
            p->any_outside = true;
        }
        int64_t ip[8] = {pl->mode.mode, pl->mode.ctm, pl->mode.nearest, pl->mode.exclude, pl->mode.antialias,
                         pl->d[i],      pl->od[i],    pl->stride[i]};
        LLVMValueRef fv[4] = {LLVMConstReal(f64, pl->mode.A), scale[i] ? scale[i] : LLVMConstReal(f64, pl->sc[i]),
                              LLVMConstReal(f64, pl->rlo[i]), LLVMConstReal(f64, pl->rhi[i])};
        if (pl->rt_roi)
            for (uint32_t k = 0; k < pl->nax; k++)
                if (pl->axes[k] == (int64_t)i) {
                    fv[2] = load_f64(e, pl->roi, k);
                    fv[3] = load_f64(e, pl->roi, pl->nax + k);
                }
        for (int k = 0; k < 4; k++) {
            LLVMValueRef ix[2] = {lo_i64(e, 0), lo_i64(e, k)};
            LLVMBuildStore(b, fv[k], LLVMBuildGEP2(b, LLVMArrayType(f64, 4), fp, ix, 2, ""));
        }
        LLVMValueRef args[6] = {lo_const_i64s(e, ip, 8, "resize_taps"), fp, p->idx_tab[i], p->w_tab[i], outside,
                                lo_buf(e, lower_sym_slot(e->g) + 1)};
        lo_call_runtime(e, IRT_FN_RESIZE_TAPS, NULL, args, 6);
    }
}

IrStatus llvm_ops_resize_gen(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    RsPlan pl;
    const char *why = rs_plan(g, n, &pl);
    if (why) return lo_unsupported(e, why);
    Rs p = {.dt = lo_dtype(e, x), .r = pl.r, .extrap = pl.cfg.extrap};
    ir_shape_strides(p.r, pl.d, p.istr);
    p.x = lo_buf(e, x);
    p.y = lo_buf(e, y);
    p.acc = lo_var(e, lo_f64_t(e), LLVMConstReal(lo_f64_t(e), 0));
    for (uint32_t i = 0; i < p.r; i++) p.active[i] = pl.active[i];
    if (ir_shape_numel(p.r, pl.d) == 0) return ir_shape_numel(p.r, pl.od) ? lo_unsupported(e, "of an empty input") : IR_OK;
    LLVMValueRef scale[IR_MAX_RANK] = {0};
    LLVMBasicBlockRef after = NULL;
    if (pl.rt_scales || pl.rt_sizes) {
        LLVMValueRef ok = rs_inputs_ok(e, &pl, scale);
        char msg[256];
        snprintf(msg, sizeof msg, "Resize %%%s: the %s given at run time do not give the compiled output shape",
                 ir_value_name(g, y), pl.rt_scales ? "scales" : "sizes");
        lo_fail_if(e, LLVMBuildNot(e->b, ok, ""), msg);
        after = lo_if_begin(e, ok);
    }
    IrStatus s = IR_OK;
    if (rs_runtime_taps(&pl)) {
        rs_runtime_tables(e, &pl, &p, scale);
    } else {
        IrResizeTaps taps[IR_MAX_RANK];
        memset(taps, 0, sizeof taps);
        for (uint32_t i = 0; i < p.r && !s; i++) {
            if (!p.active[i]) continue;
            if (!ir_resize_axis_taps(&pl.cfg, pl.d[i], pl.od[i], pl.sc[i], pl.rlo[i], pl.rhi[i], 64, &taps[i])) {
                s = lo_unsupported(e, "with these taps");
                break;
            }
            p.n[i] = taps[i].n;
            int64_t cnt = pl.od[i] * taps[i].n;
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
                for (int64_t k = 0; k < pl.od[i]; k++) iv[k] = LLVMConstInt(lo_i8_t(e), taps[i].outside[k], 0);
                p.out_tab[i] = lo_const_array(e, lo_i8_t(e), iv, (uint64_t)pl.od[i], "resize_taps");
                p.any_outside = true;
            }
            free(iv);
            free(wv);
        }
        for (uint32_t i = 0; i < p.r; i++) ir_resize_taps_free(&taps[i]);
    }
    if (s) return s;
    int64_t st[1][LLVM_OPS_MAX_NEST] = {{0}};
    ir_shape_strides(p.r, pl.od, st[0]);
    lo_nest(e, p.r, pl.od, 1, st, NULL, rs_body, &p);
    if (after) lo_if_end(e, after);
    return IR_OK;
}
