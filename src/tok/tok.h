/*
 * tok.h - tokenizer module (internal interface). The public entry points (slate_tokenizer_*,
 * slate_detok_*) are declared in slate.h and implemented in src/tok/.
 *
 * Two model kinds:
 *  - SPM: SentencePiece-style BPE. Pieces with scores; text is normalized by replacing ' ' with
 *    U+2581 (and optionally prefixing one); repeatedly merge the adjacent pair whose merged piece
 *    exists in the vocabulary with the highest score; characters not in the vocabulary fall back
 *    to <0xXX> byte tokens (byte_fallback) or UNK. Used by llama2.c tokenizer .bin, GGUF
 *    tokenizer.ggml.model = "llama", and HF tokenizer.json with model.type "BPE" +
 *    byte_fallback + a Metaspace/Replace pre-tokenizer/normalizer (Llama 2, TinyLlama, Mistral).
 *  - BPE: byte-level BPE (GPT-2 / Llama 3 / Qwen): text is split by the pre-tokenizer regex
 *    (PCRE2 with Unicode properties), each chunk's bytes are mapped to the GPT-2 byte-to-unicode
 *    alphabet, then merged by merge rank. Used by GGUF tokenizer.ggml.model = "gpt2" and HF
 *    tokenizer.json with a ByteLevel pre-tokenizer.
 * Special (added/control) tokens are matched as whole strings before the model runs when
 * SLATE_ENCODE_PARSE_SPECIAL is given.
 */
#ifndef SLATE_TOK_H
#define SLATE_TOK_H

#include "slate.h"
#include "core/core.h"

typedef enum slate__tok_kind {
    SLATE__TOK_SPM = 1,
    SLATE__TOK_BPE = 2,
} slate__tok_kind;

/* Token types: the GGUF values (tokenizer.ggml.token_type), stored as-is in packages. */
typedef enum slate__tok_type {
    SLATE__TOKT_NORMAL = 1,
    SLATE__TOKT_UNKNOWN = 2,
    SLATE__TOKT_CONTROL = 3,
    SLATE__TOKT_USER_DEFINED = 4,
    SLATE__TOKT_UNUSED = 5,
    SLATE__TOKT_BYTE = 6,
} slate__tok_type;

/* Everything needed to build a tokenizer, filled by an importer. All pointers are borrowed for
 * the duration of slate__tok_create(), which copies what it keeps. */
typedef struct slate__tok_spec {
    slate__tok_kind kind;
    int32_t n_tokens;
    const char *const *tokens;   /* [n_tokens] token text as stored by the source format (SPM:
                                    U+2581 for space, or a plain space for llama2.c; BPE: GPT-2
                                    byte-to-unicode alphabet) */
    const uint32_t *token_lens;  /* [n_tokens] byte lengths, or NULL: tokens are NUL-terminated */
    const float *scores;         /* [n_tokens] or NULL (SPM needs scores; BPE ignores them) */
    const uint8_t *types;        /* [n_tokens] slate__tok_type, or NULL: all NORMAL */
    int32_t n_merges;            /* BPE: merges in rank order, "left right" (one space) */
    const char *const *merges;
    /* BPE pre-tokenizer: one or more regexes applied in sequence (each splits the pieces of the
     * previous one, "Isolated" behaviour: matches and the gaps between them both become pieces).
     * NULL/0 with kind BPE: the GPT-2 regex. */
    const char *const *pre_regexes;
    int32_t n_pre_regexes;
    int32_t bos_id, eos_id, unk_id, pad_id, eot_id; /* -1: none */
    bool add_bos;          /* encode with SLATE_ENCODE_ADD_BOS prepends bos_id */
    bool add_space_prefix; /* SPM: prepend a space to the text before encoding */
    bool byte_fallback;    /* SPM: unknown characters become <0xXX> byte tokens */
    bool space_is_plain;   /* SPM vocab stores the word mark as ' ' (llama2.c), not U+2581 */
    bool nfc;              /* normalize input to Unicode NFC before encoding (Qwen) */
    bool ignore_merges;    /* BPE: a pre-split piece that is itself a token is taken whole
                              (Llama 3's tokenizer.json sets this) */
} slate__tok_spec;

slate_status slate__tok_create(const slate__tok_spec *spec, slate_tokenizer **out,
                               slate_error *err);

/* Loaders for standalone tokenizer files (each builds a spec and calls slate__tok_create). */
/* llama2.c tokenizer .bin (see ../shared/models/SOURCES.md for the format). bos 1, eos 2. */
slate_status slate__tok_load_llama2c(const char *path, slate_tokenizer **out, slate_error *err);
/* HF tokenizer.json (+ tokenizer_config.json beside it, optional: bos/eos/add_bos_token). */
slate_status slate__tok_load_hf(const char *path, slate_tokenizer **out, slate_error *err);

/* Package blob: a self-contained little-endian serialization (layout in docs/format.md,
 * section TOKENIZER). serialize appends to b; deserialize validates every count and string
 * (E_FORMAT naming what was wrong, with the offset into the blob). */
void slate__tok_serialize(const slate_tokenizer *tok, slate__buf *b);
slate_status slate__tok_deserialize(const uint8_t *data, size_t len, slate_tokenizer **out,
                                    slate_error *err);

/* Extra info for the converter / chat templates. Borrowed strings, valid with the tokenizer. */
slate__tok_kind slate__tok_kind_of(const slate_tokenizer *tok);
int32_t slate__tok_find(const slate_tokenizer *tok, const char *text, size_t len); /* -1 */

#endif /* SLATE_TOK_H */
