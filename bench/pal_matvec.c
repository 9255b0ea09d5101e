/* pal_matvec.c - A/B of the palettized (PAL) matmul kernels in one process, on TinyLlama's FFN
 * shapes [5632][2048] (ffn_up/gate) and [2048][5632] (ffn_down), 2 threads (exec's split: an
 * atomic counter hands out chunks of 32-column multiples, ~8 per thread):
 *   old  the avx512 table's PAL matmul (x86/avx512_pal.c: f32 tables, f32 x)
 *   new  the best table's (avx512_vnni + VBMI: x86/avx512_vbmi.c, u8 tables, int8 x)
 * for bits 2, 3, 4, 6, 8 (group 16), and Q4 block 32 on the best table for comparison.
 *   decode   one row; weight GB/s = tensor bytes / time. Each call reads the next of enough
 *            copies of the tensor (>= 512 MB: the 32 MiB L3 is a victim cache and kept part of
 *            96 MB) to stream from DRAM, as a model's layers do. The time includes quantize_x
 *            (on the calling thread, as exec does).
 *   prefill  PREFILL_ROWS rows; GFLOP/s = 2 rows n_out n_in / time (int8 ops count as flops),
 *            quantize_x on the pool included.
 * Variants run interleaved, [rounds] rounds (default 5), best time of each: the VM's other
 * load moves single numbers by +-20 % and more. Random indices and tables (speed does not
 * depend on the values); the new result is compared with the old one (relative RMS difference
 * printed: ~5e-3 is the int8 rounding of x, a wrong kernel gives ~1). Built with the project (not
 * installed, not run by the tests): build/bench_pal_matvec [rounds]
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

enum { N_THREADS = 2, PREFILL_ROWS = 64, DECODE_REPS = 20, PREFILL_REPS = 2 };
#define COPY_BYTES (512u << 20)

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

/* One matmul as exec runs it; returns seconds. */
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
    slate__pool_run(pool, run_matmul, &j);
    return now() - t0;
}

typedef struct variant {
    const char *name;
    const slate__kernels *k;
    slate_dtype dt;
    int32_t block;
    uint8_t *w;          /* n_copies copies of the tensor, back to back (64-aligned) */
    size_t bytes, stride;
    int n_copies;
    double dec_best, pre_best;
} variant;

static uint8_t *make_tensor(slate_dtype dt, int32_t block, int64_t n_out, int64_t n_in,
                            size_t *bytes_out, uint64_t *r) {
    uint64_t bytes = slate__wmat_bytes(dt, block, false, n_out, n_in);
    uint8_t *w = aligned_alloc(64, (bytes + 63) / 64 * 64);
    slate__wmat m;
    slate__wmat_init(&m, w, dt, block, false, n_out, n_in);
    if (dt == SLATE_DTYPE_PAL) {
        for (size_t i = 0; i < (size_t)n_out * m.row_bytes; i++) w[i] = (uint8_t)(rnd(r) >> 32);
        int64_t n_lut = (n_out + m.group - 1) / m.group << m.bits;
        for (int64_t i = 0; i < n_lut; i++)
            ((uint16_t *)m.lut)[i] = slate__f32_to_f16(((float)(rnd(r) >> 40) / (1 << 24) - 0.5f) * 0.08f);
    } else {
        float *row = malloc(sizeof(float) * (size_t)n_in);
        for (int64_t o = 0; o < n_out; o++) {
            for (int64_t i = 0; i < n_in; i++) row[i] = ((float)(rnd(r) >> 40) / (1 << 24) - 0.5f) * 0.04f;
            slate__quantize_q4(row, n_in, block, false, w + (size_t)o * m.row_bytes);
        }
        free(row);
    }
    *bytes_out = (size_t)bytes;
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

static void shape(slate__pool *pool, int64_t n_out, int64_t n_in, int rounds) {
    const slate__kernels *old = slate__kernels_by_name("avx512"), *best = slate__kernels_get();
    static const int bits_all[] = {2, 3, 4, 6, 8};
    variant v[11];
    int nv = 0;
    uint64_t r = 88172645463325252ull;
    for (int b = 0; b < 5; b++) {
        size_t bytes;
        int32_t layout = slate__pal_layout(bits_all[b], 16);
        uint8_t *one = make_tensor(SLATE_DTYPE_PAL, layout, n_out, n_in, &bytes, &r);
        size_t stride = (bytes + 63) / 64 * 64;
        int n_copies = (int)((COPY_BYTES + bytes - 1) / bytes);
        uint8_t *all = aligned_alloc(64, stride * (size_t)n_copies);
        for (int c = 0; c < n_copies; c++) memcpy(all + stride * (size_t)c, one, bytes);
        free(one);
        static char names[5][2][16];
        snprintf(names[b][0], 16, "pal%d old", bits_all[b]);
        snprintf(names[b][1], 16, "pal%d new", bits_all[b]);
        v[nv++] = (variant){names[b][0], old, SLATE_DTYPE_PAL, layout, all, bytes, stride, n_copies, 1e9, 1e9};
        v[nv++] = (variant){names[b][1], best, SLATE_DTYPE_PAL, layout, all, bytes, stride, n_copies, 1e9, 1e9};
    }
    {
        size_t bytes;
        uint8_t *one = make_tensor(SLATE_DTYPE_Q4, 32, n_out, n_in, &bytes, &r);
        size_t stride = (bytes + 63) / 64 * 64;
        int n_copies = (int)((COPY_BYTES + bytes - 1) / bytes);
        uint8_t *all = aligned_alloc(64, stride * (size_t)n_copies);
        for (int c = 0; c < n_copies; c++) memcpy(all + stride * (size_t)c, one, bytes);
        free(one);
        v[nv++] = (variant){"q4_b32", best, SLATE_DTYPE_Q4, 32, all, bytes, stride, n_copies, 1e9, 1e9};
    }
    float *x = malloc(sizeof(float) * (size_t)(PREFILL_ROWS * n_in));
    for (int64_t i = 0; i < PREFILL_ROWS * n_in; i++) x[i] = ((float)(rnd(&r) >> 40) / (1 << 24) - 0.5f) * 2.0f;
    float *y = malloc(sizeof(float) * (size_t)(PREFILL_ROWS * n_out));
    float *y_old = malloc(sizeof(float) * (size_t)(PREFILL_ROWS * n_out));
    size_t xq_max = 0;
    for (int i = 0; i < nv; i++) {
        slate__wmat m;
        slate__wmat_init(&m, v[i].w, v[i].dt, v[i].block, false, n_out, n_in);
        for (int64_t rows = 1; rows <= PREFILL_ROWS; rows *= PREFILL_ROWS) {
            size_t b = v[i].k->xq_plan[v[i].dt] ? v[i].k->xq_plan[v[i].dt](&m, rows).bytes : 0;
            if (b > xq_max) xq_max = b;
        }
    }
    void *xq = aligned_alloc(64, (xq_max + 64) / 64 * 64);
    double err_dec[5] = {0}, err_pre[5] = {0};
    int copy = 0;
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < nv; i++) {
            slate__wmat m;
            for (int rep = 0; rep < DECODE_REPS; rep++) {
                slate__wmat_init(&m, v[i].w + v[i].stride * (size_t)(copy++ % v[i].n_copies),
                                 v[i].dt, v[i].block, false, n_out, n_in);
                double t = matmul_once(pool, v[i].k, &m, y, x, xq, 1);
                if (t < v[i].dec_best) v[i].dec_best = t;
            }
            slate__wmat_init(&m, v[i].w, v[i].dt, v[i].block, false, n_out, n_in);
            if (round == 0 && i < 10) { /* new vs old, decode and prefill */
                if (i % 2 == 0) {
                    matmul_once(pool, v[i].k, &m, y_old, x, xq, 1);
                } else {
                    matmul_once(pool, v[i].k, &m, y, x, xq, 1);
                    err_dec[i / 2] = rel_rms(y, y_old, (size_t)n_out);
                }
            }
            for (int rep = 0; rep < PREFILL_REPS; rep++) {
                double t = matmul_once(pool, v[i].k, &m, y, x, xq, PREFILL_ROWS);
                if (t < v[i].pre_best) v[i].pre_best = t;
            }
            if (round == 0 && i < 10) {
                if (i % 2 == 0) memcpy(y_old, y, sizeof(float) * (size_t)(PREFILL_ROWS * n_out));
                else err_pre[i / 2] = rel_rms(y, y_old, (size_t)(PREFILL_ROWS * n_out));
            }
        }
    }
    printf("[%lld][%lld], %d threads, best of %d rounds (decode %d calls/round over %.0f MB of "
           "copies, prefill %d rows x %d calls/round):\n", (long long)n_out, (long long)n_in,
           N_THREADS, rounds, DECODE_REPS, COPY_BYTES / 1e6, PREFILL_ROWS, PREFILL_REPS);
    printf("  %-9s %-12s %8s  %9s %8s  %10s %9s  %s\n", "format", "kernels", "MiB", "decode us",
           "GB/s", "prefill ms", "GFLOP/s", "new vs old (rel RMS, decode / prefill)");
    for (int i = 0; i < nv; i++) {
        double flops = 2.0 * PREFILL_ROWS * (double)n_out * (double)n_in;
        printf("  %-9s %-12s %8.2f  %9.1f %8.1f  %10.2f %9.1f", v[i].name, v[i].k->name,
               (double)v[i].bytes / (1 << 20), v[i].dec_best * 1e6, (double)v[i].bytes / v[i].dec_best / 1e9,
               v[i].pre_best * 1e3, flops / v[i].pre_best / 1e9);
        if (i < 10 && i % 2 == 1) printf("  %.2e / %.2e", err_dec[i / 2], err_pre[i / 2]);
        printf("\n");
        if (i == 0 || v[i].w != v[i - 1].w) free(v[i].w); /* old and new share a tensor */
    }
    free(x);
    free(y);
    free(y_old);
    free(xq);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (!slate__kernels_by_name("avx512")) {
        fprintf(stderr, "pal_matvec: this CPU has no avx512 table\n");
        return 1;
    }
    slate__pool *pool;
    if (slate__pool_create(N_THREADS, &pool, NULL)) return 1;
    printf("kernels: old = avx512, new = %s (%s)\n", slate__kernels_get()->name,
           slate__kernels_get()->xq_plan[SLATE_DTYPE_PAL] ? "integer PAL" : "no integer PAL");
    shape(pool, 5632, 2048, rounds);
    shape(pool, 2048, 5632, rounds);
    slate__pool_free(pool);
    return 0;
}
