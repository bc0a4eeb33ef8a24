/* irtool validate: metrics on hand-made tensors (ULP distance, smallest passing tolerance),
 * generated inputs that respect constraints, and fault injection: each known fault put into a
 * copy of a corpus or torch model (a wrong kernel, swapped operands, a changed constant, a
 * dropped node, and a fault inside a fused group) must fail validation, and the first
 * diverging node reported must be the changed one (or its group). Unchanged models pass.
 * CLI checks: exit codes, JSON, JUnit (parsed with libxml2), --reduce, corpus mode.
 */
#include "passes/passes.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- metrics ------------------------------------------------------------------------------- */

Test(validate_metrics, ulp_distance) {
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F32, 1.0, (double)nextafterf(1.0f, 2.0f)), 1);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F32, 1.0, 1.0), 0);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F32, -0.0, 0.0), 0);
    /* across zero: the smallest subnormals either side are 2 ULPs apart */
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F32, -0x1p-149, 0x1p-149), 2);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F32, 1.0, 1.0 + 3 * 0x1p-23), 3);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F16, 1.0, 1.0 + 0x1p-10), 1);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_BF16, 1.0, 1.0 + 0x1p-7), 1);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_BF16, 2.0, 2.0 + 0x1p-6 * 4), 4);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F8E4M3FN, 1.0, 1.125), 1); /* 3 mantissa bits */
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F64, 1.0, nextafter(1.0, 2.0)), 1);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F32, NAN, NAN), 0);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_F32, NAN, 1.0), UINT64_MAX);
    cr_assert_eq(ir_ulp_distance(IR_DTYPE_I32, 3, 7), 4);
}

static void tensor1d(IrTensor *t, const float *v, int64_t n) {
    cr_assert_eq(ir_tensor_alloc(t, IR_DTYPE_F32, 1, &n), IR_OK);
    memcpy(t->data, v, (size_t)n * 4);
}

Test(validate_metrics, smallest_passing_tolerance) {
    const float r[] = {1.0f, 2.0f, 4.0f, 0.0f}, c[] = {1.0f, 2.01f, 4.2f, 0.0f};
    IrTensor a, b;
    tensor1d(&a, r, 4);
    tensor1d(&b, c, 4);
    IrTolerance tol = ir_tolerance_default(IR_DTYPE_F32, false);
    cr_assert_float_eq(tol.rtol, 1e-5, 1e-12);
    cr_assert_float_eq(tol.atol, 1e-6, 1e-12);
    IrCompareMetrics m;
    ir_compare_tensors(&a, &b, &tol, &m);
    cr_assert(m.comparable && !m.pass);
    double e1 = (double)2.01f - 2.0, e2 = (double)4.2f - 4.0;
    cr_assert_float_eq(m.max_abs_err, e2, 1e-12);
    cr_assert_float_eq(m.max_rel_err, e2 / 4, 1e-12);
    cr_assert_float_eq(m.mean_abs_err, (e1 + e2) / 4, 1e-12);
    cr_assert_float_eq(m.rms_err, sqrt((e1 * e1 + e2 * e2) / 4), 1e-12);
    cr_assert_float_eq(m.frac_within, 0.5, 1e-12);
    cr_assert_eq(m.rank, 1);
    cr_assert_eq(m.worst_index[0], 2);
    cr_assert_float_eq(m.worst_ref, 4.0, 1e-12);
    double want_rtol = fmax((e1 - 1e-6) / 2, (e2 - 1e-6) / 4), want_atol = fmax(e1 - 2e-5, e2 - 4e-5);
    cr_assert_float_eq(m.min_rtol, want_rtol, 1e-12);
    cr_assert_float_eq(m.min_atol, want_atol, 1e-12);
    /* the reported tolerances pass; slightly less fails */
    IrTolerance t2 = tol;
    t2.rtol = m.min_rtol * (1 + 1e-9);
    ir_compare_tensors(&a, &b, &t2, &m);
    cr_assert(m.pass);
    t2.rtol = want_rtol * 0.999;
    ir_compare_tensors(&a, &b, &t2, &m);
    cr_assert(!m.pass);
    t2 = tol;
    t2.atol = want_atol * (1 + 1e-9);
    ir_compare_tensors(&a, &b, &t2, &m);
    cr_assert(m.pass);
    /* an error where the reference is 0 needs atol: no rtol passes */
    const float c3[] = {1.0f, 2.0f, 4.0f, 0.5f};
    IrTensor d;
    tensor1d(&d, c3, 4);
    ir_compare_tensors(&a, &d, &tol, &m);
    cr_assert(isinf(m.min_rtol));
    cr_assert_float_eq(m.min_atol, 0.5, 1e-12);
    ir_tensor_free(&a), ir_tensor_free(&b), ir_tensor_free(&d);
}

Test(validate_metrics, cosine_argmax_and_defaults) {
    int64_t dims[2] = {2, 3};
    IrTensor a, b;
    cr_assert_eq(ir_tensor_alloc(&a, IR_DTYPE_F32, 2, dims), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&b, IR_DTYPE_F32, 2, dims), IR_OK);
    const float r[] = {0, 1, 0, 3, 2, 1}, c[] = {0, 1.05f, 0, 1, 2, 1};
    memcpy(a.data, r, sizeof r), memcpy(b.data, c, sizeof c);
    IrTolerance tol = ir_tolerance_default(IR_DTYPE_F32, true);
    cr_assert(tol.by_cosine);
    cr_assert_float_eq(tol.min_cosine, 0.99, 1e-12);
    IrCompareMetrics m;
    ir_compare_tensors(&a, &b, &tol, &m);
    cr_assert_float_eq(m.argmax_agreement, 0.5, 1e-12); /* row 1: argmax 0 vs 1 */
    double dot = 1.05 + 3 + 4 + 1, na = sqrt(1 + 9 + 4 + 1), nb = sqrt(1.05 * 1.05 + 1 + 4 + 1);
    cr_assert_float_eq(m.cosine, dot / (na * nb), 1e-6);
    cr_assert_eq(m.pass, m.cosine >= 0.99);
    IrTolerance h = ir_tolerance_default(IR_DTYPE_F16, false), bf = ir_tolerance_default(IR_DTYPE_BF16, false);
    cr_assert_float_eq(h.rtol, 1e-3, 1e-12);
    cr_assert_float_eq(bf.atol, 1e-3, 1e-12);
    /* shape mismatch is reported, never compared */
    int64_t d3 = 6;
    IrTensor f;
    ir_tensor_view(&f, IR_DTYPE_F32, 1, &d3, c);
    ir_compare_tensors(&a, &f, &tol, &m);
    cr_assert(!m.comparable && !m.pass);
    cr_assert(strstr(m.reason, "shape mismatch"));
    ir_tensor_free(&a), ir_tensor_free(&b);
}

/* ---- generated inputs ---------------------------------------------------------------------- */

static IrGraph *parse(const char *text) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    return g;
}

Test(validate_inputs, random_respects_constraints) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("symbolic.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrTensor in[2];
    cr_assert_eq(ir_random_inputs(g, 3, in, &d.diag), IR_OK);
    /* B in [1, 64] -> 4; S in [8, 4096], S % 8 == 0 -> 8 */
    cr_assert_eq(in[0].rank, 3);
    cr_assert_eq(in[0].dims[0], 4);
    cr_assert_eq(in[0].dims[1], 8);
    cr_assert_eq(in[0].dims[2], 16);
    cr_assert_eq(in[1].dims[0], 4);
    cr_assert_eq(in[1].dims[1], 1);
    for (int64_t i = 0; i < ir_tensor_numel(&in[0]); i++) {
        double v = ir_elem_get_f64(IR_DTYPE_F32, in[0].data, (size_t)i);
        cr_assert(v >= -1 && v < 1);
    }
    /* the interpreter accepts them (it checks the constraints) */
    IrTensor out[2];
    cr_assert_eq(ir_interp_run(g, in, 2, out, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(out[1].dims[1], 9); /* T == S + 1 */
    /* deterministic */
    IrTensor again[2];
    cr_assert_eq(ir_random_inputs(g, 3, again, &d.diag), IR_OK);
    cr_assert(!memcmp(in[0].data, again[0].data, ir_tensor_nbytes(&in[0])));
    for (int i = 0; i < 2; i++) ir_tensor_free(&in[i]), ir_tensor_free(&again[i]), ir_tensor_free(&out[i]);
    ir_graph_destroy(g);

    g = parse("symbol N, K, M\nconstraint N in [1, 3]\nconstraint K % 5 == 0\nconstraint M == K + N\n"
              "graph @g(%a: f32[N, K], %b: i64[M]) {\n  %y = Relu(%a) : f32[N, K]\n  return %y\n}\n");
    cr_assert_eq(ir_random_inputs(g, 1, in, &d.diag), IR_OK);
    cr_assert_eq(in[0].dims[0], 3);
    cr_assert_eq(in[0].dims[1], 5);
    cr_assert_eq(in[1].dims[0], 8);
    for (int64_t i = 0; i < 8; i++) {
        int64_t v = ir_elem_get_i64(IR_DTYPE_I64, in[1].data, (size_t)i);
        cr_assert(v == 0 || v == 1);
    }
    ir_tensor_free(&in[0]), ir_tensor_free(&in[1]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- fault injection ----------------------------------------------------------------------- */

static IrNodeId find_node(const IrGraph *g, const char *name) {
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n))
        if (!strcmp(ir_node_name(g, n), name)) return n;
    cr_assert_fail("no node '%s'", name);
    return 0;
}

/* A wrong kernel: the node computes `op` instead (same name, same operand). */
static void fault_kernel(IrGraph *g, const char *name, IrOp op) {
    IrNodeId n = find_node(g, name);
    IrValueId in = ir_node_operand(g, n, 0), old = ir_node_result(g, n, 0);
    IrTypeId t = ir_value_type(g, old);
    IrNodeId m = ir_node_create_before(g, n, op, 1, &in, 1, NULL, &t);
    cr_assert(m);
    ir_node_set_name(g, m, name);
    ir_graph_replace_uses(g, old, ir_node_result(g, m, 0));
    ir_node_erase(g, n);
}

static void fault_swap(IrGraph *g, const char *name) {
    IrNodeId n = find_node(g, name);
    IrValueId a = ir_node_operand(g, n, 0), b = ir_node_operand(g, n, 1);
    ir_node_set_operand(g, n, 0, b);
    ir_node_set_operand(g, n, 1, a);
}

/* A changed constant: operand i (a graph constant) replaced by a copy with element 0 + 1. */
static void fault_const(IrGraph *g, const char *name, uint32_t i) {
    IrNodeId n = find_node(g, name);
    IrValueId v = ir_node_operand(g, n, i);
    cr_assert_eq(ir_value_kind(g, v), IR_VALUE_CONST);
    IrConstId c = ir_value_const(g, v);
    size_t nb = ir_const_nbytes(g, c);
    float *data = malloc(nb);
    memcpy(data, ir_const_data(g, c), nb);
    data[0] += 1.0f;
    IrConstId nc = ir_const_create(g, ir_const_type(g, c), data, nb);
    free(data);
    ir_node_set_operand(g, n, i, ir_graph_add_const_value(g, "fault_const", nc));
}

/* A dropped node: its result's uses take its first operand instead. */
static void fault_drop(IrGraph *g, const char *name) {
    IrNodeId n = find_node(g, name);
    ir_graph_replace_uses(g, ir_node_result(g, n, 0), ir_node_operand(g, n, 0));
    ir_node_erase(g, n);
}

static IrGraph *load(const char *path) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    cr_assert_eq(ir_load(path, &d.diag, &g), IR_OK, "%s: %s", path, tu_diag_text(&d));
    tu_diag_free(&d);
    return g;
}

static char *corpus_path(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "corpus/%s", name);
    return tu_source_path(rel);
}

static char *torch_path(const char *model) {
    const char *s = getenv("IRTOOL_SHARED_DIR");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s/torch-models/%s/model.onnx", s ? s : "/nonexistent", model);
    FILE *f = fopen(buf, "rb");
    if (!f) return NULL;
    fclose(f);
    return strdup(buf);
}

static void run_pipeline(IrGraph *g, const char *text) {
    TuDiag d;
    tu_diag_init(&d);
    IrPipeline *p = NULL;
    cr_assert_eq(ir_pipeline_parse(text, &d.diag, &p), IR_OK);
    IrPipelineOptions o = {.verify_each = true};
    cr_assert_eq(ir_pipeline_run(p, g, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    ir_pipeline_destroy(p);
    tu_diag_free(&d);
}

typedef enum { F_NONE, F_KERNEL, F_SWAP, F_CONST, F_DROP } Fault;

/* Injects the fault into a copy of `path`, optionally runs `pipeline` on the copy, validates
 * it against the original, and returns the result (caller frees). */
static void check_fault(const char *path, Fault f, const char *node, uint32_t arg, const char *pipeline,
                        IrValidateResult *res) {
    IrGraph *ref = load(path), *cand = load(path);
    if (f == F_KERNEL) fault_kernel(cand, node, (IrOp)arg);
    if (f == F_SWAP) fault_swap(cand, node);
    if (f == F_CONST) fault_const(cand, node, arg);
    if (f == F_DROP) fault_drop(cand, node);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_verify(cand, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    if (pipeline) run_pipeline(cand, pipeline);
    uint32_t ni = ir_graph_num_inputs(ref);
    IrTensor in[8];
    cr_assert(ni <= 8);
    cr_assert_eq(ir_random_inputs(ref, 11, in, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrValidateOptions o;
    ir_validate_options_init(&o);
    cr_assert_eq(ir_validate_run(ref, cand, in, ni, &o, res, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (uint32_t i = 0; i < ni; i++) ir_tensor_free(&in[i]);
    tu_diag_free(&d);
    ir_graph_destroy(ref);
    ir_graph_destroy(cand);
}

static void expect_flagged(const char *path, Fault f, const char *node, uint32_t arg, const char *pipeline,
                           const char *want_node, const char *want_note) {
    IrValidateResult r;
    check_fault(path, f, node, arg, pipeline, &r);
    cr_assert(!r.pass, "%s: fault at '%s' not flagged", path, node);
    cr_assert(r.div.found, "%s: no diverging node found", path);
    cr_assert_str_eq(r.div.node_name, want_node, "%s: first divergence '%s' (%s), want '%s'", path, r.div.node_name,
                     r.div.op, want_node);
    if (want_note) cr_assert(strstr(r.div.note, want_note), "note: '%s'", r.div.note);
    ir_validate_result_free(&r);
}

Test(validate_faults, unchanged_models_pass) {
    const char *models[] = {"mlp.ir", "conv_block.ir", "attention.ir", "control_flow.ir", "symbolic.ir"};
    const char *pipes[] = {NULL, "default", "fuse"};
    for (size_t i = 0; i < 5; i++)
        for (size_t p = 0; p < 3; p++) {
            char *path = corpus_path(models[i]);
            IrValidateResult r;
            check_fault(path, F_NONE, NULL, 0, pipes[p], &r);
            cr_assert(r.pass, "%s with %s should pass", models[i], pipes[p] ? pipes[p] : "nothing");
            cr_assert(!r.div.found);
            ir_validate_result_free(&r);
            free(path);
        }
}

Test(validate_faults, corpus_wrong_kernel) {
    char *p = corpus_path("mlp.ir");
    expect_flagged(p, F_KERNEL, "relu1", IR_OP_SIGMOID, NULL, "relu1", NULL);
    free(p);
    p = corpus_path("conv_block.ir");
    expect_flagged(p, F_KERNEL, "relu2", IR_OP_SIGMOID, NULL, "relu2", NULL);
    free(p);
}

Test(validate_faults, corpus_changed_constant) {
    char *p = corpus_path("mlp.ir");
    expect_flagged(p, F_CONST, "fc2_bias", 1, NULL, "fc2_bias", NULL);
    free(p);
    p = corpus_path("attention.ir");
    expect_flagged(p, F_CONST, "scale", 1, NULL, "scale", NULL);
    free(p);
}

Test(validate_faults, corpus_dropped_node) {
    /* the consumer of the dropped node diverges first; the note names the dropped node */
    char *p = corpus_path("mlp.ir");
    expect_flagged(p, F_DROP, "relu1", 0, NULL, "fc2", "relu1");
    free(p);
}

Test(validate_faults, fault_inside_fused_group) {
    char *p = corpus_path("mlp.ir");
    IrValidateResult r;
    check_fault(p, F_KERNEL, "relu1", IR_OP_SIGMOID, "fuse", &r);
    cr_assert(!r.pass && r.div.found);
    cr_assert_str_eq(r.div.op, "irtool.fused");
    cr_assert(strstr(r.div.ref_nodes, "relu1"), "group maps to '%s'", r.div.ref_nodes);
    ir_validate_result_free(&r);
    free(p);
}

Test(validate_faults, reduce_fused_group_reproduces) {
    char *p = corpus_path("mlp.ir");
    IrGraph *ref = load(p), *cand = load(p);
    free(p);
    fault_kernel(cand, "relu1", IR_OP_SIGMOID);
    run_pipeline(cand, "fuse");
    TuDiag d;
    tu_diag_init(&d);
    IrTensor in[1];
    cr_assert_eq(ir_random_inputs(ref, 5, in, &d.diag), IR_OK);
    IrValidateOptions o;
    ir_validate_options_init(&o);
    IrValidateResult r, r2;
    cr_assert_eq(ir_validate_run(ref, cand, in, 1, &o, &r, &d.diag), IR_OK);
    cr_assert(r.div.found);
    IrGraph *rr = NULL, *rc = NULL;
    cr_assert_eq(ir_validate_reduce(ref, cand, &r, &rr, &rc, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(rr, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(rc, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_graph_num_inputs(rc), 0);
    cr_assert_eq(ir_graph_num_nodes(rr), 3); /* fc1, fc1_bias, relu1 */
    cr_assert_eq(ir_validate_run(rr, rc, NULL, 0, &o, &r2, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert(!r2.pass && r2.div.found);
    cr_assert_str_eq(r2.div.node_name, r.div.node_name);
    cr_assert_float_eq(r2.outputs[0].m.max_abs_err, r.div.m.max_abs_err, 1e-12);
    ir_validate_result_free(&r), ir_validate_result_free(&r2);
    ir_graph_destroy(rr), ir_graph_destroy(rc), ir_graph_destroy(ref), ir_graph_destroy(cand);
    ir_tensor_free(&in[0]);
    tu_diag_free(&d);
}

/* quantize-fp8 adds nodes carrying the layer's provenance (abs, max, scale, quantize); only the
 * layer's own result is compared with the reference layer, so the first divergence under a
 * strict cosine is the FP8 matmul itself. */
Test(validate_faults, fp8_rewrite_maps_to_layer) {
    char *p = corpus_path("mlp.ir");
    IrGraph *ref = load(p), *cand = load(p);
    free(p);
    run_pipeline(cand, "quantize-fp8");
    cr_assert(ir_graph_has_fp8(cand));
    TuDiag d;
    tu_diag_init(&d);
    IrTensor in[1];
    cr_assert_eq(ir_random_inputs(ref, 2, in, &d.diag), IR_OK);
    IrValidateOptions o;
    ir_validate_options_init(&o);
    IrValidateResult r;
    cr_assert_eq(ir_validate_run(ref, cand, in, 1, &o, &r, &d.diag), IR_OK);
    cr_assert(r.pass && r.outputs[0].tol.by_cosine); /* default: cosine >= 0.99 */
    ir_validate_result_free(&r);
    o.min_cosine = 0.9999999;
    cr_assert_eq(ir_validate_run(ref, cand, in, 1, &o, &r, &d.diag), IR_OK);
    cr_assert(!r.pass && r.div.found);
    cr_assert_str_eq(r.div.node_name, "fc1");
    cr_assert_str_eq(r.div.op, "irtool.fp8_matmul");
    ir_validate_result_free(&r);
    ir_tensor_free(&in[0]);
    ir_graph_destroy(ref), ir_graph_destroy(cand);
    tu_diag_free(&d);
}

Test(validate_faults, torch_models) {
    char *tiny = torch_path("tiny_mlp"), *enc = torch_path("encoder"), *conv = torch_path("convnet");
    if (!tiny || !enc || !conv) cr_skip_test("../shared/torch-models is absent");
    expect_flagged(tiny, F_SWAP, "/Sub", 0, NULL, "/Sub", NULL);
    expect_flagged(tiny, F_KERNEL, "/Relu", IR_OP_SIGMOID, NULL, "/Relu", NULL);
    expect_flagged(enc, F_DROP, "/layer/Relu", 0, NULL, "/layer/linear2/MatMul", "/layer/Relu");
    expect_flagged(conv, F_KERNEL, "/Relu", IR_OP_SIGMOID, "default", "/Relu", NULL);
    const char *models[] = {tiny, enc, conv};
    for (int i = 0; i < 3; i++) {
        IrValidateResult r;
        check_fault(models[i], F_NONE, NULL, 0, "default", &r);
        cr_assert(r.pass, "%s should pass", models[i]);
        ir_validate_result_free(&r);
    }
    free(tiny), free(enc), free(conv);
}

/* ---- the CLI ------------------------------------------------------------------------------- */

static int irtool(const char *const *args, TuRun *r) {
    cr_assert(tu_run_irtool(args, NULL, 0, IRTOOL_SOURCE_DIR, r));
    return r->status;
}

static char *xml_prop(xmlNodePtr n, const char *name) { return (char *)xmlGetProp(n, BAD_CAST name); }

static xmlNodePtr find_elem(xmlNodePtr n, const char *name) {
    for (; n; n = n->next) {
        if (n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name)) return n;
        xmlNodePtr c = find_elem(n->children, name);
        if (c) return c;
    }
    return NULL;
}

Test(validate_cli, fault_reports_json_junit_reduce) {
    char *dir = tu_mkdtemp();
    char *bad = tu_path_join(dir, "bad.ir"), *json = tu_path_join(dir, "r.json"), *xml = tu_path_join(dir, "r.xml");
    char *red = tu_path_join(dir, "red.ir"), *redref = tu_path_join(dir, "red.ref.ir");
    char *mlp = corpus_path("mlp.ir");
    IrGraph *g = load(mlp);
    free(mlp);
    fault_kernel(g, "relu1", IR_OP_SIGMOID);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_save(g, bad, &d.diag), IR_OK);
    ir_graph_destroy(g);
    TuRun r;
    const char *a1[] = {"validate", "corpus/mlp.ir", bad, "--random", "2", "--json", json, "--junit", xml, "--reduce", red, NULL};
    cr_assert_eq(irtool(a1, &r), 1, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "first divergence: node 'relu1' (Sigmoid)"), "%s", r.out);
    cr_assert(strstr(r.out, "bad.ir:"), "location: %s", r.out);
    tu_run_free(&r);
    char *j = tu_read_file(json, NULL);
    cr_assert(j && strstr(j, "\"first_divergence\": {\"node\": \"relu1\", \"op\": \"Sigmoid\""), "%s", j);
    cr_assert(strstr(j, "\"max_ulp\": ") && strstr(j, "\"min_passing_rtol\": "));
    free(j);
    /* JUnit parses and carries the metrics and the diverging node */
    xmlDocPtr doc = xmlReadFile(xml, NULL, XML_PARSE_NONET);
    cr_assert(doc, "JUnit does not parse");
    xmlNodePtr root = xmlDocGetRootElement(doc);
    xmlNodePtr suite = find_elem(root, "testsuite");
    char *fails = xml_prop(suite, "failures");
    cr_assert_str_eq(fails, "1");
    xmlFree(fails);
    xmlNodePtr f = find_elem(root, "failure");
    cr_assert(f);
    char *msg = xml_prop(f, "message");
    cr_assert(strstr(msg, "relu1"), "%s", msg);
    xmlFree(msg);
    xmlChar *text = xmlNodeGetContent(f);
    cr_assert(strstr((char *)text, "max_abs_err=") && strstr((char *)text, "cosine="));
    xmlFree(text);
    cr_assert(find_elem(root, "property"));
    xmlFreeDoc(doc);
    /* the reproducer reproduces */
    const char *a2[] = {"validate", redref, red, NULL};
    cr_assert_eq(irtool(a2, &r), 1, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "first divergence: node 'relu1' (Sigmoid)"), "%s", r.out);
    tu_run_free(&r);
    /* unchanged: exit 0; per-output tolerance loose enough: exit 0 */
    const char *a3[] = {"validate", "corpus/mlp.ir", "-p", "default", "--input", "x=corpus/inputs/mlp_x.npy", NULL};
    cr_assert_eq(irtool(a3, &r), 0, "%s%s", r.out, r.err);
    tu_run_free(&r);
    const char *a4[] = {"validate", "corpus/mlp.ir", bad, "--random", "1", "--tol", "y=rtol:0,atol:1", NULL};
    cr_assert_eq(irtool(a4, &r), 0, "%s%s", r.out, r.err);
    tu_run_free(&r);
    /* errors: usage and missing inputs */
    const char *a5[] = {"validate", "corpus/mlp.ir", NULL};
    cr_assert_eq(irtool(a5, &r), 2);
    tu_run_free(&r);
    const char *a6[] = {"validate", "corpus/mlp.ir", bad, NULL};
    cr_assert_eq(irtool(a6, &r), 2);
    tu_run_free(&r);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir), free(bad), free(json), free(xml), free(red), free(redref);
}

Test(validate_cli, corpus_baseline_jobs_shards) {
    TuRun r1, r2;
    const char *a1[] = {"validate", "--corpus", "corpus/validate", "--baseline", "corpus/validate/baseline.json", NULL};
    cr_assert_eq(irtool(a1, &r1), 0, "%s%s", r1.out, r1.err);
    const char *a2[] = {"validate", "--corpus", "corpus/validate", "--baseline", "corpus/validate/baseline.json",
                        "--jobs", "3", NULL};
    cr_assert_eq(irtool(a2, &r2), 0, "%s%s", r2.out, r2.err);
    cr_assert_str_eq(r1.out, r2.out, "output depends on --jobs");
    tu_run_free(&r1), tu_run_free(&r2);
    const char *a3[] = {"validate", "--corpus", "corpus/validate", "--baseline", "corpus/validate/baseline.json",
                        "--shard", "1/4", NULL};
    cr_assert_eq(irtool(a3, &r1), 0, "%s%s", r1.out, r1.err);
    cr_assert(strstr(r1.out, "pass mlp.fuse ") && !strstr(r1.out, "pass mlp.default "), "%s", r1.out);
    tu_run_free(&r1);
    /* a tighter baseline is a regression (exit 1); a missing model is skipped */
    char *dir = tu_mkdtemp();
    char *man = tu_path_join(dir, "manifest.txt"), *base = tu_path_join(dir, "base.json");
    char *mlp = corpus_path("mlp.ir");
    char text[2048];
    snprintf(text, sizeof text, "q %s random:1 quantize-fp8\nmissing /nonexistent/m.onnx random:1 default\n", mlp);
    cr_assert(tu_write_file(man, text, strlen(text)));
    const char *b = "{\"entries\": [\n{\"entry\": \"q\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1}\n]}\n";
    cr_assert(tu_write_file(base, b, strlen(b)));
    char *xml = tu_path_join(dir, "c.xml");
    const char *a4[] = {"validate", "--corpus", dir, "--baseline", base, "--junit", xml, NULL};
    cr_assert_eq(irtool(a4, &r1), 1, "%s%s", r1.out, r1.err);
    cr_assert(strstr(r1.out, "fail q y: max_abs_err"), "%s", r1.out);
    cr_assert(strstr(r1.out, "skip missing"), "%s", r1.out);
    tu_run_free(&r1);
    xmlDocPtr doc = xmlReadFile(xml, NULL, XML_PARSE_NONET);
    cr_assert(doc, "corpus JUnit does not parse");
    xmlNodePtr f = find_elem(xmlDocGetRootElement(doc), "failure");
    cr_assert(f);
    char *msg = xml_prop(f, "message");
    cr_assert(strstr(msg, "baseline"), "%s", msg);
    xmlFree(msg);
    xmlFreeDoc(doc);
    free(xml);
    tu_rmtree(dir);
    free(dir), free(man), free(base), free(mlp);
}

/* A compiled artifact as the candidate: its code runs (irt_run) against the reference model in
 * the interpreter, outputs compared as usual; an FP8-quantized compile is judged by cosine
 * (its graph, read from inside the .irx, holds FP8 ops); `irtool info` reads that graph too. */
Test(validate_cli, compiled_artifact_as_candidate) {
    char *dir = tu_mkdtemp();
    char *irx = tu_path_join(dir, "mlp.irx"), *qirx = tu_path_join(dir, "mlp_fp8.irx");
    TuRun r;
    const char *c1[] = {"compile", "corpus/mlp.ir", "-o", irx, "--no-cache", NULL};
    cr_assert_eq(irtool(c1, &r), 0, "%s%s", r.out, r.err);
    tu_run_free(&r);
    const char *v1[] = {"validate", "corpus/mlp.ir", irx, "--random", "2", NULL};
    cr_assert_eq(irtool(v1, &r), 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "PASS") && strstr(r.out, "random input set 2 of 2"), "%s", r.out);
    tu_run_free(&r);
    const char *c2[] = {"compile", "corpus/mlp.ir", "-p", "shape-infer,quantize-fp8", "-o", qirx, "--no-cache", NULL};
    cr_assert_eq(irtool(c2, &r), 0, "%s%s", r.out, r.err);
    tu_run_free(&r);
    const char *v2[] = {"validate", "corpus/mlp.ir", qirx, "--input", "x=corpus/inputs/mlp_x.npy", NULL};
    cr_assert_eq(irtool(v2, &r), 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "judged by cosine"), "%s", r.out);
    tu_run_free(&r);
    const char *i1[] = {"info", qirx, NULL};
    cr_assert_eq(irtool(i1, &r), 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "graph @mlp") && strstr(r.out, "irtool.fp8_matmul"), "%s", r.out);
    tu_run_free(&r);
    /* a file that only looks like an artifact: exit 1 with what is wrong */
    char *bad = tu_path_join(dir, "bad.irx");
    cr_assert(tu_write_file(bad, "IRTOOLX\0garbage", 15));
    const char *i2[] = {"info", bad, NULL};
    cr_assert_eq(irtool(i2, &r), 1, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "not an irtool artifact"), "%s", r.err);
    tu_run_free(&r);
    free(bad);
    /* another model's artifact: an error, not a comparison */
    const char *v3[] = {"validate", "corpus/attention.ir", irx, "--random", "1", NULL};
    cr_assert_neq(irtool(v3, &r), 0, "%s%s", r.out, r.err);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(irx), free(qirx), free(dir);
}
