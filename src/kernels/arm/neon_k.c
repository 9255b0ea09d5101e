/*
 * neon_k.c - integer matmul of the GGUF super-block formats (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K,
 * IQ4_XS: quant.h) with AArch64 Advanced SIMD: the "neon" table (dispatch.c adds them after
 * neon_q.c's kernels). Same signatures and meaning as kernels/ref/quant.c up to the rounding of
 * x; the design is arm/neon_q.c's, whose header explains it.
 *
 * x is neon_q.c's: this file installs the table's Q4 quantizer (xq_plan + quantize_x, layout
 * 'N' << 24) for all six formats too, so exec quantizes x once for q/k/v and gate/up whatever
 * their formats (Q4_K_M files mix Q4_K and Q6_K in attn_v and ffn_down, Q5_K_M files Q5_K and
 * Q6_K, Q3_K_M files Q3_K with Q4_K / Q5_K / Q6_K, Q2_K files Q2_K with Q3_K / Q4_K, IQ4_XS
 * files IQ4_XS with Q5_K / Q6_K / Q8_0). Per row of x: int8 q[units * 32], f32 dx[units], f32
 * hs[units * 2] (dx * sum of q over each half of 16), units of 32 inputs, dx = max|x| / 127
 * over the unit. A unit of x is one Q4_K / Q5_K / IQ4_XS sub-block (one 6-bit scale, and
 * minimum) or two scale groups of 16 (Q6_K, Q3_K, Q2_K: the same element order), so the
 * integer products never cross a scale of x or of w:
 *   Q4_K  codes 0..15 as s8; unit u of the super-block gives isum_u = sum q_w q_x, and
 *         y += (d sc_u) dx_u isum_u - (dmin m_u) (dx_u sum q_x), the second from hs: the same
 *         rounded x in both terms, so y is exactly w . x^ up to f32 sums (kcheck.c's bound);
 *   Q5_K  Q4_K's kernel on codes 0..31 (the nibble with qh's bit inserted above it by vsli /
 *         vsri), the same scales and terms;
 *   Q6_K  codes - 32 (-32..31) as s8; each group of 16 gives isum_g and
 *         y += (d sc_g) dx_u isum_g;
 *   Q3_K  Q6_K's kernel on the codes -4..3 (2 bits of qs, minus 4 where hmask's bit is clear)
 *         and the 6-bit scales minus 32 (-32..31) as d sc_g;
 *   Q2_K  Q6_K's kernel on the codes 0..3 with scales d sc_g, and Q4_K's minimum term per group:
 *         y -= (dmin m_g) (dx_u sum q_x over group g), the last factor hs's half of unit u;
 *   IQ4_XS Q4_K's kernel without the minimum term on the int8 levels (-127..113) that one
 *         vqtbl1q_s8 per 16 nibbles looks up (IQ4_NL's, arm/neon_q.c), with the signed 6-bit
 *         scales: y += (d (ls_u - 32)) dx_u isum_u.
 * Every code is a signed s8 (vmull_s8 and SDOT take both operands signed), so none needs
 * x86's unsigned side and the sum of x that undoes its offset.
 * The f32 work is per 4 units (128 inputs), not per unit as in neon_q.c: the integer sums of 4
 * units (Q4_K, Q5_K, IQ4_XS) or 8 groups (Q6_K, Q3_K, Q2_K) are reduced with pairwise adds into
 * one or two vectors whose lanes are the units (groups), then one conversion and one FMA each
 * against the lane-wise scales (d sc, from the super-block, times dx of the 4 units, which lie
 * side by side in xq; Q2_K adds one FMA per vector for its minimums).
 *   - baseline (plain Advanced SIMD): vmull_s8 / vmlal_s8 products summed in s16 as far as
 *     they cannot overflow (Q4_K: |q_w q_x| <= 15 * 127, 16 per lane, 30480; Q5_K: 31 * 127,
 *     8 per lane, 31496 (16 would reach 62992); Q6_K: 32 * 127, 8 per lane, 32512; Q3_K:
 *     4 * 127, 8 per lane, 4064; Q2_K: 3 * 127, 8 per lane, 3048: even 64 per lane would fit;
 *     IQ4_XS: 127 * 127, 2 per lane, 32258: the pairs of vmull / vmlal_high alone), then
 *     vpaddlq_s16 to s32 (Q5_K: and vpaddq_s32 for the last pair; IQ4_XS: vpaddl / vpadal per
 *     unit and vpaddq_s32 from there);
 *   - arm/neon_dotprod_k.c (this file again, built with SLATE_NEON_Q_DOTPROD, table
 *     "neon_dotprod"): one SDOT per 16 products, vpaddq_s32 to reduce.
 * The Q4_K / Q5_K scales and minimums are unpacked once per super-block and weight row (ggml's
 * masks, in vector registers), to f32 d sc and dmin m vectors; Q6_K's 16 int8 scales the same,
 * Q3_K's 16 6-bit ones (ggml's masks again, two loads of 8 and 4 bytes: the blocks are 110
 * bytes, so only 2-byte aligned, and a 16-byte load would leave the last one), Q2_K's 16
 * nibble pairs and IQ4_XS's 8 6-bit scales (one 8-byte load of d, scales_h and scales_l).
 *
 * Tiling as neon_q.c: decode (n_rows == 1) streams each weight row once into two sets of
 * accumulators (the two halves of a super-block); prefill unpacks each half super-block of a
 * weight row (8 registers of codes, its scales) once for up to 4 rows of x and goes over the
 * outputs in blocks of OB = 16 weight rows (16 rows of 4096 inputs are 21 KiB of Q2_K, 27.5
 * KiB of Q3_K, 34 KiB of IQ4_XS, 36 KiB of Q4_K, 44 KiB of Q5_K, 53 KiB of Q6_K: L2) while
 * every group of 4 rows passes over them; a single row left over takes the decode path. Nothing is read past
 * the arrays: rows are whole super-blocks, so x has no short unit.
 *
 * Why: without it the neon table ran these formats on ref, which dequantizes one weight
 * at a time. Correctness is checked under qemu (tests/kernels/neon_check.c,
 * scripts/check_neon.sh); speed on ARM hardware is not measured (qemu says nothing about it).
 * What it lacks: row_to_f32 stays ref's (x86: avx2_k.c has one); no i8mm (SMMLA) prefill tiles.
 */
#include "kernels/kernels.h"

#include <arm_neon.h>
#include <string.h>

/* GCC's scheduling before register allocation (on at -O2 for AArch64) hoists the loads of x and
 * the products of the 2 to 4 rows of a prefill step above one another and spilled 30-80
 * vectors per half super-block (GCC 12); without it the same code keeps them all in registers
 * (neon_q.c's kernels hold fewer values and do not need this). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

enum {
    XU = 32,                      /* inputs per unit of x (neon_q.c's) */
    UPS = SLATE__SUPERBLOCK / XU, /* units per super-block: 8 */
};

/* neon_q.c's layout of one row of x: n_in is a multiple of 256, so units = n_in / 32. */
static int64_t x_units(const slate__wmat *w) { return w->n_in / XU; }
static size_t x_stride(const slate__wmat *w) {
    return (size_t)x_units(w) * (XU + 3 * sizeof(float));
}

INLINE float f16_at(const uint8_t *p) {
    __fp16 h;
    memcpy(&h, p, 2);
    return (float)h;
}

/* ---- integer dot products of 4 units ------------------------------------------------------
 * w[2 k], w[2 k + 1]: the s8 weights of inputs 0-15 and 16-31 of unit k (0..3); x the same.
 * dot_units4: lane k = the dot product of unit k, for codes of the given width: C4 0..15 (Q4_K),
 * C5 0..31 (Q5_K), C8 |code| <= 127 (IQ4_XS's levels; see the bounds above).
 * dot_groups4: lo = {unit 0 inputs 0-15, unit 0 16-31, unit 1 0-15, unit 1 16-31}, hi the same
 * for units 2 and 3 (codes -32..31: Q6_K, Q3_K, Q2_K). */
enum { C4, C5, C8 };
#ifdef SLATE_NEON_Q_DOTPROD
INLINE int32x4_t dot_units4(int width, const int8x16_t *w, const int8x16_t *x) {
    (void)width; /* s32 sums: any s8 codes */
    const int32x4_t z = vdupq_n_s32(0);
    int32x4_t p[4];
    UNROLL for (int k = 0; k < 4; k++)
        p[k] = vdotq_s32(vdotq_s32(z, w[2 * k], x[2 * k]), w[2 * k + 1], x[2 * k + 1]);
    return vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
}
INLINE void dot_groups4(const int8x16_t *w, const int8x16_t *x, int32x4_t *lo, int32x4_t *hi) {
    const int32x4_t z = vdupq_n_s32(0);
    int32x4_t p[8];
    UNROLL for (int k = 0; k < 8; k++) p[k] = vdotq_s32(z, w[k], x[k]);
    *lo = vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
    *hi = vpaddq_s32(vpaddq_s32(p[4], p[5]), vpaddq_s32(p[6], p[7]));
}
#else
/* 8 x s16: w[j] x[j] + w[j + 8] x[j + 8] */
INLINE int16x8_t mul_pairs(int8x16_t w, int8x16_t x) {
    return vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x);
}
INLINE int32x4_t dot_units4(int width, const int8x16_t *w, const int8x16_t *x) {
    if (width == C8) { /* 2 products per s16 lane (at most 2 * 127 * 127 = 32258), then s32 */
        int32x4_t p[4];
        UNROLL for (int k = 0; k < 4; k++)
            p[k] = vpadalq_s16(vpaddlq_s16(mul_pairs(w[2 * k], x[2 * k])),
                               mul_pairs(w[2 * k + 1], x[2 * k + 1]));
        return vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
    }
    int16x8_t s[4]; /* 4 products per lane: at most 4 * 31 * 127 = 15748 */
    UNROLL for (int k = 0; k < 4; k++)
        s[k] = vmlal_high_s8(vmlal_s8(mul_pairs(w[2 * k], x[2 * k]), vget_low_s8(w[2 * k + 1]),
                                      vget_low_s8(x[2 * k + 1])),
                             w[2 * k + 1], x[2 * k + 1]);
    /* 8 products per lane (at most 8 * 31 * 127 = 31496): {u0 x 4, u1 x 4}, {u2 x 4, u3 x 4} */
    int16x8_t t0 = vpaddq_s16(s[0], s[1]), t1 = vpaddq_s16(s[2], s[3]);
    if (width == C5) /* 16 products of codes up to 31 would reach 62992: widen first */
        return vpaddq_s32(vpaddlq_s16(t0), vpaddlq_s16(t1));
    /* 16 products per lane (codes up to 15: at most 30480): {u0, u0, u1, u1, u2, u2, u3, u3} */
    return vpaddlq_s16(vpaddq_s16(t0, t1));
}
INLINE void dot_groups4(const int8x16_t *w, const int8x16_t *x, int32x4_t *lo, int32x4_t *hi) {
    int16x8_t p[8]; /* 2 products per lane: at most 2 * 32 * 127 = 8128 (Q3_K 1016, Q2_K 762) */
    UNROLL for (int k = 0; k < 8; k++) p[k] = mul_pairs(w[k], x[k]);
    /* 8 products per lane (at most 32512): {g0, g0, g1, g1, g2, g2, g3, g3} */
    *lo = vpaddlq_s16(vpaddq_s16(vpaddq_s16(p[0], p[1]), vpaddq_s16(p[2], p[3])));
    *hi = vpaddlq_s16(vpaddq_s16(vpaddq_s16(p[4], p[5]), vpaddq_s16(p[6], p[7])));
}
#endif

/* ---- super-blocks -------------------------------------------------------------------------- */

/* Q4_K and Q5_K: fs[h] = d * sc_j and fm[h] = dmin * m_j for j = 4 h .. 4 h + 3 (quant.h's
 * rule with ggml's masks, on the 12 bytes as u32 s0, s1, s2, two at a time: {sc_0..3, m_0..3} =
 * {s0, s1} & 0x3f.., {sc_4..7, m_4..7} = ({s2, s2 >> 4} & 0x0f..) | ({s0, s1} >> 6 & 0x03..) <<
 * 4). The 16-byte load reads 4 bytes of qs (Q5_K: qh) past the scales: inside the super-block. */
INLINE void q4k_scales(const uint8_t *blk, float32x4_t *fs, float32x4_t *fm) {
    uint32x4_t s = vreinterpretq_u32_u8(vld1q_u8(blk + 4));
    uint32x2_t a = vget_low_u32(s), s2 = vdup_laneq_u32(s, 2);
    const int32_t sh[2] = {0, -4};
    uint32x2_t lo = vand_u32(a, vdup_n_u32(0x3f3f3f3fu));
    uint32x2_t hi = vorr_u32(vand_u32(vshl_u32(s2, vld1_s32(sh)), vdup_n_u32(0x0f0f0f0fu)),
                             vshl_n_u32(vand_u32(vshr_n_u32(a, 6), vdup_n_u32(0x03030303u)), 4));
    /* sc_0..7, m_0..7 */
    uint8x16_t b = vreinterpretq_u8_u32(vcombine_u32(vzip1_u32(lo, hi), vzip2_u32(lo, hi)));
    uint16x8_t sc = vmovl_u8(vget_low_u8(b)), m = vmovl_high_u8(b);
    float d = f16_at(blk), dmin = f16_at(blk + 2);
    fs[0] = vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(sc))), d);
    fs[1] = vmulq_n_f32(vcvtq_f32_u32(vmovl_high_u16(sc)), d);
    fm[0] = vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(m))), dmin);
    fm[1] = vmulq_n_f32(vcvtq_f32_u32(vmovl_high_u16(m)), dmin);
}

/* Q4_K: the codes of units 4 h .. 4 h + 3 (sub-blocks 2p, 2p + 1 are the low and high nibbles
 * of qs[32 p ..]). */
INLINE void q4k_codes(const uint8_t *blk, int h, int8x16_t *w) {
    const uint8_t *qs = blk + 16 + 64 * h;
    const uint8x16_t m4 = vdupq_n_u8(15);
    UNROLL for (int p = 0; p < 2; p++)
        UNROLL for (int k = 0; k < 2; k++) {
            uint8x16_t v = vld1q_u8(qs + 32 * p + 16 * k);
            w[4 * p + k] = vreinterpretq_s8_u8(vandq_u8(v, m4));
            w[4 * p + 2 + k] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        }
}

/* Q5_K: the codes of units 4 h .. 4 h + 3: Q4_K's nibbles (qs at byte 48) with bit j of qh[l]
 * inserted as bit 4 of unit j's code l. vsli keeps the low nibble and inserts the bit above it;
 * vsri keeps the bit (alone at bit 4) and inserts the high nibble below it. */
INLINE void q5k_codes(const uint8_t *blk, int h, int8x16_t *w) {
    const uint8_t *qs = blk + 48 + 64 * h, *qh = blk + 16;
    const uint8x16_t m1 = vdupq_n_u8(1), m10 = vdupq_n_u8(0x10);
    UNROLL for (int k = 0; k < 2; k++) {
        uint8x16_t b = vld1q_u8(qh + 16 * k);
        b = h ? vshrq_n_u8(b, 4) : b; /* bits 4 h .. 4 h + 3: units 4 h .. 4 h + 3 */
        UNROLL for (int p = 0; p < 2; p++) {
            uint8x16_t v = vld1q_u8(qs + 32 * p + 16 * k), bp = p ? vshrq_n_u8(b, 2) : b;
            w[4 * p + k] = vreinterpretq_s8_u8(vsliq_n_u8(v, vandq_u8(bp, m1), 4));
            w[4 * p + 2 + k] =
                vreinterpretq_s8_u8(vsriq_n_u8(vandq_u8(vshlq_n_u8(bp, 3), m10), v, 4));
        }
    }
}

/* IQ4_XS: fs[h] = d * (ls_j - 32) for j = 4 h .. 4 h + 3 (quant.h's rule: the low 4 bits of ls_j
 * are nibble j % 2 of scales_l[j / 2], bits 4-5 are bits 2 j, 2 j + 1 of scales_h), from one
 * 8-byte load of {d, scales_h, scales_l}: scales_l's bytes doubled by vzip and shifted right by
 * 0 or 4, scales_h's word in 8 lanes shifted right by 2 j. d * (ls_j - 32) is the f32 product
 * ref multiplies the level by. */
INLINE void iq4xs_scales(const uint8_t *blk, float32x4_t *fs) {
    static const int8_t lsh[8] = {0, -4, 0, -4, 0, -4, 0, -4};
    static const int16_t hsh[8] = {0, -2, -4, -6, -8, -10, -12, -14};
    uint8x8_t hdr = vld1_u8(blk);
    uint8x8_t l = vext_u8(hdr, hdr, 4); /* scales_l[0..3], ... */
    l = vand_u8(vshl_u8(vzip1_u8(l, l), vld1_s8(lsh)), vdup_n_u8(15));
    uint16x8_t h = vdupq_lane_u16(vreinterpret_u16_u8(hdr), 1); /* scales_h */
    h = vandq_u16(vshlq_u16(h, vld1q_s16(hsh)), vdupq_n_u16(3));
    int16x8_t ls = vreinterpretq_s16_u16(vorrq_u16(vmovl_u8(l), vshlq_n_u16(h, 4))); /* 0..63 */
    ls = vsubq_s16(ls, vdupq_n_s16(32));
    float d = f16_at(blk);
    fs[0] = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(ls))), d);
    fs[1] = vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(ls)), d);
}

/* IQ4_XS: the levels of units 4 h .. 4 h + 3: unit j's 16 bytes qs[16 j ..] (at byte 8) hold its
 * inputs 0-15 in the low nibbles and 16-31 in the high ones (IQ4_NL's order), each an index into
 * the 16 int8 levels (quant.h) that one vqtbl1q_s8 looks up 16 at a time. */
INLINE void iq4xs_codes(const uint8_t *blk, int h, int8x16_t *w) {
    const int8x16_t levels = vld1q_s8(slate__iq4_levels);
    const uint8_t *qs = blk + 8 + 64 * h;
    UNROLL for (int k = 0; k < 4; k++) {
        uint8x16_t v = vld1q_u8(qs + 16 * k);
        w[2 * k] = vqtbl1q_s8(levels, vandq_u8(v, vdupq_n_u8(15)));
        w[2 * k + 1] = vqtbl1q_s8(levels, vshrq_n_u8(v, 4));
    }
}

/* fs[k] = d * sc[4 k .. 4 k + 3], k = 0..3: 16 s8 scales of groups of 16 in input order. */
INLINE void group_scales(int8x16_t sc, float d, float32x4_t *fs) {
    int16x8_t s0 = vmovl_s8(vget_low_s8(sc)), s1 = vmovl_high_s8(sc);
    fs[0] = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(s0))), d);
    fs[1] = vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(s0)), d);
    fs[2] = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(s1))), d);
    fs[3] = vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(s1)), d);
}

/* Q6_K: fs[k] = d * scales[4 k .. 4 k + 3], k = 0..3 (groups of 16 in input order). */
INLINE void q6k_scales(const uint8_t *blk, float32x4_t *fs) {
    group_scales(vld1q_s8((const int8_t *)blk + 192), f16_at(blk + 208), fs);
}

/* Q6_K: the codes - 32 of units 4 n .. 4 n + 3 (half n): unit 4 n + g takes the low (g < 2) or
 * high nibbles of ql[64 n + 32 (g % 2) ..] and bits 2 g, 2 g + 1 of qh[32 n ..] as bits 4-5. */
INLINE void q6k_codes(const uint8_t *blk, int n, int8x16_t *w) {
    const uint8_t *ql = blk + 64 * n, *qh = blk + 128 + 32 * n;
    const uint8x16_t m3 = vdupq_n_u8(3), m30 = vdupq_n_u8(0x30);
    const int8x16_t off = vdupq_n_s8(32);
    UNROLL for (int k = 0; k < 2; k++) {
        uint8x16_t l0 = vld1q_u8(ql + 16 * k), l1 = vld1q_u8(ql + 32 + 16 * k);
        uint8x16_t h = vld1q_u8(qh + 16 * k), h2 = vshrq_n_u8(h, 2);
        /* vsli keeps the low nibble and inserts bits 4-5; vsri keeps bits 4-5 and inserts the
         * high nibble below them */
        uint8x16_t c[4] = {
            vsliq_n_u8(l0, vandq_u8(h, m3), 4),
            vsliq_n_u8(l1, vandq_u8(h2, m3), 4),
            vsriq_n_u8(vandq_u8(h, m30), l0, 4),
            vsriq_n_u8(vandq_u8(h2, m30), l1, 4),
        };
        UNROLL for (int g = 0; g < 4; g++)
            w[2 * g + k] = vsubq_s8(vreinterpretq_s8_u8(c[g]), off);
    }
}

/* Q3_K: fs[k] = d * (sc_s - 32) for s = 4 k .. 4 k + 3 (quant.h's rule with ggml's masks, on
 * the 12 bytes as u32 a0, a1, t: {sc_0..3, sc_4..7, sc_8..11, sc_12..15} = ({a0, a1, a0 >> 4,
 * a1 >> 4} & 0x0f..) | ((t >> {0, 2, 4, 6}) & 0x03..) << 4). Two loads of 8 and 4 bytes: a
 * 16-byte load would read past the super-block (d ends it), and past the weights in the last. */
INLINE void q3k_scales(const uint8_t *blk, float32x4_t *fs) {
    uint32_t t;
    memcpy(&t, blk + 104, 4);
    uint32x2_t a = vreinterpret_u32_u8(vld1_u8(blk + 96));
    const int32_t sl[4] = {0, 0, -4, -4}, sh[4] = {0, -2, -4, -6};
    uint32x4_t lo = vandq_u32(vshlq_u32(vcombine_u32(a, a), vld1q_s32(sl)),
                              vdupq_n_u32(0x0f0f0f0fu));
    uint32x4_t hi = vandq_u32(vshlq_u32(vdupq_n_u32(t), vld1q_s32(sh)), vdupq_n_u32(0x03030303u));
    uint8x16_t sc = vreinterpretq_u8_u32(vorrq_u32(lo, vshlq_n_u32(hi, 4))); /* 0..63 */
    group_scales(vreinterpretq_s8_u8(vsubq_u8(sc, vdupq_n_u8(32))), f16_at(blk + 108), fs);
}

/* Bits 2 g, 2 g + 1 of each byte of q, g = 0..3 (the 2-bit codes of Q3_K and Q2_K). */
INLINE void crumbs(uint8x16_t q, uint8x16_t *c) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    c[0] = vandq_u8(q, m3);
    c[1] = vandq_u8(vshrq_n_u8(q, 2), m3);
    c[2] = vandq_u8(vshrq_n_u8(q, 4), m3);
    c[3] = vshrq_n_u8(q, 6);
}

/* Q3_K: the codes (-4..3) of units 4 n .. 4 n + 3 (half n): unit 4 n + g takes bits 2 g, 2 g +
 * 1 of qs[32 n ..] (at byte 32) and loses 4 where bit 4 n + g of hmask is clear (vtst gives
 * 0xFF where it is set, vbic keeps 4 elsewhere; u8 wraps to the s8 codes). */
INLINE void q3k_codes(const uint8_t *blk, int n, int8x16_t *w) {
    const uint8_t *qs = blk + 32 + 32 * n;
    const uint8x16_t four = vdupq_n_u8(4);
    UNROLL for (int k = 0; k < 2; k++) {
        uint8x16_t c[4], h = vld1q_u8(blk + 16 * k);
        crumbs(vld1q_u8(qs + 16 * k), c);
        UNROLL for (int g = 0; g < 4; g++) {
            uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * n + g)));
            w[2 * g + k] = vreinterpretq_s8_u8(vsubq_u8(c[g], vbicq_u8(four, vtstq_u8(h, bit))));
        }
    }
}

/* Q2_K: fs[k] = d * sc_s and fm[k] = dmin * m_s for s = 4 k .. 4 k + 3 (scales[s]: sc in the
 * low nibble, m in the high one). */
INLINE void q2k_scales(const uint8_t *blk, float32x4_t *fs, float32x4_t *fm) {
    uint8x16_t b = vld1q_u8(blk);
    group_scales(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(15))), f16_at(blk + 80), fs);
    group_scales(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), f16_at(blk + 82), fm);
}

/* Q2_K: the codes (0..3) of units 4 n .. 4 n + 3: bits 2 g, 2 g + 1 of qs[32 n ..] (at byte 16),
 * as Q3_K's low bits. */
INLINE void q2k_codes(const uint8_t *blk, int n, int8x16_t *w) {
    const uint8_t *qs = blk + 16 + 32 * n;
    UNROLL for (int k = 0; k < 2; k++) {
        uint8x16_t c[4];
        crumbs(vld1q_u8(qs + 16 * k), c);
        UNROLL for (int g = 0; g < 4; g++) w[2 * g + k] = vreinterpretq_s8_u8(c[g]);
    }
}

/* ---- matmul ------------------------------------------------------------------------------ */

enum { F_Q4_K, F_Q5_K, F_Q6_K, F_Q3_K, F_Q2_K, F_IQ4_XS };

/* Where row r of quantized x lives. */
typedef struct xrow {
    const int8_t *q;
    const float *dx, *hs;
} xrow;

INLINE void load_x4(const xrow *xr, int64_t u, int8x16_t *x) {
    UNROLL for (int k = 0; k < 8; k++) x[k] = vld1q_s8(xr->q + u * XU + 16 * k);
}

/* y[r][o] = W[o] . x[r] (+ bias[o]) for rows r0 .. r0+R-1 of x, one pass over weight row o. */
INLINE void rows_k(int F, int R, float *y, const uint8_t *xq, size_t xs, const slate__wmat *w,
                   const float *bias, int64_t r0, int64_t o) {
    int64_t units = x_units(w), n_sb = w->n_in / SLATE__SUPERBLOCK;
    size_t bb = F == F_Q4_K   ? sizeof(slate__block_q4_k)
                : F == F_Q5_K ? sizeof(slate__block_q5_k)
                : F == F_Q6_K ? sizeof(slate__block_q6_k)
                : F == F_Q3_K ? sizeof(slate__block_q3_k)
                : F == F_Q2_K ? sizeof(slate__block_q2_k)
                              : sizeof(slate__block_iq4_xs);
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    /* One row (decode): the second half of each super-block (Q4_K, Q5_K) or the second vector of
     * groups (Q6_K) goes into a second accumulator so that the FMAs do not wait on each other;
     * with 2 to 4 rows the rows do that (and fewer registers stay live). */
    const int odd = R == 1;
    xrow xr[4];
    float32x4_t acc[2][4]; /* [set][row] */
    UNROLL for (int r = 0; r < R; r++) {
        xr[r].q = (const int8_t *)(xq + (size_t)(r0 + r) * xs);
        xr[r].dx = (const float *)(xr[r].q + units * XU);
        xr[r].hs = xr[r].dx + units;
        acc[0][r] = acc[1][r] = vdupq_n_f32(0.0f);
    }
    for (int64_t b = 0; b < n_sb; b++) {
        const uint8_t *blk = row + (size_t)b * bb;
        if (F == F_Q4_K || F == F_Q5_K || F == F_IQ4_XS) { /* one scale per unit of 32 */
            float32x4_t fs[2], fm[2];
            if (F == F_IQ4_XS)
                iq4xs_scales(blk, fs);
            else /* Q4_K and Q5_K: the same scales, at the same bytes */
                q4k_scales(blk, fs, fm);
            UNROLL for (int h = 0; h < 2; h++) {
                int8x16_t wv[8];
                if (F == F_Q4_K)
                    q4k_codes(blk, h, wv);
                else if (F == F_Q5_K)
                    q5k_codes(blk, h, wv);
                else
                    iq4xs_codes(blk, h, wv);
                int64_t u = b * UPS + 4 * h;
                UNROLL for (int r = 0; r < R; r++) {
                    int8x16_t xv[8];
                    load_x4(&xr[r], u, xv);
                    int32x4_t is = dot_units4(F == F_Q4_K ? C4 : F == F_Q5_K ? C5 : C8, wv, xv);
                    float32x4_t *a = &acc[h * odd][r], dx = vld1q_f32(xr[r].dx + u);
                    *a = vfmaq_f32(*a, vcvtq_f32_s32(is), vmulq_f32(fs[h], dx));
                    if (F != F_IQ4_XS) { /* the minimums */
                        float32x4x2_t hs = vld2q_f32(xr[r].hs + 2 * u); /* halves of units u.. */
                        *a = vfmsq_f32(*a, fm[h], vaddq_f32(hs.val[0], hs.val[1]));
                    }
                }
            }
        } else { /* groups of 16 with one scale each: Q6_K, Q3_K, Q2_K (and its minimums) */
            float32x4_t fs[4], fm[4];
            if (F == F_Q6_K)
                q6k_scales(blk, fs);
            else if (F == F_Q3_K)
                q3k_scales(blk, fs);
            else
                q2k_scales(blk, fs, fm);
            UNROLL for (int n = 0; n < 2; n++) {
                int8x16_t wv[8];
                if (F == F_Q6_K)
                    q6k_codes(blk, n, wv);
                else if (F == F_Q3_K)
                    q3k_codes(blk, n, wv);
                else
                    q2k_codes(blk, n, wv);
                int64_t u = b * UPS + 4 * n;
                UNROLL for (int r = 0; r < R; r++) {
                    int8x16_t xv[8];
                    load_x4(&xr[r], u, xv);
                    int32x4_t lo, hi;
                    dot_groups4(wv, xv, &lo, &hi);
                    float32x4_t dx = vld1q_f32(xr[r].dx + u); /* units u .. u + 3 */
                    acc[0][r] = vfmaq_f32(acc[0][r], vcvtq_f32_s32(lo),
                                          vmulq_f32(fs[2 * n], vzip1q_f32(dx, dx)));
                    acc[odd][r] = vfmaq_f32(acc[odd][r], vcvtq_f32_s32(hi),
                                            vmulq_f32(fs[2 * n + 1], vzip2q_f32(dx, dx)));
                    if (F == F_Q2_K) { /* hs: dx * sum q_x over the same 8 groups, in order */
                        acc[0][r] = vfmsq_f32(acc[0][r], fm[2 * n], vld1q_f32(xr[r].hs + 2 * u));
                        acc[odd][r] =
                            vfmsq_f32(acc[odd][r], fm[2 * n + 1], vld1q_f32(xr[r].hs + 2 * u + 4));
                    }
                }
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) {
        float v = vaddvq_f32(odd ? vaddq_f32(acc[0][r], acc[1][r]) : acc[0][r]);
        y[(r0 + r) * w->n_out + o] = v + (bias ? bias[o] : 0.0f);
    }
}

/* Outputs per block (neon_q.c's): the block's weight rows stay in L2 while each group of 4 rows
 * of x passes over them from L1. */
enum { OB = 16 };

#define ROWS_OVER_BLOCK(R)                                                                         \
    for (int64_t o = ob; o < oe; o++) rows_k(F, R, y, xq, xs, w, bias, r, o)

INLINE void matmul_fmt(int F, float *y, const void *xq, const slate__wmat *w, const float *bias,
                       int64_t n_rows, int64_t o0, int64_t o1) {
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

/* The table's matmul entry of format F (x: unused, the kernels read xq). */
#define MATMUL_FMT(name, F)                                                                        \
    static void name(float *y, const float *x, const void *xq, const slate__wmat *w,             \
                     const float *b, int64_t n_rows, int64_t o0, int64_t o1) {                     \
        (void)x;                                                                                   \
        matmul_fmt(F, y, xq, w, b, n_rows, o0, o1);                                                \
    }
MATMUL_FMT(matmul_q4_k, F_Q4_K)
MATMUL_FMT(matmul_q5_k, F_Q5_K)
MATMUL_FMT(matmul_q6_k, F_Q6_K)
MATMUL_FMT(matmul_q3_k, F_Q3_K)
MATMUL_FMT(matmul_q2_k, F_Q2_K)
MATMUL_FMT(matmul_iq4_xs, F_IQ4_XS)
#undef MATMUL_FMT

#ifdef SLATE_NEON_Q_DOTPROD
void slate__neon_dotprod_k_fill(slate__kernels *k) {
#else
void slate__neon_k_fill(slate__kernels *k) {
#endif
    /* x as neon_q.c quantizes it (already in the table's Q4 slot): the layout read above. */
    if (!k->quantize_x[SLATE_DTYPE_Q4]) return; /* not filled by neon_q.c: stay ref */
    static const slate_dtype kq[] = {SLATE_DTYPE_Q4_K, SLATE_DTYPE_Q5_K, SLATE_DTYPE_Q6_K,
                                     SLATE_DTYPE_Q3_K, SLATE_DTYPE_Q2_K, SLATE_DTYPE_IQ4_XS};
    k->matmul[SLATE_DTYPE_Q4_K] = matmul_q4_k;
    k->matmul[SLATE_DTYPE_Q5_K] = matmul_q5_k;
    k->matmul[SLATE_DTYPE_Q6_K] = matmul_q6_k;
    k->matmul[SLATE_DTYPE_Q3_K] = matmul_q3_k;
    k->matmul[SLATE_DTYPE_Q2_K] = matmul_q2_k;
    k->matmul[SLATE_DTYPE_IQ4_XS] = matmul_iq4_xs;
    for (size_t i = 0; i < sizeof kq / sizeof *kq; i++) {
        k->xq_plan[kq[i]] = k->xq_plan[SLATE_DTYPE_Q4];
        k->quantize_x[kq[i]] = k->quantize_x[SLATE_DTYPE_Q4];
    }
}
