/*
 * avx512_pal.c - AVX-512 matmul of palettized weights (dtype PAL, kernels/quant.h), the same
 * signature and result as the reference in kernels/ref/quant.c up to summation order.
 *
 * Key idea: a group's table of 2^N <= 16 centroids fits one zmm register as f32, so decoding 16
 * weights is: broadcast the 8 (4-bit) or 4 (2-bit) index bytes, shift each lane's index down
 * with vpsrlvd, and look the 16 weights up with vpermps (_mm512_permutexvar_ps), which reads
 * only the low 4 bits of each lane, so no mask is needed: for 2 bits the 4 centroids are
 * repeated to fill 16 entries. One FMA with x follows. At 4 bits the kernel reads 0.5 byte per
 * weight and is bandwidth-bound at one query row.
 *
 * Everything else (bits 3, 6 and 8; several query rows) goes to the PAL matmul the table had
 * before this file's (x86/avx2.c's on any CPU that reaches here): it decodes every width in
 * SIMD and tiles rows of x, and it was faster than this file's former paths on the target VM
 * (one thread, 5632 x 2048, one x row: 3/6/8 bits 0.7-3.4 ms vs 38-39 ms with the scalar
 * decode; 64 x rows, 2048 x 2048: 4 bits 9.8 vs 11.3 ms, 3 bits 10.0 vs 24.6 ms). Row tails
 * that are not a whole 16 use the scalar decode.
 *
 * On CPUs with AVX-512 VBMI and VNNI the avx512_vnni table runs x86/avx512_vbmi.c instead
 * (u8 tables, int8 x, every bit width in SIMD, prefill as register tiles); this file stays the
 * avx512 table's and the path of AVX-512 CPUs without VBMI.
 */
#include "core/core.h"
#include "kernels/kernels.h"

#include <immintrin.h>
#include <string.h>

/* The 16-lane f32 table of row o's group: 4 bits as stored, 2 bits repeated 4 times. */
static __m512 load_lut(const slate__wmat *w, int64_t o) {
    const uint16_t *t = w->lut + (size_t)(o / w->group) * ((size_t)1 << w->bits);
    if (w->bits == 4) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)t));
    __m512 four = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(0xF, t));
    return _mm512_permutexvar_ps(_mm512_set_epi32(3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0),
                                 four);
}

/* Weights i .. i+15 of a row (i a multiple of 16, i + 16 <= n_in) as f32. */
static inline __m512 decode16(const uint8_t *row, int64_t i, int32_t bits, __m512 lut,
                              __m512i sel4, __m512i sh4, __m512i sh2) {
    __m512i idx;
    if (bits == 4) {
        uint64_t q;
        memcpy(&q, row + i / 2, 8);
        idx = _mm512_srlv_epi32(_mm512_permutexvar_epi32(sel4, _mm512_set1_epi64((long long)q)),
                                sh4);
    } else {
        uint32_t q;
        memcpy(&q, row + i / 4, 4);
        idx = _mm512_srlv_epi32(_mm512_set1_epi32((int)q), sh2);
    }
    return _mm512_permutexvar_ps(idx, lut);
}

/* Scalar decode of element i (the tails), as the reference does it. */
static float deq_tail(const slate__wmat *w, const uint8_t *row, int64_t o, int64_t i) {
    size_t bit = (size_t)i * (size_t)w->bits, byte = bit / 8;
    unsigned v = row[byte];
    if (byte + 1 < w->row_bytes) v |= (unsigned)row[byte + 1] << 8;
    unsigned idx = (v >> (bit % 8)) & ((1u << w->bits) - 1);
    return slate__f16_to_f32(w->lut[(size_t)(o / w->group) * ((size_t)1 << w->bits) + idx]);
}

/* One query row, 4 or 2 bits: decode and FMA in registers, two accumulators. */
static float row_dot_fast(const slate__wmat *w, int64_t o, const float *x) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    const __m512 lut = load_lut(w, o);
    const __m512i sel4 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i sh4 = _mm512_set_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0);
    const __m512i sh2 = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    int64_t n = w->n_in, i = 0;
    int32_t bits = w->bits;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(decode16(row, i, bits, lut, sel4, sh4, sh2), _mm512_loadu_ps(x + i),
                             a0);
        a1 = _mm512_fmadd_ps(decode16(row, i + 16, bits, lut, sel4, sh4, sh2),
                             _mm512_loadu_ps(x + i + 16), a1);
    }
    if (i + 16 <= n) {
        a0 = _mm512_fmadd_ps(decode16(row, i, bits, lut, sel4, sh4, sh2), _mm512_loadu_ps(x + i),
                             a0);
        i += 16;
    }
    float acc = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; i++) acc += deq_tail(w, row, o, i) * x[i];
    return acc;
}

/* The table's PAL matmul before this file's (set once, by slate__avx512_pal_fill, at
 * dispatch initialization, before any call). */
static slate__matmul_fn g_other;

/* y[r][o] = W[o][:] . x[r][:] + b[o] for r < n_rows, o in [o0, o1). */
static void matmul_pal(float *y, const float *x, const void *xq, const slate__wmat *w,
                       const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    if (n_rows != 1 || (w->bits != 4 && w->bits != 2)) {
        g_other(y, x, xq, w, bias, n_rows, o0, o1);
        return;
    }
    for (int64_t o = o0; o < o1; o++) y[o] = row_dot_fast(w, o, x) + (bias ? bias[o] : 0.0f);
}

void slate__avx512_pal_fill(slate__kernels *k) {
    g_other = k->matmul[SLATE_DTYPE_PAL];
    k->matmul[SLATE_DTYPE_PAL] = matmul_pal;
}
