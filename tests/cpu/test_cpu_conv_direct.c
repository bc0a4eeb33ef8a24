/* The LLVM backend's direct Conv kernels against the reference interpreter. Depthwise and
 * grouped Conv (backend/cpu/depthwise.c): random geometries (odd widths, strides 1-3, asymmetric pads, dilations, kernels 1x1 to 5x5,
 * channel multipliers, 2-4 input channels per group, batch 1-2, with and without bias) and
 * epilogues (Relu, Clip, residual Add in registers; Sigmoid after the kernel) agree with
 * the reference interpreter within rtol 1e-4, atol 1e-5, on one thread and in parts on three;
 * such Convs need no im2col scratch (the direct kernel, not per-group GEMMs). 1x1 Convs with
 * constant weights on AVX2 (backend/cpu/pointwise.c): random channel counts around the tiles'
 * rows (4, 6, 8) and pixel counts around their widths (4, 8, 16, 24), bias, epilogues; at 1-4
 * pixels (rows in lanes) channel counts across several row blocks. */
#include "backend/backend.h"
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

/* Interpreter against the backend on the graph text (tu_check_llvm_text); with direct, also
 * that every root Conv (or group anchored by one) plans no im2col scratch on this host. */
static void check(const char *text, int threads, bool direct) {
    char *hcpu = LLVMGetHostCPUName(), *hfeat = LLVMGetHostCPUFeatures();
    unsigned simd = llvm_simd_bits(hcpu, hfeat);
    LLVMDisposeMessage(hcpu);
    LLVMDisposeMessage(hfeat);
    if (direct && simd >= 256) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_parse(text, "dw.ir", &d);
        cr_assert(g, "%s", tu_diag_text(&d));
        TuTensors in;
        cr_assert(tu_make_inputs(g, 30, 1, &in));
        cr_assert_eq(llvm_specialize_inputs(g, in.t, in.n, &d.diag), IR_OK, "%s", tu_diag_text(&d));
        for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) {
            IrOp op = ir_node_op(g, n);
            bool conv = op == IR_OP_CONV ||
                        (op == IR_OP_FUSED && ir_node_op(g, ir_region_first(g, ir_node_region_at(g, n, 0))) == IR_OP_CONV);
            if (conv) cr_expect_eq(llvm_node_scratch_bytes(g, n, simd), 0, "a direct kernel needs no im2col:\n%s", text);
        }
        tu_tensors_free(&in);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
    tu_check_llvm_text(text, threads);
}

/* One random grouped Conv with an epilogue: the graph text. */
static char *random_case(TuRng *r) {
    static const int64_t ks[] = {1, 3, 3, 3, 5, 2};
    int64_t groups = 1 + (int64_t)tu_rng_below(r, 24), cg = tu_rng_below(r, 3) ? 1 : 2 + (int64_t)tu_rng_below(r, 3);
    int64_t mult = tu_rng_below(r, 4) ? 1 : 2, c = groups * cg, m = groups * mult, nb = 1 + (int64_t)tu_rng_below(r, 2);
    if (groups == 1) groups = 2, c = 2 * cg, m = 2 * mult;
    int64_t kh = ks[tu_rng_below(r, 6)], kw = tu_rng_below(r, 4) ? kh : ks[tu_rng_below(r, 6)];
    int64_t sh = 1 + (int64_t)tu_rng_below(r, 3), sw = tu_rng_below(r, 2) ? sh : 1 + (int64_t)tu_rng_below(r, 3);
    int64_t dh = tu_rng_below(r, 4) ? 1 : 2, dw = tu_rng_below(r, 4) ? 1 : 2;
    int64_t p[4];
    for (int i = 0; i < 4; i++) p[i] = (int64_t)tu_rng_below(r, 3);
    int64_t h = 1 + (int64_t)tu_rng_below(r, 21), w = 1 + (int64_t)tu_rng_below(r, 40);
    int64_t oh = (h + p[0] + p[2] - ((kh - 1) * dh + 1)) / sh + 1, ow = (w + p[1] + p[3] - ((kw - 1) * dw + 1)) / sw + 1;
    if (h + p[0] + p[2] < (kh - 1) * dh + 1 || w + p[1] + p[3] < (kw - 1) * dw + 1) return NULL;
    bool bias = tu_rng_below(r, 2);
    int epi = (int)tu_rng_below(r, 5);
    TuText t = {0};
    tu_text_put(&t, "graph @dw(%%x: f32[%lld, %lld, %lld, %lld], %%res: f32[%lld, %lld, %lld, %lld]) {\n", (long long)nb,
        (long long)c, (long long)h, (long long)w, (long long)nb, (long long)m, (long long)oh, (long long)ow);
    char dims[128];
    snprintf(dims, sizeof dims, "%lld, %lld, %lld, %lld", (long long)m, (long long)cg, (long long)kh, (long long)kw);
    tu_text_const(&t, r, "w", dims, m * cg * kh * kw, 0.5);
    snprintf(dims, sizeof dims, "%lld", (long long)m);
    if (bias) tu_text_const(&t, r, "b", dims, m, 0.5);
    tu_text_put(&t, "  const %%lo: f32[] = [-0.2]\n  const %%hi: f32[] = [0.3]\n");
    char out[128];
    snprintf(out, sizeof out, "f32[%lld, %lld, %lld, %lld]", (long long)nb, (long long)m, (long long)oh, (long long)ow);
    tu_text_put(&t, "  %%c = Conv(%%x, %%w%s) {kernel_shape = [%lld, %lld], group = %lld, strides = [%lld, %lld], "
            "dilations = [%lld, %lld], pads = [%lld, %lld, %lld, %lld]} : %s\n",
        bias ? ", %b" : "", (long long)kh, (long long)kw, (long long)groups, (long long)sh, (long long)sw, (long long)dh,
        (long long)dw, (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3], out);
    const char *last = "%c";
    if (epi == 1) tu_text_put(&t, "  %%e = Relu(%%c) : %s\n", out), last = "%e";
    if (epi == 2) tu_text_put(&t, "  %%e = Clip(%%c, %%lo, %%hi) : %s\n", out), last = "%e";
    if (epi == 3) tu_text_put(&t, "  %%e = Clip(%%c, %%lo, %%hi) : %s\n  %%f = Add(%%e, %%res) : %s\n", out, out), last = "%f";
    if (epi == 4) tu_text_put(&t, "  %%e = Sigmoid(%%c) : %s\n", out), last = "%e";
    tu_text_put(&t, "  %%y = Add(%s, %%res) : %s\n  return %%y\n}\n", last, out);
    return t.s;
}

Test(cpu_conv_direct, depthwise_random_geometries) {
    TuRng r;
    tu_rng_seed(&r, 30);
    int done = 0;
    for (int i = 0; i < 400 && done < 36; i++) {
        char *text = random_case(&r);
        if (!text) continue;
        check(text, done % 4 == 3 ? 3 : 1, true);
        free(text);
        done++;
    }
    cr_expect_geq(done, 36);
}

/* MobileNetV2's shapes: 3x3 depthwise at stride 1 and 2 with pads 1 and ReLU6 (Clip 0..6), a
 * wide plane (40 columns: several interior vectors), a 2x2 plane (narrow vectors), batch 2. */
Test(cpu_conv_direct, depthwise_mobilenet_blocks) {
    static const int64_t shapes[][4] = {{32, 40, 40, 1}, {48, 28, 28, 2}, {144, 14, 14, 2}, {960, 2, 2, 1}, {24, 7, 9, 2}};
    TuRng r;
    tu_rng_seed(&r, 62);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t c = shapes[i][0], h = shapes[i][1], w = shapes[i][2], s = shapes[i][3];
        int64_t oh = (h - 1) / s + 1, ow = (w - 1) / s + 1;
        TuText t = {0};
        tu_text_put(&t, "graph @mb(%%x: f32[2, %lld, %lld, %lld]) {\n", (long long)c, (long long)h, (long long)w);
        char dims[128];
        snprintf(dims, sizeof dims, "%lld, 1, 3, 3", (long long)c);
        tu_text_const(&t, &r, "w", dims, c * 9, 0.5);
        snprintf(dims, sizeof dims, "%lld", (long long)c);
        tu_text_const(&t, &r, "b", dims, c, 0.5);
        tu_text_put(&t, "  const %%lo: f32[] = [0.0]\n  const %%hi: f32[] = [6.0]\n"
                "  %%c = Conv(%%x, %%w, %%b) {kernel_shape = [3, 3], group = %lld, strides = [%lld, %lld], pads = [1, 1, 1, 1]}"
                " : f32[2, %lld, %lld, %lld]\n"
                "  %%y = Clip(%%c, %%lo, %%hi) : f32[2, %lld, %lld, %lld]\n  return %%y\n}\n",
            (long long)c, (long long)s, (long long)s, (long long)c, (long long)oh, (long long)ow, (long long)c, (long long)oh,
            (long long)ow);
        check(t.s, i % 2 ? 2 : 1, true);
        free(t.s);
    }
}

/* A 1x1 Conv of m output channels on s[0] x s[1] pixels whose shape the generated kernel takes
 * (where the host is AVX2), the rest random. */
static char *pointwise_case(TuRng *r, const int64_t *s, int64_t m) {
    int64_t nb = 1 + (int64_t)tu_rng_below(r, 2);
    int64_t k = s[0] * s[1] > 256 ? 1 + (int64_t)tu_rng_below(r, 32) : 1 + (int64_t)tu_rng_below(r, 70);
    bool bias = tu_rng_below(r, 2);
    int epi = (int)tu_rng_below(r, 4);
    cr_assert(llvm_pointwise_fits(m, s[0] * s[1], k, 256), "a shape the kernel takes: %lld %lld %lld", (long long)m,
              (long long)(s[0] * s[1]), (long long)k);
    TuText t = {0};
    char out[128], dims[128];
    snprintf(out, sizeof out, "f32[%lld, %lld, %lld, %lld]", (long long)nb, (long long)m, (long long)s[0], (long long)s[1]);
    tu_text_put(&t, "graph @pw(%%x: f32[%lld, %lld, %lld, %lld], %%res: %s) {\n", (long long)nb, (long long)k, (long long)s[0],
        (long long)s[1], out);
    snprintf(dims, sizeof dims, "%lld, %lld, 1, 1", (long long)m, (long long)k);
    tu_text_const(&t, r, "w", dims, m * k, 0.5);
    snprintf(dims, sizeof dims, "%lld", (long long)m);
    if (bias) tu_text_const(&t, r, "b", dims, m, 0.5);
    tu_text_put(&t, "  const %%lo: f32[] = [-0.2]\n  const %%hi: f32[] = [0.3]\n");
    tu_text_put(&t, "  %%c = Conv(%%x, %%w%s) {kernel_shape = [1, 1]} : %s\n", bias ? ", %b" : "", out);
    const char *last = "%c";
    if (epi == 1) tu_text_put(&t, "  %%e = Clip(%%c, %%lo, %%hi) : %s\n", out), last = "%e";
    if (epi == 2) tu_text_put(&t, "  %%e = Add(%%res, %%c) : %s\n  %%f = Relu(%%e) : %s\n", out, out), last = "%f";
    if (epi == 3) tu_text_put(&t, "  %%e = Sigmoid(%%c) : %s\n", out), last = "%e";
    tu_text_put(&t, "  %%y = Mul(%s, %%res) : %s\n  return %%y\n}\n", last, out);
    return t.s;
}

/* One random 1x1 Conv whose shape the generated kernel takes. */
static char *random_pointwise(TuRng *r) {
    static const int64_t hw[][2] = {{1, 1}, {1, 3}, {2, 2}, {3, 3}, {1, 8}, {3, 5}, {4, 4}, {2, 9}, {5, 5}, {4, 6}, {7, 7}, {13, 13}, {20, 20}};
    const int64_t *s = hw[tu_rng_below(r, sizeof hw / sizeof hw[0])];
    return pointwise_case(r, s, 1 + (int64_t)tu_rng_below(r, 40));
}

/* At 1-4 pixels the tile holds rows in lanes (blocks of 24 or 32 rows): channel counts below,
 * at and across several blocks, in parts on three threads too. */
Test(cpu_conv_direct, pointwise_few_pixels) {
    static const int64_t hw[][2] = {{1, 1}, {1, 2}, {1, 3}, {2, 2}};
    static const int64_t ms[] = {5, 24, 32, 57, 100};
    TuRng r;
    tu_rng_seed(&r, 47);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) {
            char *text = pointwise_case(&r, hw[i], ms[j]);
            check(text, (i + j) % 2 ? 3 : 1, false);
            free(text);
        }
}

Test(cpu_conv_direct, pointwise_random_shapes) {
    TuRng r;
    tu_rng_seed(&r, 31);
    for (int i = 0; i < 28; i++) {
        char *text = random_pointwise(&r);
        check(text, i % 4 == 3 ? 3 : 1, false);
        free(text);
    }
}
