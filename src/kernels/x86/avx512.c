/*
 * avx512.c - AVX-512 (F, BW, VL, DQ) + F16C variants of the kernel table; same signatures and
 * meaning as kernels/ref/ref.c (the specification). dispatch.c starts from the avx2 table and
 * lets this file override what it implements, so it is installed only on CPUs that also have
 * AVX2/FMA/F16C. No VNNI or BF16 instructions: bf16 becomes f32 by a 16-bit shift, which is
 * exact, and f16 by vcvtph2ps, also exact.
 *
 * The structure follows avx2.c with 16-float vectors and masked loads for every tail:
 *   matmul: decode (n_rows == 1) streams one weight row at a time, start to end, with four
 *   accumulators (64 inputs per step) and a software prefetch PF_BYTES ahead: one sequential
 *   stream per thread, which the memory system serves faster than four interleaved rows;
 *   prefill uses a 4x4 register tile (16 accumulators, 4 weight vectors, 1 x vector of the 32
 *   registers): each weight chunk is converted once and used for 4 rows of x. Cache blocking
 *   MC rows x KB inputs x OB outputs as in avx2.c; later K blocks add their partial sums to y.
 *   attention: the query heads that share a kv head (GQA) run together, up to HG per pass,
 *   over blocks of 16 cache positions: each block's K and V rows come from memory once; with
 *   an f16 cache and head_dim a multiple of 16 the K block is transposed in registers so each
 *   dim is one vector over the 16 positions (scores without cross-lane sums) and V rows feed
 *   the P x V tiles directly; otherwise the rows are converted to f32 (exact) into L1 and 16
 *   scores per head come from 16 dot products and one cross-lane sum tree (hsum16). Then one
 *   online-softmax step with a vectorized exp, then P (heads x 16) times V (16 x head_dim) in
 *   register tiles. Rows 32 positions ahead are prefetched (a row at a time, or one run of
 *   lines where rows touch, as in the head-major cache). -inf and NaN scores are skipped
 *   exactly as in ref; all -inf gives out = 0. Measured against the previous design (blocks
 *   of 8, per-head row dots with hadd reductions, prefetches bunched per block), one thread,
 *   22 layers x 4 kv heads x 8 heads x head_dim 64, f16: 34 -> 25 ns per position and kv head
 *   with the cache in L3, and 38-40 -> 25 ns from DRAM (bunched prefetches of 16 rows: 50 ns;
 *   none: 67 ns); the transposed f16 path then 22.6 -> 19.5 ns (see attention_any). Rows side
 *   by side (the head-major cache, head_dim 64 or 128) are then addressed at constant offsets
 *   from a block's first row (blk_row) instead of through 16 row pointers, and exp16 scales by
 *   2^n with one vscalefps: bench/attn_decode.c (TinyLlama shape, depth 2048, 2 threads, the
 *   old and new builds alternating 4 times in one window) 1.90-1.97 -> 1.79-1.84 ms per token,
 *   21.1-21.9 -> 19.8-20.5 ns per position and kv head (thread time). With K stored K16
 *   (attention_k16, kernels.h) the scores load each dim of a block as it is and are computed
 *   one block ahead, between a block's softmax and its P x V (an Intel Xeon, one thread, L2,
 *   head_dim 64: 17.3 -> 15.5 -> 15.0 ns; docs/design.md "Kernels"). Gemma 2's
 *   score cap runs on each head's 16 scores at once with a vectorized tanh (tanh16), which the
 *   softcap kernel (the final logit cap) uses too.
 * Masked loads never touch memory past the arrays, so nothing is read outside them.
 */
#include "kernels/kernels.h"
#include "kernels/x86/prefetch.h"

#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

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

/* Decode reads each weight row once from DRAM. Measured on the Zen 5 VM, 2 threads, f16
 * 5632 x 2048 matrices (1 GB in all, so from DRAM), plain read of the same bytes 45-47 GB/s:
 * four rows at a time (a 1x4 tile, four interleaved streams) 32-36 GB/s whatever the prefetch
 * (none, 1-64 KiB ahead, T0/T1/NTA); one row at a time with four accumulators 43 GB/s, with a
 * prefetch 1 KiB ahead 42-46 GB/s (512 B: 43.5, 2 KiB: 45.5, 4 KiB+: ~40). So decode streams
 * one row at a time; the prefetch is not used in prefill, where the weight block is in L1.
 * The prefetch fills L2, not L1 (SLATE_PF_STREAM, kernels/x86/prefetch.h): on a Zen 4 VM the
 * L1 prefetch halved this stream, and TinyLlama fp16 decode there (`slate bench --mode state`,
 * 2 threads, four pairs of the two builds alternating) went 8.7-9.8 -> 11.4-12.8 tok/s.
 * Except on AMD family 26 (Zen 5), where it fills L1 (g_stream_t0): on the target VM,
 * bench_kq_ab with B = -DSLATE_PF_STREAM=_MM_HINT_T0 (2026-12-03, 7 rounds, two runs), B / A
 * median decode GB/s on TinyLlama's four shapes 1.078 / 1.068 / 0.909 / 1.086, then 1.039 /
 * 1.053 / 1.033 / 1.119: T0 ahead in 7 of 8. */
enum { PF_BYTES = 1024 };

/* Rows longer than PF_LONG_N_IN inputs prefetch PF_BYTES_LONG ahead. Their x (f32, 16 KiB and
 * more: ffn_down's 5632 inputs are 22 KiB) no longer sits in L1 next to the weight stream, and
 * its refills from L2 slow the stream: on the Zen 5 VM, one thread, 22 layers of TinyLlama's
 * f16 FFN from DRAM (a driver of this loop), ffn_down ran at 0.78-0.80 of gate/up's GB/s with
 * x as f32, 0.89-0.95 with the same x as f16 (11 KiB), 0.97-1.01 with no x at all; two rows
 * per x load (half the x loads) changed nothing (0.76-0.77), nor did prefetching x. Prefetching
 * further ahead did: 2 threads, exec's chunks, three rounds, ffn_down 33.3-36.2 GB/s at 1 KiB,
 * 37.9-40.6 at 4 KiB, 40.2-40.8 at 8 KiB (gate/up in the same rounds 42-46). The short rows
 * keep 1 KiB (4 KiB+ was slower for them, above). */
enum { PF_LONG_N_IN = 4096, PF_BYTES_LONG = 4096 };

/* The f16/bf16/f32 decode stream prefetches into L1 (true) or SLATE_PF_STREAM's level (false);
 * set once by slate__avx512_fill, before the table is published (dispatch.c's pthread_once).
 * Where it is true, an A/B build's -DSLATE_PF_STREAM changes nothing in this loop. */
static bool g_stream_t0;

/* AMD family 26 (Zen 5): cpuid's vendor string and its base + extended family. */
static bool cpu_is_amd_family26(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u)
        return false; /* not "AuthenticAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    unsigned fam = (a >> 8) & 0xfu;
    if (fam == 0xfu) fam += (a >> 20) & 0xffu;
    return fam == 26;
}

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
                 int64_t k1, bool first) {
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
            tile(dt, R, 4, y, x, w, bias, n_in, n_out, r, o, kb, ke, first);                \
        for (; o < oe; o++)                                                                        \
            tile(dt, R, 1, y, x, w, bias, n_in, n_out, r, o, kb, ke, first);                \
    } while (0)

/* Decode: y[o] = W[o] . x (+ bias[o]) for o in [o0, o1), each row read once from start to end
 * (see PF_BYTES, PF_BYTES_LONG). Four accumulators of 16 inputs each hide the FMA latency. */
INLINE void decode_rows(slate_dtype dt, bool t0, float *y, const float *x, const void *w,
                        const float *bias, int64_t n_in, int64_t o0, int64_t o1) {
    const int64_t es = dt == SLATE_DTYPE_F32 ? 4 : 2;
    const int64_t ahead = n_in > PF_LONG_N_IN ? PF_BYTES_LONG : PF_BYTES;
    for (int64_t o = o0; o < o1; o++) {
        const void *wr = (const char *)w + o * n_in * es;
        const char *pf = (const char *)wr + ahead;
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
        int64_t i = 0;
        for (; i + 64 <= n_in; i += 64) {
            /* 64 inputs are 128 bytes (f16, bf16) or 256 (f32): one prefetch per line. Past the
             * end of W the prefetches are harmless (they never fault). */
            UNROLL for (int64_t b = 0; b < 64 * es; b += 64)
                if (t0) _mm_prefetch(pf + i * es + b, _MM_HINT_T0);
                else _mm_prefetch(pf + i * es + b, SLATE_PF_STREAM);
            UNROLL for (int u = 0; u < 4; u++)
                acc[u] = _mm512_fmadd_ps(load_w16(dt, wr, i + 16 * u), _mm512_loadu_ps(x + i + 16 * u),
                                         acc[u]);
        }
        for (int u = 0; i < n_in; i += 16, u++) {
            __mmask16 m = n_in - i >= 16 ? (__mmask16)0xffff : tail16(n_in - i);
            acc[u] = _mm512_fmadd_ps(load_w16_mask(dt, wr, i, m), _mm512_maskz_loadu_ps(m, x + i),
                                     acc[u]);
        }
        __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
        y[o] = (bias ? bias[o] : 0.0f) + _mm512_reduce_add_ps(s);
    }
}

INLINE void matmul_any(slate_dtype dt, float *y, const float *x, const void *w, const float *bias,
                       int64_t n_rows, int64_t n_in, int64_t n_out, int64_t o0, int64_t o1) {
    if (n_rows == 1) {
        if (g_stream_t0) decode_rows(dt, true, y, x, w, bias, n_in, o0, o1);
        else decode_rows(dt, false, y, x, w, bias, n_in, o0, o1);
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

/* e^x for x <= 0 (Cephes expf as exp8 in avx2.c, about 2 ulp; below -87.3 gives ~1e-38). 2^n
 * is applied by vscalefps, one instruction for exp8's convert, add, shift and multiply: the
 * same exact product for every clamped x (n in [-126, 127]; at 88.376 itself n is 128, where
 * the shift made inf and vscalefps a finite 2.4e38). */
INLINE __m512 exp16(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.33654f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.37626f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* tanh(x) for any x (Cephes tanhf's method; the same as tanh8 in avx2.c and tanh4 in
 * arm/neon.c), on |x| with x's sign put back at the end (tanh is odd; so -0 stays -0): below
 * 0.625 an odd polynomial, |x| + |x|^3 P(x^2); above 1 - 2 / (e^2|x| + 1) with exp16, |x|
 * clamped to 10, where it rounds to exactly 1. Over all 2^32 floats (an exhaustive sweep, not
 * committed): at most 1.36 ulp from tanh (8.1e-8 absolute, 1.5e-7 relative) and 2 ulp from
 * glibc's tanhf (1.2e-7, 2.2e-7). |x| >= 10 and +-inf give +-1 exactly, |x| < 2^-13 (+-0,
 * subnormals) gives x, NaN gives NaN (it fails the >= test, so it takes the polynomial).
 * tests/kernels/kcheck.c (kc_tanh) checks all of this on a sweep of every kind of float. */
INLINE __m512 tanh16(__m512 x) {
    const __m512 ax = _mm512_abs_ps(x);
    const __m512 z = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(2.06390887954e-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-5.37397155531e-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.33314422036e-1f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-3.33332819422e-1f));
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), ax, ax);
    const __m512 a = _mm512_min_ps(ax, _mm512_set1_ps(10.0f));
    const __m512 e = exp16(_mm512_add_ps(a, a));
    const __m512 big = _mm512_sub_ps(
        _mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    const __m512 r =
        _mm512_mask_mov_ps(small, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_GE_OQ), big);
    /* r | (x & sign): r >= 0 (or NaN), so this is copysign(r, x) */
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        _mm512_castps_si512(r), _mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN), 0xf8));
}

/* Lane l of hsum16's result is the sum of the lanes of a[HS_MAP[l]]; the map is its own
 * inverse, so a caller that puts row HS_MAP[i]'s products in a[i] gets row l's sum in lane l. */
static const int HS_MAP[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};

/* Sixteen vectors -> one vector of their lane sums (in the order of HS_MAP): halves of 256
 * bits, then 128-bit lanes, then pairs; 15 adds and 30 shuffles for 16 dot products. */
INLINE __m512 hsum16(const __m512 a[16]) {
    __m512 b[8], c[4], d[2];
    UNROLL for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[i], a[i + 8], 0x44),
                             _mm512_shuffle_f32x4(a[i], a[i + 8], 0xEE));
    UNROLL for (int i = 0; i < 4; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[i], b[i + 4], 0x88),
                             _mm512_shuffle_f32x4(b[i], b[i + 4], 0xDD));
    UNROLL for (int i = 0; i < 2; i++)
        d[i] = _mm512_add_ps(_mm512_unpacklo_ps(c[i], c[i + 2]),
                             _mm512_unpackhi_ps(c[i], c[i + 2]));
    return _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x44), _mm512_shuffle_ps(d[0], d[1], 0xEE));
}

/* Row j of an F32 or F16 cache, rows `stride` elements apart (an int8 cache's rows, `stride`
 * bytes apart, are addressed where attention_any reads them). */
INLINE const void *kv_row(slate_dtype dt, const void *base, int64_t j, int64_t stride) {
    return dt == SLATE_DTYPE_F32 ? (const void *)((const float *)base + j * stride)
                                 : (const void *)((const uint16_t *)base + j * stride);
}

/* The lanes of m of the 16 cache values at element i of an F32 or F16 row, as f32. */
INLINE __m512 load_kv16(slate_dtype dt, const void *row, int64_t i, __mmask16 m) {
    return load_w16_mask(dt, row, i, m);
}

/* 16 int8 values at p (the lanes of m; the others 0); a whole vector's with a plain load, which
 * the widening instruction takes as its memory operand. */
INLINE __m128i load_i8x16(const uint8_t *p, __mmask16 m) {
    return m == (__mmask16)0xffff ? _mm_loadu_si128((const __m128i *)p)
                                  : _mm_maskz_loadu_epi8(m, (const int8_t *)p);
}

/* Positions per block, query heads per pass, and how many positions ahead each row is
 * prefetched into L1 (a multiple of BJ; 16-48 measured alike; into L2 instead: ~10 % slower,
 * 2026-11-30, the kernel of then on the Zen 5 VM). Blocks of whole rows side by side (K16 or
 * not) prefetch a line per step of their FMA loops instead of all 64 lines of a block at its
 * start: for K16 on a Zen 4 VM (bench_attn_ab, depth 2048, three runs each) that was
 * 1.32-1.36x faster with K and V both in the score loop, 1.04-1.15x more with V moved into the
 * P x V loop; there, once spread, L1 and L2 measured alike (0.96-1.04x), and 32, 64 or 128
 * positions ahead alike. Before the spread, L2 had been 7-21 % faster there: a burst of
 * prefetches had filled the L1's miss buffers. L1 stays for passes of more than PF_ATTN_THIN
 * heads, the target machine's earlier measurement (bench_attn_ab with -DSLATE_AB_KERNEL=avx512
 * -DSLATE_AB_FLAGS=-DSLATE_PF_ATTN=_MM_HINT_T1 compares them); thinner passes: below. */
enum { BJ = 16, HG = 8, PF_ATTN_AHEAD = 32 };
_Static_assert((int)HG == (int)SLATE__ATTN_PASS_HEADS, "exec batches rows into passes of HG heads");
#ifndef SLATE_PF_ATTN
#define SLATE_PF_ATTN _MM_HINT_T0
#endif
/* Passes of at most PF_ATTN_THIN query heads do too little arithmetic per cache byte to hide
 * DRAM (2 multiply-adds per byte at 4 heads against 4 at 8): their lines are prefetched with
 * SLATE_PF_ATTN_THIN, into L2, which lets more of them be in flight than the L1's miss buffers
 * allow. bench_attn_ab against L1 on the Zen 4 VM (2026-12-03, depth 2048, three runs each):
 * the hd128 shape's 4 heads per kv head (K16; Llama-3.1-8B's layers) 1.07-1.18x, Gemma-3-1B's
 * 4 (rows, hd 256) 1.25-1.46x, Phi-3-mini's 1 (rows, hd 96) 1.18-1.39x; TinyLlama's 8 (K16,
 * hd 64) were 6-9 % and Qwen2.5-0.5B's 7 (K16, hd 64) 1-14 % slower into L2 (as L2 had
 * measured on the Zen 5 VM with the kernel of 2026-11-30), so passes of more heads keep
 * SLATE_PF_ATTN.
 * -DSLATE_AB_FLAGS=-DSLATE_PF_ATTN_THIN=_MM_HINT_T0 times the thin passes into L1. */
#ifndef SLATE_PF_ATTN_THIN
#define SLATE_PF_ATTN_THIN _MM_HINT_T1
#endif
enum { PF_ATTN_THIN = 4 };
/* One line of the cache prefetched for a pass of NH heads (a constant in the specialized loops,
 * so the test folds away). */
#define PF_ATTN_LINE(P, NH)                                                                        \
    do {                                                                                           \
        if ((NH) <= PF_ATTN_THIN) _mm_prefetch((P), SLATE_PF_ATTN_THIN);                           \
        else _mm_prefetch((P), SLATE_PF_ATTN);                                                     \
    } while (0)

/* The running softmax state of HG query heads and one block's scratch, 64-byte aligned rows of
 * HDP = head_dim rounded up to 16 floats (zero past head_dim, so whole vectors are exact). */
typedef struct attn_ws {
    int64_t hdp;                           /* the row stride (packed, for L1) */
    float q[HG * SLATE__MAX_HEAD_DIM] __attribute__((aligned(64)));     /* the pass's query rows */
    float acc[HG * SLATE__MAX_HEAD_DIM] __attribute__((aligned(64)));   /* sum_j p_j v_j, scaled to the running max */
    float kf[BJ * SLATE__MAX_HEAD_DIM] __attribute__((aligned(64)));    /* the block's K rows as f32 */
    float vf[BJ * SLATE__MAX_HEAD_DIM] __attribute__((aligned(64)));    /* the block's V rows as f32 (0 for skipped rows) */
    float p[HG][BJ] __attribute__((aligned(64)));                       /* the block's softmax weights per head */
    float l[HG][16] __attribute__((aligned(64))); /* running sums, per lane */
    float m[HG], corr[HG];                 /* running max, this block's rescale */
} attn_ws;

/* Row t of a block of f16 cache rows: rows[t], or, when RS > 0 (a compile-time constant: the
 * head-major cache, whose rows are side by side, RS = head_dim), base + t * RS, so the kernels
 * address all 16 rows at constant offsets from one register instead of through 16 pointers. */
INLINE const uint16_t *blk_row(const uint16_t *const *rows, const uint16_t *base, int RS, int t) {
    return RS ? base + t * RS : rows[t];
}

/* acc[h] = acc[h] * corr[h] + sum_t p[h][t] * v_t for heads [h0, h0 + NH) and vectors
 * [c0, c0 + NC) of 16 floats: a register tile of NH x NC accumulators over the block's rows.
 * v_t is row t of vf, or, with vrows (or RS, see blk_row), the f16 cache row t converted as it
 * is loaded (head_dim a multiple of 16, every row of the block used), or, with v8, the int8
 * values of int8 cache row t (p then holds p times the row's scale; the last of nc vectors
 * masked by hm). pf, unless NULL: a later block of 16 V rows side by side, whose 64-byte lines
 * [8 c0, 8 (c0 + NC)) are prefetched one per row step (PV_ALL's tiles cover the block's 8 nc
 * lines once). */
INLINE void attn_pv_tile(attn_ws *ws, int NH, int NC, int h0, int64_t c0,
                         const uint16_t *const *vrows, const uint16_t *vbase, int RS,
                         const char *pf, const uint8_t *const *v8, int64_t nc, __mmask16 hm) {
    __m512 a[8][2];
    UNROLL for (int h = 0; h < NH; h++) {
        __m512 cv = _mm512_set1_ps(ws->corr[h0 + h]);
        UNROLL for (int c = 0; c < NC; c++)
            a[h][c] = _mm512_mul_ps(_mm512_load_ps(&ws->acc[(h0 + h) * ws->hdp + (c0 + c) * 16]), cv);
    }
    for (int t = 0; t < BJ; t++) {
        __m512 vv[2];
        if (pf && t < NC * 8) PF_ATTN_LINE(pf + (c0 * 8 + t) * 64, NH);
        UNROLL for (int c = 0; c < NC; c++)
            vv[c] = v8 ? _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load_i8x16(
                             v8[t] + 4 + (c0 + c) * 16, c0 + c == nc - 1 ? hm : (__mmask16)0xffff)))
                    : RS || vrows ? _mm512_cvtph_ps(_mm256_loadu_si256(
                                        (const __m256i *)(blk_row(vrows, vbase, RS, t) + (c0 + c) * 16)))
                                  : _mm512_load_ps(&ws->vf[(t) * ws->hdp + (c0 + c) * 16]);
        UNROLL for (int h = 0; h < NH; h++) {
            __m512 pb = _mm512_set1_ps(ws->p[h0 + h][t]);
            UNROLL for (int c = 0; c < NC; c++) a[h][c] = _mm512_fmadd_ps(pb, vv[c], a[h][c]);
        }
    }
    UNROLL for (int h = 0; h < NH; h++)
        UNROLL for (int c = 0; c < NC; c++) _mm512_store_ps(&ws->acc[(h0 + h) * ws->hdp + (c0 + c) * 16], a[h][c]);
}

#define PV_HEADS(NC, VR, RS, V8, HM)                                                               \
    do {                                                                                           \
        switch (nh) {                                                                              \
        case 1: attn_pv_tile(ws, 1, NC, 0, c0, VR, vb, RS, pfv, V8, nc, HM); break;                \
        case 2: attn_pv_tile(ws, 2, NC, 0, c0, VR, vb, RS, pfv, V8, nc, HM); break;                \
        case 3: attn_pv_tile(ws, 3, NC, 0, c0, VR, vb, RS, pfv, V8, nc, HM); break;                \
        case 4: attn_pv_tile(ws, 4, NC, 0, c0, VR, vb, RS, pfv, V8, nc, HM); break;                \
        case 5: attn_pv_tile(ws, 5, NC, 0, c0, VR, vb, RS, pfv, V8, nc, HM); break;                \
        case 6: attn_pv_tile(ws, 6, NC, 0, c0, VR, vb, RS, pfv, V8, nc, HM); break;                \
        case 7: attn_pv_tile(ws, 7, NC, 0, c0, VR, vb, RS, pfv, V8, nc, HM); break;                \
        default: attn_pv_tile(ws, 8, NC, 0, c0, VR, vb, RS, pfv, V8, nc, HM); break;               \
        }                                                                                          \
    } while (0)

/* Every head and every vector of the row: tiles of all the pass's heads (up to HG = 8) x 2
 * vectors, so each V vector is loaded and converted once per block (tiles of 4 heads x 4
 * vectors converted it twice: 14.3-14.7 -> 13.8-14.0 ns per position and kv head, one thread,
 * head_dim 64, cache in L2). */
#define PV_ALL(VR, RS) PV_ALL_ROWS(VR, RS, NULL, hm)
#define PV_ALL_ROWS(VR, RS, V8, HM)                                                                \
    do {                                                                                           \
        int64_t c0 = 0;                                                                            \
        for (; c0 + 2 <= nc; c0 += 2) PV_HEADS(2, VR, RS, V8, HM);                                 \
        if (c0 < nc) PV_HEADS(1, VR, RS, V8, HM);                                                  \
    } while (0)

/* A 16 x 16 block of 16-bit words transposed in registers, in two steps so that a caller can
 * use each column as soon as it is made: z[i] holds row i (low 256 bits) and row i + 8 (high).
 * transpose16_pairs: per 128-bit lane, words of rows 2i, 2i + 1 interleaved, then pairs of
 * rows, so that b[.] holds in each lane pieces of rows 0-7 (lanes 0, 1) or 8-15 (lanes 2, 3);
 * transpose16_col(b, d): column d (low 256 bits) and column d + 8 (high), each over rows 0-15,
 * from one more unpack and one lane swap. */
INLINE void transpose16_pairs(const __m512i z[8], __m512i b[8]) {
    __m512i a[8];
    UNROLL for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm512_unpacklo_epi16(z[2 * i], z[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi16(z[2 * i], z[2 * i + 1]);
    }
    UNROLL for (int i = 0; i < 2; i++) {
        b[4 * i + 0] = _mm512_unpacklo_epi32(a[4 * i + 0], a[4 * i + 2]);
        b[4 * i + 1] = _mm512_unpackhi_epi32(a[4 * i + 0], a[4 * i + 2]);
        b[4 * i + 2] = _mm512_unpacklo_epi32(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm512_unpackhi_epi32(a[4 * i + 1], a[4 * i + 3]);
    }
}
INLINE __m512i transpose16_col(const __m512i b[8], int d) {
    int i = d / 2;
    /* word d of each lane: column d (lanes 0, 2) and column d + 8 (lanes 1, 3) */
    __m512i x = d % 2 ? _mm512_unpackhi_epi64(b[i], b[i + 4]) : _mm512_unpacklo_epi64(b[i], b[i + 4]);
    return _mm512_shuffle_i64x2(x, x, _MM_SHUFFLE(3, 1, 2, 0));
}

/* dst row d (d < 16, dst_stride words apart) = column d of the 16 rows at src (src_stride
 * apart): the kernel table's transpose16 (kernels.h). */
static void transpose16(uint16_t *dst, int64_t dst_stride, const uint16_t *src, int64_t src_stride) {
    __m512i z[8], b[8];
    UNROLL for (int i = 0; i < 8; i++)
        z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(src + i * src_stride))),
                                  _mm256_loadu_si256((const __m256i *)(src + (i + 8) * src_stride)), 1);
    transpose16_pairs(z, b);
    UNROLL for (int d = 0; d < 8; d++) {
        __m512i w = transpose16_col(b, d);
        _mm256_storeu_si256((__m256i *)(dst + d * dst_stride), _mm512_castsi512_si256(w));
        _mm256_storeu_si256((__m256i *)(dst + (d + 8) * dst_stride), _mm512_extracti64x4_epi64(w, 1));
    }
}

/* Unscaled scores of NH heads for the 16 f16 cache rows of a block (blk_row; head_dim = 16 nc,
 * = RS / 16 when RS > 0): s[h] lane t = q_h . row t. Per 16 dims the 16 x 16 block is
 * transposed in registers (rows t and t + 8 share a register; three rounds of in-lane unpacks
 * and one lane swap), so each dim becomes one vector over the 16 rows (converted exactly) and
 * meets each head's broadcast query element in one FMA: no cross-lane sums. Each head sums
 * dims d and d + 8 in two chains of dependent FMAs, added at the end: with 4 heads or fewer,
 * one chain per head is fewer chains than the FMA latency times the ports keep busy (Xeon, one
 * thread, L2, hd 64, 4 heads: 11.80 -> 11.65 ns per position and kv head here, 9.45 -> 8.92 in
 * attn_qk_k16, 2 heads 7.38 -> 5.86 there; 8 heads 15.00 -> 15.08, 7 heads 13.44 -> 13.33).
 * For every head count, not only small ones: exec splits a group's heads across threads when
 * there are few kv heads, and a result must not depend on the thread count. pf, unless NULL: a
 * later block of 16 rows side by side (nc * 8 lines of 64 bytes), prefetched one line per dim
 * pair. */
INLINE void attn_qk_f16(int NH, int RS, const attn_ws *ws, const uint16_t *const rows[BJ],
                        const uint16_t *base, int64_t nc, __m512 s[HG], const char *pf) {
    __m512 s1[HG]; /* the dims d + 8: a second chain per head (see above) */
    UNROLL for (int h = 0; h < NH; h++) s[h] = s1[h] = _mm512_setzero_ps();
    if (RS) nc = RS / 16;
    for (int64_t c = 0; c < nc; c++) {
        __m512i z[8], b[8];
        UNROLL for (int i = 0; i < 8; i++)
            z[i] = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk_row(rows, base, RS, i) + c * 16))),
                _mm256_loadu_si256((const __m256i *)(blk_row(rows, base, RS, i + 8) + c * 16)), 1);
        transpose16_pairs(z, b);
        UNROLL for (int d = 0; d < 8; d++) {
            if (pf) PF_ATTN_LINE(pf + (c * 8 + d) * 64, NH);
            __m512i w = transpose16_col(b, d);
            __m512 v0 = _mm512_cvtph_ps(_mm512_castsi512_si256(w));       /* dim d, rows 0-15 */
            __m512 v1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(w, 1)); /* dim d + 8 */
            UNROLL for (int h = 0; h < NH; h++) {
                /* packed rows: the query rows RS (= ws->hdp) apart, a constant offset */
                const float *qd = ws->q + h * (RS ? RS : ws->hdp) + c * 16 + d;
                s[h] = _mm512_fmadd_ps(_mm512_set1_ps(qd[0]), v0, s[h]);
                s1[h] = _mm512_fmadd_ps(_mm512_set1_ps(qd[8]), v1, s1[h]);
            }
        }
    }
    UNROLL for (int h = 0; h < NH; h++) s[h] = _mm512_add_ps(s[h], s1[h]);
}

/* attn_qk_f16 for a K16 block (kernels.h) at kt, head_dim HD (64 or 128): the dims are vectors
 * over the block's 16 positions already, and they meet the query elements in attn_qk_f16's order
 * and chains (per 16 dims: d, then d + 8, for d = 0..7), so the scores have its bits. pf, unless
 * NULL: a later K16 block (HD / 2 lines of 64 bytes), prefetched one line per dim pair. */
INLINE void attn_qk_k16(int NH, int HD, const attn_ws *ws, const uint16_t *kt, __m512 s[HG],
                        const char *pf) {
    __m512 s1[HG]; /* the dims d + 8: a second chain per head (see above) */
    UNROLL for (int h = 0; h < NH; h++) s[h] = s1[h] = _mm512_setzero_ps();
    for (int c = 0; c < HD / 16; c++) {
        UNROLL for (int d = 0; d < 8; d++) {
            if (pf) PF_ATTN_LINE(pf + (c * 8 + d) * 64, NH);
            const uint16_t *r0 = kt + (c * 16 + d) * 16, *r1 = r0 + 8 * 16; /* dims d, d + 8 */
            __m512 v0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)r0));
            __m512 v1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)r1));
            const float *qd = ws->q + c * 16 + d; /* query rows HD apart (= ws->hdp) */
            UNROLL for (int h = 0; h < NH; h++) {
                s[h] = _mm512_fmadd_ps(_mm512_set1_ps(qd[h * HD]), v0, s[h]);
                s1[h] = _mm512_fmadd_ps(_mm512_set1_ps(qd[h * HD + 8]), v1, s1[h]);
            }
        }
    }
    UNROLL for (int h = 0; h < NH; h++) s[h] = _mm512_add_ps(s[h], s1[h]);
}

/* attn_qk_f16 for the 16 rows of an int8 cache block (rows[t]: {f32 scale, head_dim int8},
 * head_dim = 16 nc, the last 16 masked by hm): s[h] lane t = q_h . (the int8 values of row t),
 * unscaled (the caller multiplies by the rows' scales, as ref does). Each row's 16 values of a
 * chunk are widened to int16 (exact) and the block transposed as attn_qk_f16's f16 words, so
 * each dim becomes one vector over the 16 rows, widened to int32 and converted (exact). */
INLINE void attn_qk_i8_chunk(int NH, const attn_ws *ws, const uint8_t *const rows[BJ], int64_t c,
                             __mmask16 m, __m512 s[HG], __m512 s1[HG], const char *pfk,
                             const char *pfv, int64_t nl) {
    __m512i z[8], b[8];
    UNROLL for (int i = 0; i < 8; i++)
        z[i] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_cvtepi8_epi16(load_i8x16(rows[i] + 4 + c * 16, m))),
            _mm256_cvtepi8_epi16(load_i8x16(rows[i + 8] + 4 + c * 16, m)), 1);
    transpose16_pairs(z, b);
    UNROLL for (int d = 0; d < 8; d++) {
        if (pfk && c * 8 + d < nl) {
            PF_ATTN_LINE(pfk + (c * 8 + d) * 64, NH);
            PF_ATTN_LINE(pfv + (c * 8 + d) * 64, NH);
        }
        __m512i w = transpose16_col(b, d);
        __m512 v0 = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(w)));
        __m512 v1 = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(w, 1)));
        UNROLL for (int h = 0; h < NH; h++) {
            const float *qd = ws->q + h * ws->hdp + c * 16 + d;
            s[h] = _mm512_fmadd_ps(_mm512_set1_ps(qd[0]), v0, s[h]);
            s1[h] = _mm512_fmadd_ps(_mm512_set1_ps(qd[8]), v1, s1[h]);
        }
    }
}
INLINE void attn_qk_i8(int NH, const attn_ws *ws, const uint8_t *const rows[BJ], int64_t nc,
                       __mmask16 hm, __m512 s[HG], const char *pfk, const char *pfv, int64_t nl) {
    __m512 s1[HG]; /* the dims d + 8: a second chain per head (attn_qk_f16) */
    UNROLL for (int h = 0; h < NH; h++) s[h] = s1[h] = _mm512_setzero_ps();
    const __mmask16 all = 0xffff;
    int64_t c = 0;
    for (; c < nc - 1; c++) attn_qk_i8_chunk(NH, ws, rows, c, all, s, s1, pfk, pfv, nl);
    /* the last 16 dims: masked only where head_dim ends inside them */
    if (hm == all) attn_qk_i8_chunk(NH, ws, rows, c, all, s, s1, pfk, pfv, nl);
    else attn_qk_i8_chunk(NH, ws, rows, c, hm, s, s1, pfk, pfv, nl);
    for (int64_t i = 8 * nc; pfk && i < nl; i++) { /* lines beyond one per dim pair */
        PF_ATTN_LINE(pfk + i * 64, NH);
        PF_ATTN_LINE(pfv + i * 64, NH);
    }
    UNROLL for (int h = 0; h < NH; h++) s[h] = _mm512_add_ps(s[h], s1[h]);
}

/* attn_qk_i8 with NH = nh as a constant, prefetching NL lines at pfk and pfv. */
#define QK_I8(ROWS, S, NL)                                                                         \
    do {                                                                                           \
        switch (nh) {                                                                              \
        case 1: attn_qk_i8(1, ws, ROWS, nc, hm, S, pfk, pfv, NL); break;                           \
        case 2: attn_qk_i8(2, ws, ROWS, nc, hm, S, pfk, pfv, NL); break;                           \
        case 3: attn_qk_i8(3, ws, ROWS, nc, hm, S, pfk, pfv, NL); break;                           \
        case 4: attn_qk_i8(4, ws, ROWS, nc, hm, S, pfk, pfv, NL); break;                           \
        case 5: attn_qk_i8(5, ws, ROWS, nc, hm, S, pfk, pfv, NL); break;                           \
        case 6: attn_qk_i8(6, ws, ROWS, nc, hm, S, pfk, pfv, NL); break;                           \
        case 7: attn_qk_i8(7, ws, ROWS, nc, hm, S, pfk, pfv, NL); break;                           \
        default: attn_qk_i8(8, ws, ROWS, nc, hm, S, pfk, pfv, NL); break;                          \
        }                                                                                          \
    } while (0)

/* attn_qk_k16 of the K16 block at KB into S, prefetching PF, with NH = nh and HD = hd as
 * constants. */
#define QK_K16(KB, S, PF)                                                                          \
    do {                                                                                           \
        if (hd == 64) QK_K16_HEADS(64, KB, S, PF);                                                 \
        else QK_K16_HEADS(128, KB, S, PF);                                                         \
    } while (0)
#define QK_K16_HEADS(HD, KB, S, PF)                                                                \
    do {                                                                                           \
        switch (nh) {                                                                              \
        case 1: attn_qk_k16(1, HD, ws, KB, S, PF); break;                                          \
        case 2: attn_qk_k16(2, HD, ws, KB, S, PF); break;                                          \
        case 3: attn_qk_k16(3, HD, ws, KB, S, PF); break;                                          \
        case 4: attn_qk_k16(4, HD, ws, KB, S, PF); break;                                          \
        case 5: attn_qk_k16(5, HD, ws, KB, S, PF); break;                                          \
        case 6: attn_qk_k16(6, HD, ws, KB, S, PF); break;                                          \
        case 7: attn_qk_k16(7, HD, ws, KB, S, PF); break;                                          \
        default: attn_qk_k16(8, HD, ws, KB, S, PF); break;                                         \
        }                                                                                          \
    } while (0)

/* attn_qk_f16 with NH the pass's head count nh as a constant (the heads' accumulators stay in
 * registers), rows as RS says (blk_row), prefetching PF. */
#define QK_HEADS(RS, PF)                                                                           \
    do {                                                                                           \
        switch (nh) {                                                                              \
        case 1: attn_qk_f16(1, RS, ws, krows, kb, nc, sc, PF); break;                              \
        case 2: attn_qk_f16(2, RS, ws, krows, kb, nc, sc, PF); break;                              \
        case 3: attn_qk_f16(3, RS, ws, krows, kb, nc, sc, PF); break;                              \
        case 4: attn_qk_f16(4, RS, ws, krows, kb, nc, sc, PF); break;                              \
        case 5: attn_qk_f16(5, RS, ws, krows, kb, nc, sc, PF); break;                              \
        case 6: attn_qk_f16(6, RS, ws, krows, kb, nc, sc, PF); break;                              \
        case 7: attn_qk_f16(7, RS, ws, krows, kb, nc, sc, PF); break;                              \
        default: attn_qk_f16(8, RS, ws, krows, kb, nc, sc, PF); break;                             \
        }                                                                                          \
    } while (0)

/* The whole kernel: for each pass of up to HG query heads, blocks of BJ = 16 positions. Scores:
 * an f16 cache with head_dim a multiple of 16 (the usual case: the default cache dtype, head
 * dims 64/80/128) goes through attn_qk_f16 (the block transposed in registers, no cross-lane
 * sums); otherwise the block's K rows are converted to f32 once into L1 and each head's 16
 * scores are 16 dot products summed across lanes by one hsum16 (lane t = position jb + t).
 * Then one online-softmax step per head in registers (masked max, vector exp, the rescale of
 * the old state kept as a factor corr applied when the accumulators are next loaded); then P
 * (heads x 16) times V (16 x head_dim) as small register tiles, reading f16 V rows directly
 * when the transposed path applies and every row of the block is used, else from f32 copies
 * in L1. An int8 cache (any head_dim) takes the transposed path too (attn_qk_i8), its rows'
 * scales applied as ref applies them: K's to each score, V's to each weight; its V rows are
 * read directly. -inf and NaN scores get weight 0 and their V rows are zeroed (int8: their
 * weights, scale included, are 0 and the values finite), so they are skipped exactly as in
 * ref; all -inf gives out = 0. The next blocks' rows are prefetched (the cache of a layer has
 * left the caches since the last token). One thread, 22 layers x 4 kv heads x 8 heads x
 * head_dim 64, depth 2048: the transposed scores and direct V rows take 22.6 -> 19.5 ns per
 * position and kv head (ablation: the hsum16 tree was a quarter of the time). With n_rows > 1
 * (a prefill's rows in one call, kernels.h) or a window a head's lanes outside its row's range
 * are dead like those past j1: the blocks where the rows' ranges differ take the path of unused
 * rows. */
INLINE void attention_any(slate_dtype dt, float *out, const float *q, const void *k, const void *v,
                          int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                          int64_t n_rows, int64_t window, float scale, float softcap,
                          const float *mask, bool k16) {
    attn_ws wsb __attribute__((aligned(64)));
    attn_ws *ws = &wsb;
    const int64_t nc = (hd + 15) / 16; /* vectors per row */
    ws->hdp = nc * 16;
    const __mmask16 hm = tail16(hd - (nc - 1) * 16) ? tail16(hd - (nc - 1) * 16) : (__mmask16)0xffff;
    const int64_t row_bytes = dt == SLATE_DTYPE_I8 ? 4 + hd : hd * (dt == SLATE_DTYPE_F32 ? 4 : 2);
    const bool tq = k16 || (dt == SLATE_DTYPE_F16 && hd % 16 == 0); /* f16 scores, f16 V tiles */
    /* The head-major cache's rows side by side, for the usual head dims: addressed from the
     * block's first row (blk_row) */
    const int rs = tq && stride == hd && (hd == 64 || hd == 128) ? (int)hd : 0;
    const uint16_t *krows[BJ], *vrows[BJ];
    const uint8_t *k8[BJ], *v8[BJ];            /* an int8 cache's rows */
    float ks[BJ] __attribute__((aligned(64))); /* and their scales */
    float vs[BJ] __attribute__((aligned(64)));
    /* the first head's start is the earliest */
    j0 = slate__attn_head_start(j0, slate__attn_head_end(j1, 0, n_heads, n_rows), window);
    for (int64_t h0 = 0; h0 < n_heads; h0 += HG) {
        int nh = n_heads - h0 < HG ? (int)(n_heads - h0) : HG;
        /* Each head's range (kernels.h: n_rows, window); the pass's first head has the
         * earliest end, its last the latest start. */
        int64_t start[HG], end[HG];
        for (int h = 0; h < nh; h++) {
            end[h] = slate__attn_head_end(j1, h0 + h, n_heads, n_rows);
            start[h] = slate__attn_head_start(j0, end[h], window);
        }
        for (int h = 0; h < nh; h++) {
            for (int64_t c = 0; c < nc; c++) {
                __mmask16 m = c == nc - 1 ? hm : (__mmask16)0xffff;
                _mm512_store_ps(&ws->q[(h) * ws->hdp + c * 16], _mm512_maskz_loadu_ps(m, q + (h0 + h) * hd + c * 16));
                _mm512_store_ps(&ws->acc[(h) * ws->hdp + c * 16], _mm512_setzero_ps());
            }
            ws->m[h] = -INFINITY;
            _mm512_store_ps(ws->l[h], _mm512_setzero_ps());
        }
        /* K16 blocks start at multiples of 16; lanes below j0 are dead like those past j1. Their
         * scores are computed one block ahead (sn), between a block's softmax and its P x V:
         * the softmax's chain of dependent steps then runs under the next block's FMAs
         * instead of holding up the P x V tiles (same products, same order, same bits). */
        const int64_t jb0 = k16 ? j0 - j0 % BJ : j0;
        __m512 sn[HG] = {0};
        if (k16 && jb0 < j1) QK_K16((const uint16_t *)k + jb0 * stride, sn, NULL);
        for (int64_t jb = jb0; jb < j1; jb += BJ) {
            int n = j1 - jb < BJ ? (int)(j1 - jb) : BJ, lo = jb < j0 ? (int)(j0 - jb) : 0;
            /* Rows past the range reuse row jb (valid memory); their scores become -inf. */
            const uint16_t *kb = tq ? (const uint16_t *)k + jb * stride : NULL;
            const uint16_t *vb = tq ? (const uint16_t *)v + jb * stride : NULL;
            __mmask16 live = (__mmask16)(((1u << n) - 1u) & ~((1u << lo) - 1u)), any_skipped = 0;
            /* Blocks of whole f16 rows side by side (K16 or not): the block PF_ATTN_AHEAD ahead
             * is prefetched a line at a time in the loops of the scores (K; with K16 the next
             * block's) and of this block's P x V (V); for head_dim 64 and 128 they are also
             * addressed from the block's first row (blk_row with RS = rs) */
            const bool spread = tq && stride == hd && live == 0xffff;
            const bool packed = spread && rs;
            const char *pfk = NULL, *pfv = NULL;
            int64_t nl8 = 0; /* int8: lines of K and of V prefetched in the scores' loop */
            if (spread && jb + PF_ATTN_AHEAD + BJ <= j1) {
                pfk = (const char *)(kb + PF_ATTN_AHEAD * stride);
                pfv = (const char *)(vb + PF_ATTN_AHEAD * stride);
            }
            if (dt == SLATE_DTYPE_I8) { /* int8 rows, read in place, and prefetches ahead */
                const uint8_t *k0 = (const uint8_t *)k, *v0 = (const uint8_t *)v;
                if (stride == 4 + ((hd + 3) & ~(int64_t)3) && jb + PF_ATTN_AHEAD + BJ <= j1) {
                    /* rows that touch (the head-major cache; rows padded to 4 bytes): their
                     * lines, one K and one V line per dim pair of the scores' loop (as spread) */
                    pfk = (const char *)(k0 + (jb + PF_ATTN_AHEAD) * stride);
                    pfv = (const char *)(v0 + (jb + PF_ATTN_AHEAD) * stride);
                    nl8 = (BJ * stride + 63) / 64 + 1; /* the run's lines, wherever it starts */
                } else {
                    for (int t = 0; t < BJ && jb + PF_ATTN_AHEAD + t < j1; t++) {
                        const char *pk = (const char *)(k0 + (jb + PF_ATTN_AHEAD + t) * stride);
                        const char *pv = (const char *)(v0 + (jb + PF_ATTN_AHEAD + t) * stride);
                        for (int64_t b = 0; b < row_bytes + 63; b += 64) {
                            PF_ATTN_LINE(pk + b, nh);
                            PF_ATTN_LINE(pv + b, nh);
                        }
                    }
                }
                for (int t = 0; t < BJ; t++) {
                    k8[t] = k0 + (jb + (t < n ? t : 0)) * stride;
                    v8[t] = v0 + (jb + (t < n ? t : 0)) * stride;
                    memcpy(&ks[t], k8[t], 4);
                    memcpy(&vs[t], v8[t], 4);
                }
            } else if (tq) { /* f16 rows, read in place: their pointers, and prefetches ahead */
                if (spread) {
                    /* none here: the FMA loops prefetch pfk and pfv a line per step */
                } else if (stride == hd && jb + PF_ATTN_AHEAD + BJ <= j1) {
                    /* rows that touch (the head-major cache): one run of lines each */
                    const char *pk = (const char *)(kb + PF_ATTN_AHEAD * stride);
                    const char *pv = (const char *)(vb + PF_ATTN_AHEAD * stride);
                    for (int64_t b = 0; b < BJ * row_bytes; b += 64) {
                        PF_ATTN_LINE(pk + b, nh);
                        PF_ATTN_LINE(pv + b, nh);
                    }
                } else {
                    for (int t = 0; t < BJ && jb + PF_ATTN_AHEAD + t < j1; t++) {
                        const char *pk = (const char *)(kb + (PF_ATTN_AHEAD + t) * stride);
                        const char *pv = (const char *)(vb + (PF_ATTN_AHEAD + t) * stride);
                        for (int64_t b = 0; b < row_bytes; b += 64) {
                            PF_ATTN_LINE(pk + b, nh);
                            PF_ATTN_LINE(pv + b, nh);
                        }
                    }
                }
                for (int t = 0; t < BJ && !packed; t++) {
                    if (!k16) krows[t] = kb + (t < n ? t : 0) * stride; /* K16 reads blocks */
                    vrows[t] = vb + (t < n ? t : 0) * stride;
                }
            } else {
                for (int t = 0; t < BJ; t++) {
                    if (jb + PF_ATTN_AHEAD + t < j1) {
                        const char *pk = kv_row(dt, k, jb + PF_ATTN_AHEAD + t, stride);
                        const char *pv = kv_row(dt, v, jb + PF_ATTN_AHEAD + t, stride);
                        for (int64_t b = 0; b < row_bytes; b += 64) {
                            PF_ATTN_LINE(pk + b, nh);
                            PF_ATTN_LINE(pv + b, nh);
                        }
                    }
                    const void *kr = kv_row(dt, k, jb + (t < n ? t : 0), stride);
                    const void *vr = kv_row(dt, v, jb + (t < n ? t : 0), stride);
                    for (int64_t c = 0; c < nc; c++) {
                        __mmask16 m = c == nc - 1 ? hm : (__mmask16)0xffff;
                        _mm512_store_ps(&ws->kf[(t) * ws->hdp + c * 16], load_kv16(dt, kr, c * 16, m));
                        _mm512_store_ps(&ws->vf[(t) * ws->hdp + c * 16], load_kv16(dt, vr, c * 16, m));
                    }
                }
            }
            __m512 mk = mask ? _mm512_maskz_loadu_ps(live, mask + jb) : _mm512_setzero_ps();
            __m512 sc[HG];
            /* int8: the rows' scales times scale, one per lane, as ref scales its dot products */
            const __m512 scv = dt == SLATE_DTYPE_I8
                                   ? _mm512_mul_ps(_mm512_load_ps(ks), _mm512_set1_ps(scale))
                                   : _mm512_set1_ps(scale);
            if (k16) UNROLL for (int h = 0; h < HG; h++) sc[h] = sn[h];
            else if (dt == SLATE_DTYPE_I8) QK_I8(k8, sc, nl8);
            else if (packed && rs == 64) QK_HEADS(64, pfk);
            else if (packed) QK_HEADS(128, pfk);
            else if (tq) QK_HEADS(0, pfk);
            else {
                for (int h = 0; h < nh; h++) {
                    __m512 a[16];
                    UNROLL for (int i = 0; i < 16; i++) a[i] = _mm512_setzero_ps();
                    for (int64_t c = 0; c < nc; c++) {
                        __m512 qv = _mm512_load_ps(&ws->q[(h) * ws->hdp + c * 16]);
                        UNROLL for (int i = 0; i < 16; i++)
                            a[i] = _mm512_fmadd_ps(qv, _mm512_load_ps(&ws->kf[HS_MAP[i] * ws->hdp + c * 16]), a[i]);
                    }
                    sc[h] = hsum16(a);
                }
            }
            for (int h = 0; h < nh; h++) {
                __m512 s = _mm512_mul_ps(sc[h], scv);
                if (softcap > 0.0f) /* scale, cap, then mask, as ref (tanh16: 2 ulp of tanhf) */
                    s = _mm512_mul_ps(_mm512_set1_ps(softcap),
                                      tanh16(_mm512_mul_ps(s, _mm512_set1_ps(1.0f / softcap))));
                s = _mm512_add_ps(s, mk);
                __mmask16 lh = live; /* lanes outside this head's range are dead too */
                if (jb + BJ > end[0] || jb < start[nh - 1]) {
                    int64_t e = end[h] - jb, b = start[h] - jb;
                    lh &= e <= 0 ? (__mmask16)0 : e < BJ ? tail16(e) : (__mmask16)0xffff;
                    lh &= b <= 0 ? (__mmask16)0xffff
                          : b < BJ ? (__mmask16)~tail16(b)
                                   : (__mmask16)0;
                }
                /* Ordered compare: false for -inf and NaN (the scores ref skips) and dead lanes. */
                __mmask16 valid =
                    _mm512_mask_cmp_ps_mask(lh, s, _mm512_set1_ps(-INFINITY), _CMP_GT_OQ);
                any_skipped |= (__mmask16)(live & ~valid);
                ws->corr[h] = 1.0f;
                if (!valid) {
                    _mm512_store_ps(ws->p[h], _mm512_setzero_ps());
                    continue;
                }
                __m512 lv = _mm512_load_ps(ws->l[h]);
                /* The running max moves only while the scores still grow: most blocks skip the
                 * cross-lane max. */
                if (_mm512_mask_cmp_ps_mask(valid, s, _mm512_set1_ps(ws->m[h]), _CMP_GT_OQ)) {
                    float bm = _mm512_mask_reduce_max_ps(valid, s);
                    /* m = -inf before the first valid block: the state is 0 and so is corr. */
                    ws->corr[h] = expf(ws->m[h] - bm);
                    lv = _mm512_mul_ps(lv, _mm512_set1_ps(ws->corr[h]));
                    ws->m[h] = bm;
                }
                __m512 p = _mm512_maskz_mov_ps(valid, exp16(_mm512_sub_ps(s, _mm512_set1_ps(ws->m[h]))));
                _mm512_store_ps(ws->l[h], _mm512_add_ps(lv, p));
                /* int8: each weight times its V row's scale (ref's p * vs; 0 where not valid,
                 * so a skipped row adds nothing even with an infinite scale) */
                if (dt == SLATE_DTYPE_I8) p = _mm512_maskz_mul_ps(valid, p, _mm512_load_ps(vs));
                _mm512_store_ps(ws->p[h], p);
            }
            if (dt == SLATE_DTYPE_I8) { /* V's int8 rows, converted as they are loaded */
                pfv = NULL; /* prefetched with K above */
                if (hm == (__mmask16)0xffff) PV_ALL_ROWS(NULL, 0, v8, (__mmask16)0xffff);
                else PV_ALL_ROWS(NULL, 0, v8, hm); /* head_dim not a multiple of 16 */
                continue;
            }
            /* Rows that no head may use (dead lanes, -inf or NaN scores for every head) must not
             * reach the accumulators even as 0 * v: zero their V. */
            bool all_used = !((__mmask16)~live | any_skipped);
            if (k16 && jb + BJ < j1) QK_K16(kb + BJ * stride, sn, pfk);
            if (tq && all_used) {
                if (packed && rs == 64) PV_ALL(NULL, 64);
                else if (packed) PV_ALL(NULL, 128);
                else PV_ALL(vrows, 0);
                continue;
            }
            for (int t = 0; t < BJ && packed; t++) vrows[t] = vb + t * stride;
            if (tq) /* some rows unused: f32 copies in L1, zeroed below where unused */
                for (int t = 0; t < BJ; t++)
                    for (int64_t c = 0; c < nc; c++)
                        _mm512_store_ps(&ws->vf[(t) * ws->hdp + c * 16], load_kv16(dt, vrows[t], c * 16, 0xffff));
            if (!all_used) {
                for (int t = 0; t < BJ; t++) {
                    bool used = false;
                    for (int h = 0; h < nh && !used; h++) used = ws->p[h][t] != 0.0f;
                    if (!used)
                        for (int64_t c = 0; c < nc; c++) _mm512_store_ps(&ws->vf[(t) * ws->hdp + c * 16], _mm512_setzero_ps());
                }
            }
            PV_ALL(NULL, 0);
        }
        for (int h = 0; h < nh; h++) {
            float *o = out + (h0 + h) * hd;
            float l = _mm512_reduce_add_ps(_mm512_load_ps(ws->l[h]));
            __m512 iv = _mm512_set1_ps(l > 0.0f ? 1.0f / l : 0.0f);
            for (int64_t c = 0; c < nc; c++) {
                __mmask16 m = c == nc - 1 ? hm : (__mmask16)0xffff;
                _mm512_mask_storeu_ps(o + c * 16, m, _mm512_mul_ps(_mm512_load_ps(&ws->acc[(h) * ws->hdp + c * 16]), iv));
            }
        }
    }
}

/* One out-of-line copy of the kernel per cache dtype, without and with Gemma 2's score cap: in
 * the uncapped copies softcap is a literal 0, so they compile to the kernel as it was before the
 * cap existed (inlining all of them into one function cost AVX-512 ~9% at depth 2048). */
#define ATTN_COPY(NAME, DT, CAP, K16)                                                              \
    static __attribute__((noinline)) void NAME(float *out, const float *q, const void *k,         \
                                               const void *v, int64_t stride, int64_t j0,         \
                                               int64_t j1, int64_t hd, int64_t n_heads,           \
                                               int64_t n_rows, int64_t window, float scale,       \
                                               float softcap, const float *mask) {                \
        attention_any(DT, out, q, k, v, stride, j0, j1, hd, n_heads, n_rows, window, scale, CAP,  \
                      mask, K16);                                                                  \
    }
ATTN_COPY(attention_f32, SLATE_DTYPE_F32, 0.0f, false)
ATTN_COPY(attention_f32_capped, SLATE_DTYPE_F32, softcap, false)
ATTN_COPY(attention_f16, SLATE_DTYPE_F16, 0.0f, false)
ATTN_COPY(attention_f16_capped, SLATE_DTYPE_F16, softcap, false)
ATTN_COPY(attention_f16_k16, SLATE_DTYPE_F16, 0.0f, true)
ATTN_COPY(attention_f16_k16_capped, SLATE_DTYPE_F16, softcap, true)
ATTN_COPY(attention_int8, SLATE_DTYPE_I8, 0.0f, false)
ATTN_COPY(attention_int8_capped, SLATE_DTYPE_I8, softcap, false)

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

/* K16 (kernels.h): the same kernel with each block's K dims loaded as vectors instead of
 * transposed in registers. */
static void attention_k16(float *out, const float *q, const uint16_t *k, const uint16_t *v,
                          int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                          int64_t n_rows, int64_t window, float scale, float softcap,
                          const float *mask) {
    (softcap > 0.0f ? attention_f16_k16_capped : attention_f16_k16)(out, q, k, v, stride, j0, j1,
                                                                    hd, n_heads, n_rows, window,
                                                                    scale, softcap, mask);
}

/* int8 cache (rows of {f32 scale, head_dim int8}): the same kernel, the rows' int8 values
 * transposed and widened in registers (attn_qk_i8, attn_pv_tile), their scales applied to the
 * scores and weights as ref applies them. */
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

/* ---- swiglu, geglu, softcap, rope -------------------------------------------------------- */

/* e^x for any x: exp16 clamps to [-87.3, 88.4], so silu(a) -> 0 or a at the extremes. */
static void swiglu(float *y, const float *a, const float *b, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail16(n - i);
        __m512 av = _mm512_maskz_loadu_ps(m, a + i), bv = _mm512_maskz_loadu_ps(m, b + i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), av));
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_div_ps(av, _mm512_add_ps(one, e)), bv));
    }
}

/* gelu_tanh(a) * b = a / (1 + e^t) * b, t = -2 sqrt(2/pi) (a + 0.044715 a^3) (avx2.c's
 * geglu); exp16 clamps t, so the result goes to 0 or a at the extremes. */
static void geglu(float *y, const float *a, const float *b, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f), kappa = _mm512_set1_ps(0.044715f);
    const __m512 m2beta = _mm512_set1_ps(-2.0f * 0.7978845608028654f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail16(n - i);
        __m512 av = _mm512_maskz_loadu_ps(m, a + i), bv = _mm512_maskz_loadu_ps(m, b + i);
        __m512 cube = _mm512_mul_ps(_mm512_mul_ps(av, av), av);
        __m512 t = _mm512_mul_ps(m2beta, _mm512_fmadd_ps(kappa, cube, av));
        __m512 g = _mm512_div_ps(av, _mm512_add_ps(one, exp16(t)));
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(g, bv));
    }
}

/* cap * tanh(x / cap) with tanh16; x / cap as x * (1 / cap) (one more rounding of the
 * argument, which tanh does not enlarge: its slope is at most 1 and x tanh'(x) / tanh(x) <= 1). */
static void softcap(float *y, const float *x, int64_t n, float cap) {
    const __m512 c = _mm512_set1_ps(cap), ic = _mm512_set1_ps(1.0f / cap);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail16(n - i);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(c, tanh16(_mm512_mul_ps(xv, ic))));
    }
}

/* As ref: NeoX pairs are 16 contiguous u's and the 16 v's half a rotation later; adjacent pairs
 * are 8 (u, v) in one vector, c and s spread to both lanes of a pair and v/u swapped in place. */
static void rope(float *y, const float *x, const float *c, const float *s, int64_t n_heads,
                 int64_t head_dim, int64_t rope_dim, bool half) {
    const int64_t nh = rope_dim / 2;
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512 sign = _mm512_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1);
    for (int64_t h = 0; h < n_heads; h++) {
        const float *xi = x + h * head_dim;
        float *yo = y + h * head_dim;
        if (half) {
            for (int64_t i = 0; i < nh; i += 16) {
                __mmask16 m = nh - i >= 16 ? (__mmask16)0xffff : tail16(nh - i);
                __m512 u = _mm512_maskz_loadu_ps(m, xi + i), v = _mm512_maskz_loadu_ps(m, xi + nh + i);
                __m512 cv = _mm512_maskz_loadu_ps(m, c + i), sv = _mm512_maskz_loadu_ps(m, s + i);
                _mm512_mask_storeu_ps(yo + i, m, _mm512_fmsub_ps(u, cv, _mm512_mul_ps(v, sv)));
                _mm512_mask_storeu_ps(yo + nh + i, m, _mm512_fmadd_ps(u, sv, _mm512_mul_ps(v, cv)));
            }
        } else {
            for (int64_t i = 0; i < nh; i += 8) { /* pairs i .. i+7 = floats 2i .. 2i+15 */
                int64_t np = nh - i >= 8 ? 8 : nh - i;
                __mmask16 m = (__mmask16)((1u << (2 * np)) - 1u), mh = (__mmask16)((1u << np) - 1u);
                __m512 xv = _mm512_maskz_loadu_ps(m, xi + 2 * i);
                __m512 cv = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(mh, c + i));
                __m512 sv = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(mh, s + i));
                __m512 sw = _mm512_permute_ps(xv, 0xB1); /* (v, u) in each pair */
                /* lane u: u c - v s; lane v: v c + u s */
                __m512 r = _mm512_fmadd_ps(_mm512_mul_ps(sw, sign), sv, _mm512_mul_ps(xv, cv));
                _mm512_mask_storeu_ps(yo + 2 * i, m, r);
            }
        }
        if (yo != xi)
            for (int64_t d = rope_dim; d < head_dim; d++) yo[d] = xi[d];
    }
}

void slate__avx512_fill(slate__kernels *k) {
    k->name = "avx512";
    g_stream_t0 = cpu_is_amd_family26();
    k->matmul[SLATE_DTYPE_F32] = matmul_f32;
    k->matmul[SLATE_DTYPE_F16] = matmul_f16;
    k->matmul[SLATE_DTYPE_BF16] = matmul_bf16;
    k->to_f32[SLATE_DTYPE_F16] = to_f32_f16;
    k->to_f32[SLATE_DTYPE_BF16] = to_f32_bf16;
    k->attention = attention;
    k->attention_i8 = attention_i8;
    k->attention_k16 = attention_k16;
    k->transpose16 = transpose16;
    k->rms_norm = rms_norm;
    k->swiglu = swiglu;
    k->geglu = geglu;
    k->softcap = softcap;
    k->rope = rope;
}
