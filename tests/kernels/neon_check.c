/* neon_check.c - the "neon" kernel table (kernels/arm/neon.c, neon_q.c, neon_k.c) or
 * "neon_dotprod" (the same with arm/neon_dotprod.c's and neon_dotprod_k.c's matmuls) against
 * the scalar reference ("ref", kernels/ref/) on random data with odd sizes and tails: matmul
 * (F32, F16, BF16 weights; n_rows 1 (decode) to 9, n_in 1 to 1000, output sub-ranges, with and
 * without bias); matmul of the compressed formats (Q8_0; Q4 with blocks of 16, 32, 64, 128,
 * symmetric and asymmetric; Q8_C; IQ4_NL; Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, IQ4_XS) with x quantized
 * in two row ranges (n_rows 1 to 9 and 13, one block, odd block counts, short last x units, 37
 * rows, rows of 4096+ inputs, several output blocks; for the super-block formats also row counts
 * around the groups of 4 and many super-blocks; for those and IQ4_NL the tables' own kernels
 * sharing Q8_0's x, and every code at its extreme against every x at +-max, the largest integer
 * sums; every format also on x that int8 holds exactly, within the f32 tolerance); to_f32 (every
 * f16 / bf16 bit pattern at several tail lengths), rms_norm, attention (F32, F16 and int8
 * caches, head_dim 1 to 128, GQA groups of 1 to 9 heads, empty ranges, strides wider than
 * head_dim, masks with -inf and NaN, every score masked, with and without Gemma 2's score
 * cap), the vector tanh (as
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
#include <string.h>
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

/* ---- the super-block formats (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, IQ4_XS: arm/neon_k.c) ---------- */

static const slate_dtype kdts[] = {SLATE_DTYPE_Q4_K, SLATE_DTYPE_Q5_K, SLATE_DTYPE_Q6_K,
                                   SLATE_DTYPE_Q3_K, SLATE_DTYPE_Q2_K, SLATE_DTYPE_IQ4_XS};
enum { N_KDTS = sizeof kdts / sizeof *kdts };

/* Shapes of neon_k.c's tiling that check_quant_matmuls draws only by chance: row counts around
 * its groups of 4 (a single row left over takes the decode path), several output blocks of 16
 * with odd n_out and o0 > 0, exactly one block, and many super-blocks per row (both halves of
 * each, decode and prefill). */
static void check_kquant_tiles(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x6b7175616e74ull;
    char problem[512];
    static const struct { int64_t rows, n_sb, n_out, o0, o1; } cs[] = {
        {4, 3, 33, 3, 32},  {5, 2, 33, 1, 33},  {8, 1, 17, 0, 17}, {12, 2, 31, 15, 31},
        {17, 3, 49, 2, 47}, {6, 2, 16, 0, 16},  {1, 17, 35, 1, 34}, {2, 16, 19, 7, 19},
        {3, 5, 1, 0, 1},    {1, 1, 1, 0, 1},    {9, 20, 21, 4, 21},
    };
    for (size_t d = 0; d < N_KDTS; d++)
        for (size_t c = 0; c < sizeof cs / sizeof *cs; c++)
            report(kc_matmul_q(k, ref, kdts[d], 256, false, cs[c].rows, 256 * cs[c].n_sb,
                               cs[c].n_out, cs[c].o0, cs[c].o1, c % 2 == 0, &rng, problem,
                               sizeof problem),
                   problem);
}

/* The formats GGUF files mix with Q8_0 (and one another) in q/k/v or gate/up, with their blocks:
 * the super-block formats and IQ4_NL (blocks of 32, arm/neon_q.c). */
static const struct {
    slate_dtype dt;
    int32_t block;
} mixed[] = {
    {SLATE_DTYPE_Q4_K, 256}, {SLATE_DTYPE_Q5_K, 256}, {SLATE_DTYPE_Q6_K, 256},
    {SLATE_DTYPE_Q3_K, 256}, {SLATE_DTYPE_Q2_K, 256}, {SLATE_DTYPE_IQ4_XS, 256},
    {SLATE_DTYPE_IQ4_NL, 32},
};

/* The neon tables run their own Q4_K / Q5_K / Q6_K / Q3_K / Q2_K / IQ4_XS / IQ4_NL matmuls (not
 * ref's). The table's x for them is the one it writes for Q8_0 (the same plan: bytes, layout
 * id, row alignment; the same bytes), so exec may share it between q/k/v or gate/up of mixed
 * formats, as Q4_K_M, Q3_K_M, Q2_K, IQ4_XS and IQ4_NL files have them. Tables without an x
 * quantizer for these pass. */
static void check_kquant_shared_x(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x7368617265ull;
    char problem[512];
    for (size_t d = 0; d < sizeof mixed / sizeof *mixed; d++) {
        slate_dtype dt = mixed[d].dt;
        snprintf(problem, sizeof problem, "%s %s: ", k->name, slate_dtype_name(dt));
        size_t len = strlen(problem);
        if (strncmp(k->name, "neon", 4) == 0 && (k->matmul[dt] == ref->matmul[dt] ||
                                                 !k->xq_plan[dt] || !k->quantize_x[dt])) {
            snprintf(problem + len, sizeof problem - len, "the table runs ref's matmul or has no "
                     "x quantizer (arm/neon_q.c / neon_k.c not installed)");
            report(false, problem);
            continue;
        }
        if (!k->xq_plan[dt] || !k->xq_plan[SLATE_DTYPE_Q8_0]) {
            report(!k->xq_plan[dt] && !k->quantize_x[dt], problem);
            continue;
        }
        const int64_t n_rows = 3, n_in = 768;
        slate__wmat wk, w8;
        slate__wmat_init(&wk, NULL, dt, mixed[d].block, false, 1, n_in);
        slate__wmat_init(&w8, NULL, SLATE_DTYPE_Q8_0, 32, false, 1, n_in);
        slate__xq_plan pk = k->xq_plan[dt](&wk, n_rows);
        slate__xq_plan p8 = k->xq_plan[SLATE_DTYPE_Q8_0](&w8, n_rows);
        if (pk.bytes != p8.bytes || pk.layout != p8.layout || pk.row_align != p8.row_align) {
            snprintf(problem + len, sizeof problem - len, "x plan {%zu bytes, layout %#x, align "
                     "%d} is not Q8_0's {%zu, %#x, %d}", pk.bytes, (unsigned)pk.layout,
                     (int)pk.row_align, p8.bytes, (unsigned)p8.layout, (int)p8.row_align);
            report(false, problem);
            continue;
        }
        float x[3 * 768];
        for (int64_t i = 0; i < n_rows * n_in; i++) x[i] = kc_randf(&rng) * (i % 5 ? 1.0f : 9.0f);
        uint8_t *a = malloc(pk.bytes), *b = malloc(pk.bytes);
        if (!a || !b) exit(1);
        memset(a, 0x11, pk.bytes);
        memset(b, 0x22, pk.bytes);
        k->quantize_x[dt](a, x, &wk, n_rows, 0, n_rows);
        k->quantize_x[SLATE_DTYPE_Q8_0](b, x, &w8, n_rows, 0, n_rows);
        bool same = memcmp(a, b, pk.bytes) == 0;
        if (!same)
            snprintf(problem + len, sizeof problem - len, "quantize_x writes other bytes than "
                     "Q8_0's under the same layout id %#x", (unsigned)pk.layout);
        report(same, problem);
        free(a);
        free(b);
    }
}

/* Runs the matmul of wm on x (n_rows rows; columns [o0, o1), no bias) in k, x quantized as
 * exec does where k quantizes x for the format, and in ref, and checks the outputs with
 * kc_check_q_outputs: within the bound of x's int8 rounding, or with exact (x that int8 holds,
 * so the quantizer rounds nothing) within the f32 tolerance alone. detail stays empty when they
 * agree. */
static void q_case(const slate__kernels *k, const slate__kernels *ref, const slate__wmat *wm,
                   const float *x, int64_t n_rows, int64_t o0, int64_t o1, bool exact,
                   char *detail, size_t cap) {
    slate_dtype dt = wm->dtype;
    float *got = malloc((size_t)(n_rows * wm->n_out) * sizeof(float));
    float *want = malloc((size_t)(n_rows * wm->n_out) * sizeof(float));
    if (!got || !want) exit(1);
    for (int64_t i = 0; i < n_rows * wm->n_out; i++) got[i] = want[i] = 12345.0f;
    uint8_t *xq = NULL;
    if (k->xq_plan[dt]) {
        slate__xq_plan pl = k->xq_plan[dt](wm, n_rows);
        xq = malloc(pl.bytes);
        if (!xq) exit(1);
        k->quantize_x[dt](xq, x, wm, n_rows, 0, n_rows);
    }
    k->matmul[dt](got, x, xq, wm, NULL, n_rows, o0, o1);
    ref->matmul[dt](want, x, NULL, wm, NULL, n_rows, o0, o1);
    kc_check_q_outputs(wm, x, NULL, got, want, 12345.0f, n_rows, o0, o1, xq && !exact, detail,
                       cap);
    free(got);
    free(want);
    free(xq);
}

/* x that int8 holds exactly (test_quant_kernels.c's fill_int8_x): per 128 inputs a
 * power-of-two scale s (1/8 .. 4) times integers in [-127, 127], every 16 inputs with one +-127
 * among them, so the quantizer's units of 32 find dx = s and round nothing (127 / (127 s) and
 * every q s are exact in f32). */
static void fill_int8_x(float *x, int64_t n_rows, int64_t n_in, uint64_t *rng) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t g = 0; g < n_in; g += 128) {
            float s = ldexpf(1.0f, (int)(kc_rand(rng) % 6) - 3);
            for (int64_t i = g; i < n_in && i < g + 128; i++)
                x[r * n_in + i] = s * (float)((int)(kc_rand(rng) % 255) - 127);
            for (int64_t i = g; i < n_in && i < g + 128; i += 16) {
                int64_t n = n_in - i < 16 ? n_in - i : 16;
                x[r * n_in + i + (int64_t)(kc_rand(rng) % (uint64_t)n)] =
                    kc_rand(rng) % 2 ? 127.0f * s : -127.0f * s;
            }
        }
}

/* On x that int8 holds exactly the table must be as close to ref as an f32 kernel (1e-5 of
 * sum |w x|, the order of summation): x's rounding no longer hides a small error in a code or
 * scale (one of IQ4's 16 levels off by one stays inside that bound on random x). Every
 * compressed format, decode and the prefill row groups, several output blocks. */
static void check_quant_exact(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x696e7438ull;
    static const int64_t rows[] = {1, 2, 3, 4, 5, 9};
    for (size_t f = 0; f < KC_N_QFMTS; f++) {
        const kc_qfmt *q = &kc_qfmts[f];
        for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
            int64_t n_rows = rows[ri], n_in = q->block ? 512 : 517, n_out = 37, o0 = ri % 3;
            size_t wbytes = (size_t)slate__wmat_bytes(q->dt, q->block, q->asym, n_out, n_in);
            uint8_t *wd = malloc(wbytes);
            float *x = malloc((size_t)(n_rows * n_in) * sizeof(float));
            if (!wd || !x) exit(1);
            slate__wmat wm;
            slate__wmat_init(&wm, wd, q->dt, q->block, q->asym, n_out, n_in);
            kc_fill_qweights(wd, &wm, &rng);
            fill_int8_x(x, n_rows, n_in, &rng);
            char problem[512], detail[300] = "";
            q_case(k, ref, &wm, x, n_rows, o0, n_out, true, detail, sizeof detail);
            snprintf(problem, sizeof problem, "%s matmul %s B=%d asym=%d rows=%lld n_in=%lld on "
                     "x that int8 holds: %s", k->name, slate_dtype_name(q->dt), (int)q->block,
                     (int)q->asym, (long long)n_rows, (long long)n_in, detail);
            report(!detail[0], problem);
            free(wd);
            free(x);
        }
    }
}

/* The largest integer sums the kernel keeps: every x of a row at +-max (so every |q_x| is 127)
 * against the largest codes: Q4_K all 15 (16 products of 15 * 127 per s16 lane of the NEON
 * baseline), Q6_K all -32 or all 31 (8 of 32 * 127), Q5_K all 31 (nibbles 15 and every qh bit:
 * 8 products of 31 * 127 fit an s16 lane, 16 would not), Q3_K all -4 (no qs or hmask bit) or
 * all 3 (every bit), Q2_K all 3, IQ4_NL all nibbles 0 (level -127: 2 products of 127 * 127 fill
 * an s16 lane of the baseline's pairs) or all 15 (level 113), IQ4_XS the same levels under
 * every sub-block scale -32 or 31 (each level with each scale), with x's sign the same or
 * opposite everywhere; the other scales stay random. A sum kept in too narrow a lane overflows
 * here. */
static void check_kquant_extremes(const slate__kernels *k, const slate__kernels *ref) {
    uint64_t rng = g_seed ^ 0x65787472656dull;
    const int64_t n_rows = 5, n_in = 512, n_out = 19, o0 = 2, o1 = 19;
    /* bit 0: x's sign; c / 2: 0 Q4_K, 1 Q6_K codes -32, 2 Q6_K 31, 3 Q5_K 31, 4 Q3_K -4,
     * 5 Q3_K 3, 6 Q2_K 3, 7 IQ4_NL nibbles 0, 8 IQ4_NL 15, 9 IQ4_XS nibbles 0 scales -32,
     * 10 IQ4_XS 15 and 31, 11 IQ4_XS 0 and 31, 12 IQ4_XS 15 and -32 */
    for (int c = 0; c < 26; c++) {
        static const slate_dtype dts[13] = {
            SLATE_DTYPE_Q4_K,   SLATE_DTYPE_Q6_K,   SLATE_DTYPE_Q6_K,   SLATE_DTYPE_Q5_K,
            SLATE_DTYPE_Q3_K,   SLATE_DTYPE_Q3_K,   SLATE_DTYPE_Q2_K,   SLATE_DTYPE_IQ4_NL,
            SLATE_DTYPE_IQ4_NL, SLATE_DTYPE_IQ4_XS, SLATE_DTYPE_IQ4_XS, SLATE_DTYPE_IQ4_XS,
            SLATE_DTYPE_IQ4_XS};
        slate_dtype dt = dts[c / 2];
        int32_t block = dt == SLATE_DTYPE_IQ4_NL ? 32 : 256;
        char problem[512], detail[300] = "";
        snprintf(problem, sizeof problem, "%s matmul %s saturated codes (case %d): ", k->name,
                 slate_dtype_name(dt), c);
        size_t len = strlen(problem);
        size_t wbytes = (size_t)slate__wmat_bytes(dt, block, false, n_out, n_in);
        uint8_t *wd = malloc(wbytes);
        float *x = malloc((size_t)(n_rows * n_in) * sizeof(float));
        if (!wd || !x) exit(1);
        slate__wmat wm;
        slate__wmat_init(&wm, wd, dt, block, false, n_out, n_in);
        kc_fill_qweights(wd, &wm, &rng);
        for (int64_t o = 0; o < n_out; o++)
            for (int64_t b = 0; b < n_in / block; b++) {
                uint8_t *blk = wd + (size_t)o * wm.row_bytes;
                if (dt == SLATE_DTYPE_IQ4_NL) {
                    blk += (size_t)b * sizeof(slate__block_iq4_nl);
                    memset(blk + 2, c / 2 == 7 ? 0x00 : 0xFF, 16); /* qs */
                } else if (dt == SLATE_DTYPE_IQ4_XS) {
                    blk += (size_t)b * sizeof(slate__block_iq4_xs);
                    /* scales_h and scales_l: every 6-bit scale 0 (-32) or 63 (31) */
                    memset(blk + 2, c / 2 == 9 || c / 2 == 12 ? 0x00 : 0xFF, 6);
                    memset(blk + 8, c / 2 == 9 || c / 2 == 11 ? 0x00 : 0xFF, 128); /* qs */
                } else if (dt == SLATE_DTYPE_Q4_K) {
                    blk += (size_t)b * sizeof(slate__block_q4_k);
                    memset(blk + 16, 0xFF, 128);
                } else if (dt == SLATE_DTYPE_Q5_K) {
                    blk += (size_t)b * sizeof(slate__block_q5_k);
                    memset(blk + 16, 0xFF, 32 + 128); /* qh and qs */
                } else if (dt == SLATE_DTYPE_Q3_K) {
                    blk += (size_t)b * sizeof(slate__block_q3_k);
                    memset(blk, c / 2 == 4 ? 0x00 : 0xFF, 32 + 64); /* hmask and qs */
                } else if (dt == SLATE_DTYPE_Q2_K) {
                    blk += (size_t)b * sizeof(slate__block_q2_k);
                    memset(blk + 16, 0xFF, 64); /* qs */
                } else {
                    blk += (size_t)b * sizeof(slate__block_q6_k);
                    memset(blk, c / 2 == 1 ? 0x00 : 0xFF, 192); /* ql and qh */
                }
            }
        /* +-0.75 in every input: every q_x is +-127 */
        for (int64_t i = 0; i < n_rows * n_in; i++) x[i] = c % 2 ? -0.75f : 0.75f;
        q_case(k, ref, &wm, x, n_rows, o0, o1, false, detail, sizeof detail);
        snprintf(problem + len, sizeof problem - len, "%s", detail);
        report(!detail[0], problem);
        free(wd);
        free(x);
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

static void check_to_f16(const slate__kernels *k, const slate__kernels *ref) {
    char problem[512];
    static const int64_t lens[] = {KC_TO_F16_N, KC_TO_F16_N - 1, 1, 2, 3, 4, 5, 7, 9};
    for (size_t c = 0; c < sizeof lens / sizeof *lens; c++)
        report(kc_to_f16(k, ref, lens[c], problem, sizeof problem), problem);
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
    /* int8 caches: rows side by side or with a gap, every kind of mask, capped or not */
    for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
        for (size_t b = 0; b < sizeof lens / sizeof *lens; b++)
            for (int mk = KC_MASK_NONE; mk <= KC_MASK_ALL_INF; mk++)
                report(kc_attention_i8_at(k, ref, hds[a], heads[(a + b + (size_t)mk) % 5],
                                          lens[b], (kc_mask)mk, (a + b) % 2, &rng, problem,
                                          sizeof problem),
                       problem);
    /* a prefill's consecutive rows in one call (kernels.h: n_rows, window), every cache kind,
     * groups of 1-8 heads, 1-8 rows, the shortest ranges and longer ones, a sliding window of
     * 1-40 positions on every other case; capped on every third */
    static const int64_t groups[] = {1, 2, 3, 8};
    static const slate_dtype caches[] = {SLATE_DTYPE_F32, SLATE_DTYPE_F16, SLATE_DTYPE_I8};
    int i = 0;
    for (size_t c = 0; c < sizeof caches / sizeof *caches; c++)
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (size_t g = 0; g < sizeof groups / sizeof *groups; g++, i++) {
                int64_t rows = 1 + (int64_t)(kc_rand(&rng) % 8), j0 = i % 2 * 3;
                int64_t extra = i % 3 == 0 ? 0 : (int64_t)(kc_rand(&rng) % 60);
                int64_t window = i / 2 % 2 ? 1 + (int64_t)(kc_rand(&rng) % 40) : 0;
                report(kc_attention_rows(k, ref, caches[c], false, hds[a], groups[g], rows,
                                         window, j0, j0 + rows + extra, i % 3 == 2 ? 2.0f : 0.0f,
                                         &rng, problem, sizeof problem),
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
        check_kquant_tiles(k, ref);
        check_kquant_shared_x(k, ref);
        check_kquant_extremes(k, ref);
        check_quant_exact(k, ref);
        check_to_f32(k, ref);
        check_to_f16(k, ref);
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
