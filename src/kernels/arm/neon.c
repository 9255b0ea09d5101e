/*
 * neon.c - AArch64 Advanced SIMD (NEON) variants of the kernel table (same signatures and
 * meaning as kernels/ref/ref.c, which is the specification). NEON is part of the AArch64 base
 * architecture, so this file needs no extra compiler flags and no run-time detection; CMake
 * compiles it only for aarch64/arm64 targets and dispatch.c installs it there as "neon".
 *
 * What it has:
 *   matmul for F32, F16 and BF16 weights: y[r][o] = W[o] . x[r] + b[o], as 4-float vectors.
 *     - Decode (n_rows == 1) is bound by weight bandwidth: each weight row is streamed once,
 *       from start to end, 16 inputs per step into four independent accumulators, so the FMA
 *       latency never limits the stream (hardware prefetch follows a single linear stream).
 *     - Prefill (n_rows > 1) uses a 4x4 register tile: each chunk of 4 weights is converted to
 *       f32 once and used for 4 rows of x, each x chunk for 4 weight rows (16 accumulators, 4
 *       weight and 1 x register of the 32). Outputs go in blocks of OB so the block's weight
 *       rows stay in cache while every row tile passes over them. No K blocking: each output
 *       is one dot product over the whole row.
 *     - f16 -> f32 by vcvt_f32_f16 (FCVTL, always present on AArch64), bf16 -> f32 by a 16-bit
 *       left shift; both exact.
 *     - Tails: the last n_in % 4 inputs are read through a zero-padded copy; odd row and output
 *       counts use narrower tiles. Nothing is read outside the arrays.
 *   to_f32 for F16 / BF16 rows (exact, 8 per step, padded tail).
 *   rms_norm: 4-wide sums of squares in two accumulators, then (x * r) * w as ref.
 *   softcap (cap * tanh(x / cap)) with a vectorized tanh (tanh4, below), which the capped
 *     attention uses too.
 *   attention over F32 / F16 / int8 caches: scores for blocks of 4 cache positions (4 dot
 *     products, one pairwise-add transpose; an int8 row's scale multiplies its dot product and
 *     its weight, as ref), then one online-softmax update per block with a vectorized
 *     exp (Cephes polynomial, ~2 ulp); the v rows with nonzero weight are accumulated over
 *     head_dim. The query heads of one kv head run together (up to HG per pass), so each
 *     block's K/V rows are read from memory once for all of them (with n_rows > 1, kernels.h,
 *     also for the rows of a prefill, each head within its row's range). Scores that are
 *     -inf or NaN are skipped exactly as in ref; all -inf (or an empty range) gives out = 0.
 * The integer Q8_0/Q4/Q8_C matmuls and their activation quantizer are in arm/neon_q.c (and
 * arm/neon_dotprod.c for CPUs with SDOT), added to the table by dispatch.c.
 * What it does not have (the table keeps ref's, copied first by dispatch.c): PAL matmul and the
 * row lookups of the compressed formats.
 * Checked against ref by tests/kernels/neon_check.c under qemu (scripts/check_neon.sh): that
 * shows correctness only; speed on ARM hardware is not measured yet.
 */
#include "kernels/kernels.h"
#include "core/core.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* ---- loads ------------------------------------------------------------------------------- */

INLINE float32x4_t f16x4_to_f32(uint16x4_t h) { return vcvt_f32_f16(vreinterpret_f16_u16(h)); }

INLINE float32x4_t bf16x4_to_f32(uint16x4_t h) {
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* 4 int8 values as f32 (exact). */
INLINE float32x4_t i8x4_to_f32(const int8_t *p) {
    int32_t w;
    memcpy(&w, p, 4);
    int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}

/* 4 weights (or cache values) at element i of a row, as f32. An int8 cache row (I8) is
 * {f32 scale, int8 values}: its values unscaled (the caller applies the scale per row, as ref
 * does). */
INLINE float32x4_t load_w4(slate_dtype dt, const void *w, int64_t i) {
    if (dt == SLATE_DTYPE_F32) return vld1q_f32((const float *)w + i);
    if (dt == SLATE_DTYPE_I8) return i8x4_to_f32((const int8_t *)w + 4 + i);
    uint16x4_t h = vld1_u16((const uint16_t *)w + i);
    return dt == SLATE_DTYPE_F16 ? f16x4_to_f32(h) : bf16x4_to_f32(h);
}

/* The n < 4 values at element i, zero-padded to 4 lanes. */
INLINE float32x4_t load_w4_tail(slate_dtype dt, const void *w, int64_t i, int64_t n) {
    if (dt == SLATE_DTYPE_F32) {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        memcpy(t, (const float *)w + i, (size_t)n * sizeof(float));
        return vld1q_f32(t);
    }
    if (dt == SLATE_DTYPE_I8) {
        int8_t t[4] = {0, 0, 0, 0};
        memcpy(t, (const int8_t *)w + 4 + i, (size_t)n);
        return i8x4_to_f32(t);
    }
    uint16_t t[4] = {0, 0, 0, 0};
    memcpy(t, (const uint16_t *)w + i, (size_t)n * sizeof(uint16_t));
    uint16x4_t h = vld1_u16(t);
    return dt == SLATE_DTYPE_F16 ? f16x4_to_f32(h) : bf16x4_to_f32(h);
}

/* The n < 4 floats at p, zero-padded. */
INLINE float32x4_t load_f4_tail(const float *p, int64_t n) {
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(t, p, (size_t)n * sizeof(float));
    return vld1q_f32(t);
}

/* Row j: F32/F16/BF16 rows stride elements apart, I8 (int8 cache) rows stride bytes apart. */
INLINE const void *row_at(slate_dtype dt, const void *base, int64_t j, int64_t stride) {
    return dt == SLATE_DTYPE_F32  ? (const void *)((const float *)base + j * stride)
           : dt == SLATE_DTYPE_I8 ? (const void *)((const uint8_t *)base + j * stride)
                                  : (const void *)((const uint16_t *)base + j * stride);
}

/* An int8 cache row's scale. */
INLINE float row_scale(const void *row) {
    float sc;
    memcpy(&sc, row, 4);
    return sc;
}

/* ---- matmul ------------------------------------------------------------------------------ */

/* W[o] . x over n inputs, one weight row streamed once (decode). */
INLINE float dot_row(slate_dtype dt, const void *w, const float *x, int64_t n) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, load_w4(dt, w, i), vld1q_f32(x + i));
        a1 = vfmaq_f32(a1, load_w4(dt, w, i + 4), vld1q_f32(x + i + 4));
        a2 = vfmaq_f32(a2, load_w4(dt, w, i + 8), vld1q_f32(x + i + 8));
        a3 = vfmaq_f32(a3, load_w4(dt, w, i + 12), vld1q_f32(x + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, load_w4(dt, w, i), vld1q_f32(x + i));
    if (i < n) a1 = vfmaq_f32(a1, load_w4_tail(dt, w, i, n - i), load_f4_tail(x + i, n - i));
    return vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
}

/* The R x O tile y[r0..r0+R)[o..o+O) = x rows . W rows + bias. R, O and dt are compile-time
 * constants at every call site, so the accumulators live in registers. */
INLINE void tile(slate_dtype dt, int R, int O, float *y, const float *x, const void *w,
                 const float *bias, int64_t n_in, int64_t n_out, int64_t r0, int64_t o) {
    float32x4_t acc[4][4];
    const float *xr[4];
    const void *wr[4];
    UNROLL for (int r = 0; r < R; r++) xr[r] = x + (r0 + r) * n_in;
    UNROLL for (int c = 0; c < O; c++) wr[c] = row_at(dt, w, o + c, n_in);
    UNROLL for (int r = 0; r < R; r++) {
        UNROLL for (int c = 0; c < O; c++) acc[r][c] = vdupq_n_f32(0.0f);
    }
    int64_t i = 0;
    for (; i + 4 <= n_in; i += 4) {
        float32x4_t wv[4];
        UNROLL for (int c = 0; c < O; c++) wv[c] = load_w4(dt, wr[c], i);
        UNROLL for (int r = 0; r < R; r++) {
            float32x4_t xv = vld1q_f32(xr[r] + i);
            UNROLL for (int c = 0; c < O; c++) acc[r][c] = vfmaq_f32(acc[r][c], wv[c], xv);
        }
    }
    if (i < n_in) {
        float32x4_t wv[4];
        UNROLL for (int c = 0; c < O; c++) wv[c] = load_w4_tail(dt, wr[c], i, n_in - i);
        UNROLL for (int r = 0; r < R; r++) {
            float32x4_t xv = load_f4_tail(xr[r] + i, n_in - i);
            UNROLL for (int c = 0; c < O; c++) acc[r][c] = vfmaq_f32(acc[r][c], wv[c], xv);
        }
    }
    UNROLL for (int r = 0; r < R; r++) {
        UNROLL for (int c = 0; c < O; c++) {
            y[(r0 + r) * n_out + o + c] = vaddvq_f32(acc[r][c]) + (bias ? bias[o + c] : 0.0f);
        }
    }
}

/* Outputs per block: 16 rows of 4096 f16 weights are 128 KiB, which stays in L2 (>= 256 KiB on
 * current cores) while the row tiles pass over it; x (n_rows x n_in) is read once per block. */
enum { OB = 16 };

/* All full 4-wide output tiles of [ob, oe) for R rows from row r, then the leftover outputs. */
#define TILE_ROW(R)                                                                                \
    do {                                                                                           \
        int64_t o = ob;                                                                            \
        for (; o + 4 <= oe; o += 4) tile(dt, R, 4, y, x, w, bias, n_in, n_out, r, o);              \
        for (; o < oe; o++) tile(dt, R, 1, y, x, w, bias, n_in, n_out, r, o);                      \
    } while (0)

INLINE void matmul_any(slate_dtype dt, float *y, const float *x, const void *w, const float *bias,
                       int64_t n_rows, int64_t n_in, int64_t n_out, int64_t o0, int64_t o1) {
    if (n_rows == 1) {
        for (int64_t o = o0; o < o1; o++)
            y[o] = dot_row(dt, row_at(dt, w, o, n_in), x, n_in) + (bias ? bias[o] : 0.0f);
        return;
    }
    for (int64_t ob = o0; ob < o1; ob += OB) {
        int64_t oe = ob + OB < o1 ? ob + OB : o1;
        for (int64_t r = 0; r < n_rows; r += 4) {
            switch (n_rows - r) {
            case 1: TILE_ROW(1); break;
            case 2: TILE_ROW(2); break;
            case 3: TILE_ROW(3); break;
            default: TILE_ROW(4); break;
            }
        }
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

INLINE void to_f32_any(slate_dtype dt, float *d, const uint16_t *h, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(d + i, load_w4(dt, h, i));
        vst1q_f32(d + i + 4, load_w4(dt, h, i + 4));
    }
    for (; i + 4 <= n; i += 4) vst1q_f32(d + i, load_w4(dt, h, i));
    if (i < n) {
        float t[4];
        vst1q_f32(t, load_w4_tail(dt, h, i, n - i));
        memcpy(d + i, t, (size_t)(n - i) * sizeof(float));
    }
}

static void to_f32_f16(float *d, const void *s, int64_t n) {
    to_f32_any(SLATE_DTYPE_F16, d, s, n);
}
static void to_f32_bf16(float *d, const void *s, int64_t n) {
    to_f32_any(SLATE_DTYPE_BF16, d, s, n);
}

/* fcvtn with the default rounding (FPCR: nearest even, no flush to zero): IEEE conversion, so
 * every non-NaN value gives slate__f32_to_f16's bits. */
static void to_f16(uint16_t *d, const float *s, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(d + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(s + i))));
    for (; i < n; i++) d[i] = slate__f32_to_f16(s[i]);
}

/* ---- attention --------------------------------------------------------------------------- */

/* e^x for x <= 0 (inputs below -87.3 give ~1e-38 instead of 0, harmless next to the block
 * maximum's weight of 1): Cephes expf, as exp8 in x86/avx2.c: range reduction by ln 2 in two
 * parts and a degree 6 polynomial; about 2 ulp. */
INLINE float32x4_t exp4(float32x4_t x) {
    x = vmaxq_f32(x, vdupq_n_f32(-87.33654f));
    x = vminq_f32(x, vdupq_n_f32(88.37626f));
    float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

/* tanh(x) for any x (Cephes tanhf's method, as tanh16 in x86/avx512.c, whose error bounds and
 * special values it shares), on |x| with x's sign put back at the end (so -0 stays -0): below
 * 0.625 an odd polynomial, |x| + |x|^3 P(x^2); above 1 - 2 / (e^2|x| + 1) with exp4, |x|
 * clamped to 10, where it rounds to exactly 1. NaN fails the >= test and takes the
 * polynomial, so it stays NaN. */
INLINE float32x4_t tanh4(float32x4_t x) {
    const float32x4_t ax = vabsq_f32(x), z = vmulq_f32(x, x);
    float32x4_t p = vdupq_n_f32(-5.70498872745e-3f);
    p = vfmaq_f32(vdupq_n_f32(2.06390887954e-2f), p, z);
    p = vfmaq_f32(vdupq_n_f32(-5.37397155531e-2f), p, z);
    p = vfmaq_f32(vdupq_n_f32(1.33314422036e-1f), p, z);
    p = vfmaq_f32(vdupq_n_f32(-3.33332819422e-1f), p, z);
    const float32x4_t small = vfmaq_f32(ax, vmulq_f32(p, z), ax);
    const float32x4_t a = vminq_f32(ax, vdupq_n_f32(10.0f));
    const float32x4_t e = exp4(vaddq_f32(a, a));
    const float32x4_t big = vsubq_f32(
        vdupq_n_f32(1.0f), vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, vdupq_n_f32(1.0f))));
    const float32x4_t r = vbslq_f32(vcgeq_f32(ax, vdupq_n_f32(0.625f)), big, small);
    return vbslq_f32(vdupq_n_u32(0x80000000u), x, r); /* copysign(r, x) */
}

/* [q . row[0], ..., q . row[3]] for 4 cache rows of dtype dt. */
INLINE float32x4_t dot4(slate_dtype dt, const float *q, const void *const row[4], int64_t hd) {
    float32x4_t a[4];
    UNROLL for (int t = 0; t < 4; t++) a[t] = vdupq_n_f32(0.0f);
    int64_t d = 0;
    for (; d + 4 <= hd; d += 4) {
        float32x4_t qv = vld1q_f32(q + d);
        UNROLL for (int t = 0; t < 4; t++) a[t] = vfmaq_f32(a[t], qv, load_w4(dt, row[t], d));
    }
    if (d < hd) {
        float32x4_t qv = load_f4_tail(q + d, hd - d);
        UNROLL for (int t = 0; t < 4; t++) a[t] =
            vfmaq_f32(a[t], qv, load_w4_tail(dt, row[t], d, hd - d));
    }
    /* pairwise adds transpose the four horizontal sums into one vector */
    return vpaddq_f32(vpaddq_f32(a[0], a[1]), vpaddq_f32(a[2], a[3]));
}

/* The running softmax state of one query head: max m, sum l, weighted sum of v rows acc. */
typedef struct head_acc {
    float acc[SLATE__MAX_HEAD_DIM] __attribute__((aligned(16)));
    float m, l;
} head_acc;

/* Query heads per pass over the cache (as the x86 variants): K and V rows of a block are read
 * from memory once and again from L1 by the other heads of the pass. 8 heads are 16 KiB of
 * accumulators at head_dim 512. */
enum { HG = SLATE__ATTN_PASS_HEADS };

/* One block of cache positions [jb + lo, jb + n) (lo < n <= 4) for one head. */
INLINE void attn_block(slate_dtype dt, head_acc *h, const float *q, const void *const kr[4],
                       const void *v, int64_t stride, int64_t jb, int lo, int n, int64_t hd,
                       float scale, float softcap, const float *mask) {
    float s[4];
    if (dt == SLATE_DTYPE_I8) { /* each dot product times its row's scale, then scale, as ref */
        float ks[4];
        for (int t = 0; t < 4; t++) ks[t] = row_scale(kr[t]) * scale;
        vst1q_f32(s, vmulq_f32(dot4(dt, q, kr, hd), vld1q_f32(ks)));
    } else {
        vst1q_f32(s, vmulq_n_f32(dot4(dt, q, kr, hd), scale));
    }
    if (softcap > 0.0f) /* scale, cap, then mask, as ref (tanh4: 2 ulp of tanhf) */
        vst1q_f32(s, vmulq_n_f32(tanh4(vmulq_n_f32(vld1q_f32(s), 1.0f / softcap)), softcap));
    for (int t = 0; t < 4; t++) {
        if (t >= n || t < lo)
            s[t] = -INFINITY;
        else if (mask)
            s[t] += mask[jb + t];
    }
    float32x4_t sv = vld1q_f32(s);
    /* Ordered compare: false for -inf and NaN, the scores ref skips. */
    uint32x4_t valid = vcgtq_f32(sv, vdupq_n_f32(-INFINITY));
    float bm = vmaxvq_f32(vbslq_f32(valid, sv, vdupq_n_f32(-INFINITY)));
    if (!(bm > -INFINITY)) return; /* nothing valid in this block */
    float *acc = h->acc;
    if (bm > h->m) {
        float c = expf(h->m - bm); /* m = -inf on the first valid block: c = 0 */
        for (int64_t d = 0; d < hd; d += 4) vst1q_f32(acc + d, vmulq_n_f32(vld1q_f32(acc + d), c));
        h->l *= c;
        h->m = bm;
    }
    /* Invalid lanes may hold NaN (NaN score) or 0 (-inf - m saturates in exp4): masked to 0. */
    float32x4_t p = vreinterpretq_f32_u32(
        vandq_u32(vreinterpretq_u32_f32(exp4(vsubq_f32(sv, vdupq_n_f32(h->m)))), valid));
    h->l += vaddvq_f32(p);
    float pw[4];
    vst1q_f32(pw, p);
    /* The valid rows, compacted, so the v pass skips what ref skips. */
    float pb[4];
    const void *vr[4];
    int nv = 0;
    for (int t = 0; t < n; t++) {
        if (!(s[t] > -INFINITY)) continue;
        vr[nv] = row_at(dt, v, jb + t, stride);
        pb[nv] = dt == SLATE_DTYPE_I8 ? pw[t] * row_scale(vr[nv]) : pw[t]; /* ref's p * vs */
        nv++;
    }
    int64_t d = 0;
    for (; d + 4 <= hd; d += 4) {
        float32x4_t a = vld1q_f32(acc + d);
        for (int t = 0; t < nv; t++) a = vfmaq_n_f32(a, load_w4(dt, vr[t], d), pb[t]);
        vst1q_f32(acc + d, a);
    }
    if (d < hd) {
        float32x4_t a = vld1q_f32(acc + d);
        for (int t = 0; t < nv; t++) a = vfmaq_n_f32(a, load_w4_tail(dt, vr[t], d, hd - d), pb[t]);
        vst1q_f32(acc + d, a);
    }
}

INLINE void attention_any(slate_dtype dt, float *out, const float *q, const void *k, const void *v,
                          int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                          int64_t n_rows, int64_t window, float scale, float softcap,
                          const float *mask) {
    head_acc hs[HG];
    int64_t start[HG], end[HG]; /* each head's range (kernels.h: n_rows, window) */
    /* the first head's start is the earliest */
    j0 = slate__attn_head_start(j0, slate__attn_head_end(j1, 0, n_heads, n_rows), window);
    for (int64_t h0 = 0; h0 < n_heads; h0 += HG) {
        int nh = n_heads - h0 < HG ? (int)(n_heads - h0) : HG;
        for (int h = 0; h < nh; h++) {
            hs[h].m = -INFINITY;
            hs[h].l = 0.0f;
            /* Whole vectors are loaded and stored: zero up to the next multiple of 4. */
            for (int64_t d = 0; d < hd; d += 4) vst1q_f32(hs[h].acc + d, vdupq_n_f32(0.0f));
            end[h] = slate__attn_head_end(j1, h0 + h, n_heads, n_rows);
            start[h] = slate__attn_head_start(j0, end[h], window);
        }
        for (int64_t jb = j0; jb < j1; jb += 4) {
            int n = j1 - jb < 4 ? (int)(j1 - jb) : 4;
            const void *kr[4];
            /* Lanes past the range reuse row jb (valid memory); their scores become -inf. */
            for (int t = 0; t < 4; t++) kr[t] = row_at(dt, k, jb + (t < n ? t : 0), stride);
            for (int h = 0; h < nh; h++) {
                /* this head's positions of the block: [jb + lo, jb + hi) */
                int hi = end[h] - jb < n ? (int)(end[h] - jb) : n;
                int lo = start[h] > jb ? (int)(start[h] - jb < 4 ? start[h] - jb : 4) : 0;
                if (lo < hi)
                    attn_block(dt, &hs[h], q + (h0 + h) * hd, kr, v, stride, jb, lo, hi, hd,
                               scale, softcap, mask);
            }
        }
        for (int h = 0; h < nh; h++) {
            float *o = out + (h0 + h) * hd;
            float inv = hs[h].l > 0.0f ? 1.0f / hs[h].l : 0.0f;
            int64_t d = 0;
            for (; d + 4 <= hd; d += 4) vst1q_f32(o + d, vmulq_n_f32(vld1q_f32(hs[h].acc + d), inv));
            for (; d < hd; d++) o[d] = hs[h].acc[d] * inv;
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

/* int8 cache (kernels.h): the same kernel, each row's int8 values converted as they are loaded
 * and its scale applied to its dot product (k) or weight (v). */
static void attention_i8(float *out, const float *q, const uint8_t *k, const uint8_t *v,
                         int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                         int64_t n_rows, int64_t window, float scale, float softcap,
                         const float *mask) {
    (softcap > 0.0f ? attention_int8_capped : attention_int8)(out, q, k, v, stride, j0, j1, hd,
                                                              n_heads, n_rows, window, scale,
                                                              softcap, mask);
}

/* ---- softcap ----------------------------------------------------------------------------- */

/* cap * tanh(x / cap) with tanh4; x / cap as x * (1 / cap) (one more rounding of the argument,
 * which tanh does not enlarge). The last n % 4 through a zero-padded copy. */
static void softcap(float *y, const float *x, int64_t n, float cap) {
    const float ic = 1.0f / cap;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(tanh4(vmulq_n_f32(vld1q_f32(x + i), ic)), cap));
    if (i < n) {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        vst1q_f32(t, vmulq_n_f32(tanh4(vmulq_n_f32(vld1q_f32(t), ic)), cap));
        memcpy(y + i, t, (size_t)(n - i) * sizeof(float));
    }
}

/* ---- rms_norm ---------------------------------------------------------------------------- */

static void rms_norm(float *y, const float *x, const float *w, int64_t n, float eps) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
        s0 = vfmaq_f32(s0, a, a);
        s1 = vfmaq_f32(s1, b, b);
    }
    for (; i + 4 <= n; i += 4) {
        float32x4_t a = vld1q_f32(x + i);
        s0 = vfmaq_f32(s0, a, a);
    }
    if (i < n) {
        float32x4_t a = load_f4_tail(x + i, n - i);
        s1 = vfmaq_f32(s1, a, a);
    }
    float ss = vaddvq_f32(vaddq_f32(s0, s1));
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    /* (x * r) * w, the order ref multiplies in */
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), r), vld1q_f32(w + i)));
    for (; i < n; i++) y[i] = x[i] * r * w[i];
}

void slate__neon_fill(slate__kernels *k) {
    k->name = "neon";
    k->matmul[SLATE_DTYPE_F32] = matmul_f32;
    k->matmul[SLATE_DTYPE_F16] = matmul_f16;
    k->matmul[SLATE_DTYPE_BF16] = matmul_bf16;
    k->to_f32[SLATE_DTYPE_F16] = to_f32_f16;
    k->to_f32[SLATE_DTYPE_BF16] = to_f32_bf16;
    k->to_f16 = to_f16;
    k->attention = attention;
    k->attention_i8 = attention_i8;
    k->rms_norm = rms_norm;
    k->softcap = softcap;
}
