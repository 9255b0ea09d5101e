/*
 * avx512_vnni.c - integer kernels for the compressed weight formats (Q8_0, Q4 of every block
 * size, symmetric and asymmetric, Q8_C) with AVX-512 VNNI (vpdpbusd: 64 u8 x s8 products summed
 * in fours into 16 int32 lanes per instruction). dispatch.c installs them on top of the avx512
 * table; the matmul of every other dtype stays avx512's. Same meaning as kernels/ref/quant.c
 * except that x is quantized first:
 *
 * Activations. exec calls quantize_x once per matmul (and reuses the result across matmuls of
 * one x with the same plan): x is quantized symmetrically to int8 in groups of 128 inputs, one
 * f32 scale dx = max|x| / 127 per group (so |x - dx q| <= dx / 2). Groups of 128 rather than 32
 * let one group hold whole weight blocks of every size, so a lane's int32 sum never mixes two x
 * scales. vpdpbusd wants one unsigned operand: Q4 nibbles are unsigned already (the symmetric
 * -8 is a correction -8 * sum(qx)); int8 weights are made unsigned by w ^ 0x80 = w + 128 (a
 * correction -128 * sum(qx)). The quantizer precomputes those x sums, so a correction costs
 * nothing in the kernels: it is the initial value of the integer accumulator.
 *
 * Decode (n_rows < PREFILL_MIN_ROWS), bound by weight bandwidth: each weight row streams once,
 * one row at a time for one x row (a single sequential stream per thread), with a software
 * prefetch four rows ahead (PF_BLOCKS). Measured, 2 threads, 1 GB of TinyLlama-shaped q4/q8_c
 * matrices from DRAM, alternating in one window: four interleaved rows 34-38 GB/s, one row 45-48 GB/s (q4
 * 5632x2048, 2048x5632, 2048x2048; q8_c likewise +20-35 %), after whole groups got
 * compile-time load masks (that alone: q4 +5 % from DRAM, +4 % from L3). (Earlier, four rows:
 * no prefetch 5.6 GB/s, 2 KiB ahead within the row 7-9, one block ahead 18, two 19-24.) Per
 * group of 128 weights of a Q4
 * row (128/B blocks, 66..96 bytes) two loads and a word permute (vpermt2w) pull out the 64
 * nibble bytes and the scales, one mask/shift splits low and high nibbles, two vpdpbusd take
 * them against x, stored by the quantizer in the matching order (for each block its low-nibble
 * elements, then the high ones: "permuted layout"). Lane l then holds products of one block
 * only, so one vector of per-lane block scales d_w (x dx) turns the int32 sums into floats.
 * Q8_0 does the same per 64 weights (2 blocks), Q8_C with one scale per row. For one x row
 * of Q4 (every block size, symmetric or not) and IQ4_NL rows of whole groups (dec_q4_row) the
 * two loads are aligned ones of the group's two 64-byte lines, each line loaded once per row:
 * the unaligned loads (each across two lines) had made that kernel load-bound, at about DRAM
 * speed even from L2. TinyLlama int4 B=32 decode, 2 threads, same window: ffn_down 35 -> 50
 * GB/s, decode 59.7 -> 67.2 tok/s. Q8_0 rows of whole groups likewise (dec_q8_0_row): a GGUF
 * Q8_0 TinyLlama 35.8 -> 47.5 tok/s.
 *
 * Prefill (n_rows >= PREFILL_MIN_ROWS), compute bound: a tile of 8 rows x 16 output columns.
 * The weights of 16 columns x KC inputs are unpacked once into u8 [KC/4][16 columns][4] (nibble
 * values, or w ^ 0x80) with their scales, then every 8-row tile of x runs over them: a vpdpbusd
 * multiplies 4 inputs of 16 columns (one zmm) by the same 4 inputs of one row (a broadcast
 * dword), so lane c of row r's accumulator is y[r][c]: no horizontal sums, results are stored
 * as rows. Each int32 accumulator covers one chunk (the span where both scales are constant:
 * the weight block, or 128 for Q8_C), then cvt + fma with d_w[c] * dx[r] into the f32 result.
 * x of KC inputs for all rows stays in L2 while the column tiles pass over it.
 *
 * IQ4_NL (GGUF's, byte for byte: blocks of 32 {f16 d; u8 qs[16]}, Q4 B=32's bytes and nibble
 * order, value d * L[nibble] with the 16 int8 levels L of slate__iq4_levels) runs Q4 B=32
 * symmetric's kernels and x (the same xq_plan layout and bytes; IQ4_XS in avx512_vnni_k.c
 * reads this x too). Only the codes differ: one
 * vpshufb per 64 nibbles turns them into L + 128 (1..241, unsigned for vpdpbusd), and the
 * correction -128 * sum(qx) is the stored -8 * sum(qx) shifted left by 4 (one shift per group
 * and x row, or per chunk in prefill). A decode lane's int32 sum is then sum L q over its 8
 * products, at most 8 * 127 * 127 in magnitude; on the way 8 * 127 * 128 (the correction) plus
 * 4 * 241 * 127: no overflow, and every sum converts to f32 exactly.
 *
 * Loads past a row's last block are masked (nothing outside a tensor is read); x is zero past
 * n_in, so masked-off weights never matter. Row ranges are split by exec; this file keeps no
 * state between calls.
 */
#include "kernels/kernels.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/avx512_vnni_tile.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 32")

enum {
    GROUP = 128,            /* x quantization group (inputs) */
    PREFILL_MIN_ROWS = 4,   /* fewer rows: the decode kernels (see xq_plan) */
    RT = 8,                 /* x rows are padded to a multiple of this for prefill */
    PR = VT_PR,             /* prefill rows per register tile (avx512_vnni_tile.h) */
    CT = VT_CT,             /* prefill columns per tile (two zmm of int32) */
    KC = 1024,              /* prefill inputs per K block: 48 KiB of packed weights and scales
                               (on the stack) in L1/L2 while every row of x passes over them */
    PF_BLOCKS = 4,          /* decode prefetches the weights this many O-row blocks ahead:
                               TinyLlama int4-b32 decode, 2 threads, 20 alternating runs: 2
                               rows 68.6, 4 rows 70.2 tok/s (faster in 16 of 20), 8 rows 70.8
                               with a wider spread; int8 (per channel) unchanged (42.8 / 43.0) */
};

/* ---- x layouts ------------------------------------------------------------------------------
 * Per row, at row * stride (a multiple of 64):
 *   decode Q8 (Q8_0, Q8_C): q[n_pad] natural order; init[ng][2][16] int32 = -128 * (sum of the
 *     4 q of each lane of each 64-byte half); d[ng] f32.
 *   decode Q4 (block B): q[n_pad], each group permuted: [low-nibble elements of block 0, of
 *     block 1, ...][high-nibble elements of block 0, ...]; then per group 16 x 4 bytes: lane
 *     sums over the 8 q a lane multiplies (4 low + 4 high), as int32 -8 * sum (symmetric) or f32
 *     dx * sum (asymmetric: the m term); d[ng] f32.
 *   prefill: q[n_pad] natural; d[ng] f32; per chunk of CH inputs: int32 -F * sum(q) (F = 8 for
 *     symmetric Q4, 128 for int8 weights) or f32 dx * sum(q) (asymmetric Q4). Rows are padded
 *     to a multiple of RT with zero rows.
 * n_pad = ng * 128 >= n_in; q is 0 past n_in. */

typedef struct xgeom {
    bool prefill;
    int64_t ng, n_pad, ch, n_ch;
    size_t stride, off_c, off_d, used; /* used: bytes of a row before its padding to 64 */
} xgeom;

/* IQ4_NL and IQ4_XS (whose sub-blocks of 32 hold IQ4_NL's bytes) read x as Q4 B=32
 * symmetric: x_q4 says whether w reads a Q4 layout, x_block and x_asym which one. */
static bool x_q4(const slate__wmat *w) {
    return w->dtype == SLATE_DTYPE_Q4 || w->dtype == SLATE_DTYPE_IQ4_NL ||
           w->dtype == SLATE_DTYPE_IQ4_XS;
}
static int32_t x_block(const slate__wmat *w) { return w->dtype == SLATE_DTYPE_Q4 ? w->block : 32; }
static bool x_asym(const slate__wmat *w) { return w->dtype == SLATE_DTYPE_Q4 && w->asym; }

static int64_t chunk_of(const slate__wmat *w) {
    return x_q4(w) ? x_block(w) : w->dtype == SLATE_DTYPE_Q8_0 ? 32 : GROUP;
}

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

static xgeom geom(const slate__wmat *w, int64_t n_rows) {
    xgeom g;
    g.prefill = n_rows >= PREFILL_MIN_ROWS;
    g.ng = (w->n_in + GROUP - 1) / GROUP;
    g.n_pad = g.ng * GROUP;
    g.ch = chunk_of(w);
    g.n_ch = g.n_pad / g.ch;
    size_t np = (size_t)g.n_pad, ng = (size_t)g.ng;
    if (g.prefill) {
        g.off_d = np;
        g.off_c = np + 4 * ng;
        g.used = g.off_c + 4 * (size_t)g.n_ch;
    } else {
        g.off_c = np;
        g.off_d = np + (x_q4(w) ? 64 : 128) * ng;
        g.used = g.off_d + 4 * ng;
    }
    g.stride = align64(g.used);
    return g;
}

static slate__xq_plan xq_plan(const slate__wmat *w, int64_t n_rows) {
    slate__xq_plan p;
    xgeom g = geom(w, n_rows);
    int64_t rows = g.prefill ? (n_rows + RT - 1) / RT * RT : n_rows;
    p.bytes = (size_t)rows * g.stride;
    p.row_align = g.prefill ? RT : 1;
    if (g.prefill) {
        uint32_t kind = !x_q4(w) ? 0 : x_asym(w) ? 2 : 1;
        p.layout = 3u << 24 | (uint32_t)g.ch << 4 | kind;
    } else if (x_q4(w)) {
        p.layout = 2u << 24 | (uint32_t)x_block(w) << 1 | (uint32_t)x_asym(w);
    } else {
        p.layout = 1u << 24;
    }
    return p;
}

/* ---- quantizing x -------------------------------------------------------------------------- */

/* 16 floats of group `base` (nv valid inputs), starting at element e. */
INLINE __m512 xload16(const float *x, int64_t nv, int64_t e) {
    return _mm512_maskz_loadu_ps(vt_mask16(nv - e), x + e);
}

/* 16 floats for the 16 q bytes at position 16t of a group in the decode Q4 order for block B
 * (t < 4: low-nibble part, t >= 4: high). For B >= 32 they are 16 consecutive inputs; for
 * B = 16 two runs of 8. */
INLINE __m512 xload16_q4(const float *x, int64_t nv, int B, int t) {
    int half = t / 4, j0 = (t % 4) * 16;
    if (B >= 32) {
        int k = j0 / (B / 2), pos = j0 % (B / 2);
        return xload16(x, nv, (int64_t)k * B + half * (B / 2) + pos);
    }
    int64_t e0 = (int64_t)(j0 / 8) * 16 + half * 8, e1 = e0 + 16;
    __m256 a = _mm256_maskz_loadu_ps((__mmask8)vt_mask16(nv - e0), x + e0);
    __m256 b = _mm256_maskz_loadu_ps((__mmask8)vt_mask16(nv - e1), x + e1);
    return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
}

/* Quantizes one row: q (n_pad bytes, B = 0: natural order, else decode Q4 order) and d[ng]. */
INLINE void quant_row(const float *x, int64_t n_in, int64_t ng, int B, int8_t *q, float *d) {
    for (int64_t g = 0; g < ng; g++) {
        const float *xg = x + g * GROUP;
        int64_t nv = n_in - g * GROUP < GROUP ? n_in - g * GROUP : GROUP;
        __m512 mx = _mm512_setzero_ps();
        UNROLL for (int t = 0; t < 8; t++) mx = _mm512_max_ps(mx, _mm512_abs_ps(xload16(xg, nv, 16 * t)));
        float amax = _mm512_reduce_max_ps(mx);
        /* d = amax / 127 is stored; scaling by 127 / amax rounds |x| / d to at most 127. */
        d[g] = amax / 127.0f;
        __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
        UNROLL for (int t = 0; t < 8; t++) {
            __m512 v = B ? xload16_q4(xg, nv, B, t) : xload16(xg, nv, 16 * t);
            __m512i iv = _mm512_cvtps_epi32(_mm512_mul_ps(v, id)); /* round to nearest even */
            _mm_storeu_si128((__m128i *)(q + g * GROUP + 16 * t), _mm512_cvtsepi32_epi8(iv));
        }
    }
}

/* Lane sums (4 q per lane) of 64 q bytes. */
INLINE __m512i lane_sums(const int8_t *q) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1),
                               _mm512_loadu_si512((const void *)q));
}

static void quantize_x(void *xq, const float *x, const slate__wmat *w, int64_t n_rows, int64_t r0,
                       int64_t r1) {
    xgeom g = geom(w, n_rows);
    int64_t n_in = w->n_in;
    bool q4 = x_q4(w), asym = x_asym(w);
    for (int64_t r = r0; r < r1; r++) {
        uint8_t *row = (uint8_t *)xq + (size_t)r * g.stride;
        int8_t *q = (int8_t *)row;
        float *d = (float *)(row + g.off_d);
        quant_row(x + r * n_in, n_in, g.ng, g.prefill || !q4 ? 0 : x_block(w), q, d);
        memset(row + g.used, 0, g.stride - g.used); /* the same bytes for the same x */
        if (!g.prefill && !q4) { /* Q8: init per 64 */
            for (int64_t h = 0; h < 2 * g.ng; h++) {
                __m512i s = lane_sums(q + 64 * h);
                _mm512_storeu_si512((void *)(row + g.off_c + 64 * h),
                                    _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, 7)));
            }
        } else if (!g.prefill) { /* Q4: per group, low + high lanes */
            for (int64_t gi = 0; gi < g.ng; gi++) {
                __m512i s = _mm512_add_epi32(lane_sums(q + GROUP * gi), lane_sums(q + GROUP * gi + 64));
                __m512i v = asym ? _mm512_castps_si512(
                                          _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(d[gi])))
                                    : _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, 3));
                _mm512_storeu_si512((void *)(row + g.off_c + 64 * gi), v);
            }
        } else { /* prefill: per chunk */
            int32_t f = q4 ? 8 : 128, per = (int32_t)(g.ch / 4); /* lanes per chunk */
            int32_t *ci = (int32_t *)(row + g.off_c);
            float *cf = (float *)(row + g.off_c);
            for (int64_t h = 0; h < g.n_pad / 64; h++) {
                int32_t ls[16];
                _mm512_storeu_si512((void *)ls, lane_sums(q + 64 * h));
                for (int32_t l0 = 0; l0 < 16; l0 += per < 16 ? per : 16) {
                    int32_t s = 0;
                    for (int32_t l = l0; l < l0 + (per < 16 ? per : 16); l++) s += ls[l];
                    int64_t c = (64 * h + 4 * l0) / g.ch;
                    bool first = (64 * h + 4 * l0) % g.ch == 0; /* CH = 128 spans two halves */
                    if (asym) {
                        float v = d[(64 * h) / GROUP] * (float)s;
                        cf[c] = first ? v : cf[c] + v;
                    } else {
                        ci[c] = first ? -f * s : ci[c] - f * s;
                    }
                }
            }
        }
    }
    if (g.prefill && r1 == n_rows) { /* zero rows up to the tile size */
        int64_t pad = (n_rows + RT - 1) / RT * RT;
        memset((uint8_t *)xq + (size_t)n_rows * g.stride, 0, (size_t)(pad - n_rows) * g.stride);
    }
}

/* ---- decode -------------------------------------------------------------------------------- */

INLINE __mmask64 mask64(int64_t n) { /* the first n bytes, n clamped to [0, 64] */
    return n >= 64 ? ~(__mmask64)0 : n <= 0 ? (__mmask64)0 : (((__mmask64)1 << n) - 1);
}

/* vpermt2w index vectors of a Q4 group: 32 words of nibbles (each block's qs, in order), and
 * per lane the word of its block's d (and m); lv: IQ4_NL's levels L + 128 as u8, the vpshufb
 * table in every 128-bit lane. */
typedef struct q4idx {
    __m512i qs, d, m, lv;
} q4idx;

/* IQ4_NL's levels plus 128 (1..241) in every 128-bit lane: vpshufb by nibble gives L + 128. */
INLINE __m512i iq4_levels_u8(void) {
    __m128i l = _mm_loadu_si128((const __m128i *)slate__iq4_levels);
    return _mm512_broadcast_i32x4(_mm_xor_si128(l, _mm_set1_epi8((char)0x80)));
}

INLINE q4idx q4_index(int B, bool asym) {
    int32_t bw = (int32_t)(slate__q4_block_bytes(B, asym) / 2), hw = asym ? 2 : 1;
    uint16_t qs[32], d[32], m[32];
    for (int i = 0; i < 32; i++) {
        int per = B / 4; /* qs words per block */
        qs[i] = (uint16_t)((i / per) * bw + hw + i % per);
        int blk = i < 16 ? (8 * i) / B : 0;
        d[i] = (uint16_t)(blk * bw);
        m[i] = (uint16_t)(blk * bw + 1);
    }
    q4idx r;
    r.qs = _mm512_loadu_si512((const void *)qs);
    r.d = _mm512_loadu_si512((const void *)d);
    r.m = _mm512_loadu_si512((const void *)m);
    r.lv = iq4_levels_u8();
    return r;
}

INLINE float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

/* A group's 64 nibble bytes qs as the vpdpbusd operands: low and high nibbles, and for IQ4_NL
 * (nl) their levels + 128. */
INLINE void q4_codes(bool nl, __m512i qs, const q4idx *ix, __m512i *lo, __m512i *hi) {
    const __m512i lo4 = _mm512_set1_epi8(15);
    *lo = _mm512_and_si512(qs, lo4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(qs, 4), lo4);
    if (nl) {
        *lo = _mm512_shuffle_epi8(ix->lv, *lo);
        *hi = _mm512_shuffle_epi8(ix->lv, *hi);
    }
}

/* One group g (nb bytes of each weight row: the whole group, or the last, partial one) of R rows
 * of x against weight rows wr[0..O), added into acc. nb is a compile-time constant for whole
 * groups, so their load masks fold away. nl: IQ4_NL (B = 32, symmetric), whose nibbles become
 * L + 128 and whose correction is 16 times Q4's (see IQ4_NL above). */
INLINE void dec_q4_group(bool nl, int B, bool asym, int R, int O, __m512 acc[3][4],
                         const uint8_t *xq, const xgeom *xg, const uint8_t *const wr[4], int64_t g,
                         int64_t gb,
                         int64_t nb, size_t pf, const q4idx *ix) {
    __mmask64 m1 = mask64(nb), m2 = mask64(nb - 64);
    __m512i lo[4], hi[4];
    __m512 sv[4], mv[4];
    UNROLL for (int c = 0; c < O; c++) {
        const uint8_t *p = wr[c] + g * gb;
        /* Q4 keeps T0: L2 measured no faster for it (kernels/x86/prefetch.h) */
        _mm_prefetch((const char *)(p + pf), _MM_HINT_T0);
        _mm_prefetch((const char *)(p + pf + 64), _MM_HINT_T0);
        __m512i z1 = _mm512_maskz_loadu_epi8(m1, p), z2 = _mm512_maskz_loadu_epi8(m2, p + 64);
        q4_codes(nl, _mm512_permutex2var_epi16(z1, ix->qs, z2), ix, &lo[c], &hi[c]);
        sv[c] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(z1, ix->d, z2)));
        if (asym)
            mv[c] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(z1, ix->m, z2)));
    }
    UNROLL for (int r = 0; r < R; r++) {
        const uint8_t *xr = xq + (size_t)r * xg->stride;
        __m512i xlo = _mm512_loadu_si512((const void *)(xr + g * GROUP));
        __m512i xhi = _mm512_loadu_si512((const void *)(xr + g * GROUP + 64));
        __m512i init = asym ? _mm512_setzero_si512()
                            : _mm512_loadu_si512((const void *)(xr + xg->off_c + 64 * g));
        if (nl) init = _mm512_slli_epi32(init, 4); /* -128 * sum(qx) */
        __m512 cf = asym ? _mm512_loadu_ps((const void *)(xr + xg->off_c + 64 * g)) : _mm512_setzero_ps();
        __m512 dx = _mm512_set1_ps(((const float *)(xr + xg->off_d))[g]);
        UNROLL for (int c = 0; c < O; c++) {
            __m512i a = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, lo[c], xlo), hi[c], xhi);
            acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_mul_ps(sv[c], dx), acc[r][c]);
            if (asym) acc[r][c] = _mm512_fmadd_ps(mv[c], cf, acc[r][c]);
        }
    }
}

/* An aligned walk over a weight row whose units (a Q4 group of 66-96 bytes, a Q8_0 pair of
 * blocks of 68) are 64 + adv bytes each, adv a power of two below 64: the unit at offset off of
 * line a lies in lines l0 = a and l1 = a + 64, read by word permutes with the NI index vectors
 * ix[] shifted by off / 2 words. line_walk_start sets that up for the row's first unit at r
 * (r - a must be a multiple of adv, so that off + 64 + adv <= 128 for every unit);
 * line_walk_next moves to the next unit, at a + off + 64 + adv = (a + 64) + (off + adv): one
 * new line, or two when the offset wraps to 0 (a + 128). */
typedef struct line_walk {
    const uint8_t *a;
    int off;
    __m512i l0, l1, ix[3];
} line_walk;

INLINE void line_walk_start(line_walk *w, int NI, const uint8_t *r, const __m512i *ix) {
    w->a = (const uint8_t *)((uintptr_t)r & ~(uintptr_t)63);
    w->off = (int)(r - w->a);
    __m512i shift = _mm512_set1_epi16((short)(w->off / 2));
    UNROLL for (int i = 0; i < NI; i++) w->ix[i] = _mm512_add_epi16(ix[i], shift);
    w->l0 = _mm512_load_si512((const void *)w->a);
    w->l1 = _mm512_load_si512((const void *)(w->a + 64));
}

INLINE void line_walk_next(line_walk *w, int NI, int adv) {
    w->off += adv;
    w->a += 64;
    if (w->off == 64) {
        w->off = 0;
        w->a += 64;
        w->l0 = _mm512_load_si512((const void *)w->a);
        UNROLL for (int i = 0; i < NI; i++) w->ix[i] = _mm512_sub_epi16(w->ix[i], _mm512_set1_epi16(32));
    } else {
        w->l0 = w->l1;
    }
    w->l1 = _mm512_load_si512((const void *)(w->a + 64));
    UNROLL for (int i = 0; i < NI; i++) w->ix[i] = _mm512_add_epi16(w->ix[i], _mm512_set1_epi16((short)(adv / 2)));
}

/* The word permute of unit's lines by index vector i. */
INLINE __m512i line_walk_perm(const line_walk *w, int i) {
    return _mm512_permutex2var_epi16(w->l0, w->ix[i], w->l1);
}

/* One x row against weight row o, Q4 (any block size, symmetric or not) or IQ4_NL, whole groups
 * only. A group of 128 weights is 66 to 96 bytes (Q4 B=32 and IQ4_NL: 4 blocks of 18 = 72), so
 * each starts adv = group bytes - 64 bytes further into a 64-byte line than the one before.
 * dec_q4_group loads a group with two unaligned 64-byte loads, each across two lines: with the
 * x loads that made decode bound by loads, not by DRAM (one thread, a [2048][5632] B=32 matrix
 * from DRAM: 22 GB/s; from L2 hardly faster). Here every line of the row is loaded once,
 * aligned, and kept for the next group (line_walk): the two lines that hold a group feed the
 * same word permutes with the indices shifted by the group's offset in its line. The same
 * products in the same order as dec_q4_group: bit for bit its result. The lines loaded hold
 * bytes outside the row only next to its first and last group; decode_q4 takes this path only
 * where those bytes are inside the tensor. */
INLINE void dec_q4_row(bool nl, int B, bool asym, float *y, const uint8_t *xq, const xgeom *xg,
                       const slate__wmat *w, const float *bias, int64_t o, const q4idx *ix,
                       size_t pf) {
    const int adv = (int)((GROUP / B) * slate__q4_block_bytes(B, asym)) - 64, NI = asym ? 3 : 2;
    const __m512i idx[3] = {ix->qs, ix->d, ix->m};
    /* the row's start is a multiple of adv from its line (decode_q4 checks the tensor's
     * start; rows are whole groups), so a group never reaches a third line */
    line_walk lw;
    line_walk_start(&lw, NI, (const uint8_t *)w->data + (size_t)o * w->row_bytes, idx);
    __m512 acc = _mm512_setzero_ps();
    const int64_t ng = xg->ng;
    for (int64_t g = 0;;) {
        _mm_prefetch((const char *)(lw.a + pf), _MM_HINT_T0);
        _mm_prefetch((const char *)(lw.a + pf + 64), _MM_HINT_T0);
        __m512i lo, hi;
        q4_codes(nl, line_walk_perm(&lw, 0), ix, &lo, &hi);
        __m512 sv = _mm512_cvtph_ps(_mm512_castsi512_si256(line_walk_perm(&lw, 1)));
        __m512i xlo = _mm512_loadu_si512((const void *)(xq + g * GROUP));
        __m512i xhi = _mm512_loadu_si512((const void *)(xq + g * GROUP + 64));
        __m512i init = asym ? _mm512_setzero_si512()
                            : _mm512_loadu_si512((const void *)(xq + xg->off_c + 64 * g));
        if (nl) init = _mm512_slli_epi32(init, 4);
        __m512 dx = _mm512_set1_ps(((const float *)(xq + xg->off_d))[g]);
        __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, lo, xlo), hi, xhi);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(sv, dx), acc);
        if (asym) {
            __m512 mv = _mm512_cvtph_ps(_mm512_castsi512_si256(line_walk_perm(&lw, 2)));
            __m512 cf = _mm512_loadu_ps((const void *)(xq + xg->off_c + 64 * g));
            acc = _mm512_fmadd_ps(mv, cf, acc);
        }
        if (++g == ng) break;
        line_walk_next(&lw, NI, adv);
    }
    y[o] = hsum(acc) + (bias ? bias[o] : 0.0f);
}

/* R rows of x against weight rows o..o+O-1, Q4 with block B (nl: IQ4_NL). */
INLINE void dec_q4(bool nl, int B, bool asym, int R, int O, float *y, const uint8_t *xq,
                   const xgeom *xg, const slate__wmat *w, const float *bias, int64_t o,
                   const q4idx *ix) {
    const int64_t bb = (int64_t)slate__q4_block_bytes(B, asym), gb = (GROUP / B) * bb;
    const int64_t n_full = w->n_in / GROUP, ng = xg->ng;
    const int64_t tail = (w->n_in % GROUP) / B * bb; /* bytes of the last, partial group */
    const size_t pf = PF_BLOCKS * (size_t)O * w->row_bytes; /* see PF_BLOCKS */
    const uint8_t *wr[4];
    UNROLL for (int c = 0; c < O; c++) wr[c] = (const uint8_t *)w->data + (size_t)(o + c) * w->row_bytes;
    __m512 acc[3][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t g = 0; g < n_full; g++)
        dec_q4_group(nl, B, asym, R, O, acc, xq, xg, wr, g, gb, gb, pf, ix);
    if (n_full < ng) dec_q4_group(nl, B, asym, R, O, acc, xq, xg, wr, n_full, gb, tail, pf, ix);
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++)
        y[r * w->n_out + o + c] = hsum(acc[r][c]) + (bias ? bias[o + c] : 0.0f);
}

/* Q8_0 and Q8_C: per group two halves of 64 weights. Q8_0: a half is 2 blocks (68 bytes); its
 * lanes 0-7 take block 0's d, 8-15 block 1's. Q8_C: plain bytes, one scale per row applied at
 * the end; both halves share one accumulator. */
INLINE void dec_q8(bool q8c, int R, int O, float *y, const uint8_t *xq, const xgeom *xg,
                   const slate__wmat *w, const float *bias, int64_t o, __m512i iq, __m512i id) {
    const int64_t ng = xg->ng, n_in = w->n_in;
    const size_t pf = PF_BLOCKS * (size_t)O * w->row_bytes; /* see PF_BLOCKS */
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const uint8_t *wr[4];
    UNROLL for (int c = 0; c < O; c++) wr[c] = (const uint8_t *)w->data + (size_t)(o + c) * w->row_bytes;
    __m512 acc[3][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m512i u[4][2];
        __m512 sv[4][2];
        int64_t left = n_in - g * GROUP; /* inputs of this group, may exceed 128 */
        UNROLL for (int c = 0; c < O; c++) {
            UNROLL for (int h = 0; h < 2; h++) {
                int64_t nh = left - 64 * h; /* inputs in this half */
                if (q8c) {
                    const uint8_t *p = wr[c] + g * GROUP + 64 * h;
                    _mm_prefetch((const char *)(p + pf), SLATE_PF_STREAM);
                    __m512i b = nh >= 64 ? _mm512_loadu_si512((const void *)p)
                                         : _mm512_maskz_loadu_epi8(mask64(nh), p);
                    u[c][h] = _mm512_xor_si512(b, flip);
                } else {
                    int64_t nbk = nh >= 64 ? 2 : nh > 0 ? nh / 32 : 0; /* blocks in this half */
                    const uint8_t *p = wr[c] + (g * 4 + 2 * h) * (int64_t)sizeof(slate__block_q8_0);
                    _mm_prefetch((const char *)(p + pf), SLATE_PF_STREAM);
                    _mm_prefetch((const char *)(p + pf + 64), SLATE_PF_STREAM);
                    int64_t nb = nbk * (int64_t)sizeof(slate__block_q8_0);
                    __m512i z1 = _mm512_maskz_loadu_epi8(mask64(nb), p);
                    __m512i z2 = _mm512_maskz_loadu_epi8(mask64(nb - 64), p + 64);
                    u[c][h] = _mm512_xor_si512(_mm512_permutex2var_epi16(z1, iq, z2), flip);
                    sv[c][h] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(z1, id, z2)));
                }
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            const uint8_t *xr = xq + (size_t)r * xg->stride;
            __m512i x0 = _mm512_loadu_si512((const void *)(xr + g * GROUP));
            __m512i x1 = _mm512_loadu_si512((const void *)(xr + g * GROUP + 64));
            __m512i i0 = _mm512_loadu_si512((const void *)(xr + xg->off_c + 128 * g));
            __m512i i1 = _mm512_loadu_si512((const void *)(xr + xg->off_c + 128 * g + 64));
            __m512 dx = _mm512_set1_ps(((const float *)(xr + xg->off_d))[g]);
            if (q8c) {
                __m512i init = _mm512_add_epi32(i0, i1);
                UNROLL for (int c = 0; c < O; c++) {
                    __m512i a = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, u[c][0], x0), u[c][1], x1);
                    acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), dx, acc[r][c]);
                }
            } else {
                UNROLL for (int c = 0; c < O; c++) {
                    __m512i a0 = _mm512_dpbusd_epi32(i0, u[c][0], x0);
                    __m512i a1 = _mm512_dpbusd_epi32(i1, u[c][1], x1);
                    acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a0), _mm512_mul_ps(sv[c][0], dx), acc[r][c]);
                    acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1), _mm512_mul_ps(sv[c][1], dx), acc[r][c]);
                }
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++) {
        float v = hsum(acc[r][c]);
        if (q8c) v *= w->scales[o + c];
        y[r * w->n_out + o + c] = v + (bias ? bias[o + c] : 0.0f);
    }
}

/* Index vectors of a Q8_0 half (2 blocks of 34 bytes = 17 words): the 32 words of qs, and per
 * lane the word of its block's d. */
INLINE void q8_index(__m512i *iq, __m512i *id) {
    uint16_t q[32], d[32];
    for (int i = 0; i < 32; i++) {
        q[i] = (uint16_t)(i < 16 ? 1 + i : 17 + 1 + (i - 16));
        d[i] = (uint16_t)(i < 8 ? 0 : i < 16 ? 17 : 0);
    }
    *iq = _mm512_loadu_si512((const void *)q);
    *id = _mm512_loadu_si512((const void *)d);
}

/* One x row against Q8_0 weight row o, whole groups only: dec_q8's R = O = 1 case with each
 * 64-byte line of the row loaded once, aligned, as dec_q4_row does for Q4 (see there).
 * A half (2 blocks, 68 bytes) starts 4 bytes further into its line than the one before, so
 * with the row 4-byte aligned its 68 bytes always lie in two lines; the permute indices are
 * shifted by the half's offset (+2 words a half, -32 when the offset wraps to 0). The same
 * products in the same order as dec_q8: bit for bit its result. decode_q8 takes this path only
 * where the lines' bytes outside the row are inside the tensor. */
INLINE void dec_q8_0_row(float *y, const uint8_t *xq, const xgeom *xg, const slate__wmat *w,
                         const float *bias, int64_t o, __m512i iq, __m512i id, size_t pf) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    /* the row's start is 4-byte aligned (decode_q8 checks the tensor's start; rows are whole
     * 136-byte groups), so a pair never reaches a third line */
    const __m512i idx[2] = {iq, id};
    line_walk lw;
    line_walk_start(&lw, 2, (const uint8_t *)w->data + (size_t)o * w->row_bytes, idx);
    __m512 acc = _mm512_setzero_ps();
    const int64_t nh = 2 * xg->ng; /* pairs */
    for (int64_t h = 0;;) {
        _mm_prefetch((const char *)(lw.a + pf), SLATE_PF_STREAM);
        _mm_prefetch((const char *)(lw.a + pf + 64), SLATE_PF_STREAM);
        __m512i u = _mm512_xor_si512(line_walk_perm(&lw, 0), flip);
        __m512 sv = _mm512_cvtph_ps(_mm512_castsi512_si256(line_walk_perm(&lw, 1)));
        __m512i x = _mm512_loadu_si512((const void *)(xq + 64 * h));
        __m512i init = _mm512_loadu_si512((const void *)(xq + xg->off_c + 64 * h));
        __m512 dx = _mm512_set1_ps(((const float *)(xq + xg->off_d))[h / 2]);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(init, u, x)),
                              _mm512_mul_ps(sv, dx), acc);
        if (++h == nh) break;
        line_walk_next(&lw, 2, 4);
    }
    y[o] = hsum(acc) + (bias ? bias[o] : 0.0f);
}

/* All of [o0, o1) for R rows. One x row (decode proper): one weight row at a time, a single
 * sequential stream per thread (see "Decode" above); 2 or 3 x rows: two weight rows at a time,
 * so each x chunk serves both, then single rows. */
#define DEC_RANGE(CALL2, CALL1)                                                                    \
    do {                                                                                           \
        int64_t o = o0;                                                                            \
        if (R > 1)                                                                                 \
            for (; o + 2 <= o1; o += 2) CALL2;                                                     \
        for (; o < o1; o++) CALL1;                                                                 \
    } while (0)

/* Rows [o0, o1) of one x row with a line_walk row kernel: ROW(o) for each, except a first or
 * last row whose outer lines would hold bytes outside the tensor (a tensor that does not start
 * or end on a 64-byte boundary), which GEN(o) (the general, unaligned kernel) takes. */
#define ALIGNED_RANGE(ROW, GEN)                                                                    \
    do {                                                                                           \
        uintptr_t start = (uintptr_t)w->data, end = start + (size_t)w->n_out * w->row_bytes;      \
        int64_t a = o0, b = o1;                                                                    \
        if (a == 0 && a < b && start % 64) {                                                       \
            int64_t o = a++;                                                                       \
            GEN;                                                                                   \
        }                                                                                          \
        bool last = b == w->n_out && a < b && end % 64;                                            \
        for (int64_t o = a; o < b - last; o++) ROW;                                                \
        if (last) {                                                                                \
            int64_t o = b - 1;                                                                     \
            GEN;                                                                                   \
        }                                                                                          \
    } while (0)

INLINE void decode_q4(bool nl, int B, bool asym, int R, float *y, const uint8_t *xq,
                      const xgeom *xg, const slate__wmat *w, const float *bias, int64_t o0,
                      int64_t o1) {
    q4idx ix = q4_index(B, asym);
    const int adv = (int)((GROUP / B) * slate__q4_block_bytes(B, asym)) - 64;
    if (R == 1 && w->n_in % GROUP == 0 && (uintptr_t)w->data % (uintptr_t)adv == 0) {
        const size_t pf = PF_BLOCKS * w->row_bytes;
        ALIGNED_RANGE(dec_q4_row(nl, B, asym, y, xq, xg, w, bias, o, &ix, pf),
                      dec_q4(nl, B, asym, 1, 1, y, xq, xg, w, bias, o, &ix));
        return;
    }
    DEC_RANGE(dec_q4(nl, B, asym, R, 2, y, xq, xg, w, bias, o, &ix),
              dec_q4(nl, B, asym, R, 1, y, xq, xg, w, bias, o, &ix));
}

INLINE void decode_q8(bool q8c, int R, float *y, const uint8_t *xq, const xgeom *xg,
                      const slate__wmat *w, const float *bias, int64_t o0, int64_t o1) {
    __m512i iq, id;
    q8_index(&iq, &id);
    if (!q8c && R == 1 && w->n_in % GROUP == 0 && (uintptr_t)w->data % 4 == 0) {
        const size_t pf = PF_BLOCKS * w->row_bytes;
        ALIGNED_RANGE(dec_q8_0_row(y, xq, xg, w, bias, o, iq, id, pf),
                      dec_q8(false, 1, 1, y, xq, xg, w, bias, o, iq, id));
        return;
    }
    DEC_RANGE(dec_q8(q8c, R, 2, y, xq, xg, w, bias, o, iq, id),
              dec_q8(q8c, R, 1, y, xq, xg, w, bias, o, iq, id));
}

/* Rows of x three, two or one at a time (R is a compile-time constant in each call). */
INLINE void decode_rows(slate_dtype dt, int B, bool asym, float *y, const void *xq,
                        const xgeom *xg, const slate__wmat *w, const float *bias, int64_t n_rows,
                        int64_t o0, int64_t o1) {
    for (int64_t r = 0; r < n_rows;) {
        const uint8_t *xr = (const uint8_t *)xq + (size_t)r * xg->stride;
        float *yr = y + r * w->n_out;
        int R = n_rows - r >= 3 ? 3 : (int)(n_rows - r);
        if (dt == SLATE_DTYPE_Q4 || dt == SLATE_DTYPE_IQ4_NL) {
            bool nl = dt == SLATE_DTYPE_IQ4_NL;
            if (R == 3) decode_q4(nl, B, asym, 3, yr, xr, xg, w, bias, o0, o1);
            else if (R == 2) decode_q4(nl, B, asym, 2, yr, xr, xg, w, bias, o0, o1);
            else decode_q4(nl, B, asym, 1, yr, xr, xg, w, bias, o0, o1);
        } else {
            bool q8c = dt == SLATE_DTYPE_Q8_C;
            if (R == 3) decode_q8(q8c, 3, yr, xr, xg, w, bias, o0, o1);
            else if (R == 2) decode_q8(q8c, 2, yr, xr, xg, w, bias, o0, o1);
            else decode_q8(q8c, 1, yr, xr, xg, w, bias, o0, o1);
        }
        r += R;
    }
}

static void matmul_decode(float *y, const void *xq, const slate__wmat *w, const float *bias,
                          int64_t n_rows, int64_t o0, int64_t o1, const xgeom *xg) {
    switch (w->dtype == SLATE_DTYPE_Q4 ? w->block * 2 + (int)w->asym : 0) {
    case 32: decode_rows(SLATE_DTYPE_Q4, 16, false, y, xq, xg, w, bias, n_rows, o0, o1); break;
    case 33: decode_rows(SLATE_DTYPE_Q4, 16, true, y, xq, xg, w, bias, n_rows, o0, o1); break;
    case 64: decode_rows(SLATE_DTYPE_Q4, 32, false, y, xq, xg, w, bias, n_rows, o0, o1); break;
    case 65: decode_rows(SLATE_DTYPE_Q4, 32, true, y, xq, xg, w, bias, n_rows, o0, o1); break;
    case 128: decode_rows(SLATE_DTYPE_Q4, 64, false, y, xq, xg, w, bias, n_rows, o0, o1); break;
    case 129: decode_rows(SLATE_DTYPE_Q4, 64, true, y, xq, xg, w, bias, n_rows, o0, o1); break;
    case 256: decode_rows(SLATE_DTYPE_Q4, 128, false, y, xq, xg, w, bias, n_rows, o0, o1); break;
    case 257: decode_rows(SLATE_DTYPE_Q4, 128, true, y, xq, xg, w, bias, n_rows, o0, o1); break;
    default:
        if (w->dtype == SLATE_DTYPE_IQ4_NL)
            decode_rows(SLATE_DTYPE_IQ4_NL, 32, false, y, xq, xg, w, bias, n_rows, o0, o1);
        else if (w->dtype == SLATE_DTYPE_Q8_0)
            decode_rows(SLATE_DTYPE_Q8_0, 32, false, y, xq, xg, w, bias, n_rows, o0, o1);
        else
            decode_rows(SLATE_DTYPE_Q8_C, 0, false, y, xq, xg, w, bias, n_rows, o0, o1);
        break;
    }
}

/* ---- prefill -------------------------------------------------------------------------------
 * Columns [c0, c0 + 32) x inputs [kb, ke) of the weights are unpacked into u8 wp[k/4][32][4]
 * (Q4: nibble values 0..15; IQ4_NL: L + 128; int8 formats: w ^ 0x80), 16 inputs x 16 columns
 * at a time: each
 * column's 16 values are decoded into an xmm, then a 16 x 4 dword transpose (vpermd within each
 * group of 4 columns, shuffles of 128-bit lanes across groups) writes 4 zmm rows. Scales per
 * chunk and column go to ds (and ms, asymmetric Q4). Columns past the matrix are zero. */

typedef struct tile {
    uint8_t wp[KC / 4][CT][4];
    float ds[KC / 16][CT]; /* per chunk (at least 16 inputs) */
    float ms[KC / 16][CT];
} tile;

/* Inputs [k, k + 16) of column row `row` as 16 u8 values (k a multiple of 16, below n_in
 * rounded up to the chunk; inputs past n_in come out 0 for Q8_C and are 0 in x anyway). */
INLINE __m128i values16(slate_dtype dt, int B, bool asym, const slate__wmat *w,
                        const uint8_t *row, int64_t k) {
    if (dt == SLATE_DTYPE_IQ4_NL) { /* Q4 B=32's nibbles through the levels */
        const uint8_t *qs = row + (size_t)(k / 32) * sizeof(slate__block_iq4_nl) + 2;
        __m128i b = _mm_loadu_si128((const __m128i *)qs);
        __m128i nib = _mm_and_si128(k % 32 >= 16 ? _mm_srli_epi16(b, 4) : b, _mm_set1_epi8(15));
        __m128i lv = _mm512_castsi512_si128(iq4_levels_u8());
        return _mm_shuffle_epi8(lv, nib);
    }
    if (dt == SLATE_DTYPE_Q4) {
        const uint8_t *qs = row + (size_t)(k / B) * slate__q4_block_bytes(B, asym) + (asym ? 4 : 2);
        const __m128i m = _mm_set1_epi8(15);
        if (B == 16) { /* the whole block: 8 low nibbles, then 8 high */
            __m128i b = _mm_loadl_epi64((const __m128i *)qs);
            return _mm_and_si128(_mm_unpacklo_epi64(b, _mm_srli_epi16(b, 4)), m);
        }
        int j = (int)(k % B);
        __m128i b = _mm_loadu_si128((const __m128i *)(qs + j % (B / 2)));
        return _mm_and_si128(j >= B / 2 ? _mm_srli_epi16(b, 4) : b, m);
    }
    const __m128i flip = _mm_set1_epi8((char)0x80);
    if (dt == SLATE_DTYPE_Q8_0)
        return _mm_xor_si128(_mm_loadu_si128((const __m128i *)(row + (size_t)(k / 32) * sizeof(slate__block_q8_0) + 2 + k % 32)), flip);
    int64_t left = w->n_in - k; /* Q8_C: any row length */
    __m128i b = _mm_maskz_loadu_epi8(left >= 16 ? (__mmask16)0xffff : (__mmask16)vt_mask16(left), row + k);
    return _mm_xor_si128(b, flip);
}

/* Columns [c0, c0 + 16) (nc valid) x inputs [k, k + 16) into wp rows k/4 .. k/4 + 3 at column
 * offset co. */
INLINE void pack16x16(slate_dtype dt, int B, bool asym, tile *t, const slate__wmat *w,
                      const uint8_t *const rows[16], int nc, int64_t k, int64_t kb, int co) {
    __m512i a[4];
    UNROLL for (int m = 0; m < 4; m++) {
        __m128i v[4];
        UNROLL for (int i = 0; i < 4; i++)
            v[i] = 4 * m + i < nc ? values16(dt, B, asym, w, rows[4 * m + i], k) : _mm_setzero_si128();
        a[m] = vt_cols4(v);
    }
    vt_put16x16(t->wp + (k - kb) / 4, co, a);
}

INLINE void pack(slate_dtype dt, int B, bool asym, tile *t, const slate__wmat *w, int64_t c0,
                 int nc, int64_t kb, int64_t ke, int64_t ch) {
    for (int half = 0; half < 2; half++) {
        int co = 16 * half, n = nc - co < 0 ? 0 : nc - co > 16 ? 16 : nc - co;
        const uint8_t *rows[16];
        for (int c = 0; c < 16; c++)
            rows[c] = (const uint8_t *)w->data + (size_t)(c0 + co + (c < n ? c : 0)) * w->row_bytes;
        if (n == 16)
            for (int64_t k = kb; k < ke; k += 16) pack16x16(dt, B, asym, t, w, rows, 16, k, kb, co);
        else
            for (int64_t k = kb; k < ke; k += 16) pack16x16(dt, B, asym, t, w, rows, n, k, kb, co);
        for (int64_t ci = 0; ci < (ke - kb) / ch; ci++) {
            int64_t k = kb + ci * ch;
            for (int c = 0; c < 16; c++) {
                float d = 0.0f, m = 0.0f;
                if (c < n) {
                    const uint8_t *row = rows[c];
                    uint16_t h;
                    if (dt == SLATE_DTYPE_Q4 || dt == SLATE_DTYPE_IQ4_NL) { /* the same header */
                        const uint8_t *blk = row + (size_t)(k / B) * slate__q4_block_bytes(B, asym);
                        memcpy(&h, blk, 2);
                        d = _cvtsh_ss(h);
                        if (asym) {
                            memcpy(&h, blk + 2, 2);
                            m = _cvtsh_ss(h);
                        }
                    } else if (dt == SLATE_DTYPE_Q8_0) {
                        memcpy(&h, row + (size_t)(k / 32) * sizeof(slate__block_q8_0), 2);
                        d = _cvtsh_ss(h);
                    } else {
                        d = w->scales[c0 + co + c];
                    }
                }
                t->ds[ci][co + c] = d;
                t->ms[ci][co + c] = m;
            }
        }
    }
}

/* Rows [r0, r0 + 4) x the 32 columns of t over [kb, ke): out[r][h] = sum over 128-input
 * groups of dx[r][g] * sum over the group's chunks of ds[chunk] * (int32 dot). The x scale is
 * applied once per group (all chunks of a group share it); asymmetric Q4 adds m * dx * sum(qx)
 * per chunk. nl (IQ4_NL): the stored -8 * sum(qx) times 16 starts each chunk's dot. */
INLINE void tile_rows(bool nl, bool asym, int64_t ch, const tile *t, const uint8_t *xq,
                      const xgeom *xg, int64_t r0, int64_t kb, int64_t ke, __m512 out[PR][2]) {
    const uint8_t *xr[PR];
    UNROLL for (int r = 0; r < PR; r++) xr[r] = xq + (size_t)(r0 + r) * xg->stride;
    for (int64_t g0 = kb; g0 < ke; g0 += GROUP) {
        int64_t g1 = g0 + GROUP < ke ? g0 + GROUP : ke;
        __m512 acc[PR][2];
        UNROLL for (int r = 0; r < PR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        for (int64_t k0 = g0; k0 < g1; k0 += ch) {
            int64_t ci = (k0 - kb) / ch, cg = k0 / ch;
            __m512i a[PR][2];
            UNROLL for (int r = 0; r < PR; r++) {
                int32_t c = asym ? 0 : ((const int32_t *)(xr[r] + xg->off_c))[cg];
                __m512i i0 = _mm512_set1_epi32(nl ? c * 16 : c);
                a[r][0] = a[r][1] = i0;
            }
            vt_dots(t->wp + (k0 - kb) / 4, ch, xr, k0, a);
            vt_scale_add(t->ds[ci], a, acc);
            if (asym) {
                __m512 m0 = _mm512_loadu_ps(t->ms[ci]), m1 = _mm512_loadu_ps(t->ms[ci] + 16);
                UNROLL for (int r = 0; r < PR; r++) {
                    __m512 cf = _mm512_set1_ps(((const float *)(xr[r] + xg->off_c))[cg]);
                    out[r][0] = _mm512_fmadd_ps(m0, cf, out[r][0]);
                    out[r][1] = _mm512_fmadd_ps(m1, cf, out[r][1]);
                }
            }
        }
        float dx[PR];
        UNROLL for (int r = 0; r < PR; r++) dx[r] = ((const float *)(xr[r] + xg->off_d))[g0 / GROUP];
        vt_group_add(dx, acc, out);
    }
}

/* One column tile: for each K block, pack it, then every row tile adds its share to y (the
 * tile's y strip, n_rows x 32 floats, stays in L2 across the K blocks). */
INLINE void prefill_cols(slate_dtype dt, int B, bool asym, tile *t, float *y, const void *xq,
                         const slate__wmat *w, const float *bias, int64_t n_rows, int64_t c0,
                         int nc, const xgeom *xg) {
    const int64_t ch = dt == SLATE_DTYPE_Q4                                   ? B
                       : dt == SLATE_DTYPE_Q8_0 || dt == SLATE_DTYPE_IQ4_NL ? 32
                                                                            : GROUP;
    const int64_t k_end = (w->n_in + ch - 1) / ch * ch;
    const int64_t n_out = w->n_out;
    const __mmask16 cm[2] = {vt_mask16(nc), vt_mask16(nc - 16)};
    for (int64_t kb = 0; kb < k_end; kb += KC) {
        int64_t ke = kb + KC < k_end ? kb + KC : k_end;
        bool first = kb == 0;
        pack(dt, B, asym, t, w, c0, nc, kb, ke, ch);
        __m512 bv[2];
        vt_strip_bias(bv, bias, first, c0, cm);
        for (int64_t r0 = 0; r0 < n_rows; r0 += PR) {
            int nr = (int)(n_rows - r0 < PR ? n_rows - r0 : PR);
            __m512 out[PR][2];
            vt_strip_load(out, y + c0, n_out, r0, nr, first, bv, cm);
            tile_rows(dt == SLATE_DTYPE_IQ4_NL, asym, ch, t, (const uint8_t *)xq, xg, r0, kb, ke,
                      out);
            vt_strip_store(y + c0, n_out, r0, nr, cm, out);
        }
    }
}

static void matmul_prefill(float *y, const void *xq, const slate__wmat *w, const float *bias,
                           int64_t n_rows, int64_t o0, int64_t o1, const xgeom xg) {
    tile t __attribute__((aligned(64)));
    for (int64_t c0 = o0; c0 < o1; c0 += CT) {
        int nc = (int)(o1 - c0 < CT ? o1 - c0 : CT);
        /* Format, block and asym as constants, so divisions become shifts and loops unroll. */
#define COLS(DT, B, A) prefill_cols(DT, B, A, &t, y, xq, w, bias, n_rows, c0, nc, &xg)
        switch (w->dtype == SLATE_DTYPE_Q4 ? w->block * 2 + (int)w->asym : 0) {
        case 32: COLS(SLATE_DTYPE_Q4, 16, false); break;
        case 33: COLS(SLATE_DTYPE_Q4, 16, true); break;
        case 64: COLS(SLATE_DTYPE_Q4, 32, false); break;
        case 65: COLS(SLATE_DTYPE_Q4, 32, true); break;
        case 128: COLS(SLATE_DTYPE_Q4, 64, false); break;
        case 129: COLS(SLATE_DTYPE_Q4, 64, true); break;
        case 256: COLS(SLATE_DTYPE_Q4, 128, false); break;
        case 257: COLS(SLATE_DTYPE_Q4, 128, true); break;
        default:
            if (w->dtype == SLATE_DTYPE_IQ4_NL) COLS(SLATE_DTYPE_IQ4_NL, 32, false);
            else if (w->dtype == SLATE_DTYPE_Q8_0) COLS(SLATE_DTYPE_Q8_0, 32, false);
            else COLS(SLATE_DTYPE_Q8_C, 0, false);
            break;
        }
#undef COLS
    }
}

static void matmul(float *y, const float *x, const void *xq, const slate__wmat *w,
                   const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    xgeom xg = geom(w, n_rows);
    if (xg.prefill) matmul_prefill(y, xq, w, bias, n_rows, o0, o1, xg);
    else matmul_decode(y, xq, w, bias, n_rows, o0, o1, &xg);
}

void slate__avx512_vnni_fill(slate__kernels *k) {
    k->name = "avx512_vnni";
    static const slate_dtype q[] = {SLATE_DTYPE_Q8_0, SLATE_DTYPE_Q4, SLATE_DTYPE_Q8_C,
                                    SLATE_DTYPE_IQ4_NL};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        k->matmul[q[i]] = matmul;
        k->xq_plan[q[i]] = xq_plan;
        k->quantize_x[q[i]] = quantize_x;
    }
}
