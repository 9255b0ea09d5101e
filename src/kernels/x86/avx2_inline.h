/*
 * avx2_inline.h - small inline helpers shared by the files compiled with AVX2 flags
 * (x86/avx2.c, x86/avx2_q.c, x86/avx2_k.c). Include only from such files: the intrinsics need
 * -mavx2 -mfma -mf16c.
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

/* The 16 IQ4_NL / IQ4_XS levels (kernels/quant.h's slate__iq4_levels) in both 128-bit lanes, for
 * iq4_unit's lookup. */
INLINE __m256i iq4_levels(const int8_t *levels) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)levels));
}

/* The 32 int8 weights (levels, before the scale) of an IQ4_NL block or an IQ4_XS sub-block whose
 * 16 nibble bytes are at qs (any alignment), in input order: the low nibbles are inputs 0-15,
 * the high ones 16-31. The 16 bytes go to both lanes (a broadcast load, no shuffle), the high
 * lane's shifted right by 4, and one vpshufb maps each nibble to its level. */
INLINE __m256i iq4_unit(__m256i levels, const uint8_t *qs) {
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    v = _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    return _mm256_shuffle_epi8(levels, _mm256_and_si256(v, _mm256_set1_epi8(15)));
}

/* The f16 at p (any alignment) as f32, exact. */
INLINE float f16_scalar(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* Rows r0 .. r0+R-1 of avx2_q.c's quantized x (xs bytes each: int8 q[units * 32], f32
 * dx[units], f32 hs[units * 2]): their q, dx and hs, and a zero accumulator each. */
INLINE void x_rows(int R, const uint8_t *xq, size_t xs, int64_t r0, int64_t units,
                   const int8_t *xr[4], const float *dx[4], const float *hs[4], __m256 acc[4]) {
    UNROLL for (int r = 0; r < R; r++) {
        xr[r] = (const int8_t *)(xq + (size_t)(r0 + r) * xs);
        dx[r] = (const float *)(xr[r] + units * 32);
        hs[r] = dx[r] + units;
        acc[r] = _mm256_setzero_ps();
    }
}

#endif
