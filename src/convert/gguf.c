/*
 * gguf.c - validating reader for GGUF v2/v3 (little-endian), the llama.cpp model format.
 *
 * Layout (spec: ggml docs/gguf.md): "GGUF", u32 version, u64 n_tensors, u64 n_kv; n_kv pairs
 * (string key, u32 value type, value); n_tensors infos (string name, u32 n_dims, u64 ne[n_dims],
 * u32 ggml type, u64 offset relative to the data section); padding to general.alignment
 * (default 32); the data section. A string is u64 length + bytes (no terminator); an array is
 * u32 element type + u64 count + elements.
 *
 * Key idea: one pass over the bytes validates everything and records offsets, so the handle
 * holds no copies of values: a scalar, string or array is read from the mapping on lookup. Built
 * at open: NUL-terminated key and tensor-name copies (one pool); name indexes sorted by bytes
 * for O(log n) key and tensor lookup (sorting also finds duplicates, and unlike a hash table no
 * crafted set of names can make it quadratic); and for every string array the offset of each
 * element, so element i is O(1) (tokenizer vocabularies are indexed by token id).
 * The handle is immutable after open, so it can be shared by threads without locks.
 *
 * Invariants after a successful open: every offset recorded in a kv or tensor lies inside the
 * data with the bytes it describes; string lengths are <= 1 GiB; bool values are 0 or 1; tensor
 * data ranges are inside the file, aligned, disjoint and in file order with no gaps beyond the
 * alignment padding.
 *
 * Untrusted input: every count is checked against a limit and against the bytes left before
 * anything is allocated for it, with overflow-safe arithmetic; refusals are E_FORMAT with the
 * byte offset of the culprit, or E_UNSUPPORTED for valid GGUF that slate does not read
 * (version 1, big-endian, nested arrays, other tensor types).
 */
#include "convert/gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Limits. Counts: real models have a few thousand tensors and a few dozen keys; 1<<20 leaves
 * room and bounds the tables we allocate. Strings: the largest real values (chat templates)
 * are kilobytes; 1 GiB only stops a lying length early. Keys: the spec caps them at 65535. */
#define MAX_TENSORS ((uint64_t)1 << 20)
#define MAX_KV ((uint64_t)1 << 20)
#define MAX_STR ((uint64_t)1 << 30)
#define MAX_KEY ((uint64_t)65535)
#define MAX_DIMS 4
#define DEFAULT_ALIGNMENT 32
/* Smallest possible encodings, used to bound claimed counts by the bytes left before we
 * allocate: a kv is key length (8) + 1 key byte + value type (4) + 1 value byte; a tensor info
 * is name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8). */
#define MIN_KV_BYTES 13
#define MIN_TENSOR_BYTES 32

typedef struct kv {
    uint64_t key;       /* pool offset of the NUL-terminated key copy (see keys[]) */
    uint64_t key_len;
    uint64_t key_at;    /* file offset of the key string (messages) */
    uint32_t type;      /* slate__gguf_vtype */
    uint32_t elem_type; /* arrays: element type */
    uint64_t n;         /* arrays: element count */
    uint64_t val;       /* file offset of the value: scalar bytes, a string's u64 length, or the
                           first array element */
    uint64_t str0;      /* string arrays: index of element 0 in str_at */
} kv;

/* A name (in the mapping) and the index of its kv or tensor. */
typedef struct name_ix {
    const uint8_t *s;
    uint64_t n;
    int64_t i;
} name_ix;

struct slate__gguf {
    slate__map map;  /* file-backed handles only; zero for _open_mem */
    const uint8_t *data;
    uint64_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset; /* absolute start of the data section */

    int64_t n_kv;
    kv *kvs;           /* [n_kv] */
    const char **keys; /* [n_kv] NUL-terminated key copies, into pool */
    int64_t n_tensors;
    slate__gguf_tensor *tensors; /* [n_tensors] */
    char *pool;        /* all key and tensor-name copies */
    uint64_t *str_at;  /* file offsets of the u64 length of every string-array element */

    name_ix *kv_ix;    /* [n_kv] keys sorted by bytes, for binary search */
    name_ix *t_ix;     /* [n_tensors] tensor names sorted by bytes */
};

/* ---- little helpers ------------------------------------------------------------------------ */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

/* Byte order, then length. */
static int bytes_cmp(const uint8_t *a, uint64_t an, const uint8_t *b, uint64_t bn) {
    int c = memcmp(a, b, (size_t)(an < bn ? an : bn));
    return c ? c : an < bn ? -1 : an > bn;
}

static int name_ix_cmp(const void *pa, const void *pb) {
    const name_ix *a = pa, *b = pb;
    int c = bytes_cmp(a->s, a->n, b->s, b->n);
    return c ? c : a->i < b->i ? -1 : a->i > b->i; /* a duplicate sorts after its original */
}

/* Binary search; returns the kv or tensor index, or -1. */
static int64_t ix_find(const name_ix *ix, int64_t n, const char *name) {
    size_t len = strlen(name);
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = bytes_cmp(ix[mid].s, ix[mid].n, (const uint8_t *)name, len);
        if (c == 0) return ix[mid].i;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* Sorts ix; returns the position k of a name equal to the one at k - 1, or 0 if all differ. */
static int64_t sort_find_dup(name_ix *ix, int64_t n) {
    qsort(ix, (size_t)n, sizeof *ix, name_ix_cmp);
    for (int64_t k = 1; k < n; k++)
        if (bytes_cmp(ix[k - 1].s, ix[k - 1].n, ix[k].s, ix[k].n) == 0) return k;
    return 0;
}

/* Prints untrusted bytes for a message: printable ASCII as is, the rest as \xNN, cut with "..."
 * so one long name cannot push the rest of the message out of slate_error.message. */
#define QUOTE_CAP 100
static const char *quote(char out[QUOTE_CAP], const uint8_t *s, uint64_t n) {
    size_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (o + 8 >= QUOTE_CAP) {
            memcpy(out + o, "...", 4);
            return out;
        }
        uint8_t c = s[i];
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

static const char *vtype_name(uint32_t t) {
    static const char *const names[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* Bytes of one scalar element, 0 for strings and arrays. */
static uint64_t vtype_size(uint32_t t) {
    switch (t) {
    case SLATE__GGUF_U8: case SLATE__GGUF_I8: case SLATE__GGUF_BOOL: return 1;
    case SLATE__GGUF_U16: case SLATE__GGUF_I16: return 2;
    case SLATE__GGUF_U32: case SLATE__GGUF_I32: case SLATE__GGUF_F32: return 4;
    case SLATE__GGUF_U64: case SLATE__GGUF_I64: case SLATE__GGUF_F64: return 8;
    default: return 0;
    }
}

const char *slate__ggml_type_name(uint32_t type) {
    /* ggml.h, enum ggml_type (llama.cpp 81ff7abe); ids 4, 5, 31..33 and 36..38 are retired
     * upstream. */
    static const char *const names[SLATE__GGML_N_TYPES] = {
        "F32",     "F16",      "Q4_0",     "Q4_1",       "Q4_2",       "Q4_3",       "Q5_0",
        "Q5_1",    "Q8_0",     "Q8_1",     "Q2_K",       "Q3_K",       "Q4_K",       "Q5_K",
        "Q6_K",    "Q8_K",     "IQ2_XXS",  "IQ2_XS",     "IQ3_XXS",    "IQ1_S",      "IQ4_NL",
        "IQ3_S",   "IQ2_S",    "IQ4_XS",   "I8",         "I16",        "I32",        "I64",
        "F64",     "IQ1_M",    "BF16",     "Q4_0_4_4",   "Q4_0_4_8",   "Q4_0_8_8",   "TQ1_0",
        "TQ2_0",   "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",  "NVFP4",      "Q1_0",
        "Q2_0",
    };
    return type < SLATE__GGML_N_TYPES ? names[type] : "?";
}

/* ---- the parser ------------------------------------------------------------------------------ */

typedef struct parser {
    slate__gguf *g;
    const uint8_t *d;
    uint64_t size, pos;
    slate_error *err;
    slate__buf pool;   /* key and name copies */
    slate__buf str_at; /* uint64_t offsets */
    uint64_t *tensor_at; /* [n_tensors] file offset of each tensor info (messages) */
    uint64_t *name_at;   /* [n_tensors] pool offset of each tensor name (the pool may move) */
} parser;

static uint64_t left(const parser *p) { return p->size - p->pos; }

/* Fails unless n more bytes are there; `what` names the field for the message. */
static slate_status need(parser *p, uint64_t n, const char *what) {
    if (n <= left(p)) return SLATE_OK;
    return slate__fail_at(p->err, SLATE_E_FORMAT, p->pos,
                          "%s: needs %llu bytes at offset %llu, file ends at %llu (truncated?)",
                          what, (unsigned long long)n, (unsigned long long)p->pos,
                          (unsigned long long)p->size);
}

static slate_status read_u32(parser *p, uint32_t *v, const char *what) {
    slate_status s = need(p, 4, what);
    if (s) return s;
    *v = le32(p->d + p->pos);
    p->pos += 4;
    return SLATE_OK;
}

static slate_status read_u64(parser *p, uint64_t *v, const char *what) {
    slate_status s = need(p, 8, what);
    if (s) return s;
    *v = le64(p->d + p->pos);
    p->pos += 8;
    return SLATE_OK;
}

/* A gguf string: checks the length against max and the bytes left; returns where the bytes
 * start and how many. */
static slate_status read_str(parser *p, uint64_t max, uint64_t *at, uint64_t *len,
                             const char *what) {
    uint64_t len_at = p->pos;
    slate_status s = read_u64(p, len, what);
    if (s) return s;
    if (*len > max)
        return slate__fail_at(p->err, SLATE_E_FORMAT, len_at,
                              "%s: string length %llu is more than the limit %llu", what,
                              (unsigned long long)*len, (unsigned long long)max);
    if (*len > left(p))
        return slate__fail_at(p->err, SLATE_E_FORMAT, len_at,
                              "%s: string length %llu at offset %llu runs past the end of the "
                              "file (%llu bytes left)",
                              what, (unsigned long long)*len, (unsigned long long)len_at,
                              (unsigned long long)left(p));
    *at = p->pos;
    p->pos += *len;
    return SLATE_OK;
}

static slate_status nomem(parser *p, const char *what) {
    return slate__fail(p->err, SLATE_E_NOMEM, "out of memory reading GGUF %s", what);
}

/* Appends a NUL-terminated copy of n bytes to the pool; returns its pool offset. */
static uint64_t pool_add(parser *p, const uint8_t *s, uint64_t n) {
    uint64_t at = p->pool.len;
    slate__buf_append(&p->pool, s, (size_t)n);
    slate__buf_append(&p->pool, "", 1);
    return at;
}

/* While parsing, tensor names live in the pool, which may still move: go through offsets. */
static const char *pool_name(const parser *p, int64_t i) {
    return (const char *)p->pool.data + p->name_at[i];
}

static slate_status parse_header(parser *p, uint64_t *n_tensors, uint64_t *n_kv) {
    slate_status s = need(p, 4, "GGUF magic");
    if (s) return s;
    if (memcmp(p->d, "GGUF", 4) != 0) {
        char q[QUOTE_CAP];
        return slate__fail_at(p->err, SLATE_E_FORMAT, 0,
                              "bad magic: expected 'GGUF', found '%s' (not a GGUF file)",
                              quote(q, p->d, 4));
    }
    p->pos = 4;
    uint32_t version;
    if ((s = read_u32(p, &version, "GGUF version"))) return s;
    if (version != 2 && version != 3) {
        uint32_t swapped = version >> 24 | (version >> 8 & 0xff00) | (version << 8 & 0xff0000) |
                           version << 24;
        if (swapped == 2 || swapped == 3)
            return slate__fail_at(p->err, SLATE_E_UNSUPPORTED, 4,
                                  "big-endian GGUF (version %u) is not supported (slate reads "
                                  "little-endian GGUF versions 2 and 3)",
                                  swapped);
        return slate__fail_at(p->err, SLATE_E_UNSUPPORTED, 4,
                              "GGUF version %u is not supported (slate reads versions 2 and 3)",
                              version);
    }
    p->g->version = version;
    if ((s = read_u64(p, n_tensors, "GGUF tensor count"))) return s;
    if ((s = read_u64(p, n_kv, "GGUF key-value count"))) return s;
    if (*n_tensors > MAX_TENSORS)
        return slate__fail_at(p->err, SLATE_E_FORMAT, 8,
                              "n_tensors is %llu, more than the limit %llu",
                              (unsigned long long)*n_tensors, (unsigned long long)MAX_TENSORS);
    if (*n_kv > MAX_KV)
        return slate__fail_at(p->err, SLATE_E_FORMAT, 16, "n_kv is %llu, more than the limit %llu",
                              (unsigned long long)*n_kv, (unsigned long long)MAX_KV);
    /* Both counts are small now, so the products cannot overflow. */
    if (*n_kv * MIN_KV_BYTES > left(p))
        return slate__fail_at(p->err, SLATE_E_FORMAT, 16,
                              "n_kv is %llu, but the %llu bytes after the header hold at most "
                              "%llu key-value pairs (truncated?)",
                              (unsigned long long)*n_kv, (unsigned long long)left(p),
                              (unsigned long long)(left(p) / MIN_KV_BYTES));
    if (*n_tensors * MIN_TENSOR_BYTES > left(p) - *n_kv * MIN_KV_BYTES)
        return slate__fail_at(p->err, SLATE_E_FORMAT, 8,
                              "n_tensors is %llu, but the %llu bytes after the header hold at "
                              "most %llu tensor infos besides the %llu key-value pairs "
                              "(truncated?)",
                              (unsigned long long)*n_tensors, (unsigned long long)left(p),
                              (unsigned long long)((left(p) - *n_kv * MIN_KV_BYTES) /
                                                   MIN_TENSOR_BYTES),
                              (unsigned long long)*n_kv);
    return SLATE_OK;
}

/* Checks that every byte of a bool (or bool array) is 0 or 1. */
static slate_status check_bools(parser *p, uint64_t at, uint64_t n, const char *key) {
    for (uint64_t i = 0; i < n; i++) {
        uint8_t b = p->d[at + i];
        if (b > 1)
            return slate__fail_at(p->err, SLATE_E_FORMAT, at + i,
                                  "key '%s': bool value %u at offset %llu, expected 0 or 1", key,
                                  b, (unsigned long long)(at + i));
    }
    return SLATE_OK;
}

static slate_status parse_value(parser *p, kv *k, const char *key) {
    char what[QUOTE_CAP + 32];
    snprintf(what, sizeof what, "key '%s' value", key);
    uint64_t type_at = p->pos;
    slate_status s = read_u32(p, &k->type, what);
    if (s) return s;
    if (k->type > SLATE__GGUF_F64)
        return slate__fail_at(p->err, SLATE_E_FORMAT, type_at,
                              "key '%s': value type %u is unknown (expected 0..12)", key, k->type);
    k->val = p->pos;
    if (k->type == SLATE__GGUF_STRING) {
        uint64_t at, len;
        return read_str(p, MAX_STR, &at, &len, what);
    }
    if (k->type != SLATE__GGUF_ARRAY) {
        uint64_t n = vtype_size(k->type);
        if ((s = need(p, n, what))) return s;
        if (k->type == SLATE__GGUF_BOOL && (s = check_bools(p, p->pos, 1, key))) return s;
        p->pos += n;
        return SLATE_OK;
    }
    uint64_t elem_at = p->pos;
    if ((s = read_u32(p, &k->elem_type, what))) return s;
    if (k->elem_type == SLATE__GGUF_ARRAY)
        return slate__fail_at(p->err, SLATE_E_UNSUPPORTED, elem_at,
                              "key '%s': arrays of arrays are not supported", key);
    if (k->elem_type > SLATE__GGUF_F64)
        return slate__fail_at(p->err, SLATE_E_FORMAT, elem_at,
                              "key '%s': array element type %u is unknown (expected 0..12)", key,
                              k->elem_type);
    uint64_t count_at = p->pos;
    if ((s = read_u64(p, &k->n, what))) return s;
    k->val = p->pos;
    if (k->elem_type != SLATE__GGUF_STRING) {
        uint64_t size = vtype_size(k->elem_type);
        if (k->n > left(p) / size)
            return slate__fail_at(p->err, SLATE_E_FORMAT, count_at,
                                  "key '%s': array of %llu %s (%llu bytes each) does not fit in "
                                  "the %llu bytes left in the file (count lies or file "
                                  "truncated)",
                                  key, (unsigned long long)k->n, vtype_name(k->elem_type),
                                  (unsigned long long)size, (unsigned long long)left(p));
        if (k->elem_type == SLATE__GGUF_BOOL && (s = check_bools(p, p->pos, k->n, key))) return s;
        p->pos += k->n * size;
        return SLATE_OK;
    }
    /* Each string takes at least its 8-byte length, which bounds the count before we size the
     * index for it. */
    if (k->n > left(p) / 8)
        return slate__fail_at(p->err, SLATE_E_FORMAT, count_at,
                              "key '%s': array of %llu strings needs at least %llu bytes, only "
                              "%llu left in the file (count lies or file truncated)",
                              key, (unsigned long long)k->n, (unsigned long long)k->n * 8,
                              (unsigned long long)left(p));
    k->str0 = p->str_at.len / sizeof(uint64_t);
    for (uint64_t i = 0; i < k->n; i++) {
        uint64_t len_at = p->pos, len;
        /* The fast path of read_str, inline: vocabularies have 10^5 strings, and the message
         * naming the element is only worth formatting on failure. */
        if (left(p) >= 8 && (len = le64(p->d + p->pos)) <= MAX_STR && len <= left(p) - 8) {
            p->pos += 8 + len;
        } else {
            char ewhat[QUOTE_CAP + 64];
            uint64_t at;
            snprintf(ewhat, sizeof ewhat, "key '%s' string %llu of %llu", key,
                     (unsigned long long)i, (unsigned long long)k->n);
            if ((s = read_str(p, MAX_STR, &at, &len, ewhat))) return s;
            return SLATE__INTERNAL(p->err, "read_str accepted a string the fast path refused");
        }
        slate__buf_append(&p->str_at, &len_at, sizeof len_at);
    }
    if (p->str_at.failed) return nomem(p, "string array index");
    return SLATE_OK;
}

static slate_status parse_kvs(parser *p) {
    slate__gguf *g = p->g;
    for (int64_t i = 0; i < g->n_kv; i++) {
        kv *k = &g->kvs[i];
        char what[64], q[QUOTE_CAP];
        snprintf(what, sizeof what, "key %lld of %lld", (long long)i, (long long)g->n_kv);
        k->key_at = p->pos;
        uint64_t at;
        slate_status s = read_str(p, MAX_KEY, &at, &k->key_len, what);
        if (s) return s;
        const uint8_t *key = p->d + at;
        quote(q, key, k->key_len);
        if (k->key_len == 0)
            return slate__fail_at(p->err, SLATE_E_FORMAT, k->key_at, "%s is empty", what);
        if (memchr(key, 0, (size_t)k->key_len))
            return slate__fail_at(p->err, SLATE_E_FORMAT, k->key_at,
                                  "key '%s' contains a NUL byte", q);
        g->kv_ix[i] = (name_ix){key, k->key_len, i};
        k->key = pool_add(p, key, k->key_len);
        if ((s = parse_value(p, k, q))) return s;
    }
    if (p->pool.failed) return nomem(p, "keys");
    int64_t d = sort_find_dup(g->kv_ix, g->n_kv);
    if (d) {
        char q[QUOTE_CAP];
        const kv *k = &g->kvs[g->kv_ix[d].i];
        return slate__fail_at(p->err, SLATE_E_FORMAT, k->key_at,
                              "duplicate key '%s' (pairs %lld and %lld)",
                              quote(q, g->kv_ix[d].s, g->kv_ix[d].n),
                              (long long)g->kv_ix[d - 1].i, (long long)g->kv_ix[d].i);
    }
    return SLATE_OK;
}

/* general.alignment: u32, a power of two (ggml refuses others too). */
static slate_status read_alignment(parser *p) {
    slate__gguf *g = p->g;
    g->alignment = DEFAULT_ALIGNMENT;
    int64_t i = ix_find(g->kv_ix, g->n_kv, "general.alignment");
    if (i >= 0) {
        const kv *k = &g->kvs[i];
        if (k->type != SLATE__GGUF_U32)
            return slate__fail_at(p->err, SLATE_E_FORMAT, k->key_at,
                                  "key 'general.alignment' has type %s, expected u32",
                                  vtype_name(k->type));
        uint32_t a = le32(p->d + k->val);
        if (a == 0 || (a & (a - 1)) != 0)
            return slate__fail_at(p->err, SLATE_E_FORMAT, k->val,
                                  "general.alignment is %u, expected a power of two", a);
        g->alignment = a;
    }
    return SLATE_OK;
}

/* Elements and bytes per block of the types slate reads (ggml's ggml-common.h block structs:
 * convert/ggml_quants.h); false for the others. F32/F16/BF16 are blocks of one element. */
static bool type_block(uint32_t t, uint64_t *elems, uint64_t *bytes) {
    switch (t) {
    case SLATE__GGML_F32: *elems = 1, *bytes = 4; return true;
    case SLATE__GGML_F16:
    case SLATE__GGML_BF16: *elems = 1, *bytes = 2; return true;
    case SLATE__GGML_Q4_0: *elems = 32, *bytes = 18; return true;
    case SLATE__GGML_Q4_1: *elems = 32, *bytes = 20; return true;
    case SLATE__GGML_Q5_0: *elems = 32, *bytes = 22; return true;
    case SLATE__GGML_Q5_1: *elems = 32, *bytes = 24; return true;
    case SLATE__GGML_Q8_0: *elems = 32, *bytes = 34; return true;
    case SLATE__GGML_IQ4_NL: *elems = 32, *bytes = 18; return true;
    case SLATE__GGML_Q2_K: *elems = 256, *bytes = 84; return true;
    case SLATE__GGML_Q3_K: *elems = 256, *bytes = 110; return true;
    case SLATE__GGML_Q4_K: *elems = 256, *bytes = 144; return true;
    case SLATE__GGML_Q5_K: *elems = 256, *bytes = 176; return true;
    case SLATE__GGML_Q6_K: *elems = 256, *bytes = 210; return true;
    case SLATE__GGML_IQ4_XS: *elems = 256, *bytes = 136; return true;
    }
    return false;
}

/* Bytes of n elements of a type read (n is a multiple of its block); false on overflow. */
static bool tensor_nbytes(uint32_t t, uint64_t n, uint64_t *out) {
    uint64_t elems = 1, bytes = 4;
    type_block(t, &elems, &bytes);
    if (n / elems > UINT64_MAX / bytes) return false;
    *out = n / elems * bytes;
    return true;
}

static slate_status parse_tensors(parser *p) {
    slate__gguf *g = p->g;
    slate_status s;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        slate__gguf_tensor *t = &g->tensors[i];
        char what[QUOTE_CAP + 32], q[QUOTE_CAP];
        snprintf(what, sizeof what, "tensor %lld of %lld name", (long long)i,
                 (long long)g->n_tensors);
        p->tensor_at[i] = p->pos;
        uint64_t at, len;
        if ((s = read_str(p, MAX_STR, &at, &len, what))) return s;
        const uint8_t *name = p->d + at;
        quote(q, name, len);
        if (memchr(name, 0, (size_t)len))
            return slate__fail_at(p->err, SLATE_E_FORMAT, p->tensor_at[i],
                                  "tensor '%s' has a NUL byte in its name", q);
        p->name_at[i] = pool_add(p, name, len);
        if (p->pool.failed) return nomem(p, "tensor names");
        g->t_ix[i] = (name_ix){name, len, i};
        snprintf(what, sizeof what, "tensor '%s' info", q);
        uint64_t dims_at = p->pos;
        if ((s = read_u32(p, &t->n_dims, what))) return s;
        if (t->n_dims < 1 || t->n_dims > MAX_DIMS)
            return slate__fail_at(p->err, SLATE_E_FORMAT, dims_at,
                                  "tensor '%s': n_dims is %u, expected 1..%d", q, t->n_dims,
                                  MAX_DIMS);
        t->n_elements = 1;
        for (uint32_t j = 0; j < MAX_DIMS; j++) t->ne[j] = 1;
        for (uint32_t j = 0; j < t->n_dims; j++) {
            uint64_t ne_at = p->pos;
            if ((s = read_u64(p, &t->ne[j], what))) return s;
            /* ggml keeps dims in int64_t; a zero dim would make an empty tensor no kernel
             * expects. */
            if (t->ne[j] == 0 || t->ne[j] > (uint64_t)INT64_MAX)
                return slate__fail_at(p->err, SLATE_E_FORMAT, ne_at,
                                      "tensor '%s': ne[%u] is %llu, expected 1..%lld", q, j,
                                      (unsigned long long)t->ne[j], (long long)INT64_MAX);
            if (t->n_elements > (uint64_t)INT64_MAX / t->ne[j])
                return slate__fail_at(p->err, SLATE_E_FORMAT, ne_at,
                                      "tensor '%s': element count overflows at ne[%u] = %llu",
                                      q, j, (unsigned long long)t->ne[j]);
            t->n_elements *= t->ne[j];
        }
        uint64_t type_at = p->pos;
        if ((s = read_u32(p, &t->type, what))) return s;
        uint64_t block_elems, block_bytes;
        if (t->type >= SLATE__GGML_N_TYPES)
            return slate__fail_at(p->err, SLATE_E_UNSUPPORTED, type_at,
                                  "tensor '%s': ggml type %u is unknown (ggml's types are 0..%d)",
                                  q, t->type, SLATE__GGML_N_TYPES - 1);
        if (!type_block(t->type, &block_elems, &block_bytes))
            return slate__fail_at(p->err, SLATE_E_UNSUPPORTED, type_at,
                                  "tensor '%s' is %s, which slate does not read; convert from "
                                  "an F16/BF16 GGUF or the Hugging Face folder (ggml type %u; "
                                  "slate reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
                                  "IQ4_NL, Q2_K..Q6_K and IQ4_XS)",
                                  q, slate__ggml_type_name(t->type), t->type);
        if (t->ne[0] % block_elems != 0)
            return slate__fail_at(p->err, SLATE_E_FORMAT, dims_at + 4,
                                  "tensor '%s': %s needs ne[0] to be a multiple of %llu, found "
                                  "%llu", q, slate__ggml_type_name(t->type),
                                  (unsigned long long)block_elems, (unsigned long long)t->ne[0]);
        if (!tensor_nbytes(t->type, t->n_elements, &t->nbytes))
            return slate__fail_at(p->err, SLATE_E_FORMAT, dims_at,
                                  "tensor '%s': size of %llu %s elements overflows", q,
                                  (unsigned long long)t->n_elements,
                                  slate__ggml_type_name(t->type));
        uint64_t off_at = p->pos;
        if ((s = read_u64(p, &t->file_offset, what))) return s; /* relative until the end */
        if (t->file_offset % g->alignment != 0)
            return slate__fail_at(p->err, SLATE_E_FORMAT, off_at,
                                  "tensor '%s': data offset %llu is not a multiple of the "
                                  "alignment %u",
                                  q, (unsigned long long)t->file_offset, g->alignment);
    }
    int64_t d = sort_find_dup(g->t_ix, g->n_tensors);
    if (d) {
        char q[QUOTE_CAP];
        return slate__fail_at(p->err, SLATE_E_FORMAT, p->tensor_at[g->t_ix[d].i],
                              "duplicate tensor name '%s' (tensors %lld and %lld)",
                              quote(q, g->t_ix[d].s, g->t_ix[d].n), (long long)g->t_ix[d - 1].i,
                              (long long)g->t_ix[d].i);
    }
    return SLATE_OK;
}

/* Places the data section, then checks every tensor's range against the file and the layout
 * llama.cpp's loader requires (gguf.cpp, gguf_init_from_file_impl): in file order, each tensor
 * starts where the previous ones end, each size padded to the alignment. A lying type or shape
 * then shows as a gap or an overlap at the next tensor instead of garbage weights. */
static slate_status place_tensors(parser *p) {
    slate__gguf *g = p->g;
    uint64_t end_of_infos = p->pos;
    /* The data section starts at the next multiple of the alignment; alignment <= 2^31 and
     * pos <= size, so this cannot overflow. */
    g->data_offset = (end_of_infos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors == 0) return SLATE_OK; /* vocab-only files may end without padding */
    if (g->data_offset > g->size)
        return slate__fail_at(p->err, SLATE_E_FORMAT, end_of_infos,
                              "data section starts at offset %llu (tensor infos end at %llu, "
                              "aligned to %u), past the end of the file (%llu bytes)",
                              (unsigned long long)g->data_offset,
                              (unsigned long long)end_of_infos, g->alignment,
                              (unsigned long long)g->size);
    uint64_t room = g->size - g->data_offset;
    uint64_t expect = 0; /* relative offset of the next tensor: <= room, so no overflow below */
    for (int64_t i = 0; i < g->n_tensors; i++) {
        slate__gguf_tensor *t = &g->tensors[i];
        uint64_t rel = t->file_offset;
        char q[QUOTE_CAP];
        const char *name = pool_name(p, i);
        quote(q, (const uint8_t *)name, strlen(name));
        if (rel > room || t->nbytes > room - rel) {
            /* rel may be near 2^64: say "data section + rel" rather than overflow the sum. */
            char where[64];
            if (rel <= UINT64_MAX - g->data_offset)
                snprintf(where, sizeof where, "%llu", (unsigned long long)(g->data_offset + rel));
            else
                snprintf(where, sizeof where, "%llu + %llu", (unsigned long long)g->data_offset,
                         (unsigned long long)rel);
            return slate__fail_at(p->err, SLATE_E_FORMAT, p->tensor_at[i],
                                  "tensor '%s': data [offset %s, %llu bytes] ends past the end "
                                  "of the file (%llu bytes)",
                                  q, where, (unsigned long long)t->nbytes,
                                  (unsigned long long)g->size);
        }
        if (rel != expect)
            return slate__fail_at(p->err, SLATE_E_FORMAT, p->tensor_at[i],
                                  "tensor '%s' (%s, %llu bytes) at data offset %llu, expected "
                                  "%llu: GGUF tensors follow each other in file order, each "
                                  "padded to the alignment %u (wrong type or shape in an "
                                  "earlier tensor?)",
                                  q, slate__ggml_type_name(t->type),
                                  (unsigned long long)t->nbytes, (unsigned long long)rel,
                                  (unsigned long long)expect, g->alignment);
        /* rel + nbytes <= room <= 2^64 - data_offset, and padding adds < alignment: a sum past
         * room is only compared, never used as an offset. */
        uint64_t end = rel + t->nbytes;
        expect = end + (g->alignment - end % g->alignment) % g->alignment;
        if (expect < end) expect = UINT64_MAX; /* wrapped: no later tensor can match it */
        t->file_offset = g->data_offset + rel;
        t->data = p->d + t->file_offset;
    }
    return SLATE_OK;
}

static void free_handle(slate__gguf *g) {
    if (!g) return;
    slate__free(g->kvs);
    slate__free(g->keys);
    slate__free(g->tensors);
    slate__free(g->pool);
    slate__free(g->str_at);
    slate__free(g->kv_ix);
    slate__free(g->t_ix);
    if (g->map.data) slate__map_close(&g->map);
    slate__free(g);
}

static slate_status parse(slate__gguf *g, slate_error *err) {
    parser p = {.g = g, .d = g->data, .size = g->size, .err = err};
    uint64_t n_tensors, n_kv;
    slate_status s = parse_header(&p, &n_tensors, &n_kv);
    if (s) return s;
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kvs = slate__calloc((size_t)n_kv, sizeof *g->kvs);
    g->keys = slate__calloc((size_t)n_kv, sizeof *g->keys);
    g->tensors = slate__calloc((size_t)n_tensors, sizeof *g->tensors);
    g->kv_ix = slate__calloc((size_t)n_kv, sizeof *g->kv_ix);
    g->t_ix = slate__calloc((size_t)n_tensors, sizeof *g->t_ix);
    p.tensor_at = slate__calloc((size_t)n_tensors, sizeof *p.tensor_at);
    p.name_at = slate__calloc((size_t)n_tensors, sizeof *p.name_at);
    if (!g->kvs || !g->keys || !g->tensors || !g->kv_ix || !g->t_ix || !p.tensor_at ||
        !p.name_at) {
        s = nomem(&p, "tables");
        goto done;
    }
    if ((s = parse_kvs(&p))) goto done;
    if ((s = read_alignment(&p))) goto done;
    if ((s = parse_tensors(&p))) goto done;
    if ((s = place_tensors(&p))) goto done;
    if (p.pool.failed || p.str_at.failed) {
        s = nomem(&p, "names");
        goto done;
    }
    /* The pool no longer moves: turn offsets into pointers and hand the buffers over. */
    g->pool = (char *)p.pool.data;
    g->str_at = (uint64_t *)p.str_at.data;
    p.pool.data = p.str_at.data = NULL;
    for (int64_t i = 0; i < g->n_kv; i++) g->keys[i] = g->pool + g->kvs[i].key;
    for (int64_t i = 0; i < g->n_tensors; i++)
        g->tensors[i].name = g->pool + p.name_at[i];
done:
    slate__buf_free(&p.pool);
    slate__buf_free(&p.str_at);
    slate__free(p.tensor_at);
    slate__free(p.name_at);
    return s;
}

/* ---- open / close -------------------------------------------------------------------------- */

slate_status slate__gguf_open_mem(const uint8_t *data, size_t size, slate__gguf **out,
                                  slate_error *err) {
    if (!out) return slate__fail(err, SLATE_E_INVALID_ARG, "slate__gguf_open_mem: out is NULL");
    *out = NULL;
    if (!data && size > 0)
        return slate__fail(err, SLATE_E_INVALID_ARG,
                           "slate__gguf_open_mem: data is NULL but size is %zu", size);
    slate__gguf *g = slate__calloc(1, sizeof *g);
    if (!g) return slate__fail(err, SLATE_E_NOMEM, "out of memory opening GGUF");
    g->data = data;
    g->size = size;
    slate_status s = parse(g, err);
    if (s) {
        free_handle(g);
        return s;
    }
    *out = g;
    return SLATE_OK;
}

slate_status slate__gguf_open(const char *path, slate__gguf **out, slate_error *err) {
    if (!out) return slate__fail(err, SLATE_E_INVALID_ARG, "slate__gguf_open: out is NULL");
    *out = NULL;
    if (!path) return slate__fail(err, SLATE_E_INVALID_ARG, "slate__gguf_open: path is NULL");
    slate__map m;
    slate_status s = slate__map_open(path, &m, err);
    if (s) {
        slate__error_name_file(err, path);
        return s;
    }
    slate__gguf *g = NULL;
    s = slate__gguf_open_mem(m.data, m.size, &g, err);
    if (s) {
        slate__map_close(&m);
        slate__error_name_file(err, path); /* the parser saw only bytes */
        return s;
    }
    g->map = m;
    *out = g;
    return SLATE_OK;
}

void slate__gguf_close(slate__gguf *g) { free_handle(g); }

/* ---- lookups ------------------------------------------------------------------------------- */

uint32_t slate__gguf_version(const slate__gguf *g) { return g ? g->version : 0; }
uint32_t slate__gguf_alignment(const slate__gguf *g) { return g ? g->alignment : 0; }
uint64_t slate__gguf_data_offset(const slate__gguf *g) { return g ? g->data_offset : 0; }
int64_t slate__gguf_n_kv(const slate__gguf *g) { return g ? g->n_kv : 0; }

const char *slate__gguf_key_at(const slate__gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_kv ? g->keys[i] : NULL;
}

int64_t slate__gguf_find_key(const slate__gguf *g, const char *key) {
    if (!g || !key) return -1;
    return ix_find(g->kv_ix, g->n_kv, key);
}

slate__gguf_vtype slate__gguf_key_type(const slate__gguf *g, int64_t i) {
    if (!g || i < 0 || i >= g->n_kv) return SLATE__GGUF_NONE;
    return (slate__gguf_vtype)g->kvs[i].type;
}

static const kv *find(const slate__gguf *g, const char *key) {
    int64_t i = slate__gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kvs[i];
}

/* A scalar number read from the mapping; kind says which field holds it. */
typedef struct num {
    enum { NUM_U, NUM_I, NUM_F, NUM_BOOL } kind;
    uint64_t u;
    int64_t i;
    double f;
} num;

static bool read_num(const slate__gguf *g, uint32_t type, uint64_t at, num *n) {
    const uint8_t *p = g->data + at;
    union { uint32_t u; float f; } f32;
    union { uint64_t u; double f; } f64;
    switch (type) {
    case SLATE__GGUF_U8: *n = (num){NUM_U, p[0], 0, 0}; return true;
    case SLATE__GGUF_I8: *n = (num){NUM_I, 0, (int8_t)p[0], 0}; return true;
    case SLATE__GGUF_U16: *n = (num){NUM_U, le16(p), 0, 0}; return true;
    case SLATE__GGUF_I16: *n = (num){NUM_I, 0, (int16_t)le16(p), 0}; return true;
    case SLATE__GGUF_U32: *n = (num){NUM_U, le32(p), 0, 0}; return true;
    case SLATE__GGUF_I32: *n = (num){NUM_I, 0, (int32_t)le32(p), 0}; return true;
    case SLATE__GGUF_U64: *n = (num){NUM_U, le64(p), 0, 0}; return true;
    case SLATE__GGUF_I64: *n = (num){NUM_I, 0, (int64_t)le64(p), 0}; return true;
    case SLATE__GGUF_F32: f32.u = le32(p); *n = (num){NUM_F, 0, 0, f32.f}; return true;
    case SLATE__GGUF_F64: f64.u = le64(p); *n = (num){NUM_F, 0, 0, f64.f}; return true;
    case SLATE__GGUF_BOOL: *n = (num){NUM_BOOL, p[0], 0, 0}; return true;
    }
    return false;
}

static double num_double(const num *n) {
    switch (n->kind) {
    case NUM_U: case NUM_BOOL: return (double)n->u;
    case NUM_I: return (double)n->i;
    case NUM_F: return n->f;
    }
    return 0;
}

/* Integer value in [lo, hi] (as signed 64-bit bounds plus an unsigned upper bound). */
static bool get_int(const slate__gguf *g, const char *key, int64_t lo, uint64_t hi, num *n) {
    const kv *k = find(g, key);
    if (!k || !read_num(g, k->type, k->val, n)) return false;
    if (n->kind == NUM_U) return n->u <= hi;
    if (n->kind == NUM_I) return n->i >= lo && (n->i < 0 || (uint64_t)n->i <= hi);
    return false;
}

bool slate__gguf_get_u32(const slate__gguf *g, const char *key, uint32_t *out) {
    num n;
    if (!out || !get_int(g, key, 0, UINT32_MAX, &n)) return false;
    *out = n.kind == NUM_U ? (uint32_t)n.u : (uint32_t)n.i;
    return true;
}

bool slate__gguf_get_i32(const slate__gguf *g, const char *key, int32_t *out) {
    num n;
    if (!out || !get_int(g, key, INT32_MIN, INT32_MAX, &n)) return false;
    *out = n.kind == NUM_U ? (int32_t)n.u : (int32_t)n.i;
    return true;
}

const char *slate__gguf_value_str(const slate__gguf *g, const char *key, char *buf, size_t cap) {
    const kv *k = find(g, key);
    num n;
    if (!cap) return buf;
    if (!k) snprintf(buf, cap, "absent");
    else if (k->type == SLATE__GGUF_ARRAY)
        snprintf(buf, cap, "an array of %llu %s", (unsigned long long)k->n,
                 vtype_name(k->elem_type));
    else if (k->type == SLATE__GGUF_STRING)
        snprintf(buf, cap, "a string");
    else if (!read_num(g, k->type, k->val, &n))
        snprintf(buf, cap, "a %s", vtype_name(k->type));
    else if (n.kind == NUM_U)
        snprintf(buf, cap, "%llu (%s)", (unsigned long long)n.u, vtype_name(k->type));
    else if (n.kind == NUM_I)
        snprintf(buf, cap, "%lld (%s)", (long long)n.i, vtype_name(k->type));
    else if (n.kind == NUM_BOOL)
        snprintf(buf, cap, "%s (bool)", n.u ? "true" : "false");
    else
        snprintf(buf, cap, "%.9g (%s)", n.f, vtype_name(k->type));
    return buf;
}

bool slate__gguf_get_f32(const slate__gguf *g, const char *key, float *out) {
    const kv *k = find(g, key);
    num n;
    /* f32 only, as llama.cpp's loader (GGUFMeta::GKV<float> throws "key ... has wrong type"
     * for any other): converting an integer or an f64 would accept files llama.cpp refuses. */
    if (!out || !k || k->type != SLATE__GGUF_F32 || !read_num(g, k->type, k->val, &n))
        return false;
    *out = (float)n.f;
    return true;
}

bool slate__gguf_get_bool(const slate__gguf *g, const char *key, bool *out) {
    const kv *k = find(g, key);
    if (!out || !k || k->type != SLATE__GGUF_BOOL) return false;
    *out = g->data[k->val] != 0;
    return true;
}

bool slate__gguf_get_str(const slate__gguf *g, const char *key, const char **s, uint64_t *len) {
    const kv *k = find(g, key);
    if (!s || !len || !k || k->type != SLATE__GGUF_STRING) return false;
    *len = le64(g->data + k->val);
    *s = (const char *)g->data + k->val + 8;
    return true;
}

bool slate__gguf_get_arr(const slate__gguf *g, const char *key, slate__gguf_vtype *elem_type,
                         uint64_t *n) {
    const kv *k = find(g, key);
    if (!k || k->type != SLATE__GGUF_ARRAY) return false;
    if (elem_type) *elem_type = (slate__gguf_vtype)k->elem_type;
    if (n) *n = k->n;
    return true;
}

bool slate__gguf_arr_str(const slate__gguf *g, const char *key, uint64_t i, const char **s,
                         uint64_t *len) {
    const kv *k = find(g, key);
    if (!s || !len || !k || k->type != SLATE__GGUF_ARRAY || k->elem_type != SLATE__GGUF_STRING ||
        i >= k->n)
        return false;
    uint64_t at = g->str_at[k->str0 + i];
    *len = le64(g->data + at);
    *s = (const char *)g->data + at + 8;
    return true;
}

bool slate__gguf_arr_num(const slate__gguf *g, const char *key, uint64_t i, double *out) {
    const kv *k = find(g, key);
    num n;
    if (!out || !k || k->type != SLATE__GGUF_ARRAY || i >= k->n) return false;
    uint64_t size = vtype_size(k->elem_type);
    if (size == 0 || !read_num(g, k->elem_type, k->val + i * size, &n)) return false;
    *out = num_double(&n);
    return true;
}

int64_t slate__gguf_n_tensors(const slate__gguf *g) { return g ? g->n_tensors : 0; }

const slate__gguf_tensor *slate__gguf_tensor_at(const slate__gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const slate__gguf_tensor *slate__gguf_find_tensor(const slate__gguf *g, const char *name) {
    if (!g || !name) return NULL;
    int64_t i = ix_find(g->t_ix, g->n_tensors, name);
    return i < 0 ? NULL : &g->tensors[i];
}
