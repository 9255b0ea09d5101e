/*
 * tok.c - building a tokenizer from a spec (slate__tok_create), freeing it, and the small
 * getters of the public API.
 *
 * Creation validates the spec (it comes from files), copies what it keeps and precomputes every
 * table that encode/decode need, so that a tokenizer is immutable afterwards and can be shared by
 * any number of threads: the text -> id hash, the (left, right) -> (rank, result) merge hash,
 * the byte -> token table, the decoded bytes of every token (its "piece"), the list of added
 * tokens matched as whole strings, the end-of-generation set and the compiled pre-tokenizer
 * regexes. Invariants after creation: every id stored anywhere is in [0, n_tokens); every merge's
 * result is a token whose text is the concatenation of its two parts.
 */
#include "tok/tok.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a: token texts are short (a few bytes on average), so a simple byte loop is enough. */
uint32_t slate__tok_hash_bytes(const void *data, size_t len) {
    const uint8_t *p = data;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

static inline size_t tok_len(const slate_tokenizer *tok, int32_t id) {
    return tok->text_off[id + 1] - tok->text_off[id];
}

int32_t slate__tok_lookup(const slate_tokenizer *tok, const char *text, size_t len) {
    if (len == 0 || !tok->vocab.slots) return -1;
    uint32_t i = slate__tok_hash_bytes(text, len) & tok->vocab.mask;
    for (;;) {
        int32_t id = tok->vocab.slots[i];
        if (id < 0) return -1;
        if (tok_len(tok, id) == len && memcmp(tok->text + tok->text_off[id], text, len) == 0)
            return id;
        i = (i + 1) & tok->vocab.mask;
    }
}

static inline uint32_t hash_pair(uint64_t key) {
    key ^= key >> 33; /* splitmix64 finalizer */
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ull;
    key ^= key >> 33;
    return (uint32_t)key;
}

int32_t slate__tok_merge_rank(const slate_tokenizer *tok, int32_t left, int32_t right,
                              int32_t *result) {
    if (!tok->merge_slots || left < 0 || right < 0) return -1;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t i = hash_pair(key) & tok->merge_mask;
    for (;;) {
        const slate__tok_merge_slot *s = &tok->merge_slots[i];
        if (s->key == UINT64_MAX) return -1;
        if (s->key == key) {
            *result = s->result;
            return s->rank;
        }
        i = (i + 1) & tok->merge_mask;
    }
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

/* ---- creation steps ------------------------------------------------------------------------ */

static slate_status check_spec(const slate__tok_spec *s, slate_error *err) {
    if (s->kind != SLATE__TOK_SPM && s->kind != SLATE__TOK_BPE)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "tokenizer kind %d: expected 1 (SPM) or 2 (BPE)", (int)s->kind);
    if (s->n_tokens < 1 || s->n_tokens > SLATE__TOK_MAX_TOKENS)
        return slate__fail(err, SLATE_E_FORMAT, "tokenizer has %d tokens: expected 1..%d",
                           (int)s->n_tokens, SLATE__TOK_MAX_TOKENS);
    if (!s->tokens) return slate__fail(err, SLATE_E_INVALID_ARG, "tokenizer spec has no tokens");
    for (int32_t i = 0; i < s->n_tokens; i++) {
        size_t len = s->token_lens ? s->token_lens[i] : (s->tokens[i] ? strlen(s->tokens[i]) : 0);
        if (!s->tokens[i] && len > 0)
            return slate__fail(err, SLATE_E_INVALID_ARG, "token %d has no text", (int)i);
        if (len > SLATE__TOK_MAX_TOKEN_BYTES)
            return slate__fail(err, SLATE_E_FORMAT,
                               "token %d is %zu bytes long: at most %d allowed", (int)i, len,
                               SLATE__TOK_MAX_TOKEN_BYTES);
        if (s->types && (s->types[i] < SLATE__TOKT_NORMAL || s->types[i] > SLATE__TOKT_BYTE))
            return slate__fail(err, SLATE_E_FORMAT, "token %d has type %u: expected 1..6", (int)i,
                               (unsigned)s->types[i]);
        if (s->scores && isnan(s->scores[i]))
            return slate__fail(err, SLATE_E_FORMAT, "token %d has a NaN score", (int)i);
        if (s->attrs && (s->attrs[i] & ~SLATE__TOK_ATTR_ALL))
            return slate__fail(err, SLATE_E_FORMAT, "token %d has attribute bits 0x%x: expected "
                               "only lstrip (1), rstrip (2) and normalized (4)", (int)i,
                               (unsigned)s->attrs[i]);
        /* Attributes act when an added token is matched; on any other token they would be
         * silently meaningless, so a spec that puts them there is wrong. */
        uint8_t type = s->types ? s->types[i] : (uint8_t)SLATE__TOKT_NORMAL;
        if (s->attrs && s->attrs[i] && type != SLATE__TOKT_USER_DEFINED &&
            type != SLATE__TOKT_CONTROL && type != SLATE__TOKT_UNKNOWN)
            return slate__fail(err, SLATE_E_FORMAT,
                               "token %d has attributes 0x%x but type %u: only added tokens (user "
                               "defined, control, unknown) have lstrip/rstrip/normalized",
                               (int)i, (unsigned)s->attrs[i], (unsigned)type);
    }
    const struct {
        const char *name;
        int32_t id;
    } ids[] = {{"bos", s->bos_id},
               {"eos", s->eos_id},
               {"unk", s->unk_id},
               {"pad", s->pad_id},
               {"eot", s->eot_id}};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++)
        if (ids[k].id < -1 || ids[k].id >= s->n_tokens)
            return slate__fail(err, SLATE_E_FORMAT, "%s token id %d: expected -1 or 0..%d",
                               ids[k].name, (int)ids[k].id, (int)s->n_tokens - 1);
    if (s->decode_strip > SLATE__TOK_DSTRIP_METASPACE)
        return slate__fail(err, SLATE_E_FORMAT, "decode strip mode %u: expected 0..3",
                           (unsigned)s->decode_strip);
    if (s->n_merges < 0 || s->n_merges > SLATE__TOK_MAX_MERGES)
        return slate__fail(err, SLATE_E_FORMAT, "tokenizer has %d merges: expected 0..%d",
                           (int)s->n_merges, SLATE__TOK_MAX_MERGES);
    if (s->n_merges > 0 && !s->merges && !s->merge_ids)
        return slate__fail(err, SLATE_E_INVALID_ARG, "tokenizer spec has %d merges but no data",
                           (int)s->n_merges);
    if (s->n_pre_regexes < 0 || s->n_pre_regexes > SLATE__TOK_MAX_PRE)
        return slate__fail(err, SLATE_E_FORMAT, "%d pre-tokenizer regexes: expected 0..%d",
                           (int)s->n_pre_regexes, SLATE__TOK_MAX_PRE);
    if (s->n_pre_regexes > 0 && !s->pre_regexes)
        return slate__fail(err, SLATE_E_INVALID_ARG, "pre-tokenizer regexes missing");
    if (s->kind == SLATE__TOK_SPM && s->n_pre_regexes > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "pre-tokenizer regexes are for BPE tokenizers, not SPM");
    return SLATE_OK;
}

static slate_status copy_tokens(slate_tokenizer *t, const slate__tok_spec *s, slate_error *err) {
    size_t total = 0;
    for (int32_t i = 0; i < s->n_tokens; i++)
        total += s->token_lens ? s->token_lens[i] : (s->tokens[i] ? strlen(s->tokens[i]) : 0);
    if (total > UINT32_MAX)
        return slate__fail(err, SLATE_E_FORMAT, "token texts total %zu bytes: at most 4 GiB",
                           total);
    t->text = slate__malloc(total);
    t->text_off = slate__malloc(((size_t)s->n_tokens + 1) * sizeof *t->text_off);
    t->scores = slate__malloc((size_t)s->n_tokens * sizeof *t->scores);
    t->types = slate__malloc((size_t)s->n_tokens);
    t->eog = slate__calloc((size_t)s->n_tokens, sizeof *t->eog);
    if (!t->text || !t->text_off || !t->scores || !t->types || !t->eog)
        return slate__fail(err, SLATE_E_NOMEM, "out of memory copying %d tokens", (int)s->n_tokens);
    uint32_t off = 0;
    for (int32_t i = 0; i < s->n_tokens; i++) {
        size_t len = s->token_lens ? s->token_lens[i] : (s->tokens[i] ? strlen(s->tokens[i]) : 0);
        t->text_off[i] = off;
        if (len) memcpy(t->text + off, s->tokens[i], len);
        off += (uint32_t)len;
        t->scores[i] = s->scores ? s->scores[i] : 0.0f;
        t->types[i] = s->types ? s->types[i] : (uint8_t)SLATE__TOKT_NORMAL;
    }
    t->text_off[s->n_tokens] = off;
    bool any_attr = false;
    for (int32_t i = 0; s->attrs && i < s->n_tokens && !any_attr; i++) any_attr = s->attrs[i] != 0;
    if (any_attr) {
        t->attrs = slate__malloc((size_t)s->n_tokens);
        if (!t->attrs)
            return slate__fail(err, SLATE_E_NOMEM, "out of memory copying %d token attributes",
                               (int)s->n_tokens);
        memcpy(t->attrs, s->attrs, (size_t)s->n_tokens);
    }
    return SLATE_OK;
}

static bool is_special_type(uint8_t type) {
    return type == SLATE__TOKT_CONTROL || type == SLATE__TOKT_UNKNOWN;
}

static void vocab_insert(slate_tokenizer *t, int32_t id) {
    size_t len = tok_len(t, id);
    const char *text = t->text + t->text_off[id];
    uint32_t i = slate__tok_hash_bytes(text, len) & t->vocab.mask;
    for (;;) {
        int32_t other = t->vocab.slots[i];
        if (other < 0) {
            t->vocab.slots[i] = id;
            return;
        }
        if (tok_len(t, other) == len && memcmp(t->text + t->text_off[other], text, len) == 0)
            return; /* duplicate text: the first id inserted wins */
        i = (i + 1) & t->vocab.mask;
    }
}

static slate_status build_vocab_map(slate_tokenizer *t, slate_error *err) {
    uint32_t n_slots = pow2_at_least((uint64_t)t->n_tokens * 2);
    t->vocab.slots = slate__malloc((size_t)n_slots * sizeof *t->vocab.slots);
    if (!t->vocab.slots)
        return slate__fail(err, SLATE_E_NOMEM, "out of memory for the vocabulary hash (%u slots)",
                           n_slots);
    memset(t->vocab.slots, 0xff, (size_t)n_slots * sizeof *t->vocab.slots);
    t->vocab.mask = n_slots - 1;
    /* Two passes so that a model token wins over a control token spelled the same way. */
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < t->n_tokens; i++)
            if (tok_len(t, i) > 0 && is_special_type(t->types[i]) == (pass == 1))
                vocab_insert(t, i);
    return SLATE_OK;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xXX>" -> XX, else -1. */
static int byte_token_value(const char *s, size_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static void build_byte_ids(slate_tokenizer *t) {
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    if (t->kind == SLATE__TOK_SPM) {
        for (int32_t i = 0; i < t->n_tokens; i++) {
            if (t->types[i] != SLATE__TOKT_BYTE) continue;
            int b = byte_token_value(t->text + t->text_off[i], tok_len(t, i));
            if (b >= 0 && t->byte_id[b] < 0) t->byte_id[b] = i;
        }
    } else {
        for (int b = 0; b < 256; b++) {
            char u[4];
            size_t n = slate__tok_utf8_put(slate__tok_gpt2_byte_to_cp((uint8_t)b), u);
            t->byte_id[b] = slate__tok_lookup(t, u, n);
        }
    }
}

/* s[0..len) with each U+2581 made a space, into out (room for len bytes); returns the count. */
static size_t unmark(const char *s, size_t len, char *out) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (i + 3 <= len && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
            out[n++] = ' ';
            i += 3;
        } else {
            out[n++] = s[i++];
        }
    }
    return n;
}

/* Whether token id decodes from its normalized spelling (slate__tok_spec.decode_added_marks). */
static bool decodes_normalized(const slate_tokenizer *t, int32_t id) {
    return t->decode_added_marks && t->attrs && (t->attrs[id] & SLATE__TOK_ATTR_NORMALIZED);
}

/* Decoded bytes of token id into out (room for 4 * len bytes is always enough); returns count. */
static size_t decode_token(const slate_tokenizer *t, int32_t id, char *out) {
    const char *s = t->text + t->text_off[id];
    size_t len = tok_len(t, id), n = 0;
    uint8_t type = t->types[id];
    if (type == SLATE__TOKT_UNUSED) return 0;
    if (type == SLATE__TOKT_CONTROL || type == SLATE__TOKT_UNKNOWN ||
        type == SLATE__TOKT_USER_DEFINED) {
        if (t->decode_added_marks) return unmark(s, len, out);
        memcpy(out, s, len);
        return len;
    }
    if (type == SLATE__TOKT_BYTE) {
        int b = byte_token_value(s, len);
        if (b >= 0) {
            out[0] = (char)b;
            return 1;
        }
    }
    if (t->kind == SLATE__TOK_SPM) {
        for (size_t i = 0; i < len;) {
            if (!t->space_is_plain && i + 3 <= len && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                out[n++] = ' ';
                i += 3;
            } else {
                out[n++] = s[i++];
            }
        }
        return n;
    }
    /* BPE: each character of the GPT-2 alphabet is one byte; anything else is kept as is. */
    for (size_t i = 0; i < len;) {
        size_t cl = slate__tok_utf8_len((const uint8_t *)s + i, len - i);
        if (cl == 0) {
            out[n++] = s[i++];
            continue;
        }
        const uint8_t *u = (const uint8_t *)s + i;
        uint32_t cp = cl == 1   ? u[0]
                      : cl == 2 ? (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F)
                                : 0x110000; /* 3- and 4-byte characters are never bytes */
        int32_t b = slate__tok_gpt2_cp_to_byte(cp);
        if (b >= 0) {
            out[n++] = (char)b;
        } else {
            memcpy(out + n, s + i, cl);
            n += cl;
        }
        i += cl;
    }
    return n;
}

static slate_status build_pieces(slate_tokenizer *t, slate_error *err) {
    /* A decoded token is never longer than its text (characters shrink to bytes, U+2581 to a
     * space), so the text size bounds the pool, plus the normalized spellings that some added
     * tokens decode from (NFC may lengthen them, Prepend adds a mark). */
    size_t cap = t->text_off[t->n_tokens];
    for (int32_t i = 0; i < t->n_tokens; i++) {
        if (!decodes_normalized(t, i)) continue;
        char *norm;
        size_t norm_len;
        slate_status st = slate__tok_normalize(t, t->text + t->text_off[i], tok_len(t, i),
                                               slate__tok_norm_prepends(t), &norm, &norm_len, err);
        if (st != SLATE_OK) return st;
        slate__free(norm);
        cap += norm_len;
    }
    if (cap > UINT32_MAX)
        return slate__fail(err, SLATE_E_INVALID_ARG, "decoded tokens need %zu bytes", cap);
    t->piece = slate__malloc(cap ? cap : 1);
    t->piece_off = slate__malloc(((size_t)t->n_tokens + 1) * sizeof *t->piece_off);
    if (!t->piece || !t->piece_off)
        return slate__fail(err, SLATE_E_NOMEM, "out of memory for decoded tokens (%zu bytes)", cap);
    uint32_t off = 0;
    t->max_piece_len = 0;
    for (int32_t i = 0; i < t->n_tokens; i++) {
        t->piece_off[i] = off;
        size_t n;
        if (decodes_normalized(t, i)) {
            char *norm;
            size_t norm_len;
            slate_status st = slate__tok_normalize(t, t->text + t->text_off[i], tok_len(t, i),
                                                   slate__tok_norm_prepends(t), &norm, &norm_len,
                                                   err);
            if (st != SLATE_OK) return st;
            n = unmark(norm, norm_len, t->piece + off);
            slate__free(norm);
        } else {
            n = decode_token(t, i, t->piece + off);
        }
        off += (uint32_t)n;
        if (n > t->max_piece_len) t->max_piece_len = (uint32_t)n;
    }
    t->piece_off[t->n_tokens] = off;
    return SLATE_OK;
}

/* A pair listed again keeps its first rank (llama.cpp's bpe_ranks.emplace), or with later_wins
 * takes the later one (HF tokenizers collects the merges into a map, so the last entry counts). */
static bool merge_insert(slate_tokenizer *t, int32_t left, int32_t right, int32_t rank,
                         int32_t result, bool later_wins) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t i = hash_pair(key) & t->merge_mask;
    for (;;) {
        slate__tok_merge_slot *s = &t->merge_slots[i];
        if (s->key == UINT64_MAX) {
            s->key = key;
            s->rank = rank;
            s->result = result;
            return true;
        }
        if (s->key == key) {
            if (later_wins) s->rank = rank;
            return false;
        }
        i = (i + 1) & t->merge_mask;
    }
}

static slate_status build_merges(slate_tokenizer *t, const slate__tok_spec *s, slate_error *err) {
    if ((t->kind != SLATE__TOK_BPE && !t->merge_ranks) || s->n_merges == 0) return SLATE_OK;
    int32_t n = s->n_merges;
    uint32_t n_slots = pow2_at_least((uint64_t)n * 2);
    t->merges = slate__malloc((size_t)n * 2 * sizeof *t->merges);
    t->merge_slots = slate__malloc((size_t)n_slots * sizeof *t->merge_slots);
    char *cat = slate__malloc(2 * SLATE__TOK_MAX_TOKEN_BYTES);
    if (!t->merges || !t->merge_slots || !cat) {
        slate__free(cat);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d merges", (int)n);
    }
    t->merge_mask = n_slots - 1;
    for (uint32_t i = 0; i < n_slots; i++) t->merge_slots[i].key = UINT64_MAX;
    t->n_merges = n;
    slate_status st = SLATE_OK;
    for (int32_t r = 0; r < n; r++) {
        int32_t left, right;
        if (s->merge_ids) {
            left = s->merge_ids[2 * r];
            right = s->merge_ids[2 * r + 1];
            if (left < 0 || left >= t->n_tokens || right < 0 || right >= t->n_tokens) {
                st =
                    slate__fail(err, SLATE_E_FORMAT, "merge %d joins ids %d and %d: expected 0..%d",
                                (int)r, (int)left, (int)right, (int)t->n_tokens - 1);
                break;
            }
        } else {
            const char *m = s->merges[r];
            if (!m) {
                st = slate__fail(err, SLATE_E_FORMAT, "merge %d is missing", (int)r);
                break;
            }
            /* "left right": split at the first space after the first byte (as llama.cpp does),
             * so a left part may itself be a space. */
            size_t len = strlen(m);
            const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
            if (!sp) {
                st = slate__fail(err, SLATE_E_FORMAT, "merge %d ('%.64s') is not \"left right\"",
                                 (int)r, m);
                break;
            }
            left = slate__tok_lookup(t, m, (size_t)(sp - m));
            right = slate__tok_lookup(t, sp + 1, len - (size_t)(sp - m) - 1);
            if (left < 0 || right < 0) {
                st = slate__fail(err, SLATE_E_FORMAT,
                                 "merge %d ('%.64s'): its %s part is not in the vocabulary", (int)r,
                                 m, left < 0 ? "left" : "right");
                break;
            }
        }
        size_t ll = tok_len(t, left), rl = tok_len(t, right);
        memcpy(cat, t->text + t->text_off[left], ll);
        memcpy(cat + ll, t->text + t->text_off[right], rl);
        int32_t result = slate__tok_lookup(t, cat, ll + rl);
        if (result < 0) {
            st = slate__fail(err, SLATE_E_FORMAT,
                             "merge %d ('%.*s' + '%.*s'): the merged text is not in the vocabulary",
                             (int)r, (int)(ll < 64 ? ll : 64), t->text + t->text_off[left],
                             (int)(rl < 64 ? rl : 64), t->text + t->text_off[right]);
            break;
        }
        t->merges[2 * r] = left;
        t->merges[2 * r + 1] = right;
        merge_insert(t, left, right, r, result, t->merge_ranks);
    }
    slate__free(cat);
    return st;
}

typedef struct special_key {
    int32_t id;
    uint8_t first;
    uint32_t len;
    uint32_t at; /* pattern bytes in the scratch pool */
} special_key;

static int special_cmp(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longest first */
    return x->id < y->id ? -1 : x->id > y->id;
}

static void matcher_free(slate__tok_matcher *m) {
    slate__free(m->ids);
    slate__free(m->text);
    slate__free(m->off);
}

/* Fills m with the keys (patterns in pool) sorted for matching. */
static slate_status build_matcher(slate__tok_matcher *m, special_key *keys, int32_t n,
                                  const char *pool, slate_error *err) {
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += keys[i].len;
    m->ids = slate__malloc((size_t)(n > 0 ? n : 1) * sizeof *m->ids);
    m->off = slate__malloc(((size_t)n + 1) * sizeof *m->off);
    m->text = slate__malloc(total > 0 ? total : 1);
    if (!m->ids || !m->off || !m->text)
        return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d added tokens", (int)n);
    qsort(keys, (size_t)n, sizeof *keys, special_cmp);
    memset(m->start, 0, sizeof m->start);
    uint32_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        m->ids[i] = keys[i].id;
        m->off[i] = off;
        memcpy(m->text + off, pool + keys[i].at, keys[i].len);
        off += keys[i].len;
        m->start[keys[i].first + 1]++;
    }
    m->off[n] = off;
    for (int b = 0; b < 256; b++) m->start[b + 1] += m->start[b];
    m->n = n;
    return SLATE_OK;
}

/* The added tokens (user-defined, control, unknown) as two matchers: those found in the raw
 * input by their text, and those with SLATE__TOK_ATTR_NORMALIZED, found in normalized text by
 * their normalized spelling (slate__tok_normalize of their text, as HF's AddedVocabulary builds
 * its normalized trie). */
static slate_status build_specials(slate_tokenizer *t, slate_error *err) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_tokens; i++)
        if (tok_len(t, i) > 0 &&
            (is_special_type(t->types[i]) || t->types[i] == SLATE__TOKT_USER_DEFINED))
            n++;
    special_key *keys = slate__malloc((size_t)(n > 0 ? n : 1) * sizeof *keys);
    if (!keys) return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d added tokens", (int)n);
    /* Normalized spellings go to a pool after the raw texts (which stay where they are). */
    char *pool = NULL;
    size_t pool_len = 0, pool_cap = 0;
    int32_t n_raw = 0, n_norm = 0;
    slate_status st = SLATE_OK;
    for (int32_t i = 0; i < t->n_tokens && st == SLATE_OK; i++) {
        if (tok_len(t, i) == 0 ||
            !(is_special_type(t->types[i]) || t->types[i] == SLATE__TOKT_USER_DEFINED))
            continue;
        const char *text = t->text + t->text_off[i];
        size_t len = tok_len(t, i);
        if (!(t->attrs && (t->attrs[i] & SLATE__TOK_ATTR_NORMALIZED))) {
            keys[n_raw++] = (special_key){i, (uint8_t)text[0], (uint32_t)len, t->text_off[i]};
            continue;
        }
        char *norm;
        size_t norm_len;
        st = slate__tok_normalize(t, text, len, slate__tok_norm_prepends(t), &norm, &norm_len,
                                  err);
        if (st != SLATE_OK) break;
        if (norm_len > SLATE__TOK_MAX_TOKEN_BYTES * 4 || pool_len + norm_len > UINT32_MAX) {
            slate__free(norm);
            st = slate__fail(err, SLATE_E_FORMAT, "added token %d: normalized text too long",
                             (int)i);
            break;
        }
        if (pool_len + norm_len > pool_cap) {
            size_t cap = (pool_cap + norm_len) * 2;
            char *bigger = slate__malloc(cap);
            if (!bigger) {
                slate__free(norm);
                st = slate__fail(err, SLATE_E_NOMEM, "out of memory for normalized added tokens");
                break;
            }
            if (pool_len) memcpy(bigger, pool, pool_len);
            slate__free(pool);
            pool = bigger;
            pool_cap = cap;
        }
        memcpy(pool + pool_len, norm, norm_len);
        slate__free(norm);
        /* Filled from the back so the two groups share one key array. */
        keys[n - 1 - n_norm++] =
            (special_key){i, (uint8_t)pool[pool_len], (uint32_t)norm_len, (uint32_t)pool_len};
        pool_len += norm_len;
    }
    if (st == SLATE_OK) st = build_matcher(&t->special, keys, n_raw, t->text, err);
    if (st == SLATE_OK)
        st = build_matcher(&t->norm_special, keys + n - n_norm, n_norm, pool, err);
    slate__free(pool);
    slate__free(keys);
    return st;
}

/* Texts that end a turn in the chat formats we know (besides eos / eot ids). */
static const char *const k_eog_texts[] = {
    "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>",
    "<|eom_id|>", "<|end|>",    "<end_of_turn>",
};

static void build_eog(slate_tokenizer *t) {
    if (t->eos_id >= 0) t->eog[t->eos_id] = true;
    if (t->eot_id >= 0) t->eog[t->eot_id] = true;
    for (size_t k = 0; k < sizeof k_eog_texts / sizeof k_eog_texts[0]; k++) {
        size_t len = strlen(k_eog_texts[k]);
        for (int32_t i = 0; i < t->n_tokens; i++)
            if (t->types[i] != SLATE__TOKT_NORMAL && tok_len(t, i) == len &&
                memcmp(t->text + t->text_off[i], k_eog_texts[k], len) == 0)
                t->eog[i] = true;
    }
}

/* GPT-2's pre-tokenizer regex (openai/gpt-2 encoder.py; HF ByteLevel use_regex). */
static const char *const k_pre_gpt2[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
};
/* Llama 3 (tokenizer.json Split pattern): digits in groups of up to three. */
static const char *const k_pre_llama3[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
/* Qwen2/2.5/3 (tokenizer.json Split pattern): each digit on its own. */
static const char *const k_pre_qwen2[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
/* Falcon (llama.cpp's LLAMA_VOCAB_PRE_TYPE_FALCON): punctuation runs, then GPT-2, then digits
 * in groups of three. */
static const char *const k_pre_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "[0-9][0-9][0-9]",
};

int32_t slate__tok_pre_regexes(const char *name, const char *const **out) {
    static const struct {
        const char *name;
        const char *const *re;
        int32_t n;
    } table[] = {
        {"gpt-2", k_pre_gpt2, 1},  {"llama-bpe", k_pre_llama3, 1}, {"llama3", k_pre_llama3, 1},
        {"qwen2", k_pre_qwen2, 1}, {"falcon", k_pre_falcon, 3},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name, table[i].name) == 0) {
            *out = table[i].re;
            return table[i].n;
        }
    *out = NULL;
    return 0;
}

slate_status slate__tok_create(const slate__tok_spec *spec, slate_tokenizer **out,
                               slate_error *err) {
    if (!out) return slate__fail(err, SLATE_E_INVALID_ARG, "slate__tok_create: out is NULL");
    *out = NULL;
    if (!spec) return slate__fail(err, SLATE_E_INVALID_ARG, "slate__tok_create: spec is NULL");
    slate_status st = check_spec(spec, err);
    if (st != SLATE_OK) return st;
    slate_tokenizer *t = slate__calloc(1, sizeof *t);
    if (!t) return slate__fail(err, SLATE_E_NOMEM, "out of memory for a tokenizer");
    t->kind = spec->kind;
    t->n_tokens = spec->n_tokens;
    t->bos_id = spec->bos_id;
    t->eos_id = spec->eos_id;
    t->unk_id = spec->unk_id;
    t->pad_id = spec->pad_id;
    t->eot_id = spec->eot_id;
    t->add_bos = spec->add_bos;
    bool spm = spec->kind == SLATE__TOK_SPM;
    t->add_space_prefix = spm && spec->add_space_prefix;
    t->byte_fallback = spm && spec->byte_fallback;
    t->space_is_plain = spm && spec->space_is_plain;
    t->nfc = spec->nfc;
    t->ignore_merges = !spm && spec->ignore_merges;
    t->prefix_unless_spaced = t->add_space_prefix && spec->prefix_unless_spaced;
    t->prefix_first_only = t->add_space_prefix && spec->prefix_first_only;
    t->fuse_unk = spm && spec->fuse_unk;
    t->decode_strip = spm ? spec->decode_strip : (uint8_t)SLATE__TOK_DSTRIP_SPM;
    t->decode_added_marks = spm && !t->space_is_plain && spec->decode_added_marks;
    t->merge_ranks = spm && spec->merge_ranks;
    t->split_marks = spm && spec->split_marks;

    if ((st = copy_tokens(t, spec, err)) != SLATE_OK) goto fail;
    if ((st = build_vocab_map(t, err)) != SLATE_OK) goto fail;
    build_byte_ids(t);
    if ((st = build_pieces(t, err)) != SLATE_OK) goto fail;
    if ((st = build_merges(t, spec, err)) != SLATE_OK) goto fail;
    t->spm_words_apart = slate__tok_spm_words_apart(t); /* needs the merges under merge_ranks */
    if ((st = build_specials(t, err)) != SLATE_OK) goto fail;
    build_eog(t);
    if (!spm) {
        const char *const *re = spec->pre_regexes;
        int32_t n_re = spec->n_pre_regexes;
        if (n_re == 0) n_re = slate__tok_pre_regexes("gpt-2", &re);
        if ((st = slate__tok_pretok_compile(t, re, n_re, err)) != SLATE_OK) goto fail;
    }
    *out = t;
    return SLATE_OK;
fail:
    slate_tokenizer_free(t);
    return st;
}

void slate_tokenizer_free(slate_tokenizer *tok) {
    if (!tok) return;
    slate__tok_pretok_free(tok);
    slate__free(tok->text);
    slate__free(tok->text_off);
    slate__free(tok->scores);
    slate__free(tok->types);
    slate__free(tok->attrs);
    slate__free(tok->piece);
    slate__free(tok->piece_off);
    slate__free(tok->eog);
    slate__free(tok->vocab.slots);
    slate__free(tok->merges);
    slate__free(tok->merge_slots);
    matcher_free(&tok->special);
    matcher_free(&tok->norm_special);
    slate__free(tok);
}

/* ---- getters ------------------------------------------------------------------------------- */

int32_t slate_tokenizer_n_vocab(const slate_tokenizer *tok) { return tok ? tok->n_tokens : 0; }
int32_t slate_tokenizer_bos(const slate_tokenizer *tok) { return tok ? tok->bos_id : -1; }
int32_t slate_tokenizer_eos(const slate_tokenizer *tok) { return tok ? tok->eos_id : -1; }

bool slate_tokenizer_is_eog(const slate_tokenizer *tok, int32_t id) {
    return tok && id >= 0 && id < tok->n_tokens && tok->eog[id];
}

slate__tok_kind slate__tok_kind_of(const slate_tokenizer *tok) { return tok->kind; }

int32_t slate__tok_find(const slate_tokenizer *tok, const char *text, size_t len) {
    if (!tok || !text) return -1;
    return slate__tok_lookup(tok, text, len);
}

const char *slate__tok_text(const slate_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok || id < 0 || id >= tok->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = tok_len(tok, id);
    return tok->text + tok->text_off[id];
}

slate__tok_type slate__tok_type_of(const slate_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_tokens) return (slate__tok_type)0;
    return (slate__tok_type)tok->types[id];
}

float slate__tok_score(const slate_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_tokens) return 0.0f;
    return tok->scores[id];
}

uint8_t slate__tok_attrs(const slate_tokenizer *tok, int32_t id) {
    if (!tok || !tok->attrs || id < 0 || id >= tok->n_tokens) return 0;
    return tok->attrs[id];
}

bool slate__tok_adds_bos(const slate_tokenizer *tok) {
    return tok && tok->add_bos && tok->bos_id >= 0;
}
