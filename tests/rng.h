/* rng.h - the tests' random numbers (xorshift64), header-only so that both the cmocka helpers
 * (tests/unit/testutil.c) and the cmocka-free kernel checks (tests/kernels/kcheck.c, also
 * cross-built for AArch64) draw the same sequences from a seed. */
#ifndef SLATE_TESTS_RNG_H
#define SLATE_TESTS_RNG_H

#include <stdint.h>

static inline uint64_t slate_test_rand(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

/* uniform in [-1, 1) */
static inline float slate_test_randf(uint64_t *s) {
    return (float)((slate_test_rand(s) >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

#endif /* SLATE_TESTS_RNG_H */
