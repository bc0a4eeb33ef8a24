/* Normalizations by statistics of the LLVM CPU backend, one emitter for static and run-time
 * shapes (llvm/dims.h): BatchNormalization (f32 inference per element; training mode, the
 * statistics outputs and other dtypes per channel), InstanceNormalization,
 * MeanVarianceNormalization and LRN. Statistics accumulate in f64 like the interpreter; the first
 * loop nest of each kernel writes disjoint outputs, so it may be shared out in parts.
 */
#include "backend/cpu/cpu.h"

static void loop_end(LlvmEmit *e, LlvmLoop *l) { llvm_loop_end(e->b, e->fn, l); }

/* A shape of up to three dims given as values (cd: the constant or -1). */
static void dims_n(LlvmDims *s, uint32_t rank, const LLVMValueRef *dim, const int64_t *cd) {
    *s = (LlvmDims){.rank = rank};
    for (uint32_t k = 0; k < rank; k++) s->dim[k] = dim[k], s->cd[k] = cd[k];
}

/* Whether the per-channel operands (ops first..last) are C values of a float dtype; a count
 * known at run time only is checked by the run (its message names the op). */
static bool channel_params(LlvmEmit *e, const LlvmDims *sx, uint32_t first, uint32_t last, bool any_float) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    for (uint32_t i = first; i <= last; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        LlvmDims sv;
        if (!v || !llvm_dims_of(e, v, &sv) || sv.rank != 1) return false;
        if (any_float ? !lo_is_float(lo_dtype(e, v)) : lo_dtype(e, v) != lo_dtype(e, ir_node_operand(g, n, 0))) return false;
        if (sv.cd[0] >= 0 && sx->cd[1] >= 0) {
            if (sv.cd[0] != sx->cd[1]) return false;
            continue;
        }
        char msg[160];
        snprintf(msg, sizeof msg, "%s: operand %u does not have one value per channel", ir_op_name(ir_node_op(g, n)), i);
        LLVMValueRef bad = LLVMBuildICmp(e->b, LLVMIntNE, sv.dim[0], sx->dim[1], "");
        if (e->part) bad = LLVMBuildAnd(e->b, bad, LLVMBuildICmp(e->b, LLVMIntSLE, e->part, lo_i64(e, 0), ""), "");
        LLVMBasicBlockRef after = lo_if_begin(e, bad);
        lo_run_fail(e, msg);
        lo_if_end(e, after);
    }
    return true;
}

/* ---- LRN ---------------------------------------------------------------------------------- */

typedef struct Lrn {
    IrDType dt;
    LLVMValueRef x, y, c, s; /* channels, points per channel */
    int64_t lo_off, size;
    double alpha, beta, bias;
} Lrn;

/* o[0] = (n*C + c)*S + i; idx = (n, c, i) */
static void lrn_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Lrn *p = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef sq = lo_var(e, f64, LLVMConstReal(f64, 0));
    LLVMValueRef ch = idx[1];
    LoLoop l;
    lo_loop_begin(e, &l, p->size);
    LLVMValueRef j = LLVMBuildAdd(b, LLVMBuildSub(b, ch, lo_i64(e, p->lo_off), ""), l.iv, "");
    LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, j, p->c, "");
    LLVMValueRef js = LLVMBuildSelect(b, ok, j, ch, "");
    LLVMValueRef off = LLVMBuildAdd(b, o[0], LLVMBuildMul(b, LLVMBuildSub(b, js, ch, ""), p->s, ""), "");
    LLVMValueRef v = lo_load(e, p->dt, p->x, off);
    v = lo_to_f64(e, v);
    LLVMValueRef cur = LLVMBuildLoad2(b, f64, sq, "");
    LLVMBuildStore(b, LLVMBuildSelect(b, ok, LLVMBuildFAdd(b, cur, LLVMBuildFMul(b, v, v, ""), ""), cur, ""), sq);
    lo_loop_end(e, &l);
    LLVMValueRef den = LLVMBuildFAdd(b, LLVMConstReal(f64, p->bias),
                                     LLVMBuildFMul(b, LLVMConstReal(f64, p->alpha / (double)p->size), LLVMBuildLoad2(b, f64, sq, ""), ""), "");
    if (p->beta == 0.75 || p->beta == 0.5 || p->beta == 1.0) { /* sqrt chains vectorize; pow is a call */
        LLVMValueRef s1 = lo_intrinsic(e, "llvm.sqrt", f64, &den, 1);
        if (p->beta == 0.75) den = LLVMBuildFMul(b, s1, lo_intrinsic(e, "llvm.sqrt", f64, &s1, 1), "");
        else if (p->beta == 0.5) den = s1;
    } else {
        LLVMValueRef pw[2] = {den, LLVMConstReal(f64, p->beta)};
        den = lo_intrinsic(e, "llvm.pow", f64, pw, 2);
    }
    LLVMValueRef x = lo_load(e, p->dt, p->x, o[0]);
    x = lo_to_f64(e, x);
    LLVMValueRef r = LLVMBuildFDiv(b, x, den, "");
    r = lo_from_f64(e, r, p->dt);
    lo_store(e, p->dt, p->y, o[0], r);
}

IrStatus cpu_stats_lrn(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrValueId x = ir_node_operand(g, e->node, 0), y = ir_node_result(g, e->node, 0);
    LlvmDims s;
    bool found;
    Lrn p = {.dt = lo_dtype(e, x)};
    if (!llvm_dims_of(e, x, &s)) return lo_unsupported(e, "with an unknown shape");
    if (!lo_is_float(p.dt)) return lo_unsupported_dtype(e, p.dt);
    if (s.rank < 2) return lo_unsupported(e, "with rank < 2");
    p.size = ir_node_attr_int(g, e->node, "size", &found);
    if (p.size <= 0) return lo_unsupported(e, "with this size");
    p.alpha = ir_node_attr_float(g, e->node, "alpha", &found);
    p.beta = ir_node_attr_float(g, e->node, "beta", &found);
    p.bias = ir_node_attr_float(g, e->node, "bias", &found);
    p.c = s.dim[1];
    p.s = llvm_dims_prod(e, &s, 2, s.rank);
    p.lo_off = (p.size - 1) / 2;
    p.x = lo_buf(e, x);
    p.y = lo_buf(e, y);
    LlvmDims d3;
    dims_n(&d3, 3, (LLVMValueRef[]){s.dim[0], s.dim[1], p.s}, (int64_t[]){s.cd[0], s.cd[1], llvm_dims_cprod(&s, 2, s.rank)});
    LLVMValueRef st[1][IR_MAX_RANK] = {{LLVMBuildNSWMul(e->b, p.c, p.s, ""), p.s, lo_i64(e, 1)}};
    llvm_nest(e, &d3, 1, st, NULL, lrn_body, &p);
    return IR_OK;
}

/* ---- InstanceNormalization ------------------------------------------------------------------ */

typedef struct Inorm {
    IrDType dt;
    LLVMValueRef x, y, scale, bias, s; /* s: points per plane */
    double eps;
} Inorm;

/* o[0] = plane start (n*C + c)*S; idx = (n, c) */
static void inorm_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Inorm *p = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef sum = lo_var(e, f64, LLVMConstReal(f64, 0)), sq = lo_var(e, f64, LLVMConstReal(f64, 0));
    LlvmLoop l;
    llvm_loop_n(e, &l, p->s);
    LLVMValueRef v = lo_load(e, p->dt, p->x, LLVMBuildAdd(b, o[0], l.iv, ""));
    v = lo_to_f64(e, v);
    LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, sum, ""), v, ""), sum);
    loop_end(e, &l);
    LLVMValueRef n = LLVMBuildSIToFP(b, p->s, f64, "");
    LLVMValueRef mean = LLVMBuildFDiv(b, LLVMBuildLoad2(b, f64, sum, ""), n, "");
    llvm_loop_n(e, &l, p->s);
    v = lo_load(e, p->dt, p->x, LLVMBuildAdd(b, o[0], l.iv, ""));
    v = lo_to_f64(e, v);
    LLVMValueRef t = LLVMBuildFSub(b, v, mean, "");
    LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, sq, ""), LLVMBuildFMul(b, t, t, ""), ""), sq);
    loop_end(e, &l);
    LLVMValueRef var = LLVMBuildFAdd(b, LLVMBuildFDiv(b, LLVMBuildLoad2(b, f64, sq, ""), n, ""), LLVMConstReal(f64, p->eps), "");
    LLVMValueRef inv = LLVMBuildFDiv(b, LLVMConstReal(f64, 1.0), lo_intrinsic(e, "llvm.sqrt", f64, &var, 1), "");
    LLVMValueRef sc = lo_load(e, p->dt, p->scale, idx[1]), bi = lo_load(e, p->dt, p->bias, idx[1]);
    sc = lo_to_f64(e, sc), bi = lo_to_f64(e, bi);
    llvm_loop_n(e, &l, p->s);
    LLVMValueRef off = LLVMBuildAdd(b, o[0], l.iv, "");
    v = lo_load(e, p->dt, p->x, off);
    v = lo_to_f64(e, v);
    LLVMValueRef r = LLVMBuildFAdd(b, LLVMBuildFMul(b, LLVMBuildFMul(b, LLVMBuildFSub(b, v, mean, ""), inv, ""), sc, ""), bi, "");
    r = lo_from_f64(e, r, p->dt);
    lo_store(e, p->dt, p->y, off, r);
    loop_end(e, &l);
}

IrStatus cpu_stats_inorm(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrValueId x = ir_node_operand(g, e->node, 0), y = ir_node_result(g, e->node, 0);
    LlvmDims s;
    bool found;
    Inorm p = {.dt = lo_dtype(e, x)};
    if (!llvm_dims_of(e, x, &s)) return lo_unsupported(e, "with an unknown shape");
    if (!lo_is_float(p.dt)) return lo_unsupported_dtype(e, p.dt);
    if (s.rank < 3) return lo_unsupported(e, "with rank < 3");
    if (!channel_params(e, &s, 1, 2, false)) return lo_unsupported(e, "with these scale and bias");
    if (llvm_dims_cprod(&s, 2, s.rank) == 0) return IR_OK;
    p.s = llvm_dims_prod(e, &s, 2, s.rank);
    p.eps = ir_node_attr_float(g, e->node, "epsilon", &found);
    p.x = lo_buf(e, x);
    p.y = lo_buf(e, y);
    p.scale = lo_buf(e, ir_node_operand(g, e->node, 1));
    p.bias = lo_buf(e, ir_node_operand(g, e->node, 2));
    LlvmDims d2;
    dims_n(&d2, 2, s.dim, s.cd);
    LLVMValueRef st[1][IR_MAX_RANK] = {{LLVMBuildNSWMul(e->b, s.dim[1], p.s, ""), p.s}};
    llvm_nest(e, &d2, 1, st, NULL, inorm_body, &p);
    return IR_OK;
}

/* ---- MeanVarianceNormalization -------------------------------------------------------------- */

/* Three passes over a group of elements in f64, as the interpreter (MeanVarianceNormalization,
 * BatchNormalization's statistics): pass 0 sums x into acc, pass 1 sums (x - mean)^2, pass 2
 * stores (x - mean) / k (div) or (x - mean) * k + bias. */
typedef struct Stats {
    IrDType dt;
    LLVMValueRef x, y, acc, mean, k, bias;
    bool div;
    int pass;
} Stats;

static void stats_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Stats *c = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef v = lo_to_f64(e, lo_load(e, c->dt, c->x, o[0]));
    if (c->pass == 0) {
        LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, c->acc, ""), v, ""), c->acc);
        return;
    }
    LLVMValueRef dv = LLVMBuildFSub(b, v, LLVMBuildLoad2(b, f64, c->mean, ""), "");
    if (c->pass == 1) {
        LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, c->acc, ""), LLVMBuildFMul(b, dv, dv, ""), ""), c->acc);
        return;
    }
    LLVMValueRef k = LLVMBuildLoad2(b, f64, c->k, ""), r;
    if (c->div) r = LLVMBuildFDiv(b, dv, k, "");
    else r = LLVMBuildFAdd(b, LLVMBuildFMul(b, dv, k, ""), LLVMBuildLoad2(b, f64, c->bias, ""), "");
    lo_store(e, c->dt, c->y, o[0], lo_from_f64(e, r, c->dt));
}

/* Per group of the kept dims, the three passes over the normalized dims, k = sqrt(mean square
 * deviation) + 1e-9. */
typedef struct Mvn {
    Stats s;
    LlvmDims rd; /* the normalized dims (the others 1) */
    LLVMValueRef count, in_st[1][IR_MAX_RANK];
} Mvn;

static void mvn_outer(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Mvn *c = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef n = LLVMBuildSIToFP(b, c->count, f64, "");
    for (c->s.pass = 0; c->s.pass < 3; c->s.pass++) {
        LLVMBuildStore(b, LLVMConstReal(f64, 0), c->s.acc);
        llvm_nest(e, &c->rd, 1, c->in_st, o, stats_body, &c->s);
        LLVMValueRef m = LLVMBuildFDiv(b, LLVMBuildLoad2(b, f64, c->s.acc, ""), n, "");
        if (c->s.pass == 0) LLVMBuildStore(b, m, c->s.mean);
        if (c->s.pass == 1)
            LLVMBuildStore(b, LLVMBuildFAdd(b, lo_intrinsic(e, "llvm.sqrt", f64, &m, 1), LLVMConstReal(f64, 1e-9), ""), c->s.k);
    }
}

IrStatus cpu_stats_mvn(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    Mvn c = {.s = {.dt = lo_dtype(e, x), .div = true}};
    int64_t axes[IR_MAX_RANK] = {0, 2, 3};
    LlvmDims s;
    if (!llvm_dims_of(e, x, &s)) return lo_unsupported(e, "with an unknown shape");
    if (!lo_is_float(c.s.dt)) return lo_unsupported_dtype(e, c.s.dt);
    uint32_t na = 3;
    IrAttrValue av;
    if (ir_node_attr(g, n, "axes", &av) && av.kind == IR_ATTR_INTS) {
        if (av.count > IR_MAX_RANK) return lo_unsupported(e, "with these axes");
        na = av.count;
        for (uint32_t i = 0; i < na; i++) axes[i] = av.ints[i];
    }
    bool red[IR_MAX_RANK] = {0};
    for (uint32_t i = 0; i < na; i++) {
        int64_t a = ir_shape_axis(axes[i], s.rank);
        if (a < 0 || a >= (int64_t)s.rank) return lo_unsupported(e, "with these axes");
        red[a] = true;
    }
    if (s.rank == 0) { /* one element: (x - x) / 1e-9 */
        LLVMValueRef v = lo_to_f64(e, lo_load(e, c.s.dt, lo_buf(e, x), lo_i64(e, 0)));
        v = LLVMBuildFDiv(e->b, LLVMBuildFSub(e->b, v, v, ""), LLVMConstReal(lo_f64_t(e), 1e-9), "");
        lo_store(e, c.s.dt, lo_buf(e, y), lo_i64(e, 0), lo_from_f64(e, v, c.s.dt));
        return IR_OK;
    }
    LlvmDims od;
    LLVMValueRef st[1][IR_MAX_RANK];
    od.rank = c.rd.rank = s.rank;
    for (uint32_t k = 0; k < s.rank; k++) {
        LlvmDims *on = red[k] ? &c.rd : &od, *off = red[k] ? &od : &c.rd;
        on->dim[k] = s.dim[k], on->cd[k] = s.cd[k], on->ex[k] = s.ex[k];
        off->dim[k] = lo_i64(e, 1), off->cd[k] = 1, off->ex[k] = 0;
    }
    llvm_dims_strides(e, &s, st[0]);
    for (uint32_t k = 0; k < s.rank; k++) c.in_st[0][k] = st[0][k];
    c.count = llvm_dims_prod(e, &c.rd, 0, c.rd.rank);
    c.s.x = lo_buf(e, x);
    c.s.y = lo_buf(e, y);
    c.s.acc = lo_var(e, lo_f64_t(e), LLVMConstReal(lo_f64_t(e), 0));
    c.s.mean = lo_var(e, lo_f64_t(e), LLVMConstReal(lo_f64_t(e), 0));
    c.s.k = lo_var(e, lo_f64_t(e), LLVMConstReal(lo_f64_t(e), 1));
    llvm_nest(e, &od, 1, st, NULL, mvn_outer, &c);
    return IR_OK;
}

/* ---- BatchNormalization --------------------------------------------------------------------- */

/* f32 inference: per element (x - mean) / sqrt(var + eps) * scale + bias, the parameters by
 * channel (dim 1). */
typedef struct Bn {
    LLVMValueRef x, y, p[4]; /* scale, bias, mean, var */
    double eps;
} Bn;

static void bn_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Bn *c = user;
    LLVMTypeRef f32 = lo_f32_t(e);
    LLVMBuilderRef b = e->b;
    LLVMValueRef pv[4];
    for (int i = 0; i < 4; i++) pv[i] = LLVMBuildLoad2(b, f32, lo_gep(e, f32, c->p[i], o[2]), "");
    LLVMValueRef v = LLVMBuildFAdd(b, pv[3], LLVMConstReal(f32, c->eps), "");
    LLVMValueRef den = lo_intrinsic(e, "llvm.sqrt", f32, &v, 1);
    LLVMValueRef x = LLVMBuildLoad2(b, f32, lo_gep(e, f32, c->x, o[1]), "");
    LLVMValueRef t = LLVMBuildFDiv(b, LLVMBuildFSub(b, x, pv[2], ""), den, "");
    t = LLVMBuildFAdd(b, LLVMBuildFMul(b, t, pv[0], ""), pv[1], "");
    LLVMBuildStore(b, t, lo_gep(e, f32, c->y, o[0]));
}

static IrStatus bn_f32(LlvmEmit *e, const LlvmDims *sx) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    Bn c = {.x = lo_buf(e, ir_node_operand(g, n, 0)), .y = lo_buf(e, ir_node_result(g, n, 0))};
    bool found;
    c.eps = ir_node_attr_float(g, n, "epsilon", &found);
    if (!found) c.eps = 1e-5;
    for (int i = 0; i < 4; i++) c.p[i] = lo_buf(e, ir_node_operand(g, n, (uint32_t)i + 1));
    LLVMValueRef st[3][IR_MAX_RANK];
    llvm_dims_strides(e, sx, st[0]);
    llvm_dims_strides(e, sx, st[1]);
    for (uint32_t k = 0; k < sx->rank; k++) st[2][k] = k == 1 ? lo_i64(e, 1) : NULL;
    llvm_nest(e, sx, 3, st, NULL, bn_body, &c);
    return IR_OK;
}

/* Training mode (batch statistics over every axis but 1, running mean and variance blended with
 * momentum into outputs 1 and 2), the statistics outputs in inference (the input statistics)
 * and dtypes other than f32: per channel in f64, as the interpreter. */
typedef struct BnAny {
    Stats c;
    LLVMValueRef par[5], out[3]; /* par[1..4]: scale, bias, mean, var; out[1..2]: NULL if absent */
    IrDType par_dt[5], out_dt[3];
    LlvmDims ns;                 /* [batch, points per channel and image] */
    LLVMValueRef st[1][IR_MAX_RANK], cs, cnt; /* x's strides over ns; points per channel; their count in f64 (1 when 0) */
    double eps, mom;
    bool training;
} BnAny;

/* One channel, idx[0]: its statistics (training: two passes over its points), then its points. */
static void bn_channel(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)o;
    BnAny *a = user;
    Stats *c = &a->c;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef ch = idx[0], in[5];
    for (uint32_t i = 1; i < 5; i++) in[i] = lo_to_f64(e, lo_load(e, a->par_dt[i], a->par[i], ch));
    LLVMValueRef mean = in[3], var = in[4], out1 = in[3], out2 = in[4];
    LLVMValueRef base = LLVMBuildNSWMul(b, ch, a->cs, "");
    if (a->training) { /* no points: mean and variance 0, as the interpreter has them */
        LLVMBuildStore(b, LLVMConstReal(f64, 0), c->acc);
        c->pass = 0;
        llvm_nest(e, &a->ns, 1, a->st, &base, stats_body, c);
        mean = LLVMBuildFDiv(b, LLVMBuildLoad2(b, f64, c->acc, ""), a->cnt, "");
        LLVMBuildStore(b, mean, c->mean);
        LLVMBuildStore(b, LLVMConstReal(f64, 0), c->acc);
        c->pass = 1;
        llvm_nest(e, &a->ns, 1, a->st, &base, stats_body, c);
        var = LLVMBuildFDiv(b, LLVMBuildLoad2(b, f64, c->acc, ""), a->cnt, "");
        LLVMValueRef m = LLVMConstReal(f64, a->mom), m1 = LLVMConstReal(f64, 1 - a->mom);
        out1 = LLVMBuildFAdd(b, LLVMBuildFMul(b, in[3], m, ""), LLVMBuildFMul(b, mean, m1, ""), "");
        out2 = LLVMBuildFAdd(b, LLVMBuildFMul(b, in[4], m, ""), LLVMBuildFMul(b, var, m1, ""), "");
    }
    for (uint32_t i = 1; i < 3; i++)
        if (a->out[i]) lo_store(e, a->out_dt[i], a->out[i], ch, lo_from_f64(e, i == 1 ? out1 : out2, a->out_dt[i]));
    LLVMValueRef sd = LLVMBuildFAdd(b, var, LLVMConstReal(f64, a->eps), "");
    sd = lo_intrinsic(e, "llvm.sqrt", f64, &sd, 1);
    LLVMBuildStore(b, mean, c->mean);
    LLVMBuildStore(b, LLVMBuildFDiv(b, in[1], sd, ""), c->k);
    LLVMBuildStore(b, in[2], c->bias);
    c->pass = 2;
    llvm_nest(e, &a->ns, 1, a->st, &base, stats_body, c);
}

static IrStatus bn_any(LlvmEmit *e, const LlvmDims *sx) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0);
    BnAny a = {.c = {.dt = lo_dtype(e, x)}};
    if (!lo_is_float(a.c.dt)) return lo_unsupported_dtype(e, a.c.dt);
    if (!channel_params(e, sx, 1, 4, true)) return lo_unsupported(e, "with these statistics");
    bool found;
    a.eps = ir_node_attr_float(g, n, "epsilon", &found);
    if (!found) a.eps = 1e-5;
    a.mom = ir_node_attr_float(g, n, "momentum", &found);
    if (!found) a.mom = 0.9;
    a.training = ir_node_attr_int(g, n, "training_mode", &found) != 0;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    for (uint32_t i = 1; i < 5; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        a.par[i] = lo_buf(e, v);
        a.par_dt[i] = lo_dtype(e, v);
    }
    for (uint32_t i = 1; i < 3; i++) {
        IrValueId v = ir_node_num_results(g, n) > i ? ir_node_result(g, n, i) : 0;
        a.out[i] = v ? lo_buf(e, v) : NULL;
        a.out_dt[i] = v ? lo_dtype(e, v) : IR_DTYPE_F32;
    }
    a.cs = llvm_dims_prod(e, sx, 2, sx->rank);
    dims_n(&a.ns, 2, (LLVMValueRef[]){sx->dim[0], a.cs}, (int64_t[]){sx->cd[0], llvm_dims_cprod(sx, 2, sx->rank)});
    a.st[0][0] = LLVMBuildNSWMul(b, sx->dim[1], a.cs, "");
    a.st[0][1] = lo_i64(e, 1);
    LLVMValueRef ns = LLVMBuildNSWMul(b, sx->dim[0], a.cs, "");
    ns = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, ns, lo_i64(e, 0), ""), lo_i64(e, 1), ns, "");
    a.cnt = LLVMBuildSIToFP(b, ns, f64, "");
    a.c.x = lo_buf(e, x);
    a.c.y = lo_buf(e, ir_node_result(g, n, 0));
    a.c.acc = lo_var(e, f64, LLVMConstReal(f64, 0));
    a.c.mean = lo_var(e, f64, LLVMConstReal(f64, 0));
    a.c.k = lo_var(e, f64, LLVMConstReal(f64, 0));
    a.c.bias = lo_var(e, f64, LLVMConstReal(f64, 0));
    LlvmDims cs;
    dims_n(&cs, 1, &sx->dim[1], &sx->cd[1]);
    LLVMValueRef none[1][IR_MAX_RANK] = {{NULL}};
    llvm_nest(e, &cs, 0, none, NULL, bn_channel, &a);
    return IR_OK;
}

/* BatchNormalization: f32 inference with output 0 only per element, anything else per channel. */
IrStatus cpu_stats_batchnorm(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LlvmDims sx;
    bool found;
    if (!llvm_dims_of(e, ir_node_operand(g, n, 0), &sx)) return lo_unsupported(e, "with an unknown shape");
    if (sx.rank < 2) return lo_unsupported(e, "with rank < 2");
    bool f32 = ir_node_attr_int(g, n, "training_mode", &found) == 0 && lo_dtype(e, ir_node_result(g, n, 0)) == IR_DTYPE_F32;
    for (uint32_t i = 0; f32 && i < 5; i++) f32 = lo_dtype(e, ir_node_operand(g, n, i)) == IR_DTYPE_F32;
    for (uint32_t i = 1; f32 && i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) f32 = false;
    if (!f32) return bn_any(e, &sx);
    if (!channel_params(e, &sx, 1, 4, true)) return lo_unsupported(e, "with these parameters");
    return bn_f32(e, &sx);
}
