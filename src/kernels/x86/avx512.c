/*
 * avx512.c - AVX-512 (F, BW, VL, DQ) + F16C variants of the kernel table; same signatures and
 * meaning as kernels/ref/ref.c (the specification). dispatch.c starts from the avx2 table and
 * lets this file override what it implements, so it is installed only on CPUs that also have
 * AVX2/FMA/F16C. No VNNI or BF16 instructions: bf16 becomes f32 by a 16-bit shift, which is
 * exact, and f16 by vcvtph2ps, also exact.
 *
 * The structure follows avx2.c with 16-float vectors and masked loads for every tail:
 *   matmul: decode (n_rows == 1) streams four weight rows at a time with four accumulators
 *   and a software prefetch PF_BYTES ahead in each row;
 *   prefill uses a 4x4 register tile (16 accumulators, 4 weight vectors, 1 x vector of the 32
 *   registers): each weight chunk is converted once and used for 4 rows of x. Cache blocking
 *   MC rows x KB inputs x OB outputs as in avx2.c; later K blocks add their partial sums to y.
 *   attention: blocks of 8 cache positions, 8 row dot products over head_dim in zmm, one
 *   online-softmax update per block with a vectorized exp, then the v rows with nonzero weight
 *   accumulated into registers over head_dim; for ranges too long for L2 the next block's rows
 *   are prefetched. The query heads that share a kv head (GQA) run together, up to HG per
 *   pass: each block's K/V rows come from memory once (f16 rows converted to f32 once) and the
 *   other heads read them from L1; a block whose 8 scores are all valid skips the compaction
 *   of valid rows. -inf and NaN scores are skipped exactly as in ref; all -inf gives out = 0.
 * Masked loads never touch memory past the arrays, so nothing is read outside them.
 */
#include "kernels/kernels.h"

#include <immintrin.h>
#include <math.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/* ---- loads ------------------------------------------------------------------------------- */

INLINE __mmask16 tail16(int64_t n) { return (__mmask16)((1u << n) - 1u); } /* n in [0, 16) */

INLINE __m512 bf16x16_to_f32(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 16 weights at element i of a row, as f32. */
INLINE __m512 load_w16(slate_dtype dt, const void *w, int64_t i) {
    if (dt == SLATE_DTYPE_F32) return _mm512_loadu_ps((const float *)w + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    return dt == SLATE_DTYPE_F16 ? _mm512_cvtph_ps(h) : bf16x16_to_f32(h);
}

/* The lanes of m of the 16 weights at element i, zeros elsewhere; masked-off lanes are not
 * read. */
INLINE __m512 load_w16_mask(slate_dtype dt, const void *w, int64_t i, __mmask16 m) {
    if (dt == SLATE_DTYPE_F32) return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i);
    return dt == SLATE_DTYPE_F16 ? _mm512_cvtph_ps(h) : bf16x16_to_f32(h);
}

/* ---- matmul ------------------------------------------------------------------------------ */

/* Decode reads each weight row once from DRAM; hardware prefetch alone left a single core at
 * ~25 GB/s on an 8192 x 8192 f16 matrix, a software prefetch 2 KiB ahead in each of the four
 * streams gave ~30 GB/s (Zen 5, 1 KiB to 3 KiB all similar). Not used in prefill, where the
 * weight block is already in L1. */
enum { PF_BYTES = 2048 };

/* acc[r][c] += W[c][i..i+16) * x[r][i..i+16) */
INLINE void step(slate_dtype dt, int R, int O, __m512 acc[4][4], const float *const xr[4],
                 const void *const wr[4], int64_t i) {
    __m512 wv[4];
    UNROLL for (int c = 0; c < O; c++) wv[c] = load_w16(dt, wr[c], i);
    UNROLL for (int r = 0; r < R; r++) {
        __m512 xv = _mm512_loadu_ps(xr[r] + i);
        UNROLL for (int c = 0; c < O; c++) acc[r][c] = _mm512_fmadd_ps(wv[c], xv, acc[r][c]);
    }
}

/* The R x O tile y[r0..r0+R)[o..o+O) over inputs [k0, k1): first sets y = sum + bias, later K
 * blocks add their partial sums. R, O and dt are compile-time constants at every call site. */
INLINE void tile(slate_dtype dt, int R, int O, float *y, const float *x, const void *w,
                 const float *bias, int64_t n_in, int64_t n_out, int64_t r0, int64_t o, int64_t k0,
                 int64_t k1, bool first, bool pf) {
    __m512 acc[4][4];
    const float *xr[4];
    const void *wr[4];
    UNROLL for (int r = 0; r < R; r++) xr[r] = x + (r0 + r) * n_in;
    UNROLL for (int c = 0; c < O; c++) {
        wr[c] = dt == SLATE_DTYPE_F32 ? (const void *)((const float *)w + (o + c) * n_in)
                                      : (const void *)((const uint16_t *)w + (o + c) * n_in);
    }
    UNROLL for (int r = 0; r < R; r++) {
        UNROLL for (int c = 0; c < O; c++) acc[r][c] = _mm512_setzero_ps();
    }
    int64_t i = k0;
    if (pf) {
        /* One prefetch per 64-byte line of each weight row, PF_BYTES ahead, then that line's
         * chunks. Prefetches never fault, so running past the end of W is harmless. */
        const int64_t line = dt == SLATE_DTYPE_F32 ? 16 : 32, es = dt == SLATE_DTYPE_F32 ? 4 : 2;
        for (; i + line <= k1; i += line) {
            UNROLL for (int c = 0; c < O; c++) {
                uintptr_t ahead = (uintptr_t)wr[c] + (uintptr_t)(i * es + PF_BYTES);
                _mm_prefetch((const char *)ahead, _MM_HINT_T0);
            }
            UNROLL for (int64_t u = 0; u < line; u += 16) step(dt, R, O, acc, xr, wr, i + u);
        }
    }
    for (; i + 16 <= k1; i += 16) step(dt, R, O, acc, xr, wr, i);
    if (i < k1) {
        __mmask16 m = tail16(k1 - i);
        __m512 wv[4];
        UNROLL for (int c = 0; c < O; c++) wv[c] = load_w16_mask(dt, wr[c], i, m);
        UNROLL for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_maskz_loadu_ps(m, xr[r] + i);
            UNROLL for (int c = 0; c < O; c++) acc[r][c] = _mm512_fmadd_ps(wv[c], xv, acc[r][c]);
        }
    }
    UNROLL for (int r = 0; r < R; r++) {
        UNROLL for (int c = 0; c < O; c++) {
            float *dst = y + (r0 + r) * n_out + o + c;
            float base = first ? (bias ? bias[o + c] : 0.0f) : *dst;
            *dst = base + _mm512_reduce_add_ps(acc[r][c]);
        }
    }
}

/* Row block, K block and output block, as in avx2.c: MC * KB * 4 bytes of x (256 KiB) fit in
 * L2; OB * KB weights (16 KiB f16, 32 KiB f32) fit in L1 next to a 4-row x chunk. */
enum { MC = 128, KB = 512, OB = 16 };

/* All full 4-wide output tiles of [ob, oe) for R rows from row r, then the leftover outputs. */
#define TILE_ROW(R)                                                                                \
    do {                                                                                           \
        for (; o + 4 <= oe; o += 4)                                                                \
            tile(dt, R, 4, y, x, w, bias, n_in, n_out, r, o, kb, ke, first, false);                \
        for (; o < oe; o++)                                                                        \
            tile(dt, R, 1, y, x, w, bias, n_in, n_out, r, o, kb, ke, first, false);                \
    } while (0)

INLINE void matmul_any(slate_dtype dt, float *y, const float *x, const void *w, const float *bias,
                       int64_t n_rows, int64_t n_in, int64_t n_out, int64_t o0, int64_t o1) {
    if (n_rows == 1) {
        int64_t o = o0;
        for (; o + 4 <= o1; o += 4)
            tile(dt, 1, 4, y, x, w, bias, n_in, n_out, 0, o, 0, n_in, true, true);
        for (; o < o1; o++) tile(dt, 1, 1, y, x, w, bias, n_in, n_out, 0, o, 0, n_in, true, true);
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

INLINE void to_f32_any(slate_dtype dt, float *d, const void *s, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, load_w16(dt, s, i));
    if (i < n) {
        __mmask16 m = tail16(n - i);
        _mm512_mask_storeu_ps(d + i, m, load_w16_mask(dt, s, i, m));
    }
}
static void to_f32_f16(float *d, const void *s, int64_t n) { to_f32_any(SLATE_DTYPE_F16, d, s, n); }
static void to_f32_bf16(float *d, const void *s, int64_t n) {
    to_f32_any(SLATE_DTYPE_BF16, d, s, n);
}

/* ---- attention --------------------------------------------------------------------------- */

/* e^x for x <= 0, as exp8 in avx2.c (Cephes expf, about 2 ulp; below -87.3 gives ~1e-38). */
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

INLINE __m256 zmm_fold(__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}

/* q . row[t] for 8 cache rows of dtype dt, as [dot_0, ..., dot_7]. */
INLINE __m256 dot8(slate_dtype dt, const float *q, const void *const row[8], int64_t hd) {
    __m512 a[8];
    UNROLL for (int t = 0; t < 8; t++) a[t] = _mm512_setzero_ps();
    int64_t d = 0;
    for (; d + 16 <= hd; d += 16) {
        __m512 qv = _mm512_loadu_ps(q + d);
        UNROLL for (int t = 0; t < 8; t++) a[t] =
            _mm512_fmadd_ps(qv, load_w16(dt, row[t], d), a[t]);
    }
    if (d < hd) {
        __mmask16 m = tail16(hd - d);
        __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
        UNROLL for (int t = 0; t < 8; t++) a[t] =
            _mm512_fmadd_ps(qv, load_w16_mask(dt, row[t], d, m), a[t]);
    }
    __m256 h0 = _mm256_hadd_ps(zmm_fold(a[0]), zmm_fold(a[1]));
    __m256 h1 = _mm256_hadd_ps(zmm_fold(a[2]), zmm_fold(a[3]));
    __m256 h2 = _mm256_hadd_ps(zmm_fold(a[4]), zmm_fold(a[5]));
    __m256 h3 = _mm256_hadd_ps(zmm_fold(a[6]), zmm_fold(a[7]));
    __m256 g0 = _mm256_hadd_ps(h0, h1), g1 = _mm256_hadd_ps(h2, h3);
    return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20),
                         _mm256_permute2f128_ps(g0, g1, 0x31));
}

INLINE const void *kv_row(slate_dtype dt, const void *base, int64_t j, int64_t stride) {
    return dt == SLATE_DTYPE_F32 ? (const void *)((const float *)base + j * stride)
                                 : (const void *)((const uint16_t *)base + j * stride);
}

/* K and V rows [ja, jb) into L1. When the rows come from DRAM (long ranges), fetching the next
 * block's rows while this one is computed gave 10-35% more (8 kv heads x 8192 positions x 128
 * f16, rows 2 KiB apart: ~10 -> 11-14 GB/s on Zen 5, one core, noisy); when K and V fit in L2
 * it cost ~12%, so it was used only for ranges whose K and V together exceed PF_ATTN_BYTES.
 * With the heads of a kv head grouped (more work per block) and fetching PF_ATTN_AHEAD rows
 * ahead instead of the next 8, it costs nothing measurable in L2 (60.2-61.0 us for 4 kv heads x
 * 8 heads x 512 f16 positions, head_dim 64, either way) and gains 5-15% from DRAM (decode: the
 * cache of a layer was evicted by the weights since the last token; 100-105 -> 86-95 us). */
enum { PF_ATTN_BYTES = 0, PF_ATTN_AHEAD = 32 };

INLINE void prefetch_rows(slate_dtype dt, const void *k, const void *v, int64_t stride, int64_t ja,
                          int64_t jb, int64_t hd) {
    int64_t n_bytes = hd * (dt == SLATE_DTYPE_F32 ? 4 : 2);
    for (int64_t j = ja; j < jb; j++) {
        const char *pk = kv_row(dt, k, j, stride), *pv = kv_row(dt, v, j, stride);
        for (int64_t b = 0; b < n_bytes; b += 64) {
            _mm_prefetch(pk + b, _MM_HINT_T0);
            _mm_prefetch(pv + b, _MM_HINT_T0);
        }
    }
}

/* The running softmax state of one query head: max m, sum l, weighted sum of v rows acc. */
typedef struct head_acc {
    float acc[SLATE__MAX_HEAD_DIM] __attribute__((aligned(64)));
    float m, l;
} head_acc;

/* Query heads per pass over the cache: their states (8 x 2 KiB) stay in L1 next to the block's
 * K and V rows, which each head of the pass reads again from L1 instead of memory. */
enum { HG = 8 };

/* One block of up to 8 cache positions [jb, jb + n) for one head; kr/vr: the block's K and V
 * rows (dtype dt). */
INLINE void attn_block(slate_dtype dt, head_acc *h, const float *q, const void *const kr[8],
                       const void *const vrow[8], int64_t jb, int n, int64_t hd, float scale,
                       const float *mask) {
    int64_t hd16 = hd & ~(int64_t)15;
    __mmask16 hm = tail16(hd - hd16);
    __m256 sv = _mm256_mul_ps(dot8(dt, q, kr, hd), _mm256_set1_ps(scale));
    __mmask8 live = (__mmask8)((1u << n) - 1u);
    if (mask) sv = _mm256_add_ps(sv, _mm256_maskz_loadu_ps(live, mask + jb));
    sv = _mm256_mask_blend_ps(live, _mm256_set1_ps(-INFINITY), sv);
    /* Ordered compare: false for -inf and NaN, the scores ref skips. */
    __mmask8 valid = _mm256_cmp_ps_mask(sv, _mm256_set1_ps(-INFINITY), _CMP_GT_OQ);
    if (!valid) return;
    __m256 mx = _mm256_mask_blend_ps(valid, _mm256_set1_ps(-INFINITY), sv);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float bm = _mm_cvtss_f32(m4);
    float *acc = h->acc;
    if (bm > h->m) {
        __m512 cv = _mm512_set1_ps(expf(h->m - bm)); /* m = -inf on the first valid block: 0 */
        for (int64_t d = 0; d < hd; d += 16)
            _mm512_store_ps(acc + d, _mm512_mul_ps(_mm512_load_ps(acc + d), cv));
        h->l *= _mm512_cvtss_f32(cv);
        h->m = bm;
    }
    __m256 p = _mm256_maskz_mov_ps(valid, exp8(_mm256_sub_ps(sv, _mm256_set1_ps(h->m))));
    __m128 p4 = _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
    p4 = _mm_add_ps(p4, _mm_movehl_ps(p4, p4));
    h->l += _mm_cvtss_f32(_mm_add_ss(p4, _mm_movehdup_ps(p4)));
    float pw[8] __attribute__((aligned(32)));
    _mm256_store_ps(pw, p);
    /* The valid rows, compacted, so the v pass skips what ref skips. */
    __m512 pb[8];
    const void *vr[8];
    int nv = 0;
    if (valid == 0xff) { /* the common case: a full block, every score finite */
        UNROLL for (int t = 0; t < 8; t++) {
            pb[t] = _mm512_set1_ps(pw[t]);
            vr[t] = vrow[t];
        }
        for (int64_t d = 0; d < hd16; d += 16) {
            __m512 a = _mm512_load_ps(acc + d);
            UNROLL for (int t = 0; t < 8; t++) a = _mm512_fmadd_ps(pb[t], load_w16(dt, vr[t], d), a);
            _mm512_store_ps(acc + d, a);
        }
        nv = 8;
    } else {
        for (int t = 0; t < n; t++) {
            if (!(valid >> t & 1)) continue;
            pb[nv] = _mm512_set1_ps(pw[t]);
            vr[nv++] = vrow[t];
        }
    }
    for (int64_t d = 0; d < hd16 && nv < 8; d += 16) {
        __m512 a = _mm512_load_ps(acc + d);
        for (int t = 0; t < nv; t++) a = _mm512_fmadd_ps(pb[t], load_w16(dt, vr[t], d), a);
        _mm512_store_ps(acc + d, a);
    }
    if (hm) {
        __m512 a = _mm512_load_ps(acc + hd16);
        for (int t = 0; t < nv; t++)
            a = _mm512_fmadd_ps(pb[t], load_w16_mask(dt, vr[t], hd16, hm), a);
        _mm512_store_ps(acc + hd16, a);
    }
}

INLINE void attention_any(slate_dtype dt, float *out, const float *q, const void *k, const void *v,
                          int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                          float scale, const float *mask) {
    head_acc hs[HG];
    float cvt[2][8][SLATE__MAX_HEAD_DIM] __attribute__((aligned(64))); /* f16 blocks as f32 */
    bool pf = (j1 - j0) * hd * (dt == SLATE_DTYPE_F32 ? 4 : 2) * 2 > PF_ATTN_BYTES;
    int64_t hd16 = hd & ~(int64_t)15;
    __mmask16 hm = tail16(hd - hd16);
    for (int64_t h0 = 0; h0 < n_heads; h0 += HG) {
        int nh = n_heads - h0 < HG ? (int)(n_heads - h0) : HG;
        for (int h = 0; h < nh; h++) {
            hs[h].m = -INFINITY;
            hs[h].l = 0.0f;
            /* Whole vectors are loaded and stored: zero up to the next multiple of 16. */
            for (int64_t d = 0; d < hd; d += 16) _mm512_store_ps(hs[h].acc + d, _mm512_setzero_ps());
        }
        for (int64_t jb = j0; jb < j1; jb += 8) {
            int n = j1 - jb < 8 ? (int)(j1 - jb) : 8;
            const void *kr[8], *vr[8];
            /* Lanes past the range reuse row jb (valid memory); their scores become -inf. */
            for (int t = 0; t < 8; t++) {
                kr[t] = kv_row(dt, k, jb + (t < n ? t : 0), stride);
                vr[t] = kv_row(dt, v, jb + (t < n ? t : 0), stride);
            }
            if (pf)
                prefetch_rows(dt, k, v, stride, jb + PF_ATTN_AHEAD,
                              j1 < jb + PF_ATTN_AHEAD + 8 ? j1 : jb + PF_ATTN_AHEAD + 8, hd);
            if (dt == SLATE_DTYPE_F16 && nh > 1) {
                /* Several heads read these rows: convert them to f32 once (exact). */
                const void *kf[8], *vf[8];
                for (int t = 0; t < 8; t++) {
                    to_f32_any(SLATE_DTYPE_F16, cvt[0][t], kr[t], hd);
                    to_f32_any(SLATE_DTYPE_F16, cvt[1][t], vr[t], hd);
                    kf[t] = cvt[0][t];
                    vf[t] = cvt[1][t];
                }
                for (int h = 0; h < nh; h++)
                    attn_block(SLATE_DTYPE_F32, &hs[h], q + (h0 + h) * hd, kf, vf, jb, n, hd,
                               scale, mask);
            } else {
                for (int h = 0; h < nh; h++)
                    attn_block(dt, &hs[h], q + (h0 + h) * hd, kr, vr, jb, n, hd, scale, mask);
            }
        }
        for (int h = 0; h < nh; h++) {
            float *o = out + (h0 + h) * hd;
            __m512 iv = _mm512_set1_ps(hs[h].l > 0.0f ? 1.0f / hs[h].l : 0.0f);
            for (int64_t d = 0; d < hd16; d += 16)
                _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_load_ps(hs[h].acc + d), iv));
            if (hm) _mm512_mask_storeu_ps(o + hd16, hm, _mm512_mul_ps(_mm512_load_ps(hs[h].acc + hd16), iv));
        }
    }
}

static void attention(float *out, const float *q, const void *k, const void *v, slate_dtype kvt,
                      int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                      float scale, const float *mask) {
    if (kvt == SLATE_DTYPE_F16)
        attention_any(SLATE_DTYPE_F16, out, q, k, v, stride, j0, j1, hd, n_heads, scale, mask);
    else
        attention_any(SLATE_DTYPE_F32, out, q, k, v, stride, j0, j1, hd, n_heads, scale, mask);
}

/* ---- rms_norm ---------------------------------------------------------------------------- */

static void rms_norm(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        s0 = _mm512_fmadd_ps(a, a, s0);
        s1 = _mm512_fmadd_ps(b, b, s1);
    }
    for (; i < n; i += 16) {
        __m512 a = _mm512_maskz_loadu_ps(n - i < 16 ? tail16(n - i) : (__mmask16)0xffff, x + i);
        s0 = _mm512_fmadd_ps(a, a, s0);
    }
    float ss = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    __m512 rv = _mm512_set1_ps(1.0f / sqrtf(ss / (float)n + eps));
    /* (x * r) * w, the order ref multiplies in */
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), rv),
                                              _mm512_loadu_ps(w + i)));
    if (i < n) {
        __mmask16 m = tail16(n - i);
        _mm512_mask_storeu_ps(y + i, m,
                              _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), rv),
                                            _mm512_maskz_loadu_ps(m, w + i)));
    }
}

void slate__avx512_fill(slate__kernels *k) {
    k->name = "avx512";
    k->matmul[SLATE_DTYPE_F32] = matmul_f32;
    k->matmul[SLATE_DTYPE_F16] = matmul_f16;
    k->matmul[SLATE_DTYPE_BF16] = matmul_bf16;
    k->to_f32[SLATE_DTYPE_F16] = to_f32_f16;
    k->to_f32[SLATE_DTYPE_BF16] = to_f32_bf16;
    k->attention = attention;
    k->rms_norm = rms_norm;
}
