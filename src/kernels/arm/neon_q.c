/*
 * neon_q.c - integer matmul of the compressed weight formats (Q8_0, Q4 with blocks of 16, 32,
 * 64 and 128, symmetric and asymmetric, Q8_C, IQ4_NL) with AArch64 Advanced SIMD: the "neon"
 * table (dispatch.c adds them after neon.c's kernels). Same signatures and meaning as
 * kernels/ref/quant.c up to the rounding of x described here; the design is x86/avx2_q.c's.
 *
 * x is quantized once per matmul (quantize_x; exec reuses it for q/k/v and gate/up, since every
 * format here has the same layout): per row, units of 32 inputs, each with int8 values q =
 * round(x / dx), dx = max|x| / 127 over the unit (a short last unit is padded with zeros), the
 * f32 scale dx and dx * (sum of q) over each half of 16 (asymmetric Q4's offset term). Integer
 * products of 32 weights with 32 x, then one f32 FMA per unit with the scales d_w * dx:
 *   - baseline (plain Advanced SIMD): vmull_s8 + vmlal_high_s8 sum pairs of products in s16
 *     (|w| <= 128 and |q| <= 127, so a pair is at most 32512: no overflow), vpaddlq_s16 /
 *     vpadalq_s16 widen them to 4 x s32;
 *   - arm/neon_dotprod.c (this file again, built with SLATE_NEON_Q_DOTPROD for CPUs with
 *     FEAT_DotProd, table "neon_dotprod"): one SDOT per 16 products.
 * Weights become s8 in input order: Q8_0 and Q8_C are signed already; Q4 nibbles are split
 * with vand / vshr and, symmetric, lose 8 (value d (q - 8)), while the asymmetric d q + m is
 * applied as d * dot + m * dx * sum(q). IQ4_NL has Q4 B = 32's bytes; its nibbles, split the
 * same way, index the 16 int8 levels (-127..113, quant.h) with one vqtbl1q_s8 per 16 weights
 * (the levels stay in one register), so its unit is Q4's plus one TBL per half and needs no
 * offset: the levels are signed, like x, and |level| <= 127 keeps the s16 pairs below in
 * bounds. Q4 with blocks of 16 puts two blocks in a unit: lanes 0-1 of the s32 sums cover the
 * first block and take its scale, lanes 2-3 the second's.
 *
 * Decode (n_rows == 1) streams each weight row once, front to back, into two sets of
 * accumulators (even and odd units, so consecutive units' FMAs do not wait on each other).
 * Prefill reuses each unpacked unit of weights for up to 4 rows of x, one accumulator per row
 * (the rows give the parallelism), and goes over the outputs in blocks of OB whose weight rows
 * stay in cache while every group of rows passes over them; a single row left over after the
 * groups of 4 takes the decode path.
 * Nothing is read past the arrays: rows of the blocked formats are whole blocks, x's short
 * last unit is padded in xq, and a short last unit of a Q8_C row is read through a copy.
 *
 * Why: without it the neon table ran these formats on ref, which dequantizes one weight at a
 * time (a call and a switch each) before an f32 dot product; on x86 the same design replaced an
 * f32 dequantize-and-FMA path and was 2-4x faster (x86/avx2_q.c). Correctness is checked
 * under qemu (tests/kernels/neon_check.c, scripts/check_neon.sh); speed on ARM hardware is not
 * measured yet.
 * What it lacks: PAL, the row lookups (row_to_f32) and attention_i8 stay ref's; no i8mm
 * (SMMLA) prefill tiles; no output tiles wider than one weight row.
 */
#include "kernels/kernels.h"

#include <arm_neon.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

enum { XU = 32 }; /* inputs per unit of x */

/* One row of quantized x: int8 q[units * 32], then f32 dx[units], then f32 hs[units * 2]. */
static int64_t x_units(const slate__wmat *w) { return (w->n_in + XU - 1) / XU; }
static size_t x_stride(const slate__wmat *w) {
    return (size_t)x_units(w) * (XU + 3 * sizeof(float));
}

static slate__xq_plan xq_plan(const slate__wmat *w, int64_t n_rows) {
    slate__xq_plan p;
    p.bytes = (size_t)n_rows * x_stride(w);
    /* 'N' << 24: none of the x86 layouts (1..4 << 24, 'P' << 24). One layout for every format
     * here, so q/k/v and gate/up share x whatever their formats. */
    p.layout = 0x4Eu << 24;
    p.row_align = 1;
    return p;
}

static void quantize_x(void *xq, const float *x, const slate__wmat *w, int64_t n_rows,
                       int64_t r0, int64_t r1) {
    (void)n_rows;
    int64_t n_in = w->n_in, units = x_units(w);
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
            float32x4_t v[8], am = vdupq_n_f32(0.0f);
            UNROLL for (int k = 0; k < 8; k++) {
                v[k] = vld1q_f32(src + 4 * k);
                am = vmaxq_f32(am, vabsq_f32(v[k]));
            }
            float amax = vmaxvq_f32(am), d = amax / 127.0f;
            float id = amax > 0.0f ? 127.0f / amax : 0.0f;
            int32x4_t qi[8];
            UNROLL for (int k = 0; k < 8; k++) /* round to nearest, ties to even; |qi| <= 127 */
                qi[k] = vcvtnq_s32_f32(vmulq_n_f32(v[k], id));
            int16x8_t h[4];
            UNROLL for (int k = 0; k < 4; k++)
                h[k] = vcombine_s16(vqmovn_s32(qi[2 * k]), vqmovn_s32(qi[2 * k + 1]));
            vst1q_s8(q + u * XU, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
            vst1q_s8(q + u * XU + 16, vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
            int32x4_t s0 = vaddq_s32(vaddq_s32(qi[0], qi[1]), vaddq_s32(qi[2], qi[3]));
            int32x4_t s1 = vaddq_s32(vaddq_s32(qi[4], qi[5]), vaddq_s32(qi[6], qi[7]));
            dx[u] = d;
            hs[2 * u] = d * (float)vaddvq_s32(s0); /* sums of 16 int8: exact in f32 */
            hs[2 * u + 1] = d * (float)vaddvq_s32(s1);
        }
    }
}

/* ---- integer dot products of one unit ------------------------------------------------------
 * w0, w1: weights of inputs 0-15 and 16-31 of the unit; x0, x1: the same inputs of x.
 * dot32:   4 x s32 that sum to the dot product of the 32.
 * dot16x2: 4 x s32, lanes 0-1 summing to the dot product of inputs 0-15, lanes 2-3 of 16-31. */
#ifdef SLATE_NEON_Q_DOTPROD
INLINE int32x4_t dot32(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, x0), w1, x1);
}
INLINE int32x4_t dot16x2(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
    const int32x4_t z = vdupq_n_s32(0);
    return vpaddq_s32(vdotq_s32(z, w0, x0), vdotq_s32(z, w1, x1));
}
#else
/* 8 x s16: w[j] x[j] + w[j + 8] x[j + 8] (at most 2 * 128 * 127 = 32512, see above) */
INLINE int16x8_t mul_pairs(int8x16_t w, int8x16_t x) {
    return vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x);
}
INLINE int32x4_t dot32(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
    return vpadalq_s16(vpaddlq_s16(mul_pairs(w0, x0)), mul_pairs(w1, x1));
}
INLINE int32x4_t dot16x2(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
    return vpaddq_s32(vpaddlq_s16(mul_pairs(w0, x0)), vpaddlq_s16(mul_pairs(w1, x1)));
}
#endif

/* ---- units of weights ---------------------------------------------------------------------- */

/* One unit of 32 weights, unpacked. */
typedef struct wunit {
    int8x16_t w0, w1; /* s8 weights of inputs 0-15 and 16-31, in input order */
    float32x4_t d;    /* the weight scale of each lane of dot32 / dot16x2 */
    float32x2_t m;    /* asymmetric Q4: the offsets of inputs 0-15 and 16-31; else 0 */
} wunit;

INLINE float f16_at(const uint8_t *p) {
    __fp16 h;
    memcpy(&h, p, 2);
    return (float)h;
}

INLINE wunit q8_unit(const void *p, float d) {
    wunit u;
    u.w0 = vld1q_s8((const int8_t *)p);
    u.w1 = vld1q_s8((const int8_t *)p + 16);
    u.d = vdupq_n_f32(d);
    u.m = vdup_n_f32(0.0f);
    return u;
}

/* The low or high nibbles of 16 bytes as s8: q (asymmetric) or q - 8 (symmetric Q4). */
INLINE int8x16_t nibbles(uint8x16_t v, bool high, bool asym) {
    int8x16_t q = vreinterpretq_s8_u8(high ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(15)));
    return asym ? q : vsubq_s8(q, vdupq_n_s8(8));
}

/* Unit k of the Q4 block of B = 32, 64 or 128 at blk. */
INLINE wunit q4_unit(int B, bool asym, const uint8_t *blk, int k) {
    const uint8_t *qs = blk + (asym ? 4 : 2);
    wunit u;
    if (B == 32) { /* 16 bytes: inputs 0-15 in the low nibbles, 16-31 in the high */
        uint8x16_t v = vld1q_u8(qs);
        u.w0 = nibbles(v, false, asym);
        u.w1 = nibbles(v, true, asym);
    } else {
        /* B = 64: bytes 0-31 hold inputs 0-31 (low) and 32-63 (high); B = 128: bytes 0-63 hold
         * 0-63 (low) and 64-127 (high), so unit k is the low (k < 2) or high nibbles of 32. */
        bool high = B == 64 ? k == 1 : k >= 2;
        const uint8_t *p = qs + (B == 64 ? 0 : 32 * (k % 2));
        u.w0 = nibbles(vld1q_u8(p), high, asym);
        u.w1 = nibbles(vld1q_u8(p + 16), high, asym);
    }
    u.d = vdupq_n_f32(f16_at(blk));
    u.m = vdup_n_f32(asym ? f16_at(blk + 2) : 0.0f);
    return u;
}

/* Unit u of a Q4 row with blocks of 16: blocks 2u and 2u + 1, or with pair false (the short
 * last unit of an odd block count) block 2u and zeros. */
INLINE wunit q4_16_unit(bool asym, const uint8_t *row, int64_t u, bool pair) {
    size_t bb = slate__q4_block_bytes(16, asym), hdr = asym ? 4 : 2;
    const uint8_t *b0 = row + (size_t)(2 * u) * bb, *b1 = b0 + bb;
    /* A block's 8 bytes hold its inputs 0-7 (low nibbles) and 8-15 (high); the missing block
     * is nibbles that unpack to 0 (8 when symmetric). */
    uint8x8_t a0 = vld1_u8(b0 + hdr), a1 = pair ? vld1_u8(b1 + hdr) : vdup_n_u8(asym ? 0 : 0x88);
    uint8x16_t v = vcombine_u8(a0, a1);
    int64x2_t lo = vreinterpretq_s64_s8(nibbles(v, false, asym));
    int64x2_t hi = vreinterpretq_s64_s8(nibbles(v, true, asym));
    wunit w;
    w.w0 = vreinterpretq_s8_s64(vzip1q_s64(lo, hi)); /* block 0: low then high nibbles */
    w.w1 = vreinterpretq_s8_s64(vzip2q_s64(lo, hi)); /* block 1 */
    float d1 = pair ? f16_at(b1) : 0.0f;
    w.d = vcombine_f32(vdup_n_f32(f16_at(b0)), vdup_n_f32(d1));
    float m[2] = {asym ? f16_at(b0 + 2) : 0.0f, asym && pair ? f16_at(b1 + 2) : 0.0f};
    w.m = vld1_f32(m);
    return w;
}

/* IQ4_NL block blk: Q4 B = 32's bytes and nibble order, each nibble an index into the 16 int8
 * levels (quant.h), looked up 16 at a time by vqtbl1q_s8 in one table register. */
INLINE wunit iq4nl_unit(const uint8_t *blk) {
    const int8x16_t levels = vld1q_s8(slate__iq4_levels);
    uint8x16_t v = vld1q_u8(blk + 2);
    wunit u;
    u.w0 = vqtbl1q_s8(levels, vandq_u8(v, vdupq_n_u8(15))); /* inputs 0-15 */
    u.w1 = vqtbl1q_s8(levels, vshrq_n_u8(v, 4));            /* inputs 16-31 */
    u.d = vdupq_n_f32(f16_at(blk));
    u.m = vdup_n_f32(0.0f);
    return u;
}

/* The formats, as compile-time constants of the inlined kernels below. */
enum { F_Q8_0, F_Q8_C, F_Q4_16, F_Q4_32, F_Q4_64, F_Q4_128, F_IQ4_NL };

/* Unit u < n_in / 32 (a whole one) of a format with one unit per step: all but Q4 with blocks
 * of 64 and 128. */
INLINE wunit flat_unit(int F, bool asym, const uint8_t *row, int64_t u) {
    if (F == F_Q8_0) {
        const uint8_t *blk = row + (size_t)u * sizeof(slate__block_q8_0);
        return q8_unit(blk + 2, f16_at(blk));
    }
    if (F == F_Q8_C) return q8_unit(row + (size_t)u * XU, 1.0f); /* the row scale comes last */
    if (F == F_Q4_16) return q4_16_unit(asym, row, u, true);
    if (F == F_IQ4_NL) return iq4nl_unit(row + (size_t)u * sizeof(slate__block_iq4_nl));
    return q4_unit(32, asym, row + (size_t)u * slate__q4_block_bytes(32, asym), 0);
}

/* ---- matmul ------------------------------------------------------------------------------ */

/* Where row r of quantized x lives. */
typedef struct xrow {
    const int8_t *q;
    const float *dx, *hs;
} xrow;

/* One unit of weights (unit u of the row) against R rows of x:
 * acc[r] += dot(w, x[r]) * d_w * dx[r][u], and for asymmetric Q4 corr[r] += m * hs[r][u]. */
INLINE void unit_rows(int R, bool split, bool asym, const wunit *wu, const xrow *xr, int64_t u,
                      float32x4_t *acc, float32x2_t *corr) {
    UNROLL for (int r = 0; r < R; r++) {
        const int8_t *q = xr[r].q + u * XU;
        int8x16_t x0 = vld1q_s8(q), x1 = vld1q_s8(q + 16);
        int32x4_t p = split ? dot16x2(wu->w0, wu->w1, x0, x1) : dot32(wu->w0, wu->w1, x0, x1);
        acc[r] = vfmaq_f32(acc[r], vcvtq_f32_s32(p), vmulq_n_f32(wu->d, xr[r].dx[u]));
        if (asym) corr[r] = vfma_f32(corr[r], wu->m, vld1_f32(xr[r].hs + 2 * u));
    }
}

/* y[r][o] = W[o] . x[r] (+ bias[o]) for rows r0 .. r0+R-1 of x, one pass over weight row o. */
INLINE void rows_q(int F, bool asym, int R, float *y, const uint8_t *xq, size_t xs,
                   const slate__wmat *w, const float *bias, int64_t r0, int64_t o) {
    int64_t units = x_units(w), n_in = w->n_in;
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    bool split = F == F_Q4_16;
    /* One row (decode): the odd units go into a second set of accumulators so that consecutive
     * units' FMAs do not wait on each other. With 2 to 4 rows the rows do that, and with a second
     * set GCC 12 spilled accumulators to the stack in the 4-row loops; with one it spills none
     * there (Q4 with blocks of 128: a few per block, for the bytes units 0-1 share with 2-3). */
    const int odd = R == 1;
    xrow xr[4];
    float32x4_t acc[2][4]; /* [even / odd unit (decode)][row] */
    float32x2_t corr[2][4];
    UNROLL for (int r = 0; r < R; r++) {
        xr[r].q = (const int8_t *)(xq + (size_t)(r0 + r) * xs);
        xr[r].dx = (const float *)(xr[r].q + units * XU);
        xr[r].hs = xr[r].dx + units;
        acc[0][r] = acc[1][r] = vdupq_n_f32(0.0f);
        corr[0][r] = corr[1][r] = vdup_n_f32(0.0f);
    }
    if (F == F_Q4_64 || F == F_Q4_128) {
        const int B = F == F_Q4_64 ? 64 : 128, upb = B / XU;
        size_t bb = slate__q4_block_bytes(B, asym);
        for (int64_t b = 0; b < n_in / B; b++) {
            const uint8_t *blk = row + (size_t)b * bb;
            UNROLL for (int k = 0; k < upb; k++) {
                wunit wu = q4_unit(B, asym, blk, k);
                int a = k % 2 * odd;
                unit_rows(R, false, asym, &wu, xr, b * upb + k, acc[a], corr[a]);
            }
        }
    } else {
        int64_t n_whole = n_in / XU, u = 0;
        if (odd) /* decode: pairs of units, the second into the odd accumulators */
            for (; u + 2 <= n_whole; u += 2) {
                wunit a = flat_unit(F, asym, row, u), b = flat_unit(F, asym, row, u + 1);
                unit_rows(R, split, asym, &a, xr, u, acc[0], corr[0]);
                unit_rows(R, split, asym, &b, xr, u + 1, acc[1], corr[1]);
            }
        for (; u < n_whole; u++) {
            wunit a = flat_unit(F, asym, row, u);
            unit_rows(R, split, asym, &a, xr, u, acc[0], corr[0]);
        }
        if ((F == F_Q4_16 || F == F_Q8_C) && u < units) { /* the short last unit */
            wunit a;
            if (F == F_Q4_16) {
                a = q4_16_unit(asym, row, u, false);
            } else { /* the row's last n_in % 32 int8, through a zero-padded copy */
                int8_t buf[XU] = {0};
                memcpy(buf, row + u * XU, (size_t)(n_in - u * XU));
                a = q8_unit(buf, 1.0f);
            }
            unit_rows(R, split, asym, &a, xr, u, acc[odd], corr[odd]);
        }
    }
    float sc = F == F_Q8_C ? w->scales[o] : 1.0f;
    UNROLL for (int r = 0; r < R; r++) {
        float v = vaddvq_f32(odd ? vaddq_f32(acc[0][r], acc[1][r]) : acc[0][r]) * sc;
        if (asym) v += vaddv_f32(odd ? vadd_f32(corr[0][r], corr[1][r]) : corr[0][r]);
        y[(r0 + r) * w->n_out + o] = v + (bias ? bias[o] : 0.0f);
    }
}

/* Outputs per block: 16 weight rows of 4096 inputs are 37 KiB of Q4 (B = 32) or 68 KiB of Q8_0,
 * which stay in L2 while each group of 4 rows of x (18 KiB of xq) passes over them from L1. */
enum { OB = 16 };

#define ROWS_OVER_BLOCK(R)                                                                         \
    for (int64_t o = ob; o < oe; o++) rows_q(F, asym, R, y, xq, xs, w, bias, r, o)

INLINE void matmul_fmt(int F, bool asym, float *y, const void *xq, const slate__wmat *w,
                       const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    size_t xs = x_stride(w);
    for (int64_t ob = o0; ob < o1; ob += OB) {
        int64_t oe = ob + OB < o1 ? ob + OB : o1;
        for (int64_t r = 0; r < n_rows; r += 4) {
            switch (n_rows - r) {
            case 1: ROWS_OVER_BLOCK(1); break;
            case 2: ROWS_OVER_BLOCK(2); break;
            case 3: ROWS_OVER_BLOCK(3); break;
            default: ROWS_OVER_BLOCK(4); break;
            }
        }
    }
}

#undef ROWS_OVER_BLOCK

static void matmul_q8_0(float *y, const float *x, const void *xq, const slate__wmat *w,
                        const float *b, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    matmul_fmt(F_Q8_0, false, y, xq, w, b, n_rows, o0, o1);
}

static void matmul_q8_c(float *y, const float *x, const void *xq, const slate__wmat *w,
                        const float *b, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    matmul_fmt(F_Q8_C, false, y, xq, w, b, n_rows, o0, o1);
}

static void matmul_q4(float *y, const float *x, const void *xq, const slate__wmat *w,
                      const float *b, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    switch (w->block * 2 + w->asym) {
    case 32: matmul_fmt(F_Q4_16, false, y, xq, w, b, n_rows, o0, o1); break;
    case 33: matmul_fmt(F_Q4_16, true, y, xq, w, b, n_rows, o0, o1); break;
    case 64: matmul_fmt(F_Q4_32, false, y, xq, w, b, n_rows, o0, o1); break;
    case 65: matmul_fmt(F_Q4_32, true, y, xq, w, b, n_rows, o0, o1); break;
    case 128: matmul_fmt(F_Q4_64, false, y, xq, w, b, n_rows, o0, o1); break;
    case 129: matmul_fmt(F_Q4_64, true, y, xq, w, b, n_rows, o0, o1); break;
    case 256: matmul_fmt(F_Q4_128, false, y, xq, w, b, n_rows, o0, o1); break;
    default: matmul_fmt(F_Q4_128, true, y, xq, w, b, n_rows, o0, o1); break;
    }
}

static void matmul_iq4_nl(float *y, const float *x, const void *xq, const slate__wmat *w,
                          const float *b, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    matmul_fmt(F_IQ4_NL, false, y, xq, w, b, n_rows, o0, o1);
}

#ifdef SLATE_NEON_Q_DOTPROD
void slate__neon_dotprod_fill(slate__kernels *k) {
#else
void slate__neon_q_fill(slate__kernels *k) {
#endif
    static const slate_dtype q[] = {SLATE_DTYPE_Q8_0, SLATE_DTYPE_Q4, SLATE_DTYPE_Q8_C,
                                    SLATE_DTYPE_IQ4_NL};
    k->matmul[SLATE_DTYPE_Q8_0] = matmul_q8_0;
    k->matmul[SLATE_DTYPE_Q4] = matmul_q4;
    k->matmul[SLATE_DTYPE_Q8_C] = matmul_q8_c;
    k->matmul[SLATE_DTYPE_IQ4_NL] = matmul_iq4_nl;
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        k->xq_plan[q[i]] = xq_plan;
        k->quantize_x[q[i]] = quantize_x;
    }
}
