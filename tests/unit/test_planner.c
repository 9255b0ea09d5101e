/* test_planner.c - the memory plan: the KV formula against the program's state tensors, plan
 * numbers against what a state really reserves, the largest context that fits, budgets at open
 * and at state creation (counting live states), parameter checks, the device table and "this
 * machine" parsing. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/model.h"
#include "tinymodel.h"

typedef struct fx {
    slate_model *m;
    const char *path;
} fx;

static const char *make_pkg(const char *name, const tm_opts *o) {
    const char *path = tu_tmp(name);
    slate_error e;
    slate_status s = tm_write(path, o, &e);
    if (s) fprintf(stderr, "tm_write: %s\n", e.message);
    assert_int_equal(s, SLATE_OK);
    return path;
}

/* Default tiny model: 2 layers, 2 kv heads of head_dim 8, context 64, max query 16. */
static int setup(void **st) {
    fx *f = calloc(1, sizeof *f);
    tm_opts o = tm_default();
    static char path[512];
    snprintf(path, sizeof path, "%s", make_pkg("plan.slate", &o));
    f->path = path;
    assert_int_equal(slate_model_open(f->path, NULL, &f->m, NULL), SLATE_OK);
    *st = f;
    return 0;
}
static int teardown(void **st) {
    fx *f = *st;
    assert_int_equal(slate_model_close(f->m), SLATE_OK);
    free(f);
    return 0;
}

static slate_plan plan_of(const slate_model *m, int32_t n_ctx, int kv /* -1: default */,
                          size_t budget, int32_t n_states) {
    slate_plan_params pp = slate_plan_default_params();
    pp.n_ctx = n_ctx;
    if (kv >= 0) {
        pp.kv_dtype_set = true;
        pp.kv_dtype = (slate_dtype)kv;
    }
    pp.budget_bytes = budget;
    pp.n_states = n_states;
    slate_plan p;
    slate_error e;
    slate_status s = slate_model_plan(m, &pp, &p, &e);
    if (s) fail_msg("slate_model_plan: %s", e.message);
    return p;
}

static void kv_per_token_matches_the_formula_for_each_dtype(void **stp) {
    fx *f = *stp;
    /* 2 (K and V) x 2 layers x 2 kv heads x head_dim 8 x bytes */
    slate_plan p = plan_of(f->m, 0, -1, 0, 0);
    assert_int_equal(p.kv_dtype, SLATE_DTYPE_F16); /* new packages declare f16 caches */
    assert_int_equal(p.kv_bytes_per_token, 2 * 2 * 2 * 8 * 2);
    assert_int_equal(p.kv_formula_bytes_per_token, p.kv_bytes_per_token);
    assert_int_equal(p.n_layers, 2);
    assert_int_equal(p.n_kv_heads, 2);
    assert_int_equal(p.head_dim, 8);
    p = plan_of(f->m, 0, SLATE_DTYPE_F32, 0, 0);
    assert_int_equal(p.kv_bytes_per_token, 2 * 2 * 2 * 8 * 4);
    assert_int_equal(p.kv_formula_bytes_per_token, p.kv_bytes_per_token);
    /* int8: per kv head an f32 scale + 8 values */
    p = plan_of(f->m, 0, SLATE_DTYPE_I8, 0, 0);
    assert_int_equal(p.kv_bytes_per_token, 2 * 2 * 2 * (4 + 8));
    assert_int_equal(p.kv_formula_bytes_per_token, p.kv_bytes_per_token);
    /* The model info (package dtypes) agrees with the default plan. */
    slate_model_info info;
    assert_int_equal(slate_model_get_info(f->m, &info), SLATE_OK);
    assert_int_equal(info.kv_bytes_per_token, 2 * 2 * 2 * 8 * 2);
}

static void plan_equals_what_a_state_reserves(void **stp) {
    fx *f = *stp;
    const int kvs[3] = {SLATE_DTYPE_F32, SLATE_DTYPE_F16, SLATE_DTYPE_I8};
    for (int k = 0; k < 3; k++)
        for (int32_t ctx = 1; ctx <= 64; ctx += 21) {
            slate_plan p = plan_of(f->m, ctx, kvs[k], 0, 1);
            slate_state_params sp = slate_state_default_params();
            sp.n_ctx = ctx;
            sp.kv_dtype_set = true;
            sp.kv_dtype = (slate_dtype)kvs[k];
            slate_state *st;
            assert_int_equal(slate_state_create(f->m, &sp, &st, NULL), SLATE_OK);
            slate_state_memory mem;
            assert_int_equal(slate_state_get_memory(st, &mem), SLATE_OK);
            assert_int_equal(mem.kv_reserved_bytes, p.kv_bytes);
            assert_int_equal(mem.scratch_reserved_bytes, p.scratch_bytes);
            assert_int_equal(p.state_bytes, p.kv_bytes + p.scratch_bytes);
            assert_int_equal(p.total_bytes, p.weights_bytes + p.state_bytes);
            slate_tensor_info ti;
            assert_int_equal(slate_state_tensor_info(st, 0, &ti), SLATE_OK);
            assert_int_equal(ti.dtype, kvs[k]);
            assert_int_equal(ti.row_bytes * (size_t)slate_state_n_tensors(st),
                             p.kv_bytes_per_token);
            slate_state_free(st);
        }
}

static void plan_file_equals_model_plan(void **stp) {
    fx *f = *stp;
    slate_plan_params pp = slate_plan_default_params();
    pp.n_states = 3;
    pp.budget_bytes = 1 << 20;
    slate_plan a, b;
    assert_int_equal(slate_model_plan(f->m, &pp, &a, NULL), SLATE_OK);
    assert_int_equal(slate_plan_file(f->path, &pp, &b, NULL), SLATE_OK);
    assert_memory_equal(&a, &b, sizeof a);
    pp.use_mmap = true;
    assert_int_equal(slate_plan_file(f->path, &pp, &b, NULL), SLATE_OK);
    assert_true(b.weights_mapped);
    assert_int_equal(b.weights_mapped_bytes, a.weights_bytes);
    assert_int_equal(b.weights_resident_bytes, 0);
    slate_error e;
    assert_int_equal(slate_plan_file(tu_tmp("missing.slate"), &pp, &b, &e), SLATE_E_IO);
    assert_non_null(strstr(e.message, "missing.slate"));
}

/* A context of 4096 so that caches span many pages (blocks are page-rounded). */
static slate_model *open_4k(const char **path_out) {
    tm_opts o = tm_default();
    o.n_ctx = 4096;
    const char *path = make_pkg("plan4k.slate", &o);
    slate_model *m;
    assert_int_equal(slate_model_open(path, NULL, &m, NULL), SLATE_OK);
    if (path_out) *path_out = path;
    return m;
}

/* The largest context is the last one whose plan fits: one more position does not. */
static void largest_context_is_exactly_the_last_that_fits(void **stp) {
    (void)stp;
    slate_model *m = open_4k(NULL);
    slate_plan full = plan_of(m, 0, -1, 0, 2);
    slate_plan one = plan_of(m, 1, -1, 0, 2);
    for (size_t cut = 1; cut < 4; cut++) {
        /* Budgets that land inside the range of contexts 1..4096 for two states. */
        size_t budget = one.total_bytes + (full.total_bytes - one.total_bytes) * cut / 4;
        slate_plan p = plan_of(m, 0, -1, budget, 2);
        assert_false(p.fits);
        assert_true(p.n_ctx_fit > 1 && p.n_ctx_fit < 4096);
        assert_true(plan_of(m, p.n_ctx_fit, -1, budget, 2).fits);
        assert_false(plan_of(m, p.n_ctx_fit + 1, -1, budget, 2).fits);
    }
    slate_plan none = plan_of(m, 0, -1, full.weights_bytes, 1);
    assert_int_equal(none.n_ctx_fit, 0);
    slate_plan all = plan_of(m, 0, -1, 0, 1);
    assert_true(all.fits);
    assert_int_equal(all.n_ctx_fit, 4096);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

/* With realistic head_dim (64) and a KV-dominated budget, int8 fits about twice f16's
 * context and f16 twice f32's. */
static void int8_cache_fits_about_twice_the_context_of_f16(void **stp) {
    (void)stp;
    tm_opts o = tm_default();
    o.dim = 128;
    o.n_heads = 2;
    o.n_kv_heads = 1;
    o.ffn_dim = 64;
    o.n_ctx = 16384;
    o.max_query = 4;
    slate_model *m;
    assert_int_equal(slate_model_open(make_pkg("hd64.slate", &o), NULL, &m, NULL), SLATE_OK);
    slate_plan full = plan_of(m, 0, SLATE_DTYPE_F32, 0, 1);
    size_t budget = full.weights_bytes + full.scratch_bytes + full.kv_bytes / 4;
    slate_plan p = plan_of(m, 0, -1, budget, 1);
    double f16_f32 = (double)p.n_ctx_fit_f16 / p.n_ctx_fit_f32;
    double i8_f16 = (double)p.n_ctx_fit_i8 / p.n_ctx_fit_f16;
    assert_true(f16_f32 > 1.9 && f16_f32 < 2.1);
    assert_true(i8_f16 > 1.8 && i8_f16 < 2.0); /* (64 + 4) bytes per head instead of 128 */
    assert_int_equal(p.n_ctx_fit, p.n_ctx_fit_f16);
    /* 16-bit weights free memory for context (tinymodel writes f32). */
    assert_true(p.weights_bytes_16bit < p.weights_bytes);
    assert_true(p.n_ctx_fit_16bit > p.n_ctx_fit);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

static void open_over_budget_names_numbers_and_largest_context(void **stp) {
    (void)stp;
    const char *path;
    slate_model *m4 = open_4k(&path);
    slate_plan p = plan_of(m4, 0, -1, 0, 1);
    slate_plan half = plan_of(m4, 2048, -1, 0, 1);
    assert_int_equal(slate_model_close(m4), SLATE_OK);
    slate_model_params mp = slate_model_default_params();
    mp.mem_budget_bytes = half.total_bytes;
    slate_model *m = NULL;
    slate_error e;
    assert_int_equal(slate_model_open(path, &mp, &m, &e), SLATE_E_BUDGET);
    assert_null(m);
    char want[128];
    snprintf(want, sizeof want, "model needs %zu bytes", p.total_bytes);
    assert_non_null(strstr(e.message, want));
    snprintf(want, sizeof want, "the budget is %zu", half.total_bytes);
    assert_non_null(strstr(e.message, want));
    assert_non_null(strstr(e.message, "the largest context that fits is 2048"));
    mp.mem_budget_bytes = p.total_bytes;
    assert_int_equal(slate_model_open(path, &mp, &m, &e), SLATE_OK);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

/* weights + live states + the new one must fit; freeing a state makes room again. */
static void state_budget_counts_live_states(void **stp) {
    fx *f = *stp;
    slate_plan two = plan_of(f->m, 0, -1, 0, 2);
    slate_model_params mp = slate_model_default_params();
    mp.mem_budget_bytes = two.total_bytes;
    slate_model *m;
    assert_int_equal(slate_model_open(f->path, &mp, &m, NULL), SLATE_OK);
    slate_state *a, *b, *c = NULL;
    slate_error e;
    assert_int_equal(slate_state_create(m, NULL, &a, NULL), SLATE_OK);
    assert_int_equal(slate_state_create(m, NULL, &b, NULL), SLATE_OK);
    assert_int_equal(slate_state_create(m, NULL, &c, &e), SLATE_E_BUDGET);
    assert_null(c);
    assert_non_null(strstr(e.message, "2 live state(s)"));
    assert_non_null(strstr(e.message, "not even a context of 1 fits"));
    /* A smaller int8 state may fit where a full one does not... not here: the budget is
     * exhausted exactly. Free one and the third fits. */
    slate_state_free(b);
    assert_int_equal(slate_state_create(m, NULL, &c, &e), SLATE_OK);
    slate_state_free(a);
    slate_state_free(c);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

static void bad_plan_and_state_params_are_refused_by_name(void **stp) {
    fx *f = *stp;
    slate_plan p;
    slate_error e;
    slate_plan_params pp = slate_plan_default_params();
    pp.n_ctx = 65;
    assert_int_equal(slate_model_plan(f->m, &pp, &p, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "n_ctx 65 outside 0..64"));
    pp = slate_plan_default_params();
    pp.kv_dtype = SLATE_DTYPE_F16; /* forgot kv_dtype_set */
    assert_int_equal(slate_model_plan(f->m, &pp, &p, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "kv_dtype_set is false"));
    pp.kv_dtype_set = true;
    pp.kv_dtype = SLATE_DTYPE_BF16;
    assert_int_equal(slate_model_plan(f->m, &pp, &p, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "bf16"));
    pp = slate_plan_default_params();
    pp.n_states = 5000;
    assert_int_equal(slate_model_plan(f->m, &pp, &p, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "n_states 5000"));
    assert_int_equal(slate_model_plan(NULL, &pp, &p, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_model_plan(f->m, &pp, NULL, &e), SLATE_E_INVALID_ARG);

    slate_state_params sp = slate_state_default_params();
    slate_state *st = NULL;
    sp.kv_dtype = SLATE_DTYPE_I8;
    assert_int_equal(slate_state_create(f->m, &sp, &st, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "kv_dtype is i8 but kv_dtype_set is false"));
    sp.kv_dtype_set = true;
    sp.kv_dtype = SLATE_DTYPE_I32;
    assert_int_equal(slate_state_create(f->m, &sp, &st, &e), SLATE_E_INVALID_ARG);
    assert_null(st);
}

static void device_table_and_lookup(void **stp) {
    (void)stp;
    const char *names[] = {"phone-6gb", "phone-8gb", "rpi5-4gb", "rpi5-8gb", "laptop-8gb",
                           "laptop-16gb"};
    slate_device d;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(slate_device_get(i, &d), SLATE_OK);
        assert_string_equal(d.name, names[i]);
        assert_int_equal(d.budget_bytes, d.ram_bytes - d.reserved_bytes);
        assert_true(d.reserved_bytes > 0 && d.reserved_bytes < d.ram_bytes);
        assert_non_null(d.note);
        slate_device g;
        assert_int_equal(slate_device_find(names[i], &g, NULL), SLATE_OK);
        assert_int_equal(g.budget_bytes, d.budget_bytes);
    }
    assert_int_equal(slate_device_get(6, &d), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_device_get(-1, &d), SLATE_E_INVALID_ARG);
    slate_error e;
    assert_int_equal(slate_device_find("toaster", &d, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "'toaster'"));
    assert_non_null(strstr(e.message, "rpi5-4gb"));
    assert_int_equal(slate_device_find("this-machine", &d, &e), SLATE_OK);
    assert_true(d.budget_bytes > 0 && d.budget_bytes <= d.ram_bytes);
}

static void this_machine_takes_the_smaller_of_memavailable_and_cgroup(void **stp) {
    (void)stp;
    const char *mi = "MemTotal:       16384000 kB\nMemFree:         1000000 kB\n"
                     "MemAvailable:    8192000 kB\nBuffers:          1000 kB\n";
    slate_device d;
    slate_error e;
    assert_int_equal(slate__device_from_text(mi, "max\n", &d, &e), SLATE_OK);
    assert_int_equal(d.ram_bytes, (size_t)16384000 * 1024);
    assert_int_equal(d.budget_bytes, (size_t)8192000 * 1024);
    assert_int_equal(d.reserved_bytes, d.ram_bytes - d.budget_bytes);
    assert_int_equal(slate__device_from_text(mi, "2147483648\n", &d, &e), SLATE_OK);
    assert_int_equal(d.budget_bytes, (size_t)2147483648u);
    assert_non_null(strstr(d.note, "cgroup"));
    /* cgroup v1 "unlimited" is a page-rounded 2^63 */
    assert_int_equal(slate__device_from_text(mi, "9223372036854771712\n", &d, &e), SLATE_OK);
    assert_int_equal(d.budget_bytes, (size_t)8192000 * 1024);
    /* A limit above MemAvailable does not raise the budget. */
    assert_int_equal(slate__device_from_text(mi, "99999999999999\n", &d, &e), SLATE_OK);
    assert_int_equal(d.budget_bytes, (size_t)8192000 * 1024);
    /* Old kernels without MemAvailable: MemFree. */
    assert_int_equal(slate__device_from_text("MemTotal: 1000 kB\nMemFree: 500 kB\n", NULL, &d, &e),
                     SLATE_OK);
    assert_int_equal(d.budget_bytes, 500 * 1024);
    assert_int_equal(slate__device_from_text("Nothing: 1\n", NULL, &d, &e), SLATE_E_IO);
    assert_non_null(strstr(e.message, "MemTotal"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kv_per_token_matches_the_formula_for_each_dtype),
        cmocka_unit_test(plan_equals_what_a_state_reserves),
        cmocka_unit_test(plan_file_equals_model_plan),
        cmocka_unit_test(largest_context_is_exactly_the_last_that_fits),
        cmocka_unit_test(int8_cache_fits_about_twice_the_context_of_f16),
        cmocka_unit_test(open_over_budget_names_numbers_and_largest_context),
        cmocka_unit_test(state_budget_counts_live_states),
        cmocka_unit_test(bad_plan_and_state_params_are_refused_by_name),
        cmocka_unit_test(device_table_and_lookup),
        cmocka_unit_test(this_machine_takes_the_smaller_of_memavailable_and_cgroup),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, setup, teardown);
}
