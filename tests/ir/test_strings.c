/* String tensors end to end: text and binary round trips of string constants (escapes, NUL and
 * UTF-8 bytes), .npy '<U' files written and read back (object arrays refused), Cast between
 * strings and numbers, StringNormalizer, Equal and data movement on strings in the interpreter,
 * and the verifier refusing arithmetic on strings.
 */
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static const char *CONST_TEXT =
    "graph @s(%x: string[2, 2]) {\n"
    "  const %w: string[2, 2] = [\"a\\x00b\", \"h\xc3\xa9\", \"\", \"q\\\"\\\\\\n\"]\n"
    "  %e = Equal(%x, %w) : bool[2, 2]\n"
    "  %t = Transpose(%w) {perm = [1, 0]} : string[2, 2]\n"
    "  return %e, %t\n"
    "}\n";

/* Element i of a string constant as a NUL-terminated copy (embedded NULs shown as '0'). */
static void elem_text(IrStringElem e, char *buf, size_t cap) {
    size_t n = e.len < cap - 1 ? e.len : cap - 1;
    for (size_t i = 0; i < n; i++) buf[i] = e.data[i] ? e.data[i] : '0';
    buf[n] = 0;
}

static IrConstId const_of(const IrGraph *g, const char *name) {
    IrValueId v = ir_value_find(g, name, strlen(name));
    cr_assert(v, "no value %s", name);
    return ir_value_const(g, v);
}

Test(strings, text_print_is_a_fixed_point_and_keeps_bytes) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(CONST_TEXT, "s.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrConstId c = const_of(g, "w");
    const void *blob = ir_const_data(g, c);
    cr_assert(ir_string_blob_valid(blob, ir_const_nbytes(g, c), 4));
    IrStringElem e0 = ir_string_blob_at(blob, 4, 0), e1 = ir_string_blob_at(blob, 4, 1);
    IrStringElem e2 = ir_string_blob_at(blob, 4, 2), e3 = ir_string_blob_at(blob, 4, 3);
    cr_assert_eq(e0.len, 3);
    cr_assert(memcmp(e0.data, "a\0b", 3) == 0, "NUL kept inside an element");
    cr_assert_eq(e1.len, 3, "UTF-8 bytes kept as they are");
    cr_assert_eq(e2.len, 0);
    cr_assert_eq(e3.len, 4);
    cr_assert(memcmp(e3.data, "q\"\\\n", 4) == 0);
    char *p = tu_print(g);
    cr_assert_str_eq(p, CONST_TEXT, "canonical printing reproduces the text");
    free(p);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(strings, malformed_literals_are_errors) {
    static const char *bad[] = {
        "graph @s() {\n  const %w: string[2] = [\"a\"]\n  return %w\n}\n",
        "graph @s() {\n  const %w: string[1] = [1]\n  return %w\n}\n",
        "graph @s() {\n  const %w: string[1] = base64 \"AAAA\"\n  return %w\n}\n",
        "graph @s() {\n  const %w: string[1] = [\"\\q\"]\n  return %w\n}\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_parse(bad[i], "bad.ir", &d);
        cr_assert_null(g, "case %zu parsed", i);
        cr_assert(strstr(tu_diag_text(&d), "bad.ir:2:"), "case %zu: %s", i, tu_diag_text(&d));
        tu_diag_free(&d);
    }
}

Test(strings, binary_and_onnx_round_trips) {
    char *dir = tu_mkdtemp();
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(CONST_TEXT, "s.ir", &d);
    cr_assert(g);
    const char *exts[] = {"s.irb", "s.onnx"};
    for (int k = 0; k < 2; k++) {
        char *path = tu_path_join(dir, exts[k]);
        cr_assert_eq(ir_save(g, path, &d.diag), IR_OK, "%s", tu_diag_text(&d));
        IrGraph *h = NULL;
        cr_assert_eq(ir_load(path, &d.diag, &h), IR_OK, "%s", tu_diag_text(&d));
        cr_assert_eq(ir_verify(h, &d.diag), IR_OK, "%s", tu_diag_text(&d));
        IrConstId a = const_of(g, "w"), b = const_of(h, "w");
        cr_assert_eq(ir_const_nbytes(g, a), ir_const_nbytes(h, b), "%s", exts[k]);
        cr_assert(memcmp(ir_const_data(g, a), ir_const_data(h, b), ir_const_nbytes(g, a)) == 0, "%s", exts[k]);
        char *p = tu_print(h);
        cr_assert(strstr(p, "[\"a\\x00b\", \"h\xc3\xa9\", \"\", \"q\\\"\\\\\\n\"]"), "%s: %s", exts[k], p);
        free(p);
        ir_graph_destroy(h);
        free(path);
    }
    ir_graph_destroy(g);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir);
}

Test(strings, blob_validation) {
    IrStringElem el[2] = {{"ab", 2}, {"c", 1}};
    unsigned char blob[64];
    size_t n = ir_string_blob_size(el, 2);
    cr_assert_eq(n, 3 * 8 + 3);
    ir_string_blob_write(el, 2, blob);
    cr_assert(ir_string_blob_valid(blob, n, 2));
    cr_assert(!ir_string_blob_valid(blob, n, 3), "wrong element count");
    cr_assert(!ir_string_blob_valid(blob, n + 1, 2), "trailing bytes");
    blob[8] = 5; /* offsets[1] = 5 > offsets[2] = 3 */
    cr_assert(!ir_string_blob_valid(blob, n, 2), "decreasing offsets");
}

/* A .npy file of `descr` holding raw payload. */
static char *write_npy(const char *dir, const char *name, const char *descr, const char *shape, const void *payload,
                       size_t n) {
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    size_t hlen = (size_t)len + 1;
    hlen += (64 - (10 + hlen) % 64) % 64;
    unsigned char *buf = calloc(10 + hlen + n, 1);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)hlen, buf[9] = (unsigned char)(hlen >> 8);
    memset(buf + 10, ' ', hlen);
    memcpy(buf + 10, dict, (size_t)len);
    buf[10 + hlen - 1] = '\n';
    memcpy(buf + 10 + hlen, payload, n);
    char *p = tu_path_join(dir, name);
    cr_assert(tu_write_file(p, buf, 10 + hlen + n));
    free(buf);
    return p;
}

Test(strings, npy_unicode_round_trip_and_object_arrays_refused) {
    char *dir = tu_mkdtemp();
    TuDiag d;
    tu_diag_init(&d);
    /* numpy's '<U2' for ["h\u00e9", "x"]: UTF-32LE, NUL-padded */
    uint32_t u[4] = {'h', 0xE9, 'x', 0};
    char *p = write_npy(dir, "u.npy", "<U2", "2,", u, sizeof u);
    IrTensor t;
    cr_assert_eq(ir_npy_read(p, &d.diag, &t), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(t.dtype, IR_DTYPE_STRING);
    const IrStringElem *el = t.data;
    cr_assert_eq(el[0].len, 3);
    cr_assert(memcmp(el[0].data, "h\xc3\xa9", 3) == 0, "decoded to UTF-8");
    cr_assert_eq(el[1].len, 1, "padding dropped");
    /* written back as '<U2' with the same bytes */
    char *q = tu_path_join(dir, "w.npy");
    cr_assert_eq(ir_npy_write(q, &t, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    size_t la, lb;
    char *ra = tu_read_file(p, &la), *rb = tu_read_file(q, &lb);
    cr_assert_eq(la, lb);
    cr_assert(memcmp(ra, rb, la) == 0, "identical to numpy's file");
    free(ra), free(rb);
    IrTensor back;
    cr_assert_eq(ir_npy_read(q, &d.diag, &back), IR_OK);
    cr_assert_eq(((const IrStringElem *)back.data)[1].len, 1);
    ir_tensor_free(&back);
    /* invalid UTF-8 cannot become '<U' */
    IrStringElem bad = {"\xff", 1};
    int64_t one = 1;
    IrTensor b;
    cr_assert_eq(ir_tensor_from_strings(&b, 1, &one, &bad), IR_OK);
    cr_assert_neq(ir_npy_write(q, &b, &d.diag), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "not valid UTF-8"), "%s", tu_diag_text(&d));
    ir_tensor_free(&b);
    /* object arrays: a clear message */
    uint64_t ptr = 0;
    char *o = write_npy(dir, "o.npy", "|O", "1,", &ptr, sizeof ptr);
    IrTensor ot;
    cr_assert_neq(ir_npy_read(o, &d.diag, &ot), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "object arrays"), "%s", tu_diag_text(&d));
    ir_tensor_free(&t);
    free(p), free(q), free(o);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir);
}

/* Runs a one-input graph text on a tensor; returns the outputs (caller frees). */
static void run_text(const char *text, const IrTensor *in, IrTensor *outs, TuDiag *d) {
    IrGraph *g = tu_parse(text, "r.ir", d);
    cr_assert(g, "%s", tu_diag_text(d));
    cr_assert_eq(ir_verify(g, &d->diag), IR_OK, "%s", tu_diag_text(d));
    cr_assert_eq(ir_interp_run(g, in, in ? 1 : 0, outs, NULL, &d->diag), IR_OK, "%s", tu_diag_text(d));
    ir_graph_destroy(g);
}

static IrTensor strings_1d(const char *const *s, int64_t n) {
    IrStringElem el[16];
    for (int64_t i = 0; i < n; i++) el[i] = (IrStringElem){s[i], strlen(s[i])};
    IrTensor t;
    cr_assert_eq(ir_tensor_from_strings(&t, 1, &n, el), IR_OK);
    return t;
}

static void assert_strings(const IrTensor *t, const char *const *want, int64_t n) {
    cr_assert_eq(t->dtype, IR_DTYPE_STRING);
    cr_assert_eq(ir_tensor_numel(t), n);
    const IrStringElem *el = t->data;
    for (int64_t i = 0; i < n; i++) {
        char got[64];
        elem_text(el[i], got, sizeof got);
        cr_assert_str_eq(got, want[i], "element %lld", (long long)i);
    }
}

Test(strings, cast_follows_onnx_rules) {
    TuDiag d;
    tu_diag_init(&d);
    const char *in[] = {"1.5", "-INF", "NaN", "+inf", "1e3", "7x"};
    IrTensor x = strings_1d(in, 5), outs[2];
    run_text("graph @c(%x: string[5]) {\n  %f = Cast(%x) {to = f32} : f32[5]\n"
             "  %s = Cast(%f) {to = string} : string[5]\n  return %f, %s\n}\n",
             &x, outs, &d);
    const float *f = outs[0].data;
    cr_assert_eq(f[0], 1.5f);
    cr_assert(f[1] < 0 && f[1] * 0 != 0, "-INF");
    cr_assert(f[2] != f[2], "NaN");
    cr_assert(f[3] > 0 && f[3] * 0 != 0, "+inf");
    cr_assert_eq(f[4], 1000.0f);
    const char *back[] = {"1.5", "-INF", "NaN", "INF", "1000.0"};
    assert_strings(&outs[1], back, 5);
    ir_tensor_free(&outs[0]), ir_tensor_free(&outs[1]);
    /* shortest round-trip text of f32 values, and integers */
    IrGraph *g = tu_parse("graph @n() {\n  const %v: f32[4] = [0.1, 1e-05, 3, 1e+20]\n  const %i: i64[2] = [-12, 7]\n"
                          "  %s = Cast(%v) {to = string} : string[4]\n  %t = Cast(%i) {to = string} : string[2]\n"
                          "  return %s, %t\n}\n",
                          "n.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_interp_run(g, NULL, 0, outs, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    const char *fs[] = {"0.1", "1e-05", "3.0", "1e+20"}, *is[] = {"-12", "7"};
    assert_strings(&outs[0], fs, 4);
    assert_strings(&outs[1], is, 2);
    ir_tensor_free(&outs[0]), ir_tensor_free(&outs[1]);
    ir_graph_destroy(g);
    /* a string that is not a number is an error naming the element */
    IrTensor y = strings_1d(in + 5, 1);
    g = tu_parse("graph @c(%x: string[1]) {\n  %f = Cast(%x) {to = i64} : i64[1]\n  return %f\n}\n", "c.ir", &d);
    cr_assert_neq(ir_interp_run(g, &y, 1, outs, NULL, &d.diag), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "string element 0 (\"7x\") is not a i64 number"), "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    ir_tensor_free(&x), ir_tensor_free(&y);
    tu_diag_free(&d);
}

Test(strings, string_normalizer) {
    TuDiag d;
    tu_diag_init(&d);
    const char *in[] = {"monday", "tuesday", "Wednesday", "MONDAY"};
    IrTensor x = strings_1d(in, 4), out;
    run_text("graph @n(%x: string[4]) {\n  %y = StringNormalizer(%x) {case_change_action = \"UPPER\", "
             "stopwords = [\"monday\"]} : string[?]\n  return %y\n}\n",
             &x, &out, &d);
    const char *want[] = {"TUESDAY", "WEDNESDAY"};
    assert_strings(&out, want, 2);
    ir_tensor_free(&out);
    run_text("graph @n(%x: string[4]) {\n  %y = StringNormalizer(%x) {case_change_action = \"LOWER\", "
             "is_case_sensitive = 1, stopwords = [\"monday\"]} : string[?]\n  return %y\n}\n",
             &x, &out, &d);
    const char *want2[] = {"tuesday", "wednesday", "monday"};
    assert_strings(&out, want2, 3);
    ir_tensor_free(&out);
    /* everything removed: one empty string */
    run_text("graph @n(%x: string[4]) {\n  %y = StringNormalizer(%x) {stopwords = [\"monday\", \"tuesday\", "
             "\"wednesday\"]} : string[?]\n  return %y\n}\n",
             &x, &out, &d);
    const char *want3[] = {""};
    assert_strings(&out, want3, 1);
    ir_tensor_free(&out);
    ir_tensor_free(&x);
    tu_diag_free(&d);
}

Test(strings, data_movement_and_equal) {
    TuDiag d;
    tu_diag_init(&d);
    const char *in[] = {"a", "bb", "ccc", "dddd"};
    IrTensor x = strings_1d(in, 4), outs[3];
    run_text("graph @m(%x: string[4]) {\n  const %s: i64[2] = [2, 2]\n  const %i: i64[3] = [3, 0, 3]\n"
             "  %r = Reshape(%x, %s) : string[2, 2]\n  %t = Transpose(%r) {perm = [1, 0]} : string[2, 2]\n"
             "  %c = Concat(%t, %r) {axis = 0} : string[4, 2]\n  %g = Gather(%x, %i) {axis = 0} : string[3]\n"
             "  const %k: string[] = [\"bb\"]\n  %e = Equal(%x, %k) : bool[4]\n  return %c, %g, %e\n}\n",
             &x, outs, &d);
    const char *c[] = {"a", "ccc", "bb", "dddd", "a", "bb", "ccc", "dddd"}, *g[] = {"dddd", "a", "dddd"};
    assert_strings(&outs[0], c, 8);
    assert_strings(&outs[1], g, 3);
    const uint8_t *e = outs[2].data;
    cr_assert(!e[0] && e[1] && !e[2] && !e[3]);
    for (int i = 0; i < 3; i++) ir_tensor_free(&outs[i]);
    ir_tensor_free(&x);
    tu_diag_free(&d);
}

Test(strings, verifier_rejects_arithmetic_on_strings) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse("graph @a(%x: string[2]) {\n  %y = Add(%x, %x) : string[2]\n  return %y\n}\n", "a.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_neq(ir_verify(g, &d.diag), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "a.ir:2:3: error: Add: operand 0 is a string tensor; Add does not take strings"),
              "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(strings, loop_carries_and_stacks_strings) {
    TuDiag d;
    tu_diag_init(&d);
    const char *in[] = {"p", "q"};
    IrTensor x = strings_1d(in, 2), outs[2];
    run_text("graph @l(%x: string[2]) {\n  const %m: i64[] = [3]\n  const %t: bool[] = [true]\n"
             "  const %two: i64[1] = [2]\n"
             "  %fin, %sc = Loop(%m, %t, %x) : string[2], string[3, 2] {\n"
             "    body(%i: i64[], %c: bool[], %v: string[2]) {\n"
             "      %s = Cast(%i) {to = string} : string[]\n"
             "      %e = Expand(%s, %two) : string[2]\n"
             "      %w = Concat(%v, %e) {axis = 0} : string[4]\n"
             "      %v2 = Slice(%w, %two, %two) : string[0]\n"
             "      %v3 = Identity(%v) : string[2]\n"
             "      return %c, %v3, %e\n"
             "    }\n"
             "  }\n"
             "  return %fin, %sc\n}\n",
             &x, outs, &d);
    assert_strings(&outs[0], in, 2);
    const char *sc[] = {"0", "0", "1", "1", "2", "2"};
    assert_strings(&outs[1], sc, 6);
    ir_tensor_free(&outs[0]), ir_tensor_free(&outs[1]);
    ir_tensor_free(&x);
    tu_diag_free(&d);
}

Test(strings, tfidf_modes_weights_and_skips_on_string_pools) {
    TuDiag d;
    tu_diag_init(&d);
    const char *in[] = {"a", "b", "a", "c", "a", "b"};
    IrTensor x = strings_1d(in, 6), out;
    static const char *modes[] = {"TF", "IDF", "TFIDF"};
    static const float want[3][3] = {{3, 1, 2}, {0.5f, 2, 4}, {1.5f, 2, 8}};
    for (int m = 0; m < 3; m++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "graph @t(%%x: string[6]) {\n  %%y = TfIdfVectorizer(%%x) {max_gram_length = 2, max_skip_count = 0, "
                 "min_gram_length = 1, mode = \"%s\", ngram_counts = [0, 2], ngram_indexes = [0, 1, 2], "
                 "pool_strings = [\"a\", \"c\", \"a\", \"b\"], weights = [0.5, 2, 4]} : f32[3]\n  return %%y\n}\n",
                 modes[m]);
        run_text(text, &x, &out, &d);
        const float *y = out.data;
        for (int i = 0; i < 3; i++) cr_assert_eq(y[i], want[m][i], "%s [%d]: %g", modes[m], i, y[i]);
        ir_tensor_free(&out);
    }
    /* a skip of one item joins "a" and "b" across "x" */
    const char *in2[] = {"a", "x", "b"};
    IrTensor x2 = strings_1d(in2, 3);
    run_text("graph @t(%x: string[3]) {\n  %y = TfIdfVectorizer(%x) {max_gram_length = 2, max_skip_count = 1, "
             "min_gram_length = 2, mode = \"TF\", ngram_counts = [0, 2], ngram_indexes = [0, 1, 2], "
             "pool_strings = [\"a\", \"c\", \"a\", \"b\"]} : f32[3]\n  return %y\n}\n",
             &x2, &out, &d);
    const float *y = out.data;
    cr_assert(y[0] == 0 && y[1] == 0 && y[2] == 1, "%g %g %g", y[0], y[1], y[2]);
    ir_tensor_free(&out);
    ir_tensor_free(&x), ir_tensor_free(&x2);
    tu_diag_free(&d);
}
