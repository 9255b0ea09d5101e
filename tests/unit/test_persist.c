/* test_persist.c - state files: save -> load -> continue equals continuing (bit-identical logits
 * and sampled tokens, for each cache dtype), the extra data round trip, the in-memory variants,
 * and every refusal (truncated, corrupted, another model, future version, wrong dtype, too
 * small a context, too small a buffer) with the right status and a state left unchanged. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tinymodel.h"

#define WINDOW 4

typedef struct fx {
    slate_model *m, *other;
    slate_model *win; /* m's shapes; layer 0 (caches 0 and 1) has a sliding window of WINDOW */
} fx;

static const char *make_pkg(const char *name, const tm_opts *o) {
    const char *path = tu_tmp(name);
    slate_error e;
    slate_status s = tm_write(path, o, &e);
    if (s) fprintf(stderr, "tm_write: %s\n", e.message);
    assert_int_equal(s, SLATE_OK);
    return path;
}

static int setup(void **st) {
    fx *f = calloc(1, sizeof *f);
    tm_opts o = tm_default();
    assert_int_equal(slate_model_open(make_pkg("persist.slate", &o), NULL, &f->m, NULL), SLATE_OK);
    o.seed = 999; /* same META and tokenizer, other weights */
    assert_int_equal(slate_model_open(make_pkg("other.slate", &o), NULL, &f->other, NULL),
                     SLATE_OK);
    o = tm_default();
    o.window = WINDOW;
    o.window_layers = 1;
    assert_int_equal(slate_model_open(make_pkg("window.slate", &o), NULL, &f->win, NULL), SLATE_OK);
    *st = f;
    return 0;
}
static int teardown(void **st) {
    fx *f = *st;
    assert_int_equal(slate_model_close(f->m), SLATE_OK);
    assert_int_equal(slate_model_close(f->other), SLATE_OK);
    assert_int_equal(slate_model_close(f->win), SLATE_OK);
    free(f);
    return 0;
}

static void fill_ids(int32_t *ids, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)(3 + (seed * 2654435761u + (uint64_t)i * 40503u) % 256);
}

static slate_state *new_state_keep(slate_model *m, int kv /* -1 default */, int32_t n_ctx,
                                  bool keep_all) {
    return tu_new_state(m, kv, n_ctx, keep_all);
}

static slate_state *new_state(slate_model *m, int kv /* -1 default */, int32_t n_ctx) {
    return tu_new_state(m, kv, n_ctx, false);
}

static slate_sampler *new_sampler(void) {
    slate_sampler_params sp = slate_sampler_default_params();
    sp.temperature = 1.0f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = 42;
    slate_sampler *s = NULL;
    assert_int_equal(slate_sampler_create(&sp, TM_VOCAB, &s, NULL), SLATE_OK);
    return s;
}

/* Samples n tokens and feeds each back; records the logits each was drawn from. */
static void run_on(slate_state *st, slate_sampler *smp, int n, int32_t *toks, float *logits) {
    for (int i = 0; i < n; i++) {
        const float *l = slate_state_logits(st, NULL);
        assert_non_null(l);
        memcpy(logits + (size_t)i * TM_VOCAB, l, sizeof(float) * TM_VOCAB);
        assert_int_equal(slate_sampler_sample(smp, l, TM_VOCAB, &toks[i], NULL), SLATE_OK);
        assert_int_equal(slate_state_predict(st, &toks[i], 1, NULL, NULL), SLATE_OK);
    }
}

/* Prefill 12 ids, sample and feed 3, save (ledger + RNG), continue 10 more; a fresh state
 * loaded from the file with a fresh sampler set to the saved RNG continues identically. */
static void restored_conversation_continues_bit_identically(void **stp) {
    fx *f = *stp;
    const int kvs[3] = {-1, SLATE_DTYPE_F32, SLATE_DTYPE_I8};
    for (int k = 0; k < 3; k++) {
        int32_t ids[12], warm[3], a_tok[10], b_tok[10];
        float *a_log = malloc(sizeof(float) * TM_VOCAB * 10);
        float *b_log = malloc(sizeof(float) * TM_VOCAB * 10);
        float w_log[3 * TM_VOCAB];
        fill_ids(ids, 12, 5);
        slate_state *a = new_state(f->m, kvs[k], 0);
        slate_sampler *sa = new_sampler();
        assert_int_equal(slate_state_predict(a, ids, 12, NULL, NULL), SLATE_OK);
        run_on(a, sa, 3, warm, w_log);
        int32_t ledger[15];
        memcpy(ledger, ids, sizeof ids);
        memcpy(ledger + 12, warm, sizeof warm);
        slate_state_extra x;
        memset(&x, 0, sizeof x);
        x.tokens = ledger;
        x.n_tokens = 15;
        x.has_rng = true;
        assert_int_equal(slate_sampler_get_rng(sa, x.rng), SLATE_OK);
        const char *user = "chat transcript";
        x.user = user;
        x.user_len = strlen(user);
        slate_error e;
        const char *path = tu_tmp("conv.state");
        assert_int_equal(slate_state_save(a, path, &x, &e), SLATE_OK);
        run_on(a, sa, 10, a_tok, a_log);

        slate_state *b = new_state(f->m, kvs[k], 0);
        int32_t got[32];
        char ubuf[64];
        slate_state_extra_out xo;
        memset(&xo, 0, sizeof xo);
        xo.tokens = got;
        xo.tokens_cap = 32;
        xo.user = ubuf;
        xo.user_cap = sizeof ubuf;
        assert_int_equal(slate_state_load(b, path, &xo, &e), SLATE_OK);
        assert_int_equal(slate_state_length(b), 15);
        assert_int_equal(xo.n_tokens, 15);
        assert_memory_equal(got, ledger, sizeof ledger);
        assert_int_equal(xo.user_len, strlen(user));
        assert_memory_equal(ubuf, user, strlen(user));
        assert_true(xo.has_rng);
        slate_sampler *sb = new_sampler();
        assert_int_equal(slate_sampler_set_rng(sb, xo.rng, &e), SLATE_OK);
        run_on(b, sb, 10, b_tok, b_log);
        assert_memory_equal(a_tok, b_tok, sizeof a_tok);
        assert_memory_equal(a_log, b_log, sizeof(float) * TM_VOCAB * 10);
        slate_sampler_free(sa);
        slate_sampler_free(sb);
        slate_state_free(a);
        slate_state_free(b);
        free(a_log);
        free(b_log);
    }
}

static void memory_variants_write_the_file_bytes(void **stp) {
    fx *f = *stp;
    int32_t ids[9];
    fill_ids(ids, 9, 2);
    slate_state *a = new_state(f->m, -1, 0);
    assert_int_equal(slate_state_predict(a, ids, 9, NULL, NULL), SLATE_OK);
    slate_state_extra x;
    memset(&x, 0, sizeof x);
    x.tokens = ids;
    x.n_tokens = 9;
    size_t need = 0;
    slate_error e;
    assert_int_equal(slate_state_save_mem(a, &x, NULL, 0, &need, &e), SLATE_E_BUFFER_TOO_SMALL);
    assert_true(need > 64);
    uint8_t *buf = malloc(need);
    size_t len = 0;
    assert_int_equal(slate_state_save_mem(a, &x, buf, need, &len, &e), SLATE_OK);
    assert_int_equal(len, need);
    const char *path = tu_tmp("mem.state");
    assert_int_equal(slate_state_save(a, path, &x, &e), SLATE_OK);
    char *file = NULL;
    size_t flen = 0;
    assert_int_equal(slate__read_file(path, 1 << 30, &file, &flen, NULL), SLATE_OK);
    assert_int_equal(flen, len);
    assert_memory_equal(file, buf, len);
    slate_state *b = new_state(f->m, -1, 0);
    assert_int_equal(slate_state_load_mem(b, buf, len, NULL, &e), SLATE_OK);
    assert_int_equal(slate_state_length(b), 9);
    assert_memory_equal(slate_state_logits(a, NULL), slate_state_logits(b, NULL),
                        sizeof(float) * TM_VOCAB);
    slate__free(file);
    free(buf);
    slate_state_free(a);
    slate_state_free(b);
}

/* A state with 6 positions and its logits, to check that refusals leave it alone. */
typedef struct snapshot {
    int32_t length;
    float logits[TM_VOCAB];
} snapshot;

static void snap(slate_state *st, snapshot *s) {
    s->length = slate_state_length(st);
    memcpy(s->logits, slate_state_logits(st, NULL), sizeof s->logits);
}
static void same_as(slate_state *st, const snapshot *s) {
    assert_int_equal(slate_state_length(st), s->length);
    assert_memory_equal(slate_state_logits(st, NULL), s->logits, sizeof s->logits);
}

static uint8_t *saved_bytes(slate_model *m, int32_t n, size_t *len) {
    int32_t ids[16];
    fill_ids(ids, n, 9);
    slate_state *a = new_state(m, -1, 0);
    assert_int_equal(slate_state_predict(a, ids, n, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_save_mem(a, NULL, NULL, 0, len, NULL), SLATE_E_BUFFER_TOO_SMALL);
    uint8_t *buf = malloc(*len);
    assert_int_equal(slate_state_save_mem(a, NULL, buf, *len, len, NULL), SLATE_OK);
    slate_state_free(a);
    return buf;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void fix_header_crc(uint8_t *b) { put_u32(b + 60, slate__crc32(0, b, 60)); }

static slate_status load_file(slate_state *st, const uint8_t *b, size_t n, slate_error *e) {
    const char *path = tu_tmp("bad.state");
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (n) assert_int_equal(fwrite(b, 1, n, fp), n);
    fclose(fp);
    return slate_state_load(st, path, NULL, e);
}

static void truncated_files_are_refused(void **stp) {
    fx *f = *stp;
    size_t len;
    uint8_t *good = saved_bytes(f->m, 12, &len);
    slate_state *st = new_state(f->m, -1, 0);
    int32_t ids[6];
    fill_ids(ids, 6, 1);
    assert_int_equal(slate_state_predict(st, ids, 6, NULL, NULL), SLATE_OK);
    snapshot s;
    snap(st, &s);
    size_t cuts[] = {0, 7, 63, 64, 100, len / 2, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        slate_error e;
        assert_int_equal(load_file(st, good, cuts[i], &e), SLATE_E_FORMAT);
        if (!strstr(e.message, "truncated")) fail_msg("cut %zu: %s", cuts[i], e.message);
        same_as(st, &s);
    }
    slate_state_free(st);
    free(good);
}

static void corrupted_files_are_refused_by_checksum(void **stp) {
    fx *f = *stp;
    size_t len;
    uint8_t *b = saved_bytes(f->m, 12, &len);
    slate_state *st = new_state(f->m, -1, 0);
    int32_t ids[6];
    fill_ids(ids, 6, 1);
    assert_int_equal(slate_state_predict(st, ids, 6, NULL, NULL), SLATE_OK);
    snapshot s;
    snap(st, &s);
    slate_error e;
    b[len - 5] ^= 0x40; /* a cache byte */
    assert_int_equal(load_file(st, b, len, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "payload checksum mismatch"));
    assert_true(e.has_offset);
    b[len - 5] ^= 0x40;
    /* A byte of the tensor table (reserved field of entry 0, just past the 64-byte header):
     * reported as corruption, not as a field that looks wrong (it used to say 'rows of 64
     * bytes; expected 64'). */
    b[64 + 4] ^= 1;
    assert_int_equal(load_file(st, b, len, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "payload checksum mismatch"));
    b[64 + 4] ^= 1;
    b[32] ^= 1; /* the length field */
    assert_int_equal(load_file(st, b, len, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "header checksum mismatch"));
    b[32] ^= 1;
    b[0] = 'X';
    assert_int_equal(slate_state_load_mem(st, b, len, NULL, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "not a slate state file"));
    same_as(st, &s);
    slate_state_free(st);
    free(b);
}

static void a_future_version_is_unsupported(void **stp) {
    fx *f = *stp;
    size_t len;
    uint8_t *b = saved_bytes(f->m, 4, &len);
    put_u32(b + 8, 3);
    fix_header_crc(b);
    slate_state *st = new_state(f->m, -1, 0);
    slate_error e;
    assert_int_equal(slate_state_load_mem(st, b, len, NULL, &e), SLATE_E_UNSUPPORTED);
    assert_non_null(strstr(e.message, "version 3 is newer"));
    assert_int_equal(slate_state_length(st), 0);
    slate_state_free(st);
    free(b);
}

/* Version 2 added each tensor's first held position (sliding windows) in the field version 1
 * kept 0: a version 1 file (the same bytes with every first position 0) still loads. */
static void a_version_1_file_still_loads(void **stp) {
    fx *f = *stp;
    size_t len;
    uint8_t *b = saved_bytes(f->m, 4, &len);
    assert_int_equal(b[8], 2);
    put_u32(b + 8, 1);
    fix_header_crc(b);
    slate_state *st = new_state(f->m, -1, 0);
    slate_error e;
    slate_status s = slate_state_load_mem(st, b, len, NULL, &e);
    if (s) fail_msg("load: %s", e.message);
    assert_int_equal(slate_state_length(st), 4);
    slate_state_free(st);
    free(b);
}

static void a_file_from_another_model_names_both_fingerprints(void **stp) {
    fx *f = *stp;
    slate_model_info mi, oi;
    assert_int_equal(slate_model_get_info(f->m, &mi), SLATE_OK);
    assert_int_equal(slate_model_get_info(f->other, &oi), SLATE_OK);
    assert_true(mi.fingerprint != oi.fingerprint);
    size_t len;
    uint8_t *b = saved_bytes(f->other, 5, &len);
    slate_state *st = new_state(f->m, -1, 0);
    slate_error e;
    assert_int_equal(load_file(st, b, len, &e), SLATE_E_INVALID_ARG);
    char want[64];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)oi.fingerprint);
    assert_non_null(strstr(e.message, want));
    snprintf(want, sizeof want, "%016llx", (unsigned long long)mi.fingerprint);
    assert_non_null(strstr(e.message, want));
    assert_non_null(strstr(e.message, "another model"));
    assert_int_equal(slate_state_length(st), 0);
    /* The same package opened again has the same fingerprint. */
    slate_model *again;
    assert_int_equal(slate_model_open(tu_tmp("persist.slate"), NULL, &again, NULL), SLATE_OK);
    slate_model_info ai;
    slate_model_get_info(again, &ai);
    assert_true(ai.fingerprint == mi.fingerprint);
    assert_int_equal(slate_model_close(again), SLATE_OK);
    slate_state_free(st);
    free(b);
}

static void dtype_context_and_buffer_mismatches_are_refused(void **stp) {
    fx *f = *stp;
    size_t len;
    uint8_t *b = saved_bytes(f->m, 12, &len); /* f16 caches, 12 positions */
    slate_error e;
    slate_state *i8 = new_state(f->m, SLATE_DTYPE_I8, 0);
    assert_int_equal(slate_state_load_mem(i8, b, len, NULL, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "f16 in the file but i8 in this state"));
    slate_state *small = new_state(f->m, -1, 8);
    assert_int_equal(slate_state_load_mem(small, b, len, NULL, &e), SLATE_E_CONTEXT_FULL);
    assert_non_null(strstr(e.message, "holds 12 positions"));
    assert_non_null(strstr(e.message, "context is 8"));
    /* An extra_out buffer that is too small: sizes reported, state unchanged. */
    slate_state *st = new_state(f->m, -1, 0);
    int32_t ids[15];
    fill_ids(ids, 15, 4);
    size_t need;
    slate_state *src = new_state(f->m, -1, 0);
    assert_int_equal(slate_state_predict(src, ids, 15, NULL, NULL), SLATE_OK);
    slate_state_extra x;
    memset(&x, 0, sizeof x);
    x.tokens = ids;
    x.n_tokens = 15;
    assert_int_equal(slate_state_save_mem(src, &x, NULL, 0, &need, NULL), SLATE_E_BUFFER_TOO_SMALL);
    uint8_t *buf = malloc(need);
    assert_int_equal(slate_state_save_mem(src, &x, buf, need, &need, NULL), SLATE_OK);
    int32_t few[4];
    slate_state_extra_out xo;
    memset(&xo, 0, sizeof xo);
    xo.tokens = few;
    xo.tokens_cap = 4;
    assert_int_equal(slate_state_load_mem(st, buf, need, &xo, &e), SLATE_E_BUFFER_TOO_SMALL);
    assert_int_equal(xo.n_tokens, 15);
    assert_int_equal(slate_state_length(st), 0);
    /* Bad extras at save. */
    x.n_tokens = -1;
    assert_int_equal(slate_state_save_mem(src, &x, buf, need, &need, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "n_tokens -1"));
    x.n_tokens = 3;
    x.tokens = NULL;
    assert_int_equal(slate_state_save(src, tu_tmp("x.state"), &x, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_state_save(NULL, tu_tmp("x.state"), NULL, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_state_load(st, NULL, NULL, &e), SLATE_E_INVALID_ARG);
    free(buf);
    slate_state_free(src);
    slate_state_free(st);
    slate_state_free(small);
    slate_state_free(i8);
    free(b);
}

/* ---- version 2: first positions of sliding-window caches -------------------------------- */

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
/* Size field and both checksums after an edit that leaves the file n bytes long. */
static void fix_all(uint8_t *b, size_t n) {
    put_u64(b + 24, n);
    put_u32(b + 56, slate__crc32(0, b + 64, n - 64));
    fix_header_crc(b);
}
/* Where the cache rows start in a saved file. */
static size_t rows_offset(const uint8_t *b) {
    size_t misc = 64 + (size_t)get_u32(b + 36) * 16;
    return misc + 40 + (size_t)get_u32(b + 48) * 4 + get_u32(b + misc + 32) +
           (size_t)get_u32(b + 44) * get_u32(b + 40) * 4;
}

/* A copy of a saved file b (every first position 0) with version `version` and tensor i's first
 * position first[i], holding only its rows first[i]..length-1 (none from the length on). */
static uint8_t *trim(const uint8_t *b, size_t n, uint32_t version, const uint32_t *first,
                     size_t *out_n) {
    uint32_t length = get_u32(b + 32), nt = get_u32(b + 36);
    size_t rows = rows_offset(b), src = rows, dst = rows;
    uint8_t *c = malloc(n);
    memcpy(c, b, rows);
    put_u32(c + 8, version);
    for (uint32_t i = 0; i < nt; i++) {
        size_t rb = get_u32(b + 64 + 16 * i + 8);
        uint32_t keep = first[i] >= length ? 0 : length - first[i];
        put_u32(c + 64 + 16 * i + 4, first[i]);
        memcpy(c + dst, b + src + (size_t)(length - keep) * rb, (size_t)keep * rb);
        src += (size_t)length * rb;
        dst += (size_t)keep * rb;
    }
    assert_int_equal(src, n);
    fix_all(c, dst);
    *out_n = dst;
    return c;
}

/* A file whose windowed caches (layer 0) hold only the rows the next query reads loads, from a
 * path and from memory, reports its first positions, and continues exactly like the whole file;
 * a keep-all state that loads it cannot go back behind them either. */
static void a_windowed_file_with_first_positions_loads_and_continues(void **stp) {
    fx *f = *stp;
    const uint32_t L = 12, F = L - WINDOW + 1;
    size_t n, m;
    uint8_t *whole = saved_bytes(f->win, (int32_t)L, &n);
    const uint32_t first[4] = {F, F, 0, 0};
    uint8_t *cut = trim(whole, n, 2, first, &m);
    assert_true(m < n);
    const char *path = tu_tmp("window.state");
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(cut, 1, m, fp), m);
    fclose(fp);
    slate_state *a = new_state(f->win, -1, 0), *b = new_state(f->win, -1, 0);
    slate_error e;
    assert_int_equal(slate_state_load_mem(a, whole, n, NULL, &e), SLATE_OK);
    if (slate_state_load(b, path, NULL, &e)) fail_msg("load: %s", e.message);
    assert_int_equal(slate_state_length(b), (int32_t)L);
    for (int32_t i = 0; i < 4; i++) {
        slate_tensor_info ti;
        assert_int_equal(slate_state_tensor_info(b, i, &ti), SLATE_OK);
        assert_int_equal(ti.first_position, (int32_t)first[i]);
        assert_int_equal(ti.window, i < 2 ? WINDOW : 0);
    }
    assert_memory_equal(slate_state_logits(a, NULL), slate_state_logits(b, NULL),
                        sizeof(float) * TM_VOCAB);
    int32_t ids[5];
    fill_ids(ids, 5, 3);
    assert_int_equal(slate_state_predict(a, ids, 5, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(b, ids, 5, NULL, NULL), SLATE_OK);
    assert_memory_equal(slate_state_logits(a, NULL), slate_state_logits(b, NULL),
                        sizeof(float) * TM_VOCAB);
    /* Saved again, the file keeps the first positions and loads into a keep-all state. */
    size_t m2;
    assert_int_equal(slate_state_save_mem(b, NULL, NULL, 0, &m2, NULL), SLATE_E_BUFFER_TOO_SMALL);
    uint8_t *again = malloc(m2);
    assert_int_equal(slate_state_save_mem(b, NULL, again, m2, &m2, NULL), SLATE_OK);
    assert_int_equal(get_u32(again + 8), 2);
    assert_int_equal(get_u32(again + 64 + 4), F);
    assert_int_equal(get_u32(again + 64 + 2 * 16 + 4), 0);
    slate_state *k = new_state_keep(f->win, -1, 0, true);
    assert_int_equal(slate_state_load_mem(k, again, m2, NULL, &e), SLATE_OK);
    assert_memory_equal(slate_state_logits(a, NULL), slate_state_logits(k, NULL),
                        sizeof(float) * TM_VOCAB);
    /* The rows behind first are not there: neither truncate nor read_tensor reach them. */
    assert_int_equal(slate_state_truncate(k, (int32_t)(F + WINDOW - 2), &e), SLATE_E_RELEASED);
    if (!strstr(e.message, "cache.0.k")) fail_msg("truncate: %s", e.message);
    /* ... and the message blames the file, not a reach this keep-all state does not have. */
    if (!strstr(e.message, "saved the file") || strstr(e.message, "kv_rollback_tokens"))
        fail_msg("truncate on a keep-all state: %s", e.message);
    size_t need;
    assert_int_equal(slate_state_read_tensor(k, 0, NULL, 0, &need, &e), SLATE_E_RELEASED);
    if (!strstr(e.message, "saved the file") || strstr(e.message, "kv_keep_all"))
        fail_msg("read_tensor on a keep-all state: %s", e.message);
    assert_int_equal(slate_state_read_tensor(k, 2, NULL, 0, &need, &e), SLATE_E_BUFFER_TOO_SMALL);
    assert_int_equal(slate_state_truncate(k, (int32_t)(F + WINDOW - 1), &e), SLATE_OK);
    free(again);
    free(cut);
    free(whole);
    slate_state_free(a);
    slate_state_free(b);
    slate_state_free(k);
}

/* Each first position the next query could not do with, or that the counts contradict, is
 * refused as corrupt with the cache named; the state keeps what it held. */
static void bad_first_positions_are_refused(void **stp) {
    fx *f = *stp;
    const uint32_t L = 12, F = L - WINDOW + 1;
    size_t n, m;
    uint8_t *whole = saved_bytes(f->win, (int32_t)L, &n);
    struct {
        uint32_t version, first[4];
        const char *msg;
    } cases[] = {
        {2, {F + 1, F, 0, 0}, "holds positions from 10 of 12, but the next query's window"},
        {2, {F, L, 0, 0}, "holds positions from 12 of 12"},
        {2, {L + 1, 0, 0, 0}, "holds positions from 13 of 12"},
        {2, {0x80000000u, 0, 0, 0}, "holds positions from 2147483648 of 12"},
        {2, {0, 0, 1, 0}, "it has no sliding window"},
        {2, {F, F, F, 0}, "it has no sliding window"},
        {1, {F, F, 0, 0}, "reserved field 9; expected 32 and 0"},
    };
    slate_state *st = new_state(f->win, -1, 0);
    int32_t ids[6];
    fill_ids(ids, 6, 1);
    assert_int_equal(slate_state_predict(st, ids, 6, NULL, NULL), SLATE_OK);
    snapshot s;
    snap(st, &s);
    slate_error e;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *c = trim(whole, n, cases[i].version, cases[i].first, &m);
        assert_int_equal(slate_state_load_mem(st, c, m, NULL, &e), SLATE_E_FORMAT);
        if (!strstr(e.message, cases[i].msg)) fail_msg("case %zu: %s", i, e.message);
        assert_true(e.has_offset);
        same_as(st, &s);
        free(c);
    }
    /* First positions written without the rows cut: the sizes disagree. */
    uint8_t *c = malloc(n);
    memcpy(c, whole, n);
    put_u32(c + 64 + 4, F);
    put_u32(c + 64 + 16 + 4, F);
    fix_all(c, n);
    assert_int_equal(slate_state_load_mem(st, c, n, NULL, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "the counts say"));
    same_as(st, &s);
    free(c);
    /* A model without a window refuses any first position above 0. */
    free(whole);
    whole = saved_bytes(f->m, (int32_t)L, &n);
    const uint32_t one[4] = {0, 0, 0, 1};
    c = trim(whole, n, 2, one, &m);
    slate_state *p = new_state(f->m, -1, 0);
    assert_int_equal(slate_state_load_mem(p, c, m, NULL, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "holds positions from 1 of 12, but it has no sliding window"));
    assert_int_equal(slate_state_length(p), 0);
    free(c);
    free(whole);
    slate_state_free(p);
    slate_state_free(st);
}

/* Logits are rows of the last call's positions: a file with more logit rows than positions
 * (length 0 and one row here) is corrupt, not a state whose logits belong to no position. */
static void logit_rows_beyond_the_length_are_refused(void **stp) {
    fx *f = *stp;
    size_t n;
    uint8_t *b = saved_bytes(f->m, 1, &n);
    assert_int_equal(get_u32(b + 44), 1);
    size_t m = rows_offset(b); /* without the one row of each cache */
    put_u32(b + 32, 0);
    fix_all(b, m);
    slate_state *st = new_state(f->m, -1, 0);
    slate_error e;
    assert_int_equal(slate_state_load_mem(st, b, m, NULL, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "1 logit rows for 0 positions"));
    assert_null(slate_state_logits(st, NULL));
    slate_state_free(st);
    free(b);
}

/* A file cut inside the tensor table or the fixed extras after it, its size field and checksums
 * made to agree, is refused with where it ends and what the table needs. */
static void a_file_cut_in_the_table_with_matching_sizes_is_refused(void **stp) {
    fx *f = *stp;
    size_t n;
    uint8_t *b = saved_bytes(f->m, 3, &n);
    const size_t cuts[] = {64 + 40, 64 + 4 * 16 + 20};
    const char *msgs[] = {"(104 bytes, 168 needed)", "(148 bytes, 168 needed)"};
    slate_state *st = new_state(f->m, -1, 0);
    slate_error e;
    for (int i = 0; i < 2; i++) {
        fix_all(b, cuts[i]);
        assert_int_equal(slate_state_load_mem(st, b, cuts[i], NULL, &e), SLATE_E_FORMAT);
        if (!strstr(e.message, "truncated in the tensor table or the fixed extras") ||
            !strstr(e.message, msgs[i]))
            fail_msg("cut %zu: %s", cuts[i], e.message);
        assert_int_equal(e.offset, cuts[i]);
    }
    assert_int_equal(slate_state_length(st), 0);
    slate_state_free(st);
    free(b);
}

static void save_is_atomic(void **stp) {
    fx *f = *stp;
    slate_state *st = new_state(f->m, -1, 0);
    int32_t ids[5];
    fill_ids(ids, 5, 8);
    assert_int_equal(slate_state_predict(st, ids, 5, NULL, NULL), SLATE_OK);
    slate_error e;
    assert_int_equal(slate_state_save(st, "/nonexistent-dir/x.state", NULL, &e), SLATE_E_IO);
    assert_non_null(strstr(e.message, "/nonexistent-dir/x.state.tmp"));
    const char *path = tu_tmp("atomic.state");
    /* A file that is not a state file (a package named by mistake) is refused, untouched. */
    FILE *fp = fopen(path, "wb");
    fputs("SLATEPKG old content", fp);
    fclose(fp);
    assert_int_equal(slate_state_save(st, path, NULL, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "exists and is not a slate state file"));
    char old[32] = "";
    fp = fopen(path, "rb");
    assert_non_null(fgets(old, sizeof old, fp));
    fclose(fp);
    assert_string_equal(old, "SLATEPKG old content");
    /* An empty file, a damaged save shorter than the magic, and a state file are replaced. */
    const char *replaceable[] = {"", "SLAT"};
    for (int i = 0; i < 3; i++) {
        if (i < 2) {
            fp = fopen(path, "wb");
            fputs(replaceable[i], fp);
            fclose(fp);
        }
        assert_int_equal(slate_state_save(st, path, NULL, &e), SLATE_OK);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        assert_false(tu_exists(tmp));
        slate_state *b = new_state(f->m, -1, 0);
        assert_int_equal(slate_state_load(b, path, NULL, &e), SLATE_OK);
        assert_int_equal(slate_state_length(b), 5);
        slate_state_free(b);
    }
    slate_state_free(st);
}

static void sampler_rng_pair_checks_its_input(void **stp) {
    (void)stp;
    slate_sampler *s = new_sampler();
    uint64_t r[4] = {0, 0, 0, 0};
    slate_error e;
    assert_int_equal(slate_sampler_set_rng(s, r, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "all zero"));
    assert_int_equal(slate_sampler_get_rng(NULL, r), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_sampler_get_rng(s, r), SLATE_OK);
    assert_true(r[0] | r[1] | r[2] | r[3]);
    slate_sampler_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(restored_conversation_continues_bit_identically),
        cmocka_unit_test(memory_variants_write_the_file_bytes),
        cmocka_unit_test(truncated_files_are_refused),
        cmocka_unit_test(corrupted_files_are_refused_by_checksum),
        cmocka_unit_test(a_future_version_is_unsupported),
        cmocka_unit_test(a_version_1_file_still_loads),
        cmocka_unit_test(a_file_from_another_model_names_both_fingerprints),
        cmocka_unit_test(dtype_context_and_buffer_mismatches_are_refused),
        cmocka_unit_test(a_windowed_file_with_first_positions_loads_and_continues),
        cmocka_unit_test(bad_first_positions_are_refused),
        cmocka_unit_test(logit_rows_beyond_the_length_are_refused),
        cmocka_unit_test(a_file_cut_in_the_table_with_matching_sizes_is_refused),
        cmocka_unit_test(save_is_atomic),
        cmocka_unit_test(sampler_rng_pair_checks_its_input),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, setup, teardown);
}
