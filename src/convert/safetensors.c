/*
 * safetensors.c - validating reader for .safetensors files (Hugging Face).
 *
 * Layout (spec: huggingface/safetensors README, "Format"): u64 little-endian N, N bytes of UTF-8
 * JSON (an object; may be padded with trailing spaces), then the data area. The JSON maps each
 * tensor name to {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, with
 * offsets relative to the start of the data area; the optional "__metadata__" entry is a
 * string -> string map that we check and skip.
 *
 * Key idea: cJSON parses the header once at open; what we keep (names, dtypes, shapes, data
 * pointers into the mapping) is copied into the handle and the JSON tree is freed, so the handle
 * is small and immutable (shareable across threads).
 *
 * Untrusted input: N against a limit and the file size; the header is copied into a
 * NUL-terminated buffer before cJSON sees it (cJSON's length-bounded parse can read one byte
 * past the end); numbers must be exact non-negative integers (cJSON stores doubles, so values
 * above 2^53 are refused rather than rounded); shape products and byte sizes are
 * overflow-checked; offsets lie inside the data area; tensors are disjoint; names are unique
 * (cJSON keeps duplicate keys as separate items). Byte offsets in messages point at the
 * tensor's name in the header when it can be found there, else at the header start.
 */
#define _GNU_SOURCE /* memmem */
#include "convert/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADER ((uint64_t)100 * 1000 * 1000) /* the limit of the reference implementation */
#define MAX_DIMS 8
#define MAX_EXACT 9007199254740992.0 /* 2^53: larger doubles are not all integers */

/* A tensor name and its index in header order. */
typedef struct name_ix {
    const char *name;
    int64_t i;
} name_ix;

struct slate__st {
    slate__map map; /* file-backed handles only */
    const uint8_t *data;
    uint64_t size;
    uint64_t data_start; /* 8 + N */
    int64_t n;
    slate__st_tensor *tensors; /* [n], header order */
    char *pool;                /* name copies */
    name_ix *ix;               /* [n] names sorted by strcmp, for binary search (sorting also
                                  finds duplicates, and no crafted names make it quadratic) */
};

static int name_ix_cmp(const void *pa, const void *pb) {
    const name_ix *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c ? c : a->i < b->i ? -1 : a->i > b->i; /* a duplicate sorts after its original */
}

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [SLATE__ST_F32] = {"F32", 4}, [SLATE__ST_F16] = {"F16", 2}, [SLATE__ST_BF16] = {"BF16", 2},
    [SLATE__ST_F64] = {"F64", 8}, [SLATE__ST_I64] = {"I64", 8}, [SLATE__ST_I32] = {"I32", 4},
    [SLATE__ST_I16] = {"I16", 2}, [SLATE__ST_I8] = {"I8", 1},   [SLATE__ST_U8] = {"U8", 1},
    [SLATE__ST_BOOL] = {"BOOL", 1},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

size_t slate__st_dtype_size(slate__st_dtype d) {
    return (unsigned)d < N_DTYPES ? dtypes[d].size : 0;
}

const char *slate__st_dtype_name(slate__st_dtype d) {
    return (unsigned)d < N_DTYPES ? dtypes[d].name : "?";
}

/* Prints an untrusted name for a message: printable ASCII as is, other bytes as \xNN, cut with
 * "..." so a long name cannot push the rest of the message out. */
#define QUOTE_CAP 100
static const char *quote(char out[QUOTE_CAP], const char *s) {
    size_t o = 0;
    for (; *s; s++) {
        if (o + 8 >= QUOTE_CAP) {
            memcpy(out + o, "...", 4);
            return out;
        }
        uint8_t c = (uint8_t)*s;
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            out[o++] = (char)c;
        } else {
            snprintf(out + o, QUOTE_CAP - o, "\\x%02x", c);
            o += 4;
        }
    }
    out[o] = '\0';
    return out;
}

static const char *json_kind(const cJSON *j) {
    if (cJSON_IsObject(j)) return "an object";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a bool";
    if (cJSON_IsNull(j)) return "null";
    return "invalid";
}

typedef struct parser {
    slate__st *st;
    const char *hdr; /* NUL-terminated copy of the header */
    uint64_t hdr_len;
    slate_error *err;
} parser;

/* File offset of the (skip+1)-th occurrence of "name" (quotes included) in the header, the
 * entry a message is about; else the offset of the header. Best effort: a name written with
 * escapes, or longer than 256 bytes, is not looked for. memmem is linear, so even a crafted
 * header cannot make this slow. Only called on failure. */
static uint64_t name_offset_nth(const parser *p, const char *name, int skip) {
    char pat[256 + 2];
    size_t n = strlen(name);
    if (n > sizeof pat - 2) return 8;
    pat[0] = '"';
    memcpy(pat + 1, name, n);
    pat[n + 1] = '"';
    const char *from = p->hdr, *end = p->hdr + p->hdr_len;
    for (;;) {
        const char *hit = memmem(from, (size_t)(end - from), pat, n + 2);
        if (!hit) return 8;
        if (skip-- == 0) return 8 + (uint64_t)(hit - p->hdr);
        from = hit + 1;
    }
}

static uint64_t name_offset(const parser *p, const char *name) {
    return name_offset_nth(p, name, 0);
}

/* An exact non-negative integer that fits in 53 bits; false otherwise. */
static bool json_u64(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!(d >= 0) || d > MAX_EXACT || floor(d) != d) return false;
    *out = (uint64_t)d;
    return true;
}

/* Describes a number for a message ("-3", "1.5", "a string"). */
static const char *json_desc(char out[48], const cJSON *j) {
    if (cJSON_IsNumber(j))
        snprintf(out, 48, "%.17g", j->valuedouble);
    else
        snprintf(out, 48, "%s", json_kind(j));
    return out;
}

static slate_status check_metadata(parser *p, const cJSON *m) {
    if (!cJSON_IsObject(m))
        return slate__fail_at(p->err, SLATE_E_FORMAT, name_offset(p, "__metadata__"),
                              "__metadata__ is %s, expected an object of strings", json_kind(m));
    for (const cJSON *c = m->child; c; c = c->next) {
        if (!cJSON_IsString(c)) {
            char q[QUOTE_CAP];
            return slate__fail_at(p->err, SLATE_E_FORMAT, name_offset(p, c->string),
                                  "__metadata__ entry '%s' is %s, expected a string",
                                  quote(q, c->string), json_kind(c));
        }
    }
    return SLATE_OK;
}

/* Fails about the entry `name`; the offset search runs only on failure (it scans the header). */
static slate_status entry_fail(parser *p, const char *name, slate_status code, const char *fmt,
                               ...) SLATE__PRINTF(4, 5);
static slate_status entry_fail(parser *p, const char *name, slate_status code, const char *fmt,
                               ...) {
    char msg[sizeof ((slate_error *)0)->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return slate__fail_at(p->err, code, name_offset(p, name), "%s", msg);
}

static slate_status parse_entry(parser *p, const cJSON *e, slate__st_tensor *t) {
    char q[QUOTE_CAP], d[48];
    quote(q, e->string);
    const char *at = e->string;
    if (!cJSON_IsObject(e))
        return entry_fail(p, at, SLATE_E_FORMAT, "tensor '%s': entry is %s, expected an "
                              "object {dtype, shape, data_offsets}", q, json_kind(e));
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *f = e->child; f; f = f->next) {
        const cJSON **slot = !strcmp(f->string, "dtype")          ? &dtype
                             : !strcmp(f->string, "shape")        ? &shape
                             : !strcmp(f->string, "data_offsets") ? &offs
                                                                  : NULL;
        if (!slot) continue; /* the reference reader ignores unknown fields too */
        if (*slot)
            return entry_fail(p, at, SLATE_E_FORMAT, "tensor '%s': field \"%s\" appears "
                                  "twice", q, f->string);
        *slot = f;
    }
    if (!dtype || !shape || !offs)
        return entry_fail(p, at, SLATE_E_FORMAT, "tensor '%s': missing \"%s\"", q,
                              !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

    if (!cJSON_IsString(dtype))
        return entry_fail(p, at, SLATE_E_FORMAT,
                              "tensor '%s': dtype is %s, expected a string", q, json_kind(dtype));
    size_t k = 0;
    while (k < N_DTYPES && strcmp(dtypes[k].name, dtype->valuestring) != 0) k++;
    if (k == N_DTYPES) {
        char qd[QUOTE_CAP];
        return entry_fail(p, at, SLATE_E_UNSUPPORTED,
                              "tensor '%s': dtype '%s' is not supported (slate reads F32, F16, "
                              "BF16, F64, I64, I32, I16, I8, U8, BOOL)",
                              q, quote(qd, dtype->valuestring));
    }
    t->dtype = (slate__st_dtype)k;

    if (!cJSON_IsArray(shape))
        return entry_fail(p, at, SLATE_E_FORMAT,
                              "tensor '%s': shape is %s, expected an array", q, json_kind(shape));
    int n_dims = cJSON_GetArraySize(shape);
    if (n_dims > MAX_DIMS)
        return entry_fail(p, at, SLATE_E_UNSUPPORTED,
                              "tensor '%s': shape has %d dims, slate reads at most %d", q, n_dims,
                              MAX_DIMS);
    t->n_dims = (uint32_t)n_dims;
    t->n_elements = 1;
    int j = 0;
    for (const cJSON *x = shape->child; x; x = x->next, j++) {
        if (!json_u64(x, &t->shape[j]))
            return entry_fail(p, at, SLATE_E_FORMAT,
                                  "tensor '%s': shape[%d] is %s, expected a non-negative integer "
                                  "(at most 2^53)",
                                  q, j, json_desc(d, x));
        if (t->shape[j] != 0 && t->n_elements > UINT64_MAX / t->shape[j])
            return entry_fail(p, at, SLATE_E_FORMAT,
                                  "tensor '%s': element count overflows at shape[%d] = %llu", q, j,
                                  (unsigned long long)t->shape[j]);
        t->n_elements *= t->shape[j];
    }
    size_t esize = dtypes[t->dtype].size;
    if (t->n_elements > UINT64_MAX / esize)
        return entry_fail(p, at, SLATE_E_FORMAT,
                              "tensor '%s': size of %llu %s elements overflows", q,
                              (unsigned long long)t->n_elements, dtypes[t->dtype].name);
    t->nbytes = t->n_elements * esize;

    uint64_t begin, end;
    if (!cJSON_IsArray(offs))
        return entry_fail(p, at, SLATE_E_FORMAT,
                          "tensor '%s': data_offsets is %s, expected [begin, end]", q,
                          json_kind(offs));
    if (cJSON_GetArraySize(offs) != 2)
        return entry_fail(p, at, SLATE_E_FORMAT,
                          "tensor '%s': data_offsets has %d values, expected [begin, end]", q,
                          cJSON_GetArraySize(offs));
    if (!json_u64(offs->child, &begin) || !json_u64(offs->child->next, &end)) {
        const cJSON *bad = json_u64(offs->child, &begin) ? offs->child->next : offs->child;
        return entry_fail(p, at, SLATE_E_FORMAT,
                              "tensor '%s': data_offsets[%d] is %s, expected a non-negative "
                              "integer (at most 2^53)",
                              q, bad == offs->child ? 0 : 1, json_desc(d, bad));
    }
    uint64_t room = p->st->size - p->st->data_start;
    if (begin > end || end > room)
        return entry_fail(p, at, SLATE_E_FORMAT,
                              "tensor '%s': data_offsets [%llu, %llu] %s (data area is %llu "
                              "bytes, from file offset %llu)",
                              q, (unsigned long long)begin, (unsigned long long)end,
                              begin > end ? "are reversed" : "end past the end of the data area",
                              (unsigned long long)room, (unsigned long long)p->st->data_start);
    if (end - begin != t->nbytes) {
        char dims[8 * 22 + 4];
        size_t o = 0;
        dims[o++] = '[';
        for (uint32_t i = 0; i < t->n_dims; i++)
            o += (size_t)snprintf(dims + o, sizeof dims - o, i ? ", %llu" : "%llu",
                                  (unsigned long long)t->shape[i]);
        snprintf(dims + o, sizeof dims - o, "]");
        return entry_fail(p, at, SLATE_E_FORMAT,
                              "tensor '%s': shape %s of %s needs %llu bytes, data_offsets "
                              "[%llu, %llu] hold %llu",
                              q, dims, dtypes[t->dtype].name, (unsigned long long)t->nbytes,
                              (unsigned long long)begin, (unsigned long long)end,
                              (unsigned long long)(end - begin));
    }
    t->file_offset = p->st->data_start + begin;
    t->data = p->st->data + t->file_offset;
    return SLATE_OK;
}

typedef struct span {
    uint64_t begin, end;
    int64_t i;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Empty tensors own no bytes and cannot overlap anything; the rest must be disjoint. */
static slate_status check_overlaps(parser *p) {
    slate__st *st = p->st;
    span *spans = slate__malloc((size_t)st->n * sizeof *spans);
    if (!spans && st->n > 0)
        return slate__fail(p->err, SLATE_E_NOMEM, "out of memory checking safetensors ranges");
    int64_t n = 0;
    for (int64_t i = 0; i < st->n; i++) {
        const slate__st_tensor *t = &st->tensors[i];
        if (t->nbytes) spans[n++] = (span){t->file_offset, t->file_offset + t->nbytes, i};
    }
    qsort(spans, (size_t)n, sizeof *spans, span_cmp);
    slate_status s = SLATE_OK;
    for (int64_t k = 1; k < n; k++) {
        if (spans[k].begin >= spans[k - 1].end) continue;
        const slate__st_tensor *a = &st->tensors[spans[k - 1].i], *b = &st->tensors[spans[k].i];
        char qa[QUOTE_CAP], qb[QUOTE_CAP];
        s = slate__fail_at(p->err, SLATE_E_FORMAT, name_offset(p, b->name),
                           "tensors '%s' [data %llu..%llu) and '%s' [data %llu..%llu) overlap",
                           quote(qa, a->name),
                           (unsigned long long)(a->file_offset - st->data_start),
                           (unsigned long long)(a->file_offset - st->data_start + a->nbytes),
                           quote(qb, b->name),
                           (unsigned long long)(b->file_offset - st->data_start),
                           (unsigned long long)(b->file_offset - st->data_start + b->nbytes));
        break;
    }
    slate__free(spans);
    return s;
}

static slate_status parse_root(parser *p, const cJSON *root) {
    slate__st *st = p->st;
    if (!cJSON_IsObject(root))
        return slate__fail_at(p->err, SLATE_E_FORMAT, 8, "header is %s, expected a JSON object",
                              json_kind(root));
    /* Count tensors and name bytes, so each table is one allocation. */
    uint64_t n = 0, pool_bytes = 0;
    const cJSON *meta = NULL;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            if (meta)
                return slate__fail_at(p->err, SLATE_E_FORMAT, name_offset_nth(p, e->string, 1),
                                      "duplicate entry \"__metadata__\"");
            meta = e;
            continue;
        }
        n++;
        pool_bytes += strlen(e->string) + 1;
    }
    if (meta) {
        slate_status s = check_metadata(p, meta);
        if (s) return s;
    }
    st->n = (int64_t)n;
    st->tensors = slate__calloc((size_t)n, sizeof *st->tensors);
    st->pool = slate__malloc((size_t)pool_bytes);
    st->ix = slate__calloc((size_t)n, sizeof *st->ix);
    if (!st->tensors || !st->pool || !st->ix)
        return slate__fail(p->err, SLATE_E_NOMEM, "out of memory reading safetensors header "
                           "(%llu tensors)", (unsigned long long)n);
    char *name = st->pool;
    int64_t i = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (e == meta) continue;
        slate__st_tensor *t = &st->tensors[i];
        size_t len = strlen(e->string);
        memcpy(name, e->string, len + 1);
        t->name = name;
        name += len + 1;
        st->ix[i] = (name_ix){t->name, i};
        i++;
    }
    qsort(st->ix, (size_t)n, sizeof *st->ix, name_ix_cmp);
    for (uint64_t k = 1; k < n; k++) {
        if (strcmp(st->ix[k - 1].name, st->ix[k].name) != 0) continue;
        char q[QUOTE_CAP];
        return slate__fail_at(p->err, SLATE_E_FORMAT, name_offset_nth(p, st->ix[k].name, 1),
                              "duplicate tensor name '%s' (entries %lld and %lld)",
                              quote(q, st->ix[k].name), (long long)st->ix[k - 1].i,
                              (long long)st->ix[k].i);
    }
    i = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (e == meta) continue;
        slate_status s = parse_entry(p, e, &st->tensors[i++]);
        if (s) return s;
    }
    return check_overlaps(p);
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static slate_status parse(slate__st *st, slate_error *err) {
    if (st->size < 8)
        return slate__fail_at(err, SLATE_E_FORMAT, 0,
                              "file is %llu bytes, too short for the 8-byte header length "
                              "(truncated?)",
                              (unsigned long long)st->size);
    const uint8_t *d = st->data;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | d[i];
    if (n > MAX_HEADER)
        return slate__fail_at(err, SLATE_E_FORMAT, 0,
                              "header length %llu is more than the limit %llu (not a "
                              "safetensors file?)",
                              (unsigned long long)n, (unsigned long long)MAX_HEADER);
    if (n > st->size - 8)
        return slate__fail_at(err, SLATE_E_FORMAT, 0,
                              "header length %llu runs past the end of the file (%llu bytes "
                              "after the length field; truncated?)",
                              (unsigned long long)n, (unsigned long long)(st->size - 8));
    st->data_start = 8 + n;
    parser p = {.st = st, .hdr_len = n, .err = err};
    char *hdr = slate__malloc((size_t)n + 1);
    if (!hdr)
        return slate__fail(err, SLATE_E_NOMEM, "out of memory copying the %llu-byte safetensors "
                           "header", (unsigned long long)n);
    memcpy(hdr, d + 8, (size_t)n);
    hdr[n] = '\0';
    p.hdr = hdr;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)n, &end, false);
    slate_status s = SLATE_OK;
    if (!root) {
        uint64_t at = end && end >= hdr && end <= hdr + n ? (uint64_t)(end - hdr) : 0;
        char near[QUOTE_CAP], snippet[24];
        size_t k = n - at < sizeof snippet - 1 ? (size_t)(n - at) : sizeof snippet - 1;
        memcpy(snippet, hdr + at, k);
        snippet[k] = '\0';
        /* cJSON also returns NULL when its own malloc fails; it cannot tell us which. */
        s = slate__fail_at(err, SLATE_E_FORMAT, 8 + at,
                           "header is not valid JSON (parse stopped at header byte %llu of %llu, "
                           "near '%s')",
                           (unsigned long long)at, (unsigned long long)n, quote(near, snippet));
    } else {
        uint64_t at = (uint64_t)(end - hdr);
        while (at < n && is_space(hdr[at])) at++;
        if (at < n)
            s = slate__fail_at(err, SLATE_E_FORMAT, 8 + at,
                               "header has bytes after its JSON value at header byte %llu of "
                               "%llu (only trailing spaces are allowed)",
                               (unsigned long long)at, (unsigned long long)n);
        else
            s = parse_root(&p, root);
    }
    cJSON_Delete(root);
    slate__free(hdr);
    return s;
}

static void free_handle(slate__st *st) {
    if (!st) return;
    slate__free(st->tensors);
    slate__free(st->pool);
    slate__free(st->ix);
    if (st->map.data) slate__map_close(&st->map);
    slate__free(st);
}

slate_status slate__st_open_mem(const uint8_t *data, size_t size, slate__st **out,
                                slate_error *err) {
    if (!out) return slate__fail(err, SLATE_E_INVALID_ARG, "slate__st_open_mem: out is NULL");
    *out = NULL;
    if (!data && size > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate__st_open_mem: data is NULL but size is %zu", size);
    slate__st *st = slate__calloc(1, sizeof *st);
    if (!st) return slate__fail(err, SLATE_E_NOMEM, "out of memory opening safetensors");
    st->data = data;
    st->size = size;
    slate_status s = parse(st, err);
    if (s) {
        free_handle(st);
        return s;
    }
    *out = st;
    return SLATE_OK;
}

slate_status slate__st_open(const char *path, slate__st **out, slate_error *err) {
    if (!out) return slate__fail(err, SLATE_E_INVALID_ARG, "slate__st_open: out is NULL");
    *out = NULL;
    if (!path) return slate__fail(err, SLATE_E_INVALID_ARG, "slate__st_open: path is NULL");
    slate__map m;
    slate_status s = slate__map_open(path, &m, err);
    if (s) return s;
    slate__st *st = NULL;
    s = slate__st_open_mem(m.data, m.size, &st, err);
    if (s) {
        slate__map_close(&m);
        slate__error_name_file(err, path); /* the parser saw only bytes */
        return s;
    }
    st->map = m;
    *out = st;
    return SLATE_OK;
}

void slate__st_close(slate__st *st) { free_handle(st); }

int64_t slate__st_n_tensors(const slate__st *st) { return st ? st->n : 0; }

const slate__st_tensor *slate__st_tensor_at(const slate__st *st, int64_t i) {
    return st && i >= 0 && i < st->n ? &st->tensors[i] : NULL;
}

const slate__st_tensor *slate__st_find(const slate__st *st, const char *name) {
    if (!st || !name) return NULL;
    int64_t lo = 0, hi = st->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->ix[mid].name, name);
        if (c == 0) return &st->tensors[st->ix[mid].i];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}
