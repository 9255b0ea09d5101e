/* test_pkg_write.c - the package writer (src/pkg/write.c): the tensor table it writes (every
 * layout attribute, shapes, 64-aligned offsets), and allocation faults anywhere in it, cJSON's
 * included: main() routes cJSON's memory through slate's counted allocator (cJSON_InitHooks),
 * so failing allocation N for N = 1, 2, ... reaches every cJSON call. Each failure must be
 * E_NOMEM with no file and no temp left and nothing leaked; a table with a dimension or an
 * attribute silently missing would be a package that reads its data wrongly. */
#include "testutil.h"
#include "pkgutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernels/quant.h"
#include "pkg/format.h"
#include "pkg/pkg.h"

static slate_status produce(const void *ctx, void *dst, slate_error *err) {
    (void)err;
    const slate__pkg_wtensor *t = ctx;
    memset(dst, (int)(strlen(t->name) & 0xff), t->nbytes);
    return SLATE_OK;
}

#define N_T 3
static slate__pkg_wtensor g_t[N_T];

static void make_tensors(void) {
    /* f32 [3][5] (no attributes), q4 [2][64] block 32 asym, pal 4-bit groups of 64 */
    g_t[0] = (slate__pkg_wtensor){"a.weight", SLATE_DTYPE_F32, 0, false, 2, {3, 5}, 60, produce,
                                  &g_t[0]};
    g_t[1] = (slate__pkg_wtensor){"bb.weight", SLATE_DTYPE_Q4, 32, true, 2, {2, 64},
                                  2 * 2 * (16 + 4), produce, &g_t[1]};
    g_t[2] = (slate__pkg_wtensor){"ccc.weight", SLATE_DTYPE_PAL, slate__pal_layout(4, 64), false,
                                  1, {64}, 100, produce, &g_t[2]};
}

/* Fills g_t and returns the META the tests write ({"arch": "test"}; cJSON_Delete it). */
static cJSON *fixture(void) {
    make_tensors();
    cJSON *m = cJSON_CreateObject();
    assert_non_null(m);
    assert_non_null(cJSON_AddStringToObject(m, "arch", "test"));
    return m;
}

/* Fails the test unless the package at path holds g_t's table, META's "arch" and each
 * tensor's bytes at DATA + its offset. */
static void expect_package(const char *path) {
    char *pkg;
    size_t len;
    assert_int_equal(slate__read_file(path, 1 << 20, &pkg, &len, NULL), SLATE_OK);
    const uint8_t *ms = pu_section((const uint8_t *)pkg, SLATE__SEC_META);
    assert_non_null(ms);
    cJSON *j = cJSON_ParseWithLength(pkg + pu_rd64(ms + 8), pu_rd64(ms + 16));
    assert_non_null(j);
    char *text = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "tensors"));
    assert_non_null(text);
    const char *want =
        "[{\"name\":\"a.weight\",\"dtype\":\"f32\",\"shape\":[3,5],\"offset\":0,\"size\":60},"
        "{\"name\":\"bb.weight\",\"dtype\":\"q4\",\"block\":32,\"asym\":true,\"shape\":[2,64],"
        "\"offset\":64,\"size\":80},"
        "{\"name\":\"ccc.weight\",\"dtype\":\"pal\",\"bits\":4,\"group\":64,\"shape\":[64],"
        "\"offset\":192,\"size\":100}]";
    assert_string_equal(text, want);
    const cJSON *arch = cJSON_GetObjectItem(j, "arch");
    assert_true(cJSON_IsString(arch) && strcmp(arch->valuestring, "test") == 0);
    cJSON_free(text);
    cJSON_Delete(j);
    const uint8_t *ds = pu_section((const uint8_t *)pkg, SLATE__SEC_DATA);
    const uint8_t *data = (const uint8_t *)pkg + pu_rd64(ds + 8);
    assert_int_equal(pu_rd64(ds + 16), 192 + 128);
    assert_int_equal(data[0], 8);    /* strlen("a.weight") */
    assert_int_equal(data[64], 9);   /* strlen("bb.weight") */
    assert_int_equal(data[192], 10); /* strlen("ccc.weight") */
    slate__free(pkg);
}

static void table_holds_every_attribute_shape_and_aligned_offset(void **st) {
    (void)st;
    cJSON *meta = fixture();
    const char *path = tu_tmp("table.slate");
    slate_error e;
    assert_int_equal(slate__pkg_write(path, meta, (const uint8_t *)"tok", 3, g_t, N_T, false, &e),
                     SLATE_OK);
    cJSON_Delete(meta);
    expect_package(path);
}

static void every_failed_allocation_is_nomem_with_no_file_and_no_leak(void **st) {
    (void)st;
    cJSON *meta = fixture();
    const char *path = tu_tmp("faults.slate");
    char tmp_glob[600];
    snprintf(tmp_glob, sizeof tmp_glob, "ls %s/faults.slate* >/dev/null 2>&1", tu_tmpdir());
    long long live = slate__alloc_live_bytes();
    long n;
    for (n = 1;; n++) {
        slate_error e;
        memset(&e, 0, sizeof e);
        slate__alloc_fail_after(n);
        slate_status s = slate__pkg_write(path, meta, (const uint8_t *)"tok", 3, g_t, N_T, false,
                                          &e);
        slate__alloc_fail_after(0);
        if (s == SLATE_OK) break;
        if (s != SLATE_E_NOMEM) fail_msg("allocation %ld: %s: %s", n, slate_status_name(s),
                                         e.message);
        assert_int_equal(e.code, SLATE_E_NOMEM);
        assert_false(tu_exists(path));
        assert_int_not_equal(system(tmp_glob), 0); /* no temp either */
        assert_int_equal(slate__alloc_live_bytes(), live);
        assert_true(n < 100000);
    }
    /* cJSON's own allocations are among those walked: a table of 3 entries needs dozens */
    if (n < 20) fail_msg("only %ld allocations: cJSON's are not routed through the hooks", n);
    expect_package(path); /* not a table with a part silently missing */
    assert_int_equal(slate__alloc_live_bytes(), live);
    cJSON_Delete(meta);
}

static void meta_with_table_fails_cleanly_at_every_allocation(void **st) {
    (void)st;
    cJSON *meta = fixture();
    long long live = slate__alloc_live_bytes();
    for (long n = 1;; n++) {
        uint64_t size = 1;
        slate__alloc_fail_after(n);
        cJSON *m = slate__pkg_meta_with_table(meta, g_t, N_T, &size);
        slate__alloc_fail_after(0);
        if (m) {
            assert_int_equal(size, 192 + 128);
            assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(m, "tensors")), N_T);
            cJSON_Delete(m);
            break;
        }
        assert_int_equal(size, 0);
        assert_int_equal(slate__alloc_live_bytes(), live);
        assert_true(n < 100000);
    }
    assert_int_equal(slate__alloc_live_bytes(), live);
    cJSON_Delete(meta);
}

int main(void) {
    /* Before any cJSON call: memory cJSON allocates must be freed by the same allocator. */
    cJSON_Hooks hooks = {slate__malloc, slate__free};
    cJSON_InitHooks(&hooks);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_holds_every_attribute_shape_and_aligned_offset),
        cmocka_unit_test(every_failed_allocation_is_nomem_with_no_file_and_no_leak),
        cmocka_unit_test(meta_with_table_fails_cleanly_at_every_allocation),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
