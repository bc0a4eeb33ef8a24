/* Target-independent helpers shared by the CPU code generator (llvm_codegen.c, llvm_ops_*.c) and
 * the CUDA one (cuda_codegen.c): shape arithmetic, small constant operands, 2-D window geometry
 * and its index math, and the operand geometry of Transpose/Slice/Concat (strided-copy plans),
 * Conv and MatMul. Nothing here depends on the target: emitters take the builder and the index
 * type. Functions returning `const char *` give NULL or the reason a case is not supported.
 */
#ifndef IRTOOL_LLVM_COMMON_H
#define IRTOOL_LLVM_COMMON_H

#include "backend/llvm_internal.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

static inline int64_t lo_numel(uint32_t r, const int64_t *d) {
    int64_t n = 1;
    for (uint32_t i = 0; i < r; i++) n *= d[i];
    return n;
}

/* Row-major (dense) strides of (r, d). */
static inline void lo_strides(uint32_t r, const int64_t *d, int64_t *s) {
    int64_t k = 1;
    for (uint32_t i = r; i-- > 0;) {
        s[i] = k;
        k *= d[i];
    }
}

/* Strides of (r, d) broadcast (numpy rules) to rank orank. */
static inline void lo_bcast_strides(uint32_t r, const int64_t *d, uint32_t orank, int64_t *out) {
    int64_t s[IR_MAX_RANK];
    lo_strides(r, d, s);
    for (uint32_t k = 0; k < orank; k++) {
        int32_t i = (int32_t)k - (int32_t)(orank - r);
        out[k] = (i < 0 || d[i] == 1) ? 0 : s[i];
    }
}

static inline int64_t lo_norm_axis(int64_t a, uint32_t r) { return a < 0 ? a + (int64_t)r : a; }

/* A counted loop 0..n-1 (n >= 1) at builder b in function fn, tested at the bottom; iv is i64. */
typedef struct LlvmLoop {
    LLVMValueRef iv;
    LLVMBasicBlockRef head;
    int64_t n;
    LLVMValueRef nv;        /* llvm_loop_begin_v: the trip count as a value (n unused) */
    LLVMBasicBlockRef exit; /* llvm_loop_begin_v: where a zero trip count jumps */
} LlvmLoop;
void llvm_loop_begin(LLVMBuilderRef b, LLVMValueRef fn, LlvmLoop *l, int64_t n);
/* The same loop over a trip count known at run time (an i64 value, 0 allowed: the body is
 * skipped); closed by llvm_loop_end. */
void llvm_loop_begin_v(LLVMBuilderRef b, LLVMValueRef fn, LlvmLoop *l, LLVMValueRef n);
void llvm_loop_end(LLVMBuilderRef b, LLVMValueRef fn, LlvmLoop *l);
/* if (cond) { ... }: returns the block after it; the builder is left in the then-block. */
LLVMBasicBlockRef llvm_if_begin(LLVMBuilderRef b, LLVMValueRef fn, LLVMValueRef cond);
void llvm_if_end(LLVMBuilderRef b, LLVMBasicBlockRef after);

/* e^x for an f32 (or f32 vector) value as arithmetic that vectorizes (llvm_common.c). */
LLVMValueRef llvm_exp_f32(LLVMBuilderRef b, LLVMValueRef x);
/* tanh and erf the same way (rational approximations, a few ulp from tanhf/erff). */
LLVMValueRef llvm_tanh_f32(LLVMBuilderRef b, LLVMValueRef x);
LLVMValueRef llvm_erf_f32(LLVMBuilderRef b, LLVMValueRef x);
/* A constant vector of `lanes` copies of constant c. */
LLVMValueRef llvm_splat_const(LLVMValueRef c, unsigned lanes);
/* Masked vector memory at builder b (alignment 4): llvm.masked.load of vector type vt at p
 * under mask (lanes outside it read as zero, never touched) and llvm.masked.store of v. */
LLVMValueRef llvm_masked_load(LLVMBuilderRef b, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask);
void llvm_masked_store(LLVMBuilderRef b, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask);
/* The constant mask of lanes [0, lanes) out of `width` (at most 64). */
LLVMValueRef llvm_lane_mask(LLVMContextRef ctx, unsigned width, int64_t lanes);
/* `width` floats at p, only lanes [0, lanes) read when lanes < width (the rest zero); and v's
 * first `lanes` lanes stored at p. A plain load/store when lanes covers the vector. */
LLVMValueRef llvm_load_lanes(LLVMBuilderRef b, LLVMValueRef p, unsigned width, int64_t lanes);
void llvm_store_lanes(LLVMBuilderRef b, LLVMValueRef v, LLVMValueRef p, int64_t lanes);

static inline IrDType llvm_value_dtype(const IrGraph *g, IrValueId v) { return ir_type_dtype(g, ir_value_type(g, v)); }

/* LLVM's default<O3> pipeline for tm on mod; on failure "what: LLVM's message" is reported and
 * IR_EUNSUPPORTED returned. */
IrStatus llvm_run_o3(LLVMModuleRef mod, LLVMTargetMachineRef tm, const char *what, IrDiag *diag) IR_MUST_CHECK;

/* Reads a small constant integer operand (graph constant or Constant node); false otherwise. */
bool lo_const_ints(const IrGraph *g, IrValueId v, int64_t *vals, uint32_t *n, uint32_t cap);

/* ---- 2-D (NCHW) windows of Conv and pooling ------------------------------------------------ */
typedef struct LlvmWin {
    int64_t n, c, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
} LlvmWin;
/* Window geometry of node n (input x, output y, kernel kh x kw) from its attributes. */
const char *llvm_win_read(const IrGraph *g, IrNodeId n, IrValueId x, IrValueId y, int64_t kh, int64_t kw,
                          LlvmWin *wn);
/* Strides, dilations and leading pads of a 2-D window op (sh, sw, dh, dw, pt, pl into a[0..5];
 * auto_pad NOTSET or VALID), or the reason it is not supported. */
const char *llvm_win_attrs(const IrGraph *g, IrNodeId n, int64_t *a);
/* Input row (or column) of output coordinate o and window tap k: o * stride - pad + k * dil. */
LLVMValueRef llvm_win_coord(LLVMBuilderRef b, LLVMTypeRef it, LLVMValueRef o, int64_t stride, int64_t pad,
                            LLVMValueRef k, int64_t dil);
/* In-bounds test (*valid) and clamped offset in its plane of input pixel (ih, iw). */
LLVMValueRef llvm_win_pix(LLVMBuilderRef b, LLVMTypeRef it, const LlvmWin *wn, LLVMValueRef ih, LLVMValueRef iw,
                          LLVMValueRef *valid);

/* Conv (f32, 2-D, grouped): the window, groups, output channels, channels per group (cg), output
 * channels per group (ocg), rows of the im2col matrix (k = cg * kh * kw) and output plane size. */
typedef struct LlvmConvGeom {
    LlvmWin w;
    int64_t groups, oc, cg, ocg, k, ohw;
} LlvmConvGeom;
const char *llvm_conv_read(const IrGraph *g, IrNodeId n, LlvmConvGeom *cv);

/* MatMul operand shapes: 1-D operands promoted to 2-D (da, db), the broadcast batch dims bd
 * (rank br, nb batches; A's batch rank ra - 2, B's rb - 2) and Y[batch][m, n] = A[m, k] @ B[k, n]. */
typedef struct LlvmMatMulShape {
    uint32_t ra, rb, ry, br;
    int64_t da[IR_MAX_RANK + 1], db[IR_MAX_RANK + 1], dy[IR_MAX_RANK], bd[IR_MAX_RANK];
    int64_t m, k, n, nb;
} LlvmMatMulShape;
const char *llvm_matmul_shape(const IrGraph *g, IrNodeId n, LlvmMatMulShape *ms);

/* Gemm (f32, 2-D): Y[m, n] = alpha * op(A)[m, k] @ op(B)[k, n] + beta * C; C's shape in (rc, dc)
 * (rc = 0 without C). */
typedef struct LlvmGemmShape {
    bool ta, tb;
    double alpha, beta;
    int64_t m, n, k, lda, ldb;
    uint32_t rc;
    int64_t dy[2], dc[IR_MAX_RANK];
} LlvmGemmShape;
const char *llvm_gemm_shape(const IrGraph *g, IrNodeId n, LlvmGemmShape *gs);

/* Reduction over adjacent axes (ReduceX with an `axes` attribute or constant operand, all axes
 * when none; GlobalAveragePool over the spatial axes) viewed as [outer, len, inner]. */
typedef struct LlvmReduceShape {
    int64_t outer, len, inner;
} LlvmReduceShape;
const char *llvm_reduce_shape(const IrGraph *g, IrNodeId n, IrOp op, LlvmReduceShape *rs);

/* ---- data movement as strided copies ---------------------------------------------------------
 * y[base[0] + sum i_k * s[0][k]] = x[base[1] + sum i_k * s[1][k]] over dims (rank). */
typedef struct LlvmCopyPlan {
    uint32_t rank;
    int64_t dims[IR_MAX_RANK];
    int64_t s[2][IR_MAX_RANK];
    int64_t base[2];
} LlvmCopyPlan;
const char *llvm_transpose_plan(const IrGraph *g, IrNodeId n, LlvmCopyPlan *p);
/* Slice with constant starts/ends/axes/steps. */
const char *llvm_slice_plan(const IrGraph *g, IrNodeId n, LlvmCopyPlan *p);
/* Operand i of Concat placed at *pos along the axis; *pos is advanced past it. */
const char *llvm_concat_part(const IrGraph *g, IrNodeId n, uint32_t i, int64_t *pos, LlvmCopyPlan *p);

/* Whether a max pool takes v over acc, as the interpreter: v greater, or the first NaN (which
 * then stays: nothing compares greater than it); scalars or vectors. */
static inline LLVMValueRef pool_max_takes(LLVMBuilderRef b, LLVMValueRef v, LLVMValueRef acc) {
    LLVMValueRef nan = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), LLVMBuildFCmp(b, LLVMRealORD, acc, acc, ""), "");
    return LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOGT, v, acc, ""), nan, "");
}
static inline LLVMValueRef pool_max_step(LLVMBuilderRef b, LLVMValueRef v, LLVMValueRef acc) {
    return LLVMBuildSelect(b, pool_max_takes(b, v, acc), v, acc, "");
}

#endif
