/*
 * avx512_vnni_k.c - integer kernels for the super-block formats Q4_K, Q5_K, Q6_K, Q3_K, Q2_K and
 * IQ4_XS (GGUF's, byte for byte: kernels/quant.h) with AVX-512 VNNI (vpdpbusd, u8 x s8 in fours
 * into int32 lanes).
 * dispatch.c installs them in the avx512_vnni table next to avx512_vnni.c's Q8_0/Q4/Q8_C
 * kernels, whose design this file follows (its header comment records the measurements). Same
 * meaning as kernels/ref/quant.c except that x is quantized first.
 *
 * Activations. x is rounded to int8 in groups of 128 inputs, one f32 scale dx = max|x| / 127
 * per group (a super-block is two groups; a group never straddles two super-blocks). The
 * weight codes are unsigned (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63, Q3_K 8 (code + 4) 0..56, Q2_K
 * 0..3), so vpdpbusd takes them as its u8 operand against int8 x, and what is not a product of
 * code and x comes from x sums the quantizer precomputes:
 *   Q4_K  value (d sc_j) q - dmin m_j: the minimum term of sub-block j (32 inputs) is
 *         -dmin m_j dx S_j with S_j = sum of its int8 x; the quantizer stores dx S_j as f32.
 *   Q5_K  Q4_K's header, values and x (the same quantizer and layout: xq_plan names Q4_K's, so
 *         a mix of the two shares one xq); only the codes have a fifth bit.
 *   Q6_K  value (d sc_k) (code - 32): the -32 is folded into the integer accumulator's initial
 *         value, -32 * (sum of the 4 int8 x of each lane), which the quantizer stores (decode),
 *         or -32 * S per 16 inputs (prefill).
 *   Q3_K  value (d (sc_s - 32)) code, code -4..3: Q6_K's x and its -32 (xq_plan names Q6_K's
 *         layout, so a mix of Q6_K, Q3_K and Q2_K shares one xq) against the codes 8 (code + 4):
 *         the integer sum is 8 * sum of code * x, and d / 8 (exact) undoes the 8.
 *   Q2_K  value (d sc_s) q - dmin m_s: Q6_K's x; the minimum term -dmin m_s dx S_s of each 16
 *         inputs comes from the stored -32 S (per lane: a vpmaddwd with the words m_s, as
 *         the scales; prefill: per 16 inputs). A Q3_K_M q/k/v (Q3_K with Q4_K or Q5_K) quantizes
 *         x twice, one xq per layout; Q2_K files mix Q2_K with Q3_K.
 *
 * Decode (n_rows < PREFILL_MIN_ROWS): one weight row at a time per x row, a single sequential
 * stream per thread, prefetched PF_ROWS rows ahead (avx512_vnni.c's measurements). Per group of
 * 128 inputs (half a super-block) two vpdpbusd give 16 int32 lanes each:
 *   Q4_K  one 64-byte load of qs covers sub-blocks 4h..4h+3: its low nibbles are sub-blocks 4h
 *         (bytes 0-31) and 4h+2 (bytes 32-63), its high nibbles 4h+1 and 4h+3. The quantizer
 *         stores each group of x in that order (inputs 0-31, 64-95, 32-63, 96-127), so no
 *         shuffle is needed per weight row.
 *   Q5_K  Q4_K's nibbles (qs at byte 48), each ORed with its fifth bit at bit 4: the 32 bytes
 *         of qh in both halves of a zmm, shifted word-wise so that bit j of byte l lands on
 *         bit 4 (vpsllvw by 4, 2 for the low nibbles, 3, 1 for the high; by 4 first for group
 *         1), then one vpternlog (nibble | shifted & 0x10) per vector: 4 more ops per group
 *         (5 for group 1) on the weights, none per x row.
 *   Q6_K  64 bytes of ql and 32 of qh give the codes of inputs 0-63 (low nibbles | qh bits 0-3)
 *         and 64-127 (high nibbles | qh bits 4-7) of the group, in natural order.
 *   Q3_K, Q2_K  32 bytes of qs broadcast into both halves of a zmm (a load, no shuffle) hold
 *         the 2-bit codes of inputs 0-63 and 64-127 of the group; one vpsrlvw / vpsllvw with
 *         a count per half moves those of inputs 0-31 | 32-63 (or 64-95 | 96-127) to the bits
 *         the code takes, in natural order; Q3_K's hmask likewise (dec_k16). Per block 110
 *         (Q3_K) or 84 (Q2_K) bytes, so blocks are only 2-byte aligned: every load is
 *         unaligned, and none reads past the block.
 * A lane's sum (Q4_K at most 4 * 15 * 127 = 7620 in magnitude, Q5_K 4 * 31 * 127 = 15748,
 * Q6_K with the -32 folded in 4 * 32 * 127 = 16256, Q3_K 8 code in -32..24 the same, Q2_K
 * 4 * 3 * 127 = 1524 and its x sums 16256) fits int16, so vpackssdw packs the two
 * vectors into words and vpmaddwd multiplies each word by its sub-block's integer scale (sc_j of
 * Q4_K / Q5_K, at most 63 * 256 as a word: see scale_index; a pair 2 * 15748 * 16128 < 2^31),
 * the int8 scale of Q6_K, sc - 32 of Q3_K, sc of Q2_K; a pair at most 2 * 16256 * 32768) and
 * adds pairs of words of one sub-block: the scales are applied in integers. The scale words come
 * from one vpshufb each (scale_index); then one cvt per group, a multiply by dx (a broadcast
 * memory operand) and one fma with d per super-block give floats. Q4_K's (and Q5_K's) minimum
 * term is one more fma per super-block (m_j dmin with the stored dx S_j, lane by lane); Q2_K's
 * one vpmaddwd, cvt and fma per group and one fma with dmin per super-block. Measured against avx512_vnni.c's Q4 B=32 asymmetric decode, one
 * thread, [512][2048] in L2, best of 1000: Q4_K first 37 us vs 38 (vpermw for the scale words, scalar scale unpacking, d * dx per group
 * broadcast from a register: ports 0 and 5 both full, llvm-mca), then 29-30 us vs 38 with the
 * vector scale unpacking, broadcast operands and vpshufb; Q6_K 31 -> 30 us (q8_0: 48). From
 * DRAM (bench/kq_matvec.c: TinyLlama's shapes, 2 threads, 1 GiB of copies, a shared VM) every
 * format reads at about the same 10-22 GB/s, so the best of 160 calls took 7-19 % less time
 * for Q4_K than for Q4 B=32 asymmetric (10 % fewer bytes) in 6 of 8 same-run pairs, and 17-30 %
 * less for Q6_K than for Q8_0 in 7 of 8 (the others: the VM's noise, +-50 % either way). Q5_K
 * (one run, 512 MiB of copies, the 2 cores shared at load 7-9, so only rough): best-of decode
 * 11.4 / 19.0 / 11.7 / 6.6 GB/s for the four shapes against Q4_K's 11.4 / 10.4 / 12.7 / 19.6
 * and Q8_0's 11.7 / 20.2 / 11.3 / 6.4 (medians 3.5-9.9 for all); prefill 314 / 92 / 124 / 107
 * GFLOP/s against Q4_K's 158 / 94 / 112 / 101 and Q8_0's 151 / 138 / 152 / 110.
 * Q3_K and Q2_K, one thread, [512][2048] in L2, best of 1000, in one run with the others (the
 * 2 cores shared at load 5-6): 37.7 and 35.8 us against Q4_K's 29.3 and Q6_K's 30.0 (more
 * operations per weight byte: Q3_K's codes take two shifts and a merge per vector more than
 * Q6_K's, Q2_K its minimum term per group); from DRAM (bench/kq_matvec.c, 512 MiB of copies,
 * load ~6, rough) the best-of decode of the four shapes took 188 / 274 / 277 / 3400 us for
 * Q3_K and 173 / 243 / 252 / 2423 for Q2_K against Q4_K's 260 / 322 / 341 / 5419 and Q6_K's
 * 352 / 423 / 478 / 7992 (GB/s: Q3_K 9.6 / 18.1 / 17.9 / 8.3, Q2_K 8.0 / 15.6 / 15.0 / 8.9,
 * Q4_K 9.1 / 20.1 / 19.0 / 6.8, Q6_K 9.8 / 22.3 / 19.8 / 6.7).
 * Then the codes from broadcast loads and per-half word shifts (no vinserti64x4) and Q2_K's
 * scale and minimum words from one vpshufb of the raw scale bytes: one thread, [512][2048] in
 * L2, best of 3000, 3 runs alternating with the previous code (load ~3): Q3_K 38.6 -> 32.9-34.0
 * us, Q2_K 36.3-36.6 -> 32.5, Q4_K 29.9-30.8 and Q6_K 30.5-31.3 in both. From DRAM
 * (bench/kq_matvec.c 3 256, 2 threads, 3 alternating runs of each, the VM so noisy that the
 * absolute times moved +-50 % between runs) the median over runs of Q2_K's decode time over
 * Q4_K's in the same run went 0.76 / 0.75 / 0.70 / 0.77 -> 0.69 / 0.73 / 0.65 / 0.68 for the
 * four shapes, Q3_K's 0.79 / 0.88 / 0.79 / 0.89 -> 0.73 / 0.87 / 0.76 / 0.82 (Q6_K's 1.2-1.6
 * in both).
 *
 * Prefill (n_rows >= PREFILL_MIN_ROWS), compute bound: avx512_vnni.c's tiling. The weights of
 * 32 output columns x KC inputs are unpacked once into u8 [KC/4][32][4] (codes 0..63), with per
 * column and chunk of constant scale (Q4_K, Q5_K: a sub-block of 32, scale d sc_j and minimum
 * -dmin m_j; Q6_K, Q3_K, Q2_K: 16 inputs, scale d sc_k (Q3_K: d (sc_k - 32) / 8), Q2_K
 * also its integer minimums m_k and dmin) the f32 scales; every 4-row tile of x then runs
 * over them, lane c of a row's accumulator being that row's output column c. Q4_K is then the
 * asymmetric Q4 of block 32 (the minimum term per chunk from the stored dx S), and so is Q5_K
 * (only its unpacking differs: codes16 ORs the fifth bit in; 8 vpdpbusd per chunk sum at most
 * 32 * 31 * 127 in int32), Q6_K a symmetric one of block 16 (initial value -32 S per chunk),
 * and so is Q3_K (its codes 8 (code + 4)); Q2_K an asymmetric one of block 16 whose minimum
 * term is summed in integers per group of 128: the words m of two chunks (tile mp) against the
 * words -S of one x row (the stored -32 S >> 5, exact) in one vpdpwssd, then one cvt and fma
 * with dmin per group, before dx (was two fma per 16 inputs and row: 11 % faster).
 * Measured, one thread, 128 rows of [256][2048]: Q4_K 365-369 GFLOP/s, Q4 B=32 asymmetric 370, Q6_K 345-353 (its chunks of 16
 * take twice the int-to-float steps), q8_0 398. In the Q3_K / Q2_K run above (load 5-6): Q3_K
 * 314-323, Q2_K 207-247 (its minimum term: two more fma per 16 inputs and row), Q6_K 358-373,
 * Q4_K 379. Q2_K with its minimum term in integers per group (one thread, 128 rows of
 * [256][2048], best of 300-500, 6 runs alternating with the previous code, load ~3): 588-691 ->
 * 514-580 us (231-261 GFLOP/s; these and the decode times above include quantizing x), Q4_K
 * 440-468 and Q6_K 471-630 in both.
 *
 * IQ4_XS (GGUF's, byte for byte: super-blocks of 256, 136 bytes {f16 d; u16 scales_h; u8
 * scales_l[4]; u8 qs[128]}; sub-block j of 32 holds IQ4_NL's nibbles in qs[16 j..] and value
 * (d (ls_j - 32)) L[nibble]) reads IQ4_NL's x, which is avx512_vnni.c's Q4 B=32 symmetric x
 * (its xq_plan and quantize_x, installed for IQ4_XS too, so an IQ4_XS file's IQ4_NL fallback
 * tensors share one xq with it): its decode order puts the 16 low-nibble inputs of 4
 * consecutive blocks of 32 in 64 bytes and their high-nibble inputs in the next 64, which is
 * exactly how a group's 64 bytes of qs hold sub-blocks 4h..4h+3, so one 64-byte load per group
 * (no shuffle) and a mask / shift give the nibbles, and one vpshufb each turns them into
 * L + 128 (1..241, avx512_vnni.c's IQ4_NL). The correction -128 * sum(qx) comes from the
 * stored -8 * sum(qx) (per lane: decode; per 32 inputs: prefill) shifted left by 4, so a lane
 * holds sum L q over 8 products (4 low, 4 high) of one sub-block: at most 8 * 127 * 127 =
 * 129032 in magnitude, past int16 (no vpmaddwd of the scales as for Q4_K); it converts to f32
 * exactly and one fma per group and x row applies d (ls - 32) dx per lane (f32 d (ls - 32), the
 * product ref computes, from vector shifts of the scale bytes and one vpermps per group). That
 * x is not Q4_K's, so a Q5_K attn_v next to IQ4_XS q/k quantizes x a second time (one more
 * pass over x's 2048 inputs, beside the 2048 x 2048 weights each of those matvecs reads).
 * Prefill is Q4_K's tiling with chunks of 32: codes L + 128, ds d (ls - 32), each chunk's dot
 * starting at 16 times the stored -8 S.
 *
 * n_in is a multiple of 256, so no load is partial and x has no padding inside a row. Row
 * ranges are split by exec; this file keeps no state between calls.
 */
#include "kernels/kernels.h"
#include "kernels/x86/prefetch.h"
#include "kernels/x86/avx512_vnni_tile.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 32")

enum {
    GROUP = 128,          /* x quantization group (inputs): half a super-block */
    SB = SLATE__SUPERBLOCK,
    Q4K_BYTES = (int)sizeof(slate__block_q4_k),
    Q6K_BYTES = (int)sizeof(slate__block_q6_k),
    Q5K_BYTES = (int)sizeof(slate__block_q5_k),
    Q3K_BYTES = (int)sizeof(slate__block_q3_k),
    Q2K_BYTES = (int)sizeof(slate__block_q2_k),
    IQ4XS_BYTES = (int)sizeof(slate__block_iq4_xs),
    PREFILL_MIN_ROWS = 4, /* fewer rows: the decode kernels (see xq_plan) */
    RT = 8,               /* prefill x rows are padded to a multiple of this */
    PR = VT_PR,           /* prefill rows per register tile (avx512_vnni_tile.h) */
    CT = VT_CT,           /* prefill columns per tile (two zmm of int32) */
    KC = 1024,            /* prefill inputs per K block (4 super-blocks): 44 KiB of unpacked
                             weights and scales (Q2_K: 44.5) while every row of x passes over them */
    PF_ROWS = 4,          /* decode prefetches this many weight rows ahead (avx512_vnni.c) */
};

/* ---- x layouts ------------------------------------------------------------------------------
 * IQ4_XS: avx512_vnni.c's (see IQ4_XS above). Q4_K and Q6_K (and the formats that share their
 * x), per row, at row * stride (a multiple of 64), with n = n_in and ng = n / 128:
 *   q[n] int8: Q4_K decode in each group the order of inputs 0-31, 64-95, 32-63, 96-127;
 *        otherwise natural;
 *   d[ng] f32: dx per group;
 *   then Q4_K decode: per super-block 16 f32, in the lanes of q4k_scales' bytes: 0 where it
 *        has a scale, dx * S_j (S_j the sum of sub-block j's q) where it has minimum m_j;
 *        Q4_K prefill: f32 dx * S per 32 inputs (natural sub-block order);
 *        Q6_K decode: int32 [n / 4] = -32 * (sum of the 4 q of each lane), 16 per 64 inputs;
 *        Q6_K prefill: int32 [n / 16] = -32 * (sum of the 16 q).
 * Prefill rows are padded to a multiple of RT with zero rows. */

typedef struct xgeom {
    slate_dtype dt;       /* the weights' format */
    bool prefill, k4, k5; /* k4: Q4_K or Q5_K (Q4_K's x layout, else Q6_K's); k5: Q5_K */
    int64_t n, ng;
    size_t stride, off_d, off_c, used; /* used: bytes of a row before its padding to 64 */
} xgeom;

static xgeom geom(const slate__wmat *w, int64_t n_rows) {
    xgeom g;
    g.dt = w->dtype;
    g.prefill = n_rows >= PREFILL_MIN_ROWS;
    g.k5 = w->dtype == SLATE_DTYPE_Q5_K;
    g.k4 = w->dtype == SLATE_DTYPE_Q4_K || g.k5;
    g.n = w->n_in;
    g.ng = g.n / GROUP;
    size_t n = (size_t)g.n;
    if (w->dtype == SLATE_DTYPE_IQ4_XS) {
        /* avx512_vnni.c's Q4 B=32 symmetric x (its geom, for n a multiple of 128): decode int32
         * -8 * (lane sums) per group at n, then d; prefill d, then int32 -8 * S per 32 */
        if (g.prefill) {
            g.off_d = n;
            g.off_c = n + 4 * (size_t)g.ng;
            g.used = g.off_c + n / 8;
        } else {
            g.off_c = n;
            g.off_d = n + 64 * (size_t)g.ng;
            g.used = g.off_d + 4 * (size_t)g.ng;
        }
        g.stride = (g.used + 63) & ~(size_t)63;
        return g;
    }
    g.off_d = n;
    g.off_c = n + 4 * (size_t)g.ng;
    g.used = g.off_c + (g.k4 ? (g.prefill ? n / 8 : n / 4) : g.prefill ? n / 4 : n);
    g.stride = (g.used + 63) & ~(size_t)63;
    return g;
}

static slate__xq_plan xq_plan(const slate__wmat *w, int64_t n_rows) {
    xgeom g = geom(w, n_rows);
    slate__xq_plan p;
    int64_t rows = g.prefill ? (n_rows + RT - 1) / RT * RT : n_rows;
    p.bytes = (size_t)rows * g.stride;
    p.row_align = g.prefill ? RT : 1;
    /* 0x4B ('K'): none of avx512_vnni.c's (1..3 << 24) or avx512_vbmi.c's (0x50 << 24). Q5_K
     * takes Q4_K's x as it is, Q3_K and Q2_K take Q6_K's, so each names that layout (one xq
     * for a mix of Q4_K and Q5_K, or of Q6_K, Q3_K and Q2_K). */
    slate_dtype xdt = g.k4 ? SLATE_DTYPE_Q4_K : SLATE_DTYPE_Q6_K;
    p.layout = 0x4Bu << 24 | (uint32_t)xdt << 4 | (uint32_t)g.prefill;
    return p;
}

/* ---- quantizing x -------------------------------------------------------------------------- */

/* Q4_K decode order: the 16-input slice t of a group's stored q holds inputs 16 * src[t].. */
static const int q4k_src[8] = {0, 1, 4, 5, 2, 3, 6, 7};

static void quantize_x(void *xq, const float *x, const slate__wmat *w, int64_t n_rows, int64_t r0,
                       int64_t r1) {
    xgeom g = geom(w, n_rows);
    bool perm = g.k4 && !g.prefill;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * g.n;
        uint8_t *row = (uint8_t *)xq + (size_t)r * g.stride;
        int8_t *q = (int8_t *)row;
        float *d = (float *)(row + g.off_d);
        float *cf = (float *)(row + g.off_c);
        int32_t *ci = (int32_t *)(row + g.off_c);
        for (int64_t gi = 0; gi < g.ng; gi++) {
            const float *xg = xr + gi * GROUP;
            __m512 v[8], mx = _mm512_setzero_ps();
            UNROLL for (int t = 0; t < 8; t++) {
                v[t] = _mm512_loadu_ps(xg + 16 * t);
                mx = _mm512_max_ps(mx, _mm512_abs_ps(v[t]));
            }
            float amax = _mm512_reduce_max_ps(mx);
            /* d = amax / 127 is stored; scaling by 127 / amax rounds |x| / d to at most 127 */
            float dx = amax / 127.0f;
            d[gi] = dx;
            __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
            int32_t s16[8];
            UNROLL for (int t = 0; t < 8; t++) {
                __m512i iv = _mm512_cvtps_epi32(_mm512_mul_ps(v[t], id)); /* nearest even */
                s16[t] = _mm512_reduce_add_epi32(iv);
                int pos = perm ? q4k_src[t] : t; /* slice t goes to position pos */
                _mm_storeu_si128((__m128i *)(q + gi * GROUP + 16 * pos), _mm512_cvtsepi32_epi8(iv));
            }
            if (g.k4 && g.prefill) {
                for (int j = 0; j < 4; j++) cf[4 * gi + j] = dx * (float)(s16[2 * j] + s16[2 * j + 1]);
            } else if (g.k4) { /* lanes of q4k_scales' minimums: j = 4 (gi % 2) + l at 8 (gi % 2) + 4 + l */
                float *c16 = cf + 16 * (gi / 2) + 8 * (gi % 2);
                for (int l = 0; l < 4; l++) {
                    c16[l] = 0.0f;
                    c16[4 + l] = dx * (float)(s16[2 * l] + s16[2 * l + 1]);
                }
            } else if (g.prefill) {
                for (int t = 0; t < 8; t++) ci[8 * gi + t] = -32 * s16[t];
            } else { /* per lane: -32 * (sum of its 4 q), 16 lanes per 64 inputs */
                for (int h = 0; h < 2; h++) {
                    __m512i qv = _mm512_loadu_si512((const void *)(q + gi * GROUP + 64 * h));
                    __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), qv);
                    _mm512_storeu_si512((void *)(ci + 32 * gi + 16 * h), _mm512_mullo_epi32(s, _mm512_set1_epi32(-32)));
                }
            }
        }
        memset(row + g.used, 0, g.stride - g.used); /* the same bytes for the same x */
    }
    if (g.prefill && r1 == n_rows) { /* zero rows up to the tile size */
        int64_t pad = (n_rows + RT - 1) / RT * RT;
        memset((uint8_t *)xq + (size_t)n_rows * g.stride, 0, (size_t)(pad - n_rows) * g.stride);
    }
}

/* ---- decode -------------------------------------------------------------------------------- */

INLINE float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

/* The scales and minimums of a Q4_K super-block from its 12 scale bytes at s
 * (slate__q4k_scale_min, in vector lanes), as bytes [sc 0-3, m 0-3, sc 4-7, m 4-7]. With u0,
 * u1, u2 the scale bytes as dwords, byte-wise: sc 0-3 = u0 & 63, m 0-3 = u1 & 63,
 * sc 4-7 = u2 & 15 | (u0 >> 6) << 4, m 4-7 = (u2 >> 4) & 15 | (u1 >> 6) << 4. Loads and
 * broadcast loads, no shuffle (port 5 is the decode loop's bottleneck, with port 0). */
INLINE __m128i q4k_scales(const uint8_t *s) {
    uint32_t u2;
    uint64_t u01;
    memcpy(&u2, s + 8, 4);
    memcpy(&u01, s, 8);
    /* [u0, u1, u2, u2 >> 4]: the low parts */
    __m128i a = _mm_blend_epi32(_mm_loadu_si128((const __m128i *)s), _mm_set1_epi32((int)u2), 8);
    a = _mm_srlv_epi32(a, _mm_set_epi32(4, 0, 0, 0));
    /* [u0, u1, u0, u1] >> 2: bits 6-7 of each byte at 4-5 */
    __m128i b = _mm_srli_epi32(_mm_set1_epi64x((long long)u01), 2);
    const __m128i lowm = _mm_set_epi32(0x0f0f0f0f, 0x0f0f0f0f, 0x3f3f3f3f, 0x3f3f3f3f);
    /* (a & lowm) | (b & ~lowm), then bits 6-7 of every byte cleared */
    return _mm_and_si128(_mm_ternarylogic_epi32(a, b, lowm, 0xE4), _mm_set1_epi8(0x3f));
}

/* vpshufb indices that put each word of vpackssdw(a, b) for group h its sub-block's scale byte,
 * in the word's high byte (the low byte 0: the word is 256 * scale, which keeps the scale's sign
 * without a widening; d is divided by 256 to match, exactly). Word w of 128-bit chunk k holds
 * lane 4k + w % 4 of a (w < 4) or of b. Q4_K: a = low nibbles (lanes 0-7 sub-block 4h, 8-15
 * 4h + 2), b = high (4h + 1, 4h + 3), sc_j at byte j (j < 4) or j + 4 of q4k_scales; Q6_K: a =
 * inputs 0-63 of the group (scale 8h + k), b = 64-127 (8h + 4 + k). Every 128-bit chunk of the
 * source holds all 16 scale bytes. */
INLINE __m512i scale_index(bool k4, int h) {
    uint8_t ix[64];
    for (int i = 0; i < 32; i++) {
        int k = i / 8, hi = i % 8 >= 4;
        int j = 4 * h + (k >= 2 ? 2 : 0) + hi;
        ix[2 * i] = 0x80;
        ix[2 * i + 1] = (uint8_t)(k4 ? (j < 4 ? j : j + 4) : 8 * h + 4 * hi + k);
    }
    return _mm512_loadu_si512((const void *)ix);
}

typedef struct kidx {
    __m512i s[2];
} kidx;

/* R rows of x against Q4_K (k5: Q5_K) weight rows o..o+O-1. Q5_K's fifth bits: the 32 bytes
 * of qh in both halves of a zmm (u; bit j of byte l for element 32 j + l), shifted right by 4
 * for group 1, so that bits 0-3 of u are those of sub-blocks 4h..4h+3; a word-wise shift left
 * by 4, 2 (low nibbles: sub-blocks 4h, 4h + 2 in bytes 0-31, 32-63) or 3, 1 (high nibbles) puts
 * each byte's bit at bit 4 (no bit crosses into bit 4 of the word's other byte), which one
 * vpternlog ORs into the code: 16 when set. */
INLINE void dec_q4k(bool k5, int R, int O, float *y, const uint8_t *xq, const xgeom *xg,
                    const slate__wmat *w, const float *bias, int64_t o, const kidx *ix) {
    const int64_t nsb = w->n_in / SB;
    const size_t pf = PF_ROWS * (size_t)O * w->row_bytes;
    const size_t bbytes = k5 ? Q5K_BYTES : Q4K_BYTES, qoff = k5 ? 48 : 16;
    const __m512i lo4 = _mm512_set1_epi8(15), m10 = _mm512_set1_epi8(0x10);
    /* words 0-15 (bytes 0-31) then 16-31 (bytes 32-63) */
    const __m512i shl_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shl_hi = _mm512_inserti64x4(_mm512_set1_epi16(3), _mm256_set1_epi16(1), 1);
    const uint8_t *wr[2];
    UNROLL for (int c = 0; c < O; c++) wr[c] = (const uint8_t *)w->data + (size_t)(o + c) * w->row_bytes;
    __m512 acc[3][2], accm[3][2];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++)
        acc[r][c] = accm[r][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        __m512i lo[2][2], hi[2][2], sw[2][2];
        __m512 mf[2], dv[2];
        UNROLL for (int c = 0; c < O; c++) {
            const uint8_t *p = wr[c] + b * bbytes;
            _mm_prefetch((const char *)(p + pf), SLATE_PF_STREAM);
            _mm_prefetch((const char *)(p + pf + 64), SLATE_PF_STREAM);
            _mm_prefetch((const char *)(p + pf + 128), SLATE_PF_STREAM);
            uint32_t h2;
            memcpy(&h2, p, 4);
            __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)h2)); /* d, dmin */
            dv[c] = _mm512_broadcastss_ps(_mm_mul_ss(dm, _mm_set_ss(1.0f / 256))); /* scale_index */
            __m128i sm = q4k_scales(p + 4);
            __m512i s4 = _mm512_broadcast_i32x4(sm);
            sw[c][0] = _mm512_shuffle_epi8(s4, ix->s[0]);
            sw[c][1] = _mm512_shuffle_epi8(s4, ix->s[1]);
            /* m_j * dmin (the f32 product ref computes) in the lanes of the m bytes */
            mf[c] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sm)),
                                  _mm512_permutexvar_ps(_mm512_set1_epi32(1), _mm512_castps128_ps512(dm)));
            __m512i u = _mm512_setzero_si512();
            if (k5) u = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)));
            UNROLL for (int h = 0; h < 2; h++) {
                __m512i qs = _mm512_loadu_si512((const void *)(p + qoff + 64 * h));
                lo[c][h] = _mm512_and_si512(qs, lo4);
                hi[c][h] = _mm512_and_si512(_mm512_srli_epi16(qs, 4), lo4);
                if (k5) { /* A | (B & C) */
                    if (h) u = _mm512_srli_epi16(u, 4);
                    lo[c][h] = _mm512_ternarylogic_epi32(lo[c][h], _mm512_sllv_epi16(u, shl_lo), m10, 0xF8);
                    hi[c][h] = _mm512_ternarylogic_epi32(hi[c][h], _mm512_sllv_epi16(u, shl_hi), m10, 0xF8);
                }
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            const uint8_t *xr = xq + (size_t)r * xg->stride;
            const float *dx = (const float *)(xr + xg->off_d) + 2 * b;
            __m512 sf = _mm512_loadu_ps((const float *)(xr + xg->off_c) + 16 * b);
            __m512i xv[2][2];
            UNROLL for (int h = 0; h < 2; h++) {
                xv[h][0] = _mm512_loadu_si512((const void *)(xr + b * SB + GROUP * h));
                xv[h][1] = _mm512_loadu_si512((const void *)(xr + b * SB + GROUP * h + 64));
            }
            UNROLL for (int c = 0; c < O; c++) {
                __m512 t[2];
                UNROLL for (int h = 0; h < 2; h++) {
                    __m512i a = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[c][h], xv[h][0]);
                    __m512i e = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi[c][h], xv[h][1]);
                    t[h] = _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_packs_epi32(a, e), sw[c][h]));
                }
                /* dx from memory (a broadcast operand), d once per super-block */
                __m512 u = _mm512_fmadd_ps(t[1], _mm512_set1_ps(dx[1]), _mm512_mul_ps(t[0], _mm512_set1_ps(dx[0])));
                acc[r][c] = _mm512_fmadd_ps(u, dv[c], acc[r][c]);
                accm[r][c] = _mm512_fmadd_ps(mf[c], sf, accm[r][c]);
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++)
        y[r * w->n_out + o + c] = hsum(acc[r][c]) - hsum(accm[r][c]) + (bias ? bias[o + c] : 0.0f);
}

/* The 16 scales of a Q3_K super-block from its 12 scale bytes at s (slate__q3k_scale), as int8
 * sc_s - 32 in byte s. With u0, u1, u2 the scale bytes as dwords, byte-wise, dword k (scales
 * 4k..4k+3) is (u0, u1, u0 >> 4, u1 >> 4)[k] & 15 with bits 2k, 2k+1 of u2 at bits 4-5. Reads
 * the 12 bytes only: the next block (2-byte aligned) or the row's end follows them. */
INLINE __m128i q3k_scales(const uint8_t *s) {
    uint64_t u01;
    uint32_t u2;
    memcpy(&u01, s, 8);
    memcpy(&u2, s + 8, 4);
    __m128i a = _mm_srlv_epi32(_mm_set1_epi64x((long long)u01), _mm_set_epi32(4, 4, 0, 0));
    __m128i b = _mm_slli_epi32(_mm_srlv_epi32(_mm_set1_epi32((int)u2), _mm_set_epi32(6, 4, 2, 0)), 4);
    /* (a & 0x0f) | (b & 0xf0), bits 6-7 cleared, minus 32 */
    __m128i v = _mm_ternarylogic_epi32(a, b, _mm_set1_epi8(0x0f), 0xE4);
    return _mm_sub_epi8(_mm_and_si128(v, _mm_set1_epi8(0x3f)), _mm_set1_epi8(32));
}

/* Words: a in the low 256 bits, b in the high 256 (per-half word shift counts). */
INLINE __m512i halves16(short a, short b) {
    return _mm512_inserti64x4(_mm512_set1_epi16(a), _mm256_set1_epi16(b), 1);
}

/* R rows of x against Q6_K, Q3_K or Q2_K (dt) weight rows o..o+O-1: groups of 16 with one
 * scale each, the same element order, Q6_K's x (the -32 * lane sums). The u8 codes per group h
 * of 128 inputs: lo[c][h] those of inputs 0-63, hi[c][h] of 64-127, in natural order:
 *   Q6_K  code 0..63 (its value's code - 32): the -32 comes from the x sums;
 *   Q3_K  8 (code + 4), 0..56: with the -32 x sums the lane is 8 * sum of code * x (d / 8 to
 *         match, exactly). The low 2 bits of group g (qs[32 h + l] >> 2g) at bits 3-4 and
 *         hmask bit 4h + g at bit 5: qs and hm broadcast into both halves of a zmm (g = 0, 1
 *         for lo, 2, 3 for hi), each half shifted word-wise by its own count (q3sh, hmsh);
 *   Q2_K  code 0..3, the same 2-bit positions (q2sh, then & 3); the scale byte sc | m << 4
 *         of each word's group in its low byte (ixq2): sc = word & 15 and m = word >> 4 are
 *         the scale words (d multiplies the sum; not 256 sc as the others, so d / 256 is d)
 *         and the minimum words, against the x sums (-32 S per 4 inputs) with vpmaddwd, so
 *         dmin / 32 multiplies the minimum term.
 * Every int16 word of vpackssdw fits: a lane's 4 products are at most 4 * 32 * 127 = 16256 in
 * magnitude (Q6_K's code - 32 and Q3_K's 8 code are in -32..31 and -32..24; Q2_K's 4 * 3 * 127),
 * as are the x sums (4 * 32 * 127); vpmaddwd's pair is then at most 2 * 16256 * 32768 < 2^31
 * (the scale word 256 sc: Q6_K's -128..127, Q3_K's -32..31; Q2_K's sc and m 0..15). */
INLINE void dec_k16(slate_dtype dt, int R, int O, float *y, const uint8_t *xq, const xgeom *xg,
                    const slate__wmat *w, const float *bias, int64_t o, const kidx *ix) {
    const bool q6 = dt == SLATE_DTYPE_Q6_K, q3 = dt == SLATE_DTYPE_Q3_K, q2 = dt == SLATE_DTYPE_Q2_K;
    const int64_t nsb = w->n_in / SB;
    const size_t bbytes = q6 ? Q6K_BYTES : q3 ? Q3K_BYTES : Q2K_BYTES;
    const size_t pf = PF_ROWS * (size_t)O * w->row_bytes;
    const __m512i m0f = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const __m512i m03 = _mm512_set1_epi8(0x03), m18 = _mm512_set1_epi8(0x18), m38 = _mm512_set1_epi8(0x38);
    const __m512i m000f = _mm512_set1_epi16(0x0f);
    /* word shifts of the low 256 bits / the high 256 bits of a broadcast 32 bytes of qs:
     * Q2_K's 2-bit codes to bits 0-1 (then & 3): lo [>> 0, >> 2], hi [>> 4, >> 6]; Q3_K's to
     * bits 3-4: lo [<< 3, << 1], hi [>> 1, >> 3] */
    const __m512i q2sh[2] = {halves16(0, 2), halves16(4, 6)};
    const __m512i q3sh[2] = {halves16(3, 1), halves16(1, 3)};
    /* Q3_K's hmask bit 4h + g to bit 5: h = 0 lo [<< 5, << 4], hi [<< 3, << 2]; h = 1 lo
     * [<< 1, << 0], hi [>> 1, >> 2] */
    const __m512i hmsh[2][2] = {{halves16(5, 4), halves16(3, 2)}, {halves16(1, 0), halves16(1, 2)}};
    /* scale_index's bytes moved to the words' low bytes */
    const __m512i ixq2[2] = {_mm512_or_si512(_mm512_srli_epi16(ix->s[0], 8), _mm512_set1_epi16((short)0x8000)),
                             _mm512_or_si512(_mm512_srli_epi16(ix->s[1], 8), _mm512_set1_epi16((short)0x8000))};
    const uint8_t *wr[2];
    UNROLL for (int c = 0; c < O; c++) wr[c] = (const uint8_t *)w->data + (size_t)(o + c) * w->row_bytes;
    __m512 acc[3][2], accm[3][2];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++)
        acc[r][c] = accm[r][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        __m512i lo[2][2], hi[2][2], sw[2][2], mw[2][2];
        __m512 dv[2], mv[2];
        UNROLL for (int c = 0; c < O; c++) {
            const uint8_t *p = wr[c] + b * bbytes;
            /* Q6_K: 4 lines from its first byte; Q3_K, Q2_K: the lines of the first, 65th and
             * last byte */
            _mm_prefetch((const char *)(p + pf), SLATE_PF_STREAM);
            _mm_prefetch((const char *)(p + pf + 64), SLATE_PF_STREAM);
            if (q6) {
                _mm_prefetch((const char *)(p + pf + 128), SLATE_PF_STREAM);
                _mm_prefetch((const char *)(p + pf + 192), SLATE_PF_STREAM);
            } else {
                _mm_prefetch((const char *)(p + pf + bbytes - 1), SLATE_PF_STREAM);
            }
            if (q6) {
                uint16_t hd;
                memcpy(&hd, p + 208, 2);
                /* d / 256: see scale_index */
                dv[c] = _mm512_broadcastss_ps(_mm_mul_ss(_mm_cvtph_ps(_mm_cvtsi32_si128(hd)), _mm_set_ss(1.0f / 256)));
                __m512i s4 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(p + 192)));
                UNROLL for (int h = 0; h < 2; h++) {
                    __m512i ql = _mm512_loadu_si512((const void *)(p + 64 * h));
                    __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
                    /* [qh, qh >> 2]: bits 0-1 and 4-5 of each byte are the high bits of the
                     * codes of groups 0, 2 (low half) and 1, 3 (high half) of this 128 */
                    __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
                    /* A | (B & C) */
                    lo[c][h] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m0f),
                                                         _mm512_slli_epi16(qh2, 4), m30, 0xF8);
                    hi[c][h] = _mm512_ternarylogic_epi32(
                        _mm512_and_si512(_mm512_srli_epi16(ql, 4), m0f), qh2, m30, 0xF8);
                    sw[c][h] = _mm512_shuffle_epi8(s4, ix->s[h]);
                }
            } else if (q3) {
                uint16_t hd;
                memcpy(&hd, p + 108, 2);
                /* d / 256 (scale_index) / 8 (the codes are 8 (code + 4)) */
                dv[c] = _mm512_broadcastss_ps(_mm_mul_ss(_mm_cvtph_ps(_mm_cvtsi32_si128(hd)), _mm_set_ss(1.0f / 2048)));
                __m512i s4 = _mm512_broadcast_i32x4(q3k_scales(p + 96));
                /* hmask and qs broadcast into both halves (loads, no shuffle), then word shifts
                 * by half (q3sh): no bit crosses between the bytes of a word into the masks */
                __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
                UNROLL for (int h = 0; h < 2; h++) {
                    __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 32 + 32 * h)));
                    /* (C ? A : B) & 0x38: the low bits at 3-4, the hmask bit at 5 */
                    lo[c][h] = _mm512_and_si512(
                        _mm512_ternarylogic_epi32(_mm512_sllv_epi16(q, q3sh[0]), _mm512_sllv_epi16(hm, hmsh[h][0]), m18, 0xE4), m38);
                    hi[c][h] = _mm512_and_si512(
                        _mm512_ternarylogic_epi32(_mm512_srlv_epi16(q, q3sh[1]), (h ? _mm512_srlv_epi16(hm, hmsh[h][1]) : _mm512_sllv_epi16(hm, hmsh[h][1])), m18, 0xE4), m38);
                    sw[c][h] = _mm512_shuffle_epi8(s4, ix->s[h]);
                }
            } else {
                uint32_t h2;
                memcpy(&h2, p + 80, 4);
                __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)h2)); /* d, dmin */
                dv[c] = _mm512_broadcastss_ps(dm);
                /* -dmin m S = dmin / 32 * m (-32 S) */
                mv[c] = _mm512_permutexvar_ps(_mm512_set1_epi32(1), _mm512_castps128_ps512(
                                                  _mm_mul_ps(dm, _mm_set1_ps(1.0f / 32))));
                /* the 16 scale bytes in every 128-bit chunk (a load); ixq2 puts byte sc | m << 4
                 * in a word's low byte, so its low nibble is sc and the word >> 4 is m */
                __m512i s4 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p));
                UNROLL for (int h = 0; h < 2; h++) {
                    __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16 + 32 * h)));
                    lo[c][h] = _mm512_and_si512(_mm512_srlv_epi16(q, q2sh[0]), m03);
                    hi[c][h] = _mm512_and_si512(_mm512_srlv_epi16(q, q2sh[1]), m03);
                    __m512i sm = _mm512_shuffle_epi8(s4, ixq2[h]);
                    sw[c][h] = _mm512_and_si512(sm, m000f);
                    mw[c][h] = _mm512_srli_epi16(sm, 4);
                }
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            const uint8_t *xr = xq + (size_t)r * xg->stride;
            const float *dx = (const float *)(xr + xg->off_d) + 2 * b;
            __m512 t[2][2], tm[2][2];
            UNROLL for (int h = 0; h < 2; h++) {
                int64_t i0 = b * SB + GROUP * h;
                __m512i xlo = _mm512_loadu_si512((const void *)(xr + i0));
                __m512i xhi = _mm512_loadu_si512((const void *)(xr + i0 + 64));
                __m512i ilo = _mm512_loadu_si512((const void *)(xr + xg->off_c + i0));
                __m512i ihi = _mm512_loadu_si512((const void *)(xr + xg->off_c + i0 + 64));
                /* Q2_K: the x sums in the words of vpackssdw(a, e) */
                __m512i xs = q2 ? _mm512_packs_epi32(ilo, ihi) : _mm512_setzero_si512();
                UNROLL for (int c = 0; c < O; c++) {
                    __m512i a = _mm512_dpbusd_epi32(q2 ? _mm512_setzero_si512() : ilo, lo[c][h], xlo);
                    __m512i e = _mm512_dpbusd_epi32(q2 ? _mm512_setzero_si512() : ihi, hi[c][h], xhi);
                    t[c][h] = _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_packs_epi32(a, e), sw[c][h]));
                    if (q2) tm[c][h] = _mm512_cvtepi32_ps(_mm512_madd_epi16(xs, mw[c][h]));
                }
            }
            /* dx from memory (a broadcast operand), d (dmin) once per super-block */
            UNROLL for (int c = 0; c < O; c++) {
                acc[r][c] = _mm512_fmadd_ps(_mm512_fmadd_ps(t[c][1], _mm512_set1_ps(dx[1]), _mm512_mul_ps(t[c][0], _mm512_set1_ps(dx[0]))),
                                            dv[c], acc[r][c]);
                if (q2)
                    accm[r][c] = _mm512_fmadd_ps(_mm512_fmadd_ps(tm[c][1], _mm512_set1_ps(dx[1]), _mm512_mul_ps(tm[c][0], _mm512_set1_ps(dx[0]))),
                                                 mv[c], accm[r][c]);
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++)
        y[r * w->n_out + o + c] = hsum(acc[r][c]) + (q2 ? hsum(accm[r][c]) : 0.0f) + (bias ? bias[o + c] : 0.0f);
}

/* IQ4_NL's levels plus 128 (1..241) in every 128-bit lane: vpshufb by nibble gives L + 128. */
INLINE __m512i iq4_levels_u8(void) {
    __m128i l = _mm_loadu_si128((const __m128i *)slate__iq4_levels);
    return _mm512_broadcast_i32x4(_mm_xor_si128(l, _mm_set1_epi8((char)0x80)));
}

/* The 8 sub-block scales of the IQ4_XS super-block at p as f32 d (ls_j - 32) in lane j (the
 * product ref computes). Lane j: ls_j's low 4 bits are scales_l (bytes 4-7) >> 4 j, its high 2
 * bits are scales_h (bytes 2-3) >> 2 j, taken to bits 4-5 as (scales_h << 4) >> 2 j (the
 * dword at byte 2 also holds scales_l[0..1] above bit 15, which no shift by 2 j <= 14 brings
 * down to bit 5). */
INLINE __m256 iq4xs_scales(const uint8_t *p) {
    uint32_t sl, sh;
    uint16_t hd;
    memcpy(&hd, p, 2);
    memcpy(&sh, p + 2, 4);
    memcpy(&sl, p + 4, 4);
    __m256i a = _mm256_srlv_epi32(_mm256_set1_epi32((int)sl),
                                  _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    __m256i b = _mm256_srlv_epi32(_mm256_set1_epi32((int)(sh << 4)),
                                  _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    /* (a & 0x0f) | (b & ~0x0f), bits 6 and up cleared, minus 32 */
    __m256i v = _mm256_ternarylogic_epi32(a, b, _mm256_set1_epi32(0x0f), 0xE4);
    v = _mm256_sub_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x3f)), _mm256_set1_epi32(32));
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(hd)), _mm256_cvtepi32_ps(v));
}

/* R rows of x against IQ4_XS weight rows o..o+O-1 (see IQ4_XS above). Per super-block b and
 * group h (sub-blocks 4h..4h+3): lane l of both vectors belongs to sub-block 4h + l / 4, so
 * its scale is lane 4h + l / 4 of iq4xs_scales (one vpermps per group). */
INLINE void dec_iq4xs(int R, int O, float *y, const uint8_t *xq, const xgeom *xg,
                      const slate__wmat *w, const float *bias, int64_t o, __m512i lv) {
    const int64_t nsb = w->n_in / SB;
    const size_t pf = PF_ROWS * (size_t)O * w->row_bytes;
    const __m512i lo4 = _mm512_set1_epi8(15);
    const __m512i sx[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                           _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
    const uint8_t *wr[2];
    UNROLL for (int c = 0; c < O; c++) wr[c] = (const uint8_t *)w->data + (size_t)(o + c) * w->row_bytes;
    __m512 acc[3][2];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        __m512i lo[2][2], hi[2][2];
        __m512 sv[2][2];
        UNROLL for (int c = 0; c < O; c++) {
            const uint8_t *p = wr[c] + b * IQ4XS_BYTES;
            /* 136 bytes from an 8-aligned start: the lines of bytes 0, 64 and 128 hold them */
            _mm_prefetch((const char *)(p + pf), SLATE_PF_STREAM);
            _mm_prefetch((const char *)(p + pf + 64), SLATE_PF_STREAM);
            _mm_prefetch((const char *)(p + pf + 128), SLATE_PF_STREAM);
            __m512 s8 = _mm512_castps256_ps512(iq4xs_scales(p));
            UNROLL for (int h = 0; h < 2; h++) {
                __m512i qs = _mm512_loadu_si512((const void *)(p + 8 + 64 * h));
                lo[c][h] = _mm512_shuffle_epi8(lv, _mm512_and_si512(qs, lo4));
                hi[c][h] = _mm512_shuffle_epi8(lv, _mm512_and_si512(_mm512_srli_epi16(qs, 4), lo4));
                sv[c][h] = _mm512_permutexvar_ps(sx[h], s8);
            }
        }
        UNROLL for (int r = 0; r < R; r++) {
            const uint8_t *xr = xq + (size_t)r * xg->stride;
            const float *dx = (const float *)(xr + xg->off_d) + 2 * b;
            UNROLL for (int h = 0; h < 2; h++) {
                int64_t g = 2 * b + h;
                __m512i xlo = _mm512_loadu_si512((const void *)(xr + GROUP * g));
                __m512i xhi = _mm512_loadu_si512((const void *)(xr + GROUP * g + 64));
                /* -128 * sum(qx): 16 times the stored -8 * (lane sums) */
                __m512i init =
                    _mm512_slli_epi32(_mm512_loadu_si512((const void *)(xr + xg->off_c + 64 * g)), 4);
                UNROLL for (int c = 0; c < O; c++) {
                    __m512i a = _mm512_dpbusd_epi32(init, lo[c][h], xlo);
                    a = _mm512_dpbusd_epi32(a, hi[c][h], xhi);
                    __m512 s = _mm512_mul_ps(sv[c][h], _mm512_set1_ps(dx[h]));
                    acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), s, acc[r][c]);
                }
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int c = 0; c < O; c++)
        y[r * w->n_out + o + c] = hsum(acc[r][c]) + (bias ? bias[o + c] : 0.0f);
}

/* All of [o0, o1) for R rows: one x row, one weight row at a time (a single stream per thread);
 * 2 or 3 x rows, two weight rows at a time so each x chunk serves both, then a single one. */
INLINE void decode_range(slate_dtype dt, int R, float *y, const uint8_t *xq, const xgeom *xg,
                         const slate__wmat *w, const float *bias, int64_t o0, int64_t o1) {
    const bool k4 = dt == SLATE_DTYPE_Q4_K || dt == SLATE_DTYPE_Q5_K, k5 = dt == SLATE_DTYPE_Q5_K;
    kidx ix;
    ix.s[0] = scale_index(k4, 0);
    ix.s[1] = scale_index(k4, 1);
    int64_t o = o0;
    if (dt == SLATE_DTYPE_IQ4_XS) {
        __m512i lv = iq4_levels_u8();
        if (R > 1)
            for (; o + 2 <= o1; o += 2) dec_iq4xs(R, 2, y, xq, xg, w, bias, o, lv);
        for (; o < o1; o++) dec_iq4xs(R, 1, y, xq, xg, w, bias, o, lv);
    } else if (k4) {
        if (R > 1)
            for (; o + 2 <= o1; o += 2) dec_q4k(k5, R, 2, y, xq, xg, w, bias, o, &ix);
        for (; o < o1; o++) dec_q4k(k5, R, 1, y, xq, xg, w, bias, o, &ix);
    } else {
        if (R > 1)
            for (; o + 2 <= o1; o += 2) dec_k16(dt, R, 2, y, xq, xg, w, bias, o, &ix);
        for (; o < o1; o++) dec_k16(dt, R, 1, y, xq, xg, w, bias, o, &ix);
    }
}

/* R as a constant in each call */
INLINE void decode_rows(slate_dtype dt, int R, float *y, const uint8_t *xq, const xgeom *xg,
                        const slate__wmat *w, const float *bias, int64_t o0, int64_t o1) {
    if (R == 3) decode_range(dt, 3, y, xq, xg, w, bias, o0, o1);
    else if (R == 2) decode_range(dt, 2, y, xq, xg, w, bias, o0, o1);
    else decode_range(dt, 1, y, xq, xg, w, bias, o0, o1);
}

static void matmul_decode(float *y, const void *xq, const slate__wmat *w, const float *bias,
                          int64_t n_rows, int64_t o0, int64_t o1, const xgeom *xg) {
    for (int64_t r = 0; r < n_rows;) {
        const uint8_t *xr = (const uint8_t *)xq + (size_t)r * xg->stride;
        float *yr = y + r * w->n_out;
        int R = n_rows - r >= 3 ? 3 : (int)(n_rows - r);
        /* the format as a constant in each call */
        switch ((int)xg->dt) {
        case SLATE_DTYPE_Q4_K: decode_rows(SLATE_DTYPE_Q4_K, R, yr, xr, xg, w, bias, o0, o1); break;
        case SLATE_DTYPE_Q5_K: decode_rows(SLATE_DTYPE_Q5_K, R, yr, xr, xg, w, bias, o0, o1); break;
        case SLATE_DTYPE_Q6_K: decode_rows(SLATE_DTYPE_Q6_K, R, yr, xr, xg, w, bias, o0, o1); break;
        case SLATE_DTYPE_Q3_K: decode_rows(SLATE_DTYPE_Q3_K, R, yr, xr, xg, w, bias, o0, o1); break;
        case SLATE_DTYPE_IQ4_XS: decode_rows(SLATE_DTYPE_IQ4_XS, R, yr, xr, xg, w, bias, o0, o1); break;
        default: decode_rows(SLATE_DTYPE_Q2_K, R, yr, xr, xg, w, bias, o0, o1); break;
        }
        r += R;
    }
}

/* ---- prefill -------------------------------------------------------------------------------
 * Columns [c0, c0 + 32) x inputs [kb, ke) of the weights are unpacked into u8 wp[k/4][32][4]
 * (the codes), 16 inputs x 16 columns at a time: each column's 16 codes are decoded into an
 * xmm, then a 16 x 4 dword transpose writes 4 zmm rows (avx512_vnni.c's pack16x16). Scales per
 * chunk (CH inputs) and column go to ds (and the minimums, Q4_K, Q5_K and Q2_K, to ms). Columns
 * past the matrix are zero. */

typedef struct tile {
    uint8_t wp[KC / 4][CT][4];
    float ds[KC / 16][CT]; /* per chunk (16 or 32 inputs) */
    float ms[KC / 16][CT]; /* Q4_K, Q5_K: the first KC / 32 */
    int32_t mp[KC / 32][CT]; /* Q2_K: minimums m of chunks 2p (low word), 2p + 1 (high word) */
    float dm[KC / SB][CT];   /* Q2_K: dmin per super-block */
} tile;

/* Inputs [k, k + 16) of a weight row as 16 u8 codes (k a multiple of 16): those of dec_q4k,
 * dec_k16 (Q3_K's 8 (code + 4)) and dec_iq4xs (L + 128). */
INLINE __m128i codes16(slate_dtype dt, const uint8_t *row, int64_t k) {
    const __m128i m0f = _mm_set1_epi8(15), m03 = _mm_set1_epi8(3);
    int e = (int)(k % SB);
    if (dt == SLATE_DTYPE_IQ4_XS) { /* sub-block e / 32: low nibbles, then high */
        const uint8_t *blk = row + (size_t)(k / SB) * IQ4XS_BYTES;
        __m128i b = _mm_loadu_si128((const __m128i *)(blk + 8 + 16 * (e / 32)));
        __m128i nib = _mm_and_si128(e % 32 >= 16 ? _mm_srli_epi16(b, 4) : b, m0f);
        return _mm_shuffle_epi8(_mm512_castsi512_si128(iq4_levels_u8()), nib);
    }
    if (dt == SLATE_DTYPE_Q5_K) { /* Q4_K's nibble plus 16 where bit j of qh[l] is set */
        const uint8_t *blk = row + (size_t)(k / SB) * Q5K_BYTES;
        int j = e / 32;
        __m128i b = _mm_loadu_si128((const __m128i *)(blk + 48 + 32 * (j / 2) + e % 32));
        __m128i qh = _mm_loadu_si128((const __m128i *)(blk + 16 + e % 32));
        __m128i fifth = _mm_and_si128(_mm_srl_epi16(qh, _mm_cvtsi32_si128(j)), _mm_set1_epi8(1));
        return _mm_or_si128(_mm_and_si128(j % 2 ? _mm_srli_epi16(b, 4) : b, m0f), _mm_slli_epi16(fifth, 4));
    }
    if (dt == SLATE_DTYPE_Q4_K) {
        const uint8_t *blk = row + (size_t)(k / SB) * Q4K_BYTES;
        int j = e / 32;
        __m128i b = _mm_loadu_si128((const __m128i *)(blk + 16 + 32 * (j / 2) + e % 32));
        return _mm_and_si128(j % 2 ? _mm_srli_epi16(b, 4) : b, m0f);
    }
    int n = e / 128, g = (e % 128) / 32, l = e % 32;
    if (dt == SLATE_DTYPE_Q3_K) { /* (low 2 bits | hmask bit 4n + g << 2) << 3 */
        const uint8_t *blk = row + (size_t)(k / SB) * Q3K_BYTES;
        __m128i q = _mm_loadu_si128((const __m128i *)(blk + 32 + 32 * n + l));
        __m128i hm = _mm_loadu_si128((const __m128i *)(blk + l));
        __m128i low = _mm_and_si128(_mm_srl_epi16(q, _mm_cvtsi32_si128(2 * g)), m03);
        __m128i hb = _mm_and_si128(_mm_srl_epi16(hm, _mm_cvtsi32_si128(4 * n + g)), _mm_set1_epi8(1));
        return _mm_slli_epi16(_mm_or_si128(low, _mm_slli_epi16(hb, 2)), 3);
    }
    if (dt == SLATE_DTYPE_Q2_K) {
        const uint8_t *blk = row + (size_t)(k / SB) * Q2K_BYTES;
        __m128i q = _mm_loadu_si128((const __m128i *)(blk + 16 + 32 * n + l));
        return _mm_and_si128(_mm_srl_epi16(q, _mm_cvtsi32_si128(2 * g)), m03);
    }
    const uint8_t *blk = row + (size_t)(k / SB) * Q6K_BYTES;
    __m128i ql = _mm_loadu_si128((const __m128i *)(blk + 64 * n + 32 * (g % 2) + l));
    __m128i qh = _mm_loadu_si128((const __m128i *)(blk + 128 + 32 * n + l));
    __m128i low = _mm_and_si128(g < 2 ? ql : _mm_srli_epi16(ql, 4), m0f);
    __m128i high = _mm_and_si128(_mm_srli_epi16(qh, 2 * g), _mm_set1_epi8(3));
    return _mm_or_si128(low, _mm_slli_epi16(high, 4));
}

/* Columns [c0, c0 + 16) (nc valid) x inputs [k, k + 16) into wp rows k/4 .. k/4 + 3 at column
 * offset co. */
INLINE void pack16x16(slate_dtype dt, tile *t, const uint8_t *const rows[16], int nc, int64_t k,
                      int64_t kb, int co) {
    __m512i a[4];
    UNROLL for (int m = 0; m < 4; m++) {
        __m128i v[4];
        UNROLL for (int i = 0; i < 4; i++)
            v[i] = 4 * m + i < nc ? codes16(dt, rows[4 * m + i], k) : _mm_setzero_si128();
        a[m] = vt_cols4(v);
    }
    vt_put16x16(t->wp + (k - kb) / 4, co, a);
}

static float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

INLINE void pack(slate_dtype dt, tile *t, const slate__wmat *w, int64_t c0, int nc, int64_t kb,
                 int64_t ke) {
    const bool k4 = dt == SLATE_DTYPE_Q4_K || dt == SLATE_DTYPE_Q5_K, iq = dt == SLATE_DTYPE_IQ4_XS;
    const size_t bbytes = dt == SLATE_DTYPE_Q4_K   ? Q4K_BYTES
                          : dt == SLATE_DTYPE_Q5_K ? Q5K_BYTES
                          : dt == SLATE_DTYPE_Q6_K ? Q6K_BYTES
                          : dt == SLATE_DTYPE_Q3_K ? Q3K_BYTES
                          : iq                     ? IQ4XS_BYTES
                                                   : Q2K_BYTES;
    for (int half = 0; half < 2; half++) {
        int co = 16 * half, n = nc - co < 0 ? 0 : nc - co > 16 ? 16 : nc - co;
        const uint8_t *rows[16];
        for (int c = 0; c < 16; c++)
            rows[c] = (const uint8_t *)w->data + (size_t)(c < n ? c0 + co + c : c0) * w->row_bytes;
        if (n == 16)
            for (int64_t k = kb; k < ke; k += 16) pack16x16(dt, t, rows, 16, k, kb, co);
        else
            for (int64_t k = kb; k < ke; k += 16) pack16x16(dt, t, rows, n, k, kb, co);
        /* per super-block and column: the f32 products ref computes (d sc, dmin m; Q3_K's d sc
         * / 8 for its codes 8 (code + 4), exactly; IQ4_XS's d (ls - 32)) */
        for (int64_t k = kb; k < ke; k += SB) {
            int64_t s = (k - kb) / (k4 || iq ? 32 : 16);
            for (int c = 0; c < 16; c++) {
                const uint8_t *blk = rows[c] + (size_t)(k / SB) * bbytes;
                if (iq) {
                    float d = c < n ? f16_at(blk) : 0.0f;
                    for (int j = 0; j < 8; j++)
                        t->ds[s + j][co + c] = d * (float)slate__iq4xs_scale(blk, j);
                } else if (k4) {
                    float d = c < n ? f16_at(blk) : 0.0f, dmin = c < n ? f16_at(blk + 2) : 0.0f;
                    for (int j = 0; j < 8; j++) {
                        int sc, m;
                        slate__q4k_scale_min(blk + 4, j, &sc, &m);
                        t->ds[s + j][co + c] = d * (float)sc;
                        t->ms[s + j][co + c] = -(dmin * (float)m);
                    }
                } else if (dt == SLATE_DTYPE_Q6_K) {
                    float d = c < n ? f16_at(blk + 208) : 0.0f;
                    for (int j = 0; j < 16; j++) t->ds[s + j][co + c] = d * (float)(int8_t)blk[192 + j];
                } else if (dt == SLATE_DTYPE_Q3_K) {
                    float d = c < n ? f16_at(blk + 108) : 0.0f;
                    for (int j = 0; j < 16; j++)
                        t->ds[s + j][co + c] = d * (float)slate__q3k_scale(blk + 96, j) * 0.125f;
                } else {
                    float d = c < n ? f16_at(blk + 80) : 0.0f, dmin = c < n ? f16_at(blk + 82) : 0.0f;
                    for (int j = 0; j < 16; j++) t->ds[s + j][co + c] = d * (float)(blk[j] & 15);
                    for (int j = 0; j < 8; j++)
                        t->mp[s / 2 + j][co + c] = c < n ? (int32_t)((uint32_t)(blk[2 * j] >> 4) |
                                                                     (uint32_t)(blk[2 * j + 1] >> 4) << 16)
                                                         : 0;
                    t->dm[(k - kb) / SB][co + c] = dmin;
                }
            }
        }
    }
}

/* Rows [r0, r0 + 4) x the 32 columns of t over [kb, ke): out[r][h] = sum over 128-input groups
 * of dx[r][g] * sum over the group's chunks of ds[chunk] * (int32 dot), plus for Q4_K, Q5_K
 * ms[chunk] * dx S[chunk] (Q2_K: dx dmin sum of mp's m times -S per group, in integers). Q6_K
 * and Q3_K start each chunk's dot at the stored -32 S, IQ4_XS at 16 times the stored -8 S. */
INLINE void tile_rows(slate_dtype dt, const tile *t, const uint8_t *xq, const xgeom *xg, int64_t r0,
                      int64_t kb, int64_t ke, __m512 out[PR][2]) {
    const bool k4 = dt == SLATE_DTYPE_Q4_K || dt == SLATE_DTYPE_Q5_K, q2 = dt == SLATE_DTYPE_Q2_K;
    const bool iq = dt == SLATE_DTYPE_IQ4_XS;
    const int64_t ch = k4 || iq ? 32 : 16;
    const uint8_t *xr[PR];
    UNROLL for (int r = 0; r < PR; r++) xr[r] = xq + (size_t)(r0 + r) * xg->stride;
    for (int64_t g0 = kb; g0 < ke; g0 += GROUP) {
        __m512 acc[PR][2];
        float dxs[PR];
        UNROLL for (int r = 0; r < PR; r++) {
            acc[r][0] = acc[r][1] = _mm512_setzero_ps();
            dxs[r] = ((const float *)(xr[r] + xg->off_d))[g0 / GROUP];
        }
        UNROLL for (int64_t k0 = g0; k0 < g0 + GROUP; k0 += ch) {
            int64_t ci = (k0 - kb) / ch, cg = k0 / ch;
            __m512i a[PR][2];
            UNROLL for (int r = 0; r < PR; r++) {
                int32_t cs = k4 || q2 ? 0 : ((const int32_t *)(xr[r] + xg->off_c))[cg];
                __m512i i0 = _mm512_set1_epi32(iq ? 16 * cs : cs);
                a[r][0] = a[r][1] = i0;
            }
            vt_dots(t->wp + (k0 - kb) / 4, ch, xr, k0, a);
            vt_scale_add(t->ds[ci], a, acc);
            if (k4) {
                __m512 m0 = _mm512_loadu_ps(t->ms[ci]), m1 = _mm512_loadu_ps(t->ms[ci] + 16);
                UNROLL for (int r = 0; r < PR; r++) {
                    /* dx S, stored */
                    __m512 cf = _mm512_set1_ps(((const float *)(xr[r] + xg->off_c))[cg]);
                    out[r][0] = _mm512_fmadd_ps(m0, cf, out[r][0]);
                    out[r][1] = _mm512_fmadd_ps(m1, cf, out[r][1]);
                }
            }
        }
        if (q2) {
            /* the group's minimum term in integers: sum over its chunks of m * (-S) (-32 S >> 5,
             * exact), two chunks per vpdpwssd (|S| <= 16 * 127 fits a word), then dmin */
            __m512i mi[PR][2];
            UNROLL for (int r = 0; r < PR; r++) mi[r][0] = mi[r][1] = _mm512_setzero_si512();
            UNROLL for (int64_t p = 0; p < GROUP / 32; p++) {
                int64_t pi = (g0 - kb) / 32 + p, cg = g0 / 16 + 2 * p;
                __m512i w0 = _mm512_loadu_si512((const void *)t->mp[pi]);
                __m512i w1 = _mm512_loadu_si512((const void *)(t->mp[pi] + 16));
                UNROLL for (int r = 0; r < PR; r++) {
                    const int32_t *sx = (const int32_t *)(xr[r] + xg->off_c) + cg;
                    uint32_t pr = (uint32_t)(uint16_t)(int16_t)(sx[0] >> 5) | (uint32_t)(sx[1] >> 5) << 16;
                    __m512i xb = _mm512_set1_epi32((int)pr);
                    mi[r][0] = _mm512_dpwssd_epi32(mi[r][0], w0, xb);
                    mi[r][1] = _mm512_dpwssd_epi32(mi[r][1], w1, xb);
                }
            }
            const float *dmp = t->dm[(g0 - kb) / SB];
            __m512 n0 = _mm512_loadu_ps(dmp), n1 = _mm512_loadu_ps(dmp + 16);
            UNROLL for (int r = 0; r < PR; r++) {
                acc[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mi[r][0]), n0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mi[r][1]), n1, acc[r][1]);
            }
        }
        vt_group_add(dxs, acc, out);
    }
}

/* One column tile: for each K block, unpack it, then every row tile adds its share to y (the
 * tile's y strip, n_rows x 32 floats, stays in L2 across the K blocks). */
INLINE void prefill_cols(slate_dtype dt, tile *t, float *y, const void *xq, const slate__wmat *w,
                         const float *bias, int64_t n_rows, int64_t c0, int nc, const xgeom *xg) {
    const int64_t n_out = w->n_out;
    const __mmask16 cm[2] = {vt_mask16(nc), vt_mask16(nc - 16)};
    for (int64_t kb = 0; kb < w->n_in; kb += KC) {
        int64_t ke = kb + KC < w->n_in ? kb + KC : w->n_in;
        bool first = kb == 0;
        pack(dt, t, w, c0, nc, kb, ke);
        __m512 bv[2];
        vt_strip_bias(bv, bias, first, c0, cm);
        for (int64_t r0 = 0; r0 < n_rows; r0 += PR) {
            int nr = (int)(n_rows - r0 < PR ? n_rows - r0 : PR);
            __m512 out[PR][2];
            vt_strip_load(out, y + c0, n_out, r0, nr, first, bv, cm);
            tile_rows(dt, t, (const uint8_t *)xq, xg, r0, kb, ke, out);
            vt_strip_store(y + c0, n_out, r0, nr, cm, out);
        }
    }
}

static void matmul_prefill(float *y, const void *xq, const slate__wmat *w, const float *bias,
                           int64_t n_rows, int64_t o0, int64_t o1, const xgeom *xg) {
    tile t __attribute__((aligned(64)));
    for (int64_t c0 = o0; c0 < o1; c0 += CT) {
        int nc = (int)(o1 - c0 < CT ? o1 - c0 : CT);
        /* the format as a constant in each call */
        switch ((int)xg->dt) {
        case SLATE_DTYPE_Q4_K: prefill_cols(SLATE_DTYPE_Q4_K, &t, y, xq, w, bias, n_rows, c0, nc, xg); break;
        case SLATE_DTYPE_Q5_K: prefill_cols(SLATE_DTYPE_Q5_K, &t, y, xq, w, bias, n_rows, c0, nc, xg); break;
        case SLATE_DTYPE_Q6_K: prefill_cols(SLATE_DTYPE_Q6_K, &t, y, xq, w, bias, n_rows, c0, nc, xg); break;
        case SLATE_DTYPE_Q3_K: prefill_cols(SLATE_DTYPE_Q3_K, &t, y, xq, w, bias, n_rows, c0, nc, xg); break;
        case SLATE_DTYPE_IQ4_XS: prefill_cols(SLATE_DTYPE_IQ4_XS, &t, y, xq, w, bias, n_rows, c0, nc, xg); break;
        default: prefill_cols(SLATE_DTYPE_Q2_K, &t, y, xq, w, bias, n_rows, c0, nc, xg); break;
        }
    }
}

static void matmul(float *y, const float *x, const void *xq, const slate__wmat *w,
                   const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    (void)x;
    xgeom xg = geom(w, n_rows);
    if (xg.prefill) matmul_prefill(y, xq, w, bias, n_rows, o0, o1, &xg);
    else matmul_decode(y, xq, w, bias, n_rows, o0, o1, &xg);
}

void slate__avx512_vnni_k_fill(slate__kernels *k) {
    static const slate_dtype q[] = {SLATE_DTYPE_Q4_K, SLATE_DTYPE_Q5_K, SLATE_DTYPE_Q6_K,
                                    SLATE_DTYPE_Q3_K, SLATE_DTYPE_Q2_K};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        k->matmul[q[i]] = matmul;
        k->xq_plan[q[i]] = xq_plan;
        k->quantize_x[q[i]] = quantize_x;
    }
    /* IQ4_XS reads IQ4_NL's x (see IQ4_XS above): avx512_vnni.c's plan and quantizer, which
     * slate__avx512_vnni_fill installed before this */
    if (k->xq_plan[SLATE_DTYPE_IQ4_NL] && k->quantize_x[SLATE_DTYPE_IQ4_NL]) {
        k->matmul[SLATE_DTYPE_IQ4_XS] = matmul;
        k->xq_plan[SLATE_DTYPE_IQ4_XS] = k->xq_plan[SLATE_DTYPE_IQ4_NL];
        k->quantize_x[SLATE_DTYPE_IQ4_XS] = k->quantize_x[SLATE_DTYPE_IQ4_NL];
    }
}
