/* Internal interface of backend/: the code generator (llvm_codegen.c), the memory planner and
 * JIT program (llvm_jit.c). Not installed; tools use backend/backend.h. */
#ifndef IRTOOL_LLVM_INTERNAL_H
#define IRTOOL_LLVM_INTERNAL_H

#include "backend/backend.h"
#include "backend/runtime/runtime.h"

#include <llvm-c/Core.h>

/* Static shape of v (false when unranked, symbolic or unknown). */
bool llvm_value_shape(const IrGraph *g, IrValueId v, uint32_t *rank, int64_t *dims);
/* Bytes of v (0 when not static). */
size_t llvm_value_nbytes(const IrGraph *g, IrValueId v);
/* Data of a graph constant or of a Constant node's `value` tensor; NULL otherwise. */
const void *llvm_value_const_data(const IrGraph *g, IrValueId v);

/* Scratch bytes node n needs during its kernel (Conv's im2col buffer); 0 for none. The plan
 * places it in the workspace and the run binds it to bufs[num_values + 1 + node index]. */
int64_t llvm_node_scratch_bytes(const IrGraph *g, IrNodeId n, unsigned simd_bits);

/* Whether fused group n is compiled as one kernel: every member a supported f32 elementwise op
 * fed only by the group's operands, graph constants and earlier members. With need_static, also
 * that shapes are static, every result has one shape and every member value broadcasts to it. */
bool llvm_fused_ew_group(const IrGraph *g, IrNodeId n, bool need_static);

/* Whether fused group n is compiled as one contraction kernel: a Conv, Gemm or MatMul followed
 * by a chain of supported f32 elementwise members applied to its output blocks as they are
 * produced (llvm_codegen.c). With need_static, also the shapes (see there). */
bool llvm_fused_epilogue_group(const IrGraph *g, IrNodeId n, bool need_static);

/* Whether fused group n is compiled as one row-reduction kernel: one Softmax, LogSoftmax,
 * LayerNormalization or last-axis ReduceSum/Mean/Max/Min with f32 elementwise members computing
 * its input and using its output (llvm_codegen.c). Needs static shapes. */
bool llvm_fused_row_group(const IrGraph *g, IrNodeId n);
/* Whether fused group n is compiled as one attention kernel: MatMul(Q', K^T), elementwise members
 * on the scores, Softmax over the keys, MatMul with V, Q' from Q through elementwise members
 * (llvm_codegen.c). Needs static shapes. */
bool llvm_fused_attention_group(const IrGraph *g, IrNodeId n);

struct LlvmDerived;
/* Builds the module for g's top-level region in ctx: internal kernels k0, k1, ... and the
 * entry `irt_entry(void **bufs, const IrtFnTable *fns)`. The data kernels derive from
 * constants at compile time (packed Conv weights, Winograd's transformed weights) goes to
 * *derived (*n_derived entries, malloc'd; the caller binds each to bufs[slot] and frees it),
 * in slots llvm_sym_slot(g) + 2, + 3, ...: not into the module as constants (113 MB of them for
 * ResNet-50, which then ran 5-10% slower in the JIT than as an artifact). */
IrStatus llvm_build_module(const IrGraph *g, LLVMContextRef ctx, unsigned simd_bits, IrDiag *diag, LLVMModuleRef *out,
                           uint32_t *n_kernels, struct LlvmDerived **derived, uint32_t *n_derived) IR_MUST_CHECK;

/* Whether the module built by llvm_build_module calls GEMM (then BLAS must be loaded first:
 * irt_blas_require). */
bool llvm_module_uses_blas(LLVMModuleRef mod);
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

/* ---- op emitters in backend/llvm_ops_*.c --------------------------------------------------
 * The kernel being generated: llvm_codegen.c creates the function and positions the builders
 * (b in the body, ab before the entry block's terminator for allocas), then hands the node to
 * llvm_ops_gen when llvm_ops_claims it. */
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
} LlvmEmit;

/* Whether the llvm_ops_* emitters compile node n: ops llvm_codegen.c has no emitter for, and
 * elementwise ops on other dtypes than f32 (codegen_f32: llvm_codegen.c handles op on f32). */
bool llvm_ops_claims(const IrGraph *g, IrNodeId n, bool codegen_f32);
/* Whether op is one the llvm_ops_* emitters know (some configurations may still be refused). */
bool llvm_ops_supported(IrOp op);
IrStatus llvm_ops_gen(LlvmEmit *e) IR_MUST_CHECK;
/* "the llvm backend does not support OP WHY yet" at node e->node; IR_EUNSUPPORTED. */
IrStatus llvm_ops_refuse(LlvmEmit *e, const char *why) IR_MUST_CHECK;
/* Typed elementwise ops (backend/llvm_ops_ew.c) and data movement / misc (llvm_ops_data.c). */
bool llvm_ops_ew_supported(IrOp op);
IrStatus llvm_ops_ew_gen(LlvmEmit *e) IR_MUST_CHECK;
bool llvm_ops_data_supported(IrOp op);
/* One point of a typed elementwise node under a loop nest the caller builds (llvm_dyn.c):
 * llvm_ops_ew_point_new checks the node and loads its buffers; llvm_ops_ew_point_inputs gives
 * the operands it reads (present[i]); llvm_ops_ew_point loads operand i at offs[i + 1], computes
 * and stores at offs[0]. Freed with free(). */
typedef struct LlvmEwPoint LlvmEwPoint;
IrStatus llvm_ops_ew_point_new(LlvmEmit *e, LlvmEwPoint **out) IR_MUST_CHECK;
uint32_t llvm_ops_ew_point_inputs(const LlvmEwPoint *p, bool *present);
void llvm_ops_ew_point(LlvmEmit *e, LlvmEwPoint *p, LLVMValueRef *offs);
/* Member m of a fused elementwise group computed on values (llvm_dyn.c): llvm_ops_ew_member_ok
 * checks it as llvm_ops_ew_point_new would (nothing reported), llvm_ops_ew_member_new prepares
 * it without buffers (llvm_ops_ew_point_inputs then gives the operands it reads), and
 * llvm_ops_ew_member computes it from its operands' compute values x (NULL where absent) into
 * the compute type of its result's dtype (booleans widened as they would be stored). */
bool llvm_ops_ew_member_ok(const IrGraph *g, IrNodeId m);
IrStatus llvm_ops_ew_member_new(LlvmEmit *e, IrNodeId m, LlvmEwPoint **out) IR_MUST_CHECK;
LLVMValueRef llvm_ops_ew_member(LlvmEmit *e, const LlvmEwPoint *p, LLVMValueRef *x);
/* Conv/pools other than what llvm_codegen.c's 2-D f32 emitters take, and ConvTranspose
 * (backend/llvm_ops_conv.c). */
bool llvm_ops_conv_claims(const IrGraph *g, IrNodeId n);
/* NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (backend/llvm_ops_loss.c). */
IrStatus llvm_ops_loss_gen(LlvmEmit *e) IR_MUST_CHECK;
/* Resize, its scales, sizes or roi constants or given at run time (backend/llvm_ops_resize.c). */
IrStatus llvm_ops_resize_gen(LlvmEmit *e) IR_MUST_CHECK;
/* Scratch of a Resize whose taps are computed at run time (scales or roi given at run time). */
int64_t llvm_ops_resize_scratch_bytes(const IrGraph *g, IrNodeId n);
IrStatus llvm_ops_conv_gen(LlvmEmit *e) IR_MUST_CHECK;
/* MatMulInteger and QLinearMatMul through the runtime's irt_qmatmul (backend/llvm_ops_qmm.c). */
IrStatus llvm_ops_qmm_gen(LlvmEmit *e) IR_MUST_CHECK;
IrStatus llvm_ops_qconv_gen(LlvmEmit *e) IR_MUST_CHECK; /* ConvInteger, QLinearConv: irt_qconv */
/* Det (irt_det) and MaxUnpool (backend/llvm_ops_misc.c), and Det's scratch. */
IrStatus llvm_ops_misc_gen(LlvmEmit *e) IR_MUST_CHECK;
int64_t llvm_ops_misc_scratch_bytes(const IrGraph *g, IrNodeId n);
/* DFT, STFT, the windows, MelWeightMatrix and Range with run-time inputs on static output
 * shapes (backend/llvm_ops_signal.c). */
bool llvm_ops_signal_claims(IrOp op);
IrStatus llvm_ops_signal_gen(LlvmEmit *e) IR_MUST_CHECK;
/* irtool.quantize_fp8, irtool.dequantize_fp8 and irtool.fp8_matmul, computed as the interpreter
 * does (backend/llvm_ops_fp8.c), and the matmul's scratch. */
bool llvm_ops_fp8_claims(IrOp op);
IrStatus llvm_ops_fp8_gen(LlvmEmit *e) IR_MUST_CHECK;
/* The same with symbolic dims evaluated by dim (llvm_dyn.c). */
IrStatus llvm_ops_fp8_gen_at(LlvmEmit *e, LLVMValueRef (*dim)(void *ctx, IrExprId x), void *ctx) IR_MUST_CHECK;
int64_t llvm_ops_fp8_scratch_bytes(const IrGraph *g, IrNodeId n);
/* RNN, GRU, LSTM through the runtime's irt_rnn (backend/llvm_ops_rnn.c), and their scratch. */
IrStatus llvm_ops_rnn_gen(LlvmEmit *e) IR_MUST_CHECK;
/* The same with the sequence length and batch evaluated by dim (llvm_dyn.c) where symbolic. */
IrStatus llvm_ops_rnn_gen_at(LlvmEmit *e, LLVMValueRef (*dim)(void *ctx, IrExprId x), void *ctx) IR_MUST_CHECK;
int64_t llvm_ops_rnn_scratch_bytes(const IrGraph *g, IrNodeId n, const int64_t *sym); /* sym: NULL for static dims */
IrStatus llvm_ops_data_gen(LlvmEmit *e) IR_MUST_CHECK;

/* ---- kernels over shapes known at run time (backend/llvm_dyn.c) -----------------------------
 * A node with symbolic dims reads the run's symbol values (int64 by symbol id) from the buffer
 * of slot llvm_sym_slot(g) and evaluates its dims from them. llvm_dyn_gen emits its body (or
 * refuses naming the op); llvm_build_shapes adds `irt_shapes(int64_t *syms, int64_t *out)` to
 * mod: it stores the defined symbols of sp into syms, then writes every output's dims in order
 * and the workspace bytes the binding needs under plan. */
bool llvm_dyn_node(const IrGraph *g, IrNodeId n);
/* Whether fused group n is an attention group with run-time shapes that llvm_dyn.c compiles as
 * one kernel (members Add/Sub/Mul/Div/Neg, constant head sizes d <= 128, dv <= 64). */
bool llvm_dyn_attention_group(const IrGraph *g, IrNodeId n);
/* Whether fused group n is an elementwise group with run-time shapes that llvm_dyn.c compiles as
 * one kernel (typed elementwise members, no f16/bf16 results, one result shape). */
bool llvm_dyn_ew_group(const IrGraph *g, IrNodeId n);
/* Fused groups' bodies (llvm_codegen.c): whether v is defined in body (a member's result or
 * one of its arguments), whether it is a member's result, and the value a member reads as v
 * (the group's operand for a body argument, else v itself). */
bool llvm_in_region(const IrGraph *g, IrValueId v, IrRegionId body);
bool llvm_member_result(const IrGraph *g, IrValueId v, IrRegionId body);
IrValueId llvm_outer_value(const IrGraph *g, IrNodeId group, IrValueId v);
/* Floats per row buffer of a row group (two on the stack). */
#define LLVM_ROW_GROUP_MAX_LEN 65536
/* Whether fused group n is a row group with run-time shapes that llvm_dyn.c compiles as one
 * kernel (f32 members before and after one Softmax, LogSoftmax or LayerNormalization over a
 * last axis of constant length). */
bool llvm_dyn_row_group(const IrGraph *g, IrNodeId n);
uint32_t llvm_sym_slot(const IrGraph *g);
/* Data-dependent dims (llvm_batch.c): the result dim k of node n that its data decides (NonZero,
 * Compress) and the largest value it can take (-1 if unbounded); llvm_data_symbols gives each
 * such dim a symbol ranged [0, hi] (kernels write its value at run time). */
bool llvm_data_dim(const IrGraph *g, IrNodeId n, uint32_t *k, int64_t *hi);
IrStatus llvm_data_symbols(IrGraph *g, bool *added, IrDiag *diag) IR_MUST_CHECK;
/* The data symbol llvm_data_symbols gave node n's result (0 if none). */
IrSymId llvm_data_sym(const IrGraph *g, IrNodeId n);
/* Kernels on string tensors (llvm_dyn.c): StringNormalizer and the copy ops; IR_EUNSUPPORTED
 * (nothing reported) for other ops. String bytes a run makes come from the IrtRunCtx in slot
 * llvm_sym_slot(g) + 1. */
IrStatus llvm_string_gen(LlvmEmit *e) IR_MUST_CHECK;
/* Scratch a run-time-shape kernel needs (a Conv's im2col matrix) at the binding sym. */
int64_t llvm_dyn_scratch_bytes(const IrGraph *g, IrNodeId n, const int64_t *sym);
IrStatus llvm_dyn_gen(LlvmEmit *e, bool *uses_blas) IR_MUST_CHECK;
/* Slice whose starts (and steps) are computed, its result's shape known: the starts read at
 * run time (the static emitter needs constants). */
IrStatus llvm_slice_runtime_starts(LlvmEmit *e) IR_MUST_CHECK;
/* Gather on any axis (the static emitter takes axis 0). */
IrStatus llvm_gather_any_axis(LlvmEmit *e) IR_MUST_CHECK;
typedef struct LlvmMemPlan LlvmMemPlan;
IrStatus llvm_build_shapes(LLVMModuleRef mod, const IrGraph *g, const IrSymPlan *sp, const LlvmMemPlan *plan,
                           IrDiag *diag) IR_MUST_CHECK;
/* Shared with it by llvm_codegen.c: one row of Softmax/LogSoftmax/LayerNorm or a reduction
 * (row_body) whose length and stride are run-time values. */
typedef struct LlvmRow {
    IrOp op;
    LLVMValueRef x, y, scale, bias; /* f32 buffers (scale/bias: LayerNorm) */
    LLVMValueRef len, step;         /* row length, element stride along the row (i64) */
    LLVMValueRef xoff, yoff;        /* the row's first x element, its y element */
    double eps;
} LlvmRow;
void llvm_row_f32(const LlvmEmit *e, const LlvmRow *r);

/* Packed-panel GEMM (backend/llvm_gemm.c), emitted inline at builder b of function fn (ab:
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
    const struct LlvmWin *conv;
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
    /* When set, a is A in the emitter's packed layout (llvm_pgemm_pack_a); lda is unused. */
    bool a_packed;
} LlvmPgemm;
int64_t llvm_pgemm_units(const LlvmPgemm *p);
/* A (m x k, row stride lda) into the packed layout that llvm_pgemm_emit reads with a_packed:
 * for each K block (as the emitter splits K), for each strip of 8 rows (the last may be
 * shorter), the strip's rows k-major: out[k0 * m + m0 * w + kk * h + i] = A[m0 + i][k0 + kk]
 * for a block of w columns and a strip of h rows. Strips stream from memory in order. */
void llvm_pgemm_pack_a(int64_t m, int64_t k, const float *a, int64_t lda, float *out);
/* count consecutive m x k matrices at a (row-major) packed, malloc'd (NULL when out of memory). */
float *llvm_pgemm_packed_a(int64_t count, int64_t m, int64_t k, const float *a);
/* A prefetch of the cache line at p into L1 (never faults). */
void llvm_prefetch(LLVMBuilderRef b, LLVMValueRef p);
void llvm_prefetch_for(LLVMBuilderRef b, LLVMValueRef p, bool write);
/* The same into L1 (locality 3) or L2 only (2). */
void llvm_prefetch_at(LLVMBuilderRef b, LLVMValueRef p, bool write, unsigned locality);
void llvm_pgemm_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmPgemm *p);
/* C = alpha * A * op(B) for 1 to 4 rows of A (not transposed, row stride lda), B [k x n] or,
 * with tb, [n x k] (row stride ldb), C row stride ldc (backend/llvm_gemm.c): generated code
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
int64_t llvm_gemv_units(const LlvmGemv *p);
/* Winograd F(m x m, 3x3) for one image of a 3x3 stride-1 one-group Conv with constant
 * weights (backend/llvm_winograd.c). llvm_winograd_tile gives m (4 or 2, at most max_tile)
 * where it pays on this target and shape, else 0; the emitter needs llvm_winograd_scratch_bytes of scratch. epi_vec (optional) as LlvmPgemm's, applied
 * to output vectors of up to 64 columns (row = output channel, col = pixel). */
typedef struct LlvmWinograd {
    const struct LlvmWin *w;
    int tile;
    int64_t m_out;
    const float *weights; /* [m_out][c][3][3] */
    LLVMValueRef x, y, scratch, bias; /* x, y: the image's input and output; bias may be NULL */
    LLVMValueRef u;                   /* the transformed weights (llvm_winograd_weights) */
    LLVMValueRef (*epi_vec)(void *user, LLVMValueRef v, LLVMValueRef row, LLVMValueRef col, int lanes);
    /* Optional with epi_vec: prefetches of the epilogue's operands at (row, col). */
    void (*epi_prefetch)(void *user, LLVMValueRef row, LLVMValueRef col);
    void *user;
} LlvmWinograd;
int llvm_winograd_tile(const struct LlvmWin *w, int64_t m_out, unsigned simd_bits, int max_tile);
/* The largest Winograd tile g's metadata allows (IR_META_WINOGRAD: "off" 0, "2" 2, else 4). */
int llvm_winograd_max_tile(const IrGraph *g);
/* The Winograd tile of root node n (a Conv or a group anchored by one) on this target, else 0. */
int llvm_node_winograd_tile(const IrGraph *g, IrNodeId n, unsigned simd_bits);
int64_t llvm_winograd_scratch_bytes(const struct LlvmWin *w, int64_t m_out, int tile);
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
/* Phase planes of a strided Conv input (one image): [C][sh][sw][Hp][Wp] with Hp = ceil(H / sh),
 * Wp = ceil(W / sw), plane (a, b) holding pixels (i * sh + a, j * sw + b) and zeros beyond the
 * image; returns the floats needed, 0 for stride 1. */
int64_t llvm_conv_phase_floats(const struct LlvmWin *w);
/* Height and width of the planes a Conv's implicit im2col reads: the input's, or with phased its
 * stride-phase planes'. */
void llvm_conv_plane(const struct LlvmWin *w, bool phased, int64_t *ph, int64_t *pw);
/* Floats between one input channel's planes and the next (its stride-phase planes with phased). */
int64_t llvm_conv_channel_floats(const struct LlvmWin *w, bool phased);
/* Tap t (an i64 value, kh-major) of a Conv's implicit im2col at builder b: the offset of the plane
 * it reads within its channel's planes (with phased: the stride-phase plane, the tap a unit-stride
 * shift in it; else 0) and its row and column shift (dh, dw) there. */
void llvm_conv_tap(LLVMBuilderRef b, const struct LlvmWin *w, bool phased, LLVMValueRef t, LLVMValueRef *plane,
                   LLVMValueRef *dh, LLVMValueRef *dw);
/* f32 GEMM on AMX at f32 accuracy (backend/llvm_amx.c): C = A * B (+ bias, epilogue) with the
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
int64_t llvm_amx_conv_k(const struct LlvmWin *w);
bool llvm_amx_conv_fits(const struct LlvmWin *w, int64_t m);
void llvm_amx_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmPgemm *p);
/* f32 lanes per vector for simd_bits (16 with AVX-512, else 0: the packed GEMM is not used). */
int llvm_pgemm_vector_width(unsigned simd_bits);
/* Vector width the packed GEMM may use on a target: 512 (AVX-512F), 256 (AVX2 + FMA) or 0, from
 * its LLVM feature string, or from the CPU name when there is none. */
unsigned llvm_simd_bits(const char *cpu, const char *features);
/* The host CPU's LLVM feature string (malloc'd; NULL when out of memory), with the AMX features
 * turned off ("-amx-...") when Linux refuses this process the tile state (irt_cpu_amx_enable):
 * what host code is generated for and artifacts and cache keys record. */
char *llvm_host_features(void);

/* The workspace plan: offset of every node result in one buffer (-1 = not in it). */
struct LlvmMemPlan {
    int64_t *offset; /* by value id, then num_values + 1 + node index for scratch */
    int64_t *bytes;  /* by slot: the bytes at offset (where offset >= 0; the artifact records them) */
    uint32_t n_slots;
    size_t peak, unplanned;
};
IrStatus llvm_plan_memory(const IrGraph *g, unsigned simd_bits, LlvmMemPlan *plan) IR_MUST_CHECK;
/* The same plan with symbolic sizes evaluated under sym (values by symbol id: the constraints'
 * upper bounds, so the plan holds every binding up to them). */
IrStatus llvm_plan_memory_at(const IrGraph *g, unsigned simd_bits, const int64_t *sym, LlvmMemPlan *plan) IR_MUST_CHECK;
/* Whether Concat n is computed in place (its inputs placed inside its output by the plan when
 * simd_bits is set, a CPU target; the kernel then copies nothing). uses: ir_graph_count_uses. */
bool llvm_concat_in_place(const IrGraph *g, IrNodeId n, const uint32_t *uses);
void llvm_plan_free(LlvmMemPlan *plan);

/* The .irx container shared by the CPU and CUDA writers (artifact.c): the manifest lines every
 * target has (versions, hash, pipeline, inputs/outputs, nodes, memory plan, constants), the
 * target's own lines, the code section and the binary IR of `source`. tail_bytes > 0 adds one
 * slot (plan->n_slots) placed after the planned workspace; extra constants (data the target
 * derived at compile time, e.g. transposed weights) take the slots after it. */
typedef struct IrArtifactConst {
    uint32_t slot; /* > plan->n_slots */
    const void *data;
    size_t len;
} IrArtifactConst;
typedef struct IrArtifactPack {
    const char *pipeline;
    const char *target_lines; /* "triple ...\n" first, then anything the target's loader reads */
    const char *extra_lines;  /* appended after the constants (kernels, steps) */
    const LlvmMemPlan *plan;
    int64_t tail_bytes;
    const IrArtifactConst *extra;
    uint32_t n_extra;
    const IrValueId *omit; /* constants the code never reads (replaced by extra ones) */
    uint32_t n_omit;
    uint32_t n_kernels;
    const uint32_t *kernel_nodes; /* CPU: the node index of each kernel call (profiling), or NULL */
    bool uses_blas; /* CPU code calls the BLAS GEMM (the runtime loads OpenBLAS only then) */
    const IrBatchPlan *batch; /* symbolic batch (CPU): compiled for one sample, run once per sample */
    const char *batch_name;
    const IrSymPlan *syms; /* symbolic dims evaluated at run time (CPU) */
    const void *code;
    size_t code_len;
} IrArtifactPack;
IrStatus ir_artifact_pack(const IrGraph *g, const IrGraph *source, const IrArtifactPack *pk, IrDiag *diag, void **bytes,
                          size_t *len) IR_MUST_CHECK;

#endif
