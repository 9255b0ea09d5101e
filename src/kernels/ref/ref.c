/*
 * ref.c - scalar reference kernels: the specification of every kernel and the fallback on any
 * CPU. Obvious loop order, fp32 accumulation. SIMD variants are tested against these.
 */
#include "kernels/kernels.h"
#include "core/core.h"

#include <math.h>
#include <string.h>

static float w_at(const void *w, slate_dtype dt, int64_t i) {
    switch (dt) {
    case SLATE_DTYPE_F16: return slate__f16_to_f32(((const uint16_t *)w)[i]);
    case SLATE_DTYPE_BF16: return slate__bf16_to_f32(((const uint16_t *)w)[i]);
    default: return ((const float *)w)[i];
    }
}

/* y[r][o] = W[o][:] . x[r][:] + b[o] */
static void matmul_any(slate_dtype dt, float *y, const float *x, const void *w, const float *bias,
                       int64_t n_rows, int64_t n_in, int64_t n_out, int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; o++)
        for (int64_t r = 0; r < n_rows; r++) {
            const float *xr = x + r * n_in;
            float acc = 0.0f;
            for (int64_t i = 0; i < n_in; i++) acc += w_at(w, dt, o * n_in + i) * xr[i];
            y[r * n_out + o] = acc + (bias ? bias[o] : 0.0f);
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

static void to_f32_f32(float *d, const void *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = ((const float *)s)[i];
}
static void to_f32_f16(float *d, const void *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = slate__f16_to_f32(((const uint16_t *)s)[i]);
}
static void to_f16(uint16_t *d, const float *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = slate__f32_to_f16(s[i]);
}
static void transpose16(uint16_t *dst, int64_t dst_stride, const uint16_t *src, int64_t src_stride) {
    for (int64_t d = 0; d < 16; d++)
        for (int64_t t = 0; t < 16; t++) dst[d * dst_stride + t] = src[t * src_stride + d];
}
static void to_f32_bf16(float *d, const void *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = slate__bf16_to_f32(((const uint16_t *)s)[i]);
}

/* Online softmax (one pass over the cache): keep the running max m, the running sum l of
 * exp(s - m) and the running weighted sum of v, rescaling both when m grows. A score is scaled,
 * then soft-capped (softcap > 0: cap * tanh(s / cap), Gemma 2), then masked, in the order of
 * transformers' eager attention. */
static void attention_head(float *out, const float *q, const void *k, const void *v,
                           slate_dtype kvt, int64_t stride, int64_t j0, int64_t j1, int64_t hd,
                           float scale, float softcap, const float *mask) {
    float acc[SLATE__MAX_HEAD_DIM];
    float m = -INFINITY, l = 0.0f;
    for (int64_t d = 0; d < hd; d++) acc[d] = 0.0f;
    for (int64_t j = j0; j < j1; j++) {
        float s = 0.0f;
        for (int64_t d = 0; d < hd; d++) s += q[d] * w_at(k, kvt, j * stride + d);
        s *= scale;
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
        if (mask) s += mask[j];
        if (s == -INFINITY || isnan(s)) continue;
        if (s > m) {
            float c = expf(m - s); /* m = -inf on the first score: c = 0 */
            for (int64_t d = 0; d < hd; d++) acc[d] *= c;
            l *= c;
            m = s;
        }
        float p = expf(s - m);
        l += p;
        for (int64_t d = 0; d < hd; d++) acc[d] += p * w_at(v, kvt, j * stride + d);
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int64_t d = 0; d < hd; d++) out[d] = acc[d] * inv;
}

/* The heads of one kv head, each on its own, over its row's range (kernels.h: n_rows,
 * window). */
static void attention(float *out, const float *q, const void *k, const void *v, slate_dtype kvt,
                      int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                      int64_t n_rows, int64_t window, float scale, float softcap,
                      const float *mask) {
    for (int64_t h = 0; h < n_heads; h++) {
        int64_t end = slate__attn_head_end(j1, h, n_heads, n_rows);
        attention_head(out + h * hd, q + h * hd, k, v, kvt, stride,
                       slate__attn_head_start(j0, end, window), end, hd, scale, softcap, mask);
    }
}

/* int8 cache: the same online softmax; each row's scale multiplies its dot product (k) or its
 * weight (v), so dequantization costs one multiply per row, not per element. */
static void attention_i8_head(float *out, const float *q, const uint8_t *k, const uint8_t *v,
                              int64_t stride, int64_t j0, int64_t j1, int64_t hd, float scale,
                              float softcap, const float *mask) {
    float acc[SLATE__MAX_HEAD_DIM];
    float m = -INFINITY, l = 0.0f;
    for (int64_t d = 0; d < hd; d++) acc[d] = 0.0f;
    for (int64_t j = j0; j < j1; j++) {
        const uint8_t *kr = k + j * stride, *vr = v + j * stride;
        float ks, vs;
        memcpy(&ks, kr, 4);
        memcpy(&vs, vr, 4);
        const int8_t *kq = (const int8_t *)(kr + 4), *vq = (const int8_t *)(vr + 4);
        float s = 0.0f;
        for (int64_t d = 0; d < hd; d++) s += q[d] * (float)kq[d];
        s *= ks * scale;
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
        if (mask) s += mask[j];
        if (s == -INFINITY || isnan(s)) continue;
        if (s > m) {
            float c = expf(m - s);
            for (int64_t d = 0; d < hd; d++) acc[d] *= c;
            l *= c;
            m = s;
        }
        float p = expf(s - m);
        l += p;
        float pv = p * vs;
        for (int64_t d = 0; d < hd; d++) acc[d] += pv * (float)vq[d];
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int64_t d = 0; d < hd; d++) out[d] = acc[d] * inv;
}

static void attention_i8(float *out, const float *q, const uint8_t *k, const uint8_t *v,
                         int64_t stride, int64_t j0, int64_t j1, int64_t hd, int64_t n_heads,
                         int64_t n_rows, int64_t window, float scale, float softcap,
                         const float *mask) {
    for (int64_t h = 0; h < n_heads; h++) {
        int64_t end = slate__attn_head_end(j1, h, n_heads, n_rows);
        attention_i8_head(out + h * hd, q + h * hd, k, v, stride,
                          slate__attn_head_start(j0, end, window), end, hd, scale, softcap, mask);
    }
}

/* Symmetric per-group quantization: scale = max|x| / 127 keeps the largest element exact (up to
 * the f32 scale) and every other within scale / 2. A zero group stores scale 0. */
void slate__kv_quantize_i8(uint8_t *dst, const float *x, int64_t width, int32_t group) {
    size_t block = 4 + slate__align_up((size_t)group, 4);
    for (int64_t g0 = 0; g0 < width; g0 += group, dst += block) {
        float amax = 0.0f;
        for (int32_t i = 0; i < group; i++) {
            float a = fabsf(x[g0 + i]);
            if (a > amax) amax = a;
        }
        float sc = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        memcpy(dst, &sc, 4);
        int8_t *qd = (int8_t *)(dst + 4);
        for (int32_t i = 0; i < group; i++) {
            float r = nearbyintf(x[g0 + i] * inv);
            if (r != r) r = 0.0f; /* NaN (inf x 0): keep the cast defined */
            qd[i] = (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
        }
        for (size_t i = (size_t)group; i < block - 4; i++) qd[i] = 0;
    }
}

static void rms_norm(float *y, const float *x, const float *w, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

static void swiglu(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
}

/* PyTorch's gelu(approximate="tanh") in its CPU kernel's order: x_cube = x * x * x, inner =
 * kBeta * (x + kKappa * x_cube), 0.5 * x * (1 + tanh(inner)); then times b. */
static void geglu(float *y, const float *a, const float *b, int64_t n) {
    const float beta = 0.7978845608028654f, kappa = 0.044715f; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < n; i++) {
        float x = a[i], cube = x * x * x;
        y[i] = 0.5f * x * (1.0f + tanhf(beta * (x + kappa * cube))) * b[i];
    }
}

static void softcap(float *y, const float *x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++) y[i] = cap * tanhf(x[i] / cap);
}

static void rope(float *y, const float *x, const float *c, const float *s, int64_t n_heads,
                 int64_t head_dim, int64_t rope_dim, bool half) {
    int64_t nh = rope_dim / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        const float *xi = x + h * head_dim;
        float *yo = y + h * head_dim;
        for (int64_t i = 0; i < nh; i++) {
            int64_t a = half ? i : 2 * i, b = half ? i + nh : 2 * i + 1;
            float u = xi[a], v = xi[b];
            yo[a] = u * c[i] - v * s[i];
            yo[b] = u * s[i] + v * c[i];
        }
        if (yo != xi)
            for (int64_t d = rope_dim; d < head_dim; d++) yo[d] = xi[d];
    }
}

void slate__ref_fill(slate__kernels *k) {
    k->name = "ref";
    k->matmul[SLATE_DTYPE_F32] = matmul_f32;
    k->matmul[SLATE_DTYPE_F16] = matmul_f16;
    k->matmul[SLATE_DTYPE_BF16] = matmul_bf16;
    k->to_f32[SLATE_DTYPE_F32] = to_f32_f32;
    k->to_f32[SLATE_DTYPE_F16] = to_f32_f16;
    k->to_f32[SLATE_DTYPE_BF16] = to_f32_bf16;
    k->to_f16 = to_f16;
    k->attention = attention;
    k->attention_i8 = attention_i8;
    k->transpose16 = transpose16;
    k->rms_norm = rms_norm;
    k->swiglu = swiglu;
    k->geglu = geglu;
    k->softcap = softcap;
    k->rope = rope;
    slate__ref_quant_fill(k); /* row_to_f32 of every weight dtype, matmul of the quantized ones */
}
