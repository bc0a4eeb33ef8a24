/* A model exported from PyTorch with dynamic batch and sequence axes and no bounds
 * (corpus/torch/encoder_dynamic): `irtool compile` with no --input and no pipeline compiles it
 * once, saying the symbols have no upper bound, and the one artifact runs through `irtool run`
 * and `irtool-run` at three shapes (the last needing a larger workspace than the others), each
 * matching PyTorch's eager output. So does corpus/torch/rnn_dynamic (an LSTM and a GRU, whose
 * scratch follows the batch and sequence) at its two shapes. */
#include "ir/ir.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *runner_path(void) {
    char *bin = strdup(IRTOOL_BINARY);
    char *p = tu_path_join(dirname(bin), "irtool-run");
    free(bin);
    return p;
}

/* dir/y.npy against corpus/torch/<model>/output_y<suffix>.npy. */
static void expect_eager(const char *model, const char *dir, const char *suffix) {
    char rel[256];
    snprintf(rel, sizeof rel, "corpus/torch/%s/output_y%s.npy", model, suffix);
    char *want = tu_source_path(rel), *got = tu_path_join(dir, "y.npy");
    TuDiag d;
    tu_diag_init(&d);
    IrTensor w = {0}, g = {0};
    cr_assert_eq(ir_npy_read(want, &d.diag, &w), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_npy_read(got, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(g.rank, w.rank);
    for (uint32_t k = 0; k < w.rank; k++) cr_assert_eq(g.dims[k], w.dims[k], "dim %u", k);
    for (int64_t i = 0; i < ir_tensor_numel(&w); i++) {
        float e = ((float *)w.data)[i], v = ((float *)g.data)[i];
        cr_assert(fabsf(e - v) <= 1e-5f + 1e-4f * fabsf(e), "shape %s element %lld: %g, PyTorch %g", suffix, (long long)i, v, e);
    }
    ir_tensor_free(&w), ir_tensor_free(&g);
    tu_diag_free(&d);
    free(want), free(got);
}

Test(unbounded_cli, torch_encoder_any_batch_and_sequence, .timeout = 240) {
    char *dir = tu_mkdtemp(), *irx = tu_path_join(dir, "m.irx"), *model = tu_source_path("corpus/torch/encoder_dynamic/model.onnx");
    const char *cargs[] = {"compile", model, "--no-cache", "-o", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(cargs, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "symbolic dims B, S"), "%s", r.out);
    cr_assert(strstr(r.out, "no upper bound on B, S"), "%s", r.out);
    cr_assert(strstr(r.out, "the gate bound them to representative values"), "%s", r.out);
    tu_run_free(&r);
    const char *suffix[] = {"", "2", "3"}; /* [2, 10, 32], [3, 7, 32], [5, 40, 32] */
    char *runner = runner_path();
    for (int i = 0; i < 3; i++) {
        char rel[256], spec[4096], sub[16];
        snprintf(rel, sizeof rel, "corpus/torch/encoder_dynamic/input_x%s.npy", suffix[i]);
        char *x = tu_source_path(rel);
        snprintf(spec, sizeof spec, "x=%s", x);
        snprintf(sub, sizeof sub, "o%d", i);
        char *out = tu_path_join(dir, sub);
        const char *rargs[] = {"run", irx, "--input", spec, "--output-dir", out, NULL};
        cr_assert(tu_run_irtool(rargs, NULL, 0, NULL, &r));
        cr_assert_eq(r.status, 0, "%s", r.err);
        tu_run_free(&r);
        expect_eager("encoder_dynamic", out, suffix[i]);
        /* the runtime-only runner, the shapes in the other order */
        snprintf(sub, sizeof sub, "r%d", i);
        char *rout = tu_path_join(dir, sub);
        snprintf(rel, sizeof rel, "corpus/torch/encoder_dynamic/input_x%s.npy", suffix[2 - i]);
        char *x2 = tu_source_path(rel);
        snprintf(spec, sizeof spec, "x=%s", x2);
        const char *nargs[] = {irx, "--input", spec, "-o", rout, NULL};
        cr_assert(tu_run(runner, nargs, NULL, 0, NULL, &r));
        cr_assert_eq(r.status, 0, "%s", r.err);
        tu_run_free(&r);
        expect_eager("encoder_dynamic", rout, suffix[2 - i]);
        free(x), free(x2), free(out), free(rout);
    }
    tu_rmtree(dir);
    free(runner), free(dir), free(irx), free(model);
}

Test(unbounded_cli, torch_rnn_any_batch_and_sequence, .timeout = 240) {
    char *dir = tu_mkdtemp(), *irx = tu_path_join(dir, "m.irx"), *model = tu_source_path("corpus/torch/rnn_dynamic/model.onnx");
    const char *cargs[] = {"compile", model, "--no-cache", "-o", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(cargs, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "no upper bound on B, S"), "%s", r.out);
    tu_run_free(&r);
    const char *suffix[] = {"2", ""}; /* [3, 17, 8], then [2, 5, 8] in the workspace grown for it */
    for (int i = 0; i < 2; i++) {
        char rel[256], spec[4096], sub[16];
        snprintf(rel, sizeof rel, "corpus/torch/rnn_dynamic/input_x%s.npy", suffix[i]);
        char *x = tu_source_path(rel);
        snprintf(spec, sizeof spec, "x=%s", x);
        snprintf(sub, sizeof sub, "o%d", i);
        char *out = tu_path_join(dir, sub);
        const char *rargs[] = {"run", irx, "--input", spec, "--output-dir", out, NULL};
        cr_assert(tu_run_irtool(rargs, NULL, 0, NULL, &r));
        cr_assert_eq(r.status, 0, "%s", r.err);
        tu_run_free(&r);
        expect_eager("rnn_dynamic", out, suffix[i]);
        free(x), free(out);
    }
    tu_rmtree(dir);
    free(dir), free(irx), free(model);
}
