/* neon_check.c - the "neon" kernel table (kernels/arm/neon.c, neon_q.c) or "neon_dotprod"
 * (the same with arm/neon_dotprod.c's matmuls) against the scalar reference ("ref",
 * kernels/ref/) on random data with odd sizes and tails: matmul (F32, F16, BF16 weights; n_rows
 * 1 (decode) to 9, n_in 1 to 1000, output sub-ranges, with and without bias); matmul of the
 * compressed formats (Q8_0; Q4 with blocks of 16, 32, 64, 128, symmetric and asymmetric; Q8_C)
 * with x quantized in two row ranges (n_rows 1 to 9 and 13, one block, odd block counts, short
 * last x units, 37 rows, rows of 4096+ inputs, several output blocks); to_f32 (every f16 / bf16
 * bit pattern at several tail lengths), rms_norm, attention (F32 and F16 caches, head_dim 1 to
 * 128, GQA groups of 1 to 9 heads, empty ranges, strides wider than head_dim, masks with -inf
 * and NaN, every score masked, with and without Gemma 2's score cap), the vector tanh (as
 * softcap with cap 1, over every kind of float), softcap, swiglu, geglu and rope (the neon
 * table takes ref's last three so far; checked so a NEON version is covered the day it
 * comes). This file picks the shapes; each case and its tolerance are in kcheck.c, shared
 * with test_kernels.c (and test_quant_kernels.c).
 *
 * A standalone program (plain C11, no cmocka), so it can be cross-compiled with only the
 * kernel sources and run under user-mode emulation: scripts/check_neon.sh builds it with
 * aarch64-linux-gnu-gcc and runs it with qemu-aarch64, once per table. Under emulation only
 * correctness is checked, not speed. It prints one line per failed case and ends with "N
 * passed, M failed"; exit status 1 on any failure. SLATE_TEST_SEED=<n> repeats a run (the seed
 * is printed first). Usage: neon_check [TABLE] (default "neon"; on another CPU another table,
 * e.g. "ref", can be checked the same way; a table that is not available here counts as a
 * failure). It is not part of ctest.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kcheck.h"
#include "kernels/kernels.h"

static int g_passed, g_failed;
static uint64_t g_seed;

/* Counts a case; a failure prints one line with its problem (kcheck.h). */
static void report(bool ok, const char *problem) {
    if (ok) {
        g_passed++;
        return;
    }
    printf("FAIL %s (SLATE_TEST_SEED=%llu)\n", problem, (unsigned long long)g_seed);
    g_failed++;
}

/* ---- matmul ------------------------------------------------------------------------------ */

static void check_matmuls(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x6d61746d756cull;
    char problem[512];
    static const int64_t n_ins[] = {1, 3, 15, 16, 17, 63, 64, 65, 257, 1000};
    static const int64_t n_rowss[] = {1, 2, 3, 4, 5, 9};
    for (int dt = SLATE_DTYPE_F32; dt <= SLATE_DTYPE_BF16; dt++) {
        slate_dtype t = (slate_dtype)dt;
        for (size_t a = 0; a < sizeof n_ins / sizeof *n_ins; a++)
            for (size_t b = 0; b < sizeof n_rowss / sizeof *n_rowss; b++) {
                /* up to 40 outputs: several of the variant's 16-output blocks; o0 > 0 whenever
                 * there is room, o1 anywhere after it */
                int64_t n_out = 1 + (int64_t)(kc_rand(&rng) % 40);
                int64_t o0 = n_out > 1 ? 1 + (int64_t)(kc_rand(&rng) % (uint64_t)(n_out - 1)) : 0;
                int64_t o1 = o0 + 1 + (int64_t)(kc_rand(&rng) % (uint64_t)(n_out - o0));
                bool bias = (a + b) % 2 == 0;
                int64_t rows = n_rowss[b], n_in = n_ins[a];
                report(kc_matmul(k, ref, t, rows, n_in, n_out, o0, o1, bias, &rng, problem,
                                 sizeof problem), problem);
                report(kc_matmul(k, ref, t, rows, n_in, n_out, 0, n_out, !bias, &rng, problem,
                                 sizeof problem), problem);
            }
        /* larger: many row tiles and output blocks, a long decode row */
        report(kc_matmul(k, ref, t, 37, 515, 37, 3, 36, true, &rng, problem, sizeof problem),
               problem);
        report(kc_matmul(k, ref, t, 1, 4099, 21, 0, 21, false, &rng, problem, sizeof problem),
               problem);
    }
}

/* ---- matmul of the compressed formats ------------------------------------------------------ */

static void check_quant_matmuls(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x716d61746dull;
    char problem[512];
    /* Row lengths in blocks: one, odd counts (with blocks of 16 an odd count leaves a short last
     * x unit of 32), an even count. Q8_C has no blocks: any length, so short last units of
     * every kind (1, 7, 33, 100, 257) and whole ones (32, 64). */
    static const int64_t n_blocks[] = {1, 3, 5, 7, 9, 4};
    static const int64_t q8c_n_ins[] = {1, 7, 32, 33, 64, 100, 257};
    static const int64_t n_rowss[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13};
    for (size_t f = 0; f < KC_N_QFMTS; f++) {
        const kc_qfmt *q = &kc_qfmts[f];
        size_t n_lens = q->block ? sizeof n_blocks / sizeof *n_blocks
                                 : sizeof q8c_n_ins / sizeof *q8c_n_ins;
        for (size_t a = 0; a < n_lens; a++)
            for (size_t b = 0; b < sizeof n_rowss / sizeof *n_rowss; b++) {
                int64_t n_in = q->block ? q->block * n_blocks[a] : q8c_n_ins[a];
                /* up to 40 outputs: several of the variant's 16-output blocks; o0 > 0 whenever
                 * there is room, o1 anywhere after it */
                int64_t n_out = 1 + (int64_t)(kc_rand(&rng) % 40);
                int64_t o0 = n_out > 1 ? 1 + (int64_t)(kc_rand(&rng) % (uint64_t)(n_out - 1)) : 0;
                int64_t o1 = o0 + 1 + (int64_t)(kc_rand(&rng) % (uint64_t)(n_out - o0));
                bool bias = (a + b) % 2 == 0;
                int64_t rows = n_rowss[b];
                report(kc_matmul_q(k, ref, q->dt, q->block, q->asym, rows, n_in, n_out, o0, o1,
                                   bias, &rng, problem, sizeof problem), problem);
                report(kc_matmul_q(k, ref, q->dt, q->block, q->asym, rows, n_in, n_out, 0, n_out,
                                   !bias, &rng, problem, sizeof problem), problem);
            }
        /* larger: rows of 4096 + one block (Q8_C: + 3, a short last unit), many row groups and
         * output blocks, a long decode row over several output blocks */
        int64_t big = q->block ? 4096 + q->block : 4099;
        report(kc_matmul_q(k, ref, q->dt, q->block, q->asym, 37, big, 37, 3, 36, true, &rng,
                           problem, sizeof problem), problem);
        report(kc_matmul_q(k, ref, q->dt, q->block, q->asym, 1, big, 70, 5, 69, false, &rng,
                           problem, sizeof problem), problem);
        report(kc_matmul_q(k, ref, q->dt, q->block, q->asym, 13, 1280, 50, 0, 50, false, &rng,
                           problem, sizeof problem), problem);
    }
}

/* ---- to_f32, rms_norm -------------------------------------------------------------------- */

static void check_to_f32(const slate__kernels *k, const slate__kernels *ref) {
    char problem[512];
    static const int64_t lens[] = {65536, 65535, 1, 2, 3, 5, 7, 15, 16, 17, 31, 33};
    for (int dt = SLATE_DTYPE_F16; dt <= SLATE_DTYPE_BF16; dt++)
        for (size_t c = 0; c < sizeof lens / sizeof *lens; c++)
            report(kc_to_f32(k, ref, (slate_dtype)dt, lens[c], problem, sizeof problem), problem);
}

static void check_rms_norms(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x726d73ull;
    char problem[512];
    static const int64_t ns[] = {1, 3, 4, 5, 7, 8, 15, 16, 17, 63, 64, 65, 257, 1000, 4099};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
        float eps = c % 2 ? 1e-5f : 1e-6f;
        report(kc_rms_norm(k, ref, ns[c], eps, &rng, problem, sizeof problem), problem);
    }
}

/* ---- attention --------------------------------------------------------------------------- */

/* Cache rows more than hd apart (hd + 1 to 3 hd + 3): the variant must not assume packed rows. */
static int64_t wide_stride(int64_t hd, uint64_t *rng) {
    return hd + 1 + (int64_t)(kc_rand(rng) % (uint64_t)(2 * hd + 3));
}

static void check_attentions(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x6174746eull;
    char problem[512];
    static const int64_t hds[] = {1, 3, 8, 15, 16, 17, 64, 80, 128};
    static const int64_t lens[] = {0, 1, 3, 4, 5, 9, 33, 100};
    /* 1 head, GQA groups within one pass of the variant (up to 8 heads), and past it (9). */
    static const int64_t heads[] = {1, 2, 7, 8, 9};
    for (int kvt = SLATE_DTYPE_F32; kvt <= SLATE_DTYPE_F16; kvt++)
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t b = 0; b < sizeof lens / sizeof *lens; b++)
                for (int mk = KC_MASK_NONE; mk <= KC_MASK_NAN; mk++) {
                    int64_t hd = hds[a], j0 = (int64_t)(kc_rand(&rng) % 5);
                    /* 1/sqrt(hd) is the usual scale; a larger one gives a peaked softmax whose
                     * running maximum changes often */
                    float scale = (1.0f + 7.0f * (float)(kc_rand(&rng) % 2)) / sqrtf((float)hd);
                    int64_t nh = heads[(a + b + (size_t)mk) % 5], stride = wide_stride(hd, &rng);
                    report(kc_attention(k, ref, (slate_dtype)kvt, hd, nh, stride, j0, j0 + lens[b],
                                        scale, 0.0f, (kc_mask)mk, &rng, problem, sizeof problem),
                           problem);
                    /* Gemma 2's score cap, bending most of these scores */
                    report(kc_attention(k, ref, (slate_dtype)kvt, hd, nh, stride, j0, j0 + lens[b],
                                        scale, (mk & 1) ? 0.5f : 2.0f, (kc_mask)mk, &rng, problem,
                                        sizeof problem),
                           problem);
                }
    /* every score masked: out = 0, for every group size */
    for (int kvt = SLATE_DTYPE_F32; kvt <= SLATE_DTYPE_F16; kvt++)
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t h = 0; h < sizeof heads / sizeof *heads; h++) {
                int64_t stride = wide_stride(hds[a], &rng);
                report(kc_attention(k, ref, (slate_dtype)kvt, hds[a], heads[h], stride,
                                    1 + (int64_t)h, 10 + (int64_t)a, 0.125f, h % 2 ? 2.0f : 0.0f,
                                    KC_MASK_ALL_INF, &rng, problem, sizeof problem),
                       problem);
            }
}

/* ---- swiglu, geglu, rope: the shapes of test_kernels.c --------------------------------------- */

static void check_swiglus(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x7377676cull;
    char problem[512];
    static const int64_t ns[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 257, 5632};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        report(kc_glu(k, ref, KC_GLU_SWIGLU, ns[c], &rng, problem, sizeof problem), problem);
}

static void check_geglus(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x6765676cull;
    char problem[512];
    static const int64_t ns[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 257, 6912};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        report(kc_glu(k, ref, KC_GLU_GEGLU, ns[c], &rng, problem, sizeof problem), problem);
}

/* ---- tanh, softcap ------------------------------------------------------------------------ */

static void check_softcaps(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x736f6674ull;
    char problem[512];
    report(kc_tanh(k, problem, sizeof problem), problem);
    static const int64_t ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 17, 100, 257, 256000};
    static const float caps[] = {0.5f, 1.0f, 30.0f, 50.0f};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        report(kc_softcap(k, ref, ns[c], caps[c % 4], &rng, problem, sizeof problem), problem);
}

static void check_ropes(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x726f7065ull;
    char problem[512];
    for (size_t c = 0; c < KC_N_ROPE_DIMS; c++)
        for (int mode = 0; mode < 12; mode++) { /* bit 0: half (NeoX) layout, bit 1: in place;
                                                   mode / 4: the mscale */
            static const float mscales[] = {1.0f, 1.1902381f, 0.625f};
            int64_t nh = 1 + (int64_t)(kc_rand(&rng) % 5);
            int64_t hd = kc_rope_dims[c][0], rope_dim = kc_rope_dims[c][1];
            report(kc_rope(k, ref, nh, hd, rope_dim, mode & 1, mode & 2, mscales[mode / 4], &rng,
                           problem, sizeof problem),
                   problem);
        }
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
        check_quant_matmuls(k, ref);
        check_to_f32(k, ref);
        check_rms_norms(k, ref);
        check_attentions(k, ref);
        check_swiglus(k, ref);
        check_geglus(k, ref);
        check_softcaps(k, ref);
        check_ropes(k, ref);
    }
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
