/* Direct window kernels of the LLVM backend for what the im2col/BLAS Conv and the 2-D pools of
 * cpu/codegen.c do not cover: Conv over 1, 2 or 3 spatial dims with auto_pad SAME_*, the other
 * ranks and pools (MaxPool with its Indices output and on integers, AveragePool with ceil_mode and
 * count_include_pad, 1-D and 3-D), and ConvTranspose (scatter form, as the interpreter), for
 * static and run-time shapes alike (llvm/dims.h: sizes are LLVM values, constants when static).
 * Geometry follows the interpreter: spatial dims padded to three, output sizes taken from the
 * inferred result type, pads from `pads` or derived for SAME_UPPER/SAME_LOWER.
 */
#include "backend/cpu/cpu.h"

/* Sizes are values (constant when static, so LLVM folds them); strides and dilations are
 * attributes. A kernel size is a value too: a weight's dims may be known at run time only. */
typedef struct Geo {
    uint32_t r; /* spatial rank 1..3 */
    int64_t G;
    LLVMValueRef N, C, M;
    LLVMValueRef in[3], k[3], out[3], pb[3], pe[3];
    int64_t s[3], d[3];
    bool same; /* auto_pad SAME_*: pads derived from the sizes */
} Geo;

static LLVMValueRef add(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(e->b, a, b, ""); }
static LLVMValueRef sub(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWSub(e->b, a, b, ""); }
static LLVMValueRef mul(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWMul(e->b, a, b, ""); }
static LLVMValueRef muli(LlvmEmit *e, LLVMValueRef a, int64_t b) { return mul(e, a, lo_i64(e, b)); }
static LLVMValueRef max0(LlvmEmit *e, LLVMValueRef a) {
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, lo_i64(e, 0), ""), lo_i64(e, 0), a, "");
}


static bool ints_attr(const IrGraph *g, IrNodeId n, const char *name, int64_t *v, uint32_t *cnt, uint32_t cap) {
    IrAttrValue av;
    if (!ir_node_attr(g, n, name, &av) || av.kind != IR_ATTR_INTS || av.count > cap) return false;
    for (uint32_t i = 0; i < av.count; i++) v[i] = av.ints[i];
    *cnt = av.count;
    return true;
}

/* Pads the spatial arrays to three dims (leading ones). */
static void geo_pad3(LlvmEmit *e, Geo *g) {
    uint32_t sh = 3 - g->r;
    for (int i = 2; i >= (int)sh; i--) {
        uint32_t j = (uint32_t)i - sh;
        g->in[i] = g->in[j], g->k[i] = g->k[j], g->out[i] = g->out[j], g->s[i] = g->s[j];
        g->d[i] = g->d[j], g->pb[i] = g->pb[j], g->pe[i] = g->pe[j];
    }
    for (uint32_t i = 0; i < sh; i++) {
        g->in[i] = g->k[i] = g->out[i] = lo_i64(e, 1);
        g->s[i] = g->d[i] = 1;
        g->pb[i] = g->pe[i] = lo_i64(e, 0);
    }
}

/* Strides, dilations, pads (explicit or SAME_*) of a forward window op; k, in, out set. */
static const char *geo_forward(LlvmEmit *e, Geo *g) {
    const IrGraph *gr = e->g;
    IrNodeId n = e->node;
    int64_t v[8];
    uint32_t c;
    for (uint32_t i = 0; i < g->r; i++) g->s[i] = g->d[i] = 1, g->pb[i] = g->pe[i] = lo_i64(e, 0);
    if (ints_attr(gr, n, "strides", v, &c, 8)) {
        if (c != g->r) return "with these strides";
        for (uint32_t i = 0; i < g->r; i++) g->s[i] = v[i];
    }
    if (ints_attr(gr, n, "dilations", v, &c, 8)) {
        if (c != g->r) return "with these dilations";
        for (uint32_t i = 0; i < g->r; i++) g->d[i] = v[i];
    }
    bool found;
    const char *ap = ir_node_attr_string(gr, n, "auto_pad", &found);
    if (!ap || !*ap) ap = "NOTSET";
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    g->same = same;
    if (strcmp(ap, "NOTSET") == 0) {
        if (ints_attr(gr, n, "pads", v, &c, 8)) {
            if (c != 2 * g->r) return "with these pads";
            for (uint32_t i = 0; i < g->r; i++) g->pb[i] = lo_i64(e, v[i]), g->pe[i] = lo_i64(e, v[g->r + i]);
        }
    } else if (!same && strcmp(ap, "VALID") != 0) {
        return "with this auto_pad";
    }
    for (uint32_t i = 0; i < g->r; i++) {
        int64_t kc = LLVMIsAConstantInt(g->k[i]) ? LLVMConstIntGetSExtValue(g->k[i]) : 1;
        if (g->s[i] < 1 || g->d[i] < 1 || kc < 1) return "with these strides or dilations";
        if (same) { /* total = max(0, (out - 1) * s + (k - 1) * d + 1 - in) */
            LLVMValueRef ek = add(e, muli(e, sub(e, g->k[i], lo_i64(e, 1)), g->d[i]), lo_i64(e, 1));
            LLVMValueRef total = max0(e, sub(e, add(e, muli(e, sub(e, g->out[i], lo_i64(e, 1)), g->s[i]), ek), g->in[i]));
            LLVMValueRef half = LLVMBuildSDiv(e->b, total, lo_i64(e, 2), "");
            g->pb[i] = strcmp(ap, "SAME_UPPER") == 0 ? half : sub(e, total, half);
            g->pe[i] = sub(e, total, g->pb[i]);
        }
    }
    return NULL;
}

/* Reads N, C, spatial in/out from x and y (rank 3..5). */
static const char *geo_shapes(LlvmEmit *e, IrValueId x, IrValueId y, Geo *g) {
    LlvmDims sx, sy;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy)) return "with an unknown shape";
    if (sx.rank < 3 || sx.rank > 5 || sy.rank != sx.rank) return "other than 1-D, 2-D or 3-D";
    g->r = sx.rank - 2;
    g->N = sx.dim[0];
    g->C = sx.dim[1];
    g->M = sy.dim[1];
    for (uint32_t i = 0; i < g->r; i++) g->in[i] = sx.dim[2 + i], g->out[i] = sy.dim[2 + i];
    return NULL;
}

/* Kernel sizes from the weight's spatial dims (values: a weight given at run time may have
 * symbolic dims); its leading dims into w0, w1. */
static const char *geo_weight(LlvmEmit *e, IrValueId wv, Geo *g, LLVMValueRef *w0, LLVMValueRef *w1) {
    LlvmDims sw;
    if (!llvm_dims_of(e, wv, &sw)) return "with an unknown weight shape";
    if (sw.rank != g->r + 2) return "with this weight rank";
    for (uint32_t i = 0; i < g->r; i++) g->k[i] = sw.dim[2 + i];
    *w0 = sw.dim[0], *w1 = sw.dim[1];
    return NULL;
}

/* With run-time shapes, a binding whose window does not fit its explicitly padded input fails
 * the run, as the interpreter fails it (SAME_* pads always fit). */
static void geo_check(LlvmEmit *e, const Geo *g, const char *op) {
    LLVMValueRef bad = NULL;
    for (uint32_t i = 0; i < 3 && !g->same; i++) {
        LLVMValueRef ek = add(e, muli(e, sub(e, g->k[i], lo_i64(e, 1)), g->d[i]), lo_i64(e, 1));
        LLVMValueRef span = sub(e, add(e, g->in[i], add(e, g->pb[i], g->pe[i])), ek);
        if (LLVMIsAConstantInt(span)) continue; /* static: shape-infer has checked it */
        LLVMValueRef t = LLVMBuildICmp(e->b, LLVMIntSLT, span, lo_i64(e, 0), "");
        bad = bad ? LLVMBuildOr(e->b, bad, t, "") : t;
    }
    if (!bad) return;
    char msg[200];
    snprintf(msg, sizeof msg, "%s %%%s: kernel larger than the padded input for this binding", op,
             ir_value_name(e->g, ir_node_result(e->g, e->node, 0)));
    lo_fail_if(e, bad, msg);
}

/* The loop nest over dims (constant ones as constants): offs[0] the row-major offset. */
static void geo_nest(LlvmEmit *e, uint32_t rank, const LLVMValueRef *dims, LlvmNestBody body, void *user) {
    LlvmDims s = {.rank = rank};
    for (uint32_t k = 0; k < rank; k++) {
        s.dim[k] = dims[k];
        s.cd[k] = LLVMIsAConstantInt(dims[k]) ? LLVMConstIntGetSExtValue(dims[k]) : -1;
        s.ex[k] = 0;
    }
    LLVMValueRef st[1][IR_MAX_RANK];
    llvm_dims_strides(e, &s, st[0]);
    llvm_nest(e, &s, 1, st, NULL, body, user);
}

/* ---- the window walk ------------------------------------------------------------------------ */

typedef struct Win {
    Geo g;
    IrDType dt;
    LLVMValueRef x, w, bias, y, idx_out;
    LLVMValueRef acc, cnt, arg;
    int kind; /* 0 conv, 1 max pool, 2 average pool */
    bool include_pad, col_major;
} Win;

/* Loops over k0, k1, k2 for output point o[] (padded to 3); per tap calls tap(valid, xoff_in_plane, koff). */
typedef void (*TapFn)(LlvmEmit *e, Win *w, LLVMValueRef valid, LLVMValueRef xoff, LLVMValueRef koff, LLVMValueRef *extra);

static void window(LlvmEmit *e, Win *w, LLVMValueRef *o, TapFn tap, LLVMValueRef *extra) {
    LLVMBuilderRef b = e->b;
    const Geo *g = &w->g;
    LoLoop l[3];
    LLVMValueRef valid = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 1, 0), xoff = lo_i64(e, 0), koff = lo_i64(e, 0);
    for (int i = 0; i < 3; i++) {
        llvm_loop_n(e, &l[i], g->k[i]);
        LLVMValueRef c = LLVMBuildAdd(b, LLVMBuildSub(b, LLVMBuildMul(b, o[i], lo_i64(e, g->s[i]), ""), g->pb[i], ""),
                                      LLVMBuildMul(b, l[i].iv, lo_i64(e, g->d[i]), ""), "");
        LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, c, g->in[i], "");
        valid = LLVMBuildAnd(b, valid, ok, "");
        c = LLVMBuildSelect(b, ok, c, lo_i64(e, 0), "");
        xoff = LLVMBuildAdd(b, LLVMBuildMul(b, xoff, g->in[i], ""), c, "");
        koff = LLVMBuildAdd(b, LLVMBuildMul(b, koff, g->k[i], ""), l[i].iv, "");
    }
    tap(e, w, valid, xoff, koff, extra);
    for (int i = 3; i-- > 0;) lo_loop_end(e, &l[i]);
}

/* conv tap: extra[0] = x plane base (n, channel), extra[1] = weight base (m, c) */
static void conv_tap(LlvmEmit *e, Win *w, LLVMValueRef valid, LLVMValueRef xoff, LLVMValueRef koff, LLVMValueRef *extra) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef ct = lo_comp_t(e, w->dt);
    LLVMValueRef xv = lo_load(e, w->dt, w->x, LLVMBuildAdd(b, extra[0], xoff, ""));
    LLVMValueRef wv = lo_load(e, w->dt, w->w, LLVMBuildAdd(b, extra[1], koff, ""));
    LLVMValueRef a = LLVMBuildLoad2(b, ct, w->acc, "");
    LLVMValueRef na = LLVMBuildFAdd(b, a, LLVMBuildFMul(b, xv, wv, ""), "");
    LLVMBuildStore(b, LLVMBuildSelect(b, valid, na, a, ""), w->acc);
}

/* v > a in dt's order (MaxPool on integers: signed or unsigned). */
static LLVMValueRef pool_greater(LlvmEmit *e, IrDType dt, LLVMValueRef v, LLVMValueRef a) {
    if (lo_is_float(dt)) return pool_max_takes(e->b, v, a);
    bool u = dt == IR_DTYPE_U8 || dt == IR_DTYPE_U16 || dt == IR_DTYPE_U32 || dt == IR_DTYPE_U64;
    return LLVMBuildICmp(e->b, u ? LLVMIntUGT : LLVMIntSGT, v, a, "");
}

static void pool_tap(LlvmEmit *e, Win *w, LLVMValueRef valid, LLVMValueRef xoff, LLVMValueRef koff, LLVMValueRef *extra) {
    (void)koff;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef ct = lo_comp_t(e, w->dt);
    LLVMValueRef v = lo_load(e, w->dt, w->x, LLVMBuildAdd(b, extra[0], xoff, ""));
    LLVMValueRef a = LLVMBuildLoad2(b, ct, w->acc, "");
    LLVMValueRef k = LLVMBuildLoad2(b, lo_i64_t(e), w->cnt, "");
    if (w->kind == 1) {
        /* as the interpreter: the first valid tap, then strictly greater */
        LLVMValueRef take = LLVMBuildAnd(b, valid,
                                         LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntEQ, k, lo_i64(e, 0), ""),
                                                     pool_greater(e, w->dt, v, a), ""), "");
        LLVMBuildStore(b, LLVMBuildSelect(b, take, v, a, ""), w->acc);
        LLVMValueRef ar = LLVMBuildLoad2(b, lo_i64_t(e), w->arg, "");
        LLVMBuildStore(b, LLVMBuildSelect(b, take, xoff, ar, ""), w->arg);
    } else {
        LLVMBuildStore(b, LLVMBuildSelect(b, valid, LLVMBuildFAdd(b, a, v, ""), a, ""), w->acc);
    }
    LLVMBuildStore(b, LLVMBuildSelect(b, valid, LLVMBuildAdd(b, k, lo_i64(e, 1), ""), k, ""), w->cnt);
}

/* AveragePool with count_include_pad: the window positions inside the explicitly padded input. */
static LLVMValueRef padded_count(LlvmEmit *e, const Geo *g, const LLVMValueRef *op) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef prod = lo_i64(e, 1);
    for (int i = 0; i < 3; i++) {
        LLVMValueRef lo = LLVMBuildSub(b, LLVMBuildMul(b, op[i], lo_i64(e, g->s[i]), ""), g->pb[i], "");
        LLVMValueRef lim = LLVMBuildSub(b, LLVMBuildAdd(b, g->in[i], g->pe[i], ""), lo_i64(e, 1), "");
        /* count q = lo + t*d <= lim for t in [0, k): min(k, floor((lim - lo)/d) + 1), >= 0 */
        LLVMValueRef span = LLVMBuildSub(b, lim, lo, "");
        LLVMValueRef c = LLVMBuildAdd(b, LLVMBuildSDiv(b, span, lo_i64(e, g->d[i]), ""), lo_i64(e, 1), "");
        c = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, span, lo_i64(e, 0), ""), lo_i64(e, 0), c, "");
        c = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, c, g->k[i], ""), g->k[i], c, "");
        prod = LLVMBuildMul(b, prod, c, "");
    }
    return prod;
}

/* nest over (N, M or C, o0, o1, o2); o[0] output offset */
static void win_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Win *w = user;
    LLVMBuilderRef b = e->b;
    const Geo *g = &w->g;
    LLVMTypeRef ct = lo_comp_t(e, w->dt);
    LLVMValueRef isz = mul(e, mul(e, g->in[0], g->in[1]), g->in[2]), ksz = mul(e, mul(e, g->k[0], g->k[1]), g->k[2]);
    LLVMValueRef n = idx[0], ch = idx[1], op[3] = {idx[2], idx[3], idx[4]};
    LLVMBuildStore(b, LLVMConstNull(lo_i64_t(e)), w->cnt);
    LLVMBuildStore(b, LLVMConstNull(lo_i64_t(e)), w->arg);
    if (w->kind == 0) {
        LLVMValueRef cg = LLVMBuildSDiv(b, g->C, lo_i64(e, g->G), ""), mg = LLVMBuildSDiv(b, g->M, lo_i64(e, g->G), "");
        LLVMValueRef init = w->bias ? lo_load(e, w->dt, w->bias, ch) : LLVMConstNull(ct);
        LLVMBuildStore(b, init, w->acc);
        LLVMValueRef grp = LLVMBuildSDiv(b, ch, mg, "");
        LoLoop lc;
        llvm_loop_n(e, &lc, cg);
        LLVMValueRef xc = LLVMBuildAdd(b, LLVMBuildMul(b, grp, cg, ""), lc.iv, "");
        LLVMValueRef extra[2] = {LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, n, g->C, ""), xc, ""), isz, ""),
                                 LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, ch, cg, ""), lc.iv, ""), ksz, "")};
        window(e, w, op, conv_tap, extra);
        lo_loop_end(e, &lc);
        lo_store(e, w->dt, w->y, o[0], LLVMBuildLoad2(b, ct, w->acc, ""));
        return;
    }
    LLVMBuildStore(b, LLVMConstNull(ct), w->acc);
    LLVMValueRef base = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, n, g->C, ""), ch, ""), isz, "");
    LLVMValueRef extra[1] = {base};
    window(e, w, op, pool_tap, extra);
    LLVMValueRef r = LLVMBuildLoad2(b, ct, w->acc, "");
    if (w->kind == 1) {
        /* no valid tap (cannot happen with sane pads): -inf as the interpreter */
        LLVMValueRef none = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildLoad2(b, lo_i64_t(e), w->cnt, ""), lo_i64(e, 0), "");
        r = LLVMBuildSelect(b, none, lo_is_float(w->dt) ? LLVMConstReal(ct, -INFINITY) : LLVMConstNull(ct), r, "");
        if (w->idx_out) {
            LLVMValueRef a = LLVMBuildLoad2(b, lo_i64_t(e), w->arg, "");
            if (w->col_major) {
                LLVMValueRef j0 = LLVMBuildSDiv(b, a, LLVMBuildMul(b, g->in[1], g->in[2], ""), "");
                LLVMValueRef j1 = LLVMBuildSRem(b, LLVMBuildSDiv(b, a, g->in[2], ""), g->in[1], "");
                LLVMValueRef j2 = LLVMBuildSRem(b, a, g->in[2], "");
                a = LLVMBuildAdd(b, j0, LLVMBuildMul(b, g->in[0], LLVMBuildAdd(b, j1, LLVMBuildMul(b, g->in[1], j2, ""), ""), ""), "");
            }
            lo_store(e, IR_DTYPE_I64, w->idx_out, o[0], LLVMBuildAdd(b, base, a, ""));
        }
    } else {
        LLVMValueRef den = w->include_pad ? padded_count(e, g, op) : LLVMBuildLoad2(b, lo_i64_t(e), w->cnt, "");
        r = LLVMBuildFDiv(b, r, LLVMBuildSIToFP(b, den, ct, ""), "");
    }
    lo_store(e, w->dt, w->y, o[0], r);
}

static IrStatus run_window(LlvmEmit *e, Win *w) {
    const Geo *g = &w->g;
    LLVMTypeRef ct = lo_comp_t(e, w->dt);
    w->acc = lo_var(e, ct, LLVMConstNull(ct));
    w->cnt = lo_var(e, lo_i64_t(e), lo_i64(e, 0));
    w->arg = lo_var(e, lo_i64_t(e), lo_i64(e, 0));
    geo_check(e, g, ir_op_name(ir_node_op(e->g, e->node)));
    LLVMValueRef dims[5] = {g->N, w->kind == 0 ? g->M : g->C, g->out[0], g->out[1], g->out[2]};
    geo_nest(e, 5, dims, win_body, w);
    return IR_OK;
}

static int64_t group_attr(const IrGraph *g, IrNodeId n) {
    bool found;
    int64_t G = ir_node_attr_int(g, n, "group", &found);
    return found ? G : 1;
}

static IrStatus gen_conv_nd(LlvmEmit *e) {
    const IrGraph *gr = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(gr, n, 0), wv = ir_node_operand(gr, n, 1), y = ir_node_result(gr, n, 0);
    IrValueId bias = ir_node_num_operands(gr, n) > 2 ? ir_node_operand(gr, n, 2) : 0;
    Win w = {.dt = lo_dtype(e, x), .kind = 0};
    if (!lo_is_float(w.dt)) return lo_unsupported_dtype(e, w.dt);
    if (lo_dtype(e, wv) != w.dt || (bias && lo_dtype(e, bias) != w.dt)) return lo_unsupported(e, "on mixed dtypes");
    const char *why = geo_shapes(e, x, y, &w.g);
    LLVMValueRef w0, w1;
    if (!why) why = geo_weight(e, wv, &w.g, &w0, &w1);
    if (why) return lo_unsupported(e, why);
    w.g.G = group_attr(gr, n);
    /* channels known at compile time are checked here; symbolic ones are tied by shape-infer's
     * facts (C == w1 * group, M == w0), which the runtime checks */
    int64_t C, M, c0, c1;
    bool cc = lo_const_int(w.g.C, &C), cm = lo_const_int(w.g.M, &M);
    if (w.g.G < 1 || (cc && C % w.g.G) || (cm && M % w.g.G) || (cm && lo_const_int(w0, &c0) && c0 != M) ||
        (cc && lo_const_int(w1, &c1) && c1 != C / w.g.G))
        return lo_unsupported(e, "with these groups");
    if ((why = geo_forward(e, &w.g))) return lo_unsupported(e, why);
    geo_pad3(e, &w.g);
    w.x = lo_buf(e, x);
    w.w = lo_buf(e, wv);
    w.bias = bias ? lo_buf(e, bias) : NULL;
    w.y = lo_buf(e, y);
    return run_window(e, &w);
}

static IrStatus gen_pool_nd(LlvmEmit *e) {
    const IrGraph *gr = e->g;
    IrNodeId n = e->node;
    IrOp op = ir_node_op(gr, n);
    IrValueId x = ir_node_operand(gr, n, 0), y = ir_node_result(gr, n, 0);
    Win w = {.dt = lo_dtype(e, x), .kind = op == IR_OP_MAX_POOL ? 1 : 2};
    bool int_max = w.kind == 1 && lo_store_t(e, w.dt) && w.dt != IR_DTYPE_BOOL; /* MaxPool: integers too */
    if (!lo_is_float(w.dt) && !int_max) return lo_unsupported_dtype(e, w.dt);
    const char *why = geo_shapes(e, x, y, &w.g);
    if (why) return lo_unsupported(e, why);
    int64_t v[8];
    uint32_t c;
    if (!ints_attr(gr, n, "kernel_shape", v, &c, 8) || c != w.g.r) return lo_unsupported(e, "without a matching kernel_shape");
    for (uint32_t i = 0; i < w.g.r; i++) w.g.k[i] = lo_i64(e, v[i]);
    if ((why = geo_forward(e, &w.g))) return lo_unsupported(e, why);
    geo_pad3(e, &w.g);
    bool found;
    w.include_pad = w.kind == 2 && ir_node_attr_int(gr, n, "count_include_pad", &found) != 0;
    IrValueId ind = ir_node_num_results(gr, n) > 1 ? ir_node_result(gr, n, 1) : 0;
    if (ind) {
        w.idx_out = lo_buf(e, ind);
        w.col_major = ir_node_attr_int(gr, n, "storage_order", &found) != 0;
    }
    w.x = lo_buf(e, x);
    w.y = lo_buf(e, y);
    return run_window(e, &w);
}

/* ---- ConvTranspose ------------------------------------------------------------------------- */

typedef struct Ct {
    Geo g;
    IrDType dt;
    LLVMValueRef x, w, y;
} Ct;

/* nest over (N, C, i0, i1, i2): scatter x * w into y */
static void ct_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Ct *c = user;
    LLVMBuilderRef b = e->b;
    const Geo *g = &c->g;
    LLVMValueRef cg = LLVMBuildSDiv(b, g->C, lo_i64(e, g->G), ""), mg = LLVMBuildSDiv(b, g->M, lo_i64(e, g->G), "");
    LLVMValueRef osz = mul(e, mul(e, g->out[0], g->out[1]), g->out[2]), ksz = mul(e, mul(e, g->k[0], g->k[1]), g->k[2]);
    LLVMValueRef xv = lo_load(e, c->dt, c->x, o[0]);
    LLVMValueRef grp = LLVMBuildSDiv(b, idx[1], cg, "");
    LoLoop lm, l[3];
    llvm_loop_n(e, &lm, mg);
    LLVMValueRef m = LLVMBuildAdd(b, LLVMBuildMul(b, grp, mg, ""), lm.iv, "");
    LLVMValueRef ybase = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, idx[0], g->M, ""), m, ""), osz, "");
    LLVMValueRef wbase = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, idx[1], mg, ""), lm.iv, ""), ksz, "");
    LLVMValueRef valid = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 1, 0), yoff = lo_i64(e, 0), koff = lo_i64(e, 0);
    for (int i = 0; i < 3; i++) {
        llvm_loop_n(e, &l[i], g->k[i]);
        LLVMValueRef q = LLVMBuildSub(b, LLVMBuildAdd(b, LLVMBuildMul(b, idx[2 + i], lo_i64(e, g->s[i]), ""),
                                                      LLVMBuildMul(b, l[i].iv, lo_i64(e, g->d[i]), ""), ""),
                                      g->pb[i], "");
        LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, q, g->out[i], "");
        valid = LLVMBuildAnd(b, valid, ok, "");
        q = LLVMBuildSelect(b, ok, q, lo_i64(e, 0), "");
        yoff = LLVMBuildAdd(b, LLVMBuildMul(b, yoff, g->out[i], ""), q, "");
        koff = LLVMBuildAdd(b, LLVMBuildMul(b, koff, g->k[i], ""), l[i].iv, "");
    }
    LLVMBasicBlockRef after = lo_if_begin(e, valid);
    LLVMValueRef yo = LLVMBuildAdd(b, ybase, yoff, "");
    LLVMValueRef wv = lo_load(e, c->dt, c->w, LLVMBuildAdd(b, wbase, koff, ""));
    LLVMValueRef cur = lo_load(e, c->dt, c->y, yo);
    lo_store(e, c->dt, c->y, yo, LLVMBuildFAdd(b, cur, LLVMBuildFMul(b, xv, wv, ""), ""));
    lo_if_end(e, after);
    for (int i = 3; i-- > 0;) lo_loop_end(e, &l[i]);
    lo_loop_end(e, &lm);
}

typedef struct CtBias {
    IrDType dt;
    LLVMValueRef y, bias;
} CtBias;

static void ct_bias_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    CtBias *c = user;
    LLVMValueRef v = lo_load(e, c->dt, c->y, o[0]);
    lo_store(e, c->dt, c->y, o[0], LLVMBuildFAdd(e->b, v, lo_load(e, c->dt, c->bias, idx[1]), ""));
}

/* Begin pads of ConvTranspose: `pads`, or derived from output_shape or SAME_* as the
 * interpreter derives them (total = the full output minus the wanted one). */
static const char *ct_pads(LlvmEmit *e, Ct *c, const int64_t *opad) {
    const IrGraph *gr = e->g;
    IrNodeId n = e->node;
    uint32_t r = c->g.r, cnt, n_os = 0;
    int64_t v[8], os[3] = {0, 0, 0};
    bool found;
    if (ints_attr(gr, n, "output_shape", v, &n_os, 8)) {
        if (n_os != r && n_os != r + 2) return "with this output_shape";
        for (uint32_t i = 0; i < r; i++) os[i] = v[n_os - r + i];
    }
    const char *ap = ir_node_attr_string(gr, n, "auto_pad", &found);
    if (!ap || !*ap) ap = "NOTSET";
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    if (strcmp(ap, "NOTSET") == 0 && ints_attr(gr, n, "pads", v, &cnt, 8)) {
        if (cnt != 2 * r) return "with these pads";
        for (uint32_t i = 0; i < r; i++) c->g.pb[i] = lo_i64(e, v[i]), c->g.pe[i] = lo_i64(e, v[r + i]);
    }
    for (uint32_t i = 0; i < r && (n_os > 0 || same); i++) {
        /* full = s*(in-1) + output_padding + (k-1)*d + 1 */
        LLVMValueRef full = add(e, muli(e, sub(e, c->g.in[i], lo_i64(e, 1)), c->g.s[i]),
                                add(e, muli(e, sub(e, c->g.k[i], lo_i64(e, 1)), c->g.d[i]), lo_i64(e, opad[i] + 1)));
        LLVMValueRef want = n_os > 0 ? lo_i64(e, os[i]) : muli(e, c->g.in[i], c->g.s[i]);
        LLVMValueRef total = max0(e, sub(e, full, want)), half = LLVMBuildSDiv(e->b, total, lo_i64(e, 2), "");
        c->g.pb[i] = strcmp(ap, "SAME_UPPER") == 0 ? half : sub(e, total, half);
    }
    return NULL;
}

static IrStatus gen_conv_transpose(LlvmEmit *e) {
    const IrGraph *gr = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(gr, n, 0), wv = ir_node_operand(gr, n, 1), y = ir_node_result(gr, n, 0);
    IrValueId bias = ir_node_num_operands(gr, n) > 2 ? ir_node_operand(gr, n, 2) : 0;
    Ct c = {.dt = lo_dtype(e, x)};
    if (!lo_is_float(c.dt)) return lo_unsupported_dtype(e, c.dt);
    if (lo_dtype(e, wv) != c.dt || (bias && lo_dtype(e, bias) != c.dt)) return lo_unsupported(e, "on mixed dtypes");
    const char *why = geo_shapes(e, x, y, &c.g);
    LLVMValueRef w0, w1;
    if (!why) why = geo_weight(e, wv, &c.g, &w0, &w1);
    if (why) return lo_unsupported(e, why);
    c.g.G = group_attr(gr, n);
    /* W is [C, M / group, k...]: checked here when known, else tied by shape-infer's facts */
    int64_t C, M, c0, c1;
    bool cc = lo_const_int(c.g.C, &C), cm = lo_const_int(c.g.M, &M);
    if (c.g.G < 1 || (cc && C % c.g.G) || (cc && lo_const_int(w0, &c0) && c0 != C) ||
        (cm && lo_const_int(w1, &c1) && c1 * c.g.G != M))
        return lo_unsupported(e, "with these groups");
    uint32_t r = c.g.r, cnt;
    int64_t v[8], opad[3] = {0, 0, 0};
    for (uint32_t i = 0; i < r; i++) c.g.s[i] = c.g.d[i] = 1, c.g.pb[i] = c.g.pe[i] = lo_i64(e, 0);
    if (ints_attr(gr, n, "strides", v, &cnt, 8)) for (uint32_t i = 0; i < r && i < cnt; i++) c.g.s[i] = v[i];
    if (ints_attr(gr, n, "dilations", v, &cnt, 8)) for (uint32_t i = 0; i < r && i < cnt; i++) c.g.d[i] = v[i];
    if (ints_attr(gr, n, "output_padding", v, &cnt, 8)) for (uint32_t i = 0; i < r && i < cnt; i++) opad[i] = v[i];
    if ((why = ct_pads(e, &c, opad))) return lo_unsupported(e, why);
    geo_pad3(e, &c.g);
    c.x = lo_buf(e, x);
    c.w = lo_buf(e, wv);
    c.y = lo_buf(e, y);
    LlvmDims sy;
    if (!llvm_dims_of(e, y, &sy)) return lo_unsupported(e, "with an unknown shape");
    LLVMValueRef nb = muli(e, max0(e, llvm_dims_prod(e, &sy, 0, sy.rank)), (int64_t)ir_dtype_size(c.dt));
    int64_t nbc;
    if (!lo_const_int(nb, &nbc) || nbc > 0) LLVMBuildMemSet(e->b, c.y, LLVMConstInt(lo_i8_t(e), 0, 0), nb, 1);
    LLVMValueRef dims[5] = {c.g.N, c.g.C, c.g.in[0], c.g.in[1], c.g.in[2]};
    geo_nest(e, 5, dims, ct_body, &c);
    if (bias) {
        CtBias cb = {c.dt, c.y, lo_buf(e, bias)};
        LLVMValueRef od[3] = {c.g.N, c.g.M, mul(e, mul(e, c.g.out[0], c.g.out[1]), c.g.out[2])};
        geo_nest(e, 3, od, ct_bias_body, &cb);
    }
    return IR_OK;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

bool llvm_ops_conv_claims(const IrGraph *g, IrNodeId n) {
    IrOp op = ir_node_op(g, n);
    if (op == IR_OP_CONV_TRANSPOSE) return true;
    if (op != IR_OP_CONV && op != IR_OP_MAX_POOL && op != IR_OP_AVERAGE_POOL) return false;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    if (!lower_value_shape(g, ir_node_operand(g, n, 0), &r, d)) return true; /* shapes known at run time only */
    if (r != 4) return true;
    bool found;
    const char *ap = ir_node_attr_string(g, n, "auto_pad", &found);
    if (ap && (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0)) return true;
    if (ir_type_dtype(g, ir_value_type(g, ir_node_operand(g, n, 0))) != IR_DTYPE_F32) return true;
    if (op == IR_OP_CONV) return false;
    if (ir_node_num_results(g, n) > 1 && ir_node_result(g, n, 1)) return true;
    return ir_node_attr_int(g, n, "ceil_mode", &found) != 0;
}

IrStatus llvm_ops_conv_gen(LlvmEmit *e) { return gen_conv_nd(e); }
IrStatus llvm_ops_conv_transpose_gen(LlvmEmit *e) { return gen_conv_transpose(e); }
IrStatus llvm_ops_pool_nd_gen(LlvmEmit *e) { return gen_pool_nd(e); }
