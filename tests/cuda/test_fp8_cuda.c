/* ir/dtype.c's FP8 conversions against the CUDA toolkit's host-side conversions
 * (__nv_cvt_float_to_fp8 / __nv_cvt_fp8_to_halfraw from cuda_fp8.h, compiled as C): all 256
 * codes decoded, then every code value, every midpoint between neighbours and one f32 ulp either
 * side, zeros, infinities, NaNs and 10 million more f32 values (random bit patterns and values in
 * the FP8 ranges) encoded, for E4M3 and E5M2, with __NV_SATFINITE and __NV_NOSAT: bit for bit.
 * Built only when /usr/local/cuda/include/cuda_fp8.h exists; needs no GPU. Exit 0 when equal.
 */
#include "ir/ir.h"

#include <cuda_fp8.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_RANDOM 10000000u

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

typedef struct Fmt {
    const char *name;
    __nv_fp8_interpretation_t interp;
    bool e4m3;
} Fmt;

static const Fmt FMTS[2] = {{"e4m3", __NV_E4M3, true}, {"e5m2", __NV_E5M2, false}};

static float ir_decode(const Fmt *f, uint8_t v) { return f->e4m3 ? ir_f8e4m3fn_to_f32(v) : ir_f8e5m2_to_f32(v); }
static uint8_t ir_encode(const Fmt *f, float x, bool sat) {
    return f->e4m3 ? ir_f32_to_f8e4m3fn(x, sat) : ir_f32_to_f8e5m2(x, sat);
}

static unsigned long long failures, n_values;

static void check_one(float x) {
    n_values++;
    for (int k = 0; k < 2; k++)
        for (int sat = 0; sat < 2; sat++) {
            const Fmt *f = &FMTS[k];
            uint8_t want = __nv_cvt_float_to_fp8(x, sat ? __NV_SATFINITE : __NV_NOSAT, f->interp);
            uint8_t got = ir_encode(f, x, sat != 0);
            if (want != got && failures++ < 10)
                fprintf(stderr, "%s sat=%d: f32 0x%08x (%.9g): CUDA 0x%02x, irtool 0x%02x\n", f->name, sat,
                        (unsigned)f_bits(x), (double)x, want, got);
        }
}

static void check_around(float x) {
    float v[3] = {nextafterf(x, -INFINITY), x, nextafterf(x, INFINITY)};
    for (int i = 0; i < 3; i++) {
        check_one(v[i]);
        check_one(-v[i]);
    }
}

int main(void) {
    for (int k = 0; k < 2; k++) {
        const Fmt *f = &FMTS[k];
        for (int v = 0; v < 256; v++) {
            __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)v, f->interp);
            float want = ir_f16_to_f32(h.x), got = ir_decode(f, (uint8_t)v);
            bool same = isnan(want) ? isnan(got) : f_bits(want) == f_bits(got);
            if (!same && failures++ < 10)
                fprintf(stderr, "%s decode 0x%02x: CUDA %.9g, irtool %.9g\n", f->name, v, (double)want, (double)got);
        }
        /* every finite code, midpoints to the next code (ties), and one ulp either side */
        float prev = -1;
        for (int v = 0; v < 128; v++) {
            float c = ir_decode(f, (uint8_t)v);
            if (isnan(c)) continue;
            check_around(c);
            if (prev >= 0 && isfinite(c)) check_around((prev + c) / 2);
            prev = c;
        }
    }
    static const float extra[] = {0.0f, FLT_MIN, FLT_TRUE_MIN, FLT_MAX, 1e30f, 1e-30f, 448.0f, 464.0f, 480.0f,
                                  57344.0f, 61440.0f, 65536.0f, 1.0f, 0x1p-10f, 0x1p-17f, 0x1p-9f, 0x1p-16f};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) check_around(extra[i]);
    static const uint32_t specials[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu,
                                        0xFFC00000u, 0xFF800001u, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) check_one(bits_f(specials[i]));
    for (uint32_t u = 0; u < 64; u++) {
        check_one(bits_f(u));
        check_one(bits_f(0x80000000u | u));
        check_one(bits_f(0x00800000u - u));
    }
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < N_RANDOM; i++) {
        uint64_t x = rng_next(&s);
        uint32_t u;
        if (i % 2 == 0) {
            u = (uint32_t)(x >> 16);
        } else {
            int e = (int)((x >> 40) % 46) - 24;
            u = (uint32_t)((x & 1) << 31) | (uint32_t)(127 + e) << 23 | (uint32_t)((x >> 1) & 0x7FFFFF);
            if ((x >> 60) == 0) u &= ~0xFFFFu;
        }
        check_one(bits_f(u));
    }
    printf("test_fp8_cuda: %llu f32 values x {e4m3, e5m2} x {satfinite, nosat}, 512 decodes: %llu mismatches\n",
           n_values, failures);
    return failures ? 1 : 0;
}
