/*
 * spm.c - SentencePiece-style BPE with scores (llama2.c run.c `encode`, llama.cpp
 * llm_tokenizer_spm, sentencepiece bpe_model.cc).
 *
 * The text (with the dummy-prefix space when asked) has ' ' replaced by U+2581 unless the
 * vocabulary stores plain spaces (llama2.c .bin). It is cut into characters: each valid UTF-8
 * sequence is one, and so is each byte that does not start one (invalid input never fails). Then,
 * repeatedly, the adjacent pair whose concatenation is a vocabulary token with the highest score
 * is merged; ties go to the leftmost pair. A character that is no token becomes its <0xXX> byte
 * tokens (byte fallback) when the vocabulary has them all, else the unknown token (a run of them
 * one unknown token with fuse_unk, HF's BPE model.fuse_unk); emit_unknown says how exactly.
 *
 * With merge_ranks (HF tokenizer.json, whose BPE model merges by its merges list: models/bpe/
 * word.rs merge_all) a pair merges only when the merges list it, the lowest rank first, ties to
 * the leftmost pair; the pair is looked up by the ids of its two symbols (a character that is
 * no token takes part in no merge), and -rank serves as the score (ranks < 2^23 are exact in a
 * float). A pair listed twice has the rank of its last entry (tok.c merge_insert).
 *
 * llama2.c rescans all pairs after each merge (quadratic). Here candidate pairs sit in a binary
 * max-heap keyed by (score, position) as in llama.cpp: a popped pair is stale when either side
 * has changed length since it was pushed (symbols only grow, and the left one keeps its index),
 * which gives the same merges in O(n log n).
 *
 * sentencepiece and HF run those merges over the whole text (HF's Llama 2 files have no
 * pre-tokenizer), and merges may cross a word mark ("\u2581\u2581" is a Llama token). But where
 * no token has a mark right after another character (slate__tok_spm_words_apart: true for every
 * shipped vocabulary), no merge crosses the start of a word (a run of marks and the characters
 * up to the next mark), so each word is merged on its own with the same result: the heap stays
 * small (cache-resident) instead of holding the whole text: 15-25x faster on a few MiB. A word
 * merged once in a call is not merged again (word_cache), which makes text with repeated words
 * several times faster still (figures and command in README "Tokenizers"; bench/tok_speed.c
 * checks that the ids stay the same). With split_marks (HF Metaspace split: true) the text is cut
 * before every single mark whatever the vocabulary, and each piece ends its own unknown token,
 * as HF's BPE runs on each piece of the pre-tokenizer alone.
 */
#include "tok/heap.h"
#include "tok/tok.h"

#include <string.h>

typedef struct sym {
    uint32_t start, len; /* bytes of the escaped text; len 0: merged into its left neighbour */
    int32_t prev, next;
    int32_t id; /* token id, or -1 for a character that is no token */
} sym;

typedef struct cand {
    float score;
    uint32_t pos; /* start of the left symbol: ties go to the leftmost pair */
    int32_t left, right;
    uint32_t len; /* left.len + right.len when pushed */
    int32_t id;   /* the merged token */
} cand;

static bool cand_before(const cand *a, const cand *b) {
    if (a->score != b->score) return a->score > b->score;
    return a->pos < b->pos;
}

SLATE__TOK_HEAP(cand, cand_before)

/* Only model pieces take part in merges: control, unknown and byte tokens never come out of a
 * concatenation (sentencepiece keeps them out of its piece table). */
static bool mergeable(const slate_tokenizer *tok, int32_t id) {
    uint8_t t = tok->types[id];
    return t == SLATE__TOKT_NORMAL || t == SLATE__TOKT_USER_DEFINED || t == SLATE__TOKT_UNUSED;
}

static void try_pair(const slate_tokenizer *tok, const char *s, const sym *v, int32_t l, heap *h) {
    if (l < 0) return;
    int32_t r = v[l].next;
    if (r < 0) return;
    uint32_t len = v[l].len + v[r].len;
    if (tok->merge_ranks) {
        int32_t id, rank = slate__tok_merge_rank(tok, v[l].id, v[r].id, &id);
        if (rank >= 0) heap_push(h, (cand){-(float)rank, v[l].start, l, r, len, id});
        return;
    }
    int32_t id = slate__tok_lookup(tok, s + v[l].start, len);
    if (id < 0 || !mergeable(tok, id)) return;
    heap_push(h, (cand){tok->scores[id], v[l].start, l, r, len, id});
}

/* A character that is no token, as HF tokenizers' BPE treats it (models/bpe/model.rs
 * merge_word): with byte fallback, its <0xXX> byte tokens if the vocabulary has all of them;
 * otherwise one unknown token for the whole character (none at all without an unknown token:
 * the character is dropped). An unknown token is not emitted at once but kept pending, as HF
 * does: the next character that is a token emits it first; the next unknown character emits it
 * and becomes pending itself, or with fuse_unk (HF model.fuse_unk) joins it; the end of the
 * stretch emits it (flush_unk). A byte-fallback character leaves it pending, so in HF, and here,
 * its byte tokens come out before the pending unknown token of the characters before it (this
 * only happens in a vocabulary that lacks some byte tokens). */
static void emit_unknown(const slate_tokenizer *tok, const char *s, uint32_t len, bool *pending,
                         slate__tok_out *out) {
    if (tok->byte_fallback) {
        uint32_t i = 0;
        while (i < len && tok->byte_id[(uint8_t)s[i]] >= 0) i++;
        if (i == len) {
            for (i = 0; i < len; i++) slate__tok_emit(out, tok->byte_id[(uint8_t)s[i]]);
            return;
        }
    }
    if (tok->unk_id < 0) return;
    if (*pending && !tok->fuse_unk) slate__tok_emit(out, tok->unk_id);
    *pending = true;
}

static void flush_unk(const slate_tokenizer *tok, bool *pending, slate__tok_out *out) {
    if (*pending) slate__tok_emit(out, tok->unk_id);
    *pending = false;
}

static slate_status spm_encode(const slate_tokenizer *tok, const char *text, size_t len,
                               bool add_prefix, slate__tok_out *out, slate_error *err);

slate_status slate__tok_spm_encode(const slate_tokenizer *tok, const char *text, size_t len,
                                   bool add_prefix, bool nfc_done, slate__tok_out *out,
                                   slate_error *err) {
    /* An NFC normalizer (tokenizer.json) runs before anything else, as in HF's pipeline; the
     * dummy prefix (U+2581) is unchanged by it. */
    char *norm = NULL;
    if (tok->nfc && !nfc_done && len > 0) {
        size_t norm_len = len;
        slate_status st = slate__tok_nfc(text, len, &norm, &norm_len, err);
        if (st != SLATE_OK) return st;
        if (norm) text = norm;
        len = norm_len;
    }
    slate_status st = spm_encode(tok, text, len, add_prefix, out, err);
    slate__free(norm);
    return st;
}

/* The word mark of the escaped text: U+2581, or ' ' for a vocabulary that spells it plainly. */
static const char *mark_of(const slate_tokenizer *tok, size_t *len) {
    *len = tok->space_is_plain ? 1 : 3;
    return tok->space_is_plain ? " " : "\xE2\x96\x81";
}

/* Whether token id has the word mark after a character that is not a mark. */
static bool mark_inside(const slate_tokenizer *tok, int32_t id, const char *mark, size_t ml) {
    const char *t = tok->text + tok->text_off[id];
    size_t len = tok->text_off[id + 1] - tok->text_off[id];
    for (size_t k = 1; k + ml <= len; k++)
        if (memcmp(t + k, mark, ml) == 0 && (k < ml || memcmp(t + k - ml, mark, ml) != 0))
            return true;
    return false;
}

bool slate__tok_spm_words_apart(const slate_tokenizer *tok) {
    if (tok->kind != SLATE__TOK_SPM) return false;
    size_t ml;
    const char *mark = mark_of(tok, &ml);
    if (tok->merge_ranks) { /* the tokens that merges make are the ones that count */
        for (int32_t r = 0; r < tok->n_merges; r++) {
            int32_t id;
            slate__tok_merge_rank(tok, tok->merges[2 * r], tok->merges[2 * r + 1], &id);
            if (mark_inside(tok, id, mark, ml)) return false;
        }
        return true;
    }
    for (int32_t id = 0; id < tok->n_tokens; id++)
        if (mergeable(tok, id) && mark_inside(tok, id, mark, ml)) return false;
    return true;
}

/* End of the word that starts at s[from] (a run of marks, then everything up to the next mark),
 * or n when words are not apart. With split_marks (HF Metaspace split: true) a word has at most
 * one mark, whether words are apart or not. The byte search finds only whole marks: U+2581's
 * first byte E2 cannot continue another character, and ' ' is ASCII. */
static size_t word_end(const slate_tokenizer *tok, const char *s, size_t from, size_t n) {
    if (!tok->spm_words_apart && !tok->split_marks) return n;
    size_t ml;
    const char *mark = mark_of(tok, &ml);
    size_t i = from;
    if (tok->split_marks) {
        if (i + ml <= n && memcmp(s + i, mark, ml) == 0) i += ml;
    } else {
        while (i + ml <= n && memcmp(s + i, mark, ml) == 0) i += ml;
    }
    for (; i + ml <= n; i++) {
        const char *hit = memchr(s + i, mark[0], n - i - ml + 1);
        if (!hit) break;
        i = (size_t)(hit - s);
        if (memcmp(hit, mark, ml) == 0) return i;
    }
    return n;
}

/* The ids of words already merged in this call, as HF's BPE keeps a word cache: text repeats
 * its words, and a hit costs a hash and a compare where merging costs a vocabulary lookup per
 * character and per candidate pair. Only words of at most CACHE_WORD_BYTES whose symbols are
 * all tokens are kept (their ids then depend on the word alone, not on a pending unknown token);
 * once the table or the id pool is full, no more words are added. */
#define CACHE_WORD_BYTES 64
#define CACHE_MAX_WORDS (1u << 16)
#define CACHE_IDS_PER_WORD 16 /* the id pool: ids of the average cached word (Llama 2: ~2) */
typedef struct cache_entry {
    uint32_t start, len; /* the word: s[start .. start + len) of its first occurrence */
    uint32_t ids_off, n_ids;
} cache_entry;
typedef struct word_cache {
    uint32_t *slots; /* [mask + 1]: entry index + 1, 0 empty (open addressing, linear probing) */
    uint32_t mask;
    cache_entry *e;  /* [max_e] */
    uint32_t n_e, max_e;
    int32_t *ids;    /* [max_ids] */
    uint32_t n_ids, max_ids;
} word_cache;

static uint32_t *cache_slot(const word_cache *c, const char *s, size_t from, size_t to) {
    uint32_t i = slate__tok_hash_bytes(s + from, to - from) & c->mask;
    for (;; i = (i + 1) & c->mask) {
        uint32_t k = c->slots[i];
        if (k == 0) return &c->slots[i];
        const cache_entry *e = &c->e[k - 1];
        if (e->len == to - from && memcmp(s + e->start, s + from, to - from) == 0)
            return &c->slots[i];
    }
}

static void cache_put(word_cache *c, const char *s, size_t from, size_t to, const sym *v,
                      int32_t n_sym) {
    if (to - from > CACHE_WORD_BYTES || c->n_e == c->max_e ||
        c->n_ids + (uint32_t)n_sym > c->max_ids)
        return;
    uint32_t *slot = cache_slot(c, s, from, to);
    if (*slot) return;
    cache_entry *e = &c->e[c->n_e];
    *e = (cache_entry){(uint32_t)from, (uint32_t)(to - from), c->n_ids, 0};
    for (int32_t i = 0; i >= 0 && n_sym > 0; i = v[i].next) c->ids[c->n_ids + e->n_ids++] = v[i].id;
    c->n_ids += e->n_ids;
    *slot = ++c->n_e;
}

/* Merges the characters of the word s[from..to) as the top of the file says and emits the ids;
 * v and h have room for the word (its characters, three candidates per character). wc: the
 * call's word cache, or NULL. */
static void encode_word(const slate_tokenizer *tok, const char *s, size_t from, size_t to, sym *v,
                        heap *h, word_cache *wc, bool *pending, slate__tok_out *out) {
    if (wc && to - from <= CACHE_WORD_BYTES) {
        uint32_t k = *cache_slot(wc, s, from, to);
        if (k) {
            const cache_entry *e = &wc->e[k - 1];
            if (e->n_ids) flush_unk(tok, pending, out);
            for (uint32_t i = 0; i < e->n_ids; i++) slate__tok_emit(out, wc->ids[e->ids_off + i]);
            return;
        }
    }
    int32_t n_sym = 0;
    for (size_t i = from; i < to;) {
        size_t cl = slate__tok_utf8_len((const uint8_t *)s + i, to - i);
        if (cl == 0) cl = 1;
        int32_t id = slate__tok_lookup(tok, s + i, cl);
        if (id >= 0 && !mergeable(tok, id)) id = -1;
        v[n_sym] = (sym){(uint32_t)i, (uint32_t)cl, n_sym - 1, -1, id};
        if (n_sym > 0) v[n_sym - 1].next = n_sym;
        n_sym++;
        i += cl;
    }
    h->n = 0;
    for (int32_t i = 0; i + 1 < n_sym; i++) try_pair(tok, s, v, i, h);
    /* Each merge pushes at most two pairs and removes a symbol: at most 3 * n_sym pushes. */
    while (h->n > 0) {
        cand c = heap_pop(h);
        sym *l = &v[c.left], *r = &v[c.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != c.len) continue; /* stale */
        l->len += r->len;
        l->id = c.id;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) v[r->next].prev = c.left;
        try_pair(tok, s, v, l->prev, h);
        try_pair(tok, s, v, c.left, h);
    }
    bool known = true; /* every symbol is a token: the ids depend on the word alone */
    for (int32_t i = 0; i >= 0 && n_sym > 0; i = v[i].next) {
        if (v[i].id >= 0) {
            flush_unk(tok, pending, out);
            slate__tok_emit(out, v[i].id);
        } else {
            known = false;
            emit_unknown(tok, s + v[i].start, v[i].len, pending, out);
        }
    }
    if (wc && known) cache_put(wc, s, from, to, v, n_sym);
}

static slate_status spm_encode(const slate_tokenizer *tok, const char *text, size_t len,
                               bool add_prefix, slate__tok_out *out, slate_error *err) {
    size_t n_in = len + (add_prefix ? 1 : 0);
    if (n_in == 0) return SLATE_OK;
    size_t esc_cap;
    if (!slate__mul_size(n_in, 3, &esc_cap))
        return slate__fail(err, SLATE_E_INVALID_ARG, "text of %zu bytes is too long", len);
    char *s = slate__malloc(esc_cap);
    if (!s) return slate__fail(err, SLATE_E_NOMEM, "out of memory encoding %zu bytes", len);
    /* Escape: ' ' -> U+2581 unless the vocabulary spells spaces plainly. */
    size_t n = 0;
    for (size_t i = 0; i < n_in; i++) {
        char c = add_prefix ? (i == 0 ? ' ' : text[i - 1]) : text[i];
        if (c == ' ' && !tok->space_is_plain) {
            memcpy(s + n, "\xE2\x96\x81", 3);
            n += 3;
        } else {
            s[n++] = c;
        }
    }
    /* Room for the longest word: no more characters than it has bytes, nor than the input. */
    size_t n_max = 0, n_words = 0;
    for (size_t from = 0; from < n; n_words++) {
        size_t to = word_end(tok, s, from, n);
        if (to - from > n_max) n_max = to - from;
        from = to;
    }
    if (n_max > n_in) n_max = n_in;
    sym *v = slate__malloc(n_max * sizeof *v);
    heap h = {slate__malloc(n_max * 3 * sizeof *h.v), 0}; /* n_max * 3 <= esc_cap */
    /* A word cache pays off from a few dozen words on; sized for the words there are. */
    word_cache cache = {0}, *wc = NULL;
    if (n_words >= 32) {
        cache.max_e = n_words < CACHE_MAX_WORDS ? (uint32_t)n_words : CACHE_MAX_WORDS;
        cache.max_ids = cache.max_e * CACHE_IDS_PER_WORD;
        uint32_t n_slots = 64;
        while (n_slots < 2 * cache.max_e) n_slots <<= 1;
        cache.mask = n_slots - 1;
        cache.slots = slate__calloc(n_slots, sizeof *cache.slots);
        cache.e = slate__malloc(cache.max_e * sizeof *cache.e);
        cache.ids = slate__malloc(cache.max_ids * sizeof *cache.ids);
        wc = &cache;
    }
    slate_status st = SLATE_OK;
    if (!v || !h.v || (wc && (!cache.slots || !cache.e || !cache.ids))) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory encoding %zu bytes", len);
    } else {
        bool pending = false; /* an unknown token not yet emitted (emit_unknown) */
        for (size_t from = 0; from < n;) {
            size_t to = word_end(tok, s, from, n);
            encode_word(tok, s, from, to, v, &h, wc, &pending, out);
            if (tok->split_marks) flush_unk(tok, &pending, out); /* HF merges each piece alone */
            from = to;
        }
        flush_unk(tok, &pending, out);
    }
    slate__free(s);
    slate__free(v);
    slate__free(h.v);
    slate__free(cache.slots);
    slate__free(cache.e);
    slate__free(cache.ids);
    return st;
}
