/*
 * backend.c - what the server asks of slate: the model, one state per slot, prompt rendering
 * and tokenization, and generation in a slot with cache reuse. Each slot keeps the exact ids
 * its state holds (its ledger); a request's ids are matched against it by longest common
 * prefix, the state is truncated there and only the rest is prefilled. The generated ids are
 * appended to the ledger as far as the state consumed them.
 */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct srv_backend {
    slate_model *model;
    const slate_tokenizer *tok;
    srv_config cfg;
    int32_t n_ctx;
    const char *template_name;
    char chat_problem[sizeof ((slate_error *)0)->message]; /* why chat cannot work, "" if it can */
};

/* Fills err (NULL allowed) with code and the message and returns code: the library's
 * slate__fail (src/core/error.c) for the server, which may use only the public header. */
static slate_status fail(slate_error *err, slate_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static slate_status fail(slate_error *err, slate_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        err->has_offset = false;
        err->offset = 0;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Renders a one-message conversation to learn, at startup, whether chat requests can work: an
 * unknown --template must stop the server (else every chat request fails later as if the
 * client were at fault); a model without a usable template only loses chat completions. */
static slate_status probe_template(srv_backend *b, slate_error *err) {
    const slate_chat_message hi = {SLATE_ROLE_USER, "hi", 2};
    size_t len = 0;
    slate_error e;
    slate_status s = slate_chat_render(b->model, b->template_name, &hi, 1, true, NULL, 0, &len, &e);
    if (s == SLATE_OK || s == SLATE_E_BUFFER_TOO_SMALL) return SLATE_OK;
    if (b->template_name)
        return fail(err, SLATE_E_INVALID_ARG, "--template '%s': %s", b->template_name, e.message);
    if (s != SLATE_E_UNSUPPORTED && s != SLATE_E_INVALID_ARG) {
        if (err) *err = e;
        return s;
    }
    snprintf(b->chat_problem, sizeof b->chat_problem, "%s", e.message);
    return SLATE_OK;
}

slate_status srv_backend_open(const srv_config *cfg, srv_backend **out, slate_error *err) {
    *out = NULL;
    srv_backend *b = calloc(1, sizeof *b);
    if (!b) return SLATE_E_NOMEM;
    b->cfg = *cfg;
    slate_model_params mp = slate_model_default_params();
    mp.n_threads = cfg->n_threads;
    slate_status s = slate_model_open(cfg->model_path, &mp, &b->model, err);
    if (s) {
        free(b);
        return s;
    }
    b->tok = slate_model_tokenizer(b->model);
    slate_model_info info;
    slate_model_get_info(b->model, &info);
    if (cfg->n_ctx > info.n_ctx) {
        /* Refused like `slate run --context`: a larger context than the package was planned
         * for is never silently cut down. */
        s = fail(err, SLATE_E_INVALID_ARG, "--ctx %d is outside 1..%d (the package's context)",
                 cfg->n_ctx, info.n_ctx);
        goto fail;
    }
    b->n_ctx = cfg->n_ctx ? cfg->n_ctx : info.n_ctx;
    b->template_name = cfg->template_name;
    if ((s = probe_template(b, err))) goto fail;
    *out = b;
    return SLATE_OK;
fail:
    slate_model_close(b->model);
    free(b);
    return s;
}

const char *srv_backend_chat_problem(const srv_backend *b) {
    return b->chat_problem[0] ? b->chat_problem : NULL;
}

void srv_backend_close(srv_backend *b) {
    if (!b) return;
    slate_model_close(b->model);
    free(b);
}

int32_t srv_backend_n_ctx(const srv_backend *b) { return b->n_ctx; }

slate_status srv_backend_slot_init(srv_backend *b, srv_slot *slot, slate_error *err) {
    slate_state_params sp = slate_state_default_params();
    sp.n_ctx = b->n_ctx;
    sp.kv_rollback_tokens = b->cfg.kv_rollback_tokens;
    sp.kv_keep_all = b->cfg.kv_keep_all;
    slate_state *st = NULL;
    slate_status s = slate_state_create(b->model, &sp, &st, err);
    if (s) return s;
    slot->conv = st;
    slot->cap_ledger = b->n_ctx;
    slot->ledger = malloc(sizeof(int32_t) * (size_t)b->n_ctx);
    if (!slot->ledger) {
        slate_state_free(st);
        slot->conv = NULL;
        return SLATE_E_NOMEM;
    }
    atomic_init(&slot->kv_bytes, 0);
    return SLATE_OK;
}

void srv_backend_slot_free(srv_slot *slot) {
    slate_state_free(slot->conv);
    free(slot->ledger);
    slot->conv = NULL;
    slot->ledger = NULL;
}

size_t srv_backend_kv_bytes(const srv_slot *slot) { return atomic_load(&slot->kv_bytes); }

/* A prompt's ids are only useful up to the context: one encode into room for n_ctx ids. A
 * longer prompt gives E_BUFFER_TOO_SMALL with its full count in need (the encoder counts past
 * cap), which the caller refuses by that count: no second pass. */
static slate_status take_ids(slate_status s, size_t need, int32_t **ids, int32_t *n) {
    if (s == SLATE_E_BUFFER_TOO_SMALL) s = SLATE_OK;
    if (s) {
        free(*ids);
        *ids = NULL;
        return s;
    }
    *n = need > (size_t)INT32_MAX ? INT32_MAX : (int32_t)need;
    return SLATE_OK;
}

static slate_status encode(const srv_backend *b, const char *text, uint32_t flags,
                           int32_t **ids, int32_t *n, slate_error *err) {
    size_t need = 0;
    if (!(*ids = malloc(sizeof(int32_t) * (size_t)b->n_ctx))) return SLATE_E_NOMEM;
    slate_status s = slate_tokenizer_encode(b->tok, text, strlen(text), flags, *ids,
                                            (size_t)b->n_ctx, &need, err);
    return take_ids(s, need, ids, n);
}

/* The chat's prompt ids (malloc'd): slate_chat_tokenize, so the messages' text cannot forge
 * the template's special tokens. */
static slate_status tokenize_chat(srv_backend *b, const srv_request *req, int32_t **ids,
                                  int32_t *n, slate_error *err);

slate_status srv_backend_prompt(srv_backend *b, const srv_request *req, int32_t **ids,
                                int32_t *n, slate_error *err) {
    *ids = NULL;
    *n = 0;
    slate_status s;
    if (req->chat) {
        s = tokenize_chat(b, req, ids, n, err);
    } else {
        s = encode(b, req->prompt, SLATE_ENCODE_ADD_BOS, ids, n, err);
    }
    if (s) return s;
    if (*n == 0) {
        free(*ids);
        *ids = NULL;
        return fail(err, SLATE_E_INVALID_ARG, "the prompt is empty");
    }
    if (*n >= b->n_ctx) {
        free(*ids);
        *ids = NULL;
        return fail(err, SLATE_E_CONTEXT_FULL, "the prompt is %d tokens; this server's context is "
                    "%d tokens, so at most %d prompt tokens leave room for a reply", *n, b->n_ctx,
                    b->n_ctx - 1);
    }
    return SLATE_OK;
}

typedef struct relay {
    bool (*on_piece)(void *user, const char *text, size_t len);
    void *user;
    atomic_bool *cancel;
    bool first;
} relay;

static bool relay_piece(void *user, const char *text, size_t len) {
    relay *r = user;
    if (atomic_load(r->cancel)) return false;
    return r->on_piece(r->user, text, len) && !atomic_load(r->cancel);
}

/* Cache bytes holding tokens: every tensor's rows from its first held position (a sliding
 * window releases the rows behind it) to the length. */
static size_t kv_bytes_held(const slate_state *st) {
    int32_t len = slate_state_length(st);
    size_t used = 0;
    for (int32_t i = 0; i < slate_state_n_tensors(st); i++) {
        slate_tensor_info ti;
        if (slate_state_tensor_info(st, i, &ti) == SLATE_OK && ti.first_position < len)
            used += ti.row_bytes * (size_t)(len - ti.first_position);
    }
    return used;
}

slate_status srv_backend_generate(srv_backend *b, srv_slot *slot, const srv_request *req,
                                  const int32_t *ids, int32_t n,
                                  bool (*on_piece)(void *user, const char *text, size_t len),
                                  void *user, atomic_bool *cancel, srv_usage *usage,
                                  slate_error *err) {
    slate_state *st = slot->conv;
    memset(usage, 0, sizeof *usage);
    /* Reuse the cached prefix, but always feed at least one token so there are fresh logits. */
    int32_t keep = srv_common_prefix(slot->ledger, slot->n_ledger, ids, n);
    if (keep >= n) keep = n - 1;
    if (keep > slate_state_length(st)) keep = slate_state_length(st);
    slate_status s = slate_state_truncate(st, keep, err);
    if (s == SLATE_E_RELEASED) { /* a sliding window released rows the prefix needs: re-prefill */
        keep = 0;
        s = slate_state_reset(st);
        usage->reuse_released = s == SLATE_OK;
    }
    if (s) return s;
    slot->n_ledger = keep;
    usage->reused_tokens = keep;
    usage->prompt_tokens = n;
    slate_generate_params gp = slate_generate_default_params();
    gp.n_predict = req->max_tokens;
    gp.sampler = req->sampler;
    gp.stop_strings = req->stops;
    gp.n_stop = req->n_stops;
    gp.ignore_eos = req->ignore_eos;
    /* A completion continues its prompt's text (" there" after "Once upon a time," keeps its
     * space, as OpenAI's completions do); a chat reply is text of its own, whose leading
     * dummy-prefix space goes, as when the reply's ids are decoded alone. */
    gp.text_before = req->chat ? SLATE_TEXT_BEFORE_NONE : SLATE_TEXT_BEFORE_AUTO;
    relay r = {on_piece, user, cancel, true};
    gp.on_piece = relay_piece;
    gp.user = &r;
    int32_t cap = req->max_tokens > 0 ? req->max_tokens : b->n_ctx;
    int32_t *gen = malloc(sizeof(int32_t) * (size_t)cap);
    if (!gen) return SLATE_E_NOMEM;
    gp.tokens_out = gen;
    gp.tokens_cap = cap;
    slate_generate_result res;
    s = slate_generate(st, ids + keep, n - keep, &gp, &res, err);
    if (s == SLATE_OK) {
        /* The ledger mirrors the state: the prompt, then the generated ids it consumed (the last
         * sampled id is not fed back). */
        int32_t len = slate_state_length(st);
        memcpy(slot->ledger + keep, ids + keep, sizeof(int32_t) * (size_t)(n - keep));
        int32_t fed = len - n;
        if (fed > 0) memcpy(slot->ledger + n, gen, sizeof(int32_t) * (size_t)fed);
        slot->n_ledger = len;
        usage->completion_tokens = res.n_generated;
        usage->ttft_ms = res.ttft_ms;
        usage->decode_tps = res.n_generated > 1 && res.decode_ms > 0
                                ? (res.n_generated - 1) / (res.decode_ms / 1000.0)
                                : 0.0;
        usage->finish = res.finish;
    } else {
        /* The state may hold part of the prompt: keep the ledger honest (empty it when a sliding
         * window released rows the prefix would need). */
        if (slate_state_truncate(st, keep, NULL) != SLATE_OK) {
            slate_state_reset(st);
            keep = 0;
        }
        slot->n_ledger = keep;
    }
    atomic_store(&slot->kv_bytes, kv_bytes_held(st));
    free(gen);
    return s;
}

static slate_status tokenize_chat(srv_backend *b, const srv_request *req, int32_t **ids,
                                  int32_t *n, slate_error *err) {
    slate_chat_message *m = calloc((size_t)req->n_messages, sizeof *m);
    if (!m) return SLATE_E_NOMEM;
    for (int i = 0; i < req->n_messages; i++) {
        const char *r = req->messages[i].role;
        m[i].role = strcmp(r, "system") == 0 ? SLATE_ROLE_SYSTEM
                    : strcmp(r, "assistant") == 0 ? SLATE_ROLE_ASSISTANT
                                                  : SLATE_ROLE_USER;
        m[i].text = req->messages[i].content;
        m[i].len = strlen(req->messages[i].content);
    }
    size_t need = 0;
    slate_status s = SLATE_E_NOMEM;
    if ((*ids = malloc(sizeof(int32_t) * (size_t)b->n_ctx))) {
        s = slate_chat_tokenize(b->model, b->template_name, m, req->n_messages, true, *ids,
                                (size_t)b->n_ctx, &need, err);
        s = take_ids(s, need, ids, n);
    }
    free(m);
    return s;
}
