/* Symbolic shapes on the CUDA backend (issue 28): models with a symbolic batch (and sequence)
 * compile for sm_90 without --input into one artifact whose kernels take the run's symbol array
 * (the manifest's symslot, the last argument of every kernel step) and whose step sizes (grid
 * work, copy bytes, GEMM dims) are formulas over the symbols (fx lines, =K in the steps); the
 * outputs' dims and the blocks placed per run are formulas too. Without a GPU the runtime parses
 * all of it and stops at the missing driver. Tests that need ptxas skip with a message. */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NEED_PTXAS()                                                                                              \
    do {                                                                                                          \
        if (!tu_have_ptxas()) cr_skip_test("no CUDA toolkit (ptxas) here: the CUDA backend tests need one");        \
    } while (0)

static char *shared_path(const char *rel) {
    const char *shared = getenv("IRTOOL_SHARED_DIR");
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", shared ? shared : IRTOOL_SOURCE_DIR "/../shared", rel);
    return access(p, R_OK) == 0 ? strdup(p) : NULL;
}

/* Compiles model for sm_90 without --input into dir/out.irx; returns the manifest (status 0). */
static char *compile_symbolic(const char *dir, const char *model) {
    setenv("IRTOOL_LIBCUDA", "libcuda-irtool-test-absent.so.1", 1); /* the same on a GPU machine */
    char *out = tu_path_join(dir, "out.irx");
    const char *args[] = {"compile", model, "--target", "cuda:sm_90", "-o", out, "--no-cache", NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s: %s", model, r.err);
    cr_assert(strstr(r.out, "CPU build matches the interpreter"), "%s", r.out);
    cr_assert(strstr(r.out, "no upper bound on"), "%s", r.out);
    tu_run_free(&r);
    char err[512];
    char *m = irt_read_manifest(out, err, sizeof err);
    cr_assert(m, "%s: %s", out, err);
    /* the runtime reads every line (formulas included) and then needs the driver */
    IrtArtifact *a = irt_load(out, err, sizeof err);
    cr_assert_null(a);
    cr_assert(strstr(err, "no CUDA driver/GPU found"), "%s: %s", model, err);
    free(out);
    return m;
}

static const char *line_with(const char *m, const char *prefix) {
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, prefix, strlen(prefix))) return l;
    return NULL;
}

static int count_lines(const char *m, const char *prefix) {
    int n = 0;
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, prefix, strlen(prefix))) n++;
    return n;
}

/* The structure every symbolic CUDA artifact has: a symbol slot that is each kernel step's last
 * argument, formulas that parse as postfix over symbols, at least min_fx_steps steps sized by
 * one, fxout for every output; returns the symbol slot. */
static unsigned check_structure(const char *m, int n_symbols, int min_fx_steps) {
    const char *l = line_with(m, "symslot ");
    cr_assert(l, "no symslot line");
    unsigned slot = (unsigned)atoi(l + 8);
    cr_assert_eq(count_lines(m, "symbol "), n_symbols, "%s", m);
    cr_assert_geq(count_lines(m, "insym "), n_symbols);
    char tail[32];
    snprintf(tail, sizeof tail, " %u:0\n", slot);
    int kernels = 0, fx_steps = 0;
    for (l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *e = strchr(l, '\n');
        if (!strncmp(l, "step ", 5) && strstr(l, " kernel ") && (!e || strstr(l, " kernel ") < e)) {
            kernels++;
            cr_assert(e && !strncmp(e - strlen(tail) + 1, tail, strlen(tail)), "kernel step without the symbols last: %.*s",
                      (int)(e ? e - l : 40), l);
        }
        if (!strncmp(l, "step ", 5) && e && memchr(l, '=', (size_t)(e - l))) fx_steps++;
        if (!strncmp(l, "fx ", 3)) { /* integers, sN and + - * / % < > only */
            for (const char *p = strchr(l + 3, ' ') + 1; p < e; p++)
                cr_assert(strchr("0123456789s+-*/%<> ", *p), "bad formula token in %.*s", (int)(e - l), l);
        }
    }
    cr_assert_gt(kernels, 0);
    cr_assert_geq(fx_steps, min_fx_steps, "%d steps sized by a formula", fx_steps);
    cr_assert(line_with(m, "fxout 0 "), "no fxout line");
    cr_assert(line_with(m, "fx 0 "), "no formula");
    return slot;
}

/* A step line with `kind` whose sizes include a formula (=K). */
static bool fx_step(const char *m, const char *kind) {
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        char line[1024];
        if (strncmp(l, "step ", 5) || n >= sizeof line) continue;
        memcpy(line, l, n);
        line[n] = 0;
        if (strstr(line, kind) && strchr(line, '=')) return true;
    }
    return false;
}

/* Replaces every `from` in text with `to` (a new string). */
static char *replace_all(const char *text, const char *from, const char *to) {
    size_t n = 0, lf = strlen(from), lt = strlen(to);
    for (const char *p = strstr(text, from); p; p = strstr(p + lf, from)) n++;
    char *out = malloc(strlen(text) + n * (lt > lf ? lt - lf : 0) + 1), *o = out;
    cr_assert(out);
    for (const char *p = text, *q; (q = strstr(p, from)) || *p; p = q + lf) {
        if (!q) {
            strcpy(o, p);
            o += strlen(p);
            break;
        }
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, to, lt);
        o += lt;
    }
    *o = 0;
    return out;
}

/* An ONNX model of the shared torch exports with its fixed batch `from` made symbol `sym`. */
static char *symbolic_copy(const char *dir, const char *onnx, const char *from, const char *sym) {
    char *ir = tu_path_join(dir, "m.ir"), *out = tu_path_join(dir, "sym.ir");
    const char *args[] = {"convert", onnx, "-o", ir, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    size_t len;
    char *text = tu_read_file(ir, &len), to[32], decl[64];
    cr_assert(text);
    snprintf(to, sizeof to, "f32[%s, ", sym);
    char *t1 = replace_all(text, from, to);
    snprintf(decl, sizeof decl, "symbol %s\n\ngraph @", sym);
    char *t2 = replace_all(t1, "graph @", decl);
    cr_assert(tu_write_file(out, t2, strlen(t2)));
    free(text), free(t1), free(t2), free(ir);
    return out;
}

/* n floats in [-0.5, 0.5) from a fixed sequence, as an IR list. */
static void put_floats(FILE *f, int n, int seed) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.4f", i ? ", " : "", (float)(((i + seed) * 7919) % 1000) / 1000.0f - 0.5f);
    fputc(']', f);
}

Test(cuda_symbolic, mlp_any_batch, .timeout = 240) {
    NEED_PTXAS();
    char *model = shared_path("torch-models/tiny_mlp/model.onnx");
    if (!model) cr_skip_test("no ../shared/torch-models/tiny_mlp here");
    char *dir = tu_mkdtemp(), *m = compile_symbolic(dir, model);
    check_structure(m, 1, 3);
    cr_assert(fx_step(m, " gemm f32 "), "the GEMMs' M follows the batch: %s", m);
    cr_assert(strstr(m, "fx 0 s"), "%s", m);
    free(m), free(model);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_symbolic, transformer_block_any_batch_and_sequence, .timeout = 300) {
    NEED_PTXAS();
    char *model = tu_source_path("corpus/torch/encoder_dynamic/model.onnx"), *dir = tu_mkdtemp();
    char *m = compile_symbolic(dir, model);
    check_structure(m, 2, 10);
    /* attention: strided-batched GEMMs over B * heads, softmax rows of S, copies of B * S rows */
    cr_assert(fx_step(m, " gemm f32 "), "%s", m);
    cr_assert(strstr(m, " rows params "), "a row kernel (softmax / layer norm)");
    cr_assert(fx_step(m, " copy "), "%s", m);
    cr_assert_geq(count_lines(m, "fxrun "), 1, "values sized by B and S are placed per run");
    free(m), free(model);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_symbolic, int64_token_model, .timeout = 300) {
    NEED_PTXAS();
    char *model = tu_source_path("corpus/torch/tiny_bert_dynamic/model.onnx"), *dir = tu_mkdtemp();
    char *m = compile_symbolic(dir, model);
    check_structure(m, 2, 5);
    cr_assert(strstr(m, "input 0 ids 7 2 -1 -1"), "i64[B, S] token ids: %s", m);
    free(m), free(model);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_symbolic, cnn_with_batchnorm_and_if_model, .timeout = 300) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp(), *path = tu_path_join(dir, "cnn.ir");
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "symbol N\n\ngraph @cnn_bn(%%x: f32[N, 3, 12, 12]) {\n  const %%w1: f32[8, 3, 3, 3] = ");
    put_floats(f, 216, 1);
    fprintf(f, "\n  const %%g: f32[8] = [1.0, 0.9, 1.1, 1.2, 0.8, 1.0, 1.05, 0.95]\n");
    fprintf(f, "  const %%b: f32[8] = [0.1, -0.1, 0.0, 0.2, -0.2, 0.05, 0.0, 0.1]\n");
    fprintf(f, "  const %%mu: f32[8] = [0.01, 0.02, -0.01, 0.0, 0.03, -0.02, 0.01, 0.0]\n");
    fprintf(f, "  const %%var: f32[8] = [1.0, 0.5, 2.0, 1.5, 0.8, 1.2, 0.9, 1.1]\n  const %%fw: f32[4, 8] = ");
    put_floats(f, 32, 2);
    fprintf(f, "\n  const %%fb: f32[4] = [0.0, 0.1, -0.1, 0.2]\n"
               "  %%c = Conv(%%x, %%w1) {pads = [1, 1, 1, 1]} : f32[N, 8, 12, 12] name(\"conv\")\n"
               "  %%n = BatchNormalization(%%c, %%g, %%b, %%mu, %%var) : f32[N, 8, 12, 12] name(\"bn\")\n"
               "  %%r = Relu(%%n) : f32[N, 8, 12, 12] name(\"relu\")\n"
               "  %%p = MaxPool(%%r) {kernel_shape = [2, 2], strides = [2, 2]} : f32[N, 8, 6, 6] name(\"pool\")\n"
               "  %%gp = GlobalAveragePool(%%p) : f32[N, 8, 1, 1] name(\"gap\")\n"
               "  %%fl = Flatten(%%gp) : f32[N, 8] name(\"flat\")\n"
               "  %%y = Gemm(%%fl, %%fw, %%fb) {transB = 1} : f32[N, 4] name(\"fc\")\n  return %%y\n}\n");
    fclose(f);
    char *m = compile_symbolic(dir, path);
    check_structure(m, 1, 5);
    cr_assert(strstr(m, "fxout 0 =") && strstr(m, " 4\n"), "y: f32[N, 4]");
    free(m);
    /* an If on the data (torch `if x.mean() > 0`), its batch made symbolic */
    char *onnx = shared_path("torch-models/branchy/model.onnx");
    if (onnx) {
        char *sym = symbolic_copy(dir, onnx, "f32[3, ", "B");
        m = compile_symbolic(dir, sym);
        check_structure(m, 1, 2);
        free(m), free(sym), free(onnx);
    } else {
        cr_log_warn("no ../shared/torch-models/branchy here: the If model was not compiled");
    }
    free(path);
    tu_rmtree(dir);
    free(dir);
}

/* MobileNetV2 and ResNet in small: a strided stem, a depthwise (group = C) and a pointwise Conv
 * with ReLU6, a residual Add, global pooling and the classifier. */
Test(cuda_symbolic, mobilenet_resnet_blocks, .timeout = 300) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp(), *path = tu_path_join(dir, "mb.ir");
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "symbol N\n\ngraph @blocks(%%x: f32[N, 3, 16, 16]) {\n  const %%ws: f32[8, 3, 3, 3] = ");
    put_floats(f, 216, 3);
    fprintf(f, "\n  const %%bs: f32[8] = ");
    put_floats(f, 8, 4);
    fprintf(f, "\n  const %%wd: f32[8, 1, 3, 3] = ");
    put_floats(f, 72, 5);
    fprintf(f, "\n  const %%wp: f32[8, 8, 1, 1] = ");
    put_floats(f, 64, 6);
    fprintf(f, "\n  const %%lo: f32[] = [0.0]\n  const %%hi: f32[] = [6.0]\n  const %%fw: f32[5, 8] = ");
    put_floats(f, 40, 7);
    fprintf(f, "\n  const %%fb: f32[5] = [0.1, 0.0, -0.1, 0.2, 0.0]\n"
               "  %%s = Conv(%%x, %%ws, %%bs) {pads = [1, 1, 1, 1], strides = [2, 2]} : f32[N, 8, 8, 8] name(\"stem\")\n"
               "  %%s6 = Clip(%%s, %%lo, %%hi) : f32[N, 8, 8, 8] name(\"relu6\")\n"
               "  %%d = Conv(%%s6, %%wd) {pads = [1, 1, 1, 1], group = 8} : f32[N, 8, 8, 8] name(\"depthwise\")\n"
               "  %%d6 = Clip(%%d, %%lo, %%hi) : f32[N, 8, 8, 8] name(\"relu6_dw\")\n"
               "  %%p = Conv(%%d6, %%wp) : f32[N, 8, 8, 8] name(\"pointwise\")\n"
               "  %%a = Add(%%p, %%s6) : f32[N, 8, 8, 8] name(\"residual\")\n"
               "  %%r = Relu(%%a) : f32[N, 8, 8, 8] name(\"relu\")\n"
               "  %%gp = GlobalAveragePool(%%r) : f32[N, 8, 1, 1] name(\"gap\")\n"
               "  %%fl = Flatten(%%gp) : f32[N, 8] name(\"flat\")\n"
               "  %%y = Gemm(%%fl, %%fw, %%fb) {transB = 1} : f32[N, 5] name(\"fc\")\n  return %%y\n}\n");
    fclose(f);
    char *m = compile_symbolic(dir, path);
    check_structure(m, 1, 6);
    free(m), free(path);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_symbolic, unsupported_op_is_named, .timeout = 120) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp(), *path = tu_path_join(dir, "cs.ir"), *out = tu_path_join(dir, "o.irx");
    static const char text[] = "symbol B\n\ngraph @g(%x: f32[B, 8]) {\n"
                               "  %y = CumSum(%x, %ax) : f32[B, 8] name(\"scan\")\n  return %y\n}\n";
    char *t = replace_all(text, "%ax)", "%ax)");
    char *full = replace_all(t, "graph @g(%x: f32[B, 8]) {\n", "graph @g(%x: f32[B, 8]) {\n  const %ax: i64[] = [1]\n");
    cr_assert(tu_write_file(path, full, strlen(full)));
    const char *args[] = {"compile", path, "--target", "cuda:sm_90", "-o", out, "--no-cache", NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "does not support CumSum with symbolic shapes yet") && strstr(r.err, "--input"), "%s", r.err);
    cr_assert(access(out, F_OK) != 0, "no artifact is written");
    tu_run_free(&r);
    free(t), free(full), free(path), free(out);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_symbolic, corrupt_formula_is_refused, .timeout = 240) {
    NEED_PTXAS();
    char *model = shared_path("torch-models/tiny_mlp/model.onnx");
    if (!model) cr_skip_test("no ../shared/torch-models/tiny_mlp here");
    char *dir = tu_mkdtemp(), *m = compile_symbolic(dir, model), *irx = tu_path_join(dir, "out.irx"), err[512];
    size_t len;
    char *bytes = tu_read_file(irx, &len);
    cr_assert(bytes);
    static const char *cases[][2] = {{"\nfx 0 s", "\nfx 0 q"}, {"\nfxout 0 =", "\nfxout 0 #"}, {" =0 ", " =9 "}};
    uint64_t off = 0, n = 0; /* the manifest section (header fields at 16 and 24) */
    for (int i = 7; i >= 0; i--) off = off << 8 | (unsigned char)bytes[16 + i], n = n << 8 | (unsigned char)bytes[24 + i];
    cr_assert_leq(off + n, len);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *copy = malloc(len), *p = NULL;
        memcpy(copy, bytes, len);
        for (uint64_t i = off; !p && i + strlen(cases[k][0]) <= off + n; i++)
            if (!memcmp(copy + i, cases[k][0], strlen(cases[k][0]))) p = copy + i;
        cr_assert(p, "pattern '%s' not in the manifest", cases[k][0]);
        memcpy(p, cases[k][1], strlen(cases[k][1]));
        IrtArtifact *a = irt_load_memory(copy, len, err, sizeof err);
        cr_assert_null(a);
        cr_assert(strstr(err, "corrupt artifact"), "case '%s': %s", cases[k][1], err);
        free(copy);
    }
    free(bytes), free(irx), free(m), free(model);
    tu_rmtree(dir);
    free(dir);
}

/* ---- the runtime's host side over a stub driver (tests/cuda/stub_cuda.c) ------------------------ */

/* Builds the stub as dir/libstub.so and points the runtime at it; the launches go to dir/log. */
static char *use_stub(const char *dir, const char *manifest, int n_syms) {
    char *src = tu_source_path("tests/cuda/stub_cuda.c"), *so = tu_path_join(dir, "libstub.so"), *log = tu_path_join(dir, "log");
    char inc[4096];
    snprintf(inc, sizeof inc, "-I%s", IRTOOL_SOURCE_DIR);
    const char *args[] = {"-shared", "-fPIC", "-O1", inc, "-o", so, src, NULL};
    TuRun r = {0};
    const char *cc = access("/usr/bin/cc", X_OK) == 0 ? "/usr/bin/cc" : "/usr/bin/gcc"; /* tu_run does not search PATH */
    bool ok = access(cc, X_OK) == 0 && tu_run(cc, args, NULL, 0, NULL, &r);
    cr_assert(!ok || r.status == 0, "building the stub: %s", r.err ? r.err : "");
    if (r.out) tu_run_free(&r);
    if (!ok) cr_skip_test("no C compiler here to build the stub CUDA driver");
    /* each kernel's parameter count, so the stub reads the last one (the symbols) */
    char params[4096] = "", syms[16];
    for (const char *l = manifest; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char name[64];
        unsigned np;
        if (sscanf(l, "kernel %63s node %*u block %*u %*s params %u", name, &np) == 2)
            snprintf(params + strlen(params), sizeof params - strlen(params), "%s=%u,", name, np);
    }
    snprintf(syms, sizeof syms, "%d", n_syms);
    setenv("IRTOOL_LIBCUDA", so, 1);
    setenv("IRTOOL_LIBCUBLASLT", so, 1);
    setenv("IRTOOL_TEST_CUDA_LOG", log, 1);
    setenv("IRTOOL_TEST_CUDA_PARAMS", params, 1);
    setenv("IRTOOL_TEST_CUDA_SYMS", syms, 1);
    free(src), free(so);
    return log;
}

/* Runs a with one f32 input of dims d (rank r); the log of the run (malloc'd), or NULL and err. */
static char *run_once(IrtArtifact *a, const char *log, uint32_t r, const int64_t *d, IrtTensor *out, char *err, size_t cap) {
    unlink(log);
    IrtTensor in = {.dtype = irt_dtype_code(a, "f32"), .rank = r};
    int64_t n = 1;
    for (uint32_t k = 0; k < r; k++) n *= in.dims[k] = d[k];
    in.data = calloc((size_t)(n ? n : 1), sizeof(float));
    int rc = irt_run(a, &in, out, err, cap);
    free(in.data);
    if (rc) return NULL;
    size_t len;
    char *text = tu_read_file(log, &len);
    return text ? text : strdup("");
}

Test(cuda_symbolic, runtime_binds_and_launches_per_batch, .timeout = 240) {
    NEED_PTXAS();
    char *model = shared_path("torch-models/tiny_mlp/model.onnx");
    if (!model) cr_skip_test("no ../shared/torch-models/tiny_mlp here");
    char *dir = tu_mkdtemp(), *m = compile_symbolic(dir, model), *irx = tu_path_join(dir, "out.irx"), err[1024];
    cr_assert(strstr(m, "symbol 1 batch "), "%s", m);
    char *log = use_stub(dir, m, 2);
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    /* per batch: the output's dims, the GEMMs' M, the grid of the 128-wide ReLU (ceil(128 B /
     * 256) blocks) and the symbol array its kernel reads (id 0 unused: -1; id 1 = batch) */
    static const struct { int64_t b; const char *gemm, *launch; } cases[] = {
        {5, "gemm 16 5 1\n", "launch k1_0 3 256 -1 5\n"}, {17, "gemm 16 17 1\n", "launch k1_0 9 256 -1 17\n"},
        {1, "gemm 128 1 1\n", "launch k1_0 1 256 -1 1\n"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        IrtTensor out;
        int64_t d[2] = {cases[i].b, 64};
        char *text = run_once(a, log, 2, d, &out, err, sizeof err);
        cr_assert(text, "batch %lld: %s", (long long)cases[i].b, err);
        cr_assert_eq(out.rank, 2);
        cr_assert(out.dims[0] == cases[i].b && out.dims[1] == 16, "y: [%lld, %lld]", (long long)out.dims[0], (long long)out.dims[1]);
        cr_assert(strstr(text, cases[i].gemm), "batch %lld: %s", (long long)cases[i].b, text);
        cr_assert(strstr(text, cases[i].launch), "batch %lld: %s", (long long)cases[i].b, text);
        irt_tensor_free(&out);
        free(text);
    }
    /* a batch of 0: nothing launched, an empty output */
    IrtTensor out;
    int64_t d0[2] = {0, 64};
    char *text = run_once(a, log, 2, d0, &out, err, sizeof err);
    cr_assert(text, "%s", err);
    cr_assert(out.dims[0] == 0 && !strstr(text, "launch k1_0") && !strstr(text, "gemm"), "%s", text);
    irt_tensor_free(&out);
    free(text);
    /* the guard: a dim the artifact fixes */
    int64_t bad[2] = {5, 63};
    cr_assert_null(run_once(a, log, 2, bad, &out, err, sizeof err));
    cr_assert(strstr(err, "input 'x' dim 1 is 63"), "%s", err);
    irt_free(a);
    unsetenv("IRTOOL_LIBCUBLASLT");
    free(log), free(irx), free(m), free(model);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_symbolic, runtime_places_blocks_per_binding, .timeout = 300) {
    NEED_PTXAS();
    char *model = tu_source_path("corpus/torch/encoder_dynamic/model.onnx"), *dir = tu_mkdtemp();
    char *m = compile_symbolic(dir, model), *irx = tu_path_join(dir, "out.irx"), err[1024];
    unsigned max_id = 0;
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        unsigned id;
        if (sscanf(l, "symbol %u", &id) == 1 && id > max_id) max_id = id;
    }
    char *log = use_stub(dir, m, (int)max_id + 1);
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    static const int64_t shapes[][3] = {{2, 10, 32}, {3, 7, 32}, {5, 40, 32}, {2, 10, 32}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        IrtTensor out;
        char *text = run_once(a, log, 3, shapes[i], &out, err, sizeof err);
        cr_assert(text, "[%lld, %lld]: %s", (long long)shapes[i][0], (long long)shapes[i][1], err);
        cr_assert(out.rank == 3 && out.dims[0] == shapes[i][0] && out.dims[1] == shapes[i][1] && out.dims[2] == 32);
        /* every kernel read this binding's B and S from its symbol array */
        char want[64];
        snprintf(want, sizeof want, " %lld %lld\n", (long long)shapes[i][0], (long long)shapes[i][1]);
        int launches = 0;
        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
            if (strncmp(l, "launch ", 7)) continue;
            launches++;
            const char *e = strchr(l, '\n');
            cr_assert(e && e - l >= (long)strlen(want) - 1 && !strncmp(e - strlen(want) + 1, want, strlen(want)),
                      "%.*s (want ...%s)", (int)(e ? e - l : 40), l, want);
        }
        cr_assert_gt(launches, 10);
        cr_assert(strstr(text, "gemm "), "%s", text);
        irt_tensor_free(&out);
        free(text);
    }
    irt_free(a);
    unsetenv("IRTOOL_LIBCUBLASLT");
    free(log), free(irx), free(m), free(model);
    tu_rmtree(dir);
    free(dir);
}
