/*
 * bpe.c - byte-level BPE (GPT-2, Llama 3, Qwen; HF tokenizers models/bpe, llama.cpp
 * llm_tokenizer_bpe).
 *
 * Each pre-tokenizer piece (pretok.c) is taken as bytes; every byte starts as the token of its
 * GPT-2 alphabet character (tok->byte_id). Then, repeatedly, the adjacent pair with the lowest
 * merge rank is replaced by the token it merges into; ties go to the leftmost pair. With
 * ignore_merges (Llama 3) a piece that is itself a token is emitted whole first. Candidates
 * live in a binary min-heap keyed by (rank, position); a popped pair is stale when either side
 * has changed since it was pushed (checked through the symbols' current ids and lengths).
 */
#include "tok/heap.h"
#include "tok/tok.h"

#include <string.h>

typedef struct sym {
    uint32_t start, len; /* bytes of the piece; len 0: merged into its left neighbour */
    int32_t prev, next;
    int32_t id; /* -1: a byte without a token in this vocabulary */
} sym;

typedef struct cand {
    int32_t rank;
    uint32_t pos;
    int32_t left, right;
    int32_t left_id, right_id; /* ids of both sides when pushed (stale check) */
    int32_t result;
} cand;

static bool cand_before(const cand *a, const cand *b) {
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->pos < b->pos;
}

SLATE__TOK_HEAP(cand, cand_before)

typedef struct bpe_ctx {
    const slate_tokenizer *tok;
    slate__tok_out *out;
    sym *v; /* scratch for the longest possible piece (the whole fragment) */
    heap h;
    char *mapped; /* ignore_merges: the piece in the GPT-2 alphabet (2 bytes per byte max) */
} bpe_ctx;

static void try_pair(bpe_ctx *c, int32_t l) {
    if (l < 0) return;
    int32_t r = c->v[l].next;
    if (r < 0) return;
    int32_t result;
    int32_t rank = slate__tok_merge_rank(c->tok, c->v[l].id, c->v[r].id, &result);
    if (rank < 0) return;
    heap_push(&c->h, (cand){rank, c->v[l].start, l, r, c->v[l].id, c->v[r].id, result});
}

static slate_status encode_piece(void *ctx, const char *s, size_t len) {
    bpe_ctx *c = ctx;
    const slate_tokenizer *tok = c->tok;
    if (tok->ignore_merges) {
        size_t m = 0;
        for (size_t i = 0; i < len; i++)
            m += slate__tok_utf8_put(slate__tok_gpt2_byte_to_cp((uint8_t)s[i]), c->mapped + m);
        int32_t id = slate__tok_lookup(tok, c->mapped, m);
        /* Plain text never turns into a control token, even when spelled like one. */
        if (id >= 0 && tok->types[id] != SLATE__TOKT_CONTROL &&
            tok->types[id] != SLATE__TOKT_UNKNOWN) {
            slate__tok_emit(c->out, id);
            return SLATE_OK;
        }
    }
    sym *v = c->v;
    int32_t n = (int32_t)len;
    for (int32_t i = 0; i < n; i++)
        v[i] = (sym){(uint32_t)i, 1, i - 1, i + 1 < n ? i + 1 : -1, tok->byte_id[(uint8_t)s[i]]};
    c->h.n = 0;
    for (int32_t i = 0; i + 1 < n; i++) try_pair(c, i);
    while (c->h.n > 0) {
        cand k = heap_pop(&c->h);
        sym *l = &v[k.left], *r = &v[k.right];
        if (l->len == 0 || r->len == 0 || l->next != k.right || l->id != k.left_id ||
            r->id != k.right_id)
            continue; /* stale */
        l->len += r->len;
        l->id = k.result;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) v[r->next].prev = k.left;
        try_pair(c, l->prev);
        try_pair(c, k.left);
    }
    for (int32_t i = 0; i >= 0; i = v[i].next) {
        if (v[i].id >= 0)
            slate__tok_emit(c->out, v[i].id);
        else if (tok->unk_id >= 0)
            slate__tok_emit(c->out, tok->unk_id);
        /* else: a byte the vocabulary cannot spell is dropped (documented in tok.h) */
    }
    return SLATE_OK;
}

slate_status slate__tok_bpe_encode(const slate_tokenizer *tok, const char *text, size_t len,
                                   bool nfc_done, slate__tok_out *out, slate_error *err) {
    if (len == 0) return SLATE_OK;
    if (len > INT32_MAX / 4)
        return slate__fail(err, SLATE_E_INVALID_ARG, "text of %zu bytes is too long", len);
    char *norm = NULL;
    size_t norm_len = len;
    if (tok->nfc && !nfc_done) {
        slate_status st = slate__tok_nfc(text, len, &norm, &norm_len, err);
        if (st != SLATE_OK) return st;
        if (norm) text = norm;
        len = norm_len;
    }
    bpe_ctx c = {.tok = tok, .out = out};
    c.v = slate__malloc(len * sizeof *c.v);
    c.h.v = slate__malloc(len * 3 * sizeof *c.h.v);
    c.mapped = tok->ignore_merges ? slate__malloc(len * 2) : NULL;
    slate_status st;
    if (!c.v || !c.h.v || (tok->ignore_merges && !c.mapped))
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory encoding %zu bytes", len);
    else
        st = slate__tok_pretok_split(tok, text, len, encode_piece, &c, err);
    slate__free(c.v);
    slate__free(c.h.v);
    slate__free(c.mapped);
    slate__free(norm);
    return st;
}
