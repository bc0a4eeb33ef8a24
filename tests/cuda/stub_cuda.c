/* A stand-in for libcuda.so.1 and libcublasLt.so.* (test_cuda_symbolic.c builds it as one shared
 * object and points IRTOOL_LIBCUDA and IRTOOL_LIBCUBLASLT at it): device memory is host memory,
 * kernels do not run, and every launch and GEMM is appended to $IRTOOL_TEST_CUDA_LOG as
 * "launch NAME GRID BLOCK SYM..." (SYM: the int64 values behind the launch's last pointer
 * parameter when the kernel takes `params` of them: $IRTOOL_TEST_CUDA_SYMS values) and "gemm
 * ROWS COLS BATCH" (cuBLASLt's D layout: N x M). So the runtime's host side (formulas, guards,
 * launch geometry, the symbol upload) runs on a machine without a GPU. */
#include "backend/runtime/cuda_api.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void logf_(const char *fmt, unsigned long long a, unsigned long long b, unsigned long long c, const char *s) {
    const char *p = getenv("IRTOOL_TEST_CUDA_LOG");
    FILE *f = p ? fopen(p, "a") : NULL;
    if (!f) return;
    if (s) fprintf(f, fmt, s, a, b, c);
    else fprintf(f, fmt, a, b, c);
    fclose(f);
}

int cuInit(unsigned f) { return (void)f, 0; }
int cuDriverGetVersion(int *v) { return *v = 13000, 0; }
int cuDeviceGetCount(int *n) { return *n = 1, 0; }
int cuDeviceGet(int *d, int i) { return (void)i, *d = 0, 0; }
int cuDeviceGetAttribute(int *v, int attr, int d) {
    (void)d;
    *v = attr == IRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : attr == IRT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 132 : 0;
    return 0;
}
int cuDeviceGetName(char *s, int n, int d) { return (void)d, snprintf(s, (size_t)n, "stub sm_90"), 0; }
int cuDevicePrimaryCtxRetain(void **c, int d) { return (void)d, *c = (void *)1, 0; }
int cuDevicePrimaryCtxRelease_v2(int d) { return (void)d, 0; }
int cuCtxSetCurrent(void *c) { return (void)c, 0; }
int cuModuleLoadData(void **m, const void *img) { return (void)img, *m = (void *)1, 0; }
int cuModuleUnload(void *m) { return (void)m, 0; }
/* a function handle is its name (kept until the process ends) */
int cuModuleGetFunction(void **f, void *m, const char *name) { return (void)m, *f = strdup(name), *f ? 0 : 2; }
int cuMemAlloc_v2(unsigned long long *p, size_t n) {
    void *q = calloc(1, n ? n : 1);
    *p = (unsigned long long)(uintptr_t)q;
    return q ? 0 : 2;
}
int cuMemFree_v2(unsigned long long p) { return free((void *)(uintptr_t)p), 0; }
int cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) { return memcpy((void *)(uintptr_t)d, s, n), 0; }
int cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *st) { return (void)st, cuMemcpyHtoD_v2(d, s, n); }
int cuMemcpyDtoHAsync_v2(void *d, unsigned long long s, size_t n, void *st) { return (void)st, memcpy(d, (void *)(uintptr_t)s, n), 0; }
int cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *st) {
    return (void)st, memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n), 0;
}
int cuMemsetD8Async(unsigned long long d, unsigned char v, size_t n, void *st) { return (void)st, memset((void *)(uintptr_t)d, v, n), 0; }
int cuStreamCreate(void **s, unsigned f) { return (void)f, *s = (void *)1, 0; }
int cuStreamDestroy_v2(void *s) { return (void)s, 0; }
int cuStreamSynchronize(void *s) { return (void)s, 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh, void *st,
                   void **params, void **extra) {
    (void)gy, (void)gz, (void)by, (void)bz, (void)sh, (void)st, (void)extra;
    logf_("launch %s %llu %llu", gx, bx, 0, (const char *)f);
    const char *np = getenv("IRTOOL_TEST_CUDA_PARAMS"), *ns = getenv("IRTOOL_TEST_CUDA_SYMS");
    const char *p = getenv("IRTOOL_TEST_CUDA_LOG");
    FILE *lf = p ? fopen(p, "a") : NULL;
    if (!lf) return 0;
    /* the last of the kernel's params (its count from the manifest, given by the test per name) */
    int last = -1;
    if (np) {
        const char *q = strstr(np, (const char *)f);
        if (q && q[strlen((const char *)f)] == '=') last = atoi(q + strlen((const char *)f) + 1) - 1;
    }
    if (last >= 0 && ns) {
        const int64_t *sym = (const int64_t *)(uintptr_t)*(unsigned long long *)params[last];
        for (int i = 0; i < atoi(ns); i++) fprintf(lf, " %lld", (long long)sym[i]);
    }
    fprintf(lf, "\n");
    fclose(lf);
    return 0;
}
int cuGetErrorName(int r, const char **s) { return (void)r, *s = "STUB_ERROR", 0; }
int cuEventCreate(void **e, unsigned f) { return (void)f, *e = (void *)1, 0; }
int cuEventRecord(void *e, void *s) { return (void)e, (void)s, 0; }
int cuEventSynchronize(void *e) { return (void)e, 0; }
int cuEventElapsedTime(float *ms, void *a, void *b) { return (void)a, (void)b, *ms = 0.0f, 0; }
int cuEventDestroy_v2(void *e) { return (void)e, 0; }

/* ---- cuBLASLt ---- */
typedef struct Layout {
    uint64_t rows, cols;
    int32_t batch;
} Layout;

int cublasLtCreate(void **h) { return *h = (void *)1, 0; }
int cublasLtDestroy(void *h) { return (void)h, 0; }
int cublasLtMatmulDescCreate(void **d, int c, int s) { return (void)c, (void)s, *d = malloc(1), 0; }
int cublasLtMatmulDescSetAttribute(void *d, int a, const void *v, size_t n) { return (void)d, (void)a, (void)v, (void)n, 0; }
int cublasLtMatmulDescDestroy(void *d) { return free(d), 0; }
int cublasLtMatrixLayoutCreate(void **l, int t, uint64_t rows, uint64_t cols, int64_t ld) {
    (void)t, (void)ld;
    Layout *p = calloc(1, sizeof *p);
    if (!p) return 2;
    p->rows = rows, p->cols = cols, p->batch = 1;
    *l = p;
    return 0;
}
int cublasLtMatrixLayoutSetAttribute(void *l, int a, const void *v, size_t n) {
    if (a == IRT_LT_LAYOUT_BATCH_COUNT && n == sizeof(int32_t)) memcpy(&((Layout *)l)->batch, v, n);
    return 0;
}
int cublasLtMatrixLayoutDestroy(void *l) { return free(l), 0; }
int cublasLtMatmulPreferenceCreate(void **p) { return *p = malloc(1), 0; }
int cublasLtMatmulPreferenceSetAttribute(void *p, int a, const void *v, size_t n) { return (void)p, (void)a, (void)v, (void)n, 0; }
int cublasLtMatmulPreferenceDestroy(void *p) { return free(p), 0; }
int cublasLtMatmulAlgoGetHeuristic(void *h, void *d, void *a, void *b, void *c, void *dd, void *pref, int req, IrtLtHeuristic *res,
                                   int *got) {
    (void)h, (void)d, (void)a, (void)b, (void)c, (void)dd, (void)pref, (void)req;
    memset(res, 0, sizeof *res);
    *got = 1;
    return 0;
}
int cublasLtMatmul(void *h, void *d, const void *alpha, const void *a, void *al, const void *b, void *bl, const void *beta,
                   const void *c, void *cl, void *dd, void *dl, const void *algo, void *ws, size_t wss, void *st) {
    (void)h, (void)d, (void)alpha, (void)a, (void)al, (void)b, (void)bl, (void)beta, (void)c, (void)cl, (void)dd, (void)algo;
    (void)ws, (void)wss, (void)st;
    const Layout *l = dl;
    logf_("gemm %llu %llu %llu\n", l->rows, l->cols, (unsigned long long)l->batch, NULL);
    return 0;
}
