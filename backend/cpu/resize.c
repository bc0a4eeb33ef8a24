/* Resize for the LLVM backend, static and run-time shapes alike (dims from llvm/dims.h): the
 * per-axis taps (input index and weight per output coordinate and tap: nearest, linear, cubic,
 * antialias, exclude_outside, every coordinate transformation mode) come from the interpreter's
 * own code (ir/resize_taps.h): constant tables when shapes, scales and roi are constants, else
 * computed per run into the kernel's scratch by the runtime's irt_resize_taps. The kernel sums
 * weight * input over the tap product in f64. Scales or sizes given at run time must give the
 * output's dims (trunc(scale * size), or the sizes), else the run fails naming the node.
 * Float dtypes only.
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
    LLVMValueRef istr[IR_MAX_RANK], x, y, idx_tab[IR_MAX_RANK], w_tab[IR_MAX_RANK], out_tab[IR_MAX_RANK], acc;
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
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, c, p->istr[i], ""), "");
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

/* What a Resize node needs: its dims (constants, -1 where symbolic), attributes and, per axis,
 * where scale and roi come from. */
typedef struct RsPlan {
    uint32_t r, nax;
    int64_t d[IR_MAX_RANK], od[IR_MAX_RANK], axes[IR_MAX_RANK];
    IrExprId xe[IR_MAX_RANK], ye[IR_MAX_RANK]; /* the dims as the graph's expressions */
    bool active[IR_MAX_RANK], stat;            /* stat: every dim a constant */
    IrResizeCfg cfg;
    IrResizeMode mode;
    double sc[IR_MAX_RANK], rlo[IR_MAX_RANK], rhi[IR_MAX_RANK];
    bool sc_const[IR_MAX_RANK]; /* sc is the scale (else it is computed per run; sc bounds taps) */
    IrValueId roi, scales, sizes;
    bool by_scales;                   /* scales given (else sizes; the other may be an empty tensor) */
    bool rt_scales, rt_roi, rt_sizes; /* given at run time */
    int stride[IR_MAX_RANK];          /* run-time taps: taps stored per output coordinate */
} RsPlan;

/* Taps computed per run: a scale or roi given at run time, or dims known at run time only. */
static bool rs_runtime_taps(const RsPlan *p) { return p->rt_scales || p->rt_roi || !p->stat; }

/* The dims of v (rank *r): constants in d (-1 where symbolic), expressions in ex. */
static bool rs_dims(const IrGraph *g, IrValueId v, uint32_t *r, int64_t *d, IrExprId *ex) {
    IrTypeId t = ir_value_type(g, v);
    *r = t && !ir_type_is_container(g, t) ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
    if (*r == IR_RANK_UNKNOWN || *r > IR_MAX_RANK) return false;
    for (uint32_t k = 0; k < *r; k++) {
        ex[k] = ir_type_dims(g, t)[k];
        if (ir_expr_kind(g, ex[k]) == IR_EXPR_UNKNOWN) return false;
        if (!ir_expr_is_const(g, ex[k], &d[k])) d[k] = -1;
    }
    return true;
}

/* The scales and sizes of rs_plan: per resized axis, the scale when the compiler knows it. */
static const char *rs_plan_scales(const IrGraph *g, IrNodeId n, RsPlan *p) {
    double v[2 * IR_MAX_RANK];
    uint32_t nv;
    int64_t nsc = operand_count(g, p->scales), nsz = operand_count(g, p->sizes);
    if ((nsc > 0) == (nsz > 0)) return "without exactly one of scales and sizes";
    p->by_scales = nsc > 0;
    if (nsc > 0) {
        if (nsc != (int64_t)p->nax) return "with these scales";
        bool c = const_f64s(g, p->scales, v, &nv, 2 * IR_MAX_RANK);
        p->rt_scales = !c;
        for (uint32_t i = 0; i < p->nax; i++) {
            int64_t k = p->axes[i];
            p->sc_const[k] = c;
            if (c) p->sc[k] = v[i];
            else if (p->d[k] > 0 && p->od[k] > 0) p->sc[k] = (double)p->od[k] / (double)p->d[k]; /* trunc(scale * size) == out bounds it */
            else if (p->d[k] == 0 || p->od[k] == 0) return "with scales given at run time and an empty axis";
            else p->sc[k] = 0; /* unknown until the run */
        }
        return NULL;
    }
    if (nsz != (int64_t)p->nax) return "with these sizes";
    bool found;
    const char *pol = ir_node_attr_string(g, n, "keep_aspect_ratio_policy", &found);
    bool stretch = !pol || strcmp(pol, "stretch") == 0;
    bool c = const_f64s(g, p->sizes, v, &nv, 2 * IR_MAX_RANK);
    if (!c && !stretch) return "with sizes given at run time and keep_aspect_ratio_policy";
    p->rt_sizes = !c;
    for (uint32_t i = 0; i < p->nax; i++) {
        int64_t k = p->axes[i];
        double sz = c ? v[i] : (double)p->od[k]; /* sizes given at run time must be the output's dims */
        if (!stretch && p->d[k] < 0) return "with keep_aspect_ratio_policy and run-time shapes";
        p->sc_const[k] = p->d[k] >= 0 && (c || p->od[k] >= 0);
        p->sc[k] = p->sc_const[k] ? sz / (double)p->d[k] : 0;
    }
    if (!stretch) {
        bool larger = strcmp(pol, "not_smaller") == 0;
        double s = p->sc[p->axes[0]];
        for (uint32_t i = 1; i < p->nax; i++) s = larger ? fmax(s, p->sc[p->axes[i]]) : fmin(s, p->sc[p->axes[i]]);
        for (uint32_t i = 0; i < p->nax; i++) p->sc[p->axes[i]] = s;
    }
    return NULL;
}

/* NULL, or why the node cannot compile. */
static const char *rs_plan(const IrGraph *g, IrNodeId n, RsPlan *p) {
    memset(p, 0, sizeof *p);
    uint32_t no = ir_node_num_operands(g, n), ry;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    p->roi = no > 1 ? ir_node_operand(g, n, 1) : 0;
    p->scales = no > 2 ? ir_node_operand(g, n, 2) : 0;
    p->sizes = no > 3 ? ir_node_operand(g, n, 3) : 0;
    if (!rs_dims(g, x, &p->r, p->d, p->xe) || !rs_dims(g, y, &ry, p->od, p->ye)) return "with these shapes";
    if (!lo_is_float(ir_type_dtype(g, ir_value_type(g, x)))) return "on this dtype";
    if (ry != p->r || p->r == 0) return "with these shapes";
    p->stat = true;
    for (uint32_t i = 0; i < p->r; i++) p->stat &= p->d[i] >= 0 && p->od[i] >= 0;
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
    for (uint32_t i = 0; i < p->r; i++) p->sc[i] = 1, p->rlo[i] = 0, p->rhi[i] = 1, p->sc_const[i] = true;
    for (uint32_t i = 0; i < p->nax; i++) {
        if (p->axes[i] < 0 || p->axes[i] >= (int64_t)p->r) return "with these axes";
        p->active[p->axes[i]] = true;
    }
    for (uint32_t i = 0; i < p->r; i++)
        if (!p->active[i] && p->ye[i] != p->xe[i]) return "with these shapes";
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
    const char *why = rs_plan_scales(g, n, p);
    if (why) return why;
    for (uint32_t i = 0; i < p->r; i++) {
        if (!p->active[i]) continue;
        if (p->sc_const[i] && (!(p->sc[i] > 0) || p->d[i] == 0)) return "with these scales";
        bool wide = p->mode.antialias && !p->sc_const[i]; /* antialias: the taps grow as the scale shrinks */
        if (wide && !(p->sc[i] > 0)) return "with antialias and a scale known at run time only";
        int64_t start;
        int nt = ir_resize_tap_count(&p->mode, p->sc[i] > 0 ? p->sc[i] : 1, &start);
        if (nt < 1 || nt > 64) return "with these taps";
        /* a run-time scale may sit a rounding below out / size: room for the wider count */
        p->stride[i] = nt + (wide ? 2 : 0);
    }
    return NULL;
}

/* Scratch of the run-time taps: per resized axis, out * stride indices and weights and out
 * outside flags (8-byte aligned), then the call's parameters. */
static int64_t rs_scratch_of(const RsPlan *p, const int64_t *od) {
    int64_t bytes = 64;
    for (uint32_t i = 0; i < p->r; i++)
        if (p->active[i]) bytes += od[i] * (p->stride[i] * 16 + 1) + 8;
    return bytes;
}

int64_t llvm_ops_resize_scratch_bytes(const IrGraph *g, IrNodeId n, const int64_t *sym) {
    RsPlan p;
    if (ir_node_op(g, n) != IR_OP_RESIZE || rs_plan(g, n, &p) || !rs_runtime_taps(&p)) return 0;
    int64_t od[IR_MAX_RANK];
    for (uint32_t i = 0; i < p.r; i++) {
        od[i] = p.od[i];
        if (p.active[i] && od[i] < 0 && (!sym || !ir_expr_eval(g, p.ye[i], sym, &od[i]))) return 0;
    }
    return rs_scratch_of(&p, od);
}

bool llvm_ops_resize_scratch_form(const IrGraph *g, IrNodeId n, LowerScratchForm *f) {
    RsPlan p;
    memset(f, 0, sizeof *f);
    if (ir_node_op(g, n) != IR_OP_RESIZE || rs_plan(g, n, &p) || !rs_runtime_taps(&p)) return false;
    int64_t fixed = 64;
    for (uint32_t i = 0; i < p.r; i++) {
        if (!p.active[i]) continue;
        fixed += 8;
        if (p.od[i] >= 0) {
            fixed += p.od[i] * (p.stride[i] * 16 + 1);
        } else {
            if (f->n_terms + 1 >= LOWER_SCRATCH_TERMS) return false;
            f->term[f->n_terms++] = (LowerScratchTerm){.c = p.stride[i] * 16 + 1, .n_dims = 1, .dims = {p.ye[i]}};
        }
    }
    f->term[f->n_terms++] = (LowerScratchTerm){.c = fixed};
    return true;
}

/* v[k] of a float or integer tensor as f64. */
static LLVMValueRef load_f64(LlvmEmit *e, IrValueId v, int64_t k) {
    IrDType dt = lo_dtype(e, v);
    if (lo_is_float(dt)) return lo_to_f64(e, lo_load(e, dt, lo_buf(e, v), lo_i64(e, k)));
    return LLVMBuildSIToFP(e->b, lo_load_int(e, dt, lo_buf(e, v), lo_i64(e, k)), lo_f64_t(e), "");
}

static LLVMValueRef to_f64(LlvmEmit *e, LLVMValueRef i) { return LLVMBuildSIToFP(e->b, i, lo_f64_t(e), ""); }

/* The scale of every resized axis as a value (scale[k]), and the check that the scales or
 * sizes give the output's dims: trunc(scale * size) == out, sizes == out; an empty input
 * only with an empty output. */
static LLVMValueRef rs_scales(LlvmEmit *e, const RsPlan *pl, const LlvmDims *xs, const LlvmDims *ys, LLVMValueRef *scale) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef ok = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 1, 0);
    for (uint32_t i = 0; i < pl->nax; i++) {
        int64_t k = pl->axes[i];
        if (pl->by_scales) {
            LLVMValueRef s = pl->sc_const[k] ? LLVMConstReal(f64, pl->sc[k]) : load_f64(e, pl->scales, i);
            scale[k] = s;
            if (pl->sc_const[k] && pl->stat) continue;
            LLVMValueRef pos = LLVMBuildFCmp(b, LLVMRealOGT, s, LLVMConstReal(f64, 0), "");
            LLVMValueRef prod = LLVMBuildFMul(b, s, to_f64(e, xs->dim[k]), "");
            /* trunc, below 2^62 so the conversion is defined */
            LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, prod, LLVMConstReal(f64, 4.6e18), "");
            prod = LLVMBuildSelect(b, small, prod, LLVMConstReal(f64, 0), "");
            LLVMValueRef out = LLVMBuildFPToSI(b, prod, lo_i64_t(e), "");
            LLVMValueRef eq = LLVMBuildICmp(b, LLVMIntEQ, out, ys->dim[k], "");
            ok = LLVMBuildAnd(b, ok, LLVMBuildAnd(b, pos, LLVMBuildAnd(b, small, eq, ""), ""), "");
        } else {
            scale[k] = pl->sc_const[k] ? LLVMConstReal(f64, pl->sc[k])
                                       : LLVMBuildFDiv(b, to_f64(e, ys->dim[k]), to_f64(e, xs->dim[k]), "");
            if (pl->rt_sizes) {
                LLVMValueRef s = lo_load_int(e, lo_dtype(e, pl->sizes), lo_buf(e, pl->sizes), lo_i64(e, i));
                ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, s, ys->dim[k], ""), "");
            }
        }
    }
    if (!pl->stat) { /* the taps read x: an empty input only with an empty output */
        LLVMValueRef nx = llvm_dims_prod(e, xs, 0, xs->rank), ny = llvm_dims_prod(e, ys, 0, ys->rank), z = lo_i64(e, 0);
        ok = LLVMBuildAnd(b, ok, LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntNE, nx, z, ""), LLVMBuildICmp(b, LLVMIntEQ, ny, z, ""), ""), "");
    }
    return ok;
}

/* Taps of every resized axis into the node's scratch through irt_resize_taps. */
static void rs_runtime_tables(LlvmEmit *e, const RsPlan *pl, Rs *p, const LlvmDims *xs, const LlvmDims *ys, LLVMValueRef *scale) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e), i8 = lo_i8_t(e), i64 = lo_i64_t(e);
    LLVMValueRef scratch = lo_buf(e, ir_graph_num_values(e->g) + 1 + e->index);
    LLVMValueRef fp = LLVMBuildAlloca(e->ab, LLVMArrayType(f64, 4), ""), ip = LLVMBuildAlloca(e->ab, LLVMArrayType(i64, 8), "");
    LLVMValueRef at = lo_i64(e, 0);
    for (uint32_t i = 0; i < pl->r; i++) {
        if (!pl->active[i]) continue;
        LLVMValueRef cnt = LLVMBuildNSWMul(b, ys->dim[i], lo_i64(e, pl->stride[i]), "");
        LLVMValueRef b8 = LLVMBuildNSWMul(b, cnt, lo_i64(e, 8), "");
        p->idx_tab[i] = LLVMBuildGEP2(b, i8, scratch, &at, 1, "");
        LLVMValueRef off = LLVMBuildNSWAdd(b, at, b8, "");
        p->w_tab[i] = LLVMBuildGEP2(b, i8, scratch, &off, 1, "");
        off = LLVMBuildNSWAdd(b, off, b8, "");
        LLVMValueRef outside = LLVMBuildGEP2(b, i8, scratch, &off, 1, "");
        /* the flags rounded up to 8 bytes: the next axis' indices stay aligned */
        LLVMValueRef up = LLVMBuildAnd(b, LLVMBuildNSWAdd(b, ys->dim[i], lo_i64(e, 7), ""), lo_i64(e, -8), "");
        at = LLVMBuildNSWAdd(b, off, up, "");
        p->n[i] = pl->stride[i];
        if (pl->mode.ctm == IR_RESIZE_TF_CROP) {
            p->out_tab[i] = outside;
            p->any_outside = true;
        }
        LLVMValueRef iv[8] = {lo_i64(e, pl->mode.mode), lo_i64(e, pl->mode.ctm), lo_i64(e, pl->mode.nearest),
                              lo_i64(e, pl->mode.exclude), lo_i64(e, pl->mode.antialias), xs->dim[i], ys->dim[i],
                              lo_i64(e, pl->stride[i])};
        LLVMValueRef fv[4] = {LLVMConstReal(f64, pl->mode.A), scale[i] ? scale[i] : LLVMConstReal(f64, pl->sc[i]),
                              LLVMConstReal(f64, pl->rlo[i]), LLVMConstReal(f64, pl->rhi[i])};
        if (pl->rt_roi)
            for (uint32_t k = 0; k < pl->nax; k++)
                if (pl->axes[k] == (int64_t)i) {
                    fv[2] = load_f64(e, pl->roi, k);
                    fv[3] = load_f64(e, pl->roi, pl->nax + k);
                }
        for (int k = 0; k < 8; k++) {
            LLVMValueRef ix[2] = {lo_i64(e, 0), lo_i64(e, k)};
            if (k < 4) LLVMBuildStore(b, fv[k], LLVMBuildGEP2(b, LLVMArrayType(f64, 4), fp, ix, 2, ""));
            LLVMBuildStore(b, iv[k], LLVMBuildGEP2(b, LLVMArrayType(i64, 8), ip, ix, 2, ""));
        }
        LLVMValueRef args[6] = {ip, fp, p->idx_tab[i], p->w_tab[i], outside, lo_buf(e, lower_sym_slot(e->g) + 1)};
        lo_call_runtime(e, IRT_FN_RESIZE_TAPS, NULL, args, 6);
    }
}

/* Constant taps of every resized axis (static shapes, scales and roi). */
static IrStatus rs_const_tables(LlvmEmit *e, const RsPlan *pl, Rs *p) {
    IrStatus s = IR_OK;
    IrResizeTaps taps[IR_MAX_RANK];
    memset(taps, 0, sizeof taps);
    for (uint32_t i = 0; i < p->r && !s; i++) {
        if (!p->active[i]) continue;
        if (!ir_resize_axis_taps(&pl->cfg, pl->d[i], pl->od[i], pl->sc[i], pl->rlo[i], pl->rhi[i], 64, &taps[i])) {
            s = lo_unsupported(e, "with these taps");
            break;
        }
        p->n[i] = taps[i].n;
        int64_t cnt = pl->od[i] * taps[i].n;
        LLVMValueRef *iv = malloc((size_t)(cnt + 1) * sizeof *iv), *wv = malloc((size_t)(cnt + 1) * sizeof *wv);
        if (!iv || !wv) s = IR_ENOMEM;
        for (int64_t k = 0; !s && k < cnt; k++) {
            iv[k] = lo_i64(e, taps[i].idx[k]);
            wv[k] = LLVMConstReal(lo_f64_t(e), taps[i].w[k]);
        }
        if (!s) {
            p->idx_tab[i] = lo_const_array(e, lo_i64_t(e), iv, (uint64_t)cnt, "resize_taps");
            p->w_tab[i] = lo_const_array(e, lo_f64_t(e), wv, (uint64_t)cnt, "resize_taps");
        }
        if (!s && taps[i].any_outside) {
            for (int64_t k = 0; k < pl->od[i]; k++) iv[k] = LLVMConstInt(lo_i8_t(e), taps[i].outside[k], 0);
            p->out_tab[i] = lo_const_array(e, lo_i8_t(e), iv, (uint64_t)pl->od[i], "resize_taps");
            p->any_outside = true;
        }
        free(iv);
        free(wv);
    }
    for (uint32_t i = 0; i < p->r; i++) ir_resize_taps_free(&taps[i]);
    return s;
}

IrStatus llvm_ops_resize_gen(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    RsPlan pl;
    LlvmDims xs, ys;
    const char *why = rs_plan(g, n, &pl);
    if (why) return lo_unsupported(e, why);
    if (!llvm_dims_of(e, x, &xs) || !llvm_dims_of(e, y, &ys)) return lo_unsupported(e, "with these shapes");
    Rs p = {.dt = lo_dtype(e, x), .r = pl.r, .extrap = pl.cfg.extrap};
    llvm_dims_strides(e, &xs, p.istr);
    p.x = lo_buf(e, x);
    p.y = lo_buf(e, y);
    p.acc = lo_var(e, lo_f64_t(e), LLVMConstReal(lo_f64_t(e), 0));
    for (uint32_t i = 0; i < p.r; i++) p.active[i] = pl.active[i];
    if (pl.stat && ir_shape_numel(p.r, pl.d) == 0) return ir_shape_numel(p.r, pl.od) ? lo_unsupported(e, "of an empty input") : IR_OK;
    LLVMValueRef scale[IR_MAX_RANK] = {0};
    LLVMBasicBlockRef after = NULL;
    if (pl.rt_scales || pl.rt_sizes || !pl.stat) {
        LLVMValueRef ok = rs_scales(e, &pl, &xs, &ys, scale);
        char msg[256];
        if (pl.stat)
            snprintf(msg, sizeof msg, "Resize %%%s: the %s given at run time do not give the compiled output shape",
                     ir_value_name(g, y), pl.rt_scales ? "scales" : "sizes");
        else
            snprintf(msg, sizeof msg, "Resize %%%s: the %s do not give the output's dims, or the input is empty",
                     ir_value_name(g, y), pl.by_scales ? "scales" : "sizes");
        lo_fail_if(e, LLVMBuildNot(e->b, ok, ""), msg);
        if (!pl.stat) /* an empty output has nothing to compute (its scales may be 0 / 0) */
            ok = LLVMBuildAnd(e->b, ok, LLVMBuildICmp(e->b, LLVMIntNE, llvm_dims_prod(e, &ys, 0, ys.rank), lo_i64(e, 0), ""), "");
        after = lo_if_begin(e, ok);
    }
    IrStatus s = IR_OK;
    if (rs_runtime_taps(&pl)) rs_runtime_tables(e, &pl, &p, &xs, &ys, scale);
    else s = rs_const_tables(e, &pl, &p);
    if (s) return s;
    LLVMValueRef st[1][IR_MAX_RANK];
    llvm_dims_strides(e, &ys, st[0]);
    llvm_nest(e, &ys, 1, st, NULL, rs_body, &p);
    if (after) lo_if_end(e, after);
    return IR_OK;
}
