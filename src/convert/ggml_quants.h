/*
 * ggml_quants.h - the ggml block formats slate reads from GGUF files (internal to convert/):
 * their geometry, dequantization to f32, the route of each into its nearest slate weight
 * layout (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K: the same bytes, slate's q8_0, q4, q4_k, q5_k,
 * q6_k), and the transcoders that rewrite the others into a slate layout without a second
 * rounding where the values fit.
 *
 * Block layouts (little-endian; f16 is IEEE binary16; "element e" counts inside the block):
 *   Q8_0   32 el, 34 B   {f16 d; i8 q[32]}                      d * q[e]
 *   Q4_0   32 el, 18 B   {f16 d; u8 qs[16]}                     d * (nib(e) - 8)
 *   Q4_1   32 el, 20 B   {f16 d, m; u8 qs[16]}                  d * nib(e) + m
 *   Q5_0   32 el, 22 B   {f16 d; u32 qh; u8 qs[16]}             d * ((nib(e) | qh bit e << 4) - 16)
 *   Q5_1   32 el, 24 B   {f16 d, m; u32 qh; u8 qs[16]}          d * (nib(e) | qh bit e << 4) + m
 *   IQ4_NL 32 el, 18 B   {f16 d; u8 qs[16]}                     d * kv[nib(e)]
 *          (nib(e): low nibble of qs[e] for e < 16, high nibble of qs[e - 16] above;
 *           kv: the 16 non-uniform levels -127 .. 113 of ggml_quants.c)
 *   Q2_K  256 el, 84 B   {u8 scales[16]; u8 qs[64]; f16 d, dmin}
 *          sub-block s = e / 16: d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q 2 bits
 *   Q3_K  256 el, 110 B  {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}
 *          sub-block s = e / 16: d * (sc[s] - 32) * (q - 4 * !hbit), sc 6 bits, q 2 bits
 *   Q4_K  256 el, 144 B  {f16 d, dmin; u8 scales[12]; u8 qs[128]}     (slate's q4_k)
 *          sub-block j = e / 32: d * sc[j] * q - dmin * m[j], sc and m 6 bits, q 4 bits
 *   Q5_K  256 el, 176 B  {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]} (slate's q5_k)
 *          as Q4_K with a fifth bit of q from qh
 *   Q6_K  256 el, 210 B  {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d} (slate's q6_k)
 *          sub-block s = e / 16: d * scales[s] * (q - 32), q 6 bits
 *   IQ4_XS 256 el, 136 B {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}
 *          sub-block j = e / 32: d * (ls[j] - 32) * kv[q], ls 6 bits, q 4 bits
 * The bit positions inside each block are written out once, in ggml_quants.c (Q4_K, Q5_K and
 * Q6_K also in kernels/quant.h, whose reference dequantization of q4_k / q5_k / q6_k must give
 * these values bit for bit: test_ggml_quants.c checks it).
 * Spec: ggml's ggml-common.h (block structs) and ggml-quants.c (dequantize_row_*); the code
 * here is written from that description, not copied.
 */
#ifndef SLATE_GGML_QUANTS_H
#define SLATE_GGML_QUANTS_H

#include "convert/convert.h"

/* Elements and bytes of one block of a ggml block format (0 and 0 for F32/F16/BF16). */
void slate__ggml_block(slate__src_type type, int32_t *elems, int32_t *bytes);
/* Whether type is a ggml block format (Q8_0 .. IQ4_XS), as opposed to F32/F16/BF16. */
bool slate__ggml_is_block(slate__src_type type);
/* Short ggml name of a source type ("Q4_K", "F16", ...). */
const char *slate__src_type_name(slate__src_type type);
/* The source type of a ggml type id (SLATE__GGML_*, gguf.h) that slate reads; false for every
 * other id (the GGUF parser refuses those by name). */
bool slate__ggml_src_type(uint32_t ggml_type, slate__src_type *out);

/* Dequantizes n elements (a multiple of the block) of type (a block format) from src into dst,
 * with ggml's float arithmetic (each product evaluated as in dequantize_row_*, no contraction),
 * so the results equal ggml's bit for bit. */
void slate__ggml_dequantize(slate__src_type type, const uint8_t *src, float *dst, int64_t n);

/* The first block of n_bytes of type (a block format) whose f16 scale or minimum (d, m, dmin)
 * is not finite: its index, with the value in *bad; -1 when all are finite. Finite scales give
 * finite values in every block format (|value| < 65504 * 127 * 128 < 2^31). */
int64_t slate__ggml_first_nonfinite(slate__src_type type, const uint8_t *src, uint64_t n_bytes,
                                    float *bad);

/* How a source format becomes its nearest slate layout (the converter's default). */
typedef enum slate__ggml_route {
    SLATE__ROUTE_NONE,      /* not a block format: F32/F16/BF16 */
    SLATE__ROUTE_COPY,      /* the bytes are the slate layout's (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K,
                               Q6_K, Q3_K, Q2_K, IQ4_NL, IQ4_XS) */
    SLATE__ROUTE_TRANSCODE, /* rewritten block by block, exactly or up to the f16 rounding of
                               the per-sub-block scales (slate__ggml_transcode) */
    SLATE__ROUTE_REQUANT,   /* dequantized and quantized again (a second rounding) */
} slate__ggml_route;

/* The nearest slate layout of a source format and the route to it:
 *   Q8_0 -> q8_0, Q4_0 -> q4 b32, Q4_1 -> q4 b32 asym,
 *   Q4_K -> q4_k, Q5_K -> q5_k, Q6_K -> q6_k, Q3_K -> q3_k, Q2_K -> q2_k,
 *     IQ4_XS -> iq4_xs (super-blocks of 256), IQ4_NL -> iq4_nl (blocks of 32)    copy
 *   Q5_0 -> q8_0: the same d, q = x - 16 (exact)                                transcode
 *   Q5_1 -> q8_0 (no slate layout holds an offset per 32 with 5-bit codes)      requantize
 * Q5_K has no transcode (its 5-bit codes with an offset per 32 fit no older slate layout): the
 * q8_0 requantization it had before q5_k existed is what `--quantize int8-b32` gives (ggml's
 * dequantization, then slate's quantizer: the same bytes), for a runtime that predates q5_k.
 * Returns SLATE__ROUTE_NONE (and leaves the outputs alone) for F32/F16/BF16. */
slate__ggml_route slate__ggml_layout(slate__src_type type, slate_dtype *dtype, int32_t *block,
                                     bool *asym);

/* The slate layout slate__ggml_transcode writes for type: the transcode routes above, and
 *   Q4_K -> q4 b32 asym: d' = f16(d * sc), m' = f16(-(dmin * m)) per 32
 *   Q2_K -> q4 b16 asym: d' = f16(d * (sc & 15)), m' = f16(-(dmin * (sc >> 4))) per 16
 *   Q3_K -> q4 b16 sym:  d' = f16(d * (sc - 32)) (may be negative), nibble q + 8, per 16
 *   IQ4_NL -> q8_0: the same d, q = kv[x] (exact)
 *   IQ4_XS -> q8_0: d' = f16(d * (ls - 32)), q = kv[x], per 32
 * (not their default, which copies the bytes as q4_k / q2_k / q3_k / iq4_nl / iq4_xs: the
 * converter transcodes when that layout is asked for, e.g. `--quantize int4 --asym` (Q4_K),
 * `--quantize int4 --block-size 16` (Q3_K) or `--quantize int8-b32` (IQ4) for a runtime that
 * predates those dtypes; the codes stay, only the sub-block scales are rounded to f16, nearer
 * than requantizing would be).
 * false (outputs unspecified) for types with no transcode. */
bool slate__ggml_transcode_layout(slate__src_type type, slate_dtype *dtype, int32_t *block,
                                  bool *asym);

/* Whether type's transcode is exact (Q5_0, IQ4_NL: the source's own f16 scale is kept). */
bool slate__ggml_transcode_exact(slate__src_type type);

/* Transcodes n elements (whole blocks) of type (one with slate__ggml_transcode_layout) from src
 * into the bytes of that slate layout at dst (rows of whole blocks are back to back in both,
 * so a tensor may be transcoded as one run or in ranges of whole blocks).
 * Returns -1, or the index of the first source block with a sub-block scale or minimum that
 * does not fit f16 (the f32 product rounds to infinity: |d * sc| >= 65520; below that it is
 * stored as at most 65504), with the f32 value in *bad (dst is then
 * partly written). The source scales must be finite (slate__ggml_first_nonfinite). */
int64_t slate__ggml_transcode(slate__src_type type, const uint8_t *src, int64_t n, uint8_t *dst,
                              float *bad);

#endif /* SLATE_GGML_QUANTS_H */
