/*
 * pressure.c - the model's list of states, the memory budget across them, and the memory
 * pressure ladder (slate_model_pressure), with an optional Linux watcher thread.
 *
 * The model keeps its live states on a list guarded by states_mu; a state is idle when nobody
 * holds its busy flag. A pressure pass takes states_mu (so no state is freed under it), then
 * tries each state's busy flag: an idle state is then ours for the duration of the step, exactly
 * as if the pass were a call on it, so the steps never race with the state's owner. A busy state
 * is skipped at steps 1-2; at step 3 it gets reset_req and resets itself at the end of its call
 * (slate__state_leave) or at the start of its next one (slate__state_enter).
 *
 * Ladder: 1 trim (release cache pages past the length and scratch outside the logits; nothing
 * is lost), 2 spill (write the state to spill_dir with the persistence format, release its
 * cache; the next call reads it back), 3 reset (drop what is still in memory and say how much
 * was lost). Every action produces an event (callback) or a stderr line. A pass never allocates
 * except for a spill file's name and stdio's buffer: when those fail the spill is reported as
 * failed and the ladder continues.
 */
#define _POSIX_C_SOURCE 200809L
#include "plan/model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Pressure takes an idle state like a call would, but marks it IN_PRESSURE so that the owner's
 * next call waits for the step instead of failing with E_BUSY. */
static bool acquire(slate_state *st) {
    int expect = SLATE__IDLE;
    return atomic_compare_exchange_strong(&st->busy, &expect, SLATE__IN_PRESSURE);
}
static void release(slate_state *st) { slate__state_release(st); }

static const char *level_name(slate_pressure_level l) {
    switch (l) {
    case SLATE_PRESSURE_NONE: return "none";
    case SLATE_PRESSURE_LOW: return "low";
    case SLATE_PRESSURE_MEDIUM: return "medium";
    case SLATE_PRESSURE_CRITICAL: return "critical";
    }
    return "?";
}

/* ---- list and budget --------------------------------------------------------------------- */

slate_status slate__state_register(slate_state *st, const slate_plan_params *pp,
                                   slate_error *err) {
    slate_model *m = st->model;
    slate_status s = SLATE_OK;
    pthread_mutex_lock(&m->states_mu);
    if (m->mem_budget_bytes) {
        int32_t n_live = 0;
        for (slate_state *o = m->states_head; o; o = o->next) n_live++;
        slate_plan_params q = *pp;
        q.budget_bytes = m->mem_budget_bytes;
        slate_plan plan;
        s = slate__plan(&m->prog, &m->hp, m->state_group, m->state_window, m->weights_mapped, &q,
                        m->states_bytes,
                        &plan, err);
        if (!s && !plan.fits)
            s = slate__plan_budget_fail(&plan, "state", m->states_bytes, n_live, err);
    }
    if (!s) {
        st->next = m->states_head;
        st->prev = NULL;
        if (m->states_head) m->states_head->prev = st;
        m->states_head = st;
        m->states_bytes += st->plan_bytes;
    }
    pthread_mutex_unlock(&m->states_mu);
    return s;
}

void slate__state_unregister(slate_state *st) {
    slate_model *m = st->model;
    pthread_mutex_lock(&m->states_mu);
    if (st->prev) st->prev->next = st->next;
    else if (m->states_head == st) m->states_head = st->next;
    if (st->next) st->next->prev = st->prev;
    st->prev = st->next = NULL;
    m->states_bytes -= st->plan_bytes;
    pthread_mutex_unlock(&m->states_mu);
}

/* ---- events ------------------------------------------------------------------------------ */

static void emit(const slate_model *m, slate_pressure_action a, slate_pressure_level lvl,
                 slate_state *st, int32_t n_tokens, size_t bytes, const char *path,
                 const char *fmt, ...) SLATE__PRINTF(8, 9);
static void emit(const slate_model *m, slate_pressure_action a, slate_pressure_level lvl,
                 slate_state *st, int32_t n_tokens, size_t bytes, const char *path,
                 const char *fmt, ...) {
    char msg[768];
    int n = snprintf(msg, sizeof msg, "slate: memory pressure (%s): ", level_name(lvl));
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof msg) vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    slate_pressure_event ev = {a, lvl, st, n_tokens, bytes, path, msg};
    if (m->on_pressure) m->on_pressure(m->pressure_user, &ev);
    else fprintf(stderr, "%s\n", msg);
}

/* "12.0 KiB", "25.4 MiB": a log line's sizes. */
typedef struct hbuf {
    char s[32];
} hbuf;
static hbuf human(size_t b) {
    hbuf h;
    if (b < 1024 * 1024) snprintf(h.s, sizeof h.s, "%.1f KiB", (double)b / 1024.0);
    else snprintf(h.s, sizeof h.s, "%.1f MiB", (double)b / (1024.0 * 1024.0));
    return h;
}

/* ---- the steps (caller holds the state's busy flag) -------------------------------------- */

/* Empties the state, releasing its cache and scratch pages (the last logits' pages stay mapped
 * as they were: a caller may still hold a pointer to them). Returns the positions dropped. */
static int32_t do_reset(slate_state *st, slate_pressure_level lvl, size_t *freed_out) {
    int32_t n = st->length;
    size_t freed = slate__kv_trim(st, 0);
    st->length = 0;
    slate__kv_first_clear(st);
    st->n_logit_rows = 0;
    if (freed_out) *freed_out = freed;
    emit(st->model, SLATE_PRESSURE_RESET, lvl, st, n, freed, NULL, "reset a conversation: %d "
         "positions were dropped (%s released)", n, human(freed).s);
    return n;
}

void slate__state_forget(slate_state *st) {
    st->lost_tokens = 0;
    if (st->spilled) {
        remove(st->spill_path);
        slate__free(st->spill_path);
        st->spill_path = NULL;
        st->spilled = false;
    }
}

static bool spill(slate_state *st, slate_pressure_level lvl, size_t *freed) {
    slate_model *m = st->model;
    /* spill_seq counts per model, and several models (or one package opened twice) may share
     * a spill_dir: the model's address, unique among the live models of this process, keeps
     * their files apart (the writer would otherwise replace another model's spill). */
    char name[96];
    snprintf(name, sizeof name, "/slate-spill-%ld-%" PRIxPTR "-%" PRIu64 ".state",
             (long)getpid(), (uintptr_t)m, m->spill_seq++);
    size_t dl = strlen(m->spill_dir);
    char *path = slate__malloc(dl + strlen(name) + 1);
    if (!path) {
        emit(m, SLATE_PRESSURE_SPILL_FAILED, lvl, st, st->length, 0, NULL,
             "could not spill a state of %d positions: out of memory for its file name",
             (int32_t)st->length);
        return false;
    }
    memcpy(path, m->spill_dir, dl);
    strcpy(path + dl, name);
    slate_error e;
    if (slate__state_save_locked(st, path, NULL, &e) != SLATE_OK) {
        emit(m, SLATE_PRESSURE_SPILL_FAILED, lvl, st, st->length, 0, path,
             "could not spill a state of %d positions: %s", (int32_t)st->length, e.message);
        slate__free(path);
        return false;
    }
    *freed = slate__kv_trim(st, 0);
    st->spilled = true;
    st->spill_path = path;
    emit(m, SLATE_PRESSURE_SPILLED, lvl, st, st->length, *freed, path, "spilled a state of %d "
         "positions to %s (%s released)", (int32_t)st->length, path, human(*freed).s);
    return true;
}

/* Reads a spilled state back; on failure the state is reset (reported). */
static slate_status restore(slate_state *st, slate_error *err) {
    slate__map map;
    slate_error e;
    size_t bytes = 0;
    slate_status s = slate__map_open(st->spill_path, &map, &e);
    if (!s) {
        bytes = map.size;
        s = slate__state_load_locked(st, map.data, map.size, "spill file", NULL, &e);
        slate__map_close(&map);
    }
    int32_t n = st->length;
    char *path = st->spill_path;
    st->spill_path = NULL;
    st->spilled = false;
    remove(path);
    if (!s) {
        emit(st->model, SLATE_PRESSURE_RESTORED, SLATE_PRESSURE_NONE, st, n, bytes, path, "read a spilled state of %d positions back from %s", n,
             path);
        slate__free(path);
        return SLATE_OK;
    }
    size_t freed = 0;
    do_reset(st, SLATE_PRESSURE_NONE, &freed);
    s = slate__fail(err, s, "the spilled state could not be read back from '%s' (%s); it was "
                    "reset: %d positions were dropped", path, e.message, n);
    slate__free(path);
    return s;
}

void slate__state_apply_reset(slate_state *st) {
    if (atomic_exchange(&st->reset_req, false) && st->length > 0 && !st->spilled)
        st->lost_tokens += do_reset(st, SLATE_PRESSURE_CRITICAL, NULL);
}

slate_status slate__state_enter(slate_state *st, bool report_lost, slate_error *err) {
    slate__state_apply_reset(st);
    if (st->lost_tokens > 0) {
        int32_t n = st->lost_tokens;
        st->lost_tokens = 0;
        if (report_lost)
            return slate__fail(err, SLATE_E_CANCELLED, "critical memory pressure reset this "
                               "state: %d positions were dropped; it is empty now", n);
    }
    return st->spilled ? restore(st, err) : SLATE_OK;
}

slate_status slate__state_leave(slate_state *st, slate_status s, slate_error *err) {
    if (!atomic_exchange(&st->reset_req, false) || st->length == 0 || st->spilled) return s;
    int32_t n = do_reset(st, SLATE_PRESSURE_CRITICAL, NULL);
    return slate__fail(err, SLATE_E_CANCELLED, "critical memory pressure during this call reset "
                       "the state: %d positions were dropped; it is empty now", n);
}

/* ---- the ladder -------------------------------------------------------------------------- */

slate_status slate_model_pressure(slate_model *m, slate_pressure_level level,
                                  slate_pressure_report *report, slate_error *err) {
    if (!m) return slate__fail(err, SLATE_E_INVALID_ARG, "model must not be NULL");
    if ((int)level < SLATE_PRESSURE_NONE || (int)level > SLATE_PRESSURE_CRITICAL)
        return slate__fail(err, SLATE_E_INVALID_ARG, "pressure level %d outside 0..3",
                           (int)level);
    slate_pressure_report r;
    memset(&r, 0, sizeof r);
    if (level == SLATE_PRESSURE_NONE) {
        if (report) *report = r;
        return SLATE_OK;
    }
    if (level >= SLATE_PRESSURE_MEDIUM && !m->spill_dir)
        emit(m, SLATE_PRESSURE_SPILL_FAILED, level, NULL, 0, 0, NULL, "no spill directory is "
             "configured (slate_model_params.spill_dir): idle states cannot be spilled");
    pthread_mutex_lock(&m->states_mu);
    for (slate_state *st = m->states_head; st; st = st->next) {
        if (!acquire(st)) {
            r.n_busy++;
            if (level >= SLATE_PRESSURE_CRITICAL) atomic_store(&st->reset_req, true);
            continue;
        }
        size_t freed = slate__kv_trim(st, st->spilled ? 0 : st->length);
        if (!st->spilled) freed += slate__kv_release_window(st, true); /* any whole page */
        if (freed) {
            r.n_trimmed++;
            r.bytes_released += freed;
            emit(m, SLATE_PRESSURE_TRIMMED, level, st, st->length, freed, NULL, "trimmed an idle "
                 "state of %d positions (%s released)", (int32_t)st->length, human(freed).s);
        }
        if (level >= SLATE_PRESSURE_MEDIUM && m->spill_dir && !st->spilled && st->length > 0) {
            freed = 0;
            if (spill(st, level, &freed)) {
                r.n_spilled++;
                r.bytes_released += freed;
            } else {
                r.n_spill_failed++;
            }
        }
        if (level >= SLATE_PRESSURE_CRITICAL && !st->spilled && st->length > 0) {
            freed = 0;
            st->lost_tokens += do_reset(st, level, &freed);
            r.n_reset++;
            r.bytes_released += freed;
        }
        release(st);
    }
    pthread_mutex_unlock(&m->states_mu);
    if (report) *report = r;
    return SLATE_OK;
}

slate_status slate_state_get_memory(slate_state *st, slate_state_memory *mem) {
    if (!st || !mem) return SLATE_E_INVALID_ARG;
    if (!slate__state_acquire(st)) return SLATE_E_BUSY;
    memset(mem, 0, sizeof *mem);
    mem->kv_reserved_bytes = st->kv_bytes;
    mem->scratch_reserved_bytes = st->scratch_bytes;
    slate__kv_resident(st, &mem->kv_resident_bytes, &mem->scratch_resident_bytes);
    mem->spilled = st->spilled;
    release(st);
    return SLATE_OK;
}

/* ---- watcher ----------------------------------------------------------------------------- */

/* "some avg10=12.34 ..." / "full avg10=..." -> avg10 of that line, or -1. */
static double psi_avg10(const char *text, const char *kind) {
    size_t kl = strlen(kind);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, kind, kl) != 0 || l[kl] != ' ') continue;
        const char *a = strstr(l, "avg10=");
        const char *nl = strchr(l, '\n');
        if (!a || (nl && a > nl)) return -1;
        return strtod(a + 6, NULL);
    }
    return -1;
}

/* Thresholds: "some" is the share of the last 10 s in which at least one task waited for
 * memory, "full" the share in which all did. Waiting at all 10% of the time is worth trimming;
 * everything stalled 2% of the time means reclaim is struggling (spill); 10% means the system
 * is thrashing (reset). */
slate_pressure_level slate__psi_level(const char *text) {
    if (!text) return SLATE_PRESSURE_NONE;
    double some = psi_avg10(text, "some"), full = psi_avg10(text, "full");
    if (full >= 10.0) return SLATE_PRESSURE_CRITICAL;
    if (full >= 2.0) return SLATE_PRESSURE_MEDIUM;
    if (some >= 10.0) return SLATE_PRESSURE_LOW;
    return SLATE_PRESSURE_NONE;
}

/* cgroup v2 memory.events counter "key N". */
static long long events_get(const char *text, const char *key) {
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, key, kl) == 0 && l[kl] == ' ') return strtoll(l + kl + 1, NULL, 10);
    return 0;
}

struct slate__watcher {
    slate_model *m;
    int32_t period_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    long long high, max; /* last seen memory.events counters */
};

static bool read_text(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return true;
}

static slate_pressure_level poll_once(struct slate__watcher *w) {
    char text[1024];
    slate_pressure_level lvl = SLATE_PRESSURE_NONE;
    if (read_text("/proc/pressure/memory", text, sizeof text)) lvl = slate__psi_level(text);
    if (read_text("/sys/fs/cgroup/memory.events", text, sizeof text)) {
        long long high = events_get(text, "high"), max = events_get(text, "max") +
                                                         events_get(text, "oom");
        /* A new "max" event means an allocation hit the limit; "high" that reclaim kicked in. */
        if (max > w->max && w->max >= 0) lvl = SLATE_PRESSURE_CRITICAL;
        else if (high > w->high && w->high >= 0 && lvl < SLATE_PRESSURE_MEDIUM)
            lvl = SLATE_PRESSURE_MEDIUM;
        w->high = high;
        w->max = max;
    }
    return lvl;
}

static void *watch(void *arg) {
    struct slate__watcher *w = arg;
    (void)poll_once(w); /* the first read only sets the event baselines */
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = ts.tv_nsec + (long long)w->period_ms * 1000000;
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (w->stop) break;
        pthread_mutex_unlock(&w->mu);
        slate_pressure_level lvl = poll_once(w);
        if (lvl != SLATE_PRESSURE_NONE) slate_model_pressure(w->m, lvl, NULL, NULL);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

slate_status slate__watcher_start(slate_model *m, int32_t period_ms, slate_error *err) {
    struct slate__watcher *w = slate__calloc(1, sizeof *w);
    if (!w) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    w->m = m;
    w->period_ms = period_ms;
    w->high = w->max = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    int e = pthread_create(&w->thread, NULL, watch, w);
    if (e) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        slate__free(w);
        return slate__fail(err, SLATE_E_NOMEM, "cannot start the pressure watcher thread: %s",
                           strerror(e));
    }
    m->watcher = w;
    return SLATE_OK;
}

void slate__watcher_stop(slate_model *m) {
    struct slate__watcher *w = m->watcher;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    slate__free(w);
    m->watcher = NULL;
}
