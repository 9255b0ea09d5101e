/*
 * palettize.c - the converter's k-means palettization (dtype PAL, kernels/quant.h): for each
 * group of G output rows, one table of k = 2^N f16 centroids fitted to the group's weights by
 * 1-D k-means, and each weight replaced by the index of its nearest centroid.
 *
 * 1-D k-means is done exactly and fast on the sorted values: with sorted centroids, a cluster
 * is a contiguous run of the sorted values between midpoints, found by binary search, and its
 * mean comes from prefix sums. One Lloyd iteration therefore costs O(k log n) after one
 * O(n log n) sort, so we can afford many (up to PAL_ITERS, stopping early when no boundary
 * moves). The prefix sums, centroids and midpoints are all taken relative to the group's
 * median: a cluster's error from sums about 0 cancels catastrophically when the group sits far
 * from 0 against its spread, and about the median the fit does not depend on where the group
 * sits (a group plus a constant, both exact in f32, gets the same clusters; slate__pal_fit).
 * A group with at most k distinct values needs no search: each value is a centroid (error 0;
 * the unused entries repeat the largest). Otherwise Lloyd is run from two starts:
 *   exact     the optimal 1-D k-means of the sorted values cut into bins (slate__pal_bins(N):
 *             1024 up to 6 bits, 2048 at 7, 4096 at 8), by dynamic programming over the bins,
 *             one layer per cluster count j: with the divide-and-conquer speed-up, O(B log B)
 *             a layer for B bins (Gronlund et al., "Fast exact k-means, k-medians and Bregman
 *             divergence clustering in 1D", 2017), until the Knuth-Yao bounds (the best start
 *             of the last cluster lies between its best starts with j - 1 clusters and for one
 *             more bin) would search fewer starts, ~B (1 + B / j^2) a layer: from j ~ 13-23 at
 *             4096 bins; both find the same starts (dp_knuth). A
 *             group with at most B distinct values has each as a bin, so this start is the
 *             exact optimum; otherwise bins are bounded in count and width, and Lloyd on the
 *             real values refines the binned optimum (within 1.01x of the exact one in the
 *             measurements at slate__pal_bins), and
 *   uniform   centroid j = min + j (max - min) / (k - 1), the grid of a uniform asymmetric
 *             N-bit quantizer,
 * keeping the one with the lower error. Lloyd alone (from the uniform grid or value quantiles,
 * the earlier starts) stops in local minima, up to 2.7x the optimum on half-zero data with
 * outliers and 1.5-5x at 8 bits. Before each update, a cluster left empty gets the value with
 * the largest error (fill_empty), so no centroid is wasted on nothing; this, like each Lloyd
 * step, only lowers the squared error, so the uniform start guarantees the result is never
 * worse (in f32) than uniform N-bit quantization of the same group. Centroids are then rounded
 * to f16 and sorted, and each weight takes the nearest stored centroid (ties: the lower index).
 * Everything is a pure function of the group's values: the same input gives the same bytes on
 * any thread count. Groups are spread over the pool's threads.
 */
#include "convert.h"
#include "kernels/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* PAL_ITERS: 1-D Lloyd converges slowly on smooth data; with a cap of 64, 37 of stories260K's
 * 380 pal4 runs and 1236 of 2592 on random-normal weights (`slate synth`) stopped before
 * convergence. With 256 none did (mean 65 iterations there); an iteration costs O(k log n). */
enum { PAL_ITERS = 256, PAL_KMAX = 256 };

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Index of the first sorted value with v - ctr > t in v[0..n). */
static int64_t upper(const float *v, int64_t n, double ctr, double t) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((double)v[mid] - ctr <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Squared error of cluster [a, b) of sorted v about centroid c, from the prefix sums (c and the
 * sums both relative to the group's centre). */
static double cluster_sse(const double *s1, const double *s2, int64_t a, int64_t b, double c) {
    return b > a ? (s2[b] - s2[a]) - 2.0 * c * (s1[b] - s1[a]) + (double)(b - a) * c * c : 0.0;
}

/* Cluster boundaries of sorted c[k] (relative to ctr) on sorted v: cluster j = v[end[j-1] ..
 * end[j]), the values nearer to c[j] than to c[j+1] (a value exactly between goes to the lower
 * centroid). */
static void assign(const float *v, int64_t n, double ctr, int k, const double *c, int64_t *end) {
    for (int j = 0; j < k - 1; j++) end[j] = upper(v, n, ctr, 0.5 * (c[j] + c[j + 1]));
    end[k - 1] = n;
}

static void sort_centroids(double *c, int k) {
    for (int j = 1; j < k; j++)
        for (int i = j; i > 0 && c[i - 1] > c[i]; i--) {
            double t = c[i];
            c[i] = c[i - 1];
            c[i - 1] = t;
        }
}

/* Gives empty clusters a value to hold, one at a time: the centroid of the lowest empty cluster
 * moves onto the value with the largest error (in 1-D the farthest value of a cluster is one of
 * its two ends; ties: the lowest), then all values are reassigned. That value's error drops to
 * 0 and no other value moves away from its centroid, so the squared error falls strictly, and a
 * centroid placed on a value keeps it (only an equal centroid could take it, and a value with a
 * positive error equals none), so each move fills a cluster for good: at most k moves. Stops
 * when no cluster is empty or every value equals a centroid (then there is nothing to gain).
 * Without it an empty cluster keeps its centroid forever (Lloyd's update has no mean to give
 * it) and the palette has fewer than k useful entries. */
static void fill_empty(const float *v, int64_t n, double ctr, int k, double *c, int64_t *end) {
    for (int moves = 0; moves < k; moves++) {
        int empty = -1;
        double worst = 0.0, at = 0.0;
        int64_t a = 0;
        for (int j = 0; j < k; j++) {
            int64_t b = end[j];
            if (b == a) {
                if (empty < 0) empty = j;
            } else {
                double va = (double)v[a] - ctr, vb = (double)v[b - 1] - ctr;
                double lo = c[j] - va, hi = vb - c[j];
                if (lo * lo > worst) {
                    worst = lo * lo;
                    at = va;
                }
                if (hi * hi > worst) {
                    worst = hi * hi;
                    at = vb;
                }
            }
            a = b;
        }
        if (empty < 0 || !(worst > 0.0)) return;
        c[empty] = at;
        sort_centroids(c, k);
        assign(v, n, ctr, k, c, end);
    }
}

/* Up to max_iters Lloyd iterations on sorted v with prefix sums s1, s2 ([n + 1], double) of
 * v - ctr and its squares; c[k] (relative to ctr) sorted in and out; empty clusters are refilled
 * (fill_empty) before every update. Returns the squared error of the final assignment (with
 * max_iters 0: of c after fill_empty, no update). */
static double lloyd(const float *v, const double *s1, const double *s2, int64_t n, double ctr,
                    int k, int max_iters, double *c) {
    int64_t end[PAL_KMAX], prev[PAL_KMAX];
    double sse = 0.0;
    for (int it = 0; it <= max_iters; it++) {
        assign(v, n, ctr, k, c, end);
        fill_empty(v, n, ctr, k, c, end);
        /* the error of this assignment with the current centroids (before the update) */
        sse = 0.0;
        int64_t a = 0;
        for (int j = 0; j < k; j++) {
            sse += cluster_sse(s1, s2, a, end[j], c[j]);
            a = end[j];
        }
        if (it == max_iters || (it > 0 && memcmp(end, prev, (size_t)k * sizeof end[0]) == 0))
            break;
        memcpy(prev, end, (size_t)k * sizeof end[0]);
        a = 0;
        for (int j = 0; j < k; j++) {
            int64_t b = end[j];
            /* empty only when every value already equals a centroid: keep this one */
            if (b > a) c[j] = (s1[b] - s1[a]) / (double)(b - a);
            a = b;
        }
        /* a kept centroid may now be out of order */
        sort_centroids(c, k);
    }
    return sse < 0.0 ? 0.0 : sse;
}

/* Work buffers of one thread for groups of up to n_max values (slate__pal_work_create). */
struct slate__pal_work {
    int64_t n_max;
    int32_t bits, bins_max;
    float *sorted;       /* [n_max] */
    double *s1, *s2;     /* [n_max + 1] prefix sums of sorted values - ctr and their squares */
    double ctr;          /* the group's centre: its median (sorted[n / 2]) */
    int64_t *bin_end;    /* [bins_max + 2] */
    double *bin_n, *bin_s1, *bin_s2; /* [bins_max + 2] the bins as prefix sums (dp_layer) */
    double *dp_a, *dp_b; /* [bins_max + 2] one layer of the dynamic programme each */
    int32_t *dp_from;    /* [2^bits][bins_max + 2] where the last cluster starts, per layer */
};

/* ---- the exact start: optimal 1-D k-means over bins, by dynamic programming --------------- */

/* The bins as prefix sums: bins [0, i) hold n[i] values with sum s1[i] and sum of squares
 * s2[i] (the value-level prefix sums gathered at the bin ends, contiguous for the inner loop). */
typedef struct dp_layer {
    const double *n, *s1, *s2; /* [m + 1] */
    const double *prev; /* [m + 1] least error of the first t bins in j - 1 clusters */
    double *cur;        /* [m + 1] the same for j clusters */
    int32_t *from;      /* [m + 1] start bin of the last of those j clusters */
    int64_t n_tried;    /* candidate starts tried (dp_solve adds to it) */
} dp_layer;

/* Squared error of the values of bins [a, b) about their mean. */
static inline double bins_sse(const dp_layer *d, int64_t a, int64_t b) {
    double sum = d->s1[b] - d->s1[a];
    double c = (d->s2[b] - d->s2[a]) - sum * sum / (d->n[b] - d->n[a]);
    return c > 0.0 ? c : 0.0;
}

/* cur[i] = min over t in [t_lo, min(t_hi, i - 1)] of prev[t] + bins_sse(t, i), for i in
 * [i_lo, i_hi]. The best t (the lowest among equals) does not decrease with i (the squared
 * error of intervals satisfies the quadrangle inequality), so the middle i is solved first and
 * bounds the search of each half: O(m log m) per layer (divide and conquer). */
static void dp_solve(const dp_layer *d, int64_t i_lo, int64_t i_hi, int64_t t_lo, int64_t t_hi) {
    while (i_lo <= i_hi) {
        int64_t mid = i_lo + (i_hi - i_lo) / 2, last = t_hi < mid - 1 ? t_hi : mid - 1;
        double best = INFINITY;
        int64_t bt = t_lo;
        ((dp_layer *)d)->n_tried += last >= t_lo ? last - t_lo + 1 : 0;
        for (int64_t t = t_lo; t <= last; t++) {
            double v = d->prev[t] + bins_sse(d, t, mid);
            if (v < best) {
                best = v;
                bt = t;
            }
        }
        d->cur[mid] = best;
        d->from[mid] = (int32_t)bt;
        /* the smaller half by recursion (depth <= log2 m), the larger by the loop */
        if (mid - i_lo < i_hi - mid) {
            dp_solve(d, i_lo, mid - 1, t_lo, bt);
            i_lo = mid + 1;
            t_lo = bt;
        } else {
            dp_solve(d, mid + 1, i_hi, bt, t_hi);
            i_hi = mid - 1;
            t_hi = bt;
        }
    }
}

/* The same layer as dp_solve, by the Knuth-Yao bounds: the best start for i with j clusters
 * lies between the best start for i with j - 1 clusters (pfrom, the previous layer, defined
 * for i <= pfrom_hi) and the best start for i + 1 with j clusters (both in exact arithmetic,
 * from the quadrangle inequality), so i runs down from i_hi and tries only that window, in
 * the same order and with the same strict < (the lowest t among equals) as dp_solve. A window
 * costs about the difference in size of the last cluster with j - 1 and j clusters, ~i / j^2,
 * so summed over i it is ~m (1 + m / j^2): far less than dp_solve's ~m log2 m once j passes
 * ~sqrt(m), but up to ~m^2 / 8 at j = 2 (dp_start picks per layer). Returns the starts tried. */
static int64_t dp_knuth(const dp_layer *d, int64_t i_lo, int64_t i_hi, int64_t t_lo,
                        const int32_t *pfrom, int64_t pfrom_hi) {
    int64_t n_tried = 0, up = i_hi - 1;
    for (int64_t i = i_hi; i >= i_lo; i--) {
        int64_t lo = pfrom[i < pfrom_hi ? i : pfrom_hi], hi = i - 1 < up ? i - 1 : up;
        /* rounding could break the bounds' order: then search all that dp_solve could */
        if (lo < t_lo || lo > hi) lo = t_lo;
        double best = INFINITY;
        int64_t bt = lo;
        for (int64_t t = lo; t <= hi; t++) {
            double v = d->prev[t] + bins_sse(d, t, i);
            if (v < best) {
                best = v;
                bt = t;
            }
        }
        n_tried += hi - lo + 1;
        d->cur[i] = best;
        d->from[i] = (int32_t)bt;
        up = bt;
    }
    return n_tried;
}

/* What dp_knuth would try for a layer already solved: from[i] of this layer over i in
 * [i_lo, i_hi], pfrom of the one before (NULL: every start 0). */
static int64_t knuth_cost(const int32_t *from, const int32_t *pfrom, int64_t pfrom_hi,
                          int64_t i_lo, int64_t i_hi) {
    int64_t n = 0, up = i_hi - 1;
    for (int64_t i = i_hi; i >= i_lo; i--) {
        int64_t lo = pfrom ? pfrom[i < pfrom_hi ? i : pfrom_hi] : 0;
        int64_t hi = i - 1 < up ? i - 1 : up;
        n += hi >= lo ? hi - lo + 1 : 1;
        up = from[i];
    }
    return n;
}

/* One binning pass over sorted v[n]: cut only between different values, and there only when the
 * bin so far has cap_n values or more, or the next value lies more than cap_w above the bin's
 * first (each distinct value its own bin when cap_n is 1). Writes e[0] = 0 < e[1] < ... <
 * e[m] = n and returns m, or -1 (e clobbered) when that would take more than limit bins. */
static int64_t bin_pass(const float *v, int64_t n, int64_t cap_n, double cap_w, int64_t limit,
                        int64_t *e) {
    int64_t m = 0, start = 0;
    e[0] = 0;
    for (int64_t i = 1; i < n; i++) {
        if (v[i] == v[i - 1]) continue;
        if (i - start >= cap_n || (double)v[i] - v[start] > cap_w) {
            if (m + 1 == limit) return -1;
            e[++m] = i;
            start = i;
        }
    }
    e[++m] = n;
    return m;
}

/* Bins of sorted v[n] for the exact start, at most n_bins + 1 of them (e[n_bins + 2]): each
 * distinct value its own bin when there are at most n_bins of them; else bins of at most
 * cap_n = 2n / n_bins values and width 2 (max - min) / n_bins (so at most n_bins / 2 bins closed
 * by count, n_bins / 2 by width, and the last: the width bound keeps sparse tails, whose outliers
 * weigh most in the squared error, finely cut). Runs of equal values are never cut, so long runs
 * (half a group pruned to 0) can leave the budget half used: then both caps are halved while the
 * result still fits (a few O(n) passes, next to the O(n log n) sort). Returns the bin count. */
static int64_t make_bins(const float *v, int64_t n, int64_t n_distinct, int32_t n_bins,
                         int64_t *e) {
    if (n_distinct <= n_bins) return bin_pass(v, n, 1, 0.0, (int64_t)n_bins + 1, e);
    int64_t cap_n = (2 * n + n_bins - 1) / n_bins;
    double cap_w = 2.0 * ((double)v[n - 1] - v[0]) / n_bins;
    int64_t m = bin_pass(v, n, cap_n, cap_w, (int64_t)n_bins + 1, e);
    if (m < 0) { /* cannot happen (the bound above); one bin keeps the result well defined */
        e[0] = 0;
        e[1] = n;
        return 1;
    }
    while (2 * m <= n_bins && cap_n > 1) {
        int64_t m2 = bin_pass(v, n, (cap_n + 1) / 2, 0.5 * cap_w, (int64_t)n_bins + 1, e);
        if (m2 < 0) return bin_pass(v, n, cap_n, cap_w, (int64_t)n_bins + 1, e);
        m = m2;
        cap_n = (cap_n + 1) / 2;
        cap_w *= 0.5;
    }
    return m;
}

/* The least squared error partition of the bins into k contiguous clusters (the optimal 1-D
 * k-means when every distinct value is a bin: clusters of an optimal 1-D k-means are runs of
 * the sorted values) by dynamic programming, its cluster means into c[k] (sorted, distinct,
 * relative to the group's centre w->ctr, like the prefix sums).
 * With fewer bins than k, each bin is a cluster and the other centroids repeat the largest
 * (fill_empty puts them to use). */
static void dp_start(const slate__pal_work *w, int64_t n, int k, int64_t n_distinct,
                     int32_t n_bins, double *c) {
    int64_t *e = w->bin_end;
    int64_t m = make_bins(w->sorted, n, n_distinct, n_bins, e);
    int kk = m < k ? (int)m : k;
    for (int64_t i = 0; i <= m; i++) {
        w->bin_n[i] = (double)e[i];
        w->bin_s1[i] = w->s1[e[i]];
        w->bin_s2[i] = w->s2[e[i]];
    }
    double *prev = w->dp_a, *cur = w->dp_b;
    const int64_t stride = (int64_t)n_bins + 2; /* m <= n_bins + 1 */
    dp_layer d = {w->bin_n, w->bin_s1, w->bin_s2, NULL, NULL, NULL, 0}; /* layer 1: no prev */
    for (int64_t i = 1; i <= m; i++) prev[i] = bins_sse(&d, 0, i);
    bool knuth = false;
    for (int j = 2; j <= kk; j++) {
        /* j clusters over the first i bins: j <= i, and k - j bins must remain after them */
        int64_t i_lo = j, i_hi = m - (kk - j);
        if (j == kk) i_lo = m;
        d.prev = prev;
        d.cur = cur;
        d.from = w->dp_from + (size_t)(j - 1) * (size_t)stride;
        /* layer j - 1 is defined for i in [j - 1, i_hi - 1] */
        const int32_t *pfrom = j > 2 ? d.from - stride : NULL;
        if (knuth) {
            dp_knuth(&d, i_lo, i_hi, j - 1, pfrom, i_hi - 1);
        } else {
            /* dp_solve until dp_knuth would have tried fewer starts on the layer just solved
             * (its cost only falls with j); both give the same starts */
            d.n_tried = 0;
            dp_solve(&d, i_lo, i_hi, j - 1, i_hi - 1);
            knuth = knuth_cost(d.from, pfrom, i_hi - 1, i_lo, i_hi) < d.n_tried;
        }
        double *t = prev;
        prev = cur;
        cur = t;
    }
    /* back through the layers: cluster j - 1 is bins [from, b) */
    int64_t b = m;
    for (int j = kk; j >= 1; j--) {
        int64_t a = j == 1 ? 0 : w->dp_from[(size_t)(j - 1) * (size_t)stride + (size_t)b];
        c[j - 1] = (w->s1[e[b]] - w->s1[e[a]]) / (double)(e[b] - e[a]);
        b = a;
    }
    for (int j = kk; j < k; j++) c[j] = c[kk - 1];
}

/* The converter's bins: 16 per centroid, at least 1024 (1024 up to 6 bits, 4096 at 8). Measured
 * against the exact optimum (all distinct values as bins) on groups of 9216 bf16 values (16 rows
 * of 576: most of SmolLM2-135M's groups) and of 32768 f32 values; normal, Laplace, uniform,
 * normal with rare 20x outliers, half zeros with 2% outliers; a scratch program on 2 cores:
 * every case within 1.007x of the optimum (2-4 bits: 1.0002x), where Lloyd alone from the
 * earlier starts ended up to 15x at 3 bits (half zeros with outliers), 4.0x at 4, 4.2x at 6 and
 * 5.2x at 8. CPU per group at 4 bits: 9216 values 1.1-1.8 ms against 0.9-1.4 before, 32768
 * values ~5 ms as before (the sort dominates); 2048 bins took ~0.5 ms more for no measurable
 * gain. At 8 bits the programme dominated: 4-14 ms against 2-3.5 (9216) and 18-25 against 6-15
 * (32768); 2048 bins there ended within 1.03x. The programme over every distinct value would
 * take 15-400 ms per group of 32768. Those figures are with divide and conquer on every
 * layer; the switch to the Knuth-Yao bounds took 8-bit conversions from ~5x to ~3.3x the
 * time at 4 bits (docs/design.md). Whole-model conversion times: docs/design.md. */
int32_t slate__pal_bins(int32_t bits) {
    int32_t b = 16 << bits;
    return b > 1024 ? b : 1024;
}

slate_status slate__pal_work_create(int64_t n, int32_t bits, int32_t bins_max,
                                    slate__pal_work **out, slate_error *err) {
    *out = NULL;
    if (n < 1 || n > ((int64_t)1 << 40) || bits < 1 || bits > 8 || bins_max < 2 ||
        bins_max > SLATE__PAL_BINS_MAX)
        return slate__fail(err, SLATE_E_INVALID_ARG, "palettization work: n %lld, bits %d, "
                           "bins_max %d (accepted: n 1..2^40, bits 1..8, bins_max 2..%d)",
                           (long long)n, bits, bins_max, SLATE__PAL_BINS_MAX);
    slate__pal_work *w = slate__calloc(1, sizeof *w);
    if (!w) return slate__fail(err, SLATE_E_NOMEM, "out of memory: palettization work");
    size_t nb = (size_t)bins_max + 2, k = (size_t)1 << bits;
    w->n_max = n;
    w->bits = bits;
    w->bins_max = bins_max;
    w->sorted = slate__malloc((size_t)n * sizeof(float));
    w->s1 = slate__malloc(((size_t)n + 1) * sizeof(double));
    w->s2 = slate__malloc(((size_t)n + 1) * sizeof(double));
    w->bin_end = slate__malloc(nb * sizeof(int64_t));
    w->bin_n = slate__malloc(nb * sizeof(double));
    w->bin_s1 = slate__malloc(nb * sizeof(double));
    w->bin_s2 = slate__malloc(nb * sizeof(double));
    w->dp_a = slate__malloc(nb * sizeof(double));
    w->dp_b = slate__malloc(nb * sizeof(double));
    w->dp_from = slate__malloc(k * nb * sizeof(int32_t));
    if (!w->sorted || !w->s1 || !w->s2 || !w->bin_end || !w->bin_n || !w->bin_s1 ||
        !w->bin_s2 || !w->dp_a || !w->dp_b || !w->dp_from) {
        slate__pal_work_free(w);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory: palettization work for groups "
                           "of %lld values", (long long)n);
    }
    *out = w;
    return SLATE_OK;
}

void slate__pal_work_free(slate__pal_work *w) {
    if (!w) return;
    slate__free(w->sorted);
    slate__free(w->s1);
    slate__free(w->s2);
    slate__free(w->bin_end);
    slate__free(w->bin_n);
    slate__free(w->bin_s1);
    slate__free(w->bin_s2);
    slate__free(w->dp_a);
    slate__free(w->dp_b);
    slate__free(w->dp_from);
    slate__free(w);
}

double slate__pal_fit(const float *x, int64_t n, int32_t bits, int32_t n_bins, double *c,
                      slate__pal_work *w) {
    int k = 1 << bits;
    float *sorted = w->sorted;
    double *s1 = w->s1, *s2 = w->s2;
    memcpy(sorted, x, (size_t)n * sizeof *x);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_float);
    /* The sums are taken about the median: about 0, a cluster's error (s2[b] - s2[a]) -
     * sum^2 / n cancels catastrophically when the group sits far from 0 against its spread
     * (3.0 +- 1e-4: the sums carry ~1e-15 relative error of terms ~9, the error is ~1e-8 a
     * value). A difference of two floats whose exponents differ by at most 28 is exact in
     * double, so a group and the same group plus a constant (both exact in f32) get identical
     * sums, bins and clusters, and centroids that differ by the constant. */
    double ctr = sorted[n / 2];
    w->ctr = ctr;
    s1[0] = s2[0] = 0.0;
    int64_t n_distinct = 1;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)sorted[i] - ctr;
        s1[i + 1] = s1[i] + d;
        s2[i + 1] = s2[i] + d * d;
        n_distinct += i > 0 && sorted[i] != sorted[i - 1];
    }
    double lo = (double)sorted[0] - ctr, hi = (double)sorted[n - 1] - ctr;
    double cd[PAL_KMAX], cu[PAL_KMAX], e = 0.0;
    const double *cc = cd;
    if (n_distinct <= k) {
        /* every distinct value is a centroid (the optimum, error 0); the unused entries repeat
         * the largest value */
        int j = 0;
        c[0] = sorted[0];
        for (int64_t i = 1; i < n; i++)
            if (sorted[i] != sorted[i - 1]) c[++j] = sorted[i];
        for (j++; j < k; j++) c[j] = sorted[n - 1];
        return 0.0;
    }
    dp_start(w, n, k, n_distinct, n_bins, cd);
    e = lloyd(sorted, s1, s2, n, ctr, k, PAL_ITERS, cd);
    /* the uniform start only where the exact one ended above the uniform grid's error (so far
     * seen only with a handful of bins per centroid): Lloyd from it costs tens of iterations,
     * and the guarantee needs only the comparison */
    for (int j = 0; j < k; j++) cu[j] = lo + (hi - lo) * j / (k - 1);
    if (!(e <= lloyd(sorted, s1, s2, n, ctr, k, 0, cu))) {
        double eu = lloyd(sorted, s1, s2, n, ctr, k, PAL_ITERS, cu);
        if (eu < e) {
            cc = cu;
            e = eu;
        }
    }
    for (int j = 0; j < k; j++) c[j] = ctr + cc[j];
    return e;
}

bool slate__palettize_group(const float *x, int64_t n, int32_t bits, int32_t n_bins,
                            uint16_t *lut, uint8_t *idx, slate__pal_work *w) {
    int k = 1 << bits;
    double c[PAL_KMAX];
    slate__pal_fit(x, n, bits, n_bins, c, w);
    float cf[PAL_KMAX];
    for (int j = 0; j < k; j++) {
        lut[j] = slate__f32_to_f16((float)c[j]);
        cf[j] = slate__f16_to_f32(lut[j]);
        if (!isfinite(cf[j])) return false;
    }
    /* f16 rounding is monotonic, so cf stays sorted: nearest by binary search */
    for (int64_t i = 0; i < n; i++) {
        int a = 0, b = k; /* first centroid > x[i] */
        while (a < b) {
            int mid = (a + b) / 2;
            if (cf[mid] <= x[i]) a = mid + 1;
            else b = mid;
        }
        int best = a == 0 ? 0 : a == k ? k - 1
                   : (x[i] - cf[a - 1] <= cf[a] - x[i] ? a - 1 : a);
        /* equal centroids (a group with fewer distinct values than k): the lowest index */
        while (best > 0 && cf[best - 1] == cf[best]) best--;
        idx[i] = (uint8_t)best;
    }
    return true;
}

void slate__pal_pack_row(const uint8_t *idx, int64_t n, int32_t bits, uint8_t *row) {
    memset(row, 0, ((size_t)n * (size_t)bits + 7) / 8);
    for (int64_t i = 0; i < n; i++) {
        size_t bit = (size_t)i * (size_t)bits;
        unsigned v = (unsigned)idx[i] << (bit % 8);
        row[bit / 8] |= (uint8_t)v;
        if (v >> 8) row[bit / 8 + 1] |= (uint8_t)(v >> 8);
    }
}

/* ---- the parallel producer ----------------------------------------------------------------- */

typedef struct pjob {
    const slate__qspec *qs;
    uint8_t *dst;
    float **x;              /* [n_threads][group * cols] the group's values, row-major */
    slate__pal_work **work; /* [n_threads] */
    uint8_t **idx;          /* [n_threads][group * cols] */
    int64_t bad_row[SLATE__QMAX_THREADS]; /* first row with a problem, or -1 */
    int64_t bad_col[SLATE__QMAX_THREADS];
    float bad_val[SLATE__QMAX_THREADS];
} pjob;

static void palettize_groups(void *ctx, int ith, int nth) {
    pjob *j = ctx;
    const slate__qspec *s = j->qs;
    slate__wmat w;
    slate__wmat_init(&w, j->dst, s->dtype, s->block, false, s->rows, s->cols);
    int64_t G = w.group, n_groups = (s->rows + G - 1) / G;
    int64_t g0 = n_groups * ith / nth, g1 = n_groups * (ith + 1) / nth;
    bool ok_size;
    size_t src_row = slate__src_nbytes(s->src->type, (uint64_t)s->cols, &ok_size);
    float *x = j->x[ith];
    uint8_t *idx = j->idx[ith];
    j->bad_row[ith] = -1;
    for (int64_t g = g0; g < g1; g++) {
        int64_t r0 = g * G, r1 = r0 + G < s->rows ? r0 + G : s->rows;
        for (int64_t r = r0; r < r1; r++) {
            float *xr = x + (r - r0) * s->cols;
            slate__src_to_f32(s->src->type, s->src->data + (size_t)r * src_row, xr, s->cols);
            for (int64_t c = 0; c < s->cols; c++)
                if (!isfinite(xr[c])) {
                    j->bad_row[ith] = r;
                    j->bad_col[ith] = c;
                    j->bad_val[ith] = xr[c];
                    return;
                }
        }
        int64_t n = (r1 - r0) * s->cols;
        uint16_t *lut = (uint16_t *)w.lut + (size_t)g * ((size_t)1 << w.bits);
        if (!slate__palettize_group(x, n, w.bits, slate__pal_bins(w.bits), lut, idx,
                                    j->work[ith])) {
            int64_t big = 0;
            for (int64_t i = 1; i < n; i++)
                if (fabsf(x[i]) > fabsf(x[big])) big = i;
            j->bad_row[ith] = r0 + big / s->cols;
            j->bad_col[ith] = big % s->cols;
            j->bad_val[ith] = x[big];
            return;
        }
        for (int64_t r = r0; r < r1; r++)
            slate__pal_pack_row(idx + (r - r0) * s->cols, s->cols, w.bits,
                                j->dst + (size_t)r * w.row_bytes);
    }
}

slate_status slate__palettize_tensor(const slate__qspec *s, void *dst, slate__pool *pool,
                                     slate_error *err) {
    int nth = slate__pool_size(pool);
    if (nth > SLATE__QMAX_THREADS) return SLATE__INTERNAL(err, "too many palettization threads");
    pjob j;
    memset(&j, 0, sizeof j);
    j.qs = s;
    j.dst = dst;
    int64_t group = slate__pal_group(s->block);
    if (group > s->rows) group = s->rows;
    size_t n; /* values per group */
    slate_status st = SLATE_OK;
    j.x = slate__calloc((size_t)nth, sizeof *j.x);
    j.work = slate__calloc((size_t)nth, sizeof *j.work);
    j.idx = slate__calloc((size_t)nth, sizeof *j.idx);
    if (!j.x || !j.work || !j.idx || !slate__mul_size((size_t)group, (size_t)s->cols, &n) ||
        n > ((size_t)1 << 40)) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory: buffers for palettizing '%s'",
                         s->src->name);
        goto done;
    }
    for (int t = 0; t < nth; t++) {
        int32_t bits = slate__pal_bits(s->block);
        st = slate__pal_work_create((int64_t)n, bits, slate__pal_bins(bits), &j.work[t], err);
        if (st != SLATE_OK) goto done;
        j.x[t] = slate__malloc(n * sizeof(float));
        j.idx[t] = slate__malloc(n);
        if (!j.x[t] || !j.idx[t]) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory: buffers for palettizing '%s' "
                             "(%zu values per group)", s->src->name, n);
            goto done;
        }
    }
    memset(dst, 0, (size_t)slate__wmat_bytes(s->dtype, s->block, false, s->rows, s->cols));
    if (pool) slate__pool_run(pool, palettize_groups, &j);
    else palettize_groups(&j, 0, 1);
    int worst = -1;
    for (int t = 0; t < nth; t++)
        if (j.bad_row[t] >= 0 && (worst < 0 || j.bad_row[t] < j.bad_row[worst])) worst = t;
    if (worst >= 0) {
        char what[SLATE__SRC_DESC_CAP];
        slate__src_desc(s->src, what, sizeof what);
        long long row = (long long)(s->src->src_row0 + j.bad_row[worst]); /* of the named */
        if (!isfinite(j.bad_val[worst]))
            st = slate__fail(err, SLATE_E_FORMAT, "%s: element [%lld][%lld] is not finite (%g)",
                             what, row, (long long)j.bad_col[worst], j.bad_val[worst]);
        else
            st = slate__fail(err, SLATE_E_UNSUPPORTED, "%s: element [%lld][%lld] = %g is too "
                             "large for pal (a centroid does not fit f16); keep the tensor as "
                             "f32 (--keep)", what, row, (long long)j.bad_col[worst],
                             j.bad_val[worst]);
    }
done:
    for (int t = 0; t < nth; t++) {
        if (j.x) slate__free(j.x[t]);
        if (j.work) slate__pal_work_free(j.work[t]);
        if (j.idx) slate__free(j.idx[t]);
    }
    slate__free(j.x);
    slate__free(j.work);
    slate__free(j.idx);
    return st;
}
