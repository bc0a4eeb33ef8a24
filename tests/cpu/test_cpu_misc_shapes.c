/* MatMulInteger, QLinearMatMul, RoiAlign, MaxUnpool (with and without output_shape given as an
 * input), GatherND and TfIdfVectorizer with every dim a symbol: one artifact, compiled with
 * `irtool compile` and no --input, runs at two bindings through libirtool-runtime and matches the
 * interpreter exactly (integers) or within 1e-5 + 1e-4 relative (f32), output dims included;
 * sizes that disagree at run time fail the run naming the op, never a crash. */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_IN 17
#define MAX_OUT 8

static const char *model_text =
    "symbol B, M, K, N, C, H, W, R, T, L\n"
    "graph @m(%a: u8[B, M, K], %b: u8[K, N], %az: u8[], %bz: u8[N], %b3: u8[B, K, N], %bz0: u8[], %as: f32[], %bs: f32[],\n"
    "         %ys: f32[], %yz: u8[], %x: f32[B, C, H, W], %rois: f32[R, 4], %bi: i64[R], %ui: i64[B, C, H, W], %os: i64[4],\n"
    "         %gi: i64[T, 2], %tx: i64[B, L]) {\n"
    "  %mi = MatMulInteger(%a, %b, %az, %bz)\n"
    "  %ql = QLinearMatMul(%a, %as, %az, %b3, %bs, %bz0, %ys, %yz)\n"
    "  %ra = RoiAlign(%x, %rois, %bi) {output_height = 2, output_width = 3, sampling_ratio = 2, spatial_scale = 0.5}\n"
    "  %up = MaxUnpool(%x, %ui) {kernel_shape = [2, 2], strides = [2, 2]}\n"
    "  %uo = MaxUnpool(%x, %ui, %os) {kernel_shape = [2, 2], strides = [2, 2]}\n"
    "  %gn = GatherND(%x, %gi)\n"
    "  %tf = TfIdfVectorizer(%tx) {mode = \"TFIDF\", min_gram_length = 1, max_gram_length = 2, max_skip_count = 1,\n"
    "        pool_int64s = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7], ngram_counts = [0, 4], ngram_indexes = [0, 1, 2, 3, 4, 5, 6],\n"
    "        weights = [1, 0.5, 2, 1, 3, 1.5, 0.25]}\n"
    "  return %mi, %ql, %ra, %up, %uo, %gn, %tf\n}\n";

/* One binding of the symbols; extra widens MaxUnpool's output_shape past the unpooled shape,
 * bad_batch gives RoiAlign a batch index out of range. */
typedef struct Bind {
    int64_t B, M, K, N, C, H, W, R, T, L, extra;
    bool bad_batch;
} Bind;

static void alloc(IrTensor *t, IrDType dt, uint32_t rank, const int64_t *dims) {
    cr_assert_eq(ir_tensor_alloc(t, dt, rank, dims), IR_OK);
}

/* Each input of the model at binding b, valid for its op (indices in range, MaxUnpool's indices
 * distinct, rois inside the image). */
static void make_inputs(const Bind *b, IrTensor *in) {
    TuRng rng;
    tu_rng_seed(&rng, (uint64_t)(b->B * 131 + b->K));
    const int64_t dims[N_IN][4] = {{b->B, b->M, b->K}, {b->K, b->N}, {0}, {b->N}, {b->B, b->K, b->N}, {0}, {0}, {0}, {0}, {0},
                                   {b->B, b->C, b->H, b->W}, {b->R, 4}, {b->R}, {b->B, b->C, b->H, b->W}, {4}, {b->T, 2},
                                   {b->B, b->L}};
    const uint32_t rank[N_IN] = {3, 2, 0, 1, 3, 0, 0, 0, 0, 0, 4, 2, 1, 4, 1, 2, 2};
    const IrDType dt[N_IN] = {IR_DTYPE_U8, IR_DTYPE_U8, IR_DTYPE_U8, IR_DTYPE_U8, IR_DTYPE_U8, IR_DTYPE_U8,
                              IR_DTYPE_F32, IR_DTYPE_F32, IR_DTYPE_F32, IR_DTYPE_U8, IR_DTYPE_F32, IR_DTYPE_F32,
                              IR_DTYPE_I64, IR_DTYPE_I64, IR_DTYPE_I64, IR_DTYPE_I64, IR_DTYPE_I64};
    for (uint32_t i = 0; i < N_IN; i++) {
        alloc(&in[i], dt[i], rank[i], dims[i]);
        int64_t n = ir_tensor_numel(&in[i]);
        if (dt[i] == IR_DTYPE_U8)
            for (int64_t k = 0; k < n; k++) ((uint8_t *)in[i].data)[k] = (uint8_t)tu_rng_below(&rng, 256);
        else if (dt[i] == IR_DTYPE_F32) tu_fill_pm1(&in[i], i + 3);
    }
    const float scales[3] = {0.02f, 0.015f, 0.5f}; /* a, b, y */
    for (int i = 0; i < 3; i++) *(float *)in[6 + i].data = scales[i];
    float *rois = in[11].data;
    for (int64_t r = 0; r < b->R; r++) { /* x1, y1, x2, y2 at spatial_scale 0.5 */
        float x1 = (float)tu_rng_below(&rng, (uint64_t)(2 * b->W)), y1 = (float)tu_rng_below(&rng, (uint64_t)(2 * b->H));
        rois[4 * r] = x1, rois[4 * r + 1] = y1;
        rois[4 * r + 2] = x1 + 0.5f + (float)tu_rng_below(&rng, 5), rois[4 * r + 3] = y1 + 1.25f + (float)tu_rng_below(&rng, 4);
        ((int64_t *)in[12].data)[r] = (int64_t)tu_rng_below(&rng, (uint64_t)b->B);
    }
    if (b->bad_batch) ((int64_t *)in[12].data)[b->R - 1] = b->B;
    int64_t *ui = in[13].data, h2 = 2 * b->H, w2 = 2 * b->W, e = 0; /* one slot of each 2 x 2 window */
    for (int64_t bc = 0; bc < b->B * b->C; bc++)
        for (int64_t h = 0; h < b->H; h++)
            for (int64_t w = 0; w < b->W; w++, e++)
                ui[e] = (bc * h2 + 2 * h + (int64_t)tu_rng_below(&rng, 2)) * w2 + 2 * w + (int64_t)tu_rng_below(&rng, 2);
    const int64_t os[4] = {b->B, b->C, h2 + b->extra, w2 + 2 * b->extra};
    memcpy(in[14].data, os, sizeof os);
    int64_t *gi = in[15].data;
    for (int64_t t = 0; t < b->T; t++)
        gi[2 * t] = (int64_t)tu_rng_below(&rng, (uint64_t)b->B), gi[2 * t + 1] = (int64_t)tu_rng_below(&rng, (uint64_t)b->C);
    for (int64_t k = 0; k < b->B * b->L; k++) ((int64_t *)in[16].data)[k] = 2 + (int64_t)tu_rng_below(&rng, 8);
}

static void to_irt(IrtArtifact *a, const IrTensor *in, IrtTensor *ri) {
    for (uint32_t i = 0; i < N_IN; i++) {
        ri[i] = (IrtTensor){.dtype = irt_dtype_code(a, ir_dtype_name(in[i].dtype)), .rank = in[i].rank, .data = in[i].data};
        for (uint32_t k = 0; k < in[i].rank; k++) ri[i].dims[k] = in[i].dims[k];
    }
}

/* The artifact against the interpreter at binding b: dims equal, integers exact, f32 close. */
static void check_run(IrGraph *g, IrtArtifact *a, const Bind *b) {
    IrTensor in[N_IN] = {{0}}, ref[MAX_OUT] = {{0}};
    IrtTensor ri[N_IN], out[MAX_OUT];
    make_inputs(b, in);
    to_irt(a, in, ri);
    uint32_t n_out = irt_num_outputs(a);
    cr_assert_eq(n_out, ir_graph_num_outputs(g));
    TuDiag d;
    tu_diag_init(&d);
    IrInterpOptions o = {0};
    cr_assert_eq(ir_interp_run(g, in, N_IN, ref, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    char err[1024];
    cr_assert_eq(irt_run_n(a, N_IN, ri, n_out, out, err, sizeof err), 0, "B=%lld: %s", (long long)b->B, err);
    for (uint32_t j = 0; j < n_out; j++) {
        const char *name = ir_value_name(g, ir_graph_output(g, j));
        cr_assert_eq(out[j].rank, ref[j].rank, "%s: rank", name);
        for (uint32_t k = 0; k < ref[j].rank; k++)
            cr_assert_eq(out[j].dims[k], ref[j].dims[k], "%s dim %u: %lld vs %lld", name, k, (long long)out[j].dims[k],
                         (long long)ref[j].dims[k]);
        for (int64_t i = 0; i < ir_tensor_numel(&ref[j]); i++) {
            double v = ir_elem_get_f64(ref[j].dtype, out[j].data, (size_t)i), e = ir_elem_get_f64(ref[j].dtype, ref[j].data, (size_t)i);
            double tol = ref[j].dtype == IR_DTYPE_F32 ? 1e-5 + 1e-4 * fabs(e) : 0;
            cr_assert(fabs(v - e) <= tol, "B=%lld %s element %lld: %g vs %g", (long long)b->B, name, (long long)i, v, e);
        }
        free(out[j].data);
        ir_tensor_free(&ref[j]);
    }
    for (uint32_t i = 0; i < N_IN; i++) ir_tensor_free(&in[i]);
}

/* The run at binding b fails with a message containing want. */
static void check_fails(IrtArtifact *a, const Bind *b, const char *want) {
    IrTensor in[N_IN] = {{0}};
    IrtTensor ri[N_IN], out[MAX_OUT] = {{0}};
    make_inputs(b, in);
    to_irt(a, in, ri);
    char err[1024] = "";
    cr_assert_neq(irt_run_n(a, N_IN, ri, irt_num_outputs(a), out, err, sizeof err), 0, "the run should fail");
    cr_assert(strstr(err, want), "%s", err);
    for (uint32_t i = 0; i < N_IN; i++) ir_tensor_free(&in[i]);
}

/* Small sizes, then sizes where QLinearMatMul's batches are large enough for the BLAS path,
 * from one artifact; a batch index out of range and an output_shape below the unpooled shape
 * fail the run. */
Test(cpu_misc_shapes, one_artifact_two_bindings) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir, model_text, &model);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(model, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    const Bind small = {.B = 2, .M = 3, .K = 4, .N = 5, .C = 3, .H = 4, .W = 6, .R = 3, .T = 4, .L = 7, .extra = 0};
    const Bind large = {.B = 3, .M = 17, .K = 33, .N = 20, .C = 2, .H = 5, .W = 3, .R = 5, .T = 2, .L = 12, .extra = 1};
    check_run(g, a, &small);
    check_run(g, a, &large);
    Bind bad = small;
    bad.bad_batch = true;
    check_fails(a, &bad, "RoiAlign");
    bad = small;
    bad.extra = -1;
    check_fails(a, &bad, "MaxUnpool");
    ir_graph_destroy(g);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* A's K and B's are symbols of their own: a run where they differ fails before any kernel runs
 * (shape-infer's guard K == J), one where they agree runs. */
Test(cpu_misc_shapes, matmulinteger_k_checked_at_run_time) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir, "symbol M, K, J, N\ngraph @k(%a: u8[M, K], %b: u8[J, N]) {\n"
                                       "  %y = MatMulInteger(%a, %b)\n  return %y\n}\n", &model);
    uint8_t av[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, bv[20] = {0};
    for (int i = 0; i < 20; i++) bv[i] = (uint8_t)(i + 1);
    int32_t u8 = irt_dtype_code(a, "u8");
    IrtTensor in[2] = {{.dtype = u8, .rank = 2, .dims = {3, 4}, .data = av}, {.dtype = u8, .rank = 2, .dims = {5, 4}, .data = bv}};
    IrtTensor out[1] = {{0}};
    char err[1024] = "";
    cr_assert_neq(irt_run_n(a, 2, in, 1, out, err, sizeof err), 0, "K 4 against 5 should fail");
    cr_assert(strstr(err, "K == J"), "%s", err);
    in[1].dims[0] = 4, in[1].dims[1] = 5;
    cr_assert_eq(irt_run_n(a, 2, in, 1, out, err, sizeof err), 0, "%s", err);
    cr_assert(out[0].rank == 2 && out[0].dims[0] == 3 && out[0].dims[1] == 5);
    int32_t want = 1 * 2 + 2 * 7 + 3 * 12 + 4 * 17; /* row 0 of A by column 1 of B */
    cr_assert_eq(((int32_t *)out[0].data)[1], want, "%d", ((int32_t *)out[0].data)[1]);
    free(out[0].data);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}
