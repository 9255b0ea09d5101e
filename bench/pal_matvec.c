/* pal_matvec.c - one-thread matvec of a [2048][5632] weight (TinyLlama's ffn_down shape) as PAL
 * 4-bit (group 16), PAL 2-bit and Q4 block 32, with the best kernel table of this CPU: weight
 * GB/s = tensor bytes / time, best of 50 runs after 5 warm-ups (the Q4 time includes the
 * table's activation quantization, as exec would run it). Not part of the build:
 *   cc -O2 -Iinclude -Isrc bench/pal_matvec.c build-pal/libslate.a -lcjson -lpcre2-8 \
 *      -lunistring -lm -lpthread -o /tmp/pal_matvec && /tmp/pal_matvec
 */
#include "convert/convert.h"
#include "core/core.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N_OUT = 2048, N_IN = 5632 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void run(const char *name, const slate__kernels *k, slate_dtype dt, int32_t block,
                const float *x, const float *wf) {
    uint64_t bytes = slate__wmat_bytes(dt, block, false, N_OUT, N_IN);
    uint8_t *w = aligned_alloc(64, (bytes + 63) / 64 * 64);
    slate__src_tensor t = {.type = SLATE__SRC_F32, .n_dims = 2, .dims = {N_OUT, N_IN},
                           .data = (const uint8_t *)wf, .nbytes = (uint64_t)N_OUT * N_IN * 4};
    strcpy(t.name, name);
    slate__qspec q = {&t, dt, block, false, N_OUT, N_IN};
    slate_status s = dt == SLATE_DTYPE_PAL ? slate__palettize_tensor(&q, w, NULL, NULL)
                                           : slate__quantize_tensor(&q, w, NULL, NULL);
    if (s) { fprintf(stderr, "%s: status %d\n", name, (int)s); exit(1); }
    slate__wmat m;
    slate__wmat_init(&m, w, dt, block, false, N_OUT, N_IN);
    static float y[N_OUT];
    void *xq = NULL;
    size_t xq_bytes = k->xq_plan[dt] ? k->xq_plan[dt](&m, 1).bytes : 0;
    if (xq_bytes) xq = aligned_alloc(64, (xq_bytes + 63) / 64 * 64);
    double best = 1e9;
    for (int it = 0; it < 55; it++) {
        double t0 = now();
        if (xq) k->quantize_x[dt](xq, x, &m, 1, 0, 1);
        k->matmul[dt](y, x, xq, &m, NULL, 1, 0, N_OUT);
        double dt_s = now() - t0;
        if (it >= 5 && dt_s < best) best = dt_s;
    }
    printf("%-8s kernels %-12s %8.3f MiB  %7.1f us  %6.1f GB/s  (y[7] = %.4f)\n", name, k->name,
           (double)bytes / (1 << 20), best * 1e6, (double)bytes / best / 1e9, y[7]);
    free(xq);
    free(w);
}

int main(void) {
    const slate__kernels *k = slate__kernels_get();
    float *x = malloc(sizeof(float) * N_IN), *wf = malloc(sizeof(float) * N_OUT * N_IN);
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < (size_t)N_OUT * N_IN; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        wf[i] = ((float)(r >> 40) / (float)(1 << 24) - 0.5f) * 0.04f;
    }
    for (int i = 0; i < N_IN; i++) x[i] = wf[i] * 25.0f;
    run("pal4", k, SLATE_DTYPE_PAL, slate__pal_layout(4, 16), x, wf);
    run("pal2", k, SLATE_DTYPE_PAL, slate__pal_layout(2, 16), x, wf);
    run("q4_b32", k, SLATE_DTYPE_Q4, 32, x, wf);
    run("pal4", slate__kernels_by_name("ref"), SLATE_DTYPE_PAL, slate__pal_layout(4, 16), x, wf);
    run("q4_b32", slate__kernels_by_name("ref"), SLATE_DTYPE_Q4, 32, x, wf);
    free(x);
    free(wf);
    return 0;
}
