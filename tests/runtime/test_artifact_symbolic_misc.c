/* Det, the training optimizers, the random ops and NonMaxSuppression with run-time shapes: one
 * artifact compiled without --input runs at two bindings and matches the interpreter (the seeded
 * random ops bit for bit: the same stream as the static kernel), and dims that must agree but are
 * different symbols (Det's square, NMS's boxes and scores) fail the run with a guard, not UB. */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>


/* Runs artifact a on inputs (their dtypes and shapes); 0 and the outputs in got, else the run's
 * error in err. */
static int run_artifact(IrtArtifact *a, const TuTensors *in, TuTensors *got, char *err, size_t cap) {
    IrtTensor ri[8], ro[8];
    uint32_t n_out = irt_num_outputs(a);
    cr_assert(in->n <= 8 && n_out <= 8);
    for (uint32_t i = 0; i < in->n; i++) {
        ri[i] = (IrtTensor){.dtype = irt_dtype_code(a, ir_dtype_name(in->t[i].dtype)), .rank = in->t[i].rank, .data = in->t[i].data};
        memcpy(ri[i].dims, in->t[i].dims, sizeof ri[i].dims);
    }
    if (irt_run(a, ri, ro, err, cap) != 0) return -1;
    got->n = n_out;
    got->t = calloc(n_out, sizeof *got->t);
    cr_assert(got->t);
    for (uint32_t j = 0; j < n_out; j++) {
        const char *dt = irt_dtype_name(a, ro[j].dtype);
        got->t[j] = (IrTensor){.dtype = ir_dtype_from_name(dt, strlen(dt)), .rank = ro[j].rank, .data = ro[j].data,
                               .owned = true, .form = IR_TYPE_TENSOR};
        memcpy(got->t[j].dims, ro[j].dims, sizeof ro[j].dims);
    }
    return 0;
}

/* The artifact and the interpreter on the inputs of tu_make_inputs with every symbol at `size`. */
typedef struct Runs {
    TuDiag d;
    IrGraph *g;
    TuTensors in, ref, got;
} Runs;

static void runs_at(Runs *r, const char *model, IrtArtifact *a, int64_t size) {
    *r = (Runs){0};
    tu_diag_init(&r->d);
    cr_assert_eq(ir_load(model, &r->d.diag, &r->g), IR_OK, "%s", tu_diag_text(&r->d));
    cr_assert(tu_make_inputs(r->g, 7, size, &r->in));
    cr_assert_eq(tu_interp(r->g, &r->in, &r->ref, &r->d), IR_OK, "%s", tu_diag_text(&r->d));
    char err[1024];
    cr_assert_eq(run_artifact(a, &r->in, &r->got, err, sizeof err), 0, "at %lld: %s", (long long)size, err);
    cr_assert_eq(r->got.n, r->ref.n);
}

static void runs_free(Runs *r) {
    tu_tensors_free(&r->in), tu_tensors_free(&r->ref), tu_tensors_free(&r->got);
    ir_graph_destroy(r->g);
    tu_diag_free(&r->d);
}

/* The artifact against the interpreter with every symbol at `size` (tu_make_inputs), within
 * rtol (negative: bitwise). */
static void check_at(const char *model, IrtArtifact *a, int64_t size, double rtol) {
    Runs r;
    runs_at(&r, model, a, size);
    char err[1024];
    cr_assert(tu_outputs_close(&r.got, &r.ref, rtol, err, sizeof err), "at %lld: %s", (long long)size, err);
    runs_free(&r);
}

/* The same for f32 outputs within atol 1e-5 + rtol 1e-4 (sums in another order: a GEMM's). */
static void check_close_at(const char *model, IrtArtifact *a, int64_t size) {
    Runs r;
    runs_at(&r, model, a, size);
    for (uint32_t i = 0; i < r.ref.n; i++) {
        char what[64];
        snprintf(what, sizeof what, "at %lld: output %u", (long long)size, i);
        tu_assert_output_close(&r.ref.t[i], r.got.t[i].rank, r.got.t[i].dims, r.got.t[i].data, what);
    }
    runs_free(&r);
}

/* The artifact on f32 inputs of the given shapes must fail the run with `want` in its error. */
static void check_refused_run(IrtArtifact *a, uint32_t n, const int64_t (*dims)[3], const char *want) {
    float buf[2][64] = {{0}};
    IrtTensor in[2], out[2];
    for (uint32_t i = 0; i < n; i++) {
        in[i] = (IrtTensor){.dtype = irt_dtype_code(a, "f32"), .rank = 3, .data = buf[i]};
        memcpy(in[i].dims, dims[i], 3 * sizeof dims[i][0]);
    }
    char err[512];
    cr_assert_neq(irt_run(a, in, out, err, sizeof err), 0, "the run succeeded");
    cr_assert(strstr(err, want), "%s", err);
}

/* Det on [N, M, M] batches at two sizes, bounded or not; with the matrix's two dims as symbols
 * of their own, a non-square binding is a failed guard. */
Test(artifact_symbolic_misc, det_any_size) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir,
                                  "symbol N, M\nconstraint N in [1, 8]\nconstraint M in [1, 8]\n"
                                  "graph @t(%a: f32[N, M, M]) {\n  %y = Det(%a) : f32[N]\n  return %y\n}\n",
                                  &model);
    check_at(model, a, 3, 1e-4);
    check_at(model, a, 7, 1e-4);
    irt_free(a);
    free(model);
    a = tu_compile_symbolic_text(dir,
                     "symbol P, Q\nconstraint P in [1, 8]\nconstraint Q in [1, 8]\n"
                     "graph @t(%a: f32[2, P, Q]) {\n  %y = Det(%a)\n  return %y\n}\n",
                     &model);
    check_at(model, a, 5, 1e-4);
    const int64_t dims[1][3] = {{2, 3, 4}};
    check_refused_run(a, 1, dims, "guard failed");
    irt_free(a);
    free(model);
    /* no upper bound: the LU scratch is sized per binding and grows */
    a = tu_compile_symbolic_text(dir, "symbol N, M\ngraph @t(%a: f32[N, M, M]) {\n  %y = Det(%a) : f32[N]\n  return %y\n}\n", &model);
    check_at(model, a, 2, 1e-4);
    check_at(model, a, 30, 1e-4);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* Adagrad, Adam and Momentum (nesterov) on tensors of N elements, at two N. */
Test(artifact_symbolic_misc, optimizers_any_size) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(
        dir,
        "symbol N\nconstraint N in [1, 64]\n"
        "graph @t(%r: f32[], %t: i64[], %x: f32[N, 2], %g: f32[N, 2], %v: f32[N, 2], %h: f32[N, 2]) {\n"
        "  %x1, %h1 = ai.onnx.preview.training.Adagrad(%r, %t, %x, %g, %h) {decay_factor = 0.1, epsilon = 1e-5,"
        " norm_coefficient = 0.01}\n"
        "  %x2, %v2, %h2 = ai.onnx.preview.training.Adam(%r, %t, %x, %g, %v, %h) {alpha = 0.9, beta = 0.99,"
        " epsilon = 1e-5, norm_coefficient = 0.01}\n"
        "  %x3, %v3 = ai.onnx.preview.training.Momentum(%r, %t, %x, %g, %v) {alpha = 0.9, beta = 0.5,"
        " mode = \"nesterov\", norm_coefficient = 0.01}\n"
        "  return %x1, %h1, %x2, %v2, %h2, %x3, %v3\n}\n",
        &model);
    check_at(model, a, 3, 1e-4);
    check_at(model, a, 40, 1e-4);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* Seeded RandomUniformLike and Bernoulli draw the interpreter's numbers at every shape. */
Test(artifact_symbolic_misc, random_same_stream_any_size) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir,
                                  "symbol N, M\nconstraint N in [1, 64]\nconstraint M in [1, 64]\n"
                                  "graph @t(%x: f32[N, M]) {\n"
                                  "  %u = RandomUniformLike(%x) {low = -2.0, high = 3.0, seed = 5.0}\n"
                                  "  %n = RandomNormalLike(%x) {dtype = f64, seed = 6.0}\n"
                                  "  %p = Sigmoid(%x)\n  %b = Bernoulli(%p) {seed = 7.0}\n"
                                  "  return %u, %n, %b\n}\n",
                                  &model);
    check_at(model, a, 4, -1);
    check_at(model, a, 33, -1);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* NonMaxSuppression with boxes [1, P, 4] and scores [1, 1, Q]: P == Q is a guard; the selection
 * matches the interpreter at two sizes, and P != Q fails the run. */
Test(artifact_symbolic_misc, nms_guarded_boxes_and_scores) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir,
                                  "symbol P, Q\nconstraint P in [1, 16]\nconstraint Q in [1, 16]\n"
                                  "graph @t(%b: f32[1, P, 4], %s: f32[1, 1, Q]) {\n"
                                  "  const %m: i64[1] = [3]\n  const %iou: f32[1] = [0.3]\n"
                                  "  %y = NonMaxSuppression(%b, %s, %m, %iou)\n  return %y\n}\n",
                                  &model);
    check_at(model, a, 5, -1);
    check_at(model, a, 12, -1);
    const int64_t dims[2][3] = {{1, 5, 4}, {1, 1, 6}};
    check_refused_run(a, 2, dims, "guard failed");
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* MatMuls with constant weights whose rows are a symbol (a batch or sequence): on AVX2 hosts
 * 5-128 rows run the packed GEMM with the weights packed at compile time, other counts the BLAS
 * path, chosen per run; both agree with the interpreter, with the epilogue group (bias, residual
 * Add, Relu) and without (rows 2N and N: strips of 4 and their remainders, 1-4 rows), on one
 * thread and in parts on three. */
Test(artifact_symbolic_misc, matmul_packed_weights_any_rows) {
    TuRng r;
    tu_rng_seed(&r, 77);
    TuText t = {0};
    tu_text_put(&t, "symbol N\nconstraint N in [1, 100]\n"
                    "graph @t(%%x: f32[2, N, 96], %%res: f32[2, N, 50], %%x2: f32[N, 40]) {\n");
    tu_text_const(&t, &r, "w", "96, 50", 96 * 50, 0.2);
    tu_text_const(&t, &r, "b", "50", 50, 0.5);
    tu_text_const(&t, &r, "w2", "40, 30", 40 * 30, 0.2);
    tu_text_put(&t, "  %%h = MatMul(%%x, %%w) : f32[2, N, 50]\n  %%hb = Add(%%h, %%b) : f32[2, N, 50]\n"
                    "  %%hr = Add(%%hb, %%res) : f32[2, N, 50]\n  %%y = Relu(%%hr) : f32[2, N, 50]\n"
                    "  %%z = MatMul(%%x2, %%w2) : f32[N, 30]\n  return %%y, %%z\n}\n");
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir, t.s, &model);
    static const int64_t sizes[] = {1, 2, 3, 5, 37, 64, 65, 100};
    for (int threads = 1; threads <= 3; threads += 2) { /* the packed GEMM's panels in parts on the pool */
        irt_set_threads(threads);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) check_close_at(model, a, sizes[i]);
    }
    irt_set_threads(1);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir), free(t.s);
}
