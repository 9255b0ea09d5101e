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
 *    byte_fallback + a Metaspace/Replace pre-tokenizer/normalizer (Llama 2, TinyLlama, Mistral,
 *    Gemma); those merge as HF's BPE does (merge_ranks): only the pairs the file's merges list,
 *    lowest rank first.
 *  - BPE: byte-level BPE (GPT-2 / Llama 3 / Qwen): text is split by the pre-tokenizer regex
 *    (PCRE2 with Unicode properties), each chunk's bytes are mapped to the GPT-2 byte-to-unicode
 *    alphabet, then merged by merge rank. Used by GGUF tokenizer.ggml.model = "gpt2" and HF
 *    tokenizer.json with a ByteLevel pre-tokenizer.
 * Added tokens are matched as whole strings before the model runs (leftmost, longest first):
 * USER_DEFINED tokens always, CONTROL and UNKNOWN tokens only with SLATE_ENCODE_PARSE_SPECIAL.
 * A matched token with the lstrip / rstrip attribute (HF tokenizer.json; llama.cpp's Phi-3 rule
 * for GGUF) also consumes the white space before / after it; one with the normalized attribute
 * (HF normalized: true) is matched after the others, in the normalized text (encode.c).
 * SPM adds its dummy-prefix space to each stretch of text that starts the input or follows an
 * added token (llama.cpp's behaviour), except for a tokenizer.json with a Metaspace
 * pre-tokenizer, which follows HF: no prefix on a stretch that already starts with a space, and
 * with prepend_scheme "first" none after an added token. A file with both a Metaspace
 * pre-tokenizer and a Prepend normalizer follows the Prepend rules (the normalizer's mark comes
 * first, and Metaspace never doubles it).
 *
 * Files: tok.c (create, tables, getters), encode.c, spm.c, bpe.c, pretok.c (PCRE2 split),
 * normalize.c (NFC), decode.c, detok.c, serialize.c (STOK blob), open.c (format detection),
 * tok_llama2c.c, tok_hf.c, tok_gguf.c, tok_gpt2.c (readers), utf8.c.
 *
 * Known limits (behaviour, not bugs):
 *  - A byte that the vocabulary cannot spell (no <0xXX> / GPT-2 byte token, no <unk>) is dropped
 *    when encoding, as llama.cpp does (SPM drops the whole character, as HF's BPE does);
 *    Falcon's vocabulary lacks 28 byte values, so arbitrary bytes do not round-trip there.
 *    Every other shipped vocabulary spells all 256 bytes.
 *  - With a U+2581 vocabulary, a literal U+2581 in the input reads as a space (sentencepiece
 *    and llama.cpp do the same), so it decodes to ' '.
 *  - NFC (Qwen) changes non-NFC input, so decode(encode(x)) == x only for NFC text.
 *  - Of the HF added-token options, lstrip / rstrip / normalized are applied; single_word: true
 *    is refused (E_UNSUPPORTED, tok_hf.c says why), and so is normalized: true in the two
 *    SentencePiece-style set-ups where our model of the normalizer falls short (a Metaspace
 *    pre-tokenizer with a Prepend normalizer; no Replace normalizer and a token that contains
 *    a space or strips white space; tok_hf.c check_normalized). Where a chat template's plain
 *    spans cut a stretch of text, each side is normalized on its own (encode.c). decode does
 *    no clean_up_tokenization_spaces, and does not restore white space that lstrip / rstrip
 *    consumed.
 *  - Of a tokenizer.json decoder, decode follows how it drops the dummy-prefix mark
 *    (slate__tok_dstrip: Strip after Fuse, Metaspace, or neither) and whether it turns U+2581
 *    into spaces in added tokens as in the others (decode_added_marks: Replace or Metaspace;
 *    a normalized: true added token decodes from its normalized spelling as in HF tokenizers
 *    0.23, where earlier versions used its text: with a Prepend normalizer "</s>" then shows as
 *    " </s>"); NORMAL tokens always have U+2581 as a space, byte tokens always decode to their
 *    byte, and invalid UTF-8 comes out as it is (HF: U+FFFD).
 *  - With byte_fallback, a character whose <0xXX> tokens are not all in the vocabulary gives
 *    one <unk> for the whole character, as HF's BPE does (models/bpe/model.rs merge_word; no
 *    shipped vocabulary lacks a byte token, and llama.cpp would fail on one). HF's order is
 *    kept too: that <unk> stays pending while the characters after it take byte fallback, so
 *    their byte tokens come out before it (spm.c emit_unknown).
 *  - lstrip / rstrip consume Unicode White_Space (HF's Rust \s); llama.cpp strips only ASCII
 *    isspace(), so after a Phi-3 GGUF marker a non-ASCII space (e.g. U+00A0) is consumed here
 *    and kept by llama.cpp.
 *  - SPM without merge_ranks (llama2.c, GGUF "llama") merges by score, as sentencepiece and
 *    llama.cpp do, and has no merges. A tokenizer.json SPM file merges by its merges list as HF
 *    does (merge_ranks: a vocabulary token that no merge makes is never produced by merging, a
 *    pair listed twice counts at its last rank); its scores, derived from the ranks (tok_hf.c),
 *    only inform slate__tok_score. On files converted from sentencepiece both ways give the same
 *    ids. Under merge_ranks two HF details are not modelled, and no known file has them: HF's
 *    byte-fallback <0xXX> and <unk> symbols could take part in a merge that lists them (here a
 *    character that is no token merges with nothing), and model.ignore_merges is not read
 *    for SPM files (HF would then emit a piece that is itself a token without merging it).
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
    int32_t n_merges;            /* BPE, SPM with merge_ranks: merges in rank order, "left
                                    right" (one space); ignored by other SPM */
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
    bool nfc;              /* normalize input to Unicode NFC before encoding (Qwen; either kind) */
    bool ignore_merges;    /* BPE: a pre-split piece that is itself a token is taken whole
                              (Llama 3's tokenizer.json sets this) */
    /* Addition: merges as token id pairs, [n_merges][2] (left, right), rank order. Used instead
     * of `merges` when not NULL (tokenizer.json pair form, deserialization). */
    const int32_t *merge_ids;
    /* Addition, SPM with add_space_prefix, HF Metaspace pre-tokenizer semantics (both false:
     * llama.cpp / sentencepiece / HF Prepend normalizer, which prefix every stretch): */
    bool prefix_unless_spaced; /* no dummy prefix on a stretch that already starts with a space
                                  (or U+2581): Metaspace never doubles the mark */
    bool prefix_first_only;    /* the dummy prefix only on text at offset 0 of the input, not
                                  after an added token (Metaspace prepend_scheme "first") */
    /* Addition: [n_tokens] SLATE__TOK_ATTR_* bits, or NULL: none. Only added tokens
     * (USER_DEFINED, CONTROL, UNKNOWN) may carry them; slate__tok_create refuses others. */
    const uint8_t *attrs;
    /* Addition: SPM, HF BPE model.fuse_unk: consecutive characters that become the unknown
     * token give one unknown token (false: one per character). */
    bool fuse_unk;
    /* Addition: SPM, how decode drops the dummy-prefix mark (slate__tok_dstrip). */
    uint8_t decode_strip;
    /* Addition: SPM, an HF decoder that turns U+2581 into ' ' in every token's string (Replace
     * or Metaspace): added tokens (USER_DEFINED, CONTROL, UNKNOWN) decode with their U+2581 as
     * spaces too, from their normalized spelling when they have SLATE__TOK_ATTR_NORMALIZED (HF
     * tokenizers >= 0.23, AddedVocabulary::simple_id_to_token), and under DSTRIP_METASPACE a
     * first added token loses its marks (literal spaces stay). false: added tokens decode to
     * their text as it is (sentencepiece / llama.cpp / GGUF). */
    bool decode_added_marks;
    /* Addition: SPM, HF tokenizers' BPE model (models/bpe/word.rs merge_all): merge only the
     * pairs listed in the merges (merges / merge_ids, n_merges may be 0), lowest rank first,
     * ties to the leftmost pair, instead of any pair that makes a token, best score first
     * (sentencepiece / llama.cpp / llama2.c). A pair listed twice takes the rank of its last
     * entry, as HF's merge map does (BPE keeps the first, as llama.cpp). */
    bool merge_ranks;
    /* Addition: SPM, HF Metaspace pre-tokenizer with split: true (pre_tokenizers/metaspace.rs):
     * the escaped text is cut before every word mark, each piece keeping its mark with the text
     * that follows it ("\u2581a\u2581\u2581b": "\u2581a", "\u2581", "\u2581b"), and each piece is
     * merged on its own (an unknown token never spans two pieces). */
    bool split_marks;
} slate__tok_spec;

/* How decode drops the SentencePiece dummy-prefix mark again (SPM only; the first token is the
 * first one that produces any bytes, as HF's decoder sees the ids left after skipping special
 * tokens):
 *  - SPM: one ' ' from the first token, when it is a NORMAL token and add_space_prefix
 *    (sentencepiece, llama.cpp; GGUF, llama2.c and tokenizer.json without a known decoder);
 *  - NONE: nothing (an HF decoder without Strip, Metaspace with prepend_scheme "never");
 *  - LEADING: one ' ' at the start of the output, whichever token gave it (a byte token <0x20>
 *    too): HF's Sequence [Replace, ByteFallback, Fuse, Strip(' ', 1, 0)] of Llama 2 files;
 *  - METASPACE: every U+2581 of the first token, if it is a NORMAL token, or an added token
 *    with decode_added_marks (HF's Metaspace decoder, decoders/metaspace.rs:
 *    "\u2581\u2581Hello" first gives "Hello"). */
typedef enum slate__tok_dstrip {
    SLATE__TOK_DSTRIP_SPM = 0,
    SLATE__TOK_DSTRIP_NONE = 1,
    SLATE__TOK_DSTRIP_LEADING = 2,
    SLATE__TOK_DSTRIP_METASPACE = 3,
} slate__tok_dstrip;

/* Added-token attributes, HF tokenizers' AddedToken lstrip / rstrip (llama.cpp's
 * LLAMA_TOKEN_ATTR_LSTRIP / RSTRIP): when the token is matched, the white space (Unicode
 * White_Space, as Rust's regex \s) right before it (LSTRIP, back to the end of the previous
 * added token) or right after it (RSTRIP) is consumed with it and produces no ids.
 * NORMALIZED (HF AddedToken normalized: true): the token is not looked for in the raw input but,
 * after the other added tokens have split it, in the normalized text of each remaining stretch,
 * spelled as the normalizer spells it (see slate__tok_normalize; HF AddedVocabulary::
 * extract_and_normalize). */
#define SLATE__TOK_ATTR_LSTRIP 0x01u
#define SLATE__TOK_ATTR_RSTRIP 0x02u
#define SLATE__TOK_ATTR_NORMALIZED 0x04u
#define SLATE__TOK_ATTR_ALL 0x07u

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

/* ---- additions ------------------------------------------------------------------------- */

/* The same as slate__tok_load_hf over a tokenizer.json held in memory (data[0..len), need not
 * be terminated); config_json: the tokenizer_config.json text, or NULL (config_len ignored). */
slate_status slate__tok_load_hf_mem(const char *data, size_t len, const char *config_json,
                                    size_t config_len, slate_tokenizer **out, slate_error *err);
/* The same as slate__tok_load_llama2c over bytes in memory; name appears in messages. */
slate_status slate__tok_load_llama2c_mem(const uint8_t *data, size_t len, const char *name,
                                         slate_tokenizer **out, slate_error *err);
/* OpenAI GPT-2 files: encoder.json (text -> id) and vocab.bpe (a "#version" line, then one
 * merge "a b" per line). <|endoftext|> becomes a CONTROL token, bos = eos = its id. */
slate_status slate__tok_load_gpt2(const char *encoder_json_path, const char *vocab_bpe_path,
                                  slate_tokenizer **out, slate_error *err);

/* Pre-tokenizer regexes by name: "gpt-2", "llama-bpe" (Llama 3, \p{N}{1,3}), "qwen2" (single
 * \p{N}), "falcon". Returns the number of regexes (0: unknown name) and points *out at a
 * static array of them (applied in sequence). */
int32_t slate__tok_pre_regexes(const char *name, const char *const **out);

/* Token metadata (borrowed, valid with the tokenizer): text as stored (spec form), type,
 * score, SLATE__TOK_ATTR_* bits. Out-of-range ids give NULL / 0. */
const char *slate__tok_text(const slate_tokenizer *tok, int32_t id, size_t *len);
slate__tok_type slate__tok_type_of(const slate_tokenizer *tok, int32_t id);
float slate__tok_score(const slate_tokenizer *tok, int32_t id);
uint8_t slate__tok_attrs(const slate_tokenizer *tok, int32_t id);
/* Whether encode() prepends BOS when asked with SLATE_ENCODE_ADD_BOS. */
bool slate__tok_adds_bos(const slate_tokenizer *tok);

/* Limits enforced by slate__tok_create and the readers (why: far above every real vocabulary,
 * small enough that counts from a corrupt file cannot make us allocate gigabytes). */
#define SLATE__TOK_MAX_TOKENS (1 << 22)     /* 4M tokens (largest real vocabs: ~260k) */
#define SLATE__TOK_MAX_TOKEN_BYTES 65536    /* one token's text */
#define SLATE__TOK_MAX_MERGES (1 << 23)
#define SLATE__TOK_MAX_PRE 16               /* pre-tokenizer regexes */
#define SLATE__TOK_MAX_REGEX_BYTES 65536

/* ---- representation: only the files of src/tok use these fields ---------------------------- */

/* Open-addressing hash from token text to id (linear probing, power-of-two slots, -1 empty). */
typedef struct slate__tok_vocab_map {
    int32_t *slots;
    uint32_t mask;
} slate__tok_vocab_map;

/* Hash from a merge (left id, right id) to its rank and the id it produces. */
typedef struct slate__tok_merge_slot {
    uint64_t key; /* (uint64_t)left << 32 | right; UINT64_MAX: empty */
    int32_t rank;
    int32_t result;
} slate__tok_merge_slot;

/* A set of added tokens to find as whole strings: ids sorted by the first byte of their pattern,
 * then longest first; start[b] .. start[b + 1] are the ones whose pattern starts with byte b.
 * Pattern k is text[off[k] .. off[k + 1]) (the token's own text, or its normalized spelling). */
typedef struct slate__tok_matcher {
    int32_t n;
    int32_t *ids;  /* [n] */
    char *text;    /* patterns back to back, in ids order */
    uint32_t *off; /* [n + 1] */
    uint32_t start[257];
} slate__tok_matcher;

struct slate_tokenizer {
    slate__tok_kind kind;
    int32_t n_tokens;
    int32_t bos_id, eos_id, unk_id, pad_id, eot_id; /* -1: none */
    bool add_bos, add_space_prefix, byte_fallback, space_is_plain, nfc, ignore_merges;
    bool prefix_unless_spaced, prefix_first_only; /* see slate__tok_spec */
    bool fuse_unk;                                /* see slate__tok_spec */
    uint8_t decode_strip;                         /* slate__tok_dstrip */
    bool decode_added_marks;                      /* see slate__tok_spec */
    bool merge_ranks;                             /* see slate__tok_spec */
    bool split_marks;                             /* see slate__tok_spec */
    bool spm_words_apart; /* derived: no merge can cross the start of a word, so SPM encodes
                             word by word (slate__tok_spm_words_apart) */
    uint8_t *attrs; /* [n_tokens] SLATE__TOK_ATTR_* bits, or NULL when no token has any */

    char *text;          /* token texts as given by the spec, back to back */
    uint32_t *text_off;  /* [n_tokens + 1]: token i is text[text_off[i] .. text_off[i+1]) */
    float *scores;       /* [n_tokens] */
    uint8_t *types;      /* [n_tokens] slate__tok_type */
    char *piece;         /* bytes each token stands for (SPM: U+2581 -> ' ', <0xXX> -> byte;
                            BPE: GPT-2 alphabet -> bytes; added tokens: their text) */
    uint32_t *piece_off; /* [n_tokens + 1] */
    uint32_t max_piece_len;
    bool *eog;           /* [n_tokens] end-of-generation tokens */

    slate__tok_vocab_map vocab; /* text -> id; NORMAL/USER_DEFINED/BYTE/UNUSED ids win over
                                   CONTROL/UNKNOWN ones with the same text */
    int32_t byte_id[256];       /* SPM: id of "<0xXX>"; BPE: id of the byte's GPT-2 char; -1 */

    int32_t n_merges;
    int32_t *merges;                   /* [n_merges][2] left, right (BPE, SPM with merge_ranks;
                                          rank order) */
    slate__tok_merge_slot *merge_slots; /* merge hash (as merges) */
    uint32_t merge_mask;

    /* Added tokens matched as whole strings before the model (USER_DEFINED always; CONTROL and
     * UNKNOWN with SLATE_ENCODE_PARSE_SPECIAL): `special` holds those matched in the raw input,
     * `norm_special` those with SLATE__TOK_ATTR_NORMALIZED, matched in normalized text by their
     * normalized spelling (encode.c). */
    slate__tok_matcher special, norm_special;
    int32_t n_pre;
    char **pre_src;     /* [n_pre] regex source (NUL-terminated) */
    void **pre_code;    /* [n_pre] pcre2_code_8 * */
    void *pcre_gctx;    /* pcre2_general_context_8 *: routes PCRE2's memory through
                           slate__malloc so it is counted and fault-injectable */
};

/* Internal helpers shared by the files of src/tok/. */
uint32_t slate__tok_hash_bytes(const void *data, size_t len);
int32_t slate__tok_lookup(const slate_tokenizer *tok, const char *text, size_t len);
/* Merge rank of (left, right) and the merged id, or -1 when they do not merge. */
int32_t slate__tok_merge_rank(const slate_tokenizer *tok, int32_t left, int32_t right,
                              int32_t *result);
/* Length of the valid UTF-8 sequence starting at s[0..n), or 0 if s[0] does not start one. */
size_t slate__tok_utf8_len(const uint8_t *s, size_t n);
/* The length the character led by s[0] needs (1..4; 0: s[0] leads none), and in *ok how many
 * of s[0..n) form a valid start of it (the maximal subpart: ok == the length when complete). */
size_t slate__tok_utf8_lead(const uint8_t *s, size_t n, size_t *ok);
/* GPT-2 byte-to-unicode alphabet: the code point standing for byte b, and back (-1: none). */
uint32_t slate__tok_gpt2_byte_to_cp(uint8_t b);
int32_t slate__tok_gpt2_cp_to_byte(uint32_t cp);
/* Byte length of the Unicode White_Space character that starts s[0..n) (space_len) or ends
 * it (space_len_back), 0 if there is none there. */
size_t slate__tok_space_len(const char *s, size_t n);
size_t slate__tok_space_len_back(const char *s, size_t n);
/* Appends the UTF-8 encoding of cp to out (room for 4 bytes); returns the byte count. */
size_t slate__tok_utf8_put(uint32_t cp, char *out);

/* Bytes token id stands for (see slate_tokenizer_piece); borrowed, not terminated. id must be
 * in range. */
const char *slate__tok_piece_bytes(const slate_tokenizer *tok, int32_t id, bool special,
                                   size_t *len);
/* The bytes of token id as the first token of a decoded text (the first one that produces any
 * bytes): piece[0..len) without the dummy-prefix mark, as tok->decode_strip says. Writes them
 * to out (room for len bytes) unless out is NULL, and returns their count. */
size_t slate__tok_first_piece(const slate_tokenizer *tok, int32_t id, const char *piece,
                              size_t len, char *out);

/* slate_tokenizer_encode, with plain[0..2 n_plain) pairs {start, end} (ascending, disjoint)
 * of text inside which no CONTROL or UNKNOWN token is recognized even with
 * SLATE_ENCODE_PARSE_SPECIAL (nor one that starts before a span and runs into it): a chat
 * template's text keeps its special tokens while the messages' text cannot forge them. The
 * plain text is otherwise tokenized as if the spans were not there. */
slate_status slate__tok_encode_spans(const slate_tokenizer *tok, const char *text, size_t len,
                                     uint32_t flags, const size_t *plain, size_t n_plain,
                                     int32_t *ids, size_t cap, size_t *n_out, slate_error *err);

/* Output of an encode: ids beyond cap are counted, not stored. */
typedef struct slate__tok_out {
    int32_t *ids;
    size_t cap, n;
} slate__tok_out;
static inline void slate__tok_emit(slate__tok_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}
/* Model passes over one fragment of text (no special tokens inside); the ids are appended to
 * out. SPM: add_prefix prepends one space (the SentencePiece dummy prefix) before escaping.
 * nfc_done: the caller has already applied the tokenizer's NFC (slate__tok_normalize), so it is
 * not applied again. Return OK or E_NOMEM / E_INTERNAL. */
slate_status slate__tok_spm_encode(const slate_tokenizer *tok, const char *text, size_t len,
                                   bool add_prefix, bool nfc_done, slate__tok_out *out,
                                   slate_error *err);
/* Whether SPM may merge word by word: no token that a merge can make (with merge_ranks: the
 * result of a listed merge; else any token that takes part in merges) has the word mark
 * (U+2581, or ' ' with space_is_plain) after a character that is not a mark. Then no merge ever
 * joins a character to a mark that follows it, so cutting the text before each run of marks
 * that follows another character changes no id (the pairs of one word are never a pair of
 * another, and within a word the merges come in the same order as in the whole text). True for
 * every shipped SentencePiece vocabulary; false for kinds other than SPM. Needs the token texts
 * and types, and the merges under merge_ranks. */
bool slate__tok_spm_words_apart(const slate_tokenizer *tok);
slate_status slate__tok_bpe_encode(const slate_tokenizer *tok, const char *text, size_t len,
                                   bool nfc_done, slate__tok_out *out, slate_error *err);
/* Pre-tokenizer: compiles the spec's regexes into tok (pretok.c), frees them. */
slate_status slate__tok_pretok_compile(slate_tokenizer *tok, const char *const *src, int32_t n,
                                   slate_error *err);
void slate__tok_pretok_free(slate_tokenizer *tok);
/* Splits text[0..len) with every regex in turn and calls fn on each final piece (in order).
 * Stops at the first non-OK status from fn. */
typedef slate_status (*slate__tok_pretok_fn)(void *ctx, const char *piece, size_t len);
slate_status slate__tok_pretok_split(const slate_tokenizer *tok, const char *text, size_t len,
                                 slate__tok_pretok_fn fn, void *ctx, slate_error *err);
/* The normalizer of an HF tokenizer.json as far as it matters before the model: the text that
 * normalized added tokens are matched in, and their own spelling (HF runs the normalizer on each
 * stretch of input left between the other added tokens, and on each such token's content). NFC
 * (nfc); then for SPM (unless space_is_plain) ' ' -> U+2581 and, with prepend (the HF Prepend
 * normalizer: an SPM add_space_prefix that is not a Metaspace one), U+2581 in front of non-empty
 * text. *out is a slate__malloc'd buffer of *out_len bytes (free it), also for empty text. */
bool slate__tok_norm_prepends(const slate_tokenizer *tok);
slate_status slate__tok_normalize(const slate_tokenizer *tok, const char *text, size_t len,
                                  bool prepend, char **out, size_t *out_len, slate_error *err);
/* NFC of text (valid UTF-8 runs normalized, invalid bytes kept); *out is a slate__malloc'd
 * buffer (free it) or NULL when the text is already NFC-stable ASCII (use the input). */
slate_status slate__tok_nfc(const char *text, size_t len, char **out, size_t *out_len,
                        slate_error *err);

#endif /* SLATE_TOK_H */
