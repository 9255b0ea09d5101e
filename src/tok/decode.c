/*
 * decode.c - token ids back to bytes: slate_tokenizer_piece (one token) and
 * slate_tokenizer_decode (a sequence).
 *
 * The bytes of every token were computed at creation (tok.c, build_pieces): SPM pieces have
 * U+2581 turned back into ' ' and <0xXX> into the byte; BPE pieces are mapped from the GPT-2
 * alphabet back to bytes; added tokens are their text, or, under an HF decoder that turns U+2581
 * into spaces in every token (decode_added_marks), that text (their normalized spelling if they
 * are normalized) with its marks as spaces. Control and unknown tokens give their text only when
 * `special` is set, else nothing (llama.cpp token_to_piece; HF's skip_special_tokens).
 *
 * decode() drops the SentencePiece dummy-prefix mark from the first token that produces any
 * bytes (so with BOS in front it still goes, and decode(encode(x)) == x for any x without added
 * tokens), in the way the tokenizer's decoder does (slate__tok_dstrip: sentencepiece's one space
 * from a model piece, HF's Strip decoder's one space from the output, or HF's Metaspace
 * decoder's every U+2581 of the first token). Byte-level BPE adds no prefix and strips nothing.
 * Output is raw bytes: invalid UTF-8 in, invalid UTF-8 out.
 */
#include "tok/tok.h"

#include <string.h>

const char *slate__tok_piece_bytes(const slate_tokenizer *tok, int32_t id, bool special,
                                   size_t *len) {
    uint8_t type = tok->types[id];
    if (!special && (type == SLATE__TOKT_CONTROL || type == SLATE__TOKT_UNKNOWN)) {
        *len = 0;
        return tok->piece;
    }
    *len = tok->piece_off[id + 1] - tok->piece_off[id];
    return tok->piece + tok->piece_off[id];
}

size_t slate__tok_first_piece(const slate_tokenizer *tok, int32_t id, const char *piece,
                              size_t len, char *out) {
    size_t skip = 0; /* bytes dropped from the front */
    bool all = false; /* drop every space (METASPACE) */
    uint8_t type = tok->types[id];
    bool normal = type == SLATE__TOKT_NORMAL;
    bool added = type == SLATE__TOKT_CONTROL || type == SLATE__TOKT_UNKNOWN ||
                 type == SLATE__TOKT_USER_DEFINED;
    if (added && tok->decode_added_marks && len > 0 &&
        tok->decode_strip == SLATE__TOK_DSTRIP_METASPACE) {
        /* HF's Metaspace decoder drops the marks of the string the first token gives it. A
         * normalized token's spelling has every space as a mark; another's is its text, whose
         * literal spaces stay. */
        if (tok->attrs && (tok->attrs[id] & SLATE__TOK_ATTR_NORMALIZED)) {
            normal = true;
        } else {
            size_t n_text, n = 0;
            const char *text = slate__tok_text(tok, id, &n_text);
            for (size_t i = 0; i < n_text;) {
                if (i + 3 <= n_text && memcmp(text + i, "\xE2\x96\x81", 3) == 0) {
                    i += 3;
                    continue;
                }
                if (out) out[n] = text[i];
                n++;
                i++;
            }
            return n;
        }
    }
    if (tok->kind == SLATE__TOK_SPM && len > 0) {
        switch ((slate__tok_dstrip)tok->decode_strip) {
        case SLATE__TOK_DSTRIP_SPM:
            skip = tok->add_space_prefix && normal && piece[0] == ' ';
            break;
        case SLATE__TOK_DSTRIP_LEADING: skip = piece[0] == ' '; break;
        /* A NORMAL piece's spaces all come from U+2581 (space_is_plain is llama2.c only). */
        case SLATE__TOK_DSTRIP_METASPACE: all = normal; break;
        case SLATE__TOK_DSTRIP_NONE: break;
        }
    }
    size_t n = 0;
    for (size_t i = skip; i < len; i++) {
        if (all && piece[i] == ' ') continue;
        if (out) out[n] = piece[i];
        n++;
    }
    return n;
}

slate_status slate_tokenizer_piece(const slate_tokenizer *tok, int32_t id, bool special, char *buf,
                                   size_t cap, size_t *len_out, slate_error *err) {
    if (len_out) *len_out = 0;
    if (!tok || !len_out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_tokenizer_piece: %s is NULL",
                           !tok ? "tok" : "len_out");
    if (id < 0 || id >= tok->n_tokens)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "token id %d is outside the vocabulary (0..%d)", (int)id,
                           (int)tok->n_tokens - 1);
    if (!buf && cap > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate_tokenizer_piece: buf is NULL with cap %zu", cap);
    size_t n;
    const char *p = slate__tok_piece_bytes(tok, id, special, &n);
    *len_out = n;
    if (n > cap)
        return slate__fail(err, SLATE_E_BUFFER_TOO_SMALL,
                           "token %d needs %zu bytes, buffer has %zu", (int)id, n, cap);
    if (n) memcpy(buf, p, n);
    return SLATE_OK;
}

slate_status slate_tokenizer_decode(const slate_tokenizer *tok, const int32_t *ids, size_t n,
                                    bool special, char *buf, size_t cap, size_t *len_out,
                                    slate_error *err) {
    if (len_out) *len_out = 0;
    if (!tok || !len_out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_tokenizer_decode: %s is NULL",
                           !tok ? "tok" : "len_out");
    if (!ids && n > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate_tokenizer_decode: ids is NULL with n %zu", n);
    if (!buf && cap > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate_tokenizer_decode: buf is NULL with cap %zu", cap);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tok->n_tokens)
            return slate__fail(err, SLATE_E_INVALID_ARG,
                               "ids[%zu] = %d is outside the vocabulary (0..%d)", i, (int)ids[i],
                               (int)tok->n_tokens - 1);
    /* Two passes: size first, so that a short buffer gets nothing half-written. */
    for (int pass = 0; pass < 2; pass++) {
        bool at_start = true;
        size_t pos = 0;
        for (size_t i = 0; i < n; i++) {
            size_t len;
            const char *p = slate__tok_piece_bytes(tok, ids[i], special, &len);
            if (len == 0) continue;
            if (at_start) {
                pos += slate__tok_first_piece(tok, ids[i], p, len, pass == 1 ? buf + pos : NULL);
                at_start = false;
                continue;
            }
            if (pass == 1) memcpy(buf + pos, p, len);
            pos += len;
        }
        if (pass == 0) {
            total = pos;
            *len_out = total;
            if (total > cap)
                return slate__fail(err, SLATE_E_BUFFER_TOO_SMALL,
                                   "decoding %zu ids needs %zu bytes, buffer has %zu", n, total,
                                   cap);
        }
    }
    return SLATE_OK;
}
