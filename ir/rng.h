/* The random generator of the random ops (RandomUniform, RandomNormal, their Like forms,
 * Bernoulli, Multinomial): xoshiro256** seeded through splitmix64 from the op's `seed` attribute
 * (its double's bits) or, without one, from the node. Header-only, so the interpreter and the
 * runtime (which links nothing of ir/) draw the same numbers and compiled code matches the
 * interpreter.
 */
#ifndef IRTOOL_IR_RNG_H
#define IRTOOL_IR_RNG_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct IrRng {
    uint64_t s[4];
} IrRng;

static inline uint64_t ir_rng_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t ir_rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t ir_rng_next(IrRng *r) {
    uint64_t res = ir_rng_rotl(r->s[1] * 5, 7) * 9, t = r->s[1] << 17;
    r->s[2] ^= r->s[0];
    r->s[3] ^= r->s[1];
    r->s[1] ^= r->s[2];
    r->s[0] ^= r->s[3];
    r->s[2] ^= t;
    r->s[3] = ir_rng_rotl(r->s[3], 45);
    return res;
}

/* The seed: the `seed` attribute's bits when the op has one, else one derived from the node. */
static inline uint64_t ir_rng_seed(int has_seed, double seed, uint64_t node) {
    uint64_t x;
    if (has_seed) memcpy(&x, &seed, sizeof x);
    else x = 0x1d0c5eedull ^ (node << 32);
    return x;
}

static inline void ir_rng_init(IrRng *r, uint64_t x) {
    for (int i = 0; i < 4; i++) r->s[i] = ir_rng_splitmix64(&x);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double ir_rng_uniform(IrRng *r) { return (double)(ir_rng_next(r) >> 11) * 0x1.0p-53; }

/* Standard normal (Box-Muller, one value per two uniforms). */
static inline double ir_rng_normal(IrRng *r) {
    double u1 = 1.0 - ir_rng_uniform(r), u2 = ir_rng_uniform(r); /* u1 in (0, 1] */
    return sqrt(-2.0 * log(u1)) * cos(2 * 3.14159265358979323846 * u2);
}

#endif
