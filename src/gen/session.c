/*
 * session.c - chat sessions (API and contract: "Session" in slate.h). A session owns a state,
 * the conversation (messages) and the token ledger: ids[0..n_ids) are exactly the ids the state
 * holds, and call_end[] marks where each slate_state_predict call that put them there ended.
 *
 * A turn: render the whole conversation with the template (template.c), tokenize it with
 * SLATE_ENCODE_PARSE_SPECIAL for the template's text only (special-token spellings inside
 * messages stay text: a user cannot forge a turn), apply the context policy if it does not fit, then reuse: keep the
 * longest common prefix of ledger and prompt, cut back to the last call boundary inside it
 * (and to at most n_prompt - 1, since the last position must be computed for its logits),
 * truncate the state there and prefill the rest in chunks of the package's max query. Sampling
 * follows slate_generate (generate.c): the same sampler, detokenizer and stop-string matcher,
 * and the last sampled token is not fed. Generated tokens enter the ledger one call each.
 *
 * Why call boundaries: SIMD matmul kernels take a different path for one row than for several
 * (and per-call choices like activation quantization could do so too), so a cache row depends
 * on the call that computed it. Keeping only whole calls makes the cache exactly what a fresh
 * state gets from replaying the ledger's calls (test_session.c checks logits bit for bit); a
 * cut inside a call would keep rows whose call no longer exists.
 *
 * Invariants (between calls): n_ids == slate_state_length(state) unless the caller or memory
 * pressure changed the state, which ledger_sync() repairs at the next turn; call_end is
 * strictly increasing with last element n_ids (n_calls == 0 iff n_ids == 0); messages are an
 * optional system message, then user/assistant alternating starting with user. `phase` makes
 * calls exclusive (E_BUSY) and carries the cancel request of a running turn.
 */
#include "gen/session.h"
#include "gen/stop.h"
#include "gen/template.h"
#include "plan/model.h"
#include "tok/tok.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { PHASE_IDLE = 0, PHASE_BUSY = 1, PHASE_RUNNING = 2, PHASE_CANCEL = 3 };
enum { PIECE_CAP = 4096 };

/* How a summary enters the system message, and how the model is asked to write one. */
static const char SUMMARY_PREFIX[] = "Summary of the earlier conversation: ";
static const char SUMMARY_SYSTEM[] = "You summarize conversations accurately and briefly.";
static const char SUMMARY_ASK[] = "Summarize the conversation below in a few sentences. Keep "
                                  "names, facts, numbers, decisions and open questions.\n\n";

typedef struct msg {
    slate_role role;
    char *text; /* owned, NUL-terminated for convenience */
    size_t len;
} msg;

struct slate_session {
    slate_model *model;
    slate_state *state;
    const slate_tokenizer *tok;
    slate__tmpl tmpl;
    slate_context_policy policy;
    int32_t n_reserve, n_summary_max;
    int32_t n_ctx, max_query, n_text;
    slate_summarize_fn summarize;
    void *summarize_user;
    char *bos, *eos;          /* BOS / EOS text ("" if none) */
    int32_t end_turn_id;      /* the template's end-of-turn token, -1 if not a single token */

    msg *msgs;
    int32_t n_msgs, cap_msgs;
    bool has_summary;         /* msgs[0] is a system message ending in a summary */
    size_t sys_orig_len;      /* bytes of msgs[0] before the summary (the caller's own text) */

    int32_t *ids;             /* [n_ctx] the ledger */
    int32_t n_ids;
    int32_t *call_end;        /* [n_ctx] */
    int32_t n_calls;

    int32_t *prompt;          /* the last rendering, tokenized */
    size_t prompt_cap;
    slate__buf text;          /* the last rendering */
    slate__buf spans;         /* where message text lies in it (size_t pairs) */
    slate__chat_msg *view;    /* [cap_msgs + 1] messages as handed to the renderer */
    slate__buf sys_buf;       /* a candidate system message (policy) */

    slate_session_stats stats;
    atomic_int phase;
};

/* ---- small helpers ------------------------------------------------------------------------- */

static bool acquire(slate_session *s, int to) {
    int idle = PHASE_IDLE;
    return atomic_compare_exchange_strong(&s->phase, &idle, to);
}
static void release(slate_session *s) { atomic_store(&s->phase, PHASE_IDLE); }

static const char *role_str(slate_role r) {
    return r == SLATE_ROLE_SYSTEM ? "system" : r == SLATE_ROLE_USER ? "user" : "assistant";
}

static bool has_sys(const slate_session *s) {
    return s->n_msgs > 0 && s->msgs[0].role == SLATE_ROLE_SYSTEM;
}

/* Complete (user, assistant) turns before the pending user message. */
static int32_t n_complete_turns(const slate_session *s) {
    return (s->n_msgs - (has_sys(s) ? 1 : 0) - 1) / 2;
}

/* Room for `need` messages (and the renderer's view of them plus one). */
static slate_status reserve_msgs(slate_session *s, int32_t need, slate_error *err) {
    if (need <= s->cap_msgs) return SLATE_OK;
    int32_t cap = s->cap_msgs ? s->cap_msgs : 16;
    while (cap < need) cap *= 2;
    msg *m = slate__realloc(s->msgs, (size_t)cap * sizeof *m);
    if (!m) return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d messages", cap);
    s->msgs = m;
    slate__chat_msg *v = slate__realloc(s->view, (size_t)(cap + 1) * sizeof *v);
    if (!v) return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d messages", cap);
    s->view = v;
    s->cap_msgs = cap;
    return SLATE_OK;
}

static slate_status grow_msgs(slate_session *s, slate_error *err) {
    return reserve_msgs(s, s->n_msgs + 1, err);
}

static void free_msgs(slate_session *s, int32_t from, int32_t to) {
    for (int32_t i = from; i < to; i++) slate__free(s->msgs[i].text);
}

/* ---- the ledger ---------------------------------------------------------------------------- */

/* Shortens the ledger to n <= n_ids ids; n becomes a call boundary. */
static void ledger_cut(slate_session *s, int32_t n) {
    s->n_ids = n;
    while (s->n_calls > 0 && s->call_end[s->n_calls - 1] > n) s->n_calls--;
    if (n > 0 && (s->n_calls == 0 || s->call_end[s->n_calls - 1] != n)) s->call_end[s->n_calls++] = n;
}

static void ledger_push(slate_session *s, const int32_t *ids, int32_t n) {
    memcpy(s->ids + s->n_ids, ids, (size_t)n * sizeof *ids);
    s->n_ids += n;
    s->call_end[s->n_calls++] = s->n_ids;
}

/* Repairs the ledger after the state changed behind the session's back (memory pressure
 * emptied it, or the caller used it directly). A shorter state kept its prefix (truncation and
 * resets keep or drop rows, never rewrite them); a longer one holds ids nobody recorded. */
static void ledger_sync(slate_session *s) {
    int32_t len = slate_state_length(s->state);
    if (len < s->n_ids) {
        ledger_cut(s, len);
    } else if (len > s->n_ids) {
        slate_state_reset(s->state);
        s->n_ids = 0;
        s->n_calls = 0;
    }
}

void slate__session_calls(const slate_session *s, const int32_t **call_end, int32_t *n) {
    *call_end = s ? s->call_end : NULL;
    *n = s ? s->n_calls : 0;
}

/* ---- create / free ------------------------------------------------------------------------- */

slate_session_params slate_session_default_params(void) {
    slate_session_params p;
    memset(&p, 0, sizeof p);
    p.context_policy = SLATE_CONTEXT_REFUSE;
    p.n_reserve = -1;
    p.n_summary_max = 0; /* min(128, n_ctx / 4) */
    return p;
}

/* The template's start, printable, for messages. */
slate_status slate_session_create(slate_model *model, const slate_session_params *params,
                                  slate_session **out, slate_error *err) {
    if (out) *out = NULL;
    if (!model || !out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "model and out must not be NULL");
    slate_session_params dp = slate_session_default_params();
    const slate_session_params *p = params ? params : &dp;
    slate__tmpl tmpl;
    slate_status cs = slate__tmpl_choose(model->chat_template, p->template_name, &tmpl, err);
    if (cs) return cs;
    if ((unsigned)p->context_policy > SLATE_CONTEXT_SUMMARIZE)
        return slate__fail(err, SLATE_E_INVALID_ARG, "context_policy %d outside 0..2 (refuse, "
                           "roll, summarize)", (int)p->context_policy);
    if (p->summarize && p->context_policy != SLATE_CONTEXT_SUMMARIZE)
        return slate__fail(err, SLATE_E_INVALID_ARG, "a summarize callback is set but "
                           "context_policy is %d, not SLATE_CONTEXT_SUMMARIZE (2)",
                           (int)p->context_policy);
    slate_state_params stp = slate_state_default_params();
    stp.n_ctx = p->n_ctx;
    stp.kv_rollback_tokens = p->kv_rollback_tokens;
    stp.kv_keep_all = p->kv_keep_all;
    slate_state *st = NULL;
    slate_status s = slate_state_create(model, &stp, &st, err);
    if (s) return s;
    int32_t n_ctx = slate_state_n_ctx(st);
    if (p->n_reserve < -1 || p->n_reserve >= n_ctx) {
        slate_state_free(st);
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_reserve %d outside -1..%d (-1: a quarter "
                           "of the context of %d)", p->n_reserve, n_ctx - 1, n_ctx);
    }
    if (p->context_policy == SLATE_CONTEXT_SUMMARIZE && !p->summarize &&
        (p->n_summary_max < 0 || p->n_summary_max >= n_ctx)) {
        slate_state_free(st);
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_summary_max %d outside 0..%d (0: "
                           "min(128, a quarter of the context of %d))", p->n_summary_max,
                           n_ctx - 1, n_ctx);
    }
    slate_session *ss = slate__calloc(1, sizeof *ss);
    if (!ss) {
        slate_state_free(st);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    }
    ss->model = model;
    ss->state = st;
    ss->tok = slate_model_tokenizer(model);
    ss->tmpl = tmpl;
    ss->policy = p->context_policy;
    ss->n_reserve = p->n_reserve < 0 ? n_ctx / 4 : p->n_reserve;
    /* Auto: a summary of 128 tokens is a few sentences; small contexts get a quarter of theirs so
     * that the request for it (instructions + transcript) still fits. */
    ss->n_summary_max = p->n_summary_max ? p->n_summary_max
                                         : (n_ctx / 4 < 128 ? (n_ctx / 4 > 0 ? n_ctx / 4 : 1) : 128);
    ss->summarize = p->summarize;
    ss->summarize_user = p->summarize_user;
    ss->n_ctx = n_ctx;
    ss->max_query = model->prog.max_query;
    ss->n_text = slate_tokenizer_n_vocab(ss->tok);
    ss->end_turn_id = -1;
    atomic_init(&ss->phase, PHASE_IDLE);
    const char *eot = slate__tmpl_end_of_turn(tmpl);
    if (eot) {
        int32_t id = slate__tok_find(ss->tok, eot, strlen(eot));
        slate__tok_type ty = slate__tok_type_of(ss->tok, id);
        if (id >= 0 && (ty == SLATE__TOKT_CONTROL || ty == SLATE__TOKT_USER_DEFINED))
            ss->end_turn_id = id;
    }
    ss->ids = slate__malloc((size_t)n_ctx * sizeof *ss->ids);
    ss->call_end = slate__malloc((size_t)n_ctx * sizeof *ss->call_end);
    if (!ss->ids || !ss->call_end) s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
    if (!s) s = slate__tmpl_token_text(ss->tok, slate_tokenizer_bos(ss->tok), &ss->bos, err);
    if (!s) s = slate__tmpl_token_text(ss->tok, slate_tokenizer_eos(ss->tok), &ss->eos, err);
    if (!s) s = grow_msgs(ss, err);
    if (s) {
        slate_session_free(ss);
        return s;
    }
    ss->stats.template_name = slate__tmpl_name(tmpl);
    *out = ss;
    return SLATE_OK;
}

void slate_session_free(slate_session *s) {
    if (!s) return;
    free_msgs(s, 0, s->n_msgs);
    slate__free(s->msgs);
    slate__free(s->view);
    slate__free(s->ids);
    slate__free(s->call_end);
    slate__free(s->prompt);
    slate__free(s->bos);
    slate__free(s->eos);
    slate__buf_free(&s->text);
    slate__buf_free(&s->spans);
    slate__buf_free(&s->sys_buf);
    slate_state_free(s->state);
    slate__free(s);
}

const char *slate_session_template(const slate_session *s) {
    return s ? slate__tmpl_name(s->tmpl) : "";
}

/* ---- messages ------------------------------------------------------------------------------ */

slate_status slate_session_add_message(slate_session *s, slate_role role, const char *text,
                                       size_t len, slate_error *err) {
    if (!s || (!text && len))
        return slate__fail(err, SLATE_E_INVALID_ARG, "session must not be NULL and text must "
                           "hold len bytes");
    if ((unsigned)role > SLATE_ROLE_ASSISTANT)
        return slate__fail(err, SLATE_E_INVALID_ARG, "role %d outside 0..2 (system, user, "
                           "assistant)", (int)role);
    if (!acquire(s, PHASE_BUSY))
        return slate__fail(err, SLATE_E_BUSY, "another call is running on this session");
    slate_status st = SLATE_OK;
    if (role == SLATE_ROLE_SYSTEM && s->n_msgs > 0) {
        st = slate__fail(err, SLATE_E_INVALID_ARG, "a system message must come first; the "
                         "conversation already has %d messages", s->n_msgs);
    } else if (s->n_msgs > 0) {
        slate_role want = (s->n_msgs - (has_sys(s) ? 1 : 0)) % 2 == 0 ? SLATE_ROLE_USER
                                                                       : SLATE_ROLE_ASSISTANT;
        if (role != want)
            st = slate__fail(err, SLATE_E_INVALID_ARG, "message %d must be %s (user and "
                             "assistant alternate) but is %s", s->n_msgs, role_str(want),
                             role_str(role));
    } else if (role == SLATE_ROLE_ASSISTANT) {
        st = slate__fail(err, SLATE_E_INVALID_ARG, "the first message must be system or user, "
                         "not assistant");
    }
    if (!st) st = grow_msgs(s, err);
    char *copy = NULL;
    if (!st && !(copy = slate__strndup(text ? text : "", len)))
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory for a message of %zu bytes", len);
    if (!st) s->msgs[s->n_msgs++] = (msg){role, copy, len};
    release(s);
    return st;
}

slate_status slate_session_pop_message(slate_session *s, slate_error *err) {
    if (!s) return slate__fail(err, SLATE_E_INVALID_ARG, "session must not be NULL");
    if (!acquire(s, PHASE_BUSY))
        return slate__fail(err, SLATE_E_BUSY, "another call is running on this session");
    slate_status st = SLATE_OK;
    if (s->n_msgs == 0) {
        st = slate__fail(err, SLATE_E_INVALID_ARG, "the conversation has no message to remove");
    } else {
        s->n_msgs--;
        free_msgs(s, s->n_msgs, s->n_msgs + 1);
        if (s->n_msgs == 0) s->has_summary = false;
    }
    release(s);
    return st;
}

/* The getters take the session like any call (a turn running on another thread changes what
 * they read); the const is cast away only for that flag. */
static bool acquire_ro(const slate_session *s) { return acquire((slate_session *)s, PHASE_BUSY); }
static void release_ro(const slate_session *s) { release((slate_session *)s); }

int32_t slate_session_n_messages(const slate_session *s) {
    if (!s) return 0;
    if (!acquire_ro(s)) return -1;
    int32_t n = s->n_msgs;
    release_ro(s);
    return n;
}

slate_status slate_session_message(const slate_session *s, int32_t index, slate_role *role,
                                   const char **text, size_t *len) {
    if (!s) return SLATE_E_INVALID_ARG;
    if (!acquire_ro(s)) return SLATE_E_BUSY;
    slate_status st = SLATE_E_INVALID_ARG;
    if (index >= 0 && index < s->n_msgs) {
        if (role) *role = s->msgs[index].role;
        if (text) *text = s->msgs[index].text;
        if (len) *len = s->msgs[index].len;
        st = SLATE_OK;
    }
    release_ro(s);
    return st;
}

/* ---- rendering ----------------------------------------------------------------------------- */

/* Fills s->view with the conversation as a turn renders it: drop_turns earlier turns left out
 * and, when summary is not NULL, the system message replaced by the caller's system text plus
 * that summary. Returns the number of messages, or -1 when out of memory. */
static int32_t build_view(slate_session *s, int32_t drop_turns, const char *summary,
                          size_t summary_len) {
    int32_t first = has_sys(s) ? 1 : 0, k = 0;
    if (summary) {
        slate__buf *b = &s->sys_buf;
        b->len = 0;
        b->failed = false;
        if (first) {
            slate__buf_append(b, s->msgs[0].text, s->has_summary ? s->sys_orig_len : s->msgs[0].len);
            if (b->len) slate__buf_append(b, "\n\n", 2);
        }
        slate__buf_append(b, SUMMARY_PREFIX, sizeof SUMMARY_PREFIX - 1);
        slate__buf_append(b, summary, summary_len);
        if (b->failed) return -1;
        s->view[k++] = (slate__chat_msg){SLATE_ROLE_SYSTEM, (const char *)b->data, b->len};
    } else if (first) {
        s->view[k++] = (slate__chat_msg){SLATE_ROLE_SYSTEM, s->msgs[0].text, s->msgs[0].len};
    }
    for (int32_t i = first + 2 * drop_turns; i < s->n_msgs; i++)
        s->view[k++] = (slate__chat_msg){s->msgs[i].role, s->msgs[i].text, s->msgs[i].len};
    return k;
}

/* Renders msgs with the session's template and tokenizes the text into s->prompt. */
static slate_status render_tokens(slate_session *s, const slate__chat_msg *msgs, int32_t n,
                                  int32_t *n_tokens, slate_error *err) {
    s->text.len = s->spans.len = 0;
    s->text.failed = s->spans.failed = false;
    slate_status st = slate__tmpl_render_spans(s->tmpl, msgs, n, s->bos, s->eos, true, &s->text,
                                               &s->spans, err);
    if (st) return st;
    /* The template's special tokens are parsed; the messages' text stays text. */
    const char *text = s->text.data ? (const char *)s->text.data : "";
    const size_t *plain = (const size_t *)s->spans.data;
    size_t n_plain = s->spans.len / (2 * sizeof(size_t)), need = 0;
    st = slate__tok_encode_spans(s->tok, text, s->text.len, SLATE_ENCODE_PARSE_SPECIAL, plain,
                                 n_plain, s->prompt, s->prompt_cap, &need, err);
    if (st == SLATE_E_BUFFER_TOO_SMALL) {
        int32_t *p = slate__realloc(s->prompt, need * sizeof *p);
        if (!p) return slate__fail(err, SLATE_E_NOMEM, "out of memory for %zu prompt ids", need);
        s->prompt = p;
        s->prompt_cap = need;
        st = slate__tok_encode_spans(s->tok, text, s->text.len, SLATE_ENCODE_PARSE_SPECIAL,
                                     plain, n_plain, s->prompt, s->prompt_cap, &need, err);
    }
    if (st) return st;
    if (need == 0)
        return slate__fail(err, SLATE_E_INVALID_ARG, "the conversation renders to no tokens");
    /* A rendering longer than any context is reported as such by the callers' fit check. */
    *n_tokens = need > (size_t)INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)need;
    return SLATE_OK;
}

static slate_status render_view(slate_session *s, int32_t drop, const char *summary,
                                size_t summary_len, int32_t *n_tokens, slate_error *err) {
    int32_t n = build_view(s, drop, summary, summary_len);
    if (n < 0) return slate__fail(err, SLATE_E_NOMEM, "out of memory rendering the chat");
    return render_tokens(s, s->view, n, n_tokens, err);
}

static bool fits(const slate_session *s, int32_t n_tokens) {
    return (int64_t)n_tokens + s->n_reserve <= s->n_ctx;
}

/* ---- one turn: prefill and decode ---------------------------------------------------------- */

typedef struct turn {
    slate_session *s;
    slate_session_event_fn cb;
    void *user;
    bool quiet;        /* the model writing a summary: no events, no on_piece */
    bool cb_cancel;    /* the callback returned false */
    double t0;
    slate__buf reply;  /* the text released so far */
    slate_generate_result res;
} turn;

static void event(turn *t, const slate_session_event *ev) {
    if (!t->quiet && t->cb && !t->cb(t->user, ev)) t->cb_cancel = true;
}

static bool cancelling(const turn *t) {
    return t->cb_cancel || atomic_load(&t->s->phase) == PHASE_CANCEL;
}

/* Makes the state hold prompt[0..n) (n >= 1): reuses the ledger's longest whole-call prefix
 * (at most n - 1 ids) and prefills the rest, in calls of at most max_query ids that also end
 * at each of cuts[0..n_cuts) (ascending positions worth reusing later). *reused: ids kept;
 * *pressure: memory pressure emptied the state (the ledger is synced; stop the turn). Stops
 * early, returning OK, when the turn is cancelled (the ledger then ends before n). */
static slate_status feed(turn *t, const int32_t *p, int32_t n, const int32_t *cuts,
                         int32_t n_cuts, int32_t *reused, bool *pressure, slate_error *err) {
    slate_session *s = t->s;
    *pressure = false;
    *reused = 0;
    /* A state emptied by pressure while idle reports it (E_CANCELLED) at its next call, once:
     * that first call is retried. Pressure during this turn ends it. */
    bool first_call = true;
again:
    ledger_sync(s);
    int32_t lcp = 0;
    while (lcp < s->n_ids && lcp < n - 1 && s->ids[lcp] == p[lcp]) lcp++;
    int32_t keep = 0;
    for (int32_t c = 0; c < s->n_calls && s->call_end[c] <= lcp; c++) keep = s->call_end[c];
    if (keep < s->n_ids) {
        slate_status st = slate_state_truncate(s->state, keep, err);
        if (st == SLATE_E_RELEASED) {
            /* A sliding-window cache no longer holds the rows a query at `keep` would read
             * (the edit reaches back further than the state's rollback reach): prefill the
             * whole prompt instead. */
            st = slate_state_reset(s->state);
            keep = 0;
            if (!st) s->stats.n_reuse_released++;
        }
        if (st == SLATE_E_CANCELLED && first_call) {
            first_call = false;
            goto again;
        }
        if (st == SLATE_E_CANCELLED) {
            ledger_sync(s);
            *pressure = true;
            return SLATE_OK;
        }
        if (st) return st;
        first_call = false;
        ledger_cut(s, keep);
    }
    *reused = keep;
    slate_session_event ev = {.kind = SLATE_SESSION_EVENT_REUSE, .n_prompt_tokens = n,
                              .n_tokens_reused = keep, .n_tokens_prefill = n - keep};
    event(t, &ev);
    for (int32_t i = keep, k = 0; i < n;) {
        if (cancelling(t)) return SLATE_OK;
        int32_t c = n - i < s->max_query ? n - i : s->max_query;
        while (k < n_cuts && cuts[k] <= i) k++;
        if (k < n_cuts && cuts[k] < i + c) c = cuts[k] - i; /* end the call at a boundary */
        slate_status st = slate_state_predict(s->state, p + i, c, NULL, err);
        if (st == SLATE_E_CANCELLED && first_call) {
            first_call = false;
            goto again;
        }
        if (st == SLATE_E_CANCELLED) {
            ledger_sync(s);
            *pressure = true;
            return SLATE_OK;
        }
        if (st) return st;
        first_call = false;
        ledger_push(s, p + i, c);
        i += c;
    }
    return SLATE_OK;
}

static bool is_stop_token(const slate_session *s, const slate_generate_params *gp, int32_t id) {
    if (slate_tokenizer_is_eog(s->tok, id) || id == s->end_turn_id) return true;
    for (int32_t i = 0; i < s->model->n_stop_ids; i++)
        if (s->model->stop_ids[i] == id) return true;
    for (int32_t i = 0; i < gp->n_stop_tokens; i++)
        if (gp->stop_tokens[i] == id) return true;
    return false;
}

/* Releases text through the stop matcher to the reply, the events and on_piece. Returns true
 * if a stop string matched. */
static bool emit(turn *t, const slate_generate_params *gp, slate__stop *stop, char *buf,
                 const char *text, size_t len) {
    size_t n = 0;
    bool hit = slate__stop_feed(stop, text, len, buf, &n);
    if (n) {
        slate__buf_append(&t->reply, buf, n);
        slate_session_event ev = {.kind = SLATE_SESSION_EVENT_TEXT, .text = buf, .len = n};
        event(t, &ev);
        if (!t->quiet && gp->on_piece && !gp->on_piece(gp->user, buf, n)) t->cb_cancel = true;
    }
    return hit;
}

/* Samples the reply after the state holds prompt[0..n_prompt) (prompt ids are recorded for the
 * penalties, as slate_generate does). Fills t->res and t->reply. */
static slate_status decode(turn *t, const slate_generate_params *gp, const int32_t *prompt,
                           int32_t n_prompt, slate_error *err) {
    slate_session *s = t->s;
    slate_generate_result *res = &t->res;
    int32_t n_vocab = s->model->prog.n_vocab;
    slate_sampler *smp = NULL;
    slate_detok *dt = NULL;
    slate__stop *stop = NULL;
    char *buf = NULL;
    slate_status st = slate_sampler_create(&gp->sampler, s->n_text, &smp, err);
    if (!st) st = slate_detok_create(s->tok, &dt, err);
    if (!st) st = slate__stop_create(gp->stop_strings, gp->n_stop, &stop, err);
    if (!st && !(buf = slate__malloc(PIECE_CAP + slate__stop_max_len(stop) + 8)))
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory");
    if (st) goto done;
    for (int32_t i = 0; i < n_prompt; i++) slate_sampler_accept(smp, prompt[i]);
    char piece[PIECE_CAP];
    double t_first = 0;
    for (;;) {
        if (cancelling(t)) {
            res->finish = SLATE_FINISH_CANCELLED;
            break;
        }
        /* The state is idle between our calls, so memory pressure from another thread may
         * reset it there (and then release the pages of its logits). Holding it while its
         * logits are read makes a reset wait for the next predict, which reports it. */
        if (!slate__state_acquire(s->state)) {
            st = slate__fail(err, SLATE_E_BUSY, "another call is running on the session's "
                             "state (it must not be used directly during a turn)");
            goto done;
        }
        const float *logits = slate_state_logits(s->state, NULL);
        if (!logits) {
            /* Critical pressure emptied the state after the last predict: keep the reply so
             * far, as when the next predict reports the reset. */
            slate__state_release(s->state);
            ledger_sync(s);
            res->finish = SLATE_FINISH_MEMORY_PRESSURE;
            break;
        }
        int32_t next;
        st = slate_sampler_sample(smp, logits, s->n_text, &next, err);
        if (!st && gp->dump_logits && res->n_generated < gp->dump_logits_cap)
            memcpy(gp->dump_logits + (size_t)res->n_generated * (size_t)n_vocab, logits,
                   (size_t)n_vocab * sizeof(float));
        slate__state_release(s->state);
        if (st) goto done;
        if (gp->tokens_out && res->n_generated < gp->tokens_cap)
            gp->tokens_out[res->n_generated] = next;
        res->n_generated++;
        if (res->n_generated == 1) {
            t_first = slate__now_ms();
            res->ttft_ms = t_first - t->t0;
            slate_session_event ev = {.kind = SLATE_SESSION_EVENT_FIRST_TOKEN,
                                      .ttft_ms = res->ttft_ms};
            event(t, &ev);
        }
        if (cancelling(t)) { /* a cancel wins over whatever this token would do */
            res->finish = SLATE_FINISH_CANCELLED;
            break;
        }
        if (is_stop_token(s, gp, next)) {
            res->finish = SLATE_FINISH_EOS;
            break;
        }
        size_t len = 0;
        if ((st = slate_detok_push(dt, next, piece, sizeof piece, &len, err))) goto done;
        if (emit(t, gp, stop, buf, piece, len)) {
            res->finish = SLATE_FINISH_STOP_STRING;
            break;
        }
        if (cancelling(t)) {
            res->finish = SLATE_FINISH_CANCELLED;
            break;
        }
        if (gp->n_predict >= 0 && res->n_generated >= gp->n_predict) {
            res->finish = SLATE_FINISH_LENGTH;
            break;
        }
        if (slate_state_length(s->state) >= s->n_ctx) {
            res->finish = SLATE_FINISH_CONTEXT_FULL;
            break;
        }
        st = slate_state_predict(s->state, &next, 1, NULL, err);
        if (st == SLATE_E_CANCELLED) {
            /* Critical memory pressure emptied the state: keep the reply so far. */
            st = SLATE_OK;
            ledger_sync(s);
            res->finish = SLATE_FINISH_MEMORY_PRESSURE;
            break;
        }
        if (st) goto done;
        ledger_push(s, &next, 1);
    }
    if (res->finish != SLATE_FINISH_STOP_STRING && res->finish != SLATE_FINISH_CANCELLED) {
        size_t len = 0, n = 0;
        if (slate_detok_flush(dt, piece, sizeof piece, &len, NULL) == SLATE_OK && len &&
            emit(t, gp, stop, buf, piece, len))
            res->finish = SLATE_FINISH_STOP_STRING;
        if (res->finish != SLATE_FINISH_STOP_STRING) {
            slate__stop_flush(stop, buf, &n);
            if (n) {
                slate__buf_append(&t->reply, buf, n);
                slate_session_event ev = {.kind = SLATE_SESSION_EVENT_TEXT, .text = buf, .len = n};
                event(t, &ev);
                if (!t->quiet && gp->on_piece) gp->on_piece(gp->user, buf, n);
            }
        }
    }
    if (t_first > 0) res->decode_ms = slate__now_ms() - t_first;
    if (t->reply.failed) st = slate__fail(err, SLATE_E_NOMEM, "out of memory for the reply");
done:
    slate__free(buf);
    slate__stop_free(stop);
    slate_detok_free(dt);
    slate_sampler_free(smp);
    return st;
}

/* ---- context policies ---------------------------------------------------------------------- */

/* Earlier summary (if any) and turns [from, n_complete) as "User: ...\nAssistant: ...\n\n",
 * NUL-terminated (the terminator is not counted in t->len). */
static void build_transcript(const slate_session *s, int32_t from, slate__buf *t) {
    t->len = 0;
    t->failed = false;
    if (s->has_summary) {
        size_t skip = s->sys_orig_len + (s->sys_orig_len ? 2 : 0) + sizeof SUMMARY_PREFIX - 1;
        slate__buf_append(t, "Earlier summary: ", 17);
        slate__buf_append(t, s->msgs[0].text + skip, s->msgs[0].len - skip);
        slate__buf_append(t, "\n\n", 2);
    }
    int32_t first = has_sys(s) ? 1 : 0, n = n_complete_turns(s);
    for (int32_t k = from; k < n; k++) {
        const msg *u = &s->msgs[first + 2 * k], *a = &s->msgs[first + 2 * k + 1];
        slate__buf_append(t, "User: ", 6);
        slate__buf_append(t, u->text, u->len);
        slate__buf_append(t, "\nAssistant: ", 12);
        slate__buf_append(t, a->text, a->len);
        slate__buf_append(t, "\n\n", 2);
    }
    slate__buf_append(t, "", 1);
    if (!t->failed) t->len--;
}

static const char *trim_ws(const char *t, size_t *len) {
    size_t a = 0, b = *len;
    while (a < b && (t[a] == ' ' || t[a] == '\n' || t[a] == '\t' || t[a] == '\r')) a++;
    while (b > a && (t[b - 1] == ' ' || t[b - 1] == '\n' || t[b - 1] == '\t' || t[b - 1] == '\r'))
        b--;
    *len = b - a;
    return t + a;
}

/* The summary text already in the system message ("" if none). */
static const char *old_summary(const slate_session *s, size_t *len) {
    if (!s->has_summary) {
        *len = 0;
        return "";
    }
    size_t skip = s->sys_orig_len + (s->sys_orig_len ? 2 : 0) + sizeof SUMMARY_PREFIX - 1;
    *len = s->msgs[0].len - skip;
    return s->msgs[0].text + skip;
}

/* The model summarizes the conversation's earlier turns itself, on the session's state (greedy,
 * at most n_summary_max tokens). The oldest turns are left out of the transcript while the
 * request does not fit. *out: slate__malloc'd summary (trimmed), or NULL with *early set when
 * the turn was cancelled or memory pressure emptied the state meanwhile. */
static slate_status model_summary(slate_session *s, turn *outer, char **out, size_t *out_len,
                                  slate_finish_reason *early, slate_error *err) {
    slate__buf tr = {0}, ask = {0};
    slate__chat_msg req[2];
    int32_t n_tokens = 0, n = n_complete_turns(s);
    slate_status st = SLATE_OK;
    *out = NULL;
    for (int32_t from = 0;; from++) {
        build_transcript(s, from, &tr);
        ask.len = 0;
        slate__buf_append(&ask, SUMMARY_ASK, sizeof SUMMARY_ASK - 1);
        slate__buf_append(&ask, tr.data, tr.len);
        if (ask.failed || tr.failed) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory for the transcript");
            goto done;
        }
        req[0] = (slate__chat_msg){SLATE_ROLE_SYSTEM, SUMMARY_SYSTEM, sizeof SUMMARY_SYSTEM - 1};
        req[1] = (slate__chat_msg){SLATE_ROLE_USER, (const char *)ask.data, ask.len};
        if ((st = render_tokens(s, req, 2, &n_tokens, err))) goto done;
        if ((int64_t)n_tokens + s->n_summary_max <= s->n_ctx) break;
        if (from == n) { /* not even the earlier summary alone fits: keep it as it is */
            size_t len;
            const char *old = old_summary(s, &len);
            if (len == 0) { /* nothing to keep: the turns would be dropped without a summary */
                st = slate__fail(err, SLATE_E_CONTEXT_FULL, "summarize: the context of %d "
                                 "positions cannot hold the request for a summary (%d tokens "
                                 "without any turn) plus %d for the summary; use a larger "
                                 "context, a smaller n_summary_max or the roll policy",
                                 s->n_ctx, n_tokens, s->n_summary_max);
                goto done;
            }
            if (!(*out = slate__strndup(old, len))) st = slate__fail(err, SLATE_E_NOMEM, "out of memory");
            *out_len = len;
            goto done;
        }
    }
    turn t = {.s = s, .quiet = true, .t0 = slate__now_ms()};
    slate_generate_params gp = slate_generate_default_params();
    gp.n_predict = s->n_summary_max;
    gp.sampler.temperature = 0.0f;
    int32_t reused;
    bool pressure;
    st = feed(&t, s->prompt, n_tokens, NULL, 0, &reused, &pressure, err);
    if (!st && !pressure && s->n_ids == n_tokens) st = decode(&t, &gp, s->prompt, n_tokens, err);
    if (!st) {
        if (pressure || t.res.finish == SLATE_FINISH_MEMORY_PRESSURE) {
            *early = SLATE_FINISH_MEMORY_PRESSURE;
        } else if (cancelling(&t) || cancelling(outer)) {
            *early = SLATE_FINISH_CANCELLED;
        } else {
            size_t len = t.reply.len;
            const char *txt = t.reply.data ? trim_ws((const char *)t.reply.data, &len) : "";
            if (!(*out = slate__strndup(txt, len))) st = slate__fail(err, SLATE_E_NOMEM, "out of memory");
            *out_len = len;
        }
    }
    slate__buf_free(&t.reply);
done:
    slate__buf_free(&tr);
    slate__buf_free(&ask);
    return st;
}

/* Replaces msgs[0] (or inserts a system message) by the caller's system text + summary, and
 * drops the first n_turns turns. summary is consumed (freed). */
static slate_status commit_summary(slate_session *s, int32_t n_turns, char *summary,
                                   size_t summary_len, slate_error *err) {
    bool sys = has_sys(s);
    size_t orig = sys ? (s->has_summary ? s->sys_orig_len : s->msgs[0].len) : 0;
    slate__buf b = {0};
    if (sys) slate__buf_append(&b, s->msgs[0].text, orig);
    if (orig) slate__buf_append(&b, "\n\n", 2);
    slate__buf_append(&b, SUMMARY_PREFIX, sizeof SUMMARY_PREFIX - 1);
    slate__buf_append(&b, summary, summary_len);
    slate__buf_append(&b, "", 1);
    slate__free(summary);
    if (b.failed || (!sys && grow_msgs(s, err) != SLATE_OK)) {
        slate__buf_free(&b);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory for the summary");
    }
    int32_t first = sys ? 1 : 0;
    free_msgs(s, first, first + 2 * n_turns);
    memmove(s->msgs + first, s->msgs + first + 2 * n_turns,
            (size_t)(s->n_msgs - first - 2 * n_turns) * sizeof *s->msgs);
    s->n_msgs -= 2 * n_turns;
    if (sys) {
        slate__free(s->msgs[0].text);
    } else {
        memmove(s->msgs + 1, s->msgs, (size_t)s->n_msgs * sizeof *s->msgs);
        s->n_msgs++;
    }
    s->msgs[0] = (msg){SLATE_ROLE_SYSTEM, (char *)b.data, b.len - 1};
    s->has_summary = true;
    s->sys_orig_len = orig;
    return SLATE_OK;
}

/* Renders the conversation into s->prompt (*n_prompt ids) and, when it does not fit with
 * n_reserve positions to spare, applies the context policy. The conversation changes only
 * when the policy succeeds. *early: the turn ended before it began (cancelled, or memory
 * pressure while the model summarized). */
static slate_status fit_conversation(slate_session *s, turn *t, int32_t *n_prompt,
                                     slate_finish_reason *early, slate_error *err) {
    int32_t n0 = 0, n_turns = n_complete_turns(s);
    slate_status st = render_view(s, 0, NULL, 0, &n0, err);
    if (st) return st;
    *n_prompt = n0;
    if (fits(s, n0)) return SLATE_OK;
    if (s->policy == SLATE_CONTEXT_REFUSE)
        return slate__fail(err, SLATE_E_CONTEXT_FULL, "the conversation renders to %d tokens; "
                           "with %d reserved for the reply it needs %lld positions but the "
                           "context has %d (context policy refuse)", n0, s->n_reserve,
                           (long long)n0 + s->n_reserve, s->n_ctx);
    if (s->policy == SLATE_CONTEXT_ROLL) {
        for (int32_t d = 1; d <= n_turns; d++) {
            int32_t nd = 0;
            if ((st = render_view(s, d, NULL, 0, &nd, err))) return st;
            if (!fits(s, nd)) continue;
            int32_t first = has_sys(s) ? 1 : 0;
            free_msgs(s, first, first + 2 * d);
            memmove(s->msgs + first, s->msgs + first + 2 * d,
                    (size_t)(s->n_msgs - first - 2 * d) * sizeof *s->msgs);
            s->n_msgs -= 2 * d;
            s->stats.n_turns_dropped += d;
            *n_prompt = nd;
            slate_session_event ev = {.kind = SLATE_SESSION_EVENT_TRUNCATED,
                                      .n_turns_dropped = d, .n_tokens_dropped = n0 - nd};
            event(t, &ev);
            return SLATE_OK;
        }
    } else if (n_turns > 0) {
        char *sum = NULL;
        size_t sum_len = 0;
        if (s->summarize) {
            slate__buf tr = {0};
            build_transcript(s, 0, &tr);
            if (tr.failed) {
                slate__buf_free(&tr);
                return slate__fail(err, SLATE_E_NOMEM, "out of memory for the transcript");
            }
            char *r = s->summarize(s->summarize_user, (const char *)tr.data, tr.len);
            slate__buf_free(&tr);
            if (!r)
                return slate__fail(err, SLATE_E_CANCELLED, "the summarize callback returned "
                                   "NULL: the turn was not run (the conversation is unchanged)");
            sum_len = strlen(r);
            sum = slate__strndup(r, sum_len);
            free(r); /* the callback's malloc(), by contract */
            if (!sum) return slate__fail(err, SLATE_E_NOMEM, "out of memory for the summary");
        } else {
            if ((st = model_summary(s, t, &sum, &sum_len, early, err))) return st;
            if (!sum) return SLATE_OK; /* *early says why */
        }
        int32_t n1 = 0;
        st = render_view(s, n_turns, sum, sum_len, &n1, err);
        if (!st && !fits(s, n1))
            st = slate__fail(err, SLATE_E_CONTEXT_FULL, "after summarizing all %d earlier turns "
                             "the conversation still renders to %d tokens; with %d reserved for "
                             "the reply it needs %lld positions but the context has %d", n_turns,
                             n1, s->n_reserve, (long long)n1 + s->n_reserve, s->n_ctx);
        if (st) {
            slate__free(sum);
            return st;
        }
        slate_session_event ev = {.kind = SLATE_SESSION_EVENT_SUMMARIZED, .text = sum,
                                  .len = sum_len, .n_turns_dropped = n_turns,
                                  .n_tokens_dropped = n0 - n1};
        event(t, &ev);
        if ((st = commit_summary(s, n_turns, sum, sum_len, err))) return st;
        s->stats.n_turns_dropped += n_turns;
        s->stats.n_summaries++;
        *n_prompt = n1;
        return SLATE_OK;
    }
    int32_t last = 0;
    if ((st = render_view(s, n_turns, NULL, 0, &last, err))) return st;
    return slate__fail(err, SLATE_E_CONTEXT_FULL, "the last message does not fit: without the %d "
                       "earlier turns the conversation renders to %d tokens; with %d reserved "
                       "for the reply it needs %lld positions but the context has %d", n_turns,
                       last, s->n_reserve, (long long)last + s->n_reserve, s->n_ctx);
}

/* The token length of view[0..k) rendered without a generation prompt, if those tokens are a
 * prefix of prompt[0..n) (tokenization need not be prefix-stable: then 0). */
static slate_status prefix_tokens(slate_session *s, int32_t k, const int32_t *prompt, int32_t n,
                                  int32_t *out, slate_error *err) {
    *out = 0;
    slate__buf text = {0}, spans = {0};
    slate_status st = slate__tmpl_render_spans(s->tmpl, s->view, k, s->bos, s->eos, false, &text,
                                               &spans, err);
    size_t got = 0;
    int32_t *ids = NULL;
    if (!st && text.len) {
        if (!(ids = slate__malloc((size_t)n * sizeof *ids))) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory");
        } else {
            slate_status e = slate__tok_encode_spans(
                s->tok, (const char *)text.data, text.len, SLATE_ENCODE_PARSE_SPECIAL,
                (const size_t *)spans.data, spans.len / (2 * sizeof(size_t)), ids, (size_t)n,
                &got, NULL);
            if (e == SLATE_E_NOMEM) st = slate__fail(err, SLATE_E_NOMEM, "out of memory");
            else if (e == SLATE_OK && got < (size_t)n && memcmp(ids, prompt, got * sizeof *ids) == 0)
                *out = (int32_t)got;
        }
    }
    slate__free(ids);
    slate__buf_free(&text);
    slate__buf_free(&spans);
    return st;
}

/* Where this turn's prefill should end a call so that a later prompt can reuse exactly up to
 * there (reuse keeps whole calls only): after the system message (a new conversation with the
 * same system message, or another client of a server) and after the last complete turn (the
 * user edits or regenerates the last message). feed() ignores cuts inside the reused part. */
static slate_status reuse_points(slate_session *s, int32_t n_prompt, int32_t cuts[2],
                                 int32_t *n_cuts, slate_error *err) {
    *n_cuts = 0;
    int32_t n_view = build_view(s, 0, NULL, 0);
    if (n_view < 0) return slate__fail(err, SLATE_E_NOMEM, "out of memory rendering the chat");
    int32_t ks[2] = {has_sys(s) ? 1 : 0, n_view - 1}, prev = 0;
    for (int i = 0; i < 2; i++) {
        if (ks[i] < 1 || (i == 1 && ks[1] == ks[0])) continue;
        int32_t c = 0;
        slate_status st = prefix_tokens(s, ks[i], s->prompt, n_prompt, &c, err);
        if (st) return st;
        if (c > prev && c < n_prompt) cuts[(*n_cuts)++] = prev = c;
    }
    return SLATE_OK;
}

/* ---- the turn ------------------------------------------------------------------------------ */

slate_status slate_session_generate(slate_session *s, const slate_generate_params *params,
                                    slate_session_event_fn cb, void *user,
                                    slate_generate_result *result, slate_error *err) {
    if (!s) return slate__fail(err, SLATE_E_INVALID_ARG, "session must not be NULL");
    slate_generate_params dp = slate_generate_default_params();
    const slate_generate_params *gp = params ? params : &dp;
    if (gp->n_predict == 0)
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_predict 0: must be >= 1, or < 0 for "
                           "until the context is full");
    if (gp->n_stop < 0 || (gp->n_stop > 0 && !gp->stop_strings) || gp->n_stop_tokens < 0 ||
        (gp->n_stop_tokens > 0 && !gp->stop_tokens) || gp->tokens_cap < 0 ||
        (gp->tokens_cap > 0 && !gp->tokens_out))
        return slate__fail(err, SLATE_E_INVALID_ARG, "stop strings, stop tokens or tokens_out: "
                           "count and array disagree");
    if (gp->dump_logits_cap < 0 || (gp->dump_logits_cap > 0) != (gp->dump_logits != NULL))
        return slate__fail(err, SLATE_E_INVALID_ARG, "dump_logits and dump_logits_cap disagree "
                           "(cap %d): give both (the rows the buffer holds, >= 1) or neither",
                           (int)gp->dump_logits_cap);
    /* A reply that ran past the end of its turn would break the conversation's structure
     * (the next turn renders after it): refused rather than silently ignored. */
    if (gp->ignore_eos)
        return slate__fail(err, SLATE_E_INVALID_ARG, "ignore_eos does not apply to session turns: "
                           "a reply ends at the template's end of turn (use slate_generate to "
                           "run past it)");
    if (!acquire(s, PHASE_RUNNING))
        return slate__fail(err, SLATE_E_BUSY, "another call is running on this session");
    turn t = {.s = s, .cb = cb, .user = user, .t0 = slate__now_ms()};
    slate_status st = SLATE_OK;
    if (s->n_msgs == 0 || s->msgs[s->n_msgs - 1].role != SLATE_ROLE_USER) {
        st = slate__fail(err, SLATE_E_INVALID_ARG, "the last message must be the user's; the "
                         "conversation %s", s->n_msgs ? "ends with an assistant or system message"
                                                      : "is empty");
        goto out;
    }
    int32_t n_prompt = 0, reused = 0;
    slate_finish_reason early = SLATE_FINISH_NONE;
    if ((st = fit_conversation(s, &t, &n_prompt, &early, err))) goto out;
    double t_fill = slate__now_ms();
    bool pressure = false;
    if (early == SLATE_FINISH_NONE) {
        int32_t cuts[2], n_cuts = 0;
        if ((st = reuse_points(s, n_prompt, cuts, &n_cuts, err))) goto out;
        st = feed(&t, s->prompt, n_prompt, cuts, n_cuts, &reused, &pressure, err);
        if (st) goto out;
        t.res.n_prompt = s->n_ids > reused ? s->n_ids - reused : 0;
        t.res.prefill_ms = slate__now_ms() - t_fill;
        if (pressure) early = SLATE_FINISH_MEMORY_PRESSURE;
        else if (s->n_ids < n_prompt) early = SLATE_FINISH_CANCELLED;
    }
    if (early == SLATE_FINISH_NONE) {
        if ((st = decode(&t, gp, s->prompt, n_prompt, err))) goto out;
    } else {
        t.res.finish = early;
    }
    char *copy = slate__strndup(t.reply.data ? (const char *)t.reply.data : "", t.reply.len);
    if (!copy || (st = grow_msgs(s, err))) {
        slate__free(copy);
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory for the reply");
        goto out;
    }
    s->msgs[s->n_msgs++] = (msg){SLATE_ROLE_ASSISTANT, copy, t.reply.len};
    s->stats.n_turns++;
    if (reused > 0) s->stats.n_reuse_hits++;
    s->stats.n_tokens_reused += reused;
    s->stats.n_tokens_prefilled += t.res.n_prompt;
    s->stats.n_tokens_generated += t.res.n_generated;
    s->stats.last_ttft_ms = t.res.ttft_ms;
    slate_session_event ev = {.kind = SLATE_SESSION_EVENT_FINISH, .finish = t.res.finish,
                              .ttft_ms = t.res.ttft_ms};
    event(&t, &ev);
    if (result) *result = t.res;
out:
    slate__buf_free(&t.reply);
    release(s);
    return st;
}

slate_status slate_session_cancel(slate_session *s) {
    if (!s) return SLATE_E_INVALID_ARG;
    int running = PHASE_RUNNING;
    atomic_compare_exchange_strong(&s->phase, &running, PHASE_CANCEL);
    return SLATE_OK;
}

slate_status slate_session_reset(slate_session *s) {
    if (!s) return SLATE_E_INVALID_ARG;
    if (!acquire(s, PHASE_BUSY)) return SLATE_E_BUSY;
    free_msgs(s, 0, s->n_msgs);
    s->n_msgs = 0;
    s->has_summary = false;
    const char *name = s->stats.template_name;
    memset(&s->stats, 0, sizeof s->stats);
    s->stats.template_name = name;
    release(s);
    return SLATE_OK;
}

slate_status slate_session_get_stats(const slate_session *s, slate_session_stats *out) {
    if (!s || !out) return SLATE_E_INVALID_ARG;
    if (!acquire_ro(s)) return SLATE_E_BUSY;
    *out = s->stats;
    out->n_messages = s->n_msgs;
    /* Memory pressure may have emptied an idle state since the last turn. */
    int32_t len = slate_state_length(s->state);
    out->n_ledger_tokens = s->n_ids < len ? s->n_ids : len;
    out->n_ctx = s->n_ctx;
    /* Rows a sliding window released (before first_position) hold nothing. */
    size_t used = 0;
    for (int32_t i = 0; i < slate_state_n_tensors(s->state); i++) {
        slate_tensor_info ti;
        if (slate_state_tensor_info(s->state, i, &ti) == SLATE_OK &&
            ti.first_position < out->n_ledger_tokens)
            used += ti.row_bytes * (size_t)(out->n_ledger_tokens - ti.first_position);
    }
    out->kv_bytes_used = used;
    release_ro(s);
    return SLATE_OK;
}

slate_state *slate_session_state(slate_session *s) { return s ? s->state : NULL; }

slate_status slate_session_ledger(const slate_session *s, const int32_t **ids, int32_t *n) {
    if (!s || !ids || !n) return SLATE_E_INVALID_ARG;
    if (!acquire_ro(s)) return SLATE_E_BUSY;
    *ids = s->ids;
    *n = s->n_ids;
    release_ro(s);
    return SLATE_OK;
}

slate_status slate_session_set_ledger(slate_session *s, const int32_t *ids, int32_t n,
                                      slate_error *err) {
    if (!s || (!ids && n))
        return slate__fail(err, SLATE_E_INVALID_ARG, "session must not be NULL and ids must hold "
                           "n ids");
    if (!acquire(s, PHASE_BUSY))
        return slate__fail(err, SLATE_E_BUSY, "another call is running on this session");
    slate_status st = SLATE_OK;
    int32_t len = slate_state_length(s->state), n_vocab = s->model->prog.n_vocab;
    if (n != len) {
        st = slate__fail(err, SLATE_E_INVALID_ARG, "the ledger has %d ids but the state holds "
                         "%d positions", n, len);
    } else {
        for (int32_t i = 0; i < n && !st; i++)
            if (ids[i] < 0 || ids[i] >= n_vocab)
                st = slate__fail(err, SLATE_E_INVALID_ARG, "ledger id %d (at index %d) is outside "
                                 "the vocabulary 0..%d", ids[i], i, n_vocab - 1);
    }
    if (!st) {
        if (n) memcpy(s->ids, ids, (size_t)n * sizeof *ids);
        s->n_ids = n;
        s->n_calls = 0;
        if (n) s->call_end[s->n_calls++] = n;
    }
    release(s);
    return st;
}

/* ---- save / load --------------------------------------------------------------------------- */

/* The session's part of a state file (slate_state_extra.user), little-endian:
 *   "SLCV"  u32 version (1)
 *   u32 n_calls, then n_calls x u32 call_end   (the ledger's ids travel as extra.tokens)
 *   u8 has_summary, u64 sys_orig_len
 *   u32 n_msgs, then per message: u8 role, u32 len, len bytes of UTF-8
 * Everything is validated on load as untrusted input. */
static const char CONV_MAGIC[4] = {'S', 'L', 'C', 'V'};
enum { CONV_VERSION = 1 };
#define CONV_MAX_MSGS (1 << 24) /* far above any conversation; bounds a corrupt count */

slate_status slate_session_save(slate_session *s, const char *path, slate_error *err) {
    if (!s || !path)
        return slate__fail(err, SLATE_E_INVALID_ARG, "session and path must not be NULL");
    if (!acquire(s, PHASE_BUSY))
        return slate__fail(err, SLATE_E_BUSY, "another call is running on this session");
    ledger_sync(s);
    slate__buf b = {0};
    slate__buf_append(&b, CONV_MAGIC, 4);
    slate__buf_u32(&b, CONV_VERSION);
    slate__buf_u32(&b, (uint32_t)s->n_calls);
    for (int32_t i = 0; i < s->n_calls; i++) slate__buf_u32(&b, (uint32_t)s->call_end[i]);
    uint8_t hs = s->has_summary ? 1 : 0;
    slate__buf_append(&b, &hs, 1);
    slate__buf_u64(&b, s->sys_orig_len);
    slate__buf_u32(&b, (uint32_t)s->n_msgs);
    for (int32_t i = 0; i < s->n_msgs; i++) {
        uint8_t role = (uint8_t)s->msgs[i].role;
        slate__buf_append(&b, &role, 1);
        slate__buf_u32(&b, (uint32_t)s->msgs[i].len);
        slate__buf_append(&b, s->msgs[i].text, s->msgs[i].len);
    }
    slate_status st;
    if (b.failed) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory serializing the conversation");
    } else {
        slate_state_extra x;
        memset(&x, 0, sizeof x);
        x.tokens = s->ids;
        x.n_tokens = s->n_ids;
        x.user = b.data;
        x.user_len = b.len;
        st = slate_state_save(s->state, path, &x, err);
    }
    slate__buf_free(&b);
    release(s);
    return st;
}

/* Parses and validates a conversation blob against the ledger length n_ids. On success the
 * new messages and call boundaries are in *msgs_out / call_end (caller-owned). */
static slate_status parse_conversation(const slate_session *s, const uint8_t *data, size_t len,
                                       int32_t n_ids, int32_t *call_end, int32_t *n_calls,
                                       msg **msgs_out, int32_t *n_msgs_out, bool *has_summary,
                                       size_t *sys_orig_len, const char *path, slate_error *err) {
    slate__rd r = {data, len, 0, false};
    const uint8_t *magic = slate__rd_bytes(&r, 4);
    if (!magic || memcmp(magic, CONV_MAGIC, 4) != 0)
        return slate__fail_at(err, SLATE_E_FORMAT, 0, "'%s' holds a state but no conversation "
                              "(not written by slate_session_save)", path);
    uint32_t version = slate__rd_u32(&r);
    if (version != CONV_VERSION)
        return slate__fail_at(err, version > CONV_VERSION ? SLATE_E_UNSUPPORTED : SLATE_E_FORMAT,
                              4, "'%s': conversation version %u, this build reads %d", path,
                              version, CONV_VERSION);
    uint32_t nc = slate__rd_u32(&r);
    if (r.failed || nc > (uint32_t)n_ids || (n_ids > 0 && nc == 0))
        return slate__fail_at(err, SLATE_E_FORMAT, 8, "'%s': %u ledger calls for %d ids", path,
                              nc, n_ids);
    for (uint32_t i = 0; i < nc; i++) {
        call_end[i] = (int32_t)slate__rd_u32(&r);
        if (r.failed || call_end[i] <= (i ? call_end[i - 1] : 0) || call_end[i] > n_ids ||
            (i == nc - 1 && call_end[i] != n_ids))
            return slate__fail_at(err, SLATE_E_FORMAT, 12 + 4 * (uint64_t)i, "'%s': ledger call "
                                  "%u ends at %d: call ends must rise to the ledger length %d",
                                  path, i, r.failed ? -1 : call_end[i], n_ids);
    }
    *n_calls = (int32_t)nc;
    *has_summary = slate__rd_u8(&r) != 0;
    uint64_t orig = slate__rd_u64(&r);
    uint32_t n = slate__rd_u32(&r);
    if (r.failed || n > CONV_MAX_MSGS)
        return slate__fail_at(err, SLATE_E_FORMAT, r.pos, "'%s': %u messages (at most %d)", path,
                              n, CONV_MAX_MSGS);
    msg *m = slate__calloc(n ? n : 1, sizeof *m);
    if (!m) return slate__fail(err, SLATE_E_NOMEM, "out of memory for %u messages", n);
    slate_status st = SLATE_OK;
    uint32_t i = 0, first = 0;
    for (; i < n; i++) {
        size_t at = r.pos;
        uint8_t role = slate__rd_u8(&r);
        uint32_t mlen = slate__rd_u32(&r);
        const uint8_t *text = r.failed ? NULL : slate__rd_bytes(&r, mlen);
        slate_role want = i == 0 ? (role == SLATE_ROLE_SYSTEM ? SLATE_ROLE_SYSTEM : SLATE_ROLE_USER)
                          : (i - first) % 2 == 0 ? SLATE_ROLE_USER : SLATE_ROLE_ASSISTANT;
        if (!text || role != want) {
            st = slate__fail_at(err, SLATE_E_FORMAT, at, "'%s': message %u: %s", path, i,
                                !text ? "runs past the end of the conversation"
                                      : "role out of order (system first, then user and "
                                        "assistant alternating)");
            break;
        }
        if (!(m[i].text = slate__strndup((const char *)text, mlen))) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory for message %u", i);
            break;
        }
        m[i].role = (slate_role)role;
        m[i].len = mlen;
        if (i == 0 && role == SLATE_ROLE_SYSTEM) first = 1;
    }
    if (!st && r.pos != r.len)
        st = slate__fail_at(err, SLATE_E_FORMAT, r.pos, "'%s': %zu bytes after the last message",
                            path, r.len - r.pos);
    if (!st && *has_summary) {
        /* The summary layout commit_summary writes: orig text, "\n\n" if any, the prefix. */
        size_t need = (size_t)orig + (orig ? 2 : 0) + sizeof SUMMARY_PREFIX - 1;
        if (n == 0 || m[0].role != SLATE_ROLE_SYSTEM || orig > m[0].len || need > m[0].len ||
            memcmp(m[0].text + need - (sizeof SUMMARY_PREFIX - 1), SUMMARY_PREFIX,
                   sizeof SUMMARY_PREFIX - 1) != 0)
            st = slate__fail(err, SLATE_E_FORMAT, "'%s': the summary marker does not match the "
                             "system message", path);
    }
    if (st) {
        for (uint32_t k = 0; k < i && k < n; k++) slate__free(m[k].text);
        slate__free(m);
        return st;
    }
    (void)s;
    *sys_orig_len = (size_t)orig;
    *msgs_out = m;
    *n_msgs_out = (int32_t)n;
    return SLATE_OK;
}

slate_status slate_session_load(slate_session *s, const char *path, slate_error *err) {
    if (!s || !path)
        return slate__fail(err, SLATE_E_INVALID_ARG, "session and path must not be NULL");
    if (!acquire(s, PHASE_BUSY))
        return slate__fail(err, SLATE_E_BUSY, "another call is running on this session");
    int32_t *ids = NULL, *calls = NULL;
    uint8_t *blob = NULL;
    msg *m = NULL;
    int32_t n_msgs = 0, n_calls = 0;
    /* First ask for the sizes: buffers with no room make the load stop with
     * E_BUFFER_TOO_SMALL, the state unchanged (NULL buffers would skip the fields instead). */
    int32_t no_ids[1];
    uint8_t no_blob[1];
    slate_state_extra_out xo;
    memset(&xo, 0, sizeof xo);
    xo.tokens = no_ids;
    xo.user = no_blob;
    slate_status st = slate_state_load(s->state, path, &xo, err);
    bool loaded = st == SLATE_OK;
    if (st == SLATE_E_BUFFER_TOO_SMALL) {
        int32_t n_tok = xo.n_tokens;
        size_t n_user = xo.user_len;
        ids = slate__malloc((size_t)(n_tok ? n_tok : 1) * sizeof *ids);
        calls = slate__malloc((size_t)(n_tok ? n_tok : 1) * sizeof *calls);
        blob = slate__malloc(n_user ? n_user : 1);
        if (!ids || !calls || !blob) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory for a conversation of %d ids "
                             "and %zu bytes", n_tok, n_user);
            goto out;
        }
        memset(&xo, 0, sizeof xo);
        xo.tokens = ids;
        xo.tokens_cap = n_tok;
        xo.user = blob;
        xo.user_cap = n_user;
        st = slate_state_load(s->state, path, &xo, err);
        loaded = st == SLATE_OK;
    }
    if (st) goto out;
    /* From here on the state holds the file's cache: a failure empties it. */
    if (xo.user_len < 4 || memcmp(blob, CONV_MAGIC, 4) != 0) {
        st = slate__fail(err, SLATE_E_FORMAT, "'%s' holds a state but no conversation (not "
                         "written by slate_session_save)", path);
        goto out;
    }
    if (xo.n_tokens != slate_state_length(s->state)) {
        st = slate__fail(err, SLATE_E_FORMAT, "'%s': the ledger has %d ids but the state %d "
                         "positions", path, xo.n_tokens, slate_state_length(s->state));
        goto out;
    }
    for (int32_t i = 0; i < xo.n_tokens && !st; i++)
        if (ids[i] < 0 || ids[i] >= s->model->prog.n_vocab)
            st = slate__fail(err, SLATE_E_FORMAT, "'%s': ledger id %d (at index %d) is outside "
                             "the vocabulary 0..%d", path, ids[i], i, s->model->prog.n_vocab - 1);
    bool has_summary = false;
    size_t sys_orig = 0;
    if (!st)
        st = parse_conversation(s, blob ? blob : (const uint8_t *)"", xo.user_len, xo.n_tokens,
                                calls, &n_calls, &m, &n_msgs, &has_summary, &sys_orig, path, err);
    if (st) goto out;
    if ((st = reserve_msgs(s, n_msgs + 1, err))) goto out;
    free_msgs(s, 0, s->n_msgs);
    memcpy(s->msgs, m, (size_t)n_msgs * sizeof *m);
    s->n_msgs = n_msgs;
    s->has_summary = has_summary;
    s->sys_orig_len = sys_orig;
    if (xo.n_tokens) memcpy(s->ids, ids, (size_t)xo.n_tokens * sizeof *ids);
    if (n_calls) memcpy(s->call_end, calls, (size_t)n_calls * sizeof *calls);
    s->n_ids = xo.n_tokens;
    s->n_calls = n_calls;
    const char *name = s->stats.template_name;
    memset(&s->stats, 0, sizeof s->stats);
    s->stats.template_name = name;
    slate__free(m);
    m = NULL;
    n_msgs = 0;
out:
    if (st && loaded) { /* the cache came from the file but the conversation did not */
        slate_state_reset(s->state);
        s->n_ids = 0;
        s->n_calls = 0;
    }
    if (m) {
        for (int32_t i = 0; i < n_msgs; i++) slate__free(m[i].text);
        slate__free(m);
    }
    slate__free(ids);
    slate__free(calls);
    slate__free(blob);
    release(s);
    return st;
}
