/* test_palettize.c - k-means palettization (dtype PAL) end to end: the group quantizer's error
 * against uniform quantization of the same values, across bit widths and against the exact
 * optimum (dynamic programming), no wasted table entries on runs of equal values, exact tables
 * for groups of few distinct values, Lloyd run to convergence, determinism (the same
 * bytes for the same input on any thread count), the converter's policy and CLI-level checks,
 * a palettized tiny model that opens and gives logits close to its f32 twin, and malformed PAL
 * tensor entries refused with the culprit named. */
#include "testutil.h"
#include "pkgutil.h"
#include "tinymodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "core/core.h"
#include "kernels/kernels.h"
#include "pkg/format.h"
#include "pkg/pkg.h"

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

/* Test distributions: 0 normal-ish (sum of 4 uniforms), 1 uniform, 2 heavy-tailed (cubes), 3
 * few distinct values (fewer than 2^bits for small bit widths), scaled by 10^(kind - 2). */
static void fill(float *x, int64_t n, int kind, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) {
        float u = tu_randf(rng);
        switch (kind) {
        case 0: x[i] = 0.02f * (u + tu_randf(rng) + tu_randf(rng) + tu_randf(rng)); break;
        case 1: x[i] = u; break;
        case 2: x[i] = 3.0f * u * u * u; break;
        default: x[i] = (float)((int)(u * 2.5f)) * 0.25f; break;
        }
    }
}

/* Squared error of x against lut/idx as stored. */
static double pal_sse(const float *x, int64_t n, const uint16_t *lut, const uint8_t *idx) {
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - slate__f16_to_f32(lut[idx[i]]);
        e += d * d;
    }
    return e;
}

/* Squared error of uniform asymmetric quantization of x with 2^bits levels over [min, max]
 * (the grid of q4 asym, nearest level, f32 parameters: no f16 rounding to help us). */
static double uniform_sse(const float *x, int64_t n, int bits) {
    float lo = x[0], hi = x[0];
    for (int64_t i = 1; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    int k = (1 << bits) - 1;
    double d = ((double)hi - lo) / k, e = 0;
    for (int64_t i = 0; i < n; i++) {
        double q = d > 0 ? floor((x[i] - lo) / d + 0.5) : 0;
        if (q > k) q = k;
        double v = lo + q * d - x[i];
        e += v * v;
    }
    return e;
}

typedef struct gbuf {
    slate__pal_work *w;
    uint8_t *idx;
    uint16_t lut[256];
} gbuf;

/* Scratch for groups of up to n values at up to 8 bits, with up to the converter's bins. */
static void gbuf_init(gbuf *b, int64_t n) {
    assert_int_equal(slate__pal_work_create(n, 8, slate__pal_bins(8), &b->w, NULL), SLATE_OK);
    b->idx = xmalloc((size_t)n);
}

static void gbuf_free(gbuf *b) {
    slate__pal_work_free(b->w);
    free(b->idx);
}

/* The group quantizer as the converter runs it (its bins at these bits). */
static double run_group(const float *x, int64_t n, int bits, gbuf *b) {
    assert_true(slate__palettize_group(x, n, bits, slate__pal_bins(bits), b->lut, b->idx, b->w));
    for (int j = 1; j < (1 << bits); j++) /* tables are sorted */
        assert_true(slate__f16_to_f32(b->lut[j - 1]) <= slate__f16_to_f32(b->lut[j]));
    return pal_sse(x, n, b->lut, b->idx);
}

/* k-means started (among others) from the uniform grid never ends worse than that grid; on
 * non-uniform data it is much better. The f16 rounding of the centroids may cost a little:
 * 0.5% of the uniform error is ~10x what it moved the error in any case seen. The error falls
 * strictly from 2 to 3, 4, 6, 8 bits (data with >= 256 distinct values). */
static void kmeans_beats_uniform_and_error_falls_with_bits(void **st) {
    (void)st;
    uint64_t seed = tu_seed(), rng = seed ^ 0x3c;
    enum { N = 16 * 96 };
    float *x = xmalloc(N * sizeof(float));
    gbuf b;
    gbuf_init(&b, N);
    for (int kind = 0; kind < 4; kind++)
        for (int trial = 0; trial < 4; trial++) {
            fill(x, N, kind, &rng);
            double e4 = run_group(x, N, 4, &b), u4 = uniform_sse(x, N, 4);
            if (!(e4 <= u4 * 1.005 + 1e-12))
                fail_msg("kind %d: 4-bit k-means error %.6g > uniform 4-bit %.6g (seed %llu)",
                         kind, e4, u4, (unsigned long long)seed);
            /* sum of 4 uniforms: Lloyd-Max gains ~15% over the min..max grid (0.82..0.87 seen
             * over seeds 1..5); 0.93 still catches a k-means that stops at its uniform start */
            if (kind == 0 && !(e4 <= 0.93 * u4))
                fail_msg("normal data: k-means %.6g is not clearly below uniform %.6g (seed "
                         "%llu)", e4, u4, (unsigned long long)seed);
            if (kind == 3) { /* 6 distinct values: 3 bits and up are exact */
                assert_true(run_group(x, N, 3, &b) == 0.0);
                continue;
            }
            static const int bits_all[] = {2, 3, 4, 6, 8};
            double prev = INFINITY;
            for (int bi = 0; bi < 5; bi++) {
                double e = run_group(x, N, bits_all[bi], &b);
                if (!(e < prev))
                    fail_msg("kind %d: error at %d bits %.6g is not below %.6g (seed %llu)", kind,
                             bits_all[bi], e, prev, (unsigned long long)seed);
                prev = e;
            }
        }
    free(x);
    gbuf_free(&b);
}

/* The least squared error of any palette of k values for x[n] (1-D k-means solved exactly by
 * dynamic programming over the sorted values, O(k n^2): an independent reference for small n).
 * A stored table with at most k distinct entries cannot do better than this for k. */
static double kmeans_optimum(const float *x, int64_t n, int k) {
    double *v = xmalloc((size_t)n * sizeof(double)), *s1 = xmalloc((size_t)(n + 1) * sizeof(double));
    double *s2 = xmalloc((size_t)(n + 1) * sizeof(double));
    double *prev = xmalloc((size_t)(n + 1) * sizeof(double)), *cur = xmalloc((size_t)(n + 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) v[i] = x[i];
    for (int64_t i = 1; i < n; i++) /* insertion sort: n is small */
        for (int64_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    s1[0] = s2[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        s1[i + 1] = s1[i] + v[i];
        s2[i + 1] = s2[i] + v[i] * v[i];
    }
    /* prev[i]: least error of the first i sorted values in (j - 1) clusters */
    for (int64_t i = 0; i <= n; i++) prev[i] = i == 0 ? 0 : INFINITY;
    for (int j = 1; j <= k; j++) {
        for (int64_t i = 0; i <= n; i++) {
            double best = i == 0 ? 0 : INFINITY;
            for (int64_t t = 0; t < i; t++) { /* last cluster: v[t..i) */
                if (prev[t] == INFINITY) continue;
                double m = (double)(i - t), sum = s1[i] - s1[t];
                double c = s2[i] - s2[t] - sum * sum / m;
                if (prev[t] + (c > 0 ? c : 0) < best) best = prev[t] + (c > 0 ? c : 0);
            }
            cur[i] = best;
        }
        memcpy(prev, cur, (size_t)(n + 1) * sizeof(double));
    }
    double r = prev[n];
    free(v);
    free(s1);
    free(s2);
    free(prev);
    free(cur);
    return r;
}

static int n_distinct_f16(const float *x, int64_t n) {
    int count = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = 0;
        while (j < i && slate__f32_to_f16(x[j]) != slate__f32_to_f16(x[i])) j++;
        count += j == i;
    }
    return count;
}

/* Half the group is one value (pruned weights at 0, or a constant at the top of the range), the
 * rest bell-shaped, in one case with 2% outliers. The density start puts about k/2 centroids on
 * that value; Lloyd alone leaves all but one of them with an empty cluster for good (the uniform
 * start wastes entries too, in the empty gaps), so the table had fewer useful entries than k
 * (before the fix: every seed at 4 bits with the constant, ~half of them with outliers). Now
 * every one of the k stored centroids is distinct and holds at least one element, the error is
 * never worse than uniform, and it is below the exact optimum of a table of k/2 + 1 values (the
 * dynamic-programming reference above), which no table wasting half its entries can reach
 * (measured 0.26-0.84 of it over seeds 1..20). (Lloyd from those starts alone stopped in local
 * minima, up to 1.5x the exact k optimum here and 2.7x with outliers; the exact start removed
 * them: kmeans_error_is_near_the_exact_optimum.) */
static void kmeans_uses_every_centroid_when_half_the_values_are_equal(void **st) {
    (void)st;
    uint64_t seed = tu_seed(), rng = seed ^ 0x5eed;
    enum { N = 16 * 64 };
    float x[N];
    gbuf b;
    gbuf_init(&b, N);
    static const struct {
        float value;
        bool outliers;
    } cases[] = {{0.0f, false}, {0.37f, false}, {0.0f, true}};
    for (int ci = 0; ci < 3; ci++)
        for (int bits = 2; bits <= 4; bits++)
            for (int trial = 0; trial < 3; trial++) {
                int k = 1 << bits;
                for (int i = 0; i < N; i++) /* interleaved, as pruned weights would be */
                    x[i] = i % 2 ? cases[ci].value
                                 : 0.1f * (tu_randf(&rng) + tu_randf(&rng) + tu_randf(&rng));
                for (int i = 0; cases[ci].outliers && i < N; i += 50)
                    x[i] = (1.0f + tu_randf(&rng)) * (i % 100 ? 0.8f : -0.8f);
                assert_true(n_distinct_f16(x, N) > k);
                double e = run_group(x, N, bits, &b);
                int held[256] = {0};
                for (int i = 0; i < N; i++) held[b.idx[i]]++;
                for (int j = 0; j < k; j++)
                    if (held[j] == 0 || (j > 0 && b.lut[j] == b.lut[j - 1]))
                        fail_msg("value %g%s, %d bits: centroid %d (%g) is %s: a wasted entry "
                                 "(seed %llu)", cases[ci].value, cases[ci].outliers ?
                                 " + outliers" : "", bits, j, slate__f16_to_f32(b.lut[j]),
                                 held[j] ? "equal to the one below" : "nearest to no element",
                                 (unsigned long long)seed);
                double half = kmeans_optimum(x, N, k / 2 + 1), u = uniform_sse(x, N, bits);
                if (!(e < half) || !(e <= u))
                    fail_msg("value %g%s, %d bits: error %.6g, exact optimum with %d values "
                             "%.6g, uniform %.6g (seed %llu)", cases[ci].value,
                             cases[ci].outliers ? " + outliers" : "", bits, e, k / 2 + 1, half, u,
                             (unsigned long long)seed);
            }
    gbuf_free(&b);
}

/* Against the exact optimum (the O(k n^2) dynamic programme above, an independent reference):
 * the squared error of the stored table (f16 centroids) is near the least any table of k values
 * can reach, on random groups (the three smooth kinds of fill) and on half-zero groups with 2%
 * outliers, at 2, 3, 4 and 6 bits (and 8 on smaller smooth groups):
 *   - with the converter's bins (here every distinct value is a bin, so the start is the exact
 *     optimum and only the f16 rounding of the centroids costs): within 1.01x (at most 1.0006x
 *     over seeds 1..40);
 *   - with only 8 bins per centroid (the binned start, then Lloyd; in the converter, groups
 *     have 8-32 bins per centroid): within 1.05x (at most 1.033x over seeds 1..40).
 * At 8 bits (groups of 512: the reference is O(k n^2)) clusters hold ~2 values and the f16
 * rounding of the centroids is no longer small next to their spread, so the bound there is
 * 1.01x plus what the rounding can add. Lloyd alone, from the quantile and uniform starts, ended
 * up to 2.7x the optimum on the outlier groups, 1.4x on normal data at 4 bits, and above the
 * 8-bit bound (1.57x on outlier groups). */
static void kmeans_error_is_near_the_exact_optimum(void **st) {
    (void)st;
    uint64_t seed = tu_seed(), rng = seed ^ 0x0b7;
    enum { N = 16 * 64 };
    float x[N];
    gbuf b;
    gbuf_init(&b, N);
    double worst[2] = {0, 0};
    for (int kind = 0; kind < 4; kind++)
        for (int trial = 0; trial < 2; trial++) {
            if (kind < 3) {
                fill(x, N, kind, &rng);
            } else {
                for (int i = 0; i < N; i++)
                    x[i] = i % 2 ? 0.0f : 0.1f * (tu_randf(&rng) + tu_randf(&rng) + tu_randf(&rng));
                for (int i = 0; i < N; i += 50)
                    x[i] = (1.0f + tu_randf(&rng)) * (i % 100 ? 0.8f : -0.8f);
            }
            static const int bits_all[] = {2, 3, 4, 6};
            for (int bi = 0; bi < 4; bi++) {
                int bits = bits_all[bi], k = 1 << bits;
                double opt = kmeans_optimum(x, N, k);
                for (int binned = 0; binned < 2; binned++) {
                    int32_t n_bins = binned ? 8 * k : slate__pal_bins(bits);
                    assert_true(slate__palettize_group(x, N, bits, n_bins, b.lut, b.idx, b.w));
                    double e = pal_sse(x, N, b.lut, b.idx);
                    if (e / opt > worst[binned]) worst[binned] = e / opt;
                    double bound = binned ? 1.05 : 1.01;
                    if (!(e <= bound * opt))
                        fail_msg("kind %d, %d bits, %d bins: error %.6g is %.3fx the exact "
                                 "optimum %.6g (bound %.2fx) (seed %llu)", kind, bits, n_bins,
                                 e, e / opt, opt, bound, (unsigned long long)seed);
                }
            }
        }
    /* 8 bits (256 layers in the programme) on half the group, so that the reference stays
     * quick: the converter's bins hold every distinct value here */
    double worst8 = 0;
    for (int kind = 0; kind < 3; kind++) {
        enum { N8 = N / 2 };
        fill(x, N8, kind, &rng);
        double opt = kmeans_optimum(x, N8, 256);
        assert_true(slate__palettize_group(x, N8, 8, slate__pal_bins(8), b.lut, b.idx, b.w));
        double e = pal_sse(x, N8, b.lut, b.idx);
        /* clusters of ~2 values: the f16 rounding of the centroids is no longer small next to
         * their spread (up to 1.05x seen). Moving a centroid by d adds at most count * d^2
         * (reassigning only lowers it), and d <= half an f16 step at the largest value */
        float big = 0;
        for (int i = 0; i < N8; i++) big = fmaxf(big, fabsf(x[i]));
        uint16_t h = slate__f32_to_f16(big) & 0x7fff;
        double d = 0.5 * (slate__f16_to_f32((uint16_t)(h + 1)) - slate__f16_to_f32(h));
        double bound = 1.01 * opt + N8 * d * d;
        if ((e - N8 * d * d) / opt > worst8) worst8 = (e - N8 * d * d) / opt;
        if (!(e <= bound))
            fail_msg("kind %d, 8 bits: error %.6g, exact optimum %.6g, bound %.6g (1.01x + the "
                     "f16 rounding) (seed %llu)", kind, e, opt, bound, (unsigned long long)seed);
    }
    fprintf(stderr, "  worst error / exact optimum: %.4f (converter's bins), %.4f (8 per "
            "centroid), %.4f (8 bits, less the rounding allowance)\n", worst[0], worst[1], worst8);
    gbuf_free(&b);
}

/* A group of at most k distinct values is stored exactly: each element decodes to its own f16
 * rounding (or to a value as near: an f32 exactly between two f16 values). The frequencies are
 * skewed (most elements on one value), which made the density start put several centroids on
 * that value and leave others with no centroid of their own. Exactly k values, fewer, one. */
static void groups_with_at_most_k_distinct_values_are_exact(void **st) {
    (void)st;
    uint64_t seed = tu_seed(), rng = seed ^ 0xe4ac7;
    enum { N = 16 * 20 };
    float x[N], vals[256];
    gbuf b;
    gbuf_init(&b, N);
    static const int bits_all[] = {2, 3, 4, 6, 8};
    for (int bi = 0; bi < 5; bi++) {
        int bits = bits_all[bi], k = 1 << bits;
        const int n_vals[] = {k, k - 1, k / 2, 1};
        for (int vi = 0; vi < 4; vi++) {
            int d = n_vals[vi] < N ? n_vals[vi] : N;
            for (int j = 0; j < d; j++) vals[j] = tu_randf(&rng) * (j % 3 ? 1.0f : 1e-3f);
            for (int i = 0; i < N; i++) /* 3/4 on vals[0]; each value at least once */
                x[i] = i < d ? vals[i] : i % 4 ? vals[0] : vals[(uint32_t)(tu_randf(&rng) * 1e6f + 1e6f) % d];
            run_group(x, N, bits, &b);
            for (int i = 0; i < N; i++) {
                float h = slate__f16_to_f32(slate__f32_to_f16(x[i]));
                float got = slate__f16_to_f32(b.lut[b.idx[i]]);
                if (!(fabsf(x[i] - got) <= fabsf(x[i] - h)))
                    fail_msg("%d bits, %d distinct values: element %d = %.9g decodes to %.9g, not "
                             "its f16 %.9g (seed %llu)", bits, d, i, x[i], got, h,
                             (unsigned long long)seed);
            }
        }
    }
    gbuf_free(&b);
}

/* Squared error of x[n] (plus shift) about its nearest centroid of sorted c[k], in double. */
static double fit_sse(const float *x, int64_t n, double shift, const double *c, int k) {
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = (double)x[i] + shift, best = INFINITY;
        for (int j = 0; j < k; j++)
            best = fmin(best, (v - c[j]) * (v - c[j]));
        e += best;
    }
    return e;
}

/* The fit does not depend on where the group sits: x and x + 8 (both exact in f32: multiples
 * of 2^-20 below 16) give the same squared error (before f16 rounding) and centroids that differ
 * by 8. With the prefix sums taken about 0, a cluster's error (s2[b] - s2[a]) - sum^2 / n
 * cancels there (terms ~64 n against errors ~1e-12 a value): at 8 bits the off-centre copy
 * ended 4e-6 to 9e-4 (relative) worse over seeds 1..5, its centroids moved. The tolerance
 * leaves room for the rounding of c + 8 in double (~1e-15 against distances ~1e-6). */
static void kmeans_fit_is_invariant_to_a_constant_shift(void **st) {
    (void)st;
    uint64_t seed = tu_seed(), rng = seed ^ 0x51;
    enum { N = 4096 };
    const double C = 8.0;
    float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float));
    slate__pal_work *w;
    assert_int_equal(slate__pal_work_create(N, 8, slate__pal_bins(8), &w, NULL), SLATE_OK);
    for (int i = 0; i < N; i++) { /* ~2000 distinct multiples of 2^-20, normal-ish */
        float u = tu_randf(&rng) + tu_randf(&rng) + tu_randf(&rng) + tu_randf(&rng);
        x[i] = ldexpf(roundf(500.0f * u), -20);
        y[i] = (float)(x[i] + C);
        assert_true((double)y[i] - C == (double)x[i]);
    }
    static const int bits_all[] = {4, 8};
    for (int bi = 0; bi < 2; bi++) {
        int bits = bits_all[bi], k = 1 << bits;
        double c0[256], c1[256];
        slate__pal_fit(x, N, bits, slate__pal_bins(bits), c0, w);
        slate__pal_fit(y, N, bits, slate__pal_bins(bits), c1, w);
        double e0 = fit_sse(x, N, 0.0, c0, k), e1 = fit_sse(x, N, C, c1, k);
        if (!(fabs(e1 - e0) <= 1e-7 * e0))
            fail_msg("%d bits: squared error %.9g for x, %.9g for x + %g (seed %llu)", bits, e0,
                     e1, C, (unsigned long long)seed);
        for (int j = 0; j < k; j++)
            if (!(fabs((c1[j] - C) - c0[j]) <= 1e-12))
                fail_msg("%d bits: centroid %d is %.12g for x, %.12g - %g for x + %g (seed "
                         "%llu)", bits, j, c0[j], c1[j], C, C, (unsigned long long)seed);
    }
    slate__pal_work_free(w);
    free(x);
    free(y);
}

/* Before the f16 rounding, the fit is the exact optimum when every distinct value is a bin: at
 * 6 and 8 bits the programme runs enough layers (64, 256 over ~600 bins) to switch from divide
 * and conquer to the Knuth-Yao windows (dp_knuth) part way, so both are checked against the
 * plain O(k n^2) programme. */
static void kmeans_fit_is_the_exact_optimum_at_6_and_8_bits(void **st) {
    (void)st;
    uint64_t seed = tu_seed(), rng = seed ^ 0x6b;
    enum { N = 600 };
    float x[N];
    slate__pal_work *w;
    assert_int_equal(slate__pal_work_create(N, 8, slate__pal_bins(8), &w, NULL), SLATE_OK);
    for (int kind = 0; kind < 3; kind++)
        for (int bits = 6; bits <= 8; bits += 2) {
            fill(x, N, kind, &rng);
            double c[256], opt = kmeans_optimum(x, N, 1 << bits);
            double e = slate__pal_fit(x, N, bits, slate__pal_bins(bits), c, w);
            double e_check = fit_sse(x, N, 0.0, c, 1 << bits);
            if (!(fabs(e - opt) <= 1e-7 * opt && fabs(e_check - opt) <= 1e-7 * opt))
                fail_msg("kind %d, %d bits: fit error %.12g (recomputed %.12g), exact optimum "
                         "%.12g (seed %llu)", kind, bits, e, e_check, opt,
                         (unsigned long long)seed);
        }
    slate__pal_work_free(w);
}

/* Lloyd runs until no boundary moves: on large groups of smooth data each stored centroid is the
 * mean of the elements that decode to it, up to its f16 rounding (half an f16 step) and the
 * elements whose nearest centroid the rounding of it or its neighbours changes. Bound: 1.1 f16
 * steps of the coarsest of the three, on the fixed data of seeds 1..15. Measured there: at most
 * 1.03 (seed 14, a sparse tail cluster at 4 bits; 0.67 with Lloyd from the old quantile and
 * uniform starts); the exact start over bins refined by no Lloyd step left centroids up to 3.0
 * steps from their means, one step 2.05, two steps 1.21 (and the old starts stopped after 64
 * iterations 1.03-3.3). Fixed seeds, not the run's random one: on other data the rounding alone
 * can move a sparse tail cluster's mean by more than a step (1.58 seen, seed 608106928), so a
 * random seed made the test flaky. */
static void kmeans_centroids_are_the_means_of_their_elements(void **st) {
    (void)st;
    enum { N = 16 * 1024 };
    float *x = xmalloc(N * sizeof(float));
    gbuf b;
    gbuf_init(&b, N);
    for (uint64_t seed = 1; seed <= 15; seed++) {
        uint64_t rng = seed ^ 0xfeed;
        for (int kind = 0; kind < 3; kind++) {
            fill(x, N, kind, &rng);
            for (int bits = 2; bits <= 4; bits++) {
                run_group(x, N, bits, &b);
                double sum[16] = {0};
                int count[16] = {0};
                for (int i = 0; i < N; i++) {
                    sum[b.idx[i]] += x[i];
                    count[b.idx[i]]++;
                }
                for (int j = 0; j < (1 << bits); j++) {
                    float c = slate__f16_to_f32(b.lut[j]);
                    double step = 0; /* the largest f16 step at centroids j - 1, j, j + 1 */
                    for (int i = j > 0 ? j - 1 : 0; i <= j + 1 && i < (1 << bits); i++) {
                        uint16_t h = b.lut[i] & 0x7fff;
                        step = fmax(step, slate__f16_to_f32((uint16_t)(h + 1)) -
                                              slate__f16_to_f32(h));
                    }
                    double mean = count[j] ? sum[j] / count[j] : c;
                    if (!(fabs(mean - c) <= 1.1 * step))
                        fail_msg("kind %d, %d bits: centroid %d = %.9g, but its %d elements "
                                 "average %.9g (%.2f f16 steps away: Lloyd stopped early) (data "
                                 "seed %llu)", kind, bits, j, c, count[j], mean,
                                 fabs(mean - c) / step, (unsigned long long)seed);
                }
            }
        }
    }
    free(x);
    gbuf_free(&b);
}

/* The whole-tensor producer: same bytes for the same input, with 1 and 3 threads and twice;
 * the bytes decode (reference kernel) to each element's nearest table entry. Two shapes: rows of
 * 45 (groups of 720 values: the exact start) and rows of 600, half zeros with outliers (9600
 * values, ~4800 distinct: more than the bins at every width, so the binned start). */
static void palettize_tensor_is_deterministic_and_uses_nearest_centroids(void **st) {
    (void)st;
    uint64_t rng = tu_seed() ^ 0x77;
    enum { ROWS = 37, COLS_MAX = 600 }; /* groups of 16: 16, 16, 5 */
    static const int64_t cols_all[] = {45, COLS_MAX};
    float *src = xmalloc(ROWS * COLS_MAX * sizeof(float));
    float *row = xmalloc(COLS_MAX * sizeof(float));
    slate__src_tensor t;
    for (int ci = 0; ci < 2; ci++) {
        const int64_t COLS = cols_all[ci];
        if (ci == 0) {
            fill(src, ROWS * COLS, 0, &rng);
        } else {
            for (int64_t i = 0; i < ROWS * COLS; i++)
                src[i] = i % 2 ? 0.0f : 0.02f * (tu_randf(&rng) + tu_randf(&rng) - 1.0f);
            for (int64_t i = 0; i < ROWS * COLS; i += 50)
                src[i] = (1.0f + tu_randf(&rng)) * (i % 100 ? 0.2f : -0.2f);
        }
        memset(&t, 0, sizeof t);
        strcpy(t.name, "blk.0.ffn_up.weight");
        t.type = SLATE__SRC_F32;
        t.n_dims = 2;
        t.dims[0] = ROWS;
        t.dims[1] = COLS;
        t.data = (const uint8_t *)src;
        t.nbytes = (uint64_t)(ROWS * COLS * 4);
        static const int bits_all[] = {2, 3, 4, 6, 8};
        for (int bi = 0; bi < 5; bi++) {
            slate__qspec q = {&t, SLATE_DTYPE_PAL, slate__pal_layout(bits_all[bi], 16), false,
                              ROWS, COLS};
            size_t bytes = (size_t)slate__wmat_bytes(SLATE_DTYPE_PAL, q.block, false, ROWS, COLS);
            uint8_t *a = xmalloc(bytes), *b = xmalloc(bytes), *c = xmalloc(bytes);
            memset(a, 0xAB, bytes);
            memset(b, 0xCD, bytes);
            slate__pool *pool = NULL;
            assert_int_equal(slate__pool_create(3, &pool, NULL), SLATE_OK);
            assert_int_equal(slate__palettize_tensor(&q, a, NULL, NULL), SLATE_OK);
            assert_int_equal(slate__palettize_tensor(&q, b, pool, NULL), SLATE_OK);
            assert_int_equal(slate__palettize_tensor(&q, c, pool, NULL), SLATE_OK);
            slate__pool_free(pool);
            assert_memory_equal(a, b, bytes);
            assert_memory_equal(a, c, bytes);
            slate__wmat w;
            slate__wmat_init(&w, a, SLATE_DTYPE_PAL, q.block, false, ROWS, COLS);
            for (int64_t o = 0; o < ROWS; o++) {
                slate__ref_dequant(&w, o, 0, COLS, row);
                const uint16_t *lut = w.lut + (o / 16) * (1 << bits_all[bi]);
                for (int64_t i = 0; i < COLS; i++) {
                    float xv = src[o * COLS + i], d = fabsf(row[i] - xv);
                    for (int j = 0; j < (1 << bits_all[bi]); j++)
                        if (fabsf(slate__f16_to_f32(lut[j]) - xv) < d)
                            fail_msg("cols %lld, bits %d [%lld][%lld] = %g decodes to %g, but "
                                     "centroid %d = %g is nearer", (long long)COLS,
                                     bits_all[bi], (long long)o, (long long)i, xv, row[i], j,
                                     slate__f16_to_f32(lut[j]));
                }
            }
            free(a);
            free(b);
            free(c);
        }
    }
    /* a non-finite element is refused with its position */
    const int64_t COLS = cols_all[1];
    src[5 * COLS + 7] = NAN;
    slate__qspec q = {&t, SLATE_DTYPE_PAL, slate__pal_layout(4, 16), false, ROWS, COLS};
    uint8_t *a = xmalloc((size_t)slate__wmat_bytes(SLATE_DTYPE_PAL, q.block, false, ROWS, COLS));
    slate_error err;
    assert_int_equal(slate__palettize_tensor(&q, a, NULL, &err), SLATE_E_FORMAT);
    assert_non_null(strstr(err.message, "[5][7]"));
    assert_non_null(strstr(err.message, "blk.0.ffn_up.weight"));
    free(a);
    free(row);
    free(src);
}

static void run_logits(const tm_opts *o, const char *name, float *pre, float *dec) {
    const char *path = tu_tmp(name);
    slate_error err;
    if (tm_write(path, o, &err) != SLATE_OK) fail_msg("%s: %s", name, err.message);
    slate_model *m = NULL;
    if (slate_model_open(path, NULL, &m, &err) != SLATE_OK) fail_msg("%s: %s", name, err.message);
    slate_state *s = NULL;
    assert_int_equal(slate_state_create(m, NULL, &s, NULL), SLATE_OK);
    int32_t ids[12] = {1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108};
    slate_predict_params pp = slate_predict_default_params();
    pp.all_logits = true;
    assert_int_equal(slate_state_predict(s, ids, 11, &pp, NULL), SLATE_OK);
    memcpy(pre, slate_state_logits(s, NULL), 11 * TM_VOCAB * sizeof(float));
    assert_int_equal(slate_state_predict(s, ids + 11, 1, NULL, NULL), SLATE_OK);
    memcpy(dec, slate_state_logits(s, NULL), TM_VOCAB * sizeof(float));
    slate_state_free(s);
    slate_model_close(m);
}

static double rel_err(const float *a, const float *b, int64_t n) {
    double d2 = 0, b2 = 0;
    for (int64_t i = 0; i < n; i++) {
        d2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        b2 += (double)b[i] * b[i];
    }
    return sqrt(d2 / b2);
}

/* A tiny model palettized (4 bits, groups of 16 rows: tinymodel's PAL uses the converter's
 * defaults), embedding included, against its f32 twin: normalized logit error of prefill and
 * decode within PAL_TOL. The weights are uniform random, the worst case for a palette (no
 * density to exploit), so the bound is that of q4 in test_quant.c (0.3, ~3x its worst error
 * over seeds); a wrong index, table or group gives errors of order 1. With SLATE_KERNELS=ref
 * this checks the reference, by default the SIMD kernel. */
#define PAL_TOL 0.3
static void palettized_model_gives_logits_close_to_f32(void **st) {
    (void)st;
    tm_opts o = tm_default();
    o.dim = 128;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.ffn_dim = 200; /* rows of 200: not a multiple of 16 (SIMD tails) */
    o.n_layers = 2;
    o.seed = tu_seed() | 1;
    float *pre_ref = xmalloc(11 * TM_VOCAB * sizeof(float)), *dec_ref = xmalloc(TM_VOCAB * sizeof(float));
    float *pre = xmalloc(11 * TM_VOCAB * sizeof(float)), *dec = xmalloc(TM_VOCAB * sizeof(float));
    run_logits(&o, "f32.slate", pre_ref, dec_ref);
    for (int all = 0; all < 2; all++) {
        tm_opts q = o;
        q.dtype = SLATE_DTYPE_PAL;
        q.quantize_all = all;
        run_logits(&q, all ? "pal_all.slate" : "pal.slate", pre, dec);
        double ep = rel_err(pre, pre_ref, 11 * TM_VOCAB), ed = rel_err(dec, dec_ref, TM_VOCAB);
        fprintf(stderr, "  pal4 g16%s (kernels %s): prefill %.4f decode %.4f (bound %.2f)\n",
                all ? " + embedding" : "", slate_kernels_name(), ep, ed, PAL_TOL);
        if (!(ep <= PAL_TOL) || !(ed <= PAL_TOL))
            fail_msg("pal: normalized logit error prefill %.4f / decode %.4f > %.2f", ep, ed,
                     PAL_TOL);
    }
    free(pre_ref);
    free(dec_ref);
    free(pre);
    free(dec);
}

/* The converter refuses bad palettization parameters with the accepted range. */
static void convert_refuses_bad_pal_parameters(void **st) {
    (void)st;
    slate_convert_params cp = slate_convert_default_params();
    cp.dtype = SLATE_DTYPE_PAL;
    static const struct {
        int32_t bits, group;
        const char *msg;
    } bad[] = {{5, 16, "pal bits 5"}, {1, 16, "pal bits 1"}, {4, -1, "pal group -1"},
               {4, 4097, "pal group 4097"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cp.pal_bits = bad[i].bits;
        cp.pal_group = bad[i].group;
        slate_error err;
        memset(&err, 0, sizeof err);
        slate__import imp;
        memset(&imp, 0, sizeof imp);
        strcpy(imp.a.name, "llama");
        imp.a.n_vocab = 8;
        imp.a.dim = imp.a.head_dim = imp.a.ffn_dim = 4;
        imp.a.n_heads = imp.a.n_kv_heads = 1;
        imp.a.n_layers = 1;
        imp.a.n_ctx = 8;
        imp.a.norm_eps = 1e-5f;
        imp.a.rope_theta = 10000.0f;
        imp.a.rope_dim = 4;
        slate_status s = slate__build_package(&imp, &cp, tu_tmp("bad_pal.slate"), &err);
        if (s != SLATE_E_INVALID_ARG || !strstr(err.message, bad[i].msg))
            fail_msg("bits %d group %d: expected E_INVALID_ARG naming '%s', got %s: %s",
                     bad[i].bits, bad[i].group, bad[i].msg, slate_status_name(s), err.message);
    }
}

/* ---- malformed tensor entries -------------------------------------------------------------- */



static void set_num(cJSON *e, const char *k, double v) {
    cJSON_DeleteItemFromObject(e, k);
    cJSON_AddNumberToObject(e, k, v);
}
static void size_plus_one(cJSON *e) { set_num(e, "size", cJSON_GetObjectItem(e, "size")->valuedouble + 1); }
static void bits_5(cJSON *e) { set_num(e, "bits", 5); }
static void bits_8(cJSON *e) { set_num(e, "bits", 8); } /* valid value, wrong size */
static void bits_half(cJSON *e) { set_num(e, "bits", 4.5); }
static void group_0(cJSON *e) { set_num(e, "group", 0); }
static void group_5000(cJSON *e) { set_num(e, "group", 5000); }
static void group_32(cJSON *e) { set_num(e, "group", 32); } /* valid, fewer tables: wrong size */
static void no_bits(cJSON *e) { cJSON_DeleteItemFromObject(e, "bits"); }
static void no_group(cJSON *e) { cJSON_DeleteItemFromObject(e, "group"); }
static void add_block(cJSON *e) { cJSON_AddNumberToObject(e, "block", 32); }
static void add_asym(cJSON *e) { cJSON_AddBoolToObject(e, "asym", true); }
static void add_bits(cJSON *e) { cJSON_AddNumberToObject(e, "bits", 4); }
static void shape_1d(cJSON *e) {
    cJSON_DeleteItemFromObject(e, "shape");
    cJSON *n = cJSON_AddArrayToObject(e, "shape");
    cJSON_AddItemToArray(n, cJSON_CreateNumber(32));
}

static void malformed_pal_tensor_entries_are_refused(void **st) {
    (void)st;
    tm_opts o = tm_default(); /* dim 32, ffn 48: attn_q [32][32], 2 groups of 16 rows */
    o.dtype = SLATE_DTYPE_PAL;
    o.quantize_all = true;
    const char *path = tu_tmp("bad_pal_base.slate");
    assert_int_equal(tm_write(path, &o, NULL), SLATE_OK);
    char *data;
    size_t len;
    assert_int_equal(slate__read_file(path, 1 << 26, &data, &len, NULL), SLATE_OK);
    const uint8_t *pkg = (const uint8_t *)data;
    {   /* the base package opens */
        slate_model *m = NULL;
        assert_int_equal(slate__model_open_mem(pkg, len, NULL, &m, NULL), SLATE_OK);
        slate_model_close(m);
    }
    const char *q = "blk.0.attn_q.weight";
    pu_expect_edit(pkg, q, size_plus_one, SLATE_E_FORMAT, "does not match");
    pu_expect_edit(pkg, q, bits_5, SLATE_E_UNSUPPORTED, "pal bits 5");
    pu_expect_edit(pkg, q, bits_8, SLATE_E_FORMAT, "does not match");
    pu_expect_edit(pkg, q, bits_half, SLATE_E_FORMAT, "\"bits\" must be an integer");
    pu_expect_edit(pkg, q, group_0, SLATE_E_UNSUPPORTED, "pal group 0");
    pu_expect_edit(pkg, q, group_5000, SLATE_E_UNSUPPORTED, "pal group 5000");
    pu_expect_edit(pkg, q, group_32, SLATE_E_FORMAT, "does not match");
    pu_expect_edit(pkg, q, no_bits, SLATE_E_FORMAT, "pal needs \"bits\"");
    pu_expect_edit(pkg, q, no_group, SLATE_E_FORMAT, "pal needs \"group\"");
    pu_expect_edit(pkg, q, add_block, SLATE_E_UNSUPPORTED, "\"block\" is not supported for pal");
    pu_expect_edit(pkg, q, add_asym, SLATE_E_UNSUPPORTED, "\"asym\" is not supported for pal");
    pu_expect_edit(pkg, "blk.0.attn_norm.weight", add_bits, SLATE_E_UNSUPPORTED,
                "apply only to pal, not f32");
    pu_expect_edit(pkg, q, shape_1d, SLATE_E_FORMAT, "2 dimensions");
    slate__free(data);
}

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kmeans_beats_uniform_and_error_falls_with_bits),
        cmocka_unit_test(kmeans_uses_every_centroid_when_half_the_values_are_equal),
        cmocka_unit_test(kmeans_error_is_near_the_exact_optimum),
        cmocka_unit_test(groups_with_at_most_k_distinct_values_are_exact),
        cmocka_unit_test(kmeans_fit_is_invariant_to_a_constant_shift),
        cmocka_unit_test(kmeans_fit_is_the_exact_optimum_at_6_and_8_bits),
        cmocka_unit_test(kmeans_centroids_are_the_means_of_their_elements),
        cmocka_unit_test(palettize_tensor_is_deterministic_and_uses_nearest_centroids),
        cmocka_unit_test(palettized_model_gives_logits_close_to_f32),
        cmocka_unit_test(convert_refuses_bad_pal_parameters),
        cmocka_unit_test(malformed_pal_tensor_entries_are_refused),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
