/*
 * persist.c - state files: save a conversation (cache rows [0, length) of every state tensor in
 * the state's dtype, the last logits, the caller's token ledger, the sampler RNG and an opaque
 * blob) and restore it bit-exactly. Also the model fingerprint that binds a file to its model,
 * and the public sampler RNG pair.
 *
 * Layout (little-endian; docs/format.md "State file" says the same):
 *   0   8  magic "SLATESTA"
 *   8   4  u32 version (2; version 1 files are still read)
 *   12  4  u32 header bytes (64)
 *   16  8  u64 model fingerprint
 *   24  8  u64 file size
 *   32  4  i32 length (positions)
 *   36  4  i32 n_tensors (state tensors of the program)
 *   40  4  i32 n_vocab
 *   44  4  i32 n_logit_rows (0: no logits; at most length)
 *   48  4  i32 n_tokens (ledger)
 *   52  4  u32 flags: bit 0 has_rng; others 0
 *   56  4  u32 CRC-32 of bytes 64..file size
 *   60  4  u32 CRC-32 of bytes 0..59
 *   64     n_tensors x {u32 dtype, u32 first (v2: first position held; v1: 0), u64 row bytes}
 *          4 x u64 rng (zeros without has_rng), u64 user_len
 *          n_tokens x i32 ledger, user_len bytes
 *          n_logit_rows x n_vocab f32 logits
 *          per tensor: (length - first) x row bytes: cache rows first..length-1
 *
 * Version 2 added `first`: a sliding-window cache whose rows behind the window were released
 * (src/state/kvmem.c) stores only the rows it holds, so a long Mistral or Gemma conversation
 * saves (and spills) what it keeps, and a restored state releases the same rows. Version 1 is
 * the same bytes with first = 0.
 *
 * Reading validates everything (magic, version, header CRC, size, fingerprint, every count and
 * dtype against the state, payload CRC) before the state is touched, so a refused file leaves
 * the state as it was. Files are read through a read-only mapping and written atomically.
 */
#define _POSIX_C_SOURCE 200809L
#include "plan/model.h"
#include "pkg/format.h"
#include "sample/sample.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MAGIC SLATE__STATE_MAGIC
#define VERSION 2u
#define HDR 64u
#define MAX_LEDGER (1 << 24)
#define MAX_USER ((size_t)64 << 20)

/* ---- fingerprint ------------------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *data, size_t len) {
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* META and the tokenizer say what the model is; weights with the same META could differ (a
 * fine-tune), so the first and last 256 bytes of every weight tensor join the hash. Reading
 * ~0.5 KiB per tensor keeps this cheap at open even for mapped weights. */
uint64_t slate__model_fingerprint(const slate_model *m, const void *meta, size_t meta_len,
                                  const void *tok, size_t tok_len) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, &meta_len, sizeof meta_len);
    h = fnv(h, meta, meta_len);
    h = fnv(h, &tok_len, sizeof tok_len);
    h = fnv(h, tok, tok_len);
    for (int32_t i = 0; i < m->prog.n_tensors; i++) {
        const slate__tensor *t = &m->prog.tensors[i];
        if (t->kind != SLATE__T_WEIGHT || !t->data || !t->nbytes) continue;
        size_t n = t->nbytes < 256 ? (size_t)t->nbytes : 256;
        h = fnv(h, t->data, n);
        h = fnv(h, (const uint8_t *)t->data + t->nbytes - n, n);
    }
    return h;
}

/* ---- writing ----------------------------------------------------------------------------- */

/* A destination: an atomic file, or a caller buffer. */
typedef struct sink {
    slate__atomic_file *file;
    uint8_t *buf;
    size_t pos;
} sink;

static void put(sink *k, const void *p, size_t n) {
    if (k->file) slate__atomic_write(k->file, p, n);
    else if (n) memcpy(k->buf + k->pos, p, n);
    k->pos += n;
}

static void le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static slate_status check_extra(const slate_state_extra *x, slate_error *err) {
    if (!x) return SLATE_OK;
    if (x->n_tokens < 0 || x->n_tokens > MAX_LEDGER || (x->n_tokens && !x->tokens))
        return slate__fail(err, SLATE_E_INVALID_ARG, "extra.n_tokens %d: must be 0..%d with a "
                           "tokens array", x->n_tokens, MAX_LEDGER);
    if (x->user_len > MAX_USER || (x->user_len && !x->user))
        return slate__fail(err, SLATE_E_INVALID_ARG, "extra.user_len %zu: must be 0..%zu with a "
                           "user pointer", x->user_len, MAX_USER);
    return SLATE_OK;
}

static void header(const slate_state *st, const slate_state_extra *x, size_t total,
                   uint32_t crc, uint8_t h[HDR]) {
    const slate__program *p = &st->model->prog;
    memset(h, 0, HDR);
    memcpy(h, MAGIC, 8);
    le32(h + 8, VERSION);
    le32(h + 12, HDR);
    le64(h + 16, st->model->fingerprint);
    le64(h + 24, total);
    le32(h + 32, (uint32_t)st->length);
    le32(h + 36, (uint32_t)p->n_states);
    le32(h + 40, (uint32_t)p->n_vocab);
    le32(h + 44, (uint32_t)st->n_logit_rows);
    le32(h + 48, (uint32_t)(x ? x->n_tokens : 0));
    le32(h + 52, x && x->has_rng ? 1u : 0u);
    le32(h + 56, crc);
    le32(h + 60, slate__crc32(0, h, 60));
}

/* Streams the payload through fn (CRC pass, then write pass): the tensor table, extras, logits
 * and cache rows, without building a copy of the cache. */
typedef void (*emit_fn)(void *ctx, const void *p, size_t n);

static void payload(const slate_state *st, const slate_state_extra *x, emit_fn fn, void *ctx) {
    const slate__program *p = &st->model->prog;
    for (int32_t i = 0; i < p->n_states; i++) {
        uint8_t e[16];
        le32(e, (uint32_t)st->kv_dtype[i]);
        le32(e + 4, (uint32_t)st->kv_first[i]);
        le64(e + 8, st->kv_row_bytes[i]);
        fn(ctx, e, 16);
    }
    uint8_t misc[40];
    for (int i = 0; i < 4; i++) le64(misc + 8 * i, x && x->has_rng ? x->rng[i] : 0);
    le64(misc + 32, x ? x->user_len : 0);
    fn(ctx, misc, 40);
    if (x && x->n_tokens) {
        for (int32_t i = 0; i < x->n_tokens; i++) {
            uint8_t t[4];
            le32(t, (uint32_t)x->tokens[i]);
            fn(ctx, t, 4);
        }
    }
    if (x && x->user_len) fn(ctx, x->user, x->user_len);
    if (st->n_logit_rows)
        fn(ctx, st->scratch + p->tensors[p->logits].offset,
           (size_t)st->n_logit_rows * (size_t)p->n_vocab * sizeof(float));
    /* Rows as the program sees them ([length][row bytes] per tensor), whatever the in-memory
     * layout (head-major, src/state/kvmem.c): one piece per head and position. */
    uint8_t piece[SLATE__MAX_HEAD_DIM * 4]; /* the largest head piece: f32 */
    for (int32_t i = 0; i < p->n_states; i++)
        for (int32_t r = st->kv_first[i]; r < st->length; r++)
            for (int32_t g = 0; g < st->kv_heads[i]; g++) {
                slate__kv_piece_get(st, i, g, r, piece);
                fn(ctx, piece, slate__kv_head_bytes(st, i));
            }
}

static size_t payload_size(const slate_state *st, const slate_state_extra *x) {
    const slate__program *p = &st->model->prog;
    size_t n = (size_t)p->n_states * 16 + 40;
    if (x) n += (size_t)x->n_tokens * 4 + x->user_len;
    n += (size_t)st->n_logit_rows * (size_t)p->n_vocab * sizeof(float);
    for (int32_t i = 0; i < p->n_states; i++)
        n += (size_t)(st->length - st->kv_first[i]) * st->kv_row_bytes[i];
    return n;
}

static void emit_crc(void *ctx, const void *p, size_t n) {
    uint32_t *crc = ctx;
    *crc = slate__crc32(*crc, p, n);
}
static void emit_sink(void *ctx, const void *p, size_t n) { put(ctx, p, n); }

/* Writes the whole file to k (which has room for HDR + payload_size bytes). */
static void write_state(const slate_state *st, const slate_state_extra *x, sink *k) {
    uint32_t crc = 0;
    payload(st, x, emit_crc, &crc);
    uint8_t h[HDR];
    header(st, x, HDR + payload_size(st, x), crc, h);
    put(k, h, HDR);
    payload(st, x, emit_sink, k);
}

/* A save replaces what is at path only when that is a slate state file (or an empty file, or
 * one shorter than the magic that starts like it: a damaged save): a package, a checkpoint or
 * any other file named by mistake (`/save model.slate`) is refused, not destroyed. What is not a
 * regular file is left to the atomic writer, which refuses it too. */
static slate_status refuse_foreign(const char *path, slate_error *err) {
    char head[8];
    size_t n = slate__file_head(path, head, sizeof head);
    if (n > 0 && memcmp(head, MAGIC, n) != 0)
        return slate__fail(err, SLATE_E_INVALID_ARG, "'%s' exists and is not a slate state "
                           "file (it does not start with '" MAGIC "'); it is not replaced: "
                           "remove it first or save elsewhere", path);
    return SLATE_OK;
}

slate_status slate__state_save_locked(slate_state *st, const char *path,
                                      const slate_state_extra *x, slate_error *err) {
    slate_status s = refuse_foreign(path, err);
    if (s) return s;
    slate__atomic_file f;
    s = slate__atomic_open(path, &f, err);
    if (s) return s;
    sink k = {&f, NULL, 0};
    write_state(st, x, &k);
    return slate__atomic_commit(&f, err);
}

/* ---- reading ----------------------------------------------------------------------------- */

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

slate_status slate__state_load_locked(slate_state *st, const uint8_t *d, size_t len,
                                      const char *what, slate_state_extra_out *xo,
                                      slate_error *err) {
    const slate_model *m = st->model;
    const slate__program *p = &m->prog;
    if (len < HDR)
        return slate__fail_at(err, SLATE_E_FORMAT, len, "%s: %zu bytes, shorter than the %u-byte "
                              "header (truncated?)", what, len, HDR);
    if (memcmp(d, MAGIC, 8) != 0)
        return slate__fail_at(err, SLATE_E_FORMAT, 0, "%s: not a slate state file (magic is not "
                              "'" MAGIC "')", what);
    uint32_t version = rd32(d + 8);
    if (version > VERSION)
        return slate__fail_at(err, SLATE_E_UNSUPPORTED, 8, "%s: state file version %u is newer "
                              "than this slate reads (%u)", what, version, VERSION);
    if (version == 0 || rd32(d + 12) != HDR)
        return slate__fail_at(err, SLATE_E_FORMAT, 8, "%s: version %u / header size %u: expected "
                              "%u / %u", what, version, rd32(d + 12), VERSION, HDR);
    if (rd32(d + 60) != slate__crc32(0, d, 60))
        return slate__fail_at(err, SLATE_E_FORMAT, 60, "%s: header checksum mismatch (stored "
                              "%08x, computed %08x): the file is corrupt", what, rd32(d + 60),
                              slate__crc32(0, d, 60));
    uint64_t size = rd64(d + 24);
    if (size != len)
        return slate__fail_at(err, SLATE_E_FORMAT, len < size ? len : 24, "%s: the header says "
                              "%" PRIu64 " bytes but there are %zu (%s)", what, size, len,
                              len < size ? "truncated" : "trailing bytes");
    /* The payload checksum before any field of it is read: a damaged byte is reported as
     * corruption, not as whatever field it happens to land in. */
    uint32_t crc = slate__crc32(0, d + HDR, len - HDR);
    if (crc != rd32(d + 56))
        return slate__fail_at(err, SLATE_E_FORMAT, 56, "%s: payload checksum mismatch (stored "
                              "%08x, computed %08x): the file is corrupt", what, rd32(d + 56), crc);
    uint64_t fp = rd64(d + 16);
    if (fp != m->fingerprint)
        return slate__fail(err, SLATE_E_INVALID_ARG, "%s belongs to another model: its "
                           "fingerprint is %016" PRIx64 ", this model's is %016" PRIx64, what, fp,
                           m->fingerprint);
    int32_t length = (int32_t)rd32(d + 32), n_tensors = (int32_t)rd32(d + 36);
    int32_t n_vocab = (int32_t)rd32(d + 40), n_rows = (int32_t)rd32(d + 44);
    int32_t n_tokens = (int32_t)rd32(d + 48);
    uint32_t flags = rd32(d + 52);
    if (n_tensors != p->n_states || n_vocab != p->n_vocab)
        return slate__fail_at(err, SLATE_E_FORMAT, 36, "%s: %d state tensors and vocabulary %d; "
                              "the model has %d and %d", what, n_tensors, n_vocab, p->n_states,
                              p->n_vocab);
    if (length < 0 || n_rows < 0 || n_rows > p->max_query || n_tokens < 0 ||
        n_tokens > MAX_LEDGER || (flags & ~1u))
        return slate__fail_at(err, SLATE_E_FORMAT, 32, "%s: length %d, logit rows %d (0..%d), "
                              "ledger %d (0..%d), flags %#x (only bit 0 is defined)", what,
                              length, n_rows, p->max_query, n_tokens, MAX_LEDGER, flags);
    /* Logits are the last rows of the call that fed positions: a state never has more rows of
     * them than positions (truncate, reset and set_length drop them). */
    if (n_rows > length)
        return slate__fail_at(err, SLATE_E_FORMAT, 44, "%s: %d logit rows for %d positions (a "
                              "state holds at most one row per position)", what, n_rows, length);
    if (length > st->n_ctx)
        return slate__fail(err, SLATE_E_CONTEXT_FULL, "%s holds %d positions; this state's "
                           "context is %d", what, length, st->n_ctx);
    /* Tensor table: same dtypes and row sizes as this state; first positions that leave the
     * next query its window (a released row is never needed back). */
#define FIRST(i) ((int32_t)rd32(d + HDR + (size_t)(i) * 16 + 4)) /* checked below */
    size_t need = HDR + (size_t)n_tensors * 16 + 40;
    if (need > len)
        return slate__fail_at(err, SLATE_E_FORMAT, len, "%s: truncated in the tensor table or "
                              "the fixed extras after it (%zu bytes, %zu needed)", what, len, need);
    for (int32_t i = 0; i < n_tensors; i++) {
        const uint8_t *e = d + HDR + (size_t)i * 16;
        uint32_t dt = rd32(e);
        uint64_t rb = rd64(e + 8);
        if (dt != (uint32_t)st->kv_dtype[i])
            return slate__fail(err, SLATE_E_INVALID_ARG, "%s: cache '%s' is %s in the file but %s "
                               "in this state (create the state with kv_dtype %s)", what,
                               p->tensors[p->states[i]].name, slate_dtype_name((slate_dtype)dt),
                               slate_dtype_name(st->kv_dtype[i]),
                               slate_dtype_name((slate_dtype)dt));
        if (rb != st->kv_row_bytes[i] || (version < 2 && rd32(e + 4) != 0))
            return slate__fail_at(err, SLATE_E_FORMAT, HDR + (uint64_t)i * 16, "%s: cache '%s' "
                                  "rows of %" PRIu64 " bytes, reserved field %u; expected %zu "
                                  "and 0", what, p->tensors[p->states[i]].name, rb, rd32(e + 4),
                                  st->kv_row_bytes[i]);
        uint32_t f = rd32(e + 4);
        int32_t w = m->state_window[i];
        if (f != 0 && (w <= 0 || (int64_t)f > (int64_t)length - w + 1))
            return slate__fail_at(err, SLATE_E_FORMAT, HDR + (uint64_t)i * 16 + 4, "%s: cache "
                                  "'%s' holds positions from %u of %d, but %s", what,
                                  p->tensors[p->states[i]].name, f, length,
                                  w <= 0 ? "it has no sliding window (every row is needed)"
                                         : "the next query's window needs earlier ones");
    }
    const uint8_t *misc = d + HDR + (size_t)n_tensors * 16;
    uint64_t user_len = rd64(misc + 32);
    if (user_len > MAX_USER)
        return slate__fail_at(err, SLATE_E_FORMAT, (uint64_t)(misc + 32 - d), "%s: user data of "
                              "%" PRIu64 " bytes (at most %zu)", what, user_len, MAX_USER);
    size_t total = need + (size_t)n_tokens * 4 + (size_t)user_len +
                   (size_t)n_rows * (size_t)p->n_vocab * sizeof(float);
    for (int32_t i = 0; i < n_tensors; i++)
        total += (size_t)(length - FIRST(i)) * st->kv_row_bytes[i];
    if (total != len)
        return slate__fail_at(err, SLATE_E_FORMAT, total < len ? total : len, "%s: the counts "
                              "say %zu bytes, the file has %zu", what, total, len);
    const uint8_t *ledger = misc + 40, *user = ledger + (size_t)n_tokens * 4;
    const uint8_t *logits = user + user_len;
    const uint8_t *rows = logits + (size_t)n_rows * (size_t)p->n_vocab * sizeof(float);
    if (xo) {
        xo->n_tokens = n_tokens;
        xo->user_len = (size_t)user_len;
        xo->has_rng = flags & 1u;
        for (int i = 0; i < 4; i++) xo->rng[i] = rd64(misc + 8 * i);
        if ((xo->tokens_cap && !xo->tokens) || xo->tokens_cap < 0 || (xo->user_cap && !xo->user))
            return slate__fail(err, SLATE_E_INVALID_ARG, "extra_out: a capacity without a buffer");
        if ((xo->tokens && xo->tokens_cap < n_tokens) || (xo->user && xo->user_cap < user_len))
            return slate__fail(err, SLATE_E_BUFFER_TOO_SMALL, "%s: the ledger has %d ids (room "
                               "for %d) and the user data %" PRIu64 " bytes (room for %zu)",
                               what, n_tokens, xo->tokens_cap, user_len, xo->user_cap);
        if (xo->tokens)
            for (int32_t i = 0; i < n_tokens; i++) xo->tokens[i] = (int32_t)rd32(ledger + 4 * i);
        if (xo->user && user_len) memcpy(xo->user, user, (size_t)user_len);
    }
    /* Everything checked: replace the state's content. */
    for (int32_t i = 0; i < n_tensors; i++) {
        slate__kv_put_rows(st, i, FIRST(i), length - FIRST(i), rows);
        rows += (size_t)(length - FIRST(i)) * st->kv_row_bytes[i];
        slate__kv_drop_below(st, i, FIRST(i)); /* what the state held before is not ours */
    }
    if (n_rows)
        memcpy(st->scratch + p->tensors[p->logits].offset, logits,
               (size_t)n_rows * (size_t)p->n_vocab * sizeof(float));
    st->length = length;
    st->n_logit_rows = n_rows;
    /* A file from a state with a longer reach holds more rows than this one keeps: the next
     * release step drops them, as it would have here. */
    slate__kv_release_window(st, false);
    slate__kv_huge_update(st, length); /* every row was just written, as by a prefill */
    return SLATE_OK;
#undef FIRST
}

/* ---- public ------------------------------------------------------------------------------ */

static bool acquire(slate_state *st) { return slate__state_acquire(st); }
static void release(slate_state *st) { slate__state_release(st); }

slate_status slate_state_save(slate_state *st, const char *path, const slate_state_extra *extra,
                              slate_error *err) {
    if (!st || !path) return slate__fail(err, SLATE_E_INVALID_ARG, "state and path must not be NULL");
    slate_status s = check_extra(extra, err);
    if (s) return s;
    if (!acquire(st)) return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    if (!(s = slate__state_enter(st, true, err))) s = slate__state_save_locked(st, path, extra, err);
    release(st);
    return s;
}

slate_status slate_state_save_mem(slate_state *st, const slate_state_extra *extra, void *buf,
                                  size_t cap, size_t *len_out, slate_error *err) {
    if (!st || !len_out || (!buf && cap))
        return slate__fail(err, SLATE_E_INVALID_ARG, "state and len_out must not be NULL; buf "
                           "may be NULL only with cap 0");
    slate_status s = check_extra(extra, err);
    if (s) return s;
    if (!acquire(st)) return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    if (!(s = slate__state_enter(st, true, err))) {
        size_t need = HDR + payload_size(st, extra);
        *len_out = need;
        if (cap < need) {
            s = slate__fail(err, SLATE_E_BUFFER_TOO_SMALL, "the state needs %zu bytes, the buffer "
                            "has %zu", need, cap);
        } else {
            sink k = {NULL, buf, 0};
            write_state(st, extra, &k);
        }
    }
    release(st);
    return s;
}

static slate_status load_common(slate_state *st, const uint8_t *d, size_t len, const char *what,
                                slate_state_extra_out *xo, slate_error *err) {
    if (!acquire(st)) return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    /* A spilled state is not read back: on success its content is replaced, on failure it stays
     * spilled (unchanged). A pressure reset is acknowledged only by a successful load. A reset
     * requested during an earlier call (one that, unlike predict, does not apply it when it
     * ends) is applied first: left pending, slate__state_leave below would take it for one
     * requested during this load and empty the rows just loaded. */
    slate__state_apply_reset(st);
    slate_status s = slate__state_load_locked(st, d, len, what, xo, err);
    if (!s) {
        slate__state_forget(st); /* drops the spill file, clears a pending reset report */
        s = slate__state_leave(st, s, err);
    }
    release(st);
    return s;
}

slate_status slate_state_load(slate_state *st, const char *path, slate_state_extra_out *xo,
                              slate_error *err) {
    if (!st || !path) return slate__fail(err, SLATE_E_INVALID_ARG, "state and path must not be NULL");
    slate__map map;
    slate_status s = slate__map_open(path, &map, err);
    if (s == SLATE_E_FORMAT) /* empty file */
        return slate__fail_at(err, SLATE_E_FORMAT, 0, "state file '%s' is empty (truncated?)", path);
    if (s) return s;
    char what[600];
    snprintf(what, sizeof what, "state file '%s'", path);
    s = load_common(st, map.data, map.size, what, xo, err);
    slate__map_close(&map);
    return s;
}

slate_status slate_state_load_mem(slate_state *st, const void *data, size_t len,
                                  slate_state_extra_out *xo, slate_error *err) {
    if (!st || (!data && len))
        return slate__fail(err, SLATE_E_INVALID_ARG, "state must not be NULL; data may be NULL "
                           "only with len 0");
    return load_common(st, data, len, "state data", xo, err);
}

slate_status slate_sampler_get_rng(const slate_sampler *s, uint64_t rng_out[4]) {
    if (!s || !rng_out) return SLATE_E_INVALID_ARG;
    slate__sampler_rng_get(s, rng_out);
    return SLATE_OK;
}

slate_status slate_sampler_set_rng(slate_sampler *s, const uint64_t rng[4], slate_error *err) {
    if (!s || !rng) return slate__fail(err, SLATE_E_INVALID_ARG, "sampler and rng must not be NULL");
    if (slate__sampler_rng_set(s, rng) != SLATE_OK)
        return slate__fail(err, SLATE_E_INVALID_ARG, "rng is all zero (not a valid xoshiro256** "
                           "state)");
    return SLATE_OK;
}
