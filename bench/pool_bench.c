/* What a kernel split into parts on the runtime's pool (irt_parallel) costs against running it
 * whole, by work size: the break-even size behind the backend's part rule (issue 30). The work
 * is y[i] = a * x[i] + y[i] over n floats (in L1/L2, as a small kernel's operands are), split in
 * 16 equal parts; each size is timed whole (irt_set_threads(1)) and in parts at THREADS threads,
 * rounds interleaved, median of the rounds' median microseconds per call.
 *   pool_bench [THREADS] [ROUNDS]   (default 2 threads, 7 rounds) */
#define _POSIX_C_SOURCE 200809L
#include "backend/runtime/abi.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct Axpy {
    float *x, *y;
    int64_t n, parts;
    pthread_t caller;
    atomic_llong by_workers, all; /* parts run on a pool worker, parts run */
} Axpy;

static void axpy_part(void *ctx, const IrtFnTable *fns, int64_t part) {
    (void)fns;
    const Axpy *w = ctx;
    int64_t lo = part < 0 ? 0 : w->n * part / w->parts, hi = part < 0 ? w->n : w->n * (part + 1) / w->parts;
    for (int64_t i = lo; i < hi; i++) w->y[i] = 1.0001f * w->x[i] + w->y[i];
    Axpy *c = ctx;
    if (part < 0) return;
    atomic_fetch_add(&c->all, 1);
    if (!pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->by_workers, 1);
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the median microseconds of `calls` calls at `threads` threads */
static double time_calls(Axpy *w, int threads, int calls) {
    irt_set_threads(threads);
    double t[401];
    for (int i = 0; i < calls && i < 401; i++) {
        double t0 = now_us();
        irt_parallel(w->parts, axpy_part, w, irt_fn_table());
        t[i] = now_us() - t0;
    }
    qsort(t, (size_t)calls, sizeof *t, cmp_double);
    return t[calls / 2];
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (threads < 2 || rounds < 1 || rounds > 64) {
        fprintf(stderr, "usage: pool_bench [THREADS >= 2] [ROUNDS <= 64]\n");
        return 2;
    }
    int64_t sizes[] = {1024, 4096, 16384, 65536, 262144};
    int ns = (int)(sizeof sizes / sizeof *sizes);
    printf("| floats | whole us | %d threads, 16 parts us | parts / whole | parts run by workers |\n"
           "|---:|---:|---:|---:|---:|\n", threads);
    for (int s = 0; s < ns; s++) {
        Axpy w = {.x = malloc((size_t)sizes[s] * sizeof(float)), .y = calloc((size_t)sizes[s], sizeof(float)),
                  .n = sizes[s], .parts = 16, .caller = pthread_self()};
        if (!w.x || !w.y) return 1;
        for (int64_t i = 0; i < w.n; i++) w.x[i] = (float)i;
        double whole[64], parts[64];
        int calls = sizes[s] >= 262144 ? 101 : 401;
        for (int r = 0; r < rounds; r++) {
            whole[r] = time_calls(&w, 1, calls);
            parts[r] = time_calls(&w, threads, calls);
        }
        qsort(whole, (size_t)rounds, sizeof *whole, cmp_double);
        qsort(parts, (size_t)rounds, sizeof *parts, cmp_double);
        long long all = atomic_load(&w.all);
        printf("| %lld | %.2f | %.2f | %.2f | %.0f%% |\n", (long long)sizes[s], whole[rounds / 2], parts[rounds / 2],
               parts[rounds / 2] / whole[rounds / 2], all ? 100.0 * (double)atomic_load(&w.by_workers) / (double)all : 0.0);
        free(w.x);
        free(w.y);
    }
    return 0;
}
