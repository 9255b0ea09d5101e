/* tinymodel.h - writes small llama-family packages with seeded random weights, so model, state
 * and package tests need no files from outside the repository. */
#ifndef SLATE_TINYMODEL_H
#define SLATE_TINYMODEL_H

#include "slate.h"

typedef struct tm_opts {
    int32_t n_layers, dim, n_heads, n_kv_heads, ffn_dim;
    int32_t n_ctx, max_query;
    bool qkv_bias, qk_norm, tied, half_rope;
    int32_t window;         /* sliding window of the attention (0: none) */
    uint32_t window_layers; /* with a window: 0 every layer windowed, else bit l windows layer l
                               and the others attend globally (as Gemma 3's pattern) */
    slate_dtype dtype;      /* matrices; F32/F16/BF16 or compressed (Q8_0, Q4, Q8_C) */
    int32_t block_size;     /* Q4 block (0: 32) */
    bool asym;              /* Q4 asymmetric */
    bool quantize_all;      /* compressed dtype also for token_embd (else the Q8_0 default) */
    const char *keep_f16;   /* NULL, or a glob of matrices kept f16 (after quantize_all) */
    uint64_t seed;
} tm_opts;

tm_opts tm_default(void);
/* Vocabulary: <unk>, <s>, </s>, then the 256 byte tokens <0x00>..<0xFF> (259 tokens). */
#define TM_VOCAB 259
slate_status tm_write(const char *path, const tm_opts *o, slate_error *err);

#endif
