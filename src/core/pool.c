/*
 * pool.c - a persistent thread pool. Workers wait on a generation counter: slate__pool_run
 * publishes a job, bumps the generation, runs share 0 itself, and waits until every worker has
 * finished its share. Waiting threads spin for up to SPIN_NS before sleeping on a condition
 * variable, because decode issues hundreds of small jobs per token and a sleep/wake per job
 * costs more than the job. With one thread the pool runs jobs inline and creates nothing.
 */
#define _POSIX_C_SOURCE 200809L
#include "core.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include <time.h>

/* How long a waiting thread spins (with pause) before it sleeps. A count of iterations was
 * used before: 20000 plain loads are about 6 us here, shorter than the gaps inside one decode
 * step (a matmul's uneven end, rope and kv_write on the main thread), so workers slept between
 * jobs and each wake-up cost ~30 us in this VM: the second thread started attention 32 us late
 * per layer. TinyLlama int4, 2 threads, `slate run -n 128`: spinning 5 us -> 92 tok/s, 50 us
 * and longer -> 100-103; attention at depth 2048 2.25 -> 1.52 ms per token. 200 us covers the
 * gaps of a call with room to spare and bounds what an idle pool burns after a call. */
#define SPIN_NS 200000LL
#define SPIN_YIELD_AFTER_NS 10000LL

static long long mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
/* One wait step of a thread that has been waiting since t0: a pause while the wait is young,
 * then sched_yield, which hands the core to any other runnable thread (several states decoding
 * at once, more threads than cores) and returns at once when there is none. False once the
 * wait has lasted SPIN_NS: time to sleep. */
static inline bool spin_step(unsigned spins, long long t0) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
    if (spins % 16) return true;
    long long waited = mono_ns() - t0;
    if (waited > SPIN_YIELD_AFTER_NS) sched_yield();
    return waited <= SPIN_NS;
}

struct slate__pool {
    int n;
    int n_started;        /* workers 1..n_started-1 exist */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    pthread_cond_t cv_done;
    atomic_uint gen;      /* bumped once per job */
    atomic_int pending;   /* workers still running the current job */
    atomic_bool quit;
    slate__pool_fn fn;
    void *ctx;
};

typedef struct worker_arg {
    slate__pool *pool;
    int ith;
} worker_arg;

static void *worker(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    slate__free(arg);
    slate__pool *p = wa.pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        long long t0 = mono_ns();
        for (unsigned spins = 1; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
                                 !atomic_load(&p->quit); spins++) {
            if (!spin_step(spins, t0)) break;
        }
        if (g == seen && !atomic_load(&p->quit)) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = g;
        p->fn(p->ctx, wa.ith, p->n);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

slate_status slate__pool_create(int n_threads, slate__pool **out, slate_error *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > SLATE__MAX_THREADS)
        return slate__fail(err, SLATE_E_INVALID_ARG, "thread count %d outside 1..%d",
                           n_threads, SLATE__MAX_THREADS);
    slate__pool *p = slate__calloc(1, sizeof *p);
    if (!p) return slate__fail(err, SLATE_E_NOMEM, "out of memory creating the thread pool");
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    slate_status s = SLATE_OK;
    if (n_threads > 1) {
        p->threads = slate__calloc((size_t)n_threads, sizeof *p->threads);
        if (!p->threads) goto nomem;
        for (int i = 1; i < n_threads; i++) {
            worker_arg *wa = slate__malloc(sizeof *wa);
            if (!wa) goto nomem;
            wa->pool = p;
            wa->ith = i;
            int rc = pthread_create(&p->threads[i], NULL, worker, wa);
            if (rc != 0) {
                /* EAGAIN is as often a limit on threads (ulimit -u, a container's pids.max)
                 * as a lack of memory: say which call failed and why. */
                slate__free(wa);
                s = slate__fail(err, SLATE_E_NOMEM, "cannot start thread %d of a %d-thread "
                                "pool: %s (a limit on threads or memory; fewer threads may "
                                "do)", i, n_threads, strerror(rc));
                goto fail;
            }
            p->n_started = i + 1;
        }
    }
    *out = p;
    return SLATE_OK;
nomem:
    s = slate__fail(err, SLATE_E_NOMEM, "out of memory creating a %d-thread pool", n_threads);
fail:
    slate__pool_free(p);
    return s;
}

void slate__pool_free(slate__pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    slate__free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    slate__free(p);
}

int slate__pool_size(const slate__pool *p) { return p ? p->n : 1; }

void slate__pool_run(slate__pool *p, slate__pool_fn fn, void *ctx) {
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    long long t0 = mono_ns();
    for (unsigned spins = 1; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (!spin_step(spins, t0)) break;
    }
    if (atomic_load(&p->pending) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
