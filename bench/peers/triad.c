/* STREAM-style triad, one thread: a[i] = b[i] + s*c[i] over three 64 MiB f32 arrays, best of 5.
 * Bandwidth counts 3 arrays x 64 MiB moved per pass (read b and c, write a; write-allocate
 * traffic is not counted, as in STREAM). Prints one JSON line.
 * Build: cc -O3 -march=native -o triad triad.c */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N (64u * 1024u * 1024u / sizeof(float))

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void) {
    float *a = aligned_alloc(64, N * sizeof(float)), *b = aligned_alloc(64, N * sizeof(float)),
          *c = aligned_alloc(64, N * sizeof(float));
    if (!a || !b || !c) return 1;
    for (size_t i = 0; i < N; i++) a[i] = 0.0f, b[i] = (float)(i & 1023), c[i] = 0.5f;
    const float s = 3.0f;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t = now_s();
        for (size_t i = 0; i < N; i++) a[i] = b[i] + s * c[i];
        t = now_s() - t;
        if (t < best) best = t;
        __asm__ volatile("" : : "r"(a) : "memory");
    }
    double bytes = 3.0 * N * sizeof(float);
    printf("{\"probe\":\"triad\",\"array_mib\":64,\"best_ms\":%.3f,\"gb_s\":%.2f,\"check\":%g}\n", best * 1e3,
           bytes / best / 1e9, (double)a[N / 2]);
    free(a), free(b), free(c);
    return 0;
}
