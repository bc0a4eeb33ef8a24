/* irt_parallel, the runtime's thread pool for generated kernels split into parts: every part
 * runs exactly once across the pool and the caller; one thread (irt_set_threads(1)) and a pool
 * busy with another caller's job run the whole work in one call (part -1); concurrent callers
 * from several threads all complete. (Criterion runs each test in its own process.) */
#include "backend/runtime/abi.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef struct Job {
    atomic_int hits[64];
    atomic_int whole, calls;
} Job;

static void part_fn(void *ctx, const IrtFnTable *fns, int64_t part) {
    Job *j = ctx;
    (void)fns;
    atomic_fetch_add(&j->calls, 1);
    if (part < 0) atomic_fetch_add(&j->whole, 1);
    else atomic_fetch_add(&j->hits[part], 1);
}

Test(runtime_parallel, every_part_once) {
    irt_set_threads(4);
    for (int round = 0; round < 200; round++) {
        Job j;
        memset(&j, 0, sizeof j);
        int64_t n = 1 + round % 40;
        irt_parallel(n, part_fn, &j, irt_fn_table());
        if (n == 1) {
            cr_assert_eq(atomic_load(&j.whole), 1);
            continue;
        }
        cr_assert_eq(atomic_load(&j.whole), 0, "round %d: a whole-work call with a free pool", round);
        for (int64_t p = 0; p < n; p++) cr_assert_eq(atomic_load(&j.hits[p]), 1, "round %d: part %lld ran %d times", round, (long long)p, atomic_load(&j.hits[p]));
        cr_assert_eq(atomic_load(&j.calls), n);
    }
}

Test(runtime_parallel, one_thread_runs_whole) {
    irt_set_threads(1);
    Job j;
    memset(&j, 0, sizeof j);
    irt_parallel(8, part_fn, &j, irt_fn_table());
    cr_assert_eq(atomic_load(&j.whole), 1);
    cr_assert_eq(atomic_load(&j.calls), 1);
}

static void *caller(void *arg) {
    Job *j = arg;
    for (int r = 0; r < 100; r++) irt_parallel(12, part_fn, &j[r], irt_fn_table());
    return NULL;
}

/* Four threads submitting at once: each job completes, by parts or whole, never both. */
Test(runtime_parallel, concurrent_callers) {
    irt_set_threads(3);
    static Job jobs[4][100];
    memset(jobs, 0, sizeof jobs);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) cr_assert_eq(pthread_create(&t[i], NULL, caller, jobs[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++)
        for (int r = 0; r < 100; r++) {
            Job *j = &jobs[i][r];
            if (atomic_load(&j->whole)) {
                cr_assert_eq(atomic_load(&j->calls), 1);
                continue;
            }
            for (int p = 0; p < 12; p++) cr_assert_eq(atomic_load(&j->hits[p]), 1);
        }
}
