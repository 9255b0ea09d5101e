/* test_kv_huge.c - huge pages for a deep cache (src/state/kvmem.c, slate__kv_huge_update): a
 * whole 2 MiB chunk of the cache mapping is advised to a huge page only once at least half of
 * it holds rows below the length, the advice is undone when the cache is emptied, and none of
 * it changes a value, and a trim past the length (memory pressure) undoes the advice and holds
 * it off until the cache is emptied: a state with the policy gives the bits of one created with
 * SLATE_NO_HUGEPAGES (the logits of every call, and every cache tensor read back). Whether
 * Linux then finds a huge page is its business (the test does not ask). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/model.h"
#include "tinymodel.h"

/* Two layers, 8 kv heads of head_dim 64, f32 cache (f16 would store K in blocks of 16
 * positions, K16, which fill a step ahead of V): 2 KiB per position of each of K and V, so a
 * context of 2048 makes four 4 MiB blocks (K, V) of eight 512 KiB head regions each: seven or
 * eight whole chunks, more than a decode step advises (2) and at most what a 128-row call does
 * (2 + 128 / 16). */
enum { CTX = 2048, QMAX = 256 };

static slate_model *open_model(void) {
    tm_opts o = tm_default();
    o.n_layers = 2;
    o.dim = 512;
    o.n_heads = 8;
    o.n_kv_heads = 8;
    o.ffn_dim = 64;
    o.n_ctx = CTX;
    o.max_query = QMAX;
    const char *path = tu_tmp("kv_huge.slate");
    slate_error e;
    if (tm_write(path, &o, &e)) fail_msg("tm_write: %s", e.message);
    slate_model *m = NULL;
    if (slate_model_open(path, NULL, &m, &e)) fail_msg("open: %s", e.message);
    return m;
}

static size_t n_advised(const slate_state *st) {
    size_t n = 0;
    for (size_t c = 0; c < st->kv_huge_n; c++) n += st->kv_huge[c] != 0;
    return n;
}

/* Prefills ids [from, to) in calls of at most QMAX into both states and compares the logits. */
static void feed_both(slate_state *a, slate_state *b, const int32_t *ids, int32_t from,
                      int32_t to) {
    for (int32_t i = from; i < to; i += QMAX) {
        int32_t n = to - i < QMAX ? to - i : QMAX;
        slate_error e;
        if (slate_state_predict(a, ids + i, n, NULL, &e)) fail_msg("predict: %s", e.message);
        if (slate_state_predict(b, ids + i, n, NULL, &e)) fail_msg("predict: %s", e.message);
        int32_t ra = 0, rb = 0;
        const float *la = slate_state_logits(a, &ra), *lb = slate_state_logits(b, &rb);
        assert_int_equal(ra, rb);
        assert_memory_equal(la, lb, (size_t)ra * TM_VOCAB * sizeof(float));
    }
}

/* Every cache tensor of both states, read back, is the same bytes. */
static void same_cache(const slate_state *a, const slate_state *b) {
    for (int32_t i = 0; i < slate_state_n_tensors(a); i++) {
        size_t na = 0, nb = 0;
        assert_int_equal(slate_state_read_tensor(a, i, NULL, 0, &na, NULL), SLATE_E_BUFFER_TOO_SMALL);
        assert_int_equal(slate_state_read_tensor(b, i, NULL, 0, &nb, NULL), SLATE_E_BUFFER_TOO_SMALL);
        assert_int_equal(na, nb);
        uint8_t *ba = malloc(na), *bb = malloc(nb);
        assert_non_null(ba);
        assert_non_null(bb);
        assert_int_equal(slate_state_read_tensor(a, i, ba, na, &na, NULL), SLATE_OK);
        assert_int_equal(slate_state_read_tensor(b, i, bb, nb, &nb, NULL), SLATE_OK);
        assert_memory_equal(ba, bb, na);
        free(ba);
        free(bb);
    }
}

static void advised_past_half_only_and_values_unchanged(void **unused) {
    (void)unused;
    slate_model *m = open_model();
    unsetenv("SLATE_NO_HUGEPAGES");
    slate_state *h = tu_new_state(m, SLATE_DTYPE_F32, CTX, false);
    setenv("SLATE_NO_HUGEPAGES", "1", 1);
    slate_state *s = tu_new_state(m, SLATE_DTYPE_F32, CTX, false);
    unsetenv("SLATE_NO_HUGEPAGES");
    /* 16 MiB of cache hold at least seven whole aligned chunks; the switched-off state none. */
    assert_true(h->kv_bytes >= (size_t)16 << 20);
    assert_true(h->kv_huge_n >= 1);
    assert_int_equal(s->kv_huge_n, 0);
    assert_null(s->kv_huge);

    int32_t ids[CTX];
    uint64_t seed = 7;
    for (int i = 0; i < CTX; i++) ids[i] = (int32_t)(tu_rand(&seed) % TM_VOCAB);

    /* A quarter of the context: each head region is a quarter full, so any 2 MiB chunk (four
     * 512 KiB regions, or parts of five when the mapping is not aligned) holds at most a
     * quarter of rows. Nothing is advised. */
    feed_both(h, s, ids, 0, CTX / 4);
    assert_int_equal(n_advised(h), 0);
    /* Just below half: still nothing (a chunk is exactly as full as its regions, or less). */
    feed_both(h, s, ids, CTX / 4, CTX / 2 - 16);
    assert_int_equal(n_advised(h), 0);
    /* Past half, by one token: every chunk qualifies, but a decode step advises only two (each
     * is copied), and the next step two more. */
    assert_true(h->kv_huge_n >= 7);
    feed_both(h, s, ids, CTX / 2 - 16, CTX / 2 - 1);
    assert_int_equal(n_advised(h), 0);
    feed_both(h, s, ids, CTX / 2 - 1, CTX / 2);
    assert_int_equal(n_advised(h), 2);
    feed_both(h, s, ids, CTX / 2, CTX / 2 + 1);
    assert_int_equal(n_advised(h), 4);
    /* The whole context, in more calls: every chunk is advised. */
    feed_both(h, s, ids, CTX / 2 + 16, CTX - 1);
    assert_int_equal(n_advised(h), h->kv_huge_n);
    same_cache(h, s);

    /* A truncate keeps the advice. */
    slate_error e;
    assert_int_equal(slate_state_truncate(h, CTX / 2, &e), SLATE_OK);
    assert_int_equal(slate_state_truncate(s, CTX / 2, &e), SLATE_OK);
    assert_int_equal(n_advised(h), h->kv_huge_n);
    feed_both(h, s, ids, CTX / 2, CTX / 2 + 40);
    same_cache(h, s);
    /* A trim past the length (memory pressure) undoes it, and no chunk is advised again while
     * the cache grows, however full: the trim's pages must stay handed back. */
    slate__kv_trim(h, slate_state_length(h));
    assert_int_equal(n_advised(h), 0);
    feed_both(h, s, ids, CTX / 2 + 40, CTX - 1);
    assert_int_equal(n_advised(h), 0);
    same_cache(h, s);
    /* Emptying the cache (a pressure reset or spill) ends the hold; the state is lazy until half
     * a chunk is filled once more. */
    slate__kv_trim(h, 0);
    assert_int_equal(n_advised(h), 0);
    assert_int_equal(slate_state_reset(h), SLATE_OK);
    assert_int_equal(slate_state_reset(s), SLATE_OK);
    feed_both(h, s, ids, 0, CTX / 4);
    assert_int_equal(n_advised(h), 0);
    feed_both(h, s, ids, CTX / 4, CTX / 2 - 16);
    assert_int_equal(n_advised(h), 0);
    /* A prefill of 128 rows across half may advise 2 + 128 / 16 = 10 chunks: all of them, so
     * the decode steps after a long prompt copy none. */
    feed_both(h, s, ids, CTX / 2 - 16, CTX / 2 + 112);
    assert_int_equal(n_advised(h), h->kv_huge_n);
    feed_both(h, s, ids, CTX / 2 + 112, CTX - 1);
    assert_int_equal(n_advised(h), h->kv_huge_n);
    same_cache(h, s);

    slate_state_free(h);
    slate_state_free(s);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(advised_past_half_only_and_values_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
