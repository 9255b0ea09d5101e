/* test_threads.c - the thread count changes how work is split, never the result: a model opened
 * with 1 thread and with 3 gives bit-identical logits for a prefill and the decode steps after
 * it, for every weight format with its own kernels. The matrices are large enough that each
 * matmul splits into many column chunks, and q/k/v and gate/up run as one pool job (exec.c,
 * matmul_group), so this also checks that a group's chunks map back to the right matmul. */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "tinymodel.h"

typedef struct cfg {
    const char *name;
    slate_dtype dtype;
    int32_t block;
    bool asym;
} cfg;

static const cfg CFGS[] = {
    {"f32", SLATE_DTYPE_F32, 0, false},      {"f16", SLATE_DTYPE_F16, 0, false},
    {"bf16", SLATE_DTYPE_BF16, 0, false},    {"q8_0", SLATE_DTYPE_Q8_0, 0, false},
    {"q8_c", SLATE_DTYPE_Q8_C, 0, false},    {"q4-b32", SLATE_DTYPE_Q4, 32, false},
    {"q4-b16-asym", SLATE_DTYPE_Q4, 16, true},
};

enum { N_PROMPT = 9, N_STEPS = 3 };

static slate_model *open_with(const char *path, int n_threads) {
    slate_model_params mp = slate_model_default_params();
    mp.n_threads = n_threads;
    slate_model *m = NULL;
    slate_error e;
    if (slate_model_open(path, &mp, &m, &e) != SLATE_OK) fail_msg("open: %s", e.message);
    return m;
}

/* The logits of the last call, all rows. */
static void expect_same_logits(const slate_state *a, const slate_state *b, const char *what,
                               const char *name) {
    int32_t ra = 0, rb = 0;
    const float *la = slate_state_logits(a, &ra), *lb = slate_state_logits(b, &rb);
    assert_non_null(la);
    assert_non_null(lb);
    assert_int_equal(ra, rb);
    if (memcmp(la, lb, (size_t)ra * TM_VOCAB * sizeof(float)) != 0)
        fail_msg("%s: %s logits differ between 1 and 3 threads", name, what);
}

static void three_threads_equal_one(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof CFGS / sizeof CFGS[0]; c++) {
        tm_opts o = tm_default();
        /* 16 heads of 64, 2 kv heads: with 3 threads q and o split into chunks of 64 columns,
         * k and v into chunks of 32, gate and up (800) into chunks of 64 with a short last one */
        o.dim = 1024;
        o.n_heads = 16;
        o.n_kv_heads = 2;
        o.ffn_dim = 800;
        o.dtype = CFGS[c].dtype;
        o.block_size = CFGS[c].block;
        o.asym = CFGS[c].asym;
        char file[64];
        snprintf(file, sizeof file, "threads-%s.slate", CFGS[c].name);
        const char *path = tu_tmp(file);
        slate_error e;
        if (tm_write(path, &o, &e) != SLATE_OK) fail_msg("tm_write %s: %s", CFGS[c].name, e.message);
        slate_model *m1 = open_with(path, 1), *m3 = open_with(path, 3);
        slate_state *s1, *s3;
        assert_int_equal(slate_state_create(m1, NULL, &s1, NULL), SLATE_OK);
        assert_int_equal(slate_state_create(m3, NULL, &s3, NULL), SLATE_OK);
        int32_t ids[N_PROMPT];
        for (int i = 0; i < N_PROMPT; i++) ids[i] = 3 + (i * 53 + (int)c * 7) % 256;
        assert_int_equal(slate_state_predict(s1, ids, N_PROMPT, NULL, NULL), SLATE_OK);
        assert_int_equal(slate_state_predict(s3, ids, N_PROMPT, NULL, NULL), SLATE_OK);
        expect_same_logits(s1, s3, "prefill", CFGS[c].name);
        for (int t = 0; t < N_STEPS; t++) {
            int32_t id = 3 + (t * 91 + 17) % 256;
            assert_int_equal(slate_state_predict(s1, &id, 1, NULL, NULL), SLATE_OK);
            assert_int_equal(slate_state_predict(s3, &id, 1, NULL, NULL), SLATE_OK);
            expect_same_logits(s1, s3, "decode", CFGS[c].name);
        }
        slate_state_free(s1);
        slate_state_free(s3);
        assert_int_equal(slate_model_close(m1), SLATE_OK);
        assert_int_equal(slate_model_close(m3), SLATE_OK);
    }
}

/* A pool whose threads cannot be started (here: RLIMIT_NPROC, in a child that runs as an
 * ordinary user so the limit applies) says so with pthread_create's reason; it said "out of
 * memory" when memory was plentiful and a thread limit (ulimit -u, a container's pids.max)
 * was the cause. Skipped where the child can neither drop root nor lower its limit. */
static void a_pool_that_cannot_start_its_threads_names_the_reason(void **state) {
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        struct rlimit lim = {0, 0};
        if (setrlimit(RLIMIT_NPROC, &lim) != 0) _exit(77);
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(77);
        slate__pool *pool = NULL;
        slate_error e;
        memset(&e, 0, sizeof e);
        slate_status s = slate__pool_create(4, &pool, &e);
        slate__pool_free(pool);
        char msg[sizeof e.message + 16];
        int n = snprintf(msg, sizeof msg, "%d %s", (int)s, e.message);
        if (write(fds[1], msg, (size_t)n) != n) _exit(2);
        _exit(0);
    }
    close(fds[1]);
    char buf[512] = "";
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        skip();
        return;
    }
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    buf[n > 0 ? n : 0] = '\0';
    char want[200];
    snprintf(want, sizeof want, "%d cannot start thread 1 of a 4-thread pool: %s", SLATE_E_NOMEM,
             strerror(EAGAIN));
    if (!strstr(buf, want)) fail_msg("got '%s', want '%s'", buf, want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(three_threads_equal_one),
        cmocka_unit_test(a_pool_that_cannot_start_its_threads_names_the_reason),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
