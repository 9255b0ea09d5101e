/*
 * avx512_vbmi.c - integer matmul of palettized weights (dtype PAL, kernels/quant.h) with
 * AVX-512 VBMI (vpermb, vpermt2b, vpmultishiftqb) and VNNI (vpdpbusd). dispatch.c installs it in
 * the avx512_vnni table on CPUs that also have VBMI; elsewhere PAL keeps x86/avx512_pal.c (f32
 * tables and x, vpermps). Same meaning as kernels/ref/quant.c except for two roundings:
 *
 * Tables. Per call, each group's table of 2^N f16 centroids becomes u8: c ~ m + s u with
 * m = min c, s = (max c - min c) / 255, u = round((c - m) / s), |error| <= s / 2. Affine rather
 * than symmetric: u is already the unsigned operand vpdpbusd wants (no +128 and correction),
 * the range is the table's own, and the m term is m * sum(x), one number per row of x. At 6
 * and 8 bits a second u8 plane holds the residual in steps of s / 256 (make_tab: the u8 table
 * alone raised their KL by 8 % and 42 %). 2^N <= 64 entries fit one zmm and vpermb (which
 * reads the low 6 bits of each index byte) looks up 64 weights at once; tables of 4 and 8
 * entries are repeated to 64, so index bytes need no masking. 8 bits: 256 entries in four zmm,
 * two vpermt2b (7 index bits) and a blend on bit 7. Packages are never repacked (kernels are
 * pure), so the tables are rebuilt per call: ~20-60 instructions per group of rows.
 *
 * Activations: as the VNNI kernels (x86/avx512_vnni.c), int8 in groups of 128 inputs with one
 * f32 scale dx = max|x| / 127 per group, so |x - dx q| <= dx / 2. quantize_x also stores
 * x1 = sum over groups of dx * sum(q), and
 *     y[r][o] = s * sum_g dx_g * (int32 sum over group g of u * q) + m * x1 + bias[o]
 * (two planes: 256 u + u2 in the int32 sum). No int32 sum overflows (bounds where computed).
 *
 * Indices to bytes. Elements are an LSB-first bit stream. 2 and 4 bits (decode): a 64-byte load
 * holds 256 (128) indices; element p j + k (p = 8 / N indices per byte) is at bits N k of byte
 * j, so a 16-bit shift by N k and vpermb give plane k: 64 weights, one per byte. quantize_x
 * stores x in the same order (per span of 64 p inputs: plane 0's inputs, plane 1's, ...), so
 * the bytes are never reordered on the weight side: 2 instructions per 64 weights. Other widths
 * (and prefill, for all widths) take 64 indices = 8 N bytes at a time in natural order: vpermb
 * copies bytes N q .. N q + N - 1 to qword q, vpmultishiftqb pulls the 8-bit windows at bit
 * offsets 0, N, .., 7 N of each qword (index i of the qword in its low N bits), vpermb looks
 * them up: 3 instructions per 64 weights (8 bits: the lookup only).
 *
 * Decode (n_rows < PREFILL_MIN_ROWS) streams the weights once, one row at a time with a
 * software prefetch 4 KiB ahead (dec_row); per span of 128 (2 bits: 256) inputs, one vpdpbusd
 * per 64 weights and plane and one cvt + fma into f32 lanes with dx. Prefill (n_rows >= 4)
 * unpacks 32 columns x KC inputs of u8 weights once into the VNNI prefill layout [KC/4][32][4]
 * (64 weights of a column per zmm, then a 16 x 16 dword transpose), then runs 4-row x 32-column
 * vpdpbusd register tiles over every row of x.
 *
 * Loads are masked at the end of a row: nothing outside the row is read; x is 0 past n_in, so
 * what a zero-filled index decodes to never matters. This file keeps no state between calls.
 *
 * Measured on the target VM (Zen 5, 2 cores; bench/pal_matvec.c, 2 threads, old and new
 * interleaved in one process, best of 5 rounds; [5632][2048] and [2048][5632], group 16):
 *                         pal2       pal3       pal4       pal6     pal8     (q4_b32)
 *   decode GB/s (512 MB of tensor copies: from DRAM)
 *     x86/avx512_pal.c    15-17      0.2        27-30      0.5      0.6
 *     this file           50-56      50-54      62-67      65-70    67-71    (58-63)
 *   prefill GFLOP/s (64 rows)
 *     x86/avx512_pal.c    97-112     43-46      93-110     44-47    43-47
 *     this file           1160-1200  1120-1180  1085-1095  640-760  545-549  (1040-1063)
 * pal6/pal8 prefill is half of the others' by design (two planes: twice the vpdpbusd).
 * TinyLlama pal4 (slate bench -t 2 --profile -n 16, one run): decode 72.9 tok/s at depth 0
 * (40.5 GB/s, 93 % of the machine's read bandwidth; the PAL matmuls 43-45 GB/s), prefill 521 /
 * 508 tok/s at 128 / 512 tokens (PAL matmuls 1350-1440 GFLOP/s); bench/RESULTS.md's earlier
 * run had 43 and 41-48 tok/s, int4-b32 ~450 tok/s prefill. Quality
 * (bench/run_eval.sh's stories260K text, KL vs fp32, avx512_pal.c -> this file): pal4 0.1842 ->
 * 0.1847, pal3 1.183 -> 1.176, pal2 4.263 -> 4.263, pal6 0.0214 -> 0.0220, pal8 0.00135 ->
 * 0.00199 (int8 activations: Q8_0 weights with the VNNI kernels give 0.00132).
 */
#include "kernels/kernels.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 32")

enum {
    GROUP = 128,          /* x quantization group (inputs) */
    PREFILL_MIN_ROWS = 4, /* fewer rows: the decode kernel */
    PR = 4,               /* prefill rows per register tile (x rows are padded to a multiple) */
    CT = 32,              /* prefill columns per tile (two zmm of int32) */
    KC = 1024,            /* prefill inputs per K block: 32 KiB of unpacked weights */
    PF_BYTES = 4096,      /* decode prefetches this far ahead in its stream: see dec_row */
};

/* ---- x layout -------------------------------------------------------------------------------
 * Per row of x, at row * stride (a multiple of 64): q[n_pad] int8, d[ng] f32, x1 f32. n_pad is
 * n_in rounded up to the span (256 inputs at 2 bits, else 128), q is 0 past n_in. Decode at 2
 * and 4 bits stores q in plane order (above); everything else in natural order. Prefill rows
 * are padded with zero rows to a multiple of PR. */

typedef struct xgeom {
    bool prefill;
    int planes;          /* 1: natural order; 2 (4 bits) or 4 (2 bits): plane order */
    int64_t span, ng, n_pad;
    size_t off_d, off_x1, used, stride;
} xgeom;

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

static xgeom geom(const slate__wmat *w, int64_t n_rows) {
    xgeom g;
    g.prefill = n_rows >= PREFILL_MIN_ROWS;
    g.span = w->bits == 2 ? 256 : 128;
    g.planes = g.prefill ? 1 : w->bits == 2 ? 4 : w->bits == 4 ? 2 : 1;
    g.n_pad = (w->n_in + g.span - 1) / g.span * g.span;
    g.ng = g.n_pad / GROUP;
    g.off_d = (size_t)g.n_pad;
    g.off_x1 = g.off_d + 4 * (size_t)g.ng;
    g.used = g.off_x1 + 4;
    g.stride = align64(g.used);
    return g;
}

static slate__xq_plan xq_plan(const slate__wmat *w, int64_t n_rows) {
    slate__xq_plan p;
    xgeom g = geom(w, n_rows);
    int64_t rows = g.prefill ? (n_rows + PR - 1) / PR * PR : n_rows;
    p.bytes = (size_t)rows * g.stride;
    p.row_align = g.prefill ? PR : 1;
    /* 0x50 ('P'): not one of avx512_vnni.c's layouts (1..3 << 24); the span sets the stride. */
    p.layout = 0x50u << 24 | (uint32_t)g.prefill << 12 | (uint32_t)(g.span / GROUP) << 8 |
               (uint32_t)g.planes;
    return p;
}

/* ---- quantizing x -------------------------------------------------------------------------- */

INLINE __mmask16 mask16(int64_t n) { /* the first n lanes, n clamped to [0, 16] */
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

INLINE __mmask64 mask64(int64_t n) { /* the first n bytes, n clamped to [0, 64] */
    return n >= 64 ? ~(__mmask64)0 : n <= 0 ? (__mmask64)0 : (((__mmask64)1 << n) - 1);
}

/* One row in natural order: q[n_pad], d[ng]; returns x1 = sum_g d[g] * sum(q of g). */
static float quant_row(const float *x, int64_t n_in, int64_t ng, int8_t *q, float *d) {
    float x1 = 0.0f;
    for (int64_t g = 0; g < ng; g++) {
        const float *xg = x + g * GROUP;
        int64_t nv = n_in - g * GROUP; /* valid inputs (may be <= 0 in the padding) */
        __m512 v[8], mx = _mm512_setzero_ps();
        UNROLL for (int t = 0; t < 8; t++) {
            v[t] = _mm512_maskz_loadu_ps(mask16(nv - 16 * t), xg + 16 * t);
            mx = _mm512_max_ps(mx, _mm512_abs_ps(v[t]));
        }
        float amax = _mm512_reduce_max_ps(mx);
        /* d = amax / 127 is stored; scaling by 127 / amax rounds |x| / d to at most 127. */
        d[g] = amax / 127.0f;
        __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
        __m512i sum = _mm512_setzero_si512();
        UNROLL for (int t = 0; t < 8; t++) {
            __m512i iv = _mm512_cvtps_epi32(_mm512_mul_ps(v[t], id)); /* nearest even */
            _mm_storeu_si128((__m128i *)(q + g * GROUP + 16 * t), _mm512_cvtsepi32_epi8(iv));
            sum = _mm512_add_epi32(sum, iv);
        }
        x1 += d[g] * (float)_mm512_reduce_add_epi32(sum);
    }
    return x1;
}

/* Reorders q (natural) into plane order in place, span by span: plane k of a span of 64 p
 * inputs is byte j = q[p j + k]. */
static void to_planes(int8_t *q, int64_t n_pad, int planes) {
    uint8_t i0[64], i1[64], i2[64], i3[64];
    for (int j = 0; j < 64; j++) {
        i0[j] = (uint8_t)((planes * j + 0) & 127);
        i1[j] = (uint8_t)((planes * j + 1) & 127);
        i2[j] = (uint8_t)((planes * j + 2) & 127);
        i3[j] = (uint8_t)((planes * j + 3) & 127);
    }
    const __m512i x0 = _mm512_loadu_si512(i0), x1 = _mm512_loadu_si512(i1);
    const __m512i x2 = _mm512_loadu_si512(i2), x3 = _mm512_loadu_si512(i3);
    if (planes == 2) {
        for (int64_t s = 0; s < n_pad; s += 128) {
            __m512i a = _mm512_loadu_si512(q + s), b = _mm512_loadu_si512(q + s + 64);
            _mm512_storeu_si512(q + s, _mm512_permutex2var_epi8(a, x0, b));
            _mm512_storeu_si512(q + s + 64, _mm512_permutex2var_epi8(a, x1, b));
        }
        return;
    }
    const __mmask64 upper = ~(__mmask64)0 << 32; /* j >= 32: 4 j + k >= 128 */
    for (int64_t s = 0; s < n_pad; s += 256) {
        __m512i a = _mm512_loadu_si512(q + s), b = _mm512_loadu_si512(q + s + 64);
        __m512i c = _mm512_loadu_si512(q + s + 128), e = _mm512_loadu_si512(q + s + 192);
        const __m512i ix[4] = {x0, x1, x2, x3};
        __m512i out[4];
        UNROLL for (int k = 0; k < 4; k++)
            out[k] = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(a, ix[k], b),
                                            _mm512_permutex2var_epi8(c, ix[k], e));
        UNROLL for (int k = 0; k < 4; k++) _mm512_storeu_si512(q + s + 64 * k, out[k]);
    }
}

static void quantize_x(void *xq, const float *x, const slate__wmat *w, int64_t n_rows, int64_t r0,
                       int64_t r1) {
    xgeom g = geom(w, n_rows);
    for (int64_t r = r0; r < r1; r++) {
        uint8_t *row = (uint8_t *)xq + (size_t)r * g.stride;
        float x1 = quant_row(x + r * w->n_in, w->n_in, g.ng, (int8_t *)row, (float *)(row + g.off_d));
        memcpy(row + g.off_x1, &x1, 4);
        if (g.planes > 1) to_planes((int8_t *)row, g.n_pad, g.planes);
        memset(row + g.used, 0, g.stride - g.used); /* the same bytes for the same x */
    }
    if (g.prefill && r1 == n_rows) { /* zero rows up to the tile size */
        int64_t pad = (n_rows + PR - 1) / PR * PR;
        memset((uint8_t *)xq + (size_t)n_rows * g.stride, 0, (size_t)(pad - n_rows) * g.stride);
    }
}

/* ---- tables and index decoding ------------------------------------------------------------- */

/* Bit widths whose tables get a second u8 plane (the residual): see make_tab. */
#define TWO(N) ((N) >= 6)

typedef struct ptab {
    __m512i t[4];  /* u8 values u: N <= 6 in t[0] (2^N entries repeated to 64), N = 8 t[0..3] */
    __m512i t2[4]; /* TWO(N): the residual plane u2, laid out as t */
    float s, m;    /* centroid ~ m + s * u, or (TWO) m + s * (256 u + u2) */
} ptab;

/* Entries 16 i .. 16 i + 15 of a table as f32; 4- and 8-entry tables repeated to 16 lanes. */
INLINE __m512 lut16(int N, const uint16_t *lut, int i) {
    if (N == 2) {
        long long v;
        memcpy(&v, lut, 8);
        return _mm512_cvtph_ps(_mm256_set1_epi64x(v));
    }
    if (N == 3)
        return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lut)));
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(lut + 16 * i)));
}

/* A group's table. One plane: u = round((c - lo) / s1), s1 = (hi - lo) / 255, |error| <= s1 / 2.
 * TWO(N) adds the residual r = c - (lo + s1 u), |r| <= s1 / 2, in steps of s2 = s1 / 256:
 * u2 = 128 + round(r / s2) (clamped to 255 in the tie r = s1 / 2), so c ~ lo - 128 s2 + s2 (256 u
 * + u2) with |error| <= s2, and the kernels shift the int32 sum of u by 8 and add that of u2.
 * Why: on stories260K (bench/run_eval.sh text, f32 x, reference matmul) u8 tables alone raised
 * the KL vs fp32 of pal6 by 8 % and of pal8 by 42 % (4 bits: 0.05 %): 64 and 256 k-means
 * centroids are about as dense as the 256 levels. */
INLINE void make_tab(int N, const uint16_t *lut, ptab *pt) {
    enum { NV_MAX = 16 };
    const int nv = N <= 4 ? 1 : (1 << N) / 16;
    __m512 v[NV_MAX];
    v[0] = lut16(N, lut, 0);
    __m512 mn = v[0], mx = v[0];
    UNROLL for (int i = 1; i < nv; i++) {
        v[i] = lut16(N, lut, i);
        mn = _mm512_min_ps(mn, v[i]);
        mx = _mm512_max_ps(mx, v[i]);
    }
    float lo = _mm512_reduce_min_ps(mn), hi = _mm512_reduce_max_ps(mx);
    const float s1 = (hi - lo) / 255.0f;
    pt->s = TWO(N) ? s1 / 256.0f : s1;
    pt->m = TWO(N) ? lo - 128.0f * (s1 / 256.0f) : lo;
    /* (c - lo) >= 0 and (hi - lo) * 255 / (hi - lo) rounds to 255: u stays in 0..255 */
    const __m512 vlo = _mm512_set1_ps(lo), inv = _mm512_set1_ps(hi > lo ? 255.0f / (hi - lo) : 0.0f);
    const __m512 vs1 = _mm512_set1_ps(s1), inv2 = _mm512_set1_ps(hi > lo ? 256.0f / s1 : 0.0f);
    __m128i b[NV_MAX], b2[NV_MAX];
    UNROLL for (int i = 0; i < nv; i++) {
        __m512i u = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(v[i], vlo), inv));
        b[i] = _mm512_cvtusepi32_epi8(u);
        if (TWO(N)) { /* round(r / s2) in -128..128, saturated to 127, + 128 */
            __m512 r = _mm512_sub_ps(v[i], _mm512_fmadd_ps(vs1, _mm512_cvtepi32_ps(u), vlo));
            __m128i q = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(r, inv2)));
            b2[i] = _mm_xor_si128(q, _mm_set1_epi8((char)0x80));
        }
    }
    if (N <= 4) {
        pt->t[0] = _mm512_broadcast_i32x4(b[0]);
        return;
    }
    UNROLL for (int j = 0; j < nv / 4; j++) {
        __m512i z = _mm512_castsi128_si512(b[4 * j]);
        z = _mm512_inserti32x4(z, b[4 * j + 1], 1);
        z = _mm512_inserti32x4(z, b[4 * j + 2], 2);
        pt->t[j] = _mm512_inserti32x4(z, b[4 * j + 3], 3);
        z = _mm512_castsi128_si512(b2[4 * j]);
        z = _mm512_inserti32x4(z, b2[4 * j + 1], 1);
        z = _mm512_inserti32x4(z, b2[4 * j + 2], 2);
        pt->t2[j] = _mm512_inserti32x4(z, b2[4 * j + 3], 3);
    }
}

/* 64 values of table plane t (ptab.t or .t2) for 64 index bytes (N < 8: the low 6 bits of
 * each byte select). */
INLINE __m512i look(int N, __m512i idx, const __m512i t[4]) {
    if (N != 8) return _mm512_permutexvar_epi8(idx, t[0]);
    __m512i lo = _mm512_permutex2var_epi8(t[0], idx, t[1]);
    __m512i hi = _mm512_permutex2var_epi8(t[2], idx, t[3]);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
}

/* Control vectors of the natural-order decode: spread (qword q <- bytes N q ..) and the bit
 * offsets N i of vpmultishiftqb. */
typedef struct nat {
    __m512i spread, shift;
} nat;

INLINE nat nat_ctl(int N) {
    uint8_t sp[64], sh[64];
    for (int j = 0; j < 64; j++) {
        int q = j / 8, i = j % 8, b = N * q + i;
        sp[j] = (uint8_t)(b < 63 ? b : 63);
        sh[j] = (uint8_t)(N * i);
    }
    nat c;
    c.spread = _mm512_loadu_si512(sp);
    c.shift = _mm512_loadu_si512(sh);
    return c;
}

/* The bytes of 64 indices (8 N) in the load mask, natural order. */
INLINE __mmask64 chunk_mask(int N) { return N == 8 ? ~(__mmask64)0 : (((__mmask64)1 << (8 * N)) - 1); }

/* Index bytes (for look) of 64 consecutive weights from p (bytes outside m read as 0). */
INLINE __m512i chunk64(int N, const uint8_t *p, __mmask64 m, const nat *c) {
    __m512i b = _mm512_maskz_loadu_epi8(m, p);
    if (N == 8) return b;
    return _mm512_multishift_epi64_epi8(c->shift, _mm512_permutexvar_epi8(c->spread, b));
}

/* ---- decode -------------------------------------------------------------------------------- */

/* R rows of x against weight row o (its table: tab).
 * One weight row at a time, one sequential stream per thread, with a software prefetch
 * PF_BYTES ahead (rows are back to back, so it runs into the next rows). Measured
 * (bench/pal_matvec.c shapes, 512 MB of copies, 2 threads, one process): 4 interleaved rows
 * (as avx512_vnni.c) with the prefetch two blocks or 12 KiB ahead streamed pal4 51-52 GB/s,
 * pal3 38-39, pal8 (2 rows) 57-59; one row with 4 KiB: 67-69, 49-54, 63-70 (1 KiB: 58-65,
 * 12 KiB: 67 and 46-48). docs/design.md found the same for f16 ("Decode streams one weight
 * row at a time"). */
INLINE void dec_row(int N, int R, float *y, const uint8_t *xq, const xgeom *xg,
                    const slate__wmat *w, const float *bias, int64_t o, const ptab *tab,
                    const nat *nc) {
    const int P = N == 2 ? 4 : 2;                       /* u8 vectors per span */
    const int64_t S = N == 2 ? 256 : 128, SB = S * N / 8; /* span: inputs, bytes */
    const int64_t rb = (int64_t)w->row_bytes, n_sp = xg->n_pad / S, n_full = rb / SB;
    const uint8_t *wr = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    const float *d[3];
    UNROLL for (int r = 0; r < R; r++) d[r] = (const float *)(xq + (size_t)r * xg->stride + xg->off_d);
    __m512 acc[3];
    UNROLL for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t s = 0; s < n_sp; s++) {
        const int64_t left = rb - s * SB; /* bytes of the row from this span on */
        const bool tail = s >= n_full;
        const uint8_t *p = wr + s * SB;
        __m512i v[4], v2[2];
        _mm_prefetch((const char *)(p + PF_BYTES), _MM_HINT_T0);
        if (SB > 64) _mm_prefetch((const char *)(p + PF_BYTES + 64), _MM_HINT_T0);
        if (N == 2 || N == 4) {
            __m512i b = _mm512_maskz_loadu_epi8(tail ? mask64(left) : ~(__mmask64)0, p);
            UNROLL for (int k = 0; k < P; k++)
                v[k] = look(N, k ? _mm512_srli_epi16(b, N * k) : b, tab->t);
        } else {
            UNROLL for (int h = 0; h < 2; h++) {
                __mmask64 m = chunk_mask(N) & (tail ? mask64(left - 8 * N * h) : ~(__mmask64)0);
                __m512i idx = chunk64(N, p + 8 * N * h, m, nc);
                v[h] = look(N, idx, tab->t);
                if (TWO(N)) v2[h] = look(N, idx, tab->t2);
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            const uint8_t *xr = xq + (size_t)r * xg->stride + s * S;
            __m512i a = _mm512_setzero_si512();
            UNROLL for (int k = 0; k < P; k++)
                a = _mm512_dpbusd_epi32(a, v[k], _mm512_loadu_si512((const void *)(xr + 64 * k)));
            if (TWO(N)) { /* 256 u + u2: < 2^27 for 8 products a lane */
                a = _mm512_slli_epi32(a, 8);
                UNROLL for (int k = 0; k < 2; k++)
                    a = _mm512_dpbusd_epi32(a, v2[k], _mm512_loadu_si512((const void *)(xr + 64 * k)));
            }
            __m512 dx = N == 2 ? _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(d[r][2 * s]),
                                                      _mm512_set1_ps(d[r][2 * s + 1]))
                               : _mm512_set1_ps(d[r][s]);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), dx, acc[r]);
        }
    }
    UNROLL for (int r = 0; r < R; r++) {
        float x1;
        memcpy(&x1, xq + (size_t)r * xg->stride + xg->off_x1, 4);
        y[r * w->n_out + o] = tab->s * _mm512_reduce_add_ps(acc[r]) + tab->m * x1 +
                              (bias ? bias[o] : 0.0f);
    }
}

/* All of [o0, o1) for R rows of x; a group's table is built when its first row comes. */
INLINE void dec_range(int N, int R, float *y, const uint8_t *xq, const xgeom *xg,
                      const slate__wmat *w, const float *bias, int64_t o0, int64_t o1) {
    const nat nc = nat_ctl(N);
    ptab tab = {0}; /* built at o0 */
    for (int64_t o = o0; o < o1; o++) {
        if (o == o0 || o % w->group == 0) make_tab(N, w->lut + ((size_t)(o / w->group) << N), &tab);
        dec_row(N, R, y, xq, xg, w, bias, o, &tab, &nc);
    }
}

/* Rows of x three, two or one at a time (R a compile-time constant in each call). */
INLINE void decode_n(int N, float *y, const uint8_t *xq, const xgeom *xg, const slate__wmat *w,
                     const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    for (int64_t r = 0; r < n_rows;) {
        const uint8_t *xr = xq + (size_t)r * xg->stride;
        float *yr = y + r * w->n_out;
        int R = n_rows - r >= 3 ? 3 : (int)(n_rows - r);
        if (R == 3) dec_range(N, 3, yr, xr, xg, w, bias, o0, o1);
        else if (R == 2) dec_range(N, 2, yr, xr, xg, w, bias, o0, o1);
        else dec_range(N, 1, yr, xr, xg, w, bias, o0, o1);
        r += R;
    }
}

/* ---- prefill -------------------------------------------------------------------------------
 * Columns [c0, c0 + 32) x inputs [kb, ke) of the weights as u8 wp[k/4][32][4] (the layout of
 * avx512_vnni.c's prefill): 64 inputs of 16 columns are decoded into 16 zmm (one column each,
 * natural order), then a 16 x 16 dword transpose makes 16 rows of wp. Columns past the matrix
 * are 0 and never stored. */

typedef struct ptile {
    uint8_t wp[KC / 4][CT][4];
    uint8_t wp2[KC / 4][CT][4]; /* TWO(N): the residual plane */
    uint8_t tab[CT][256];       /* each column's ptab.t (64 bytes, 256 at 8 bits) */
    uint8_t tab2[CT][256];      /* and ptab.t2 */
    float s[CT], m[CT];
} ptile;

INLINE void tile_tables(int N, ptile *t, const slate__wmat *w, int64_t c0, int nc) {
    ptab cur = {0};
    int64_t cur_g = -1;
    for (int c = 0; c < CT; c++) {
        if (c < nc) {
            int64_t g = (c0 + c) / w->group;
            if (g != cur_g) {
                make_tab(N, w->lut + ((size_t)g << N), &cur);
                cur_g = g;
            }
            for (int j = 0; j < (N == 8 ? 4 : 1); j++) {
                _mm512_storeu_si512((void *)(t->tab[c] + 64 * j), cur.t[j]);
                if (TWO(N)) _mm512_storeu_si512((void *)(t->tab2[c] + 64 * j), cur.t2[j]);
            }
            t->s[c] = cur.s;
            t->m[c] = cur.m;
        } else {
            memset(t->tab[c], 0, sizeof t->tab[c]);
            memset(t->tab2[c], 0, sizeof t->tab2[c]);
            t->s[c] = t->m[c] = 0.0f;
        }
    }
}

/* out[t] dword c = a[c] dword t (16 x 16 dwords). */
INLINE void transpose16(const __m512i a[16], __m512i out[16]) {
    __m512i t[16], u[16], v[16];
    UNROLL for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]);
    }
    UNROLL for (int i = 0; i < 4; i++) { /* u[4 i + j] 128-bit lane L: rows 4i..4i+3, dword 4L+j */
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    UNROLL for (int j = 0; j < 4; j++) {
        v[j] = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        v[4 + j] = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        v[8 + j] = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        v[12 + j] = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
    }
    UNROLL for (int j = 0; j < 4; j++) {
        out[j] = _mm512_shuffle_i32x4(v[j], v[8 + j], 0x88);
        out[8 + j] = _mm512_shuffle_i32x4(v[j], v[8 + j], 0xdd);
        out[4 + j] = _mm512_shuffle_i32x4(v[4 + j], v[12 + j], 0x88);
        out[12 + j] = _mm512_shuffle_i32x4(v[4 + j], v[12 + j], 0xdd);
    }
}

/* Columns [co, co + 16) of the tile (n of them in the matrix, from c0 + co) over [kb, ke). */
INLINE void pack16(int N, int n, ptile *t, const slate__wmat *w, int64_t c0, int co, int64_t kb,
                   int64_t ke, const nat *nc) {
    const int64_t rb = (int64_t)w->row_bytes;
    const uint8_t *rows[16];
    UNROLL for (int c = 0; c < 16; c++)
        rows[c] = (const uint8_t *)w->data + (size_t)(c0 + co + (c < n ? c : 0)) * w->row_bytes;
    for (int64_t k = kb; k < ke; k += 64) {
        const int64_t off = k * N / 8; /* byte of input k in a row */
        const __mmask64 m = chunk_mask(N) & mask64(rb - off);
        __m512i a[16], a2[16], out[16];
        UNROLL for (int c = 0; c < 16; c++) {
            a[c] = a2[c] = _mm512_setzero_si512();
            if (c < n) {
                __m512i tb[4], tb2[4];
                for (int j = 0; j < (N == 8 ? 4 : 1); j++) {
                    tb[j] = _mm512_loadu_si512((const void *)(t->tab[co + c] + 64 * j));
                    if (TWO(N)) tb2[j] = _mm512_loadu_si512((const void *)(t->tab2[co + c] + 64 * j));
                }
                __m512i idx = chunk64(N, rows[c] + off, m, nc);
                a[c] = look(N, idx, tb);
                if (TWO(N)) a2[c] = look(N, idx, tb2);
            }
        }
        transpose16(a, out);
        UNROLL for (int j = 0; j < 16; j++)
            _mm512_storeu_si512((void *)t->wp[(k - kb) / 4 + j][co], out[j]);
        if (TWO(N)) {
            transpose16(a2, out);
            UNROLL for (int j = 0; j < 16; j++)
                _mm512_storeu_si512((void *)t->wp2[(k - kb) / 4 + j][co], out[j]);
        }
    }
}

/* Rows [r0, r0 + PR) x the 32 columns over [kb, ke): acc[r][h] += sum over 128-input groups g
 * of dx[r][g] * (int32 dot of the group; TWO: 256 * that of wp + that of wp2, < 2^31 for 128
 * products a lane). */
INLINE void tile_rows(int N, const ptile *t, const uint8_t *xq, const xgeom *xg, int64_t r0,
                      int64_t kb, int64_t ke, __m512 acc[PR][2]) {
    const uint8_t *xr[PR];
    UNROLL for (int r = 0; r < PR; r++) xr[r] = xq + (size_t)(r0 + r) * xg->stride;
    for (int64_t g0 = kb; g0 < ke; g0 += GROUP) {
        __m512i a[PR][2], a2[PR][2];
        UNROLL for (int r = 0; r < PR; r++) a[r][0] = a[r][1] = a2[r][0] = a2[r][1] = _mm512_setzero_si512();
        UNROLL for (int j = 0; j < GROUP / 4; j++) { /* 4 inputs of 32 columns */
            const int64_t kq = (g0 - kb) / 4 + j;
            __m512i w0 = _mm512_loadu_si512((const void *)t->wp[kq][0]);
            __m512i w1 = _mm512_loadu_si512((const void *)t->wp[kq][16]);
            __m512i u0 = w0, u1 = w1;
            if (TWO(N)) {
                u0 = _mm512_loadu_si512((const void *)t->wp2[kq][0]);
                u1 = _mm512_loadu_si512((const void *)t->wp2[kq][16]);
            }
            UNROLL for (int r = 0; r < PR; r++) {
                int32_t xv;
                memcpy(&xv, xr[r] + g0 + 4 * j, 4);
                __m512i xb = _mm512_set1_epi32(xv);
                a[r][0] = _mm512_dpbusd_epi32(a[r][0], w0, xb);
                a[r][1] = _mm512_dpbusd_epi32(a[r][1], w1, xb);
                if (TWO(N)) {
                    a2[r][0] = _mm512_dpbusd_epi32(a2[r][0], u0, xb);
                    a2[r][1] = _mm512_dpbusd_epi32(a2[r][1], u1, xb);
                }
            }
        }
        if (TWO(N))
            UNROLL for (int r = 0; r < PR; r++) UNROLL for (int h = 0; h < 2; h++)
                a[r][h] = _mm512_add_epi32(_mm512_slli_epi32(a[r][h], 8), a2[r][h]);
        UNROLL for (int r = 0; r < PR; r++) {
            __m512 dx = _mm512_set1_ps(((const float *)(xr[r] + xg->off_d))[g0 / GROUP]);
            acc[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[r][0]), dx, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[r][1]), dx, acc[r][1]);
        }
    }
}

INLINE void prefill_n(int N, float *y, const uint8_t *xq, const xgeom *xg, const slate__wmat *w,
                      const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    ptile t __attribute__((aligned(64)));
    const nat nc = nat_ctl(N);
    const int64_t n_out = w->n_out;
    for (int64_t c0 = o0; c0 < o1; c0 += CT) {
        int n_cols = (int)(o1 - c0 < CT ? o1 - c0 : CT);
        const __mmask16 cm[2] = {mask16(n_cols), mask16(n_cols - 16)};
        tile_tables(N, &t, w, c0, n_cols);
        __m512 sv[2], mv[2], bv[2];
        for (int h = 0; h < 2; h++) {
            sv[h] = _mm512_loadu_ps(t.s + 16 * h);
            mv[h] = _mm512_loadu_ps(t.m + 16 * h);
            bv[h] = bias ? _mm512_maskz_loadu_ps(cm[h], bias + c0 + 16 * h) : _mm512_setzero_ps();
        }
        for (int64_t kb = 0; kb < xg->n_pad; kb += KC) {
            int64_t ke = kb + KC < xg->n_pad ? kb + KC : xg->n_pad;
            for (int half = 0; half < 2; half++) {
                int n = n_cols - 16 * half < 0 ? 0 : n_cols - 16 * half > 16 ? 16 : n_cols - 16 * half;
                if (n == 16) pack16(N, 16, &t, w, c0, 16 * half, kb, ke, &nc);
                else pack16(N, n, &t, w, c0, 16 * half, kb, ke, &nc);
            }
            for (int64_t r0 = 0; r0 < n_rows; r0 += PR) {
                int nr = (int)(n_rows - r0 < PR ? n_rows - r0 : PR);
                __m512 acc[PR][2];
                UNROLL for (int r = 0; r < PR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
                tile_rows(N, &t, xq, xg, r0, kb, ke, acc);
                for (int r = 0; r < nr; r++) {
                    float *yr = y + (r0 + r) * n_out + c0;
                    float x1;
                    memcpy(&x1, xq + (size_t)(r0 + r) * xg->stride + xg->off_x1, 4);
                    for (int h = 0; h < 2; h++) {
                        __m512 out = kb == 0 ? _mm512_fmadd_ps(mv[h], _mm512_set1_ps(x1), bv[h])
                                             : _mm512_maskz_loadu_ps(cm[h], yr + 16 * h);
                        _mm512_mask_storeu_ps(yr + 16 * h, cm[h], _mm512_fmadd_ps(acc[r][h], sv[h], out));
                    }
                }
            }
        }
    }
}

/* ---- entry ------------------------------------------------------------------------------------ */

static void matmul(float *y, const float *x, const void *xq, const slate__wmat *w,
                   const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    xgeom xg = geom(w, n_rows);
    const uint8_t *q = (const uint8_t *)xq;
    /* The bit width as a constant, so each instance has its masks, shifts and loops fixed. */
#define BY_BITS(F)                                                                                 \
    switch (w->bits) {                                                                             \
    case 2: F(2); break;                                                                           \
    case 3: F(3); break;                                                                           \
    case 4: F(4); break;                                                                           \
    case 6: F(6); break;                                                                           \
    default: F(8); break;                                                                          \
    }
#define PREFILL(N) prefill_n(N, y, q, &xg, w, bias, n_rows, o0, o1)
#define DECODE(N) decode_n(N, y, q, &xg, w, bias, n_rows, o0, o1)
    if (xg.prefill) BY_BITS(PREFILL)
    else BY_BITS(DECODE)
#undef DECODE
#undef PREFILL
#undef BY_BITS
}

void slate__avx512_vbmi_fill(slate__kernels *k) {
    k->matmul[SLATE_DTYPE_PAL] = matmul;
    k->xq_plan[SLATE_DTYPE_PAL] = xq_plan;
    k->quantize_x[SLATE_DTYPE_PAL] = quantize_x;
}
