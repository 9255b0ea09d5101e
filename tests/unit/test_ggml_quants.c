/* test_ggml_quants.c - the ggml block formats read from GGUF (convert/ggml_quants.h): blocks
 * built here from parameters (scales, minimums, codes) by the byte layout of ggml's
 * ggml-common.h / ggml-quants.c, for every supported type, must dequantize to the values the
 * formulas give (hand-picked blocks exactly, with the packed 6-bit scales of Q4_K/Q5_K and
 * Q3_K's hmask/scales in their high bits; random blocks bit for bit with ggml's order of f32
 * operations); transcoding equals dequantization within the f16 rounding of the sub-block
 * scales (exactly for Q5_0 and IQ4_NL); the GGUF parser sizes the types, refuses rows that are
 * not whole blocks and names every type it does not read; the runtime's reference
 * dequantization of q4_k / q5_k / q6_k equals ggml's of Q4_K / Q5_K / Q6_K bit for bit; and the
 * converter copies Q4_K / Q5_K / Q6_K into q4_k / q5_k / q6_k by default (the tied head and the
 * embedding lookup read them), writes f32 equal to the dequantization when asked and Q4_K's
 * transcoded bytes when q4 b32 asym is asked, picks each type's nearest layout, refuses
 * non-finite or unrepresentable scales naming the tensor and block, and gives packages whose
 * logits follow the f32 conversion. */
#include "testutil.h"
#include "pkgutil.h"
#include "tinymodel.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "convert/ggml_quants.h"
#include "convert/gguf.h"
#include "core/core.h"
#include "kernels/kernels.h"
#include "pkg/pkg.h"

/* ---- blocks from parameters (the spec, written independently of ggml_quants.c) ---------------- */

/* IQ4_NL / IQ4_XS levels (ggml-common.h kvalues_iq4nl). */
static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* A block's parameters: f16-representable d and dmin (Q4_1 / Q5_1: m), per-sub-block scales sc
 * and minimums m, per-element codes, each in its type's range (code_range). */
typedef struct kparams {
    float d, dmin;
    int sc[16], m[16];
    int code[256];
} kparams;

typedef struct tinfo {
    slate__src_type type;
    const char *name;
    uint32_t ggml;     /* ggml type id */
    int elems, bytes;  /* block geometry */
    int n_sub;         /* sub-blocks with their own sc / m (0: none) */
    int sc_lo, sc_hi;  /* range of sc */
    int m_hi;          /* m in 0..m_hi (0: no m) */
    int code_lo, code_hi;
    bool has_dmin;
} tinfo;

static const tinfo types[] = {
    {SLATE__SRC_Q8_0, "Q8_0", 8, 32, 34, 0, 0, 0, 0, -128, 127, false},
    {SLATE__SRC_Q4_0, "Q4_0", 2, 32, 18, 0, 0, 0, 0, 0, 15, false},
    {SLATE__SRC_Q4_1, "Q4_1", 3, 32, 20, 0, 0, 0, 0, 0, 15, true},
    {SLATE__SRC_Q5_0, "Q5_0", 6, 32, 22, 0, 0, 0, 0, 0, 31, false},
    {SLATE__SRC_Q5_1, "Q5_1", 7, 32, 24, 0, 0, 0, 0, 0, 31, true},
    {SLATE__SRC_IQ4_NL, "IQ4_NL", 20, 32, 18, 0, 0, 0, 0, 0, 15, false},
    {SLATE__SRC_Q2_K, "Q2_K", 10, 256, 84, 16, 0, 15, 15, 0, 3, true},
    {SLATE__SRC_Q3_K, "Q3_K", 11, 256, 110, 16, -32, 31, 0, -4, 3, false},
    {SLATE__SRC_Q4_K, "Q4_K", 12, 256, 144, 8, 0, 63, 63, 0, 15, true},
    {SLATE__SRC_Q5_K, "Q5_K", 13, 256, 176, 8, 0, 63, 63, 0, 31, true},
    {SLATE__SRC_Q6_K, "Q6_K", 14, 256, 210, 16, -128, 127, 0, 0, 63, false},
    {SLATE__SRC_IQ4_XS, "IQ4_XS", 23, 256, 136, 8, 0, 63, 0, 0, 15, false},
};
#define N_TYPES (sizeof types / sizeof types[0])

static void put16(uint8_t *p, float v) {
    uint16_t h = slate__f32_to_f16(v);
    assert_true(slate__f16_to_f32(h) == v); /* parameters are f16 values */
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* Q4_K / Q5_K: eight 6-bit scales and minimums in 12 bytes (ggml's quantize_row_q4_K). */
static void pack_k4_scales(uint8_t *s, const int *sc, const int *m) {
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = (uint8_t)sc[j];
            s[j + 4] = (uint8_t)m[j];
        } else {
            s[j + 4] = (uint8_t)((sc[j] & 15) | (m[j] & 15) << 4);
            s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            s[j] |= (uint8_t)((m[j] >> 4) << 6);
        }
    }
}

/* Q3_K: sixteen signed 6-bit scales (stored + 32) in 12 bytes (ggml's quantize_row_q3_K). */
static void pack_k3_scales(uint8_t *s, const int *sc) {
    memset(s, 0, 12);
    for (int j = 0; j < 16; j++) {
        int l = sc[j] + 32;
        if (j < 8) s[j] |= (uint8_t)(l & 15);
        else s[j - 8] |= (uint8_t)((l & 15) << 4);
        s[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
}

/* Nibbles of 32 codes, low nibbles first (Q4_0's order). */
static void pack_nib32(uint8_t *qs, const int *code) {
    for (int l = 0; l < 16; l++) qs[l] = (uint8_t)((code[l] & 15) | (code[l + 16] & 15) << 4);
}

static void encode(const tinfo *ti, const kparams *p, uint8_t *b) {
    memset(b, 0, (size_t)ti->bytes);
    const int *c = p->code;
    switch (ti->type) {
    case SLATE__SRC_Q8_0:
        put16(b, p->d);
        for (int e = 0; e < 32; e++) b[2 + e] = (uint8_t)(int8_t)c[e];
        break;
    case SLATE__SRC_Q4_0:
    case SLATE__SRC_IQ4_NL:
        put16(b, p->d);
        pack_nib32(b + 2, c);
        break;
    case SLATE__SRC_Q4_1:
        put16(b, p->d);
        put16(b + 2, p->dmin);
        pack_nib32(b + 4, c);
        break;
    case SLATE__SRC_Q5_0:
    case SLATE__SRC_Q5_1: {
        int at = ti->type == SLATE__SRC_Q5_0 ? 2 : 4;
        put16(b, p->d);
        if (ti->type == SLATE__SRC_Q5_1) put16(b + 2, p->dmin);
        uint32_t qh = 0;
        for (int e = 0; e < 32; e++) qh |= (uint32_t)(c[e] >> 4) << e;
        for (int k = 0; k < 4; k++) b[at + k] = (uint8_t)(qh >> (8 * k));
        pack_nib32(b + at + 4, c);
        break;
    }
    case SLATE__SRC_Q2_K:
    case SLATE__SRC_Q3_K: {
        bool three = ti->type == SLATE__SRC_Q3_K;
        uint8_t *hmask = b, *qs = b + (three ? 32 : 16);
        for (int e = 0; e < 256; e++) {
            int n = e / 128, j = (e % 128) / 32, l = e % 32;
            int u = three ? c[e] + 4 : c[e]; /* Q3_K: 0..7, the high bit in hmask */
            qs[32 * n + l] |= (uint8_t)((u & 3) << (2 * j));
            if (three) hmask[l] |= (uint8_t)((u >> 2) << (4 * n + j));
        }
        if (three) {
            pack_k3_scales(b + 96, p->sc);
            put16(b + 108, p->d);
        } else {
            for (int s = 0; s < 16; s++) b[s] = (uint8_t)(p->sc[s] | p->m[s] << 4);
            put16(b + 80, p->d);
            put16(b + 82, p->dmin);
        }
        break;
    }
    case SLATE__SRC_Q4_K:
    case SLATE__SRC_Q5_K: {
        bool five = ti->type == SLATE__SRC_Q5_K;
        put16(b, p->d);
        put16(b + 2, p->dmin);
        pack_k4_scales(b + 4, p->sc, p->m);
        uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
        for (int pr = 0; pr < 4; pr++)
            for (int l = 0; l < 32; l++)
                qs[32 * pr + l] = (uint8_t)((c[64 * pr + l] & 15) | (c[64 * pr + 32 + l] & 15) << 4);
        if (five)
            for (int e = 0; e < 256; e++) qh[e % 32] |= (uint8_t)((c[e] >> 4) << (e / 32));
        break;
    }
    case SLATE__SRC_Q6_K: { /* ggml's quantize_row_q6_K */
        uint8_t *ql = b, *qh = b + 128;
        for (int n = 0; n < 2; n++)
            for (int l = 0; l < 32; l++) {
                const int *L = c + 128 * n;
                ql[64 * n + l] = (uint8_t)((L[l] & 15) | (L[l + 64] & 15) << 4);
                ql[64 * n + l + 32] = (uint8_t)((L[l + 32] & 15) | (L[l + 96] & 15) << 4);
                qh[32 * n + l] = (uint8_t)((L[l] >> 4) | (L[l + 32] >> 4) << 2 |
                                           (L[l + 64] >> 4) << 4 | (L[l + 96] >> 4) << 6);
            }
        for (int s = 0; s < 16; s++) b[192 + s] = (uint8_t)(int8_t)p->sc[s];
        put16(b + 208, p->d);
        break;
    }
    case SLATE__SRC_IQ4_XS: {
        put16(b, p->d);
        uint16_t h = 0;
        for (int j = 0; j < 8; j++) {
            h |= (uint16_t)((p->sc[j] >> 4) << (2 * j));
            b[4 + j / 2] |= (uint8_t)((p->sc[j] & 15) << (4 * (j % 2)));
            pack_nib32(b + 8 + 16 * j, c + 32 * j);
        }
        b[2] = (uint8_t)h;
        b[3] = (uint8_t)(h >> 8);
        break;
    }
    default:
        fail_msg("no encoder for %s", ti->name);
    }
}

/* The values by the formulas, each f32 operation in ggml's order (products first: d * sc, then
 * times the code, then minus dmin * m). */
static void expect(const tinfo *ti, const kparams *p, float *y) {
    for (int e = 0; e < ti->elems; e++) {
        int c = p->code[e];
        int s16 = e / 16, s32 = e / 32;
        switch (ti->type) {
        case SLATE__SRC_Q8_0: y[e] = p->d * (float)c; break;
        case SLATE__SRC_Q4_0: y[e] = p->d * (float)(c - 8); break;
        case SLATE__SRC_Q4_1: y[e] = p->d * (float)c + p->dmin; break;
        case SLATE__SRC_Q5_0: y[e] = p->d * (float)(c - 16); break;
        case SLATE__SRC_Q5_1: y[e] = p->d * (float)c + p->dmin; break;
        case SLATE__SRC_IQ4_NL: y[e] = p->d * (float)kv[c]; break;
        case SLATE__SRC_Q2_K:
            y[e] = p->d * (float)p->sc[s16] * (float)c - p->dmin * (float)p->m[s16];
            break;
        case SLATE__SRC_Q3_K: y[e] = p->d * (float)p->sc[s16] * (float)c; break;
        case SLATE__SRC_Q4_K:
        case SLATE__SRC_Q5_K:
            y[e] = p->d * (float)p->sc[s32] * (float)c - p->dmin * (float)p->m[s32];
            break;
        case SLATE__SRC_Q6_K: y[e] = p->d * (float)p->sc[s16] * (float)(c - 32); break;
        case SLATE__SRC_IQ4_XS: y[e] = p->d * (float)(p->sc[s32] - 32) * (float)kv[c]; break;
        default: fail_msg("no formula for %s", ti->name);
        }
    }
}

static int rand_in(uint64_t *rng, int lo, int hi) {
    return lo + (int)(tu_rand(rng) % (uint64_t)(hi - lo + 1));
}

/* An f16 value of magnitude 2^lo .. 2^hi with a random mantissa (and sign when signed). */
static float rand_f16(uint64_t *rng, int lo, int hi, bool sign) {
    float v = ldexpf(1.0f + (float)rand_in(rng, 0, 1023) / 1024.0f, rand_in(rng, lo, hi));
    if (sign && (tu_rand(rng) & 1)) v = -v;
    return slate__f16_to_f32(slate__f32_to_f16(v));
}

static void rand_params(const tinfo *ti, uint64_t *rng, kparams *p) {
    memset(p, 0, sizeof *p);
    /* Exponents from subnormal f16 (2^-24 .. 2^-15) to large; signed d for every type. */
    p->d = rand_f16(rng, -24, 6, true);
    p->dmin = rand_f16(rng, -24, 6, true);
    for (int s = 0; s < ti->n_sub; s++) {
        p->sc[s] = rand_in(rng, ti->sc_lo, ti->sc_hi);
        p->m[s] = ti->m_hi ? rand_in(rng, 0, ti->m_hi) : 0;
    }
    for (int e = 0; e < ti->elems; e++) p->code[e] = rand_in(rng, ti->code_lo, ti->code_hi);
}

static const tinfo *info(slate__src_type t) {
    for (size_t i = 0; i < N_TYPES; i++)
        if (types[i].type == t) return &types[i];
    fail_msg("type %d not in the table", (int)t);
    return NULL;
}

/* ---- dequantization ---------------------------------------------------------------------- */

/* The brief's example, Q4_K with d = 1, dmin = 0.5, sc_j = j + 1, m_j = j, code_i = i % 16:
 * element i of sub-block j = (j + 1) * (i % 16) - 0.5 * j. Then sub-blocks 4..7 with scales
 * and minimums >= 16, whose top 2 bits live in the bytes of sub-blocks 0..7 (the packed 6-bit
 * layout), checked against literal values. */
static void q4_k_hand_blocks_dequantize_to_the_formula(void **st) {
    (void)st;
    kparams p;
    memset(&p, 0, sizeof p);
    p.d = 1.0f;
    p.dmin = 0.5f;
    for (int j = 0; j < 8; j++) {
        p.sc[j] = j + 1;
        p.m[j] = j;
    }
    for (int i = 0; i < 256; i++) p.code[i] = i % 16;
    uint8_t blk[144];
    encode(info(SLATE__SRC_Q4_K), &p, blk);
    float y[256];
    slate__ggml_dequantize(SLATE__SRC_Q4_K, blk, y, 256);
    for (int i = 0; i < 256; i++) {
        int j = i / 32;
        float want = (float)(j + 1) * (float)(i % 16) - 0.5f * (float)j;
        if (y[i] != want) fail_msg("Q4_K element %d: %g, expected %g", i, y[i], want);
    }
    /* sc_j = 8 j + 5 (5..61), m_j = 63 - 7 j (63..14): bits 4-5 set in most of them. */
    for (int j = 0; j < 8; j++) {
        p.sc[j] = 8 * j + 5;
        p.m[j] = 63 - 7 * j;
    }
    encode(info(SLATE__SRC_Q4_K), &p, blk);
    /* The packing by hand for sub-block 7: sc 61 = 0b111101, m 14 = 0b001110: byte 11 holds
     * the low nibbles (0xd | 0xe << 4), bytes 3 and 7 (the 4th scale and minimum) the top bits. */
    assert_int_equal(blk[4 + 11], 0xed);
    assert_int_equal(blk[4 + 3] >> 6, 3);
    assert_int_equal(blk[4 + 7] >> 6, 0);
    slate__ggml_dequantize(SLATE__SRC_Q4_K, blk, y, 256);
    assert_true(y[0] == 5.0f * 0 - 0.5f * 63);       /* j 0, code 0 */
    assert_true(y[15] == 5.0f * 15 - 0.5f * 63);     /* j 0, code 15 */
    assert_true(y[4 * 32 + 3] == 37.0f * 3 - 0.5f * 35);   /* j 4: sc 37, m 35 */
    assert_true(y[7 * 32 + 31] == 61.0f * 15 - 0.5f * 14); /* j 7: sc 61, m 14 */
    assert_true(y[6 * 32 + 9] == 53.0f * 9 - 0.5f * 21);   /* j 6: sc 53, m 21 */
}

/* One hand-made block per type, values that are exact in f32, against literal expectations
 * from the formula; then the formula routine on the same block. */
static void every_type_dequantizes_hand_blocks_by_its_formula(void **st) {
    (void)st;
    for (size_t t = 0; t < N_TYPES; t++) {
        const tinfo *ti = &types[t];
        kparams p;
        memset(&p, 0, sizeof p);
        p.d = -0.25f; /* negative d: Q3_K's and Q6_K's signed scales make signs common anyway */
        p.dmin = 0.125f;
        int span = ti->code_hi - ti->code_lo + 1;
        for (int e = 0; e < ti->elems; e++) p.code[e] = ti->code_lo + (e * 7 + e / 32) % span;
        for (int s = 0; s < ti->n_sub; s++) {
            int ss = ti->sc_hi - ti->sc_lo + 1;
            p.sc[s] = ti->sc_lo + (s * 11 + 3) % ss; /* reaches the high bits of 6-bit scales */
            p.m[s] = ti->m_hi ? (s * 5 + 1) % (ti->m_hi + 1) : 0;
        }
        uint8_t blk[256];
        encode(ti, &p, blk);
        float y[256], want[256];
        slate__ggml_dequantize(ti->type, blk, y, ti->elems);
        expect(ti, &p, want);
        for (int e = 0; e < ti->elems; e++)
            if (y[e] != want[e])
                fail_msg("%s element %d: %g, expected %g (code %d)", ti->name, e, y[e], want[e],
                         p.code[e]);
    }
    /* Literal spot checks (d = -0.25, dmin = 0.125 as above; codes and scales by the patterns):
     * Q3_K element 200: code (1400 + 6) % 8 - 4 = 2, sub-block 12: scale (132 + 3) % 64 - 32
     * = 7 - 32 = -25 -> -0.25 * -25 * 2 = 12.5; its hmask bit is set (2 + 4 = 6 >= 4). */
    kparams p;
    memset(&p, 0, sizeof p);
    p.d = -0.25f;
    for (int e = 0; e < 256; e++) p.code[e] = -4 + (e * 7 + e / 32) % 8;
    for (int s = 0; s < 16; s++) p.sc[s] = -32 + (s * 11 + 3) % 64;
    uint8_t blk[110];
    encode(info(SLATE__SRC_Q3_K), &p, blk);
    float y[256];
    slate__ggml_dequantize(SLATE__SRC_Q3_K, blk, y, 256);
    assert_true(y[200] == 12.5f);
    /* element 200: half 1, group 2, position 8: hmask[8] bit 4 * 1 + 2 = 6 */
    assert_int_equal((blk[8] >> 6) & 1, 1);
    /* Q6_K: element 172 (half 1, group 1, position 12) is the low nibble of ql[64 + 12 + 32]
     * and bits 2-3 of qh[32 + 12]; its scale is scales[8 + 2 + 0]. */
    memset(&p, 0, sizeof p);
    p.d = 0.5f;
    for (int s = 0; s < 16; s++) p.sc[s] = s == 10 ? -3 : 1;
    for (int e = 0; e < 256; e++) p.code[e] = e == 172 ? 63 : 32;
    uint8_t b6[210];
    encode(info(SLATE__SRC_Q6_K), &p, b6);
    assert_int_equal(b6[64 + 12 + 32] & 15, 15);
    assert_int_equal((b6[128 + 32 + 12] >> 2) & 3, 3);
    float y6[256];
    slate__ggml_dequantize(SLATE__SRC_Q6_K, b6, y6, 256);
    for (int e = 0; e < 256; e++) assert_true(y6[e] == (e == 172 ? -46.5f : 0.0f));
}

/* Random blocks (random signed f16 d and dmin from subnormal to 2^6, random scales and codes):
 * the dequantization equals the formula bit for bit (ggml's operation order). */
static void random_blocks_dequantize_bit_exact(void **st) {
    (void)st;
    uint64_t seed = tu_seed(), rng = seed;
    for (size_t t = 0; t < N_TYPES; t++) {
        const tinfo *ti = &types[t];
        for (int it = 0; it < 300; it++) {
            kparams p;
            rand_params(ti, &rng, &p);
            uint8_t blk[256];
            encode(ti, &p, blk);
            float y[256], want[256];
            slate__ggml_dequantize(ti->type, blk, y, ti->elems);
            expect(ti, &p, want);
            if (memcmp(y, want, sizeof(float) * (size_t)ti->elems) != 0)
                fail_msg("%s block %d differs from the formula (seed %llu)", ti->name, it,
                         (unsigned long long)seed);
        }
    }
}

/* Several blocks in a row: block b's values land at b * elems; slate__src_to_f32 and
 * slate__src_nbytes agree with the geometry. */
static void runs_of_blocks_and_sizes_follow_the_geometry(void **st) {
    (void)st;
    uint64_t seed = tu_seed(), rng = seed;
    for (size_t t = 0; t < N_TYPES; t++) {
        const tinfo *ti = &types[t];
        int32_t elems, bytes;
        slate__ggml_block(ti->type, &elems, &bytes);
        assert_int_equal(elems, ti->elems);
        assert_int_equal(bytes, ti->bytes);
        assert_true(slate__ggml_is_block(ti->type));
        assert_string_equal(slate__src_type_name(ti->type), ti->name);
        bool ok;
        assert_int_equal(slate__src_nbytes(ti->type, (uint64_t)elems * 3, &ok), (size_t)bytes * 3);
        assert_true(ok);
        slate__src_nbytes(ti->type, (uint64_t)elems + 16, &ok);
        assert_false(ok);
        uint8_t run[3 * 256];
        float want[3 * 256], y[3 * 256];
        for (int b = 0; b < 3; b++) {
            kparams p;
            rand_params(ti, &rng, &p);
            encode(ti, &p, run + b * bytes);
            expect(ti, &p, want + b * elems);
        }
        slate__src_to_f32(ti->type, run, y, 3 * elems);
        assert_memory_equal(y, want, sizeof(float) * 3 * (size_t)elems);
    }
    assert_false(slate__ggml_is_block(SLATE__SRC_F16));
}

/* ---- the dtypes that hold GGUF K-quant and IQ4 bytes --------------------------------------- */

/* The converter copies Q4_K / Q5_K / Q6_K / Q3_K / Q2_K / IQ4_NL / IQ4_XS bytes into q4_k /
 * q5_k / q6_k / q3_k / q2_k / iq4_nl / iq4_xs packages, so the runtime's reference dequantization
 * of those dtypes (slate__ref_dequant,
 * kernels/ref/quant.c: the specification every kernel is checked against) must give ggml's
 * values bit for bit, whatever the bytes: matrices of random super-blocks (every code value,
 * Q5_K's every qh byte so every fifth-bit pattern of the eight sub-blocks, random 6-bit (Q3_K,
 * IQ4_XS: offset) scales and minimums / int8 / 4-bit scales), the f16 d (and dmin) drawn from
 * both signs, zero, subnormals, small, plain and large values (up to 65504: a finite scale
 * gives finite values), 3 rows of 2 super-blocks (16 IQ4_NL blocks), read from every start
 * column and length so a block boundary falls anywhere. */
static void ref_dequant_of_copied_ggml_formats_is_ggml_bit_for_bit(void **st) {
    (void)st;
    static const uint16_t scales[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400,
                                      0x1000, 0x9555, 0x3c00, 0xbc00, 0x5c00, 0x7bff, 0xfbff};
    static const struct {
        slate__src_type src;
        slate_dtype dt;
        int elems;
        size_t bytes;
        int n_f16, f16_at, n_codes;  /* f16 scales (d, dmin) at f16_at; codes 0..n_codes-1 */
    } fmts[] = {
        {SLATE__SRC_Q4_K, SLATE_DTYPE_Q4_K, 256, 144, 2, 0, 16},
        {SLATE__SRC_Q6_K, SLATE_DTYPE_Q6_K, 256, 210, 1, 208, 64},
        {SLATE__SRC_Q5_K, SLATE_DTYPE_Q5_K, 256, 176, 2, 0, 32},
        {SLATE__SRC_Q3_K, SLATE_DTYPE_Q3_K, 256, 110, 1, 108, 8},
        {SLATE__SRC_Q2_K, SLATE_DTYPE_Q2_K, 256, 84, 2, 80, 4},
        {SLATE__SRC_IQ4_NL, SLATE_DTYPE_IQ4_NL, 32, 18, 1, 0, 16},
        {SLATE__SRC_IQ4_XS, SLATE_DTYPE_IQ4_XS, 256, 136, 1, 0, 16},
    };
    const int n_sc = (int)(sizeof scales / sizeof scales[0]);
    uint64_t seed = tu_seed(), rng = seed;
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        slate__src_type src = fmts[k].src;
        slate_dtype dt = fmts[k].dt;
        size_t bytes = fmts[k].bytes;
        bool six = dt == SLATE_DTYPE_Q6_K, five = dt == SLATE_DTYPE_Q5_K;
        bool three = dt == SLATE_DTYPE_Q3_K, two = dt == SLATE_DTYPE_Q2_K;
        bool nl = dt == SLATE_DTYPE_IQ4_NL, xs = dt == SLATE_DTYPE_IQ4_XS;
        assert_int_equal(bytes, six     ? sizeof(slate__block_q6_k)
                                : five  ? sizeof(slate__block_q5_k)
                                : three ? sizeof(slate__block_q3_k)
                                : two   ? sizeof(slate__block_q2_k)
                                : nl    ? sizeof(slate__block_iq4_nl)
                                : xs    ? sizeof(slate__block_iq4_xs)
                                        : sizeof(slate__block_q4_k));
        enum { N_OUT = 3, N_IN = 512 };
        const int elems = fmts[k].elems, N_BLK = N_OUT * N_IN / elems;
        uint8_t w[N_OUT * N_IN / 256 * 210];
        float want[N_OUT * N_IN], got[N_IN];
        bool seen[64] = {false}, seen_qh[256] = {false}, seen_sc[64] = {false};
        for (int it = 0; it < 200; it++) {
            for (size_t i = 0; i < N_BLK * bytes; i++) w[i] = (uint8_t)tu_rand(&rng);
            for (int b = 0; b < N_BLK; b++) {
                uint8_t *blk = w + (size_t)b * bytes;
                /* half the blocks take an edge d (and dmin), the others keep random finite ones */
                for (int f = 0; f < fmts[k].n_f16; f++) {
                    uint8_t *h = blk + fmts[k].f16_at + 2 * f;
                    uint16_t v = it % 2 ? scales[(it / 2 + 3 * b + 5 * f) % n_sc]
                                        : (uint16_t)(h[0] | h[1] << 8);
                    if ((v & 0x7c00) == 0x7c00) v &= 0xbbff; /* inf / NaN: finite instead */
                    h[0] = (uint8_t)v;
                    h[1] = (uint8_t)(v >> 8);
                }
            }
            slate__ggml_dequantize(src, w, want, N_OUT * N_IN);
            slate__wmat m;
            slate__wmat_init(&m, w, dt, elems, false, N_OUT, N_IN);
            assert_int_equal(m.row_bytes, (size_t)(N_IN / elems) * bytes);
            for (int o = 0; o < N_OUT; o++) {
                int i0 = (int)(tu_rand(&rng) % N_IN), n = 1 + (int)(tu_rand(&rng) % (N_IN - i0));
                if (it < 2) i0 = 0, n = N_IN;
                slate__ref_dequant(&m, o, i0, n, got);
                if (memcmp(got, want + o * N_IN + i0, sizeof(float) * (size_t)n) != 0)
                    for (int i = 0; i < n; i++)
                        if (memcmp(&got[i], &want[o * N_IN + i0 + i], sizeof(float)))
                            fail_msg("%s row %d element %d: slate__ref_dequant gives %.9g, ggml "
                                     "%.9g (pass %d, seed %llu)", slate_dtype_name(dt), o, i0 + i,
                                     got[i], want[o * N_IN + i0 + i], it,
                                     (unsigned long long)seed);
            }
            for (int b = 0; b < N_BLK; b++) { /* the codes drawn (the layout of quant.h) */
                const uint8_t *blk = w + (size_t)b * bytes;
                for (int e = 0; e < elems; e++) {
                    int n = e / 128, g = (e % 128) / 32, l = e % 32, j = e / 32;
                    const uint8_t *qs = blk + (five ? 48 : 16); /* Q5_K: after qh[32] */
                    int c;
                    if (nl || xs) /* Q4_0's nibble order per 32, after d (IQ4_XS: + 6 bytes) */
                        c = l < 16 ? blk[(xs ? 8 + 16 * j : 2) + l] & 15
                                   : blk[(xs ? 8 + 16 * j : 2) + l - 16] >> 4;
                    else if (six)
                        c = (g < 2 ? blk[64 * n + 32 * (g % 2) + l] & 15
                                   : blk[64 * n + 32 * (g % 2) + l] >> 4) |
                            ((blk[128 + 32 * n + l] >> (2 * g)) & 3) << 4;
                    else if (three) /* low 2 bits in qs (at 32), third in hmask */
                        c = ((blk[32 + 32 * n + l] >> (2 * g)) & 3) |
                            ((blk[l] >> (4 * n + g)) & 1) << 2;
                    else if (two)
                        c = (blk[16 + 32 * n + l] >> (2 * g)) & 3;
                    else
                        c = j % 2 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 15;
                    if (five) c |= ((blk[16 + l] >> j) & 1) << 4;
                    seen[c] = true;
                }
                if (five)
                    for (int l = 0; l < 32; l++) seen_qh[blk[16 + l]] = true;
                if (three) /* every 6-bit scale, so both sign sides of the offset 32 */
                    for (int s = 0; s < 16; s++) seen_sc[slate__q3k_scale(blk + 96, s) + 32] = true;
                if (xs)
                    for (int s = 0; s < 8; s++) seen_sc[slate__iq4xs_scale(blk, s) + 32] = true;
            }
        }
        if (five)
            for (int h = 0; h < 256; h++)
                if (!seen_qh[h]) fail_msg("q5_k: qh byte %#x never drawn", h);
        if (three || xs)
            for (int c = 0; c < 64; c++)
                if (!seen_sc[c])
                    fail_msg("%s: scale %d never drawn", slate_dtype_name(dt), c - 32);
        for (int c = 0; c < fmts[k].n_codes; c++)
            if (!seen[c]) fail_msg("%s: code %d never drawn", slate_dtype_name(dt), c);
    }
}

/* ---- transcoding ------------------------------------------------------------------------- */

/* Transcoded blocks (every type with a transcode layout: Q4_K's q4 b32 asym too, though its
 * default is a copy), read back by the reference kernels' dequantization of the slate layout,
 * equal the ggml dequantization within the f16 rounding of each sub-block scale and minimum:
 * |err| <= 2^-11 (|d sc| |code| + |dmin m|) (half an f16 ulp, relative; subnormal products are
 * exact), plus 2 f32 roundings of that size. Q5_0 and IQ4_NL keep their own d: equal. Q3_K's
 * negative scales reach the symmetric layout as negative d. */
static void transcode_equals_dequantize_within_the_scale_rounding(void **st) {
    (void)st;
    uint64_t seed = tu_seed(), rng = seed;
    bool saw_negative_d = false;
    for (size_t t = 0; t < N_TYPES; t++) {
        const tinfo *ti = &types[t];
        slate_dtype dt;
        int32_t block;
        bool asym;
        if (!slate__ggml_transcode_layout(ti->type, &dt, &block, &asym)) continue;
        for (int it = 0; it < 300; it++) {
            kparams p;
            rand_params(ti, &rng, &p);
            /* Scales that fit f16 after multiplying (|d| <= 2^6 * 2, |sc| <= 63). */
            uint8_t blk[256], out[512];
            encode(ti, &p, blk);
            float bad = 0;
            assert_int_equal(slate__ggml_transcode(ti->type, blk, ti->elems, out, &bad), -1);
            slate__wmat w;
            slate__wmat_init(&w, out, dt, block, asym, 1, ti->elems);
            float x[256], y[256];
            slate__ggml_dequantize(ti->type, blk, x, ti->elems);
            slate__ref_dequant(&w, 0, 0, ti->elems, y);
            bool exact = slate__ggml_transcode_exact(ti->type);
            for (int e = 0; e < ti->elems; e++) {
                double dl, ml = 0, q = fabs((double)p.code[e]);
                int s = ti->n_sub == 16 ? e / 16 : e / 32;
                switch (ti->type) {
                case SLATE__SRC_Q2_K:
                case SLATE__SRC_Q4_K:
                    dl = (double)p.d * p.sc[s];
                    ml = (double)p.dmin * p.m[s];
                    break;
                case SLATE__SRC_Q3_K: dl = (double)p.d * p.sc[s]; break;
                case SLATE__SRC_IQ4_XS:
                    dl = (double)p.d * (p.sc[s] - 32);
                    q = abs(kv[p.code[e]]);
                    break;
                default: dl = 0; break; /* exact types */
                }
                double mag = fabs(dl) * q + fabs(ml);
                double tol = exact ? 0.0 : mag * (0x1p-11 + 4 * (double)FLT_EPSILON);
                if (!(fabs((double)y[e] - (double)x[e]) <= tol))
                    fail_msg("%s block %d element %d: transcoded %.9g, dequantized %.9g, bound %g "
                             "(seed %llu)", ti->name, it, e, y[e], x[e], tol,
                             (unsigned long long)seed);
            }
            if (ti->type == SLATE__SRC_Q3_K)
                for (int s = 0; s < 16; s++)
                    saw_negative_d |= (out[s * 10 + 1] & 0x80) && p.sc[s] * p.d < 0;
        }
    }
    assert_true(saw_negative_d);
}

/* The routes: which slate layout each type lands in by default (Q2_K..Q6_K, IQ4_NL, IQ4_XS
 * copied as q2_k..q6_k, iq4_nl, iq4_xs); the layout each transcode writes (Q4_K: q4 b32 asym,
 * Q2_K / Q3_K: q4 b16, IQ4: q8_0, asked for; the other copied types and the requantized one
 * have none). */
static void each_type_has_its_nearest_layout(void **st) {
    (void)st;
    static const struct {
        slate__src_type t;
        slate__ggml_route r;
        slate_dtype dt;
        int32_t block;
        bool asym;
    } want[] = {
        {SLATE__SRC_Q8_0, SLATE__ROUTE_COPY, SLATE_DTYPE_Q8_0, 32, false},
        {SLATE__SRC_Q4_0, SLATE__ROUTE_COPY, SLATE_DTYPE_Q4, 32, false},
        {SLATE__SRC_Q4_1, SLATE__ROUTE_COPY, SLATE_DTYPE_Q4, 32, true},
        {SLATE__SRC_Q4_K, SLATE__ROUTE_COPY, SLATE_DTYPE_Q4_K, 256, false},
        {SLATE__SRC_Q2_K, SLATE__ROUTE_COPY, SLATE_DTYPE_Q2_K, 256, false},
        {SLATE__SRC_Q3_K, SLATE__ROUTE_COPY, SLATE_DTYPE_Q3_K, 256, false},
        {SLATE__SRC_Q5_0, SLATE__ROUTE_TRANSCODE, SLATE_DTYPE_Q8_0, 32, false},
        {SLATE__SRC_IQ4_NL, SLATE__ROUTE_COPY, SLATE_DTYPE_IQ4_NL, 32, false},
        {SLATE__SRC_IQ4_XS, SLATE__ROUTE_COPY, SLATE_DTYPE_IQ4_XS, 256, false},
        {SLATE__SRC_Q5_1, SLATE__ROUTE_REQUANT, SLATE_DTYPE_Q8_0, 32, false},
        {SLATE__SRC_Q5_K, SLATE__ROUTE_COPY, SLATE_DTYPE_Q5_K, 256, false},
        {SLATE__SRC_Q6_K, SLATE__ROUTE_COPY, SLATE_DTYPE_Q6_K, 256, false},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        slate_dtype dt = SLATE_DTYPE_F32;
        int32_t block = 0;
        bool asym = false;
        assert_int_equal(slate__ggml_layout(want[i].t, &dt, &block, &asym), want[i].r);
        assert_int_equal(dt, want[i].dt);
        assert_int_equal(block, want[i].block);
        assert_int_equal(asym, want[i].asym);
        slate_dtype tdt = SLATE_DTYPE_F32;
        int32_t tblock = 0;
        bool tasym = false;
        bool tc = slate__ggml_transcode_layout(want[i].t, &tdt, &tblock, &tasym);
        if (want[i].t == SLATE__SRC_Q4_K || want[i].t == SLATE__SRC_Q2_K ||
            want[i].t == SLATE__SRC_Q3_K) { /* the q4 they transcode to when it is asked for */
            assert_true(tc);
            assert_int_equal(tdt, SLATE_DTYPE_Q4);
            assert_int_equal(tblock, want[i].t == SLATE__SRC_Q4_K ? 32 : 16);
            assert_int_equal(tasym, want[i].t != SLATE__SRC_Q3_K);
        } else if (want[i].t == SLATE__SRC_IQ4_NL || want[i].t == SLATE__SRC_IQ4_XS) {
            assert_true(tc); /* the q8_0 they transcode to when it is asked for */
            assert_int_equal(tdt, SLATE_DTYPE_Q8_0);
            assert_int_equal(tblock, 32);
            assert_false(tasym);
        } else if (want[i].r == SLATE__ROUTE_TRANSCODE) {
            assert_true(tc);
            assert_int_equal(tdt, want[i].dt);
            assert_int_equal(tblock, want[i].block);
            assert_int_equal(tasym, want[i].asym);
        } else {
            assert_false(tc);
        }
    }
    slate_dtype dt = SLATE_DTYPE_F16;
    int32_t block = 7;
    bool asym = true;
    assert_int_equal(slate__ggml_layout(SLATE__SRC_F16, &dt, &block, &asym), SLATE__ROUTE_NONE);
    assert_int_equal(block, 7);
}

/* Scales that are not finite are found by block; a sub-block scale past the f16 range stops
 * the transcode at its block. */
static void nonfinite_and_overflowing_scales_are_found_by_block(void **st) {
    (void)st;
    uint64_t rng = tu_seed();
    for (size_t t = 0; t < N_TYPES; t++) {
        const tinfo *ti = &types[t];
        uint8_t run[4 * 256];
        for (int b = 0; b < 4; b++) {
            kparams p;
            rand_params(ti, &rng, &p);
            encode(ti, &p, run + b * ti->bytes);
        }
        float bad = 0;
        assert_int_equal(slate__ggml_first_nonfinite(ti->type, run, 4 * (uint64_t)ti->bytes, &bad), -1);
        /* d of block 2 to NaN, and (types with dmin) dmin of block 3 to -inf. */
        static const struct { slate__src_type t; int d_at, dmin_at; } at[] = {
            {SLATE__SRC_Q8_0, 0, -1},   {SLATE__SRC_Q4_0, 0, -1},   {SLATE__SRC_Q4_1, 0, 2},
            {SLATE__SRC_Q5_0, 0, -1},   {SLATE__SRC_Q5_1, 0, 2},    {SLATE__SRC_IQ4_NL, 0, -1},
            {SLATE__SRC_Q2_K, 80, 82},  {SLATE__SRC_Q3_K, 108, -1}, {SLATE__SRC_Q4_K, 0, 2},
            {SLATE__SRC_Q5_K, 0, 2},    {SLATE__SRC_Q6_K, 208, -1}, {SLATE__SRC_IQ4_XS, 0, -1}};
        int d_at = -1, dmin_at = -1;
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
            if (at[k].t == ti->type) d_at = at[k].d_at, dmin_at = at[k].dmin_at;
        assert_true(d_at >= 0);
        if (dmin_at >= 0) {
            run[3 * ti->bytes + dmin_at] = 0x00;
            run[3 * ti->bytes + dmin_at + 1] = 0xfc;
            assert_int_equal(slate__ggml_first_nonfinite(ti->type, run, 4 * (uint64_t)ti->bytes, &bad), 3);
            assert_true(isinf(bad) && bad < 0);
        }
        run[2 * ti->bytes + d_at] = 0x00;
        run[2 * ti->bytes + d_at + 1] = 0x7e;
        assert_int_equal(slate__ggml_first_nonfinite(ti->type, run, 4 * (uint64_t)ti->bytes, &bad), 2);
        assert_true(isnan(bad));
    }
    /* Q4_K with d = 65504 (the largest f16) and sub-block 0's scale 2: 131008 overflows. */
    const tinfo *ti = info(SLATE__SRC_Q4_K);
    uint8_t run[2 * 144], out[2 * 160];
    for (int b = 0; b < 2; b++) {
        kparams p;
        rand_params(ti, &rng, &p);
        p.d = b == 1 ? 65504.0f : 0.5f;
        p.sc[0] = 2;
        encode(ti, &p, run + b * 144);
    }
    float bad = 0;
    assert_int_equal(slate__ggml_transcode(SLATE__SRC_Q4_K, run, 512, out, &bad), 1);
    assert_true(bad == 131008.0f);
}

/* The f16 limit of a transcoded sub-block scale, exactly: the f32 product d * sc is rounded to
 * nearest even, so a magnitude below 65520 (halfway between 65504, the largest f16, and 65536)
 * is stored as +-65504 and only 65520 or more, which rounds to infinity, is refused
 * (docs/format.md, "K-quant transcoding"). Q4_K: 1074 * 61 = 65514 as d' and -(dmin * m) =
 * -65514 as m' in block 0; 1040 * 63 = 65520 in block 1. */
static void sub_block_scales_round_to_65504_below_65520_and_are_refused_from_it(void **st) {
    (void)st;
    const tinfo *ti = info(SLATE__SRC_Q4_K);
    uint8_t run[2 * 144], out[2 * 8 * 20];
    for (int b = 0; b < 2; b++) {
        kparams p;
        memset(&p, 0, sizeof p);
        p.d = b == 0 ? 1074.0f : 1040.0f;
        p.dmin = b == 0 ? 1074.0f : 1.0f;
        for (int j = 0; j < 8; j++) p.sc[j] = p.m[j] = 1;
        if (b == 0) p.sc[0] = p.m[0] = 61;
        else p.sc[3] = 63;
        for (int e = 0; e < 256; e++) p.code[e] = e % 16;
        encode(ti, &p, run + b * 144);
    }
    float bad = 0;
    assert_int_equal(slate__ggml_transcode(SLATE__SRC_Q4_K, run, 256, out, &bad), -1);
    assert_int_equal(out[0] | out[1] << 8, 0x7bff);  /* d' = 65504 */
    assert_int_equal(out[2] | out[3] << 8, 0xfbff);  /* m' = -65504 */
    assert_int_equal(slate__ggml_transcode(SLATE__SRC_Q4_K, run, 512, out, &bad), 1);
    assert_true(bad == 65520.0f);
}

/* ---- the GGUF parser ----------------------------------------------------------------------- */

/* A v3 GGUF with one key (general.architecture) and one tensor "w" [ne0][2] of ggml type,
 * with the data its type and shape need (data_bytes of them). */
static void one_tensor_gguf(slate__buf *b, uint32_t type, uint64_t ne0, uint64_t data_bytes) {
    memset(b, 0, sizeof *b);
    slate__buf_append(b, "GGUF", 4);
    slate__buf_u32(b, 3);
    slate__buf_u64(b, 1);
    slate__buf_u64(b, 1);
    slate__buf_u64(b, 20);
    slate__buf_append(b, "general.architecture", 20);
    slate__buf_u32(b, SLATE__GGUF_STRING);
    slate__buf_u64(b, 5);
    slate__buf_append(b, "llama", 5);
    slate__buf_u64(b, 1);
    slate__buf_append(b, "w", 1);
    slate__buf_u32(b, 2);
    slate__buf_u64(b, ne0);
    slate__buf_u64(b, 2);
    slate__buf_u32(b, type);
    slate__buf_u64(b, 0);
    while (b->len % 32) slate__buf_append(b, "", 1);
    for (uint64_t i = 0; i < data_bytes; i++) slate__buf_append(b, "\x11", 1);
    assert_false(b->failed);
}

static void parser_sizes_every_type_it_reads(void **st) {
    (void)st;
    for (size_t t = 0; t < N_TYPES; t++) {
        const tinfo *ti = &types[t];
        uint64_t ne0 = 2 * (uint64_t)ti->elems, nbytes = 2 * 2 * (uint64_t)ti->bytes;
        slate__buf b;
        one_tensor_gguf(&b, ti->ggml, ne0, nbytes);
        slate__gguf *g = NULL;
        slate_error e;
        slate_status s = slate__gguf_open_mem(b.data, b.len, &g, &e);
        if (s) fail_msg("%s: %s", ti->name, e.message);
        const slate__gguf_tensor *w = slate__gguf_find_tensor(g, "w");
        assert_non_null(w);
        assert_int_equal(w->type, ti->ggml);
        assert_int_equal(w->nbytes, nbytes);
        assert_string_equal(slate__ggml_type_name(w->type), ti->name);
        slate__gguf_close(g);
        slate__buf_free(&b);
        /* One byte short: the tensor ends past the file. */
        one_tensor_gguf(&b, ti->ggml, ne0, nbytes - 1);
        assert_int_equal(slate__gguf_open_mem(b.data, b.len, &g, &e), SLATE_E_FORMAT);
        assert_non_null(strstr(e.message, "ends past the end of the file"));
        slate__buf_free(&b);
    }
}

static void parser_refuses_rows_that_are_not_whole_blocks(void **st) {
    (void)st;
    static const struct {
        uint32_t type;
        uint64_t ne0;
        const char *msg;
    } cases[] = {
        {12, 288, "tensor 'w': Q4_K needs ne[0] to be a multiple of 256, found 288"},
        {14, 32, "tensor 'w': Q6_K needs ne[0] to be a multiple of 256, found 32"},
        {23, 128, "tensor 'w': IQ4_XS needs ne[0] to be a multiple of 256, found 128"},
        {10, 200, "tensor 'w': Q2_K needs ne[0] to be a multiple of 256, found 200"},
        {6, 48, "tensor 'w': Q5_0 needs ne[0] to be a multiple of 32, found 48"},
        {20, 16, "tensor 'w': IQ4_NL needs ne[0] to be a multiple of 32, found 16"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        slate__buf b;
        one_tensor_gguf(&b, cases[c].type, cases[c].ne0, 4096);
        slate__gguf *g = NULL;
        slate_error e;
        assert_int_equal(slate__gguf_open_mem(b.data, b.len, &g, &e), SLATE_E_FORMAT);
        if (!strstr(e.message, cases[c].msg))
            fail_msg("case %zu: '%s' does not contain '%s'", c, e.message, cases[c].msg);
        assert_null(g);
        slate__buf_free(&b);
    }
}

/* Every ggml type id has its name; the ones slate does not read are refused by that name with
 * the way out; ids past ggml's enum are "unknown". */
static void parser_names_every_type_it_does_not_read(void **st) {
    (void)st;
    static const char *const names[SLATE__GGML_N_TYPES] = {
        "F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
        "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
        "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
        "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4",
        "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4", "NVFP4", "Q1_0", "Q2_0"};
    static const uint32_t read[] = {0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 30};
    for (uint32_t t = 0; t < SLATE__GGML_N_TYPES; t++) {
        assert_string_equal(slate__ggml_type_name(t), names[t]);
        bool reads = false;
        for (size_t k = 0; k < sizeof read / sizeof read[0]; k++) reads |= read[k] == t;
        if (reads) continue;
        slate__buf b;
        one_tensor_gguf(&b, t, 256, 4096);
        slate__gguf *g = NULL;
        slate_error e;
        assert_int_equal(slate__gguf_open_mem(b.data, b.len, &g, &e), SLATE_E_UNSUPPORTED);
        char want[160];
        snprintf(want, sizeof want, "tensor 'w' is %s, which slate does not read; convert from "
                 "an F16/BF16 GGUF or the Hugging Face folder", names[t]);
        if (!strstr(e.message, want)) fail_msg("type %u: '%s'", t, e.message);
        slate__buf_free(&b);
    }
    assert_string_equal(slate__ggml_type_name(SLATE__GGML_N_TYPES), "?");
    assert_string_equal(slate__ggml_type_name(UINT32_MAX), "?");
    slate__buf b;
    one_tensor_gguf(&b, 43, 256, 4096);
    slate__gguf *g = NULL;
    slate_error e;
    assert_int_equal(slate__gguf_open_mem(b.data, b.len, &g, &e), SLATE_E_UNSUPPORTED);
    assert_non_null(strstr(e.message, "tensor 'w': ggml type 43 is unknown (ggml's types are 0..42)"));
    slate__buf_free(&b);
}

/* ---- the converter ------------------------------------------------------------------------- */


/* A one-layer tiny model whose matrices (the embedding and the head too) are random blocks of
 * src_type: rows of 256. */
static tm_opts kq_opts(slate__src_type src_type) {
    tm_opts o = tm_default();
    o.n_layers = 1;
    o.dim = 256;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.ffn_dim = 256;
    o.tied = false;
    o.src_type = (int32_t)src_type;
    return o;
}

/* Converts o's import with cp into path, failing the test with the message. */
static void build(const slate__import *imp, const slate_convert_params *cp, const char *path) {
    slate_error err;
    if (slate__build_package(imp, cp, path, &err) != SLATE_OK) fail_msg("%s", err.message);
}

/* The K-quants by default: every matrix is q4_k / q5_k / q6_k / q3_k / q2_k holding exactly
 * the source bytes (the tied head reads the embedding's); with an explicit f32 dtype every
 * matrix is f32 equal, bit for bit, to the dequantization; asked for the q4 layout a type
 * transcodes to (--quantize int4 --asym for Q4_K, int4 --asym --block-size 16 for Q2_K, int4
 * --block-size 16 for Q3_K; every matrix by keep rule), the matrices hold exactly the
 * transcoded bytes (Q5_K / Q6_K, asked for q4 b32 asym, are requantized). */
static void k_quants_are_copied_or_exact_f32_or_transcoded_when_asked(void **st) {
    (void)st;
    static const struct {
        slate__src_type t;
        const char *dtype;
        size_t bytes; /* per super-block */
        int32_t q4_block; /* the q4 asked for */
        bool q4_asym, transcoded;
    } kt[] = {{SLATE__SRC_Q4_K, "q4_k", 144, 32, true, true},
              {SLATE__SRC_Q6_K, "q6_k", 210, 32, true, false},
              {SLATE__SRC_Q5_K, "q5_k", 176, 32, true, false},
              {SLATE__SRC_Q3_K, "q3_k", 110, 16, false, true},
              {SLATE__SRC_Q2_K, "q2_k", 84, 16, true, true}};
    enum { NK = sizeof kt / sizeof kt[0] };
    for (int k = 0; k < 2 * NK; k++) {
        bool tied = k >= NK;
        tm_opts o = kq_opts(kt[k % NK].t);
        o.tied = tied;
        slate__import imp;
        slate_error err;
        assert_int_equal(tm_import(&o, &imp, &err), SLATE_OK);
        char def[4096], f32[4096], q4[4096]; /* tu_tmp reuses one buffer */
        snprintf(def, sizeof def, "%s", tu_tmp("kq_default.slate"));
        snprintf(f32, sizeof f32, "%s", tu_tmp("kq_f32.slate"));
        snprintf(q4, sizeof q4, "%s", tu_tmp("kq_q4.slate"));
        slate_convert_keep rules[2];
        slate_convert_params cp = tm_params(&o, rules); /* nothing asked: dtype f32, not forced */
        build(&imp, &cp, def);
        cp.convert_quantized = true; /* slate convert --dtype fp32 */
        build(&imp, &cp, f32);
        cp.dtype = SLATE_DTYPE_Q4; /* --quantize int4 --asym --keep int4:'*.weight' */
        cp.asym = kt[k % NK].q4_asym;
        cp.block_size = kt[k % NK].q4_block;
        rules[0] = (slate_convert_keep){SLATE_DTYPE_Q4, "*.weight"};
        cp.n_keep = 1;
        build(&imp, &cp, q4);
        pkgview vd, vf, vq;
        pu_view_open(&vd, def);
        pu_view_open(&vf, f32);
        pu_view_open(&vq, q4);
        int n_q = 0;
        for (int32_t i = 0; i < imp.n_tensors; i++) {
            const slate__src_tensor *t = &imp.tensors[i];
            if (t->n_dims != 2) continue;
            assert_int_equal(t->type, o.src_type);
            n_q++;
            int64_t n = t->dims[0] * t->dims[1];
            const cJSON *e = pu_view_tensor(&vd, t->name);
            assert_string_equal(cJSON_GetObjectItem(e, "dtype")->valuestring, kt[k % NK].dtype);
            assert_int_equal((int)cJSON_GetObjectItem(e, "block")->valuedouble, 256);
            assert_null(cJSON_GetObjectItem(e, "asym"));
            size_t want_bytes = (size_t)n / 256 * kt[k % NK].bytes;
            assert_int_equal((size_t)t->nbytes, want_bytes);
            assert_int_equal((size_t)cJSON_GetObjectItem(e, "size")->valuedouble, want_bytes);
            if (memcmp(pu_view_data(&vd, e), t->data, want_bytes) != 0)
                fail_msg("tensor '%s': package bytes are not the source's", t->name);
            const cJSON *ef = pu_view_tensor(&vf, t->name);
            assert_string_equal(cJSON_GetObjectItem(ef, "dtype")->valuestring, "f32");
            float *deq = malloc(sizeof(float) * (size_t)n);
            slate__ggml_dequantize(t->type, t->data, deq, n);
            if (memcmp(pu_view_data(&vf, ef), deq, sizeof(float) * (size_t)n) != 0)
                fail_msg("tensor '%s': f32 package values are not the dequantization", t->name);
            free(deq);
            const cJSON *eq = pu_view_tensor(&vq, t->name);
            assert_string_equal(cJSON_GetObjectItem(eq, "dtype")->valuestring, "q4");
            int32_t qb = kt[k % NK].q4_block;
            assert_int_equal((int)cJSON_GetObjectItem(eq, "block")->valuedouble, qb);
            assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(eq, "asym")), kt[k % NK].q4_asym);
            if (kt[k % NK].transcoded) { /* Q5_K / Q6_K: requantized, checked by size only */
                size_t tc_bytes =
                    (size_t)n / (size_t)qb * slate__q4_block_bytes(qb, kt[k % NK].q4_asym);
                uint8_t *tc = malloc(tc_bytes);
                float bad;
                assert_int_equal(slate__ggml_transcode(t->type, t->data, n, tc, &bad), -1);
                if (memcmp(pu_view_data(&vq, eq), tc, tc_bytes) != 0)
                    fail_msg("tensor '%s': q4 package bytes are not the transcoded source",
                             t->name);
                free(tc);
            }
        }
        /* q k v o gate up down, the embedding and (untied) the head */
        assert_int_equal(n_q, tied ? 8 : 9);
        assert_int_equal(pu_view_tensor(&vd, "output.weight") == NULL, tied);
        pu_view_close(&vd);
        pu_view_close(&vf);
        pu_view_close(&vq);
        tm_import_free(&imp);
    }
}

/* The super-block dtypes and iq4_nl are not conversion targets (no quantizer makes them):
 * asked for as the dtype or by a keep rule, through the API, they are refused up front, not
 * failed per tensor (also from a Q5_K source, whose default is a q5_k copy), naming the GGUF
 * type they come from. */
static void copied_only_dtypes_are_refused_as_requested_dtypes(void **st) {
    (void)st;
    static const slate_dtype dts[] = {SLATE_DTYPE_Q4_K, SLATE_DTYPE_Q6_K, SLATE_DTYPE_Q5_K,
                                      SLATE_DTYPE_Q3_K, SLATE_DTYPE_Q2_K, SLATE_DTYPE_IQ4_NL,
                                      SLATE_DTYPE_IQ4_XS};
    static const char *const gguf[] = {"Q4_K", "Q6_K", "Q5_K", "Q3_K", "Q2_K", "IQ4_NL", "IQ4_XS"};
    for (int k = 0; k < 28; k++) {
        tm_opts o = kq_opts(k < 14 ? SLATE__SRC_Q4_K : SLATE__SRC_Q5_K);
        slate__import imp;
        slate_error err;
        assert_int_equal(tm_import(&o, &imp, &err), SLATE_OK);
        slate_dtype dt = dts[k % 7];
        slate_convert_keep rules[2];
        slate_convert_params cp = tm_params(&o, rules);
        cp.convert_quantized = true;
        if (k % 14 < 7) {
            cp.dtype = dt;
        } else {
            rules[0] = (slate_convert_keep){dt, "blk.*"};
            cp.n_keep = 1;
        }
        memset(&err, 0, sizeof err);
        assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("kq_req.slate"), &err),
                         SLATE_E_INVALID_ARG);
        char want[64];
        snprintf(want, sizeof want, "only copied from GGUF %s tensors", gguf[k % 7]);
        if (!strstr(err.message, slate_dtype_name(dt)) || !strstr(err.message, want))
            fail_msg("case %d: %s", k, err.message);
        tm_import_free(&imp);
    }
}

/* Logits of a short prompt. */
static void logits_of(const char *path, float *out) {
    slate_model *m = NULL;
    slate_error err;
    if (slate_model_open(path, NULL, &m, &err) != SLATE_OK) fail_msg("%s", err.message);
    slate_state *s = NULL;
    assert_int_equal(slate_state_create(m, NULL, &s, NULL), SLATE_OK);
    int32_t ids[6] = {1, 100, 37, 200, 5, 77};
    assert_int_equal(slate_state_predict(s, ids, 6, NULL, NULL), SLATE_OK);
    memcpy(out, slate_state_logits(s, NULL), sizeof(float) * TM_VOCAB);
    slate_state_free(s);
    slate_model_close(m);
}

/* Each type by default: its nearest layout in the package; the package runs (the run-time
 * kernels, not only the reference: q4_k / q5_k / q6_k / q3_k / q2_k / iq4_xs super-blocks and
 * iq4_nl blocks, also as a tied head and in the embedding lookup) and its
 * logits follow the f32 conversion of the same source. Tolerance: relative L2 error of the
 * logits below 2e-2. The weights differ from the f32 ones by the f16 rounding of scales
 * (2^-11 relative) or, requantized, by up to half an int8 step (~0.4% of a block's largest
 * value), or not at all (copied); the kernels also quantize activations to int8 (~0.4% per
 * product); with random weights through one layer the measured error is below 1e-2. */
static void every_type_converts_to_its_layout_and_runs_close_to_f32(void **st) {
    (void)st;
    static const struct {
        slate__src_type t;
        const char *dtype;
        int block;
        bool asym, tied;
    } cases[] = {
        {SLATE__SRC_Q4_K, "q4_k", 256, false, false}, {SLATE__SRC_Q4_K, "q4_k", 256, false, true},
        {SLATE__SRC_Q6_K, "q6_k", 256, false, false}, {SLATE__SRC_Q6_K, "q6_k", 256, false, true},
        {SLATE__SRC_Q2_K, "q2_k", 256, false, false}, {SLATE__SRC_Q2_K, "q2_k", 256, false, true},
        {SLATE__SRC_Q3_K, "q3_k", 256, false, false}, {SLATE__SRC_Q3_K, "q3_k", 256, false, true},
        {SLATE__SRC_Q5_0, "q8_0", 32, false, false},
        {SLATE__SRC_IQ4_NL, "iq4_nl", 32, false, false},
        {SLATE__SRC_IQ4_NL, "iq4_nl", 32, false, true},
        {SLATE__SRC_Q5_K, "q5_k", 256, false, false}, {SLATE__SRC_Q5_K, "q5_k", 256, false, true},
        {SLATE__SRC_IQ4_XS, "iq4_xs", 256, false, false},
        {SLATE__SRC_IQ4_XS, "iq4_xs", 256, false, true},
        {SLATE__SRC_Q5_1, "q8_0", 32, false, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tm_opts o = kq_opts(cases[c].t);
        o.tied = cases[c].tied;
        slate__import imp;
        slate_error err;
        assert_int_equal(tm_import(&o, &imp, &err), SLATE_OK);
        char def[4096], f32[4096];
        snprintf(def, sizeof def, "%s", tu_tmp("kq_type.slate"));
        snprintf(f32, sizeof f32, "%s", tu_tmp("kq_type_f32.slate"));
        slate_convert_keep rules[2];
        slate_convert_params cp = tm_params(&o, rules);
        if (slate__build_package(&imp, &cp, def, &err) != SLATE_OK)
            fail_msg("%s: %s", slate__src_type_name(cases[c].t), err.message);
        cp.convert_quantized = true;
        if (slate__build_package(&imp, &cp, f32, &err) != SLATE_OK)
            fail_msg("%s f32: %s", slate__src_type_name(cases[c].t), err.message);
        pkgview v;
        pu_view_open(&v, def);
        const char *names[] = {"token_embd.weight", "output.weight", "blk.0.attn_q.weight",
                               "blk.0.ffn_down.weight"};
        for (int k = 0; k < 4; k++) {
            const cJSON *e = pu_view_tensor(&v, names[k]);
            if (k == 1 && cases[c].tied) { /* the head is the embedding's matmul */
                assert_null(e);
                continue;
            }
            assert_string_equal(cJSON_GetObjectItem(e, "dtype")->valuestring, cases[c].dtype);
            assert_int_equal((int)cJSON_GetObjectItem(e, "block")->valuedouble, cases[c].block);
            assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(e, "asym")), cases[c].asym);
        }
        pu_view_close(&v);
        float lq[TM_VOCAB], lf[TM_VOCAB];
        logits_of(def, lq);
        logits_of(f32, lf);
        double num = 0, den = 0;
        for (int i = 0; i < TM_VOCAB; i++) {
            assert_true(isfinite(lq[i]));
            num += ((double)lq[i] - lf[i]) * ((double)lq[i] - lf[i]);
            den += (double)lf[i] * lf[i];
        }
        double rel = sqrt(num / den);
        if (!(rel < 2e-2))
            fail_msg("%s%s: logits relative error %g vs the f32 conversion",
                     slate__src_type_name(cases[c].t), cases[c].tied ? " tied" : "", rel);
        tm_import_free(&imp);
    }
}

/* A non-finite super-block scale is refused naming the tensor and the block (row 3 of
 * blk.0.attn_q.weight: block 3), whatever the route (the q4_k / q5_k / q6_k copies too: ggml would
 * give inf / NaN values); a sub-block scale past f16 stops the transcode (Q4_K asked for as
 * q4 b32 asym) with E_UNSUPPORTED naming the block and the way out, while the default copy of
 * that block keeps its finite values. */
static void convert_refuses_bad_super_block_scales_naming_tensor_and_block(void **st) {
    (void)st;
    static const struct {
        slate__src_type t;
        int at;            /* byte offset of the patched f16 in the block */
        uint16_t h;
        bool f32;          /* convert with an explicit f32 dtype (dequantize route) */
        bool q4asym;       /* ask for q4 b32 asym (the Q4_K transcode) */
        slate_status want;
        const char *msg;
    } cases[] = {
        {SLATE__SRC_Q4_K, 0, 0x7e00, false, false, SLATE_E_FORMAT,
         "tensor 'blk.0.attn_q.weight': the Q4_K block of 256 at element [3][0] has a scale "
         "that is not finite (nan)"},
        {SLATE__SRC_Q4_K, 2, 0xfc00, false, false, SLATE_E_FORMAT,
         "tensor 'blk.0.attn_q.weight': the Q4_K block of 256 at element [3][0] has a scale "
         "that is not finite (-inf)"},
        {SLATE__SRC_Q4_K, 2, 0x7c00, true, false, SLATE_E_FORMAT,
         "the Q4_K block of 256 at element [3][0] has a scale that is not finite (inf)"},
        {SLATE__SRC_Q4_K, 0, 0x7c00, false, true, SLATE_E_FORMAT,
         "the Q4_K block of 256 at element [3][0] has a scale that is not finite (inf)"},
        {SLATE__SRC_Q6_K, 208, 0xfc00, false, false, SLATE_E_FORMAT,
         "tensor 'blk.0.attn_q.weight': the Q6_K block of 256 at element [3][0] has a scale "
         "that is not finite (-inf)"},
        {SLATE__SRC_Q6_K, 208, 0x7e01, true, false, SLATE_E_FORMAT,
         "the Q6_K block of 256 at element [3][0] has a scale that is not finite (nan)"},
        {SLATE__SRC_Q5_K, 0, 0x7c00, false, false, SLATE_E_FORMAT,
         "tensor 'blk.0.attn_q.weight': the Q5_K block of 256 at element [3][0] has a scale "
         "that is not finite (inf)"},
        {SLATE__SRC_Q5_K, 2, 0x7e00, false, false, SLATE_E_FORMAT,
         "tensor 'blk.0.attn_q.weight': the Q5_K block of 256 at element [3][0] has a scale "
         "that is not finite (nan)"},
        {SLATE__SRC_Q5_K, 2, 0xfc00, true, false, SLATE_E_FORMAT,
         "the Q5_K block of 256 at element [3][0] has a scale that is not finite (-inf)"},
        {SLATE__SRC_Q2_K, 82, 0x7e00, false, false, SLATE_E_FORMAT,
         "the Q2_K block of 256 at element [3][0] has a scale that is not finite (nan)"},
        {SLATE__SRC_Q4_K, 0, 0x7bff, false, true, SLATE_E_UNSUPPORTED,
         "tensor 'blk.0.attn_q.weight': the Q4_K block of 256 at element [3][0] has a sub-block "
         "scale"},
        {SLATE__SRC_Q4_K, 0, 0x7bff, false, false, SLATE_OK, ""}, /* copied: finite values */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tm_opts o = kq_opts(cases[c].t);
        slate__import imp;
        slate_error err;
        assert_int_equal(tm_import(&o, &imp, &err), SLATE_OK);
        int32_t elems, bytes;
        slate__ggml_block(cases[c].t, &elems, &bytes);
        for (int32_t i = 0; i < imp.n_tensors; i++)
            if (strcmp(imp.tensors[i].name, "blk.0.attn_q.weight") == 0) {
                uint8_t *blk = (uint8_t *)imp.tensors[i].data + 3 * bytes; /* tm's own buffer */
                blk[cases[c].at] = (uint8_t)cases[c].h;
                blk[cases[c].at + 1] = (uint8_t)(cases[c].h >> 8);
                if (cases[c].h == 0x7bff) blk[4] = 63; /* sc 0 = 63: d * sc = 4126752 */
            }
        slate_convert_keep rules[2];
        slate_convert_params cp = tm_params(&o, rules);
        cp.convert_quantized = cases[c].f32;
        if (cases[c].q4asym) {
            cp.convert_quantized = true;
            cp.dtype = SLATE_DTYPE_Q4;
            cp.asym = true;
            rules[0] = (slate_convert_keep){SLATE_DTYPE_Q4, "*.weight"};
            cp.n_keep = 1;
        }
        memset(&err, 0, sizeof err);
        slate_status s = slate__build_package(&imp, &cp, tu_tmp("kq_bad.slate"), &err);
        if (s != cases[c].want || !strstr(err.message, cases[c].msg))
            fail_msg("case %zu: %s: %s", c, slate_status_name(s), err.message);
        if (s == SLATE_E_UNSUPPORTED) assert_non_null(strstr(err.message, "--keep f32:"));
        tm_import_free(&imp);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(q4_k_hand_blocks_dequantize_to_the_formula),
        cmocka_unit_test(every_type_dequantizes_hand_blocks_by_its_formula),
        cmocka_unit_test(random_blocks_dequantize_bit_exact),
        cmocka_unit_test(runs_of_blocks_and_sizes_follow_the_geometry),
        cmocka_unit_test(ref_dequant_of_copied_ggml_formats_is_ggml_bit_for_bit),
        cmocka_unit_test(transcode_equals_dequantize_within_the_scale_rounding),
        cmocka_unit_test(each_type_has_its_nearest_layout),
        cmocka_unit_test(nonfinite_and_overflowing_scales_are_found_by_block),
        cmocka_unit_test(sub_block_scales_round_to_65504_below_65520_and_are_refused_from_it),
        cmocka_unit_test(parser_sizes_every_type_it_reads),
        cmocka_unit_test(parser_refuses_rows_that_are_not_whole_blocks),
        cmocka_unit_test(parser_names_every_type_it_does_not_read),
        cmocka_unit_test(k_quants_are_copied_or_exact_f32_or_transcoded_when_asked),
        cmocka_unit_test(copied_only_dtypes_are_refused_as_requested_dtypes),
        cmocka_unit_test(every_type_converts_to_its_layout_and_runs_close_to_f32),
        cmocka_unit_test(convert_refuses_bad_super_block_scales_naming_tensor_and_block),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
