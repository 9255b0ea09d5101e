/*
 * state.c - one conversation: the KV cache (every state tensor, [n_ctx][width] each) and the
 * scratch for activations, planned once at creation in one arena; predict allocates nothing.
 * The cache is written in place at the state's length. Calls on one state are serialized by
 * an atomic flag: a call that finds it set returns SLATE_E_BUSY instead of racing.
 * Invariant: rows [0, length) of every state tensor hold the keys/values of the tokens fed so
 * far; a failed predict leaves length unchanged.
 */
#include "plan/model.h"
#include "pkg/pkg.h"

#include <string.h>

slate_state_params slate_state_default_params(void) {
    slate_state_params p;
    memset(&p, 0, sizeof p);
    return p;
}

slate_predict_params slate_predict_default_params(void) {
    slate_predict_params p;
    memset(&p, 0, sizeof p);
    return p;
}

slate_status slate_state_create(slate_model *m, const slate_state_params *params,
                                slate_state **out, slate_error *err) {
    if (out) *out = NULL;
    if (!m || !out) return slate__fail(err, SLATE_E_INVALID_ARG, "model and out must not be NULL");
    slate_state_params dp = slate_state_default_params();
    if (!params) params = &dp;
    const slate__program *p = &m->prog;
    if (params->n_ctx < 0 || params->n_ctx > p->n_ctx)
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_ctx %d outside 0..%d (the package's "
                           "context)", params->n_ctx, p->n_ctx);
    int32_t n_ctx = params->n_ctx ? params->n_ctx : p->n_ctx;
    size_t kv_bytes = p->kv_bytes_per_token * (size_t)n_ctx;
    size_t need = m->prog.weights_bytes + kv_bytes + p->scratch_bytes;
    if (m->mem_budget_bytes && need > m->mem_budget_bytes)
        return slate__fail(err, SLATE_E_BUDGET, "state needs %zu bytes (KV %zu at context %d + "
                           "scratch %zu) on top of %zu of weights; the budget is %zu",
                           kv_bytes + p->scratch_bytes, kv_bytes, n_ctx, p->scratch_bytes,
                           m->prog.weights_bytes, m->mem_budget_bytes);
    slate_state *st = slate__calloc(1, sizeof *st);
    if (!st) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    st->model = m;
    st->n_ctx = n_ctx;
    st->kv_bytes = kv_bytes;
    atomic_flag_clear(&st->busy);
    /* The arena is not zeroed: rows are written before they are read, and untouched pages of a
     * large allocation are not committed, so a short conversation does not pay for n_ctx. */
    st->kv = slate__malloc_aligned(kv_bytes ? kv_bytes : 1);
    st->scratch = slate__malloc_aligned(p->scratch_bytes ? p->scratch_bytes : 1);
    st->tokens = slate__malloc((size_t)p->max_query * sizeof *st->tokens);
    slate_status s = SLATE_OK;
    if (!st->kv || !st->scratch || !st->tokens)
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory: state needs %zu bytes",
                        kv_bytes + p->scratch_bytes);
    else
        s = slate__pool_create(m->n_threads, &st->pool, err);
    if (s) {
        slate__free_aligned(st->kv);
        slate__free_aligned(st->scratch);
        slate__free(st->tokens);
        slate__free(st);
        return s;
    }
    atomic_fetch_add(&m->n_states, 1);
    *out = st;
    return SLATE_OK;
}

void slate_state_free(slate_state *st) {
    if (!st) return;
    atomic_fetch_sub(&st->model->n_states, 1);
    slate__pool_free(st->pool);
    slate__free_aligned(st->kv);
    slate__free_aligned(st->scratch);
    slate__free(st->tokens);
    slate__free(st);
}

static bool acquire(slate_state *st) { return !atomic_flag_test_and_set(&st->busy); }
static void release(slate_state *st) { atomic_flag_clear(&st->busy); }

slate_status slate_state_predict(slate_state *st, const int32_t *tokens, int32_t n_tokens,
                                 const slate_predict_params *params, slate_error *err) {
    if (!st || !tokens)
        return slate__fail(err, SLATE_E_INVALID_ARG, "state and tokens must not be NULL");
    const slate__program *p = &st->model->prog;
    if (n_tokens < 1 || n_tokens > p->max_query)
        return slate__fail(err, SLATE_E_SHAPE, "query length %d outside the package's range "
                           "1..%d", n_tokens, p->max_query);
    if (!acquire(st))
        return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    slate_status s = SLATE_OK;
    if ((int64_t)st->length + n_tokens > st->n_ctx) {
        s = slate__fail(err, SLATE_E_CONTEXT_FULL, "%d positions held + %d new exceed the "
                        "context of %d", st->length, n_tokens, st->n_ctx);
        goto done;
    }
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= p->n_vocab) {
            s = slate__fail(err, SLATE_E_INVALID_ARG, "token %d (at index %d) is outside the "
                            "vocabulary 0..%d", tokens[i], i, p->n_vocab - 1);
            goto done;
        }
    memcpy(st->tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    st->n_q = n_tokens;
    st->n_out = params && params->all_logits ? n_tokens : 1;
    st->mask = params ? params->mask : NULL;
    slate__exec_run(st);
    st->length += n_tokens;
    st->n_logit_rows = st->n_out;
done:
    release(st);
    return s;
}

const float *slate_state_logits(const slate_state *st, int32_t *n_rows) {
    if (n_rows) *n_rows = st ? st->n_logit_rows : 0;
    if (!st || st->n_logit_rows == 0) return NULL;
    return (const float *)(st->scratch + st->model->prog.tensors[st->model->prog.logits].offset);
}

int32_t slate_state_length(const slate_state *st) { return st ? st->length : 0; }
int32_t slate_state_n_ctx(const slate_state *st) { return st ? st->n_ctx : 0; }

slate_status slate_state_reset(slate_state *st) {
    if (!st) return SLATE_E_INVALID_ARG;
    if (!acquire(st)) return SLATE_E_BUSY;
    st->length = 0;
    st->n_logit_rows = 0;
    release(st);
    return SLATE_OK;
}

slate_status slate_state_truncate(slate_state *st, int32_t length, slate_error *err) {
    if (!st) return slate__fail(err, SLATE_E_INVALID_ARG, "state must not be NULL");
    if (!acquire(st)) return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    slate_status s = SLATE_OK;
    if (length < 0 || length > st->length)
        s = slate__fail(err, SLATE_E_INVALID_ARG, "truncate to %d: must be in 0..%d (the current "
                        "length)", length, st->length);
    else if (length != st->length) {
        st->length = length;
        st->n_logit_rows = 0; /* the logits belonged to a position that is gone */
    }
    release(st);
    return s;
}

slate_status slate_state_set_length(slate_state *st, int32_t length, slate_error *err) {
    if (!st) return slate__fail(err, SLATE_E_INVALID_ARG, "state must not be NULL");
    if (!acquire(st)) return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    slate_status s = SLATE_OK;
    if (length < 0 || length > st->n_ctx)
        s = slate__fail(err, SLATE_E_INVALID_ARG, "length %d outside 0..%d", length, st->n_ctx);
    else {
        st->length = length;
        st->n_logit_rows = 0;
    }
    release(st);
    return s;
}

int32_t slate_state_n_tensors(const slate_state *st) {
    return st ? st->model->prog.n_states : 0;
}

slate_status slate_state_tensor_info(const slate_state *st, int32_t index,
                                     slate_tensor_info *info) {
    if (!st || !info || index < 0 || index >= st->model->prog.n_states)
        return SLATE_E_INVALID_ARG;
    const slate__tensor *t = &st->model->prog.tensors[st->model->prog.states[index]];
    memset(info, 0, sizeof *info);
    info->name = t->name;
    info->dtype = t->dtype;
    info->n_dims = 2;
    info->dims[0] = st->n_ctx;
    info->dims[1] = t->width;
    info->row_bytes = (size_t)t->width * slate__dtype_size(t->dtype);
    return SLATE_OK;
}

slate_status slate_state_read_tensor(const slate_state *st, int32_t index, void *buf,
                                     size_t cap, size_t *len_out, slate_error *err) {
    slate_tensor_info info;
    if (!len_out || slate_state_tensor_info(st, index, &info) != SLATE_OK || (!buf && cap))
        return slate__fail(err, SLATE_E_INVALID_ARG, "bad state, tensor index or buffer");
    size_t need = info.row_bytes * (size_t)st->length;
    *len_out = need;
    if (cap < need)
        return slate__fail(err, SLATE_E_BUFFER_TOO_SMALL, "state tensor '%s' needs %zu bytes, "
                           "buffer has %zu", info.name, need, cap);
    if (need) memcpy(buf, slate__state_tensor(st, st->model->prog.states[index]), need);
    return SLATE_OK;
}

slate_status slate_state_write_tensor(slate_state *st, int32_t index, const void *data,
                                      size_t len, int32_t n_positions, slate_error *err) {
    slate_tensor_info info;
    if (slate_state_tensor_info(st, index, &info) != SLATE_OK || (!data && len))
        return slate__fail(err, SLATE_E_INVALID_ARG, "bad state, tensor index or data");
    if (n_positions < 0 || n_positions > st->n_ctx)
        return slate__fail(err, SLATE_E_INVALID_ARG, "%d positions outside 0..%d", n_positions,
                           st->n_ctx);
    if (len != info.row_bytes * (size_t)n_positions)
        return slate__fail(err, SLATE_E_INVALID_ARG, "state tensor '%s': %zu bytes given, %d "
                           "positions need %zu", info.name, len, n_positions,
                           info.row_bytes * (size_t)n_positions);
    if (!acquire(st)) return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    if (len) memcpy(slate__state_tensor(st, st->model->prog.states[index]), data, len);
    release(st);
    return SLATE_OK;
}
