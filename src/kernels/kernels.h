/*
 * kernels.h - the kernel table. Every kernel has a plain scalar reference in kernels/ref/ (the
 * specification and the fallback on any CPU); ISA variants in kernels/<isa>/ share the
 * signatures and are picked once, at first use, from the CPU's features. SLATE_KERNELS=ref
 * (or avx2, avx2_vnni, avx512, avx512_vnni on x86-64; neon, neon_dotprod on AArch64) in the
 * environment forces a path; any other value, or a set the CPU lacks, is refused at open.
 *
 * Kernels are pure: pointers, dims and strides in, results out; no allocation, I/O or globals.
 * Parallel callers split work by giving each call a range (output columns, heads).
 */
#ifndef SLATE_KERNELS_H
#define SLATE_KERNELS_H

#include "kernels/quant.h"
#include "slate.h"

#include <stdint.h>

#define SLATE__MAX_HEAD_DIM 512

/* y[r][o] = sum_i x[r][i] * W[o][i] (+ bias[o]) for r in [0, n_rows), o in [o0, o1).
 * x: [n_rows][w->n_in] f32; w: the matrix as stored (quant.h), of the table slot's dtype;
 * xq: NULL when the slot has no quantize_x, else x as that slot's quantize_x wrote it for the
 * same w and n_rows (the kernel may read x, xq or both); bias: [n_out] f32 or NULL;
 * y: [n_rows][w->n_out] f32 (only columns o0..o1 are written). */
typedef void (*slate__matmul_fn)(float *y, const float *x, const void *xq, const slate__wmat *w,
                                 const float *bias, int64_t n_rows, int64_t o0, int64_t o1);

/* Activation quantization that a slot's matmul wants, for w and n_rows rows:
 *   bytes  the size of xq (0: the matmul reads f32 x and quantize_x is not called); it never
 *          decreases as n_rows grows, so the compiler reserves bytes(max_query);
 *   layout an id: two matmuls (of any slot) whose plans have the same nonzero layout and n_rows
 *          read the same xq, so exec quantizes x once for both (q/k/v, gate/up);
 *   row_align  quantize_x is called on row ranges that start at multiples of it. */
typedef struct slate__xq_plan {
    size_t bytes;
    uint32_t layout;
    int32_t row_align;
} slate__xq_plan;
typedef slate__xq_plan (*slate__xq_plan_fn)(const slate__wmat *w, int64_t n_rows);
/* Writes rows [r0, r1) of x ([n_rows][w->n_in] f32) into xq in the plan's layout. Disjoint row
 * ranges may run on different threads. */
typedef void (*slate__xq_fn)(void *xq, const float *x, const slate__wmat *w, int64_t n_rows,
                             int64_t r0, int64_t r1);

/* dst[0..n_in) = W[row][:] as f32 (embedding lookups, any weight dtype). */
typedef void (*slate__row_fn)(float *dst, const slate__wmat *w, int64_t row);

/* dst[0..n) = (float)src[0..n) for a weight row of the slot's dtype (F32, F16, BF16). */
typedef void (*slate__to_f32_fn)(float *dst, const void *src, int64_t n);

/* One query row, the n_heads query heads that share one kv head (GQA), over cache positions
 * j0..j1-1 (fused, streaming softmax), for each head h:
 *   s_j = scale * q_h . k_j;  when softcap > 0 (Gemma 2) s_j = softcap * tanh(s_j / softcap);
 *   then s_j += mask[j] when mask != NULL;  out_h = sum_j softmax(s)_j v_j
 * softcap 0 turns the cap off (variants pick their path once per call, not per score).
 * q, out: [n_heads][head_dim] f32 (consecutive heads); k, v: base of this kv head's rows, row j
 * at k + j * stride elements, of dtype kv_dtype (F32 or F16). If every score is -inf, out_h is
 * 0. Variants read each K/V row once for several heads instead of once per head.
 * n_rows > 1 (a prefill's consecutive query rows in one call; exec's run_attention): the
 * n_heads heads are n_rows rows of n_heads / n_rows heads each, and row i (from 0) ends at
 * e_i = j1 - n_rows + 1 + i (slate__attn_head_end: the causal end of each row, the last row's
 * being j1), so one pass over K and V serves every row. Then n_rows divides n_heads,
 * j1 - n_rows >= j0 and mask is NULL. window > 0 (the model's sliding window) also starts each
 * row at e_i - window where that is past j0 (slate__attn_head_start), with n_rows 1 too. So
 * row i sees [max(j0, e_i - window), e_i); n_rows 1, window 0: one row over [j0, j1). */
typedef void (*slate__attn_fn)(float *out, const float *q, const void *k, const void *v,
                               slate_dtype kv_dtype, int64_t stride, int64_t j0, int64_t j1,
                               int64_t head_dim, int64_t n_heads, int64_t n_rows, int64_t window,
                               float scale, float softcap, const float *mask);

/* The end (one past the last position) head h sees in a call of n_rows rows (slate__attn_fn). */
static inline int64_t slate__attn_head_end(int64_t j1, int64_t h, int64_t n_heads,
                                           int64_t n_rows) {
    return j1 - (n_rows - 1 - h / (n_heads / n_rows));
}

/* The first position a head ending at end sees in a call from j0 with window (slate__attn_fn). */
static inline int64_t slate__attn_head_start(int64_t j0, int64_t end, int64_t window) {
    return window > 0 && end - window > j0 ? end - window : j0;
}

/* Query heads one pass of the SIMD attention kernels serves (their HG): K and V rows are read
 * from memory once per pass, so exec batches a prefill's rows into passes of this many heads. */
enum { SLATE__ATTN_PASS_HEADS = 8 };

/* slate__attn_fn's attention over an f16 cache whose K is stored dim-major in blocks of 16
 * positions ("K16"): element d of position j at k + (j / 16) * 16 * head_dim + d * 16 + j % 16,
 * so a block's 16 values of one dim are one vector; V rows as in slate__attn_fn, stride
 * elements apart. head_dim 64 or 128, stride == head_dim (the head-major cache). The kernel
 * reads whole blocks: K and V must be readable from position j0 rounded down to a multiple of
 * 16 to j1 rounded up, and positions outside [j0, j1) in them are not used, whatever they hold.
 * Same results as slate__attn_fn on the same values within its tolerance; the bits of the table's
 * own attention on rows when j0 is a multiple of 16. */
typedef void (*slate__attn_k16_fn)(float *out, const float *q, const uint16_t *k, const uint16_t *v,
                                   int64_t stride, int64_t j0, int64_t j1, int64_t head_dim,
                                   int64_t n_heads, int64_t n_rows, int64_t window, float scale,
                                   float softcap, const float *mask);

/* The same over an int8 cache (slate state kv_dtype I8), for the n_heads query heads of one kv
 * head: row j of this kv head is the block at k + j * stride bytes: an f32 scale, then
 * head_dim int8 values (value = scale * q). */
typedef void (*slate__attn_i8_fn)(float *out, const float *q, const uint8_t *k, const uint8_t *v,
                                  int64_t stride, int64_t j0, int64_t j1, int64_t head_dim,
                                  int64_t n_heads, int64_t n_rows, int64_t window, float scale,
                                  float softcap, const float *mask);

/* Quantizes x[0..width) into one int8 cache row: per group of `group` elements a block of {f32
 * scale = max|x| / 127, group int8 values round(x / scale), padded to 4 bytes}. */
void slate__kv_quantize_i8(uint8_t *dst, const float *x, int64_t width, int32_t group);

typedef struct slate__kernels {
    /* "ref", "avx2", "avx2_vnni", "avx512", "avx512_vnni", "neon", "neon_dotprod" */
    const char *name;
    /* Per weight dtype (SLATE_DTYPE_F32 .. SLATE__N_WDTYPES - 1). A new weight format plugs in
     * here: a ref matmul + row_to_f32 (required), optionally SIMD variants and an activation
     * quantizer (xq_plan + quantize_x, both or neither). */
    slate__matmul_fn matmul[SLATE__N_WDTYPES];
    slate__xq_plan_fn xq_plan[SLATE__N_WDTYPES];
    slate__xq_fn quantize_x[SLATE__N_WDTYPES];
    slate__row_fn row_to_f32[SLATE__N_WDTYPES];
    slate__to_f32_fn to_f32[3];        /* F32 / F16 / BF16 rows (half-precision caches) */
    /* dst[0..n) = src[0..n) as f16 (the f16 cache's writer, exec's kv_write): round to nearest
     * even, overflow to +-inf, subnormals kept, bit for bit slate__f32_to_f16 for every value
     * but NaN, which gives a NaN (how much of its payload survives is the variant's). */
    void (*to_f16)(uint16_t *dst, const float *src, int64_t n);
    slate__attn_fn attention;
    slate__attn_i8_fn attention_i8;
    /* NULL where the table has none (every table but the AVX-512 ones): a state then keeps K as
     * rows. With it, f16 K caches of head_dim 64 or 128 are stored K16 (src/state/kvmem.c). */
    slate__attn_k16_fn attention_k16;
    /* dst row d (d < 16, dst_stride elements apart) = column d of the 16 rows of 16 16-bit
     * values at src (src_stride apart): a K16 block's 16 x 16 tiles to and from rows (the state
     * file, read_tensor, write_tensor; the transpose is its own inverse). */
    void (*transpose16)(uint16_t *dst, int64_t dst_stride, const uint16_t *src, int64_t src_stride);
    /* y[0..n) = x / sqrt(mean(x^2) + eps) * w */
    void (*rms_norm)(float *y, const float *x, const float *w, int64_t n, float eps);
    /* y[0..n) = silu(a) * b = a / (1 + e^-a) * b (the SwiGLU gate); y may be a or b. */
    void (*swiglu)(float *y, const float *a, const float *b, int64_t n);
    /* y[0..n) = gelu_tanh(a) * b (the GeGLU gate, Gemma), with PyTorch's tanh approximation
     * gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))); y may be a or b. */
    void (*geglu)(float *y, const float *a, const float *b, int64_t n);
    /* y[0..n) = cap * tanh(x / cap) (Gemma 2's final logit cap; cap > 0); y may be x. With
     * cap 1 it is tanh itself, which is how the tests check the variants' vector tanh. */
    void (*softcap)(float *y, const float *x, int64_t n, float cap);
    /* Rotary embedding of one token's n_heads heads (head h at x + h * head_dim): pair i <
     * rope_dim / 2 of each head, (u, v) = (x[i], x[i + rope_dim / 2]) when half (NeoX) or
     * (x[2i], x[2i + 1]) otherwise, becomes (u c[i] - v s[i], u s[i] + v c[i]); dims from
     * rope_dim to head_dim are copied. y may be x. */
    void (*rope)(float *y, const float *x, const float *c, const float *s, int64_t n_heads,
                 int64_t head_dim, int64_t rope_dim, bool half);
} slate__kernels;

/* The table for this CPU (detected once, thread-safe), or the one SLATE_KERNELS names. */
const slate__kernels *slate__kernels_get(void);
/* E_UNSUPPORTED, naming the sets this CPU runs, when SLATE_KERNELS names no set or one this CPU
 * or build lacks (slate__kernels_get then returns the fastest table, which must not be used in
 * its place); OK otherwise. slate_model_open calls it first. */
slate_status slate__kernels_check(slate_error *err);
/* Tables by name for tests: "ref", "avx2", "avx2_vnni", "avx512", "avx512_vnni", "neon",
 * "neon_dotprod"; NULL if not built or not supported by this CPU. */
const slate__kernels *slate__kernels_by_name(const char *name);

/* Reference kernels (kernels/ref/ref.c); variants fall back to these for what they lack. */
void slate__ref_fill(slate__kernels *k);
/* The weight-format part of the reference (kernels/ref/quant.c), called by slate__ref_fill. */
void slate__ref_quant_fill(slate__kernels *k);
/* The specification of every weight format: dst[0..n) = W[o][i0 .. i0 + n) as f32. */
void slate__ref_dequant(const slate__wmat *w, int64_t o, int64_t i0, int64_t n, float *dst);
#ifdef SLATE_HAVE_avx2
void slate__avx2_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx2_q
/* The integer Q8_0/Q4/Q8_C/IQ4_NL matmuls and their activation quantizer (int8 x in units of
 * 32), and IQ4_NL's row lookup, of the avx2 table (x86/avx2_q.c); the avx512 table inherits
 * them. */
void slate__avx2_q_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx2_vnni
/* The same matmuls with AVX-VNNI (VEX vpdpbusd) dot products (x86/avx2_vnni.c). */
void slate__avx2_vnni_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx2_k
/* The integer Q2_K..Q6_K and IQ4_XS matmuls of the avx2 table (x86/avx2_k.c; the avx512 table
 * inherits them), and their row lookups. They read x as the table's Q4 quantizer writes it and
 * install that quantizer and plan for these formats: call after slate__avx2_q_fill (without a Q4
 * quantizer they install no matmul). */
void slate__avx2_k_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx2_vnni_k
/* The same for the avx2_vnni table (x86/avx2_vnni_k.c, Q4_K with vpdpbusd); call after
 * slate__avx2_vnni_fill. */
void slate__avx2_vnni_k_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx512
void slate__avx512_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx512_vnni
void slate__avx512_vnni_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx512_vnni_k
/* The Q4_K, Q5_K, Q6_K, Q3_K, Q2_K and IQ4_XS matmuls and their activation quantizer (int8 x
 * in groups of 128) of the avx512_vnni table (x86/avx512_vnni_k.c). IQ4_XS reads x as
 * avx512_vnni.c's IQ4_NL quantizer writes it and installs that quantizer and plan for IQ4_XS:
 * call after slate__avx512_vnni_fill. */
void slate__avx512_vnni_k_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx512_pal
/* The palettized (PAL) matmul of the avx512 table (x86/avx512_pal.c). */
void slate__avx512_pal_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_avx512_vbmi
/* The palettized (PAL) matmul and its activation quantizer (int8 x, u8 tables, vpermb +
 * vpdpbusd) of the avx512_vnni table on CPUs with AVX-512 VBMI (x86/avx512_vbmi.c). */
void slate__avx512_vbmi_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_neon
/* AArch64 Advanced SIMD (kernels/arm/neon.c): f32/f16/bf16 matmul, to_f32, rms_norm, attention
 * over f32/f16 caches; with slate__neon_q_fill and slate__neon_k_fill the "neon" table. The rest
 * stays ref. */
void slate__neon_fill(slate__kernels *k);
/* The integer Q8_0/Q4/Q8_C/IQ4_NL matmuls and their activation quantizer (int8 x in units of 32)
 * of the neon table (arm/neon_q.c, plain Advanced SIMD). */
void slate__neon_q_fill(slate__kernels *k);
/* The integer Q4_K/Q5_K/Q6_K/Q3_K/Q2_K/IQ4_XS matmuls of the neon table (arm/neon_k.c); they read
 * x as the table's Q4 quantize_x writes it, which they install for those six formats too: call
 * after slate__neon_q_fill. */
void slate__neon_k_fill(slate__kernels *k);
#endif
#ifdef SLATE_HAVE_neon_dotprod
/* The same matmuls with SDOT dot products (arm/neon_dotprod.c, FEAT_DotProd). */
void slate__neon_dotprod_fill(slate__kernels *k);
/* The same Q4_K/Q5_K/Q6_K/Q3_K/Q2_K/IQ4_XS matmuls with SDOT (arm/neon_dotprod_k.c): after
 * slate__neon_dotprod_fill. */
void slate__neon_dotprod_k_fill(slate__kernels *k);
#endif

#endif /* SLATE_KERNELS_H */
