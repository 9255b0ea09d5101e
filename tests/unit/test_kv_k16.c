/* test_kv_k16.c - the K16 cache layout (src/state/kvmem.c: f16 K caches of head_dim 64 or 128
 * stored dim-major in blocks of 16 positions where the kernel table has attention_k16, the
 * AVX-512 tables). Where it is chosen and where not; and that a state stored K16 gives the bits
 * of the same model with K stored as rows (the same package opened a second time, its kernel
 * table copied without attention_k16) through prefill, decode steps across many blocks, a
 * truncate, read_tensor, write_tensor and a state file saved from one layout and loaded into
 * the other. On a CPU without AVX-512 the layout is never chosen, which the first test checks,
 * and the others are skipped. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "plan/model.h"
#include "tinymodel.h"

#define VOCAB TM_VOCAB

typedef struct shape {
    const char *name;
    int32_t dim, n_heads, n_kv_heads;
} shape;

/* head_dim 64 with two kv heads of two query heads each, and head_dim 128 with one */
static const shape SHAPES[] = {{"hd64_gqa2", 256, 4, 2}, {"hd128", 256, 2, 1}};

static slate__kernels g_rows_table; /* the model's table without attention_k16 */

static tm_opts opts_of(const shape *s) {
    tm_opts o = tm_default();
    o.dim = s->dim;
    o.n_heads = s->n_heads;
    o.n_kv_heads = s->n_kv_heads;
    o.ffn_dim = 96;
    o.n_ctx = 96;
    o.max_query = 24;
    return o;
}

static slate_model *open_pkg(const char *name, const tm_opts *o) {
    const char *path = tu_tmp(name);
    slate_error e;
    if (tm_write(path, o, &e)) fail_msg("tm_write: %s", e.message);
    slate_model *m = NULL;
    if (slate_model_open(path, NULL, &m, &e)) fail_msg("open %s: %s", name, e.message);
    return m;
}

static slate_state *new_state(slate_model *m, int kv /* -1: the package's */, int32_t n_ctx) {
    return tu_new_state(m, kv, n_ctx, false);
}

/* K16 flags of a state: bit i set when tensor i is stored K16; *k_mask gets the tensors whose
 * names end in ".k" (the K caches). */
static uint32_t k16_mask(const slate_state *st, uint32_t *k_mask) {
    uint32_t m = 0, k = 0;
    for (int32_t i = 0; i < slate_state_n_tensors(st); i++) {
        slate_tensor_info ti;
        assert_int_equal(slate_state_tensor_info(st, i, &ti), SLATE_OK);
        size_t n = strlen(ti.name);
        if (n > 2 && strcmp(ti.name + n - 2, ".k") == 0) k |= 1u << i;
        if (st->kv_k16[i]) m |= 1u << i;
    }
    *k_mask = k;
    return m;
}

static bool have_k16(void) { return slate__kernels_get()->attention_k16 != NULL; }

/* The profile names the layout each attention op reads: want ("k16" or "rows") for all. */
static void profile_says(slate_state *st, const char *want) {
    int32_t id = 5;
    assert_int_equal(slate_state_set_profiling(st, true), SLATE_OK);
    assert_int_equal(slate_state_predict(st, &id, 1, NULL, NULL), SLATE_OK);
    slate_op_profile prof[256];
    size_t n = 0;
    assert_int_equal(slate_state_profile(st, prof, 256, &n), SLATE_OK);
    int n_attention = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(prof[i].op_name, "attention") == 0) {
            n_attention++;
            if (!prof[i].layout || strcmp(prof[i].layout, want) != 0)
                fail_msg("op %zu: the profile says layout %s, want %s", i,
                         prof[i].layout ? prof[i].layout : "NULL", want);
        }
    assert_int_equal(n_attention, 2);
    assert_int_equal(slate_state_reset(st), SLATE_OK);
}

static void k16_is_chosen_only_where_attention_k16_reads_it(void **stp) {
    (void)stp;
    bool on = have_k16();
    if (!on) fprintf(stderr, "note: %s has no attention_k16: no state may use K16\n",
                     slate__kernels_get()->name);
    for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++) {
        tm_opts o = opts_of(&SHAPES[s]);
        slate_model *m = open_pkg(SHAPES[s].name, &o);
        uint32_t k;
        slate_state *st = new_state(m, -1, 0); /* the package's f16 cache, n_ctx 96 */
        uint32_t got = k16_mask(st, &k);
        assert_int_equal(k, 0x5); /* cache.0.k, cache.0.v, cache.1.k, cache.1.v */
        if (got != (on ? k : 0u))
            fail_msg("%s, f16 cache: K16 tensors 0x%x, want 0x%x", SHAPES[s].name, got, on ? k : 0u);
        profile_says(st, on ? "k16" : "rows");
        slate_state_free(st);
        st = new_state(m, SLATE_DTYPE_F32, 0); /* f32 cache: rows */
        assert_int_equal(k16_mask(st, &k), 0);
        profile_says(st, "rows");
        slate_state_free(st);
        st = new_state(m, SLATE_DTYPE_I8, 0);
        assert_int_equal(k16_mask(st, &k), 0);
        slate_state_free(st);
        st = new_state(m, -1, 40); /* no multiple of 16: the regions round up to whole blocks */
        got = k16_mask(st, &k);
        if (got != (on ? k : 0u))
            fail_msg("%s, context 40: K16 tensors 0x%x, want 0x%x", SHAPES[s].name, got,
                     on ? k : 0u);
        slate_state_free(st);
        assert_int_equal(slate_model_close(m), SLATE_OK);
    }
    /* head_dim 8 (the default tiny model) and a windowed model: rows */
    tm_opts o = tm_default();
    slate_model *m = open_pkg("hd8.slate", &o);
    uint32_t k;
    slate_state *st = new_state(m, -1, 0);
    assert_int_equal(k16_mask(st, &k), 0);
    slate_state_free(st);
    assert_int_equal(slate_model_close(m), SLATE_OK);
    o = opts_of(&SHAPES[0]);
    o.window = 8;
    m = open_pkg("window.slate", &o);
    st = new_state(m, -1, 0);
    assert_int_equal(k16_mask(st, &k), 0);
    slate_state_free(st);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

static void fill_ids(int32_t *ids, int n, uint64_t seed) {
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(3 + (seed * 2654435761u + (uint64_t)i * 40503u) % 256);
}

/* Predicts ids on both states; their last logits must be the same bits. */
static void both(slate_state *a, slate_state *b, const int32_t *ids, int32_t n, const char *what) {
    assert_int_equal(slate_state_predict(a, ids, n, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_predict(b, ids, n, NULL, NULL), SLATE_OK);
    const float *la = slate_state_logits(a, NULL), *lb = slate_state_logits(b, NULL);
    for (int i = 0; i < VOCAB; i++)
        if (memcmp(&la[i], &lb[i], sizeof(float)))
            fail_msg("%s at length %d: logit %d is %.9g stored K16, %.9g as rows", what,
                     slate_state_length(a), i, (double)la[i], (double)lb[i]);
}

/* Every tensor of both states exports the same bytes (rows, whatever the layout). */
static void same_tensors(const slate_state *a, const slate_state *b) {
    for (int32_t i = 0; i < slate_state_n_tensors(a); i++) {
        slate_tensor_info ti;
        assert_int_equal(slate_state_tensor_info(a, i, &ti), SLATE_OK);
        size_t cap = ti.row_bytes * (size_t)slate_state_length(a), la = 0, lb = 0;
        uint8_t *ba = malloc(cap), *bb = malloc(cap);
        assert_int_equal(slate_state_read_tensor(a, i, ba, cap, &la, NULL), SLATE_OK);
        assert_int_equal(slate_state_read_tensor(b, i, bb, cap, &lb, NULL), SLATE_OK);
        assert_int_equal(la, cap);
        assert_int_equal(lb, cap);
        if (memcmp(ba, bb, cap)) fail_msg("tensor %s exports other bytes stored K16", ti.name);
        free(ba);
        free(bb);
    }
}

/* Copies every tensor of src into a fresh state of m through read_tensor / write_tensor, by way
 * of a buffer off bytes past an allocation (1: rows of 16-bit values at odd addresses, which
 * are copied value by value instead of by transpose16). */
static slate_state *copy_by_tensors(slate_model *m, const slate_state *src, size_t off) {
    slate_state *dst = new_state(m, -1, 0);
    int32_t len = slate_state_length(src);
    for (int32_t i = 0; i < slate_state_n_tensors(src); i++) {
        slate_tensor_info ti;
        assert_int_equal(slate_state_tensor_info(src, i, &ti), SLATE_OK);
        size_t cap = ti.row_bytes * (size_t)len, got = 0;
        uint8_t *buf = malloc(cap + off);
        assert_int_equal(slate_state_read_tensor(src, i, buf + off, cap, &got, NULL), SLATE_OK);
        assert_int_equal(slate_state_write_tensor(dst, i, buf + off, cap, len, NULL), SLATE_OK);
        free(buf);
    }
    assert_int_equal(slate_state_set_length(dst, len, NULL), SLATE_OK);
    return dst;
}

/* Skips the test on a table without attention_k16. */
static void need_k16(void) {
    if (!have_k16()) {
        fprintf(stderr, "[  SKIP    ] %s has no attention_k16\n", slate__kernels_get()->name);
        skip();
    }
}

/* Two packages of shape sh (tag names their files): *mk as opened, *mr with its kernel table
 * copied without attention_k16 before any state, so its states store K as rows. */
static void open_pair(const shape *sh, const char *tag, slate_model **mk, slate_model **mr) {
    tm_opts o = opts_of(sh);
    char name[64];
    snprintf(name, sizeof name, "%s-k16%s.slate", sh->name, tag);
    *mk = open_pkg(name, &o);
    snprintf(name, sizeof name, "%s-rows%s.slate", sh->name, tag);
    *mr = open_pkg(name, &o);
    g_rows_table = *(*mr)->k;
    g_rows_table.attention_k16 = NULL;
    (*mr)->k = &g_rows_table;
}

static void k16_gives_the_bits_of_rows(void **stp) {
    (void)stp;
    need_k16();
    for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++) {
        slate_model *mk, *mr;
        open_pair(&SHAPES[s], "", &mk, &mr);
        slate_state *a = new_state(mk, -1, 0), *b = new_state(mr, -1, 0);
        uint32_t k;
        assert_int_not_equal(k16_mask(a, &k), 0);
        assert_int_equal(k16_mask(b, &k), 0);

        int32_t ids[96];
        fill_ids(ids, 96, 7 + s);
        both(a, b, ids, 21, "prefill of 21"); /* a partial second block */
        for (int i = 21; i < 60; i++) both(a, b, ids + i, 1, "decode step");
        same_tensors(a, b);
        /* back into a block, then a multi-row call across two block boundaries */
        assert_int_equal(slate_state_truncate(a, 37, NULL), SLATE_OK);
        assert_int_equal(slate_state_truncate(b, 37, NULL), SLATE_OK);
        both(a, b, ids + 60, 24, "prefill of 24 after a truncate to 37");
        same_tensors(a, b);

        /* A state file saved from the K16 state, loaded into either layout, and the cache
         * copied tensor by tensor into either: each continues as the original does. */
        const char *path = tu_tmp("k16.state");
        slate_error e;
        slate_state_extra x;
        memset(&x, 0, sizeof x);
        x.user = "odd"; /* 3 bytes before the rows: they lie at odd offsets in the file */
        x.user_len = 3;
        assert_int_equal(slate_state_save(a, path, &x, &e), SLATE_OK);
        slate_state *fa = new_state(mk, -1, 0), *fb = new_state(mr, -1, 0);
        assert_int_equal(slate_state_load(fa, path, NULL, &e), SLATE_OK);
        assert_int_equal(slate_state_load(fb, path, NULL, &e), SLATE_OK);
        slate_state *ta = copy_by_tensors(mk, b, 0), *tb = copy_by_tensors(mr, a, 1);
        slate_state *tc = copy_by_tensors(mk, b, 1);
        slate_state *cont[5] = {fa, fb, ta, tb, tc};
        const char *how[5] = {"loaded into K16", "loaded into rows", "rows copied into K16",
                              "K16 copied into rows", "rows copied into K16 from an odd address"};
        for (int c = 0; c < 5; c++) {
            assert_int_equal(slate_state_length(cont[c]), 61);
            for (int i = 84; i < 90; i++) {
                char what[80];
                snprintf(what, sizeof what, "after the cache was %s", how[c]);
                both(cont[c], c % 2 ? a : b, ids + i, 1, what);
            }
            /* rewind the reference for the next copy */
            assert_int_equal(slate_state_truncate(c % 2 ? a : b, 61, NULL), SLATE_OK);
        }
        for (int c = 0; c < 5; c++) slate_state_free(cont[c]);
        slate_state_free(a);
        slate_state_free(b);
        assert_int_equal(slate_model_close(mk), SLATE_OK);
        assert_int_equal(slate_model_close(mr), SLATE_OK);
    }
}

/* A context that is no multiple of 16 (90: its last block has 10 positions): the regions are
 * rounded up to whole blocks (slate__kv_ctx_rows), so the state is stored K16, and it gives the
 * bits of rows up to its last position, exports the same tensors, saves a file that a rows
 * state of that context loads, and reserves what the planner says. */
static void k16_at_a_context_of_no_whole_blocks(void **stp) {
    (void)stp;
    need_k16();
    enum { CTX = 90 };
    for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++) {
        slate_model *mk, *mr;
        open_pair(&SHAPES[s], "-90", &mk, &mr);
        slate_state *a = new_state(mk, -1, CTX), *b = new_state(mr, -1, CTX);
        uint32_t k;
        assert_int_not_equal(k16_mask(a, &k), 0);
        assert_int_equal(k16_mask(b, &k), 0);
        slate_plan_params pp = slate_plan_default_params();
        pp.n_ctx = CTX;
        slate_plan plan;
        assert_int_equal(slate_model_plan(mk, &pp, &plan, NULL), SLATE_OK);
        slate_state_memory mem;
        assert_int_equal(slate_state_get_memory(a, &mem), SLATE_OK);
        assert_int_equal(mem.kv_reserved_bytes, plan.kv_bytes);

        int32_t ids[CTX];
        fill_ids(ids, CTX, 11 + s);
        both(a, b, ids, 24, "prefill of 24");
        for (int i = 24; i < CTX; i++) both(a, b, ids + i, 1, "decode step to the context's end");
        assert_int_equal(slate_state_length(a), CTX);
        same_tensors(a, b);
        const char *path = tu_tmp("k16-90.state");
        slate_error e;
        assert_int_equal(slate_state_truncate(a, 85, NULL), SLATE_OK);
        assert_int_equal(slate_state_truncate(b, 85, NULL), SLATE_OK);
        assert_int_equal(slate_state_save(a, path, NULL, &e), SLATE_OK);
        slate_state *fb = new_state(mr, -1, CTX);
        assert_int_equal(slate_state_load(fb, path, NULL, &e), SLATE_OK);
        for (int i = 85; i < CTX; i++) both(fb, a, ids + i, 1, "after a K16 file loaded into rows");
        slate_state_free(fb);
        slate_state_free(a);
        slate_state_free(b);
        assert_int_equal(slate_model_close(mk), SLATE_OK);
        assert_int_equal(slate_model_close(mr), SLATE_OK);
    }
}

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(k16_is_chosen_only_where_attention_k16_reads_it),
        cmocka_unit_test(k16_gives_the_bits_of_rows),
        cmocka_unit_test(k16_at_a_context_of_no_whole_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
