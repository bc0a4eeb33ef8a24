/* Elementwise kernels on every dtype the typed kit handles (typed.c): one thread per output
 * element with broadcast offsets, floats computed in double and integers in 64 bits with
 * wrap-around, exactly as validate/k_elementwise.c; Cast and CastLike convert between them.
 * The f32 single nodes and fused groups keep the vectorized f32 path of elementwise.c. Each
 * op's formulas are its row of backend/cuda/ew_ops.def.
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

/* The formulas that backend/cuda/ew_ops.def names. Floats: x (and y for binary ops) in double;
 * integers: in 64 bits with the values every integer formula may use made first (k), as one
 * place. Not every formula reads every parameter. */
typedef struct TyInt {
    bool uns;
    LLVMValueRef z, one;
    LLVMValueRef neg;     /* unary: x < 0 */
    LLVMValueRef y0, ovf; /* binary: y == 0, and x == INT64_MIN with y == -1 */
} TyInt;

#define TY_U __attribute__((unused))
#define TY_FLOAT(name) static LLVMValueRef name(Cu *c TY_U, const TyCtx *p TY_U, LLVMValueRef x TY_U, LLVMValueRef y TY_U)
#define TY_INT(name) \
    static LLVMValueRef name(Cu *c TY_U, const TyCtx *p TY_U, const TyInt *k TY_U, LLVMValueRef x TY_U, LLVMValueRef y TY_U)
#define TY_POINT(name) static LLVMValueRef name(Cu *c, TyCtx *p TY_U, LLVMValueRef *x)

/* ---- unary, floats ---- */
TY_FLOAT(f_abs) { return f64_intr(c, "llvm.fabs", x); }
TY_FLOAT(f_acos) { return cu_libm1(c, "__nv_acos", x); }
TY_FLOAT(f_acosh) { return cu_libm1(c, "__nv_acosh", x); }
TY_FLOAT(f_asin) { return cu_libm1(c, "__nv_asin", x); }
TY_FLOAT(f_asinh) { return cu_libm1(c, "__nv_asinh", x); }
TY_FLOAT(f_atan) { return cu_libm1(c, "__nv_atan", x); }
TY_FLOAT(f_atanh) { return cu_libm1(c, "__nv_atanh", x); }
TY_FLOAT(f_ceil) { return f64_intr(c, "llvm.ceil", x); }
TY_FLOAT(f_celu) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef zero = d(c, 0.0);
    LLVMValueRef t = LLVMBuildFMul(b, d(c, p->alpha), cu_libm1(c, "__nv_expm1", LLVMBuildFDiv(b, x, d(c, p->alpha), "")), "");
    return LLVMBuildFAdd(b, fmaxnum(c, zero, x), fminnum(c, zero, t), "");
}
TY_FLOAT(f_cos) { return cu_libm1(c, "__nv_cos", x); }
TY_FLOAT(f_cosh) { return cu_libm1(c, "__nv_cosh", x); }
TY_FLOAT(f_elu) {
    return sel(c, fcmp(c, LLVMRealOLT, x, d(c, 0.0)), LLVMBuildFMul(c->b, d(c, p->alpha), cu_libm1(c, "__nv_expm1", x), ""), x);
}
TY_FLOAT(f_erf) { return cu_libm1(c, "__nv_erf", x); }
TY_FLOAT(f_exp) { return cu_libm1(c, "__nv_exp", x); }
TY_FLOAT(f_floor) { return f64_intr(c, "llvm.floor", x); }
TY_FLOAT(f_gelu) {
    LLVMBuilderRef b = c->b;
    if (p->tanh_gelu) {
        LLVMValueRef t = LLVMBuildFAdd(b, x, LLVMBuildFMul(b, d(c, 0.044715), LLVMBuildFMul(b, x, LLVMBuildFMul(b, x, x, ""), ""), ""), "");
        t = cu_libm1(c, "__nv_tanh", LLVMBuildFMul(b, d(c, sqrt(2.0 / M_PI)), t, ""));
        return LLVMBuildFMul(b, LLVMBuildFMul(b, d(c, 0.5), x, ""), LLVMBuildFAdd(b, d(c, 1.0), t, ""), "");
    }
    return LLVMBuildFMul(b, LLVMBuildFMul(b, d(c, 0.5), x, ""),
                         cu_libm1(c, "__nv_erfc", LLVMBuildFDiv(b, LLVMBuildFNeg(b, x, ""), d(c, sqrt(2.0)), "")), "");
}
TY_FLOAT(f_hard_sigmoid) {
    LLVMBuilderRef b = c->b;
    return fmaxnum(c, d(c, 0.0), fminnum(c, d(c, 1.0), LLVMBuildFAdd(b, LLVMBuildFMul(b, d(c, p->alpha), x, ""), d(c, p->beta), "")));
}
TY_FLOAT(f_hard_swish) {
    LLVMBuilderRef b = c->b;
    return LLVMBuildFMul(b, x, fmaxnum(c, d(c, 0.0), fminnum(c, d(c, 1.0), LLVMBuildFAdd(b, LLVMBuildFDiv(b, x, d(c, 6.0), ""), d(c, 0.5), ""))), "");
}
TY_FLOAT(f_identity) { return x; }
TY_FLOAT(f_leaky_relu) { return sel(c, fcmp(c, LLVMRealOLT, x, d(c, 0.0)), LLVMBuildFMul(c->b, d(c, p->alpha), x, ""), x); }
TY_FLOAT(f_log) { return cu_libm1(c, "__nv_log", x); }
TY_FLOAT(f_mish) { return LLVMBuildFMul(c->b, x, cu_libm1(c, "__nv_tanh", softplus(c, x)), ""); }
TY_FLOAT(f_neg) { return LLVMBuildFNeg(c->b, x, ""); }
TY_FLOAT(f_reciprocal) { return LLVMBuildFDiv(c->b, d(c, 1.0), x, ""); }
TY_FLOAT(f_relu) { return sel(c, fcmp(c, LLVMRealOLT, x, d(c, 0.0)), d(c, 0.0), x); }
TY_FLOAT(f_round) { return cu_libm1(c, "__nv_rint", x); } /* half to even */
TY_FLOAT(f_selu) {
    LLVMBuilderRef b = c->b;
    return sel(c, fcmp(c, LLVMRealOGT, x, d(c, 0.0)), LLVMBuildFMul(b, d(c, p->gamma), x, ""),
               LLVMBuildFMul(b, d(c, p->gamma), LLVMBuildFSub(b, LLVMBuildFMul(b, d(c, p->alpha), cu_libm1(c, "__nv_exp", x), ""), d(c, p->alpha), ""), ""));
}
TY_FLOAT(f_shrink) {
    LLVMBuilderRef b = c->b;
    return sel(c, fcmp(c, LLVMRealOLT, x, d(c, -p->lambd)), LLVMBuildFAdd(b, x, d(c, p->bias), ""),
               sel(c, fcmp(c, LLVMRealOGT, x, d(c, p->lambd)), LLVMBuildFSub(b, x, d(c, p->bias), ""), d(c, 0.0)));
}
TY_FLOAT(f_sigmoid) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef one = d(c, 1.0);
    LLVMValueRef e = cu_libm1(c, "__nv_exp", LLVMBuildFNeg(b, f64_intr(c, "llvm.fabs", x), ""));
    LLVMValueRef pos = LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, e, ""), ""), neg = LLVMBuildFDiv(b, e, LLVMBuildFAdd(b, one, e, ""), "");
    return sel(c, fcmp(c, LLVMRealOGE, x, d(c, 0.0)), pos, neg);
}
TY_FLOAT(f_sign) {
    LLVMValueRef zero = d(c, 0.0);
    return sel(c, fcmp(c, LLVMRealOGT, x, zero), d(c, 1.0), sel(c, fcmp(c, LLVMRealOLT, x, zero), d(c, -1.0), x));
}
TY_FLOAT(f_sin) { return cu_libm1(c, "__nv_sin", x); }
TY_FLOAT(f_sinh) { return cu_libm1(c, "__nv_sinh", x); }
TY_FLOAT(f_softplus) { return softplus(c, x); }
TY_FLOAT(f_softsign) { return LLVMBuildFDiv(c->b, x, LLVMBuildFAdd(c->b, d(c, 1.0), f64_intr(c, "llvm.fabs", x), ""), ""); }
TY_FLOAT(f_sqrt) { return f64_intr(c, "llvm.sqrt", x); }
TY_FLOAT(f_tan) { return cu_libm1(c, "__nv_tan", x); }
TY_FLOAT(f_tanh) { return cu_libm1(c, "__nv_tanh", x); }
TY_FLOAT(f_thresholded_relu) { return sel(c, fcmp(c, LLVMRealOGT, x, d(c, p->alpha)), x, d(c, 0.0)); }

/* ---- unary, integers ---- */
TY_INT(i_abs) { return k->uns ? x : sel(c, k->neg, LLVMBuildSub(c->b, k->z, x, ""), x); }
TY_INT(i_neg) { return LLVMBuildSub(c->b, k->z, x, ""); }
TY_INT(i_sign) {
    if (k->uns) return b2i(c, LLVMBuildICmp(c->b, LLVMIntNE, x, k->z, ""));
    return LLVMBuildSub(c->b, b2i(c, LLVMBuildICmp(c->b, LLVMIntSGT, x, k->z, "")), b2i(c, k->neg), "");
}
TY_INT(i_relu) { return k->uns ? x : sel(c, k->neg, k->z, x); }
TY_INT(i_bitwise_not) { return LLVMBuildNot(c->b, x, ""); }
TY_INT(i_not) { return b2i(c, LLVMBuildICmp(c->b, LLVMIntEQ, x, k->z, "")); }
TY_INT(i_identity) { return x; }

/* ---- binary, floats ---- */
static LLVMValueRef max_f(Cu *c, LLVMValueRef x, LLVMValueRef y, bool max) {
    LLVMValueRef k = LLVMBuildOr(c->b, fcmp(c, LLVMRealUNO, x, x), fcmp(c, max ? LLVMRealOGE : LLVMRealOLE, x, y), "");
    return sel(c, k, x, y);
}
TY_FLOAT(f_add) { return LLVMBuildFAdd(c->b, x, y, ""); }
TY_FLOAT(f_sub) { return LLVMBuildFSub(c->b, x, y, ""); }
TY_FLOAT(f_mul) { return LLVMBuildFMul(c->b, x, y, ""); }
TY_FLOAT(f_div) { return LLVMBuildFDiv(c->b, x, y, ""); }
TY_FLOAT(f_pow) {
    LLVMValueRef a[2] = {x, y};
    return cu_libm(c, "__nv_pow", a, 2);
}
TY_FLOAT(f_mod) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef a[2] = {x, y};
    LLVMValueRef r = cu_libm(c, "__nv_fmod", a, 2);
    if (p->fmod_mode) return r;
    LLVMValueRef fix = LLVMBuildAnd(b, fcmp(c, LLVMRealONE, r, d(c, 0.0)),
                                    LLVMBuildXor(b, fcmp(c, LLVMRealOLT, r, d(c, 0.0)), fcmp(c, LLVMRealOLT, y, d(c, 0.0)), ""), "");
    return sel(c, fix, LLVMBuildFAdd(b, r, y, ""), r);
}
TY_FLOAT(f_prelu) { return sel(c, fcmp(c, LLVMRealOLT, x, d(c, 0.0)), LLVMBuildFMul(c->b, x, y, ""), x); }
TY_FLOAT(f_max) { return max_f(c, x, y, true); }
TY_FLOAT(f_min) { return max_f(c, x, y, false); }

/* ---- binary, integers ---- */
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
TY_INT(i_add) { return LLVMBuildAdd(c->b, x, y, ""); }
TY_INT(i_sub) { return LLVMBuildSub(c->b, x, y, ""); }
TY_INT(i_mul) { return LLVMBuildMul(c->b, x, y, ""); }
TY_INT(i_div) { /* a zero divisor gives 0 (the interpreter refuses it) */
    LLVMBuilderRef b = c->b;
    if (k->uns) return sel(c, k->y0, k->z, LLVMBuildUDiv(b, x, sel(c, k->y0, k->one, y), ""));
    LLVMValueRef ys = sel(c, LLVMBuildOr(b, k->y0, k->ovf, ""), k->one, y);
    return sel(c, k->y0, k->z, LLVMBuildSDiv(b, x, ys, ""));
}
TY_INT(i_mod) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef z = k->z, y0 = k->y0;
    if (k->uns) return sel(c, y0, z, LLVMBuildURem(b, x, sel(c, y0, k->one, y), ""));
    LLVMValueRef m1 = LLVMBuildICmp(b, LLVMIntEQ, y, i64c(c, -1), "");
    LLVMValueRef r = LLVMBuildSRem(b, x, sel(c, LLVMBuildOr(b, y0, m1, ""), k->one, y), "");
    if (!p->fmod_mode) {
        LLVMValueRef fix = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, r, z, ""),
                                        LLVMBuildXor(b, LLVMBuildICmp(b, LLVMIntSLT, r, z, ""), LLVMBuildICmp(b, LLVMIntSLT, y, z, ""), ""), "");
        r = sel(c, fix, LLVMBuildAdd(b, r, y, ""), r);
    }
    return sel(c, LLVMBuildOr(b, y0, m1, ""), z, r);
}
TY_INT(i_pow) { return ipow(c, x, y); }
TY_INT(i_prelu) { return k->uns ? x : sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, x, k->z, ""), LLVMBuildMul(c->b, x, y, ""), x); }
TY_INT(i_max) { return sel(c, LLVMBuildICmp(c->b, k->uns ? LLVMIntUGE : LLVMIntSGE, x, y, ""), x, y); }
TY_INT(i_min) { return sel(c, LLVMBuildICmp(c->b, k->uns ? LLVMIntULE : LLVMIntSLE, x, y, ""), x, y); }
TY_INT(i_bit_shift) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef big = LLVMBuildICmp(b, LLVMIntUGE, y, i64c(c, 64), "");
    LLVMValueRef ys = sel(c, big, k->z, y);
    return sel(c, big, k->z, p->left ? LLVMBuildShl(b, x, ys, "") : LLVMBuildLShr(b, x, ys, ""));
}
TY_INT(i_bitwise_and) { return LLVMBuildAnd(c->b, x, y, ""); }
TY_INT(i_bitwise_or) { return LLVMBuildOr(c->b, x, y, ""); }
TY_INT(i_bitwise_xor) { return LLVMBuildXor(c->b, x, y, ""); }

typedef struct TyRow {
    LLVMValueRef (*fl)(Cu *, const TyCtx *, LLVMValueRef, LLVMValueRef);
    LLVMValueRef (*in)(Cu *, const TyCtx *, const TyInt *, LLVMValueRef, LLVMValueRef);
    LLVMValueRef (*point)(Cu *, TyCtx *, LLVMValueRef *);
} TyRow;
static const TyRow ty_rows[IR_OP_COUNT];

/* The op's float formula; NULL when it has none. */
static LLVMValueRef ty_float(Cu *c, const TyCtx *p, LLVMValueRef x, LLVMValueRef y) {
    return ty_rows[p->op].fl ? ty_rows[p->op].fl(c, p, x, y) : NULL;
}

/* The op's integer formula (y unused when not binary), after the values every integer formula may use;
 * NULL when it has none. */
static LLVMValueRef ty_int(Cu *c, const TyCtx *p, LLVMValueRef x, LLVMValueRef y, bool binary) {
    LLVMBuilderRef b = c->b;
    TyInt k = {.uns = p->k == CU_KU, .z = i64c(c, 0), .one = i64c(c, 1)};
    if (!binary) {
        k.neg = LLVMBuildICmp(b, LLVMIntSLT, x, k.z, "");
    } else {
        k.y0 = LLVMBuildICmp(b, LLVMIntEQ, y, k.z, "");
        k.ovf = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, x, i64c(c, INT64_MIN), ""), LLVMBuildICmp(b, LLVMIntEQ, y, i64c(c, -1), ""), "");
    }
    return ty_rows[p->op].in ? ty_rows[p->op].in(c, p, &k, x, y) : NULL;
}

/* ---- whole points: ops whose operands differ in dtype, that compare, or that fold many ---- */
TY_POINT(pt_cast) { return cu_convert(c, x[0], p->dt[0], p->odt); }
TY_POINT(pt_is_nan) { return b2i(c, fcmp(c, LLVMRealUNO, x[0], x[0])); }
TY_POINT(pt_is_inf) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef r = LLVMConstInt(c->i1, 0, 0);
    if (p->det_pos) r = LLVMBuildOr(b, r, fcmp(c, LLVMRealOEQ, x[0], d(c, INFINITY)), "");
    if (p->det_neg) r = LLVMBuildOr(b, r, fcmp(c, LLVMRealOEQ, x[0], d(c, -INFINITY)), "");
    return b2i(c, r);
}
/* x[0] against x[1]: fp on floats, sp on signed and up on unsigned integers */
static LLVMValueRef compare(Cu *c, const TyCtx *p, LLVMValueRef *x, LLVMRealPredicate fp, LLVMIntPredicate sp, LLVMIntPredicate up) {
    if (p->k == CU_KF) return b2i(c, fcmp(c, fp, x[0], x[1]));
    return b2i(c, LLVMBuildICmp(c->b, p->k == CU_KU ? up : sp, x[0], x[1], ""));
}
TY_POINT(pt_equal) { return compare(c, p, x, LLVMRealOEQ, LLVMIntEQ, LLVMIntEQ); }
TY_POINT(pt_greater) { return compare(c, p, x, LLVMRealOGT, LLVMIntSGT, LLVMIntUGT); }
TY_POINT(pt_greater_or_equal) { return compare(c, p, x, LLVMRealOGE, LLVMIntSGE, LLVMIntUGE); }
TY_POINT(pt_less) { return compare(c, p, x, LLVMRealOLT, LLVMIntSLT, LLVMIntULT); }
TY_POINT(pt_less_or_equal) { return compare(c, p, x, LLVMRealOLE, LLVMIntSLE, LLVMIntULE); }
/* And, Or, Xor: each operand != 0 first */
static LLVMValueRef logic(Cu *c, LLVMValueRef *x, LLVMValueRef (*op)(LLVMBuilderRef, LLVMValueRef, LLVMValueRef, const char *)) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef z = i64c(c, 0);
    LLVMValueRef a = LLVMBuildICmp(b, LLVMIntNE, x[0], z, ""), q = LLVMBuildICmp(b, LLVMIntNE, x[1], z, "");
    return b2i(c, op(b, a, q, ""));
}
TY_POINT(pt_and) { return logic(c, x, LLVMBuildAnd); }
TY_POINT(pt_or) { return logic(c, x, LLVMBuildOr); }
TY_POINT(pt_xor) { return logic(c, x, LLVMBuildXor); }
TY_POINT(pt_where) { return sel(c, LLVMBuildICmp(c->b, LLVMIntNE, x[0], i64c(c, 0), ""), x[1], x[2]); }
TY_POINT(pt_clip) {
    bool f = p->k == CU_KF;
    LLVMValueRef v = x[0];
    for (uint32_t i = 1; i < 3; i++) {
        if (i >= p->n_in || !x[i]) continue;
        bool lo = i == 1;
        LLVMValueRef k = f ? fcmp(c, lo ? LLVMRealOLT : LLVMRealOGT, v, x[i])
                           : LLVMBuildICmp(c->b, lo ? (p->k == CU_KU ? LLVMIntULT : LLVMIntSLT) : (p->k == CU_KU ? LLVMIntUGT : LLVMIntSGT), v, x[i], "");
        v = sel(c, k, x[i], v);
    }
    return v;
}
/* Max, Min, Sum: the operands folded left by the binary formula */
TY_POINT(pt_fold) {
    bool f = p->k == CU_KF;
    LLVMValueRef acc = x[0];
    for (uint32_t i = 1; i < p->n_in; i++) acc = f ? ty_float(c, p, acc, x[i]) : ty_int(c, p, acc, x[i], true);
    return acc;
}
TY_POINT(pt_mean) {
    LLVMValueRef acc = pt_fold(c, p, x);
    return p->k == CU_KF ? LLVMBuildFDiv(c->b, acc, d(c, (double)p->n_in), "") : NULL;
}
TY_POINT(pt_pow) {
    if (p->k == CU_KF) return ty_float(c, p, x[0], cu_convert(c, x[1], p->dt[1], IR_DTYPE_F64));
    if (cu_kind(p->dt[1]) == CU_KF) /* int ** float: in double, stored back as an integer */
        return cu_convert(c, ty_float(c, p, cu_convert(c, x[0], p->dt[0], IR_DTYPE_F64), x[1]), IR_DTYPE_F64, p->odt);
    return ty_int(c, p, x[0], x[1], true);
}
/* Shrink on integers goes through double, as the interpreter */
TY_POINT(pt_shrink) {
    if (p->k == CU_KF) return f_shrink(c, p, x[0], NULL);
    return cu_convert(c, f_shrink(c, p, cu_convert(c, x[0], p->dt[0], IR_DTYPE_F64), NULL), IR_DTYPE_F64, p->odt);
}

#define NONE NULL
static const TyRow ty_rows[IR_OP_COUNT] = {
#define CU_EW(ID, fl, in, point) [IR_OP_##ID] = {fl, in, point},
#include "backend/cuda/ew_ops.def"
#undef CU_EW
};
#undef NONE

/* The value of output element from operand values x[] (each in its own dtype's domain); NULL
 * when the op has no form for these dtypes. */
static LLVMValueRef ty_value(Cu *c, TyCtx *p, LLVMValueRef *x) {
    if (ty_rows[p->op].point) return ty_rows[p->op].point(c, p, x);
    bool f = p->k == CU_KF;
    if (p->n_in == 2) return f ? ty_float(c, p, x[0], x[1]) : ty_int(c, p, x[0], x[1], true);
    if (p->n_in != 1) return NULL;
    return f ? ty_float(c, p, x[0], NULL) : ty_int(c, p, x[0], NULL, false);
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
