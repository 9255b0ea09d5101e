/* neon_check.c - the "neon" kernel table (kernels/arm/neon.c) against the scalar reference
 * ("ref", kernels/ref/ref.c) on random data with odd sizes and tails: matmul (F32, F16, BF16
 * weights; n_rows 1 (decode) to 9, n_in 1 to 1000, output sub-ranges, with and without bias),
 * to_f32 (every f16 / bf16 bit pattern at several tail lengths), rms_norm, and attention (F32
 * and F16 caches, head_dim 1 to 128, GQA groups of 1 to 9 heads, empty ranges, strides wider
 * than head_dim, masks with -inf and NaN, every score masked). The tolerances are those of
 * tests/kernels/test_kernels.c, whose comments give their reasons.
 *
 * A standalone program (plain C11, no cmocka), so it can be cross-compiled with only the
 * kernel sources and run under user-mode emulation: scripts/check_neon.sh builds it with
 * aarch64-linux-gnu-gcc and runs it with qemu-aarch64. It prints one line per failed case and
 * ends with "N passed, M failed"; exit status 1 on any failure. SLATE_TEST_SEED=<n> repeats a
 * run (the seed is printed first). Usage: neon_check [TABLE] (default "neon"; on another CPU
 * another table, e.g. "ref", can be checked the same way; a table that is not available here
 * counts as a failure). It is not part of ctest.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "kernels/kernels.h"

static int g_passed, g_failed;
static uint64_t g_seed;

/* ---- helpers ----------------------------------------------------------------------------- */

/* xorshift64, as tests/unit/testutil.c */
static uint64_t rnd(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

/* uniform in [-1, 1) */
static float rndf(uint64_t *s) {
    return (float)((rnd(s) >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "neon_check: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static void fill_rand(float *a, int64_t n, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) a[i] = rndf(rng);
}

static const char *dtype_name(slate_dtype dt) {
    return dt == SLATE_DTYPE_F32 ? "f32" : dt == SLATE_DTYPE_F16 ? "f16" : "bf16";
}

/* Counts a case; a failure prints one line: what, then the first problem found. */
static bool report(const char *what, const char *problem) {
    if (problem[0]) {
        printf("FAIL %s: %s (SLATE_TEST_SEED=%llu)\n", what, problem, (unsigned long long)g_seed);
        g_failed++;
        return false;
    }
    g_passed++;
    return true;
}

/* Random weights of dtype dt, and the same values as f32 (for the magnitude bound). */
static void *make_weights(slate_dtype dt, int64_t n, float *as_f32, uint64_t *rng) {
    size_t es = dt == SLATE_DTYPE_F32 ? 4 : 2;
    void *w = xmalloc((size_t)n * es);
    for (int64_t i = 0; i < n; i++) {
        float f = rndf(rng);
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

/* got vs want (ref) for n results with magnitudes mag: per element |got - want| <= tol * mag,
 * and the normalized error ||got - want|| / ||want|| <= tol when it is meaningful (n >= 16,
 * ||want|| >= 1e-3 ||mag||), as check_close in test_kernels.c. Writes the first problem into
 * problem[0..cap) (left empty when all is well). */
static void check_close(char *problem, size_t cap, const float *got, const float *want,
                        const double *mag, int64_t n, double tol) {
    double d2 = 0.0, w2 = 0.0, m2 = 0.0;
    int64_t n_bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol * mag[i]) && n_bad++ == 0 && !problem[0])
            snprintf(problem, cap, "element %lld: got %.9g, want %.9g, |diff| %.3g > %g * mag %.3g",
                     (long long)i, got[i], want[i], d, tol, mag[i]);
        d2 += d * d;
        w2 += (double)want[i] * want[i];
        m2 += mag[i] * mag[i];
    }
    if (n_bad > 1) {
        size_t len = strlen(problem);
        snprintf(problem + len, cap - len, " (%lld elements off)", (long long)n_bad);
    }
    if (!problem[0] && n >= 16 && w2 >= 1e-6 * m2 && !(sqrt(d2 / w2) <= tol))
        snprintf(problem, cap, "normalized error %.3g > %g", sqrt(d2 / w2), tol);
}

/* ---- matmul ------------------------------------------------------------------------------ */

/* test_kernels.c MATMUL_TOL: summation order (4 lanes, FMA) against ref's sequential sum. */
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

    char what[200], problem[300] = "";
    snprintf(what, sizeof what, "%s matmul %s rows=%lld n_in=%lld n_out=%lld o=[%lld,%lld) bias=%d",
             k->name, dtype_name(dt), (long long)n_rows, (long long)n_in, (long long)n_out,
             (long long)o0, (long long)o1, (int)with_bias);
    /* Compact the written columns to the front (in place: index n only grows) and check that
     * the others were left alone. */
    int64_t n = 0;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t o = 0; o < n_out; o++) {
            if (o < o0 || o >= o1) {
                if (got[r * n_out + o] != sentinel && !problem[0])
                    snprintf(problem, sizeof problem, "wrote y[%lld][%lld] outside the range",
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
    check_close(problem, sizeof problem, got, want, mag, n, MATMUL_TOL);
    report(what, problem);
    free(x);
    free(wf);
    free(bias);
    free(got);
    free(want);
    free(mag);
    free(w);
}

static void check_matmuls(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x6d61746d756cull;
    static const int64_t n_ins[] = {1, 3, 15, 16, 17, 63, 64, 65, 257, 1000};
    static const int64_t n_rowss[] = {1, 2, 3, 4, 5, 9};
    for (int dt = SLATE_DTYPE_F32; dt <= SLATE_DTYPE_BF16; dt++) {
        for (size_t a = 0; a < sizeof n_ins / sizeof *n_ins; a++)
            for (size_t b = 0; b < sizeof n_rowss / sizeof *n_rowss; b++) {
                /* up to 40 outputs: several of the variant's 16-output blocks */
                int64_t n_out = 1 + (int64_t)(rnd(&rng) % 40);
                /* o0 > 0 whenever there is room; o1 anywhere after it. */
                int64_t o0 = n_out > 1 ? 1 + (int64_t)(rnd(&rng) % (uint64_t)(n_out - 1)) : 0;
                int64_t o1 = o0 + 1 + (int64_t)(rnd(&rng) % (uint64_t)(n_out - o0));
                bool with_bias = (a + b) % 2 == 0;
                check_matmul(k, ref, (slate_dtype)dt, n_rowss[b], n_ins[a], n_out, o0, o1,
                             with_bias, &rng);
                check_matmul(k, ref, (slate_dtype)dt, n_rowss[b], n_ins[a], n_out, 0, n_out,
                             !with_bias, &rng);
            }
        /* larger: many row tiles and output blocks, a long decode row */
        check_matmul(k, ref, (slate_dtype)dt, 37, 515, 37, 3, 36, true, &rng);
        check_matmul(k, ref, (slate_dtype)dt, 1, 4099, 21, 0, 21, false, &rng);
    }
}

/* ---- to_f32 ------------------------------------------------------------------------------ */

/* Exact: every one of the 65536 bit patterns, at several tail lengths, gives ref's bits (NaNs
 * only need to stay NaN: the hardware conversion quiets signalling NaNs). */
static void check_to_f32(const slate__kernels *k, const slate__kernels *ref) {
    enum { N = 65536 };
    uint16_t *h = xmalloc(N * sizeof(uint16_t));
    float *got = xmalloc(N * sizeof(float)), *want = xmalloc(N * sizeof(float));
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    for (int dt = SLATE_DTYPE_F16; dt <= SLATE_DTYPE_BF16; dt++) {
        static const int64_t lens[] = {N, N - 1, 1, 2, 3, 5, 7, 15, 16, 17, 31, 33};
        for (size_t c = 0; c < sizeof lens / sizeof *lens; c++) {
            int64_t off = N - lens[c]; /* tails end at the last value, 0xffff */
            memset(got, 0x55, N * sizeof(float));
            memset(want, 0x55, N * sizeof(float));
            k->to_f32[dt](got, h + off, lens[c]);
            ref->to_f32[dt](want, h + off, lens[c]);
            char what[100], problem[200] = "";
            snprintf(what, sizeof what, "%s to_f32 %s n=%lld", k->name,
                     dtype_name((slate_dtype)dt), (long long)lens[c]);
            for (int64_t i = 0; i < N && !problem[0]; i++) {
                if (isnan(got[i]) && isnan(want[i]) && i < lens[c]) continue;
                if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                    snprintf(problem, sizeof problem, "element %lld (0x%04x): got %.9g, want %.9g",
                             (long long)i, (unsigned)h[off + (i < lens[c] ? i : 0)], got[i],
                             want[i]);
            }
            report(what, problem);
        }
    }
    free(h);
    free(got);
    free(want);
}

/* ---- rms_norm ---------------------------------------------------------------------------- */

/* test_kernels.c: 1e-5 relative per element (positive terms only, two rounded products). */
static void check_rms_norms(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x726d73ull;
    static const int64_t ns[] = {1, 3, 4, 5, 7, 8, 15, 16, 17, 63, 64, 65, 257, 1000, 4099};
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
        char what[100], problem[300] = "";
        snprintf(what, sizeof what, "%s rms_norm n=%lld", k->name, (long long)n);
        if (got[n] != 777.0f) snprintf(problem, sizeof problem, "wrote past n");
        for (int64_t i = 0; i < n; i++) mag[i] = fabs((double)want[i]);
        check_close(problem, sizeof problem, got, want, mag, n, 1e-5);
        report(what, problem);
        free(x);
        free(w);
        free(got);
        free(want);
        free(mag);
    }
}

/* ---- attention --------------------------------------------------------------------------- */

/* MASK_NAN: some mask entries -inf, some NaN (a NaN score is skipped like -inf). */
typedef enum { MASK_NONE, MASK_SOME_INF, MASK_NAN, MASK_ALL_INF } mask_kind;

/* test_kernels.c ATTN_TOL: 3e-5 of max |v| (1 here); the output is a convex combination of v
 * rows, scores differ by summation order and exp by ~2 ulp from libm. */
#define ATTN_TOL 3e-5

/* One attention case over cache rows [j0, j1), rows `stride` (> hd) elements apart, for
 * n_heads query heads sharing the kv head (each head's output checked on its own). */
static void check_attention(const slate__kernels *k, const slate__kernels *ref, slate_dtype kvt,
                            int64_t hd, int64_t n_heads, int64_t j0, int64_t j1, float scale,
                            mask_kind mk, uint64_t *rng) {
    int64_t stride = hd + 1 + (int64_t)(rnd(rng) % (uint64_t)(2 * hd + 3));
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
        float r = rndf(rng);
        mask[j] = mk == MASK_ALL_INF                 ? -INFINITY
                  : r < -0.4f                        ? -INFINITY
                  : mk == MASK_NAN && r > 0.7f       ? NAN
                                                     : r * 3.0f;
    }
    /* Offset the cache base so rows are not vector-aligned. */
    const void *kb = (const char *)kc + es, *vb = (const char *)vc + es;
    for (int64_t d = 0; d <= nq; d++) got[d] = want[d] = 777.0f;
    const float *mp = mk == MASK_NONE ? NULL : mask;
    k->attention(got, q, kb, vb, kvt, stride, j0, j1, hd, n_heads, scale, mp);
    ref->attention(want, q, kb, vb, kvt, stride, j0, j1, hd, n_heads, scale, mp);

    char what[200], problem[300] = "";
    snprintf(what, sizeof what,
             "%s attention %s hd=%lld heads=%lld j=[%lld,%lld) stride=%lld scale=%g mask=%d",
             k->name, dtype_name(kvt), (long long)hd, (long long)n_heads, (long long)j0,
             (long long)j1, (long long)stride, scale, (int)mk);
    if (got[nq] != 777.0f) snprintf(problem, sizeof problem, "wrote past the last head");
    bool empty = j1 <= j0 || mk == MASK_ALL_INF;
    for (int64_t d = 0; d < nq; d++) {
        mag[d] = 1.0; /* max |v| */
        if (empty && got[d] != 0.0f && !problem[0])
            snprintf(problem, sizeof problem, "out[%lld] = %g, want 0 (no valid score)",
                     (long long)d, got[d]);
    }
    for (int64_t h = 0; h < n_heads && !problem[0]; h++) {
        check_close(problem, sizeof problem, got + h * hd, want + h * hd, mag, hd, ATTN_TOL);
        if (problem[0]) {
            size_t len = strlen(problem);
            snprintf(problem + len, sizeof problem - len, " in head %lld", (long long)h);
        }
    }
    report(what, problem);
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

static void check_attentions(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x6174746eull;
    static const int64_t hds[] = {1, 3, 8, 15, 16, 17, 64, 80, 128};
    static const int64_t lens[] = {0, 1, 3, 4, 5, 9, 33, 100};
    /* 1 head, GQA groups within one pass of the variant (up to 8 heads), and past it (9). */
    static const int64_t heads[] = {1, 2, 7, 8, 9};
    for (int kvt = SLATE_DTYPE_F32; kvt <= SLATE_DTYPE_F16; kvt++)
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t b = 0; b < sizeof lens / sizeof *lens; b++)
                for (int mk = MASK_NONE; mk <= MASK_NAN; mk++) {
                    int64_t j0 = (int64_t)(rnd(&rng) % 5);
                    /* 1/sqrt(hd) is the usual scale; larger ones give peaked softmaxes whose
                     * running maximum changes often. */
                    float scale = (1.0f + 7.0f * (float)(rnd(&rng) % 2)) / sqrtf((float)hds[a]);
                    int64_t nh = heads[(a + b + (size_t)mk) % 5];
                    check_attention(k, ref, (slate_dtype)kvt, hds[a], nh, j0, j0 + lens[b], scale,
                                    (mask_kind)mk, &rng);
                }
    /* every score masked: out = 0, for every group size */
    for (int kvt = SLATE_DTYPE_F32; kvt <= SLATE_DTYPE_F16; kvt++)
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t h = 0; h < sizeof heads / sizeof *heads; h++)
                check_attention(k, ref, (slate_dtype)kvt, hds[a], heads[h], 1 + (int64_t)h,
                                10 + (int64_t)a, 0.125f, MASK_ALL_INF, &rng);
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "neon";
    const char *s = getenv("SLATE_TEST_SEED");
    g_seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
    printf("neon_check: table '%s' against 'ref', SLATE_TEST_SEED=%llu\n", name,
           (unsigned long long)g_seed);
    const slate__kernels *k = slate__kernels_by_name(name), *ref = slate__kernels_by_name("ref");
    if (!k) {
        printf("FAIL kernel table '%s' is not built or not supported on this CPU\n", name);
        g_failed++;
    } else {
        check_matmuls(k, ref);
        check_to_f32(k, ref);
        check_rms_norms(k, ref);
        check_attentions(k, ref);
    }
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
