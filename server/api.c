/*
 * api.c - the endpoints of `slate serve`, in the OpenAI API shape:
 *   POST /v1/chat/completions, POST /v1/completions (plain JSON, or server-sent events with
 *   "stream": true, ending with "data: [DONE]"), GET /v1/models, GET /health, GET /metrics.
 * Every bad input gets a 4xx with an OpenAI-style error object naming the field. Requests are
 * validated completely before a slot is taken. Streaming runs the generation on a worker thread
 * that fills a buffer the connection drains; if the client goes away, libmicrohttpd frees the
 * response early, which cancels the generation and frees the slot. A non-streaming request
 * blocks its connection's thread (libmicrohttpd does not watch the socket meanwhile), so it
 * looks at the socket itself while queued and while generating, and stops if the client left.
 */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum { EP_CHAT, EP_COMPLETIONS, EP_MODELS, EP_HEALTH, EP_METRICS, EP_OTHER };

static void count_request(srv_server *s, int ep) {
    pthread_mutex_lock(&s->metrics.mu);
    s->metrics.requests_total[ep]++;
    pthread_mutex_unlock(&s->metrics.mu);
}

static int respond(srv_server *s, struct MHD_Connection *conn, unsigned status,
                   const char *ctype, const char *body, const char *retry_after) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return 0;
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    int ok = MHD_queue_response(conn, status, r) == MHD_YES;
    MHD_destroy_response(r);
    pthread_mutex_lock(&s->metrics.mu);
    if (status / 100 >= 1 && status / 100 <= 5) s->metrics.responses_by_class[status / 100]++;
    pthread_mutex_unlock(&s->metrics.mu);
    return ok;
}

static int respond_json(srv_server *s, struct MHD_Connection *conn, unsigned status, cJSON *j) {
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text) return respond(s, conn, 500, "application/json", "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}", NULL);
    int ok = respond(s, conn, status, "application/json", text, NULL);
    cJSON_free(text);
    return ok;
}

/* OpenAI error shape: {"error": {"message", "type", "param", "code"}}. */
static int error_reply(srv_server *s, struct MHD_Connection *conn, unsigned status,
                       const char *type, const char *param, const char *code,
                       const char *retry_after, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
static int error_reply(srv_server *s, struct MHD_Connection *conn, unsigned status,
                       const char *type, const char *param, const char *code,
                       const char *retry_after, const char *fmt, ...) {
    char raw[512], msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* Every error body is valid UTF-8, whatever client bytes the message quotes and wherever
     * the buffer cut it. */
    srv_utf8_clip(msg, sizeof msg, raw, sizeof raw);
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    int ok = respond(s, conn, status, "application/json", text ? text : "{}", retry_after);
    cJSON_free(text);
    return ok;
}

#define BAD(param, ...) \
    error_reply(s, conn, 400, "invalid_request_error", param, NULL, NULL, __VA_ARGS__)

/* ---- responses --------------------------------------------------------------------------- */

static const char *finish_name(slate_finish_reason f) {
    return f == SLATE_FINISH_LENGTH || f == SLATE_FINISH_CONTEXT_FULL ? "length" : "stop";
}

static cJSON *usage_json(const srv_usage *u) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "prompt_tokens", u->prompt_tokens);
    cJSON_AddNumberToObject(j, "completion_tokens", u->completion_tokens);
    cJSON_AddNumberToObject(j, "total_tokens", u->prompt_tokens + u->completion_tokens);
    cJSON *d = cJSON_AddObjectToObject(j, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", u->reused_tokens);
    return j;
}

static cJSON *envelope(srv_server *s, const srv_request *r, const char *id, bool chunk) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", id);
    cJSON_AddStringToObject(j, "object", r->chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                 : "text_completion");
    cJSON_AddNumberToObject(j, "created", (double)time(NULL));
    cJSON_AddStringToObject(j, "model", s->cfg.model_id);
    return j;
}

static void record(srv_server *s, const srv_usage *u, bool cancelled) {
    pthread_mutex_lock(&s->metrics.mu);
    s->metrics.tokens_in += (uint64_t)u->prompt_tokens;
    s->metrics.tokens_out += (uint64_t)u->completion_tokens;
    if (u->reused_tokens > 0) {
        s->metrics.prefix_reuse_hits++;
        s->metrics.prefix_tokens_reused += (uint64_t)u->reused_tokens;
    }
    if (u->reuse_released) s->metrics.prefix_reuse_released++;
    if (u->completion_tokens > 0) srv_metrics_observe(&s->metrics.ttft_s, u->ttft_ms / 1000.0);
    if (u->decode_tps > 0) srv_metrics_observe(&s->metrics.tokens_per_s, u->decode_tps);
    if (cancelled) s->metrics.cancelled++;
    pthread_mutex_unlock(&s->metrics.mu);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct waiter {
    srv_server *s;
    struct MHD_Connection *conn;
} waiter;

/* While queued: give up if the client left or the server is shutting down. */
static bool queue_gone(void *user) {
    waiter *w = user;
    return atomic_load(&w->s->stopping) || srv_conn_gone(w->conn);
}

/* Generated text as sent to the client: a NUL byte (a token may decode to one) would end the
 * JSON string early (cJSON strings are NUL-terminated), cutting a non-streaming reply and
 * vanishing from a stream chunk; each one becomes U+FFFD, the same way on both paths.
 * Writes at most 3 * n bytes and a NUL to out; returns the length. */
static size_t piece_text(const char *t, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '\0') {
            memcpy(out + k, "\xEF\xBF\xBD", 3);
            k += 3;
        } else {
            out[k++] = t[i];
        }
    }
    out[k] = '\0';
    return k;
}

/* Growable text for non-streaming replies. While a non-streaming generation runs, nothing
 * watches the client's socket; acc_piece looks every SRV_GONE_POLL_S and cancels the generation
 * of a client that left, as a disconnect does for a stream. */
typedef struct text_acc {
    char *p;
    size_t len, cap;
    srv_server *s;
    struct MHD_Connection *conn;
    double next_check_s;  /* monotonic time of the next look at the socket */
    bool gone;            /* the client left: the generation was cancelled */
    bool shutdown;        /* the server is stopping: the generation ended early */
} text_acc;

static bool acc_piece(void *user, const char *t, size_t n) {
    text_acc *a = user;
    if (atomic_load(&a->s->stopping)) {
        a->shutdown = true;
        return false;
    }
    double now = now_s();
    if (now >= a->next_check_s) {
        a->next_check_s = now + SRV_GONE_POLL_S;
        if (srv_conn_gone(a->conn)) {
            a->gone = true;
            return false;
        }
    }
    if (a->len + 3 * n + 1 > a->cap) {
        size_t cap = (a->cap ? a->cap * 2 : 1024) + 3 * n;
        char *q = realloc(a->p, cap);
        if (!q) return false;
        a->p = q;
        a->cap = cap;
    }
    a->len += piece_text(t, n, a->p + a->len);
    return true;
}

/* ---- streaming --------------------------------------------------------------------------- */

typedef struct stream {
    srv_server *s;
    struct MHD_Connection *conn;
    srv_parsed p;
    srv_slot *slot;
    int32_t *ids;
    int32_t n_ids;
    char id[64];
    pthread_t worker;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf;        /* SSE bytes not yet sent */
    size_t len, cap, sent;
    bool done;
    bool shutdown;    /* the server is stopping: the generation ended early */
    atomic_bool cancel;
} stream;

static void stream_put(stream *st, const char *data, size_t n) {
    pthread_mutex_lock(&st->mu);
    if (st->len + n > st->cap) {
        size_t cap = (st->cap ? st->cap * 2 : 4096) + n;
        char *q = realloc(st->buf, cap);
        if (q) {
            st->buf = q;
            st->cap = cap;
        }
    }
    if (st->len + n <= st->cap) {
        memcpy(st->buf + st->len, data, n);
        st->len += n;
    }
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

static void stream_event(stream *st, cJSON *j) {
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text) return;
    stream_put(st, "data: ", 6);
    stream_put(st, text, strlen(text));
    stream_put(st, "\n\n", 2);
    cJSON_free(text);
}

static cJSON *chunk(stream *st, const char *content, bool role, const char *finish) {
    const srv_request *r = &st->p.req;
    cJSON *j = envelope(st->s, r, st->id, true);
    cJSON *choices = cJSON_AddArrayToObject(j, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (r->chat) {
        cJSON *delta = cJSON_AddObjectToObject(c, "delta");
        if (role) cJSON_AddStringToObject(delta, "role", "assistant");
        if (content) cJSON_AddStringToObject(delta, "content", content);
    } else {
        cJSON_AddStringToObject(c, "text", content ? content : "");
    }
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    return j;
}

static bool stream_piece(void *user, const char *t, size_t n) {
    stream *st = user;
    if (atomic_load(&st->s->stopping)) {
        st->shutdown = true;
        return false;
    }
    char *copy = malloc(3 * n + 1);
    if (!copy) return false;
    piece_text(t, n, copy);
    stream_event(st, chunk(st, copy, false, NULL));
    free(copy);
    return !atomic_load(&st->cancel);
}

static void *stream_worker(void *arg) {
    stream *st = arg;
    srv_server *s = st->s;
    srv_usage u;
    memset(&u, 0, sizeof u);
    slate_error err;
    if (st->p.req.chat) stream_event(st, chunk(st, NULL, true, NULL));
    slate_status status = srv_backend_generate(s->backend, st->slot, &st->p.req, st->ids,
                                               st->n_ids, stream_piece, st, &st->cancel, &u, &err);
    bool cancelled = atomic_load(&st->cancel);
    srv_pool_release(&s->pool, st->slot);
    st->slot = NULL;
    if (status != SLATE_OK) {
        cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
        cJSON_AddStringToObject(e, "message", err.message);
        cJSON_AddStringToObject(e, "type", "server_error");
        stream_event(st, j);
    } else if (!cancelled) {
        cJSON *j = chunk(st, NULL, false, st->shutdown ? "length" : finish_name(u.finish));
        cJSON_AddItemToObject(j, "usage", usage_json(&u));
        stream_event(st, j);
        if (st->p.req.include_usage) {
            cJSON *uj = envelope(s, &st->p.req, st->id, true);
            cJSON_AddArrayToObject(uj, "choices");
            cJSON_AddItemToObject(uj, "usage", usage_json(&u));
            stream_event(st, uj);
        }
    }
    stream_put(st, "data: [DONE]\n\n", 14);
    record(s, &u, cancelled);
    pthread_mutex_lock(&st->mu);
    st->done = true;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    stream *st = cls;
    pthread_mutex_lock(&st->mu);
    while (st->sent == st->len && !st->done) pthread_cond_wait(&st->cv, &st->mu);
    size_t n = st->len - st->sent;
    /* This thread was blocked here, maybe for a long prefill: restart the idle timer so the
     * wait is never counted as client idleness (0.9.75 did not cut such waits in our tests,
     * but does not promise it). A client that stops reading still times out: this callback
     * is not called while earlier data waits to be sent. */
    srv_conn_touch(st->conn, st->s->cfg.idle_timeout_s);
    if (n == 0) {
        pthread_mutex_unlock(&st->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n > max) n = max;
    memcpy(out, st->buf + st->sent, n);
    st->sent += n;
    if (st->sent == st->len) st->sent = st->len = 0;
    pthread_mutex_unlock(&st->mu);
    return (ssize_t)n;
}

/* Called when the response is done or the client went away: cancel, wait, free. */
static void stream_free(void *cls) {
    stream *st = cls;
    atomic_store(&st->cancel, true);
    pthread_join(st->worker, NULL);
    free(st->ids);
    free(st->p.req.messages);
    cJSON_Delete(st->p.json);
    free(st->buf);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    free(st);
}

/* ---- generation endpoints ------------------------------------------------------------------ */

static int generate(srv_server *s, struct MHD_Connection *conn, const char *body, size_t len,
                    bool chat) {
    srv_parsed p;
    memset(&p, 0, sizeof p);
    int ok;
    int32_t *ids = NULL, n_ids = 0;
    if (!srv_parse_request(&s->cfg, &s->next_id, &p, body, len, chat)) {
        ok = error_reply(s, conn, p.status, p.status == 404 ? "invalid_request_error"
                                                            : "invalid_request_error",
                         p.bad_param, p.code, NULL, "%s", p.bad_msg);
        goto out;
    }
    srv_request *r = &p.req;
    const char *hdr = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Conversation-Id");
    if (hdr && !r->conv_id[0]) snprintf(r->conv_id, sizeof r->conv_id, "%s", hdr);
    slate_error err;
    slate_status st = srv_backend_prompt(s->backend, r, &ids, &n_ids, &err);
    if (st == SLATE_E_CONTEXT_FULL) {
        ok = error_reply(s, conn, 400, "invalid_request_error", chat ? "messages" : "prompt",
                         "context_length_exceeded", NULL, "%s", err.message);
        goto out;
    }
    if (st) {
        bool client = st == SLATE_E_UNSUPPORTED || st == SLATE_E_INVALID_ARG;
        ok = error_reply(s, conn, client ? 400 : 500,
                         client ? "invalid_request_error" : "server_error",
                         client && chat ? "messages" : NULL, NULL, NULL, "%s", err.message);
        goto out;
    }
    if (n_ids + r->max_tokens > srv_backend_n_ctx(s->backend) && r->max_tokens > 1) {
        /* Generation stops at the context end with finish_reason "length"; allowed. */
    }
    srv_slot *slot = NULL;
    int32_t reused = 0;
    waiter w = {s, conn};
    int acq = srv_pool_acquire_until(&s->pool, ids, n_ids, r->conv_id, s->cfg.queue_timeout_s,
                                     queue_gone, &w, &slot, &reused);
    if (acq == SRV_ACQ_OK && atomic_load(&s->stopping)) {
        /* A slot freed by the shutdown itself: this request was queued; it does not start. */
        srv_pool_release(&s->pool, slot);
        acq = SRV_ACQ_GONE;
    }
    if (acq == SRV_ACQ_GONE && atomic_load(&s->stopping) && !srv_conn_gone(conn)) {
        ok = error_reply(s, conn, 503, "server_error", NULL, "shutting_down", NULL,
                         "server is shutting down");
        goto out;
    }
    if (acq == SRV_ACQ_GONE) {
        /* Nobody to answer: close the connection. */
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.cancelled++;
        pthread_mutex_unlock(&s->metrics.mu);
        ok = 0;
        goto out;
    }
    if (acq != SRV_ACQ_OK) {
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.rejected_queue_full++;
        pthread_mutex_unlock(&s->metrics.mu);
        ok = error_reply(s, conn, 503, "server_error", NULL, "server_busy", "1",
                         acq == SRV_ACQ_QUEUE_FULL ? "all %d slots are busy and the queue (%d) "
                                                     "is full; retry later"
                                                   : "all %d slots stayed busy for the queue "
                                                     "timeout (queue %d); retry later",
                         s->cfg.n_slots, s->cfg.queue_max);
        goto out;
    }
    char id[64];
    snprintf(id, sizeof id, "%s-%lu", chat ? "chatcmpl" : "cmpl",
             (unsigned long)atomic_fetch_add(&s->next_id, 1));
    if (r->stream) {
        stream *stp = calloc(1, sizeof *stp);
        if (!stp) {
            srv_pool_release(&s->pool, slot);
            ok = error_reply(s, conn, 500, "server_error", NULL, NULL, NULL, "out of memory");
            goto out;
        }
        stp->s = s;
        stp->conn = conn;
        stp->p = p;
        stp->slot = slot;
        stp->ids = ids;
        stp->n_ids = n_ids;
        snprintf(stp->id, sizeof stp->id, "%s", id);
        pthread_mutex_init(&stp->mu, NULL);
        pthread_cond_init(&stp->cv, NULL);
        atomic_init(&stp->cancel, false);
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, stp, stream_free);
        if (!resp || pthread_create(&stp->worker, NULL, stream_worker, stp) != 0) {
            /* Nothing started: undo by hand. */
            if (resp) MHD_destroy_response(resp);
            srv_pool_release(&s->pool, slot);
            pthread_mutex_destroy(&stp->mu);
            pthread_cond_destroy(&stp->cv);
            free(stp);
            ok = error_reply(s, conn, 500, "server_error", NULL, NULL, NULL, "cannot start the "
                             "stream");
            goto out;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        ok = MHD_queue_response(conn, 200, resp) == MHD_YES;
        MHD_destroy_response(resp);
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.responses_by_class[2]++;
        pthread_mutex_unlock(&s->metrics.mu);
        return ok; /* the stream owns p, ids */
    }
    text_acc acc = {0};
    acc.s = s;
    acc.conn = conn;
    acc.next_check_s = now_s() + SRV_GONE_POLL_S;
    srv_usage u;
    memset(&u, 0, sizeof u);
    atomic_bool cancel;
    atomic_init(&cancel, false);
    st = srv_backend_generate(s->backend, slot, r, ids, n_ids, acc_piece, &acc, &cancel, &u, &err);
    srv_pool_release(&s->pool, slot);
    if (acc.gone) {
        record(s, &u, true);
        free(acc.p);
        ok = 0;
        goto out;
    }
    if (st) {
        free(acc.p);
        ok = error_reply(s, conn, st == SLATE_E_CONTEXT_FULL ? 400 : 500,
                         st == SLATE_E_CONTEXT_FULL ? "invalid_request_error" : "server_error",
                         NULL, st == SLATE_E_CONTEXT_FULL ? "context_length_exceeded" : NULL, NULL,
                         "%s", err.message);
        goto out;
    }
    record(s, &u, false);
    cJSON *j = envelope(s, r, id, false);
    cJSON *choices = cJSON_AddArrayToObject(j, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", acc.p ? acc.p : "");
    } else {
        cJSON_AddStringToObject(c, "text", acc.p ? acc.p : "");
    }
    cJSON_AddStringToObject(c, "finish_reason", acc.shutdown ? "length" : finish_name(u.finish));
    cJSON_AddItemToObject(j, "usage", usage_json(&u));
    free(acc.p);
    ok = respond_json(s, conn, 200, j);
out:
    free(ids);
    free(p.req.messages);
    cJSON_Delete(p.json);
    return ok;
}

/* ---- routing ----------------------------------------------------------------------------- */

static bool authorized(srv_server *s, struct MHD_Connection *conn) {
    if (!s->cfg.api_key) return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    /* The auth scheme is case-insensitive (RFC 7235 section 2.1). */
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    return srv_secret_equal(h + 7, s->cfg.api_key);
}

static int endpoint(const char *url) {
    if (strcmp(url, "/v1/chat/completions") == 0) return EP_CHAT;
    if (strcmp(url, "/v1/completions") == 0) return EP_COMPLETIONS;
    if (strcmp(url, "/v1/models") == 0 || strncmp(url, "/v1/models/", 11) == 0) return EP_MODELS;
    if (strcmp(url, "/health") == 0) return EP_HEALTH;
    if (strcmp(url, "/metrics") == 0) return EP_METRICS;
    return EP_OTHER;
}

int srv_precheck(srv_server *s, struct MHD_Connection *conn, const char *url) {
    int ep = endpoint(url);
    unsigned status = 0;
    if (ep != EP_OTHER && ep != EP_HEALTH && !authorized(s, conn)) {
        status = 401;
    } else {
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        char *end;
        if (cl && *cl) {
            unsigned long long n = strtoull(cl, &end, 10);
            if (!*end && n > s->cfg.max_body_bytes) status = 413;
        }
    }
    if (!status) return -1;
    count_request(s, ep);
    if (status == 401)
        return error_reply(s, conn, 401, "invalid_request_error", NULL, "invalid_api_key", NULL,
                           "missing or incorrect API key (send 'Authorization: Bearer KEY')");
    return error_reply(s, conn, 413, "invalid_request_error", NULL, "body_too_large", NULL,
                       "request body exceeds %zu bytes", s->cfg.max_body_bytes);
}

int srv_handle(srv_server *s, struct MHD_Connection *conn, const char *method, const char *url,
               const char *body, size_t len) {
    bool post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;
    int ep = endpoint(url);
    count_request(s, ep);
    if (ep == EP_OTHER) {
        char m[64], u[256];
        return error_reply(s, conn, 404, "invalid_request_error", NULL, "not_found", NULL,
                           "unknown endpoint %s %s", srv_utf8_clip(m, sizeof m, method, 32),
                           srv_utf8_clip(u, sizeof u, url, 200));
    }
    if (ep != EP_HEALTH && !authorized(s, conn))
        return error_reply(s, conn, 401, "invalid_request_error", NULL, "invalid_api_key", NULL,
                           "missing or incorrect API key (send 'Authorization: Bearer KEY')");
    if (body == NULL && len == (size_t)-1)
        return error_reply(s, conn, 413, "invalid_request_error", NULL, "body_too_large", NULL,
                           "request body exceeds %zu bytes", s->cfg.max_body_bytes);
    if ((ep == EP_CHAT || ep == EP_COMPLETIONS) && atomic_load(&s->stopping))
        return error_reply(s, conn, 503, "server_error", NULL, "shutting_down", NULL,
                           "server is shutting down");
    if ((ep == EP_CHAT || ep == EP_COMPLETIONS) && !post)
        return error_reply(s, conn, 405, "invalid_request_error", NULL, "method_not_allowed",
                           NULL, "%s needs POST", url);
    if ((ep == EP_MODELS || ep == EP_HEALTH || ep == EP_METRICS) && !get)
        return error_reply(s, conn, 405, "invalid_request_error", NULL, "method_not_allowed",
                           NULL, "%s needs GET", url);
    switch (ep) {
    case EP_CHAT: return generate(s, conn, body, len, true);
    case EP_COMPLETIONS: return generate(s, conn, body, len, false);
    case EP_MODELS: {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "id", s->cfg.model_id);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", (double)s->created);
        cJSON_AddStringToObject(m, "owned_by", "slate");
        if (url[10] == '/') { /* GET /v1/models/{id}: the served model, or 404 */
            if (strcmp(url + 11, s->cfg.model_id) == 0) return respond_json(s, conn, 200, m);
            cJSON_Delete(m);
            char clip[128];
            return error_reply(s, conn, 404, "invalid_request_error", "model", "model_not_found",
                               NULL, "the model '%s' does not exist; this server serves '%s'",
                               srv_utf8_clip(clip, sizeof clip, url + 11, 100), s->cfg.model_id);
        }
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "object", "list");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "data"), m);
        return respond_json(s, conn, 200, j);
    }
    case EP_HEALTH: {
        int q = 0, busy = srv_pool_busy(&s->pool, &q);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "status", "ok");
        cJSON_AddNumberToObject(j, "slots", s->pool.n);
        cJSON_AddNumberToObject(j, "slots_busy", busy);
        cJSON_AddNumberToObject(j, "queue_length", q);
        return respond_json(s, conn, 200, j);
    }
    case EP_METRICS: {
        int q = 0, busy = srv_pool_busy(&s->pool, &q);
        size_t kv = 0;
        for (int i = 0; i < s->pool.n; i++) kv += srv_backend_kv_bytes(&s->pool.slots[i]);
        char *text = srv_metrics_render(&s->metrics, busy, s->pool.n, q, kv);
        int ok = respond(s, conn, 200, "text/plain; version=0.0.4", text ? text : "", NULL);
        free(text);
        return ok;
    }
    }
    return 0;
}
