/*
 * avx2_inline.h - small inline helpers shared by the files compiled with AVX2 flags
 * (x86/avx2.c, x86/avx2_q.c). Include only from such files: the intrinsics need -mavx2 -mfma
 * -mf16c.
 */
#ifndef SLATE_AVX2_INLINE_H
#define SLATE_AVX2_INLINE_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* The sum of the 8 lanes. */
INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The f16 at p (any alignment) as f32, exact. */
INLINE float f16_scalar(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

#endif
