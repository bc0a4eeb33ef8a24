/* The runtime loads OpenBLAS only for artifacts whose code calls GEMM (issue 8, cold start):
 * a model made of small contractions (generated loops) is compiled with `blas 0` in its
 * manifest and runs without BLAS in the process; a large MatMul (more rows than the packed-B GEMM
 * takes on AVX2, docs/cpu_speed.md) gets `blas 1` and loads it.
 * Both match the reference interpreter. (Criterion runs each test in its own process.) */
#include "backend/runtime/abi.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs the artifact on a ramp input and compares its first output with the interpreter. */
static void run_and_compare(const char *model, const char *irx, int want_blas) {
    char err[1024];
    char *m = irt_read_manifest(irx, err, sizeof err);
    cr_assert(m, "%s", err);
    char line[16];
    snprintf(line, sizeof line, "\nblas %d\n", want_blas);
    cr_expect(strstr(m, line), "manifest should say blas %d:\n%s", want_blas, m);
    free(m);
    cr_assert_eq(irt_blas_loaded(), 0, "BLAS loaded before any artifact");
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "irt_load: %s", err);
    cr_expect_eq(irt_blas_loaded(), want_blas, "BLAS %s after loading", irt_blas_loaded() ? "loaded" : "not loaded");
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(model, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    IrtTensor info, out;
    irt_input_info(a, 0, &info);
    IrTensor in = {0}, ref = {0};
    cr_assert_eq(ir_tensor_alloc(&in, (IrDType)info.dtype, info.rank, info.dims), IR_OK);
    for (int64_t i = 0; i < ir_tensor_numel(&in); i++) ((float *)in.data)[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    IrInterpOptions o = {0};
    cr_assert_eq(ir_interp_run(g, &in, 1, &ref, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    info.data = in.data;
    cr_assert_eq(irt_run(a, &info, &out, err, sizeof err), 0, "%s", err);
    for (int64_t i = 0; i < ir_tensor_numel(&ref); i++) {
        float e = ((float *)ref.data)[i], v = ((float *)out.data)[i];
        cr_assert(fabsf(e - v) <= 1e-5f + 1e-4f * fabsf(e), "element %lld: %g vs %g", (long long)i, v, e);
    }
    cr_expect_eq(irt_blas_loaded(), want_blas);
    free(out.data);
    irt_free(a);
    ir_tensor_free(&in);
    ir_tensor_free(&ref);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* A small MLP (4x64 @ 64x32, then 4x32 @ 32x10^T through Gemm): generated loops only. */
Test(runtime_blas, small_model_runs_without_blas) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "small.ir");
    const char *text = "graph @small(%x: f32[4, 64]) {\n"
                       "  const %s1: i64[2] = [64, 32]\n"
                       "  const %s2: i64[2] = [10, 32]\n"
                       "  const %b: f32[10] = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8, 0.9, -1.0]\n"
                       "  %w1 = ConstantOfShape(%s1) {value = f32[1] [0.02]} : f32[64, 32]\n"
                       "  %w2 = ConstantOfShape(%s2) {value = f32[1] [-0.03]} : f32[10, 32]\n"
                       "  %h = MatMul(%x, %w1) : f32[4, 32]\n"
                       "  %r = Relu(%h) : f32[4, 32]\n"
                       "  %y = Gemm(%r, %w2, %b) {transB = 1} : f32[4, 10]\n"
                       "  return %y\n}\n";
    cr_assert(tu_write_file(model, text, strlen(text)));
    char err_[4096], *irx = tu_compile_cpu(dir, model, NULL, "small.irx", err_, sizeof err_);
    cr_assert(irx, "%s", err_);
    run_and_compare(model, irx, 0);
    tu_rmtree(dir);
    free(dir), free(model), free(irx);
}

Test(runtime_blas, large_matmul_loads_blas) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "big.ir");
    const char *with_shape = "graph @big(%x: f32[192, 256]) {\n"
                             "  const %s: i64[2] = [256, 192]\n"
                             "  %w = ConstantOfShape(%s) {value = f32[1] [0.01]} : f32[256, 192]\n"
                             "  %y = MatMul(%x, %w) : f32[192, 192]\n"
                             "  %r = Relu(%y) : f32[192, 192]\n"
                             "  return %r\n}\n";
    cr_assert(tu_write_file(model, with_shape, strlen(with_shape)));
    char err_[4096], *irx = tu_compile_cpu(dir, model, NULL, "big.irx", err_, sizeof err_);
    cr_assert(irx, "%s", err_);
    run_and_compare(model, irx, 1);
    tu_rmtree(dir);
    free(dir), free(model), free(irx);
}
