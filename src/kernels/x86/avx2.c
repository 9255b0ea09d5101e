/*
 * avx2.c - AVX2 + FMA + F16C variants of the kernel table (same signatures and meaning as
 * kernels/ref/ref.c, which is the specification; only this file is compiled with -mavx2 -mfma
 * -mf16c, and dispatch.c installs it only when the CPU has all three).
 *
 * matmul: y[r][o] = W[o] . x[r] + b[o], as dot products of 8-float vectors.
 *   - Decode (n_rows == 1) is bound by weight bandwidth: each weight row is streamed once,
 *     one row at a time from start to end, with four independent accumulators so the FMA
 *     latency never limits the stream, and a software prefetch PF_BYTES ahead.
 *   - Prefill (n_rows > 1) uses a 4x2 register tile: each weight chunk is converted to f32
 *     once and used for 4 rows of x, each x chunk for 2 weight rows (8 accumulators, 2 weight
 *     and 1 x register). Around the tile, cache blocking: MC rows of x, KB inputs, OB outputs,
 *     so an OB x KB weight block (<= 32 KiB as f32) stays in L1 while every row of the row block
 *     passes over it, and the MC x KB slab of x stays in L2 across output blocks. Partial sums
 *     of later K blocks are added to y, so the summation order differs from ref (see tests).
 *   - Tails: the last n_in % 8 inputs use masked loads (f32) or a zero-padded copy (f16/bf16);
 *     odd row and output counts use narrower tiles. Nothing is read outside the arrays.
 * attention: the query heads of one kv head run together (up to 8 per pass) over blocks of 8
 * cache positions: each block's K and V rows are converted to f32 once into L1, each head's 8
 * scores are 8 row dot products and one transposing horizontal add, then one online-softmax
 * update of every head at once (lane h of the running max, sum and rescale is head h; exp is a
 * vectorized polynomial, exp8, ~2 ulp), then P (heads x 8) times V (8 x head_dim) in register
 * tiles of 4 heads x 2 vectors.
 * For ranges too long for L2 the next block's rows are prefetched. Positions whose score is
 * -inf or NaN are skipped exactly as in ref; all -inf gives out = 0. An int8 cache
 * (attention_i8) runs the same kernel, each row dequantized (scale * q) as it is converted.
 * Gemma 2's score cap runs on each head's 8 scores at once with a vectorized tanh (tanh8),
 * which the softcap kernel (the final logit cap) uses too.
 * Compressed weights: PAL dequantized to f32 on the fly (see below); Q8_0, Q4 and Q8_C matmuls
 * are integer, in x86/avx2_q.c.
 * rms_norm, to_f32: straightforward 8-wide loops; f16 conversion is exact (vcvtph2ps).
 */
#include "kernels/kernels.h"
#include "kernels/x86/avx2_inline.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>


/* ---- loads ------------------------------------------------------------------------------- */

/* Lane masks for _mm256_maskload_ps: the first n lanes of &g_tail[8 - n] are all ones. */
static const int32_t g_tail[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

INLINE __m256i tail_mask(int64_t n) {
    return _mm256_loadu_si256((const __m256i *)(g_tail + 8 - n));
}

INLINE __m256 bf16x8_to_f32(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 8 weights at element i of a row, as f32. */
INLINE __m256 load_w8(slate_dtype dt, const void *w, int64_t i) {
    if (dt == SLATE_DTYPE_F32) return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    return dt == SLATE_DTYPE_F16 ? _mm256_cvtph_ps(h) : bf16x8_to_f32(h);
}

/* The n < 8 weights at element i, zero-padded to 8 lanes. */
INLINE __m256 load_w8_tail(slate_dtype dt, const void *w, int64_t i, int64_t n) {
    if (dt == SLATE_DTYPE_F32) return _mm256_maskload_ps((const float *)w + i, tail_mask(n));
    uint16_t t[8] = {0};
    memcpy(t, (const uint16_t *)w + i, (size_t)n * sizeof(uint16_t));
    __m128i h = _mm_loadu_si128((const __m128i *)t);
    return dt == SLATE_DTYPE_F16 ? _mm256_cvtph_ps(h) : bf16x8_to_f32(h);
}

/* ---- matmul ------------------------------------------------------------------------------ */

/* Decode reads each weight row once from DRAM, one row at a time (one sequential stream per
 * thread; four interleaved rows were ~25 % slower, see PF_BYTES in avx512.c), with a software
 * prefetch PF_BYTES ahead. Not used in prefill, where the weight block is already in L1. */
enum { PF_BYTES = 1024 };

/* acc[r][c] += W[c][i..i+8) * x[r][i..i+8) */
INLINE void step(slate_dtype dt, int R, int O, __m256 acc[4][4], const float *const xr[4],
                 const void *const wr[4], int64_t i) {
    __m256 wv[4];
    UNROLL for (int c = 0; c < O; c++) wv[c] = load_w8(dt, wr[c], i);
    UNROLL for (int r = 0; r < R; r++) {
        __m256 xv = _mm256_loadu_ps(xr[r] + i);
        UNROLL for (int c = 0; c < O; c++) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
    }
}

/* The R x O tile y[r0..r0+R)[o..o+O) over inputs [k0, k1): first sets y = sum + bias, later K
 * blocks add their partial sums. R, O and dt are compile-time constants at every call site, so
 * the unrolled accumulator arrays live in registers. */
INLINE void tile(slate_dtype dt, int R, int O, float *y, const float *x, const void *w,
                 const float *bias, int64_t n_in, int64_t n_out, int64_t r0, int64_t o, int64_t k0,
                 int64_t k1, bool first) {
    __m256 acc[4][4];
    const float *xr[4];
    const void *wr[4];
    UNROLL for (int r = 0; r < R; r++) xr[r] = x + (r0 + r) * n_in;
    UNROLL for (int c = 0; c < O; c++) {
        wr[c] = dt == SLATE_DTYPE_F32 ? (const void *)((const float *)w + (o + c) * n_in)
                                      : (const void *)((const uint16_t *)w + (o + c) * n_in);
    }
    UNROLL for (int r = 0; r < R; r++) {
        UNROLL for (int c = 0; c < O; c++) acc[r][c] = _mm256_setzero_ps();
    }
    int64_t i = k0;
    for (; i + 8 <= k1; i += 8) step(dt, R, O, acc, xr, wr, i);
    if (i < k1) {
        __m256 wv[4];
        __m256i m = tail_mask(k1 - i);
        UNROLL for (int c = 0; c < O; c++) wv[c] = load_w8_tail(dt, wr[c], i, k1 - i);
        UNROLL for (int r = 0; r < R; r++) {
            __m256 xv = _mm256_maskload_ps(xr[r] + i, m);
            UNROLL for (int c = 0; c < O; c++) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
        }
    }
    UNROLL for (int r = 0; r < R; r++) {
        UNROLL for (int c = 0; c < O; c++) {
            float *dst = y + (r0 + r) * n_out + o + c;
            float base = first ? (bias ? bias[o + c] : 0.0f) : *dst;
            *dst = base + hsum8(acc[r][c]);
        }
    }
}

/* Row block, K block and output block: see the file comment. MC * KB * 4 bytes of x (256 KiB)
 * fit in L2; OB * KB weights (16 KiB f16, 32 KiB f32) fit in L1 next to a 4-row x chunk. */
enum { MC = 128, KB = 512, OB = 16 };

/* All full 2-wide output tiles of [ob, oe) for R rows from row r, then the leftover output. */
#define TILE_ROW(R)                                                                                \
    do {                                                                                           \
        for (; o + 2 <= oe; o += 2)                                                                \
            tile(dt, R, 2, y, x, w, bias, n_in, n_out, r, o, kb, ke, first);                \
        if (o < oe) tile(dt, R, 1, y, x, w, bias, n_in, n_out, r, o, kb, ke, first);        \
    } while (0)

/* Decode: y[o] = W[o] . x (+ bias[o]) for o in [o0, o1), each row read once from start to end;
 * four accumulators of 8 inputs hide the FMA latency. */
INLINE void decode_rows(slate_dtype dt, float *y, const float *x, const void *w, const float *bias,
                        int64_t n_in, int64_t o0, int64_t o1) {
    const int64_t es = dt == SLATE_DTYPE_F32 ? 4 : 2;
    for (int64_t o = o0; o < o1; o++) {
        const void *wr = (const char *)w + o * n_in * es;
        const char *pf = (const char *)wr + PF_BYTES;
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                         _mm256_setzero_ps()};
        int64_t i = 0;
        for (; i + 32 <= n_in; i += 32) {
            /* 32 inputs are 64 bytes (f16, bf16) or 128 (f32); prefetches never fault. */
            UNROLL for (int64_t b = 0; b < 32 * es; b += 64) _mm_prefetch(pf + i * es + b, _MM_HINT_T0);
            UNROLL for (int u = 0; u < 4; u++)
                acc[u] = _mm256_fmadd_ps(load_w8(dt, wr, i + 8 * u), _mm256_loadu_ps(x + i + 8 * u),
                                         acc[u]);
        }
        for (; i + 8 <= n_in; i += 8)
            acc[0] = _mm256_fmadd_ps(load_w8(dt, wr, i), _mm256_loadu_ps(x + i), acc[0]);
        if (i < n_in)
            acc[1] = _mm256_fmadd_ps(load_w8_tail(dt, wr, i, n_in - i),
                                     _mm256_maskload_ps(x + i, tail_mask(n_in - i)), acc[1]);
        __m256 s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        y[o] = (bias ? bias[o] : 0.0f) + hsum8(s);
    }
}

INLINE void matmul_any(slate_dtype dt, float *y, const float *x, const void *w, const float *bias,
                       int64_t n_rows, int64_t n_in, int64_t n_out, int64_t o0, int64_t o1) {
    if (n_rows == 1) {
        decode_rows(dt, y, x, w, bias, n_in, o0, o1);
        return;
    }
    for (int64_t rb = 0; rb < n_rows; rb += MC) {
        int64_t re = rb + MC < n_rows ? rb + MC : n_rows;
        int64_t kb = 0;
        do { /* at least once, so n_in == 0 still writes the bias */
            int64_t ke = kb + KB < n_in ? kb + KB : n_in;
            bool first = kb == 0;
            for (int64_t ob = o0; ob < o1; ob += OB) {
                int64_t oe = ob + OB < o1 ? ob + OB : o1;
                for (int64_t r = rb; r < re; r += 4) {
                    int64_t o = ob;
                    switch (re - r) {
                    case 1: TILE_ROW(1); break;
                    case 2: TILE_ROW(2); break;
                    case 3: TILE_ROW(3); break;
                    default: TILE_ROW(4); break;
                    }
                }
            }
            kb = ke;
        } while (kb < n_in);
    }
}

static void matmul_f32(float *y, const float *x, const void *xq, const slate__wmat *w,
                       const float *b, int64_t r, int64_t o0, int64_t o1) {
    matmul_any(SLATE_DTYPE_F32, y, x, w->data, b, r, w->n_in, w->n_out, o0, o1);
}
static void matmul_f16(float *y, const float *x, const void *xq, const slate__wmat *w,
                       const float *b, int64_t r, int64_t o0, int64_t o1) {
    matmul_any(SLATE_DTYPE_F16, y, x, w->data, b, r, w->n_in, w->n_out, o0, o1);
}
static void matmul_bf16(float *y, const float *x, const void *xq, const slate__wmat *w,
                        const float *b, int64_t r, int64_t o0, int64_t o1) {
    matmul_any(SLATE_DTYPE_BF16, y, x, w->data, b, r, w->n_in, w->n_out, o0, o1);
}

/* ---- to_f32 ------------------------------------------------------------------------------ */

static void to_f32_f16(float *d, const void *s, int64_t n) {
    const uint16_t *h = s;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) d[i] = _cvtsh_ss(h[i]);
}

/* vcvtps2ph with round-to-nearest-even: IEEE conversion, so every non-NaN value gives
 * slate__f32_to_f16's bits (a NaN keeps the top of its payload, quiet). */
static void to_f16(uint16_t *d, const float *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = _cvtss_sh(s[i], _MM_FROUND_TO_NEAREST_INT);
}

static void to_f32_bf16(float *d, const void *s, int64_t n) {
    const uint16_t *h = s;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, bf16x8_to_f32(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(d + i, &u, sizeof u);
    }
}

/* ---- attention --------------------------------------------------------------------------- */

/* e^x for x <= 0 (inputs below -87.3 give ~1e-38 instead of 0, which is harmless next to the
 * block maximum's weight of 1): Cephes expf, range reduction by ln 2 in two parts and a degree
 * 6 polynomial; about 2 ulp. */
INLINE __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.37626f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* tanh(x) for any x (Cephes tanhf's method), on |x| with x's sign put back at the end (so -0
 * stays -0): below 0.625 an odd polynomial, |x| + |x|^3 P(x^2); above 1 - 2 / (e^2|x| + 1)
 * with exp8, |x| clamped to 10, where it rounds to exactly 1. Error bounds and special values
 * as tanh16 in avx512.c (the same operations): NaN fails the >= test and takes the
 * polynomial, so it stays NaN. */
INLINE __m256 tanh8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x);
    const __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), ax, ax);
    const __m256 a = _mm256_min_ps(ax, _mm256_set1_ps(10.0f));
    const __m256 e = exp8(_mm256_add_ps(a, a));
    const __m256 big = _mm256_sub_ps(
        _mm256_set1_ps(1.0f), _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    const __m256 r =
        _mm256_blendv_ps(small, big, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_GE_OQ));
    return _mm256_or_ps(r, _mm256_and_ps(x, sign)); /* r >= 0 (or NaN): copysign(r, x) */
}

/* Lane t of the result: the 8 lanes of a[t] combined by + (hsum8x8) or by max (hmax8x8), in a
 * transposing tree: neighbouring lanes, then neighbouring pairs (per 128-bit half), then the
 * two halves. pair_lanes(a, b, false) is _mm256_hadd_ps(a, b), bit for bit. */
INLINE __m256 pair_lanes(__m256 a, __m256 b, bool mx) {
    __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    return mx ? _mm256_max_ps(e, o) : _mm256_add_ps(e, o);
}
INLINE __m256 tree8x8(const __m256 a[8], bool mx) {
    __m256 h0 = pair_lanes(a[0], a[1], mx), h1 = pair_lanes(a[2], a[3], mx);
    __m256 h2 = pair_lanes(a[4], a[5], mx), h3 = pair_lanes(a[6], a[7], mx);
    __m256 g0 = pair_lanes(h0, h1, mx), g1 = pair_lanes(h2, h3, mx);
    __m256 lo = _mm256_permute2f128_ps(g0, g1, 0x20), hi = _mm256_permute2f128_ps(g0, g1, 0x31);
    return mx ? _mm256_max_ps(lo, hi) : _mm256_add_ps(lo, hi);
}
/* [hsum(a[0]), ..., hsum(a[7])] and [max(a[0]), ..., max(a[7])] */
INLINE __m256 hsum8x8(const __m256 a[8]) { return tree8x8(a, false); }
INLINE __m256 hmax8x8(const __m256 a[8]) { return tree8x8(a, true); }

/* 8 cache values at element d of a row as f32: F32/F16 as weights, I8 (int8 cache rows
 * {f32 scale, int8 values}) as scale * q. _tail: the n < 8 values at d, zero-padded. */
INLINE __m256 load_kv8(slate_dtype dt, const void *row, int64_t d) {
    if (dt != SLATE_DTYPE_I8) return load_w8(dt, row, d);
    float sc;
    memcpy(&sc, row, 4);
    __m128i b = _mm_loadl_epi64((const __m128i *)((const int8_t *)row + 4 + d));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_set1_ps(sc));
}
INLINE __m256 load_kv8_tail(slate_dtype dt, const void *row, int64_t d, int64_t n) {
    if (dt != SLATE_DTYPE_I8) return load_w8_tail(dt, row, d, n);
    int8_t t[8] = {0};
    float sc;
    memcpy(&sc, row, 4);
    memcpy(t, (const int8_t *)row + 4 + d, (size_t)n);
    __m128i b = _mm_loadl_epi64((const __m128i *)t);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_set1_ps(sc));
}

/* q . row[t] for 8 cache rows of dtype dt. */
INLINE __m256 dot8(slate_dtype dt, const float *q, const void *const row[8], int64_t hd) {
    __m256 a[8];
    UNROLL for (int t = 0; t < 8; t++) a[t] = _mm256_setzero_ps();
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
        UNROLL for (int t = 0; t < 8; t++) a[t] = _mm256_fmadd_ps(qv, load_kv8(dt, row[t], d), a[t]);
    }
    if (d < hd) {
        __m256 qv = _mm256_maskload_ps(q + d, tail_mask(hd - d));
        UNROLL for (int t = 0; t < 8; t++) a[t] =
            _mm256_fmadd_ps(qv, load_kv8_tail(dt, row[t], d, hd - d), a[t]);
    }
    return hsum8x8(a);
}

/* Row j of a cache: F32/F16 rows `stride` elements apart, I8 rows `stride` bytes apart. */
INLINE const void *kv_row(slate_dtype dt, const void *base, int64_t j, int64_t stride) {
    return dt == SLATE_DTYPE_F32  ? (const void *)((const float *)base + j * stride)
           : dt == SLATE_DTYPE_I8 ? (const void *)((const uint8_t *)base + j * stride)
                                  : (const void *)((const uint16_t *)base + j * stride);
}

INLINE int64_t kv_row_bytes(slate_dtype dt, int64_t hd) {
    return dt == SLATE_DTYPE_I8 ? 4 + hd : hd * (dt == SLATE_DTYPE_F32 ? 4 : 2);
}

/* K and V rows [ja, jb) into L1. When the rows come from DRAM (long ranges), fetching the next
 * block's rows while this one is computed gave 10-35% more (8 kv heads x 8192 positions x 128
 * f16, rows 2 KiB apart: ~10 -> 11-14 GB/s on Zen 5, one core, noisy); when K and V fit in L2
 * it cost ~12%, so it is used only for ranges whose K and V together exceed PF_ATTN_BYTES (the
 * L2 size). */
enum { PF_ATTN_BYTES = 1 << 20 };
/* The hint: L1 and L2 measured alike for this kernel on the Zen 4 VM (2026-12-03, bench_attn_ab
 * with -DSLATE_AB_KERNEL=avx2 -DSLATE_AB_FLAGS=-DSLATE_PF_ATTN=_MM_HINT_T1, the four shapes of
 * bench/attn_decode.c at depth 2048, three runs: L2 0.96-1.14x as fast, 9 of 12 within 5 %),
 * unlike avx512.c's thin passes. */
#ifndef SLATE_PF_ATTN
#define SLATE_PF_ATTN _MM_HINT_T0
#endif

INLINE void prefetch_rows(slate_dtype dt, const void *k, const void *v, int64_t stride, int64_t ja,
                          int64_t jb, int64_t hd) {
    int64_t n_bytes = kv_row_bytes(dt, hd);
    for (int64_t j = ja; j < jb; j++) {
        const char *pk = kv_row(dt, k, j, stride), *pv = kv_row(dt, v, j, stride);
        for (int64_t b = 0; b < n_bytes; b += 64) {
            _mm_prefetch(pk + b, SLATE_PF_ATTN);
            _mm_prefetch(pv + b, SLATE_PF_ATTN);
        }
    }
}

/* Query heads per pass over the cache (as avx512.c): K and V rows of a block are read from
 * memory once and converted to f32 once for all of them. */
enum { HG = 8, BJ = 8 };
_Static_assert((int)HG == (int)SLATE__ATTN_PASS_HEADS, "exec batches rows into passes of HG heads");

/* One pass's softmax state and one block's scratch, rows of HDP = head_dim rounded up to 8
 * floats (zero past head_dim, so whole vectors are exact). */
typedef struct attn_ws {
    int64_t hdp;
    float acc[HG * SLATE__MAX_HEAD_DIM] __attribute__((aligned(32))); /* sum p v, at the running max */
    float kf[BJ * SLATE__MAX_HEAD_DIM] __attribute__((aligned(32)));  /* the block's K rows as f32 */
    float vf[BJ * SLATE__MAX_HEAD_DIM] __attribute__((aligned(32)));  /* V rows (0 where unused) */
    float p[HG][BJ] __attribute__((aligned(32)));                      /* softmax weights */
    /* running max and sum, this block's rescale of acc (lane h: head h of the pass) */
    float m[HG] __attribute__((aligned(32))), l[HG] __attribute__((aligned(32)));
    float corr[HG] __attribute__((aligned(32)));
} attn_ws;

/* acc[h] = acc[h] * corr[h] + sum_t p[h][t] * vf[t] for heads [h0, h0 + NH) and vectors
 * [c0, c0 + NC) of 8 floats: NH x NC accumulators in registers over the block's rows. */
INLINE void attn_pv_tile(attn_ws *ws, int NH, int NC, int h0, int64_t c0) {
    __m256 a[4][2];
    UNROLL for (int h = 0; h < NH; h++) {
        __m256 cv = _mm256_set1_ps(ws->corr[h0 + h]);
        UNROLL for (int c = 0; c < NC; c++)
            a[h][c] = _mm256_mul_ps(_mm256_load_ps(&ws->acc[(h0 + h) * ws->hdp + (c0 + c) * 8]), cv);
    }
    for (int t = 0; t < BJ; t++) {
        __m256 vv[2];
        UNROLL for (int c = 0; c < NC; c++) vv[c] = _mm256_load_ps(&ws->vf[t * ws->hdp + (c0 + c) * 8]);
        UNROLL for (int h = 0; h < NH; h++) {
            __m256 pb = _mm256_broadcast_ss(&ws->p[h0 + h][t]);
            UNROLL for (int c = 0; c < NC; c++) a[h][c] = _mm256_fmadd_ps(pb, vv[c], a[h][c]);
        }
    }
    UNROLL for (int h = 0; h < NH; h++)
        UNROLL for (int c = 0; c < NC; c++)
            _mm256_store_ps(&ws->acc[(h0 + h) * ws->hdp + (c0 + c) * 8], a[h][c]);
}

/* Every head of the pass and every vector of the row: tiles of 4 heads x 2 vectors (8
 * accumulators, 2 V and 1 broadcast register of the 16), then the heads and vector left. */
#define PV_HEADS(NC)                                                                               \
    do {                                                                                           \
        int h = 0;                                                                                 \
        for (; h + 4 <= nh; h += 4) attn_pv_tile(ws, 4, NC, h, c0);                                \
        switch (nh - h) {                                                                          \
        case 3: attn_pv_tile(ws, 3, NC, h, c0); break;                                             \
        case 2: attn_pv_tile(ws, 2, NC, h, c0); break;                                             \
        case 1: attn_pv_tile(ws, 1, NC, h, c0); break;                                             \
        default: break;                                                                            \
        }                                                                                          \
    } while (0)

/* The kernel: for each pass of up to HG query heads, blocks of BJ = 8 positions. Each block's
 * K and V rows are converted to f32 once into L1 (zero past head_dim); each head's 8 scores
 * are 8 row dot products and one transposing horizontal add (hsum8x8); one online-softmax step
 * for all heads at once, their maxima, rescales and sums as the lanes of one vector (hmax8x8,
 * one exp8 for the rescales; the rescale of the old state is kept as a factor applied when the
 * accumulators are next loaded); then P (heads x 8) times V (8 x head_dim) in register tiles.
 * The step for all heads at once replaced one per head (scalar maxima and sums, libm expf for
 * the rescale): bench_attn_ab against the previous file, TinyLlama's shape (8 heads), 1.09-1.19x
 * at depths 512 and 2048, the hd128 shape's (4 heads; Llama-3.1-8B's layers) 0.95-1.24x,
 * Phi-3-mini's (1 head, so seven idle lanes) 0.98-1.02x (Zen 4, three runs). Rows that no
 * head uses (past the range, -inf or NaN scores for every head) have their V zeroed so they
 * are skipped exactly as in ref; all -inf gives out = 0. For ranges too long for L2 the next
 * block's rows are prefetched. One thread, 8 heads, head_dim 64, f16 cache (head-major), 22
 * layers at depth 2048 from DRAM: 52.5 ns per position and kv head with the design before this
 * one (one head at a time, each converting the block's rows again and accumulating its own V
 * pass), 32.4 with it. With n_rows > 1 (a prefill's rows in one call, kernels.h) or a window
 * a head's lanes outside its row's range score -inf like those past j1. */
INLINE void attention_any(slate_dtype dt, float *out, const float *q, const void *k, const void *v,
                          int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                          int64_t n_rows, int64_t window, float scale, float softcap,
                          const float *mask) {
    attn_ws wsb __attribute__((aligned(32)));
    attn_ws *ws = &wsb;
    const int64_t nc = (hd + 7) / 8; /* vectors per row */
    ws->hdp = nc * 8;
    /* the first head's start is the earliest */
    j0 = slate__attn_head_start(j0, slate__attn_head_end(j1, 0, n_heads, n_rows), window);
    bool pf = (j1 - j0) * kv_row_bytes(dt, hd) * 2 > PF_ATTN_BYTES;
    for (int64_t h0 = 0; h0 < n_heads; h0 += HG) {
        int nh = n_heads - h0 < HG ? (int)(n_heads - h0) : HG;
        /* Each head's range (kernels.h: n_rows, window); the pass's first head has the
         * earliest end, its last the latest start. */
        int64_t start[HG], end[HG];
        for (int h = 0; h < nh; h++) {
            end[h] = slate__attn_head_end(j1, h0 + h, n_heads, n_rows);
            start[h] = slate__attn_head_start(j0, end[h], window);
        }
        for (int h = 0; h < nh; h++)
            for (int64_t c = 0; c < nc; c++) _mm256_store_ps(&ws->acc[h * ws->hdp + c * 8], _mm256_setzero_ps());
        _mm256_store_ps(ws->m, _mm256_set1_ps(-INFINITY));
        _mm256_store_ps(ws->l, _mm256_setzero_ps());
        for (int64_t jb = j0; jb < j1; jb += BJ) {
            int n = j1 - jb < BJ ? (int)(j1 - jb) : BJ;
            if (pf) prefetch_rows(dt, k, v, stride, jb + BJ, j1 < jb + 2 * BJ ? j1 : jb + 2 * BJ, hd);
            const void *kr[BJ];
            /* Rows past the range reuse row jb (valid memory); their scores become -inf. */
            for (int t = 0; t < BJ; t++) {
                const void *krow = kv_row(dt, k, jb + (t < n ? t : 0), stride);
                const void *vrow = kv_row(dt, v, jb + (t < n ? t : 0), stride);
                int64_t c = 0;
                for (; c < hd / 8; c++) {
                    _mm256_store_ps(&ws->kf[t * ws->hdp + c * 8], load_kv8(dt, krow, c * 8));
                    _mm256_store_ps(&ws->vf[t * ws->hdp + c * 8], load_kv8(dt, vrow, c * 8));
                }
                if (c < nc) { /* the last hd % 8 values, zero-padded */
                    _mm256_store_ps(&ws->kf[t * ws->hdp + c * 8], load_kv8_tail(dt, krow, c * 8, hd - c * 8));
                    _mm256_store_ps(&ws->vf[t * ws->hdp + c * 8], load_kv8_tail(dt, vrow, c * 8, hd - c * 8));
                }
                kr[t] = &ws->kf[t * ws->hdp];
            }
            /* The scores of every head first (lanes: positions), then the softmax step of all
             * heads at once (lanes of mo / mn / corr / l: heads), so its chain of dependent
             * steps (max, exp, sum) runs once per block instead of once per head. Heads past
             * nh score -inf: no weight, their state stays 0. */
            const __m256i in_range = tail_mask(n); /* lanes past the range: -inf */
            const __m256 live = _mm256_castsi256_ps(in_range);
            __m256 mk = mask ? _mm256_maskload_ps(mask + jb, in_range) : _mm256_setzero_ps();
            __m256 sv[HG], valid[HG];
            UNROLL for (int h = 0; h < HG; h++) sv[h] = _mm256_set1_ps(-INFINITY);
            for (int h = 0; h < nh; h++) {
                __m256 sc = _mm256_mul_ps(dot8(SLATE_DTYPE_F32, q + (h0 + h) * hd, kr, hd),
                                          _mm256_set1_ps(scale));
                if (softcap > 0.0f) /* scale, cap, then mask, as ref (tanh8: 2 ulp of tanhf) */
                    sc = _mm256_mul_ps(_mm256_set1_ps(softcap),
                                       tanh8(_mm256_mul_ps(sc, _mm256_set1_ps(1.0f / softcap))));
                __m256 lh = live; /* lanes outside this head's range: -inf too */
                if (jb + BJ > end[0] || jb < start[nh - 1]) {
                    int64_t e = end[h] - jb, b = start[h] - jb;
                    __m256i te = tail_mask(e < 0 ? 0 : e < BJ ? e : BJ);
                    __m256i tb = tail_mask(b < 0 ? 0 : b < BJ ? b : BJ);
                    lh = _mm256_and_ps(lh, _mm256_andnot_ps(_mm256_castsi256_ps(tb),
                                                            _mm256_castsi256_ps(te)));
                }
                sv[h] = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_add_ps(sc, mk), lh);
            }
            unsigned used = 0; /* rows some head gives weight */
            UNROLL for (int h = 0; h < HG; h++) {
                /* Ordered compare: false for -inf and NaN, the scores ref skips; those become
                 * -inf, so no NaN reaches the maxima. */
                valid[h] = _mm256_setzero_ps();
                if (h >= nh) continue;
                valid[h] = _mm256_cmp_ps(sv[h], _mm256_set1_ps(-INFINITY), _CMP_GT_OQ);
                sv[h] = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), sv[h], valid[h]);
                used |= (unsigned)_mm256_movemask_ps(valid[h]);
            }
            /* mn = max(m, block maxima); corr = e^(m - mn): exactly 1 where the maximum did not
             * move, and 1 where no score was valid yet (m = mn = -inf; the state is 0). */
            const __m256 mo = _mm256_load_ps(ws->m), mn = _mm256_max_ps(mo, hmax8x8(sv));
            const __m256 none = _mm256_cmp_ps(mn, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
            const __m256 corr =
                _mm256_blendv_ps(exp8(_mm256_sub_ps(mo, mn)), _mm256_set1_ps(1.0f), none);
            _mm256_store_ps(ws->m, mn);
            _mm256_store_ps(ws->corr, corr);
            __m256 p[HG];
            UNROLL for (int h = 0; h < HG; h++) {
                p[h] = _mm256_setzero_ps();
                if (h >= nh) continue; /* the same branch in every block of the call */
                const __m256 mh = _mm256_permutevar8x32_ps(mn, _mm256_set1_epi32(h));
                p[h] = _mm256_and_ps(exp8(_mm256_sub_ps(sv[h], mh)), valid[h]);
                _mm256_store_ps(ws->p[h], p[h]);
            }
            _mm256_store_ps(ws->l, _mm256_fmadd_ps(_mm256_load_ps(ws->l), corr, hsum8x8(p)));
            /* Unused rows must not reach the accumulators even as 0 * v (v may be inf). */
            for (int t = 0; t < BJ; t++)
                if (!(used >> t & 1u))
                    for (int64_t c = 0; c < nc; c++) _mm256_store_ps(&ws->vf[t * ws->hdp + c * 8], _mm256_setzero_ps());
            int64_t c0 = 0;
            for (; c0 + 2 <= nc; c0 += 2) PV_HEADS(2);
            if (c0 < nc) PV_HEADS(1);
        }
        for (int h = 0; h < nh; h++) {
            float *o = out + (h0 + h) * hd;
            float inv = ws->l[h] > 0.0f ? 1.0f / ws->l[h] : 0.0f;
            __m256 iv = _mm256_set1_ps(inv);
            int64_t d = 0;
            for (; d + 8 <= hd; d += 8)
                _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_load_ps(&ws->acc[h * ws->hdp + d]), iv));
            for (; d < hd; d++) o[d] = ws->acc[h * ws->hdp + d] * inv;
        }
    }
}

/* One out-of-line copy of the kernel per cache dtype, without and with Gemma 2's score cap: in
 * the uncapped copies softcap is a literal 0, so they compile to the kernel as it was before the
 * cap existed (inlining all of them into one function cost AVX-512 ~9% at depth 2048). */
#define ATTN_COPY(NAME, DT, CAP)                                                                   \
    static __attribute__((noinline)) void NAME(float *out, const float *q, const void *k,         \
                                               const void *v, int64_t stride, int64_t j0,         \
                                               int64_t j1, int64_t hd, int64_t n_heads,           \
                                               int64_t n_rows, int64_t window, float scale,       \
                                               float softcap, const float *mask) {                \
        attention_any(DT, out, q, k, v, stride, j0, j1, hd, n_heads, n_rows, window, scale, CAP,  \
                      mask);                                                                       \
    }
ATTN_COPY(attention_f32, SLATE_DTYPE_F32, 0.0f)
ATTN_COPY(attention_f32_capped, SLATE_DTYPE_F32, softcap)
ATTN_COPY(attention_f16, SLATE_DTYPE_F16, 0.0f)
ATTN_COPY(attention_f16_capped, SLATE_DTYPE_F16, softcap)
ATTN_COPY(attention_int8, SLATE_DTYPE_I8, 0.0f)
ATTN_COPY(attention_int8_capped, SLATE_DTYPE_I8, softcap)

static void attention(float *out, const float *q, const void *k, const void *v, slate_dtype kvt,
                      int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                      int64_t n_rows, int64_t window, float scale, float softcap,
                      const float *mask) {
    if (kvt == SLATE_DTYPE_F16)
        (softcap > 0.0f ? attention_f16_capped : attention_f16)(out, q, k, v, stride, j0, j1, hd,
                                                                n_heads, n_rows, window, scale,
                                                                softcap, mask);
    else
        (softcap > 0.0f ? attention_f32_capped : attention_f32)(out, q, k, v, stride, j0, j1, hd,
                                                                n_heads, n_rows, window, scale,
                                                                softcap, mask);
}

/* int8 cache (rows of {f32 scale, head_dim int8}): the same kernel, each row dequantized as it
 * is loaded. */
static void attention_i8(float *out, const float *q, const uint8_t *k, const uint8_t *v,
                         int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                         int64_t n_rows, int64_t window, float scale, float softcap,
                         const float *mask) {
    (softcap > 0.0f ? attention_int8_capped : attention_int8)(out, q, k, v, stride, j0, j1, hd,
                                                              n_heads, n_rows, window, scale,
                                                              softcap, mask);
}

/* ---- rms_norm ---------------------------------------------------------------------------- */

static void rms_norm(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i);
        s0 = _mm256_fmadd_ps(a, a, s0);
    }
    if (i < n) {
        __m256 a = _mm256_maskload_ps(x + i, tail_mask(n - i));
        s1 = _mm256_fmadd_ps(a, a, s1);
    }
    float ss = hsum8(_mm256_add_ps(s0, s1));
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    __m256 rv = _mm256_set1_ps(r);
    /* (x * r) * w, the order ref multiplies in */
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), rv),
                                              _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = x[i] * r * w[i];
}

/* ---- compressed weights (Q8_0, Q4, Q8_C): embedding rows ----------------------------------
 * The matmuls of these formats are integer kernels in x86/avx2_q.c (installed in this table by
 * dispatch.c); this file keeps the row lookups. */

/* Unit u (elements 8u .. 8u+7) of a block as f32: the stored ints (Q4: q, before - 8 or + m). */
INLINE __m256 q_unit(slate_dtype dt, int32_t B, const uint8_t *qs, int u) {
    if (dt == SLATE_DTYPE_Q4) {
        int e = 8 * u, half = B / 2;
        __m128i b = _mm_loadl_epi64((const __m128i *)(qs + (e % half)));
        if (e >= half) b = _mm_srli_epi16(b, 4);
        b = _mm_and_si128(b, _mm_set1_epi8(15));
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
    }
    __m128i b = _mm_loadl_epi64((const __m128i *)(qs + 8 * u));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

/* ---- palettized weights (PAL) ------------------------------------------------------------
 * Dequantize-and-FMA on f32 activations (ref's result up to summation order), eight indices at
 * a time: the 16 bytes that hold them are broadcast to both 128-bit lanes, one vpshufb moves
 * the 4 bytes holding index j into lane j, vpsrlvd aligns it and a mask keeps its N bits (one
 * constant pair per bit width, so 2, 3, 4, 6 and 8 bits share the code; 4 bits: one 32-bit
 * broadcast). Lookup in the row's table as f32: 2 and 3 bits one vpermps (2 bits: the 4
 * centroids twice), 4 bits two vpermps and a blend on bit 3, 6 and 8 bits a gather from the
 * table in L1. A 16-byte window that would pass the end of the tensor (the last elements of
 * the last row) is decoded in scalar instead, as ref reads the format. */

typedef struct pal_dec {
    int32_t bits;
    __m256i shuf, shift, mask;
    __m256 lo, hi;         /* table entries 0-7 and 8-15 (bits <= 4) */
    int64_t group;         /* the group whose table is loaded; -1: none */
    const uint8_t *end;    /* one past the tensor */
    float lut[256];        /* the loaded table as f32 */
} pal_dec;

static void pal_init(pal_dec *d, const slate__wmat *w) {
    d->bits = w->bits;
    d->group = -1;
    size_t n_lut = (size_t)((w->n_out + w->group - 1) / w->group) << w->bits;
    d->end = (const uint8_t *)(w->lut + n_lut);
    uint8_t shuf[32];
    int32_t shift[8];
    for (int j = 0; j < 8; j++) {
        int s = j * w->bits; /* index j starts at bit s of the window (bits <= 8: in bytes 0-10) */
        for (int k = 0; k < 4; k++) shuf[4 * j + k] = (uint8_t)(s / 8 + k);
        shift[j] = w->bits == 4 ? s : s % 8; /* 4 bits: all 8 in one 32-bit word */
    }
    d->shuf = _mm256_loadu_si256((const __m256i *)shuf);
    d->shift = _mm256_loadu_si256((const __m256i *)shift);
    d->mask = _mm256_set1_epi32((1 << w->bits) - 1);
}

/* Loads row o's table (once per group of rows). */
static void pal_table(pal_dec *d, const slate__wmat *w, int64_t o) {
    int64_t g = o / w->group;
    if (g == d->group) return;
    d->group = g;
    int32_t n = 1 << w->bits;
    const uint16_t *t = w->lut + (size_t)g * (size_t)n;
    for (int32_t i = 0; i < n; i++) d->lut[i] = _cvtsh_ss(t[i]);
    if (w->bits == 2) {
        for (int i = 4; i < 8; i++) d->lut[i] = d->lut[i - 4]; /* lut has room for 256 */
        d->lo = _mm256_loadu_ps(d->lut);
    } else if (w->bits <= 4) {
        d->lo = _mm256_loadu_ps(d->lut);
        if (w->bits == 4) d->hi = _mm256_loadu_ps(d->lut + 8);
    }
}

/* Weights i .. i+7 of a row (i a multiple of 8; the caller checks the window); BITS = d->bits,
 * a constant where inlined. */
INLINE __m256 pal_decode8(int BITS, const pal_dec *d, const uint8_t *row, int64_t i) {
    __m256i v;
    if (BITS == 4) { /* the 4 bytes of the unit in every lane */
        int32_t q;
        memcpy(&q, row + i / 2, 4);
        v = _mm256_set1_epi32(q);
    } else {
        __m128i win = _mm_loadu_si128((const __m128i *)(row + i / 8 * BITS));
        v = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(win), d->shuf);
    }
    __m256i idx = _mm256_and_si256(_mm256_srlv_epi32(v, d->shift), d->mask);
    if (BITS <= 3) return _mm256_permutevar8x32_ps(d->lo, idx);
    if (BITS == 4)
        return _mm256_blendv_ps(_mm256_permutevar8x32_ps(d->lo, idx),
                                _mm256_permutevar8x32_ps(d->hi, idx),
                                _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
    return _mm256_i32gather_ps(d->lut, idx, 4);
}

/* Weight i of a row in scalar (the format's bit layout, as ref reads it). */
static float pal_scalar(const pal_dec *d, const slate__wmat *w, const uint8_t *row, int64_t i) {
    size_t bit = (size_t)i * (size_t)d->bits, byte = bit / 8;
    unsigned v = row[byte];
    if (byte + 1 < w->row_bytes) v |= (unsigned)row[byte + 1] << 8;
    return d->lut[(v >> (bit % 8)) & ((1u << d->bits) - 1)];
}

/* R rows of x (from row r0) against weight row o. */
INLINE void pal_dot_rows(int BITS, int R, const pal_dec *d, float *y, const float *x, const slate__wmat *w,
                         const float *bias, int64_t r0, int64_t o) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    int64_t n_in = w->n_in, i = 0;
    /* whole units of 8 whose 16-byte window stays inside the tensor */
    int64_t room = (int64_t)(d->end - row) - 16, n8 = n_in & ~(int64_t)7;
    if (room < 0) n8 = 0;
    else if (room / d->bits * 8 + 8 < n8) n8 = room / d->bits * 8 + 8;
    __m256 acc[4][2];
    UNROLL for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (; i + 16 <= n8; i += 16) { /* two units, one accumulator each */
        __m256 w0 = pal_decode8(BITS, d, row, i), w1 = pal_decode8(BITS, d, row, i + 8);
        UNROLL for (int r = 0; r < R; r++) {
            const float *xr = x + (r0 + r) * n_in + i;
            acc[r][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr), acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + 8), acc[r][1]);
        }
    }
    if (i < n8) {
        __m256 w0 = pal_decode8(BITS, d, row, i);
        UNROLL for (int r = 0; r < R; r++)
            acc[r][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (r0 + r) * n_in + i), acc[r][0]);
        i += 8;
    }
    UNROLL for (int r = 0; r < R; r++) {
        float v = hsum8(_mm256_add_ps(acc[r][0], acc[r][1]));
        for (int64_t t = n8; t < n_in; t++) v += pal_scalar(d, w, row, t) * x[(r0 + r) * n_in + t];
        y[(r0 + r) * w->n_out + o] = v + (bias ? bias[o] : 0.0f);
    }
}

INLINE void pal_matmul_bits(int BITS, float *y, const float *x, const slate__wmat *w,
                            const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    pal_dec d;
    pal_init(&d, w);
    for (int64_t o = o0; o < o1; o++) {
        pal_table(&d, w, o);
        int64_t r = 0;
        for (; r + 4 <= n_rows; r += 4) pal_dot_rows(BITS, 4, &d, y, x, w, bias, r, o);
        switch (n_rows - r) {
        case 3: pal_dot_rows(BITS, 3, &d, y, x, w, bias, r, o); break;
        case 2: pal_dot_rows(BITS, 2, &d, y, x, w, bias, r, o); break;
        case 1: pal_dot_rows(BITS, 1, &d, y, x, w, bias, r, o); break;
        default: break;
        }
    }
}

static void matmul_pal(float *y, const float *x, const void *xq, const slate__wmat *w,
                       const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)xq;
    switch (w->bits) {
    case 2: pal_matmul_bits(2, y, x, w, bias, n_rows, o0, o1); break;
    case 3: pal_matmul_bits(3, y, x, w, bias, n_rows, o0, o1); break;
    case 4: pal_matmul_bits(4, y, x, w, bias, n_rows, o0, o1); break;
    case 6: pal_matmul_bits(6, y, x, w, bias, n_rows, o0, o1); break;
    default: pal_matmul_bits(8, y, x, w, bias, n_rows, o0, o1); break;
    }
}

/* Embedding lookups: one row dequantized, 8 values at a time, with exactly ref's products
 * (d * (q - 8), d * q + m, d * q, each rounded the same way), so the result is bit-identical. */
static void row_to_f32_q(float *dst, const slate__wmat *w, int64_t o) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    slate_dtype dt = w->dtype;
    int32_t B = dt == SLATE_DTYPE_Q8_C ? 8 : w->block;
    bool asym = w->asym;
    size_t bb = dt == SLATE_DTYPE_Q8_0 ? sizeof(slate__block_q8_0)
                : dt == SLATE_DTYPE_Q4 ? slate__q4_block_bytes(B, asym)
                                       : (size_t)B;
    size_t hdr = dt == SLATE_DTYPE_Q8_C ? 0 : asym ? 4 : 2;
    int64_t nb = w->n_in / B;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + (size_t)b * bb;
        float d = dt == SLATE_DTYPE_Q8_C ? w->scales[o] : f16_scalar(blk);
        for (int u = 0; u < B / 8; u++) {
            __m256 q = dt == SLATE_DTYPE_Q4 ? q_unit(SLATE_DTYPE_Q4, B, blk + hdr, u)
                                            : q_unit(SLATE_DTYPE_Q8_0, 32, blk + hdr, u);
            /* The products ref computes: d * (q - 8) (q - 8 is exact), d * q + m, d * q. */
            __m256 v = dt == SLATE_DTYPE_Q4 && !asym
                           ? _mm256_mul_ps(_mm256_set1_ps(d), _mm256_sub_ps(q, _mm256_set1_ps(8.0f)))
                           : _mm256_mul_ps(_mm256_set1_ps(d), q);
            if (dt == SLATE_DTYPE_Q4 && asym) v = _mm256_add_ps(v, _mm256_set1_ps(f16_scalar(blk + 2)));
            _mm256_storeu_ps(dst + b * B + 8 * u, v);
        }
    }
    for (int64_t i = nb * B; i < w->n_in; i++) /* Q8_C: the last n_in % 8 */
        dst[i] = w->scales[o] * (float)(int8_t)row[i];
}

/* ---- swiglu, geglu, softcap, rope -------------------------------------------------------- */

/* silu(a) * b; exp8 clamps its input, so silu(a) -> 0 or a at the extremes. Tails go through
 * a zero-padded copy. */
static void swiglu(float *y, const float *a, const float *b, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 av = _mm256_loadu_ps(a + i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), av));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(av, _mm256_add_ps(one, e)),
                                              _mm256_loadu_ps(b + i)));
    }
    if (i < n) {
        __m256i m = tail_mask(n - i);
        __m256 av = _mm256_maskload_ps(a + i, m);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), av));
        _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(_mm256_div_ps(av, _mm256_add_ps(one, e)),
                                                    _mm256_maskload_ps(b + i, m)));
    }
}

/* gelu_tanh(a) * b as a sigmoid: 0.5 (1 + tanh(u)) = 1 / (1 + e^-2u), so gelu_tanh(a) =
 * a / (1 + e^t) with t = -2 sqrt(2/pi) (a + 0.044715 a^3). exp8 clamps t, so the result goes
 * to 0 or a at the extremes (a^3 may overflow to +-inf: still clamped). */
static void geglu(float *y, const float *a, const float *b, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), kappa = _mm256_set1_ps(0.044715f);
    const __m256 m2beta = _mm256_set1_ps(-2.0f * 0.7978845608028654f);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = tail_mask(n - i >= 8 ? 8 : n - i);
        __m256 av = _mm256_maskload_ps(a + i, m), bv = _mm256_maskload_ps(b + i, m);
        __m256 cube = _mm256_mul_ps(_mm256_mul_ps(av, av), av);
        __m256 t = _mm256_mul_ps(m2beta, _mm256_fmadd_ps(kappa, cube, av));
        __m256 g = _mm256_div_ps(av, _mm256_add_ps(one, exp8(t)));
        _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(g, bv));
    }
}

/* cap * tanh(x / cap) with tanh8; x / cap as x * (1 / cap) (one more rounding of the
 * argument, which tanh does not enlarge: its slope is at most 1 and x tanh'(x) / tanh(x) <= 1). */
static void softcap(float *y, const float *x, int64_t n, float cap) {
    const __m256 c = _mm256_set1_ps(cap), ic = _mm256_set1_ps(1.0f / cap);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = tail_mask(n - i >= 8 ? 8 : n - i);
        __m256 xv = _mm256_maskload_ps(x + i, m);
        _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(c, tanh8(_mm256_mul_ps(xv, ic))));
    }
}

/* As ref, 8 lanes: NeoX pairs as contiguous u and v vectors; adjacent pairs 4 to a vector with
 * c and s spread over both lanes of a pair. */
static void rope(float *y, const float *x, const float *c, const float *s, int64_t n_heads,
                 int64_t head_dim, int64_t rope_dim, bool half) {
    const int64_t nh = rope_dim / 2;
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256 sign = _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1);
    for (int64_t h = 0; h < n_heads; h++) {
        const float *xi = x + h * head_dim;
        float *yo = y + h * head_dim;
        if (half) {
            for (int64_t i = 0; i < nh; i += 8) {
                __m256i m = tail_mask(nh - i >= 8 ? 8 : nh - i);
                __m256 u = _mm256_maskload_ps(xi + i, m), v = _mm256_maskload_ps(xi + nh + i, m);
                __m256 cv = _mm256_maskload_ps(c + i, m), sv = _mm256_maskload_ps(s + i, m);
                _mm256_maskstore_ps(yo + i, m, _mm256_fmsub_ps(u, cv, _mm256_mul_ps(v, sv)));
                _mm256_maskstore_ps(yo + nh + i, m, _mm256_fmadd_ps(u, sv, _mm256_mul_ps(v, cv)));
            }
        } else {
            for (int64_t i = 0; i < nh; i += 4) { /* pairs i .. i+3 = floats 2i .. 2i+7 */
                int64_t np = nh - i >= 4 ? 4 : nh - i;
                __m256i m = tail_mask(2 * np), mh = tail_mask(np);
                __m256 xv = _mm256_maskload_ps(xi + 2 * i, m);
                __m256 cv = _mm256_permutevar8x32_ps(_mm256_maskload_ps(c + i, mh), dup);
                __m256 sv = _mm256_permutevar8x32_ps(_mm256_maskload_ps(s + i, mh), dup);
                __m256 sw = _mm256_permute_ps(xv, 0xB1); /* (v, u) in each pair */
                __m256 r = _mm256_fmadd_ps(_mm256_mul_ps(sw, sign), sv, _mm256_mul_ps(xv, cv));
                _mm256_maskstore_ps(yo + 2 * i, m, r);
            }
        }
        if (yo != xi)
            for (int64_t d = rope_dim; d < head_dim; d++) yo[d] = xi[d];
    }
}

void slate__avx2_fill(slate__kernels *k) {
    k->name = "avx2";
    k->matmul[SLATE_DTYPE_F32] = matmul_f32;
    k->matmul[SLATE_DTYPE_F16] = matmul_f16;
    k->matmul[SLATE_DTYPE_BF16] = matmul_bf16;
    k->matmul[SLATE_DTYPE_PAL] = matmul_pal;
    k->row_to_f32[SLATE_DTYPE_Q8_0] = row_to_f32_q;
    k->row_to_f32[SLATE_DTYPE_Q4] = row_to_f32_q;
    k->row_to_f32[SLATE_DTYPE_Q8_C] = row_to_f32_q;
    k->to_f32[SLATE_DTYPE_F16] = to_f32_f16;
    k->to_f32[SLATE_DTYPE_BF16] = to_f32_bf16;
    k->to_f16 = to_f16;
    k->attention = attention;
    k->attention_i8 = attention_i8;
    k->rms_norm = rms_norm;
    k->swiglu = swiglu;
    k->geglu = geglu;
    k->softcap = softcap;
    k->rope = rope;
}
