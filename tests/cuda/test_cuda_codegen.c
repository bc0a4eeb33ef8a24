/* The CUDA backend without a GPU (issue 9): every corpus and ../shared/torch-models model compiles
 * for sm_80 and sm_90 (so its PTX assembles with the toolkit's ptxas), kernel counts and launch
 * bounds of small graphs, warp shuffles in row reductions, the FP8 conversion instruction on
 * sm_89+ only, `irtool inspect` with the assembler's registers, the runtime's no-GPU message,
 * the gate, clear errors for unsupported ops and a missing ptxas, and the runtime's CUDA
 * declarations against the toolkit headers. Tests that need ptxas skip with a message. */
#include "backend/backend.h"
#include "backend/runtime/cuda_api.h"
#include "backend/runtime/abi.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef IRTOOL_HAVE_CUDA_HEADERS
#include <cuda.h>
#include <cublasLt.h>
_Static_assert((int)IRT_CUDA_SUCCESS == (int)CUDA_SUCCESS, "CUDA_SUCCESS");
_Static_assert((int)IRT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == (int)CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count");
_Static_assert((int)IRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc");
_Static_assert((int)IRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc");
_Static_assert((int)IRT_CU_STREAM_NON_BLOCKING == (int)CU_STREAM_NON_BLOCKING, "stream flag");
_Static_assert((int)IRT_CUBLAS_COMPUTE_32F == (int)CUBLAS_COMPUTE_32F &&
                   (int)IRT_CUBLAS_COMPUTE_32F_FAST_TF32 == (int)CUBLAS_COMPUTE_32F_FAST_TF32,
               "compute types");
_Static_assert((int)IRT_CUDA_R_32F == (int)CUDA_R_32F && (int)IRT_CUDA_R_16BF == (int)CUDA_R_16BF && (int)IRT_CUDA_R_8F_E4M3 == (int)CUDA_R_8F_E4M3,
               "data types");
_Static_assert((int)IRT_LT_DESC_EPILOGUE == (int)CUBLASLT_MATMUL_DESC_EPILOGUE &&
                   (int)IRT_LT_DESC_BIAS_POINTER == (int)CUBLASLT_MATMUL_DESC_BIAS_POINTER &&
                   (int)IRT_LT_EPILOGUE_BIAS == (int)CUBLASLT_EPILOGUE_BIAS,
               "epilogue");
_Static_assert((int)IRT_CUBLAS_OP_N == (int)CUBLAS_OP_N && (int)IRT_CUBLAS_OP_T == (int)CUBLAS_OP_T, "ops");
_Static_assert((int)IRT_LT_DESC_TRANSA == (int)CUBLASLT_MATMUL_DESC_TRANSA && (int)IRT_LT_DESC_TRANSB == (int)CUBLASLT_MATMUL_DESC_TRANSB,
               "trans attributes");
_Static_assert((int)IRT_LT_DESC_A_SCALE_POINTER == (int)CUBLASLT_MATMUL_DESC_A_SCALE_POINTER &&
                   IRT_LT_DESC_B_SCALE_POINTER == (int)CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
               "scale attributes");
_Static_assert((int)IRT_LT_LAYOUT_BATCH_COUNT == (int)CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT &&
                   IRT_LT_LAYOUT_STRIDED_BATCH_OFFSET == (int)CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
               "layout attributes");
_Static_assert((int)IRT_LT_PREF_MAX_WORKSPACE_BYTES == (int)CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, "preference");
_Static_assert((int)IRT_LT_PREF_MIN_ALIGNMENT_A_BYTES == (int)CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
                   (int)IRT_LT_PREF_MIN_ALIGNMENT_B_BYTES == (int)CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES &&
                   (int)IRT_LT_PREF_MIN_ALIGNMENT_C_BYTES == (int)CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES &&
                   (int)IRT_LT_PREF_MIN_ALIGNMENT_D_BYTES == (int)CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
               "alignment preferences");
_Static_assert(sizeof(IrtLtHeuristic) == sizeof(cublasLtMatmulHeuristicResult_t), "heuristic result size");
_Static_assert(sizeof(IrtLtAlgo) == sizeof(cublasLtMatmulAlgo_t), "algo size");
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "device pointer");
#endif

#define NEED_PTXAS()                                                                                              \
    do {                                                                                                          \
        if (!tu_have_ptxas()) cr_skip_test("no CUDA toolkit (ptxas) here: the CUDA backend tests need one");        \
    } while (0)

/* Random f32 input of shape dims written as .npy in dir; returns the path. */
static char *npy(const char *dir, const char *name, uint32_t rank, const int64_t *dims) {
    IrTensor t;
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F32, rank, dims), IR_OK);
    for (int64_t i = 0; i < ir_tensor_numel(&t); i++) ((float *)t.data)[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    char *p = tu_path_join(dir, name);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_npy_write(p, &t, &d.diag), IR_OK);
    tu_diag_free(&d);
    ir_tensor_free(&t);
    return p;
}

/* irtool compile MODEL --target T [-p P] [--input SPEC]... -o DIR/out.irx; returns the run. */
static TuRun compile(const char *dir, const char *model, const char *target, const char *pipeline, const char **specs,
                     int n_specs, const char *out_name) {
    char *out = tu_path_join(dir, out_name);
    const char *args[32] = {"compile", model, "--target", target, "-o", out, "--no-cache"};
    int k = 7;
    if (pipeline) args[k++] = "-p", args[k++] = pipeline;
    for (int i = 0; i < n_specs; i++) args[k++] = "--input", args[k++] = specs[i];
    args[k] = NULL;
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    free(out);
    return r;
}

static char *manifest_of(const char *dir, const char *name) {
    char *p = tu_path_join(dir, name), err[512];
    char *m = irt_read_manifest(p, err, sizeof err);
    cr_assert(m, "%s: %s", p, err);
    free(p);
    return m;
}

static int count_lines(const char *m, const char *prefix) {
    int n = 0;
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, prefix, strlen(prefix))) n++;
    return n;
}

/* The PTX text kept in an artifact (code section after the cubin). */
static char *ptx_of(const char *dir, const char *name) {
    char *p = tu_path_join(dir, name);
    size_t len;
    unsigned char *d = (unsigned char *)tu_read_file(p, &len);
    cr_assert(d && len > 80);
    uint64_t off = 0;
    for (int i = 7; i >= 0; i--) off = off << 8 | d[16 + 32 + i]; /* section 2 (code) offset */
    char *m = manifest_of(dir, name), *pl = strstr(m, "\nptx ");
    cr_assert(pl);
    unsigned long long po, pn;
    cr_assert_eq(sscanf(pl, "\nptx %llu %llu", &po, &pn), 2);
    cr_assert(off + po + pn < len);
    char *ptx = strndup((char *)d + off + po, pn);
    free(m);
    free((char *)d);
    free(p);
    return ptx;
}

static void compile_ok(const char *dir, const char *model, const char *target, const char **specs, int n, const char *out) {
    TuRun r = compile(dir, model, target, "default", specs, n, out);
    cr_assert_eq(r.status, 0, "compile %s for %s failed:\n%s", model, target, r.err);
    tu_run_free(&r);
    char *m = manifest_of(dir, out);
    cr_assert(strstr(m, "triple nvptx64-nvidia-cuda\n"));
    cr_assert(strstr(m, "\ncubin 0 "), "no cubin in %s", model);
    /* every kernel got its registers from the assembler */
    for (const char *l = strstr(m, "\nkernel "); l; l = strstr(l + 1, "\nkernel ")) {
        const char *rg = strstr(l, " regs ");
        cr_assert(rg && atoi(rg + 6) > 0, "kernel without registers in %s: %.80s", model, l + 1);
    }
    free(m);
}

static void all_models(const char *target) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp();
    size_t n;
    char **models = tu_list_dir("corpus", ".ir", &n);
    cr_assert(models && n >= 5);
    for (size_t i = 0; i < n; i++) {
        char rel[256], *path;
        snprintf(rel, sizeof rel, "corpus/%s", models[i]);
        path = tu_source_path(rel);
        const char *specs[4];
        int ns = 0;
        char *owned[4] = {0};
        int64_t d3[3];
        if (!strcmp(models[i], "mlp.ir")) {
            owned[0] = tu_source_path("corpus/inputs/mlp_x.npy");
            char *spec = malloc(strlen(owned[0]) + 3);
            sprintf(spec, "x=%s", owned[0]);
            free(owned[0]);
            owned[0] = spec;
            specs[ns++] = spec;
        } else if (!strcmp(models[i], "attention.ir") || !strcmp(models[i], "symbolic.ir")) {
            bool att = models[i][0] == 'a';
            d3[0] = 2, d3[1] = att ? 8 : 16, d3[2] = att ? 32 : 16;
            char *x = npy(dir, "x.npy", 3, d3);
            d3[1] = att ? 8 : 1, d3[2] = att ? 8 : 16;
            char *y = npy(dir, "y.npy", 3, d3);
            owned[0] = malloc(strlen(x) + 8), owned[1] = malloc(strlen(y) + 8);
            sprintf(owned[0], "x=%s", x);
            sprintf(owned[1], "%s=%s", att ? "mask" : "cls", y);
            specs[ns++] = owned[0], specs[ns++] = owned[1];
            free(x), free(y);
        }
        compile_ok(dir, path, target, specs, ns, "m.irx");
        for (int k = 0; k < 4; k++) free(owned[k]);
        free(path);
    }
    tu_free_list(models);
    const char *shared = getenv("IRTOOL_SHARED_DIR");
    char tm[1024];
    snprintf(tm, sizeof tm, "%s/torch-models", shared ? shared : IRTOOL_SOURCE_DIR "/../shared");
    static const char *names[] = {"branchy", "convnet", "encoder", "tiny_mlp"};
    int found = 0;
    for (size_t i = 0; i < 4; i++) {
        char model[1200], input[1200];
        snprintf(model, sizeof model, "%s/%s/model.onnx", tm, names[i]);
        snprintf(input, sizeof input, "%s/%s/input_x.npy", tm, names[i]);
        if (access(model, R_OK) != 0) continue;
        found++;
        const char *specs[1] = {input};
        compile_ok(dir, model, target, specs, 1, "t.irx");
    }
    if (!found) cr_log_warn("no ../shared/torch-models here: only the corpus was compiled for %s", target);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_codegen, all_models_sm80, .timeout = 300) { all_models("cuda:sm_80"); }
Test(cuda_codegen, all_models_sm90, .timeout = 300) { all_models("cuda:sm_90"); }

static char *write_model(const char *dir, const char *name, const char *text) {
    char *p = tu_path_join(dir, name);
    cr_assert(tu_write_file(p, text, strlen(text)));
    return p;
}

static const char *CHAIN =
    "graph @chain(%x: f32[64, 256], %b: f32[256]) {\n"
    "  %a = Add(%x, %b) : f32[64, 256]\n"
    "  %m = Mul(%a, %a) : f32[64, 256]\n"
    "  %s = Sigmoid(%m) : f32[64, 256]\n"
    "  %t = Tanh(%s) : f32[64, 256]\n"
    "  %r = Relu(%t) : f32[64, 256]\n"
    "  return %r\n"
    "}\n";

Test(cuda_codegen, elementwise_chain_is_one_kernel, .timeout = 120) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp(), *model = write_model(dir, "chain.ir", CHAIN);
    TuRun r = compile(dir, model, "cuda:sm_90", "default,fuse", NULL, 0, "chain.irx");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char *m = manifest_of(dir, "chain.irx");
    cr_assert_eq(count_lines(m, "kernel "), 1, "%s", m);
    cr_assert_eq(count_lines(m, "step "), 1, "%s", m);
    cr_assert(strstr(m, "block 256 stride"), "%s", m);
    char *ptx = ptx_of(dir, "chain.irx");
    cr_assert(strstr(ptx, ".maxntid 256"), "launch bounds missing");
    cr_assert(strstr(ptx, "ld.global.nc.v4.f32") || strstr(ptx, "ld.global.v4.f32"), "no 128-bit loads:\n%.2000s", ptx);
    free(ptx);
    free(m);
    /* without fusion: one kernel per op */
    r = compile(dir, model, "cuda:sm_90", "default", NULL, 0, "chain5.irx");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    m = manifest_of(dir, "chain5.irx");
    cr_assert_eq(count_lines(m, "kernel "), 5, "%s", m);
    free(m);
    free(model);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_codegen, softmax_is_a_row_reduction, .timeout = 120) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp();
    char *model = write_model(dir, "sm.ir",
                              "graph @sm(%x: f32[8, 1000]) {\n"
                              "  %y = Softmax(%x) {axis = -1} : f32[8, 1000]\n"
                              "  return %y\n"
                              "}\n");
    TuRun r = compile(dir, model, "cuda:sm_80", NULL, NULL, 0, "sm.irx");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char *m = manifest_of(dir, "sm.irx");
    cr_assert_eq(count_lines(m, "kernel "), 1, "%s", m);
    cr_assert(strstr(m, "block 256 rows"), "%s", m);
    cr_assert(strstr(m, "step 0 kernel k0_0 8 "), "one block per row (8 rows): %s", m);
    const char *sm = strstr(m, " smem ");
    cr_assert(sm && atoi(sm + 6) >= 128, "cross-warp scratch in shared memory: %s", m);
    char *ptx = ptx_of(dir, "sm.irx");
    cr_assert(strstr(ptx, "shfl.sync.bfly"), "no warp shuffles");
    cr_assert(strstr(ptx, ".maxntid 256"));
    cr_assert(strstr(ptx, "bar.sync"));
    free(ptx);
    free(m);
    free(model);
    tu_rmtree(dir);
    free(dir);
}

static const char *FP8 = "graph @q(%x: f32[4, 32]) {\n"
                         "  const %s: f32[] = [0.5]\n"
                         "  %q = irtool.quantize_fp8(%x, %s) : f8e4m3fn[4, 32]\n"
                         "  %y = irtool.dequantize_fp8(%q, %s) : f32[4, 32]\n"
                         "  return %y\n"
                         "}\n";

Test(cuda_codegen, fp8_conversion_by_target, .timeout = 120) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp(), *model = write_model(dir, "q.ir", FP8);
    for (int i = 0; i < 2; i++) {
        TuRun r = compile(dir, model, i ? "cuda:sm_89" : "cuda:sm_80", NULL, NULL, 0, "q.irx");
        cr_assert_eq(r.status, 0, "%s", r.err);
        tu_run_free(&r);
        char *ptx = ptx_of(dir, "q.irx"), *m = manifest_of(dir, "q.irx");
        bool hw = strstr(ptx, "cvt.rn.satfinite.e4m3x2.f32") != NULL;
        cr_assert_eq(hw, i == 1, "cvt.rn.satfinite.e4m3x2.f32 %s on %s", hw ? "used" : "missing", i ? "sm_89" : "sm_80");
        cr_assert(strstr(m, i ? "fp8_ptx 1" : "fp8_ptx 0"));
        free(ptx);
        free(m);
    }
    free(model);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_codegen, fp8_matmul_uses_cublaslt_e4m3_on_sm90, .timeout = 180) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    char spec[4096];
    snprintf(spec, sizeof spec, "x=%s", x);
    const char *specs[1] = {spec};
    for (int i = 0; i < 2; i++) {
        TuRun r = compile(dir, model, i ? "cuda:sm_90" : "cuda:sm_80", "default,quantize-fp8{calib=dynamic}", specs, 1,
                          "f8.irx");
        cr_assert_eq(r.status, 0, "%s", r.err);
        tu_run_free(&r);
        char *m = manifest_of(dir, "f8.irx");
        /* sm_90: K = 64 / 32 and N = 32 are multiples of 16 for the first GEMM: tensor cores;
         * sm_80: dequantized operands and an f32 GEMM */
        cr_assert_eq(strstr(m, " gemm e4m3 ") != NULL, i == 1, "%s", m);
        free(m);
    }
    free(model);
    free(x);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_codegen, inspect_and_no_gpu_runtime, .timeout = 120) {
    NEED_PTXAS();
    /* force the no-driver path even where a GPU exists */
    setenv("IRTOOL_LIBCUDA", "libcuda-irtool-test-absent.so.1", 1);
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/conv_block.ir");
    TuRun r = compile(dir, model, "cuda:sm_90", NULL, NULL, 0, "c.irx");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "CPU build matches the interpreter; not run on a GPU: no CUDA driver/GPU found"), "%s", r.out);
    tu_run_free(&r);
    char *irx = tu_path_join(dir, "c.irx");
    const char *args[] = {"inspect", irx, NULL};
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.out, "target cuda:sm_90\n") && strstr(r.out, "\ncuda_toolkit ") && strstr(r.out, "\nmin_driver "));
    cr_assert(strstr(r.out, " regs ") && strstr(r.out, " smem "), "%s", r.out);
    cr_assert(strstr(r.out, "preflight FAILED: no CUDA driver/GPU found"), "%s", r.out);
    tu_run_free(&r);
    /* the library: a clear one-line error, no crash */
    char err[1024] = "";
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert_null(a);
    cr_assert(strstr(err, "no CUDA driver/GPU found") && !strchr(err, '\n'), "%s", err);
    /* irtool run says the same */
    int64_t d[4] = {1, 3, 16, 16};
    char *x = npy(dir, "x.npy", 4, d);
    const char *rargs[] = {"run", irx, "--input", x, NULL};
    cr_assert(tu_run_irtool(rargs, NULL, 0, NULL, &r));
    cr_assert(r.status > 0 && r.status < 128, "status %d", r.status);
    cr_assert(strstr(r.err, "no CUDA driver/GPU found"), "%s", r.err);
    tu_run_free(&r);
    free(x);
    free(irx);
    free(model);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_codegen, gate_refuses_and_errors_are_clear, .timeout = 120) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/conv_block.ir");
    setenv("IRTOOL_TEST_PERTURB_OUTPUT", "1", 1);
    TuRun r = compile(dir, model, "cuda:sm_90", NULL, NULL, 0, "g.irx");
    unsetenv("IRTOOL_TEST_PERTURB_OUTPUT");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "validation failed: CPU build output 'logits'"), "%s", r.err);
    char *out = tu_path_join(dir, "g.irx");
    cr_assert_neq(access(out, F_OK), 0, "a refused artifact was written");
    tu_run_free(&r);
    /* an op the backend does not generate: named with the target */
    char *sin = write_model(dir, "lpn.ir",
                            "graph @s(%x: f32[4]) {\n  %y = LpNormalization(%x) : f32[4]\n  return %y\n}\n");
    r = compile(dir, sin, "cuda:sm_80", NULL, NULL, 0, "s.irx");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "the cuda backend (cuda:sm_80) does not support LpNormalization"), "%s", r.err);
    tu_run_free(&r);
    /* no assembler */
    setenv("IRTOOL_PTXAS", "/nonexistent/ptxas", 1);
    r = compile(dir, model, "cuda:sm_90", NULL, NULL, 0, "p.irx");
    unsetenv("IRTOOL_PTXAS");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "needs the CUDA toolkit's ptxas"), "%s", r.err);
    tu_run_free(&r);
    /* --tf32: the f32 GEMMs of the manifest say so (the runtime picks CUBLAS_COMPUTE_32F_FAST_TF32) */
    {
        char *o = tu_path_join(dir, "tf.irx");
        const char *targs[] = {"compile", model, "--target", "cuda:sm_90", "--tf32", "--no-cache", "-o", o, NULL};
        cr_assert(tu_run_irtool(targs, NULL, 0, NULL, &r));
        cr_assert_eq(r.status, 0, "%s", r.err);
        tu_run_free(&r);
        char *m = manifest_of(dir, "tf.irx");
        cr_assert(strstr(m, " gemm tf32 ") && !strstr(m, " gemm f32 "), "%s", m);
        free(m);
        free(o);
    }
    /* unknown target */
    r = compile(dir, model, "cuda:sm_70", NULL, NULL, 0, "u.irx");
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "cuda:sm_90a"), "%s", r.err);
    tu_run_free(&r);
    free(sin);
    free(out);
    free(model);
    tu_rmtree(dir);
    free(dir);
}

/* Replaces the first occurrence of `from` in the manifest section of an artifact (same length). */
static bool patch_manifest(unsigned char *d, size_t len, const char *from, const char *to) {
    uint64_t off = 0, n = 0;
    for (int i = 7; i >= 0; i--) off = off << 8 | d[16 + i], n = n << 8 | d[24 + i];
    if (off + n > len || strlen(from) != strlen(to)) return false;
    for (uint64_t i = off; i + strlen(from) <= off + n; i++)
        if (!memcmp(d + i, from, strlen(from))) {
            memcpy(d + i, to, strlen(to));
            return true;
        }
    return false;
}

Test(cuda_codegen, corrupt_manifest_is_refused, .timeout = 180) {
    NEED_PTXAS();
    setenv("IRTOOL_LIBCUDA", "libcuda-irtool-test-absent.so.1", 1);
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/conv_block.ir");
    TuRun r = compile(dir, model, "cuda:sm_90", NULL, NULL, 0, "c.irx");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char *irx = tu_path_join(dir, "c.irx"), err[1024];
    size_t len;
    unsigned char *orig = (unsigned char *)tu_read_file(irx, &len), *d = malloc(len);
    cr_assert(orig && d);
    /* intact: parsed, then refused for the missing driver */
    cr_assert_null(irt_load_memory(orig, len, err, sizeof err));
    cr_assert(strstr(err, "no CUDA driver/GPU found"), "%s", err);
    static const char *cases[][2] = {{"step 0 kernel k0_0 ", "step 0 kernel kx_0 "}, /* a step naming an unknown kernel */
                                     {" params 2 ", " params 3 "},     /* arguments vs the kernel's parameters */
                                     {"\ncubin 0 ", "\ncubin x "},     /* code sections */
                                     {" gemm f32 ", " gemm f31 "}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(d, orig, len);
        cr_assert(patch_manifest(d, len, cases[k][0], cases[k][1]), "pattern '%s' not in the manifest", cases[k][0]);
        cr_assert_null(irt_load_memory(d, len, err, sizeof err));
        cr_assert(strstr(err, "corrupt artifact"), "case '%s': %s", cases[k][1], err);
    }
    /* random damage to the kernel and step lines never crashes the loader */
    uint64_t mo = 0, mn = 0;
    for (int i = 7; i >= 0; i--) mo = mo << 8 | orig[16 + i], mn = mn << 8 | orig[24 + i];
    char *text = strndup((char *)orig + mo, mn), *first = strstr(text, "\nkernel ");
    cr_assert(first);
    uint64_t lo = mo + (uint64_t)(first - text), s = 12345;
    static const char alphabet[] = "0123456789: -xk\n";
    for (int it = 0; it < 300; it++) {
        memcpy(d, orig, len);
        for (int j = 0; j < 3; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            d[lo + s % (mo + mn - lo)] = (unsigned char)alphabet[(s >> 20) % (sizeof alphabet - 1)];
        }
        err[0] = 0;
        IrtArtifact *a = irt_load_memory(d, len, err, sizeof err);
        cr_assert_null(a);
        cr_assert(err[0] && !strchr(err, '\n'), "iteration %d: '%s'", it, err);
    }
    free(text);
    free(d);
    free((char *)orig);
    free(irx);
    free(model);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_codegen, run_timed_on_cpu_artifacts, .timeout = 120) {
    char *dir = tu_mkdtemp(), *model = tu_source_path("corpus/conv_block.ir");
    TuRun r = compile(dir, model, "cpu", NULL, NULL, 0, "c.irx");
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char *irx = tu_path_join(dir, "c.irx"), err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    IrtTensor in, o1, o2;
    irt_input_info(a, 0, &in);
    size_t n = 1;
    for (uint32_t k = 0; k < in.rank; k++) n *= (size_t)in.dims[k];
    in.data = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) ((float *)in.data)[i] = (float)(i % 17) / 17.0f;
    double ms = -1;
    cr_assert_eq(irt_run(a, &in, &o1, err, sizeof err), 0, "%s", err);
    cr_assert_eq(irt_run_timed(a, &in, &o2, 5, &ms, err, sizeof err), 0, "%s", err);
    cr_assert(ms > 0, "%g", ms);
    size_t on = 1;
    for (uint32_t k = 0; k < o1.rank; k++) on *= (size_t)o1.dims[k];
    cr_assert(!memcmp(o1.data, o2.data, on * sizeof(float)), "repeated runs give other outputs");
    free(o1.data);
    free(o2.data);
    free(in.data);
    irt_free(a);
    free(irx);
    free(model);
    tu_rmtree(dir);
    free(dir);
}

Test(cuda_codegen, row_kernels_size_their_blocks, .timeout = 120) {
    NEED_PTXAS();
    char *dir = tu_mkdtemp();
    char *model = write_model(dir, "rows.ir",
                              "graph @rows(%x: f32[4, 32], %s: f32[32], %b: f32[32], %y: f32[6, 100]) {\n"
                              "  %l = LayerNormalization(%x, %s, %b) {axis = -1} : f32[4, 32]\n"
                              "  %m = ReduceMean(%y) {axes = [1], keepdims = 1} : f32[6, 1]\n"
                              "  return %l, %m\n"
                              "}\n");
    TuRun r = compile(dir, model, "cuda:sm_90", NULL, NULL, 0, "rows.irx");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "CPU build matches the interpreter"), "%s", r.out);
    tu_run_free(&r);
    char *m = manifest_of(dir, "rows.irx");
    cr_assert_eq(count_lines(m, "kernel "), 2, "%s", m);
    /* 32-long rows: one warp, no shared memory; 100-long rows: 128 threads, 4 warps combined in smem */
    cr_assert(strstr(m, "kernel k0_0 node 0 block 32 rows params 4 ") && strstr(m, "block 32 rows params 4 regs"), "%s", m);
    cr_assert(strstr(m, "kernel k1_1 node 1 block 128 rows params 2 "), "%s", m);
    cr_assert(strstr(m, "step 0 kernel k0_0 4 ") && strstr(m, "step 1 kernel k1_1 6 "), "one block per row: %s", m);
    const char *k1 = strstr(m, "kernel k1_1 ");
    cr_assert(k1 && atoi(strstr(k1, " smem ") + 6) >= 128, "%s", m);
    cr_assert(atoi(strstr(m, "kernel k0_0 ") ? strstr(strstr(m, "kernel k0_0 "), " smem ") + 6 : "1") == 0, "%s", m);
    char *ptx = ptx_of(dir, "rows.irx");
    cr_assert(strstr(ptx, ".maxntid 32, 1, 1") && strstr(ptx, ".maxntid 128, 1, 1"), "launch bounds");
    free(ptx);
    free(m);
    free(model);
    tu_rmtree(dir);
    free(dir);
}
