/* test_testutil.c - the shared test helpers check themselves:
 * - TU_RUN_TESTS_NO_LEAK must fail a group that leaves library memory allocated (else every
 *   test main() using it could leak unnoticed) and pass a clean one. The groups run one after
 *   the other from main(); their own cmocka output (one group "passes" but leaks) is expected;
 * - scratch directories follow TMPDIR (POSIX's temporary directory; /tmp when it is unset or
 *   empty), so a machine or CI job that points it elsewhere gets no files in /tmp. Each case
 *   makes a fresh directory under the working directory (ctest runs in the build folder) to
 *   serve as TMPDIR, and removes what it made. */
#define _XOPEN_SOURCE 700 /* realpath, mkdtemp, setenv */
#include "testutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* A fresh directory ./tu-tmpdir-XXXXXX, as an absolute path in out. */
static void fresh_dir(char *out, size_t cap) {
    char rel[] = "tu-tmpdir-XXXXXX";
    assert_non_null(mkdtemp(rel));
    assert_non_null(realpath(rel, out));
    assert_true(strlen(out) < cap);
}

/* The directory's parent is exactly want. */
static void assert_parent_is(const char *dir, const char *want) {
    const char *slash = strrchr(dir, '/');
    assert_non_null(slash);
    if ((size_t)(slash - dir) != strlen(want) || strncmp(dir, want, strlen(want)) != 0)
        fprintf(stderr, "'%s' is not in '%s'\n", dir, want);
    assert_int_equal((size_t)(slash - dir), strlen(want));
    assert_memory_equal(dir, want, strlen(want));
    assert_memory_equal(slash, "/slate-test-", 12);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
}

/* Runs first in this process, so tu_tmpdir makes its one directory under the TMPDIR set here. */
static void tmpdir_is_made_under_TMPDIR(void **st) {
    (void)st;
    char base[PATH_MAX];
    fresh_dir(base, sizeof base);
    assert_int_equal(setenv("TMPDIR", base, 1), 0);
    const char *dir = tu_tmpdir();
    assert_parent_is(dir, base);
    assert_string_equal(tu_tmpdir(), dir); /* made once */
    const char *f = tu_tmp("x");
    assert_memory_equal(f, dir, strlen(dir));
    assert_string_equal(f + strlen(dir), "/x");
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(rmdir(base), 0);
}

static void mkdtemp_follows_TMPDIR_with_a_trailing_slash(void **st) {
    (void)st;
    char base[PATH_MAX], slashed[PATH_MAX + 2], dir[PATH_MAX + 32];
    fresh_dir(base, sizeof base);
    snprintf(slashed, sizeof slashed, "%s/", base);
    assert_int_equal(setenv("TMPDIR", slashed, 1), 0);
    assert_int_equal(tu_mkdtemp(dir, sizeof dir), 0);
    assert_parent_is(dir, base);
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(rmdir(base), 0);
}

static void mkdtemp_uses_tmp_when_TMPDIR_is_unset_or_empty(void **st) {
    (void)st;
    char dir[64];
    assert_int_equal(setenv("TMPDIR", "", 1), 0);
    assert_int_equal(tu_mkdtemp(dir, sizeof dir), 0);
    assert_parent_is(dir, "/tmp");
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(unsetenv("TMPDIR"), 0);
    assert_int_equal(tu_mkdtemp(dir, sizeof dir), 0);
    assert_parent_is(dir, "/tmp");
    assert_int_equal(rmdir(dir), 0);
}

static void mkdtemp_refuses_a_path_that_does_not_fit(void **st) {
    (void)st;
    char dir[16];
    assert_int_equal(setenv("TMPDIR", "/a/rather/long/directory", 1), 0);
    assert_int_equal(tu_mkdtemp(dir, sizeof dir), -1);
    assert_string_equal(dir, "");
}

int main(void) {
    const char *saved = getenv("TMPDIR");
    char *restore = saved ? strdup(saved) : NULL;
    /* First: tmpdir_is_made_under_TMPDIR needs tu_tmpdir not yet called in this process. */
    const struct CMUnitTest tmp[] = {
        cmocka_unit_test(tmpdir_is_made_under_TMPDIR),
        cmocka_unit_test(mkdtemp_follows_TMPDIR_with_a_trailing_slash),
        cmocka_unit_test(mkdtemp_uses_tmp_when_TMPDIR_is_unset_or_empty),
        cmocka_unit_test(mkdtemp_refuses_a_path_that_does_not_fit),
    };
    int rc_tmp = TU_RUN_TESTS_NO_LEAK(tmp, NULL, NULL);
    if (restore) setenv("TMPDIR", restore, 1);
    else unsetenv("TMPDIR");
    free(restore);
    const struct CMUnitTest leaky[] = {cmocka_unit_test(leaks_64_bytes)};
    const struct CMUnitTest clean[] = {cmocka_unit_test(frees_what_it_allocates)};
    int rc_leaky = TU_RUN_TESTS_NO_LEAK(leaky, NULL, NULL);
    slate__free(g_leaked);
    int rc_clean = TU_RUN_TESTS_NO_LEAK(clean, NULL, NULL);
    if (rc_leaky == 0) fprintf(stderr, "FAIL: a group that leaks 64 bytes passed the leak check\n");
    if (rc_clean != 0) fprintf(stderr, "FAIL: a group that leaks nothing failed (%d)\n", rc_clean);
    return rc_tmp == 0 && rc_leaky != 0 && rc_clean == 0 ? 0 : 1;
}
