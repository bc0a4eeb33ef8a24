/* Reference-interpreter kernels for contractions, pooling and sampling, control flow,
 * quantization (ONNX and FP8), signal, random, losses and recurrent ops: small text-IR graphs
 * run through ir_interp_run and checked against hand-computed values or naive double-precision
 * references written here (conv as a 7-loop sum, matmul, pools), including every tiling edge
 * of the blocked f32 GEMM and thread-count independence.
 */
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 8

/* ---- helpers --------------------------------------------------------------------------------- */

typedef struct Run {
    IrGraph *g;
    IrTensor out[MAX_IO];
    uint32_t n_out;
    IrStatus status;
    TuDiag d;
} Run;

/* Parses a full graph text and runs it on `in` with `threads`. */
static void run_text(Run *r, const char *text, const IrTensor *in, uint32_t n_in, int threads) {
    memset(r, 0, sizeof *r);
    tu_diag_init(&r->d);
    r->g = tu_parse(text, "k2.ir", &r->d);
    cr_assert(r->g, "parse failed: %s\n%s", tu_diag_text(&r->d), text);
    r->n_out = ir_graph_num_outputs(r->g);
    cr_assert(r->n_out <= MAX_IO);
    IrInterpOptions opt = {0};
    opt.threads = threads;
    r->status = ir_interp_run(r->g, in, n_in, r->out, &opt, &r->d.diag);
}

static void run_ok(Run *r, const char *text, const IrTensor *in, uint32_t n_in) {
    run_text(r, text, in, n_in, 0);
    cr_assert_eq(r->status, IR_OK, "run failed: %s\n%s", tu_diag_text(&r->d), text);
}

static void run_free(Run *r) {
    if (r->status == IR_OK)
        for (uint32_t i = 0; i < r->n_out; i++) ir_tensor_free(&r->out[i]);
    ir_graph_destroy(r->g);
    tu_diag_free(&r->d);
}

static const char *shape_text(uint32_t rank, const int64_t *dims) {
    static char bufs[8][128];
    static int k;
    char *b = bufs[k++ % 8];
    size_t n = 0;
    for (uint32_t i = 0; i < rank; i++) n += (size_t)snprintf(b + n, 128 - n, "%s%lld", i ? ", " : "", (long long)dims[i]);
    b[n] = 0;
    return b;
}

static IrTensor rand_tensor(IrDType dt, uint32_t rank, const int64_t *dims, uint64_t seed) {
    IrTensor t;
    cr_assert_eq(ir_tensor_alloc(&t, dt, rank, dims), IR_OK);
    TuRng r;
    tu_rng_seed(&r, seed);
    for (int64_t i = 0; i < ir_tensor_numel(&t); i++)
        ir_elem_set_f64(dt, t.data, (size_t)i, -1 + 2 * (double)tu_rng_below(&r, 1u << 20) / (double)(1u << 20));
    return t;
}

static IrTensor vals_tensor(IrDType dt, uint32_t rank, const int64_t *dims, const double *v) {
    IrTensor t;
    cr_assert_eq(ir_tensor_alloc(&t, dt, rank, dims), IR_OK);
    for (int64_t i = 0; i < ir_tensor_numel(&t); i++) ir_elem_set_f64(dt, t.data, (size_t)i, v[i]);
    return t;
}

static double get(const IrTensor *t, int64_t i) { return ir_elem_get_f64(t->dtype, t->data, (size_t)i); }

static void check_shape(const IrTensor *t, IrDType dt, uint32_t rank, const int64_t *dims) {
    char got[128];
    ir_tensor_shape_str(t, got, sizeof got);
    cr_assert_eq(t->dtype, dt, "dtype: got %s, want %s", got, ir_dtype_name(dt));
    cr_assert_eq(t->rank, rank, "rank: got %s, want %u", got, rank);
    for (uint32_t i = 0; i < rank; i++) cr_assert_eq(t->dims[i], dims[i], "dim %u: got %s", i, got);
}

static void check_close(const IrTensor *t, const double *want, int64_t n, double atol, double rtol, const char *what) {
    cr_assert_eq(ir_tensor_numel(t), n, "%s: numel %lld, want %lld", what, (long long)ir_tensor_numel(t), (long long)n);
    for (int64_t i = 0; i < n; i++) {
        double v = get(t, i);
        if (isnan(want[i])) {
            cr_assert(isnan(v), "%s[%lld]: got %.9g, want nan", what, (long long)i, v);
            continue;
        }
        cr_assert(fabs(v - want[i]) <= atol + rtol * fabs(want[i]), "%s[%lld]: got %.9g, want %.9g", what,
                  (long long)i, v, want[i]);
    }
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const double[]){__VA_ARGS__})
#define NV(...) ((int64_t)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)))
#define EXPECT(t, tol, ...) check_close((t), VALS(__VA_ARGS__), NV(__VA_ARGS__), (tol), (tol), #t)

/* Graph without inputs: `body` is the graph body (consts, nodes, return). */
static void run_body(Run *r, const char *body) {
    char *text = malloc(strlen(body) + 64);
    cr_assert(text);
    sprintf(text, "graph @t() {\n%s\n}\n", body);
    run_ok(r, text, NULL, 0);
    free(text);
}

/* ---- naive references ---------------------------------------------------------------------- */

typedef struct ConvCfg {
    int r;               /* spatial rank */
    int64_t n, c, m, g;  /* batch, in channels, out channels, groups */
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
    const char *auto_pad; /* NULL = explicit pads */
    bool bias;
} ConvCfg;

static int64_t conv_out(const ConvCfg *c, int i) {
    int64_t ek = (c->k[i] - 1) * c->d[i] + 1;
    if (c->auto_pad && strncmp(c->auto_pad, "SAME", 4) == 0) return (c->in[i] + c->s[i] - 1) / c->s[i];
    return (c->in[i] + c->pb[i] + c->pe[i] - ek) / c->s[i] + 1;
}

/* 7-loop direct convolution in double over 1..3 spatial dims (padded to 3). */
static void ref_conv(const ConvCfg *c0, const IrTensor *x, const IrTensor *w, const IrTensor *b, double *y) {
    ConvCfg c = *c0;
    int64_t out[3];
    for (int i = 0; i < c.r; i++) {
        out[i] = conv_out(&c, i);
        if (c.auto_pad && strncmp(c.auto_pad, "SAME", 4) == 0) {
            int64_t tot = (out[i] - 1) * c.s[i] + (c.k[i] - 1) * c.d[i] + 1 - c.in[i];
            if (tot < 0) tot = 0;
            c.pb[i] = strcmp(c.auto_pad, "SAME_UPPER") == 0 ? tot / 2 : tot - tot / 2;
        } else if (c.auto_pad) {
            c.pb[i] = 0;
        }
    }
    int64_t I[3] = {1, 1, 1}, K[3] = {1, 1, 1}, O[3] = {1, 1, 1}, S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, P[3] = {0, 0, 0};
    for (int i = 0; i < c.r; i++) {
        int j = 3 - c.r + i;
        I[j] = c.in[i], K[j] = c.k[i], O[j] = out[i], S[j] = c.s[i], D[j] = c.d[i], P[j] = c.pb[i];
    }
    int64_t cg = c.c / c.g, mg = c.m / c.g, e = 0;
    for (int64_t n = 0; n < c.n; n++)
        for (int64_t m = 0; m < c.m; m++)
            for (int64_t o0 = 0; o0 < O[0]; o0++)
                for (int64_t o1 = 0; o1 < O[1]; o1++)
                    for (int64_t o2 = 0; o2 < O[2]; o2++) {
                        double acc = b ? get(b, m) : 0;
                        for (int64_t ci = 0; ci < cg; ci++)
                            for (int64_t k0 = 0; k0 < K[0]; k0++)
                                for (int64_t k1 = 0; k1 < K[1]; k1++)
                                    for (int64_t k2 = 0; k2 < K[2]; k2++) {
                                        int64_t i0 = o0 * S[0] - P[0] + k0 * D[0];
                                        int64_t i1 = o1 * S[1] - P[1] + k1 * D[1];
                                        int64_t i2 = o2 * S[2] - P[2] + k2 * D[2];
                                        if (i0 < 0 || i0 >= I[0] || i1 < 0 || i1 >= I[1] || i2 < 0 || i2 >= I[2]) continue;
                                        int64_t ch = (m / mg) * cg + ci;
                                        acc += get(x, (((n * c.c + ch) * I[0] + i0) * I[1] + i1) * I[2] + i2) *
                                               get(w, (((m * cg + ci) * K[0] + k0) * K[1] + k1) * K[2] + k2);
                                    }
                        y[e++] = acc;
                    }
}

static const char *ints_text(int n, const int64_t *v) {
    static char bufs[6][128];
    static int k;
    char *b = bufs[k++ % 6];
    size_t len = (size_t)snprintf(b, 128, "[");
    for (int i = 0; i < n; i++) len += (size_t)snprintf(b + len, 128 - len, "%s%lld", i ? ", " : "", (long long)v[i]);
    snprintf(b + len, 128 - len, "]");
    return b;
}

/* Runs one Conv configuration against ref_conv. */
static void conv_case(const ConvCfg *c, IrDType dt, uint64_t seed, int threads, double tol) {
    int64_t xd[5] = {c->n, c->c}, wd[5] = {c->m, c->c / c->g}, od[5] = {c->n, c->m};
    int64_t pads[6];
    for (int i = 0; i < c->r; i++) {
        xd[2 + i] = c->in[i];
        wd[2 + i] = c->k[i];
        od[2 + i] = conv_out(c, i);
        pads[i] = c->pb[i], pads[c->r + i] = c->pe[i];
    }
    uint32_t rank = (uint32_t)c->r + 2;
    IrTensor in[3];
    in[0] = rand_tensor(dt, rank, xd, seed);
    in[1] = rand_tensor(dt, rank, wd, seed + 1);
    in[2] = rand_tensor(dt, 1, &c->m, seed + 2);
    const char *dn = ir_dtype_name(dt);
    char attrs[512], text[2048];
    if (c->auto_pad)
        snprintf(attrs, sizeof attrs, "auto_pad = \"%s\", dilations = %s, group = %lld, strides = %s", c->auto_pad,
                 ints_text(c->r, c->d), (long long)c->g, ints_text(c->r, c->s));
    else
        snprintf(attrs, sizeof attrs, "dilations = %s, group = %lld, pads = %s, strides = %s", ints_text(c->r, c->d),
                 (long long)c->g, ints_text(2 * c->r, pads), ints_text(c->r, c->s));
    char bias_arg[64] = "";
    if (c->bias) snprintf(bias_arg, sizeof bias_arg, ", %%b: %s[%lld]", dn, (long long)c->m);
    snprintf(text, sizeof text,
             "graph @t(%%x: %s[%s], %%w: %s[%s]%s) {\n  %%y = Conv(%%x, %%w%s) {%s}\n  return %%y\n}\n", dn,
             shape_text(rank, xd), dn, shape_text(rank, wd), bias_arg, c->bias ? ", %b" : "", attrs);
    Run r;
    run_text(&r, text, in, c->bias ? 3 : 2, threads);
    cr_assert_eq(r.status, IR_OK, "run failed: %s\n%s", tu_diag_text(&r.d), text);
    check_shape(&r.out[0], dt, rank, od);
    int64_t n = ir_tensor_numel(&r.out[0]);
    double *ref = malloc((size_t)n * sizeof(double));
    ref_conv(c, &in[0], &in[1], c->bias ? &in[2] : NULL, ref);
    check_close(&r.out[0], ref, n, tol, tol, text);
    free(ref);
    run_free(&r);
    for (int i = 0; i < 3; i++) ir_tensor_free(&in[i]);
}

/* ---- contractions ------------------------------------------------------------------------------ */

Test(k2_conv, random_configs_vs_naive) {
    const ConvCfg cases[] = {
        /* r  n  c  m  g   in          k          s          d          pb         pe     auto  bias */
        {2, 1, 3, 8, 1, {7, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, true},
        {2, 2, 4, 6, 2, {8, 7}, {3, 2}, {2, 1}, {1, 2}, {0, 1}, {2, 0}, NULL, true},
        {2, 1, 6, 6, 6, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, NULL, false}, /* depthwise */
        {2, 1, 5, 7, 1, {10, 6}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, NULL, true}, /* 1x1 direct */
        {2, 1, 5, 7, 1, {10, 6}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, NULL, false}, /* strided 1x1 */
        {1, 2, 3, 5, 1, {11}, {4}, {3}, {2}, {2}, {1}, NULL, true},
        {3, 1, 2, 4, 2, {5, 6, 4}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}, NULL, true},
        {2, 1, 3, 4, 1, {7, 8}, {3, 4}, {2, 3}, {1, 1}, {0}, {0}, "SAME_UPPER", true},
        {2, 1, 3, 4, 1, {7, 8}, {3, 4}, {2, 3}, {1, 1}, {0}, {0}, "SAME_LOWER", false},
        {2, 1, 3, 4, 1, {7, 8}, {3, 2}, {2, 1}, {1, 1}, {0}, {0}, "VALID", true},
        /* big enough for several GEMM blocks (K = 300 > KC, M not a multiple of the tile) */
        {2, 1, 60, 37, 1, {9, 11}, {2, 3}, {1, 1}, {1, 1}, {1, 0}, {0, 1}, NULL, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_case(&cases[i], IR_DTYPE_F32, 100 + i, 0, 1e-5);
}

Test(k2_conv, generic_dtypes_and_threads) {
    const ConvCfg c = {2, 2, 4, 6, 2, {6, 5}, {3, 3}, {1, 2}, {2, 1}, {1, 1}, {2, 0}, NULL, true};
    conv_case(&c, IR_DTYPE_F64, 7, 0, 1e-12);
    conv_case(&c, IR_DTYPE_F16, 8, 0, 2e-2);
    const ConvCfg big = {2, 1, 16, 40, 1, {30, 30}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, NULL, true};
    conv_case(&big, IR_DTYPE_F32, 9, 2, 1e-5);
}

/* Same graph, 1 and 2 threads: bit-identical results. */
Test(k2_conv, thread_count_does_not_change_bits) {
    int64_t xd[4] = {1, 32, 20, 20}, wd[4] = {48, 32, 3, 3}, md[2] = {70, 300}, nd[2] = {300, 90};
    IrTensor in[4] = {rand_tensor(IR_DTYPE_F32, 4, xd, 1), rand_tensor(IR_DTYPE_F32, 4, wd, 2),
                      rand_tensor(IR_DTYPE_F32, 2, md, 3), rand_tensor(IR_DTYPE_F32, 2, nd, 4)};
    const char *text = "graph @t(%x: f32[1, 32, 20, 20], %w: f32[48, 32, 3, 3], %a: f32[70, 300], %b: f32[300, 90]) {\n"
                       "  %y = Conv(%x, %w) {pads = [1, 1, 1, 1]}\n  %z = MatMul(%a, %b)\n  return %y, %z\n}\n";
    Run r1, r2;
    run_text(&r1, text, in, 4, 1);
    run_text(&r2, text, in, 4, 2);
    cr_assert_eq(r1.status, IR_OK, "%s", tu_diag_text(&r1.d));
    cr_assert_eq(r2.status, IR_OK, "%s", tu_diag_text(&r2.d));
    for (int o = 0; o < 2; o++)
        cr_assert(memcmp(r1.out[o].data, r2.out[o].data, ir_tensor_nbytes(&r1.out[o])) == 0, "output %d differs", o);
    run_free(&r1);
    run_free(&r2);
    for (int i = 0; i < 4; i++) ir_tensor_free(&in[i]);
}

static void ref_gemm(const IrTensor *A, const IrTensor *B, const IrTensor *C, bool ta, bool tb, double alpha,
                     double beta, int64_t M, int64_t N, int64_t K, double *y) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += get(A, ta ? k * M + i : i * K + k) * get(B, tb ? j * K + k : k * N + j);
            double cv = 0;
            if (C) {
                int64_t c0 = C->rank == 2 ? C->dims[0] : 1, c1 = C->rank >= 1 ? C->dims[C->rank - 1] : 1;
                cv = get(C, (c0 == 1 ? 0 : i) * c1 + (c1 == 1 ? 0 : j));
            }
            y[i * N + j] = alpha * acc + beta * cv;
        }
}

Test(k2_gemm, all_trans_alpha_beta_and_bias_shapes) {
    const int64_t M = 13, N = 19, K = 300; /* K > one K block, edges in M and N */
    struct {
        uint32_t crank;
        int64_t cd[2];
    } cshapes[] = {{0, {0}}, {1, {N}}, {2, {M, 1}}, {2, {M, N}}, {2, {1, N}}, {1, {1}}};
    int seed = 10;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (size_t ci = 0; ci < sizeof cshapes / sizeof cshapes[0]; ci++) {
                double alpha = ta ? 0.5 : 1.0, beta = tb ? -2.0 : 1.0;
                int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N};
                IrTensor in[3] = {rand_tensor(IR_DTYPE_F32, 2, ad, (uint64_t)seed++), rand_tensor(IR_DTYPE_F32, 2, bd, (uint64_t)seed++),
                                  rand_tensor(IR_DTYPE_F32, cshapes[ci].crank, cshapes[ci].cd, (uint64_t)seed++)};
                char text[1024];
                snprintf(text, sizeof text,
                         "graph @t(%%a: f32[%s], %%b: f32[%s], %%c: f32[%s]) {\n"
                         "  %%y = Gemm(%%a, %%b, %%c) {alpha = %g, beta = %g, transA = %d, transB = %d}\n  return %%y\n}\n",
                         shape_text(2, ad), shape_text(2, bd), shape_text(cshapes[ci].crank, cshapes[ci].cd), alpha, beta, ta, tb);
                Run r;
                run_ok(&r, text, in, 3);
                check_shape(&r.out[0], IR_DTYPE_F32, 2, DIMS(M, N));
                double ref[M * N];
                ref_gemm(&in[0], &in[1], &in[2], ta, tb, alpha, beta, M, N, K, ref);
                check_close(&r.out[0], ref, M * N, 1e-5, 1e-5, text);
                run_free(&r);
                for (int i = 0; i < 3; i++) ir_tensor_free(&in[i]);
            }
}

Test(k2_gemm, no_bias_and_f64) {
    Run r;
    run_body(&r, "const %a: f64[2, 3] = [1, 2, 3, 4, 5, 6]\n const %b: f64[3, 2] = [1, 0, 0, 1, 1, 1]\n"
                 " %y = Gemm(%a, %b) {alpha = 2.0}\n return %y");
    check_shape(&r.out[0], IR_DTYPE_F64, 2, DIMS(2, 2));
    EXPECT(&r.out[0], 0, 8, 10, 20, 22);
    run_free(&r);
}

static void ref_matmul_batched(const IrTensor *A, const IrTensor *B, int64_t nb, const int64_t *aoff, const int64_t *boff,
                               int64_t M, int64_t K, int64_t N, double *y) {
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) acc += get(A, aoff[b] + i * K + k) * get(B, boff[b] + k * N + j);
                y[(b * M + i) * N + j] = acc;
            }
}

Test(k2_matmul, broadcast_batch_dims) {
    /* [2, 1, 3, 4] x [5, 4, 6] -> [2, 5, 3, 6] */
    IrTensor in[2] = {rand_tensor(IR_DTYPE_F32, 4, DIMS(2, 1, 3, 4), 1), rand_tensor(IR_DTYPE_F32, 3, DIMS(5, 4, 6), 2)};
    Run r;
    run_ok(&r, "graph @t(%a: f32[2, 1, 3, 4], %b: f32[5, 4, 6]) {\n %y = MatMul(%a, %b)\n return %y\n}\n", in, 2);
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(2, 5, 3, 6));
    int64_t aoff[10], boff[10];
    for (int b = 0; b < 10; b++) aoff[b] = (b / 5) * 12, boff[b] = (b % 5) * 24;
    double ref[10 * 18];
    ref_matmul_batched(&in[0], &in[1], 10, aoff, boff, 3, 4, 6, ref);
    check_close(&r.out[0], ref, 180, 1e-6, 1e-6, "matmul");
    run_free(&r);
    ir_tensor_free(&in[0]);
    ir_tensor_free(&in[1]);
}

Test(k2_matmul, one_d_operands_and_shared_rhs) {
    Run r;
    run_body(&r, "const %v: f32[3] = [1, 2, 3]\n const %m: f32[3, 2] = [1, 2, 3, 4, 5, 6]\n"
                 " const %t: f32[2, 2, 3] = [1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1]\n"
                 " %a = MatMul(%v, %m)\n %b = MatMul(%t, %v)\n %c = MatMul(%t, %m)\n %d = MatMul(%v, %v)\n"
                 " return %a, %b, %c, %d");
    check_shape(&r.out[0], IR_DTYPE_F32, 1, DIMS(2));
    EXPECT(&r.out[0], 0, 22, 28);
    check_shape(&r.out[1], IR_DTYPE_F32, 2, DIMS(2, 2));
    EXPECT(&r.out[1], 0, 1, 2, 3, 6);
    check_shape(&r.out[2], IR_DTYPE_F32, 3, DIMS(2, 2, 2));
    EXPECT(&r.out[2], 0, 1, 2, 3, 4, 5, 6, 9, 12);
    check_shape(&r.out[3], IR_DTYPE_F32, 0, DIMS(0));
    EXPECT(&r.out[3], 0, 14);
    run_free(&r);
}

Test(k2_matmul, integers_exact) {
    Run r;
    run_body(&r, "const %a: i64[2, 2] = [3000000000, 1, -2, 5]\n const %b: i64[2, 1] = [3, -7]\n"
                 " %y = MatMul(%a, %b)\n return %y");
    EXPECT(&r.out[0], 0, 8999999993.0, -41);
    run_free(&r);
}

Test(k2_matmul, integer_and_qlinear) {
    Run r;
    run_body(&r, "const %a: u8[2, 3] = [10, 20, 30, 40, 50, 60]\n const %b: u8[3, 2] = [1, 2, 3, 4, 5, 6]\n"
                 " const %az: u8[] = [10]\n const %bz: u8[2] = [1, 2]\n"
                 " %y = MatMulInteger(%a, %b, %az, %bz)\n return %y");
    /* (a-10) = [[0,10,20],[30,40,50]], (b-[1,2]) = [[0,0],[2,2],[4,4]] */
    check_shape(&r.out[0], IR_DTYPE_I32, 2, DIMS(2, 2));
    EXPECT(&r.out[0], 0, 100, 100, 280, 280);
    run_free(&r);
    /* QLinearMatMul: real = (q - zp) * s; y = round(real_a @ real_b / ys) + yz, saturated */
    run_body(&r, "const %a: u8[1, 2] = [12, 14]\n const %as: f32[] = [0.5]\n const %az: u8[] = [10]\n"
                 " const %b: u8[2, 2] = [1, 3, 5, 7]\n const %bs: f32[] = [0.25]\n const %bz: u8[] = [1]\n"
                 " const %ys: f32[] = [0.125]\n const %yz: u8[] = [100]\n"
                 " %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz)\n return %y");
    /* ints: [2, 4] @ [[0, 2], [4, 6]] = [16, 28]; scale 0.5*0.25/0.125 = 1 -> [116, 128] */
    check_shape(&r.out[0], IR_DTYPE_U8, 2, DIMS(1, 2));
    EXPECT(&r.out[0], 0, 116, 128);
    run_free(&r);
}

Test(k2_conv, integer_and_qlinear) {
    Run r;
    run_body(&r, "const %x: u8[1, 1, 3, 3] = [2, 3, 4, 5, 6, 7, 8, 9, 10]\n const %w: u8[1, 1, 2, 2] = [1, 1, 1, 1]\n"
                 " const %xz: u8[] = [1]\n"
                 " %y = ConvInteger(%x, %w, %xz)\n return %y");
    check_shape(&r.out[0], IR_DTYPE_I32, 4, DIMS(1, 1, 2, 2));
    EXPECT(&r.out[0], 0, 12, 16, 24, 28);
    run_free(&r);
    run_body(&r, "const %x: u8[1, 1, 2, 2] = [1, 2, 3, 4]\n const %xs: f32[] = [1.0]\n const %xz: u8[] = [0]\n"
                 " const %w: i8[2, 1, 1, 1] = [2, -1]\n const %ws: f32[2] = [0.5, 1.0]\n const %wz: i8[2] = [0, 0]\n"
                 " const %ys: f32[] = [1.0]\n const %yz: i8[] = [0]\n const %bias: i32[2] = [0, 1]\n"
                 " %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz, %bias)\n return %y");
    check_shape(&r.out[0], IR_DTYPE_I8, 4, DIMS(1, 2, 2, 2));
    /* channel 0: x*2*0.5 = x; channel 1: (-x + 1) * 1 */
    EXPECT(&r.out[0], 0, 1, 2, 3, 4, 0, -1, -2, -3);
    run_free(&r);
}

Test(k2_conv, transpose_vs_naive_scatter) {
    /* X [1, 2, 3, 3], W [2, 3, 3, 3] (C, M/g, kh, kw), strides 2, pads, output_padding */
    IrTensor in[2] = {rand_tensor(IR_DTYPE_F32, 4, DIMS(1, 2, 3, 3), 5), rand_tensor(IR_DTYPE_F32, 4, DIMS(2, 3, 3, 3), 6)};
    Run r;
    run_ok(&r,
           "graph @t(%x: f32[1, 2, 3, 3], %w: f32[2, 3, 3, 3]) {\n"
           " %y = ConvTranspose(%x, %w) {strides = [2, 2], pads = [1, 0, 0, 1], output_padding = [1, 0]}\n return %y\n}\n",
           in, 2);
    /* out = 2*(3-1) + 1 + 3 - pads: H = 4+1+3-1 = 7, W = 4+0+3-1 = 6 */
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 3, 7, 6));
    double ref[3 * 7 * 6] = {0};
    for (int c = 0; c < 2; c++)
        for (int m = 0; m < 3; m++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    for (int ki = 0; ki < 3; ki++)
                        for (int kj = 0; kj < 3; kj++) {
                            int oh = i * 2 + ki - 1, ow = j * 2 + kj - 0;
                            if (oh < 0 || oh >= 7 || ow < 0 || ow >= 6) continue;
                            ref[(m * 7 + oh) * 6 + ow] += get(&in[0], (c * 3 + i) * 3 + j) * get(&in[1], ((c * 3 + m) * 3 + ki) * 3 + kj);
                        }
    check_close(&r.out[0], ref, 3 * 7 * 6, 1e-6, 1e-6, "convtranspose");
    run_free(&r);
    /* output_shape with SAME_UPPER-style padding: the ONNX example gives [1, 2, 10, 8] */
    run_ok(&r,
           "graph @t(%x: f32[1, 2, 3, 3], %w: f32[2, 3, 3, 3]) {\n"
           " %y = ConvTranspose(%x, %w) {strides = [3, 2], output_shape = [10, 8]}\n return %y\n}\n",
           in, 2);
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 3, 10, 8));
    run_free(&r);
    ir_tensor_free(&in[0]);
    ir_tensor_free(&in[1]);
}

/* Grouped, dilated, 1-D and 3-D ConvTranspose: the f32 GEMM path against the f64 generic path. */
Test(k2_conv, transpose_fast_path_matches_generic) {
    const char *shapes[][3] = {
        {"1, 4, 5, 4", "4, 3, 3, 2", "group = 2, strides = [2, 3], dilations = [2, 1], pads = [1, 2, 0, 1]"},
        {"2, 2, 7", "2, 2, 4", "strides = [3], output_padding = [2]"},
        {"1, 2, 3, 2, 3", "2, 1, 2, 2, 3", "strides = [1, 2, 2], auto_pad = \"SAME_UPPER\""},
    };
    for (int c = 0; c < 3; c++) {
        double out32[4096], out64[4096];
        int64_t n = 0;
        for (int pass = 0; pass < 2; pass++) {
            const char *dt = pass ? "f64" : "f32";
            char text[1024];
            snprintf(text, sizeof text, "graph @t(%%x: %s[%s], %%w: %s[%s]) {\n %%y = ConvTranspose(%%x, %%w) {%s}\n return %%y\n}\n",
                     dt, shapes[c][0], dt, shapes[c][1], shapes[c][2]);
            TuDiag d;
            tu_diag_init(&d);
            IrGraph *g = tu_parse(text, "t.ir", &d);
            cr_assert(g, "%s", tu_diag_text(&d));
            IrTensor in[2];
            for (int i = 0; i < 2; i++) {
                IrTypeId t = ir_value_type(g, ir_graph_input(g, (uint32_t)i));
                int64_t dims[8];
                for (uint32_t k = 0; k < ir_type_rank(g, t); k++) ir_expr_is_const(g, ir_type_dims(g, t)[k], &dims[k]);
                in[i] = rand_tensor(pass ? IR_DTYPE_F64 : IR_DTYPE_F32, ir_type_rank(g, t), dims, 40 + (uint64_t)(c * 2 + i));
            }
            IrTensor out;
            IrInterpOptions opt = {0};
            cr_assert_eq(ir_interp_run(g, in, 2, &out, &opt, &d.diag), IR_OK, "%s\n%s", tu_diag_text(&d), text);
            n = ir_tensor_numel(&out);
            cr_assert(n > 0 && n <= 4096);
            for (int64_t i = 0; i < n; i++) (pass ? out64 : out32)[i] = get(&out, i);
            ir_tensor_free(&out);
            ir_tensor_free(&in[0]);
            ir_tensor_free(&in[1]);
            ir_graph_destroy(g);
            tu_diag_free(&d);
        }
        for (int64_t i = 0; i < n; i++)
            cr_assert(fabs(out32[i] - out64[i]) <= 1e-5 * (1 + fabs(out64[i])), "case %d [%lld]: %g vs %g", c, (long long)i, out32[i], out64[i]);
    }
}

Test(k2_einsum, forms) {
    Run r;
    run_body(&r, "const %a: f32[2, 3] = [1, 2, 3, 4, 5, 6]\n const %b: f32[3, 2] = [1, 0, 0, 1, 1, 1]\n"
                 " const %s: f32[3, 3] = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
                 " %t = Einsum(%a) {equation = \"ij->ji\"}\n"
                 " %m = Einsum(%a, %b) {equation = \"ij,jk\"}\n"
                 " %d = Einsum(%s) {equation = \"ii->i\"}\n"
                 " %tr = Einsum(%s) {equation = \"ii\"}\n"
                 " return %t, %m, %d, %tr");
    check_shape(&r.out[0], IR_DTYPE_F32, 2, DIMS(3, 2));
    EXPECT(&r.out[0], 0, 1, 4, 2, 5, 3, 6);
    check_shape(&r.out[1], IR_DTYPE_F32, 2, DIMS(2, 2));
    EXPECT(&r.out[1], 0, 4, 5, 10, 11);
    EXPECT(&r.out[2], 0, 1, 5, 9);
    check_shape(&r.out[3], IR_DTYPE_F32, 0, DIMS(0));
    EXPECT(&r.out[3], 0, 15);
    run_free(&r);
    run_body(&r, "const %p: i32[2, 3] = [1, 2, 3, 4, 5, 6]\n const %q: i32[1, 3] = [1, 10, 100]\n"
                 " %y = Einsum(%p, %q) {equation = \"ij,ij->i\"}\n %o = Einsum(%p, %q) {equation = \"ij,kj->ik\"}\n return %y, %o");
    check_shape(&r.out[0], IR_DTYPE_I32, 1, DIMS(2));
    EXPECT(&r.out[0], 0, 321, 654);
    EXPECT(&r.out[1], 0, 321, 654);
    run_free(&r);
    run_body(&r, "const %x: f32[2, 2, 2] = [1, 2, 3, 4, 5, 6, 7, 8]\n"
                 " %y = Einsum(%x, %x) {equation = \"...ij,...jk->...ik\"}\n return %y");
    check_shape(&r.out[0], IR_DTYPE_F32, 3, DIMS(2, 2, 2));
    EXPECT(&r.out[0], 0, 7, 10, 15, 22, 67, 78, 91, 106);
    run_free(&r);
}

Test(k2_det, batched) {
    Run r;
    run_body(&r, "const %x: f64[2, 3, 3] = [2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 1, 2, 1, 0, 3, 4, -3, 8]\n"
                 " %y = Det(%x)\n return %y");
    check_shape(&r.out[0], IR_DTYPE_F64, 1, DIMS(2));
    EXPECT(&r.out[0], 1e-12, 24, -2);
    run_free(&r);
}

Test(k2_fp8, matmul_scaled_and_bias) {
    /* e4m3fn codes: 0x38 = 1.0, 0x40 = 2.0, 0xB8 = -1.0, 0x30 = 0.5 */
    Run r;
    run_body(&r, "const %a: f32[2, 2] = [1, 2, -1, 0.5]\n const %b: f32[2, 2] = [2, 1, 0.5, -1]\n"
                 " const %one: f32[] = [1.0]\n const %as: f32[] = [2.0]\n const %bs: f32[2] = [1.0, 0.5]\n"
                 " const %bias: f32[2] = [0.25, -0.25]\n"
                 " %qa = irtool.quantize_fp8(%a, %one)\n %qb = irtool.quantize_fp8(%b, %one)\n"
                 " %y = irtool.fp8_matmul(%qa, %qb, %as, %bs, %bias)\n"
                 " %h = irtool.fp8_matmul(%qa, %qb, %as, %bs) {out_dtype = f16}\n return %y, %h");
    /* A' = 2a = [[2,4],[-2,1]], B' = b * [1, .5] = [[2, .5],[.5, -.5]] */
    check_shape(&r.out[0], IR_DTYPE_F32, 2, DIMS(2, 2));
    EXPECT(&r.out[0], 0, 2 * 2 + 4 * 0.5 + 0.25, 2 * 0.5 - 4 * 0.5 - 0.25, -4 + 0.5 + 0.25, -1 - 0.5 - 0.25);
    check_shape(&r.out[1], IR_DTYPE_F16, 2, DIMS(2, 2));
    EXPECT(&r.out[1], 0, 6, -1, -3.5, -1.5);
    run_free(&r);
}

/* ---- pooling --------------------------------------------------------------------------------- */

static const char *X16 = "const %x: f32[1, 1, 4, 4] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]\n";

Test(k2_pool, max_ceil_mode) {
    Run r;
    char body[1024];
    snprintf(body, sizeof body, "%s %%y = MaxPool(%%x) {kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1}\n"
             " %%z = MaxPool(%%x) {kernel_shape = [3, 3], strides = [2, 2]}\n return %%y, %%z", X16);
    run_body(&r, body);
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 1, 2, 2));
    EXPECT(&r.out[0], 0, 11, 12, 15, 16);
    check_shape(&r.out[1], IR_DTYPE_F32, 4, DIMS(1, 1, 1, 1));
    EXPECT(&r.out[1], 0, 11);
    run_free(&r);
}

Test(k2_pool, average_count_include_pad) {
    Run r;
    char body[1024];
    snprintf(body, sizeof body,
             "%s %%a = AveragePool(%%x) {kernel_shape = [2, 2], pads = [1, 1, 1, 1], strides = [2, 2]}\n"
             " %%b = AveragePool(%%x) {kernel_shape = [2, 2], pads = [1, 1, 1, 1], strides = [2, 2], count_include_pad = 1}\n"
             " %%c = AveragePool(%%x) {kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1}\n return %%a, %%b, %%c", X16);
    run_body(&r, body);
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 1, 3, 3));
    EXPECT(&r.out[0], 1e-6, 1, 2.5, 4, 7, 8.5, 10, 13, 14.5, 16);
    EXPECT(&r.out[1], 1e-6, 0.25, 1.25, 1, 3.5, 8.5, 5, 3.25, 7.25, 4);
    /* ceil windows are clipped to the input: [[6, 7.5? ...]] */
    EXPECT(&r.out[2], 1e-6, 6, 7.5, 12, 13.5);
    run_free(&r);
}

Test(k2_pool, max_indices_storage_order_dilations) {
    Run r;
    char body[1024];
    snprintf(body, sizeof body,
             "%s %%y, %%i = MaxPool(%%x) {kernel_shape = [2, 2], strides = [2, 2]}\n"
             " %%y2, %%j = MaxPool(%%x) {kernel_shape = [2, 2], strides = [2, 2], storage_order = 1}\n"
             " %%d = MaxPool(%%x) {kernel_shape = [2, 2], dilations = [2, 2]}\n return %%y, %%i, %%j, %%d", X16);
    run_body(&r, body);
    EXPECT(&r.out[0], 0, 6, 8, 14, 16);
    check_shape(&r.out[1], IR_DTYPE_I64, 4, DIMS(1, 1, 2, 2));
    EXPECT(&r.out[1], 0, 5, 7, 13, 15);
    EXPECT(&r.out[2], 0, 5, 13, 7, 15);
    check_shape(&r.out[3], IR_DTYPE_F32, 4, DIMS(1, 1, 2, 2));
    EXPECT(&r.out[3], 0, 11, 12, 15, 16);
    run_free(&r);
}

Test(k2_pool, same_padding_and_random_vs_naive_avg) {
    /* AveragePool SAME_UPPER 3x3 stride 1 on 5x5 of ones with count_include_pad=0: all 1 */
    Run r;
    run_body(&r, "const %x: f32[1, 1, 3, 3] = [1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
                 " %y = AveragePool(%x) {auto_pad = \"SAME_UPPER\", kernel_shape = [2, 2]}\n"
                 " %z = AveragePool(%x) {auto_pad = \"SAME_UPPER\", kernel_shape = [2, 2], count_include_pad = 1}\n"
                 " %w = LpPool(%x) {kernel_shape = [2, 2], p = 2}\n return %y, %z, %w");
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 1, 3, 3));
    EXPECT(&r.out[0], 1e-7, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    EXPECT(&r.out[1], 1e-7, 1, 1, 0.5, 1, 1, 0.5, 0.5, 0.5, 0.25);
    EXPECT(&r.out[2], 1e-7, 2, 2, 2, 2);
    run_free(&r);
}

Test(k2_pool, global_pools) {
    Run r;
    run_body(&r, "const %x: f32[1, 2, 2, 2] = [1, 2, 3, 4, -1, -2, -3, -4]\n"
                 " %a = GlobalAveragePool(%x)\n %m = GlobalMaxPool(%x)\n %l = GlobalLpPool(%x) {p = 1}\n return %a, %m, %l");
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 2, 1, 1));
    EXPECT(&r.out[0], 0, 2.5, -2.5);
    EXPECT(&r.out[1], 0, 4, -1);
    EXPECT(&r.out[2], 1e-7, 10, 10);
    run_free(&r);
}

Test(k2_pool, roi_pool_align_unpool) {
    Run r;
    char body[2048];
    snprintf(body, sizeof body,
             "%s const %%rois: f32[1, 5] = [0, 0, 0, 3, 3]\n const %%r4: f32[1, 4] = [0, 0, 3, 3]\n const %%bi: i64[1] = [0]\n"
             " %%p = MaxRoiPool(%%x, %%rois) {pooled_shape = [2, 2]}\n"
             " %%a = RoiAlign(%%x, %%r4, %%bi) {output_height = 1, output_width = 1, sampling_ratio = 1, coordinate_transformation_mode = \"output_half_pixel\"}\n"
             " %%y, %%i = MaxPool(%%x) {kernel_shape = [2, 2], strides = [2, 2]}\n"
             " %%u = MaxUnpool(%%y, %%i) {kernel_shape = [2, 2], strides = [2, 2]}\n return %%p, %%a, %%u", X16);
    run_body(&r, body);
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 1, 2, 2));
    EXPECT(&r.out[0], 0, 6, 8, 14, 16);
    /* one sample at the centre (1.5, 1.5) of the roi: bilinear of 6, 7, 10, 11 */
    EXPECT(&r.out[1], 1e-6, 8.5);
    check_shape(&r.out[2], IR_DTYPE_F32, 4, DIMS(1, 1, 4, 4));
    EXPECT(&r.out[2], 0, 0, 0, 0, 0, 0, 6, 0, 8, 0, 0, 0, 0, 0, 14, 0, 16);
    run_free(&r);
}

/* sampling_ratio 0 with a huge roi would need ~1e18 samples per bin: a clear error, not hours of
 * work; a NaN roi gives 0 (no valid samples). */
Test(k2_pool, roi_align_huge_roi_is_refused) {
    Run r;
    char text[1024];
    snprintf(text, sizeof text,
             "graph @t() {\n %s const %%r4: f32[2, 4] = [0, 0, 3e9, 3e9, 0, 0, 3, 3]\n const %%bi: i64[2] = [0, 0]\n"
             " %%a = RoiAlign(%%x, %%r4, %%bi) {output_height = 1, output_width = 1}\n return %%a\n}\n",
             X16);
    run_text(&r, text, NULL, 0, 0);
    cr_assert_neq(r.status, IR_OK);
    cr_assert(strstr(tu_diag_text(&r.d), "roi 0 needs more than 2^20 samples per bin"), "%s", tu_diag_text(&r.d));
    run_free(&r);
    snprintf(text, sizeof text,
             "graph @t() {\n %s const %%r4: f32[1, 4] = [nan, 0, 3, 3]\n const %%bi: i64[1] = [0]\n"
             " %%a = RoiAlign(%%x, %%r4, %%bi) {output_height = 1, output_width = 1}\n return %%a\n}\n",
             X16);
    run_text(&r, text, NULL, 0, 0);
    cr_assert_eq(r.status, IR_OK, "%s", tu_diag_text(&r.d));
    EXPECT(&r.out[0], 0, 0);
    run_free(&r);
}

/* ---- resize / sampling ------------------------------------------------------------------------- */

Test(k2_resize, nearest_linear_cubic) {
    Run r;
    run_body(&r, "const %x: f32[1, 1, 2, 2] = [1, 2, 3, 4]\n const %s: f32[4] = [1, 1, 2, 2]\n"
                 " const %sz: i64[4] = [1, 1, 3, 3]\n"
                 " %n = Resize(%x, _, %s) {mode = \"nearest\"}\n"
                 " %l = Resize(%x, _, _, %sz) {mode = \"linear\", coordinate_transformation_mode = \"align_corners\"}\n"
                 " %h = Resize(%x, _, %s) {mode = \"linear\"}\n"
                 " return %n, %l, %h");
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 1, 4, 4));
    EXPECT(&r.out[0], 0, 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
    check_shape(&r.out[1], IR_DTYPE_F32, 4, DIMS(1, 1, 3, 3));
    EXPECT(&r.out[1], 1e-6, 1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4);
    /* half_pixel linear upsampling x2: coords -0.25, 0.25, 0.75, 1.25 (edge-clamped) */
    EXPECT(&r.out[2], 1e-6, 1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4);
    run_free(&r);
    /* cubic on a linear ramp reproduces the ramp away from the edges (A = -0.75, asymmetric) */
    run_body(&r, "const %x: f32[8] = [0, 1, 2, 3, 4, 5, 6, 7]\n const %s: f32[1] = [2]\n"
                 " %c = Resize(%x, _, %s) {mode = \"cubic\", coordinate_transformation_mode = \"asymmetric\"}\n"
                 " %f = Resize(%x, _, %s) {mode = \"nearest\", nearest_mode = \"ceil\", coordinate_transformation_mode = \"asymmetric\"}\n"
                 " return %c, %f");
    check_shape(&r.out[0], IR_DTYPE_F32, 1, DIMS(16));
    for (int i = 2; i < 12; i++) cr_assert_float_eq(get(&r.out[0], i), i * 0.5, 1e-5, "cubic[%d]", i);
    EXPECT(&r.out[1], 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 7);
    run_free(&r);
}

Test(k2_resize, antialias_linear_downsample) {
    /* scale 0.5 widens the triangle filter to 4 taps: weights 1/8, 3/8, 3/8, 1/8 (edge-clamped) */
    Run r;
    run_body(&r, "const %x: f32[4] = [1, 2, 3, 4]\n const %s: f32[1] = [0.5]\n"
                 " %y = Resize(%x, _, %s) {mode = \"linear\", antialias = 1}\n return %y");
    check_shape(&r.out[0], IR_DTYPE_F32, 1, DIMS(2));
    EXPECT(&r.out[0], 1e-6, 1.625, 3.375);
    run_free(&r);
}

Test(k2_resize, keep_aspect_ratio_and_axes) {
    Run r;
    run_body(&r, "const %x: f32[1, 1, 2, 4] = [1, 2, 3, 4, 5, 6, 7, 8]\n const %sz: i64[2] = [4, 4]\n"
                 " %y = Resize(%x, _, _, %sz) {axes = [2, 3], keep_aspect_ratio_policy = \"not_larger\", mode = \"nearest\"}\n"
                 " return %y");
    /* scale = min(4/2, 4/4) = 1: output stays [1, 1, 2, 4] */
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 1, 2, 4));
    EXPECT(&r.out[0], 0, 1, 2, 3, 4, 5, 6, 7, 8);
    run_free(&r);
}

Test(k2_sample, grid_sample_identity_and_col2im) {
    Run r;
    /* an align_corners identity grid over a 2x3 image returns the image */
    run_body(&r, "const %x: f32[1, 1, 2, 3] = [1, 2, 3, 4, 5, 6]\n"
                 " const %g: f32[1, 2, 3, 2] = [-1, -1, 0, -1, 1, -1, -1, 1, 0, 1, 1, 1]\n"
                 " %y = GridSample(%x, %g) {align_corners = 1}\n"
                 " %n = GridSample(%x, %g) {align_corners = 1, mode = \"nearest\"}\n return %y, %n");
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 1, 2, 3));
    EXPECT(&r.out[0], 1e-6, 1, 2, 3, 4, 5, 6);
    EXPECT(&r.out[1], 0, 1, 2, 3, 4, 5, 6);
    run_free(&r);
    /* Col2Im: 2x2 blocks of a 3x3 image, stride 1: overlapping sums of ones count coverage */
    run_body(&r, "const %c: f32[1, 4, 4] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
                 " const %is: i64[2] = [3, 3]\n const %bs: i64[2] = [2, 2]\n"
                 " %y = Col2Im(%c, %is, %bs)\n return %y");
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 1, 3, 3));
    EXPECT(&r.out[0], 0, 1, 2, 1, 2, 4, 2, 1, 2, 1);
    run_free(&r);
}

Test(k2_nms, suppress_by_iou) {
    Run r;
    run_body(&r, "const %b: f32[1, 6, 4] = [0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, -0.1, 1, 0.9, 0, 10, 1, 11, 0, 10.1, 1, 11.1, 0, 100, 1, 101]\n"
                 " const %s: f32[1, 1, 6] = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3]\n"
                 " const %m: i64[1] = [3]\n const %iou: f32[1] = [0.5]\n const %st: f32[1] = [0.0]\n"
                 " %y = NonMaxSuppression(%b, %s, %m, %iou, %st)\n return %y");
    check_shape(&r.out[0], IR_DTYPE_I64, 2, DIMS(3, 3));
    EXPECT(&r.out[0], 0, 0, 0, 3, 0, 0, 0, 0, 0, 5);
    run_free(&r);
}

/* ---- control flow ------------------------------------------------------------------------------ */

static const char *IF_GRAPH = "graph @t(%c: bool[], %x: f32[2]) {\n"
                              "  %y = If(%c) : f32[2] {\n"
                              "    then_branch() {\n      %t = Neg(%x)\n      return %t\n    }\n"
                              "    else_branch() {\n      %e = Relu(%x)\n      return %x\n    }\n  }\n"
                              "  return %y\n}\n";

Test(k2_control, if_both_branches) {
    for (int c = 0; c < 2; c++) {
        IrTensor in[2] = {vals_tensor(IR_DTYPE_BOOL, 0, NULL, VALS((double)c)), vals_tensor(IR_DTYPE_F32, 1, DIMS(2), VALS(1.5, -2))};
        Run r;
        run_ok(&r, IF_GRAPH, in, 2);
        if (c) EXPECT(&r.out[0], 0, -1.5, 2);
        else EXPECT(&r.out[0], 0, 1.5, -2);
        run_free(&r);
        ir_tensor_free(&in[0]);
        ir_tensor_free(&in[1]);
    }
}

Test(k2_control, loop_with_scan_outputs_corpus) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("control_flow.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrTensor in = vals_tensor(IR_DTYPE_F32, 1, DIMS(4), VALS(1, -2, 3, 0.5));
    IrTensor out[2];
    cr_assert_eq(ir_interp_run(g, &in, 1, out, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    /* sum 2.5 > 0: relu -> [1, 0, 3, 0.5]; doubled 3 times, each step emitted */
    EXPECT(&out[0], 0, 8, 0, 24, 4);
    check_shape(&out[1], IR_DTYPE_F32, 2, DIMS(3, 4));
    EXPECT(&out[1], 0, 2, 0, 6, 1, 4, 0, 12, 2, 8, 0, 24, 4);
    ir_tensor_free(&out[0]);
    ir_tensor_free(&out[1]);
    ir_tensor_free(&in);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(k2_control, loop_condition_and_zero_trips) {
    /* no trip count: runs while acc < 10 (cond computed in the body); acc doubles from 1 */
    Run r;
    run_body(&r, "const %go: bool[] = [true]\n const %one: f32[] = [1]\n const %two: f32[] = [2]\n const %ten: f32[] = [10]\n"
                 " %fin, %hist = Loop(_, %go, %one) : f32[], i64[?] {\n"
                 "   body(%i: i64[], %c: bool[], %acc: f32[]) {\n"
                 "     %n = Mul(%acc, %two)\n     %k = Less(%n, %ten)\n     %ii = Identity(%i)\n"
                 "     return %k, %n, %ii\n   }\n }\n"
                 " const %zero: i64[] = [0]\n"
                 " %z, %zh = Loop(%zero, %go, %one) : f32[], f32[?] {\n"
                 "   body(%i2: i64[], %c2: bool[], %a2: f32[]) {\n     %n2 = Mul(%a2, %two)\n     return %c2, %n2, %n2\n   }\n }\n"
                 " return %fin, %hist, %z, %zh");
    EXPECT(&r.out[0], 0, 16);
    check_shape(&r.out[1], IR_DTYPE_I64, 1, DIMS(4));
    EXPECT(&r.out[1], 0, 0, 1, 2, 3);
    EXPECT(&r.out[2], 0, 1);
    cr_assert_eq(ir_tensor_numel(&r.out[3]), 0);
    run_free(&r);
}

Test(k2_control, loop_trip_count_ignores_body_condition) {
    /* a for-loop (no condition input): the body's condition output is ignored */
    Run r;
    run_body(&r, "const %three: i64[] = [3]\n const %one: f32[] = [1]\n const %no: bool[] = [false]\n"
                 " %fin = Loop(%three, _, %one) : f32[] {\n"
                 "   body(%i: i64[], %c: bool[], %acc: f32[]) {\n     %n = Add(%acc, %acc)\n     %stop = Identity(%no)\n"
                 "     return %stop, %n\n   }\n }\n return %fin");
    EXPECT(&r.out[0], 0, 8);
    run_free(&r);
}

Test(k2_control, scan_forward_reverse_axes) {
    /* running sum over axis 1 of a [2, 3] input; second scan input reversed; outputs stacked
     * along axis 1 */
    Run r;
    run_body(&r, "const %init: f32[2] = [0, 0]\n const %x: f32[2, 3] = [1, 2, 3, 4, 5, 6]\n"
                 " %s, %ys, %yr = Scan(%init, %x, %x) {num_scan_inputs = 2, scan_input_axes = [1, 1], scan_input_directions = [0, 1], scan_output_axes = [1, 0]} {\n"
                 "   body(%acc: f32[2], %col: f32[2], %rcol: f32[2]) {\n"
                 "     %n = Add(%acc, %col)\n     %rr = Identity(%rcol)\n     return %n, %n, %rr\n   }\n }\n"
                 " return %s, %ys, %yr");
    EXPECT(&r.out[0], 0, 6, 15);
    check_shape(&r.out[1], IR_DTYPE_F32, 2, DIMS(2, 3));
    EXPECT(&r.out[1], 0, 1, 3, 6, 4, 9, 15);
    check_shape(&r.out[2], IR_DTYPE_F32, 2, DIMS(3, 2));
    EXPECT(&r.out[2], 0, 3, 6, 2, 5, 1, 4);
    run_free(&r);
}

Test(k2_control, fused_region_and_shape_guard) {
    Run r;
    run_body(&r, "const %a: f32[3] = [1, -2, 3]\n const %b: f32[3] = [1, 1, 1]\n"
                 " %y, %z = irtool.fused(%a, %b) : f32[3], f32[3] {\n   body(%p: f32[3], %q: f32[3]) {\n"
                 "     %s = Add(%p, %q)\n     %t = Relu(%s)\n     return %t, %s\n   }\n }\n"
                 " irtool.shape_guard(%a, %b) {message = \"same length\"}\n"
                 " return %y, %z");
    EXPECT(&r.out[0], 0, 2, 0, 4);
    EXPECT(&r.out[1], 0, 2, -1, 4);
    run_free(&r);
}

/* ---- quantization ------------------------------------------------------------------------------ */

Test(k2_quant, quantize_linear_ties_saturation_axis) {
    Run r;
    run_body(&r, "const %x: f32[8] = [0.5, 1.5, 2.5, -0.5, -1.5, 1000, -1000, 3.0]\n const %s: f32[] = [1.0]\n"
                 " const %zu: u8[] = [10]\n const %zi: i8[] = [0]\n"
                 " %u = QuantizeLinear(%x, %s, %zu)\n %i = QuantizeLinear(%x, %s, %zi)\n %d = QuantizeLinear(%x, %s)\n"
                 " return %u, %i, %d");
    check_shape(&r.out[0], IR_DTYPE_U8, 1, DIMS(8));
    EXPECT(&r.out[0], 0, 10, 12, 12, 10, 8, 255, 0, 13);
    check_shape(&r.out[1], IR_DTYPE_I8, 1, DIMS(8));
    EXPECT(&r.out[1], 0, 0, 2, 2, 0, -2, 127, -128, 3);
    EXPECT(&r.out[2], 0, 0, 2, 2, 0, 0, 255, 0, 3);
    run_free(&r);
    run_body(&r, "const %x: f32[2, 3] = [1, 2, 3, 4, 5, 6]\n const %s: f32[3] = [1, 2, 4]\n const %z: u8[3] = [0, 1, 2]\n"
                 " %q = QuantizeLinear(%x, %s, %z) {axis = 1}\n %dq = DequantizeLinear(%q, %s, %z) {axis = -1}\n return %q, %dq");
    /* 0.75 -> 1, 2.5 -> 2 and 1.5 -> 2 (half to even), plus the zero points */
    EXPECT(&r.out[0], 0, 1, 2, 3, 4, 3, 4);
    check_shape(&r.out[1], IR_DTYPE_F32, 2, DIMS(2, 3));
    EXPECT(&r.out[1], 0, 1, 2, 4, 4, 4, 8);
    run_free(&r);
}

Test(k2_quant, dynamic_quantize_linear) {
    Run r;
    run_body(&r, "const %x: f32[6] = [0, 2, -3, -2.5, 1.34, 0.5]\n"
                 " %y, %s, %z = DynamicQuantizeLinear(%x)\n return %y, %s, %z");
    /* ONNX example: scale = 5/255, zero point 153 */
    EXPECT(&r.out[0], 0, 153, 255, 0, 26, 221, 179);
    EXPECT(&r.out[1], 1e-9, 5.0f / 255.0f);
    EXPECT(&r.out[2], 0, 153);
    run_free(&r);
}

Test(k2_fp8, quantize_exact_codes) {
    Run r;
    run_body(&r, "const %x: f32[10] = [1.0, 1.0625, 1.1875, 448, 464, 480, 1e9, -1e9, 0.001953125, -0.0]\n"
                 " const %s: f32[] = [1.0]\n const %s2: f32[] = [2.0]\n"
                 " %a = irtool.quantize_fp8(%x, %s)\n %b = irtool.quantize_fp8(%x, %s) {format = \"e5m2\"}\n"
                 " %c = irtool.quantize_fp8(%x, %s) {format = \"e5m2\", saturate = 0}\n %d = irtool.quantize_fp8(%x, %s2)\n"
                 " return %a, %b, %c, %d");
    const uint8_t *a = r.out[0].data, *b = r.out[1].data, *c = r.out[2].data, *d = r.out[3].data;
    cr_assert_eq(r.out[0].dtype, IR_DTYPE_F8E4M3FN);
    /* e4m3fn: 1.0 = 0x38; 1.0625 ties to even 1.0; 1.1875 ties to even 1.25 (0x3A); 448 = 0x7E max;
     * 464 (tie between 448 and 480, the latter beyond the max) and everything larger saturate to 0x7E;
     * 2^-9 is the smallest subnormal 0x01; -0 = 0x80 */
    const uint8_t ea[10] = {0x38, 0x38, 0x3A, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x01, 0x80};
    for (int i = 0; i < 10; i++) cr_assert_eq(a[i], ea[i], "e4m3fn[%d]: got 0x%02X want 0x%02X", i, a[i], ea[i]);
    /* e5m2 saturating: 1e9 -> 57344 (0x7B); without saturation -> inf (0x7C) */
    cr_assert_eq(r.out[1].dtype, IR_DTYPE_F8E5M2);
    cr_assert_eq(b[0], 0x3C);
    cr_assert_eq(b[6], 0x7B);
    cr_assert_eq(b[7], 0xFB);
    cr_assert_eq(c[6], 0x7C);
    cr_assert_eq(c[7], 0xFC);
    /* scale 2: 1.0/2 = 0.5 = 0x30 */
    cr_assert_eq(d[0], 0x30);
    run_free(&r);
}

Test(k2_fp8, dequantize_per_axis_round_trip) {
    Run r;
    run_body(&r, "const %x: f32[2, 2] = [1, 3, -2, 12]\n const %s: f32[2] = [0.5, 4]\n"
                 " %q = irtool.quantize_fp8(%x, %s) {axis = 1}\n %y = irtool.dequantize_fp8(%q, %s) {axis = 1}\n"
                 " %h = irtool.dequantize_fp8(%q, %s) {axis = 1, to = f16}\n return %y, %h");
    check_shape(&r.out[0], IR_DTYPE_F32, 2, DIMS(2, 2));
    EXPECT(&r.out[0], 0, 1, 3, -2, 12);
    check_shape(&r.out[1], IR_DTYPE_F16, 2, DIMS(2, 2));
    EXPECT(&r.out[1], 0, 1, 3, -2, 12);
    run_free(&r);
}

Test(k2_fp8, per_channel_scale_needs_axis) {
    Run r;
    memset(&r, 0, sizeof r);
    run_text(&r, "graph @t() {\n const %x: f32[2, 2] = [1, 2, 3, 4]\n const %s: f32[2] = [1, 2]\n"
                 " %q = irtool.quantize_fp8(%x, %s)\n return %q\n}\n", NULL, 0, 0);
    cr_assert_neq(r.status, IR_OK);
    cr_assert(strstr(tu_diag_text(&r.d), "axis"), "%s", tu_diag_text(&r.d));
    run_free(&r);
}

/* ---- signal, random, losses --------------------------------------------------------------------- */

Test(k2_signal, windows) {
    Run r;
    run_body(&r, "const %n: i64[] = [4]\n %h = HannWindow(%n)\n %hs = HannWindow(%n) {periodic = 0}\n"
                 " %m = HammingWindow(%n)\n %b = BlackmanWindow(%n)\n return %h, %hs, %m, %b");
    EXPECT(&r.out[0], 1e-7, 0, 0.5, 1, 0.5);
    EXPECT(&r.out[1], 1e-7, 0, 0.75, 0.75, 0);
    EXPECT(&r.out[2], 1e-7, 0.0869565217, 0.5434782609, 1, 0.5434782609);
    EXPECT(&r.out[3], 1e-7, 0, 0.34, 1, 0.34);
    run_free(&r);
}

Test(k2_signal, dft_and_inverse) {
    Run r;
    run_body(&r, "const %x: f32[1, 4, 1] = [1, 2, 3, 4]\n %y = DFT(%x)\n %o = DFT(%x) {onesided = 1}\n"
                 " %back = DFT(%y) {inverse = 1}\n return %y, %o, %back");
    check_shape(&r.out[0], IR_DTYPE_F32, 3, DIMS(1, 4, 2));
    EXPECT(&r.out[0], 1e-6, 10, 0, -2, 2, -2, 0, -2, -2);
    check_shape(&r.out[1], IR_DTYPE_F32, 3, DIMS(1, 3, 2));
    EXPECT(&r.out[1], 1e-6, 10, 0, -2, 2, -2, 0);
    EXPECT(&r.out[2], 1e-6, 1, 0, 2, 0, 3, 0, 4, 0);
    run_free(&r);
}

Test(k2_random, deterministic_and_in_range) {
    const char *body = "%u = RandomUniform() {shape = [1000], low = 2.0, high = 3.0, seed = 5.0}\n"
                       " %u2 = RandomUniform() {shape = [1000], low = 2.0, high = 3.0, seed = 5.0}\n"
                       " %n = RandomNormal() {shape = [4000], mean = 1.0, scale = 2.0}\n"
                       " const %p: f32[4] = [0, 1, 0, 1]\n %b = Bernoulli(%p)\n"
                       " const %lg: f32[1, 3] = [-100, 0, -100]\n %mn = Multinomial(%lg) {sample_size = 5}\n"
                       " return %u, %u2, %n, %b, %mn";
    Run r1, r2;
    run_body(&r1, body);
    run_body(&r2, body);
    for (int o = 0; o < 5; o++)
        cr_assert(memcmp(r1.out[o].data, r2.out[o].data, ir_tensor_nbytes(&r1.out[o])) == 0, "output %d not deterministic", o);
    cr_assert(memcmp(r1.out[0].data, r1.out[1].data, 4000) == 0, "same seed, different values");
    double mean = 0;
    for (int i = 0; i < 1000; i++) {
        double v = get(&r1.out[0], i);
        cr_assert(v >= 2 && v < 3, "uniform %g out of range", v);
    }
    for (int i = 0; i < 4000; i++) mean += get(&r1.out[2], i) / 4000;
    cr_assert(fabs(mean - 1) < 0.15, "normal mean %g", mean);
    EXPECT(&r1.out[3], 0, 0, 1, 0, 1);
    check_shape(&r1.out[4], IR_DTYPE_I32, 2, DIMS(1, 5));
    EXPECT(&r1.out[4], 0, 1, 1, 1, 1, 1);
    run_free(&r1);
    run_free(&r2);
}

Test(k2_loss, nll_and_softmax_cross_entropy) {
    Run r;
    run_body(&r, "const %x: f32[2, 3] = [-1, -2, -3, -0.5, -1.5, -2.5]\n const %t: i64[2] = [0, 2]\n"
                 " const %w: f32[3] = [1, 2, 3]\n const %ti: i64[2] = [0, 1]\n"
                 " %m = NegativeLogLikelihoodLoss(%x, %t)\n %n = NegativeLogLikelihoodLoss(%x, %t) {reduction = \"none\"}\n"
                 " %wm = NegativeLogLikelihoodLoss(%x, %t, %w)\n %ig = NegativeLogLikelihoodLoss(%x, %ti) {ignore_index = 1, reduction = \"sum\"}\n"
                 " return %m, %n, %wm, %ig");
    EXPECT(&r.out[0], 1e-7, 1.75);
    check_shape(&r.out[1], IR_DTYPE_F32, 1, DIMS(2));
    EXPECT(&r.out[1], 1e-7, 1, 2.5);
    EXPECT(&r.out[2], 1e-7, (1 * 1 + 2.5 * 3) / 4.0);
    EXPECT(&r.out[3], 1e-7, 1);
    run_free(&r);
    run_body(&r, "const %x: f32[1, 2] = [0, 0]\n const %t: i64[1] = [1]\n"
                 " %l, %lp = SoftmaxCrossEntropyLoss(%x, %t)\n return %l, %lp");
    EXPECT(&r.out[0], 1e-7, log(2.0));
    EXPECT(&r.out[1], 1e-7, -log(2.0), -log(2.0));
    run_free(&r);
}

/* ---- recurrent ---------------------------------------------------------------------------------- */

static double sigm(double x) { return 1 / (1 + exp(-x)); }

Test(k2_rnn, rnn_directions_and_sequence_lens) {
    /* I = H = 1: h_t = tanh(w x_t + r h_{t-1} + wb + rb) */
    Run r;
    run_body(&r, "const %x: f32[3, 2, 1] = [1, 0.5, 2, -1, 3, 0]\n const %w: f32[2, 1, 1] = [0.5, -0.3]\n"
                 " const %r: f32[2, 1, 1] = [0.25, 0.7]\n const %b: f32[2, 2] = [0.1, 0.05, -0.2, 0.0]\n"
                 " const %len: i32[2] = [3, 2]\n"
                 " %y, %h = RNN(%x, %w, %r, %b, %len) {direction = \"bidirectional\", hidden_size = 1}\n return %y, %h");
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(3, 2, 2, 1));
    double xs[2][3] = {{1, 2, 3}, {0.5, -1, 0}}, y[3][2][2] = {{{0}}}, hf[2], hb[2];
    for (int b = 0; b < 2; b++) {
        int len = b == 0 ? 3 : 2;
        double h = 0;
        for (int t = 0; t < len; t++) y[t][0][b] = h = tanh(0.5 * xs[b][t] + 0.25 * h + 0.15);
        hf[b] = h;
        h = 0;
        for (int t = len - 1; t >= 0; t--) y[t][1][b] = h = tanh(-0.3 * xs[b][t] + 0.7 * h - 0.2);
        hb[b] = h;
    }
    check_close(&r.out[0], &y[0][0][0], 12, 1e-6, 1e-6, "Y");
    double want_h[4] = {hf[0], hf[1], hb[0], hb[1]};
    check_close(&r.out[1], want_h, 4, 1e-6, 1e-6, "Y_h");
    run_free(&r);
}

Test(k2_rnn, gru_and_lstm_scalar) {
    Run r;
    /* GRU, I = H = 1, gates z, r, h; linear_before_reset 0 and 1 */
    run_body(&r, "const %x: f32[2, 1, 1] = [1, -2]\n const %w: f32[1, 3, 1] = [0.5, -0.4, 0.3]\n"
                 " const %r: f32[1, 3, 1] = [0.2, 0.6, -0.7]\n const %b: f32[1, 6] = [0.1, 0.2, 0.3, -0.1, 0.05, 0.4]\n"
                 " %y, %h = GRU(%x, %w, %r, %b) {hidden_size = 1}\n"
                 " %y2, %h2 = GRU(%x, %w, %r, %b) {hidden_size = 1, linear_before_reset = 1}\n return %h, %h2");
    double xs[2] = {1, -2};
    for (int lbr = 0; lbr < 2; lbr++) {
        double h = 0;
        for (int t = 0; t < 2; t++) {
            double z = sigm(0.5 * xs[t] + 0.2 * h + 0.1 - 0.1), rr = sigm(-0.4 * xs[t] + 0.6 * h + 0.2 + 0.05);
            double c = lbr ? tanh(0.3 * xs[t] + 0.3 + rr * (-0.7 * h + 0.4)) : tanh(0.3 * xs[t] + 0.3 + -0.7 * (rr * h) + 0.4);
            h = (1 - z) * c + z * h;
        }
        check_close(&r.out[lbr], &h, 1, 1e-6, 1e-6, lbr ? "gru lbr" : "gru");
    }
    run_free(&r);
    /* LSTM with peepholes and initial state, layout 1 */
    run_body(&r, "const %x: f32[1, 2, 1] = [1, -2]\n const %w: f32[1, 4, 1] = [0.5, -0.4, 0.3, 0.2]\n"
                 " const %r: f32[1, 4, 1] = [0.2, 0.6, -0.7, 0.1]\n const %b: f32[1, 8] = [0.1, 0.2, 0.3, -0.1, 0, 0, 0, 0.5]\n"
                 " const %h0: f32[1, 1, 1] = [0.3]\n const %c0: f32[1, 1, 1] = [-0.2]\n const %p: f32[1, 3] = [0.1, 0.2, 0.3]\n"
                 " %y, %h, %c = LSTM(%x, %w, %r, %b, _, %h0, %c0, %p) {hidden_size = 1, layout = 1}\n return %y, %h, %c");
    double h = 0.3, c = -0.2;
    for (int t = 0; t < 2; t++) {
        double it = sigm(0.5 * xs[t] + 0.2 * h + 0.1 + 0.1 * c);
        double ft = sigm(0.3 * xs[t] + -0.7 * h + 0.3 + 0.3 * c);
        double ct = tanh(0.2 * xs[t] + 0.1 * h - 0.1 + 0.5);
        c = ft * c + it * ct;
        double ot = sigm(-0.4 * xs[t] + 0.6 * h + 0.2 + 0.2 * c);
        h = ot * tanh(c);
    }
    check_shape(&r.out[0], IR_DTYPE_F32, 4, DIMS(1, 2, 1, 1));
    check_close(&r.out[1], &h, 1, 1e-6, 1e-6, "lstm h");
    check_close(&r.out[2], &c, 1, 1e-6, 1e-6, "lstm c");
    run_free(&r);
}
