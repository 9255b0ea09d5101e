/*
 * ggml_quants.c - dequantization and transcoding of the ggml block formats that GGUF files
 * carry (layouts: ggml_quants.h). Scalar C, one block at a time.
 *
 * Dequantization follows ggml's dequantize_row_* expression by expression: the same f32
 * products in the same order (d * sc first, then times the code, then minus dmin * m), so the
 * values are ggml's bit for bit. That needs the products left uncontracted: CMakeLists.txt
 * compiles this file with -ffp-contract=off (an FMA would round once instead of twice).
 *
 * Transcoding rewrites a block format into a slate layout (kernels/quant.h: the nearest one,
 * or for Q4_K, which is copied as q4_k by default, q4 b32 asym when that is asked for) without
 * going through f32 and a new quantizer: the codes are moved, never re-rounded; the only change
 * is that a per-sub-block scale d * sc (an f32 product of an f16 and a 6-bit integer) is stored
 * as f16, which rounds it to 11 significant bits (relative error <= 2^-11; subnormal products
 * are exact, since d * sc is then a multiple of 2^-24). Q5_0 and IQ4_NL keep their own f16 d,
 * so they are exact.
 *
 * Element order. A 256-element super-block of Q2_K / Q3_K is two halves of 128; in half n,
 * byte l of the 32 bytes qs[32 n ..] holds four 2-bit codes, bits 2 j .. 2 j + 1 belonging to
 * element 128 n + 32 j + l (so sub-block s = e / 16 pairs with scale s). Q3_K's high bit of
 * element e (in half n, group j, position l = e % 32) is bit 4 n + j of hmask[l]. Q4_K / Q5_K
 * put sub-blocks 2 p and 2 p + 1 in the low and high nibbles of qs[32 p .. 32 p + 32); Q5_K's
 * fifth bit of sub-block j is bit j of qh[l]. Q6_K: in half n (128 elements), group g of 32,
 * position l: the low 4 bits are the low (g < 2) or high (g >= 2) nibble of ql[64 n + l + 32
 * (g % 2)], the high 2 bits are bits 2 g .. 2 g + 1 of qh[32 n + l], the scale is
 * scales[e / 16] (each 16 elements).
 * Scales of Q4_K / Q5_K (12 bytes, eight 6-bit scales sc and eight 6-bit minimums m): for
 * j < 4, sc = bytes[j] & 63, m = bytes[j + 4] & 63; for j >= 4, the low 4 bits are the low /
 * high nibble of bytes[j + 4] and the high 2 bits are the top 2 bits of bytes[j - 4] (sc) /
 * bytes[j] (m). Q3_K's sixteen 6-bit scales (12 bytes): the low 4 bits of scale s are the low
 * nibble of bytes[s] (s < 8) or the high nibble of bytes[s - 8], the high 2 bits are bits
 * 2 (s / 4) .. of bytes[8 + s % 4]; the scale is that value - 32.
 */
#include "convert/ggml_quants.h"
#include "convert/gguf.h"

#include "kernels/quant.h"

#include <math.h>
#include <string.h>

static float f16_at(const uint8_t *p) { return slate__f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void put_f16(uint8_t *p, uint16_t h) {
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

/* Stores v as f16 at p; false when it does not fit (rounds to infinity). */
static bool put_scale(uint8_t *p, float v) {
    uint16_t h = slate__f32_to_f16(v);
    put_f16(p, h);
    return (h & 0x7c00) != 0x7c00;
}

/* Nibble e of a 32-element run packed as ggml Q4_0 / slate Q4: low nibbles first. */
static int nib32(const uint8_t *qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }

typedef struct geom {
    int32_t elems, bytes;
    int8_t n_scales;       /* f16 scales / minimums to check for finiteness */
    int16_t scale_at[2];   /* their byte offsets in the block */
    const char *name;
} geom;

static geom geometry(slate__src_type t) {
    switch (t) {
    case SLATE__SRC_F32: return (geom){0, 0, 0, {0, 0}, "F32"};
    case SLATE__SRC_F16: return (geom){0, 0, 0, {0, 0}, "F16"};
    case SLATE__SRC_BF16: return (geom){0, 0, 0, {0, 0}, "BF16"};
    case SLATE__SRC_Q8_0: return (geom){32, 34, 1, {0, 0}, "Q8_0"};
    case SLATE__SRC_Q4_0: return (geom){32, 18, 1, {0, 0}, "Q4_0"};
    case SLATE__SRC_Q4_1: return (geom){32, 20, 2, {0, 2}, "Q4_1"};
    case SLATE__SRC_Q5_0: return (geom){32, 22, 1, {0, 0}, "Q5_0"};
    case SLATE__SRC_Q5_1: return (geom){32, 24, 2, {0, 2}, "Q5_1"};
    case SLATE__SRC_Q2_K: return (geom){256, 84, 2, {80, 82}, "Q2_K"};
    case SLATE__SRC_Q3_K: return (geom){256, 110, 1, {108, 0}, "Q3_K"};
    case SLATE__SRC_Q4_K: return (geom){256, 144, 2, {0, 2}, "Q4_K"};
    case SLATE__SRC_Q5_K: return (geom){256, 176, 2, {0, 2}, "Q5_K"};
    case SLATE__SRC_Q6_K: return (geom){256, 210, 1, {208, 0}, "Q6_K"};
    case SLATE__SRC_IQ4_NL: return (geom){32, 18, 1, {0, 0}, "IQ4_NL"};
    case SLATE__SRC_IQ4_XS: return (geom){256, 136, 1, {0, 0}, "IQ4_XS"};
    }
    return (geom){0, 0, 0, {0, 0}, "?"};
}

void slate__ggml_block(slate__src_type type, int32_t *elems, int32_t *bytes) {
    geom g = geometry(type);
    *elems = g.elems;
    *bytes = g.bytes;
}

bool slate__ggml_is_block(slate__src_type type) { return geometry(type).elems > 0; }

const char *slate__src_type_name(slate__src_type type) { return geometry(type).name; }

bool slate__ggml_src_type(uint32_t ggml_type, slate__src_type *out) {
    switch (ggml_type) {
    case SLATE__GGML_F32: *out = SLATE__SRC_F32; return true;
    case SLATE__GGML_F16: *out = SLATE__SRC_F16; return true;
    case SLATE__GGML_BF16: *out = SLATE__SRC_BF16; return true;
    case SLATE__GGML_Q8_0: *out = SLATE__SRC_Q8_0; return true;
    case SLATE__GGML_Q4_0: *out = SLATE__SRC_Q4_0; return true;
    case SLATE__GGML_Q4_1: *out = SLATE__SRC_Q4_1; return true;
    case SLATE__GGML_Q5_0: *out = SLATE__SRC_Q5_0; return true;
    case SLATE__GGML_Q5_1: *out = SLATE__SRC_Q5_1; return true;
    case SLATE__GGML_Q2_K: *out = SLATE__SRC_Q2_K; return true;
    case SLATE__GGML_Q3_K: *out = SLATE__SRC_Q3_K; return true;
    case SLATE__GGML_Q4_K: *out = SLATE__SRC_Q4_K; return true;
    case SLATE__GGML_Q5_K: *out = SLATE__SRC_Q5_K; return true;
    case SLATE__GGML_Q6_K: *out = SLATE__SRC_Q6_K; return true;
    case SLATE__GGML_IQ4_NL: *out = SLATE__SRC_IQ4_NL; return true;
    case SLATE__GGML_IQ4_XS: *out = SLATE__SRC_IQ4_XS; return true;
    }
    return false;
}

/* ---- scales ------------------------------------------------------------------------------ */

/* Scale s (0..15) of a Q3_K block's 12 scale bytes, -32..31. */
static int k3_scale(const uint8_t *s, int i) {
    int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
    int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* ---- codes ------------------------------------------------------------------------------- */

/* The 2-bit code of element e (0..255) of a Q2_K / Q3_K super-block's qs[64]. */
static int k23_code(const uint8_t *qs, int e) {
    int n = e / 128, j = (e % 128) / 32, l = e % 32;
    return (qs[32 * n + l] >> (2 * j)) & 3;
}

/* Q3_K's signed code of element e, -4..3: the 2-bit code, minus 4 where the high bit is 0. */
static int k3_code(const uint8_t *blk, int e) {
    int n = e / 128, j = (e % 128) / 32, l = e % 32;
    int hbit = (blk[l] >> (4 * n + j)) & 1; /* hmask is the block's first 32 bytes */
    return k23_code(blk + 32, e) - (hbit ? 0 : 4);
}

/* The 4-bit code of element e of a Q4_K / Q5_K super-block's qs[128]. */
static int k45_code(const uint8_t *qs, int e) {
    int j = e / 32, l = e % 32;
    uint8_t b = qs[32 * (j / 2) + l];
    return j % 2 ? b >> 4 : b & 15;
}

/* Q6_K's code of element e, 0..63 (the value uses code - 32). */
static int k6_code(const uint8_t *blk, int e) {
    int n = e / 128, g = (e % 128) / 32, l = e % 32;
    uint8_t lo = blk[64 * n + l + 32 * (g % 2)];
    int hi = (blk[128 + 32 * n + l] >> (2 * g)) & 3;
    return (g < 2 ? lo & 15 : lo >> 4) | hi << 4;
}

/* Q5_0 / Q5_1's 5-bit code of element e, 0..31: qh is the block's u32 at qh_at. */
static int q5_code(const uint8_t *blk, int qh_at, int e) {
    const uint8_t *q = blk + qh_at;
    uint32_t qh = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                  (uint32_t)q[3] << 24;
    return nib32(q + 4, e) | (int)((qh >> e) & 1) << 4;
}

/* ---- dequantization ---------------------------------------------------------------------- */

/* One block of type at blk into y[0 .. elems). */
static void dequant_block(slate__src_type t, const uint8_t *blk, float *y) {
    switch (t) {
    case SLATE__SRC_F32:
    case SLATE__SRC_F16:
    case SLATE__SRC_BF16:
        break;
    case SLATE__SRC_Q8_0: {
        float d = f16_at(blk);
        for (int e = 0; e < 32; e++) y[e] = d * (float)(int8_t)blk[2 + e];
        break;
    }
    case SLATE__SRC_Q4_0: {
        float d = f16_at(blk);
        for (int e = 0; e < 32; e++) y[e] = d * (float)(nib32(blk + 2, e) - 8);
        break;
    }
    case SLATE__SRC_Q4_1: {
        float d = f16_at(blk), m = f16_at(blk + 2);
        for (int e = 0; e < 32; e++) y[e] = d * (float)nib32(blk + 4, e) + m;
        break;
    }
    case SLATE__SRC_Q5_0: {
        float d = f16_at(blk);
        for (int e = 0; e < 32; e++) y[e] = d * (float)(q5_code(blk, 2, e) - 16);
        break;
    }
    case SLATE__SRC_Q5_1: {
        float d = f16_at(blk), m = f16_at(blk + 2);
        for (int e = 0; e < 32; e++) y[e] = d * (float)q5_code(blk, 4, e) + m;
        break;
    }
    case SLATE__SRC_IQ4_NL: {
        float d = f16_at(blk);
        for (int e = 0; e < 32; e++) y[e] = d * (float)slate__iq4_levels[nib32(blk + 2, e)];
        break;
    }
    case SLATE__SRC_Q2_K: {
        float d = f16_at(blk + 80), dmin = f16_at(blk + 82);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)(blk[s] & 15), ml = dmin * (float)(blk[s] >> 4);
            for (int e = 16 * s; e < 16 * s + 16; e++)
                y[e] = dl * (float)k23_code(blk + 16, e) - ml;
        }
        break;
    }
    case SLATE__SRC_Q3_K: {
        float d = f16_at(blk + 108);
        for (int s = 0; s < 16; s++) {
            float dl = d * (float)k3_scale(blk + 96, s);
            for (int e = 16 * s; e < 16 * s + 16; e++) y[e] = dl * (float)k3_code(blk, e);
        }
        break;
    }
    case SLATE__SRC_Q4_K:
    case SLATE__SRC_Q5_K: {
        bool five = t == SLATE__SRC_Q5_K;
        float d = f16_at(blk), dmin = f16_at(blk + 2);
        const uint8_t *qh = blk + 16, *qs = blk + (five ? 48 : 16);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            slate__q4k_scale_min(blk + 4, j, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int e = 32 * j; e < 32 * j + 32; e++) {
                int q = k45_code(qs, e) + (five && (qh[e % 32] >> j & 1) ? 16 : 0);
                y[e] = dl * (float)q - ml;
            }
        }
        break;
    }
    case SLATE__SRC_Q6_K: {
        float d = f16_at(blk + 208);
        for (int e = 0; e < 256; e++) {
            y[e] = d * (float)(int8_t)blk[192 + e / 16] * (float)(k6_code(blk, e) - 32);
        }
        break;
    }
    case SLATE__SRC_IQ4_XS: {
        float d = f16_at(blk);
        for (int j = 0; j < 8; j++) {
            float dl = d * (float)slate__iq4xs_scale(blk, j);
            for (int e = 0; e < 32; e++)
                y[32 * j + e] = dl * (float)slate__iq4_levels[nib32(blk + 8 + 16 * j, e)];
        }
        break;
    }
    }
}

void slate__ggml_dequantize(slate__src_type type, const uint8_t *src, float *dst, int64_t n) {
    geom g = geometry(type);
    if (g.elems == 0) return;
    for (int64_t b = 0; b < n / g.elems; b++)
        dequant_block(type, src + (size_t)b * (size_t)g.bytes, dst + b * g.elems);
}

int64_t slate__ggml_first_nonfinite(slate__src_type type, const uint8_t *src, uint64_t n_bytes,
                                    float *bad) {
    geom g = geometry(type);
    if (g.elems == 0) return -1;
    for (uint64_t b = 0; b < n_bytes / (uint64_t)g.bytes; b++)
        for (int i = 0; i < g.n_scales; i++) {
            *bad = f16_at(src + b * (uint64_t)g.bytes + (uint64_t)g.scale_at[i]);
            if (!isfinite(*bad)) return (int64_t)b;
        }
    return -1;
}

/* ---- transcoding ------------------------------------------------------------------------- */

slate__ggml_route slate__ggml_layout(slate__src_type type, slate_dtype *dtype, int32_t *block,
                                     bool *asym) {
    slate_dtype dt = SLATE_DTYPE_Q8_0;
    int32_t b = 32;
    bool as = false;
    slate__ggml_route r = SLATE__ROUTE_TRANSCODE;
    switch (type) {
    case SLATE__SRC_F32:
    case SLATE__SRC_F16:
    case SLATE__SRC_BF16: return SLATE__ROUTE_NONE;
    case SLATE__SRC_Q8_0: r = SLATE__ROUTE_COPY; break;
    case SLATE__SRC_Q4_0: dt = SLATE_DTYPE_Q4, r = SLATE__ROUTE_COPY; break;
    case SLATE__SRC_Q4_1: dt = SLATE_DTYPE_Q4, as = true, r = SLATE__ROUTE_COPY; break;
    case SLATE__SRC_Q4_K: dt = SLATE_DTYPE_Q4_K, b = SLATE__SUPERBLOCK, r = SLATE__ROUTE_COPY;
        break;
    case SLATE__SRC_Q5_K: dt = SLATE_DTYPE_Q5_K, b = SLATE__SUPERBLOCK, r = SLATE__ROUTE_COPY;
        break;
    case SLATE__SRC_Q6_K: dt = SLATE_DTYPE_Q6_K, b = SLATE__SUPERBLOCK, r = SLATE__ROUTE_COPY;
        break;
    case SLATE__SRC_Q3_K: dt = SLATE_DTYPE_Q3_K, b = SLATE__SUPERBLOCK, r = SLATE__ROUTE_COPY;
        break;
    case SLATE__SRC_Q2_K: dt = SLATE_DTYPE_Q2_K, b = SLATE__SUPERBLOCK, r = SLATE__ROUTE_COPY;
        break;
    case SLATE__SRC_IQ4_NL: dt = SLATE_DTYPE_IQ4_NL, r = SLATE__ROUTE_COPY; break;
    case SLATE__SRC_IQ4_XS: dt = SLATE_DTYPE_IQ4_XS, b = SLATE__SUPERBLOCK, r = SLATE__ROUTE_COPY;
        break;
    case SLATE__SRC_Q5_0: break;
    case SLATE__SRC_Q5_1: r = SLATE__ROUTE_REQUANT; break;
    }
    *dtype = dt;
    *block = b;
    *asym = as;
    return r;
}

bool slate__ggml_transcode_layout(slate__src_type type, slate_dtype *dtype, int32_t *block,
                                  bool *asym) {
    /* copied by default; transcoded when that q4 (IQ4: q8_0) layout is asked for */
    if (type == SLATE__SRC_Q4_K || type == SLATE__SRC_Q2_K || type == SLATE__SRC_Q3_K) {
        *dtype = SLATE_DTYPE_Q4;
        *block = type == SLATE__SRC_Q4_K ? 32 : 16;
        *asym = type != SLATE__SRC_Q3_K;
        return true;
    }
    if (type == SLATE__SRC_IQ4_NL || type == SLATE__SRC_IQ4_XS) {
        *dtype = SLATE_DTYPE_Q8_0;
        *block = 32;
        *asym = false;
        return true;
    }
    return slate__ggml_layout(type, dtype, block, asym) == SLATE__ROUTE_TRANSCODE;
}

bool slate__ggml_transcode_exact(slate__src_type type) {
    return type == SLATE__SRC_Q5_0 || type == SLATE__SRC_IQ4_NL;
}

/* One source block at blk into its slate blocks at out; false when a scale overflows f16 (its
 * f32 value in *bad). */
static bool transcode_block(slate__src_type t, const uint8_t *blk, uint8_t *out, float *bad) {
    switch (t) {
    case SLATE__SRC_Q4_K: { /* 8 x q4 b32 asym {f16 d, m; u8 qs[16]} */
        float d = f16_at(blk), dmin = f16_at(blk + 2);
        for (int j = 0; j < 8; j++, out += sizeof(slate__block_q4a_32)) {
            int sc, m;
            slate__q4k_scale_min(blk + 4, j, &sc, &m);
            float dl = d * (float)sc, ml = -(dmin * (float)m);
            if (!put_scale(out, dl)) return *bad = dl, false;
            if (!put_scale(out + 2, ml)) return *bad = ml, false;
            for (int l = 0; l < 16; l++)
                out[4 + l] = (uint8_t)(k45_code(blk + 16, 32 * j + l) |
                                       k45_code(blk + 16, 32 * j + l + 16) << 4);
        }
        return true;
    }
    case SLATE__SRC_Q2_K: { /* 16 x q4 b16 asym {f16 d, m; u8 qs[8]} */
        float d = f16_at(blk + 80), dmin = f16_at(blk + 82);
        for (int s = 0; s < 16; s++, out += sizeof(slate__block_q4a_16)) {
            float dl = d * (float)(blk[s] & 15), ml = -(dmin * (float)(blk[s] >> 4));
            if (!put_scale(out, dl)) return *bad = dl, false;
            if (!put_scale(out + 2, ml)) return *bad = ml, false;
            for (int l = 0; l < 8; l++)
                out[4 + l] = (uint8_t)(k23_code(blk + 16, 16 * s + l) |
                                       k23_code(blk + 16, 16 * s + l + 8) << 4);
        }
        return true;
    }
    case SLATE__SRC_Q3_K: { /* 16 x q4 b16 sym {f16 d; u8 qs[8]}, nibble = code + 8 */
        float d = f16_at(blk + 108);
        for (int s = 0; s < 16; s++, out += sizeof(slate__block_q4_16)) {
            float dl = d * (float)k3_scale(blk + 96, s);
            if (!put_scale(out, dl)) return *bad = dl, false;
            for (int l = 0; l < 8; l++)
                out[2 + l] = (uint8_t)((k3_code(blk, 16 * s + l) + 8) |
                                       (k3_code(blk, 16 * s + l + 8) + 8) << 4);
        }
        return true;
    }
    case SLATE__SRC_Q5_0: /* q8_0 {f16 d; i8 q[32]}: the same d */
        memcpy(out, blk, 2);
        for (int e = 0; e < 32; e++) out[2 + e] = (uint8_t)(int8_t)(q5_code(blk, 2, e) - 16);
        return true;
    case SLATE__SRC_IQ4_NL:
        memcpy(out, blk, 2);
        for (int e = 0; e < 32; e++) out[2 + e] = (uint8_t)slate__iq4_levels[nib32(blk + 2, e)];
        return true;
    case SLATE__SRC_IQ4_XS: { /* 8 x q8_0 */
        float d = f16_at(blk);
        for (int j = 0; j < 8; j++, out += sizeof(slate__block_q8_0)) {
            float dl = d * (float)slate__iq4xs_scale(blk, j);
            if (!put_scale(out, dl)) return *bad = dl, false;
            for (int e = 0; e < 32; e++)
                out[2 + e] = (uint8_t)slate__iq4_levels[nib32(blk + 8 + 16 * j, e)];
        }
        return true;
    }
    case SLATE__SRC_F32:
    case SLATE__SRC_F16:
    case SLATE__SRC_BF16:
    case SLATE__SRC_Q8_0:
    case SLATE__SRC_Q4_0:
    case SLATE__SRC_Q4_1:
    case SLATE__SRC_Q5_1:
    case SLATE__SRC_Q5_K:
    case SLATE__SRC_Q6_K:
        break;
    }
    return true;
}

int64_t slate__ggml_transcode(slate__src_type type, const uint8_t *src, int64_t n, uint8_t *dst,
                              float *bad) {
    geom g = geometry(type);
    slate_dtype dt;
    int32_t block;
    bool asym;
    if (g.elems == 0 || !slate__ggml_transcode_layout(type, &dt, &block, &asym)) return -1;
    size_t out_bytes = (size_t)(g.elems / block) *
                       (dt == SLATE_DTYPE_Q8_0 ? sizeof(slate__block_q8_0)
                                               : slate__q4_block_bytes(block, asym));
    for (int64_t b = 0; b < n / g.elems; b++)
        if (!transcode_block(type, src + (size_t)b * (size_t)g.bytes, dst + (size_t)b * out_bytes,
                             bad))
            return b;
    return -1;
}
