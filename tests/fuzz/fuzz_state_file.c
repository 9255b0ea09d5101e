/* fuzz_state_file.c - libFuzzer target for the state file reader (slate_state_load_mem: header,
 * version, tensor table with its first positions, extras, checksums, bounds). Three tiny models
 * (tests/unit/tinymodel.c) are written and opened once: the default one (no window) with an
 * f16 and an int8 state, one of the same shapes whose layer 0 has a sliding window of WINDOW
 * positions (layer 1 attends globally) with a releasing f16 state and a keep-all int8 state,
 * and one of head_dim 64 whose f16 state stores K dim-major in blocks of 16 where the kernel
 * table has attention_k16 (the AVX-512 ones: src/state/kvmem.c, K16), with an int8 state
 * beside it. Every input is tried on all six; a state that loads is run for one more token.
 *
 * Corpus files carry the placeholder fingerprint 5afe5afe5afe5afe: the target patches in each
 * model's real fingerprint in turn (and recomputes the header CRC if it was valid), so the corpus
 * gets past the fingerprint check even after the models' bytes change. Any other value exercises
 * the "another model" refusal. A placeholder file is then tried once more with its size field
 * and both checksums recomputed, since a random mutation almost never keeps them right and would
 * otherwise stop at the checksum. Since the shapes are equal, a file saved from either model
 * loads into the other unless a first position above 0 names a cache without a window.
 *
 * The corpus (tests/fuzz/corpus/state_file/) is written by this file's generator, which also
 * checks that each valid seed loads (and that a trimmed windowed file continues exactly like the
 * state it was cut from) and each broken one is refused with the expected status:
 *   cc -std=c11 -DSLATE_STATE_CORPUS_MAIN -Iinclude -Isrc tests/fuzz/fuzz_state_file.c \
 *      build/libslate.a -lcjson -lpcre2-8 -lunistring -lm -lpthread -o /tmp/gen && \
 *   /tmp/gen tests/fuzz/corpus/state_file
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit/tinymodel.c"
#include "core/core.h"
#include "slate.h"

#define PLACEHOLDER 0x5afe5afe5afe5afeull
#define WINDOW 4

/* [0] the default model, [1] the windowed one, [2] the head_dim 64 one; per model an f16 and
 * an int8 state. */
enum { N_MODELS = 3 };
static slate_model *g_model[N_MODELS];
static slate_state *g_state[N_MODELS][2];

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int open_model(int k, const tm_opts *o) {
    char path[4096];
    const char *tmp = getenv("TMPDIR"); /* POSIX's temporary directory, /tmp when unset */
    if (!tmp || !*tmp) tmp = "/tmp";
    int n = snprintf(path, sizeof path, "%s/slate-fuzz-state-%ld-%d.slate", tmp, (long)getpid(),
                     k);
    if (n < 0 || (size_t)n >= sizeof path) return -1;
    if (tm_write(path, o, NULL) != SLATE_OK) return -1;
    slate_model_params mp = slate_model_default_params();
    mp.n_threads = 1;
    slate_status s = slate_model_open(path, &mp, &g_model[k], NULL);
    remove(path); /* weights are read into memory */
    if (s) return -1;
    slate_state_params sp = slate_state_default_params();
    if (slate_state_create(g_model[k], &sp, &g_state[k][0], NULL)) return -1;
    sp.kv_dtype_set = true;
    sp.kv_dtype = SLATE_DTYPE_I8;
    sp.kv_keep_all = k == 1; /* a keep-all state takes a file's first positions too */
    if (slate_state_create(g_model[k], &sp, &g_state[k][1], NULL)) return -1;
    return 0;
}

static int init(void) {
    if (g_model[0]) return 0;
    tm_opts o = tm_default();
    if (open_model(0, &o)) return -1;
    o.window = WINDOW;
    o.window_layers = 1; /* layer 0 windowed, layer 1 global */
    if (open_model(1, &o)) return -1;
    o = tm_default(); /* head_dim 64: two kv heads of two query heads (K16's shapes) */
    o.dim = 256;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.ffn_dim = 96;
    o.n_ctx = 40; /* no multiple of 16: the cache rounds up to whole blocks */
    o.max_query = 24;
    return open_model(2, &o);
}

/* Replaces the placeholder fingerprint by model k's (buf holds size bytes). */
static void patch(uint8_t *buf, size_t size, int k) {
    if (size < 64 || rd64(buf + 16) != PLACEHOLDER) return;
    slate_model_info info;
    slate_model_get_info(g_model[k], &info);
    bool crc_ok = rd32(buf + 60) == slate__crc32(0, buf, 60);
    wr64(buf + 16, info.fingerprint);
    if (crc_ok) wr32(buf + 60, slate__crc32(0, buf, 60));
}

static slate_status try_load(slate_state *st, const uint8_t *d, size_t n, slate_error *e) {
    int32_t tokens[64];
    uint8_t user[256];
    slate_state_extra_out xo;
    memset(&xo, 0, sizeof xo);
    xo.tokens = tokens;
    xo.tokens_cap = 64;
    xo.user = user;
    xo.user_cap = sizeof user;
    /* With an error to fill, so every refusal's message is formatted (and must say something). */
    slate_error own;
    if (!e) e = &own;
    memset(e, 0, sizeof *e);
    slate_status s = slate_state_load_mem(st, d, n, &xo, e);
    if (s != SLATE_OK && (e->code != s || !e->message[0])) {
        fprintf(stderr, "refused with %s but no message\n", slate_status_str(s));
        abort();
    }
    if (s == SLATE_OK) {
        int32_t id = 3;
        if (slate_state_length(st) < slate_state_n_ctx(st)) slate_state_predict(st, &id, 1, NULL, NULL);
    }
    slate_state_reset(st);
    return s;
}

/* The same, with the size field and both checksums made to agree with the bytes: a mutation
 * of the table, the counts or the rows then reaches the checks behind the checksums. */
static void repair(uint8_t *buf, size_t size, int k) {
    if (size < 64 || rd64(buf + 16) != PLACEHOLDER) return;
    slate_model_info info;
    slate_model_get_info(g_model[k], &info);
    wr64(buf + 16, info.fingerprint);
    wr64(buf + 24, size);
    wr32(buf + 56, slate__crc32(0, buf + 64, size - 64));
    wr32(buf + 60, slate__crc32(0, buf, 60));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (init()) return 0;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    bool placeholder = size >= 64 && rd64(data + 16) == PLACEHOLDER;
    for (int k = 0; k < N_MODELS; k++) {
        for (int fixed = 0; fixed < 1 + placeholder; fixed++) {
            if (size) memcpy(buf, data, size);
            if (fixed) repair(buf, size, k);
            else patch(buf, size, k);
            try_load(g_state[k][0], buf, size, NULL);
            try_load(g_state[k][1], buf, size, NULL);
        }
    }
    free(buf);
    return 0;
}

#ifdef SLATE_STATE_CORPUS_MAIN
/* Writes the seed corpus into argv[1], checking on the way that each file gets the statuses
 * listed for it from the four states of the first two models (plain f16, plain i8, windowed
 * f16, windowed keep-all i8), or, for the head_dim 64 model's files, from its two states. */
#include "kernels/kernels.h"
#include "plan/model.h"

#define OK SLATE_OK
#define FMT SLATE_E_FORMAT
#define ARG SLATE_E_INVALID_ARG

static const char *g_dir;

/* States 2 k0 .. 2 k0 + n_want - 1 (model j / 2, state j % 2) must give want[]. */
static void put_states(const char *name, const uint8_t *d, size_t n, int k0,
                       const slate_status *want, int n_want) {
    uint8_t *c = malloc(n ? n : 1);
    for (int j = 2 * k0; j < 2 * k0 + n_want; j++) {
        if (n) memcpy(c, d, n);
        patch(c, n, j / 2);
        slate_error e;
        memset(&e, 0, sizeof e);
        slate_status s = try_load(g_state[j / 2][j % 2], c, n, &e);
        printf("%-28s state %d: %s%s%s\n", name, j, slate_status_str(s), s ? ": " : "",
               s ? e.message : "");
        if (s != want[j - 2 * k0]) {
            fprintf(stderr, "%s: state %d gave %s, expected %s\n", name, j, slate_status_str(s),
                    slate_status_str(want[j - 2 * k0]));
            exit(1);
        }
    }
    free(c);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

static void put_file(const char *name, const uint8_t *d, size_t n, slate_status w0,
                     slate_status w1, slate_status w2, slate_status w3) {
    const slate_status want[4] = {w0, w1, w2, w3};
    put_states(name, d, n, 0, want, 4);
}

/* A file of the head_dim 64 model: its f16 (K16) and int8 states must give w0 and w1. */
static void put_k16_file(const char *name, const uint8_t *d, size_t n, slate_status w0,
                         slate_status w1) {
    const slate_status want[2] = {w0, w1};
    put_states(name, d, n, 2, want, 2);
}

static uint8_t *save(slate_state *st, const slate_state_extra *x, size_t *n) {
    slate_state_save_mem(st, x, NULL, 0, n, NULL);
    uint8_t *b = malloc(*n);
    if (!b || slate_state_save_mem(st, x, b, *n, n, NULL) != SLATE_OK) exit(1);
    wr64(b + 16, PLACEHOLDER);
    wr32(b + 60, slate__crc32(0, b, 60));
    return b;
}

/* Both checksums and the size field after an edit. */
static void fix(uint8_t *b, size_t n) {
    wr64(b + 24, n);
    wr32(b + 56, slate__crc32(0, b + 64, n - 64));
    wr32(b + 60, slate__crc32(0, b, 60));
}

static uint8_t *copy_of(const uint8_t *b, size_t n) {
    uint8_t *c = malloc(n);
    memcpy(c, b, n);
    return c;
}

/* A copy of the saved file b (every first position 0) with version `version` and tensor i's
 * first position first[i], holding only its rows first[i]..length-1 (none when first[i] is at or
 * past the length), both checksums fixed. */
static uint8_t *trim(const uint8_t *b, size_t n, uint32_t version, const uint32_t *first,
                     size_t *out_n) {
    uint32_t length = rd32(b + 32), nt = rd32(b + 36), n_vocab = rd32(b + 40);
    uint32_t n_rows = rd32(b + 44), n_tok = rd32(b + 48);
    size_t misc = 64 + (size_t)nt * 16, rows = misc + 40 + (size_t)n_tok * 4 +
                  (size_t)rd64(b + misc + 32) + (size_t)n_rows * n_vocab * 4;
    uint8_t *c = malloc(n);
    memcpy(c, b, rows);
    wr32(c + 8, version);
    size_t src = rows, dst = rows;
    for (uint32_t i = 0; i < nt; i++) {
        size_t rb = (size_t)rd64(b + 64 + 16 * i + 8);
        uint32_t keep = first[i] >= length ? 0 : length - first[i];
        wr32(c + 64 + 16 * i + 4, first[i]);
        memcpy(c + dst, b + src + (size_t)(length - keep) * rb, (size_t)keep * rb);
        src += (size_t)length * rb;
        dst += (size_t)keep * rb;
    }
    if (src != n) exit(1); /* not a file with every first position 0 */
    fix(c, dst);
    *out_n = dst;
    return c;
}

/* Loads file b into state st of model k, runs token 7, copies the logits to out. */
static void continue_from(int k, slate_state *st, const uint8_t *b, size_t n, float *out) {
    uint8_t *c = copy_of(b, n);
    patch(c, n, k);
    slate_error e;
    int32_t id = 7;
    if (slate_state_load_mem(st, c, n, NULL, &e) ||
        slate_state_predict(st, &id, 1, NULL, &e)) {
        fprintf(stderr, "continue: %s\n", e.message);
        exit(1);
    }
    memcpy(out, slate_state_logits(st, NULL), TM_VOCAB * sizeof(float));
    slate_state_reset(st);
    free(c);
}

int main(int argc, char **argv) {
    if (argc != 2 || init()) return 1;
    g_dir = argv[1];
    const slate_status FULL = SLATE_E_CONTEXT_FULL, NEWER = SLATE_E_UNSUPPORTED;
    int32_t ids[12] = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50};
    slate_state_extra x;
    memset(&x, 0, sizeof x);
    x.tokens = ids;
    x.n_tokens = 5;
    x.has_rng = true;
    x.rng[0] = 1;
    x.rng[1] = 2;
    x.rng[2] = 3;
    x.rng[3] = 4;
    x.user = "hello";
    x.user_len = 5;
    size_t n, m;
    slate_state *f16 = g_state[0][0], *i8 = g_state[0][1];
    slate_state *wf16 = g_state[1][0], *wi8 = g_state[1][1];

    /* The default model's caches, version 2 (every first position 0) and 1. */
    slate_state_predict(f16, ids, 5, NULL, NULL);
    uint8_t *b = save(f16, &x, &n), *c;
    put_file("valid_f16.state", b, n, OK, ARG, OK, ARG);
    put_file("truncated.state", b, n / 2, FMT, FMT, FMT, FMT);
    put_file("header_only.state", b, 64, FMT, FMT, FMT, FMT);
    c = copy_of(b, n);
    c[n - 3] ^= 0x10;
    put_file("bad_payload_crc.state", c, n, FMT, FMT, FMT, FMT);
    memcpy(c, b, n);
    wr32(c + 8, 3);
    wr32(c + 60, slate__crc32(0, c, 60));
    put_file("future_version.state", c, n, NEWER, NEWER, NEWER, NEWER);
    memcpy(c, b, n);
    wr32(c + 8, 0);
    wr32(c + 60, slate__crc32(0, c, 60));
    put_file("version_0.state", c, n, FMT, FMT, FMT, FMT);
    memcpy(c, b, n);
    wr32(c + 8, 1);
    wr32(c + 60, slate__crc32(0, c, 60));
    put_file("valid_v1_f16.state", c, n, OK, ARG, OK, ARG);
    wr32(c + 64 + 4, 1); /* version 1 has no first positions: the field is reserved (0) */
    fix(c, n);
    put_file("v1_first_set.state", c, n, FMT, ARG, FMT, ARG);
    memcpy(c, b, n);
    wr64(c + 16, 0x0123456789abcdefull);
    wr32(c + 60, slate__crc32(0, c, 60));
    put_file("other_model.state", c, n, ARG, ARG, ARG, ARG);
    memcpy(c, b, n);
    wr32(c + 32, 1000); /* length past the context, header CRC fixed */
    wr32(c + 60, slate__crc32(0, c, 60));
    put_file("length_past_context.state", c, n, FULL, FULL, FULL, FULL);
    /* Cut inside the tensor table and inside the extras, size and checksums fixed. */
    memcpy(c, b, n);
    fix(c, 64 + 40);
    put_file("truncated_v2_table.state", c, 64 + 40, FMT, FMT, FMT, FMT);
    memcpy(c, b, n);
    fix(c, 64 + 4 * 16 + 20);
    put_file("truncated_v2_extras.state", c, 64 + 4 * 16 + 20, FMT, FMT, FMT, FMT);
    free(c);
    free(b);
    slate_state_truncate(f16, 3, NULL); /* no logits */
    b = save(f16, NULL, &n);
    put_file("valid_no_logits.state", b, n, OK, ARG, OK, ARG);
    free(b);
    /* One position and its logits, the position cut: logit rows past the length. */
    slate_state_reset(f16);
    slate_state_predict(f16, ids, 1, NULL, NULL);
    b = save(f16, NULL, &n);
    m = n - (size_t)rd32(b + 32) * 4 * (size_t)rd64(b + 64 + 8); /* 4 caches, equal rows */
    wr32(b + 32, 0);
    fix(b, m);
    put_file("logits_past_length.state", b, m, FMT, FMT, FMT, FMT);
    free(b);
    slate_state_reset(f16);
    slate_state_predict(i8, ids, 5, NULL, NULL);
    b = save(i8, &x, &n);
    put_file("valid_i8.state", b, n, ARG, OK, ARG, OK);
    free(b);
    slate_state_reset(i8);

    /* The windowed model: 12 positions, layer 0's caches (tensors 0 and 1) need the last
     * WINDOW - 1 of them for the next query, so they may start at 12 - WINDOW + 1. */
    const uint32_t L = 12, F = L - WINDOW + 1;
    slate_state_predict(wf16, ids, (int32_t)L, NULL, NULL);
    b = save(wf16, &x, &n);
    put_file("window_f16.state", b, n, OK, ARG, OK, ARG);
    uint32_t first[4] = {F, F, 0, 0};
    c = trim(b, n, 2, first, &m);
    put_file("window_first_f16.state", c, m, FMT, ARG, OK, ARG);
    /* The trimmed file continues exactly as the whole one. */
    float whole[TM_VOCAB], trimmed[TM_VOCAB];
    continue_from(1, wf16, b, n, whole);
    continue_from(1, wf16, c, m, trimmed);
    if (memcmp(whole, trimmed, sizeof whole)) {
        fprintf(stderr, "a trimmed windowed file does not continue as the whole one\n");
        exit(1);
    }
    /* Its first-position fields without the rows cut: the counts disagree with the size. */
    free(c);
    c = copy_of(b, n);
    wr32(c + 64 + 4, F);
    wr32(c + 64 + 16 + 4, F);
    fix(c, n);
    put_file("first_rows_not_cut.state", c, n, FMT, ARG, FMT, ARG);
    free(c);
    c = trim(b, n, 1, first, &m);
    put_file("window_first_v1.state", c, m, FMT, ARG, FMT, ARG);
    free(c);
    const uint32_t bad_first[][4] = {
        {F + 1, F, 0, 0},          /* the next query's window needs row F */
        {F, L, 0, 0},              /* at the length: no row held */
        {L + 1, F, 0, 0},          /* past the length */
        {0x80000000u, 0, 0, 0},    /* negative as an i32 */
        {0, 0, 1, 0},              /* layer 1 attends globally: every row is needed */
        {F, F, F, F},
    };
    const char *bad_name[] = {"first_past_window.state", "first_at_length.state",
                              "first_past_length.state", "first_negative.state",
                              "first_no_window.state", "first_all_tensors.state"};
    for (size_t i = 0; i < sizeof bad_name / sizeof bad_name[0]; i++) {
        c = trim(b, n, 2, bad_first[i], &m);
        put_file(bad_name[i], c, m, FMT, ARG, FMT, ARG);
        free(c);
    }
    /* A shorter window state without logits (1 position: only 0 is a valid first). */
    slate_state_truncate(wf16, 1, NULL);
    free(b);
    b = save(wf16, NULL, &n);
    put_file("window_one_position.state", b, n, OK, ARG, OK, ARG);
    free(b);
    slate_state_reset(wf16);
    slate_state_predict(wi8, ids, (int32_t)L, NULL, NULL);
    b = save(wi8, &x, &n);
    c = trim(b, n, 2, first, &m);
    put_file("window_first_i8.state", c, m, ARG, FMT, ARG, OK);
    free(c);
    free(b);
    slate_state_reset(wi8);

    /* The head_dim 64 model (context 40, so the last of its three K16 blocks is partial): 18
     * positions, one whole block and two of the next, saved from the f16 state, which must be
     * stored K16 where the table has attention_k16; the file continues as the state does. */
    slate_state *kf16 = g_state[2][0], *ki8 = g_state[2][1];
    if (slate__kernels_get()->attention_k16 && !kf16->kv_k16[0]) {
        fprintf(stderr, "the head_dim 64 model's f16 state is not stored K16\n");
        exit(1);
    }
    int32_t ids18[18];
    for (int i = 0; i < 18; i++) ids18[i] = 3 + 5 * i;
    if (slate_state_predict(kf16, ids18, 18, NULL, NULL) != SLATE_OK) exit(1);
    b = save(kf16, &x, &n);
    float live[TM_VOCAB], loaded[TM_VOCAB];
    int32_t next = 7; /* continue_from's token */
    if (slate_state_predict(kf16, &next, 1, NULL, NULL) != SLATE_OK) exit(1);
    memcpy(live, slate_state_logits(kf16, NULL), sizeof live);
    put_k16_file("valid_k16.state", b, n, OK, ARG);
    continue_from(2, kf16, b, n, loaded);
    if (memcmp(live, loaded, sizeof live)) {
        fprintf(stderr, "the K16 state's file does not continue as the state did\n");
        exit(1);
    }
    free(b);
    slate_state_reset(kf16);
    if (slate_state_predict(ki8, ids18, 18, NULL, NULL) != SLATE_OK) exit(1);
    b = save(ki8, NULL, &n);
    put_k16_file("valid_k16_i8.state", b, n, ARG, OK);
    free(b);
    slate_state_reset(ki8);
    return 0;
}
#endif
