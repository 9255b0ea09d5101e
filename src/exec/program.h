/*
 * program.h - a package's program, compiled: an ordered list of ops over a table of named
 * tensors. Four tensor kinds:
 *   WEIGHT  read-only data from the package, shape as stored (matrices [out][in], row-major)
 *   INPUT   per-call data supplied by the caller ("tokens": [q] int32 ids)
 *   ACT     fp32 activations [rows][width] in the state's scratch; rows is the call's query
 *           length q, or the number of output rows (1 or q) for tensors after `last_rows`
 *   STATE   the KV caches: [n_ctx][width] of the state's dtype, updated in place
 * Every op is checked at compile time (src/exec/program.c): inputs exist and have the right
 * kind, widths agree, attributes are in range. After that the interpreter trusts it.
 */
#ifndef SLATE_PROGRAM_H
#define SLATE_PROGRAM_H

#include "core/core.h"
#include "kernels/kernels.h"

#include <cjson/cJSON.h>

typedef enum slate__tkind {
    SLATE__T_WEIGHT = 0,
    SLATE__T_INPUT = 1,
    SLATE__T_ACT = 2,
    SLATE__T_STATE = 3,
} slate__tkind;

typedef struct slate__tensor {
    char *name;
    slate__tkind kind;
    slate_dtype dtype;
    int32_t n_dims;
    int64_t dims[4];     /* WEIGHT: as stored; ACT/STATE: {rows, width} with rows symbolic */
    int64_t width;       /* ACT/STATE: elements per row */
    uint64_t offset;     /* WEIGHT: byte offset in DATA; ACT: byte offset in scratch;
                            STATE: byte offset in the KV arena */
    uint64_t nbytes;     /* WEIGHT: stored bytes */
    int32_t block;       /* WEIGHT: Q4 block (16/32/64/128), Q8_0: 32, PAL: slate__pal_layout
                            (bits, group), else 0 */
    bool asym;           /* WEIGHT: Q4 asymmetric blocks */
    bool out_rows;       /* ACT: rows = output rows (after last_rows) rather than q */
    const void *data;    /* WEIGHT: bound at load */
} slate__tensor;

typedef enum slate__opkind {
    SLATE__OP_EMBEDDING,  /* in: table[n_vocab][d] (weight), tokens (input) -> out[q][d] */
    SLATE__OP_RMS_NORM,   /* in: x, w[group or width]; attr eps, group -> out (may alias x) */
    SLATE__OP_MATMUL,     /* in: x[r][n], W[m][n], (bias[m]) -> out[r][m] = x W^T + b */
    SLATE__OP_ROPE,       /* in: x[r][heads*head_dim], freqs[rope_dim/2]; attr n_heads,
                             head_dim, rope_dim, mode, mscale -> out (may alias x) */
    SLATE__OP_KV_WRITE,   /* in: x[q][w], state[n_ctx][w]: rows at positions len..len+q-1 */
    SLATE__OP_ATTENTION,  /* in: q[q][h*hd], k_state, v_state; attr n_heads, n_kv_heads,
                             head_dim, scale, window -> out[q][h*hd]. Written "attention", or
                             "attention_softcap" with attr softcap (Gemma 2's score cap) */
    SLATE__OP_ADD,        /* in: a, b -> out = a + b */
    SLATE__OP_MUL,        /* in: a, b -> out = a * b */
    SLATE__OP_SILU,       /* in: a -> out = a * sigmoid(a) */
    SLATE__OP_SWIGLU,     /* in: gate, up -> out = silu(gate) * up */
    SLATE__OP_LAST_ROWS,  /* in: x[q][w] -> out[rows][w]: the last row, or all rows when the
                             caller asked for every position's logits */
    SLATE__OP_GEGLU,      /* in: gate, up -> out = gelu_tanh(gate) * up (Gemma) */
    SLATE__OP_SCALE,      /* in: x; attr factor -> out = x * factor (may alias x; Gemma's
                             embedding scale) */
    SLATE__OP_SOFTCAP,    /* in: x; attr cap -> out = cap * tanh(x / cap) (may alias x; Gemma
                             2's final logit cap) */
    SLATE__OP_COUNT
} slate__opkind;

enum { SLATE__ROPE_ADJACENT = 0, SLATE__ROPE_HALF = 1 };

typedef struct slate__op {
    slate__opkind kind;
    int32_t n_in;
    int32_t in[3];       /* tensor indices */
    int32_t out;         /* tensor index, -1 for none (kv_write) */
    float eps;           /* rms_norm */
    int32_t group;       /* rms_norm: normalize each group of this many elements (0: row) */
    int32_t n_heads, n_kv_heads, head_dim, rope_dim, window;
    int32_t rope_mode;   /* SLATE__ROPE_* */
    float mscale;        /* rope: cos and sin are multiplied by it, so the rotated dims of
                            each head are scaled by it and the rest are not (LongRoPE's
                            attention factor); 1 when the package does not say */
    float scale;         /* attention: score scale; scale: the factor */
    float softcap;       /* attention: score cap (0: none); softcap: the cap */
} slate__op;

typedef struct slate__program {
    slate__tensor *tensors;
    int32_t n_tensors;
    slate__op *ops;
    int32_t n_ops;
    int32_t tokens_input; /* index of the "tokens" input */
    int32_t logits;       /* index of the "logits" activation (out_rows) */
    int32_t n_vocab;
    int32_t n_ctx;        /* largest total length */
    int32_t max_query;    /* largest query length */
    size_t scratch_bytes; /* all activations at max_query rows, plus attention scratch, plus
                             xq_bytes */
    size_t xq_offset;     /* byte offset in scratch of the quantized-activation area */
    size_t xq_bytes;      /* its size: the largest xq_plan of any matmul at <= max_query rows */
    size_t kv_bytes_per_token;
    size_t weights_bytes;
    int32_t *states;      /* indices of STATE tensors, in declaration order */
    int32_t n_states;
} slate__program;

/* Compiles and validates the program of a parsed META object against the DATA section size.
 * Weight data pointers are bound later (slate__program_bind). Returns OK, E_FORMAT (names the
 * op index, op and tensor at fault), E_UNSUPPORTED (unknown op or dtype), E_NOMEM. */
slate_status slate__program_compile(const cJSON *meta, uint64_t data_size, slate__program *prog,
                                    slate_error *err);
void slate__program_free(slate__program *prog);
const char *slate__op_name(slate__opkind k);
int32_t slate__program_find(const slate__program *prog, const char *name);

#endif /* SLATE_PROGRAM_H */
