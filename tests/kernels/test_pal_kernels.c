/* test_pal_kernels.c - palettized weights (dtype PAL, kernels/quant.h): the reference decode
 * against an independent bit-by-bit reading of the format, and the matmul of every SIMD table
 * this CPU supports ("avx2", "avx512": f32 tables and x; "avx512_vnni" with VBMI: u8 tables and
 * int8 x, x86/avx512_vbmi.c) against the scalar reference (kernels/ref/quant.c) on random
 * indices and random f16 tables (some one-sided): bits 2, 3, 4, 6, 8; rows of 1 to 2100
 * elements (tails inside a byte, a 64-index chunk, a 128/256-input span, a 1024-input prefill
 * block); groups of 1, 3, 16 and 64 rows with a partial last group; 1..13 query rows; output
 * sub-ranges that do not start at 0; with and without bias. The bound for tables that quantize
 * is derived next to check_case. The seed is printed once (tu_seed); SLATE_TEST_SEED=<n> repeats
 * it. */
#include "testutil.h"
#include "xqsplit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "core/core.h"
#include "kernels/kernels.h"

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

/* A random PAL tensor: indices packed with the converter's packer, tables of random f16 values
 * in [-1, 1) (every third shifted by 0.75). idx_out (may be NULL) receives the indices [n_out][n_in]. */
static uint8_t *make_pal(int32_t bits, int32_t group, int64_t n_out, int64_t n_in, uint64_t *rng,
                         uint8_t **idx_out) {
    int32_t layout = slate__pal_layout(bits, group);
    char why[160];
    assert_true(slate__wlayout_check(SLATE_DTYPE_PAL, layout, false, n_in, why, sizeof why));
    uint64_t bytes = slate__wmat_bytes(SLATE_DTYPE_PAL, layout, false, n_out, n_in);
    assert_true(bytes > 0);
    uint8_t *w = xmalloc((size_t)bytes);
    memset(w, 0, (size_t)bytes);
    slate__wmat wm;
    slate__wmat_init(&wm, w, SLATE_DTYPE_PAL, layout, false, n_out, n_in);
    uint8_t *idx = xmalloc((size_t)(n_out * n_in));
    for (int64_t i = 0; i < n_out * n_in; i++) idx[i] = (uint8_t)(tu_rand(rng) >> 40) & ((1u << bits) - 1);
    for (int64_t o = 0; o < n_out; o++)
        slate__pal_pack_row(idx + o * n_in, n_in, bits, w + (size_t)o * wm.row_bytes);
    int64_t n_lut = (n_out + group - 1) / group << bits;
    /* every third table one-sided (in [-0.25, 1.75)): the kernels' affine table rounding */
    for (int64_t j = 0; j < n_lut; j++)
        ((uint16_t *)wm.lut)[j] = slate__f32_to_f16(tu_randf(rng) + ((j >> bits) % 3 == 1 ? 0.75f : 0.0f));
    /* the tables end the tensor exactly */
    assert_true((const uint8_t *)wm.lut + 2 * n_lut == w + bytes);
    if (idx_out) *idx_out = idx;
    else free(idx);
    return w;
}

/* The format read bit by bit, written independently of both kernels: element i of row o is
 * bits i*N .. i*N+N-1 of the row, bit b being bit b % 8 of byte b / 8. */
static void reference_decode_matches_the_documented_bit_layout(void **st) {
    (void)st;
    uint64_t rng = tu_seed() ^ 0x9a1;
    static const int32_t bits_all[] = {2, 3, 4, 6, 8};
    for (size_t bi = 0; bi < 5; bi++) {
        int32_t bits = bits_all[bi], group = 3;
        int64_t n_out = 7, n_in = 29;
        uint8_t *idx;
        uint8_t *w = make_pal(bits, group, n_out, n_in, &rng, &idx);
        slate__wmat wm;
        slate__wmat_init(&wm, w, SLATE_DTYPE_PAL, slate__pal_layout(bits, group), false, n_out,
                         n_in);
        assert_int_equal(wm.row_bytes, (size_t)(n_in * bits + 7) / 8);
        float got[29];
        for (int64_t o = 0; o < n_out; o++) {
            slate__ref_dequant(&wm, o, 0, n_in, got);
            const uint8_t *row = w + (size_t)o * wm.row_bytes;
            for (int64_t i = 0; i < n_in; i++) {
                unsigned q = 0;
                for (int b = 0; b < bits; b++) {
                    int64_t bit = i * bits + b;
                    q |= (unsigned)((row[bit / 8] >> (bit % 8)) & 1) << b;
                }
                assert_int_equal(q, idx[o * n_in + i]);
                float want = slate__f16_to_f32(wm.lut[(o / group) * (1 << bits) + q]);
                if (got[i] != want)
                    fail_msg("bits %d row %lld element %lld: %g, want %g", bits, (long long)o,
                             (long long)i, got[i], want);
            }
            /* padding bits of the last byte are zero */
            int64_t used = n_in * bits;
            if (used % 8) assert_int_equal(row[used / 8] >> (used % 8), 0);
        }
        free(idx);
        free(w);
    }
}

/* How far the integer kernels (x86/avx512_vbmi.c) move a centroid: u8 values over [min, max]
 * of the 2^N centroids, step s = (max - min) / 255, so at most s / 2; at 6 and 8 bits a second
 * u8 plane holds the residual in steps of s / 256, at most one step off (the tie that saturates
 * at 255; else half a step). */
static double table_half_step(const slate__wmat *w, int64_t o) {
    const uint16_t *t = w->lut + (size_t)(o / w->group) * ((size_t)1 << w->bits);
    double lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < 1 << w->bits; j++) {
        double c = slate__f16_to_f32(t[j]);
        lo = fmin(lo, c);
        hi = fmax(hi, c);
    }
    return w->bits >= 6 ? (hi - lo) / 255.0 / 256.0 : (hi - lo) / 255.0 / 2.0;
}

/* x as exec quantizes it for table k (NULL when the table reads f32 x): in two row ranges split
 * at a row_align multiple, with a guard past the planned bytes that must stay untouched. */
static void *quantize_like_exec(const slate__kernels *k, const slate__wmat *wm, const float *x,
                                int64_t n_rows) {
    if (!k->xq_plan[SLATE_DTYPE_PAL]) return NULL;
    slate__xq_plan pl = k->xq_plan[SLATE_DTYPE_PAL](wm, n_rows);
    if (!pl.bytes) return NULL;
    assert_non_null(k->quantize_x[SLATE_DTYPE_PAL]);
    assert_true(pl.row_align >= 1);
    uint8_t *xq = xmalloc(pl.bytes + 64);
    memset(xq, 0xA5, pl.bytes + 64);
    int64_t mid = (n_rows / 2) / pl.row_align * pl.row_align;
    k->quantize_x[SLATE_DTYPE_PAL](xq, x, wm, n_rows, 0, mid);
    k->quantize_x[SLATE_DTYPE_PAL](xq, x, wm, n_rows, mid, n_rows);
    for (size_t i = pl.bytes; i < pl.bytes + 64; i++)
        if (xq[i] != 0xA5) fail_msg("%s: quantize_x wrote past its plan (%zu bytes)", k->name, pl.bytes);
    return xq;
}

/* One case: table k against ref on a random [n_out][n_in] PAL tensor, rows n_rows, columns
 * [o0, n_out). Columns outside the range must stay untouched. Tolerance per element, with
 * mag = sum_i |w_i x_i| + |bias|:
 *   |got - want| <= 1e-5 * mag                                   (f32 tables, f32 x)
 *   |got - want| <= 1e-5 * mag + 1.001 * (sum_i h |x_i| + sum_g dx_g / 2 * sum_{i in g} (|w_i| + h))
 *                                                                (tables that quantize x)
 * 1e-5 * mag: both sum f32 products in different orders (lanes, groups, FMA); the error grows
 * like u sqrt(n) times the sum of |products| (u = 6e-8), so 1e-5 is far above what is seen and
 * far below a wrong index, table, group or lost span (~ one product or more). Quantizing: the
 * kernel multiplies w' = w + e (|e| <= h, h = table_half_step) by x' = x + f (|f| <= dx_g / 2,
 * dx_g = max |x| / 127 over the 128-input group of i), and w'x' - wx = e x + w' f, so
 * |w'x' - wx| <= h |x| + (|w| + h) dx_g / 2 exactly; 1.001 covers the f32 rounding of the
 * scales. That worst case grows like n; the terms c_i = h |x_i| + (|w_i| + h) dx_g / 2 bound
 * rounding errors that are independent with mean 0 on random x, so by Hoeffding's inequality
 * the sum exceeds 8 sqrt(sum c_i^2) with probability below 2 e^-32: the bound used is the smaller
 * of the two. A dropped 64-index chunk, a wrong group scale or table step fails it. */
static void check_case(const slate__kernels *k, const slate__kernels *ref, int32_t bits,
                       int32_t group, int64_t n_out, int64_t n_in, int64_t n_rows, int64_t o0,
                       bool use_bias, uint64_t *rng, uint64_t seed) {
    uint8_t *w = make_pal(bits, group, n_out, n_in, rng, NULL);
    slate__wmat wm;
    slate__wmat_init(&wm, w, SLATE_DTYPE_PAL, slate__pal_layout(bits, group), false, n_out, n_in);
    float *x = xmalloc((size_t)(n_rows * n_in) * sizeof(float));
    float *bias = xmalloc((size_t)n_out * sizeof(float));
    float *y0 = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    float *y1 = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    float *wrow = xmalloc((size_t)n_in * sizeof(float));
    /* x of a few magnitudes, so the 128-input groups get different scales */
    for (int64_t i = 0; i < n_rows * n_in; i++)
        x[i] = tu_randf(rng) * ((i % n_in) / 128 % 3 == 1 ? 4.0f : (i % n_in) / 128 % 3 == 2 ? 0.1f : 1.0f);
    for (int64_t i = 0; i < n_out; i++) bias[i] = tu_randf(rng);
    for (int64_t i = 0; i < n_rows * n_out; i++) y0[i] = y1[i] = -7.0f;
    void *xq = quantize_like_exec(k, &wm, x, n_rows);
    ref->matmul[SLATE_DTYPE_PAL](y0, x, NULL, &wm, use_bias ? bias : NULL, n_rows, o0, n_out);
    k->matmul[SLATE_DTYPE_PAL](y1, x, xq, &wm, use_bias ? bias : NULL, n_rows, o0, n_out);
    for (int64_t o = 0; o < n_out; o++) {
        if (o < o0) {
            for (int64_t r = 0; r < n_rows; r++)
                if (y1[r * n_out + o] != -7.0f)
                    fail_msg("%s: bits %d: wrote y[%lld][%lld] outside [%lld, %lld) (seed %llu)",
                             k->name, bits, (long long)r, (long long)o, (long long)o0,
                             (long long)n_out, (unsigned long long)seed);
            continue;
        }
        slate__ref_dequant(&wm, o, 0, n_in, wrow);
        double h = xq ? table_half_step(&wm, o) : 0.0;
        for (int64_t r = 0; r < n_rows; r++) {
            const float *xr = x + r * n_in;
            double mag = use_bias ? fabs(bias[o]) : 0.0, qb = 0.0, c2 = 0.0;
            for (int64_t i0 = 0; i0 < n_in; i0 += 128) {
                int64_t i1 = i0 + 128 < n_in ? i0 + 128 : n_in;
                double amax = 0.0;
                for (int64_t i = i0; i < i1; i++) amax = fmax(amax, fabs(xr[i]));
                for (int64_t i = i0; i < i1; i++) {
                    double c = h * fabs(xr[i]) + (fabs(wrow[i]) + h) * amax / 127.0 / 2.0;
                    mag += fabs((double)wrow[i] * xr[i]);
                    qb += c;
                    c2 += c * c;
                }
            }
            qb = fmin(1.001 * qb, 8.0 * sqrt(c2));
            double bound = 1e-5 * mag + (xq ? qb : 0.0);
            double got = y1[r * n_out + o], want = y0[r * n_out + o], d = fabs(got - want);
            if (!(d <= bound))
                fail_msg("%s: bits %d group %d [%lld][%lld] rows %lld o0 %lld bias %d: y[%lld][%lld] "
                         "got %.9g want %.9g, |diff| %.3g > bound %.3g (mag %.3g, quantization "
                         "%.3g) (seed %llu)", k->name, bits, group, (long long)n_out,
                         (long long)n_in, (long long)n_rows, (long long)o0, (int)use_bias,
                         (long long)r, (long long)o, got, want, d, bound, mag, qb,
                         (unsigned long long)seed);
        }
    }
    free(w);
    free(x);
    free(bias);
    free(y0);
    free(y1);
    free(wrow);
    free(xq);
}

static const char *const g_tables[] = {"avx2", "avx512", "avx512_vnni"};
#define N_TABLES (sizeof g_tables / sizeof g_tables[0])

/* Every bit width; rows of 1 element to past two prefill K blocks (1024), most not a multiple
 * of 8, 16, 64 or 128 (tails inside a byte, a 64-index chunk, a 128/256-input span); groups of
 * 1, 3, 16 and 64 rows with a partial last group; 1..13 query rows (decode takes 1-3 rows of x
 * at a time; prefill tiles of 4 rows with a partial one); output sub-ranges that start past 0
 * and column tiles of 32 with a partial one; with and without bias. */
static void simd_matmul_matches_reference(void **st) {
    (void)st;
    const slate__kernels *ref = slate__kernels_by_name("ref");
    static const int32_t bits_all[] = {2, 3, 4, 6, 8};
    static const int64_t n_ins[] = {1, 15, 16, 17, 31, 33, 63, 65, 100, 127, 129, 255, 257, 1000, 2100};
    static const int32_t groups[] = {1, 3, 16, 64};
    uint64_t seed = tu_seed(), rng = seed ^ 0x5a17;
    int n_tables = 0;
    for (size_t ti = 0; ti < N_TABLES; ti++) {
        const slate__kernels *k = slate__kernels_by_name(g_tables[ti]);
        if (!k) continue;
        n_tables++;
        for (size_t bi = 0; bi < 5; bi++)
            for (size_t ni = 0; ni < sizeof n_ins / sizeof n_ins[0]; ni++)
                for (size_t gi = 0; gi < 4; gi++) {
                    int64_t n_out = 1 + (int64_t)(tu_rand(&rng) % 70); /* partial last group */
                    int64_t n_rows = 1 + (int64_t)((ni * 4 + gi + bi) % 13);
                    int64_t o0 = n_out > 1 ? (int64_t)(tu_rand(&rng) % (uint64_t)(n_out / 2 + 1)) : 0;
                    bool use_bias = tu_rand(&rng) & 1;
                    check_case(k, ref, bits_all[bi], groups[gi], n_out, n_ins[ni], n_rows, o0,
                               use_bias, &rng, seed);
                }
        /* many columns (several 32-column tiles and 4-row blocks) at the model's group of 16 */
        for (size_t bi = 0; bi < 5; bi++) {
            check_case(k, ref, bits_all[bi], 16, 133, 1300, 1, 5, true, &rng, seed);
            check_case(k, ref, bits_all[bi], 16, 133, 1300, 19, 0, false, &rng, seed);
        }
    }
    if (!n_tables) {
        fprintf(stderr, "[  SKIP    ] no SIMD kernel table on this CPU\n");
        skip();
    }
}

/* quantize_x is a per-row function: any split of the rows at row_align multiples gives the same
 * bytes (exec splits rows over threads), and the plan never shrinks as rows grow (exec reserves
 * the plan of max_query). */
static void quantize_x_gives_the_same_bytes_for_any_row_split(void **st) {
    (void)st;
    uint64_t rng = tu_seed() ^ 0x73706c6974ull;
    static const int32_t bits_all[] = {2, 3, 4, 6, 8};
    static const int64_t rows[] = {1, 2, 3, 4, 5, 9, 40};
    int n_tables = 0;
    for (size_t ti = 0; ti < N_TABLES; ti++) {
        const slate__kernels *k = slate__kernels_by_name(g_tables[ti]);
        if (!k || !k->xq_plan[SLATE_DTYPE_PAL]) continue;
        n_tables++;
        for (size_t bi = 0; bi < 5; bi++)
            for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
                int64_t n_rows = rows[ri], n_in = 301;
                slate__wmat wm;
                slate__wmat_init(&wm, NULL, SLATE_DTYPE_PAL, slate__pal_layout(bits_all[bi], 16),
                                 false, 8, n_in);
                slate__xq_plan pl;
                if (!xq_split_matches(k, &wm, n_rows, &rng, &pl))
                    fail_msg("%s quantize_x pal%d rows=%lld: split by %d rows gives other bytes",
                             k->name, bits_all[bi], (long long)n_rows, pl.row_align);
                if (n_rows > 1)
                    assert_true(k->xq_plan[SLATE_DTYPE_PAL](&wm, n_rows - 1).bytes <= pl.bytes);
            }
    }
    if (!n_tables) {
        fprintf(stderr, "[  SKIP    ] no table here quantizes x for PAL\n");
        skip();
    }
}

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_decode_matches_the_documented_bit_layout),
        cmocka_unit_test(simd_matmul_matches_reference),
        cmocka_unit_test(quantize_x_gives_the_same_bytes_for_any_row_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
