/* test_synth.c - slate_synth: a tiny custom shape converts, opens and gives finite, spread-out
 * logits; the tokenizer has exactly the configured vocabulary and loads; the same seed gives the
 * same bytes; shards give the same model as one file; named shapes keep their architecture
 * (tie, qkv bias, rope scaling, fused tensors, Gemma's norms, windows) under dim overrides;
 * slate_synth_describe counts the published shapes' parameters; `like` makes a custom shape of
 * a named architecture; bad parameters are refused naming the culprit; a failed synth leaves no
 * folder behind. (The layouts against the NumPy reference: tests/e2e/test_synth_shapes.sh.) */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

static slate_synth_params tiny(void) {
    slate_synth_params p = slate_synth_default_params();
    p.dim = 64;
    p.n_layers = 2;
    p.n_heads = 4;
    p.n_kv_heads = 2;
    p.ffn_dim = 96;
    p.n_vocab = 300;
    p.n_ctx = 128;
    p.seed = 7;
    return p;
}

static const char *in_dir(const char *dir, const char *name) {
    static char buf[4][1024];
    static int i;
    char *b = buf[i++ & 3];
    if (snprintf(b, 1024, "%s/%s", dir, name) >= 1024) fail_msg("path too long: %s", dir);
    return b;
}

static void synth_ok(const char *dir, const slate_synth_params *p) {
    slate_error e;
    slate_status s = slate_synth(dir, p, &e);
    if (s) fail_msg("slate_synth(%s): %s", dir, e.message);
}

static void convert_ok(const char *dir, const char *out) {
    slate_error e;
    slate_convert_params cp = slate_convert_default_params();
    slate_status s = slate_convert(dir, out, &cp, &e);
    if (s) fail_msg("slate_convert(%s): %s", dir, e.message);
}

/* Logits of a fixed 6-token sequence at every position into out[6 * n_vocab]. */
static void logits_of(const char *pkg, float *out, int32_t n_vocab) {
    slate_model *m = NULL;
    slate_state *st = NULL;
    slate_error e;
    assert_int_equal(slate_model_open(pkg, NULL, &m, &e), SLATE_OK);
    slate_model_info info;
    assert_int_equal(slate_model_get_info(m, &info), SLATE_OK);
    assert_int_equal(info.n_vocab, n_vocab);
    assert_int_equal(slate_state_create(m, NULL, &st, &e), SLATE_OK);
    const int32_t ids[6] = {1, 72, 101, 256, 270, 5};
    slate_predict_params pp = slate_predict_default_params();
    pp.all_logits = true;
    assert_int_equal(slate_state_predict(st, ids, 6, &pp, &e), SLATE_OK);
    int32_t rows = 0;
    const float *l = slate_state_logits(st, &rows);
    assert_int_equal(rows, 6);
    memcpy(out, l, (size_t)6 * (size_t)n_vocab * sizeof *out);
    slate_state_free(st);
    assert_int_equal(slate_model_close(m), SLATE_OK);
}

static void tiny_custom_shape_converts_opens_and_gives_finite_spread_logits(void **unused) {
    (void)unused;
    const char *dir = tu_tmp("tiny");
    slate_synth_params p = tiny();
    p.dtype = SLATE_DTYPE_F32;
    synth_ok(dir, &p);
    assert_true(tu_exists(in_dir(dir, "config.json")));
    assert_true(tu_exists(in_dir(dir, "model.safetensors")));
    assert_true(tu_exists(in_dir(dir, "tokenizer.json")));
    assert_true(tu_exists(in_dir(dir, "tokenizer_config.json")));
    assert_false(tu_exists(in_dir(dir, "model.safetensors.index.json")));
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    assert_false(tu_exists(tmp));
    const char *pkg = tu_tmp("tiny.slate");
    convert_ok(dir, pkg);
    float *l = malloc(6 * 300 * sizeof *l);
    logits_of(pkg, l, 300);
    for (int r = 0; r < 6; r++) {
        double sum = 0, sq = 0;
        for (int i = 0; i < 300; i++) {
            float x = l[r * 300 + i];
            assert_true(isfinite(x));
            sum += x;
            sq += (double)x * x;
        }
        double sd = sqrt(sq / 300 - (sum / 300) * (sum / 300));
        /* Not degenerate: std 0.02 weights give logits of std ~0.1..3 on this shape. */
        if (!(sd > 0.05 && sd < 20)) fail_msg("row %d: logit std %g outside (0.05, 20)", r, sd);
    }
    free(l);
}

static void tokenizer_has_exactly_the_vocab_size_and_round_trips(void **unused) {
    (void)unused;
    /* 259: bytes + specials only; 1000: crosses from level-2 (702) to level-3 merges. */
    const int32_t sizes[] = {259, 300, 1000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char name[64];
        snprintf(name, sizeof name, "vocab%d", sizes[k]);
        const char *dir = tu_tmp(name);
        slate_synth_params p = tiny();
        p.n_vocab = sizes[k];
        p.n_layers = 1;
        synth_ok(dir, &p);
        slate_tokenizer *tok = NULL;
        slate_error e;
        slate_status s = slate_tokenizer_open(in_dir(dir, "tokenizer.json"), &tok, &e);
        if (s) fail_msg("tokenizer of vocab %d: %s", sizes[k], e.message);
        assert_int_equal(slate_tokenizer_n_vocab(tok), sizes[k]);
        assert_int_equal(slate_tokenizer_eos(tok), sizes[k] - 3);
        assert_true(slate_tokenizer_is_eog(tok, sizes[k] - 3));
        const char *text = "hello world, the quick brown fox \xc3\xa9t\xc3\xa9 42!";
        int32_t ids[256];
        size_t n = 0;
        assert_int_equal(slate_tokenizer_encode(tok, text, strlen(text), 0, ids, 256, &n, &e),
                         SLATE_OK);
        char back[256];
        size_t len = 0;
        assert_int_equal(slate_tokenizer_decode(tok, ids, n, false, back, sizeof back, &len, &e),
                         SLATE_OK);
        assert_int_equal(len, strlen(text));
        assert_memory_equal(back, text, len);
        if (sizes[k] >= 1000) assert_true(n < strlen(text)); /* merges are used */
        slate_tokenizer_free(tok);
    }
}

static bool same_file(const char *a, const char *b) {
    char *da = NULL, *db = NULL;
    size_t la = 0, lb = 0;
    bool same = slate__read_file(a, 1u << 30, &da, &la, NULL) == SLATE_OK &&
                slate__read_file(b, 1u << 30, &db, &lb, NULL) == SLATE_OK && la == lb &&
                memcmp(da, db, la) == 0;
    slate__free(da);
    slate__free(db);
    return same;
}

static void same_seed_gives_same_bytes_and_another_seed_differs(void **unused) {
    (void)unused;
    slate_synth_params p = tiny();
    synth_ok(tu_tmp("seed_a"), &p);
    synth_ok(tu_tmp("seed_b"), &p);
    p.seed = 8;
    synth_ok(tu_tmp("seed_c"), &p);
    assert_true(same_file(in_dir(tu_tmp("seed_a"), "model.safetensors"),
                          in_dir(tu_tmp("seed_b"), "model.safetensors")));
    assert_false(same_file(in_dir(tu_tmp("seed_a"), "model.safetensors"),
                           in_dir(tu_tmp("seed_c"), "model.safetensors")));
    assert_true(same_file(in_dir(tu_tmp("seed_a"), "tokenizer.json"),
                          in_dir(tu_tmp("seed_c"), "tokenizer.json")));
}

/* Files named model-NNNNN-of-MMMMM.safetensors in dir. */
static int count_shards(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strncmp(e->d_name, "model-", 6) == 0 && strstr(e->d_name, "-of-") != NULL;
    if (d) closedir(d);
    return n;
}

static void shards_give_the_same_logits_as_one_file(void **unused) {
    (void)unused;
    slate_synth_params p = tiny();
    synth_ok(tu_tmp("one"), &p);
    p.shard_bytes = 64 << 10; /* the embedding (300 x 64 bf16 = 38 KiB) and layers spread out */
    synth_ok(tu_tmp("sharded"), &p);
    const char *dir = tu_tmp("sharded");
    assert_true(tu_exists(in_dir(dir, "model.safetensors.index.json")));
    assert_false(tu_exists(in_dir(dir, "model.safetensors")));
    assert_true(count_shards(dir) >= 2);
    convert_ok(tu_tmp("one"), tu_tmp("one.slate"));
    convert_ok(dir, tu_tmp("sharded.slate"));
    float *a = malloc(6 * 300 * sizeof *a), *b = malloc(6 * 300 * sizeof *b);
    logits_of(tu_tmp("one.slate"), a, 300);
    logits_of(tu_tmp("sharded.slate"), b, 300);
    assert_memory_equal(a, b, 6 * 300 * sizeof *a);
    free(a);
    free(b);
}

static bool file_contains(const char *path, const char *needle) {
    char *d = NULL;
    size_t len = 0;
    bool found = false;
    size_t m = strlen(needle);
    if (slate__read_file(path, 1u << 26, &d, &len, NULL) == SLATE_OK) /* binary-safe search */
        for (size_t i = 0; i + m <= len && !found; i++) found = memcmp(d + i, needle, m) == 0;
    slate__free(d);
    return found;
}

static void named_shapes_keep_their_architecture_under_dim_overrides(void **unused) {
    (void)unused;
    static const struct { const char *shape, *needle; } cases[] = {
        {"qwen2.5-0.5b", "\"Qwen2ForCausalLM\""},
        {"llama-3.2-1b", "\"rope_type\": \"llama3\", \"factor\": 32.0"},
        {"tinyllama-1.1b", "\"tie_word_embeddings\": false"},
        {"smollm2-135m", "\"tie_word_embeddings\": true"},
        {"phi-3-mini-4k", "\"Phi3ForCausalLM\""},
        {"gemma-2-2b", "\"final_logit_softcapping\": 30.0"},
        {"gemma-3-1b", "\"sliding_window_pattern\": 6"},
        {"mistral-7b", "\"sliding_window\": 4096"},
        {"smollm3-3b", "\"no_rope_layers\": [1]"}, /* one layer: no NoPE layer */
        {"granite-3.1-2b", "\"logits_scaling\": 8.0"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        slate_synth_params p = slate_synth_default_params();
        p.shape = cases[k].shape;
        p.dim = 64;
        p.n_layers = 1;
        p.n_heads = 4;
        p.n_kv_heads = 2;
        p.ffn_dim = 64;
        p.n_vocab = 400;
        p.n_ctx = 256;
        const char *dir = tu_tmp(cases[k].shape);
        synth_ok(dir, &p);
        if (!file_contains(in_dir(dir, "config.json"), cases[k].needle))
            fail_msg("%s: config.json lacks %s", cases[k].shape, cases[k].needle);
        /* other dims: the folder says it is a custom shape like the named one, not that one */
        char like[128];
        snprintf(like, sizeof like, "\"shape\": \"custom\", \"like\": \"%s\"", cases[k].shape);
        if (!file_contains(in_dir(dir, "config.json"), like))
            fail_msg("%s with other dims: config.json lacks %s", cases[k].shape, like);
        assert_true(file_contains(in_dir(dir, "config.json"), "\"max_position_embeddings\": 256"));
        char pkg[1024];
        snprintf(pkg, sizeof pkg, "%s.slate", dir);
        convert_ok(dir, pkg);
        float *l = malloc(6 * 400 * sizeof *l);
        logits_of(pkg, l, 400);
        for (int i = 0; i < 6 * 400; i++) assert_true(isfinite(l[i]));
        free(l);
    }
    /* Qwen2 carries q/k/v biases; Phi-3 fuses q/k/v and gate/up; Gemma 2 and 3 have four norms
     * per layer, Gemma 3 q/k norms too. */
    assert_true(file_contains(in_dir(tu_tmp("qwen2.5-0.5b"), "model.safetensors"),
                              "model.layers.0.self_attn.q_proj.bias"));
    static const struct { const char *shape, *tensor; bool present; } layout[] = {
        {"phi-3-mini-4k", "\"model.layers.0.self_attn.qkv_proj.weight\"", true},
        {"phi-3-mini-4k", "\"model.layers.0.mlp.gate_up_proj.weight\"", true},
        {"phi-3-mini-4k", "\"model.layers.0.self_attn.q_proj.weight\"", false},
        {"gemma-2-2b", "\"model.layers.0.post_feedforward_layernorm.weight\"", true},
        {"gemma-2-2b", "\"model.layers.0.self_attn.q_norm.weight\"", false},
        {"gemma-2-2b", "\"lm_head.weight\"", false},
        {"gemma-3-1b", "\"model.layers.0.self_attn.k_norm.weight\"", true},
        {"gemma-3-1b", "\"model.layers.0.pre_feedforward_layernorm.weight\"", true},
        {"mistral-7b", "\"lm_head.weight\"", true},
    };
    for (size_t k = 0; k < sizeof layout / sizeof layout[0]; k++)
        if (file_contains(in_dir(tu_tmp(layout[k].shape), "model.safetensors"),
                          layout[k].tensor) != layout[k].present)
            fail_msg("%s: %s should%s be written", layout[k].shape, layout[k].tensor,
                     layout[k].present ? "" : " not");
}

/* The full-size shapes' parameter counts, from their configs: embedding (+ head when untied)
 * + layers x (attention + feed-forward + norms) + final norm, e.g. Mistral-7B: 2 x 32000 x 4096
 * + 32 x (2 x 4096 x 4096 + 2 x 1024 x 4096 + 3 x 14336 x 4096 + 2 x 4096) + 4096
 * = 7241732096 (the model card's 7.24B); Phi-3-mini 3.82B, Gemma-2-2B 2.61B, Gemma-3-1B 1.00B. */
static void describe_counts_the_published_shapes_without_writing(void **unused) {
    (void)unused;
    static const struct {
        const char *shape;
        int64_t n_params;
        int32_t n_tensors, head_dim;
        slate_dtype published;
    } cases[] = {
        {"phi-3-mini-4k", 3821079552, 195, 96, SLATE_DTYPE_BF16},
        {"gemma-2-2b", 2614341888, 288, 256, SLATE_DTYPE_F32},
        {"gemma-3-1b", 999885952, 340, 256, SLATE_DTYPE_BF16},
        {"mistral-7b", 7241732096, 291, 128, SLATE_DTYPE_BF16},
        {"llama-3.2-1b", 1235814400, 146, 64, SLATE_DTYPE_BF16},
        /* 128256 x 2048 + 36 x (2 x 2048 x 2048 + 2 x 512 x 2048 + 3 x 11008 x 2048 + 2 x 2048)
         * + 2048, tied: the model card's 3B (3.08B) */
        {"smollm3-3b", 3075098624, 326, 128, SLATE_DTYPE_BF16},
        /* 49155 x 2048 + 40 x (2 x 2048 x 2048 + 2 x 512 x 2048 + 3 x 8192 x 2048 + 2 x 2048)
         * + 2048, tied: granite-3.1-2b's 2.53B */
        {"granite-3.1-2b", 2533531648, 362, 64, SLATE_DTYPE_BF16},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        slate_synth_params p = slate_synth_default_params();
        p.shape = cases[k].shape;
        slate_synth_info info;
        slate_error e;
        if (slate_synth_describe(&p, &info, &e)) fail_msg("%s: %s", cases[k].shape, e.message);
        if (info.n_params != cases[k].n_params)
            fail_msg("%s: %lld parameters, expected %lld", cases[k].shape,
                     (long long)info.n_params, (long long)cases[k].n_params);
        assert_int_equal(info.n_tensors, cases[k].n_tensors);
        assert_int_equal(info.head_dim, cases[k].head_dim);
        assert_int_equal(info.published_dtype, cases[k].published);
        assert_true(info.weights_bytes == (uint64_t)info.n_params * 2);
        assert_non_null(info.source);
    }
    /* A named shape keeps its own head size only with its own dim and heads. */
    slate_synth_params p = slate_synth_default_params();
    p.shape = "gemma-2-2b";
    p.n_layers = 2;
    slate_synth_info info;
    assert_int_equal(slate_synth_describe(&p, &info, NULL), SLATE_OK);
    assert_int_equal(info.head_dim, 256);
    p.dim = 64;
    p.n_heads = 4;
    p.n_kv_heads = 2;
    assert_int_equal(slate_synth_describe(&p, &info, NULL), SLATE_OK);
    assert_int_equal(info.head_dim, 16);
    p.head_dim = 32;
    assert_int_equal(slate_synth_describe(&p, &info, NULL), SLATE_OK);
    assert_int_equal(info.head_dim, 32);
    /* like: a custom shape (required dims, no source) of the named shape's layout */
    p = tiny();
    p.like = "phi-3-mini-4k";
    assert_int_equal(slate_synth_describe(&p, &info, NULL), SLATE_OK);
    assert_null(info.source);
    assert_int_equal(info.n_tensors, 3 + 6 * 2); /* embedding, norm, head; 6 per layer */
    slate_error e;
    assert_int_equal(slate_synth_describe(&p, NULL, &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "info"));
}

static void like_gives_a_custom_shape_of_the_named_architecture(void **unused) {
    (void)unused;
    const char *dir = tu_tmp("like_gemma3");
    slate_synth_params p = tiny();
    p.like = "gemma-3-1b";
    p.head_dim = 32;
    p.sliding_window = 3;
    synth_ok(dir, &p);
    static const char *const needles[] = {
        "\"Gemma3ForCausalLM\"", "\"head_dim\": 32", "\"sliding_window\": 3",
        "\"query_pre_attn_scalar\": 32", "\"max_position_embeddings\": 128",
        "\"shape\": \"custom\", \"like\": \"gemma-3-1b\""};
    for (size_t k = 0; k < sizeof needles / sizeof needles[0]; k++)
        if (!file_contains(in_dir(dir, "config.json"), needles[k]))
            fail_msg("config.json lacks %s", needles[k]);
    /* q: 4 heads x 32 = 128 rows of 64 */
    assert_true(file_contains(in_dir(dir, "model.safetensors"),
                              "\"model.layers.1.self_attn.q_proj.weight\":{\"dtype\":\"BF16\","
                              "\"shape\":[128,64]"));
    const char *pkg = tu_tmp("like_gemma3.slate");
    convert_ok(dir, pkg);
    float *l = malloc(6 * 300 * sizeof *l);
    logits_of(pkg, l, 300);
    for (int i = 0; i < 6 * 300; i++) assert_true(isfinite(l[i]));
    free(l);
}

static void expect_refusal(const slate_synth_params *p, const char *dir, slate_status want,
                           const char *needle) {
    slate_error e;
    memset(&e, 0, sizeof e);
    slate_status s = slate_synth(dir, p, &e);
    if (s != want || !strstr(e.message, needle))
        fail_msg("expected %s with '%s', got %s: '%s'", slate_status_name(want), needle,
                 slate_status_name(s), e.message);
    if (dir && strcmp(dir, tu_tmpdir()) != 0) assert_false(tu_exists(dir));
}

static void bad_parameters_are_refused_naming_the_culprit(void **unused) {
    (void)unused;
    const char *dir = tu_tmp("refused");
    slate_synth_params p = tiny();
    p.shape = "gpt-5";
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "unknown shape 'gpt-5' (known: tinyllama-1.1b");
    p = tiny();
    p.n_heads = 5;
    p.n_kv_heads = 5;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "dim 64 / n_heads 5");
    p = tiny();
    p.n_kv_heads = 3;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "multiple of n_kv_heads 3");
    p = tiny();
    p.n_vocab = 258;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "n_vocab is 258, expected 259..");
    p = tiny();
    p.n_layers = 0;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "n_layers is required");
    p = tiny();
    p.n_layers = -1;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "n_layers is -1, expected 1..1024");
    p = tiny();
    p.dtype = SLATE_DTYPE_I32;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "expected f32, f16 or bf16");
    p = tiny();
    expect_refusal(&p, tu_tmpdir(), SLATE_E_INVALID_ARG, "already exists");
    expect_refusal(&p, NULL, SLATE_E_INVALID_ARG, "out_dir");
    expect_refusal(&p, "", SLATE_E_INVALID_ARG, "out_dir");
    p = tiny();
    p.shape = "gemma-2-2b";
    p.like = "gemma-3-1b";
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "shape 'gemma-2-2b' and like 'gemma-3-1b' both");
    p = tiny();
    p.like = "gemma-4";
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "unknown like 'gemma-4' (known: tinyllama-1.1b");
    p = tiny();
    p.like = "mistral-7b";
    p.n_layers = 0;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "n_layers is required");
    p = tiny();
    p.sliding_window = 8;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "sliding_window 8: shape 'custom' has no sliding");
    p = tiny();
    p.like = "llama-3.2-1b";
    p.sliding_window = 8;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "like 'llama-3.2-1b' has no sliding window");
    p = tiny();
    p.like = "mistral-7b";
    p.sliding_window = -1;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "sliding_window is -1, expected 1..");
    p = tiny();
    p.head_dim = 33;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "head_dim 33 must be even");
    p.head_dim = 514;
    expect_refusal(&p, dir, SLATE_E_INVALID_ARG, "head_dim is 514, expected 2..512");
}

/* slate_synth_dim_get is the table slate_synth checks with (the CLI's --dims reads it): one
 * entry per dim field, in field order, and a value past either end of an entry's range is
 * refused naming the field and that range; a required one left 0 names the field too. */
static void the_dims_table_is_what_synth_checks(void **unused) {
    (void)unused;
    static const char *const fields[] = {"dim",     "n_layers", "n_heads",  "n_kv_heads",
                                         "ffn_dim", "n_vocab",  "n_ctx",    "head_dim",
                                         "sliding_window"};
    const size_t n_fields = sizeof fields / sizeof fields[0];
    assert_null(slate_synth_dim_get(-1));
    assert_null(slate_synth_dim_get((int32_t)n_fields));
    size_t prev = 0;
    for (int32_t k = 0; k < (int32_t)n_fields; k++) {
        const slate_synth_dim *d = slate_synth_dim_get(k);
        assert_non_null(d);
        assert_string_equal(d->field, fields[k]);
        assert_non_null(d->key);
        if (k > 0) assert_true(d->offset > prev); /* field order */
        prev = d->offset;
        assert_true(d->offset % sizeof(int32_t) == 0);
        assert_true(d->offset + sizeof(int32_t) <= sizeof(slate_synth_params));
        assert_true(d->lo >= 1 && d->lo < d->hi);
        /* mistral-7b's architecture: a window to set */
        int32_t bad[2] = {d->lo - 1 == 0 ? -1 : d->lo - 1, d->hi + 1};
        for (int j = 0; j < 2; j++) {
            slate_synth_params p = tiny();
            p.like = "mistral-7b";
            memcpy((char *)&p + d->offset, &bad[j], sizeof bad[j]);
            char want[128];
            snprintf(want, sizeof want, "%s is %d, expected %d..%d", d->field, bad[j], d->lo,
                     d->hi);
            slate_synth_info info;
            slate_error e;
            memset(&e, 0, sizeof e);
            slate_status st = slate_synth_describe(&p, &info, &e);
            if (st != SLATE_E_INVALID_ARG || !strstr(e.message, want))
                fail_msg("%s = %d: expected '%s', got %s: '%s'", d->field, bad[j], want,
                         slate_status_name(st), e.message);
            if (d->why && !strstr(e.message, d->why)) fail_msg("no '%s' in '%s'", d->why, e.message);
        }
        slate_synth_params p = tiny();
        int32_t zero = 0;
        memcpy((char *)&p + d->offset, &zero, sizeof zero);
        slate_synth_info info;
        slate_error e;
        memset(&e, 0, sizeof e);
        slate_status st = slate_synth_describe(&p, &info, &e);
        char want[128];
        snprintf(want, sizeof want, "custom shape: %s is required", d->field);
        if (d->required && (st != SLATE_E_INVALID_ARG || !strstr(e.message, want)))
            fail_msg("%s = 0: expected '%s', got %s: '%s'", d->field, want,
                     slate_status_name(st), e.message);
        if (!d->required && st != SLATE_OK)
            fail_msg("%s = 0 (not required): got %s: '%s'", d->field, slate_status_name(st),
                     e.message);
    }
}

static void failed_synth_leaves_no_folder_and_a_stale_tmp_is_replaced(void **unused) {
    (void)unused;
    const char *dir = tu_tmp("faulty");
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    slate_synth_params p = tiny();
    p.n_layers = 1;
    long long live = slate__alloc_live_bytes();
    for (long n = 1;; n++) {
        slate__alloc_fail_after(n);
        slate_error e;
        slate_status s = slate_synth(dir, &p, &e);
        slate__alloc_fail_after(0);
        if (s == SLATE_OK) break;
        assert_int_equal(s, SLATE_E_NOMEM);
        assert_false(tu_exists(dir));
        assert_false(tu_exists(tmp));
        assert_int_equal(slate__alloc_live_bytes(), live);
        assert_true(n < 100);
    }
    assert_true(tu_exists(in_dir(dir, "model.safetensors")));
    /* A stale half-written folder from a crashed run is removed, not mistaken for output. */
    const char *dir2 = tu_tmp("stale");
    char tmp2[1024];
    snprintf(tmp2, sizeof tmp2, "%s.tmp", dir2);
    char cmd[2300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && echo junk > '%s/config.json'", tmp2, tmp2);
    assert_int_equal(system(cmd), 0);
    synth_ok(dir2, &p);
    assert_false(tu_exists(tmp2));
    assert_true(file_contains(in_dir(dir2, "config.json"), "LlamaForCausalLM"));
    /* ... but a folder holding other files is left alone and named. */
    const char *dir3 = tu_tmp("foreign");
    char tmp3[1024];
    snprintf(tmp3, sizeof tmp3, "%s.tmp", dir3);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && echo keep > '%s/notes.txt'", tmp3, tmp3);
    assert_int_equal(system(cmd), 0);
    slate_error e;
    assert_int_equal(slate_synth(dir3, &p, &e), SLATE_E_IO);
    assert_non_null(strstr(e.message, "remove it by hand"));
    assert_true(tu_exists(in_dir(tmp3, "notes.txt")));
    assert_false(tu_exists(dir3));
    /* A symbolic link planted at DIR.tmp is refused, not followed: the folder it points to
     * keeps its .json files. */
    const char *dir4 = tu_tmp("planted");
    const char *victim = tu_tmp("victim_dir");
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && echo keep > '%s/config.json' && ln -s '%s' "
             "'%s.tmp'", victim, victim, victim, dir4);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(slate_synth(dir4, &p, &e), SLATE_E_IO);
    if (!strstr(e.message, "is not a folder (a symbolic link)")) fail_msg("got: %s", e.message);
    assert_true(tu_exists(in_dir(victim, "config.json")));
    assert_false(tu_exists(dir4));
}

static void temps_of_a_killed_run_are_removed_by_the_next(void **unused) {
    (void)unused;
    /* SIGKILL runs no handler: the writer's temps (NAME.tmp.<pid>.<n>) stay in DIR.tmp. */
    const char *dir = tu_tmp("killed");
    char cmd[2300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s.tmp' && : > '%s.tmp/model.safetensors.tmp.1.3' && "
             ": > '%s.tmp/config.json.tmp.1.0'", dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    slate_synth_params p = tiny();
    p.n_layers = 1;
    synth_ok(dir, &p);
    assert_true(tu_exists(in_dir(dir, "model.safetensors")));
    assert_false(tu_exists(in_dir(dir, "model.safetensors.tmp.1.3")));
}

static void a_dangling_link_at_out_dir_is_refused_before_writing(void **unused) {
    (void)unused;
    const char *dir = tu_tmp("dangling");
    char cmd[1100], tmp[1024];
    snprintf(cmd, sizeof cmd, "ln -s nowhere '%s'", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    slate_synth_params p = tiny();
    slate_error e;
    assert_int_equal(slate_synth(dir, &p, &e), SLATE_E_INVALID_ARG);
    if (!strstr(e.message, "already exists (a symbolic link to a missing target)"))
        fail_msg("got: %s", e.message);
    assert_false(tu_exists(tmp));
    /* Bad dims are named first, whatever is at out_dir. */
    p.n_vocab = 258;
    assert_int_equal(slate_synth(dir, &p, &e), SLATE_E_INVALID_ARG);
    if (!strstr(e.message, "n_vocab is 258")) fail_msg("got: %s", e.message);
}

static void shape_names_are_listed_in_order(void **unused) {
    (void)unused;
    assert_string_equal(slate_synth_shape_name(0), "tinyllama-1.1b");
    assert_string_equal(slate_synth_shape_name(1), "smollm2-135m");
    assert_string_equal(slate_synth_shape_name(2), "llama-3.2-1b");
    assert_string_equal(slate_synth_shape_name(3), "qwen2.5-0.5b");
    assert_string_equal(slate_synth_shape_name(4), "phi-3-mini-4k");
    assert_string_equal(slate_synth_shape_name(5), "gemma-2-2b");
    assert_string_equal(slate_synth_shape_name(6), "gemma-3-1b");
    assert_string_equal(slate_synth_shape_name(7), "mistral-7b");
    assert_string_equal(slate_synth_shape_name(8), "smollm3-3b");
    assert_string_equal(slate_synth_shape_name(9), "granite-3.1-2b");
    assert_null(slate_synth_shape_name(10));
    assert_null(slate_synth_shape_name(-1));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tiny_custom_shape_converts_opens_and_gives_finite_spread_logits),
        cmocka_unit_test(tokenizer_has_exactly_the_vocab_size_and_round_trips),
        cmocka_unit_test(same_seed_gives_same_bytes_and_another_seed_differs),
        cmocka_unit_test(shards_give_the_same_logits_as_one_file),
        cmocka_unit_test(named_shapes_keep_their_architecture_under_dim_overrides),
        cmocka_unit_test(describe_counts_the_published_shapes_without_writing),
        cmocka_unit_test(the_dims_table_is_what_synth_checks),
        cmocka_unit_test(like_gives_a_custom_shape_of_the_named_architecture),
        cmocka_unit_test(bad_parameters_are_refused_naming_the_culprit),
        cmocka_unit_test(failed_synth_leaves_no_folder_and_a_stale_tmp_is_replaced),
        cmocka_unit_test(temps_of_a_killed_run_are_removed_by_the_next),
        cmocka_unit_test(a_dangling_link_at_out_dir_is_refused_before_writing),
        cmocka_unit_test(shape_names_are_listed_in_order),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
