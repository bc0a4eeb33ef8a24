/* The compile cache of `irtool compile` (issue 8): miss then hit with identical bytes, keys
 * that tell pipelines and targets apart, a corrupted entry, another key's entry and an older
 * irtool's entry each detected and rebuilt, `cache stats` and `cache clear`, and two concurrent
 * compiles of one model. Runs the real irtool binary with a temporary --cache-dir. */
#include "testutil.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

#if defined(__x86_64__)
#define OTHER_CPU "cpu:x86-64"
#elif defined(__aarch64__)
#define OTHER_CPU "cpu:generic"
#else
#define OTHER_CPU "cpu:generic"
#endif

typedef struct Fx {
    char *dir, *cache, *model, *spec;
} Fx;

static Fx fx_make(void) {
    Fx f;
    f.dir = tu_mkdtemp();
    f.cache = tu_path_join(f.dir, "cache");
    f.model = tu_source_path("corpus/mlp.ir");
    char *x = tu_source_path("corpus/inputs/mlp_x.npy");
    f.spec = malloc(strlen(x) + 8);
    cr_assert(f.spec);
    sprintf(f.spec, "x=%s", x);
    free(x);
    return f;
}

static void fx_free(Fx *f) {
    tu_rmtree(f->dir);
    free(f->dir), free(f->cache), free(f->model), free(f->spec);
}

/* Compiles mlp into dir/name with the options; returns stdout+stderr (malloc'd). */
static char *compile(const Fx *f, const char *name, const char *pipeline, const char *target) {
    char *out = tu_path_join(f->dir, name);
    const char *args[16];
    int n = 0;
    args[n++] = "compile";
    args[n++] = f->model;
    args[n++] = "--input";
    args[n++] = f->spec;
    args[n++] = "--target";
    args[n++] = target ? target : "cpu";
    args[n++] = "--cache-dir";
    args[n++] = f->cache;
    args[n++] = "-o";
    args[n++] = out;
    if (pipeline) {
        args[n++] = "-p";
        args[n++] = pipeline;
    }
    args[n] = NULL;
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "compile failed: %s", r.err);
    char *text = malloc(r.out_len + r.err_len + 1);
    cr_assert(text);
    memcpy(text, r.out, r.out_len);
    memcpy(text + r.out_len, r.err, r.err_len);
    text[r.out_len + r.err_len] = 0;
    tu_run_free(&r);
    free(out);
    return text;
}

static char *cache_cmd(const Fx *f, const char *sub) {
    const char *args[] = {"cache", sub, "--cache-dir", f->cache, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "cache %s failed: %s", sub, r.err);
    char *o = strdup(r.out);
    tu_run_free(&r);
    return o;
}

static long stat_entries(const Fx *f) {
    char *o = cache_cmd(f, "stats");
    const char *p = strstr(o, "\nentries ");
    cr_assert(p, "%s", o);
    long n = strtol(p + 9, NULL, 10);
    free(o);
    return n;
}

/* Path of the (single) .irx entry in the cache (malloc'd). */
static char *entry_path(const Fx *f) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "find '%s' -name '*.irx' -not -name '*.tmp.*'", f->cache);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char line[4096] = "";
    cr_assert(fgets(line, sizeof line, p), "no entry in %s", f->cache);
    pclose(p);
    line[strcspn(line, "\n")] = 0;
    return strdup(line);
}

Test(cache, miss_then_hit_identical_bytes) {
    Fx f = fx_make();
    char *o1 = compile(&f, "a.irx", NULL, NULL), *o2 = compile(&f, "b.irx", NULL, NULL);
    cr_assert(strstr(o1, "cache miss"), "%s", o1);
    cr_assert(strstr(o2, "cache hit"), "%s", o2);
    char *pa = tu_path_join(f.dir, "a.irx"), *pb = tu_path_join(f.dir, "b.irx");
    size_t la, lb;
    char *a = tu_read_file(pa, &la), *b = tu_read_file(pb, &lb);
    cr_assert(a && b);
    cr_assert_eq(la, lb);
    cr_assert_eq(memcmp(a, b, la), 0, "the hit differs from the compiled artifact");
    /* the hit runs */
    const char *args[] = {"run", pb, "--input", f.spec, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "run of the cached artifact failed: %s", r.err);
    tu_run_free(&r);
    cr_assert_eq(stat_entries(&f), 1);
    free(a), free(b), free(pa), free(pb), free(o1), free(o2);
    fx_free(&f);
}

Test(cache, pipeline_and_target_change_the_key) {
    Fx f = fx_make();
    char *o1 = compile(&f, "a.irx", NULL, NULL);
    char *o2 = compile(&f, "b.irx", "canonicalize", NULL);
    char *o3 = compile(&f, "c.irx", NULL, OTHER_CPU);
    char *o4 = compile(&f, "d.irx", NULL, OTHER_CPU);
    cr_assert(strstr(o1, "cache miss"), "%s", o1);
    cr_assert(strstr(o2, "cache miss"), "a different pipeline hit: %s", o2);
    cr_assert(strstr(o3, "cache miss"), "a different target hit: %s", o3);
    cr_assert(strstr(o4, "cache hit"), "%s", o4);
    cr_assert_eq(stat_entries(&f), 3);
    free(o1), free(o2), free(o3), free(o4);
    fx_free(&f);
}

Test(cache, corrupt_entry_rebuilt) {
    Fx f = fx_make();
    free(compile(&f, "a.irx", NULL, NULL));
    char *e = entry_path(&f);
    size_t n;
    char *bytes = tu_read_file(e, &n);
    cr_assert(bytes && n > 200);
    FILE *w = fopen(e, "r+b");
    cr_assert(w);
    fseek(w, (long)(n / 2), SEEK_SET);
    fputc(bytes[n / 2] ^ 0x5a, w);
    fclose(w);
    char *o = compile(&f, "b.irx", NULL, NULL);
    cr_assert(strstr(o, "failed its checksum"), "corruption not reported: %s", o);
    cr_assert(strstr(o, "cache miss"), "%s", o);
    size_t nb;
    char *rebuilt = tu_read_file(e, &nb);
    cr_assert(rebuilt, "the entry was not rebuilt");
    cr_assert_eq(nb, n);
    cr_assert_eq(memcmp(rebuilt, bytes, n), 0);
    char *o2 = compile(&f, "c.irx", NULL, NULL);
    cr_assert(strstr(o2, "cache hit"), "%s", o2);
    free(e), free(bytes), free(rebuilt), free(o), free(o2);
    fx_free(&f);
}

Test(cache, stats_and_clear) {
    Fx f = fx_make();
    cr_assert_eq(stat_entries(&f), 0);
    free(compile(&f, "a.irx", NULL, NULL));
    free(compile(&f, "b.irx", "canonicalize", NULL));
    char *s = cache_cmd(&f, "stats");
    cr_assert(strstr(s, "entries 2"), "%s", s);
    cr_assert(strstr(s, "version " IRTOOL_VERSION_STRING " entries 2"), "%s", s);
    cr_assert(strstr(s, "\nbytes "), "%s", s);
    char *c = cache_cmd(&f, "clear");
    cr_assert(strstr(c, "removed 2 entries"), "%s", c);
    cr_assert_eq(stat_entries(&f), 0);
    char *o = compile(&f, "c.irx", NULL, NULL);
    cr_assert(strstr(o, "cache miss"), "%s", o);
    free(s), free(c), free(o);
    fx_free(&f);
}

Test(cache, concurrent_compiles) {
    Fx f = fx_make();
    enum { N = 3 };
    pid_t pid[N];
    char *outs[N];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%d.irx", i);
        outs[i] = tu_path_join(f.dir, name);
        char *argv[] = {(char *)IRTOOL_BINARY, "compile", f.model, "--input", f.spec, "--cache-dir", f.cache,
                        "-o", outs[i], NULL};
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        cr_assert_eq(posix_spawn(&pid[i], IRTOOL_BINARY, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
    }
    for (int i = 0; i < N; i++) {
        int st;
        cr_assert_eq(waitpid(pid[i], &st, 0), pid[i]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d failed", i);
    }
    cr_assert_eq(stat_entries(&f), 1);
    /* no temp files left, and the entry is valid: a hit with the same bytes */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "find '%s' -name '*.tmp.*' | grep -q .", f.cache);
    cr_assert_neq(system(cmd), 0, "temporary files left in the cache");
    char *o = compile(&f, "after.irx", NULL, NULL);
    cr_assert(strstr(o, "cache hit"), "%s", o);
    size_t l0, l1;
    char *p_after = tu_path_join(f.dir, "after.irx");
    char *a = tu_read_file(outs[0], &l0), *b = tu_read_file(p_after, &l1);
    cr_assert(a && b && l0 == l1 && memcmp(a, b, l0) == 0);
    free(a), free(b), free(p_after), free(o);
    for (int i = 0; i < N; i++) free(outs[i]);
    fx_free(&f);
}

/* Paths of the entry of the compile whose output went to out_name: the .irx whose bytes are
 * that output's (malloc'd; the .sum beside it has the same stem). */
static char *entry_of(const Fx *f, const char *out_name) {
    char *out = tu_path_join(f->dir, out_name);
    size_t n;
    char *want = tu_read_file(out, &n);
    cr_assert(want);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "find '%s' -path '*/kernels' -prune -o -name '*.irx' -print", f->cache);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char line[4096], *found = NULL;
    while (!found && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        size_t m;
        char *b = tu_read_file(line, &m);
        if (b && m == n && memcmp(b, want, n) == 0) found = strdup(line);
        free(b);
    }
    pclose(p);
    cr_assert(found, "no entry holds %s", out_name);
    free(out), free(want);
    return found;
}

static char *sum_of(const char *irx) {
    char *s = strdup(irx);
    strcpy(s + strlen(s) - 4, ".sum");
    return s;
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *b = tu_read_file(from, &n);
    cr_assert(b && tu_write_file(to, b, n));
    free(b);
}

static bool same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x), free(y);
    return same;
}

/* Another model's entry moved under this key, with its sum, is not served: the sum names the
 * key it was made for. The irx alone moved fails its checksum. Both are rebuilt. */
Test(cache, entry_bound_to_its_key) {
    Fx f = fx_make();
    free(compile(&f, "a.irx", NULL, NULL));
    free(compile(&f, "b.irx", "canonicalize", NULL));
    char *ea = entry_of(&f, "a.irx"), *eb = entry_of(&f, "b.irx");
    char *sa = sum_of(ea), *sb = sum_of(eb);
    cr_assert(!same_file(ea, eb), "the two compiles gave the same artifact; the test needs two");
    char *pa = tu_path_join(f.dir, "a.irx"), *pc = tu_path_join(f.dir, "c.irx"), *pd = tu_path_join(f.dir, "d.irx");
    /* the pair moved */
    copy_file(eb, ea);
    copy_file(sb, sa);
    char *o = compile(&f, "c.irx", NULL, NULL);
    cr_assert(strstr(o, "belongs to another key") && strstr(o, "cache miss (misplaced entry rebuilt)"), "%s", o);
    cr_assert(same_file(pc, pa), "not this model's artifact");
    cr_assert(same_file(ea, pa), "the entry was not rebuilt");
    free(o);
    /* the irx alone */
    copy_file(eb, ea);
    o = compile(&f, "d.irx", NULL, NULL);
    cr_assert(strstr(o, "failed its checksum") && strstr(o, "cache miss"), "%s", o);
    cr_assert(same_file(pd, pa));
    free(o);
    o = compile(&f, "e.irx", NULL, NULL);
    cr_assert(strstr(o, "cache hit"), "%s", o);
    free(o), free(ea), free(eb), free(sa), free(sb), free(pa), free(pc), free(pd);
    fx_free(&f);
}

/* An entry of an older irtool (FNV-1a sum) is recognised and rebuilt, not misread */
Test(cache, old_format_entry_rebuilt) {
    Fx f = fx_make();
    free(compile(&f, "a.irx", NULL, NULL));
    char *e = entry_of(&f, "a.irx"), *s = sum_of(e);
    char *text = tu_read_file(s, NULL);
    cr_assert(!strncmp(text, "irtool-cache-entry 2\nkey ", 25) && strstr(text, "\nblake2b-256:"), "%s", text);
    size_t n;
    free(tu_read_file(e, &n));
    char old[128];
    snprintf(old, sizeof old, "fnv1a64 0123456789abcdef %zu\n", n);
    cr_assert(tu_write_file(s, old, strlen(old)));
    char *o = compile(&f, "b.irx", NULL, NULL);
    cr_assert(strstr(o, "cache miss (entry of an older irtool rebuilt)"), "%s", o);
    char *again = tu_read_file(s, NULL);
    cr_assert_str_eq(again, text);
    free(o), free(e), free(s), free(text), free(again);
    fx_free(&f);
}
