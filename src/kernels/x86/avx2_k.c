/*
 * avx2_k.c - integer matmul of the super-block formats Q4_K, Q5_K, Q6_K, Q3_K, Q2_K and IQ4_XS
 * (GGUF's, quant.h) for CPUs with AVX2: the avx2 table, and the avx512 table, which keeps avx2's
 * integer kernels. Same signatures and meaning as kernels/ref/quant.c up to the rounding of x.
 *
 * x is x86/avx2_q.c's: its quantizer and plan are installed for these formats too (the same
 * bytes, the same layout id), so exec quantizes x once for q/k/v or gate/up even where a Q4_K_M
 * (Q5_K_M) file mixes Q4_K (Q5_K) and Q6_K there, a Q3_K_M file Q3_K with Q4_K to Q6_K, a Q2_K
 * file Q2_K with Q3_K and Q4_K, an IQ4_XS file IQ4_XS with Q5_K, Q6_K or Q8_0. Per row: int8 q
 * in units of 32 inputs, the f32 scale dx of each unit and dx * (sum of q) of each half of 16. A
 * super-block of 256 is 8 units; each product of a unit of 32 weights with a unit of x is
 * integer (vpmaddubsw u8 x s8 -> s16 pairs, vpmaddwd -> 8 x s32, lanes 0-3 the first 16 inputs,
 * 4-7 the last 16), then one f32 FMA with a scale broadcast from memory (vbroadcastss: a load,
 * not a shuffle on the port the integer work needs).
 *   Q4_K  value (d sc_j) q - dmin m_j with codes q in 0..15 (u8 already: a 32-byte load of qs
 *         is two units, low nibbles sub-block 2p, high nibbles 2p + 1): dot * d sc_j dx, the 8
 *         units' d sc_j dx computed in one vector per super-block and row and stored; the
 *         minimum as dmin m_j times the unit's x sum (two halves added by vhaddps, whose lane
 *         order [0 1 4 5 2 3 6 7] the minimums are permuted to). vpmaddwd by ones.
 *   Q5_K  Q4_K's kernel (the same header; qs after the 32 bytes of qh) with the fifth bit of
 *         each code OR-ed in as 16 before the product: qh loaded once per super-block, bits
 *         2p and 2p + 1 of its bytes moved to bit 4 for the pair of units p, then qh shifted
 *         right by 2. Codes 0..31 are still u8; a vpmaddubsw pair is at most 2 * 31 * 128.
 *   Q6_K  value d s_k (code - 32), s_k one int8 scale per 16: the 6-bit code (0..63, u8) times
 *         x, pairs at most 2 * 63 * 127 < 32767 (no s16 saturation), then vpmaddwd by the two
 *         scales of the unit as s16 (lanes 0-3 s_2u, 4-7 s_2u+1: one vpshufb of the 16 scales
 *         sorted even / odd), times dx straight from xq, the super-block's sum times d (11 %
 *         less time than d dx per unit from a vector: one shuffle per unit fewer); the -32 as
 *         -32 d s_k times the x sum of each 16.
 *   Q3_K  value d s_k code, s_k = sc_k - 32 (-32..31), code -4..3: Q6_K's kernel on code + 4
 *         (0..7: the 2 low bits of unit u = 4 n + g at bits 2 g of a 32-byte load of qs half n,
 *         the third bit at bit u of one load of hmask), scales unpacked to int8 in vector
 *         registers from an 8- and a 4-byte load (a 16-byte load would pass the end of the
 *         110-byte super-block), the -4 as -4 d s_k times the x sum of each 16. Pairs at most
 *         2 * 7 * 128, so s16 holds them; super-blocks after the first are 2-byte aligned,
 *         every load is unaligned.
 *   Q2_K  value (d sc_k) q - dmin m_k, q 0..3: Q3_K's kernel without the third bit (q u8 as it
 *         is), the nibble scales 0..15 through vpmaddwd as Q3_K's, the minimum as -dmin m_k
 *         times the x sum of each 16 in place of Q3_K's -4 d s_k.
 *   IQ4_XS value (d (ls_j - 32)) L, L one of 16 int8 levels: each sub-block is an IQ4_NL block
 *         (avx2_q.c), its 32 levels by one vpshufb of the nibbles (avx2_inline.h's iq4_unit), |L|
 *         the u8 factor with L's sign moved onto x (vpsignb), then Q4_K's f32 FMA per unit with
 *         d (ls_j - 32) dx, the 8 scales unpacked by two vpsrlvd and computed in one vector per
 *         super-block and row. vpmaddwd by ones, so avx2_vnni takes vpdpbusd here too.
 * The correction terms go into the same f32 accumulator as the products (only its lane sum
 * matters). Up to 4 rows of x share each unpacked super-block (prefill), as in avx2_q.c.
 *
 * Built as x86/avx2_vnni_k.c (SLATE_AVX2_K_VNNI) for the avx2_vnni table: Q4_K's, Q5_K's and
 * IQ4_XS's unit products are one VEX vpdpbusd; Q6_K, Q3_K and Q2_K keep vpmaddubsw + vpmaddwd by
 * their scales (vpdpbusd sums 4 products, so the per-16 scales would cost a vpmulld or an f32
 * multiply per unit instead), compiled with the same flags. Integer sums are exact either way, so
 * the two tables' results are bit-identical (test_quant_kernels checks it).
 */
#include "kernels/kernels.h"
#include "kernels/x86/avx2_inline.h"

#include <immintrin.h>
#include <string.h>

enum { XU = 32, UPS = SLATE__SUPERBLOCK / XU }; /* inputs per unit of x; units per super-block */

/* One row of quantized x, as x86/avx2_q.c writes it: int8 q[units * 32], then f32 dx[units],
 * then f32 hs[units * 2] (n_in is a multiple of 256 here: no short unit). */
static int64_t x_units(const slate__wmat *w) { return w->n_in / XU; }
static size_t x_stride(const slate__wmat *w) {
    return (size_t)x_units(w) * (XU + 3 * sizeof(float));
}

/* 8 x s32: sums of u8 w times s8 x over each 4 consecutive inputs (exact: no pair saturates). */
INLINE __m256i dot_u8s8(__m256i wu, __m256i xs) {
#ifdef SLATE_AVX2_K_VNNI
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), wu, xs);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wu, xs), _mm256_set1_epi16(1));
#endif
}

/* Q4_K's 12 scale bytes as 8 scales sc_j (bytes of *sc, j = 0..7) and 8 minimums m_j (*m):
 * quant.h's rule, 4 at a time (bytes 0-3 hold sc_0..3 and m_0..3 in 6 bits; bytes 8-11 the low
 * 4 bits of sc_4..7 and m_4..7, whose top 2 bits are the top bits of bytes 0-3 and 4-7). */
INLINE void q4k_scales(const uint8_t *s, uint64_t *sc, uint64_t *m) {
    uint32_t u[3];
    memcpy(u, s, 12);
    const uint32_t k6 = 0x3f3f3f3fu, k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
    uint32_t sc_lo = u[0] & k6, m_lo = u[1] & k6;
    uint32_t sc_hi = (u[2] & k4) | ((u[0] >> 6) & k2) << 4;
    uint32_t m_hi = ((u[2] >> 4) & k4) | ((u[1] >> 6) & k2) << 4;
    *sc = sc_lo | (uint64_t)sc_hi << 32;
    *m = m_lo | (uint64_t)m_hi << 32;
}

/* The 8 bytes of v as f32 lanes (unsigned). */
INLINE __m256 u8x8_ps(uint64_t v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)v)));
}

/* y[r][o] for rows r0 .. r0+R-1: the accumulators' sums plus the bias. */
INLINE void store_rows(int R, float *y, const __m256 acc[4], const slate__wmat *w,
                       const float *bias, int64_t r0, int64_t o) {
    UNROLL for (int r = 0; r < R; r++)
        y[(r0 + r) * w->n_out + o] = hsum8(acc[r]) + (bias ? bias[o] : 0.0f);
}

/* The opening of each row kernel below (R, xq, xs, w, r0, o are its parameters): the
 * weight row, the super-blocks per row, x's rows (q, dx, hs) and zeroed accumulators. */
#define ROW_KERNEL_SETUP                                                                   \
    int64_t units = x_units(w), nsb = w->n_in / SLATE__SUPERBLOCK;                         \
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;              \
    const int8_t *xr[4];                                                                   \
    const float *dx[4], *hs[4];                                                            \
    __m256 acc[4];                                                                         \
    x_rows(R, xq, xs, r0, units, xr, dx, hs, acc)

/* Rows r0 .. r0+R-1 of x against weight row o of a Q4_K matrix, or of a Q5_K one (q5, a
 * constant after inlining): the same header and nibbles (qs after qh) with the fifth bit of
 * unit j, bit j of qh[l], moved to bit 4 of the code. */
INLINE void q4k_rows(int R, bool q5, float *y, const uint8_t *xq, size_t xs, const slate__wmat *w,
                     const float *bias, int64_t r0, int64_t o) {
    ROW_KERNEL_SETUP;
    size_t bb = q5 ? sizeof(slate__block_q5_k) : sizeof(slate__block_q4_k), qs = q5 ? 48 : 16;
    const __m256i low = _mm256_set1_epi8(15), bit4 = _mm256_set1_epi8(16);
    const __m256i hadd_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *b = row + (size_t)sb * bb;
        int64_t u0 = sb * UPS;
        uint64_t sc, m;
        q4k_scales(b + 4, &sc, &m);
        __m256 dsc = _mm256_mul_ps(u8x8_ps(sc), _mm256_set1_ps(f16_scalar(b)));
        __m256 dm = _mm256_mul_ps(u8x8_ps(m), _mm256_set1_ps(f16_scalar(b + 2)));
        dm = _mm256_permutevar8x32_ps(dm, hadd_order);
        float fs[4][8] __attribute__((aligned(32)));
        UNROLL for (int r = 0; r < R; r++) {
            _mm256_store_ps(fs[r], _mm256_mul_ps(dsc, _mm256_loadu_ps(dx[r] + u0)));
            __m256 xs32 = _mm256_hadd_ps(_mm256_loadu_ps(hs[r] + 2 * u0),
                                         _mm256_loadu_ps(hs[r] + 2 * u0 + 8));
            acc[r] = _mm256_fnmadd_ps(dm, xs32, acc[r]);
        }
        /* Q5_K: qh shifted right by 2 p before pair p, so bits 0 and 1 of each byte are the
         * fifth bits of units 2 p and 2 p + 1 (16-bit shifts: the bits that cross into a byte
         * from its neighbour land above bit 1 and are masked off) */
        __m256i qh = q5 ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
        UNROLL for (int p = 0; p < UPS / 2; p++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(b + qs + 32 * p));
            __m256i wl = _mm256_and_si256(v, low);
            __m256i wh = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            if (q5) { /* codes 0..31: u8 x s8 pairs at most 2 * 31 * 128, no s16 saturation */
                wl = _mm256_or_si256(wl, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit4));
                wh = _mm256_or_si256(wh, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit4));
                qh = _mm256_srli_epi16(qh, 2);
            }
            UNROLL for (int r = 0; r < R; r++) {
                const int8_t *xu = xr[r] + (u0 + 2 * p) * XU;
                __m256i pl = dot_u8s8(wl, _mm256_loadu_si256((const __m256i *)xu));
                __m256i ph = dot_u8s8(wh, _mm256_loadu_si256((const __m256i *)(xu + XU)));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pl),
                                         _mm256_broadcast_ss(&fs[r][2 * p]), acc[r]);
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ph),
                                         _mm256_broadcast_ss(&fs[r][2 * p + 1]), acc[r]);
            }
        }
    }
    store_rows(R, y, acc, w, bias, r0, o);
}

/* Rows r0 .. r0+R-1 of x against weight row o of a Q6_K matrix. */
INLINE void q6k_rows(int R, float *y, const uint8_t *xq, size_t xs, const slate__wmat *w,
                     const float *bias, int64_t r0, int64_t o) {
    ROW_KERNEL_SETUP;
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *b = row + (size_t)sb * sizeof(slate__block_q6_k);
        int64_t u0 = sb * UPS;
        float d = f16_scalar(b + 208);
        __m128i s8 = _mm_loadu_si128((const __m128i *)(b + 192));
        /* s16: scales 0, 2, .., 14 in the low lane, 1, 3, .., 15 in the high one */
        __m256i s16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s8, even_odd));
        __m256 c32 = _mm256_set1_ps(-32.0f * d); /* exact: a power of two times d */
        __m256 cl = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), c32);
        __m256 ch = _mm256_mul_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))), c32);
        __m256 t[4]; /* this super-block's products times dx, before d */
        UNROLL for (int r = 0; r < R; r++) {
            t[r] = _mm256_setzero_ps();
            acc[r] = _mm256_fmadd_ps(cl, _mm256_loadu_ps(hs[r] + 2 * u0), acc[r]);
            acc[r] = _mm256_fmadd_ps(ch, _mm256_loadu_ps(hs[r] + 2 * u0 + 8), acc[r]);
        }
        UNROLL for (int n = 0; n < 2; n++) {
            __m256i qa = _mm256_loadu_si256((const __m256i *)(b + 64 * n));
            __m256i qb = _mm256_loadu_si256((const __m256i *)(b + 64 * n + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * n));
            __m256i code[4]; /* groups g = 0..3 of this half: units 4 n + g */
            code[0] = _mm256_or_si256(_mm256_and_si256(qa, m4),
                                      _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            code[1] = _mm256_or_si256(_mm256_and_si256(qb, m4),
                                      _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            code[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4),
                                      _mm256_and_si256(qh, m30));
            code[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                      _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
            UNROLL for (int g = 0; g < 4; g++) {
                int u = 4 * n + g;
                /* s16 word u of each lane: s_2u for inputs 0-15, s_2u+1 for 16-31 */
                __m256i sc =
                    _mm256_shuffle_epi8(s16, _mm256_set1_epi16((short)((2 * u + 1) << 8 | 2 * u)));
                UNROLL for (int r = 0; r < R; r++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(xr[r] + (u0 + u) * XU));
                    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(code[g], xv), sc);
                    t[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                           _mm256_broadcast_ss(dx[r] + u0 + u), t[r]);
                }
            }
        }
        UNROLL for (int r = 0; r < R; r++)
            acc[r] = _mm256_fmadd_ps(t[r], _mm256_set1_ps(d), acc[r]);
    }
    store_rows(R, y, acc, w, bias, r0, o);
}

/* Q3_K's 12 scale bytes as its 16 scales sc_s - 32 (-32..31), int8 s in byte s: quant.h's rule
 * in vector registers (the low nibbles of bytes 0-7 are scales 0-7, their high nibbles scales
 * 8-15; the top 2 bits of scales 4 k .. 4 k + 3 are bits 2 k, 2 k + 1 of bytes 8-11: those 4
 * bytes broadcast, 32-bit lane k shifted right by 2 k). Read as 8 + 4 bytes: a 16-byte load
 * would run 2 bytes past the super-block. */
INLINE __m128i q3k_scales(const uint8_t *s) {
    uint32_t t;
    memcpy(&t, s + 8, 4);
    const __m128i m15 = _mm_set1_epi8(15);
    __m128i v = _mm_loadl_epi64((const __m128i *)s);
    __m128i lo = _mm_and_si128(_mm_unpacklo_epi64(v, _mm_srli_epi16(v, 4)), m15);
    __m128i hi = _mm_srlv_epi32(_mm_set1_epi32((int)t), _mm_setr_epi32(0, 2, 4, 6));
    hi = _mm_slli_epi16(_mm_and_si128(hi, _mm_set1_epi8(3)), 4); /* at most 48: no carry */
    return _mm_sub_epi8(_mm_or_si128(lo, hi), _mm_set1_epi8(32));
}

/* Rows r0 .. r0+R-1 of x against weight row o of a Q3_K matrix, or of a Q2_K one (q2, a
 * constant after inlining): Q6_K's kernel on the 2-bit codes of qs, with Q3_K's third bit OR-ed
 * in as 4 (code + 4, 0..7, u8) and -4 in place of -32; Q2_K's codes 0..3 as they are and its
 * minimum, -dmin m_k, in place of -32 d s_k. Q3_K's super-blocks are 110 bytes, so all but the
 * first are only 2-byte aligned: every load is unaligned. */
INLINE void q23k_rows(int R, bool q2, float *y, const uint8_t *xq, size_t xs, const slate__wmat *w,
                      const float *bias, int64_t r0, int64_t o) {
    ROW_KERNEL_SETUP;
    size_t bb = q2 ? sizeof(slate__block_q2_k) : sizeof(slate__block_q3_k), qs = q2 ? 16 : 32;
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
    const __m128i m15 = _mm_set1_epi8(15);
    const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *b = row + (size_t)sb * bb;
        int64_t u0 = sb * UPS;
        float d = f16_scalar(b + (q2 ? 80 : 108));
        /* s8: the 16 group scales as int8 (Q2_K 0..15, Q3_K -32..31); c8 with cf the constant
         * term of each group: Q2_K's minimums (0..15) times -dmin, Q3_K's scales times -4 d
         * (exact: a power of two times d) */
        __m128i s8, c8;
        float cf;
        if (q2) {
            __m128i sm = _mm_loadu_si128((const __m128i *)b);
            s8 = _mm_and_si128(sm, m15);
            c8 = _mm_and_si128(_mm_srli_epi16(sm, 4), m15);
            cf = -f16_scalar(b + 82);
        } else {
            s8 = c8 = q3k_scales(b + 96);
            cf = -4.0f * d;
        }
        /* s16: scales 0, 2, .., 14 in the low lane, 1, 3, .., 15 in the high one */
        __m256i s16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s8, even_odd));
        __m256 cl = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c8)), _mm256_set1_ps(cf));
        __m256 ch = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c8, 8))),
                                  _mm256_set1_ps(cf));
        __m256 t[4]; /* this super-block's products times dx, before d */
        UNROLL for (int r = 0; r < R; r++) {
            t[r] = _mm256_setzero_ps();
            acc[r] = _mm256_fmadd_ps(cl, _mm256_loadu_ps(hs[r] + 2 * u0), acc[r]);
            acc[r] = _mm256_fmadd_ps(ch, _mm256_loadu_ps(hs[r] + 2 * u0 + 8), acc[r]);
        }
        /* Q3_K: unit u = 4 n + g takes bit u of hmask[l], moved to bit 2 (16-bit shifts by at
         * most 5: a bit that crosses from the neighbouring byte lands off bit 2 and is masked) */
        __m256i hm = q2 ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)b);
        UNROLL for (int n = 0; n < 2; n++) {
            __m256i ql = _mm256_loadu_si256((const __m256i *)(b + qs + 32 * n));
            UNROLL for (int g = 0; g < 4; g++) {
                int u = 4 * n + g;
                /* codes 0..3 (Q2_K) or code + 4 in 0..7 (Q3_K): a u8 x s8 pair is at most
                 * 2 * 7 * 128 (no s16 saturation); times the scale (|s| <= 32) and summed by
                 * vpmaddwd, under 2^17 in s32 */
                __m256i code = _mm256_and_si256(_mm256_srli_epi16(ql, 2 * g), m3);
                if (!q2) {
                    __m256i hb =
                        u < 2 ? _mm256_slli_epi16(hm, 2 - u) : _mm256_srli_epi16(hm, u - 2);
                    code = _mm256_or_si256(code, _mm256_and_si256(hb, m4));
                }
                /* s16 word u of each lane: s_2u for inputs 0-15, s_2u+1 for 16-31 */
                __m256i sc =
                    _mm256_shuffle_epi8(s16, _mm256_set1_epi16((short)((2 * u + 1) << 8 | 2 * u)));
                UNROLL for (int r = 0; r < R; r++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(xr[r] + (u0 + u) * XU));
                    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(code, xv), sc);
                    t[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                           _mm256_broadcast_ss(dx[r] + u0 + u), t[r]);
                }
            }
        }
        UNROLL for (int r = 0; r < R; r++)
            acc[r] = _mm256_fmadd_ps(t[r], _mm256_set1_ps(d), acc[r]);
    }
    store_rows(R, y, acc, w, bias, r0, o);
}

/* IQ4_XS's 8 sub-block scales ls_j - 32 (-32..31) as f32 lanes j, quant.h's rule for all 8 at
 * once: the low 4 bits of ls_j are bits 4 j .. 4 j + 3 of scales_l (4 bytes, little-endian),
 * the high 2 bits bits 2 j, 2 j + 1 of scales_h (one 32-bit lane each, shifted by vpsrlvd). */
INLINE __m256 iq4xs_scales(const uint8_t *b) {
    uint16_t h;
    uint32_t l;
    memcpy(&h, b + 2, 2);
    memcpy(&l, b + 4, 4);
    __m256i lo = _mm256_srlv_epi32(_mm256_set1_epi32((int)l),
                                   _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    __m256i hi = _mm256_srlv_epi32(_mm256_set1_epi32(h),
                                   _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    __m256i ls = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(15)),
                                 _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(ls, _mm256_set1_epi32(32)));
}

/* Rows r0 .. r0+R-1 of x against weight row o of an IQ4_XS matrix: each sub-block j is one unit
 * of x and IQ4_NL's block (x86/avx2_q.c): 32 int8 levels by one vpshufb (iq4_unit), |L| times x
 * with L's sign (vpsignb); |L|, |q| <= 127, so a vpmaddubsw pair is at most 2 * 127 * 127 = 32258
 * < 32767 (quantize_x never writes -128 for finite x; a -128 would still give only 32512) and a
 * vpmaddwd / vpdpbusd lane 4 * 127 * 128. The signed scale ls_j - 32 and d meet the integer sum
 * as Q4_K's d sc_j do: d (ls_j - 32) dx per unit, the super-block's 8 in one vector per row,
 * broadcast from memory. (Applying ls_j - 32 in integers, by vpmaddwd as Q6_K does, would save
 * nothing: every unit has its own dx, so one f32 FMA per unit stays, and avx2_vnni would lose
 * vpdpbusd.) Super-blocks are 136 bytes (8-aligned at best): unaligned loads. */
INLINE void iq4xs_rows(int R, float *y, const uint8_t *xq, size_t xs, const slate__wmat *w,
                       const float *bias, int64_t r0, int64_t o) {
    ROW_KERNEL_SETUP;
    const __m256i levels = iq4_levels(slate__iq4_levels);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *b = row + (size_t)sb * sizeof(slate__block_iq4_xs);
        int64_t u0 = sb * UPS;
        __m256 ds = _mm256_mul_ps(_mm256_set1_ps(f16_scalar(b)), iq4xs_scales(b));
        float fs[4][8] __attribute__((aligned(32)));
        UNROLL for (int r = 0; r < R; r++)
            _mm256_store_ps(fs[r], _mm256_mul_ps(ds, _mm256_loadu_ps(dx[r] + u0)));
        UNROLL for (int j = 0; j < UPS; j++) {
            __m256i wv = iq4_unit(levels, b + 8 + 16 * j), wu = _mm256_abs_epi8(wv);
            UNROLL for (int r = 0; r < R; r++) {
                __m256i xv = _mm256_loadu_si256((const __m256i *)(xr[r] + (u0 + j) * XU));
                __m256i p = dot_u8s8(wu, _mm256_sign_epi8(xv, wv));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&fs[r][j]),
                                         acc[r]);
            }
        }
    }
    store_rows(R, y, acc, w, bias, r0, o);
}

/* Every output in [o0, o1) for every row of x, 4 rows of x per pass over a weight row. */
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

/* The table's matmul entry whose rows go through CALL(R) (x: unused, the kernels read xq). */
#define MATMUL_ROWS(name, CALL)                                                                    \
    static void name(float *y, const float *x, const void *xq, const slate__wmat *w,             \
                     const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {                  \
        (void)x;                                                                                   \
        size_t xs = x_stride(w);                                                                   \
        ROWS(CALL)                                                                                 \
    }
#define Q4K_CALL(R) q4k_rows(R, false, y, xq, xs, w, bias, r, o)
#define Q5K_CALL(R) q4k_rows(R, true, y, xq, xs, w, bias, r, o)
#define Q6K_CALL(R) q6k_rows(R, y, xq, xs, w, bias, r, o)
#define Q3K_CALL(R) q23k_rows(R, false, y, xq, xs, w, bias, r, o)
#define Q2K_CALL(R) q23k_rows(R, true, y, xq, xs, w, bias, r, o)
#define IQ4XS_CALL(R) iq4xs_rows(R, y, xq, xs, w, bias, r, o)
MATMUL_ROWS(matmul_q4_k, Q4K_CALL)
MATMUL_ROWS(matmul_q5_k, Q5K_CALL)
MATMUL_ROWS(matmul_q6_k, Q6K_CALL)
MATMUL_ROWS(matmul_q3_k, Q3K_CALL)
MATMUL_ROWS(matmul_q2_k, Q2K_CALL)
MATMUL_ROWS(matmul_iq4_xs, IQ4XS_CALL)
#undef Q4K_CALL
#undef Q5K_CALL
#undef Q6K_CALL
#undef Q3K_CALL
#undef Q2K_CALL
#undef IQ4XS_CALL
#undef MATMUL_ROWS

/* Embedding lookups (row_to_f32): one row dequantized 8 values at a time with exactly ref's f32
 * operations, so the result is bit-identical (kernels/ref/quant.c: Q4_K (d sc) q - dmin m, Q6_K
 * (d s) (code - 32), each product rounded on its own: mul and sub, no FMA). */
/* Q4_K, and Q5_K (q5: Q4_K's with bit j of qh[l] added as 16 to the code of element 32 j + l;
 * its qs start at byte 48). */
INLINE void row_to_f32_q45_k(bool q5, float *dst, const slate__wmat *w, int64_t o) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    size_t bb = q5 ? sizeof(slate__block_q5_k) : sizeof(slate__block_q4_k);
    for (int64_t sb = 0; sb < w->n_in / SLATE__SUPERBLOCK; sb++) {
        const uint8_t *b = row + (size_t)sb * bb;
        float d = f16_scalar(b), dmin = f16_scalar(b + 2);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            slate__q4k_scale_min(b + 4, j, &sc, &m);
            __m256 dl = _mm256_set1_ps(d * (float)sc), ml = _mm256_set1_ps(dmin * (float)m);
            const uint8_t *qs = b + (q5 ? 48 : 16) + 32 * (j / 2);
            for (int u = 0; u < 4; u++) {
                __m128i v = _mm_loadl_epi64((const __m128i *)(qs + 8 * u));
                v = j % 2 ? _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15))
                          : _mm_and_si128(v, _mm_set1_epi8(15));
                if (q5) {
                    __m128i h = _mm_loadl_epi64((const __m128i *)(b + 16 + 8 * u));
                    h = _mm_and_si128(_mm_srl_epi16(h, _mm_cvtsi32_si128(j)), _mm_set1_epi8(1));
                    v = _mm_or_si128(v, _mm_slli_epi16(h, 4)); /* 0..31, no carry across bytes */
                }
                __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
                _mm256_storeu_ps(dst + sb * SLATE__SUPERBLOCK + 32 * j + 8 * u,
                                 _mm256_sub_ps(_mm256_mul_ps(dl, q), ml));
            }
        }
    }
}

static void row_to_f32_q4_k(float *dst, const slate__wmat *w, int64_t o) {
    row_to_f32_q45_k(false, dst, w, o);
}

static void row_to_f32_q5_k(float *dst, const slate__wmat *w, int64_t o) {
    row_to_f32_q45_k(true, dst, w, o);
}

/* Elements e .. e+7 of a super-block b (8 elements of one 16-element scale group; n = e / 128,
 * g = (e % 128) / 32, l = e % 32), with exactly ref's f32 operations:
 *   Q6_K  (d scales[s]) (code - 32)
 *   Q3_K  (d (sc_s - 32)) code, the code's low 2 bits and third bit as in q23k_rows
 *   Q2_K  (d sc) q - dmin m, sc and m the nibbles of the group's scale byte */
INLINE __m256 q6k_group8(const uint8_t *b, int e, int n, int g, int l) {
    __m128i lo = _mm_loadl_epi64((const __m128i *)(b + 64 * n + 32 * (g % 2) + l));
    __m128i hi = _mm_loadl_epi64((const __m128i *)(b + 128 + 32 * n + l));
    lo = g < 2 ? _mm_and_si128(lo, _mm_set1_epi8(15))
               : _mm_and_si128(_mm_srli_epi16(lo, 4), _mm_set1_epi8(15));
    hi = _mm_and_si128(_mm_srl_epi16(hi, _mm_cvtsi32_si128(2 * g)), _mm_set1_epi8(3));
    __m128i code = _mm_or_si128(lo, _mm_slli_epi16(hi, 4)); /* 0..63, no carry across */
    __m256i c32 = _mm256_sub_epi32(_mm256_cvtepu8_epi32(code), _mm256_set1_epi32(32));
    __m256 dl = _mm256_set1_ps(f16_scalar(b + 208) * (float)(int8_t)b[192 + e / 16]);
    return _mm256_mul_ps(dl, _mm256_cvtepi32_ps(c32));
}

INLINE __m256 q3k_group8(const uint8_t *b, int e, int n, int g, int l) {
    __m128i lo = _mm_loadl_epi64((const __m128i *)(b + 32 + 32 * n + l));
    __m128i hi = _mm_loadl_epi64((const __m128i *)(b + l));
    lo = _mm_and_si128(_mm_srl_epi16(lo, _mm_cvtsi32_si128(2 * g)), _mm_set1_epi8(3));
    hi = _mm_and_si128(_mm_srl_epi16(hi, _mm_cvtsi32_si128(4 * n + g)), _mm_set1_epi8(1));
    __m128i c = _mm_or_si128(lo, _mm_slli_epi16(hi, 2)); /* code + 4: 0..7 */
    __m256i c32 = _mm256_sub_epi32(_mm256_cvtepu8_epi32(c), _mm256_set1_epi32(4));
    __m256 dl = _mm256_set1_ps(f16_scalar(b + 108) * (float)slate__q3k_scale(b + 96, e / 16));
    return _mm256_mul_ps(dl, _mm256_cvtepi32_ps(c32));
}

INLINE __m256 q2k_group8(const uint8_t *b, int e, int n, int g, int l) {
    int sm = b[e / 16];
    __m128i q = _mm_loadl_epi64((const __m128i *)(b + 16 + 32 * n + l));
    q = _mm_and_si128(_mm_srl_epi16(q, _mm_cvtsi32_si128(2 * g)), _mm_set1_epi8(3));
    __m256 dl = _mm256_set1_ps(f16_scalar(b + 80) * (float)(sm & 15));
    __m256 ml = _mm256_set1_ps(f16_scalar(b + 82) * (float)(sm >> 4));
    __m256 qf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
    return _mm256_sub_ps(_mm256_mul_ps(dl, qf), ml);
}

/* The row lookup of a format of 16-element scale groups: every super-block of row o, 8 elements
 * at a time through GROUP8. */
#define ROW_TO_F32_K16(name, block, GROUP8)                                                        \
    static void name(float *dst, const slate__wmat *w, int64_t o) {                                \
        const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;                \
        for (int64_t sb = 0; sb < w->n_in / SLATE__SUPERBLOCK; sb++) {                             \
            const uint8_t *b = row + (size_t)sb * sizeof(block);                                   \
            for (int e = 0; e < SLATE__SUPERBLOCK; e += 8)                                         \
                _mm256_storeu_ps(dst + sb * SLATE__SUPERBLOCK + e,                                 \
                                 GROUP8(b, e, e / 128, (e % 128) / 32, e % 32));                   \
        }                                                                                          \
    }
ROW_TO_F32_K16(row_to_f32_q6_k, slate__block_q6_k, q6k_group8)
ROW_TO_F32_K16(row_to_f32_q3_k, slate__block_q3_k, q3k_group8)
ROW_TO_F32_K16(row_to_f32_q2_k, slate__block_q2_k, q2k_group8)
#undef ROW_TO_F32_K16

/* IQ4_XS: per sub-block j the 32 levels (iq4_unit) times d (ls_j - 32), 8 at a time, exactly
 * ref's products (d * (ls_j - 32)) * L. */
static void row_to_f32_iq4_xs(float *dst, const slate__wmat *w, int64_t o) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    const __m256i levels = iq4_levels(slate__iq4_levels);
    for (int64_t sb = 0; sb < w->n_in / SLATE__SUPERBLOCK; sb++) {
        const uint8_t *b = row + (size_t)sb * sizeof(slate__block_iq4_xs);
        float d = f16_scalar(b);
        for (int j = 0; j < UPS; j++) {
            __m256 dl = _mm256_set1_ps(d * (float)slate__iq4xs_scale(b, j));
            __m256i l = iq4_unit(levels, b + 8 + 16 * j);
            __m128i h[2] = {_mm256_castsi256_si128(l), _mm256_extracti128_si256(l, 1)};
            UNROLL for (int k = 0; k < 4; k++) {
                __m256i l32 = _mm256_cvtepi8_epi32(k % 2 ? _mm_srli_si128(h[k / 2], 8) : h[k / 2]);
                _mm256_storeu_ps(dst + sb * SLATE__SUPERBLOCK + 32 * j + 8 * k,
                                 _mm256_mul_ps(dl, _mm256_cvtepi32_ps(l32)));
            }
        }
    }
}

#ifdef SLATE_AVX2_K_VNNI
void slate__avx2_vnni_k_fill(slate__kernels *k) {
#else
void slate__avx2_k_fill(slate__kernels *k) {
#endif
    k->row_to_f32[SLATE_DTYPE_Q4_K] = row_to_f32_q4_k;
    k->row_to_f32[SLATE_DTYPE_Q5_K] = row_to_f32_q5_k;
    k->row_to_f32[SLATE_DTYPE_Q6_K] = row_to_f32_q6_k;
    k->row_to_f32[SLATE_DTYPE_Q3_K] = row_to_f32_q3_k;
    k->row_to_f32[SLATE_DTYPE_Q2_K] = row_to_f32_q2_k;
    k->row_to_f32[SLATE_DTYPE_IQ4_XS] = row_to_f32_iq4_xs;
    /* x as the table's Q4 quantizer writes it (avx2_q.c's layout); without one, ref stays. */
    if (!k->xq_plan[SLATE_DTYPE_Q4] || !k->quantize_x[SLATE_DTYPE_Q4]) return;
    static const slate_dtype q[] = {SLATE_DTYPE_Q4_K, SLATE_DTYPE_Q5_K, SLATE_DTYPE_Q6_K,
                                    SLATE_DTYPE_Q3_K, SLATE_DTYPE_Q2_K, SLATE_DTYPE_IQ4_XS};
    k->matmul[SLATE_DTYPE_Q4_K] = matmul_q4_k;
    k->matmul[SLATE_DTYPE_Q5_K] = matmul_q5_k;
    k->matmul[SLATE_DTYPE_Q6_K] = matmul_q6_k;
    k->matmul[SLATE_DTYPE_Q3_K] = matmul_q3_k;
    k->matmul[SLATE_DTYPE_Q2_K] = matmul_q2_k;
    k->matmul[SLATE_DTYPE_IQ4_XS] = matmul_iq4_xs;
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        k->xq_plan[q[i]] = k->xq_plan[SLATE_DTYPE_Q4];
        k->quantize_x[q[i]] = k->quantize_x[SLATE_DTYPE_Q4];
    }
}
