/*
 * session.h - internal view of a chat session (public API: the "Session" section of slate.h).
 * Tests use it to replay the ledger's predict calls into a fresh state.
 */
#ifndef SLATE_SESSION_H
#define SLATE_SESSION_H

#include "core/core.h"

/* The ledger's call boundaries: *call_end (borrowed like the ledger) holds *n ascending end
 * positions; call i covered ledger positions [i ? call_end[i-1] : 0, call_end[i]), and the last
 * end equals the ledger's length. */
void slate__session_calls(const slate_session *s, const int32_t **call_end, int32_t *n);

#endif /* SLATE_SESSION_H */
