/* bench_util.h - what the A/B harnesses in bench/ share: a monotonic clock and a seeded
 * xorshift generator (header-only; each harness is one program). */
#ifndef SLATE_BENCH_UTIL_H
#define SLATE_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC (the harness defines _POSIX_C_SOURCE 200809L first). */
static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* xorshift64: the next value of the state *r (nonzero). */
static inline uint64_t rnd(uint64_t *r) {
    *r ^= *r << 13, *r ^= *r >> 7, *r ^= *r << 17;
    return *r;
}

/* Uniform in [-0.5, 0.5). */
static inline float rndf(uint64_t *r) { return (float)(rnd(r) >> 40) / (1 << 24) - 0.5f; }

#endif
