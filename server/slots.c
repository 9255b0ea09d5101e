/*
 * slots.c - the server's conversation slots. Each slot owns one state (through the backend)
 * and the ledger of ids that state holds. A request goes to the slot bound to its conversation
 * id, else to the idle slot whose ledger shares the longest prefix with the request's ids (so a
 * client that resends the whole history gets its cache back), ties and cold requests going to
 * the least recently used idle slot (idle slots are reclaimed LRU). When every slot is busy the
 * request waits in a bounded queue; past the bound, or past the wait timeout, it is refused; a
 * waiter whose client has gone (as a callback says) leaves the queue.
 * Calls on one slot are serialized by the busy flag under the pool mutex.
 */
#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include <errno.h>
#include <string.h>
#include <time.h>

int32_t srv_common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

static srv_slot *pick(srv_pool *p, const int32_t *ids, int32_t n, const char *conv_id,
                      int32_t *reused, bool *bound_busy) {
    *bound_busy = false;
    if (conv_id && conv_id[0])
        for (int i = 0; i < p->n; i++)
            if (strcmp(p->slots[i].conv_id, conv_id) == 0) {
                if (p->slots[i].busy) {
                    *bound_busy = true;
                    return NULL;
                }
                *reused = srv_common_prefix(p->slots[i].ledger, p->slots[i].n_ledger, ids, n);
                return &p->slots[i];
            }
    srv_slot *best = NULL;
    int32_t best_len = -1;
    for (int i = 0; i < p->n; i++) {
        srv_slot *s = &p->slots[i];
        if (s->busy) continue;
        int32_t l = srv_common_prefix(s->ledger, s->n_ledger, ids, n);
        /* A slot bound to another conversation is only taken when nothing better is idle. */
        if (s->conv_id[0] && l == 0) l = -1;
        if (!best || l > best_len || (l == best_len && s->last_used < best->last_used)) {
            best = s;
            best_len = l;
        }
    }
    if (best) *reused = best_len > 0 ? best_len : 0;
    return best;
}

static struct timespec after(double s) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += (time_t)s;
    t.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

static bool before(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

int srv_pool_acquire(srv_pool *p, const int32_t *ids, int32_t n, const char *conv_id,
                     double timeout_s, srv_slot **out, int32_t *reused) {
    return srv_pool_acquire_until(p, ids, n, conv_id, timeout_s, NULL, NULL, out, reused);
}

int srv_pool_acquire_until(srv_pool *p, const int32_t *ids, int32_t n, const char *conv_id,
                           double timeout_s, bool (*gone)(void *user), void *user,
                           srv_slot **out, int32_t *reused) {
    struct timespec deadline = after(timeout_s);
    *out = NULL;
    *reused = 0;
    pthread_mutex_lock(&p->mu);
    bool bound_busy;
    srv_slot *s = pick(p, ids, n, conv_id, reused, &bound_busy);
    if (!s) {
        if (p->n_waiting >= p->queue_max) {
            pthread_mutex_unlock(&p->mu);
            return SRV_ACQ_QUEUE_FULL;
        }
        p->n_waiting++;
        bool left = false;
        while (!(s = pick(p, ids, n, conv_id, reused, &bound_busy))) {
            /* Without a gone callback, sleep until the deadline; with one, wake up every
             * SRV_GONE_POLL_S to ask it (it is called without the mutex held). */
            struct timespec wake = deadline;
            if (gone) {
                struct timespec poll = after(SRV_GONE_POLL_S);
                if (before(&poll, &deadline)) wake = poll;
            }
            int rc = pthread_cond_timedwait(&p->cv, &p->mu, &wake);
            if (rc == ETIMEDOUT && !before(&wake, &deadline)) {
                s = pick(p, ids, n, conv_id, reused, &bound_busy);
                break;
            }
            if (rc == ETIMEDOUT && gone) {
                pthread_mutex_unlock(&p->mu);
                left = gone(user);
                pthread_mutex_lock(&p->mu);
                if (left) break;
            }
        }
        p->n_waiting--;
        if (!s) {
            pthread_mutex_unlock(&p->mu);
            return left ? SRV_ACQ_GONE : SRV_ACQ_TIMEOUT;
        }
    }
    s->busy = true;
    if (conv_id && conv_id[0] && strcmp(s->conv_id, conv_id) != 0) {
        /* Rebinding: the slot's previous conversation loses its cache affinity. */
        strncpy(s->conv_id, conv_id, sizeof s->conv_id - 1);
        s->conv_id[sizeof s->conv_id - 1] = '\0';
    } else if (!conv_id || !conv_id[0]) {
        s->conv_id[0] = '\0';
    }
    pthread_mutex_unlock(&p->mu);
    *out = s;
    return SRV_ACQ_OK;
}

void srv_pool_release(srv_pool *p, srv_slot *s) {
    pthread_mutex_lock(&p->mu);
    s->busy = false;
    s->last_used = ++p->tick;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

int srv_pool_busy(srv_pool *p, int *queue_len) {
    pthread_mutex_lock(&p->mu);
    int busy = 0;
    for (int i = 0; i < p->n; i++) busy += p->slots[i].busy;
    if (queue_len) *queue_len = p->n_waiting;
    pthread_mutex_unlock(&p->mu);
    return busy;
}

bool srv_secret_equal(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    /* Compare every byte of the expected secret whatever the input, so time does not depend
     * on where the first difference is. */
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < lb; i++) diff |= (unsigned char)(b[i] ^ (i < la ? a[i] : 0));
    return diff == 0;
}
