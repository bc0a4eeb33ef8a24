/* Artifacts checked before use (issue 29): the checksum over every section, the manifest's fields
 * against each other and the sections, old formats refused with "rebuild", and `irtool inspect`
 * reading the code as data, never running it (a payload's constructor would leave a file). */
#include "backend/runtime/checksum.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *dir, *irx;

static void setup(void) {
    dir = tu_mkdtemp();
    char *model = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    char spec[4096], err[4096];
    snprintf(spec, sizeof spec, "x=%s", x);
    irx = tu_compile_cpu(dir, model, spec, "mlp.irx", err, sizeof err);
    cr_assert(irx, "%s", err);
    free(model), free(x);
}

static void teardown(void) {
    tu_rmtree(dir);
    free(dir), free(irx);
}

TestSuite(artifact_verify, .init = setup, .fini = teardown, .timeout = 120);

static uint64_t get64(const char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | (unsigned char)p[i];
    return v;
}

static void put64(char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (char)(v >> (8 * i));
}

/* The artifact d laid out again with section `which` replaced by (data, n), the checksum made to
 * match: what a writer with other contents would have written. */
static char *replace_section(const char *d, int which, const void *data, size_t n, size_t *out_len) {
    size_t cap = n + IRT_HEADER_SIZE + 4 * 64;
    for (int i = 0; i < 4; i++) cap += get64(d + 24 + 16 * i);
    char *o = calloc(1, cap);
    memcpy(o, d, IRT_HEADER_SIZE);
    size_t off = IRT_HEADER_SIZE;
    for (int i = 0; i < 4; i++) {
        off = (off + 63) / 64 * 64;
        const void *src = i == which ? data : d + get64(d + 16 + 16 * i);
        size_t len = i == which ? n : get64(d + 24 + 16 * i);
        memcpy(o + off, src, len);
        put64(o + 16 + 16 * i, off);
        put64(o + 24 + 16 * i, len);
        off += len;
    }
    irt_artifact_put_checksum((unsigned char *)o, off);
    *out_len = off;
    return o;
}

/* The manifest with its first `find` replaced by `repl` (which must be there), resealed. */
static char *edit_manifest(const char *d, const char *find, const char *repl, size_t *out_len) {
    size_t ml = get64(d + 24);
    char *m = calloc(1, ml + strlen(repl) + 1);
    memcpy(m, d + get64(d + 16), ml);
    char *at = strstr(m, find);
    cr_assert(at, "no '%s' in the manifest", find);
    size_t tail = ml - (size_t)(at - m) - strlen(find);
    memmove(at + strlen(repl), at + strlen(find), tail);
    memcpy(at, repl, strlen(repl));
    char *o = replace_section(d, 0, m, ml - strlen(find) + strlen(repl), out_len);
    free(m);
    return o;
}

static void expect_refused(const char *data, size_t len, const char *msg) {
    char err[1024] = "", info[256];
    IrtArtifact *a = irt_load_memory(data, len, err, sizeof err);
    cr_assert_null(a, "loaded although '%s' was expected", msg);
    cr_assert(strstr(err, msg), "expected '%s' in: %s", msg, err);
    char *p = tu_path_join(dir, "edited.irx");
    cr_assert(tu_write_file(p, data, len));
    err[0] = 0;
    cr_assert_eq(irt_verify(p, info, sizeof info, err, sizeof err), -1);
    cr_assert(strstr(err, msg), "irt_verify: expected '%s' in: %s", msg, err);
    free(p);
}

/* One byte changed in each section, the section table, or the file cut short: one clear error,
 * before anything of the file is used. */
Test(artifact_verify, checksum_covers_every_section) {
    size_t len;
    char *d = tu_read_file(irx, &len);
    cr_assert(d);
    char err[1024];
    IrtArtifact *ok = irt_load_memory(d, len, err, sizeof err);
    cr_assert(ok, "%s", err);
    irt_free(ok);
    for (int i = 0; i < 3; i++) { /* manifest, constants, code */
        size_t off = get64(d + 16 + 16 * i), n = get64(d + 24 + 16 * i);
        cr_assert(n > 0);
        d[off + n / 2] ^= 0x10;
        expect_refused(d, len, "checksum mismatch");
        d[off + n / 2] ^= 0x10;
    }
    /* the IR section, which only `irtool` reads as a model, against the manifest's ir_hash */
    size_t io = get64(d + 64), in = get64(d + 72);
    d[io + in / 2] ^= 0x10;
    char *bad = tu_path_join(dir, "ir.irx");
    cr_assert(tu_write_file(bad, d, len));
    const char *va[] = {"verify", bad, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(va, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, "its IR section does not match the manifest's ir_hash"), "%s", r.err);
    tu_run_free(&r);
    free(bad);
    d[io + in / 2] ^= 0x10;
    d[IRT_CHECKSUM_OFFSET] ^= 1;
    expect_refused(d, len, "checksum mismatch");
    d[IRT_CHECKSUM_OFFSET] ^= 1;
    put64(d + 16 + 16, get64(d + 16 + 16) + 64); /* the constants' offset moved */
    expect_refused(d, len, "corrupt artifact");
    put64(d + 16 + 16, get64(d + 16 + 16) - 64);
    expect_refused(d, len - 1, "corrupt artifact (section 3 out of place or out of the file; truncated?)");
    expect_refused(d, 90, "corrupt artifact (bad header: truncated)");
    /* an older format, checksum and all: rebuild */
    d[8] = 7;
    irt_artifact_put_checksum((unsigned char *)d, len);
    expect_refused(d, len, "artifact format version 7 is older than this runtime reads (8): rebuild it");
    free(d);
}

/* `irtool run` and `irtool inspect` of a changed artifact: exit 1 with the error, no output. */
Test(artifact_verify, cli_refuses_changed_artifact) {
    size_t len;
    char *d = tu_read_file(irx, &len);
    d[get64(d + 32) + 5] ^= 0x40; /* a weight */
    char *bad = tu_path_join(dir, "bad.irx"), *x = tu_source_path("corpus/inputs/mlp_x.npy"), *out = tu_path_join(dir, "o");
    cr_assert(tu_write_file(bad, d, len));
    const char *ra[] = {"run", bad, "--input", x, "-o", out, NULL}, *ia[] = {"inspect", bad, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(ra, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, "checksum mismatch"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    cr_assert_eq(access(out, F_OK), -1);
    tu_run_free(&r);
    cr_assert(tu_run_irtool(ia, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, "checksum mismatch"), "%s", r.err);
    tu_run_free(&r);
    free(d), free(bad), free(x), free(out);
}

/* Manifest fields that disagree with each other or the sections, each with a matching checksum
 * (a writer's bug, not corruption): refused before the code is loaded. */
Test(artifact_verify, manifest_fields_checked) {
    size_t len, n;
    char *d = tu_read_file(irx, &len);
    static const struct {
        const char *find, *repl, *msg;
    } cases[] = {
        {"const 2 0 8192\n", "", "the manifest says 1 inputs, 1 outputs, 3 workspace and 4 constant slots but lists 1, 1, 3 and 3"},
        {"dtype 2 f32 4", "dtype 2 f32 0", "bad manifest line 'dtype 2 f32 0'"},
        {"dtype 2 f32 4", "dtype 2 f32 8", "bad manifest line 'dtype 2 f32 8'"},
        {"output 0 y 2 2 2 10 11", "output 0 y 2 2 2 0 11", "output 'y' has 0 bytes, its workspace slot 11 holds 80"},
        {"output 0 y 2 2 2 10 11", "output 0 y 2 2 2 1000 11", "output 'y' has 8000 bytes, its workspace slot 11 holds 80"},
        {"output 0 y 2 2 2 10 11", "output 0 y 2 2 2 -1 11", "output 'y' has a dim -1 but the artifact has no symbolic dims"},
        {"output 0 y 2 2 2 10 11", "output 0 y 2 2 2 10 13", "output 'y' reads slot 13, which nothing holds"},
        {"output 0 y 2 2 2 10 11", "output 0 y 2 2 2 10 99", "bad manifest line 'output 0 y"},
        {"output 0 y 2 2 2 10 11", "output 0 y 7 2 2 10 11", "output 'y' has dtype 7, which the manifest does not list"},
        {"input 0 x 2 2 2 64 1", "input 0 x 2 2 2 64 2", "input 'x' has constant slot 2"},
        {"const 2 0 8192", "const 2 0 81920", "bad manifest line 'const 2 0 81920'"},
        {"const 2 0 8192", "const 2 8 8192", "bad manifest line 'const 2 8 8192'"},
        {"ws 16 256 80", "ws 16 256 800", "bad manifest line 'ws 16 256 800'"},
        {"ws 16 256 80", "ws 2 256 80", "bad manifest line 'const 2 0 8192'"}, /* a slot of both kinds */
        {"kernels 3", "kernels 4", "3 kernel calls traced, 4 kernels"},
        {"slots 25", "slots 0", "no valid slot count"},
        {"workspace 384", "workspace -1", "no valid workspace size"},
        {"workspace 384", "workspace 4294967296", "a workspace of 4294967296 bytes, its slots span 336"},
        {"input 0 x 2 2 2 64 1", "input 0 x 2 2 2 64 0", "slot 0 is bound by the manifest's lines but not listed on its bound line"},
        {"ws 12 0 256", "ws 0 0 256", "slot 0 is bound by the manifest's lines but not listed"},
        {"bound 1 ", "bound 0 1 ", "slot 0 is not bound by the manifest's lines but listed"},
        {"format 8", "format 7", "format line does not match"},
        {"inputs 1\n", "", "lacks a count line"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *e = edit_manifest(d, cases[i].find, cases[i].repl, &n);
        expect_refused(e, n, cases[i].msg);
        free(e);
    }
    /* a NUL inside the manifest */
    char *e = edit_manifest(d, "pipeline -", "pipeline \0", &n);
    size_t mo = get64(e + 16);
    char *nul = memmem(e + mo, get64(e + 24), "pipeline ", 9);
    nul[9] = 0;
    irt_artifact_put_checksum((unsigned char *)e, n);
    expect_refused(e, n, "a NUL byte in the manifest");
    free(e);
    free(d);
}

/* The code section: not an ELF object, or one without irt_entry, is refused from its headers. */
Test(artifact_verify, code_headers_checked) {
    size_t len, n;
    char *d = tu_read_file(irx, &len);
    char junk[4096];
    memset(junk, 0x90, sizeof junk);
    char *e = replace_section(d, 2, junk, sizeof junk, &n);
    expect_refused(e, n, "the code section is not an ELF object");
    free(e);
    size_t co = get64(d + 48), cl = get64(d + 56);
    char *code = malloc(cl);
    memcpy(code, d + co, cl);
    for (char *p = code; (p = memmem(p, cl - (size_t)(p - code), "irt_entry", 9)); p++) p[4] = 'X';
    e = replace_section(d, 2, code, cl, &n);
    expect_refused(e, n, "the code does not export irt_entry");
    free(e);
    memcpy(code, d + co, cl);
    put64(code + 0x20, cl); /* e_phoff past the end */
    e = replace_section(d, 2, code, cl, &n);
    expect_refused(e, n, "with its headers inside it");
    free(e);
    free(code);
    free(d);
}

/* A shared object with a constructor, packed as an artifact's code: `irtool inspect` describes
 * it and runs nothing (the constructor would create `marker`). */
Test(artifact_verify, inspect_never_runs_code) {
    char *src = tu_path_join(dir, "payload.c"), *so = tu_path_join(dir, "payload.so"), *marker = tu_path_join(dir, "marker");
    char text[4096];
    snprintf(text, sizeof text,
             "#include <stdio.h>\n"
             "__attribute__((constructor)) static void ran(void) { FILE *f = fopen(\"%s\", \"w\"); if (f) fclose(f); }\n"
             "void irt_entry(void **b, const void *f) { (void)b, (void)f; }\n"
             "void irt_entry_trace(void) {}\n",
             marker);
    cr_assert(tu_write_file(src, text, strlen(text)));
    const char *cc[] = {"-shared", "-fPIC", "-o", so, src, NULL};
    TuRun r;
    cr_assert(tu_run("/usr/bin/cc", cc, NULL, 0, NULL, &r));
    if (r.status == 127) cr_skip_test("no C compiler at /usr/bin/cc");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    size_t len, sl, n;
    char *d = tu_read_file(irx, &len), *code = tu_read_file(so, &sl);
    char *e = replace_section(d, 2, code, sl, &n);
    char *art = tu_path_join(dir, "payload.irx");
    cr_assert(tu_write_file(art, e, n));
    const char *ia[] = {"inspect", art, NULL};
    cr_assert(tu_run_irtool(ia, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "code: ELF64 shared object for x86_64"), "%s", r.out);
    cr_assert(strstr(r.out, "preflight ok"), "%s", r.out);
    cr_assert_eq(access(marker, F_OK), -1, "inspect ran the artifact's constructor");
    tu_run_free(&r);
    free(src), free(so), free(marker), free(d), free(code), free(e), free(art);
}

/* Format 7's lines for symbols without an upper bound: the blocks placed per binding (`wsrun K
 * SLOT`, counted by `wsruns`) against the symbols and the other slots. A sound artifact runs at a
 * binding larger than any it was validated at. */
Test(artifact_verify, run_placed_blocks_checked) {
    char *model = tu_path_join(dir, "u.ir"), *uirx = tu_path_join(dir, "u.irx");
    const char *text = "symbol N\ngraph @t(%a: f32[N, 4]) {\n  %b = Neg(%a) : f32[N, 4]\n"
                       "  %c = Transpose(%b) {perm = [1, 0]} : f32[4, N]\n  %y = Relu(%c) : f32[4, N]\n  return %y\n}\n";
    cr_assert(tu_write_file(model, text, strlen(text)));
    TuRun r = tu_compile_unbound(model, uirx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    size_t len, n;
    char *d = tu_read_file(uirx, &len), err[1024];
    IrtArtifact *a = irt_load_memory(d, len, err, sizeof err);
    cr_assert(a, "%s", err);
    float *x = calloc(100000 * 4, sizeof *x);
    x[4 * 99999 + 3] = -2.5f;
    IrtTensor in = {.dtype = irt_dtype_code(a, "f32"), .rank = 2, .dims = {100000, 4}, .data = x}, out;
    cr_assert_eq(irt_run(a, &in, &out, err, sizeof err), 0, "%s", err);
    cr_assert(out.dims[0] == 4 && out.dims[1] == 100000 && ((float *)out.data)[3 * 100000 + 99999] == 2.5f);
    irt_tensor_free(&out);
    irt_free(a);
    free(x);
    /* the manifest's own lines, found in it */
    size_t mo = get64(d + 16), ml = get64(d + 24);
    char *m = strndup(d + mo, ml), line[128], sym[128], moved[128], count[64], input[128], moved_in[128];
    char *w0 = strstr(m, "wsrun 0 "), *wc = strstr(m, "wsruns "), *sl = strstr(m, "symbol 1 N 0 -1 1"), *il = strstr(m, "input 0 a ");
    cr_assert(w0 && wc && sl && il, "%s", m);
    snprintf(line, sizeof line, "%.*s", (int)strcspn(w0, "\n"), w0);
    snprintf(count, sizeof count, "%.*s\n", (int)strcspn(wc, "\n"), wc);
    snprintf(input, sizeof input, "%.*s", (int)strcspn(il, "\n"), il);
    unsigned slot, in_slot;
    cr_assert_eq(sscanf(line, "wsrun 0 %u", &slot), 1);
    cr_assert_eq(sscanf(strrchr(input, ' '), " %u", &in_slot), 1);
    snprintf(moved, sizeof moved, "wsrun 1 %u", slot);
    snprintf(moved_in, sizeof moved_in, "%.*s %u", (int)(strrchr(input, ' ') - input), input, slot);
    snprintf(sym, sizeof sym, "symbol 1 N 0 64 1");
    const struct {
        const char *find, *repl, *msg;
    } cases[] = {
        {count, "", "workspace blocks placed per run, 0 counted"},
        {"symbol 1 N 0 -1 1", sym, "no symbol without an upper bound"},
        {"symbol 1 N 0 -1 1", "symbol 1 N 0 -2 1", "bad manifest line 'symbol 1 N 0 -2 1'"},
        {line, moved, "bad manifest line 'wsrun 1"},
        {input, moved_in, "input 'a' has workspace slot"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *e = edit_manifest(d, cases[i].find, cases[i].repl, &n);
        expect_refused(e, n, cases[i].msg);
        free(e);
    }
    free(m), free(d), free(model), free(uirx);
}
