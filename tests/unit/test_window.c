/* test_window.c - sliding-window caches hand back the rows behind the window (src/state/kvmem.c):
 * the page arithmetic, identical logits with and without release, resident memory bounded by the
 * plan while a state that keeps every row grows, truncate within and beyond the rollback reach,
 * a session edit beyond it, read_tensor's refusal, save/load and spill round trips, and the
 * state file's version 1 still being read. */
#define _DEFAULT_SOURCE
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "plan/model.h"
#include "tinymodel.h"

/* Window 8, max_query 4 (the default rollback reach), context 1024; head_dim 64 in f32 caches:
 * 256 bytes per head row, 16 rows per 4 KiB page, a release step of 64 rows. */
#define W 8
#define MQ 4
#define CTX 1024

typedef struct fx {
    slate_model *m;      /* every layer windowed */
    slate_model *full;   /* the same shapes without a window */
    slate_model *wide;   /* window 32: a logit sees 62 positions back (the session test) */
    char path[512];      /* of m's package (tu_tmp's buffers rotate) */
} fx;

static tm_opts opts(int32_t window) {
    tm_opts o = tm_default();
    o.n_layers = 2;
    o.dim = 256;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.ffn_dim = 64;
    o.n_ctx = CTX;
    o.max_query = MQ;
    o.window = window;
    return o;
}

static slate_model *open_pkg(const char *name, const tm_opts *o, const slate_model_params *mp,
                             const char **path_out) {
    const char *path = tu_tmp(name);
    slate_error e;
    if (tm_write(path, o, &e)) fail_msg("tm_write: %s", e.message);
    slate_model *m = NULL;
    if (slate_model_open(path, mp, &m, &e)) fail_msg("open: %s", e.message);
    if (path_out) *path_out = path;
    return m;
}

static int setup(void **stp) {
    fx *f = calloc(1, sizeof *f);
    tm_opts o = opts(W);
    const char *path;
    f->m = open_pkg("window.slate", &o, NULL, &path);
    snprintf(f->path, sizeof f->path, "%s", path);
    o = opts(0);
    f->full = open_pkg("full.slate", &o, NULL, NULL);
    o = opts(32);
    f->wide = open_pkg("wide.slate", &o, NULL, NULL);
    *stp = f;
    return 0;
}

static int teardown(void **stp) {
    fx *f = *stp;
    assert_int_equal(slate_model_close(f->m), SLATE_OK);
    assert_int_equal(slate_model_close(f->full), SLATE_OK);
    assert_int_equal(slate_model_close(f->wide), SLATE_OK);
    free(f);
    return 0;
}

static slate_state *mk(slate_model *m, bool keep_all, int32_t rollback) {
    slate_state_params sp = slate_state_default_params();
    sp.kv_dtype_set = true;
    sp.kv_dtype = SLATE_DTYPE_F32;
    sp.kv_keep_all = keep_all;
    sp.kv_rollback_tokens = rollback;
    slate_state *st = NULL;
    slate_error e;
    if (slate_state_create(m, &sp, &st, &e)) fail_msg("state_create: %s", e.message);
    return st;
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void same_logits(const slate_state *a, const slate_state *b, int32_t V, const char *what) {
    const float *x = slate_state_logits(a, NULL), *y = slate_state_logits(b, NULL);
    assert_non_null(x);
    assert_non_null(y);
    for (int32_t i = 0; i < V; i++)
        if (memcmp(&x[i], &y[i], sizeof(float)) != 0)
            fail_msg("%s: logit %d differs: %.9g vs %.9g", what, i, x[i], y[i]);
}

static void feed(slate_state *st, const int32_t *ids, int32_t n) {
    slate_error e;
    slate_status s = slate_state_predict(st, ids, n, NULL, &e);
    if (s) fail_msg("predict: %s: %s", slate_status_name(s), e.message);
}

/* Feeds both states the same greedy continuation (the first state's argmax) up to `to`
 * positions, alternating one-token and max_query-token calls, comparing logits bit for bit. */
static void run_both(slate_state *a, slate_state *b, int32_t V, int32_t to) {
    int32_t tok = 65;
    while (slate_state_length(a) < to) {
        int32_t n = slate_state_length(a) % 3 == 0 && slate_state_length(a) + MQ <= to ? MQ : 1;
        int32_t ids[MQ];
        for (int32_t i = 0; i < n; i++) ids[i] = 3 + (tok + 7 * i) % 256;
        feed(a, ids, n);
        feed(b, ids, n);
        char what[64];
        snprintf(what, sizeof what, "at length %d", slate_state_length(a));
        same_logits(a, b, V, what);
        tok = argmax(slate_state_logits(a, NULL), V);
    }
}

static size_t kv_resident(slate_state *st) {
    slate_state_memory mem;
    assert_int_equal(slate_state_get_memory(st, &mem), SLATE_OK);
    return mem.kv_resident_bytes;
}

/* ---- page arithmetic ------------------------------------------------------------------------ */

/* Releasing step by step must hand back exactly the pages wholly inside [region, region +
 * cut x head bytes), each once, whatever the alignment and head size. */
static void release_ranges_cover_exactly_the_whole_pages_below_the_cut(void **stp) {
    (void)stp;
    const size_t page = 4096;
    const size_t hbs[] = {4, 100, 256, 260, 4096, 5000, 12288};
    const size_t regions[] = {0, 50, 4096, 3 * 4096 - 1, 3 * 4096 + 700};
    for (size_t h = 0; h < sizeof hbs / sizeof hbs[0]; h++)
        for (size_t r = 0; r < sizeof regions / sizeof regions[0]; r++) {
            size_t hb = hbs[h], region = regions[r];
            int32_t rows = (int32_t)(64 * page / hb) + 3; /* not a multiple of a page's rows */
            size_t n_pages = (region + (size_t)rows * hb) / page + 2;
            unsigned char *hit = calloc(n_pages, 1);
            int32_t first = 0;
            for (int32_t cut = 0; cut <= rows; cut += 1 + cut % 7) {
                size_t a, b;
                slate__kv_release_range(region, hb, page, first, cut, &a, &b);
                if (b > a) {
                    assert_int_equal(a % page, 0);
                    assert_int_equal(b % page, 0);
                    assert_true(a >= region);
                    assert_true(b <= region + (size_t)cut * hb);
                    for (size_t q = a / page; q < b / page; q++) {
                        if (hit[q]) fail_msg("hb %zu region %zu: page %zu released twice", hb,
                                             region, q);
                        hit[q] = 1;
                    }
                }
                first = cut;
                /* Every page wholly inside [region, region + cut x hb) is released by now. */
                for (size_t q = 0; q < n_pages; q++) {
                    bool inside = q * page >= region &&
                                  (q + 1) * page <= region + (size_t)cut * hb;
                    if (inside != (hit[q] != 0))
                        fail_msg("hb %zu region %zu cut %d: page %zu %s", hb, region, cut, q,
                                 inside ? "kept" : "released but holds kept rows");
                }
            }
            free(hit);
        }
}

static void release_step_and_bound_arithmetic(void **stp) {
    (void)stp;
    assert_int_equal(slate__kv_release_step(256, 4096), 64);
    assert_int_equal(slate__kv_release_step(100, 4096), 164); /* odd head bytes round up */
    assert_int_equal(slate__kv_release_step(1 << 20, 4096), 1);
    assert_int_equal(slate__kv_release_step(0, 4096), 1);
    assert_int_equal(slate__kv_window_rows(8, 4, 64, 4), 78);
}

/* The plan counts a windowed cache at its resident bound, the whole reservation when it keeps
 * every row or when the window is not smaller than the context; n_window_caches says how many
 * caches are windowed whichever way they count. */
static void plan_counts_windowed_caches_at_their_bound(void **stp) {
    fx *f = *stp;
    slate_plan_params pp = slate_plan_default_params();
    pp.kv_dtype_set = true;
    pp.kv_dtype = SLATE_DTYPE_F32;
    slate_plan p, keep, full;
    assert_int_equal(slate_model_plan(f->m, &pp, &p, NULL), SLATE_OK);
    /* 4 tensors x 2 heads x (ceil(78 x 256 / 4096) + 2) pages */
    assert_int_equal(p.kv_bytes, 4 * 2 * 7 * slate__page_size());
    assert_int_equal(p.kv_reserved_bytes, 4 * (size_t)CTX * 512);
    assert_int_equal(p.kv_rollback_tokens, MQ);
    assert_int_equal(p.n_window_caches, 4);
    assert_int_equal(p.state_bytes, p.kv_bytes + p.scratch_bytes);
    pp.kv_keep_all = true;
    assert_int_equal(slate_model_plan(f->m, &pp, &keep, NULL), SLATE_OK);
    assert_int_equal(keep.kv_bytes, keep.kv_reserved_bytes);
    assert_int_equal(keep.kv_rollback_tokens, 0);
    assert_int_equal(keep.n_window_caches, 4);
    pp.kv_keep_all = false;
    assert_int_equal(slate_model_plan(f->full, &pp, &full, NULL), SLATE_OK);
    assert_int_equal(full.kv_bytes, full.kv_reserved_bytes);
    assert_int_equal(full.n_window_caches, 0);
    /* Context 64 < window + reach + step rows: nothing to gain, the reservation counts. */
    pp.n_ctx = 64;
    assert_int_equal(slate_model_plan(f->m, &pp, &p, NULL), SLATE_OK);
    assert_int_equal(p.kv_bytes, p.kv_reserved_bytes);
    assert_int_equal(p.kv_rollback_tokens, MQ);
    assert_int_equal(p.n_window_caches, 4);
    pp.n_ctx = 0;
    pp.kv_rollback_tokens = CTX + 1;
    slate_error e;
    assert_int_equal(slate_model_plan(f->m, &pp, &p, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "kv_rollback_tokens"));
}

/* A window wider than the context never leaves a row behind: nothing is released and the plan
 * counts the reservation. */
static void a_window_wider_than_the_context_releases_nothing(void **stp) {
    (void)stp;
    tm_opts o = opts(2 * CTX);
    slate_model *m = open_pkg("wider.slate", &o, NULL, NULL);
    slate_plan_params pp = slate_plan_default_params();
    slate_plan p;
    assert_int_equal(slate_model_plan(m, &pp, &p, NULL), SLATE_OK);
    assert_int_equal(p.kv_bytes, p.kv_reserved_bytes);
    slate_state *a = mk(m, false, 0), *b = mk(m, true, 0);
    run_both(a, b, TM_VOCAB, CTX);
    slate_tensor_info ia;
    assert_int_equal(slate_state_tensor_info(a, 0, &ia), SLATE_OK);
    assert_int_equal(ia.window, 2 * CTX);
    assert_int_equal(ia.first_position, 0);
    assert_int_equal(slate_state_truncate(a, 1, NULL), SLATE_OK);
    slate_state_free(a);
    slate_state_free(b);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

/* ---- release ------------------------------------------------------------------------------- */

static void release_changes_no_logit_and_keeps_memory_bounded(void **stp) {
    fx *f = *stp;
    slate_state *a = mk(f->m, false, 0), *b = mk(f->m, true, 0);
    run_both(a, b, TM_VOCAB, 700);
    slate_plan_params pp = slate_plan_default_params();
    pp.kv_dtype_set = true;
    pp.kv_dtype = SLATE_DTYPE_F32;
    slate_plan p;
    assert_int_equal(slate_model_plan(f->m, &pp, &p, NULL), SLATE_OK);
    size_t ra = kv_resident(a), rb = kv_resident(b);
    if (!(ra <= p.kv_bytes)) fail_msg("resident %zu above the plan's bound %zu", ra, p.kv_bytes);
    /* Keeping all: 700 rows x 512 bytes x 4 tensors at least. */
    if (!(rb >= 700 * 512 * 4)) fail_msg("keep-all state holds only %zu bytes", rb);
    slate_tensor_info ia, ib;
    assert_int_equal(slate_state_tensor_info(a, 0, &ia), SLATE_OK);
    assert_int_equal(slate_state_tensor_info(b, 0, &ib), SLATE_OK);
    assert_int_equal(ia.window, W);
    assert_int_equal(ib.window, W);
    assert_int_equal(ib.first_position, 0);
    /* Released in steps of 64 rows, up to length - W - reach + 1 = 689. */
    assert_true(ia.first_position > 689 - 64 && ia.first_position <= 689);
    slate_state_free(a);
    slate_state_free(b);
}

static void a_model_opened_with_keep_all_releases_nothing(void **stp) {
    fx *f = *stp;
    slate_model_params mp = slate_model_default_params();
    mp.kv_keep_all = true;
    slate_model *m = NULL;
    assert_int_equal(slate_model_open(f->path, &mp, &m, NULL), SLATE_OK);
    slate_state *a = mk(m, false, 0), *b = mk(f->m, true, 0);
    run_both(a, b, TM_VOCAB, 200);
    slate_tensor_info ia;
    assert_int_equal(slate_state_tensor_info(a, 0, &ia), SLATE_OK);
    assert_int_equal(ia.first_position, 0);
    slate_state_free(a);
    slate_state_free(b);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

static void a_cache_read_by_full_attention_is_never_released(void **stp) {
    fx *f = *stp;
    slate_state *a = mk(f->full, false, 0);
    slate_state *b = mk(f->full, true, 0);
    run_both(a, b, TM_VOCAB, 300);
    slate_tensor_info ia;
    assert_int_equal(slate_state_tensor_info(a, 0, &ia), SLATE_OK);
    assert_int_equal(ia.window, 0);
    assert_int_equal(ia.first_position, 0);
    size_t len = 0;
    assert_int_equal(slate_state_read_tensor(a, 0, NULL, 0, &len, NULL), SLATE_E_BUFFER_TOO_SMALL);
    slate_state_free(a);
    slate_state_free(b);
}

/* ---- truncate, read_tensor ------------------------------------------------------------------- */

static void truncate_within_reach_matches_and_beyond_reach_is_refused(void **stp) {
    fx *f = *stp;
    slate_state *a = mk(f->m, false, 0), *b = mk(f->m, true, 0);
    run_both(a, b, TM_VOCAB, 400);
    slate_tensor_info ia;
    assert_int_equal(slate_state_tensor_info(a, 0, &ia), SLATE_OK);
    int32_t first = ia.first_position, len = slate_state_length(a);
    assert_true(first > 0);
    /* The reach: back max_query positions, always. */
    assert_int_equal(slate_state_truncate(a, len - MQ, NULL), SLATE_OK);
    assert_int_equal(slate_state_truncate(b, len - MQ, NULL), SLATE_OK);
    run_both(a, b, TM_VOCAB, len + 20);
    /* The shortest length allowed is first + W - 1; one less is refused, the state unchanged. */
    len = slate_state_length(a);
    assert_int_equal(slate_state_tensor_info(a, 0, &ia), SLATE_OK);
    first = ia.first_position;
    slate_error e;
    assert_int_equal(slate_state_truncate(a, first + W - 2, &e), SLATE_E_RELEASED);
    assert_non_null(strstr(e.message, "sliding window 8"));
    char want[64];
    snprintf(want, sizeof want, "shortest length allowed now is %d", first + W - 1);
    if (!strstr(e.message, want)) fail_msg("message: %s", e.message);
    assert_int_equal(slate_state_length(a), len);
    assert_non_null(slate_state_logits(a, NULL));
    assert_int_equal(slate_state_truncate(a, first + W - 1, NULL), SLATE_OK);
    assert_int_equal(slate_state_truncate(b, first + W - 1, NULL), SLATE_OK);
    run_both(a, b, TM_VOCAB, first + W + 30);
    /* Length 0 needs no row. */
    assert_int_equal(slate_state_truncate(a, 0, NULL), SLATE_OK);
    assert_int_equal(slate_state_truncate(b, 0, NULL), SLATE_OK);
    assert_int_equal(slate_state_tensor_info(a, 0, &ia), SLATE_OK);
    assert_int_equal(ia.first_position, 0);
    run_both(a, b, TM_VOCAB, 40);
    slate_state_free(a);
    slate_state_free(b);
}

static void a_larger_rollback_reach_keeps_more(void **stp) {
    fx *f = *stp;
    slate_state *a = mk(f->m, false, 200), *b = mk(f->m, true, 0);
    run_both(a, b, TM_VOCAB, 500);
    assert_int_equal(slate_state_truncate(a, 300, NULL), SLATE_OK);
    assert_int_equal(slate_state_truncate(b, 300, NULL), SLATE_OK);
    run_both(a, b, TM_VOCAB, 330);
    slate_state_free(a);
    slate_state_free(b);
}

/* slate_model_params.kv_rollback_tokens is the reach of states that leave theirs 0 and of
 * slate_model_plan; a state's own value still wins; out of range is refused at open. */
static void a_model_rollback_reach_is_the_default_of_its_states_and_plan(void **stp) {
    fx *f = *stp;
    slate_model_params mp = slate_model_default_params();
    mp.kv_rollback_tokens = 200;
    slate_model *m = NULL;
    assert_int_equal(slate_model_open(f->path, &mp, &m, NULL), SLATE_OK);
    slate_plan_params pp = slate_plan_default_params();
    slate_plan p, dflt;
    assert_int_equal(slate_model_plan(m, &pp, &p, NULL), SLATE_OK);
    assert_int_equal(slate_model_plan(f->m, &pp, &dflt, NULL), SLATE_OK);
    assert_int_equal(p.kv_rollback_tokens, 200);
    assert_true(p.kv_bytes > dflt.kv_bytes);
    pp.kv_rollback_tokens = MQ; /* the caller's own reach wins */
    assert_int_equal(slate_model_plan(m, &pp, &p, NULL), SLATE_OK);
    assert_int_equal(p.kv_rollback_tokens, MQ);
    /* A state of m goes back 200 positions as a state asking for 200 does. */
    slate_state *a = mk(m, false, 0), *b = mk(f->m, true, 0), *c = mk(m, false, MQ);
    run_both(a, b, TM_VOCAB, 500);
    assert_int_equal(slate_state_truncate(a, 300, NULL), SLATE_OK);
    assert_int_equal(slate_state_truncate(b, 300, NULL), SLATE_OK);
    run_both(a, b, TM_VOCAB, 330);
    slate_state_free(b);
    b = mk(f->m, true, 0);
    run_both(c, b, TM_VOCAB, 500);
    assert_int_equal(slate_state_truncate(c, 300, NULL), SLATE_E_RELEASED);
    slate_state_free(a);
    slate_state_free(b);
    slate_state_free(c);
    assert_int_equal(slate_model_close(m), SLATE_OK);
    mp.kv_rollback_tokens = CTX + 1;
    slate_error e;
    assert_int_equal(slate_model_open(f->path, &mp, &m, &e), SLATE_E_INVALID_ARG);
    assert_null(m);
    assert_non_null(strstr(e.message, "kv_rollback_tokens"));
}

/* slate_model_describe's memory plan is slate_model_plan's: the reservation labelled as such,
 * the resident bound beside it, and a total that adds the bound (what a budget counts). */
static void describe_totals_what_the_plan_counts(void **stp) {
    fx *f = *stp;
    slate_plan p;
    assert_int_equal(slate_model_plan(f->m, NULL, &p, NULL), SLATE_OK);
    assert_true(p.kv_bytes < p.kv_reserved_bytes);
    char buf[4096], want[128];
    size_t len = 0;
    assert_int_equal(slate_model_describe(f->m, buf, sizeof buf, &len), SLATE_OK);
    snprintf(want, sizeof want, "  KV reserved       %12zu bytes (address space", p.kv_reserved_bytes);
    if (!strstr(buf, want)) fail_msg("no '%s' in:\n%s", want, buf);
    snprintf(want, sizeof want, "  KV resident bound %12zu bytes (counted", p.kv_bytes);
    if (!strstr(buf, want)) fail_msg("no '%s' in:\n%s", want, buf);
    snprintf(want, sizeof want, "  total, one state  %12zu bytes (weights + KV resident bound",
             p.total_bytes);
    if (!strstr(buf, want)) fail_msg("no '%s' in:\n%s", want, buf);
    assert_int_equal(p.total_bytes, p.weights_bytes + p.kv_bytes + p.scratch_bytes);
}

static void read_tensor_refuses_released_rows(void **stp) {
    fx *f = *stp;
    slate_state *a = mk(f->m, false, 0), *b = mk(f->m, true, 0);
    run_both(a, b, TM_VOCAB, 300);
    size_t cap = 300 * 512, len = 0;
    void *buf = malloc(cap);
    slate_error e;
    assert_int_equal(slate_state_read_tensor(a, 1, buf, cap, &len, &e), SLATE_E_RELEASED);
    assert_non_null(strstr(e.message, "were released"));
    assert_non_null(strstr(e.message, "kv_keep_all"));
    assert_int_equal(slate_state_read_tensor(b, 1, buf, cap, &len, &e), SLATE_OK);
    assert_int_equal(len, 300 * 512);
    /* set_length declares every row written: an export then works again. */
    assert_int_equal(slate_state_write_tensor(a, 1, buf, len, 300, NULL), SLATE_OK);
    assert_int_equal(slate_state_set_length(a, 300, NULL), SLATE_OK);
    slate_tensor_info ia;
    assert_int_equal(slate_state_tensor_info(a, 1, &ia), SLATE_OK);
    assert_int_equal(ia.first_position, 0);
    assert_int_equal(slate_state_read_tensor(a, 1, buf, cap, &len, &e), SLATE_OK);
    free(buf);
    slate_state_free(a);
    slate_state_free(b);
}

/* ---- persistence ---------------------------------------------------------------------------- */

static uint8_t *save(slate_state *st, size_t *len) {
    assert_int_equal(slate_state_save_mem(st, NULL, NULL, 0, len, NULL), SLATE_E_BUFFER_TOO_SMALL);
    uint8_t *buf = malloc(*len);
    assert_int_equal(slate_state_save_mem(st, NULL, buf, *len, len, NULL), SLATE_OK);
    return buf;
}

static void save_and_load_of_a_released_state_continue_identically(void **stp) {
    fx *f = *stp;
    slate_state *a = mk(f->m, false, 0), *b = mk(f->m, true, 0);
    run_both(a, b, TM_VOCAB, 600);
    size_t la, lb;
    uint8_t *fa = save(a, &la), *fb = save(b, &lb);
    assert_true(la < lb / 4); /* only the rows held */
    slate_tensor_info ia;
    assert_int_equal(slate_state_tensor_info(a, 0, &ia), SLATE_OK);
    /* Into a fresh releasing state (which held another conversation), and into one that keeps
     * every row: both continue exactly as the original. */
    slate_state *c = mk(f->m, false, 0), *d = mk(f->m, true, 0);
    run_both(c, d, TM_VOCAB, 100);
    assert_int_equal(slate_state_load_mem(c, fa, la, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_load_mem(d, fa, la, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_length(c), 600);
    slate_tensor_info ic;
    assert_int_equal(slate_state_tensor_info(c, 0, &ic), SLATE_OK);
    assert_int_equal(ic.first_position, ia.first_position);
    same_logits(a, c, TM_VOCAB, "restored");
    run_both(a, c, TM_VOCAB, 650);
    run_both(b, d, TM_VOCAB, 650);
    same_logits(a, b, TM_VOCAB, "after 50 more");
    /* The restored state truncates as far as the saved one could. */
    slate_error e;
    assert_int_equal(slate_state_truncate(d, ia.first_position + W - 2, &e), SLATE_E_RELEASED);
    /* A first position that leaves the next query without its window is corrupt. */
    uint8_t *bad = malloc(la);
    memcpy(bad, fa, la);
    uint32_t late = 600 - W + 2, crc;
    memcpy(bad + 64 + 4, &late, 4); /* entry 0's first position (little-endian host) */
    crc = slate__crc32(0, bad + 64, la - 64);
    memcpy(bad + 56, &crc, 4);
    crc = slate__crc32(0, bad, 60);
    memcpy(bad + 60, &crc, 4);
    assert_int_equal(slate_state_load_mem(c, bad, la, NULL, &e), SLATE_E_FORMAT);
    if (!strstr(e.message, "window needs earlier ones")) fail_msg("message: %s", e.message);
    assert_int_equal(slate_state_length(c), 650);
    free(bad);
    free(fa);
    free(fb);
    slate_state_free(a);
    slate_state_free(b);
    slate_state_free(c);
    slate_state_free(d);
}

static void a_spilled_released_state_is_read_back_and_continues(void **stp) {
    fx *f = *stp;
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tu_tmp("spill"));
    mkdir(dir, 0700);
    slate_model_params mp = slate_model_default_params();
    mp.spill_dir = dir;
    mp.on_pressure = NULL;
    slate_model *m = NULL;
    assert_int_equal(slate_model_open(f->path, &mp, &m, NULL), SLATE_OK);
    slate_state *a = mk(m, false, 0), *b = mk(f->m, true, 0);
    run_both(a, b, TM_VOCAB, 500);
    slate_pressure_report r;
    assert_int_equal(slate_model_pressure(m, SLATE_PRESSURE_MEDIUM, &r, NULL), SLATE_OK);
    assert_int_equal(r.n_spilled, 1);
    run_both(a, b, TM_VOCAB, 560);
    slate_tensor_info ia;
    assert_int_equal(slate_state_tensor_info(a, 0, &ia), SLATE_OK);
    assert_true(ia.first_position > 0);
    slate_state_free(a);
    slate_state_free(b);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

/* ---- session -------------------------------------------------------------------------------- */

static bool collect(void *user, const slate_session_event *ev) {
    char *out = user;
    if (ev->kind == SLATE_SESSION_EVENT_TEXT && strlen(out) + ev->len < 4096)
        strncat(out, ev->text, ev->len);
    return true;
}

static void reply(slate_session *s, char *out, int32_t n_predict) {
    slate_generate_params gp = slate_generate_default_params();
    gp.n_predict = n_predict;
    gp.sampler.temperature = 0.0f;
    gp.ignore_eos = false;
    slate_generate_result res;
    slate_error e;
    out[0] = '\0';
    slate_status st = slate_session_generate(s, &gp, collect, out, &res, &e);
    if (st) fail_msg("generate: %s: %s", slate_status_name(st), e.message);
}

static slate_session *chat(slate_model *m) {
    slate_session_params p = slate_session_default_params();
    p.template_name = "chatml";
    slate_session *s = NULL;
    if (slate_session_create(m, &p, &s, NULL)) fail_msg("session_create");
    return s;
}

static void say(slate_session *s, slate_role role, const char *text) {
    if (slate_session_add_message(s, role, text, strlen(text), NULL)) fail_msg("add_message");
}

/* An edit behind the rollback reach: the second question shares a long prefix with the first
 * but the first went on far past it (and a reply followed), so the rows a query at the end of
 * the common prefix needs were released. The session prefills again and replies what a fresh
 * session replies. The model has window 32 so that the prompt's last logits, about 45
 * positions after the edit (the rest of the question and the template's tokens), still depend
 * on rows from before it (2 layers: 62 positions back), so rows read wrongly would change them;
 * the reply is one token, which is not fed back, so those are the logits compared. */
static void a_session_edit_beyond_the_reach_prefills_again(void **stp) {
    fx *f = *stp;
    char common[256], q1[1024], q2[512], r1[4096], r2[4096], want[4096];
    snprintf(common, sizeof common, "%s", "Here is a long question about the sea, the sky, the "
             "rivers and the mountains, asked in many words so that its prefix is long: which ");
    snprintf(q1, sizeof q1, "%sone of them is the oldest, and why do the waves of the ocean "
             "keep coming back to the shore every day and every night, in every season?", common);
    snprintf(q2, sizeof q2, "%sis bluest?", common);
    slate_session *s = chat(f->wide);
    say(s, SLATE_ROLE_SYSTEM, "Be brief.");
    say(s, SLATE_ROLE_USER, q1);
    reply(s, r1, 24);
    slate_tensor_info ti;
    assert_int_equal(slate_state_tensor_info(slate_session_state(s), 0, &ti), SLATE_OK);
    assert_true(ti.first_position > (int32_t)strlen(common) + 20);
    /* The statistics count the rows held, not the released ones. */
    slate_session_stats ss;
    assert_int_equal(slate_session_get_stats(s, &ss), SLATE_OK);
    int32_t held = ss.n_ledger_tokens - ti.first_position;
    assert_int_equal(ss.kv_bytes_used, 4 * (size_t)held * ti.row_bytes);
    /* Replace the question: pop the reply and the question, ask the other one. */
    assert_int_equal(slate_session_pop_message(s, NULL), SLATE_OK);
    assert_int_equal(slate_session_pop_message(s, NULL), SLATE_OK);
    say(s, SLATE_ROLE_USER, q2);
    reply(s, r2, 1);
    slate_session *fresh = chat(f->wide);
    say(fresh, SLATE_ROLE_SYSTEM, "Be brief.");
    say(fresh, SLATE_ROLE_USER, q2);
    reply(fresh, want, 1);
    assert_string_equal(r2, want);
    same_logits(slate_session_state(s), slate_session_state(fresh), TM_VOCAB, "session");
    /* ... and says so: one turn lost its reuse to the window, the fresh session none. */
    assert_int_equal(slate_session_get_stats(s, &ss), SLATE_OK);
    assert_int_equal(ss.n_reuse_released, 1);
    assert_int_equal(ss.n_tokens_reused, 0);
    assert_int_equal(slate_session_get_stats(fresh, &ss), SLATE_OK);
    assert_int_equal(ss.n_reuse_released, 0);
    slate_session_free(s);
    slate_session_free(fresh);
}

/* A session that keeps every row reuses the common prefix where the default one cannot, and
 * replies the same. */
static void a_session_keeping_every_row_reuses_the_prefix(void **stp) {
    fx *f = *stp;
    slate_session_params p = slate_session_default_params();
    p.template_name = "chatml";
    p.kv_keep_all = true;
    slate_session *s = NULL, *d = chat(f->wide);
    assert_int_equal(slate_session_create(f->wide, &p, &s, NULL), SLATE_OK);
    char first[4096], r[4096], want[4096];
    const char *q1 = "A question that goes on and on about the sea and the sky and the rivers, "
                     "then asks which one is bluest, and why, and since when, and for whom?";
    const char *q2 = "A question that goes on and on about the sea and the sky.";
    slate_session *both[2] = {s, d};
    for (int k = 0; k < 2; k++) {
        say(both[k], SLATE_ROLE_USER, q1);
        reply(both[k], first, 24);
        assert_int_equal(slate_session_pop_message(both[k], NULL), SLATE_OK);
        assert_int_equal(slate_session_pop_message(both[k], NULL), SLATE_OK);
        say(both[k], SLATE_ROLE_USER, q2);
        reply(both[k], k ? want : r, 1);
    }
    slate_session_stats ss, sd;
    assert_int_equal(slate_session_get_stats(s, &ss), SLATE_OK);
    assert_int_equal(slate_session_get_stats(d, &sd), SLATE_OK);
    assert_true(ss.n_tokens_reused > 0);
    assert_int_equal(ss.n_reuse_released, 0);
    assert_int_equal(sd.n_tokens_reused, 0);
    assert_int_equal(sd.n_reuse_released, 1);
    assert_string_equal(r, want);
    same_logits(slate_session_state(s), slate_session_state(d), TM_VOCAB, "keep-all session");
    slate_session_free(s);
    slate_session_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(release_ranges_cover_exactly_the_whole_pages_below_the_cut),
        cmocka_unit_test(release_step_and_bound_arithmetic),
        cmocka_unit_test(plan_counts_windowed_caches_at_their_bound),
        cmocka_unit_test(a_window_wider_than_the_context_releases_nothing),
        cmocka_unit_test(release_changes_no_logit_and_keeps_memory_bounded),
        cmocka_unit_test(a_model_opened_with_keep_all_releases_nothing),
        cmocka_unit_test(a_cache_read_by_full_attention_is_never_released),
        cmocka_unit_test(truncate_within_reach_matches_and_beyond_reach_is_refused),
        cmocka_unit_test(a_larger_rollback_reach_keeps_more),
        cmocka_unit_test(a_model_rollback_reach_is_the_default_of_its_states_and_plan),
        cmocka_unit_test(describe_totals_what_the_plan_counts),
        cmocka_unit_test(read_tensor_refuses_released_rows),
        cmocka_unit_test(save_and_load_of_a_released_state_continue_identically),
        cmocka_unit_test(a_spilled_released_state_is_read_back_and_continues),
        cmocka_unit_test(a_session_edit_beyond_the_reach_prefills_again),
        cmocka_unit_test(a_session_keeping_every_row_reuses_the_prefix),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, setup, teardown);
}
