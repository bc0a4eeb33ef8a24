/* gpu_bench: timing driver for bench/gpu/run.sh, linked against libirtool-runtime only (no LLVM,
 * no IR libraries), so its start-up is what a serving process pays.
 *   gpu_bench time ARTIFACT [REPEAT]  mean compute time of one run (CUDA events around the replayed
 *                                     steps; inputs copied in once), after 3 warm-up runs
 *   gpu_bench cold ARTIFACT           load + one run, each timed by the monotonic clock; for a
 *                                     CUDA artifact the CUDA context is made first and timed
 *                                     apart (cuInit + the primary context, which the load reuses)
 * Inputs are generated per dtype (f32 in [-1, 1), bf16 likewise, f8e4m3fn finite bytes). */
#include "backend/runtime/runtime.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void fill(const IrtArtifact *a, IrtTensor *t, uint64_t seed) {
    size_t n = 1, es = irt_dtype_size(a, t->dtype);
    for (uint32_t k = 0; k < t->rank; k++) n *= (size_t)t->dims[k];
    t->data = malloc(n * es + 1);
    if (!t->data) return;
    const char *dt = irt_dtype_name(a, t->dtype);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float v = (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
        if (!strcmp(dt, "f32")) ((float *)t->data)[i] = v;
        else if (!strcmp(dt, "bf16")) {
            uint32_t b;
            memcpy(&b, &v, 4);
            ((uint16_t *)t->data)[i] = (uint16_t)(b >> 16);
        } else if (!strcmp(dt, "f8e4m3fn")) ((uint8_t *)t->data)[i] = (uint8_t)(s & 0xf7); /* never NaN (x7f/xff) */
        else memset((char *)t->data + i * es, 0, es);
    }
}

/* cuInit and device 0's primary context, retained until exit so that irt_load finds it made:
 * the milliseconds it took, or -1 when the driver cannot be loaded or fails. */
static double make_cuda_context(void) {
    double t0 = now_ms();
    void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!dl) return -1;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(dl, "cuInit");
    int (*dev)(int *, int) = (int (*)(int *, int))dlsym(dl, "cuDeviceGet");
    int (*retain)(void **, int) = (int (*)(void **, int))dlsym(dl, "cuDevicePrimaryCtxRetain");
    int d = 0;
    void *ctx = NULL;
    if (!init || !dev || !retain || init(0) || dev(&d, 0) || retain(&ctx, d)) return -1;
    return now_ms() - t0;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "time") && strcmp(argv[1], "cold"))) {
        fprintf(stderr, "usage: gpu_bench time ARTIFACT [REPEAT] | gpu_bench cold ARTIFACT\n");
        return 2;
    }
    bool cold = !strcmp(argv[1], "cold");
    char err[1024];
    double t_ctx = 0;
    char *man = cold ? irt_read_manifest(argv[2], err, sizeof err) : NULL;
    if (man && strstr(man, "\ntriple nvptx")) t_ctx = make_cuda_context();
    free(man);
    double t0 = now_ms();
    IrtArtifact *a = irt_load(argv[2], err, sizeof err);
    double t_load = now_ms() - t0;
    if (!a) {
        fprintf(stderr, "gpu_bench: %s: %s\n", argv[2], err);
        return 1;
    }
    uint32_t ni = irt_num_inputs(a), no = irt_num_outputs(a);
    IrtTensor *in = calloc(ni + 1, sizeof *in), *out = calloc(no + 1, sizeof *out);
    for (uint32_t i = 0; i < ni; i++) {
        irt_input_info(a, i, &in[i]);
        fill(a, &in[i], i + 1);
    }
    int rc = 0;
    if (cold) {
        double t1 = now_ms();
        rc = irt_run(a, in, out, err, sizeof err);
        printf("context_ms %.3f load_ms %.3f first_run_ms %.3f\n", t_ctx, t_load, now_ms() - t1);
    } else {
        uint32_t repeat = argc > 3 ? (uint32_t)atoi(argv[3]) : 20;
        double ms = 0;
        rc = irt_run_timed(a, in, out, 3, &ms, err, sizeof err);
        for (uint32_t i = 0; !rc && i < no; i++) free(out[i].data);
        if (!rc) rc = irt_run_timed(a, in, out, repeat, &ms, err, sizeof err);
        if (!rc) printf("compute_ms %.6f repeat %u\n", ms, repeat);
    }
    if (rc) fprintf(stderr, "gpu_bench: run failed: %s\n", err);
    for (uint32_t i = 0; !rc && i < no; i++) free(out[i].data);
    for (uint32_t i = 0; i < ni; i++) free(in[i].data);
    free(in);
    free(out);
    irt_free(a);
    return rc ? 1 : 0;
}
