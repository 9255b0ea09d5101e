/* fuzz_state_file.c - libFuzzer target for the state file reader (slate_state_load_mem: header,
 * tensor table, extras, checksums, bounds). A tiny fixed model (tests/unit/tinymodel.c, default
 * options) is written and opened once, with one f16 and one int8 state to load into; a state
 * that loads is run for one more token.
 *
 * Corpus files carry the placeholder fingerprint 5afe5afe5afe5afe: the target patches in the
 * model's real fingerprint (and recomputes the header CRC if it was valid), so the corpus gets
 * past the fingerprint check even after the model's bytes change. Any other value exercises
 * the "another model" refusal.
 *
 * The corpus (tests/fuzz/corpus/state_file/) was written by this file's generator:
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

static slate_model *g_model;
static slate_state *g_f16, *g_i8;

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

static int init(void) {
    if (g_model) return 0;
    char path[64];
    snprintf(path, sizeof path, "/tmp/slate-fuzz-state-%ld.slate", (long)getpid());
    tm_opts o = tm_default();
    if (tm_write(path, &o, NULL) != SLATE_OK) return -1;
    slate_model_params mp = slate_model_default_params();
    mp.n_threads = 1;
    slate_status s = slate_model_open(path, &mp, &g_model, NULL);
    remove(path); /* weights are read into memory */
    if (s) return -1;
    slate_state_params sp = slate_state_default_params();
    if (slate_state_create(g_model, &sp, &g_f16, NULL)) return -1;
    sp.kv_dtype_set = true;
    sp.kv_dtype = SLATE_DTYPE_I8;
    if (slate_state_create(g_model, &sp, &g_i8, NULL)) return -1;
    return 0;
}

static void try_load(slate_state *st, const uint8_t *d, size_t n) {
    int32_t tokens[64];
    uint8_t user[256];
    slate_state_extra_out xo;
    memset(&xo, 0, sizeof xo);
    xo.tokens = tokens;
    xo.tokens_cap = 64;
    xo.user = user;
    xo.user_cap = sizeof user;
    if (slate_state_load_mem(st, d, n, &xo, NULL) == SLATE_OK) {
        int32_t id = 3;
        if (slate_state_length(st) < slate_state_n_ctx(st)) slate_state_predict(st, &id, 1, NULL, NULL);
    }
    slate_state_reset(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (init()) return 0;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    if (size >= 64 && rd64(buf + 16) == PLACEHOLDER) {
        slate_model_info info;
        slate_model_get_info(g_model, &info);
        bool crc_ok = rd32(buf + 60) == slate__crc32(0, buf, 60);
        wr64(buf + 16, info.fingerprint);
        if (crc_ok) wr32(buf + 60, slate__crc32(0, buf, 60));
    }
    try_load(g_f16, buf, size);
    try_load(g_i8, buf, size);
    free(buf);
    return 0;
}

#ifdef SLATE_STATE_CORPUS_MAIN
/* Writes the seed corpus into argv[1]. */
static void put_file(const char *dir, const char *name, const uint8_t *d, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

static uint8_t *save(slate_state *st, const slate_state_extra *x, size_t *n) {
    slate_state_save_mem(st, x, NULL, 0, n, NULL);
    uint8_t *b = malloc(*n);
    if (!b || slate_state_save_mem(st, x, b, *n, n, NULL) != SLATE_OK) exit(1);
    wr64(b + 16, PLACEHOLDER);
    wr32(b + 60, slate__crc32(0, b, 60));
    return b;
}

int main(int argc, char **argv) {
    if (argc != 2 || init()) return 1;
    int32_t ids[5] = {1, 40, 41, 42, 43};
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
    size_t n;
    slate_state_predict(g_f16, ids, 5, NULL, NULL);
    uint8_t *b = save(g_f16, &x, &n);
    put_file(argv[1], "valid_f16.state", b, n);
    put_file(argv[1], "truncated.state", b, n / 2);
    put_file(argv[1], "header_only.state", b, 64);
    uint8_t *c = malloc(n);
    memcpy(c, b, n);
    c[n - 3] ^= 0x10;
    put_file(argv[1], "bad_payload_crc.state", c, n);
    memcpy(c, b, n);
    wr32(c + 8, 2);
    wr32(c + 60, slate__crc32(0, c, 60));
    put_file(argv[1], "future_version.state", c, n);
    memcpy(c, b, n);
    wr64(c + 16, 0x0123456789abcdefull);
    wr32(c + 60, slate__crc32(0, c, 60));
    put_file(argv[1], "other_model.state", c, n);
    memcpy(c, b, n);
    wr32(c + 32, 1000); /* length past the context, header CRC fixed */
    wr32(c + 60, slate__crc32(0, c, 60));
    put_file(argv[1], "length_past_context.state", c, n);
    free(c);
    free(b);
    slate_state_truncate(g_f16, 3, NULL); /* no logits */
    b = save(g_f16, NULL, &n);
    put_file(argv[1], "valid_no_logits.state", b, n);
    free(b);
    slate_state_predict(g_i8, ids, 5, NULL, NULL);
    b = save(g_i8, &x, &n);
    put_file(argv[1], "valid_i8.state", b, n);
    free(b);
    return 0;
}
#endif
