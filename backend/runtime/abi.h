/* The ABI between irtool's backend and libirtool-runtime: the function table compiled code is
 * called with (IrtFnTable, append only), the helpers it reaches through it, the entry point's
 * type and the .irx file layout. Generated code never refers to these helpers by name: it gets
 * the table as its second argument, so the same machine code runs in the JIT and from a loaded
 * artifact. Programs that only load and run artifacts include runtime.h, not this header.
 */
#ifndef IRTOOL_RUNTIME_ABI_H
#define IRTOOL_RUNTIME_ABI_H

#include "backend/runtime/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Row-major single-precision GEMM: C = alpha * op(A) * op(B) + beta * C (op = transpose when
 * the flag is nonzero). 64-bit sizes so generated code does not depend on BLAS's int width. */
void irt_sgemm(int64_t trans_a, int64_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
               int64_t ldc);

/* A workspace of n bytes (free() releases it), aligned to 64 bytes; from 2 MiB up, aligned to
 * 2 MiB and advised for transparent huge pages (where the kernel allows them: one TLB entry per
 * 2 MiB of activations instead of 512; ResNet-50 on one thread about 2% faster). NULL when out
 * of memory. */
void *irt_workspace_alloc(size_t n);

struct IrtFnTable;
/* One part of a kernel split for irt_parallel: ctx is the kernel's own, part in [0, n_parts),
 * or -1 for the whole work in one call (when running on one thread). */
typedef void (*IrtPartFn)(void *ctx, const struct IrtFnTable *fns, int64_t part);
/* Runs fn on parts 0 .. n_parts-1 over the runtime's thread pool (the caller works too) and
 * returns when all are done; on one thread (irt_set_threads(1), one core, or the pool busy with
 * another caller's parts) it calls fn(ctx, fns, -1) once instead. */
void irt_parallel(int64_t n_parts, IrtPartFn fn, void *ctx, const struct IrtFnTable *fns);

/* Per-run state that generated code reaches through the run slot: memory for bytes a run makes
 * (strings), freed when the run ends, and the first error a helper met (the run then fails with
 * it). */
typedef struct IrtRunCtx {
    void *blocks;
    int failed;
    char err[256];
} IrtRunCtx;
void *irt_run_alloc(IrtRunCtx *c, size_t n); /* NULL (and c->failed) when out of memory */
void irt_run_ctx_free(IrtRunCtx *c);

/* The function table generated code is called with. The order is an ABI: append only. */
typedef struct IrtFnTable {
    void (*sgemm)(int64_t, int64_t, int64_t, int64_t, int64_t, float, const float *, int64_t,
                  const float *, int64_t, float, float *, int64_t);
    float (*tanhf)(float);
    float (*erff)(float);
    /* libm in double for the functions LLVM has no intrinsic for: code is an IrtMath value */
    double (*math1)(int64_t code, double x);
    /* irt_parallel (format 3) */
    void (*parallel)(int64_t n_parts, IrtPartFn fn, void *ctx, const struct IrtFnTable *fns);
    /* irt_nms (format 4) */
    int64_t (*nms)(const float *boxes, const float *scores, int64_t nb, int64_t ncls, int64_t ns, int64_t max_out,
                   float iou, int64_t has_score_thr, float score_thr, int64_t center, int64_t *out, void *scratch);
    /* irt_strnorm (format 4) */
    int64_t (*strnorm)(const IrtString *in, int64_t n, IrtString *out, const void *stopwords, int64_t n_stop,
                       int64_t mode, int64_t case_sensitive, IrtRunCtx *ctx);
    /* irt_rnn (format 4) */
    void (*rnn)(const int64_t *ip, const float *fp, const float *x, const float *w, const float *r, const float *b,
                const int32_t *seq_lens, const float *h0, const float *c0, const float *p, float *y, float *yh,
                float *yc, float *scratch);
    /* irt_unique (format 4) */
    int64_t (*unique)(const void *x, int64_t kind, int64_t es, int64_t outer, int64_t n, int64_t inner, int64_t sorted,
                      void *y, int64_t *indices, int64_t *inverse, int64_t *counts, int64_t *scratch);
    /* irt_tfidf (format 4) */
    void (*tfidf)(const void *x, int64_t kind, int64_t rows, int64_t c, const int64_t *params, const void *pool,
                  const float *weights, float *out);
    /* irt_fail (format 4) */
    void (*fail)(IrtRunCtx *ctx, const char *msg);
    /* irt_qmatmul (format 4) */
    void (*qmatmul)(const int64_t *p, const int64_t *boff, const void *a, const void *b, const void *azp, const void *bzp,
                    const float *as, const float *bs, const float *ys, const void *yzp, void *y);
    /* irt_qconv (format 4) */
    void (*qconv)(const int64_t *p, const void *x, const void *w, const void *xzp, const void *wzp, const float *xs,
                  const float *ws, const float *ys, const void *yzp, const int32_t *bias, void *y);
    /* irt_det (format 4) */
    void (*det)(const void *x, int64_t f64, int64_t batches, int64_t m, void *y, double *scratch);
    /* irt_roi_align (format 4) */
    void (*roi_align)(const int64_t *p, double scale, const float *x, const float *rois, const int64_t *batch, float *y,
                      IrtRunCtx *ctx);
    /* irt_optim (format 4) */
    void (*optim)(const double *at, const float *r, const int64_t *t, int64_t n, const float *x, const float *g,
                  const float *s1, const float *s2, float *ox, float *os1, float *os2);
    /* irt_random (format 4) */
    void (*random)(const int64_t *ip, const double *fp, const void *in, void *out);
    /* irt_cast_str (format 4) */
    void (*cast_str)(const void *in, int64_t n, int64_t from, int64_t to, void *out, IrtRunCtx *ctx);
    /* irt_resize_taps (format 5) */
    void (*resize_taps)(const int64_t *ip, const double *fp, int64_t *idx, double *w, uint8_t *outside, IrtRunCtx *ctx);
} IrtFnTable;

enum {
    IRT_FN_SGEMM = 0, IRT_FN_TANHF = 1, IRT_FN_ERFF = 2, IRT_FN_MATH1 = 3, IRT_FN_PARALLEL = 4, IRT_FN_NMS = 5,
    IRT_FN_STRNORM = 6, IRT_FN_RNN = 7, IRT_FN_UNIQUE = 8, IRT_FN_TFIDF = 9, IRT_FN_FAIL = 10, IRT_FN_QMATMUL = 11,
    IRT_FN_QCONV = 12, IRT_FN_DET = 13, IRT_FN_ROI_ALIGN = 14, IRT_FN_OPTIM = 15, IRT_FN_RANDOM = 16, IRT_FN_CAST_STR = 17,
    IRT_FN_RESIZE_TAPS = 18, IRT_FN_COUNT = 19
};

/* Resize's taps along one axis for a scale or roi given at run time (ir/resize_taps.h, as the
 * interpreter): ip = {mode, coordinate_transformation_mode, nearest_mode (IR_RESIZE_* codes),
 * exclude_outside, antialias, input size, output size, taps stored per coordinate}, fp =
 * {cubic_coeff_a, scale, roi start, roi end}; idx, w: output size x stored taps (unused taps get
 * weight 0), outside: one flag per output coordinate. A scale that needs more taps than stored
 * fails the run (and leaves weights 0). */
void irt_resize_taps(const int64_t *ip, const double *fp, int64_t *idx, double *w, uint8_t *outside, IrtRunCtx *ctx);

/* Cast between strings and numbers (as the interpreter, ir/strconv.h): n elements of kind from to
 * kind to (0 IrtString, 1 f32, 2 f64, 3 i32, 4 i64, 5 bool); text written from numbers takes its
 * bytes from ctx; a string that is not a number of the target kind fails the run. */
void irt_cast_str(const void *in, int64_t n, int64_t from, int64_t to, void *out, IrtRunCtx *ctx);

/* RandomUniform(Like), RandomNormal(Like) and Bernoulli with the interpreter's generator
 * (ir/rng.h): ip = {op (0 uniform, 1 normal, 2 Bernoulli), seed (the generator's 64-bit state
 * seed), n, in kind, out kind (0 f32, 1 f64, 2 i32, 3 i64, 4 one byte: i8, u8, bool)}, fp = {low
 * or mean, high or scale}; in holds Bernoulli's probabilities. */
void irt_random(const int64_t *ip, const double *fp, const void *in, void *out);

/* One tensor of the training optimizers (ONNX spec formulas in double, as the interpreter), f32:
 * at = {kind, ...}: {0 Adagrad, decay_factor, epsilon, norm_coefficient} (s1 = H; out X, H),
 * {1 Adam, alpha, beta, epsilon, norm_coefficient, norm_coefficient_post} (s1 = V, s2 = H; out X,
 * V, H), {2 Momentum, alpha, beta, norm_coefficient, nesterov} (s1 = V; out X, V); r the learning
 * rate, t the step count (scalars). */
void irt_optim(const double *at, const float *r, const int64_t *t, int64_t n, const float *x, const float *g,
               const float *s1, const float *s2, float *ox, float *os1, float *os2);

/* RoiAlign (f32, as the interpreter: bilinear samples in double, avg or max): p = {N, C, H, W,
 * rois, output height, width, sampling ratio, max mode, half_pixel}; a batch index out of range
 * fails the run. */
void irt_roi_align(const int64_t *p, double scale, const float *x, const float *rois, const int64_t *batch, float *y,
                   IrtRunCtx *ctx);

/* Det of `batches` m x m matrices (f32, or f64 when f64 != 0) by LU with partial pivoting in
 * double, as the interpreter; scratch holds m * m doubles. */
void irt_det(const void *x, int64_t f64, int64_t batches, int64_t m, void *y, double *scratch);

/* ConvInteger / QLinearConv, 2-D NCHW (as the interpreter): sum over the group's channels and the
 * window of (x - x_zp) (w - w_zp), exact (int64, or f64 through the loaded BLAS's dgemm, exact
 * for such integer sums), padding contributing nothing; QLinearConv adds
 * the i32 bias and requantizes with (float)(x_scale * w_scale[m]) / y_scale. p = {x kind, w kind
 * (0 u8, 1 i8), out kind (0 i32, 1 u8, 2 i8), N, C, H, W, M, KH, KW, OH, OW, stride h, w,
 * dilation h, w, pad top, left, groups, has x_zp, n w_zp, n w_scale}. */
void irt_qconv(const int64_t *p, const void *x, const void *w, const void *xzp, const void *wzp, const float *xs,
               const float *ws, const float *ys, const void *yzp, const int32_t *bias, void *y);

/* MatMulInteger / QLinearMatMul (as the interpreter): (A - a_zp) (B - b_zp) exactly in int64 per
 * output batch b, A's matrix at element boff[4b], B's at boff[4b + 1]; a_zp a scalar or per row
 * (of A's rows over its batches, index (boff[4b + 2] + i) % n), b_zp a scalar or per column
 * ((boff[4b + 3] + j) % n). p = {a kind, b kind (0 u8, 1 i8), out kind (0 i32, 1 u8, 2 i8),
 * batches, M, K, N, n a_zp, n b_zp, n a_scale, n b_scale}; QLinear requantizes with
 * (float)(sa * sb) / y_scale, rounds half to even, adds y_zp and saturates. */
void irt_qmatmul(const int64_t *p, const int64_t *boff, const void *a, const void *b, const void *azp, const void *bzp,
                 const float *as, const float *bs, const float *ys, const void *yzp, void *y);

/* Marks the run failed with msg (the first failure is kept): generated code calls it on input data
 * it cannot take (a Compress condition longer than its axis); the run then returns the error. */
void irt_fail(IrtRunCtx *ctx, const char *msg);

/* TfIdfVectorizer (ONNX semantics, as the interpreter): rows of c items of x (kind 0 i32, 1 i64,
 * 2 IrtString) against the pool (int64 values, or a string blob: u64 offsets, then bytes) into
 * out [rows, width]. params = {min_gram, max_gram, max_skip, mode (0 TF, 1 IDF, 2 TFIDF), width,
 * pool_len, n_counts, n_indexes, ngram_counts[n_counts], ngram_indexes[n_indexes]}; weights
 * (n_indexes) may be NULL. */
void irt_tfidf(const void *x, int64_t kind, int64_t rows, int64_t c, const int64_t *params, const void *pool,
               const float *weights, float *out);

/* Unique (ONNX semantics): the n items of x (item p: x[o][p][i] for every o < outer, i < inner,
 * elements of es bytes compared as kind: 0 f32, 1 f64, 2 signed, 3 unsigned integers; NaNs equal
 * and last) grouped by value; writes the distinct items in sorted order (or in order of first
 * occurrence) to y ([outer][count][inner]) and, where not NULL, each one's first index, every
 * item's group and each group's count; returns the count. scratch: 5 * n int64. */
int64_t irt_unique(const void *x, int64_t kind, int64_t es, int64_t outer, int64_t n, int64_t inner, int64_t sorted,
                   void *y, int64_t *indices, int64_t *inverse, int64_t *counts, int64_t *scratch);

/* RNN, GRU and LSTM (ONNX opset 14 with layout), f32: ip = {kind (0 RNN, 1 GRU, 2 LSTM), seq,
 * batch, input, hidden, dirs, reverse-only, layout, linear_before_reset, input_forget, has_clip,
 * then 3 activation codes per direction (IrtAct)}, fp = {clip, then alpha and beta per activation
 * (6 each)}. b, seq_lens, h0, c0, p and the outputs may be NULL. scratch: irt_rnn_scratch floats.
 * The input projection of all steps is one irt_sgemm (BLAS); each step's h R^T runs over R in
 * panels of 16 gates ([k][16]), four panels' sums held in vector registers. R is packed so once
 * per call, or, when layout has bit 1 set (a constant R, format 5), r already holds every
 * direction packed by irt_rnn_pack_r at compile time. */
typedef enum IrtAct {
    IRT_ACT_SIGMOID, IRT_ACT_TANH, IRT_ACT_RELU, IRT_ACT_AFFINE, IRT_ACT_LEAKY, IRT_ACT_THRESH, IRT_ACT_SCALED_TANH,
    IRT_ACT_HARD_SIGMOID, IRT_ACT_ELU, IRT_ACT_SOFTSIGN, IRT_ACT_SOFTPLUS
} IrtAct;
void irt_rnn(const int64_t *ip, const float *fp, const float *x, const float *w, const float *r, const float *b,
             const int32_t *seq_lens, const float *h0, const float *c0, const float *p, float *y, float *yh, float *yc,
             float *scratch);
/* R [G * H][H] of one direction into panels of 16 gates, [np][H][16] (np = ceil(G * H / 16)),
 * rows past G * H zero. */
static inline void irt_rnn_pack_r(const float *rd, int64_t G, int64_t H, float *rt) {
    int64_t np = (G * H + 15) / 16;
    for (int64_t q = 0; q < np * 16; q++)
        for (int64_t k = 0; k < H; k++) rt[(q / 16 * H + k) * 16 + q % 16] = q < G * H ? rd[q * H + k] : 0;
}
#define IRT_RNN_IP 17
#define IRT_RNN_FP 13
static inline int64_t irt_rnn_scratch(int64_t seq, int64_t batch, int64_t hidden, int64_t gates) {
    int64_t ghp = (gates * hidden + 15) / 16 * 16;
    return 2 * batch * hidden + gates * hidden + 3 * hidden + seq * batch * gates * hidden + ghp * (hidden + 2) + 16;
}

/* StringNormalizer (ONNX semantics; case mapping ASCII only, as the interpreter): the n strings
 * of `in` without the stopwords (compared by bytes, or ASCII-case-insensitively), upper- or
 * lower-cased (mode 2 or 1; 0 keeps them), into out; returns how many (a single empty string
 * when stopwords removed them all). stopwords is a string blob (u64 offsets[n_stop + 1], then
 * the bytes); new bytes come from ctx. */
int64_t irt_strnorm(const IrtString *in, int64_t n, IrtString *out, const void *stopwords, int64_t n_stop, int64_t mode,
                    int64_t case_sensitive, IrtRunCtx *ctx);

/* NonMaxSuppression (ONNX semantics) over boxes [nb, ns, 4] and scores [nb, ncls, ns]: per batch
 * and class, boxes whose score passes score_thr (when has_score_thr), by descending score (ties
 * by index), kept unless their IoU with a kept box exceeds iou, at most max_out per class. Writes
 * [batch, class, box] triples to out and returns their count; scratch holds 40 * ns bytes. */
int64_t irt_nms(const float *boxes, const float *scores, int64_t nb, int64_t ncls, int64_t ns, int64_t max_out,
                float iou, int64_t has_score_thr, float score_thr, int64_t center, int64_t *out, void *scratch);
#define IRT_NMS_SCRATCH_PER_BOX 40

/* Codes of IrtFnTable.math1 (an ABI: append only). */
typedef enum IrtMath {
    IRT_MATH_TAN, IRT_MATH_ASIN, IRT_MATH_ACOS, IRT_MATH_ATAN, IRT_MATH_SINH, IRT_MATH_COSH, IRT_MATH_ASINH,
    IRT_MATH_ACOSH, IRT_MATH_ATANH, IRT_MATH_TANH, IRT_MATH_ERF, IRT_MATH_EXPM1, IRT_MATH_LOG1P, IRT_MATH_SIN,
    IRT_MATH_COS
} IrtMath;
double irt_math1(int64_t code, double x);

/* The process-wide table (constant after load; safe to share between threads). */
const IrtFnTable *irt_fn_table(void);

/* Entry point of a compiled graph: bufs[v] is the buffer of value v (inputs, weights, and
 * slices of the caller's workspace); fns is irt_fn_table(). Reentrant: no global state. */
typedef void (*IrtEntryFn)(void **bufs, const IrtFnTable *fns);


/* ---- artifacts (.irx files written by `irtool compile`) -------------------------------------
 * Layout (little-endian): a 96-byte header (magic "IRTOOLX\0", u32 format version, u32 header
 * size, then (u64 offset, u64 length) of four sections: manifest, constants, code, IR; then the
 * u64 checksum (backend/runtime/checksum.h: XXH3-64 of the file up to the end of the code but
 * this field) and 8 zero bytes), a text manifest (one "key value..." line each; see
 * backend/runtime/load.c), the constant data (weights, 64-byte aligned), the code (a
 * position-independent shared object, loaded from a memfd with dlopen: no LLVM at run time) and
 * the binary IR the code was compiled from (informational; the runtime never parses it). The
 * sections follow the header in this order without overlapping. The loader checks the checksum
 * and every manifest field against the others before any code is mapped. */
#define IRT_MAGIC "IRTOOLX"
/* 2: the function table gained math1 (slot 3) and manifests may carry `batch` lines.
 * 3: the function table gained parallel (slot 4), which generated Convs call.
 * 4: `symdata` lines: dims a kernel counts at run time (NonZero, Compress), read after the run.
 * 6: the checksum, `ws` lines with the value's size, the counted lines (`inputs`, `outputs`,
 *    `consts`, `wss`). Artifacts of other versions are refused with "rebuild it".
 * 7: symbols without an upper bound (`symbol ... LO -1 DIV`) and `wsrun K SLOT` / `wsruns N`
 *    lines: workspace blocks whose offset and bytes irt_shapes computes per binding; `insymval
 *    IN K ID`: symbol ID bound from entry K of input IN's values (an i32/i64 input of at most 16
 *    entries: Tile repeats, Pad pads, ConstantOfShape's shape; f32/f64 truncated: OneHot's
 *    depth), where `insym` binds from a dim (a
 *    runtime that predates the line leaves the symbol unbound and refuses the run by its range).
 * 8: `insymmul IN K ID BY C`: symbol ID bound to trunc(entry K of input IN * D), D symbol BY's
 *    value (bound by an earlier line) when BY is not 0, else C: Resize's output dims from scales
 *    given as an input. */
#define IRT_FORMAT_VERSION 8u
#define IRT_HEADER_SIZE 96u
#define IRT_CHECKSUM_OFFSET 80u

/* OpenBLAS is loaded on demand (dlopen), not linked: irt_load and the JIT call
 * irt_blas_require when the compiled code calls GEMM; 0, or -1 with the reason in err.
 * irt_blas_loaded says whether it is loaded in this process. */
int irt_blas_require(char *err, size_t cap);
int irt_blas_loaded(void);

/* Asks Linux for the AMX tile data state for this process (arch_prctl ARCH_REQ_XCOMP_PERM), which
 * code using AMX tiles needs before its first tile instruction; irt_load does it for artifacts
 * compiled with +amx-tile. 0 = granted (idempotent), else -1 with the reason in err. */
int irt_cpu_amx_enable(char *err, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
