/*
 * planner.c - the memory plan: weights + n_states x (cache + scratch), computed from the
 * compiled program before anything is allocated. It is the one place that does this arithmetic:
 * slate_model_plan / slate_plan_file report it, slate_model_open and slate_state_create compare
 * it against the budget, and src/state/kvmem.c reserves exactly the sizes it computes (row bytes
 * per state tensor, each tensor's block rounded up to a page, scratch rounded up to a page).
 *
 * Also here: the device table (budgets of typical devices, with the share we leave to the OS),
 * and "this machine" (MemAvailable vs the cgroup limit, the smaller wins).
 *
 * Invariant: for every (context, dtype), plan.kv_reserved_bytes equals the reservation a state
 * of that shape makes (tests/unit/test_planner.c checks it against slate_state_get_memory), and
 * plan.kv_bytes is that, except that each cache read only by sliding-window attention counts
 * the bound of what its state keeps resident (slate__kv_window_rows rows per kv head, in pages;
 * tests/unit/test_window.c checks resident memory against it) unless the plan keeps all rows.
 */
#define _POSIX_C_SOURCE 200809L
#include "plan/model.h"
#include "pkg/pkg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PLAN_STATES 4096

bool slate__kv_keep_all_env(void) {
    const char *e = getenv("SLATE_KV_KEEP_ALL");
    return e && *e && strcmp(e, "0") != 0;
}

size_t slate__page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* I8 cache rows are blocks of {f32 scale, group int8 values padded to 4 bytes}, one block per kv
 * head: the scale sits first so a head's block is self-contained and 4-byte aligned. */
size_t slate__kv_row_bytes(slate_dtype dtype, int64_t width, int32_t group) {
    switch (dtype) {
    case SLATE_DTYPE_F32: return (size_t)width * 4;
    case SLATE_DTYPE_F16: return (size_t)width * 2;
    case SLATE_DTYPE_I8:
        if (group <= 0 || width % group) return 0;
        return (size_t)(width / group) * (4 + slate__align_up((size_t)group, 4));
    default: return 0;
    }
}

/* Union-find root of state i (path halving). */
static int32_t uf_root(int32_t *parent, int32_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

/* Per state tensor: the head_dim of the attention op that reads it (the int8 scale group).
 * slot: state tensor index -> state index (as model->state_slot); parent: scratch of n_states.
 * About linear in
 * ops and states: a crafted program of 10^4 attention ops once took hours here (a scan of the
 * states per operand, repeated until nothing changed). */
static void find_groups(const slate__program *p, const int32_t *slot, int32_t *group,
                        int32_t *parent) {
    for (int32_t i = 0; i < p->n_states; i++) {
        group[i] = 0;
        parent[i] = i;
    }
    for (int32_t oi = 0; oi < p->n_ops; oi++) {
        const slate__op *op = &p->ops[oi];
        if (op->kind != SLATE__OP_ATTENTION) continue;
        for (int k = 1; k <= 2; k++) {
            int32_t i = slot[op->in[k]]; /* the compiler checked both are states */
            /* Two attentions reading one cache with different head sizes: no single grouping
             * serves both, so int8 is unsupported for it (-1). */
            if (group[i] == 0) group[i] = op->head_dim;
            else if (group[i] != op->head_dim) group[i] = -1;
        }
        int32_t rk = uf_root(parent, slot[op->in[1]]), rv = uf_root(parent, slot[op->in[2]]);
        if (rk != rv) parent[rk] = rv;
    }
    /* An attention's K and V must share one layout (its kernel takes one row stride; the cache
     * is stored head-major by group, src/state/kvmem.c): where their groups differ, neither
     * is grouped, and that spreads along every chain of caches read together as K and V. So
     * within each set of caches joined that way, one group for all or -1 for all: the root
     * turns -1 when a member differs from it, then every member takes the root's verdict. */
    for (int32_t i = 0; i < p->n_states; i++) {
        int32_t r = uf_root(parent, i);
        if (r != i && group[i] != group[r]) group[r] = -1;
    }
    for (int32_t i = 0; i < p->n_states; i++) group[i] = group[uf_root(parent, i)];
}

/* Per state tensor: the window its rows may be released behind: the largest window of the
 * attention ops reading it when every one of them has one (a query at L reads keys from
 * L - window + 1), else 0 (a full attention reads every row; a cache nobody attends to is
 * kept as it is). */
static void find_windows(const slate__program *p, const int32_t *slot, int32_t *window) {
    for (int32_t i = 0; i < p->n_states; i++) window[i] = 0;
    for (int32_t oi = 0; oi < p->n_ops; oi++) {
        const slate__op *op = &p->ops[oi];
        if (op->kind != SLATE__OP_ATTENTION) continue;
        for (int k = 1; k <= 2; k++) {
            int32_t i = slot[op->in[k]];
            if (op->window <= 0) window[i] = -1; /* read whole: never released */
            else if (window[i] >= 0 && op->window > window[i]) window[i] = op->window;
        }
    }
    for (int32_t i = 0; i < p->n_states; i++)
        if (window[i] < 0) window[i] = 0;
}

slate_status slate__plan_bind_states(slate_model *m, slate_error *err) {
    const slate__program *p = &m->prog;
    m->state_slot = slate__malloc((size_t)(p->n_tensors ? p->n_tensors : 1) * sizeof(int32_t));
    m->state_group = slate__malloc((size_t)(p->n_states ? p->n_states : 1) * sizeof(int32_t));
    m->state_window = slate__malloc((size_t)(p->n_states ? p->n_states : 1) * sizeof(int32_t));
    int32_t *parent = slate__malloc((size_t)(p->n_states ? p->n_states : 1) * sizeof(int32_t));
    if (!m->state_slot || !m->state_group || !m->state_window || !parent) {
        slate__free(parent);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    }
    for (int32_t i = 0; i < p->n_tensors; i++) m->state_slot[i] = -1;
    for (int32_t i = 0; i < p->n_states; i++) m->state_slot[p->states[i]] = i;
    find_groups(p, m->state_slot, m->state_group, parent);
    find_windows(p, m->state_slot, m->state_window);
    slate__free(parent);
    return SLATE_OK;
}

slate_plan_params slate_plan_default_params(void) {
    slate_plan_params p;
    memset(&p, 0, sizeof p);
    return p;
}

/* The dtype of state tensor i under params (the package's unless overridden). */
static slate_dtype state_dtype(const slate__program *p, int32_t i, bool set, slate_dtype dt) {
    return set ? dt : p->tensors[p->states[i]].dtype;
}

static bool kv_dtype_ok(const slate__program *p, const int32_t *group, slate_dtype dt) {
    if (dt == SLATE_DTYPE_F32 || dt == SLATE_DTYPE_F16) return true;
    if (dt != SLATE_DTYPE_I8 || !group) return false;
    for (int32_t i = 0; i < p->n_states; i++)
        if (slate__kv_row_bytes(dt, p->tensors[p->states[i]].width, group[i]) == 0) return false;
    return true;
}

static size_t kv_per_token(const slate__program *p, const int32_t *group, bool set,
                           slate_dtype dt) {
    size_t sum = 0;
    for (int32_t i = 0; i < p->n_states; i++)
        sum += slate__kv_row_bytes(state_dtype(p, i, set, dt), p->tensors[p->states[i]].width,
                                   group ? group[i] : 0);
    return sum;
}

/* Bytes a state reserves for its cache at context n_ctx: each tensor's block of
 * slate__kv_ctx_rows(n_ctx) rows rounded up to a page (blocks are page-aligned so pressure can
 * release each one's tail). Saturates.
 * window (NULL: none) with rollback > 0: a windowed tensor counts instead what it keeps
 * resident at most (src/state/kvmem.c): per kv head region, the pages that can hold
 * slate__kv_window_rows rows at any alignment (+1), plus the page it may share with the
 * previous head's region (+1), which its release never hands back; at most its block. */
static size_t kv_reserved(const slate__program *p, const int32_t *group, const int32_t *window,
                          int32_t rollback, bool set, slate_dtype dt, int32_t n_ctx) {
    size_t page = slate__page_size(), sum = 0;
    for (int32_t i = 0; i < p->n_states; i++) {
        const slate__tensor *t = &p->tensors[p->states[i]];
        int32_t g = group ? group[i] : 0;
        size_t row = slate__kv_row_bytes(state_dtype(p, i, set, dt), t->width, g);
        size_t block;
        if (!slate__mul_size(row, slate__kv_ctx_rows(n_ctx), &block) || block > SIZE_MAX - page)
            return SIZE_MAX;
        block = slate__align_up(block, page);
        if (window && window[i] > 0 && rollback > 0 && row > 0) {
            /* The head split of src/state/kvmem.c slate__kv_create. */
            size_t heads = g > 0 && t->width % g == 0 ? (size_t)(t->width / g) : 1;
            size_t hb = row / heads;
            int64_t rows = slate__kv_window_rows(window[i], rollback,
                                                 slate__kv_release_step(hb, page), p->max_query);
            if (rows < n_ctx) {
                size_t bound = heads * (((size_t)rows * hb + page - 1) / page + 2) * page;
                if (bound < block) block = bound;
            }
        }
        if (!slate__add_size(sum, block, &sum)) return SIZE_MAX;
    }
    return sum;
}

static size_t sat_add(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }
static size_t sat_mul(size_t a, size_t b) {
    size_t r;
    return slate__mul_size(a, b, &r) ? r : SIZE_MAX;
}

typedef struct fit_ctx {
    const slate__program *p;
    const int32_t *group;
    const int32_t *window; /* NULL: every cache planned whole */
    int32_t rollback;
    bool set;
    slate_dtype dt;
    size_t base;    /* weights + extra */
    size_t scratch; /* per state */
    size_t n_states;
} fit_ctx;

static size_t total_at(const fit_ctx *f, int32_t n_ctx) {
    size_t state = sat_add(kv_reserved(f->p, f->group, f->window, f->rollback, f->set, f->dt,
                                       n_ctx), f->scratch);
    return sat_add(f->base, sat_mul(f->n_states, state));
}

/* Largest n_ctx in 1..n_ctx_max with total_at(n_ctx) <= budget (monotonic: bisect). */
static int32_t largest_fit(const fit_ctx *f, size_t budget) {
    if (!budget) return f->p->n_ctx;
    if (total_at(f, 1) > budget) return 0;
    int32_t lo = 1, hi = f->p->n_ctx;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (total_at(f, mid) <= budget) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

slate_status slate__plan(const slate__program *p, const slate__hparams *hp, const int32_t *group,
                         const int32_t *window, bool mapped, const slate_plan_params *params,
                         size_t extra_bytes, slate_plan *plan, slate_error *err) {
    slate_plan_params dp = slate_plan_default_params();
    if (!params) params = &dp;
    if (params->n_ctx < 0 || params->n_ctx > p->n_ctx)
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_ctx %d outside 0..%d (the package's "
                           "context)", params->n_ctx, p->n_ctx);
    if (params->kv_rollback_tokens < 0 || params->kv_rollback_tokens > p->n_ctx)
        return slate__fail(err, SLATE_E_INVALID_ARG, "kv_rollback_tokens %d outside 0..%d (the "
                           "package's context; 0: its max_query %d)", params->kv_rollback_tokens,
                           p->n_ctx, p->max_query);
    if (params->n_states < 0 || params->n_states > MAX_PLAN_STATES)
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_states %d outside 0..%d",
                           params->n_states, MAX_PLAN_STATES);
    if (!params->kv_dtype_set && params->kv_dtype != SLATE_DTYPE_F32)
        return slate__fail(err, SLATE_E_INVALID_ARG, "kv_dtype is %s but kv_dtype_set is false "
                           "(set it to true to choose the cache dtype)",
                           slate_dtype_name(params->kv_dtype));
    if (params->kv_dtype_set) {
        slate_dtype d = params->kv_dtype;
        if (d != SLATE_DTYPE_F32 && d != SLATE_DTYPE_F16 && d != SLATE_DTYPE_I8)
            return slate__fail(err, SLATE_E_INVALID_ARG, "kv_dtype %s (%d): a cache is f32, f16 "
                               "or i8", slate_dtype_name(d), (int)d);
        if (!kv_dtype_ok(p, group, d))
            return slate__fail(err, SLATE_E_UNSUPPORTED, "kv_dtype i8 needs every cache to be "
                               "read by attention ops of one head size; this program's are not");
    }
    memset(plan, 0, sizeof *plan);
    plan->n_ctx_max = p->n_ctx;
    plan->max_query = p->max_query;
    plan->n_ctx = params->n_ctx ? params->n_ctx : p->n_ctx;
    plan->n_states = params->n_states ? params->n_states : 1;
    plan->kv_dtype = params->kv_dtype_set ? params->kv_dtype
                     : p->n_states       ? p->tensors[p->states[0]].dtype
                                         : SLATE_DTYPE_F32;
    plan->weights_mapped = mapped;
    plan->weights_bytes = p->weights_bytes;
    plan->weights_resident_bytes = mapped ? 0 : p->weights_bytes;
    plan->weights_mapped_bytes = mapped ? p->weights_bytes : 0;
    size_t w16 = 0;
    for (int32_t i = 0; i < p->n_tensors; i++) {
        const slate__tensor *t = &p->tensors[i];
        if (t->kind != SLATE__T_WEIGHT) continue;
        w16 += t->dtype == SLATE_DTYPE_F32 && t->n_dims == 2 ? t->nbytes / 2 : t->nbytes;
    }
    plan->weights_bytes_16bit = w16;
    if (hp) {
        plan->n_layers = hp->n_layers;
        plan->n_kv_heads = hp->n_kv_heads;
        plan->head_dim = hp->head_dim;
    }
    plan->kv_bytes_per_token = kv_per_token(p, group, params->kv_dtype_set, params->kv_dtype);
    if (plan->n_layers > 0 && plan->n_kv_heads > 0 && plan->head_dim > 0)
        plan->kv_formula_bytes_per_token =
            2 * (size_t)plan->n_layers * (size_t)plan->n_kv_heads *
            slate__kv_row_bytes(plan->kv_dtype, plan->head_dim, plan->head_dim);
    /* Sliding-window caches count their resident bound unless the plan keeps every row. */
    int32_t rollback = params->kv_rollback_tokens ? params->kv_rollback_tokens : p->max_query;
    for (int32_t i = 0; window && i < p->n_states; i++)
        if (window[i] > 0) plan->n_window_caches++;
    if (!plan->n_window_caches || params->kv_keep_all) window = NULL;
    plan->kv_rollback_tokens = window ? rollback : 0;
    plan->kv_reserved_bytes = kv_reserved(p, group, NULL, 0, params->kv_dtype_set,
                                          params->kv_dtype, plan->n_ctx);
    plan->kv_bytes = kv_reserved(p, group, window, rollback, params->kv_dtype_set,
                                 params->kv_dtype, plan->n_ctx);
    plan->scratch_bytes = slate__align_up(p->scratch_bytes ? p->scratch_bytes : 1,
                                          slate__page_size());
    plan->state_bytes = sat_add(plan->kv_bytes, plan->scratch_bytes);
    plan->total_bytes = sat_add(p->weights_bytes, sat_mul((size_t)plan->n_states,
                                                          plan->state_bytes));
    plan->budget_bytes = params->budget_bytes;
    plan->fits = !params->budget_bytes ||
                 sat_add(plan->total_bytes, extra_bytes) <= params->budget_bytes;
    fit_ctx f = {p, group, window, rollback, params->kv_dtype_set, params->kv_dtype,
                 sat_add(p->weights_bytes, extra_bytes), plan->scratch_bytes,
                 (size_t)plan->n_states};
    plan->n_ctx_fit = largest_fit(&f, params->budget_bytes);
    f.set = true;
    f.dt = SLATE_DTYPE_F32;
    plan->n_ctx_fit_f32 = largest_fit(&f, params->budget_bytes);
    f.dt = SLATE_DTYPE_F16;
    plan->n_ctx_fit_f16 = largest_fit(&f, params->budget_bytes);
    f.dt = SLATE_DTYPE_I8;
    plan->n_ctx_fit_i8 = kv_dtype_ok(p, group, SLATE_DTYPE_I8)
                             ? largest_fit(&f, params->budget_bytes) : 0;
    f.set = params->kv_dtype_set;
    f.dt = params->kv_dtype;
    f.base = sat_add(w16, extra_bytes);
    plan->n_ctx_fit_16bit = largest_fit(&f, params->budget_bytes);
    return SLATE_OK;
}

slate_status slate__plan_budget_fail(const slate_plan *pl, const char *what, size_t extra_bytes,
                                     int32_t n_live, slate_error *err) {
    char fit[160];
    if (pl->n_ctx_fit > 0)
        snprintf(fit, sizeof fit, "the largest context that fits is %d", pl->n_ctx_fit);
    else
        snprintf(fit, sizeof fit, "not even a context of 1 fits");
    if (strcmp(what, "model") == 0)
        return slate__fail(err, SLATE_E_BUDGET, "model needs %zu bytes (weights %zu + KV %zu at "
                           "context %d in %s + scratch %zu) but the budget is %zu; %s",
                           pl->total_bytes, pl->weights_bytes, pl->kv_bytes, pl->n_ctx,
                           slate_dtype_name(pl->kv_dtype), pl->scratch_bytes, pl->budget_bytes,
                           fit);
    return slate__fail(err, SLATE_E_BUDGET, "state needs %zu bytes (KV %zu at context %d in %s + "
                       "scratch %zu); with the weights (%zu) and %d live state(s) (%zu) the total "
                       "%zu exceeds the budget %zu; %s", pl->state_bytes, pl->kv_bytes, pl->n_ctx,
                       slate_dtype_name(pl->kv_dtype), pl->scratch_bytes, pl->weights_bytes,
                       n_live, extra_bytes, sat_add(pl->total_bytes, extra_bytes),
                       pl->budget_bytes, fit);
}

slate_status slate_model_plan(const slate_model *m, const slate_plan_params *params,
                              slate_plan *plan, slate_error *err) {
    if (!m || !plan)
        return slate__fail(err, SLATE_E_INVALID_ARG, "model and plan must not be NULL");
    slate_plan_params q = params ? *params : slate_plan_default_params();
    q.kv_keep_all = q.kv_keep_all || m->kv_keep_all;
    if (!q.kv_rollback_tokens) q.kv_rollback_tokens = m->kv_rollback_tokens;
    return slate__plan(&m->prog, &m->hp, m->state_group, m->state_window, m->weights_mapped, &q, 0,
                       plan, err);
}

static int32_t hp_int(const cJSON *hp, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(hp, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e9 ? (int32_t)v->valuedouble
                                                                             : 0;
}

void slate__plan_read_hparams(const cJSON *meta, slate__hparams *hp) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(meta, "hparams");
    hp->n_layers = hp_int(h, "n_layers");
    hp->n_kv_heads = hp_int(h, "n_kv_heads");
    hp->head_dim = hp_int(h, "head_dim");
}

slate_status slate_plan_file(const char *path, const slate_plan_params *params, slate_plan *plan,
                             slate_error *err) {
    if (!path || !plan)
        return slate__fail(err, SLATE_E_INVALID_ARG, "path and plan must not be NULL");
    slate__pkg pkg;
    slate_status s = slate__pkg_open(path, &pkg, err);
    if (s) return s;
    slate__program prog;
    s = slate__program_compile(pkg.json, pkg.data_size, &prog, err);
    if (s) {
        slate__pkg_close(&pkg);
        return s;
    }
    slate__hparams hp;
    slate__plan_read_hparams(pkg.json, &hp);
    size_t ns = (size_t)(prog.n_states ? prog.n_states : 1);
    int32_t *group = slate__malloc(ns * sizeof *group), *parent = slate__malloc(ns * sizeof *parent);
    int32_t *window = slate__malloc(ns * sizeof *window);
    int32_t *slot = slate__malloc((size_t)(prog.n_tensors ? prog.n_tensors : 1) * sizeof *slot);
    if (!group || !parent || !window || !slot) {
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
    } else {
        for (int32_t i = 0; i < prog.n_states; i++) slot[prog.states[i]] = i;
        find_groups(&prog, slot, group, parent);
        find_windows(&prog, slot, window);
        /* As slate_model_open will: SLATE_KV_KEEP_ALL plans every cache whole. */
        slate_plan_params q = params ? *params : slate_plan_default_params();
        q.kv_keep_all = q.kv_keep_all || slate__kv_keep_all_env();
        s = slate__plan(&prog, &hp, group, window, q.use_mmap, &q, 0, plan, err);
    }
    slate__free(window);
    slate__free(group);
    slate__free(parent);
    slate__free(slot);
    slate__program_free(&prog);
    slate__pkg_close(&pkg);
    return s;
}

/* ---- devices ----------------------------------------------------------------------------- */

#define GIB ((size_t)1 << 30)
#define MIB ((size_t)1 << 20)

/* Reserves are our assumptions, written down here and in docs/design.md, not measurements:
 * - phones: Android and iOS keep the system, the UI and recently used apps resident and their
 *   low-memory killers act long before RAM is full, so a foreground app that wants to survive
 *   should plan for about 55-60% of RAM: we leave 2.5 GiB of 6 and 3.25 GiB of 8 to the OS.
 * - Raspberry Pi 5 running headless Raspberry Pi OS Lite: the OS needs a few hundred MiB; we
 *   leave 0.75 GiB (OS, page cache for the model file, ssh).
 * - laptops: a desktop session with a browser easily holds 3-4 GiB; we leave 3.5 GiB of 8 and
 *   5 GiB of 16. */
static const slate_device g_devices[] = {
    {"phone-6gb", "6 GiB phone; 2.5 GiB left to the OS, UI and background apps (low-memory "
                  "killers act well before RAM is full)", 6 * GIB, 5 * GIB / 2, 0},
    {"phone-8gb", "8 GiB phone; 3.25 GiB left to the OS, UI and background apps", 8 * GIB,
     13 * GIB / 4, 0},
    {"rpi5-4gb", "Raspberry Pi 5, 4 GiB, headless OS; 0.75 GiB left to the OS and page cache",
     4 * GIB, 3 * GIB / 4, 0},
    {"rpi5-8gb", "Raspberry Pi 5, 8 GiB, headless OS; 0.75 GiB left to the OS and page cache",
     8 * GIB, 3 * GIB / 4, 0},
    {"laptop-8gb", "8 GiB laptop; 3.5 GiB left to the desktop and a browser", 8 * GIB,
     7 * GIB / 2, 0},
    {"laptop-16gb", "16 GiB laptop; 5 GiB left to the desktop and a browser", 16 * GIB,
     5 * GIB, 0},
};
#define N_DEVICES ((int32_t)(sizeof g_devices / sizeof g_devices[0]))

slate_status slate_device_get(int32_t index, slate_device *out) {
    if (!out || index < 0 || index >= N_DEVICES) return SLATE_E_INVALID_ARG;
    *out = g_devices[index];
    out->budget_bytes = out->ram_bytes - out->reserved_bytes;
    return SLATE_OK;
}

slate_status slate_device_find(const char *name, slate_device *out, slate_error *err) {
    if (!name || !out) return slate__fail(err, SLATE_E_INVALID_ARG, "name and out must not be NULL");
    if (strcmp(name, "this-machine") == 0 || strcmp(name, "this") == 0)
        return slate_device_this_machine(out, err);
    for (int32_t i = 0; i < N_DEVICES; i++)
        if (strcmp(name, g_devices[i].name) == 0) return slate_device_get(i, out);
    char list[256] = "";
    for (int32_t i = 0; i < N_DEVICES; i++) {
        strncat(list, g_devices[i].name, sizeof list - strlen(list) - 1);
        strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    return slate__fail(err, SLATE_E_INVALID_ARG, "unknown device '%s' (known: %sthis-machine)",
                       name, list);
}

/* "Key:   12345 kB" in /proc/meminfo -> bytes; false if absent. */
static bool meminfo_get(const char *text, const char *key, size_t *out) {
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, key, kl) != 0 || l[kl] != ':') continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(l + kl + 1, &end, 10);
        if (errno || end == l + kl + 1) return false;
        while (*end == ' ') end++;
        *out = strncmp(end, "kB", 2) == 0 ? (size_t)v * 1024 : (size_t)v;
        return true;
    }
    return false;
}

slate_status slate__device_from_text(const char *meminfo, const char *cg_limit, slate_device *out,
                                     slate_error *err) {
    size_t total = 0, avail = 0;
    if (!meminfo || !meminfo_get(meminfo, "MemTotal", &total) || total == 0)
        return slate__fail(err, SLATE_E_IO, "/proc/meminfo has no MemTotal line");
    if (!meminfo_get(meminfo, "MemAvailable", &avail) && !meminfo_get(meminfo, "MemFree", &avail))
        return slate__fail(err, SLATE_E_IO, "/proc/meminfo has neither MemAvailable nor MemFree");
    size_t budget = avail < total ? avail : total;
    const char *why = "MemAvailable";
    if (cg_limit) {
        while (*cg_limit == ' ') cg_limit++;
        char *end;
        errno = 0;
        unsigned long long lim = strtoull(cg_limit, &end, 10);
        /* v2 says "max"; v1 says a page-rounded 2^63 when unlimited. */
        if (!errno && end != cg_limit && lim < ((unsigned long long)1 << 62) && lim < budget) {
            budget = (size_t)lim;
            why = "the cgroup memory limit";
        }
    }
    memset(out, 0, sizeof *out);
    out->name = "this-machine";
    out->note = strcmp(why, "MemAvailable") == 0
                    ? "this machine: MemAvailable from /proc/meminfo (below any cgroup limit)"
                    : "this machine: the cgroup memory limit (below MemAvailable)";
    out->ram_bytes = total;
    out->budget_bytes = budget;
    out->reserved_bytes = total > budget ? total - budget : 0;
    return SLATE_OK;
}

/* Reads a small text file into buf; false when missing. */
static bool read_small(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0;
}

/* This process's cgroup memory limit file contents, v2 first, then v1; false when none. */
static bool cgroup_limit(char *buf, size_t cap) {
    char self[4096], path[4400];
    if (read_small("/proc/self/cgroup", self, sizeof self)) {
        for (char *l = self; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
            char *nl = strchr(l, '\n');
            size_t len = nl ? (size_t)(nl - l) : strlen(l);
            char line[1024];
            if (len >= sizeof line) continue;
            memcpy(line, l, len);
            line[len] = '\0';
            char *p2 = strstr(line, "::");
            if (strncmp(line, "0::", 3) == 0 && p2) {
                snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", p2 + 2);
                if (read_small(path, buf, cap)) return true;
            }
            char *mem = strstr(line, ":memory:");
            if (mem) {
                snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes",
                         mem + 8);
                if (read_small(path, buf, cap)) return true;
            }
        }
    }
    /* Inside a container the namespace root is the process's own cgroup. */
    return read_small("/sys/fs/cgroup/memory.max", buf, cap) ||
           read_small("/sys/fs/cgroup/memory/memory.limit_in_bytes", buf, cap);
}

slate_status slate_device_this_machine(slate_device *out, slate_error *err) {
    if (!out) return slate__fail(err, SLATE_E_INVALID_ARG, "out must not be NULL");
    char meminfo[8192], lim[64];
    if (!read_small("/proc/meminfo", meminfo, sizeof meminfo))
        return slate__fail(err, SLATE_E_IO, "cannot read /proc/meminfo");
    return slate__device_from_text(meminfo, cgroup_limit(lim, sizeof lim) ? lim : NULL, out, err);
}
