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
    int32_t src_type;       /* slate__src_type of the source matrices (0: F32); a ggml block
                               format gives random blocks with finite scales (rows must be
                               whole blocks: dim and ffn_dim multiples of 256 for the K types) */
} tm_opts;

tm_opts tm_default(void);
/* Vocabulary: <unk>, <s>, </s>, then the 256 byte tokens <0x00>..<0xFF> (259 tokens). */
#define TM_VOCAB 259
slate_status tm_write(const char *path, const tm_opts *o, slate_error *err);

/* The import tm_write converts (tensors, tokenizer), for tests that call the builder with their
 * own parameters or read the source tensors; tm_import_free releases it. */
struct slate__import;
slate_status tm_import(const tm_opts *o, struct slate__import *imp, slate_error *err);
void tm_import_free(struct slate__import *imp);
/* The convert parameters tm_write uses for o (its keep rules are stored in rules). */
slate_convert_params tm_params(const tm_opts *o, slate_convert_keep rules[2]);

#endif
