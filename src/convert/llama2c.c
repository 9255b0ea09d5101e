/*
 * llama2c.c - importer for llama2.c checkpoints (legacy "version 0" .bin written by
 * export.py / the original train.py): seven little-endian int32 (dim, hidden_dim, n_layers,
 * n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means the classifier is
 * stored separately at the end), then float32 arrays: token_embedding [V][dim], rms_att [L][dim],
 * wq [L][dim][dim], wk [L][kv_dim][dim], wv [L][kv_dim][dim], wo [L][dim][dim],
 * rms_ffn [L][dim], w1 [L][hidden][dim], w2 [L][dim][hidden], w3 [L][hidden][dim],
 * rms_final [dim], freq_cis_real/imag [seq_len][head_size/2] (unused: slate computes RoPE),
 * [wcls [V][dim]]. The file size must match exactly. Q and K use adjacent-pair RoPE.
 * The newer versioned exports (magic "ak42") are refused with a message.
 */
#include "convert.h"
#include "exec/program.h"
#include "tok/tok.h"

#include <stdio.h>
#include <string.h>

static void unmap(void *ctx) {
    slate__map *m = ctx;
    slate__map_close(m);
    slate__free(m);
}

static slate_status add(slate__import *imp, const char *name, const uint8_t *data, int64_t d0,
                        int64_t d1, slate_error *err) {
    slate__src_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.type = SLATE__SRC_F32;
    t.n_dims = d1 ? 2 : 1;
    t.dims[0] = d0;
    t.dims[1] = d1;
    t.data = data;
    t.nbytes = (uint64_t)d0 * (uint64_t)(d1 ? d1 : 1) * 4;
    return slate__import_add(imp, &t, err);
}

static bool file_exists(const char *p) {
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Parses the checkpoint bytes (header + weights) into imp; tensors point into data. */
static slate_status parse(const uint8_t *data, size_t size, const char *path, slate__import *imp,
                          slate_error *err) {
    slate_status s = SLATE_OK;
    if (size < 28) {
        s = slate__fail_at(err, SLATE_E_FORMAT, 0, "'%s': %zu bytes, too small for a llama2.c "
                           "header (28 bytes)", path, size);
        return s;
    }
    uint32_t magic;
    memcpy(&magic, data, 4);
    if (magic == 0x616b3432u) { /* export.py writes struct.pack('I', 0x616b3432) */
        s = slate__fail_at(err, SLATE_E_UNSUPPORTED, 0, "'%s': versioned llama2.c export "
                           "(magic ak42) is not supported; use the legacy export", path);
        return s;
    }
    int32_t h[7];
    memcpy(h, data, sizeof h);
    int32_t dim = h[0], hidden = h[1], n_layers = h[2], n_heads = h[3], n_kv = h[4];
    /* |vocab_size| in range before negating: -INT32_MIN overflows. */
    bool vocab_ok = h[5] >= -SLATE__MAX_VOCAB && h[5] <= SLATE__MAX_VOCAB && h[5] != 0;
    int32_t vocab = !vocab_ok ? 0 : h[5] < 0 ? -h[5] : h[5], seq_len = h[6];
    bool shared = h[5] > 0;
    if (dim < 2 || dim > 65536 || hidden < 1 || hidden > (1 << 20) || n_layers < 1 ||
        n_layers > 1024 || n_heads < 1 || n_heads > dim || dim % n_heads || n_kv < 1 ||
        n_kv > n_heads || n_heads % n_kv || !vocab_ok || seq_len < 1 ||
        seq_len > SLATE__MAX_CTX || (dim / n_heads) % 2) {
        s = slate__fail_at(err, SLATE_E_FORMAT, 0, "'%s': implausible llama2.c header (dim %d, "
                           "hidden %d, layers %d, heads %d, kv heads %d, vocab %d, seq_len %d)",
                           path, dim, hidden, n_layers, n_heads, n_kv, h[5], seq_len);
        return s;
    }
    int64_t hs = dim / n_heads, kv_dim = (int64_t)n_kv * hs, L = n_layers;
    int64_t floats = (int64_t)vocab * dim + L * dim + L * dim * dim + 2 * L * kv_dim * dim +
                     L * dim * dim + L * dim + 3 * L * (int64_t)hidden * dim + dim +
                     (int64_t)seq_len * hs + (shared ? 0 : (int64_t)vocab * dim);
    uint64_t expect = 28 + (uint64_t)floats * 4;
    if (size != expect) {
        s = slate__fail_at(err, SLATE_E_FORMAT, size < expect ? size : expect,
                           "'%s': the header implies %llu bytes but the file has %zu (%s)", path,
                           (unsigned long long)expect, size,
                           size < expect ? "truncated?" : "trailing data or wrong header");
        return s;
    }
    const uint8_t *p = data + 28;
    char n[96];
#define NEXT(count) (p += (size_t)(count) * 4, p - (size_t)(count) * 4)
    if ((s = add(imp, "token_embd.weight", NEXT((int64_t)vocab * dim), vocab, dim, err))) return s;
    const uint8_t *rms_att = NEXT(L * dim), *wq = NEXT(L * dim * dim), *wk = NEXT(L * kv_dim * dim);
    const uint8_t *wv = NEXT(L * kv_dim * dim), *wo = NEXT(L * dim * dim), *rms_ffn = NEXT(L * dim);
    const uint8_t *w1 = NEXT(L * hidden * dim), *w2 = NEXT(L * dim * hidden);
    const uint8_t *w3 = NEXT(L * hidden * dim), *rms_final = NEXT(dim);
    p += (size_t)seq_len * (size_t)hs * 4; /* freq_cis_real + freq_cis_imag: unused */
    const uint8_t *wcls = shared ? NULL : NEXT((int64_t)vocab * dim);
#undef NEXT
    for (int64_t l = 0; l < L && !s; l++) {
        snprintf(n, sizeof n, "blk.%lld.attn_norm.weight", (long long)l);
        s = add(imp, n, rms_att + l * dim * 4, dim, 0, err);
        snprintf(n, sizeof n, "blk.%lld.attn_q.weight", (long long)l);
        if (!s) s = add(imp, n, wq + l * dim * dim * 4, dim, dim, err);
        snprintf(n, sizeof n, "blk.%lld.attn_k.weight", (long long)l);
        if (!s) s = add(imp, n, wk + l * kv_dim * dim * 4, kv_dim, dim, err);
        snprintf(n, sizeof n, "blk.%lld.attn_v.weight", (long long)l);
        if (!s) s = add(imp, n, wv + l * kv_dim * dim * 4, kv_dim, dim, err);
        snprintf(n, sizeof n, "blk.%lld.attn_output.weight", (long long)l);
        if (!s) s = add(imp, n, wo + l * dim * dim * 4, dim, dim, err);
        snprintf(n, sizeof n, "blk.%lld.ffn_norm.weight", (long long)l);
        if (!s) s = add(imp, n, rms_ffn + l * dim * 4, dim, 0, err);
        snprintf(n, sizeof n, "blk.%lld.ffn_gate.weight", (long long)l);
        if (!s) s = add(imp, n, w1 + l * hidden * dim * 4, hidden, dim, err);
        snprintf(n, sizeof n, "blk.%lld.ffn_down.weight", (long long)l);
        if (!s) s = add(imp, n, w2 + l * dim * hidden * 4, dim, hidden, err);
        snprintf(n, sizeof n, "blk.%lld.ffn_up.weight", (long long)l);
        if (!s) s = add(imp, n, w3 + l * hidden * dim * 4, hidden, dim, err);
    }
    if (!s) s = add(imp, "output_norm.weight", rms_final, dim, 0, err);
    if (!s && wcls) s = add(imp, "output.weight", wcls, vocab, dim, err);
    if (s) return s;

    slate__arch *a = &imp->a;
    snprintf(a->name, sizeof a->name, "llama");
    a->n_vocab = vocab;
    a->dim = dim;
    a->n_layers = n_layers;
    a->n_heads = n_heads;
    a->n_kv_heads = n_kv;
    a->head_dim = (int32_t)hs;
    a->ffn_dim = hidden;
    a->n_ctx = seq_len;
    a->norm_eps = 1e-5f;
    a->rope_theta = 10000.0f;
    a->rope_mode = SLATE__ROPE_ADJACENT;
    a->rope_dim = (int32_t)hs;
    a->tied = shared;

    return SLATE_OK;
}

slate_status slate__import_llama2c_mem(const uint8_t *data, size_t size, slate__import *imp,
                                       slate_error *err) {
    memset(imp, 0, sizeof *imp);
    slate_status s = parse(data, size, "(memory)", imp, err);
    if (s) slate__import_free(imp);
    return s;
}

slate_status slate__import_llama2c(const char *path, const char *tok_path, slate__import *imp,
                                   slate_error *err) {
    memset(imp, 0, sizeof *imp);
    slate__map *m = slate__calloc(1, sizeof *m);
    if (!m) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    slate_status s = slate__map_open(path, m, err);
    if (s) {
        slate__free(m);
        return s;
    }
    imp->cleanup = unmap;
    imp->cleanup_ctx = m;
    if ((s = parse(m->data, m->size, path, imp, err))) goto fail;
    int32_t vocab = imp->a.n_vocab;
    /* Tokenizer: explicit, else tokenizer.bin / tok<V>.bin beside the checkpoint. */
    char guess[4096];
    if (!tok_path) {
        const char *slash = strrchr(path, '/');
        int dlen = slash ? (int)(slash - path) + 1 : 0;
        snprintf(guess, sizeof guess, "%.*stok%d.bin", dlen, path, vocab);
        if (!file_exists(guess)) snprintf(guess, sizeof guess, "%.*stokenizer.bin", dlen, path);
        if (!file_exists(guess)) {
            s = slate__fail(err, SLATE_E_INVALID_ARG, "'%s' is a llama2.c checkpoint: give its "
                            "tokenizer with --tokenizer (no tok%d.bin or tokenizer.bin beside it)",
                            path, vocab);
            goto fail;
        }
        tok_path = guess;
    }
    if ((s = slate_tokenizer_open(tok_path, &imp->tok, err))) goto fail;
    if (slate_tokenizer_n_vocab(imp->tok) != vocab) {
        s = slate__fail(err, SLATE_E_FORMAT, "tokenizer '%s' has %d tokens but the checkpoint's "
                        "vocabulary is %d", tok_path, slate_tokenizer_n_vocab(imp->tok), vocab);
        goto fail;
    }
    /* llama2.c's run.c stops when the model produces BOS: that is how these models end a story. */
    imp->stop_ids[imp->n_stop_ids++] = slate_tokenizer_bos(imp->tok);
    return SLATE_OK;
fail:
    slate__import_free(imp);
    return s;
}
