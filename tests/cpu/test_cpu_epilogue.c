/* Contraction epilogues in the LLVM backend (issue 8): Conv / Gemm / MatMul followed by bias,
 * folded BatchNorm, activation and residual Add compile to one kernel whose GEMM runs in row
 * blocks with the epilogue applied to each block; results match the reference interpreter on
 * the original (unfused) graph within rtol 1e-4, atol 1e-5. Shapes are chosen so several row
 * blocks and a partial last block occur; 1x1 convolutions skip im2col. */
#include "backend/backend.h"
#include "backend/llvm/emit.h"
#include "backend/cpu/cpu.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <llvm-c/TargetMachine.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 10

static uint64_t rng_next(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 40;
}

static double uniform(uint64_t *x) { return (double)rng_next(x) / (double)(1ull << 24); }

/* `const %NAME: f32[DIMS] = base64 "..."` of the n values v. */
static void const_values(char **text, size_t *len, const char *name, const char *dims, const float *v, int64_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = (const unsigned char *)v;
    size_t nb = (size_t)n * 4, cap = *len + nb * 2 + 256;
    char *t = realloc(*text, cap);
    cr_assert(t);
    size_t k = *len + (size_t)sprintf(t + *len, "  const %%%s: f32[%s] = base64 \"", name, dims);
    for (size_t i = 0; i < nb; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < nb ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < nb ? b[i + 2] : 0);
        t[k++] = tab[w >> 18 & 63];
        t[k++] = tab[w >> 12 & 63];
        t[k++] = i + 1 < nb ? tab[w >> 6 & 63] : '=';
        t[k++] = i + 2 < nb ? tab[w & 63] : '=';
    }
    k += (size_t)sprintf(t + k, "\"\n");
    *text = t;
    *len = k;
}

/* The same of n values lo + (hi - lo) * u. */
static void const_line(char **text, size_t *len, const char *name, const char *dims, int64_t n, double lo, double hi,
                       uint64_t seed) {
    float *v = malloc((size_t)n * sizeof *v);
    cr_assert(v);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) v[i] = (float)(lo + (hi - lo) * uniform(&x));
    const_values(text, len, name, dims, v, n);
    free(v);
}

static void append(char **text, size_t *len, const char *s) {
    size_t n = strlen(s);
    char *t = realloc(*text, *len + n + 1);
    cr_assert(t);
    memcpy(t + *len, s, n + 1);
    *text = t;
    *len += n;
}

static void fill(IrTensor *t, uint64_t seed) {
    uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
    for (int64_t i = 0; i < ir_tensor_numel(t); i++) ir_elem_set_f64(t->dtype, t->data, (size_t)i, 2.0 * uniform(&x) - 1.0);
}

typedef struct Shape {
    uint32_t fused_contractions; /* top-level groups with a contraction anchor after specialization */
    uint32_t batchnorms, kernels;
    uint32_t winograd4, winograd2; /* nodes computed with Winograd F(4x4, 3x3), with 2x2 output tiles */
} Shape;

/* Interpreter on the graph as written, backend after its own fusion; asserts agreement within
 * rtol 1e-4 and atol 1e-5 + scale_atol * (the output's largest magnitude), and reports how the
 * backend grouped it. */
static void check_scaled(const char *text, Shape *sh, double scale_atol) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    uint32_t n_in = ir_graph_num_inputs(g), n_out = ir_graph_num_outputs(g);
    cr_assert(n_in <= MAX_IO && n_out <= MAX_IO);
    IrTensor ins[MAX_IO] = {{0}}, ref[MAX_IO] = {{0}}, out[MAX_IO] = {{0}}, again[MAX_IO] = {{0}};
    for (uint32_t i = 0; i < n_in; i++) {
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        int64_t dims[IR_MAX_RANK];
        for (uint32_t k = 0; k < ir_type_rank(g, t); k++) cr_assert(ir_expr_is_const(g, ir_type_dims(g, t)[k], &dims[k]));
        cr_assert_eq(ir_tensor_alloc(&ins[i], ir_type_dtype(g, t), ir_type_rank(g, t), dims), IR_OK);
        fill(&ins[i], i + 7);
    }
    cr_assert_eq(ir_interp_run(g, ins, n_in, ref, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_specialize_inputs(g, ins, n_in, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    memset(sh, 0, sizeof *sh);
    sh->winograd4 = ir_llvm_winograd_nodes(g, NULL, 4);
    sh->winograd2 = ir_llvm_winograd_nodes(g, NULL, 2);
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) {
        IrOp op = ir_node_op(g, n);
        sh->batchnorms += op == IR_OP_BATCH_NORMALIZATION;
        if (op != IR_OP_FUSED) continue;
        IrOp a = ir_node_op(g, ir_region_first(g, ir_node_region_at(g, n, 0)));
        sh->fused_contractions += a == IR_OP_CONV || a == IR_OP_GEMM || a == IR_OP_MAT_MUL;
    }
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    sh->kernels = llvm_program_num_kernels(p);
    cr_assert_eq(llvm_program_run(p, ins, n_in, out, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    /* a second run into the same outputs (workspace kept by the program) gives the same bits */
    for (uint32_t i = 0; i < n_out; i++) {
        cr_assert_eq(ir_tensor_alloc(&again[i], out[i].dtype, out[i].rank, out[i].dims), IR_OK);
        memset(again[i].data, 0x7f, ir_tensor_nbytes(&again[i]));
    }
    cr_assert_eq(llvm_program_run_into(p, ins, n_in, again, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (uint32_t i = 0; i < n_out; i++) {
        cr_assert_eq(out[i].rank, ref[i].rank);
        int64_t bad = 0;
        double worst = 0, big = 0;
        for (int64_t e = 0; e < ir_tensor_numel(&ref[i]); e++)
            big = fmax(big, fabs(ir_elem_get_f64(ref[i].dtype, ref[i].data, (size_t)e)));
        double atol = 1e-5 + scale_atol * big;
        for (int64_t e = 0; e < ir_tensor_numel(&ref[i]); e++) {
            double a = ir_elem_get_f64(out[i].dtype, out[i].data, (size_t)e);
            double b = ir_elem_get_f64(ref[i].dtype, ref[i].data, (size_t)e);
            if (fabs(a - b) > worst || isnan(a)) worst = fabs(a - b);
            if (!(fabs(a - b) <= atol + 1e-4 * fabs(b))) bad++;
        }
        cr_expect_eq(bad, 0, "output %u: %lld of %lld elements outside rtol 1e-4 atol %g (worst %g, largest output %g)", i,
                     (long long)bad, (long long)ir_tensor_numel(&ref[i]), atol, worst, big);
        cr_expect_eq(memcmp(out[i].data, again[i].data, ir_tensor_nbytes(&out[i])), 0, "run_into differs from run");
    }
    llvm_program_destroy(p);
    for (uint32_t i = 0; i < MAX_IO; i++) {
        ir_tensor_free(&ins[i]);
        ir_tensor_free(&ref[i]);
        ir_tensor_free(&out[i]);
        ir_tensor_free(&again[i]);
    }
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

static void check(const char *text, Shape *sh) { check_scaled(text, sh, 0); }

/* check() on one thread and again with the kernels split into parts on three. */
static void check_one_and_three_threads(const char *text, Shape *sh) {
    for (int threads = 1; threads <= 3; threads += 2) {
        irt_set_threads(threads);
        check(text, sh);
    }
}

/* check() on every text of a list. */
static void check_all(const char *const *texts, size_t n) {
    for (size_t i = 0; i < n; i++) {
        Shape sh;
        check(texts[i], &sh);
    }
}

/* Conv 3x3 + bias -> BatchNorm -> Relu -> Add(residual): 80 output channels of 64x64 make three
 * row blocks (32, 32, 16 rows) of the GEMM; the BatchNorm is folded, the rest is one kernel. */
Test(backend_epilogue, conv_bn_relu_residual) {
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%x: f32[1, 8, 64, 64], %r: f32[1, 80, 64, 64]) {\n");
    const_line(&t, &n, "w", "80, 8, 3, 3", 80 * 8 * 9, -0.3, 0.3, 1);
    const_line(&t, &n, "b", "80", 80, -0.1, 0.1, 2);
    const_line(&t, &n, "s", "80", 80, 0.5, 1.5, 3);
    const_line(&t, &n, "bb", "80", 80, -0.2, 0.2, 4);
    const_line(&t, &n, "m", "80", 80, -0.1, 0.1, 5);
    const_line(&t, &n, "v", "80", 80, 0.5, 2.0, 6);
    append(&t, &n,
           "  %c = Conv(%x, %w, %b) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 80, 64, 64]\n"
           "  %n = BatchNormalization(%c, %s, %bb, %m, %v) {epsilon = 1e-05} : f32[1, 80, 64, 64]\n"
           "  %a = Relu(%n) : f32[1, 80, 64, 64]\n"
           "  %y = Add(%a, %r) : f32[1, 80, 64, 64]\n"
           "  return %y\n}\n");
    Shape sh;
    check(t, &sh);
    cr_expect_eq(sh.batchnorms, 0, "the BatchNorm should be folded into the Conv");
    cr_expect_eq(sh.fused_contractions, 1);
    cr_expect_eq(sh.kernels, 1, "Conv+BN+Relu+Add should be one kernel, got %u", sh.kernels);
    free(t);
}

/* 1x1 Conv (no im2col) with bias and Clip, then a grouped strided 3x3 Conv with LeakyRelu and a
 * broadcast residual, batch 2. */
Test(backend_epilogue, pointwise_and_grouped_convs) {
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%x: f32[2, 16, 40, 40], %r: f32[1, 48, 1, 1]) {\n");
    const_line(&t, &n, "w1", "96, 16, 1, 1", 96 * 16, -0.4, 0.4, 11);
    const_line(&t, &n, "b1", "96", 96, -0.1, 0.1, 12);
    const_line(&t, &n, "w2", "48, 48, 3, 3", 48 * 48 * 9, -0.2, 0.2, 13);
    append(&t, &n,
           "  const %lo: f32[] = [-0.25]\n  const %hi: f32[] = [0.75]\n"
           "  %c = Conv(%x, %w1, %b1) {kernel_shape = [1, 1]} : f32[2, 96, 40, 40]\n"
           "  %k = Clip(%c, %lo, %hi) : f32[2, 96, 40, 40]\n"
           "  %d = Conv(%k, %w2) {kernel_shape = [3, 3], group = 2, pads = [1, 1, 1, 1], strides = [2, 2]} : f32[2, 48, 20, 20]\n"
           "  %l = LeakyRelu(%d) {alpha = 0.1} : f32[2, 48, 20, 20]\n"
           "  %y = Add(%l, %r) : f32[2, 48, 20, 20]\n"
           "  return %y, %k\n}\n");
    Shape sh;
    check(t, &sh);
    cr_expect_eq(sh.fused_contractions, 2, "both Convs should carry their epilogues, got %u", sh.fused_contractions);
    free(t);
}

/* Gemm (transB, bias with beta) -> Relu -> Add(residual): 300 rows of 600 make a block of 208
 * rows and a partial one; a MatMul -> Add(bias row) -> Sigmoid; a batched MatMul -> Add -> Tanh
 * whose epilogue runs once over the whole output; and a linear layer on a 3-D input (batches
 * stacked into one GEMM of 4 x 150 rows) -> Add(bias) -> Relu. */
Test(backend_epilogue, gemm_and_matmul) {
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%a: f32[300, 64], %res: f32[300, 600], %q: f32[3, 20, 16], %k: f32[3, 16, 24], %h: f32[4, 150, 64]) {\n");
    const_line(&t, &n, "wb", "600, 64", 600 * 64, -0.3, 0.3, 21);
    const_line(&t, &n, "bias", "600", 600, -0.5, 0.5, 22);
    const_line(&t, &n, "w2", "600, 40", 600 * 40, -0.1, 0.1, 23);
    const_line(&t, &n, "b2", "40", 40, -0.5, 0.5, 24);
    const_line(&t, &n, "b3", "24", 24, -0.5, 0.5, 25);
    const_line(&t, &n, "w4", "64, 96", 64 * 96, -0.2, 0.2, 26);
    const_line(&t, &n, "b4", "96", 96, -0.5, 0.5, 27);
    append(&t, &n,
           "  %g = Gemm(%a, %wb, %bias) {transB = 1, alpha = 0.5, beta = 2.0} : f32[300, 600]\n"
           "  %r = Relu(%g) : f32[300, 600]\n"
           "  %s = Add(%res, %r) : f32[300, 600]\n"
           "  %m = MatMul(%s, %w2) : f32[300, 40]\n"
           "  %mb = Add(%m, %b2) : f32[300, 40]\n"
           "  %y = Sigmoid(%mb) : f32[300, 40]\n"
           "  %bm = MatMul(%q, %k) : f32[3, 20, 24]\n"
           "  %ba = Add(%bm, %b3) : f32[3, 20, 24]\n"
           "  %z = Tanh(%ba) : f32[3, 20, 24]\n"
           "  %l = MatMul(%h, %w4) : f32[4, 150, 96]\n"
           "  %lb = Add(%b4, %l) : f32[4, 150, 96]\n"
           "  %lr = Relu(%lb) : f32[4, 150, 96]\n"
           "  return %y, %z, %lr\n}\n");
    Shape sh;
    check(t, &sh);
    cr_expect_eq(sh.fused_contractions, 4, "Gemm, MatMuls and batched MatMul should carry their epilogues, got %u",
                 sh.fused_contractions);
    free(t);
}

/* The packed-panel GEMM path of Conv (one group, AVX2/AVX-512 hosts) across its edge cases:
 * output channels not a multiple of the strip height (20), pixel counts not a multiple of the
 * panel width (13x13), K with a partial block (17 x 9 = 153 > 128), the contiguous implicit
 * im2col (stride 1, OW == W) and the gathered one (stride 2, dilation 2, asymmetric pads, no
 * padding), batch 2, and epilogues in registers (Relu, Add of a residual, Mul by a per-channel
 * scale, Sub) next to one that is not (Sigmoid: applied per panel after the GEMM). */
Test(backend_epilogue, packed_conv_geometries) {
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%x: f32[2, 17, 13, 13], %r: f32[2, 20, 13, 13], %s: f32[1, 20, 1, 1], %z: f32[1, 8, 28, 28]) {\n");
    const_line(&t, &n, "w1", "20, 17, 3, 3", 20 * 17 * 9, -0.3, 0.3, 31);
    const_line(&t, &n, "b1", "20", 20, -0.1, 0.1, 32);
    const_line(&t, &n, "w2", "12, 17, 5, 5", 12 * 17 * 25, -0.2, 0.2, 33);
    const_line(&t, &n, "w3", "9, 17, 3, 3", 9 * 17 * 9, -0.2, 0.2, 34);
    const_line(&t, &n, "w4", "24, 17, 1, 1", 24 * 17, -0.4, 0.4, 35);
    const_line(&t, &n, "w5", "64, 8, 3, 3", 64 * 8 * 9, -0.3, 0.3, 36);
    const_line(&t, &n, "b5", "64", 64, -0.1, 0.1, 37);
    append(&t, &n,
           "  %c1 = Conv(%x, %w1, %b1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[2, 20, 13, 13]\n"
           "  %a1 = Relu(%c1) : f32[2, 20, 13, 13]\n"
           "  %p1 = Add(%a1, %r) : f32[2, 20, 13, 13]\n"
           "  %y1 = Mul(%p1, %s) : f32[2, 20, 13, 13]\n"
           "  %c2 = Conv(%x, %w2) {kernel_shape = [5, 5], pads = [2, 1, 3, 2], strides = [2, 2], dilations = [2, 2]} : f32[2, 12, 5, 4]\n"
           "  const %o: f32[] = [0.5]\n"
           "  %y2 = Sub(%c2, %o) : f32[2, 12, 5, 4]\n"
           "  %y3 = Conv(%x, %w3) {kernel_shape = [3, 3]} : f32[2, 9, 11, 11]\n"
           "  %c4 = Conv(%x, %w4) {kernel_shape = [1, 1], strides = [2, 2]} : f32[2, 24, 7, 7]\n"
           "  %y4 = Sigmoid(%c4) : f32[2, 24, 7, 7]\n"
           "  %y5 = Conv(%z, %w5, %b5) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 64, 28, 28]\n"
           "  return %y1, %y2, %y3, %y4, %y5\n}\n");
    Shape sh;
    check(t, &sh);
    free(t);
}

/* Column tails of 1-4 computed with the last full panel (cpu/gemm.c kblock): a 1x1 Conv at
 * 7x7 (49 = 48 + 1 columns) with weights over the L2 budget (K blocks outermost), K in three
 * blocks (400 = 144 + 144 + 112), 500 output channels (a strip of 4 rows last), bias, residual
 * and Relu in registers; a 3x3 Conv at 14x14 (196 = 4 x 48 + 4) with panels outermost and a
 * Sigmoid after the GEMM; on one thread and split into parts on three. */
Test(backend_epilogue, packed_gemm_dot_tails) {
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%x: f32[1, 400, 7, 7], %r: f32[1, 500, 7, 7], %z: f32[1, 40, 14, 14]) {\n");
    const_line(&t, &n, "w1", "500, 400, 1, 1", 500 * 400, -0.1, 0.1, 61);
    const_line(&t, &n, "b1", "500", 500, -0.2, 0.2, 62);
    const_line(&t, &n, "w2", "36, 40, 3, 3", 36 * 40 * 9, -0.2, 0.2, 63);
    append(&t, &n,
           "  %c1 = Conv(%x, %w1, %b1) {kernel_shape = [1, 1]} : f32[1, 500, 7, 7]\n"
           "  %s1 = Add(%c1, %r) : f32[1, 500, 7, 7]\n"
           "  %y1 = Relu(%s1) : f32[1, 500, 7, 7]\n"
           "  %c2 = Conv(%z, %w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 36, 14, 14]\n"
           "  %y2 = Sigmoid(%c2) : f32[1, 36, 14, 14]\n"
           "  return %y1, %y2\n}\n");
    Shape sh;
    check_one_and_three_threads(t, &sh);
    free(t);
}

/* Elementwise kernels over more than 1 MiB run by cache lines with prefetches ahead: a fused
 * group with a broadcast row and a broadcast column (steps 1 and 0 along the line loop), two
 * results, rows of 65539 (not a whole number of lines); a lone Sigmoid over an odd length. */
Test(backend_epilogue, streaming_elementwise) {
    const char *text = "graph @t(%x: f32[5, 65539], %r: f32[65539], %c: f32[5, 1], %z: f32[300007]) {\n"
                       "  %a = Add(%x, %r) : f32[5, 65539]\n"
                       "  %b = Mul(%a, %c) : f32[5, 65539]\n"
                       "  %y = Relu(%b) : f32[5, 65539]\n"
                       "  %s = Sigmoid(%z) : f32[300007]\n"
                       "  return %y, %a, %s\n}\n";
    Shape sh;
    check_one_and_three_threads(text, &sh);
    cr_expect_leq(sh.kernels, 3, "%u kernels", sh.kernels);
}

/* GEMV-shaped products (1 to 4 rows of A, generated code streaming B once instead of BLAS):
 * a batch-1 Gemm with transB, alpha and beta, bias and Relu (K and N not multiples of the
 * vector or column block); a MatMul of 3 rows with B as is (column tail); a Gemm of 4 rows. */
Test(backend_epilogue, gemv_shaped_products) {
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%x: f32[1, 1000], %y: f32[3, 777], %z: f32[4, 530]) {\n");
    const_line(&t, &n, "w1", "1003, 1000", 1003 * 1000, -0.1, 0.1, 41);
    const_line(&t, &n, "b1", "1003", 1003, -0.5, 0.5, 42);
    const_line(&t, &n, "w2", "777, 150", 777 * 150, -0.1, 0.1, 43);
    const_line(&t, &n, "w3", "530, 70", 530 * 70, -0.1, 0.1, 44);
    append(&t, &n,
           "  %g = Gemm(%x, %w1, %b1) {transB = 1, alpha = 0.5, beta = 2.0} : f32[1, 1003]\n"
           "  %r = Relu(%g) : f32[1, 1003]\n"
           "  %m = MatMul(%y, %w2) : f32[3, 150]\n"
           "  %h = Gemm(%z, %w3) : f32[4, 70]\n"
           "  return %r, %m, %h\n}\n");
    Shape sh;
    check(t, &sh);
    free(t);
}

/* Row reductions with the elementwise members computing their input as one kernel each: a
 * scaled and masked Softmax, a residual Add into LayerNorm (the sum also exported), Abs into
 * ReduceMean; the fuse pass leaves the consumers (Mul, Relu, Sqrt) and the lone ReduceMax and
 * Neg as kernels of their own: 3 + 5 kernels (11 when the groups are compiled op by op). */
Test(backend_epilogue, row_reduction_groups) {
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%s: f32[3, 7, 50], %m: f32[1, 7, 50], %x: f32[4, 33], %r: f32[4, 33], %z: f32[5, 6, 40]) {\n");
    const_line(&t, &n, "g", "33", 33, 0.5, 1.5, 51);
    const_line(&t, &n, "b", "33", 33, -0.2, 0.2, 52);
    append(&t, &n,
           "  const %k: f32[] = [0.125]\n  const %q: f32[] = [2.0]\n"
           "  %s1 = Mul(%s, %k) : f32[3, 7, 50]\n"
           "  %s2 = Add(%s1, %m) : f32[3, 7, 50]\n"
           "  %p = Softmax(%s2) {axis = -1} : f32[3, 7, 50]\n"
           "  %y1 = Mul(%p, %q) : f32[3, 7, 50]\n"
           "  %h = Add(%x, %r) : f32[4, 33]\n"
           "  %ln = LayerNormalization(%h, %g, %b) {axis = -1, epsilon = 1e-05} : f32[4, 33]\n"
           "  %y2 = Relu(%ln) : f32[4, 33]\n"
           "  %a = Abs(%z) : f32[5, 6, 40]\n"
           "  %mu = ReduceMean(%a) {axes = [-1]} : f32[5, 6, 1]\n"
           "  %y3 = Sqrt(%mu) : f32[5, 6, 1]\n"
           "  %mx = ReduceMax(%z) {axes = [2], keepdims = 0} : f32[5, 6]\n"
           "  %y4 = Neg(%mx) : f32[5, 6]\n"
           "  return %y1, %y2, %h, %y3, %y4\n}\n");
    Shape sh;
    check(t, &sh);
    cr_expect_eq(sh.kernels, 8, "each reduction with its producers should be one kernel, got %u kernels", sh.kernels);
    free(t);
}

/* A row-reduction group written with members after the reduction too (as other tools or later
 * fusion may form them): Softmax then Mul by a per-row scale and Add of a full tensor, the
 * probabilities exported as well; ReduceSum without keepdims then Relu. One kernel each. */
Test(backend_epilogue, row_reduction_group_with_consumers) {
    const char *t =
        "graph @t(%s: f32[3, 7, 50], %c: f32[3, 7, 1], %d: f32[3, 7, 50], %z: f32[5, 40]) {\n"
        "  const %k: f32[] = [0.125]\n"
        "  const %ax: i64[1] = [-1]\n"
        "  %y, %p = irtool.fused(%s, %k, %c, %d) {kind = \"reduction\"} : f32[3, 7, 50], f32[3, 7, 50] {\n"
        "    body(%s.a: f32[3, 7, 50], %k.a: f32[], %c.a: f32[3, 7, 1], %d.a: f32[3, 7, 50]) {\n"
        "      %s1 = Mul(%s.a, %k.a) : f32[3, 7, 50]\n"
        "      %p.i = Softmax(%s1) {axis = -1} : f32[3, 7, 50]\n"
        "      %u = Mul(%p.i, %c.a) : f32[3, 7, 50]\n"
        "      %y.i = Add(%u, %d.a) : f32[3, 7, 50]\n"
        "      return %y.i, %p.i\n"
        "    }\n"
        "  }\n"
        "  %w = irtool.fused(%z) {kind = \"reduction\"} : f32[5] {\n"
        "    body(%z.a: f32[5, 40]) {\n"
        "      %e = Exp(%z.a) : f32[5, 40]\n"
        "      %sm = ReduceSum(%e, %ax) {keepdims = 0} : f32[5]\n"
        "      %w.i = Relu(%sm) : f32[5]\n"
        "      return %w.i\n"
        "    }\n"
        "  }\n"
        "  return %y, %p, %w\n}\n";
    Shape sh;
    check(t, &sh);
    cr_expect_eq(sh.kernels, 2, "two row-reduction groups should be two kernels, got %u", sh.kernels);
}

/* Concat computed in place (the plan puts each input inside the output, the Concat copies
 * nothing): a fire module (1x1 and 3x3 expands of one squeeze, concatenated along channels);
 * next to Concats that must copy: an input used elsewhere (twice), and an axis after a dim > 1. */
Test(backend_epilogue, concat_in_place) {
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%x: f32[1, 16, 20, 20], %u: f32[2, 3, 4], %v: f32[2, 5, 4]) {\n");
    const_line(&t, &n, "ws", "8, 16, 1, 1", 8 * 16, -0.4, 0.4, 61);
    const_line(&t, &n, "w1", "24, 8, 1, 1", 24 * 8, -0.4, 0.4, 62);
    const_line(&t, &n, "w3", "24, 8, 3, 3", 24 * 8 * 9, -0.2, 0.2, 63);
    append(&t, &n,
           "  %s = Conv(%x, %ws) {kernel_shape = [1, 1]} : f32[1, 8, 20, 20]\n"
           "  %sr = Relu(%s) : f32[1, 8, 20, 20]\n"
           "  %e1 = Conv(%sr, %w1) {kernel_shape = [1, 1]} : f32[1, 24, 20, 20]\n"
           "  %e3 = Conv(%sr, %w3) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 24, 20, 20]\n"
           "  %f = Concat(%e1, %e3) {axis = 1} : f32[1, 48, 20, 20]\n"
           "  %g = Concat(%sr, %sr) {axis = 1} : f32[1, 16, 20, 20]\n"
           "  %a = Relu(%u) : f32[2, 3, 4]\n"
           "  %b = Relu(%v) : f32[2, 5, 4]\n"
           "  %c = Concat(%a, %b) {axis = 1} : f32[2, 8, 4]\n"
           "  return %f, %g, %c\n}\n");
    Shape sh;
    check(t, &sh);
    free(t);
}

/* Random Conv geometries against the interpreter (fixed seed): kernel 1-5 per axis, stride 1-3,
 * dilation 1-2, asymmetric pads 0-2, groups 1/2/4 with 8+ or fewer channels per group, batch
 * 1-2, a bias or not, then Relu or an Add of a per-channel tensor or nothing: the packed GEMM's
 * flat and per-row panels, phase planes, K blocks, strip and dot tails all meet odd sizes. */
Test(backend_epilogue, random_conv_geometries) {
    uint64_t rng = 12345;
    for (int it = 0; it < 40; it++) {
        int64_t groups = (int64_t[]){1, 1, 2, 4}[rng_next(&rng) % 4];
        int64_t cin = groups * (1 + (int64_t)(rng_next(&rng) % 12)), cout = groups * (1 + (int64_t)(rng_next(&rng) % 20));
        int64_t kh = 1 + (int64_t)(rng_next(&rng) % 5), kw = 1 + (int64_t)(rng_next(&rng) % 5);
        int64_t sh = 1 + (int64_t)(rng_next(&rng) % 3), sw = 1 + (int64_t)(rng_next(&rng) % 3);
        int64_t dh = 1 + (int64_t)(rng_next(&rng) % 2), dw = 1 + (int64_t)(rng_next(&rng) % 2);
        int64_t pt = (int64_t)(rng_next(&rng) % 3), pl = (int64_t)(rng_next(&rng) % 3);
        int64_t pb = (int64_t)(rng_next(&rng) % 3), pr = (int64_t)(rng_next(&rng) % 3);
        int64_t h = 4 + (int64_t)(rng_next(&rng) % 30), w = 4 + (int64_t)(rng_next(&rng) % 30);
        int64_t n = 1 + (int64_t)(rng_next(&rng) % 2), epi = (int64_t)(rng_next(&rng) % 3);
        bool bias = rng_next(&rng) % 2;
        int64_t oh = (h + pt + pb - dh * (kh - 1) - 1) / sh + 1, ow = (w + pl + pr - dw * (kw - 1) - 1) / sw + 1;
        if (oh < 1 || ow < 1) continue;
        char *t = NULL, line[512];
        size_t len = 0;
        snprintf(line, sizeof line, "graph @t(%%x: f32[%lld, %lld, %lld, %lld], %%c: f32[1, %lld, 1, 1]) {\n", (long long)n,
                 (long long)cin, (long long)h, (long long)w, (long long)cout);
        append(&t, &len, line);
        snprintf(line, sizeof line, "%lld, %lld, %lld, %lld", (long long)cout, (long long)(cin / groups), (long long)kh, (long long)kw);
        const_line(&t, &len, "w", line, cout * (cin / groups) * kh * kw, -0.3, 0.3, (uint64_t)it + 100);
        snprintf(line, sizeof line, "%lld", (long long)cout);
        const_line(&t, &len, "b", line, cout, -0.2, 0.2, (uint64_t)it + 200);
        snprintf(line, sizeof line,
                 "  %%y = Conv(%%x, %%w%s) {kernel_shape = [%lld, %lld], strides = [%lld, %lld], dilations = [%lld, %lld], "
                 "pads = [%lld, %lld, %lld, %lld], group = %lld} : f32[%lld, %lld, %lld, %lld]\n",
                 bias ? ", %b" : "", (long long)kh, (long long)kw, (long long)sh, (long long)sw, (long long)dh, (long long)dw,
                 (long long)pt, (long long)pl, (long long)pb, (long long)pr, (long long)groups, (long long)n, (long long)cout,
                 (long long)oh, (long long)ow);
        append(&t, &len, line);
        const char *shape_fmt = "f32[%lld, %lld, %lld, %lld]";
        char shape[96];
        snprintf(shape, sizeof shape, shape_fmt, (long long)n, (long long)cout, (long long)oh, (long long)ow);
        if (epi == 1) snprintf(line, sizeof line, "  %%z = Relu(%%y) : %s\n  return %%z\n}\n", shape);
        else if (epi == 2) snprintf(line, sizeof line, "  %%z = Add(%%y, %%c) : %s\n  return %%z\n}\n", shape);
        else snprintf(line, sizeof line, "  return %%y\n}\n");
        append(&t, &len, line);
        Shape sh_;
        check(t, &sh_);
        free(t);
    }
}

/* Random GEMV-shaped products against the interpreter: 1-4 rows, K and N around the vector and
 * column-block sizes, B transposed or not, alpha. */
Test(backend_epilogue, random_gemv_shapes) {
    uint64_t rng = 777;
    for (int it = 0; it < 16; it++) {
        int64_t m = 1 + (int64_t)(rng_next(&rng) % 4), k = 300 + (int64_t)(rng_next(&rng) % 700);
        int64_t n = 100 + (int64_t)(rng_next(&rng) % 400);
        bool tb = rng_next(&rng) % 2;
        double alpha = (rng_next(&rng) % 2) ? 1.0 : 0.75;
        char *t = NULL, line[320], dims[64];
        size_t len = 0;
        snprintf(line, sizeof line, "graph @t(%%a: f32[%lld, %lld]) {\n", (long long)m, (long long)k);
        append(&t, &len, line);
        snprintf(dims, sizeof dims, "%lld, %lld", (long long)(tb ? n : k), (long long)(tb ? k : n));
        const_line(&t, &len, "b", dims, n * k, -0.1, 0.1, (uint64_t)it + 300);
        snprintf(line, sizeof line, "  %%y = Gemm(%%a, %%b) {transB = %d, alpha = %g} : f32[%lld, %lld]\n  return %%y\n}\n",
                 tb ? 1 : 0, alpha, (long long)m, (long long)n);
        append(&t, &len, line);
        Shape sh;
        check(t, &sh);
        free(t);
    }
}

/* An attention group (scale on Q, MatMul with K^T, additive mask on the scores, Softmax over the
 * keys, MatMul with V) as one kernel: scores and probabilities are never stored. */
Test(backend_epilogue, attention_group) {
    const char *t =
        "graph @t(%q: f32[2, 4, 6, 8], %kt: f32[2, 4, 8, 7], %v: f32[2, 4, 7, 5], %m: f32[2, 1, 6, 7]) {\n"
        "  const %sc: f32[] = [0.35355339]\n"
        "  %o = irtool.fused(%q, %sc, %kt, %m, %v) {kind = \"attention\"} : f32[2, 4, 6, 5] {\n"
        "    body(%q.a: f32[2, 4, 6, 8], %sc.a: f32[], %kt.a: f32[2, 4, 8, 7], %m.a: f32[2, 1, 6, 7], %v.a: f32[2, 4, 7, 5]) {\n"
        "      %qs = Mul(%q.a, %sc.a) : f32[2, 4, 6, 8]\n"
        "      %s = MatMul(%qs, %kt.a) : f32[2, 4, 6, 7]\n"
        "      %sm = Add(%s, %m.a) : f32[2, 4, 6, 7]\n"
        "      %p = Softmax(%sm) {axis = -1} : f32[2, 4, 6, 7]\n"
        "      %o.i = MatMul(%p, %v.a) : f32[2, 4, 6, 5]\n"
        "      return %o.i\n"
        "    }\n"
        "  }\n"
        "  return %o\n}\n";
    Shape sh;
    check(t, &sh);
    cr_expect_eq(sh.kernels, 1, "the attention group should be one kernel, got %u", sh.kernels);
}

/* Random attention shapes (batch, heads, query rows, keys, head widths; with and without a scale
 * member on Q and a mask on the scores) against the interpreter. */
/* An attention group over Q [b, h, sq, d], K^T [b, h, d, sk], V [b, h, sk, dv]: Q scaled or
 * through Relu, the scores masked (broadcast add) or negated, Softmax, MatMul with V. */
static void attention_text(char *t, size_t cap, int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d, int64_t dv,
                           bool scale, bool mask) {
    char q[64], kt[64], v[64], m[64], s[64], o[64];
    snprintf(q, sizeof q, "f32[%lld, %lld, %lld, %lld]", (long long)b, (long long)h, (long long)sq, (long long)d);
    snprintf(kt, sizeof kt, "f32[%lld, %lld, %lld, %lld]", (long long)b, (long long)h, (long long)d, (long long)sk);
    snprintf(v, sizeof v, "f32[%lld, %lld, %lld, %lld]", (long long)b, (long long)h, (long long)sk, (long long)dv);
    snprintf(m, sizeof m, "f32[%lld, 1, 1, %lld]", (long long)b, (long long)sk);
    snprintf(s, sizeof s, "f32[%lld, %lld, %lld, %lld]", (long long)b, (long long)h, (long long)sq, (long long)sk);
    snprintf(o, sizeof o, "f32[%lld, %lld, %lld, %lld]", (long long)b, (long long)h, (long long)sq, (long long)dv);
    snprintf(t, cap,
             "graph @t(%%q: %s, %%kt: %s, %%v: %s, %%m: %s) {\n"
             "  const %%sc: f32[] = [0.25]\n"
             "  %%o = irtool.fused(%%q, %%sc, %%kt, %%m, %%v) {kind = \"attention\"} : %s {\n"
             "    body(%%q.a: %s, %%sc.a: f32[], %%kt.a: %s, %%m.a: %s, %%v.a: %s) {\n"
             "      %%qs = %s : %s\n"
             "      %%s = MatMul(%s, %%kt.a) : %s\n"
             "      %%sm = %s : %s\n"
             "      %%p = Softmax(%s) {axis = -1} : %s\n"
             "      %%o.i = MatMul(%%p, %%v.a) : %s\n"
             "      return %%o.i\n    }\n  }\n  return %%o\n}\n",
             q, kt, v, m, o, q, kt, m, v, scale ? "Mul(%q.a, %sc.a)" : "Relu(%q.a)", q, "%qs", s,
             mask ? "Add(%s, %m.a)" : "Neg(%s)", s, "%sm", s, o);
}

Test(backend_epilogue, random_attention_shapes) {
    uint64_t rng = 4242;
    for (int it = 0; it < 12; it++) {
        int64_t b = 1 + (int64_t)(rng_next(&rng) % 3), h = 1 + (int64_t)(rng_next(&rng) % 3);
        int64_t sq = 1 + (int64_t)(rng_next(&rng) % 20), sk = 1 + (int64_t)(rng_next(&rng) % 40);
        int64_t d = 1 + (int64_t)(rng_next(&rng) % 24), dv = 1 + (int64_t)(rng_next(&rng) % 24);
        bool scale = rng_next(&rng) % 2, mask = rng_next(&rng) % 2;
        char t[4096];
        attention_text(t, sizeof t, b, h, sq, sk, d, dv, scale, mask);
        Shape sh;
        check(t, &sh);
        cr_expect_eq(sh.kernels, 1, "iteration %d: %u kernels", it, sh.kernels);
    }
}

/* The attention kernel's head sizes: V rows narrower than a vector packed several per vector
 * (dv 1, 2, 4, 8 with key counts that do and do not divide), dv up to 64 in registers and
 * wider rows through memory; d up to 128 unrolled per key, 130 through a score row first; key
 * counts below and above the 8 interleaved accumulators' 16 steps. */
Test(backend_epilogue, attention_head_sizes) {
    static const int64_t dvs[] = {1, 2, 4, 8, 12, 16, 64, 80}, sks[] = {1, 7, 32, 33, 200};
    int it = 0;
    for (size_t i = 0; i < sizeof dvs / sizeof dvs[0]; i++)
        for (size_t j = 0; j < sizeof sks / sizeof sks[0]; j++, it++) {
            char t[4096];
            attention_text(t, sizeof t, 1, 2, 3, sks[j], it % 3 == 0 ? 130 : 8, dvs[i], it % 2, it % 2);
            Shape sh;
            check(t, &sh);
            cr_expect_eq(sh.kernels, 1, "dv %lld sk %lld: %u kernels", (long long)dvs[i], (long long)sks[j], sh.kernels);
        }
}

/* A row-reduction group that exports one member's value twice: both results are stored. */
Test(backend_epilogue, row_group_value_exported_twice) {
    const char *t =
        "graph @t(%x: f32[4, 33], %r: f32[4, 33], %g: f32[33]) {\n"
        "  %h1, %h2, %ln = irtool.fused(%x, %r, %g) {kind = \"reduction\"} : f32[4, 33], f32[4, 33], f32[4, 33] {\n"
        "    body(%x.a: f32[4, 33], %r.a: f32[4, 33], %g.a: f32[33]) {\n"
        "      %h = Add(%x.a, %r.a) : f32[4, 33]\n"
        "      %l = LayerNormalization(%h, %g.a) {axis = -1} : f32[4, 33]\n"
        "      return %h, %h, %l\n"
        "    }\n"
        "  }\n"
        "  return %h1, %h2, %ln\n}\n";
    Shape sh;
    check(t, &sh);
    cr_expect_eq(sh.kernels, 1);
}

/* Random 2-D pools against the interpreter: max and average (with and without the padding
 * counted), windows 1-4, strides 1-3, pads, planes from 1 to 130 wide, so the vector columns
 * (stride 1 and 2, blocks of 16 with a masked tail) and the scalar edges are all exercised. */
Test(backend_epilogue, random_pool_geometries) {
    uint64_t rng = 777;
    for (int it = 0; it < 40; it++) {
        bool max = rng_next(&rng) % 2;
        int64_t k = 1 + (int64_t)(rng_next(&rng) % 4), kw = 1 + (int64_t)(rng_next(&rng) % 4);
        int64_t s = 1 + (int64_t)(rng_next(&rng) % 3), sw = 1 + (int64_t)(rng_next(&rng) % 2);
        int64_t pt = (int64_t)(rng_next(&rng) % (uint64_t)k), pl = (int64_t)(rng_next(&rng) % (uint64_t)kw);
        int64_t h = k + (int64_t)(rng_next(&rng) % 20), w = kw + (int64_t)(rng_next(&rng) % 130);
        int64_t c = 1 + (int64_t)(rng_next(&rng) % 5), incl = (int64_t)(rng_next(&rng) % 2);
        int64_t oh = (h + 2 * pt - k) / s + 1, ow = (w + 2 * pl - kw) / sw + 1;
        char t[1024];
        snprintf(t, sizeof t,
                 "graph @t(%%x: f32[1, %lld, %lld, %lld]) {\n"
                 "  %%y = %s(%%x) {kernel_shape = [%lld, %lld], strides = [%lld, %lld], pads = [%lld, %lld, %lld, %lld]%s} : "
                 "f32[1, %lld, %lld, %lld]\n  return %%y\n}\n",
                 (long long)c, (long long)h, (long long)w, max ? "MaxPool" : "AveragePool", (long long)k, (long long)kw,
                 (long long)s, (long long)sw, (long long)pt, (long long)pl, (long long)pt, (long long)pl,
                 max ? "" : incl ? ", count_include_pad = 1" : "", (long long)c, (long long)oh, (long long)ow);
        Shape sh_;
        check(t, &sh_);
    }
}

/* Kernels over 64K+ elements run as 16 parts on the runtime's pool: an elementwise group, a
 * row group (residual Add + LayerNorm), Softmax on an inner axis, a broadcast Mul, a reduction.
 * The same results on one thread (every kernel whole, part -1) and on three (parts shared out). */
Test(backend_epilogue, kernels_in_parts) {
    const char *t = "graph @t(%x: f32[4, 64, 32, 32], %r: f32[4, 64, 32, 32], %s: f32[64, 1, 1], %g: f32[32], "
                    "%h: f32[32]) {\n"
                    "  %a = Add(%x, %r) : f32[4, 64, 32, 32]\n"
                    "  %e = Relu(%a) : f32[4, 64, 32, 32]\n"
                    "  %n = LayerNormalization(%e, %g, %h) {axis = -1, epsilon = 1e-05} : f32[4, 64, 32, 32]\n"
                    "  %p = Softmax(%n) {axis = 1} : f32[4, 64, 32, 32]\n"
                    "  %q = Mul(%p, %s) : f32[4, 64, 32, 32]\n"
                    "  %w = ReduceMean(%q) {axes = [2], keepdims = 0} : f32[4, 64, 32]\n"
                    "  return %q, %w\n}\n";
    Shape sh;
    check_one_and_three_threads(t, &sh);
}

/* The generated exp, tanh and erf (llvm/emit.c: arithmetic that vectorizes) against the
 * interpreter's libm on special and boundary values: NaN stays NaN, +-inf, overflow past
 * ln(FLT_MAX), subnormal results, the ends of the approximations' ranges, and a sweep of
 * [-100, 100]: Exp, Sigmoid and Softmax within 3 ulp, Tanh and Erf within 8. */
Test(backend_epilogue, exp_special_values) {
    enum { N = 4096 };
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse("graph @t(%x: f32[4096]) {\n  %e = Exp(%x) : f32[4096]\n  %s = Sigmoid(%x) : f32[4096]\n"
                          "  %p = Softmax(%x) : f32[4096]\n  %t = Tanh(%x) : f32[4096]\n  %f = Erf(%x) : f32[4096]\n"
                          "  return %e, %s, %p, %t, %f\n}\n", "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrTensor in = {0}, ref[5] = {{0}}, out[5] = {{0}};
    int64_t dims[1] = {N};
    cr_assert_eq(ir_tensor_alloc(&in, IR_DTYPE_F32, 1, dims), IR_OK);
    float *x = in.data;
    const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 88.7228f, 88.7229f, 88.376f, -87.33f, -87.34f,
                             -88.3f, -88.38f, -103.0f, -150.0f, 1e-30f, -1e-30f, 0.5f, -0.5f, 0.34657359f, 1.0f,
                             0.0004f, 0.00041f, -0.0004f, 7.905f, 7.906f, -7.906f, 3.999f, 4.0f, 4.001f, -4.001f};
    size_t ns = sizeof special / sizeof special[0];
    for (int i = 0; i < N; i++) x[i] = i < (int)ns ? special[i] : -100.0f + 200.0f * (float)(i - (int)ns) / (float)(N - ns);
    cr_assert_eq(ir_interp_run(g, &in, 1, ref, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_specialize_inputs(g, &in, 1, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_run(p, &in, 1, out, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (int o = 0; o < 5; o++)
        for (int i = 0; i < N; i++) {
            float a = ((float *)out[o].data)[i], b = ((float *)ref[o].data)[i];
            if (isnan(b)) {
                cr_assert(isnan(a), "output %d x=%g: %g, expected NaN", o, x[i], a);
                continue;
            }
            if (isinf(b) || b == 0.0f) {
                cr_assert(a == b || (b == 0.0f && fabsf(a) < 1e-37f), "output %d x=%g: %g, expected %g", o, x[i], a, b);
                continue;
            }
            float ulps = o < 3 ? 3.0f : 8.0f, tol = fabsf(b) < 1.2e-38f ? 5e-39f : ulps * 1.2e-7f * fabsf(b);
            cr_assert(fabsf(a - b) <= tol, "output %d x=%g: %.9g vs %.9g", o, x[i], a, b);
        }
    llvm_program_destroy(p);
    ir_tensor_free(&in);
    for (int o = 0; o < 5; o++) ir_tensor_free(&ref[o]), ir_tensor_free(&out[o]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* TopK against the interpreter's stable sort: largest and smallest, f32 and i32 (whose random
 * values in {-1, 0, 1} tie a lot: ties go to the lower index), inner and last axes. */
Test(backend_epilogue, topk_orders_like_the_interpreter) {
    static const char *const texts[] = {
        "graph @t(%x: f32[4, 10, 5]) {\n  const %k: i64[1] = [3]\n"
        "  %v, %i = TopK(%x, %k) {axis = 1} : f32[4, 3, 5], i64[4, 3, 5]\n  return %v, %i\n}\n",
        "graph @t(%x: f32[4, 10, 5]) {\n  const %k: i64[1] = [4]\n"
        "  %v, %i = TopK(%x, %k) {axis = -1, largest = 0} : f32[4, 10, 4], i64[4, 10, 4]\n  return %v, %i\n}\n",
        "graph @t(%x: i32[6, 9]) {\n  const %k: i64[1] = [9]\n"
        "  %v, %i = TopK(%x, %k) : i32[6, 9], i64[6, 9]\n  return %v, %i\n}\n",
        "graph @t(%x: i32[6, 9]) {\n  const %k: i64[1] = [5]\n"
        "  %v, %i = TopK(%x, %k) {axis = 0, largest = 0} : i32[5, 9], i64[5, 9]\n  return %v, %i\n}\n",
    };
    check_all(texts, sizeof texts / sizeof texts[0]);
}

/* GatherND (with batch_dims, negative indices) and ScatterND (none and add, a repeated tuple
 * accumulating) against the interpreter. */
Test(backend_epilogue, gather_scatter_nd) {
    static const char *const texts[] = {
        "graph @t(%x: f32[2, 3, 4, 5]) {\n  const %i: i64[2, 2, 2] = [0, 1, 2, -1, -3, 0, 1, 3]\n"
        "  %y = GatherND(%x, %i) {batch_dims = 1} : f32[2, 2, 5]\n  return %y\n}\n",
        "graph @t(%x: f32[4, 3, 2]) {\n  const %i: i64[3, 1] = [2, 0, -1]\n"
        "  %y = GatherND(%x, %i) : f32[3, 3, 2]\n  return %y\n}\n",
        "graph @t(%x: f32[4, 3, 2], %u: f32[3, 3, 2]) {\n  const %i: i64[3, 1] = [2, 0, -2]\n"
        "  %y = ScatterND(%x, %i, %u) : f32[4, 3, 2]\n  return %y\n}\n",
        "graph @t(%x: f32[4, 3, 2], %u: f32[3, 2]) {\n  const %i: i64[3, 2] = [1, 2, 1, 2, 3, 0]\n"
        "  %y = ScatterND(%x, %i, %u) {reduction = \"add\"} : f32[4, 3, 2]\n  return %y\n}\n",
    };
    check_all(texts, sizeof texts / sizeof texts[0]);
}

/* QuantizeLinear / DequantizeLinear (per tensor and per channel, u8 and i8 with zero points)
 * and DynamicQuantizeLinear against the interpreter: rounding half to even, saturation. */
Test(backend_epilogue, quantize_dequantize_linear) {
    static const char *const texts[] = {
        "graph @t(%x: f32[2, 3, 8]) {\n  const %s: f32[] = [0.0078125]\n  const %z: u8[] = [128]\n"
        "  %q = QuantizeLinear(%x, %s, %z) : u8[2, 3, 8]\n  %y = DequantizeLinear(%q, %s, %z) : f32[2, 3, 8]\n"
        "  return %q, %y\n}\n",
        "graph @t(%x: f32[2, 3, 8]) {\n  const %s: f32[3] = [0.01, 0.003, 0.02]\n  const %z: i8[3] = [0, -5, 7]\n"
        "  %q = QuantizeLinear(%x, %s, %z) {axis = 1} : i8[2, 3, 8]\n"
        "  %y = DequantizeLinear(%q, %s, %z) {axis = 1} : f32[2, 3, 8]\n  return %q, %y\n}\n",
        "graph @t(%x: f32[5, 7]) {\n  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[5, 7], f32[], u8[]\n  return %y, %s, %z\n}\n",
    };
    check_all(texts, sizeof texts / sizeof texts[0]);
}

/* Einsum against the interpreter: batched matmul with an ellipsis, an implicit output, a
 * diagonal, a broadcast dim of 1, a full contraction to a scalar, and i32. */
Test(backend_epilogue, einsum_equations) {
    static const char *const texts[] = {
        "graph @t(%a: f32[2, 3, 4, 5], %b: f32[2, 3, 5, 6]) {\n"
        "  %y = Einsum(%a, %b) {equation = \"...ij,...jk->...ik\"} : f32[2, 3, 4, 6]\n  return %y\n}\n",
        "graph @t(%a: f32[4, 5], %b: f32[5, 3]) {\n  %y = Einsum(%a, %b) {equation = \"ij,jk\"} : f32[4, 3]\n  return %y\n}\n",
        "graph @t(%a: f32[3, 4, 4]) {\n  %y = Einsum(%a) {equation = \"bii->bi\"} : f32[3, 4]\n  return %y\n}\n",
        "graph @t(%a: f32[1, 4], %b: f32[3, 4]) {\n  %y = Einsum(%a, %b) {equation = \"...j,...j->...j\"} : f32[3, 4]\n  return %y\n}\n",
        "graph @t(%a: f32[3, 4], %b: f32[3, 4]) {\n  %y = Einsum(%a, %b) {equation = \"ij, ij ->\"} : f32[]\n  return %y\n}\n",
        "graph @t(%a: i32[3, 4], %b: i32[4]) {\n  %y = Einsum(%a, %b) {equation = \"ij,j->i\"} : i32[3]\n  return %y\n}\n",
    };
    check_all(texts, sizeof texts / sizeof texts[0]);
}

/* Gather on inner axes (the general emitter), negative indices included, against the interpreter. */
Test(backend_epilogue, gather_inner_axes) {
    static const char *const texts[] = {
        "graph @t(%x: f32[3, 5, 4]) {\n  const %i: i64[2, 3] = [4, 0, -1, 2, 2, 1]\n"
        "  %y = Gather(%x, %i) {axis = 1} : f32[3, 2, 3, 4]\n  return %y\n}\n",
        "graph @t(%x: f32[3, 5, 4]) {\n  const %i: i32[3] = [3, -4, 0]\n"
        "  %y = Gather(%x, %i) {axis = -1} : f32[3, 5, 3]\n  return %y\n}\n",
    };
    check_all(texts, sizeof texts / sizeof texts[0]);
}

/* DepthToSpace (DCR and CRD) and SpaceToDepth against the interpreter, and their round trip. */
Test(backend_epilogue, depth_space) {
    static const char *const texts[] = {
        "graph @t(%x: f32[2, 8, 3, 2]) {\n  %y = DepthToSpace(%x) {blocksize = 2} : f32[2, 2, 6, 4]\n  return %y\n}\n",
        "graph @t(%x: f32[2, 8, 3, 2]) {\n  %y = DepthToSpace(%x) {blocksize = 2, mode = \"CRD\"} : f32[2, 2, 6, 4]\n"
        "  return %y\n}\n",
        "graph @t(%x: f32[2, 3, 6, 4]) {\n  %y = SpaceToDepth(%x) {blocksize = 2} : f32[2, 12, 3, 2]\n"
        "  %z = DepthToSpace(%y) {blocksize = 2} : f32[2, 3, 6, 4]\n  return %y, %z\n}\n",
    };
    check_all(texts, sizeof texts / sizeof texts[0]);
}

/* ReverseSequence on both layouts (a length of 0, a full one) against the interpreter. */
Test(backend_epilogue, reverse_sequence) {
    static const char *const texts[] = {
        "graph @t(%x: f32[5, 4, 3]) {\n  const %l: i64[4] = [5, 2, 0, 3]\n"
        "  %y = ReverseSequence(%x, %l) : f32[5, 4, 3]\n  return %y\n}\n",
        "graph @t(%x: f32[4, 5]) {\n  const %l: i32[4] = [1, 5, 3, 4]\n"
        "  %y = ReverseSequence(%x, %l) {batch_axis = 0, time_axis = 1} : f32[4, 5]\n  return %y\n}\n",
    };
    check_all(texts, sizeof texts / sizeof texts[0]);
}

/* GridSample in every mode and padding, aligned corners or not, against the interpreter (grid
 * points in [-1, 1), the taps reaching the padding at the edges). */
Test(backend_epilogue, grid_sample_modes) {
    static const char *const modes[] = {"nearest", "bilinear", "bicubic"}, *const pads[] = {"zeros", "border", "reflection"};
    for (int m = 0; m < 3; m++)
        for (int p = 0; p < 3; p++)
            for (int ac = 0; ac < 2; ac++) {
                char t[512];
                snprintf(t, sizeof t,
                         "graph @t(%%x: f32[2, 3, 5, 4], %%g: f32[2, 6, 7, 2]) {\n"
                         "  %%y = GridSample(%%x, %%g) {mode = \"%s\", padding_mode = \"%s\", align_corners = %d} : "
                         "f32[2, 3, 6, 7]\n  return %%y\n}\n",
                         modes[m], pads[p], ac);
                Shape sh;
                check(t, &sh);
            }
}

/* 3x3 stride-1 Convs with 16+ channels and enough output tiles go through Winograd on AVX-512
 * and AVX2 hosts (backend/cpu/winograd.c): random channel counts, image sizes (tile rows and columns
 * that do not divide, more than 16 tiles per row), asymmetric pads, batch 2, bias or none, and
 * epilogues in registers (Relu, residual Add) or after the image (Sigmoid), images in several
 * bands of tile rows, against the interpreter's direct convolution. tile 2: the graph limits
 * the tile to F(2x2, 3x3) (metadata irtool.winograd = "2"), held to rtol 1e-4 / atol 1e-5;
 * tile 4: images of 40+ tiles of 4x4, F(4x4, 3x3), whose errors scale with the outputs (atol
 * 1e-5 + 2e-5 of the largest output). */
static void winograd_geometries(int tile, int stride, uint64_t seed) {
    uint64_t rng = seed;
    /* the hosts Winograd applies on: AVX-512, or AVX2 with FMA (8-lane vectors) */
    bool host = __builtin_cpu_supports("avx512f") || (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
    int64_t min_hw = tile == 4 ? 28 : stride == 2 ? 26 : 8; /* F(4x4): 7x7 tiles or more; stride 2: 7x7 of 2x2 */
    for (int it = 0; it < 25; it++) {
        int64_t cin = 16 + (int64_t)(rng_next(&rng) % 40), cout = 16 + (int64_t)(rng_next(&rng) % 40);
        int64_t h = min_hw + (int64_t)(rng_next(&rng) % 60), w = min_hw + (int64_t)(rng_next(&rng) % 80);
        int64_t pt = (int64_t)(rng_next(&rng) % 3), pl = (int64_t)(rng_next(&rng) % 3);
        int64_t pb = (int64_t)(rng_next(&rng) % 3), pr = (int64_t)(rng_next(&rng) % 3);
        int64_t n = 1 + (int64_t)(rng_next(&rng) % 2), epi = (int64_t)(rng_next(&rng) % 4);
        bool bias = rng_next(&rng) % 2;
        if (it == 24) { /* the image in several bands of tile rows, the last one shorter (F(2x2):
                         * 31 tile rows of 30 tiles, bands of 11, 11 and 9; F(4x4): 29 of 29, bands of 5 and
                         * a last one of 4) */
            cin = cout = 48;
            h = w = tile == 4 ? 114 : 62;
            pt = pl = pb = pr = 1;
            n = 1;
            epi = 2;
            bias = true;
        }
        int64_t oh = (h + pt + pb - 3) / stride + 1, ow = (w + pl + pr - 3) / stride + 1;
        char *t = NULL, line[512], shape[96];
        size_t len = 0;
        if (tile == 2) append(&t, &len, "meta \"irtool.winograd\" = \"2\"\n");
        snprintf(shape, sizeof shape, "f32[%lld, %lld, %lld, %lld]", (long long)n, (long long)cout, (long long)oh, (long long)ow);
        snprintf(line, sizeof line, "graph @t(%%x: f32[%lld, %lld, %lld, %lld], %%r: %s) {\n", (long long)n, (long long)cin,
                 (long long)h, (long long)w, shape);
        append(&t, &len, line);
        snprintf(line, sizeof line, "%lld, %lld, 3, 3", (long long)cout, (long long)cin);
        const_line(&t, &len, "w", line, cout * cin * 9, -0.3, 0.3, (uint64_t)it + 300);
        snprintf(line, sizeof line, "%lld", (long long)cout);
        const_line(&t, &len, "b", line, cout, -0.2, 0.2, (uint64_t)it + 400);
        snprintf(line, sizeof line,
                 "  %%y = Conv(%%x, %%w%s) {kernel_shape = [3, 3], pads = [%lld, %lld, %lld, %lld], strides = [%d, %d]} : %s\n",
                 bias ? ", %b" : "", (long long)pt, (long long)pl, (long long)pb, (long long)pr, stride, stride, shape);
        append(&t, &len, line);
        if (epi == 1) snprintf(line, sizeof line, "  %%z = Relu(%%y) : %s\n  return %%z\n}\n", shape);
        else if (epi == 2)
            snprintf(line, sizeof line, "  %%s = Add(%%y, %%r) : %s\n  %%z = Relu(%%s) : %s\n  return %%z\n}\n", shape, shape);
        else if (epi == 3) snprintf(line, sizeof line, "  %%z = Sigmoid(%%y) : %s\n  return %%z\n}\n", shape);
        else snprintf(line, sizeof line, "  return %%y\n}\n");
        append(&t, &len, line);
        Shape sh;
        check_scaled(t, &sh, tile == 4 && stride == 1 ? 2e-5 : 0);
        if (tile == 2) cr_expect_eq(sh.winograd4, 0, "F(4x4, 3x3) despite irtool.winograd = 2");
        if (stride == 2 && host)
            cr_expect_eq(sh.winograd2, 1, "%lldx%lld output, %lld -> %lld channels, stride 2: not Winograd", (long long)oh,
                         (long long)ow, (long long)cin, (long long)cout);
        else if (tile == 4 && host)
            cr_expect_eq(sh.winograd4, 1, "%lldx%lld output, %lld -> %lld channels: not F(4x4, 3x3)", (long long)oh,
                         (long long)ow, (long long)cin, (long long)cout);
        free(t);
    }
}

/* k extra 64 KiB intermediates (Convs of x, multiplied in at the end) placed between the
 * residual and the output: without the rule the output falls at the residual's phase for odd k. */
static void residual_phase_case(int k) {
    char *t = NULL, line[512], name[16];
    size_t len = 0;
    append(&t, &len, "graph @t(%x: f32[1, 16, 32, 32]) {\n");
    const_line(&t, &len, "wa", "64, 16, 1, 1", 64 * 16, -0.3, 0.3, 11);
    const_line(&t, &len, "wb", "64, 16, 1, 1", 64 * 16, -0.3, 0.3, 12);
    const_line(&t, &len, "wc", "16, 64, 1, 1", 16 * 64, -0.3, 0.3, 13);
    for (int i = 0; i < k; i++) {
        snprintf(name, sizeof name, "we%d", i);
        const_line(&t, &len, name, "16, 16, 1, 1", 16 * 16, -0.3, 0.3, (uint64_t)(20 + i));
    }
    append(&t, &len,
           "  %a = Conv(%x, %wa) {kernel_shape = [1, 1]} : f32[1, 64, 32, 32]\n"
           "  %r = Relu(%a) : f32[1, 64, 32, 32]\n");
    for (int i = 0; i < k; i++) { /* placed after the residual, before the output */
        snprintf(line, sizeof line, "  %%e%d = Conv(%%x, %%we%d) {kernel_shape = [1, 1]} : f32[1, 16, 32, 32]\n", i, i);
        append(&t, &len, line);
    }
    append(&t, &len,
           "  %b = Conv(%x, %wb) {kernel_shape = [1, 1]} : f32[1, 64, 32, 32]\n"
           "  %s = Add(%b, %r) : f32[1, 64, 32, 32]\n"
           "  %y = Relu(%s) : f32[1, 64, 32, 32]\n"
           "  %z0 = Conv(%y, %wc) {kernel_shape = [1, 1]} : f32[1, 16, 32, 32]\n");
    for (int i = 0; i < k; i++) {
        snprintf(line, sizeof line, "  %%z%d = Mul(%%z%d, %%e%d) : f32[1, 16, 32, 32]\n", i + 1, i, i);
        append(&t, &len, line);
    }
    snprintf(line, sizeof line, "  return %%z%d\n}\n", k);
    append(&t, &len, line);
    Shape sh;
    check_scaled(t, &sh, 0);
    if (__builtin_cpu_supports("avx512f")) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_parse(t, "t.ir", &d);
        cr_assert(g, "%s", tu_diag_text(&d));
        IrTensor in = {0};
        int64_t dims[4] = {1, 16, 32, 32};
        cr_assert_eq(ir_tensor_alloc(&in, IR_DTYPE_F32, 4, dims), IR_OK);
        fill(&in, 3);
        cr_assert_eq(llvm_specialize_inputs(g, &in, 1, &d.diag), IR_OK, "%s", tu_diag_text(&d));
        LowerMemPlan plan;
        unsigned simd = 512;
        LowerPlanHooks hooks = llvm_plan_hooks(&simd);
        cr_assert_eq(lower_plan_memory(g, &hooks, NULL, &plan), IR_OK);
        int checked = 0;
        for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) {
            if (ir_node_op(g, n) != IR_OP_FUSED) continue;
            IrValueId y = ir_node_result(g, n, 0);
            for (uint32_t i = 1; i < ir_node_num_operands(g, n); i++) {
                IrValueId u = ir_node_operand(g, n, i);
                if (ir_value_kind(g, u) != IR_VALUE_RESULT || plan.offset[u] < 0 || plan.offset[y] < 0 ||
                    lower_value_nbytes(g, u) != lower_value_nbytes(g, y) || lower_value_nbytes(g, u) != 64 * 32 * 32 * 4)
                    continue;
                cr_expect_eq(((plan.offset[y] - plan.offset[u]) % 128 + 128) % 128, 64, "k %d: output at %lld, residual at %lld", k,
                             (long long)plan.offset[y], (long long)plan.offset[u]);
                checked++;
            }
        }
        cr_expect_eq(checked, 1, "k %d: one Conv group reads the residual", k);
        lower_plan_free(&plan);
        ir_tensor_free(&in);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
    free(t);
}

/* The memory plan puts a Conv group's output 64 bytes off its residual's 128-byte phase (see
 * residual_phase in backend/cpu/jit.c: at the same phase a 56x56 residual layer ran 10-20%
 * slower), whatever else is live; the numbers stay the interpreter's. */
Test(backend_epilogue, residual_output_off_its_phase) {
    for (int k = 0; k < 4; k++) residual_phase_case(k);
}

Test(backend_epilogue, winograd_conv_geometries) { winograd_geometries(2, 1, 777); }
Test(backend_epilogue, winograd4_conv_geometries) { winograd_geometries(4, 1, 991); }
/* stride 2: the 5x5-input, 2x2-output form (coefficients 0 and +-1, held to atol 1e-5), with
 * the default metadata and with irtool.winograd = "2" */
Test(backend_epilogue, winograd_stride2_conv_geometries) {
    winograd_geometries(4, 2, 1234);
    winograd_geometries(2, 2, 4321);
}

/* 1x1 Convs on AMX tiles where the host has AMX-BF16 (cpu/amx.c: each f32 split into three
 * bf16 parts, six tile products), else on the FMA GEMM; either way within rtol 1e-4 of the
 * interpreter. Column counts with every kind of last chunk: 575 = 4 x 128 + 63 (a pair of tiles,
 * the second 15 columns wide), 676 = 5 x 128 + 36 (a pair and a single tile of 4), 1024 (no
 * tail), and narrow B packed whole with parts over strips of rows: 196 (six pairs and a tile of
 * 4), 144 (four pairs and a tile); a stride-2 1x1 Conv over a 47x47 input (B: its phase
 * plane); K of 1 to 3 tile blocks, and narrow B of K 1024 and 640 packed in 4 and 2 slabs (C's
 * partial sums kept in C, a last tile of 4 columns in a side buffer); bias, residual and Relu
 * applied in registers; two images; on
 * one thread and split into parts on three. Inputs span six binary orders of magnitude, so a
 * bf16 split that dropped a part (2^-8 or 2^-16 relative) would miss the tolerance. */
Test(backend_epilogue, amx_pointwise_convs) {
    cr_assert(llvm_amx_fits(64, 575, 96) && llvm_amx_fits(80, 676, 32) && !llvm_amx_fits(64, 575, 80) &&
              !llvm_amx_fits(72, 1024, 64) && !llvm_amx_fits(48, 1024, 64) && llvm_amx_fits(64, 196, 256) &&
              llvm_amx_fits(64, 196, 1024) && !llvm_amx_fits(64, 500, 32 * 9 * 9) && !llvm_amx_fits(64, 49, 256));
    char *hcpu = LLVMGetHostCPUName(), *hfeat = LLVMGetHostCPUFeatures();
    cr_log_info("host %s AMX: %s", hcpu, llvm_simd_bits(hcpu, hfeat) & LLVM_SIMD_AMX ? "yes" : "no (FMA GEMM checked)");
    LLVMDisposeMessage(hcpu);
    LLVMDisposeMessage(hfeat);
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%x: f32[2, 96, 23, 25], %r: f32[2, 64, 23, 25], %z: f32[1, 32, 26, 26], %v: f32[1, 64, 32, 32], "
                   "%u: f32[1, 64, 14, 14], %q: f32[2, 128, 12, 12], %h: f32[1, 64, 47, 47], %hr: f32[1, 64, 24, 24], "
                   "%k: f32[1, 1024, 14, 14]) {\n");
    const_line(&t, &n, "w7", "64, 1024, 1, 1", 64 * 1024, -0.05, 0.05, 80);
    const_line(&t, &n, "w8", "96, 640, 1, 1", 96 * 640, -0.05, 0.05, 81);
    const_line(&t, &n, "b8", "96", 96, -0.2, 0.2, 82);
    const_line(&t, &n, "w6", "64, 64, 1, 1", 64 * 64, -0.3, 0.3, 79);
    const_line(&t, &n, "w4", "64, 64, 1, 1", 64 * 64, -0.3, 0.3, 76);
    const_line(&t, &n, "w5", "64, 128, 1, 1", 64 * 128, -0.2, 0.2, 77);
    const_line(&t, &n, "b5", "64", 64, -0.2, 0.2, 78);
    const_line(&t, &n, "w1", "64, 96, 1, 1", 64 * 96, -0.3, 0.3, 71);
    const_line(&t, &n, "b1", "64", 64, -0.2, 0.2, 72);
    const_line(&t, &n, "w2", "80, 32, 1, 1", 80 * 32, -0.5, 0.5, 73);
    const_line(&t, &n, "w3", "64, 64, 1, 1", 64 * 64, -40.0, 40.0, 74);
    const_line(&t, &n, "s3", "1, 64, 1, 1", 64, 0.001, 0.064, 75);
    append(&t, &n,
           "  %c1 = Conv(%x, %w1, %b1) {kernel_shape = [1, 1]} : f32[2, 64, 23, 25]\n"
           "  %a1 = Add(%c1, %r) : f32[2, 64, 23, 25]\n"
           "  %y1 = Relu(%a1) : f32[2, 64, 23, 25]\n"
           "  %y2 = Conv(%z, %w2) {kernel_shape = [1, 1]} : f32[1, 80, 26, 26]\n"
           "  %vs = Mul(%v, %s3) : f32[1, 64, 32, 32]\n"
           "  %y3 = Conv(%vs, %w3) {kernel_shape = [1, 1]} : f32[1, 64, 32, 32]\n"
           "  %y4 = Conv(%u, %w4) {kernel_shape = [1, 1]} : f32[1, 64, 14, 14]\n"
           "  %c5 = Conv(%q, %w5, %b5) {kernel_shape = [1, 1]} : f32[2, 64, 12, 12]\n"
           "  %y5 = Relu(%c5) : f32[2, 64, 12, 12]\n"
           "  %c6 = Conv(%h, %w6) {kernel_shape = [1, 1], strides = [2, 2]} : f32[1, 64, 24, 24]\n"
           "  %y6 = Add(%c6, %hr) : f32[1, 64, 24, 24]\n"
           "  %y7 = Conv(%k, %w7) {kernel_shape = [1, 1]} : f32[1, 64, 14, 14]\n"
           "  const %ks: i64[4] = [0, 0, 1, 2]\n"
           "  const %ke: i64[4] = [1, 640, 13, 14]\n"
           "  %k8 = Slice(%k, %ks, %ke) : f32[1, 640, 12, 12]\n"
           "  %c8 = Conv(%k8, %w8, %b8) {kernel_shape = [1, 1]} : f32[1, 96, 12, 12]\n"
           "  %y8 = Relu(%c8) : f32[1, 96, 12, 12]\n"
           "  return %y1, %y2, %y3, %y4, %y5, %y6, %y7, %y8\n}\n");
    Shape sh;
    check_one_and_three_threads(t, &sh);
    free(t);
}

/* Random 1x1 Convs of the shapes the AMX path takes (llvm_amx_fits: 64+ output channels in 16s,
 * input channels in 32s, 128+ output pixels; stride 1, or 2 over a phase plane), with bias or
 * not, then nothing, Relu, a full-size residual Add or a per-channel scale; wide and narrow B,
 * K slabs, every kind of last column tile; on one thread and split into parts on three. On a
 * host without AMX the same shapes check the FMA GEMM. */
Test(backend_epilogue, random_amx_convs) {
    uint64_t rng = 4242;
    for (int it = 0; it < 12; it++) {
        int64_t cout = 64 + 16 * (int64_t)(rng_next(&rng) % 8), cin = 32 * (1 + (int64_t)(rng_next(&rng) % 32));
        int64_t s = 1 + (int64_t)(rng_next(&rng) % 2), h = 12 + (int64_t)(rng_next(&rng) % 36), w = 12 + (int64_t)(rng_next(&rng) % 36);
        int64_t n = 1 + (int64_t)(rng_next(&rng) % 2), epi = (int64_t)(rng_next(&rng) % 4);
        bool bias = rng_next(&rng) % 2;
        int64_t oh = (h - 1) / s + 1, ow = (w - 1) / s + 1;
        if (oh * ow < 128) {
            it--;
            continue;
        }
        cr_assert(llvm_amx_fits(cout, oh * ow, cin), "%lld x %lld x %lld", (long long)cout, (long long)(oh * ow), (long long)cin);
        cr_log_info("m %lld n %lld k %lld s %lld", (long long)cout, (long long)(oh * ow), (long long)cin, (long long)s);
        char *t = NULL, line[512], shape[96];
        size_t len = 0;
        snprintf(shape, sizeof shape, "f32[%lld, %lld, %lld, %lld]", (long long)n, (long long)cout, (long long)oh, (long long)ow);
        snprintf(line, sizeof line, "graph @t(%%x: f32[%lld, %lld, %lld, %lld], %%r: %s, %%c: f32[1, %lld, 1, 1]) {\n", (long long)n,
                 (long long)cin, (long long)h, (long long)w, shape, (long long)cout);
        append(&t, &len, line);
        snprintf(line, sizeof line, "%lld, %lld, 1, 1", (long long)cout, (long long)cin);
        const_line(&t, &len, "w", line, cout * cin, -0.3, 0.3, (uint64_t)it + 300);
        snprintf(line, sizeof line, "%lld", (long long)cout);
        const_line(&t, &len, "b", line, cout, -0.2, 0.2, (uint64_t)it + 400);
        snprintf(line, sizeof line, "  %%y = Conv(%%x, %%w%s) {kernel_shape = [1, 1], strides = [%lld, %lld]} : %s\n", bias ? ", %b" : "",
                 (long long)s, (long long)s, shape);
        append(&t, &len, line);
        if (epi == 1) snprintf(line, sizeof line, "  %%z = Relu(%%y) : %s\n  return %%z\n}\n", shape);
        else if (epi == 2) snprintf(line, sizeof line, "  %%z = Add(%%y, %%r) : %s\n  return %%z\n}\n", shape);
        else if (epi == 3) snprintf(line, sizeof line, "  %%z = Mul(%%y, %%c) : %s\n  return %%z\n}\n", shape);
        else snprintf(line, sizeof line, "  return %%y\n}\n");
        append(&t, &len, line);
        Shape sh_;
        check_one_and_three_threads(t, &sh_);
        free(t);
    }
}

/* Infinities and NaNs in the input of AMX-shaped Convs (wide and narrow B, weights exactly
 * representable in bf16 so A's lower parts are zero; narrow B in K slabs with them in the first
 * and the last slab; an im2col stem): the chunks holding them are computed in f32 (cpu/amx.c
 * chunk_f32), so +-inf, NaN and the finite outputs beside them are the interpreter's (the split
 * alone would make 0 x inf = NaN out of an infinite input); and an infinite weight, which keeps
 * its Conv on FMAs. */
Test(backend_epilogue, amx_nonfinite_inputs) {
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%x: f32[1, 64, 24, 24], %z: f32[1, 64, 16, 16], %k: f32[1, 1024, 14, 14], "
                   "%s: f32[1, 3, 64, 64], %u: f32[1, 64, 16, 16]) {\n");
    float *w = malloc(64 * 64 * sizeof *w);
    cr_assert(w);
    for (int i = 0; i < 64 * 64; i++) w[i] = (float)((i * 7) % 17 - 8) / 8.0f; /* -1 .. 1 in eighths, zeros too */
    const_values(&t, &n, "w", "64, 64, 1, 1", w, 64 * 64);
    w[3 * 64 + 17] = INFINITY; /* an infinite weight: that Conv stays on FMAs */
    const_values(&t, &n, "wi", "64, 64, 1, 1", w, 64 * 64);
    free(w);
    const_line(&t, &n, "wk", "64, 1024, 1, 1", 64 * 1024, -0.05, 0.05, 92);
    const_line(&t, &n, "ws", "64, 3, 7, 7", 64 * 3 * 49, -0.2, 0.2, 93);
    const_line(&t, &n, "b", "64", 64, -0.2, 0.2, 91);
    append(&t, &n,
           "  %y1 = Conv(%x, %w, %b) {kernel_shape = [1, 1]} : f32[1, 64, 24, 24]\n"
           "  %y2 = Conv(%z, %w) {kernel_shape = [1, 1]} : f32[1, 64, 16, 16]\n"
           "  %y3 = Conv(%k, %wk) {kernel_shape = [1, 1]} : f32[1, 64, 14, 14]\n"
           "  %y4 = Conv(%s, %ws) {kernel_shape = [7, 7], pads = [3, 3, 3, 3], strides = [2, 2]} : f32[1, 64, 32, 32]\n"
           "  %y5 = Conv(%u, %wi) {kernel_shape = [1, 1]} : f32[1, 64, 16, 16]\n"
           "  return %y1, %y2, %y3, %y4, %y5\n}\n");
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(t, "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrTensor ins[5] = {{0}}, ref[5] = {{0}}, out[5] = {{0}};
    int64_t d1[4] = {1, 64, 24, 24}, d2[4] = {1, 64, 16, 16}, d3[4] = {1, 1024, 14, 14}, d4[4] = {1, 3, 64, 64};
    cr_assert_eq(ir_tensor_alloc(&ins[0], IR_DTYPE_F32, 4, d1), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&ins[1], IR_DTYPE_F32, 4, d2), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&ins[2], IR_DTYPE_F32, 4, d3), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&ins[3], IR_DTYPE_F32, 4, d4), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&ins[4], IR_DTYPE_F32, 4, d2), IR_OK);
    for (int i = 0; i < 5; i++) fill(&ins[i], 5 + (uint64_t)i);
    float *x = ins[0].data, *z = ins[1].data;
    x[5 * 576 + 3 * 24 + 7] = INFINITY;   /* channel 5, pixel (3, 7): +-inf by the weight's sign */
    x[9 * 576 + 20 * 24 + 1] = -INFINITY; /* channel 9, pixel (20, 1) */
    x[2 * 576 + 10 * 24 + 10] = NAN;      /* a NaN pixel */
    z[40 * 256 + 15 * 16 + 15] = INFINITY;
    z[41 * 256 + 15 * 16 + 15] = -INFINITY; /* the same pixel: inf - inf = NaN where the signs meet */
    float *u = ins[4].data; /* finite: only the weight is infinite */
    for (int e = 0; e < 256; e++) u[17 * 256 + e] = 0.5f; /* exact in bf16: the infinite weight meets zero parts */
    float *k = ins[2].data, *sx = ins[3].data;
    k[1000 * 196 + 100] = INFINITY; /* in the last of the K slabs */
    k[20 * 196 + 5] = NAN;          /* in the first */
    sx[1 * 4096 + 30 * 64 + 31] = -INFINITY; /* an im2col row's tap */
    cr_assert_eq(ir_interp_run(g, ins, 5, ref, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_specialize_inputs(g, ins, 5, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_run(p, ins, 5, out, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    int64_t infs = 0, nans = 0;
    for (int o = 0; o < 5; o++) {
        const float *a = out[o].data, *r = ref[o].data;
        for (int64_t e = 0; e < ir_tensor_numel(&ref[o]); e++) {
            if (isnan(r[e])) {
                nans++;
                cr_expect(isnan(a[e]), "output %d element %lld: %g, the interpreter NaN", o, (long long)e, (double)a[e]);
            } else if (isinf(r[e])) {
                infs++;
                cr_expect(a[e] == r[e], "output %d element %lld: %g, the interpreter %g", o, (long long)e, (double)a[e], (double)r[e]);
            } else
                cr_expect(fabs(a[e] - r[e]) <= 1e-5 + 1e-4 * fabs(r[e]), "output %d element %lld: %g against %g", o, (long long)e,
                          (double)a[e], (double)r[e]);
        }
    }
    cr_assert(infs > 50 && nans > 64, "infinities %lld, NaNs %lld", (long long)infs, (long long)nans);
    llvm_program_destroy(p);
    for (int i = 0; i < 5; i++) {
        ir_tensor_free(&ins[i]);
        ir_tensor_free(&ref[i]);
        ir_tensor_free(&out[i]);
    }
    ir_graph_destroy(g);
    tu_diag_free(&d);
    free(t);
}

/* Convs whose implicit im2col feeds the AMX tiles (llvm_amx_conv_fits: output rows a multiple of
 * 16 wide, 512+ pixels, 64+ output channels; K padded to 32 with zero weight rows): a ResNet-like
 * stem (7x7 stride 2, pads 3, 3 channels: taps through stride-phase planes, K 147 -> 160) with
 * bias and Relu, a 3x3 over 8 channels (too few for Winograd; K 72 -> 96), a dilated 5x5, and a
 * stride-3 3x3 with a residual; on one and three threads. Without AMX the packed FMA GEMM. */
Test(backend_epilogue, amx_im2col_convs) {
    LowerWin stem = {.n = 1, .c = 3, .h = 64, .w = 64, .oh = 32, .ow = 32, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .dh = 1, .dw = 1,
                    .pt = 3, .pl = 3};
    LowerWin row7 = stem;
    row7.ow = 31;
    cr_assert(llvm_amx_conv_fits(&stem, 64) && llvm_amx_conv_k(&stem) == 160 && !llvm_amx_conv_fits(&row7, 64) &&
              !llvm_amx_conv_fits(&stem, 48));
    char *t = NULL;
    size_t n = 0;
    append(&t, &n, "graph @t(%x: f32[1, 3, 64, 64], %u: f32[2, 8, 32, 32], %v: f32[1, 6, 40, 48], %s: f32[1, 5, 96, 96], "
                   "%r: f32[1, 64, 32, 32]) {\n");
    const_line(&t, &n, "w1", "64, 3, 7, 7", 64 * 3 * 49, -0.2, 0.2, 501);
    const_line(&t, &n, "b1", "64", 64, -0.2, 0.2, 502);
    const_line(&t, &n, "w2", "80, 8, 3, 3", 80 * 8 * 9, -0.3, 0.3, 503);
    const_line(&t, &n, "w3", "64, 6, 5, 5", 64 * 6 * 25, -0.2, 0.2, 504);
    const_line(&t, &n, "w4", "64, 5, 3, 3", 64 * 5 * 9, -0.3, 0.3, 505);
    append(&t, &n,
           "  %c1 = Conv(%x, %w1, %b1) {kernel_shape = [7, 7], pads = [3, 3, 3, 3], strides = [2, 2]} : f32[1, 64, 32, 32]\n"
           "  %y1 = Relu(%c1) : f32[1, 64, 32, 32]\n"
           "  %y2 = Conv(%u, %w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[2, 80, 32, 32]\n"
           "  %y3 = Conv(%v, %w3) {kernel_shape = [5, 5], pads = [4, 4, 4, 4], dilations = [2, 2]} : f32[1, 64, 40, 48]\n"
           "  %c4 = Conv(%s, %w4) {kernel_shape = [3, 3], strides = [3, 3]} : f32[1, 64, 32, 32]\n"
           "  %y4 = Add(%c4, %r) : f32[1, 64, 32, 32]\n"
           "  return %y1, %y2, %y3, %y4\n}\n");
    Shape sh;
    check_one_and_three_threads(t, &sh);
    free(t);
}
