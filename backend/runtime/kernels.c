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
#include "backend/runtime/abi.h"
#include "ir/kernels_shared.h" /* header-only: shared with the interpreter */
#include "ir/nms.h" /* header-only: shared with the interpreter */
#include "ir/resize_taps.h" /* header-only: shared with the interpreter */
#include "ir/rng.h" /* header-only: the interpreter's generator */
#include "ir/strconv.h" /* header-only: shared with the interpreter */

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define IRT_HUGE (2u << 20)
void *irt_workspace_alloc(size_t n) {
    if (n < IRT_HUGE) return aligned_alloc(64, (n + 63) / 64 * 64);
    size_t sz = (n + IRT_HUGE - 1) / IRT_HUGE * IRT_HUGE;
    void *p = aligned_alloc(IRT_HUGE, sz);
#ifdef MADV_HUGEPAGE
    if (p) (void)madvise(p, sz, MADV_HUGEPAGE); /* advice only: EINVAL where THP is off */
#endif
    return p;
}

#ifndef IRT_OPENBLAS_LIBDIR
#define IRT_OPENBLAS_LIBDIR "/usr/lib/x86_64-linux-gnu"
#endif

/* cblas_sgemm with the enums as ints (CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112) and
 * OpenBLAS's 32-bit integers (the LP64 build Debian ships). */
typedef void (*CblasSgemm)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                           int);
typedef void (*CblasDgemm)(int, int, int, int, int, int, double, const double *, int, const double *, int, double,
                           double *, int);
typedef void (*SetThreads)(int);

typedef struct IrtBlas {
    void *lib;
    CblasSgemm sgemm;
    CblasDgemm dgemm; /* optional: the integer Convs' exact f64 path */
    SetThreads set_threads;
    char err[256];
} IrtBlas;

static IrtBlas blas;                  /* written once in load_blas, then read-only */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static atomic_int blas_threads;       /* 0 = the library's default */
static atomic_int blas_applied;       /* the count last given to OpenBLAS (0: none yet) */
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
    /* OpenBLAS's workers spin after each call (2^28 cycles by default) before they sleep, taking
     * the cores that the runtime's own pool needs for the generated kernels between GEMMs: with
     * 2 threads on 2 cores ResNet-50 ran in 83 ms (65-101) instead of 56 (AMD EPYC, AVX2,
     * 2026-12-05). 4 is OpenBLAS's shortest spin (2^4 cycles); a value the user set is kept. */
    if (!getenv("OPENBLAS_THREAD_TIMEOUT")) setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
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
    void *dg = dlsym(blas.lib, "cblas_dgemm");
    if (dg) memcpy(&blas.dgemm, &dg, sizeof dg);
    int n = atomic_load(&blas_threads);
    if (n > 0 && blas.set_threads) {
        blas.set_threads(n);
        atomic_store(&blas_applied, n);
    }
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
    if (irt_blas_loaded() && blas.set_threads && n > 0) { /* already loaded: apply now */
        blas.set_threads(n);
        atomic_store(&blas_applied, n);
    }
}

/* GEMMs under BLAS_PAR_MIN multiply-adds run on one OpenBLAS thread whatever the setting:
 * OpenBLAS splits from 256K multiply-adds on, and handing a GEMM of a few million to its
 * threads cost more than it saved (a 32-token causal LM's 32 x 128 x 512 layers: the whole
 * model 1.6 ms on one thread, 17-20 ms on two on a shared 2-core machine; docs/decode.md). */
#define BLAS_PAR_MIN 8388608.0

static void blas_threads_for(int64_t m, int64_t n, int64_t k) {
    int want = atomic_load(&blas_threads);
    if (want <= 1 || !blas.set_threads) return; /* the library's default, or one thread already */
    if ((double)m * (double)n * (double)k < BLAS_PAR_MIN) want = 1;
    if (atomic_exchange(&blas_applied, want) != want) blas.set_threads(want);
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
    blas_threads_for(m, n, k);
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

/* ---- the thread pool of irt_parallel ----------------------------------------------------------
 * Workers (up to threads - 1, started when first needed) wait for one job at a time: parts are
 * taken from an atomic counter by the workers and the caller alike, and the caller returns once
 * every worker has left the job. At most `want` workers join a job (the current thread setting).
 * A caller that finds the pool busy (another irt_run on another thread) runs its kernel whole on
 * its own thread instead: never a deadlock, never a wait.
 * Between jobs a worker spins for up to IRT_SPIN_NS before it sleeps on the condition variable,
 * and the caller spins as long for the workers still inside a job: a Conv through Winograd is
 * three jobs per band of tile rows, back to back, and a futex wake-up per job takes tens of
 * microseconds, a few hundred jobs per ResNet-50 run. EPYC-AVX2, 2 threads, quiet machine,
 * medians of three interleaved runs: SqueezeNet 4.9-5.1 -> 4.3-4.5 ms, ResNet-50 41.9-45.5 ->
 * 41.1-42.9 ms. (While other processes saturated both cores it measured within the noise,
 * SqueezeNet's best runs 7.2-7.7 ms without and 7.6-8.1 with.) */
#define IRT_SPIN_NS 50000
typedef struct IrtPool {
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    int n_workers, busy, want;
    atomic_int active;                 /* workers inside the current job */
    atomic_ullong gen;                 /* job generation, bumped per job (under mu) */
    IrtPartFn fn;
    void *ctx;
    const IrtFnTable *fns;
    int64_t n_parts;
    atomic_llong next;
} IrtPool;

static IrtPool pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

static void run_parts(void) {
    for (int64_t p; (p = atomic_fetch_add(&pool.next, 1)) < pool.n_parts;) pool.fn(pool.ctx, pool.fns, p);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until *gen differs from seen or IRT_SPIN_NS pass; whether it changed. */
static bool spin_for_job(uint64_t seen) {
    uint64_t t0 = now_ns();
    for (int i = 1;; i++) {
        if (atomic_load_explicit(&pool.gen, memory_order_relaxed) != seen) return true;
        cpu_relax();
        if (i % 64 == 0 && now_ns() - t0 > IRT_SPIN_NS) return false;
    }
}

static void *pool_worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&pool.mu);
    uint64_t seen = 0; /* a worker started for a job joins it (the busy check guards late ones) */
    for (;;) {
        if (atomic_load(&pool.gen) == seen) { /* the next job usually comes within microseconds */
            pthread_mutex_unlock(&pool.mu);
            spin_for_job(seen);
            pthread_mutex_lock(&pool.mu);
        }
        while (atomic_load(&pool.gen) == seen) pthread_cond_wait(&pool.work, &pool.mu);
        seen = atomic_load(&pool.gen);
        /* woke after that job was over (its caller did the parts), or enough workers are in */
        if (!pool.busy || atomic_load(&pool.active) >= pool.want) continue;
        atomic_fetch_add(&pool.active, 1);
        pthread_mutex_unlock(&pool.mu);
        run_parts();
        pthread_mutex_lock(&pool.mu);
        if (atomic_fetch_sub(&pool.active, 1) == 1) pthread_cond_broadcast(&pool.idle);
    }
    return NULL;
}

static int pool_threads(void) {
    int n = atomic_load(&blas_threads);
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    return n > 64 ? 64 : n;
}

void irt_parallel(int64_t n_parts, IrtPartFn fn, void *ctx, const IrtFnTable *fns) {
    int threads = pool_threads();
    if (n_parts <= 1 || threads <= 1) {
        fn(ctx, fns, -1);
        return;
    }
    pthread_mutex_lock(&pool.mu);
    while (!pool.busy && pool.n_workers < threads - 1) { /* start workers up to the setting */
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &at, pool_worker, NULL);
        pthread_attr_destroy(&at);
        if (rc != 0) break;
        pool.n_workers++;
    }
    if (pool.busy || pool.n_workers == 0) {
        pthread_mutex_unlock(&pool.mu);
        fn(ctx, fns, -1);
        return;
    }
    pool.busy = 1;
    pool.want = threads - 1;
    pool.fn = fn;
    pool.ctx = ctx;
    pool.fns = fns;
    pool.n_parts = n_parts;
    atomic_store(&pool.next, 0);
    atomic_fetch_add(&pool.gen, 1);
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);
    run_parts();
    /* every part has been taken; wait for the workers still inside this job (active only
     * drops while the job runs: workers join under mu, which is released here) */
    uint64_t t0 = now_ns();
    for (int i = 1; atomic_load_explicit(&pool.active, memory_order_acquire) > 0; i++) {
        cpu_relax();
        if (i % 64 == 0 && now_ns() - t0 > IRT_SPIN_NS) break;
    }
    pthread_mutex_lock(&pool.mu);
    while (atomic_load(&pool.active) > 0) pthread_cond_wait(&pool.idle, &pool.mu);
    pool.busy = 0;
    pthread_mutex_unlock(&pool.mu);
}

/* ---- NonMaxSuppression ---------------------------------------------------------------------- */


int64_t irt_nms(const float *boxes, const float *scores, int64_t nb, int64_t ncls, int64_t ns, int64_t max_out,
                float iou, int64_t has_score_thr, float score_thr, int64_t center, int64_t *out, void *scratch) {
    IrNmsCand *cand = scratch;
    float *corners = (float *)(cand + ns);
    int64_t *picked = (int64_t *)(corners + 4 * ns), nsel = 0;
    for (int64_t b = 0; b < nb && max_out > 0; b++) {
        for (int64_t i = 0; i < ns; i++) ir_nms_corners(boxes + (b * ns + i) * 4, (int)center, corners + i * 4);
        for (int64_t c = 0; c < ncls; c++) {
            int64_t nc = 0, np = 0;
            for (int64_t i = 0; i < ns; i++) {
                float sc = scores[(b * ncls + c) * ns + i];
                if (has_score_thr && !(sc > score_thr)) continue;
                cand[nc].score = sc, cand[nc].idx = i, nc++;
            }
            qsort(cand, (size_t)nc, sizeof *cand, ir_nms_cmp);
            for (int64_t k = 0; k < nc && np < max_out; k++) {
                int keep = 1;
                for (int64_t j = 0; j < np && keep; j++)
                    if (ir_nms_suppress(corners + cand[k].idx * 4, corners + picked[j] * 4, iou)) keep = 0;
                if (!keep) continue;
                picked[np++] = cand[k].idx;
                out[nsel * 3] = b, out[nsel * 3 + 1] = c, out[nsel * 3 + 2] = cand[k].idx;
                nsel++;
            }
        }
    }
    return nsel;
}

/* ---- per-run memory, strings ----------------------------------------------------------------- */

void *irt_run_alloc(IrtRunCtx *c, size_t n) {
    void **b = malloc(sizeof(void *) + (n ? n : 1));
    if (!b) {
        if (!c->failed) snprintf(c->err, sizeof c->err, "out of memory");
        c->failed = 1;
        return NULL;
    }
    *b = c->blocks;
    c->blocks = b;
    return b + 1;
}

void irt_fail(IrtRunCtx *ctx, const char *msg) {
    if (!ctx || ctx->failed) return;
    ctx->failed = 1;
    snprintf(ctx->err, sizeof ctx->err, "%s", msg);
}

void irt_run_ctx_free(IrtRunCtx *c) {
    while (c->blocks) {
        void **b = c->blocks;
        c->blocks = *b;
        free(b);
    }
}

static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }
static char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c; }

int64_t irt_strnorm(const IrtString *in, int64_t n, IrtString *out, const void *stopwords, int64_t n_stop, int64_t mode,
                    int64_t case_sensitive, IrtRunCtx *ctx) {
    const uint64_t *off = stopwords;
    const char *sb = (const char *)(off + n_stop + 1);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += in[i].len;
    char *bytes = mode ? irt_run_alloc(ctx, total) : NULL;
    if (mode && !bytes) return 0;
    int64_t kept = 0;
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        int stop = 0;
        for (int64_t k = 0; k < n_stop && !stop; k++) {
            size_t len = (size_t)(off[k + 1] - off[k]);
            const char *w = sb + off[k];
            if (len != in[i].len) continue;
            stop = 1;
            for (size_t j = 0; j < len && stop; j++)
                stop = case_sensitive ? w[j] == in[i].data[j] : ascii_lower(w[j]) == ascii_lower(in[i].data[j]);
        }
        if (stop) continue;
        if (!mode) {
            out[kept++] = in[i];
            continue;
        }
        char *o = bytes + at;
        for (size_t j = 0; j < in[i].len; j++) o[j] = mode == 1 ? ascii_lower(in[i].data[j]) : ascii_upper(in[i].data[j]);
        out[kept++] = (IrtString){o, in[i].len};
        at += in[i].len;
    }
    if (kept == 0) out[kept++] = (IrtString){NULL, 0}; /* nothing kept: one empty string (ONNX) */
    return kept;
}

/* ---- RNN, GRU, LSTM ----------------------------------------------------------------------------- */

static float act_apply(int64_t k, float alpha, float beta, float x) {
    switch (k) {
    case IRT_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case IRT_ACT_TANH: return tanhf(x);
    case IRT_ACT_RELU: return x > 0 ? x : 0;
    case IRT_ACT_AFFINE: return alpha * x + beta;
    case IRT_ACT_LEAKY: return x >= 0 ? x : alpha * x;
    case IRT_ACT_THRESH: return x > alpha ? x : 0;
    case IRT_ACT_SCALED_TANH: return alpha * tanhf(beta * x);
    case IRT_ACT_HARD_SIGMOID: return fmaxf(0, fminf(1, alpha * x + beta));
    case IRT_ACT_ELU: return x >= 0 ? x : alpha * (expf(x) - 1);
    case IRT_ACT_SOFTSIGN: return x / (1 + fabsf(x));
    case IRT_ACT_SOFTPLUS: return log1pf(expf(x));
    default: return x;
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define IRT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define IRT_CLONES
#endif

/* exp without branches or calls, so loops over it vectorize: 2^n * p(r) with r = x - n ln 2 in
 * [-ln2/2, ln2/2], a degree-6 polynomial (about 2 ulp), x clamped to [-87, 88]. */
static inline float vexpf(float x) {
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x; /* (not fminf: that is a call unless math is finite) */
    float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = x - n * 0.693145752f - n * 1.42860677e-6f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416664891f + r * (0.00833361037f + r * 0.00139304355f)))));
    union {
        int32_t i;
        float f;
    } u = {.i = ((int32_t)n + 127) << 23};
    return p * u.f;
}

/* x[0, n) = f(x), sigmoid and tanh vectorized (vexpf), the others one by one */
IRT_CLONES static void act_array(int64_t k, float alpha, float beta, float *x, int64_t n) {
    if (k == IRT_ACT_SIGMOID) {
        for (int64_t i = 0; i < n; i++) x[i] = 1.0f / (1.0f + vexpf(-x[i]));
    } else if (k == IRT_ACT_TANH) {
        for (int64_t i = 0; i < n; i++) x[i] = 2.0f / (1.0f + vexpf(-2.0f * x[i])) - 1.0f;
    } else {
        for (int64_t i = 0; i < n; i++) x[i] = act_apply(k, alpha, beta, x[i]);
    }
}

IRT_CLONES static void clip_array(float c, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] < -c ? -c : x[i] > c ? c : x[i];
}

/* out[0, np * 16) = v[0, k) P where P holds np panels of 16 columns, each [k][16] */
IRT_CLONES static void gemv_panels(const float *v, const float *pk, int64_t k, int64_t np, float *out) {
    int64_t p = 0;
    for (; p + 4 <= np; p += 4) {
        float a0[16] = {0}, a1[16] = {0}, a2[16] = {0}, a3[16] = {0};
        const float *b0 = pk + p * k * 16, *b1 = b0 + k * 16, *b2 = b1 + k * 16, *b3 = b2 + k * 16;
        for (int64_t i = 0; i < k; i++) {
            float s = v[i];
            for (int j = 0; j < 16; j++) {
                a0[j] += s * b0[i * 16 + j];
                a1[j] += s * b1[i * 16 + j];
                a2[j] += s * b2[i * 16 + j];
                a3[j] += s * b3[i * 16 + j];
            }
        }
        for (int j = 0; j < 16; j++) {
            out[p * 16 + j] = a0[j];
            out[p * 16 + 16 + j] = a1[j];
            out[p * 16 + 32 + j] = a2[j];
            out[p * 16 + 48 + j] = a3[j];
        }
    }
    for (; p < np; p++) {
        float a0[16] = {0};
        const float *b0 = pk + p * k * 16;
        for (int64_t i = 0; i < k; i++)
            for (int j = 0; j < 16; j++) a0[j] += v[i] * b0[i * 16 + j];
        for (int j = 0; j < 16; j++) out[p * 16 + j] = a0[j];
    }
}

void irt_rnn(const int64_t *ip, const float *fp, const float *x, const float *w, const float *r, const float *b,
             const int32_t *seq_lens, const float *h0, const float *c0, const float *p, float *y, float *yh, float *yc,
             float *scratch) {
    int64_t kind = ip[0], S = ip[1], N = ip[2], I = ip[3], H = ip[4], dirs = ip[5], rev_only = ip[6], bf = ip[7] & 1;
    bool packed = (ip[7] & 2) != 0; /* r: every direction packed at compile time */
    int64_t lbr = ip[8], coupled = ip[9], has_clip = ip[10], G = kind == 0 ? 1 : kind == 1 ? 3 : 4;
    int per = kind == 0 ? 1 : kind == 1 ? 2 : 3;
    float clip = fp[0];
    float *h = scratch, *c = h + N * H, *gates = c + N * H, *hn = gates + G * H, *rh = hn + H, *tmp = rh + H;
    int64_t np = (G * H + 15) / 16;
    float *xw = tmp + H;            /* x W^T + Wb for every step and sequence: [S, N, G * H] */
    float *rs = xw + S * N * G * H; /* R of the direction in panels of 16 gates: [np][H][16] */
    float *hr = rs + np * 16 * H, *hr2 = hr + np * 16; /* h R^T, (r * h) R^T */
    if (y) memset(y, 0, (size_t)(S * dirs * N * H) * sizeof *y); /* steps past a sequence's length stay 0 */
    for (int64_t d = 0; d < dirs; d++) {
        int reverse = rev_only || d == 1;
        const int64_t *fk = ip + 11 + d * per;
        const float *fa = fp + 1 + d * per, *fb = fp + 7 + d * per;
        const float *wd = w + d * G * H * I;
        const float *wb = b ? b + d * 2 * G * H : NULL, *rb = b ? wb + G * H : NULL;
        const float *pd = p ? p + d * 3 * H : NULL;
        /* the input projection of every step at once, one GEMM (rows in x's order), plus Wb */
        irt_sgemm(0, 1, S * N, G * H, I, 1.0f, x, I, wd, I, 0.0f, xw, G * H);
        for (int64_t row = 0; wb && row < S * N; row++)
            for (int64_t q = 0; q < G * H; q++) xw[row * G * H + q] += wb[q];
        const float *rt = packed ? r + d * np * 16 * H : rs;
        if (!packed) irt_rnn_pack_r(r + d * G * H * H, G, H, rs);
        for (int64_t i = 0; i < N * H; i++) {
            int64_t bi = i / H, j = i % H, hi = bf ? (bi * dirs + d) * H + j : (d * N + bi) * H + j;
            h[i] = h0 ? h0[hi] : 0;
            c[i] = c0 ? c0[hi] : 0;
        }
        for (int64_t bi = 0; bi < N; bi++) {
            int64_t len = seq_lens ? seq_lens[bi] : S;
            if (len < 0 || len > S) len = S;
            float *hb = h + bi * H, *cb = c + bi * H;
            for (int64_t s = 0; s < len; s++) {
                int64_t t = reverse ? len - 1 - s : s;
                const float *xq = xw + (bf ? bi * S + t : t * N + bi) * G * H;
                int64_t gr = kind == 1 ? 2 * H : G * H; /* + h R^T + Rb (GRU's candidate: later) */
                gemv_panels(hb, rt, H, np, hr);
                for (int64_t q = 0; q < G * H; q++) gates[q] = xq[q] + (q < gr ? hr[q] + (rb ? rb[q] : 0) : 0);
                if (kind == 0) {
                    memcpy(hn, gates, (size_t)H * sizeof *hn);
                    if (has_clip) clip_array(clip, hn, H);
                    act_array(fk[0], fa[0], fb[0], hn, H);
                } else if (kind == 1) {
                    float *z = gates, *rr = gates + H, *hh = gates + 2 * H;
                    if (has_clip) clip_array(clip, gates, 2 * H);
                    act_array(fk[0], fa[0], fb[0], gates, 2 * H);
                    if (!lbr)
                        for (int64_t k = 0; k < H; k++) tmp[k] = rr[k] * hb[k];
                    if (!lbr) gemv_panels(tmp, rt, H, np, hr2); /* (r * h) R_h^T; with lbr: (h R_h^T + Rb_h) * r */
                    for (int64_t j = 0; j < H; j++) {
                        float v = (lbr ? hr : hr2)[2 * H + j] + (rb ? rb[2 * H + j] : 0);
                        rh[j] = hh[j] + (lbr ? v * rr[j] : v);
                    }
                    if (has_clip) clip_array(clip, rh, H);
                    act_array(fk[1], fa[1], fb[1], rh, H);
                    for (int64_t j = 0; j < H; j++) hn[j] = (1 - z[j]) * rh[j] + z[j] * hb[j];
                } else { /* gates i o f c; the state update on whole rows */
                    float *gi = gates, *go = gates + H, *gf = gates + 2 * H, *gc = gates + 3 * H;
                    if (pd)
                        for (int64_t j = 0; j < H; j++) gi[j] += pd[j] * cb[j], gf[j] += pd[2 * H + j] * cb[j];
                    if (has_clip) clip_array(clip, gi, H), clip_array(clip, gf, H), clip_array(clip, gc, H);
                    act_array(fk[0], fa[0], fb[0], gi, H);
                    if (coupled)
                        for (int64_t j = 0; j < H; j++) gf[j] = 1 - gi[j];
                    else act_array(fk[0], fa[0], fb[0], gf, H);
                    act_array(fk[1], fa[1], fb[1], gc, H);
                    for (int64_t j = 0; j < H; j++) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
                    if (pd)
                        for (int64_t j = 0; j < H; j++) go[j] += pd[H + j] * cb[j];
                    if (has_clip) clip_array(clip, go, H);
                    act_array(fk[0], fa[0], fb[0], go, H);
                    memcpy(tmp, cb, (size_t)H * sizeof *tmp);
                    act_array(fk[2], fa[2], fb[2], tmp, H);
                    for (int64_t j = 0; j < H; j++) hn[j] = go[j] * tmp[j];
                }
                memcpy(hb, hn, (size_t)H * sizeof *hb);
                if (y)
                    for (int64_t j = 0; j < H; j++)
                        y[bf ? ((bi * S + t) * dirs + d) * H + j : ((t * dirs + d) * N + bi) * H + j] = hb[j];
            }
        }
        for (int64_t i = 0; i < N * H; i++) {
            int64_t bi = i / H, j = i % H, hi = bf ? (bi * dirs + d) * H + j : (d * N + bi) * H + j;
            if (yh) yh[hi] = h[i];
            if (yc) yc[hi] = c[i];
        }
    }
}

/* ---- Unique ---------------------------------------------------------------------------------- */

typedef struct Uniq {
    const char *x;
    int64_t kind, es, outer, n, inner;
} Uniq;

static int uniq_elem_cmp(const Uniq *u, int64_t a, int64_t b) {
    const char *pa = u->x + a * u->es, *pb = u->x + b * u->es;
    if (u->kind <= 1) {
        double x, y;
        if (u->kind == 0) {
            float fx, fy;
            memcpy(&fx, pa, 4), memcpy(&fy, pb, 4);
            x = fx, y = fy;
        } else memcpy(&x, pa, 8), memcpy(&y, pb, 8);
        int xn = x != x, yn = y != y;
        if (xn || yn) return xn == yn ? 0 : xn ? 1 : -1;
        return x < y ? -1 : x > y;
    }
    uint64_t ux = 0, uy = 0;
    memcpy(&ux, pa, (size_t)u->es), memcpy(&uy, pb, (size_t)u->es); /* little-endian */
    if (u->kind == 3) return ux < uy ? -1 : ux > uy;
    int sh = 64 - 8 * (int)u->es;
    int64_t sx = (int64_t)(ux << sh) >> sh, sy = (int64_t)(uy << sh) >> sh;
    return sx < sy ? -1 : sx > sy;
}

static int uniq_cmp(const Uniq *u, int64_t p, int64_t q) {
    for (int64_t o = 0; o < u->outer; o++)
        for (int64_t i = 0; i < u->inner; i++) {
            int r = uniq_elem_cmp(u, (o * u->n + p) * u->inner + i, (o * u->n + q) * u->inner + i);
            if (r) return r;
        }
    return 0;
}

static void uniq_sort(int64_t *idx, int64_t *tmp, int64_t n, const Uniq *u) { /* stable merge sort */
    if (n < 2) return;
    int64_t h = n / 2, i = 0, j = h, k = 0;
    uniq_sort(idx, tmp, h, u);
    uniq_sort(idx + h, tmp, n - h, u);
    while (i < h && j < n) tmp[k++] = uniq_cmp(u, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

int64_t irt_unique(const void *x, int64_t kind, int64_t es, int64_t outer, int64_t n, int64_t inner, int64_t sorted,
                   void *y, int64_t *indices, int64_t *inverse, int64_t *counts, int64_t *scratch) {
    Uniq u = {x, kind, es, outer, n, inner};
    int64_t *order = scratch, *tmp = scratch + n, *group = scratch + 2 * n, *first = scratch + 3 * n, *count = scratch + 4 * n;
    for (int64_t j = 0; j < n; j++) order[j] = j;
    uniq_sort(order, tmp, n, &u);
    int64_t ng = 0;
    for (int64_t j = 0; j < n; j++) {
        if (j == 0 || uniq_cmp(&u, order[j - 1], order[j]) != 0) first[ng] = order[j], count[ng++] = 0;
        group[order[j]] = ng - 1;
        count[ng - 1]++;
    }
    int64_t *rank = tmp, next = 0; /* the output position of each group */
    for (int64_t g = 0; g < ng; g++) rank[g] = sorted ? g : -1;
    for (int64_t j = 0; !sorted && j < n; j++)
        if (rank[group[j]] < 0) rank[group[j]] = next++;
    for (int64_t g = 0; g < ng; g++) {
        int64_t at = rank[g], src = first[g];
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)y + ((o * ng + at) * inner) * es, (const char *)x + ((o * n + src) * inner) * es, (size_t)(inner * es));
        if (indices) indices[at] = src;
        if (counts) counts[at] = count[g];
    }
    for (int64_t j = 0; inverse && j < n; j++) inverse[j] = rank[group[j]];
    return ng;
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------------- */

static int tfidf_eq(const void *x, int64_t kind, int64_t xi, const void *pool, int64_t pool_len, int64_t pi) {
    if (kind == 2) {
        const uint64_t *off = pool;
        const char *bytes = (const char *)(off + pool_len + 1);
        IrtString e = ((const IrtString *)x)[xi];
        size_t len = (size_t)(off[pi + 1] - off[pi]);
        return e.len == len && (!len || memcmp(e.data, bytes + off[pi], len) == 0);
    }
    int64_t v = kind == 0 ? ((const int32_t *)x)[xi] : ((const int64_t *)x)[xi];
    return v == ((const int64_t *)pool)[pi];
}

void irt_tfidf(const void *x, int64_t kind, int64_t rows, int64_t c, const int64_t *params, const void *pool,
               const float *weights, float *out) {
    int64_t lo = params[0], hi = params[1], skip = params[2], mode = params[3], width = params[4];
    int64_t pool_len = params[5], n_counts = params[6], n_indexes = params[7];
    const int64_t *counts = params + 8, *indexes = counts + n_counts;
    for (int64_t r = 0; r < rows; r++) {
        float *o = out + r * width;
        int64_t base = r * c;
        for (int64_t j = 0; j < width; j++) o[j] = 0;
        for (int64_t n = lo; n <= hi && n <= n_counts; n++) {
            int64_t start = counts[n - 1], end = n < n_counts ? counts[n] : pool_len, n_grams = (end - start) / n;
            int64_t ord0 = 0; /* index of the first n-gram of this length among all pool n-grams */
            for (int64_t m = 1; m < n; m++) ord0 += ((m < n_counts ? counts[m] : pool_len) - counts[m - 1]) / m;
            for (int64_t gap = 0; gap <= (n == 1 ? 0 : skip); gap++) {
                int64_t span = (n - 1) * (gap + 1);
                for (int64_t i = 0; i + span < c; i++)
                    for (int64_t j = 0; j < n_grams; j++) {
                        int hit = 1;
                        for (int64_t k = 0; k < n && hit; k++)
                            hit = tfidf_eq(x, kind, base + i + k * (gap + 1), pool, pool_len, start + j * n + k);
                        if (!hit) continue;
                        if (ord0 + j < n_indexes) o[indexes[ord0 + j]] += 1;
                        break;
                    }
            }
        }
        if (mode == 1)
            for (int64_t j = 0; j < width; j++) o[j] = o[j] > 0 ? 1.0f : 0.0f;
        if (mode != 0 && weights)
            for (int64_t k = 0; k < n_indexes; k++) o[indexes[k]] *= weights[k];
    }
}

/* ---- MatMulInteger, QLinearMatMul --------------------------------------------------------------- */

static int64_t q_get(const void *p, int64_t kind, int64_t i) {
    return kind == 0 ? ((const uint8_t *)p)[i] : ((const int8_t *)p)[i];
}

/* Rounded value r saturated to output kind ko (1 u8, 2 i8; NaN saturates low) into element e. */
static void q_put(int64_t ko, void *y, int64_t e, double r) {
    double lo = ko == 1 ? 0 : -128, hi = ko == 1 ? 255 : 127;
    if (!(r >= lo)) r = lo;
    if (r > hi) r = hi;
    if (ko == 1) ((uint8_t *)y)[e] = (uint8_t)r;
    else ((int8_t *)y)[e] = (int8_t)r;
}

/* MatMulInteger/QLinearMatMul's output element e from its exact sum acc (row i, column j). */
static void qmm_store(const int64_t *p, void *y, int64_t e, int64_t acc, int64_t i, int64_t j, const float *as, const float *bs,
                      double ysc, double yz) {
    int64_t ko = p[2], nas = p[9], nbs = p[10];
    if (!ko) {
        ((int32_t *)y)[e] = (int32_t)acc;
        return;
    }
    float sa = as[nas == 1 ? 0 : i % nas], sb = bs[nbs == 1 ? 0 : j % nbs];
    double m = (double)(float)(sa * sb) / ysc;
    q_put(ko, y, e, nearbyint((double)acc * m + yz));
}

/* The batches as f64 GEMMs through the loaded BLAS: (A - a_zp) and (B - b_zp) hold integers of
 * magnitude at most 255, so every partial sum of K products is an integer below 2^53 (K far
 * below 2^37): exact in any order, the interpreter's int64 sums. 0 when done; -1 (nothing
 * written) without BLAS's dgemm or memory, or for GEMMs too small to pay for the copies. */
static int qmm_gemm(const int64_t *p, const int64_t *boff, const void *a, const void *b, const void *azp, const void *bzp,
                    const float *as, const float *bs, const float *ys, const void *yzp, void *y) {
    int64_t ka = p[0], kb = p[1], ko = p[2], nb = p[3], M = p[4], K = p[5], N = p[6], naz = p[7], nbz = p[8];
    if (M > (1ll << 30) || K > (1ll << 30) || N > (1ll << 30) || (double)M * (double)K * (double)N < 4096) return -1;
    if (irt_blas_require(NULL, 0) || !blas.dgemm) return -1; /* loaded on first use; loops without it */
    double *ad = malloc((size_t)(M * K) * sizeof *ad), *bd = malloc((size_t)(K * N) * sizeof *bd);
    double *cd = malloc((size_t)(M * N) * sizeof *cd);
    if (!ad || !bd || !cd) {
        free(ad), free(bd), free(cd);
        return -1;
    }
    double ysc = ko ? ys[0] : 1, yz = ko ? (double)q_get(yzp, ko - 1, 0) : 0;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t oa = boff[4 * bi], ob = boff[4 * bi + 1], ra = boff[4 * bi + 2], cb = boff[4 * bi + 3];
        for (int64_t i = 0; i < M; i++) {
            int64_t za = naz ? q_get(azp, ka, naz == 1 ? 0 : (ra + i) % naz) : 0;
            for (int64_t k = 0; k < K; k++) ad[i * K + k] = (double)(q_get(a, ka, oa + i * K + k) - za);
        }
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < N; j++) {
                int64_t zb = nbz ? q_get(bzp, kb, nbz == 1 ? 0 : (cb + j) % nbz) : 0;
                bd[k * N + j] = (double)(q_get(b, kb, ob + k * N + j) - zb);
            }
        blas.dgemm(101, 111, 111, (int)M, (int)N, (int)K, 1.0, ad, (int)K, bd, (int)N, 0.0, cd, (int)N);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) qmm_store(p, y, bi * M * N + i * N + j, (int64_t)cd[i * N + j], i, j, as, bs, ysc, yz);
    }
    free(ad), free(bd), free(cd);
    return 0;
}

void irt_qmatmul(const int64_t *p, const int64_t *boff, const void *a, const void *b, const void *azp, const void *bzp,
                 const float *as, const float *bs, const float *ys, const void *yzp, void *y) {
    if (qmm_gemm(p, boff, a, b, azp, bzp, as, bs, ys, yzp, y) == 0) return;
    int64_t ka = p[0], kb = p[1], ko = p[2], nb = p[3], M = p[4], K = p[5], N = p[6];
    int64_t naz = p[7], nbz = p[8];
    double ysc = ko ? ys[0] : 1, yz = ko ? (double)q_get(yzp, ko - 1, 0) : 0;
    for (int64_t bi = 0, e = 0; bi < nb; bi++) {
        int64_t oa = boff[4 * bi], ob = boff[4 * bi + 1], ra = boff[4 * bi + 2], cb = boff[4 * bi + 3];
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++, e++) {
                int64_t za = naz ? q_get(azp, ka, naz == 1 ? 0 : (ra + i) % naz) : 0;
                int64_t zb = nbz ? q_get(bzp, kb, nbz == 1 ? 0 : (cb + j) % nbz) : 0;
                int64_t acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += (q_get(a, ka, oa + i * K + k) - za) * (q_get(b, kb, ob + k * N + j) - zb);
                qmm_store(p, y, e, acc, i, j, as, bs, ysc, yz);
            }
    }
}

/* irt_qconv's parameters (p, see abi.h) unpacked, with the input zero point and, for
 * QLinearConv, y_scale and y_zero_point read once. */
typedef struct QConv {
    int64_t kx, kw, ko, N, C, H, W, M, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl, G, nwz, nws, cg, mg, zx;
    double fys, yz;
} QConv;

static QConv qconv_read(const int64_t *p, const void *xzp, const float *ys, const void *yzp) {
    QConv q = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11],
               p[12], p[13], p[14], p[15], p[16], p[17], p[18], p[20], p[21], p[4] / p[18], p[7] / p[18], 0, 1, 0};
    q.zx = p[19] ? q_get(xzp, q.kx, 0) : 0;
    if (q.ko) q.fys = (double)(float)ys[0], q.yz = (double)q_get(yzp, q.ko - 1, 0);
    return q;
}

/* Output channel m's weight zero point, and its requantization multiplier
 * (float)(x_scale * w_scale[m]) / y_scale. */
static int64_t qconv_zw(const QConv *q, const void *wzp, int64_t m) {
    return q->nwz ? q_get(wzp, q->kw, q->nwz == 1 ? 0 : m) : 0;
}
static double qconv_mult(const QConv *q, const float *xs, const float *ws, int64_t m) {
    return q->ko ? (double)(float)(xs[0] * ws[q->nws == 1 ? 0 : m]) / q->fys : 0;
}

/* Output element e of channel m from its exact sum acc. */
static void qconv_store(const QConv *q, void *y, int64_t e, int64_t acc, const int32_t *bias, int64_t m, double mult) {
    if (!q->ko) {
        ((int32_t *)y)[e] = (int32_t)acc;
        return;
    }
    q_put(q->ko, y, e, nearbyint(((double)acc + (bias ? (double)bias[m] : 0.0)) * mult + q->yz));
}

/* The integer Conv as a GEMM in f64 through BLAS (loaded on first use; artifacts do not
 * require it): (w - w_zp) as an M/G x K matrix, (x - x_zp) as K x columns blocks of whole
 * output rows (im2col, padding 0). Every product is an integer of magnitude at most 255 * 255
 * and K stays far below 2^37, so every partial sum is an integer below 2^53: exact in f64 in
 * any summation order, the interpreter's int64 sums. 0 when done; -1 (nothing written) without
 * BLAS's dgemm or memory, or for Convs too small to pay for the copies. */
static int qconv_gemm(const QConv *q, const void *x, const void *w, const void *wzp, const float *xs, const float *ws,
                      const int32_t *bias, void *y) {
    int64_t K = q->cg * q->KH * q->KW, OH = q->OH, OW = q->OW, mg = q->mg;
    if (K <= 0 || OH <= 0 || OW <= 0 || K > (1ll << 30) || mg > (1ll << 30) || OW > (1ll << 30) ||
        (double)K * (double)(OH * OW) * (double)mg < 4096)
        return -1;
    if (irt_blas_require(NULL, 0) || !blas.dgemm) return -1; /* loaded on first use; loops without it */
    int64_t rows = OW >= 256 ? 1 : 256 / OW, pb_max = rows * OW; /* columns per block: whole output rows */
    if (pb_max > (1ll << 30)) return -1;
    double *wd = malloc((size_t)(mg * K) * sizeof *wd), *xb = malloc((size_t)(K * pb_max) * sizeof *xb);
    double *yb = malloc((size_t)(mg * pb_max) * sizeof *yb);
    if (!wd || !xb || !yb) {
        free(wd), free(xb), free(yb);
        return -1;
    }
    for (int64_t g = 0; g < q->G; g++) {
        for (int64_t mi = 0; mi < mg; mi++) {
            int64_t m = g * mg + mi, zw = qconv_zw(q, wzp, m);
            for (int64_t k = 0; k < K; k++) wd[mi * K + k] = (double)(q_get(w, q->kw, m * K + k) - zw);
        }
        for (int64_t n = 0; n < q->N; n++)
            for (int64_t oy0 = 0; oy0 < OH; oy0 += rows) {
                int64_t nr = OH - oy0 < rows ? OH - oy0 : rows, pb = nr * OW;
                for (int64_t c = 0, k = 0; c < q->cg; c++) {
                    int64_t plane = ((n * q->C + g * q->cg + c) * q->H) * q->W;
                    for (int64_t ky = 0; ky < q->KH; ky++)
                        for (int64_t kk = 0; kk < q->KW; kk++, k++) {
                            double *dst = xb + k * pb;
                            for (int64_t r = 0; r < nr; r++) {
                                int64_t iy = (oy0 + r) * q->sh - q->pt + ky * q->dh;
                                double *d = dst + r * OW;
                                if (iy < 0 || iy >= q->H) {
                                    for (int64_t ox = 0; ox < OW; ox++) d[ox] = 0;
                                    continue;
                                }
                                for (int64_t ox = 0; ox < OW; ox++) {
                                    int64_t ix = ox * q->sw - q->pl + kk * q->dw;
                                    d[ox] = ix < 0 || ix >= q->W ? 0.0 : (double)(q_get(x, q->kx, plane + iy * q->W + ix) - q->zx);
                                }
                            }
                        }
                }
                blas.dgemm(101, 111, 111, (int)mg, (int)pb, (int)K, 1.0, wd, (int)K, xb, (int)pb, 0.0, yb, (int)pb);
                for (int64_t mi = 0; mi < mg; mi++) {
                    int64_t m = g * mg + mi, e0 = ((n * q->M + m) * OH + oy0) * OW;
                    double mult = qconv_mult(q, xs, ws, m);
                    for (int64_t j = 0; j < pb; j++) qconv_store(q, y, e0 + j, (int64_t)yb[mi * pb + j], bias, m, mult);
                }
            }
    }
    free(wd), free(xb), free(yb);
    return 0;
}

void irt_qconv(const int64_t *p, const void *x, const void *w, const void *xzp, const void *wzp, const float *xs,
               const float *ws, const float *ys, const void *yzp, const int32_t *bias, void *y) {
    QConv q = qconv_read(p, xzp, ys, yzp);
    if (qconv_gemm(&q, x, w, wzp, xs, ws, bias, y) == 0) return;
    for (int64_t n = 0; n < q.N; n++)
        for (int64_t m = 0; m < q.M; m++) {
            int64_t g = m / q.mg, zw = qconv_zw(&q, wzp, m);
            double mult = qconv_mult(&q, xs, ws, m);
            for (int64_t oy = 0; oy < q.OH; oy++)
                for (int64_t ox = 0; ox < q.OW; ox++) {
                    int64_t acc = 0;
                    for (int64_t c = 0; c < q.cg; c++)
                        for (int64_t ky = 0; ky < q.KH; ky++) {
                            int64_t iy = oy * q.sh - q.pt + ky * q.dh;
                            if (iy < 0 || iy >= q.H) continue;
                            for (int64_t kk = 0; kk < q.KW; kk++) {
                                int64_t ix = ox * q.sw - q.pl + kk * q.dw;
                                if (ix < 0 || ix >= q.W) continue;
                                int64_t xv = q_get(x, q.kx, ((n * q.C + g * q.cg + c) * q.H + iy) * q.W + ix) - q.zx;
                                int64_t wv = q_get(w, q.kw, ((m * q.cg + c) * q.KH + ky) * q.KW + kk) - zw;
                                acc += xv * wv;
                            }
                        }
                    qconv_store(&q, y, ((n * q.M + m) * q.OH + oy) * q.OW + ox, acc, bias, m, mult);
                }
        }
}

/* ---- Det ------------------------------------------------------------------------------------- */

void irt_det(const void *x, int64_t f64, int64_t batches, int64_t m, void *y, double *lu) {
    for (int64_t b = 0; b < batches; b++) {
        for (int64_t i = 0; i < m * m; i++) lu[i] = f64 ? ((const double *)x)[b * m * m + i] : ((const float *)x)[b * m * m + i];
        double det = ir_det_lu(lu, m);
        if (f64) ((double *)y)[b] = det;
        else ((float *)y)[b] = (float)det;
    }
}

/* ---- RoiAlign -------------------------------------------------------------------------------- */

static double roi_at(const void *x, int64_t i) { return ((const float *)x)[i]; }

void irt_roi_align(const int64_t *p, double scale, const float *X, const float *R, const int64_t *B, float *Y,
                   IrtRunCtx *ctx) {
    int64_t N = p[0], C = p[1], H = p[2], W = p[3], nr = p[4], oh = p[5], ow = p[6], sr = p[7], is_max = p[8], half = p[9];
    for (int64_t r = 0; r < nr; r++) {
        int64_t b = B[r];
        if (b < 0 || b >= N) {
            irt_fail(ctx, "RoiAlign: a batch index is out of range");
            return;
        }
        IrRoiGeom q = ir_roi_align_geom(R[r * 4], R[r * 4 + 1], R[r * 4 + 2], R[r * 4 + 3], scale, (int)half, oh, ow, sr);
        if (q.too_many) {
            irt_fail(ctx, "RoiAlign: a roi needs more than 2^20 samples per bin (sampling_ratio 0 and a huge roi)");
            return;
        }
        for (int64_t c = 0; c < C; c++)
            for (int64_t ph = 0; ph < oh; ph++)
                for (int64_t pw = 0; pw < ow; pw++)
                    Y[((r * C + c) * oh + ph) * ow + pw] = (float)ir_roi_align_cell(
                        roi_at, X, (b * C + c) * H * W, H, W, q.sh, q.sw, q.bh, q.bw, ph, pw, q.gh, q.gw, (int)is_max, q.count);
    }
}

/* ---- training optimizers ---------------------------------------------------------------------- */

void irt_optim(const double *at, const float *r, const int64_t *t, int64_t n, const float *x, const float *g,
               const float *s1, const float *s2, float *ox, float *os1, float *os2) {
    double R = r[0], T = (double)t[0];
    if (at[0] == 0) { /* Adagrad */
        double lr = R / (1 + T * at[1]);
        for (int64_t k = 0; k < n; k++) {
            double xv = x[k], gr = at[3] * xv + g[k], hn = s1[k] + gr * gr;
            os1[k] = (float)hn;
            ox[k] = (float)(xv - lr * gr / (sqrt(hn) + at[2]));
        }
    } else if (at[0] == 1) { /* Adam */
        double alpha = at[1], beta = at[2], lr = t[0] > 0 ? R * sqrt(1 - pow(beta, T)) / (1 - pow(alpha, T)) : R;
        for (int64_t k = 0; k < n; k++) {
            double xv = x[k], gr = at[4] * xv + g[k];
            double vn = alpha * s1[k] + (1 - alpha) * gr, hn = beta * s2[k] + (1 - beta) * gr * gr;
            double xn = xv - lr * vn / (sqrt(hn) + at[3]);
            ox[k] = (float)((1 - at[5]) * xn);
            os1[k] = (float)vn;
            os2[k] = (float)hn;
        }
    } else { /* Momentum */
        double alpha = at[1], b = t[0] > 0 ? at[2] : 1;
        for (int64_t k = 0; k < n; k++) {
            double xv = x[k], gr = at[3] * xv + g[k], vn = alpha * s1[k] + b * gr;
            os1[k] = (float)vn;
            ox[k] = (float)(at[4] != 0 ? xv - R * (gr + alpha * vn) : xv - R * vn);
        }
    }
}

/* ---- random ops ------------------------------------------------------------------------------- */

void irt_random(const int64_t *ip, const double *fp, const void *in, void *out) {
    IrRng r;
    ir_rng_init(&r, (uint64_t)ip[1]);
    int64_t op = ip[0], n = ip[2], ik = ip[3], ok = ip[4];
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (op == 2) {
            double pr = ik == 1 ? ((const double *)in)[i] : ((const float *)in)[i];
            v = ir_rng_uniform(&r) < pr ? 1.0 : 0.0;
        } else v = op == 1 ? fp[0] + fp[1] * ir_rng_normal(&r) : fp[0] + (fp[1] - fp[0]) * ir_rng_uniform(&r);
        switch (ok) {
        case 0: ((float *)out)[i] = (float)v; break;
        case 1: ((double *)out)[i] = v; break;
        case 2: ((int32_t *)out)[i] = (int32_t)v; break;
        case 3: ((int64_t *)out)[i] = (int64_t)v; break;
        default: ((uint8_t *)out)[i] = (uint8_t)v; break;
        }
    }
}

/* ---- Cast between strings and numbers ---------------------------------------------------------- */

void irt_cast_str(const void *in, int64_t n, int64_t from, int64_t to, void *out, IrtRunCtx *ctx) {
    if (from == 0 && to == 0) {
        if (n) memcpy(out, in, (size_t)n * sizeof(IrtString));
        return;
    }
    if (from != 0) { /* numbers to text: at most 40 bytes each */
        char *bytes = irt_run_alloc(ctx, (size_t)(n ? n : 1) * 40);
        if (!bytes) return;
        for (int64_t i = 0; i < n; i++) {
            char buf[64];
            switch (from) {
            case 1: ir_format_float(((const float *)in)[i], 1, buf, sizeof buf); break;
            case 2: ir_format_float(((const double *)in)[i], 0, buf, sizeof buf); break;
            case 3: snprintf(buf, sizeof buf, "%lld", (long long)((const int32_t *)in)[i]); break;
            case 4: snprintf(buf, sizeof buf, "%lld", (long long)((const int64_t *)in)[i]); break;
            default: snprintf(buf, sizeof buf, "%s", ((const uint8_t *)in)[i] ? "True" : "False"); break;
            }
            size_t len = strlen(buf) < 40 ? strlen(buf) : 40;
            memcpy(bytes + i * 40, buf, len);
            ((IrtString *)out)[i] = (IrtString){bytes + i * 40, len};
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) { /* text to numbers */
        IrtString e = ((const IrtString *)in)[i];
        char buf[512];
        double d = 0;
        long long ll = 0;
        unsigned long long ull = 0;
        int ok = e.len < sizeof buf && (!e.len || !memchr(e.data, 0, e.len));
        if (ok) {
            if (e.len) memcpy(buf, e.data, e.len);
            buf[e.len] = 0;
            ok = ir_parse_number(buf, to == 5 ? IR_PARSE_BOOL : to <= 2 ? IR_PARSE_FLOAT : IR_PARSE_I64, &d, &ll, &ull);
        }
        if (!ok) {
            char msg[96];
            snprintf(msg, sizeof msg, "Cast: string element %lld is not a number", (long long)i);
            irt_fail(ctx, msg);
            return;
        }
        switch (to) {
        case 1: ((float *)out)[i] = (float)d; break;
        case 2: ((double *)out)[i] = d; break;
        case 3: ((int32_t *)out)[i] = (int32_t)ll; break;
        case 4: ((int64_t *)out)[i] = ll; break;
        default: ((uint8_t *)out)[i] = d != 0; break;
        }
    }
}

void irt_resize_taps(const int64_t *ip, const double *fp, int64_t *idx, double *w, uint8_t *outside, IrtRunCtx *ctx) {
    IrResizeMode m = {.mode = (int)ip[0], .ctm = (int)ip[1], .nearest = (int)ip[2], .A = fp[0], .exclude = ip[3] != 0,
                      .antialias = ip[4] != 0};
    int64_t start, in = ip[5], out = ip[6], stride = ip[7];
    int n = ir_resize_tap_count(&m, fp[1], &start);
    if (n < 1 || n > stride || !(fp[1] > 0)) {
        memset(idx, 0, (size_t)(out * stride) * sizeof *idx);
        memset(w, 0, (size_t)(out * stride) * sizeof *w);
        memset(outside, 0, (size_t)out);
        irt_fail(ctx, "Resize: a scale given at run time needs more taps than the kernel was compiled for");
        return;
    }
    ir_resize_taps_fill(&m, in, out, fp[1], fp[2], fp[3], n, start, (int)stride, idx, w, (bool *)outside);
}

static const IrtFnTable irt_table = {irt_sgemm, irt_tanhf, irt_erff, irt_math1, irt_parallel, irt_nms, irt_strnorm,
                                     irt_rnn, irt_unique, irt_tfidf, irt_fail, irt_qmatmul, irt_qconv, irt_det,
                                     irt_roi_align, irt_optim, irt_random, irt_cast_str, irt_resize_taps};

const IrtFnTable *irt_fn_table(void) { return &irt_table; }
