/* The irtool binary, run for real (fork/exec, no shell): help and version, exit codes, fmt
 * (stdout, in place, stdin), convert between .ir and .irb, verify and info --json.
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *tmpdir;

static void setup(void) {
    tmpdir = tu_mkdtemp();
    cr_assert_not_null(tmpdir);
}
static void teardown(void) {
    tu_rmtree(tmpdir);
    free(tmpdir);
}

TestSuite(cli, .init = setup, .fini = teardown, .timeout = 120);

static TuRun run(const char *const *args) {
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r), "cannot run %s", IRTOOL_BINARY);
    return r;
}

static char *corpus_path(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "corpus/%s", name);
    return tu_source_path(rel);
}

static char *canonical(const char *name) {
    size_t len;
    char *text = tu_corpus_read(name, &len);
    char *c = tu_canon(text, name);
    cr_assert_not_null(c);
    free(text);
    return c;
}

/* Copies corpus/<name> into the temp dir; returns the new path. */
static char *copy_to_tmp(const char *name) {
    size_t len;
    char *text = tu_corpus_read(name, &len);
    char *p = tu_path_join(tmpdir, name);
    cr_assert(tu_write_file(p, text, len));
    free(text);
    return p;
}

/* ---- help, version, usage ------------------------------------------------------------------------- */

Test(cli, version) {
    TuRun r = run((const char *[]){"--version", NULL});
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "irtool " IRTOOL_VERSION_STRING " (binary IR format 1)\n");
    tu_run_free(&r);
}

Test(cli, help_for_every_command) {
    TuRun r = run((const char *[]){"--help", NULL});
    cr_assert_eq(r.status, 0);
    cr_assert_not_null(strstr(r.out, "usage: irtool COMMAND"), "%s", r.out);
    const char *cmds = strstr(r.out, "commands:\n");
    cr_assert_not_null(cmds);
    cmds += strlen("commands:\n");
    int n = 0;
    bool seen_fmt = false, seen_convert = false, seen_verify = false, seen_info = false;
    while (strncmp(cmds, "  ", 2) == 0) {
        char name[64];
        cr_assert_eq(sscanf(cmds, " %63s", name), 1);
        seen_fmt |= !strcmp(name, "fmt");
        seen_convert |= !strcmp(name, "convert");
        seen_verify |= !strcmp(name, "verify");
        seen_info |= !strcmp(name, "info");
        char want[128];
        snprintf(want, sizeof want, "usage: irtool %s", name);
        const char *forms[3][3] = {{name, "--help", NULL}, {name, "-h", NULL}, {"help", name, NULL}};
        for (int k = 0; k < 3; k++) {
            TuRun h = run(forms[k]);
            cr_assert_eq(h.status, 0, "irtool %s %s exits %d", forms[k][0], forms[k][1], h.status);
            cr_assert_eq(strncmp(h.out, want, strlen(want)), 0, "help of %s starts with '%s': %s", name, want, h.out);
            cr_assert_str_eq(h.err, "");
            tu_run_free(&h);
        }
        n++;
        cmds = strchr(cmds, '\n') + 1;
    }
    cr_assert(seen_fmt && seen_convert && seen_verify && seen_info, "the core commands are listed");
    cr_assert_geq(n, 4);
    tu_run_free(&r);
    /* no arguments: help on stderr, usage error */
    r = run((const char *[]){NULL});
    cr_assert_eq(r.status, 2);
    cr_assert_not_null(strstr(r.err, "usage: irtool COMMAND"));
    tu_run_free(&r);
}

Test(cli, usage_errors_exit_2) {
    TuRun r = run((const char *[]){"frobnicate", NULL});
    cr_assert_eq(r.status, 2);
    cr_assert_not_null(strstr(r.err, "unknown command 'frobnicate'"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    tu_run_free(&r);
    r = run((const char *[]){"help", "frobnicate", NULL});
    cr_assert_eq(r.status, 2);
    tu_run_free(&r);
    r = run((const char *[]){"fmt", NULL});
    cr_assert_eq(r.status, 2);
    cr_assert_not_null(strstr(r.err, "missing FILE"), "%s", r.err);
    tu_run_free(&r);
    r = run((const char *[]){"verify", "--bogus", "x.ir", NULL});
    cr_assert_eq(r.status, 2);
    cr_assert_not_null(strstr(r.err, "unknown option '--bogus'"), "%s", r.err);
    tu_run_free(&r);
    r = run((const char *[]){"convert", "x.ir", NULL});
    cr_assert_eq(r.status, 2);
    cr_assert_not_null(strstr(r.err, "missing -o OUT"), "%s", r.err);
    tu_run_free(&r);
    r = run((const char *[]){"convert", "x.ir", "-o", "x.txt", NULL});
    cr_assert_eq(r.status, 2);
    tu_run_free(&r);
    r = run((const char *[]){"verify", "x.ir", "--max-errors", "0", NULL});
    cr_assert_eq(r.status, 2);
    tu_run_free(&r);
}

Test(cli, missing_file_exits_1_and_names_it) {
    char *missing = tu_path_join(tmpdir, "does-not-exist.ir");
    const char *cmds[] = {"fmt", "verify", "info"};
    for (int i = 0; i < 3; i++) {
        TuRun r = run((const char *[]){cmds[i], missing, NULL});
        cr_assert_eq(r.status, 1, "%s exits %d", cmds[i], r.status);
        cr_assert_not_null(strstr(r.err, missing), "%s: message names the path: %s", cmds[i], r.err);
        cr_assert_not_null(strstr(r.err, "cannot open"), "%s", r.err);
        tu_run_free(&r);
    }
    char *out = tu_path_join(tmpdir, "o.irb");
    TuRun r = run((const char *[]){"convert", missing, "-o", out, NULL});
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, missing));
    cr_assert_neq(access(out, F_OK), 0, "no output for a failed conversion");
    tu_run_free(&r);
    free(out);
    free(missing);
}

/* ---- fmt ------------------------------------------------------------------------------------------ */

Test(cli, fmt_prints_canonical_text) {
    size_t n;
    char **files = tu_list_dir("corpus", ".ir", &n);
    for (size_t i = 0; i < n; i++) {
        char *path = corpus_path(files[i]);
        TuRun r = run((const char *[]){"fmt", path, NULL});
        cr_assert_eq(r.status, 0, "%s: %s", files[i], r.err);
        char *want = canonical(files[i]);
        cr_assert_str_eq(r.out, want, "fmt %s", files[i]);
        cr_assert_str_eq(r.err, "");
        free(want);
        tu_run_free(&r);
        free(path);
    }
    tu_free_list(files);
}

Test(cli, fmt_in_place_is_atomic_and_canonical) {
    char *path = copy_to_tmp("attention.ir");
    struct stat before;
    cr_assert_eq(stat(path, &before), 0);
    TuRun r = run((const char *[]){"fmt", "-i", path, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "", "-i prints nothing");
    tu_run_free(&r);
    cr_assert_eq(tu_dir_count(tmpdir), 1, "no temporary files are left behind");
    size_t len;
    char *got = tu_read_file(path, &len);
    char *want = canonical("attention.ir");
    cr_assert_str_eq(got, want);
    struct stat after;
    cr_assert_eq(stat(path, &after), 0);
    cr_assert_neq(before.st_ino, after.st_ino, "the file was replaced by rename, not rewritten");
    mode_t um = umask(0);
    umask(um);
    cr_assert_eq(after.st_mode & 0777, 0666 & ~um, "ordinary permissions, not mkstemp's 0600");
    free(got);
    /* running it again changes nothing */
    r = run((const char *[]){"fmt", "--in-place", path, NULL});
    cr_assert_eq(r.status, 0);
    tu_run_free(&r);
    got = tu_read_file(path, &len);
    cr_assert_str_eq(got, want);
    free(got);
    free(want);
    /* a file with a syntax error is left untouched */
    char *bad = tu_path_join(tmpdir, "bad.ir");
    const char *badtext = "graph @g(%x: f32[2]) {\n  %y = Nope(%x)\n  return %y\n}\n";
    cr_assert(tu_write_file(bad, badtext, strlen(badtext)));
    r = run((const char *[]){"fmt", "-i", bad, NULL});
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, ":2:8: error: unknown op 'Nope'"), "%s", r.err);
    tu_run_free(&r);
    got = tu_read_file(bad, &len);
    cr_assert_str_eq(got, badtext);
    free(got);
    cr_assert_eq(tu_dir_count(tmpdir), 2);
    /* -i on a non-.ir file is a usage error */
    r = run((const char *[]){"fmt", "-i", "-", NULL});
    cr_assert_eq(r.status, 2);
    tu_run_free(&r);
    free(bad);
    free(path);
}

Test(cli, stdin_text_and_binary) {
    size_t len;
    char *text = tu_corpus_read("symbolic.ir", &len);
    TuRun r;
    cr_assert(tu_run_irtool((const char *[]){"fmt", "-", NULL}, text, len, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *want = canonical("symbolic.ir");
    cr_assert_str_eq(r.out, want);
    tu_run_free(&r);
    /* binary on stdin is sniffed */
    char *src = corpus_path("symbolic.ir");
    char *irb = tu_path_join(tmpdir, "s.irb");
    r = run((const char *[]){"convert", src, "-o", irb, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    size_t blen;
    char *bin = tu_read_file(irb, &blen);
    cr_assert(tu_run_irtool((const char *[]){"fmt", "-", NULL}, bin, blen, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, want);
    tu_run_free(&r);
    /* errors on stdin are reported against <stdin> */
    const char *bad = "graph @g() {\n  return %nope\n}\n";
    cr_assert(tu_run_irtool((const char *[]){"verify", "-", NULL}, bad, strlen(bad), NULL, &r));
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, "<stdin>:2:10: error: use of undefined value '%nope'"), "%s", r.err);
    tu_run_free(&r);
    /* a large input through the pipe */
    char *big = tu_corpus_read("attention.ir", &blen);
    cr_assert(tu_run_irtool((const char *[]){"info", "--json", "-", NULL}, big, blen, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "\"graph\": \"attention\""), "%s", r.out);
    tu_run_free(&r);
    free(big);
    free(bin);
    free(irb);
    free(src);
    free(want);
    free(text);
}

/* ---- convert -------------------------------------------------------------------------------------- */

Test(cli, convert_text_binary_text_is_byte_identical) {
    size_t n;
    char **files = tu_list_dir("corpus", ".ir", &n);
    for (size_t i = 0; i < n; i++) {
        char *src = corpus_path(files[i]);
        char *irb = tu_path_join(tmpdir, "m.irb"), *ir = tu_path_join(tmpdir, "m.ir");
        char *ir0 = tu_path_join(tmpdir, "m0.ir");
        TuRun r = run((const char *[]){"convert", src, "-o", irb, NULL});
        cr_assert_eq(r.status, 0, "%s: %s", files[i], r.err);
        tu_run_free(&r);
        r = run((const char *[]){"convert", irb, "-o", ir, NULL});
        cr_assert_eq(r.status, 0, "%s: %s", files[i], r.err);
        tu_run_free(&r);
        r = run((const char *[]){"convert", src, "-o", ir0, NULL});
        cr_assert_eq(r.status, 0);
        tu_run_free(&r);
        size_t l1, l2;
        char *a = tu_read_file(ir0, &l1), *b = tu_read_file(ir, &l2);
        cr_assert_str_eq(b, a, "%s: .ir -> .irb -> .ir differs from .ir -> .ir", files[i]);
        char *want = canonical(files[i]);
        cr_assert_str_eq(a, want);
        /* convert to stdout */
        r = run((const char *[]){"convert", irb, "-o", "-", NULL});
        cr_assert_eq(r.status, 0);
        cr_assert_str_eq(r.out, want);
        tu_run_free(&r);
        free(want);
        free(a);
        free(b);
        free(src);
        free(irb);
        free(ir);
        free(ir0);
    }
    tu_free_list(files);
    cr_assert_eq(tu_dir_count(tmpdir), 3, "only m.irb, m.ir, m0.ir remain");
}

Test(cli, convert_to_unwritable_location_leaves_nothing) {
    char *src = corpus_path("mlp.ir");
    /* the target is an existing directory: the rename fails after the temp file was written */
    char *dir = tu_path_join(tmpdir, "out.irb");
    cr_assert_eq(mkdir(dir, 0755), 0);
    TuRun r = run((const char *[]){"convert", src, "-o", dir, NULL});
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_assert_not_null(strstr(r.err, dir), "%s", r.err);
    tu_run_free(&r);
    cr_assert_eq(tu_dir_count(tmpdir), 1, "no partial or temporary file next to it");
    cr_assert_eq(tu_dir_count(dir), 0);
    /* a directory that does not exist */
    char *nodir = tu_path_join(tmpdir, "no/such/x.ir");
    r = run((const char *[]){"convert", src, "-o", nodir, NULL});
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, nodir), "%s", r.err);
    tu_run_free(&r);
    cr_assert_eq(tu_dir_count(tmpdir), 1);
    /* a read-only directory (only meaningful when not running as root) */
    if (geteuid() != 0) {
        char *ro = tu_path_join(tmpdir, "ro");
        cr_assert_eq(mkdir(ro, 0555), 0);
        char *target = tu_path_join(ro, "x.irb");
        r = run((const char *[]){"convert", src, "-o", target, NULL});
        cr_assert_eq(r.status, 1);
        tu_run_free(&r);
        cr_assert_eq(tu_dir_count(ro), 0);
        chmod(ro, 0755);
        free(target);
        free(ro);
    }
    /* an invalid model is not converted */
    char *bad = corpus_path("errors/verify_matmul_mismatch.ir");
    char *out = tu_path_join(tmpdir, "bad.irb");
    r = run((const char *[]){"convert", bad, "-o", out, NULL});
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, "MatMul: contraction dim mismatch"), "%s", r.err);
    tu_run_free(&r);
    cr_assert_neq(access(out, F_OK), 0);
    /* unless asked */
    r = run((const char *[]){"convert", bad, "-o", out, "--no-verify", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    cr_assert_eq(access(out, F_OK), 0);
    free(out);
    free(bad);
    free(nodir);
    free(dir);
    free(src);
}

/* ---- verify --------------------------------------------------------------------------------------- */

Test(cli, verify_exit_codes) {
    char *ok = corpus_path("control_flow.ir");
    TuRun r = run((const char *[]){"verify", ok, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, ": ok ("), "%s", r.out);
    tu_run_free(&r);
    char *bad = corpus_path("errors/verify_scope_else.ir");
    r = run((const char *[]){"verify", bad, NULL});
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, "verify_scope_else.ir:10:7: error: operand %t is used before its definition or outside its scope"),
                       "%s", r.err);
    cr_assert_not_null(strstr(r.err, "      %e = Neg(%t) : f32[2]\n"), "the source line is shown: %s", r.err);
    cr_assert_not_null(strstr(r.err, ": 1 error\n"), "%s", r.err);
    tu_run_free(&r);
    char *syntax = corpus_path("errors/unknown_op.ir");
    r = run((const char *[]){"verify", syntax, NULL});
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, "unknown op 'Frobnicate'"));
    tu_run_free(&r);
    /* --max-errors */
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_strbuf_puts(&b, "graph @g(%x: f32[2]) {\n");
    for (int i = 0; i < 10; i++) ir_strbuf_printf(&b, "  %%a%d = Relu(%%x) {alpha = 1.0} : f32[2]\n", i);
    ir_strbuf_puts(&b, "  return %x\n}\n");
    char *many = tu_path_join(tmpdir, "many.ir");
    cr_assert(tu_write_file(many, b.data, b.len));
    r = run((const char *[]){"verify", many, "--max-errors", "3", NULL});
    cr_assert_eq(r.status, 1);
    int count = 0;
    for (const char *p = r.err; (p = strstr(p, "error: Relu has no attribute")); p++) count++;
    cr_assert_eq(count, 3, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "note: stopped after 3 errors"), "%s", r.err);
    tu_run_free(&r);
    /* a binary model verifies the same way */
    char *irb = tu_path_join(tmpdir, "cf.irb");
    r = run((const char *[]){"convert", ok, "-o", irb, NULL});
    tu_run_free(&r);
    r = run((const char *[]){"verify", irb, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    free(irb);
    ir_strbuf_free(&b);
    free(many);
    free(syntax);
    free(bad);
    free(ok);
}

/* ---- info ----------------------------------------------------------------------------------------- */

/* The number after "key": in a flat JSON text; -1 if absent. */
static long long json_num(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    if (!p) return -1;
    return strtoll(p + strlen(pat), NULL, 10);
}

Test(cli, info_json_for_mlp) {
    char *path = corpus_path("mlp.ir");
    TuRun r = run((const char *[]){"info", "--json", path, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *j = r.out;
    cr_assert_eq(j[0], '{');
    cr_assert_eq(json_num(j, "nodes"), 6, "%s", j);
    cr_assert_eq(json_num(j, "weight_bytes"), (64 * 32 + 32 + 32 * 10 + 10) * 4, "%s", j);
    cr_assert_eq(json_num(j, "parameters"), 64 * 32 + 32 + 32 * 10 + 10);
    cr_assert_eq(json_num(j, "fused_groups"), 0);
    cr_assert_eq(json_num(j, "regions"), 0);
    /* ops: an object of op -> count */
    const char *ops = strstr(j, "\"ops\": {");
    cr_assert_not_null(ops, "%s", j);
    const char *end = strchr(ops, '}');
    char *obj = strndup(ops, (size_t)(end - ops));
    cr_assert_eq(json_num(obj, "MatMul"), 2, "%s", obj);
    cr_assert_eq(json_num(obj, "Add"), 2);
    cr_assert_eq(json_num(obj, "Relu"), 1);
    cr_assert_eq(json_num(obj, "Softmax"), 1);
    int entries = 0;
    for (const char *p = obj; (p = strchr(p, ':')); p++) entries++;
    cr_assert_eq(entries, 4 + 1, "four ops (plus the key's own colon): %s", obj);
    free(obj);
    cr_assert_not_null(strstr(j, "\"symbols\": [\"B\"]"), "%s", j);
    cr_assert_not_null(strstr(j, "\"constraints\": [\"B in [1, 64]\"]"), "%s", j);
    cr_assert_not_null(strstr(j, "\"inputs\": [{\"name\": \"x\", \"type\": \"f32[B, 64]\"}]"), "%s", j);
    cr_assert_not_null(strstr(j, "\"outputs\": [{\"name\": \"y\", \"type\": \"f32[B, 10]\"}]"), "%s", j);
    cr_assert_str_eq(j + strlen(j) - 2, "}\n");
    tu_run_free(&r);
    /* control_flow counts nodes inside regions, and regions */
    char *cf = corpus_path("control_flow.ir");
    r = run((const char *[]){"info", "--json", cf, NULL});
    cr_assert_eq(r.status, 0);
    cr_assert_eq(json_num(r.out, "nodes"), 9, "%s", r.out);
    cr_assert_eq(json_num(r.out, "regions"), 3);
    cr_assert_eq(json_num(r.out, "weight_bytes"), 4 + 8 + 1 + 4);
    tu_run_free(&r);
    /* the human form */
    r = run((const char *[]){"info", path, NULL});
    cr_assert_eq(r.status, 0);
    cr_assert_not_null(strstr(r.out, "graph @mlp"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "9640"), "%s", r.out);
    tu_run_free(&r);
    free(cf);
    free(path);
}
