/* Readers and writers under hostile input (issue 29): nesting limits that name themselves, text
 * IR external weights confined to the model's folder and to regular files, outputs that never
 * replace inputs, in-place writes that keep permissions and symlinks, temporary files a killed
 * writer leaves taken over by the next write, and a clear error for a model no memory holds. */
#include "testutil.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void) {
    tu_rmtree(dir);
    free(dir);
}

TestSuite(reliability, .init = setup, .fini = teardown, .timeout = 60);

static TuRun irtool(const char *const *args) {
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    return r;
}

static char *write_in(const char *name, const char *text) {
    char *p = tu_path_join(dir, name);
    cr_assert(tu_write_file(p, text, strlen(text)));
    return p;
}

/* item 4: seq<...>/opt<...> 2000 deep was a stack overflow; now an error naming the limit */
Test(reliability, type_nesting_is_bounded) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_strbuf_puts(&b, "graph @g(%x: ");
    for (int i = 0; i < 2000; i++) ir_strbuf_puts(&b, i % 2 ? "seq<" : "opt<");
    ir_strbuf_puts(&b, "f32[1]");
    for (int i = 0; i < 2000; i++) ir_strbuf_puts(&b, ">");
    ir_strbuf_puts(&b, ") {\n  return %x\n}\n");
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_null(tu_parse(b.data, "deep.ir", &d));
    cr_assert(strstr(tu_diag_text(&d), "type nested too deeply: seq<...>/opt<...> more than 4 levels (the parser's limit"),
              "%s", tu_diag_text(&d));
    cr_assert(strstr(tu_diag_text(&d), "deep.ir:1:"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    ir_strbuf_free(&b);
    /* the two levels a valid type has still parse */
    IrGraph *g = tu_parse_ok("graph @g(%x: opt<seq<f32[1]>>) {\n  return %x\n}\n", "ok.ir");
    ir_graph_destroy(g);
}

/* If nodes nested n deep, each branch returning the next level's result. */
static void nested_ifs(IrStrBuf *b, int n) {
    ir_strbuf_puts(b, "graph @g(%p: bool[], %x: f32[1]) {\n");
    for (int i = 0; i < n; i++) ir_strbuf_printf(b, "%%r%d = If(%%p) : f32[1] {\nthen_branch() {\n", i);
    ir_strbuf_puts(b, "%y = Neg(%x) : f32[1]\nreturn %y\n");
    for (int i = n - 1; i >= 0; i--)
        ir_strbuf_printf(b, "}\nelse_branch() {\nreturn %%x\n}\n}\nreturn %%r%d\n", i);
    ir_strbuf_puts(b, "}\n");
}

/* ONNX subgraphs: 20 If levels (text allows 64) import to an error naming the importer's limit */
Test(reliability, onnx_subgraph_nesting_is_bounded) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    nested_ifs(&b, 20);
    char *ir = write_in("deep.ir", b.data), *onnx = tu_path_join(dir, "deep.onnx");
    ir_strbuf_free(&b);
    TuRun r = irtool((const char *[]){"convert", ir, "-o", onnx, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    r = irtool((const char *[]){"verify", onnx, NULL});
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, "is nested more than 16 deep (the importer's limit)"), "%s", r.err);
    tu_run_free(&r);
    free(ir), free(onnx);
}

static const char *ext_model = "graph @g(%x: f32[4]) {\n"
                               "  const %w: f32[4] = external \"w.bin\" offset 0\n"
                               "  %y = Add(%x, %w) : f32[4]\n"
                               "  return %y\n}\n";

/* items 5 and 6: external weights through a symlink out of the folder, a FIFO (which hung), a
 * directory; the same file beside the model loads */
Test(reliability, text_external_data_confined) {
    char *sub = tu_path_join(dir, "m"), *secret = tu_path_join(dir, "secret.bin");
    cr_assert_eq(mkdir(sub, 0700), 0);
    char bytes[16] = "0123456789abcdef";
    cr_assert(tu_write_file(secret, bytes, sizeof bytes));
    char *model = tu_path_join(sub, "m.ir"), *w = tu_path_join(sub, "w.bin"), *onnx = tu_path_join(dir, "out.onnx");
    cr_assert(tu_write_file(model, ext_model, strlen(ext_model)));
    static const struct {
        int kind; /* 0 symlink out, 1 FIFO, 2 directory, 3 a regular file */
        const char *msg;
    } cases[] = {
        {0, "external weights 'w.bin' lead out of the model's folder"},
        {1, "cannot open external weights 'w.bin': not a regular file"},
        {2, "cannot open external weights 'w.bin': not a regular file"},
        {3, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unlink(w);
        rmdir(w);
        if (cases[i].kind == 0) cr_assert_eq(symlink(secret, w), 0);
        if (cases[i].kind == 1) cr_assert_eq(mkfifo(w, 0600), 0);
        if (cases[i].kind == 2) cr_assert_eq(mkdir(w, 0700), 0);
        if (cases[i].kind == 3) cr_assert(tu_write_file(w, bytes, sizeof bytes));
        TuRun r = irtool((const char *[]){"convert", model, "-o", onnx, NULL});
        if (!cases[i].msg) {
            cr_assert_eq(r.status, 0, "%s", r.err);
        } else {
            cr_assert_eq(r.status, 1, "case %zu: %s", i, r.err);
            cr_assert(strstr(r.err, cases[i].msg), "case %zu: %s", i, r.err);
            cr_assert_eq(access(onnx, F_OK), -1, "case %zu wrote the output", i);
        }
        tu_run_free(&r);
    }
    free(sub), free(secret), free(model), free(w), free(onnx);
}

/* item 8: `compile m.ir -o m.ir`, `convert -o` onto the input through another name, `run -o DIR`
 * onto an input inside DIR: exit 1, the input unchanged */
Test(reliability, outputs_never_clobber_inputs) {
    char *src = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    size_t n, xn;
    char *text = tu_read_file(src, &n), *xd = tu_read_file(x, &xn);
    char *m = write_in("m.ir", text), *link = tu_path_join(dir, "link.ir"), *od = tu_path_join(dir, "out");
    cr_assert_eq(symlink(m, link), 0);
    cr_assert_eq(mkdir(od, 0700), 0);
    char *y = tu_path_join(od, "y.npy"), spec[4096];
    cr_assert(tu_write_file(y, xd, xn));
    snprintf(spec, sizeof spec, "x=%s", y);
    const char *const *cmds[] = {
        (const char *[]){"compile", m, "--input", spec, "-o", m, NULL},
        (const char *[]){"compile", m, "--input", spec, "-o", y, NULL},
        (const char *[]){"convert", link, "-o", m, NULL},
        (const char *[]){"opt", m, "-p", "default", "-o", link, NULL},
        (const char *[]){"run", m, "--input", y, "-o", od, NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        TuRun r = irtool(cmds[i]);
        cr_assert_eq(r.status, 1, "%s: %s", cmds[i][0], r.err);
        cr_assert(strstr(r.err, "is the same file as"), "%s: %s", cmds[i][0], r.err);
        tu_run_free(&r);
        size_t k;
        char *now = tu_read_file(m, &k), *ynow = tu_read_file(y, &xn);
        cr_assert(k == n && !memcmp(now, text, n), "%s changed the model", cmds[i][0]);
        cr_assert(!memcmp(ynow, xd, xn), "%s changed the input", cmds[i][0]);
        free(now), free(ynow);
    }
    free(src), free(x), free(text), free(xd), free(m), free(link), free(od), free(y);
}

/* item 8: `fmt -i` keeps the file's permissions and writes through a symlink (the link stays) */
Test(reliability, fmt_in_place_keeps_mode_and_symlink) {
    char *m = write_in("m.ir", "graph @g(%x: f32[2]) {\n%y = Relu(%x) : f32[2]\n  return %y\n}\n");
    char *link = tu_path_join(dir, "link.ir");
    cr_assert_eq(symlink("m.ir", link), 0);
    cr_assert_eq(chmod(m, 0640), 0);
    TuRun r = irtool((const char *[]){"fmt", "-i", link, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the symlink was replaced by a file");
    cr_assert_eq(stat(m, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0640, "mode %o", st.st_mode & 07777);
    size_t n;
    char *text = tu_read_file(m, &n);
    cr_assert(strstr(text, "  %y = Relu(%x)"), "not formatted: %s", text);
    cr_assert_eq(tu_dir_count(dir), 2, "a temporary file was left");
    free(text), free(m), free(link);
}

/* item 9: a temporary file a killed writer left (TARGET.tmp.irtool.N, no lock held) is taken over
 * by the next write of the target; one a live writer holds (flock) is left alone; a failed
 * write leaves none */
Test(reliability, temp_files_swept_and_never_left) {
    char *src = tu_source_path("corpus/mlp.ir"), *out = tu_path_join(dir, "o.ir");
    char *stale = tu_path_join(dir, "o.ir.tmp.irtool.0"), *held = tu_path_join(dir, "o.ir.tmp.irtool.1");
    cr_assert(tu_write_file(stale, "half a model", 12));
    TuRun r = irtool((const char *[]){"convert", src, "-o", out, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    cr_assert_eq(access(stale, F_OK), -1, "the stale temporary file is still there");
    cr_assert_eq(tu_dir_count(dir), 1);
    /* a writer that is alive: its file and lock stay */
    cr_assert(tu_write_file(stale, "x", 1));
    cr_assert(tu_write_file(held, "y", 1));
    int fd0 = open(stale, O_RDONLY), fd1 = open(held, O_RDONLY);
    cr_assert(fd0 >= 0 && fd1 >= 0);
    cr_assert_eq(flock(fd0, LOCK_EX), 0);
    cr_assert_eq(flock(fd1, LOCK_EX), 0);
    r = irtool((const char *[]){"convert", src, "-o", out, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    cr_assert_eq(tu_dir_count(dir), 3, "the held temporary files must stay, no other may be left");
    close(fd0), close(fd1);
    /* a write that fails (a directory in the way) leaves nothing behind */
    unlink(stale), unlink(held);
    char *blocked = tu_path_join(dir, "d.ir");
    cr_assert_eq(mkdir(blocked, 0700), 0);
    r = irtool((const char *[]){"convert", src, "-o", blocked, NULL});
    cr_assert_neq(r.status, 0);
    tu_run_free(&r);
    cr_assert_eq(tu_dir_count(dir), 2, "a temporary file was left");
    free(src), free(out), free(stale), free(held), free(blocked);
}

/* item 10 (the CLI half): `validate --random` on a model with a 2^40 dim said nothing */
Test(reliability, random_inputs_too_large_say_so) {
    char *m = write_in("big.ir", "graph @big(%x: f32[1099511627776]) {\n"
                                 "  %y = Relu(%x) : f32[1099511627776]\n  return %y\n}\n");
    TuRun r = irtool((const char *[]){"validate", m, "-p", "fuse", "--random", "1", NULL});
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "input 'x' is f32[1099511627776], 4398046511104 bytes: more than this machine's memory"), "%s",
              r.err);
    tu_run_free(&r);
    free(m);
}
