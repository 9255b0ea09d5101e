/*
 * import_hf.c - importer for Hugging Face folders: config.json, model.safetensors (or shards
 * listed in model.safetensors.index.json), tokenizer.json (+ tokenizer_config.json for special
 * tokens and the chat template, or chat_template.jinja). Architectures: LlamaForCausalLM
 * (Llama 2/3/3.1+, TinyLlama, SmolLM), MistralForCausalLM, Qwen2ForCausalLM (qkv bias),
 * Qwen3ForCausalLM (q/k norm), Phi3ForCausalLM (Phi-3 mini/medium, Phi-3.5-mini, Phi-4),
 * GemmaForCausalLM (Gemma 1), Gemma2ForCausalLM (Gemma 2: soft-capped attention scores and
 * final logits), Gemma3ForCausalLM (Gemma 3 text: gemma-3-1b, or a larger one's language
 * model saved on its own), SmolLM3ForCausalLM (SmolLM3-3B: Llama with "NoPE" layers that
 * skip RoPE; parse_smollm3_layers) and GraniteForCausalLM (IBM Granite 3.x dense: Llama with
 * four scalar multipliers; parse_granite). GraniteMoe* (mixture of experts) is refused by name.
 * HF stores Q/K rows in "rotate_half" order, so the program uses the "half" RoPE layout and no
 * permutation is applied. Names are mapped to the canonical (GGUF-style) ones; a tensor that
 * maps to nothing is refused, except rotary_emb.inv_freq buffers (recomputed from config).
 *
 * Phi-3 is a Llama-style decoder whose checkpoints fuse two projections: self_attn.qkv_proj
 * ([q + k + v rows][hidden], q rows first) and mlp.gate_up_proj ([2 * ffn][hidden], gate rows
 * first, as modeling_phi3's chunk(2)). Both are split here into the canonical attn_q/k/v and
 * ffn_gate/up tensors (views of the rows: nothing is copied, and --quantize/--palettize see the
 * split matrices). Its sliding_window is applied as Mistral's (transformers' Phi3 masks with it):
 * the last sliding_window positions, the query's own included; null means none, and a window
 * at least the package's context never masks anything. partial_rotary_factor (Phi-4-mini:
 * 0.75) rotates the first int(head_dim * factor) dims of each head, which must be even (other
 * families rotate whole heads: a factor other than 1 is refused there). rope_scaling "longrope"
 * (or its older name "su"; Phi-3-mini-128k, Phi-3.5-mini, Phi-4-mini) is read here, one factor
 * per rotated pair, and applied by the builder.
 *
 * Gemma, Gemma 2 and Gemma 3 (parse_gemma has the maths and the keys): the embedding scale, the
 * (1 + w) RMSNorm, GeGLU, Gemma 2/3's block-output norms, attention scale and per-layer sliding
 * window, Gemma 2's soft-caps and Gemma 3's q/k norms and local RoPE base become slate__arch
 * fields the builder turns into the program.
 * The checkpoint's norm weights are imported as stored (w); the builder adds the 1.
 */
#include "convert.h"
#include "exec/program.h"
#include "safetensors.h"
#include "tok/tok.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_SHARDS 256

typedef struct shards {
    slate__st *st[MAX_SHARDS];
    int n;
} shards;

static void close_shards(void *ctx) {
    shards *sh = ctx;
    for (int i = 0; i < sh->n; i++) slate__st_close(sh->st[i]);
    slate__free(sh);
}

static slate_status read_json(const char *path, cJSON **out, slate_error *err) {
    char *text = NULL;
    size_t len = 0;
    slate_status s = slate__read_file(path, 256u << 20, &text, &len, err);
    if (s) return s;
    *out = cJSON_ParseWithLength(text, len);
    slate__free(text);
    if (!*out || !cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return slate__fail(err, SLATE_E_FORMAT, "'%s' is not a JSON object", path);
    }
    return SLATE_OK;
}

/* How a config key may be given: required, or optional (absent: the default), or optional
 * where JSON null also means "use the default" (HF writes null for "none", e.g. sliding_window). */
typedef enum key_kind { KEY_REQUIRED, KEY_OPTIONAL, KEY_NULLABLE } key_kind;

/* A JSON value for messages: the number, a quoted string, or its kind. */
static const char *json_str(const cJSON *v, char *buf, size_t cap) {
    if (cJSON_IsNumber(v)) snprintf(buf, cap, "%.15g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, cap, "\"%.40s\"", v->valuestring);
    else if (cJSON_IsBool(v)) snprintf(buf, cap, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v)) snprintf(buf, cap, "null");
    else snprintf(buf, cap, "%s", cJSON_IsArray(v) ? "an array" : "an object");
    return buf;
}

/* Looks up key in c (a member of `parent`, NULL at the top level; both name the key in
 * messages). *v is NULL when the key takes its default; an error when it must be given. */
static slate_status cfg_get(const cJSON *c, const char *path, const char *parent, const char *key,
                            key_kind kind, const char *expected, const cJSON **v,
                            slate_error *err) {
    *v = cJSON_GetObjectItemCaseSensitive(c, key);
    if (*v && !(kind == KEY_NULLABLE && cJSON_IsNull(*v))) return SLATE_OK;
    *v = NULL;
    if (kind == KEY_REQUIRED)
        return slate__fail(err, SLATE_E_FORMAT, "'%s': %s%s%s is missing (%s)", path,
                           parent ? parent : "", parent ? "." : "", key, expected);
    return SLATE_OK;
}

/* An integer config key in lo..hi; absent (or null, per kind) it is dflt. */
static slate_status cfg_int(const cJSON *c, const char *path, const char *parent, const char *key,
                            key_kind kind, int32_t lo, int32_t hi, int32_t dflt, int32_t *out,
                            slate_error *err) {
    char expected[64], got[64];
    snprintf(expected, sizeof expected, "an integer in %d..%d", lo, hi);
    const cJSON *v;
    slate_status s = cfg_get(c, path, parent, key, kind, expected, &v, err);
    if (s) return s;
    if (!v) {
        *out = dflt;
        return SLATE_OK;
    }
    /* Range first: the cast below is only defined for values that fit. */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != floor(v->valuedouble))
        return slate__fail(err, SLATE_E_FORMAT, "'%s': %s%s%s is %s, expected %s", path,
                           parent ? parent : "", parent ? "." : "", key,
                           json_str(v, got, sizeof got), expected);
    *out = (int32_t)v->valuedouble;
    return SLATE_OK;
}

/* A number > 0 that is finite as a float, and < below when below > 0 (epsilons, rope theta
 * and factors); absent (or null, per kind) it is dflt. */
static slate_status cfg_pos_float(const cJSON *c, const char *path, const char *parent,
                                  const char *key, key_kind kind, double below, float dflt,
                                  float *out, slate_error *err) {
    char expected[64], got[64];
    if (below > 0) snprintf(expected, sizeof expected, "a number > 0 and < %g", below);
    else snprintf(expected, sizeof expected, "a finite number > 0 that fits a float");
    const cJSON *v;
    slate_status s = cfg_get(c, path, parent, key, kind, expected, &v, err);
    if (s) return s;
    if (!v) {
        *out = dflt;
        return SLATE_OK;
    }
    /* |x| <= FLT_MAX first: converting a larger double to float is undefined. A tiny x may
     * still round to 0, hence the test after the conversion. */
    if (!cJSON_IsNumber(v) || !(fabs(v->valuedouble) <= FLT_MAX) ||
        !((float)v->valuedouble > 0) || (below > 0 && !(v->valuedouble < below)))
        return slate__fail(err, SLATE_E_FORMAT, "'%s': %s%s%s is %s, expected %s", path,
                           parent ? parent : "", parent ? "." : "", key,
                           json_str(v, got, sizeof got), expected);
    *out = (float)v->valuedouble;
    return SLATE_OK;
}

/* The layer index of "model.layers.N.<rest>": N is decimal digits without sign or leading
 * zeros ("0", "17"), below n_layers. Returns the offset of <rest>, 0 when hf does not start
 * with "model.layers." and -1 when it does but N is not such an index. */
static int layer_index(const char *hf, int32_t n_layers, int32_t *layer) {
    static const char prefix[] = "model.layers.";
    size_t n = sizeof prefix - 1;
    if (strncmp(hf, prefix, n) != 0) return 0;
    int64_t l = 0;
    size_t i = n;
    for (; hf[i] >= '0' && hf[i] <= '9'; i++)
        if (l <= n_layers) l = l * 10 + (hf[i] - '0'); /* stops growing once out of range */
    if (i == n || hf[i] != '.' || (hf[n] == '0' && i > n + 1) || l >= n_layers) return -1;
    *layer = (int32_t)l;
    return (int)i + 1;
}

/* HF name -> canonical name for the family; false if the name is not a known weight. Phi-3's
 * fused matrices map to blk.N.attn_qkv.weight and blk.N.ffn_gate_up.weight, which add_shard
 * splits. Gemma 2 and 3 have four norms per layer: post_attention_layernorm normalizes the
 * attention output (post_attention_norm, llama.cpp's name), pre_feedforward_layernorm is the
 * feed-forward's input norm (ffn_norm, what post_attention_layernorm is elsewhere) and
 * post_feedforward_layernorm normalizes its output (post_ffw_norm). */
static bool map_name(const char *hf, int32_t n_layers, const char *family, char *out,
                     size_t cap) {
    bool fused = strcmp(family, "phi3") == 0;
    bool gemma3 = strcmp(family, "gemma3") == 0 || strcmp(family, "gemma2") == 0; /* 4 norms */
    static const struct { const char *hf, *canon; } fixed[] = {
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"model.norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(hf, fixed[i].hf) == 0) {
            snprintf(out, cap, "%s", fixed[i].canon);
            return true;
        }
    static const struct { const char *hf, *canon; } layer[] = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},
        {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.bias", "attn_v.bias"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    };
    static const struct { const char *hf, *canon; } fused_layer[] = {
        {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
        {"mlp.gate_up_proj.weight", "ffn_gate_up.weight"},
    };
    static const struct { const char *hf, *canon; } gemma3_layer[] = {
        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    };
    int32_t l = 0;
    int n = layer_index(hf, n_layers, &l);
    if (n <= 0) return false;
    for (size_t i = 0; gemma3 && i < sizeof gemma3_layer / sizeof gemma3_layer[0]; i++)
        if (strcmp(hf + n, gemma3_layer[i].hf) == 0) {
            snprintf(out, cap, "blk.%d.%s", l, gemma3_layer[i].canon);
            return true;
        }
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if (strcmp(hf + n, layer[i].hf) == 0) {
            snprintf(out, cap, "blk.%d.%s", l, layer[i].canon);
            return true;
        }
    for (size_t i = 0; fused && i < sizeof fused_layer / sizeof fused_layer[0]; i++)
        if (strcmp(hf + n, fused_layer[i].hf) == 0) {
            snprintf(out, cap, "blk.%d.%s", l, fused_layer[i].canon);
            return true;
        }
    return false;
}

static bool is_ignored(const char *hf) {
    size_t n = strlen(hf);
    const char *suffix = "rotary_emb.inv_freq";
    return n >= strlen(suffix) && strcmp(hf + n - strlen(suffix), suffix) == 0;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Splits Phi-3's fused blk.N.attn_qkv.weight / blk.N.ffn_gate_up.weight (c, from HF tensor hf
 * in path) into the canonical tensors, after checking its shape against config.json. */
static slate_status add_fused(const char *path, const char *hf, const slate__src_tensor *c,
                              slate__import *imp, slate_error *err) {
    static const slate__fused_keys keys = {"num_attention_heads", "num_key_value_heads",
                                           "head_dim", "hidden_size", "intermediate_size"};
    char blk[32];
    size_t blk_len = (size_t)(strchr(c->name + 4, '.') - c->name); /* "blk.N" */
    snprintf(blk, sizeof blk, "%.*s", (int)blk_len, c->name);
    return slate__import_add_fused(imp, c, ends_with(c->name, ".attn_qkv.weight"), blk, path, hf,
                                   &keys, err);
}

static slate_status add_shard(const char *dir, const char *file, shards *sh, slate__import *imp,
                              slate_error *err) {
    if (strchr(file, '/') || strcmp(file, "..") == 0)
        return slate__fail(err, SLATE_E_FORMAT, "shard name '%s' must be a plain file name", file);
    if (sh->n >= MAX_SHARDS)
        return slate__fail(err, SLATE_E_FORMAT, "more than %d safetensors shards", MAX_SHARDS);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    slate_status s = slate__st_open(path, &sh->st[sh->n], err);
    if (s) return s;
    slate__st *st = sh->st[sh->n++];
    for (int64_t i = 0; i < slate__st_n_tensors(st); i++) {
        const slate__st_tensor *t = slate__st_tensor_at(st, i);
        slate__src_tensor c;
        memset(&c, 0, sizeof c);
        if (is_ignored(t->name)) continue;
        int32_t layer;
        if (layer_index(t->name, imp->a.n_layers, &layer) < 0)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': tensor '%s': the layer index must be "
                               "a decimal number without sign or leading zeros in 0..%d "
                               "(num_hidden_layers is %d)", path, t->name, imp->a.n_layers - 1,
                               imp->a.n_layers);
        if (!map_name(t->name, imp->a.n_layers, imp->a.name, c.name, sizeof c.name))
            return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': tensor '%s' is not part of any "
                               "supported architecture", path, t->name);
        snprintf(c.src_name, sizeof c.src_name, "%s", t->name); /* messages name the file's */
        switch (t->dtype) {
        case SLATE__ST_F32: c.type = SLATE__SRC_F32; break;
        case SLATE__ST_F16: c.type = SLATE__SRC_F16; break;
        case SLATE__ST_BF16: c.type = SLATE__SRC_BF16; break;
        default:
            return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': tensor '%s' has dtype %s "
                               "(supported: F32, F16, BF16)", path, t->name,
                               slate__st_dtype_name(t->dtype));
        }
        if (t->n_dims < 1 || t->n_dims > 2)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': tensor '%s' has %u dimensions, "
                               "expected 1 or 2", path, t->name, t->n_dims);
        c.n_dims = (int32_t)t->n_dims;
        c.dims[0] = (int64_t)t->shape[0];
        c.dims[1] = t->n_dims == 2 ? (int64_t)t->shape[1] : 0;
        c.data = t->data;
        c.nbytes = t->nbytes;
        if (ends_with(c.name, ".attn_qkv.weight") || ends_with(c.name, ".ffn_gate_up.weight"))
            s = add_fused(path, t->name, &c, imp, err);
        else
            s = slate__import_add(imp, &c, err);
        if (s) return s;
    }
    return SLATE_OK;
}

static slate_status load_weights(const char *dir, shards *sh, slate__import *imp,
                                 slate_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return add_shard(dir, "model.safetensors", sh, imp, err);
    fclose(f);
    cJSON *idx = NULL;
    slate_status s = read_json(path, &idx, err);
    if (s) return s;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(idx);
        return slate__fail(err, SLATE_E_FORMAT, "'%s': 'weight_map' is missing", path);
    }
    /* Open each distinct file once, in order of first mention. */
    const cJSON *e;
    const char *files[MAX_SHARDS];
    int n_files = 0;
    cJSON_ArrayForEach(e, map) {
        if (!cJSON_IsString(e)) {
            s = slate__fail(err, SLATE_E_FORMAT, "'%s': weight_map entry '%s' is not a string",
                            path, e->string);
            break;
        }
        bool seen = false;
        for (int i = 0; i < n_files; i++) seen |= strcmp(files[i], e->valuestring) == 0;
        if (seen) continue;
        if (n_files >= MAX_SHARDS) {
            s = slate__fail(err, SLATE_E_FORMAT, "'%s' lists more than %d shards", path, MAX_SHARDS);
            break;
        }
        files[n_files++] = e->valuestring;
    }
    for (int i = 0; i < n_files && !s; i++) s = add_shard(dir, files[i], sh, imp, err);
    cJSON_Delete(idx);
    return s;
}

/* One LongRoPE factor list: rs.key, an array of n finite numbers > 0. */
static slate_status cfg_factors(const cJSON *rs, const char *path, const char *rs_name,
                                const char *key, int32_t n, float *out, slate_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rs, key), *e;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n)
        return slate__fail(err, SLATE_E_FORMAT, "'%s': %s.%s must be an array of %d numbers (one "
                           "per rotated pair: rotated dims / 2), found %s", path, rs_name, key, n,
                           !v ? "none" : cJSON_IsArray(v) ? "another length" : "no array");
    int32_t i = 0;
    cJSON_ArrayForEach(e, v) {
        /* <= FLT_MAX first (the conversion of a larger double is undefined), then > 0 as a
         * float (a tiny value rounds to 0). */
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0 && e->valuedouble <= FLT_MAX) ||
            !((float)e->valuedouble > 0))
            return slate__fail(err, SLATE_E_FORMAT, "'%s': %s.%s[%d] is not a finite number > 0",
                               path, rs_name, key, i);
        out[i++] = (float)e->valuedouble;
    }
    return SLATE_OK;
}

/* LongRoPE ("longrope", formerly "su"), as transformers' _compute_longrope_parameters: the
 * original context from rs (or the top-level original_max_position_embeddings, where Phi-3
 * configs keep it), else max_position_embeddings with rs.factor; the attention factor rs's, else
 * sqrt(1 + ln(factor) / ln(original)) for factor = max_position_embeddings / original > 1. */
static slate_status parse_longrope(const cJSON *cfg, const cJSON *rs, const char *path,
                                   const char *rs_name, slate__arch *a, slate_error *err) {
    slate_status s;
    int32_t n = a->rope_dim / 2;
    if (n > SLATE__MAX_ROPE_FACTORS)
        return slate__fail(err, SLATE_E_FORMAT, "'%s': %d rotated dims per head are too many for "
                           "%s (at most %d)", path, a->rope_dim, rs_name,
                           2 * SLATE__MAX_ROPE_FACTORS);
    int32_t orig = 0;
    double factor = 1.0;
    float given_factor = 0, attn = 0;
    if ((s = cfg_factors(rs, path, rs_name, "short_factor", n, a->rope_short, err)) ||
        (s = cfg_factors(rs, path, rs_name, "long_factor", n, a->rope_long, err)) ||
        (s = cfg_int(rs, path, rs_name, "original_max_position_embeddings", KEY_NULLABLE, 2,
                     INT32_MAX, 0, &orig, err)) ||
        (!orig && (s = cfg_int(cfg, path, NULL, "original_max_position_embeddings",
                               KEY_NULLABLE, 2, INT32_MAX, 0, &orig, err))) ||
        (s = cfg_pos_float(rs, path, rs_name, "factor", KEY_NULLABLE, 0, 0, &given_factor,
                           err)) ||
        (s = cfg_pos_float(rs, path, rs_name, "attention_factor", KEY_NULLABLE, 0, 0, &attn,
                           err)))
        return s;
    if (orig) {
        factor = (double)a->n_ctx / orig;
    } else {
        orig = a->n_ctx;
        if (given_factor > 0) factor = given_factor;
    }
    if (orig < 2 && !(attn > 0) && factor > 1.0)
        return slate__fail(err, SLATE_E_FORMAT, "'%s': %s: the original context %d is too "
                           "small for the attention factor", path, rs_name, orig);
    if (!(attn > 0)) attn = factor > 1.0 ? (float)sqrt(1.0 + log(factor) / log((double)orig)) : 1.0f;
    a->n_rope_factors = n;
    a->rope_orig_ctx = orig;
    a->rope_attn_factor = attn;
    a->rope_factor = (float)factor;
    a->rope_scaling = SLATE__ROPE_SCALING_LONGROPE;
    return SLATE_OK;
}

/* A string config key that must be one of the given values (absent or null: *out = NULL). */
static slate_status cfg_enum(const cJSON *c, const char *path, const char *parent,
                             const char *key, const char *const *values, int n_values,
                             const char **out, slate_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return SLATE_OK;
    for (int i = 0; cJSON_IsString(v) && i < n_values; i++)
        if (strcmp(v->valuestring, values[i]) == 0) {
            *out = values[i];
            return SLATE_OK;
        }
    char got[64], expected[160] = "";
    for (int i = 0; i < n_values; i++)
        snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s\"%s\"",
                 i ? i + 1 == n_values ? " or " : ", " : "", values[i]);
    return slate__fail(err, cJSON_IsString(v) ? SLATE_E_UNSUPPORTED : SLATE_E_FORMAT,
                       "'%s': %s%s%s %s is not supported (expected %s)", path,
                       parent ? parent : "", parent ? "." : "", key, json_str(v, got, sizeof got),
                       expected);
}

/* Gemma 3's rope_parameters in the transformers 5 form: one object per layer type,
 * {"full_attention": {"rope_type", "rope_theta", "factor"}, "sliding_attention": {...}}. The
 * global layers take rope_theta with "default" or "linear" scaling; the sliding layers'
 * rope_theta is the local base, unscaled (as rope_local_base_freq). */
static slate_status parse_gemma3_rope_types(const cJSON *rp, const char *path, slate__arch *a,
                                            slate_error *err) {
    static const char *const kinds[2] = {"full_attention", "sliding_attention"};
    for (int i = 0; i < 2; i++) {
        char name[64];
        snprintf(name, sizeof name, "rope_parameters.%s", kinds[i]);
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(rp, kinds[i]);
        if (!cJSON_IsObject(o))
            return slate__fail(err, SLATE_E_FORMAT, "'%s': %s is missing or not an object (a "
                               "Gemma 3 rope_parameters with per-layer-type entries needs both "
                               "full_attention and sliding_attention)", path, name);
        static const char *const full_types[] = {"default", "linear"};
        const char *type = NULL;
        float theta = 0;
        slate_status s;
        if ((s = cfg_enum(o, path, name, "rope_type", full_types, i == 0 ? 2 : 1, &type, err)) ||
            (s = cfg_pos_float(o, path, name, "rope_theta", KEY_REQUIRED, 0, 0, &theta, err)))
            return s;
        if (i == 1) {
            a->rope_local_theta = theta;
            continue;
        }
        a->rope_theta = theta;
        a->rope_scaling = SLATE__ROPE_SCALING_NONE;
        if (type && strcmp(type, "linear") == 0) {
            if ((s = cfg_pos_float(o, path, name, "factor", KEY_REQUIRED, 0, 0, &a->rope_factor,
                                   err)))
                return s;
            a->rope_scaling = SLATE__ROPE_SCALING_LINEAR;
        }
    }
    return SLATE_OK;
}

/* layer_types (transformers' per-layer attention kinds): *given says whether it is there (not
 * null); then it must be an array of n_layers strings, "full_attention" or "sliding_attention";
 * sliding[l] (when not NULL) says which. no_sliding non-NULL refuses "sliding_attention" with
 * that reason. */
static slate_status read_layer_types(const cJSON *cfg, const char *path, int32_t n_layers,
                                     const char *no_sliding, bool *sliding, bool *given,
                                     slate_error *err) {
    char got[64];
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(cfg, "layer_types"), *e;
    *given = lt && !cJSON_IsNull(lt);
    if (!*given) return SLATE_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != n_layers)
        return slate__fail(err, SLATE_E_FORMAT, "'%s': layer_types must be an array of %d "
                           "strings (num_hidden_layers)", path, n_layers);
    int32_t l = 0;
    cJSON_ArrayForEach(e, lt) {
        bool sl = cJSON_IsString(e) && strcmp(e->valuestring, "sliding_attention") == 0;
        if (sl && no_sliding)
            return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': layer_types[%d] is %s: %s (only "
                               "\"full_attention\")", path, l, json_str(e, got, sizeof got),
                               no_sliding);
        if (!sl && !(cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0))
            return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': layer_types[%d] is %s "
                               "(expected \"sliding_attention\" or \"full_attention\")", path, l,
                               json_str(e, got, sizeof got));
        if (sliding) sliding[l] = sl;
        l++;
    }
    return SLATE_OK;
}

/* Gemma (GemmaForCausalLM, version 1), Gemma 2 (Gemma2ForCausalLM) and Gemma 3 text
 * (Gemma3ForCausalLM), on top of the Llama-style keys parse_config read: transformers'
 * modeling_gemma / modeling_gemma2 / modeling_gemma3.
 *   - the embedding output times sqrt(hidden_size) (HF: a tensor of the model's dtype; slate
 *     computes in f32, as HF running the checkpoint in f32);
 *   - RMSNorm x * (1 + w): the builder adds the 1 (norm_add_one);
 *   - GeGLU with PyTorch's tanh GELU: hidden_activation "gelu_pytorch_tanh". Absent or null,
 *     transformers' Gemma uses that too, whatever hidden_act says (the Gemma 1 configs carry
 *     hidden_act "gelu"; modeling_gemma ignores it with a warning that Gemma's activation is the
 *     approximate GeLU). Any other hidden_activation (exact "gelu" included) is refused: it would
 *     be a different model.
 *   - Gemma 3: q/k norms, the norms of the attention and feed-forward outputs, attention scale
 *     query_pre_attn_scalar^-0.5, and per-layer attention: layer_types when given, else layer i
 *     is global when (i + 1) % sliding_window_pattern == 0; the sliding layers attend to the
 *     last sliding_window positions (the query's own included: create_sliding_window_causal_mask)
 *     with RoPE base rope_local_base_freq, unscaled; the global ones to every position with
 *     rope_theta and rope_scaling.
 *   - Gemma 2: Gemma 3's layout without q/k norms and with one RoPE (rope_theta) for every
 *     layer; layer_types when given, else layer i slides when i is even (Gemma2Config's
 *     "sliding_attention" if (i + 1) % 2); and two soft-caps, cap * tanh(x / cap):
 *     attn_logit_softcapping on the attention scores after the scale and before the mask
 *     (eager_attention_forward), final_logit_softcapping on the logits. Absent, each is
 *     Gemma2Config's default (50, 30); null turns it off, as in transformers.
 * Soft-capping on Gemma and Gemma 3 (their configs carry null) and bidirectional attention are
 * refused. Defaults are those of GemmaConfig / Gemma2Config / Gemma3TextConfig. */
static slate_status parse_gemma(const cJSON *cfg, const char *path, int version, slate__arch *a,
                                slate_error *err) {
    slate_status s;
    char got[64];
    a->ffn_act = SLATE__FFN_GEGLU;
    a->norm_add_one = true;
    a->embd_scale = (float)sqrt((double)a->dim);
    static const char *const acts[] = {"gelu_pytorch_tanh"};
    const char *act = NULL;
    if ((s = cfg_enum(cfg, path, NULL, "hidden_activation", acts, 1, &act, err))) return s;
    static const char *const caps[] = {"attn_logit_softcapping", "final_logit_softcapping"};
    static const float cap_dflt[] = {50.0f, 30.0f};
    float *cap_out[] = {&a->attn_softcap, &a->final_softcap};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, caps[i]);
        if (version == 2) { /* (0, 1e6): the program's range for a cap */
            if (!cJSON_IsNull(v) &&
                (s = cfg_pos_float(cfg, path, NULL, caps[i], KEY_OPTIONAL, 1e6, cap_dflt[i],
                                   cap_out[i], err)))
                return s;
            continue;
        }
        if (v && !cJSON_IsNull(v))
            return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': %s %s is not supported (logit "
                               "soft-capping, as in Gemma 2; Gemma and Gemma 3 have null)", path,
                               caps[i], json_str(v, got, sizeof got));
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "use_bidirectional_attention")))
        return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': use_bidirectional_attention is not "
                           "supported (slate's attention is causal)", path);
    if (a->rope_scaling == SLATE__ROPE_SCALING_LONGROPE)
        return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': LongRoPE on Gemma is not supported",
                           path);
    if (version == 1) return SLATE_OK;
    a->qk_norm = version == 3;
    a->post_norms = true;
    a->per_layer_sliding = true;
    float qpas = 0;
    int32_t pattern = 0;
    if ((s = cfg_pos_float(cfg, path, NULL, "query_pre_attn_scalar", KEY_OPTIONAL, 0, 256.0f,
                           &qpas, err)) ||
        (s = cfg_int(cfg, path, NULL, "sliding_window", KEY_OPTIONAL, 1, INT32_MAX, 4096,
                     &a->sliding_window, err)) ||
        /* Gemma 2: one RoPE for every layer (rope_local_theta 0) */
        (version == 3 &&
         (s = cfg_pos_float(cfg, path, NULL, "rope_local_base_freq", KEY_OPTIONAL, 0, 10000.0f,
                            &a->rope_local_theta, err))))
        return s;
    a->attn_scale = (float)(1.0 / sqrt((double)qpas));
    bool given;
    if ((s = read_layer_types(cfg, path, a->n_layers, NULL, a->layer_sliding, &given, err)))
        return s;
    if (given) {
        /* a->layer_sliding is read */
    } else if (version == 2) {
        for (int32_t l = 0; l < a->n_layers; l++) a->layer_sliding[l] = l % 2 == 0;
    } else {
        if ((s = cfg_int(cfg, path, NULL, "sliding_window_pattern", KEY_OPTIONAL, 1, INT32_MAX, 6,
                         &pattern, err)))
            return s;
        for (int32_t l = 0; l < a->n_layers; l++) a->layer_sliding[l] = (l + 1) % pattern != 0;
    }
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(cfg, "rope_parameters");
    if (version == 3 && cJSON_IsObject(rp) && (cJSON_GetObjectItemCaseSensitive(rp, "full_attention") ||
                               cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention")))
        return parse_gemma3_rope_types(rp, path, a, err);
    return SLATE_OK;
}

/* SmolLM3 (SmolLM3ForCausalLM; transformers' configuration_smollm3 / modeling_smollm3): a
 * Llama decoder whose layer l rotates q and k only when no_rope_layers[l] is 1 (0: a "NoPE"
 * layer, no rotary embedding at all). no_rope_layers has at least num_hidden_layers entries,
 * each 0 or 1 (entries past the last layer are unused, as in transformers); absent or null, layer
 * l is NoPE when (l + 1) % no_rope_layer_interval == 0 (default 4: layers 3, 7, 11, ...).
 * Sliding windows are refused: a layer is "sliding_attention" when layer_types says so (which
 * transformers' mask applies whatever use_sliding_window says), or, without layer_types, when
 * use_sliding_window is true, sliding_window is not null and the layer is NoPE. */
static slate_status parse_smollm3_layers(const cJSON *cfg, const char *path, slate__arch *a,
                                         slate_error *err) {
    char got[64];
    const cJSON *nr = cJSON_GetObjectItemCaseSensitive(cfg, "no_rope_layers"), *e;
    if (nr && !cJSON_IsNull(nr)) {
        if (!cJSON_IsArray(nr) || cJSON_GetArraySize(nr) < a->n_layers)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': no_rope_layers is %s, expected an "
                               "array of at least %d entries 0 or 1 (num_hidden_layers; 1: the "
                               "layer uses RoPE)", path,
                               cJSON_IsArray(nr) ? "too short" : json_str(nr, got, sizeof got),
                               a->n_layers);
        int32_t l = 0;
        cJSON_ArrayForEach(e, nr) {
            if (!cJSON_IsNumber(e) || (e->valuedouble != 0 && e->valuedouble != 1))
                return slate__fail(err, SLATE_E_FORMAT, "'%s': no_rope_layers[%d] is %s, "
                                   "expected 0 (no RoPE) or 1 (RoPE)", path, l,
                                   json_str(e, got, sizeof got));
            if (l < a->n_layers) a->layer_nope[l] = e->valuedouble == 0;
            l++;
        }
    } else {
        int32_t interval;
        slate_status s = cfg_int(cfg, path, NULL, "no_rope_layer_interval", KEY_OPTIONAL, 1,
                                 INT32_MAX, 4, &interval, err);
        if (s) return s;
        for (int32_t l = 0; l < a->n_layers; l++) a->layer_nope[l] = (l + 1) % interval == 0;
    }
    bool given;
    slate_status s = read_layer_types(cfg, path, a->n_layers, "SmolLM3's sliding-window layers "
                                      "are not supported", NULL, &given, err);
    if (s || given) return s;
    const cJSON *use_sw = cJSON_GetObjectItemCaseSensitive(cfg, "use_sliding_window");
    if (cJSON_IsTrue(use_sw) && a->sliding_window)
        for (int32_t l = 0; l < a->n_layers; l++)
            if (a->layer_nope[l])
                return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': use_sliding_window with "
                                   "sliding_window %d makes SmolLM3's NoPE layers (layer %d "
                                   "first) sliding-window layers, which are not supported", path,
                                   a->sliding_window, l);
    return SLATE_OK;
}

/* Granite (GraniteForCausalLM; transformers' configuration_granite / modeling_granite): a Llama
 * decoder with four multipliers, each a float defaulting to 1 in GraniteConfig:
 *   embedding_multiplier  inputs_embeds = embed_tokens(ids) * embedding_multiplier
 *   attention_multiplier  the attention's scaling, instead of 1 / sqrt(head_dim) (so an absent
 *                         one is a scale of 1, not 1 / sqrt(head_dim))
 *   residual_multiplier   hidden = residual + out * residual_multiplier, after the attention and
 *                         after the feed-forward
 *   logits_scaling        logits = lm_head(hidden) / logits_scaling
 * Zero or negative values are refused (no published model has one, and 0 would mean "none" to
 * the builder). A multiplier of exactly 1 writes no op. attention_bias / mlp_bias true are
 * refused by parse_config; GraniteConfig's tie_word_embeddings defaults to false. */
static slate_status parse_granite(const cJSON *cfg, const char *path, slate__arch *a,
                                  slate_error *err) {
    float em = 1.0f, rm = 1.0f; /* set by cfg_pos_float; -O3 cannot see it on every path */
    slate_status s;
    if ((s = cfg_pos_float(cfg, path, NULL, "embedding_multiplier", KEY_OPTIONAL, 1e6, 1.0f, &em,
                           err)) ||
        (s = cfg_pos_float(cfg, path, NULL, "attention_multiplier", KEY_OPTIONAL, 1e6, 1.0f,
                           &a->attn_scale, err)) ||
        (s = cfg_pos_float(cfg, path, NULL, "residual_multiplier", KEY_OPTIONAL, 1e6, 1.0f, &rm,
                           err)) ||
        (s = cfg_pos_float(cfg, path, NULL, "logits_scaling", KEY_OPTIONAL, 1e6, 1.0f,
                           &a->logit_scale, err)))
        return s;
    if (!(a->logit_scale >= 1e-6f))
        return slate__fail(err, SLATE_E_FORMAT, "'%s': logits_scaling is %g, expected a number "
                           "in 1e-6..1e6 (the logits are multiplied by its reciprocal)", path,
                           a->logit_scale);
    a->embd_scale = em == 1.0f ? 0.0f : em;
    a->residual_scale = rm == 1.0f ? 0.0f : rm;
    if (a->logit_scale == 1.0f) a->logit_scale = 0.0f;
    return SLATE_OK;
}

/* Reads the architecture and hyper-parameters from a parsed config.json into *a. `path`
 * names the file in messages. */
static slate_status parse_config(const cJSON *cfg, const char *path, slate__arch *a,
                                 slate_error *err) {
    slate_status s = SLATE_OK;
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    const cJSON *arch0 = cJSON_GetArrayItem(archs, 0);
    const char *an = cJSON_IsString(arch0) ? arch0->valuestring : "(none)";
    const char *family = NULL;
    if (strcmp(an, "LlamaForCausalLM") == 0) family = "llama";
    else if (strcmp(an, "MistralForCausalLM") == 0) family = "mistral";
    else if (strcmp(an, "Qwen2ForCausalLM") == 0) family = "qwen2";
    else if (strcmp(an, "Qwen3ForCausalLM") == 0) family = "qwen3";
    else if (strcmp(an, "Phi3ForCausalLM") == 0) family = "phi3";
    else if (strcmp(an, "GemmaForCausalLM") == 0) family = "gemma";
    else if (strcmp(an, "Gemma2ForCausalLM") == 0) family = "gemma2";
    else if (strcmp(an, "Gemma3ForCausalLM") == 0) family = "gemma3";
    else if (strcmp(an, "SmolLM3ForCausalLM") == 0) family = "smollm3";
    else if (strcmp(an, "GraniteForCausalLM") == 0) family = "granite";
    if (!family) {
        const char *why = strcmp(an, "Gemma3ForConditionalGeneration") == 0
                              ? ": the multimodal Gemma 3 (text model under text_config, vision "
                                "tower) is not; its text-only Gemma3ForCausalLM form is"
                          : strncmp(an, "GraniteMoe", 10) == 0
                              ? ": Granite's mixture-of-experts models are not; the dense "
                                "GraniteForCausalLM is"
                              : "";
        s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': architecture '%s' is not supported%s "
                        "(supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                        "Qwen3ForCausalLM, Phi3ForCausalLM, GemmaForCausalLM, "
                        "Gemma2ForCausalLM, Gemma3ForCausalLM, SmolLM3ForCausalLM, "
                        "GraniteForCausalLM)", path, an, why);
        return s;
    }
    snprintf(a->name, sizeof a->name, "%s", family);
    bool gemma = strcmp(family, "gemma") == 0, gemma3 = strcmp(family, "gemma3") == 0;
    bool gemma2 = strcmp(family, "gemma2") == 0, smollm3 = strcmp(family, "smollm3") == 0;
    bool granite = strcmp(family, "granite") == 0;
    /* Limits: check_arch's (build.c); the context may exceed slate's maximum here, the
     * builder then asks for --context. */
    if ((s = cfg_int(cfg, path, NULL, "vocab_size", KEY_REQUIRED, 1, SLATE__MAX_VOCAB, 0,
                     &a->n_vocab, err)) ||
        (s = cfg_int(cfg, path, NULL, "hidden_size", KEY_REQUIRED, 1, SLATE__MAX_DIM, 0, &a->dim,
                     err)) ||
        (s = cfg_int(cfg, path, NULL, "num_hidden_layers", KEY_REQUIRED, 1, SLATE__MAX_LAYERS, 0,
                     &a->n_layers, err)) ||
        (s = cfg_int(cfg, path, NULL, "num_attention_heads", KEY_REQUIRED, 1, SLATE__MAX_HEADS, 0,
                     &a->n_heads, err)) ||
        (s = cfg_int(cfg, path, NULL, "intermediate_size", KEY_REQUIRED, 1, SLATE__MAX_FFN, 0,
                     &a->ffn_dim, err)) ||
        (s = cfg_pos_float(cfg, path, NULL, "rms_norm_eps", KEY_REQUIRED, 1.0, 0, &a->norm_eps,
                           err)) ||
        /* SmolLM3Config: absent is 4, null is num_attention_heads */
        (s = cfg_int(cfg, path, NULL, "num_key_value_heads", KEY_NULLABLE, 1, a->n_heads,
                     smollm3 && !cJSON_GetObjectItemCaseSensitive(cfg, "num_key_value_heads")
                         ? 4 : a->n_heads,
                     &a->n_kv_heads, err)) ||
        /* GemmaConfig, Gemma2Config and Gemma3TextConfig default head_dim to 256 (not hidden /
         * heads) and Gemma3TextConfig rope_theta to 1e6 */
        (s = cfg_int(cfg, path, NULL, "head_dim", KEY_NULLABLE, 2, SLATE__MAX_HEAD_DIM,
                     gemma || gemma2 || gemma3 ? 256 : a->dim / a->n_heads, &a->head_dim, err)) ||
        /* SmolLM3Config defaults rope_theta to 2e6 and the context to 32768 */
        (s = cfg_pos_float(cfg, path, NULL, "rope_theta", KEY_OPTIONAL, 0,
                           gemma3 ? 1e6f : smollm3 ? 2e6f : 10000.0f, &a->rope_theta, err)) ||
        (s = cfg_int(cfg, path, NULL, "max_position_embeddings", KEY_OPTIONAL, 1, INT32_MAX,
                     smollm3 ? 32768 : 2048, &a->n_ctx, err)) ||
        (s = cfg_int(cfg, path, NULL, "sliding_window", KEY_NULLABLE, 1, INT32_MAX, 0,
                     &a->sliding_window, err)))
        return s;
    if (a->n_heads % a->n_kv_heads)
        return slate__fail(err, SLATE_E_FORMAT, "'%s': num_key_value_heads %d does not divide "
                           "num_attention_heads %d", path, a->n_kv_heads, a->n_heads);
    a->rope_dim = a->head_dim;
    a->rope_mode = SLATE__ROPE_HALF;
    a->qkv_bias = strcmp(family, "qwen2") == 0;
    a->qk_norm = strcmp(family, "qwen3") == 0;
    /* The window applies to Mistral and Phi-3 (every layer, as in transformers); Qwen's
     * use_sliding_window (per-layer windows) is refused; elsewhere the key is checked but
     * unused, as in transformers. */
    bool windowed = strcmp(family, "mistral") == 0 || strcmp(family, "phi3") == 0;
    const cJSON *use_sw = cJSON_GetObjectItemCaseSensitive(cfg, "use_sliding_window");
    if (a->sliding_window && cJSON_IsTrue(use_sw) && !windowed && !smollm3) {
        s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': use_sliding_window on %s (per-layer "
                        "windows) is not supported", path, an);
        return s;
    }
    if (smollm3 && (s = parse_smollm3_layers(cfg, path, a, err))) return s;
    if (!windowed) a->sliding_window = 0;
    /* The program's feed-forward is SwiGLU: silu(gate) * up. transformers builds the MLP's
     * activation from hidden_act (ACT2FN: "silu" and "swish" are both SiLU; absent, every
     * supported config defaults to "silu"); any other would be converted into a different
     * model, so it is refused. Gemma's is hidden_activation (parse_gemma). */
    const cJSON *act =
        gemma || gemma2 || gemma3 ? NULL : cJSON_GetObjectItemCaseSensitive(cfg, "hidden_act");
    if (act && !cJSON_IsString(act)) {
        char got[64];
        return slate__fail(err, SLATE_E_FORMAT, "'%s': hidden_act is %s, expected a string "
                           "(\"silu\")", path, json_str(act, got, sizeof got));
    }
    if (act && strcmp(act->valuestring, "silu") != 0 && strcmp(act->valuestring, "swish") != 0) {
        char got[64];
        return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': hidden_act %s is not supported "
                           "(slate's feed-forward is SwiGLU: \"silu\")", path,
                           json_str(act, got, sizeof got));
    }
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(cfg, "attention_bias");
    if (cJSON_IsTrue(bias) && !a->qkv_bias) {
        s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': attention_bias on %s is not supported",
                        path, an);
        return s;
    }
    /* SmolLM3Config's and GraniteConfig's mlp_bias give gate/up/down biases the program has no
     * input for. */
    if ((smollm3 || granite) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "mlp_bias")))
        return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': mlp_bias on %s is not supported "
                           "(the feed-forward has no biases)", path, an);
    /* Newer configs (transformers 5) move rope_theta and the scaling keys into one
     * "rope_parameters" object ({"rope_type": ..., "rope_theta": ..., "factor": ...}). It is
     * read when the older keys are absent; where both give rope_theta they must agree. */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(cfg, "rope_parameters");
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp)) {
        char got[64];
        return slate__fail(err, SLATE_E_FORMAT, "'%s': rope_parameters is %s, expected an object "
                           "or null", path, json_str(rp, got, sizeof got));
    }
    if (cJSON_IsObject(rp) && cJSON_GetObjectItemCaseSensitive(rp, "rope_theta")) {
        float theta;
        if ((s = cfg_pos_float(rp, path, "rope_parameters", "rope_theta", KEY_REQUIRED, 0, 0,
                               &theta, err)))
            return s;
        if (cJSON_GetObjectItemCaseSensitive(cfg, "rope_theta") && theta != a->rope_theta)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': rope_theta %g and "
                               "rope_parameters.rope_theta %g disagree", path, a->rope_theta,
                               theta);
        a->rope_theta = theta;
    }
    /* Partial rotary (Phi-4-mini: 0.75): transformers' Phi3 attention rotates the first
     * rotary_dim = int(head_dim * partial_rotary_factor) dims of each head (rotate_half within
     * them: pairs i and i + rotary_dim / 2) and passes the others through; its rope init
     * computes rotary_dim / 2 frequencies over rotary_dim. The factor is at the top level, or in
     * rope_parameters since transformers 5 (which wins there; both given must agree). The other
     * families' attention rotates whole heads (a shorter cos/sin would not broadcast), so a
     * factor other than 1 is refused for them rather than converted into a different model. */
    double prf = 1.0;
    const char *prf_where = "";
    for (int i = 0; i < 2; i++) {
        const cJSON *in = i == 0 ? cfg : cJSON_IsObject(rp) ? rp : NULL;
        float checked;
        if (!in) continue;
        if ((s = cfg_pos_float(in, path, i ? "rope_parameters" : NULL, "partial_rotary_factor",
                               KEY_NULLABLE, 0, 1.0f, &checked, err)))
            return s;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(in, "partial_rotary_factor");
        if (!cJSON_IsNumber(v)) continue; /* absent or null: 1 */
        if (v->valuedouble > 1.0)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': %spartial_rotary_factor %g is above 1 "
                               "(the fraction of each head that is rotated)", path,
                               i ? "rope_parameters." : "", v->valuedouble);
        if (i == 1 && *prf_where == '\0' && v->valuedouble != prf &&
            cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(cfg, "partial_rotary_factor")))
            return slate__fail(err, SLATE_E_FORMAT, "'%s': partial_rotary_factor %g and "
                               "rope_parameters.partial_rotary_factor %g disagree", path, prf,
                               v->valuedouble);
        prf = v->valuedouble; /* the double, as Python multiplies it */
        prf_where = i ? "rope_parameters." : "";
    }
    if (prf != 1.0) {
        if (strcmp(family, "phi3") != 0)
            return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': %spartial_rotary_factor %g is "
                               "not supported for %s (its attention rotates whole heads: 1)",
                               path, prf_where, prf, an);
        /* int() of the double product, as transformers. */
        int32_t rd = (int32_t)((double)a->head_dim * prf);
        if (rd < 2 || rd % 2)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': %spartial_rotary_factor %g of head_dim "
                               "%d rotates %d dims per head: must be even and at least 2 (pairs)",
                               path, prf_where, prf, a->head_dim, rd);
        a->rope_dim = rd;
    }
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(cfg, "rope_scaling");
    const char *rs_name = "rope_scaling";
    if (rs && !cJSON_IsNull(rs) && !cJSON_IsObject(rs)) {
        char got[64];
        return slate__fail(err, SLATE_E_FORMAT, "'%s': rope_scaling is %s, expected an object "
                           "or null", path, json_str(rs, got, sizeof got));
    }
    if (!cJSON_IsObject(rs) && cJSON_IsObject(rp)) {
        rs = rp;
        rs_name = "rope_parameters";
    }
    if (cJSON_IsObject(rs)) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!cJSON_IsString(t)) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
        const char *type = cJSON_IsString(t) ? t->valuestring : rs == rp ? "default" : "(none)";
        if (strcmp(type, "default") == 0) {
            /* no scaling */
        } else if (strcmp(type, "linear") == 0) {
            if ((s = cfg_pos_float(rs, path, rs_name, "factor", KEY_REQUIRED, 0, 0,
                                   &a->rope_factor, err)))
                return s;
            a->rope_scaling = SLATE__ROPE_SCALING_LINEAR;
        } else if (strcmp(type, "llama3") == 0) {
            if ((s = cfg_pos_float(rs, path, rs_name, "factor", KEY_REQUIRED, 0, 0,
                                   &a->rope_factor, err)) ||
                (s = cfg_pos_float(rs, path, rs_name, "low_freq_factor", KEY_REQUIRED, 0,
                                   0, &a->rope_low_freq, err)) ||
                (s = cfg_pos_float(rs, path, rs_name, "high_freq_factor", KEY_REQUIRED, 0,
                                   0, &a->rope_high_freq, err)) ||
                (s = cfg_int(rs, path, rs_name, "original_max_position_embeddings",
                             KEY_REQUIRED, 1, INT32_MAX, 0, &a->rope_orig_ctx, err)))
                return s;
            a->rope_scaling = SLATE__ROPE_SCALING_LLAMA3;
        } else if (strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0) {
            if ((s = parse_longrope(cfg, rs, path, rs_name, a, err))) return s;
        } else {
            s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': %s type '%s' is not "
                            "supported (default, linear, llama3, longrope)", path, rs_name, type);
            return s;
        }
    }
    if (gemma || gemma2 || gemma3)
        return parse_gemma(cfg, path, gemma ? 1 : gemma2 ? 2 : 3, a, err);
    if (granite) return parse_granite(cfg, path, a, err);
    return SLATE_OK;
}

slate_status slate__hf_parse_config(const char *text, size_t len, slate__arch *a,
                                    slate_error *err) {
    memset(a, 0, sizeof *a);
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    slate_status s = cJSON_IsObject(cfg) ? parse_config(cfg, "config.json", a, err)
                                         : slate__fail(err, SLATE_E_FORMAT, "config.json is not a "
                                                       "JSON object");
    cJSON_Delete(cfg);
    return s;
}

slate_status slate__import_hf(const char *dir, slate__import *imp, slate_error *err) {
    memset(imp, 0, sizeof *imp);
    char path[4096];
    cJSON *cfg = NULL, *tcfg = NULL;
    shards *sh = slate__calloc(1, sizeof *sh);
    if (!sh) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    imp->cleanup = close_shards;
    imp->cleanup_ctx = sh;
    snprintf(path, sizeof path, "%s/config.json", dir);
    slate_status s = read_json(path, &cfg, err);
    if (s) goto fail;
    if ((s = parse_config(cfg, path, &imp->a, err))) goto fail;
    if ((s = load_weights(dir, sh, imp, err))) goto fail;
    bool has_head = false;
    for (int32_t i = 0; i < imp->n_tensors; i++)
        has_head |= strcmp(imp->tensors[i].name, "output.weight") == 0;
    /* tie_word_embeddings defaults to true in GemmaConfig / Gemma2Config / Gemma3TextConfig
     * (their configs often leave it out) and SmolLM3Config, to false elsewhere
     * (PretrainedConfig's default is true, but every other supported checkpoint that ties says
     * so). */
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings");
    bool tie_default =
        strncmp(imp->a.name, "gemma", 5) == 0 || strcmp(imp->a.name, "smollm3") == 0;
    if (!has_head && !(cJSON_IsBool(tie) ? cJSON_IsTrue(tie) : tie_default)) {
        s = slate__fail(err, SLATE_E_FORMAT, "'%s': lm_head.weight is missing and "
                        "tie_word_embeddings is not true", dir);
        goto fail;
    }
    imp->a.tied = !has_head;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if ((s = slate_tokenizer_open(path, &imp->tok, err))) goto fail;
    /* The chat template: chat_template.jinja beside the tokenizer (what transformers writes
     * now; it overrides tokenizer_config.json there too), else tokenizer_config.json's
     * chat_template: a string, or the older list of {"name", "template"} of which the
     * "default" one is the chat template. */
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        size_t len = 0;
        if ((s = slate__read_file(path, 16u << 20, &imp->chat_template, &len, err))) goto fail;
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    f = fopen(path, "rb");
    if (f) {
        fclose(f);
        if ((s = read_json(path, &tcfg, err))) goto fail;
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(tcfg, "chat_template"), *e;
        if (cJSON_IsArray(ct)) {
            cJSON_ArrayForEach(e, ct) {
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
                if (cJSON_IsString(name) && strcmp(name->valuestring, "default") == 0) {
                    ct = cJSON_GetObjectItemCaseSensitive(e, "template");
                    break;
                }
            }
        }
        if (!imp->chat_template && cJSON_IsString(ct) &&
            !(imp->chat_template = slate__strdup(ct->valuestring))) {
            s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
            goto fail;
        }
    }
    cJSON_Delete(cfg);
    cJSON_Delete(tcfg);
    return SLATE_OK;
fail:
    cJSON_Delete(cfg);
    cJSON_Delete(tcfg);
    slate__import_free(imp);
    return s;
}
