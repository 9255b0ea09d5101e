/* test_stop.c - the streaming stop-string matcher (src/gen/stop.c): stops split across pieces,
 * held-back text released on mismatch and on flush, earliest match among several stops,
 * multibyte stops, refusal of empty stops, pass-through without stops, allocation faults, and a
 * randomized comparison against a whole-text reference with random piece cuts. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "gen/stop.h"

/* Everything the matcher released over a run, and whether / which stop matched. */
typedef struct run {
    char text[1024];
    size_t len;
    bool stopped;
    int32_t matched;
} run;

static slate__stop *make(const char *const *stops, int32_t n) {
    slate__stop *s = NULL;
    slate_error e;
    assert_int_equal(slate__stop_create(stops, n, &s, &e), SLATE_OK);
    assert_non_null(s);
    return s;
}

/* Feeds text cut into pieces of `piece` bytes (0: one piece), then flushes. */
static run feed_cut(slate__stop *s, const char *text, size_t len, size_t piece) {
    run r;
    memset(&r, 0, sizeof r);
    char out[1024];
    size_t n_out = 0;
    if (piece == 0) piece = len ? len : 1;
    for (size_t at = 0; at < len; at += piece) {
        size_t n = len - at < piece ? len - at : piece;
        bool stop = slate__stop_feed(s, text + at, n, out, &n_out);
        assert_true(n_out <= n + slate__stop_max_len(s));
        memcpy(r.text + r.len, out, n_out);
        r.len += n_out;
        if (stop) r.stopped = true;
    }
    slate__stop_flush(s, out, &n_out);
    memcpy(r.text + r.len, out, n_out);
    r.len += n_out;
    r.matched = slate__stop_matched(s);
    return r;
}

static void assert_released(const run *r, const char *expect) {
    if (r->len != strlen(expect) || memcmp(r->text, expect, r->len) != 0)
        fail_msg("released '%.*s', expected '%s'", (int)r->len, r->text, expect);
}

static void stop_split_into_one_byte_pieces_is_caught(void **st) {
    (void)st;
    long long live = slate__alloc_live_bytes();
    const char *stops[] = {"END"};
    slate__stop *s = make(stops, 1);
    char out[64];
    size_t n = 0;
    const char *text = "abENDxyz";
    const char *expect[] = {"a", "b", "", "", ""}; /* what each byte releases */
    for (int i = 0; i < 5; i++) {
        bool stop = slate__stop_feed(s, text + i, 1, out, &n);
        assert_int_equal(n, strlen(expect[i]));
        assert_memory_equal(out, expect[i], n);
        assert_int_equal(stop, i == 4);
    }
    assert_int_equal(slate__stop_matched(s), 0);
    /* After the match nothing more comes out, not even on flush. */
    assert_true(slate__stop_feed(s, "xyz", 3, out, &n));
    assert_int_equal(n, 0);
    slate__stop_flush(s, out, &n);
    assert_int_equal(n, 0);
    slate__stop_free(s);
    assert_int_equal(slate__alloc_live_bytes(), live);
}

static void stop_split_across_two_pieces_is_caught(void **st) {
    (void)st;
    const char *stops[] = {"world"};
    slate__stop *s = make(stops, 1);
    char out[64];
    size_t n = 0;
    assert_false(slate__stop_feed(s, "Hello wo", 8, out, &n));
    assert_int_equal(n, 6);
    assert_memory_equal(out, "Hello ", 6);
    assert_true(slate__stop_feed(s, "rld!", 4, out, &n));
    assert_int_equal(n, 0);
    assert_int_equal(slate__stop_matched(s), 0);
    slate__stop_free(s);
}

static void text_without_match_is_all_released_by_flush(void **st) {
    (void)st;
    const char *stops[] = {"world", "<|end|>"};
    slate__stop *s = make(stops, 2);
    const char *text = "say wo and <|en";
    for (size_t piece = 0; piece <= 4; piece++) {
        slate__stop_reset(s);
        run r = feed_cut(s, text, strlen(text), piece);
        assert_false(r.stopped);
        assert_int_equal(r.matched, -1);
        assert_released(&r, text);
    }
    slate__stop_free(s);
}

static void held_back_partial_then_mismatch_releases_it(void **st) {
    (void)st;
    const char *stops[] = {"world"};
    slate__stop *s = make(stops, 1);
    char out[64];
    size_t n = 0;
    assert_false(slate__stop_feed(s, "wo", 2, out, &n));
    assert_int_equal(n, 0);
    assert_false(slate__stop_feed(s, "nder", 4, out, &n));
    assert_int_equal(n, 6);
    assert_memory_equal(out, "wonder", 6);
    slate__stop_free(s);

    /* "aab" against "ab": the first 'a' is held, the second shows it cannot start the stop. */
    const char *ab[] = {"ab"};
    s = make(ab, 1);
    assert_false(slate__stop_feed(s, "a", 1, out, &n));
    assert_int_equal(n, 0);
    assert_false(slate__stop_feed(s, "a", 1, out, &n));
    assert_int_equal(n, 1);
    assert_memory_equal(out, "a", 1);
    assert_true(slate__stop_feed(s, "b", 1, out, &n));
    assert_int_equal(n, 0);
    slate__stop_reset(s);
    run r = feed_cut(s, "aab", 3, 0);
    assert_true(r.stopped);
    assert_released(&r, "a");
    slate__stop_free(s);
}

static void match_in_middle_of_piece_releases_text_before_it(void **st) {
    (void)st;
    const char *stops[] = {"STOP"};
    slate__stop *s = make(stops, 1);
    char out[64];
    size_t n = 0;
    assert_true(slate__stop_feed(s, "abc STOP def", 12, out, &n));
    assert_int_equal(n, 4);
    assert_memory_equal(out, "abc ", 4);
    slate__stop_free(s);
}

static void earliest_match_wins_among_several_stops(void **st) {
    (void)st;
    const char *stops[] = {"world", "hello"};
    slate__stop *s = make(stops, 2);
    run r = feed_cut(s, "say hello world", 15, 0);
    assert_true(r.stopped);
    assert_int_equal(r.matched, 1);
    assert_released(&r, "say ");
    slate__stop_free(s);

    /* "abc" completes before "bcd" could, whatever the order of the stops or the cut. */
    const char *order1[] = {"abc", "bcd"};
    const char *order2[] = {"bcd", "abc"};
    for (int o = 0; o < 2; o++) {
        s = make(o == 0 ? order1 : order2, 2);
        for (size_t piece = 0; piece <= 3; piece++) {
            slate__stop_reset(s);
            r = feed_cut(s, "abcd", 4, piece);
            assert_true(r.stopped);
            assert_int_equal(r.matched, o == 0 ? 0 : 1);
            assert_released(&r, "");
        }
        slate__stop_free(s);
    }

    /* "ab" is held as a prefix of "abx"; then "bc" completes inside it. */
    const char *overlap[] = {"abx", "bc"};
    s = make(overlap, 2);
    r = feed_cut(s, "zabc", 4, 1);
    assert_true(r.stopped);
    assert_int_equal(r.matched, 1);
    assert_released(&r, "za");
    slate__stop_free(s);
}

static void multibyte_stop_split_inside_a_character_is_caught(void **st) {
    (void)st;
    const char *stops[] = {"\xc3\xa9!"}; /* "é!" */
    slate__stop *s = make(stops, 1);
    const char *text = "caf\xc3\xa9!";
    for (size_t piece = 0; piece <= 3; piece++) {
        slate__stop_reset(s);
        run r = feed_cut(s, text, strlen(text), piece);
        assert_true(r.stopped);
        assert_released(&r, "caf");
    }
    /* No match: the held bytes come back exactly, the character whole. */
    const char *other = "caf\xc3\xa9?";
    for (size_t piece = 0; piece <= 3; piece++) {
        slate__stop_reset(s);
        run r = feed_cut(s, other, strlen(other), piece);
        assert_false(r.stopped);
        assert_released(&r, other);
    }
    char out[16];
    size_t n = 0;
    slate__stop_reset(s);
    assert_false(slate__stop_feed(s, "x\xc3\xa9", 3, out, &n));
    assert_int_equal(n, 1); /* "é" is held whole */
    slate__stop_free(s);
}

static void empty_stop_string_is_refused(void **st) {
    (void)st;
    long long live = slate__alloc_live_bytes();
    slate__stop *s = (slate__stop *)&s; /* must be reset to NULL */
    slate_error e;
    const char *stops[] = {"ok", ""};
    assert_int_equal(slate__stop_create(stops, 2, &s, &e), SLATE_E_INVALID_ARG);
    assert_null(s);
    assert_non_null(strstr(e.message, "stop string 1 is empty"));

    const char *with_null[] = {"ok", NULL};
    assert_int_equal(slate__stop_create(with_null, 2, &s, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "stop string 1 is NULL"));
    assert_int_equal(slate__stop_create(stops, -1, &s, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "n = -1"));
    assert_int_equal(slate__stop_create(NULL, 1, &s, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate__stop_create(stops, 1, NULL, NULL), SLATE_E_INVALID_ARG);
    assert_int_equal(slate__alloc_live_bytes(), live);
}

static void no_stop_strings_pass_text_through(void **st) {
    (void)st;
    slate__stop *s = make(NULL, 0);
    assert_int_equal(slate__stop_max_len(s), 0);
    char out[64];
    size_t n = 99;
    assert_false(slate__stop_feed(s, "hello", 5, out, &n));
    assert_int_equal(n, 5);
    assert_memory_equal(out, "hello", 5);
    assert_false(slate__stop_feed(s, "", 0, out, &n));
    assert_int_equal(n, 0);
    slate__stop_flush(s, out, &n);
    assert_int_equal(n, 0);
    assert_int_equal(slate__stop_matched(s), -1);
    slate__stop_free(s);
    slate__stop_free(NULL);
}

static void reset_forgets_match_and_held_text(void **st) {
    (void)st;
    const char *stops[] = {"xy"};
    slate__stop *s = make(stops, 1);
    char out[16];
    size_t n = 0;
    assert_true(slate__stop_feed(s, "axy", 3, out, &n));
    slate__stop_reset(s);
    assert_int_equal(slate__stop_matched(s), -1);
    assert_false(slate__stop_feed(s, "bx", 2, out, &n));
    assert_int_equal(n, 1);
    slate__stop_reset(s); /* drops the held "x" */
    slate__stop_flush(s, out, &n);
    assert_int_equal(n, 0);
    slate__stop_free(s);
}

static void create_fails_cleanly_under_allocation_faults(void **st) {
    (void)st;
    long long live = slate__alloc_live_bytes();
    const char *stops[] = {"one", "two", "three"};
    for (long k = 1;; k++) {
        slate__stop *s = NULL;
        slate_error e;
        slate__alloc_fail_after(k);
        slate_status rc = slate__stop_create(stops, 3, &s, &e);
        slate__alloc_fail_after(0);
        if (rc == SLATE_OK) {
            assert_true(k > 1);
            slate__stop_free(s);
            break;
        }
        assert_int_equal(rc, SLATE_E_NOMEM);
        assert_null(s);
        assert_int_equal(slate__alloc_live_bytes(), live);
    }
    assert_int_equal(slate__alloc_live_bytes(), live);
}

/* Reference on the whole text: the first stop to complete (earliest end; then longest; then
 * lowest index). Returns the released length and sets *idx (-1 and len when none matches). */
static size_t reference(const char *const *stops, int n, const char *text, size_t len,
                        int32_t *idx) {
    for (size_t end = 1; end <= len; end++) {
        int32_t best = -1;
        for (int i = 0; i < n; i++) {
            size_t L = strlen(stops[i]);
            if (L <= end && memcmp(text + end - L, stops[i], L) == 0 &&
                (best < 0 || L > strlen(stops[best])))
                best = i;
        }
        if (best >= 0) {
            *idx = best;
            return end - strlen(stops[best]);
        }
    }
    *idx = -1;
    return len;
}

static void random_cuts_agree_with_whole_text_reference(void **st) {
    (void)st;
    uint64_t seed = tu_seed();
    uint64_t r = seed;
    long long live = slate__alloc_live_bytes();
    for (int iter = 0; iter < 2000; iter++) {
        char pool[4][8];
        const char *stops[4];
        int n_stops = 1 + (int)(tu_rand(&r) % 3);
        for (int i = 0; i < n_stops; i++) {
            int L = 1 + (int)(tu_rand(&r) % 4);
            for (int j = 0; j < L; j++) pool[i][j] = (char)('a' + tu_rand(&r) % 3);
            pool[i][L] = '\0';
            stops[i] = pool[i];
        }
        char text[64];
        size_t len = tu_rand(&r) % 40;
        for (size_t j = 0; j < len; j++) text[j] = (char)('a' + tu_rand(&r) % 3);

        int32_t want_idx;
        size_t want_len = reference(stops, n_stops, text, len, &want_idx);
        slate__stop *s = make(stops, n_stops);
        run got;
        memset(&got, 0, sizeof got);
        char out[128];
        size_t n_out = 0;
        for (size_t at = 0; at < len;) { /* random cuts, empty pieces included */
            size_t piece = tu_rand(&r) % 6;
            if (piece > len - at) piece = len - at;
            if (slate__stop_feed(s, text + at, piece, out, &n_out)) got.stopped = true;
            assert_true(n_out <= piece + slate__stop_max_len(s));
            memcpy(got.text + got.len, out, n_out);
            got.len += n_out;
            at += piece;
        }
        slate__stop_flush(s, out, &n_out);
        memcpy(got.text + got.len, out, n_out);
        got.len += n_out;
        if (got.len != want_len || memcmp(got.text, text, want_len) != 0 ||
            slate__stop_matched(s) != want_idx || got.stopped != (want_idx >= 0))
            fail_msg("seed %llu iter %d: text '%.*s' released %zu (want %zu), matched %d "
                     "(want %d)",
                     (unsigned long long)seed, iter, (int)len, text, got.len, want_len,
                     (int)slate__stop_matched(s), (int)want_idx);
        slate__stop_free(s);
    }
    assert_int_equal(slate__alloc_live_bytes(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stop_split_into_one_byte_pieces_is_caught),
        cmocka_unit_test(stop_split_across_two_pieces_is_caught),
        cmocka_unit_test(text_without_match_is_all_released_by_flush),
        cmocka_unit_test(held_back_partial_then_mismatch_releases_it),
        cmocka_unit_test(match_in_middle_of_piece_releases_text_before_it),
        cmocka_unit_test(earliest_match_wins_among_several_stops),
        cmocka_unit_test(multibyte_stop_split_inside_a_character_is_caught),
        cmocka_unit_test(empty_stop_string_is_refused),
        cmocka_unit_test(no_stop_strings_pass_text_through),
        cmocka_unit_test(reset_forgets_match_and_held_text),
        cmocka_unit_test(create_fails_cleanly_under_allocation_faults),
        cmocka_unit_test(random_cuts_agree_with_whole_text_reference),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
