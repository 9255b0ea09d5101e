/*
 * http.c - libmicrohttpd plumbing for `slate serve`: one thread per connection (a generation
 * blocks its connection's thread, never the others), request bodies accumulated up to the
 * configured limit (past it: 413 without keeping the rest; a Content-Length past it or a bad API
 * key is refused from the headers, before any body is read), then api.c handles the complete
 * request. Also the daemon's start/stop and the command-line options.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct req_ctx {
    char *body;
    size_t len, cap;
    bool too_large;
    bool answered; /* refused from its headers (srv_precheck): the body is not wanted */
} req_ctx;

/* The request deadline (--request-timeout). libmicrohttpd's idle timer restarts with every byte,
 * so a client that trickles its headers or body (slowloris) would hold its connection, and its
 * thread, for ever. Each connection is tracked from its start: while no request of it is being
 * handled (from its start or its previous reply until its next request is in), the main loop
 * shuts down the socket of one that has waited longer than the deadline. A request being
 * handled, or its reply being sent (a queue wait, a long stream), is never cut. */
typedef struct srv_conn {
    int fd;
    bool handling; /* a request's handler runs or its reply is being sent */
    bool cut;
    double since;  /* when it began waiting for a request (CLOCK_MONOTONIC seconds) */
    struct srv_conn *prev, *next;
} srv_conn;

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    srv_server *s = cls;
    srv_conn *sc = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(sc = calloc(1, sizeof *sc))) return; /* untracked: only the idle timer */
        sc->fd = ci->connect_fd;
        sc->since = mono_s();
        pthread_mutex_lock(&s->conns_mu);
        sc->next = s->conns;
        if (s->conns) s->conns->prev = sc;
        s->conns = sc;
        pthread_mutex_unlock(&s->conns_mu);
        *socket_context = sc;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && sc) {
        pthread_mutex_lock(&s->conns_mu);
        if (sc->prev) sc->prev->next = sc->next;
        else s->conns = sc->next;
        if (sc->next) sc->next->prev = sc->prev;
        pthread_mutex_unlock(&s->conns_mu);
        free(sc);
        *socket_context = NULL;
    }
}

/* Marks conn's request as being handled (on) or its reply as sent (off: the deadline for the
 * next request starts). */
static void conn_handling(srv_server *s, struct MHD_Connection *conn, bool on) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    srv_conn *sc = ci ? ci->socket_context : NULL;
    if (!sc) return;
    pthread_mutex_lock(&s->conns_mu);
    sc->handling = on;
    if (!on) sc->since = mono_s();
    pthread_mutex_unlock(&s->conns_mu);
}

/* Cuts the connections that have waited for their request longer than the deadline. */
static void cut_late_requests(srv_server *s) {
    double now = mono_s(), limit = (double)s->cfg.request_timeout_s;
    pthread_mutex_lock(&s->conns_mu);
    for (srv_conn *sc = s->conns; sc; sc = sc->next)
        if (!sc->handling && !sc->cut && now - sc->since > limit) {
            shutdown(sc->fd, SHUT_RDWR); /* its thread sees the end and closes it */
            sc->cut = true;
        }
    pthread_mutex_unlock(&s->conns_mu);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    srv_server *s = cls;
    req_ctx *rc = *con_cls;
    if (!rc) {
        rc = calloc(1, sizeof *rc);
        if (!rc) return MHD_NO;
        *con_cls = rc;
        atomic_fetch_add(&s->n_open, 1);
        int early = srv_precheck(s, conn, url);
        if (early < 0) return MHD_YES;
        rc->answered = true;
        conn_handling(s, conn, true); /* its refusal is being sent */
        return early ? MHD_YES : MHD_NO;
    }
    if (rc->answered) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rc->too_large) {
            if (rc->len + *upload_size > s->cfg.max_body_bytes) {
                rc->too_large = true;
                free(rc->body);
                rc->body = NULL;
                rc->len = rc->cap = 0;
            } else {
                if (rc->len + *upload_size + 1 > rc->cap) {
                    size_t cap = rc->cap ? rc->cap : 4096;
                    while (cap < rc->len + *upload_size + 1) cap *= 2;
                    char *b = realloc(rc->body, cap);
                    if (!b) return MHD_NO;
                    rc->body = b;
                    rc->cap = cap;
                }
                memcpy(rc->body + rc->len, upload_data, *upload_size);
                rc->len += *upload_size;
                rc->body[rc->len] = '\0';
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    /* The idle timer must not count the time the handler runs (a queue wait up to
     * --queue-timeout, a long non-streaming generation) as client idleness. libmicrohttpd
     * 0.9.75 happens to restart the timer when a response is queued, but does not document it;
     * what it documents is that setting a timeout when it was 0 restarts the timer. So the
     * timer is off while the handler runs and restarts when it returns. */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    conn_handling(s, conn, true);
    int ok = rc->too_large ? srv_handle(s, conn, method, url, NULL, (size_t)-1)
                           : srv_handle(s, conn, method, url, rc->body ? rc->body : "", rc->len);
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, s->cfg.idle_timeout_s);
    return ok ? MHD_YES : MHD_NO;
}

void srv_conn_touch(struct MHD_Connection *conn, unsigned timeout_s) {
    /* Documented: setting a timeout when it was 0 restarts the timer. */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, timeout_s);
}

bool srv_conn_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    /* Peek: 0 is the client's FIN, an error (ECONNRESET...) a reset; bytes (a pipelined next
     * request) or EAGAIN mean it is still there. Nothing is consumed. */
    char c;
    ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    srv_server *s = cls;
    (void)conn;
    (void)toe;
    req_ctx *rc = *con_cls;
    conn_handling(s, conn, false);
    if (rc) {
        atomic_fetch_sub(&s->n_open, 1);
        free(rc->body);
        free(rc);
        *con_cls = NULL;
    }
}

static volatile sig_atomic_t g_stop; /* set by the signal handler only */
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

/* Option a's value v as an integer in lo..hi (cli_parse_int), or false after saying so in the
 * other commands' words. */
static bool opt_int(const char *a, const char *v, long long lo, long long hi, long long *out) {
    if (cli_parse_int(v, lo, hi, out)) return true;
    fprintf(stderr, "slate serve: %s must be an integer in %lld..%lld, not '%s'\n", a, lo, hi,
            v ? v : "");
    return false;
}

int srv_main(int argc, char **argv) {
    srv_server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    srv_config *c = &s->cfg;
    c->host = "127.0.0.1";
    c->port = 8080;
    c->n_slots = 2;
    c->queue_max = 16;
    c->queue_timeout_s = 60;
    c->max_body_bytes = 1 << 20;
    c->idle_timeout_s = SRV_IDLE_TIMEOUT_S;
    c->request_timeout_s = SRV_REQUEST_TIMEOUT_S;
    c->conns_per_ip = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        bool ok = true;
        if (strcmp(a, "--host") == 0 && v) c->host = v;
        else if (strcmp(a, "--port") == 0) ok = opt_int(a, v, 1, 65535, &n) && (c->port = (int)n);
        else if (strcmp(a, "--slots") == 0) ok = opt_int(a, v, 1, 256, &n) && (c->n_slots = (int)n);
        else if (strcmp(a, "--queue") == 0) ok = opt_int(a, v, 0, 100000, &n) && ((c->queue_max = (int)n), true);
        else if (strcmp(a, "--api-key") == 0 && v && *v) c->api_key = v;
        else if (strcmp(a, "--ctx") == 0) ok = opt_int(a, v, 1, 1 << 24, &n) && (c->n_ctx = (int32_t)n);
        else if (strcmp(a, "--kv-rollback") == 0) { /* run's parser and wording: exit 2 */
            if (!cli_kv_rollback_parse("serve", v, &c->kv_rollback_tokens)) {
                free(s);
                return 2;
            }
        }
        else if (strcmp(a, "--kv-keep-all") == 0) {
            c->kv_keep_all = true;
            continue; /* takes no value */
        }
        else if (strcmp(a, "--max-tokens") == 0) ok = opt_int(a, v, 1, 1 << 24, &n) && (c->max_tokens_limit = (int32_t)n);
        else if (strcmp(a, "--max-body") == 0) ok = opt_int(a, v, 1024, 1 << 30, &n) && (c->max_body_bytes = (size_t)n);
        else if (strcmp(a, "--queue-timeout") == 0) ok = opt_int(a, v, 0, 86400, &n) && ((c->queue_timeout_s = (double)n), true);
        else if (strcmp(a, "--idle-timeout") == 0) ok = opt_int(a, v, 1, 86400, &n) && ((c->idle_timeout_s = (unsigned)n), true);
        else if (strcmp(a, "--request-timeout") == 0) ok = opt_int(a, v, 1, 86400, &n) && ((c->request_timeout_s = (unsigned)n), true);
        else if (strcmp(a, "--conns-per-ip") == 0) ok = opt_int(a, v, 0, 1 << 20, &n) && ((c->conns_per_ip = (long)n), true);
        else if ((strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0)) ok = opt_int(a, v, 1, 1024, &n) && (c->n_threads = (int32_t)n);
        else if (strcmp(a, "--template") == 0 && v) c->template_name = v;
        else if (a[0] != '-' && !c->model_path) {
            c->model_path = a;
            continue;
        } else {
            free(s);
            return cli_bad_option("serve", a);
        }
        if (!ok) { /* opt_int said why */
            free(s);
            return 2;
        }
        i++;
    }
    if (!c->model_path) {
        free(s);
        return cli_usage("serve");
    }
    /* Model id: the file name without directory and .slate. */
    static char model_id[256];
    const char *base = strrchr(c->model_path, '/');
    snprintf(model_id, sizeof model_id, "%s", base ? base + 1 : c->model_path);
    char *dot = strstr(model_id, ".slate");
    if (dot && dot[6] == '\0') *dot = '\0';
    c->model_id = model_id;

    slate_error err;
    int rc = 1;
    srv_metrics_init(&s->metrics);
    s->created = (uint64_t)time(NULL);
    pthread_mutex_init(&s->pool.mu, NULL);
    pthread_mutex_init(&s->conns_mu, NULL);
    pthread_cond_init(&s->pool.cv, NULL);
    s->pool.queue_max = c->queue_max;
    slate_status st = srv_backend_open(c, &s->backend, &err);
    if (st) {
        fprintf(stderr, "slate serve: %s: %s\n", slate_status_name(st), err.message);
        free(s);
        return st == SLATE_E_INVALID_ARG ? 2 : 1;
    }
    /* The sliding-window options against the slots' context, as `slate run` checks them (same
     * messages, exit 2). srv_backend_n_ctx is --ctx when given (the backend refused one past
     * the package's context), else the package's. */
    if (!cli_kv_options_ok_ctx("serve", "--ctx", c->kv_rollback_tokens, c->kv_keep_all, c->n_ctx,
                               srv_backend_n_ctx(s->backend))) {
        rc = 2;
        goto done;
    }
    if (!c->max_tokens_limit) c->max_tokens_limit = srv_backend_n_ctx(s->backend);
    s->pool.slots = calloc((size_t)c->n_slots, sizeof *s->pool.slots);
    if (!s->pool.slots) goto done;
    for (int i = 0; i < c->n_slots; i++) {
        s->pool.slots[i].index = i;
        if ((st = srv_backend_slot_init(s->backend, &s->pool.slots[i], &err))) {
            fprintf(stderr, "slate serve: slot %d: %s: %s\n", i, slate_status_name(st),
                    err.message);
            goto done;
        }
        s->pool.n++;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)c->port);
    if (inet_pton(AF_INET, c->host, &addr.sin_addr) != 1) {
        fprintf(stderr, "slate serve: --host must be an IPv4 address, not '%s'\n", c->host);
        goto done;
    }
    /* Connections beyond the running and queued requests: room for /health, /metrics and
     * idle keep-alive clients, which the idle timeout (--idle-timeout) closes. Past the
     * limit new connections are refused, so a crowd of idle clients costs at most this many
     * threads (one per connection) for the idle timeout. */
    long conn_limit = (long)c->n_slots + c->queue_max + SRV_SPARE_CONNS;
    /* One client address may hold the running and queued requests plus half the spare room,
     * so a client that keeps opening connections (or trickles them, up to --request-timeout
     * each) cannot take them all: another address still gets in. Behind a reverse proxy every
     * client has the proxy's address: raise the limit or turn it off (0). */
    if (c->conns_per_ip < 0) c->conns_per_ip = (long)c->n_slots + c->queue_max + SRV_SPARE_CONNS / 2;
    /* Said before the daemon starts, so that it is in the log by the time a client (or a test
     * waiting on /health) can be answered. */
    const char *chat_problem = srv_backend_chat_problem(s->backend);
    if (chat_problem)
        fprintf(stderr, "slate serve: chat completions are unavailable (%s); /v1/completions "
                "works, or name a template with --template\n", chat_problem);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
            MHD_USE_ITC, /* ITC: MHD_quiesce_daemon needs it in this mode */
        (uint16_t)c->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, &addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, s, MHD_OPTION_CONNECTION_TIMEOUT,
        c->idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)conn_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)c->conns_per_ip, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "slate serve: cannot listen on %s:%d\n", c->host, c->port);
        goto done;
    }
    fprintf(stderr, "slate serve: %s on http://%s:%d (%d slots, queue %d%s)\n", c->model_id,
            c->host, c->port, c->n_slots, c->queue_max, c->api_key ? ", api key required" : "");
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    while (!g_stop) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        cut_late_requests(s);
    }
    /* Graceful stop: take no new connections, refuse new and queued generation requests
     * (503), end running generations early (finish_reason "length"; a stream still gets its
     * final chunk and data: [DONE]), and wait up to SRV_SHUTDOWN_GRACE_S for the replies to
     * go out before closing everything. */
    fprintf(stderr, "slate serve: stopping\n");
    MHD_socket listen_fd = MHD_quiesce_daemon(d);
    atomic_store(&s->stopping, true);
    pthread_mutex_lock(&s->pool.mu);
    pthread_cond_broadcast(&s->pool.cv);
    pthread_mutex_unlock(&s->pool.mu);
    for (int waited_ms = 0; atomic_load(&s->n_open) > 0; waited_ms += 20) {
        if (waited_ms >= SRV_SHUTDOWN_GRACE_S * 1000) {
            fprintf(stderr, "slate serve: %d requests still open after %.0f s; closing them\n",
                    atomic_load(&s->n_open), SRV_SHUTDOWN_GRACE_S);
            break;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
    rc = 0;
done:
    for (int i = 0; i < s->pool.n; i++) srv_backend_slot_free(&s->pool.slots[i]);
    free(s->pool.slots);
    srv_backend_close(s->backend);
    free(s);
    return rc;
}
