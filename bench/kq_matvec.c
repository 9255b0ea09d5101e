/* kq_matvec.c - A/B of the super-block formats' matmuls (q4_k, q5_k, q6_k, q3_k, q2_k: GGUF
 * Q4_K / Q5_K / Q6_K / Q3_K / Q2_K byte for byte) against the formats they replace (q4 block 32
 * asymmetric, q8_0; Q5_K became int8-b32 before q5_k, so q8_0's bytes are its baseline; q3_k
 * and q2_k read 3.44 and 2.63 bits per weight where q4_k reads 4.5), and of iq4_nl / iq4_xs
 * (GGUF IQ4_NL / IQ4_XS, 4.5 and 4.25 bits per weight, transcoded to q8_0 before) against q4
 * block 32 symmetric (GGUF Q4_0: IQ4_NL's bytes with other values) and q4_k, on one kernel table,
 * in one process, on TinyLlama's shapes [2048][2048] (attention), [5632][2048] (ffn_up/gate),
 * [2048][5632] (ffn_down) and [32000][2048] (output), 2 threads (exec's split: an atomic counter
 * hands out chunks of 32-column multiples, ~8 per thread):
 *   decode   one row; weight GB/s = tensor bytes / time. Each call reads the next of enough
 *            copies of the tensor (COPY_MB per format, default 512: twice this Xeon's 260 MiB
 *            L3; all formats' copies are held at once, so 10 formats take 5 GiB) to stream
 *            from DRAM, as a model's layers do. The time includes quantize_x (on
 *            the calling thread, as exec does).
 *   prefill  PREFILL_ROWS rows; GFLOP/s = 2 rows n_out n_in / time (int8 ops count as flops),
 *            quantize_x on the pool included.
 * Variants run interleaved, [rounds] rounds (default 5): best and median decode time, best
 * prefill time. The VM's other load moves single numbers by +-20 % and more, so compare in one
 * run. Random weights (speed does not depend on the values, but the f16 scales are finite);
 * each result is checked once against the reference table (decode, relative RMS difference:
 * ~5e-3 is the int8 rounding of x, a wrong kernel gives ~1) and prefill's row 0 against decode
 * of the same x row (~1e-7: both round x the same way). Built with the project (not installed,
 * not run by the tests): build/bench_kq_matvec [rounds [COPY_MB [table]]], table a kernel set's
 * name (SLATE_KERNELS' values; default the best this CPU runs).
 *
 * A/B mode (bench_kq_ab, built when CMake is given SLATE_AB_KERNEL, see CMakeLists.txt): one
 * x86 kernel file compiled a second time with SLATE_AB_FLAGS (a one-line source CMake writes
 * into the build folder), its fill function renamed, so that table A (the library's) and
 * table B (A with the second copy's entries) run in one process, alternating call by call.
 * Separate processes on a noisy VM
 * could not tell two prefetch hints apart; this could (kernels/x86/prefetch.h). Every format
 * below plus f16 and q8_c whose matmul the file provides runs twice, /A and /B, and each shape
 * ends with the ratio B / A of the median decode GB/s and of the prefill GFLOP/s. Formats whose
 * code the flags leave as it is are the control: on the Zen 4 VM (5 rounds, 512 MB) the two
 * copies of unchanged Q4 / IQ4_NL code differed by 0.91-1.71x in one run (the copies also sit
 * at other addresses), while Q8_C with T0 against T1 ran 0.78-0.88x in all four shapes; read
 * a difference as real only when it is consistent across shapes and runs.
 *   cmake -S . -B build-ab -DCMAKE_BUILD_TYPE=Release -DSLATE_AB_KERNEL=avx512_vnni \
 *         -DSLATE_AB_FLAGS=-DSLATE_PF_STREAM=_MM_HINT_T0 && cmake --build build-ab -t bench_kq_ab
 *   build-ab/bench_kq_ab 5 256
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "convert/convert.h"
#include "core/core.h"
#include "kernels/kernels.h"
#include "bench_util.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N_THREADS = 2, PREFILL_ROWS = 128, DECODE_REPS = 20, PREFILL_REPS = 2, N_VAR = 24,
       MAX_REPS = 64 * DECODE_REPS };

typedef struct job {
    const slate__kernels *k;
    const slate__wmat *w;
    float *y;
    const float *x;
    void *xq;
    int64_t n_rows, chunk, row_align;
    atomic_llong next;
} job;

static void run_matmul(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    job *j = ctx;
    for (;;) {
        int64_t o0 = atomic_fetch_add(&j->next, 1) * j->chunk;
        if (o0 >= j->w->n_out) return;
        int64_t o1 = o0 + j->chunk < j->w->n_out ? o0 + j->chunk : j->w->n_out;
        j->k->matmul[j->w->dtype](j->y, j->x, j->xq, j->w, NULL, j->n_rows, o0, o1);
    }
}

static void run_quantize(void *ctx, int ith, int nth) {
    job *j = ctx;
    int64_t a = j->row_align, units = (j->n_rows + a - 1) / a;
    int64_t u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
    int64_t r1 = u1 * a < j->n_rows ? u1 * a : j->n_rows;
    if (u0 * a < r1) j->k->quantize_x[j->w->dtype](j->xq, j->x, j->w, j->n_rows, u0 * a, r1);
}

/* One matmul as exec runs it (on n_threads of the pool: 1 runs it on this thread); returns
 * seconds. */
static double matmul_once(slate__pool *pool, const slate__kernels *k, const slate__wmat *w,
                          float *y, const float *x, void *xq, int64_t n_rows) {
    job j = {.k = k, .w = w, .y = y, .x = x, .xq = NULL, .n_rows = n_rows, .row_align = 1};
    int64_t c = (w->n_out + 8 * N_THREADS - 1) / (8 * N_THREADS);
    j.chunk = c < 32 ? 32 : (c + 31) / 32 * 32;
    atomic_init(&j.next, 0);
    double t0 = now();
    if (k->xq_plan[w->dtype]) {
        slate__xq_plan pl = k->xq_plan[w->dtype](w, n_rows);
        j.xq = xq;
        j.row_align = pl.row_align;
        if (n_rows < 16) run_quantize(&j, 0, 1);
        else slate__pool_run(pool, run_quantize, &j);
    }
    if (pool) slate__pool_run(pool, run_matmul, &j);
    else run_matmul(&j, 0, 1);
    return now() - t0;
}

typedef struct variant {
    const char *name;
    int tb; /* A/B mode: 0 = table A, 1 = table B */
    slate_dtype dt;
    int32_t block;
    bool asym;
    uint8_t *w; /* n_copies copies of the tensor, back to back (64-aligned) */
    size_t bytes, stride;
    int n_copies, n_dec;
    double dec[MAX_REPS], pre_best;
} variant;

static void put_f16(uint8_t *p, float f) {
    uint16_t h = slate__f32_to_f16(f);
    memcpy(p, &h, 2);
}

static uint8_t *make_tensor(const variant *v, int64_t n_out, int64_t n_in, uint64_t *r) {
    uint64_t bytes = slate__wmat_bytes(v->dt, v->block, v->asym, n_out, n_in);
    uint8_t *w = aligned_alloc(64, (bytes + 63) / 64 * 64);
    slate__wmat m;
    slate__wmat_init(&m, w, v->dt, v->block, v->asym, n_out, n_in);
    if (slate__wdtype_superblock(v->dt) || v->dt == SLATE_DTYPE_IQ4_NL) {
        for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)(rnd(r) >> 32);
        /* Q5_K has Q4_K's header {d, dmin, scales}, its codes reach 31 */
        bool k4 = v->dt == SLATE_DTYPE_Q4_K || v->dt == SLATE_DTYPE_Q5_K;
        bool k5 = v->dt == SLATE_DTYPE_Q5_K;
        size_t bb = m.row_bytes / (size_t)(n_in / v->block);
        for (size_t b = 0; b < bytes / bb; b++) { /* finite f16 scales of a trained model's size */
            uint8_t *blk = w + b * bb;
            if (v->dt == SLATE_DTYPE_IQ4_NL) {
                put_f16(blk, 0.02f / 127 * (1 + rndf(r)));
            } else if (v->dt == SLATE_DTYPE_IQ4_XS) {
                put_f16(blk, 0.02f / (127 * 32) * (1 + rndf(r)));
            } else if (k4) {
                put_f16(blk, 0.02f / ((k5 ? 31 : 15) * 63) * (1 + rndf(r)));
                put_f16(blk + 2, 0.01f / 63 * (1 + rndf(r)));
            } else if (v->dt == SLATE_DTYPE_Q3_K) {
                put_f16(blk + 108, 0.02f / (4 * 32) * (1 + rndf(r)));
            } else if (v->dt == SLATE_DTYPE_Q2_K) {
                put_f16(blk + 80, 0.02f / (3 * 15) * (1 + rndf(r)));
                put_f16(blk + 82, 0.01f / 15 * (1 + rndf(r)));
            } else {
                put_f16(blk + 208, 0.02f / (32 * 128) * (1 + rndf(r)));
            }
        }
        return w;
    }
    if (v->dt == SLATE_DTYPE_F16) { /* weights of a trained model's size */
        for (size_t i = 0; i < bytes / 2; i++) put_f16(w + 2 * i, 0.04f * rndf(r));
        return w;
    }
    if (v->dt == SLATE_DTYPE_Q8_C) { /* the int8 rows, then one f32 scale per row */
        for (size_t i = 0; i < (size_t)(n_out * n_in); i++) w[i] = (uint8_t)(rnd(r) >> 32);
        for (int64_t o = 0; o < n_out; o++) {
            float sc = 0.02f / 127 * (1 + rndf(r));
            memcpy(w + (size_t)(n_out * n_in) + 4 * (size_t)o, &sc, 4);
        }
        return w;
    }
    float *row = malloc(sizeof(float) * (size_t)n_in);
    for (int64_t o = 0; o < n_out; o++) {
        for (int64_t i = 0; i < n_in; i++) row[i] = rndf(r) * 0.04f;
        uint8_t *dst = w + (size_t)o * m.row_bytes;
        if (v->dt == SLATE_DTYPE_Q8_0) slate__quantize_q8_0(row, n_in, dst);
        else slate__quantize_q4(row, n_in, v->block, v->asym, dst);
    }
    free(row);
    return w;
}

static double rel_rms(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void shape(slate__pool *pool, const slate__kernels *const tb[2], int64_t n_out, int64_t n_in,
                  int rounds, size_t copy_bytes) {
    const slate__kernels *ref = slate__kernels_by_name("ref");
    static const variant formats[] = {
        {.name = "q4_b32a", .dt = SLATE_DTYPE_Q4, .block = 32, .asym = true},
        {.name = "q4_k", .dt = SLATE_DTYPE_Q4_K, .block = 256},
        {.name = "q5_k", .dt = SLATE_DTYPE_Q5_K, .block = 256},
        {.name = "q8_0", .dt = SLATE_DTYPE_Q8_0, .block = 32},
        {.name = "q6_k", .dt = SLATE_DTYPE_Q6_K, .block = 256},
        {.name = "q3_k", .dt = SLATE_DTYPE_Q3_K, .block = 256},
        {.name = "q2_k", .dt = SLATE_DTYPE_Q2_K, .block = 256},
        {.name = "q4_b32", .dt = SLATE_DTYPE_Q4, .block = 32},
        {.name = "iq4_nl", .dt = SLATE_DTYPE_IQ4_NL, .block = 32},
        {.name = "iq4_xs", .dt = SLATE_DTYPE_IQ4_XS, .block = 256},
        {.name = "f16", .dt = SLATE_DTYPE_F16},   /* A/B mode only */
        {.name = "q8_c", .dt = SLATE_DTYPE_Q8_C}, /* A/B mode only */
    };
    static variant v[N_VAR];
    int nv = 0;
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        if (!tb[1]) { /* the formats this bench is about, on one table */
            if (formats[f].dt == SLATE_DTYPE_F16 || formats[f].dt == SLATE_DTYPE_Q8_C) continue;
            v[nv++] = formats[f];
        } else if (tb[0]->matmul[formats[f].dt] != tb[1]->matmul[formats[f].dt]) {
            for (int t = 0; t < 2; t++) { /* only what the file under test provides */
                v[nv] = formats[f];
                v[nv++].tb = t;
            }
        }
    }
    if (nv == 0) {
        printf("[%lld][%lld]: the two tables share every matmul: nothing to compare\n",
               (long long)n_out, (long long)n_in);
        return;
    }
    uint64_t r = 88172645463325252ull;
    for (int i = 0; i < nv; i++) {
        uint8_t *one = make_tensor(&v[i], n_out, n_in, &r);
        v[i].bytes = (size_t)slate__wmat_bytes(v[i].dt, v[i].block, v[i].asym, n_out, n_in);
        v[i].stride = (v[i].bytes + 63) / 64 * 64;
        v[i].n_copies = (int)((copy_bytes + v[i].bytes - 1) / v[i].bytes);
        v[i].w = aligned_alloc(64, v[i].stride * (size_t)v[i].n_copies);
        for (int c = 0; c < v[i].n_copies; c++) memcpy(v[i].w + v[i].stride * (size_t)c, one, v[i].bytes);
        free(one);
        v[i].n_dec = 0;
        v[i].pre_best = 1e9;
    }
    float *x = malloc(sizeof(float) * (size_t)(PREFILL_ROWS * n_in));
    for (int64_t i = 0; i < PREFILL_ROWS * n_in; i++) x[i] = rndf(&r) * 2.0f;
    float *y = malloc(sizeof(float) * (size_t)(PREFILL_ROWS * n_out));
    float *y1 = malloc(sizeof(float) * (size_t)n_out);
    size_t xq_max = 0;
    for (int i = 0; i < nv; i++) {
        slate__wmat m;
        slate__wmat_init(&m, v[i].w, v[i].dt, v[i].block, v[i].asym, n_out, n_in);
        for (int64_t rows = 1; rows <= PREFILL_ROWS; rows *= PREFILL_ROWS) {
            const slate__kernels *k = tb[v[i].tb];
            size_t b = k->xq_plan[v[i].dt] ? k->xq_plan[v[i].dt](&m, rows).bytes : 0;
            if (b > xq_max) xq_max = b;
        }
    }
    void *xq = aligned_alloc(64, (xq_max + 64) / 64 * 64);
    double err_dec[N_VAR], err_pre[N_VAR];
    for (int i = 0; i < nv; i++) { /* the check, once */
        slate__wmat m;
        slate__wmat_init(&m, v[i].w, v[i].dt, v[i].block, v[i].asym, n_out, n_in);
        matmul_once(NULL, ref, &m, y1, x, xq, 1);
        matmul_once(pool, tb[v[i].tb], &m, y, x, xq, 1);
        err_dec[i] = rel_rms(y, y1, (size_t)n_out);
        memcpy(y1, y, sizeof(float) * (size_t)n_out);
        matmul_once(pool, tb[v[i].tb], &m, y, x, xq, PREFILL_ROWS);
        err_pre[i] = rel_rms(y, y1, (size_t)n_out);
    }
    int copy = 0;
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < nv; i++) {
            slate__wmat m;
            for (int rep = 0; rep < DECODE_REPS; rep++) {
                slate__wmat_init(&m, v[i].w + v[i].stride * (size_t)(copy++ % v[i].n_copies),
                                 v[i].dt, v[i].block, v[i].asym, n_out, n_in);
                double t = matmul_once(pool, tb[v[i].tb], &m, y, x, xq, 1);
                if (v[i].n_dec < MAX_REPS) v[i].dec[v[i].n_dec++] = t;
            }
            slate__wmat_init(&m, v[i].w, v[i].dt, v[i].block, v[i].asym, n_out, n_in);
            for (int rep = 0; rep < PREFILL_REPS; rep++) {
                double t = matmul_once(pool, tb[v[i].tb], &m, y, x, xq, PREFILL_ROWS);
                if (t < v[i].pre_best) v[i].pre_best = t;
            }
        }
    }
    printf("[%lld][%lld], %d threads, %s, %d rounds (decode %d calls/round over %zu MB of "
           "copies each, prefill %d rows x %d calls/round):\n", (long long)n_out, (long long)n_in,
           N_THREADS, tb[0]->name, rounds, DECODE_REPS, copy_bytes >> 20, PREFILL_ROWS,
           PREFILL_REPS);
    printf("  %-8s %8s  %8s %8s %8s  %10s %9s  %s\n", "format", "MiB", "dec us", "GB/s",
           "GB/s med", "prefill ms", "GFLOP/s", "rel RMS: decode vs ref, prefill vs decode");
    double med_gbs[N_VAR];
    for (int i = 0; i < nv; i++) {
        qsort(v[i].dec, (size_t)v[i].n_dec, sizeof(double), cmp_double);
        double b = v[i].dec[0], med = v[i].dec[v[i].n_dec / 2];
        double flops = 2.0 * PREFILL_ROWS * (double)n_out * (double)n_in;
        char name[24];
        snprintf(name, sizeof name, "%s%s", v[i].name, !tb[1] ? "" : v[i].tb ? "/B" : "/A");
        med_gbs[i] = (double)v[i].bytes / med / 1e9;
        printf("  %-8s %8.2f  %8.1f %8.1f %8.1f  %10.2f %9.1f  %.1e / %.1e\n", name,
               (double)v[i].bytes / (1 << 20), b * 1e6, (double)v[i].bytes / b / 1e9,
               (double)v[i].bytes / med / 1e9, v[i].pre_best * 1e3, flops / v[i].pre_best / 1e9,
               err_dec[i], err_pre[i]);
    }
    for (int i = 0; tb[1] && i + 1 < nv; i += 2) /* A/B mode: pairs A, B of one format */
        printf("  %-8s B / A: decode median GB/s %.3f, prefill GFLOP/s %.3f\n", v[i].name,
               med_gbs[i + 1] / med_gbs[i], v[i].pre_best / v[i + 1].pre_best);
    for (int i = 0; i < nv; i++) free(v[i].w);
    free(x);
    free(y);
    free(y1);
    free(xq);
}

#ifdef SLATE_AB
void slate__ab_fill_b(slate__kernels *k); /* the second copy (CMakeLists.txt) */
#else
#define SLATE_AB_WHAT ""
#endif

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    size_t copy_mb = argc > 2 ? (size_t)atol(argv[2]) : 512;
    const slate__kernels *k = argc > 3 ? slate__kernels_by_name(argv[3]) : slate__kernels_get();
    if (rounds < 1 || rounds > 64 || copy_mb < 1 || !k) {
        fprintf(stderr, "usage: bench_kq_matvec [rounds 1..64 [copy MB >= 1 [kernel set this "
                "CPU runs]]]\n");
        return 2;
    }
    const slate__kernels *tb[2] = {k, NULL};
#ifdef SLATE_AB
    /* table B: table A with the entries of the second copy of the file under test */
    static slate__kernels kb;
    kb = *k;
    slate__ab_fill_b(&kb);
    tb[1] = &kb;
#endif
    slate__pool *pool;
    if (slate__pool_create(N_THREADS, &pool, NULL)) return 1;
    printf("kernels: %s%s\n", k->name, tb[1] ? " (A), and B: " SLATE_AB_WHAT : "");
    static const int64_t shapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        shape(pool, tb, shapes[s][0], shapes[s][1], rounds, copy_mb << 20);
    slate__pool_free(pool);
    return 0;
}
