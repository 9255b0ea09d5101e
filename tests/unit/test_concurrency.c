/* test_concurrency.c - one model, several threads (run under ThreadSanitizer in CI: .ci/run,
 * build-tsan, `ctest -R concurrency`):
 * - several conversations at once, each on its own state, give exactly the logits they give
 *   alone;
 * - a second call on a state that is running one returns SLATE_E_BUSY, never races;
 * - memory pressure (trim, spill, and critical resets) concurrent with predicts: conversations
 *   that are not reset continue bit-identically, reset ones are told (E_CANCELLED), start over
 *   and end identical too. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tinymodel.h"

#define N_CONV 4
#define CONV_LEN 40

typedef struct fx {
    slate_model *m;
    atomic_int n_events; /* pressure events (the callback runs on several threads) */
    int32_t ids[N_CONV][CONV_LEN];
    float ref[N_CONV][TM_VOCAB];
} fx;

static void sleep_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static void on_event(void *user, const slate_pressure_event *ev) {
    fx *f = user;
    (void)ev;
    atomic_fetch_add(&f->n_events, 1);
}

static int setup(void **stp) {
    fx *f = calloc(1, sizeof *f);
    tm_opts o = tm_default(); /* context 64, max query 16 */
    const char *path = tu_tmp("conc.slate");
    slate_error e;
    assert_int_equal(tm_write(path, &o, &e), SLATE_OK);
    static char spill[512];
    snprintf(spill, sizeof spill, "%s", tu_tmp("spill"));
    mkdir(spill, 0700);
    slate_model_params mp = slate_model_default_params();
    mp.n_threads = 2;
    mp.spill_dir = spill;
    mp.on_pressure = on_event;
    mp.pressure_user = f;
    assert_int_equal(slate_model_open(path, &mp, &f->m, &e), SLATE_OK);
    /* References: each conversation alone, one token per call. */
    for (int c = 0; c < N_CONV; c++) {
        for (int i = 0; i < CONV_LEN; i++) f->ids[c][i] = 3 + (c * 37 + i * 11) % 256;
        slate_state *st;
        assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
        for (int i = 0; i < CONV_LEN; i++)
            assert_int_equal(slate_state_predict(st, &f->ids[c][i], 1, NULL, NULL), SLATE_OK);
        memcpy(f->ref[c], slate_state_logits(st, NULL), sizeof f->ref[c]);
        slate_state_free(st);
    }
    *stp = f;
    return 0;
}
static int teardown(void **stp) {
    fx *f = *stp;
    assert_int_equal(slate_model_close(f->m), SLATE_OK);
    free(f);
    return 0;
}

typedef struct conv {
    fx *f;
    int c;
    int n_cancelled;
    int bad_status; /* a status other than OK / E_CANCELLED */
    bool match;
    bool slow;      /* pause between calls so pressure finds the state idle */
} conv;

/* One conversation on its own state, one token per call; starts over when pressure resets it. */
static void *run_conv(void *arg) {
    conv *cv = arg;
    slate_state *st;
    if (slate_state_create(cv->f->m, NULL, &st, NULL) != SLATE_OK) {
        cv->bad_status = -1;
        return NULL;
    }
    for (int i = 0; i < CONV_LEN;) {
        slate_status s = slate_state_predict(st, &cv->f->ids[cv->c][i], 1, NULL, NULL);
        if (s == SLATE_OK) {
            i++;
            if (cv->slow) sleep_us(500);
        } else if (s == SLATE_E_CANCELLED) {
            cv->n_cancelled++;
            i = 0;
        } else {
            cv->bad_status = (int)s;
            break;
        }
    }
    const float *l = slate_state_logits(st, NULL);
    cv->match = l && memcmp(l, cv->f->ref[cv->c], sizeof cv->f->ref[cv->c]) == 0;
    slate_state_free(st);
    return NULL;
}

static void conversations_on_several_threads_equal_each_alone(void **stp) {
    fx *f = *stp;
    pthread_t t[N_CONV];
    conv cv[N_CONV];
    for (int c = 0; c < N_CONV; c++) {
        cv[c] = (conv){f, c, 0, 0, false, false};
        assert_int_equal(pthread_create(&t[c], NULL, run_conv, &cv[c]), 0);
    }
    for (int c = 0; c < N_CONV; c++) {
        pthread_join(t[c], NULL);
        assert_int_equal(cv[c].bad_status, 0);
        assert_int_equal(cv[c].n_cancelled, 0);
        assert_true(cv[c].match);
    }
}

typedef struct shared {
    slate_state *st;
    const int32_t *ids;
    atomic_int n_busy, n_ok, n_other;
    atomic_bool stop;
} shared;

static void *hammer(void *arg) {
    shared *sh = arg;
    while (!atomic_load(&sh->stop)) {
        slate_status s = slate_state_predict(sh->st, sh->ids, 16, NULL, NULL);
        if (s == SLATE_E_CONTEXT_FULL) s = slate_state_reset(sh->st);
        if (s == SLATE_OK) atomic_fetch_add(&sh->n_ok, 1);
        else if (s == SLATE_E_BUSY) atomic_fetch_add(&sh->n_busy, 1);
        else atomic_fetch_add(&sh->n_other, 1);
    }
    return NULL;
}

static void second_call_on_a_running_state_is_busy(void **stp) {
    fx *f = *stp;
    slate_state *st;
    assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.st = st;
    sh.ids = f->ids[0];
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, hammer, &sh), 0);
    assert_int_equal(pthread_create(&b, NULL, hammer, &sh), 0);
    /* Both threads call until one of them has been refused, or 10 s. */
    for (int i = 0; i < 10000 && atomic_load(&sh.n_busy) == 0; i++) sleep_us(1000);
    atomic_store(&sh.stop, true);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    assert_int_equal(atomic_load(&sh.n_other), 0);
    assert_true(atomic_load(&sh.n_busy) > 0);
    assert_true(atomic_load(&sh.n_ok) > 0);
    slate_state_free(st);
}

/* slate_generate against a thread that calls predict and profile on the same state while the
 * generation runs: it holds the state from start to end, so it gives the same tokens as alone
 * and every one of those calls gets E_BUSY. The other thread calls only while a generation is
 * running (from its first piece until it returns), so it can neither starve the generations'
 * starts nor touch the state between two of them. */
typedef struct gen_race {
    slate_state *st;
    const int32_t *ids;
    slate_op_profile *prof;
    size_t n_ops;
    atomic_bool running, stop;
    atomic_int epoch, seen; /* main: epoch++ after each generation; poke: seen = epoch when idle */
    atomic_int n_busy, n_other; /* n_other: +1 per OK / CONTEXT_FULL, +1000 per anything else */
} gen_race;

static void *poke(void *arg) {
    gen_race *g = arg;
    while (!atomic_load(&g->stop)) {
        int e = atomic_load(&g->epoch);
        if (!atomic_load(&g->running)) {
            atomic_store(&g->seen, e);
            sched_yield();
            continue;
        }
        size_t n;
        slate_status s = slate_state_predict(g->st, g->ids, 1, NULL, NULL);
        slate_status p = slate_state_profile(g->st, g->prof, g->n_ops, &n);
        /* Busy while the generation runs; OK (or a full context) when the call lands after it
         * returned and before the main thread clears `running`. */
        atomic_fetch_add(s == SLATE_E_BUSY ? &g->n_busy : &g->n_other,
                         s == SLATE_E_BUSY || s == SLATE_OK || s == SLATE_E_CONTEXT_FULL ? 1 : 1000);
        atomic_fetch_add(p == SLATE_E_BUSY ? &g->n_busy : &g->n_other,
                         p == SLATE_E_BUSY || p == SLATE_OK ? 1 : 1000);
    }
    return NULL;
}

static bool mark_running(void *user, const char *text, size_t len) {
    (void)text;
    (void)len;
    if (user) { /* and a pause inside the call, for the other thread's calls to meet */
        atomic_store(&((gen_race *)user)->running, true);
        sleep_us(100);
    }
    return true;
}

static slate_status gen(slate_state *st, const int32_t *ids, int32_t *out, gen_race *g) {
    slate_generate_params gp = slate_generate_default_params();
    gp.sampler.temperature = 0;
    gp.ignore_eos = true;
    gp.n_predict = 24;
    gp.tokens_out = out;
    gp.tokens_cap = 24;
    gp.on_piece = mark_running;
    gp.user = g;
    slate_generate_result r;
    return slate_generate(st, ids, 8, &gp, &r, NULL);
}

static void generate_holds_its_state_against_another_thread(void **stp) {
    fx *f = *stp;
    slate_state *st;
    assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
    int32_t want[24], got[24];
    assert_int_equal(gen(st, f->ids[1], want, NULL), SLATE_OK);
    gen_race g;
    memset(&g, 0, sizeof g);
    g.st = st;
    g.ids = f->ids[2];
    assert_int_equal(slate_state_profile(st, NULL, 0, &g.n_ops), SLATE_E_BUFFER_TOO_SMALL);
    g.prof = calloc(g.n_ops, sizeof *g.prof);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, poke, &g), 0);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(slate_state_reset(st), SLATE_OK);
        assert_int_equal(gen(st, f->ids[1], got, &g), SLATE_OK);
        atomic_store(&g.running, false);
        int e = atomic_fetch_add(&g.epoch, 1) + 1;
        while (atomic_load(&g.seen) != e) sched_yield(); /* its last call has returned */
        assert_memory_equal(got, want, sizeof want);
    }
    atomic_store(&g.stop, true);
    pthread_join(t, NULL);
    assert_true(atomic_load(&g.n_other) < 1000); /* no status but BUSY, OK, CONTEXT_FULL */
    assert_true(atomic_load(&g.n_busy) > 0);
    free(g.prof);
    slate_state_free(st);
}

typedef struct presser {
    slate_model *m;
    atomic_bool stop;
    int n_critical; /* critical passes to make, then only low/medium */
    int n_passes;
} presser;

static void *press(void *arg) {
    presser *p = arg;
    while (!atomic_load(&p->stop)) {
        slate_pressure_level l = p->n_critical > 0 && p->n_passes % 7 == 6
                                     ? SLATE_PRESSURE_CRITICAL
                                     : p->n_passes % 2 ? SLATE_PRESSURE_MEDIUM
                                                       : SLATE_PRESSURE_LOW;
        if (l == SLATE_PRESSURE_CRITICAL) p->n_critical--;
        slate_model_pressure(p->m, l, NULL, NULL);
        p->n_passes++;
        sleep_us(200);
    }
    return NULL;
}

static void pressure_concurrent_with_predicts_never_corrupts_a_conversation(void **stp) {
    fx *f = *stp;
    for (int critical = 0; critical <= 1; critical++) {
        presser pr;
        memset(&pr, 0, sizeof pr);
        pr.m = f->m;
        pr.n_critical = critical ? 10 : 0;
        pthread_t tp, t[N_CONV];
        conv cv[N_CONV];
        assert_int_equal(pthread_create(&tp, NULL, press, &pr), 0);
        for (int c = 0; c < N_CONV; c++) {
            cv[c] = (conv){f, c, 0, 0, false, true};
            assert_int_equal(pthread_create(&t[c], NULL, run_conv, &cv[c]), 0);
        }
        int cancelled = 0;
        for (int c = 0; c < N_CONV; c++) {
            pthread_join(t[c], NULL);
            assert_int_equal(cv[c].bad_status, 0);
            assert_true(cv[c].match);
            cancelled += cv[c].n_cancelled;
        }
        atomic_store(&pr.stop, true);
        pthread_join(tp, NULL);
        assert_true(pr.n_passes > 0);
        assert_true(atomic_load(&f->n_events) > 0);
        if (!critical) assert_int_equal(cancelled, 0); /* trim and spill lose nothing */
        else fprintf(stderr, "[info] critical phase: %d pressure passes, %d resets seen by "
                             "the conversations\n", pr.n_passes, cancelled);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conversations_on_several_threads_equal_each_alone),
        cmocka_unit_test(second_call_on_a_running_state_is_busy),
        cmocka_unit_test(generate_holds_its_state_against_another_thread),
        cmocka_unit_test(pressure_concurrent_with_predicts_never_corrupts_a_conversation),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, setup, teardown);
}
