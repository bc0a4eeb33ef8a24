/* Internal interface of the CUDA backend (backend/cuda): the NVPTX code generator builds one
 * LLVM module of kernels plus a list of steps (kernel launches, device copies, cuBLASLt GEMMs)
 * that the runtime (backend/runtime/cuda_rt.c) replays on a stream. Buffers are the CPU
 * backend's slots (value ids, then per-node scratch; lower_plan_memory) plus one extra "tail"
 * slot after the planned workspace for CUDA-only scratch (FP8 transposes, dequantized operands). */
#ifndef IRTOOL_CUDA_INTERNAL_H
#define IRTOOL_CUDA_INTERNAL_H

#include "backend/llvm/emit.h"

#define CU_MAX_ARGS 24
#define CU_BLOCK 256 /* threads per block of grid-stride kernels */

typedef enum CuStepKind { CU_STEP_KERNEL, CU_STEP_COPY, CU_STEP_MEMSET, CU_STEP_GEMM } CuStepKind;

typedef struct CuArg {
    uint32_t slot;
    int64_t off; /* bytes added to the slot's device address */
} CuArg;

/* Row-major Y[batch][M,N] = alpha * op(A) @ op(B) through cuBLASLt. dt: "f32", "bf16" or "e4m3"
 * (then a_scale/b_scale are scalar device values, slot 0 = none, and Y is f32; B is given
 * transposed, [N,K], as FP8 GEMMs need the TN layout). Strides in elements. */
typedef struct CuGemm {
    char dt[8];
    int ta, tb;
    int64_t m, n, k, lda, ldb, ldc, batch, sa, sb, sc;
    double alpha;
    CuArg a, b, c;
    uint32_t as_slot, bs_slot;
    uint32_t bias_slot; /* f32 [N] added to every row by cuBLASLt's BIAS epilogue (0 = none) */
} CuGemm;

/* Symbolic shapes: a size field of a step (work, bytes, a GEMM's dims, strides and batch) that is
 * negative is the value of formula -1 - field, evaluated on the host at launch from the run's
 * symbols (CuModule.fx; the manifest's `fx K RPN` lines, `=K` in the step). */
#define CU_FX(k) (-1 - (int64_t)(k))

typedef struct CuStep {
    CuStepKind kind;
    uint32_t node;   /* index of the node in the top-level region */
    uint32_t kernel; /* CU_STEP_KERNEL: index into CuModule.k */
    uint32_t n_args;
    CuArg arg[CU_MAX_ARGS]; /* kernel parameters; COPY: dst, src; MEMSET: dst */
    int64_t work;           /* grid-stride kernels: work items; row kernels: rows (= blocks) */
    int64_t bytes;          /* COPY, MEMSET */
    int value;              /* MEMSET */
    CuGemm gemm;
} CuStep;

typedef struct CuKernel {
    char name[24];
    uint32_t node, block, n_params;
    bool rows;             /* one block per row (else grid-stride) */
    int regs, smem, stack; /* from the assembler (-1 until known) */
} CuKernel;

typedef struct CuModule {
    CuKernel *k;
    uint32_t n_k, cap_k;
    CuStep *s;
    uint32_t n_s, cap_s;
    uint32_t tail_slot; /* slot id of the CUDA-only scratch (= the plan's n_slots) */
    int64_t tail_bytes; /* its size (0 = unused) */
    bool uses_fp8_ptx;  /* inline cvt.*.e4m3x2 (sm_89+) */
    /* constants derived at compile time (FP8 weights laid out as [N, K]); slots tail_slot + 1.. */
    uint32_t n_extra;
    IrArtifactConst *extra; /* data malloc'd */
    IrValueId *extra_of;    /* the constant each extra one was derived from */
    /* symbolic shapes: kernels take the symbol array (slot sym_slot = tail_slot, int64 values
     * by symbol id) as their last parameter; fx are the host formulas of the sizes (postfix:
     * integers, sN = symbol N, + - * / % and < > for min and max) */
    bool symbolic;
    uint32_t sym_slot;
    char **fx;
    uint32_t n_fx, cap_fx;
    bool fx_failed; /* out of memory recording one (the build then fails) */
} CuModule;

/* sm: 80, 89, 90 (arch_suffix "a" for sm_90a is the target's business, not the generator's). */
IrStatus cuda_build_module(const IrGraph *g, int sm, const char *target_name, LLVMContextRef ctx, IrDiag *diag,
                           LLVMModuleRef *mod, CuModule *out) IR_MUST_CHECK;
/* The postfix formula of dim expression x (appended to b; false for an unknown dim). */
bool cuda_fx_text(const IrGraph *g, IrExprId x, IrStrBuf *b);
/* Formula index of text in m (added when new); -1 when out of memory. */
int64_t cuda_fx_add(CuModule *m, const char *text);
void cuda_module_free(CuModule *m);

/* The op table (backend/cuda/cuda_ops.def): a row's emitter, or why the op has none. */
struct Cu;
typedef struct CudaOpRow {
    IrStatus (*emit)(struct Cu *c);
    const char *none;
} CudaOpRow;
const CudaOpRow *cuda_op_row(IrOp op);

/* The CUDA target's scratch for the memory plan (LowerPlanHooks): a Conv's im2col matrix unless
 * it is pointwise. */
int64_t cuda_plan_scratch(const IrGraph *g, IrNodeId n, const int64_t *sym, void *user);

#endif
