/* test_profile.c - per-op profiling of a state (slate_state_set_profiling, slate_state_profile):
 * off by default and counting nothing; when on, every op counted once per call with the bytes
 * and flops its shapes imply; turning it on clears the counters; it does not change the logits;
 * the kernel set of each op is named; misuse returns a status. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "plan/model.h"
#include "tinymodel.h"

typedef struct fx {
    slate_model *m;
    slate_state *st;
    size_t n_ops;
    slate_op_profile *prof;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    tm_opts o = tm_default();
    o.dtype = SLATE_DTYPE_F16;
    const char *path = tu_tmp("profile.slate");
    slate_error e;
    if (tm_write(path, &o, &e) != SLATE_OK) fail_msg("tm_write: %s", e.message);
    /* 2 threads whatever the machine: the attention's byte count depends on how exec splits
     * the rows among them (every_op_is_counted_once_per_call_with_its_bytes_and_flops) */
    slate_model_params mp = slate_model_default_params();
    mp.n_threads = 2;
    assert_int_equal(slate_model_open(path, &mp, &f->m, &e), SLATE_OK);
    assert_int_equal(slate_state_create(f->m, NULL, &f->st, &e), SLATE_OK);
    assert_int_equal(slate_state_profile(f->st, NULL, 0, &f->n_ops), SLATE_E_BUFFER_TOO_SMALL);
    slate_model_info info;
    slate_model_get_info(f->m, &info);
    assert_int_equal((int32_t)f->n_ops, info.n_ops);
    f->prof = calloc(f->n_ops, sizeof *f->prof);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    slate_state_free(f->st);
    assert_int_equal(slate_model_close(f->m), SLATE_OK);
    free(f->prof);
    free(f);
    return 0;
}

static void read_profile(fx *f) {
    size_t n = 0;
    assert_int_equal(slate_state_profile(f->st, f->prof, f->n_ops, &n), SLATE_OK);
    assert_int_equal(n, f->n_ops);
}

static const int32_t IDS[5] = {1, 40, 41, 200, 7};

static void profiling_is_off_by_default_and_counts_nothing(void **state) {
    fx *f = *state;
    assert_int_equal(slate_state_reset(f->st), SLATE_OK);
    assert_int_equal(slate_state_predict(f->st, IDS, 5, NULL, NULL), SLATE_OK);
    read_profile(f);
    for (size_t i = 0; i < f->n_ops; i++) {
        assert_int_equal(f->prof[i].op_index, (int32_t)i);
        assert_non_null(f->prof[i].op_name);
        assert_int_equal(f->prof[i].n_calls, 0);
        assert_int_equal(f->prof[i].total_ns, 0);
        assert_int_equal(f->prof[i].bytes, 0);
    }
}

static void every_op_is_counted_once_per_call_with_its_bytes_and_flops(void **state) {
    fx *f = *state;
    const slate__program *p = &f->m->prog;
    assert_int_equal(slate_state_reset(f->st), SLATE_OK);
    assert_int_equal(slate_state_set_profiling(f->st, true), SLATE_OK);
    assert_int_equal(slate_state_predict(f->st, IDS, 5, NULL, NULL), SLATE_OK);     /* q = 5 */
    assert_int_equal(slate_state_predict(f->st, IDS + 4, 1, NULL, NULL), SLATE_OK); /* q = 1 */
    assert_int_equal(slate_state_set_profiling(f->st, false), SLATE_OK);
    read_profile(f);
    uint64_t total = 0;
    int n_matmul = 0, n_attention = 0;
    for (size_t i = 0; i < f->n_ops; i++) {
        const slate_op_profile *r = &f->prof[i];
        const slate__op *op = &p->ops[i];
        assert_int_equal(r->n_calls, 2);
        assert_string_equal(r->op_name, slate__op_name(op->kind));
        total += r->total_ns;
        if (op->kind == SLATE__OP_MATMUL) {
            const slate__tensor *w = &p->tensors[op->in[1]];
            n_matmul++;
            assert_string_equal(r->weight_name, w->name);
            assert_int_equal(r->weight_dtype, w->dtype);
            /* The whole weight once per call; 2 flops per multiply-add; the rows are the call's
             * query length, except after last_rows (the head: 1 row per call). */
            assert_int_equal(r->bytes, 2 * w->nbytes);
            uint64_t mac = (uint64_t)w->dims[0] * (uint64_t)w->dims[1];
            bool head = p->tensors[op->in[0]].out_rows;
            assert_int_equal(r->flops, 2 * mac * (head ? 2 : 6));
        } else if (op->kind == SLATE__OP_ATTENTION) {
            n_attention++;
            assert_non_null(r->weight_name); /* the K cache */
            /* the K cache's layout in this state */
            assert_non_null(r->layout);
            assert_string_equal(r->layout,
                                f->st->kv_k16[f->st->model->state_slot[op->in[1]]] ? "k16" : "rows");
            /* Positions attended: 1+2+3+4+5 in the prefill, 6 in the decode step. K and V rows
             * of width n_kv_heads * head_dim at the state's cache dtype, read once per kernel
             * call: with 2 query heads per kv head exec gives the kernels 4 rows per call (a
             * pass of 8 heads) where that leaves 2 items per thread, as 5 rows x 2 kv heads on
             * 2 threads do: rows 0-3 in one call (4 positions read), row 4 (5), the decode
             * step (6). */
            size_t row = (size_t)op->n_kv_heads * (size_t)op->head_dim *
                         (r->weight_dtype == SLATE_DTYPE_F32 ? 4 : 2);
            assert_int_equal(op->n_heads / op->n_kv_heads, 2);
            assert_int_equal(r->bytes, 2 * (4 + 5 + 6) * row);
            assert_int_equal(r->flops, 4 * 21 * (uint64_t)op->n_heads * (uint64_t)op->head_dim);
        }
        if (op->kind != SLATE__OP_ATTENTION) assert_null(r->layout);
        if (op->kind == SLATE__OP_ADD) {
            assert_null(r->weight_name);
            assert_string_equal(r->kernel, "c");
            assert_int_equal(r->bytes, 0);
            assert_true(r->flops > 0);
        }
    }
    assert_true(n_matmul >= 2 * 7);
    assert_int_equal(n_attention, 2);
    assert_true(total > 0);
}

static void turning_profiling_on_clears_the_counters(void **state) {
    fx *f = *state;
    assert_int_equal(slate_state_reset(f->st), SLATE_OK);
    assert_int_equal(slate_state_set_profiling(f->st, true), SLATE_OK);
    assert_int_equal(slate_state_predict(f->st, IDS, 3, NULL, NULL), SLATE_OK);
    assert_int_equal(slate_state_set_profiling(f->st, false), SLATE_OK);
    /* Off: calls are not counted, counters are kept. */
    assert_int_equal(slate_state_predict(f->st, IDS, 1, NULL, NULL), SLATE_OK);
    read_profile(f);
    assert_int_equal(f->prof[0].n_calls, 1);
    assert_int_equal(slate_state_set_profiling(f->st, true), SLATE_OK);
    read_profile(f);
    for (size_t i = 0; i < f->n_ops; i++) {
        assert_int_equal(f->prof[i].n_calls, 0);
        assert_int_equal(f->prof[i].total_ns, 0);
        assert_int_equal(f->prof[i].flops, 0);
    }
    assert_int_equal(slate_state_set_profiling(f->st, false), SLATE_OK);
}

static void profiling_does_not_change_the_logits(void **state) {
    fx *f = *state;
    int32_t V = f->m->prog.n_vocab;
    float *a = malloc((size_t)V * sizeof *a);
    for (int on = 0; on < 2; on++) {
        assert_int_equal(slate_state_reset(f->st), SLATE_OK);
        assert_int_equal(slate_state_set_profiling(f->st, on), SLATE_OK);
        assert_int_equal(slate_state_predict(f->st, IDS, 5, NULL, NULL), SLATE_OK);
        const float *l = slate_state_logits(f->st, NULL);
        if (on) assert_memory_equal(a, l, (size_t)V * sizeof *a);
        else memcpy(a, l, (size_t)V * sizeof *a);
    }
    assert_int_equal(slate_state_set_profiling(f->st, false), SLATE_OK);
    free(a);
}

static void each_op_names_the_kernel_set_it_runs(void **state) {
    fx *f = *state;
    read_profile(f);
    const char *active = slate_kernels_name();
    for (size_t i = 0; i < f->n_ops; i++) {
        const slate_op_profile *r = &f->prof[i];
        assert_non_null(r->kernel);
        /* kv_write into this state's f16 cache converts with the set's to_f16 */
        bool f16_write = strcmp(r->op_name, "kv_write") == 0 &&
                         r->weight_dtype == SLATE_DTYPE_F16;
        if (strcmp(r->op_name, "matmul") == 0 || strcmp(r->op_name, "attention") == 0 ||
            strcmp(r->op_name, "rms_norm") == 0 || strcmp(r->op_name, "embedding") == 0 ||
            strcmp(r->op_name, "rope") == 0 || strcmp(r->op_name, "swiglu") == 0 || f16_write) {
            /* A SIMD set or the reference; a fallback only when the active set is not "ref". */
            assert_string_not_equal(r->kernel, "c");
            if (r->scalar_fallback) {
                assert_string_equal(r->kernel, "ref");
                assert_string_not_equal(active, "ref");
            }
            if (strcmp(active, "ref") == 0) assert_string_equal(r->kernel, "ref");
        } else {
            assert_string_equal(r->kernel, "c");
            assert_false(r->scalar_fallback);
        }
    }
    /* f16 matmuls have SIMD variants in every set but ref: no fallback there (the set named
     * is the one the function comes from, e.g. "avx512" inside "avx512_vnni"). */
    for (size_t i = 0; i < f->n_ops; i++)
        if (strcmp(f->prof[i].op_name, "matmul") == 0) {
            assert_false(f->prof[i].scalar_fallback);
            if (strcmp(active, "ref") != 0) assert_string_not_equal(f->prof[i].kernel, "ref");
        }
}

static void misuse_returns_a_status(void **state) {
    fx *f = *state;
    size_t n = 99;
    assert_int_equal(slate_state_set_profiling(NULL, true), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_state_profile(NULL, f->prof, f->n_ops, &n), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_state_profile(f->st, f->prof, f->n_ops, NULL), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_state_profile(f->st, NULL, 3, &n), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_state_profile(f->st, f->prof, f->n_ops - 1, &n),
                     SLATE_E_BUFFER_TOO_SMALL);
    assert_int_equal(n, f->n_ops);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(profiling_is_off_by_default_and_counts_nothing),
        cmocka_unit_test(every_op_is_counted_once_per_call_with_its_bytes_and_flops),
        cmocka_unit_test(turning_profiling_on_clears_the_counters),
        cmocka_unit_test(profiling_does_not_change_the_logits),
        cmocka_unit_test(each_op_names_the_kernel_set_it_runs),
        cmocka_unit_test(misuse_returns_a_status),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, setup, teardown);
}
