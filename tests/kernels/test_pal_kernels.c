/* test_pal_kernels.c - palettized weights (dtype PAL, kernels/quant.h): the reference decode
 * against an independent bit-by-bit reading of the format, and the matmul of every SIMD table
 * this CPU supports against the scalar reference (kernels/ref/quant.c) on random indices and
 * random f16 tables: bits 2, 3, 4, 6, 8; rows of 1, 15, 16, 17, 31, 33, 255, 257, 1000
 * elements (tails that are not a whole 16 and odd byte counts); groups of 1, 3, 16 and 64 rows
 * with a partial last group; 1..5 and 13 query rows; output sub-ranges that do not start at 0;
 * with and without bias. The seed is printed once (tu_seed); SLATE_TEST_SEED=<n> repeats it. */
#include "testutil.h"

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
 * in [-1, 1). idx_out (may be NULL) receives the indices [n_out][n_in]. */
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
    for (int64_t j = 0; j < n_lut; j++)
        ((uint16_t *)wm.lut)[j] = slate__f32_to_f16(tu_randf(rng));
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

static double rel_err(const float *a, const float *b, int64_t n, double *max_abs) {
    double num = 0, den = 0;
    *max_abs = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
        if (fabs(d) > *max_abs) *max_abs = fabs(d);
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void simd_matmul_matches_reference(void **st) {
    (void)st;
    const slate__kernels *ref = slate__kernels_by_name("ref");
    static const char *const names[] = {"avx2", "avx512", "avx512_vnni"};
    static const int32_t bits_all[] = {2, 3, 4, 6, 8};
    static const int64_t n_ins[] = {1, 15, 16, 17, 31, 33, 255, 257, 1000};
    static const int32_t groups[] = {1, 3, 16, 64};
    static const int64_t rows_all[] = {1, 2, 3, 5, 13};
    uint64_t seed = tu_seed(), rng = seed ^ 0x5a17;
    int n_tables = 0;
    for (size_t ti = 0; ti < 3; ti++) {
        const slate__kernels *k = slate__kernels_by_name(names[ti]);
        if (!k) continue;
        n_tables++;
        for (size_t bi = 0; bi < 5; bi++)
            for (size_t ni = 0; ni < sizeof n_ins / sizeof n_ins[0]; ni++)
                for (size_t gi = 0; gi < 4; gi++) {
                    int32_t bits = bits_all[bi], group = groups[gi];
                    int64_t n_in = n_ins[ni];
                    int64_t n_out = 1 + (int64_t)(tu_rand(&rng) % 70); /* partial last group */
                    int64_t n_rows = rows_all[tu_rand(&rng) % 5];
                    uint8_t *w = make_pal(bits, group, n_out, n_in, &rng, NULL);
                    slate__wmat wm;
                    slate__wmat_init(&wm, w, SLATE_DTYPE_PAL, slate__pal_layout(bits, group),
                                     false, n_out, n_in);
                    float *x = xmalloc((size_t)(n_rows * n_in) * sizeof(float));
                    float *bias = xmalloc((size_t)n_out * sizeof(float));
                    float *y0 = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
                    float *y1 = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
                    for (int64_t i = 0; i < n_rows * n_in; i++) x[i] = tu_randf(&rng);
                    for (int64_t i = 0; i < n_out; i++) bias[i] = tu_randf(&rng);
                    bool use_bias = tu_rand(&rng) & 1;
                    int64_t o0 = n_out > 1 ? (int64_t)(tu_rand(&rng) % (uint64_t)(n_out / 2 + 1)) : 0;
                    for (int64_t i = 0; i < n_rows * n_out; i++) y0[i] = y1[i] = -7.0f;
                    ref->matmul[SLATE_DTYPE_PAL](y0, x, NULL, &wm, use_bias ? bias : NULL, n_rows,
                                                 o0, n_out);
                    k->matmul[SLATE_DTYPE_PAL](y1, x, NULL, &wm, use_bias ? bias : NULL, n_rows,
                                               o0, n_out);
                    /* Columns outside [o0, n_out) stay untouched; inside, both sum the same
                     * f32 products in different orders: |error| grows like eps * sqrt(n) * the
                     * sum of |products| (<= n here); 1e-5 relative and 1e-4 * n absolute is
                     * ~10x the worst seen and far below a wrong index or table (~1). */
                    for (int64_t r = 0; r < n_rows; r++)
                        for (int64_t o = 0; o < o0; o++)
                            assert_true(y1[r * n_out + o] == -7.0f);
                    double max_abs;
                    double e = rel_err(y1, y0, n_rows * n_out, &max_abs);
                    if (!(e <= 1e-5) || !(max_abs <= 1e-4 * (double)n_in))
                        fail_msg("%s: bits %d group %d [%lld][%lld] rows %lld o0 %lld bias %d: "
                                 "rel err %.3g max abs %.3g (seed %llu)", k->name, bits, group,
                                 (long long)n_out, (long long)n_in, (long long)n_rows,
                                 (long long)o0, (int)use_bias, e, max_abs,
                                 (unsigned long long)seed);
                    free(w);
                    free(x);
                    free(bias);
                    free(y0);
                    free(y1);
                }
    }
    if (!n_tables) {
        fprintf(stderr, "[  SKIP    ] no SIMD kernel table on this CPU\n");
        skip();
    }
}

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_decode_matches_the_documented_bit_layout),
        cmocka_unit_test(simd_matmul_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
