/*
 * state.c - one conversation: the KV cache (every state tensor, [n_ctx][width] each) and the
 * scratch for activations, planned once at creation in one arena; predict allocates nothing.
 * The cache is written in place at the state's length. Calls on one state are serialized by
 * an atomic word (slate__state_acquire): a call that finds another call running returns
 * SLATE_E_BUSY instead of racing.
 * Invariant: rows [kv_first[i], length) of every state tensor hold the keys/values of the
 * tokens fed so far (kv_first is 0 except for sliding-window caches whose old rows were
 * released, kvmem.c); a failed predict leaves length unchanged.
 * Issue 4: the cache lives in lazily committed mappings in the state's cache dtype
 * (kvmem.c); the state is on its model's list for memory pressure, and every call that touches
 * the cache passes through slate__state_enter (report a pressure reset, read a spilled state
 * back) and predict through slate__state_leave (apply a reset requested during the call).
 */
#include "plan/model.h"
#include "pkg/pkg.h"

#include <stdio.h>
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
    /* The plan validates n_ctx and the cache dtype; the budget check happens in
     * slate__state_register with the same arithmetic, counting the live states. */
    slate_plan_params pp = slate_plan_default_params();
    pp.n_ctx = params->n_ctx;
    pp.kv_dtype_set = params->kv_dtype_set;
    pp.kv_dtype = params->kv_dtype;
    pp.kv_rollback_tokens = params->kv_rollback_tokens ? params->kv_rollback_tokens
                                                       : m->kv_rollback_tokens;
    pp.kv_keep_all = params->kv_keep_all || m->kv_keep_all;
    slate_plan plan;
    slate_status s = slate__plan(p, &m->hp, m->state_group, m->state_window, m->weights_mapped, &pp,
                                 0, &plan, err);
    if (s) return s;
    slate_state *st = slate__calloc(1, sizeof *st);
    if (!st) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    st->model = m;
    st->n_ctx = plan.n_ctx;
    st->plan_bytes = plan.state_bytes;
    /* The plan says whether any cache is windowed and released, and with which reach. */
    st->kv_release = plan.kv_rollback_tokens > 0;
    st->kv_rollback = plan.kv_rollback_tokens;
    /* Held until the state is complete, so memory pressure skips it meanwhile. */
    atomic_init(&st->busy, SLATE__IN_CALL);
    atomic_init(&st->reset_req, false);
    /* The cache is a lazily committed mapping (src/state/kvmem.c): rows are written before they
     * are read, and a short conversation commits only the pages it touches. */
    s = slate__kv_create(st, params, err);
    if (!s) {
        st->tokens = slate__malloc((size_t)p->max_query * sizeof *st->tokens);
        st->prof = slate__calloc((size_t)(p->n_ops > 0 ? p->n_ops : 1), sizeof *st->prof);
        if (!st->tokens || !st->prof)
            s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
    }
    if (!s) s = slate__pool_create(m->n_threads, &st->pool, err);
    if (!s) s = slate__state_register(st, &pp, err);
    if (s) {
        slate__pool_free(st->pool);
        slate__kv_free(st);
        slate__free(st->tokens);
        slate__free(st->prof);
        slate__free(st);
        return s;
    }
    atomic_fetch_add(&m->n_states, 1);
    slate__state_release(st);
    *out = st;
    return SLATE_OK;
}

void slate_state_free(slate_state *st) {
    if (!st) return;
    /* Unlinks under the model's lock: a pressure pass working on this state finishes first. */
    slate__state_unregister(st);
    atomic_fetch_sub(&st->model->n_states, 1);
    slate__pool_free(st->pool);
    if (st->spill_path) remove(st->spill_path);
    slate__free(st->spill_path);
    slate__kv_free(st);
    slate__free(st->tokens);
    slate__free(st->prof);
    slate__free(st);
}

static bool acquire(slate_state *st) { return slate__state_acquire(st); }
static void release(slate_state *st) { slate__state_release(st); }

slate_status slate__state_predict_held(slate_state *st, const int32_t *tokens, int32_t n_tokens,
                                      const slate_predict_params *params, slate_error *err) {
    const slate__program *p = &st->model->prog;
    if (n_tokens < 1 || n_tokens > p->max_query)
        return slate__fail(err, SLATE_E_SHAPE, "query length %d outside the package's range "
                           "1..%d", n_tokens, p->max_query);
    slate_status s = slate__state_enter(st, true, err);
    if (s) return s;
    if ((int64_t)st->length + n_tokens > st->n_ctx)
        return slate__fail(err, SLATE_E_CONTEXT_FULL, "%d positions held + %d new exceed the "
                           "context of %d", (int32_t)st->length, n_tokens, st->n_ctx);
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= p->n_vocab)
            return slate__fail(err, SLATE_E_INVALID_ARG, "token %d (at index %d) is outside the "
                               "vocabulary 0..%d", tokens[i], i, p->n_vocab - 1);
    memcpy(st->tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    st->n_q = n_tokens;
    st->n_out = params && params->all_logits ? n_tokens : 1;
    st->mask = params ? params->mask : NULL;
    slate__exec_run(st);
    st->length += n_tokens;
    st->n_logit_rows = st->n_out;
    slate__kv_release_window(st, false); /* rows now behind every window (and the reach) */
    slate__kv_huge_update(st, n_tokens);
    return slate__state_leave(st, s, err);
}

slate_status slate_state_predict(slate_state *st, const int32_t *tokens, int32_t n_tokens,
                                 const slate_predict_params *params, slate_error *err) {
    if (!st || !tokens)
        return slate__fail(err, SLATE_E_INVALID_ARG, "state and tokens must not be NULL");
    if (!acquire(st))
        return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    slate_status s = slate__state_predict_held(st, tokens, n_tokens, params, err);
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
    slate__state_forget(st); /* acknowledges a pressure reset; a spill file is no longer needed */
    st->length = 0;
    slate__kv_first_clear(st);
    st->n_logit_rows = 0;
    release(st);
    return SLATE_OK;
}

/* Why rows of a cache are gone, for E_RELEASED messages: this state's own release behind the
 * window, or (a state that keeps every row) the state file it was loaded from. */
static const char *released_why(const slate_state *st, char *buf, size_t cap) {
    if (st->kv_release)
        snprintf(buf, cap, "rollback reach %d", st->kv_rollback);
    else
        snprintf(buf, cap, "released by the state that saved the file this one was loaded from; "
                 "this state keeps every row it holds");
    return buf;
}

slate_status slate_state_truncate(slate_state *st, int32_t length, slate_error *err) {
    char reach[160];
    if (!st) return slate__fail(err, SLATE_E_INVALID_ARG, "state must not be NULL");
    if (!acquire(st)) return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    slate_status s = slate__state_enter(st, true, err);
    if (!s && (length < 0 || length > st->length))
        s = slate__fail(err, SLATE_E_INVALID_ARG, "truncate to %d: must be in 0..%d (the current "
                        "length)", length, (int32_t)st->length);
    /* The next query, at position `length`, reads keys from length - window + 1: each of them
     * must still be held (a length of 0 reads none). */
    for (int32_t i = 0; !s && length > 0 && i < st->model->prog.n_states; i++) {
        int32_t w = st->model->state_window[i], first = st->kv_first[i];
        if (first > 0 && (int64_t)length - w + 1 < first)
            s = slate__fail(err, SLATE_E_RELEASED, "truncate to %d: cache '%s' (sliding window "
                            "%d) released positions 0..%d, and a query at %d reads keys from %d; "
                            "the shortest length allowed now is %d (%s; reset and prefill "
                            "again%s)", length,
                            st->model->prog.tensors[st->model->prog.states[i]].name, w,
                            first - 1, length, length - w + 1 > 0 ? length - w + 1 : 0,
                            first + w - 1, released_why(st, reach, sizeof reach),
                            st->kv_release ? ", or create the state with a larger "
                                             "kv_rollback_tokens" : "");
    }
    if (!s && length != st->length) {
        st->length = length;
        st->n_logit_rows = 0; /* the logits belonged to a position that is gone */
        if (length == 0) slate__kv_first_clear(st);
    }
    release(st);
    return s;
}

slate_status slate_state_set_length(slate_state *st, int32_t length, slate_error *err) {
    if (!st) return slate__fail(err, SLATE_E_INVALID_ARG, "state must not be NULL");
    if (!acquire(st)) return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    slate_status s = slate__state_enter(st, false, err); /* acknowledges a pressure reset */
    if (!s && (length < 0 || length > st->n_ctx))
        s = slate__fail(err, SLATE_E_INVALID_ARG, "length %d outside 0..%d", length, st->n_ctx);
    else if (!s) {
        st->length = length;
        st->n_logit_rows = 0;
        slate__kv_first_clear(st); /* the caller declares every row up to length written */
        slate__kv_huge_update(st, length);
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
    info->dtype = st->kv_dtype[index];
    info->n_dims = 2;
    info->dims[0] = st->n_ctx;
    info->dims[1] = t->width;
    info->row_bytes = st->kv_row_bytes[index];
    info->window = st->model->state_window[index];
    info->first_position = st->kv_first[index];
    return SLATE_OK;
}

slate_status slate_state_read_tensor(const slate_state *st, int32_t index, void *buf,
                                     size_t cap, size_t *len_out, slate_error *err) {
    char reach[160];
    slate_tensor_info info;
    if (!len_out || slate_state_tensor_info(st, index, &info) != SLATE_OK || (!buf && cap))
        return slate__fail(err, SLATE_E_INVALID_ARG, "bad state, tensor index or buffer");
    /* Takes busy like every call that touches the cache: pressure may release an idle
     * state's pages, and a spilled state is read back first. The state is heap memory, so
     * acquiring through a const pointer is sound. */
    slate_state *ms = (slate_state *)st;
    if (!acquire(ms)) return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    slate_status s = slate__state_enter(ms, true, err);
    size_t need = info.row_bytes * (size_t)st->length;
    *len_out = need;
    /* After the enter: a spilled state read back has its first position from the file. */
    if (!s && st->kv_first[index] > 0)
        s = slate__fail(err, SLATE_E_RELEASED, "state tensor '%s': positions 0..%d were released "
                        "(sliding window %d, %s); only %d..%d are held%s", info.name,
                        st->kv_first[index] - 1, info.window, released_why(st, reach, sizeof reach),
                        st->kv_first[index], (int32_t)st->length - 1,
                        st->kv_release ? " (create the state with kv_keep_all to export every "
                                         "row)" : "");
    else if (!s && cap < need)
        s = slate__fail(err, SLATE_E_BUFFER_TOO_SMALL, "state tensor '%s' needs %zu bytes, "
                        "buffer has %zu", info.name, need, cap);
    if (!s && need) slate__kv_get_rows(st, index, 0, st->length, buf);
    release(ms);
    return s;
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
    slate_status s = slate__state_enter(st, true, err);
    if (!s && len) slate__kv_put_rows(st, index, 0, n_positions, data);
    release(st);
    return s;
}

/* ---- profiling ------------------------------------------------------------------------------ */

slate_status slate_state_set_profiling(slate_state *st, bool on) {
    if (!st) return SLATE_E_INVALID_ARG;
    if (!acquire(st)) return SLATE_E_BUSY;
    if (on) memset(st->prof, 0, (size_t)st->model->prog.n_ops * sizeof *st->prof);
    st->profiling = on;
    release(st);
    return SLATE_OK;
}

slate_status slate_state_profile(const slate_state *st, slate_op_profile *buf, size_t cap,
                                 size_t *n_out) {
    if (!st || !n_out || (!buf && cap)) return SLATE_E_INVALID_ARG;
    const slate__program *p = &st->model->prog;
    *n_out = (size_t)p->n_ops;
    if (cap < (size_t)p->n_ops) return SLATE_E_BUFFER_TOO_SMALL;
    /* The counters are written by a running call: take the state like one (const cast for the
     * flag only, as in slate_state_read_tensor). */
    slate_state *ms = (slate_state *)st;
    if (!acquire(ms)) return SLATE_E_BUSY;
    for (int32_t i = 0; i < p->n_ops; i++) {
        const slate__op *op = &p->ops[i];
        slate_op_profile *r = &buf[i];
        memset(r, 0, sizeof *r);
        r->op_index = i;
        r->op_name = slate__op_name(op->kind);
        int32_t w = -1;
        switch (op->kind) {
        case SLATE__OP_MATMUL:
        case SLATE__OP_RMS_NORM:
        case SLATE__OP_ROPE:
        case SLATE__OP_KV_WRITE:
        case SLATE__OP_ATTENTION: w = op->in[1]; break;
        case SLATE__OP_EMBEDDING: w = op->in[0]; break;
        default: break;
        }
        r->weight_dtype = SLATE_DTYPE_F32;
        if (w >= 0) {
            r->weight_name = p->tensors[w].name;
            r->weight_dtype = p->tensors[w].kind == SLATE__T_STATE
                                  ? st->kv_dtype[st->model->state_slot[w]] /* this state's */
                                  : p->tensors[w].dtype;
        }
        slate__exec_op_kernel(st, i, &r->kernel, &r->scalar_fallback);
        if (op->kind == SLATE__OP_ATTENTION)
            r->layout = st->kv_k16[st->model->state_slot[op->in[1]]] ? "k16" : "rows";
        r->n_calls = st->prof[i].n_calls;
        r->total_ns = st->prof[i].total_ns;
        r->bytes = st->prof[i].bytes;
        r->flops = st->prof[i].flops;
    }
    release(ms);
    return SLATE_OK;
}
