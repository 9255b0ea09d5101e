/*
 * normalize.c - Unicode NFC normalization of input text (HF tokenizers normalizer "NFC", used by
 * Qwen), with libunistring's u8_normalize (UAX #15).
 *
 * u8_normalize refuses invalid UTF-8, but encode must accept any bytes. So the text is cut into
 * maximal valid runs and invalid bytes: each run is normalized on its own and invalid bytes are
 * copied unchanged (they then go through byte-level BPE as themselves). Pure ASCII is already
 * NFC, which is the common case and skips libunistring entirely.
 *
 * slate__tok_normalize is the whole HF normalizer as slate models it (NFC, Replace ' ' ->
 * U+2581, Prepend U+2581), for the text that normalized added tokens are found in and for
 * their own spelling (encode.c). The order does not matter: neither ' ' nor U+2581 composes
 * with anything under NFC.
 */
#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>
#include <uninorm.h>

slate_status slate__tok_nfc(const char *text, size_t len, char **out, size_t *out_len,
                            slate_error *err) {
    *out = NULL;
    *out_len = len;
    size_t i = 0;
    while (i < len && (uint8_t)text[i] < 0x80) i++;
    if (i == len) return SLATE_OK; /* ASCII: nothing to do */

    /* NFC output can be longer than its input, but by a bounded factor (UAX #15 gives 3x for
     * NFC in UTF-8); grow when a run does not fit anyway. */
    size_t cap = len * 3 + 16, n = 0;
    char *buf = slate__malloc(cap);
    if (!buf) return slate__fail(err, SLATE_E_NOMEM, "out of memory normalizing %zu bytes", len);
    const uint8_t *s = (const uint8_t *)text;
    size_t pos = 0;
    while (pos < len) {
        size_t run = pos;
        while (run < len) {
            size_t cl = slate__tok_utf8_len(s + run, len - run);
            if (cl == 0) break;
            run += cl;
        }
        if (run > pos) {
            size_t got = cap - n;
            uint8_t *r = u8_normalize(UNINORM_NFC, s + pos, run - pos, (uint8_t *)buf + n, &got);
            if (!r) {
                slate__free(buf);
                return slate__fail(err, SLATE_E_NOMEM, "NFC normalization of %zu bytes failed",
                                   run - pos);
            }
            if (r != (uint8_t *)buf + n) { /* did not fit: libunistring allocated it */
                size_t need = n + got + (len - run) * 3 + 16;
                char *bigger = slate__malloc(need);
                if (!bigger) {
                    free(r);
                    slate__free(buf);
                    return slate__fail(err, SLATE_E_NOMEM, "out of memory normalizing %zu bytes",
                                       len);
                }
                memcpy(bigger, buf, n);
                memcpy(bigger + n, r, got);
                free(r);
                slate__free(buf);
                buf = bigger;
                cap = need;
            }
            n += got;
            pos = run;
        }
        if (pos < len) {    /* one invalid byte, copied as is */
            if (n == cap) { /* cannot happen with the bound above; keep it safe anyway */
                slate__free(buf);
                return slate__fail(err, SLATE_E_INTERNAL, "NFC buffer overflow");
            }
            buf[n++] = (char)s[pos++];
        }
    }
    *out = buf;
    *out_len = n;
    return SLATE_OK;
}

bool slate__tok_norm_prepends(const slate_tokenizer *tok) {
    /* A Metaspace prefix belongs to the pre-tokenizer, which runs after added tokens are
     * found; only the Prepend normalizer's is part of the normalized text. */
    return tok->kind == SLATE__TOK_SPM && tok->add_space_prefix && !tok->prefix_unless_spaced;
}

slate_status slate__tok_normalize(const slate_tokenizer *tok, const char *text, size_t len,
                                  bool prepend, char **out, size_t *out_len, slate_error *err) {
    *out = NULL;
    *out_len = 0;
    char *nfc = NULL;
    size_t n = len;
    if (tok->nfc && len > 0) {
        slate_status st = slate__tok_nfc(text, len, &nfc, &n, err);
        if (st != SLATE_OK) return st;
        if (nfc) text = nfc;
    }
    bool spm_spaces = tok->kind == SLATE__TOK_SPM && !tok->space_is_plain;
    prepend = prepend && spm_spaces && n > 0;
    /* Each byte becomes at most 3 (a space becomes U+2581), plus the prefix. */
    size_t cap;
    if (!slate__mul_size(n, 3, &cap) || cap > SIZE_MAX - 4) {
        slate__free(nfc);
        return slate__fail(err, SLATE_E_INVALID_ARG, "text of %zu bytes is too long", len);
    }
    char *buf = slate__malloc(cap + 4);
    if (!buf) {
        slate__free(nfc);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory normalizing %zu bytes", len);
    }
    size_t k = 0;
    if (prepend) {
        memcpy(buf, "\xE2\x96\x81", 3);
        k = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (spm_spaces && text[i] == ' ') {
            memcpy(buf + k, "\xE2\x96\x81", 3);
            k += 3;
        } else {
            buf[k++] = text[i];
        }
    }
    slate__free(nfc);
    *out = buf;
    *out_len = k;
    return SLATE_OK;
}
