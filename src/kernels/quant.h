/*
 * quant.h - the compressed weight formats and the matrix descriptor every matmul kernel
 * receives. The block structs below are the bytes of the package (docs/format.md, "Quantized
 * weights"): a kernel reads them in place, the converter writes them, nothing repacks them.
 *
 *   Q8_0  blocks of 32: {f16 d; int8 qs[32]}, value d * qs[j]. Identical to GGUF Q8_0.
 *   Q4    blocks of B in {16, 32, 64, 128}; element j of a block is the low nibble of qs[j] for
 *         j < B/2 and the high nibble of qs[j - B/2] otherwise (GGUF Q4_0's nibble order).
 *         symmetric  {f16 d; u8 qs[B/2]}          value d * (q - 8)  (B = 32: GGUF Q4_0)
 *         asymmetric {f16 d; f16 m; u8 qs[B/2]}   value d * q + m    (B = 32: GGUF Q4_1)
 *   Q8_C  one scale per output row: the int8 rows [n_out][n_in] (row o at o * n_in), zero
 *         padding to a multiple of 64 bytes, then f32 scales[n_out]; value scales[o] * q.
 *   PAL   N-bit palettization, N in {2, 3, 4, 6, 8}, one table of 2^N f16 centroids per group
 *         of G output rows (G in 1..4096; the last group may be shorter). Rows first: row o is
 *         ceil(n_in * N / 8) bytes, an LSB-first bit stream (element i = bits i*N .. i*N+N-1 of
 *         the row, bit b being bit b % 8 of byte b / 8; the unused top bits of the last byte are
 *         0); rows back to back, zero padding to a multiple of 64 bytes, then the tables
 *         f16 lut[ceil(n_out / G)][2^N]; value lut[o / G][index]. Rows first, like Q8_C, so a
 *         row is at data + o * row_bytes for every format and the tables stay 64-aligned.
 *         The tensor table says "bits" and "group"; in memory (slate__wmat_init, the tensor
 *         table's `block` fields) they travel packed as block = slate__pal_layout(bits, group).
 *   Q4_K  super-blocks of 256 (GGUF Q4_K byte for byte, 144 bytes): {f16 d, dmin; u8
 *         scales[12]; u8 qs[128]}. Sub-block j (0..7) holds elements 32 j .. 32 j + 31 with a
 *         6-bit scale sc_j and minimum m_j: for j < 4, sc_j = scales[j] & 63 and m_j =
 *         scales[j + 4] & 63; for j >= 4, sc_j = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4
 *         and m_j = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4. Element 32 j + l has the code
 *         q = low nibble (j even) or high nibble (j odd) of qs[32 (j / 2) + l]; value
 *         (d * sc_j) * q - dmin * m_j, as f32 products in that order (ggml's).
 *   Q6_K  super-blocks of 256 (GGUF Q6_K byte for byte, 210 bytes): {u8 ql[128]; u8 qh[64];
 *         i8 scales[16]; f16 d}. Element e, in half n = e / 128, group g = (e % 128) / 32,
 *         position l = e % 32: the low 4 bits of its code are the low (g < 2) or high (g >= 2)
 *         nibble of ql[64 n + 32 (g % 2) + l], the high 2 bits are bits 2 g, 2 g + 1 of
 *         qh[32 n + l]; value (d * scales[e / 16]) * (code - 32).
 *   Q5_K  super-blocks of 256 (GGUF Q5_K byte for byte, 176 bytes): {f16 d, dmin; u8
 *         scales[12]; u8 qh[32]; u8 qs[128]}: Q4_K's scales and 4-bit codes (qs), and element
 *         32 j + l adds 16 to its code when bit j of qh[l] is set (q in 0..31); value
 *         (d * sc_j) * q - dmin * m_j.
 *   Q3_K  super-blocks of 256 (GGUF Q3_K byte for byte, 110 bytes): {u8 hmask[32]; u8
 *         qs[64]; u8 scales[12]; f16 d}. Element e, in half n = e / 128, group g = (e % 128) /
 *         32, position l = e % 32: the low 2 bits of its code are bits 2 g, 2 g + 1 of
 *         qs[32 n + l], and 4 is subtracted unless bit 4 n + g of hmask[l] is set (code -4..3).
 *         Scale s = e / 16 (0..15) is 6 bits: the low nibble of scales[s] (s < 8) or the high
 *         nibble of scales[s - 8] (s >= 8), and bits 2 (s / 4), 2 (s / 4) + 1 of scales[8 + s % 4]
 *         above it; value (d * (sc_s - 32)) * code, as f32 products in that order (ggml's).
 *   Q2_K  super-blocks of 256 (GGUF Q2_K byte for byte, 84 bytes): {u8 scales[16]; u8 qs[64];
 *         f16 d, dmin}. Element e (n, g, l as in Q3_K) has the code q = bits 2 g, 2 g + 1 of
 *         qs[32 n + l] (0..3); scales[e / 16] holds the scale (low nibble) and minimum (high
 *         nibble) of its 16 elements; value (d * sc) * q - dmin * m.
 *   IQ4_NL blocks of 32 (GGUF IQ4_NL byte for byte, 18 bytes): {f16 d; u8 qs[16]}, Q4's nibble
 *         order (element j < 16: low nibble of qs[j]; j >= 16: high nibble of qs[j - 16]); the
 *         nibble indexes 16 fixed int8 levels L (slate__iq4_levels, ggml's kvalues_iq4nl):
 *         value d * L[nibble].
 *   IQ4_XS super-blocks of 256 (GGUF IQ4_XS byte for byte, 136 bytes): {f16 d; u16 scales_h;
 *         u8 scales_l[4]; u8 qs[128]}. Sub-block j (0..7) is elements 32 j .. 32 j + 31, stored
 *         as IQ4_NL's 16 bytes at qs[16 j]; its 6-bit scale is the low (j even) or high (j odd)
 *         nibble of scales_l[j / 2] with bits 2 j, 2 j + 1 of scales_h above it, minus 32
 *         (slate__iq4xs_scale: -32..31); value (d * sc_j) * L[nibble], f32 products in that
 *         order (ggml's).
 *
 * Rows of the blocked formats are whole blocks: n_in must be a multiple of the block. A row of
 * Q8_0 / Q4 is n_in / B blocks back to back, rows back to back. f16 is IEEE binary16.
 */
#ifndef SLATE_QUANT_H
#define SLATE_QUANT_H

#include "slate.h"

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Weight dtypes are 0..SLATE__N_WDTYPES-1 (F32, F16, BF16, I32 (never a weight), Q8_0, Q4,
 * Q8_C, PAL, Q4_K, Q6_K, Q5_K, Q3_K, Q2_K, IQ4_NL, IQ4_XS); kernel tables are indexed by them. */
#define SLATE__N_WDTYPES 15

typedef struct slate__block_q8_0 {
    uint16_t d;    /* f16 scale */
    int8_t qs[32];
} slate__block_q8_0;
static_assert(sizeof(slate__block_q8_0) == 34, "Q8_0 block is 34 bytes (GGUF Q8_0)");

#define SLATE__Q4_SYM(B)                                                                           \
    struct {                                                                                       \
        uint16_t d;         /* f16 scale */                                                        \
        uint8_t qs[(B) / 2]; /* nibbles, see above */                                              \
    }
#define SLATE__Q4_ASYM(B)                                                                          \
    struct {                                                                                       \
        uint16_t d, m;      /* f16 scale and offset */                                             \
        uint8_t qs[(B) / 2];                                                                       \
    }
typedef SLATE__Q4_SYM(16) slate__block_q4_16;
typedef SLATE__Q4_SYM(32) slate__block_q4_32;
typedef SLATE__Q4_SYM(64) slate__block_q4_64;
typedef SLATE__Q4_SYM(128) slate__block_q4_128;
typedef SLATE__Q4_ASYM(16) slate__block_q4a_16;
typedef SLATE__Q4_ASYM(32) slate__block_q4a_32;
typedef SLATE__Q4_ASYM(64) slate__block_q4a_64;
typedef SLATE__Q4_ASYM(128) slate__block_q4a_128;
static_assert(sizeof(slate__block_q4_16) == 10, "Q4 B=16 block");
static_assert(sizeof(slate__block_q4_32) == 18, "Q4 B=32 block (GGUF Q4_0)");
static_assert(sizeof(slate__block_q4_64) == 34, "Q4 B=64 block");
static_assert(sizeof(slate__block_q4_128) == 66, "Q4 B=128 block");
static_assert(sizeof(slate__block_q4a_16) == 12, "Q4 asym B=16 block");
static_assert(sizeof(slate__block_q4a_32) == 20, "Q4 asym B=32 block (GGUF Q4_1)");
static_assert(sizeof(slate__block_q4a_64) == 36, "Q4 asym B=64 block");
static_assert(sizeof(slate__block_q4a_128) == 68, "Q4 asym B=128 block");

typedef struct slate__block_q4_k {
    uint16_t d, dmin;    /* f16 super-block scale and minimum scale */
    uint8_t scales[12];  /* eight 6-bit scales and eight 6-bit minimums, packed (above) */
    uint8_t qs[128];     /* 4-bit codes: sub-blocks 2p and 2p + 1 in the nibbles of qs[32 p..] */
} slate__block_q4_k;
static_assert(sizeof(slate__block_q4_k) == 144, "Q4_K super-block is 144 bytes (GGUF Q4_K)");

typedef struct slate__block_q6_k {
    uint8_t ql[128];     /* low 4 bits of the codes */
    uint8_t qh[64];      /* high 2 bits */
    int8_t scales[16];   /* one per 16 elements */
    uint16_t d;          /* f16 super-block scale */
} slate__block_q6_k;
static_assert(sizeof(slate__block_q6_k) == 210, "Q6_K super-block is 210 bytes (GGUF Q6_K)");

typedef struct slate__block_q5_k {
    uint16_t d, dmin;    /* f16 super-block scale and minimum scale */
    uint8_t scales[12];  /* as Q4_K's */
    uint8_t qh[32];      /* fifth bit of the codes: bit j of qh[l] for element 32 j + l */
    uint8_t qs[128];     /* low 4 bits, as Q4_K's codes */
} slate__block_q5_k;
static_assert(sizeof(slate__block_q5_k) == 176, "Q5_K super-block is 176 bytes (GGUF Q5_K)");

typedef struct slate__block_q3_k {
    uint8_t hmask[32];   /* third bit of the codes: bit 4 n + g of hmask[l] (above) */
    uint8_t qs[64];      /* low 2 bits: 4 codes per byte */
    uint8_t scales[12];  /* sixteen 6-bit scales, offset by 32, packed (slate__q3k_scale) */
    uint16_t d;          /* f16 super-block scale */
} slate__block_q3_k;
static_assert(sizeof(slate__block_q3_k) == 110, "Q3_K super-block is 110 bytes (GGUF Q3_K)");

typedef struct slate__block_q2_k {
    uint8_t scales[16];  /* per 16 elements: scale (low nibble), minimum (high nibble) */
    uint8_t qs[64];      /* 2-bit codes: 4 per byte, as Q3_K's low bits */
    uint16_t d, dmin;    /* f16 super-block scale and minimum scale */
} slate__block_q2_k;
static_assert(sizeof(slate__block_q2_k) == 84, "Q2_K super-block is 84 bytes (GGUF Q2_K)");

typedef struct slate__block_iq4_nl {
    uint16_t d;          /* f16 scale */
    uint8_t qs[16];      /* indices into slate__iq4_levels, Q4's nibble order */
} slate__block_iq4_nl;
static_assert(sizeof(slate__block_iq4_nl) == 18, "IQ4_NL block is 18 bytes (GGUF IQ4_NL)");

typedef struct slate__block_iq4_xs {
    uint16_t d;          /* f16 super-block scale */
    uint16_t scales_h;   /* high 2 bits of the eight scales */
    uint8_t scales_l[4]; /* low 4 bits of the eight scales */
    uint8_t qs[128];     /* eight IQ4_NL sub-blocks of 16 bytes */
} slate__block_iq4_xs;
static_assert(sizeof(slate__block_iq4_xs) == 136, "IQ4_XS super-block is 136 bytes (GGUF IQ4_XS)");

/* IQ4_NL / IQ4_XS's 16 levels (ggml's kvalues_iq4nl), indexed by the 4-bit code. */
static const int8_t slate__iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};

/* Scale j (0..7) of an IQ4_XS super-block blk (its first byte), offset removed: -32..31. */
static inline int slate__iq4xs_scale(const uint8_t *blk, int j) {
    int lo = (blk[4 + j / 2] >> (4 * (j % 2))) & 15;
    int hi = ((blk[2] | blk[3] << 8) >> (2 * j)) & 3;
    return (lo | hi << 4) - 32;
}

/* Scale and minimum j (0..7) of a Q4_K super-block's 12 scale bytes (the rule above). */
static inline void slate__q4k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Scale s (0..15) of a Q3_K super-block's 12 scale bytes, with its offset removed: -32..31. */
static inline int slate__q3k_scale(const uint8_t *sc, int s) {
    int lo = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4;
    return (lo | ((sc[8 + s % 4] >> (2 * (s / 4))) & 3) << 4) - 32;
}

/* Bytes of one Q4 block of B elements. */
static inline size_t slate__q4_block_bytes(int32_t block, bool asym) {
    return (asym ? 4u : 2u) + (size_t)block / 2;
}

/* PAL layout packed into one int32 (the `block` of the layout functions below): group * 16 +
 * bits. Only these helpers build or read it. */
static inline int32_t slate__pal_layout(int32_t bits, int32_t group) { return group * 16 + bits; }
static inline int32_t slate__pal_bits(int32_t layout) { return layout & 15; }
static inline int32_t slate__pal_group(int32_t layout) { return layout >> 4; }
#define SLATE__PAL_GROUP_MAX 4096

/* Largest block of the Q8_0 / Q4 formats (kernels size their stack buffers with it); the
 * super-block formats have 256. */
#define SLATE__QBLOCK_MAX 128
#define SLATE__SUPERBLOCK 256

/* A weight matrix W[n_out][n_in] as stored (the bytes of one tensor). */
typedef struct slate__wmat {
    const void *data;
    slate_dtype dtype;
    int32_t block;        /* Q8_0: 32; Q4: 16, 32, 64 or 128; super-blocks: 256;
                             F32/F16/BF16/Q8_C: 0 */
    bool asym;            /* Q4 only: d * q + m */
    int64_t n_out, n_in;
    size_t row_bytes;     /* bytes from row o to row o + 1 */
    const float *scales;  /* Q8_C: [n_out] scales (inside data, after the rows); else NULL */
    int32_t bits, group;  /* PAL: index bits (2, 3, 4, 6, 8) and rows per table; else 0 */
    const uint16_t *lut;  /* PAL: f16 [ceil(n_out / group)][1 << bits] (inside data, after the
                             rows); else NULL */
} slate__wmat;

/* Whether dtype is stored as a matrix format (F32, F16, BF16, Q8_0, Q4, Q8_C, PAL, IQ4_NL and
 * the super-block formats). */
bool slate__wdtype_valid(slate_dtype dtype);
/* Whether dtype is one of the compressed formats (Q8_0, Q4, Q8_C, PAL, IQ4_NL, super-blocks):
 * 2-D only. */
bool slate__wdtype_quantized(slate_dtype dtype);
/* Whether dtype is a super-block format (Q4_K, Q6_K, Q5_K, Q3_K, Q2_K, IQ4_XS: blocks of
 * SLATE__SUPERBLOCK). */
static inline bool slate__wdtype_superblock(slate_dtype dt) {
    return dt == SLATE_DTYPE_Q4_K || dt == SLATE_DTYPE_Q6_K || dt == SLATE_DTYPE_Q5_K ||
           dt == SLATE_DTYPE_Q3_K || dt == SLATE_DTYPE_Q2_K || dt == SLATE_DTYPE_IQ4_XS;
}

/* Checks a layout: block and asym must fit the dtype (Q4: 16/32/64/128; Q8_0, IQ4_NL: 32;
 * super-block formats: 256; others 0; asym only for Q4; PAL: block = slate__pal_layout of bits 2/3/4/6/8 and group 1..4096) and
 * n_in must be a multiple of the block (PAL: any n_in). On failure writes the reason
 * ("block 48 is not one of 16, 32, 64, 128") into why[0..cap) and returns false. */
bool slate__wlayout_check(slate_dtype dtype, int32_t block, bool asym, int64_t n_in, char *why,
                          size_t cap);

/* Bytes of an [n_out][n_in] tensor of a checked layout; 0 when it overflows 2^62. */
uint64_t slate__wmat_bytes(slate_dtype dtype, int32_t block, bool asym, int64_t n_out,
                           int64_t n_in);

/* Fills *w for a checked layout (data may be NULL while only sizes are needed). */
void slate__wmat_init(slate__wmat *w, const void *data, slate_dtype dtype, int32_t block,
                      bool asym, int64_t n_out, int64_t n_in);

#endif /* SLATE_QUANT_H */
