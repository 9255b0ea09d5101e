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
} slate_dtype;

/* Static name ("f32", "f16", "bf16", "i32"), or "?" for an unknown value. */
const char *slate_dtype_name(slate_dtype dtype);

/* ------------------------------------------------------------------------------------------ */
/* Conversion (offline)                                                                       */
/* ------------------------------------------------------------------------------------------ */

typedef struct slate_convert_params {
    slate_dtype dtype;          /* weight dtype for matrices: F32, F16 or BF16 (default F32) */
    const char *tokenizer_path; /* llama2.c checkpoints: the tokenizer .bin; NULL: look for
                                   tokenizer.bin / tok512.bin beside SRC */
    int32_t n_ctx;              /* context length to declare; 0: the source's own value */
    int32_t max_query;          /* largest query length per call; 0: min(512, n_ctx) */
    bool progress;              /* print per-tensor progress on stderr */
} slate_convert_params;

slate_convert_params slate_convert_default_params(void);

/* Converts a checkpoint into a .slate package at out_path.
 * src_path: a llama2.c .bin checkpoint, a .gguf file, or a Hugging Face folder (config.json,
 * *.safetensors, tokenizer.json). The output is written to out_path + ".tmp", flushed and
 * renamed: on failure no file is left at out_path (an existing file there stays untouched).
 * Returns SLATE_OK, E_INVALID_ARG, E_IO, E_FORMAT (lying or corrupt source), E_UNSUPPORTED
 * (unknown architecture or tensor type), E_NOMEM. */
slate_status slate_convert(const char *src_path, const char *out_path,
                           const slate_convert_params *params, slate_error *err);

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
 * byte (byte fallback), never rejected. Returns OK, E_INVALID_ARG, E_BUFFER_TOO_SMALL, E_NOMEM. */
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

/* ------------------------------------------------------------------------------------------ */
/* Model                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct slate_model slate_model; /* read-only after open; shareable across threads */
typedef struct slate_state slate_state; /* one conversation: KV cache + scratch */

typedef struct slate_model_params {
    size_t mem_budget_bytes; /* 0: no limit. Weights + one state must fit, else E_BUDGET. */
    int32_t n_threads;       /* threads per call; 0: one per online core */
    bool use_mmap;           /* true: map weights read-only from the page cache; false (default):
                                read them into anonymous memory (stable decode speed here) */
} slate_model_params;

slate_model_params slate_model_default_params(void);

/* Opens a package: validates the whole file (header, checksums, tensor table, program, states,
 * tokenizer), binds weights, and plans memory for the largest allowed shapes.
 * params: NULL for defaults. Returns OK, E_INVALID_ARG, E_IO, E_FORMAT, E_UNSUPPORTED, E_NOMEM,
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
} slate_model_info;

/* Fills *info (strings borrowed, valid until the model is closed). Returns OK or E_INVALID_ARG. */
slate_status slate_model_get_info(const slate_model *model, slate_model_info *info);

/* Borrowed tokenizer of the package, valid until the model is closed. NULL for NULL. */
const slate_tokenizer *slate_model_tokenizer(const slate_model *model);

/* Writes a human-readable summary of the program (ops, tensors, states, memory plan) into
 * buf[0..cap) as NUL-terminated text; *len_out is the length without the NUL (or the size needed
 * when E_BUFFER_TOO_SMALL). */
slate_status slate_model_describe(const slate_model *model, char *buf, size_t cap,
                                  size_t *len_out);

/* ------------------------------------------------------------------------------------------ */
/* State: one conversation                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct slate_state_params {
    int32_t n_ctx; /* 0: the package's context; else 1..package context (smaller = less memory) */
} slate_state_params;

slate_state_params slate_state_default_params(void);

/* Creates a state (KV cache + scratch, one arena, planned here; predict allocates nothing).
 * params may be NULL. Returns OK, E_INVALID_ARG, E_NOMEM, E_BUDGET. */
slate_status slate_state_create(slate_model *model, const slate_state_params *params,
                                slate_state **out, slate_error *err);
void slate_state_free(slate_state *state);

typedef struct slate_predict_params {
    bool all_logits;   /* false: logits of the last position only; true: of every position */
    /* Optional additive attention mask, row-major [n_tokens][length + n_tokens] (0 or -inf
     * typically), replacing the default causal mask. NULL: causal from the state's length. */
    const float *mask;
} slate_predict_params;

slate_predict_params slate_predict_default_params(void);

/* Feeds n_tokens ids (1..max_query) at positions length..length+n_tokens-1, writes their keys
 * and values into the state's cache in place, and computes logits (see slate_state_logits).
 * On success the state's length grows by n_tokens. On failure the length is unchanged (cache
 * rows past the length may have been written; they are not part of the state).
 * Returns OK, E_INVALID_ARG (NULL, token id outside the vocabulary), E_SHAPE (n_tokens outside
 * 1..max_query), E_CONTEXT_FULL (length + n_tokens > n_ctx), E_BUSY (another call is running
 * on this state). */
slate_status slate_state_predict(slate_state *state, const int32_t *tokens, int32_t n_tokens,
                                 const slate_predict_params *params, slate_error *err);

/* Logits of the last predict call: rows of n_vocab floats; *n_rows (may be NULL) is 1, or the
 * number of tokens of that call when all_logits was set. Borrowed: valid until the next predict,
 * reset or free on this state. NULL before the first predict. */
const float *slate_state_logits(const slate_state *state, int32_t *n_rows);

int32_t slate_state_length(const slate_state *state); /* positions in the cache; 0 for NULL */
int32_t slate_state_n_ctx(const slate_state *state);  /* capacity in positions */

/* Empties the cache (length 0). Returns OK, E_INVALID_ARG, E_BUSY. */
slate_status slate_state_reset(slate_state *state);

/* Shortens the state to `length` positions, keeping the cache prefix. length must be
 * 0..current length. Returns OK, E_INVALID_ARG, E_BUSY. */
slate_status slate_state_truncate(slate_state *state, int32_t length, slate_error *err);

typedef struct slate_tensor_info {
    const char *name;     /* borrowed, valid until the model is closed */
    slate_dtype dtype;
    int32_t n_dims;
    int64_t dims[4];      /* outermost first: states are [n_ctx][width] */
    size_t row_bytes;     /* bytes of one position */
} slate_tensor_info;

/* Number of state tensors (the KV caches) and their descriptions. */
int32_t slate_state_n_tensors(const slate_state *state);
slate_status slate_state_tensor_info(const slate_state *state, int32_t index,
                                     slate_tensor_info *info);

/* Export: copies positions [0, length) of state tensor `index` into buf[0..cap);
 * *len_out = bytes written (or needed, with E_BUFFER_TOO_SMALL). */
slate_status slate_state_read_tensor(const slate_state *state, int32_t index, void *buf,
                                     size_t cap, size_t *len_out, slate_error *err);

/* Import: sets positions [0, n_positions) of state tensor `index` from data (n_positions *
 * row_bytes bytes). After importing every tensor, call slate_state_set_length(). */
slate_status slate_state_write_tensor(slate_state *state, int32_t index, const void *data,
                                      size_t len, int32_t n_positions, slate_error *err);

/* Declares that the first `length` positions of every state tensor hold valid cache rows
 * (after slate_state_write_tensor). Returns OK, E_INVALID_ARG (length > n_ctx), E_BUSY. */
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
} slate_finish_reason;

const char *slate_finish_reason_str(slate_finish_reason reason);

/* Receives each piece of generated text (whole UTF-8 characters, not terminated). Return false
 * to cancel the generation. */
typedef bool (*slate_piece_fn)(void *user, const char *text, size_t len);

typedef struct slate_generate_params {
    int32_t n_predict;                /* most tokens to generate; < 0: until the context is full */
    slate_sampler_params sampler;
    const char *const *stop_strings;  /* n_stop NUL-terminated strings; never printed */
    int32_t n_stop;
    const int32_t *stop_tokens;       /* extra token ids that end generation (besides EOG) */
    int32_t n_stop_tokens;
    slate_piece_fn on_piece;          /* may be NULL */
    void *user;
    float *dump_logits;               /* NULL, or room for n_predict * n_vocab floats: the
                                         logits each sampled token was drawn from */
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
 * n_predict tokens, streaming text through on_piece. Stops on EOG/stop tokens, stop strings (a
 * stop string split across tokens still stops and is not emitted), n_predict, a full context
 * (finish = CONTEXT_FULL, status OK), or cancellation. Returns OK, E_INVALID_ARG, E_SHAPE,
 * E_CONTEXT_FULL (the prompt itself does not fit), E_BUSY. */
slate_status slate_generate(slate_state *state, const int32_t *prompt, int32_t n_prompt,
                            const slate_generate_params *params, slate_generate_result *result,
                            slate_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Diagnostics                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* Name of the kernel set picked for this CPU ("ref", "avx2", "avx512"). Set SLATE_KERNELS=ref
 * in the environment before the first open to force the scalar reference path. */
const char *slate_kernels_name(void);

#ifdef __cplusplus
}
#endif

#endif /* SLATE_H */
