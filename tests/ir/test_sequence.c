/* Sequence and optional types end to end: the seq<T>/opt<T> type API and interning, text
 * print/parse fixed point, binary and ONNX round trips, verifier errors on misuse, the
 * interpreter's kernels on small cases (construct, at, insert, erase, length, split, concat,
 * map, optional ops, Identity/If/Loop carrying sequences), SequenceProto/OptionalProto test
 * data, and the passes leaving sequences computed.
 */
#include "testutil.h"
#include "passes/passes.h"
#include "validate/validate.h"

#include "onnx.pb-c.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static IrGraph *parse_ok(const char *text) { return tu_parse_ok(text, "seq.ir"); }

/* Parses and verifies; returns the diagnostics text (malloc'd) of the expected failure. */
static char *verify_fails(const char *text) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "seq.ir", &d);
    if (g) {
        cr_assert_neq(ir_verify(g, &d.diag), IR_OK, "verify accepted:\n%s", text);
        ir_graph_destroy(g);
    }
    char *msg = strdup(tu_diag_text(&d));
    tu_diag_free(&d);
    return msg;
}

static IrTensor f32(uint32_t rank, const int64_t *dims, const float *vals) {
    IrTensor t;
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F32, rank, dims), IR_OK);
    if (ir_tensor_numel(&t)) memcpy(t.data, vals, ir_tensor_nbytes(&t));
    return t;
}

static IrTensor i64(int64_t v) {
    IrTensor t;
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_I64, 0, NULL), IR_OK);
    ((int64_t *)t.data)[0] = v;
    return t;
}

/* A sequence of the given f32 vectors (lens[k] elements each, values taken in order). */
static IrTensor f32_seq(uint32_t n, const int64_t *lens, const float *vals) {
    IrTensor s;
    ir_tensor_seq_init(&s, IR_DTYPE_F32);
    for (uint32_t k = 0; k < n; k++) {
        IrTensor e = f32(1, &lens[k], vals);
        vals += lens[k];
        cr_assert_eq(ir_tensor_seq_insert(&s, s.n_items, &e), IR_OK);
    }
    return s;
}

/* Runs g on inputs; outputs must hold ir_graph_num_outputs entries. */
static void run_ok(const IrGraph *g, IrTensor *ins, uint32_t n_in, IrTensor *outs) {
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = ir_interp_run(g, ins, n_in, outs, NULL, &d.diag);
    cr_assert_eq(s, IR_OK, "run failed: %s", tu_diag_text(&d));
    tu_diag_free(&d);
}

static char *run_fails(const IrGraph *g, IrTensor *ins, uint32_t n_in) {
    TuDiag d;
    tu_diag_init(&d);
    IrTensor outs[4] = {{0}};
    cr_assert_neq(ir_interp_run(g, ins, n_in, outs, NULL, &d.diag), IR_OK);
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) ir_tensor_free(&outs[i]);
    char *msg = strdup(tu_diag_text(&d));
    tu_diag_free(&d);
    return msg;
}

static void expect_vec(const IrTensor *t, uint32_t n, const float *want) {
    cr_assert_eq(t->form, IR_TYPE_TENSOR);
    cr_assert_eq(t->dtype, IR_DTYPE_F32);
    cr_assert_eq(ir_tensor_numel(t), n, "numel %lld, want %u", (long long)ir_tensor_numel(t), n);
    for (uint32_t i = 0; i < n; i++) cr_expect_float_eq(((float *)t->data)[i], want[i], 1e-6, "element %u", i);
}

static void free_all(IrTensor *t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) ir_tensor_free(&t[i]);
}

/* ---- types --------------------------------------------------------------------------------- */

Test(seq_types, interned_with_kind_and_element) {
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    int64_t d3[2] = {-1, 3};
    IrTypeId e = ir_type_tensor_i64(g, IR_DTYPE_F32, 2, d3);
    IrTypeId s = ir_type_seq(g, e), o = ir_type_opt(g, s);
    cr_assert(s && o && s != e && o != s);
    cr_expect_eq(ir_type_seq(g, e), s, "interned: equal types have equal ids");
    cr_expect_eq(ir_type_opt(g, s), o);
    cr_expect_eq(ir_type_kind(g, e), IR_TYPE_TENSOR);
    cr_expect_eq(ir_type_kind(g, s), IR_TYPE_SEQ);
    cr_expect_eq(ir_type_kind(g, o), IR_TYPE_OPT);
    cr_expect_eq(ir_type_elem(g, s), e);
    cr_expect_eq(ir_type_elem(g, o), s);
    cr_expect_eq(ir_type_elem_dtype(g, o), IR_DTYPE_F32);
    /* tensor-only accessors see an unknown type */
    cr_expect_eq(ir_type_dtype(g, s), IR_DTYPE_NONE);
    cr_expect_eq(ir_type_rank(g, s), IR_RANK_UNKNOWN);
    cr_expect_null(ir_type_dims(g, o));
    /* sequences hold tensors; optionals do not nest */
    cr_expect_eq(ir_type_seq(g, s), 0);
    cr_expect_eq(ir_type_opt(g, o), 0);
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_type_print(g, o, &b);
    cr_expect_str_eq(b.data, "opt<seq<f32[?, 3]>>");
    ir_strbuf_free(&b);
    ir_graph_destroy(g);
}

Test(seq_types, join_widens_element_shapes) {
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    int64_t a[1] = {2}, b[1] = {3}, c[2] = {2, 2};
    IrTypeId ta = ir_type_seq(g, ir_type_tensor_i64(g, IR_DTYPE_F32, 1, a));
    IrTypeId tb = ir_type_seq(g, ir_type_tensor_i64(g, IR_DTYPE_F32, 1, b));
    IrTypeId tc = ir_type_seq(g, ir_type_tensor_i64(g, IR_DTYPE_F32, 2, c));
    int64_t q[1] = {-1};
    cr_expect_eq(ir_type_join(g, ta, tb), ir_type_seq(g, ir_type_tensor_i64(g, IR_DTYPE_F32, 1, q)));
    cr_expect_eq(ir_type_join(g, ta, tc), ir_type_seq(g, ir_type_tensor(g, IR_DTYPE_F32, IR_RANK_UNKNOWN, NULL)));
    cr_expect(ir_type_compatible(g, ta, ta));
    cr_expect_not(ir_type_compatible(g, ta, tb));
    cr_expect_not(ir_type_compatible(g, ta, ir_type_opt(g, ir_type_elem(g, ta))));
    ir_graph_destroy(g);
}

static const char *TYPES_TEXT =
    "graph @types(%a: seq<f32[?, 3]>, %b: seq<f32>, %c: opt<f32[2]>, %d: opt<seq<i64>>, %e: seq<?>, %f: opt<?>) {\n"
    "  %a2 = Identity(%a) : seq<f32[?, 3]>\n"
    "  %d2 = Identity(%d) : opt<seq<i64>>\n"
    "  return %a2, %b, %c, %d2, %e, %f\n"
    "}\n";

Test(seq_text, print_is_a_fixed_point_of_parse) {
    char *once = tu_canon(TYPES_TEXT, "types.ir");
    cr_assert(once);
    cr_expect(strstr(once, "%a: seq<f32[?, 3]>") && strstr(once, "%b: seq<f32>") && strstr(once, "%c: opt<f32[2]>") &&
                  strstr(once, "%d: opt<seq<i64>>") && strstr(once, "%e: seq<?>") && strstr(once, "%f: opt<?>"),
              "%s", once);
    char *twice = tu_canon(once, "types.ir");
    cr_assert(twice);
    cr_expect_str_eq(once, twice);
    /* seq<f32[*]> is the same type as seq<f32> */
    char *star = tu_canon("graph @g(%x: seq<f32[*]>) {\n  return %x\n}\n", "s.ir");
    cr_assert(star);
    cr_expect(strstr(star, "%x: seq<f32>"), "%s", star);
    free(once), free(twice), free(star);
}

Test(seq_text, malformed_types_are_located_errors) {
    const char *bad[][2] = {
        {"graph @g(%x: seq<seq<f32>>) {\n  return %x\n}\n", "a sequence holds tensors"},
        {"graph @g(%x: opt<opt<f32>>) {\n  return %x\n}\n", "an optional cannot hold an optional"},
        {"graph @g(%x: seq<f33>) {\n  return %x\n}\n", "unknown dtype 'f33'"},
        {"graph @g(%x: seq<f32[2]) {\n  return %x\n}\n", "expected '>'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_parse(bad[i][0], "bad.ir", &d);
        cr_expect_null(g, "accepted %s", bad[i][0]);
        ir_graph_destroy(g);
        cr_expect(strstr(tu_diag_text(&d), bad[i][1]) && strstr(tu_diag_text(&d), "bad.ir:1:"), "%s", tu_diag_text(&d));
        tu_diag_free(&d);
    }
}

/* A node with regions but neither attributes nor result types prints as `Op(...) {` and parses
 * back (the region list is told from an attribute list). */
Test(seq_text, region_node_without_types_round_trips) {
    const char *text = "graph @g(%c: bool[], %x: f32[2]) {\n"
                       "  %y = If(%c) {\n"
                       "    then_branch() {\n"
                       "      return %x\n"
                       "    }\n"
                       "    else_branch() {\n"
                       "      return %x\n"
                       "    }\n"
                       "  }\n"
                       "  return %y\n"
                       "}\n";
    char *once = tu_canon(text, "if.ir");
    cr_assert(once);
    cr_expect_str_eq(once, text);
    free(once);
}

/* ---- binary and ONNX round trips ----------------------------------------------------------- */

static const char *ROUND_TEXT =
    "graph @round(%a: seq<f32[?, 3]>, %o: opt<seq<i64>>, %x: f32[2, 3]) {\n"
    "  %s = SequenceInsert(%a, %x) : seq<f32[?, 3]>\n"
    "  %n = SequenceLength(%s) : i64[]\n"
    "  %e = SequenceEmpty() {dtype = i32} : seq<i32>\n"
    "  %p = Optional(%x) : opt<f32[2, 3]>\n"
    "  %q = Optional() : opt<seq<f32>>\n"
    "  %h = OptionalHasElement(%o) : bool[]\n"
    "  %m = SequenceMap(%s) : seq<f32> {\n"
    "    body(%t: f32[?, 3]) {\n"
    "      %u = Neg(%t) : f32[?, 3]\n"
    "      return %u\n"
    "    }\n"
    "  }\n"
    "  return %s, %n, %e, %p, %q, %h, %m\n"
    "}\n";

Test(seq_binary, round_trip_prints_the_same) {
    IrGraph *g = parse_ok(ROUND_TEXT);
    char *want = tu_print(g);
    char *dir = tu_mkdtemp(), *path = tu_path_join(dir, "r.irb");
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_write_binary(g, path, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrGraph *h = NULL;
    cr_assert_eq(ir_read_binary(path, &d.diag, &h), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(h, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    char *got = tu_print(h);
    cr_expect_str_eq(got, want);
    tu_diag_free(&d);
    free(got), free(want), free(path);
    tu_rmtree(dir);
    free(dir);
    ir_graph_destroy(h);
    ir_graph_destroy(g);
}

/* Files from before seq/opt (no type_kind column) still load: a tensor-only graph writes none. */
Test(seq_binary, tensor_only_files_have_no_kind_column) {
    IrGraph *g = parse_ok("graph @t(%x: f32[2]) {\n  %y = Neg(%x) : f32[2]\n  return %y\n}\n");
    char *dir = tu_mkdtemp(), *p1 = tu_path_join(dir, "t.irb");
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_write_binary(g, p1, &d.diag), IR_OK);
    size_t len;
    char *bytes = tu_read_file(p1, &len);
    cr_assert(bytes);
    /* field 71, wire type 2 (packed fixed32): key varint 0xBA 0x04 */
    bool found = false;
    for (size_t i = 0; i + 1 < len; i++) found |= (uint8_t)bytes[i] == 0xBA && bytes[i + 1] == 0x04;
    cr_expect_not(found, "a tensor-only graph wrote the type_kind column");
    IrGraph *h = NULL;
    cr_assert_eq(ir_read_binary(p1, &d.diag, &h), IR_OK, "%s", tu_diag_text(&d));
    ir_graph_destroy(h);
    free(bytes), free(p1);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir);
    ir_graph_destroy(g);
}

Test(seq_onnx, export_then_import_prints_the_same) {
    IrGraph *g = parse_ok(ROUND_TEXT);
    char *want = tu_print(g);
    char *dir = tu_mkdtemp(), *path = tu_path_join(dir, "r.onnx");
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_onnx_export(g, path, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrGraph *h = NULL;
    cr_assert_eq(ir_load(path, &d.diag, &h), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(h, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    char *got = tu_print(h);
    /* the exporter adds the opset line; compare the graph bodies */
    cr_assert(strstr(got, "graph @round"), "%s", got);
    cr_expect_str_eq(strstr(got, "graph @round"), want);
    tu_diag_free(&d);
    free(got), free(want), free(path);
    tu_rmtree(dir);
    free(dir);
    ir_graph_destroy(h);
    ir_graph_destroy(g);
}

/* ---- verifier -------------------------------------------------------------------------------- */

Test(seq_verify, misuse_is_reported_naming_the_op) {
    const char *cases[][2] = {
        {"graph @g(%s: seq<f32[2]>) {\n  %y = Add(%s, %s)\n  return %y\n}\n", "this op takes tensors only"},
        {"graph @g(%x: f32[2]) {\n  %y = Relu(%x) : seq<f32[2]>\n  return %y\n}\n", "this op gives tensors only"},
        {"graph @g(%x: f32[2], %p: i64[]) {\n  %y = SequenceAt(%x, %p)\n  return %y\n}\n",
         "SequenceAt: operand 0 must be a sequence, got f32[2]"},
        {"graph @g(%s: seq<f32[2]>, %x: i64[2]) {\n  %y = SequenceInsert(%s, %x)\n  return %y\n}\n",
         "has dtype i64, the sequence holds f32"},
        {"graph @g(%s: seq<f32[2]>, %p: f32[]) {\n  %y = SequenceErase(%s, %p)\n  return %y\n}\n",
         "the position must be i32 or i64"},
        {"graph @g(%s: seq<f32[2]>) {\n  %n = SequenceLength(%s) : seq<i64>\n  return %n\n}\n",
         "declared seq<i64> but SequenceLength gives i64[]"},
        {"graph @g(%x: f32[2], %y: i64[2]) {\n  %s = SequenceConstruct(%x, %y)\n  return %s\n}\n", "has dtype i64"},
        {"graph @g(%c: bool[], %s: seq<f32>, %x: f32[2]) {\n  %y = If(%c) {\n    then_branch() {\n      return %s\n    }\n"
         "    else_branch() {\n      return %x\n    }\n  }\n  return %y\n}\n",
         "differ in kind"},
        {"graph @g(%s: seq<f32[2]>) {\n  %y = ConcatFromSequence(%s) {axis = 3}\n  return %y\n}\n", "axis 3 out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *msg = verify_fails(cases[i][0]);
        cr_expect(strstr(msg, cases[i][1]), "case %zu: wanted '%s' in:\n%s", i, cases[i][1], msg);
        free(msg);
    }
}

/* ---- interpreter ----------------------------------------------------------------------------- */

Test(seq_interp, construct_at_insert_erase_length) {
    IrGraph *g = parse_ok("graph @g(%a: f32[2], %b: f32[3], %p: i64[]) {\n"
                          "  %s = SequenceConstruct(%a, %b) : seq<f32[?]>\n"
                          "  %s2 = SequenceInsert(%s, %a, %p) : seq<f32[?]>\n"
                          "  %last = SequenceAt(%s2, %p) : f32[?]\n"
                          "  %s3 = SequenceErase(%s2) : seq<f32[?]>\n"
                          "  %n = SequenceLength(%s3) : i64[]\n"
                          "  return %s2, %last, %n\n"
                          "}\n");
    int64_t d2 = 2, d3 = 3;
    float va[2] = {1, 2}, vb[3] = {3, 4, 5};
    IrTensor ins[3] = {f32(1, &d2, va), f32(1, &d3, vb), i64(-1)}, outs[3] = {{0}};
    run_ok(g, ins, 3, outs);
    /* insert at -1: before the last element */
    cr_assert_eq(outs[0].form, IR_TYPE_SEQ);
    cr_assert_eq(outs[0].n_items, 3);
    expect_vec(&outs[0].items[0], 2, va);
    expect_vec(&outs[0].items[1], 2, va);
    expect_vec(&outs[0].items[2], 3, vb);
    expect_vec(&outs[1], 3, vb);
    cr_expect_eq(((int64_t *)outs[2].data)[0], 2);
    free_all(outs, 3);
    /* out of range */
    ir_tensor_free(&ins[2]);
    ins[2] = i64(7);
    char *msg = run_fails(g, ins, 3);
    cr_expect(strstr(msg, "position 7 is out of range for a sequence of 2 elements"), "%s", msg);
    free(msg);
    free_all(ins, 3);
    ir_graph_destroy(g);
}

Test(seq_interp, split_and_concat) {
    IrGraph *g = parse_ok("graph @g(%x: f32[2, 3], %k: i64[]) {\n"
                          "  const %sizes: i64[2] = [1, 2]\n"
                          "  %rows = SplitToSequence(%x) {keepdims = 0} : seq<f32[3]>\n"
                          "  %cols = SplitToSequence(%x, %sizes) {axis = 1} : seq<f32[2, ?]>\n"
                          "  %chunks = SplitToSequence(%x, %k) {axis = 1} : seq<f32[2, ?]>\n"
                          "  %back = ConcatFromSequence(%cols) {axis = 1} : f32[2, ?]\n"
                          "  %stacked = ConcatFromSequence(%rows) {axis = 1, new_axis = 1} : f32[3, ?]\n"
                          "  return %rows, %cols, %chunks, %back, %stacked\n"
                          "}\n");
    int64_t d[2] = {2, 3};
    float x[6] = {0, 1, 2, 3, 4, 5};
    IrTensor ins[2] = {f32(2, d, x), i64(2)}, outs[5] = {{0}};
    run_ok(g, ins, 2, outs);
    cr_assert_eq(outs[0].n_items, 2);
    cr_expect_eq(outs[0].items[0].rank, 1, "keepdims = 0 drops the axis");
    expect_vec(&outs[0].items[1], 3, (float[]){3, 4, 5});
    cr_assert_eq(outs[1].n_items, 2);
    expect_vec(&outs[1].items[0], 2, (float[]){0, 3});
    expect_vec(&outs[1].items[1], 4, (float[]){1, 2, 4, 5});
    cr_assert_eq(outs[2].n_items, 2, "a scalar split of 2 over 3 columns: 2 + 1");
    cr_expect_eq(outs[2].items[1].dims[1], 1);
    expect_vec(&outs[3], 6, x);
    cr_assert_eq(outs[4].rank, 2);
    cr_expect_eq(outs[4].dims[0], 3);
    cr_expect_eq(outs[4].dims[1], 2);
    expect_vec(&outs[4], 6, (float[]){0, 3, 1, 4, 2, 5});
    free_all(outs, 5);
    free_all(ins, 2);
    ir_graph_destroy(g);
}

Test(seq_interp, sequence_map_with_a_tensor_operand) {
    IrGraph *g = parse_ok("graph @g(%s: seq<f32[?]>, %b: f32[1]) {\n"
                          "  %y, %n = SequenceMap(%s, %b) : seq<f32>, seq<i64> {\n"
                          "    body(%e: f32[?], %c: f32[1]) {\n"
                          "      %t = Add(%e, %c) : f32[?]\n"
                          "      %sh = Shape(%e) : i64[1]\n"
                          "      return %t, %sh\n"
                          "    }\n"
                          "  }\n"
                          "  return %y, %n\n"
                          "}\n");
    int64_t lens[2] = {1, 2}, one = 1;
    IrTensor ins[2] = {f32_seq(2, lens, (float[]){1, 2, 3}), f32(1, &one, (float[]){10})}, outs[2] = {{0}};
    run_ok(g, ins, 2, outs);
    cr_assert_eq(outs[0].n_items, 2);
    expect_vec(&outs[0].items[0], 1, (float[]){11});
    expect_vec(&outs[0].items[1], 2, (float[]){12, 13});
    cr_assert_eq(outs[1].n_items, 2);
    cr_expect_eq(((int64_t *)outs[1].items[1].data)[0], 2);
    free_all(outs, 2);
    free_all(ins, 2);
    ir_graph_destroy(g);
}

Test(seq_interp, optional_ops) {
    IrGraph *g = parse_ok("graph @g(%x: f32[2], %o: opt<f32[2]>) {\n"
                          "  %p = Optional(%x) : opt<f32[2]>\n"
                          "  %none = Optional() : opt<seq<f32>>\n"
                          "  %hp = OptionalHasElement(%p) : bool[]\n"
                          "  %hn = OptionalHasElement(%none) : bool[]\n"
                          "  %ho = OptionalHasElement(%o) : bool[]\n"
                          "  %v = OptionalGetElement(%p) : f32[2]\n"
                          "  return %hp, %hn, %ho, %v, %none\n"
                          "}\n");
    int64_t two = 2;
    IrTensor ins[2] = {f32(1, &two, (float[]){5, 6}), {0}}, outs[5] = {{0}};
    ir_tensor_opt_init(&ins[1], IR_DTYPE_F32);
    run_ok(g, ins, 2, outs);
    cr_expect_eq(((uint8_t *)outs[0].data)[0], 1);
    cr_expect_eq(((uint8_t *)outs[1].data)[0], 0);
    cr_expect_eq(((uint8_t *)outs[2].data)[0], 0, "an empty optional input");
    expect_vec(&outs[3], 2, (float[]){5, 6});
    cr_expect_eq(outs[4].form, IR_TYPE_OPT);
    cr_expect_eq(outs[4].n_items, 0);
    free_all(outs, 5);
    /* getting from an empty optional is an error naming the op */
    IrGraph *h = parse_ok("graph @h(%o: opt<f32[2]>) {\n  %v = OptionalGetElement(%o) : f32[2]\n  return %v\n}\n");
    char *msg = run_fails(h, &ins[1], 1);
    cr_expect(strstr(msg, "OptionalGetElement") && strstr(msg, "the optional is empty"), "%s", msg);
    free(msg);
    /* the wrong form for an input */
    msg = run_fails(h, &ins[0], 1);
    cr_expect(strstr(msg, "input 'o' is a tensor"), "%s", msg);
    free(msg);
    free_all(ins, 2);
    ir_graph_destroy(h);
    ir_graph_destroy(g);
}

Test(seq_interp, identity_if_and_loop_carry_sequences) {
    IrGraph *g = parse_ok("graph @g(%c: bool[], %trips: i64[], %x: f32[1]) {\n"
                          "  const %go: bool[] = [true]\n"
                          "  %empty = SequenceEmpty() : seq<f32>\n"
                          "  %acc = Loop(%trips, %go, %empty) : seq<f32> {\n"
                          "    body(%i: i64[], %ci: bool[], %s: seq<f32>) {\n"
                          "      %s2 = SequenceInsert(%s, %x) : seq<f32>\n"
                          "      %k = Identity(%ci) : bool[]\n"
                          "      return %k, %s2\n"
                          "    }\n"
                          "  }\n"
                          "  %pick = If(%c) : seq<f32> {\n"
                          "    then_branch() {\n"
                          "      return %acc\n"
                          "    }\n"
                          "    else_branch() {\n"
                          "      return %empty\n"
                          "    }\n"
                          "  }\n"
                          "  %same = Identity(%pick) : seq<f32>\n"
                          "  return %same\n"
                          "}\n");
    int64_t one = 1;
    IrTensor c, ins[3] = {{0}, i64(3), f32(1, &one, (float[]){7})}, out = {0};
    cr_assert_eq(ir_tensor_alloc(&c, IR_DTYPE_BOOL, 0, NULL), IR_OK);
    ((uint8_t *)c.data)[0] = 1;
    ins[0] = c;
    run_ok(g, ins, 3, &out);
    cr_assert_eq(out.form, IR_TYPE_SEQ);
    cr_assert_eq(out.n_items, 3);
    for (uint32_t k = 0; k < 3; k++) expect_vec(&out.items[k], 1, (float[]){7});
    ir_tensor_free(&out);
    ((uint8_t *)ins[0].data)[0] = 0;
    run_ok(g, ins, 3, &out);
    cr_expect_eq(out.n_items, 0);
    ir_tensor_free(&out);
    free_all(ins, 3);
    ir_graph_destroy(g);
}

/* ---- test data files -------------------------------------------------------------------------- */

/* Appends a length-delimited field. */
static size_t put_field(uint8_t *buf, size_t at, uint32_t field, const uint8_t *p, size_t n) {
    buf[at++] = (uint8_t)(field << 3 | 2);
    buf[at++] = (uint8_t)n; /* small payloads only */
    memcpy(buf + at, p, n);
    return at + n;
}

Test(seq_pb, sequence_and_optional_protos_are_read_by_form) {
    float v0[2] = {1, 2}, v1[1] = {3};
    int64_t d0[1] = {2}, d1[1] = {1};
    uint8_t t0[64], t1[64], seq[256], opt[300];
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    tp.has_data_type = 1;
    tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tp.n_dims = 1, tp.dims = d0, tp.n_float_data = 2, tp.float_data = v0;
    size_t n0 = onnx__tensor_proto__pack(&tp, t0);
    tp.dims = d1, tp.n_float_data = 1, tp.float_data = v1;
    size_t n1 = onnx__tensor_proto__pack(&tp, t1);
    size_t ns = 0;
    seq[ns++] = 2 << 3, seq[ns++] = 1; /* elem_type = TENSOR */
    ns = put_field(seq, ns, 3, t0, n0);
    ns = put_field(seq, ns, 3, t1, n1);
    size_t no = 0;
    opt[no++] = 2 << 3, opt[no++] = 3; /* elem_type = SEQUENCE */
    no = put_field(opt, no, 5, seq, ns);
    char *dir = tu_mkdtemp(), *ps = tu_path_join(dir, "s.pb"), *po = tu_path_join(dir, "o.pb");
    cr_assert(tu_write_file(ps, seq, ns) && tu_write_file(po, opt, no));
    TuDiag d;
    tu_diag_init(&d);
    IrTensor s, o;
    cr_assert_eq(ir_pb_value_read(ps, IR_TYPE_SEQ, &d.diag, &s), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(s.n_items, 2);
    expect_vec(&s.items[0], 2, v0);
    expect_vec(&s.items[1], 1, v1);
    cr_assert_eq(ir_pb_value_read(po, IR_TYPE_OPT, &d.diag, &o), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(o.n_items, 1);
    cr_assert_eq(o.items[0].form, IR_TYPE_SEQ);
    /* compare: equal, then one element off */
    IrTolerance tol = ir_tolerance_default(IR_DTYPE_F32, false);
    IrCompareMetrics m;
    ir_compare_tensors(&s, &o.items[0], &tol, &m);
    cr_expect(m.comparable && m.pass && m.numel == 3);
    ((float *)o.items[0].items[1].data)[0] = 4;
    ir_compare_tensors(&s, &o.items[0], &tol, &m);
    cr_expect(m.comparable && !m.pass);
    cr_expect_float_eq(m.max_abs_err, 1.0, 1e-9);
    ir_compare_tensors(&s, &o, &tol, &m);
    cr_expect_not(m.comparable, "a sequence against an optional");
    /* a truncated file is a syntax error, not a crash */
    cr_assert(tu_write_file(ps, seq, ns - 3));
    IrTensor bad;
    cr_expect_neq(ir_pb_value_read(ps, IR_TYPE_SEQ, &d.diag, &bad), IR_OK);
    ir_tensor_free(&s), ir_tensor_free(&o);
    tu_diag_free(&d);
    free(ps), free(po);
    tu_rmtree(dir);
    free(dir);
}

/* ---- passes ---------------------------------------------------------------------------------- */

static IrStatus run_pipeline(IrGraph *g, const char *text, TuDiag *d) {
    IrPipeline *p;
    IrStatus s = ir_pipeline_parse(text, &d->diag, &p);
    if (s) return s;
    IrPipelineOptions po = {true, IR_PRINT_NEVER, NULL, stderr, NULL};
    s = ir_pipeline_run(p, g, &po, &d->diag);
    ir_pipeline_destroy(p);
    return s;
}

Test(seq_passes, default_and_fuse_keep_results) {
    const char *text = "graph @g(%a: f32[2], %b: f32[2]) {\n"
                       "  const %one: f32[2] = [1.0, 1.0]\n"
                       "  %c = SequenceConstruct(%one, %one) : seq<f32[2]>\n"
                       "  %s = SequenceInsert(%c, %a) : seq<f32[2]>\n"
                       "  %t = Identity(%s) : seq<f32[2]>\n"
                       "  %u = Identity(%s) : seq<f32[2]>\n"
                       "  %x = ConcatFromSequence(%t) {axis = 0} : f32[?]\n"
                       "  %y = ConcatFromSequence(%u) {axis = 0} : f32[?]\n"
                       "  %z = Add(%x, %y) : f32[?]\n"
                       "  %w = Relu(%z) : f32[?]\n"
                       "  return %w, %s\n"
                       "}\n";
    IrGraph *ref = parse_ok(text);
    const char *pipes[] = {"default", "fuse", "cse,dce,const-fold"};
    int64_t two = 2;
    for (size_t k = 0; k < 3; k++) {
        IrGraph *g = parse_ok(text);
        TuDiag d;
        tu_diag_init(&d);
        IrStatus s = run_pipeline(g, pipes[k], &d);
        cr_assert_eq(s, IR_OK, "%s: %s", pipes[k], tu_diag_text(&d));
        cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s: %s", pipes[k], tu_diag_text(&d));
        IrTensor ins[2] = {f32(1, &two, (float[]){-3, 2}), f32(1, &two, (float[]){0, 0})};
        IrTensor want[2] = {{0}}, got[2] = {{0}};
        run_ok(ref, ins, 2, want);
        run_ok(g, ins, 2, got);
        IrTolerance tol = ir_tolerance_default(IR_DTYPE_F32, false);
        for (int i = 0; i < 2; i++) {
            IrCompareMetrics m;
            ir_compare_tensors(&want[i], &got[i], &tol, &m);
            cr_expect(m.pass, "%s: output %d differs (%s)", pipes[k], i, m.reason);
        }
        cr_expect_eq(got[1].form, IR_TYPE_SEQ);
        free_all(want, 2), free_all(got, 2), free_all(ins, 2);
        tu_diag_free(&d);
        ir_graph_destroy(g);
    }
    ir_graph_destroy(ref);
}

/* ---- hostile input --------------------------------------------------------------------------- */

/* Corrupted binary files and truncated texts with seq/opt types are refused or read, never a
 * crash (this runs under ASan/UBSan in CI). */
Test(seq_hostile, corrupted_binary_and_truncated_text_never_crash) {
    IrGraph *g = parse_ok(ROUND_TEXT);
    char *dir = tu_mkdtemp(), *path = tu_path_join(dir, "r.irb");
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_write_binary(g, path, &d.diag), IR_OK);
    size_t len;
    char *bytes = tu_read_file(path, &len);
    cr_assert(bytes && len > 128);
    TuRng r;
    tu_rng_seed(&r, 42);
    uint32_t loaded = 0;
    for (int it = 0; it < 300; it++) {
        char *m = malloc(len);
        memcpy(m, bytes, len);
        for (int k = 0; k < 4; k++) m[64 + tu_rng_below(&r, len - 64)] ^= (char)(1u << tu_rng_below(&r, 8));
        IrDiag quiet;
        ir_diag_init(&quiet, tu_diag_count_fn, NULL);
        IrGraph *h = NULL;
        if (ir_read_binary_mem(m, len, "m.irb", &quiet, &h) == IR_OK) {
            loaded++;
            if (ir_verify(h, &quiet) == IR_OK) free(tu_print(h));
            ir_graph_destroy(h);
        }
        free(m);
    }
    cr_log_info("%u of 300 corrupted files still loaded", loaded);
    size_t tl = strlen(ROUND_TEXT);
    for (size_t cut = 0; cut < tl; cut += 7) {
        IrDiag quiet;
        ir_diag_init(&quiet, tu_diag_count_fn, NULL);
        IrGraph *h = NULL;
        if (ir_parse_text(ROUND_TEXT, cut, "cut.ir", &quiet, &h) == IR_OK) ir_graph_destroy(h);
    }
    free(bytes), free(path);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir);
    ir_graph_destroy(g);
}

/* shape-infer types undeclared sequence results and keeps declared ones that say more. */
Test(seq_passes, shape_infer_types_sequences) {
    IrGraph *g = parse_ok("symbol N\n"
                          "graph @g(%s: seq<f32[N]>, %x: f32[N, 2]) {\n"
                          "  %m = SequenceMap(%s) {\n"
                          "    body(%e: ?) {\n"
                          "      %t = Neg(%e)\n"
                          "      return %t\n"
                          "    }\n"
                          "  }\n"
                          "  %p = SplitToSequence(%x) {axis = 1} : seq<f32[N, 1]>\n"
                          "  %q = SequenceInsert(%p, %x)\n"
                          "  return %m, %q\n"
                          "}\n");
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(run_pipeline(g, "shape-infer", &d), IR_OK, "%s", tu_diag_text(&d));
    char *t = tu_print(g);
    cr_expect(strstr(t, "%m = SequenceMap(%s) : seq<f32[N]>"), "%s", t);
    cr_expect(strstr(t, "body(%e: f32[N])"), "%s", t);
    cr_expect(strstr(t, "%p = SplitToSequence(%x) {axis = 1} : seq<f32[N, 1]>"), "%s", t);
    cr_expect(strstr(t, "%q = SequenceInsert(%p, %x) : seq<f32[N, ?]>"), "%s", t);
    free(t);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}
