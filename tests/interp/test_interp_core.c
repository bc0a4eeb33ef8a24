/* The reference interpreter's executor, checked on the corpus models against independent naive
 * double-precision reimplementations written here (not through any kernel), plus input
 * binding: dtype and rank checks, symbolic dims, constraint violations, determinism, the
 * on_value callback and the located "does not support" message.
 */
#include "testutil.h"
#include "validate/interp_internal.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static const float *weight(const IrGraph *g, const char *name, int64_t *numel) {
    IrValueId v = ir_value_find(g, name, strlen(name));
    cr_assert(v, "no value %s", name);
    cr_assert_eq(ir_value_kind(g, v), IR_VALUE_CONST);
    IrConstId c = ir_value_const(g, v);
    if (numel) *numel = (int64_t)(ir_const_nbytes(g, c) / 4);
    return ir_const_data(g, c);
}

static void fill_uniform(IrTensor *t, uint64_t seed, double lo, double hi) {
    TuRng r;
    tu_rng_seed(&r, seed);
    for (int64_t i = 0; i < ir_tensor_numel(t); i++)
        ((float *)t->data)[i] = (float)(lo + (hi - lo) * (double)tu_rng_below(&r, 1u << 24) / (double)(1u << 24));
}

static IrTensor f32_tensor(uint32_t rank, const int64_t *dims, uint64_t seed) {
    IrTensor t;
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F32, rank, dims), IR_OK);
    fill_uniform(&t, seed, -1, 1);
    return t;
}

/* Runs and asserts success (printing diagnostics on failure). */
static void run_ok(const IrGraph *g, const IrTensor *in, uint32_t n_in, IrTensor *out) {
    TuDiag d;
    tu_diag_init(&d);
    IrInterpOptions opt = {0};
    IrStatus s = ir_interp_run(g, in, n_in, out, &opt, &d.diag);
    cr_assert_eq(s, IR_OK, "interpreter failed: %s", tu_diag_text(&d));
    tu_diag_free(&d);
}

/* Runs expecting failure; returns the diagnostics (caller frees). */
static char *run_err(const IrGraph *g, const IrTensor *in, uint32_t n_in, IrStatus *status) {
    TuDiag d;
    tu_diag_init(&d);
    IrTensor out[4];
    IrInterpOptions opt = {0};
    *status = ir_interp_run(g, in, n_in, out, &opt, &d.diag);
    cr_assert_neq(*status, IR_OK, "expected the run to fail");
    char *text = strdup(tu_diag_text(&d));
    tu_diag_free(&d);
    return text;
}

static void assert_close(const IrTensor *t, const double *ref, int64_t n, double atol, double rtol, const char *what) {
    cr_assert_eq(t->dtype, IR_DTYPE_F32, "%s dtype", what);
    cr_assert_eq(ir_tensor_numel(t), n, "%s numel", what);
    for (int64_t i = 0; i < n; i++) {
        double a = ((const float *)t->data)[i];
        cr_assert(fabs(a - ref[i]) <= atol + rtol * fabs(ref[i]), "%s[%lld]: got %.9g, reference %.9g", what,
                  (long long)i, a, ref[i]);
    }
}

/* y[m][n] = sum_k x[m][k] w[k][n] (+ b[n]) in double */
static void ref_matmul(const double *x, const float *w, const float *b, int64_t m, int64_t k, int64_t n, double *y) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = b ? b[j] : 0;
            for (int64_t t = 0; t < k; t++) s += x[i * k + t] * (double)w[t * n + j];
            y[i * n + j] = s;
        }
}

static void ref_softmax_rows(double *x, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        double *p = x + r * n, mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < n; j++) mx = fmax(mx, p[j]);
        for (int64_t j = 0; j < n; j++) s += (p[j] = exp(p[j] - mx));
        for (int64_t j = 0; j < n; j++) p[j] /= s;
    }
}

/* ---- mlp ------------------------------------------------------------------------------------ */

Test(interp_core, mlp_rows_sum_to_one_and_match_naive_reference) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    const int64_t B = 3;
    int64_t dims[2] = {B, 64};
    IrTensor x = f32_tensor(2, dims, 1);
    IrTensor y;
    run_ok(g, &x, 1, &y);
    cr_assert_eq(y.rank, 2);
    cr_assert_eq(y.dims[0], B);
    cr_assert_eq(y.dims[1], 10);
    double xd[3 * 64], h[3 * 32], l[3 * 10];
    for (int i = 0; i < B * 64; i++) xd[i] = ((float *)x.data)[i];
    ref_matmul(xd, weight(g, "w1", NULL), weight(g, "b1", NULL), B, 64, 32, h);
    for (int i = 0; i < B * 32; i++) h[i] = h[i] > 0 ? h[i] : 0;
    ref_matmul(h, weight(g, "w2", NULL), weight(g, "b2", NULL), B, 32, 10, l);
    ref_softmax_rows(l, B, 10);
    assert_close(&y, l, B * 10, 1e-6, 1e-5, "mlp y");
    for (int64_t r = 0; r < B; r++) {
        double s = 0;
        for (int j = 0; j < 10; j++) s += ((float *)y.data)[r * 10 + j];
        cr_assert(fabs(s - 1) < 1e-5, "row %lld sums to %.9g", (long long)r, s);
    }
    ir_tensor_free(&x);
    ir_tensor_free(&y);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- conv_block ----------------------------------------------------------------------------- */

static void ref_conv(const double *x, int64_t C, int64_t H, int64_t W, const float *w, const float *b, int64_t M,
                     int64_t K, int64_t pad, double *y) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t i = 0; i < H; i++)
            for (int64_t j = 0; j < W; j++) {
                double s = b ? b[m] : 0;
                for (int64_t c = 0; c < C; c++)
                    for (int64_t u = 0; u < K; u++)
                        for (int64_t v = 0; v < K; v++) {
                            int64_t ii = i + u - pad, jj = j + v - pad;
                            if (ii < 0 || jj < 0 || ii >= H || jj >= W) continue;
                            s += x[(c * H + ii) * W + jj] * (double)w[((m * C + c) * K + u) * K + v];
                        }
                y[(m * H + i) * W + j] = s;
            }
}

Test(interp_core, conv_block_matches_naive_reference) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("conv_block.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    int64_t dims[4] = {1, 3, 16, 16};
    IrTensor x = f32_tensor(4, dims, 7);
    IrTensor y;
    run_ok(g, &x, 1, &y);
    static double xd[3 * 256], c1[8 * 256], p1[8 * 64], c2[16 * 64], gap[16], logits[5];
    for (int i = 0; i < 3 * 256; i++) xd[i] = ((float *)x.data)[i];
    ref_conv(xd, 3, 16, 16, weight(g, "w1", NULL), weight(g, "b1", NULL), 8, 3, 1, c1);
    const float *sc = weight(g, "bn_scale", NULL), *bb = weight(g, "bn_bias", NULL);
    const float *mu = weight(g, "bn_mean", NULL), *var = weight(g, "bn_var", NULL);
    for (int c = 0; c < 8; c++)
        for (int i = 0; i < 256; i++) {
            double v = (c1[c * 256 + i] - mu[c]) / sqrt((double)var[c] + 1e-5) * sc[c] + bb[c];
            c1[c * 256 + i] = v > 0 ? v : 0;
        }
    for (int c = 0; c < 8; c++)
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) {
                double m = -INFINITY;
                for (int u = 0; u < 2; u++)
                    for (int v = 0; v < 2; v++) m = fmax(m, c1[c * 256 + (2 * i + u) * 16 + 2 * j + v]);
                p1[c * 64 + i * 8 + j] = m;
            }
    ref_conv(p1, 8, 8, 8, weight(g, "w2", NULL), NULL, 16, 1, 0, c2);
    for (int c = 0; c < 16; c++) {
        double s = 0;
        for (int i = 0; i < 64; i++) s += c2[c * 64 + i] > 0 ? c2[c * 64 + i] : 0;
        gap[c] = s / 64;
    }
    const float *fw = weight(g, "fc_w", NULL), *fb = weight(g, "fc_b", NULL); /* fc_w is [5, 16] */
    for (int o = 0; o < 5; o++) {
        double s = fb[o];
        for (int c = 0; c < 16; c++) s += gap[c] * fw[o * 16 + c];
        logits[o] = s;
    }
    cr_assert_eq(y.rank, 2);
    cr_assert_eq(y.dims[1], 5);
    assert_close(&y, logits, 5, 1e-5, 1e-4, "conv_block logits");
    ir_tensor_free(&x);
    ir_tensor_free(&y);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- attention ------------------------------------------------------------------------------ */

static void ref_attention(const IrGraph *g, const float *x, const float *mask, int64_t B, int64_t S, double *out) {
    enum { D = 32 };
    double *xd = calloc((size_t)(S * D), sizeof(double)), *q = calloc((size_t)(S * D), sizeof(double));
    double *k = calloc((size_t)(S * D), sizeof(double)), *v = calloc((size_t)(S * D), sizeof(double));
    double *p = calloc((size_t)(S * S), sizeof(double)), *ctx = calloc((size_t)(S * D), sizeof(double));
    double *o = calloc((size_t)(S * D), sizeof(double));
    const float *gam = weight(g, "ln_gamma", NULL), *bet = weight(g, "ln_beta", NULL);
    double scale = weight(g, "scale", NULL)[0];
    for (int64_t b = 0; b < B; b++) {
        for (int64_t i = 0; i < S * D; i++) xd[i] = x[b * S * D + i];
        ref_matmul(xd, weight(g, "wq", NULL), NULL, S, D, D, q);
        ref_matmul(xd, weight(g, "wk", NULL), NULL, S, D, D, k);
        ref_matmul(xd, weight(g, "wv", NULL), NULL, S, D, D, v);
        for (int64_t i = 0; i < S; i++)
            for (int64_t j = 0; j < S; j++) {
                double s = 0;
                for (int t = 0; t < D; t++) s += q[i * D + t] * k[j * D + t];
                p[i * S + j] = s * scale + mask[(b * S + i) * S + j];
            }
        ref_softmax_rows(p, S, S);
        for (int64_t i = 0; i < S; i++)
            for (int t = 0; t < D; t++) {
                double s = 0;
                for (int64_t j = 0; j < S; j++) s += p[i * S + j] * v[j * D + t];
                ctx[i * D + t] = s;
            }
        ref_matmul(ctx, weight(g, "wo", NULL), NULL, S, D, D, o);
        for (int64_t i = 0; i < S; i++) {
            double *r = o + i * D, mean = 0, var = 0;
            for (int t = 0; t < D; t++) mean += (r[t] += xd[i * D + t]);
            mean /= D;
            for (int t = 0; t < D; t++) var += (r[t] - mean) * (r[t] - mean);
            var /= D;
            for (int t = 0; t < D; t++) out[(b * S + i) * D + t] = (r[t] - mean) / sqrt(var + 1e-5) * gam[t] + bet[t];
        }
    }
    free(xd), free(q), free(k), free(v), free(p), free(ctx), free(o);
}

Test(interp_core, attention_matches_naive_reference_and_is_deterministic) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("attention.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    const int64_t B = 2, S = 5;
    int64_t xd[3] = {B, S, 32}, md[3] = {B, S, S};
    IrTensor in[2] = {f32_tensor(3, xd, 11), f32_tensor(3, md, 12)};
    for (int64_t b = 0; b < B; b++) /* causal mask */
        for (int64_t i = 0; i < S; i++)
            for (int64_t j = 0; j < S; j++) ((float *)in[1].data)[(b * S + i) * S + j] = j > i ? -10000.0f : 0.0f;
    IrTensor y1, y2;
    run_ok(g, in, 2, &y1);
    run_ok(g, in, 2, &y2);
    cr_assert_eq(y1.rank, 3);
    cr_assert_eq(y1.dims[1], S);
    double *ref = calloc((size_t)(B * S * 32), sizeof(double));
    ref_attention(g, in[0].data, in[1].data, B, S, ref);
    assert_close(&y1, ref, B * S * 32, 1e-4, 1e-4, "attention y");
    cr_assert_eq(memcmp(y1.data, y2.data, ir_tensor_nbytes(&y1)), 0, "two runs are bit-identical");
    free(ref);
    ir_tensor_free(&in[0]);
    ir_tensor_free(&in[1]);
    ir_tensor_free(&y1);
    ir_tensor_free(&y2);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- control flow --------------------------------------------------------------------------- */

static void check_control_flow(const float x[4], const float branch[4]) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("control_flow.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    int64_t dims[1] = {4};
    IrTensor in;
    ir_tensor_view(&in, IR_DTYPE_F32, 1, dims, x);
    IrTensor out[2];
    run_ok(g, &in, 1, out);
    /* the loop doubles the branch result three times, emitting every step */
    double fin[4], steps[12];
    for (int i = 0; i < 4; i++) {
        fin[i] = branch[i] * 8.0;
        for (int s = 0; s < 3; s++) steps[s * 4 + i] = branch[i] * (double)(2 << s);
    }
    assert_close(&out[0], fin, 4, 0, 0, "final");
    cr_assert_eq(out[1].rank, 2);
    cr_assert_eq(out[1].dims[0], 3);
    cr_assert_eq(out[1].dims[1], 4);
    assert_close(&out[1], steps, 12, 0, 0, "steps");
    ir_tensor_free(&out[0]);
    ir_tensor_free(&out[1]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(interp_core, control_flow_then_branch_and_loop) {
    const float x[4] = {1, -2, 3, 0.5f}, relu[4] = {1, 0, 3, 0.5f};
    check_control_flow(x, relu);
}

Test(interp_core, control_flow_else_branch_and_loop) {
    const float x[4] = {-1, -2, 3, -4}, neg[4] = {1, 2, -3, 4};
    check_control_flow(x, neg);
}

/* ---- symbolic ------------------------------------------------------------------------------- */

Test(interp_core, symbolic_shapes_follow_the_inputs) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("symbolic.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    const int64_t B = 2, S = 16;
    int64_t xd[3] = {B, S, 16}, cd[3] = {B, 1, 16};
    IrTensor in[2] = {f32_tensor(3, xd, 3), f32_tensor(3, cd, 4)};
    IrTensor out[2];
    run_ok(g, in, 2, out);
    const float *x = in[0].data, *cls = in[1].data, *w = weight(g, "w", NULL);
    cr_assert_eq(out[0].rank, 3);
    cr_assert_eq(out[0].dims[1], S / 8);
    cr_assert_eq(out[1].dims[1], S + 1);
    double m[2 * 2 * 16], act[2 * 17 * 4];
    for (int64_t b = 0; b < B; b++)
        for (int64_t blk = 0; blk < S / 8; blk++)
            for (int c = 0; c < 16; c++) {
                double s = 0;
                for (int r = 0; r < 8; r++) s += x[(b * S + blk * 8 + r) * 16 + c];
                m[(b * (S / 8) + blk) * 16 + c] = s / 8;
            }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < S + 1; t++)
            for (int o = 0; o < 4; o++) {
                const float *row = t == 0 ? cls + b * 16 : x + (b * S + t - 1) * 16;
                double s = 0;
                for (int c = 0; c < 16; c++) s += row[c] * (double)w[c * 4 + o];
                act[(b * (S + 1) + t) * 4 + o] = 1 / (1 + exp(-s));
            }
    assert_close(&out[0], m, B * (S / 8) * 16, 1e-6, 1e-5, "block mean");
    assert_close(&out[1], act, B * (S + 1) * 4, 1e-6, 1e-5, "gate");
    for (int i = 0; i < 2; i++) ir_tensor_free(&in[i]), ir_tensor_free(&out[i]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- binding errors (checked before any kernel runs) ---------------------------------------- */

Test(interp_core, wrong_rank_is_reported_with_input_name) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    int64_t dims[3] = {1, 3, 64};
    IrTensor x = f32_tensor(3, dims, 1);
    IrStatus s;
    char *msg = run_err(g, &x, 1, &s);
    cr_assert(strstr(msg, "input 'x'") && strstr(msg, "rank 3") && strstr(msg, "rank 2"), "%s", msg);
    free(msg);
    ir_tensor_free(&x);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(interp_core, wrong_dtype_and_constant_dim_are_reported) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    int64_t dims[2] = {2, 64};
    IrTensor x;
    cr_assert_eq(ir_tensor_alloc(&x, IR_DTYPE_I32, 2, dims), IR_OK);
    IrStatus s;
    char *msg = run_err(g, &x, 1, &s);
    cr_assert(strstr(msg, "input 'x'") && strstr(msg, "i32") && strstr(msg, "f32"), "%s", msg);
    free(msg);
    ir_tensor_free(&x);
    dims[1] = 63;
    x = f32_tensor(2, dims, 1);
    msg = run_err(g, &x, 1, &s);
    cr_assert(strstr(msg, "input 'x' dim 1 is 63") && strstr(msg, "64"), "%s", msg);
    free(msg);
    msg = run_err(g, &x, 0, &s);
    cr_assert(strstr(msg, "1 input") && strstr(msg, "0 given"), "%s", msg);
    free(msg);
    ir_tensor_free(&x);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(interp_core, range_constraint_violation_names_symbol_and_input) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    int64_t dims[2] = {65, 64};
    IrTensor x = f32_tensor(2, dims, 1);
    IrStatus s;
    char *msg = run_err(g, &x, 1, &s);
    cr_assert(strstr(msg, "B in [1, 64]") && strstr(msg, "B = 65") && strstr(msg, "input 'x' dim 0"), "%s", msg);
    free(msg);
    ir_tensor_free(&x);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(interp_core, divisibility_and_symbol_agreement) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("symbolic.ir", &d);
    cr_assert(g);
    int64_t xd[3] = {2, 12, 16}, cd[3] = {2, 1, 16};
    IrTensor in[2] = {f32_tensor(3, xd, 1), f32_tensor(3, cd, 2)};
    IrStatus s;
    char *msg = run_err(g, in, 2, &s);
    cr_assert(strstr(msg, "S % 8 == 0") && strstr(msg, "S = 12"), "%s", msg);
    free(msg);
    ir_tensor_free(&in[0]);
    ir_tensor_free(&in[1]);
    int64_t xd2[3] = {2, 16, 16}, cd2[3] = {3, 1, 16};
    IrTensor in2[2] = {f32_tensor(3, xd2, 1), f32_tensor(3, cd2, 2)};
    msg = run_err(g, in2, 2, &s);
    cr_assert(strstr(msg, "input 'cls' dim 0 is 3") && strstr(msg, "symbol B") && strstr(msg, "input 'x' dim 0"), "%s",
              msg);
    free(msg);
    ir_tensor_free(&in2[0]);
    ir_tensor_free(&in2[1]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- callbacks and messages ----------------------------------------------------------------- */

typedef struct Seen {
    int count;
    char names[16][32];
} Seen;

static void on_value(void *user, const IrGraph *g, IrValueId v, const IrTensor *t) {
    Seen *s = user;
    cr_assert(t->dtype != IR_DTYPE_NONE);
    if (s->count < 16) snprintf(s->names[s->count], 32, "%s", ir_value_name(g, v));
    s->count++;
}

Test(interp_core, on_value_sees_every_node_result_in_order) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    int64_t dims[2] = {2, 64};
    IrTensor x = f32_tensor(2, dims, 5), y;
    Seen seen = {0};
    IrInterpOptions opt = {.threads = 4, .on_value = on_value, .user = &seen};
    cr_assert_eq(ir_interp_run(g, &x, 1, &y, &opt, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    static const char *order[] = {"h0", "h1", "h", "l0", "logits", "y"};
    cr_assert_eq(seen.count, 6);
    for (int i = 0; i < 6; i++) cr_assert_str_eq(seen.names[i], order[i]);
    ir_tensor_free(&x);
    ir_tensor_free(&y);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(interp_core, unsupported_message_is_located_at_the_node) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    IrNodeId n = ir_value_def_node(g, ir_value_find(g, "h", 1));
    struct InterpCtx ctx = {.g = g, .diag = &d.diag};
    KernelArgs a = {.ctx = &ctx, .g = g, .node = n};
    cr_assert_eq(interp_unsupported(&a, "bf16 inputs"), IR_EUNSUPPORTED);
    const char *msg = tu_diag_text(&d);
    cr_assert(strstr(msg, "mlp.ir:"), "%s", msg);
    cr_assert(strstr(msg, "error: node 'relu1' (op Relu): "
                          "the reference interpreter does not support Relu: bf16 inputs"),
              "%s", msg);
    cr_assert_null(strstr(msg, "(node 'relu1')"), "the node is not named twice: %s", msg);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- the CLI: irtool run and irtool conformance ------------------------------------------- */

#include "onnx.pb-c.h"

static void write_pb_tensor(const char *path, const IrTensor *t) {
    Onnx__TensorProto tp;
    onnx__tensor_proto__init(&tp);
    int64_t dims[IR_MAX_RANK];
    memcpy(dims, t->dims, sizeof dims);
    tp.n_dims = t->rank, tp.dims = dims, tp.has_data_type = 1, tp.data_type = ir_dtype_onnx(t->dtype);
    tp.has_raw_data = 1, tp.raw_data.data = t->data, tp.raw_data.len = ir_tensor_nbytes(t);
    size_t n = onnx__tensor_proto__get_packed_size(&tp);
    uint8_t *buf = malloc(n);
    onnx__tensor_proto__pack(&tp, buf);
    cr_assert(tu_write_file(path, buf, n));
    free(buf);
}

static char *path3(const char *a, const char *b, const char *c) {
    char *ab = tu_path_join(a, b), *abc = tu_path_join(ab, c);
    free(ab);
    return abc;
}

Test(interp_cli, run_writes_outputs_and_reports_input_errors) {
    char *dir = tu_mkdtemp();
    char *model = tu_source_path("corpus/mlp.ir");
    int64_t dims[2] = {2, 64};
    IrTensor x = f32_tensor(2, dims, 9);
    char *xin = tu_path_join(dir, "x.npy"), *outdir = tu_path_join(dir, "out");
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_npy_write(xin, &x, &d.diag), IR_OK);
    char arg[4096];
    snprintf(arg, sizeof arg, "x=%s", xin);
    TuRun r;
    const char *ok[] = {"run", model, "--input", arg, "--output-dir", outdir, NULL};
    cr_assert(tu_run_irtool(ok, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strncmp(r.out, "y: f32[2, 10] min=", 18) == 0, "%s", r.out);
    tu_run_free(&r);
    char *ypath = tu_path_join(outdir, "y.npy");
    IrTensor y, yref;
    cr_assert_eq(ir_npy_read(ypath, &d.diag, &y), IR_OK, "%s", tu_diag_text(&d));
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    run_ok(g, &x, 1, &yref);
    cr_assert_eq(memcmp(y.data, yref.data, ir_tensor_nbytes(&y)), 0, "the CLI computes the same bits");
    /* positional input, missing input, unknown name, bad file, constraint violation */
    const char *pos[] = {"run", model, "--input", xin, NULL};
    cr_assert(tu_run_irtool(pos, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    const char *missing[] = {"run", model, NULL};
    cr_assert(tu_run_irtool(missing, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "missing input 'x'"), "%s", r.err);
    tu_run_free(&r);
    snprintf(arg, sizeof arg, "nope=%s", xin);
    const char *unknown[] = {"run", model, "--input", arg, NULL};
    cr_assert(tu_run_irtool(unknown, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "the model has no input 'nope'"), "%s", r.err);
    tu_run_free(&r);
    const char *bad[] = {"run", model, "--input", model, NULL};
    cr_assert(tu_run_irtool(bad, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "bad magic"), "%s", r.err);
    tu_run_free(&r);
    int64_t big[2] = {65, 64};
    IrTensor x65 = f32_tensor(2, big, 1);
    cr_assert_eq(ir_npy_write(xin, &x65, &d.diag), IR_OK);
    cr_assert(tu_run_irtool(pos, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "B in [1, 64]"), "%s", r.err);
    tu_run_free(&r);
    ir_tensor_free(&x65), ir_tensor_free(&x), ir_tensor_free(&y), ir_tensor_free(&yref);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    free(model), free(xin), free(outdir), free(ypath);
    tu_rmtree(dir);
    free(dir);
}

Test(interp_cli, conformance_pass_fail_expect_junit_and_light) {
    char *dir = tu_mkdtemp();
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    /* suite/test_mlp_ok and suite/test_mlp_bad share the model; _bad expects perturbed values */
    char *suite = tu_path_join(dir, "suite");
    cr_assert(mkdir(suite, 0777) == 0);
    int64_t dims[2] = {2, 64};
    IrTensor x = f32_tensor(2, dims, 21), y;
    run_ok(g, &x, 1, &y);
    const char *names[2] = {"test_mlp_ok", "test_mlp_bad"};
    for (int k = 0; k < 2; k++) {
        char *t = tu_path_join(suite, names[k]), *set = tu_path_join(t, "test_data_set_0");
        cr_assert(mkdir(t, 0777) == 0 && mkdir(set, 0777) == 0);
        char *m = tu_path_join(t, "model.onnx");
        cr_assert_eq(ir_onnx_export(g, m, &d.diag), IR_OK, "%s", tu_diag_text(&d));
        char *in = tu_path_join(set, "input_0.pb"), *out = tu_path_join(set, "output_0.pb");
        write_pb_tensor(in, &x);
        if (k == 1) ((float *)y.data)[13] += 0.01f; /* row 1, column 3 */
        write_pb_tensor(out, &y);
        free(t), free(set), free(m), free(in), free(out);
    }
    /* a light/-style model: no inputs stored, output checked for shape only (B becomes 1) */
    char *light = path3(dir, "suite", "light_mlp.onnx");
    cr_assert_eq(ir_onnx_export(g, light, &d.diag), IR_OK);
    int64_t odims[2] = {1, 10};
    IrTensor lo;
    cr_assert_eq(ir_tensor_alloc(&lo, IR_DTYPE_F32, 2, odims), IR_OK);
    char *lout = path3(dir, "suite", "light_mlp_output_0.pb");
    write_pb_tensor(lout, &lo);

    char *junit = tu_path_join(dir, "j.xml"), *expect = tu_path_join(dir, "expect.txt");
    cr_assert(tu_write_file(expect, "# expected\ntest_mlp_ok\ntest_mlp_bad  # regressed\n", 47));
    TuRun r;
    const char *args[] = {"conformance", suite, "--junit", junit, NULL};
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "pass light_mlp (shape only)\n"), "%s", r.out);
    cr_assert(strstr(r.out, "fail test_mlp_bad: output 0 worst element at [1,3]: got "), "%s", r.out);
    cr_assert(strstr(r.out, "pass test_mlp_ok\n"), "%s", r.out);
    cr_assert(strstr(r.out, "2 passed, 1 failed, 0 skipped\n"), "%s", r.out);
    /* sorted by name: light_mlp, test_mlp_bad, test_mlp_ok */
    cr_assert(strstr(r.out, "light_mlp") < strstr(r.out, "test_mlp_bad"));
    cr_assert(strstr(r.out, "test_mlp_bad") < strstr(r.out, "test_mlp_ok"));
    tu_run_free(&r);
    char *xml = tu_read_file(junit, NULL);
    cr_assert(xml && strstr(xml, "<testcase classname=\"suite\" name=\"test_mlp_bad\">") && strstr(xml, "<failure"),
              "%s", xml);
    free(xml);
    const char *exp_args[] = {"conformance", suite, "--expect", expect, "--quiet", NULL};
    cr_assert(tu_run_irtool(exp_args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1, "%s", r.out);
    cr_assert(strstr(r.out, "regression test_mlp_bad"), "%s", r.out);
    cr_assert(strstr(r.out, "newly passing light_mlp"), "%s", r.out);
    cr_assert_null(strstr(r.out, "pass test_mlp_ok"), "--quiet: %s", r.out);
    tu_run_free(&r);
    const char *filt[] = {"conformance", suite, "--filter", "_ok$", "--expect", expect, NULL};
    cr_assert(tu_run_irtool(filt, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "filtered-out expectations are not regressions: %s", r.out);
    cr_assert(strstr(r.out, "1 passed, 0 failed, 0 skipped\n"), "%s", r.out);
    tu_run_free(&r);
    ir_tensor_free(&x), ir_tensor_free(&y), ir_tensor_free(&lo);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    free(suite), free(light), free(lout), free(junit), free(expect);
    tu_rmtree(dir);
    free(dir);
}
