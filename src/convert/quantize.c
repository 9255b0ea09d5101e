/*
 * quantize.c - the converter's compression pass: reference quantizers for the weight formats
 * of kernels/quant.h (scalar, one block at a time; the bytes they write are the specification
 * of what `slate convert --quantize` produces), and the parallel producer that turns a source
 * matrix into one of them row by row on all threads.
 *
 * Rounding follows ggml's reference quantizers (Q8_0: round half away from zero; Q4_0 and
 * Q4_1: truncation of x / d + 8.5 and (x - m) / d + 0.5), with one difference: x is divided by
 * the scale as stored (rounded to f16), not by the f32 value before rounding, so the stored
 * values meet the round-trip bounds exactly:
 *   Q8_C        |x - deq| <= d / 2 (d is f32)
 *   Q8_0        |x - deq| <= d / 2 + 127 |d - d_exact|
 *   Q4 sym      |x - deq| <= |d| / 2 + 8 |d - d_exact|, or <= |d| + 8 |d - d_exact| for the
 *               elements clamped at q = 15 (the side opposite the largest magnitude, as in
 *               ggml: the scale maps that one to -8)
 *   Q4 asym     |x - deq| <= d / 2 + |m - min| + 15 |d - d_exact|
 * (each up to float rounding), with d_exact the f32 scale (max |x| / 127, max / -8,
 * (max - min) / 15) and d, m the stored f16 values. The d_exact terms are the clamping of the
 * largest magnitude when d rounded down. For a normal f16 scale (relative rounding <= 2^-11)
 * they are at most 6% (Q8_0) and 0.4% (Q4 sym) of d, within the d / 2 bound. A subnormal f16
 * scale (max |x| below ~7.8e-3 for Q8_0, ~4.9e-4 for Q4 sym, max - min below ~9.2e-4 for asym)
 * is coarse and the error may exceed d / 2 by that term; a scale below 2^-25 rounds to 0 and
 * the block decodes to 0, to m for asym (max |x| below ~3.8e-6 for Q8_0, ~2.4e-7 for Q4 sym,
 * max - min below ~4.5e-7 for asym). The excess is at most 127 * 2^-25 ~ 3.8e-6 in absolute
 * terms. The same rule (ggml's scale rounded to the nearest f16, as ggml stores it) is kept for
 * every f16-scaled block, also the layouts with no GGUF twin (Q4 blocks of 16, 64, 128), so one
 * rule describes all of them; rounding d away from zero where it is subnormal would honour
 * d / 2 there at the cost of a second rule. A scale or minimum that does not fit f16 (max |x|
 * beyond ~65504 * 127 for Q8_0, * 8 for Q4 sym; for asym |min| beyond ~65504 or max - min
 * beyond ~65504 * 15) is refused, never stored as infinity.
 */
#include "convert.h"
#include "kernels/quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Stores an f16 scale and returns its value, or false when it is not finite. */
static bool put_scale(uint8_t *dst, float v, float *stored) {
    uint16_t h = slate__f32_to_f16(v);
    memcpy(dst, &h, 2);
    *stored = slate__f16_to_f32(h);
    return isfinite(*stored);
}

bool slate__quantize_q8_0(const float *x, int64_t n, void *out) {
    uint8_t *dst = out;
    for (int64_t b = 0; b < n / 32; b++, x += 32, dst += sizeof(slate__block_q8_0)) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d;
        if (!put_scale(dst, amax / 127.0f, &d)) return false;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < 32; j++) {
            float q = roundf(x[j] * id);
            dst[2 + j] = (uint8_t)(int8_t)(q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q);
        }
    }
    return true;
}

bool slate__quantize_q4(const float *x, int64_t n, int32_t B, bool asym, void *out) {
    uint8_t *dst = out;
    size_t bb = slate__q4_block_bytes(B, asym);
    uint8_t q[SLATE__QBLOCK_MAX];
    for (int64_t b = 0; b < n / B; b++, x += B, dst += bb) {
        if (asym) {
            float lo = x[0], hi = x[0];
            for (int j = 1; j < B; j++) {
                lo = fminf(lo, x[j]);
                hi = fmaxf(hi, x[j]);
            }
            float d, m;
            if (!put_scale(dst, (hi - lo) / 15.0f, &d) || !put_scale(dst + 2, lo, &m)) return false;
            float id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int j = 0; j < B; j++) {
                float v = (x[j] - m) * id + 0.5f;
                int qi = v > 0.0f ? (int)v : 0;
                q[j] = (uint8_t)(qi > 15 ? 15 : qi);
            }
        } else {
            float amax = 0.0f, mx = 0.0f; /* the element of largest magnitude, with its sign */
            for (int j = 0; j < B; j++)
                if (fabsf(x[j]) > amax) {
                    amax = fabsf(x[j]);
                    mx = x[j];
                }
            float d;
            if (!put_scale(dst, mx / -8.0f, &d)) return false;
            float id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int j = 0; j < B; j++) {
                float v = x[j] * id + 8.5f;
                int qi = v > 0.0f ? (int)v : 0;
                q[j] = (uint8_t)(qi > 15 ? 15 : qi);
            }
        }
        uint8_t *qs = dst + (asym ? 4 : 2);
        for (int j = 0; j < B / 2; j++) qs[j] = (uint8_t)(q[j] | q[j + B / 2] << 4);
    }
    return true;
}

void slate__quantize_q8_c_row(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (int64_t j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    *scale = amax / 127.0f;
    float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    /* Below max |x| ~3.7e-37, 127 / max overflows f32: x * inf would push every small element
     * to +-127 and make 0 * inf a NaN (undefined as int8). Such rows divide by the stored scale
     * in double instead (their own rows only: the bytes of every other row are unchanged). */
    bool wide = !isfinite(id);
    double idw = wide && *scale > 0.0f ? 1.0 / (double)*scale : 0.0;
    for (int64_t j = 0; j < n; j++) {
        float v = wide ? (float)round((double)x[j] * idw) : roundf(x[j] * id);
        q[j] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
    }
}

/* ---- the parallel producer ----------------------------------------------------------------- */

typedef struct qjob {
    const slate__qspec *qs;
    uint8_t *dst;
    float *rowbuf;      /* [n_threads][cols] */
    int64_t bad_row[SLATE__QMAX_THREADS]; /* per thread: first row with a problem, or -1 */
    int64_t bad_col[SLATE__QMAX_THREADS];
    float bad_val[SLATE__QMAX_THREADS];
} qjob;

static void quantize_rows(void *ctx, int ith, int nth) {
    qjob *j = ctx;
    const slate__qspec *s = j->qs;
    int64_t r0 = s->rows * ith / nth, r1 = s->rows * (ith + 1) / nth;
    float *buf = j->rowbuf + (size_t)ith * (size_t)s->cols;
    slate__wmat w;
    slate__wmat_init(&w, j->dst, s->dtype, s->block, s->asym, s->rows, s->cols);
    bool ok_size;
    size_t src_row = slate__src_nbytes(s->src->type, (uint64_t)s->cols, &ok_size);
    j->bad_row[ith] = -1;
    for (int64_t r = r0; r < r1; r++) {
        slate__src_to_f32(s->src->type, s->src->data + (size_t)r * src_row, buf, s->cols);
        for (int64_t c = 0; c < s->cols; c++)
            if (!isfinite(buf[c])) {
                j->bad_row[ith] = r;
                j->bad_col[ith] = c;
                j->bad_val[ith] = buf[c];
                return;
            }
        uint8_t *out = j->dst + (size_t)r * w.row_bytes;
        bool ok = true;
        switch ((int)s->dtype) {
        case SLATE_DTYPE_Q8_0: ok = slate__quantize_q8_0(buf, s->cols, out); break;
        case SLATE_DTYPE_Q4: ok = slate__quantize_q4(buf, s->cols, s->block, s->asym, out); break;
        case SLATE_DTYPE_Q8_C:
            slate__quantize_q8_c_row(buf, s->cols, (int8_t *)out, (float *)w.scales + r);
            break;
        default: ok = false; break;
        }
        if (!ok) { /* a scale overflows f16: report the row's largest element */
            int64_t big = 0;
            for (int64_t c = 1; c < s->cols; c++)
                if (fabsf(buf[c]) > fabsf(buf[big])) big = c;
            j->bad_row[ith] = r;
            j->bad_col[ith] = big;
            j->bad_val[ith] = buf[big];
            return;
        }
    }
}

slate_status slate__quantize_tensor(const slate__qspec *s, void *dst, slate__pool *pool,
                                    slate_error *err) {
    int nth = slate__pool_size(pool);
    if (nth > SLATE__QMAX_THREADS) return SLATE__INTERNAL(err, "too many quantization threads");
    qjob j;
    memset(&j, 0, sizeof j);
    j.qs = s;
    j.dst = dst;
    size_t n_buf;
    if (!slate__mul_size((size_t)nth, (size_t)s->cols, &n_buf) ||
        !(j.rowbuf = slate__malloc(n_buf * sizeof(float))))
        return slate__fail(err, SLATE_E_NOMEM, "out of memory: row buffers for quantizing '%s'",
                           s->src->name);
    uint64_t bytes = slate__wmat_bytes(s->dtype, s->block, s->asym, s->rows, s->cols);
    memset(dst, 0, (size_t)bytes); /* Q8_C: the padding before the scales */
    if (pool) slate__pool_run(pool, quantize_rows, &j);
    else quantize_rows(&j, 0, 1);
    slate__free(j.rowbuf);
    int worst = -1;
    for (int t = 0; t < nth; t++)
        if (j.bad_row[t] >= 0 && (worst < 0 || j.bad_row[t] < j.bad_row[worst])) worst = t;
    if (worst < 0) return SLATE_OK;
    char what[SLATE__SRC_DESC_CAP];
    slate__src_desc(s->src, what, sizeof what);
    long long row = (long long)(s->src->src_row0 + j.bad_row[worst]); /* row of the named */
    if (!isfinite(j.bad_val[worst]))
        return slate__fail(err, SLATE_E_FORMAT, "%s: element [%lld][%lld] is not finite (%g)",
                           what, row, (long long)j.bad_col[worst], j.bad_val[worst]);
    return slate__fail(err, SLATE_E_UNSUPPORTED, "%s: element [%lld][%lld] = %g is too large "
                       "for %s (its scale does not fit f16); keep the tensor as f32 or f16 "
                       "(--keep)", what, row, (long long)j.bad_col[worst], j.bad_val[worst],
                       slate_dtype_name(s->dtype));
}
