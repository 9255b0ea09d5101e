/*
 * avx512_vnni_tile.h - the prefill register tile that avx512_vnni.c (Q8_0, Q4, Q8_C, IQ4_NL) and
 * avx512_vnni_k.c (the K-quants, IQ4_XS) share: VT_PR rows of quantized x against VT_CT = 32
 * output columns whose weights are unpacked as u8 [inputs / 4][32 columns][4 inputs], so a
 * vpdpbusd of one zmm of them and a broadcast dword of x adds 4 inputs of 16 columns to one row.
 * The two files differ in how they unpack a K block and scale a chunk, not in this. Included
 * only by those two files (compiled with AVX-512 F/BW/VL/DQ and VNNI); static inline only.
 */
#ifndef SLATE_KERNELS_X86_AVX512_VNNI_TILE_H
#define SLATE_KERNELS_X86_AVX512_VNNI_TILE_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define VT_INLINE static inline __attribute__((always_inline))
#define VT_UNROLL _Pragma("GCC unroll 32")

enum {
    VT_PR = 4,  /* prefill rows per register tile */
    VT_CT = 32, /* prefill columns per tile (two zmm of int32) */
};

/* Packing 16 inputs of 16 columns into the tile, 4 columns at a time (the codes of 4 columns are
 * made just before they are needed, which kept iq4_xs's pack in registers: making all 16 first
 * was 4-7 % slower in its prefill): vt_cols4 gives lane j = dword j (inputs 4 j .. 4 j + 3) of
 * the 4 columns whose 16 u8 inputs are v[0..3]; vt_put16x16 then transposes the four results
 * across their 128-bit lanes, so that wp[i][co + c] = inputs 4 i .. 4 i + 3 of column c. */
VT_INLINE __m512i vt_cols4(const __m128i v[4]) {
    const __m512i tr = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    __m512i z = _mm512_castsi128_si512(v[0]);
    z = _mm512_inserti32x4(z, v[1], 1);
    z = _mm512_inserti32x4(z, v[2], 2);
    z = _mm512_inserti32x4(z, v[3], 3);
    return _mm512_permutexvar_epi32(tr, z);
}

VT_INLINE void vt_put16x16(uint8_t (*wp)[VT_CT][4], int co, const __m512i a[4]) {
    /* out[j] lane m = a[m] lane j */
    __m512i t0 = _mm512_shuffle_i32x4(a[0], a[1], 0x44), t1 = _mm512_shuffle_i32x4(a[0], a[1], 0xee);
    __m512i t2 = _mm512_shuffle_i32x4(a[2], a[3], 0x44), t3 = _mm512_shuffle_i32x4(a[2], a[3], 0xee);
    _mm512_storeu_si512((void *)&wp[0][co], _mm512_shuffle_i32x4(t0, t2, 0x88));
    _mm512_storeu_si512((void *)&wp[1][co], _mm512_shuffle_i32x4(t0, t2, 0xdd));
    _mm512_storeu_si512((void *)&wp[2][co], _mm512_shuffle_i32x4(t1, t3, 0x88));
    _mm512_storeu_si512((void *)&wp[3][co], _mm512_shuffle_i32x4(t1, t3, 0xdd));
}

/* a[r][h] += the int32 dots of the n inputs k, k + 1, ... (n a multiple of 4) of x row xr[r]
 * (u8 as vpdpbusd's signed operand: int8 x) with columns 16 h .. 16 h + 15 of wp, whose entry
 * i holds inputs k + 4 i .. k + 4 i + 3 of each of the 32 columns. */
VT_INLINE void vt_dots(const uint8_t (*wp)[VT_CT][4], int64_t n, const uint8_t *const xr[VT_PR],
                       int64_t k, __m512i a[VT_PR][2]) {
    VT_UNROLL for (int64_t j = 0; j < n / 4; j++) {
        __m512i w0 = _mm512_loadu_si512((const void *)wp[j][0]);
        __m512i w1 = _mm512_loadu_si512((const void *)wp[j][16]);
        VT_UNROLL for (int r = 0; r < VT_PR; r++) {
            int32_t xv;
            memcpy(&xv, xr[r] + k + 4 * j, 4);
            __m512i xb = _mm512_set1_epi32(xv);
            a[r][0] = _mm512_dpbusd_epi32(a[r][0], w0, xb);
            a[r][1] = _mm512_dpbusd_epi32(a[r][1], w1, xb);
        }
    }
}

/* acc[r][h] += (float)a[r][h] * d[16 h ..] (a chunk's int32 dots times its 32 column scales). */
VT_INLINE void vt_scale_add(const float *d, __m512i a[VT_PR][2], __m512 acc[VT_PR][2]) {
    __m512 d0 = _mm512_loadu_ps(d), d1 = _mm512_loadu_ps(d + 16);
    VT_UNROLL for (int r = 0; r < VT_PR; r++) {
        acc[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[r][0]), d0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[r][1]), d1, acc[r][1]);
    }
}

/* out[r][h] += acc[r][h] * dx[r] (a group's sum times its x scale per row). */
VT_INLINE void vt_group_add(const float dx[VT_PR], __m512 acc[VT_PR][2], __m512 out[VT_PR][2]) {
    VT_UNROLL for (int r = 0; r < VT_PR; r++) {
        __m512 d = _mm512_set1_ps(dx[r]);
        out[r][0] = _mm512_fmadd_ps(acc[r][0], d, out[r][0]);
        out[r][1] = _mm512_fmadd_ps(acc[r][1], d, out[r][1]);
    }
}

VT_INLINE __mmask16 vt_mask16(int64_t n) { /* the first n lanes, n clamped to [0, 16] */
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* The y strip of one column tile: columns [c0, c0 + nc) of y ([n_rows][n_out] f32), in row
 * tiles of VT_PR; cm masks those columns in the two halves. A K block's pass over it starts
 * each row tile from the bias bv (the first block; zero without a bias) or from what earlier
 * blocks left in y (y0 = y + c0), and stores it back. */
VT_INLINE void vt_strip_bias(__m512 bv[2], const float *bias, bool first, int64_t c0,
                             const __mmask16 cm[2]) {
    for (int h = 0; h < 2; h++)
        bv[h] = bias && first ? _mm512_maskz_loadu_ps(cm[h], bias + c0 + 16 * h) : _mm512_setzero_ps();
}

/* out = rows [r0, r0 + nr) of the strip (rows from nr on: the bias, never stored). */
VT_INLINE void vt_strip_load(__m512 out[VT_PR][2], const float *y0, int64_t n_out, int64_t r0,
                             int nr, bool first, const __m512 bv[2], const __mmask16 cm[2]) {
    VT_UNROLL for (int r = 0; r < VT_PR; r++) {
        if (first || r >= nr) {
            out[r][0] = bv[0];
            out[r][1] = bv[1];
        } else {
            out[r][0] = _mm512_maskz_loadu_ps(cm[0], y0 + (r0 + r) * n_out);
            out[r][1] = _mm512_maskz_loadu_ps(cm[1], y0 + (r0 + r) * n_out + 16);
        }
    }
}

VT_INLINE void vt_strip_store(float *y0, int64_t n_out, int64_t r0, int nr, const __mmask16 cm[2],
                              __m512 out[VT_PR][2]) {
    for (int r = 0; r < nr; r++)
        for (int h = 0; h < 2; h++)
            _mm512_mask_storeu_ps(y0 + (r0 + r) * n_out + 16 * h, cm[h], out[r][h]);
}

#endif
