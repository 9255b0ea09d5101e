/* test_convert_config.c - the converter's hyper-parameter and option checks, without model files:
 * config.json keys (a present key must be valid, an absent or null one takes its default; the
 * message names the key and its value), the llama2.c header's vocab_size, the builder's
 * checks of RoPE parameters, and compression options that no matrix would use. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "convert/convert.h"
#include "exec/program.h"

/* A valid Llama config; each case replaces (or with "DEL" removes) one key. */
static const char *const BASE_CONFIG =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 320, \"hidden_size\": 64,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"intermediate_size\": 128, \"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0,"
    " \"max_position_embeddings\": 256}";

typedef struct cfg_case {
    const char *arch;  /* NULL: LlamaForCausalLM */
    const char *key;
    const char *value; /* JSON, or "DEL" */
    slate_status status;
    const char *msg;   /* substring of the message (OK: NULL) */
} cfg_case;

static const cfg_case CFG_CASES[] = {
    {NULL, "rope_theta", "1e39", SLATE_E_FORMAT, "rope_theta is 1e+39, expected a finite number"},
    {NULL, "rope_theta", "-1", SLATE_E_FORMAT, "rope_theta is -1"},
    {NULL, "rope_theta", "1e-50", SLATE_E_FORMAT, "rope_theta is 1e-50"}, /* 0 as a float */
    {NULL, "rope_theta", "\"1e4\"", SLATE_E_FORMAT, "rope_theta is \"1e4\""},
    {NULL, "rope_theta", "DEL", SLATE_OK, NULL},
    {NULL, "rope_scaling", "{\"type\": \"linear\", \"factor\": 1e39}", SLATE_E_FORMAT,
     "rope_scaling.factor is 1e+39"},
    {NULL, "rope_scaling", "{\"type\": \"linear\", \"factor\": 0}", SLATE_E_FORMAT,
     "rope_scaling.factor is 0"},
    {NULL, "rope_scaling",
     "{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": "
     "1e40, \"original_max_position_embeddings\": 64}",
     SLATE_E_FORMAT, "rope_scaling.high_freq_factor is 1e+40"},
    {NULL, "rope_scaling",
     "{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": "
     "4, \"original_max_position_embeddings\": 6.5}",
     SLATE_E_FORMAT, "rope_scaling.original_max_position_embeddings is 6.5"},
    {NULL, "rope_scaling", "[1]", SLATE_E_FORMAT, "rope_scaling is an array"},
    {NULL, "rope_scaling", "null", SLATE_OK, NULL},
    {NULL, "rope_parameters", "{\"rope_type\": \"default\", \"rope_theta\": 5e5}", SLATE_E_FORMAT,
     "rope_theta 10000 and rope_parameters.rope_theta 500000 disagree"},
    {NULL, "rope_parameters", "{\"rope_type\": \"yarn\", \"rope_theta\": 10000}", SLATE_E_UNSUPPORTED,
     "rope_parameters type 'yarn' is not supported"},
    {NULL, "rope_parameters", "{\"rope_type\": \"linear\", \"rope_theta\": 10000, \"factor\": -2}",
     SLATE_E_FORMAT, "rope_parameters.factor is -2"},
    {NULL, "rope_parameters", "7", SLATE_E_FORMAT, "rope_parameters is 7"},
    {"MistralForCausalLM", "sliding_window", "1e30", SLATE_E_FORMAT,
     "sliding_window is 1e+30, expected an integer in 1..2147483647"},
    {"MistralForCausalLM", "sliding_window", "-7", SLATE_E_FORMAT, "sliding_window is -7"},
    {"MistralForCausalLM", "sliding_window", "0", SLATE_E_FORMAT, "sliding_window is 0"},
    {"MistralForCausalLM", "sliding_window", "2.5", SLATE_E_FORMAT, "sliding_window is 2.5"},
    {"MistralForCausalLM", "sliding_window", "null", SLATE_OK, NULL},
    {"MistralForCausalLM", "sliding_window", "4096", SLATE_OK, NULL},
    {NULL, "head_dim", "-16", SLATE_E_FORMAT, "head_dim is -16, expected an integer in 2.."},
    {NULL, "head_dim", "16.5", SLATE_E_FORMAT, "head_dim is 16.5"},
    {NULL, "head_dim", "null", SLATE_OK, NULL},
    {NULL, "max_position_embeddings", "-5", SLATE_E_FORMAT, "max_position_embeddings is -5"},
    {NULL, "max_position_embeddings", "1e15", SLATE_E_FORMAT, "max_position_embeddings is 1e+15"},
    {NULL, "max_position_embeddings", "DEL", SLATE_OK, NULL},
    {NULL, "num_key_value_heads", "-2", SLATE_E_FORMAT,
     "num_key_value_heads is -2, expected an integer in 1..4"},
    {NULL, "num_key_value_heads", "8", SLATE_E_FORMAT, "num_key_value_heads is 8"},
    {NULL, "num_key_value_heads", "3", SLATE_E_FORMAT, "num_key_value_heads 3 does not divide"},
    {NULL, "num_key_value_heads", "DEL", SLATE_OK, NULL},
    {NULL, "vocab_size", "4294967616", SLATE_E_FORMAT, "vocab_size is 4294967616"},
    {NULL, "hidden_size", "DEL", SLATE_E_FORMAT, "hidden_size is missing"},
    {NULL, "rms_norm_eps", "0", SLATE_E_FORMAT, "rms_norm_eps is 0, expected a number > 0"},
    {NULL, "rms_norm_eps", "2", SLATE_E_FORMAT, "rms_norm_eps is 2"},
    /* The program's MLP is SwiGLU: another activation would be a different model. */
    {NULL, "hidden_act", "\"gelu\"", SLATE_E_UNSUPPORTED, "hidden_act \"gelu\" is not supported"},
    {"Qwen2ForCausalLM", "hidden_act", "\"relu\"", SLATE_E_UNSUPPORTED,
     "hidden_act \"relu\" is not supported"},
    {NULL, "hidden_act", "1", SLATE_E_FORMAT, "hidden_act is 1, expected a string"},
    {NULL, "hidden_act", "\"silu\"", SLATE_OK, NULL},
    {NULL, "hidden_act", "\"swish\"", SLATE_OK, NULL},
    {NULL, "hidden_act", "DEL", SLATE_OK, NULL},
    /* Phi-3: partial rotary rotates int(16 * factor) dims, which must be even and at least 2;
     * the other families rotate whole heads. LongRoPE lists of rotated dims / 2 (here 8)
     * positive numbers. */
    {"Phi3ForCausalLM", "partial_rotary_factor", "0.75", SLATE_OK, NULL},
    {"Phi3ForCausalLM", "partial_rotary_factor", "0.7", SLATE_E_FORMAT,
     "partial_rotary_factor 0.7 of head_dim 16 rotates 11 dims per head: must be even"},
    {"Phi3ForCausalLM", "partial_rotary_factor", "0.0625", SLATE_E_FORMAT,
     "partial_rotary_factor 0.0625 of head_dim 16 rotates 1 dims per head"},
    {"Phi3ForCausalLM", "partial_rotary_factor", "1.5", SLATE_E_FORMAT,
     "partial_rotary_factor 1.5 is above 1"},
    {"Phi3ForCausalLM", "partial_rotary_factor", "0", SLATE_E_FORMAT,
     "partial_rotary_factor is 0, expected a finite number > 0"},
    {"Phi3ForCausalLM", "partial_rotary_factor", "\"0.75\"", SLATE_E_FORMAT,
     "partial_rotary_factor is \"0.75\""},
    {"Phi3ForCausalLM", "partial_rotary_factor", "1.0", SLATE_OK, NULL},
    {"Phi3ForCausalLM", "partial_rotary_factor", "null", SLATE_OK, NULL},
    {"Phi3ForCausalLM", "rope_parameters",
     "{\"rope_type\": \"default\", \"rope_theta\": 10000, \"partial_rotary_factor\": 0.5}",
     SLATE_OK, NULL},
    {NULL, "partial_rotary_factor", "0.5", SLATE_E_UNSUPPORTED,
     "partial_rotary_factor 0.5 is not supported for LlamaForCausalLM"},
    {"Qwen3ForCausalLM", "rope_parameters",
     "{\"rope_type\": \"default\", \"rope_theta\": 10000, \"partial_rotary_factor\": 0.5}",
     SLATE_E_UNSUPPORTED, "rope_parameters.partial_rotary_factor 0.5 is not supported for "
     "Qwen3ForCausalLM"},
    {NULL, "partial_rotary_factor", "1", SLATE_OK, NULL},
    {"Phi3ForCausalLM", "rope_scaling", "{\"type\": \"yarn\", \"factor\": 4}",
     SLATE_E_UNSUPPORTED, "rope_scaling type 'yarn' is not supported (default, linear, llama3, "
     "longrope)"},
    {"Phi3ForCausalLM", "rope_scaling", "{\"type\": \"dynamic\", \"factor\": 2}",
     SLATE_E_UNSUPPORTED, "rope_scaling type 'dynamic' is not supported"},
    {"Phi3ForCausalLM", "rope_scaling",
     "{\"type\": \"longrope\", \"short_factor\": [1,1,1,1,1,1,1], \"long_factor\": "
     "[1,1,1,1,1,1,1,1], \"original_max_position_embeddings\": 64}",
     SLATE_E_FORMAT, "rope_scaling.short_factor must be an array of 8 numbers"},
    {"Phi3ForCausalLM", "rope_scaling",
     "{\"type\": \"su\", \"short_factor\": [1,1,1,1,1,1,1,1], \"long_factor\": "
     "[1,1,1,1,1,1,1,-2], \"original_max_position_embeddings\": 64}",
     SLATE_E_FORMAT, "rope_scaling.long_factor[7] is not a finite number > 0"},
    {"Phi3ForCausalLM", "rope_scaling",
     "{\"type\": \"longrope\", \"short_factor\": [1,1,1e-60,1,1,1,1,1], \"long_factor\": "
     "[1,1,1,1,1,1,1,1], \"original_max_position_embeddings\": 64}",
     SLATE_E_FORMAT, "rope_scaling.short_factor[2] is not a finite number > 0"},
    {"Phi3ForCausalLM", "rope_scaling",
     "{\"type\": \"longrope\", \"short_factor\": [1,1,1,1,1,1,1,1]}",
     SLATE_E_FORMAT, "rope_scaling.long_factor must be an array of 8 numbers"},
    {"Phi3ForCausalLM", "rope_scaling",
     "{\"type\": \"longrope\", \"short_factor\": [1,1,1,1,1,1,1,1], \"long_factor\": "
     "[1,2,3,4,5,6,7,8], \"original_max_position_embeddings\": 64}",
     SLATE_OK, NULL},
    /* Gemma 2's caps: a number in (0, 1e6), or null (off) */
    {"Gemma2ForCausalLM", "rope_theta", "10000", SLATE_OK, NULL},
    {"Gemma2ForCausalLM", "attn_logit_softcapping", "null", SLATE_OK, NULL},
    {"Gemma2ForCausalLM", "final_logit_softcapping", "0.5", SLATE_OK, NULL},
    {"Gemma2ForCausalLM", "attn_logit_softcapping", "0", SLATE_E_FORMAT,
     "attn_logit_softcapping is 0, expected a number > 0 and < 1e+06"},
    {"Gemma2ForCausalLM", "final_logit_softcapping", "-30", SLATE_E_FORMAT,
     "final_logit_softcapping is -30, expected a number > 0"},
    {"Gemma2ForCausalLM", "final_logit_softcapping", "\"30\"", SLATE_E_FORMAT,
     "final_logit_softcapping is \"30\", expected a number > 0"},
    {"Gemma2ForCausalLM", "attn_logit_softcapping", "1e6", SLATE_E_FORMAT,
     "attn_logit_softcapping is 1000000, expected a number > 0 and < 1e+06"},
    {"Gemma2ForCausalLM", "use_bidirectional_attention", "true", SLATE_E_UNSUPPORTED,
     "use_bidirectional_attention is not supported"},
    {"Gemma2ForCausalLM", "hidden_activation", "\"gelu\"", SLATE_E_UNSUPPORTED,
     "hidden_activation \"gelu\" is not supported"},
    /* Gemma: refused by name where the program cannot express the model */
    {"Gemma3ForConditionalGeneration", "rope_theta", "10000", SLATE_E_UNSUPPORTED,
     "its text-only Gemma3ForCausalLM form is"},
    {"Gemma3ForCausalLM", "final_logit_softcapping", "30.0", SLATE_E_UNSUPPORTED,
     "final_logit_softcapping 30 is not supported (logit soft-capping, as in Gemma 2"},
    {"Gemma3ForCausalLM", "attn_logit_softcapping", "50", SLATE_E_UNSUPPORTED,
     "attn_logit_softcapping 50 is not supported"},
    {"GemmaForCausalLM", "final_logit_softcapping", "30", SLATE_E_UNSUPPORTED,
     "final_logit_softcapping 30 is not supported"},
    {"Gemma3ForCausalLM", "attn_logit_softcapping", "null", SLATE_OK, NULL},
    {"Gemma3ForCausalLM", "use_bidirectional_attention", "true", SLATE_E_UNSUPPORTED,
     "use_bidirectional_attention is not supported"},
    {"Gemma3ForCausalLM", "use_bidirectional_attention", "false", SLATE_OK, NULL},
    /* the activation: hidden_activation gelu_pytorch_tanh or none; hidden_act is not read */
    {"Gemma3ForCausalLM", "hidden_activation", "\"gelu\"", SLATE_E_UNSUPPORTED,
     "hidden_activation \"gelu\" is not supported (expected \"gelu_pytorch_tanh\")"},
    {"Gemma3ForCausalLM", "hidden_activation", "\"silu\"", SLATE_E_UNSUPPORTED,
     "hidden_activation \"silu\" is not supported"},
    {"Gemma3ForCausalLM", "hidden_activation", "5", SLATE_E_FORMAT, "hidden_activation 5 is not"},
    {"Gemma3ForCausalLM", "hidden_activation", "\"gelu_pytorch_tanh\"", SLATE_OK, NULL},
    {"GemmaForCausalLM", "hidden_activation", "\"gelu\"", SLATE_E_UNSUPPORTED,
     "hidden_activation \"gelu\" is not supported"},
    {"GemmaForCausalLM", "hidden_activation", "null", SLATE_OK, NULL},
    {"GemmaForCausalLM", "hidden_act", "\"gelu\"", SLATE_OK, NULL},
    /* Gemma 3's layer kinds, window and scale */
    {"Gemma3ForCausalLM", "layer_types", "[\"sliding_attention\"]", SLATE_E_FORMAT,
     "layer_types must be an array of 2 strings (num_hidden_layers)"},
    {"Gemma3ForCausalLM", "layer_types", "[\"sliding_attention\", \"chunked_attention\"]",
     SLATE_E_UNSUPPORTED, "layer_types[1] is \"chunked_attention\""},
    {"Gemma3ForCausalLM", "layer_types", "[\"full_attention\", \"sliding_attention\"]", SLATE_OK,
     NULL},
    {"Gemma3ForCausalLM", "sliding_window", "null", SLATE_E_FORMAT, "sliding_window is null"},
    {"Gemma3ForCausalLM", "sliding_window", "0", SLATE_E_FORMAT, "sliding_window is 0"},
    {"Gemma3ForCausalLM", "sliding_window_pattern", "0", SLATE_E_FORMAT,
     "sliding_window_pattern is 0"},
    {"Gemma3ForCausalLM", "query_pre_attn_scalar", "0", SLATE_E_FORMAT,
     "query_pre_attn_scalar is 0"},
    {"Gemma3ForCausalLM", "rope_local_base_freq", "-1", SLATE_E_FORMAT,
     "rope_local_base_freq is -1"},
    {"Gemma3ForCausalLM", "rope_scaling",
     "{\"type\": \"longrope\", \"short_factor\": [1,1,1,1,1,1,1,1], \"long_factor\": "
     "[1,1,1,1,1,1,1,1], \"original_max_position_embeddings\": 64}",
     SLATE_E_FORMAT, "short_factor must be an array of 128 numbers"}, /* head_dim 256 */
    /* transformers 5's per-layer-type rope_parameters */
    {"Gemma3ForCausalLM", "rope_parameters",
     "{\"full_attention\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e6}, "
     "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e4}}",
     SLATE_E_UNSUPPORTED,
     "rope_parameters.full_attention.rope_type \"yarn\" is not supported (expected "
     "\"default\" or \"linear\")"},
    {"Gemma3ForCausalLM", "rope_parameters",
     "{\"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}, "
     "\"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": 8, \"rope_theta\": 1e4}}",
     SLATE_E_UNSUPPORTED, "rope_parameters.sliding_attention.rope_type \"linear\""},
    {"Gemma3ForCausalLM", "rope_parameters",
     "{\"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}",
     SLATE_E_FORMAT, "rope_parameters.sliding_attention is missing or not an object"},
    {"Gemma3ForCausalLM", "rope_parameters",
     "{\"full_attention\": {\"rope_type\": \"linear\", \"rope_theta\": 1e6}, "
     "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e4}}",
     SLATE_E_FORMAT, "rope_parameters.full_attention.factor is missing"},
};

static void hf_config_keys_are_checked_by_name_and_value(void **st) {
    (void)st;
    for (size_t c = 0; c < sizeof CFG_CASES / sizeof CFG_CASES[0]; c++) {
        const cfg_case *k = &CFG_CASES[c];
        cJSON *cfg = cJSON_Parse(BASE_CONFIG);
        assert_non_null(cfg);
        if (k->arch)
            cJSON_ReplaceItemInArray(cJSON_GetObjectItem(cfg, "architectures"), 0,
                                     cJSON_CreateString(k->arch));
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, k->key);
        if (strcmp(k->value, "DEL") != 0) {
            cJSON *v = cJSON_Parse(k->value);
            assert_non_null(v);
            cJSON_AddItemToObject(cfg, k->key, v);
        }
        char *text = cJSON_PrintUnformatted(cfg);
        cJSON_Delete(cfg);
        slate__arch a;
        slate_error e;
        memset(&e, 0, sizeof e);
        slate_status s = slate__hf_parse_config(text, strlen(text), &a, &e);
        bool ok = s == k->status && (!k->msg || strstr(e.message, k->msg));
        if (!ok)
            fprintf(stderr, "case %s=%s: got %s '%s'; want %s with '%s'\n", k->key, k->value,
                    slate_status_name(s), s ? e.message : "", slate_status_name(k->status),
                    k->msg ? k->msg : "");
        cJSON_free(text);
        assert_true(ok);
    }
}

/* Absent and null keys take their defaults; present ones are used as given. */
static void hf_config_defaults_apply_only_to_absent_keys(void **st) {
    (void)st;
    slate__arch a;
    slate_error e;
    const char *cfg = "{\"architectures\": [\"MistralForCausalLM\"], \"vocab_size\": 320, "
                      "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"intermediate_size\": 128, \"rms_norm_eps\": 1e-5, \"head_dim\": null,"
                      " \"sliding_window\": null}";
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_int_equal(a.n_kv_heads, 4);
    assert_int_equal(a.head_dim, 16);
    assert_int_equal(a.n_ctx, 2048);
    assert_int_equal(a.sliding_window, 0);
    assert_true(a.rope_theta == 10000.0f);
    cfg = "{\"architectures\": [\"MistralForCausalLM\"], \"vocab_size\": 320, \"hidden_size\": 64,"
          " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 1,"
          " \"intermediate_size\": 128, \"rms_norm_eps\": 1e-5, \"head_dim\": 32,"
          " \"sliding_window\": 4096, \"max_position_embeddings\": 65536, \"rope_theta\": 1e6}";
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_int_equal(a.n_kv_heads, 1);
    assert_int_equal(a.head_dim, 32);
    assert_int_equal(a.n_ctx, 65536);
    assert_int_equal(a.sliding_window, 4096);
    assert_true(a.rope_theta == 1e6f);
    /* transformers 5: rope_theta and the scaling in rope_parameters (no rope_theta, no
     * rope_scaling at the top level) are read from there, not replaced by 10000. */
    cfg = "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 320, \"hidden_size\": 64,"
          " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
          " \"rms_norm_eps\": 1e-5, \"rope_parameters\": {\"rope_type\": \"llama3\","
          " \"rope_theta\": 500000.0, \"factor\": 32.0, \"low_freq_factor\": 1.0,"
          " \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}";
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_true(a.rope_theta == 5e5f);
    assert_int_equal(a.rope_scaling, SLATE__ROPE_SCALING_LLAMA3);
    assert_true(a.rope_factor == 32.0f);
    assert_int_equal(a.rope_orig_ctx, 8192);
    cfg = "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 320, \"hidden_size\": 64,"
          " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
          " \"rms_norm_eps\": 1e-5, \"rope_parameters\": {\"rope_theta\": 1e6}}";
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_true(a.rope_theta == 1e6f);
    assert_int_equal(a.rope_scaling, SLATE__ROPE_SCALING_NONE);
}

/* LongRoPE as transformers computes it: the original context from rope_scaling or the top
 * level, factor max / original, attention factor sqrt(1 + ln factor / ln original) unless given;
 * "su" is the older name. */
static void hf_config_longrope_reads_both_lists_and_the_attention_factor(void **st) {
    (void)st;
    slate__arch a;
    slate_error e;
    const char *cfg = "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 320, "
                      "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"intermediate_size\": 128, \"rms_norm_eps\": 1e-5, "
                      "\"max_position_embeddings\": 131072, \"original_max_position_embeddings\":"
                      " 4096, \"sliding_window\": 262144, \"rope_scaling\": {\"type\": \"su\","
                      " \"short_factor\": [1,1,1,1,1,1,1,1.5], \"long_factor\": [1,2,3,4,5,6,7,8]}}";
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_string_equal(a.name, "phi3");
    assert_int_equal(a.rope_scaling, SLATE__ROPE_SCALING_LONGROPE);
    assert_int_equal(a.n_rope_factors, 8);
    assert_int_equal(a.rope_orig_ctx, 4096);
    assert_true(a.rope_short[7] == 1.5f && a.rope_long[0] == 1.0f && a.rope_long[7] == 8.0f);
    assert_true(fabsf(a.rope_attn_factor - 1.1902380714f) < 1e-6f); /* sqrt(1 + ln 32 / ln 4096) */
    assert_int_equal(a.sliding_window, 262144); /* applied for phi3, as for mistral */
    assert_int_equal(a.n_kv_heads, 4);
    cfg = "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 320, \"hidden_size\": 64,"
          " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
          " \"rms_norm_eps\": 1e-5, \"sliding_window\": null, \"rope_scaling\": {\"rope_type\":"
          " \"longrope\", \"short_factor\": [1,1,1,1,1,1,1,1], \"long_factor\": [1,1,1,1,1,1,1,1],"
          " \"original_max_position_embeddings\": 1024, \"attention_factor\": 1.25}}";
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_int_equal(a.rope_orig_ctx, 1024);
    assert_true(a.rope_attn_factor == 1.25f);
    assert_int_equal(a.sliding_window, 0);
}

/* Phi-4-mini's config (scaled down): partial_rotary_factor 0.75 rotates 12 of 16 dims, and the
 * LongRoPE lists hold one factor per rotated pair (6), not per pair of the head (8). */
static void hf_config_partial_rotary_sets_the_rotated_dims_and_the_longrope_length(void **st) {
    (void)st;
    slate__arch a;
    slate_error e;
    const char *cfg = "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 320, "
                      "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"intermediate_size\": 128, \"rms_norm_eps\":"
                      " 1e-5, \"max_position_embeddings\": 131072, \"original_max_position_"
                      "embeddings\": 4096, \"partial_rotary_factor\": 0.75, \"tie_word_"
                      "embeddings\": true, \"rope_scaling\": {\"type\": \"longrope\", "
                      "\"short_factor\": [1,1,1,1,1,1.5], \"long_factor\": [1,2,3,4,5,6]}}";
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_int_equal(a.head_dim, 16);
    assert_int_equal(a.rope_dim, 12);
    assert_int_equal(a.rope_mode, SLATE__ROPE_HALF);
    assert_int_equal(a.rope_scaling, SLATE__ROPE_SCALING_LONGROPE);
    assert_int_equal(a.n_rope_factors, 6);
    assert_true(a.rope_short[5] == 1.5f && a.rope_long[5] == 6.0f);
    assert_true(fabsf(a.rope_attn_factor - 1.1902380714f) < 1e-6f); /* sqrt(1 + ln 32 / ln 4096) */
    /* Lists of the whole head's length are refused, naming the expected count. */
    cfg = "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 320, \"hidden_size\": 64,"
          " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
          " \"rms_norm_eps\": 1e-5, \"partial_rotary_factor\": 0.75, \"rope_scaling\": {\"type\":"
          " \"longrope\", \"short_factor\": [1,1,1,1,1,1,1,1], \"long_factor\": [1,1,1,1,1,1,1,1],"
          " \"original_max_position_embeddings\": 64}}";
    memset(&e, 0, sizeof e);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "rope_scaling.short_factor must be an array of 6 numbers"));
    /* transformers 5 keeps it in rope_parameters; given in both places, the two must agree. */
    cfg = "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 320, \"hidden_size\": 64,"
          " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
          " \"rms_norm_eps\": 1e-5, \"rope_parameters\": {\"rope_type\": \"default\","
          " \"rope_theta\": 10000, \"partial_rotary_factor\": 0.5}}";
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_int_equal(a.rope_dim, 8);
    cfg = "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 320, \"hidden_size\": 64,"
          " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
          " \"rms_norm_eps\": 1e-5, \"partial_rotary_factor\": 0.75, \"rope_parameters\": "
          "{\"rope_type\": \"default\", \"rope_theta\": 10000, \"partial_rotary_factor\": 0.5}}";
    memset(&e, 0, sizeof e);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "partial_rotary_factor 0.75 and "
                                      "rope_parameters.partial_rotary_factor 0.5 disagree"));
    /* Without the key, whole heads. */
    cfg = "{\"architectures\": [\"Phi3ForCausalLM\"], \"vocab_size\": 320, \"hidden_size\": 64,"
          " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
          " \"rms_norm_eps\": 1e-5}";
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_int_equal(a.rope_dim, 16);
}

/* vocab_size is signed (negative: separate classifier); INT32_MIN has no positive counterpart. */
/* Gemma 3: GemmaConfig / Gemma3TextConfig defaults for absent keys; the pattern and layer_types
 * choose the sliding layers; per-layer-type rope_parameters give both bases and the global
 * scaling. */
static void hf_config_gemma3_reads_its_layers_and_defaults(void **st) {
    (void)st;
    slate__arch a;
    slate_error e;
    const char *head = "{\"architectures\": [\"Gemma3ForCausalLM\"], \"vocab_size\": 320, "
                       "\"hidden_size\": 64, \"num_hidden_layers\": 6, \"num_attention_heads\": "
                       "4, \"intermediate_size\": 128, \"rms_norm_eps\": 1e-6";
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_string_equal(a.name, "gemma3");
    assert_int_equal(a.head_dim, 256);
    assert_int_equal(a.rope_dim, 256);
    assert_true(a.rope_theta == 1e6f && a.rope_local_theta == 1e4f);
    assert_true(a.attn_scale == 1.0f / 16.0f); /* query_pre_attn_scalar 256 */
    assert_true(a.embd_scale == 8.0f);         /* sqrt(64) */
    assert_int_equal(a.sliding_window, 4096);
    assert_int_equal(a.ffn_act, SLATE__FFN_GEGLU);
    assert_true(a.norm_add_one && a.qk_norm && a.post_norms && a.per_layer_sliding);
    for (int l = 0; l < 6; l++) assert_int_equal(a.layer_sliding[l], l != 5); /* pattern 6 */
    snprintf(cfg, sizeof cfg, "%s, \"sliding_window_pattern\": 2, \"sliding_window\": 512}",
             head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    for (int l = 0; l < 6; l++) assert_int_equal(a.layer_sliding[l], l % 2 == 0);
    assert_int_equal(a.sliding_window, 512);
    /* layer_types wins over the pattern */
    snprintf(cfg, sizeof cfg, "%s, \"sliding_window_pattern\": 2, \"layer_types\": ["
             "\"full_attention\", \"full_attention\", \"sliding_attention\", "
             "\"sliding_attention\", \"sliding_attention\", \"full_attention\"]}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    static const bool want[6] = {false, false, true, true, true, false};
    for (int l = 0; l < 6; l++) assert_int_equal(a.layer_sliding[l], want[l]);
    snprintf(cfg, sizeof cfg, "%s, \"rope_parameters\": {\"full_attention\": {\"rope_type\": "
             "\"linear\", \"factor\": 8.0, \"rope_theta\": 1000000.0}, \"sliding_attention\":"
             " {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_int_equal(a.rope_scaling, SLATE__ROPE_SCALING_LINEAR);
    assert_true(a.rope_factor == 8.0f && a.rope_theta == 1e6f && a.rope_local_theta == 1e4f);
    /* gemma-3-1b's shape and keys (its null soft-capping and rope_scaling, an eos list, the
     * hybrid cache): 26 layers, global every sixth (5, 11, 17, 23), window 512. */
    const char *g1b =
        "{\"architectures\": [\"Gemma3ForCausalLM\"], \"attention_bias\": false, "
        "\"attention_dropout\": 0.0, \"attn_logit_softcapping\": null, \"bos_token_id\": 2, "
        "\"cache_implementation\": \"hybrid\", \"eos_token_id\": [1, 106], "
        "\"final_logit_softcapping\": null, \"head_dim\": 256, \"hidden_activation\": "
        "\"gelu_pytorch_tanh\", \"hidden_size\": 1152, \"initializer_range\": 0.02, "
        "\"intermediate_size\": 6912, \"max_position_embeddings\": 32768, \"model_type\": "
        "\"gemma3_text\", \"num_attention_heads\": 4, \"num_hidden_layers\": 26, "
        "\"num_key_value_heads\": 1, \"pad_token_id\": 0, \"query_pre_attn_scalar\": 256, "
        "\"rms_norm_eps\": 1e-06, \"rope_local_base_freq\": 10000, \"rope_scaling\": null, "
        "\"rope_theta\": 1000000, \"sliding_window\": 512, \"sliding_window_pattern\": 6, "
        "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"vocab_size\": 262144}";
    assert_int_equal(slate__hf_parse_config(g1b, strlen(g1b), &a, &e), SLATE_OK);
    assert_true(a.n_layers == 26 && a.head_dim == 256 && a.n_kv_heads == 1 && a.dim == 1152);
    assert_true(a.sliding_window == 512 && a.rope_scaling == SLATE__ROPE_SCALING_NONE);
    for (int l = 0; l < 26; l++) assert_int_equal(a.layer_sliding[l], l % 6 != 5);
    assert_true(fabsf(a.embd_scale - 33.941125f) < 1e-4f && a.attn_scale == 1.0f / 16.0f);
    /* Gemma 1: no per-layer kinds, head_dim 256 default, tanh GELU whatever hidden_act says */
    snprintf(cfg, sizeof cfg, "{\"architectures\": [\"GemmaForCausalLM\"], \"vocab_size\": 320,"
             " \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
             "\"intermediate_size\": 128, \"rms_norm_eps\": 1e-6, \"hidden_act\": \"gelu\"}");
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_true(a.head_dim == 256 && a.rope_theta == 1e4f && a.attn_scale == 0);
    assert_true(a.ffn_act == SLATE__FFN_GEGLU && a.norm_add_one && !a.post_norms && !a.qk_norm);
    assert_true(!a.per_layer_sliding && a.sliding_window == 0 && a.embd_scale == 8.0f);
}

/* SmolLM3: no_rope_layers (1: RoPE) marks the NoPE layers; without the list,
 * no_rope_layer_interval (default 4) does; SmolLM3Config's defaults (4 kv heads, rope_theta 2e6,
 * context 32768) apply to absent keys only. */
static void hf_config_smollm3_reads_its_nope_layers_and_defaults(void **st) {
    (void)st;
    slate__arch a;
    slate_error e;
    const char *head = "{\"architectures\": [\"SmolLM3ForCausalLM\"], \"vocab_size\": 320, "
                       "\"hidden_size\": 64, \"num_hidden_layers\": 8, \"num_attention_heads\": "
                       "8, \"intermediate_size\": 128, \"rms_norm_eps\": 1e-6";
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_string_equal(a.name, "smollm3");
    assert_true(a.n_kv_heads == 4 && a.rope_theta == 2e6f && a.n_ctx == 32768);
    assert_true(a.rope_mode == SLATE__ROPE_HALF && a.rope_dim == 8 && !a.qkv_bias);
    for (int l = 0; l < 8; l++) assert_int_equal(a.layer_nope[l], l == 3 || l == 7);
    snprintf(cfg, sizeof cfg, "%s, \"num_key_value_heads\": null, \"no_rope_layer_interval\": "
             "3}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_int_equal(a.n_kv_heads, 8);
    for (int l = 0; l < 8; l++) assert_int_equal(a.layer_nope[l], l == 2 || l == 5);
    /* the list wins over the interval; entries past the last layer are unused */
    snprintf(cfg, sizeof cfg, "%s, \"no_rope_layer_interval\": 3, \"no_rope_layers\": "
             "[0, 1, 1, 0, 1, 1, 1, 1, 0]}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    for (int l = 0; l < 8; l++) assert_int_equal(a.layer_nope[l], l == 0 || l == 3);
    /* SmolLM3-3B's config.json (HuggingFaceTB/SmolLM3-3B): every fourth layer NoPE */
    char nr[256] = "";
    for (int l = 0; l < 36; l++)
        snprintf(nr + strlen(nr), sizeof nr - strlen(nr), "%s%d", l ? ", " : "", (l + 1) % 4 != 0);
    char lt[1024] = "";
    for (int l = 0; l < 36; l++)
        snprintf(lt + strlen(lt), sizeof lt - strlen(lt), "%s\"full_attention\"", l ? ", " : "");
    char big[4096];
    snprintf(big, sizeof big,
             "{\"architectures\": [\"SmolLM3ForCausalLM\"], \"attention_bias\": false, "
             "\"attention_dropout\": 0.0, \"bos_token_id\": null, \"eos_token_id\": 128012, "
             "\"hidden_act\": \"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02, "
             "\"intermediate_size\": 11008, \"layer_types\": [%s], "
             "\"max_position_embeddings\": 65536, \"max_window_layers\": 28, \"mlp_bias\": "
             "false, \"model_type\": \"smollm3\", \"no_rope_layer_interval\": 4, "
             "\"no_rope_layers\": [%s], \"num_attention_heads\": 16, \"num_hidden_layers\": "
             "36, \"num_key_value_heads\": 4, \"pad_token_id\": 128004, \"pretraining_tp\": 2, "
             "\"rms_norm_eps\": 1e-06, \"rope_scaling\": null, \"rope_theta\": 5000000.0, "
             "\"sliding_window\": null, \"torch_dtype\": \"bfloat16\", \"use_cache\": false, "
             "\"use_sliding_window\": false, \"vocab_size\": 128256}", lt, nr);
    assert_int_equal(slate__hf_parse_config(big, strlen(big), &a, &e), SLATE_OK);
    assert_true(a.n_layers == 36 && a.head_dim == 128 && a.n_kv_heads == 4 && a.n_ctx == 65536);
    assert_true(a.rope_theta == 5e6f && a.sliding_window == 0);
    for (int l = 0; l < 36; l++) assert_int_equal(a.layer_nope[l], l % 4 == 3);
    /* other families have no NoPE layers */
    snprintf(cfg, sizeof cfg, "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 320,"
             " \"hidden_size\": 64, \"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
             "\"intermediate_size\": 128, \"rms_norm_eps\": 1e-6, \"no_rope_layers\": "
             "[0, 0, 0, 0]}");
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    for (int l = 0; l < 4; l++) assert_false(a.layer_nope[l]);
}

/* Gemma 2: Gemma2Config's defaults (caps 50 and 30, head_dim 256, rope_theta 1e4, window 4096,
 * query_pre_attn_scalar 256), Gemma 3's four norms without q/k norms or a local RoPE base, the
 * even layers sliding unless layer_types says otherwise; a null cap is off. */
static void hf_config_gemma2_reads_its_caps_and_layers(void **st) {
    (void)st;
    slate__arch a;
    slate_error e;
    const char *head = "{\"architectures\": [\"Gemma2ForCausalLM\"], \"vocab_size\": 320, "
                       "\"hidden_size\": 64, \"num_hidden_layers\": 5, \"num_attention_heads\": "
                       "4, \"intermediate_size\": 128, \"rms_norm_eps\": 1e-6";
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_string_equal(a.name, "gemma2");
    assert_true(a.attn_softcap == 50.0f && a.final_softcap == 30.0f);
    assert_true(a.head_dim == 256 && a.rope_theta == 1e4f && a.rope_local_theta == 0);
    assert_true(a.attn_scale == 1.0f / 16.0f && a.embd_scale == 8.0f);
    assert_int_equal(a.sliding_window, 4096);
    assert_true(a.ffn_act == SLATE__FFN_GEGLU && a.norm_add_one && a.post_norms && !a.qk_norm);
    assert_true(a.per_layer_sliding);
    for (int l = 0; l < 5; l++) assert_int_equal(a.layer_sliding[l], l % 2 == 0);
    snprintf(cfg, sizeof cfg, "%s, \"attn_logit_softcapping\": null, \"final_logit_softcapping\""
             ": 3.5, \"query_pre_attn_scalar\": 24, \"sliding_window\": 6, \"layer_types\": ["
             "\"full_attention\", \"sliding_attention\", \"sliding_attention\", "
             "\"full_attention\", \"full_attention\"]}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_true(a.attn_softcap == 0 && a.final_softcap == 3.5f && a.sliding_window == 6);
    assert_true(fabsf(a.attn_scale - 0.20412415f) < 1e-7f);
    static const bool want[5] = {false, true, true, false, false};
    for (int l = 0; l < 5; l++) assert_int_equal(a.layer_sliding[l], want[l]);
}

static void llama2c_header_vocab_int32_min_is_refused(void **st) {
    (void)st;
    static const int32_t vocabs[] = {INT32_MIN, INT32_MIN + 1, -(1 << 22) - 1, 0, (1 << 22) + 1};
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        int32_t h[7] = {64, 172, 5, 8, 4, vocabs[i], 512};
        slate__import imp;
        slate_error e;
        memset(&e, 0, sizeof e);
        assert_int_equal(slate__import_llama2c_mem((const uint8_t *)h, sizeof h, &imp, &e),
                         SLATE_E_FORMAT);
        char want[32];
        snprintf(want, sizeof want, "vocab %d,", (int)vocabs[i]);
        if (!strstr(e.message, want)) fail_msg("vocab %d: %s", (int)vocabs[i], e.message);
    }
}

/* Granite: GraniteConfig's multipliers (1 when absent: no scale op, an attention scale of 1,
 * not 1 / sqrt(head_dim)), granite-3.1-2b-instruct's values, and refusals naming the key. */
static void hf_config_granite_reads_its_multipliers(void **st) {
    (void)st;
    slate__arch a;
    slate_error e;
    const char *head = "{\"architectures\": [\"GraniteForCausalLM\"], \"vocab_size\": 320, "
                       "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": "
                       "4, \"intermediate_size\": 128, \"rms_norm_eps\": 1e-5";
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_string_equal(a.name, "granite");
    assert_true(a.embd_scale == 0 && a.residual_scale == 0 && a.logit_scale == 0);
    assert_true(a.attn_scale == 1.0f && a.rope_mode == SLATE__ROPE_HALF && !a.qkv_bias);
    snprintf(cfg, sizeof cfg, "%s, \"embedding_multiplier\": 12.0, \"attention_multiplier\": "
             "0.015625, \"residual_multiplier\": 0.22, \"logits_scaling\": 8.0, "
             "\"attention_bias\": false, \"mlp_bias\": false, \"rope_theta\": 5000000.0, "
             "\"tie_word_embeddings\": true}", head);
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_OK);
    assert_true(a.embd_scale == 12.0f && a.attn_scale == 0.015625f);
    assert_true(a.residual_scale == 0.22f && a.logit_scale == 8.0f && a.rope_theta == 5e6f);
    static const struct { const char *kv, *msg; slate_status st; } bad[] = {
        {"\"embedding_multiplier\": 0", "embedding_multiplier is 0", SLATE_E_FORMAT},
        {"\"attention_multiplier\": -1", "attention_multiplier is -1", SLATE_E_FORMAT},
        {"\"residual_multiplier\": null", "residual_multiplier is null", SLATE_E_FORMAT},
        {"\"logits_scaling\": 1e-9", "logits_scaling is 1e-09", SLATE_E_FORMAT},
        {"\"mlp_bias\": true", "mlp_bias on GraniteForCausalLM", SLATE_E_UNSUPPORTED},
        {"\"attention_bias\": true", "attention_bias on GraniteForCausalLM", SLATE_E_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cfg, sizeof cfg, "%s, %s}", head, bad[i].kv);
        assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), bad[i].st);
        if (!strstr(e.message, bad[i].msg)) fail_msg("%s: got: %s", bad[i].kv, e.message);
    }
    snprintf(cfg, sizeof cfg, "{\"architectures\": [\"GraniteMoeForCausalLM\"]}");
    assert_int_equal(slate__hf_parse_config(cfg, strlen(cfg), &a, &e), SLATE_E_UNSUPPORTED);
    assert_non_null(strstr(e.message, "mixture-of-experts"));
}

/* A minimal import that reaches the builder's checks (which run before the tokenizer is used). */
static void tiny_import(slate__import *imp) {
    memset(imp, 0, sizeof *imp);
    strcpy(imp->a.name, "llama");
    imp->a.n_vocab = 8;
    imp->a.dim = imp->a.head_dim = imp->a.ffn_dim = 4;
    imp->a.n_heads = imp->a.n_kv_heads = 1;
    imp->a.n_layers = 1;
    imp->a.n_ctx = 8;
    imp->a.norm_eps = 1e-5f;
    imp->a.rope_theta = 10000.0f;
    imp->a.rope_dim = 4;
}

/* Gemma 2's caps reach the builder from either importer: NaN, negative or past the program's
 * 1e6 is refused before anything is written (0 is "no cap"). */
static void builder_refuses_implausible_softcaps(void **st) {
    (void)st;
    slate_convert_params cp = slate_convert_default_params();
    slate__import imp;
    slate_error e;
    static const float bad[] = {NAN, -1.0f, 2e6f, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int which = 0; which < 2; which++) {
            tiny_import(&imp);
            *(which ? &imp.a.final_softcap : &imp.a.attn_softcap) = bad[i];
            assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("cap.slate"), &e),
                             SLATE_E_FORMAT);
            assert_non_null(strstr(e.message, "soft-caps"));
        }
}

/* Granite's residual and logit scales reach the builder from either importer: NaN, negative,
 * past 1e6, or a logit scale whose reciprocal (the scale op's factor) is past 1e6, is refused
 * before anything is written (0 is "none"). */
static void builder_refuses_implausible_granite_scales(void **st) {
    (void)st;
    slate_convert_params cp = slate_convert_default_params();
    slate__import imp;
    slate_error e;
    static const float bad[] = {NAN, -1.0f, 2e6f, INFINITY, 1e-7f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int which = 0; which < 2; which++) {
            if (!which && bad[i] == 1e-7f) continue; /* a tiny residual scale is fine */
            tiny_import(&imp);
            *(which ? &imp.a.logit_scale : &imp.a.residual_scale) = bad[i];
            assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("gs.slate"), &e),
                             SLATE_E_FORMAT);
            assert_non_null(strstr(e.message, which ? "logit scale" : "residual scale"));
        }
}

static void builder_refuses_non_finite_rope_parameters(void **st) {
    (void)st;
    slate_convert_params cp = slate_convert_default_params();
    slate__import imp;
    slate_error e;
    tiny_import(&imp);
    imp.a.rope_theta = INFINITY;
    assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("rope.slate"), &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "theta inf"));
    tiny_import(&imp);
    imp.a.rope_scaling = SLATE__ROPE_SCALING_LINEAR;
    imp.a.rope_factor = INFINITY;
    assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("rope.slate"), &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "factor inf"));
    /* LongRoPE: one factor per rotated pair, each finite and positive. */
    tiny_import(&imp);
    imp.a.rope_scaling = SLATE__ROPE_SCALING_LONGROPE;
    imp.a.rope_factor = imp.a.rope_attn_factor = 1.0f;
    imp.a.rope_orig_ctx = 4;
    imp.a.n_rope_factors = 2;
    imp.a.rope_short[0] = imp.a.rope_short[1] = imp.a.rope_long[0] = 1.0f;
    imp.a.rope_long[1] = NAN;
    assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("rope.slate"), &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "LongRoPE factor 1 is not a positive finite number"));
    imp.a.rope_long[1] = 2.0f;
    imp.a.n_rope_factors = 3;
    assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("rope.slate"), &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "LongRoPE needs 2 factors per list"));
    /* Partial rotary (rope_dim 2 of head_dim 4): one pair, so one factor per list. */
    imp.a.n_rope_factors = 2;
    imp.a.rope_dim = 2;
    assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("rope.slate"), &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "LongRoPE needs 1 factors per list (one per rotated pair: "
                                      "rope_dim 2 / 2), found 2"));
    imp.a.rope_dim = 4;
    imp.a.rope_attn_factor = 0;
    assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("rope.slate"), &e), SLATE_E_FORMAT);
    assert_non_null(strstr(e.message, "LongRoPE attention factor 0"));
}

/* The context limit: a source context past slate's maximum needs an explicit n_ctx. */
static void builder_asks_for_a_context_when_the_source_one_is_too_large(void **st) {
    (void)st;
    slate_convert_params cp = slate_convert_default_params();
    slate__import imp;
    slate_error e;
    tiny_import(&imp);
    imp.a.n_ctx = SLATE__MAX_CTX + 1;
    assert_int_equal(slate__build_package(&imp, &cp, tu_tmp("ctx.slate"), &e),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "16777217"));
    assert_non_null(strstr(e.message, "--context"));
}

/* Layout options of a dtype that no matrix gets would be ignored: refused, named. */
static void builder_refuses_options_no_matrix_uses(void **st) {
    (void)st;
    static const struct {
        slate_dtype dtype;
        bool asym;
        int32_t block, bits, group;
        slate_status status;
        const char *msg;
    } cases[] = {
        {SLATE_DTYPE_F32, true, 0, 0, 0, SLATE_E_INVALID_ARG, "asym applies to q4"},
        {SLATE_DTYPE_Q8_C, true, 0, 0, 0, SLATE_E_INVALID_ARG, "dtype is q8_c"},
        {SLATE_DTYPE_Q8_0, false, 64, 0, 0, SLATE_E_INVALID_ARG,
         "block size applies to q4"},
        {SLATE_DTYPE_Q4, false, 0, 4, 0, SLATE_E_INVALID_ARG,
         "pal bits applies to pal"},
        {SLATE_DTYPE_F16, false, 0, 0, 8, SLATE_E_INVALID_ARG,
         "pal group applies to pal"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        slate_convert_params cp = slate_convert_default_params();
        cp.dtype = cases[i].dtype;
        cp.asym = cases[i].asym;
        cp.block_size = cases[i].block;
        cp.pal_bits = cases[i].bits;
        cp.pal_group = cases[i].group;
        slate__import imp;
        slate_error e;
        memset(&e, 0, sizeof e);
        tiny_import(&imp);
        slate_status s = slate__build_package(&imp, &cp, tu_tmp("opts.slate"), &e);
        if (s != cases[i].status || !strstr(e.message, cases[i].msg))
            fail_msg("case %zu: expected %s naming '%s', got %s: %s", i,
                     slate_status_name(cases[i].status), cases[i].msg, slate_status_name(s),
                     e.message);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hf_config_keys_are_checked_by_name_and_value),
        cmocka_unit_test(hf_config_defaults_apply_only_to_absent_keys),
        cmocka_unit_test(hf_config_longrope_reads_both_lists_and_the_attention_factor),
        cmocka_unit_test(hf_config_gemma3_reads_its_layers_and_defaults),
        cmocka_unit_test(hf_config_gemma2_reads_its_caps_and_layers),
        cmocka_unit_test(hf_config_partial_rotary_sets_the_rotated_dims_and_the_longrope_length),
        cmocka_unit_test(hf_config_smollm3_reads_its_nope_layers_and_defaults),
        cmocka_unit_test(hf_config_granite_reads_its_multipliers),
        cmocka_unit_test(builder_refuses_implausible_granite_scales),
        cmocka_unit_test(llama2c_header_vocab_int32_min_is_refused),
        cmocka_unit_test(builder_refuses_non_finite_rope_parameters),
        cmocka_unit_test(builder_refuses_implausible_softcaps),
        cmocka_unit_test(builder_asks_for_a_context_when_the_source_one_is_too_large),
        cmocka_unit_test(builder_refuses_options_no_matrix_uses),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
