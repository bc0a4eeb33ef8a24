/* The decode step of a causal LM on the CPU backend (issue 30): one new token's projections, its
 * key and value appended to a KV cache given as inputs (Concat on the past-length axis, the
 * present cache returned), attention of its one query row over the past, the output projection
 * and the residual. Compiled at past lengths 1, 7 and 31, head sizes 16 and 12, on one thread and
 * on three, it matches the reference interpreter; the attention with the Transpose making K^T is
 * one fused kernel (fuse's attention-kt). Small Convs and larger ones at three threads check the
 * part rule's whole-kernel and split paths against the interpreter. */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 4

static double uniform(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*x >> 40) / (double)(1ull << 24);
}

/* `  const %NAME: f32[DIMS] = [v, ...]` of n values in [-0.5, 0.5), appended to buf at *len. */
static void const_line(char *buf, size_t cap, size_t *len, const char *name, const char *dims, int64_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    *len += (size_t)snprintf(buf + *len, cap - *len, "  const %%%s: f32[%s] = [", name, dims);
    for (int64_t i = 0; i < n; i++)
        *len += (size_t)snprintf(buf + *len, cap - *len, "%s%.6f", i ? ", " : "", uniform(&x) - 0.5);
    *len += (size_t)snprintf(buf + *len, cap - *len, "]\n");
    cr_assert_lt(*len, cap);
}

/* One decoder layer's attention half at one new position, 2 heads of hd (d_model 2 hd), the cache
 * of past length p: the graph the PyTorch export of bench/export_models.py's DecodeStep makes. */
static char *decode_text(int64_t p, int hd) {
    size_t cap = 1 << 17, len = 0;
    char *t = malloc(cap), dims[32];
    cr_assert(t);
    int dm = 2 * hd;
    long long p0 = (long long)p, p1 = (long long)p + 1;
    len += (size_t)snprintf(t + len, cap - len,
                            "graph @decode(%%x: f32[1, 1, %d], %%pk: f32[1, 2, %lld, %d], %%pv: f32[1, 2, %lld, %d]) {\n", dm,
                            p0, hd, p0, hd);
    snprintf(dims, sizeof dims, "%d, %d", dm, 3 * dm);
    const_line(t, cap, &len, "wqkv", dims, (int64_t)dm * 3 * dm, 1);
    snprintf(dims, sizeof dims, "%d", 3 * dm);
    const_line(t, cap, &len, "bqkv", dims, 3 * dm, 2);
    snprintf(dims, sizeof dims, "%d, %d", dm, dm);
    const_line(t, cap, &len, "wo", dims, (int64_t)dm * dm, 3);
    len += (size_t)snprintf(
        t + len, cap - len,
        "  const %%split: i64[3] = [%d, %d, %d]\n"
        "  const %%heads: i64[4] = [1, 1, 2, %d]\n"
        "  const %%flat: i64[3] = [1, 1, %d]\n"
        "  const %%scale: f32[] = [0.25]\n"
        "  %%mm = MatMul(%%x, %%wqkv) : f32[1, 1, %d]\n"
        "  %%qkv = Add(%%mm, %%bqkv) : f32[1, 1, %d]\n"
        "  %%q, %%k, %%v = Split(%%qkv, %%split) {axis = 2} : f32[1, 1, %d], f32[1, 1, %d], f32[1, 1, %d]\n",
        dm, dm, dm, hd, dm, 3 * dm, 3 * dm, dm, dm, dm);
    const char *qkv[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        len += (size_t)snprintf(t + len, cap - len,
                                "  %%%s4 = Reshape(%%%s, %%heads) : f32[1, 1, 2, %d]\n"
                                "  %%%sh = Transpose(%%%s4) {perm = [0, 2, 1, 3]} : f32[1, 2, 1, %d]\n",
                                qkv[i], qkv[i], hd, qkv[i], qkv[i], hd);
    len += (size_t)snprintf(t + len, cap - len,
                            "  %%kc = Concat(%%pk, %%kh) {axis = 2} : f32[1, 2, %lld, %d]\n"
                            "  %%vc = Concat(%%pv, %%vh) {axis = 2} : f32[1, 2, %lld, %d]\n"
                            "  %%kt = Transpose(%%kc) {perm = [0, 1, 3, 2]} : f32[1, 2, %d, %lld]\n"
                            "  %%s = MatMul(%%qh, %%kt) : f32[1, 2, 1, %lld]\n"
                            "  %%ss = Mul(%%s, %%scale) : f32[1, 2, 1, %lld]\n"
                            "  %%pr = Softmax(%%ss) {axis = -1} : f32[1, 2, 1, %lld]\n"
                            "  %%o = MatMul(%%pr, %%vc) : f32[1, 2, 1, %d]\n"
                            "  %%ot = Transpose(%%o) {perm = [0, 2, 1, 3]} : f32[1, 1, 2, %d]\n"
                            "  %%o3 = Reshape(%%ot, %%flat) : f32[1, 1, %d]\n"
                            "  %%proj = MatMul(%%o3, %%wo) : f32[1, 1, %d]\n"
                            "  %%y = Add(%%x, %%proj) : f32[1, 1, %d]\n"
                            "  return %%y, %%kc, %%vc\n"
                            "}\n",
                            p1, hd, p1, hd, hd, p1, p1, p1, p1, hd, hd, dm, dm, dm);
    cr_assert_lt(len, cap);
    return t;
}

/* Interpreter on the graph as written against the backend after its own fusion, within rtol
 * 1e-4 and atol 1e-5; returns the number of fused attention kernels. */
static uint32_t check(const char *text) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "decode.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    uint32_t n_in = ir_graph_num_inputs(g), n_out = ir_graph_num_outputs(g);
    cr_assert(n_in <= MAX_IO && n_out <= MAX_IO);
    IrTensor ins[MAX_IO] = {{0}}, ref[MAX_IO] = {{0}}, out[MAX_IO] = {{0}};
    for (uint32_t i = 0; i < n_in; i++) {
        IrTypeId ty = ir_value_type(g, ir_graph_input(g, i));
        int64_t dims[IR_MAX_RANK];
        for (uint32_t k = 0; k < ir_type_rank(g, ty); k++) cr_assert(ir_expr_is_const(g, ir_type_dims(g, ty)[k], &dims[k]));
        cr_assert_eq(ir_tensor_alloc(&ins[i], ir_type_dtype(g, ty), ir_type_rank(g, ty), dims), IR_OK);
        tu_fill_pm1(&ins[i], i + 11);
    }
    cr_assert_eq(ir_interp_run(g, ins, n_in, ref, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_specialize_inputs(g, ins, n_in, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    uint32_t attention = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n))
        attention += ir_node_op(g, n) == IR_OP_FUSED && llvm_fused_attention_group(g, n);
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_run(p, ins, n_in, out, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (uint32_t i = 0; i < n_out; i++) {
        cr_assert_eq(ir_tensor_numel(&out[i]), ir_tensor_numel(&ref[i]));
        int64_t bad = 0;
        double worst = 0;
        for (int64_t e = 0; e < ir_tensor_numel(&ref[i]); e++) {
            double a = ir_elem_get_f64(out[i].dtype, out[i].data, (size_t)e);
            double b = ir_elem_get_f64(ref[i].dtype, ref[i].data, (size_t)e);
            if (!(fabs(a - b) <= fabs(worst))) worst = a - b;
            if (!(fabs(a - b) <= 1e-5 + 1e-4 * fabs(b))) bad++;
        }
        cr_expect_eq(bad, 0, "output %u: %lld of %lld elements differ (worst %g)", i, (long long)bad,
                     (long long)ir_tensor_numel(&ref[i]), worst);
    }
    llvm_program_destroy(p);
    for (uint32_t i = 0; i < MAX_IO; i++) {
        ir_tensor_free(&ins[i]);
        ir_tensor_free(&ref[i]);
        ir_tensor_free(&out[i]);
    }
    ir_graph_destroy(g);
    tu_diag_free(&d);
    return attention;
}

Test(cpu_decode, decode_step_matches_interpreter) {
    const int64_t past[] = {1, 7, 31};
    const int hd[] = {16, 12}; /* head sizes a multiple of 8 (vector dot products) and not */
    for (int threads = 1; threads <= 3; threads += 2) {
        irt_set_threads(threads);
        for (size_t i = 0; i < sizeof past / sizeof *past; i++)
            for (size_t h = 0; h < sizeof hd / sizeof *hd; h++) {
                char *t = decode_text(past[i], hd[h]);
                cr_expect_eq(check(t), 1, "past %lld, head %d, %d threads: the attention is not one fused kernel",
                             (long long)past[i], hd[h], threads);
                free(t);
            }
    }
}

/* fuse's attention-kt takes the Transpose making K^T into the attention group; without it (and
 * in `all`) the Transpose stays outside. */
Test(cpu_decode, attention_kt_takes_the_transpose) {
    char *t = decode_text(7, 16);
    const char *pipes[2] = {"fuse{kinds=attention}", "fuse{kinds=attention+attention-kt}"};
    for (int i = 0; i < 2; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_parse(t, "decode.ir", &d);
        cr_assert(g, "%s", tu_diag_text(&d));
        int64_t groups = 0;
        cr_assert_eq(tu_run_pipeline(g, pipes[i], &d, "groups-attention", &groups), IR_OK, "%s", tu_diag_text(&d));
        cr_expect_eq(groups, 1, "%s: %lld attention groups", pipes[i], (long long)groups);
        uint32_t top = 0; /* Transposes left at the top level */
        for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) top += ir_node_op(g, n) == IR_OP_TRANSPOSE;
        cr_expect_eq(top, i ? 4u : 5u, "%s: %u Transposes outside the groups", pipes[i], top);
        cr_expect_eq(tu_count_op(g, IR_OP_TRANSPOSE), 5u);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
    free(t);
}

/* Convs below the part rule's size (run whole) and above it (in parts) at three threads: a
 * depthwise 3x3 and a 1x1 on 2x2 and 32x32 planes, with their Relu. */
Test(cpu_decode, part_rule_small_and_large_convs) {
    irt_set_threads(3);
    const int hw[] = {2, 32};
    for (size_t i = 0; i < sizeof hw / sizeof *hw; i++) {
        for (int pointwise = 0; pointwise <= 1; pointwise++) {
            int c = 24, k = pointwise ? 1 : 3, pad = pointwise ? 0 : 1, oc = pointwise ? 48 : 24, group = pointwise ? 1 : 24;
            size_t cap = 1 << 16, len = 0;
            char *t = malloc(cap), dims[64];
            cr_assert(t);
            len += (size_t)snprintf(t + len, cap - len, "graph @conv(%%x: f32[1, %d, %d, %d]) {\n", c, hw[i], hw[i]);
            snprintf(dims, sizeof dims, "%d, %d, %d, %d", oc, c / group, k, k);
            const_line(t, cap, &len, "w", dims, (int64_t)oc * (c / group) * k * k, 5);
            snprintf(dims, sizeof dims, "%d", oc);
            const_line(t, cap, &len, "b", dims, oc, 6);
            len += (size_t)snprintf(t + len, cap - len,
                                    "  %%y = Conv(%%x, %%w, %%b) {group = %d, kernel_shape = [%d, %d], pads = [%d, %d, %d, %d]} : "
                                    "f32[1, %d, %d, %d]\n"
                                    "  %%r = Relu(%%y) : f32[1, %d, %d, %d]\n  return %%r\n}\n",
                                    group, k, k, pad, pad, pad, pad, oc, hw[i], hw[i], oc, hw[i], hw[i]);
            cr_assert_lt(len, cap);
            check(t);
            free(t);
        }
    }
}

/* BLAS GEMMs on either side of the runtime's one-thread size (BLAS_PAR_MIN) at three threads,
 * one after another in one run, so OpenBLAS's thread count changes between them: 32 x 128 x 512
 * (one thread) then 160 x 512 x 256 (the setting: 21M). */
Test(cpu_decode, blas_thread_count_by_size) {
    irt_set_threads(3);
    size_t cap = 1 << 22, len = 0;
    char *t = malloc(cap);
    cr_assert(t);
    len += (size_t)snprintf(t + len, cap - len, "graph @gemms(%%x: f32[32, 128], %%z: f32[160, 512]) {\n");
    const_line(t, cap, &len, "w1", "128, 512", 128 * 512, 8);
    const_line(t, cap, &len, "w2", "512, 256", 512 * 256, 9);
    len += (size_t)snprintf(t + len, cap - len,
                            "  %%a = MatMul(%%x, %%w1) : f32[32, 512]\n"
                            "  %%b = MatMul(%%z, %%w2) : f32[160, 256]\n"
                            "  %%c = MatMul(%%a, %%w2) : f32[32, 256]\n"
                            "  return %%b, %%c\n}\n");
    cr_assert_lt(len, cap);
    check(t);
    free(t);
}
