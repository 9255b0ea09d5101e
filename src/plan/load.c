/*
 * load.c - slate_model_open and friends. Opening validates the package container (pkg/read.c),
 * compiles and validates the program (exec/program.c), deserializes the tokenizer, checks the
 * memory plan against the budget, and only then binds the weights: read into anonymous memory
 * (default; decoding from page-cache mappings was erratic on the target VM; weights_io.c reads
 * uncached parts with O_DIRECT) or mapped read-only (use_mmap). A model is immutable afterwards.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "plan/model.h"
#include "plan/weights_io.h"
#include "pkg/pkg.h"
#include "tok/tok.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

slate_model_params slate_model_default_params(void) {
    slate_model_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static slate_status read_weights(slate__pkg *pkg, const char *path, slate_model *m,
                                 bool use_mmap, slate_error *err) {
    size_t size = (size_t)pkg->data_size;
    if (pkg->mem) {
        m->data = pkg->mem + pkg->data_offset;
        return SLATE_OK;
    }
    if (use_mmap) {
        /* Map the whole file: DATA's offset is 64-aligned but not page-aligned. */
        void *base = mmap(NULL, (size_t)pkg->file_size, PROT_READ, MAP_PRIVATE, pkg->fd, 0);
        if (base == MAP_FAILED)
            return slate__fail(err, SLATE_E_IO, "cannot map '%s': %s", path, strerror(errno));
        m->weights_map = base;
        m->weights_map_len = (size_t)pkg->file_size;
        m->data = m->weights_map + pkg->data_offset;
        return SLATE_OK;
    }
    slate__weights_buf buf;
    slate_status s = slate__read_weights(pkg->fd, path, pkg->file_size, pkg->data_offset, size,
                                         &buf, err);
    if (s) return s;
    m->weights_heap = buf.alloc;
    m->data = buf.data;
    return SLATE_OK;
}

static void model_destroy(slate_model *m) {
    if (!m) return;
    slate__watcher_stop(m);
    pthread_mutex_destroy(&m->states_mu);
    slate__free(m->state_slot);
    slate__free(m->state_group);
    slate__free(m->state_window);
    slate__free(m->spill_dir);
    slate__program_free(&m->prog);
    slate_tokenizer_free(m->tok);
    slate__free(m->arch);
    slate__free(m->chat_template);
    slate__free_aligned(m->weights_heap);
    if (m->weights_map) munmap((void *)m->weights_map, m->weights_map_len);
    slate__free(m);
}

static slate_status open_pkg(slate__pkg *pkg, const char *path, const slate_model_params *params,
                             slate_model **out, slate_error *err) {
    slate_model_params dp = slate_model_default_params();
    if (!params) params = &dp;
    slate_status ks = slate__kernels_check(err); /* SLATE_KERNELS names a set this CPU runs */
    if (ks) return ks;
    if (params->n_threads < 0 || params->n_threads > 1024)
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_threads %d outside 0..1024",
                           params->n_threads);
    if (params->pressure_watch_ms < 0 || params->pressure_watch_ms > 3600000)
        return slate__fail(err, SLATE_E_INVALID_ARG, "pressure_watch_ms %d outside 0..3600000",
                           params->pressure_watch_ms);
    if (params->spill_dir) {
        struct stat sd;
        if (stat(params->spill_dir, &sd) != 0 || !S_ISDIR(sd.st_mode))
            return slate__fail(err, SLATE_E_INVALID_ARG, "spill_dir '%s' is not a directory",
                               params->spill_dir);
    }
    slate_model *m = slate__calloc(1, sizeof *m);
    if (!m) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    pthread_mutex_init(&m->states_mu, NULL);
    slate_status s = slate__program_compile(pkg->json, pkg->data_size, &m->prog, err);
    if (s) goto fail;
    slate__plan_read_hparams(pkg->json, &m->hp);
    if ((s = slate__plan_bind_states(m, err))) goto fail;
    m->weights_mapped = params->use_mmap && !pkg->mem;
    m->kv_keep_all = params->kv_keep_all || slate__kv_keep_all_env();
    m->kv_rollback_tokens = params->kv_rollback_tokens; /* the plan below checks its range */
    m->on_pressure = params->on_pressure;
    m->pressure_user = params->pressure_user;
    if (params->spill_dir && !(m->spill_dir = slate__strdup(params->spill_dir))) {
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
        goto fail;
    }
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(pkg->json, "arch");
    m->arch = slate__strdup(cJSON_IsString(arch) ? arch->valuestring : "unknown");
    if (!m->arch) {
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
        goto fail;
    }
    /* The planner's reading (0 unless an integer-valued number in 0..1e9): a float cast of an
     * out-of-range value is undefined, and info and plan would disagree. */
    m->n_layers = m->hp.n_layers;
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(pkg->json, "chat_template");
    if (cJSON_IsString(ct) && !(m->chat_template = slate__strdup(ct->valuestring))) {
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
        goto fail;
    }
    const cJSON *special = cJSON_GetObjectItemCaseSensitive(pkg->json, "special");
    const cJSON *sid;
    cJSON_ArrayForEach(sid, cJSON_GetObjectItemCaseSensitive(special, "stop_ids")) {
        if (!cJSON_IsNumber(sid) || sid->valuedouble < 0 || sid->valuedouble >= m->prog.n_vocab ||
            sid->valuedouble != (double)(int32_t)sid->valuedouble || m->n_stop_ids >= 8) {
            s = slate__fail(err, SLATE_E_FORMAT, "special.stop_ids: at most 8 integer ids in "
                            "0..%d", m->prog.n_vocab - 1);
            goto fail;
        }
        m->stop_ids[m->n_stop_ids++] = (int32_t)sid->valuedouble;
    }
    if ((s = slate__tok_deserialize(pkg->tok, pkg->tok_len, &m->tok, err))) goto fail;
    if (slate_tokenizer_n_vocab(m->tok) > m->prog.n_vocab) {
        s = slate__fail(err, SLATE_E_FORMAT, "tokenizer has %d tokens but the model's vocabulary "
                        "is %d", slate_tokenizer_n_vocab(m->tok), m->prog.n_vocab);
        goto fail;
    }
    /* Budget: weights plus one state at full context in the package's cache dtype, before
     * anything big is allocated (the planner's arithmetic, as slate_model_plan reports it). */
    slate_plan_params pp = slate_plan_default_params();
    pp.budget_bytes = params->mem_budget_bytes;
    pp.kv_keep_all = m->kv_keep_all;
    pp.kv_rollback_tokens = m->kv_rollback_tokens;
    slate_plan plan;
    if ((s = slate__plan(&m->prog, &m->hp, m->state_group, m->state_window, m->weights_mapped, &pp,
                         0, &plan, err)))
        goto fail;
    if (!plan.fits) {
        s = slate__plan_budget_fail(&plan, "model", 0, 0, err);
        goto fail;
    }
    m->mem_budget_bytes = params->mem_budget_bytes;
    if ((s = read_weights(pkg, path, m, params->use_mmap, err))) goto fail;
    for (int32_t i = 0; i < m->prog.n_tensors; i++) {
        slate__tensor *t = &m->prog.tensors[i];
        if (t->kind == SLATE__T_WEIGHT) t->data = m->data + t->offset;
    }
    m->k = slate__kernels_get();
    m->n_threads = params->n_threads ? params->n_threads : slate__n_cores();
    atomic_init(&m->n_states, 0);
    m->fingerprint = slate__model_fingerprint(m, pkg->meta, pkg->meta_len, pkg->tok, pkg->tok_len);
    if (params->pressure_watch_ms > 0 &&
        (s = slate__watcher_start(m, params->pressure_watch_ms, err)))
        goto fail;
    *out = m;
    return SLATE_OK;
fail:
    model_destroy(m);
    return s;
}

slate_status slate_model_open(const char *path, const slate_model_params *params,
                              slate_model **out, slate_error *err) {
    if (out) *out = NULL;
    if (!path || !out) return slate__fail(err, SLATE_E_INVALID_ARG, "path and out must not be NULL");
    slate__pkg pkg;
    slate_status s = slate__pkg_open(path, &pkg, err);
    if (s) return s;
    s = open_pkg(&pkg, path, params, out, err);
    slate__pkg_close(&pkg);
    return s;
}

/* Opens a package held in memory (fuzzing and tests); the bytes must outlive the model. */
slate_status slate__model_open_mem(const uint8_t *data, size_t size,
                                   const slate_model_params *params, slate_model **out,
                                   slate_error *err) {
    *out = NULL;
    slate__pkg pkg;
    slate_status s = slate__pkg_open_mem(data, size, &pkg, err);
    if (s) return s;
    s = open_pkg(&pkg, "(memory)", params, out, err);
    slate__pkg_close(&pkg);
    return s;
}

slate_status slate_model_close(slate_model *m) {
    if (!m) return SLATE_OK;
    if (atomic_load(&m->n_states) > 0) return SLATE_E_BUSY;
    model_destroy(m); /* stops the pressure watcher first */
    return SLATE_OK;
}

const slate_tokenizer *slate_model_tokenizer(const slate_model *m) { return m ? m->tok : NULL; }
const char *slate_model_chat_template(const slate_model *m) { return m ? m->chat_template : NULL; }

slate_status slate_model_get_info(const slate_model *m, slate_model_info *info) {
    if (!m || !info) return SLATE_E_INVALID_ARG;
    memset(info, 0, sizeof *info);
    info->arch = m->arch;
    info->n_vocab = m->prog.n_vocab;
    info->n_ctx = m->prog.n_ctx;
    info->max_query = m->prog.max_query;
    info->n_layers = m->n_layers;
    info->n_ops = m->prog.n_ops;
    info->n_states = m->prog.n_states;
    info->weights_bytes = m->prog.weights_bytes;
    info->kv_bytes_per_token = m->prog.kv_bytes_per_token;
    info->kv_bytes_max = m->prog.kv_bytes_per_token * (size_t)m->prog.n_ctx;
    info->scratch_bytes = m->prog.scratch_bytes;
    info->state_bytes = info->kv_bytes_max + info->scratch_bytes;
    info->n_threads = m->n_threads;
    info->fingerprint = m->fingerprint;
    return SLATE_OK;
}

typedef struct out_text {
    char *buf;
    size_t cap, len;
} out_text;

static void put(out_text *o, const char *fmt, ...) SLATE__PRINTF(2, 3);
static void put(out_text *o, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
    if (o->buf && o->len + (size_t)n < o->cap) memcpy(o->buf + o->len, tmp, (size_t)n + 1);
    o->len += (size_t)n;
}

slate_status slate_model_describe(const slate_model *m, char *buf, size_t cap, size_t *len_out) {
    if (!m || (!buf && cap) || !len_out) return SLATE_E_INVALID_ARG;
    out_text o = {buf, cap, 0};
    if (buf && cap) buf[0] = '\0';
    const slate__program *p = &m->prog;
    put(&o, "arch %s, %d layers, vocab %d, context %d, max query %d, kernels %s\n", m->arch,
        m->n_layers, p->n_vocab, p->n_ctx, p->max_query, m->k->name);
    put(&o, "program: %d ops over %d tensors\n", p->n_ops, p->n_tensors);
    int counts[SLATE__OP_COUNT] = {0};
    for (int32_t i = 0; i < p->n_ops; i++) counts[p->ops[i].kind]++;
    for (int k = 0; k < SLATE__OP_COUNT; k++)
        if (counts[k]) put(&o, "  %-10s x%d\n", slate__op_name((slate__opkind)k), counts[k]);
    put(&o, "states: %d\n", p->n_states);
    for (int32_t i = 0; i < p->n_states && i < 4; i++) {
        const slate__tensor *t = &p->tensors[p->states[i]];
        put(&o, "  %-20s %s [%d][%lld]\n", t->name, slate_dtype_name(t->dtype), p->n_ctx,
            (long long)t->width);
    }
    if (p->n_states > 4) put(&o, "  ... (%d more)\n", p->n_states - 4);
    /* Weight bytes and elements per dtype (weight dtypes are 0..SLATE__N_WDTYPES-1): the
     * float ones always shown, each compressed one present with its bits per weight (stored
     * bytes, scales included, x 8 / elements: q4_k 4.5, q6_k 6.5625, q8_0 8.5). */
    size_t by_dtype[SLATE__N_WDTYPES] = {0};
    uint64_t n_elems[SLATE__N_WDTYPES] = {0};
    for (int32_t i = 0; i < p->n_tensors; i++) {
        const slate__tensor *t = &p->tensors[i];
        if (t->kind != SLATE__T_WEIGHT || (int)t->dtype >= SLATE__N_WDTYPES) continue;
        uint64_t n = 1;
        for (int32_t d = 0; d < t->n_dims; d++) n *= (uint64_t)t->dims[d];
        by_dtype[t->dtype] += t->nbytes;
        n_elems[t->dtype] += n;
    }
    char mix[512]; /* six compressed dtypes fit */
    size_t mix_len = 0;
    mix[0] = '\0';
    for (int dt = 0; dt < SLATE__N_WDTYPES; dt++) {
        if (!slate__wdtype_quantized((slate_dtype)dt) || !by_dtype[dt] || mix_len >= sizeof mix)
            continue;
        int w = snprintf(mix + mix_len, sizeof mix - mix_len, "%s%s %zu = %.2f bits per weight",
                         mix_len ? ", " : "; ", slate_dtype_name((slate_dtype)dt), by_dtype[dt],
                         8.0 * (double)by_dtype[dt] / (double)n_elems[dt]);
        if (w > 0) mix_len += (size_t)w;
    }
    /* The figures of slate_model_plan (one state at the package's context, with the model's
     * keep-all and rollback reach), so the total is what a budget counts and `slate plan`
     * shows: the KV line that counts is the resident bound when sliding-window caches release
     * rows, else the reservation. */
    slate_plan wp;
    slate_error pe;
    if (slate_model_plan(m, NULL, &wp, &pe) != SLATE_OK) {
        put(&o, "memory plan: unavailable (%s)\n", pe.message);
    } else {
        bool bound = wp.kv_bytes != wp.kv_reserved_bytes;
        put(&o, "memory plan (one state at context %d, as slate plan counts it):\n", wp.n_ctx);
        put(&o, "  weights           %12zu bytes (f32 %zu, f16 %zu, bf16 %zu%s)\n",
            wp.weights_bytes, by_dtype[0], by_dtype[1], by_dtype[2], mix);
        put(&o, "  KV per token      %12zu bytes\n", wp.kv_bytes_per_token);
        size_t rows = slate__kv_ctx_rows(wp.n_ctx); /* the context in whole blocks of 16 */
        put(&o, "  KV reserved       %12zu bytes (address space for %zu positions%s, "
            "page-rounded)%s", wp.kv_reserved_bytes, rows,
            rows != (size_t)wp.n_ctx ? ", the context rounded up to 16" : "",
            bound ? "" : "; counted");
        if (!bound && wp.n_window_caches && !wp.kv_rollback_tokens)
            put(&o, ": sliding-window caches whole, every row kept");
        else if (!bound && wp.n_window_caches)
            put(&o, ": sliding-window caches whole, window + %d positions (and a release step) "
                "cover the context", wp.kv_rollback_tokens);
        put(&o, "\n");
        if (bound)
            put(&o, "  KV resident bound %12zu bytes (counted: sliding-window caches keep about "
                "window + %d positions)\n", wp.kv_bytes, wp.kv_rollback_tokens);
        put(&o, "  scratch           %12zu bytes (activations for %d query rows, page-rounded)\n",
            wp.scratch_bytes, wp.max_query);
        put(&o, "  total, one state  %12zu bytes (weights + %s + scratch)\n", wp.total_bytes,
            bound ? "KV resident bound" : "KV reserved");
    }
    if (buf && o.len < cap) {
        *len_out = o.len;
        return SLATE_OK;
    }
    *len_out = o.len + 1; /* the size needed, with the NUL */
    return SLATE_E_BUFFER_TOO_SMALL;
}
