/* Symbolic batch artifacts: `irtool compile` without --input on a model whose only symbol is
 * its leading batch dim compiles once; libirtool-runtime then runs it on B = 1 and B = 7 with
 * the interpreter's results (rtol 1e-4, atol 1e-5), checks the batch against the compiled
 * constraints on every call, and models that mix samples or have other symbols are refused
 * with a message naming why. */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Runs the artifact at irx and the interpreter on model for batch b (one f32 input). */
static void check_batch(const char *model, IrtArtifact *a, int64_t b) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(model, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    IrtTensor info;
    irt_input_info(a, 0, &info);
    cr_assert_eq(info.dims[0], -1, "the batch dim is reported as -1");
    info.dims[0] = b;
    IrTensor in = {0}, ref = {0};
    cr_assert_eq(ir_tensor_alloc(&in, IR_DTYPE_F32, info.rank, info.dims), IR_OK);
    tu_fill_pm1(&in, (uint64_t)b);
    IrInterpOptions o = {0};
    cr_assert_eq(ir_interp_run(g, &in, 1, &ref, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrtTensor ri = {.dtype = info.dtype, .rank = in.rank, .data = in.data}, out;
    memcpy(ri.dims, in.dims, sizeof ri.dims);
    char err[1024];
    cr_assert_eq(irt_run(a, &ri, &out, err, sizeof err), 0, "B=%lld: %s", (long long)b, err);
    cr_assert_eq(out.rank, ref.rank);
    for (uint32_t k = 0; k < ref.rank; k++) cr_assert_eq(out.dims[k], ref.dims[k], "B=%lld dim %u", (long long)b, k);
    for (int64_t i = 0; i < ir_tensor_numel(&ref); i++) {
        float e = ((float *)ref.data)[i], v = ((float *)out.data)[i];
        cr_assert(fabsf(e - v) <= 1e-5f + 1e-4f * fabsf(e), "B=%lld element %lld: %g vs %g", (long long)b, (long long)i, v, e);
    }
    free(out.data);
    ir_tensor_free(&in);
    ir_tensor_free(&ref);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

static void compile_once_run_twice(const char *model) {
    char *dir = tu_mkdtemp(), *irx = tu_path_join(dir, "m.irx");
    TuRun r = tu_compile_unbound(model, irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "compiled once for any value of"), "%s", r.out);
    tu_run_free(&r);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    cr_assert(irt_batch_symbol(a));
    check_batch(model, a, 1);
    check_batch(model, a, 7);
    irt_free(a);
    tu_rmtree(dir);
    free(dir), free(irx);
}

Test(artifact_batch, mlp_compiles_once_runs_b1_and_b7) {
    char *model = tu_source_path("corpus/mlp.ir");
    compile_once_run_twice(model);
    free(model);
}

Test(artifact_batch, torch_models) {
    const char *s = getenv("IRTOOL_SHARED_DIR");
    if (!s) cr_skip_test("IRTOOL_SHARED_DIR is not set");
    const char *names[] = {"tiny_mlp", "convnet"};
    for (int i = 0; i < 2; i++) {
        char *tm = tu_path_join(s, "torch-models"), *d = tu_path_join(tm, names[i]), *m = tu_path_join(d, "model.onnx");
        if (tu_dir_count(d) >= 0) compile_once_run_twice(m);
        free(tm), free(d), free(m);
    }
}

/* The batch is checked against the model's constraints (mlp: 1 <= B <= 64) on every call. */
Test(artifact_batch, guards_on_every_run) {
    char *model = tu_source_path("corpus/mlp.ir"), *dir = tu_mkdtemp(), *irx = tu_path_join(dir, "m.irx");
    TuRun r = tu_compile_unbound(model, irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    static float data[100 * 64];
    IrtTensor info, out;
    irt_input_info(a, 0, &info);
    IrtTensor in = {.dtype = info.dtype, .rank = 2, .dims = {100, 64}, .data = data};
    cr_assert_eq(irt_run(a, &in, &out, err, sizeof err), -1);
    cr_assert(strstr(err, "B = 100 is outside 1..64 (input 'x' dim 0)"), "%s", err);
    in.dims[1] = 63;
    in.dims[0] = 2;
    cr_assert_eq(irt_run(a, &in, &out, err, sizeof err), -1);
    cr_assert(strstr(err, "input 'x' dim 1 is 63, the artifact was compiled for 64 (f32[B, 64])"), "%s", err);
    in.dims[1] = 64;
    cr_assert_eq(irt_run(a, &in, &out, err, sizeof err), 0, "%s", err);
    cr_assert_eq(out.dims[0], 2);
    free(out.data);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir), free(irx);
}

/* Refusals name the node: a reduction over the batch; a second symbol. */
Test(artifact_batch, refusals) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse("symbol N\ngraph @t(%a: f32[N, 4]) {\n  %s = ReduceSum(%a) {keepdims = 0} : f32[]\n"
                          "  %y = Add(%a, %s) : f32[N, 4]\n  return %y\n}\n", "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrBatchPlan bp;
    cr_assert_eq(ir_batch_analyze(g, &bp, &d.diag), IR_EUNSUPPORTED);
    cr_assert(strstr(tu_diag_text(&d), "ReduceSum"), "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
    tu_diag_init(&d);
    g = tu_parse("symbol N\nsymbol M\ngraph @t(%a: f32[N, M]) {\n  %y = Neg(%a) : f32[N, M]\n  return %y\n}\n", "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_batch_analyze(g, &bp, &d.diag), IR_EUNSUPPORTED);
    cr_assert(strstr(tu_diag_text(&d), "other than one leading batch symbol"), "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
    tu_diag_init(&d);
    g = tu_parse("symbol N\ngraph @t(%a: f32[N, 4], %w: f32[4, 3]) {\n  %t = Transpose(%a) {perm = [1, 0]} : f32[4, N]\n"
                 "  %y = MatMul(%t, %a) : f32[4, 4]\n  return %y\n}\n", "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_batch_analyze(g, &bp, &d.diag), IR_EUNSUPPORTED);
    cr_assert(strstr(tu_diag_text(&d), "Transpose"), "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
}
