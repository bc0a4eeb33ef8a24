/* The CUDA family kernels without a GPU: small graphs of each family (typed elementwise and Cast,
 * libdevice math, reductions over any axes, arg-reductions, LayerNorm statistics, losses, data
 * movement, Resize with run-time scales, pools, ConvTranspose, TopK, quantization) compile for
 * sm_90 with ptxas accepting the PTX; their kernels carry launch bounds that match the manifest,
 * libdevice calls are resolved, refusals name the op and what; `irtool conformance --backend
 * cuda` reports compiled tests and checks its expect list. Tests that need ptxas skip otherwise. */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NEED_PTXAS()                                                                                              \
    do {                                                                                                          \
        if (!tu_have_ptxas()) cr_skip_test("no CUDA toolkit (ptxas) here: the CUDA kernel tests need one");          \
    } while (0)

typedef struct Built {
    char *manifest, *ptx;
    IrStatus status;
    TuDiag d;
} Built;

/* Parses text (static shapes), specializes it as `compile --target cuda` does and builds the
 * sm_90 artifact; on success the manifest and the PTX are read back from it. */
static void build(const char *text, Built *b) {
    memset(b, 0, sizeof *b);
    tu_diag_init(&b->d);
    IrGraph *g = tu_parse(text, "k.ir", &b->d), *src = tu_parse(text, "k.ir", &b->d);
    cr_assert(g && src, "%s", tu_diag_text(&b->d));
    cr_assert_eq(ir_verify(g, &b->d.diag), IR_OK, "%s", tu_diag_text(&b->d));
    cr_assert_eq(llvm_specialize_inputs_for(g, NULL, ir_graph_num_inputs(g), false, &b->d.diag), IR_OK, "%s", tu_diag_text(&b->d));
    IrCudaOptions opt = {.target = "cuda:sm_90"};
    void *bytes = NULL;
    size_t len = 0;
    b->status = ir_cuda_artifact_build(g, src, &opt, &b->d.diag, &bytes, &len);
    if (!b->status) {
        char *dir = tu_mkdtemp(), *p = tu_path_join(dir, "k.irx"), err[512];
        cr_assert(tu_write_file(p, bytes, len));
        b->manifest = irt_read_manifest(p, err, sizeof err);
        cr_assert(b->manifest, "%s", err);
        /* the PTX: the code section (its offset in the header) after the cubin */
        const unsigned char *d = bytes;
        uint64_t off = 0;
        for (int i = 7; i >= 0; i--) off = off << 8 | d[16 + 32 + i];
        const char *pl = strstr(b->manifest, "\nptx ");
        unsigned long long po, pn;
        cr_assert(pl && sscanf(pl, "\nptx %llu %llu", &po, &pn) == 2 && off + po + pn < len);
        b->ptx = strndup((const char *)d + off + po, pn);
        tu_rmtree(dir);
        free(p);
        free(dir);
    }
    free(bytes);
    ir_graph_destroy(g);
    ir_graph_destroy(src);
}

static void built_free(Built *b) {
    free(b->manifest);
    free(b->ptx);
    tu_diag_free(&b->d);
}

static int count_lines(const char *m, const char *prefix) {
    int n = 0;
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, prefix, strlen(prefix))) n++;
    return n;
}

/* Every kernel of the manifest is an entry of the PTX with .maxntid equal to its block. */
static void check_launch_bounds(const Built *b) {
    for (const char *l = strstr(b->manifest, "kernel "); l; l = strstr(l + 1, "\nkernel ")) {
        char name[32];
        unsigned block;
        cr_assert_eq(sscanf(l + (*l == '\n'), "kernel %31s node %*u block %u", name, &block), 2, "%.80s", l);
        char entry[64];
        snprintf(entry, sizeof entry, ".entry %s(", name);
        const char *e = strstr(b->ptx, entry);
        cr_assert(e, "no entry %s in the PTX", name);
        const char *mx = strstr(e, ".maxntid");
        cr_assert(mx, "kernel %s has no launch bounds", name);
        cr_assert_eq((unsigned)atoi(mx + 8), block, "kernel %s: .maxntid %d, block %u", name, atoi(mx + 8), block);
    }
}

static void compiles(const char *text, int kernels, Built *b) {
    build(text, b);
    cr_assert_eq(b->status, IR_OK, "%s", tu_diag_text(&b->d));
    cr_assert(strstr(b->manifest, "\ncubin 0 "), "no cubin: ptxas did not assemble the kernels");
    if (kernels >= 0) cr_assert_eq(count_lines(b->manifest, "kernel "), kernels, "%s", b->manifest);
    check_launch_bounds(b);
}

Test(cuda_kernels, cast_and_typed_elementwise, .timeout = 120) {
    NEED_PTXAS();
    Built b;
    compiles("graph @t(%x: f32[3, 5], %a: i32[3, 4], %u: u8[4]) {\n"
             "  %h = Cast(%x) {to = f16} : f16[3, 5]\n"
             "  %bf = Cast(%x) {to = bf16} : bf16[3, 5]\n"
             "  %i = Cast(%x) {to = i64} : i64[3, 5]\n"
             "  %d = Cast(%a) {to = f64} : f64[3, 4]\n"
             "  %m = Mod(%a, %a) : i32[3, 4]\n"
             "  %mx = Max(%u, %u) : u8[4]\n"
             "  %g = Greater(%a, %a) : bool[3, 4]\n"
             "  return %h, %bf, %i, %d, %m, %mx, %g\n"
             "}\n",
             7, &b);
    cr_assert(strstr(b.ptx, "cvt.rn.f16.f32"), "no f16 conversion in the Cast kernel");
    cr_assert(strstr(b.ptx, "f64"), "floats are not computed in double");
    built_free(&b);
}

Test(cuda_kernels, libdevice_math_is_linked, .timeout = 120) {
    NEED_PTXAS();
    Built b;
    compiles("graph @t(%x: f32[64]) {\n"
             "  %a = Acos(%x) : f32[64]\n  %s = Sinh(%a) : f32[64]\n  %r = Round(%s) : f32[64]\n  return %r\n}\n",
             3, &b);
    cr_assert_null(strstr(b.ptx, "__nv_"), "a libdevice function was left unresolved or not inlined");
    cr_assert_null(strstr(b.ptx, ".extern .func"), "an external function remains");
    built_free(&b);
}

Test(cuda_kernels, reductions_over_any_axes, .timeout = 120) {
    NEED_PTXAS();
    Built b;
    compiles("graph @t(%x: f32[4, 5, 6], %i: i64[4, 5, 6]) {\n"
             "  %l2 = ReduceL2(%x) {axes = [0, 2], keepdims = 0} : f32[5]\n"
             "  const %one: i64[1] = [1]\n"
             "  %s = ReduceSum(%i, %one) {keepdims = 1} : i64[4, 1, 6]\n"
             "  %lse = ReduceLogSumExp(%x) {axes = [2]} : f32[4, 5, 1]\n"
             "  %am = ArgMax(%x) {axis = 1, keepdims = 0, select_last_index = 1} : i64[4, 6]\n"
             "  const %ax: i64[] = [2]\n"
             "  %cs = CumSum(%x, %ax) {reverse = 1} : f32[4, 5, 6]\n"
             "  return %l2, %s, %lse, %am, %cs\n"
             "}\n",
             5, &b);
    built_free(&b);
}

Test(cuda_kernels, layernorm_statistics_and_losses, .timeout = 120) {
    NEED_PTXAS();
    Built b;
    compiles("graph @t(%x: f32[2, 3, 8], %s: f32[8], %c: f32[4, 5], %t: i64[4], %w: f32[5]) {\n"
             "  %y, %m, %v = LayerNormalization(%x, %s) {axis = -1} : f32[2, 3, 8], f32[2, 3, 1], f32[2, 3, 1]\n"
             "  %nll = NegativeLogLikelihoodLoss(%c, %t, %w) {ignore_index = 1} : f32[]\n"
             "  %sce, %lp = SoftmaxCrossEntropyLoss(%c, %t) {reduction = \"none\"} : f32[4], f32[4, 5]\n"
             "  return %y, %m, %v, %nll, %sce, %lp\n"
             "}\n",
             4, &b);
    /* NLL's mean: per-position kernel, then one 32-thread kernel adding in order, through the tail scratch */
    cr_assert(strstr(b.manifest, "block 32 stride"), "%s", b.manifest);
    cr_assert(strstr(b.manifest, "\nws "), "the loss needs the CUDA tail scratch:\n%s", b.manifest);
    built_free(&b);
}

Test(cuda_kernels, data_movement_every_dtype, .timeout = 120) {
    NEED_PTXAS();
    Built b;
    compiles("graph @t(%a: i16[2, 3, 4], %k: i64[], %ix: i64[2, 3, 2], %u: i16[2, 3, 2]) {\n"
             "  %tu = Trilu(%a, %k) : i16[2, 3, 4]\n"
             "  %ge = GatherElements(%a, %ix) {axis = 2} : i16[2, 3, 2]\n"
             "  %se = ScatterElements(%a, %ix, %u) {axis = 2, reduction = \"add\"} : i16[2, 3, 4]\n"
             "  const %pads: i64[6] = [0, 1, 0, 0, 1, 0]\n"
             "  %p = Pad(%a, %pads) {mode = \"reflect\"} : i16[2, 5, 4]\n"
             "  const %rep: i64[3] = [1, 2, 1]\n"
             "  %t = Tile(%a, %rep) : i16[2, 6, 4]\n"
             "  return %tu, %ge, %se, %p, %t\n"
             "}\n",
             5, &b);
    /* ScatterElements: a device copy of the data first */
    cr_assert(count_lines(b.manifest, "step ") >= 6, "%s", b.manifest);
    cr_assert(strstr(b.manifest, " copy "), "%s", b.manifest);
    built_free(&b);
}

Test(cuda_kernels, resize_pool_convtranspose_topk_quant, .timeout = 180) {
    NEED_PTXAS();
    Built b;
    compiles("graph @t(%x: f32[1, 2, 4, 4], %sc: f32[4], %w: f32[2, 3, 3, 3], %q: f32[2, 6]) {\n"
             "  const %roi: f32[0] = []\n"
             "  %r = Resize(%x, %roi, %sc) {mode = \"cubic\", coordinate_transformation_mode = \"align_corners\"} : f32[1, 2, 8, 8]\n"
             "  %mp, %mi = MaxPool(%x) {kernel_shape = [3, 3], auto_pad = \"SAME_UPPER\"} : f32[1, 2, 4, 4], i64[1, 2, 4, 4]\n"
             "  %ct = ConvTranspose(%x, %w) {strides = [2, 2]} : f32[1, 3, 9, 9]\n"
             "  const %kk: i64[1] = [3]\n"
             "  %tv, %ti = TopK(%q, %kk) : f32[2, 3], i64[2, 3]\n"
             "  const %s1: f32[] = [0.5]\n"
             "  %qu = QuantizeLinear(%q, %s1) : u8[2, 6]\n"
             "  return %r, %mp, %mi, %ct, %tv, %ti, %qu\n"
             "}\n",
             5, &b);
    built_free(&b);
}

/* MaxPool on 8- and 32-bit integers: the window's max in double (exact for them), stored back
 * through a saturating conversion. */
Test(cuda_kernels, integer_maxpool, .timeout = 120) {
    NEED_PTXAS();
    Built b;
    compiles("graph @t(%x: u8[1, 2, 5, 5], %y: i32[1, 3, 6]) {\n"
             "  %p = MaxPool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : u8[1, 2, 3, 3]\n"
             "  %q = MaxPool(%y) {kernel_shape = [2]} : i32[1, 3, 5]\n"
             "  return %p, %q\n"
             "}\n",
             2, &b);
    built_free(&b);
}

Test(cuda_kernels, refusals_name_the_op_and_what, .timeout = 120) {
    NEED_PTXAS();
    Built b;
    build("graph @t(%x: f32[1, 1, 4, 4], %s: f32[4]) {\n"
          "  const %roi: f32[0] = []\n"
          "  %r = Resize(%x, %roi, %s) {mode = \"linear\", antialias = 1} : f32[1, 1, 2, 2]\n"
          "  return %r\n"
          "}\n",
          &b);
    cr_assert_eq(b.status, IR_EUNSUPPORTED);
    cr_assert(strstr(tu_diag_text(&b.d), "does not support Resize with antialias"), "%s", tu_diag_text(&b.d));
    built_free(&b);
    build("graph @t(%x: f32[3]) {\n  %s = Cast(%x) {to = string} : string[3]\n  return %s\n}\n", &b);
    cr_assert_eq(b.status, IR_EUNSUPPORTED);
    cr_assert(strstr(tu_diag_text(&b.d), "Cast on string tensors"), "%s", tu_diag_text(&b.d));
    built_free(&b);
}

/* ---- irtool conformance --backend cuda ---------------------------------------------------------- */

static char *node_test(const char *name) {
    const char *shared = getenv("IRTOOL_SHARED_DIR");
    char p[1200];
    snprintf(p, sizeof p, "%s/onnx-tests/node/%s", shared ? shared : IRTOOL_SOURCE_DIR "/../shared", name);
    return access(p, R_OK) == 0 ? strdup(p) : NULL;
}

Test(cuda_kernels, conformance_compiles_without_a_gpu, .timeout = 180) {
    NEED_PTXAS();
    char *abs_ = node_test("test_abs"), *str = node_test("test_cast_FLOAT_to_STRING");
    if (!abs_ || !str) {
        free(abs_), free(str);
        cr_skip_test("no ../shared/onnx-tests/node here");
    }
    const char *args[] = {"conformance", abs_, str, "--backend", "cuda", NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    if (!strstr(r.out, "no GPU")) { /* a GPU ran them: compared as the other backends */
        cr_assert(strstr(r.out, "pass test_abs"), "%s", r.out);
        tu_run_free(&r);
        free(abs_), free(str);
        return;
    }
    cr_assert(strstr(r.out, "compiled test_abs\n"), "%s", r.out);
    cr_assert(strstr(r.out, "unsupported test_cast_FLOAT_to_STRING: "), "%s", r.out);
    cr_assert(strstr(r.out, "\n1 compiled, 1 unsupported\n"), "%s", r.out);
    tu_run_free(&r);
    /* a listed test that no longer compiles is a regression (exit 1) */
    char *dir = tu_mkdtemp(), *list = tu_path_join(dir, "expect.txt");
    const char *want = "test_abs\ntest_cast_FLOAT_to_STRING\n";
    cr_assert(tu_write_file(list, want, strlen(want)));
    const char *args2[] = {"conformance", abs_, str, "--backend", "cuda", "--quiet", "--expect", list, NULL};
    cr_assert(tu_run_irtool(args2, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "regression test_cast_FLOAT_to_STRING: expected to pass, now unsupported"), "%s", r.out);
    tu_run_free(&r);
    const char *bad[] = {"conformance", abs_, "--backend", "tpu", NULL};
    cr_assert(tu_run_irtool(bad, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "--backend takes interp, llvm or cuda"), "%s", r.err);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(list), free(abs_), free(str);
}
