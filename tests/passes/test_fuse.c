/* The fuse pass: group shapes (epilogue, elementwise chain, attention, LayerNorm, GELU), the
 * rules (no duplication, convexity, max-size, kinds), BatchNorm folding, names and stats, text
 * and binary round trips of fused graphs, `irtool info --json`, and preservation of results
 * through the reference interpreter on every corpus model and the shared ONNX models (when
 * IRTOOL_SHARED_DIR is set): outputs equal within 1e-5 relative.
 */
#include "passes/passes.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- helpers -------------------------------------------------------------------------------- */







static void fuse_ok(IrGraph *g, const char *pipeline) {
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = tu_run_pipeline(g, pipeline, &d, NULL, NULL);
    char *text = s ? tu_print(g) : NULL;
    cr_assert_eq(s, IR_OK, "%s failed: %s\n%s", pipeline, tu_diag_text(&d), text ? text : "");
    free(text);
    tu_diag_free(&d);
}

static IrGraph *parse_ok(const char *text) { return tu_parse_ok(text, "test.ir"); }

static void verify_ok(IrGraph *g) {
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = ir_verify(g, &d.diag);
    char *text = s ? tu_print(g) : NULL;
    cr_assert_eq(s, IR_OK, "verify failed: %s\n%s", tu_diag_text(&d), text ? text : "");
    free(text);
    tu_diag_free(&d);
}


/* Nodes of op in the top-level region only. */
static uint32_t count_top(const IrGraph *g, IrOp op) {
    uint32_t n = 0;
    for (IrNodeId m = ir_region_first(g, IR_ROOT_REGION); m; m = ir_node_next(g, m)) n += ir_node_op(g, m) == op;
    return n;
}

/* The i-th fused node in program order (pre-order), or 0. */
static IrNodeId nth_fused(const IrGraph *g, uint32_t i) {
    for (IrNodeId m = ir_graph_walk_next(g, 0); m; m = ir_graph_walk_next(g, m))
        if (ir_node_op(g, m) == IR_OP_FUSED && i-- == 0) return m;
    return 0;
}

static const char *fused_kind(const IrGraph *g, IrNodeId n) {
    bool found;
    return ir_node_attr_string(g, n, "kind", &found);
}

static uint32_t body_size(const IrGraph *g, IrNodeId n) {
    uint32_t k = 0;
    for (IrNodeId m = ir_region_first(g, ir_node_region_at(g, n, 0)); m; m = ir_node_next(g, m)) k++;
    return k;
}

/* The fused node whose body holds the node named `name` (0 = none). */
static IrNodeId group_of(const IrGraph *g, const char *name) {
    for (IrNodeId m = ir_graph_walk_next(g, 0); m; m = ir_graph_walk_next(g, m)) {
        if (strcmp(ir_node_name(g, m), name) != 0) continue;
        IrNodeId p = ir_region_parent(g, ir_node_region(g, m));
        return p && ir_node_op(g, p) == IR_OP_FUSED ? p : 0;
    }
    return 0;
}

static bool body_has(const IrGraph *g, IrNodeId f, IrOp op) {
    for (IrNodeId m = ir_region_first(g, ir_node_region_at(g, f, 0)); m; m = ir_node_next(g, m))
        if (ir_node_op(g, m) == op) return true;
    return false;
}

/* Runs `pipeline` on g and checks the outputs against the unfused run (the caller's graph is
 * transformed). Returns false when the interpreter cannot run the model. */
static bool check_same_outputs(IrGraph *g, const TuTensors *given, const char *pipeline, const char *label) {
    TuDiag d;
    tu_diag_init(&d);
    TuTensors in = {0}, before = {0}, after = {0};
    bool own = !given;
    if (own && !tu_make_inputs(g, 7, 3, &in)) {
        cr_log_warn("%s: cannot make inputs", label);
        fuse_ok(g, pipeline);
        verify_ok(g);
        tu_tensors_free(&in);
        tu_diag_free(&d);
        return false;
    }
    if (!own) in = *given;
    IrStatus s = tu_interp(g, &in, &before, &d);
    fuse_ok(g, pipeline);
    verify_ok(g);
    bool compared = false;
    if (s == IR_OK) {
        TuDiag ad;
        tu_diag_init(&ad);
        s = tu_interp(g, &in, &after, &ad);
        char *text = s ? tu_print(g) : NULL;
        cr_assert_eq(s, IR_OK, "%s: interpreter fails after %s: %s\n%.4000s", label, pipeline, tu_diag_text(&ad),
                     text ? text : "");
        free(text);
        tu_diag_free(&ad);
        char why[256];
        cr_assert(tu_outputs_close(&before, &after, 1e-5, why, sizeof why), "%s: %s changes results: %s", label, pipeline, why);
        compared = true;
    } else {
        cr_log_info("%s: the interpreter cannot run it: %s", label, tu_diag_text(&d));
    }
    tu_tensors_free(&before);
    tu_tensors_free(&after);
    if (own) tu_tensors_free(&in);
    tu_diag_free(&d);
    return compared;
}

/* ---- epilogues and BatchNorm --------------------------------------------------------------- */

static const char conv_relu_ir[] =
    "graph @g(%x: f32[1, 2, 5, 5]) {\n"
    "  const %w: f32[3, 2, 1, 1] = [0.5, -1.0, 0.25, 2.0, -0.75, 1.5]\n"
    "  const %b: f32[3] = [0.1, -0.2, 0.3]\n"
    "  %c = Conv(%x, %w, %b) {kernel_shape = [1, 1]} : f32[1, 3, 5, 5] name(\"conv1\")\n"
    "  %r = Relu(%c) : f32[1, 3, 5, 5] name(\"relu1\")\n"
    "  return %r\n"
    "}\n";

Test(fuse, conv_relu_is_one_epilogue_group) {
    IrGraph *g = parse_ok(conv_relu_ir);
    TuDiag d;
    tu_diag_init(&d);
    int64_t saved = 0;
    cr_assert_eq(tu_run_pipeline(g, "fuse", &d, "intermediate-bytes-saved", &saved), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    verify_ok(g);
    cr_assert_eq(count_top(g, IR_OP_FUSED), 1);
    cr_assert_eq(count_top(g, IR_OP_RELU), 0, "the Relu moved into the group");
    cr_assert_eq(count_top(g, IR_OP_CONV), 0);
    IrNodeId f = nth_fused(g, 0);
    cr_assert_str_eq(fused_kind(g, f), "epilogue");
    cr_assert_str_eq(ir_node_name(g, f), "fused_conv1");
    cr_assert(body_has(g, f, IR_OP_CONV) && body_has(g, f, IR_OP_RELU));
    cr_assert_eq(ir_node_num_operands(g, f), 3, "x, w and b are operands (weights included)");
    cr_assert_eq(ir_node_num_provenance(g, f), 2);
    cr_assert_str_eq(ir_str(g, ir_node_provenance(g, f, 0)), "conv1");
    cr_assert_str_eq(ir_str(g, ir_node_provenance(g, f, 1)), "relu1");
    /* the graph output keeps its name; the inner value is renamed */
    cr_assert_str_eq(ir_value_name(g, ir_graph_output(g, 0)), "r");
    cr_assert_eq(ir_value_def_node(g, ir_graph_output(g, 0)), f);
    cr_assert_neq(ir_value_find(g, "r.inner", 7), 0);
    cr_assert_eq(saved, 3 * 25 * 4, "the Conv result never goes to memory");
    /* the body refers only to its arguments */
    IrRegionId body = ir_node_region_at(g, f, 0);
    for (IrNodeId m = ir_region_first(g, body); m; m = ir_node_next(g, m))
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            bool inside = ir_value_kind(g, v) == IR_VALUE_ARG ? ir_value_def_region(g, v) == body
                                                              : ir_node_region(g, ir_value_def_node(g, v)) == body;
            cr_assert(inside, "operand %s comes from outside the body", ir_value_name(g, v));
        }
    ir_graph_destroy(g);
}

Test(fuse, epilogue_bias_activation_residual) {
    IrGraph *g = parse_ok("graph @g(%x: f32[4, 8], %skip: f32[4, 6]) {\n"
                          "  const %w: f32[8, 6] = base64 \"" /* 48 floats of 0.125 */
                          "AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+"
                          "AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+"
                          "AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+AAAAPgAAAD4AAAA+\"\n"
                          "  const %b: f32[6] = [0.1, 0.2, 0.3, -0.1, -0.2, -0.3]\n"
                          "  %m = MatMul(%x, %w) : f32[4, 6] name(\"fc\")\n"
                          "  %a = Add(%b, %m) : f32[4, 6] name(\"bias\")\n"
                          "  %s = Sigmoid(%a) : f32[4, 6] name(\"act\")\n"
                          "  %r = Add(%s, %skip) : f32[4, 6] name(\"residual\")\n"
                          "  %y = Softmax(%r) : f32[4, 6] name(\"sm\")\n"
                          "  return %y\n"
                          "}\n");
    check_same_outputs(g, NULL, "fuse{kinds=epilogue}", "epilogue");
    cr_assert_eq(count_top(g, IR_OP_FUSED), 1);
    IrNodeId f = nth_fused(g, 0);
    cr_assert_str_eq(fused_kind(g, f), "epilogue");
    cr_assert_eq(body_size(g, f), 4);
    cr_assert_eq(count_top(g, IR_OP_SOFTMAX), 1, "Softmax is not an epilogue");
    ir_graph_destroy(g);
}

static void check_bn_fold(const char *text, const char *label) {
    IrGraph *g = parse_ok(text);
    uint32_t convs = tu_count_op(g, IR_OP_CONV);
    TuDiag d;
    tu_diag_init(&d);
    TuTensors in = {0}, before = {0}, after = {0};
    cr_assert(tu_make_inputs(g, 3, 3, &in));
    IrStatus s = tu_interp(g, &in, &before, &d);
    int64_t folded = 0;
    cr_assert_eq(tu_run_pipeline(g, "fuse{kinds=bn}", &d, "bn-folded", &folded), IR_OK, "%s", tu_diag_text(&d));
    verify_ok(g);
    cr_assert_eq(folded, 1, "%s", label);
    cr_assert_eq(tu_count_op(g, IR_OP_BATCH_NORMALIZATION), 0, "%s: BatchNormalization is gone", label);
    cr_assert_eq(tu_count_op(g, IR_OP_CONV), convs);
    cr_assert_eq(tu_count_op(g, IR_OP_FUSED), 0, "bn folding is a rewrite, not a group");
    if (s == IR_EUNSUPPORTED) {
        tu_tensors_free(&in), tu_tensors_free(&before);
        tu_diag_free(&d);
        ir_graph_destroy(g);
        cr_skip_test("the interpreter cannot run Conv/BatchNormalization yet");
    }
    cr_assert_eq(s, IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_interp(g, &in, &after, &d), IR_OK, "%s", tu_diag_text(&d));
    char why[256];
    cr_assert(tu_outputs_close(&before, &after, 1e-5, why, sizeof why), "%s: %s", label, why);
    tu_tensors_free(&in), tu_tensors_free(&before), tu_tensors_free(&after);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

Test(fuse, conv_batchnorm_folded_corpus) {
    size_t len;
    char *text = tu_corpus_read("conv_block.ir", &len);
    cr_assert_not_null(text);
    check_bn_fold(text, "conv_block.ir");
    free(text);
}

Test(fuse, conv_batchnorm_folded_without_bias) {
    check_bn_fold("graph @g(%x: f32[1, 2, 4, 4]) {\n"
                  "  const %w: f32[3, 2, 1, 1] = [0.5, -1.0, 0.25, 2.0, -0.75, 1.5]\n"
                  "  const %s: f32[3] = [1.5, -0.5, 0.25]\n"
                  "  const %b: f32[3] = [0.1, 0.2, -0.3]\n"
                  "  const %m: f32[3] = [0.05, -0.1, 0.2]\n"
                  "  const %v: f32[3] = [0.5, 2.0, 1.0]\n"
                  "  %c = Conv(%x, %w) {kernel_shape = [1, 1]} : f32[1, 3, 4, 4] name(\"conv\")\n"
                  "  %y = BatchNormalization(%c, %s, %b, %m, %v) {epsilon = 0.001} : f32[1, 3, 4, 4] name(\"bn\")\n"
                  "  return %y\n"
                  "}\n",
                  "no bias");
}

Test(fuse, conv_batchnorm_then_group_keeps_output_name) {
    IrGraph *g = parse_ok("graph @g(%x: f32[1, 2, 4, 4]) {\n"
                          "  const %w: f32[3, 2, 1, 1] = [0.5, -1.0, 0.25, 2.0, -0.75, 1.5]\n"
                          "  const %s: f32[3] = [1.5, -0.5, 0.25]\n"
                          "  const %b: f32[3] = [0.1, 0.2, -0.3]\n"
                          "  const %m: f32[3] = [0.05, -0.1, 0.2]\n"
                          "  const %v: f32[3] = [0.5, 2.0, 1.0]\n"
                          "  %c = Conv(%x, %w) {kernel_shape = [1, 1]} : f32[1, 3, 4, 4] name(\"conv\")\n"
                          "  %y = BatchNormalization(%c, %s, %b, %m, %v) : f32[1, 3, 4, 4] name(\"bn\")\n"
                          "  return %y\n"
                          "}\n");
    fuse_ok(g, "fuse");
    verify_ok(g);
    cr_assert_str_eq(ir_value_name(g, ir_graph_output(g, 0)), "y");
    cr_assert_eq(ir_node_op(g, ir_value_def_node(g, ir_graph_output(g, 0))), IR_OP_CONV);
    cr_assert_eq(ir_graph_num_const_values(g), 2, "the old weight and BN parameters are dropped, w' and b' added");
    ir_graph_destroy(g);
}

/* convsum: Add(Conv(x1), Conv(x2)) of one geometry -> Conv(Concat(x1, x2)); numbers kept. */
static int64_t check_convsum(const char *text, const char *label) {
    IrGraph *g = parse_ok(text);
    TuDiag d;
    tu_diag_init(&d);
    TuTensors in = {0}, before = {0}, after = {0};
    cr_assert(tu_make_inputs(g, 3, 3, &in));
    cr_assert_eq(tu_interp(g, &in, &before, &d), IR_OK, "%s", tu_diag_text(&d));
    int64_t merged = 0;
    cr_assert_eq(tu_run_pipeline(g, "fuse{kinds=convsum}", &d, "convs-merged", &merged), IR_OK, "%s", tu_diag_text(&d));
    verify_ok(g);
    cr_assert_eq(tu_interp(g, &in, &after, &d), IR_OK, "%s", tu_diag_text(&d));
    char why[256];
    cr_assert(tu_outputs_close(&before, &after, 1e-5, why, sizeof why), "%s: %s", label, why);
    if (merged) {
        cr_assert_eq(tu_count_op(g, IR_OP_CONV), 1, "%s", label);
        cr_assert_eq(tu_count_op(g, IR_OP_CONCAT), 1, "%s", label);
        cr_assert_eq(tu_count_op(g, IR_OP_ADD) + tu_count_op(g, IR_OP_SUM), 0, "%s", label);
        cr_assert_str_eq(ir_value_name(g, ir_graph_output(g, 0)), "y", "%s: the Add's name stays", label);
    }
    tu_tensors_free(&in), tu_tensors_free(&before), tu_tensors_free(&after);
    tu_diag_free(&d);
    ir_graph_destroy(g);
    return merged;
}

Test(fuse, convsum_merges_two_convs_of_one_geometry) {
    /* 3x3 stride-2 Convs over 2 and 3 channels (one without bias, pads spelled out on one side
     * only as the default), as a Sum; and a 1x1 pair as an Add whose weights are ConstantOfShape */
    cr_assert_eq(check_convsum("graph @g(%a: f32[1, 2, 7, 6], %b: f32[1, 3, 7, 6]) {\n"
                               "  const %wa: f32[4, 2, 3, 3] = [-1, -0.625, -0.25, 0.125, 0.5, 0.875, -0.875, -0.5, -0.125, 0.25, 0.625, 1, -0.75, -0.375, 0, 0.375, 0.75, -1, -0.625, -0.25, 0.125, 0.5, 0.875, -0.875, -0.5, -0.125, 0.25, 0.625, 1, -0.75, -0.375, 0, 0.375, 0.75, -1, -0.625, -0.25, 0.125, 0.5, 0.875, -0.875, -0.5, -0.125, 0.25, 0.625, 1, -0.75, -0.375, 0, 0.375, 0.75, -1, -0.625, -0.25, 0.125, 0.5, 0.875, -0.875, -0.5, -0.125, 0.25, 0.625, 1, -0.75, -0.375, 0, 0.375, 0.75, -1, -0.625, -0.25, 0.125]\n"
                               "  const %wb: f32[4, 3, 3, 3] = [-1, 0.5, -0.125, -0.75, 0.75, 0.125, -0.5, 1, 0.375, -0.25, -0.875, 0.625, 0, -0.625, 0.875, 0.25, -0.375, -1, 0.5, -0.125, -0.75, 0.75, 0.125, -0.5, 1, 0.375, -0.25, -0.875, 0.625, 0, -0.625, 0.875, 0.25, -0.375, -1, 0.5, -0.125, -0.75, 0.75, 0.125, -0.5, 1, 0.375, -0.25, -0.875, 0.625, 0, -0.625, 0.875, 0.25, -0.375, -1, 0.5, -0.125, -0.75, 0.75, 0.125, -0.5, 1, 0.375, -0.25, -0.875, 0.625, 0, -0.625, 0.875, 0.25, -0.375, -1, 0.5, -0.125, -0.75, 0.75, 0.125, -0.5, 1, 0.375, -0.25, -0.875, 0.625, 0, -0.625, 0.875, 0.25, -0.375, -1, 0.5, -0.125, -0.75, 0.75, 0.125, -0.5, 1, 0.375, -0.25, -0.875, 0.625, 0, -0.625, 0.875, 0.25, -0.375, -1, 0.5, -0.125, -0.75, 0.75, 0.125]\n"
                               "  const %bb: f32[4] = [0.5, -0.25, 1.0, 0.0]\n"
                               "  %p = Conv(%a, %wa) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1, 4, 4, 3]\n"
                               "  %q = Conv(%b, %wb, %bb) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2], dilations = [1, 1]} : f32[1, 4, 4, 3]\n"
                               "  %y = Sum(%p, %q) : f32[1, 4, 4, 3]\n"
                               "  return %y\n"
                               "}\n",
                               "3x3 stride 2"),
                 1);
    cr_assert_eq(check_convsum("graph @g(%a: f32[1, 2, 5, 5], %b: f32[1, 3, 5, 5]) {\n"
                               "  const %sa: i64[4] = [4, 2, 1, 1]\n"
                               "  const %wb: f32[4, 3, 1, 1] = [0.5, -1.0, 0.25, 2.0, -0.75, 1.5, 1.0, 0.0, -2.0, 0.125, 0.5, -0.5]\n"
                               "  const %ba: f32[4] = [0.1, 0.2, -0.3, 0.4]\n"
                               "  %wa = ConstantOfShape(%sa) {value = f32[1] [0.75]} : f32[4, 2, 1, 1]\n"
                               "  %p = Conv(%a, %wa, %ba) {kernel_shape = [1, 1]} : f32[1, 4, 5, 5]\n"
                               "  %q = Conv(%b, %wb) {kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1, 4, 5, 5]\n"
                               "  %y = Add(%p, %q) : f32[1, 4, 5, 5]\n"
                               "  return %y\n"
                               "}\n",
                               "1x1, ConstantOfShape weight"),
                 1);
}

Test(fuse, convsum_leaves_other_sums) {
    static const char *const cases[][2] = {
        {"strides differ", "  %p = Conv(%a, %w) {kernel_shape = [1, 1], strides = [2, 2]} : f32[1, 2, 2, 2]\n"
                           "  %q = Conv(%c, %w) {kernel_shape = [1, 1]} : f32[1, 2, 2, 2]\n"
                           "  %y = Add(%p, %q) : f32[1, 2, 2, 2]\n  return %y\n"},
        {"a Conv used twice", "  %p = Conv(%c, %w) {kernel_shape = [1, 1]} : f32[1, 2, 2, 2]\n"
                              "  %q = Conv(%c, %w) {kernel_shape = [1, 1]} : f32[1, 2, 2, 2]\n"
                              "  %s = Add(%p, %q) : f32[1, 2, 2, 2]\n  %y = Mul(%s, %p) : f32[1, 2, 2, 2]\n  return %y\n"},
        {"groups", "  %p = Conv(%c, %w) {kernel_shape = [1, 1]} : f32[1, 2, 2, 2]\n"
                   "  %q = Conv(%c, %wg) {kernel_shape = [1, 1], group = 2} : f32[1, 2, 2, 2]\n"
                   "  %y = Add(%p, %q) : f32[1, 2, 2, 2]\n  return %y\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "graph @g(%%a: f32[1, 2, 4, 4], %%c: f32[1, 2, 2, 2]) {\n"
                 "  const %%w: f32[2, 2, 1, 1] = [0.5, -1.0, 0.25, 2.0]\n"
                 "  const %%wg: f32[2, 1, 1, 1] = [1.5, -0.5]\n%s}\n",
                 cases[i][1]);
        cr_expect_eq(check_convsum(text, cases[i][0]), 0, "%s: merged", cases[i][0]);
    }
}

/* ---- elementwise groups and the rules ---------------------------------------------------------- */

static const char chain5_ir[] = "graph @g(%x: f32[2, 3], %z: f32[3]) {\n"
                                "  %a = Abs(%x) : f32[2, 3] name(\"a\")\n"
                                "  %b = Add(%a, %z) : f32[2, 3] name(\"b\")\n"
                                "  %c = Neg(%b) : f32[2, 3] name(\"c\")\n"
                                "  %d = Exp(%c) : f32[2, 3] name(\"d\")\n"
                                "  %e = Mul(%d, %x) : f32[2, 3] name(\"e\")\n"
                                "  return %e\n"
                                "}\n";

Test(fuse, elementwise_chain_of_five) {
    IrGraph *g = parse_ok(chain5_ir);
    check_same_outputs(g, NULL, "fuse", "chain5");
    cr_assert_eq(count_top(g, IR_OP_FUSED), 1);
    cr_assert_eq(ir_graph_num_nodes(g), 6);
    IrNodeId f = nth_fused(g, 0);
    cr_assert_str_eq(fused_kind(g, f), "elementwise");
    cr_assert_eq(body_size(g, f), 5);
    cr_assert_eq(ir_node_num_operands(g, f), 2, "x (used twice) and z");
    cr_assert_str_eq(ir_node_name(g, f), "fused_e");
    ir_graph_destroy(g);
}

Test(fuse, max_size_respected) {
    for (uint32_t max = 1; max <= 5; max++) {
        IrGraph *g = parse_ok(chain5_ir);
        char p[64];
        snprintf(p, sizeof p, "fuse{max-size=%u}", max);
        check_same_outputs(g, NULL, p, p);
        uint32_t groups = 0;
        for (IrNodeId f; (f = nth_fused(g, groups)); groups++) cr_assert_leq(body_size(g, f), max, "%s", p);
        if (max == 1) cr_assert_eq(groups, 0);
        if (max == 5) cr_assert_eq(groups, 1);
        if (max > 1) cr_assert_eq(count_top(g, IR_OP_FUSED) + 0, groups);
        ir_graph_destroy(g);
    }
}

Test(fuse, producer_used_outside_is_not_duplicated) {
    IrGraph *g = parse_ok("graph @g(%x: f32[2, 4], %w: f32[4, 4]) {\n"
                          "  %a = Exp(%x) : f32[2, 4] name(\"a\")\n"
                          "  %b = Neg(%a) : f32[2, 4] name(\"b\")\n"
                          "  %m1 = MatMul(%a, %w) : f32[2, 4] name(\"m1\")\n"
                          "  %m2 = Transpose(%a) : f32[4, 2] name(\"m2\")\n"
                          "  return %b, %m1, %m2\n"
                          "}\n");
    check_same_outputs(g, NULL, "fuse{kinds=elementwise}", "shared producer");
    cr_assert_eq(tu_count_op(g, IR_OP_EXP), 1);
    cr_assert_eq(tu_count_op(g, IR_OP_NEG), 1);
    IrNodeId f = nth_fused(g, 0);
    cr_assert_neq(f, 0);
    cr_assert_eq(ir_node_num_results(g, f), 2, "a stays a result used outside");
    IrValueId a = ir_value_find(g, "a", 1);
    cr_assert_eq(ir_value_def_node(g, a), f, "the fused node's result took the name %%a");
    cr_assert_str_eq(ir_value_name(g, ir_graph_output(g, 0)), "b");
    ir_graph_destroy(g);
}

Test(fuse, convexity_through_an_outside_node) {
    /* A -> X (not fusible) -> B and A -> B: A and B in one group would need X inside */
    IrGraph *g = parse_ok("graph @g(%x: f32[2, 4]) {\n"
                          "  %a = Exp(%x) : f32[2, 4] name(\"A\")\n"
                          "  %t = Transpose(%a) {perm = [1, 0]} : f32[4, 2] name(\"X\")\n"
                          "  %u = Transpose(%t) {perm = [1, 0]} : f32[2, 4] name(\"X2\")\n"
                          "  %b = Add(%a, %u) : f32[2, 4] name(\"B\")\n"
                          "  %c = Neg(%b) : f32[2, 4] name(\"C\")\n"
                          "  return %c\n"
                          "}\n");
    check_same_outputs(g, NULL, "fuse", "convexity");
    IrNodeId ga = group_of(g, "A"), gb = group_of(g, "B");
    cr_assert(!ga || ga != gb, "A and B must not share a group");
    cr_assert_neq(gb, 0, "B still fuses with C");
    cr_assert_eq(group_of(g, "C"), gb);
    ir_graph_destroy(g);
}

Test(fuse, nodes_between_members_move_after_the_group) {
    /* P is placed between the members and uses A; the group sits at B's place, so P moves */
    IrGraph *g = parse_ok("graph @g(%x: f32[4]) {\n"
                          "  %a = Exp(%x) : f32[4] name(\"A\")\n"
                          "  %p = Transpose(%a) : f32[4] name(\"P\")\n"
                          "  %b = Neg(%a) : f32[4] name(\"B\")\n"
                          "  return %b, %p\n"
                          "}\n");
    check_same_outputs(g, NULL, "fuse", "reorder");
    cr_assert_eq(count_top(g, IR_OP_FUSED), 1);
    ir_graph_destroy(g);
}

Test(fuse, row_reduction_takes_elementwise_producers) {
    IrGraph *g = parse_ok("graph @g(%x: f32[2, 5], %y: f32[2, 5]) {\n"
                 "  const %ax: i64[1] = [-1]\n"
                 "  %a = Sub(%x, %y) : f32[2, 5] name(\"sub\")\n"
                 "  %b = Mul(%a, %a) : f32[2, 5] name(\"sq\")\n"
                 "  %s = ReduceSum(%b, %ax) : f32[2, 1] name(\"sum\")\n"
                 "  %c = Exp(%x) : f32[2, 5] name(\"e\")\n"
                 "  %m = ReduceMean(%c) {axes = [0]} : f32[1, 5] name(\"not_last\")\n"
                 "  return %s, %m\n"
                 "}\n");
    check_same_outputs(g, NULL, "fuse{kinds=reduction}", "reduction");
    IrNodeId f = group_of(g, "sum");
    cr_assert_neq(f, 0);
    cr_assert_str_eq(fused_kind(g, f), "reduction");
    cr_assert_eq(body_size(g, f), 3);
    cr_assert_eq(group_of(g, "not_last"), 0, "a reduction over another axis is not a row reduction");
    cr_assert_eq(group_of(g, "e"), 0, "kinds=reduction alone forms no elementwise groups");
    ir_graph_destroy(g);
}

Test(fuse, kinds_option) {
    IrGraph *g = parse_ok(conv_relu_ir);
    fuse_ok(g, "fuse{kinds=elementwise+reduction+bn}");
    cr_assert_eq(tu_count_op(g, IR_OP_FUSED), 0, "no epilogues asked for");
    ir_graph_destroy(g);
    g = parse_ok(conv_relu_ir);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_neq(tu_run_pipeline(g, "fuse{kinds=epilogue+bogus}", &d, NULL, NULL), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "bogus"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    tu_diag_init(&d);
    cr_assert_neq(tu_run_pipeline(g, "fuse{max-size=0}", &d, NULL, NULL), IR_OK);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

Test(fuse, nested_regions_fuse_within_their_region) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("control_flow.ir", &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    check_same_outputs(g, NULL, "fuse", "control_flow");
    IrNodeId f = group_of(g, "double");
    cr_assert_neq(f, 0);
    IrNodeId loop = ir_region_parent(g, ir_node_region(g, f));
    cr_assert_eq(ir_node_op(g, loop), IR_OP_LOOP, "the group stays inside the loop body");
    cr_assert_eq(group_of(g, "double_loop"), 0, "nodes with regions are never fused");
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

/* ---- patterns ----------------------------------------------------------------------------------- */

Test(fuse, attention_corpus_is_one_group) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("attention.ir", &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    check_same_outputs(g, NULL, "fuse", "attention.ir");
    IrNodeId f = group_of(g, "softmax");
    cr_assert_neq(f, 0);
    cr_assert_str_eq(fused_kind(g, f), "attention");
    const char *members[] = {"qk", "scale", "mask", "softmax", "attn_v"};
    for (size_t i = 0; i < 5; i++) cr_assert_eq(group_of(g, members[i]), f, "%s in the attention group", members[i]);
    cr_assert_eq(body_size(g, f), 5);
    cr_assert_eq(group_of(g, "residual"), group_of(g, "out_proj"), "residual Add is out_proj's epilogue");
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

static void check_gelu(const char *tail, uint32_t want_members) {
    char text[2048];
    snprintf(text, sizeof text,
             "graph @g(%%x: f32[2, 6]) {\n"
             "  const %%sq2: f32[] = [1.4142135381698608]\n"
             "  const %%one: f32[] = [1.0]\n"
             "  const %%half: f32[] = [0.5]\n"
             "  %%u = Div(%%x, %%sq2) : f32[2, 6] name(\"div\")\n"
             "  %%e = Erf(%%u) : f32[2, 6] name(\"erf\")\n"
             "  %%a = Add(%%one, %%e) : f32[2, 6] name(\"add\")\n"
             "%s"
             "}\n",
             tail);
    IrGraph *g = parse_ok(text);
    check_same_outputs(g, NULL, "fuse{kinds=gelu}", "gelu");
    IrNodeId f = group_of(g, "erf");
    cr_assert_neq(f, 0, "%s", text);
    cr_assert_str_eq(fused_kind(g, f), "gelu");
    cr_assert_eq(body_size(g, f), want_members, "%s", text);
    cr_assert_eq(count_top(g, IR_OP_FUSED), 1);
    cr_assert_eq(ir_graph_num_nodes(g) - body_size(g, f), 1);
    ir_graph_destroy(g);
}

Test(fuse, gelu_erf_in_any_order) {
    /* x * (1 + erf) * 0.5 */
    check_gelu("  %m = Mul(%x, %a) : f32[2, 6] name(\"m1\")\n"
               "  %y = Mul(%m, %half) : f32[2, 6] name(\"m2\")\n  return %y\n",
               5);
    /* (x * 0.5) * (1 + erf), torch's order */
    check_gelu("  %h = Mul(%x, %half) : f32[2, 6] name(\"h\")\n"
               "  %y = Mul(%h, %a) : f32[2, 6] name(\"m2\")\n  return %y\n",
               5);
    /* 0.5 * (a * x) */
    check_gelu("  %m = Mul(%a, %half) : f32[2, 6] name(\"m1\")\n"
               "  %y = Mul(%x, %m) : f32[2, 6] name(\"m2\")\n  return %y\n",
               5);
}

Test(fuse, gelu_erf_not_matched_when_constants_differ) {
    IrGraph *g = parse_ok("graph @g(%x: f32[2, 6]) {\n"
                          "  const %c: f32[] = [1.5]\n"
                          "  const %one: f32[] = [1.0]\n"
                          "  const %half: f32[] = [0.5]\n"
                          "  %u = Div(%x, %c) : f32[2, 6] name(\"div\")\n"
                          "  %e = Erf(%u) : f32[2, 6] name(\"erf\")\n"
                          "  %a = Add(%e, %one) : f32[2, 6] name(\"add\")\n"
                          "  %m = Mul(%x, %a) : f32[2, 6] name(\"m1\")\n"
                          "  %y = Mul(%m, %half) : f32[2, 6] name(\"m2\")\n"
                          "  return %y\n"
                          "}\n");
    fuse_ok(g, "fuse{kinds=gelu}");
    cr_assert_eq(tu_count_op(g, IR_OP_FUSED), 0);
    ir_graph_destroy(g);
}

Test(fuse, gelu_tanh_form) {
    IrGraph *g = parse_ok("graph @g(%x: f32[2, 6]) {\n"
                          "  const %three: f32[] = [3.0]\n"
                          "  const %k: f32[] = [0.044715]\n"
                          "  const %c: f32[] = [0.7978845608028654]\n"
                          "  const %one: f32[] = [1.0]\n"
                          "  const %half: f32[] = [0.5]\n"
                          "  %p = Pow(%x, %three) : f32[2, 6] name(\"pow\")\n"
                          "  %q = Mul(%k, %p) : f32[2, 6] name(\"q\")\n"
                          "  %r = Add(%x, %q) : f32[2, 6] name(\"r\")\n"
                          "  %s = Mul(%r, %c) : f32[2, 6] name(\"s\")\n"
                          "  %t = Tanh(%s) : f32[2, 6] name(\"tanh\")\n"
                          "  %a = Add(%t, %one) : f32[2, 6] name(\"a\")\n"
                          "  %h = Mul(%half, %x) : f32[2, 6] name(\"h\")\n"
                          "  %y = Mul(%h, %a) : f32[2, 6] name(\"y\")\n"
                          "  return %y\n"
                          "}\n");
    check_same_outputs(g, NULL, "fuse", "gelu tanh");
    IrNodeId f = group_of(g, "tanh");
    cr_assert_neq(f, 0);
    cr_assert_str_eq(fused_kind(g, f), "gelu");
    cr_assert_eq(body_size(g, f), 8);
    ir_graph_destroy(g);
}

Test(fuse, decomposed_layernorm) {
    IrGraph *g = parse_ok("graph @g(%x: f32[2, 3, 8]) {\n"
                          "  const %two: f32[] = [2.0]\n"
                          "  const %eps: f32[] = [1e-05]\n"
                          "  const %gamma: f32[8] = [1.0, 0.5, 2.0, -1.0, 1.5, 0.25, 1.0, 0.75]\n"
                          "  const %beta: f32[8] = [0.0, 0.1, 0.2, 0.3, -0.1, -0.2, -0.3, 0.05]\n"
                          "  %m = ReduceMean(%x) {axes = [-1]} : f32[2, 3, 1] name(\"mean\")\n"
                          "  %d = Sub(%x, %m) : f32[2, 3, 8] name(\"sub\")\n"
                          "  %p = Pow(%d, %two) : f32[2, 3, 8] name(\"pow\")\n"
                          "  %v = ReduceMean(%p) {axes = [-1]} : f32[2, 3, 1] name(\"var\")\n"
                          "  %ve = Add(%v, %eps) : f32[2, 3, 1] name(\"add_eps\")\n"
                          "  %s = Sqrt(%ve) : f32[2, 3, 1] name(\"sqrt\")\n"
                          "  %n = Div(%d, %s) : f32[2, 3, 8] name(\"div\")\n"
                          "  %gm = Mul(%n, %gamma) : f32[2, 3, 8] name(\"gamma\")\n"
                          "  %y = Add(%gm, %beta) : f32[2, 3, 8] name(\"beta\")\n"
                          "  return %y\n"
                          "}\n");
    check_same_outputs(g, NULL, "fuse", "layernorm");
    cr_assert_eq(count_top(g, IR_OP_FUSED), 1);
    IrNodeId f = nth_fused(g, 0);
    cr_assert_str_eq(fused_kind(g, f), "layernorm");
    cr_assert_eq(body_size(g, f), 9);
    cr_assert_str_eq(ir_node_name(g, f), "fused_mean");
    ir_graph_destroy(g);
}

/* ---- formats, CLI, corpus and shared models ----------------------------------------------------- */

static void check_round_trips(IrGraph *g, const char *label) {
    char *t1 = tu_print(g);
    cr_assert_not_null(t1);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g2 = tu_parse(t1, "fused.ir", &d);
    cr_assert_not_null(g2, "%s: the fused graph does not parse: %s\n%.3000s", label, tu_diag_text(&d), t1);
    cr_assert_eq(ir_verify(g2, &d.diag), IR_OK, "%s: %s", label, tu_diag_text(&d));
    char *t2 = tu_print(g2);
    cr_assert_str_eq(t1, t2, "%s: print, parse, print differs", label);
    char *dir = tu_mkdtemp();
    cr_assert_not_null(dir);
    char *path = tu_path_join(dir, "m.irb");
    cr_assert_eq(ir_write_binary(g, path, &d.diag), IR_OK, "%s: %s", label, tu_diag_text(&d));
    IrGraph *g3 = NULL;
    cr_assert_eq(ir_read_binary(path, &d.diag, &g3), IR_OK, "%s: %s", label, tu_diag_text(&d));
    char *t3 = tu_print(g3);
    cr_assert_str_eq(t1, t3, "%s: binary round trip differs", label);
    free(t1), free(t2), free(t3);
    ir_graph_destroy(g2);
    ir_graph_destroy(g3);
    tu_rmtree(dir);
    free(dir), free(path);
    tu_diag_free(&d);
}

Test(fuse, every_corpus_model_verifies_and_keeps_results) {
    size_t n = 0;
    char **names = tu_list_dir("corpus", ".ir", &n);
    cr_assert_not_null(names);
    cr_assert_gt(n, 0);
    int compared = 0, fused = 0;
    for (size_t i = 0; i < n; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_load_corpus(names[i], &d);
        cr_assert_not_null(g, "%s: %s", names[i], tu_diag_text(&d));
        compared += check_same_outputs(g, NULL, "fuse", names[i]);
        fused += tu_count_op(g, IR_OP_FUSED) > 0;
        check_round_trips(g, names[i]);
        /* a second run finds nothing new to do and leaves a valid graph */
        uint32_t groups = tu_count_op(g, IR_OP_FUSED);
        fuse_ok(g, "fuse");
        cr_assert_eq(tu_count_op(g, IR_OP_FUSED), groups, "%s: fuse is idempotent", names[i]);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
    cr_log_info("fuse: compared %d of %zu corpus models", compared, n);
    cr_assert_geq(fused, 4, "most corpus models get groups");
    tu_free_list(names);
}

Test(fuse, info_json_reports_fused_groups) {
    char *dir = tu_mkdtemp();
    cr_assert_not_null(dir);
    char *out = tu_path_join(dir, "mlp_fused.ir");
    char *in = tu_source_path("corpus/mlp.ir");
    const char *opt[] = {"opt", "-p", "fuse", in, "-o", out, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(opt, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    const char *info[] = {"info", "--json", out, NULL};
    cr_assert(tu_run_irtool(info, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"fused_groups\": 2"), "%s", r.out);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(out), free(in);
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* torch-models/NAME with input_x.npy, and the light ONNX models with generated inputs. */
Test(fuse, shared_models_keep_results, .timeout = 600) {
    const char *shared = getenv("IRTOOL_SHARED_DIR");
    if (!shared || !*shared) cr_skip_test("no shared models (set IRTOOL_SHARED_DIR)");
    static const char *const torch[] = {"branchy", "convnet", "encoder", "tiny_mlp"};
    static const char *const light[] = {"light_bvlc_alexnet", "light_resnet50", "light_squeezenet"};
    int compared = 0, seen = 0;
    char path[1024], input[1024];
    for (size_t i = 0; i < 7; i++) {
        bool is_torch = i < 4;
        if (is_torch)
            snprintf(path, sizeof path, "%s/torch-models/%s/model.onnx", shared, torch[i]);
        else
            snprintf(path, sizeof path, "%s/onnx-tests/light/%s.onnx", shared, light[i - 4]);
        if (!is_file(path)) continue;
        IrDiag quiet;
        ir_diag_init(&quiet, NULL, NULL);
        IrGraph *g = NULL;
        if (ir_load(path, &quiet, &g) != IR_OK) continue; /* the importer does not take it (yet) */
        seen++;
        TuTensors in = {0};
        bool have = false;
        if (is_torch) {
            snprintf(input, sizeof input, "%s/torch-models/%s/input_x.npy", shared, torch[i]);
            in.t = calloc(1, sizeof *in.t);
            in.n = 1;
            have = ir_graph_num_inputs(g) == 1 && ir_npy_read(input, &quiet, &in.t[0]) == IR_OK;
            if (!have) tu_tensors_free(&in);
        }
        compared += check_same_outputs(g, have ? &in : NULL, "fuse", path);
        cr_assert_gt(tu_count_op(g, IR_OP_FUSED), 0, "%s: no groups", path);
        if (!is_torch && strcmp(light[i - 4], "light_resnet50") == 0) {
            /* every Conv carries its bias (BatchNorm folded) and sits in a group with its Relu,
             * except where a projection shortcut's Conv leaves the residual Add to its partner */
            cr_assert_eq(tu_count_op(g, IR_OP_BATCH_NORMALIZATION), 0);
            uint32_t convs = 0, lone = 0;
            for (IrNodeId m = ir_graph_walk_next(g, 0); m; m = ir_graph_walk_next(g, m)) {
                if (ir_node_op(g, m) != IR_OP_CONV) continue;
                convs++;
                cr_assert_eq(ir_node_num_operands(g, m), 3, "Conv %s has a bias", ir_node_name(g, m));
                IrNodeId p = ir_region_parent(g, ir_node_region(g, m));
                if (!p) {
                    lone++;
                    continue;
                }
                cr_assert(body_has(g, p, IR_OP_RELU), "Conv %s is grouped with its Relu", ir_node_name(g, m));
            }
            cr_assert_eq(convs, 53);
            cr_assert_eq(lone, 4, "one Conv of each projection block leaves the Add to the other");
        }
        check_round_trips(g, path);
        tu_tensors_free(&in);
        ir_graph_destroy(g);
    }
    cr_log_info("fuse: %d shared models, %d compared", seen, compared);
}

/* ---- random graphs ------------------------------------------------------------------------------ */

/* Random DAGs of elementwise ops with barriers (Transpose, MatMul) and row reductions, several
 * outputs and small max-sizes: the result must verify and compute the same values. This is
 * what exercises convexity and the moving of nodes that sit between members. */
Test(fuse, random_graphs_keep_results, .timeout = 300) {
    static const char *const unary[] = {"Neg", "Abs", "Sigmoid", "Tanh", "Relu", "Identity"};
    static const char *const binary[] = {"Add", "Mul", "Sub", "Max"};
    uint32_t groups = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        TuRng rng;
        tu_rng_seed(&rng, seed);
        IrStrBuf b;
        ir_strbuf_init(&b);
        ir_strbuf_puts(&b, "graph @r(%v0: f32[3, 4], %v1: f32[3, 4]) {\n"
                           "  const %w: f32[4, 4] = [0.25, -0.5, 0.125, 0.5, 0.75, 0.25, -0.25, 0.5, "
                           "0.125, 0.5, 0.25, -0.75, 0.5, 0.25, 0.5, 0.125]\n");
        uint32_t n = 2 + (uint32_t)tu_rng_below(&rng, 28), nv = 2;
        for (uint32_t i = 0; i < n; i++, nv++) {
            uint32_t a = (uint32_t)tu_rng_below(&rng, nv), c = (uint32_t)tu_rng_below(&rng, nv);
            /* prefer recent values so chains form */
            if (tu_rng_below(&rng, 2)) a = nv - 1 - (uint32_t)tu_rng_below(&rng, nv < 3 ? nv : 3);
            uint64_t kind = tu_rng_below(&rng, 10);
            if (kind < 4)
                ir_strbuf_printf(&b, "  %%v%u = %s(%%v%u) : f32[3, 4] name(\"n%u\")\n", nv, unary[tu_rng_below(&rng, 6)], a, nv);
            else if (kind < 8)
                ir_strbuf_printf(&b, "  %%v%u = %s(%%v%u, %%v%u) : f32[3, 4] name(\"n%u\")\n", nv,
                                 binary[tu_rng_below(&rng, 4)], a, c, nv);
            else if (kind == 8)
                ir_strbuf_printf(&b, "  %%v%u = MatMul(%%v%u, %%w) : f32[3, 4] name(\"n%u\")\n", nv, a, nv);
            else
                ir_strbuf_printf(&b, "  %%v%u = Softmax(%%v%u) : f32[3, 4] name(\"n%u\")\n", nv, a, nv);
        }
        ir_strbuf_printf(&b, "  return %%v%u", nv - 1);
        for (uint32_t v = 2; v + 1 < nv; v++)
            if (tu_rng_below(&rng, 5) == 0) ir_strbuf_printf(&b, ", %%v%u", v);
        ir_strbuf_puts(&b, "\n}\n");
        IrGraph *g = parse_ok(b.data);
        char pipeline[64], label[64];
        snprintf(pipeline, sizeof pipeline, "fuse{max-size=%u}", 2 + (unsigned)tu_rng_below(&rng, 7));
        snprintf(label, sizeof label, "random graph %llu", (unsigned long long)seed);
        check_same_outputs(g, NULL, pipeline, label);
        for (IrNodeId m = ir_graph_walk_next(g, 0); m; m = ir_graph_walk_next(g, m))
            if (ir_node_op(g, m) == IR_OP_FUSED) {
                cr_assert_leq(body_size(g, m), 8);
                groups++;
            }
        check_round_trips(g, label);
        ir_graph_destroy(g);
        ir_strbuf_free(&b);
    }
    cr_log_info("random graphs: %u groups", groups);
    cr_assert_gt(groups, 150);
}
