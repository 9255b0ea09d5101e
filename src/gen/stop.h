/*
 * stop.h - stop-string matcher for streamed text. Text arrives in pieces; a stop string may be
 * split across pieces. The matcher holds back any suffix of the text that could still be the
 * start of a stop string, releases text as soon as it can no longer be part of one, and on a
 * full match reports it: the text before the match is released, the match and anything after it
 * are never released.
 */
#ifndef SLATE_STOP_H
#define SLATE_STOP_H

#include "core/core.h"

typedef struct slate__stop slate__stop;

/* stops: n NUL-terminated, non-empty strings (copied). n may be 0 (then text passes straight
 * through). Returns OK, E_INVALID_ARG (an empty stop string), E_NOMEM. */
slate_status slate__stop_create(const char *const *stops, int32_t n, slate__stop **out,
                                slate_error *err);
void slate__stop_free(slate__stop *s);

/* Feeds text[0..len). Writes the text that is now safe to emit into out (*out_len bytes; out
 * must have room for len + the held-back bytes, i.e. len + slate__stop_max_len(s)). Returns
 * true if a stop string has now matched (then everything from the match on is dropped, and
 * later calls emit nothing). */
bool slate__stop_feed(slate__stop *s, const char *text, size_t len, char *out, size_t *out_len);
/* At the end of generation without a match: releases the held-back bytes into out. */
void slate__stop_flush(slate__stop *s, char *out, size_t *out_len);
size_t slate__stop_max_len(const slate__stop *s);
/* Index of the stop string that matched, or -1. */
int32_t slate__stop_matched(const slate__stop *s);
void slate__stop_reset(slate__stop *s);

#endif /* SLATE_STOP_H */
