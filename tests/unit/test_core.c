/* test_core.c - status table, error helpers, half conversions, CRC-32, allocator counting and
 * fault injection, atomic writer. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/core.h"

static void status_strings_come_from_one_table(void **st) {
    (void)st;
    assert_string_equal(slate_status_str(SLATE_OK), "ok");
    assert_string_equal(slate_status_name(SLATE_E_FORMAT), "SLATE_E_FORMAT");
    assert_string_equal(slate_status_str((slate_status)999), "unknown status");
    assert_int_equal(SLATE_E_INTERNAL, 12);
    assert_int_equal(SLATE_E_RELEASED, 13);
    assert_string_equal(slate_status_name(SLATE_E_RELEASED), "SLATE_E_RELEASED");
}

static void fail_fills_error_with_offset(void **st) {
    (void)st;
    slate_error e;
    slate__error_clear(&e);
    slate_status s = slate__fail_at(&e, SLATE_E_FORMAT, 1234, "tensor '%s' truncated", "w");
    assert_int_equal(s, SLATE_E_FORMAT);
    assert_int_equal(e.code, SLATE_E_FORMAT);
    assert_true(e.has_offset);
    assert_int_equal(e.offset, 1234);
    assert_string_equal(e.message, "tensor 'w' truncated");
    assert_int_equal(slate__fail(NULL, SLATE_E_IO, "x"), SLATE_E_IO); /* NULL err allowed */
}

static void f16_round_trips_and_rounds_to_nearest_even(void **st) {
    (void)st;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = slate__f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        assert_int_equal(slate__f32_to_f16(f), h);
    }
    assert_int_equal(slate__f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie -> even */
    assert_int_equal(slate__f32_to_f16(65520.0f), 0x7c00);            /* overflow -> inf */
    assert_true(fabsf(slate__f16_to_f32(slate__f32_to_f16(3.14159f)) - 3.14159f) < 2e-3f);
}

static void bf16_rounds_to_nearest_even(void **st) {
    (void)st;
    assert_int_equal(slate__f32_to_bf16(1.0f), 0x3f80);
    assert_true(slate__bf16_to_f32(slate__f32_to_bf16(-2.5f)) == -2.5f);
    assert_true(isnan(slate__bf16_to_f32(slate__f32_to_bf16(NAN))));
}

static void crc32_matches_known_vector(void **st) {
    (void)st;
    assert_int_equal(slate__crc32(0, "123456789", 9), 0xcbf43926u);
    uint32_t c = slate__crc32(0, "12345", 5);
    assert_int_equal(slate__crc32(c, "6789", 4), 0xcbf43926u);
}

static void allocator_counts_and_injects_faults(void **st) {
    (void)st;
    long long live = slate__alloc_live_bytes();
    void *p = slate__malloc(100);
    assert_non_null(p);
    assert_int_equal(((uintptr_t)p) % 64, 0);
    assert_int_equal(slate__alloc_live_bytes(), live + 100);
    slate__free(p);
    assert_int_equal(slate__alloc_live_bytes(), live);
    slate__alloc_fail_after(2);
    void *a = slate__malloc(8);
    void *b = slate__malloc(8);
    assert_non_null(a);
    assert_null(b);
    slate__alloc_fail_after(0);
    slate__free(a);
}

/* Sizes within 127 bytes of SIZE_MAX are refused: the 64-byte header plus rounding up to 64
 * wrapped to a 0-byte block, returned as if it held the size asked for. */
static void allocator_refuses_sizes_that_wrap_with_its_header(void **st) {
    (void)st;
    long long live = slate__alloc_live_bytes();
    for (size_t d = 0; d < 2 * 64; d++) { /* refused before any allocator is asked */
        void *p = slate__malloc(SIZE_MAX - d);
        if (p) fail_msg("slate__malloc(SIZE_MAX - %zu) returned a block", d);
        void *q = slate__malloc(8);
        assert_null(slate__realloc(q, SIZE_MAX - d));
        slate__free(q); /* realloc failed: q is still ours */
    }
    assert_int_equal(slate__alloc_live_bytes(), live);
}

static void reader_stops_at_end(void **st) {
    (void)st;
    uint8_t bytes[6] = {1, 0, 0, 0, 2, 0};
    slate__rd r = {bytes, sizeof bytes, 0, false};
    assert_int_equal(slate__rd_u32(&r), 1);
    assert_false(r.failed);
    assert_int_equal(slate__rd_u32(&r), 0);
    assert_true(r.failed);
}

/* path holds exactly want[0..n). */
static void assert_file_holds(const char *path, const char *want, size_t n) {
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(slate__read_file(path, 100, &data, &len, NULL), SLATE_OK);
    assert_int_equal(len, n);
    assert_memory_equal(data, want, n);
    slate__free(data);
}

static void atomic_writer_leaves_nothing_on_abort(void **st) {
    (void)st;
    const char *path = tu_tmp("atomic.bin");
    slate__atomic_file f;
    assert_int_equal(slate__atomic_open(path, &f, NULL), SLATE_OK);
    slate__atomic_write(&f, "abc", 3);
    slate__atomic_abort(&f);
    assert_false(tu_exists(path));
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_false(tu_exists(tmp));
    assert_int_equal(slate__atomic_open(path, &f, NULL), SLATE_OK);
    slate__atomic_write(&f, "abc", 3);
    assert_int_equal(slate__atomic_commit(&f, NULL), SLATE_OK);
    assert_file_holds(path, "abc", 3);
    unlink(path);
}

/* The public face (slate_output_*): whole or nothing, the temp gone after discard and commit,
 * non-regular targets and NULLs refused with a message, and a live temp removed by
 * slate_remove_partial_outputs. */
static void output_api_writes_whole_or_nothing(void **st) {
    (void)st;
    const char *path = tu_tmp("out.bin");
    unlink(path);
    slate_output *o = (slate_output *)1;
    slate_error e;
    assert_int_equal(slate_output_open(NULL, &o, &e), SLATE_E_INVALID_ARG);
    assert_null(o);
    assert_int_equal(slate_output_open("/dev/null", &o, &e), SLATE_E_IO);
    assert_non_null(strstr(e.message, "not a regular file"));
    assert_null(o);
    assert_int_equal(slate_output_write(NULL, "x", 1, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_output_commit(NULL, &e), SLATE_E_INVALID_ARG);
    slate_output_discard(NULL);
    assert_int_equal(slate_output_open(path, &o, &e), SLATE_OK);
    assert_int_equal(slate_output_write(o, "ab", 2, &e), SLATE_OK);
    assert_false(tu_exists(path)); /* nothing at the path until commit */
    slate_output_discard(o);
    assert_false(tu_exists(path));
    assert_int_equal(slate_output_open(path, &o, &e), SLATE_OK);
    slate_remove_partial_outputs(); /* as a signal handler would: the temp goes */
    assert_int_equal(slate_output_write(o, "ab", 2, &e), SLATE_OK);
    assert_int_equal(slate_output_commit(o, &e), SLATE_E_IO); /* nothing left to move */
    assert_false(tu_exists(path));
    assert_int_equal(slate_output_open(path, &o, &e), SLATE_OK);
    assert_int_equal(slate_output_write(o, "abc", 3, &e), SLATE_OK);
    assert_int_equal(slate_output_write(o, NULL, 0, &e), SLATE_OK);
    assert_int_equal(slate_output_commit(o, &e), SLATE_OK);
    assert_file_holds(path, "abc", 3);
    unlink(path);
}

/* Files in the test folder whose names start with `prefix` (the target and its temps). */
static int files_named(const char *prefix) {
    DIR *d = opendir(tu_tmpdir());
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* A write that fails (here: past RLIMIT_FSIZE, EFBIG) is reported with its own cause at
 * commit, whatever errno says by then (any later library call may change it: the message
 * once said "Success"), and leaves neither the target nor a temp behind. */
static void a_failed_write_reports_its_cause_and_leaves_nothing(void **st) {
    (void)st;
    const char *path = tu_tmp("fsize.bin");
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 16384;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static char big[65536];
    char want[200];
    snprintf(want, sizeof want, "writing '%s' failed: %s", path, strerror(EFBIG));
    slate_error e;
    for (int api = 0; api < 2; api++) {
        if (api == 0) {
            slate__atomic_file f;
            assert_int_equal(slate__atomic_open(path, &f, NULL), SLATE_OK);
            slate__atomic_write(&f, big, sizeof big);
            slate__atomic_write(&f, big, sizeof big);
            errno = 0;
            assert_int_equal(slate__atomic_commit(&f, &e), SLATE_E_IO);
        } else {
            slate_output *o = NULL;
            assert_int_equal(slate_output_open(path, &o, &e), SLATE_OK);
            assert_int_equal(slate_output_write(o, big, sizeof big, &e), SLATE_E_IO);
            assert_non_null(strstr(e.message, strerror(EFBIG)));
            errno = ENOENT;
            assert_int_equal(slate_output_write(o, "x", 1, &e), SLATE_E_IO);
            assert_non_null(strstr(e.message, strerror(EFBIG)));
            errno = 0;
            assert_int_equal(slate_output_commit(o, &e), SLATE_E_IO);
        }
        if (!strstr(e.message, want)) fail_msg("api %d: got '%s', want '%s'", api, e.message, want);
        assert_int_equal(files_named("fsize.bin"), 0);
    }
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_strings_come_from_one_table),
        cmocka_unit_test(fail_fills_error_with_offset),
        cmocka_unit_test(f16_round_trips_and_rounds_to_nearest_even),
        cmocka_unit_test(bf16_rounds_to_nearest_even),
        cmocka_unit_test(crc32_matches_known_vector),
        cmocka_unit_test(allocator_counts_and_injects_faults),
        cmocka_unit_test(allocator_refuses_sizes_that_wrap_with_its_header),
        cmocka_unit_test(reader_stops_at_end),
        cmocka_unit_test(atomic_writer_leaves_nothing_on_abort),
        cmocka_unit_test(output_api_writes_whole_or_nothing),
        cmocka_unit_test(a_failed_write_reports_its_cause_and_leaves_nothing),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
