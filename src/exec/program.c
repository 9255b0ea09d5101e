/*
 * program.c - compiles the META object of a package into a validated slate__program.
 *
 * META JSON (docs/format.md has the full schema):
 *   "shapes":      {"n_ctx": C, "max_query": Q}
 *   "hparams":     {"n_vocab": V, ...}            (informational except n_vocab)
 *   "inputs":      [{"name": "tokens", "dtype": "i32"}]
 *   "states":      [{"name", "dtype": "f32"|"f16", "width"}]          -> [C][width]
 *   "activations": [{"name", "width", "rows": "q"|"out"}]             -> [rows][width] f32
 *   "tensors":     [{"name", "dtype", "shape": [..], "offset", "size"}] (weights in DATA;
 *                  q4 adds "block" (16/32/64/128) and optionally "asym": true, q8_0 may say
 *                  "block": 32; pal has "bits" (2/3/4/6/8) and "group" (1..4096); layouts
 *                  in kernels/quant.h)
 *   "program":     [{"op", "in": [names], "out": name, attrs...}]
 * Every name is unique across all four kinds. Each op is checked against its signature (kinds
 * and widths of its operands, attribute ranges) so that the interpreter needs no checks.
 */
#include "program.h"
#include "pkg/pkg.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS (1 << 20)
#define MAX_OPS (1 << 20)
#define MAX_WIDTH ((int64_t)1 << 24)
/* Most bytes a state's scratch (every activation at max_query rows, plus the quantized-x area)
 * or its caches (every state at n_ctx rows, in the widest cache dtype) may need: 2^48 bytes
 * (256 TiB) is past any address space slate runs in, and keeps the sums computed from these
 * sizes later (page rounding, cache + scratch, offsets into the arenas) far from overflow.
 * Each activation may be 2^50 bytes and there may be 2^20 of them, so without a bound their
 * sum wrapped past 2^64: a small scratch, and offsets far outside it. */
#define MAX_ARENA_BYTES ((uint64_t)1 << 48)
/* Bytes per element of the widest cache a state may choose: i8 with one-element scale groups
 * (a 4-byte scale and 4 bytes of padded values; src/plan/planner.c, slate__kv_row_bytes). */
#define KV_MAX_ELEM_BYTES 8

static const char *const g_op_names[SLATE__OP_COUNT] = {
    "embedding", "rms_norm", "matmul", "rope",     "kv_write",  "attention",
    "add",       "mul",      "silu",   "swiglu",   "last_rows", "geglu",
    "scale",     "softcap",
};

/* Attention with a score cap is written under its own op name: readers older than the attribute
 * check below ignore an attribute they do not know and would run the layer uncapped, but refuse
 * an op name they do not know. It parses to SLATE__OP_ATTENTION with softcap > 0
 * (planner, state and exec treat both alike). */
static const char *const ATTENTION_SOFTCAP = "attention_softcap";

/* The attributes each op may carry besides "op", "in" and "out". Anything else is refused: an
 * attribute this reader does not know would be one that changes what the op computes (as
 * rope's mscale did when it was added), and ignoring it would run another model without a word. */
static const char *const g_op_attrs[SLATE__OP_COUNT][6] = {
    [SLATE__OP_RMS_NORM] = {"eps", "group"},
    [SLATE__OP_ROPE] = {"n_heads", "head_dim", "rope_dim", "mode", "mscale"},
    [SLATE__OP_ATTENTION] = {"n_heads", "n_kv_heads", "head_dim", "scale", "window"},
    [SLATE__OP_SCALE] = {"factor"},
    [SLATE__OP_SOFTCAP] = {"cap"},
};

/* The first key of op object j that is neither op/in/out nor an attribute of kind k, or NULL.
 * "softcap" belongs to the op name "attention_softcap" only (kind attention). */
static const char *unknown_attr(const cJSON *j, slate__opkind k, const char *opname) {
    const cJSON *x;
    cJSON_ArrayForEach(x, j) {
        const char *key = x->string;
        if (!key) return "(unnamed)";
        if (strcmp(key, "op") == 0 || strcmp(key, "in") == 0 || strcmp(key, "out") == 0) continue;
        if (strcmp(key, "softcap") == 0 && strcmp(opname, ATTENTION_SOFTCAP) == 0) continue;
        bool known = false;
        for (int i = 0; i < 6 && g_op_attrs[k][i] && !known; i++)
            known = strcmp(key, g_op_attrs[k][i]) == 0;
        if (!known) return key;
    }
    return NULL;
}


const char *slate__op_name(slate__opkind k) {
    return (unsigned)k < SLATE__OP_COUNT ? g_op_names[k] : "?";
}

int32_t slate__program_find(const slate__program *prog, const char *name) {
    for (int32_t i = 0; i < prog->n_tensors; i++)
        if (strcmp(prog->tensors[i].name, name) == 0) return i;
    return -1;
}

void slate__program_free(slate__program *prog) {
    if (!prog) return;
    for (int32_t i = 0; i < prog->n_tensors; i++) slate__free(prog->tensors[i].name);
    slate__free(prog->tensors);
    slate__free(prog->ops);
    slate__free(prog->states);
    memset(prog, 0, sizeof *prog);
}

/* Reads an integer field in [lo, hi]. */
static slate_status get_int(const cJSON *obj, const char *key, int64_t lo, int64_t hi,
                            int64_t *out, const char *where, slate_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v))
        return slate__fail(err, SLATE_E_FORMAT, "%s: field '%s' is missing or not a number",
                           where, key);
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))
        return slate__fail(err, SLATE_E_FORMAT, "%s: field '%s' is %g, expected an integer in "
                           "[%lld, %lld]", where, key, d, (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return SLATE_OK;
}

static slate_status get_str(const cJSON *obj, const char *key, const char **out,
                            const char *where, slate_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return slate__fail(err, SLATE_E_FORMAT, "%s: field '%s' is missing or not a non-empty "
                           "string", where, key);
    *out = v->valuestring;
    return SLATE_OK;
}

/* Names are checked for duplicates once all are in (check_names): a scan per name made opening
 * a package with 10^5 tensors take minutes. */
static slate_status add_tensor(slate__program *p, int32_t cap, const char *name,
                               slate__tkind kind, slate_error *err) {
    if (p->n_tensors >= cap) return SLATE__INTERNAL(err, "tensor table overflow");
    slate__tensor *t = &p->tensors[p->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = slate__strdup(name);
    if (!t->name) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    t->kind = kind;
    p->n_tensors++;
    return SLATE_OK;
}

/* A tensor name and its index, sorted by name for duplicate checks and look-ups. */
typedef struct name_ref {
    const char *name;
    int32_t index;
} name_ref;

static int cmp_name_ref(const void *a, const void *b) {
    const name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Sorts every tensor name into *out (n_tensors entries, slate__free it) and refuses a name
 * declared twice. O(n log n) even for a crafted table. */
static slate_status check_names(const slate__program *p, name_ref **out, slate_error *err) {
    *out = NULL;
    name_ref *v = slate__malloc((size_t)(p->n_tensors ? p->n_tensors : 1) * sizeof *v);
    if (!v) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    for (int32_t i = 0; i < p->n_tensors; i++) v[i] = (name_ref){p->tensors[i].name, i};
    qsort(v, (size_t)p->n_tensors, sizeof *v, cmp_name_ref);
    for (int32_t i = 1; i < p->n_tensors; i++)
        if (strcmp(v[i - 1].name, v[i].name) == 0) {
            slate_status s = slate__fail(err, SLATE_E_FORMAT, "tensor name '%s' is declared "
                                         "twice", v[i].name);
            slate__free(v);
            return s;
        }
    *out = v;
    return SLATE_OK;
}

static int32_t find_sorted(const name_ref *v, int32_t n, const char *name) {
    int32_t lo = 0, hi = n; /* [lo, hi) */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid].name, name);
        if (c == 0) return v[mid].index;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* pal: "bits" (2, 3, 4, 6 or 8) and "group" (output rows per table, 1..4096), both required,
 * packed into *block (kernels/quant.h); "block" and "asym" are refused, as are "bits" and
 * "group" on any other dtype. */
static slate_status get_pal_layout(const cJSON *e, const char *name, slate_dtype d,
                                   int32_t *block, slate_error *err) {
    if (d != SLATE_DTYPE_PAL)
        return slate__fail(err, SLATE_E_UNSUPPORTED, "tensor '%s': \"bits\" and \"group\" apply "
                           "only to pal, not %s", name, slate_dtype_name(d));
    static const char *const bad[] = {"block", "asym"};
    for (int i = 0; i < 2; i++)
        if (cJSON_GetObjectItemCaseSensitive(e, bad[i]))
            return slate__fail(err, SLATE_E_UNSUPPORTED, "tensor '%s': \"%s\" is not supported "
                               "for pal (it has \"bits\" and \"group\")", name, bad[i]);
    static const char *const keys[] = {"bits", "group"};
    int32_t v[2];
    for (int i = 0; i < 2; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(e, keys[i]);
        if (!x)
            return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': pal needs \"%s\"", name,
                               keys[i]);
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) ||
            !(x->valuedouble >= -1e6 && x->valuedouble <= 1e6))
            return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': \"%s\" must be an integer",
                               name, keys[i]);
        v[i] = (int32_t)x->valuedouble;
    }
    if (v[0] != 2 && v[0] != 3 && v[0] != 4 && v[0] != 6 && v[0] != 8)
        return slate__fail(err, SLATE_E_UNSUPPORTED, "tensor '%s': pal bits %d is not supported "
                           "(2, 3, 4, 6 or 8)", name, (int)v[0]);
    if (v[1] < 1 || v[1] > SLATE__PAL_GROUP_MAX)
        return slate__fail(err, SLATE_E_UNSUPPORTED, "tensor '%s': pal group %d is not supported "
                           "(1..%d rows)", name, (int)v[1], SLATE__PAL_GROUP_MAX);
    *block = slate__pal_layout(v[0], v[1]);
    return SLATE_OK;
}

/* The layout attributes of a weight entry: "block" (q4: 16, 32, 64 or 128, required; q8_0,
 * iq4_nl: optional, 32; q2_k..q6_k, iq4_xs: optional, 256) and "asym" (q4 only, optional boolean). Other dtypes must not carry them: a
 * package that needs a feature this reader lacks is refused, never read as something else. */
static slate_status get_layout(const cJSON *e, const char *name, slate_dtype d, int32_t *block,
                               bool *asym, slate_error *err) {
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "block");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "asym");
    *block = d == SLATE_DTYPE_Q8_0 || d == SLATE_DTYPE_IQ4_NL ? 32
             : slate__wdtype_superblock(d)                    ? 256
                                                              : 0;
    *asym = false;
    if (d == SLATE_DTYPE_PAL || cJSON_GetObjectItemCaseSensitive(e, "bits") ||
        cJSON_GetObjectItemCaseSensitive(e, "group"))
        return get_pal_layout(e, name, d, block, err);
    if (b) {
        if (!cJSON_IsNumber(b) || b->valuedouble != floor(b->valuedouble) ||
            !(b->valuedouble >= 0 && b->valuedouble <= 1e6))
            return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': \"block\" must be an integer",
                               name);
        int32_t v = (int32_t)b->valuedouble;
        bool ok = d == SLATE_DTYPE_Q4 ? v == 16 || v == 32 || v == 64 || v == 128
                  : d == SLATE_DTYPE_Q8_0 || d == SLATE_DTYPE_IQ4_NL ? v == 32
                  : slate__wdtype_superblock(d) ? v == 256
                                                : false;
        if (!ok)
            return slate__fail(err, SLATE_E_UNSUPPORTED, "tensor '%s': block %d is not supported "
                               "for %s (q4: 16, 32, 64, 128; q8_0, iq4_nl: 32; q2_k..q6_k, "
                               "iq4_xs: 256; others: none)", name, v, slate_dtype_name(d));
        *block = v;
    } else if (d == SLATE_DTYPE_Q4) {
        return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': q4 needs \"block\"", name);
    }
    if (a) {
        if (!cJSON_IsBool(a))
            return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': \"asym\" must be true or false",
                               name);
        if (cJSON_IsTrue(a) && d != SLATE_DTYPE_Q4)
            return slate__fail(err, SLATE_E_UNSUPPORTED, "tensor '%s': asymmetric %s is not "
                               "supported (only q4)", name, slate_dtype_name(d));
        *asym = cJSON_IsTrue(a);
    }
    return SLATE_OK;
}

/* A weight's offset in DATA and its index, sorted by offset for the overlap check. */
typedef struct off_ref {
    uint64_t offset;
    int32_t index;
} off_ref;

static int cmp_off_ref(const void *a, const void *b) {
    const off_ref *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static slate_status load_tensors(const cJSON *meta, uint64_t data_size, slate__program *p,
                                 slate_error *err) {
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(meta, "inputs");
    const cJSON *states = cJSON_GetObjectItemCaseSensitive(meta, "states");
    const cJSON *acts = cJSON_GetObjectItemCaseSensitive(meta, "activations");
    const cJSON *weights = cJSON_GetObjectItemCaseSensitive(meta, "tensors");
    if (!cJSON_IsArray(inputs) || !cJSON_IsArray(states) || !cJSON_IsArray(acts) ||
        !cJSON_IsArray(weights))
        return slate__fail(err, SLATE_E_FORMAT, "META needs arrays 'inputs', 'states', "
                           "'activations' and 'tensors'");
    int64_t total = (int64_t)cJSON_GetArraySize(inputs) + cJSON_GetArraySize(states) +
                    cJSON_GetArraySize(acts) + cJSON_GetArraySize(weights);
    if (total > MAX_TENSORS)
        return slate__fail(err, SLATE_E_FORMAT, "%lld tensors declared, more than the %d "
                           "allowed", (long long)total, MAX_TENSORS);
    int32_t cap = (int32_t)total;
    p->tensors = slate__calloc((size_t)(cap ? cap : 1), sizeof *p->tensors);
    p->states = slate__calloc((size_t)(cap ? cap : 1), sizeof *p->states);
    if (!p->tensors || !p->states) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    slate_status s;
    char where[128];
    const cJSON *e;
    p->tokens_input = -1;
    cJSON_ArrayForEach(e, inputs) {
        const char *name = NULL, *dt = NULL;
        snprintf(where, sizeof where, "input %d", p->n_tensors);
        if ((s = get_str(e, "name", &name, where, err)) || (s = get_str(e, "dtype", &dt, where, err)))
            return s;
        if (strcmp(name, "tokens") != 0 || strcmp(dt, "i32") != 0)
            return slate__fail(err, SLATE_E_UNSUPPORTED, "input '%s' (%s): the only input this "
                               "slate knows is 'tokens' (i32)", name, dt);
        if ((s = add_tensor(p, cap, name, SLATE__T_INPUT, err))) return s;
        p->tensors[p->n_tensors - 1].dtype = SLATE_DTYPE_I32;
        p->tokens_input = p->n_tensors - 1;
    }
    if (p->tokens_input < 0) return slate__fail(err, SLATE_E_FORMAT, "input 'tokens' is missing");
    uint64_t kv_off = 0, kv_elems = 0;
    cJSON_ArrayForEach(e, states) {
        const char *name = NULL, *dt = NULL;
        int64_t width = 0;
        snprintf(where, sizeof where, "state %d", p->n_states);
        if ((s = get_str(e, "name", &name, where, err)) || (s = get_str(e, "dtype", &dt, where, err)) ||
            (s = get_int(e, "width", 1, MAX_WIDTH, &width, name, err)))
            return s;
        slate_dtype d;
        if (!slate__dtype_parse(dt, &d) || (d != SLATE_DTYPE_F32 && d != SLATE_DTYPE_F16))
            return slate__fail(err, SLATE_E_UNSUPPORTED, "state '%s': dtype '%s' not supported "
                               "for a cache (f32, f16)", name, dt);
        if ((s = add_tensor(p, cap, name, SLATE__T_STATE, err))) return s;
        slate__tensor *t = &p->tensors[p->n_tensors - 1];
        t->dtype = d;
        t->width = width;
        t->n_dims = 2;
        t->dims[0] = p->n_ctx;
        t->dims[1] = width;
        t->offset = kv_off; /* per-position offset; the state scales it by n_ctx */
        kv_off += (uint64_t)width * slate__dtype_size(d);
        kv_elems += (uint64_t)width; /* at most 2^20 x 2^24 */
        p->states[p->n_states++] = p->n_tensors - 1;
    }
    if (kv_elems * KV_MAX_ELEM_BYTES > MAX_ARENA_BYTES / (uint64_t)p->n_ctx)
        return slate__fail(err, SLATE_E_FORMAT, "states: %d caches of %llu elements per position "
                           "in all need up to %llu bytes per position, more than %llu bytes at "
                           "n_ctx %d (the most a state may hold)", p->n_states,
                           (unsigned long long)kv_elems,
                           (unsigned long long)(kv_elems * KV_MAX_ELEM_BYTES),
                           (unsigned long long)MAX_ARENA_BYTES, p->n_ctx);
    p->kv_bytes_per_token = (size_t)kv_off;
    uint64_t scratch = 0;
    p->logits = -1;
    cJSON_ArrayForEach(e, acts) {
        const char *name = NULL, *rows = "q";
        int64_t width = 0;
        snprintf(where, sizeof where, "activation %d", p->n_tensors);
        if ((s = get_str(e, "name", &name, where, err)) ||
            (s = get_int(e, "width", 1, MAX_WIDTH, &width, name, err)))
            return s;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "rows");
        if (r && (!cJSON_IsString(r) || (strcmp(r->valuestring, "q") && strcmp(r->valuestring, "out"))))
            return slate__fail(err, SLATE_E_FORMAT, "activation '%s': rows must be \"q\" or "
                               "\"out\"", name);
        if (r) rows = r->valuestring;
        if ((s = add_tensor(p, cap, name, SLATE__T_ACT, err))) return s;
        slate__tensor *t = &p->tensors[p->n_tensors - 1];
        t->dtype = SLATE_DTYPE_F32;
        t->width = width;
        t->out_rows = strcmp(rows, "out") == 0;
        t->n_dims = 2;
        t->dims[0] = p->max_query;
        t->dims[1] = width;
        uint64_t bytes = slate__align_up((uint64_t)p->max_query * (uint64_t)width * 4, 64);
        if (bytes > MAX_ARENA_BYTES - scratch) /* each term is at most 2^50: no overflow */
            return slate__fail(err, SLATE_E_FORMAT, "activation '%s': %d rows x %lld f32 need "
                               "%llu bytes after the %llu of the activations before it, more "
                               "than the %llu bytes a state's scratch may hold", name,
                               p->max_query, (long long)width, (unsigned long long)bytes,
                               (unsigned long long)scratch,
                               (unsigned long long)MAX_ARENA_BYTES);
        t->offset = scratch;
        scratch += bytes;
        if (strcmp(name, "logits") == 0) p->logits = p->n_tensors - 1;
    }
    p->scratch_bytes = (size_t)scratch;
    if (p->logits < 0 || !p->tensors[p->logits].out_rows)
        return slate__fail(err, SLATE_E_FORMAT, "activation 'logits' (rows \"out\") is missing");
    if (p->tensors[p->logits].width != p->n_vocab)
        return slate__fail(err, SLATE_E_FORMAT, "'logits' width %lld differs from n_vocab %d",
                           (long long)p->tensors[p->logits].width, p->n_vocab);
    uint64_t wbytes = 0;
    cJSON_ArrayForEach(e, weights) {
        const char *name = NULL, *dt = NULL;
        int64_t off, size;
        snprintf(where, sizeof where, "tensor %d", p->n_tensors);
        if ((s = get_str(e, "name", &name, where, err)) || (s = get_str(e, "dtype", &dt, name, err)) ||
            (s = get_int(e, "offset", 0, INT64_MAX / 2, &off, name, err)) ||
            (s = get_int(e, "size", 0, INT64_MAX / 2, &size, name, err)))
            return s;
        slate_dtype d;
        if (!slate__dtype_parse(dt, &d) || !slate__wdtype_valid(d))
            return slate__fail(err, SLATE_E_UNSUPPORTED, "tensor '%s': unknown weight dtype '%s'",
                               name, dt);
        int32_t block = 0;
        bool asym = false;
        if ((s = get_layout(e, name, d, &block, &asym, err))) return s;
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
        int n = cJSON_GetArraySize(shape);
        if (!cJSON_IsArray(shape) || n < 1 || n > 4)
            return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': shape must be an array of 1..4 "
                               "dimensions", name);
        if ((s = add_tensor(p, cap, name, SLATE__T_WEIGHT, err))) return s;
        slate__tensor *t = &p->tensors[p->n_tensors - 1];
        t->dtype = d;
        t->n_dims = n;
        uint64_t count = 1;
        for (int i = 0; i < n; i++) {
            const cJSON *dv = cJSON_GetArrayItem(shape, i);
            if (!cJSON_IsNumber(dv) || !(dv->valuedouble >= 1 && dv->valuedouble <= 1e12) ||
                dv->valuedouble != floor(dv->valuedouble))
                return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': dimension %d is not an "
                                   "integer in [1, 1e12]", name, i);
            t->dims[i] = (int64_t)dv->valuedouble;
            if ((uint64_t)t->dims[i] > UINT64_MAX / count)
                return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': element count overflows",
                                   name);
            count *= (uint64_t)t->dims[i];
        }
        /* Sizes: the element size for f32/f16/bf16; for the quantized formats the layout of
         * kernels/quant.h (2-D only, rows of whole blocks). Both must match exactly. */
        uint64_t need;
        if (slate__wdtype_quantized(d)) {
            char why[160];
            if (n != 2)
                return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': %s needs 2 dimensions, "
                                   "found %d", name, dt, n);
            if (!slate__wlayout_check(d, block, asym, t->dims[1], why, sizeof why))
                return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': %s", name, why);
            need = slate__wmat_bytes(d, block, asym, t->dims[0], t->dims[1]);
            if (need == 0)
                return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': size overflows", name);
        } else {
            need = count * slate__dtype_size(d);
            if (need / slate__dtype_size(d) != count)
                return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': size overflows", name);
        }
        if ((uint64_t)size != need)
            return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': size %lld bytes does not match "
                               "its shape and dtype (%llu bytes)", name, (long long)size,
                               (unsigned long long)need);
        t->block = block;
        t->asym = asym;
        if (off % 64 != 0)
            return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': offset %lld is not a multiple "
                               "of 64", name, (long long)off);
        if ((uint64_t)off > data_size || (uint64_t)size > data_size - (uint64_t)off)
            return slate__fail(err, SLATE_E_FORMAT, "tensor '%s': needs %lld bytes at offset %lld "
                               "of DATA, which has %llu (truncated?)", name, (long long)size,
                               (long long)off, (unsigned long long)data_size);
        t->offset = (uint64_t)off;
        t->nbytes = (uint64_t)size;
        t->width = t->dims[n - 1];
        wbytes += (uint64_t)size;
    }
    p->weights_bytes = (size_t)wbytes;
    /* Overlapping weights would let one tensor alias another: refuse. Sorted by offset, any
     * overlap shows between a tensor and the one reaching furthest before it (a window of
     * neighbours in declaration order missed tensors declared far apart). */
    int32_t first_w = p->n_tensors - cJSON_GetArraySize(weights), n_w = p->n_tensors - first_w;
    off_ref *by_off = slate__malloc((size_t)(n_w ? n_w : 1) * sizeof *by_off);
    if (!by_off) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    int32_t n_nz = 0; /* empty tensors overlap nothing */
    for (int32_t i = first_w; i < p->n_tensors; i++)
        if (p->tensors[i].nbytes) by_off[n_nz++] = (off_ref){p->tensors[i].offset, i};
    qsort(by_off, (size_t)n_nz, sizeof *by_off, cmp_off_ref);
    int32_t reach = -1; /* the tensor ending furthest among those before */
    for (int32_t k = 0; k < n_nz; k++) {
        const slate__tensor *b = &p->tensors[by_off[k].index];
        if (reach >= 0) {
            const slate__tensor *a = &p->tensors[reach];
            if (b->offset < a->offset + a->nbytes) {
                slate_status st = slate__fail(err, SLATE_E_FORMAT, "tensors '%s' and '%s' "
                                              "overlap in DATA", a->name, b->name);
                slate__free(by_off);
                return st;
            }
        }
        reach = by_off[k].index; /* no overlap: b ends after every tensor before it */
    }
    slate__free(by_off);
    return SLATE_OK;
}

/* ---- ops --------------------------------------------------------------------------------- */

typedef struct opctx {
    const slate__program *p;
    const cJSON *j;
    int32_t index;
    const char *opname;
    slate_error *err;
} opctx;

static slate_status opfail(const opctx *c, const char *fmt, const char *a, long long x,
                           long long y) {
    char msg[320];
    snprintf(msg, sizeof msg, fmt, a, x, y);
    return slate__fail(c->err, SLATE_E_FORMAT, "program op %d (%s): %s", c->index, c->opname,
                       msg);
}

static const slate__tensor *T(const opctx *c, int32_t i) { return &c->p->tensors[i]; }

static slate_status need_kind(const opctx *c, int32_t i, slate__tkind kind, const char *role) {
    static const char *const names[] = {"a weight", "an input", "an activation", "a state"};
    if (T(c, i)->kind != kind) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s '%s' must be %s", role, T(c, i)->name, names[kind]);
        return slate__fail(c->err, SLATE_E_FORMAT, "program op %d (%s): %s", c->index,
                           c->opname, msg);
    }
    return SLATE_OK;
}

static slate_status need_width(const opctx *c, int32_t i, int64_t w, const char *role) {
    if (T(c, i)->width != w) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s '%s' has width %lld, expected %lld", role, T(c, i)->name,
                 (long long)T(c, i)->width, (long long)w);
        return slate__fail(c->err, SLATE_E_FORMAT, "program op %d (%s): %s", c->index,
                           c->opname, msg);
    }
    return SLATE_OK;
}

static slate_status attr_int(const opctx *c, const char *key, int64_t lo, int64_t hi,
                             int32_t *out) {
    int64_t v = 0;
    char where[64];
    snprintf(where, sizeof where, "program op %d (%s)", c->index, c->opname);
    slate_status s = get_int(c->j, key, lo, hi, &v, where, c->err);
    if (s == SLATE_OK) *out = (int32_t)v;
    return s;
}

static slate_status attr_float(const opctx *c, const char *key, float lo, float hi, float *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->j, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return slate__fail(c->err, SLATE_E_FORMAT, "program op %d (%s): attribute '%s' missing "
                           "or outside [%g, %g]", c->index, c->opname, key, lo, hi);
    *out = (float)v->valuedouble;
    return SLATE_OK;
}

static bool is_matrix_dtype(slate_dtype d) { return slate__wdtype_valid(d); }

static slate_status check_op(const opctx *c, slate__op *op, bool *act_ready) {
    const slate__program *p = c->p;
    slate_status s = SLATE_OK;
    const int32_t *in = op->in;
    /* Arity per op. */
    static const int8_t arity_min[SLATE__OP_COUNT] = {2, 2, 2, 2, 2, 3, 2, 2, 1, 2, 1, 2, 1, 1};
    static const int8_t arity_max[SLATE__OP_COUNT] = {2, 2, 3, 2, 2, 3, 2, 2, 1, 2, 1, 2, 1, 1};
    if (op->n_in < arity_min[op->kind] || op->n_in > arity_max[op->kind])
        return opfail(c, "takes %s%lld..%lld inputs", "", arity_min[op->kind],
                      arity_max[op->kind]);
    bool has_out = op->kind != SLATE__OP_KV_WRITE;
    if (has_out != (op->out >= 0))
        return opfail(c, "%s", has_out ? "needs an output" : "has no output", 0, 0);
    if (has_out && (s = need_kind(c, op->out, SLATE__T_ACT, "output"))) return s;
    /* Activation inputs must have been written by an earlier op (act_ready: by tensor; a
     * state counts as written once a kv_write has put this call's rows in it). */
    for (int i = 0; i < op->n_in; i++)
        if (T(c, in[i])->kind == SLATE__T_ACT && !act_ready[in[i]])
            return opfail(c, "reads activation '%s' before any op writes it", T(c, in[i])->name,
                          0, 0);
    const slate__tensor *o = has_out ? T(c, op->out) : NULL;
    switch (op->kind) {
    case SLATE__OP_EMBEDDING: {
        const slate__tensor *w = T(c, in[0]);
        if ((s = need_kind(c, in[0], SLATE__T_WEIGHT, "table")) ||
            (s = need_kind(c, in[1], SLATE__T_INPUT, "ids")))
            return s;
        if (w->n_dims != 2 || w->dims[0] != p->n_vocab || !is_matrix_dtype(w->dtype))
            return opfail(c, "table '%s' must be [n_vocab=%lld][dim] of a weight dtype", w->name,
                          p->n_vocab, 0);
        if ((s = need_width(c, op->out, w->dims[1], "output"))) return s;
        if (o->out_rows) return opfail(c, "output '%s' must have q rows", o->name, 0, 0);
        break;
    }
    case SLATE__OP_RMS_NORM: {
        if ((s = need_kind(c, in[0], SLATE__T_ACT, "x")) ||
            (s = need_kind(c, in[1], SLATE__T_WEIGHT, "weight")))
            return s;
        if ((s = attr_float(c, "eps", 0.0f, 1.0f, &op->eps))) return s;
        op->group = 0;
        if (cJSON_GetObjectItemCaseSensitive(c->j, "group") &&
            (s = attr_int(c, "group", 1, MAX_WIDTH, &op->group)))
            return s;
        int64_t w = T(c, in[0])->width;
        int64_t g = op->group ? op->group : w;
        if (w % g != 0) return opfail(c, "%sgroup %lld does not divide width %lld", "", g, w);
        const slate__tensor *wt = T(c, in[1]);
        if (wt->n_dims != 1 || wt->dims[0] != g || wt->dtype != SLATE_DTYPE_F32)
            return opfail(c, "weight '%s' must be f32 [%lld]", wt->name, g, 0);
        if ((s = need_width(c, op->out, w, "output"))) return s;
        break;
    }
    case SLATE__OP_MATMUL: {
        const slate__tensor *w = T(c, in[1]);
        if ((s = need_kind(c, in[0], SLATE__T_ACT, "x")) ||
            (s = need_kind(c, in[1], SLATE__T_WEIGHT, "W")))
            return s;
        if (w->n_dims != 2 || !is_matrix_dtype(w->dtype))
            return opfail(c, "W '%s' must be a 2-D weight matrix", w->name, 0, 0);
        if ((s = need_width(c, in[0], w->dims[1], "x")) ||
            (s = need_width(c, op->out, w->dims[0], "output")))
            return s;
        if (op->n_in == 3) {
            const slate__tensor *b = T(c, in[2]);
            if ((s = need_kind(c, in[2], SLATE__T_WEIGHT, "bias"))) return s;
            if (b->n_dims != 1 || b->dims[0] != w->dims[0] || b->dtype != SLATE_DTYPE_F32)
                return opfail(c, "bias '%s' must be f32 [%lld]", b->name, w->dims[0], 0);
        }
        if (op->out == in[0]) return opfail(c, "output may not alias x '%s'", o->name, 0, 0);
        break;
    }
    case SLATE__OP_ROPE: {
        if ((s = need_kind(c, in[0], SLATE__T_ACT, "x")) ||
            (s = need_kind(c, in[1], SLATE__T_WEIGHT, "freqs")) ||
            (s = attr_int(c, "n_heads", 1, 4096, &op->n_heads)) ||
            /* exec.c's rope keeps cos/sin tables of SLATE__MAX_HEAD_DIM / 2 on the stack. */
            (s = attr_int(c, "head_dim", 2, SLATE__MAX_HEAD_DIM, &op->head_dim)) ||
            (s = attr_int(c, "rope_dim", 2, SLATE__MAX_HEAD_DIM, &op->rope_dim)))
            return s;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(c->j, "mode");
        if (!cJSON_IsString(m) || (strcmp(m->valuestring, "adjacent") && strcmp(m->valuestring, "half")))
            return opfail(c, "mode must be \"adjacent\" or \"half\"", "", 0, 0);
        op->rope_mode = strcmp(m->valuestring, "half") == 0 ? SLATE__ROPE_HALF : SLATE__ROPE_ADJACENT;
        if (op->rope_dim > op->head_dim || op->rope_dim % 2)
            return opfail(c, "%srope_dim %lld must be even and at most head_dim %lld", "",
                          op->rope_dim, op->head_dim);
        if ((s = need_width(c, in[0], (int64_t)op->n_heads * op->head_dim, "x")) ||
            (s = need_width(c, op->out, (int64_t)op->n_heads * op->head_dim, "output")))
            return s;
        /* Optional: absent means 1. Finite and > 0 as a float (a tiny value would round to 0
         * and erase every rotated dim; a larger-than-float one is undefined to convert). */
        op->mscale = 1.0f;
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(c->j, "mscale");
        if (ms && (!cJSON_IsNumber(ms) || !(ms->valuedouble > 0 && ms->valuedouble <= FLT_MAX) ||
                   !((float)ms->valuedouble > 0)))
            return slate__fail(c->err, SLATE_E_FORMAT, "program op %d (%s): attribute 'mscale' "
                               "must be a finite number > 0 that fits a float", c->index,
                               c->opname);
        if (ms) op->mscale = (float)ms->valuedouble;
        const slate__tensor *f = T(c, in[1]);
        if (f->n_dims != 1 || f->dims[0] != op->rope_dim / 2 || f->dtype != SLATE_DTYPE_F32)
            return opfail(c, "freqs '%s' must be f32 [rope_dim/2 = %lld]", f->name,
                          op->rope_dim / 2, 0);
        break;
    }
    case SLATE__OP_KV_WRITE:
        if ((s = need_kind(c, in[0], SLATE__T_ACT, "x")) ||
            (s = need_kind(c, in[1], SLATE__T_STATE, "cache")) ||
            (s = need_width(c, in[0], T(c, in[1])->width, "x")))
            return s;
        if (T(c, in[0])->out_rows) return opfail(c, "x must have q rows", "", 0, 0);
        break;
    case SLATE__OP_ATTENTION: {
        if ((s = need_kind(c, in[0], SLATE__T_ACT, "q")) ||
            (s = need_kind(c, in[1], SLATE__T_STATE, "k cache")) ||
            (s = need_kind(c, in[2], SLATE__T_STATE, "v cache")) ||
            (s = attr_int(c, "n_heads", 1, 4096, &op->n_heads)) ||
            (s = attr_int(c, "n_kv_heads", 1, 4096, &op->n_kv_heads)) ||
            (s = attr_int(c, "head_dim", 1, SLATE__MAX_HEAD_DIM, &op->head_dim)) ||
            (s = attr_float(c, "scale", 0.0f, 1e6f, &op->scale)))
            return s;
        /* The cap: finite and > 0 (Gemma 2's is 50), only under its own op name. */
        op->softcap = 0.0f;
        if (strcmp(c->opname, ATTENTION_SOFTCAP) == 0) {
            if ((s = attr_float(c, "softcap", 0.0f, 1e6f, &op->softcap))) return s;
            if (!(op->softcap > 0.0f))
                return opfail(c, "attribute 'softcap' must be > 0%s", "", 0, 0);
        }
        op->window = 0;
        if (cJSON_GetObjectItemCaseSensitive(c->j, "window") &&
            (s = attr_int(c, "window", 0, INT32_MAX, &op->window)))
            return s;
        if (op->n_heads % op->n_kv_heads)
            return opfail(c, "%sn_heads %lld is not a multiple of n_kv_heads %lld", "",
                          op->n_heads, op->n_kv_heads);
        int64_t qw = (int64_t)op->n_heads * op->head_dim, kw = (int64_t)op->n_kv_heads * op->head_dim;
        if ((s = need_width(c, in[0], qw, "q")) || (s = need_width(c, in[1], kw, "k cache")) ||
            (s = need_width(c, in[2], kw, "v cache")) || (s = need_width(c, op->out, qw, "output")))
            return s;
        if (T(c, in[0])->out_rows || o->out_rows) return opfail(c, "q/output must have q rows", "", 0, 0);
        /* The query's own positions are read from the caches: a cache no earlier kv_write
         * fills would hand attention whatever an earlier, longer conversation left there. */
        for (int k = 1; k <= 2; k++)
            if (!act_ready[in[k]])
                return opfail(c, "reads cache '%s' before any kv_write writes it",
                              T(c, in[k])->name, 0, 0);
        if (op->out == in[0]) return opfail(c, "output may not alias q", "", 0, 0);
        /* The kernel reads K and V with one dtype and one row stride (exec.c): a package cache
         * dtype that differs between them would read V as K's dtype, past its rows. */
        if (T(c, in[1])->dtype != T(c, in[2])->dtype)
            return slate__fail(c->err, SLATE_E_FORMAT, "program op %d (%s): k cache '%s' (%s) "
                               "and v cache '%s' (%s) must have one dtype", c->index, c->opname,
                               T(c, in[1])->name, slate_dtype_name(T(c, in[1])->dtype),
                               T(c, in[2])->name, slate_dtype_name(T(c, in[2])->dtype));
        break;
    }
    case SLATE__OP_ADD:
    case SLATE__OP_MUL:
    case SLATE__OP_SWIGLU:
    case SLATE__OP_GEGLU:
        if ((s = need_kind(c, in[0], SLATE__T_ACT, "a")) ||
            (s = need_kind(c, in[1], SLATE__T_ACT, "b")) ||
            (s = need_width(c, in[1], T(c, in[0])->width, "b")) ||
            (s = need_width(c, op->out, T(c, in[0])->width, "output")))
            return s;
        break;
    case SLATE__OP_SCALE:
        /* A finite factor (|factor| <= 1e6: sqrt(hidden) for the widest model is 256). */
        if ((s = attr_float(c, "factor", -1e6f, 1e6f, &op->scale)) ||
            (s = need_kind(c, in[0], SLATE__T_ACT, "x")) ||
            (s = need_width(c, op->out, T(c, in[0])->width, "output")))
            return s;
        break;
    case SLATE__OP_SOFTCAP:
        /* A finite cap > 0 (Gemma 2's final logit cap is 30). */
        if ((s = attr_float(c, "cap", 0.0f, 1e6f, &op->softcap)) ||
            (s = need_kind(c, in[0], SLATE__T_ACT, "x")) ||
            (s = need_width(c, op->out, T(c, in[0])->width, "output")))
            return s;
        if (!(op->softcap > 0.0f))
            return opfail(c, "attribute 'cap' must be > 0%s", "", 0, 0);
        break;
    case SLATE__OP_SILU:
        if ((s = need_kind(c, in[0], SLATE__T_ACT, "a")) ||
            (s = need_width(c, op->out, T(c, in[0])->width, "output")))
            return s;
        break;
    case SLATE__OP_LAST_ROWS:
        if ((s = need_kind(c, in[0], SLATE__T_ACT, "x")) ||
            (s = need_width(c, op->out, T(c, in[0])->width, "output")))
            return s;
        if (T(c, in[0])->out_rows || !o->out_rows)
            return opfail(c, "takes q rows to out rows", "", 0, 0);
        break;
    case SLATE__OP_COUNT:
        return SLATE__INTERNAL(c->err, "op kind");
    }
    /* Row kinds must agree between activation inputs and output, except where an op changes
     * them (last_rows) or has none (embedding, kv_write, attention checked above). */
    if (op->kind != SLATE__OP_LAST_ROWS && has_out)
        for (int i = 0; i < op->n_in; i++)
            if (T(c, in[i])->kind == SLATE__T_ACT && T(c, in[i])->out_rows != o->out_rows)
                return opfail(c, "input '%s' and output have different row counts",
                              T(c, in[i])->name, 0, 0);
    return SLATE_OK;
}

/* Scratch for quantized activations: the kernels this CPU runs (slate__kernels_get, the table
 * the model will use) say how many bytes each matmul's x needs; the largest over every matmul
 * and row count up to max_query (a plan never shrinks as rows grow, but the layout may change
 * at small row counts, so the first few are checked too) is reserved once, after the
 * activations, within MAX_ARENA_BYTES with them. */
static slate_status plan_xq(slate__program *p, slate_error *err) {
    const slate__kernels *k = slate__kernels_get();
    size_t most = 0;
    for (int32_t oi = 0; oi < p->n_ops; oi++) {
        const slate__op *op = &p->ops[oi];
        if (op->kind != SLATE__OP_MATMUL) continue;
        const slate__tensor *t = &p->tensors[op->in[1]];
        if (!k->xq_plan[t->dtype]) continue;
        slate__wmat w;
        slate__wmat_init(&w, NULL, t->dtype, t->block, t->asym, t->dims[0], t->dims[1]);
        for (int64_t rows = 1; rows <= p->max_query; rows = rows < 16 ? rows + 1 : p->max_query) {
            size_t b = k->xq_plan[t->dtype](&w, rows).bytes;
            if (b > most) most = b;
            if (rows == p->max_query) break;
        }
    }
    if (most > MAX_ARENA_BYTES - p->scratch_bytes) /* scratch_bytes <= MAX_ARENA_BYTES */
        return slate__fail(err, SLATE_E_FORMAT, "the quantized matmul inputs need %zu bytes "
                           "after the %zu of the activations, more than the %llu bytes a "
                           "state's scratch may hold (max_query %d)", most, p->scratch_bytes,
                           (unsigned long long)MAX_ARENA_BYTES, p->max_query);
    p->xq_offset = p->scratch_bytes;
    p->xq_bytes = slate__align_up(most, 64);
    p->scratch_bytes += p->xq_bytes;
    return SLATE_OK;
}

slate_status slate__program_compile(const cJSON *meta, uint64_t data_size, slate__program *p,
                                    slate_error *err) {
    memset(p, 0, sizeof *p);
    slate_status s;
    const cJSON *shapes = cJSON_GetObjectItemCaseSensitive(meta, "shapes");
    const cJSON *hp = cJSON_GetObjectItemCaseSensitive(meta, "hparams");
    int64_t n_ctx = 0, max_query = 0, n_vocab = 0;
    if (!cJSON_IsObject(shapes) || !cJSON_IsObject(hp))
        return slate__fail(err, SLATE_E_FORMAT, "META needs objects 'shapes' and 'hparams'");
    if ((s = get_int(shapes, "n_ctx", 1, 1 << 24, &n_ctx, "shapes", err)) ||
        (s = get_int(shapes, "max_query", 1, n_ctx, &max_query, "shapes", err)) ||
        (s = get_int(hp, "n_vocab", 1, 1 << 24, &n_vocab, "hparams", err)))
        return s;
    p->n_ctx = (int32_t)n_ctx;
    p->max_query = (int32_t)max_query;
    p->n_vocab = (int32_t)n_vocab;
    name_ref *names = NULL;
    if ((s = load_tensors(meta, data_size, p, err)) || (s = check_names(p, &names, err)))
        goto fail;

    const cJSON *prog = cJSON_GetObjectItemCaseSensitive(meta, "program");
    if (!cJSON_IsArray(prog) || cJSON_GetArraySize(prog) < 1 || cJSON_GetArraySize(prog) > MAX_OPS) {
        s = slate__fail(err, SLATE_E_FORMAT, "META 'program' must be a non-empty array of ops");
        goto fail;
    }
    p->ops = slate__calloc((size_t)cJSON_GetArraySize(prog), sizeof *p->ops);
    bool *ready = slate__calloc((size_t)p->n_tensors, 1);
    if (!p->ops || !ready) {
        slate__free(ready);
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
        goto fail;
    }
    const cJSON *j;
    cJSON_ArrayForEach(j, prog) {
        opctx c = {p, j, p->n_ops, "?", err};
        slate__op *op = &p->ops[p->n_ops];
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "op");
        if (!cJSON_IsString(name)) {
            s = slate__fail(err, SLATE_E_FORMAT, "program op %d: field 'op' missing", p->n_ops);
            break;
        }
        c.opname = name->valuestring;
        op->kind = SLATE__OP_COUNT;
        for (int k = 0; k < SLATE__OP_COUNT; k++)
            if (strcmp(name->valuestring, g_op_names[k]) == 0) op->kind = (slate__opkind)k;
        if (strcmp(name->valuestring, ATTENTION_SOFTCAP) == 0) op->kind = SLATE__OP_ATTENTION;
        if (op->kind == SLATE__OP_COUNT) {
            s = slate__fail(err, SLATE_E_UNSUPPORTED, "program op %d: unknown op '%s'", p->n_ops,
                            name->valuestring);
            break;
        }
        const char *extra = unknown_attr(j, op->kind, name->valuestring);
        if (extra) {
            s = slate__fail(err, SLATE_E_UNSUPPORTED, "program op %d (%s): unknown attribute "
                            "'%.64s' (a package from a newer slate? this one would not compute "
                            "what it asks)", p->n_ops, name->valuestring, extra);
            break;
        }
        const cJSON *ins = cJSON_GetObjectItemCaseSensitive(j, "in");
        if (!cJSON_IsArray(ins) || cJSON_GetArraySize(ins) > 3) {
            s = opfail(&c, "'in' must be an array of at most 3 names", "", 0, 0);
            break;
        }
        const cJSON *x;
        cJSON_ArrayForEach(x, ins) {
            int32_t idx = cJSON_IsString(x) ? find_sorted(names, p->n_tensors, x->valuestring) : -1;
            if (idx < 0) {
                s = opfail(&c, "input '%s' is not a declared tensor",
                           cJSON_IsString(x) ? x->valuestring : "(not a string)", 0, 0);
                break;
            }
            op->in[op->n_in++] = idx;
        }
        if (s) break;
        const cJSON *out = cJSON_GetObjectItemCaseSensitive(j, "out");
        op->out = -1;
        if (out) {
            op->out = cJSON_IsString(out) ? find_sorted(names, p->n_tensors, out->valuestring) : -1;
            if (op->out < 0) {
                s = opfail(&c, "output '%s' is not a declared tensor",
                           cJSON_IsString(out) ? out->valuestring : "(not a string)", 0, 0);
                break;
            }
        }
        if ((s = check_op(&c, op, ready))) break;
        if (op->out >= 0) ready[op->out] = true;
        if (op->kind == SLATE__OP_KV_WRITE) ready[op->in[1]] = true; /* this call's rows */
        p->n_ops++;
    }
    if (!s && !ready[p->logits])
        s = slate__fail(err, SLATE_E_FORMAT, "no op writes 'logits'");
    slate__free(ready);
    slate__free(names);
    names = NULL;
    if (s) goto fail;
    for (int32_t i = 0; i < p->n_states; i++) p->tensors[p->states[i]].dims[0] = p->n_ctx;
    if ((s = plan_xq(p, err))) goto fail;
    return SLATE_OK;
fail:
    slate__free(names);
    slate__program_free(p);
    return s;
}
