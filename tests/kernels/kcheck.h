/* kcheck.h - one case of a kernel table against the scalar reference ("ref"), on random data,
 * shared by the cmocka tests (tests/kernels/test_kernels.c; test_quant_kernels.c takes the
 * compressed formats' list and tolerance from here) and the standalone AArch64 check
 * (tests/kernels/neon_check.c, cross-compiled and run under qemu by scripts/check_neon.sh).
 * Plain C11 (plus POSIX mmap for a guard page) without cmocka: it needs only the kernel
 * sources (src/kernels/, core/num.c, core/error.c). The callers pick the shapes and own the
 * seed.
 *
 * Each kc_<kernel> runs one case and returns true when the table agrees with ref within the
 * kernel's tolerance (kcheck.c gives each with its reason) and wrote nothing outside its output.
 * Otherwise it returns false and writes the first problem into problem[0..cap), NUL-terminated:
 * the table, kernel, dtype and shape, then the first bad element with got and want, e.g.
 * "avx2 matmul f16 rows=3 n_in=17 n_out=9 o=[2,7) bias=1: element 4: got 1.5, want 1.25, ...".
 * rng is the caller's xorshift state (kc_rand); a case draws its data from it.
 * Allocation failure prints a message and exits: these are test programs.
 */
#ifndef SLATE_KCHECK_H
#define SLATE_KCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* xorshift64, the same sequence as tu_rand in tests/unit/testutil.c (which needs cmocka). */
uint64_t kc_rand(uint64_t *s);
float kc_randf(uint64_t *s); /* uniform in [-1, 1) */

/* y columns [o0, o1) of an [n_rows][n_out] x [n_out][n_in] product with weights of dtype dt
 * (F32, F16, BF16), bias when with_bias; columns outside [o0, o1) must stay untouched.
 * 0 <= o0 < o1 <= n_out. */
bool kc_matmul(const slate__kernels *k, const slate__kernels *ref, slate_dtype dt, int64_t n_rows,
               int64_t n_in, int64_t n_out, int64_t o0, int64_t o1, bool with_bias,
               uint64_t *rng, char *problem, size_t cap);

/* The compressed formats and their layouts: Q8_0; Q4 with blocks of 16, 32, 64 and 128,
 * symmetric and asymmetric; Q8_C; the super-block formats Q4_K, Q6_K, Q5_K, Q3_K, Q2_K; IQ4_NL
 * (blocks of 32) and IQ4_XS (super-blocks). */
typedef struct kc_qfmt {
    slate_dtype dt;
    int32_t block; /* Q8_C: 0 */
    bool asym;
} kc_qfmt;
#define KC_N_QFMTS 17
extern const kc_qfmt kc_qfmts[KC_N_QFMTS];

/* Random stored bytes for the compressed matrix wm (its data, of slate__wmat_bytes bytes):
 * every code value the format can hold, per block a scale of random sign and of one of three
 * magnitudes (details in kcheck.c). */
void kc_fill_qweights(uint8_t *w, const slate__wmat *wm, uint64_t *rng);

/* Row o of wm as the magnitudes a kernel's sums see: |w_i| as ref dequantizes it, except that
 * formats with an offset (Q4 asym, Q4_K, Q5_K, Q2_K: w = d sc q - dmin m, or d q + m) give
 * |d sc q| + |offset|. Kernels sum the two parts apart and subtract them at the end, so their
 * rounding scales with the parts even where w itself is 0 (dmin m = d sc q happens in f16). */
void kc_wmag_row(const slate__wmat *wm, int64_t o, float *dst);

/* The tolerance of one output y = w . x (+ bias) of a compressed format's matmul against ref
 * (the reason is in kcheck.c): n inputs, w as kc_wmag_row gives it, bias_abs = |bias| (0 without),
 * xq whether the table rounds x to int8. Returns the bound on |got - want| and sets *mag = sum
 * |w_i x_i| + |bias| and *xqb, the part x's rounding may cause (before the factor 1.001, and
 * computed even when !xq), for messages. */
double kc_matmul_q_bound(const float *w, const float *x, int64_t n, double bias_abs, bool xq,
                         double *mag, double *xqb);

/* Checks the outputs of a compressed matmul against ref's: got and want are y [n_rows][n_out]
 * of the matrix wm for x [n_rows][wm->n_in] and bias (or NULL), computed for columns [o0, o1)
 * into buffers filled with sentinel; columns outside must still hold it, those inside must be
 * within kc_matmul_q_bound (xq: whether the table rounded x to int8). Returns the number of bad
 * elements and describes the first (and the count) in detail[0..cap); 0 leaves detail alone. */
int64_t kc_check_q_outputs(const slate__wmat *wm, const float *x, const float *bias,
                           const float *got, const float *want, float sentinel, int64_t n_rows,
                           int64_t o0, int64_t o1, bool xq, char *detail, size_t cap);

/* The same for a compressed format: dt Q8_0 (block 32), Q4 (block 16, 32, 64 or 128, asym or
 * not), Q8_C (block 0) or a super-block format (Q2_K..Q6_K, block 256), n_in a multiple of the
 * block. The weights are random stored bytes (kc_fill_qweights: every int8 and nibble value, f16
 * scales and offsets of three magnitudes and both signs)
 * placed so that they end where an unreadable page begins: reading past them crashes the
 * check. Where the table quantizes x for dt (xq_plan), x is quantized as exec does, in two
 * calls over rows [0, mid) and [mid, n_rows) with mid a multiple of row_align, which must write
 * the same bytes as one call, nothing past the plan (64 guard bytes), and a plan no smaller
 * than the one for n_rows - 1; the tolerance then includes the int8 rounding of x (kcheck.c).
 * The reference (kernels/ref/quant.c) reads x in f32. */
bool kc_matmul_q(const slate__kernels *k, const slate__kernels *ref, slate_dtype dt,
                 int32_t block, bool asym, int64_t n_rows, int64_t n_in, int64_t n_out,
                 int64_t o0, int64_t o1, bool with_bias, uint64_t *rng, char *problem, size_t cap);

/* to_f32 of dt (F16 or BF16) on the last n (1..65536) of all 65536 bit patterns: bit-exact
 * (NaN stays NaN), nothing written past n. Uses no random data. */
bool kc_to_f32(const slate__kernels *k, const slate__kernels *ref, slate_dtype dt, int64_t n,
               char *problem, size_t cap);

/* to_f16 on the last n (1..KC_TO_F16_N) of a fixed list of floats: for every f16 value its
 * exact f32 value, the midpoints to its neighbours (the ties of round-to-nearest-even) and the
 * floats one ulp either side of them, past the largest f16 (65520 and up round to inf), f32
 * subnormals, +-inf and NaNs, then a sweep of bit patterns. Bit-exact against ref except that a
 * NaN need only give a NaN; nothing written past n. Uses no random data. */
enum { KC_TO_F16_N = 65536 * 7 + 4096 };
bool kc_to_f16(const slate__kernels *k, const slate__kernels *ref, int64_t n, char *problem,
               size_t cap);

/* The attention mask of a case. */
typedef enum kc_mask {
    KC_MASK_NONE,     /* mask == NULL */
    KC_MASK_SOME_INF, /* about 30% of the positions -inf, the rest finite */
    KC_MASK_NAN,      /* as SOME_INF, and about 15% NaN (a NaN score is skipped like -inf) */
    KC_MASK_ALL_INF,  /* every score masked: the output must be 0 */
} kc_mask;

/* n_heads query heads of head_dim hd sharing one kv head of dtype kvt (F32 or F16), over
 * cache rows [j0, j1) that lie stride (>= hd) elements apart, from a base that is not
 * vector-aligned; each head's output is checked on its own, an empty range (j1 <= j0) or a
 * KC_MASK_ALL_INF mask must give 0, and nothing may be written past the last head. softcap > 0
 * caps the scaled scores (Gemma 2); 0 is off. */
bool kc_attention(const slate__kernels *k, const slate__kernels *ref, slate_dtype kvt, int64_t hd,
                  int64_t n_heads, int64_t stride, int64_t j0, int64_t j1, float scale,
                  float softcap, kc_mask mk, uint64_t *rng, char *problem, size_t cap);

/* The table's attention_i8 over an int8 cache (kernels.h: rows of {f32 scale, head_dim int8},
 * made by slate__kv_quantize_i8 from random values) against ref's on the same rows, as
 * kc_attention checks the others; rows lie stride (>= 4 + head_dim rounded up to 4) bytes apart
 * from an odd address, and the masked rows' scales are infinite (read by neither kernel: 0 x inf
 * in a sum would be NaN). */
bool kc_attention_i8(const slate__kernels *k, const slate__kernels *ref, int64_t hd,
                     int64_t n_heads, int64_t stride, int64_t j0, int64_t j1, float scale,
                     float softcap, kc_mask mk, uint64_t *rng, char *problem, size_t cap);

/* kc_attention_i8 at positions [j0, j0 + len), j0 in [0, 3), with a random stride (the rows
 * side by side, or another kv head's block and a byte between them) and scale (1 or 8 over
 * sqrt(hd)); capped: Gemma 2's score cap of 0.5, which bends most scores. */
bool kc_attention_i8_at(const slate__kernels *k, const slate__kernels *ref, int64_t hd,
                        int64_t n_heads, int64_t len, kc_mask mk, bool capped, uint64_t *rng,
                        char *problem, size_t cap);

/* The table's attention_k16 (kernels.h: K stored dim-major in blocks of 16) over positions
 * [j0, j1) of an f16 cache against ref on the same values as rows: within kc_attention's
 * tolerance, and with the bits of the table's attention on rows when j0 is a multiple of 16.
 * Positions outside [j0, j1) of the blocks read hold 30 (K) and +inf (V). */
bool kc_attention_k16(const slate__kernels *k, const slate__kernels *ref, int64_t hd,
                      int64_t n_heads, int64_t j0, int64_t j1, float scale, float softcap,
                      kc_mask mk, uint64_t *rng, char *problem, size_t cap);

/* A prefill's n_rows consecutive query rows in one call (kernels.h: n_rows, window), group
 * heads each, over positions [j0, j1) (j1 - n_rows >= j0), window 0 or a sliding window: the
 * table's kernel for an f32 or f16 cache (kvt; with k16 the attention_k16 of an f16 cache), or
 * attention_i8 (kvt I8), against ref called row by row, each row over its own range. ref's own
 * call must give the bits of its row-by-row calls; the table's must be within kc_attention's
 * tolerance. Rows side by side or apart (not with k16); the positions outside [j0, j1) hold
 * K 30 and V +inf (int8: an infinite scale), so a kernel that read one would show it. */
bool kc_attention_rows(const slate__kernels *k, const slate__kernels *ref, slate_dtype kvt,
                       bool k16, int64_t hd, int64_t group, int64_t n_rows, int64_t window,
                       int64_t j0, int64_t j1, float softcap, uint64_t *rng, char *problem,
                       size_t cap);

/* rms_norm of n elements with eps; nothing written past n. */
bool kc_rms_norm(const slate__kernels *k, const slate__kernels *ref, int64_t n, float eps,
                 uint64_t *rng, char *problem, size_t cap);

/* The gated units of the feed-forward, y = act(a) * b: swiglu (silu) or geglu (gelu_tanh). */
typedef enum kc_glu_kind { KC_GLU_SWIGLU, KC_GLU_GEGLU } kc_glu_kind;

/* The kind's kernel on n elements in place (y == a) against ref out of place, inputs in
 * [-100, 100] (exp clamps at both ends), for geglu plus some of size 1e13 (a^3 overflows);
 * nothing written past n. */
bool kc_glu(const slate__kernels *k, const slate__kernels *ref, kc_glu_kind kind, int64_t n,
            uint64_t *rng, char *problem, size_t cap);

/* softcap (cap * tanh(x / cap)) of n elements in place against ref out of place: |x| / cap
 * from 0 to 30 (both branches of a vector tanh, and saturation), every 11th x a special value
 * (+-0, subnormals, +-inf, NaN, +-huge); nothing written past n. */
bool kc_softcap(const slate__kernels *k, const slate__kernels *ref, int64_t n, float cap,
                uint64_t *rng, char *problem, size_t pcap);

/* The table's tanh, as softcap with cap 1 (x / 1 and 1 * t are exact), against tanh in double
 * on every 4099th float bit pattern (1.05M: every exponent of both signs), every float of
 * [0.6, 0.65] (where a Cephes-style tanh switches from its polynomial to exp) and every 64th
 * of [8.9, 10.2] (where it reaches 1): within 2 ulp, 1e-7 absolute and 2e-7 relative; exactly
 * +-1 for |x| >= 10 and +-inf, x itself for |x| < 2^-13 (+-0 with its sign, subnormals), NaN
 * for NaN. Uses no random data. */
bool kc_tanh(const slate__kernels *k, char *problem, size_t cap);

/* rope of n_heads heads of head_dim hd, the first rope_dim rotated (even, <= hd, <=
 * SLATE__MAX_HEAD_DIM), in the half (NeoX) or interleaved pair layout, in place or not, at
 * random angles, with cos and sin multiplied by mscale (the rope op's attribute, LongRoPE's
 * attention factor: 1 for plain rope); nothing written past the last head. */
bool kc_rope(const slate__kernels *k, const slate__kernels *ref, int64_t n_heads, int64_t hd,
             int64_t rope_dim, bool half, bool in_place, float mscale, uint64_t *rng,
             char *problem, size_t cap);
/* {head_dim, rope_dim} of the rope cases: tails of every length for 4, 8 and 16 lanes, common
 * head dims, partial rotation (rope_dim < head_dim: Phi-4-mini's 96 of 128, an odd number of
 * pairs). */
#define KC_N_ROPE_DIMS 19
extern const int64_t kc_rope_dims[KC_N_ROPE_DIMS][2];

#endif /* SLATE_KCHECK_H */
