/* The emit kit both code generators use (CPU in backend/cpu, CUDA in backend/cuda): the kernel
 * being emitted and its buffer slots, counted loops and ifs, vector math (exp, tanh, erf), masked
 * vector memory, the index math of window taps and LLVM's O3 pipeline. Typed loads and stores and
 * loop nests over a kernel's buffers are in llvm/typed.h.
 */
#ifndef IRTOOL_LLVM_EMIT_H
#define IRTOOL_LLVM_EMIT_H

#include "backend/lower/lower.h"
#include "backend/runtime/abi.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* ---- kernels and their slots ----------------------------------------------------------------
 * A kernel `void k(void **args, const IrtFnTable *fns)` reaches its buffers through its own
 * argument array: args[j] is the buffer of slot slots[j] (a value id, or num_values + 1 + node
 * index for scratch), numbered in order of first use. The entry fills one array per kernel
 * from the program's bufs, so a kernel's code does not depend on the model's value numbering
 * and identical kernels of different models are the same code (one compile cache entry). */
typedef struct LlvmSlots {
    uint32_t *v;
    uint32_t n, cap;
} LlvmSlots;
/* Local index of slot in s (appended when new; UINT32_MAX when out of memory). */
uint32_t llvm_slot_local(LlvmSlots *s, uint32_t slot);

/* ---- the kernel being emitted ----------------------------------------------------------------
 * The generator creates the kernel function and positions the builders (b in the body, ab
 * before the entry block's terminator for allocas), then hands the node to the emitter its op
 * table row names. */
typedef struct LlvmEmit {
    const IrGraph *g;
    IrDiag *diag;
    IrNodeId node;
    uint32_t index;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b, ab;
    LLVMValueRef fn, bufs, fns;
    LlvmSlots *slots; /* bufs holds the kernel's slots in this order */
    void *owner;      /* the generator's own state (cpu/codegen.c's), NULL when it has none */
    bool uses_blas;   /* set by an emitter whose kernel calls the BLAS GEMM */
    /* run-time shapes (llvm/dims.h): the symbol array once loaded in this function (NULL until
     * then; a copy of the context for another function must clear it), and in a kernel run in
     * parts this part's number and the count of parts (NULL otherwise) */
    LLVMValueRef syms, part, np;
    bool part_used; /* the first nest has taken the parts */
} LlvmEmit;

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
/* This part's share [*lo, *hi) of n units when a kernel runs in np parts (i64 values; constants
 * fold): [part * n / np, (part + 1) * n / np), and all of them for part < 0 (irt_parallel
 * running the kernel whole on one thread). */
void llvm_part_range(LLVMBuilderRef b, LLVMValueRef part, LLVMValueRef n, LLVMValueRef np, LLVMValueRef *lo,
                     LLVMValueRef *hi);
/* if (cond) { ... }: returns the block after it; the builder is left in the then-block. */
LLVMBasicBlockRef llvm_if_begin(LLVMBuilderRef b, LLVMValueRef fn, LLVMValueRef cond);
void llvm_if_end(LLVMBuilderRef b, LLVMBasicBlockRef after);

/* e^x for an f32 (or f32 vector) value as arithmetic that vectorizes (llvm/emit.c). */
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

/* LLVM's default<O3> pipeline for tm on mod; on failure "what: LLVM's message" is reported and
 * IR_EUNSUPPORTED returned. */
IrStatus llvm_run_o3(LLVMModuleRef mod, LLVMTargetMachineRef tm, const char *what, IrDiag *diag) IR_MUST_CHECK;

/* Input row (or column) of output coordinate o and window tap k: o * stride - pad + k * dil. */
LLVMValueRef llvm_win_coord(LLVMBuilderRef b, LLVMTypeRef it, LLVMValueRef o, int64_t stride, int64_t pad,
                            LLVMValueRef k, int64_t dil);
/* In-bounds test (*valid) and clamped offset in its plane of input pixel (ih, iw). */
LLVMValueRef llvm_win_pix(LLVMBuilderRef b, LLVMTypeRef it, const LowerWin *wn, LLVMValueRef ih, LLVMValueRef iw,
                          LLVMValueRef *valid);

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
