/* The binary format (.irb): text -> binary -> text is byte-identical for every corpus model
 * and for graphs using every attribute kind and dtype; weights are used in place from the
 * mapping (never copied); and bad files (newer version, bad magic, truncation at every
 * length) are rejected with a clear error, never a crash.
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *tmpdir;

static void setup(void) {
    tmpdir = tu_mkdtemp();
    cr_assert_not_null(tmpdir);
}
static void teardown(void) {
    tu_rmtree(tmpdir);
    free(tmpdir);
}

TestSuite(binary, .init = setup, .fini = teardown);

/* Writes g to <tmpdir>/<name>; returns the malloc'd path. */
static char *write_irb(const IrGraph *g, const char *name) {
    char *path = tu_path_join(tmpdir, name);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_write_binary(g, path, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    return path;
}

static void check_round_trip(const char *text, const char *name) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, name, &d);
    cr_assert_not_null(g, "%s: %s", name, tu_diag_text(&d));
    char *p1 = tu_print(g);
    char irb[256];
    snprintf(irb, sizeof irb, "%s.irb", name);
    char *path = write_irb(g, irb);
    /* from the file (mapped) */
    IrGraph *b = NULL;
    cr_assert_eq(ir_read_binary(path, &d.diag, &b), IR_OK, "%s: %s", name, tu_diag_text(&d));
    char *p2 = tu_print(b);
    cr_assert_str_eq(p2, p1, "%s: text -> irb -> text differs", name);
    cr_assert_eq(ir_graph_num_nodes(b), ir_graph_num_nodes(g));
    cr_assert_eq(ir_graph_num_values(b), ir_graph_num_values(g));
    cr_assert_str_eq(ir_graph_source_file(b), path);
    /* from memory (copied) */
    size_t len;
    char *bytes = tu_read_file(path, &len);
    cr_assert(ir_is_binary(bytes, len));
    cr_assert(!ir_is_binary(text, strlen(text)));
    IrGraph *m = NULL;
    cr_assert_eq(ir_read_binary_mem(bytes, len, "mem", &d.diag, &m), IR_OK, "%s: %s", name, tu_diag_text(&d));
    free(bytes); /* the graph must not point into the buffer */
    char *p3 = tu_print(m);
    cr_assert_str_eq(p3, p1, "%s: read_binary_mem differs", name);
    /* writing the loaded graph again gives the same bytes (deterministic writer) */
    char irb2[256];
    snprintf(irb2, sizeof irb2, "%s.2.irb", name);
    char *path2 = write_irb(b, irb2);
    size_t l1, l2;
    char *f1 = tu_read_file(path, &l1), *f2 = tu_read_file(path2, &l2);
    cr_assert_eq(l1, l2, "%s: re-written binary differs in size", name);
    cr_assert_eq(memcmp(f1, f2, l1), 0, "%s: re-written binary differs", name);
    free(f1);
    free(f2);
    free(path2);
    /* the loaded graph verifies exactly when the text one does (after the rewrite: verifying
     * interns inferred types, which changes the tables though not the text) */
    IrDiag quiet;
    ir_diag_init(&quiet, tu_diag_count_fn, NULL);
    IrStatus v1 = ir_verify(g, &quiet), v2 = ir_verify(b, &quiet);
    cr_assert_eq(v1, v2, "%s: verification differs", name);

    free(p1);
    free(p2);
    free(p3);
    free(path);
    ir_graph_destroy(g);
    ir_graph_destroy(b);
    ir_graph_destroy(m);
    tu_diag_free(&d);
}

Test(binary, corpus_models_round_trip_byte_identical) {
    size_t n;
    char **files = tu_list_dir("corpus", ".ir", &n);
    cr_assert_not_null(files);
    cr_assert_geq(n, 5);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        char *text = tu_corpus_read(files[i], &len);
        check_round_trip(text, files[i]);
        free(text);
    }
    tu_free_list(files);
}

Test(binary, every_attribute_kind_and_dtype_round_trips) {
    check_round_trip(
        "symbol S, B\n"
        "constraint S % 8 == 0\n"
        "constraint B in [1, 4]\n"
        "constraint S == B*8 + 8\n"
        "opset \"\" 17\n"
        "opset \"com.example\" 2\n"
        "meta \"producer\" = \"x\\\"y\\n\"\n"
        "graph @\"attr graph\"(%x: f32[2, 4], %\"onnx::W\": f32[4, 2], %s: i64[2], %seq: f32[S, 2, 3], %u: i8[*], %v: ?) {\n"
        "  const %a: f64[3] = [1.5, -2.0, 1e+300]\n"
        "  const %b: f32[4] = [0.1, -0.0, inf, 3.4028235e+38]\n"
        "  const %c: f16[3] = [0.5, -65504.0, 6.1035156e-05]\n"
        "  const %d: bf16[2] = [1.0, -3.3895314e+38]\n"
        "  const %e: f8e4m3fn[3] = [448.0, -0.001953125, 0.0]\n"
        "  const %f: f8e5m2[3] = [57344.0, -inf, 1.5258789e-05]\n"
        "  const %g0: i64[2] = [-9223372036854775808, 9223372036854775807]\n"
        "  const %h0: i32[2] = [-2147483648, 7]\n"
        "  const %i0: i16[2] = [-32768, 32767]\n"
        "  const %j0: i8[2] = [-128, 127]\n"
        "  const %k0: u64[1] = [18446744073709551615]\n"
        "  const %l0: u32[1] = [4294967295]\n"
        "  const %m0: u16[1] = [65535]\n"
        "  const %n0: u8[2] = [0, 255]\n"
        "  const %o0: bool[3] = [true, false, true]\n"
        "  const %big: f32[20] = base64 \"AAAAAAAAgD8AAABAAABAQAAAgEAAAKBAAADAQAAA4EAAAABBAAAQQQAAIEEAADBBAABAQQAAUEEAAGBBAABwQQAAgEEAAIhBAACQQQAAmEE=\"\n"
        "  const %empty: i64[0] = []\n"
        "  %a1 = Softmax(%x) {axis = -1} : f32[2, 4] name(\"sm\") loc(\"m.py\":3:4) from(\"orig1\", \"orig2\")\n"
        "  %b1 = LeakyRelu(%a1) {alpha = nan} : f32[2, 4]\n"
        "  %c1 = LeakyRelu(%b1) {alpha = -0.0} : f32[2, 4]\n"
        "  %g1 = Gelu(%c1) {approximate = \"a\\\"b\\\\c\\nd\\x01\\te\xc3\xa9\"} : f32[2, 4]\n"
        "  %h1 = Transpose(%g1) {perm = [1, 0]} : f32[4, 2]\n"
        "  %i1 = Transpose(%h1) {perm = []} : f32[2, 4]\n"
        "  %j1 = Cast(%i1) {to = bf16} : bf16[2, 4]\n"
        "  %k1 = ConstantOfShape(%s) {value = f16[1] [0.5]} : f16[?, ?]\n"
        "  %l1, %m1 = RNN(%seq, %x, %\"onnx::W\") {activation_alpha = [0.5, 1e-05], activation_beta = [], "
        "activations = [\"Tanh\", \"Relu\"], hidden_size = 4} : f32[S, 1, 2, 4], f32[1, 2, 4]\n"
        "  %y, _ = Dropout(%x) : f32[2, 4]\n"
        "  %z = Clip(%y, _, %y) : f32[2, 4]\n"
        "  %bs = Reshape(%seq, %g0) : f32[S/8, (B + 1)%8]\n"
        "  return %z, %j1, %k1, %l1, %bs\n"
        "}\n",
        "attrs.ir");
}

Test(binary, regions_and_erased_nodes_round_trip) {
    check_round_trip("graph @g(%p: bool[], %x: f32[2], %n: i64[]) {\n"
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
                     "}\n",
                     "regions.ir");
    /* a graph with dead (erased) nodes and reused names still round trips */
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    int64_t dims[1] = {4};
    IrTypeId t = ir_type_tensor_i64(g, IR_DTYPE_F32, 1, dims);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    const char *nm[1] = {"y"};
    IrNodeId dead = ir_node_create(g, IR_ROOT_REGION, IR_OP_RELU, 1, &x, 1, nm, &t);
    ir_node_erase(g, dead);
    IrNodeId live = ir_node_create(g, IR_ROOT_REGION, IR_OP_NEG, 1, &x, 1, nm, &t);
    IrValueId y = ir_node_result(g, live, 0);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &y);
    char *p1 = tu_print(g);
    char *path = write_irb(g, "dead.irb");
    IrGraph *b = NULL;
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_read_binary(path, &d.diag, &b), IR_OK, "%s", tu_diag_text(&d));
    char *p2 = tu_print(b);
    cr_assert_str_eq(p2, p1);
    cr_assert_eq(ir_graph_num_nodes(b), 1);
    cr_assert_eq(ir_value_find(b, "y", 1), y);
    tu_diag_free(&d);
    free(p1);
    free(p2);
    free(path);
    ir_graph_destroy(g);
    ir_graph_destroy(b);
}

/* Finds the /proc/self/maps entry holding p; returns its path (malloc'd) or NULL. */
static char *mapping_of(const void *p) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return NULL;
    char line[4096];
    char *res = NULL;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
        if (a >= lo && a < hi) {
            char *slash = strchr(line, '/');
            if (slash) {
                slash[strcspn(slash, "\n")] = 0;
                res = strdup(slash);
            }
            break;
        }
    }
    fclose(f);
    return res;
}

Test(binary, weights_are_mapped_not_copied) {
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    const int64_t n = 16 * 1024 * 1024; /* 64 MiB of f32 */
    float *w = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) w[i] = (float)(i % 1000) * 0.5f;
    int64_t dims[2] = {4096, 4096};
    IrTypeId wt = ir_type_tensor_i64(g, IR_DTYPE_F32, 2, dims);
    IrConstId c = ir_const_create(g, wt, w, (size_t)n * 4);
    int64_t sd[1] = {3};
    IrConstId small = ir_const_create(g, ir_type_tensor_i64(g, IR_DTYPE_F32, 1, sd), w + 1, 12);
    IrValueId wv = ir_graph_add_const_value(g, "w", c);
    ir_graph_add_const_value(g, "small", small);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", wt);
    IrValueId ops[2] = {x, wv};
    const char *nm[1] = {"y"};
    IrNodeId mm = ir_node_create(g, IR_ROOT_REGION, IR_OP_MAT_MUL, 2, ops, 1, nm, &wt);
    IrValueId y = ir_node_result(g, mm, 0);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &y);
    char *path = write_irb(g, "big.irb");
    ir_graph_destroy(g);

    IrGraph *b = NULL;
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_read_binary(path, &d.diag, &b), IR_OK, "%s", tu_diag_text(&d));
    size_t mem = ir_graph_memory_bytes(b);
    cr_assert_lt(mem, 1024 * 1024, "graph tables hold %zu bytes for a 64 MiB weight", mem);
    IrConstId bc = ir_value_const(b, ir_value_find(b, "w", 1));
    const float *data = ir_const_data(b, bc);
    cr_assert_eq(ir_const_nbytes(b, bc), (size_t)n * 4);
    cr_assert_eq((uintptr_t)data % 64, 0, "weights are 64-byte aligned in the file");
    char *where = mapping_of(data);
    cr_assert_not_null(where, "weight data is not in a file mapping");
    cr_assert_str_eq(where, path, "weight data lies in the mapped .irb");
    free(where);
    cr_assert_eq(memcmp(data, w, (size_t)n * 4), 0, "weight bytes are intact");
    IrConstId sc = ir_value_const(b, ir_value_find(b, "small", 5));
    cr_assert_eq(memcmp(ir_const_data(b, sc), w + 1, 12), 0);
    cr_assert_eq((uintptr_t)ir_const_data(b, sc) % 64, 0);
    ir_graph_destroy(b);
    tu_diag_free(&d);
    free(w);
    free(path);
}

/* ---- bad files ---------------------------------------------------------------------------------- */

static unsigned char *corpus_irb(const char *model, size_t *len) {
    IrGraph *g = tu_load_corpus(model, NULL);
    cr_assert_not_null(g);
    char name[256];
    snprintf(name, sizeof name, "%s.irb", model);
    char *path = write_irb(g, name);
    ir_graph_destroy(g);
    unsigned char *bytes = (unsigned char *)tu_read_file(path, len);
    cr_assert_not_null(bytes);
    free(path);
    return bytes;
}

Test(binary, newer_version_is_unsupported) {
    size_t len;
    unsigned char *bytes = corpus_irb("mlp.ir", &len);
    bytes[8] = 99;
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    cr_assert_eq(ir_read_binary_mem(bytes, len, "v99.irb", &d.diag, &g), IR_EUNSUPPORTED);
    cr_assert_null(g);
    cr_assert_not_null(strstr(tu_diag_text(&d), "newer"), "%s", tu_diag_text(&d));
    cr_assert_not_null(strstr(tu_diag_text(&d), "v99.irb: error: binary IR format version 99"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    /* the same from a file */
    char *path = tu_path_join(tmpdir, "v99.irb");
    cr_assert(tu_write_file(path, bytes, len));
    tu_diag_init(&d);
    cr_assert_eq(ir_read_binary(path, &d.diag, &g), IR_EUNSUPPORTED);
    cr_assert_not_null(strstr(tu_diag_text(&d), "newer"));
    tu_diag_free(&d);
    /* version 0 is corrupt, not unsupported */
    bytes[8] = 0;
    tu_diag_init(&d);
    cr_assert_eq(ir_read_binary_mem(bytes, len, "v0.irb", &d.diag, &g), IR_ESYNTAX);
    cr_assert_not_null(strstr(tu_diag_text(&d), "corrupt binary IR"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    free(path);
    free(bytes);
}

Test(binary, bad_magic_and_non_files) {
    size_t len;
    unsigned char *bytes = corpus_irb("mlp.ir", &len);
    bytes[0] = 'X';
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    cr_assert_eq(ir_read_binary_mem(bytes, len, "bad.irb", &d.diag, &g), IR_ESYNTAX);
    cr_assert_str_eq(tu_diag_text(&d), "bad.irb: error: not an irtool binary IR file (bad magic)\n");
    tu_diag_free(&d);
    free(bytes);
    /* a text model given to the binary reader */
    size_t tl;
    char *text = tu_corpus_read("mlp.ir", &tl);
    tu_diag_init(&d);
    cr_assert_eq(ir_read_binary_mem(text, tl, "mlp.ir", &d.diag, &g), IR_ESYNTAX);
    cr_assert_not_null(strstr(tu_diag_text(&d), "bad magic"));
    tu_diag_free(&d);
    free(text);
    /* missing file, empty file, a directory */
    char *missing = tu_path_join(tmpdir, "missing.irb");
    tu_diag_init(&d);
    cr_assert_eq(ir_read_binary(missing, &d.diag, &g), IR_EIO);
    cr_assert_not_null(strstr(tu_diag_text(&d), missing), "the message names the path: %s", tu_diag_text(&d));
    tu_diag_free(&d);
    char *empty = tu_path_join(tmpdir, "empty.irb");
    cr_assert(tu_write_file(empty, "", 0));
    tu_diag_init(&d);
    cr_assert_eq(ir_read_binary(empty, &d.diag, &g), IR_ESYNTAX);
    cr_assert_not_null(strstr(tu_diag_text(&d), "empty"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    tu_diag_init(&d);
    cr_assert_neq(ir_read_binary(tmpdir, &d.diag, &g), IR_OK);
    cr_assert_gt(d.diag.n_errors, 0);
    cr_assert_null(g);
    tu_diag_free(&d);
    free(missing);
    free(empty);
}

static void expect_clean_failure(const unsigned char *bytes, size_t len, const char *what, size_t at) {
    IrDiag d;
    ir_diag_init(&d, tu_diag_count_fn, NULL);
    IrGraph *g = NULL;
    IrStatus s = ir_read_binary_mem(bytes, len, "t.irb", &d, &g);
    cr_assert_neq(s, IR_OK, "%s at %zu was accepted", what, at);
    cr_assert_null(g);
    cr_assert_gt(d.n_errors, 0, "%s at %zu: no diagnostic", what, at);
}

Test(binary, truncation_at_every_length_is_an_error) {
    size_t len;
    unsigned char *bytes = corpus_irb("control_flow.ir", &len);
    cr_assert_gt(len, 64);
    for (size_t n = 0; n < len; n++) {
        /* an exact-size copy so ASan sees any read past the end */
        unsigned char *buf = malloc(n ? n : 1);
        memcpy(buf, bytes, n);
        expect_clean_failure(buf, n, "truncation", n);
        /* and with the header patched to claim the truncated size, so the reader gets past it */
        if (n >= 64) {
            for (int k = 0; k < 8; k++) buf[48 + k] = (unsigned char)((uint64_t)n >> (8 * k));
            IrDiag d;
            ir_diag_init(&d, tu_diag_count_fn, NULL);
            IrGraph *g = NULL;
            IrStatus s = ir_read_binary_mem(buf, n, "t.irb", &d, &g);
            if (s == IR_OK) {
                ir_graph_destroy(g); /* a cut in the padding may still be a valid file */
            } else {
                cr_assert_null(g);
                cr_assert_gt(d.n_errors, 0, "patched truncation at %zu: no diagnostic", n);
            }
        }
        free(buf);
    }
    free(bytes);
}

Test(binary, random_truncations_of_a_large_model_are_errors) {
    size_t len;
    unsigned char *bytes = corpus_irb("attention.ir", &len);
    TuRng rng;
    tu_rng_seed(&rng, 42);
    for (int i = 0; i < 300; i++) {
        size_t n = (size_t)tu_rng_below(&rng, len);
        unsigned char *buf = malloc(n ? n : 1);
        memcpy(buf, bytes, n);
        expect_clean_failure(buf, n, "truncation", n);
        free(buf);
    }
    /* a truncated file on disk too (mapped path) */
    char *path = tu_path_join(tmpdir, "trunc.irb");
    cr_assert(tu_write_file(path, bytes, len / 2));
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    cr_assert_eq(ir_read_binary(path, &d.diag, &g), IR_ESYNTAX);
    cr_assert_not_null(strstr(tu_diag_text(&d), "truncated"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    free(path);
    free(bytes);
}

Test(binary, write_errors_are_reported) {
    IrGraph *g = tu_load_corpus("mlp.ir", NULL);
    TuDiag d;
    tu_diag_init(&d);
    char *path = tu_path_join(tmpdir, "no/such/dir/x.irb");
    cr_assert_eq(ir_write_binary(g, path, &d.diag), IR_EIO);
    cr_assert_gt(d.diag.n_errors, 0);
    cr_assert_not_null(strstr(tu_diag_text(&d), path));
    tu_diag_free(&d);
    free(path);
    ir_graph_destroy(g);
}
