/*
 * quant.c (ref) - the specification of the weight formats (kernels/quant.h, docs/format.md):
 * dequantization element by element, the matmul of the compressed formats as dequantize-and-dot
 * with fp32 accumulation in input order, and the row lookup (embedding) of every weight dtype.
 * SIMD variants are tested against these; they may quantize activations, the reference never
 * does, so the reference is the exact product of the stored weights with x.
 */
#include "core/core.h"
#include "kernels/kernels.h"

#include <string.h>

static float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return slate__f16_to_f32(h);
}

/* W[o][i] for every weight dtype. */
static float deq1(const slate__wmat *w, int64_t o, int64_t i) {
    const uint8_t *row = (const uint8_t *)w->data + (size_t)o * w->row_bytes;
    switch ((int)w->dtype) {
    case SLATE_DTYPE_F32: {
        float f;
        memcpy(&f, row + 4 * (size_t)i, 4);
        return f;
    }
    case SLATE_DTYPE_F16: return f16_at(row + 2 * (size_t)i);
    case SLATE_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, row + 2 * (size_t)i, 2);
        return slate__bf16_to_f32(h);
    }
    case SLATE_DTYPE_Q8_0: {
        const uint8_t *blk = row + (size_t)(i / 32) * sizeof(slate__block_q8_0);
        return f16_at(blk) * (float)(int8_t)blk[2 + i % 32];
    }
    case SLATE_DTYPE_Q4: {
        int64_t b = w->block, j = i % b;
        const uint8_t *blk = row + (size_t)(i / b) * slate__q4_block_bytes((int32_t)b, w->asym);
        const uint8_t *qs = blk + (w->asym ? 4 : 2);
        int q = j < b / 2 ? qs[j] & 15 : qs[j - b / 2] >> 4;
        float d = f16_at(blk);
        return w->asym ? d * (float)q + f16_at(blk + 2) : d * (float)(q - 8);
    }
    case SLATE_DTYPE_Q8_C: return w->scales[o] * (float)(int8_t)row[i];
    case SLATE_DTYPE_PAL: {
        /* bits i*N .. i*N+N-1 of the row's LSB-first bit stream: N <= 8, so at most 2 bytes */
        size_t bit = (size_t)i * (size_t)w->bits, byte = bit / 8;
        unsigned v = row[byte];
        if (byte + 1 < w->row_bytes) v |= (unsigned)row[byte + 1] << 8;
        unsigned idx = (v >> (bit % 8)) & ((1u << w->bits) - 1);
        return slate__f16_to_f32(w->lut[(size_t)(o / w->group) * ((size_t)1 << w->bits) + idx]);
    }
    case SLATE_DTYPE_Q4_K: {
        const uint8_t *blk = row + (size_t)(i / 256) * sizeof(slate__block_q4_k);
        int e = (int)(i % 256), j = e / 32, sc, m;
        slate__q4k_scale_min(blk + 4, j, &sc, &m);
        uint8_t b = blk[16 + 32 * (j / 2) + e % 32];
        int q = j % 2 ? b >> 4 : b & 15;
        float dl = f16_at(blk) * (float)sc, ml = f16_at(blk + 2) * (float)m;
        return dl * (float)q - ml;
    }
    case SLATE_DTYPE_Q5_K: {
        const uint8_t *blk = row + (size_t)(i / 256) * sizeof(slate__block_q5_k);
        int e = (int)(i % 256), j = e / 32, l = e % 32, sc, m;
        slate__q4k_scale_min(blk + 4, j, &sc, &m);
        uint8_t b = blk[48 + 32 * (j / 2) + l];
        int q = (j % 2 ? b >> 4 : b & 15) + ((blk[16 + l] >> j) & 1 ? 16 : 0);
        float dl = f16_at(blk) * (float)sc, ml = f16_at(blk + 2) * (float)m;
        return dl * (float)q - ml;
    }
    case SLATE_DTYPE_Q6_K: {
        const uint8_t *blk = row + (size_t)(i / 256) * sizeof(slate__block_q6_k);
        int e = (int)(i % 256), n = e / 128, g = (e % 128) / 32, l = e % 32;
        uint8_t lo = blk[64 * n + 32 * (g % 2) + l];
        int code = (g < 2 ? lo & 15 : lo >> 4) | ((blk[128 + 32 * n + l] >> (2 * g)) & 3) << 4;
        float dl = f16_at(blk + 208) * (float)(int8_t)blk[192 + e / 16];
        return dl * (float)(code - 32);
    }
    case SLATE_DTYPE_Q3_K: {
        const uint8_t *blk = row + (size_t)(i / 256) * sizeof(slate__block_q3_k);
        int e = (int)(i % 256), n = e / 128, g = (e % 128) / 32, l = e % 32;
        int code = ((blk[32 + 32 * n + l] >> (2 * g)) & 3) - ((blk[l] >> (4 * n + g)) & 1 ? 0 : 4);
        float dl = f16_at(blk + 108) * (float)slate__q3k_scale(blk + 96, e / 16);
        return dl * (float)code;
    }
    case SLATE_DTYPE_Q2_K: {
        const uint8_t *blk = row + (size_t)(i / 256) * sizeof(slate__block_q2_k);
        int e = (int)(i % 256), n = e / 128, g = (e % 128) / 32, l = e % 32;
        int q = (blk[16 + 32 * n + l] >> (2 * g)) & 3, sm = blk[e / 16];
        float dl = f16_at(blk + 80) * (float)(sm & 15), ml = f16_at(blk + 82) * (float)(sm >> 4);
        return dl * (float)q - ml;
    }
    case SLATE_DTYPE_IQ4_NL: {
        const uint8_t *blk = row + (size_t)(i / 32) * sizeof(slate__block_iq4_nl);
        int j = (int)(i % 32), q = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
        return f16_at(blk) * (float)slate__iq4_levels[q];
    }
    case SLATE_DTYPE_IQ4_XS: {
        const uint8_t *blk = row + (size_t)(i / 256) * sizeof(slate__block_iq4_xs);
        int e = (int)(i % 256), j = e / 32, l = e % 32;
        uint8_t b = blk[8 + 16 * j + l % 16];
        int q = l < 16 ? b & 15 : b >> 4;
        float dl = f16_at(blk) * (float)slate__iq4xs_scale(blk, j);
        return dl * (float)slate__iq4_levels[q];
    }
    default: return 0.0f; /* not a weight dtype: the compiler refuses such tensors */
    }
}

void slate__ref_dequant(const slate__wmat *w, int64_t o, int64_t i0, int64_t n, float *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = deq1(w, o, i0 + i);
}

/* y[r][o] = W[o][:] . x[r][:] + b[o]: each weight chunk is dequantized once and used for every
 * row; y[r][o] accumulates the products in input order, as a single dot product would. */
static void matmul_q(float *y, const float *x, const void *xq, const slate__wmat *w,
                     const float *bias, int64_t n_rows, int64_t o0, int64_t o1) {
    enum { CHUNK = 256 };
    float tmp[CHUNK];
    int64_t n_in = w->n_in, n_out = w->n_out;
    for (int64_t o = o0; o < o1; o++) {
        for (int64_t r = 0; r < n_rows; r++) y[r * n_out + o] = 0.0f;
        for (int64_t i0 = 0; i0 < n_in; i0 += CHUNK) {
            int64_t n = n_in - i0 < CHUNK ? n_in - i0 : CHUNK;
            slate__ref_dequant(w, o, i0, n, tmp);
            for (int64_t r = 0; r < n_rows; r++) {
                const float *xr = x + r * n_in + i0;
                float acc = y[r * n_out + o];
                for (int64_t i = 0; i < n; i++) acc += tmp[i] * xr[i];
                y[r * n_out + o] = acc;
            }
        }
        if (bias)
            for (int64_t r = 0; r < n_rows; r++) y[r * n_out + o] += bias[o];
    }
}

static void row_to_f32(float *dst, const slate__wmat *w, int64_t row) {
    slate__ref_dequant(w, row, 0, w->n_in, dst);
}

void slate__ref_quant_fill(slate__kernels *k) {
    k->matmul[SLATE_DTYPE_Q8_0] = matmul_q;
    k->matmul[SLATE_DTYPE_Q4] = matmul_q;
    k->matmul[SLATE_DTYPE_Q8_C] = matmul_q;
    k->matmul[SLATE_DTYPE_PAL] = matmul_q;
    k->matmul[SLATE_DTYPE_Q4_K] = matmul_q;
    k->matmul[SLATE_DTYPE_Q6_K] = matmul_q;
    k->matmul[SLATE_DTYPE_Q5_K] = matmul_q;
    k->matmul[SLATE_DTYPE_Q3_K] = matmul_q;
    k->matmul[SLATE_DTYPE_Q2_K] = matmul_q;
    k->matmul[SLATE_DTYPE_IQ4_NL] = matmul_q;
    k->matmul[SLATE_DTYPE_IQ4_XS] = matmul_q;
    for (int dt = 0; dt < SLATE__N_WDTYPES; dt++)
        if (slate__wdtype_valid((slate_dtype)dt)) k->row_to_f32[dt] = row_to_f32;
}
