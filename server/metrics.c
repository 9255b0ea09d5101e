/*
 * metrics.c - Prometheus text-format metrics for `slate serve`: request and response counters,
 * token counters, prefix-reuse hits, and histograms of time to first token and decode
 * tokens/s. All updates happen under one mutex: requests are few per second, contention is nil.
 */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double k_ttft_bounds[SRV_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                       0.5,   1,    2.5,   5,    10,  30};
static const double k_tps_bounds[SRV_HIST_BUCKETS] = {1,  2,  5,   10,  20,  50,
                                                      100, 200, 500, 1000, 2000, 5000};

void srv_metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    memcpy(m->ttft_s.bounds, k_ttft_bounds, sizeof k_ttft_bounds);
    memcpy(m->tokens_per_s.bounds, k_tps_bounds, sizeof k_tps_bounds);
}

void srv_metrics_observe(srv_hist *h, double v) {
    int i = 0;
    while (i < SRV_HIST_BUCKETS && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->n++;
}

typedef struct out {
    char *p;
    size_t len, cap;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->p ? o->p + o->len : NULL, o->p ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (o->p && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = (o->cap ? o->cap * 2 : 4096) + (size_t)n;
        char *q = realloc(o->p, cap);
        if (!q) return;
        o->p = q;
        o->cap = cap;
    }
}

static void hist(out *o, const char *name, const char *help, const srv_hist *h) {
    put(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
        cum += h->counts[i];
        put(o, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[SRV_HIST_BUCKETS];
    put(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %g\n%s_count %llu\n", name,
        (unsigned long long)cum, name, h->sum, name, (unsigned long long)h->n);
}

char *srv_metrics_render(srv_metrics *m, int busy, int n_slots, int queue_len, size_t kv_bytes) {
    static const char *const endpoints[6] = {"chat_completions", "completions", "models",
                                             "health", "metrics", "other"};
    out o = {0};
    pthread_mutex_lock(&m->mu);
    put(&o, "# HELP slate_requests_total HTTP requests by endpoint.\n"
            "# TYPE slate_requests_total counter\n");
    for (int i = 0; i < 6; i++)
        put(&o, "slate_requests_total{endpoint=\"%s\"} %llu\n", endpoints[i],
            (unsigned long long)m->requests_total[i]);
    put(&o, "# HELP slate_responses_total HTTP responses by status class.\n"
            "# TYPE slate_responses_total counter\n");
    for (int i = 1; i < 6; i++)
        put(&o, "slate_responses_total{class=\"%dxx\"} %llu\n", i,
            (unsigned long long)m->responses_by_class[i]);
    put(&o, "# HELP slate_tokens_in_total Prompt tokens received.\n"
            "# TYPE slate_tokens_in_total counter\nslate_tokens_in_total %llu\n",
        (unsigned long long)m->tokens_in);
    put(&o, "# HELP slate_tokens_out_total Tokens generated.\n"
            "# TYPE slate_tokens_out_total counter\nslate_tokens_out_total %llu\n",
        (unsigned long long)m->tokens_out);
    put(&o, "# HELP slate_prefix_reuse_hits_total Requests that reused a cached prefix.\n"
            "# TYPE slate_prefix_reuse_hits_total counter\nslate_prefix_reuse_hits_total %llu\n",
        (unsigned long long)m->prefix_reuse_hits);
    put(&o, "# HELP slate_prefix_reused_tokens_total Prompt tokens served from the cache.\n"
            "# TYPE slate_prefix_reused_tokens_total counter\n"
            "slate_prefix_reused_tokens_total %llu\n",
        (unsigned long long)m->prefix_tokens_reused);
    put(&o, "# HELP slate_prefix_reuse_released_total Requests whose cached prefix a sliding window "
            "had released (past --kv-rollback): the whole prompt was prefilled.\n"
            "# TYPE slate_prefix_reuse_released_total counter\n"
            "slate_prefix_reuse_released_total %llu\n",
        (unsigned long long)m->prefix_reuse_released);
    put(&o, "# HELP slate_rejected_total Requests refused with 503 (queue full or timeout).\n"
            "# TYPE slate_rejected_total counter\nslate_rejected_total %llu\n",
        (unsigned long long)m->rejected_queue_full);
    put(&o, "# HELP slate_cancelled_total Generations cancelled by a client disconnect.\n"
            "# TYPE slate_cancelled_total counter\nslate_cancelled_total %llu\n",
        (unsigned long long)m->cancelled);
    hist(&o, "slate_ttft_seconds", "Time to first token.", &m->ttft_s);
    hist(&o, "slate_decode_tokens_per_second", "Decode speed per request.", &m->tokens_per_s);
    pthread_mutex_unlock(&m->mu);
    put(&o, "# HELP slate_slots_busy Slots running a request.\n# TYPE slate_slots_busy gauge\n"
            "slate_slots_busy %d\n", busy);
    put(&o, "# HELP slate_slots Slots configured.\n# TYPE slate_slots gauge\nslate_slots %d\n",
        n_slots);
    put(&o, "# HELP slate_queue_length Requests waiting for a slot.\n"
            "# TYPE slate_queue_length gauge\nslate_queue_length %d\n", queue_len);
    put(&o, "# HELP slate_kv_bytes_used KV cache bytes holding tokens, all slots.\n"
            "# TYPE slate_kv_bytes_used gauge\nslate_kv_bytes_used %zu\n", kv_bytes);
    return o.p;
}
