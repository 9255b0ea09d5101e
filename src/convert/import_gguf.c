/*
 * import_gguf.c - importer for llama-family GGUF files (architectures "llama", "qwen2",
 * "qwen3", "phi3", "gemma", "gemma2", "gemma3", "smollm3", "granite"). Hyper-parameters come from the "<arch>.*" keys, tensors keep their GGUF
 * names (the canonical names), GGUF's ne[0] (innermost) is the input dimension, so a [ne0=in,
 * ne1=out] tensor is already the [out][in] row-major matrix. llama.cpp's converter permutes
 * llama Q/K rows into adjacent-pair RoPE order; qwen2/qwen3/phi3 keep the HF "half" (NeoX)
 * order. A "rope_freqs.weight" tensor (Llama 3.1 GGUFs: per-frequency divisors) is refused with
 * a message for now (convert such models from their Hugging Face folder), never ignored.
 *
 * phi3 (llama.cpp's llm_build_phi3): blk.N.attn_qkv.weight fuses q, k and v rows (in that
 * order; separate attn_q/k/v are accepted too) and blk.N.ffn_up.weight holds [2 * ffn] rows,
 * gate first then up (LLM_FFN_SWIGLU silu's the first half). Both are split into the canonical
 * tensors by rows, which are whole ggml blocks, so Q8_0/Q4_0/Q4_1 bytes are kept exactly.
 * phi3.attention.sliding_window is applied as in transformers (0: none; llama.cpp currently
 * disables Phi-3's window, so the two differ past that many positions). rope_factors_long/
 * short.weight (128k models) are LongRoPE: the builder picks one list from the package's
 * context against phi3.rope.scaling.original_context_length (absent: the context length) and
 * applies phi3.rope.scaling.attn_factor (absent: 1), as llama.cpp. A rope.dimension_count
 * below the head size (partial rotary, Phi-4-mini: 96 of 128) rotates that many leading dims of
 * each head, with one LongRoPE factor per rotated pair; a missing output.weight means the head
 * is tied to token_embd (Phi-4-mini).
 *
 * gemma / gemma3 (llama.cpp's convert_hf_to_gguf.py GemmaModel / Gemma3Model and
 * llama-model.cpp): the norm weights are stored with Gemma's + 1 already added (so the builder
 * adds nothing), RoPE is NeoX ("half"), the embedding is scaled by sqrt(embedding_length) and the
 * feed-forward is GeGLU, as from HF. GGUF gemma3 carries neither query_pre_attn_scalar, the layer
 * pattern nor the local RoPE base: llama.cpp fixes them (layer i is global when (i + 1) % 6 == 0,
 * local base 10000 unscaled, attention scale 1/sqrt(key_length), except 1/sqrt(embedding_length
 * / head_count) for the 62-layer 27B), and so does this importer, with the window from
 * gemma3.attention.sliding_window (required, as llama.cpp) and the global layers' base and
 * scaling from rope.freq_base and rope.scaling.*. Soft-capping keys are refused on gemma and
 * gemma3. gemma2 (Gemma2Model, llama-model.cpp): Gemma 3's four norms without q/k norms, one
 * RoPE base for every layer, the even layers sliding (llama.cpp's swa pattern 2) over
 * gemma2.attention.sliding_window (absent: 4096, as llama.cpp), the scale 1/sqrt(key_length)
 * except 1/sqrt(embedding_length / head_count) for the 46-layer 27B, and the soft-caps
 * gemma2.attn_logit_softcapping and gemma2.final_logit_softcapping (absent: 50 and 30, llama.cpp's
 * defaults; present, a number in (0, 1e6)).
 *
 * smollm3 (convert_hf_to_gguf.py SmolLM3Model, a LlamaModel: the llama keys under "smollm3.",
 * Q/K rows permuted into adjacent-pair order, output.weight absent when tied): llama.cpp's
 * llm_build_smollm3 rotates q and k on layer l only when (l + 1) % 4 != 0 (n_no_rope_layer_step
 * is fixed at 4, not read from the file), so layers 3, 7, 11, ... are NoPE, as the config.json
 * default no_rope_layer_interval 4 of SmolLM3-3B. A non-zero smollm3.attention.sliding_window is
 * refused (llama.cpp's graph has no window).
 *
 * granite (convert_hf_to_gguf.py GraniteModel, a LlamaModel: llama's keys and tensors under
 * "granite.", Q/K rows permuted into adjacent-pair order, output.weight absent when tied) adds
 * four f32 keys, applied as llama.cpp's graph does: granite.embedding_scale multiplies the
 * embedding, granite.attention.scale is the attention scale, granite.residual_scale multiplies
 * the attention and feed-forward outputs before each residual add, and the logits are divided
 * by granite.logit_scale. llama.cpp requires logit_scale and reads the other three as optional;
 * an absent key, or 0, means none (attention scale: 1 / sqrt(key_length)), as there. The
 * GraniteMoe architectures ("granitemoe", "granitehybrid") are refused by name.
 */
#include "convert.h"
#include "convert/ggml_quants.h"
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

/* Key k (present) as an f32. Another type (an integer, an f64) is refused naming the key and
 * its type, not converted: llama.cpp's loader reads float keys only as f32 ("key ... has wrong
 * type"), so converting would accept files it refuses. `expected` describes the values
 * accepted, for the message. */
static slate_status key_f32(const slate__gguf *g, const char *path, const char *k,
                            const char *expected, float *out, slate_error *err) {
    char v[96];
    if (!slate__gguf_get_f32(g, k, out))
        return slate__fail(err, SLATE_E_FORMAT, "'%s': key %s is %s, expected an f32 (%s; "
                           "llama.cpp reads it only as f32)", path, k,
                           slate__gguf_value_str(g, k, v, sizeof v), expected);
    return SLATE_OK;
}

/* "<arch>.<suffix>" as an f32 (key_f32) that accept(x, lo, hi) takes; absent, it is *out =
 * dflt (or an error when required). `expected` describes the accepted values. */
static slate_status key_float(const slate__gguf *g, const char *path, const char *arch,
                              const char *suffix, bool required, float dflt, const char *expected,
                              bool (*accept)(float x, float lo, float hi), float lo, float hi,
                              float *out, slate_error *err) {
    char k[128], v[96];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    if (slate__gguf_find_key(g, k) < 0) {
        if (required)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': key %s is missing (%s)", path, k,
                               expected);
        *out = dflt;
        return SLATE_OK;
    }
    float x;
    slate_status s = key_f32(g, path, k, expected, &x, err);
    if (s) return s;
    if (!accept(x, lo, hi))
        return slate__fail(err, SLATE_E_FORMAT, "'%s': key %s is %s, expected %s", path, k,
                           slate__gguf_value_str(g, k, v, sizeof v), expected);
    *out = x;
    return SLATE_OK;
}

static bool positive_below(float x, float lo, float below) {
    (void)lo;
    return isfinite(x) && x > 0 && (below <= 0 || x < below);
}

/* "<arch>.<suffix>" must be an f32 (key_f32), finite, > 0 and below `below` (0: no bound);
 * absent, it is *out = dflt (or an error when required). */
static slate_status key_pos_float(const slate__gguf *g, const char *path, const char *arch,
                                  const char *suffix, bool required, float below, float dflt,
                                  float *out, slate_error *err) {
    char expected[64];
    if (below > 0) snprintf(expected, sizeof expected, "a number > 0 and < %g", (double)below);
    else snprintf(expected, sizeof expected, "a finite number > 0");
    return key_float(g, path, arch, suffix, required, dflt, expected, positive_below, 0, below,
                     out, err);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_rope_factors(const char *name) {
    return strcmp(name, "rope_factors_long.weight") == 0 ||
           strcmp(name, "rope_factors_short.weight") == 0;
}

/* phi3's fused blk.N.attn_qkv.weight (q, k, v rows) or blk.N.ffn_up.weight (gate, up rows, as
 * llama.cpp's phi3 fuses them): checked against the keys, then split into the canonical tensors. */
static slate_status phi3_split(const char *path, const slate__src_tensor *t, slate__import *imp,
                               slate_error *err) {
    static const slate__fused_keys keys = {"phi3.attention.head_count", "head_count_kv",
                                           "head size", "phi3.embedding_length",
                                           "phi3.feed_forward_length"};
    bool qkv = ends_with(t->name, ".attn_qkv.weight");
    char blk[32];
    snprintf(blk, sizeof blk, "%.*s", (int)(strlen(t->name) - strlen(qkv ? ".attn_qkv.weight"
                                                                          : ".ffn_up.weight")),
             t->name);
    return slate__import_add_fused(imp, t, qkv, blk, path, t->name, &keys, err);
}

/* phi3 LongRoPE: rope_factors_long/short.weight (both or neither), f32 [rope_dim / 2]. */
static slate_status phi3_rope_factors(const slate__gguf *g, const char *path, slate__arch *a,
                                      slate_error *err) {
    static const char *const names[2] = {"rope_factors_short.weight", "rope_factors_long.weight"};
    const slate__gguf_tensor *t[2] = {slate__gguf_find_tensor(g, names[0]),
                                      slate__gguf_find_tensor(g, names[1])};
    if (!t[0] && !t[1]) return SLATE_OK;
    if (a->rope_scaling != SLATE__ROPE_SCALING_NONE)
        return slate__fail(err, SLATE_E_FORMAT, "'%s': LongRoPE factor tensors and key "
                           "%s.rope.scaling.type (another scaling) are both given", path, a->name);
    int32_t n = a->rope_dim / 2;
    for (int i = 0; i < 2; i++) {
        if (!t[i])
            return slate__fail(err, SLATE_E_FORMAT, "'%s': tensor '%s' is missing (LongRoPE needs "
                               "both %s and %s)", path, names[i], names[0], names[1]);
        if (t[i]->type != SLATE__GGML_F32 || t[i]->n_dims != 1 || t[i]->ne[0] != (uint64_t)n ||
            n > SLATE__MAX_ROPE_FACTORS)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': tensor '%s' must be f32 [%d] (one "
                               "factor per rotated pair: rope.dimension_count / 2)", path,
                               names[i], n);
        float *dst = i ? a->rope_long : a->rope_short;
        memcpy(dst, t[i]->data, (size_t)n * sizeof(float));
        for (int32_t j = 0; j < n; j++)
            if (!(isfinite(dst[j]) && dst[j] > 0))
                return slate__fail(err, SLATE_E_FORMAT, "'%s': tensor '%s': factor %d is %g, "
                                   "expected a finite number > 0", path, names[i], j, dst[j]);
    }
    slate_status s;
    if ((s = key_int(g, path, a->name, "rope.scaling.original_context_length", false, 1,
                     INT32_MAX, a->n_ctx, &a->rope_orig_ctx, err)) ||
        (s = key_pos_float(g, path, a->name, "rope.scaling.attn_factor", false, 0, 1.0f,
                           &a->rope_attn_factor, err)))
        return s;
    a->n_rope_factors = n;
    a->rope_factor = 1.0f; /* unused by LongRoPE; check_arch wants a positive one */
    a->rope_scaling = SLATE__ROPE_SCALING_LONGROPE;
    return SLATE_OK;
}

static bool zero_or_in(float x, float lo, float hi) { return x == 0 || (x >= lo && x <= hi); }

/* "<arch>.<suffix>" as an f32 (key_f32) that is 0 (none) or in lo..hi; absent, it is 0 (or an
 * error when required). */
static slate_status key_scale(const slate__gguf *g, const char *path, const char *arch,
                              const char *suffix, bool required, float lo, float hi, float *out,
                              slate_error *err) {
    char expected[96];
    snprintf(expected, sizeof expected, "0 (none) or a number in %g..%g", (double)lo, (double)hi);
    return key_float(g, path, arch, suffix, required, 0, expected, zero_or_in, lo, hi, out, err);
}

/* granite (module comment): the four multipliers. */
static slate_status granite_params(const slate__gguf *g, const char *path, slate__arch *a,
                                   slate_error *err) {
    slate_status s;
    if ((s = key_scale(g, path, a->name, "logit_scale", true, 1e-6f, 1e6f, &a->logit_scale,
                       err)) ||
        (s = key_scale(g, path, a->name, "residual_scale", false, 0x1p-126f, 1e6f,
                       &a->residual_scale, err)) ||
        (s = key_scale(g, path, a->name, "embedding_scale", false, 0x1p-126f, 1e6f,
                       &a->embd_scale, err)) ||
        (s = key_scale(g, path, a->name, "attention.scale", false, 0x1p-126f, 1e6f,
                       &a->attn_scale, err)))
        return s;
    return SLATE_OK;
}

/* gemma / gemma2 / gemma3 (module comment): what llama.cpp derives rather than reads. */
static slate_status gemma_params(const slate__gguf *g, const char *path, bool gemma3,
                                 slate__arch *a, slate_error *err) {
    static const char *const caps[] = {"attn_logit_softcapping", "final_logit_softcapping"};
    slate_status s;
    if (strcmp(a->name, "gemma2") == 0) {
        if ((s = key_pos_float(g, path, a->name, caps[0], false, 1e6f, 50.0f, &a->attn_softcap,
                               err)) ||
            (s = key_pos_float(g, path, a->name, caps[1], false, 1e6f, 30.0f, &a->final_softcap,
                               err)) ||
            (s = key_int(g, path, a->name, "attention.sliding_window", false, 1, INT32_MAX, 4096,
                         &a->sliding_window, err)))
            return s;
        a->ffn_act = SLATE__FFN_GEGLU;
        a->embd_scale = (float)sqrt((double)a->dim);
        a->norm_add_one = false; /* llama.cpp's converter stored w + 1 */
        a->post_norms = true;
        a->per_layer_sliding = true;
        for (int32_t l = 0; l < a->n_layers; l++) a->layer_sliding[l] = l % 2 == 0;
        a->attn_scale = (float)(1.0 / sqrt(a->n_layers == 46 ? (double)a->dim / a->n_heads
                                                             : (double)a->head_dim));
        return SLATE_OK;
    }
    for (int i = 0; i < 2; i++) {
        char k[128], v[96];
        snprintf(k, sizeof k, "%s.%s", a->name, caps[i]);
        float x;
        if (slate__gguf_find_key(g, k) < 0) continue;
        if ((s = key_f32(g, path, k, "0: no cap", &x, err))) return s;
        if (x != 0)
            return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': key %s is %s: logit "
                               "soft-capping is not supported on %s (only gemma2 caps)", path, k,
                               slate__gguf_value_str(g, k, v, sizeof v), a->name);
    }
    a->ffn_act = SLATE__FFN_GEGLU;
    a->embd_scale = (float)sqrt((double)a->dim);
    a->norm_add_one = false; /* llama.cpp's converter stored w + 1 */
    if (!gemma3) {
        a->sliding_window = 0; /* Gemma 1 has none */
        return SLATE_OK;
    }
    s = key_int(g, path, a->name, "attention.sliding_window", true, 1, INT32_MAX, 0,
                &a->sliding_window, err);
    if (s) return s;
    a->post_norms = true;
    a->per_layer_sliding = true;
    for (int32_t l = 0; l < a->n_layers; l++) a->layer_sliding[l] = (l + 1) % 6 != 0;
    a->rope_local_theta = 10000.0f;
    a->attn_scale = (float)(1.0 / sqrt(a->n_layers == 62 ? (double)a->dim / a->n_heads
                                                         : (double)a->head_dim));
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
         qwen3 = strcmp(a->name, "qwen3") == 0, phi3 = strcmp(a->name, "phi3") == 0,
         gemma = strcmp(a->name, "gemma") == 0, gemma3 = strcmp(a->name, "gemma3") == 0,
         gemma2 = strcmp(a->name, "gemma2") == 0, smollm3 = strcmp(a->name, "smollm3") == 0,
         granite = strcmp(a->name, "granite") == 0;
    if (!llama && !qwen2 && !qwen3 && !phi3 && !gemma && !gemma2 && !gemma3 && !smollm3 &&
        !granite) {
        bool moe = strcmp(a->name, "granitemoe") == 0 || strcmp(a->name, "granitehybrid") == 0;
        s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': architecture '%s' is not supported%s "
                        "(supported: llama, qwen2, qwen3, phi3, gemma, gemma2, gemma3, smollm3, "
                        "granite)", path, a->name,
                        moe ? " (Granite's mixture-of-experts models are not; the dense "
                              "granite is)" : "");
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
        (s = key_int(g, path, an, "attention.sliding_window", false, 0, INT32_MAX, 0,
                     &a->sliding_window, err)))
        goto fail;
    if (a->rope_dim % 2) {
        s = slate__fail(err, SLATE_E_FORMAT, "'%s': key %s.rope.dimension_count %d is odd (dims "
                        "are rotated in pairs; head size %d)", path, an, a->rope_dim,
                        a->head_dim);
        goto fail;
    }
    if (a->n_heads % a->n_kv_heads) {
        s = slate__fail(err, SLATE_E_FORMAT, "'%s': key %s.attention.head_count_kv %d does not "
                        "divide %s.attention.head_count %d", path, an, a->n_kv_heads, an,
                        a->n_heads);
        goto fail;
    }
    a->rope_mode = llama || smollm3 || granite ? SLATE__ROPE_ADJACENT : SLATE__ROPE_HALF;
    if (smollm3) {
        /* llama.cpp's smollm3 graph has no window: a key asking for one is refused, not
         * dropped. Its NoPE layers are fixed, not read: (l + 1) % 4 == 0. */
        if (a->sliding_window) {
            s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': key smollm3.attention.sliding_window "
                            "is %d: a sliding window is not supported on smollm3", path,
                            a->sliding_window);
            goto fail;
        }
        for (int32_t l = 0; l < a->n_layers; l++) a->layer_nope[l] = (l + 1) % 4 == 0;
    }
    a->qkv_bias = qwen2;
    a->qk_norm = qwen3 || gemma3;
    if ((gemma || gemma2 || gemma3) && (s = gemma_params(g, path, gemma3, a, err))) goto fail;
    if (granite && (s = granite_params(g, path, a, err))) goto fail;
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
    if (phi3 && (s = phi3_rope_factors(g, path, a, err))) goto fail;
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
        if (!slate__ggml_src_type(t->type, &st2.type)) {
            /* the parser refuses every other type by name */
            s = SLATE__INTERNAL(err, "a ggml type the parser accepts has no source type");
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
        if (phi3 && is_rope_factors(t->name)) continue; /* read by phi3_rope_factors */
        if (phi3 && (ends_with(t->name, ".attn_qkv.weight") || ends_with(t->name, ".ffn_up.weight")))
            s = phi3_split(path, &st2, imp, err);
        else
            s = slate__import_add(imp, &st2, err);
        if (s) goto fail;
    }
    a->tied = !has_output;
    const slate__gguf_tensor *emb = slate__gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2) {
        s = slate__fail(err, SLATE_E_FORMAT, "'%s': tensor 'token_embd.weight' is missing", path);
        goto fail;
    }
    a->n_vocab = (int32_t)emb->ne[1];
    if ((s = slate__tok_from_gguf(g, &imp->tok, err))) {
        slate__error_name_file(err, path);
        goto fail;
    }
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
