/* xqsplit.h - a check shared by the kernel tests of the formats that quantize x
 * (test_quant_kernels.c, test_pal_kernels.c): exec quantizes x on several threads, each taking
 * a range of rows that starts at a multiple of the plan's row_align, so quantizing x in one
 * call and row block by row block must write the same bytes. */
#ifndef SLATE_TEST_XQSPLIT_H
#define SLATE_TEST_XQSPLIT_H

#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "testutil.h"

/* Quantizes random x [n_rows][wm->n_in] with k's quantizer for wm's dtype whole and by row
 * blocks; *pl receives the plan. Returns true when both wrote the same bytes (or the plan has
 * no bytes: the table does not quantize x for this matrix). */
static inline bool xq_split_matches(const slate__kernels *k, const slate__wmat *wm,
                                    int64_t n_rows, uint64_t *rng, slate__xq_plan *pl) {
    slate_dtype dt = wm->dtype;
    *pl = k->xq_plan[dt](wm, n_rows);
    if (!pl->bytes) return true;
    float *x = malloc((size_t)(n_rows * wm->n_in) * sizeof(float));
    uint8_t *a = malloc(pl->bytes), *b = malloc(pl->bytes);
    assert_non_null(x);
    assert_non_null(a);
    assert_non_null(b);
    for (int64_t i = 0; i < n_rows * wm->n_in; i++) x[i] = tu_randf(rng);
    memset(a, 0x11, pl->bytes);
    memset(b, 0x22, pl->bytes);
    k->quantize_x[dt](a, x, wm, n_rows, 0, n_rows);
    for (int64_t r = 0; r < n_rows; r += pl->row_align)
        k->quantize_x[dt](b, x, wm, n_rows, r,
                          r + pl->row_align < n_rows ? r + pl->row_align : n_rows);
    bool same = memcmp(a, b, pl->bytes) == 0;
    free(x);
    free(a);
    free(b);
    return same;
}

#endif
