/*
 * server.h - `slate serve`: an OpenAI-compatible HTTP front end over libmicrohttpd. It uses only
 * the public header include/slate.h. Internal to the server; not part of the library API.
 *
 * Pieces: serve.c (options, daemon, signals), http.c (request bodies, routing, errors, auth),
 * api.c (the endpoints), slots.c (N conversation slots, bounded queue, prefix-affine choice,
 * LRU reclaim), metrics.c (Prometheus counters and histograms), backend.c (prompt rendering
 * and generation in a slot).
 */
#ifndef SLATE_SERVER_H
#define SLATE_SERVER_H

#include "slate.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct srv_config {
    const char *model_path;
    const char *model_id;     /* name reported by /v1/models (file name without .slate) */
    const char *host;         /* default 127.0.0.1 */
    int port;                 /* default 8080 */
    int n_slots;              /* conversation states (default 2) */
    int queue_max;            /* requests that may wait for a slot (default 16) */
    double queue_timeout_s;   /* longest wait in the queue before 503 (default 60) */
    const char *api_key;      /* NULL: no authentication */
    int32_t n_ctx;            /* per-slot context (0: the package's) */
    int32_t kv_rollback_tokens; /* --kv-rollback: each slot's reach (slate_state_params; 0: the
                                   package's max_query); 1..n_ctx and not with kv_keep_all,
                                   checked by srv_main as `slate run` does
                                   (cli_kv_options_ok_ctx) before the slots are made */
    bool kv_keep_all;         /* --kv-keep-all: slots keep every sliding-window cache row */
    int32_t max_tokens_limit; /* largest max_tokens accepted (default: the context) */
    size_t max_body_bytes;    /* default 1 MiB */
    int32_t n_threads;        /* per slot (0: default) */
    const char *template_name;/* chat template override, NULL: from the model */
    unsigned idle_timeout_s;  /* close connections idle this long (default SRV_IDLE_TIMEOUT_S) */
    long conns_per_ip;        /* open connections one client address may hold; 0: no limit;
                                 -1 (default): slots + queue + SRV_SPARE_CONNS / 2 */
    unsigned request_timeout_s; /* a request's headers and body must be in this long after the
                                   connection opened or its previous reply was sent (default
                                   SRV_REQUEST_TIMEOUT_S) */
} srv_config;

/* ---- metrics ----------------------------------------------------------------------------- */
#define SRV_HIST_BUCKETS 12
typedef struct srv_hist {
    double bounds[SRV_HIST_BUCKETS];
    uint64_t counts[SRV_HIST_BUCKETS + 1]; /* last: +Inf */
    double sum;
    uint64_t n;
} srv_hist;

typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests_total[6]; /* by endpoint: chat, completions, models, health, metrics, other */
    uint64_t responses_by_class[6]; /* 1xx..5xx by status / 100, [0] unused */
    uint64_t tokens_in, tokens_out;
    uint64_t prefix_reuse_hits, prefix_tokens_reused, prefix_reuse_released;
    uint64_t rejected_queue_full, cancelled;
    srv_hist ttft_s, tokens_per_s;
} srv_metrics;

void srv_metrics_init(srv_metrics *m);
void srv_metrics_observe(srv_hist *h, double v);
/* Renders the Prometheus text exposition into a malloc'd string. */
char *srv_metrics_render(srv_metrics *m, int slots_busy, int n_slots, int queue_len,
                         size_t kv_bytes_used);

/* ---- slots ------------------------------------------------------------------------------- */
typedef struct srv_slot {
    int index;
    void *conv;               /* backend conversation object (owns the state) */
    int32_t *ledger;          /* ids the slot's state holds */
    int32_t n_ledger, cap_ledger;
    char conv_id[128];        /* conversation id bound to this slot, "" if none */
    uint64_t last_used;       /* tick of the last release (LRU) */
    bool busy;
    atomic_size_t kv_bytes;   /* KV bytes holding tokens, updated after each generation */
} srv_slot;

typedef struct srv_pool {
    srv_slot *slots;
    int n;
    int queue_max;
    int n_waiting;
    uint64_t tick;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} srv_pool;

enum { SRV_ACQ_OK = 0, SRV_ACQ_QUEUE_FULL = 1, SRV_ACQ_TIMEOUT = 2, SRV_ACQ_GONE = 3 };

/* How often a queued or running non-streaming request checks that its client is still there
 * (seconds): a client that left is noticed within this time. */
#define SRV_GONE_POLL_S 0.2

/* Picks a slot for a request: the slot bound to conv_id if any, else the idle slot whose ledger
 * shares the longest prefix with ids (ties: least recently used). Waits while all are busy, as
 * long as the queue has room and the timeout has not passed. Sets *reused to the shared prefix
 * length. */
int srv_pool_acquire(srv_pool *p, const int32_t *ids, int32_t n, const char *conv_id,
                     double timeout_s, srv_slot **out, int32_t *reused);
/* The same, but while waiting it calls gone(user) every SRV_GONE_POLL_S (without the pool's
 * mutex held) and gives up with SRV_ACQ_GONE when it returns true. gone may be NULL. */
int srv_pool_acquire_until(srv_pool *p, const int32_t *ids, int32_t n, const char *conv_id,
                           double timeout_s, bool (*gone)(void *user), void *user,
                           srv_slot **out, int32_t *reused);
void srv_pool_release(srv_pool *p, srv_slot *s);
int srv_pool_busy(srv_pool *p, int *queue_len);
int32_t srv_common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb);

/* ---- backend ----------------------------------------------------------------------------- */
typedef struct srv_message {
    const char *role;
    const char *content;
} srv_message;

typedef struct srv_request {
    bool chat;
    srv_message *messages;
    int n_messages;
    const char *prompt;
    int32_t max_tokens;
    slate_sampler_params sampler;
    const char *stops[4];
    int n_stops;
    bool stream;
    bool include_usage;
    bool ignore_eos;          /* extension (as llama.cpp's server): EOS does not stop */
    char conv_id[128];
} srv_request;

/* A parsed request; on failure: status (400/404), the offending field, an OpenAI error code and
 * a message. json owns the strings req points into. */
typedef struct srv_parsed {
    srv_request req;
    struct cJSON *json;
    const char *bad_param;
    char bad_msg[300];
    unsigned status;
    const char *code;
} srv_parsed;

/* Parses and validates a request body (request.c). seed_counter draws a seed for requests that
 * give none. Returns false with p->status / bad_msg set on bad input. Free with
 * srv_parsed_free in both cases. */
bool srv_parse_request(const srv_config *cfg, atomic_ulong *seed_counter, srv_parsed *p,
                       const char *body, size_t len, bool chat);
void srv_parsed_free(srv_parsed *p);

/* Copies at most max bytes of the NUL-terminated src into dst (cap bytes, cap >= 4) as valid
 * UTF-8: a character is never split (one that does not fit in max or cap is left out) and each
 * byte that does not start a valid character (slate_utf8_char_len) becomes U+FFFD. dst is NUL-terminated; returns
 * dst. For client text quoted in error messages (request.c). */
char *srv_utf8_clip(char *dst, size_t cap, const char *src, size_t max);

typedef struct srv_backend srv_backend;

typedef struct srv_usage {
    int32_t prompt_tokens, completion_tokens, reused_tokens;
    bool reuse_released; /* the slot's cached prefix reached back past a sliding window's rollback
                            reach (its rows were released): the whole prompt was prefilled */
    double ttft_ms, decode_tps;
    slate_finish_reason finish;
} srv_usage;

/* Opens the model and checks the options against it: E_INVALID_ARG (exit 2) for a --ctx past
 * the package's context or a --template that cannot render a conversation. */
slate_status srv_backend_open(const srv_config *cfg, srv_backend **out, slate_error *err);
/* Why chat completions cannot work (the model has no usable chat template and none was
 * named), or NULL if they can; borrowed until the backend is closed. */
const char *srv_backend_chat_problem(const srv_backend *b);
void srv_backend_close(srv_backend *b);
int32_t srv_backend_n_ctx(const srv_backend *b);
/* Creates the per-slot conversation objects. */
slate_status srv_backend_slot_init(srv_backend *b, srv_slot *slot, slate_error *err);
void srv_backend_slot_free(srv_slot *slot);
size_t srv_backend_kv_bytes(const srv_slot *slot);
/* Renders and tokenizes the request's prompt (malloc'd ids). E_CONTEXT_FULL if it cannot fit
 * with at least one generated token; E_UNSUPPORTED if the model has no usable chat template. */
slate_status srv_backend_prompt(srv_backend *b, const srv_request *req, int32_t **ids,
                                int32_t *n, slate_error *err);
/* Generates in a slot: reuses the slot's cache up to the common prefix with ids, prefills the
 * rest, streams text through on_piece (return false to cancel), updates the slot's ledger.
 * cancel is polled between tokens. */
slate_status srv_backend_generate(srv_backend *b, srv_slot *slot, const srv_request *req,
                                  const int32_t *ids, int32_t n,
                                  bool (*on_piece)(void *user, const char *text, size_t len),
                                  void *user, atomic_bool *cancel, srv_usage *usage,
                                  slate_error *err);

/* ---- server ------------------------------------------------------------------------------ */
typedef struct srv_server {
    srv_config cfg;
    srv_backend *backend;
    srv_pool pool;
    srv_metrics metrics;
    uint64_t created;         /* unix seconds */
    atomic_ulong next_id;
    atomic_bool stopping;     /* SIGINT/SIGTERM: finishing what runs, taking nothing new */
    atomic_int n_open;        /* requests begun whose response is not yet sent (http.c) */
    pthread_mutex_t conns_mu; /* guards conns */
    struct srv_conn *conns;   /* open connections, for the request deadline (http.c) */
} srv_server;

/* Longest wait, seconds, after SIGINT/SIGTERM for running requests to end before the server
 * stops anyway. */
#define SRV_SHUTDOWN_GRACE_S 5.0

/* Entry point of `slate serve` (argv[0] is "serve"). */
int srv_main(int argc, char **argv);

/* Handles one complete request (method, path, headers via the lookup callback, body) and
 * produces a response; implemented in api.c, driven by http.c. */
struct MHD_Connection;
int srv_handle(srv_server *s, struct MHD_Connection *conn, const char *method, const char *url,
               const char *body, size_t body_len);

/* Looks at a request's headers before its body is read: a missing or wrong API key (401) or a
 * Content-Length past --max-body (413) is answered at once, so the body is never read (and a
 * client that sent "Expect: 100-continue" is not told to send it). Returns -1 if the request
 * may go on, else whether the reply was queued (1) or not (0). */
int srv_precheck(srv_server *s, struct MHD_Connection *conn, const char *url);

/* Default idle timeout of a connection (--idle-timeout), seconds: a connection that sends or
 * reads nothing for this long is closed, so idle keep-alive clients cannot use up the
 * connection limit. It never cuts a request that is being served: http.c turns the timer off
 * while the handler runs (queue wait, non-streaming generation) and stream_read restarts it
 * whenever it hands out data. */
#define SRV_IDLE_TIMEOUT_S 30u
#define SRV_REQUEST_TIMEOUT_S 30u
/* Connections open at once beyond the running and queued requests (/health, /metrics, idle
 * keep-alive clients). */
#define SRV_SPARE_CONNS 256
/* Restarts conn's idle timer, timeout_s long (call on conn's own thread). */
void srv_conn_touch(struct MHD_Connection *conn, unsigned timeout_s);
/* True if conn's client has closed or reset the connection; for a handler blocked in a long
 * operation, during which libmicrohttpd does not watch the socket (call on conn's own thread).
 * A client that half-closes after sending its request counts as gone. */
bool srv_conn_gone(struct MHD_Connection *conn);

/* Time-constant comparison of two byte strings of possibly different lengths. */
bool srv_secret_equal(const char *a, const char *b);

#endif /* SLATE_SERVER_H */
