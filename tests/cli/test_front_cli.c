/* The CLI's front doors, run through the real binary: did-you-mean for commands, passes, pass
 * options and targets; one message for a wrong --input name on .ir, .onnx and .irx models;
 * .npz inputs; the compile gate's summary and the note when --input fixes symbolic dims;
 * progress lines only on a terminal (IRTOOL_PROGRESS=1 stands in for one) and never with
 * --quiet; viz inferring shapes by default; docs/ops.md matching `irtool ops --markdown`.
 */
#include "passes/passes.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static TuRun irtool(const char *const *args) {
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    return r;
}

Test(front_cli, suggest) {
    const char *passes[] = {"canonicalize", "cse", "dce", "fuse", "shape-infer", "quantize-fp8"};
    cr_assert_str_eq(ir_suggest("fsue", passes, 6), "fuse");
    cr_assert_str_eq(ir_suggest("shape-infr", passes, 6), "shape-infer");
    cr_assert_str_eq(ir_suggest("CSE", passes, 6), "cse");
    cr_assert_null(ir_suggest("zzzzzz", passes, 6));
    const char *opts[] = {"max-size", "kinds"};
    cr_assert_str_eq(ir_suggest("kind", opts, 2), "kinds");
    cr_assert_null(ir_suggest("", opts, 2));
}

Test(front_cli, did_you_mean) {
    const char *a1[] = {"comple", NULL};
    TuRun r = irtool(a1);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "unknown command 'comple' (did you mean 'compile'?)"), "%s", r.err);
    tu_run_free(&r);
    char *mlp = tu_source_path("corpus/mlp.ir");
    const char *a2[] = {"opt", mlp, "-p", "shape-infer,fsue", NULL};
    r = irtool(a2);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "unknown pass 'fsue' (did you mean 'fuse'?"), "%s", r.err);
    tu_run_free(&r);
    const char *a3[] = {"opt", mlp, "-p", "fuse{kind=elementwise}", NULL};
    r = irtool(a3);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "pass fuse has no option 'kind' (did you mean 'kinds'?)"), "%s", r.err);
    tu_run_free(&r);
    const char *a4[] = {"opt", mlp, "-p", "dce{x=1}", NULL};
    r = irtool(a4);
    cr_assert(strstr(r.err, "pass dce has no option 'x' (it takes none)"), "%s", r.err);
    tu_run_free(&r);
    const char *a5[] = {"compile", mlp, "--target", "cuda:sm_900", "-o", "never.irx", NULL};
    r = irtool(a5);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "unknown target 'cuda:sm_900' (did you mean 'cuda:sm_90'?"), "%s", r.err);
    tu_run_free(&r);
    const char *a6[] = {"opt", mlp, "--print-ir-after=fsue", NULL};
    r = irtool(a6);
    cr_assert(strstr(r.err, "did you mean 'fuse'?"), "%s", r.err);
    tu_run_free(&r);
    free(mlp);
}

/* A wrong input name: the same message whatever the model's format, never "cannot open". */
Test(front_cli, wrong_input_name, .timeout = 120) {
    char *dir = tu_mkdtemp(), *mlp = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    char *irx = tu_path_join(dir, "mlp.irx"), *onnx = tu_path_join(dir, "mlp.onnx");
    const char *conv[] = {"convert", mlp, "-o", onnx, NULL};
    TuRun r = irtool(conv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    r = tu_compile_unbound(mlp, irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char spec[4096], near[4096];
    snprintf(spec, sizeof spec, "input=%s", x);
    snprintf(near, sizeof near, "xx=%s", x);
    const char *models[] = {mlp, onnx, irx};
    for (int m = 0; m < 3; m++) {
        const char *a[] = {"run", models[m], "--input", spec, NULL};
        r = irtool(a);
        cr_assert_eq(r.status, 2, "%s: %s", models[m], r.err);
        cr_assert(strstr(r.err, "the model has no input 'input' (its inputs: 'x')"), "%s: %s", models[m], r.err);
        cr_assert(!strstr(r.err, "cannot open"), "%s", r.err);
        tu_run_free(&r);
        const char *b[] = {"run", models[m], "--input", near, NULL};
        r = irtool(b);
        cr_assert(strstr(r.err, "the model has no input 'xx' (did you mean 'x'?"), "%s: %s", models[m], r.err);
        tu_run_free(&r);
    }
    const char *v[] = {"validate", mlp, "-p", "cse", "--input", spec, NULL};
    r = irtool(v);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "the model has no input 'input'"), "%s", r.err);
    tu_run_free(&r);
    const char *c[] = {"compile", mlp, "--input", spec, "-o", irx, NULL};
    r = irtool(c);
    cr_assert(strstr(r.err, "the model has no input 'input'"), "%s", r.err);
    tu_run_free(&r);
    const char *bn[] = {"bench", irx, "--input", spec, NULL};
    r = irtool(bn);
    cr_assert(strstr(r.err, "the model has no input 'input'"), "%s", r.err);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(mlp), free(x), free(irx), free(onnx);
}

/* A zip (.npz) of members name -> bytes, stored or deflated (raw deflate, as numpy writes). */
static void put16(IrStrBuf *b, uint32_t v) { ir_strbuf_putc(b, (char)(v & 255)); ir_strbuf_putc(b, (char)(v >> 8)); }
static void put32(IrStrBuf *b, uint32_t v) { put16(b, v & 0xFFFF); put16(b, v >> 16); }
static char *make_npz(const char *const *names, const char *data, size_t len, int n, bool packed_mode, size_t *out_len) {
    IrStrBuf z, cd;
    ir_strbuf_init(&z);
    ir_strbuf_init(&cd);
    for (int i = 0; i < n; i++) {
        unsigned char *body = (unsigned char *)data;
        size_t blen = len;
        unsigned char *packed = NULL;
        if (packed_mode) {
            z_stream s;
            memset(&s, 0, sizeof s);
            cr_assert_eq(deflateInit2(&s, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
            packed = malloc(deflateBound(&s, (uLong)len));
            s.next_in = (Bytef *)data, s.avail_in = (uInt)len, s.next_out = packed, s.avail_out = (uInt)deflateBound(&s, (uLong)len);
            cr_assert_eq(deflate(&s, Z_FINISH), Z_STREAM_END);
            blen = s.total_out;
            deflateEnd(&s);
            body = packed;
        }
        uint32_t crc = (uint32_t)crc32(0, (const Bytef *)data, (uInt)len), off = (uint32_t)z.len;
        char fname[64];
        snprintf(fname, sizeof fname, "%s.npy", names[i]);
        put32(&z, 0x04034b50u), put16(&z, 20), put16(&z, 0), put16(&z, packed_mode ? 8 : 0), put16(&z, 0), put16(&z, 0);
        put32(&z, crc), put32(&z, (uint32_t)blen), put32(&z, (uint32_t)len), put16(&z, (uint32_t)strlen(fname)), put16(&z, 0);
        ir_strbuf_puts(&z, fname);
        ir_strbuf_append(&z, (const char *)body, blen);
        put32(&cd, 0x02014b50u), put16(&cd, 20), put16(&cd, 20), put16(&cd, 0), put16(&cd, packed_mode ? 8 : 0);
        put16(&cd, 0), put16(&cd, 0), put32(&cd, crc), put32(&cd, (uint32_t)blen), put32(&cd, (uint32_t)len);
        put16(&cd, (uint32_t)strlen(fname)), put16(&cd, 0), put16(&cd, 0), put16(&cd, 0), put16(&cd, 0), put32(&cd, 0);
        put32(&cd, off);
        ir_strbuf_puts(&cd, fname);
        free(packed);
    }
    uint32_t cd_off = (uint32_t)z.len;
    ir_strbuf_append(&z, cd.data, cd.len);
    put32(&z, 0x06054b50u), put16(&z, 0), put16(&z, 0), put16(&z, (uint32_t)n), put16(&z, (uint32_t)n);
    put32(&z, (uint32_t)cd.len), put32(&z, cd_off), put16(&z, 0);
    ir_strbuf_free(&cd);
    *out_len = z.len;
    return z.data;
}

Test(front_cli, npz_inputs, .timeout = 60) {
    char *dir = tu_mkdtemp(), *mlp = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    size_t xl;
    char *npy = tu_read_file(x, &xl);
    cr_assert(npy);
    const char *ref_args[] = {"run", mlp, "--input", x, NULL};
    TuRun ref = irtool(ref_args);
    cr_assert_eq(ref.status, 0, "%s", ref.err);
    struct { const char *file, *names[2]; int n; bool deflate; const char *spec_name; } cases[] = {
        {"named.npz", {"x", "other"}, 2, false, "x"},
        {"packed.npz", {"x", NULL}, 1, true, "x"},
        {"only.npz", {"arr_0", NULL}, 1, false, "x"},      /* the only array, whatever its name */
        {"positional.npz", {"x", NULL}, 1, true, NULL},  /* no NAME=: the input's own name */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        size_t zl;
        char *zip = make_npz(cases[k].names, npy, xl, cases[k].n, cases[k].deflate, &zl);
        char *path = tu_path_join(dir, cases[k].file), spec[4096];
        cr_assert(tu_write_file(path, zip, zl));
        if (cases[k].spec_name) snprintf(spec, sizeof spec, "%s=%s", cases[k].spec_name, path);
        else snprintf(spec, sizeof spec, "%s", path);
        const char *a[] = {"run", mlp, "--input", spec, NULL};
        TuRun r = irtool(a);
        cr_assert_eq(r.status, 0, "%s: %s", cases[k].file, r.err);
        cr_assert_str_eq(r.out, ref.out, "%s reads as the .npy", cases[k].file);
        tu_run_free(&r);
        free(zip), free(path);
    }
    /* two arrays, neither named like the input: the error lists them */
    const char *two[] = {"a", "b"};
    size_t zl;
    char *zip = make_npz(two, npy, xl, 2, false, &zl);
    char *path = tu_path_join(dir, "two.npz"), spec[4096];
    cr_assert(tu_write_file(path, zip, zl));
    snprintf(spec, sizeof spec, "x=%s", path);
    const char *a[] = {"run", mlp, "--input", spec, NULL};
    TuRun r = irtool(a);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "no array named 'x' in this .npz (it holds 'a', 'b')"), "%s", r.err);
    tu_run_free(&r);
    /* a damaged zip */
    cr_assert(tu_write_file(path, zip, zl - 10));
    r = irtool(a);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "not a .npz file") || strstr(r.err, "not a valid .npz file"), "%s", r.err);
    tu_run_free(&r);
    free(zip), free(path);
    tu_run_free(&ref);
    free(npy);
    tu_rmtree(dir);
    free(dir), free(mlp), free(x);
}

Test(front_cli, compile_says_what_it_checked, .timeout = 120) {
    char *dir = tu_mkdtemp(), *mlp = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    char *irx = tu_path_join(dir, "m.irx"), spec[4096];
    snprintf(spec, sizeof spec, "x=%s", x);
    const char *a[] = {"compile", mlp, "--no-cache", "--input", spec, "-o", irx, NULL};
    TuRun r = irtool(a);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "checked against the interpreter on the --input files: x f32["), "%s", r.out);
    cr_assert(strstr(r.out, "every output element within 1e-05 + 0.0001 x |interpreter|; worst |compiled - interpreter| "),
              "%s", r.out);
    cr_assert(strstr(r.err, "note: --input fixes the model's symbolic dims to the files' shapes (B = "), "%s", r.err);
    cr_assert(strstr(r.err, "shape-infer{B=1:HI}"), "how to keep it dynamic: %s", r.err);
    tu_run_free(&r);
    const char *q[] = {"compile", mlp, "--no-cache", "--quiet", "--input", spec, "-o", irx, NULL};
    r = irtool(q);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(!strstr(r.out, "checked against") && !strstr(r.err, "note:"), "--quiet: %s %s", r.out, r.err);
    tu_run_free(&r);
    const char *u[] = {"compile", mlp, "--no-cache", "-o", irx, NULL};
    r = irtool(u);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "compiled once for any value of B"), "%s", r.out);
    cr_assert(strstr(r.out, "on generated inputs (uniform [0, 1), a fixed seed per input): x f32[3, 64]"), "%s", r.out);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(mlp), free(x), free(irx);
}

Test(front_cli, progress_only_on_a_terminal, .timeout = 60) {
    char *mlp = tu_source_path("corpus/mlp.ir");
    const char *a[] = {"opt", mlp, "-p", "shape-infer,fuse", NULL};
    unsetenv("IRTOOL_PROGRESS");
    TuRun r = irtool(a);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(!strchr(r.err, '\r'), "not a terminal: no progress line: %s", r.err);
    tu_run_free(&r);
    setenv("IRTOOL_PROGRESS", "1", 1);
    r = irtool(a);
    cr_assert(strstr(r.err, "irtool opt: pass 1 of 2: shape-infer") && strstr(r.err, "pass 2 of 2: fuse"), "%s", r.err);
    tu_run_free(&r);
    const char *q[] = {"opt", mlp, "-p", "shape-infer,fuse", "--quiet", NULL};
    r = irtool(q);
    cr_assert(!strchr(r.err, '\r'), "--quiet: %s", r.err);
    tu_run_free(&r);
    char *dir = tu_mkdtemp(), *irx = tu_path_join(dir, "m.irx");
    const char *c[] = {"compile", mlp, "--no-cache", "-o", irx, NULL};
    r = irtool(c);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "building kernels: node "), "%s", r.err);
    cr_assert(strstr(r.err, "reference run in the interpreter"), "%s", r.err);
    tu_run_free(&r);
    unsetenv("IRTOOL_PROGRESS");
    tu_rmtree(dir);
    free(mlp), free(dir), free(irx);
}

Test(front_cli, viz_infers_shapes, .timeout = 60) {
    char *dir = tu_mkdtemp(), *enc = tu_source_path("corpus/torch/encoder_dynamic/model.onnx");
    char *svg = tu_path_join(dir, "e.svg"), *raw = tu_path_join(dir, "raw.svg");
    const char *a[] = {"viz", enc, "-o", svg, NULL};
    TuRun r = irtool(a);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    const char *b[] = {"viz", enc, "--no-shape-infer", "-o", raw, NULL};
    r = irtool(b);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    size_t l1, l2;
    char *s1 = tu_read_file(svg, &l1), *s2 = tu_read_file(raw, &l2);
    cr_assert(s1 && s2);
    cr_assert(strstr(s1, "f32[B*4, S, 8]"), "an inner shape, inferred");
    cr_assert(!strstr(s1, ">?<"), "no unknown shape left");
    cr_assert(strstr(s2, ">?<"), "--no-shape-infer draws the graph as read");
    free(s1), free(s2);
    tu_rmtree(dir);
    free(dir), free(enc), free(svg), free(raw);
}

/* docs/ops.md is what `irtool ops --markdown` prints (scripts/gen_ops_doc.sh regenerates it). */
Test(front_cli, op_matrix_is_generated) {
    const char *a[] = {"ops", "--markdown", NULL};
    TuRun r = irtool(a);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "| `Conv` | contraction | yes | yes | yes |"), "%s", r.out);
    cr_assert(strstr(r.out, "| `Multinomial` | random | yes | - | - |"), "%s", r.out);
    size_t len;
    char *path = tu_source_path("docs/ops.md");
    char *doc = tu_read_file(path, &len);
    free(path);
    cr_assert(doc, "docs/ops.md exists");
    cr_assert(len == r.out_len && memcmp(doc, r.out, len) == 0, "docs/ops.md is stale: run scripts/gen_ops_doc.sh");
    free(doc);
    tu_run_free(&r);
}
