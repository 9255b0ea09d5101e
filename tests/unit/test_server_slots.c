#define _POSIX_C_SOURCE 200809L
/* test_server_slots.c - the server's slot pool: prefix-affine choice, conversation binding,
 * LRU reclaim, the bounded queue and its timeout; the constant-time key comparison; the
 * Prometheus rendering. */
#include "testutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

static srv_slot g_slots[3];
static srv_pool g_pool;

static void reset_pool(int n, int queue_max) {
    memset(g_slots, 0, sizeof g_slots);
    memset(&g_pool, 0, sizeof g_pool);
    for (int i = 0; i < n; i++) {
        g_slots[i].index = i;
        g_slots[i].ledger = calloc(64, sizeof(int32_t));
        g_slots[i].cap_ledger = 64;
    }
    g_pool.slots = g_slots;
    g_pool.n = n;
    g_pool.queue_max = queue_max;
    pthread_mutex_init(&g_pool.mu, NULL);
    pthread_cond_init(&g_pool.cv, NULL);
}

static void free_pool(void) {
    for (int i = 0; i < g_pool.n; i++) free(g_slots[i].ledger);
}

static void set_ledger(int i, const int32_t *ids, int32_t n) {
    memcpy(g_slots[i].ledger, ids, sizeof(int32_t) * (size_t)n);
    g_slots[i].n_ledger = n;
}

static void request_goes_to_slot_with_longest_common_prefix(void **st) {
    (void)st;
    reset_pool(3, 4);
    int32_t a[] = {1, 2, 3, 4, 5}, b[] = {1, 2, 9, 9}, req[] = {1, 2, 3, 4, 7, 8};
    set_ledger(0, b, 4);
    set_ledger(1, a, 5);
    srv_slot *s;
    int32_t reused;
    assert_int_equal(srv_pool_acquire(&g_pool, req, 6, "", 1, &s, &reused), SRV_ACQ_OK);
    assert_int_equal(s->index, 1);
    assert_int_equal(reused, 4);
    srv_pool_release(&g_pool, s);
    free_pool();
}

static void cold_requests_take_the_least_recently_used_idle_slot(void **st) {
    (void)st;
    reset_pool(3, 4);
    srv_slot *s;
    int32_t reused, req[] = {42};
    g_slots[0].last_used = 5;
    g_slots[1].last_used = 2;
    g_slots[2].last_used = 9;
    assert_int_equal(srv_pool_acquire(&g_pool, req, 1, NULL, 1, &s, &reused), SRV_ACQ_OK);
    assert_int_equal(s->index, 1);
    assert_int_equal(reused, 0);
    srv_pool_release(&g_pool, s);
    free_pool();
}

static void conversation_id_keeps_its_slot(void **st) {
    (void)st;
    reset_pool(2, 4);
    srv_slot *s, *t;
    int32_t reused, x[] = {1, 2, 3}, y[] = {1, 2, 3};
    assert_int_equal(srv_pool_acquire(&g_pool, x, 3, "alice", 1, &s, &reused), SRV_ACQ_OK);
    set_ledger(s->index, x, 3);
    int bound = s->index;
    srv_pool_release(&g_pool, s);
    /* Another slot shares the same prefix and is less recently used: alice still gets hers. */
    set_ledger(1 - bound, y, 3);
    assert_int_equal(srv_pool_acquire(&g_pool, y, 3, "alice", 1, &t, &reused), SRV_ACQ_OK);
    assert_int_equal(t->index, bound);
    assert_int_equal(reused, 3);
    srv_pool_release(&g_pool, t);
    free_pool();
}

static void full_queue_is_refused_and_waiters_time_out(void **st) {
    (void)st;
    reset_pool(1, 0);
    srv_slot *s, *t;
    int32_t reused, x[] = {1};
    assert_int_equal(srv_pool_acquire(&g_pool, x, 1, NULL, 1, &s, &reused), SRV_ACQ_OK);
    assert_int_equal(srv_pool_acquire(&g_pool, x, 1, NULL, 1, &t, &reused), SRV_ACQ_QUEUE_FULL);
    g_pool.queue_max = 1;
    assert_int_equal(srv_pool_acquire(&g_pool, x, 1, NULL, 0.05, &t, &reused), SRV_ACQ_TIMEOUT);
    assert_int_equal(g_pool.n_waiting, 0);
    srv_pool_release(&g_pool, s);
    free_pool();
}

static void *release_later(void *arg) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    srv_pool_release(&g_pool, arg);
    return NULL;
}

static void a_waiter_gets_the_slot_when_it_is_released(void **st) {
    (void)st;
    reset_pool(1, 2);
    srv_slot *s, *t;
    int32_t reused, x[] = {1};
    assert_int_equal(srv_pool_acquire(&g_pool, x, 1, NULL, 1, &s, &reused), SRV_ACQ_OK);
    pthread_t th;
    pthread_create(&th, NULL, release_later, s);
    assert_int_equal(srv_pool_acquire(&g_pool, x, 1, NULL, 5, &t, &reused), SRV_ACQ_OK);
    assert_ptr_equal(t, s);
    pthread_join(th, NULL);
    srv_pool_release(&g_pool, t);
    assert_int_equal(srv_pool_busy(&g_pool, NULL), 0);
    free_pool();
}

static int g_gone_calls;
static bool gone_on_third_call(void *user) {
    (void)user;
    return ++g_gone_calls >= 3;
}

static void a_waiter_whose_client_left_leaves_the_queue(void **st) {
    (void)st;
    reset_pool(1, 1);
    srv_slot *s, *t;
    int32_t reused, x[] = {1};
    assert_int_equal(srv_pool_acquire(&g_pool, x, 1, NULL, 1, &s, &reused), SRV_ACQ_OK);
    g_gone_calls = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(srv_pool_acquire_until(&g_pool, x, 1, NULL, 30, gone_on_third_call, NULL,
                                            &t, &reused), SRV_ACQ_GONE);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* Asked every SRV_GONE_POLL_S: gone on the third look, long before the 30 s timeout. */
    assert_int_equal(g_gone_calls, 3);
    assert_true(waited >= 2.5 * SRV_GONE_POLL_S && waited < 10 * SRV_GONE_POLL_S);
    assert_null(t);
    assert_int_equal(g_pool.n_waiting, 0);
    /* A waiter whose client stays still times out as before. */
    g_gone_calls = -1000;
    assert_int_equal(srv_pool_acquire_until(&g_pool, x, 1, NULL, 0.05, gone_on_third_call, NULL,
                                            &t, &reused), SRV_ACQ_TIMEOUT);
    srv_pool_release(&g_pool, s);
    free_pool();
}

static void api_key_comparison_checks_every_byte(void **st) {
    (void)st;
    assert_true(srv_secret_equal("sk-abc", "sk-abc"));
    assert_false(srv_secret_equal("sk-abd", "sk-abc"));
    assert_false(srv_secret_equal("sk-ab", "sk-abc"));
    assert_false(srv_secret_equal("sk-abcd", "sk-abc"));
    assert_false(srv_secret_equal("", "sk-abc"));
}

static void metrics_render_counters_and_cumulative_histograms(void **st) {
    (void)st;
    srv_metrics m;
    srv_metrics_init(&m);
    m.requests_total[0] = 3;
    m.prefix_reuse_hits = 2;
    srv_metrics_observe(&m.ttft_s, 0.02);
    srv_metrics_observe(&m.ttft_s, 100);
    char *text = srv_metrics_render(&m, 1, 2, 0, 4096);
    assert_non_null(strstr(text, "slate_requests_total{endpoint=\"chat_completions\"} 3\n"));
    assert_non_null(strstr(text, "slate_prefix_reuse_hits_total 2\n"));
    assert_non_null(strstr(text, "slate_ttft_seconds_bucket{le=\"0.025\"} 1\n"));
    assert_non_null(strstr(text, "slate_ttft_seconds_bucket{le=\"30\"} 1\n"));
    assert_non_null(strstr(text, "slate_ttft_seconds_bucket{le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(text, "slate_slots_busy 1\n"));
    assert_non_null(strstr(text, "slate_kv_bytes_used 4096\n"));
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_goes_to_slot_with_longest_common_prefix),
        cmocka_unit_test(cold_requests_take_the_least_recently_used_idle_slot),
        cmocka_unit_test(conversation_id_keeps_its_slot),
        cmocka_unit_test(full_queue_is_refused_and_waiters_time_out),
        cmocka_unit_test(a_waiter_whose_client_left_leaves_the_queue),
        cmocka_unit_test(a_waiter_gets_the_slot_when_it_is_released),
        cmocka_unit_test(api_key_comparison_checks_every_byte),
        cmocka_unit_test(metrics_render_counters_and_cumulative_histograms),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
