/* Typed elementwise kernels for the LLVM backend: every elementwise op of the op table the
 * interpreter computes (unary math, activations, arithmetic, comparisons, logic, bit ops, Where,
 * Clip, Cast/CastLike) on f64/f32/f16/bf16, signed and unsigned integers and bool. One loop
 * nest over the output with numpy-broadcast operand strides. Floats compute in f64 for f64 and
 * f32 otherwise (f16/bf16 stored in their dtype); integers wrap around like the interpreter;
 * integer division by zero gives 0 instead of trapping. f32-only nodes of the ops
 * cpu/codegen.c already handles stay there (they also fuse). Each op's formulas are its row
 * of backend/cpu/ew_ops.def.
 */
#include "backend/cpu/cpu.h"

typedef struct Ew {
    IrOp op;
    uint32_t n_in;
    IrDType out_dt, in_dt[LLVM_OPS_MAX_OPS];
    LLVMValueRef out_p, in_p[LLVM_OPS_MAX_OPS];
    double alpha, beta, gamma, lambd, bias;
    bool fmod_mode, left, tanh_approx, det_neg, det_pos, saturate;
} Ew;

static bool is_uns(IrDType dt) { return dt == IR_DTYPE_U8 || dt == IR_DTYPE_U16 || dt == IR_DTYPE_U32 || dt == IR_DTYPE_U64 || dt == IR_DTYPE_BOOL; }

static LLVMValueRef fconst(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }

/* Converts a compute value of dtype `from` to the compute type of `to` (Cast semantics:
 * floats to integers truncate toward zero and saturate, NaN -> 0; to bool is != 0). */
static LLVMValueRef convert(LlvmEmit *e, LLVMValueRef v, IrDType from, IrDType to) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef tt = lo_comp_t(e, to), ft = lo_comp_t(e, from);
    if (tt == ft && lo_is_float(from) == lo_is_float(to) && to != IR_DTYPE_BOOL && is_uns(from) == is_uns(to)) return v;
    if (to == IR_DTYPE_BOOL) {
        LLVMValueRef nz = lo_is_float(from) ? LLVMBuildFCmp(b, LLVMRealUNE, v, LLVMConstNull(ft), "")
                                            : LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstNull(ft), "");
        return LLVMBuildZExt(b, nz, tt, "");
    }
    if (lo_is_float(from) && lo_is_float(to)) {
        if (tt == ft) return v;
        return LLVMGetTypeKind(tt) == LLVMDoubleTypeKind ? LLVMBuildFPExt(b, v, tt, "") : LLVMBuildFPTrunc(b, v, tt, "");
    }
    if (lo_is_float(from)) {
        /* through i64 (u64 for u64) with saturation, then wrap to the width as C does */
        bool u = to == IR_DTYPE_U64;
        LLVMTypeRef i64 = lo_i64_t(e);
        /* the intrinsic is overloaded on result and operand types */
        unsigned id = LLVMLookupIntrinsicID(u ? "llvm.fptoui.sat" : "llvm.fptosi.sat", 15);
        LLVMTypeRef tys[2] = {i64, ft};
        LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->mod, id, tys, 2);
        LLVMTypeRef fty = LLVMIntrinsicGetType(e->ctx, id, tys, 2);
        LLVMValueRef w = LLVMBuildCall2(b, fty, f, &v, 1, "");
        return tt == i64 ? w : LLVMBuildTrunc(b, w, tt, "");
    }
    if (lo_is_float(to)) return is_uns(from) ? LLVMBuildUIToFP(b, v, tt, "") : LLVMBuildSIToFP(b, v, tt, "");
    unsigned fw = LLVMGetIntTypeWidth(ft), tw = LLVMGetIntTypeWidth(tt);
    if (fw == tw) return v;
    if (fw > tw) return LLVMBuildTrunc(b, v, tt, "");
    return is_uns(from) ? LLVMBuildZExt(b, v, tt, "") : LLVMBuildSExt(b, v, tt, "");
}

static LLVMValueRef math1(LlvmEmit *e, IrtMath code, LLVMValueRef x) {
    LLVMTypeRef t = LLVMTypeOf(x), f64 = lo_f64_t(e);
    LLVMValueRef d = LLVMGetTypeKind(t) == LLVMDoubleTypeKind ? x : LLVMBuildFPExt(e->b, x, f64, "");
    LLVMValueRef args[2] = {lo_i64(e, code), d};
    LLVMValueRef r = lo_call_runtime(e, IRT_FN_MATH1, f64, args, 2);
    return t == f64 ? r : LLVMBuildFPTrunc(e->b, r, t, "");
}

static LLVMValueRef fi(LlvmEmit *e, const char *name, LLVMValueRef x) {
    return lo_intrinsic(e, name, LLVMTypeOf(x), &x, 1);
}
static LLVMValueRef fi2(LlvmEmit *e, const char *name, LLVMValueRef x, LLVMValueRef y) {
    LLVMValueRef a[2] = {x, y};
    return lo_intrinsic(e, name, LLVMTypeOf(x), a, 2);
}

static LLVMValueRef fsel(LlvmEmit *e, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b, LLVMValueRef t, LLVMValueRef f) {
    return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, p, a, b, ""), t, f, "");
}
static LLVMValueRef isel(LlvmEmit *e, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b, LLVMValueRef t, LLVMValueRef f) {
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, p, a, b, ""), t, f, "");
}

/* tanh: f32 through the vectorizable approximation (llvm/emit.c), f64 through the runtime. */
static LLVMValueRef tanh_of(LlvmEmit *e, LLVMValueRef x) {
    return LLVMTypeOf(x) == lo_f32_t(e) ? llvm_tanh_f32(e->b, x) : math1(e, IRT_MATH_TANH, x);
}

static LLVMValueRef softplus(LlvmEmit *e, LLVMValueRef x) {
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef nx = LLVMBuildFNeg(e->b, x, "");
    LLVMValueRef pos = LLVMBuildFAdd(e->b, x, math1(e, IRT_MATH_LOG1P, fi(e, "llvm.exp", nx)), "");
    LLVMValueRef neg = math1(e, IRT_MATH_LOG1P, fi(e, "llvm.exp", x));
    return fsel(e, LLVMRealOGT, x, fconst(t, 0), pos, neg);
}

/* The scalar formulas that backend/cpu/ew_ops.def names: x (and y, for binary ops) are compute
 * values (f32 or f64 for floats, integers of the dtype's width with uns for unsigned and bool);
 * o gives the attributes. Not every formula reads every parameter. */
#define EW_U __attribute__((unused))
#define EW_FLOAT(name) static LLVMValueRef name(LlvmEmit *e EW_U, const Ew *o EW_U, LLVMValueRef x EW_U, LLVMValueRef y EW_U)
#define EW_INT(name) \
    static LLVMValueRef name(LlvmEmit *e EW_U, const Ew *o EW_U, LLVMValueRef x EW_U, LLVMValueRef y EW_U, bool uns EW_U)
#define EW_POINT(name) static LLVMValueRef name(LlvmEmit *e, const Ew *o EW_U, LLVMValueRef *x)
#define F_ZERO fconst(LLVMTypeOf(x), 0)
#define F_ONE fconst(LLVMTypeOf(x), 1)

/* ---- unary, floats ---- */
EW_FLOAT(f_abs) { return fi(e, "llvm.fabs", x); }
EW_FLOAT(f_neg) { return LLVMBuildFNeg(e->b, x, ""); }
EW_FLOAT(f_relu) { return fsel(e, LLVMRealOLT, x, F_ZERO, F_ZERO, x); }
EW_FLOAT(f_exp) { return LLVMTypeOf(x) == lo_f32_t(e) ? llvm_exp_f32(e->b, x) : fi(e, "llvm.exp", x); }
EW_FLOAT(f_log) { return fi(e, "llvm.log", x); }
EW_FLOAT(f_sqrt) { return fi(e, "llvm.sqrt", x); }
EW_FLOAT(f_floor) { return fi(e, "llvm.floor", x); }
EW_FLOAT(f_ceil) { return fi(e, "llvm.ceil", x); }
EW_FLOAT(f_round) { return fi(e, "llvm.roundeven", x); }
EW_FLOAT(f_sin) { return math1(e, IRT_MATH_SIN, x); }
EW_FLOAT(f_cos) { return math1(e, IRT_MATH_COS, x); }
EW_FLOAT(f_tan) { return math1(e, IRT_MATH_TAN, x); }
EW_FLOAT(f_asin) { return math1(e, IRT_MATH_ASIN, x); }
EW_FLOAT(f_acos) { return math1(e, IRT_MATH_ACOS, x); }
EW_FLOAT(f_atan) { return math1(e, IRT_MATH_ATAN, x); }
EW_FLOAT(f_sinh) { return math1(e, IRT_MATH_SINH, x); }
EW_FLOAT(f_cosh) { return math1(e, IRT_MATH_COSH, x); }
EW_FLOAT(f_asinh) { return math1(e, IRT_MATH_ASINH, x); }
EW_FLOAT(f_acosh) { return math1(e, IRT_MATH_ACOSH, x); }
EW_FLOAT(f_atanh) { return math1(e, IRT_MATH_ATANH, x); }
EW_FLOAT(f_tanh) { return tanh_of(e, x); }
EW_FLOAT(f_erf) { return LLVMTypeOf(x) == lo_f32_t(e) ? llvm_erf_f32(e->b, x) : math1(e, IRT_MATH_ERF, x); }
EW_FLOAT(f_reciprocal) { return LLVMBuildFDiv(e->b, F_ONE, x, ""); }
EW_FLOAT(f_identity) { return x; }
EW_FLOAT(f_sigmoid) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef one = F_ONE;
    LLVMValueRef en = fi(e, "llvm.exp", LLVMBuildFNeg(b, x, "")), ep = fi(e, "llvm.exp", x);
    LLVMValueRef pos = LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, en, ""), "");
    LLVMValueRef neg = LLVMBuildFDiv(b, ep, LLVMBuildFAdd(b, one, ep, ""), "");
    return fsel(e, LLVMRealOGE, x, F_ZERO, pos, neg);
}
EW_FLOAT(f_leaky_relu) {
    return fsel(e, LLVMRealOLT, x, F_ZERO, LLVMBuildFMul(e->b, x, fconst(LLVMTypeOf(x), o->alpha), ""), x);
}
EW_FLOAT(f_elu) {
    LLVMValueRef a = fconst(LLVMTypeOf(x), o->alpha);
    return fsel(e, LLVMRealOLT, x, F_ZERO, LLVMBuildFMul(e->b, a, math1(e, IRT_MATH_EXPM1, x), ""), x);
}
EW_FLOAT(f_celu) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef a = fconst(LLVMTypeOf(x), o->alpha), zero = F_ZERO;
    LLVMValueRef m = LLVMBuildFMul(b, a, math1(e, IRT_MATH_EXPM1, LLVMBuildFDiv(b, x, a, "")), "");
    return LLVMBuildFAdd(b, fi2(e, "llvm.maxnum", zero, x), fi2(e, "llvm.minnum", zero, m), "");
}
EW_FLOAT(f_selu) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef g = fconst(t, o->gamma), a = fconst(t, o->alpha);
    LLVMValueRef neg = LLVMBuildFMul(b, g, LLVMBuildFSub(b, LLVMBuildFMul(b, a, fi(e, "llvm.exp", x), ""), a, ""), "");
    return fsel(e, LLVMRealOGT, x, F_ZERO, LLVMBuildFMul(b, g, x, ""), neg);
}
EW_FLOAT(f_hard_sigmoid) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef v = LLVMBuildFAdd(b, LLVMBuildFMul(b, fconst(t, o->alpha), x, ""), fconst(t, o->beta), "");
    return fi2(e, "llvm.maxnum", F_ZERO, fi2(e, "llvm.minnum", F_ONE, v));
}
EW_FLOAT(f_hard_swish) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef v = LLVMBuildFAdd(b, LLVMBuildFDiv(b, x, fconst(t, 6), ""), fconst(t, 0.5), "");
    return LLVMBuildFMul(b, x, fi2(e, "llvm.maxnum", F_ZERO, fi2(e, "llvm.minnum", F_ONE, v)), "");
}
EW_FLOAT(f_softplus) { return softplus(e, x); }
EW_FLOAT(f_softsign) { return LLVMBuildFDiv(e->b, x, LLVMBuildFAdd(e->b, F_ONE, fi(e, "llvm.fabs", x), ""), ""); }
EW_FLOAT(f_mish) { return LLVMBuildFMul(e->b, x, math1(e, IRT_MATH_TANH, softplus(e, x)), ""); }
EW_FLOAT(f_gelu) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef one = F_ONE;
    LLVMValueRef half = fconst(t, 0.5), inner;
    if (o->tanh_approx) {
        LLVMValueRef x3 = LLVMBuildFMul(b, LLVMBuildFMul(b, x, x, ""), x, "");
        inner = LLVMBuildFAdd(b, x, LLVMBuildFMul(b, fconst(t, 0.044715), x3, ""), "");
        inner = tanh_of(e, LLVMBuildFMul(b, fconst(t, sqrt(2.0 / M_PI)), inner, ""));
    } else {
        inner = LLVMBuildFDiv(b, x, fconst(t, sqrt(2.0)), "");
        inner = t == lo_f32_t(e) ? llvm_erf_f32(b, inner) : math1(e, IRT_MATH_ERF, inner);
    }
    LLVMValueRef r = LLVMBuildFMul(b, LLVMBuildFMul(b, half, x, ""), LLVMBuildFAdd(b, one, inner, ""), "");
    if (o->tanh_approx || t != lo_f32_t(e)) return r;
    /* x <= -5: 1 + erf(x / sqrt 2) cancels to 0 in f32 (the interpreter's f64 keeps ~1e-7),
     * so x * Phi(x) from Phi's asymptotic series there, phi(x) / |x| * (1 - 1/x^2 + 3/x^4 -
     * 15/x^6 + 105/x^8), relative error below 1e-4 at -5: Gelu's tail stays negative as the
     * interpreter's (Less(Gelu(x), 0) differed), not -0 */
    LLVMValueRef x2 = LLVMBuildFMul(b, x, x, ""), rx2 = LLVMBuildFDiv(b, one, x2, "");
    LLVMValueRef ser = fconst(t, 105.0);
    static const double c[] = {-15.0, 3.0, -1.0, 1.0};
    for (int i = 0; i < 4; i++) ser = LLVMBuildFAdd(b, LLVMBuildFMul(b, ser, rx2, ""), fconst(t, c[i]), "");
    /* phi scaled by 2^40 so exp stays normal where the result is subnormal (down to -14.3) */
    LLVMValueRef e40 = llvm_exp_f32(b, LLVMBuildFAdd(b, LLVMBuildFMul(b, x2, fconst(t, -0.5), ""), fconst(t, 40.0 * M_LN2), ""));
    LLVMValueRef tail = LLVMBuildFMul(b, LLVMBuildFMul(b, e40, ser, ""), fconst(t, -ldexp(1.0, -40) / sqrt(2.0 * M_PI)), "");
    /* x * phi(x) / |x| = -phi(x) */
    return fsel(e, LLVMRealOLE, x, fconst(t, -5.0), tail, r);
}
EW_FLOAT(f_thresholded_relu) { return fsel(e, LLVMRealOGT, x, fconst(LLVMTypeOf(x), o->alpha), x, F_ZERO); }
EW_FLOAT(f_shrink) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef l = fconst(t, o->lambd), bi = fconst(t, o->bias);
    LLVMValueRef hi = fsel(e, LLVMRealOGT, x, l, LLVMBuildFSub(b, x, bi, ""), F_ZERO);
    return fsel(e, LLVMRealOLT, x, LLVMBuildFNeg(b, l, ""), LLVMBuildFAdd(b, x, bi, ""), hi);
}
EW_FLOAT(f_sign) {
    LLVMValueRef zero = F_ZERO;
    return fsel(e, LLVMRealOGT, x, zero, F_ONE, fsel(e, LLVMRealOLT, x, zero, fconst(LLVMTypeOf(x), -1), x));
}

/* ---- unary, integers ---- */
#define I_ZERO LLVMConstNull(LLVMTypeOf(x))
EW_INT(i_abs) { return uns ? x : isel(e, LLVMIntSLT, x, I_ZERO, LLVMBuildSub(e->b, I_ZERO, x, ""), x); }
EW_INT(i_neg) { return LLVMBuildSub(e->b, I_ZERO, x, ""); }
EW_INT(i_relu) { return uns ? x : isel(e, LLVMIntSLT, x, I_ZERO, I_ZERO, x); }
EW_INT(i_sign) {
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef zero = I_ZERO;
    if (uns) return LLVMBuildZExt(e->b, LLVMBuildICmp(e->b, LLVMIntNE, x, zero, ""), t, "");
    return isel(e, LLVMIntSGT, x, zero, LLVMConstInt(t, 1, 0), isel(e, LLVMIntSLT, x, zero, LLVMConstAllOnes(t), zero));
}
EW_INT(i_bitwise_not) { return LLVMBuildNot(e->b, x, ""); }
EW_INT(i_not) { return LLVMBuildZExt(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, x, I_ZERO, ""), LLVMTypeOf(x), ""); }
EW_INT(i_identity) { return x; }

/* ---- binary, floats ---- */
EW_FLOAT(f_add) { return LLVMBuildFAdd(e->b, x, y, ""); }
EW_FLOAT(f_sub) { return LLVMBuildFSub(e->b, x, y, ""); }
EW_FLOAT(f_mul) { return LLVMBuildFMul(e->b, x, y, ""); }
EW_FLOAT(f_div) { return LLVMBuildFDiv(e->b, x, y, ""); }
EW_FLOAT(f_pow) { return fi2(e, "llvm.pow", x, y); }
EW_FLOAT(f_mod) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef r = LLVMBuildFRem(b, x, y, "");
    if (o->fmod_mode) return r;
    LLVMValueRef zero = F_ZERO;
    LLVMValueRef fix = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealUNE, r, zero, ""),
                                    LLVMBuildXor(b, LLVMBuildFCmp(b, LLVMRealOLT, r, zero, ""),
                                                 LLVMBuildFCmp(b, LLVMRealOLT, y, zero, ""), ""), "");
    return LLVMBuildSelect(b, fix, LLVMBuildFAdd(b, r, y, ""), r, "");
}
EW_FLOAT(f_prelu) { return fsel(e, LLVMRealOLT, x, F_ZERO, LLVMBuildFMul(e->b, x, y, ""), x); }
/* Max and Min propagate a NaN of x */
static LLVMValueRef f_maxmin(LlvmEmit *e, LLVMValueRef x, LLVMValueRef y, LLVMRealPredicate keep_x) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef c = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), LLVMBuildFCmp(b, keep_x, x, y, ""), "");
    return LLVMBuildSelect(b, c, x, y, "");
}
EW_FLOAT(f_max) { return f_maxmin(e, x, y, LLVMRealOGE); }
EW_FLOAT(f_min) { return f_maxmin(e, x, y, LLVMRealOLE); }
EW_FLOAT(f_equal) { return LLVMBuildFCmp(e->b, LLVMRealOEQ, x, y, ""); }
EW_FLOAT(f_greater) { return LLVMBuildFCmp(e->b, LLVMRealOGT, x, y, ""); }
EW_FLOAT(f_greater_or_equal) { return LLVMBuildFCmp(e->b, LLVMRealOGE, x, y, ""); }
EW_FLOAT(f_less) { return LLVMBuildFCmp(e->b, LLVMRealOLT, x, y, ""); }
EW_FLOAT(f_less_or_equal) { return LLVMBuildFCmp(e->b, LLVMRealOLE, x, y, ""); }

/* ---- binary, integers ---- */
EW_INT(i_add) { return LLVMBuildAdd(e->b, x, y, ""); }
EW_INT(i_sub) { return LLVMBuildSub(e->b, x, y, ""); }
EW_INT(i_mul) { return LLVMBuildMul(e->b, x, y, ""); }
/* Div and Mod never trap: y == 0 gives 0, signed y == -1 is computed without dividing. */
static LLVMValueRef i_divmod(LlvmEmit *e, const Ew *o, LLVMValueRef x, LLVMValueRef y, bool uns, bool div) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef zero = LLVMConstNull(t), one = LLVMConstInt(t, 1, 0), m1 = LLVMConstAllOnes(t);
    LLVMValueRef y0 = LLVMBuildICmp(b, LLVMIntEQ, y, zero, "");
    LLVMValueRef ym1 = uns ? LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0) : LLVMBuildICmp(b, LLVMIntEQ, y, m1, "");
    LLVMValueRef safe = LLVMBuildSelect(b, LLVMBuildOr(b, y0, ym1, ""), one, y, "");
    LLVMValueRef r;
    if (div) {
        r = uns ? LLVMBuildUDiv(b, x, safe, "") : LLVMBuildSDiv(b, x, safe, "");
        r = LLVMBuildSelect(b, ym1, LLVMBuildSub(b, zero, x, ""), r, "");
    } else {
        r = uns ? LLVMBuildURem(b, x, safe, "") : LLVMBuildSRem(b, x, safe, "");
        if (!uns && !o->fmod_mode) {
            LLVMValueRef fix = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, r, zero, ""),
                                            LLVMBuildXor(b, LLVMBuildICmp(b, LLVMIntSLT, r, zero, ""),
                                                         LLVMBuildICmp(b, LLVMIntSLT, y, zero, ""), ""), "");
            r = LLVMBuildSelect(b, fix, LLVMBuildAdd(b, r, y, ""), r, "");
        }
        r = LLVMBuildSelect(b, ym1, zero, r, "");
    }
    return LLVMBuildSelect(b, y0, zero, r, "");
}
EW_INT(i_div) { return i_divmod(e, o, x, y, uns, true); }
EW_INT(i_mod) { return i_divmod(e, o, x, y, uns, false); }
EW_INT(i_prelu) { return uns ? x : isel(e, LLVMIntSLT, x, I_ZERO, LLVMBuildMul(e->b, x, y, ""), x); }
EW_INT(i_max) { return isel(e, uns ? LLVMIntUGE : LLVMIntSGE, x, y, x, y); }
EW_INT(i_min) { return isel(e, uns ? LLVMIntULE : LLVMIntSLE, x, y, x, y); }
EW_INT(i_bit_shift) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef zero = I_ZERO;
    LLVMValueRef w = LLVMConstInt(t, LLVMGetIntTypeWidth(t), 0);
    LLVMValueRef big = LLVMBuildICmp(b, LLVMIntUGE, y, w, "");
    LLVMValueRef sy = LLVMBuildSelect(b, big, zero, y, "");
    LLVMValueRef r = o->left ? LLVMBuildShl(b, x, sy, "") : LLVMBuildLShr(b, x, sy, "");
    return LLVMBuildSelect(b, big, zero, r, "");
}
EW_INT(i_bitwise_and) { return LLVMBuildAnd(e->b, x, y, ""); }
EW_INT(i_bitwise_or) { return LLVMBuildOr(e->b, x, y, ""); }
EW_INT(i_bitwise_xor) { return LLVMBuildXor(e->b, x, y, ""); }
/* And, Or, Xor on bools: each operand != 0 first */
#define I_TRUTH(v) LLVMBuildICmp(e->b, LLVMIntNE, v, I_ZERO, "")
EW_INT(i_and) {
    LLVMValueRef p = I_TRUTH(x), q = I_TRUTH(y);
    return LLVMBuildAnd(e->b, p, q, "");
}
EW_INT(i_or) {
    LLVMValueRef p = I_TRUTH(x), q = I_TRUTH(y);
    return LLVMBuildOr(e->b, p, q, "");
}
EW_INT(i_xor) {
    LLVMValueRef p = I_TRUTH(x), q = I_TRUTH(y);
    return LLVMBuildXor(e->b, p, q, "");
}
EW_INT(i_equal) { return LLVMBuildICmp(e->b, LLVMIntEQ, x, y, ""); }
EW_INT(i_greater) { return LLVMBuildICmp(e->b, uns ? LLVMIntUGT : LLVMIntSGT, x, y, ""); }
EW_INT(i_greater_or_equal) { return LLVMBuildICmp(e->b, uns ? LLVMIntUGE : LLVMIntSGE, x, y, ""); }
EW_INT(i_less) { return LLVMBuildICmp(e->b, uns ? LLVMIntULT : LLVMIntSLT, x, y, ""); }
EW_INT(i_less_or_equal) { return LLVMBuildICmp(e->b, uns ? LLVMIntULE : LLVMIntSLE, x, y, ""); }

/* ---- whole points: ops whose operands are not one dtype, or that fold many ---- */
EW_POINT(p_cast) { return convert(e, x[0], o->in_dt[0], o->out_dt); }
EW_POINT(p_where) {
    LLVMValueRef c = LLVMBuildICmp(e->b, LLVMIntNE, x[0], LLVMConstNull(LLVMTypeOf(x[0])), "");
    return LLVMBuildSelect(e->b, c, x[1], x[2], "");
}
EW_POINT(p_clip) {
    IrDType dt = o->in_dt[0];
    bool uns = is_uns(dt);
    LLVMValueRef v = x[0];
    if (lo_is_float(dt)) {
        if (x[1]) v = fsel(e, LLVMRealOLT, v, x[1], x[1], v);
        if (x[2]) v = fsel(e, LLVMRealOGT, v, x[2], x[2], v);
    } else {
        if (x[1]) v = isel(e, uns ? LLVMIntULT : LLVMIntSLT, v, x[1], x[1], v);
        if (x[2]) v = isel(e, uns ? LLVMIntUGT : LLVMIntSGT, v, x[2], x[2], v);
    }
    return v;
}
EW_POINT(p_is_nan) {
    return LLVMBuildFCmp(e->b, LLVMRealUNO, x[0], x[0], "");
}
EW_POINT(p_is_inf) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef t = LLVMTypeOf(x[0]);
    LLVMValueRef pinf = LLVMBuildFCmp(b, LLVMRealOEQ, x[0], fconst(t, INFINITY), "");
    LLVMValueRef ninf = LLVMBuildFCmp(b, LLVMRealOEQ, x[0], fconst(t, -INFINITY), "");
    LLVMValueRef r = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    if (o->det_pos) r = LLVMBuildOr(b, r, pinf, "");
    if (o->det_neg) r = LLVMBuildOr(b, r, ninf, "");
    return r;
}
EW_POINT(p_pow) {
    LLVMBuilderRef b = e->b;
    IrDType dt = o->in_dt[0];
    if (lo_is_float(dt)) return f_pow(e, o, x[0], convert(e, x[1], o->in_dt[1], dt));
    /* integer base: pow in f64, truncated back (exact for the representable results);
     * a negative integer exponent gives 1 / x^-y truncated: 0 unless x is 1 or -1 */
    LLVMValueRef fx = convert(e, x[0], dt, IR_DTYPE_F64), fy = convert(e, x[1], o->in_dt[1], IR_DTYPE_F64);
    LLVMValueRef r = convert(e, f_pow(e, o, fx, fy), IR_DTYPE_F64, o->out_dt);
    if (lo_is_float(o->in_dt[1]) || is_uns(o->in_dt[1])) return r;
    LLVMTypeRef t = LLVMTypeOf(r), yt = LLVMTypeOf(x[1]);
    LLVMValueRef one = LLVMConstInt(t, 1, 0), m1 = LLVMConstAllOnes(t);
    LLVMValueRef odd = LLVMBuildTrunc(b, x[1], LLVMInt1TypeInContext(e->ctx), "");
    LLVMValueRef neg = isel(e, LLVMIntEQ, x[0], LLVMConstInt(LLVMTypeOf(x[0]), 1, 0), one,
                            isel(e, LLVMIntEQ, x[0], LLVMConstAllOnes(LLVMTypeOf(x[0])),
                                 LLVMBuildSelect(b, odd, m1, one, ""), LLVMConstNull(t)));
    return isel(e, LLVMIntSLT, x[1], LLVMConstNull(yt), neg, r);
}
/* Shrink on integers computes in f64 */
EW_POINT(p_shrink) {
    IrDType dt = o->in_dt[0];
    if (!lo_is_float(dt)) {
        LLVMValueRef fx = convert(e, x[0], dt, IR_DTYPE_F64);
        return convert(e, f_shrink(e, o, fx, NULL), IR_DTYPE_F64, dt);
    }
    return f_shrink(e, o, x[0], NULL);
}

/* dtype kinds each op accepts on its first operand, as the interpreter */
enum { K_F = 1, K_S = 2, K_U = 4, K_B = 8 };
#define K_N (K_F | K_S | K_U)
#define K_ALL (K_F | K_S | K_U | K_B)

typedef struct EwRow {
    LLVMValueRef (*fl)(LlvmEmit *, const Ew *, LLVMValueRef, LLVMValueRef);
    LLVMValueRef (*in)(LlvmEmit *, const Ew *, LLVMValueRef, LLVMValueRef, bool);
    LLVMValueRef (*point)(LlvmEmit *, const Ew *, LLVMValueRef *);
    int kinds, fold;
} EwRow;
enum { EW_FOLD = 1, EW_FOLD_MEAN = 2 };

#define NONE NULL
static const EwRow ew_rows[IR_OP_COUNT] = {
#define EW_OP(ID, fl, in, point, kinds, fold) [IR_OP_##ID] = {fl, in, point, kinds, fold},
#include "backend/cpu/ew_ops.def"
#undef EW_OP
};
#undef NONE

/* The value of the op at one point: x[i] are compute values of in_dt[i] (NULL when absent).
 * Returns a value of the output's compute type (i1 results are widened by the caller). */
static LLVMValueRef ew_point(LlvmEmit *e, const Ew *o, LLVMValueRef *x) {
    const EwRow *row = &ew_rows[o->op];
    if (row->point) return row->point(e, o, x);
    IrDType dt = o->in_dt[0];
    bool fl = lo_is_float(dt), uns = is_uns(dt);
    if (fl ? !row->fl : !row->in) return NULL;
    uint32_t arity = ir_op_info(o->op)->max_inputs;
    if (row->fold) {
        LLVMValueRef acc = x[0];
        for (uint32_t i = 1; i < o->n_in; i++) acc = fl ? row->fl(e, o, acc, x[i]) : row->in(e, o, acc, x[i], uns);
        if (row->fold == EW_FOLD_MEAN) acc = LLVMBuildFDiv(e->b, acc, fconst(LLVMTypeOf(acc), (double)o->n_in), "");
        return acc;
    }
    if (arity == 1) return fl ? row->fl(e, o, x[0], NULL) : row->in(e, o, x[0], NULL, uns);
    return fl ? row->fl(e, o, x[0], x[1]) : row->in(e, o, x[0], x[1], uns);
}

/* ew_point in the compute type of the output's dtype (i1 results widened, as stored). */
static LLVMValueRef ew_value(LlvmEmit *e, const Ew *o, LLVMValueRef *x) {
    LLVMValueRef v = ew_point(e, o, x);
    LLVMTypeRef ot = lo_comp_t(e, o->out_dt);
    return LLVMTypeOf(v) != ot ? LLVMBuildZExt(e->b, v, ot, "") : v;
}

static void ew_body(LlvmEmit *e, LLVMValueRef *offs, LLVMValueRef *idx, void *user) {
    (void)idx;
    Ew *o = user;
    LLVMValueRef x[LLVM_OPS_MAX_OPS] = {0};
    for (uint32_t i = 0; i < o->n_in; i++) x[i] = o->in_p[i] ? lo_load(e, o->in_dt[i], o->in_p[i], offs[i + 1]) : NULL;
    lo_store(e, o->out_dt, o->out_p, offs[0], ew_value(e, o, x));
}

static int dkind(IrDType t) {
    if (lo_is_float(t)) return K_F;
    if (t == IR_DTYPE_BOOL) return K_B;
    return is_uns(t) ? K_U : K_S;
}

/* The typed elementwise family: the ops whose run-time-shape row is this family's. */
bool llvm_ops_ew_supported(IrOp op) { return cpu_op_row(op)->emit == cpu_emit_ew; }

/* Marks an operand present where no buffer is loaded (a member of a fused group computes on
 * values): in_p is then only tested, never read through. */
static char present_mark;
#define EW_PRESENT ((LLVMValueRef)(void *)&present_mark)

static IrStatus ew_refuse(LlvmEmit *e, const char *what) { return e ? lo_unsupported(e, what) : IR_EUNSUPPORTED; }
static IrStatus ew_refuse_dtype(LlvmEmit *e, IrDType dt) { return e ? lo_unsupported_dtype(e, dt) : IR_EUNSUPPORTED; }

/* Node n's operands, dtypes and attributes into o, checked; with bufs the buffers are loaded at
 * e's builder, else operands are only marked present. e NULL: check only (nothing reported).
 * Shapes are the caller's. */
static IrStatus ew_prepare_at(const IrGraph *g, IrNodeId n, LlvmEmit *e, bool bufs, Ew *po) {
    Ew o = {.op = ir_node_op(g, n), .n_in = ir_node_num_operands(g, n)};
    if (o.n_in + 1 > LLVM_OPS_MAX_OPS) return ew_refuse(e, "with this many operands");
    if (o.op == IR_OP_CAST_LIKE) o.n_in = 1; /* the second operand only gives the dtype */
    IrValueId out = ir_node_result(g, n, 0);
    o.out_dt = ir_type_dtype(g, ir_value_type(g, out));
    if (!lo_storable(o.out_dt)) return ew_refuse_dtype(e, o.out_dt);
    o.out_p = bufs ? lo_buf(e, out) : EW_PRESENT;
    for (uint32_t i = 0; i < o.n_in; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        uint32_t r;
        int64_t d[IR_MAX_RANK];
        if (!v) continue;
        if (o.op == IR_OP_CLIP && i > 0 && lower_value_shape(g, v, &r, d) && ir_shape_numel(r, d) == 0) continue; /* empty bound */
        o.in_dt[i] = ir_type_dtype(g, ir_value_type(g, v));
        if (!lo_storable(o.in_dt[i])) return ew_refuse_dtype(e, o.in_dt[i]);
        o.in_p[i] = bufs ? lo_buf(e, v) : EW_PRESENT;
    }
    IrDType dt = o.in_dt[0];
    if (!o.in_p[0]) return ew_refuse(e, "without its first operand");
    if (!(ew_rows[o.op].kinds & dkind(dt))) return ew_refuse_dtype(e, dt);
    if (o.op == IR_OP_WHERE && (!o.in_p[1] || !o.in_p[2] || o.in_dt[1] != o.in_dt[2]))
        return ew_refuse(e, "with these operands");
    if (o.op != IR_OP_WHERE && o.op != IR_OP_POW && o.op != IR_OP_CAST && o.op != IR_OP_CAST_LIKE)
        for (uint32_t i = 1; i < o.n_in; i++)
            if (o.in_p[i] && o.in_dt[i] != dt) return ew_refuse(e, "on mixed dtypes");
    if (o.op == IR_OP_POW && (!o.in_p[1] || !(dkind(o.in_dt[1]) & (K_F | K_S | K_U)))) return ew_refuse(e, "with this exponent");
    bool found;
    o.alpha = ir_node_attr_float(g, n, "alpha", &found);
    o.beta = ir_node_attr_float(g, n, "beta", &found);
    o.gamma = ir_node_attr_float(g, n, "gamma", &found);
    o.lambd = ir_node_attr_float(g, n, "lambd", &found);
    o.bias = ir_node_attr_float(g, n, "bias", &found);
    o.fmod_mode = ir_node_attr_int(g, n, "fmod", &found) != 0;
    o.det_neg = ir_node_attr_int(g, n, "detect_negative", &found) != 0 || !found;
    o.det_pos = ir_node_attr_int(g, n, "detect_positive", &found) != 0 || !found;
    const char *s = ir_node_attr_string(g, n, "direction", &found);
    o.left = s && strcmp(s, "LEFT") == 0;
    if (o.op == IR_OP_BIT_SHIFT && !o.left && !(s && strcmp(s, "RIGHT") == 0)) return ew_refuse(e, "with this direction");
    s = ir_node_attr_string(g, n, "approximate", &found);
    o.tanh_approx = s && strcmp(s, "tanh") == 0;
    *po = o;
    return IR_OK;
}

static IrStatus ew_prepare(LlvmEmit *e, Ew *po) { return ew_prepare_at(e->g, e->node, e, true, po); }

IrStatus llvm_ops_ew_gen(LlvmEmit *e) {
    Ew o;
    IrStatus st = ew_prepare(e, &o);
    if (st) return st;
    const IrGraph *g = e->g;
    LlvmDims os, s;
    LLVMValueRef strides[LLVM_NEST_MAX_OPS][IR_MAX_RANK];
    if (!llvm_dims_of(e, ir_node_result(g, e->node, 0), &os)) return lo_unsupported(e, "on an unranked tensor");
    if (o.n_in + 1 > LLVM_NEST_MAX_OPS) return lo_unsupported(e, "with this many operands");
    llvm_dims_strides(e, &os, strides[0]);
    for (uint32_t i = 0; i < o.n_in; i++) {
        for (uint32_t k = 0; k < os.rank; k++) strides[i + 1][k] = NULL;
        if (!o.in_p[i]) continue;
        if (!llvm_dims_of(e, ir_node_operand(g, e->node, i), &s) || s.rank > os.rank) return lo_unsupported(e, "with an unranked operand");
        llvm_dims_bcast_strides(e, &s, &os, strides[i + 1]); /* numpy broadcasting, decided at run time where a dim is symbolic */
    }
    llvm_nest(e, &os, o.n_in + 1, strides, NULL, ew_body, &o);
    return IR_OK;
}

/* ---- for run-time shapes (cpu/dyn.c): the same node, the caller's loop nest ---------------- */

struct LlvmEwPoint {
    Ew o;
};

IrStatus llvm_ops_ew_point_new(LlvmEmit *e, LlvmEwPoint **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return IR_ENOMEM;
    IrStatus s = ew_prepare(e, &(*out)->o);
    if (s) {
        free(*out);
        *out = NULL;
    }
    return s;
}

uint32_t llvm_ops_ew_point_inputs(const LlvmEwPoint *p, bool *present) {
    for (uint32_t i = 0; i < p->o.n_in; i++) present[i] = p->o.in_p[i] != NULL;
    return p->o.n_in;
}

void llvm_ops_ew_point(LlvmEmit *e, LlvmEwPoint *p, LLVMValueRef *offs) { ew_body(e, offs, NULL, &p->o); }

/* ---- members of a fused elementwise group (cpu/dyn.c): the op on values -------------------- */

bool llvm_ops_ew_member_ok(const IrGraph *g, IrNodeId m) {
    Ew o;
    return llvm_ops_ew_supported(ir_node_op(g, m)) && ew_prepare_at(g, m, NULL, false, &o) == IR_OK;
}

IrStatus llvm_ops_ew_member_new(LlvmEmit *e, IrNodeId m, LlvmEwPoint **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return IR_ENOMEM;
    IrStatus s = ew_prepare_at(e->g, m, e, false, &(*out)->o);
    if (s) {
        free(*out);
        *out = NULL;
    }
    return s;
}

LLVMValueRef llvm_ops_ew_member(LlvmEmit *e, const LlvmEwPoint *p, LLVMValueRef *x) { return ew_value(e, &p->o, x); }
