/* The verifier, rule by rule: SSA and scoping, operand/result/region counts, attribute names,
 * kinds and required attributes, the op table's type rules, control-flow region arity, the
 * error cap, and where errors are located (text position, else `loc`, else the file).
 * Some corrupt states cannot be built through the public API; those poke the internal tables
 * (ir_internal.h), as the binary reader or a buggy pass could.
 */
#include "testutil.h"
#include "ir_internal.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

typedef struct Counts {
    uint32_t errors, notes;
} Counts;

static void count_fn(void *user, const IrDiagnostic *d) {
    Counts *c = user;
    if (d->severity == IR_SEV_ERROR) c->errors++;
    if (d->severity == IR_SEV_NOTE) c->notes++;
}

/* Parses (must succeed), keeps the source for carets, verifies; returns the diagnostics. */
static char *verify_text(const char *text, IrStatus want) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "v.ir", &d);
    cr_assert_not_null(g, "parse failed: %s", tu_diag_text(&d));
    ir_graph_set_source_text(g, text, strlen(text));
    IrStatus s = ir_verify(g, &d.diag);
    cr_assert_eq(s, want, "verify gave %s: %s", ir_status_name(s), tu_diag_text(&d));
    char *out = strdup(tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
    return out;
}

#define EXPECT_ERROR(text, msg)                                                                    \
    do {                                                                                           \
        char *o_ = verify_text(text, IR_EVERIFY);                                                  \
        cr_assert_not_null(strstr(o_, msg), "expected '%s' in:\n%s", msg, o_);                     \
        free(o_);                                                                                  \
    } while (0)

static char *verify_graph(IrGraph *g, IrStatus want) {
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = ir_verify(g, &d.diag);
    cr_assert_eq(s, want, "verify gave %s: %s", ir_status_name(s), tu_diag_text(&d));
    char *out = strdup(tu_diag_text(&d));
    tu_diag_free(&d);
    return out;
}

static IrTypeId vec(IrGraph *g, int64_t n) { return ir_type_tensor_i64(g, IR_DTYPE_F32, 1, &n); }

static IrNodeId unary(IrGraph *g, IrRegionId r, IrOp op, IrValueId x, const char *name, IrTypeId t) {
    const char *names[1] = {name};
    return ir_node_create(g, r, op, 1, &x, 1, names, &t);
}

/* ---- valid graphs --------------------------------------------------------------------------------- */

Test(verify, corpus_models_are_valid) {
    size_t n;
    char **files = tu_list_dir("corpus", ".ir", &n);
    for (size_t i = 0; i < n; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_load_corpus(files[i], &d);
        cr_assert_not_null(g);
        cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s: %s", files[i], tu_diag_text(&d));
        cr_assert_eq(d.diag.n_errors, 0);
        cr_assert_str_eq(tu_diag_text(&d), "", "a valid graph reports nothing");
        /* without type rules too */
        IrVerifyOptions o = {0, false};
        cr_assert_eq(ir_verify_ex(g, &o, &d.diag), IR_OK);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
    tu_free_list(files);
}

/* ---- SSA and scoping ------------------------------------------------------------------------------ */

Test(verify, ssa_redefinition_is_rejected_by_the_parser) {
    /* the builder cannot define a value twice, so SSA redefinition only exists in text */
    const char *t = "graph @g(%x: f32[2]) {\n  %a = Relu(%x)\n  %a = Neg(%x)\n  return %a\n}\n";
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_null(tu_parse(t, "r.ir", &d));
    cr_assert_not_null(strstr(tu_diag_text(&d), "r.ir:3:3: error: redefinition of value %a"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    /* a region argument may not shadow an outer value either (names are graph-wide) */
    const char *t2 = "graph @g(%n: i64[], %c: bool[], %x: f32[2]) {\n"
                     "  %r = Loop(%n, %c, %x) : f32[2] {\n"
                     "    body(%i: i64[], %c: bool[], %acc: f32[2]) {\n"
                     "      return %c, %acc\n    }\n  }\n  return %r\n}\n";
    tu_diag_init(&d);
    cr_assert_null(tu_parse(t2, "r.ir", &d));
    cr_assert_not_null(strstr(tu_diag_text(&d), "r.ir:3:21: error: redefinition of value %c"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
}

Test(verify, use_before_definition) {
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    IrTypeId t = vec(g, 2);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    IrNodeId b = unary(g, IR_ROOT_REGION, IR_OP_RELU, x, "b", t);
    IrValueId bv = ir_node_result(g, b, 0);
    /* placed before b but uses b */
    const char *nm[1] = {"a"};
    IrNodeId a = ir_node_create_before(g, b, IR_OP_NEG, 1, &bv, 1, nm, &t);
    IrValueId av = ir_node_result(g, a, 0);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &av);
    char *o = verify_graph(g, IR_EVERIFY);
    cr_assert_not_null(strstr(o, "operand %b is used before its definition or outside its scope"), "%s", o);
    free(o);
    /* moving it after b fixes it */
    ir_node_move(g, a, IR_ROOT_REGION, 0);
    o = verify_graph(g, IR_OK);
    free(o);
    /* a node using its own result */
    ir_node_set_operand(g, a, 0, av);
    o = verify_graph(g, IR_EVERIFY);
    cr_assert_not_null(strstr(o, "operand %a is used before its definition"), "%s", o);
    free(o);
    ir_graph_destroy(g);
}

Test(verify, scope_violations) {
    EXPECT_ERROR("graph @g(%p: bool[], %x: f32[2]) {\n"
                 "  %r = If(%p) : f32[2] {\n"
                 "    then_branch() {\n      %t = Relu(%x) : f32[2]\n      return %t\n    }\n"
                 "    else_branch() {\n      %e = Neg(%t) : f32[2]\n      return %e\n    }\n"
                 "  }\n  return %r\n}\n",
                 "v.ir:8:7: error: operand %t is used before its definition or outside its scope");
    EXPECT_ERROR("graph @g(%p: bool[], %x: f32[2]) {\n"
                 "  %r = If(%p) : f32[2] {\n"
                 "    then_branch() {\n      %t = Relu(%x) : f32[2]\n      return %t\n    }\n"
                 "    else_branch() {\n      return %x\n    }\n"
                 "  }\n  %y = Add(%r, %t) : f32[2]\n  return %y\n}\n",
                 "v.ir:11:3: error: operand %t is used before its definition or outside its scope");
    /* a branch returning a value of the other branch; a graph returning an inner value */
    EXPECT_ERROR("graph @g(%p: bool[], %x: f32[2]) {\n"
                 "  %r = If(%p) : f32[2] {\n"
                 "    then_branch() {\n      %t = Relu(%x) : f32[2]\n      return %t\n    }\n"
                 "    else_branch() {\n      return %t\n    }\n"
                 "  }\n  return %r\n}\n",
                 "v.ir:2:3: error: region output %t is not defined in scope");
    EXPECT_ERROR("graph @g(%p: bool[], %x: f32[2]) {\n"
                 "  %r = If(%p) : f32[2] {\n"
                 "    then_branch() {\n      %t = Relu(%x) : f32[2]\n      return %t\n    }\n"
                 "    else_branch() {\n      return %x\n    }\n"
                 "  }\n  return %t\n}\n",
                 "error: graph output %t is not defined in scope");
    /* a Loop body's arguments are not visible after the Loop */
    EXPECT_ERROR("graph @g(%n: i64[], %c: bool[], %x: f32[2]) {\n"
                 "  %r = Loop(%n, %c, %x) : f32[2] {\n"
                 "    body(%i: i64[], %cond: bool[], %acc: f32[2]) {\n      return %cond, %acc\n    }\n"
                 "  }\n  %y = Add(%r, %acc) : f32[2]\n  return %y\n}\n",
                 "v.ir:7:3: error: operand %acc is used before its definition or outside its scope");
    /* but inner regions do see outer values */
    char *o = verify_text("graph @g(%p: bool[], %x: f32[2]) {\n"
                          "  %u = Relu(%x) : f32[2]\n"
                          "  %r = If(%p) : f32[2] {\n"
                          "    then_branch() {\n      %t = Add(%u, %x) : f32[2]\n      return %t\n    }\n"
                          "    else_branch() {\n      return %u\n    }\n"
                          "  }\n  return %r\n}\n",
                          IR_OK);
    free(o);
}

/* ---- counts --------------------------------------------------------------------------------------- */

Test(verify, operand_result_and_region_counts) {
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Relu(%x, %x) : f32[2]\n  return %a\n}\n",
                 "v.ir:2:3: error: Relu takes 1 operands, got 2");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Add(%x) : f32[2]\n  return %a\n}\n",
                 "error: Add takes 2 operands, got 1");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Clip(%x, %x, %x, %x) : f32[2]\n  return %a\n}\n",
                 "error: Clip takes 1 to 3 operands, got 4");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Concat() {axis = 0} : f32[2]\n  return %a\n}\n",
                 "error: Concat takes at least 1 operands, got 0");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a, %b = Relu(%x)\n  return %a\n}\n",
                 "v.ir:2:3: error: Relu has 1 results, got 2");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  Relu(%x)\n  return %x\n}\n", "error: Relu has 1 results, got 0");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Add(_, %x) : f32[2]\n  return %a\n}\n",
                 "error: required operand 0 of Add is missing");
    /* region count: only reachable through a corrupt node record */
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    IrTypeId t = vec(g, 2);
    IrValueId p = ir_region_add_arg(g, IR_ROOT_REGION, "p", ir_type_tensor(g, IR_DTYPE_BOOL, 0, NULL));
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    IrNodeId iff = unary(g, IR_ROOT_REGION, IR_OP_IF, p, "r", t);
    ir_region_set_outputs(g, ir_node_region_at(g, iff, 0), 1, &x);
    ir_region_set_outputs(g, ir_node_region_at(g, iff, 1), 1, &x);
    IrValueId r = ir_node_result(g, iff, 0);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &r);
    char *o = verify_graph(g, IR_OK);
    free(o);
    ir__node(g, iff)->n_regions = 1;
    o = verify_graph(g, IR_EVERIFY);
    cr_assert_not_null(strstr(o, "If needs 2 regions, has 1"), "%s", o);
    free(o);
    ir_graph_destroy(g);
}

/* ---- attributes ----------------------------------------------------------------------------------- */

Test(verify, attributes) {
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Relu(%x) {alpha = 0.5} : f32[2]\n  return %a\n}\n",
                 "v.ir:2:3: error: Relu has no attribute 'alpha'");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Softmax(%x) {axis = \"last\"} : f32[2]\n  return %a\n}\n",
                 "error: attribute 'axis' of Softmax must be int, got string");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Softmax(%x) {axis = 1.5} : f32[2]\n  return %a\n}\n",
                 "error: attribute 'axis' of Softmax must be int, got float");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Transpose(%x) {perm = [\"a\"]} : f32[2]\n  return %a\n}\n",
                 "error: attribute 'perm' of Transpose must be ints, got strings");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Cast(%x) {to = \"f16\"} : f16[2]\n  return %a\n}\n",
                 "error: attribute 'to' of Cast must be dtype, got string");
    EXPECT_ERROR("graph @g(%x: f32[2, 3], %y: f32[2, 3]) {\n  %c = Concat(%x, %y) : f32[4, 3]\n  return %c\n}\n",
                 "v.ir:2:3: error: Concat requires attribute 'axis'");
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Cast(%x) : f16[2]\n  return %a\n}\n",
                 "error: Cast requires attribute 'to'");
    /* programmatic: an out-of-range dtype and a dangling tensor */
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    IrTypeId t = vec(g, 2);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    IrNodeId c = unary(g, IR_ROOT_REGION, IR_OP_CAST, x, "c", 0);
    IrAttrValue dt = {.kind = IR_ATTR_DTYPE, .i = 77};
    ir_node_set_attr(g, c, "to", &dt);
    int64_t sd = 1;
    IrValueId shape = ir_region_add_arg(g, IR_ROOT_REGION, "s", ir_type_tensor_i64(g, IR_DTYPE_I64, 1, &sd));
    IrNodeId k = unary(g, IR_ROOT_REGION, IR_OP_CONSTANT_OF_SHAPE, shape, "k", 0);
    IrAttrValue tv = {.kind = IR_ATTR_TENSOR, .tensor = 55};
    ir_node_set_attr(g, k, "value", &tv);
    IrValueId outs[2] = {ir_node_result(g, c, 0), ir_node_result(g, k, 0)};
    ir_region_set_outputs(g, IR_ROOT_REGION, 2, outs);
    IrVerifyOptions o = {0, false};
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_verify_ex(g, &o, &d.diag), IR_EVERIFY);
    cr_assert_not_null(strstr(tu_diag_text(&d), "attribute 'to' is not a valid dtype"), "%s", tu_diag_text(&d));
    cr_assert_not_null(strstr(tu_diag_text(&d), "attribute 'value' refers to a missing tensor"), "%s", tu_diag_text(&d));
    cr_assert_eq(d.diag.n_errors, 2);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

/* ---- type rules ----------------------------------------------------------------------------------- */

Test(verify, type_rules) {
    EXPECT_ERROR("graph @g(%a: f32[2, 3], %b: f32[4, 3]) {\n  %c = Add(%a, %b) : f32[2, 3]\n  return %c\n}\n",
                 "v.ir:2:3: error: Add: cannot broadcast dim 0: 2 vs 4 (operand types f32[2, 3] and f32[4, 3])");
    EXPECT_ERROR("graph @g(%a: f32[2, 3], %b: f32[4, 5]) {\n  %c = MatMul(%a, %b) : f32[2, 5]\n  return %c\n}\n",
                 "v.ir:2:3: error: MatMul: contraction dim mismatch: 3 vs 4");
    EXPECT_ERROR("graph @g(%x: f32[2, 3], %y: f32[1, 2, 3]) {\n  %c = Concat(%x, %y) {axis = 0} : f32[3, 3]\n  return %c\n}\n",
                 "error: Concat: operand 1 has rank 3, expected 2");
    EXPECT_ERROR("graph @g(%a: f32[2, 3], %b: f32[3, 5]) {\n  %c = MatMul(%a, %b) : f32[2, 6]\n  return %c\n}\n",
                 "v.ir:2:3: error: result %c is declared f32[2, 6] but MatMul gives f32[2, 5]");
    EXPECT_ERROR("graph @g(%a: f32[2, 3], %b: f32[3, 5]) {\n  %c = MatMul(%a, %b) : f16[2, 5]\n  return %c\n}\n",
                 "error: result %c is declared f16[2, 5] but MatMul gives f32[2, 5]");
    EXPECT_ERROR("graph @g(%a: f32[2, 3], %b: i32[2, 3]) {\n  %c = Add(%a, %b) : f32[2, 3]\n  return %c\n}\n",
                 "error: Add:");
    /* broadcasting that is fine, and unknown dims that cannot be checked */
    char *o = verify_text("symbol B\ngraph @g(%a: f32[B, 1, 3], %b: f32[4, 3], %c: f32[?, 3]) {\n"
                          "  %d = Add(%a, %b) : f32[B, 4, 3]\n  %e = Add(%d, %c) : f32[B, 4, 3]\n  return %e\n}\n",
                          IR_OK);
    free(o);
    /* the type rules can be switched off */
    const char *bad = "graph @g(%a: f32[2, 3], %b: f32[4, 5]) {\n  %c = MatMul(%a, %b) : f32[2, 5]\n  return %c\n}\n";
    IrGraph *g = tu_parse(bad, "v.ir", NULL);
    IrVerifyOptions opt = {0, false};
    IrDiag q;
    ir_diag_init(&q, tu_diag_count_fn, NULL);
    cr_assert_eq(ir_verify_ex(g, &opt, &q), IR_OK);
    ir_graph_destroy(g);
}

Test(verify, control_flow_arity) {
    EXPECT_ERROR("graph @g(%p: bool[], %x: f32[2]) {\n  %r = If(%p) : f32[2] {\n"
                 "    then_branch() {\n      return %x, %x\n    }\n"
                 "    else_branch() {\n      return %x\n    }\n  }\n  return %r\n}\n",
                 "v.ir:2:3: error: If: then_branch returns 2 values for 1 results");
    EXPECT_ERROR("graph @g(%p: bool[], %x: f32[2]) {\n  %r = If(%p) : f32[2] {\n"
                 "    then_branch() {\n      return %x\n    }\n"
                 "    else_branch() {\n      return\n    }\n  }\n  return %r\n}\n",
                 "If: else_branch returns 0 values for 1 results");
    EXPECT_ERROR("graph @g(%n: i64[], %c: bool[], %x: f32[2]) {\n  %r = Loop(%n, %c, %x) : f32[2] {\n"
                 "    body(%i: i64[], %cond: bool[]) {\n      return %cond, %x\n    }\n  }\n  return %r\n}\n",
                 "v.ir:2:3: error: Loop: body takes 2 arguments, expected 3 (iteration, condition, 1 carried)");
}

/* ---- constants, outputs, incomplete graphs ------------------------------------------------------ */

Test(verify, graph_level_checks) {
    EXPECT_ERROR("graph @g(%x: f32[2]) {\n  %a = Relu(%x) : f32[2]\n  return\n}\n", "v.ir: error: graph has no outputs");
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    float data[3] = {1, 2, 3};
    IrConstId c = ir_const_create(g, vec(g, 2), data, sizeof data); /* 12 bytes for 8 */
    IrValueId w = ir_graph_add_const_value(g, "w", c);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &w);
    char *o = verify_graph(g, IR_EVERIFY);
    cr_assert_not_null(strstr(o, "constant %w: data size does not match its type"), "%s", o);
    free(o);
    /* an output id that does not exist */
    IrValueId bogus = 9999;
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &bogus);
    o = verify_graph(g, IR_EVERIFY);
    cr_assert_not_null(strstr(o, "graph output 0 is not defined"), "%s", o);
    free(o);
    ir_graph_destroy(g);
    /* a graph whose builder failed reports its status */
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", vec(g, 2));
    const char *dup[1] = {"x"};
    ir_node_create(g, IR_ROOT_REGION, IR_OP_RELU, 1, &x, 1, dup, NULL);
    if (ir_graph_status(g) != IR_OK) {
        TuDiag d;
        tu_diag_init(&d);
        cr_assert_eq(ir_verify(g, &d.diag), ir_graph_status(g));
        cr_assert_not_null(strstr(tu_diag_text(&d), "graph is incomplete"), "%s", tu_diag_text(&d));
        tu_diag_free(&d);
    }
    ir_graph_destroy(g);
}

/* ---- reporting ------------------------------------------------------------------------------------ */

static char *many_errors_text(int n) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_strbuf_puts(&b, "graph @g(%x: f32[2]) {\n");
    for (int i = 0; i < n; i++) ir_strbuf_printf(&b, "  %%a%d = Relu(%%x) {alpha = 1.0} : f32[2]\n", i);
    ir_strbuf_puts(&b, "  return %x\n}\n");
    return b.data;
}

Test(verify, error_cap) {
    char *text = many_errors_text(30);
    IrGraph *g = tu_parse(text, "many.ir", NULL);
    cr_assert_not_null(g);
    Counts c = {0};
    IrDiag d;
    ir_diag_init(&d, count_fn, &c);
    cr_assert_eq(ir_verify(g, &d), IR_EVERIFY);
    cr_assert_eq(c.errors, 20, "the default cap is 20 errors (got %u)", c.errors);
    cr_assert_eq(c.notes, 1, "plus one note");
    TuDiag td;
    tu_diag_init(&td);
    cr_assert_eq(ir_verify(g, &td.diag), IR_EVERIFY);
    const char *out = tu_diag_text(&td);
    cr_assert_not_null(strstr(out, "many.ir:2:3: error: Relu has no attribute 'alpha'"), "%s", out);
    cr_assert_not_null(strstr(out, "many.ir:21:3: error:"), "the 20th error is on line 21");
    cr_assert_null(strstr(out, "many.ir:22:3: error:"), "the 21st is not reported");
    cr_assert_not_null(strstr(out, "many.ir: note: stopped after 20 errors"), "%s", out);
    tu_diag_free(&td);
    /* a custom cap */
    memset(&c, 0, sizeof c);
    IrVerifyOptions o = {5, true};
    cr_assert_eq(ir_verify_ex(g, &o, &d), IR_EVERIFY);
    cr_assert_eq(c.errors, 5);
    cr_assert_eq(c.notes, 1);
    /* a cap above the count reports everything and no note */
    memset(&c, 0, sizeof c);
    IrVerifyOptions o2 = {100, true};
    cr_assert_eq(ir_verify_ex(g, &o2, &d), IR_EVERIFY);
    cr_assert_eq(c.errors, 30);
    cr_assert_eq(c.notes, 0);
    ir_graph_destroy(g);
    free(text);
    /* exactly 20 errors: all reported, no note */
    text = many_errors_text(20);
    g = tu_parse(text, "many.ir", NULL);
    memset(&c, 0, sizeof c);
    cr_assert_eq(ir_verify(g, &d), IR_EVERIFY);
    cr_assert_eq(c.errors, 20);
    cr_assert_eq(c.notes, 0);
    ir_graph_destroy(g);
    free(text);
    /* the sink's own cap counts but does not deliver */
    text = many_errors_text(30);
    g = tu_parse(text, "many.ir", NULL);
    memset(&c, 0, sizeof c);
    ir_diag_init(&d, count_fn, &c);
    d.max_errors = 3;
    cr_assert_eq(ir_verify(g, &d), IR_EVERIFY);
    cr_assert_eq(c.errors, 3);
    cr_assert_eq(d.n_errors, 20);
    ir_graph_destroy(g);
    free(text);
}

Test(verify, locations) {
    /* from text: file:line:col of the node, the source line and a caret (when the text is kept) */
    const char *text = "graph @g(%x: f32[2]) {\n  %a = Relu(%x) : f32[2]\n    %b = Relu(%a) {alpha = 1.0} : f32[2]\n  return %b\n}\n";
    char *o = verify_text(text, IR_EVERIFY);
    cr_assert_str_eq(o, "v.ir:3:5: error: Relu has no attribute 'alpha'\n"
                        "      %b = Relu(%a) {alpha = 1.0} : f32[2]\n"
                        "      ^\n");
    free(o);
    /* without the source text: only the first line */
    IrGraph *g = tu_parse(text, "v.ir", NULL);
    o = verify_graph(g, IR_EVERIFY);
    cr_assert_str_eq(o, "v.ir:3:5: error: Relu has no attribute 'alpha'\n");
    free(o);
    ir_graph_destroy(g);
    /* programmatic: the node's loc(...) is used, and its name is mentioned */
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    IrTypeId t = vec(g, 2);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    IrNodeId n = unary(g, IR_ROOT_REGION, IR_OP_RELU, x, "y", t);
    IrAttrValue v = {.kind = IR_ATTR_INT, .i = 1};
    ir_node_set_attr(g, n, "bogus", &v);
    IrValueId y = ir_node_result(g, n, 0);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &y);
    o = verify_graph(g, IR_EVERIFY);
    cr_assert_str_eq(o, "error: Relu has no attribute 'bogus'\n", "no location at all");
    free(o);
    ir_node_set_name(g, n, "relu_7");
    IrLoc loc = {ir_str_intern_cstr(g, "model.py"), 42, 9};
    ir_node_set_loc(g, n, loc);
    o = verify_graph(g, IR_EVERIFY);
    cr_assert_str_eq(o, "model.py:42:9: error: Relu has no attribute 'bogus' (node 'relu_7')\n");
    free(o);
    /* a text position wins over loc */
    ir_graph_set_source_file(g, "m.ir");
    ir_node_set_text_pos(g, n, 5, 3);
    o = verify_graph(g, IR_EVERIFY);
    cr_assert_str_eq(o, "m.ir:5:3: error: Relu has no attribute 'bogus' (node 'relu_7')\n");
    free(o);
    ir_graph_destroy(g);
    /* loc() written in text is used when there is no text position (e.g. after binary I/O) */
}

Test(verify, every_error_is_reported_not_just_the_first) {
    const char *text = "graph @g(%x: f32[2, 3], %y: f32[4, 5]) {\n"
                       "  %a = Relu(%x, %x) : f32[2, 3]\n"
                       "  %b = MatMul(%x, %y) : f32[2, 5]\n"
                       "  %c = Softmax(%a) {axis = \"x\", bogus = 1} : f32[2, 3]\n"
                       "  return %c, %b\n}\n";
    char *o = verify_text(text, IR_EVERIFY);
    cr_assert_not_null(strstr(o, "v.ir:2:3: error: Relu takes 1 operands, got 2"), "%s", o);
    cr_assert_not_null(strstr(o, "v.ir:3:3: error: MatMul: contraction dim mismatch: 3 vs 4"), "%s", o);
    cr_assert_not_null(strstr(o, "v.ir:4:3: error: attribute 'axis' of Softmax must be int, got string"), "%s", o);
    cr_assert_not_null(strstr(o, "v.ir:4:3: error: Softmax has no attribute 'bogus'"), "%s", o);
    /* in program order */
    cr_assert_lt(strstr(o, "v.ir:2:3"), strstr(o, "v.ir:3:3"));
    cr_assert_lt(strstr(o, "v.ir:3:3"), strstr(o, "v.ir:4:3"));
    free(o);
}
