/* PyTorch models against PyTorch's own eager outputs: the reference interpreter must match
 * output_y.npy within rtol 1e-4, atol 1e-5 for every model in ../shared/torch-models, for the
 * encoder exported with a symbolic batch and sequence (two input shapes), and for the branchy
 * model on an input that takes the other branch of its `If` (corpus/torch, made by
 * corpus/torch/make_models.py with the same weights). */
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void check_model(const char *model, const char *input, const char *expected) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(model, &d.diag, &g), IR_OK, "%s: %s", model, tu_diag_text(&d));
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s: %s", model, tu_diag_text(&d));
    IrTensor in = {0}, want = {0}, out[4] = {{0}};
    cr_assert_eq(ir_npy_read(input, &d.diag, &in), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_npy_read(expected, &d.diag, &want), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_graph_num_inputs(g), 1);
    cr_assert_eq(ir_graph_num_outputs(g), 1);
    IrInterpOptions o = {0};
    cr_assert_eq(ir_interp_run(g, &in, 1, out, &o, &d.diag), IR_OK, "%s: %s", model, tu_diag_text(&d));
    cr_assert_eq(out[0].rank, want.rank, "%s: rank", model);
    for (uint32_t i = 0; i < want.rank; i++) cr_assert_eq(out[0].dims[i], want.dims[i], "%s: dim %u", model, i);
    double worst = 0;
    int64_t n = ir_tensor_numel(&want), bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double got = ir_elem_get_f64(out[0].dtype, out[0].data, (size_t)i);
        double exp = ir_elem_get_f64(want.dtype, want.data, (size_t)i);
        double err = fabs(got - exp);
        if (err > worst) worst = err;
        if (!(err <= 1e-5 + 1e-4 * fabs(exp))) bad++;
    }
    cr_expect_eq(bad, 0, "%s: %lld of %lld elements outside rtol 1e-4 atol 1e-5 (worst abs error %g)", model,
                 (long long)bad, (long long)n, worst);
    cr_log_info("%s: %lld elements, worst abs error %.3g", model, (long long)n, worst);
    ir_tensor_free(&in);
    ir_tensor_free(&want);
    ir_tensor_free(&out[0]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

static char *shared_dir(void) {
    const char *s = getenv("IRTOOL_SHARED_DIR");
    if (!s) return NULL;
    char *p = tu_path_join(s, "torch-models");
    if (tu_dir_count(p) < 0) {
        free(p);
        return NULL;
    }
    return p;
}

static void check_shared(const char *name) {
    char *dir = shared_dir();
    if (!dir) cr_skip_test("../shared/torch-models is absent");
    char *d = tu_path_join(dir, name);
    char *m = tu_path_join(d, "model.onnx"), *x = tu_path_join(d, "input_x.npy"), *y = tu_path_join(d, "output_y.npy");
    check_model(m, x, y);
    free(dir), free(d), free(m), free(x), free(y);
}

Test(torch_models, tiny_mlp) { check_shared("tiny_mlp"); }
Test(torch_models, convnet) { check_shared("convnet"); }
Test(torch_models, encoder) { check_shared("encoder"); }
Test(torch_models, branchy) { check_shared("branchy"); }

Test(torch_models, branchy_other_branch) {
    char *dir = shared_dir();
    if (!dir) cr_skip_test("../shared/torch-models is absent");
    char *d = tu_path_join(dir, "branchy"), *m = tu_path_join(d, "model.onnx");
    char *x = tu_source_path("corpus/torch/branchy_then/input_x.npy");
    char *y = tu_source_path("corpus/torch/branchy_then/output_y.npy");
    check_model(m, x, y);
    free(dir), free(d), free(m), free(x), free(y);
}

Test(torch_models, encoder_symbolic_batch_and_sequence) {
    char *m = tu_source_path("corpus/torch/encoder_dynamic/model.onnx");
    char *x = tu_source_path("corpus/torch/encoder_dynamic/input_x.npy");
    char *y = tu_source_path("corpus/torch/encoder_dynamic/output_y.npy");
    char *x2 = tu_source_path("corpus/torch/encoder_dynamic/input_x2.npy");
    char *y2 = tu_source_path("corpus/torch/encoder_dynamic/output_y2.npy");
    check_model(m, x, y);   /* B=2, S=10 */
    check_model(m, x2, y2); /* B=3, S=7: the same graph, other symbol values */
    free(m), free(x), free(y), free(x2), free(y2);
}
