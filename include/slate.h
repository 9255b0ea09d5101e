/*
 * slate.h - the public API of slate, a C runtime for on-device LLM inference with a stateful
 * KV cache. This header is the reference manual: nobody should need to read src/ to use it.
 *
 * Main flow (error handling shortened to keep the example readable):
 *
 *     slate_model *model = NULL;
 *     slate_error err;
 *     slate_model_params mp = slate_model_default_params();
 *     if (slate_model_open("stories260K.slate", &mp, &model, &err) != SLATE_OK) {
 *         fprintf(stderr, "%s\n", err.message);
 *         return 1;
 *     }
 *     const slate_tokenizer *tok = slate_model_tokenizer(model);
 *     int32_t ids[512];
 *     size_t n_ids = 0;
 *     slate_tokenizer_encode(tok, "Once upon a time", 16, SLATE_ENCODE_ADD_BOS, ids, 512,
 *                            &n_ids, &err);
 *
 *     slate_state *state = NULL;
 *     slate_state_create(model, NULL, &state, &err);     // one state per conversation
 *     slate_state_predict(state, ids, (int32_t)n_ids, NULL, &err); // prefill: one call
 *
 *     slate_sampler_params sp = slate_sampler_default_params();
 *     sp.temperature = 0.0f;                             // greedy
 *     slate_sampler *sampler = NULL;
 *     slate_sampler_create(&sp, slate_tokenizer_n_vocab(tok), &sampler, &err);
 *     for (int i = 0; i < 100; i++) {
 *         int32_t n_rows = 0, next = 0;
 *         const float *logits = slate_state_logits(state, &n_rows);
 *         slate_sampler_sample(sampler, logits, slate_tokenizer_n_vocab(tok), &next, &err);
 *         if (next == slate_tokenizer_eos(tok)) break;
 *         // ... print the piece of `next` (see slate_detok_push) ...
 *         if (slate_state_predict(state, &next, 1, NULL, &err) != SLATE_OK) break; // decode
 *     }
 *     slate_sampler_free(sampler);
 *     slate_state_free(state);
 *     slate_model_close(model);
 *
 * slate_generate() wraps that loop with stop strings, token budgets and streaming callbacks.
 *
 * Thread safety. A model is read-only after slate_model_open() and may be used by any number of
 * threads at once. A state belongs to one conversation: calls on one state must not overlap; a
 * second call that arrives while one is running on the same state returns SLATE_E_BUSY instead
 * of racing. Different states (of the same model or not) may be used concurrently from different
 * threads. Tokenizers are read-only after creation and shareable. A sampler or a detokenizer is
 * owned by one thread at a time.
 *
 * Text crosses the API as UTF-8 with an explicit length; inputs need not be NUL-terminated.
 * Outputs say whether they are terminated.
 */
#ifndef SLATE_H
#define SLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLATE_VERSION_MAJOR 0
#define SLATE_VERSION_MINOR 1
#define SLATE_VERSION_PATCH 0

/* ------------------------------------------------------------------------------------------ */
/* Status codes                                                                               */
/* ------------------------------------------------------------------------------------------ */

/* X(name, value, short description). Values are explicit and never reused; sorted by what the
 * caller can do about them. */
#define SLATE_STATUS_LIST(X)                                                                     \
    X(OK, 0, "ok")                                                                               \
    X(E_INVALID_ARG, 1, "invalid argument")                                                     \
    X(E_IO, 2, "i/o error")                                                                      \
    X(E_FORMAT, 3, "malformed or corrupt file")                                                 \
    X(E_UNSUPPORTED, 4, "unsupported architecture, dtype or version")                           \
    X(E_NOMEM, 5, "out of memory")                                                               \
    X(E_BUDGET, 6, "memory budget exceeded")                                                     \
    X(E_SHAPE, 7, "shape out of the allowed range")                                              \
    X(E_CONTEXT_FULL, 8, "context is full")                                                      \
    X(E_RELEASED, 13, "cache positions released by a sliding window")                          \
    X(E_BUFFER_TOO_SMALL, 9, "buffer too small")                                                 \
    X(E_BUSY, 10, "object is busy")                                                              \
    X(E_CANCELLED, 11, "cancelled")                                                              \
    X(E_INTERNAL, 12, "internal error")

typedef enum slate_status {
#define SLATE__STATUS_ENUM(name, value, text) SLATE_##name = value,
    SLATE_STATUS_LIST(SLATE__STATUS_ENUM)
#undef SLATE__STATUS_ENUM
} slate_status;

/* Details of a failure. Every call that takes a `slate_error *err` accepts NULL. On failure the
 * callee fills code and message (NUL-terminated; names the culprit and the expected vs found
 * value); for file input, has_offset/offset give the byte offset of the problem. */
typedef struct slate_error {
    slate_status code;
    bool has_offset;
    uint64_t offset;
    char message[512];
} slate_error;

/* Static, never-NULL short text for a status ("invalid argument"); "unknown status" for values
 * outside the table. */
const char *slate_status_str(slate_status status);
/* Static name of a status ("SLATE_E_FORMAT"). */
const char *slate_status_name(slate_status status);

/* ------------------------------------------------------------------------------------------ */
/* Data types                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Tensor element types. Values are stored in packages and never change meaning. */
typedef enum slate_dtype {
    SLATE_DTYPE_F32 = 0,
    SLATE_DTYPE_F16 = 1,
    SLATE_DTYPE_BF16 = 2,
    SLATE_DTYPE_I32 = 3,
    /* Compressed weight matrices (2-D only; bytes in docs/format.md "Quantized weights"). */
    SLATE_DTYPE_Q8_0 = 4, /* blocks of 32: f16 scale + 32 int8 (GGUF Q8_0 byte for byte) */
    SLATE_DTYPE_Q4 = 5,   /* blocks of 16/32/64/128 4-bit values + f16 scale (+ f16 offset when
                             asymmetric); block 32 symmetric is GGUF Q4_0 byte for byte */
    SLATE_DTYPE_Q8_C = 6, /* int8 rows + one f32 scale per output row */
    SLATE_DTYPE_PAL = 7,  /* N-bit palettized (N = 2, 3, 4, 6, 8): indices into one table of
                             2^N f16 centroids per group of output rows */
    SLATE_DTYPE_Q4_K = 8, /* super-blocks of 256: 4-bit codes, eight 6-bit scales and minimums
                             (GGUF Q4_K byte for byte) */
    SLATE_DTYPE_Q6_K = 9, /* super-blocks of 256: 6-bit codes, sixteen int8 scales (GGUF Q6_K
                             byte for byte) */
    SLATE_DTYPE_Q5_K = 10, /* super-blocks of 256: 5-bit codes, eight 6-bit scales and minimums
                              (GGUF Q5_K byte for byte) */
    SLATE_DTYPE_Q3_K = 11, /* super-blocks of 256: 3-bit codes, sixteen 6-bit scales (GGUF Q3_K
                              byte for byte) */
    SLATE_DTYPE_Q2_K = 12, /* super-blocks of 256: 2-bit codes, sixteen 4-bit scales and
                              minimums (GGUF Q2_K byte for byte) */
    SLATE_DTYPE_IQ4_NL = 13, /* blocks of 32: 4-bit indices into 16 fixed non-linear int8
                                levels + f16 scale (GGUF IQ4_NL byte for byte) */
    SLATE_DTYPE_IQ4_XS = 14, /* super-blocks of 256: IQ4_NL's indices and levels, eight 6-bit
                                scales (GGUF IQ4_XS byte for byte) */
    /* Caches only (a state's kv_dtype, state files), never weights or packages: int8 values
     * with one f32 scale per kv head and position (blocks of {f32 scale, head_dim int8 padded
     * to 4 bytes}; docs/format.md "State file"). */
    SLATE_DTYPE_I8 = 16,
} slate_dtype;

/* Static name ("f32", "f16", "bf16", "i32", "q8_0", "q4", "q8_c", "pal", "q4_k", "q6_k", "q5_k",
 * "q3_k", "q2_k", "iq4_nl", "iq4_xs", "i8"), or "?" for an unknown value. */
const char *slate_dtype_name(slate_dtype dtype);

/* ------------------------------------------------------------------------------------------ */
/* Conversion (offline)                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* A per-tensor dtype rule for slate_convert (slate_convert_params.keep). */
typedef struct slate_convert_keep {
    slate_dtype dtype;   /* F32, F16, BF16, Q8_0, Q8_C, Q4 (with the params' block_size and
                            asym) or PAL (with pal_bits and pal_group) */
    const char *pattern; /* glob over canonical tensor names (fnmatch: '*' any run, '?' one
                            character, [...] a set), e.g. "blk.*.ffn_down.weight" */
} slate_convert_keep;

typedef struct slate_convert_params {
    slate_dtype dtype;          /* weight dtype for matrices: F32, F16 or BF16 (default F32), or
                                   a compressed one, Q8_0, Q4, Q8_C or PAL (see
                                   "Compression") */
    const char *tokenizer_path; /* llama2.c checkpoints: the tokenizer .bin; NULL: look for
                                   tok<n_vocab>.bin, then tokenizer.bin, beside SRC. Must be
                                   NULL for GGUF and Hugging Face sources (E_INVALID_ARG) */
    int32_t n_ctx;              /* context length to declare; 0: the source's own value */
    int32_t max_query;          /* largest query length per call; 0: min(512, n_ctx) */
    bool progress;              /* print per-tensor progress on stderr */
    slate_dtype kv_dtype;       /* cache dtype the package declares for its states: F16
                                   (default) or F32. A state may still choose another one
                                   (slate_state_params.kv_dtype). */
    /* Compression. Matrices (2-D weights) get `dtype`; 1-D tensors (norms, biases, rope.freqs)
     * always stay F32. When dtype is compressed, token_embd.weight and output.weight get Q8_0
     * (the mix llama.cpp also uses) unless a keep rule says otherwise. Keep rules are applied
     * after that in order, the last matching rule wins; a rule that matches no matrix is an
     * error (E_INVALID_ARG). A matrix whose row length is not a multiple of its block (Q8_0: 32,
     * Q4: block_size) is written as F16 instead, as llama.cpp does; a note on stderr always
     * says how many and why (with `progress`, each one by name). block_size, asym, pal_bits
     * and pal_group set while no matrix can get their dtype (neither `dtype` nor a keep rule
     * is Q4 / PAL) are refused with E_INVALID_ARG rather than ignored. */
    int32_t block_size;               /* Q4 block: 16, 32, 64 or 128; 0: 32 */
    bool asym;                        /* Q4 blocks with an offset (d * q + m) instead of
                                         symmetric d * (q - 8) */
    const slate_convert_keep *keep;   /* n_keep rules (borrowed during the call); may be NULL */
    int32_t n_keep;
    bool convert_quantized;           /* false (default): tensors already quantized in the
                                         source (GGUF block formats) get their nearest slate
                                         layout, whatever dtype says: Q8_0, Q4_0, Q4_1, Q2_K..Q6_K
                                         keep their bytes (Q8_0, Q4 block 32, Q4_1:
                                         asymmetric, Q2_K..Q6_K); Q5_0, IQ4_NL
                                         and IQ4_XS become Q8_0, all transcoded (codes moved, not
                                         re-rounded; only each sub-block scale d * sc is rounded
                                         to f16, and Q5_0 / IQ4_NL are exact); Q5_1 is
                                         requantized to Q8_0 (a second rounding, at most half an
                                         int8 step). A note on stderr says how many were
                                         transcoded or requantized (with `progress`, each one by
                                         name). Keep rules still apply (a rule's Q4 takes
                                         block_size and asym, the bytes are copied or transcoded
                                         when that is the source's layout, or the Q4 a K-quant
                                         transcodes to: block 32 asymmetric for Q4_K, block 16
                                         asymmetric for Q2_K, block 16 symmetric for Q3_K).
                                         true: they get the dtype chosen for them like any other
                                         tensor (bytes copied or transcoded when that is their
                                         own layout or that Q4; else dequantized to f32 exactly
                                         as ggml does, then converted; Q5_K asked for as Q8_0 is
                                         requantized so, as it was by default before Q5_K was
                                         copied). Q2_K..Q6_K are never a chosen dtype
                                         (E_INVALID_ARG as dtype or in a keep rule): no
                                         quantizer makes them */
    int32_t n_threads;                /* quantization threads; 0: one per online core */
    /* PAL (dtype or keep rule): k-means palettization, k = 2^pal_bits centroids per group of
     * pal_group output rows (1-D k-means on the group's weights: started from the optimum
     * computed exactly over a binned summary of the sorted values, refined by Lloyd; within
     * ~1% of the least squared error; deterministic). */
    int32_t pal_bits;                 /* 2, 3, 4, 6 or 8; 0: 4 */
    int32_t pal_group;                /* output rows per table, 1..4096; 0: 16 */
} slate_convert_params;

slate_convert_params slate_convert_default_params(void);

/* Converts a checkpoint into a .slate package at out_path.
 * src_path: a llama2.c .bin checkpoint, a .gguf file, or a Hugging Face folder (config.json,
 * *.safetensors, tokenizer.json). The output is written to a temp file created exclusively
 * beside it (out_path + ".tmp.<pid>.<n>"), flushed and renamed: on failure no file is left at
 * out_path (an existing file there stays untouched). An existing out_path must be a regular
 * file (or a symbolic link to one: the file is replaced, the link kept) holding a slate
 * package, or empty: the source itself or any other file is refused with E_INVALID_ARG and
 * left as it was. A package, a state file, or a lone JSON or safetensors file as src_path is
 * refused with E_INVALID_ARG (a Hugging Face folder is given as the folder).
 * Returns SLATE_OK, E_INVALID_ARG, E_IO, E_FORMAT (lying or corrupt source, including a weight
 * or a GGUF block scale that is not finite), E_UNSUPPORTED (unknown architecture or tensor
 * type, or a weight its dtype cannot hold: beyond the f16 or bf16 range, or a block scale,
 * transcoded sub-block scale or centroid that does not fit f16; the message names the tensor),
 * E_NOMEM. */
slate_status slate_convert(const char *src_path, const char *out_path,
                           const slate_convert_params *params, slate_error *err);

/* Removes the temp files of outputs being written right now (packages, saved states), for a
 * program that is about to die from a signal: async-signal-safe (unlink only). The slate CLI
 * calls it from its SIGINT/SIGTERM/SIGHUP handler, then dies of the signal. Up to 16 outputs
 * in flight are tracked. */
void slate_remove_partial_outputs(void);

/* An output file of the caller's, written the way slate writes packages and states: whole or
 * not at all. Open creates a temp beside path exclusively (path + ".tmp.<pid>.<n>"), tracked by
 * slate_remove_partial_outputs; commit flushes, syncs and renames it over path; discard
 * removes it. An existing path must be a regular file (or a symbolic link to one: the file is
 * replaced with its permissions kept, the link stays); anything else is refused, never
 * replaced or waited on. Not thread-safe per handle. */
typedef struct slate_output slate_output;

/* Opens an output for path. Returns OK, E_INVALID_ARG (NULL path/out), E_IO (path is not a
 * regular file, or the temp cannot be created: the message names it and the reason),
 * E_NOMEM. On failure *out is NULL. */
slate_status slate_output_open(const char *path, slate_output **out, slate_error *err);
/* Appends data[0..len). Returns OK, E_INVALID_ARG, E_IO (the write failed: the output can only
 * be discarded; commit would fail). */
slate_status slate_output_write(slate_output *out, const void *data, size_t len,
                                slate_error *err);
/* Moves the output into place and frees the handle (also on failure, where the temp is removed
 * and nothing is left at path). Returns OK, E_INVALID_ARG (NULL), E_IO. */
slate_status slate_output_commit(slate_output *out, slate_error *err);
/* Removes the temp and frees the handle; NULL does nothing. */
void slate_output_discard(slate_output *out);

/* ------------------------------------------------------------------------------------------ */
/* Synthetic models (benchmarks)                                                              */
/* ------------------------------------------------------------------------------------------ */

/* A Hugging Face folder with seeded random weights of a realistic shape, for measuring speed and
 * memory without downloading a model. Named shapes copy the published configs (dims, heads,
 * head size, vocabulary, tie, rope theta and scaling, qkv bias, context, sliding windows,
 * soft-caps) and the checkpoints' tensor names and shapes:
 *   "tinyllama-1.1b", "smollm2-135m", "llama-3.2-1b", "qwen2.5-0.5b" (Llama / Qwen2),
 *   "phi-3-mini-4k" (Phi3ForCausalLM, microsoft/Phi-3-mini-4k-instruct: fused
 *     self_attn.qkv_proj and mlp.gate_up_proj, window 2047),
 *   "gemma-2-2b" (Gemma2ForCausalLM, google/gemma-2-2b: head_dim 256, soft-caps 50 / 30,
 *     window 4096 on the even layers, four norms per layer; published in f32),
 *   "gemma-3-1b" (Gemma3ForCausalLM, google/gemma-3-1b-pt: head_dim 256, q/k norms, window
 *     512 with sliding_window_pattern 6, local RoPE base 1e4),
 *   "mistral-7b" (MistralForCausalLM, mistralai/Mistral-7B-v0.1: window 4096),
 *   "smollm3-3b" (SmolLM3ForCausalLM, HuggingFaceTB/SmolLM3-3B: Llama's tensors, tied, every
 *     fourth layer NoPE: config.json's no_rope_layers, written for the shape's layer count),
 *   "granite-3.1-2b" (GraniteForCausalLM, ibm-granite/granite-3.1-2b-instruct: Llama's
 *     tensors, tied; config.json's multipliers embedding 12, attention 0.015625, residual 0.22,
 *     logits_scaling 8, kept as published whatever the dims).
 * Weights are normal-ish (sum of four uniforms) with std 0.02, norm weights ~1 (Gemma: the
 * stored w of its (1 + w) norms, ~0), so activations and logits stay finite and spread out. The
 * tokenizer is a synthetic byte-level BPE with
 * exactly n_vocab tokens: 256 byte symbols, merges (" " and a..z prefixes + one letter, in
 * breadth-first order) and three special tokens <|endoftext|>, <|im_start|>, <|im_end|> (the
 * last ids). It depends only on n_vocab, so two synthetic models of one vocabulary share it. */
typedef struct slate_synth_params {
    const char *shape;  /* a named shape, or NULL: a custom shape from the dims below. A
                           named shape given other dims is written as a custom shape like it
                           (config.json says "custom", as with `like`) */
    const char *like;   /* with shape NULL: the custom shape takes this named shape's
                           architecture (family, tensor layout, norms, rope, window pattern,
                           soft-caps, tie; everything but the dims); NULL: a LlamaForCausalLM
                           (untied, rope theta 1e4). Giving both shape and like is refused. */
    /* Dims; 0 keeps the shape's value. Without a shape, dim, n_layers, n_heads, ffn_dim and
     * n_vocab are required; n_kv_heads defaults to n_heads and n_ctx to 2048. head_dim is
     * dim / n_heads (must divide, even, at most 512) unless given or kept: a named shape keeps
     * its own (Gemma's 256) when neither dim nor n_heads is given. n_vocab >= 259. */
    int32_t dim, n_layers, n_heads, n_kv_heads, ffn_dim, n_vocab, n_ctx;
    int32_t head_dim;       /* 0: as above; else even, 2..512 */
    int32_t sliding_window; /* 0: the shape's; else 1..2^24, for shapes that have a window only
                               (mistral-7b, phi-3-mini-4k, gemma-2-2b, gemma-3-1b) */
    slate_dtype dtype;  /* F32, F16 or BF16 (default BF16, as most published checkpoints;
                           gemma-2-2b's is F32) */
    uint64_t seed;      /* same seed and params: the same bytes */
    size_t shard_bytes; /* largest weight file; 0: 4 GiB. Larger models are written as shards
                           model-0000i-of-0000n.safetensors + model.safetensors.index.json */
    bool progress;      /* print progress on stderr */
} slate_synth_params;

slate_synth_params slate_synth_default_params(void);

/* Name of built-in shape `index` (0-based), or NULL past the last one. Static strings. */
const char *slate_synth_shape_name(int32_t index);

/* One of the dims of slate_synth_params above, with the range slate_synth accepts for a value
 * given (0 keeps the shape's value; without a shape the required ones must be given). The one
 * table behind slate_synth's checks, for front ends that read dims as text (`slate synth
 * --dims`), so that they refuse exactly what slate_synth refuses. */
typedef struct slate_synth_dim {
    const char *field; /* the field's name, as slate_synth's messages say it: "dim", "n_layers" */
    const char *key;   /* its short name on the command line: "hidden", "layers", ... */
    size_t offset;     /* offsetof(slate_synth_params, <field>); the field is an int32_t */
    int32_t lo, hi;    /* the accepted range, inclusive; lo >= 1 (0 is never a value given) */
    bool required;     /* must be given when params name no shape */
    const char *why;   /* why the range is what it is, when it is not obvious (n_vocab: "256
                          byte tokens + 3 special tokens at least"), else NULL */
} slate_synth_dim;

/* Dim `index` (0-based), in the order of the fields, or NULL past the last one. Static. */
const slate_synth_dim *slate_synth_dim_get(int32_t index);

/* What slate_synth would write for params, without writing it. */
typedef struct slate_synth_info {
    int64_t n_params;        /* weights, in elements (embedding counted once when tied) */
    uint64_t weights_bytes;  /* their bytes in params->dtype: the safetensors data */
    int32_t n_tensors;
    int32_t n_shards;        /* safetensors files */
    int32_t head_dim;        /* the head size used */
    const char *source;      /* the Hugging Face repository a named shape copies; NULL for a
                                custom shape. Static string. */
    slate_dtype published_dtype; /* a named shape's published weights' dtype (custom: BF16) */
} slate_synth_info;

/* Fills *info for params (NULL: the defaults, which name no shape and so fail) after the
 * checks slate_synth makes on them. Returns OK, E_INVALID_ARG (as slate_synth), E_NOMEM. */
slate_status slate_synth_describe(const slate_synth_params *params, slate_synth_info *info,
                                  slate_error *err);

/* Writes config.json, the safetensors weights (streamed: memory use does not grow with the
 * model), tokenizer.json and tokenizer_config.json into the new folder out_dir. Everything is
 * written into out_dir + ".tmp" (a stale one from a failed run is removed first) and renamed
 * at the end: on failure no folder exists at out_dir. out_dir itself must not exist.
 * Returns OK, E_INVALID_ARG (unknown shape, dims out of range, named in the message; out_dir
 * exists), E_IO, E_NOMEM. */
slate_status slate_synth(const char *out_dir, const slate_synth_params *params,
                         slate_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Tokenizer                                                                                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct slate_tokenizer slate_tokenizer; /* read-only after creation; shareable */

/* Opens a tokenizer from a file: a .slate package, a Hugging Face tokenizer.json (a
 * tokenizer_config.json beside it is read for special tokens), a GGUF file (its tokenizer.ggml.*
 * keys), or a llama2.c tokenizer .bin. The format is detected from the content.
 * Returns SLATE_OK, E_INVALID_ARG, E_IO, E_FORMAT, E_UNSUPPORTED, E_NOMEM. *out is NULL on
 * failure. Free with slate_tokenizer_free(). */
slate_status slate_tokenizer_open(const char *path, slate_tokenizer **out, slate_error *err);
void slate_tokenizer_free(slate_tokenizer *tok);

enum {
    SLATE_ENCODE_ADD_BOS = 1u << 0,       /* prepend BOS if the vocabulary has one and adds it */
    SLATE_ENCODE_PARSE_SPECIAL = 1u << 1, /* map special-token text ("<|im_end|>") to its id */
};

/* Encodes text[0..len) (UTF-8, need not be NUL-terminated) into ids[0..cap).
 * flags: SLATE_ENCODE_*. *n_out receives the number of ids; if cap is too small, returns
 * SLATE_E_BUFFER_TOO_SMALL with *n_out set to the number needed. Invalid UTF-8 is encoded byte by
 * byte (byte fallback), never rejected. Returns OK, E_INVALID_ARG, E_BUFFER_TOO_SMALL, E_NOMEM,
 * E_INTERNAL (the pre-split regex engine failed). */
slate_status slate_tokenizer_encode(const slate_tokenizer *tok, const char *text, size_t len,
                                    uint32_t flags, int32_t *ids, size_t cap, size_t *n_out,
                                    slate_error *err);

/* Writes the bytes that token `id` stands for into buf[0..cap) (not terminated; may be part of a
 * UTF-8 character; control tokens give their text only if `special` is true, else nothing).
 * *len_out receives the byte count. Returns OK, E_INVALID_ARG (id out of range),
 * E_BUFFER_TOO_SMALL (with *len_out = bytes needed). */
slate_status slate_tokenizer_piece(const slate_tokenizer *tok, int32_t id, bool special,
                                   char *buf, size_t cap, size_t *len_out, slate_error *err);

/* Decodes ids into buf: like concatenating pieces, except that for SentencePiece vocabularies
 * that add a leading space when encoding, the space of the first token that produces text is
 * removed (so decode(encode(x)) == x). Output not terminated; *len_out as for _piece. */
slate_status slate_tokenizer_decode(const slate_tokenizer *tok, const int32_t *ids, size_t n,
                                    bool special, char *buf, size_t cap, size_t *len_out,
                                    slate_error *err);

int32_t slate_tokenizer_n_vocab(const slate_tokenizer *tok); /* 0 for NULL */
int32_t slate_tokenizer_bos(const slate_tokenizer *tok);     /* -1 if none */
int32_t slate_tokenizer_eos(const slate_tokenizer *tok);     /* -1 if none */
/* Whether id is an end-of-generation token (EOS, EOT, <|im_end|>, ...). */
bool slate_tokenizer_is_eog(const slate_tokenizer *tok, int32_t id);

/* Length (1..4) of the valid UTF-8 character that starts s[0..n), or 0 when none does: s NULL
 * or n 0, a stray continuation byte, an overlong form, a surrogate, a code point past U+10FFFF,
 * or a sequence cut short by another byte or by n. The strict check (RFC 3629) the tokenizer
 * and the detokenizer make, for callers that cut or clean text at character boundaries (the
 * server's error messages quote client bytes through it). A NUL byte is U+0000: 1. Cannot
 * fail; allocates nothing. */
size_t slate_utf8_char_len(const char *s, size_t n);

/* Streaming detokenizer: turns ids into text pieces that are always whole UTF-8 characters,
 * holding back the bytes of a character that spans several tokens. */
typedef struct slate_detok slate_detok;
slate_status slate_detok_create(const slate_tokenizer *tok, slate_detok **out, slate_error *err);
void slate_detok_free(slate_detok *d);
/* Feeds one id; writes the complete characters now available into buf[0..cap), *len_out bytes
 * (not terminated). Returns OK, E_INVALID_ARG, E_BUFFER_TOO_SMALL (nothing consumed). */
slate_status slate_detok_push(slate_detok *d, int32_t id, char *buf, size_t cap,
                              size_t *len_out, slate_error *err);
/* Flushes held-back bytes (an incomplete character at the end becomes U+FFFD). */
slate_status slate_detok_flush(slate_detok *d, char *buf, size_t cap, size_t *len_out,
                               slate_error *err);
/* A new detokenizer takes its first text-producing token as the start of the text and drops
 * the tokenizer's dummy-prefix space from it (SentencePiece-style vocabularies; as
 * slate_tokenizer_decode does). Called before the first push, this says the text continues
 * earlier text instead (a completion of a prompt), so every space is kept. E_INVALID_ARG for
 * NULL or after text has been produced. */
slate_status slate_detok_continue(slate_detok *d, slate_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Model                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct slate_model slate_model; /* read-only after open; shareable across threads */
typedef struct slate_state slate_state; /* one conversation: KV cache + scratch */

/* Receives memory-pressure events (section "Memory pressure"). */
typedef struct slate_pressure_event slate_pressure_event;
typedef void (*slate_pressure_fn)(void *user, const slate_pressure_event *event);

typedef struct slate_model_params {
    size_t mem_budget_bytes; /* 0: no limit. Weights + one state (package context and cache
                                dtype) must fit at open, else E_BUDGET; slate_state_create then
                                checks weights + live states + the new one. See "Planner". */
    int32_t n_threads;       /* threads per call; 0: one per online core */
    bool use_mmap;           /* true: map weights read-only from the page cache; false (default):
                                read them into anonymous memory (stable decode speed here).
                                Mapped, the file must not be truncated or rewritten in place
                                while the model is open (the process would fault, SIGBUS);
                                replacing it by rename, as slate's writers do, is safe */
    /* Memory pressure (see "Memory pressure" below); all optional. */
    const char *spill_dir;       /* folder for spilled idle states (copied at open); NULL:
                                    pressure never spills, step 2 is skipped */
    slate_pressure_fn on_pressure; /* called for every pressure action, from the thread that
                                    acts (the caller of slate_model_pressure, the watcher, or
                                    the state's own thread); must be thread-safe. NULL: each
                                    action is logged on stderr instead */
    void *pressure_user;         /* passed to on_pressure */
    int32_t pressure_watch_ms;   /* > 0: a watcher thread polls Linux memory pressure (PSI
                                    /proc/pressure/memory, cgroup memory.events) every this
                                    many ms and calls slate_model_pressure; 0 (default): off */
    bool kv_keep_all;            /* true: no state of this model releases the cache rows its
                                    sliding-window layers no longer need (see
                                    slate_state_params.kv_keep_all); the environment variable
                                    SLATE_KV_KEEP_ALL=1 at open does the same */
    int32_t kv_rollback_tokens;  /* the rollback reach (slate_state_params.kv_rollback_tokens)
                                    of every state whose own params leave it 0, and the one
                                    slate_model_plan and slate_model_describe plan with when
                                    theirs leave it 0; 0 (default): the package's max_query;
                                    else 1..package context (outside: E_INVALID_ARG at open) */
} slate_model_params;

slate_model_params slate_model_default_params(void);

/* Opens a package: validates the whole file (header, checksums, tensor table, program, states,
 * tokenizer), binds weights, and plans memory for the largest allowed shapes.
 * params: NULL for defaults. Returns OK, E_INVALID_ARG, E_IO, E_FORMAT, E_UNSUPPORTED (also
 * when SLATE_KERNELS asks for a kernel set this CPU cannot run: slate_kernels_name), E_NOMEM,
 * E_BUDGET. *out is NULL on failure. */
slate_status slate_model_open(const char *path, const slate_model_params *params,
                              slate_model **out, slate_error *err);

/* Closes a model. Returns SLATE_E_BUSY and changes nothing while states of it are alive.
 * NULL is accepted and returns OK. */
slate_status slate_model_close(slate_model *model);

typedef struct slate_model_info {
    const char *arch;       /* architecture name from the package ("llama", "qwen2", ...) */
    int32_t n_vocab;
    int32_t n_ctx;          /* largest total length (context) */
    int32_t max_query;      /* largest query length per predict call */
    int32_t n_layers;
    int32_t n_ops;          /* ops in the program */
    int32_t n_states;       /* declared state tensors */
    size_t weights_bytes;   /* bytes of weight data */
    size_t kv_bytes_per_token;  /* all state tensors, one position */
    size_t kv_bytes_max;        /* all state tensors, n_ctx positions */
    size_t scratch_bytes;       /* activations + logits for max_query rows, per state */
    size_t state_bytes;         /* kv_bytes_max + scratch_bytes */
    int32_t n_threads;          /* threads each predict call uses */
    uint64_t fingerprint;       /* hash of META, tokenizer and samples of every weight tensor;
                                   state files record it (see "Persistence") */
} slate_model_info;

/* Fills *info (strings borrowed, valid until the model is closed). Returns OK or E_INVALID_ARG. */
slate_status slate_model_get_info(const slate_model *model, slate_model_info *info);

/* Borrowed tokenizer of the package, valid until the model is closed. NULL for NULL. */
const slate_tokenizer *slate_model_tokenizer(const slate_model *model);

/* Writes a human-readable summary of the program (ops, tensors, states, memory plan) into
 * buf[0..cap). The weights line gives the bytes of each float dtype and of each compressed one
 * present, with its bits per weight (stored bytes x 8 / elements). The memory plan is slate_model_plan's with default params (one state at the
 * package's context, the model's kv_keep_all and kv_rollback_tokens): the KV reservation, the
 * resident bound that counts instead when sliding-window caches release rows (or why they
 * count whole: every row kept, or the window + reach cover the context), and the total
 * a budget counts (slate_plan.total_bytes). The text is NUL-terminated; *len_out is the length
 * without the NUL, or with E_BUFFER_TOO_SMALL the size needed with it (allocate *len_out bytes
 * and call again). */
slate_status slate_model_describe(const slate_model *model, char *buf, size_t cap,
                                  size_t *len_out);

/* ------------------------------------------------------------------------------------------ */
/* State: one conversation                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct slate_state_params {
    int32_t n_ctx; /* 0: the package's context; else 1..package context (smaller = less memory) */
    /* Cache dtype. kv_dtype_set false (default): every state tensor keeps the dtype the package
     * declares (F16 for packages converted since issue 4, F32 before). true: kv_dtype, one of
     * F32, F16 or I8 (int8, one scale per kv head and position: about half of F16's memory).
     * kv_dtype other than F32 (0) with kv_dtype_set false is refused (E_INVALID_ARG), so
     * forgetting the flag cannot silently give the default. */
    bool kv_dtype_set;
    slate_dtype kv_dtype;
    /* Sliding windows. A cache read only by attention with a window w (Mistral, Phi-3, Gemma
     * 2/3's local layers) needs, for a query at position L, only keys L-w+1..L. After each
     * predict the state hands back (madvise) the whole pages of such a cache that hold only
     * positions below length - w - kv_rollback_tokens + 1, so its memory stays about w +
     * kv_rollback_tokens positions however long the conversation (slate_plan.kv_bytes gives the
     * bound). Results do not change. What does: slate_state_truncate can go back at most
     * about kv_rollback_tokens positions (further: SLATE_E_RELEASED), and
     * slate_state_read_tensor refuses a cache with released rows (slate_tensor_info says which
     * positions are held). State files keep working (they store the first position held). */
    int32_t kv_rollback_tokens; /* positions truncate must be able to go back; 0: the model's
                                   (slate_model_params.kv_rollback_tokens, by default the
                                   package's max_query); 1..package context */
    bool kv_keep_all;           /* true: keep every position (no release), e.g. to export every
                                   row with read_tensor; also forced by the model's kv_keep_all */
} slate_state_params;

slate_state_params slate_state_default_params(void);

/* Creates a state (KV cache + scratch, planned here with slate_model_plan's arithmetic; predict
 * allocates nothing). The cache reserves address space for n_ctx positions but memory is only
 * committed as it fills (anonymous MAP_NORESERVE mapping, one page-aligned block per state
 * tensor); a 2 MiB chunk of it at least half full of rows moves to one huge page, so at most
 * twice the rows' bytes are committed (docs/design.md; SLATE_NO_HUGEPAGES=1 turns this off).
 * The budget counts the whole reservation either way. With a budget
 * (slate_model_params.mem_budget_bytes), weights + every live state + this one must fit,
 * else E_BUDGET with the numbers and the largest context that would fit. params may be NULL. Returns OK, E_INVALID_ARG, E_UNSUPPORTED (kv_dtype), E_NOMEM, E_BUDGET. */
slate_status slate_state_create(slate_model *model, const slate_state_params *params,
                                slate_state **out, slate_error *err);
void slate_state_free(slate_state *state);

typedef struct slate_predict_params {
    bool all_logits;   /* false: logits of the last position only; true: of every position */
    /* Optional additive attention mask, row-major [n_tokens][length + n_tokens] (0 or -inf
     * typically), replacing the default causal mask. NULL: causal from the state's length. A
     * model's sliding window (Mistral, Phi-3, Gemma 3's local layers) still applies with a
     * mask: a query at position p never sees keys before p - window + 1. */
    const float *mask;
} slate_predict_params;

slate_predict_params slate_predict_default_params(void);

/* Feeds n_tokens ids (1..max_query) at positions length..length+n_tokens-1, writes their keys
 * and values into the state's cache in place, and computes logits (see slate_state_logits).
 * On success the state's length grows by n_tokens. On failure the length is unchanged (cache
 * rows past the length may have been written; they are not part of the state).
 * Returns OK, E_INVALID_ARG (NULL, token id outside the vocabulary), E_SHAPE (n_tokens outside
 * 1..max_query), E_CONTEXT_FULL (length + n_tokens > n_ctx), E_BUSY (another call is running
 * on this state), E_CANCELLED (critical memory pressure reset this state: the message says how
 * many positions were dropped; the state is empty and usable afterwards), E_IO / E_FORMAT (a
 * spilled state could not be read back; it was reset). A spilled state (see "Memory
 * pressure") is restored transparently first. */
slate_status slate_state_predict(slate_state *state, const int32_t *tokens, int32_t n_tokens,
                                 const slate_predict_params *params, slate_error *err);

/* Logits of the last predict call: rows of n_vocab floats; *n_rows (may be NULL) is 1, or the
 * number of tokens of that call when all_logits was set. Borrowed: valid until the next predict,
 * reset or free on this state. NULL before the first predict. */
const float *slate_state_logits(const slate_state *state, int32_t *n_rows);

int32_t slate_state_length(const slate_state *state); /* positions in the cache; 0 for NULL */
int32_t slate_state_n_ctx(const slate_state *state);  /* capacity in positions */

/* Empties the cache (length 0). Also acknowledges a reset by memory pressure (no E_CANCELLED
 * report follows) and drops a spill file. Returns OK, E_INVALID_ARG, E_BUSY. */
slate_status slate_state_reset(slate_state *state);

/* Shortens the state to `length` positions, keeping the cache prefix. length must be
 * 0..current length. With sliding-window caches whose old rows were released (see
 * slate_state_params.kv_rollback_tokens), a length p > 0 must leave every such cache holding
 * the positions p - window + 1 .. p - 1 the next query reads; a shorter length is refused with
 * E_RELEASED naming the cache, its window and the shortest length allowed (the state is
 * unchanged: reset it and prefill again; truncating to 0 always works). Returns OK,
 * E_INVALID_ARG, E_RELEASED, E_BUSY, E_CANCELLED (memory pressure reset the state), E_IO /
 * E_FORMAT (a spilled state could not be read back; it was reset). */
slate_status slate_state_truncate(slate_state *state, int32_t length, slate_error *err);

typedef struct slate_tensor_info {
    const char *name;     /* borrowed, valid until the model is closed */
    slate_dtype dtype;
    int32_t n_dims;
    int64_t dims[4];      /* outermost first: states are [n_ctx][width] */
    size_t row_bytes;     /* bytes of one position */
    int32_t window;       /* > 0: read only by sliding-window attention of this window (the
                             largest, when several read it); 0: by full attention or none */
    int32_t first_position; /* positions [first_position, length) are held; rows before were
                               released by the window (0 unless window > 0 and the state
                               releases; see slate_state_params.kv_rollback_tokens) */
} slate_tensor_info;

/* Number of state tensors (the KV caches) and their descriptions. */
int32_t slate_state_n_tensors(const slate_state *state);
slate_status slate_state_tensor_info(const slate_state *state, int32_t index,
                                     slate_tensor_info *info);

/* Export: copies positions [0, length) of state tensor `index` into buf[0..cap), in the state's
 * cache dtype, as rows of row_bytes (every kv head's piece of a position side by side, whatever
 * the in-memory layout); *len_out = bytes written (or needed, with E_BUFFER_TOO_SMALL). Like
 * every call that touches the cache it takes the state (E_BUSY while another call runs) and
 * reads a spilled state back first. A sliding-window cache whose first rows were released
 * (slate_tensor_info.first_position > 0) is refused with E_RELEASED rather than exported with
 * rows it no longer holds: create the state with kv_keep_all to export every row. Returns OK,
 * E_INVALID_ARG, E_BUFFER_TOO_SMALL, E_RELEASED, E_BUSY,
 * E_CANCELLED (memory pressure reset the state), E_IO / E_FORMAT (a spilled state could not be read back;
 * it was reset). */
slate_status slate_state_read_tensor(const slate_state *state, int32_t index, void *buf,
                                     size_t cap, size_t *len_out, slate_error *err);

/* Import: sets positions [0, n_positions) of state tensor `index` from data (n_positions *
 * row_bytes bytes). After importing every tensor, call slate_state_set_length(). Returns OK,
 * E_INVALID_ARG, E_BUSY, E_CANCELLED (memory pressure reset the state), E_IO / E_FORMAT (a spilled state could not be read back;
 * it was reset). */
slate_status slate_state_write_tensor(slate_state *state, int32_t index, const void *data,
                                      size_t len, int32_t n_positions, slate_error *err);

/* Declares that the first `length` positions of every state tensor hold valid cache rows
 * (after slate_state_write_tensor; so every tensor's first_position becomes 0). Returns OK, E_INVALID_ARG (length > n_ctx), E_BUSY, E_IO /
 * E_FORMAT (a spilled state could not be read back; it was reset). */
slate_status slate_state_set_length(slate_state *state, int32_t length, slate_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Sampler                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct slate_sampler slate_sampler;

typedef struct slate_sampler_params {
    float temperature;        /* 0: greedy (argmax); > 0 scales logits; range [0, 100] */
    int32_t top_k;            /* 0: off; else keep the k most likely */
    float top_p;              /* 1: off; (0, 1]: nucleus */
    float min_p;              /* 0: off; [0, 1]: drop tokens below min_p * p_max */
    float repeat_penalty;     /* 1: off; > 0: divide positive / multiply negative logits of
                                 recent tokens */
    int32_t repeat_last_n;    /* window of recent tokens for the penalties (default 64) */
    float presence_penalty;   /* 0: off; subtracted once for any recent token, [-2, 2] */
    float frequency_penalty;  /* 0: off; subtracted per occurrence, [-2, 2] */
    uint64_t seed;            /* RNG seed; same seed + same logits = same tokens */
} slate_sampler_params;

slate_sampler_params slate_sampler_default_params(void);

/* Returns OK, E_INVALID_ARG (a parameter outside its range, named in the message), E_NOMEM. */
slate_status slate_sampler_create(const slate_sampler_params *params, int32_t n_vocab,
                                  slate_sampler **out, slate_error *err);
void slate_sampler_free(slate_sampler *s);

/* Picks a token from logits[0..n_vocab) (not modified) and records it for the penalties.
 * Returns OK, E_INVALID_ARG (NULL, n_vocab mismatch, all logits -inf or NaN). */
slate_status slate_sampler_sample(slate_sampler *s, const float *logits, int32_t n_vocab,
                                  int32_t *token_out, slate_error *err);
/* Records a token without sampling it (prompt tokens, for the penalties). */
slate_status slate_sampler_accept(slate_sampler *s, int32_t token);
/* Forgets recorded tokens; the RNG keeps its position. */
void slate_sampler_reset(slate_sampler *s);

/* ------------------------------------------------------------------------------------------ */
/* Generation loop                                                                            */
/* ------------------------------------------------------------------------------------------ */

typedef enum slate_finish_reason {
    SLATE_FINISH_NONE = 0,
    SLATE_FINISH_LENGTH = 1,       /* n_predict tokens generated */
    SLATE_FINISH_EOS = 2,          /* an end-of-generation token or a stop token id */
    SLATE_FINISH_STOP_STRING = 3,  /* a stop string appeared in the text */
    SLATE_FINISH_CONTEXT_FULL = 4, /* the state's context is full */
    SLATE_FINISH_CANCELLED = 5,    /* the callback asked to stop */
    SLATE_FINISH_MEMORY_PRESSURE = 6, /* memory pressure reset the state (sessions) */
} slate_finish_reason;

const char *slate_finish_reason_str(slate_finish_reason reason);

/* Receives each piece of generated text (whole UTF-8 characters, not terminated). Return false
 * to cancel the generation. */
typedef bool (*slate_piece_fn)(void *user, const char *text, size_t len);

/* Whether the generated text continues text that is already in the state: it decides whether
 * the first generated token keeps its leading space in SentencePiece-style vocabularies, whose
 * pieces carry the space before a word ("▁there"), of which decoding drops the first. */
typedef enum slate_text_before {
    SLATE_TEXT_BEFORE_AUTO = 0, /* SOME when the state held positions before this call or a
                                   prompt id passed produces text (slate_tokenizer_piece without
                                   special), else NONE */
    SLATE_TEXT_BEFORE_NONE = 1, /* the generated text stands alone: its first space goes, as
                                   when the generated ids are decoded on their own (chat replies) */
    SLATE_TEXT_BEFORE_SOME = 2, /* it continues the prompt's text: every space is kept, so
                                   prompt + output reads as the model wrote it (completions) */
} slate_text_before;

typedef struct slate_generate_params {
    int32_t n_predict;                /* most tokens to generate; 0: none (the prompt is only
                                         prefilled); < 0: until the context is full */
    slate_sampler_params sampler;
    const char *const *stop_strings;  /* n_stop NUL-terminated strings; never printed */
    int32_t n_stop;
    const int32_t *stop_tokens;       /* extra token ids that end generation (besides EOG) */
    int32_t n_stop_tokens;
    slate_piece_fn on_piece;          /* may be NULL */
    void *user;
    bool ignore_eos;                  /* end-of-generation tokens (and the model's stop ids) do
                                         not end generation: benchmarks, load tests
                                         (slate_session_generate refuses it) */
    int32_t *tokens_out;              /* NULL, or room for tokens_cap ids: the sampled ids in
                                         order (at most tokens_cap are written; the count is
                                         result.n_generated) */
    int32_t tokens_cap;
    float *dump_logits;               /* NULL, or room for dump_logits_cap rows of n_vocab
                                         floats: the logits each sampled token was drawn from,
                                         row i for result token i (at most dump_logits_cap rows
                                         are written). Rows a call can produce: n_predict, or
                                         with n_predict < 0 the context left after the prompt,
                                         plus one (a token is sampled at a full context) */
    int32_t dump_logits_cap;          /* rows dump_logits has room for: >= 1 with dump_logits,
                                         0 without */
    slate_text_before text_before;    /* default AUTO */
} slate_generate_params;

slate_generate_params slate_generate_default_params(void);

typedef struct slate_generate_result {
    slate_finish_reason finish;
    int32_t n_prompt;             /* prompt tokens fed */
    int32_t n_generated;          /* tokens sampled (including a final EOS) */
    double ttft_ms;               /* start to first sampled token */
    double prefill_ms;
    double decode_ms;             /* after the first token */
} slate_generate_result;

/* Feeds prompt[0..n_prompt) into state (appending to what it holds), then samples up to
 * n_predict tokens, streaming text through on_piece (with n_prompt 0 the first token comes from
 * the logits the state holds: its last position's row, also after an all_logits predict).
 * Stops on EOG/stop tokens, stop strings (a
 * stop string split across tokens still stops and is not emitted), n_predict, a full context
 * (finish = CONTEXT_FULL, status OK), or cancellation. The call holds the state from start to
 * end: any other call on it meanwhile, from another thread or from on_piece, gets E_BUSY. Every
 * prompt id is checked before anything is fed (E_INVALID_ARG names the first bad one and its
 * index), so a bad prompt leaves the state as it was. Returns OK, E_INVALID_ARG, E_SHAPE,
 * E_CONTEXT_FULL (the prompt itself does not fit), E_BUSY, E_NOMEM, E_CANCELLED (memory pressure reset the state), E_IO / E_FORMAT (a spilled state could not be read back;
 * it was reset). */
slate_status slate_generate(slate_state *state, const int32_t *prompt, int32_t n_prompt,
                            const slate_generate_params *params, slate_generate_result *result,
                            slate_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Session: a chat conversation                                                               */
/* ------------------------------------------------------------------------------------------ */

/* A session owns one state and keeps the conversation (its messages) and the token ledger: the
 * exact ids its state holds, in order. Each turn renders the whole conversation with the
 * model's chat template, tokenizes it (SLATE_ENCODE_PARSE_SPECIAL), keeps the longest prefix
 * the ledger shares with it (cross-turn reuse: only the new suffix is computed), generates the
 * assistant's reply and appends it to the conversation.
 *
 *     slate_session *chat = NULL;
 *     if (slate_session_create(model, NULL, &chat, &err) != SLATE_OK) ... // template detected
 *     slate_session_add_message(chat, SLATE_ROLE_SYSTEM, "Be brief.", 9, &err);
 *     slate_session_add_message(chat, SLATE_ROLE_USER, "Hi!", 3, &err);
 *     slate_generate_params gp = slate_generate_default_params();
 *     slate_generate_result res;
 *     slate_session_generate(chat, &gp, on_event, NULL, &res, &err);  // streams the reply
 *     slate_session_add_message(chat, SLATE_ROLE_USER, "And then?", 9, &err);
 *     slate_session_generate(chat, &gp, on_event, NULL, &res, &err);  // reuses turn 1's cache
 *     slate_session_free(chat);
 *
 * Reuse is exact. The ledger also records where each predict call ended; the cache is only
 * ever cut back to such a boundary, so every cached row is what a fresh state computes from the
 * same calls, and a reused turn's logits and tokens are bit-identical to those of a fresh state
 * fed the ledger's calls (a reuse that would end inside a call gives up the rest of that call;
 * prefill calls also end after the system message and after the last complete turn, so those
 * prefixes stay reusable). Matching is on token ids, never on text.
 *
 * Templates: the family is detected from the model's chat template (slate_model_chat_template)
 * by markers: "chatml" (<|im_start|>: Qwen2/2.5, SmolLM), "qwen3" (ChatML whose template
 * handles </think>), "llama3" (<|start_header_id|>), "llama31" (Llama 3.1/3.2: the same plus
 * the "Cutting Knowledge Date" system block), "llama2" ([INST] with <<SYS>>), "mistral" ([INST]
 * without, v0.1/v0.2 spacing), "gemma" (<start_of_turn>), "phi3" (<|user|> ... <|end|>),
 * "zephyr" (<|user|> ... </s>), "mistral-v1" (the template mistralai put on v0.1/v0.2 in 2024:
 * ' [INST] ' with a space before, and before each reply), "phi3-v1" (Phi-3's first template:
 * BOS, the assistant header after every user message, no system role: a non-empty system
 * message is refused, where the source drops it), "phi4-mini" (<|user|>...<|end|> with no
 * newlines: Phi-4-mini). Each is rendered exactly as its official
 * template (BOS and EOS
 * text, newlines, the generation prompt); src/gen/template.c lists the sources. A model whose
 * template matches no family is refused, never guessed: name one in template_name.
 * Special tokens are parsed only in the template's own text: message text that spells a
 * special token ("<|im_end|>") gets that text's ordinary tokens, so it cannot end its turn or
 * forge another (Hugging Face's apply_chat_template, which tokenizes the whole rendering with
 * special tokens on, does not do this).
 *
 * Thread safety: a session is used by one thread at a time; a call that overlaps another call
 * on the same session returns SLATE_E_BUSY. The exception is slate_session_cancel(), which any
 * thread, or a signal handler, may call at any time. Sessions of one model run concurrently.
 * The session's state (slate_session_state) must not be used directly while the session lives,
 * except as that function says. */
typedef struct slate_session slate_session;

typedef enum slate_role {
    SLATE_ROLE_SYSTEM = 0,
    SLATE_ROLE_USER = 1,
    SLATE_ROLE_ASSISTANT = 2,
} slate_role;

/* What a turn does when the conversation does not fit: the rendered conversation plus
 * n_reserve positions for the reply must fit the state's context. Turns are never cut. */
typedef enum slate_context_policy {
    SLATE_CONTEXT_REFUSE = 0,    /* the turn fails with SLATE_E_CONTEXT_FULL and the numbers */
    SLATE_CONTEXT_ROLL = 1,      /* drop the oldest whole turns (user + assistant) until it fits;
                                    the system message stays; an event reports what was dropped */
    SLATE_CONTEXT_SUMMARIZE = 2, /* replace every earlier turn by a summary (from `summarize`, or
                                    written by the model itself), kept after the system message */
} slate_context_policy;

/* Summarizes a transcript ("User: ...\nAssistant: ...\n\n" per turn, NUL-terminated,
 * len bytes; an earlier summary comes first). Returns a NUL-terminated summary allocated with
 * malloc(), which the session frees with free(); NULL fails the turn with SLATE_E_CANCELLED. */
typedef char *(*slate_summarize_fn)(void *user, const char *transcript, size_t len);

/* One message for slate_chat_render (text UTF-8, need not be terminated). */
typedef struct slate_chat_message {
    slate_role role;
    const char *text;
    size_t len;
} slate_chat_message;

/* Renders msgs[0..n) with a chat template, for callers that keep their own conversation (the
 * HTTP server): template_name as for sessions (NULL: detect from the model's template; never
 * guessed). The conversation must be well formed (an optional first system message, then user
 * and assistant alternating from user). add_generation_prompt: end with the header that opens
 * the assistant's reply; with it, a system message alone is refused (E_INVALID_ARG) by the
 * templates that put it inside the first user message (llama2, mistral, mistral-v1, gemma),
 * which would otherwise leave it out of the prompt. Writes the text (not terminated) into buf[0..cap); *len_out = its
 * length (or the size needed with E_BUFFER_TOO_SMALL). Tokenize it with
 * SLATE_ENCODE_PARSE_SPECIAL. Returns OK, E_INVALID_ARG, E_UNSUPPORTED, E_BUFFER_TOO_SMALL,
 * E_NOMEM. */
slate_status slate_chat_render(const slate_model *model, const char *template_name,
                               const slate_chat_message *msgs, int32_t n,
                               bool add_generation_prompt, char *buf, size_t cap,
                               size_t *len_out, slate_error *err);

/* Renders msgs as slate_chat_render does and tokenizes the text for the model, ready to feed:
 * the template's special tokens ("<|im_start|>", BOS...) are parsed, while the messages' text
 * is tokenized as plain text, so a message that spells "<|im_end|>" cannot end its turn or
 * forge another (tokenizing slate_chat_render's text with SLATE_ENCODE_PARSE_SPECIAL would
 * let it). Otherwise the ids are those of the whole text. Writes ids[0..cap); *n_out = the
 * number of ids (or the number needed, with E_BUFFER_TOO_SMALL). Returns OK, E_INVALID_ARG,
 * E_UNSUPPORTED, E_BUFFER_TOO_SMALL, E_NOMEM, E_INTERNAL (the pre-split regex failed). */
slate_status slate_chat_tokenize(const slate_model *model, const char *template_name,
                                 const slate_chat_message *msgs, int32_t n,
                                 bool add_generation_prompt, int32_t *ids, size_t cap,
                                 size_t *n_out, slate_error *err);

typedef struct slate_session_params {
    const char *template_name; /* NULL: detect from the model's chat template; else one of the
                                  names above (copied), overriding the model's template */
    int32_t n_ctx;             /* the state's context; 0: the package's (slate_state_params) */
    slate_context_policy context_policy; /* default SLATE_CONTEXT_REFUSE */
    int32_t n_reserve;         /* positions kept free for the reply when checking that a turn
                                  fits; -1 (default): n_ctx / 4; else 0..n_ctx-1 */
    slate_summarize_fn summarize; /* SLATE_CONTEXT_SUMMARIZE only; NULL: the model writes the
                                  summary (greedy, at most n_summary_max tokens) */
    void *summarize_user;
    int32_t n_summary_max;     /* tokens of a model-written summary, 1..n_ctx-1; 0 (default):
                                  min(128, n_ctx / 4) */
    /* Sliding-window caches (slate_state_params): how far back the next turn can reuse the
     * cache; a turn whose prompt departs from the cached one further back than that (an edit
     * of an early message, a rolled-off turn) prefills the whole prompt again. */
    int32_t kv_rollback_tokens; /* 0: the model's (slate_model_params; default max_query) */
    bool kv_keep_all;           /* keep every position (reuse always possible; more memory) */
} slate_session_params;

slate_session_params slate_session_default_params(void);

/* Creates a session (and its state) on model, which must outlive it (slate_model_close returns
 * E_BUSY meanwhile). params may be NULL. Returns OK, E_INVALID_ARG (a parameter out of range,
 * or an unknown template_name: the message lists the known names), E_UNSUPPORTED (no
 * template_name and the model has no chat template, or one matching no known family: the
 * message lists the names), E_NOMEM, E_BUDGET. *out is NULL on failure. */
slate_status slate_session_create(slate_model *model, const slate_session_params *params,
                                  slate_session **out, slate_error *err);
void slate_session_free(slate_session *session);

/* Static name of the session's template family ("chatml", ...); "" for NULL. */
const char *slate_session_template(const slate_session *session);

/* The model's chat template as stored in the package (Jinja source from chat_template.jinja or
 * tokenizer_config.json, or GGUF tokenizer.chat_template), NUL-terminated, borrowed until the model is closed; NULL if
 * the package has none (or model is NULL). */
const char *slate_model_chat_template(const slate_model *model);

/* Appends a message (text[0..len) UTF-8, copied; need not be terminated). The conversation must
 * stay well formed: an optional system message first, then user and assistant alternating,
 * starting with user (an assistant message may be added to replay a conversation).
 * Returns OK, E_INVALID_ARG (NULL, role out of range, a message out of order: named in the
 * message), E_NOMEM, E_BUSY. */
slate_status slate_session_add_message(slate_session *session, slate_role role,
                                       const char *text, size_t len, slate_error *err);

/* Removes the last message (a user message whose turn failed, a reply to generate again).
 * The cache is untouched (the next turn reuses what still matches). Returns OK,
 * E_INVALID_ARG (NULL, no message), E_BUSY. */
slate_status slate_session_pop_message(slate_session *session, slate_error *err);

/* Number of messages (0 for NULL; -1 while another call runs on the session), and message
 * `index` (0-based): *text is borrowed until the conversation next changes, not terminated.
 * After a summary, message 0 is the system message with the summary appended (as rendered).
 * Returns OK, E_INVALID_ARG (NULL, index out of range), E_BUSY (a call is running on the
 * session: these getters, like slate_session_get_stats and slate_session_ledger, take the
 * session as any call does and never read it under a running turn). */
int32_t slate_session_n_messages(const slate_session *session);
slate_status slate_session_message(const slate_session *session, int32_t index,
                                   slate_role *role, const char **text, size_t *len);

typedef enum slate_session_event_kind {
    SLATE_SESSION_EVENT_TRUNCATED = 1,   /* roll policy: n_turns_dropped turns removed, the
                                            prompt shrank by n_tokens_dropped tokens */
    SLATE_SESSION_EVENT_SUMMARIZED = 2,  /* summarize policy: n_turns_dropped turns replaced by
                                            text[0..len) (the summary); n_tokens_dropped */
    SLATE_SESSION_EVENT_REUSE = 3,       /* before prefill: n_prompt_tokens rendered, of which
                                            n_tokens_reused come from the cache and
                                            n_tokens_prefill are computed now */
    SLATE_SESSION_EVENT_FIRST_TOKEN = 4, /* the first token is sampled; ttft_ms */
    SLATE_SESSION_EVENT_TEXT = 5,        /* text[0..len): a piece of the reply (whole UTF-8
                                            characters; stop strings are never emitted) */
    SLATE_SESSION_EVENT_FINISH = 6,      /* the reply is complete; finish says why, ttft_ms */
} slate_session_event_kind;

typedef struct slate_session_event {
    slate_session_event_kind kind;
    const char *text;            /* TEXT, SUMMARIZED: borrowed for the callback, not terminated */
    size_t len;
    double ttft_ms;              /* FIRST_TOKEN, FINISH: from the start of the call */
    slate_finish_reason finish;  /* FINISH */
    int32_t n_prompt_tokens;     /* REUSE */
    int32_t n_tokens_reused;     /* REUSE */
    int32_t n_tokens_prefill;    /* REUSE */
    int32_t n_turns_dropped;     /* TRUNCATED, SUMMARIZED */
    int32_t n_tokens_dropped;    /* TRUNCATED, SUMMARIZED */
} slate_session_event;

/* Receives events on the thread that called slate_session_generate; return false to cancel
 * (finish = CANCELLED). Must not call into the session. */
typedef bool (*slate_session_event_fn)(void *user, const slate_session_event *event);

/* Runs one turn: the last message must be the user's. Renders the conversation, applies the
 * context policy if it does not fit, reuses the cache (see above), prefills the rest, samples
 * the reply (params: n_predict >= 1 or < 0 for until the context is full; sampler, stop strings
 * and stop tokens as for slate_generate; on_piece, tokens_out and dump_logits are honoured
 * too; ignore_eos is refused with E_INVALID_ARG, a reply ends at the end of its turn; NULL:
 * defaults), streams events through cb (may be NULL) and appends the reply as an assistant
 * message, also when it was cut short (finish LENGTH, CONTEXT_FULL, CANCELLED, or
 * MEMORY_PRESSURE: critical memory pressure emptied the state, see "Memory pressure"; the next
 * turn computes the conversation again). Generation also ends at the template's end-of-turn
 * token. result (may be NULL): finish, n_prompt = tokens computed this turn (after reuse),
 * n_generated, timings (ttft_ms counts from the call, including rendering and reuse).
 * On failure the conversation is unchanged (the user message stays last; see
 * slate_session_pop_message), except that turns the roll or summarize policy already removed
 * stay removed, and the ledger still matches the state.
 * Returns OK, E_INVALID_ARG (NULL, bad params, last message not the user's), E_CONTEXT_FULL
 * (refuse policy, or the last message alone does not fit: with the numbers), E_CANCELLED (the
 * summarize callback returned NULL), E_NOMEM, E_BUSY, E_IO / E_FORMAT (the session's state was
 * spilled by memory pressure and could not be read back). */
slate_status slate_session_generate(slate_session *session, const slate_generate_params *params,
                                    slate_session_event_fn cb, void *user,
                                    slate_generate_result *result, slate_error *err);

/* Asks the turn running on this session (if any) to stop: it ends with finish = CANCELLED at
 * the next token boundary (or between prefill chunks), keeping the reply so far. Without a
 * running turn it does nothing (a cancel is never held for a later turn). Any thread, any
 * time; async-signal-safe. Returns OK or E_INVALID_ARG (NULL). */
slate_status slate_session_cancel(slate_session *session);

/* Forgets the conversation (messages, summary) and zeroes the statistics. The cache and ledger
 * are kept as a reuse candidate: results are the same as with an empty cache, only faster when
 * the next conversation starts alike (same system message). Returns OK, E_INVALID_ARG, E_BUSY. */
slate_status slate_session_reset(slate_session *session);

typedef struct slate_session_stats {
    const char *template_name;    /* static */
    int32_t n_messages;           /* in the conversation now */
    int32_t n_turns;              /* replies generated since create or reset */
    int32_t n_ledger_tokens;      /* ids the state holds (its length) */
    int32_t n_ctx;                /* the state's context */
    size_t kv_bytes_used;         /* cache bytes of those positions (all state tensors; rows a
                                     sliding window released do not count) */
    int32_t n_reuse_hits;         /* turns that reused at least one cached token */
    int64_t n_tokens_reused;      /* summed over turns */
    int64_t n_tokens_prefilled;   /* prompt tokens computed, summed over turns */
    int64_t n_tokens_generated;   /* sampled, summed over turns */
    double last_ttft_ms;          /* of the last turn; 0 before the first */
    int32_t n_turns_dropped;      /* by the roll and summarize policies */
    int32_t n_summaries;
    int32_t n_reuse_released;     /* turns whose prompt matched the cache further back than a
                                     sliding window's rollback reach (kv_rollback_tokens): the
                                     rows were released, so the whole prompt was prefilled */
} slate_session_stats;

/* Fills *stats. Returns OK, E_INVALID_ARG, E_BUSY (a call is running on the session). */
slate_status slate_session_get_stats(const slate_session *session, slate_session_stats *stats);

/* The session's state, borrowed until the session is freed: for slate_state_get_memory and the
 * like (to save and restore, prefer slate_session_save / _load; after slate_state_load call
 * slate_session_set_ledger). Feeding, truncating or resetting it directly makes the ledger
 * wrong; a turn that finds the state shorter than the ledger keeps only the ledger's first
 * length ids, and one that finds it longer empties it. */
slate_state *slate_session_state(slate_session *session);

/* The ledger: *ids (borrowed until the next call that changes the session) holds the *n ids
 * the state holds, in order. Returns OK, E_INVALID_ARG, E_BUSY (a call is running on the
 * session). */
slate_status slate_session_ledger(const slate_session *session, const int32_t **ids,
                                  int32_t *n);

/* Declares that the state now holds ids[0..n) (after restoring it from a file, whose extra data
 * carries the ledger): n must equal the state's length and every id be in the vocabulary. The
 * restored rows count as one call (they are reused as they are). Returns OK, E_INVALID_ARG,
 * E_BUSY. */
slate_status slate_session_set_ledger(slate_session *session, const int32_t *ids, int32_t n,
                                      slate_error *err);

/* Saves the session to path with slate_state_save (section "Persistence": atomic, versioned,
 * bound to the model): the cache, the ledger (extra tokens) and, as the extra user data, the
 * ledger's call boundaries and the conversation. Returns what slate_state_save returns, plus
 * E_BUSY. */
slate_status slate_session_save(slate_session *session, const char *path, slate_error *err);

/* Replaces the session's cache, ledger and conversation by a file from slate_session_save (of
 * the same model; the session's template is kept). The next turn reuses the restored cache
 * exactly as the saving session would have. Statistics restart. On failure the conversation is
 * unchanged, and so is the cache unless the file's state was read but its conversation part is
 * missing or malformed (a plain slate_state_save file): then the cache is emptied.
 * Returns OK, E_INVALID_ARG, E_IO, E_FORMAT (with the byte offset where it applies),
 * E_UNSUPPORTED (a future version), E_CONTEXT_FULL, E_NOMEM, E_BUSY (see slate_state_load). */
slate_status slate_session_load(slate_session *session, const char *path, slate_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Planner                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* What a model needs in memory, computed before anything is allocated. One function computes
 * it: slate_model_open's and slate_state_create's E_BUDGET checks use the same arithmetic.
 *
 *   KV per token  = sum over state tensors of row bytes (for a llama-family program:
 *                   2 x n_layers x n_kv_heads x head_dim x bytes per element; I8 adds a 4-byte
 *                   scale per kv head and pads each head's values to 4 bytes)
 *   KV reserved   = sum over state tensors of round_up(n_ctx x row bytes, page size)
 *   KV per state  = KV reserved, except that a cache read only by sliding-window attention
 *                   (window w) whose rows are released (slate_state_params.kv_rollback_tokens)
 *                   counts its resident bound instead: per kv head, the pages that can hold
 *                   w + rollback + release step + max_query - 2 rows at any alignment, plus
 *                   one (a page shared with the previous head's rows is never released); the
 *                   step is the rows filling 4 pages of one head, released at once to amortize
 *                   madvise; at most the tensor's reservation
 *   scratch       = activations for max_query rows, rounded up to a page
 *   total         = weights + n_states x (KV per state + scratch)
 *
 * Weights count in full whether they are read into memory or mapped: decoding touches every
 * weight each token, so mapped pages are resident while the model runs. */
typedef struct slate_plan_params {
    int32_t n_ctx;        /* context of each state; 0: the package's */
    bool kv_dtype_set;    /* as in slate_state_params: false = the package's cache dtype */
    slate_dtype kv_dtype; /* F32, F16 or I8 when kv_dtype_set */
    int32_t n_states;     /* conversations held at once; 0: 1 */
    size_t budget_bytes;  /* 0: no budget (fits is true, n_ctx_fit = package context) */
    bool use_mmap;        /* slate_plan_file: plan for mapped weights (slate_model_plan uses how
                             the model was opened) */
    int32_t kv_rollback_tokens; /* as in slate_state_params (0: max_query; slate_model_plan:
                                   the model's kv_rollback_tokens) */
    bool kv_keep_all;     /* as in slate_state_params: plan sliding-window caches whole
                             (slate_model_plan also when the model was opened with it) */
} slate_plan_params;

slate_plan_params slate_plan_default_params(void);

typedef struct slate_plan {
    int32_t n_ctx;                 /* planned context per state */
    int32_t n_ctx_max;             /* the package's context */
    int32_t max_query;             /* the package's largest query (scratch is sized for it) */
    int32_t n_states;
    slate_dtype kv_dtype;          /* planned cache dtype (of the first state tensor) */
    bool weights_mapped;
    size_t weights_bytes;          /* all weight data */
    size_t weights_resident_bytes; /* in anonymous memory (0 when mapped) */
    size_t weights_mapped_bytes;   /* mapped from the file (0 when read) */
    size_t weights_bytes_16bit;    /* the weights if every f32 matrix were f16/bf16 */
    int32_t n_layers, n_kv_heads, head_dim; /* from the package's hparams (0: not declared) */
    size_t kv_bytes_per_token;     /* from the program's state tensors, in kv_dtype */
    size_t kv_formula_bytes_per_token; /* 2 x n_layers x n_kv_heads x head_dim x element bytes
                                          (+ I8 scales); 0 when hparams are missing */
    size_t kv_bytes;               /* one state at n_ctx: what the budget counts, the reservation
                                      with sliding-window caches at their resident bound (see
                                      above); equals kv_reserved_bytes without windows */
    size_t kv_reserved_bytes;      /* one state at n_ctx, as reserved (page-rounded) */
    int32_t kv_rollback_tokens;    /* the rollback reach planned (0 when nothing is released) */
    int32_t n_window_caches;       /* state tensors read only by sliding-window attention (0:
                                      none); each counts whole when kv_rollback_tokens is 0
                                      (kv_keep_all or SLATE_KV_KEEP_ALL) or when its bound is
                                      not below its reservation (window + reach span n_ctx) */
    size_t scratch_bytes;          /* one state */
    size_t state_bytes;            /* kv_bytes + scratch_bytes */
    size_t total_bytes;            /* weights_bytes + n_states x state_bytes */
    size_t budget_bytes;           /* 0: none */
    bool fits;                     /* total_bytes <= budget_bytes (true without a budget) */
    /* Largest context (<= n_ctx_max) at which weights + n_states states fit the budget; 0 when
     * not even one position fits; n_ctx_max without a budget. */
    int32_t n_ctx_fit;
    int32_t n_ctx_fit_f32, n_ctx_fit_f16, n_ctx_fit_i8; /* the same for each cache dtype */
    int32_t n_ctx_fit_16bit;       /* with 16-bit weights (weights_bytes_16bit) and kv_dtype */
} slate_plan;

/* Plans an open model (weights as it was opened). Returns OK, E_INVALID_ARG (NULL, n_ctx
 * outside 0..package context, n_states outside 0..4096, kv_dtype not F32/F16/I8, named in the
 * message), E_UNSUPPORTED (I8 for a program whose caches are not read by attention). Allocates
 * nothing. */
slate_status slate_model_plan(const slate_model *model, const slate_plan_params *params,
                              slate_plan *plan, slate_error *err);

/* Plans a package file without reading its weights (validates the container and program).
 * Returns what slate_model_plan returns, plus E_IO, E_FORMAT, E_NOMEM. */
slate_status slate_plan_file(const char *path, const slate_plan_params *params, slate_plan *plan,
                             slate_error *err);

/* A memory budget: a device from the built-in table, or this machine. */
typedef struct slate_device {
    const char *name;        /* "phone-6gb", ...; "this-machine" */
    const char *note;        /* why the reserve is what it is (static text) */
    size_t ram_bytes;        /* total memory */
    size_t reserved_bytes;   /* held back for the OS and everything else */
    size_t budget_bytes;     /* ram_bytes - reserved_bytes: what a model may use */
} slate_device;

/* Device `index` of the built-in table (0-based): phone-6gb, phone-8gb, rpi5-4gb, rpi5-8gb,
 * laptop-8gb, laptop-16gb. Returns OK, or E_INVALID_ARG past the last one. Strings static. */
slate_status slate_device_get(int32_t index, slate_device *out);

/* Looks a device up by name; "this-machine" (or "this") reads this machine (see below).
 * Returns OK, E_INVALID_ARG (unknown name; the message lists the known ones), E_IO. */
slate_status slate_device_find(const char *name, slate_device *out, slate_error *err);

/* This machine: ram = MemTotal; budget = the smaller of MemAvailable (/proc/meminfo) and the
 * cgroup's limit (v2 memory.max, else v1 memory.limit_in_bytes, of this process's cgroup);
 * reserved = ram - budget. Returns OK, E_IO (no /proc/meminfo). */
slate_status slate_device_this_machine(slate_device *out, slate_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Persistence                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* A state file holds one conversation: positions [first_position, length) of every state
 * tensor (in the state's cache dtype; first_position is 0 except for a sliding-window cache
 * that released rows, slate_tensor_info; a state loaded from it holds the same rows), the last
 * logits, and the caller's extra data (the token ledger, the sampler's RNG, an opaque blob). It is versioned, CRC-checked and bound to its model by the
 * model's fingerprint (slate_model_info.fingerprint); the bytes are in docs/format.md. A state
 * restored from it continues exactly (bit-identical logits) like the uninterrupted one. */

/* Extra data saved with a state (all optional; zero-initialize). */
typedef struct slate_state_extra {
    const int32_t *tokens;  /* the token ledger: ids the state holds (the caller keeps it) */
    int32_t n_tokens;       /* 0..16777216 */
    bool has_rng;           /* rng holds a sampler's RNG (slate_sampler_get_rng) */
    uint64_t rng[4];
    const void *user;       /* opaque bytes (e.g. a chat transcript), user_len 0..64 MiB */
    size_t user_len;
} slate_state_extra;

/* Where slate_state_load puts the extra data. Buffers are the caller's; NULL with cap 0
 * skips a field (its size is still reported). */
typedef struct slate_state_extra_out {
    int32_t *tokens;        /* room for tokens_cap ids */
    int32_t tokens_cap;
    int32_t n_tokens;       /* out: ids in the file */
    bool has_rng;           /* out */
    uint64_t rng[4];        /* out */
    void *user;             /* room for user_cap bytes */
    size_t user_cap;
    size_t user_len;        /* out: bytes in the file */
} slate_state_extra_out;

/* Writes the state to path atomically: a temp created exclusively beside it (path +
 * ".tmp.<pid>.<n>"), fsync, rename; nothing is left at path on failure, and an existing path
 * must be a regular file (or a symbolic link to one) holding a slate state file, empty, or
 * shorter than the magic and starting like it: anything else (a package named by mistake) is
 * refused with E_INVALID_ARG and left as it was. extra may be NULL. A spilled state is
 * read back first. Returns OK, E_INVALID_ARG (NULL, extra counts out of range, a file that is
 * not a state file at path), E_IO, E_NOMEM,
 * E_BUSY, E_CANCELLED (memory pressure reset the state), E_FORMAT (a spilled state could not
 * be read back; it was reset). */
slate_status slate_state_save(slate_state *state, const char *path,
                              const slate_state_extra *extra, slate_error *err);

/* Replaces the state's content with the file's. The file must come from the same model
 * (fingerprint), hold caches of this state's dtypes, and fit its context. extra_out may be
 * NULL. On failure the state is unchanged (except that a memory-pressure reset requested
 * before the load is applied, and reported by the next call). Returns OK, E_INVALID_ARG, E_IO,
 * E_FORMAT (truncated, bad magic, checksum mismatch: with the byte offset), E_UNSUPPORTED (a future
 * version), E_CONTEXT_FULL (more positions than the state's context), E_BUFFER_TOO_SMALL (an
 * extra_out buffer; the sizes needed are in extra_out), E_BUSY, E_CANCELLED (critical memory
 * pressure during the load emptied the state; a reset requested before the load is
 * acknowledged by a successful one instead, see "Memory pressure"). A file from another model is
 * E_INVALID_ARG with both fingerprints in the message; a cache dtype mismatch is E_INVALID_ARG
 * naming both dtypes. */
slate_status slate_state_load(slate_state *state, const char *path,
                              slate_state_extra_out *extra_out, slate_error *err);

/* In-memory variants (a server keeping states in its own store). save_mem writes the same
 * bytes as a file into buf[0..cap); *len_out = bytes written, or needed with
 * E_BUFFER_TOO_SMALL (buf may be NULL with cap 0 to ask the size). */
slate_status slate_state_save_mem(slate_state *state, const slate_state_extra *extra, void *buf,
                                  size_t cap, size_t *len_out, slate_error *err);
slate_status slate_state_load_mem(slate_state *state, const void *data, size_t len,
                                  slate_state_extra_out *extra_out, slate_error *err);

/* The sampler's RNG position (four words, xoshiro256**), to save with a state: a sampler set to
 * a saved RNG draws what the original would have drawn next. set: E_INVALID_ARG for NULL or an
 * all-zero state (unchanged then). */
slate_status slate_sampler_get_rng(const slate_sampler *s, uint64_t rng_out[4]);
slate_status slate_sampler_set_rng(slate_sampler *s, const uint64_t rng[4], slate_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Memory pressure                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* The analogue of a mobile OS's memory warning. The model knows its states; a state is idle
 * when no call is running on it. slate_model_pressure climbs a ladder up to `level`:
 *   1 LOW       trim: release the memory idle states hold but do not need (cache pages past
 *               each state's length, activation scratch except the last logits);
 *   2 MEDIUM    spill: write each idle, non-empty state to params.spill_dir and release its
 *               cache; the state keeps its length and is read back transparently at its next
 *               call (skipped without a spill_dir);
 *   3 CRITICAL  reset: every state that still holds a cache (busy ones at the end of their
 *               running call) is emptied; its next call (or the running one) returns
 *               E_CANCELLED saying how many positions were dropped.
 * Each action is reported through params.on_pressure (or a stderr line). Never fails for lack
 * of memory: a step that cannot complete (disk full) is reported and the ladder goes on.
 * A reset is reported once, by E_CANCELLED from the next call that uses the cache (predict,
 * slate_generate, truncate, read/write_tensor, save); slate_state_reset, slate_state_set_length
 * and a successful slate_state_load acknowledge it silently. A call that arrives while a pass works on its idle
 * state waits for that step (it does not get E_BUSY). */
typedef enum slate_pressure_level {
    SLATE_PRESSURE_NONE = 0,
    SLATE_PRESSURE_LOW = 1,
    SLATE_PRESSURE_MEDIUM = 2,
    SLATE_PRESSURE_CRITICAL = 3,
} slate_pressure_level;

typedef enum slate_pressure_action {
    SLATE_PRESSURE_TRIMMED = 1,     /* pages released; the state is intact */
    SLATE_PRESSURE_SPILLED = 2,     /* written to path, cache released */
    SLATE_PRESSURE_SPILL_FAILED = 3,/* could not be written (message says why); left in memory */
    SLATE_PRESSURE_RESTORED = 4,    /* a spilled state was read back at its next call */
    SLATE_PRESSURE_RESET = 5,       /* n_tokens positions were dropped */
} slate_pressure_action;

struct slate_pressure_event {
    slate_pressure_action action;
    slate_pressure_level level;     /* the level being handled (restores: NONE) */
    slate_state *state;             /* the state acted on (borrowed; do not call into it from
                                       the callback); NULL for the notice that no spill_dir is
                                       configured (SPILL_FAILED at step 2) */
    int32_t n_tokens;               /* positions the state held */
    size_t bytes;                   /* bytes released (TRIMMED, SPILLED, RESET) or read back */
    const char *path;               /* spill file (SPILLED, RESTORED) or NULL */
    const char *message;            /* the log line, e.g. "slate: memory pressure (medium):
                                       spilled a state of 812 positions (25.4 MiB) to ..." */
};

typedef struct slate_pressure_report {
    int32_t n_trimmed, n_spilled, n_spill_failed, n_reset;
    int32_t n_busy;                 /* states skipped at steps 1-2 because a call was running */
    size_t bytes_released;
} slate_pressure_report;

/* Handles memory pressure up to `level` (see above). Safe to call from any thread, at any time,
 * concurrently with calls on the model's states. report may be NULL. Returns OK, or
 * E_INVALID_ARG (NULL model, level outside 0..3). */
slate_status slate_model_pressure(slate_model *model, slate_pressure_level level,
                                  slate_pressure_report *report, slate_error *err);

/* Memory a state holds now. */
typedef struct slate_state_memory {
    size_t kv_reserved_bytes;      /* address space reserved for the cache (n_ctx positions) */
    size_t kv_resident_bytes;      /* of it, pages resident now (mincore) */
    size_t scratch_reserved_bytes;
    size_t scratch_resident_bytes;
    bool spilled;                  /* the cache lives in the spill file until the next call */
} slate_state_memory;

/* Fills *mem. Returns OK, E_INVALID_ARG, E_BUSY (a call is running on the state). */
slate_status slate_state_get_memory(slate_state *state, slate_state_memory *mem);

/* ------------------------------------------------------------------------------------------ */
/* Diagnostics                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* Name of the kernel set picked for this CPU ("ref", "avx2", "avx2_vnni", "avx512",
 * "avx512_vnni", "neon" or "neon_dotprod"). Set SLATE_KERNELS to one of them in the
 * environment before the first open to force it; "ref" forces the scalar reference path. Any
 * other non-empty value, or a set this CPU (or this build) lacks, makes every
 * slate_model_open fail with SLATE_E_UNSUPPORTED naming the sets this CPU runs (it is never
 * replaced by another set without a word). */
const char *slate_kernels_name(void);

/* Per-op profile of a state: one record per op of the program, summed over the predict calls
 * made while profiling was on. Off by default; when off, predict pays one predictable branch per
 * op and nothing else. */
typedef struct slate_op_profile {
    int32_t op_index;          /* position in the program (0-based) */
    const char *op_name;       /* static: "matmul", "attention", "rms_norm", ... */
    const char *weight_name;   /* borrowed (valid until the model is closed): the weight the op
                                  reads (matmul, embedding, rms_norm, rope), or the K cache
                                  (kv_write, attention); NULL for ops on activations only */
    slate_dtype weight_dtype;  /* dtype of weight_name (F32 when weight_name is NULL) */
    const char *kernel;        /* static: the kernel set the op's function comes from ("avx512",
                                  "avx2", "ref"), or "c" for ops the interpreter runs as plain C
                                  loops (add, mul, silu, last_rows, kv_write into an f32 or
                                  int8 cache; into an f16 cache it names the set's to_f16) */
    bool scalar_fallback;      /* the active kernel set is not "ref", yet this op ran the scalar
                                  reference (no variant for its dtype) */
    uint64_t n_calls;          /* predict calls that ran the op */
    uint64_t total_ns;         /* wall time inside the op, summed over the calls */
    uint64_t bytes;            /* weight and KV-cache bytes read or written, summed (activations,
                                  which stay in cache, are not counted) */
    uint64_t flops;            /* floating-point operations (a multiply-add counts 2), summed */
    const char *layout;        /* static, attention only (else NULL): how this state stores the
                                  K cache it reads, "k16" (dim-major in blocks of 16 positions,
                                  for the AVX-512 kernels) or "rows" */
} slate_op_profile;

/* Turns per-op timing on or off. Turning it on clears the counters; turning it off keeps them
 * for slate_state_profile. Returns OK, E_INVALID_ARG (NULL), E_BUSY (a call is running). */
slate_status slate_state_set_profiling(slate_state *state, bool on);

/* Copies the profile (one record per op, in program order) into buf[0..cap); *n_out = the number
 * of ops (also when the buffer is too small: then E_BUFFER_TOO_SMALL and nothing is copied).
 * Counters are zero if profiling was never on. Returns OK, E_INVALID_ARG (NULL state or n_out,
 * NULL buf with cap > 0), E_BUFFER_TOO_SMALL, E_BUSY (a call is running on the state: the
 * counters are being written). Does not allocate. */
slate_status slate_state_profile(const slate_state *state, slate_op_profile *buf, size_t cap,
                                 size_t *n_out);

#ifdef __cplusplus
}
#endif

#endif /* SLATE_H */
