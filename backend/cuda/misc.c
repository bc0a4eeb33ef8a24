/* One thread per element, computed values: the Blackman/Hamming/Hann windows (as
 * ir/kernels_shared.h, in double), the random ops (a counter-based splitmix64 per element from
 * the seed: their values are the generator's business, not the op's, as conformance says) and
 * the training optimizers Adagrad, Adam and Momentum with R and T read on the device.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <string.h>

static LLVMValueRef dc(Cu *c, double v) { return LLVMConstReal(c->f64, v); }
static LLVMValueRef i64c(Cu *c, uint64_t v) { return LLVMConstInt(c->i64, v, 0); }

typedef struct MiscCtx {
    IrOp op;
    IrValueId y, x;
    IrDType yt, xt;
    int kind;     /* window: 0 blackman, 1 hamming, 2 hann */
    double N, a0, a1; /* window N; random: low/high or mean/scale */
    uint64_t seed;
} MiscCtx;

/* splitmix64 of (seed, i) -> a double in [0, 1) */
static LLVMValueRef uniform(Cu *c, uint64_t seed, LLVMValueRef i) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef z = LLVMBuildAdd(b, i64c(c, seed), LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildZExt(b, i, c->i64, ""), i64c(c, 1), ""),
                                                                 i64c(c, 0x9E3779B97F4A7C15ull), ""), "");
    z = LLVMBuildMul(b, LLVMBuildXor(b, z, LLVMBuildLShr(b, z, i64c(c, 30), ""), ""), i64c(c, 0xBF58476D1CE4E5B9ull), "");
    z = LLVMBuildMul(b, LLVMBuildXor(b, z, LLVMBuildLShr(b, z, i64c(c, 27), ""), ""), i64c(c, 0x94D049BB133111EBull), "");
    z = LLVMBuildXor(b, z, LLVMBuildLShr(b, z, i64c(c, 31), ""), "");
    return LLVMBuildFMul(b, LLVMBuildUIToFP(b, LLVMBuildLShr(b, z, i64c(c, 11), ""), c->f64, ""), dc(c, 1.0 / 9007199254740992.0), "");
}

/* The value at element o[0] (x: its index as a double), one function per kind of op. */
static LLVMValueRef v_window(Cu *c, const MiscCtx *p, LLVMValueRef x, LLVMValueRef *o) {
    (void)o;
    LLVMBuilderRef b = c->b;
    if (p->kind == 2) {
        LLVMValueRef s = cu_libm1(c, "__nv_sin", LLVMBuildFDiv(b, LLVMBuildFMul(b, x, dc(c, M_PI), ""), dc(c, p->N), ""));
        return LLVMBuildFMul(b, s, s, "");
    }
    if (p->kind == 1) {
        double al = 25.0 / 46.0;
        LLVMValueRef cs = cu_libm1(c, "__nv_cos", LLVMBuildFDiv(b, LLVMBuildFMul(b, LLVMBuildFMul(b, x, dc(c, M_PI), ""), dc(c, 2.0), ""), dc(c, p->N), ""));
        return LLVMBuildFSub(b, dc(c, al), LLVMBuildFMul(b, cs, dc(c, 1 - al), ""), "");
    }
    LLVMValueRef c1 = cu_libm1(c, "__nv_cos", LLVMBuildFDiv(b, LLVMBuildFMul(b, x, dc(c, M_PI * 2), ""), dc(c, p->N), ""));
    LLVMValueRef c2 = cu_libm1(c, "__nv_cos", LLVMBuildFDiv(b, LLVMBuildFMul(b, x, dc(c, M_PI * 4), ""), dc(c, p->N), ""));
    return LLVMBuildFAdd(b, LLVMBuildFAdd(b, LLVMBuildFMul(b, c1, dc(c, -0.5), ""), LLVMBuildFMul(b, c2, dc(c, 0.08), ""), ""), dc(c, 0.42), "");
}
static LLVMValueRef v_bernoulli(Cu *c, const MiscCtx *p, LLVMValueRef x, LLVMValueRef *o) {
    (void)x;
    LLVMValueRef pr = cu_load_typed(c, p->xt, pslot(c, p->x), o[0]);
    return LLVMBuildSelect(c->b, fcmp(c, LLVMRealOLT, uniform(c, p->seed, o[0]), pr), dc(c, 1.0), dc(c, 0.0), "");
}
static LLVMValueRef v_uniform(Cu *c, const MiscCtx *p, LLVMValueRef x, LLVMValueRef *o) {
    (void)x;
    return LLVMBuildFAdd(c->b, dc(c, p->a0), LLVMBuildFMul(c->b, uniform(c, p->seed, o[0]), dc(c, p->a1 - p->a0), ""), "");
}
/* normal: Box-Muller on two uniforms of the element */
static LLVMValueRef v_normal(Cu *c, const MiscCtx *p, LLVMValueRef x, LLVMValueRef *o) {
    (void)x;
    LLVMBuilderRef b = c->b;
    LLVMValueRef u1 = LLVMBuildFSub(b, dc(c, 1.0), uniform(c, p->seed, o[0]), ""), u2 = uniform(c, p->seed ^ 0x5851F42D4C957F2Dull, o[0]);
    LLVMValueRef r = cu_intr(c, "llvm.sqrt", &c->f64, 1, (LLVMValueRef[]){LLVMBuildFMul(b, dc(c, -2.0), cu_libm1(c, "__nv_log", u1), "")}, 1);
    LLVMValueRef z = LLVMBuildFMul(b, r, cu_libm1(c, "__nv_cos", LLVMBuildFMul(b, u2, dc(c, 2 * M_PI), "")), "");
    return LLVMBuildFAdd(b, dc(c, p->a0), LLVMBuildFMul(b, z, dc(c, p->a1), ""), "");
}

static double attr_f(const IrGraph *g, IrNodeId n, const char *k, double d) {
    bool found;
    double v = ir_node_attr_float(g, n, k, &found);
    return found ? v : d;
}

/* The attributes each kind of op reads into p (total: the element count); false when the
 * operand's dtype has no form. */
static bool s_window(const IrGraph *g, IrNodeId n, MiscCtx *p, int64_t total) {
    bool found;
    p->N = ir_node_attr_int(g, n, "periodic", &found) != 0 || !found ? (double)total : (double)(total - 1);
    p->x = 0;
    return true;
}
static bool s_bernoulli(const IrGraph *g, IrNodeId n, MiscCtx *p, int64_t total) {
    (void)g, (void)n, (void)total;
    return cu_kind(p->xt) == CU_KF && cu_typed_ok(p->xt);
}
static bool s_uniform(const IrGraph *g, IrNodeId n, MiscCtx *p, int64_t total) {
    (void)total;
    p->a0 = attr_f(g, n, "low", 0.0), p->a1 = attr_f(g, n, "high", 1.0), p->x = 0;
    return true;
}
static bool s_normal(const IrGraph *g, IrNodeId n, MiscCtx *p, int64_t total) {
    (void)total;
    p->a0 = attr_f(g, n, "mean", 0.0), p->a1 = attr_f(g, n, "scale", 1.0), p->x = 0;
    return true;
}

/* The ops of cuda_emit_misc: value, attributes and the window kind (0 blackman, 1 hamming, 2 hann). */
static const struct {
    LLVMValueRef (*value)(Cu *, const MiscCtx *, LLVMValueRef, LLVMValueRef *);
    bool (*setup)(const IrGraph *, IrNodeId, MiscCtx *, int64_t);
    int kind;
} misc_ops[IR_OP_COUNT] = {
    [IR_OP_BLACKMAN_WINDOW] = {v_window, s_window, 0},
    [IR_OP_HAMMING_WINDOW] = {v_window, s_window, 1},
    [IR_OP_HANN_WINDOW] = {v_window, s_window, 2},
    [IR_OP_BERNOULLI] = {v_bernoulli, s_bernoulli, 0},
    [IR_OP_RANDOM_UNIFORM] = {v_uniform, s_uniform, 0},
    [IR_OP_RANDOM_UNIFORM_LIKE] = {v_uniform, s_uniform, 0},
    [IR_OP_RANDOM_NORMAL] = {v_normal, s_normal, 0},
    [IR_OP_RANDOM_NORMAL_LIKE] = {v_normal, s_normal, 0},
};

static void misc_body(Cu *c, LLVMValueRef *o, void *user) {
    MiscCtx *p = user;
    LLVMValueRef x = LLVMBuildUIToFP(c->b, o[0], c->f64, "");
    LLVMValueRef v = misc_ops[p->op].value(c, p, x, o);
    if (cu_kind(p->yt) != CU_KF) v = cu_convert(c, v, IR_DTYPE_F64, p->yt);
    cu_store_typed(c, p->yt, pslot(c, p->y), o[0], v);
}

IrStatus cuda_emit_misc(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    MiscCtx p = {.op = ir_node_op(g, n), .y = ir_node_result(g, n, 0)};
    if (!misc_ops[p.op].value) return cu_unsupported(c, "in the computed-values family");
    p.x = ir_node_num_operands(g, n) ? ir_node_operand(g, n, 0) : 0;
    p.yt = lower_value_dtype(g, p.y);
    if (!cu_typed_ok(p.yt)) return cu_unsupported_dtype(c, p.yt);
    if (p.x) p.xt = lower_value_dtype(g, p.x);
    uint32_t r;
    int64_t d[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, p.y, &r, d);
    int64_t total = ir_shape_numel(r, d);
    p.kind = misc_ops[p.op].kind;
    if (!misc_ops[p.op].setup(g, n, &p, total)) return cu_unsupported_dtype(c, p.xt);
    double seed = attr_f(g, n, "seed", 0.0);
    memcpy(&p.seed, &seed, sizeof p.seed);
    p.seed ^= (uint64_t)c->index * 0x9E3779B97F4A7C15ull; /* unseeded nodes differ from each other */
    if (!total) return IR_OK;
    uint32_t slots[2] = {p.y, p.x ? p.x : p.y};
    IrStatus st_ = cu_kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, misc_body, &p);
    return cu_kend(c, total, NULL);
}

/* ---- training optimizers: R, T, then the groups of tensors --------------------------------- */

typedef struct OptCtx {
    IrOp op;
    IrValueId r, t, in[4], out[3];
    uint32_t groups;
    double alpha, beta, eps, norm, post, decay;
    bool nesterov;
} OptCtx;

static LLVMValueRef optf(Cu *c, IrValueId v, LLVMValueRef i) { return cu_load_typed(c, lower_value_dtype(c->g, v), pslot(c, v), i); }
static void opt_st(Cu *c, IrValueId v, LLVMValueRef i, LLVMValueRef x) { cu_store_typed(c, lower_value_dtype(c->g, v), pslot(c, v), i, x); }

static void opt_body(Cu *c, LLVMValueRef *o, void *user) {
    OptCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef i = o[0], z = ci(c, 0);
    LLVMValueRef R = optf(c, p->r, z), T = cu_load_typed(c, lower_value_dtype(c->g, p->t), pslot(c, p->t), z);
    LLVMValueRef Tf = LLVMBuildSIToFP(b, T, c->f64, ""), tpos = LLVMBuildICmp(b, LLVMIntSGT, T, LLVMConstInt(c->i64, 0, 0), "");
    LLVMValueRef xv = optf(c, p->in[0], i);
    LLVMValueRef gr = LLVMBuildFAdd(b, LLVMBuildFMul(b, dc(c, p->norm), xv, ""), optf(c, p->in[1], i), "");
    if (p->op == IR_OP_ADAGRAD) {
        LLVMValueRef lr = LLVMBuildFDiv(b, R, LLVMBuildFAdd(b, dc(c, 1.0), LLVMBuildFMul(b, Tf, dc(c, p->decay), ""), ""), "");
        LLVMValueRef hn = LLVMBuildFAdd(b, optf(c, p->in[2], i), LLVMBuildFMul(b, gr, gr, ""), "");
        LLVMValueRef sq = cu_intr(c, "llvm.sqrt", &c->f64, 1, &hn, 1);
        opt_st(c, p->out[1], i, hn);
        opt_st(c, p->out[0], i, LLVMBuildFSub(b, xv, LLVMBuildFDiv(b, LLVMBuildFMul(b, lr, gr, ""), LLVMBuildFAdd(b, sq, dc(c, p->eps), ""), ""), ""));
    } else if (p->op == IR_OP_ADAM) {
        LLVMValueRef pa[2] = {dc(c, p->beta), Tf}, pb[2] = {dc(c, p->alpha), Tf};
        LLVMValueRef num = cu_intr(c, "llvm.sqrt", &c->f64, 1, (LLVMValueRef[]){LLVMBuildFSub(b, dc(c, 1.0), cu_libm(c, "__nv_pow", pa, 2), "")}, 1);
        LLVMValueRef lr = sel(c, tpos, LLVMBuildFDiv(b, LLVMBuildFMul(b, R, num, ""), LLVMBuildFSub(b, dc(c, 1.0), cu_libm(c, "__nv_pow", pb, 2), ""), ""), R);
        LLVMValueRef vn = LLVMBuildFAdd(b, LLVMBuildFMul(b, dc(c, p->alpha), optf(c, p->in[2], i), ""), LLVMBuildFMul(b, dc(c, 1 - p->alpha), gr, ""), "");
        LLVMValueRef hn = LLVMBuildFAdd(b, LLVMBuildFMul(b, dc(c, p->beta), optf(c, p->in[3], i), ""),
                                        LLVMBuildFMul(b, dc(c, 1 - p->beta), LLVMBuildFMul(b, gr, gr, ""), ""), "");
        LLVMValueRef sq = cu_intr(c, "llvm.sqrt", &c->f64, 1, &hn, 1);
        LLVMValueRef xn = LLVMBuildFSub(b, xv, LLVMBuildFDiv(b, LLVMBuildFMul(b, lr, vn, ""), LLVMBuildFAdd(b, sq, dc(c, p->eps), ""), ""), "");
        opt_st(c, p->out[0], i, LLVMBuildFMul(b, dc(c, 1 - p->post), xn, ""));
        opt_st(c, p->out[1], i, vn);
        opt_st(c, p->out[2], i, hn);
    } else {
        LLVMValueRef bb = sel(c, tpos, dc(c, p->beta), dc(c, 1.0));
        LLVMValueRef vn = LLVMBuildFAdd(b, LLVMBuildFMul(b, dc(c, p->alpha), optf(c, p->in[2], i), ""), LLVMBuildFMul(b, bb, gr, ""), "");
        opt_st(c, p->out[1], i, vn);
        LLVMValueRef step = p->nesterov ? LLVMBuildFAdd(b, gr, LLVMBuildFMul(b, dc(c, p->alpha), vn, ""), "") : vn;
        opt_st(c, p->out[0], i, LLVMBuildFSub(b, xv, LLVMBuildFMul(b, R, step, ""), ""));
    }
}

IrStatus cuda_emit_optimizer(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    OptCtx p = {.op = ir_node_op(g, n), .r = ir_node_operand(g, n, 0), .t = ir_node_operand(g, n, 1)};
    p.groups = p.op == IR_OP_ADAM ? 4 : 3;
    uint32_t no = ir_node_num_operands(g, n), k = (no - 2) / p.groups;
    if ((no - 2) % p.groups || ir_node_num_results(g, n) != (p.groups - 1) * k) return cu_unsupported(c, "with these operands");
    p.alpha = attr_f(g, n, "alpha", 0.9), p.beta = attr_f(g, n, "beta", 0.999), p.eps = attr_f(g, n, "epsilon", 0.0);
    p.norm = attr_f(g, n, "norm_coefficient", 0.0), p.post = attr_f(g, n, "norm_coefficient_post", 0.0);
    p.decay = attr_f(g, n, "decay_factor", 0.0);
    bool found;
    const char *mode = ir_node_attr_string(g, n, "mode", &found);
    p.nesterov = found && mode && strcmp(mode, "nesterov") == 0;
    if (lower_value_nbytes(g, p.r) != ir_dtype_size(lower_value_dtype(g, p.r)) || cu_kind(lower_value_dtype(g, p.r)) != CU_KF ||
        (lower_value_dtype(g, p.t) != IR_DTYPE_I64 && lower_value_dtype(g, p.t) != IR_DTYPE_I32))
        return cu_unsupported(c, "with these R and T");
    for (uint32_t i = 0; i < k; i++) {
        uint32_t slots[8], ns = 0;
        slots[ns++] = p.r, slots[ns++] = p.t;
        for (uint32_t q = 0; q < p.groups; q++) {
            p.in[q] = ir_node_operand(g, n, 2 + q * k + i);
            if (cu_kind(lower_value_dtype(g, p.in[q])) != CU_KF || !cu_typed_ok(lower_value_dtype(g, p.in[q])))
                return cu_unsupported_dtype(c, lower_value_dtype(g, p.in[q]));
            slots[ns++] = p.in[q];
        }
        for (uint32_t q = 0; q + 1 < p.groups; q++) {
            p.out[q] = ir_node_result(g, n, q * k + i);
            if (!p.out[q]) return cu_unsupported(c, "with an unused output");
            slots[ns++] = p.out[q];
        }
        uint32_t r;
        int64_t d[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
        lower_value_shape(g, p.in[0], &r, d);
        int64_t total = ir_shape_numel(r, d);
        if (!total) continue;
        IrStatus st_ = cu_kbegin(c, slots, ns, CU_BLOCK, false);
        if (st_) return st_;
        cu_emit_nest(c, 1, &total, 1, s1, NULL, opt_body, &p);
        if ((st_ = cu_kend(c, total, NULL))) return st_;
    }
    return IR_OK;
}

/* ---- Dropout with training_mode given at run time (or true): y = x * keep / (1 - ratio), the
 * mask random per element; the identity (mask all true) when training is off or ratio is 0 ---- */

typedef struct DropCtx {
    IrValueId x, ratio, tm, y, mask;
    IrDType xt, rt, tt;
    uint64_t seed;
} DropCtx;

static void drop_body(Cu *c, LLVMValueRef *o, void *user) {
    DropCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef x = cu_load_typed(c, p->xt, pslot(c, p->x), o[0]);
    LLVMValueRef ratio = p->ratio ? cu_load_typed(c, p->rt, pslot(c, p->ratio), ci(c, 0)) : dc(c, 0.5);
    LLVMValueRef on = p->tm ? LLVMBuildICmp(b, LLVMIntNE, cu_load_typed(c, p->tt, pslot(c, p->tm), ci(c, 0)), LLVMConstInt(c->i64, 0, 0), "")
                            : LLVMConstInt(c->i1, 0, 0);
    on = LLVMBuildAnd(b, on, fcmp(c, LLVMRealOGT, ratio, dc(c, 0.0)), "");
    LLVMValueRef keep = LLVMBuildOr(b, LLVMBuildNot(b, on, ""), fcmp(c, LLVMRealOGE, uniform(c, p->seed, o[0]), ratio), "");
    LLVMValueRef y = sel(c, on, sel(c, keep, LLVMBuildFDiv(b, x, LLVMBuildFSub(b, dc(c, 1.0), ratio, ""), ""), dc(c, 0.0)), x);
    cu_store_typed(c, p->xt, pslot(c, p->y), o[0], y);
    if (p->mask) cu_store_typed(c, IR_DTYPE_BOOL, pslot(c, p->mask), o[0], LLVMBuildZExt(b, keep, c->i64, ""));
}

IrStatus cu_gen_dropout_train(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    DropCtx p = {.x = ir_node_operand(g, n, 0), .y = ir_node_result(g, n, 0)};
    p.ratio = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    p.tm = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    p.mask = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    if (p.ratio && lower_value_nbytes(g, p.ratio) == 0) p.ratio = 0;
    if (p.tm && lower_value_nbytes(g, p.tm) == 0) p.tm = 0;
    p.xt = lower_value_dtype(g, p.x);
    if (cu_kind(p.xt) != CU_KF || !cu_typed_ok(p.xt)) return cu_unsupported_dtype(c, p.xt);
    if (p.ratio && (p.rt = lower_value_dtype(g, p.ratio), cu_kind(p.rt) != CU_KF || !cu_typed_ok(p.rt))) return cu_unsupported_dtype(c, p.rt);
    if (p.tm && (p.tt = lower_value_dtype(g, p.tm), !cu_typed_ok(p.tt))) return cu_unsupported_dtype(c, p.tt);
    if (p.mask && lower_value_dtype(g, p.mask) != IR_DTYPE_BOOL) return cu_unsupported(c, "with a mask other than bool");
    bool found;
    double seed = ir_node_attr_float(g, n, "seed", &found);
    memcpy(&p.seed, &seed, sizeof p.seed);
    p.seed ^= (uint64_t)c->index * 0x9E3779B97F4A7C15ull;
    uint32_t r;
    int64_t d[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, p.x, &r, d);
    int64_t total = ir_shape_numel(r, d);
    if (!total) return IR_OK;
    uint32_t slots[5] = {p.y, p.x, p.ratio ? p.ratio : p.x, p.tm ? p.tm : p.x, p.mask ? p.mask : p.y};
    IrStatus st_ = cu_kbegin(c, slots, 5, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, drop_body, &p);
    return cu_kend(c, total, NULL);
}
