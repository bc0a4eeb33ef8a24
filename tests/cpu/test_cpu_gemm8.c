/* The generated GEMV and packed GEMM of backend/cpu/gemm.c against the reference interpreter on
 * random shapes (odd M, N, K; B transposed or not; alpha, bias, epilogues; 1 and 3 threads), on
 * the host's vectors (8 lanes on AVX2 hosts, 16 with AVX-512) and, through an artifact compiled
 * for x86-64-v3, on 8-lane vectors on any x86 host that runs AVX2. */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "backend/llvm/emit.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 4

static uint64_t rng_next(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 40;
}

static int64_t rng_in(uint64_t *x, int64_t lo, int64_t hi) { return lo + (int64_t)(rng_next(x) % (uint64_t)(hi - lo + 1)); }

/* A growing text. */
typedef struct Text {
    char *s;
    size_t len;
} Text;

static void add(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(Text *t, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0);
    char *s = realloc(t->s, t->len + (size_t)n + 1);
    cr_assert(s);
    vsnprintf(s + t->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    t->s = s;
    t->len += (size_t)n;
}

/* `const %NAME: f32[DIMS] = base64 "..."` of n values uniform in [lo, hi) from seed. */
static void add_const(Text *t, const char *name, const char *dims, int64_t n, double lo, double hi, uint64_t seed) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    float *v = malloc((size_t)n * sizeof *v);
    cr_assert(v);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) v[i] = (float)(lo + (hi - lo) * (double)rng_next(&x) / (double)(1ull << 24));
    const unsigned char *b = (const unsigned char *)v;
    size_t nb = (size_t)n * 4;
    char *enc = malloc(nb / 3 * 4 + 8);
    cr_assert(enc);
    size_t k = 0;
    for (size_t i = 0; i < nb; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < nb ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < nb ? b[i + 2] : 0);
        enc[k++] = tab[w >> 18 & 63];
        enc[k++] = tab[w >> 12 & 63];
        enc[k++] = i + 1 < nb ? tab[w >> 6 & 63] : '=';
        enc[k++] = i + 2 < nb ? tab[w & 63] : '=';
    }
    enc[k] = 0;
    add(t, "  const %%%s: f32[%s] = base64 \"%s\"\n", name, dims, enc);
    free(enc);
    free(v);
}

static void fill(IrTensor *t, uint64_t seed) {
    uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
    for (int64_t i = 0; i < ir_tensor_numel(t); i++)
        ir_elem_set_f64(t->dtype, t->data, (size_t)i, 2.0 * (double)rng_next(&x) / (double)(1ull << 24) - 1.0);
}

/* Inputs of graph g (static f32 shapes) filled from their index. */
static uint32_t make_inputs(const IrGraph *g, IrTensor *ins) {
    uint32_t n_in = ir_graph_num_inputs(g);
    cr_assert(n_in <= MAX_IO);
    for (uint32_t i = 0; i < n_in; i++) {
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        int64_t dims[IR_MAX_RANK];
        for (uint32_t k = 0; k < ir_type_rank(g, t); k++) cr_assert(ir_expr_is_const(g, ir_type_dims(g, t)[k], &dims[k]));
        cr_assert_eq(ir_tensor_alloc(&ins[i], ir_type_dtype(g, t), ir_type_rank(g, t), dims), IR_OK);
        fill(&ins[i], i + 7);
    }
    return n_in;
}

/* got within rtol 1e-4, atol 1e-5 + 1e-6 * (the largest |ref|) of ref. */
static void expect_close(const IrTensor *got, const IrTensor *ref, const char *what) {
    cr_assert_eq(ir_tensor_numel(got), ir_tensor_numel(ref), "%s: element count", what);
    double big = 0, worst = 0;
    int64_t bad = 0, n = ir_tensor_numel(ref);
    for (int64_t e = 0; e < n; e++) big = fmax(big, fabs(ir_elem_get_f64(ref->dtype, ref->data, (size_t)e)));
    for (int64_t e = 0; e < n; e++) {
        double a = ir_elem_get_f64(got->dtype, got->data, (size_t)e), b = ir_elem_get_f64(ref->dtype, ref->data, (size_t)e);
        if (!(fabs(a - b) <= 1e-5 + 1e-6 * big + 1e-4 * fabs(b))) bad++;
        if (!(fabs(a - b) <= worst)) worst = fabs(a - b);
    }
    cr_expect_eq(bad, 0, "%s: %lld of %lld elements off (worst %g, largest %g)", what, (long long)bad, (long long)n, worst, big);
}

/* The graph compiled for the host on 1 and 3 threads against the interpreter. */
static void check_host(const char *text) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrTensor ins[MAX_IO] = {{0}}, ref[MAX_IO] = {{0}};
    uint32_t n_in = make_inputs(g, ins), n_out = ir_graph_num_outputs(g);
    cr_assert(n_out <= MAX_IO);
    cr_assert_eq(ir_interp_run(g, ins, n_in, ref, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_specialize_inputs(g, ins, n_in, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s\n%s", tu_diag_text(&d), text);
    for (int threads = 1; threads <= 3; threads += 2) { /* the parts are fixed at compile time */
        irt_set_threads(threads);
        IrTensor out[MAX_IO] = {{0}};
        cr_assert_eq(llvm_program_run(p, ins, n_in, out, &d.diag), IR_OK, "%s", tu_diag_text(&d));
        for (uint32_t i = 0; i < n_out; i++) {
            char what[64];
            snprintf(what, sizeof what, "output %u, %d threads", i, threads);
            expect_close(&out[i], &ref[i], what);
            ir_tensor_free(&out[i]);
        }
    }
    llvm_program_destroy(p);
    irt_set_threads(1);
    for (uint32_t i = 0; i < MAX_IO; i++) {
        ir_tensor_free(&ins[i]);
        ir_tensor_free(&ref[i]);
    }
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* A GEMV-shaped Gemm (m rows, B [k x n] or transposed) with alpha, optionally a bias C (beta)
 * and a Relu, or a MatMul. */
static char *gemv_text(uint64_t *rng) {
    int64_t m = rng_in(rng, 1, 4), k = rng_in(rng, 300, 1300), n = rng_in(rng, 450, 1100);
    bool tb = rng_next(rng) % 2, bias = rng_next(rng) % 2, relu = rng_next(rng) % 2, matmul = !tb && rng_next(rng) % 4 == 0;
    double alpha = rng_next(rng) % 2 ? 1.0 : 0.75;
    Text t = {0};
    add(&t, "graph @t(%%a: f32[%lld, %lld]) {\n", (long long)m, (long long)k);
    char dims[64];
    snprintf(dims, sizeof dims, "%lld, %lld", (long long)(tb ? n : k), (long long)(tb ? k : n));
    add_const(&t, "b", dims, n * k, -0.1, 0.1, rng_next(rng));
    snprintf(dims, sizeof dims, "%lld", (long long)n);
    if (bias && !matmul) add_const(&t, "c", dims, n, -0.5, 0.5, rng_next(rng));
    if (matmul) add(&t, "  %%y = MatMul(%%a, %%b) : f32[%lld, %lld]\n", (long long)m, (long long)n);
    else
        add(&t, "  %%y = Gemm(%%a, %%b%s) {transB = %d, alpha = %g, beta = 1.5} : f32[%lld, %lld]\n", bias ? ", %c" : "",
            tb ? 1 : 0, alpha, (long long)m, (long long)n);
    if (relu) add(&t, "  %%z = Relu(%%y) : f32[%lld, %lld]\n  return %%z\n}\n", (long long)m, (long long)n);
    else add(&t, "  return %%y\n}\n");
    return t.s;
}

Test(cpu_gemm8, random_gemv_shapes) {
    uint64_t rng = 2026;
    for (int it = 0; it < 20; it++) {
        char *t = gemv_text(&rng);
        check_host(t);
        free(t);
    }
}

/* The shapes the GEMV kernel takes: 1-4 rows on vector targets, nothing else. */
Test(cpu_gemm8, gemv_gate) {
    cr_expect(llvm_gemv_fits(1, 1000, 1280, true, 256));
    cr_expect(llvm_gemv_fits(4, 2048, 512, false, 256));
    cr_expect(llvm_gemv_fits(3, 100, 999, false, 512));
    cr_expect(!llvm_gemv_fits(5, 1000, 1280, true, 256));
    cr_expect(!llvm_gemv_fits(1, 1000, 1280, true, 0));
}

/* The packed layout of A: strips of 4 rows with 8-lane vectors, 8 with 16 (the AVX-512 layout,
 * llvm_pgemm_packed_a); K in the emitter's blocks (k = 500: blocks of 176, 176 and 148), each
 * block's strips k-major, the last strip shorter. */
Test(cpu_gemm8, packed_a_layouts) {
    int64_t m = 11, k = 500;
    float *a = malloc((size_t)(m * k) * sizeof *a);
    cr_assert(a);
    for (int64_t i = 0; i < m * k; i++) a[i] = (float)i;
    float *p8 = llvm_pgemm_packed_a_for(256, 1, m, k, a), *p16 = llvm_pgemm_packed_a_for(512, 1, m, k, a);
    float *old = llvm_pgemm_packed_a(1, m, k, a);
    cr_assert(p8 && p16 && old);
    cr_expect_eq(memcmp(p16, old, (size_t)(m * k) * sizeof *a), 0, "the AVX-512 layout is llvm_pgemm_packed_a's");
    const int64_t rows[2] = {4, 8};
    const float *got[2] = {p8, p16};
    for (int v = 0; v < 2; v++) {
        int64_t bad = 0;
        for (int64_t k0 = 0; k0 < k; k0 += 176) {
            int64_t w = k - k0 < 176 ? k - k0 : 176;
            for (int64_t m0 = 0; m0 < m; m0 += rows[v]) {
                int64_t h = m - m0 < rows[v] ? m - m0 : rows[v];
                for (int64_t kk = 0; kk < w; kk++)
                    for (int64_t i = 0; i < h; i++) bad += got[v][k0 * m + m0 * w + kk * h + i] != a[(m0 + i) * k + k0 + kk];
            }
        }
        cr_expect_eq(bad, 0, "strips of %lld rows: %lld elements misplaced", (long long)rows[v], (long long)bad);
    }
    free(a), free(p8), free(p16), free(old);
}

/* The packed layout of B (llvm_pgemm_packed_b): panels of 24 columns with 8-lane vectors, 48
 * with 16, each K rows of a whole panel, the last panel zero past N; B as is or transposed. */
Test(cpu_gemm8, packed_b_layouts) {
    int64_t k = 7, n = 53;
    float *b = malloc((size_t)(k * n) * sizeof *b), *bt = malloc((size_t)(k * n) * sizeof *bt);
    cr_assert(b && bt);
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++) b[i * n + j] = bt[j * k + i] = (float)(1 + i * n + j);
    const unsigned bits[2] = {256, 512};
    const int64_t nr[2] = {24, 48};
    for (int v = 0; v < 2; v++)
        for (int t = 0; t < 2; t++) {
            float *p = llvm_pgemm_packed_b(bits[v], k, n, t ? bt : b, t);
            int64_t panels = (n + nr[v] - 1) / nr[v], bad = 0;
            cr_assert(p);
            cr_assert_eq(llvm_pgemm_packed_b_floats(bits[v], k, n), panels * k * nr[v]);
            for (int64_t q = 0; q < panels; q++)
                for (int64_t i = 0; i < k; i++)
                    for (int64_t c = 0; c < nr[v]; c++) {
                        int64_t j = q * nr[v] + c;
                        bad += p[(q * k + i) * nr[v] + c] != (j < n ? b[i * n + j] : 0.0f);
                    }
            cr_expect_eq(bad, 0, "%u bits, transposed %d: %lld elements misplaced", bits[v], t, (long long)bad);
            free(p);
        }
    cr_expect_null(llvm_pgemm_packed_b(0, k, n, b, false), "no vectors, no layout");
    free(b), free(bt);
}

/* A MatMul with constant weights of m rows (as [m, k] or, batched, [2, m / 2, k]), or a Gemm
 * with constant transposed weights [n, k] and a bias C times beta, then the bias Add and Relu
 * (in registers), a residual Add (a dense operand), Sigmoid (not in registers: over each
 * finished panel) or nothing. */
static char *matmul_text(uint64_t *rng, int64_t m, int64_t k, int64_t n) {
    bool batched = m % 2 == 0 && rng_next(rng) % 2, gemm = !batched && rng_next(rng) % 3 == 0;
    int epi = (int)rng_in(rng, 0, 3);
    char in[64], out[64];
    if (batched) {
        snprintf(in, sizeof in, "f32[2, %lld, %lld]", (long long)(m / 2), (long long)k);
        snprintf(out, sizeof out, "f32[2, %lld, %lld]", (long long)(m / 2), (long long)n);
    } else {
        snprintf(in, sizeof in, "f32[%lld, %lld]", (long long)m, (long long)k);
        snprintf(out, sizeof out, "f32[%lld, %lld]", (long long)m, (long long)n);
    }
    Text t = {0};
    add(&t, "graph @t(%%a: %s, %%r: %s) {\n", in, out);
    char dims[64];
    snprintf(dims, sizeof dims, "%lld, %lld", (long long)(gemm ? n : k), (long long)(gemm ? k : n));
    add_const(&t, "w", dims, k * n, -0.1, 0.1, rng_next(rng));
    snprintf(dims, sizeof dims, "%lld", (long long)n);
    add_const(&t, "c", dims, n, -0.5, 0.5, rng_next(rng));
    if (gemm) add(&t, "  %%y = Gemm(%%a, %%w, %%c) {transB = 1, beta = 1.5} : %s\n", out);
    else add(&t, "  %%y = MatMul(%%a, %%w) : %s\n", out);
    if (epi == 0) add(&t, "  return %%y\n}\n");
    if (epi == 1) add(&t, "  %%z = Add(%%y, %%c) : %s\n  %%u = Relu(%%z) : %s\n  return %%u\n}\n", out, out);
    if (epi == 2) add(&t, "  %%z = Add(%%c, %%y) : %s\n  %%u = Add(%%z, %%r) : %s\n  return %%u\n}\n", out, out);
    if (epi == 3) add(&t, "  %%z = Add(%%y, %%c) : %s\n  %%u = Sigmoid(%%z) : %s\n  return %%u\n}\n", out, out);
    return t.s;
}

/* MatMuls and Gemms with constant weights of the shapes that run through the packed GEMM with
 * packed B on AVX2 (5-64 rows): strips of 4 rows and a shorter last one, panels of 24 columns with narrow
 * last ones of 1-23 (no dot tails with B packed), K of one and of several blocks, through the
 * fuse pass's epilogue groups; on the host's vectors, 1 and 3 threads (panels in parts). */
Test(cpu_gemm8, random_packed_matmuls) {
    uint64_t rng = 4040;
    static const int64_t fixed[][3] = {{5, 1, 1}, {7, 3, 25}, {32, 128, 512}, {32, 512, 128}, {64, 200, 49}, {9, 600, 4}};
    for (int it = 0; it < 24; it++) {
        int64_t m, k, n;
        if (it < 6) m = fixed[it][0], k = fixed[it][1], n = fixed[it][2];
        else m = rng_in(&rng, 5, 64), k = rng_in(&rng, 1, 450), n = rng_in(&rng, 1, 130);
        char *t = matmul_text(&rng, m, k, n);
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_parse(t, "t.ir", &d);
        cr_assert(g, "%s", tu_diag_text(&d));
        cr_assert_eq(tu_run_pipeline(g, "fuse", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
        char *fused = tu_print(g);
        ir_graph_destroy(g);
        tu_diag_free(&d);
        check_host(fused);
        free(fused);
        free(t);
    }
}

/* The weights of a MatMul that the packed GEMM reads packed are stored once, packed: the
 * artifact (compiled for x86-64-v3, AVX2) holds the packed layout and not the [K, N] original. */
Test(cpu_gemm8, packed_weights_stored_once) {
    Text t = {0};
    add(&t, "graph @t(%%h: f32[32, 96]) {\n");
    add_const(&t, "w", "96, 50", 96 * 50, -0.1, 0.1, 97);
    add(&t, "  %%m = MatMul(%%h, %%w) : f32[32, 50]\n  return %%m\n}\n");
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "m.ir"), *irx = tu_path_join(dir, "m.irx");
    cr_assert(tu_write_file(model, t.s, t.len));
    const char *args[] = {"compile", model, "--target", "cpu:x86-64-v3", "--no-cache", "--no-validate", "-o", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    const char *iargs[] = {"inspect", irx, NULL};
    cr_assert(tu_run_irtool(iargs, NULL, 0, NULL, &r));
    long long bytes = 0, slot, off, len;
    for (const char *l = r.out; (l = strstr(l, "\nconst ")); l++)
        if (sscanf(l, "\nconst %lld %lld %lld", &slot, &off, &len) == 3) bytes += len;
    cr_expect(strstr(r.out, "blas 0"), "the MatMul should be generated code:\n%s", r.out);
    cr_expect_eq(bytes, llvm_pgemm_packed_b_floats(256, 96, 50) * 4, "constants stored: %lld bytes\n%s", bytes, r.out);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(model), free(irx), free(t.s);
}

/* A one-group Conv with constant weights (the packed GEMM reads them packed): batch, channels,
 * plane, kernel, stride, pads, bias or not, then Relu, an Add of a per-channel tensor or nothing. */
typedef struct ConvShape {
    int64_t n, cin, cout, h, w, kh, kw, s, pt, pl, pb, pr, epi;
    bool bias;
} ConvShape;

static char *conv_text(const ConvShape *c, uint64_t seed, LowerWin *win) {
    int64_t oh = (c->h + c->pt + c->pb - c->kh) / c->s + 1, ow = (c->w + c->pl + c->pr - c->kw) / c->s + 1;
    *win = (LowerWin){.n = c->n, .c = c->cin, .h = c->h, .w = c->w, .oh = oh, .ow = ow, .kh = c->kh, .kw = c->kw,
                      .sh = c->s, .sw = c->s, .dh = 1, .dw = 1, .pt = c->pt, .pl = c->pl};
    Text t = {0};
    add(&t, "graph @t(%%x: f32[%lld, %lld, %lld, %lld], %%r: f32[1, %lld, 1, 1]) {\n", (long long)c->n, (long long)c->cin,
        (long long)c->h, (long long)c->w, (long long)c->cout);
    char dims[96];
    snprintf(dims, sizeof dims, "%lld, %lld, %lld, %lld", (long long)c->cout, (long long)c->cin, (long long)c->kh, (long long)c->kw);
    add_const(&t, "w", dims, c->cout * c->cin * c->kh * c->kw, -0.2, 0.2, seed);
    snprintf(dims, sizeof dims, "%lld", (long long)c->cout);
    add_const(&t, "b", dims, c->cout, -0.3, 0.3, seed + 1);
    char shape[96];
    snprintf(shape, sizeof shape, "f32[%lld, %lld, %lld, %lld]", (long long)c->n, (long long)c->cout, (long long)oh, (long long)ow);
    add(&t,
        "  %%y = Conv(%%x, %%w%s) {kernel_shape = [%lld, %lld], strides = [%lld, %lld], pads = [%lld, %lld, %lld, %lld]} : %s\n",
        c->bias ? ", %b" : "", (long long)c->kh, (long long)c->kw, (long long)c->s, (long long)c->s, (long long)c->pt,
        (long long)c->pl, (long long)c->pb, (long long)c->pr, shape);
    if (c->epi == 1) add(&t, "  %%z = Relu(%%y) : %s\n  return %%z\n}\n", shape);
    else if (c->epi == 2) add(&t, "  %%z = Add(%%y, %%r) : %s\n  return %%z\n}\n", shape);
    else add(&t, "  return %%y\n}\n");
    return t.s;
}

/* Random Convs of the shapes the packed GEMM takes on AVX2 (llvm_pgemm_conv_fits at 256 bits):
 * odd channel counts (strips of 4 and a shorter last one), odd planes (panels of 24 columns,
 * 1-4 column dot tails, per-row panels below 8 columns), K over several blocks, stride 2
 * (phase planes), asymmetric pads; compiled for the host (8-lane vectors on AVX2 hosts). */
Test(cpu_gemm8, random_packed_convs) {
    uint64_t rng = 3030;
    int done = 0;
    for (int it = 0; it < 400 && done < 12; it++) {
        ConvShape c = {.n = rng_in(&rng, 1, 2), .cin = rng_in(&rng, 3, 300), .cout = rng_in(&rng, 5, 70)};
        int64_t k = (int64_t[]){1, 1, 3, 3, 5}[rng_next(&rng) % 5];
        c.kh = c.kw = k;
        c.s = rng_in(&rng, 1, 2);
        c.h = rng_in(&rng, k, 30);
        c.w = rng_in(&rng, k, 30);
        if (k > 1) c.pt = rng_in(&rng, 0, k / 2), c.pl = rng_in(&rng, 0, k / 2), c.pb = rng_in(&rng, 0, k / 2), c.pr = rng_in(&rng, 0, k / 2);
        c.epi = rng_in(&rng, 0, 2);
        c.bias = rng_next(&rng) % 2;
        LowerWin win;
        char *t = conv_text(&c, rng_next(&rng), &win);
        if (llvm_pgemm_conv_fits(&win, c.cout, 256)) {
            check_host(t);
            done++;
        }
        free(t);
    }
    cr_expect_geq(done, 12, "only %d random shapes fit the AVX2 rule", done);
}

/* The same kernels on 8-lane vectors whatever the host: a model compiled for x86-64-v3 (AVX2)
 * with a GEMV (B transposed), a strided 1x1 Conv, a 3x3 Conv on an 8x8 plane and a MatMul of 32 rows
 * with constant weights (packed B), all generated (the manifest lists no BLAS), run through libirtool-runtime on 1 and 3 threads
 * against the interpreter. Skipped on hosts that cannot run AVX2 code. */
Test(cpu_gemm8, avx2_artifact) {
    Text t = {0};
    add(&t, "graph @t(%%a: f32[3, 700], %%x: f32[2, 40, 15, 17], %%h: f32[2, 16, 96]) {\n");
    add_const(&t, "b", "333, 700", 333 * 700, -0.1, 0.1, 91);
    add_const(&t, "w1", "36, 40, 1, 1", 36 * 40, -0.2, 0.2, 92);
    add_const(&t, "c1", "36", 36, -0.3, 0.3, 93);
    add_const(&t, "w2", "22, 36, 3, 3", 22 * 36 * 9, -0.1, 0.1, 94);
    add_const(&t, "wm", "96, 50", 96 * 50, -0.1, 0.1, 95);
    add(&t, "  %%g = Gemm(%%a, %%b) {transB = 1, alpha = 0.5} : f32[3, 333]\n"
            "  %%y1 = Conv(%%x, %%w1, %%c1) {kernel_shape = [1, 1], strides = [2, 2]} : f32[2, 36, 8, 9]\n"
            "  %%r1 = Relu(%%y1) : f32[2, 36, 8, 9]\n"
            "  %%y2 = Conv(%%r1, %%w2) {kernel_shape = [3, 3], pads = [1, 0, 1, 1]} : f32[2, 22, 8, 8]\n"
            "  %%m = MatMul(%%h, %%wm) : f32[2, 16, 50]\n"
            "  return %%g, %%y2, %%m\n}\n");
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "m.ir"), *irx = tu_path_join(dir, "m.irx");
    cr_assert(tu_write_file(model, t.s, t.len));
    const char *args[] = {"compile", model, "--target", "cpu:x86-64-v3", "--no-cache", "-o", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    if (r.status != 0 && strstr(r.err, "cannot run")) {
        tu_run_free(&r);
        tu_rmtree(dir);
        free(dir), free(model), free(irx), free(t.s);
        cr_skip_test("this host cannot run x86-64-v3 code");
    }
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    const char *iargs[] = {"inspect", irx, NULL};
    cr_assert(tu_run_irtool(iargs, NULL, 0, NULL, &r));
    cr_expect(strstr(r.out, "blas 0"), "the GEMV, both Convs and the MatMul should be generated code:\n%s", r.out);
    tu_run_free(&r);

    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(t.s, "m.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrTensor ins[MAX_IO] = {{0}}, ref[MAX_IO] = {{0}};
    uint32_t n_in = make_inputs(g, ins);
    cr_assert_eq(ir_interp_run(g, ins, n_in, ref, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "irt_load: %s", err);
    cr_assert_eq(irt_num_outputs(a), 3);
    IrtTensor in[3];
    for (uint32_t i = 0; i < n_in; i++) {
        in[i] = (IrtTensor){.dtype = (int32_t)ins[i].dtype, .rank = ins[i].rank, .data = ins[i].data};
        memcpy(in[i].dims, ins[i].dims, sizeof in[i].dims);
    }
    for (int threads = 1; threads <= 3; threads += 2) {
        irt_set_threads(threads);
        IrtTensor out[3];
        cr_assert_eq(irt_run(a, in, out, err, sizeof err), 0, "%s", err);
        for (uint32_t i = 0; i < 3; i++) {
            IrTensor got = {.dtype = ref[i].dtype, .rank = ref[i].rank, .data = out[i].data};
            memcpy(got.dims, ref[i].dims, sizeof got.dims);
            char what[64];
            snprintf(what, sizeof what, "artifact output %u, %d threads", i, threads);
            expect_close(&got, &ref[i], what);
            free(out[i].data);
        }
    }
    irt_set_threads(1);
    irt_free(a);
    for (uint32_t i = 0; i < MAX_IO; i++) {
        ir_tensor_free(&ins[i]);
        ir_tensor_free(&ref[i]);
    }
    ir_graph_destroy(g);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir), free(model), free(irx), free(t.s);
}
