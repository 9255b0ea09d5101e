/* testutil.c - see testutil.h. */
#define _XOPEN_SOURCE 700 /* POSIX 2008 + XSI: nftw */
#include "testutil.h"
#include "../rng.h"
#include "core/core.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *tu_model_path(const char *rel) {
    static char buf[4096];
    const char *base = getenv("SLATE_MODELS_DIR");
#ifdef SLATE_MODELS_DIR
    if (!base) base = SLATE_MODELS_DIR;
#endif
    if (!base) base = "../shared/models";
    snprintf(buf, sizeof buf, "%s/%s", base, rel);
    return buf;
}

int tu_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int tu_mkdtemp(char *dir, size_t cap) {
    /* POSIX's temporary directory: a machine or a CI job may point it away from /tmp (a
     * per-job folder, a roomier disk), and the tests must follow. */
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    size_t n = strlen(base);
    while (n > 1 && base[n - 1] == '/') n--; /* "/scratch/" -> "/scratch/slate-test-..." */
    int len = snprintf(dir, cap, "%.*s/slate-test-XXXXXX", (int)n, base);
    if (len < 0 || (size_t)len >= cap) {
        if (cap) dir[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(dir) ? 0 : -1;
}

static char tmpdir_path[4096];
static pid_t tmpdir_owner;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path) == 0 ? 0 : (perror(path), 0); /* go on: remove what can be removed */
}

/* At exit of the process that made it (not of a forked child): the scratch directory and
 * everything the tests left in it, unless SLATE_TEST_KEEP is set (to look at the files). */
static void remove_tmpdir(void) {
    const char *keep = getenv("SLATE_TEST_KEEP");
    if (!tmpdir_path[0] || getpid() != tmpdir_owner) return;
    if (keep && *keep) {
        fprintf(stderr, "tu_tmpdir: kept %s (SLATE_TEST_KEEP)\n", tmpdir_path);
        return;
    }
    nftw(tmpdir_path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *tu_tmpdir(void) {
    if (!tmpdir_path[0]) {
        if (tu_mkdtemp(tmpdir_path, sizeof tmpdir_path) != 0) {
            perror("tu_tmpdir: mkdtemp under $TMPDIR (or /tmp)");
            exit(1);
        }
        tmpdir_owner = getpid();
        atexit(remove_tmpdir);
    }
    return tmpdir_path;
}

const char *tu_tmp(const char *name) {
    static char bufs[4][4096];
    static int i;
    char *b = bufs[i++ & 3];
    int n = snprintf(b, sizeof bufs[0], "%s/%s", tu_tmpdir(), name);
    if (n < 0 || (size_t)n >= sizeof bufs[0]) {
        fprintf(stderr, "tu_tmp: '%s/%s' is too long\n", tu_tmpdir(), name);
        exit(1);
    }
    return b;
}

uint64_t tu_seed(void) {
    static uint64_t seed;
    static int done;
    if (!done) {
        const char *s = getenv("SLATE_TEST_SEED");
        seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
        fprintf(stderr, "[seed] SLATE_TEST_SEED=%llu\n", (unsigned long long)seed);
        done = 1;
    }
    return seed;
}

uint64_t tu_rand(uint64_t *s) { return slate_test_rand(s); }

float tu_randf(uint64_t *s) { return slate_test_randf(s); }

slate_state *tu_new_state(slate_model *m, int kv, int32_t n_ctx, bool keep_all) {
    slate_state_params sp = slate_state_default_params();
    sp.n_ctx = n_ctx;
    sp.kv_keep_all = keep_all;
    if (kv >= 0) {
        sp.kv_dtype_set = true;
        sp.kv_dtype = (slate_dtype)kv;
    }
    slate_state *st = NULL;
    slate_error e;
    if (slate_state_create(m, &sp, &st, &e)) fail_msg("state_create: %s", e.message);
    return st;
}

slate_tokenizer *tu_tok_load(const char *rel) {
    const char *path = tu_model_path(rel);
    if (!tu_exists(path)) return NULL;
    slate_tokenizer *tok = NULL;
    slate_error err;
    slate_status st = slate_tokenizer_open(path, &tok, &err);
    if (st != SLATE_OK) fprintf(stderr, "%s: %s\n", path, err.message);
    assert_int_equal(st, SLATE_OK);
    return tok;
}

size_t tu_encode(const slate_tokenizer *tok, const char *text, size_t len, uint32_t flags,
                 int32_t *ids, size_t cap) {
    size_t n = 0;
    slate_error err;
    slate_status st = slate_tokenizer_encode(tok, text, len, flags, ids, cap, &n, &err);
    if (st != SLATE_OK) fprintf(stderr, "encode: %s\n", err.message);
    assert_int_equal(st, SLATE_OK);
    return n;
}

void tu_expect_ids(const slate_tokenizer *tok, const char *text, uint32_t flags,
                   const int32_t *want, size_t n_want) {
    int32_t ids[64];
    size_t n = tu_encode(tok, text, strlen(text), flags, ids, 64);
    if (n != n_want || memcmp(ids, want, n * sizeof *ids) != 0) {
        fprintf(stderr, "\"%s\": got", text);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
        fprintf(stderr, "\n");
    }
    assert_int_equal(n, n_want);
    assert_memory_equal(ids, want, n * sizeof *ids);
}

int tu_run_tests_no_leak(const char *name, const struct CMUnitTest *tests, size_t n_tests,
                         CMFixtureFunction setup, CMFixtureFunction teardown) {
    long long live = slate__alloc_live_bytes();
    int rc = _cmocka_run_group_tests(name, tests, n_tests, setup, teardown);
    if (slate__alloc_live_bytes() != live) {
        fprintf(stderr, "leak: %lld bytes still allocated\n", slate__alloc_live_bytes() - live);
        rc = 1;
    }
    return rc;
}
