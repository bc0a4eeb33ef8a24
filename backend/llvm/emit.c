/* The emit kit both code generators use: LLVM's O3 pipeline, counted loops and ifs whose bounds
 * are constants or run-time values, vector math (exp, tanh, erf) as arithmetic that vectorizes,
 * masked vector loads and stores, and the index math of window taps (declared in llvm/emit.h).
 */
#include "backend/llvm/emit.h"

#include <math.h>
#include <stdlib.h>

#include <llvm-c/Transforms/PassBuilder.h>

#include <string.h>

IrStatus llvm_run_o3(LLVMModuleRef mod, LLVMTargetMachineRef tm, const char *what, IrDiag *diag) {
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(mod, "default<O3>", tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (!e) return IR_OK;
    char *msg = LLVMGetErrorMessage(e);
    ir_diag_error(diag, "%s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return IR_EUNSUPPORTED;
}


LLVMValueRef llvm_win_coord(LLVMBuilderRef b, LLVMTypeRef it, LLVMValueRef o, int64_t stride, int64_t pad,
                            LLVMValueRef k, int64_t dil) {
    LLVMValueRef v = LLVMBuildMul(b, o, LLVMConstInt(it, (unsigned long long)stride, 1), "");
    v = LLVMBuildSub(b, v, LLVMConstInt(it, (unsigned long long)pad, 1), "");
    return LLVMBuildAdd(b, v, LLVMBuildMul(b, k, LLVMConstInt(it, (unsigned long long)dil, 1), ""), "");
}

LLVMValueRef llvm_win_pix(LLVMBuilderRef b, LLVMTypeRef it, const LowerWin *wn, LLVMValueRef ih, LLVMValueRef iw,
                          LLVMValueRef *valid) {
    LLVMValueRef okh = LLVMBuildICmp(b, LLVMIntULT, ih, LLVMConstInt(it, (unsigned long long)wn->h, 1), "");
    LLVMValueRef okw = LLVMBuildICmp(b, LLVMIntULT, iw, LLVMConstInt(it, (unsigned long long)wn->w, 1), "");
    *valid = LLVMBuildAnd(b, okh, okw, "");
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, ih, LLVMConstInt(it, (unsigned long long)wn->w, 1), ""), iw, "");
    return LLVMBuildSelect(b, *valid, off, LLVMConstInt(it, 0, 1), "");
}


void llvm_loop_begin(LLVMBuilderRef b, LLVMValueRef fn, LlvmLoop *l, int64_t n) {
    LLVMContextRef ctx = LLVMGetModuleContext(LLVMGetGlobalParent(fn));
    LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    l->head = LLVMAppendBasicBlockInContext(ctx, fn, "loop");
    l->n = n;
    l->nv = NULL;
    l->exit = NULL;
    LLVMBuildBr(b, l->head);
    LLVMPositionBuilderAtEnd(b, l->head);
    l->iv = LLVMBuildPhi(b, i64, "i");
    LLVMValueRef zero = LLVMConstInt(i64, 0, 0);
    LLVMAddIncoming(l->iv, &zero, &pre, 1);
}

void llvm_loop_begin_v(LLVMBuilderRef b, LLVMValueRef fn, LlvmLoop *l, LLVMValueRef n) {
    LLVMContextRef ctx = LLVMGetModuleContext(LLVMGetGlobalParent(fn));
    LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    l->head = LLVMAppendBasicBlockInContext(ctx, fn, "loop");
    l->exit = LLVMAppendBasicBlockInContext(ctx, fn, "exit");
    l->n = 0;
    l->nv = n;
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, LLVMConstInt(i64, 0, 0), ""), l->head, l->exit);
    LLVMPositionBuilderAtEnd(b, l->head);
    l->iv = LLVMBuildPhi(b, i64, "i");
    LLVMValueRef zero = LLVMConstInt(i64, 0, 0);
    LLVMAddIncoming(l->iv, &zero, &pre, 1);
}

void llvm_loop_end(LLVMBuilderRef b, LLVMValueRef fn, LlvmLoop *l) {
    LLVMContextRef ctx = LLVMGetModuleContext(LLVMGetGlobalParent(fn));
    LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
    LLVMValueRef next = LLVMBuildNUWAdd(b, l->iv, LLVMConstInt(i64, 1, 0), "");
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(b);
    LLVMAddIncoming(l->iv, &next, &cur, 1);
    LLVMBasicBlockRef exit = l->exit ? l->exit : LLVMAppendBasicBlockInContext(ctx, fn, "exit");
    LLVMValueRef n = l->nv ? l->nv : LLVMConstInt(i64, (unsigned long long)l->n, 1);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, next, n, ""), l->head, exit);
    LLVMPositionBuilderAtEnd(b, exit);
}

void llvm_part_range(LLVMBuilderRef b, LLVMValueRef part, LLVMValueRef n, LLVMValueRef np, LLVMValueRef *lo,
                     LLVMValueRef *hi) {
    LLVMTypeRef t = LLVMTypeOf(part);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), whole = LLVMBuildICmp(b, LLVMIntSLT, part, zero, "");
    LLVMValueRef a = LLVMBuildSDiv(b, LLVMBuildNSWMul(b, part, n, ""), np, "");
    LLVMValueRef z = LLVMBuildSDiv(b, LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, part, LLVMConstInt(t, 1, 0), ""), n, ""), np, "");
    *lo = LLVMBuildSelect(b, whole, zero, a, "");
    *hi = LLVMBuildSelect(b, whole, n, z, "");
}

LLVMBasicBlockRef llvm_if_begin(LLVMBuilderRef b, LLVMValueRef fn, LLVMValueRef cond) {
    LLVMContextRef ctx = LLVMGetModuleContext(LLVMGetGlobalParent(fn));
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(ctx, fn, "then");
    LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(ctx, fn, "endif");
    LLVMBuildCondBr(b, cond, then, after);
    LLVMPositionBuilderAtEnd(b, then);
    return after;
}

void llvm_if_end(LLVMBuilderRef b, LLVMBasicBlockRef after) {
    LLVMBuildBr(b, after);
    LLVMPositionBuilderAtEnd(b, after);
}

/* exp for f32 (or a vector of f32) as plain arithmetic, so loops around it vectorize (a call to
 * expf does not): Cephes' expf. n = round(x / ln 2), r = x - n ln 2 in two parts (exact
 * products), exp(r) by a degree-6 polynomial on [-ln2/2, ln2/2] (within 3 ulp of expf), times
 * 2^n built in the exponent bits (in two steps, so subnormal results come out right). Above
 * ln(FLT_MAX) the result is +inf, below -88.38 0 (expf there is under 4e-39), NaN stays NaN. */
LLVMValueRef llvm_exp_f32(LLVMBuilderRef b, LLVMValueRef x) {
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMContextRef ctx = LLVMGetTypeContext(t);
    bool vec = LLVMGetTypeKind(t) == LLVMVectorTypeKind;
    unsigned lanes = vec ? LLVMGetVectorSize(t) : 1;
    LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx), i32 = LLVMInt32TypeInContext(ctx);
    LLVMTypeRef it = vec ? LLVMVectorType(i32, lanes) : i32;
#define EXP_K(v) (vec ? llvm_splat_const(LLVMConstReal(f32, (v)), lanes) : LLVMConstReal(f32, (v)))
    LLVMValueRef hi = EXP_K(88.72283905), lo = EXP_K(-88.3762626647949);
    LLVMValueRef c = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, hi, ""), hi, x, "");
    c = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, c, lo, ""), lo, c, "");
    LLVMValueRef fx = LLVMBuildFAdd(b, LLVMBuildFMul(b, c, EXP_K(1.44269504088896341), ""), EXP_K(0.5), "");
    LLVMTypeRef ft = LLVMTypeOf(fx);
    unsigned id = LLVMLookupIntrinsicID("llvm.floor", 10);
    LLVMValueRef fl = LLVMGetIntrinsicDeclaration(LLVMGetGlobalParent(LLVMGetBasicBlockParent(LLVMGetInsertBlock(b))), id, &ft, 1);
    fx = LLVMBuildCall2(b, LLVMIntrinsicGetType(ctx, id, &ft, 1), fl, &fx, 1, "");
    LLVMValueRef r = LLVMBuildFSub(b, c, LLVMBuildFMul(b, fx, EXP_K(0.693359375), ""), "");
    r = LLVMBuildFSub(b, r, LLVMBuildFMul(b, fx, EXP_K(-2.12194440e-4), ""), "");
    static const double p[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2, 1.6666665459E-1,
                               5.0000001201E-1};
    LLVMValueRef y = EXP_K(p[0]);
    for (int i = 1; i < 6; i++) y = LLVMBuildFAdd(b, LLVMBuildFMul(b, y, r, ""), EXP_K(p[i]), "");
    y = LLVMBuildFAdd(b, LLVMBuildFAdd(b, LLVMBuildFMul(b, y, LLVMBuildFMul(b, r, r, ""), ""), r, ""), EXP_K(1.0), "");
    /* 2^n as 2^(n -+ 1) * 2^(+-1): n runs from -127 (subnormal results) to 128 */
#define EXP_I(v) (vec ? llvm_splat_const(LLVMConstInt(i32, (unsigned long long)(v), 1), lanes) : LLVMConstInt(i32, (unsigned long long)(v), 1))
    LLVMValueRef n = LLVMBuildFPToSI(b, fx, it, "");
    LLVMValueRef pos = LLVMBuildICmp(b, LLVMIntSGT, n, EXP_I(0), "");
    LLVMValueRef e = LLVMBuildSelect(b, pos, LLVMBuildSub(b, n, EXP_I(1), ""), LLVMBuildAdd(b, n, EXP_I(1), ""), "");
    LLVMValueRef pow2 = LLVMBuildBitCast(b, LLVMBuildShl(b, LLVMBuildAdd(b, e, EXP_I(127), ""), EXP_I(23), ""), t, "");
    y = LLVMBuildFMul(b, LLVMBuildFMul(b, y, pow2, ""), LLVMBuildSelect(b, pos, EXP_K(2.0), EXP_K(0.5), ""), "");
#undef EXP_I
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, lo, ""), EXP_K(0.0), y, "");
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, EXP_K(88.72283905), ""), EXP_K(INFINITY), y, "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), x, y, "");
#undef EXP_K
}

LLVMValueRef llvm_splat_const(LLVMValueRef c, unsigned lanes) {
    LLVMValueRef v[64];
    for (unsigned i = 0; i < lanes && i < 64; i++) v[i] = c;
    return LLVMConstVector(v, lanes < 64 ? lanes : 64);
}

static LLVMValueRef masked_call(LLVMBuilderRef b, const char *name, LLVMTypeRef vt, LLVMValueRef *args) {
    LLVMModuleRef mod = LLVMGetGlobalParent(LLVMGetBasicBlockParent(LLVMGetInsertBlock(b)));
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef tys[2] = {vt, LLVMPointerTypeInContext(ctx, 0)};
    return LLVMBuildCall2(b, LLVMIntrinsicGetType(ctx, id, tys, 2), LLVMGetIntrinsicDeclaration(mod, id, tys, 2), args, 4, "");
}

LLVMValueRef llvm_masked_load(LLVMBuilderRef b, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask) {
    LLVMContextRef ctx = LLVMGetTypeContext(vt);
    LLVMValueRef args[4] = {p, LLVMConstInt(LLVMInt32TypeInContext(ctx), 4, 0), mask, LLVMConstNull(vt)};
    return masked_call(b, "llvm.masked.load", vt, args);
}

void llvm_masked_store(LLVMBuilderRef b, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask) {
    LLVMTypeRef vt = LLVMTypeOf(v);
    LLVMValueRef args[4] = {v, p, LLVMConstInt(LLVMInt32TypeInContext(LLVMGetTypeContext(vt)), 4, 0), mask};
    masked_call(b, "llvm.masked.store", vt, args);
}

LLVMValueRef llvm_lane_mask(LLVMContextRef ctx, unsigned width, int64_t lanes) {
    LLVMValueRef m[64];
    LLVMTypeRef i1 = LLVMInt1TypeInContext(ctx);
    for (unsigned i = 0; i < width && i < 64; i++) m[i] = LLVMConstInt(i1, (int64_t)i < lanes, 0);
    return LLVMConstVector(m, width < 64 ? width : 64);
}

LLVMValueRef llvm_load_lanes(LLVMBuilderRef b, LLVMValueRef p, unsigned width, int64_t lanes) {
    LLVMContextRef ctx = LLVMGetModuleContext(LLVMGetGlobalParent(LLVMGetBasicBlockParent(LLVMGetInsertBlock(b))));
    LLVMTypeRef vt = LLVMVectorType(LLVMFloatTypeInContext(ctx), width);
    if (lanes >= (int64_t)width) {
        LLVMValueRef v = LLVMBuildLoad2(b, vt, p, "");
        LLVMSetAlignment(v, 4);
        return v;
    }
    return llvm_masked_load(b, vt, p, llvm_lane_mask(ctx, width, lanes));
}

void llvm_store_lanes(LLVMBuilderRef b, LLVMValueRef v, LLVMValueRef p, int64_t lanes) {
    unsigned width = LLVMGetVectorSize(LLVMTypeOf(v));
    if (lanes >= (int64_t)width) {
        LLVMSetAlignment(LLVMBuildStore(b, v, p), 4);
        return;
    }
    llvm_masked_store(b, v, p, llvm_lane_mask(LLVMGetTypeContext(LLVMTypeOf(v)), width, lanes));
}

/* p(x2) by Horner, coefficients from the highest power down. */
static LLVMValueRef horner(LLVMBuilderRef b, LLVMValueRef x2, const double *c, int n, LLVMTypeRef t) {
    bool vec = LLVMGetTypeKind(t) == LLVMVectorTypeKind;
    unsigned lanes = vec ? LLVMGetVectorSize(t) : 1;
    LLVMTypeRef f32 = LLVMFloatTypeInContext(LLVMGetTypeContext(t));
    LLVMValueRef y = vec ? llvm_splat_const(LLVMConstReal(f32, c[0]), lanes) : LLVMConstReal(f32, c[0]);
    for (int i = 1; i < n; i++) {
        LLVMValueRef k = vec ? llvm_splat_const(LLVMConstReal(f32, c[i]), lanes) : LLVMConstReal(f32, c[i]);
        y = LLVMBuildFAdd(b, LLVMBuildFMul(b, y, x2, ""), k, "");
    }
    return y;
}

static LLVMValueRef fconst_like(LLVMValueRef x, double v) {
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(LLVMGetTypeContext(t));
    return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? llvm_splat_const(LLVMConstReal(f32, v), LLVMGetVectorSize(t))
                                                    : LLVMConstReal(f32, v);
}

/* x * p(x^2) / q(x^2) on x clamped to [-lim, lim]; NaN stays NaN. */
static LLVMValueRef rational_odd(LLVMBuilderRef b, LLVMValueRef x, double lim, const double *p, int np, const double *q,
                                 int nq) {
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef hi = fconst_like(x, lim), lo = fconst_like(x, -lim);
    LLVMValueRef c = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, hi, ""), hi, x, "");
    c = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, c, lo, ""), lo, c, "");
    LLVMValueRef x2 = LLVMBuildFMul(b, c, c, "");
    LLVMValueRef num = LLVMBuildFMul(b, c, horner(b, x2, p, np, t), "");
    return LLVMBuildFDiv(b, num, horner(b, x2, q, nq, t), "");
}

/* tanh for f32 (or f32 vectors) as arithmetic that vectorizes: Eigen's rational approximation
 * (degree 13 over 6) on [-7.9053, 7.9053], x itself below 0.0004 in magnitude; within a few ulp
 * of tanhf. Beyond 7.9053 (where the rational reaches +-1) sign(x) * (1 - 2 / (exp(2|x|) + 1)),
 * so that values below 1 stay below 1 up to 9.01 as tanhf's do (the rational's clamp gave 1.0
 * there: Floor(Tanh(8)) was 1 compiled and 0 in the interpreter). */
LLVMValueRef llvm_tanh_f32(LLVMBuilderRef b, LLVMValueRef x) {
    static const double p[] = {-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
                               1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03};
    static const double q[] = {1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03};
    LLVMValueRef r = rational_odd(b, x, 7.90531110763549805, p, 7, q, 4);
    LLVMValueRef ax = LLVMBuildFNeg(b, x, "");
    LLVMValueRef tiny = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealOLT, x, fconst_like(x, 0.0004), ""),
                                     LLVMBuildFCmp(b, LLVMRealOLT, ax, fconst_like(x, 0.0004), ""), "");
    r = LLVMBuildSelect(b, tiny, x, r, "");
    LLVMValueRef pos = LLVMBuildFCmp(b, LLVMRealOGT, x, fconst_like(x, 0.0), "");
    LLVMValueRef a = LLVMBuildSelect(b, pos, x, ax, "");
    LLVMValueRef e2 = llvm_exp_f32(b, LLVMBuildFMul(b, a, fconst_like(x, 2.0), ""));
    LLVMValueRef t = LLVMBuildFSub(b, fconst_like(x, 1.0),
                                   LLVMBuildFDiv(b, fconst_like(x, 2.0), LLVMBuildFAdd(b, e2, fconst_like(x, 1.0), ""), ""), "");
    t = LLVMBuildSelect(b, pos, t, LLVMBuildFNeg(b, t, ""), "");
    r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGE, a, fconst_like(x, 7.90531110763549805), ""), t, r, "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), x, r, "");
}

/* erf for f32 (or f32 vectors) as arithmetic that vectorizes: Eigen's rational approximation
 * (degree 13 over 8) on [-4, 4], +-1 beyond; within a few ulp of erff. */
LLVMValueRef llvm_erf_f32(LLVMBuilderRef b, LLVMValueRef x) {
    static const double p[] = {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                               -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02};
    static const double q[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
                               -1.42647390514189e-02};
    LLVMValueRef r = rational_odd(b, x, 4.0, p, 7, q, 5);
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), x, r, "");
}

uint32_t llvm_slot_local(LlvmSlots *s, uint32_t slot) {
    for (uint32_t j = 0; j < s->n; j++)
        if (s->v[j] == slot) return j;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 16;
        uint32_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return UINT32_MAX;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n] = slot;
    return s->n++;
}
