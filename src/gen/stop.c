/*
 * stop.c - streaming stop-string matcher (contract in stop.h). Text arrives in pieces; the
 * matcher releases every byte that can no longer belong to a stop string and holds back the
 * rest, until a stop string completes or the caller flushes.
 *
 * Key idea: each feed first lays out held-back bytes + new text contiguously in the caller's
 * `out` buffer (which stop.h sizes for exactly that), then works there: no allocation and no
 * copying beyond that one memcpy. Matches are found in order of the byte at which they
 * complete, so the first stop string to appear wins, and the result does not depend on how the
 * text was cut into pieces (feeding "abcd" whole or byte by byte against stops "abc" and "bcd"
 * stops at "abc" either way). Among stops completing at the same byte, the longest (earliest
 * starting) wins, then the lowest index.
 *
 * Invariants: hold[0..n_hold) is the longest suffix of the text fed so far (and not released)
 * that is a proper prefix of some stop string, so n_hold < max_len; released text followed by
 * the held bytes is exactly the input, byte for byte (nothing is rewritten). Matching is on
 * bytes: multibyte UTF-8 stops work unchanged, and because a valid UTF-8 stop begins with a
 * lead byte, every cut point in valid UTF-8 text falls between characters. After a match,
 * matched >= 0 and nothing more is released until reset.
 */
#include "gen/stop.h"

#include <string.h>

struct slate__stop {
    int32_t n;       /* number of stop strings */
    char **stops;    /* [n] NUL-terminated copies */
    size_t *lens;    /* [n] byte lengths, each >= 1 */
    size_t max_len;  /* longest stop string; 0 when n == 0 */
    char *hold;      /* [max_len] held-back bytes */
    size_t n_hold;   /* < max_len */
    int32_t matched; /* index of the matched stop string, or -1 */
};

slate_status slate__stop_create(const char *const *stops, int32_t n, slate__stop **out,
                                slate_error *err) {
    if (!out) return slate__fail(err, SLATE_E_INVALID_ARG, "stop matcher: out is NULL");
    *out = NULL;
    if (n < 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "stop matcher: n = %d stop strings is out of range: must be >= 0",
                           (int)n);
    if (n > 0 && !stops)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "stop matcher: stops is NULL but n = %d", (int)n);
    for (int32_t i = 0; i < n; i++) {
        if (!stops[i])
            return slate__fail(err, SLATE_E_INVALID_ARG, "stop string %d is NULL", (int)i);
        if (stops[i][0] == '\0')
            return slate__fail(err, SLATE_E_INVALID_ARG,
                               "stop string %d is empty: stop strings must be non-empty",
                               (int)i);
    }

    slate__stop *s = slate__calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->matched = -1;
    s->stops = slate__calloc((size_t)n, sizeof *s->stops);
    s->lens = slate__calloc((size_t)n, sizeof *s->lens);
    if (!s->stops || !s->lens) goto nomem;
    s->n = n; /* set before the copies so free() releases those made before a failure */
    for (int32_t i = 0; i < n; i++) {
        s->lens[i] = strlen(stops[i]);
        s->stops[i] = slate__strndup(stops[i], s->lens[i]);
        if (!s->stops[i]) goto nomem;
        if (s->lens[i] > s->max_len) s->max_len = s->lens[i];
    }
    s->hold = slate__malloc(s->max_len);
    if (!s->hold) goto nomem;
    *out = s;
    return SLATE_OK;

nomem:
    slate__stop_free(s);
    return slate__fail(err, SLATE_E_NOMEM, "stop matcher: out of memory copying %d stop strings",
                       (int)n);
}

void slate__stop_free(slate__stop *s) {
    if (!s) return;
    if (s->stops)
        for (int32_t i = 0; i < s->n; i++) slate__free(s->stops[i]);
    slate__free(s->stops);
    slate__free(s->lens);
    slate__free(s->hold);
    slate__free(s);
}

/* Index of the stop string that ends exactly at buf[end) (earliest start, then lowest index),
 * or -1. */
static int32_t match_ending_at(const slate__stop *s, const char *buf, size_t end) {
    int32_t best = -1;
    for (int32_t i = 0; i < s->n; i++) {
        size_t L = s->lens[i];
        if (L > end || (best >= 0 && L <= s->lens[best])) continue;
        /* Compare the last byte first: it rejects almost every position at once. */
        if (buf[end - 1] == s->stops[i][L - 1] && memcmp(buf + end - L, s->stops[i], L) == 0)
            best = i;
    }
    return best;
}

/* Whether buf[0..len) is a proper prefix of some stop string. */
static bool is_proper_prefix(const slate__stop *s, const char *buf, size_t len) {
    for (int32_t i = 0; i < s->n; i++)
        if (s->lens[i] > len && memcmp(buf, s->stops[i], len) == 0) return true;
    return false;
}

bool slate__stop_feed(slate__stop *s, const char *text, size_t len, char *out, size_t *out_len) {
    *out_len = 0;
    if (!s) return false;
    if (s->matched >= 0) return true;
    if (s->n == 0) {
        if (len > 0) memcpy(out, text, len);
        *out_len = len;
        return false;
    }
    if (s->n_hold > 0) memcpy(out, s->hold, s->n_hold);
    if (len > 0) memcpy(out + s->n_hold, text, len);
    const size_t total = s->n_hold + len;

    /* Any match ends in the new text: one ending inside the held bytes was reported already. */
    for (size_t end = s->n_hold + 1; end <= total; end++) {
        int32_t i = match_ending_at(s, out, end);
        if (i >= 0) {
            s->matched = i;
            s->n_hold = 0;
            *out_len = end - s->lens[i];
            return true;
        }
    }

    /* No match: hold the longest suffix that could still grow into a match. It is a proper
     * prefix of a stop string, so it is shorter than max_len. */
    size_t keep = total < s->max_len - 1 ? total : s->max_len - 1;
    while (keep > 0 && !is_proper_prefix(s, out + total - keep, keep)) keep--;
    memcpy(s->hold, out + total - keep, keep);
    s->n_hold = keep;
    *out_len = total - keep;
    return false;
}

void slate__stop_flush(slate__stop *s, char *out, size_t *out_len) {
    *out_len = 0;
    if (!s || s->matched >= 0) return;
    if (s->n_hold > 0) memcpy(out, s->hold, s->n_hold);
    *out_len = s->n_hold;
    s->n_hold = 0;
}

size_t slate__stop_max_len(const slate__stop *s) { return s ? s->max_len : 0; }

int32_t slate__stop_matched(const slate__stop *s) { return s ? s->matched : -1; }

void slate__stop_reset(slate__stop *s) {
    if (!s) return;
    s->n_hold = 0;
    s->matched = -1;
}
