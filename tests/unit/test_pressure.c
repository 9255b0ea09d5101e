/* test_pressure.c - the memory-pressure ladder driven through slate_model_pressure: trimming
 * releases pages and changes nothing, a spilled state continues bit-identically after its
 * transparent restore, a reset state reports what was lost and works afterwards, a busy state
 * is reset at its next call, events reach the callback, the PSI parser, the watcher thread,
 * and lazy commitment of a fresh state's cache. */
#define _DEFAULT_SOURCE
#include "testutil.h"

#include <dirent.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan/model.h"
#include "tinymodel.h"

#define MAX_EVENTS 64

typedef struct fx {
    slate_model *m;
    const char *path;
    char spill[512];
    slate_pressure_event ev[MAX_EVENTS];
    char paths[MAX_EVENTS][512];
    int n_ev;
} fx;

static void on_event(void *user, const slate_pressure_event *ev) {
    fx *f = user;
    if (f->n_ev >= MAX_EVENTS) return;
    f->ev[f->n_ev] = *ev;
    snprintf(f->paths[f->n_ev], 512, "%s", ev->path ? ev->path : "");
    f->ev[f->n_ev].path = NULL;
    f->ev[f->n_ev].message = NULL;
    f->n_ev++;
}

static int count(const fx *f, slate_pressure_action a) {
    int n = 0;
    for (int i = 0; i < f->n_ev; i++) n += f->ev[i].action == a;
    return n;
}

static int setup(void **st) {
    fx *f = calloc(1, sizeof *f);
    tm_opts o = tm_default();
    o.n_ctx = 2048; /* caches span several pages, so trimming has something to release */
    o.max_query = 32;
    static char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp("pressure.slate"));
    slate_error e;
    assert_int_equal(tm_write(path, &o, &e), SLATE_OK);
    f->path = path;
    snprintf(f->spill, sizeof f->spill, "%s", tu_tmp("spill"));
    mkdir(f->spill, 0700);
    slate_model_params mp = slate_model_default_params();
    mp.spill_dir = f->spill;
    mp.on_pressure = on_event;
    mp.pressure_user = f;
    mp.n_threads = 1;
    assert_int_equal(slate_model_open(path, &mp, &f->m, &e), SLATE_OK);
    *st = f;
    return 0;
}
static int teardown(void **st) {
    fx *f = *st;
    assert_int_equal(slate_model_close(f->m), SLATE_OK);
    free(f);
    return 0;
}

static void fill_ids(int32_t *ids, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(3 + (seed * 2654435761u + (uint64_t)i * 40503u) % 256);
}

/* Feeds ids in chunks of 32. */
static void feed(slate_state *st, const int32_t *ids, int n) {
    for (int i = 0; i < n; i += 32) {
        slate_error e;
        int k = n - i < 32 ? n - i : 32;
        if (slate_state_predict(st, ids + i, k, NULL, &e)) fail_msg("predict: %s", e.message);
    }
}

static int n_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The reference: logits after feeding ids[0..n) into a fresh state. */
static void reference(slate_model *m, const int32_t *ids, int n, float *out) {
    slate_state *r;
    assert_int_equal(slate_state_create(m, NULL, &r, NULL), SLATE_OK);
    feed(r, ids, n);
    memcpy(out, slate_state_logits(r, NULL), sizeof(float) * TM_VOCAB);
    slate_state_free(r);
}

static void trim_releases_pages_past_the_length_and_changes_nothing(void **stp) {
    fx *f = *stp;
    int32_t ids[400];
    fill_ids(ids, 400, 3);
    slate_state *st;
    assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
    feed(st, ids, 300);
    assert_int_equal(slate_state_truncate(st, 40, NULL), SLATE_OK);
    slate_state_memory before, after;
    assert_int_equal(slate_state_get_memory(st, &before), SLATE_OK);
    f->n_ev = 0;
    slate_pressure_report r;
    assert_int_equal(slate_model_pressure(f->m, SLATE_PRESSURE_LOW, &r, NULL), SLATE_OK);
    assert_int_equal(r.n_trimmed, 1);
    assert_int_equal(r.n_spilled + r.n_reset, 0);
    assert_int_equal(count(f, SLATE_PRESSURE_TRIMMED), 1);
    assert_int_equal(slate_state_get_memory(st, &after), SLATE_OK);
    assert_true(after.kv_resident_bytes < before.kv_resident_bytes);
    assert_true(r.bytes_released >= before.kv_resident_bytes - after.kv_resident_bytes);
    assert_false(after.spilled);
    /* Continue after the trim: equals a fresh state fed the same ids. */
    feed(st, ids + 40, 60);
    float ref[TM_VOCAB];
    reference(f->m, ids, 100, ref);
    assert_memory_equal(slate_state_logits(st, NULL), ref, sizeof ref);
    slate_state_free(st);
}

static void spilled_state_is_restored_transparently_and_continues_bit_identically(void **stp) {
    fx *f = *stp;
    int32_t ids[200];
    fill_ids(ids, 200, 5);
    slate_state *st;
    assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
    feed(st, ids, 150);
    float logits_before[TM_VOCAB];
    memcpy(logits_before, slate_state_logits(st, NULL), sizeof logits_before);
    f->n_ev = 0;
    slate_pressure_report r;
    assert_int_equal(slate_model_pressure(f->m, SLATE_PRESSURE_MEDIUM, &r, NULL), SLATE_OK);
    assert_int_equal(r.n_spilled, 1);
    assert_int_equal(count(f, SLATE_PRESSURE_SPILLED), 1);
    assert_int_equal(n_files(f->spill), 1);
    slate_state_memory mem;
    assert_int_equal(slate_state_get_memory(st, &mem), SLATE_OK);
    assert_true(mem.spilled);
    assert_int_equal(mem.kv_resident_bytes, 0);
    /* The state still says what it holds, and its logits stay readable. */
    assert_int_equal(slate_state_length(st), 150);
    assert_memory_equal(slate_state_logits(st, NULL), logits_before, sizeof logits_before);
    /* Next call: read back, then continue. */
    feed(st, ids + 150, 50);
    assert_int_equal(count(f, SLATE_PRESSURE_RESTORED), 1);
    assert_int_equal(n_files(f->spill), 0);
    float ref[TM_VOCAB];
    reference(f->m, ids, 200, ref);
    assert_memory_equal(slate_state_logits(st, NULL), ref, sizeof ref);
    /* A second spill, then free: the file goes away with the state. */
    assert_int_equal(slate_model_pressure(f->m, SLATE_PRESSURE_MEDIUM, &r, NULL), SLATE_OK);
    assert_int_equal(n_files(f->spill), 1);
    slate_state_free(st);
    assert_int_equal(n_files(f->spill), 0);
}

static void critical_resets_idle_states_and_reports_what_was_lost(void **stp) {
    fx *f = *stp;
    slate_model *m;
    slate_model_params mp = slate_model_default_params(); /* no spill dir: step 2 skipped */
    mp.on_pressure = on_event;
    mp.pressure_user = f;
    assert_int_equal(slate_model_open(f->path, &mp, &m, NULL), SLATE_OK);
    int32_t ids[64];
    fill_ids(ids, 64, 7);
    slate_state *st;
    assert_int_equal(slate_state_create(m, NULL, &st, NULL), SLATE_OK);
    feed(st, ids, 37);
    f->n_ev = 0;
    slate_pressure_report r;
    assert_int_equal(slate_model_pressure(m, SLATE_PRESSURE_CRITICAL, &r, NULL), SLATE_OK);
    assert_int_equal(r.n_reset, 1);
    assert_int_equal(count(f, SLATE_PRESSURE_SPILL_FAILED), 1); /* "no spill directory" */
    assert_int_equal(count(f, SLATE_PRESSURE_RESET), 1);
    for (int i = 0; i < f->n_ev; i++)
        if (f->ev[i].action == SLATE_PRESSURE_RESET) {
            assert_int_equal(f->ev[i].n_tokens, 37);
            assert_ptr_equal(f->ev[i].state, st);
        }
    assert_int_equal(slate_state_length(st), 0);
    assert_null(slate_state_logits(st, NULL));
    slate_error e;
    /* The next call reports it, whichever it is: slate_generate continuing with an empty
     * prompt too (it said "empty prompt and no logits", E_INVALID_ARG). */
    slate_generate_params gp = slate_generate_default_params();
    gp.n_predict = 1;
    slate_generate_result gr;
    assert_int_equal(slate_generate(st, NULL, 0, &gp, &gr, &e), SLATE_E_CANCELLED);
    assert_non_null(strstr(e.message, "37 positions were dropped"));
    assert_int_equal(slate_state_predict(st, ids, 5, NULL, &e), SLATE_OK);
    assert_int_equal(slate_state_reset(st), SLATE_OK);
    /* Reported once; the state then works from empty like a fresh one. */
    feed(st, ids, 20);
    float ref[TM_VOCAB];
    reference(m, ids, 20, ref);
    assert_memory_equal(slate_state_logits(st, NULL), ref, sizeof ref);
    slate_state_free(st);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

/* A state inside a call cannot be touched: critical pressure marks it and it resets itself
 * when its call ends or, as here, at the start of its next one. Steps 1-2 skip it. */
static void busy_state_is_reset_at_its_next_call(void **stp) {
    fx *f = *stp;
    int32_t ids[32];
    fill_ids(ids, 32, 9);
    slate_state *st;
    assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
    feed(st, ids, 12);
    atomic_store(&st->busy, SLATE__IN_CALL); /* as if a predict were running */
    slate_pressure_report r;
    assert_int_equal(slate_model_pressure(f->m, SLATE_PRESSURE_CRITICAL, &r, NULL), SLATE_OK);
    assert_int_equal(r.n_busy, 1);
    assert_int_equal(r.n_reset + r.n_spilled + r.n_trimmed, 0);
    slate_error e;
    assert_int_equal(slate_state_predict(st, ids, 1, NULL, &e), SLATE_E_BUSY);
    atomic_store(&st->busy, SLATE__IDLE);
    assert_int_equal(slate_state_predict(st, ids, 1, NULL, &e), SLATE_E_CANCELLED);
    assert_non_null(strstr(e.message, "12 positions were dropped"));
    assert_int_equal(slate_state_length(st), 0);
    /* A reset acknowledges silently as well: no second report. */
    feed(st, ids, 3);
    atomic_store(&st->busy, SLATE__IN_CALL);
    assert_int_equal(slate_model_pressure(f->m, SLATE_PRESSURE_CRITICAL, &r, NULL), SLATE_OK);
    atomic_store(&st->busy, SLATE__IDLE);
    assert_int_equal(slate_state_reset(st), SLATE_OK);
    assert_int_equal(slate_state_predict(st, ids, 2, NULL, &e), SLATE_OK);
    slate_state_free(st);
}

/* A reset requested while a call other than predict held the state (a save, a truncate) is
 * still pending when the state goes idle. A successful load replaces the content: it
 * acknowledges that reset silently, and must not apply it to the rows it has just loaded. */
static void load_after_a_pending_reset_keeps_the_loaded_content(void **stp) {
    fx *f = *stp;
    int32_t ids[32];
    fill_ids(ids, 32, 13);
    slate_state *st;
    assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
    feed(st, ids, 20);
    const char *file = tu_tmp("pending-reset.state");
    assert_int_equal(slate_state_save(st, file, NULL, NULL), SLATE_OK);
    float want[TM_VOCAB];
    memcpy(want, slate_state_logits(st, NULL), sizeof want);
    atomic_store(&st->busy, SLATE__IN_CALL); /* as if a save or a truncate were running */
    slate_pressure_report r;
    assert_int_equal(slate_model_pressure(f->m, SLATE_PRESSURE_CRITICAL, &r, NULL), SLATE_OK);
    assert_int_equal(r.n_busy, 1);
    atomic_store(&st->busy, SLATE__IDLE);
    slate_error e;
    slate_status s = slate_state_load(st, file, NULL, &e);
    if (s) fail_msg("load: %s", e.message);
    assert_int_equal(slate_state_length(st), 20);
    assert_non_null(slate_state_logits(st, NULL));
    assert_memory_equal(slate_state_logits(st, NULL), want, sizeof want);
    /* The pending reset was acknowledged by the load: nothing is reported later. */
    assert_int_equal(slate_state_predict(st, ids + 20, 1, NULL, &e), SLATE_OK);
    assert_int_equal(slate_state_length(st), 21);
    remove(file);
    slate_state_free(st);
}

/* Two models sharing a spill folder (a server with several models, or one package opened
 * twice) number their spills independently: each spill must still get its own file, or a
 * state reads back the other's conversation (same package: same fingerprint, accepted). */
static void models_sharing_a_spill_dir_do_not_overwrite_each_others_spills(void **stp) {
    fx *f = *stp;
    slate_model_params mp = slate_model_default_params();
    mp.spill_dir = f->spill;
    mp.on_pressure = on_event;
    mp.pressure_user = f;
    mp.n_threads = 1;
    slate_model *m[2];
    slate_state *st[2], *ref[2];
    int32_t ids[2][64];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(slate_model_open(f->path, &mp, &m[k], NULL), SLATE_OK);
        fill_ids(ids[k], 64, 21 + (uint64_t)k);
        assert_int_equal(slate_state_create(m[k], NULL, &st[k], NULL), SLATE_OK);
        assert_int_equal(slate_state_create(m[k], NULL, &ref[k], NULL), SLATE_OK);
        feed(st[k], ids[k], 40);
        feed(ref[k], ids[k], 40);
        slate_pressure_report r;
        atomic_store(&ref[k]->busy, SLATE__IN_CALL); /* keep the reference out of the spill */
        assert_int_equal(slate_model_pressure(m[k], SLATE_PRESSURE_MEDIUM, &r, NULL), SLATE_OK);
        atomic_store(&ref[k]->busy, SLATE__IDLE);
        assert_int_equal(r.n_spilled, 1);
    }
    assert_int_equal(n_files(f->spill), 2);
    for (int k = 0; k < 2; k++) {
        slate_error e;
        slate_status s = slate_state_predict(st[k], ids[k] + 40, 1, NULL, &e);
        if (s) fail_msg("predict %d: %s", k, e.message);
        assert_int_equal(slate_state_predict(ref[k], ids[k] + 40, 1, NULL, NULL), SLATE_OK);
        assert_memory_equal(slate_state_logits(st[k], NULL), slate_state_logits(ref[k], NULL),
                            sizeof(float) * TM_VOCAB);
    }
    assert_int_equal(n_files(f->spill), 0);
    for (int k = 0; k < 2; k++) {
        slate_state_free(st[k]);
        slate_state_free(ref[k]);
        assert_int_equal(slate_model_close(m[k]), SLATE_OK);
    }
}

static void unreadable_spill_file_resets_the_state_with_a_message(void **stp) {
    fx *f = *stp;
    int32_t ids[64];
    fill_ids(ids, 64, 11);
    slate_state *st;
    assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
    feed(st, ids, 40);
    f->n_ev = 0;
    assert_int_equal(slate_model_pressure(f->m, SLATE_PRESSURE_MEDIUM, NULL, NULL), SLATE_OK);
    assert_int_equal(count(f, SLATE_PRESSURE_SPILLED), 1);
    const char *spill_path = NULL;
    for (int i = 0; i < f->n_ev; i++)
        if (f->ev[i].action == SLATE_PRESSURE_SPILLED) spill_path = f->paths[i];
    FILE *fp = fopen(spill_path, "r+b");
    assert_non_null(fp);
    fseek(fp, -3, SEEK_END);
    fputc('!', fp);
    fclose(fp);
    slate_error e;
    assert_int_equal(slate_state_predict(st, ids, 1, NULL, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "could not be read back"));
    assert_non_null(strstr(e.message, "40 positions were dropped"));
    assert_int_equal(slate_state_length(st), 0);
    assert_int_equal(n_files(f->spill), 0);
    feed(st, ids, 10);
    assert_int_equal(slate_state_length(st), 10);
    slate_state_free(st);
}

static void pressure_checks_its_arguments(void **stp) {
    fx *f = *stp;
    slate_error e;
    assert_int_equal(slate_model_pressure(NULL, SLATE_PRESSURE_LOW, NULL, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_model_pressure(f->m, (slate_pressure_level)4, NULL, &e),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "level 4 outside 0..3"));
    slate_pressure_report r;
    assert_int_equal(slate_model_pressure(f->m, SLATE_PRESSURE_NONE, &r, &e), SLATE_OK);
    assert_int_equal(r.n_trimmed + r.n_spilled + r.n_reset + r.n_busy, 0);
    slate_model_params mp = slate_model_default_params();
    mp.spill_dir = "/nonexistent-spill-dir";
    slate_model *m = NULL;
    assert_int_equal(slate_model_open(f->path, &mp, &m, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "/nonexistent-spill-dir"));
    mp.spill_dir = NULL;
    mp.pressure_watch_ms = -1;
    assert_int_equal(slate_model_open(f->path, &mp, &m, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "pressure_watch_ms -1"));
}

static void psi_text_maps_to_levels(void **stp) {
    (void)stp;
    static const struct {
        const char *text;
        slate_pressure_level want;
    } cases[] = {
        {"some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
         "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", SLATE_PRESSURE_NONE},
        {"some avg10=12.50 avg60=1.00 avg300=0.00 total=5\n"
         "full avg10=0.50 avg60=0.00 avg300=0.00 total=1\n", SLATE_PRESSURE_LOW},
        {"some avg10=40.00 avg60=1.00 avg300=0.00 total=5\n"
         "full avg10=3.00 avg60=0.00 avg300=0.00 total=1\n", SLATE_PRESSURE_MEDIUM},
        {"some avg10=90.00 avg60=1.00 avg300=0.00 total=5\n"
         "full avg10=25.00 avg60=0.00 avg300=0.00 total=1\n", SLATE_PRESSURE_CRITICAL},
        {"some avg10=15.00 avg60=1.00 avg300=0.00 total=5\n", SLATE_PRESSURE_LOW}, /* no full */
        {"garbage", SLATE_PRESSURE_NONE},
        {"", SLATE_PRESSURE_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (slate__psi_level(cases[i].text) != cases[i].want)
            fail_msg("case %zu: level %d, want %d", i, slate__psi_level(cases[i].text),
                     cases[i].want);
    assert_int_equal(slate__psi_level(NULL), SLATE_PRESSURE_NONE);
}

static void watcher_thread_starts_and_stops_with_the_model(void **stp) {
    fx *f = *stp;
    slate_model_params mp = slate_model_default_params();
    mp.pressure_watch_ms = 5;
    mp.on_pressure = on_event;
    mp.pressure_user = f;
    slate_model *m;
    assert_int_equal(slate_model_open(f->path, &mp, &m, NULL), SLATE_OK);
    assert_non_null(m->watcher);
    slate_state *st;
    assert_int_equal(slate_state_create(m, NULL, &st, NULL), SLATE_OK);
    int32_t ids[8];
    fill_ids(ids, 8, 1);
    for (int i = 0; i < 20; i++) {
        slate_status s = slate_state_predict(st, ids, 8, NULL, NULL);
        /* The host may really be under pressure: a reset is an answer, not a crash. */
        assert_true(s == SLATE_OK || s == SLATE_E_CANCELLED || s == SLATE_E_CONTEXT_FULL);
        usleep(2000);
    }
    slate_state_free(st);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

/* Lazy growth: a fresh 2048-context state commits no cache; after 100 positions it commits
 * about 100 positions' worth: the cache is head-major (src/state/kvmem.c), so each kv head's
 * region of each state tensor holds 100 rows of head_dim values from its start, rounded out to
 * whole pages. */
static void cache_memory_is_committed_only_as_it_fills(void **stp) {
    fx *f = *stp;
    slate_state *st;
    assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
    slate_state_memory m0, m1;
    assert_int_equal(slate_state_get_memory(st, &m0), SLATE_OK);
    assert_int_equal(m0.kv_resident_bytes, 0);
    slate_plan_params pp = slate_plan_default_params();
    slate_plan p;
    assert_int_equal(slate_model_plan(f->m, &pp, &p, NULL), SLATE_OK);
    assert_int_equal(m0.kv_reserved_bytes, p.kv_bytes);
    int32_t ids[100];
    fill_ids(ids, 100, 2);
    feed(st, ids, 100);
    assert_int_equal(slate_state_get_memory(st, &m1), SLATE_OK);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n_tensors = (size_t)slate_state_n_tensors(st);
    size_t row = p.kv_bytes_per_token / n_tensors, hb = row / (size_t)p.n_kv_heads;
    size_t span = 2048 * hb, per_tensor = 0;
    assert_true(p.n_kv_heads > 1 && span >= 2 * page); /* regions apart: no page shared */
    for (size_t g = 0; g < (size_t)p.n_kv_heads; g++)
        per_tensor += ((g * span + 100 * hb + page - 1) / page - g * span / page) * page;
    size_t expect = n_tensors * per_tensor;
    assert_int_equal(m1.kv_resident_bytes, expect);
    assert_true(m1.kv_resident_bytes < m1.kv_reserved_bytes / 4);
    slate_state_free(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(trim_releases_pages_past_the_length_and_changes_nothing),
        cmocka_unit_test(spilled_state_is_restored_transparently_and_continues_bit_identically),
        cmocka_unit_test(critical_resets_idle_states_and_reports_what_was_lost),
        cmocka_unit_test(busy_state_is_reset_at_its_next_call),
        cmocka_unit_test(load_after_a_pending_reset_keeps_the_loaded_content),
        cmocka_unit_test(models_sharing_a_spill_dir_do_not_overwrite_each_others_spills),
        cmocka_unit_test(unreadable_spill_file_resets_the_state_with_a_message),
        cmocka_unit_test(pressure_checks_its_arguments),
        cmocka_unit_test(psi_text_maps_to_levels),
        cmocka_unit_test(watcher_thread_starts_and_stops_with_the_model),
        cmocka_unit_test(cache_memory_is_committed_only_as_it_fills),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, setup, teardown);
}
