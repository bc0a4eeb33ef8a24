/* Helpers shared by the Criterion tests: files, corpus models, printing, running the irtool
 * binary and temporary directories. Everything returned is malloc'd and owned by the caller;
 * helpers that can fail return NULL / false rather than aborting, so tests assert on them.
 */
#ifndef IRTOOL_TESTUTIL_H
#define IRTOOL_TESTUTIL_H

#include "ir/ir.h"
#include "validate/validate.h"

#include <stdbool.h>
#include <stddef.h>

#ifndef IRTOOL_SOURCE_DIR
#define IRTOOL_SOURCE_DIR "."
#endif
#ifndef IRTOOL_BINARY
#define IRTOOL_BINARY "irtool"
#endif

/* Reads a whole file into a malloc'd NUL-terminated buffer; NULL on failure. */
char *tu_read_file(const char *path, size_t *len);
/* Writes a file (not atomically); false on failure. */
bool tu_write_file(const char *path, const void *data, size_t len);
/* "<source dir>/<rel>", malloc'd. */
char *tu_source_path(const char *rel);
/* Reads corpus/<name> (e.g. "mlp.ir" or "errors/x.ir"); NULL on failure. */
char *tu_corpus_read(const char *name, size_t *len);
/* Names of the model files corpus/ *.ir (not .ir.in), sorted; NULL-terminated array owned by
 * the caller (free with tu_free_list). `dir` is relative to the source dir ("corpus",
 * "corpus/errors"). */
char **tu_list_dir(const char *dir, const char *suffix, size_t *count);
void tu_free_list(char **list);

/* Diagnostics collected into a buffer (formatted like the standard sink). */
typedef struct TuDiag {
    IrDiag diag;
    IrStrBuf buf;
} TuDiag;
void tu_diag_init(TuDiag *d);
void tu_diag_free(TuDiag *d);
/* The text collected so far ("" when none). */
const char *tu_diag_text(const TuDiag *d);
/* A sink that only counts (stores nothing); user unused. */
void tu_diag_count_fn(void *user, const IrDiagnostic *d);

/* Parses text with diagnostics collected; returns the graph or NULL. */
IrGraph *tu_parse(const char *text, const char *filename, TuDiag *d);
/* Loads corpus/<name> through ir_parse_text (filename = base name); NULL on failure. */
IrGraph *tu_load_corpus(const char *name, TuDiag *d);
/* ir_print_text into a malloc'd string; NULL on failure. */
char *tu_print(const IrGraph *g);
/* Parse + print (the canonical form of a text); NULL on failure. */
char *tu_canon(const char *text, const char *filename);

/* Result of running a program. */
typedef struct TuRun {
    int status;     /* exit code, or 128+signal when killed; -1 when it could not run */
    char *out, *err; /* captured stdout / stderr (NUL-terminated, never NULL after a run) */
    size_t out_len, err_len;
} TuRun;
/* Runs IRTOOL_BINARY with argv (NULL-terminated, not including argv[0]), feeding `in` (may be
 * NULL: empty stdin) and capturing stdout/stderr. fork/exec, no shell. `cwd` may be NULL. */
bool tu_run_irtool(const char *const *args, const char *in, size_t in_len, const char *cwd, TuRun *r);
bool tu_run(const char *prog, const char *const *args, const char *in, size_t in_len, const char *cwd,
            TuRun *r);
void tu_run_free(TuRun *r);
/* Whether ptxas (CUDA toolkit) can be run: $IRTOOL_PTXAS, /usr/local/cuda/bin, or on $PATH. */
bool tu_have_ptxas(void);
/* `irtool compile MODEL --target cpu -o DIR/NAME [--input INPUT]`: the artifact's path (malloc'd),
 * or NULL with the reason (irtool's stderr) in err. */
char *tu_compile_cpu(const char *dir, const char *model, const char *input, const char *name, char *err, size_t cap);

/* `irtool compile MODEL --no-cache -o OUT` with no inputs (compiled once for any batch or for
 * symbolic dims), asserting that irtool ran; the caller checks r's status and frees it. */
TuRun tu_compile_unbound(const char *model, const char *out);
/* Writes text to dir/m.ir (*model, malloc'd) and compiles it with no inputs and no validation
 * gate (its generated inputs are no valid sizes, indices or deciding values) into dir/m.irx,
 * asserting that irtool succeeds and keeps symbolic dims; returns the loaded artifact (irt_free). */
struct IrtArtifact *tu_compile_symbolic_text(const char *dir, const char *text, char **model);
/* Deterministic f32 data, uniform in [-1, 1), from seed (t allocated, f32). */
void tu_fill_pm1(IrTensor *t, uint64_t seed);

/* Creates a fresh temporary directory (malloc'd path) / removes it recursively. */
char *tu_mkdtemp(void);
void tu_rmtree(const char *path);
/* "<dir>/<name>", malloc'd. */
char *tu_path_join(const char *dir, const char *name);
/* Number of entries in a directory (excluding . and ..); -1 on error. */
int tu_dir_count(const char *dir);

/* Deterministic PRNG (xorshift64*). */
typedef struct TuRng {
    uint64_t s;
} TuRng;
void tu_rng_seed(TuRng *r, uint64_t seed);
uint64_t tu_rng_next(TuRng *r);
/* Uniform in [0, n) (n > 0). */
uint64_t tu_rng_below(TuRng *r, uint64_t n);

/* ---- model inputs and outputs ---------------------------------------------------------- */

/* A malloc'd array of tensors (graph inputs or outputs). */
typedef struct TuTensors {
    IrTensor *t;
    uint32_t n;
} TuTensors;
void tu_tensors_free(TuTensors *ts);
/* Deterministic pseudo-random inputs of the graph's input types: floats in [-1, 1], bools 0/1,
 * integers 0..3. Symbols B=2, S=8, T=9 (corpus/symbolic.ir needs T == S + 1), any other
 * `other_sym`. False when a type is not concrete enough or allocation fails. */
bool tu_make_inputs(const IrGraph *g, uint64_t seed, int64_t other_sym, TuTensors *out);
/* Runs the reference interpreter; diagnostics go to d. */
IrStatus tu_interp(const IrGraph *g, const TuTensors *in, TuTensors *out, TuDiag *d);
/* Same shapes and values: bitwise when rtol < 0, else within rtol relative (NaN matches NaN).
 * On a difference, false with the reason in why. */
bool tu_outputs_close(const TuTensors *a, const TuTensors *b, double rtol, char *why, size_t cap);
/* Parses and runs a pass pipeline (verify-each on); when stat is non-NULL, *stat_value gets
 * that statistic's value (-1 when no pass reported it). */
IrStatus tu_run_pipeline(IrGraph *g, const char *pipeline, TuDiag *d, const char *stat, int64_t *stat_value);
/* Number of nodes of op `op` anywhere in the graph (regions included). */
uint32_t tu_count_op(const IrGraph *g, IrOp op);

/* ---- graph text built by a test ---------------------------------------------------------- */

typedef struct TuText {
    char *s; /* malloc'd, NUL-terminated */
    size_t len, cap;
} TuText;
/* Appends printf-style text. */
void tu_text_put(TuText *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends `  const %name: f32[dims] = [...]` of n values in [-a, a] from r. */
void tu_text_const(TuText *t, TuRng *r, const char *name, const char *dims, int64_t n, double a);

/* ---- asserting helpers: these fail the calling Criterion test instead of returning NULL ---- */

/* An output (rank, dims, data) against the reference ref: the same dims, and each element
 * within atol 1e-5 + rtol 1e-4 of ref (f32) or equal (i64); `what` names it in the messages. */
void tu_assert_output_close(const IrTensor *ref, uint32_t rank, const int64_t *dims, const void *data, const char *what);

/* The LLVM backend's program for the graph text (its inputs from tu_make_inputs with `seed`)
 * agrees with the reference interpreter within atol + rtol x |expected| per element, run at
 * `threads` threads (the runtime's setting is back at 1 after). */
void tu_check_llvm_text_tol(const char *text, int threads, uint64_t seed, double atol, double rtol);
/* The same with seed 30, atol 1e-5, rtol 1e-4. */
void tu_check_llvm_text(const char *text, int threads);

/* Parses (diagnostics under `filename`) and verifies text; the graph. */
IrGraph *tu_parse_ok(const char *text, const char *filename);
/* In a Criterion test: asserts that check(text, TuDiag *) returns IR_OK, printing the
 * diagnostics it collected otherwise. */
#define TU_CHECK_TEXT_OK(check, text)                                                                \
    do {                                                                                            \
        TuDiag d_;                                                                                  \
        tu_diag_init(&d_);                                                                          \
        cr_assert_eq(check(text, &d_), IR_OK, "%s", tu_diag_text(&d_));                             \
        tu_diag_free(&d_);                                                                          \
    } while (0)

#endif
