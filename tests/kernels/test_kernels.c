/* test_kernels.c - every SIMD kernel table this CPU supports ("avx2", "avx512") against the
 * scalar reference ("ref", kernels/ref/ref.c) on random data and random shapes: sizes of 1, odd
 * sizes, tails of every length, sizes past the variants' cache blocks, sub-ranges of outputs
 * that do not start at 0, with and without bias, masks with -inf, F32 and F16 caches. A table
 * the CPU lacks is skipped. The seed is printed once (tu_seed); SLATE_TEST_SEED=<n> repeats a
 * run. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernels/kernels.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static const slate__kernels *table_or_skip(void **st) {
    const char *name = *st;
    const slate__kernels *k = slate__kernels_by_name(name);
    if (!k) {
        fprintf(stderr, "[  SKIP    ] kernel table '%s' not built or not supported here\n", name);
        skip();
    }
    assert_string_equal(k->name, name);
    return k;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static void fill_rand(float *a, int64_t n, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) a[i] = tu_randf(rng);
}

static const char *dtype_name(slate_dtype dt) {
    return dt == SLATE_DTYPE_F32 ? "f32" : dt == SLATE_DTYPE_F16 ? "f16" : "bf16";
}

/* Random weights of dtype dt, and the same values as f32 (for the magnitude bound). */
static void *make_weights(slate_dtype dt, int64_t n, float *as_f32, uint64_t *rng) {
    size_t es = dt == SLATE_DTYPE_F32 ? 4 : 2;
    void *w = xmalloc((size_t)n * es);
    for (int64_t i = 0; i < n; i++) {
        float f = tu_randf(rng);
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

/* got vs want (ref) for n results with magnitudes mag (a scale no result can exceed and that
 * does not cancel, e.g. sum |w_i||x_i|): per element |got - want| <= tol * mag, and over the
 * case the normalized error ||got - want|| / ||want|| <= tol. The normalized error needs at
 * least 16 results and ||want|| >= 1e-3 ||mag||: one or two outputs that happen to cancel to
 * almost 0 make it meaningless (seen: 3.5e-5 on a single output), while the per-element bound
 * still holds there. Each caller states its tol and why. */
static void check_close(const char *what, const float *got, const float *want, const double *mag,
                        int64_t n, double tol) {
    double d2 = 0.0, w2 = 0.0, m2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol * mag[i])) {
            fail_msg("%s: element %lld: got %.9g, want %.9g, |diff| %.3g > %g * mag %.3g", what,
                     (long long)i, got[i], want[i], d, tol, mag[i]);
        }
        d2 += d * d;
        w2 += (double)want[i] * want[i];
        m2 += mag[i] * mag[i];
    }
    if (n >= 16 && w2 >= 1e-6 * m2 && !(sqrt(d2 / w2) <= tol))
        fail_msg("%s: normalized error %.3g > %g", what, sqrt(d2 / w2), tol);
}

/* ---- matmul ------------------------------------------------------------------------------ */

/* Tolerance 1e-5 (per element against mag = sum |w_i||x_i| + |bias|, and normalized): ref
 * sums sequentially, the variants in 8/16 lanes, in K blocks, with FMA, so results differ by
 * rounding of order u sqrt(n) (u = 6e-8) of the partial sums. Worst seen over 100 seeds:
 * 3.2e-7 per element, 2.7e-6 normalized (n_in = 4099). A dropped or doubled term of typical
 * size is far above either bound. */
#define MATMUL_TOL 1e-5

/* One matmul case: y columns [o0, o1) match ref; columns outside are left untouched. */
static void check_matmul(const slate__kernels *k, const slate__kernels *ref, slate_dtype dt,
                         int64_t n_rows, int64_t n_in, int64_t n_out, int64_t o0, int64_t o1,
                         bool with_bias, uint64_t *rng) {
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

    char what[200];
    snprintf(what, sizeof what, "%s matmul %s rows=%lld n_in=%lld n_out=%lld o=[%lld,%lld) bias=%d",
             k->name, dtype_name(dt), (long long)n_rows, (long long)n_in, (long long)n_out,
             (long long)o0, (long long)o1, (int)with_bias);
    /* Compact the written columns to the front (in place: index n only grows; element e is
     * y[e / (o1 - o0)][o0 + e % (o1 - o0)]) and check that the others were left alone. */
    int64_t n = 0;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t o = 0; o < n_out; o++) {
            if (o < o0 || o >= o1) {
                if (got[r * n_out + o] != sentinel)
                    fail_msg("%s: wrote y[%lld][%lld] outside the range", what, (long long)r,
                             (long long)o);
                continue;
            }
            double s = with_bias ? fabs(bias[o]) : 0.0;
            for (int64_t i = 0; i < n_in; i++)
                s += fabs((double)wf[o * n_in + i] * x[r * n_in + i]);
            got[n] = got[r * n_out + o];
            want[n] = want[r * n_out + o];
            mag[n++] = s;
        }
    check_close(what, got, want, mag, n, MATMUL_TOL);
    free(x);
    free(wf);
    free(bias);
    free(got);
    free(want);
    free(mag);
    free(w);
}

static void matmul_matches_ref_for_every_dtype_and_shape(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x6d61746d756cull;
    static const int64_t n_ins[] = {1, 3, 7, 15, 16, 17, 31, 33, 64, 100, 257, 1000, 4099};
    static const int64_t n_rowss[] = {1, 2, 3, 4, 5, 8, 13};
    for (int dt = SLATE_DTYPE_F32; dt <= SLATE_DTYPE_BF16; dt++)
        for (size_t a = 0; a < sizeof n_ins / sizeof *n_ins; a++)
            for (size_t b = 0; b < sizeof n_rowss / sizeof *n_rowss; b++) {
                int64_t n_out = 1 + (int64_t)(tu_rand(&rng) % 40);
                /* o0 > 0 whenever there is room; o1 anywhere after it. */
                int64_t o0 = n_out > 1 ? 1 + (int64_t)(tu_rand(&rng) % (uint64_t)(n_out - 1)) : 0;
                int64_t o1 = o0 + 1 + (int64_t)(tu_rand(&rng) % (uint64_t)(n_out - o0));
                bool with_bias = (a + b) % 2 == 0;
                check_matmul(k, ref, (slate_dtype)dt, n_rowss[b], n_ins[a], n_out, o0, o1,
                             with_bias, &rng);
                check_matmul(k, ref, (slate_dtype)dt, n_rowss[b], n_ins[a], n_out, 0, n_out,
                             !with_bias, &rng);
            }
}

/* Shapes past the variants' cache blocks (128 rows, 512 inputs, 16 outputs), so several row,
 * K and output blocks and their partial sums are exercised. */
static void matmul_matches_ref_across_cache_blocks(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x626c6f636b73ull;
    for (int dt = SLATE_DTYPE_F32; dt <= SLATE_DTYPE_BF16; dt++) {
        check_matmul(k, ref, (slate_dtype)dt, 131, 1030, 37, 3, 36, true, &rng);
        check_matmul(k, ref, (slate_dtype)dt, 6, 1536, 50, 0, 50, false, &rng);
        check_matmul(k, ref, (slate_dtype)dt, 1, 2053, 70, 5, 69, true, &rng);
    }
}

/* ---- to_f32 ------------------------------------------------------------------------------ */

/* Conversion is exact in both (f16 and bf16 are subsets of f32): every one of the 65536 bit
 * patterns, at every tail length, must give the same bits (NaNs only need to stay NaN). */
static void to_f32_is_exact_for_every_half_value(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    enum { N = 65536 };
    uint16_t *h = xmalloc(N * sizeof(uint16_t));
    float *got = xmalloc(N * sizeof(float)), *want = xmalloc(N * sizeof(float));
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    for (int dt = SLATE_DTYPE_F16; dt <= SLATE_DTYPE_BF16; dt++) {
        static const int64_t lens[] = {N, N - 1, 1, 2, 7, 15, 16, 17, 31, 33};
        for (size_t c = 0; c < sizeof lens / sizeof *lens; c++) {
            int64_t off = N - lens[c]; /* tails end at the last value, 0xffff */
            memset(got, 0x55, N * sizeof(float));
            memset(want, 0x55, N * sizeof(float));
            k->to_f32[dt](got, h + off, lens[c]);
            ref->to_f32[dt](want, h + off, lens[c]);
            for (int64_t i = 0; i < N; i++) {
                if (isnan(got[i]) && isnan(want[i]) && i < lens[c]) continue;
                if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                    fail_msg("%s to_f32 %s n=%lld: element %lld (0x%04x): got %.9g, want %.9g",
                             k->name, dtype_name((slate_dtype)dt), (long long)lens[c], (long long)i,
                             (unsigned)h[off + (i < lens[c] ? i : 0)], got[i], want[i]);
            }
        }
    }
    free(h);
    free(got);
    free(want);
}

/* ---- attention --------------------------------------------------------------------------- */

typedef enum { MASK_NONE, MASK_SOME_INF, MASK_ALL_INF } mask_kind;

/* Tolerance 3e-5 of max |v| (1 here) per element, and normalized. The output is a convex
 * combination of v rows. Scores are dot products of up to 512 terms; ref sums them in order,
 * which carries an absolute error of ~u sqrt(hd) times the partial sums (a few 1e-6 at hd =
 * 512), and each softmax weight moves by that much relative; exp differs from libm by ~2 ulp.
 * Worst seen over 100 seeds: 4.2e-6 per element, 6.2e-6 normalized (hd = 512, 333 positions).
 * Dropping one of 333 positions moves the output by ~3e-3, a hundred times the bound. */
#define ATTN_TOL 3e-5

/* One attention case over cache rows [j0, j1) with rows `stride` elements apart, for n_heads
 * query heads sharing the kv head (each head's output checked on its own). */
static void check_attention(const slate__kernels *k, const slate__kernels *ref, slate_dtype kvt,
                            int64_t hd, int64_t n_heads, int64_t j0, int64_t j1, float scale,
                            mask_kind mk, uint64_t *rng) {
    int64_t stride = hd + (int64_t)(tu_rand(rng) % 4) * hd + (int64_t)(tu_rand(rng) % 3);
    int64_t n_elem = (j1 > 0 ? j1 : 1) * stride + hd; /* rows beyond j1 exist but are unused */
    size_t es = kvt == SLATE_DTYPE_F32 ? 4 : 2;
    float *kf = xmalloc((size_t)n_elem * sizeof(float)),
          *vf = xmalloc((size_t)n_elem * sizeof(float));
    void *kc = make_weights(kvt, n_elem, kf, rng), *vc = make_weights(kvt, n_elem, vf, rng);
    int64_t nq = n_heads * hd;
    float *q = xmalloc((size_t)nq * sizeof(float));
    float *mask = xmalloc((size_t)(j1 + 1) * sizeof(float));
    float *got = xmalloc((size_t)(nq + 1) * sizeof(float)),
          *want = xmalloc((size_t)(nq + 1) * sizeof(float));
    double *mag = xmalloc((size_t)nq * sizeof(double));
    fill_rand(q, nq, rng);
    for (int64_t j = 0; j <= j1; j++) {
        float r = tu_randf(rng);
        mask[j] = mk == MASK_ALL_INF ? -INFINITY : r < -0.4f ? -INFINITY : r * 3.0f;
    }
    /* Offset the cache base so rows are not vector-aligned. */
    const void *kb = (const char *)kc + es, *vb = (const char *)vc + es;
    for (int64_t d = 0; d <= nq; d++) got[d] = want[d] = 777.0f;
    const float *mp = mk == MASK_NONE ? NULL : mask;
    k->attention(got, q, kb, vb, kvt, stride, j0, j1, hd, n_heads, scale, mp);
    ref->attention(want, q, kb, vb, kvt, stride, j0, j1, hd, n_heads, scale, mp);

    char what[200];
    snprintf(what, sizeof what,
             "%s attention %s hd=%lld heads=%lld j=[%lld,%lld) stride=%lld scale=%g mask=%d",
             k->name, dtype_name(kvt), (long long)hd, (long long)n_heads, (long long)j0,
             (long long)j1, (long long)stride, scale, (int)mk);
    if (got[nq] != 777.0f) fail_msg("%s: wrote past the last head", what);
    bool empty = j1 <= j0 || mk == MASK_ALL_INF;
    for (int64_t d = 0; d < nq; d++) {
        mag[d] = 1.0; /* max |v| */
        if (empty && got[d] != 0.0f)
            fail_msg("%s: out[%lld] = %g, want 0 (no valid score)", what, (long long)d, got[d]);
    }
    for (int64_t h = 0; h < n_heads; h++)
        check_close(what, got + h * hd, want + h * hd, mag, hd, ATTN_TOL);
    free(kf);
    free(vf);
    free(kc);
    free(vc);
    free(q);
    free(mask);
    free(got);
    free(want);
    free(mag);
}

static void attention_matches_ref_for_every_head_dim_and_range(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x6174746eull;
    static const int64_t hds[] = {1, 5, 8, 16, 63, 64, 128, 200, 512};
    static const int64_t lens[] = {0, 1, 2, 7, 8, 9, 17, 100, 333};
    for (int kvt = SLATE_DTYPE_F32; kvt <= SLATE_DTYPE_F16; kvt++)
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t b = 0; b < sizeof lens / sizeof *lens; b++)
                for (int mk = MASK_NONE; mk <= MASK_SOME_INF; mk++) {
                    int64_t j0 = (int64_t)(tu_rand(&rng) % 5);
                    /* 1/sqrt(hd) is the usual scale; larger ones give peaked softmaxes whose
                     * running maximum changes often. */
                    float scale = (1.0f + 7.0f * (float)(tu_rand(&rng) % 2)) / sqrtf((float)hds[a]);
                    /* 1 head, a group within one pass of the variants (8 heads), more (9). */
                    static const int64_t heads[] = {1, 3, 8, 9};
                    int64_t nh = heads[(a + b + (size_t)mk) % 4];
                    check_attention(k, ref, (slate_dtype)kvt, hds[a], nh, j0, j0 + lens[b], scale,
                                    (mask_kind)mk, &rng);
                }
}

static void attention_with_every_score_masked_is_zero(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x7a65726full;
    for (int kvt = SLATE_DTYPE_F32; kvt <= SLATE_DTYPE_F16; kvt++)
        for (int64_t hd = 1; hd <= 130; hd += 43) {
            check_attention(k, ref, (slate_dtype)kvt, hd, 1, 3, 3, 0.125f, MASK_NONE, &rng);
            check_attention(k, ref, (slate_dtype)kvt, hd, 4, 2, 3, 0.125f, MASK_ALL_INF, &rng);
            check_attention(k, ref, (slate_dtype)kvt, hd, 9, 1, 40, 0.125f, MASK_ALL_INF, &rng);
        }
}

/* ---- rms_norm ---------------------------------------------------------------------------- */

/* y = x * r * w with r = 1/sqrt(mean(x^2) + eps). Tolerance 1e-5 relative per element (mag =
 * |want|): the sum of squares has only positive terms, so both summation orders are within
 * ~sqrt(n) u relative of the exact value and r within half of that; then two rounded products.
 * Worst seen over 100 seeds: 1.8e-6 (n = 4099). */
static void rms_norm_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x726d73ull;
    static const int64_t ns[] = {1,  3,  7,  8,   15,  16,   17,   31,
                                 32, 33, 64, 100, 257, 1000, 4099, 8192};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
        int64_t n = ns[c];
        float *x = xmalloc((size_t)n * sizeof(float)), *w = xmalloc((size_t)n * sizeof(float));
        float *got = xmalloc((size_t)(n + 1) * sizeof(float)),
              *want = xmalloc((size_t)(n + 1) * sizeof(float));
        double *mag = xmalloc((size_t)n * sizeof(double));
        fill_rand(x, n, &rng);
        fill_rand(w, n, &rng);
        got[n] = want[n] = 777.0f;
        float eps = c % 2 ? 1e-5f : 1e-6f;
        k->rms_norm(got, x, w, n, eps);
        ref->rms_norm(want, x, w, n, eps);
        char what[100];
        snprintf(what, sizeof what, "%s rms_norm n=%lld", k->name, (long long)n);
        if (got[n] != 777.0f) fail_msg("%s: wrote past n", what);
        for (int64_t i = 0; i < n; i++) mag[i] = fabs((double)want[i]);
        check_close(what, got, want, mag, n, 1e-5);
        free(x);
        free(w);
        free(got);
        free(want);
        free(mag);
    }
}

/* silu(a) * b. Tolerance 1e-6 relative per element (mag = |a b| + 1e-30): the variants' exp
 * polynomial is within ~2 ulp of expf and a division and a product follow, so a few u
 * (6e-8). Inputs span [-100, 100] so exp's clamping at both ends is exercised; y aliasing a is
 * allowed (the in-place case). */
static void swiglu_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x7377676cull;
    static const int64_t ns[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 257, 5632};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
        int64_t n = ns[c];
        float *a = xmalloc((size_t)n * sizeof(float)), *b = xmalloc((size_t)n * sizeof(float));
        float *got = xmalloc((size_t)(n + 1) * sizeof(float)),
              *want = xmalloc((size_t)(n + 1) * sizeof(float));
        double *mag = xmalloc((size_t)n * sizeof(double));
        fill_rand(a, n, &rng);
        fill_rand(b, n, &rng);
        for (int64_t i = 0; i < n; i++) a[i] *= i % 5 == 0 ? 100.0f : 8.0f;
        got[n] = want[n] = 777.0f;
        memcpy(got, a, (size_t)n * sizeof(float));
        k->swiglu(got, got, b, n); /* in place */
        ref->swiglu(want, a, b, n);
        char what[100];
        snprintf(what, sizeof what, "%s swiglu n=%lld", k->name, (long long)n);
        if (got[n] != 777.0f) fail_msg("%s: wrote past n", what);
        for (int64_t i = 0; i < n; i++) mag[i] = fabs((double)a[i] * b[i]) + 1e-30;
        check_close(what, got, want, mag, n, 1e-6);
        free(a);
        free(b);
        free(got);
        free(want);
        free(mag);
    }
}

/* Rotary embedding of n_heads heads, both pair layouts, partial rotation (rope_dim < head_dim:
 * the rest copied), in place and out of place. Tolerance 1e-6 per element against mag =
 * |u| + |v| of the pair: one rounded product and one fused or rounded sum. */
static void rope_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x726f7065ull;
    static const int64_t dims[][2] = {{2, 2},   {4, 4},   {6, 6},    {16, 16},  {18, 18}, {32, 32},
                                      {34, 34}, {64, 64}, {64, 32},  {80, 80},  {96, 64}, {128, 128},
                                      {128, 64}, {256, 256}, {30, 14}, {10, 2}};
    for (size_t c = 0; c < sizeof dims / sizeof *dims; c++) {
        for (int mode = 0; mode < 4; mode++) {
            bool half = mode & 1, in_place = mode & 2;
            int64_t hd = dims[c][0], rd = dims[c][1], nh = 1 + (int64_t)(tu_rand(&rng) % 5);
            int64_t n = nh * hd;
            float *x = xmalloc((size_t)n * sizeof(float));
            float cs[SLATE__MAX_HEAD_DIM / 2], sn[SLATE__MAX_HEAD_DIM / 2];
            float *got = xmalloc((size_t)(n + 1) * sizeof(float)),
                  *want = xmalloc((size_t)(n + 1) * sizeof(float));
            double *mag = xmalloc((size_t)n * sizeof(double));
            fill_rand(x, n, &rng);
            for (int64_t i = 0; i < rd / 2; i++) {
                float ang = 37.0f * tu_randf(&rng);
                cs[i] = cosf(ang);
                sn[i] = sinf(ang);
            }
            got[n] = want[n] = 777.0f;
            if (in_place) {
                memcpy(got, x, (size_t)n * sizeof(float));
                k->rope(got, got, cs, sn, nh, hd, rd, half);
            } else {
                k->rope(got, x, cs, sn, nh, hd, rd, half);
            }
            ref->rope(want, x, cs, sn, nh, hd, rd, half);
            char what[120];
            snprintf(what, sizeof what, "%s rope heads=%lld hd=%lld rope_dim=%lld half=%d in_place=%d",
                     k->name, (long long)nh, (long long)hd, (long long)rd, half, in_place);
            if (got[n] != 777.0f) fail_msg("%s: wrote past the last head", what);
            for (int64_t h = 0; h < nh; h++)
                for (int64_t d = 0; d < hd; d++) {
                    int64_t i = h * hd + d, p = d;
                    if (d < rd) /* the pair partner of d */
                        p = half ? (d < rd / 2 ? d + rd / 2 : d - rd / 2) : (d ^ 1);
                    mag[i] = fabs((double)x[i]) + fabs((double)x[h * hd + p]) + 1e-30;
                }
            check_close(what, got, want, mag, n, 1e-6);
            free(x);
            free(got);
            free(want);
            free(mag);
        }
    }
}

/* ---- main -------------------------------------------------------------------------------- */

/* One test per table, named "<test>/<table>". */
#define FOR_TABLE(f, name)                                                                         \
    { #f "/" name, f, NULL, NULL, (void *)name }
#define FOR_TABLES(f)                                                                              \
    FOR_TABLE(f, "avx2"), FOR_TABLE(f, "avx512"), FOR_TABLE(f, "avx512_vnni"), FOR_TABLE(f, "neon")

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        FOR_TABLES(matmul_matches_ref_for_every_dtype_and_shape),
        FOR_TABLES(matmul_matches_ref_across_cache_blocks),
        FOR_TABLES(to_f32_is_exact_for_every_half_value),
        FOR_TABLES(attention_matches_ref_for_every_head_dim_and_range),
        FOR_TABLES(attention_with_every_score_masked_is_zero),
        FOR_TABLES(rms_norm_matches_ref),
        FOR_TABLES(swiglu_matches_ref),
        FOR_TABLES(rope_matches_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
