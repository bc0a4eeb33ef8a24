/* Internal interface of the CPU backend (backend/cpu): the code generator (codegen.c, one file
 * per op family, the run-time-shape kernels in dyn.c), the GEMM, AMX and Winograd emitters, and
 * the JIT program (jit.c). Not installed; tools use backend/backend.h. */
#ifndef IRTOOL_CPU_H
#define IRTOOL_CPU_H

#include "backend/llvm/dims.h"
#include "backend/llvm/typed.h"

#include <llvm-c/Core.h>

/* The CPU target's memory-plan hooks (lower_plan_memory): each node's scratch as its kernel
 * needs it (llvm_node_scratch_bytes, or the run-time-shape kernels' at the binding), Concats in
 * place on vector targets. simd_bits must outlive the hooks. */
int64_t llvm_plan_scratch(const IrGraph *g, IrNodeId n, const int64_t *sym, void *simd_bits);
static inline LowerPlanHooks llvm_plan_hooks(const unsigned *simd_bits) {
    return (LowerPlanHooks){.scratch = llvm_plan_scratch, .user = (void *)simd_bits, .concat_in_place = *simd_bits != 0};
}
/* Scratch bytes node n needs during its kernel (Conv's im2col buffer); 0 for none. The plan
 * places it in the workspace and the run binds it to bufs[num_values + 1 + node index]. */
int64_t llvm_node_scratch_bytes(const IrGraph *g, IrNodeId n, unsigned simd_bits);

/* Whether fused group n is compiled as one contraction kernel: a Conv, Gemm or MatMul followed
 * by a chain of supported f32 elementwise members applied to its output blocks as they are
 * produced (cpu/codegen.c). With need_static, also the shapes (see there). */
bool llvm_fused_epilogue_group(const IrGraph *g, IrNodeId n, bool need_static);

/* Whether fused group n is compiled as one row-reduction kernel: one Softmax, LogSoftmax,
 * LayerNormalization or last-axis ReduceSum/Mean/Max/Min with f32 elementwise members computing
 * its input and using its output (cpu/codegen.c). Needs static shapes. */
bool llvm_fused_row_group(const IrGraph *g, IrNodeId n);
/* Whether fused group n is compiled as one attention kernel: MatMul(Q', K^T), elementwise members
 * on the scores, Softmax over the keys, MatMul with V, Q' from Q through elementwise members
 * (cpu/codegen.c). Needs static shapes. */
bool llvm_fused_attention_group(const IrGraph *g, IrNodeId n);

struct LlvmDerived;
/* Builds the module for g's top-level region in ctx: internal kernels k0, k1, ... and the
 * entry `irt_entry(void **bufs, const IrtFnTable *fns)`. The data kernels derive from
 * constants at compile time (packed Conv weights, Winograd's transformed weights) goes to
 * *derived (*n_derived entries, malloc'd; the caller binds each to bufs[slot] and frees it),
 * in slots lower_sym_slot(g) + 2, + 3, ...: not into the module as constants (113 MB of them for
 * ResNet-50, which then ran 5-10% slower in the JIT than as an artifact). */
IrStatus llvm_build_module(const IrGraph *g, LLVMContextRef ctx, unsigned simd_bits, IrDiag *diag, LLVMModuleRef *out,
                           uint32_t *n_kernels, struct LlvmDerived **derived, uint32_t *n_derived) IR_MUST_CHECK;

/* Whether the module built by llvm_build_module calls GEMM (then BLAS must be loaded first:
 * irt_blas_require). */
bool llvm_module_uses_blas(LLVMModuleRef mod);
/* Data a kernel derives from constants at compile time (Conv weights packed for the GEMM,
 * Winograd-transformed weights), read at run time from buffer slot `slot` instead of being a
 * constant of its code (data malloc'd; NULL when the kernel has none). */
typedef struct LlvmDerived {
    uint32_t slot;
    void *data;
    size_t len;
} LlvmDerived;
/* One kernel in its own module (external function `name`), for the per-kernel compile cache;
 * *mod is NULL when node n needs no kernel (Constant, ConstantOfShape). slots is filled. With
 * derived_slot > 0, data the kernel derives at compile time goes to *derived (slot
 * derived_slot; the caller binds and frees it) instead of into the module, so the code stays
 * small (an artifact maps constants in place but copies its code) and the kernel's object is
 * shared by models whose weights differ. */
IrStatus llvm_build_kernel(const IrGraph *g, LLVMContextRef ctx, unsigned simd_bits, IrNodeId n, uint32_t index,
                           const char *name, IrDiag *diag, LLVMModuleRef *mod, LlvmSlots *slots, uint32_t derived_slot,
                           LlvmDerived *derived) IR_MUST_CHECK;
/* Adds to mod `irt_entry(bufs, fns)` calling the external kernels names[i] with their slots. */
IrStatus llvm_build_entry(LLVMModuleRef mod, uint32_t nk, char *const *names, const LlvmSlots *slots,
                          IrDiag *diag) IR_MUST_CHECK;

/* ---- the op table (backend/cpu/cpu_ops.def, expanded in ops.c) ----------------------------- */
struct Dyn;
enum { CPU_DYN_NEST = 1, CPU_ONCE = 2, CPU_STR_ALWAYS = 4, CPU_BLAS = 8, CPU_ANY_SHAPE = 16 };
typedef struct CpuOpRow {
    IrStatus (*emit)(LlvmEmit *e);
    bool (*parts)(const IrGraph *g, IrNodeId n);
    IrStatus (*emit_dyn)(struct Dyn *d);
    IrStatus (*emit_str)(LlvmEmit *e);
    unsigned flags;
    const char *none; /* CPU_NONE rows: why the op has no CPU kernel */
} CpuOpRow;
/* The row of op (a row with nothing set and a reason for ids outside the table). */
const CpuOpRow *cpu_op_row(IrOp op);
/* Static-shape emitters and parts rules of cpu/codegen.c. */
IrStatus cpu_emit_ew(LlvmEmit *e) IR_MUST_CHECK;
/* backend/cpu/movement.c: strided copies for static and run-time shapes. */
IrStatus cpu_move_transpose(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_move_concat(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_move_gather(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_move_slice(LlvmEmit *e) IR_MUST_CHECK;
/* Whether node e->node is a Concat whose inputs the memory plan computed in place (nothing to copy). */
bool cpu_concat_placed(LlvmEmit *e);
IrStatus cpu_emit_contraction(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_emit_conv(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_emit_pool(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_emit_fused(LlvmEmit *e) IR_MUST_CHECK;
bool cpu_parts_ew(const IrGraph *g, IrNodeId n);
bool cpu_parts_group(const IrGraph *g, IrNodeId n);
bool cpu_parts_always(const IrGraph *g, IrNodeId n);
/* Run-time-shape and string emitters of cpu/dyn.c. */
IrStatus cpu_dyn_fused(struct Dyn *d), cpu_dyn_conv(struct Dyn *d),
    cpu_dyn_matmul(struct Dyn *d), cpu_dyn_gemm(struct Dyn *d),
    cpu_dyn_shape(struct Dyn *d),
    cpu_dyn_nonzero(struct Dyn *d), cpu_dyn_compress(struct Dyn *d), cpu_dyn_nms(struct Dyn *d), cpu_dyn_unique(struct Dyn *d),
    cpu_dyn_rnn(struct Dyn *d), cpu_dyn_fp8(struct Dyn *d);
IrStatus cpu_str_normalizer(LlvmEmit *e), cpu_str_tfidf(LlvmEmit *e), cpu_str_cast(LlvmEmit *e), cpu_str_copy(LlvmEmit *e);
/* "the llvm backend does not support OP WHY yet" at node e->node; IR_EUNSUPPORTED. */
IrStatus llvm_ops_refuse(LlvmEmit *e, const char *why) IR_MUST_CHECK;
/* Typed elementwise ops (backend/cpu/elementwise.c) and data movement / misc (cpu/data.c). */
bool llvm_ops_ew_supported(IrOp op);
IrStatus llvm_ops_ew_gen(LlvmEmit *e) IR_MUST_CHECK;
/* One point of a typed elementwise node under a loop nest the caller builds (cpu/dyn.c):
 * llvm_ops_ew_point_new checks the node and loads its buffers; llvm_ops_ew_point_inputs gives
 * the operands it reads (present[i]); llvm_ops_ew_point loads operand i at offs[i + 1], computes
 * and stores at offs[0]. Freed with free(). */
typedef struct LlvmEwPoint LlvmEwPoint;
IrStatus llvm_ops_ew_point_new(LlvmEmit *e, LlvmEwPoint **out) IR_MUST_CHECK;
uint32_t llvm_ops_ew_point_inputs(const LlvmEwPoint *p, bool *present);
void llvm_ops_ew_point(LlvmEmit *e, LlvmEwPoint *p, LLVMValueRef *offs);
/* Member m of a fused elementwise group computed on values (cpu/dyn.c): llvm_ops_ew_member_ok
 * checks it as llvm_ops_ew_point_new would (nothing reported), llvm_ops_ew_member_new prepares
 * it without buffers (llvm_ops_ew_point_inputs then gives the operands it reads), and
 * llvm_ops_ew_member computes it from its operands' compute values x (NULL where absent) into
 * the compute type of its result's dtype (booleans widened as they would be stored). */
bool llvm_ops_ew_member_ok(const IrGraph *g, IrNodeId m);
IrStatus llvm_ops_ew_member_new(LlvmEmit *e, IrNodeId m, LlvmEwPoint **out) IR_MUST_CHECK;
LLVMValueRef llvm_ops_ew_member(LlvmEmit *e, const LlvmEwPoint *p, LLVMValueRef *x);
/* Conv/pools other than what cpu/codegen.c's 2-D f32 emitters take, and ConvTranspose
 * (backend/cpu/conv.c). */
bool llvm_ops_conv_claims(const IrGraph *g, IrNodeId n);
/* NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (backend/cpu/loss.c). */
IrStatus llvm_ops_loss_gen(LlvmEmit *e) IR_MUST_CHECK;
/* Resize, its shapes, scales, sizes or roi constants or given at run time (backend/cpu/resize.c). */
IrStatus llvm_ops_resize_gen(LlvmEmit *e) IR_MUST_CHECK;
/* Scratch of a Resize whose taps are computed at run time (scales or roi given at run time, or
 * run-time shapes) at the binding sym (NULL: static shapes), and as a LowerScratchForm. */
int64_t llvm_ops_resize_scratch_bytes(const IrGraph *g, IrNodeId n, const int64_t *sym);
bool llvm_ops_resize_scratch_form(const IrGraph *g, IrNodeId n, LowerScratchForm *f);
/* Conv, ConvTranspose and the pools of any rank, dtype and padding (backend/cpu/conv.c). */
IrStatus llvm_ops_conv_gen(LlvmEmit *e) IR_MUST_CHECK;
IrStatus llvm_ops_conv_transpose_gen(LlvmEmit *e) IR_MUST_CHECK;
IrStatus llvm_ops_pool_nd_gen(LlvmEmit *e) IR_MUST_CHECK;
/* MatMulInteger and QLinearMatMul through the runtime's irt_qmatmul (backend/cpu/quant.c). */
IrStatus llvm_ops_qmm_gen(LlvmEmit *e) IR_MUST_CHECK;
IrStatus llvm_ops_qconv_gen(LlvmEmit *e) IR_MUST_CHECK; /* ConvInteger, QLinearConv: irt_qconv */
/* Det (irt_det), RoiAlign, the optimizers, the random ops and MaxUnpool (backend/cpu/misc.c), and
 * Det's scratch: with static dims, at the binding sym, and as a form of the symbols. */
IrStatus llvm_ops_misc_gen(LlvmEmit *e) IR_MUST_CHECK;
int64_t llvm_ops_misc_scratch_bytes(const IrGraph *g, IrNodeId n);
int64_t llvm_ops_misc_scratch_at(const IrGraph *g, IrNodeId n, const int64_t *sym);
bool llvm_ops_misc_scratch_form(const IrGraph *g, IrNodeId n, LowerScratchForm *f);
/* DFT, STFT, the windows, MelWeightMatrix and Range with run-time inputs on static output
 * shapes (backend/cpu/signal.c). */
bool llvm_ops_signal_claims(IrOp op);
IrStatus llvm_ops_window_gen(LlvmEmit *e) IR_MUST_CHECK; /* Blackman, Hamming, Hann */
IrStatus llvm_ops_dft_gen(LlvmEmit *e) IR_MUST_CHECK;
IrStatus llvm_ops_stft_gen(LlvmEmit *e) IR_MUST_CHECK;
IrStatus llvm_ops_mel_gen(LlvmEmit *e) IR_MUST_CHECK;
IrStatus llvm_ops_range_gen(LlvmEmit *e) IR_MUST_CHECK;
/* irtool.quantize_fp8, irtool.dequantize_fp8 and irtool.fp8_matmul, computed as the interpreter
 * does (backend/cpu/fp8.c), and the matmul's scratch. */
bool llvm_ops_fp8_claims(IrOp op);
IrStatus llvm_ops_fp8_gen(LlvmEmit *e) IR_MUST_CHECK;
/* The same with symbolic dims evaluated by dim (cpu/dyn.c). */
IrStatus llvm_ops_fp8_gen_at(LlvmEmit *e, LLVMValueRef (*dim)(void *ctx, IrExprId x), void *ctx) IR_MUST_CHECK;
int64_t llvm_ops_fp8_scratch_bytes(const IrGraph *g, IrNodeId n);
/* RNN, GRU, LSTM through the runtime's irt_rnn (backend/cpu/rnn.c), and their scratch. */
IrStatus llvm_ops_rnn_gen(LlvmEmit *e) IR_MUST_CHECK;
/* The same with the sequence length and batch evaluated by dim (cpu/dyn.c) where symbolic. */
IrStatus llvm_ops_rnn_gen_at(LlvmEmit *e, LLVMValueRef (*dim)(void *ctx, IrExprId x), void *ctx) IR_MUST_CHECK;
int64_t llvm_ops_rnn_scratch_bytes(const IrGraph *g, IrNodeId n, const int64_t *sym); /* sym: NULL for static dims */
/* Data movement, normalizations and reductions on any dtype (backend/cpu/data.c), one entry per
 * op family; those written on llvm/dims.h serve run-time shapes too (rows flagged CPU_ANY_SHAPE). */
IrStatus cpu_data_copy(LlvmEmit *e) IR_MUST_CHECK; /* Identity, Reshape, Flatten, Squeeze, Unsqueeze */
IrStatus cpu_data_dropout(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_constant_of_shape(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_expand(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_tile(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_split(LlvmEmit *e) IR_MUST_CHECK;
/* The dims node e->node's operand values decide (lower_value_dim_syms), computed and stored into
 * the run's symbols before its kernel body; nothing for other nodes. */
IrStatus cpu_value_dims(LlvmEmit *e) IR_MUST_CHECK;
/* Slice whose starts/ends/axes/steps have a count known at run time only. */
IrStatus cpu_data_slice_any(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_pad(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_trilu(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_gather_elements(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_scatter_elements(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_topk(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_gather_nd(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_scatter_nd(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_quantize(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_dequantize(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_dynamic_quantize(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_einsum(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_depth_to_space(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_space_to_depth(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_reverse_sequence(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_grid_sample(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_eye_like(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_data_one_hot(LlvmEmit *e) IR_MUST_CHECK;

/* Reductions (backend/cpu/reduce.c), on llvm/dims.h for static and run-time shapes: every
 * Reduce* op and the GlobalPools; ArgMax/ArgMin, Hardmax and CumSum along one axis. */
IrStatus cpu_reduce(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_reduce_along(LlvmEmit *e) IR_MUST_CHECK;
/* Normalizations by statistics (backend/cpu/stats.c), on llvm/dims.h for static and run-time
 * shapes: BatchNormalization, InstanceNormalization, MeanVarianceNormalization, LRN. */
IrStatus cpu_stats_batchnorm(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_stats_inorm(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_stats_mvn(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_stats_lrn(LlvmEmit *e) IR_MUST_CHECK;

/* ---- kernels over shapes known at run time (backend/cpu/dyn.c) -----------------------------
 * A node with symbolic dims reads the run's symbol values (int64 by symbol id) from the buffer
 * of slot lower_sym_slot(g) and evaluates its dims from them. llvm_dyn_gen emits its body (or
 * refuses naming the op); llvm_build_shapes adds `irt_shapes(int64_t *syms, int64_t *out)` to
 * mod: it stores the defined symbols of sp into syms, then writes every output's dims in order,
 * the workspace bytes the binding needs under plan, each equality check of sp (a - b) and the
 * offset and bytes of each block plan places at run time (plan->dyn). */
bool llvm_dyn_node(const IrGraph *g, IrNodeId n);
/* Whether fused group n is an attention group with run-time shapes that cpu/dyn.c compiles as
 * one kernel (a chain of elementwise members on each side, constant head sizes d <= 128,
 * dv <= 64). */
bool llvm_dyn_attention_group(const IrGraph *g, IrNodeId n);
/* Whether attention group n takes that kernel, and the kernel, for static shapes too (its dims
 * LLVM constants then; the rows on the stack). */
bool cpu_attention_fits(const IrGraph *g, IrNodeId n);
IrStatus cpu_attention_emit(LlvmEmit *e) IR_MUST_CHECK;
/* Whether fused group n is an elementwise group with run-time shapes that cpu/dyn.c compiles as
 * one kernel (typed elementwise members, no f16/bf16 results, one result shape). */
bool llvm_dyn_ew_group(const IrGraph *g, IrNodeId n);
/* Whether fused group n is a contraction epilogue with run-time shapes that cpu/dyn.c compiles
 * as one kernel (a MatMul or Gemm, then typed elementwise members of its result's shape). */
bool llvm_dyn_epilogue_group(const IrGraph *g, IrNodeId n);
/* Floats per row buffer of a row group (two on the stack). */
#define LLVM_ROW_GROUP_MAX_LEN 65536
/* Whether fused group n is a row group with run-time shapes that cpu/dyn.c compiles as one
 * kernel (f32 members before and after one Softmax, LogSoftmax or LayerNormalization over a
 * last axis of constant length). */
bool llvm_dyn_row_group(const IrGraph *g, IrNodeId n);
/* Scratch a run-time-shape kernel needs (a Conv's im2col matrix) at the binding sym. */
int64_t llvm_dyn_scratch_bytes(const IrGraph *g, IrNodeId n, const int64_t *sym);
IrStatus llvm_dyn_gen(LlvmEmit *e, bool *uses_blas) IR_MUST_CHECK;
IrStatus llvm_build_shapes(LLVMModuleRef mod, const IrGraph *g, const IrSymPlan *sp, const LowerMemPlan *plan,
                           IrDiag *diag) IR_MUST_CHECK;
/* llvm_dyn_scratch_bytes as a LowerScratchForm (the memory plan's scratch_form hook, for symbols
 * without an upper bound; the plan checks the two agree). */
bool llvm_dyn_scratch_form(const IrGraph *g, IrNodeId n, LowerScratchForm *f);
/* The row family (backend/cpu/rows.c): Softmax/LogSoftmax and LayerNormalization for static
 * and run-time shapes alike, and one f32 row of them or of a trailing reduction (ReduceSum/Mean/
 * Max/Min, GlobalAveragePool), as the standalone kernels and the fused row groups of
 * cpu/codegen.c and cpu/dyn.c compute it. len and step are i64 values (constants fold). */
IrStatus cpu_rows_softmax(LlvmEmit *e) IR_MUST_CHECK;
IrStatus cpu_rows_layernorm(LlvmEmit *e) IR_MUST_CHECK;
typedef struct LlvmRow {
    IrOp op;
    LLVMValueRef x, y, scale, bias; /* f32 buffers (scale/bias: LayerNorm, one value per row element) */
    LLVMValueRef len, step;         /* row length, element stride along the row (LayerNorm: 1) */
    LLVMValueRef xoff, yoff;        /* the row's first x element; a reduction's y element (the row
                                     * ops write y along x's row) */
    double eps;
} LlvmRow;
void llvm_row_f32(LlvmEmit *e, const LlvmRow *r);

/* Packed-panel GEMM (backend/cpu/gemm.c), emitted inline at builder b of function fn (ab:
 * allocas): C = A * B, plus bias[row] * bias_scale when bias is set, for f32 row-major A [m x k]
 * (row stride lda), B [k x n] (ldb) and C [m x n] (ldc), all sizes known at compile time, with
 * vectors of simd_bits (llvm_simd_bits; 0: nothing is emitted, use BLAS). panel_done, when set,
 * is called after columns [j0, j0 + width) of C are final (the caller's epilogue). */
typedef struct LlvmPgemm {
    int64_t m, n, k, lda, ldb, ldc;
    LLVMValueRef a, b, c, bias; /* f32 pointers at the first element */
    double bias_scale;
    unsigned simd_bits;
    void (*panel_done)(void *user, LLVMValueRef j0, int64_t width);
    void *user;
    /* When set, B is the implicit im2col matrix of one input image at b (one group): row
     * (c * kh + i) * kw + j, column oh * OW + ow; ldb is unused and nothing is materialized. */
    const struct LowerWin *conv;
    /* With conv and a stride > 1: b holds the input split into stride phases (llvm_conv_phases),
     * so every tap reads a unit-stride plane and the panel rows are contiguous loads. */
    bool phased;
    /* When set, the epilogue in registers: applied to each vector of C (row `row`, columns
     * col .. col + lanes - 1) before its final store; panel_done is then not needed. */
    LLVMValueRef (*epi_vec)(void *user, LLVMValueRef v, LLVMValueRef row, LLVMValueRef col, int lanes);
    /* Optional with epi_vec: prefetches of the epilogue's operands at (row, col). */
    void (*epi_prefetch)(void *user, LLVMValueRef row, LLVMValueRef col);
    /* When set, only part `part` (an i64 value; -1: all) of n_parts equal shares of the work
     * units (llvm_pgemm_units) is done: the kernel runs them through irt_parallel. */
    LLVMValueRef part;
    int64_t n_parts;
    LLVMValueRef n_parts_rt; /* with part: the count of parts as a run-time value, instead of n_parts */
    /* When set, a is A in the emitter's packed layout (llvm_pgemm_pack_a); lda is unused. */
    bool a_packed;
    /* When set, b is B packed at compile time by llvm_pgemm_packed_b (64-byte aligned): the
     * strips read its panels in place, nothing is copied at run time; ldb and conv unused. */
    bool b_packed;
    /* With b_packed (A row-major, no panel_done): the rows as an i64 value known at run time,
     * 0 to m (m then only bounds them, for the loop order). */
    LLVMValueRef m_rt;
} LlvmPgemm;
int64_t llvm_pgemm_units(const LlvmPgemm *p);
/* A (m x k, row stride lda) into the packed layout that llvm_pgemm_emit reads with a_packed:
 * for each K block (as the emitter splits K), for each strip of 8 rows (the last may be
 * shorter), the strip's rows k-major: out[k0 * m + m0 * w + kk * h + i] = A[m0 + i][k0 + kk]
 * for a block of w columns and a strip of h rows. Strips stream from memory in order. */
void llvm_pgemm_pack_a(int64_t m, int64_t k, const float *a, int64_t lda, float *out);
/* count consecutive m x k matrices at a (row-major) packed, malloc'd (NULL when out of memory). */
float *llvm_pgemm_packed_a(int64_t count, int64_t m, int64_t k, const float *a);
/* The same in the layout of the emitter for simd_bits: strips of 8 rows on AVX-512 (as
 * llvm_pgemm_pack_a), 4 on AVX2. */
float *llvm_pgemm_packed_a_for(unsigned simd_bits, int64_t count, int64_t m, int64_t k, const float *a);
/* A prefetch of the cache line at p into L1 (never faults). */
void llvm_prefetch(LLVMBuilderRef b, LLVMValueRef p);
void llvm_prefetch_for(LLVMBuilderRef b, LLVMValueRef p, bool write);
/* The same into L1 (locality 3) or L2 only (2). */
void llvm_prefetch_at(LLVMBuilderRef b, LLVMValueRef p, bool write, unsigned locality);
/* B (k x n row-major, or with tb n x k) for b_packed: for each panel of NR columns (48 with
 * AVX-512, 24 with AVX2; the last one zero-padded to NR), its k rows of NR floats. malloc'd
 * (NULL when out of memory or the target has no vectors); llvm_pgemm_packed_b_floats floats. */
float *llvm_pgemm_packed_b(unsigned simd_bits, int64_t k, int64_t n, const float *b, bool tb);
int64_t llvm_pgemm_packed_b_floats(unsigned simd_bits, int64_t k, int64_t n);
void llvm_pgemm_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmPgemm *p);
/* A MatMul whose B is the constant vb ([k, n] f32, shared by every row) and whose A has `rows`
 * rows known only at run time (cpu/dyn.c): cpu_matmul_packed_when gives the condition (an i1 at
 * e's builder) under which cpu_matmul_packed_rows runs it on the packed GEMM with B packed at
 * compile time (the rule of the static MatMuls, on AVX2 targets), else NULL (nothing emitted:
 * the BLAS path); cpu_matmul_packed_rows writes C [rows, n] from row-major A [rows, k]. */
LLVMValueRef cpu_matmul_packed_when(LlvmEmit *e, IrValueId vb, LLVMValueRef rows, int64_t k, int64_t n);
IrStatus cpu_matmul_packed_rows(LlvmEmit *e, IrValueId vb, LLVMValueRef a, LLVMValueRef c, LLVMValueRef rows, int64_t k,
                                int64_t n) IR_MUST_CHECK;
/* C = alpha * A * op(B) for 1 to 4 rows of A (not transposed, row stride lda), B [k x n] or,
 * with tb, [n x k] (row stride ldb), C row stride ldc (backend/cpu/gemm.c): generated code
 * that streams B once. Returns false (nothing emitted) when the shape or target does not fit. */
typedef struct LlvmGemv {
    int64_t m, n, k, lda, ldb, ldc;
    bool tb;
    double alpha;
    LLVMValueRef a, b, c;
    unsigned simd_bits;
    LLVMValueRef part; /* as LlvmPgemm: this part's share of the column blocks (llvm_gemv_units) */
    int64_t n_parts;
} LlvmGemv;
bool llvm_gemv_emit(LLVMBuilderRef b, LLVMValueRef fn, const LlvmGemv *p);
/* Whether the GEMV kernel is used for this shape (1-4 rows) on this target: with AVX-512 or
 * AVX2 (every shape measured on AVX2 ran faster than OpenBLAS: docs/cpu_speed.md). */
bool llvm_gemv_fits(int64_t m, int64_t n, int64_t k, bool tb, unsigned simd_bits);
int64_t llvm_gemv_units(const LlvmGemv *p);
/* Winograd F(m x m, 3x3) for one image of a 3x3 stride-1 one-group Conv with constant
 * weights (backend/cpu/winograd.c). llvm_winograd_tile gives m (4 or 2, at most max_tile)
 * where it pays on this target and shape, else 0; the emitter needs llvm_winograd_scratch_bytes of scratch. epi_vec (optional) as LlvmPgemm's, applied
 * to output vectors of up to 64 columns (row = output channel, col = pixel). */
typedef struct LlvmWinograd {
    const struct LowerWin *w;
    int tile;
    int64_t m_out;
    const float *weights; /* [m_out][c][3][3] */
    unsigned simd_bits;   /* the target's vector bits: 512 (AVX-512) or 256 (AVX2) */
    LLVMValueRef x, y, scratch, bias; /* x, y: the image's input and output; bias may be NULL */
    LLVMValueRef u;                   /* the transformed weights (llvm_winograd_weights) */
    LLVMValueRef (*epi_vec)(void *user, LLVMValueRef v, LLVMValueRef row, LLVMValueRef col, int lanes);
    /* Optional with epi_vec: prefetches of the epilogue's operands at (row, col). */
    void (*epi_prefetch)(void *user, LLVMValueRef row, LLVMValueRef col);
    void *user;
} LlvmWinograd;
int llvm_winograd_tile(const struct LowerWin *w, int64_t m_out, unsigned simd_bits, int max_tile);
/* The largest Winograd tile g's metadata allows (IR_META_WINOGRAD: "off" 0, "2" 2, else 4). */
int llvm_winograd_max_tile(const IrGraph *g);
/* The Winograd tile of root node n (a Conv or a group anchored by one) on this target, else 0. */
int llvm_node_winograd_tile(const IrGraph *g, IrNodeId n, unsigned simd_bits);
int64_t llvm_winograd_scratch_bytes(const struct LowerWin *w, int64_t m_out, int tile);
/* The weights transformed at compile time, a constant of mod; NULL when out of memory. */
float *llvm_winograd_weights(const LlvmWinograd *p, size_t *bytes);
/* The three phases, each over units [lo, hi) (i64 values) that parts may share out: 0 the
 * input transform (units: input channels), 1 the GEMMs (tile positions), 2 the output
 * transform with bias and epilogue (output channels). Each phase needs the previous one done. */
int64_t llvm_winograd_units(const LlvmWinograd *p, int phase);
/* An image runs in bands of tile rows, bands in order, each through the three phases (band: an
 * i64 value below llvm_winograd_bands). */
int64_t llvm_winograd_bands(const LlvmWinograd *p);
void llvm_winograd_phase(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmWinograd *p, int phase,
                         LLVMValueRef band, LLVMValueRef lo, LLVMValueRef hi);
/* Depthwise and grouped 2-D Conv with at most 16 input channels per group (backend/cpu/depthwise.c):
 * output channels [lo, hi) (i64 values) of one NCHW f32 image, x and y its input and output,
 * wt the weights [m][c / groups][kh][kw], bias per output channel or NULL; epi_vec (optional)
 * as LlvmPgemm's, with row = output channel and col = output pixel (oh * OW + ow). */
typedef struct LlvmDepthwise {
    const struct LowerWin *w;
    int64_t groups, m;
    LLVMValueRef x, y, wt, bias;
    unsigned simd_bits;
    LLVMValueRef (*epi_vec)(void *user, LLVMValueRef v, LLVMValueRef row, LLVMValueRef col, int lanes);
    void *user;
} LlvmDepthwise;
bool llvm_depthwise_fits(const struct LowerWin *w, int64_t groups, int64_t m, unsigned simd_bits);
void llvm_depthwise_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmDepthwise *p, LLVMValueRef lo,
                         LLVMValueRef hi);
/* 1x1 Conv (stride 1, no padding, one group) with constant weights on AVX2 targets
 * (backend/cpu/pointwise.c): Y [m x n] = W [m x k] * X [k x n] (+ bias per row) for one image,
 * row blocks [lo, hi) (i64 values) of llvm_pointwise_units; wp the weights as
 * llvm_pointwise_pack packs them (malloc'd, NULL when out of memory); epi_vec (optional) as
 * LlvmPgemm's (row = output channel, col = pixel). llvm_pointwise_fits: where it is used. */
typedef struct LlvmPointwise {
    int64_t m, n, k;
    LLVMValueRef x, y, wp, bias;
    LLVMValueRef (*epi_vec)(void *user, LLVMValueRef v, LLVMValueRef row, LLVMValueRef col, int lanes);
    void *user;
} LlvmPointwise;
bool llvm_pointwise_fits(int64_t m, int64_t n, int64_t k, unsigned simd_bits);
int64_t llvm_pointwise_units(int64_t m, int64_t n);
float *llvm_pointwise_pack(int64_t m, int64_t n, int64_t k, const float *w, size_t *bytes);
void llvm_pointwise_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmPointwise *p, LLVMValueRef lo,
                         LLVMValueRef hi);
/* Phase planes of a strided Conv input (one image): [C][sh][sw][Hp][Wp] with Hp = ceil(H / sh),
 * Wp = ceil(W / sw), plane (a, b) holding pixels (i * sh + a, j * sw + b) and zeros beyond the
 * image; returns the floats needed, 0 for stride 1. */
int64_t llvm_conv_phase_floats(const struct LowerWin *w);
/* Height and width of the planes a Conv's implicit im2col reads: the input's, or with phased its
 * stride-phase planes'. */
void llvm_conv_plane(const struct LowerWin *w, bool phased, int64_t *ph, int64_t *pw);
/* Floats between one input channel's planes and the next (its stride-phase planes with phased). */
int64_t llvm_conv_channel_floats(const struct LowerWin *w, bool phased);
/* Tap t (an i64 value, kh-major) of a Conv's implicit im2col at builder b: the offset of the plane
 * it reads within its channel's planes (with phased: the stride-phase plane, the tap a unit-stride
 * shift in it; else 0) and its row and column shift (dh, dw) there. */
void llvm_conv_tap(LLVMBuilderRef b, const struct LowerWin *w, bool phased, LLVMValueRef t, LLVMValueRef *plane,
                   LLVMValueRef *dh, LLVMValueRef *dw);
/* f32 GEMM on AMX at f32 accuracy (backend/cpu/amx.c): C = A * B (+ bias, epilogue) with the
 * fields of LlvmPgemm that a plain GEMM uses (m, n, k, ldb, ldc, a, b, c, bias, bias_scale,
 * epi_vec, user, part, n_parts); a is A packed by llvm_amx_packed_a. Used on targets whose
 * simd_bits carry LLVM_SIMD_AMX, for shapes llvm_amx_fits accepts. */
#define LLVM_SIMD_AMX (1u << 16)
bool llvm_amx_fits(int64_t m, int64_t n, int64_t k);
int64_t llvm_amx_units(int64_t m, int64_t n, int64_t k);
/* A (m rows of lda <= k floats, row-major; columns lda .. k - 1 read as zero) split into three
 * bf16 parts per element and packed in 16 x 32 tiles; m * k * 3 uint16, malloc'd (NULL when out
 * of memory). */
uint16_t *llvm_amx_packed_a(int64_t m, int64_t k, const float *a, int64_t lda);
/* A Conv (one group) whose B is its implicit im2col (LlvmPgemm.conv, .phased; k the padded
 * llvm_amx_conv_k, the weights packed with lda = C * kh * kw): output rows whose width is a
 * multiple of 16, 512+ pixels. */
int64_t llvm_amx_conv_k(const struct LowerWin *w);
bool llvm_amx_conv_fits(const struct LowerWin *w, int64_t m);
void llvm_amx_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmPgemm *p);
/* f32 lanes per vector for simd_bits (16 with AVX-512, else 0: the packed GEMM is not used). */
int llvm_pgemm_vector_width(unsigned simd_bits);
/* Whether a one-group Conv of m output channels and geometry w goes through the packed GEMM on
 * this target: every one with AVX-512; with AVX2 (8 lanes) the shapes where it measured faster
 * than im2col and OpenBLAS (docs/cpu_speed.md). */
bool llvm_pgemm_conv_fits(const struct LowerWin *w, int64_t m, unsigned simd_bits);
/* Vector width the packed GEMM may use on a target: 512 (AVX-512F), 256 (AVX2 + FMA) or 0, from
 * its LLVM feature string, or from the CPU name when there is none. */
unsigned llvm_simd_bits(const char *cpu, const char *features);
/* The vector features a CPU name without a feature string implies ("+avx2,+fma,..."; "" when
 * unknown): what an artifact for it records, so a host without them refuses it at load instead
 * of faulting on its first instruction. */
const char *llvm_cpu_implied_features(const char *cpu);
/* The host CPU's LLVM feature string (malloc'd; NULL when out of memory), with the AMX features
 * turned off ("-amx-...") when Linux refuses this process the tile state (irt_cpu_amx_enable):
 * what host code is generated for and artifacts and cache keys record. */
char *llvm_host_features(void);

#endif
