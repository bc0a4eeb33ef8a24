/* Artifacts (issue 8): `irtool compile` writes .irx files that libirtool-runtime loads and runs
 * (irt_load/irt_run) with the interpreter's results; guards, preflight, concurrency, the
 * validation gate and `irtool inspect`. */
#include "backend/runtime/checksum.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static IrtTensor to_irt(const IrTensor *t) {
    IrtTensor r = {.dtype = (int32_t)t->dtype, .rank = t->rank, .data = t->data};
    memcpy(r.dims, t->dims, sizeof r.dims);
    return r;
}

/* Loads the artifact, runs it on input and compares with the interpreter on the model. */
static void check_model(const char *model, const char *input_npy, const char *irx) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(model, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    IrTensor in = {0}, ref = {0};
    if (input_npy) cr_assert_eq(ir_npy_read(input_npy, &d.diag, &in), IR_OK);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "irt_load: %s", err);
    cr_assert_eq(irt_num_inputs(a), 1);
    cr_assert_eq(irt_num_outputs(a), ir_graph_num_outputs(g));
    if (!input_npy) { /* make one of the compiled shape */
        IrtTensor info;
        irt_input_info(a, 0, &info);
        cr_assert_eq(ir_tensor_alloc(&in, (IrDType)info.dtype, info.rank, info.dims), IR_OK);
        for (int64_t i = 0; i < ir_tensor_numel(&in); i++) ((float *)in.data)[i] = (float)((i * 37) % 101) / 101.0f;
    }
    IrInterpOptions o = {0};
    cr_assert_eq(ir_interp_run(g, &in, 1, &ref, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrtTensor ri = to_irt(&in), out;
    cr_assert_eq(irt_run(a, &ri, &out, err, sizeof err), 0, "%s", err);
    cr_assert_eq(out.rank, ref.rank);
    for (int64_t i = 0; i < ir_tensor_numel(&ref); i++) {
        float e = ((float *)ref.data)[i], gv = ((float *)out.data)[i];
        cr_assert(fabsf(e - gv) <= 1e-5f + 1e-4f * fabsf(e), "%s: element %lld: %g vs %g", model, (long long)i, gv, e);
    }
    free(out.data);
    irt_free(a);
    ir_tensor_free(&in);
    ir_tensor_free(&ref);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(artifact, mlp) {
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    char spec[4096];
    snprintf(spec, sizeof spec, "x=%s", x);
    char err_[4096], *irx = tu_compile_cpu(dir, model, spec, "mlp.irx", err_, sizeof err_);
    cr_assert(irx, "%s", err_);
    check_model(model, x, irx);
    tu_rmtree(dir);
    free(dir), free(model), free(x), free(irx);
}

Test(artifact, conv_block) {
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/conv_block.ir");
    char err_[4096], *irx = tu_compile_cpu(dir, model, NULL, "conv.irx", err_, sizeof err_);
    cr_assert(irx, "%s", err_);
    check_model(model, NULL, irx);
    tu_rmtree(dir);
    free(dir), free(model), free(irx);
}

Test(artifact, torch_tiny_mlp) {
    const char *s = getenv("IRTOOL_SHARED_DIR");
    if (!s) cr_skip_test("IRTOOL_SHARED_DIR is not set");
    char *tm = tu_path_join(s, "torch-models/tiny_mlp"), *model = tu_path_join(tm, "model.onnx");
    char *x = tu_path_join(tm, "input_x.npy");
    if (tu_dir_count(tm) < 0) cr_skip_test("%s is absent", tm);
    char *dir = tu_mkdtemp();
    char err_[4096], *irx = tu_compile_cpu(dir, model, x, "tiny.irx", err_, sizeof err_);
    cr_assert(irx, "%s", err_);
    check_model(model, x, irx);
    tu_rmtree(dir);
    free(dir), free(tm), free(model), free(x), free(irx);
}

Test(artifact, guard_wrong_shape) {
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/conv_block.ir");
    char err_[4096], *irx = tu_compile_cpu(dir, model, NULL, "conv.irx", err_, sizeof err_);
    cr_assert(irx, "%s", err_);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    float data[2 * 3 * 16 * 16] = {0};
    IrtTensor in = {.dtype = 0, .rank = 4, .dims = {2, 3, 16, 16}, .data = data}, out;
    IrtTensor info;
    irt_input_info(a, 0, &info);
    in.dtype = info.dtype;
    cr_assert_eq(irt_run(a, &in, &out, err, sizeof err), -1);
    cr_assert(strstr(err, "input 'image' dim 0 is 2, the artifact was compiled for 1 (f32[1, 3, 16, 16])"), "%s", err);
    irt_free(a);
    tu_rmtree(dir);
    free(dir), free(model), free(irx);
}

static void bad_magic(char *d, size_t len) { (void)len, d[0] = 'X'; }
static void newer_version(char *d, size_t len) { (void)len, d[8] = 99; }

/* Rewrites the artifact's bytes with `edit` (its checksum made to match again, except for the
 * header edits checked before it), loads it and expects `msg` in the error. */
static void expect_preflight(const char *irx, void (*edit)(char *data, size_t len), const char *msg) {
    size_t len;
    char *data = tu_read_file(irx, &len);
    cr_assert(data);
    edit(data, len);
    if (edit != bad_magic && edit != newer_version) irt_artifact_put_checksum((unsigned char *)data, len);
    char err[1024];
    IrtArtifact *a = irt_load_memory(data, len, err, sizeof err);
    cr_assert_null(a);
    cr_assert(strstr(err, msg), "expected '%s' in: %s", msg, err);
    free(data);
}

static void other_triple(char *d, size_t len) {
    char *t = memmem(d, len, "triple x86_64", 13);
    cr_assert(t, "no triple in the manifest");
    memcpy(t + 7, "mips64", 6);
}

Test(artifact, preflight) {
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/conv_block.ir");
    char err_[4096], *irx = tu_compile_cpu(dir, model, NULL, "conv.irx", err_, sizeof err_);
    cr_assert(irx, "%s", err_);
    expect_preflight(irx, bad_magic, "not an irtool artifact (bad magic)");
    expect_preflight(irx, newer_version, "artifact format version 99 is newer than this runtime supports");
    expect_preflight(irx, other_triple, "artifact was compiled for target triple 'mips64");
    tu_rmtree(dir);
    free(dir), free(model), free(irx);
}

typedef struct Job {
    IrtArtifact *a;
    IrtTensor in;
    float out[64];
    int rc;
} Job;

static void *worker(void *p) {
    Job *j = p;
    char err[256];
    for (int it = 0; it < 50 && !j->rc; it++) {
        IrtTensor out;
        j->rc = irt_run(j->a, &j->in, &out, err, sizeof err);
        if (!j->rc) {
            memcpy(j->out, out.data, (size_t)(out.dims[0] * out.dims[1]) * sizeof(float));
            free(out.data);
        }
    }
    return NULL;
}

Test(artifact, concurrent_runs) {
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    char spec[4096];
    snprintf(spec, sizeof spec, "x=%s", x);
    char err_[4096], *irx = tu_compile_cpu(dir, model, spec, "mlp.irx", err_, sizeof err_);
    cr_assert(irx, "%s", err_);
    TuDiag d;
    tu_diag_init(&d);
    IrTensor in = {0};
    cr_assert_eq(ir_npy_read(x, &d.diag, &in), IR_OK);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    IrtTensor info;
    irt_output_info(a, 0, &info);
    cr_assert(info.rank == 2 && info.dims[0] * info.dims[1] <= 64);
    Job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].a = a;
        jobs[i].in = to_irt(&in);
        cr_assert_eq(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(jobs[i].rc, 0);
        cr_assert_eq(memcmp(jobs[i].out, jobs[0].out, sizeof jobs[0].out), 0, "thread %d differs", i);
    }
    irt_free(a);
    ir_tensor_free(&in);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir), free(model), free(x), free(irx);
}

Test(artifact, gate_refuses_difference) {
    /* No graph miscompiles on purpose: the test hook shifts one compiled output element. */
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/conv_block.ir"), *out = tu_path_join(dir, "bad.irx");
    setenv("IRTOOL_TEST_PERTURB_OUTPUT", "1", 1);
    const char *args[] = {"compile", model, "-o", out, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    unsetenv("IRTOOL_TEST_PERTURB_OUTPUT");
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, "validation failed: output 'logits'"), "%s", r.err);
    cr_assert(strstr(r.err, "worst element 0"), "%s", r.err);
    cr_assert_eq(tu_dir_count(dir), 0, "the artifact was written");
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(model), free(out);
}

/* A 64-channel 3x3 Conv at 28x28 on small integers (weights -1, 0, 1; inputs floor(8 x) of the
 * gate's 0-1): the direct form and F(2x2, 3x3) (transforms of 0, +-1 and 1/2) are exact, while
 * F(4x4, 3x3)'s 1/6 and 1/24 round, putting about 1% of the outputs (exact zeros among them)
 * outside atol 1e-5. By default compile falls back to F(2x2) and writes the artifact;
 * --winograd 4 keeps F(4x4) and the gate refuses; --winograd 2 passes at once. (No Winograd
 * without AVX-512 or AVX2 with FMA: all three pass.) */
Test(artifact, winograd4_gate_falls_back) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "wg.ir"), *out = tu_path_join(dir, "wg.irx");
    size_t cap = 64 * 64 * 9 * 4 + 1024, len = 0;
    char *t = malloc(cap);
    cr_assert(t);
    len += (size_t)snprintf(t + len, cap - len, "graph @wg(%%x: f32[1, 64, 28, 28]) {\n  const %%eight: f32[] = [8.0]\n"
                                                "  const %%w: f32[64, 64, 3, 3] = [");
    uint64_t x = 5;
    for (int i = 0; i < 64 * 64 * 9; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        len += (size_t)snprintf(t + len, cap - len, "%s%d", i ? ", " : "", (int)((x >> 40) % 3) - 1);
    }
    len += (size_t)snprintf(t + len, cap - len,
                            "]\n  %%x8 = Mul(%%x, %%eight) : f32[1, 64, 28, 28]\n  %%xs = Floor(%%x8) : f32[1, 64, 28, 28]\n"
                            "  %%y = Conv(%%xs, %%w) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 64, 28, 28]\n"
                            "  return %%y\n}\n");
    cr_assert(tu_write_file(model, t, len));
    free(t);
    bool wg = __builtin_cpu_supports("avx512f") || (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
    TuRun r;
    const char *fallback[] = {"compile", model, "--no-cache", "-o", out, NULL};
    cr_assert(tu_run_irtool(fallback, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    if (wg)
        cr_assert(strstr(r.err, "note: 1 Conv through Winograd F(4x4, 3x3); recompiling with F(2x2, 3x3)"), "%s", r.err);
    cr_assert(strstr(r.out, "validated against the interpreter"), "%s", r.out);
    tu_run_free(&r);
    const char *four[] = {"compile", model, "--no-cache", "--winograd", "4", "-o", out, NULL};
    cr_assert(tu_run_irtool(four, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, wg ? 1 : 0, "%s", r.err);
    if (wg) cr_assert(strstr(r.err, "validation failed: output 'y'") && !strstr(r.err, "recompiling"), "%s", r.err);
    tu_run_free(&r);
    const char *two[] = {"compile", model, "--no-cache", "--winograd=2", "-o", out, NULL};
    cr_assert(tu_run_irtool(two, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(!strstr(r.err, "validation failed"), "%s", r.err);
    tu_run_free(&r);
    const char *bad[] = {"compile", model, "--winograd", "3", "-o", out, NULL};
    cr_assert(tu_run_irtool(bad, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "--winograd takes 4, 2 or off"), "%s", r.err);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(model), free(out);
}

Test(artifact, run_and_inspect_cli) {
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    char spec[4096];
    snprintf(spec, sizeof spec, "x=%s", x);
    char err_[4096], *irx = tu_compile_cpu(dir, model, spec, "mlp.irx", err_, sizeof err_);
    cr_assert(irx, "%s", err_);
    const char *ia[] = {"inspect", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(ia, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *want[] = {"format 8", "irtool_version ", "llvm_version 19.", "ir_hash blake2b-256:", "triple x86_64",
                          "cpu ", "input 0 x ", "output 0 y ", "workspace ", "kernels ", "preflight ok"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) cr_assert(strstr(r.out, want[i]), "no '%s' in:\n%s", want[i], r.out);
    tu_run_free(&r);
    const char *ib[] = {"inspect", model, NULL};
    cr_assert(tu_run_irtool(ib, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "not an irtool artifact (bad magic)"), "%s", r.err);
    tu_run_free(&r);
    const char *ra[] = {"run", irx, "--input", x, NULL}, *rb[] = {"run", model, "--input", x, NULL};
    TuRun r1, r2;
    cr_assert(tu_run_irtool(ra, NULL, 0, NULL, &r1));
    cr_assert(tu_run_irtool(rb, NULL, 0, NULL, &r2));
    cr_assert_eq(r1.status, 0, "%s", r1.err);
    cr_assert(strncmp(r1.out, "y: f32[2, 10]", 13) == 0, "%s", r1.out);
    cr_assert_str_eq(r1.out, r2.out);
    tu_run_free(&r1);
    tu_run_free(&r2);
    tu_rmtree(dir);
    free(dir), free(model), free(x), free(irx);
}

/* The same Conv compiled for an AVX2 target (x86-64-v3: the GEMM goes through OpenBLAS) and an
 * AVX-512 one (x86-64-v4: generated packed GEMM, no BLAS); both pass the validation gate and,
 * where this host has the features, run with the interpreter's results. */
Test(artifact, conv_targets_blas_and_packed) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "conv.ir");
    const char *text = "graph @c(%x: f32[1, 16, 32, 32], %w: f32[32, 16, 3, 3]) {\n"
                       "  %y = Conv(%x, %w) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1, 32, 16, 16]\n"
                       "  %r = Relu(%y) : f32[1, 32, 16, 16]\n"
                       "  return %r\n}\n";
    cr_assert(tu_write_file(model, text, strlen(text)));
    const char *targets[2] = {"cpu:x86-64-v3", "cpu:x86-64-v4"}, *blas[2] = {"blas 1", "blas 0"};
    for (int i = 0; i < 2; i++) {
        char *out = tu_path_join(dir, i ? "v4.irx" : "v3.irx");
        const char *args[] = {"compile", model, "--target", targets[i], "--no-cache", "-o", out, NULL};
        TuRun r;
        cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
        if (r.status != 0 && strstr(r.err, "cannot run")) { /* this host lacks the target's features */
            tu_run_free(&r);
            free(out);
            continue;
        }
        cr_assert_eq(r.status, 0, "%s: %s", targets[i], r.err);
        tu_run_free(&r);
        const char *iargs[] = {"inspect", out, NULL};
        cr_assert(tu_run_irtool(iargs, NULL, 0, NULL, &r));
        cr_expect(strstr(r.out, blas[i]), "%s: expected '%s' in the manifest:\n%s", targets[i], blas[i], r.out);
        tu_run_free(&r);
        free(out);
    }
    tu_rmtree(dir);
    free(dir), free(model);
}

/* A model of two Convs with constant weights of the given seed: 1x1 32 -> 40 (packed GEMM) then
 * 3x3 40 -> 32 at 16x16 (Winograd), weights whose value depends on seed. */
static char *two_conv_model(unsigned seed) {
    size_t cap = 1 << 20, n = 0;
    char *t = malloc(cap);
    cr_assert(t);
    n += (size_t)snprintf(t + n, cap - n, "graph @m(%%x: f32[1, 32, 16, 16]) {\n  const %%w1: f32[40, 32, 1, 1] = [");
    for (int i = 0; i < 40 * 32; i++) n += (size_t)snprintf(t + n, cap - n, "%s%g", i ? ", " : "", (double)(((i * 7 + seed) % 19) - 9) / 64.0);
    n += (size_t)snprintf(t + n, cap - n, "]\n  const %%w2: f32[32, 40, 3, 3] = [");
    for (int i = 0; i < 32 * 40 * 9; i++)
        n += (size_t)snprintf(t + n, cap - n, "%s%g", i ? ", " : "", (double)(((i * 5 + 3 * seed) % 23) - 11) / 128.0);
    n += (size_t)snprintf(t + n, cap - n,
                          "]\n  %%a = Conv(%%x, %%w1) {kernel_shape = [1, 1]} : f32[1, 40, 16, 16]\n"
                          "  %%r = Relu(%%a) : f32[1, 40, 16, 16]\n"
                          "  %%y = Conv(%%r, %%w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[1, 32, 16, 16]\n"
                          "  return %%y\n}\n");
    return t;
}

/* Weights the code reads packed or transformed are stored that way among the artifact's
 * constants (mapped, not copied with the code) and the originals left out; the kernels hold no
 * weights, so a second model of the same shapes with other weights takes them from the cache
 * and still computes its own results. */
Test(artifact, derived_weights_and_shared_kernels) {
    if (!__builtin_cpu_supports("avx512f")) cr_skip_test("packed GEMM and Winograd are AVX-512 paths");
    char *dir = tu_mkdtemp(), *cache = tu_path_join(dir, "cache");
    for (unsigned seed = 1; seed <= 2; seed++) {
        char name[32], out[32];
        snprintf(name, sizeof name, "m%u.ir", seed);
        snprintf(out, sizeof out, "m%u.irx", seed);
        char *model = tu_path_join(dir, name), *irx = tu_path_join(dir, out), *text = two_conv_model(seed);
        cr_assert(tu_write_file(model, text, strlen(text)));
        const char *args[] = {"compile", model, "--cache-dir", cache, "-o", irx, NULL};
        TuRun r;
        cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
        cr_assert_eq(r.status, 0, "%s", r.err);
        if (seed == 2) cr_expect(strstr(r.out, "2 from the cache"), "the second model's Conv kernels should come from the cache:\n%s", r.out);
        tu_run_free(&r);
        const char *iargs[] = {"inspect", irx, NULL};
        cr_assert(tu_run_irtool(iargs, NULL, 0, NULL, &r));
        int orig3 = 0, u = 0, w1 = 0; /* const lines of 32x40x3x3, 16x32x40 and 40x32 floats */
        for (const char *l = r.out; (l = strstr(l, "\nconst ")); l++) {
            unsigned slot;
            unsigned long long off, len;
            if (sscanf(l + 1, "const %u %llu %llu", &slot, &off, &len) != 3) continue;
            orig3 += len == 32 * 40 * 9 * 4;
            u += len == 16 * 32 * 40 * 4;
            w1 += len == 40 * 32 * 4;
        }
        cr_expect_eq(orig3, 0, "the 3x3 weights should be left out (Winograd reads its transform)\n%s", r.out);
        cr_expect_eq(u, 1, "the transformed 3x3 weights should be a constant\n%s", r.out);
        cr_expect_eq(w1, 1, "the 1x1 weights should be stored once, packed\n%s", r.out);
        tu_run_free(&r);
        check_model(model, NULL, irx);
        free(model), free(irx), free(text);
    }
    tu_rmtree(dir);
    free(dir), free(cache);
}
