/* test_session.c - chat sessions on small random packages (tests/unit/tinymodel.h: a byte-level
 * SPM vocabulary without a chat template, so every session names its template): cross-turn
 * reuse that is bit-identical to replaying the ledger's calls, the ledger itself, the three
 * context policies, cancellation from another thread, statistics, misuse and allocation
 * failures. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "gen/session.h"
#include "kernels/kernels.h"
#include "plan/model.h"
#include "tinymodel.h"

typedef struct fx {
    slate_model *big;   /* dim 576: one-row and many-row matmuls take different SIMD paths */
    slate_model *wide;  /* context 640: room for the model to be asked for a summary */
    slate_model *small; /* dim 32 */
} fx;

static slate_model *open_tiny(const char *name, const tm_opts *o) {
    const char *path = tu_tmp(name);
    slate_error e;
    slate_status s = tm_write(path, o, &e);
    if (s) fail_msg("tm_write: %s", e.message);
    slate_model *m = NULL;
    if ((s = slate_model_open(path, NULL, &m, &e))) fail_msg("open: %s", e.message);
    return m;
}

static int setup(void **st) {
    fx *f = calloc(1, sizeof *f);
    tm_opts o = tm_default();
    o.n_ctx = 256;
    o.max_query = 16;
    f->small = open_tiny("small.slate", &o);
    /* The request for a model-written summary (instructions + transcript, byte-level tokens)
     * alone is ~280 tokens: more than small's context. */
    o.n_ctx = 640;
    f->wide = open_tiny("wide.slate", &o);
    o.n_ctx = 256;
    /* Wider than the SIMD matmuls' 512-input block: a row computed in a one-row call differs
     * in its last bits from the same row computed in a many-row call, so a cache that mixed
     * rows of different calls would show in the logits. */
    o.n_layers = 1;
    o.dim = 576;
    o.ffn_dim = 640;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    f->big = open_tiny("big.slate", &o);
    *st = f;
    return 0;
}

static int teardown(void **st) {
    fx *f = *st;
    assert_int_equal(slate_model_close(f->small), SLATE_OK);
    assert_int_equal(slate_model_close(f->big), SLATE_OK);
    assert_int_equal(slate_model_close(f->wide), SLATE_OK);
    free(f);
    return 0;
}

/* ---- helpers -------------------------------------------------------------------------------- */

typedef struct ev_log {
    int n_reuse, n_truncated, n_summarized, n_first, n_text, n_finish;
    slate_session_event reuse, truncated, summarized;
    char summary[256];
    slate_finish_reason finish;
    char text[8192];
    size_t text_len;
    bool stop_on_text; /* return false at the first TEXT event */
} ev_log;

static bool on_event(void *user, const slate_session_event *e) {
    ev_log *l = user;
    switch (e->kind) {
    case SLATE_SESSION_EVENT_REUSE: l->n_reuse++, l->reuse = *e; break;
    case SLATE_SESSION_EVENT_TRUNCATED: l->n_truncated++, l->truncated = *e; break;
    case SLATE_SESSION_EVENT_SUMMARIZED:
        l->n_summarized++, l->summarized = *e;
        snprintf(l->summary, sizeof l->summary, "%.*s", (int)e->len, e->text);
        break;
    case SLATE_SESSION_EVENT_FIRST_TOKEN: l->n_first++; break;
    case SLATE_SESSION_EVENT_TEXT:
        l->n_text++;
        if (l->text_len + e->len < sizeof l->text) {
            memcpy(l->text + l->text_len, e->text, e->len);
            l->text_len += e->len;
        }
        if (l->stop_on_text) return false;
        break;
    case SLATE_SESSION_EVENT_FINISH: l->n_finish++, l->finish = e->finish; break;
    }
    return true;
}

static slate_session *mk(slate_model *m, slate_context_policy policy, int32_t n_reserve) {
    slate_session_params p = slate_session_default_params();
    p.template_name = "chatml";
    p.context_policy = policy;
    p.n_reserve = n_reserve;
    slate_session *s = NULL;
    slate_error e;
    if (slate_session_create(m, &p, &s, &e)) fail_msg("session_create: %s", e.message);
    return s;
}

static void say(slate_session *s, slate_role role, const char *text) {
    slate_error e;
    if (slate_session_add_message(s, role, text, strlen(text), &e))
        fail_msg("add_message: %s", e.message);
}

static slate_generate_params greedy(int32_t n_predict) {
    slate_generate_params gp = slate_generate_default_params();
    gp.n_predict = n_predict;
    gp.sampler.temperature = 0.0f;
    return gp;
}

static slate_status turn(slate_session *s, int32_t n_predict, ev_log *log,
                         slate_generate_result *res, slate_error *e) {
    slate_generate_params gp = greedy(n_predict);
    ev_log tmp;
    if (!log) log = &tmp;
    memset(log, 0, sizeof *log);
    slate_generate_result r;
    return slate_session_generate(s, &gp, on_event, log, res ? res : &r, e);
}

static void ok_turn(slate_session *s, int32_t n_predict, ev_log *log, slate_generate_result *res) {
    slate_error e;
    slate_status st = turn(s, n_predict, log, res, &e);
    if (st) fail_msg("turn: %s: %s", slate_status_name(st), e.message);
}

static void assert_ledger_matches_state(slate_session *s) {
    const int32_t *ids;
    int32_t n;
    assert_int_equal(slate_session_ledger(s, &ids, &n), SLATE_OK);
    assert_int_equal(n, slate_state_length(slate_session_state(s)));
    const int32_t *ends;
    int32_t nc;
    slate__session_calls(s, &ends, &nc);
    if (n == 0) {
        assert_int_equal(nc, 0);
        return;
    }
    assert_true(nc > 0);
    assert_int_equal(ends[nc - 1], n);
    for (int32_t i = 1; i < nc; i++) assert_true(ends[i] > ends[i - 1]);
}

/* A fresh state fed the ledger's ids with the ledger's call boundaries must hold exactly what
 * the session's state holds: its logits are compared bit for bit. */
static void assert_replay_is_bit_identical(slate_model *m, slate_session *s) {
    assert_ledger_matches_state(s);
    const int32_t *ids, *ends;
    int32_t n, nc;
    slate_session_ledger(s, &ids, &n);
    slate__session_calls(s, &ends, &nc);
    slate_state_params sp = slate_state_default_params();
    sp.n_ctx = slate_state_n_ctx(slate_session_state(s));
    slate_state *st = NULL;
    assert_int_equal(slate_state_create(m, &sp, &st, NULL), SLATE_OK);
    for (int32_t c = 0, a = 0; c < nc; a = ends[c++])
        assert_int_equal(slate_state_predict(st, ids + a, ends[c] - a, NULL, NULL), SLATE_OK);
    const float *want = slate_state_logits(st, NULL), *got = slate_state_logits(slate_session_state(s), NULL);
    assert_non_null(want);
    assert_non_null(got);
    int32_t V = m->prog.n_vocab;
    for (int32_t i = 0; i < V; i++)
        if (memcmp(&want[i], &got[i], sizeof(float)) != 0)
            fail_msg("logit %d differs: session %.9g, replay %.9g", i, got[i], want[i]);
    slate_state_free(st);
}

/* ---- reuse ---------------------------------------------------------------------------------- */

static void reused_turn_is_bit_identical_to_a_fresh_state_fed_the_same_calls(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->big, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_SYSTEM, "You-are-terse.");
    say(s, SLATE_ROLE_USER, "Tell-me-about-the-sea.");
    ev_log l1, l2;
    slate_generate_result r1, r2;
    ok_turn(s, 6, &l1, &r1);
    assert_int_equal(l1.reuse.n_tokens_reused, 0);
    assert_replay_is_bit_identical(f->big, s);
    say(s, SLATE_ROLE_USER, "And-the-sky?");
    slate_generate_params gp = greedy(1);
    /* ignore_eos would let the reply run past its turn: refused, the conversation unchanged. */
    gp.ignore_eos = true;
    slate_error e;
    assert_int_equal(slate_session_generate(s, &gp, NULL, NULL, NULL, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "ignore_eos does not apply to session turns"));
    assert_int_equal(slate_session_n_messages(s), 4);
    gp.ignore_eos = false;
    float *dump = calloc((size_t)f->big->prog.n_vocab, sizeof(float));
    gp.dump_logits = dump;
    gp.dump_logits_cap = 1;
    memset(&l2, 0, sizeof l2);
    assert_int_equal(slate_session_generate(s, &gp, on_event, &l2, &r2, NULL), SLATE_OK);
    /* Turn 2 reuses turn 1's prompt and the reply tokens it fed one call each. */
    assert_true(l2.reuse.n_tokens_reused >= l1.reuse.n_prompt_tokens);
    assert_int_equal(l2.reuse.n_tokens_prefill, l2.reuse.n_prompt_tokens - l2.reuse.n_tokens_reused);
    assert_int_equal(r2.n_prompt, l2.reuse.n_tokens_prefill);
    assert_replay_is_bit_identical(f->big, s);
    /* The state's logits are the ones the reply's first token was drawn from. */
    assert_memory_equal(dump, slate_state_logits(slate_session_state(s), NULL),
                        (size_t)f->big->prog.n_vocab * sizeof(float));
    slate_session_stats st;
    assert_int_equal(slate_session_get_stats(s, &st), SLATE_OK);
    assert_int_equal(st.n_reuse_hits, 1);
    assert_int_equal(st.n_tokens_reused, l2.reuse.n_tokens_reused);
    free(dump);
    slate_session_free(s);
}

/* The shared prefix of the two renderings ends one token past a call boundary: only the whole
 * calls before it are kept. Every text here is free of spaces, so one byte is one token. With
 * a one-row remainder, keeping part of a call would also show in the replay (a one-row call
 * takes the other SIMD path). */
static void reuse_keeps_only_whole_calls(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->big, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_SYSTEM, "S");
    say(s, SLATE_ROLE_USER, "abcdefghijklmnopqrstuvwxyz0123456789");
    ok_turn(s, 2, NULL, NULL);
    assert_int_equal(slate_session_reset(s), SLATE_OK);
    say(s, SLATE_ROLE_SYSTEM, "S");
    say(s, SLATE_ROLE_USER, "ZYXWVUTSRQ");
    ev_log l;
    ok_turn(s, 1, &l, NULL);
    /* The first prompt was fed as calls [0,16) [16,31) [31,47) [47,63) ...: 16-token chunks
     * that also end after the system message "<|im_start|>system\nS<|im_end|>\n" (31 bytes).
     * The renderings share 48 tokens (up to "<|im_start|>user\n"), so [0,47) is kept. */
    assert_int_equal(l.reuse.n_tokens_reused, 47);
    const int32_t *ends;
    int32_t nc;
    slate__session_calls(s, &ends, &nc);
    assert_true(nc >= 4);
    assert_int_equal(ends[0], 16);
    assert_int_equal(ends[1], 31);
    assert_int_equal(ends[2], 47);
    assert_replay_is_bit_identical(f->big, s);
    slate_session_free(s);
}

/* With the scalar reference kernels a row's result does not depend on its call, so a reused
 * turn equals even a cold prefill of the ledger in plain max-query chunks. */
static void with_reference_kernels_reuse_equals_a_cold_prefill(void **stp) {
    fx *f = *stp;
    const slate__kernels *ref = slate__kernels_by_name("ref");
    assert_non_null(ref);
    const slate__kernels *saved = f->big->k;
    f->big->k = ref;
    slate_session *s = mk(f->big, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_USER, "Hello-there.");
    ok_turn(s, 5, NULL, NULL);
    say(s, SLATE_ROLE_USER, "More-please.");
    ev_log l;
    ok_turn(s, 1, &l, NULL);
    assert_true(l.reuse.n_tokens_reused > 0);
    const int32_t *ids;
    int32_t n;
    slate_session_ledger(s, &ids, &n);
    slate_state *cold = NULL;
    assert_int_equal(slate_state_create(f->big, NULL, &cold, NULL), SLATE_OK);
    int32_t q = f->big->prog.max_query;
    for (int32_t i = 0; i < n; i += q)
        assert_int_equal(slate_state_predict(cold, ids + i, n - i < q ? n - i : q, NULL, NULL),
                         SLATE_OK);
    assert_memory_equal(slate_state_logits(cold, NULL), slate_state_logits(slate_session_state(s), NULL),
                        (size_t)f->big->prog.n_vocab * sizeof(float));
    slate_state_free(cold);
    slate_session_free(s);
    f->big->k = saved;
}

static void ledger_holds_the_prompt_and_all_but_the_last_sampled_token(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_USER, "Count-to-five.");
    int32_t out[8];
    slate_generate_params gp = greedy(5);
    gp.tokens_out = out;
    gp.tokens_cap = 8;
    ev_log l;
    memset(&l, 0, sizeof l);
    slate_generate_result r;
    assert_int_equal(slate_session_generate(s, &gp, on_event, &l, &r, NULL), SLATE_OK);
    assert_true(r.n_generated >= 1);
    const int32_t *ids;
    int32_t n;
    slate_session_ledger(s, &ids, &n);
    assert_int_equal(n, l.reuse.n_prompt_tokens + r.n_generated - 1);
    for (int32_t i = 0; i < r.n_generated - 1; i++)
        assert_int_equal(ids[l.reuse.n_prompt_tokens + i], out[i]);
    assert_ledger_matches_state(s);
    assert_int_equal(l.n_first, 1);
    assert_int_equal(l.n_finish, 1);
    assert_int_equal(l.finish, r.finish);
    /* The reply became the assistant message, exactly as streamed. */
    assert_int_equal(slate_session_n_messages(s), 2);
    slate_role role;
    const char *text;
    size_t len;
    assert_int_equal(slate_session_message(s, 1, &role, &text, &len), SLATE_OK);
    assert_int_equal(role, SLATE_ROLE_ASSISTANT);
    assert_int_equal(len, l.text_len);
    assert_memory_equal(text, l.text, len);
    slate_session_free(s);
}

static void statistics_count_turns_reuse_and_cache_bytes(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    slate_session_stats st;
    assert_int_equal(slate_session_get_stats(s, &st), SLATE_OK);
    assert_string_equal(st.template_name, "chatml");
    assert_string_equal(slate_session_template(s), "chatml");
    assert_int_equal(st.n_turns, 0);
    assert_int_equal(st.n_ctx, 256);
    say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
    say(s, SLATE_ROLE_USER, "One.");
    ok_turn(s, 3, NULL, NULL);
    assert_int_equal(slate_session_get_stats(s, &st), SLATE_OK);
    assert_int_equal(st.n_turns, 1);
    assert_int_equal(st.n_reuse_hits, 0);
    assert_true(st.last_ttft_ms > 0);
    say(s, SLATE_ROLE_USER, "Two.");
    ok_turn(s, 3, NULL, NULL);
    assert_int_equal(slate_session_get_stats(s, &st), SLATE_OK);
    assert_int_equal(st.n_turns, 2);
    assert_int_equal(st.n_messages, 5);
    assert_int_equal(st.n_reuse_hits, 1);
    assert_true(st.n_tokens_reused > 0);
    assert_int_equal(st.n_ledger_tokens, slate_state_length(slate_session_state(s)));
    slate_tensor_info ti;
    size_t row = 0;
    for (int32_t i = 0; i < slate_state_n_tensors(slate_session_state(s)); i++) {
        assert_int_equal(slate_state_tensor_info(slate_session_state(s), i, &ti), SLATE_OK);
        row += ti.row_bytes;
    }
    assert_int_equal(st.kv_bytes_used, row * (size_t)st.n_ledger_tokens);
    assert_true(st.n_tokens_generated >= 2);
    slate_session_free(s);
}

static void reset_forgets_the_conversation_but_reuses_the_cache(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
    say(s, SLATE_ROLE_USER, "One.");
    ok_turn(s, 3, NULL, NULL);
    /* A prefill call ended right after the system message, "<|im_start|>system\nBe-brief.
     * <|im_end|>\n" (39 tokens), so another conversation can keep exactly that much. */
    const int32_t *ends;
    int32_t nc;
    bool at_system_end = false;
    slate__session_calls(s, &ends, &nc);
    for (int32_t i = 0; i < nc; i++) at_system_end |= ends[i] == 39;
    assert_true(at_system_end);
    assert_int_equal(slate_session_reset(s), SLATE_OK);
    slate_session_stats st;
    slate_session_get_stats(s, &st);
    assert_int_equal(st.n_messages, 0);
    assert_int_equal(st.n_turns, 0);
    assert_int_equal(st.n_reuse_hits, 0);
    say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
    say(s, SLATE_ROLE_USER, "Something-else.");
    ev_log l;
    ok_turn(s, 2, &l, NULL);
    assert_true(l.reuse.n_tokens_reused > 0); /* the system message */
    slate_session_get_stats(s, &st);
    assert_int_equal(st.n_reuse_hits, 1);
    assert_int_equal(st.n_messages, 3);
    assert_replay_is_bit_identical(f->small, s);
    slate_session_free(s);
}

static void a_state_changed_behind_the_session_is_resynced(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_USER, "One.");
    ok_turn(s, 4, NULL, NULL);
    slate_state *st = slate_session_state(s);
    assert_int_equal(slate_state_truncate(st, slate_state_length(st) - 3, NULL), SLATE_OK);
    say(s, SLATE_ROLE_USER, "Two.");
    ok_turn(s, 2, NULL, NULL);
    assert_replay_is_bit_identical(f->small, s);
    /* set_ledger: the caller restored the state and says what it holds. */
    const int32_t *ids;
    int32_t n;
    slate_session_ledger(s, &ids, &n);
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    memcpy(copy, ids, (size_t)n * sizeof *copy);
    slate_error e;
    assert_int_equal(slate_session_set_ledger(s, copy, n - 1, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "positions"));
    copy[0] = 100000;
    assert_int_equal(slate_session_set_ledger(s, copy, n, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "vocabulary"));
    copy[0] = ids[0];
    assert_int_equal(slate_session_set_ledger(s, copy, n, &e), SLATE_OK);
    const int32_t *ends;
    int32_t nc;
    slate__session_calls(s, &ends, &nc);
    assert_int_equal(nc, 1);
    free(copy);
    slate_session_free(s);
}

/* ---- context policies ----------------------------------------------------------------------- */

/* Each user message is ~60 tokens with the template; the context is 256 with 40 reserved. */
static const char *user_text(int i) {
    static char b[128];
    snprintf(b, sizeof b, "Message-number-%02d:-the-quick-brown-fox-jumps-over-the-dog.", i);
    return b;
}

static void roll_drops_oldest_whole_turns_and_keeps_the_system_message(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_ROLL, 40);
    say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
    ev_log l;
    int i = 0;
    for (; i < 12; i++) {
        say(s, SLATE_ROLE_USER, user_text(i));
        ok_turn(s, 6, &l, NULL);
        assert_ledger_matches_state(s);
        if (l.n_truncated) break;
    }
    assert_true(i < 12);
    assert_true(l.truncated.n_turns_dropped >= 1);
    assert_true(l.truncated.n_tokens_dropped > 0);
    assert_true(l.reuse.n_prompt_tokens + 40 <= 256);
    slate_session_stats st;
    slate_session_get_stats(s, &st);
    assert_int_equal(st.n_turns_dropped, l.truncated.n_turns_dropped);
    /* System first, then whole turns: the newest ones, in order, ending with this reply. */
    int32_t n = slate_session_n_messages(s);
    assert_int_equal(n % 2, 1);
    slate_role role;
    const char *text;
    size_t len;
    slate_session_message(s, 0, &role, &text, &len);
    assert_int_equal(role, SLATE_ROLE_SYSTEM);
    assert_string_equal(text, "Be-brief.");
    int kept = (n - 1) / 2;
    assert_int_equal(kept + l.truncated.n_turns_dropped, i + 1);
    for (int k = 0; k < kept; k++) {
        slate_session_message(s, 1 + 2 * k, &role, &text, &len);
        assert_int_equal(role, SLATE_ROLE_USER);
        assert_string_equal(text, user_text(i + 1 - kept + k));
        slate_session_message(s, 2 + 2 * k, &role, &text, &len);
        assert_int_equal(role, SLATE_ROLE_ASSISTANT);
    }
    slate_session_free(s);
}

static void refuse_returns_context_full_with_the_numbers_and_changes_nothing(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 40);
    say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
    slate_error e;
    slate_status st = SLATE_OK;
    int i = 0;
    for (; i < 12 && st == SLATE_OK; i++) {
        say(s, SLATE_ROLE_USER, user_text(i));
        st = turn(s, 6, NULL, NULL, &e);
    }
    assert_int_equal(st, SLATE_E_CONTEXT_FULL);
    assert_non_null(strstr(e.message, "renders to"));
    assert_non_null(strstr(e.message, "with 40 reserved"));
    assert_non_null(strstr(e.message, "the context has 256"));
    assert_non_null(strstr(e.message, "refuse"));
    /* Unchanged: the user message is still last, every earlier turn is there. */
    assert_int_equal(slate_session_n_messages(s), 1 + 2 * (i - 1) + 1);
    slate_role role;
    slate_session_message(s, slate_session_n_messages(s) - 1, &role, NULL, NULL);
    assert_int_equal(role, SLATE_ROLE_USER);
    assert_ledger_matches_state(s);
    assert_int_equal(slate_session_pop_message(s, NULL), SLATE_OK);
    assert_int_equal(slate_session_n_messages(s), 1 + 2 * (i - 1));
    slate_session_free(s);
}

typedef struct sum_cb {
    int calls;
    char transcripts[3][4096];
    bool fail;
} sum_cb;

static char *summarize(void *user, const char *transcript, size_t len) {
    sum_cb *c = user;
    if (c->fail) return NULL;
    assert_int_equal(strlen(transcript), len);
    if (c->calls < 3) snprintf(c->transcripts[c->calls], sizeof c->transcripts[0], "%s", transcript);
    char b[32];
    snprintf(b, sizeof b, "SUMMARY-%d", ++c->calls);
    return strdup(b);
}

static slate_session *mk_summarizing(slate_model *m, sum_cb *c, int32_t n_summary_max) {
    slate_session_params p = slate_session_default_params();
    p.template_name = "chatml";
    p.context_policy = SLATE_CONTEXT_SUMMARIZE;
    p.n_reserve = 40;
    p.summarize = c ? summarize : NULL;
    p.summarize_user = c;
    p.n_summary_max = n_summary_max;
    slate_session *s = NULL;
    slate_error e;
    if (slate_session_create(m, &p, &s, &e)) fail_msg("%s", e.message);
    return s;
}

/* Runs turns until one summarizes; returns that turn's index. */
static int run_until_summary(slate_session *s, int from, ev_log *l) {
    for (int i = from; i < from + 12; i++) {
        say(s, SLATE_ROLE_USER, user_text(i));
        ok_turn(s, 6, l, NULL);
        assert_ledger_matches_state(s);
        if (l->n_summarized) return i;
    }
    fail_msg("no summary within 12 turns");
    return -1;
}

static void summarize_with_a_callback_replaces_earlier_turns_by_the_summary(void **stp) {
    fx *f = *stp;
    sum_cb c;
    memset(&c, 0, sizeof c);
    slate_session *s = mk_summarizing(f->small, &c, 16);
    say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
    ev_log l;
    int i = run_until_summary(s, 0, &l);
    assert_int_equal(c.calls, 1);
    assert_string_equal(l.summary, "SUMMARY-1");
    assert_int_equal(l.summarized.n_turns_dropped, i);
    assert_true(l.summarized.n_tokens_dropped > 0);
    char want[256];
    snprintf(want, sizeof want, "User: %s\nAssistant: ", user_text(0));
    assert_true(strncmp(c.transcripts[0], want, strlen(want)) == 0);
    /* System message kept, summary after it; then this turn only. */
    assert_int_equal(slate_session_n_messages(s), 3);
    slate_role role;
    const char *text;
    size_t len;
    slate_session_message(s, 0, &role, &text, &len);
    assert_int_equal(role, SLATE_ROLE_SYSTEM);
    assert_string_equal(text, "Be-brief.\n\nSummary of the earlier conversation: SUMMARY-1");
    assert_int_equal(len, strlen(text));
    slate_session_message(s, 1, &role, &text, &len);
    assert_string_equal(text, user_text(i));
    /* The next summary sees the first one and replaces it; the caller's system text stays. */
    run_until_summary(s, i + 1, &l);
    assert_int_equal(c.calls, 2);
    assert_true(strncmp(c.transcripts[1], "Earlier summary: SUMMARY-1\n\nUser: ", 34) == 0);
    slate_session_message(s, 0, &role, &text, &len);
    assert_string_equal(text, "Be-brief.\n\nSummary of the earlier conversation: SUMMARY-2");
    slate_session_stats st;
    slate_session_get_stats(s, &st);
    assert_int_equal(st.n_summaries, 2);
    slate_session_free(s);

    /* Without a system message the summary becomes one. */
    memset(&c, 0, sizeof c);
    s = mk_summarizing(f->small, &c, 16);
    run_until_summary(s, 0, &l);
    slate_session_message(s, 0, &role, &text, &len);
    assert_int_equal(role, SLATE_ROLE_SYSTEM);
    assert_string_equal(text, "Summary of the earlier conversation: SUMMARY-1");
    slate_session_free(s);
}

static void summarize_callback_returning_null_fails_the_turn_cleanly(void **stp) {
    fx *f = *stp;
    sum_cb c;
    memset(&c, 0, sizeof c);
    c.fail = true;
    slate_session *s = mk_summarizing(f->small, &c, 16);
    slate_error e;
    slate_status st = SLATE_OK;
    int i = 0;
    for (; i < 12 && st == SLATE_OK; i++) {
        say(s, SLATE_ROLE_USER, user_text(i));
        st = turn(s, 6, NULL, NULL, &e);
    }
    assert_int_equal(st, SLATE_E_CANCELLED);
    assert_non_null(strstr(e.message, "summarize callback returned NULL"));
    assert_int_equal(slate_session_n_messages(s), 2 * (i - 1) + 1);
    assert_ledger_matches_state(s);
    slate_session_free(s);
}

static void summarize_without_a_callback_asks_the_model(void **stp) {
    fx *f = *stp;
    slate_session *s = mk_summarizing(f->wide, NULL, 16);
    say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
    ev_log l;
    run_until_summary(s, 0, &l);
    slate_session_stats st;
    slate_session_get_stats(s, &st);
    assert_int_equal(st.n_summaries, 1);
    assert_int_equal(slate_session_n_messages(s), 3);
    const char *text;
    slate_session_message(s, 0, NULL, &text, NULL);
    assert_true(strncmp(text, "Be-brief.\n\nSummary of the earlier conversation: ", 48) == 0);
    assert_string_equal(text + 48, l.summary);
    /* The first summary has no earlier one to fall back on, and a request that does not fit
     * fails the turn (the test below): succeeding means the model was asked. A random tiny
     * model may write nothing but whitespace or EOS, so the text itself is not checked. */
    slate_session_free(s);
}

/* A summary request that cannot fit next to n_summary_max tokens fails the turn with the numbers
 * (it used to drop the turns with an empty summary); the conversation is kept as it was. */
static void summarize_too_big_for_the_context_fails_instead_of_dropping_turns(void **stp) {
    fx *f = *stp;
    slate_model_info mi;
    assert_int_equal(slate_model_get_info(f->small, &mi), SLATE_OK);
    slate_session *s = mk_summarizing(f->small, NULL, mi.n_ctx - 2);
    slate_error e;
    say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
    slate_status st = SLATE_OK;
    int i = 0;
    for (; i < 12 && !st; i++) {
        say(s, SLATE_ROLE_USER, user_text(i));
        st = turn(s, 6, NULL, NULL, &e);
    }
    assert_int_equal(st, SLATE_E_CONTEXT_FULL);
    assert_non_null(strstr(e.message, "cannot hold the request for a summary"));
    slate_session_stats ss;
    slate_session_get_stats(s, &ss);
    assert_int_equal(ss.n_summaries, 0);
    /* Every earlier turn is still there (system + i - 1 whole turns + the failed user message). */
    assert_int_equal(slate_session_n_messages(s), 1 + 2 * (i - 1) + 1);
    slate_session_free(s);
}

/* n_summary_max 0 (the default) is min(128, n_ctx / 4): the model's own summary then fits a
 * small context without the caller choosing a number. */
static void summarize_default_budget_fits_a_small_context(void **stp) {
    fx *f = *stp;
    assert_int_equal(slate_session_default_params().n_summary_max, 0);
    slate_session *s = mk_summarizing(f->wide, NULL, 0);
    say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
    ev_log l;
    run_until_summary(s, 0, &l);
    slate_session_stats st;
    slate_session_get_stats(s, &st);
    assert_int_equal(st.n_summaries, 1);
    slate_session_free(s);
}

/* ---- cancellation --------------------------------------------------------------------------- */

typedef struct canceller {
    slate_session *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started, done;
    slate_status busy_status;
} canceller;

static bool block_until_cancelled(void *user, const slate_session_event *e) {
    canceller *c = user;
    if (e->kind != SLATE_SESSION_EVENT_FIRST_TOKEN) return true;
    pthread_mutex_lock(&c->mu);
    c->started = true;
    pthread_cond_broadcast(&c->cv);
    while (!c->done) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    return true;
}

static void *cancel_thread(void *arg) {
    canceller *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->started) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    c->busy_status = slate_session_add_message(c->s, SLATE_ROLE_USER, "x", 1, NULL);
    slate_session_cancel(c->s);
    pthread_mutex_lock(&c->mu);
    c->done = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static void cancel_from_another_thread_ends_the_turn_as_cancelled(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_USER, "Go-on-forever.");
    canceller c = {.s = s};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    pthread_t th;
    pthread_create(&th, NULL, cancel_thread, &c);
    slate_generate_params gp = greedy(-1);
    slate_generate_result r;
    assert_int_equal(slate_session_generate(s, &gp, block_until_cancelled, &c, &r, NULL), SLATE_OK);
    pthread_join(th, NULL);
    assert_int_equal(c.busy_status, SLATE_E_BUSY);
    assert_int_equal(r.finish, SLATE_FINISH_CANCELLED);
    assert_int_equal(r.n_generated, 1);
    assert_int_equal(slate_session_n_messages(s), 2); /* the (empty) reply was kept */
    assert_ledger_matches_state(s);
    /* A cancel while no turn runs is not held for the next one. */
    assert_int_equal(slate_session_cancel(s), SLATE_OK);
    say(s, SLATE_ROLE_USER, "Again.");
    ok_turn(s, 3, NULL, &r);
    assert_int_not_equal(r.finish, SLATE_FINISH_CANCELLED);
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
    slate_session_free(s);
}

static void callback_returning_false_cancels_and_keeps_the_text_so_far(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_USER, "Talk.");
    slate_generate_params gp = greedy(20);
    ev_log l;
    memset(&l, 0, sizeof l);
    l.stop_on_text = true;
    slate_generate_result r;
    assert_int_equal(slate_session_generate(s, &gp, on_event, &l, &r, NULL), SLATE_OK);
    if (l.n_text) { /* the model may end before any text; then there was nothing to cancel */
        assert_int_equal(r.finish, SLATE_FINISH_CANCELLED);
        const char *text;
        size_t len;
        slate_session_message(s, 1, NULL, &text, &len);
        assert_int_equal(len, l.text_len);
    }
    assert_ledger_matches_state(s);
    slate_session_free(s);
}

/* The getters take the session like any call: from the event callback of a running turn (or
 * another thread) they get E_BUSY instead of reading what the turn is changing. */
typedef struct getter_log {
    slate_session *s;
    int n_events, n_busy;
} getter_log;
static bool call_getters(void *user, const slate_session_event *e) {
    (void)e;
    getter_log *g = user;
    slate_session_stats st;
    const int32_t *ids;
    int32_t n;
    const char *text;
    size_t len;
    g->n_events++;
    g->n_busy += slate_session_get_stats(g->s, &st) == SLATE_E_BUSY;
    g->n_busy += slate_session_ledger(g->s, &ids, &n) == SLATE_E_BUSY;
    g->n_busy += slate_session_message(g->s, 0, NULL, &text, &len) == SLATE_E_BUSY;
    g->n_busy += slate_session_n_messages(g->s) == -1;
    return true;
}

static void getters_during_a_turn_return_busy(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_USER, "Talk.");
    slate_generate_params gp = greedy(4);
    getter_log g = {s, 0, 0};
    slate_generate_result r;
    assert_int_equal(slate_session_generate(s, &gp, call_getters, &g, &r, NULL), SLATE_OK);
    assert_true(g.n_events > 0);
    assert_int_equal(g.n_busy, 4 * g.n_events);
    /* Between turns they answer. */
    slate_session_stats st;
    assert_int_equal(slate_session_get_stats(s, &st), SLATE_OK);
    assert_int_equal(slate_session_n_messages(s), 2);
    slate_session_free(s);
}

/* ---- memory pressure ------------------------------------------------------------------------ */

static bool pressure_at_first_token(void *user, const slate_session_event *e) {
    if (e->kind == SLATE_SESSION_EVENT_FIRST_TOKEN)
        assert_int_equal(slate_model_pressure(user, SLATE_PRESSURE_CRITICAL, NULL, NULL), SLATE_OK);
    return true;
}

static void critical_pressure_during_a_reply_ends_it_and_the_next_turn_recomputes(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_USER, "Count-to-five.");
    slate_generate_params gp = greedy(8);
    slate_generate_result r;
    assert_int_equal(slate_session_generate(s, &gp, pressure_at_first_token, f->small, &r, NULL),
                     SLATE_OK);
    assert_int_equal(r.finish, SLATE_FINISH_MEMORY_PRESSURE);
    assert_int_equal(r.n_generated, 1);
    assert_int_equal(slate_session_n_messages(s), 2);
    assert_ledger_matches_state(s);
    assert_int_equal(slate_state_length(slate_session_state(s)), 0);
    say(s, SLATE_ROLE_USER, "Again.");
    ev_log l;
    ok_turn(s, 3, &l, &r);
    assert_int_equal(l.reuse.n_tokens_reused, 0);
    assert_int_not_equal(r.finish, SLATE_FINISH_MEMORY_PRESSURE);
    assert_replay_is_bit_identical(f->small, s);
    slate_session_free(s);
}

static void critical_pressure_between_turns_costs_only_the_reuse(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_USER, "One.");
    ok_turn(s, 3, NULL, NULL);
    assert_int_equal(slate_model_pressure(f->small, SLATE_PRESSURE_CRITICAL, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_length(slate_session_state(s)), 0);
    say(s, SLATE_ROLE_USER, "Two.");
    ev_log l;
    slate_generate_result r;
    ok_turn(s, 3, &l, &r); /* the state's one-time E_CANCELLED report is absorbed */
    assert_int_equal(l.reuse.n_tokens_reused, 0);
    assert_int_not_equal(r.finish, SLATE_FINISH_MEMORY_PRESSURE);
    assert_replay_is_bit_identical(f->small, s);
    slate_session_free(s);
}

static void quiet_pressure(void *user, const slate_pressure_event *ev) {
    (void)user;
    (void)ev;
}

typedef struct hammer {
    slate_model *m;
    slate_state *st;
    atomic_bool stop;
} hammer;

/* Resets the state whenever it is idle with logits: right after one of the session's
 * predicts, the moment a reset from another thread does the most harm. */
static void *hammer_pressure(void *arg) {
    hammer *h = arg;
    while (!atomic_load(&h->stop)) {
        if (atomic_load(&h->st->busy) != SLATE__IDLE || atomic_load(&h->st->n_logit_rows) == 0)
            continue;
        slate_model_pressure(h->m, SLATE_PRESSURE_CRITICAL, NULL, NULL);
    }
    return NULL;
}

/* Critical pressure from another thread (the watcher, another part of the program) may empty
 * the session's state whenever no predict is running on it: between the prefill and the
 * first sample, or between two decode steps. The turn must end as MEMORY_PRESSURE, never fail
 * with an internal error because the logits it was about to sample from are gone. */
static void critical_pressure_from_another_thread_never_fails_a_turn(void **stp) {
    (void)stp;
    tm_opts o = tm_default();
    o.n_ctx = 256;
    o.max_query = 16;
    const char *path = tu_tmp("hammered.slate");
    assert_int_equal(tm_write(path, &o, NULL), SLATE_OK);
    slate_model_params mp = slate_model_default_params();
    mp.on_pressure = quiet_pressure; /* thousands of resets: no stderr line for each */
    mp.n_threads = 1;
    slate_model *m = NULL;
    assert_int_equal(slate_model_open(path, &mp, &m, NULL), SLATE_OK);
    slate_session *s = mk(m, SLATE_CONTEXT_ROLL, 16);
    hammer h = {m, slate_session_state(s), false};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, hammer_pressure, &h), 0);
    /* 200 turns, and more (up to 5000, ~12 s) while no reset has yet landed in a turn: alone,
     * every turn meets one; with other tests sharing both cores, a fresh build once saw none
     * in 200, which says nothing about the code. */
    int n_pressure = 0;
    for (int i = 0; i < 200 || (n_pressure == 0 && i < 5000); i++) {
        say(s, SLATE_ROLE_USER, "Hi.");
        slate_generate_params gp = greedy(2);
        /* The largest penalty window: the sampler made after the prefill allocates and clears
         * 4 MiB for it, which widens the window between the last predict and the first sample
         * to about a millisecond. */
        gp.sampler.repeat_last_n = 1 << 20;
        slate_generate_result r;
        slate_error e;
        slate_status st = slate_session_generate(s, &gp, NULL, NULL, &r, &e);
        if (st) {
            atomic_store(&h.stop, true);
            pthread_join(th, NULL);
            fail_msg("turn %d: %s: %s", i, slate_status_name(st), e.message);
        }
        n_pressure += r.finish == SLATE_FINISH_MEMORY_PRESSURE;
    }
    atomic_store(&h.stop, true);
    pthread_join(th, NULL);
    assert_true(n_pressure > 0);
    slate_session_free(s);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

/* ---- save / load ---------------------------------------------------------------------------- */

static void saved_and_loaded_session_continues_bit_identically(void **stp) {
    fx *f = *stp;
    slate_session *a = mk(f->big, SLATE_CONTEXT_REFUSE, 8);
    say(a, SLATE_ROLE_SYSTEM, "Be-brief.");
    say(a, SLATE_ROLE_USER, "One.");
    ok_turn(a, 4, NULL, NULL);
    say(a, SLATE_ROLE_USER, "Two.");
    ok_turn(a, 4, NULL, NULL);
    const char *path = tu_tmp("chat.state");
    slate_error e;
    if (slate_session_save(a, path, &e)) fail_msg("save: %s", e.message);
    slate_session *b = mk(f->big, SLATE_CONTEXT_REFUSE, 8);
    say(b, SLATE_ROLE_USER, "to-be-replaced");
    if (slate_session_load(b, path, &e)) fail_msg("load: %s", e.message);
    assert_int_equal(slate_session_n_messages(b), slate_session_n_messages(a));
    for (int32_t i = 0; i < slate_session_n_messages(a); i++) {
        slate_role ra, rb;
        const char *ta, *tb;
        size_t la, lb;
        slate_session_message(a, i, &ra, &ta, &la);
        slate_session_message(b, i, &rb, &tb, &lb);
        assert_int_equal(ra, rb);
        assert_int_equal(la, lb);
        assert_memory_equal(ta, tb, la);
    }
    const int32_t *ia, *ib, *ca, *cb;
    int32_t na, nb, nca, ncb;
    slate_session_ledger(a, &ia, &na);
    slate_session_ledger(b, &ib, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ia, ib, (size_t)na * sizeof *ia);
    slate__session_calls(a, &ca, &nca);
    slate__session_calls(b, &cb, &ncb);
    assert_int_equal(nca, ncb);
    assert_memory_equal(ca, cb, (size_t)nca * sizeof *ca);
    /* Both continue the same way, to the bit. */
    int32_t ta[8], tb[8];
    slate_generate_params gp = greedy(6);
    slate_generate_result resa, resb;
    ev_log la, lb;
    say(a, SLATE_ROLE_USER, "Three.");
    say(b, SLATE_ROLE_USER, "Three.");
    gp.tokens_out = ta;
    gp.tokens_cap = 8;
    memset(&la, 0, sizeof la);
    if (slate_session_generate(a, &gp, on_event, &la, &resa, &e)) fail_msg("%s", e.message);
    gp.tokens_out = tb;
    memset(&lb, 0, sizeof lb);
    assert_int_equal(slate_session_generate(b, &gp, on_event, &lb, &resb, NULL), SLATE_OK);
    assert_int_equal(lb.reuse.n_tokens_reused, la.reuse.n_tokens_reused);
    assert_true(lb.reuse.n_tokens_reused > 0);
    assert_int_equal(resa.n_generated, resb.n_generated);
    assert_memory_equal(ta, tb, (size_t)resa.n_generated * sizeof *ta);
    assert_memory_equal(slate_state_logits(slate_session_state(a), NULL),
                        slate_state_logits(slate_session_state(b), NULL),
                        (size_t)f->big->prog.n_vocab * sizeof(float));
    slate_session_free(a);
    slate_session_free(b);
}

static void loading_a_file_without_a_conversation_is_refused(void **stp) {
    fx *f = *stp;
    slate_session *s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    say(s, SLATE_ROLE_USER, "One.");
    ok_turn(s, 3, NULL, NULL);
    slate_error e;
    assert_int_equal(slate_session_load(s, tu_tmp("missing.state"), &e), SLATE_E_IO);
    assert_int_equal(slate_session_n_messages(s), 2);
    assert_ledger_matches_state(s);
    assert_true(slate_state_length(slate_session_state(s)) > 0);
    /* A plain state file: its cache is read, then refused for lack of a conversation. */
    const char *plain = tu_tmp("plain.state");
    assert_int_equal(slate_state_save(slate_session_state(s), plain, NULL, &e), SLATE_OK);
    assert_int_equal(slate_session_load(s, plain, &e), SLATE_E_FORMAT);
    if (!strstr(e.message, "no conversation")) fail_msg("%s", e.message);
    assert_int_equal(slate_session_n_messages(s), 2);
    assert_ledger_matches_state(s);
    /* A conversation part from a future version. */
    static const uint8_t future[] = {'S', 'L', 'C', 'V', 9, 0, 0, 0};
    slate_state_extra x;
    memset(&x, 0, sizeof x);
    x.user = future;
    x.user_len = sizeof future;
    assert_int_equal(slate_state_save(slate_session_state(s), plain, &x, &e), SLATE_OK);
    assert_int_equal(slate_session_load(s, plain, &e), SLATE_E_UNSUPPORTED);
    assert_non_null(strstr(e.message, "version 9"));
    /* Messages out of order. */
    slate__buf b = {0};
    slate__buf_append(&b, "SLCV", 4);
    slate__buf_u32(&b, 1);
    slate__buf_u32(&b, 0); /* no calls: the empty ledger below */
    slate__buf_append(&b, "", 1);
    slate__buf_u64(&b, 0);
    slate__buf_u32(&b, 1);
    uint8_t role = SLATE_ROLE_ASSISTANT;
    slate__buf_append(&b, &role, 1);
    slate__buf_u32(&b, 1);
    slate__buf_append(&b, "x", 1);
    x.user = b.data;
    x.user_len = b.len;
    assert_int_equal(slate_state_reset(slate_session_state(s)), SLATE_OK);
    assert_int_equal(slate_state_save(slate_session_state(s), plain, &x, &e), SLATE_OK);
    assert_int_equal(slate_session_load(s, plain, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "message 0: role out of order"));
    assert_int_equal(slate_session_n_messages(s), 2);
    slate__buf_free(&b);
    say(s, SLATE_ROLE_USER, "Still-works.");
    ok_turn(s, 2, NULL, NULL);
    assert_ledger_matches_state(s);
    slate_session_free(s);
}

/* ---- refusals and misuse -------------------------------------------------------------------- */

static void a_model_without_a_usable_template_is_refused_listing_the_names(void **stp) {
    fx *f = *stp;
    assert_null(slate_model_chat_template(f->small));
    assert_null(slate_model_chat_template(NULL));
    slate_session *s = (slate_session *)1;
    slate_error e;
    assert_int_equal(slate_session_create(f->small, NULL, &s, &e), SLATE_E_UNSUPPORTED);
    assert_null(s);
    assert_non_null(strstr(e.message, "no chat template"));
    assert_non_null(strstr(e.message, "chatml, qwen3, llama3, llama31, llama2, mistral, gemma, "
                                      "phi3, zephyr, mistral-v1, phi3-v1"));
    slate_session_params p = slate_session_default_params();
    p.template_name = "vicuna";
    assert_int_equal(slate_session_create(f->small, &p, &s, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "'vicuna' is not known"));
    assert_non_null(strstr(e.message, "chatml"));
}

static void misuse_returns_a_status_naming_the_problem(void **stp) {
    fx *f = *stp;
    slate_error e;
    slate_session *s = NULL;
    slate_session_params p = slate_session_default_params();
    p.template_name = "chatml";
    assert_int_equal(slate_session_create(NULL, &p, &s, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_create(f->small, &p, NULL, &e), SLATE_E_INVALID_ARG);
    p.n_reserve = 256;
    assert_int_equal(slate_session_create(f->small, &p, &s, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "n_reserve 256 outside -1..255"));
    p.n_reserve = -1;
    p.context_policy = (slate_context_policy)7;
    assert_int_equal(slate_session_create(f->small, &p, &s, &e), SLATE_E_INVALID_ARG);
    p.context_policy = SLATE_CONTEXT_ROLL;
    p.summarize = summarize;
    assert_int_equal(slate_session_create(f->small, &p, &s, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "summarize callback"));
    p.summarize = NULL;
    p.context_policy = SLATE_CONTEXT_SUMMARIZE;
    p.n_summary_max = -1;
    assert_int_equal(slate_session_create(f->small, &p, &s, &e), SLATE_E_INVALID_ARG);
    p.n_ctx = 1000;
    p.n_summary_max = 16;
    assert_int_equal(slate_session_create(f->small, &p, &s, &e), SLATE_E_INVALID_ARG);
    assert_null(s);

    s = mk(f->small, SLATE_CONTEXT_REFUSE, 32);
    slate_generate_params gp = greedy(4);
    assert_int_equal(slate_session_generate(s, &gp, NULL, NULL, NULL, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "is empty"));
    assert_int_equal(slate_session_add_message(s, SLATE_ROLE_ASSISTANT, "a", 1, &e),
                     SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_add_message(s, (slate_role)3, "a", 1, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_add_message(s, SLATE_ROLE_USER, NULL, 1, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_add_message(NULL, SLATE_ROLE_USER, "a", 1, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_pop_message(s, &e), SLATE_E_INVALID_ARG);
    say(s, SLATE_ROLE_USER, "a");
    assert_int_equal(slate_session_add_message(s, SLATE_ROLE_USER, "b", 1, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "message 1 must be assistant"));
    assert_int_equal(slate_session_add_message(s, SLATE_ROLE_SYSTEM, "b", 1, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "must come first"));
    gp.n_predict = 0;
    assert_int_equal(slate_session_generate(s, &gp, NULL, NULL, NULL, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "n_predict 0"));
    gp.n_predict = 4;
    gp.n_stop = 1;
    assert_int_equal(slate_session_generate(s, &gp, NULL, NULL, NULL, &e), SLATE_E_INVALID_ARG);
    gp.n_stop = 0;
    gp.sampler.top_p = 0.0f;
    assert_int_equal(slate_session_generate(s, &gp, NULL, NULL, NULL, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_n_messages(s), 1);
    gp.sampler.top_p = 1.0f;
    assert_int_equal(slate_session_generate(s, &gp, NULL, NULL, NULL, &e), SLATE_OK);
    assert_int_equal(slate_session_generate(s, &gp, NULL, NULL, NULL, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "must be the user's"));
    assert_int_equal(slate_session_generate(NULL, &gp, NULL, NULL, NULL, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_cancel(NULL), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_reset(NULL), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_get_stats(NULL, NULL), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_ledger(s, NULL, NULL), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_message(s, 9, NULL, NULL, NULL), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_session_message(s, -1, NULL, NULL, NULL), SLATE_E_INVALID_ARG);
    assert_null(slate_session_state(NULL));
    assert_string_equal(slate_session_template(NULL), "");
    /* The model cannot close under a session. */
    assert_int_equal(slate_model_close(f->small), SLATE_E_BUSY);
    slate_session_free(s);
    slate_session_free(NULL);
}

/* ---- allocation failures -------------------------------------------------------------------- */

static void create_and_turns_fail_cleanly_under_allocation_faults(void **stp) {
    fx *f = *stp;
    slate_session_params p = slate_session_default_params();
    p.template_name = "chatml";
    long long base = slate__alloc_live_bytes();
    slate_session *s = NULL;
    int n = 1;
    for (;; n++) {
        slate__alloc_fail_after(n);
        slate_status st = slate_session_create(f->small, &p, &s, NULL);
        slate__alloc_fail_after(0);
        if (st == SLATE_OK) break;
        assert_int_equal(st, SLATE_E_NOMEM);
        assert_null(s);
        assert_int_equal(slate__alloc_live_bytes(), base);
        assert_true(n < 1000);
    }
    slate_session_free(s);
    assert_int_equal(slate__alloc_live_bytes(), base);

    /* A turn: every failure leaves the conversation as it was and the ledger matching. */
    for (n = 1;; n++) {
        s = mk(f->small, SLATE_CONTEXT_ROLL, 40);
        say(s, SLATE_ROLE_SYSTEM, "Be-brief.");
        say(s, SLATE_ROLE_USER, "First.");
        ok_turn(s, 3, NULL, NULL);
        say(s, SLATE_ROLE_USER, "Second.");
        slate_generate_params gp = greedy(3);
        slate__alloc_fail_after(n);
        slate_status st = slate_session_generate(s, &gp, NULL, NULL, NULL, NULL);
        slate__alloc_fail_after(0);
        assert_ledger_matches_state(s);
        if (st == SLATE_OK) {
            assert_int_equal(slate_session_n_messages(s), 5);
            slate_session_free(s);
            break;
        }
        assert_int_equal(st, SLATE_E_NOMEM);
        assert_int_equal(slate_session_n_messages(s), 4);
        /* and the session still works */
        ok_turn(s, 2, NULL, NULL);
        slate_session_free(s);
        assert_true(n < 1000);
    }
    assert_int_equal(slate__alloc_live_bytes(), base);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reused_turn_is_bit_identical_to_a_fresh_state_fed_the_same_calls),
        cmocka_unit_test(reuse_keeps_only_whole_calls),
        cmocka_unit_test(with_reference_kernels_reuse_equals_a_cold_prefill),
        cmocka_unit_test(ledger_holds_the_prompt_and_all_but_the_last_sampled_token),
        cmocka_unit_test(statistics_count_turns_reuse_and_cache_bytes),
        cmocka_unit_test(reset_forgets_the_conversation_but_reuses_the_cache),
        cmocka_unit_test(a_state_changed_behind_the_session_is_resynced),
        cmocka_unit_test(roll_drops_oldest_whole_turns_and_keeps_the_system_message),
        cmocka_unit_test(refuse_returns_context_full_with_the_numbers_and_changes_nothing),
        cmocka_unit_test(summarize_with_a_callback_replaces_earlier_turns_by_the_summary),
        cmocka_unit_test(summarize_callback_returning_null_fails_the_turn_cleanly),
        cmocka_unit_test(summarize_without_a_callback_asks_the_model),
        cmocka_unit_test(summarize_too_big_for_the_context_fails_instead_of_dropping_turns),
        cmocka_unit_test(summarize_default_budget_fits_a_small_context),
        cmocka_unit_test(cancel_from_another_thread_ends_the_turn_as_cancelled),
        cmocka_unit_test(callback_returning_false_cancels_and_keeps_the_text_so_far),
        cmocka_unit_test(getters_during_a_turn_return_busy),
        cmocka_unit_test(critical_pressure_during_a_reply_ends_it_and_the_next_turn_recomputes),
        cmocka_unit_test(critical_pressure_between_turns_costs_only_the_reuse),
        cmocka_unit_test(critical_pressure_from_another_thread_never_fails_a_turn),
        cmocka_unit_test(saved_and_loaded_session_continues_bit_identically),
        cmocka_unit_test(loading_a_file_without_a_conversation_is_refused),
        cmocka_unit_test(a_model_without_a_usable_template_is_refused_listing_the_names),
        cmocka_unit_test(misuse_returns_a_status_naming_the_problem),
        cmocka_unit_test(create_and_turns_fail_cleanly_under_allocation_faults),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, setup, teardown);
}
