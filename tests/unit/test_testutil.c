/* test_testutil.c - the shared test helpers check themselves: TU_RUN_TESTS_NO_LEAK must fail a
 * group that leaves library memory allocated (else every test main() using it could leak
 * unnoticed) and pass a clean one. The groups run one after the other from main(); their own
 * cmocka output (one group "passes" but leaks) is expected. */
#include "testutil.h"

#include <stdio.h>

#include "core/core.h"

static void *g_leaked;

static void leaks_64_bytes(void **st) {
    (void)st;
    g_leaked = slate__malloc(64);
    assert_non_null(g_leaked);
}

static void frees_what_it_allocates(void **st) {
    (void)st;
    void *p = slate__malloc(64);
    assert_non_null(p);
    slate__free(p);
}

int main(void) {
    const struct CMUnitTest leaky[] = {cmocka_unit_test(leaks_64_bytes)};
    const struct CMUnitTest clean[] = {cmocka_unit_test(frees_what_it_allocates)};
    int rc_leaky = TU_RUN_TESTS_NO_LEAK(leaky, NULL, NULL);
    slate__free(g_leaked);
    int rc_clean = TU_RUN_TESTS_NO_LEAK(clean, NULL, NULL);
    if (rc_leaky == 0) fprintf(stderr, "FAIL: a group that leaks 64 bytes passed the leak check\n");
    if (rc_clean != 0) fprintf(stderr, "FAIL: a group that leaks nothing failed (%d)\n", rc_clean);
    return rc_leaky != 0 && rc_clean == 0 ? 0 : 1;
}
