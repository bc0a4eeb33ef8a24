/* The text format: every corpus model parses, verifies and prints to a fixed point; every
 * attribute kind, constant dtype and literal form round trips; and every file in
 * corpus/errors fails with exactly the diagnostic its `# expect:` line names, followed by
 * the source line and a caret under the reported column.
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Parses `text` (must succeed) and returns its canonical print. */
static char *canon_ok(const char *text, const char *file) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, file, &d);
    cr_assert_not_null(g, "%s does not parse:\n%s", file, tu_diag_text(&d));
    char *p = tu_print(g);
    cr_assert_not_null(p);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    return p;
}

/* ---- corpus models ------------------------------------------------------------------------------ */

Test(text, corpus_models_parse_verify_and_print_to_a_fixed_point) {
    size_t n;
    char **files = tu_list_dir("corpus", ".ir", &n);
    cr_assert_not_null(files);
    cr_assert_geq(n, 5, "mlp, conv_block, attention, control_flow, symbolic");
    for (size_t i = 0; i < n; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_load_corpus(files[i], &d);
        cr_assert_not_null(g, "%s: %s", files[i], tu_diag_text(&d));
        cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s: %s", files[i], tu_diag_text(&d));
        cr_assert_gt(ir_graph_num_nodes(g), 0, "%s", files[i]);
        char *p1 = tu_print(g);
        cr_assert_not_null(p1);
        char *p2 = canon_ok(p1, files[i]);
        cr_assert_str_eq(p1, p2, "%s: print(parse(print(x))) differs from print(x)", files[i]);
        /* the canonical form verifies as well */
        IrGraph *g2 = tu_parse(p1, files[i], &d);
        cr_assert_eq(ir_verify(g2, &d.diag), IR_OK, "%s (canonical): %s", files[i], tu_diag_text(&d));
        cr_assert_eq(ir_graph_num_nodes(g2), ir_graph_num_nodes(g));
        cr_assert_eq(ir_graph_num_const_values(g2), ir_graph_num_const_values(g));
        ir_graph_destroy(g2);
        free(p1);
        free(p2);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
    tu_free_list(files);
}

Test(text, printing_is_deterministic) {
    size_t len;
    char *src = tu_corpus_read("attention.ir", &len);
    cr_assert_not_null(src);
    char *a = tu_canon(src, "attention.ir"), *b = tu_canon(src, "attention.ir");
    cr_assert_not_null(a);
    cr_assert_str_eq(a, b, "same input, same bytes");
    free(a);
    free(b);
    free(src);
}

/* ---- attributes ------------------------------------------------------------------------------- */

static const char attr_text[] =
    "symbol S\n"
    "constraint S % 8 == 0\n"
    "opset \"\" 17\n"
    "meta \"producer\" = \"test \\\"q\\\" \\\\ \\n end\"\n"
    "\n"
    "graph @\"attr graph\"(%x: f32[2, 4], %\"onnx::Conv_1\": f32[4, 2], %s: i64[2], %seq: f32[S, 2, 3]) {\n"
    "  %a = Softmax(%x) {axis = -1} : f32[2, 4]\n"
    "  %b = LeakyRelu(%a) {alpha = 0.1} : f32[2, 4]\n"
    "  %c = LeakyRelu(%b) {alpha = 1e-05} : f32[2, 4]\n"
    "  %d = LeakyRelu(%c) {alpha = inf} : f32[2, 4]\n"
    "  %e = LeakyRelu(%d) {alpha = nan} : f32[2, 4]\n"
    "  %f = LeakyRelu(%e) {alpha = -0.0} : f32[2, 4]\n"
    "  %g = Gelu(%f) {approximate = \"a\\\"b\\\\c\\nd\\x01\\te\xc3\xa9\"} : f32[2, 4]\n"
    "  %h = Transpose(%g) {perm = [1, 0]} : f32[4, 2]\n"
    "  %i = Transpose(%h) {perm = []} : f32[2, 4]\n"
    "  %j = Cast(%i) {to = f16} : f16[2, 4]\n"
    "  %k = ConstantOfShape(%s) {value = f32[1] [0.5]} : f32[?, ?]\n"
    "  %l, %m = RNN(%seq, %x, %\"onnx::Conv_1\") {activation_alpha = [0.5, 1e-05], activation_beta = [], "
    "activations = [\"Tanh\", \"Relu\"], hidden_size = 4} : f32[S, 1, 2, 4], f32[1, 2, 4]\n"
    "  %n = RNN(%seq, %x, %\"onnx::Conv_1\") {activations = []}\n"
    "  %out.1 = MatMul(%x, %\"onnx::Conv_1\") : f32[2, 2]\n"
    "  %y, _ = Dropout(%out.1) : f32[2, 2]\n"
    "  %z = Clip(%y, _, %y) : f32[2, 2]\n"
    "  return %z, %j, %k, %l\n"
    "}\n";

static IrNodeId node_of(const IrGraph *g, const char *result) {
    IrValueId v = ir_value_find(g, result, strlen(result));
    cr_assert_neq(v, 0, "no value %%%s", result);
    return ir_value_def_node(g, v);
}

static IrAttrValue attr_of(const IrGraph *g, const char *result, const char *name) {
    IrAttrValue v;
    cr_assert(ir_node_attr(g, node_of(g, result), name, &v), "%%%s has no attribute %s", result, name);
    return v;
}

Test(text, attributes_of_every_kind_round_trip) {
    char *p = canon_ok(attr_text, "attrs.ir");
    cr_assert_str_eq(p, attr_text, "the canonical text prints back byte for byte");
    free(p);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(attr_text, "attrs.ir", &d);
    cr_assert_not_null(g);
    cr_assert_str_eq(ir_graph_name(g), "attr graph");
    IrAttrValue v = attr_of(g, "a", "axis");
    cr_assert(v.kind == IR_ATTR_INT && v.i == -1);
    v = attr_of(g, "b", "alpha");
    cr_assert(v.kind == IR_ATTR_FLOAT && v.f == (double)0.1f, "float attributes are f32");
    v = attr_of(g, "c", "alpha");
    cr_assert(v.kind == IR_ATTR_FLOAT && v.f == (double)1e-05f);
    v = attr_of(g, "d", "alpha");
    cr_assert(isinf(v.f) && v.f > 0);
    v = attr_of(g, "e", "alpha");
    cr_assert(isnan(v.f));
    v = attr_of(g, "f", "alpha");
    cr_assert(v.f == 0 && signbit(v.f), "-0.0 keeps its sign");
    v = attr_of(g, "g", "approximate");
    cr_assert_eq(v.kind, IR_ATTR_STRING);
    cr_assert_str_eq(ir_str(g, v.s), "a\"b\\c\nd\x01\te\xc3\xa9", "escapes decode, UTF-8 passes through");
    v = attr_of(g, "h", "perm");
    cr_assert(v.kind == IR_ATTR_INTS && v.count == 2 && v.ints[0] == 1 && v.ints[1] == 0);
    v = attr_of(g, "i", "perm");
    cr_assert(v.kind == IR_ATTR_INTS && v.count == 0, "empty list typed ints by the schema");
    v = attr_of(g, "j", "to");
    cr_assert(v.kind == IR_ATTR_DTYPE && v.i == IR_DTYPE_F16);
    v = attr_of(g, "k", "value");
    cr_assert_eq(v.kind, IR_ATTR_TENSOR);
    cr_assert_eq(ir_type_dtype(g, ir_const_type(g, v.tensor)), IR_DTYPE_F32);
    cr_assert_eq(((const float *)ir_const_data(g, v.tensor))[0], 0.5f);
    v = attr_of(g, "l", "activation_alpha");
    cr_assert(v.kind == IR_ATTR_FLOATS && v.count == 2 && v.floats[0] == 0.5 && v.floats[1] == (double)1e-05f);
    v = attr_of(g, "l", "activation_beta");
    cr_assert(v.kind == IR_ATTR_FLOATS && v.count == 0, "empty list typed floats by the schema");
    v = attr_of(g, "l", "activations");
    cr_assert(v.kind == IR_ATTR_STRINGS && v.count == 2);
    cr_assert_str_eq(ir_str(g, v.strs[1]), "Relu");
    v = attr_of(g, "n", "activations");
    cr_assert(v.kind == IR_ATTR_STRINGS && v.count == 0, "empty list typed strings by the schema");
    /* absent operand and result */
    IrNodeId clip = node_of(g, "z");
    cr_assert_eq(ir_node_num_operands(g, clip), 3);
    cr_assert_eq(ir_node_operand(g, clip, 1), 0);
    IrNodeId drop = node_of(g, "y");
    cr_assert_eq(ir_node_num_results(g, drop), 2);
    cr_assert_eq(ir_node_result(g, drop, 1), 0);
    /* quoted names */
    cr_assert_neq(ir_value_find(g, "onnx::Conv_1", 12), 0);
    cr_assert_eq(ir_value_type(g, ir_value_find(g, "n", 1)), 0, "no ': types' means unknown type");
    const char *k, *mv;
    ir_graph_meta_at(g, 0, &k, &mv);
    cr_assert_str_eq(mv, "test \"q\" \\ \n end");
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(text, numbers_in_attributes_follow_the_schema) {
    /* an integer literal for a float attribute is a float; a float list with ints is floats */
    const char *in = "graph @g(%x: f32[4]) {\n"
                     "  %a = LeakyRelu(%x) {alpha = 2} : f32[4]\n"
                     "  %b = Selu(%a) {alpha = 1, gamma = -3} : f32[4]\n"
                     "  return %b\n}\n";
    char *p = canon_ok(in, "n.ir");
    cr_assert_not_null(strstr(p, "{alpha = 2.0}"), "%s", p);
    cr_assert_not_null(strstr(p, "{alpha = 1.0, gamma = -3.0}"), "%s", p);
    free(p);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(in, "n.ir", &d);
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- constants ---------------------------------------------------------------------------------- */

static const char consts_text[] =
    "graph @consts(%x: f32[1]) {\n"
    "  const %a: f64[3] = [1.5, -2.0, 1e+300]\n"
    "  const %b: f32[4] = [0.1, -0.0, inf, 3.4028235e+38]\n"
    "  const %c: f16[3] = [0.5, -65504.0, 6.1035156e-05]\n"
    "  const %d: bf16[2] = [1.0, -3.3895314e+38]\n"
    "  const %e: f8e4m3fn[3] = [448.0, -0.001953125, 0.0]\n"
    "  const %f: f8e5m2[3] = [57344.0, -inf, 1.5258789e-05]\n"
    "  const %g: i64[2] = [-9223372036854775808, 9223372036854775807]\n"
    "  const %h: i32[2] = [-2147483648, 7]\n"
    "  const %i: i16[2] = [-32768, 32767]\n"
    "  const %j: i8[2] = [-128, 127]\n"
    "  const %k: u64[1] = [18446744073709551615]\n"
    "  const %l: u32[1] = [4294967295]\n"
    "  const %m: u16[1] = [65535]\n"
    "  const %n: u8[2] = [0, 255]\n"
    "  const %o: bool[3] = [true, false, true]\n"
    "  const %p: f32[] = [2.5]\n"
    "  const %q: i64[0] = []\n"
    "  return %x\n"
    "}\n";

static const void *const_data(const IrGraph *g, const char *name) {
    IrValueId v = ir_value_find(g, name, strlen(name));
    cr_assert_neq(v, 0, "%s", name);
    return ir_const_data(g, ir_value_const(g, v));
}

Test(text, inline_constants_of_every_dtype) {
    char *p = canon_ok(consts_text, "c.ir");
    cr_assert_str_eq(p, consts_text);
    free(p);
    IrGraph *g = tu_parse(consts_text, "c.ir", NULL);
    cr_assert_eq(((const double *)const_data(g, "a"))[2], 1e300);
    const float *b = const_data(g, "b");
    cr_assert(b[0] == 0.1f && b[1] == 0 && signbit(b[1]) && isinf(b[2]) && b[3] == 3.4028235e+38f);
    const uint16_t *c = const_data(g, "c");
    cr_assert(c[0] == 0x3800 && c[1] == 0xFBFF && c[2] == 0x0400, "f16 bits");
    const uint16_t *dd = const_data(g, "d");
    cr_assert(dd[0] == 0x3F80 && dd[1] == 0xFF7F, "bf16 bits");
    const uint8_t *e = const_data(g, "e");
    cr_assert(e[0] == 0x7E && e[1] == 0x81 && e[2] == 0, "e4m3fn bits 0x%02x 0x%02x", e[0], e[1]);
    const uint8_t *f = const_data(g, "f");
    cr_assert(f[0] == 0x7B && f[1] == 0xFC && f[2] == 0x01, "e5m2 bits");
    const int64_t *gg = const_data(g, "g");
    cr_assert(gg[0] == INT64_MIN && gg[1] == INT64_MAX);
    cr_assert_eq(((const int32_t *)const_data(g, "h"))[0], INT32_MIN);
    cr_assert_eq(((const int16_t *)const_data(g, "i"))[0], INT16_MIN);
    cr_assert_eq(((const int8_t *)const_data(g, "j"))[0], INT8_MIN);
    cr_assert_eq(((const uint64_t *)const_data(g, "k"))[0], UINT64_MAX);
    cr_assert_eq(((const uint32_t *)const_data(g, "l"))[0], UINT32_MAX);
    cr_assert_eq(((const uint16_t *)const_data(g, "m"))[0], UINT16_MAX);
    cr_assert_eq(((const uint8_t *)const_data(g, "n"))[1], 255);
    const uint8_t *o = const_data(g, "o");
    cr_assert(o[0] == 1 && o[1] == 0 && o[2] == 1);
    IrValueId q = ir_value_find(g, "q", 1);
    cr_assert_eq(ir_const_nbytes(g, ir_value_const(g, q)), 0);
    ir_graph_destroy(g);
    /* bool also accepts 0/1 and prints canonically */
    p = canon_ok("graph @g() {\n  const %o: bool[2] = [1, 0]\n  return %o\n}\n", "b.ir");
    cr_assert_not_null(strstr(p, "= [true, false]"), "%s", p);
    free(p);
}

Test(text, large_constants_print_as_base64) {
    char text[1024];
    float vals[17];
    for (int i = 0; i < 17; i++) vals[i] = (float)i * 0.25f;
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    int64_t dims[1] = {17};
    IrConstId c = ir_const_create(g, ir_type_tensor_i64(g, IR_DTYPE_F32, 1, dims), vals, sizeof vals);
    IrValueId v = ir_graph_add_const_value(g, "w", c);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &v);
    char *p = tu_print(g);
    cr_assert_not_null(strstr(p, "const %w: f32[17] = base64 \"AAAAAAAAgD4AAAA/AABAPwAAgD8AAKA/AADAPwAA4D8AAABAAAAQQAAAIEAAADBAAABAQAAAUEAAAGBAAABwQAAAgEA=\""),
                       "%s", p);
    /* and back: the bytes are identical */
    IrGraph *g2 = tu_parse(p, "w.ir", NULL);
    cr_assert_not_null(g2);
    cr_assert_eq(memcmp(const_data(g2, "w"), vals, sizeof vals), 0);
    ir_graph_destroy(g2);
    free(p);
    ir_graph_destroy(g);
    /* 16 elements still print inline */
    snprintf(text, sizeof text, "graph @g() {\n  const %%w: i8[16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]\n  return %%w\n}\n");
    p = canon_ok(text, "i.ir");
    cr_assert_str_eq(p, text);
    free(p);
}

Test(text, nan_forces_base64_bit_exact) {
    /* f32 NaN with a payload and a negative quiet NaN, then 1.0 */
    uint32_t bits[3] = {0x7FC00123u, 0xFFC00000u, 0x3F800000u};
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    int64_t dims[1] = {3};
    IrConstId c = ir_const_create(g, ir_type_tensor_i64(g, IR_DTYPE_F32, 1, dims), bits, sizeof bits);
    IrValueId v = ir_graph_add_const_value(g, "w", c);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &v);
    char *p = tu_print(g);
    cr_assert_not_null(strstr(p, "= base64 \""), "NaN is never printed inline: %s", p);
    IrGraph *g2 = tu_parse(p, "n.ir", NULL);
    cr_assert_not_null(g2);
    cr_assert_eq(memcmp(const_data(g2, "w"), bits, sizeof bits), 0, "NaN payload and sign survive");
    ir_graph_destroy(g2);
    free(p);
    ir_graph_destroy(g);
    /* `nan` written inline parses and then prints as base64 */
    p = canon_ok("graph @g() {\n  const %w: f16[2] = [nan, 1.0]\n  return %w\n}\n", "n.ir");
    cr_assert_not_null(strstr(p, "base64"), "%s", p);
    g2 = tu_parse(p, "n.ir", NULL);
    const uint16_t *h = const_data(g2, "w");
    cr_assert(isnan(ir_f16_to_f32(h[0])) && h[1] == 0x3C00);
    ir_graph_destroy(g2);
    free(p);
    /* an f16 value that only reads back inexactly from text would also use base64: the
     * printer checks every element round trips */
    p = canon_ok("graph @g() {\n  const %w: f16[1] = base64 \"AHw=\"\n  return %w\n}\n", "i.ir");
    cr_assert_not_null(strstr(p, "= [inf]"), "f16 +inf prints inline: %s", p);
    free(p);
}

Test(text, external_weights_are_mapped_and_printed_back) {
    char *dir = tu_mkdtemp();
    cr_assert_not_null(dir);
    char *bin = tu_path_join(dir, "weights.bin");
    float w[6] = {9, 9, 1.5f, -2, 0.25f, 8}; /* the constant starts at offset 8 */
    cr_assert(tu_write_file(bin, w, sizeof w));
    char *model = tu_path_join(dir, "model.ir");
    const char *text = "graph @g(%x: f32[4]) {\n"
                       "  const %w: f32[4] = external \"weights.bin\" offset 8\n"
                       "  %y = Add(%x, %w) : f32[4]\n"
                       "  return %y\n"
                       "}\n";
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, model, &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    const float *data = const_data(g, "w");
    cr_assert(data[0] == 1.5f && data[1] == -2 && data[2] == 0.25f && data[3] == 8);
    IrStrId path;
    uint64_t off;
    cr_assert(ir_const_external(g, ir_value_const(g, ir_value_find(g, "w", 1)), &path, &off));
    cr_assert_str_eq(ir_str(g, path), "weights.bin");
    cr_assert_eq(off, 8);
    char *p = tu_print(g);
    cr_assert_str_eq(p, text, "external constants print as the same reference");
    free(p);
    ir_graph_destroy(g);
    /* a file too short for the offset is an error naming the file */
    const char *short_text = "graph @g() {\n  const %w: f32[4] = external \"weights.bin\" offset 16\n  return %w\n}\n";
    g = tu_parse(short_text, model, &d);
    cr_assert_null(g);
    cr_assert_not_null(strstr(tu_diag_text(&d), "are shorter than offset 16 + 16 bytes"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(bin);
    free(model);
    free(dir);
}

/* ---- names, symbols, comments ------------------------------------------------------------------- */

Test(text, quoted_names_round_trip) {
    const char *in = "graph @\"my graph\"(%\"onnx::Conv_1\": f32[2], %\"a b\": f32[2]) {\n"
                     "  %\"out/0\" = Add(%\"onnx::Conv_1\", %\"a b\") : f32[2]\n"
                     "  %\"quote\\\"d\" = Neg(%\"out/0\") : f32[2]\n"
                     "  %plain_1.x = Relu(%\"quote\\\"d\") : f32[2]\n"
                     "  return %plain_1.x\n"
                     "}\n";
    char *p = canon_ok(in, "q.ir");
    cr_assert_str_eq(p, in);
    IrGraph *g = tu_parse(in, "q.ir", NULL);
    cr_assert_neq(ir_value_find(g, "quote\"d", 7), 0);
    cr_assert_neq(ir_value_find(g, "a b", 3), 0);
    ir_graph_destroy(g);
    free(p);
    /* a name that needs no quotes loses them */
    p = canon_ok("graph @\"g\"(%\"x\": f32[1]) {\n  return %\"x\"\n}\n", "q.ir");
    cr_assert_str_eq(p, "graph @g(%x: f32[1]) {\n  return %x\n}\n");
    free(p);
}

Test(text, symbolic_dims_and_both_modulo_spellings) {
    const char *a = "symbol S, B\nconstraint S % 8 == 0\nconstraint B in [1, 4]\nconstraint S == B*8 + 8\n"
                    "graph @g(%x: f32[B, S/8, S%8, (S + 1)*B]) {\n  return %x\n}\n";
    const char *b = "symbol S, B\nconstraint S %8 == 0\nconstraint B in [1,4]\nconstraint S == 8 * B + 8\n"
                    "graph @g(%x: f32[B, S / 8, S %8, B * (1 + S)]) {\n  return %x\n}\n";
    char *pa = canon_ok(a, "a.ir"), *pb = canon_ok(b, "b.ir");
    cr_assert_str_eq(pa, pb, "`S % 8` and `S %8` mean the same");
    cr_assert_str_eq(pa, "symbol S, B\n"
                         "constraint S % 8 == 0\n"
                         "constraint B in [1, 4]\n"
                         "constraint S == B*8 + 8\n"
                         "\n"
                         "graph @g(%x: f32[B, S/8, S%8, B*S + B]) {\n"
                         "  return %x\n"
                         "}\n");
    IrGraph *g = tu_parse(a, "a.ir", NULL);
    cr_assert_eq(ir_graph_num_constraints(g), 3);
    IrConstraint c = ir_graph_constraint(g, 0);
    cr_assert_eq(c.kind, IR_CONSTRAINT_DIVISIBLE);
    cr_assert_eq(c.lo, 8);
    cr_assert_eq(ir_graph_constraint(g, 1).kind, IR_CONSTRAINT_RANGE);
    cr_assert_eq(ir_graph_constraint(g, 2).kind, IR_CONSTRAINT_EQ);
    ir_graph_destroy(g);
    free(pa);
    free(pb);
    /* unknown dims, unranked and fully unknown types */
    char *p = canon_ok("graph @g(%x: f32[?, 3], %y: i8[*], %z: bool[]) {\n  %w = Relu(%x) : ?\n  return %w\n}\n", "u.ir");
    cr_assert_str_eq(p, "graph @g(%x: f32[?, 3], %y: i8[*], %z: bool[]) {\n  %w = Relu(%x)\n  return %w\n}\n");
    free(p);
}

Test(text, comments_and_whitespace_are_free) {
    const char *in = "# leading comment\n"
                     "\n"
                     "graph   @g ( %x :f32[ 2 ,3 ] )# trailing\n"
                     "{\n"
                     "\t%y=Relu( %x ):f32[2,3]   # a comment after a node\n"
                     "  # a comment line inside\n"
                     "  return %y # done\n"
                     "}\n"
                     "# after\n";
    char *p = canon_ok(in, "c.ir");
    cr_assert_str_eq(p, "graph @g(%x: f32[2, 3]) {\n  %y = Relu(%x) : f32[2, 3]\n  return %y\n}\n");
    free(p);
    /* CRLF line ends parse too */
    p = canon_ok("graph @g(%x: f32[1]) {\r\n  return %x\r\n}\r\n", "crlf.ir");
    cr_assert_str_eq(p, "graph @g(%x: f32[1]) {\n  return %x\n}\n");
    free(p);
}

Test(text, regions_round_trip) {
    const char *in = "graph @g(%p: bool[], %x: f32[2], %n: i64[]) {\n"
                     "  %r = If(%p) : f32[2] {\n"
                     "    then_branch() {\n"
                     "      %t = Relu(%x) : f32[2]\n"
                     "      return %t\n"
                     "    }\n"
                     "    else_branch() {\n"
                     "      return %x\n"
                     "    }\n"
                     "  }\n"
                     "  %f, %s = Loop(%n, %p, %r) : f32[2], f32[?, 2] {\n"
                     "    body(%i: i64[], %c: bool[], %acc: f32[2]) {\n"
                     "      %nx = Add(%acc, %acc) : f32[2]\n"
                     "      return %c, %nx, %nx\n"
                     "    }\n"
                     "  }\n"
                     "  return %f, %s\n"
                     "}\n";
    char *p = canon_ok(in, "r.ir");
    cr_assert_str_eq(p, in);
    free(p);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(in, "r.ir", &d);
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- error files -------------------------------------------------------------------------------- */

/* The next line of `s` (without '\n') into a malloc'd string; advances *s. */
static char *next_line(const char **s) {
    const char *e = strchr(*s, '\n');
    size_t n = e ? (size_t)(e - *s) : strlen(*s);
    char *l = strndup(*s, n);
    *s += n + (e ? 1 : 0);
    return l;
}

/* Line `line` (1-based) of text as the sink shows it: control bytes but tab as spaces. */
static char *source_line(const char *text, size_t len, uint32_t line) {
    const char *p = text, *end = text + len;
    for (uint32_t l = 1; l < line && p < end; p++)
        if (*p == '\n') l++;
    const char *e = p;
    while (e < end && *e != '\n') e++;
    size_t n = (size_t)(e - p);
    if (n > 400) n = 400;
    char *out = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        out[i] = (c < 0x20 && c != '\t') ? ' ' : (char)c;
    }
    out[n] = 0;
    return out;
}

static void check_error_file(const char *name) {
    size_t len;
    char *text = tu_corpus_read(name, &len);
    cr_assert_not_null(text, "%s", name);
    const char *base = strrchr(name, '/') + 1;
    cr_assert_eq(strncmp(text, "# expect: ", 10), 0, "%s must start with '# expect: '", base);
    const char *nl = strchr(text, '\n');
    char *expect = strndup(text + 10, (size_t)(nl - text - 10));
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    IrStatus s = ir_parse_text(text, len, base, &d.diag, &g);
    bool verify_case = strncmp(base, "verify_", 7) == 0;
    if (verify_case) {
        cr_assert_eq(s, IR_OK, "%s should parse: %s", base, tu_diag_text(&d));
        ir_graph_set_source_text(g, text, len);
        cr_assert_eq(ir_verify(g, &d.diag), IR_EVERIFY, "%s should fail verification", base);
    } else {
        cr_assert_eq(s, IR_ESYNTAX, "%s: status %s", base, ir_status_name(s));
        cr_assert_null(g);
        cr_assert_eq(d.diag.n_errors, 1, "%s: the parser stops at the first error", base);
    }
    const char *out = tu_diag_text(&d);
    char *l1 = next_line(&out);
    cr_assert_str_eq(l1, expect, "%s: first diagnostic line", base);
    /* file:line:col: ... then the source line and a caret under the column */
    unsigned line = 0, col = 0;
    size_t bl = strlen(base);
    if (sscanf(l1 + bl, ":%u:%u:", &line, &col) == 2) {
        char *l2 = next_line(&out), *l3 = next_line(&out);
        char *src = source_line(text, len, line);
        cr_assert_eq(strncmp(l2, "  ", 2), 0);
        cr_assert_str_eq(l2 + 2, src, "%s: second line is the source line", base);
        cr_assert_eq(strncmp(l3, "  ", 2), 0);
        size_t k = 2;
        for (unsigned i = 1; i < col; i++, k++)
            cr_assert(l3[k] == ' ' || l3[k] == '\t', "%s: caret line has only blanks before '^'", base);
        cr_assert_str_eq(l3 + k, "^", "%s: caret under column %u: '%s'", base, col, l3);
        free(l2);
        free(l3);
        free(src);
    } else {
        cr_assert(verify_case, "%s: parse errors always carry line and column", base);
    }
    free(l1);
    free(expect);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    free(text);
}

Test(text, error_files_report_their_expected_diagnostic) {
    size_t n;
    char **files = tu_list_dir("corpus/errors", ".ir", &n);
    cr_assert_not_null(files);
    size_t n_parse = 0, n_verify = 0;
    for (size_t i = 0; i < n; i++) {
        char rel[512];
        snprintf(rel, sizeof rel, "errors/%s", files[i]);
        check_error_file(rel);
        if (strncmp(files[i], "verify_", 7) == 0) n_verify++;
        else n_parse++;
    }
    cr_assert_geq(n_parse, 15, "at least 15 syntax error files (have %zu)", n_parse);
    cr_assert_geq(n_verify, 6, "at least 6 verifier error files (have %zu)", n_verify);
    tu_free_list(files);
}

Test(text, error_positions_in_the_middle_of_text) {
    /* the filename is used as given, NULL becomes <input> */
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    const char *t = "graph @g(%x: f32[1]) {\n  %y = Nope(%x)\n  return %y\n}\n";
    cr_assert_eq(ir_parse_text(t, strlen(t), NULL, &d.diag, &g), IR_ESYNTAX);
    cr_assert_eq(strncmp(tu_diag_text(&d), "<input>:2:8: error: unknown op 'Nope'\n", 38), 0, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    /* an empty input and one with only comments */
    tu_diag_init(&d);
    cr_assert_eq(ir_parse_text("", 0, "e.ir", &d.diag, &g), IR_ESYNTAX);
    cr_assert_not_null(strstr(tu_diag_text(&d), "e.ir:1:1: error: expected 'graph', found end of file"),
                       "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    /* a diagnostic sink is optional */
    cr_assert_eq(ir_parse_text("graph", 5, "x.ir", NULL, &g), IR_ESYNTAX);
    cr_assert_null(g);
}

Test(text, hostile_nesting_is_bounded) {
    /* deeply nested parentheses in a dim must fail cleanly, not overflow the stack */
    size_t depth = 100000;
    char *t = malloc(depth * 2 + 100);
    char *p = t + sprintf(t, "graph @g(%%x: f32[");
    for (size_t i = 0; i < depth; i++) *p++ = '(';
    *p++ = '1';
    for (size_t i = 0; i < depth; i++) *p++ = ')';
    strcpy(p, "]) {\n  return %x\n}\n");
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(t, "deep.ir", &d);
    cr_assert_null(g);
    cr_assert_not_null(strstr(tu_diag_text(&d), "too deep"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    free(t);
    /* deeply nested regions too */
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_strbuf_puts(&b, "graph @g(%p: bool[], %x: f32[1]) {\n");
    for (int i = 0; i < 200; i++) ir_strbuf_printf(&b, "%%r%d = If(%%p) : f32[1] {\nthen_branch() {\n", i);
    tu_diag_init(&d);
    g = tu_parse(b.data, "nest.ir", &d);
    cr_assert_null(g);
    cr_assert_not_null(strstr(tu_diag_text(&d), "too deep"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    ir_strbuf_free(&b);
}
