/* Helpers generated code reaches through IrtFnTable: BLAS GEMM with 64-bit sizes and the libm
 * functions LLVM has no intrinsic for. Stateless for the callers, so concurrent runs share them.
 *
 * OpenBLAS is not linked: it is loaded with dlopen the first time an artifact or program that
 * calls GEMM is loaded (irt_blas_require), so a process that runs only small models (compiled
 * without BLAS calls) never pays for its relocations and thread pool. The library handle and
 * entry points are process-wide, written once under pthread_once and constant afterwards; the
 * requested thread count (irt_set_threads) is the one other process-wide setting, as in
 * OpenBLAS itself.
 */
#include "backend/runtime/runtime.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef IRT_OPENBLAS_LIBDIR
#define IRT_OPENBLAS_LIBDIR "/usr/lib/x86_64-linux-gnu"
#endif

/* cblas_sgemm with the enums as ints (CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112) and
 * OpenBLAS's 32-bit integers (the LP64 build Debian ships). */
typedef void (*CblasSgemm)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                           int);
typedef void (*SetThreads)(int);

typedef struct IrtBlas {
    void *lib;
    CblasSgemm sgemm;
    SetThreads set_threads;
    char err[256];
} IrtBlas;

static IrtBlas blas;                  /* written once in load_blas, then read-only */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static atomic_int blas_threads;       /* 0 = the library's default */
static atomic_int blas_ready;         /* set (release) once blas is complete */

/* OpenBLAS 0.3.21 does not know AMD Zen 4 and falls back to its AVX2 (Haswell) kernels there;
 * its AVX-512 (SkylakeX) kernels run about 1.5x faster on such CPUs. The choice is made from
 * OPENBLAS_CORETYPE when the library initializes, so it is set (only when the user has not
 * set it) before the dlopen. A single thread likewise is requested through OPENBLAS_NUM_THREADS
 * so the library does not start its thread pool at all. */
static void prepare_env(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_is("amd") && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512cd"))
        setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 0);
#endif
    if (atomic_load(&blas_threads) == 1 && !getenv("OPENBLAS_NUM_THREADS") && !getenv("OMP_NUM_THREADS"))
        setenv("OPENBLAS_NUM_THREADS", "1", 0);
}

static void load_blas(void) {
    prepare_env();
    const char *names[] = {"libopenblas.so.0", IRT_OPENBLAS_LIBDIR "/libopenblas.so.0", "libopenblas.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !blas.lib; i++)
        blas.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!blas.lib) {
        snprintf(blas.err, sizeof blas.err, "cannot load OpenBLAS (libopenblas.so.0): %s", dlerror());
        return;
    }
    void *f = dlsym(blas.lib, "cblas_sgemm"), *t = dlsym(blas.lib, "openblas_set_num_threads");
    if (!f) {
        snprintf(blas.err, sizeof blas.err, "the loaded OpenBLAS has no cblas_sgemm");
        dlclose(blas.lib);
        blas.lib = NULL;
        return;
    }
    memcpy(&blas.sgemm, &f, sizeof f);
    if (t) memcpy(&blas.set_threads, &t, sizeof t);
    int n = atomic_load(&blas_threads);
    if (n > 0 && blas.set_threads) blas.set_threads(n);
    atomic_store_explicit(&blas_ready, 1, memory_order_release);
}

int irt_blas_require(char *err, size_t cap) {
    pthread_once(&blas_once, load_blas);
    if (blas.sgemm) return 0;
    if (err && cap) snprintf(err, cap, "%s", blas.err);
    return -1;
}

int irt_blas_loaded(void) { return atomic_load_explicit(&blas_ready, memory_order_acquire); }

void irt_set_threads(int n) {
    atomic_store(&blas_threads, n < 0 ? 0 : n);
    if (irt_blas_loaded() && blas.set_threads && n > 0) blas.set_threads(n); /* already loaded: apply now */
}

void irt_sgemm(int64_t trans_a, int64_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
               int64_t ldc) {
    if (!irt_blas_loaded() && irt_blas_require(NULL, 0) != 0) {
        /* the loaders call irt_blas_require first and refuse to run without BLAS; should it be
         * missing anyway, the result is NaN rather than a crash */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] = NAN;
        return;
    }
    blas.sgemm(101, trans_a ? 112 : 111, trans_b ? 112 : 111, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb,
               beta, c, (int)ldc);
}

static float irt_tanhf(float x) { return tanhf(x); }
static float irt_erff(float x) { return erff(x); }

double irt_math1(int64_t code, double x) {
    switch (code) {
    case IRT_MATH_TAN: return tan(x);
    case IRT_MATH_ASIN: return asin(x);
    case IRT_MATH_ACOS: return acos(x);
    case IRT_MATH_ATAN: return atan(x);
    case IRT_MATH_SINH: return sinh(x);
    case IRT_MATH_COSH: return cosh(x);
    case IRT_MATH_ASINH: return asinh(x);
    case IRT_MATH_ACOSH: return acosh(x);
    case IRT_MATH_ATANH: return atanh(x);
    case IRT_MATH_TANH: return tanh(x);
    case IRT_MATH_ERF: return erf(x);
    case IRT_MATH_EXPM1: return expm1(x);
    case IRT_MATH_LOG1P: return log1p(x);
    case IRT_MATH_SIN: return sin(x);
    case IRT_MATH_COS: return cos(x);
    default: return NAN;
    }
}

static const IrtFnTable irt_table = {irt_sgemm, irt_tanhf, irt_erff, irt_math1};

const IrtFnTable *irt_fn_table(void) { return &irt_table; }
