/* Kernel-level compile cache: every kernel of an artifact is compiled to its own object keyed
 * by its LLVM IR (buffers numbered per kernel, not per model) and the target, so an identical
 * fused kernel in two different models is compiled once and shared through one cache entry
 * (the second compile says "kernels: N compiled, 1 from the cache"); both artifacts load. A
 * cached object that does not link, load or pass the gate is compiled again and replaced. */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static const char *model_c = "graph @c(%x: f32[8, 16], %w: f32[16, 4]) {\n"
                             "  %r = Relu(%x) : f32[8, 16]\n  %s = Mul(%r, %x) : f32[8, 16]\n"
                             "  %m = MatMul(%s, %w) : f32[8, 4]\n  return %m\n}\n";
static const char *model_d = "graph @d(%a: f32[8, 16]) {\n"
                             "  %r = Relu(%a) : f32[8, 16]\n  %s = Mul(%r, %a) : f32[8, 16]\n"
                             "  %t = Transpose(%s) {perm = [1, 0]} : f32[16, 8]\n  return %t\n}\n";

static char *compile(const char *dir, const char *name, const char *text, const char *cache, const char *expect) {
    char file[64], out[64];
    snprintf(file, sizeof file, "%s.ir", name);
    snprintf(out, sizeof out, "%s.irx", name);
    char *src = tu_path_join(dir, file), *irx = tu_path_join(dir, out);
    cr_assert(tu_write_file(src, text, strlen(text)));
    const char *args[] = {"compile", src, "-p", "fuse", "--cache-dir", cache, "-o", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, expect), "expected '%s' in: %s", expect, r.out);
    tu_run_free(&r);
    free(src);
    char err[512];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    irt_free(a);
    return irx;
}

Test(cache_kernels, identical_fused_kernel_shared_between_models) {
    char *dir = tu_mkdtemp(), *cache = tu_path_join(dir, "cache");
    /* the fused Relu*x group and the MatMul */
    char *c = compile(dir, "c", model_c, cache, "kernels: 2 compiled, 0 from the cache");
    /* the same group, compiled for c, and a new Transpose */
    char *d = compile(dir, "d", model_d, cache, "kernels: 1 compiled, 1 from the cache");
    const char *args[] = {"cache", "stats", "--cache-dir", cache, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert(strstr(r.out, "\nentries 2\n"), "%s", r.out);
    cr_assert(strstr(r.out, "kernel objects 3 "), "%s", r.out);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(cache), free(c), free(d);
}

/* The .irx files under cache/kernels (malloc'd list, NULL-terminated). */
static char **kernel_entries(const char *cache, size_t *n) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "find '%s/kernels' -name '*.irx' -not -name '*.tmp.*' | sort", cache);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char **v = calloc(64, sizeof *v), line[4096];
    *n = 0;
    while (*n < 63 && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        v[(*n)++] = strdup(line);
    }
    pclose(p);
    return v;
}

/* key of an entry path: the file name without .irx */
static void entry_key(const char *path, char key[IR_CACHE_KEY_CHARS]) {
    const char *b = strrchr(path, '/') + 1;
    memcpy(key, b, IR_CACHE_KEY_CHARS - 1);
    key[IR_CACHE_KEY_CHARS - 1] = 0;
}

/* Stores bytes as the kernel entry of key with a matching sum, as a damaged or planted entry
 * would look to a checksum alone. */
static void plant(const char *cache, const char *key, const void *bytes, size_t n) {
    char *kdir = tu_path_join(cache, "kernels");
    IrDiag d;
    ir_diag_init(&d, NULL, NULL);
    cr_assert_eq(ir_cache_store(kdir, key, bytes, n, &d), IR_OK);
    free(kdir);
}

static bool entry_is(const char *cache, const char *key, const char *bytes, size_t n) {
    size_t m;
    char **e = kernel_entries(cache, &m);
    bool same = false;
    for (size_t i = 0; i < m; i++) {
        char k[IR_CACHE_KEY_CHARS];
        entry_key(e[i], k);
        size_t l;
        char *b = tu_read_file(e[i], &l);
        if (!strcmp(k, key)) same = b && l == n && !memcmp(b, bytes, n);
        free(b), free(e[i]);
    }
    free(e);
    return same;
}

/* A cached kernel object that fails (another kernel's object under a key, with a sum that
 * matches, as a damaged entry would look to a checksum alone) costs one rebuild, where it used
 * to fail every compile until `cache clear`: when the objects do not link (the other kernel
 * defined twice) they are evicted and compiled again; when the artifact does not load (the
 * kernel's symbol missing) the gate compiles every kernel afresh. The entries are replaced. */
Test(cache_kernels, failing_object_evicted_and_rebuilt) {
    char *dir = tu_mkdtemp(), *cache = tu_path_join(dir, "cache");
    free(compile(dir, "c", model_c, cache, "kernels: 2 compiled, 0 from the cache"));
    size_t n;
    char **e = kernel_entries(cache, &n);
    cr_assert_eq(n, 2);
    size_t l0, l1;
    char *b0 = tu_read_file(e[0], &l0), *b1 = tu_read_file(e[1], &l1);
    char k0[IR_CACHE_KEY_CHARS], k1[IR_CACHE_KEY_CHARS];
    entry_key(e[0], k0), entry_key(e[1], k1);
    /* does not link: c under another graph name (a new artifact key, the same two kernels) */
    plant(cache, k0, b1, l1);
    char *c2 = strdup(model_c);
    memcpy(strstr(c2, "@c("), "@k(", 3);
    char *src = tu_path_join(dir, "k.ir"), *irx = tu_path_join(dir, "k.irx");
    cr_assert(tu_write_file(src, c2, strlen(c2)));
    const char *args[] = {"compile", src, "-p", "fuse", "--cache-dir", cache, "-o", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "cached kernel objects did not link; evicted them"), "%s", r.err);
    cr_assert(strstr(r.out, "kernels: 2 compiled, 0 from the cache"), "%s", r.out);
    tu_run_free(&r);
    cr_assert(entry_is(cache, k0, b0, l0) && entry_is(cache, k1, b1, l1), "the entries were not rebuilt");
    /* does not load: d shares one of the two kernels; each entry holds the other's object */
    plant(cache, k0, b1, l1);
    plant(cache, k1, b0, l0);
    char *d = compile(dir, "d", model_d, cache, "kernels: 2 compiled, 0 from the cache");
    cr_assert(entry_is(cache, k0, b0, l0) || entry_is(cache, k1, b1, l1), "the shared kernel's entry was not rebuilt");
    for (size_t i = 0; i < n; i++) free(e[i]);
    free(e), free(b0), free(b1), free(c2), free(src), free(irx), free(d);
    tu_rmtree(dir);
    free(dir), free(cache);
}

/* Replaces every occurrence of the n bytes at from by those at to (same length) in buf. */
static int patch(char *buf, size_t len, const char *from, const char *to, size_t n) {
    int hits = 0;
    for (size_t i = 0; i + n <= len; i++)
        if (!memcmp(buf + i, from, n)) memcpy(buf + i, to, n), hits++;
    return hits;
}

/* A cached kernel that links but computes something else (Relu(x) + x under the key of
 * Relu(x) * x) fails the gate; the kernels are compiled afresh and the compile succeeds. */
Test(cache_kernels, object_that_fails_the_gate_recompiled) {
    static const char *model_e = "graph @e(%a: f32[8, 16]) {\n"
                                 "  %r = Relu(%a) : f32[8, 16]\n  %s = Add(%r, %a) : f32[8, 16]\n  return %s\n}\n";
    static const char *model_f = "graph @f(%a: f32[8, 16]) {\n"
                                 "  %r = Relu(%a) : f32[8, 16]\n  %s = Mul(%r, %a) : f32[8, 16]\n  return %s\n}\n";
    char *dir = tu_mkdtemp(), *ce = tu_path_join(dir, "ce"), *cf = tu_path_join(dir, "cf");
    free(compile(dir, "e", model_e, ce, "kernels: 1 compiled, 0 from the cache"));
    free(compile(dir, "f", model_f, cf, "kernels: 1 compiled, 0 from the cache"));
    size_t ne, nf;
    char **ee = kernel_entries(ce, &ne), **ef = kernel_entries(cf, &nf);
    cr_assert(ne == 1 && nf == 1);
    char ke[IR_CACHE_KEY_CHARS], kf[IR_CACHE_KEY_CHARS];
    entry_key(ee[0], ke), entry_key(ef[0], kf);
    size_t len;
    char *obj = tu_read_file(ee[0], &len);
    cr_assert(patch(obj, len, ke, kf, IR_CACHE_KEY_CHARS - 1) > 0, "the kernel's symbol was not found");
    plant(cf, kf, obj, len);
    /* a fresh artifact key (another output name), the same kernel */
    static const char *model_g = "graph @g(%a: f32[8, 16]) {\n"
                                 "  %r = Relu(%a) : f32[8, 16]\n  %t = Mul(%r, %a) : f32[8, 16]\n  return %t\n}\n";
    char *src = tu_path_join(dir, "g.ir"), *irx = tu_path_join(dir, "g.irx");
    cr_assert(tu_write_file(src, model_g, strlen(model_g)));
    const char *args[] = {"compile", src, "-p", "fuse", "--cache-dir", cf, "-o", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "failed validation with 1 kernel from the cache; compiling it again"), "%s", r.err);
    cr_assert(strstr(r.out, "kernels: 1 compiled, 0 from the cache"), "%s", r.out);
    tu_run_free(&r);
    size_t l;
    char *now = tu_read_file(ef[0], &l);
    cr_assert(now && (l != len || memcmp(now, obj, len) != 0), "the bad entry was not replaced");
    free(now), free(obj), free(src), free(irx);
    free(ee[0]), free(ef[0]), free(ee), free(ef);
    tu_rmtree(dir);
    free(dir), free(ce), free(cf);
}
