/*
 * palettize.c - the converter's k-means palettization (dtype PAL, kernels/quant.h): for each
 * group of G output rows, one table of k = 2^N f16 centroids fitted to the group's weights by
 * 1-D k-means, and each weight replaced by the index of its nearest centroid.
 *
 * 1-D k-means is done exactly and fast on the sorted values: with sorted centroids, a cluster
 * is a contiguous run of the sorted values between midpoints, found by binary search, and its
 * mean comes from prefix sums. One Lloyd iteration therefore costs O(k log n) after one
 * O(n log n) sort, so we can afford many (up to PAL_ITERS, stopping early when no boundary
 * moves). A group with at most k distinct values needs no search: each value is a centroid
 * (error 0; the unused entries repeat the largest). Otherwise Lloyd is run from two starts:
 *   quantile  centroid j = the sorted value at rank (j + 1/2) n / k (follows the density), with
 *             one centroid for each run of equal values longer than n / k (pruned zeros) and
 *             the others at the quantiles of the remaining values, and
 *   uniform   centroid j = min + j (max - min) / (k - 1), the grid of a uniform asymmetric
 *             N-bit quantizer,
 * keeping the one with the lower error. Before each update, a cluster left empty gets the value
 * with the largest error (fill_empty), so no centroid is wasted on nothing; this, like each
 * Lloyd step, only lowers the squared error, so starting from the uniform grid guarantees the
 * result is never worse (in f32) than uniform N-bit quantization of the same group. Lloyd can
 * still stop in a local minimum (it is not the exact optimum). Centroids are then rounded to
 * f16 and sorted, and each weight takes the nearest stored centroid (ties: the lower index).
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

/* Index of the first sorted value > t in v[0..n). */
static int64_t upper(const float *v, int64_t n, double t) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((double)v[mid] <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Squared error of cluster [a, b) of sorted v about centroid c, from the prefix sums. */
static double cluster_sse(const double *s1, const double *s2, int64_t a, int64_t b, double c) {
    return b > a ? (s2[b] - s2[a]) - 2.0 * c * (s1[b] - s1[a]) + (double)(b - a) * c * c : 0.0;
}

/* Cluster boundaries of sorted c[k] on sorted v: cluster j = v[end[j-1] .. end[j]), the values
 * nearer to c[j] than to c[j+1] (a value exactly between goes to the lower centroid). */
static void assign(const float *v, int64_t n, int k, const double *c, int64_t *end) {
    for (int j = 0; j < k - 1; j++) end[j] = upper(v, n, 0.5 * (c[j] + c[j + 1]));
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
static void fill_empty(const float *v, int64_t n, int k, double *c, int64_t *end) {
    for (int moves = 0; moves < k; moves++) {
        int empty = -1;
        double worst = 0.0, at = 0.0;
        int64_t a = 0;
        for (int j = 0; j < k; j++) {
            int64_t b = end[j];
            if (b == a) {
                if (empty < 0) empty = j;
            } else {
                double lo = c[j] - (double)v[a], hi = (double)v[b - 1] - c[j];
                if (lo * lo > worst) {
                    worst = lo * lo;
                    at = v[a];
                }
                if (hi * hi > worst) {
                    worst = hi * hi;
                    at = v[b - 1];
                }
            }
            a = b;
        }
        if (empty < 0 || !(worst > 0.0)) return;
        c[empty] = at;
        sort_centroids(c, k);
        assign(v, n, k, c, end);
    }
}

/* Lloyd iterations on sorted v with prefix sums s1, s2 ([n + 1], double); c[k] sorted in and
 * out; empty clusters are refilled (fill_empty) before every update. Returns the squared error
 * of the final assignment. */
static double lloyd(const float *v, const double *s1, const double *s2, int64_t n, int k,
                    double *c) {
    int64_t end[PAL_KMAX], prev[PAL_KMAX];
    double sse = 0.0;
    for (int it = 0; it <= PAL_ITERS; it++) {
        assign(v, n, k, c, end);
        fill_empty(v, n, k, c, end);
        /* the error of this assignment with the current centroids (before the update) */
        sse = 0.0;
        int64_t a = 0;
        for (int j = 0; j < k; j++) {
            sse += cluster_sse(s1, s2, a, end[j], c[j]);
            a = end[j];
        }
        if (it == PAL_ITERS || (it > 0 && memcmp(end, prev, (size_t)k * sizeof end[0]) == 0))
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

/* The density start on sorted v[n] with more than k distinct values: centroid j = the value at
 * rank (j + 1/2) n / k, except that a run of equal values longer than n / k (pruned weights at
 * 0, a constant half of a group) gets exactly one centroid, and the other k - R centroids are
 * spread as quantiles of the values outside those R runs. (Plain quantiles would put several
 * centroids on such a run, all but one of them with nothing to hold.) Without long runs this is
 * the plain quantile start. c[k] comes out sorted. */
static void quantile_start(const float *v, int64_t n, int k, double *c) {
    int64_t run_a[PAL_KMAX], run_b[PAL_KMAX]; /* the long runs v[run_a..run_b) */
    int n_runs = 0;
    int64_t rest = n; /* values outside the long runs */
    for (int64_t a = 0, b; a < n; a = b) {
        b = a + 1;
        while (b < n && v[b] == v[a]) b++;
        if ((b - a) * k > n && n_runs < k - 1) {
            run_a[n_runs] = a;
            run_b[n_runs++] = b;
            rest -= b - a;
        }
    }
    int m = k - n_runs; /* >= 1, and rest > m: more than k distinct values in all */
    for (int j = 0; j < m; j++) {
        /* rank among the values outside the long runs, then its index in v */
        int64_t r = (int64_t)(((double)j + 0.5) * (double)rest / m);
        for (int i = 0; i < n_runs && r >= run_a[i]; i++) r += run_b[i] - run_a[i];
        c[j] = v[r];
    }
    for (int i = 0; i < n_runs; i++) c[m + i] = v[run_a[i]];
    sort_centroids(c, k);
}

/* Work buffers of one thread for a group of up to n values. */
typedef struct pal_buf {
    float *x;      /* [n] the group's values, row-major */
    float *sorted; /* [n] */
    double *s1, *s2; /* [n + 1] prefix sums of sorted values and squares */
} pal_buf;

bool slate__palettize_group(const float *x, int64_t n, int32_t bits, uint16_t *lut,
                            uint8_t *idx, float *sorted, double *s1, double *s2) {
    int k = 1 << bits;
    memcpy(sorted, x, (size_t)n * sizeof *x);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_float);
    s1[0] = s2[0] = 0.0;
    for (int64_t i = 0; i < n; i++) {
        s1[i + 1] = s1[i] + sorted[i];
        s2[i + 1] = s2[i] + (double)sorted[i] * sorted[i];
    }
    double lo = sorted[0], hi = sorted[n - 1];
    double cq[PAL_KMAX], cu[PAL_KMAX];
    int n_distinct = 1; /* up to k + 1 */
    cq[0] = sorted[0];
    for (int64_t i = 1; i < n && n_distinct <= k; i++)
        if (sorted[i] != sorted[i - 1]) {
            if (n_distinct < k) cq[n_distinct] = sorted[i];
            n_distinct++;
        }
    const double *c = cq;
    if (n_distinct <= k) {
        /* every distinct value is a centroid (the optimum, error 0); the unused entries repeat
         * the largest value */
        for (int j = n_distinct; j < k; j++) cq[j] = hi;
    } else {
        quantile_start(sorted, n, k, cq);
        for (int j = 0; j < k; j++) cu[j] = lo + (hi - lo) * j / (k - 1);
        double eq = lloyd(sorted, s1, s2, n, k, cq);
        double eu = lloyd(sorted, s1, s2, n, k, cu);
        if (!(eq < eu)) c = cu;
    }
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
    pal_buf *buf;        /* [n_threads] */
    uint8_t **idx;       /* [n_threads][group * cols] */
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
    pal_buf *b = &j->buf[ith];
    uint8_t *idx = j->idx[ith];
    j->bad_row[ith] = -1;
    for (int64_t g = g0; g < g1; g++) {
        int64_t r0 = g * G, r1 = r0 + G < s->rows ? r0 + G : s->rows;
        for (int64_t r = r0; r < r1; r++) {
            float *xr = b->x + (r - r0) * s->cols;
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
        if (!slate__palettize_group(b->x, n, w.bits, lut, idx, b->sorted, b->s1, b->s2)) {
            int64_t big = 0;
            for (int64_t i = 1; i < n; i++)
                if (fabsf(b->x[i]) > fabsf(b->x[big])) big = i;
            j->bad_row[ith] = r0 + big / s->cols;
            j->bad_col[ith] = big % s->cols;
            j->bad_val[ith] = b->x[big];
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
    j.buf = slate__calloc((size_t)nth, sizeof *j.buf);
    j.idx = slate__calloc((size_t)nth, sizeof *j.idx);
    if (!j.buf || !j.idx || !slate__mul_size((size_t)group, (size_t)s->cols, &n) ||
        n > ((size_t)1 << 40)) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory: buffers for palettizing '%s'",
                         s->src->name);
        goto done;
    }
    for (int t = 0; t < nth; t++) {
        pal_buf *b = &j.buf[t];
        b->x = slate__malloc(n * sizeof(float));
        b->sorted = slate__malloc(n * sizeof(float));
        b->s1 = slate__malloc((n + 1) * sizeof(double));
        b->s2 = slate__malloc((n + 1) * sizeof(double));
        j.idx[t] = slate__malloc(n);
        if (!b->x || !b->sorted || !b->s1 || !b->s2 || !j.idx[t]) {
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
        if (!isfinite(j.bad_val[worst]))
            st = slate__fail(err, SLATE_E_FORMAT, "tensor '%s': element [%lld][%lld] is not "
                             "finite (%g)", s->src->name, (long long)j.bad_row[worst],
                             (long long)j.bad_col[worst], j.bad_val[worst]);
        else
            st = slate__fail(err, SLATE_E_UNSUPPORTED, "tensor '%s': element [%lld][%lld] = %g "
                             "is too large for pal (a centroid does not fit f16); keep the "
                             "tensor as f32 (--keep)", s->src->name,
                             (long long)j.bad_row[worst], (long long)j.bad_col[worst],
                             j.bad_val[worst]);
    }
done:
    for (int t = 0; j.buf && t < nth; t++) {
        slate__free(j.buf[t].x);
        slate__free(j.buf[t].sorted);
        slate__free(j.buf[t].s1);
        slate__free(j.buf[t].s2);
        if (j.idx) slate__free(j.idx[t]);
    }
    slate__free(j.buf);
    slate__free(j.idx);
    return st;
}
