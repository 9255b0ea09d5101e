/*
 * avx2_q.c - integer matmul of the compressed weight formats (Q8_0, Q4 with blocks of 16, 32,
 * 64 and 128, symmetric and asymmetric, Q8_C, IQ4_NL) for CPUs with AVX2 but not AVX-512 VNNI:
 * the avx2 table, and the avx512 table, which keeps avx2's kernels for these formats. Same
 * signatures and meaning as kernels/ref/quant.c up to the rounding of x described here.
 *
 * x is quantized once per matmul (quantize_x; exec reuses it for q/k/v and gate/up): per row,
 * units of 32 inputs, each with int8 values q = round(x / dx), dx = max|x| / 127 over the unit
 * (a short last unit is padded with zeros), the f32 scale dx and dx * (sum of q) over each half
 * of 16 (the offset term of Q4). Products of a unit of 32 weights with a unit of x are integer:
 * vpmaddubsw (u8 x s8 -> pairs summed in s16) and vpmaddwd by ones (-> 8 x s32, lanes 0-3 the
 * first 16 inputs, 4-7 the last 16), then one f32 FMA with the scales d_w * dx. Q4's nibbles
 * are already u8 (its value d (q - 8) or d q + m is applied as d * dot + m * dx * sum(q)); Q8_0
 * and Q8_C are signed on both sides, so the sign of w moves onto x (vpsignb) and |w| is the
 * unsigned factor (|w| <= 128, pairs at most 2 * 128 * 127 < 32767: no saturation). IQ4_NL
 * (blocks of 32 = units) does the same with its int8 levels, one vpshufb of the 32 nibbles
 * (avx2_inline.h's iq4_unit), and also has a bit-exact row lookup (row_to_f32) here. Q4 with
 * blocks of 16 puts two blocks in a unit: lanes 0-3 take the first block's scale, 4-7 the
 * second's. Up to 4 rows of x share each unpacked unit of weights (prefill).
 *
 * Why: the f32 dequantize-and-FMA path this replaces was compute-bound far below the memory
 * bandwidth; SmolLM2-135M int4, SLATE_KERNELS=avx2, 2 threads: decode 69 -> 272 tok/s,
 * prefill-512 231 -> 529 tok/s (docs/design.md has the rest).
 */
#include "kernels/kernels.h"
#include "kernels/x86/avx2_inline.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>


enum { XU = 32 }; /* inputs per unit of x */

/* One row of quantized x: int8 q[units * 32], then f32 dx[units], then f32 hs[units * 2]. */
static int64_t x_units(const slate__wmat *w) { return (w->n_in + XU - 1) / XU; }
static size_t x_stride(const slate__wmat *w) { return (size_t)x_units(w) * (XU + 3 * sizeof(float)); }

static slate__xq_plan xq_plan(const slate__wmat *w, int64_t n_rows) {
    slate__xq_plan p;
    p.bytes = (size_t)n_rows * x_stride(w);
    p.layout = 4u << 24; /* one layout for every format here: q/k/v and gate/up share it */
    p.row_align = 1;
    return p;
}

INLINE float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static void quantize_x(void *xq, const float *x, const slate__wmat *w, int64_t n_rows,
                       int64_t r0, int64_t r1) {
    (void)n_rows;
    int64_t n_in = w->n_in, units = x_units(w);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t r = r0; r < r1; r++) {
        int8_t *q = (int8_t *)xq + (size_t)r * x_stride(w);
        float *dx = (float *)(q + units * XU), *hs = dx + units;
        for (int64_t u = 0; u < units; u++) {
            float buf[XU];
            const float *src = x + r * n_in + u * XU;
            int64_t n = n_in - u * XU < XU ? n_in - u * XU : XU;
            if (n < XU) { /* the short last unit, zero-padded */
                memset(buf, 0, sizeof buf);
                memcpy(buf, src, (size_t)n * sizeof(float));
                src = buf;
            }
            __m256 v[4], am = _mm256_setzero_ps();
            UNROLL for (int k = 0; k < 4; k++) {
                v[k] = _mm256_loadu_ps(src + 8 * k);
                am = _mm256_max_ps(am, _mm256_andnot_ps(sign, v[k]));
            }
            float amax = hmax8(am), d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
            __m256i qi[4];
            UNROLL for (int k = 0; k < 4; k++) /* round to nearest (the MXCSR default) */
                qi[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], _mm256_set1_ps(id)));
            /* s32 -> s16 -> s8 packs interleave 128-bit lanes; one permute restores the order */
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]),
                                           _mm256_packs_epi32(qi[2], qi[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(q + u * XU), p);
            __m256i s01 = _mm256_add_epi32(qi[0], qi[1]), s23 = _mm256_add_epi32(qi[2], qi[3]);
            dx[u] = d;
            hs[2 * u] = d * hsum8(_mm256_cvtepi32_ps(s01)); /* sums of 16 int8: exact in f32 */
            hs[2 * u + 1] = d * hsum8(_mm256_cvtepi32_ps(s23));
        }
    }
}

/* 8 x s32: sums of u8 w times s8 x over each 4 consecutive inputs of the unit. Built as
 * x86/avx2_vnni.c (SLATE_AVX2_Q_VNNI): one AVX-VNNI vpdpbusd instead of the pair of
 * vpmaddubsw + vpmaddwd; the same sums (no pair here can saturate s16, see above). */
INLINE __m256i dot_u8s8(__m256i wu, __m256i xs) {
#ifdef SLATE_AVX2_Q_VNNI
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), wu, xs);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wu, xs), _mm256_set1_epi16(1));
#endif
}

/* Q4 nibbles of one unit of 32 as u8 in input order (B = block, k = unit within the block). */
INLINE __m256i q4_unit(int B, const uint8_t *qs, int k) {
    const __m256i low = _mm256_set1_epi8(15);
    if (B == 32) {
        __m128i b = _mm_loadu_si128((const __m128i *)qs);
        __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(b), _mm_srli_epi16(b, 4), 1);
        return _mm256_and_si256(v, low);
    }
    /* B = 64: bytes 0-31 hold inputs 0-31 (low) and 32-63 (high); B = 128: bytes 0-63 hold
     * 0-63 (low) and 64-127 (high), so unit k is the low (k < 2) or high nibbles of 32 bytes. */
    int half = B == 64 ? k : k / 2, sel = B == 64 ? 0 : k % 2;
    __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * sel));
    return _mm256_and_si256(half ? _mm256_srli_epi16(v, 4) : v, low);
}

/* Two Q4 blocks of 16 (8 nibble bytes each) as one unit of 32 u8 in input order. */
INLINE __m256i q4_pair(const uint8_t *qs0, const uint8_t *qs1) {
    int64_t a, b = 0;
    memcpy(&a, qs0, 8);
    if (qs1) memcpy(&b, qs1, 8);
    __m128i v = _mm_set_epi64x(b, a);
    const __m128i low = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(v, low), hi = _mm_and_si128(_mm_srli_epi16(v, 4), low);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi64(lo, hi)),
                                   _mm_unpackhi_epi64(lo, hi), 1);
}

/* Rows r0 .. r0+R-1 of x against weight row o of a Q4 matrix with blocks of B. */
INLINE void q4_rows(int B, bool asym, int R, float *y, const uint8_t *xq, size_t xs,
                    const slate__wmat *w, const float *bias, int64_t r0, int64_t o) {
    int64_t units = x_units(w), nb = w->n_in / B;
    size_t bb = slate__q4_block_bytes(B, asym), hdr = asym ? 4 : 2;
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    const int8_t *xr[4];
    const float *dx[4], *hs[4];
    __m256 acc[4];
    float corr[4];
    x_rows(R, xq, xs, r0, units, xr, dx, hs, acc);
    UNROLL for (int r = 0; r < R; r++) corr[r] = 0.0f;
    if (B == 16) {
        for (int64_t u = 0; u < units; u++) {
            const uint8_t *b0 = row + (size_t)(2 * u) * bb;
            const uint8_t *b1 = 2 * u + 1 < nb ? b0 + bb : NULL; /* a short last unit */
            float d0 = f16_scalar(b0), d1 = b1 ? f16_scalar(b1) : 0.0f;
            float m0 = asym ? f16_scalar(b0 + 2) : -8.0f * d0;
            float m1 = b1 ? (asym ? f16_scalar(b1 + 2) : -8.0f * d1) : 0.0f;
            __m256i wu = q4_pair(b0 + hdr, b1 ? b1 + hdr : NULL);
            __m256 dw = _mm256_setr_ps(d0, d0, d0, d0, d1, d1, d1, d1);
            UNROLL for (int r = 0; r < R; r++) {
                __m256i p = dot_u8s8(wu, _mm256_loadu_si256((const __m256i *)(xr[r] + u * XU)));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                         _mm256_mul_ps(dw, _mm256_set1_ps(dx[r][u])), acc[r]);
                corr[r] += m0 * hs[r][2 * u] + m1 * hs[r][2 * u + 1];
            }
        }
    } else {
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + (size_t)b * bb;
            float d = f16_scalar(blk), m = asym ? f16_scalar(blk + 2) : -8.0f * d;
            UNROLL for (int k = 0; k < B / XU; k++) {
                int64_t u = b * (B / XU) + k;
                __m256i wu = q4_unit(B, blk + hdr, k);
                UNROLL for (int r = 0; r < R; r++) {
                    __m256i p = dot_u8s8(wu, _mm256_loadu_si256((const __m256i *)(xr[r] + u * XU)));
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * dx[r][u]),
                                             acc[r]);
                    corr[r] += m * (hs[r][2 * u] + hs[r][2 * u + 1]);
                }
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++)
        y[(r0 + r) * w->n_out + o] = hsum8(acc[r]) + corr[r] + (bias ? bias[o] : 0.0f);
}

/* Rows r0 .. r0+R-1 of x against weight row o of Q8_0 (blocks of 32 with an f16 scale) or Q8_C
 * (plain int8 rows, the row's scale at the end; a short last unit is read through a copy). */
INLINE void q8_rows(bool blocked, int R, float *y, const uint8_t *xq, size_t xs,
                    const slate__wmat *w, const float *bias, int64_t r0, int64_t o) {
    int64_t units = x_units(w), n_in = w->n_in;
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    const int8_t *xr[4];
    const float *dx[4], *hs[4]; /* hs unused */
    __m256 acc[4];
    x_rows(R, xq, xs, r0, units, xr, dx, hs, acc);
    for (int64_t u = 0; u < units; u++) {
        float d = 1.0f;
        __m256i wv;
        if (blocked) {
            const uint8_t *blk = row + (size_t)u * sizeof(slate__block_q8_0);
            d = f16_scalar(blk);
            wv = _mm256_loadu_si256((const __m256i *)(blk + 2));
        } else if (n_in - u * XU >= XU) {
            wv = _mm256_loadu_si256((const __m256i *)(row + u * XU));
        } else {
            uint8_t buf[XU] = {0};
            memcpy(buf, row + u * XU, (size_t)(n_in - u * XU));
            wv = _mm256_loadu_si256((const __m256i *)buf);
        }
        __m256i wu = _mm256_sign_epi8(wv, wv);
        UNROLL for (int r = 0; r < R; r++) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xr[r] + u * XU));
            __m256i p = dot_u8s8(wu, _mm256_sign_epi8(xv, wv));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * dx[r][u]), acc[r]);
        }
    }
    float sc = blocked ? 1.0f : w->scales[o];
    UNROLL for (int r = 0; r < R; r++)
        y[(r0 + r) * w->n_out + o] = hsum8(acc[r]) * sc + (bias ? bias[o] : 0.0f);
}

/* Rows r0 .. r0+R-1 of x against weight row o of an IQ4_NL matrix (blocks of 32 = one unit of x,
 * 18 bytes each: only 2-byte aligned, every load is unaligned). A block's 32 int8 levels L come
 * from one vpshufb (iq4_unit); vpmaddubsw wants an unsigned factor, so |L| is the u8 side and L's
 * sign moves onto x (vpsignb), as for Q8_0. No overflow: |L| <= 127 and |q| <= 127 (quantize_x
 * rounds x * 127 / max|x| for finite x: never -128, so vpsignb cannot wrap), so a vpmaddubsw
 * pair is at most 2 * 127 * 127 = 32258 < 32767 (no s16 saturation; even a -128 in x would give
 * 2 * 127 * 128 = 32512) and a vpmaddwd (vpdpbusd) lane 4 * 127 * 128 < 2^31: the sums are
 * exact, so avx2_vnni's are avx2's bit for bit. */
INLINE void iq4nl_rows(int R, float *y, const uint8_t *xq, size_t xs, const slate__wmat *w,
                       const float *bias, int64_t r0, int64_t o) {
    int64_t units = x_units(w);
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    const int8_t *xr[4];
    const float *dx[4], *hs[4]; /* hs unused */
    __m256 acc[4];
    x_rows(R, xq, xs, r0, units, xr, dx, hs, acc);
    const __m256i levels = iq4_levels(slate__iq4_levels);
    const size_t bb = sizeof(slate__block_iq4_nl);
    int64_t u = 0;
    /* 8 blocks at a time: their d as one vector (vcvtph2ps of the 8 f16), d dx of each row in
     * one multiply, stored and broadcast from memory per unit (a load, not a shuffle on the
     * port vpshufb needs). Against a scalar d * dx and a register broadcast per block and row,
     * one thread, same runs, [2048][2048] decode from cache: best 193-195 us vs 224-225 (three
     * runs); from DRAM 0.94-1.05 of its time. The same products as the tail's scalar ones, so
     * the result does not depend on where a block falls. */
    for (; u + 8 <= units; u += 8) {
        const uint8_t *b8 = row + (size_t)u * bb;
        uint16_t h[8];
        UNROLL for (int k = 0; k < 8; k++) memcpy(&h[k], b8 + k * bb, 2);
        __m256 d8 = _mm256_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2],
                                                   (short)h[3], (short)h[4], (short)h[5],
                                                   (short)h[6], (short)h[7]));
        float fs[4][8] __attribute__((aligned(32)));
        UNROLL for (int r = 0; r < R; r++)
            _mm256_store_ps(fs[r], _mm256_mul_ps(d8, _mm256_loadu_ps(dx[r] + u)));
        UNROLL for (int k = 0; k < 8; k++) {
            __m256i wv = iq4_unit(levels, b8 + k * bb + 2), wu = _mm256_abs_epi8(wv);
            UNROLL for (int r = 0; r < R; r++) {
                __m256i xv = _mm256_loadu_si256((const __m256i *)(xr[r] + (u + k) * XU));
                __m256i p = dot_u8s8(wu, _mm256_sign_epi8(xv, wv));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&fs[r][k]),
                                         acc[r]);
            }
        }
    }
    for (; u < units; u++) { /* the last n_in / 32 % 8 blocks */
        const uint8_t *blk = row + (size_t)u * bb;
        float d = f16_scalar(blk);
        __m256i wv = iq4_unit(levels, blk + 2), wu = _mm256_abs_epi8(wv);
        UNROLL for (int r = 0; r < R; r++) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xr[r] + u * XU));
            __m256i p = dot_u8s8(wu, _mm256_sign_epi8(xv, wv));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * dx[r][u]), acc[r]);
        }
    }
    UNROLL for (int r = 0; r < R; r++)
        y[(r0 + r) * w->n_out + o] = hsum8(acc[r]) + (bias ? bias[o] : 0.0f);
}

/* Every output in [o0, o1) for every row of x, 4 rows of x per pass over a weight row. (Blocks
 * of 16 outputs sharing each 4-row group of x in L1 measured 78 vs 73 tok/s for TinyLlama int4
 * prefill-512, one run each: within noise, as the kernel is bound by its integer work.) */
#define ROWS(CALL)                                                                                 \
    for (int64_t o = o0; o < o1; o++) {                                                            \
        int64_t r = 0;                                                                             \
        for (; r + 4 <= n_rows; r += 4) CALL(4);                                                   \
        switch (n_rows - r) {                                                                      \
        case 3: CALL(3); break;                                                                    \
        case 2: CALL(2); break;                                                                    \
        case 1: CALL(1); break;                                                                    \
        default: break;                                                                            \
        }                                                                                          \
    }

INLINE void q8_matmul(bool blocked, float *y, const void *xq, const slate__wmat *w,
                      const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    size_t xs = x_stride(w);
#define Q8_CALL(R) q8_rows(blocked, R, y, xq, xs, w, bias, r, o)
    ROWS(Q8_CALL)
#undef Q8_CALL
}

static void matmul_q8_0(float *y, const float *x, const void *xq, const slate__wmat *w,
                        const float *b, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    q8_matmul(true, y, xq, w, b, n_rows, o0, o1);
}

static void matmul_q8_c(float *y, const float *x, const void *xq, const slate__wmat *w,
                        const float *b, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    q8_matmul(false, y, xq, w, b, n_rows, o0, o1);
}

INLINE void q4_matmul(int B, bool asym, float *y, const void *xq, const slate__wmat *w,
                      const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    size_t xs = x_stride(w);
#define Q4_CALL(R) q4_rows(B, asym, R, y, xq, xs, w, bias, r, o)
    ROWS(Q4_CALL)
#undef Q4_CALL
}

static void matmul_q4(float *y, const float *x, const void *xq, const slate__wmat *w,
                      const float *b, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    switch (w->block * 2 + w->asym) {
    case 32: q4_matmul(16, false, y, xq, w, b, n_rows, o0, o1); break;
    case 33: q4_matmul(16, true, y, xq, w, b, n_rows, o0, o1); break;
    case 64: q4_matmul(32, false, y, xq, w, b, n_rows, o0, o1); break;
    case 65: q4_matmul(32, true, y, xq, w, b, n_rows, o0, o1); break;
    case 128: q4_matmul(64, false, y, xq, w, b, n_rows, o0, o1); break;
    case 129: q4_matmul(64, true, y, xq, w, b, n_rows, o0, o1); break;
    case 256: q4_matmul(128, false, y, xq, w, b, n_rows, o0, o1); break;
    default: q4_matmul(128, true, y, xq, w, b, n_rows, o0, o1); break;
    }
}

static void matmul_iq4_nl(float *y, const float *x, const void *xq, const slate__wmat *w,
                          const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    size_t xs = x_stride(w);
#define IQ4NL_CALL(R) iq4nl_rows(R, y, xq, xs, w, bias, r, o)
    ROWS(IQ4NL_CALL)
#undef IQ4NL_CALL
}

/* Embedding lookup of IQ4_NL: per block the 32 levels (iq4_unit), 8 at a time as f32 times d,
 * exactly ref's product d * L (one rounding), so the result is bit-identical. */
static void row_to_f32_iq4_nl(float *dst, const slate__wmat *w, int64_t o) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    const __m256i levels = iq4_levels(slate__iq4_levels);
    for (int64_t b = 0; b < w->n_in / 32; b++) {
        const uint8_t *blk = row + (size_t)b * sizeof(slate__block_iq4_nl);
        __m256 d = _mm256_set1_ps(f16_scalar(blk));
        __m256i l = iq4_unit(levels, blk + 2);
        __m128i h[2] = {_mm256_castsi256_si128(l), _mm256_extracti128_si256(l, 1)};
        UNROLL for (int k = 0; k < 4; k++) {
            __m256i l32 = _mm256_cvtepi8_epi32(k % 2 ? _mm_srli_si128(h[k / 2], 8) : h[k / 2]);
            _mm256_storeu_ps(dst + 32 * b + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(l32)));
        }
    }
}

#ifdef SLATE_AVX2_Q_VNNI
void slate__avx2_vnni_fill(slate__kernels *k) {
#else
void slate__avx2_q_fill(slate__kernels *k) {
#endif
    static const slate_dtype q[] = {SLATE_DTYPE_Q8_0, SLATE_DTYPE_Q4, SLATE_DTYPE_Q8_C,
                                    SLATE_DTYPE_IQ4_NL};
    k->matmul[SLATE_DTYPE_Q8_0] = matmul_q8_0;
    k->matmul[SLATE_DTYPE_Q4] = matmul_q4;
    k->matmul[SLATE_DTYPE_Q8_C] = matmul_q8_c;
    k->matmul[SLATE_DTYPE_IQ4_NL] = matmul_iq4_nl;
    k->row_to_f32[SLATE_DTYPE_IQ4_NL] = row_to_f32_iq4_nl;
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        k->xq_plan[q[i]] = xq_plan;
        k->quantize_x[q[i]] = quantize_x;
    }
}
