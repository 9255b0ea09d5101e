/* attn_decode.c - decode attention (one query row over an f16 cache) of one kernel table, in one
 * process, A/B of the ways the kernels address a block of cache rows:
 *   packed   rows side by side (stride = head_dim), as the head-major cache of src/state/kvmem.c
 *            keeps them: for head_dim 64 and 128 the avx512 kernel addresses a block's rows at
 *            constant offsets from its first row;
 *   strided  the same rows stride = head_dim + 16 apart, which takes the general path (16 row
 *            pointers per block): the kernel as it was for every cache before packed rows had
 *            their own path;
 *   k16      K stored dim-major in blocks of 16 positions (kernels.h, attention_k16: what a
 *            state of an AVX-512 table stores for these shapes), V as packed; only on tables
 *            that have attention_k16;
 *   int8     the values quantized to an int8 cache (--kv-dtype int8: rows of {f32 scale,
 *            head_dim int8} side by side, slate__kv_quantize_i8), read by attention_i8; its
 *            max |diff| is against ref's attention_i8 on the same int8 rows (its stride is
 *            in bytes).
 * Shape: 22 layers x 4 kv heads x 8 query heads x head_dim 64 (TinyLlama-1.1B), or with
 * "hd128" 16 layers x 8 kv heads x 4 query heads x 128 (Llama-3.1-8B's attention, 16 of its 32
 * layers; until 2026-12-03 this comment called it Llama-3.2-1B's, but that model's head_dim is
 * 64: it is "hd64g4", 16 x 8 x 4 x 64), "hd96" 32 x 32 x 1 x 96
 * (Phi-3-mini), "hd256" 26 x 1 x 4 x 256 (Gemma-3-1B, every layer global), "hd64g7" 24 x 2 x
 * 7 x 64 (Qwen2.5-0.5B), "hd64hot" TinyLlama's shape with 1 layer (its cache stays in L2:
 * 512 KiB per thread at depth 1024; the kernel's arithmetic without DRAM. On the Zen 4 VM at
 * depth 1024: k16 28 ns per position and kv head, against 32-34 for 22 layers at depth 2048,
 * and 24 with the softmax step cut out, while its 64 FMAs per position alone take 20 ns at
 * the 3.2 vector FMAs per ns that VM's cores reach). hd96 and hd256 have no K16 (head_dim 64
 * and 128 only), so their k16
 * row is absent; one region per layer, kv head and K/V, all of them held at once (22 x 4 x 2 x
 * depth x 128 bytes: 44 MiB at depth 2048, beyond the L3, so each layer's cache comes from DRAM
 * as in a model, where the weights stream through between layers). Work items are (layer's kv
 * head), handed out by an atomic counter on 2 threads of slate's pool, as exec does; one
 * "token" is every layer once. Variants run interleaved, [rounds] rounds (default 9): median
 * and best ms per token, and the thread time per cache position and kv head. Results are compared once with the reference table (max
 * abs difference; the kernels' tolerance is kcheck's ATTN_TOL) and packed with strided and k16
 * (all compute the same products in the same order: 0). Built with the project (not installed, not
 * run by the tests): build/bench_attn_decode [rounds [depth [table [shape]]]], table a kernel
 * set's name (SLATE_KERNELS' values; default the best this CPU runs).
 *
 * A/B mode (bench_attn_ab, built with bench_kq_ab when CMake is given SLATE_AB_KERNEL; see
 * bench/kq_matvec.c): with SLATE_AB_KERNEL=avx512 (attention's file) and SLATE_AB_FLAGS, the
 * strided row becomes "k16/B", the K16 layout on table B (the second copy of the file), next
 * to "k16/A" on the library's table, alternating in one process. E.g. the cache rows'
 * prefetch hint: -DSLATE_AB_KERNEL=avx512 -DSLATE_AB_FLAGS=-DSLATE_PF_ATTN=_MM_HINT_T1. On a
 * table without K16 for the shape (SLATE_AB_KERNEL=avx2, table avx2; or hd96 / hd256) the rows
 * are "packed/A" and "packed/B" instead. To time an older version of the file, point the
 * build folder's ab_kernel.c at a copy of it.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "core/core.h"
#include "kernels/kernels.h"
#include "bench_util.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N_THREADS = 2, MAX_ROUNDS = 64, N_VAR = 3, N_ALL = N_VAR + 2 };

typedef struct shape {
    int layers, kv_heads, group, hd;
} shape;

typedef struct job {
    const slate__kernels *k;
    const shape *sh;
    uint16_t **kc, **vc; /* [layer * kv_heads + g] */
    uint8_t **k8, **v8;  /* the int8 cache's regions, when i8 */
    const float *q;      /* [kv_heads * group][hd], the same for every layer */
    float *out;          /* [kv_heads * group][hd] */
    int64_t stride, depth;
    bool k16; /* kc holds K16 blocks: attention_k16 */
    bool i8;  /* k8/v8: attention_i8, stride in bytes */
    int layer;
    atomic_int next;
} job;

static void run_layer(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    job *j = ctx;
    const shape *sh = j->sh;
    float scale = 1.0f / sqrtf((float)sh->hd);
    for (int g; (g = atomic_fetch_add(&j->next, 1)) < sh->kv_heads;) {
        int64_t off = (int64_t)g * sh->group * sh->hd, i = (int64_t)j->layer * sh->kv_heads + g;
        if (j->i8)
            j->k->attention_i8(j->out + off, j->q + off, j->k8[i], j->v8[i], j->stride, 0,
                               j->depth, sh->hd, sh->group, 1, 0, scale, 0.0f, NULL);
        else if (j->k16)
            j->k->attention_k16(j->out + off, j->q + off, j->kc[i], j->vc[i], j->stride, 0,
                                j->depth, sh->hd, sh->group, 1, 0, scale, 0.0f, NULL);
        else
            j->k->attention(j->out + off, j->q + off, j->kc[i], j->vc[i], SLATE_DTYPE_F16,
                            j->stride, 0, j->depth, sh->hd, sh->group, 1, 0, scale, 0.0f, NULL);
    }
}

/* Every layer once; returns the seconds taken. */
static double token(slate__pool *pool, job *j) {
    double t0 = now();
    for (int l = 0; l < j->sh->layers; l++) {
        j->layer = l;
        atomic_store(&j->next, 0);
        slate__pool_run(pool, run_layer, j);
    }
    return now() - t0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float max_diff(const float *a, const float *b, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

#ifdef SLATE_AB
enum { AB = 1 };
void slate__ab_fill_b(slate__kernels *k); /* the second copy (CMakeLists.txt) */
#else
enum { AB = 0 };
#define SLATE_AB_WHAT ""
#endif

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 9;
    int64_t depth = argc > 2 ? atoll(argv[2]) : 2048;
    const char *table = argc > 3 ? argv[3] : NULL;
    static const struct {
        const char *name;
        shape sh;
    } shapes[] = {{"hd64", {22, 4, 8, 64}},
                  {"hd128", {16, 8, 4, 128}},
                  {"hd96", {32, 32, 1, 96}},
                  {"hd256", {26, 1, 4, 256}},
                  {"hd64g7", {24, 2, 7, 64}}, {"hd64hot", {1, 4, 8, 64}}, {"hd64g4", {16, 8, 4, 64}}};
    enum { N_SHAPES = sizeof shapes / sizeof *shapes };
    int si = 0;
    while (argc > 4 && si < N_SHAPES && strcmp(argv[4], shapes[si].name) != 0) si++;
    if (rounds < 1 || rounds > MAX_ROUNDS || depth < 1 || depth > (1 << 20) || si == N_SHAPES) {
        fprintf(stderr, "usage: %s [rounds 1..%d [depth [table [hd128|hd96|hd256|hd64g7|hd64hot|hd64g4]]]]\n",
                argv[0], MAX_ROUNDS);
        return 2;
    }
    const slate__kernels *k = table ? slate__kernels_by_name(table) : slate__kernels_get();
    const slate__kernels *ref = slate__kernels_by_name("ref");
    if (!k) {
        fprintf(stderr, "kernel table '%s' is not built or not supported by this CPU\n", table);
        return 2;
    }
    shape sh = shapes[si].sh;
    int n_reg = sh.layers * sh.kv_heads;
    int64_t nq = (int64_t)sh.kv_heads * sh.group * sh.hd;
    /* the layouts of the same values: packed (stride hd), strided (hd + 16), k16 (stride hd,
     * whole blocks of 16 positions) */
    const bool has_k16 = k->attention_k16 && (sh.hd == 64 || sh.hd == 128);
    const bool ab_k16 = AB && has_k16; /* A/B of K16; of packed rows where the table has none */
    const int64_t strides[N_VAR] = {sh.hd, AB ? sh.hd : sh.hd + 16, sh.hd};
    const char *names[N_VAR] = {AB && !ab_k16 ? "packed/A" : "packed",
                                ab_k16 ? "k16/B" : AB ? "packed/B" : "strided",
                                AB ? "k16/A" : "k16"};
    const int n_var = has_k16 ? 3 : 2;
    static slate__kernels kb; /* A/B mode: table B, the library's with the second copy's entries */
    kb = *k;
#ifdef SLATE_AB
    slate__ab_fill_b(&kb);
    if (ab_k16 && !kb.attention_k16) {
        fprintf(stderr, "A/B mode: table %s has attention_k16, its copy B has none\n", k->name);
        return 2;
    }
    printf("A: %s, B: %s with %s\n", k->name, k->name, SLATE_AB_WHAT);
#endif
    const int64_t depth16 = (depth + 15) / 16 * 16;
    /* the int8 rows (planner.c's row of one kv head) and their variants: on the table, and in
     * A/B mode on table B too */
    const int64_t row8 = 4 + (int64_t)slate__align_up((size_t)sh.hd, 4);
    const int n_i8 = k->attention_i8 ? (AB ? 2 : 1) : 0;
    const char *names8[2] = {AB ? "int8/A" : "int8", "int8/B"};
    uint16_t **kc[N_VAR], **vc[N_VAR];
    uint8_t **k8 = malloc((size_t)n_reg * sizeof(uint8_t *));
    uint8_t **v8 = malloc((size_t)n_reg * sizeof(uint8_t *));
    uint64_t r = 0x9e3779b97f4a7c15ull;
    /* out: the N_VAR f16 layouts, the int8 variants, then ref on f16 and ref on int8 */
    float *q = malloc((size_t)nq * sizeof(float)), *out[N_ALL + 2];
    bool oom = !q || !k8 || !v8;
    for (int v = 0; v < N_ALL + 2; v++) oom |= !(out[v] = malloc((size_t)nq * sizeof(float)));
    for (int v = 0; v < N_VAR; v++) {
        oom |= !(kc[v] = malloc((size_t)n_reg * sizeof(uint16_t *)));
        oom |= !(vc[v] = malloc((size_t)n_reg * sizeof(uint16_t *)));
    }
    if (oom) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < nq; i++) q[i] = 4.0f * rndf(&r);
    float *kx = malloc((size_t)sh.hd * sizeof(float)), *vx = malloc((size_t)sh.hd * sizeof(float));
    for (int i = 0; i < n_reg; i++) {
        for (int v = 0; v < N_VAR; v++) {
            size_t bytes = (size_t)(depth16 * strides[v]) * sizeof(uint16_t);
            kc[v][i] = aligned_alloc(64, (bytes + 63) / 64 * 64);
            vc[v][i] = aligned_alloc(64, (bytes + 63) / 64 * 64);
            oom |= !kc[v][i] || !vc[v][i];
        }
        size_t bytes8 = (size_t)(depth16 * row8);
        k8[i] = aligned_alloc(64, (bytes8 + 63) / 64 * 64);
        v8[i] = aligned_alloc(64, (bytes8 + 63) / 64 * 64);
        if (oom || !k8[i] || !v8[i] || !kx || !vx) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        for (int64_t j = 0; j < depth; j++) {
            for (int64_t d = 0; d < sh.hd; d++) {
                uint16_t kh = slate__f32_to_f16(2.0f * rndf(&r)), vh = slate__f32_to_f16(rndf(&r));
                kx[d] = slate__f16_to_f32(kh);
                vx[d] = slate__f16_to_f32(vh);
                for (int v = 0; v < N_VAR; v++) {
                    bool blk = v == 2 || (ab_k16 && v == 1); /* K16 */
                    int64_t at = blk ? j / 16 * 16 * sh.hd + d * 16 + j % 16 : j * strides[v] + d;
                    kc[v][i][at] = kh;
                    vc[v][i][j * strides[v] + d] = vh;
                }
            }
            slate__kv_quantize_i8(k8[i] + j * row8, kx, sh.hd, (int32_t)sh.hd);
            slate__kv_quantize_i8(v8[i] + j * row8, vx, sh.hd, (int32_t)sh.hd);
        }
    }
    free(kx);
    free(vx);
    slate__pool *pool = NULL;
    slate_error err;
    if (slate__pool_create(N_THREADS, &pool, &err)) {
        fprintf(stderr, "pool: %s\n", err.message);
        return 1;
    }
    /* jobs: [0, n_var) the f16 layouts, [N_VAR, N_VAR + n_i8) int8, N_ALL ref f16, N_ALL + 1
     * ref int8 */
    job j[N_ALL + 2];
    for (int v = 0; v < N_ALL + 2; v++) {
        int w = v < N_VAR ? v : 0; /* the reference reads the packed copy */
        bool i8 = (v >= N_VAR && v < N_ALL) || v == N_ALL + 1;
        j[v] = (job){.k = v >= N_ALL ? ref : AB && (v == 1 || v == N_VAR + 1) ? &kb : k,
                     .sh = &sh, .kc = kc[w], .vc = vc[w], .k8 = k8, .v8 = v8, .q = q,
                     .out = out[v], .stride = i8 ? row8 : strides[w], .depth = depth,
                     .k16 = v == 2 || (ab_k16 && v == 1), .i8 = i8};
    }
    bool run[N_ALL + 2] = {false};
    for (int v = 0; v < n_var; v++) run[v] = true;
    for (int v = 0; v < n_i8; v++) run[N_VAR + v] = true;
    run[N_ALL] = true;
    run[N_ALL + 1] = n_i8 > 0;
    /* one untimed token each (pages, pool), which also gives the results to compare */
    for (int v = 0; v < N_ALL + 2; v++)
        if (run[v]) token(pool, &j[v]);
    double t[N_ALL][MAX_ROUNDS];
    for (int rd = 0; rd < rounds; rd++)
        for (int v = 0; v < N_ALL; v++)
            if (run[v]) t[v][rd] = token(pool, &j[v]);
    printf("%s attention, f16 and int8 caches, depth %lld, %d layers x %d kv heads x %d query "
           "heads x head_dim %d, %d threads, %d rounds (cache %.0f MiB per f16 layout, %.0f MiB "
           "int8):\n",
           k->name, (long long)depth, sh.layers, sh.kv_heads, sh.group, sh.hd, N_THREADS, rounds,
           2.0 * n_reg * (double)(depth * sh.hd) * 2 / (1 << 20),
           2.0 * n_reg * (double)(depth * row8) / (1 << 20));
    printf("  layout   stride  ms/token (median)  best   ns per position and kv head (thread time)"
           "  max |diff| vs ref\n");
    for (int v = 0; v < N_ALL; v++) {
        if (!run[v]) continue;
        qsort(t[v], (size_t)rounds, sizeof(double), cmp_double);
        double med = t[v][rounds / 2];
        printf("  %-8s %6lld  %17.3f  %5.3f  %42.2f  %.2e\n",
               v < N_VAR ? names[v] : names8[v - N_VAR], (long long)j[v].stride, med * 1e3,
               t[v][0] * 1e3, med * N_THREADS / ((double)n_reg * (double)depth) * 1e9,
               (double)max_diff(out[v], out[v < N_VAR ? N_ALL : N_ALL + 1], nq));
    }
    printf("  packed vs %s: max |diff| %.2e\n", names[1], (double)max_diff(out[0], out[1], nq));
    if (n_var > 2)
        printf("  packed vs %s: max |diff| %.2e\n", names[2], (double)max_diff(out[0], out[2], nq));
    else
        printf("  k16: %s has no attention_k16 for head_dim %d\n", k->name, sh.hd);
    if (n_i8 > 1)
        printf("  int8/A vs int8/B: max |diff| %.2e\n",
               (double)max_diff(out[N_VAR], out[N_VAR + 1], nq));
    slate__pool_free(pool);
    for (int v = 0; v < N_VAR; v++) {
        for (int i = 0; i < n_reg; i++) {
            free(kc[v][i]);
            free(vc[v][i]);
        }
        free(kc[v]);
        free(vc[v]);
    }
    for (int i = 0; i < n_reg; i++) {
        free(k8[i]);
        free(v8[i]);
    }
    free(k8);
    free(v8);
    for (int v = 0; v < N_ALL + 2; v++) free(out[v]);
    free(q);
    return 0;
}
