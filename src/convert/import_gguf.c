/*
 * import_gguf.c - importer for llama-family GGUF files (architectures "llama", "qwen2",
 * "qwen3"). Hyper-parameters come from the "<arch>.*" keys, tensors keep their GGUF names
 * (the canonical names), GGUF's ne[0] (innermost) is the input dimension, so a [ne0=in,
 * ne1=out] tensor is already the [out][in] row-major matrix. llama.cpp's converter permutes
 * llama Q/K rows into adjacent-pair RoPE order; qwen2/qwen3 keep the HF "half" (NeoX) order.
 * A "rope_freqs.weight" tensor (Llama 3.1 GGUFs: per-frequency divisors) is refused with a
 * message for now (convert such models from their Hugging Face folder), never ignored.
 */
#include "convert.h"
#include "exec/program.h"
#include "gguf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void close_gguf(void *ctx) { slate__gguf_close(ctx); }

/* "<arch>.<suffix>" must be an integer in lo..hi; absent, it is *out = dflt (or an error when
 * required). A present value of the wrong kind or out of range is an error naming the key. */
static slate_status key_int(const slate__gguf *g, const char *path, const char *arch,
                            const char *suffix, bool required, int32_t lo, int32_t hi,
                            int32_t dflt, int32_t *out, slate_error *err) {
    char k[128], v[96];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    if (slate__gguf_find_key(g, k) < 0) {
        if (required)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': key %s is missing (an integer in "
                               "%d..%d)", path, k, lo, hi);
        *out = dflt;
        return SLATE_OK;
    }
    int32_t x;
    if (!slate__gguf_get_i32(g, k, &x) || x < lo || x > hi)
        return slate__fail(err, SLATE_E_FORMAT, "'%s': key %s is %s, expected an integer in "
                           "%d..%d", path, k, slate__gguf_value_str(g, k, v, sizeof v), lo, hi);
    *out = x;
    return SLATE_OK;
}

/* "<arch>.<suffix>" must be a finite number > 0 (as a float) below `below` (0: no bound);
 * absent, it is *out = dflt (or an error when required). */
static slate_status key_pos_float(const slate__gguf *g, const char *path, const char *arch,
                                  const char *suffix, bool required, float below, float dflt,
                                  float *out, slate_error *err) {
    char k[128], v[96], expected[64];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    if (below > 0) snprintf(expected, sizeof expected, "a number > 0 and < %g", (double)below);
    else snprintf(expected, sizeof expected, "a finite number > 0");
    if (slate__gguf_find_key(g, k) < 0) {
        if (required)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': key %s is missing (%s)", path, k,
                               expected);
        *out = dflt;
        return SLATE_OK;
    }
    float x;
    if (!slate__gguf_get_f32(g, k, &x) || !isfinite(x) || !(x > 0) || (below > 0 && !(x < below)))
        return slate__fail(err, SLATE_E_FORMAT, "'%s': key %s is %s, expected %s", path, k,
                           slate__gguf_value_str(g, k, v, sizeof v), expected);
    *out = x;
    return SLATE_OK;
}

slate_status slate__import_gguf(const char *path, slate__import *imp, slate_error *err) {
    memset(imp, 0, sizeof *imp);
    slate__gguf *g = NULL;
    slate_status s = slate__gguf_open(path, &g, err);
    if (s) return s;
    imp->cleanup = close_gguf;
    imp->cleanup_ctx = g;
    const char *arch_s;
    uint64_t arch_len;
    if (!slate__gguf_get_str(g, "general.architecture", &arch_s, &arch_len) || arch_len >= 32) {
        s = slate__fail(err, SLATE_E_FORMAT, "'%s': key general.architecture is missing", path);
        goto fail;
    }
    slate__arch *a = &imp->a;
    memcpy(a->name, arch_s, arch_len);
    a->name[arch_len] = '\0';
    bool llama = strcmp(a->name, "llama") == 0, qwen2 = strcmp(a->name, "qwen2") == 0,
         qwen3 = strcmp(a->name, "qwen3") == 0;
    if (!llama && !qwen2 && !qwen3) {
        s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': architecture '%s' is not supported "
                        "(supported: llama, qwen2, qwen3)", path, a->name);
        goto fail;
    }
    /* Limits: check_arch's (build.c); the context may exceed slate's maximum here, the
     * builder then asks for --context. */
    const char *an = a->name;
    if ((s = key_int(g, path, an, "embedding_length", true, 1, SLATE__MAX_DIM, 0, &a->dim, err)) ||
        (s = key_int(g, path, an, "block_count", true, 1, SLATE__MAX_LAYERS, 0, &a->n_layers,
                     err)) ||
        (s = key_int(g, path, an, "feed_forward_length", true, 1, SLATE__MAX_FFN, 0, &a->ffn_dim,
                     err)) ||
        (s = key_int(g, path, an, "attention.head_count", true, 1, SLATE__MAX_HEADS, 0,
                     &a->n_heads, err)) ||
        (s = key_pos_float(g, path, an, "attention.layer_norm_rms_epsilon", true, 1.0f, 0,
                           &a->norm_eps, err)) ||
        (s = key_int(g, path, an, "attention.head_count_kv", false, 1, a->n_heads, a->n_heads,
                     &a->n_kv_heads, err)) ||
        (s = key_int(g, path, an, "context_length", false, 1, INT32_MAX, 2048, &a->n_ctx, err)) ||
        (s = key_pos_float(g, path, an, "rope.freq_base", false, 0, 10000.0f, &a->rope_theta,
                           err)) ||
        (s = key_int(g, path, an, "attention.key_length", false, 2, SLATE__MAX_HEAD_DIM,
                     a->dim / a->n_heads, &a->head_dim, err)) ||
        (s = key_int(g, path, an, "rope.dimension_count", false, 2, a->head_dim, a->head_dim,
                     &a->rope_dim, err)) ||
        (s = key_int(g, path, an, "attention.sliding_window", false, 1, INT32_MAX, 0,
                     &a->sliding_window, err)))
        goto fail;
    if (a->n_heads % a->n_kv_heads) {
        s = slate__fail(err, SLATE_E_FORMAT, "'%s': key %s.attention.head_count_kv %d does not "
                        "divide %s.attention.head_count %d", path, an, a->n_kv_heads, an,
                        a->n_heads);
        goto fail;
    }
    a->rope_mode = llama ? SLATE__ROPE_ADJACENT : SLATE__ROPE_HALF;
    a->qkv_bias = qwen2;
    a->qk_norm = qwen3;
    char k[128];
    const char *st;
    uint64_t st_len;
    snprintf(k, sizeof k, "%s.rope.scaling.type", a->name);
    if (slate__gguf_find_key(g, k) >= 0 && !slate__gguf_get_str(g, k, &st, &st_len)) {
        char v[96];
        s = slate__fail(err, SLATE_E_FORMAT, "'%s': key %s is %s, expected a string (none, "
                        "linear)", path, k, slate__gguf_value_str(g, k, v, sizeof v));
        goto fail;
    }
    if (slate__gguf_get_str(g, k, &st, &st_len) && !(st_len == 4 && memcmp(st, "none", 4) == 0)) {
        if (st_len == 6 && memcmp(st, "linear", 6) == 0) {
            if ((s = key_pos_float(g, path, an, "rope.scaling.factor", true, 0, 0,
                                   &a->rope_factor, err)))
                goto fail;
            a->rope_scaling = SLATE__ROPE_SCALING_LINEAR;
        } else {
            s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': rope scaling '%.*s' is not "
                            "supported for GGUF input", path, (int)(st_len > 32 ? 32 : st_len), st);
            goto fail;
        }
    }
    bool has_output = false;
    for (int64_t i = 0; i < slate__gguf_n_tensors(g); i++) {
        const slate__gguf_tensor *t = slate__gguf_tensor_at(g, i);
        if (strcmp(t->name, "rope_freqs.weight") == 0) {
            s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': tensor 'rope_freqs.weight' (Llama 3.1 "
                            "rope factors in GGUF) is not supported yet; convert from the Hugging "
                            "Face folder instead", path);
            goto fail;
        }
        slate__src_tensor st2;
        memset(&st2, 0, sizeof st2);
        if (strlen(t->name) >= sizeof st2.name) {
            s = slate__fail(err, SLATE_E_FORMAT, "'%s': tensor name '%.40s...' is too long", path,
                            t->name);
            goto fail;
        }
        strcpy(st2.name, t->name);
        switch (t->type) {
        case SLATE__GGML_F32: st2.type = SLATE__SRC_F32; break;
        case SLATE__GGML_F16: st2.type = SLATE__SRC_F16; break;
        case SLATE__GGML_BF16: st2.type = SLATE__SRC_BF16; break;
        case SLATE__GGML_Q8_0: st2.type = SLATE__SRC_Q8_0; break;
        case SLATE__GGML_Q4_0: st2.type = SLATE__SRC_Q4_0; break;
        case SLATE__GGML_Q4_1: st2.type = SLATE__SRC_Q4_1; break;
        default:
            s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': tensor '%s' has ggml type %u, not "
                            "supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1)", path, t->name,
                            t->type);
            goto fail;
        }
        if (t->n_dims > 2) {
            s = slate__fail(err, SLATE_E_FORMAT, "'%s': tensor '%s' has %u dimensions, expected "
                            "1 or 2", path, t->name, t->n_dims);
            goto fail;
        }
        st2.n_dims = (int32_t)t->n_dims;
        if (t->n_dims == 2) {
            st2.dims[0] = (int64_t)t->ne[1];
            st2.dims[1] = (int64_t)t->ne[0];
        } else {
            st2.dims[0] = (int64_t)t->ne[0];
        }
        st2.data = t->data;
        st2.nbytes = t->nbytes;
        if (strcmp(t->name, "output.weight") == 0) has_output = true;
        if ((s = slate__import_add(imp, &st2, err))) goto fail;
    }
    a->tied = !has_output;
    const slate__gguf_tensor *emb = slate__gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2) {
        s = slate__fail(err, SLATE_E_FORMAT, "'%s': tensor 'token_embd.weight' is missing", path);
        goto fail;
    }
    a->n_vocab = (int32_t)emb->ne[1];
    if ((s = slate__tok_from_gguf(g, &imp->tok, err))) goto fail;
    const char *tmpl;
    uint64_t tl;
    if (slate__gguf_get_str(g, "tokenizer.chat_template", &tmpl, &tl) &&
        !(imp->chat_template = slate__strndup(tmpl, (size_t)tl))) {
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
        goto fail;
    }
    return SLATE_OK;
fail:
    slate__import_free(imp);
    return s;
}
