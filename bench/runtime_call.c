/* The time of one irt_run call on an artifact, as a serving loop makes it (fresh outputs freed
 * after each call): the baseline bench/python_overhead.py sets the Python binding against.
 *   runtime_call MODEL.irx DIM CALLS [THREADS]   (every symbolic input dim set to DIM; f32 ramp
 *   inputs; THREADS as irt_set_threads, default 1)
 * Prints the best of 5 rounds' mean microseconds per call. */
#define _POSIX_C_SOURCE 200809L
#include "backend/runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    char err[1024];
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: runtime_call MODEL.irx DIM CALLS [THREADS]\n");
        return 2;
    }
    irt_set_threads(argc == 5 ? atoi(argv[4]) : 1);
    IrtArtifact *a = irt_load(argv[1], err, sizeof err);
    if (!a) {
        fprintf(stderr, "runtime_call: %s\n", err);
        return 1;
    }
    long dim = atol(argv[2]), calls = atol(argv[3]);
    uint32_t n_in = irt_num_inputs(a), n_out = irt_num_outputs(a);
    IrtTensor *in = calloc(n_in + 1, sizeof *in), *out = calloc(n_out + 1, sizeof *out);
    for (uint32_t i = 0; i < n_in; i++) {
        irt_input_info(a, i, &in[i]);
        size_t n = 1;
        for (uint32_t k = 0; k < in[i].rank; k++) {
            if (in[i].dims[k] < 0) in[i].dims[k] = dim;
            n *= (size_t)in[i].dims[k];
        }
        float *d = malloc(n * sizeof *d + 1);
        for (size_t e = 0; e < n; e++) d[e] = (float)(e % 13) / 13.0f;
        in[i].data = d;
    }
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        double t0 = now_us();
        for (long c = 0; c < calls; c++) {
            if (irt_run_n(a, n_in, in, n_out, out, err, sizeof err)) {
                fprintf(stderr, "runtime_call: %s\n", err);
                return 1;
            }
            for (uint32_t o = 0; o < n_out; o++) irt_tensor_free(&out[o]);
        }
        double us = (now_us() - t0) / (double)calls;
        best = us < best ? us : best;
    }
    printf("%.3f\n", best);
    for (uint32_t i = 0; i < n_in; i++) free(in[i].data);
    free(in), free(out);
    irt_free(a);
    return 0;
}
