/* test_utf8.c - src/tok/utf8.c's strict UTF-8 check, public as slate_utf8_char_len (the
 * tokenizer, the detokenizer and the server's clipper use it): every well-formed length, the
 * boundaries of RFC 3629's table (no overlong form, no surrogate, nothing past U+10FFFF),
 * stray continuation bytes, and sequences cut short by another byte or by n. */
#include "testutil.h"

#include <string.h>

#include "tok/tok.h"

static void char_len_accepts_exactly_the_well_formed_sequences(void **unused) {
    (void)unused;
    static const struct {
        const char *s;
        size_t n;    /* bytes offered */
        size_t want; /* 0: not a character */
    } cases[] = {
        {"a", 1, 1},
        {"", 1, 1},                          /* U+0000 */
        {"\x7F", 1, 1},
        {"\xC2\x80", 2, 2},                  /* U+0080, the first 2-byte */
        {"\xDF\xBF", 2, 2},
        {"\xE0\xA0\x80", 3, 3},              /* U+0800, the first 3-byte */
        {"\xED\x9F\xBF", 3, 3},              /* U+D7FF, below the surrogates */
        {"\xEE\x80\x80", 3, 3},              /* U+E000, above them */
        {"\xEF\xBF\xBF", 3, 3},
        {"\xF0\x90\x80\x80", 4, 4},          /* U+10000, the first 4-byte */
        {"\xF4\x8F\xBF\xBF", 4, 4},          /* U+10FFFF, the last */
        {"\xC3\xA9xyz", 5, 2},               /* what follows does not count */
        /* not a character */
        {"a", 0, 0},
        {"\x80", 1, 0},                      /* stray continuation */
        {"\xBF", 1, 0},
        {"\xC0\x80", 2, 0},                  /* overlong U+0000 */
        {"\xC1\xBF", 2, 0},                  /* overlong U+007F */
        {"\xE0\x9F\xBF", 3, 0},              /* overlong U+07FF */
        {"\xF0\x8F\xBF\xBF", 4, 0},          /* overlong U+FFFF */
        {"\xED\xA0\x80", 3, 0},              /* U+D800 */
        {"\xED\xBF\xBF", 3, 0},              /* U+DFFF */
        {"\xF4\x90\x80\x80", 4, 0},          /* U+110000 */
        {"\xF5\x80\x80\x80", 4, 0},
        {"\xFF", 1, 0},
        /* cut short */
        {"\xC3", 1, 0},
        {"\xC3\xA9", 1, 0},                  /* whole in memory, but n says 1 */
        {"\xE2\x82\xAC", 2, 0},
        {"\xF0\x9F\x98\x80", 3, 0},
        {"\xE2\x82z", 3, 0},                 /* by another byte */
        {"\xC3\xC3\xA9", 3, 0},
        {"\xE2" "", 2, 0},                   /* by a NUL */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t got = slate_utf8_char_len(cases[k].s, cases[k].n);
        if (got != cases[k].want)
            fail_msg("case %zu: %zu, want %zu", k, got, cases[k].want);
        /* the internal helper the tokenizer calls says the same */
        assert_int_equal(slate__tok_utf8_len((const uint8_t *)cases[k].s, cases[k].n), got);
    }
    assert_int_equal(slate_utf8_char_len(NULL, 4), 0);
}

/* slate__tok_utf8_lead: the length a lead byte announces and the valid prefix of it (the
 * maximal subpart: the detokenizer holds those bytes back until the rest arrives). */
static void lead_reports_the_valid_prefix_of_a_partial_character(void **unused) {
    (void)unused;
    size_t ok;
    assert_int_equal(slate__tok_utf8_lead((const uint8_t *)"\xE2\x82", 2, &ok), 3);
    assert_int_equal(ok, 2);
    assert_int_equal(slate__tok_utf8_lead((const uint8_t *)"\xF0\x9F\x98", 3, &ok), 4);
    assert_int_equal(ok, 3);
    assert_int_equal(slate__tok_utf8_lead((const uint8_t *)"\xE2z", 2, &ok), 3);
    assert_int_equal(ok, 1);
    assert_int_equal(slate__tok_utf8_lead((const uint8_t *)"\xED\xA0", 2, &ok), 3);
    assert_int_equal(ok, 1);                 /* a surrogate's second byte is not a start */
    assert_int_equal(slate__tok_utf8_lead((const uint8_t *)"\x80", 1, &ok), 0);
    assert_int_equal(ok, 0);
    assert_int_equal(slate__tok_utf8_lead((const uint8_t *)"a", 0, &ok), 0);
    assert_int_equal(ok, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(char_len_accepts_exactly_the_well_formed_sequences),
        cmocka_unit_test(lead_reports_the_valid_prefix_of_a_partial_character),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
