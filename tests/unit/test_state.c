/* test_state.c - model and state behaviour on small random packages: prefill vs decode,
 * interleaved states, truncate, export/import of the cache, explicit masks, API misuse. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plan/model.h"
#include "tinymodel.h"

typedef struct fx {
    slate_model *m;
    int32_t V;
} fx;

static const char *make_pkg(const char *name, const tm_opts *o) {
    const char *path = tu_tmp(name);
    slate_error e;
    slate_status s = tm_write(path, o, &e);
    if (s) fprintf(stderr, "tm_write: %s\n", e.message);
    assert_int_equal(s, SLATE_OK);
    return path;
}

static int setup_variant(void **st, const tm_opts *o, const char *name) {
    fx *f = calloc(1, sizeof *f);
    slate_error e;
    assert_int_equal(slate_model_open(make_pkg(name, o), NULL, &f->m, &e), SLATE_OK);
    f->V = TM_VOCAB;
    *st = f;
    return 0;
}
static int setup(void **st) {
    tm_opts o = tm_default();
    return setup_variant(st, &o, "plain.slate");
}
static int setup_window(void **st) {
    tm_opts o = tm_default();
    o.window = 5;
    o.qkv_bias = true;
    o.qk_norm = true;
    o.half_rope = true;
    o.tied = false;
    o.dtype = SLATE_DTYPE_F16;
    return setup_variant(st, &o, "window.slate");
}
static int teardown(void **st) {
    fx *f = *st;
    if (!f) return 0;
    assert_int_equal(slate_model_close(f->m), SLATE_OK);
    free(f);
    return 0;
}

static void fill_ids(int32_t *ids, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(3 + (seed * 2654435761u + (uint64_t)i * 40503u) % 256);
}

/* Prefill and decode differ only in accumulation order of SIMD kernels (row-tiled vs vector):
 * agree to 1e-4 absolute on logits of magnitude ~10. */
#define LOGIT_TOL 1e-4f

static void assert_close(const float *a, const float *b, int n, float tol) {
    float worst = 0;
    int at = 0;
    for (int i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= worst)) {
            worst = d;
            at = i;
        }
    }
    if (!(worst <= tol)) fail_msg("max |diff| %g at %d (%g vs %g) > %g", worst, at, a[at], b[at], tol);
}

static void prefill_then_decode_equals_longer_prefill(void **stp) {
    fx *f = *stp;
    int32_t ids[12];
    fill_ids(ids, 12, 7);
    slate_state *a, *b;
    assert_int_equal(slate_state_create(f->m, NULL, &a, NULL), SLATE_OK);
    assert_int_equal(slate_state_create(f->m, NULL, &b, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(a, ids, 11, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(a, ids + 11, 1, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(b, ids, 12, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_length(a), 12);
    assert_close(slate_state_logits(a, NULL), slate_state_logits(b, NULL), f->V, LOGIT_TOL);
    slate_state_free(a);
    slate_state_free(b);
}

static void prefill_all_logits_equal_token_by_token(void **stp) {
    fx *f = *stp;
    int32_t ids[10];
    fill_ids(ids, 10, 3);
    slate_state *a, *b;
    assert_int_equal(slate_state_create(f->m, NULL, &a, NULL), SLATE_OK);
    assert_int_equal(slate_state_create(f->m, NULL, &b, NULL), SLATE_OK);
    slate_predict_params pp = slate_predict_default_params();
    pp.all_logits = true;
    assert_int_equal(slate_state_predict(a, ids, 10, &pp, NULL), SLATE_OK);
    int32_t rows = 0;
    const float *all = slate_state_logits(a, &rows);
    assert_int_equal(rows, 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(slate_state_predict(b, ids + i, 1, NULL, NULL), SLATE_OK);
        assert_close(all + (size_t)i * f->V, slate_state_logits(b, NULL), f->V, LOGIT_TOL);
    }
    slate_state_free(a);
    slate_state_free(b);
}

static void interleaved_states_equal_each_alone(void **stp) {
    fx *f = *stp;
    int32_t x[8], y[8];
    fill_ids(x, 8, 11);
    fill_ids(y, 8, 29);
    slate_state *a, *b, *c;
    assert_int_equal(slate_state_create(f->m, NULL, &a, NULL), SLATE_OK);
    assert_int_equal(slate_state_create(f->m, NULL, &b, NULL), SLATE_OK);
    assert_int_equal(slate_state_create(f->m, NULL, &c, NULL), SLATE_OK);
    float *ref = malloc(sizeof(float) * (size_t)f->V);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(slate_state_predict(a, x + i, 1, NULL, NULL), SLATE_OK);
        assert_int_equal(slate_state_predict(b, y + i, 1, NULL, NULL), SLATE_OK);
    }
    for (int i = 0; i < 8; i++) assert_int_equal(slate_state_predict(c, x + i, 1, NULL, NULL), SLATE_OK);
    memcpy(ref, slate_state_logits(c, NULL), sizeof(float) * (size_t)f->V);
    assert_memory_equal(slate_state_logits(a, NULL), ref, sizeof(float) * (size_t)f->V);
    assert_int_equal(slate_state_reset(c), SLATE_OK);
    for (int i = 0; i < 8; i++) assert_int_equal(slate_state_predict(c, y + i, 1, NULL, NULL), SLATE_OK);
    assert_memory_equal(slate_state_logits(b, NULL), slate_state_logits(c, NULL), sizeof(float) * (size_t)f->V);
    free(ref);
    slate_state_free(a);
    slate_state_free(b);
    slate_state_free(c);
}

static void truncate_then_refeed_equals_fresh_state(void **stp) {
    fx *f = *stp;
    int32_t ids[9], other[4];
    fill_ids(ids, 9, 5);
    fill_ids(other, 4, 99);
    slate_state *a, *b;
    assert_int_equal(slate_state_create(f->m, NULL, &a, NULL), SLATE_OK);
    assert_int_equal(slate_state_create(f->m, NULL, &b, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(a, ids, 5, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(a, other, 4, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_truncate(a, 5, NULL), SLATE_OK);
    assert_int_equal(slate_state_length(a), 5);
    assert_null(slate_state_logits(a, NULL));
    assert_int_equal(slate_state_predict(a, ids + 5, 4, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(b, ids, 9, NULL, NULL), SLATE_OK);
    assert_close(slate_state_logits(a, NULL), slate_state_logits(b, NULL), f->V, LOGIT_TOL);
    slate_error e;
    assert_int_equal(slate_state_truncate(a, 10, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "0..9"));
    slate_state_free(a);
    slate_state_free(b);
}

static void exported_cache_imported_into_new_state_continues_identically(void **stp) {
    fx *f = *stp;
    int32_t ids[7];
    fill_ids(ids, 7, 17);
    slate_state *a, *b;
    assert_int_equal(slate_state_create(f->m, NULL, &a, NULL), SLATE_OK);
    assert_int_equal(slate_state_create(f->m, NULL, &b, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(a, ids, 6, NULL, NULL), SLATE_OK);
    int32_t n = slate_state_n_tensors(a);
    assert_int_equal(n, 2 * f->m->n_layers);
    for (int32_t i = 0; i < n; i++) {
        slate_tensor_info ti;
        assert_int_equal(slate_state_tensor_info(a, i, &ti), SLATE_OK);
        size_t len = 0;
        assert_int_equal(slate_state_read_tensor(a, i, NULL, 0, &len, NULL), SLATE_E_BUFFER_TOO_SMALL);
        assert_int_equal(len, ti.row_bytes * 6);
        void *buf = malloc(len);
        assert_int_equal(slate_state_read_tensor(a, i, buf, len, &len, NULL), SLATE_OK);
        assert_int_equal(slate_state_write_tensor(b, i, buf, len, 6, NULL), SLATE_OK);
        free(buf);
    }
    assert_int_equal(slate_state_set_length(b, 6, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(a, ids + 6, 1, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(b, ids + 6, 1, NULL, NULL), SLATE_OK);
    assert_memory_equal(slate_state_logits(a, NULL), slate_state_logits(b, NULL), sizeof(float) * (size_t)f->V);
    slate_state_free(a);
    slate_state_free(b);
}

/* Caches are stored head-major (src/state/kvmem.c) but exported as the program's rows: row r of
 * a state tensor is every kv head's piece of position r side by side. Both ways out (the
 * tensor read and the state file) must give the bytes slate__kv_at holds for head g at
 * position r, for an f16/f32 cache and an int8 one ({scale, values} per head). Which head a
 * region holds is pinned by the NumPy-checked attention (kv_write and attention both address
 * heads through slate__kv_at). */
static void exported_rows_are_each_heads_piece_side_by_side(void **stp) {
    fx *f = *stp;
    int32_t ids[9];
    fill_ids(ids, 9, 23);
    for (int pass = 0; pass < 2; pass++) {
        slate_state_params sp = slate_state_default_params();
        if (pass) {
            sp.kv_dtype_set = true;
            sp.kv_dtype = SLATE_DTYPE_I8;
        }
        slate_state *a;
        assert_int_equal(slate_state_create(f->m, &sp, &a, NULL), SLATE_OK);
        assert_int_equal(slate_state_predict(a, ids, 9, NULL, NULL), SLATE_OK);
        size_t file_len = 0;
        assert_int_equal(slate_state_save_mem(a, NULL, NULL, 0, &file_len, NULL), SLATE_E_BUFFER_TOO_SMALL);
        uint8_t *file = malloc(file_len);
        assert_int_equal(slate_state_save_mem(a, NULL, file, file_len, &file_len, NULL), SLATE_OK);
        int32_t n = slate_state_n_tensors(a);
        size_t rows_total = 0;
        for (int32_t i = 0; i < n; i++) rows_total += a->kv_row_bytes[i] * 9;
        /* With no extra the cache rows end the file, tensor after tensor. */
        const uint8_t *in_file = file + file_len - rows_total;
        for (int32_t i = 0; i < n; i++) {
            assert_true(a->kv_heads[i] > 1); /* the fixture has several kv heads */
            size_t row = a->kv_row_bytes[i], hb = row / (size_t)a->kv_heads[i], len = 0;
            uint8_t *buf = malloc(row * 9);
            assert_int_equal(slate_state_read_tensor(a, i, buf, row * 9, &len, NULL), SLATE_OK);
            assert_int_equal(len, row * 9);
            for (int32_t r = 0; r < 9; r++)
                for (int32_t g = 0; g < a->kv_heads[i]; g++)
                    assert_memory_equal(buf + r * row + g * hb, slate__kv_at(a, i, g, r), hb);
            assert_memory_equal(in_file, buf, row * 9);
            in_file += row * 9;
            free(buf);
        }
        free(file);
        slate_state_free(a);
    }
}

static void explicit_causal_mask_equals_default(void **stp) {
    fx *f = *stp;
    int32_t ids[8];
    fill_ids(ids, 8, 23);
    slate_state *a, *b;
    assert_int_equal(slate_state_create(f->m, NULL, &a, NULL), SLATE_OK);
    assert_int_equal(slate_state_create(f->m, NULL, &b, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(a, ids, 3, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(b, ids, 3, NULL, NULL), SLATE_OK);
    /* 5 new rows over 3 + 5 = 8 positions. */
    float mask[5 * 8];
    for (int r = 0; r < 5; r++)
        for (int j = 0; j < 8; j++) mask[r * 8 + j] = j <= 3 + r ? 0.0f : -INFINITY;
    slate_predict_params pp = slate_predict_default_params();
    pp.mask = mask;
    assert_int_equal(slate_state_predict(a, ids + 3, 5, &pp, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(b, ids + 3, 5, NULL, NULL), SLATE_OK);
    assert_memory_equal(slate_state_logits(a, NULL), slate_state_logits(b, NULL), sizeof(float) * (size_t)f->V);
    /* A mask that hides the first position changes the result. */
    for (int r = 0; r < 5; r++) mask[r * 8] = -INFINITY;
    assert_int_equal(slate_state_truncate(a, 3, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(a, ids + 3, 5, &pp, NULL), SLATE_OK);
    assert_memory_not_equal(slate_state_logits(a, NULL), slate_state_logits(b, NULL), sizeof(float) * (size_t)f->V);
    slate_state_free(a);
    slate_state_free(b);
}

static void misuse_returns_status_with_message(void **stp) {
    fx *f = *stp;
    slate_state *a;
    slate_error e;
    assert_int_equal(slate_state_create(f->m, NULL, &a, NULL), SLATE_OK);
    int32_t ids[20];
    fill_ids(ids, 20, 1);
    assert_int_equal(slate_state_predict(a, ids, 0, NULL, &e), SLATE_E_SHAPE);
    assert_int_equal(slate_state_predict(a, ids, 17, NULL, &e), SLATE_E_SHAPE);
    assert_non_null(strstr(e.message, "1..16"));
    int32_t bad[2] = {5, TM_VOCAB};
    assert_int_equal(slate_state_predict(a, bad, 2, NULL, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "259"));
    assert_int_equal(slate_state_length(a), 0);
    assert_int_equal(slate_state_predict(NULL, ids, 1, NULL, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_state_predict(a, NULL, 1, NULL, &e), SLATE_E_INVALID_ARG);
    for (int i = 0; i < 4; i++) assert_int_equal(slate_state_predict(a, ids, 16, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_length(a), 64);
    assert_int_equal(slate_state_predict(a, ids, 1, NULL, &e), SLATE_E_CONTEXT_FULL);
    assert_non_null(strstr(e.message, "64"));
    assert_int_equal(slate_state_length(a), 64);
    /* A second call while one runs is refused, not raced. */
    atomic_store(&a->busy, SLATE__IN_CALL);
    assert_int_equal(slate_state_predict(a, ids, 1, NULL, &e), SLATE_E_BUSY);
    assert_int_equal(slate_state_reset(a), SLATE_E_BUSY);
    atomic_store(&a->busy, SLATE__IDLE);
    /* The model refuses to close under a live state. */
    assert_int_equal(slate_model_close(f->m), SLATE_E_BUSY);
    slate_state_params sp = slate_state_default_params();
    sp.n_ctx = 65;
    slate_state *b = NULL;
    assert_int_equal(slate_state_create(f->m, &sp, &b, &e), SLATE_E_INVALID_ARG);
    assert_null(b);
    slate_state_free(a);
    slate_state_free(NULL);
}

/* on_piece calls back into the state that slate_generate is running on. */
typedef struct reentry {
    slate_state *st;
    slate_op_profile *prof; /* room for n_ops records */
    size_t n_ops;
    int n_calls, n_busy;
} reentry;
static bool call_back_in(void *user, const char *text, size_t len) {
    (void)text;
    (void)len;
    reentry *r = user;
    int32_t one = 7;
    size_t n = 0;
    r->n_calls++;
    r->n_busy += slate_state_predict(r->st, &one, 1, NULL, NULL) == SLATE_E_BUSY;
    r->n_busy += slate_state_reset(r->st) == SLATE_E_BUSY;
    r->n_busy += slate_state_truncate(r->st, 0, NULL) == SLATE_E_BUSY;
    r->n_busy += slate_state_set_length(r->st, 0, NULL) == SLATE_E_BUSY;
    r->n_busy += slate_state_profile(r->st, r->prof, r->n_ops, &n) == SLATE_E_BUSY;
    return true;
}

/* slate_generate holds the state for the whole call (a call from its callback gets E_BUSY and
 * changes nothing), checks every prompt id before feeding any, and writes at most
 * dump_logits_cap rows. */
/* slate_generate with an empty prompt continues from the state's logits: those of its last
 * position, also when the last predict kept a row for every position (all_logits). */
static void generate_without_prompt_samples_from_the_last_position(void **stp) {
    fx *f = *stp;
    const int32_t V = f->V;
    int32_t ids[8];
    fill_ids(ids, 8, 17);
    slate_state *st;
    assert_int_equal(slate_state_create(f->m, NULL, &st, NULL), SLATE_OK);
    slate_predict_params pp = slate_predict_default_params();
    pp.all_logits = true;
    assert_int_equal(slate_state_predict(st, ids, 8, &pp, NULL), SLATE_OK);
    int32_t n_rows = 0;
    const float *rows = slate_state_logits(st, &n_rows);
    assert_int_equal(n_rows, 8);
    float *want = malloc(sizeof(float) * (size_t)V), *dump = malloc(sizeof(float) * (size_t)V);
    memcpy(want, rows + (size_t)7 * (size_t)V, sizeof(float) * (size_t)V);
    slate_generate_params gp = slate_generate_default_params();
    gp.sampler.temperature = 0;
    gp.ignore_eos = true;
    gp.n_predict = 1;
    gp.dump_logits = dump;
    gp.dump_logits_cap = 1;
    slate_generate_result res;
    slate_error e;
    assert_int_equal(slate_generate(st, NULL, 0, &gp, &res, &e), SLATE_OK);
    assert_int_equal(res.n_generated, 1);
    assert_memory_equal(dump, want, sizeof(float) * (size_t)V);
    free(want);
    free(dump);
    slate_state_free(st);
}

static void generate_holds_the_state_and_checks_its_inputs(void **stp) {
    fx *f = *stp;
    slate_state_params sp = slate_state_default_params();
    sp.n_ctx = 24;
    slate_state *st;
    slate_error e;
    assert_int_equal(slate_state_create(f->m, &sp, &st, &e), SLATE_OK);
    int32_t ids[20];
    fill_ids(ids, 20, 3);
    slate_generate_params gp = slate_generate_default_params();
    gp.sampler.temperature = 0;
    gp.ignore_eos = true;
    gp.n_predict = 6;
    reentry r = {st, NULL, 0, 0, 0};
    assert_int_equal(slate_state_profile(st, NULL, 0, &r.n_ops), SLATE_E_BUFFER_TOO_SMALL);
    r.prof = calloc(r.n_ops, sizeof *r.prof);
    assert_int_equal(slate_state_profile(st, r.prof, r.n_ops, &r.n_ops), SLATE_OK);
    gp.on_piece = call_back_in;
    gp.user = &r;
    slate_generate_result res;
    assert_int_equal(slate_generate(st, ids, 3, &gp, &res, &e), SLATE_OK);
    assert_int_equal(res.n_generated, 6);
    assert_true(r.n_calls > 0);
    assert_int_equal(r.n_busy, 5 * r.n_calls);
    /* Prompt + every sampled token but the last is in the cache: nothing from the callback. */
    assert_int_equal(slate_state_length(st), 3 + 6 - 1);
    /* A bad id in the second chunk (max query 16): refused before the first chunk is fed. */
    assert_int_equal(slate_state_reset(st), SLATE_OK);
    ids[17] = TM_VOCAB + 5;
    gp.on_piece = NULL;
    assert_int_equal(slate_generate(st, ids, 20, &gp, &res, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "index 17"));
    assert_int_equal(slate_state_length(st), 0);
    fill_ids(ids, 20, 3);
    /* An unknown text_before is refused before anything is fed. */
    gp.text_before = (slate_text_before)3;
    assert_int_equal(slate_generate(st, ids, 20, &gp, &res, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "text_before 3"));
    assert_int_equal(slate_state_length(st), 0);
    gp.text_before = SLATE_TEXT_BEFORE_AUTO;
    /* dump_logits: the cap bounds the rows written; a buffer without a cap is refused. */
    const int32_t V = f->V, cap = 4;
    float *dump = malloc(sizeof(float) * (size_t)V * (cap + 1));
    for (int32_t i = 0; i < V * (cap + 1); i++) dump[i] = -12345.0f;
    gp.n_predict = -1; /* until the context is full: 24 - 3 + 1 = 22 tokens */
    gp.dump_logits = dump;
    assert_int_equal(slate_generate(st, ids, 3, &gp, &res, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "dump_logits_cap"));
    gp.dump_logits_cap = cap;
    assert_int_equal(slate_generate(st, ids, 3, &gp, &res, &e), SLATE_OK);
    assert_int_equal(res.finish, SLATE_FINISH_CONTEXT_FULL);
    assert_int_equal(res.n_generated, 22);
    for (int32_t i = 0; i < V * cap; i++) assert_true(dump[i] != -12345.0f);
    for (int32_t i = V * cap; i < V * (cap + 1); i++) assert_true(dump[i] == -12345.0f);
    free(dump);
    free(r.prof);
    slate_state_free(st);
}

/* slate_model_describe's E_BUFFER_TOO_SMALL gives the size to allocate (with the NUL). */
static void describe_reports_the_size_to_allocate(void **stp) {
    fx *f = *stp;
    size_t need = 0, len = 0;
    assert_int_equal(slate_model_describe(f->m, NULL, 0, &need), SLATE_E_BUFFER_TOO_SMALL);
    char *buf = malloc(need);
    assert_int_equal(slate_model_describe(f->m, buf, need, &len), SLATE_OK);
    assert_int_equal(len + 1, need);
    assert_int_equal(strlen(buf), len);
    assert_int_equal(slate_model_describe(f->m, buf, need - 1, &len), SLATE_E_BUFFER_TOO_SMALL);
    assert_int_equal(len, need);
    free(buf);
    /* An empty text is a valid input even as NULL. */
    size_t n = 99;
    int32_t out[2];
    assert_int_equal(slate_tokenizer_encode(slate_model_tokenizer(f->m), NULL, 0, 0, out, 2, &n,
                                            NULL), SLATE_OK);
    assert_int_equal(n, 0);
}

static void smaller_state_context_is_enforced(void **stp) {
    fx *f = *stp;
    slate_state_params sp = slate_state_default_params();
    sp.n_ctx = 10;
    slate_state *a;
    assert_int_equal(slate_state_create(f->m, &sp, &a, NULL), SLATE_OK);
    int32_t ids[11];
    fill_ids(ids, 11, 2);
    slate_error e;
    assert_int_equal(slate_state_predict(a, ids, 11, NULL, &e), SLATE_E_CONTEXT_FULL);
    assert_int_equal(slate_state_predict(a, ids, 10, NULL, &e), SLATE_OK);
    slate_state_free(a);
}

static void budget_too_small_is_refused_with_numbers(void **stp) {
    (void)stp;
    slate_model_params mp = slate_model_default_params();
    mp.mem_budget_bytes = 1000;
    slate_model *m = NULL;
    slate_error e;
    assert_int_equal(slate_model_open(tu_tmp("plain.slate"), &mp, &m, &e), SLATE_E_BUDGET);
    assert_null(m);
    assert_non_null(strstr(e.message, "budget is 1000"));
}

typedef struct thr {
    slate_model *m;
    int32_t seed;
    float *out;
} thr;

static void *worker(void *arg) {
    thr *t = arg;
    slate_state *s;
    if (slate_state_create(t->m, NULL, &s, NULL)) return NULL;
    int32_t ids[12];
    fill_ids(ids, 12, (uint64_t)t->seed);
    for (int rep = 0; rep < 20; rep++) {
        slate_state_reset(s);
        slate_state_predict(s, ids, 8, NULL, NULL);
        for (int i = 8; i < 12; i++) slate_state_predict(s, ids + i, 1, NULL, NULL);
    }
    memcpy(t->out, slate_state_logits(s, NULL), sizeof(float) * TM_VOCAB);
    slate_state_free(s);
    return NULL;
}

static void states_on_several_threads_match_serial_results(void **stp) {
    fx *f = *stp;
    enum { N = 3 };
    thr t[N];
    pthread_t th[N];
    float out[N][TM_VOCAB], ref[N][TM_VOCAB];
    for (int i = 0; i < N; i++) {
        t[i] = (thr){f->m, 40 + i, ref[i]};
        worker(&t[i]);
        t[i].out = out[i];
    }
    for (int i = 0; i < N; i++) pthread_create(&th[i], NULL, worker, &t[i]);
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) assert_memory_equal(out[i], ref[i], sizeof ref[i]);
}

static void state_create_fails_cleanly_under_allocation_faults(void **stp) {
    fx *f = *stp;
    long long live = slate__alloc_live_bytes();
    for (long n = 1;; n++) {
        slate_state *s = NULL;
        slate__alloc_fail_after(n);
        slate_status st = slate_state_create(f->m, NULL, &s, NULL);
        slate__alloc_fail_after(0);
        if (st == SLATE_OK) {
            slate_state_free(s);
            break;
        }
        assert_int_equal(st, SLATE_E_NOMEM);
        assert_null(s);
        assert_int_equal(slate__alloc_live_bytes(), live);
        assert_true(n < 100);
    }
    assert_int_equal(slate__alloc_live_bytes(), live);
}

int main(void) {
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(prefill_then_decode_equals_longer_prefill),
        cmocka_unit_test(prefill_all_logits_equal_token_by_token),
        cmocka_unit_test(interleaved_states_equal_each_alone),
        cmocka_unit_test(truncate_then_refeed_equals_fresh_state),
        cmocka_unit_test(exported_cache_imported_into_new_state_continues_identically),
        cmocka_unit_test(exported_rows_are_each_heads_piece_side_by_side),
        cmocka_unit_test(explicit_causal_mask_equals_default),
        cmocka_unit_test(misuse_returns_status_with_message),
        cmocka_unit_test(generate_holds_the_state_and_checks_its_inputs),
        cmocka_unit_test(generate_without_prompt_samples_from_the_last_position),
        cmocka_unit_test(describe_reports_the_size_to_allocate),
        cmocka_unit_test(smaller_state_context_is_enforced),
        cmocka_unit_test(budget_too_small_is_refused_with_numbers),
        cmocka_unit_test(states_on_several_threads_match_serial_results),
        cmocka_unit_test(state_create_fails_cleanly_under_allocation_faults),
    };
    /* The same properties with sliding window, qkv bias, q/k norm, half rope, untied f16. */
    const struct CMUnitTest variant[] = {
        cmocka_unit_test(prefill_then_decode_equals_longer_prefill),
        cmocka_unit_test(prefill_all_logits_equal_token_by_token),
        cmocka_unit_test(truncate_then_refeed_equals_fresh_state),
        cmocka_unit_test(exported_cache_imported_into_new_state_continues_identically),
        /* the window still applies under a caller's mask (window 5, 8 positions) */
        cmocka_unit_test(explicit_causal_mask_equals_default),
    };
    int rc = cmocka_run_group_tests_name("plain", plain, setup, teardown);
    rc |= cmocka_run_group_tests_name("window_bias_qknorm_f16", variant, setup_window, teardown);
    return rc;
}
