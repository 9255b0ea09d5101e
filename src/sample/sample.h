/*
 * sample.h - internals of the sampler module shared with other modules and tests: the seeded
 * RNG (xoshiro256**) and access to a sampler's RNG state, which state save/restore needs.
 * Internal: not part of the public API.
 */
#ifndef SLATE_SAMPLE_H
#define SLATE_SAMPLE_H

#include "core/core.h"

/* ---- RNG: xoshiro256** 1.0 (Blackman & Vigna), seeded through splitmix64 ----------------- */
/* The state is four 64-bit words and is never all zero (that is xoshiro's one fixed point). */

/* Fills state from a 64-bit seed through splitmix64. Every seed, 0 included, gives a valid
 * state; the same seed always gives the same state. */
void slate__rng_seed(uint64_t state[4], uint64_t seed);
/* Next 64 random bits; advances state. */
uint64_t slate__rng_next(uint64_t state[4]);
/* Uniform double in [0, 1) from the top 53 bits of one slate__rng_next. */
double slate__rng_uniform(uint64_t state[4]);

/* Copies the sampler's RNG state into out (s not NULL). */
void slate__sampler_rng_get(const slate_sampler *s, uint64_t out[4]);
/* Sets the sampler's RNG state, e.g. one saved with slate__sampler_rng_get, so later draws
 * repeat the saved ones. Returns OK, or E_INVALID_ARG (NULL, or an all-zero state, which would
 * make xoshiro256** return 0 forever); on failure the sampler is unchanged. */
slate_status slate__sampler_rng_set(slate_sampler *s, const uint64_t in[4]);

/* The top-p selection on its own (the sampler's step; tests drive it directly). Among ids[0..n)
 * (distinct token ids, n >= 1), ranked by logits[id] descending then id ascending, moves the
 * fewest best-ranked whose weights w[id] (>= 0) sum to at least `need` (> 0) into ids[0..m)
 * (in no particular order) and returns m; all n if their sum falls short. Quickselect on the
 * mass, expected O(n); after max_rounds partitions a heap finishes the job (the sampler passes
 * 64, a bound only crafted input reaches; tests pass small values to exercise the heap).
 * Allocates nothing. */
int32_t slate__sample_nucleus(int32_t *ids, int32_t n, const float *logits, const float *w,
                              double need, int max_rounds);

#endif /* SLATE_SAMPLE_H */
