/* Elementwise kernels on every dtype the typed kit handles (typed.c): one thread per output
 * element with broadcast offsets, floats computed in double and integers in 64 bits with
 * wrap-around, exactly as validate/k_elementwise.c; Cast and CastLike convert between them.
 * The f32 single nodes and fused groups keep the vectorized f32 path of elementwise.c.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct TyCtx {
    IrOp op;
    uint32_t n_in;
    IrValueId in[CU_MAX_ARGS], out;
    IrDType dt[CU_MAX_ARGS], odt;
    CuKind k; /* the kind the op computes in: operand 0's (Where: operand 1's) */
    double alpha, beta, gamma, lambd, bias;
    bool fmod_mode, left, tanh_gelu, det_neg, det_pos;
} TyCtx;

static LLVMValueRef d(Cu *c, double v) { return LLVMConstReal(c->f64, v); }
static LLVMValueRef i64c(Cu *c, int64_t v) { return LLVMConstInt(c->i64, (unsigned long long)v, 1); }
static LLVMValueRef f64_intr(Cu *c, const char *name, LLVMValueRef x) { return cu_intr(c, name, &c->f64, 1, &x, 1); }
static LLVMValueRef b2i(Cu *c, LLVMValueRef k) { return LLVMBuildZExt(c->b, k, c->i64, ""); }

static LLVMValueRef fmaxnum(Cu *c, LLVMValueRef a, LLVMValueRef b) {
    LLVMValueRef args[2] = {a, b};
    return cu_intr(c, "llvm.maxnum", &c->f64, 1, args, 2);
}
static LLVMValueRef fminnum(Cu *c, LLVMValueRef a, LLVMValueRef b) {
    LLVMValueRef args[2] = {a, b};
    return cu_intr(c, "llvm.minnum", &c->f64, 1, args, 2);
}

/* log1p(exp(x)) without overflow, as the interpreter's softplus */
static LLVMValueRef softplus(Cu *c, LLVMValueRef x) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef pos = LLVMBuildFAdd(b, x, cu_libm1(c, "__nv_log1p", cu_libm1(c, "__nv_exp", LLVMBuildFNeg(b, x, ""))), "");
    LLVMValueRef neg = cu_libm1(c, "__nv_log1p", cu_libm1(c, "__nv_exp", x));
    return sel(c, fcmp(c, LLVMRealOGT, x, d(c, 0.0)), pos, neg);
}

static LLVMValueRef unary_f(Cu *c, const TyCtx *p, LLVMValueRef x) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef zero = d(c, 0.0), one = d(c, 1.0);
    switch (p->op) {
    case IR_OP_ABS: return f64_intr(c, "llvm.fabs", x);
    case IR_OP_ACOS: return cu_libm1(c, "__nv_acos", x);
    case IR_OP_ACOSH: return cu_libm1(c, "__nv_acosh", x);
    case IR_OP_ASIN: return cu_libm1(c, "__nv_asin", x);
    case IR_OP_ASINH: return cu_libm1(c, "__nv_asinh", x);
    case IR_OP_ATAN: return cu_libm1(c, "__nv_atan", x);
    case IR_OP_ATANH: return cu_libm1(c, "__nv_atanh", x);
    case IR_OP_CEIL: return f64_intr(c, "llvm.ceil", x);
    case IR_OP_CELU: {
        LLVMValueRef t = LLVMBuildFMul(b, d(c, p->alpha), cu_libm1(c, "__nv_expm1", LLVMBuildFDiv(b, x, d(c, p->alpha), "")), "");
        return LLVMBuildFAdd(b, fmaxnum(c, zero, x), fminnum(c, zero, t), "");
    }
    case IR_OP_COS: return cu_libm1(c, "__nv_cos", x);
    case IR_OP_COSH: return cu_libm1(c, "__nv_cosh", x);
    case IR_OP_ELU:
        return sel(c, fcmp(c, LLVMRealOLT, x, zero), LLVMBuildFMul(b, d(c, p->alpha), cu_libm1(c, "__nv_expm1", x), ""), x);
    case IR_OP_ERF: return cu_libm1(c, "__nv_erf", x);
    case IR_OP_EXP: return cu_libm1(c, "__nv_exp", x);
    case IR_OP_FLOOR: return f64_intr(c, "llvm.floor", x);
    case IR_OP_GELU:
        if (p->tanh_gelu) {
            LLVMValueRef t = LLVMBuildFAdd(b, x, LLVMBuildFMul(b, d(c, 0.044715), LLVMBuildFMul(b, x, LLVMBuildFMul(b, x, x, ""), ""), ""), "");
            t = cu_libm1(c, "__nv_tanh", LLVMBuildFMul(b, d(c, sqrt(2.0 / M_PI)), t, ""));
            return LLVMBuildFMul(b, LLVMBuildFMul(b, d(c, 0.5), x, ""), LLVMBuildFAdd(b, one, t, ""), "");
        }
        return LLVMBuildFMul(b, LLVMBuildFMul(b, d(c, 0.5), x, ""),
                             cu_libm1(c, "__nv_erfc", LLVMBuildFDiv(b, LLVMBuildFNeg(b, x, ""), d(c, sqrt(2.0)), "")), "");
    case IR_OP_HARD_SIGMOID:
        return fmaxnum(c, zero, fminnum(c, one, LLVMBuildFAdd(b, LLVMBuildFMul(b, d(c, p->alpha), x, ""), d(c, p->beta), "")));
    case IR_OP_HARD_SWISH:
        return LLVMBuildFMul(b, x, fmaxnum(c, zero, fminnum(c, one, LLVMBuildFAdd(b, LLVMBuildFDiv(b, x, d(c, 6.0), ""), d(c, 0.5), ""))), "");
    case IR_OP_IDENTITY: return x;
    case IR_OP_LEAKY_RELU: return sel(c, fcmp(c, LLVMRealOLT, x, zero), LLVMBuildFMul(b, d(c, p->alpha), x, ""), x);
    case IR_OP_LOG: return cu_libm1(c, "__nv_log", x);
    case IR_OP_MISH: return LLVMBuildFMul(b, x, cu_libm1(c, "__nv_tanh", softplus(c, x)), "");
    case IR_OP_NEG: return LLVMBuildFNeg(b, x, "");
    case IR_OP_RECIPROCAL: return LLVMBuildFDiv(b, one, x, "");
    case IR_OP_RELU: return sel(c, fcmp(c, LLVMRealOLT, x, zero), zero, x);
    case IR_OP_ROUND: return cu_libm1(c, "__nv_rint", x); /* half to even */
    case IR_OP_SELU:
        return sel(c, fcmp(c, LLVMRealOGT, x, zero), LLVMBuildFMul(b, d(c, p->gamma), x, ""),
                   LLVMBuildFMul(b, d(c, p->gamma), LLVMBuildFSub(b, LLVMBuildFMul(b, d(c, p->alpha), cu_libm1(c, "__nv_exp", x), ""), d(c, p->alpha), ""), ""));
    case IR_OP_SHRINK:
        return sel(c, fcmp(c, LLVMRealOLT, x, d(c, -p->lambd)), LLVMBuildFAdd(b, x, d(c, p->bias), ""),
                   sel(c, fcmp(c, LLVMRealOGT, x, d(c, p->lambd)), LLVMBuildFSub(b, x, d(c, p->bias), ""), zero));
    case IR_OP_SIGMOID: {
        LLVMValueRef e = cu_libm1(c, "__nv_exp", LLVMBuildFNeg(b, f64_intr(c, "llvm.fabs", x), ""));
        LLVMValueRef pos = LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, e, ""), ""), neg = LLVMBuildFDiv(b, e, LLVMBuildFAdd(b, one, e, ""), "");
        return sel(c, fcmp(c, LLVMRealOGE, x, zero), pos, neg);
    }
    case IR_OP_SIGN:
        return sel(c, fcmp(c, LLVMRealOGT, x, zero), one, sel(c, fcmp(c, LLVMRealOLT, x, zero), d(c, -1.0), x));
    case IR_OP_SIN: return cu_libm1(c, "__nv_sin", x);
    case IR_OP_SINH: return cu_libm1(c, "__nv_sinh", x);
    case IR_OP_SOFTPLUS: return softplus(c, x);
    case IR_OP_SOFTSIGN: return LLVMBuildFDiv(b, x, LLVMBuildFAdd(b, one, f64_intr(c, "llvm.fabs", x), ""), "");
    case IR_OP_SQRT: return f64_intr(c, "llvm.sqrt", x);
    case IR_OP_TAN: return cu_libm1(c, "__nv_tan", x);
    case IR_OP_TANH: return cu_libm1(c, "__nv_tanh", x);
    case IR_OP_THRESHOLDED_RELU: return sel(c, fcmp(c, LLVMRealOGT, x, d(c, p->alpha)), x, zero);
    default: return NULL;
    }
}

static LLVMValueRef unary_i(Cu *c, const TyCtx *p, LLVMValueRef x) {
    LLVMBuilderRef b = c->b;
    bool uns = p->k == CU_KU;
    LLVMValueRef z = i64c(c, 0);
    LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, x, z, "");
    switch (p->op) {
    case IR_OP_ABS: return uns ? x : sel(c, neg, LLVMBuildSub(b, z, x, ""), x);
    case IR_OP_NEG: return LLVMBuildSub(b, z, x, "");
    case IR_OP_SIGN:
        if (uns) return b2i(c, LLVMBuildICmp(b, LLVMIntNE, x, z, ""));
        return LLVMBuildSub(b, b2i(c, LLVMBuildICmp(b, LLVMIntSGT, x, z, "")), b2i(c, neg), "");
    case IR_OP_RELU: return uns ? x : sel(c, neg, z, x);
    case IR_OP_BITWISE_NOT: return LLVMBuildNot(b, x, "");
    case IR_OP_NOT: return b2i(c, LLVMBuildICmp(b, LLVMIntEQ, x, z, ""));
    case IR_OP_IDENTITY: return x;
    default: return NULL;
    }
}

static LLVMValueRef max_f(Cu *c, LLVMValueRef x, LLVMValueRef y, bool max) {
    LLVMValueRef k = LLVMBuildOr(c->b, fcmp(c, LLVMRealUNO, x, x), fcmp(c, max ? LLVMRealOGE : LLVMRealOLE, x, y), "");
    return sel(c, k, x, y);
}

static LLVMValueRef binary_f(Cu *c, const TyCtx *p, IrOp op, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = c->b;
    switch (op) {
    case IR_OP_ADD: case IR_OP_SUM: case IR_OP_MEAN: return LLVMBuildFAdd(b, x, y, "");
    case IR_OP_SUB: return LLVMBuildFSub(b, x, y, "");
    case IR_OP_MUL: return LLVMBuildFMul(b, x, y, "");
    case IR_OP_DIV: return LLVMBuildFDiv(b, x, y, "");
    case IR_OP_POW: {
        LLVMValueRef a[2] = {x, y};
        return cu_libm(c, "__nv_pow", a, 2);
    }
    case IR_OP_MOD: {
        LLVMValueRef a[2] = {x, y};
        LLVMValueRef r = cu_libm(c, "__nv_fmod", a, 2);
        if (p->fmod_mode) return r;
        LLVMValueRef fix = LLVMBuildAnd(b, fcmp(c, LLVMRealONE, r, d(c, 0.0)),
                                        LLVMBuildXor(b, fcmp(c, LLVMRealOLT, r, d(c, 0.0)), fcmp(c, LLVMRealOLT, y, d(c, 0.0)), ""), "");
        return sel(c, fix, LLVMBuildFAdd(b, r, y, ""), r);
    }
    case IR_OP_PRELU: return sel(c, fcmp(c, LLVMRealOLT, x, d(c, 0.0)), LLVMBuildFMul(b, x, y, ""), x);
    case IR_OP_MAX: return max_f(c, x, y, true);
    case IR_OP_MIN: return max_f(c, x, y, false);
    default: return NULL;
    }
}

/* x ** y for integers by squaring (64 steps, wrap-around); y < 0 as the interpreter's ipow */
static LLVMValueRef ipow(Cu *c, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef r = i64c(c, 1), base = x, e = y;
    for (int i = 0; i < 64; i++) {
        LLVMValueRef bit = LLVMBuildTrunc(b, e, c->i1, "");
        r = sel(c, bit, LLVMBuildMul(b, r, base, ""), r);
        base = LLVMBuildMul(b, base, base, "");
        e = LLVMBuildLShr(b, e, i64c(c, 1), "");
    }
    LLVMValueRef odd = LLVMBuildTrunc(b, y, c->i1, "");
    LLVMValueRef negr = sel(c, LLVMBuildICmp(b, LLVMIntEQ, x, i64c(c, 1), ""), i64c(c, 1),
                            sel(c, LLVMBuildICmp(b, LLVMIntEQ, x, i64c(c, -1), ""), sel(c, odd, i64c(c, -1), i64c(c, 1)), i64c(c, 0)));
    return sel(c, LLVMBuildICmp(b, LLVMIntSLT, y, i64c(c, 0), ""), negr, r);
}

static LLVMValueRef binary_i(Cu *c, const TyCtx *p, IrOp op, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = c->b;
    bool uns = p->k == CU_KU;
    LLVMValueRef z = i64c(c, 0), one = i64c(c, 1);
    LLVMValueRef y0 = LLVMBuildICmp(b, LLVMIntEQ, y, z, "");
    LLVMValueRef ovf = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, x, i64c(c, INT64_MIN), ""),
                                    LLVMBuildICmp(b, LLVMIntEQ, y, i64c(c, -1), ""), "");
    switch (op) {
    case IR_OP_ADD: case IR_OP_SUM: return LLVMBuildAdd(b, x, y, "");
    case IR_OP_SUB: return LLVMBuildSub(b, x, y, "");
    case IR_OP_MUL: return LLVMBuildMul(b, x, y, "");
    case IR_OP_DIV: { /* a zero divisor gives 0 (the interpreter refuses it) */
        if (uns) return sel(c, y0, z, LLVMBuildUDiv(b, x, sel(c, y0, one, y), ""));
        LLVMValueRef ys = sel(c, LLVMBuildOr(b, y0, ovf, ""), one, y);
        return sel(c, y0, z, LLVMBuildSDiv(b, x, ys, ""));
    }
    case IR_OP_MOD: {
        if (uns) return sel(c, y0, z, LLVMBuildURem(b, x, sel(c, y0, one, y), ""));
        LLVMValueRef m1 = LLVMBuildICmp(b, LLVMIntEQ, y, i64c(c, -1), "");
        LLVMValueRef r = LLVMBuildSRem(b, x, sel(c, LLVMBuildOr(b, y0, m1, ""), one, y), "");
        if (!p->fmod_mode) {
            LLVMValueRef fix = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, r, z, ""),
                                            LLVMBuildXor(b, LLVMBuildICmp(b, LLVMIntSLT, r, z, ""), LLVMBuildICmp(b, LLVMIntSLT, y, z, ""), ""), "");
            r = sel(c, fix, LLVMBuildAdd(b, r, y, ""), r);
        }
        return sel(c, LLVMBuildOr(b, y0, m1, ""), z, r);
    }
    case IR_OP_POW: return ipow(c, x, y);
    case IR_OP_PRELU: return uns ? x : sel(c, LLVMBuildICmp(b, LLVMIntSLT, x, z, ""), LLVMBuildMul(b, x, y, ""), x);
    case IR_OP_MAX: return sel(c, LLVMBuildICmp(b, uns ? LLVMIntUGE : LLVMIntSGE, x, y, ""), x, y);
    case IR_OP_MIN: return sel(c, LLVMBuildICmp(b, uns ? LLVMIntULE : LLVMIntSLE, x, y, ""), x, y);
    case IR_OP_BIT_SHIFT: {
        LLVMValueRef big = LLVMBuildICmp(b, LLVMIntUGE, y, i64c(c, 64), "");
        LLVMValueRef ys = sel(c, big, z, y);
        return sel(c, big, z, p->left ? LLVMBuildShl(b, x, ys, "") : LLVMBuildLShr(b, x, ys, ""));
    }
    case IR_OP_BITWISE_AND: return LLVMBuildAnd(b, x, y, "");
    case IR_OP_BITWISE_OR: return LLVMBuildOr(b, x, y, "");
    case IR_OP_BITWISE_XOR: return LLVMBuildXor(b, x, y, "");
    default: return NULL;
    }
}

static LLVMValueRef compare(Cu *c, const TyCtx *p, LLVMValueRef x, LLVMValueRef y) {
    IrOp op = p->op;
    if (p->k == CU_KF) {
        LLVMRealPredicate pr = op == IR_OP_EQUAL ? LLVMRealOEQ : op == IR_OP_GREATER ? LLVMRealOGT
                               : op == IR_OP_GREATER_OR_EQUAL ? LLVMRealOGE : op == IR_OP_LESS ? LLVMRealOLT : LLVMRealOLE;
        return b2i(c, fcmp(c, pr, x, y));
    }
    bool u = p->k == CU_KU;
    LLVMIntPredicate pr = op == IR_OP_EQUAL ? LLVMIntEQ : op == IR_OP_GREATER ? (u ? LLVMIntUGT : LLVMIntSGT)
                          : op == IR_OP_GREATER_OR_EQUAL ? (u ? LLVMIntUGE : LLVMIntSGE)
                          : op == IR_OP_LESS ? (u ? LLVMIntULT : LLVMIntSLT) : (u ? LLVMIntULE : LLVMIntSLE);
    return b2i(c, LLVMBuildICmp(c->b, pr, x, y, ""));
}

/* The value of output element from operand values x[] (each in its own dtype's domain); NULL
 * when the op has no form for these dtypes. */
static LLVMValueRef ty_value(Cu *c, TyCtx *p, LLVMValueRef *x) {
    LLVMBuilderRef b = c->b;
    IrOp op = p->op;
    bool f = p->k == CU_KF;
    switch (op) {
    case IR_OP_CAST: case IR_OP_CAST_LIKE: return cu_convert(c, x[0], p->dt[0], p->odt);
    case IR_OP_IS_NAN: return b2i(c, fcmp(c, LLVMRealUNO, x[0], x[0]));
    case IR_OP_IS_INF: {
        LLVMValueRef r = LLVMConstInt(c->i1, 0, 0);
        if (p->det_pos) r = LLVMBuildOr(b, r, fcmp(c, LLVMRealOEQ, x[0], d(c, INFINITY)), "");
        if (p->det_neg) r = LLVMBuildOr(b, r, fcmp(c, LLVMRealOEQ, x[0], d(c, -INFINITY)), "");
        return b2i(c, r);
    }
    case IR_OP_EQUAL: case IR_OP_GREATER: case IR_OP_GREATER_OR_EQUAL: case IR_OP_LESS: case IR_OP_LESS_OR_EQUAL:
        return compare(c, p, x[0], x[1]);
    case IR_OP_AND: case IR_OP_OR: case IR_OP_XOR: {
        LLVMValueRef z = i64c(c, 0);
        LLVMValueRef a = LLVMBuildICmp(b, LLVMIntNE, x[0], z, ""), q = LLVMBuildICmp(b, LLVMIntNE, x[1], z, "");
        return b2i(c, op == IR_OP_AND ? LLVMBuildAnd(b, a, q, "") : op == IR_OP_OR ? LLVMBuildOr(b, a, q, "") : LLVMBuildXor(b, a, q, ""));
    }
    case IR_OP_WHERE: return sel(c, LLVMBuildICmp(b, LLVMIntNE, x[0], i64c(c, 0), ""), x[1], x[2]);
    case IR_OP_CLIP: {
        LLVMValueRef v = x[0];
        for (uint32_t i = 1; i < 3; i++) {
            if (i >= p->n_in || !x[i]) continue;
            bool lo = i == 1;
            LLVMValueRef k = f ? fcmp(c, lo ? LLVMRealOLT : LLVMRealOGT, v, x[i])
                               : LLVMBuildICmp(b, lo ? (p->k == CU_KU ? LLVMIntULT : LLVMIntSLT) : (p->k == CU_KU ? LLVMIntUGT : LLVMIntSGT), v, x[i], "");
            v = sel(c, k, x[i], v);
        }
        return v;
    }
    case IR_OP_MAX: case IR_OP_MIN: case IR_OP_SUM: case IR_OP_MEAN: {
        LLVMValueRef acc = x[0];
        for (uint32_t i = 1; i < p->n_in; i++) acc = f ? binary_f(c, p, op, acc, x[i]) : binary_i(c, p, op, acc, x[i]);
        if (op == IR_OP_MEAN) acc = f ? LLVMBuildFDiv(b, acc, d(c, (double)p->n_in), "") : NULL;
        return acc;
    }
    case IR_OP_POW:
        if (f) return binary_f(c, p, op, x[0], cu_convert(c, x[1], p->dt[1], IR_DTYPE_F64));
        if (cu_kind(p->dt[1]) == CU_KF) /* int ** float: in double, stored back as an integer */
            return cu_convert(c, binary_f(c, p, op, cu_convert(c, x[0], p->dt[0], IR_DTYPE_F64), x[1]), IR_DTYPE_F64, p->odt);
        return binary_i(c, p, op, x[0], x[1]);
    default: break;
    }
    if (p->n_in == 2) return f ? binary_f(c, p, op, x[0], x[1]) : binary_i(c, p, op, x[0], x[1]);
    if (p->n_in != 1) return NULL;
    if (f) return unary_f(c, p, x[0]);
    if (op == IR_OP_SHRINK) /* integers through double, as the interpreter */
        return cu_convert(c, unary_f(c, p, cu_convert(c, x[0], p->dt[0], IR_DTYPE_F64)), IR_DTYPE_F64, p->odt);
    return unary_i(c, p, x[0]);
}

static void ty_body(Cu *c, LLVMValueRef *o, void *user) {
    TyCtx *p = user;
    LLVMValueRef x[CU_MAX_ARGS];
    for (uint32_t i = 0; i < p->n_in; i++)
        x[i] = p->in[i] ? cu_load_typed(c, p->dt[i], pslot(c, p->in[i]), o[1 + i]) : NULL;
    cu_store_typed(c, p->odt, pslot(c, p->out), o[0], ty_value(c, p, x)); /* ty_supported said it has a form */
}

/* Whether ty_value has a form for these dtypes: tried in a scratch function, then deleted. */
static bool ty_supported(Cu *c, TyCtx *p) {
    LLVMValueRef saved = c->fn;
    c->fn = LLVMAddFunction(c->mod, "irt_probe", LLVMFunctionType(c->vd, NULL, 0, 0));
    LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, c->fn, "e"));
    LLVMValueRef x[CU_MAX_ARGS];
    for (uint32_t i = 0; i < p->n_in; i++) x[i] = p->in[i] ? LLVMGetUndef(cu_value_type(c, p->dt[i])) : NULL;
    bool ok = ty_value(c, p, x) != NULL;
    LLVMDeleteFunction(c->fn);
    c->fn = saved;
    return ok;
}

static double attr_f(const IrGraph *g, IrNodeId n, const char *name, double dflt) {
    bool found;
    double v = ir_node_attr_float(g, n, name, &found);
    return found ? v : dflt;
}

IrStatus cu_gen_ew_typed(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    TyCtx p = {.op = ir_node_op(g, n), .out = ir_node_result(g, n, 0)};
    p.n_in = ir_node_num_operands(g, n);
    if (p.n_in + 1 > CU_MAX_ARGS) return cu_unsupported(c, "with this many operands");
    if (p.op == IR_OP_CAST_LIKE) p.n_in = 1; /* the second operand gives only the dtype */
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) return cu_unsupported(c, "with more than one result");
    p.odt = lower_value_dtype(g, p.out);
    if (!cu_typed_ok(p.odt)) return cu_unsupported_dtype(c, p.odt);
    uint32_t orank, r;
    int64_t od[IR_MAX_RANK], dd[IR_MAX_RANK], s[CU_MAX_ARGS][IR_MAX_RANK];
    memset(s, 0, sizeof s);
    /* symbolic shapes: strides are values (cu_nest_v), the element count a formula */
    bool sym = !lower_value_shape(g, p.out, &orank, od);
    if (sym) orank = ir_type_rank(g, ir_value_type(g, p.out));
    else ir_shape_strides(orank, od, s[0]);
    for (uint32_t i = 0; i < p.n_in; i++) {
        p.in[i] = ir_node_operand(g, n, i);
        if (!p.in[i]) continue;
        bool st_in = lower_value_shape(g, p.in[i], &r, dd);
        sym |= !st_in;
        if (p.op == IR_OP_CLIP && i > 0 && st_in && ir_shape_numel(r, dd) == 0) { /* an empty bound: none */
            p.in[i] = 0;
            continue;
        }
        p.dt[i] = lower_value_dtype(g, p.in[i]);
        if (!cu_typed_ok(p.dt[i])) return cu_unsupported_dtype(c, p.dt[i]);
        if (!sym) ir_shape_broadcast_strides(r, dd, orank, NULL, s[1 + i]);
    }
    if (!p.in[0]) return cu_unsupported(c, "without its first operand");
    p.k = cu_kind(p.dt[p.op == IR_OP_WHERE ? 1 : 0]);
    p.alpha = attr_f(g, n, "alpha", 0.0);
    p.beta = attr_f(g, n, "beta", 0.0);
    p.gamma = attr_f(g, n, "gamma", 0.0);
    p.lambd = attr_f(g, n, "lambd", 0.0);
    p.bias = attr_f(g, n, "bias", 0.0);
    bool found;
    p.fmod_mode = ir_node_attr_int(g, n, "fmod", &found) != 0;
    const char *dir = ir_node_attr_string(g, n, "direction", &found);
    p.left = found && dir && strcmp(dir, "LEFT") == 0;
    const char *ap = ir_node_attr_string(g, n, "approximate", &found);
    p.tanh_gelu = found && ap && strcmp(ap, "tanh") == 0;
    p.det_neg = ir_node_attr_int(g, n, "detect_negative", &found) != 0 || !found;
    p.det_pos = ir_node_attr_int(g, n, "detect_positive", &found) != 0 || !found;
    if ((p.op == IR_OP_IS_INF || p.op == IR_OP_IS_NAN) && p.k != CU_KF) return cu_unsupported_dtype(c, p.dt[0]);
    if (!ty_supported(c, &p)) return cu_unsupported_dtype(c, p.dt[p.op == IR_OP_WHERE ? 1 : 0]);
    int64_t total = sym ? cu_fx_prod(c, p.out, 0, orank, 1) : ir_shape_numel(orank, od);
    if (!total) return IR_OK;
    uint32_t slots[CU_MAX_ARGS], ns = 0;
    slots[ns++] = p.out;
    for (uint32_t i = 0; i < p.n_in; i++) slots[ns++] = p.in[i] ? p.in[i] : p.out;
    IrStatus st_ = cu_kbegin(c, slots, ns, CU_BLOCK, false);
    if (st_) return st_;
    if (!sym) {
        cu_emit_nest(c, orank, od, ns, s, NULL, ty_body, &p);
        return cu_kend(c, total, NULL);
    }
    CuDims ov, xv;
    LLVMValueRef sv[CU_MAX_ARGS + 8][IR_MAX_RANK];
    if (!cu_dims_of(c, p.out, &ov)) return cu_unsupported(c, "with an unknown dim");
    cu_dims_strides(c, &ov, sv[0]);
    for (uint32_t i = 0; i < p.n_in; i++) {
        if (!p.in[i]) {
            memcpy(sv[1 + i], sv[0], sizeof sv[0]);
            continue;
        }
        if (!cu_dims_of(c, p.in[i], &xv) || xv.rank > ov.rank) return cu_unsupported(c, "with these operand shapes");
        cu_dims_bcast(c, &xv, &ov, sv[1 + i]);
    }
    cu_nest_v(c, &ov, ns, sv, ty_body, &p);
    return cu_kend(c, total, NULL);
}
