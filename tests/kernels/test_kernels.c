/* test_kernels.c - every SIMD kernel table this CPU supports ("avx2", "avx2_vnni", "avx512", "avx512_vnni",
 * "neon") against the scalar reference ("ref", kernels/ref/ref.c) on random data and random
 * shapes: sizes of 1, odd sizes, tails of every length, sizes past the variants' cache blocks,
 * sub-ranges of outputs that do not start at 0, with and without bias, masks with -inf, F32,
 * F16 and int8 caches; and each table's vector tanh (softcap with cap 1) on a sweep over every kind of
 * float. A table the CPU lacks is skipped. This file picks the shapes; each case and its
 * tolerance are in kcheck.c, shared with neon_check.c. The seed is printed once (tu_seed);
 * SLATE_TEST_SEED=<n> repeats a run. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "kcheck.h"
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

/* Fails the test with the first problem of a kc_* case (kcheck.h). */
static void require(bool ok, const char *problem) {
    if (!ok) fail_msg("%s", problem);
}

/* ---- matmul ------------------------------------------------------------------------------ */

static void matmul_matches_ref_for_every_dtype_and_shape(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x6d61746d756cull;
    char problem[512];
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
                require(kc_matmul(k, ref, (slate_dtype)dt, n_rowss[b], n_ins[a], n_out, o0, o1,
                                  with_bias, &rng, problem, sizeof problem),
                        problem);
                require(kc_matmul(k, ref, (slate_dtype)dt, n_rowss[b], n_ins[a], n_out, 0, n_out,
                                  !with_bias, &rng, problem, sizeof problem),
                        problem);
            }
}

/* Shapes past the variants' cache blocks (128 rows, 512 inputs, 16 outputs), so several row,
 * K and output blocks and their partial sums are exercised, and a decode row longer than 4096
 * inputs. */
static void matmul_matches_ref_across_cache_blocks(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x626c6f636b73ull;
    char problem[512];
    for (int dt = SLATE_DTYPE_F32; dt <= SLATE_DTYPE_BF16; dt++) {
        slate_dtype t = (slate_dtype)dt;
        require(kc_matmul(k, ref, t, 131, 1030, 37, 3, 36, true, &rng, problem, sizeof problem),
                problem);
        require(kc_matmul(k, ref, t, 6, 1536, 50, 0, 50, false, &rng, problem, sizeof problem),
                problem);
        require(kc_matmul(k, ref, t, 1, 2053, 70, 5, 69, true, &rng, problem, sizeof problem),
                problem);
        /* decode of rows past avx512.c's PF_LONG_N_IN (4096), which prefetch further ahead */
        require(kc_matmul(k, ref, t, 1, 5635, 13, 2, 13, false, &rng, problem, sizeof problem),
                problem);
    }
}

/* ---- to_f32 ------------------------------------------------------------------------------ */

/* Every one of the 65536 bit patterns, at every tail length, must give the same bits. */
static void to_f32_is_exact_for_every_half_value(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    char problem[512];
    static const int64_t lens[] = {65536, 65535, 1, 2, 7, 15, 16, 17, 31, 33};
    for (int dt = SLATE_DTYPE_F16; dt <= SLATE_DTYPE_BF16; dt++)
        for (size_t c = 0; c < sizeof lens / sizeof *lens; c++)
            require(kc_to_f32(k, ref, (slate_dtype)dt, lens[c], problem, sizeof problem), problem);
}

/* ---- to_f16 ------------------------------------------------------------------------------ */

/* Ties, overflow, subnormals and a sweep (kc_to_f16), at tails of every length. */
static void to_f16_rounds_as_ref_for_every_kind_of_float(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    char problem[512];
    static const int64_t lens[] = {KC_TO_F16_N, KC_TO_F16_N - 1, 1, 2, 3, 7, 8, 9, 15, 17, 33};
    for (size_t c = 0; c < sizeof lens / sizeof *lens; c++)
        require(kc_to_f16(k, ref, lens[c], problem, sizeof problem), problem);
}

/* ---- attention --------------------------------------------------------------------------- */

/* Cache rows stride elements apart: hd (packed) up to 4 hd, plus 0 to 2 so rows are not
 * vector-aligned. */
static int64_t random_stride(int64_t hd, uint64_t *rng) {
    return hd + (int64_t)(tu_rand(rng) % 4) * hd + (int64_t)(tu_rand(rng) % 3);
}

static void attention_matches_ref_for_every_head_dim_and_range(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x6174746eull;
    char problem[512];
    static const int64_t hds[] = {1, 5, 8, 16, 63, 64, 128, 200, 512};
    static const int64_t lens[] = {0, 1, 2, 7, 8, 9, 17, 100, 333};
    for (int kvt = SLATE_DTYPE_F32; kvt <= SLATE_DTYPE_F16; kvt++)
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t b = 0; b < sizeof lens / sizeof *lens; b++)
                for (int mk = KC_MASK_NONE; mk <= KC_MASK_SOME_INF; mk++) {
                    int64_t j0 = (int64_t)(tu_rand(&rng) % 5);
                    /* 1/sqrt(hd) is the usual scale; larger ones give peaked softmaxes whose
                     * running maximum changes often. */
                    float scale = (1.0f + 7.0f * (float)(tu_rand(&rng) % 2)) / sqrtf((float)hds[a]);
                    /* Every group size of one pass of the variants (1-8 heads: the P x V
                     * tiles are specialized per count), and more than one pass (9, 13). */
                    static const int64_t heads[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13};
                    int64_t nh = heads[(a + b + (size_t)mk + (size_t)kvt) % 10];
                    int64_t stride = random_stride(hds[a], &rng);
                    require(kc_attention(k, ref, (slate_dtype)kvt, hds[a], nh, stride, j0,
                                         j0 + lens[b], scale, 0.0f, (kc_mask)mk, &rng, problem,
                                         sizeof problem),
                            problem);
                }
}

/* attention_i8 (an int8 cache) against ref's: head dims with tails, every group size of a pass
 * and more than one pass, ranges incl. empty ones, every kind of mask, the score cap on every
 * other case; rows side by side (the head-major cache) or not (kc_attention_i8_at). */
static void attention_i8_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x6938ull;
    char problem[512];
    static const int64_t hds[] = {1, 7, 16, 17, 64, 80, 128};
    static const int64_t lens[] = {0, 1, 15, 16, 17, 40, 100};
    static const int64_t heads[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13};
    for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
        for (size_t b = 0; b < sizeof lens / sizeof *lens; b++)
            for (int mk = KC_MASK_NONE; mk <= KC_MASK_ALL_INF; mk++)
                require(kc_attention_i8_at(k, ref, hds[a], heads[(a + b + (size_t)mk) % 10],
                                           lens[b], (kc_mask)mk, (a + b) % 2, &rng, problem,
                                           sizeof problem),
                        problem);
}

/* Rows side by side (stride = head_dim: the head-major cache) at the head dims with their own
 * path in the avx512 kernel (64, 128: blocks addressed from their first row) must give the same
 * bits as the same values strided (the general path, 16 row pointers per block): both compute
 * the same products in the same order. Ranges of whole blocks, with a partial one at either
 * end, masks with -inf (blocks whose rows are not all used), every head count of a pass and
 * more than one pass. And both within tolerance of ref (kc_attention at stride = head_dim). */
static void attention_packed_rows_give_the_bits_of_strided_rows(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x7061636bull;
    char problem[512];
    static const int64_t hds[] = {64, 128};
    static const struct { int64_t j0, j1; } ranges[] = {{0, 16}, {0, 64}, {3, 50}, {0, 333}, {5, 200}};
    static const int64_t heads[] = {1, 3, 8, 9};
    for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
        for (size_t b = 0; b < sizeof ranges / sizeof *ranges; b++)
            for (size_t c = 0; c < sizeof heads / sizeof *heads; c++) {
                int64_t hd = hds[a], nh = heads[c], j0 = ranges[b].j0, j1 = ranges[b].j1;
                int64_t wide = hd + 16; /* the strided copy's row stride */
                uint16_t *kp = test_malloc((size_t)(j1 * hd) * 2), *vp = test_malloc((size_t)(j1 * hd) * 2);
                uint16_t *ks = test_malloc((size_t)(j1 * wide) * 2), *vs = test_malloc((size_t)(j1 * wide) * 2);
                float *q = test_malloc((size_t)(nh * hd) * sizeof(float)), *mask = NULL;
                float *op = test_malloc((size_t)(nh * hd) * sizeof(float));
                float *os = test_malloc((size_t)(nh * hd) * sizeof(float));
                for (int64_t j = 0; j < j1; j++)
                    for (int64_t d = 0; d < hd; d++) {
                        ks[j * wide + d] = kp[j * hd + d] = slate__f32_to_f16(2.0f * kc_randf(&rng));
                        vs[j * wide + d] = vp[j * hd + d] = slate__f32_to_f16(kc_randf(&rng));
                    }
                for (int64_t i = 0; i < nh * hd; i++) q[i] = 3.0f * kc_randf(&rng);
                if (c % 2) { /* a third of the positions masked out */
                    mask = test_malloc((size_t)j1 * sizeof(float));
                    for (int64_t j = 0; j < j1; j++)
                        mask[j] = kc_randf(&rng) < -0.33f ? -INFINITY : kc_randf(&rng);
                }
                float scale = 1.0f / sqrtf((float)hd);
                k->attention(op, q, kp, vp, SLATE_DTYPE_F16, hd, j0, j1, hd, nh, 1, 0, scale, 0.0f,
                             mask);
                k->attention(os, q, ks, vs, SLATE_DTYPE_F16, wide, j0, j1, hd, nh, 1, 0, scale,
                             0.0f, mask);
                for (int64_t i = 0; i < nh * hd; i++)
                    if (memcmp(&op[i], &os[i], sizeof(float)))
                        fail_msg("%s attention hd=%lld heads=%lld j=[%lld,%lld) mask=%s: out[%lld] "
                                 "= %.9g with rows side by side, %.9g strided",
                                 k->name, (long long)hd, (long long)nh, (long long)j0,
                                 (long long)j1, mask ? "some -inf" : "none", (long long)i,
                                 (double)op[i], (double)os[i]);
                require(kc_attention(k, ref, SLATE_DTYPE_F16, hd, nh, hd, j0, j1, scale, 0.0f,
                                     c % 2 ? KC_MASK_SOME_INF : KC_MASK_NONE, &rng, problem,
                                     sizeof problem),
                        problem);
                test_free(kp), test_free(vp), test_free(ks), test_free(vs);
                test_free(q), test_free(op), test_free(os);
                if (mask) test_free(mask);
            }
}

/* K stored dim-major in blocks of 16 (attention_k16, the AVX-512 tables; kernels.h): the bits
 * of the rows when the range starts on a block, ref's results within tolerance when it does not
 * (a first block with dead lanes below j0), partial last blocks, every head count of a pass and
 * more than one pass, masks with -inf and NaN or all -inf, the score cap; the positions outside
 * the range hold 30 and +inf (kc_attention_k16). */
static void attention_k16_gives_the_bits_of_rows(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    if (!k->attention_k16) {
        if (strncmp(k->name, "avx512", 6) == 0) fail_msg("%s has no attention_k16", k->name);
        fprintf(stderr, "[  SKIP    ] %s has no attention_k16 (AVX-512 tables only)\n", k->name);
        skip();
    }
    uint64_t rng = tu_seed() ^ 0x6b3136ull;
    char problem[512];
    static const int64_t hds[] = {64, 128};
    static const struct { int64_t j0, j1; } ranges[] = {
        {0, 0}, {0, 1},  {0, 16}, {0, 17},  {0, 64},  {16, 200},
        {0, 333}, {3, 50}, {5, 16}, {17, 18}, {31, 97}};
    static const int64_t heads[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13};
    int i = 0;
    for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
        for (size_t b = 0; b < sizeof ranges / sizeof *ranges; b++)
            for (int mk = KC_MASK_NONE; mk <= KC_MASK_ALL_INF; mk++, i++) {
                int64_t nh = heads[(size_t)i % 10];
                float scale = (1.0f + 7.0f * (float)(i % 2)) / sqrtf((float)hds[a]);
                float cap = i % 3 == 2 ? 2.0f : 0.0f;
                require(kc_attention_k16(k, ref, hds[a], nh, ranges[b].j0, ranges[b].j1, scale,
                                         cap, (kc_mask)mk, &rng, problem, sizeof problem),
                        problem);
            }
}

/* A prefill's consecutive rows in one call (kernels.h: n_rows, window; exec batches them where
 * a kv head has fewer query heads than a pass serves): every cache kind (f32, f16 and int8
 * rows, and K16 where the table has it), head dims with and without their own paths, groups of
 * 1-8 heads per kv head, 1-8 rows (so passes of fewer and more than 8 heads, rows split across
 * passes), ranges from the shortest allowed (each row one position more than the last) to
 * several blocks, starting at 0 or not; no window, or one of 1 to 40 positions (each row's own
 * start, some inside the first block, some past it) on every other case; the score cap on
 * every third. Against ref row by row (kc_attention_rows). */
static void attention_rows_match_ref_row_by_row(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x726f7773ull;
    char problem[512];
    static const int64_t hds[] = {64, 128, 96, 13, 80};
    static const int64_t groups[] = {1, 2, 3, 4, 8};
    static const int64_t extra[] = {0, 1, 14, 40, 150};
    int i = 0;
    for (int kind = 0; kind < 4; kind++) /* f32, f16, int8 rows; K16 */
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
                for (size_t e = 0; e < sizeof extra / sizeof *extra; e++, i++) {
                    bool k16 = kind == 3;
                    if (k16 && (!k->attention_k16 || (hds[a] != 64 && hds[a] != 128))) continue;
                    slate_dtype kvt = kind == 0   ? SLATE_DTYPE_F32
                                      : kind == 2 ? SLATE_DTYPE_I8
                                                  : SLATE_DTYPE_F16;
                    int64_t rows = 1 + (int64_t)(tu_rand(&rng) % 8);
                    int64_t j0 = (int64_t)(tu_rand(&rng) % 2) * 3;
                    int64_t window = i % 2 ? 1 + (int64_t)(tu_rand(&rng) % 40) : 0;
                    float cap = i % 3 == 2 ? 2.0f : 0.0f;
                    require(kc_attention_rows(k, ref, kvt, k16, hds[a], groups[g], rows, window,
                                              j0, j0 + rows + extra[e], cap, &rng, problem,
                                              sizeof problem),
                            problem);
                }
}

/* transpose16 (K16 blocks to and from rows) moves every 16-bit value to its place and nothing
 * else: random values, strides of 16 (a K16 block) and wider ones, odd ones (rows not
 * vector-aligned); the bytes around the 16 x 16 tile stay as they were. */
static void transpose16_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x747231366ull;
    static const int64_t strides[] = {16, 17, 64, 65, 128, 256, 1000};
    for (size_t a = 0; a < sizeof strides / sizeof *strides; a++)
        for (size_t b = 0; b < sizeof strides / sizeof *strides; b++) {
            int64_t ss = strides[a], ds = strides[b], n = 16 * (ss > ds ? ss : ds) + 1;
            uint16_t *src = test_malloc((size_t)n * 2), *got = test_malloc((size_t)n * 2),
                     *want = test_malloc((size_t)n * 2);
            for (int64_t i = 0; i < n; i++) {
                src[i] = (uint16_t)tu_rand(&rng);
                got[i] = want[i] = (uint16_t)tu_rand(&rng);
            }
            k->transpose16(got + 1, ds, src + 1, ss); /* + 1: not vector-aligned */
            ref->transpose16(want + 1, ds, src + 1, ss);
            for (int64_t i = 0; i < n; i++)
                if (got[i] != want[i])
                    fail_msg("%s transpose16 src stride %lld, dst stride %lld: element %lld is "
                             "0x%04x, ref 0x%04x", k->name, (long long)ss, (long long)ds,
                             (long long)i, got[i], want[i]);
            for (int64_t d = 0; d < 16; d++) /* and ref is the transpose */
                for (int64_t t = 0; t < 16; t++)
                    assert_int_equal(want[1 + d * ds + t], src[1 + t * ss + d]);
            test_free(src), test_free(got), test_free(want);
        }
}

static void attention_with_every_score_masked_is_zero(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x7a65726full;
    char problem[512];
    /* {heads, j0, j1, mask}: an empty range, then every score masked in a short and a long one */
    static const struct { int64_t nh, j0, j1; kc_mask mk; } cases[] = {
        {1, 3, 3, KC_MASK_NONE}, {4, 2, 3, KC_MASK_ALL_INF}, {9, 1, 40, KC_MASK_ALL_INF}};
    for (int kvt = SLATE_DTYPE_F32; kvt <= SLATE_DTYPE_F16; kvt++)
        for (int64_t hd = 1; hd <= 130; hd += 43)
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
                int64_t stride = random_stride(hd, &rng);
                require(kc_attention(k, ref, (slate_dtype)kvt, hd, cases[c].nh, stride,
                                     cases[c].j0, cases[c].j1, 0.125f, 0.0f, cases[c].mk, &rng,
                                     problem, sizeof problem),
                        problem);
            }
}

/* The reference itself (the specification the variants are held to): one head, hd 2, three
 * positions, against softmax(cap * tanh(scale q.k / cap) + mask) v written out here. The mask's
 * -1 on position 1 is added after the cap (added before it, it would be squashed by tanh). */
static void ref_attention_caps_scores_before_the_mask(void **st) {
    (void)st;
    const slate__kernels *ref = slate__kernels_by_name("ref");
    const float q[2] = {1.0f, 2.0f}, k[6] = {3.0f, 1.0f, -1.0f, 2.0f, 0.5f, -0.5f};
    const float v[6] = {1.0f, 0.0f, 0.0f, 1.0f, 2.0f, -2.0f}, mask[3] = {0.0f, -1.0f, 0.0f};
    const float scale = 0.5f, cap = 1.5f;
    double s[3], w[3], sum = 0.0, want[2] = {0.0, 0.0};
    for (int j = 0; j < 3; j++) {
        s[j] = cap * tanh(scale * (q[0] * k[2 * j] + q[1] * k[2 * j + 1]) / cap) + mask[j];
        sum += (w[j] = exp(s[j]));
    }
    for (int j = 0; j < 3; j++)
        for (int d = 0; d < 2; d++) want[d] += w[j] / sum * v[2 * j + d];
    float out[2], plain[2];
    ref->attention(out, q, k, v, SLATE_DTYPE_F32, 2, 0, 3, 2, 1, 1, 0, scale, cap, mask);
    ref->attention(plain, q, k, v, SLATE_DTYPE_F32, 2, 0, 3, 2, 1, 1, 0, scale, 0.0f, mask);
    for (int d = 0; d < 2; d++) assert_float_equal(out[d], want[d], 1e-6);
    /* the cap matters in this case: uncapped, out[1] moves from -0.068 to 0.006 */
    assert_true(fabsf(plain[1] - out[1]) > 5e-2f);
}

/* Gemma 2's score cap (cap * tanh(s / cap) after the scale, before the mask) on every variant:
 * odd head dims and ranges, masks with -inf and NaN, every score masked, GQA groups across a
 * pass. Caps of 0.5 and 2 with scales up to 8 / sqrt(hd) (scores of a few units) so the cap
 * bends most scores, through both branches of the variants' vector tanh (|s| / cap below and
 * above 0.625) and into saturation. Tolerance: kcheck's ATTN_TOL, as uncapped: tanh has slope
 * <= 1, so it does not enlarge the variants' dot-product rounding, and their tanh is within
 * 8.1e-8 absolute of tanh (tanh_is_within_its_bounds_over_every_kind_of_float), so a score
 * moves by at most cap * 1.6e-7 more and a softmax weight by twice that relative: 6e-7 at cap
 * 2, fifty times below ATTN_TOL. */
static void attention_with_softcap_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x63617073ull;
    char problem[512];
    static const int64_t hds[] = {1, 5, 16, 63, 64, 128, 200};
    static const int64_t lens[] = {0, 1, 7, 9, 17, 100};
    static const int64_t heads[] = {1, 3, 8, 9};
    static const float caps[] = {0.5f, 2.0f};
    for (int kvt = SLATE_DTYPE_F32; kvt <= SLATE_DTYPE_F16; kvt++)
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t b = 0; b < sizeof lens / sizeof *lens; b++)
                for (int mk = KC_MASK_NONE; mk <= KC_MASK_ALL_INF; mk++) {
                    int64_t j0 = (int64_t)(tu_rand(&rng) % 5);
                    float scale = (1.0f + 7.0f * (float)(tu_rand(&rng) % 2)) / sqrtf((float)hds[a]);
                    int64_t nh = heads[(a + b + (size_t)mk) % 4];
                    float cap = caps[(a + b + (size_t)kvt) % 2];
                    int64_t stride = random_stride(hds[a], &rng);
                    require(kc_attention(k, ref, (slate_dtype)kvt, hds[a], nh, stride, j0,
                                         j0 + lens[b], scale, cap, (kc_mask)mk, &rng, problem,
                                         sizeof problem),
                            problem);
                }
}

/* ---- tanh, softcap ------------------------------------------------------------------------ */

/* The variants' vector tanh over every kind of float: bounds and sweeps in kcheck.h. */
static void tanh_is_within_its_bounds_over_every_kind_of_float(void **st) {
    const slate__kernels *k = table_or_skip(st);
    char problem[512];
    require(kc_tanh(k, problem, sizeof problem), problem);
}

/* The softcap op (Gemma 2's final logit cap) against ref: sizes with every tail of 4, 8 and 16
 * lanes, a vocabulary-sized row, caps 0.5, 1, Gemma 2's 30 and 50. Tolerance in kcheck.c. */
static void softcap_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x736f6674ull;
    char problem[512];
    static const int64_t ns[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 257, 256000};
    static const float caps[] = {0.5f, 1.0f, 30.0f, 50.0f};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        require(kc_softcap(k, ref, ns[c], caps[c % 4], &rng, problem, sizeof problem), problem);
}

/* ---- rms_norm, swiglu, geglu, rope ----------------------------------------------------------- */

static void rms_norm_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x726d73ull;
    char problem[512];
    static const int64_t ns[] = {1,  3,  7,  8,   15,  16,   17,   31,
                                 32, 33, 64, 100, 257, 1000, 4099, 8192};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        require(kc_rms_norm(k, ref, ns[c], c % 2 ? 1e-5f : 1e-6f, &rng, problem, sizeof problem),
                problem);
}

static void swiglu_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x7377676cull;
    char problem[512];
    static const int64_t ns[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 257, 5632};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        require(kc_glu(k, ref, KC_GLU_SWIGLU, ns[c], &rng, problem, sizeof problem), problem);
}

static void geglu_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x6765676cull;
    char problem[512];
    static const int64_t ns[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 257, 6912};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        require(kc_glu(k, ref, KC_GLU_GEGLU, ns[c], &rng, problem, sizeof problem), problem);
}

/* Both pair layouts, partial rotation (rope_dim < head_dim: the rest copied), in place and out
 * of place, 1 to 5 heads; cos/sin on the unit circle and scaled by an mscale (LongRoPE's
 * attention factor, 1.19 as Phi-4-mini's, and one below 1), which only the rotated pairs see. */
static void rope_matches_ref(void **st) {
    const slate__kernels *k = table_or_skip(st), *ref = slate__kernels_by_name("ref");
    uint64_t rng = tu_seed() ^ 0x726f7065ull;
    char problem[512];
    static const float mscales[] = {1.0f, 1.1902381f, 0.625f};
    for (size_t c = 0; c < KC_N_ROPE_DIMS; c++)
        for (int mode = 0; mode < 12; mode++) {
            int64_t nh = 1 + (int64_t)(tu_rand(&rng) % 5);
            require(kc_rope(k, ref, nh, kc_rope_dims[c][0], kc_rope_dims[c][1], mode & 1, mode & 2,
                            mscales[mode / 4], &rng, problem, sizeof problem),
                    problem);
        }
}

/* ---- main -------------------------------------------------------------------------------- */

/* One test per table, named "<test>/<table>". */
#define FOR_TABLE(f, name)                                                                         \
    { #f "/" name, f, NULL, NULL, (void *)name }
#define FOR_TABLES(f)                                                                              \
    FOR_TABLE(f, "avx2"), FOR_TABLE(f, "avx2_vnni"), FOR_TABLE(f, "avx512"),                     \
        FOR_TABLE(f, "avx512_vnni"), FOR_TABLE(f, "neon")

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        FOR_TABLES(matmul_matches_ref_for_every_dtype_and_shape),
        FOR_TABLES(matmul_matches_ref_across_cache_blocks),
        FOR_TABLES(to_f32_is_exact_for_every_half_value),
        FOR_TABLES(to_f16_rounds_as_ref_for_every_kind_of_float),
        FOR_TABLES(attention_matches_ref_for_every_head_dim_and_range),
        FOR_TABLES(attention_packed_rows_give_the_bits_of_strided_rows),
        FOR_TABLES(attention_k16_gives_the_bits_of_rows),
        FOR_TABLES(attention_i8_matches_ref),
        FOR_TABLES(attention_rows_match_ref_row_by_row),
        FOR_TABLES(transpose16_matches_ref),
        FOR_TABLES(attention_with_every_score_masked_is_zero),
        cmocka_unit_test(ref_attention_caps_scores_before_the_mask),
        FOR_TABLES(attention_with_softcap_matches_ref),
        FOR_TABLES(tanh_is_within_its_bounds_over_every_kind_of_float),
        FOR_TABLES(softcap_matches_ref),
        FOR_TABLES(rms_norm_matches_ref),
        FOR_TABLES(swiglu_matches_ref),
        FOR_TABLES(geglu_matches_ref),
        FOR_TABLES(rope_matches_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
