/* Pass manager, shape-infer, specialize and the cleanup passes' structural effects. */
#include "passes/passes.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static IrGraph *parse_ok(const char *text) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "t.ir", &d);
    cr_assert(g, "parse failed: %s", tu_diag_text(&d));
    tu_diag_free(&d);
    return g;
}

/* Runs a pipeline; returns status and leaves diagnostics text in *diag_text (malloc'd). */
static IrStatus run_pipeline(IrGraph *g, const char *pipeline, char **diag_text) {
    TuDiag d;
    tu_diag_init(&d);
    IrPipeline *p = NULL;
    IrStatus s = ir_pipeline_parse(pipeline, &d.diag, &p);
    if (s == IR_OK) {
        IrPipelineOptions o = {true, IR_PRINT_NEVER, NULL, NULL, NULL};
        s = ir_pipeline_run(p, g, &o, &d.diag);
    }
    ir_pipeline_destroy(p);
    if (diag_text) *diag_text = strdup(tu_diag_text(&d));
    tu_diag_free(&d);
    return s;
}

static char *type_of(IrGraph *g, const char *value) {
    IrValueId v = ir_value_find(g, value, strlen(value));
    cr_assert(v, "no value %s", value);
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_type_print(g, ir_value_type(g, v), &b);
    return b.data;
}

static const char *shape_model =
    "symbol B, S\n"
    "constraint B in [1, 64]\n"
    "constraint S % 8 == 0\n"
    "graph @m(%x: f32[B, S, 32], %y: f32[B, S, 32]) {\n"
    "  const %zero: i64[] = [0]\n"
    "  const %one: i64[] = [1]\n"
    "  const %heads: i64[2] = [4, 8]\n"
    "  const %flat: i64[2] = [-1, 64]\n"
    "  %sh = Shape(%x)\n"
    "  %b = Gather(%sh, %zero) {axis = 0}\n"
    "  %s = Gather(%sh, %one) {axis = 0}\n"
    "  %b1 = Unsqueeze(%b, %zero)\n"
    "  %s1 = Unsqueeze(%s, %zero)\n"
    "  %shape = Concat(%b1, %s1, %heads) {axis = 0}\n"
    "  %r = Reshape(%x, %shape)\n"
    "  %t = Transpose(%r) {perm = [0, 2, 1, 3]}\n"
    "  %sum = Add(%x, %y)\n"
    "  %f = Reshape(%sum, %flat)\n"
    "  %n = Size(%x)\n"
    "  return %t, %f, %n\n"
    "}\n";

Test(shape_infer, shape_computation_resolves_symbolically) {
    IrGraph *g = parse_ok(shape_model);
    char *diag;
    cr_assert_eq(run_pipeline(g, "shape-infer", &diag), IR_OK, "%s", diag);
    char *t = type_of(g, "r"), *tt = type_of(g, "t"), *f = type_of(g, "f"), *sh = type_of(g, "shape");
    cr_expect_str_eq(t, "f32[B, S, 4, 8]");
    cr_expect_str_eq(tt, "f32[B, 4, S, 8]");
    cr_expect_str_eq(f, "f32[B*S/2, 64]");
    cr_expect_str_eq(sh, "i64[4]");
    free(t), free(tt), free(f), free(sh), free(diag);
    /* every value got a type */
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n))
        for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
            cr_expect_neq(ir_value_type(g, ir_node_result(g, n, i)), 0);
    cr_expect_eq(ir_verify(g, NULL), IR_OK);
    ir_graph_destroy(g);
}

Test(shape_infer, broadcast_of_two_symbols_becomes_a_guard) {
    IrGraph *g = parse_ok("symbol B, S, T\n"
                          "graph @g(%x: f32[B, S], %y: f32[B, T]) {\n"
                          "  %z = Add(%x, %y) name(\"add_xy\")\n"
                          "  return %z\n"
                          "}\n");
    cr_assert_eq(run_pipeline(g, "shape-infer", NULL), IR_OK);
    char *text = tu_print(g);
    cr_expect(strstr(text, "guard S == T from(\"add_xy\")"), "%s", text);
    cr_expect(strstr(text, "%z = Add(%x, %y) : f32[B, S]"), "%s", text);
    free(text);
    /* the guard survives the binary format */
    char *dir = tu_mkdtemp(), *path = tu_path_join(dir, "g.irb");
    cr_assert_eq(ir_write_binary(g, path, NULL), IR_OK);
    IrGraph *h;
    cr_assert_eq(ir_read_binary(path, NULL, &h), IR_OK);
    char *a = tu_print(g), *b = tu_print(h);
    cr_expect_str_eq(a, b);
    free(a), free(b);
    ir_graph_destroy(h);
    tu_rmtree(dir);
    free(dir), free(path);
    ir_graph_destroy(g);
}

Test(shape_infer, contradiction_names_op_shapes_and_constraint) {
    IrGraph *g = parse_ok("symbol B, S\n"
                          "constraint S % 8 == 0\n"
                          "graph @c(%x: f32[B, S], %y: f32[B, 12]) {\n"
                          "  %z = Add(%x, %y) name(\"add_xy\")\n"
                          "  return %z\n"
                          "}\n");
    char *diag;
    cr_assert_eq(run_pipeline(g, "shape-infer", &diag), IR_EVERIFY);
    cr_expect(strstr(diag, "t.ir:4:3: error: shape-infer: Add needs S == 12 (operand shapes f32[B, S] and "
                           "f32[B, 12]), which contradicts constraint S % 8 == 0 (node 'add_xy')"),
              "%s", diag);
    free(diag);
    ir_graph_destroy(g);
}

Test(shape_infer, declared_type_contradiction) {
    IrGraph *g = parse_ok("graph @c(%x: f32[2, 3], %w: f32[3, 5]) {\n"
                          "  %y = MatMul(%x, %w) : f32[2, 4]\n"
                          "  return %y\n"
                          "}\n");
    char *diag;
    cr_assert_eq(run_pipeline(g, "shape-infer", &diag), IR_EVERIFY);
    cr_expect(strstr(diag, "result %y is declared f32[2, 4] but its operands (f32[2, 3] and f32[3, 5]) give f32[2, 5]"),
              "%s", diag);
    free(diag);
    ir_graph_destroy(g);
}

Test(shape_infer, options_add_constraints_and_fixed_values_decide) {
    IrGraph *g = parse_ok("symbol B, S\n"
                          "graph @o(%x: f32[B, S], %y: f32[B, 512]) {\n"
                          "  %z = Add(%x, %y)\n"
                          "  return %z\n"
                          "}\n");
    char *diag;
    cr_assert_eq(run_pipeline(g, "shape-infer{B=1:64,S=512}", &diag), IR_OK, "%s", diag);
    char *text = tu_print(g);
    cr_expect(strstr(text, "constraint B in [1, 64]\n"), "%s", text);
    cr_expect(strstr(text, "constraint S == 512\n"), "%s", text);
    cr_expect(!strstr(text, "guard"), "S == 512 is decided by the option: %s", text);
    free(text), free(diag);
    ir_graph_destroy(g);
    g = parse_ok("symbol B, S\n"
                 "graph @o(%x: f32[B, S], %y: f32[B, 512]) {\n"
                 "  %z = Add(%x, %y)\n"
                 "  return %z\n"
                 "}\n");
    cr_assert_eq(run_pipeline(g, "shape-infer{S=256}", &diag), IR_EVERIFY);
    cr_expect(strstr(diag, "Add needs S == 512"), "%s", diag);
    free(diag);
    ir_graph_destroy(g);
}

Test(shape_infer, corpus_models_fully_typed) {
    size_t n;
    char **names = tu_list_dir("corpus", ".ir", &n);
    cr_assert(names && n >= 5);
    for (size_t i = 0; i < n; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_load_corpus(names[i], &d);
        cr_assert(g, "%s: %s", names[i], tu_diag_text(&d));
        /* forget every node's declared type, then infer them again */
        for (IrNodeId m = ir_graph_walk_next(g, 0); m; m = ir_graph_walk_next(g, m))
            for (uint32_t k = 0; k < ir_node_num_results(g, m); k++)
                if (ir_node_result(g, m, k)) ir_value_set_type(g, ir_node_result(g, m, k), 0);
        char *diag;
        cr_assert_eq(run_pipeline(g, "shape-infer", &diag), IR_OK, "%s: %s", names[i], diag);
        free(diag);
        for (IrNodeId m = ir_graph_walk_next(g, 0); m; m = ir_graph_walk_next(g, m))
            for (uint32_t k = 0; k < ir_node_num_results(g, m); k++) {
                IrValueId v = ir_node_result(g, m, k);
                if (!v) continue;
                IrTypeId t = ir_value_type(g, v);
                cr_expect(t && ir_type_rank(g, t) != IR_RANK_UNKNOWN, "%s: %%%s has no ranked type", names[i],
                          ir_value_name(g, v));
            }
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
    tu_free_list(names);
}

Test(specialize, symbols_become_constants) {
    IrGraph *g = parse_ok(shape_model);
    char *diag;
    cr_assert_eq(run_pipeline(g, "shape-infer,specialize{B=8},shape-infer", &diag), IR_OK, "%s", diag);
    char *t = type_of(g, "r"), *f = type_of(g, "f"), *text = tu_print(g);
    cr_expect_str_eq(t, "f32[8, S, 4, 8]");
    cr_expect_str_eq(f, "f32[S*4, 64]");
    cr_expect(strncmp(text, "symbol S\n", 9) == 0, "%s", text);
    cr_expect(!strstr(text, "B in"), "satisfied constraint dropped: %s", text);
    /* the printed form parses back to the same text */
    char *again = tu_canon(text, "t.ir");
    cr_expect_str_eq(again, text);
    free(t), free(f), free(text), free(again), free(diag);
    ir_graph_destroy(g);
}

Test(specialize, violated_constraint_is_an_error) {
    IrGraph *g = parse_ok(shape_model);
    char *diag;
    cr_assert_eq(run_pipeline(g, "specialize{B=65}", &diag), IR_EVERIFY);
    cr_expect(strstr(diag, "error: B=65 violates constraint B in [1, 64]"), "%s", diag);
    free(diag);
    cr_assert_eq(run_pipeline(g, "specialize{S=12}", &diag), IR_EVERIFY);
    cr_expect(strstr(diag, "S=12 violates constraint S % 8 == 0"), "%s", diag);
    free(diag);
    ir_graph_destroy(g);
}

Test(pipeline, syntax_errors_point_at_the_column) {
    TuDiag d;
    tu_diag_init(&d);
    IrPipeline *p = NULL;
    cr_expect_eq(ir_pipeline_parse("cse,nosuch,dce", &d.diag, &p), IR_EINVAL);
    cr_expect(strstr(tu_diag_text(&d), "<pipeline>:1:5: error: unknown pass 'nosuch'"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    tu_diag_init(&d);
    cr_expect_eq(ir_pipeline_parse("cse{bogus=1}", &d.diag, &p), IR_EINVAL);
    cr_expect(strstr(tu_diag_text(&d), "pass cse has no option 'bogus'"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    tu_diag_init(&d);
    cr_assert_eq(ir_pipeline_parse("default, shape-infer{B=1:8}", &d.diag, &p), IR_OK);
    const char *want_prefix = "shape-infer,canonicalize,";
    cr_expect(strncmp(ir_pipeline_text(p), want_prefix, strlen(want_prefix)) == 0, "%s", ir_pipeline_text(p));
    cr_expect(strstr(ir_pipeline_text(p), "shape-infer{B=1:8}"), "%s", ir_pipeline_text(p));
    ir_pipeline_destroy(p);
    tu_diag_free(&d);
}

Test(pipeline, cleanup_passes_report_stats) {
    IrGraph *g = parse_ok("graph @r(%x: f32[2, 3]) {\n"
                          "  const %zero: f32[] = [0.0]\n"
                          "  const %one: f32[1, 3] = [1.0, 1.0, 1.0]\n"
                          "  %a = Add(%x, %zero) : f32[2, 3]\n"
                          "  %b = Mul(%one, %a) : f32[2, 3]\n"
                          "  %t1 = Transpose(%b) {perm = [1, 0]} : f32[3, 2]\n"
                          "  %t2 = Transpose(%t1) {perm = [1, 0]} : f32[2, 3]\n"
                          "  %e1 = Exp(%t2) : f32[2, 3]\n"
                          "  %e2 = Exp(%t2) : f32[2, 3]\n"
                          "  %s = Add(%e1, %e2) : f32[2, 3]\n"
                          "  %dead = Neg(%x) : f32[2, 3]\n"
                          "  return %s\n"
                          "}\n");
    TuDiag d;
    tu_diag_init(&d);
    IrPipeline *p;
    cr_assert_eq(ir_pipeline_parse("canonicalize,cse,dce", &d.diag, &p), IR_OK);
    IrPipelineOptions o = {true, IR_PRINT_NEVER, NULL, NULL, NULL};
    cr_assert_eq(ir_pipeline_run(p, g, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_pipeline_num_reports(p), 3);
    int64_t applied = -1, merged = -1, removed = -1;
    for (uint32_t i = 0; i < 3; i++) {
        IrPassReport r = ir_pipeline_report(p, i);
        cr_expect(r.changed);
        cr_expect_geq(r.seconds, 0.0);
        for (uint32_t k = 0; k < r.n_stats; k++) {
            if (!strcmp(r.stat_names[k], "patterns-applied")) applied = r.stat_values[k];
            if (!strcmp(r.stat_names[k], "nodes-merged")) merged = r.stat_values[k];
            if (!strcmp(r.stat_names[k], "nodes-removed")) removed = r.stat_values[k];
        }
    }
    cr_expect_eq(applied, 3); /* x+0, 1*x, transpose pair */
    cr_expect_eq(merged, 1);  /* the second Exp */
    cr_expect_eq(removed, 2); /* Neg, and the first Transpose left unused */
    char *text = tu_print(g);
    cr_expect_str_eq(text, "graph @r(%x: f32[2, 3]) {\n"
                           "  %e1 = Exp(%x) : f32[2, 3]\n"
                           "  %s = Add(%e1, %e1) : f32[2, 3]\n"
                           "  return %s\n"
                           "}\n");
    free(text);
    ir_pipeline_destroy(p);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

Test(pipeline, failing_pass_writes_a_reproducer_that_replays) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "m.ir"), *repro = tu_path_join(dir, "m.repro.ir");
    const char *text = "symbol B, S\n"
                       "constraint S % 8 == 0\n"
                       "graph @c(%x: f32[B, S], %y: f32[B, 12]) {\n"
                       "  %z = Add(%x, %y)\n"
                       "  return %z\n"
                       "}\n";
    cr_assert(tu_write_file(model, text, strlen(text)));
    const char *args[] = {"opt", "-p", "cse,shape-infer,dce", model, "--reproducer", repro, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_expect_eq(r.status, 1, "%s", r.err);
    cr_expect(strstr(r.err, "note: reproducer written"), "%s", r.err);
    tu_run_free(&r);
    size_t len;
    char *rt = tu_read_file(repro, &len);
    cr_assert(rt);
    cr_expect(strstr(rt, "meta \"irtool.pipeline\" = \"shape-infer,dce\""), "%s", rt);
    free(rt);
    const char *args2[] = {"opt", repro, "-o", "-", NULL};
    cr_assert(tu_run_irtool(args2, NULL, 0, NULL, &r));
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "Add needs S == 12"), "%s", r.err);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(model), free(repro);
}

Test(pipeline, cli_timing_and_print_ir) {
    char *path = tu_source_path("corpus/mlp.ir");
    const char *args[] = {"opt", "-p", "canonicalize,cse,dce", path, "--pass-timing", "--pass-stats",
                          "--print-ir-after=cse", "-o", "-", NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "Total Execution Time"), "%s", r.err);
    cr_expect(strstr(r.err, "(S)        0 nodes-merged"), "%s", r.err);
    cr_expect(strstr(r.err, "// -----// IR Dump After cse //----- //\nsymbol B"), "%s", r.err);
    tu_run_free(&r);
    const char *list[] = {"opt", "--list-passes", NULL};
    cr_assert(tu_run_irtool(list, NULL, 0, NULL, &r));
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "shape-infer"));
    cr_expect(strstr(r.out, "specialize"));
    tu_run_free(&r);
    free(path);
}

/* The encoder exported with a symbolic batch and sequence: PyTorch writes its reshapes as
 * Shape -> Gather -> Div -> Concat -> Reshape chains; every value must come out with a known
 * shape in terms of B and S. */
Test(shape_infer, encoder_with_symbolic_batch_and_sequence) {
    char *path = tu_source_path("corpus/torch/encoder_dynamic/model.onnx");
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    IrStatus s = ir_load(path, &d.diag, &g);
    if (s == IR_EUNSUPPORTED) cr_skip_test("ONNX import unavailable: %s", tu_diag_text(&d));
    cr_assert_eq(s, IR_OK, "%s", tu_diag_text(&d));
    char *diag;
    cr_assert_eq(run_pipeline(g, "shape-infer", &diag), IR_OK, "%s", diag);
    free(diag);
    uint32_t checked = 0;
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n))
        for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
            IrValueId v = ir_node_result(g, n, i);
            if (!v) continue;
            IrTypeId t = ir_value_type(g, v);
            cr_assert(t && ir_type_rank(g, t) != IR_RANK_UNKNOWN, "%%%s has no ranked type", ir_value_name(g, v));
            for (uint32_t k = 0; k < ir_type_rank(g, t); k++) {
                IrStrBuf b;
                ir_strbuf_init(&b);
                ir_expr_print(g, ir_type_dims(g, t)[k], &b);
                cr_expect(!strchr(b.data, '?'), "%%%s dim %u is %s", ir_value_name(g, v), k, b.data);
                ir_strbuf_free(&b);
            }
            checked++;
        }
    cr_expect_gt(checked, 100);
    char *y = type_of(g, "y"), *qk = type_of(g, "/layer/self_attn/MatMul_1_output_0");
    cr_expect_str_eq(y, "f32[B, S, 32]");
    cr_expect_str_eq(qk, "f32[B*4, S, S]");
    free(y), free(qk), free(path);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

/* Every string default in the op table comes back from ir_node_attr_string as a literal. */
Test(op_table, string_defaults_are_served_without_touching_the_graph) {
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    uint32_t checked = 0;
    for (int op = 1; op < IR_OP_COUNT; op++) {
        IrNodeId n = ir_node_create(g, IR_ROOT_REGION, (IrOp)op, 0, NULL, 0, NULL, NULL);
        cr_assert(n);
        char name[64];
        IrAttrSpec spec;
        for (uint32_t i = 0; ir_op_attr_spec_at((IrOp)op, i, name, sizeof name, &spec); i++) {
            if (spec.kind != IR_ATTR_STRING || !spec.has_default) continue;
            bool found;
            const char *v = ir_node_attr_string(g, n, name, &found);
            cr_assert(found && v, "%s.%s", ir_op_name((IrOp)op), name);
            cr_expect(strlen(v) == spec.default_len && !memcmp(v, spec.default_text, spec.default_len),
                      "%s.%s: %s", ir_op_name((IrOp)op), name, v);
            checked++;
        }
    }
    cr_expect_gt(checked, 20);
    ir_graph_destroy(g);
}

/* DFT: a negative axis counts over the whole rank (the last dim is real/imaginary); a
 * dft_length given at run time leaves the axis unknown, a constant one decides it. */
Test(shape_infer, dft_axis_and_run_time_length) {
    IrGraph *g = parse_ok("graph @g(%x: f32[2, 8, 3, 1], %n: i64[]) {\n"
                          "  const %six: i64[] = [6]\n"
                          "  %a = DFT(%x) {axis = -3}\n  %b = DFT(%x, %n) {axis = 1, onesided = 1}\n"
                          "  %c = DFT(%x, %six) {axis = -2, onesided = 1}\n"
                          "  return %a, %b, %c\n}\n");
    char *diag = NULL;
    cr_assert_eq(run_pipeline(g, "shape-infer", &diag), IR_OK, "%s", diag);
    free(diag);
    const char *want[3][2] = {{"a", "f32[2, 8, 3, 2]"}, {"b", "f32[2, ?, 3, 2]"}, {"c", "f32[2, 8, 4, 2]"}};
    for (int i = 0; i < 3; i++) {
        char *t = type_of(g, want[i][0]);
        cr_assert_str_eq(t, want[i][1], "%s", want[i][0]);
        free(t);
    }
    ir_graph_destroy(g);
}

/* The shape arithmetic of expanded LayerNormalization: a suffix of ones made by ConstantOfShape
 * from a negated axis count keeps its length, so the reduced shape is [A, 1], not `?`. */
Test(shape_infer, constant_of_shape_from_negated_count) {
    IrGraph *g = parse_ok("symbol A, B\n"
                          "graph @g(%x: f32[A, B]) {\n"
                          "  %shape = Shape(%x)\n"
                          "  %zero = Constant() {value = i64[1] [0]}\n"
                          "  %axis = Constant() {value = i64[1] [-1]}\n"
                          "  %prefix = Slice(%shape, %zero, %axis)\n"
                          "  %count = Neg(%axis)\n"
                          "  %ones = ConstantOfShape(%count) {value = i64[1] [1]}\n"
                          "  %reduced = Concat(%prefix, %ones) {axis = 0}\n"
                          "  %m = ReduceMean(%x) {axes = [1]}\n"
                          "  %r = Reshape(%m, %reduced)\n"
                          "  return %r\n"
                          "}\n");
    char *diag;
    cr_assert_eq(run_pipeline(g, "shape-infer", &diag), IR_OK, "%s", diag);
    char *ones = type_of(g, "ones"), *r = type_of(g, "r");
    cr_expect_str_eq(ones, "i64[1]");
    cr_expect_str_eq(r, "f32[A, 1]");
    free(ones), free(r), free(diag);
    ir_graph_destroy(g);
}
