/* backend/: compiles graphs to machine code (LLVM 19, host CPU) and runs them in process.
 *
 * This first slice JIT-compiles a graph with static shapes (bind symbols first with
 * llvm_specialize_inputs) into one LLVM function per node plus an entry that calls them in
 * order, all over flat buffers. Intermediates share one workspace planned by liveness
 * (greedy first fit); each run allocates its own workspace, so concurrent runs of one program
 * are safe. Ops outside the supported set fail at compile time naming the op.
 */
#ifndef IRTOOL_BACKEND_H
#define IRTOOL_BACKEND_H

#include "ir/ir.h"
#include "validate/validate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct IrLlvmProgram IrLlvmProgram;

/* Prepares g for compilation for these inputs (mutates g): keeps `irtool.fused` groups whose
 * members are all elementwise (each becomes one kernel) and inlines the other groups' bodies
 * (compiled op by op), binds every symbolic input dim from the input tensors and
 * specializes it (plus symbols tied to them by equalities), then runs shape-infer, const-fold
 * and dce so all types are static and run-time shape computations are folded. */
IrStatus llvm_specialize_inputs(IrGraph *g, const IrTensor *inputs, uint32_t n_inputs,
                                IrDiag *diag) IR_MUST_CHECK;
/* The same, with the CPU backend's own fusion (BatchNorm folding, contraction epilogues,
 * elementwise chains) only when cpu_fusion; other targets (CUDA) keep the pipeline's groups. */
IrStatus llvm_specialize_inputs_for(IrGraph *g, const IrTensor *inputs, uint32_t n_inputs, bool cpu_fusion,
                                    IrDiag *diag) IR_MUST_CHECK;

/* Compiles g (static shapes, top-level region) with LLVM at O3 for the host CPU and loads it
 * in an ORC LLJIT. g must outlive the program (weights are used in place). */
IrStatus llvm_program_create(const IrGraph *g, IrDiag *diag, IrLlvmProgram **out) IR_MUST_CHECK;
void llvm_program_destroy(IrLlvmProgram *p);

/* Runs the program: inputs as for ir_interp_run (shapes checked against the compiled ones);
 * outputs receives owned tensors. Thread-safe for concurrent calls on one program. */
IrStatus llvm_program_run(IrLlvmProgram *p, const IrTensor *inputs, uint32_t n_inputs,
                          IrTensor *outputs, IrDiag *diag) IR_MUST_CHECK;

/* The same into caller-provided outputs: outputs[i] must have the compiled dtype and shape and
 * its data allocated (ir_tensor_alloc); a caller running a stream of inputs reuses them, as a
 * peer runtime's preallocated output binding. Workspaces are kept by the program between runs. */
/* Whether some output dims are decided by the data (NonZero, Compress): such a program runs with
 * llvm_program_run only (outputs allocated per run). */
bool llvm_program_data_dims(const IrLlvmProgram *p);
IrStatus llvm_program_run_into(IrLlvmProgram *p, const IrTensor *inputs, uint32_t n_inputs, IrTensor *outputs,
                               IrDiag *diag) IR_MUST_CHECK;

/* Bytes of the planned intermediate workspace (peak, after liveness-based reuse), and the sum
 * of all intermediate sizes without reuse. */
size_t llvm_program_workspace_bytes(const IrLlvmProgram *p);
size_t llvm_program_unplanned_bytes(const IrLlvmProgram *p);
uint32_t llvm_program_num_kernels(const IrLlvmProgram *p);

/* Whether the LLVM backend supports op (some configurations of a supported op may still be
 * refused at compile time with an error naming it). */
bool llvm_op_supported(IrOp op);
/* Whether the CUDA backend has a kernel for op (configurations may still be refused, naming
 * the node). */
bool cuda_op_supported(IrOp op);

/* ---- symbolic batch (backend/lower/batch.c) -------------------------------------------------
 * A graph whose only symbol is the leading dim of its inputs compiles once: for one sample
 * (the symbol bound to 1), run by the runtime once per sample with the batched inputs and
 * outputs offset. ir_batch_analyze checks on g (mutated: shape-infer) that no node mixes
 * samples; sym 0 in the plan means g has no symbolic input dims. Refusals name the node. */
typedef struct IrBatchPlan {
    IrSymId sym;            /* 0 = no symbolic dims */
    int64_t lo, hi, div;    /* guards: lo <= B, B <= hi (hi < 0: none), B % div == 0 */
    uint32_t n_in, n_out;
    bool *in_batched, *out_batched; /* dim 0 is the batch (malloc'd) */
} IrBatchPlan;
IrStatus ir_batch_analyze(IrGraph *g, IrBatchPlan *bp, IrDiag *diag) IR_MUST_CHECK;
void ir_batch_plan_free(IrBatchPlan *bp);

/* ---- symbolic shapes in compiled code (backend/lower/batch.c, cpu/dyn.c) -------------------
 * A graph with other symbols than one leading batch compiles once with its dims evaluated at
 * run time: every symbol must be a plain dim of some input (the runtime binds it from there),
 * or be defined by an equality over such symbols (T == S + 1). The workspace is planned for the
 * largest binding of the symbols with an upper bound; values sized by a symbol without one are
 * placed at run time (lower_plan_memory, irt_shapes); ranges, divisibility and the other equalities
 * over them are checked by the runtime on every call. ir_sym_plan checks that on
 * the specialized graph (llvm_specialize_inputs_for with no inputs) and fills sp. */
#define IR_SYM_PLAN_MAX 16
typedef struct IrSymPlan {
    uint32_t n;
    IrSymId sym[IR_SYM_PLAN_MAX];
    int64_t lo[IR_SYM_PLAN_MAX], hi[IR_SYM_PLAN_MAX], div[IR_SYM_PLAN_MAX];
    uint32_t in[IR_SYM_PLAN_MAX], dim[IR_SYM_PLAN_MAX]; /* bound from input in[i], dim dim[i] */
    bool by_value[IR_SYM_PLAN_MAX]; /* bound from input in[i]'s entry dim[i] instead (its value) */
    /* by_value: trunc(entry * D) instead, D symbol mul_sym[i]'s value (bound before it) when that
     * is not 0, else the constant mul_const[i] when >= 0 (Resize's dims from scales) */
    IrSymId mul_sym[IR_SYM_PLAN_MAX];
    int64_t mul_const[IR_SYM_PLAN_MAX];
    uint32_t n_def; /* symbols defined by an equality over bound ones (T == S + 1): computed */
    IrSymId def_sym[IR_SYM_PLAN_MAX];
    IrExprId def_expr[IR_SYM_PLAN_MAX];
    uint32_t n_eq; /* equalities over them (facts and guards shape-infer derived): checked per run */
    IrExprId eq_a[IR_SYM_PLAN_MAX], eq_b[IR_SYM_PLAN_MAX];
    uint32_t n_data; /* data symbols: dims the data decides (NonZero's count), written by kernels */
    IrSymId data_sym[IR_SYM_PLAN_MAX];
    int64_t data_hi[IR_SYM_PLAN_MAX];
} IrSymPlan;
IrStatus ir_sym_plan(const IrGraph *g, IrSymPlan *sp, IrDiag *diag) IR_MUST_CHECK;
/* Whether g has symbols its kernels compute (lower_data_symbols made them). */
bool ir_sym_plan_has_data(const IrGraph *g);
/* The binding with every symbol at pick (clamped to its range, rounded down to its divisor, at
 * least lo), written by symbol id into vals[0 .. ir_graph_num_syms(g)] (others -1). */
void ir_sym_binding(const IrGraph *g, const IrSymPlan *sp, int64_t pick, int64_t *vals); /* data symbols: at their hi */

/* ---- artifacts (issue 8) ------------------------------------------------------------------ */
/* Graph metadata key limiting the CPU backend's Winograd tile for 3x3 Convs: "4" (default:
 * F(4x4, 3x3) where a stride-1 layer has enough tiles, else F(2x2, 3x3); stride-2 layers take
 * the 2x2 output tile), "2" (2x2 output tiles only: as accurate as the direct form) or "off"
 * (im2col GEMM). See backend/cpu/winograd.c. */
#define IR_META_WINOGRAD "irtool.winograd"
/* The number of root nodes of g (specialized) the CPU backend computes with Winograd output
 * tiles of tile x tile (4 or 2) on target cpu (NULL: the host). */
uint32_t ir_llvm_winograd_nodes(const IrGraph *g, const char *cpu, int tile);

typedef struct IrArtifactOptions {
    const char *cpu;      /* target CPU name; NULL = the host CPU with its features */
    const char *pipeline; /* recorded in the manifest (may be NULL) */
    const IrBatchPlan *batch; /* compiled for one sample of a symbolic batch (NULL: static) */
    const char *batch_name;   /* the batch symbol's name (manifest) */
    const IrSymPlan *syms;    /* symbolic dims evaluated at run time (NULL: none) */
    const char *cache_dir;    /* kernels' objects are cached in cache_dir/kernels by content (NULL: none) */
    uint32_t *kernel_counts;  /* out (may be NULL): [0] distinct kernels compiled, [1] of them from the cache */
    bool kernel_cache_refresh; /* compile every kernel and replace its cache entry (a cached one failed) */
    /* may be NULL: called before each top-level node's kernel is built (done of total nodes)
     * and once at the end (total of total), for a progress display */
    void (*progress)(void *user, uint32_t done, uint32_t total);
    void *progress_user;
} IrArtifactOptions;

/* Compiles g (already specialized: static shapes) for the target into a position-independent
 * object, links it into a shared object with the system linker (`cc`, or $CC) and returns the
 * .irx bytes (layout in backend/runtime/abi.h; malloc'd). `source` is the graph embedded
 * as binary IR and hashed for the manifest (the graph before specialization). Cached kernel
 * objects that do not look like objects are compiled again; when they do not link, they are
 * evicted and the build repeated without them (a note says so). */
IrStatus ir_artifact_build(const IrGraph *g, const IrGraph *source, const IrArtifactOptions *opt,
                           IrDiag *diag, void **bytes, size_t *len) IR_MUST_CHECK;

/* ---- CUDA artifacts (issue 9; backend/artifact/cuda_artifact.c) ----------------------------------------
 * `target`: "sm_80", "sm_89", "sm_90" or "sm_90a" (with or without a "cuda:" prefix). The
 * kernels are generated as NVPTX through LLVM, assembled to a cubin by the toolkit's ptxas
 * ($IRTOOL_PTXAS, else the one found at build time, else `ptxas` on PATH); the artifact keeps
 * the cubin, the PTX, and the assembler's registers/shared memory per kernel. */
typedef struct IrCudaOptions {
    const char *target;
    const char *pipeline;
    bool tf32; /* f32 GEMMs with TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32); else exact f32 */
    const IrSymPlan *syms; /* symbolic dims bound per run from the inputs (NULL: static shapes) */
} IrCudaOptions;
/* Symbolic shapes on CUDA: the fused groups that are not elementwise (row and attention groups
 * the CPU keeps for its run-time shapes) are inlined, so the CUDA generator sees their members. */
IrStatus ir_cuda_inline_groups(IrGraph *g, IrDiag *diag) IR_MUST_CHECK;
/* Whether target names a supported CUDA target (sm, arch-specific "a" suffix). */
bool ir_cuda_target_parse(const char *target, int *sm, bool *arch_specific);
IrStatus ir_cuda_artifact_build(const IrGraph *g, const IrGraph *source, const IrCudaOptions *opt, IrDiag *diag,
                                void **bytes, size_t *len) IR_MUST_CHECK;

/* ---- compile cache (issue 8, `irtool compile --cache-dir`; backend/artifact/cache.c) ----------------
 * Entries are content-addressed: DIR/v<irtool version>/<2 hex>/<key hex>.irx with a sidecar
 * <key hex>.sum naming the key and the entry's BLAKE2b-256 and length, checked on every hit.
 * Both are written atomically (temp file + rename; the .sum first), so concurrent compiles of
 * one model are safe. */
typedef struct IrCacheKeyInfo {
    const void *ir;       /* binary IR of the model before the pipeline */
    size_t ir_len;
    const char *pipeline; /* NULL or "" = none */
    const char *cpu;      /* as IrArtifactOptions.cpu (resolved to the CPU and features used) */
    const IrTensor *inputs; /* the specialized inputs (only dtype and shape count) */
    uint32_t n_inputs;
    const char *options;  /* code generation options that change the artifact (NULL = defaults) */
} IrCacheKeyInfo;

/* What a lookup found. Anything but a hit or a miss was deleted, for the caller to rebuild. */
enum {
    IR_CACHE_MISS = 0,
    IR_CACHE_HIT = 1,
    IR_CACHE_CORRUPT = 2, /* its bytes do not match its sum (or no sum, or not an artifact) */
    IR_CACHE_STALE = 3,   /* written by an older irtool (another sum format, e.g. FNV-1a's) */
    IR_CACHE_FOREIGN = 4, /* its sum names another key: an entry copied or moved here */
};

/* Cache keys are the hex digits of a content address (ir_content_address, ir/ir.h). */
#define IR_CACHE_KEY_CHARS 65 /* 64 hex digits and NUL */
/* The default cache dir ($XDG_CACHE_HOME/irtool, else $HOME/.cache/irtool; NULL if neither
 * is set); malloc'd. */
char *ir_cache_default_dir(void);
/* key_hex: the BLAKE2b-256 (64 hex digits + NUL) of a text of everything that determines the
 * artifact (IR content address, pipeline, triple, CPU, features, irtool/LLVM/format versions,
 * input dtypes and shapes). */
IrStatus ir_cache_key(const IrCacheKeyInfo *info, char key_hex[IR_CACHE_KEY_CHARS]) IR_MUST_CHECK;
/* IR_CACHE_HIT with the entry's bytes (malloc'd) when its sum names this key and matches them;
 * IR_CACHE_MISS; else why it was not served (the entry is then deleted). */
int ir_cache_lookup(const char *dir, const char *key_hex, void **bytes, size_t *len);
/* Deletes the entry of key_hex (one that failed after a hit: a kernel object that did not link). */
void ir_cache_evict(const char *dir, const char *key_hex);
IrStatus ir_cache_store(const char *dir, const char *key_hex, const void *bytes, size_t len,
                        IrDiag *diag) IR_MUST_CHECK;

typedef struct IrCacheStats {
    uint64_t entries, bytes;
    uint32_t n_versions;
    struct { char name[64]; uint64_t entries, bytes; } versions[32];
    uint64_t kernel_entries, kernel_bytes; /* DIR/kernels: per-kernel objects shared by artifacts */
} IrCacheStats;
/* Walks DIR/v<version>/ folders and DIR/kernels/ (the per-kernel object cache, same layout):
 * counts entries (or removes them, and the emptied folders, when clear). */
IrStatus ir_cache_scan(const char *dir, bool clear, IrCacheStats *st) IR_MUST_CHECK;

#ifdef __cplusplus
}
#endif
#endif
