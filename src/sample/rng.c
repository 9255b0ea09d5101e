/*
 * rng.c - the sampler's pseudo-random numbers: xoshiro256** 1.0 (D. Blackman, S. Vigna,
 * "Scrambled linear pseudorandom number generators", 2018; reference code at
 * prng.di.unimi.it), seeded by running splitmix64 from the user's 64-bit seed, as its authors
 * recommend. Key idea: small, fast, and fully determined by its 256-bit state, which lives in
 * the caller (the sampler), so there is no global RNG. Invariant: the state is never all zero;
 * splitmix64 cannot produce four zero words in a row, and slate__sampler_rng_set refuses them.
 */
#include "sample/sample.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void slate__rng_seed(uint64_t state[4], uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) state[i] = splitmix64(&x);
}

uint64_t slate__rng_next(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double slate__rng_uniform(uint64_t state[4]) {
    /* 53 bits fill a double's mantissa exactly, so every value is a multiple of 2^-53 < 1. */
    return (double)(slate__rng_next(state) >> 11) * 0x1.0p-53;
}
