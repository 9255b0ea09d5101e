/*
 * detok.c - streaming detokenizer: ids in, whole UTF-8 characters out.
 *
 * A character may span several tokens (byte-fallback tokens, byte-level BPE pieces of an
 * emoji), so the bytes of an incomplete character at the end of a piece are held back (at most
 * 3) until the next push completes them. Bytes that can never become a character (a stray
 * continuation byte, an invalid lead byte, a sequence broken by a non-continuation byte) come out
 * at once as U+FFFD, one per maximal invalid subpart (Unicode 15, section 3.9 "U+FFFD
 * Substitution of Maximal Subparts"), so output is always valid UTF-8 and nothing is held
 * forever. Flush turns a dangling incomplete character into one U+FFFD.
 *
 * The SentencePiece dummy-prefix mark is dropped from the first token that produces text, as
 * in slate_tokenizer_decode (slate__tok_first_piece). Control tokens produce nothing (the detokenizer shows model text,
 * not markup). A push that does not fit in the caller's buffer changes nothing: the output is
 * built in the detokenizer's own scratch, sized at creation for the longest token, and
 * committed only when it fits.
 */
#include "tok/tok.h"

#include <string.h>

struct slate_detok {
    const slate_tokenizer *tok;
    bool at_start;   /* the dummy-prefix strip is pending (no text yet, no continue) */
    bool produced;   /* some token has produced text */
    uint8_t held[4]; /* bytes of an incomplete character */
    size_t n_held;
    char *scratch; /* [in_cap] input (held + the longest piece), then [3 * in_cap] output
                      (each input byte may become a 3-byte U+FFFD) */
    size_t in_cap;
};

slate_status slate_detok_create(const slate_tokenizer *tok, slate_detok **out, slate_error *err) {
    if (out) *out = NULL;
    if (!tok || !out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_detok_create: %s is NULL",
                           !tok ? "tok" : "out");
    slate_detok *d = slate__calloc(1, sizeof *d);
    if (!d) return slate__fail(err, SLATE_E_NOMEM, "out of memory for a detokenizer");
    d->tok = tok;
    d->at_start = true;
    d->in_cap = (size_t)tok->max_piece_len + 4;
    d->scratch = slate__malloc(d->in_cap * 4);
    if (!d->scratch) {
        size_t want = d->in_cap * 4;
        slate__free(d);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory for a detokenizer (%zu bytes)",
                           want);
    }
    *out = d;
    return SLATE_OK;
}

slate_status slate_detok_continue(slate_detok *d, slate_error *err) {
    if (!d) return slate__fail(err, SLATE_E_INVALID_ARG, "slate_detok_continue: d is NULL");
    if (d->produced)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_detok_continue: the detokenizer has "
                           "already produced text");
    d->at_start = false;
    return SLATE_OK;
}

void slate_detok_free(slate_detok *d) {
    if (!d) return;
    slate__free(d->scratch);
    slate__free(d);
}

/* How the bytes at s[0..n) begin: returns the length of a complete valid character (> 0), 0 if
 * they are a valid but incomplete prefix of one, or -k for an invalid subpart of k bytes. */
static int classify(const uint8_t *s, size_t n) {
    size_t ok, need = slate__tok_utf8_lead(s, n, &ok);
    if (need == 0) return -1;           /* not a lead byte */
    if (ok == need) return (int)need;   /* complete */
    if (ok == n) return 0;              /* ran out of bytes: wait for more */
    return -(int)ok;                    /* broken after `ok` bytes */
}

/* Converts held + p[0..len) into valid UTF-8 at out; returns the byte count and the bytes to
 * hold back in new_held / *n_new. With final set, an incomplete tail becomes U+FFFD. */
static size_t convert(const uint8_t *in, size_t n, bool final, char *out, uint8_t *new_held,
                      size_t *n_new) {
    size_t o = 0, i = 0;
    *n_new = 0;
    while (i < n) {
        int k = classify(in + i, n - i);
        if (k > 0) {
            memcpy(out + o, in + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else if (k == 0 && !final) {
            *n_new = n - i;
            memcpy(new_held, in + i, n - i);
            break;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += k == 0 ? n - i : (size_t)-k;
        }
    }
    return o;
}

slate_status slate_detok_push(slate_detok *d, int32_t id, char *buf, size_t cap, size_t *len_out,
                              slate_error *err) {
    if (len_out) *len_out = 0;
    if (!d || !len_out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_detok_push: %s is NULL",
                           !d ? "d" : "len_out");
    const slate_tokenizer *tok = d->tok;
    if (id < 0 || id >= tok->n_tokens)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "token id %d is outside the vocabulary (0..%d)", (int)id,
                           (int)tok->n_tokens - 1);
    if (!buf && cap > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_detok_push: buf is NULL with cap %zu",
                           cap);
    size_t len;
    const char *p = slate__tok_piece_bytes(tok, id, false, &len);
    if (len == 0) return SLATE_OK;
    /* scratch = [input: held bytes + piece][output: up to 3 bytes per input byte] */
    uint8_t *in = (uint8_t *)d->scratch;
    char *outp = d->scratch + d->in_cap;
    memcpy(in, d->held, d->n_held);
    if (d->at_start)
        len = slate__tok_first_piece(tok, id, p, len, (char *)in + d->n_held);
    else
        memcpy(in + d->n_held, p, len);
    size_t n_in = d->n_held + len;
    uint8_t new_held[4];
    size_t n_new;
    size_t n = convert(in, n_in, false, outp, new_held, &n_new);
    *len_out = n;
    if (n > cap)
        return slate__fail(err, SLATE_E_BUFFER_TOO_SMALL,
                           "token %d needs %zu bytes, buffer has %zu", (int)id, n, cap);
    if (n) memcpy(buf, outp, n);
    memcpy(d->held, new_held, n_new);
    d->n_held = n_new;
    d->at_start = false;
    d->produced = true;
    return SLATE_OK;
}

slate_status slate_detok_flush(slate_detok *d, char *buf, size_t cap, size_t *len_out,
                               slate_error *err) {
    if (len_out) *len_out = 0;
    if (!d || !len_out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_detok_flush: %s is NULL",
                           !d ? "d" : "len_out");
    if (!buf && cap > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_detok_flush: buf is NULL with cap %zu",
                           cap);
    char out[12];
    uint8_t new_held[4];
    size_t n_new;
    size_t n = convert(d->held, d->n_held, true, out, new_held, &n_new);
    *len_out = n;
    if (n > cap)
        return slate__fail(err, SLATE_E_BUFFER_TOO_SMALL, "flush needs %zu bytes, buffer has %zu",
                           n, cap);
    if (n) memcpy(buf, out, n);
    d->n_held = 0;
    return SLATE_OK;
}
