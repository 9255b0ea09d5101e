/*
 * encode.c - slate_tokenizer_encode: BOS, added-token matching, then the model (spm.c or
 * bpe.c) on each stretch of plain text.
 *
 * Added tokens are found leftmost-longest before the model runs (HF tokenizers' added-vocabulary
 * split, llama.cpp tokenizer_st_partition): USER_DEFINED tokens always (they are ordinary text
 * that the vocabulary keeps whole), CONTROL and UNKNOWN tokens only with
 * SLATE_ENCODE_PARSE_SPECIAL, so text from a user cannot smuggle in "<|im_end|>" by default.
 *
 * SPM adds its dummy-prefix space to a stretch of text that starts the input or follows an added
 * token, as llama.cpp does (and sentencepiece-based HF tokenizers in legacy mode); a
 * tokenizer.json with a Metaspace pre-tokenizer follows HF instead (see encode_text). Empty text
 * gives no ids (just BOS if asked), like llama.cpp and HF.
 *
 * Added tokens with lstrip / rstrip (SLATE__TOK_ATTR_*) take the white space before / after them
 * with them, as HF tokenizers' AddedVocabulary::find_matches does: lstrip goes back no further
 * than the end of the previous added token (and its own stripped space), rstrip runs to the
 * next non-space character. Stripping is not matching: it may take white space from a plain
 * span (the rendered chat text is tokenized as if the spans were not there, as HF tokenizes a
 * rendered template), but a span still never yields a control token. The search resumes after
 * the stripped space (HF resumes at the token's own end; the two differ only for an added token
 * that starts with white space).
 *
 * Added tokens with SLATE__TOK_ATTR_NORMALIZED (HF normalized: true) are found as HF's
 * AddedVocabulary::extract_and_normalize finds them: the other added tokens split the raw input
 * first; each stretch left between them is normalized (slate__tok_normalize: NFC, and for SPM
 * ' ' -> U+2581 and the Prepend normalizer's leading U+2581), the normalized tokens are found in
 * that text by their normalized spelling (leftmost longest, lstrip / rstrip as above but in the
 * normalized text, where a space has become U+2581 and so is no longer white space), and the
 * model runs on the normalized pieces between them (which get no second Prepend mark; a
 * Metaspace mark follows the rules of encode_text for each piece). A stretch that crosses the
 * edge of a plain span is normalized one side at a time, so that a control token is never found
 * in, or across the edge of, a span; this differs from HF only if NFC would compose characters
 * across that edge (a message that starts with a combining mark).
 *
 * All scratch memory belongs to the call: the tokenizer is never written, so any number of
 * threads may encode with one tokenizer at once.
 */
#include "tok/tok.h"

#include <string.h>

/* Index k in m of the longest pattern that text[pos..lim) starts with, or -1. Tokens other than
 * user-defined ones only with parse_special. */
static int32_t match_added(const slate_tokenizer *tok, const slate__tok_matcher *m,
                           const char *text, size_t pos, size_t lim, bool parse_special) {
    uint8_t b = (uint8_t)text[pos];
    for (uint32_t k = m->start[b]; k < m->start[b + 1]; k++) {
        int32_t id = m->ids[k];
        if (tok->types[id] != SLATE__TOKT_USER_DEFINED && !parse_special) continue;
        size_t n = m->off[k + 1] - m->off[k];
        if (n <= lim - pos && memcmp(text + pos, m->text + m->off[k], n) == 0)
            return (int32_t)k; /* sorted longest first */
    }
    return -1;
}

/* Start of the white space that ends text[lo..pos), or pos when there is none. */
static size_t space_before(const char *text, size_t lo, size_t pos) {
    for (size_t k; pos > lo && (k = slate__tok_space_len_back(text + lo, pos - lo)) > 0;) pos -= k;
    return pos;
}

/* End of the white space that starts text[pos..len), or pos when there is none. */
static size_t space_after(const char *text, size_t pos, size_t len) {
    for (size_t k; pos < len && (k = slate__tok_space_len(text + pos, len - pos)) > 0;) pos += k;
    return pos;
}

/* Every stretch of plain text starts the input (at_start) or follows an added token, so with SPM
 * it gets the dummy prefix when the vocabulary uses one, except where HF's Metaspace would not
 * add it: the stretch already starts with a space or U+2581 (prefix_unless_spaced), or it
 * follows an added token (prefix_first_only, prepend_scheme "first"). normalized: the text is
 * already normalized (slate__tok_normalize), so it is not NFC'd again and, with the Prepend
 * normalizer, already carries its mark. */
static slate_status encode_text(const slate_tokenizer *tok, const char *text, size_t len,
                                bool at_start, bool normalized, slate__tok_out *out,
                                slate_error *err) {
    if (len == 0) return SLATE_OK;
    if (tok->kind == SLATE__TOK_SPM) {
        bool prefix = tok->add_space_prefix && (at_start || !tok->prefix_first_only);
        if (normalized && slate__tok_norm_prepends(tok)) prefix = false;
        if (prefix && tok->prefix_unless_spaced &&
            (text[0] == ' ' || (len >= 3 && memcmp(text, "\xE2\x96\x81", 3) == 0)))
            prefix = false;
        return slate__tok_spm_encode(tok, text, len, prefix, normalized, out, err);
    }
    return slate__tok_bpe_encode(tok, text, len, normalized, out, err);
}

/* What to do with each stretch of text that the added tokens of one pass leave. */
typedef struct pass {
    const slate_tokenizer *tok;
    const char *text;    /* the text of this pass */
    const size_t *plain; /* plain spans in this text: pairs {start, end}, ascending, disjoint */
    size_t n_plain;
    bool parse_special;
    bool normalized; /* second pass: text is a normalized stretch of the input */
    bool at_start;   /* second pass: that stretch starts the input */
    slate__tok_out *out;
    slate_error *err;
} pass;

static slate_status stretch(const pass *p, size_t from, size_t to);

/* Finds the added tokens of m in p->text[0..len), leftmost longest, emits them and hands the
 * stretches between them to stretch(). */
static slate_status split_added(const pass *p, const slate__tok_matcher *m, size_t len) {
    const slate_tokenizer *tok = p->tok;
    const char *text = p->text;
    const size_t *plain = p->plain;
    size_t n_plain = p->n_plain;
    size_t frag = 0; /* start of the current stretch of plain text */
    slate_status st = SLATE_OK;
    if (m->n > 0) {
        size_t k = 0; /* the first plain span that does not end at or before pos */
        for (size_t pos = 0; pos < len && st == SLATE_OK;) {
            while (k < n_plain && plain[2 * k + 1] <= pos) k++;
            /* Inside a plain span only user-defined tokens are found, and no added token
             * crosses a span's edge (none starts in the template and ends in a message, or the
             * other way round). */
            bool in_plain = k < n_plain && plain[2 * k] <= pos;
            size_t lim = k >= n_plain ? len : in_plain ? plain[2 * k + 1] : plain[2 * k];
            if (lim > len) lim = len;
            int32_t at = match_added(tok, m, text, pos, lim, p->parse_special && !in_plain);
            if (at < 0) {
                pos++;
                continue;
            }
            int32_t id = m->ids[at];
            size_t start = pos, end = pos + (m->off[at + 1] - m->off[at]);
            uint8_t attrs = tok->attrs ? tok->attrs[id] : 0;
            if (attrs & SLATE__TOK_ATTR_LSTRIP) start = space_before(text, frag, start);
            if (attrs & SLATE__TOK_ATTR_RSTRIP) end = space_after(text, end, len);
            st = stretch(p, frag, start);
            slate__tok_emit(p->out, id);
            pos = frag = end;
        }
    }
    if (st == SLATE_OK && len > frag) st = stretch(p, frag, len);
    return st;
}

/* The second pass over the raw stretch text[from..to) of the first: normalize it (one side of
 * each plain-span edge at a time, the spans carried over into the normalized text), then find
 * the normalized added tokens in it. */
static slate_status normalized_pass(const pass *p, size_t from, size_t to) {
    const slate_tokenizer *tok = p->tok;
    /* Parts: the stretch cut at the edges of the plain spans. */
    size_t n_parts = 1;
    for (size_t k = 0; k < p->n_plain; k++)
        for (int e = 0; e < 2; e++)
            if (p->plain[2 * k + e] > from && p->plain[2 * k + e] < to) n_parts++;
    char *norm = NULL;
    size_t norm_len = 0, norm_cap = 0;
    size_t *nplain = slate__malloc(n_parts * 2 * sizeof *nplain);
    if (!nplain) return slate__fail(p->err, SLATE_E_NOMEM, "out of memory encoding");
    size_t n_nplain = 0, k = 0;
    slate_status st = SLATE_OK;
    for (size_t a = from; a < to && st == SLATE_OK;) {
        while (k < p->n_plain && p->plain[2 * k + 1] <= a) k++;
        bool in_plain = k < p->n_plain && p->plain[2 * k] <= a;
        size_t b = k >= p->n_plain ? to : in_plain ? p->plain[2 * k + 1] : p->plain[2 * k];
        if (b > to) b = to;
        char *part;
        size_t part_len;
        st = slate__tok_normalize(tok, p->text + a, b - a, a == from && slate__tok_norm_prepends(tok),
                                  &part, &part_len, p->err);
        if (st != SLATE_OK) break;
        if (norm_len + part_len > norm_cap) {
            size_t cap = (norm_len + part_len) * 2 + 16;
            char *bigger = slate__malloc(cap);
            if (!bigger) {
                slate__free(part);
                st = slate__fail(p->err, SLATE_E_NOMEM, "out of memory normalizing %zu bytes",
                                 to - from);
                break;
            }
            if (norm_len) memcpy(bigger, norm, norm_len);
            slate__free(norm);
            norm = bigger;
            norm_cap = cap;
        }
        if (part_len) memcpy(norm + norm_len, part, part_len);
        slate__free(part);
        if (in_plain) {
            nplain[2 * n_nplain] = norm_len;
            nplain[2 * n_nplain + 1] = norm_len + part_len;
            n_nplain++;
        }
        norm_len += part_len;
        a = b;
    }
    if (st == SLATE_OK) {
        pass q = {tok,  norm, nplain, n_nplain, p->parse_special, true, from == 0,
                  p->out, p->err};
        st = split_added(&q, &tok->norm_special, norm_len);
    }
    slate__free(norm);
    slate__free(nplain);
    return st;
}

static slate_status stretch(const pass *p, size_t from, size_t to) {
    if (to == from) return SLATE_OK;
    if (p->normalized)
        return encode_text(p->tok, p->text + from, to - from, p->at_start && from == 0, true,
                           p->out, p->err);
    if (p->tok->norm_special.n > 0) return normalized_pass(p, from, to);
    return encode_text(p->tok, p->text + from, to - from, from == 0, false, p->out, p->err);
}

slate_status slate_tokenizer_encode(const slate_tokenizer *tok, const char *text, size_t len,
                                    uint32_t flags, int32_t *ids, size_t cap, size_t *n_out,
                                    slate_error *err) {
    return slate__tok_encode_spans(tok, text, len, flags, NULL, 0, ids, cap, n_out, err);
}

slate_status slate__tok_encode_spans(const slate_tokenizer *tok, const char *text, size_t len,
                                     uint32_t flags, const size_t *plain, size_t n_plain,
                                     int32_t *ids, size_t cap, size_t *n_out, slate_error *err) {
    if (n_out) *n_out = 0;
    if (!tok || !n_out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_tokenizer_encode: %s is NULL",
                           !tok ? "tok" : "n_out");
    if (!text && len > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate_tokenizer_encode: text is NULL with len %zu", len);
    if (!ids && cap > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate_tokenizer_encode: ids is NULL with cap %zu", cap);
    if (flags & ~(uint32_t)(SLATE_ENCODE_ADD_BOS | SLATE_ENCODE_PARSE_SPECIAL))
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate_tokenizer_encode: unknown flags 0x%x (known: 0x3)", flags);
    slate__tok_out out = {ids, cap, 0};
    if ((flags & SLATE_ENCODE_ADD_BOS) && tok->add_bos && tok->bos_id >= 0)
        slate__tok_emit(&out, tok->bos_id);
    pass p = {tok,   text,  plain, n_plain, (flags & SLATE_ENCODE_PARSE_SPECIAL) != 0,
              false, false, &out,  err};
    slate_status st = split_added(&p, &tok->special, len);
    if (st != SLATE_OK) return st;
    *n_out = out.n;
    if (out.n > cap)
        return slate__fail(err, SLATE_E_BUFFER_TOO_SMALL,
                           "encoding needs %zu ids, the buffer holds %zu", out.n, cap);
    return SLATE_OK;
}
