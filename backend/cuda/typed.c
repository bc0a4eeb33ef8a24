/* Typed element access for the CUDA kernels, with the interpreter's numerics: floats load as
 * double, integers and bool as i64 (sign- or zero-extended); stores round as ir_elem_set_f64
 * does (f16/bf16 through f32, floats to integers toward zero with NaN -> 0 and saturation).
 * Math beyond + - * / sqrt calls libdevice in double (__nv_*, linked by the artifact writer).
 */
#include "backend/cuda/cu.h"

#include <string.h>

CuKind cu_kind(IrDType t) {
    if (ir_dtype_is_float(t)) return CU_KF;
    if (t == IR_DTYPE_BOOL) return CU_KB;
    return ir_dtype_is_signed(t) ? CU_KS : CU_KU;
}

bool cu_typed_ok(IrDType t) {
    switch (t) {
    case IR_DTYPE_F64: case IR_DTYPE_F32: case IR_DTYPE_F16: case IR_DTYPE_BF16: case IR_DTYPE_I64: case IR_DTYPE_U64:
    case IR_DTYPE_I32: case IR_DTYPE_U32: case IR_DTYPE_I16: case IR_DTYPE_U16: case IR_DTYPE_I8: case IR_DTYPE_U8:
    case IR_DTYPE_BOOL:
        return true;
    default: return false;
    }
}

IrStatus cu_unsupported_dtype(Cu *c, IrDType t) {
    char m[64];
    snprintf(m, sizeof m, "on %s tensors", ir_dtype_name(t));
    return cu_unsupported(c, m);
}

LLVMTypeRef cu_mem_type(Cu *c, IrDType t) {
    switch (t) {
    case IR_DTYPE_F64: return LLVMDoubleTypeInContext(c->ctx);
    case IR_DTYPE_F32: return c->f32;
    case IR_DTYPE_F16: return LLVMHalfTypeInContext(c->ctx);
    default: return int_type(c, ir_dtype_size(t));
    }
}

LLVMTypeRef cu_value_type(Cu *c, IrDType t) { return cu_kind(t) == CU_KF ? c->f64 : c->i64; }

LLVMValueRef cu_load_typed(Cu *c, IrDType t, LLVMValueRef base, LLVMValueRef off) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef v = ld(c, cu_mem_type(c, t), base, off);
    switch (t) {
    case IR_DTYPE_F64: return v;
    case IR_DTYPE_F32: case IR_DTYPE_F16: return LLVMBuildFPExt(b, v, c->f64, "");
    case IR_DTYPE_BF16: {
        LLVMValueRef w = LLVMBuildShl(b, LLVMBuildZExt(b, v, c->i32, ""), c32(c, 16), "");
        return LLVMBuildFPExt(b, LLVMBuildBitCast(b, w, c->f32, ""), c->f64, "");
    }
    default: return cu_kind(t) == CU_KS ? LLVMBuildSExt(b, v, c->i64, "") : LLVMBuildZExt(b, v, c->i64, "");
    }
}

LLVMValueRef cu_scatter_combine(Cu *c, int red, IrDType t, LLVMValueRef x, LLVMValueRef u) {
    LLVMBuilderRef b = c->b;
    CuKind k = cu_kind(t);
    if (k == CU_KF) {
        LLVMValueRef a[2] = {x, u};
        return red == 1 ? LLVMBuildFAdd(b, x, u, "") : red == 2 ? LLVMBuildFMul(b, x, u, "")
               : cu_intr(c, red == 3 ? "llvm.maxnum" : "llvm.minnum", &c->f64, 1, a, 2);
    }
    LLVMValueRef gt = LLVMBuildICmp(b, k == CU_KU ? LLVMIntUGT : LLVMIntSGT, u, x, "");
    return red == 1 ? LLVMBuildAdd(b, x, u, "") : red == 2 ? LLVMBuildMul(b, x, u, "")
           : LLVMBuildSelect(b, red == 3 ? gt : LLVMBuildNot(b, gt, ""), u, x, "");
}

IrStatus cu_scatter_reduction(Cu *c, IrDType dt, int *red) {
    bool found;
    const char *rs = ir_node_attr_string(c->g, c->node, "reduction", &found);
    if (!found || !rs || strcmp(rs, "none") == 0) *red = 0;
    else if (strcmp(rs, "add") == 0) *red = 1;
    else if (strcmp(rs, "mul") == 0) *red = 2;
    else if (strcmp(rs, "max") == 0) *red = 3;
    else if (strcmp(rs, "min") == 0) *red = 4;
    else return cu_unsupported(c, "with this reduction");
    if (*red && dt == IR_DTYPE_BOOL) return cu_unsupported(c, "with a reduction on bool");
    return IR_OK;
}

void cu_scatter_store(Cu *c, int red, IrDType dt, LLVMValueRef y, LLVMValueRef dst, LLVMValueRef u) {
    if (red) u = cu_scatter_combine(c, red, dt, cu_load_typed(c, dt, y, dst), u);
    cu_store_typed(c, dt, y, dst, u);
}

typedef struct ScatterOne {
    void (*one)(Cu *c, void *user, LLVMValueRef i);
    void *user;
} ScatterOne;

static void scatter_body(Cu *c, LLVMValueRef *o, void *user) {
    ScatterOne *s = user;
    s->one(c, s->user, o[0]);
}

IrStatus cu_scatter_launch(Cu *c, IrValueId y, IrValueId x, IrValueId idx, IrValueId upd, int red, int64_t total,
                           void (*one)(Cu *c, void *user, LLVMValueRef i), void *user) {
    size_t nb = lower_value_nbytes(c->g, x);
    if (nb) {
        CuStep s = {.kind = CU_STEP_COPY, .n_args = 2, .arg = {{y, 0}, {x, 0}}, .bytes = (int64_t)nb};
        IrStatus st_ = cu_push_step(c, &s);
        if (st_) return st_;
    }
    if (!total) return IR_OK;
    uint32_t slots[3] = {y, idx, upd};
    IrStatus st_ = cu_kbegin(c, slots, 3, red ? 32 : CU_BLOCK, false);
    if (st_) return st_;
    if (red) return cu_kend_serial(c, total, one, user); /* in index order, as the interpreter */
    int64_t s1[1][IR_MAX_RANK] = {{1}};
    ScatterOne so = {one, user};
    cu_emit_nest(c, 1, &total, 1, s1, NULL, scatter_body, &so);
    return cu_kend(c, total, NULL);
}

/* f32 -> bf16 bits, round to nearest even, NaN quieted (ir_f32_to_bf16) */
static LLVMValueRef f32_to_bf16(Cu *c, LLVMValueRef f) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef x = LLVMBuildBitCast(b, f, c->i32, "");
    LLVMValueRef hi = LLVMBuildLShr(b, x, c32(c, 16), "");
    LLVMValueRef nan = LLVMBuildICmp(b, LLVMIntUGT, LLVMBuildAnd(b, x, c32(c, 0x7FFFFFFF), ""), c32(c, 0x7F800000), "");
    LLVMValueRef r = LLVMBuildAdd(b, x, LLVMBuildAdd(b, c32(c, 0x7FFF), LLVMBuildAnd(b, hi, c32(c, 1), ""), ""), "");
    r = sel(c, nan, LLVMBuildOr(b, hi, c32(c, 0x40), ""), LLVMBuildLShr(b, r, c32(c, 16), ""));
    return LLVMBuildTrunc(b, r, c->i16, "");
}

void cu_store_typed(Cu *c, IrDType t, LLVMValueRef base, LLVMValueRef off, LLVMValueRef v) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef m;
    switch (t) {
    case IR_DTYPE_F64: m = v; break;
    case IR_DTYPE_F32: m = LLVMBuildFPTrunc(b, v, c->f32, ""); break;
    case IR_DTYPE_F16: m = LLVMBuildFPTrunc(b, LLVMBuildFPTrunc(b, v, c->f32, ""), LLVMHalfTypeInContext(c->ctx), ""); break;
    case IR_DTYPE_BF16: m = f32_to_bf16(c, LLVMBuildFPTrunc(b, v, c->f32, "")); break;
    case IR_DTYPE_BOOL: m = LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(c->i64, 0, 0), ""), c->i8, ""); break;
    default: m = LLVMBuildTrunc(b, v, int_type(c, ir_dtype_size(t)), ""); break;
    }
    st(c, cu_mem_type(c, t), base, off, m);
}

LLVMValueRef cu_convert(Cu *c, LLVMValueRef v, IrDType from, IrDType to) {
    LLVMBuilderRef b = c->b;
    CuKind kf = cu_kind(from), kt = cu_kind(to);
    if (kf == CU_KF && kt == CU_KF) return v;
    if (kf == CU_KF && kt == CU_KB)
        return LLVMBuildZExt(b, LLVMBuildFCmp(b, LLVMRealUNE, v, LLVMConstReal(c->f64, 0.0), ""), c->i64, "");
    if (kf == CU_KF) { /* toward zero, NaN -> 0, saturated to int64 (u64 keeps [2^63, 2^64)) */
        LLVMTypeRef ov[2] = {c->i64, c->f64};
        LLVMValueRef r = cu_intr(c, "llvm.fptosi.sat", ov, 2, &v, 1);
        if (to == IR_DTYPE_U64) {
            LLVMValueRef big = LLVMBuildAnd(b, fcmp(c, LLVMRealOGE, v, LLVMConstReal(c->f64, 9.2233720368547758e18)),
                                            fcmp(c, LLVMRealOLT, v, LLVMConstReal(c->f64, 1.8446744073709552e19)), "");
            r = sel(c, big, LLVMBuildFPToUI(b, v, c->i64, ""), r);
        }
        return r;
    }
    if (kt == CU_KF) {
        /* f32 targets are rounded once from the integer, as (float)v */
        LLVMTypeRef ft = to == IR_DTYPE_F32 ? c->f32 : c->f64;
        LLVMValueRef f = from == IR_DTYPE_U64 ? LLVMBuildUIToFP(b, v, ft, "") : LLVMBuildSIToFP(b, v, ft, "");
        return ft == c->f64 ? f : LLVMBuildFPExt(b, f, c->f64, "");
    }
    if (kt == CU_KB) return LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(c->i64, 0, 0), ""), c->i64, "");
    return v;
}

LLVMValueRef cu_libm(Cu *c, const char *name, LLVMValueRef *args, unsigned n) {
    LLVMTypeRef ps[3] = {c->f64, c->f64, c->f64};
    LLVMTypeRef ft = LLVMFunctionType(c->f64, ps, n, 0);
    LLVMValueRef f = LLVMGetNamedFunction(c->mod, name);
    if (!f) f = LLVMAddFunction(c->mod, name, ft);
    return LLVMBuildCall2(c->b, ft, f, args, n, "");
}

LLVMValueRef cu_libm1(Cu *c, const char *name, LLVMValueRef x) { return cu_libm(c, name, &x, 1); }
