/* test_server_request.c - server/request.c's srv_utf8_clip, which quotes client bytes in error
 * messages: whole valid characters are copied, a character that does not fit in max or cap is
 * left out (and nothing after it), and each byte that does not start a valid character (a stray
 * continuation, an overlong form, a surrogate, past U+10FFFF, a sequence cut short by another
 * byte or by the end of the string) becomes U+FFFD. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "server.h"

#define FFFD "\xEF\xBF\xBD"

static void clip_keeps_whole_valid_characters_and_replaces_each_bad_byte(void **unused) {
    (void)unused;
    static const struct {
        const char *src;
        size_t cap, max;
        const char *want;
    } cases[] = {
        {"hello", 16, 100, "hello"},
        {"hello", 16, 3, "hel"},
        {"hello", 4, 100, "hel"},                          /* cap counts the NUL */
        {"", 16, 100, ""},
        {"hello", 16, 0, ""},
        {"a\xC3\xA9" "b", 16, 100, "a\xC3\xA9" "b"},      /* U+00E9 */
        {"\xE2\x82\xAC", 16, 100, "\xE2\x82\xAC"},         /* U+20AC */
        {"\xF0\x9F\x98\x80!", 16, 100, "\xF0\x9F\x98\x80!"}, /* U+1F600 */
        {"\xF4\x8F\xBF\xBF", 16, 100, "\xF4\x8F\xBF\xBF"}, /* U+10FFFF, the last */
        /* a character across max or cap is left out, and what follows it too */
        {"a\xC3\xA9" "b", 16, 2, "a"},
        {"\xE2\x82\xAC\xE2\x82\xAC", 6, 100, "\xE2\x82\xAC"},
        {"\xE2\x82\xAC" "b", 3, 100, ""},
        /* bad bytes, one U+FFFD each */
        {"a\xFF" "b", 16, 100, "a" FFFD "b"},
        {"\x80x", 16, 100, FFFD "x"},                      /* stray continuation */
        {"\xC0\xAF", 16, 100, FFFD FFFD},                  /* overlong '/' */
        {"\xC1\xBF", 16, 100, FFFD FFFD},
        {"\xE0\x80\xAF", 16, 100, FFFD FFFD FFFD},         /* overlong, 3 bytes */
        {"\xF0\x80\x80\xAF", 32, 100, FFFD FFFD FFFD FFFD}, /* overlong, 4 bytes */
        {"\xED\xA0\x80", 16, 100, FFFD FFFD FFFD},         /* surrogate U+D800 */
        {"\xF4\x90\x80\x80", 32, 100, FFFD FFFD FFFD FFFD}, /* U+110000 */
        {"\xF5\x80", 16, 100, FFFD FFFD},
        {"\xE2\x82", 16, 100, FFFD FFFD},                  /* cut short by the end */
        {"\xE2\x82z", 16, 100, FFFD FFFD "z"},             /* cut short by another byte */
        {"\xF0\x9F\x98", 16, 100, FFFD FFFD FFFD},
        {"\xC3\xC3\xA9", 16, 100, FFFD "\xC3\xA9"},        /* a lead, then a whole character */
        {"\xFF\xFF", 4, 100, FFFD},                        /* the second U+FFFD does not fit */
        {"\xFF\xFF", 16, 1, FFFD},                         /* max counts source bytes */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char dst[64];
        memset(dst, 'X', sizeof dst);
        char *r = srv_utf8_clip(dst, cases[k].cap, cases[k].src, cases[k].max);
        assert_ptr_equal(r, dst);
        if (strcmp(dst, cases[k].want) != 0)
            fail_msg("case %zu: got '%s', want '%s'", k, dst, cases[k].want);
        assert_true(strlen(dst) < cases[k].cap);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(clip_keeps_whole_valid_characters_and_replaces_each_bad_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
