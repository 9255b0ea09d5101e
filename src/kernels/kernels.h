/*
 * kernels.h - the kernel table. Every kernel has a plain scalar reference in kernels/ref/ (the
 * specification and the fallback on any CPU); ISA variants in kernels/<isa>/ share the
 * signatures and are picked once, at first use, from the CPU's features. SLATE_KERNELS=ref
 * (or avx2, avx512) in the environment forces a path.
 *
 * Kernels are pure: pointers, dims and strides in, results out; no allocation, I/O or globals.
 * Parallel callers split work by giving each call a range (output columns, heads).
 */
#ifndef SLATE_KERNELS_H
#define SLATE_KERNELS_H

#include "slate.h"

#include <stdint.h>

#define SLATE__MAX_HEAD_DIM 512

/* y[r][o] = sum_i x[r][i] * W[o][i] (+ bias[o]) for r in [0, n_rows), o in [o0, o1).
 * x: [n_rows][n_in] f32; W: [n_out][n_in] of the table slot's dtype; bias: [n_out] f32 or NULL;
 * y: [n_rows][n_out] f32 (only columns o0..o1 are written). */
typedef void (*slate__matmul_fn)(float *y, const float *x, const void *w, const float *bias,
                                 int64_t n_rows, int64_t n_in, int64_t n_out, int64_t o0,
                                 int64_t o1);

/* dst[0..n) = (float)src[0..n) for a weight row of the slot's dtype. */
typedef void (*slate__to_f32_fn)(float *dst, const void *src, int64_t n);

/* One query row, one head, over cache positions j0..j1-1 (fused, streaming softmax):
 *   s_j = scale * q . k_j (+ mask[j] when mask != NULL);  out = sum_j softmax(s)_j v_j
 * q: [head_dim] f32; k, v: base of this kv head's rows, row j at k + j * stride elements, of
 * dtype kv_dtype (F32 or F16); out: [head_dim] f32. If every score is -inf, out is 0. */
typedef void (*slate__attn_fn)(float *out, const float *q, const void *k, const void *v,
                               slate_dtype kv_dtype, int64_t stride, int64_t j0, int64_t j1,
                               int64_t head_dim, float scale, const float *mask);

typedef struct slate__kernels {
    const char *name;                  /* "ref", "avx2", "avx512" */
    slate__matmul_fn matmul[3];        /* indexed by SLATE_DTYPE_F32 / F16 / BF16 */
    slate__to_f32_fn to_f32[3];
    slate__attn_fn attention;
    /* y[0..n) = x / sqrt(mean(x^2) + eps) * w */
    void (*rms_norm)(float *y, const float *x, const float *w, int64_t n, float eps);
} slate__kernels;

/* The table for this CPU (detected once, thread-safe). */
const slate__kernels *slate__kernels_get(void);
/* Tables by name for tests: "ref", "avx2", "avx512"; NULL if not built or not supported by
 * this CPU. */
const slate__kernels *slate__kernels_by_name(const char *name);

/* Reference kernels (kernels/ref/ref.c); variants fall back to these for what they lack. */
void slate__ref_fill(slate__kernels *k);
#ifdef SLATE_HAVE_avx2
void slate__avx2_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx512
void slate__avx512_fill(slate__kernels *k);
#endif

#endif /* SLATE_KERNELS_H */
