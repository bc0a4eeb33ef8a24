/* Kernel-level compile cache: every kernel of an artifact is compiled to its own object keyed
 * by its LLVM IR (buffers numbered per kernel, not per model) and the target, so an identical
 * fused kernel in two different models is compiled once and shared through one cache entry
 * (the second compile says "kernels: N compiled, 1 from the cache"); both artifacts load. */
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
