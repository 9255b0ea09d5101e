/*
 * import_hf.c - importer for Hugging Face folders: config.json, model.safetensors (or shards
 * listed in model.safetensors.index.json), tokenizer.json (+ tokenizer_config.json for special
 * tokens and the chat template, or chat_template.jinja). Architectures: LlamaForCausalLM
 * (Llama 2/3/3.1+, TinyLlama, SmolLM), MistralForCausalLM, Qwen2ForCausalLM (qkv bias),
 * Qwen3ForCausalLM (q/k norm).
 * HF stores Q/K rows in "rotate_half" order, so the program uses the "half" RoPE layout and no
 * permutation is applied. Names are mapped to the canonical (GGUF-style) ones; a tensor that
 * maps to nothing is refused, except rotary_emb.inv_freq buffers (recomputed from config).
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

/* HF name -> canonical name; false if the name is not a known weight. */
static bool map_name(const char *hf, int32_t n_layers, char *out, size_t cap) {
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
    int32_t l = 0;
    int n = layer_index(hf, n_layers, &l);
    if (n <= 0) return false;
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if (strcmp(hf + n, layer[i].hf) == 0) {
            snprintf(out, cap, "blk.%d.%s", l, layer[i].canon);
            return true;
        }
    return false;
}

static bool is_ignored(const char *hf) {
    size_t n = strlen(hf);
    const char *suffix = "rotary_emb.inv_freq";
    return n >= strlen(suffix) && strcmp(hf + n - strlen(suffix), suffix) == 0;
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
        if (!map_name(t->name, imp->a.n_layers, c.name, sizeof c.name))
            return slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': tensor '%s' is not part of any "
                               "supported architecture", path, t->name);
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
        if ((s = slate__import_add(imp, &c, err))) return s;
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
    if (!family) {
        s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': architecture '%s' is not supported "
                        "(supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                        "Qwen3ForCausalLM)", path, an);
        return s;
    }
    snprintf(a->name, sizeof a->name, "%s", family);
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
        (s = cfg_int(cfg, path, NULL, "num_key_value_heads", KEY_NULLABLE, 1, a->n_heads,
                     a->n_heads, &a->n_kv_heads, err)) ||
        (s = cfg_int(cfg, path, NULL, "head_dim", KEY_NULLABLE, 2, SLATE__MAX_HEAD_DIM,
                     a->dim / a->n_heads, &a->head_dim, err)) ||
        (s = cfg_pos_float(cfg, path, NULL, "rope_theta", KEY_OPTIONAL, 0, 10000.0f,
                           &a->rope_theta, err)) ||
        (s = cfg_int(cfg, path, NULL, "max_position_embeddings", KEY_OPTIONAL, 1, INT32_MAX, 2048,
                     &a->n_ctx, err)) ||
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
    /* The window applies to Mistral; Qwen's use_sliding_window (per-layer windows) is refused;
     * elsewhere the key is checked but unused, as in transformers. */
    const cJSON *use_sw = cJSON_GetObjectItemCaseSensitive(cfg, "use_sliding_window");
    if (a->sliding_window && cJSON_IsTrue(use_sw) && strcmp(family, "mistral") != 0) {
        s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': use_sliding_window on %s (per-layer "
                        "windows) is not supported", path, an);
        return s;
    }
    if (strcmp(family, "mistral") != 0) a->sliding_window = 0;
    /* The program's feed-forward is SwiGLU: silu(gate) * up. transformers builds the MLP's
     * activation from hidden_act (ACT2FN: "silu" and "swish" are both SiLU; absent, every
     * supported config defaults to "silu"); any other would be converted into a different
     * model, so it is refused. */
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(cfg, "hidden_act");
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
        } else {
            s = slate__fail(err, SLATE_E_UNSUPPORTED, "'%s': %s type '%s' is not "
                            "supported (default, linear, llama3)", path, rs_name, type);
            return s;
        }
    }
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
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings");
    if (!has_head && !cJSON_IsTrue(tie)) {
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
