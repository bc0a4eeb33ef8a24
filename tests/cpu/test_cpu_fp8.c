/* The LLVM backend's FP8 ops (backend/cpu/fp8.c) against the reference interpreter, bit for
 * bit: irtool.quantize_fp8 over every f32 class (zeros, subnormals, each rounding boundary of
 * both formats and both neighbours, the saturation edges, infinities, NaNs, and random bit
 * patterns), with and without saturation, per tensor and per channel; irtool.dequantize_fp8 to
 * f32, f64 and f16; irtool.fp8_matmul with per-row and per-column scales, a bias and batch dims;
 * and a model quantized by the quantize-fp8 pass compiled whole. */
#include "backend/backend.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compiles text for the inputs ins, runs it and the interpreter, and requires every output to
 * be bitwise equal (tol 0; NaNs of any payload match) or within tol. */
static void check(const char *text, IrTensor *ins, uint32_t n_in, double tol) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "fp8.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrTensor want[4] = {{0}}, got[4] = {{0}};
    uint32_t no = ir_graph_num_outputs(g);
    cr_assert(no <= 4);
    cr_assert_eq(ir_interp_run(g, ins, n_in, want, NULL, &d.diag), IR_OK, "interp: %s", tu_diag_text(&d));
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_specialize_inputs(g, ins, n_in, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_run(p, ins, n_in, got, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (uint32_t o = 0; o < no; o++) {
        cr_assert_eq(got[o].dtype, want[o].dtype);
        int64_t n = ir_tensor_numel(&want[o]), bad = 0, first = -1;
        cr_assert_eq(ir_tensor_numel(&got[o]), n);
        size_t es = ir_dtype_size(want[o].dtype);
        for (int64_t i = 0; i < n; i++) {
            double a = ir_elem_get_f64(got[o].dtype, got[o].data, (size_t)i);
            double b = ir_elem_get_f64(want[o].dtype, want[o].data, (size_t)i);
            bool same = tol == 0 ? memcmp((char *)got[o].data + i * es, (char *)want[o].data + i * es, es) == 0
                                 : fabs(a - b) <= tol + tol * 10 * fabs(b);
            if (isnan(a) && isnan(b)) same = true;
            if (!same && bad++ == 0) first = i;
        }
        if (bad) {
            double a = ir_elem_get_f64(got[o].dtype, got[o].data, (size_t)first);
            double b = ir_elem_get_f64(want[o].dtype, want[o].data, (size_t)first);
            cr_assert_fail("output %u: %lld of %lld elements differ; first [%lld]: compiled %.9g, interpreter %.9g", o,
                    (long long)bad, (long long)n, (long long)first, a, b);
        }
        ir_tensor_free(&got[o]), ir_tensor_free(&want[o]);
    }
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* f32 values of every class: for each exponent and sign, mantissas whose kept bits run over a
 * few values and whose dropped bits sit on, just below and just above the rounding point of
 * E4M3 (bit 19) and E5M2 (bit 20); then random bit patterns. Returns the count written. */
static int64_t fill_f32_classes(float *v, int64_t cap) {
    static const uint32_t lows[] = {0, 1, 0x3FFFF, 0x40000, 0x40001, 0x7FFFF, 0x80000, 0x80001, 0xFFFFF, 0xFFFFE};
    int64_t n = 0;
    for (uint32_t s = 0; s < 2; s++)
        for (uint32_t e = 0; e < 256; e++)
            for (uint32_t top = 0; top < 8; top++)
                for (size_t l = 0; l < sizeof lows / sizeof lows[0]; l++)
                    if (n < cap) v[n++] = u2f((s << 31) | (e << 23) | (top << 20) | lows[l]);
    uint64_t x = 0x243F6A8885A308D3ull;
    while (n < cap) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        v[n++] = u2f((uint32_t)(x >> 32));
    }
    return n;
}

Test(backend_fp8, quantize_every_f32_class_both_formats) {
    enum { N = 65536 };
    IrTensor x;
    cr_assert_eq(ir_tensor_alloc(&x, IR_DTYPE_F32, 1, (int64_t[]){N}), IR_OK);
    fill_f32_classes(x.data, N);
    static const char *const fmts[] = {"e4m3fn", "e5m2"};
    static const char *const dts[] = {"f8e4m3fn", "f8e5m2"};
    for (int f = 0; f < 2; f++)
        for (int sat = 0; sat < 2; sat++) {
            char text[1024];
            /* scale 1: the codes of the values themselves; scale 0.75: the quotient rounded first */
            snprintf(text, sizeof text,
                     "graph @q(%%x: f32[%d]) {\n  const %%one: f32[] = [1.0]\n  const %%s: f32[] = [0.75]\n"
                     "  %%q = irtool.quantize_fp8(%%x, %%one) {format = \"%s\", saturate = %d} : %s[%d]\n"
                     "  %%r = irtool.quantize_fp8(%%x, %%s) {format = \"%s\", saturate = %d} : %s[%d]\n"
                     "  %%d = irtool.dequantize_fp8(%%q, %%one) : f32[%d]\n  return %%q, %%r, %%d\n}\n",
                     N, fmts[f], sat, dts[f], N, fmts[f], sat, dts[f], N, N);
            check(text, &x, 1, 0);
        }
    ir_tensor_free(&x);
}

Test(backend_fp8, per_channel_scales_and_dequantize_dtypes) {
    IrTensor x;
    cr_assert_eq(ir_tensor_alloc(&x, IR_DTYPE_F32, 3, (int64_t[]){2, 3, 40}), IR_OK);
    float *v = x.data;
    for (int i = 0; i < 240; i++) v[i] = (float)((i * 37 % 101) - 50) * 0.173f;
    static const char text[] =
        "graph @q(%x: f32[2, 3, 40]) {\n"
        "  const %s: f32[3] = [0.5, 0.0625, 3.0]\n  const %t: f32[] = [0.01]\n"
        "  %q = irtool.quantize_fp8(%x, %s) {axis = 1, format = \"e4m3fn\"} : f8e4m3fn[2, 3, 40]\n"
        "  %p = irtool.quantize_fp8(%x, %t) {format = \"e5m2\", saturate = 0} : f8e5m2[2, 3, 40]\n"
        "  %a = irtool.dequantize_fp8(%q, %s) {axis = 1} : f32[2, 3, 40]\n"
        "  %b = irtool.dequantize_fp8(%p, %t) {to = f64} : f64[2, 3, 40]\n"
        "  %c = irtool.dequantize_fp8(%q, %s) {axis = -2, to = f16} : f16[2, 3, 40]\n"
        "  return %a, %b, %c\n}\n";
    check(text, &x, 1, 0);
    ir_tensor_free(&x);
}

/* fp8_matmul: batch dims in A, a scale per row of A and per column of B, a bias; sums exactly
 * the interpreter's (tol 0), for K long enough that another order would differ. */
Test(backend_fp8, matmul_matches_the_interpreter_bit_for_bit) {
    enum { B = 2, M = 3, K = 300, N = 37 };
    IrTensor in[2];
    cr_assert_eq(ir_tensor_alloc(&in[0], IR_DTYPE_F32, 3, (int64_t[]){B, M, K}), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&in[1], IR_DTYPE_F32, 2, (int64_t[]){K, N}), IR_OK);
    uint64_t s = 7;
    for (int t = 0; t < 2; t++)
        for (int64_t i = 0; i < ir_tensor_numel(&in[t]); i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ((float *)in[t].data)[i] = (float)((double)(s >> 40) / (double)(1ull << 24) * 6.0 - 3.0);
        }
    char text[2048];
    snprintf(text, sizeof text,
             "graph @m(%%a: f32[%d, %d, %d], %%w: f32[%d, %d]) {\n"
             "  const %%as: f32[%d] = [0.02, 0.5, 0.013]\n  const %%bs: f32[] = [0.031]\n  const %%one: f32[] = [1.0]\n"
             "  const %%bias: f32[%d] = [%s]\n"
             "  %%qa = irtool.quantize_fp8(%%a, %%one) : f8e4m3fn[%d, %d, %d]\n"
             "  %%qw = irtool.quantize_fp8(%%w, %%one) {format = \"e5m2\"} : f8e5m2[%d, %d]\n"
             "  %%y = irtool.fp8_matmul(%%qa, %%qw, %%as, %%bs, %%bias) : f32[%d, %d, %d]\n"
             "  %%z = irtool.fp8_matmul(%%qa, %%qw, %%bs, %%bias) {out_dtype = bf16} : bf16[%d, %d, %d]\n"
             "  return %%y, %%z\n}\n",
             B, M, K, K, N, M, N,
             "0.5, -1, 2, 0.25, 3, -0.5, 1, 1, 1, 1, 0, 0, 0, 0, 7, 7, 7, 7, -3, -3, -3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, "
             "13, 14, 15, 16",
             B, M, K, K, N, B, M, N, B, M, N);
    check(text, in, 2, 0);
    ir_tensor_free(&in[0]), ir_tensor_free(&in[1]);
}

/* corpus/mlp.ir through the quantize-fp8 pass (weights FP8 per channel, activations quantized
 * per tensor at run time), compiled whole: the interpreter's outputs up to the few-ulp
 * differences of the elementwise ops between the FP8 layers. */
Test(backend_fp8, quantized_model_compiles_and_matches) {
    TuDiag d;
    tu_diag_init(&d);
    size_t len;
    char *text = tu_read_file(IRTOOL_SOURCE_DIR "/corpus/mlp.ir", &len);
    cr_assert(text);
    IrGraph *g = tu_parse(text, "mlp.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_run_pipeline(g, "shape-infer,quantize-fp8", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    IrStrBuf qb;
    ir_strbuf_init(&qb);
    cr_assert_eq(ir_print_text(g, &qb), IR_OK);
    const char *q = qb.data;
    cr_assert(strstr(q, "irtool.fp8_matmul"), "the pass quantized nothing:\n%s", q);
    IrTensor x;
    IrValueId in = ir_graph_input(g, 0);
    uint32_t r;
    int64_t dims[IR_MAX_RANK];
    r = 2, dims[0] = 3, dims[1] = 64; /* x: f32[B, 64] at B = 3 */
    (void)in;
    cr_assert_eq(ir_tensor_alloc(&x, IR_DTYPE_F32, r, dims), IR_OK);
    for (int64_t i = 0; i < ir_tensor_numel(&x); i++) ((float *)x.data)[i] = (float)sin((double)i * 0.37) * 2.0f;
    check(q, &x, 1, 1e-5);
    ir_tensor_free(&x);
    ir_strbuf_free(&qb);
    free(text);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* A Conv whose weight is dequantized from FP8 constants (what quantize-fp8 writes for Conv): on
 * the CPU the backend decodes it at compile time, so the weight is a constant again and the Conv
 * with its Relu is one kernel (the packed GEMM), not a dequantization on every run and then a
 * Conv; the result is the interpreter's. */
Test(backend_fp8, conv_weights_decoded_at_compile_time) {
    static const char *const vals[] = {"0.5", "-1.25", "2.0", "0.125", "-0.75", "1.0", "0.0", "-3.5"};
    size_t cap = 64 * 1024, len = 0;
    char *t = malloc(cap);
    cr_assert(t);
    len += (size_t)snprintf(t + len, cap - len,
                            "graph @c(%%x: f32[1, 16, 12, 12]) {\n  const %%s: f32[16] = [0.01, 0.02, 0.03, 0.04, 0.01, 0.02, "
                            "0.03, 0.04, 0.01, 0.02, 0.03, 0.04, 0.01, 0.02, 0.03, 0.04]\n  const %%wq: f8e4m3fn[16, 16, 3, 3] = [");
    for (int i = 0; i < 16 * 16 * 9; i++) len += (size_t)snprintf(t + len, cap - len, "%s%s", i ? ", " : "", vals[(i * 7) % 8]);
    snprintf(t + len, cap - len,
             "]\n  %%wd = irtool.dequantize_fp8(%%wq, %%s) {axis = 0} : f32[16, 16, 3, 3]\n"
             "  %%y = Conv(%%x, %%wd) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 16, 12, 12]\n"
             "  %%z = Relu(%%y) : f32[1, 16, 12, 12]\n  return %%z\n}\n");
    IrTensor x;
    cr_assert_eq(ir_tensor_alloc(&x, IR_DTYPE_F32, 4, (int64_t[]){1, 16, 12, 12}), IR_OK);
    for (int64_t i = 0; i < ir_tensor_numel(&x); i++) ((float *)x.data)[i] = (float)cos((double)i * 0.21);
    check(t, &x, 1, 1e-5);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(t, "c.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_specialize_inputs(g, &x, 1, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_num_kernels(p), 1, "kernels: %u", llvm_program_num_kernels(p));
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    ir_tensor_free(&x);
    free(t);
}

/* The register tiles' edges: 150 columns (two blocks of 64 and one of 32, the last vector part
 * padding), 7 rows (one tile of 4 and 3 single rows), per-column B scales, a scalar bias. */
Test(backend_fp8, matmul_tile_edges) {
    enum { M = 7, K = 70, N = 150 };
    IrTensor in[2];
    cr_assert_eq(ir_tensor_alloc(&in[0], IR_DTYPE_F32, 2, (int64_t[]){M, K}), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&in[1], IR_DTYPE_F32, 2, (int64_t[]){K, N}), IR_OK);
    for (int t = 0; t < 2; t++)
        for (int64_t i = 0; i < ir_tensor_numel(&in[t]); i++) ((float *)in[t].data)[i] = (float)sin((double)(i * (t + 3)) * 0.7) * 5.0f;
    size_t cap = 8192, len = 0;
    char *text = malloc(cap);
    cr_assert(text);
    len += (size_t)snprintf(text + len, cap - len, "graph @m(%%a: f32[%d, %d], %%w: f32[%d, %d]) {\n  const %%bs: f32[%d] = [", M, K,
                            K, N, N);
    for (int i = 0; i < N; i++) len += (size_t)snprintf(text + len, cap - len, "%s%g", i ? ", " : "", 0.01 + 0.001 * i);
    snprintf(text + len, cap - len,
             "]\n  const %%as: f32[] = [0.25]\n  const %%bias: f32[] = [-0.5]\n  const %%one: f32[] = [1.0]\n"
             "  %%qa = irtool.quantize_fp8(%%a, %%one) : f8e4m3fn[%d, %d]\n"
             "  %%qw = irtool.quantize_fp8(%%w, %%one) : f8e4m3fn[%d, %d]\n"
             "  %%y = irtool.fp8_matmul(%%qa, %%qw, %%as, %%bs, %%bias) : f32[%d, %d]\n  return %%y\n}\n",
             M, K, K, N, M, N);
    check(text, in, 2, 0);
    free(text);
    ir_tensor_free(&in[0]), ir_tensor_free(&in[1]);
}

/* A constant FP8 weight (as quantize-fp8 writes it) with constant per-column scales: decoded at
 * compile time into the kernel, the same f32 products, so the same sums bit for bit. */
Test(backend_fp8, matmul_constant_weight_decoded_at_compile_time) {
    enum { M = 5, K = 20, N = 37 };
    static const char *const vals[] = {"0.5", "-1.25", "2.0", "0.125", "-0.75", "1.0", "0.0", "-3.5", "448.0", "0.001953125"};
    IrTensor a;
    cr_assert_eq(ir_tensor_alloc(&a, IR_DTYPE_F32, 2, (int64_t[]){M, K}), IR_OK);
    for (int64_t i = 0; i < M * K; i++) ((float *)a.data)[i] = (float)cos((double)i * 1.3) * 3.0f;
    size_t cap = 16384, len = 0;
    char *t = malloc(cap);
    cr_assert(t);
    len += (size_t)snprintf(t + len, cap - len, "graph @m(%%a: f32[%d, %d]) {\n  const %%w: f8e4m3fn[%d, %d] = [", M, K, K, N);
    for (int i = 0; i < K * N; i++) len += (size_t)snprintf(t + len, cap - len, "%s%s", i ? ", " : "", vals[(i * 3) % 10]);
    len += (size_t)snprintf(t + len, cap - len, "]\n  const %%bs: f32[%d] = [", N);
    for (int i = 0; i < N; i++) len += (size_t)snprintf(t + len, cap - len, "%s%g", i ? ", " : "", 0.02 + 0.003 * i);
    snprintf(t + len, cap - len,
             "]\n  const %%one: f32[] = [1.0]\n  %%qa = irtool.quantize_fp8(%%a, %%one) : f8e4m3fn[%d, %d]\n"
             "  %%y = irtool.fp8_matmul(%%qa, %%w, %%one, %%bs) : f32[%d, %d]\n  return %%y\n}\n",
             M, K, M, N);
    check(t, &a, 1, 0);
    free(t);
    ir_tensor_free(&a);
}

/* K = 0: every sum is empty, the output is the bias alone (as the interpreter's). */
Test(backend_fp8, matmul_with_k_zero_is_the_bias) {
    IrTensor a;
    cr_assert_eq(ir_tensor_alloc(&a, IR_DTYPE_F32, 2, (int64_t[]){3, 0}), IR_OK);
    check("graph @m(%a: f32[3, 0]) {\n  const %w: f8e4m3fn[0, 5] = []\n  const %one: f32[] = [1.0]\n"
          "  const %bias: f32[5] = [1.0, 2.0, 3.0, 4.0, 5.0]\n  %qa = irtool.quantize_fp8(%a, %one) : f8e4m3fn[3, 0]\n"
          "  %y = irtool.fp8_matmul(%qa, %w, %one, %one, %bias) : f32[3, 5]\n  return %y\n}\n",
          &a, 1, 0);
    ir_tensor_free(&a);
}
