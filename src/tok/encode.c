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
 * All scratch memory belongs to the call: the tokenizer is never written, so any number of
 * threads may encode with one tokenizer at once.
 */
#include "tok/tok.h"

#include <string.h>

/* Id of the longest added token that text[pos..len) starts with, or -1. */
static int32_t match_special(const slate_tokenizer *tok, const char *text, size_t pos, size_t len,
                             bool parse_special) {
    uint8_t b = (uint8_t)text[pos];
    for (uint32_t k = tok->special_start[b]; k < tok->special_start[b + 1]; k++) {
        int32_t id = tok->special[k];
        if (tok->types[id] != SLATE__TOKT_USER_DEFINED && !parse_special) continue;
        size_t n = tok->text_off[id + 1] - tok->text_off[id];
        if (n <= len - pos && memcmp(text + pos, tok->text + tok->text_off[id], n) == 0)
            return id; /* sorted longest first */
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
 * follows an added token (prefix_first_only, prepend_scheme "first"). */
static slate_status encode_text(const slate_tokenizer *tok, const char *text, size_t len,
                                bool at_start, slate__tok_out *out, slate_error *err) {
    if (len == 0) return SLATE_OK;
    if (tok->kind == SLATE__TOK_SPM) {
        bool prefix = tok->add_space_prefix && (at_start || !tok->prefix_first_only);
        if (prefix && tok->prefix_unless_spaced &&
            (text[0] == ' ' || (len >= 3 && memcmp(text, "\xE2\x96\x81", 3) == 0)))
            prefix = false;
        return slate__tok_spm_encode(tok, text, len, prefix, out, err);
    }
    return slate__tok_bpe_encode(tok, text, len, out, err);
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
    bool parse_special = (flags & SLATE_ENCODE_PARSE_SPECIAL) != 0;
    size_t frag = 0; /* start of the current stretch of plain text */
    slate_status st = SLATE_OK;
    if (tok->n_special > 0) {
        size_t k = 0; /* the first plain span that does not end at or before pos */
        for (size_t pos = 0; pos < len && st == SLATE_OK;) {
            while (k < n_plain && plain[2 * k + 1] <= pos) k++;
            /* Inside a plain span only user-defined tokens are found, and no added token
             * crosses a span's edge (none starts in the template and ends in a message, or the
             * other way round). */
            bool in_plain = k < n_plain && plain[2 * k] <= pos;
            size_t lim = k >= n_plain ? len : in_plain ? plain[2 * k + 1] : plain[2 * k];
            if (lim > len) lim = len;
            int32_t id = match_special(tok, text, pos, lim, parse_special && !in_plain);
            if (id < 0) {
                pos++;
                continue;
            }
            size_t start = pos, end = pos + (tok->text_off[id + 1] - tok->text_off[id]);
            uint8_t attrs = tok->attrs ? tok->attrs[id] : 0;
            if (attrs & SLATE__TOK_ATTR_LSTRIP) start = space_before(text, frag, start);
            if (attrs & SLATE__TOK_ATTR_RSTRIP) end = space_after(text, end, len);
            st = encode_text(tok, text + frag, start - frag, frag == 0, &out, err);
            slate__tok_emit(&out, id);
            pos = frag = end;
        }
    }
    if (st == SLATE_OK && len > frag)
        st = encode_text(tok, text + frag, len - frag, frag == 0, &out, err);
    if (st != SLATE_OK) return st;
    *n_out = out.n;
    if (out.n > cap)
        return slate__fail(err, SLATE_E_BUFFER_TOO_SMALL,
                           "encoding needs %zu ids, the buffer holds %zu", out.n, cap);
    return SLATE_OK;
}
