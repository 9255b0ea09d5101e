/* kcheck.c - one case of a kernel table against ref (see kcheck.h): random inputs, both tables
 * run on the same inputs, outputs compared element by element within a tolerance, and sentinels
 * around the outputs to catch writes outside them. The tolerances sit next to their cases with
 * their reasons: results differ from ref only by rounding (accumulation order, FMA, exp
 * polynomials), and each bound is set well above the worst seen and well below what a dropped
 * or doubled term, a wrong lane or a wrong tail would cause. The "worst seen" figures are for
 * the x86 tables over 100 seeds; the NEON table (4 lanes) stays below them.
 */
#define _DEFAULT_SOURCE /* mmap, MAP_ANONYMOUS and mprotect for the guard page */
#include "kcheck.h"
#include "../rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"

/* ---- helpers ----------------------------------------------------------------------------- */

uint64_t kc_rand(uint64_t *s) { return slate_test_rand(s); }

float kc_randf(uint64_t *s) { return slate_test_randf(s); }

/* Zeroed (calloc), so no buffer is ever read uninitialized, and GCC -O3 sees none passed to the
 * kernels as const (it warned in kc_rms_norm and kc_glu). */
static void *xmalloc(size_t n) {
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "kcheck: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static void fill_rand(float *a, int64_t n, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) a[i] = kc_randf(rng);
}

/* Random weights of dtype dt, and the same values as f32 (for the magnitude bound). */
static void *make_weights(slate_dtype dt, int64_t n, float *as_f32, uint64_t *rng) {
    size_t es = dt == SLATE_DTYPE_F32 ? 4 : 2;
    void *w = xmalloc((size_t)n * es);
    for (int64_t i = 0; i < n; i++) {
        float f = kc_randf(rng);
        if (dt == SLATE_DTYPE_F32) {
            ((float *)w)[i] = f;
        } else if (dt == SLATE_DTYPE_F16) {
            uint16_t h = slate__f32_to_f16(f);
            ((uint16_t *)w)[i] = h;
            f = slate__f16_to_f32(h);
        } else {
            uint16_t h = slate__f32_to_bf16(f);
            ((uint16_t *)w)[i] = h;
            f = slate__bf16_to_f32(h);
        }
        as_f32[i] = f;
    }
    return w;
}

/* The verdict of a case: true when detail is empty, else "what: detail" into problem. */
static bool verdict(const char *what, const char *detail, char *problem, size_t cap) {
    if (!detail[0]) return true;
    snprintf(problem, cap, "%s: %s", what, detail);
    return false;
}

/* got vs want (ref) for n results with magnitudes mag (a scale no result can exceed and that
 * does not cancel, e.g. sum |w_i||x_i|): per element |got - want| <= tol * mag, and over the
 * case the normalized error ||got - want|| / ||want|| <= tol. The normalized error needs at
 * least 16 results and ||want|| >= 1e-3 ||mag||: one or two outputs that happen to cancel to
 * almost 0 make it meaningless (seen: 3.5e-5 on a single output), while the per-element bound
 * still holds there. Writes the first problem into detail[0..cap) unless detail already holds
 * one (the first problem of a case wins). */
static void check_close(char *detail, size_t cap, const float *got, const float *want,
                        const double *mag, int64_t n, double tol) {
    if (detail[0]) return;
    double d2 = 0.0, w2 = 0.0, m2 = 0.0;
    int64_t n_bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol * mag[i]) && n_bad++ == 0)
            snprintf(detail, cap, "element %lld: got %.9g, want %.9g, |diff| %.3g > %g * mag %.3g",
                     (long long)i, got[i], want[i], d, tol, mag[i]);
        d2 += d * d;
        w2 += (double)want[i] * want[i];
        m2 += mag[i] * mag[i];
    }
    if (n_bad > 1) {
        size_t len = strlen(detail);
        snprintf(detail + len, cap - len, " (%lld elements off)", (long long)n_bad);
    }
    if (!n_bad && n >= 16 && w2 >= 1e-6 * m2 && !(sqrt(d2 / w2) <= tol))
        snprintf(detail, cap, "normalized error %.3g > %g", sqrt(d2 / w2), tol);
}

/* The outputs of a case with one result vector: got (the table) and want (ref), n results each
 * plus one past them, all preset to SENTINEL (a value no case computes) so a write past the end
 * shows; and mag, the scale of each result for check_close. */
typedef struct outputs {
    float *got, *want;
    double *mag;
    int64_t n;
} outputs;

#define SENTINEL 777.0f

static outputs outputs_alloc(int64_t n) {
    outputs o = {xmalloc((size_t)(n + 1) * sizeof(float)), xmalloc((size_t)(n + 1) * sizeof(float)),
                 xmalloc((size_t)n * sizeof(double)), n};
    for (int64_t i = 0; i <= n; i++) o.got[i] = o.want[i] = SENTINEL;
    return o;
}

/* "wrote past <end>" when the table overwrote its sentinel, then check_close. */
static void outputs_check(const outputs *o, const char *end, double tol, char *detail,
                          size_t cap) {
    if (o->got[o->n] != SENTINEL && !detail[0]) snprintf(detail, cap, "wrote past %s", end);
    check_close(detail, cap, o->got, o->want, o->mag, o->n, tol);
}

static void outputs_free(outputs *o) {
    free(o->got);
    free(o->want);
    free(o->mag);
}

/* ---- matmul ------------------------------------------------------------------------------ */

/* Tolerance 1e-5 (per element against mag = sum |w_i||x_i| + |bias|, and normalized): ref
 * sums sequentially, the variants in 4/8/16 lanes, in K blocks, with FMA, so results differ by
 * rounding of order u sqrt(n) (u = 6e-8) of the partial sums. Worst seen over 100 seeds:
 * 3.2e-7 per element, 2.7e-6 normalized (n_in = 4099). A dropped or doubled term of typical
 * size is far above either bound. */
#define MATMUL_TOL 1e-5

bool kc_matmul(const slate__kernels *k, const slate__kernels *ref, slate_dtype dt, int64_t n_rows,
               int64_t n_in, int64_t n_out, int64_t o0, int64_t o1, bool with_bias,
               uint64_t *rng, char *problem, size_t cap) {
    float *x = xmalloc((size_t)(n_rows * n_in) * sizeof(float));
    float *wf = xmalloc((size_t)(n_out * n_in) * sizeof(float));
    float *bias = xmalloc((size_t)n_out * sizeof(float));
    float *got = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    float *want = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    double *mag = xmalloc((size_t)(n_rows * n_out) * sizeof(double));
    fill_rand(x, n_rows * n_in, rng);
    fill_rand(bias, n_out, rng);
    void *w = make_weights(dt, n_out * n_in, wf, rng);
    const float sentinel = 12345.0f;
    for (int64_t i = 0; i < n_rows * n_out; i++) got[i] = want[i] = sentinel;

    slate__wmat wm;
    slate__wmat_init(&wm, w, dt, 0, false, n_out, n_in);
    k->matmul[dt](got, x, NULL, &wm, with_bias ? bias : NULL, n_rows, o0, o1);
    ref->matmul[dt](want, x, NULL, &wm, with_bias ? bias : NULL, n_rows, o0, o1);

    char what[200], detail[300] = "";
    snprintf(what, sizeof what, "%s matmul %s rows=%lld n_in=%lld n_out=%lld o=[%lld,%lld) bias=%d",
             k->name, slate_dtype_name(dt), (long long)n_rows, (long long)n_in,
             (long long)n_out, (long long)o0, (long long)o1, (int)with_bias);
    /* Compact the written columns to the front (in place: index n only grows; element e is
     * y[e / (o1 - o0)][o0 + e % (o1 - o0)]) and check that the others were left alone. */
    int64_t n = 0;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t o = 0; o < n_out; o++) {
            if (o < o0 || o >= o1) {
                if (got[r * n_out + o] != sentinel && !detail[0])
                    snprintf(detail, sizeof detail, "wrote y[%lld][%lld] outside the range",
                             (long long)r, (long long)o);
                continue;
            }
            double s = with_bias ? fabs(bias[o]) : 0.0;
            for (int64_t i = 0; i < n_in; i++)
                s += fabs((double)wf[o * n_in + i] * x[r * n_in + i]);
            got[n] = got[r * n_out + o];
            want[n] = want[r * n_out + o];
            mag[n++] = s;
        }
    check_close(detail, sizeof detail, got, want, mag, n, MATMUL_TOL);
    free(x);
    free(wf);
    free(bias);
    free(got);
    free(want);
    free(mag);
    free(w);
    return verdict(what, detail, problem, cap);
}

/* ---- matmul of the compressed formats ------------------------------------------------------ */

const kc_qfmt kc_qfmts[KC_N_QFMTS] = {
    {SLATE_DTYPE_Q8_0, 32, false}, {SLATE_DTYPE_Q4, 16, false},  {SLATE_DTYPE_Q4, 16, true},
    {SLATE_DTYPE_Q4, 32, false},   {SLATE_DTYPE_Q4, 32, true},   {SLATE_DTYPE_Q4, 64, false},
    {SLATE_DTYPE_Q4, 64, true},    {SLATE_DTYPE_Q4, 128, false}, {SLATE_DTYPE_Q4, 128, true},
    {SLATE_DTYPE_Q8_C, 0, false},  {SLATE_DTYPE_Q4_K, 256, false}, {SLATE_DTYPE_Q6_K, 256, false},
    {SLATE_DTYPE_Q5_K, 256, false}, {SLATE_DTYPE_Q3_K, 256, false}, {SLATE_DTYPE_Q2_K, 256, false},
    {SLATE_DTYPE_IQ4_NL, 32, false}, {SLATE_DTYPE_IQ4_XS, 256, false},
};

/* n bytes that end where a PROT_NONE page begins, so that a kernel reading past them faults. */
typedef struct guarded {
    uint8_t *p; /* the n bytes; 4-aligned when n is a multiple of 4 */
    void *map;
    size_t map_len;
} guarded;

static guarded guarded_alloc(size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), data = (n + pg - 1) / pg * pg;
    guarded g = {NULL, NULL, data + pg};
    g.map = mmap(NULL, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.map == MAP_FAILED || mprotect((uint8_t *)g.map + data, pg, PROT_NONE) != 0) {
        fprintf(stderr, "kcheck: cannot map %zu bytes with a guard page\n", n);
        exit(1);
    }
    g.p = (uint8_t *)g.map + data - n;
    return g;
}

static void guarded_free(guarded *g) { munmap(g->map, g->map_len); }

static void put_f16(uint8_t *p, float f) {
    uint16_t h = slate__f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* Random stored bytes of a compressed matrix: uniform int8 / nibbles, so also the values the
 * converter's quantizers never write (int8 -128; the kernels take any stored bytes), and per
 * block (per row for Q8_C) a scale of random sign whose magnitude is drawn from three
 * (1, 0.05, 3, times 0.5..1) over the format's range (127 for int8, 8 or 15 for Q4) so that
 * blocks of one row differ in scale, and for asymmetric Q4 an offset of the same size. The
 * super-block formats keep their random sub-block scales (Q4_K, Q5_K: 6-bit scales and
 * minimums; Q6_K: int8 scales, -128 included) and get d (and dmin) so that a value reaches the
 * same magnitudes: d = +-s / (15 * 63) (Q5_K: 31 * 63) and dmin = s * u / 63 (u in [-1, 1)) for
 * Q4_K / Q5_K, d = +-s / (32 * 128) for Q6_K, d = +-s / (4 * 32) for Q3_K (6-bit scales offset
 * by 32, -32 included), d = +-s / (3 * 15) and dmin = s * u / 15 for Q2_K, d = +-s / (32 * 127)
 * for IQ4_XS (random 6-bit scales offset by 32, random nibbles over the 16 levels); IQ4_NL
 * blocks get d = +-s / 127 as Q8_0's. */
void kc_fill_qweights(uint8_t *w, const slate__wmat *wm, uint64_t *rng) {
    static const float mags[3] = {1.0f, 0.05f, 3.0f};
    size_t bytes = (size_t)slate__wmat_bytes(wm->dtype, wm->block, wm->asym, wm->n_out, wm->n_in);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)kc_rand(rng);
    float range = wm->dtype == SLATE_DTYPE_Q4 ? (wm->asym ? 15.0f : 8.0f) : 127.0f; /* + IQ4_NL */
    for (int64_t o = 0; o < wm->n_out; o++) {
        if (wm->dtype == SLATE_DTYPE_Q8_C) {
            float s = mags[kc_rand(rng) % 3] * (0.5f + 0.5f * fabsf(kc_randf(rng))) / range;
            ((float *)wm->scales)[o] = s; /* inside w, after the rows */
            continue;
        }
        if (slate__wdtype_superblock(wm->dtype)) {
            /* Q4_K and Q5_K share the header {d, dmin, scales}; codes up to 15 or 31 */
            bool k4 = wm->dtype == SLATE_DTYPE_Q4_K || wm->dtype == SLATE_DTYPE_Q5_K;
            float qmax = wm->dtype == SLATE_DTYPE_Q5_K ? 31.0f : 15.0f;
            size_t bb = (size_t)(wm->row_bytes / (size_t)(wm->n_in / 256));
            for (int64_t b = 0; b < wm->n_in / 256; b++) {
                uint8_t *blk = w + (size_t)o * wm->row_bytes + (size_t)b * bb;
                float s = mags[kc_rand(rng) % 3] * (0.5f + 0.5f * fabsf(kc_randf(rng)));
                s = kc_rand(rng) % 2 ? s : -s;
                if (k4) {
                    put_f16(blk, s / (qmax * 63.0f));
                    put_f16(blk + 2, fabsf(s) * kc_randf(rng) / 63.0f);
                } else if (wm->dtype == SLATE_DTYPE_Q3_K) {
                    put_f16(blk + 108, s / (4.0f * 32.0f));
                } else if (wm->dtype == SLATE_DTYPE_Q2_K) {
                    put_f16(blk + 80, s / (3.0f * 15.0f));
                    put_f16(blk + 82, fabsf(s) * kc_randf(rng) / 15.0f);
                } else if (wm->dtype == SLATE_DTYPE_IQ4_XS) {
                    put_f16(blk, s / (32.0f * 127.0f));
                } else {
                    put_f16(blk + 208, s / (32.0f * 128.0f));
                }
            }
            continue;
        }
        size_t bb = wm->dtype == SLATE_DTYPE_Q8_0     ? sizeof(slate__block_q8_0)
                    : wm->dtype == SLATE_DTYPE_IQ4_NL ? sizeof(slate__block_iq4_nl)
                                                      : slate__q4_block_bytes(wm->block, wm->asym);
        for (int64_t b = 0; b < wm->n_in / wm->block; b++) {
            uint8_t *blk = w + (size_t)o * wm->row_bytes + (size_t)b * bb;
            float s = mags[kc_rand(rng) % 3] * (0.5f + 0.5f * fabsf(kc_randf(rng)));
            put_f16(blk, (kc_rand(rng) % 2 ? s : -s) / range);
            if (wm->asym) put_f16(blk + 2, s * kc_randf(rng));
        }
    }
}

/* Per element, with mag = sum_i |w_i x_i| + |bias| (w_i: kc_wmag_row's magnitudes, which count
 * a format's scaled code and its offset apart, as the kernels sum them):
 *   |got - want| <= 1e-5 * mag + xq
 * 1e-5 as MATMUL_TOL: the kernels and ref sum in different orders (lanes, units, FMA). xq only
 * where the table quantizes x: x is then rounded to int8 with one scale per unit of at most 128
 * inputs (x86 avx2 and NEON: 32; avx512_vnni: 128), dx = max|x| / 127 over the unit, and
 * |x - dx q| <= dx / 2, so with dx taken over the enclosing group of 128 (never smaller) the
 * result moves by at most sum_i |w_i| dx(i) / 2 (times 1.001 for the rounding of dx and of
 * x / dx). This bound is exact, not statistical (test_quant_kernels.c uses it too): a lost or
 * doubled unit of 16 or 32 products, a wrong lane, scale or offset, or the wrong x unit
 * exceeds it by orders of magnitude. */
double kc_matmul_q_bound(const float *w, const float *x, int64_t n, double bias_abs, bool xq,
                         double *mag, double *xqb) {
    *mag = bias_abs;
    *xqb = 0.0;
    for (int64_t i0 = 0; i0 < n; i0 += 128) {
        int64_t i1 = i0 + 128 < n ? i0 + 128 : n;
        double amax = 0.0, wsum = 0.0;
        for (int64_t i = i0; i < i1; i++) {
            *mag += fabs((double)w[i] * x[i]);
            amax = fmax(amax, fabs(x[i]));
            wsum += fabs(w[i]);
        }
        *xqb += wsum * amax / 127.0 / 2.0;
    }
    return MATMUL_TOL * *mag + (xq ? 1.001 * *xqb : 0.0);
}

void kc_wmag_row(const slate__wmat *wm, int64_t o, float *dst) {
    int64_t n_in = wm->n_in;
    slate__ref_dequant(wm, o, 0, n_in, dst);
    size_t off, bb; /* the offset's f16 in each block, and the block's bytes */
    int32_t blk_in;
    switch ((int)wm->dtype) {
    case SLATE_DTYPE_Q4:
        if (!wm->asym) goto plain;
        off = 2, bb = slate__q4_block_bytes(wm->block, true), blk_in = wm->block;
        break;
    case SLATE_DTYPE_Q4_K: off = 2, bb = sizeof(slate__block_q4_k), blk_in = 256; break;
    case SLATE_DTYPE_Q5_K: off = 2, bb = sizeof(slate__block_q5_k), blk_in = 256; break;
    case SLATE_DTYPE_Q2_K: off = 82, bb = sizeof(slate__block_q2_k), blk_in = 256; break;
    default: goto plain;
    }
    /* the row with every offset 0 dequantizes to the scaled codes alone */
    uint8_t *row = xmalloc(wm->row_bytes);
    memcpy(row, (const uint8_t *)wm->data + (size_t)o * wm->row_bytes, wm->row_bytes);
    for (int64_t b = 0; b < n_in / blk_in; b++) memset(row + (size_t)b * bb + off, 0, 2);
    slate__wmat one;
    slate__wmat_init(&one, row, wm->dtype, wm->block, wm->asym, 1, n_in);
    float *codes = xmalloc((size_t)n_in * sizeof(float));
    slate__ref_dequant(&one, 0, 0, n_in, codes);
    for (int64_t i = 0; i < n_in; i++)
        dst[i] = (float)(fabs((double)codes[i]) + fabs((double)dst[i] - codes[i]));
    free(codes);
    free(row);
    return;
plain:
    for (int64_t i = 0; i < n_in; i++) dst[i] = fabsf(dst[i]);
}

int64_t kc_check_q_outputs(const slate__wmat *wm, const float *x, const float *bias,
                           const float *got, const float *want, float sentinel, int64_t n_rows,
                           int64_t o0, int64_t o1, bool xq, char *detail, size_t cap) {
    int64_t n_in = wm->n_in, n_out = wm->n_out, n_bad = 0; /* the first one is described */
    float *wrow = xmalloc((size_t)n_in * sizeof(float));
    for (int64_t o = 0; o < n_out; o++) {
        if (o >= o0 && o < o1) kc_wmag_row(wm, o, wrow);
        for (int64_t r = 0; r < n_rows; r++) {
            float gv = got[r * n_out + o], wv = want[r * n_out + o];
            if (o < o0 || o >= o1) {
                if (gv != sentinel && !n_bad++)
                    snprintf(detail, cap, "wrote y[%lld][%lld] outside the range", (long long)r,
                             (long long)o);
                continue;
            }
            double mag, xqb;
            double bound = kc_matmul_q_bound(wrow, x + r * n_in, n_in, bias ? fabs(bias[o]) : 0.0,
                                             xq, &mag, &xqb);
            double d = fabs((double)gv - wv);
            if (!(d <= bound) && !n_bad++)
                snprintf(detail, cap, "y[%lld][%lld]: got %.9g, want %.9g, |diff| %.3g > bound "
                         "%.3g (mag %.3g, x quantization %.3g)", (long long)r, (long long)o, gv,
                         wv, d, bound, mag, xqb);
        }
    }
    if (n_bad > 1) {
        size_t len = strlen(detail);
        snprintf(detail + len, cap - len, " (%lld elements off)", (long long)n_bad);
    }
    free(wrow);
    return n_bad;
}

bool kc_matmul_q(const slate__kernels *k, const slate__kernels *ref, slate_dtype dt,
                 int32_t block, bool asym, int64_t n_rows, int64_t n_in, int64_t n_out,
                 int64_t o0, int64_t o1, bool with_bias, uint64_t *rng, char *problem,
                 size_t cap) {
    char what[200], detail[300] = "";
    snprintf(what, sizeof what, "%s matmul %s B=%d asym=%d rows=%lld n_in=%lld n_out=%lld "
             "o=[%lld,%lld) bias=%d", k->name, slate_dtype_name(dt), (int)block, (int)asym,
             (long long)n_rows, (long long)n_in, (long long)n_out, (long long)o0, (long long)o1,
             (int)with_bias);
    char why[120];
    if (!slate__wlayout_check(dt, block, asym, n_in, why, sizeof why) ||
        !slate__wdtype_quantized(dt) || dt == SLATE_DTYPE_PAL)
        return verdict(what, "not a valid case: needs Q8_0, Q4, Q8_C, IQ4_NL or a super-block "
                             "format (Q2_K..Q6_K, IQ4_XS) with n_in a multiple of the block",
                       problem, cap);
    float *x = xmalloc((size_t)(n_rows * n_in) * sizeof(float));
    float *bias = xmalloc((size_t)n_out * sizeof(float));
    float *got = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    float *want = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    for (int64_t i = 0; i < n_rows * n_in; i++) /* some inputs larger: units differ in dx */
        x[i] = kc_randf(rng) * (i % 7 == 0 ? 4.0f : 1.0f);
    fill_rand(bias, n_out, rng);
    guarded g = guarded_alloc((size_t)slate__wmat_bytes(dt, block, asym, n_out, n_in));
    slate__wmat wm;
    slate__wmat_init(&wm, g.p, dt, block, asym, n_out, n_in);
    kc_fill_qweights(g.p, &wm, rng);
    const float sentinel = 12345.0f;
    for (int64_t i = 0; i < n_rows * n_out; i++) got[i] = want[i] = sentinel;

    /* x quantized as exec does: two row ranges split at a row_align multiple, a guard past
     * the plan, the same bytes as one call. */
    uint8_t *xq = NULL, *xq1 = NULL;
    size_t xq_bytes = 0;
    if (k->xq_plan[dt]) {
        slate__xq_plan pl = k->xq_plan[dt](&wm, n_rows);
        xq_bytes = pl.bytes;
        if (!k->quantize_x[dt] || pl.row_align < 1)
            snprintf(detail, sizeof detail, "xq_plan without quantize_x, or row_align %d < 1",
                     (int)pl.row_align);
        else if (n_rows > 1 && k->xq_plan[dt](&wm, n_rows - 1).bytes > xq_bytes)
            snprintf(detail, sizeof detail, "xq_plan shrinks as rows grow: %zu bytes for %lld rows"
                     ", %zu for %lld", k->xq_plan[dt](&wm, n_rows - 1).bytes,
                     (long long)(n_rows - 1), xq_bytes, (long long)n_rows);
    }
    if (xq_bytes && !detail[0]) {
        const slate__xq_plan pl = k->xq_plan[dt](&wm, n_rows);
        xq = xmalloc(xq_bytes + 64);
        xq1 = xmalloc(xq_bytes);
        memset(xq, 0xA5, xq_bytes + 64);
        memset(xq1, 0x5A, xq_bytes);
        int64_t mid = (n_rows / 2) / pl.row_align * pl.row_align;
        k->quantize_x[dt](xq, x, &wm, n_rows, 0, mid);
        k->quantize_x[dt](xq, x, &wm, n_rows, mid, n_rows);
        k->quantize_x[dt](xq1, x, &wm, n_rows, 0, n_rows);
        for (size_t i = xq_bytes; i < xq_bytes + 64 && !detail[0]; i++)
            if (xq[i] != 0xA5)
                snprintf(detail, sizeof detail, "quantize_x wrote past its plan (%zu bytes)",
                         xq_bytes);
        if (!detail[0] && memcmp(xq, xq1, xq_bytes) != 0)
            snprintf(detail, sizeof detail, "quantize_x over rows [0,%lld) and [%lld,%lld) wrote "
                     "other bytes than one call over [0,%lld)", (long long)mid, (long long)mid,
                     (long long)n_rows, (long long)n_rows);
    }
    bool run = !detail[0];
    if (run) {
        k->matmul[dt](got, x, xq, &wm, with_bias ? bias : NULL, n_rows, o0, o1);
        ref->matmul[dt](want, x, NULL, &wm, with_bias ? bias : NULL, n_rows, o0, o1);
    }

    if (run)
        kc_check_q_outputs(&wm, x, with_bias ? bias : NULL, got, want, sentinel, n_rows, o0, o1,
                           xq_bytes > 0, detail, sizeof detail);
    free(x);
    free(bias);
    free(got);
    free(want);
    free(xq);
    free(xq1);
    guarded_free(&g);
    return verdict(what, detail, problem, cap);
}

/* ---- to_f32 ------------------------------------------------------------------------------ */

/* Exact: f16 and bf16 are subsets of f32, so every bit pattern must give ref's bits (NaNs only
 * need to stay NaN: a hardware conversion may quiet signalling NaNs). The whole output buffer is
 * compared, so anything written past n shows as a changed 0x55555555 filler. */
bool kc_to_f32(const slate__kernels *k, const slate__kernels *ref, slate_dtype dt, int64_t n,
               char *problem, size_t cap) {
    enum { N = 65536 };
    uint16_t *h = xmalloc(N * sizeof(uint16_t));
    float *got = xmalloc(N * sizeof(float)), *want = xmalloc(N * sizeof(float));
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    int64_t off = N - n; /* tails end at the last value, 0xffff */
    memset(got, 0x55, N * sizeof(float));
    memset(want, 0x55, N * sizeof(float));
    k->to_f32[dt](got, h + off, n);
    ref->to_f32[dt](want, h + off, n);

    char what[100], detail[200] = "";
    snprintf(what, sizeof what, "%s to_f32 %s n=%lld", k->name, slate_dtype_name(dt),
             (long long)n);
    for (int64_t i = 0; i < N && !detail[0]; i++) {
        if (isnan(got[i]) && isnan(want[i]) && i < n) continue;
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            snprintf(detail, sizeof detail, "element %lld (0x%04x): got %.9g, want %.9g",
                     (long long)i, (unsigned)h[off + (i < n ? i : 0)], got[i], want[i]);
    }
    free(h);
    free(got);
    free(want);
    return verdict(what, detail, problem, cap);
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

bool kc_to_f16(const slate__kernels *k, const slate__kernels *ref, int64_t n, char *problem,
               size_t cap) {
    enum { N = KC_TO_F16_N };
    float *x = xmalloc(N * sizeof(float));
    uint16_t *got = xmalloc((N + 1) * sizeof(uint16_t)), *want = xmalloc((N + 1) * sizeof(uint16_t));
    int64_t m = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float v = slate__f16_to_f32((uint16_t)h), next = slate__f16_to_f32((uint16_t)(h + 1));
        if (isnan(v) || isinf(v)) { /* +-inf and the NaNs themselves, then filler */
            x[m++] = v;
            for (int i = 0; i < 6; i++) x[m++] = bits_f32(0x3f800000u + h * 7u + (uint32_t)i);
            continue;
        }
        /* the midpoint to the next f16 up in magnitude (65520 past the largest) */
        float mid = (h & 0x7fff) == 0x7bff ? copysignf(65520.0f, v) : (v + next) / 2.0f;
        uint32_t u;
        memcpy(&u, &mid, 4);
        x[m++] = v;
        x[m++] = mid;
        x[m++] = bits_f32(u - 1);
        x[m++] = bits_f32(u + 1);
        memcpy(&u, &v, 4);
        x[m++] = bits_f32(u + 1);
        x[m++] = bits_f32(u | 0x7fu); /* f32 subnormals near 0, other low bits elsewhere */
        x[m++] = bits_f32(u ^ 0x1000u);
    }
    for (uint32_t i = 0; m < N; i++) x[m++] = bits_f32(i * 0x000fffc1u + 0x1234567u); /* sweep */
    int64_t off = N - n;
    memset(got, 0x55, (N + 1) * sizeof(uint16_t));
    memset(want, 0x55, (N + 1) * sizeof(uint16_t));
    k->to_f16(got, x + off, n);
    ref->to_f16(want, x + off, n);

    char what[100], detail[200] = "";
    snprintf(what, sizeof what, "%s to_f16 n=%lld", k->name, (long long)n);
    for (int64_t i = 0; i <= n && !detail[0]; i++) {
        if (i < n && f16_is_nan(want[i]) && f16_is_nan(got[i])) continue;
        uint32_t u = 0;
        if (i < n) memcpy(&u, &x[off + i], 4);
        if (got[i] != want[i])
            snprintf(detail, sizeof detail, "element %lld (%.9g, 0x%08x): got 0x%04x, want 0x%04x%s",
                     (long long)i, i < n ? (double)x[off + i] : 0.0, (unsigned)u,
                     (unsigned)got[i], (unsigned)want[i], i == n ? " (written past n)" : "");
    }
    free(x);
    free(got);
    free(want);
    return verdict(what, detail, problem, cap);
}

/* ---- attention --------------------------------------------------------------------------- */

/* Tolerance 3e-5 of max |v| (1 here) per element, and normalized. The output is a convex
 * combination of v rows. Scores are dot products of up to 512 terms; ref sums them in order,
 * which carries an absolute error of ~u sqrt(hd) times the partial sums (a few 1e-6 at hd =
 * 512), and each softmax weight moves by that much relative; exp differs from libm by ~2 ulp.
 * Worst seen over 100 seeds: 4.2e-6 per element, 6.2e-6 normalized (hd = 512, 333 positions).
 * Dropping one of 333 positions moves the output by ~3e-3, a hundred times the bound. */
#define ATTN_TOL 3e-5

static const char *mask_name(kc_mask mk) {
    static const char *const names[] = {"none", "some_inf", "nan", "all_inf"};
    return names[mk];
}

/* mask[0..j1]: -inf at random (about 30 %), NaN (KC_MASK_NAN) or all -inf as mk says, else
 * values in [-3, 3). */
static void fill_mask(float *mask, int64_t j1, kc_mask mk, uint64_t *rng) {
    for (int64_t j = 0; j <= j1; j++) {
        float r = kc_randf(rng);
        mask[j] = mk == KC_MASK_ALL_INF            ? -INFINITY
                  : r < -0.4f                      ? -INFINITY
                  : mk == KC_MASK_NAN && r > 0.7f  ? NAN
                                                   : r * 3.0f;
    }
}

/* Each head's output within ATTN_TOL of ref's, naming the first head that is not. */
static void check_heads(char *detail, size_t cap, const outputs *o, int64_t n_heads, int64_t hd) {
    for (int64_t h = 0; h < n_heads && !detail[0]; h++) {
        check_close(detail, cap, o->got + h * hd, o->want + h * hd, o->mag, hd, ATTN_TOL);
        if (detail[0]) {
            size_t len = strlen(detail);
            snprintf(detail + len, cap - len, " in head %lld", (long long)h);
        }
    }
}

/* An attention case's outputs (n_heads x hd, V's values within +-1): nothing written past the
 * last head, all 0 when no score is valid (empty), else each head within ATTN_TOL of ref's. */
static void check_attention_out(char *detail, size_t cap, outputs *o, int64_t n_heads,
                                int64_t hd, bool empty) {
    int64_t nq = n_heads * hd;
    if (o->got[nq] != SENTINEL) snprintf(detail, cap, "wrote past the last head");
    for (int64_t d = 0; d < nq; d++) {
        o->mag[d] = 1.0; /* max |v| */
        if (empty && o->got[d] != 0.0f && !detail[0])
            snprintf(detail, cap, "out[%lld] = %g, want 0 (no valid score)", (long long)d,
                     o->got[d]);
    }
    check_heads(detail, cap, o, n_heads, hd);
}

bool kc_attention(const slate__kernels *k, const slate__kernels *ref, slate_dtype kvt, int64_t hd,
                  int64_t n_heads, int64_t stride, int64_t j0, int64_t j1, float scale,
                  float softcap, kc_mask mk, uint64_t *rng, char *problem, size_t cap) {
    int64_t n_elem = (j1 > 0 ? j1 : 1) * stride + hd; /* rows beyond j1 exist but are unused */
    size_t es = kvt == SLATE_DTYPE_F32 ? 4 : 2;
    float *kf = xmalloc((size_t)n_elem * sizeof(float)),
          *vf = xmalloc((size_t)n_elem * sizeof(float));
    void *kc = make_weights(kvt, n_elem, kf, rng), *vc = make_weights(kvt, n_elem, vf, rng);
    int64_t nq = n_heads * hd;
    float *q = xmalloc((size_t)nq * sizeof(float));
    float *mask = xmalloc((size_t)(j1 + 1) * sizeof(float));
    outputs o = outputs_alloc(nq);
    fill_rand(q, nq, rng);
    fill_mask(mask, j1, mk, rng);
    /* Offset the cache base so rows are not vector-aligned. */
    const void *kb = (const char *)kc + es, *vb = (const char *)vc + es;
    const float *mp = mk == KC_MASK_NONE ? NULL : mask;
    k->attention(o.got, q, kb, vb, kvt, stride, j0, j1, hd, n_heads, 1, 0, scale, softcap, mp);
    ref->attention(o.want, q, kb, vb, kvt, stride, j0, j1, hd, n_heads, 1, 0, scale, softcap, mp);

    char what[200], detail[300] = "";
    snprintf(what, sizeof what,
             "%s attention %s hd=%lld heads=%lld j=[%lld,%lld) stride=%lld scale=%g softcap=%g "
             "mask=%s",
             k->name, slate_dtype_name(kvt), (long long)hd, (long long)n_heads, (long long)j0,
             (long long)j1, (long long)stride, scale, softcap, mask_name(mk));
    check_attention_out(detail, sizeof detail, &o, n_heads, hd, j1 <= j0 || mk == KC_MASK_ALL_INF);
    free(kf);
    free(vf);
    free(kc);
    free(vc);
    free(q);
    free(mask);
    outputs_free(&o);
    return verdict(what, detail, problem, cap);
}

bool kc_attention_i8(const slate__kernels *k, const slate__kernels *ref, int64_t hd,
                     int64_t n_heads, int64_t stride, int64_t j0, int64_t j1, float scale,
                     float softcap, kc_mask mk, uint64_t *rng, char *problem, size_t cap) {
    int64_t rows = (j1 > 0 ? j1 : 0) + 1, nq = n_heads * hd; /* rows beyond j1 exist, unused */
    uint8_t *kc = xmalloc((size_t)(rows * stride + 1)), *vc = xmalloc((size_t)(rows * stride + 1));
    float *x = xmalloc((size_t)hd * sizeof(float)), *q = xmalloc((size_t)nq * sizeof(float));
    float *mask = xmalloc((size_t)(j1 + 1) * sizeof(float));
    const float inf = INFINITY;
    fill_mask(mask, j1, mk, rng);
    for (int64_t j = 0; j < rows; j++) {
        for (int64_t d = 0; d < hd; d++) x[d] = 3.0f * kc_randf(rng);
        slate__kv_quantize_i8(kc + 1 + j * stride, x, hd, (int32_t)hd);
        fill_rand(x, hd, rng);
        slate__kv_quantize_i8(vc + 1 + j * stride, x, hd, (int32_t)hd);
        if (mk != KC_MASK_NONE && j <= j1 && !(mask[j] > -INFINITY)) {
            memcpy(kc + 1 + j * stride, &inf, 4);
            memcpy(vc + 1 + j * stride, &inf, 4);
        }
    }
    outputs o = outputs_alloc(nq);
    fill_rand(q, nq, rng);
    const float *mp = mk == KC_MASK_NONE ? NULL : mask;
    k->attention_i8(o.got, q, kc + 1, vc + 1, stride, j0, j1, hd, n_heads, 1, 0, scale, softcap,
                    mp);
    ref->attention_i8(o.want, q, kc + 1, vc + 1, stride, j0, j1, hd, n_heads, 1, 0, scale, softcap,
                      mp);

    char what[200], detail[300] = "";
    snprintf(what, sizeof what,
             "%s attention_i8 hd=%lld heads=%lld j=[%lld,%lld) stride=%lld scale=%g softcap=%g "
             "mask=%s",
             k->name, (long long)hd, (long long)n_heads, (long long)j0, (long long)j1,
             (long long)stride, scale, softcap, mask_name(mk));
    check_attention_out(detail, sizeof detail, &o, n_heads, hd, j1 <= j0 || mk == KC_MASK_ALL_INF);
    free(kc);
    free(vc);
    free(x);
    free(q);
    free(mask);
    outputs_free(&o);
    return verdict(what, detail, problem, cap);
}

bool kc_attention_i8_at(const slate__kernels *k, const slate__kernels *ref, int64_t hd,
                        int64_t n_heads, int64_t len, kc_mask mk, bool capped, uint64_t *rng,
                        char *problem, size_t cap) {
    int64_t j0 = (int64_t)(kc_rand(rng) % 3), block = 4 + (hd + 3) / 4 * 4;
    int64_t stride = kc_rand(rng) % 2 ? block : 2 * block + 1;
    float scale = (1.0f + 7.0f * (float)(kc_rand(rng) % 2)) / sqrtf((float)hd);
    return kc_attention_i8(k, ref, hd, n_heads, stride, j0, j0 + len, scale, capped ? 0.5f : 0.0f,
                           mk, rng, problem, cap);
}

/* One cache row of kc_attention_rows, K (is_k) or V, of dtype kvt: random values, or for the
 * positions outside the call's range (out) K 30 and V +inf. */
static void rows_fill(uint8_t *dst, slate_dtype kvt, int64_t hd, bool is_k, bool out,
                      uint64_t *rng) {
    float x[SLATE__MAX_HEAD_DIM];
    const float inf = INFINITY;
    for (int64_t d = 0; d < hd; d++)
        x[d] = out ? (is_k ? 30.0f : inf) : (is_k ? 2.0f : 1.0f) * kc_randf(rng);
    if (kvt == SLATE_DTYPE_I8) { /* out: K 30 (all 127, scale 30 / 127), V's scale inf */
        if (out && !is_k) memset(x, 0, sizeof x);
        slate__kv_quantize_i8(dst, x, hd, (int32_t)hd);
        if (out && !is_k) memcpy(dst, &inf, 4);
        return;
    }
    for (int64_t d = 0; d < hd; d++) {
        if (kvt == SLATE_DTYPE_F32) memcpy(dst + d * 4, &x[d], 4);
        else {
            uint16_t h = slate__f32_to_f16(x[d]);
            memcpy(dst + d * 2, &h, 2);
        }
    }
}

bool kc_attention_rows(const slate__kernels *k, const slate__kernels *ref, slate_dtype kvt,
                       bool k16, int64_t hd, int64_t group, int64_t n_rows, int64_t window,
                       int64_t j0, int64_t j1, float softcap, uint64_t *rng, char *problem,
                       size_t cap) {
    int64_t nh = group * n_rows, nq = nh * hd;
    size_t es = kvt == SLATE_DTYPE_I8 ? 1 : kvt == SLATE_DTYPE_F32 ? 4 : 2;
    int64_t rb = kvt == SLATE_DTYPE_I8 ? 4 + (hd + 3) / 4 * 4 : hd; /* a row, in stride units */
    int64_t stride = k16 || kc_rand(rng) % 2 ? rb : 2 * rb + 1;
    int64_t np = (j1 + 15) / 16 * 16 + 16; /* K16 reads whole blocks */
    uint8_t *kc = xmalloc((size_t)(np * stride) * es), *vc = xmalloc((size_t)(np * stride) * es);
    uint16_t *kt = xmalloc((size_t)(np * hd) * 2); /* K16: K dim-major in blocks of 16 */
    for (int64_t j = 0; j < np; j++) {
        rows_fill(kc + (size_t)(j * stride) * es, kvt, hd, true, j < j0 || j >= j1, rng);
        rows_fill(vc + (size_t)(j * stride) * es, kvt, hd, false, j < j0 || j >= j1, rng);
        for (int64_t d = 0; k16 && d < hd; d++)
            memcpy(&kt[j / 16 * 16 * hd + d * 16 + j % 16], kc + (size_t)(j * stride + d) * 2, 2);
    }
    float *q = xmalloc((size_t)nq * sizeof(float));
    fill_rand(q, nq, rng);
    float scale = (1.0f + 7.0f * (float)(kc_rand(rng) % 2)) / sqrtf((float)hd);
    outputs o = outputs_alloc(nq), batch = outputs_alloc(nq);
    for (int64_t i = 0; i < n_rows; i++) { /* ref, row by row: [its start, its end) */
        int64_t end = j1 - (n_rows - 1 - i), off = i * group * hd;
        int64_t start = window > 0 && end - window > j0 ? end - window : j0;
        if (kvt == SLATE_DTYPE_I8)
            ref->attention_i8(o.want + off, q + off, kc, vc, stride, start, end, hd, group, 1, 0,
                              scale, softcap, NULL);
        else
            ref->attention(o.want + off, q + off, kc, vc, kvt, stride, start, end, hd, group, 1,
                           0, scale, softcap, NULL);
    }
    if (kvt == SLATE_DTYPE_I8) {
        ref->attention_i8(batch.got, q, kc, vc, stride, j0, j1, hd, nh, n_rows, window, scale,
                          softcap, NULL);
        k->attention_i8(o.got, q, kc, vc, stride, j0, j1, hd, nh, n_rows, window, scale, softcap,
                        NULL);
    } else {
        ref->attention(batch.got, q, kc, vc, kvt, stride, j0, j1, hd, nh, n_rows, window, scale,
                       softcap, NULL);
        if (k16)
            k->attention_k16(o.got, q, kt, (const uint16_t *)vc, stride, j0, j1, hd, nh, n_rows,
                             window, scale, softcap, NULL);
        else
            k->attention(o.got, q, kc, vc, kvt, stride, j0, j1, hd, nh, n_rows, window, scale,
                         softcap, NULL);
    }

    char what[200], detail[300] = "";
    snprintf(what, sizeof what,
             "%s attention%s %s hd=%lld group=%lld rows=%lld window=%lld j=[%lld,%lld) "
             "stride=%lld scale=%g softcap=%g",
             k->name, k16 ? "_k16" : "", slate_dtype_name(kvt), (long long)hd, (long long)group,
             (long long)n_rows, (long long)window, (long long)j0, (long long)j1,
             (long long)stride, scale, softcap);
    for (int64_t d = 0; d <= nq && !detail[0]; d++)
        if (memcmp(&batch.got[d], &o.want[d], sizeof(float)))
            snprintf(detail, sizeof detail, "ref's out[%lld] = %.9g in one call, %.9g row by row",
                     (long long)d, batch.got[d], o.want[d]);
    check_attention_out(detail, sizeof detail, &o, nh, hd, false);
    free(kc);
    free(vc);
    free(kt);
    free(q);
    outputs_free(&o);
    outputs_free(&batch);
    return verdict(what, detail, problem, cap);
}

/* K16 (kernels.h): the cache is made for positions [0, j1 rounded up to 16); positions outside
 * [j0, j1) hold 30 in every dim of K (scores far from the others: such a position would take
 * or lose the softmax) and +inf in V (even a weight of 0 would make NaN), in the K16 copy and
 * in the rows alike, so a kernel that used one of them would show it. The K16 kernel must
 * match ref on the rows within ATTN_TOL and, when j0 is a multiple of 16 (the same blocks),
 * give the bits of the table's own attention on the rows. */
bool kc_attention_k16(const slate__kernels *k, const slate__kernels *ref, int64_t hd,
                      int64_t n_heads, int64_t j0, int64_t j1, float scale, float softcap,
                      kc_mask mk, uint64_t *rng, char *problem, size_t cap) {
    int64_t np = (j1 + 15) / 16 * 16, n_elem = (np > 0 ? np : 16) * hd;
    uint16_t *kr = xmalloc((size_t)n_elem * 2), *vr = xmalloc((size_t)n_elem * 2);
    uint16_t *kt = xmalloc((size_t)n_elem * 2);
    for (int64_t j = 0; j < n_elem / hd; j++)
        for (int64_t d = 0; d < hd; d++) {
            bool in = j >= j0 && j < j1;
            kr[j * hd + d] = in ? slate__f32_to_f16(2.0f * kc_randf(rng)) : 0x4f80; /* 30 */
            vr[j * hd + d] = in ? slate__f32_to_f16(kc_randf(rng)) : 0x7c00;        /* +inf */
            kt[j / 16 * 16 * hd + d * 16 + j % 16] = kr[j * hd + d];
        }
    int64_t nq = n_heads * hd;
    float *q = xmalloc((size_t)nq * sizeof(float));
    float *mask = xmalloc((size_t)(j1 + 1) * sizeof(float));
    outputs o = outputs_alloc(nq), rows = outputs_alloc(nq);
    fill_rand(q, nq, rng);
    fill_mask(mask, j1, mk, rng);
    const float *mp = mk == KC_MASK_NONE ? NULL : mask;
    k->attention_k16(o.got, q, kt, vr, hd, j0, j1, hd, n_heads, 1, 0, scale, softcap, mp);
    k->attention(rows.got, q, kr, vr, SLATE_DTYPE_F16, hd, j0, j1, hd, n_heads, 1, 0, scale,
                 softcap, mp);
    ref->attention(o.want, q, kr, vr, SLATE_DTYPE_F16, hd, j0, j1, hd, n_heads, 1, 0, scale,
                   softcap, mp);

    char what[200], detail[300] = "";
    snprintf(what, sizeof what,
             "%s attention_k16 hd=%lld heads=%lld j=[%lld,%lld) scale=%g softcap=%g mask=%s",
             k->name, (long long)hd, (long long)n_heads, (long long)j0, (long long)j1, scale,
             softcap, mask_name(mk));
    if (o.got[nq] != SENTINEL) snprintf(detail, sizeof detail, "wrote past the last head");
    bool empty = j1 <= j0 || mk == KC_MASK_ALL_INF;
    for (int64_t d = 0; d < nq && !detail[0]; d++) {
        o.mag[d] = 1.0; /* max |v| */
        if (empty && o.got[d] != 0.0f)
            snprintf(detail, sizeof detail, "out[%lld] = %g, want 0 (no valid score)",
                     (long long)d, o.got[d]);
        else if (j0 % 16 == 0 && memcmp(&o.got[d], &rows.got[d], sizeof(float)))
            snprintf(detail, sizeof detail, "out[%lld] = %.9g, the rows give %.9g (same blocks: "
                     "want the same bits)", (long long)d, o.got[d], rows.got[d]);
    }
    check_heads(detail, sizeof detail, &o, n_heads, hd);
    free(kr);
    free(vr);
    free(kt);
    free(q);
    free(mask);
    outputs_free(&o);
    outputs_free(&rows);
    return verdict(what, detail, problem, cap);
}

/* ---- rms_norm ---------------------------------------------------------------------------- */

/* y = x * r * w with r = 1/sqrt(mean(x^2) + eps). Tolerance 1e-5 relative per element (mag =
 * |want|): the sum of squares has only positive terms, so both summation orders are within
 * ~sqrt(n) u relative of the exact value and r within half of that; then two rounded products.
 * Worst seen over 100 seeds: 1.8e-6 (n = 4099). */
#define RMS_NORM_TOL 1e-5

bool kc_rms_norm(const slate__kernels *k, const slate__kernels *ref, int64_t n, float eps,
                 uint64_t *rng, char *problem, size_t cap) {
    float *x = xmalloc((size_t)n * sizeof(float)), *w = xmalloc((size_t)n * sizeof(float));
    outputs o = outputs_alloc(n);
    fill_rand(x, n, rng);
    fill_rand(w, n, rng);
    k->rms_norm(o.got, x, w, n, eps);
    ref->rms_norm(o.want, x, w, n, eps);

    char what[100], detail[300] = "";
    snprintf(what, sizeof what, "%s rms_norm n=%lld eps=%g", k->name, (long long)n, eps);
    for (int64_t i = 0; i < n; i++) o.mag[i] = fabs((double)o.want[i]);
    outputs_check(&o, "n", RMS_NORM_TOL, detail, sizeof detail);
    free(x);
    free(w);
    outputs_free(&o);
    return verdict(what, detail, problem, cap);
}

/* ---- swiglu, geglu ----------------------------------------------------------------------- */

/* The gated units y = act(a) * b of the feed-forward: silu (SwiGLU) or gelu_tanh (GeGLU).
 * Tolerance 1e-6 relative per element (mag = |a b| + 1e-30), for both:
 *   swiglu: the variants' exp polynomial is within ~2 ulp of expf and a division and a
 *     product follow, so a few u (6e-8).
 *   geglu: ref evaluates 0.5 a (1 + tanhf(u)), the variants a / (1 + e^-2u) (the same
 *     function) with the exp polynomial of swiglu; both are within a few u of the exact value
 *     times |a| (where 1 + tanh(u) cancels, for a well below 0, ref's error is ~|a| u absolute,
 *     still a few u of |a b|).
 * Inputs span [-100, 100] so exp's clamping at both ends is exercised; for geglu every 7th a
 * is 1e13 in size, whose cube overflows to +-inf (the saturated tanh). y aliases a (in place). */
#define GLU_TOL 1e-6

bool kc_glu(const slate__kernels *k, const slate__kernels *ref, kc_glu_kind kind, int64_t n,
            uint64_t *rng, char *problem, size_t cap) {
    const bool ge = kind == KC_GLU_GEGLU;
    void (*const fk)(float *, const float *, const float *, int64_t) = ge ? k->geglu : k->swiglu;
    void (*const fr)(float *, const float *, const float *, int64_t) = ge ? ref->geglu : ref->swiglu;
    float *a = xmalloc((size_t)n * sizeof(float)), *b = xmalloc((size_t)n * sizeof(float));
    outputs o = outputs_alloc(n);
    fill_rand(a, n, rng);
    fill_rand(b, n, rng);
    for (int64_t i = 0; i < n; i++)
        a[i] *= ge && i % 7 == 3 ? 1e13f : i % 5 == 0 ? 100.0f : 8.0f;
    memcpy(o.got, a, (size_t)n * sizeof(float));
    fk(o.got, o.got, b, n); /* in place */
    fr(o.want, a, b, n);

    char what[100], detail[300] = "";
    snprintf(what, sizeof what, "%s %s n=%lld", k->name, ge ? "geglu" : "swiglu", (long long)n);
    for (int64_t i = 0; i < n; i++) o.mag[i] = fabs((double)a[i] * b[i]) + 1e-30;
    outputs_check(&o, "n", GLU_TOL, detail, sizeof detail);
    free(a);
    free(b);
    outputs_free(&o);
    return verdict(what, detail, problem, cap);
}

/* ---- softcap ---------------------------------------------------------------------------- */

/* cap * tanh(x / cap). Tolerance 1e-6 relative per element, plus cap * 2^-148 absolute: the
 * variants' vector tanh is within 2 ulp of tanhf (x86/avx512.c's tanh16), they divide by cap
 * as a product with 1 / cap (1.5 ulp more in the argument, which tanh does not enlarge: x
 * tanh'(x) / tanh(x) <= 1) and the final product rounds once: ~4 ulp, 5e-7 relative. Below
 * FLT_MIN x / cap keeps only the absolute precision of subnormals (2^-149), hence the
 * absolute term. A tanh coefficient off in its third digit errs by ~1e-5 relative. NaN must
 * stay NaN, +-inf and large |x| must give +-cap. */
#define SOFTCAP_TOL 1e-6

bool kc_softcap(const slate__kernels *k, const slate__kernels *ref, int64_t n, float cap,
                uint64_t *rng, char *problem, size_t pcap) {
    /* every 11th input a special value; the rest |x| / cap from 0.01 (tanh's polynomial) past
     * 0.625 (its exp branch) to 30 (saturated) */
    static const float specials[] = {0.0f, -0.0f, 1e-45f, -3e-39f, 1.1754942e-38f, INFINITY,
                                     -INFINITY, NAN, 3e38f, -1e30f, 5e-8f};
    static const float spans[] = {0.01f, 0.7f, 2.0f, 30.0f};
    enum { N_SPECIALS = sizeof specials / sizeof *specials };
    float *x = xmalloc((size_t)n * sizeof(float));
    outputs o = outputs_alloc(n);
    for (int64_t i = 0; i < n; i++)
        x[i] = i % 11 == 10 ? specials[(i / 11) % N_SPECIALS]
                            : kc_randf(rng) * cap * spans[i % 4];
    memcpy(o.got, x, (size_t)n * sizeof(float));
    k->softcap(o.got, o.got, n, cap); /* in place */
    ref->softcap(o.want, x, n, cap);

    char what[100], detail[300] = "";
    snprintf(what, sizeof what, "%s softcap n=%lld cap=%g", k->name, (long long)n, (double)cap);
    if (o.got[n] != SENTINEL) snprintf(detail, sizeof detail, "wrote past n");
    for (int64_t i = 0; i < n && !detail[0]; i++) {
        double got = o.got[i], want = o.want[i], d = fabs(got - want);
        if (isnan(want) ? !isnan(got) : !(d <= SOFTCAP_TOL * fabs(want) + cap * 0x1p-148))
            snprintf(detail, sizeof detail, "element %lld: x %.9g: got %.9g, want %.9g",
                     (long long)i, x[i], got, want);
    }
    free(x);
    outputs_free(&o);
    return verdict(what, detail, problem, pcap);
}

/* ---- tanh -------------------------------------------------------------------------------- */

/* The error of a float result y against the exact value w, in units of the last place of w
 * (the spacing of floats at |w|; subnormal spacing below FLT_MIN). */
static double ulps(float y, double w) {
    int e;
    frexp(fabs(w), &e);
    return fabs((double)y - w) / ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
}

/* Bounds: 2 ulp, 1e-7 absolute, 2e-7 relative, above x86/avx512.c's tanh16's 1.4 ulp, 8.1e-8
 * and 1.5e-7 over all 2^32 floats, and far below what a polynomial coefficient off in its
 * third digit causes (~1e-4 near 0.6). */
#define TANH_ULP 2.0
#define TANH_ABS 1e-7
#define TANH_REL 2e-7

bool kc_tanh(const slate__kernels *k, char *problem, size_t cap) {
    enum { CHUNK = 4096 };
    float *x = xmalloc(CHUNK * sizeof(float)), *y = xmalloc(CHUNK * sizeof(float));
    char what[60], detail[300] = "";
    snprintf(what, sizeof what, "%s tanh (softcap with cap 1)", k->name);
    double max_ulp = 0.0, max_abs = 0.0, max_rel = 0.0;
    float at_ulp = 0.0f;
    /* {first, last, step} over bit patterns: all exponents of both signs; every float of
     * [0.6, 0.65]; every 64th of [8.9, 10.2] */
    static const uint64_t sweeps[3][3] = {
        {0, 0xffffffffull, 4099}, {0x3f19999a, 0x3f266666, 1}, {0x410e6666, 0x41233333, 64}};
    for (int sw = 0; sw < 3 && !detail[0]; sw++) {
        uint64_t b = sweeps[sw][0];
        while (b <= sweeps[sw][1] && !detail[0]) {
            int n = 0;
            for (; n < CHUNK && b <= sweeps[sw][1]; n++, b += sweeps[sw][2]) {
                uint32_t u = (uint32_t)b;
                memcpy(&x[n], &u, 4);
            }
            k->softcap(y, x, n, 1.0f);
            for (int i = 0; i < n && !detail[0]; i++) {
                float xi = x[i], yi = y[i];
                if (isnan(xi)) {
                    if (!isnan(yi)) snprintf(detail, sizeof detail, "tanh(NaN) = %.9g", yi);
                    continue;
                }
                if (fabsf(xi) >= 10.0f && yi != copysignf(1.0f, xi))
                    snprintf(detail, sizeof detail, "tanh(%a) = %a, want %g exactly", xi, yi,
                             copysignf(1.0f, xi));
                else if (fabsf(xi) < 0x1p-13f && memcmp(&xi, &yi, 4) != 0)
                    snprintf(detail, sizeof detail, "tanh(%a) = %a, want x itself", xi, yi);
                double w = tanh((double)xi), d = fabs((double)yi - w), u = ulps(yi, w);
                if (u > max_ulp) {
                    max_ulp = u;
                    at_ulp = xi;
                }
                if (d > max_abs) max_abs = d;
                if (w != 0.0 && d / fabs(w) > max_rel) max_rel = d / fabs(w);
            }
        }
    }
    if (!detail[0] && !(max_ulp <= TANH_ULP && max_abs <= TANH_ABS && max_rel <= TANH_REL))
        snprintf(detail, sizeof detail, "max %.3g ulp (at x = %a), %.3g absolute, %.3g relative;"
                 " bounds %g ulp, %g, %g", max_ulp, (double)at_ulp, max_abs, max_rel, TANH_ULP,
                 TANH_ABS, TANH_REL);
    /* the special values by name, so none depends on the sweeps' steps */
    static const float sp[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f, -0x1p-126f,
                               0x1p-14f, 10.0f, -10.0f, 3.4e38f, -3.4e38f, INFINITY, -INFINITY,
                               NAN, -NAN};
    const int nsp = (int)(sizeof sp / sizeof *sp);
    memcpy(x, sp, sizeof sp);
    k->softcap(y, x, nsp, 1.0f);
    for (int i = 0; i < nsp && !detail[0]; i++) {
        bool ok = isnan(sp[i])            ? isnan(y[i])
                  : fabsf(sp[i]) >= 10.0f ? y[i] == copysignf(1.0f, sp[i])
                                          : memcmp(&y[i], &sp[i], 4) == 0;
        if (!ok) snprintf(detail, sizeof detail, "tanh(%a) = %a", (double)sp[i], (double)y[i]);
    }
    free(x);
    free(y);
    return verdict(what, detail, problem, cap);
}

/* ---- rope -------------------------------------------------------------------------------- */

const int64_t kc_rope_dims[KC_N_ROPE_DIMS][2] = {
    {2, 2},   {4, 4},   {6, 6},   {16, 16},   {18, 18},  {32, 32},   {34, 34}, {64, 64},
    {64, 32}, {80, 80}, {96, 64}, {128, 128}, {128, 64}, {256, 256}, {30, 14}, {10, 2},
    {128, 96}, {16, 12}, {26, 10}};

/* Tolerance 1e-6 per element against mag = (|u| + |v|) max(mscale, 1) of the pair: one rounded
 * product and one fused or rounded sum. Dims from rope_dim on are copied (there mag = 2 |x|). */
#define ROPE_TOL 1e-6

bool kc_rope(const slate__kernels *k, const slate__kernels *ref, int64_t n_heads, int64_t hd,
             int64_t rope_dim, bool half, bool in_place, float mscale, uint64_t *rng,
             char *problem, size_t cap) {
    char what[140], detail[300] = "";
    snprintf(what, sizeof what, "%s rope heads=%lld hd=%lld rope_dim=%lld half=%d in_place=%d "
             "mscale=%g", k->name, (long long)n_heads, (long long)hd, (long long)rope_dim,
             (int)half, (int)in_place, (double)mscale);
    if (rope_dim < 2 || rope_dim % 2 || rope_dim > hd || hd > SLATE__MAX_HEAD_DIM)
        return verdict(what, "not a valid case: needs an even rope_dim, 2 <= rope_dim <= hd <= "
                             "SLATE__MAX_HEAD_DIM", problem, cap);
    int64_t n = n_heads * hd, rd = rope_dim;
    float *x = xmalloc((size_t)n * sizeof(float));
    float cs[SLATE__MAX_HEAD_DIM / 2], sn[SLATE__MAX_HEAD_DIM / 2];
    outputs o = outputs_alloc(n);
    fill_rand(x, n, rng);
    for (int64_t i = 0; i < rd / 2; i++) {
        float ang = 37.0f * kc_randf(rng);
        cs[i] = cosf(ang) * mscale;
        sn[i] = sinf(ang) * mscale;
    }
    if (in_place) {
        memcpy(o.got, x, (size_t)n * sizeof(float));
        k->rope(o.got, o.got, cs, sn, n_heads, hd, rd, half);
    } else {
        k->rope(o.got, x, cs, sn, n_heads, hd, rd, half);
    }
    ref->rope(o.want, x, cs, sn, n_heads, hd, rd, half);

    for (int64_t h = 0; h < n_heads; h++)
        for (int64_t d = 0; d < hd; d++) {
            int64_t i = h * hd + d, p = d;
            if (d < rd) /* the pair partner of d */
                p = half ? (d < rd / 2 ? d + rd / 2 : d - rd / 2) : (d ^ 1);
            o.mag[i] = (fabs((double)x[i]) + fabs((double)x[h * hd + p])) *
                           (d < rd && mscale > 1 ? mscale : 1) + 1e-30;
        }
    outputs_check(&o, "the last head", ROPE_TOL, detail, sizeof detail);
    free(x);
    outputs_free(&o);
    return verdict(what, detail, problem, cap);
}
