/* testutil.h - helpers shared by the unit tests (cmocka). */
#ifndef SLATE_TESTUTIL_H
#define SLATE_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "slate.h"

/* Path under the shared models folder (SLATE_MODELS_DIR env var, else the build-time default).
 * Returns a static buffer. */
const char *tu_model_path(const char *rel);
/* Whether a file exists (tests on real models skip when it is missing). */
int tu_exists(const char *path);
/* Creates a fresh directory slate-test-XXXXXX under $TMPDIR (/tmp when TMPDIR is unset or
 * empty) and writes its path into dir (cap bytes). Returns 0, or -1 (errno set; ENAMETOOLONG
 * when the path does not fit). */
int tu_mkdtemp(char *dir, size_t cap);
/* A fresh temporary directory for this test process (tu_mkdtemp, once; exits if it cannot),
 * removed with its contents when the process exits (not a forked child's exit), unless
 * SLATE_TEST_KEEP is set in the environment. */
const char *tu_tmpdir(void);
/* Joins tu_tmpdir() and name into a static rotating buffer. */
const char *tu_tmp(const char *name);
/* Seed for random tests: SLATE_TEST_SEED env var or time; printed once. */
uint64_t tu_seed(void);
/* xorshift-based deterministic random numbers. */
uint64_t tu_rand(uint64_t *s);
float tu_randf(uint64_t *s); /* uniform in [-1, 1) */

/* A state of m with the default parameters but: kv >= 0 sets the cache dtype (-1: the
 * package's), n_ctx (0: the package's), keep_all (kv_keep_all). Fails the test if it cannot. */
slate_state *tu_new_state(slate_model *m, int kv, int32_t n_ctx, bool keep_all);

/* Opens a tokenizer file under the shared models folder; NULL (the test skips) if the file is
 * missing; fails the test if it does not open. */
slate_tokenizer *tu_tok_load(const char *rel);
/* Encodes text and fails the test on any error; returns the number of ids. */
size_t tu_encode(const slate_tokenizer *tok, const char *text, size_t len, uint32_t flags,
                 int32_t *ids, size_t cap);
/* Encodes text (up to 64 ids) and fails the test unless the ids are want[0..n_want), printing
 * what came out. TU_EXPECT_IDS(tok, text, flags, id, ...) lists the ids inline. */
void tu_expect_ids(const slate_tokenizer *tok, const char *text, uint32_t flags,
                   const int32_t *want, size_t n_want);
#define TU_EXPECT_IDS(tok, text, flags, ...)                                                      \
    do {                                                                                           \
        const int32_t want_[] = {__VA_ARGS__};                                                     \
        tu_expect_ids(tok, text, flags, want_, sizeof want_ / sizeof want_[0]);                    \
    } while (0)

/* Runs a cmocka group like cmocka_run_group_tests, then checks that the library holds as many
 * live bytes (slate__alloc_live_bytes) as before it: a leak anywhere in the group makes the
 * result non-zero and prints the count. Returns cmocka's result otherwise. In main():
 *     return TU_RUN_TESTS_NO_LEAK(tests, setup, teardown); */
int tu_run_tests_no_leak(const char *name, const struct CMUnitTest *tests, size_t n_tests,
                         CMFixtureFunction setup, CMFixtureFunction teardown);
#define TU_RUN_TESTS_NO_LEAK(tests, setup, teardown)                                              \
    tu_run_tests_no_leak(#tests, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)

#endif
