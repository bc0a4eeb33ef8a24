/* Emission helpers shared by the op emitters in backend/cpu: the per-kernel context
 * (LlvmEmit, filled by cpu/codegen.c for the node being compiled), typed loads and stores
 * (f16 through LLVM half, bf16 by integer rounding, bool as a byte), counted loops and strided
 * loop nests over static shapes. Internal to backend/; static inline so each emitter file
 * stays self-contained.
 */
#ifndef IRTOOL_LLVM_OPS_H
#define IRTOOL_LLVM_OPS_H

#include "backend/llvm/emit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LLVM_OPS_MAX_OPS 32
#define LLVM_OPS_MAX_NEST (2 * IR_MAX_RANK)

static inline IrStatus lo_unsupported(LlvmEmit *e, const char *what) {
    ir_diag_at_node(e->diag, e->g, e->node, IR_SEV_ERROR, "the llvm backend does not support %s%s%s yet",
                    ir_op_name(ir_node_op(e->g, e->node)), what ? " " : "", what ? what : "");
    return IR_EUNSUPPORTED;
}

static inline IrStatus lo_unsupported_dtype(LlvmEmit *e, IrDType dt) {
    char m[64];
    snprintf(m, sizeof m, "on %s tensors", ir_dtype_name(dt));
    return lo_unsupported(e, m);
}

static inline IrDType lo_dtype(const LlvmEmit *e, IrValueId v) { return ir_type_dtype(e->g, ir_value_type(e->g, v)); }

static inline void lo_shape(const LlvmEmit *e, IrValueId v, uint32_t *r, int64_t *d) {
    if (!lower_value_shape(e->g, v, r, d)) *r = 0;
}

static inline LLVMValueRef lo_i64(LlvmEmit *e, int64_t v) {
    return LLVMConstInt(LLVMInt64TypeInContext(e->ctx), (unsigned long long)v, 1);
}
static inline LLVMTypeRef lo_ptr_t(LlvmEmit *e) { return LLVMPointerTypeInContext(e->ctx, 0); }
static inline LLVMTypeRef lo_f32_t(LlvmEmit *e) { return LLVMFloatTypeInContext(e->ctx); }
static inline LLVMTypeRef lo_f64_t(LlvmEmit *e) { return LLVMDoubleTypeInContext(e->ctx); }
static inline LLVMTypeRef lo_i64_t(LlvmEmit *e) { return LLVMInt64TypeInContext(e->ctx); }
static inline LLVMTypeRef lo_i8_t(LlvmEmit *e) { return LLVMInt8TypeInContext(e->ctx); }

/* Buffer of value v (through the kernel's slot array). */
static inline LLVMValueRef lo_buf(LlvmEmit *e, IrValueId v) {
    LLVMValueRef idx = lo_i64(e, llvm_slot_local(e->slots, v));
    LLVMValueRef p = LLVMBuildGEP2(e->b, lo_ptr_t(e), e->bufs, &idx, 1, "");
    return LLVMBuildLoad2(e->b, lo_ptr_t(e), p, "");
}

/* The dtypes the emitters load and store (lo_store_t gives them a type), known without an
 * emitter. */
static inline bool lo_storable(IrDType dt) {
    switch (dt) {
    case IR_DTYPE_F64: case IR_DTYPE_F32: case IR_DTYPE_F16: case IR_DTYPE_BF16: case IR_DTYPE_I64: case IR_DTYPE_U64:
    case IR_DTYPE_I32: case IR_DTYPE_U32: case IR_DTYPE_I16: case IR_DTYPE_U16: case IR_DTYPE_I8: case IR_DTYPE_U8:
    case IR_DTYPE_BOOL:
        return true;
    default: return false;
    }
}

/* Storage type of a dtype (bf16 as i16, bool as i8); NULL for what the emitters do not handle
 * (exactly the dtypes lo_storable refuses). */
static inline LLVMTypeRef lo_store_t(LlvmEmit *e, IrDType dt) {
    if (!lo_storable(dt)) return NULL;
    switch (dt) {
    case IR_DTYPE_F64: return LLVMDoubleTypeInContext(e->ctx);
    case IR_DTYPE_F32: return LLVMFloatTypeInContext(e->ctx);
    case IR_DTYPE_F16: return LLVMHalfTypeInContext(e->ctx);
    case IR_DTYPE_BF16: return LLVMInt16TypeInContext(e->ctx);
    case IR_DTYPE_I64: case IR_DTYPE_U64: return LLVMInt64TypeInContext(e->ctx);
    case IR_DTYPE_I32: case IR_DTYPE_U32: return LLVMInt32TypeInContext(e->ctx);
    case IR_DTYPE_I16: case IR_DTYPE_U16: return LLVMInt16TypeInContext(e->ctx);
    case IR_DTYPE_I8: case IR_DTYPE_U8: case IR_DTYPE_BOOL: return LLVMInt8TypeInContext(e->ctx);
    default: return NULL;
    }
}

/* Compute type: f64 for f64, f32 for f32/f16/bf16, the storage integer otherwise. */
static inline LLVMTypeRef lo_comp_t(LlvmEmit *e, IrDType dt) {
    if (dt == IR_DTYPE_F16 || dt == IR_DTYPE_BF16) return lo_f32_t(e);
    return lo_store_t(e, dt);
}

static inline bool lo_is_float(IrDType dt) {
    return dt == IR_DTYPE_F64 || dt == IR_DTYPE_F32 || dt == IR_DTYPE_F16 || dt == IR_DTYPE_BF16;
}

static inline LLVMValueRef lo_gep(LlvmEmit *e, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildGEP2(e->b, t, base, &off, 1, "");
}

/* Loads element `off` of a dtype buffer as its compute type. */
static inline LLVMValueRef lo_load(LlvmEmit *e, IrDType dt, LLVMValueRef base, LLVMValueRef off) {
    LLVMTypeRef t = lo_store_t(e, dt);
    LLVMValueRef v = LLVMBuildLoad2(e->b, t, lo_gep(e, t, base, off), "");
    if (dt == IR_DTYPE_F16) return LLVMBuildFPExt(e->b, v, lo_f32_t(e), "");
    if (dt == IR_DTYPE_BF16) {
        LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
        LLVMValueRef w = LLVMBuildShl(e->b, LLVMBuildZExt(e->b, v, i32, ""), LLVMConstInt(i32, 16, 0), "");
        return LLVMBuildBitCast(e->b, w, lo_f32_t(e), "");
    }
    return v;
}

/* Element `off` of an integer buffer of dtype dt as i64 (unsigned ones zero-extended), as the
 * interpreter's interp_get_i. */
static inline LLVMValueRef lo_load_int(LlvmEmit *e, IrDType dt, LLVMValueRef base, LLVMValueRef off) {
    LLVMValueRef x = lo_load(e, dt, base, off);
    if (dt == IR_DTYPE_I64 || dt == IR_DTYPE_U64) return x;
    bool uns = dt == IR_DTYPE_U8 || dt == IR_DTYPE_U16 || dt == IR_DTYPE_U32 || dt == IR_DTYPE_BOOL;
    return uns ? LLVMBuildZExt(e->b, x, LLVMInt64TypeInContext(e->ctx), "") : LLVMBuildSExt(e->b, x, LLVMInt64TypeInContext(e->ctx), "");
}

/* A float compute value widened to f64 (kept when it already is). */
static inline LLVMValueRef lo_to_f64(LlvmEmit *e, LLVMValueRef v) {
    return LLVMTypeOf(v) == lo_f64_t(e) ? v : LLVMBuildFPExt(e->b, v, lo_f64_t(e), "");
}

/* An f64 value narrowed to dt's compute type (kept when that is f64). */
static inline LLVMValueRef lo_from_f64(LlvmEmit *e, LLVMValueRef v, IrDType dt) {
    LLVMTypeRef ct = lo_comp_t(e, dt);
    return ct == lo_f64_t(e) ? v : LLVMBuildFPTrunc(e->b, v, ct, "");
}

/* f32 -> bf16 bits, round to nearest even, NaN kept quiet. */
static inline LLVMValueRef lo_f32_to_bf16(LlvmEmit *e, LLVMValueRef f) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx), i16 = LLVMInt16TypeInContext(e->ctx);
    LLVMValueRef u = LLVMBuildBitCast(b, f, i32, "");
    LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, LLVMConstInt(i32, 16, 0), ""), LLVMConstInt(i32, 1, 0), "");
    LLVMValueRef r = LLVMBuildAdd(b, u, LLVMBuildAdd(b, lsb, LLVMConstInt(i32, 0x7FFF, 0), ""), "");
    LLVMValueRef rounded = LLVMBuildTrunc(b, LLVMBuildLShr(b, r, LLVMConstInt(i32, 16, 0), ""), i16, "");
    LLVMValueRef qnan = LLVMBuildOr(b, LLVMBuildTrunc(b, LLVMBuildLShr(b, u, LLVMConstInt(i32, 16, 0), ""), i16, ""),
                                    LLVMConstInt(i16, 0x40, 0), "");
    LLVMValueRef isnan = LLVMBuildFCmp(b, LLVMRealUNO, f, f, "");
    return LLVMBuildSelect(b, isnan, qnan, rounded, "");
}

/* Stores a compute-type value as dtype dt. */
static inline void lo_store(LlvmEmit *e, IrDType dt, LLVMValueRef base, LLVMValueRef off, LLVMValueRef v) {
    LLVMTypeRef t = lo_store_t(e, dt);
    if (dt == IR_DTYPE_F16) v = LLVMBuildFPTrunc(e->b, v, t, "");
    else if (dt == IR_DTYPE_BF16) v = lo_f32_to_bf16(e, v);
    LLVMBuildStore(e->b, v, lo_gep(e, t, base, off));
}

static inline LLVMValueRef lo_intrinsic(LlvmEmit *e, const char *name, LLVMTypeRef ty, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->mod, id, &ty, 1);
    LLVMTypeRef ft = LLVMIntrinsicGetType(e->ctx, id, &ty, 1);
    return LLVMBuildCall2(e->b, ft, f, args, n, "");
}

/* A private constant global holding init (8-byte aligned), as the kernels pass tables to the
 * runtime's helpers. */
static inline LLVMValueRef lo_const_global(LlvmEmit *e, LLVMValueRef init, const char *name) {
    LLVMValueRef gv = LLVMAddGlobal(e->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMPrivateLinkage);
    LLVMSetAlignment(gv, 8);
    return gv;
}

static inline LLVMValueRef lo_const_array(LlvmEmit *e, LLVMTypeRef et, LLVMValueRef *vals, uint64_t n, const char *name) {
    return lo_const_global(e, LLVMConstArray2(et, vals, n), name);
}

/* n bytes of data (copied); NULL never (LLVM owns the copy). */
static inline LLVMValueRef lo_const_bytes(LlvmEmit *e, const void *data, size_t n, const char *name) {
    return lo_const_global(e, LLVMConstStringInContext(e->ctx, data, (unsigned)n, 1), name);
}

/* n int64 values; NULL when out of memory. */
static inline LLVMValueRef lo_const_i64s(LlvmEmit *e, const int64_t *v, int64_t n, const char *name) {
    LLVMValueRef *vals = malloc((size_t)(n ? n : 1) * sizeof *vals);
    if (!vals) return NULL;
    for (int64_t i = 0; i < n; i++) vals[i] = LLVMConstInt(LLVMInt64TypeInContext(e->ctx), (unsigned long long)v[i], 1);
    LLVMValueRef gv = lo_const_array(e, LLVMInt64TypeInContext(e->ctx), vals, (uint64_t)n, name);
    free(vals);
    return gv;
}

/* n int64 values given as LLVM values (a runtime function's parameter array): a constant global
 * when every one is a constant (static shapes), else an array on the stack holding this run's
 * values; NULL when out of memory. */
static inline LLVMValueRef lo_i64s(LlvmEmit *e, LLVMValueRef *v, uint32_t n, const char *name) {
    LLVMTypeRef t = LLVMInt64TypeInContext(e->ctx);
    bool all_const = true;
    for (uint32_t i = 0; i < n; i++) all_const &= LLVMIsAConstantInt(v[i]) != 0;
    if (all_const) return lo_const_array(e, t, v, n, name);
    LLVMValueRef a = LLVMBuildAlloca(e->ab, LLVMArrayType2(t, n), name);
    for (uint32_t i = 0; i < n; i++) {
        LLVMValueRef k = LLVMConstInt(t, i, 0);
        LLVMBuildStore(e->b, v[i], LLVMBuildGEP2(e->b, t, a, &k, 1, ""));
    }
    return a;
}

/* Calls the runtime function in slot `slot` of the function table (IrtFnTable) with args, its
 * parameter types the arguments' own; ret its result type (void: NULL). */
static inline LLVMValueRef lo_call_runtime(LlvmEmit *e, int slot, LLVMTypeRef ret, LLVMValueRef *args, unsigned n) {
    LLVMTypeRef ptr = LLVMPointerTypeInContext(e->ctx, 0), ps[16];
    for (unsigned i = 0; i < n && i < 16; i++) ps[i] = LLVMTypeOf(args[i]);
    LLVMValueRef idx = LLVMConstInt(LLVMInt64TypeInContext(e->ctx), (unsigned long long)slot, 0);
    LLVMValueRef fn = LLVMBuildLoad2(e->b, ptr, LLVMBuildGEP2(e->b, ptr, e->fns, &idx, 1, ""), "");
    LLVMTypeRef ft = LLVMFunctionType(ret ? ret : LLVMVoidTypeInContext(e->ctx), ps, n, 0);
    return LLVMBuildCall2(e->b, ft, fn, args, n, "");
}

/* Fails the run with msg (irt_fail on the run's context in slot lower_sym_slot + 1): the kernel
 * goes on, the run returns the message. */
static inline void lo_run_fail(LlvmEmit *e, const char *msg) {
    LLVMValueRef args[2] = {lo_buf(e, lower_sym_slot(e->g) + 1), LLVMBuildGlobalStringPtr(e->b, msg, "msg")};
    lo_call_runtime(e, IRT_FN_FAIL, NULL, args, 2);
}

/* Fails the run with msg when cond (i1) holds; the kernel goes on either way. */
static inline void lo_fail_if(LlvmEmit *e, LLVMValueRef cond, const char *msg) {
    LLVMBasicBlockRef after = llvm_if_begin(e->b, e->fn, cond);
    lo_run_fail(e, msg);
    llvm_if_end(e->b, after);
}

/* A condition (i1) under which the kernel must not run: *refuse when it is the constant true,
 * nothing when the constant false (NULL), else checked at run time, where the run fails with msg
 * and what follows up to lo_if_end on the block returned is skipped. */
static inline LLVMBasicBlockRef lo_run_guard(LlvmEmit *e, LLVMValueRef bad, const char *msg, bool *refuse) {
    *refuse = LLVMIsAConstantInt(bad) && LLVMConstIntGetZExtValue(bad);
    if (LLVMIsAConstantInt(bad)) return NULL;
    lo_fail_if(e, bad, msg);
    return llvm_if_begin(e->b, e->fn, LLVMBuildNot(e->b, bad, ""));
}

/* Whether v is an integer constant (its value in *c), false for a run-time value. */
static inline bool lo_const_int(LLVMValueRef v, int64_t *c) {
    if (!v || !LLVMIsAConstantInt(v)) return false;
    *c = LLVMConstIntGetSExtValue(v);
    return true;
}

/* v clamped to [lo, hi] (i64 values, signed). */
static inline LLVMValueRef lo_iclamp(LlvmEmit *e, LLVMValueRef v, LLVMValueRef lo, LLVMValueRef hi) {
    v = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, v, lo, ""), lo, v, "");
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, hi, v, ""), hi, v, "");
}

/* A mutable scalar of type t in the kernel's entry block. */
static inline LLVMValueRef lo_var(LlvmEmit *e, LLVMTypeRef t, LLVMValueRef init) {
    LLVMValueRef a = LLVMBuildAlloca(e->ab, t, "");
    LLVMBuildStore(e->b, init, a);
    return a;
}

/* A counted loop 0..n-1 (n >= 1 constant), test at the bottom. */
typedef LlvmLoop LoLoop;

static inline void lo_loop_begin(LlvmEmit *e, LoLoop *l, int64_t n) { llvm_loop_begin(e->b, e->fn, l, n); }
static inline void lo_loop_end(LlvmEmit *e, LoLoop *l) { llvm_loop_end(e->b, e->fn, l); }

/* if (cond) { then } : returns the block after; the builder is left in the then-block. */
static inline LLVMBasicBlockRef lo_if_begin(LlvmEmit *e, LLVMValueRef cond) { return llvm_if_begin(e->b, e->fn, cond); }
static inline void lo_if_end(LlvmEmit *e, LLVMBasicBlockRef after) { llvm_if_end(e->b, after); }

/* Loop nest over dims: offs[j] = base[j] + sum_k i_k * strides[j][k]; idx[k] = i_k (NULL for
 * size-1 dims... given as constant 0). Nothing is emitted for an empty shape. */
typedef void (*LoBody)(LlvmEmit *e, LLVMValueRef *offs, LLVMValueRef *idx, void *user);

static inline void lo_nest_rec(LlvmEmit *e, uint32_t k, uint32_t rank, const int64_t *dims, uint32_t n_ops,
                               int64_t (*strides)[LLVM_OPS_MAX_NEST], LLVMValueRef *offs, LLVMValueRef *idx, LoBody body,
                               void *user) {
    if (k == rank) {
        body(e, offs, idx, user);
        return;
    }
    if (dims[k] == 1) {
        idx[k] = lo_i64(e, 0);
        lo_nest_rec(e, k + 1, rank, dims, n_ops, strides, offs, idx, body, user);
        return;
    }
    LoLoop l;
    lo_loop_begin(e, &l, dims[k]);
    idx[k] = l.iv;
    LLVMValueRef inner[LLVM_OPS_MAX_OPS];
    for (uint32_t j = 0; j < n_ops; j++)
        inner[j] = strides[j][k] ? LLVMBuildNSWAdd(e->b, offs[j], LLVMBuildNSWMul(e->b, l.iv, lo_i64(e, strides[j][k]), ""), "")
                                 : offs[j];
    lo_nest_rec(e, k + 1, rank, dims, n_ops, strides, inner, idx, body, user);
    lo_loop_end(e, &l);
}

static inline void lo_nest(LlvmEmit *e, uint32_t rank, const int64_t *dims, uint32_t n_ops,
                           int64_t (*strides)[LLVM_OPS_MAX_NEST], const int64_t *base, LoBody body, void *user) {
    if (ir_shape_numel(rank, dims) == 0) return;
    LLVMValueRef offs[LLVM_OPS_MAX_OPS], idx[LLVM_OPS_MAX_NEST];
    for (uint32_t j = 0; j < n_ops; j++) offs[j] = lo_i64(e, base ? base[j] : 0);
    lo_nest_rec(e, 0, rank, dims, n_ops, strides, offs, idx, body, user);
}

#endif
