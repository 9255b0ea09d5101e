/* test_quant_kernels.c - the matmul of the compressed weight formats (Q8_0; Q4 with blocks of
 * 16, 32, 64, 128, symmetric and asymmetric; Q8_C; Q2_K to Q6_K; IQ4_NL, IQ4_XS) of every SIMD
 * table this CPU supports ("avx2", x86/avx2_q.c and x86/avx2_k.c; "avx2_vnni", the same with
 * AVX-VNNI; "avx512_vnni", x86/avx512_vnni.c and x86/avx512_vnni_k.c; on AArch64 "neon" and
 * "neon_dotprod", arm/neon_q.c and arm/neon_k.c, which tests/kernels/neon_check.c also checks
 * under qemu; all quantize activations) against the scalar reference (kernels/ref/quant.c:
 * dequantize and dot in f32) on random weights from the reference quantizers and random x: one
 * block, odd block counts, partial x groups, many blocks; rows 1..13 and past the prefill tile;
 * output sub-ranges that do not start at 0; with and without bias; sizes past the prefill K
 * block (1024 on avx512_vnni) and column tile (32); the super-block formats and IQ4_NL at the
 * codes and scales that could overflow an integer product; no read past their weights (a guard
 * page behind them); formats that share an xq layout write the same bytes; Q4 B=32 and IQ4_NL
 * decode gives the same bits wherever in a 64-byte line the weights start; and on x that int8 holds exactly, where a quantizing table must be as close as an
 * f32 kernel (quant_matmul_is_exact_on_x_int8_holds). The "avx512" table shares avx2's
 * functions for these formats and is not run twice. The seed is printed once (tu_seed);
 * SLATE_TEST_SEED=<n> repeats a run. */
#include "kcheck.h"
#include "testutil.h"
#include "xqsplit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "core/core.h"
#include "kernels/kernels.h"

static const slate__kernels *table_or_skip(void **st) {
    const char *name = *st;
    const slate__kernels *k = slate__kernels_by_name(name);
    if (!k) {
        fprintf(stderr, "[  SKIP    ] kernel table '%s' not built or not supported here\n", name);
        skip();
    }
    return k;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

/* Random weights [n_out][n_in] in format f, quantized by the converter's reference quantizers
 * (values spread over a few magnitudes so blocks get different scales); the super-block formats
 * and IQ4_NL, which the converter only imports, get random stored bytes (kc_fill_qweights). */
static void *make_weights(const kc_qfmt *f, int64_t n_out, int64_t n_in, uint64_t *rng) {
    uint64_t bytes = slate__wmat_bytes(f->dt, f->block, f->asym, n_out, n_in);
    assert_true(bytes > 0);
    uint8_t *w = xmalloc((size_t)bytes);
    memset(w, 0, (size_t)bytes);
    float *row = xmalloc((size_t)n_in * sizeof(float));
    slate__wmat wm;
    slate__wmat_init(&wm, w, f->dt, f->block, f->asym, n_out, n_in);
    if (slate__wdtype_superblock(f->dt) || f->dt == SLATE_DTYPE_IQ4_NL) {
        kc_fill_qweights(w, &wm, rng);
        free(row);
        return w;
    }
    for (int64_t o = 0; o < n_out; o++) {
        for (int64_t i = 0; i < n_in; i++) {
            float s = (i / 32) % 3 == 0 ? 1.0f : (i / 32) % 3 == 1 ? 0.05f : 3.0f;
            row[i] = tu_randf(rng) * s + (f->asym ? 0.3f * s : 0.0f);
        }
        uint8_t *dst = w + (size_t)o * wm.row_bytes;
        if (f->dt == SLATE_DTYPE_Q8_0) assert_true(slate__quantize_q8_0(row, n_in, dst));
        else if (f->dt == SLATE_DTYPE_Q4) assert_true(slate__quantize_q4(row, n_in, f->block, f->asym, dst));
        else slate__quantize_q8_c_row(row, n_in, (int8_t *)dst, (float *)wm.scales + o);
    }
    free(row);
    return w;
}

/* Tolerance, per element: kc_matmul_q_bound (tests/kernels/kcheck.c, with its reason), 1e-5 of
 * mag = sum_i |w_i x_i| + |bias| for the order of summation, plus, where the table quantizes x
 * (xq_plan bytes > 0), the exact bound of x's int8 rounding, sum_i |w_i| dx(i) / 2. A lost block
 * of 16 or 32 products (a wrong lane, scale or tail) or the wrong x group exceeds it by orders
 * of magnitude. */
/* x that int8 holds exactly: per 128 inputs a power-of-two scale s (1/8 .. 4) times integers in
 * [-127, 127], every 16 inputs with one +-127 among them. A quantizer of any unit size that is
 * a multiple of 16 inside groups of 128 then finds dx = s and rounds nothing (127 / (127 s) and
 * every q s are exact in f32), so the product is as exact as an f32 one. */
static void fill_int8_x(float *x, int64_t n_rows, int64_t n_in, uint64_t *rng) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t g = 0; g < n_in; g += 128) {
            float s = ldexpf(1.0f, (int)(tu_rand(rng) % 6) - 3);
            for (int64_t i = g; i < n_in && i < g + 128; i++)
                x[r * n_in + i] = s * (float)((int)(tu_rand(rng) % 255) - 127);
            for (int64_t i = g; i < n_in && i < g + 128; i += 16) {
                int64_t n = n_in - i < 16 ? n_in - i : 16;
                x[r * n_in + i + (int64_t)(tu_rand(rng) % (uint64_t)n)] = tu_rand(rng) % 2 ? 127.0f * s : -127.0f * s;
            }
        }
}

/* int8_x: x from fill_int8_x, and the tolerance without the term for x's rounding. */
static void check_matmul_x(const slate__kernels *k, const slate__kernels *ref, const kc_qfmt *f,
                           int64_t n_rows, int64_t n_in, int64_t n_out, int64_t o0, int64_t o1,
                           bool with_bias, bool int8_x, uint64_t *rng) {
    char why[120];
    if (!slate__wlayout_check(f->dt, f->block, f->asym, n_in, why, sizeof why))
        fail_msg("test shape: %s n_in=%lld: %s", slate_dtype_name(f->dt), (long long)n_in, why);
    float *x = xmalloc((size_t)(n_rows * n_in) * sizeof(float));
    float *bias = xmalloc((size_t)n_out * sizeof(float));
    float *got = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    float *want = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    if (int8_x) fill_int8_x(x, n_rows, n_in, rng);
    else
        for (int64_t i = 0; i < n_rows * n_in; i++) x[i] = tu_randf(rng) * (i % 7 == 0 ? 4.0f : 1.0f);
    for (int64_t o = 0; o < n_out; o++) bias[o] = tu_randf(rng);
    void *w = make_weights(f, n_out, n_in, rng);
    slate__wmat wm;
    slate__wmat_init(&wm, w, f->dt, f->block, f->asym, n_out, n_in);
    const float sentinel = 12345.0f;
    for (int64_t i = 0; i < n_rows * n_out; i++) got[i] = want[i] = sentinel;

    /* Quantized x as exec makes it: in two row ranges split at a row_align multiple (the
     * ranges must not overlap or leave gaps), with a guard past the planned bytes. */
    void *xq = NULL;
    size_t xq_bytes = 0;
    if (k->xq_plan[f->dt]) {
        slate__xq_plan pl = k->xq_plan[f->dt](&wm, n_rows);
        xq_bytes = pl.bytes;
        if (xq_bytes) {
            assert_true(k->quantize_x[f->dt] != NULL);
            assert_true(pl.row_align >= 1);
            xq = xmalloc(xq_bytes + 64);
            memset(xq, 0xA5, xq_bytes + 64);
            int64_t mid = (n_rows / 2) / pl.row_align * pl.row_align;
            k->quantize_x[f->dt](xq, x, &wm, n_rows, 0, mid);
            k->quantize_x[f->dt](xq, x, &wm, n_rows, mid, n_rows);
            for (size_t i = xq_bytes; i < xq_bytes + 64; i++)
                if (((uint8_t *)xq)[i] != 0xA5) fail_msg("quantize_x wrote past its plan (%zu bytes)", xq_bytes);
        }
    }
    k->matmul[f->dt](got, x, xq, &wm, with_bias ? bias : NULL, n_rows, o0, o1);
    ref->matmul[f->dt](want, x, NULL, &wm, with_bias ? bias : NULL, n_rows, o0, o1);

    char what[200];
    snprintf(what, sizeof what, "%s matmul %s B=%d asym=%d rows=%lld n_in=%lld n_out=%lld "
             "o=[%lld,%lld) bias=%d%s", k->name, slate_dtype_name(f->dt), f->block, (int)f->asym,
             (long long)n_rows, (long long)n_in, (long long)n_out, (long long)o0, (long long)o1,
             (int)with_bias, int8_x ? " int8 x" : "");
    char detail[300] = "";
    if (kc_check_q_outputs(&wm, x, with_bias ? bias : NULL, got, want, sentinel, n_rows, o0, o1,
                           xq_bytes > 0 && !int8_x, detail, sizeof detail))
        fail_msg("%s: %s", what, detail);
    free(x);
    free(bias);
    free(got);
    free(want);
    free(w);
    free(xq);
}

static void check_matmul(const slate__kernels *k, const slate__kernels *ref, const kc_qfmt *f,
                         int64_t n_rows, int64_t n_in, int64_t n_out, int64_t o0, int64_t o1,
                         bool with_bias, uint64_t *rng) {
    check_matmul_x(k, ref, f, n_rows, n_in, n_out, o0, o1, with_bias, false, rng);
}

/* Row lengths for a format: 1 block, odd block counts, one group of 128 and a partial group
 * behind it, many blocks; Q8_C (no blocks) also odd lengths. */
static int64_t n_in_for(const kc_qfmt *f, int i) {
    static const int64_t q8c[] = {1, 7, 33, 64, 127, 128, 129, 300, 1000};
    static const int64_t mult[] = {1, 3, 5, 7, 8, 9, 13, 33, 0};
    if (f->dt == SLATE_DTYPE_Q8_C) return q8c[i];
    int64_t b = f->block;
    return mult[i] ? mult[i] * b : 4096 / b * b + b; /* last: many, with a partial group */
}

static void quant_matmul_matches_ref_for_every_format_and_shape(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x716d61746dull;
    static const int64_t rows[] = {1, 2, 3, 4, 5, 7, 8, 9, 13};
    for (size_t fi = 0; fi < KC_N_QFMTS; fi++)
        for (int a = 0; a < 9; a++)
            for (size_t b = 0; b < sizeof rows / sizeof *rows; b++) {
                const kc_qfmt *f = &kc_qfmts[fi];
                int64_t n_in = n_in_for(f, a);
                int64_t n_out = 1 + (int64_t)(tu_rand(&rng) % 40);
                int64_t o0 = n_out > 1 ? 1 + (int64_t)(tu_rand(&rng) % (uint64_t)(n_out - 1)) : 0;
                int64_t o1 = o0 + 1 + (int64_t)(tu_rand(&rng) % (uint64_t)(n_out - o0));
                bool with_bias = (a + b) % 2 == 0;
                check_matmul(k, ref, f, rows[b], n_in, n_out, o0, o1, with_bias, &rng);
                check_matmul(k, ref, f, rows[b], n_in, n_out, 0, n_out, !with_bias, &rng);
            }
}

/* Past the prefill blocking: several K blocks of 512 (partial sums added to y), several column
 * tiles of 16 with a partial one, several 8-row tiles with a partial one; decode with four
 * weight rows at a time and a tail. */
static void quant_matmul_matches_ref_across_cache_blocks(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x71626c6bull;
    for (size_t fi = 0; fi < KC_N_QFMTS; fi++) {
        int64_t b = kc_qfmts[fi].block ? kc_qfmts[fi].block : 1;
        int64_t n_in = (1280 + b) / b * b + (kc_qfmts[fi].block ? 0 : 3);
        check_matmul(k, ref, &kc_qfmts[fi], 19, n_in, 37, 3, 36, true, &rng);
        check_matmul(k, ref, &kc_qfmts[fi], 33, 2048, 50, 0, 50, false, &rng);
        check_matmul(k, ref, &kc_qfmts[fi], 1, 2048 + b, 70, 5, 69, true, &rng);
        check_matmul(k, ref, &kc_qfmts[fi], 3, (640 + b - 1) / b * b, 23, 0, 23, true, &rng);
    }
}

/* On x that int8 holds exactly (fill_int8_x) a table that quantizes x must be as close to ref
 * as an f32 kernel (1e-5 of sum |w x|, the order of summation): a wrong scale, code or minimum
 * then shows in every output, however small, not only beyond the bound of x's rounding. Shapes
 * of the avx512_vnni tiling (x86/avx512_vnni.c, avx512_vnni_k.c): decode of 1..3 rows (two
 * weight rows at a time and a single one), prefill past the 4-row register tile, the 8-row x
 * padding, K blocks of 1024 inputs (the last one partial: 10 super-blocks) and column tiles of
 * 32 (the last one 3 columns, so its second half has none); output ranges from o0 > 0. */
static void quant_matmul_is_exact_on_x_int8_holds(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x696e7438ull;
    static const int64_t rows[] = {1, 2, 3, 4, 5, 9, 13};
    for (size_t fi = 0; fi < KC_N_QFMTS; fi++) {
        const kc_qfmt *f = &kc_qfmts[fi];
        int64_t b = f->block ? f->block : 1;
        for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
            check_matmul_x(k, ref, f, rows[ri], 2560 / b * b + (f->block ? 0 : 5), 67, 1, 67,
                           ri % 2 == 0, true, &rng);
            check_matmul_x(k, ref, f, rows[ri], 256 / b * b, 9, 0, 9, ri % 2 != 0, true, &rng);
        }
    }
}

/* quantize_x is a per-row function: any split of the rows at row_align multiples, on any
 * number of calls, gives the same bytes (exec splits rows over threads). */
static void quantize_x_gives_the_same_bytes_for_any_row_split(void **st) {
    const slate__kernels *k = table_or_skip(st);
    uint64_t rng = tu_seed() ^ 0x73706c6974ull;
    for (size_t fi = 0; fi < KC_N_QFMTS; fi++) {
        const kc_qfmt *f = &kc_qfmts[fi];
        if (!k->xq_plan[f->dt]) continue;
        static const int64_t rows[] = {1, 3, 4, 9, 40};
        for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
            int64_t n_rows = rows[ri], n_in = f->block ? 9 * f->block : 301;
            slate__wmat wm;
            slate__wmat_init(&wm, NULL, f->dt, f->block, f->asym, 8, n_in);
            slate__xq_plan pl;
            if (!xq_split_matches(k, &wm, n_rows, &rng, &pl))
                fail_msg("%s quantize_x %s B=%d rows=%lld: split by %d rows gives other bytes",
                         k->name, slate_dtype_name(f->dt), f->block, (long long)n_rows,
                         pl.row_align);
            if (!pl.bytes) continue;
            /* The plan never shrinks as rows grow (exec reserves the plan of max_query). */
            if (n_rows > 1) assert_true(k->xq_plan[f->dt](&wm, n_rows - 1).bytes <= pl.bytes);
        }
    }
}

/* avx2_vnni is avx2_q.c and avx2_k.c with vpdpbusd for vpmaddubsw + vpmaddwd: the integer sums
 * are equal (no pair can saturate s16), so every output must be bit-identical to the avx2
 * table's. */
static void avx2_vnni_equals_avx2_bit_for_bit(void **st) {
    (void)st;
    const slate__kernels *a = slate__kernels_by_name("avx2"), *b = slate__kernels_by_name("avx2_vnni");
    if (!a || !b) {
        fprintf(stderr, "[  SKIP    ] avx2_vnni not built or not supported here\n");
        skip();
    }
    uint64_t rng = tu_seed() ^ 0x766e6e69ull;
    for (size_t fi = 0; fi < KC_N_QFMTS; fi++) {
        const kc_qfmt *f = &kc_qfmts[fi];
        /* Every format, the super-block ones (Q2_K to Q6_K: x86/avx2_k.c) included, has
         * its own integer kernel in both tables, on x quantized by avx2's quantizer. */
        if (!a->xq_plan[f->dt] || a->matmul[f->dt] == b->matmul[f->dt])
            fail_msg("%s B=%d asym=%d: avx2 and avx2_vnni do not run kernels of their own",
                     slate_dtype_name(f->dt), f->block, (int)f->asym);
        int64_t n_rows = 1 + (int64_t)(tu_rand(&rng) % 9), n_out = 21;
        int64_t n_in = f->dt == SLATE_DTYPE_Q8_C ? 333 : (f->block ? f->block : 32) * 11;
        float *x = xmalloc((size_t)(n_rows * n_in) * sizeof(float));
        for (int64_t i = 0; i < n_rows * n_in; i++) x[i] = tu_randf(&rng) * (i % 5 == 0 ? 9.0f : 1.0f);
        void *w = make_weights(f, n_out, n_in, &rng);
        slate__wmat wm;
        slate__wmat_init(&wm, w, f->dt, f->block, f->asym, n_out, n_in);
        slate__xq_plan pl = a->xq_plan[f->dt](&wm, n_rows);
        void *xq = xmalloc(pl.bytes);
        a->quantize_x[f->dt](xq, x, &wm, n_rows, 0, n_rows);
        float *ya = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
        float *yb = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
        a->matmul[f->dt](ya, x, xq, &wm, NULL, n_rows, 0, n_out);
        b->matmul[f->dt](yb, x, xq, &wm, NULL, n_rows, 0, n_out);
        assert_true(a->matmul[f->dt] != b->matmul[f->dt]);
        if (memcmp(ya, yb, (size_t)(n_rows * n_out) * sizeof(float)) != 0)
            fail_msg("%s B=%d asym=%d rows=%lld: avx2_vnni differs from avx2",
                     slate_dtype_name(f->dt), f->block, (int)f->asym, (long long)n_rows);
        free(x);
        free(w);
        free(xq);
        free(ya);
        free(yb);
    }
}

/* row_to_f32 (embedding lookups) of every weight dtype equals the reference dequantization. */
static void row_to_f32_matches_ref_dequantization(void **st) {
    const slate__kernels *k = table_or_skip(st);
    uint64_t rng = tu_seed() ^ 0x726f77ull;
    for (size_t fi = 0; fi < KC_N_QFMTS; fi++) {
        const kc_qfmt *f = &kc_qfmts[fi];
        int64_t n_out = 5, n_in = f->block ? 7 * f->block : 77;
        void *w = make_weights(f, n_out, n_in, &rng);
        slate__wmat wm;
        slate__wmat_init(&wm, w, f->dt, f->block, f->asym, n_out, n_in);
        float *got = xmalloc((size_t)(n_in + 1) * sizeof(float)), *want = xmalloc((size_t)n_in * sizeof(float));
        assert_true(k->row_to_f32[f->dt] != NULL);
        for (int64_t o = 0; o < n_out; o++) {
            got[n_in] = 777.0f;
            k->row_to_f32[f->dt](got, &wm, o);
            slate__ref_dequant(&wm, o, 0, n_in, want);
            assert_true(got[n_in] == 777.0f);
            assert_memory_equal(got, want, (size_t)n_in * sizeof(float));
        }
        free(w);
        free(got);
        free(want);
    }
}

/* One matmul of superblock_matmul_matches_ref_at_extreme_codes: rows [0, n_rows) of x. */
static void check_extreme(const slate__kernels *k, const slate__kernels *ref, const slate__wmat *wm,
                          const float *x, int64_t n_rows) {
    slate_dtype dt = wm->dtype;
    int64_t n_out = wm->n_out;
    float *got = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    float *want = xmalloc((size_t)(n_rows * n_out) * sizeof(float));
    const float sentinel = 12345.0f;
    for (int64_t i = 0; i < n_rows * n_out; i++) got[i] = want[i] = sentinel;
    void *xq = NULL;
    size_t xq_bytes = k->xq_plan[dt] ? k->xq_plan[dt](wm, n_rows).bytes : 0;
    if (xq_bytes) {
        xq = xmalloc(xq_bytes);
        k->quantize_x[dt](xq, x, wm, n_rows, 0, n_rows);
    }
    k->matmul[dt](got, x, xq, wm, NULL, n_rows, 0, n_out);
    ref->matmul[dt](want, x, NULL, wm, NULL, n_rows, 0, n_out);
    char detail[300] = "";
    if (kc_check_q_outputs(wm, x, NULL, got, want, sentinel, n_rows, 0, n_out, xq_bytes > 0,
                           detail, sizeof detail))
        fail_msg("%s matmul %s n_in=%lld rows=%lld at extreme codes: %s", k->name,
                 slate_dtype_name(dt), (long long)wm->n_in, (long long)n_rows, detail);
    free(got);
    free(want);
    free(xq);
}

/* The super-block formats at the magnitudes that could overflow an integer product: Q4_K with
 * every code 15 and every scale and minimum 63, or every code 0 under minimums 63; Q5_K the
 * same with every code 31 (every fifth bit set) or 0; Q6_K with every code 63 or every code 0
 * (|code - 32| up to 32) under scales -128 and 127; Q3_K with every code 3 or -4 (every third
 * bit set, or none) under scales -32 and 31; Q2_K with every code 3 or 0 under scale 15 with
 * minimum 15 or 0; IQ4_NL (blocks of 32) with every nibble 15 or 0 (levels 113 and -127, the
 * largest |level|); IQ4_XS the same under scales -32 and 31; against x of one magnitude (every
 * input rounds to +-127: the largest u8 x s8 pairs, 63 * 127 * 2 for Q6_K, 127 * 127 * 2 for
 * IQ4's |level| against x with the level's sign), of alternating sign, and random; one
 * super-block (8 IQ4_NL blocks) and many, rows across the 4-row tile (prefill) and by 1 to 3
 * (decode). A saturated s16 pair or a wrapped sum is off by far more than the bound. */
static void superblock_matmul_matches_ref_at_extreme_codes(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x6578747265ull;
    static const int64_t n_ins[] = {256, 256 * 9};
    static const slate_dtype dts[] = {SLATE_DTYPE_Q4_K, SLATE_DTYPE_Q5_K, SLATE_DTYPE_Q6_K,
                                      SLATE_DTYPE_Q3_K, SLATE_DTYPE_Q2_K, SLATE_DTYPE_IQ4_NL,
                                      SLATE_DTYPE_IQ4_XS};
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (size_t ni = 0; ni < sizeof n_ins / sizeof *n_ins; ni++) {
            slate_dtype dt = dts[di];
            int32_t block = slate__wdtype_superblock(dt) ? 256 : 32; /* IQ4_NL: 32 */
            int64_t n_in = n_ins[ni], n_out = 6, n_rows = 7;
            uint8_t *w = xmalloc((size_t)slate__wmat_bytes(dt, block, false, n_out, n_in));
            slate__wmat wm;
            slate__wmat_init(&wm, w, dt, block, false, n_out, n_in);
            kc_fill_qweights(w, &wm, &rng); /* random d (dmin), both signs; rows 4, 5 stay random */
            size_t bb = (size_t)wm.row_bytes / (size_t)(n_in / block);
            for (int64_t o = 0; o < 4; o++)
                for (int64_t b = 0; b < n_in / block; b++) {
                    uint8_t *blk = w + (size_t)o * wm.row_bytes + (size_t)b * bb;
                    uint8_t code = o % 2 ? 0x00 : 0xFF;
                    if (dt == SLATE_DTYPE_Q4_K || dt == SLATE_DTYPE_Q5_K) {
                        memset(blk + 4, 0xFF, 12); /* every scale and minimum 63 */
                        memset(blk + 16, code, bb - 16); /* Q5_K: qh and qs, codes 31 or 0 */
                    } else if (dt == SLATE_DTYPE_Q6_K) {
                        memset(blk, code, 192);    /* ql and qh: codes 63 or 0 */
                        memset(blk + 192, o < 2 ? 0x80 : 0x7F, 16); /* scales -128 or 127 */
                    } else if (dt == SLATE_DTYPE_Q3_K) {
                        memset(blk, code, 96);     /* hmask and qs: codes 3 or -4 */
                        memset(blk + 96, o < 2 ? 0x00 : 0xFF, 12); /* scales -32 or 31 */
                    } else if (dt == SLATE_DTYPE_IQ4_NL) {
                        memset(blk + 2, code, 16); /* every level 113 or -127; d keeps its sign */
                    } else if (dt == SLATE_DTYPE_IQ4_XS) {
                        memset(blk + 8, code, 128); /* every level 113 or -127 */
                        memset(blk + 2, o < 2 ? 0x00 : 0xFF, 6); /* every scale -32 or 31 */
                    } else {
                        memset(blk + 16, code, 64); /* qs: codes 3 or 0 */
                        memset(blk, o < 2 ? 0xFF : 0x0F, 16); /* scales 15, minimums 15 or 0 */
                    }
                }
            float *x = xmalloc((size_t)(n_rows * n_in) * sizeof(float));
            for (int64_t r = 0; r < n_rows; r++)
                for (int64_t i = 0; i < n_in; i++)
                    x[r * n_in + i] = r == 0 ? 2.5f : r == 1 ? -2.5f : r == 2 ? (i % 2 ? 1.0f : -1.0f)
                                    : r == 3 ? (i / 16 % 2 ? -3.0f : 3.0f) : tu_randf(&rng);
            /* all 7 rows (prefill), then rows 0-2, 3-5, 6 (decode) */
            static const int64_t parts[][2] = {{0, 7}, {0, 3}, {3, 3}, {6, 1}};
            for (size_t pi = 0; pi < sizeof parts / sizeof *parts; pi++)
                check_extreme(k, ref, &wm, x + parts[pi][0] * n_in, parts[pi][1]);
            free(w);
            free(x);
        }
}

/* The super-block formats' matmuls read no byte past the weights: kc_matmul_q places them so
 * that they end where a PROT_NONE page begins (a read past them faults). Q3_K's blocks of 110
 * bytes and Q2_K's of 84 are not 16-aligned, so a vector load of a block's last bytes (Q3_K's
 * scales and d, Q2_K's d and dmin) must not run into the next 16 bytes; IQ4_NL's blocks of 18
 * bytes (listed here for that reason) end in their nibbles, and they, Q4 B=32's and Q8_0's
 * (both also listed) are read a whole aligned 64-byte line at a time in avx512_vnni's decode;
 * the last block of the last row, decode (1-3 rows) and prefill (5 rows), one super-block and
 * several. */
static void superblock_matmul_reads_nothing_past_the_weights(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x6775617264ull;
    static const slate_dtype dts[] = {SLATE_DTYPE_Q4_K, SLATE_DTYPE_Q5_K, SLATE_DTYPE_Q6_K,
                                      SLATE_DTYPE_Q3_K, SLATE_DTYPE_Q2_K, SLATE_DTYPE_IQ4_NL,
                                      SLATE_DTYPE_IQ4_XS, SLATE_DTYPE_Q4, SLATE_DTYPE_Q8_0};
    static const int64_t rows[] = {1, 2, 3, 5};
    char problem[600];
    for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
        for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++)
            for (int64_t n_sb = 1; n_sb <= 3; n_sb += 2) {
                int64_t n_out = 3 + (int64_t)ri;
                int32_t block = slate__wdtype_superblock(dts[di]) ? 256 : 32; /* IQ4_NL: 32 */
                if (!kc_matmul_q(k, ref, dts[di], block, false, rows[ri], 256 * n_sb, n_out, 0,
                                 n_out, ri % 2 == 0, &rng, problem, sizeof problem))
                    fail_msg("%s", problem);
            }
}

/* A matmul's result does not depend on where its weights lie. avx512_vnni's decode of one x
 * row of Q4 (every block size, symmetric or not) and IQ4_NL rows of whole 128-input groups
 * (dec_q4_row) and of Q8_0 rows of whole groups (dec_q8_0_row) loads each 64-byte line of a
 * row once, aligned, with its permute indices shifted by the row's offset in its first line;
 * a group is 64 + adv bytes (adv 2 to 32: Q4 B=128 66 bytes ... B=16 asymmetric 96, Q8_0's
 * pair of blocks 68), so the row must start a multiple of adv into its line: a tensor at
 * another offset takes the general path, and so does a first or last row whose outer lines
 * would reach outside the tensor (one that does not start or end on a 64-byte boundary). Both
 * must give the same floats, bit for bit: the same weights are placed at every offset in a
 * line (the aligned path wherever adv divides it, the general path elsewhere), decode rows
 * 0..n_out and sub-ranges, and every result is compared with offset 1's (the general path;
 * checked against ref). Row lengths: one group, a row of
 * TinyLlama's attention and of its ffn_down, and 3 groups (rows 3 (64 + adv) bytes: row
 * offsets cycle through the line). A wrong index shift, a missed line or a wrong wrap gives
 * another group's bytes: results differ in most bits. */
static void row_decode_gives_the_same_bits_at_every_line_offset(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x6c696e65ull;
    static const struct { slate_dtype dt; int32_t block; bool asym; } fmts[] = {
        {SLATE_DTYPE_Q4, 32, false},  {SLATE_DTYPE_Q4, 32, true},  {SLATE_DTYPE_Q4, 16, false},
        {SLATE_DTYPE_Q4, 16, true},   {SLATE_DTYPE_Q4, 64, false}, {SLATE_DTYPE_Q4, 64, true},
        {SLATE_DTYPE_Q4, 128, false}, {SLATE_DTYPE_Q4, 128, true}, {SLATE_DTYPE_IQ4_NL, 32, false},
        {SLATE_DTYPE_Q8_0, 32, false}};
    static const int64_t n_ins[] = {128, 384, 2048, 5632};
    const int64_t n_out = 11;
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++)
        for (size_t ni = 0; ni < sizeof n_ins / sizeof *n_ins; ni++) {
            int64_t n_in = n_ins[ni];
            slate_dtype dt = fmts[fi].dt;
            slate__wmat wm;
            slate__wmat_init(&wm, NULL, dt, fmts[fi].block, fmts[fi].asym, n_out, n_in);
            size_t bytes = (size_t)slate__wmat_bytes(dt, fmts[fi].block, fmts[fi].asym, n_out, n_in);
            uint8_t *src = xmalloc(bytes), *buf;
            wm.data = src;
            kc_fill_qweights(src, &wm, &rng);
            buf = aligned_alloc(64, (bytes + 64 + 63) / 64 * 64);
            assert_non_null(buf);
            float *x = xmalloc((size_t)n_in * sizeof(float));
            for (int64_t i = 0; i < n_in; i++) x[i] = tu_randf(&rng) * (i % 5 == 0 ? 3.0f : 1.0f);
            void *xq = NULL;
            if (k->xq_plan[dt]) {
                slate__xq_plan pl = k->xq_plan[dt](&wm, 1);
                if (pl.bytes) {
                    xq = xmalloc(pl.bytes);
                    k->quantize_x[dt](xq, x, &wm, 1, 0, 1);
                }
            }
            float want[11], got[11], wref[11];
            /* offset 1: the general path (no layout's adv divides it); checked against ref */
            wm.data = buf + 1;
            memcpy(buf + 1, src, bytes);
            k->matmul[dt](want, x, xq, &wm, NULL, 1, 0, n_out);
            ref->matmul[dt](wref, x, NULL, &wm, NULL, 1, 0, n_out);
            char detail[300] = "";
            if (kc_check_q_outputs(&wm, x, NULL, want, wref, 12345.0f, 1, 0, n_out, xq != NULL,
                                   detail, sizeof detail))
                fail_msg("%s %s block %d%s n_in=%lld at offset 1: %s", k->name,
                         slate_dtype_name(dt), (int)fmts[fi].block, fmts[fi].asym ? " asym" : "",
                         (long long)n_in, detail);
            /* ranges a thread may get: all rows, the first alone, the last alone, the middle */
            static const int64_t ranges[][2] = {{0, 11}, {0, 1}, {10, 11}, {1, 10}, {3, 4}};
            for (int off = 0; off < 64; off++) {
                wm.data = buf + off;
                memcpy(buf + off, src, bytes);
                for (size_t ri = 0; ri < sizeof ranges / sizeof *ranges; ri++) {
                    int64_t o0 = ranges[ri][0], o1 = ranges[ri][1];
                    for (int64_t o = 0; o < n_out; o++) got[o] = 12345.0f;
                    k->matmul[dt](got, x, xq, &wm, NULL, 1, o0, o1);
                    for (int64_t o = 0; o < n_out; o++) {
                        float e = o >= o0 && o < o1 ? want[o] : 12345.0f;
                        if (memcmp(&got[o], &e, sizeof e) != 0)
                            fail_msg("%s %s block %d%s n_in=%lld rows [%lld,%lld): row %lld with "
                                     "the weights %d bytes into a line gave %.9g, %.9g at offset 1",
                                     k->name, slate_dtype_name(dt), (int)fmts[fi].block,
                                     fmts[fi].asym ? " asym" : "", (long long)n_in,
                                     (long long)o0, (long long)o1, (long long)o, off, got[o], e);
                    }
                }
            }
            free(src);
            free(buf);
            free(x);
            free(xq);
        }
}

/* Two formats whose plans name the same nonzero layout must write the same xq bytes, for decode
 * (1 row) and prefill (5 rows): exec quantizes x once for both (x86/avx2_k.c installs
 * avx2_q.c's quantizer for every super-block format; x86/avx512_vnni_k.c gives Q5_K Q4_K's x
 * and Q3_K and Q2_K Q6_K's, so a Q4_K_M, Q5_K_M or Q2_K q/k/v or gate/up with mixed formats
 * shares one xq there; a Q3_K_M one mixing Q3_K with Q4_K / Q5_K quantizes x twice; IQ4_NL
 * and IQ4_XS take x86/avx512_vnni.c's Q4 B=32 symmetric x). */
static void formats_sharing_an_xq_layout_write_the_same_bytes(void **st) {
    const slate__kernels *k = table_or_skip(st);
    uint64_t rng = tu_seed() ^ 0x73686172ull;
    int64_t n_in = 512 * 3;
    float *x = xmalloc((size_t)(5 * n_in) * sizeof(float));
    for (int64_t i = 0; i < 5 * n_in; i++) x[i] = tu_randf(&rng) * (i % 7 == 0 ? 4.0f : 1.0f);
    for (int64_t n_rows = 1; n_rows <= 5; n_rows += 4)
        for (size_t a = 0; a < KC_N_QFMTS; a++)
            for (size_t b = a + 1; b < KC_N_QFMTS; b++) {
                const kc_qfmt *fa = &kc_qfmts[a], *fb = &kc_qfmts[b];
                if (!k->xq_plan[fa->dt] || !k->xq_plan[fb->dt]) continue;
                slate__wmat wa, wb;
                slate__wmat_init(&wa, NULL, fa->dt, fa->block, fa->asym, 8, n_in);
                slate__wmat_init(&wb, NULL, fb->dt, fb->block, fb->asym, 8, n_in);
                slate__xq_plan pa = k->xq_plan[fa->dt](&wa, n_rows);
                slate__xq_plan pb = k->xq_plan[fb->dt](&wb, n_rows);
                if (!pa.bytes || pa.layout != pb.layout) continue;
                if (pa.bytes != pb.bytes)
                    fail_msg("%s rows=%lld: %s B=%d and %s B=%d share layout %#x with %zu and "
                             "%zu bytes", k->name, (long long)n_rows, slate_dtype_name(fa->dt),
                             fa->block, slate_dtype_name(fb->dt), fb->block, (unsigned)pa.layout,
                             pa.bytes, pb.bytes);
                uint8_t *qa = xmalloc(pa.bytes), *qb = xmalloc(pb.bytes);
                memset(qa, 0x11, pa.bytes);
                memset(qb, 0x22, pb.bytes);
                k->quantize_x[fa->dt](qa, x, &wa, n_rows, 0, n_rows);
                k->quantize_x[fb->dt](qb, x, &wb, n_rows, 0, n_rows);
                if (memcmp(qa, qb, pa.bytes) != 0)
                    fail_msg("%s rows=%lld: %s B=%d and %s B=%d share layout %#x but write other "
                             "bytes", k->name, (long long)n_rows, slate_dtype_name(fa->dt),
                             fa->block, slate_dtype_name(fb->dt), fb->block, (unsigned)pa.layout);
                free(qa);
                free(qb);
            }
    free(x);
}

/* The table runs its own super-block and IQ4_NL matmuls and row lookups, not ref's (the checks
 * above compare with ref, so a format left to ref's fallback would pass them unseen), with x
 * quantized; Q5_K takes Q4_K's x as it is and Q3_K and Q2_K take Q6_K's (x86/avx512_vnni_k.c; x86/avx2_k.c
 * shares avx2_q.c's x among all), so their plans name one layout of the same bytes, for decode
 * and prefill: a Q4_K / Q5_K mix, or a Q6_K / Q3_K / Q2_K one, shares one xq. */
static void superblock_formats_run_the_tables_own_kernels(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    static const slate_dtype dts[] = {SLATE_DTYPE_Q4_K, SLATE_DTYPE_Q6_K, SLATE_DTYPE_Q5_K,
                                      SLATE_DTYPE_Q3_K, SLATE_DTYPE_Q2_K, SLATE_DTYPE_IQ4_NL,
                                      SLATE_DTYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
        if (k->matmul[dts[i]] == ref->matmul[dts[i]] || !k->xq_plan[dts[i]] || !k->quantize_x[dts[i]])
            fail_msg("%s runs no kernel of its own for %s", k->name, slate_dtype_name(dts[i]));
        /* the embedding lookup too (row_to_f32_matches_ref_dequantization checks its values) */
        if (k->row_to_f32[dts[i]] == ref->row_to_f32[dts[i]])
            fail_msg("%s looks %s rows up with ref's row_to_f32", k->name,
                     slate_dtype_name(dts[i]));
    }
    for (int64_t n_rows = 1; n_rows <= 9; n_rows += 8) {
        slate__wmat w4, w5;
        slate__wmat_init(&w4, NULL, SLATE_DTYPE_Q4_K, 256, false, 8, 1024);
        slate__wmat_init(&w5, NULL, SLATE_DTYPE_Q5_K, 256, false, 8, 1024);
        slate__xq_plan p4 = k->xq_plan[SLATE_DTYPE_Q4_K](&w4, n_rows);
        slate__xq_plan p5 = k->xq_plan[SLATE_DTYPE_Q5_K](&w5, n_rows);
        if (p4.layout != p5.layout || p4.bytes != p5.bytes)
            fail_msg("%s rows=%lld: q5_k's x plan (layout %#x, %zu bytes) is not q4_k's (%#x, %zu)",
                     k->name, (long long)n_rows, (unsigned)p5.layout, p5.bytes,
                     (unsigned)p4.layout, p4.bytes);
        slate__wmat w6;
        slate__wmat_init(&w6, NULL, SLATE_DTYPE_Q6_K, 256, false, 8, 1024);
        slate__xq_plan p6 = k->xq_plan[SLATE_DTYPE_Q6_K](&w6, n_rows);
        static const slate_dtype k16[] = {SLATE_DTYPE_Q3_K, SLATE_DTYPE_Q2_K};
        for (size_t i = 0; i < sizeof k16 / sizeof *k16; i++) {
            slate_dtype dt = k16[i];
            slate__wmat wk;
            slate__wmat_init(&wk, NULL, dt, 256, false, 8, 1024);
            slate__xq_plan pk = k->xq_plan[dt](&wk, n_rows);
            if (pk.layout != p6.layout || pk.bytes != p6.bytes)
                fail_msg("%s rows=%lld: %s's x plan (layout %#x, %zu bytes) is not q6_k's (%#x, %zu)",
                         k->name, (long long)n_rows, slate_dtype_name(dt), (unsigned)pk.layout,
                         pk.bytes, (unsigned)p6.layout, p6.bytes);
        }
    }
}

/* avx512_vnni runs IQ4_NL and IQ4_XS kernels of its own (x86/avx512_vnni.c and
 * avx512_vnni_k.c: vpdpbusd on Q4 B=32 symmetric's x, whose plan both name, so an IQ4_XS file's
 * IQ4_NL fallback tensors share one xq with it), not only ref's or the avx2 ones the avx512
 * table inherits: the other checks compare with ref, so an inherited kernel would pass them
 * unseen. */
static void avx512_vnni_runs_its_own_iq4_kernels(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    const slate__kernels *a2 = slate__kernels_by_name("avx2");
    static const slate_dtype dts[] = {SLATE_DTYPE_IQ4_NL, SLATE_DTYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++)
        if (k->matmul[dts[i]] == ref->matmul[dts[i]] ||
            (a2 && k->matmul[dts[i]] == a2->matmul[dts[i]]))
            fail_msg("%s runs no %s matmul of its own", k->name, slate_dtype_name(dts[i]));
    for (int64_t n_rows = 1; n_rows <= 9; n_rows += 8) {
        slate__wmat wq, wn, wx;
        slate__wmat_init(&wq, NULL, SLATE_DTYPE_Q4, 32, false, 8, 1024);
        slate__wmat_init(&wn, NULL, SLATE_DTYPE_IQ4_NL, 32, false, 8, 1024);
        slate__wmat_init(&wx, NULL, SLATE_DTYPE_IQ4_XS, 256, false, 8, 1024);
        slate__xq_plan pq = k->xq_plan[SLATE_DTYPE_Q4](&wq, n_rows);
        slate__xq_plan pn = k->xq_plan[SLATE_DTYPE_IQ4_NL](&wn, n_rows);
        slate__xq_plan px = k->xq_plan[SLATE_DTYPE_IQ4_XS](&wx, n_rows);
        if (!pq.bytes || pq.layout != pn.layout || pq.bytes != pn.bytes)
            fail_msg("%s rows=%lld: iq4_nl's x plan (layout %#x, %zu bytes) is not q4 b32's (%#x, "
                     "%zu)", k->name, (long long)n_rows, (unsigned)pn.layout, pn.bytes,
                     (unsigned)pq.layout, pq.bytes);
        if (pn.layout != px.layout || pn.bytes != px.bytes)
            fail_msg("%s rows=%lld: iq4_xs's x plan (layout %#x, %zu bytes) is not iq4_nl's (%#x, "
                     "%zu)", k->name, (long long)n_rows, (unsigned)px.layout, px.bytes,
                     (unsigned)pn.layout, pn.bytes);
    }
}

/* The avx2 tables read one x for every super-block format (x86/avx2_k.c installs avx2_q.c's
 * quantizer for all of them, IQ4_XS included) and for IQ4_NL (avx2_q.c's own): a Q3_K_M (Q3_K
 * with Q4_K, Q5_K, Q6_K), Q2_K, IQ4_XS or IQ4_NL (with Q5_K, Q6_K, Q8_0) file's q/k/v and
 * gate/up share one xq only if
 * every format's plan names Q4_K's layout and bytes, for decode and prefill;
 * formats_sharing_an_xq_layout_write_the_same_bytes then checks the bytes agree. */
static void superblock_formats_share_one_x_plan(void **st) {
    const slate__kernels *k = table_or_skip(st);
    static const slate_dtype dts[] = {SLATE_DTYPE_Q5_K, SLATE_DTYPE_Q6_K, SLATE_DTYPE_Q3_K,
                                      SLATE_DTYPE_Q2_K, SLATE_DTYPE_IQ4_NL, SLATE_DTYPE_IQ4_XS};
    for (int64_t n_rows = 1; n_rows <= 9; n_rows += 8)
        for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
            slate__wmat w4, wd;
            slate__wmat_init(&w4, NULL, SLATE_DTYPE_Q4_K, 256, false, 8, 1024);
            slate__wmat_init(&wd, NULL, dts[i], slate__wdtype_superblock(dts[i]) ? 256 : 32, false,
                             8, 1024);
            if (!k->xq_plan[dts[i]])
                fail_msg("%s has no x plan for %s", k->name, slate_dtype_name(dts[i]));
            slate__xq_plan p4 = k->xq_plan[SLATE_DTYPE_Q4_K](&w4, n_rows);
            slate__xq_plan pd = k->xq_plan[dts[i]](&wd, n_rows);
            if (!p4.bytes || p4.layout != pd.layout || p4.bytes != pd.bytes)
                fail_msg("%s rows=%lld: %s's x plan (layout %#x, %zu bytes) is not q4_k's (%#x, "
                         "%zu)", k->name, (long long)n_rows, slate_dtype_name(dts[i]),
                         (unsigned)pd.layout, pd.bytes, (unsigned)p4.layout, p4.bytes);
        }
}

#define FOR_TABLE(f, name)                                                                         \
    { #f "/" name, f, NULL, NULL, (void *)name }

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        FOR_TABLE(quant_matmul_matches_ref_for_every_format_and_shape, "avx2"),
        FOR_TABLE(quant_matmul_matches_ref_for_every_format_and_shape, "avx2_vnni"),
        FOR_TABLE(quant_matmul_matches_ref_for_every_format_and_shape, "avx512_vnni"),
        FOR_TABLE(quant_matmul_matches_ref_for_every_format_and_shape, "neon"),
        FOR_TABLE(quant_matmul_matches_ref_for_every_format_and_shape, "neon_dotprod"),
        FOR_TABLE(quant_matmul_matches_ref_across_cache_blocks, "avx2"),
        FOR_TABLE(quant_matmul_matches_ref_across_cache_blocks, "avx2_vnni"),
        FOR_TABLE(quant_matmul_matches_ref_across_cache_blocks, "avx512_vnni"),
        FOR_TABLE(quant_matmul_matches_ref_across_cache_blocks, "neon"),
        FOR_TABLE(quant_matmul_matches_ref_across_cache_blocks, "neon_dotprod"),
        FOR_TABLE(quant_matmul_is_exact_on_x_int8_holds, "avx2"),
        FOR_TABLE(quant_matmul_is_exact_on_x_int8_holds, "avx2_vnni"),
        FOR_TABLE(quant_matmul_is_exact_on_x_int8_holds, "avx512_vnni"),
        FOR_TABLE(quant_matmul_is_exact_on_x_int8_holds, "neon"),
        FOR_TABLE(quant_matmul_is_exact_on_x_int8_holds, "neon_dotprod"),
        FOR_TABLE(quantize_x_gives_the_same_bytes_for_any_row_split, "avx2"),
        FOR_TABLE(quantize_x_gives_the_same_bytes_for_any_row_split, "avx2_vnni"),
        FOR_TABLE(quantize_x_gives_the_same_bytes_for_any_row_split, "avx512_vnni"),
        FOR_TABLE(quantize_x_gives_the_same_bytes_for_any_row_split, "neon"),
        FOR_TABLE(quantize_x_gives_the_same_bytes_for_any_row_split, "neon_dotprod"),
        FOR_TABLE(superblock_matmul_matches_ref_at_extreme_codes, "avx2"),
        FOR_TABLE(superblock_matmul_matches_ref_at_extreme_codes, "avx2_vnni"),
        FOR_TABLE(superblock_matmul_matches_ref_at_extreme_codes, "avx512_vnni"),
        FOR_TABLE(superblock_matmul_matches_ref_at_extreme_codes, "neon"),
        FOR_TABLE(superblock_matmul_matches_ref_at_extreme_codes, "neon_dotprod"),
        FOR_TABLE(superblock_matmul_reads_nothing_past_the_weights, "avx2"),
        FOR_TABLE(superblock_matmul_reads_nothing_past_the_weights, "avx2_vnni"),
        FOR_TABLE(superblock_matmul_reads_nothing_past_the_weights, "avx512_vnni"),
        FOR_TABLE(superblock_matmul_reads_nothing_past_the_weights, "neon"),
        FOR_TABLE(superblock_matmul_reads_nothing_past_the_weights, "neon_dotprod"),
        FOR_TABLE(formats_sharing_an_xq_layout_write_the_same_bytes, "avx2"),
        FOR_TABLE(formats_sharing_an_xq_layout_write_the_same_bytes, "avx2_vnni"),
        FOR_TABLE(formats_sharing_an_xq_layout_write_the_same_bytes, "avx512_vnni"),
        FOR_TABLE(formats_sharing_an_xq_layout_write_the_same_bytes, "neon"),
        FOR_TABLE(formats_sharing_an_xq_layout_write_the_same_bytes, "neon_dotprod"),
        FOR_TABLE(superblock_formats_run_the_tables_own_kernels, "avx2"),
        FOR_TABLE(superblock_formats_run_the_tables_own_kernels, "avx2_vnni"),
        FOR_TABLE(superblock_formats_run_the_tables_own_kernels, "avx512_vnni"),
        FOR_TABLE(avx512_vnni_runs_its_own_iq4_kernels, "avx512_vnni"),
        FOR_TABLE(row_decode_gives_the_same_bits_at_every_line_offset, "avx2"),
        FOR_TABLE(row_decode_gives_the_same_bits_at_every_line_offset, "avx512_vnni"),
        FOR_TABLE(row_decode_gives_the_same_bits_at_every_line_offset, "neon_dotprod"),
        FOR_TABLE(superblock_formats_share_one_x_plan, "avx2"),
        FOR_TABLE(superblock_formats_share_one_x_plan, "avx2_vnni"),
        cmocka_unit_test(avx2_vnni_equals_avx2_bit_for_bit),
        FOR_TABLE(row_to_f32_matches_ref_dequantization, "ref"),
        FOR_TABLE(row_to_f32_matches_ref_dequantization, "avx2"),
        FOR_TABLE(row_to_f32_matches_ref_dequantization, "avx512_vnni"),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
