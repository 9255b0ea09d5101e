/* test_tok_spm.c - SentencePiece-style BPE: llama2.c semantics on tok512.bin, byte fallback,
 * invalid UTF-8, round trips, BOS/empty input, decode's dummy-prefix strip, special tokens, and
 * a tokenizer.json written from the Llama 2 vocabulary (merges in the HF converter's order)
 * that must encode exactly like the llama2.c tokenizer.bin it came from. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"

static void assert_round_trip(const slate_tokenizer *tok, const char *text, size_t len) {
    int32_t *ids = malloc((len + 8) * 2 * sizeof *ids);
    size_t n = tu_encode(tok, text, len, SLATE_ENCODE_ADD_BOS, ids, (len + 8) * 2);
    char *back = malloc(len * 2 + 16);
    size_t blen = 0;
    assert_int_equal(slate_tokenizer_decode(tok, ids, n, false, back, len * 2 + 16, &blen, NULL),
                     SLATE_OK);
    if (blen != len || memcmp(back, text, len) != 0)
        fprintf(stderr, "round trip failed: \"%.*s\" -> \"%.*s\"\n", (int)len, text, (int)blen,
                back);
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    free(ids);
    free(back);
}

/* Expected ids from a line-by-line Python port of llama2.c run.c encode() (dummy prefix " ",
 * byte fallback b + 3, best-score merges) run on tok512.bin; no BOS. */
static const struct {
    const char *text;
    int32_t ids[16];
    size_t n;
} k_tok512[] = {
    {"Once upon a time", {403, 407, 261, 378}, 4},
    {"Hello world", {346, 306, 414, 263, 304, 341}, 6},
    {"  two  spaces ", {410, 410, 259, 424, 414, 410, 262, 427, 412, 331, 419, 410}, 12},
    {"\xF0\x9F\x99\x82 emoji", {410, 243, 162, 156, 133, 344, 423, 414, 449, 417}, 10},
    {"caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD",
     {280, 412, 431, 485, 410, 231, 192, 163, 232, 168, 192},
     11},
    {"a\nb\tc", {261, 13, 430, 12, 429}, 5},
    {"12345", {410, 475, 479, 472, 484, 480}, 6},
};

static void tok512_encodes_like_llama2c_run_c(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    for (size_t i = 0; i < sizeof k_tok512 / sizeof k_tok512[0]; i++) {
        int32_t ids[64];
        size_t n = tu_encode(tok, k_tok512[i].text, strlen(k_tok512[i].text), 0, ids, 64);
        if (n != k_tok512[i].n || memcmp(ids, k_tok512[i].ids, n * sizeof *ids) != 0)
            fprintf(stderr, "mismatch on \"%s\"\n", k_tok512[i].text);
        assert_int_equal(n, k_tok512[i].n);
        assert_memory_equal(ids, k_tok512[i].ids, n * sizeof *ids);
        assert_round_trip(tok, k_tok512[i].text, strlen(k_tok512[i].text));
    }
    slate_tokenizer_free(tok);
}

static void llama2c_vocab_has_bos_eos_and_adds_bos(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    assert_int_equal(slate_tokenizer_n_vocab(tok), 512);
    assert_int_equal(slate_tokenizer_bos(tok), 1);
    assert_int_equal(slate_tokenizer_eos(tok), 2);
    assert_true(slate_tokenizer_is_eog(tok, 2));
    assert_false(slate_tokenizer_is_eog(tok, 1));
    assert_false(slate_tokenizer_is_eog(tok, -1));
    assert_false(slate_tokenizer_is_eog(tok, 512));
    int32_t ids[8];
    assert_int_equal(tu_encode(tok, "Once upon a time", 16, SLATE_ENCODE_ADD_BOS, ids, 8), 5);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 403);
    slate_tokenizer_free(tok);
}

static void empty_text_gives_no_ids_or_just_bos(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    int32_t ids[4] = {-7, -7, -7, -7};
    assert_int_equal(tu_encode(tok, "", 0, 0, ids, 4), 0);
    assert_int_equal(tu_encode(tok, NULL, 0, 0, NULL, 0), 0);
    assert_int_equal(tu_encode(tok, "", 0, SLATE_ENCODE_ADD_BOS, ids, 4), 1);
    assert_int_equal(ids[0], 1);
    size_t blen = 99;
    char buf[4];
    assert_int_equal(slate_tokenizer_decode(tok, ids, 0, false, buf, sizeof buf, &blen, NULL),
                     SLATE_OK);
    assert_int_equal(blen, 0);
    slate_tokenizer_free(tok);
}

static void invalid_utf8_bytes_fall_back_to_byte_tokens_and_round_trip(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    /* A lone 0xFF, a truncated 2-byte sequence, a stray continuation byte, an overlong NUL,
     * a surrogate: each invalid byte is its own character and becomes <0xXX> = id b + 3. */
    static const char text[] = "\xFF"
                               "a\xC3"
                               "b\x80"
                               "\xC0\x80"
                               "\xED\xA0\x80";
    size_t len = sizeof text - 1;
    int32_t ids[32];
    size_t n = tu_encode(tok, text, len, 0, ids, 32);
    bool saw_ff = false, saw_c3 = false, saw_80 = false;
    for (size_t i = 0; i < n; i++) {
        saw_ff |= ids[i] == 0xFF + 3;
        saw_c3 |= ids[i] == 0xC3 + 3;
        saw_80 |= ids[i] == 0x80 + 3;
    }
    assert_true(saw_ff && saw_c3 && saw_80);
    assert_round_trip(tok, text, len);
    slate_tokenizer_free(tok);
}

static void whitespace_emoji_and_other_scripts_round_trip(void **st) {
    (void)st;
    static const char *const texts[] = {
        " ",
        "  ",
        "   leading",
        "trailing   ",
        "\t\ttabs\t",
        "\n\n\nnewlines\n",
        " \n \t ",
        "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",         /* emoji + modifier */
        "\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB", /* ZWJ sequence */
        "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80", /* Russian */
        "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",                                  /* Arabic */
        "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF",              /* Japanese */
        "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",  /* Hindi */
        "3.14159 2,718 1e-9 0x1F",
    };
    const char *vocabs[] = {"stories260K/tok512.bin", "llama2c-vocab/tokenizer.bin",
                            "tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf"};
    for (size_t v = 0; v < 3; v++) {
        slate_tokenizer *tok = tu_tok_load(vocabs[v]);
        if (!tok) continue;
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
            assert_round_trip(tok, texts[i], strlen(texts[i]));
        /* A literal U+2581 in the input survives only where the vocabulary spells spaces
         * plainly (llama2.c); with U+2581 vocabularies it reads as a space, as in
         * sentencepiece and llama.cpp (documented limitation). */
        if (v < 2)
            assert_round_trip(tok,
                              "a\xE2\x96\x81"
                              "b",
                              5);
        slate_tokenizer_free(tok);
    }
}

static void random_bytes_round_trip(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    uint64_t seed = tu_seed();
    char text[300];
    for (int iter = 0; iter < 300; iter++) {
        size_t len = tu_rand(&seed) % sizeof text;
        for (size_t i = 0; i < len; i++) {
            uint64_t r = tu_rand(&seed);
            /* Mix ASCII, spaces and arbitrary bytes. */
            text[i] = (char)(r % 4 == 0   ? ' '
                             : r % 4 == 1 ? 'a' + (int)(r >> 8) % 26
                                          : (int)(r >> 16));
        }
        assert_round_trip(tok, text, len);
    }
    slate_tokenizer_free(tok);
}

static void short_buffer_reports_the_needed_count(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    int32_t ids[2];
    size_t n = 0;
    slate_error err;
    assert_int_equal(
        slate_tokenizer_encode(tok, "Once upon a time", 16, SLATE_ENCODE_ADD_BOS, ids, 2, &n, &err),
        SLATE_E_BUFFER_TOO_SMALL);
    assert_int_equal(n, 5);
    assert_non_null(strstr(err.message, "5"));
    assert_int_equal(ids[0], 1); /* what fits is written */
    char buf[4];
    int32_t hello[8];
    size_t nh = tu_encode(tok, "Hello world", 11, 0, hello, 8);
    size_t blen = 0;
    assert_int_equal(slate_tokenizer_decode(tok, hello, nh, false, buf, sizeof buf, &blen, &err),
                     SLATE_E_BUFFER_TOO_SMALL);
    assert_int_equal(blen, 11);
    slate_tokenizer_free(tok);
}

static void pieces_map_bytes_and_hide_control_tokens(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    char buf[16];
    size_t len = 0;
    assert_int_equal(slate_tokenizer_piece(tok, 0xC3 + 3, false, buf, sizeof buf, &len, NULL),
                     SLATE_OK);
    assert_int_equal(len, 1);
    assert_int_equal((uint8_t)buf[0], 0xC3);
    assert_int_equal(slate_tokenizer_piece(tok, 1, false, buf, sizeof buf, &len, NULL), SLATE_OK);
    assert_int_equal(len, 0);
    assert_int_equal(slate_tokenizer_piece(tok, 1, true, buf, sizeof buf, &len, NULL), SLATE_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "\n<s>\n", 5);
    assert_int_equal(slate_tokenizer_piece(tok, 403, false, buf, sizeof buf, &len, NULL), SLATE_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, " Once", 5);
    assert_int_equal(slate_tokenizer_piece(tok, 403, false, buf, 2, &len, NULL),
                     SLATE_E_BUFFER_TOO_SMALL);
    assert_int_equal(len, 5);
    slate_error err;
    assert_int_equal(slate_tokenizer_piece(tok, 512, false, buf, sizeof buf, &len, &err),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(err.message, "512"));
    assert_int_equal(slate_tokenizer_piece(tok, -1, false, buf, sizeof buf, &len, NULL),
                     SLATE_E_INVALID_ARG);
    slate_tokenizer_free(tok);
}

static void decode_strips_only_the_dummy_prefix_space(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    int32_t ids[] = {1, 403, 407}; /* BOS " Once" " upon" */
    char buf[32];
    size_t len = 0;
    assert_int_equal(slate_tokenizer_decode(tok, ids, 3, false, buf, sizeof buf, &len, NULL),
                     SLATE_OK);
    assert_int_equal(len, 9);
    assert_memory_equal(buf, "Once upon", 9);
    /* With special tokens shown, BOS is the first text and the space stays. */
    assert_int_equal(slate_tokenizer_decode(tok, ids, 3, true, buf, sizeof buf, &len, NULL),
                     SLATE_OK);
    assert_int_equal(len, 15);
    assert_memory_equal(buf, "\n<s>\n Once upon", 15);
    int32_t bad[] = {403, 9999};
    slate_error err;
    assert_int_equal(slate_tokenizer_decode(tok, bad, 2, false, buf, sizeof buf, &len, &err),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(err.message, "ids[1]"));
    slate_tokenizer_free(tok);
}

static void special_tokens_match_only_with_parse_special(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf");
    if (!tok) skip();
    int32_t ids[32];
    size_t n = tu_encode(tok, "<s>Hello</s>", 12, SLATE_ENCODE_PARSE_SPECIAL, ids, 32);
    /* llama.cpp: a dummy prefix after each special token: "<s>", " Hello", "</s>" */
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 15043);
    assert_int_equal(ids[2], 2);
    n = tu_encode(tok, "<s>Hello</s>", 12, 0, ids, 32);
    for (size_t i = 0; i < n; i++) assert_true(ids[i] != 1 && ids[i] != 2);
    slate_tokenizer_free(tok);
}

static void phi3_user_defined_token_is_always_matched(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("tokenizers/gguf-vocab/ggml-vocab-phi-3.gguf");
    if (!tok) skip();
    int32_t ids[32];
    /* "</s>" is USER_DEFINED in this vocabulary (type 4): matched without PARSE_SPECIAL, as in
     * llama.cpp. "<|end|>" is CONTROL: only with PARSE_SPECIAL; it also ends generation. */
    size_t n = tu_encode(tok, "a</s>", 5, 0, ids, 32);
    assert_int_equal(ids[n - 1], 2);
    n = tu_encode(tok, "a<|end|>", 8, 0, ids, 32);
    assert_true(ids[n - 1] != 32007);
    n = tu_encode(tok, "a<|end|>", 8, SLATE_ENCODE_PARSE_SPECIAL, ids, 32);
    assert_int_equal(ids[n - 1], 32007);
    assert_true(slate_tokenizer_is_eog(tok, 32007));
    assert_true(slate_tokenizer_is_eog(tok, 32000));
    assert_int_equal(slate_tokenizer_eos(tok), 32000);
    slate_tokenizer_free(tok);
}

/* Phi-3 GGUF: llama.cpp's RSTRIP rule by model name (HF's tokenizer.json has rstrip on these
 * tokens): the "\n" after each chat marker gives no token, so "Hi" is a fresh stretch with
 * the dummy prefix, exactly as encoding "Hi" alone. */
static void phi3_chat_markers_strip_the_following_newline(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("tokenizers/gguf-vocab/ggml-vocab-phi-3.gguf");
    if (!tok) skip();
    const char *chat = "<|user|>\nHi<|end|>\n<|assistant|>\n";
    int32_t ids[32], hi[8];
    size_t n = tu_encode(tok, chat, strlen(chat), SLATE_ENCODE_PARSE_SPECIAL, ids, 32);
    size_t n_hi = tu_encode(tok, "Hi", 2, 0, hi, 8);
    assert_true(n_hi >= 1);
    assert_int_equal(n, 3 + n_hi);
    assert_int_equal(ids[0], 32010); /* <|user|> */
    assert_memory_equal(ids + 1, hi, n_hi * sizeof *hi);
    assert_int_equal(ids[1 + n_hi], 32007); /* <|end|> */
    assert_int_equal(ids[2 + n_hi], 32001); /* <|assistant|> */
    for (size_t i = 0; i < n; i++) assert_true(ids[i] != 13); /* <0x0A> */
    /* The rule's exceptions keep their white space; "</s>" (USER_DEFINED) strips. */
    assert_int_equal(slate__tok_attrs(tok, 32007), SLATE__TOK_ATTR_RSTRIP);
    assert_int_equal(slate__tok_attrs(tok, 2), SLATE__TOK_ATTR_RSTRIP);  /* </s> */
    assert_int_equal(slate__tok_attrs(tok, 1), 0);                        /* <s> */
    assert_int_equal(slate__tok_attrs(tok, 0), 0);                        /* <unk> */
    assert_int_equal(slate__tok_attrs(tok, 32000), 0);                    /* <|endoftext|> */
    n = tu_encode(tok, "<|endoftext|>\n", 14, SLATE_ENCODE_PARSE_SPECIAL, ids, 32);
    assert_int_equal(ids[0], 32000);
    assert_int_equal(ids[n - 1], 13);
    /* Without PARSE_SPECIAL the markers are text and nothing is stripped. */
    n = tu_encode(tok, chat, strlen(chat), 0, ids, 32);
    int newlines = 0;
    for (size_t i = 0; i < n; i++) newlines += ids[i] == 13;
    assert_int_equal(newlines, 3);
    slate_tokenizer_free(tok);
    /* Another SPM vocabulary (general.name "llama-spm") gets no attributes. */
    tok = tu_tok_load("tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf");
    if (!tok) return;
    for (int32_t id = 0; id < slate_tokenizer_n_vocab(tok); id++)
        assert_int_equal(slate__tok_attrs(tok, id), 0);
    slate_tokenizer_free(tok);
}

/* ---- tokenizer.json (Llama 2 style) from tokenizer.bin ------------------------------------- */

typedef struct mrg {
    int32_t piece, left, right;
    float score;
} mrg;

static int mrg_cmp(const void *a, const void *b) {
    const mrg *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->piece != y->piece) return x->piece < y->piece ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return x->right < y->right ? -1 : x->right > y->right;
}

/* Writes a tokenizer.json as transformers' LlamaConverter does: vocab with U+2581 for space,
 * merges from SentencePieceExtractor (every split of every piece into two pieces, ordered by the
 * piece's score, then piece id, then the parts' ids), normalizer Prepend + Replace, byte
 * fallback. Returns false when the source is missing. */
static bool write_llama_json(const char *src_rel, const char *out_path) {
    slate_tokenizer *src = tu_tok_load(src_rel);
    if (!src) return false;
    int32_t n = slate_tokenizer_n_vocab(src);
    char **text = calloc((size_t)n, sizeof *text);
    for (int32_t i = 0; i < n; i++) {
        size_t len;
        const char *s = slate__tok_text(src, i, &len);
        text[i] = malloc(len * 3 + 1);
        size_t k = 0;
        for (size_t j = 0; j < len; j++) {
            if (s[j] == ' ') {
                memcpy(text[i] + k, "\xE2\x96\x81", 3);
                k += 3;
            } else {
                text[i][k++] = s[j];
            }
        }
        text[i][k] = '\0';
    }
    free(text[1]);
    free(text[2]);
    text[1] = strdup("<s>");
    text[2] = strdup("</s>");
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(),
          *vocab = cJSON_CreateObject();
    size_t cap = 1024, n_m = 0;
    mrg *m = malloc(cap * sizeof *m);
    for (int32_t i = 0; i < n; i++) {
        cJSON_AddNumberToObject(vocab, text[i], i);
        if (slate__tok_type_of(src, i) != SLATE__TOKT_NORMAL) continue;
        size_t len = strlen(text[i]);
        for (size_t cut = 1; cut < len; cut++) {
            if (((uint8_t)text[i][cut] & 0xC0) == 0x80) continue; /* character boundaries only */
            char *l = strndup(text[i], cut);
            int32_t a = -1, b = -1;
            /* The parts must be NORMAL pieces of the vocabulary. */
            for (int pass = 0; pass < 2; pass++) {
                const char *s = pass == 0 ? l : text[i] + cut;
                char plain[256];
                size_t k = 0;
                for (size_t j = 0; s[j] && k < sizeof plain - 1;) {
                    if (strncmp(s + j, "\xE2\x96\x81", 3) == 0) { /* stops at the NUL */
                        plain[k++] = ' ';
                        j += 3;
                    } else {
                        plain[k++] = s[j++];
                    }
                }
                int32_t id = slate__tok_find(src, plain, k);
                if (id >= 0 && slate__tok_type_of(src, id) != SLATE__TOKT_NORMAL) id = -1;
                if (pass == 0)
                    a = id;
                else
                    b = id;
            }
            free(l);
            if (a < 0 || b < 0) continue;
            if (n_m == cap) m = realloc(m, (cap *= 2) * sizeof *m);
            m[n_m++] = (mrg){i, a, b, slate__tok_score(src, i)};
        }
    }
    qsort(m, n_m, sizeof *m, mrg_cmp);
    cJSON *merges = cJSON_CreateArray();
    for (size_t k = 0; k < n_m; k++) {
        char *s = malloc(strlen(text[m[k].left]) + strlen(text[m[k].right]) + 2);
        sprintf(s, "%s %s", text[m[k].left], text[m[k].right]);
        cJSON_AddItemToArray(merges, cJSON_CreateString(s));
        free(s);
    }
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddStringToObject(model, "unk_token", "<unk>");
    cJSON_AddBoolToObject(model, "byte_fallback", 1);
    cJSON_AddBoolToObject(model, "fuse_unk", 1);
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", merges);
    cJSON *added = cJSON_CreateArray();
    for (int i = 0; i < 3; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", i);
        cJSON_AddStringToObject(a, "content", text[i]);
        cJSON_AddBoolToObject(a, "special", 1);
        cJSON_AddItemToArray(added, a);
    }
    cJSON_AddItemToObject(root, "added_tokens", added);
    cJSON *norm = cJSON_Parse("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\","
                              "\"prepend\":\"\xE2\x96\x81\"},{\"type\":\"Replace\",\"pattern\":"
                              "{\"String\":\" \"},\"content\":\"\xE2\x96\x81\"}]}");
    cJSON_AddItemToObject(root, "normalizer", norm);
    cJSON_AddNullToObject(root, "pre_tokenizer");
    cJSON_AddItemToObject(root, "model", model);
    char *json = cJSON_PrintUnformatted(root);
    FILE *f = fopen(out_path, "wb");
    fputs(json, f);
    fclose(f);
    free(json);
    cJSON_Delete(root);
    free(m);
    for (int32_t i = 0; i < n; i++) free(text[i]);
    free(text);
    slate_tokenizer_free(src);
    return true;
}

static void llama2_style_tokenizer_json_encodes_like_tokenizer_bin(void **st) {
    (void)st;
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tu_tmp("llama2json"));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    assert_int_equal(system(cmd), 0);
    char json_path[600];
    snprintf(json_path, sizeof json_path, "%s/tokenizer.json", dir);
    if (!write_llama_json("llama2c-vocab/tokenizer.bin", json_path)) skip();
    slate_tokenizer *bin = tu_tok_load("llama2c-vocab/tokenizer.bin");
    slate_tokenizer *hf = NULL;
    slate_error err;
    slate_status s = slate_tokenizer_open(json_path, &hf, &err);
    if (s != SLATE_OK) fprintf(stderr, "%s\n", err.message);
    assert_int_equal(s, SLATE_OK);
    assert_int_equal(slate__tok_kind_of(hf), SLATE__TOK_SPM);
    assert_int_equal(slate_tokenizer_bos(hf), 1); /* "<s>" without a tokenizer_config.json */
    /* HF's way (merges by rank) gives sentencepiece's ids here, merging word by word. */
    assert_true(hf->merge_ranks);
    assert_true(hf->spm_words_apart);
    /* The vector inputs plus a paragraph of ordinary text. */
    char rel[] = "tokenizers/vectors/ggml-vocab-llama-spm.gguf.inp";
    FILE *f = fopen(tu_model_path(rel), "rb");
    assert_non_null(f);
    static char inp[1 << 16];
    size_t len = fread(inp, 1, sizeof inp - 1, f);
    fclose(f);
    inp[len] = '\0';
    static const char para[] =
        "The quick brown fox jumps over the lazy dog. Sphinx of black quartz, judge my vow! "
        "    indented code { return x->y[3] * 2.5e-3; }\n\tTabbed\r\nWindows lines\n";
    int n_texts = 0, mismatches = 0;
    for (char *p = inp; p && *p;) {
        char *sep = strstr(p, "\n__ggml_vocab_test__\n");
        size_t tl = sep ? (size_t)(sep - p) : strlen(p);
        for (int pass = 0; pass < 2; pass++) {
            const char *t = pass == 0 ? p : para;
            size_t l = pass == 0 ? tl : sizeof para - 1;
            int32_t a[2048], b[2048];
            size_t na = tu_encode(bin, t, l, SLATE_ENCODE_ADD_BOS, a, 2048);
            size_t nb = tu_encode(hf, t, l, SLATE_ENCODE_ADD_BOS, b, 2048);
            if (na != nb || memcmp(a, b, na * sizeof *a) != 0) {
                mismatches++;
                fprintf(stderr, "tokenizer.json differs from tokenizer.bin on \"%.*s\"\n", (int)l,
                        t);
            }
            n_texts++;
        }
        p = sep ? sep + 21 : NULL;
    }
    fprintf(stderr, "[hf-spm] %d texts, %d mismatches\n", n_texts, mismatches);
    assert_int_equal(mismatches, 0);
    slate_tokenizer_free(hf);
    slate_tokenizer_free(bin);
}

/* A tokenizer.json with a Metaspace pre-tokenizer (Mistral v0.3, Llama converted with
 * legacy=false) follows HF tokenizers' metaspace.rs: the mark is prepended only when the text
 * does not already start with one, and with prepend_scheme "first" only to the text at offset 0
 * of the input (none after an added token). The Prepend normalizer (Llama 2 legacy files)
 * always prepends, as sentencepiece and llama.cpp do. Expected ids follow those rules by hand:
 * "Hi" -> "\u2581Hi" = 7, " Hi" -> "\u2581Hi" = 7, "<s>Hi" -> 1 "Hi" = 1 8. */
static slate_tokenizer *metaspace_json(const char *pre_tokenizer, const char *normalizer) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
             " {\"id\": 1, \"content\": \"<s>\", \"special\": true},"
             " {\"id\": 2, \"content\": \"</s>\", \"special\": true}],"
             " \"normalizer\": %s, \"pre_tokenizer\": %s,"
             " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\","
             " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"\xE2\x96\x81\": 3, \"H\": 4,"
             " \"i\": 5, \"\xE2\x96\x81H\": 6, \"\xE2\x96\x81Hi\": 7, \"Hi\": 8},"
             " \"merges\": [\"\xE2\x96\x81 H\", \"\xE2\x96\x81H i\", \"H i\"]}}",
             normalizer, pre_tokenizer);
    slate_tokenizer *tok = NULL;
    slate_error err;
    slate_status s = slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err);
    if (s != SLATE_OK) fprintf(stderr, "%s\n", err.message);
    assert_int_equal(s, SLATE_OK);
    return tok;
}

static void expect_ids(const slate_tokenizer *tok, const char *text, const int32_t *want,
                       size_t n_want) {
    tu_expect_ids(tok, text, SLATE_ENCODE_PARSE_SPECIAL, want, n_want);
}

static void metaspace_prefix_follows_hf_prepend_scheme(void **st) {
    (void)st;
    static const char first[] = "{\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\","
                                " \"prepend_scheme\": \"first\", \"split\": false}";
    static const char always[] = "{\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\","
                                 " \"prepend_scheme\": \"always\", \"split\": false}";
    static const char legacy[] =
        "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": "
        "\"\xE2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
        "\"content\": \"\xE2\x96\x81\"}]}";
    slate_tokenizer *tok = metaspace_json(first, "null");
    expect_ids(tok, "Hi", (const int32_t[]){7}, 1);
    expect_ids(tok, " Hi", (const int32_t[]){7}, 1);
    expect_ids(tok, "<s>Hi", (const int32_t[]){1, 8}, 2);
    expect_ids(tok, "Hi</s> Hi", (const int32_t[]){7, 2, 7}, 3);
    expect_ids(tok, "Hi</s>Hi", (const int32_t[]){7, 2, 8}, 3);
    /* The flags survive the package blob. */
    slate__buf b = {0};
    slate__tok_serialize(tok, &b);
    slate_tokenizer *back = NULL;
    assert_int_equal(slate__tok_deserialize(b.data, b.len, &back, NULL), SLATE_OK);
    expect_ids(back, " Hi", (const int32_t[]){7}, 1);
    expect_ids(back, "<s>Hi", (const int32_t[]){1, 8}, 2);
    slate__buf_free(&b);
    slate_tokenizer_free(back);
    slate_tokenizer_free(tok);

    tok = metaspace_json(always, "null");
    expect_ids(tok, " Hi", (const int32_t[]){7}, 1);
    expect_ids(tok, "<s>Hi", (const int32_t[]){1, 7}, 2);
    slate_tokenizer_free(tok);

    tok = metaspace_json("null", legacy); /* Prepend normalizer: always a mark */
    expect_ids(tok, " Hi", (const int32_t[]){3, 7}, 2);
    expect_ids(tok, "<s>Hi", (const int32_t[]){1, 7}, 2);
    slate_tokenizer_free(tok);
}

/* HF Metaspace with split: true (pre_tokenizers/metaspace.rs, SplitDelimiterBehavior::
 * MergedWithNext; a missing "split" means true): the text is cut before every mark, each piece
 * keeps its mark, and each is merged on its own (models/bpe/model.rs merge_word per piece).
 * "a  b" is "\u2581a\u2581\u2581b": pieces "\u2581a" "\u2581" "\u2581b" = 6 3 7, where split: false
 * merges "\u2581 \u2581" first: 6 8 5. Without a "\u2581" token (nor merges) every mark is an
 * unknown character, and HF ends a piece's unknown token with the piece, so fuse_unk joins none
 * across pieces: "az  b" (z is no token) is "\u2581a" "z", "\u2581", "\u2581b" = 0 4 0 0 0 5, not
 * 0 4 0 5. */
static slate_tokenizer *metaspace_split_json(const char *split, bool with_mark) {
    char json[1400];
    snprintf(json, sizeof json,
             "{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", "
             "\"prepend_scheme\": \"always\"%s}, \"model\": {\"type\": \"BPE\", \"byte_fallback\": "
             "true, \"fuse_unk\": true, \"unk_token\": \"<unk>\", \"vocab\": {\"<unk>\": 0, "
             "\"<s>\": 1, \"</s>\": 2, \"%s\": 3, \"a\": 4, \"b\": 5, \"\xE2\x96\x81" "a\": 6, "
             "\"\xE2\x96\x81" "b\": 7, \"\xE2\x96\x81\xE2\x96\x81\": 8, \"x\": 9}, \"merges\": "
             "%s}}",
             split, with_mark ? "\xE2\x96\x81" : "y",
             with_mark ? "[\"\xE2\x96\x81 \xE2\x96\x81\", \"\xE2\x96\x81 a\", \"\xE2\x96\x81 b\"]"
                       : "[]");
    slate_tokenizer *tok = NULL;
    slate_error err;
    slate_status s = slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err);
    if (s != SLATE_OK) fprintf(stderr, "%s\n", err.message);
    assert_int_equal(s, SLATE_OK);
    return tok;
}

static void metaspace_split_merges_each_marked_piece_alone(void **st) {
    (void)st;
    const char *const splits[] = {"", ", \"split\": true"};
    for (int k = 0; k < 2; k++)
        for (int pass = 0; pass < 2; pass++) {
            slate_tokenizer *tok = metaspace_split_json(splits[k], true);
            if (pass == 1) {
                slate__buf b = {0};
                slate__tok_serialize(tok, &b);
                assert_int_equal(b.data[13] & 0x40, 0x40); /* flag bit 14: split_marks */
                slate_tokenizer_free(tok);
                tok = NULL;
                assert_int_equal(slate__tok_deserialize(b.data, b.len, &tok, NULL), SLATE_OK);
                slate__buf_free(&b);
            }
            expect_ids(tok, "a  b", (const int32_t[]){6, 3, 7}, 3);
            expect_ids(tok, "  a", (const int32_t[]){3, 6}, 2); /* no second mark */
            slate_tokenizer_free(tok);
            tok = metaspace_split_json(splits[k], false);
            expect_ids(tok, "az  b", (const int32_t[]){0, 4, 0, 0, 0, 5}, 6);
            slate_tokenizer_free(tok);
        }
    slate_tokenizer *tok = metaspace_split_json(", \"split\": false", true);
    expect_ids(tok, "a  b", (const int32_t[]){6, 8, 5}, 3);
    slate_tokenizer_free(tok);
    char json[300];
    snprintf(json, sizeof json,
             "{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"split\": 1}, \"model\": {\"type\": "
             "\"BPE\", \"byte_fallback\": true, \"vocab\": {\"x\": 0}, \"merges\": []}}");
    slate_error err;
    assert_int_equal(slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err),
                     SLATE_E_FORMAT);
    assert_non_null(strstr(err.message, "split"));
}

/* An NFC normalizer in a SentencePiece-style tokenizer.json is applied (it was accepted and
 * ignored, so decomposed text got other ids than its composed form). */
static void spm_tokenizer_json_applies_its_nfc_normalizer(void **st) {
    (void)st;
    static const char json[] =
        "{\"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"Metaspace\","
        " \"replacement\": \"\xE2\x96\x81\", \"prepend_scheme\": \"first\", \"split\": false},"
        " \"model\": {\"type\": \"BPE\", \"byte_fallback\": false, \"unk_token\": \"<unk>\","
        " \"vocab\": {\"<unk>\": 0, \"\xE2\x96\x81\": 1, \"\xC3\xA9\": 2, \"\xE2\x96\x81\xC3\xA9\": 3,"
        " \"e\": 4}, \"merges\": [\"\xE2\x96\x81 \xC3\xA9\"]}}";
    slate_tokenizer *tok = NULL;
    slate_error err;
    assert_int_equal(slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err), SLATE_OK);
    expect_ids(tok, "\xC3\xA9", (const int32_t[]){3}, 1);  /* U+00E9 */
    expect_ids(tok, "e\xCC\x81", (const int32_t[]){3}, 1); /* e + U+0301: the same after NFC */
    slate_tokenizer_free(tok);
}

/* HF BPE model.fuse_unk: without byte fallback each character that is no token becomes <unk>;
 * with fuse_unk a run of them becomes one <unk> (HF tokenizers models/bpe/model.rs merge_word:
 * an unknown character extends the pending unk instead of adding another). Ids by hand:
 * "a\u00e9\u00e8a" normalizes to "\u2581a\u00e9\u00e8a"; the characters are \u2581 a \u00e9 \u00e8 a,
 * \u00e9 and \u00e8 are not in the vocabulary, "\u2581 a" merges to \u2581a = 3: fused 3 0 2, not
 * fused 3 0 0 2. A known character ends a run: "\u00e9a\u00e8" gives 1 0 2 0 either way. The flag
 * survives the package blob. */
static slate_tokenizer *fuse_unk_json(const char *fuse) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true}],"
             " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\","
             " \"prepend\": \"\xE2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\":"
             " \" \"}, \"content\": \"\xE2\x96\x81\"}]}, \"pre_tokenizer\": null,"
             " \"model\": {\"type\": \"BPE\", \"byte_fallback\": false, %s \"unk_token\": \"<unk>\","
             " \"vocab\": {\"<unk>\": 0, \"\xE2\x96\x81\": 1, \"a\": 2, \"\xE2\x96\x81" "a\": 3},"
             " \"merges\": [\"\xE2\x96\x81 a\"]}}",
             fuse);
    slate_tokenizer *tok = NULL;
    slate_error err;
    slate_status s = slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err);
    if (s != SLATE_OK) fprintf(stderr, "%s\n", err.message);
    assert_int_equal(s, SLATE_OK);
    return tok;
}

static void fuse_unk_gives_one_unk_per_run_of_unknown_characters(void **st) {
    (void)st;
    static const char run[] = "a\xC3\xA9\xC3\xA8" "a", split[] = "\xC3\xA9" "a\xC3\xA8";
    slate_tokenizer *tok = fuse_unk_json("\"fuse_unk\": true,");
    expect_ids(tok, run, (const int32_t[]){3, 0, 2}, 3);
    expect_ids(tok, split, (const int32_t[]){1, 0, 2, 0}, 4);
    slate__buf b = {0};
    slate__tok_serialize(tok, &b);
    slate_tokenizer *back = NULL;
    assert_int_equal(slate__tok_deserialize(b.data, b.len, &back, NULL), SLATE_OK);
    expect_ids(back, run, (const int32_t[]){3, 0, 2}, 3);
    slate__buf_free(&b);
    slate_tokenizer_free(back);
    slate_tokenizer_free(tok);
    static const char *const off[] = {"\"fuse_unk\": false,", ""};
    for (size_t i = 0; i < 2; i++) {
        tok = fuse_unk_json(off[i]);
        expect_ids(tok, run, (const int32_t[]){3, 0, 0, 2}, 4);
        expect_ids(tok, split, (const int32_t[]){1, 0, 2, 0}, 4);
        slate_tokenizer_free(tok);
    }
    slate_error err;
    char json[1024];
    snprintf(json, sizeof json, "{\"pre_tokenizer\": null, \"model\": {\"type\": \"BPE\","
             " \"byte_fallback\": true, \"fuse_unk\": 1, \"vocab\": {\"a\": 0}, \"merges\": []}}");
    assert_int_equal(slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err),
                     SLATE_E_FORMAT);
    assert_non_null(strstr(err.message, "fuse_unk"));
}

/* Byte fallback with a vocabulary that lacks some <0xXX> tokens, as HF tokenizers' BPE does it
 * (models/bpe/model.rs merge_word): a character that is no token takes its byte tokens only when
 * all of them are there, else one <unk> for the whole character, fused with the unknown
 * characters around it by fuse_unk. HF keeps that <unk> pending until a known character or the
 * end of the word, and a byte-fallback character does not end the wait: its byte tokens come
 * out first. Without an unk_token the character is dropped. Vocabulary: <0xC3> <0xA9> <0xE2>
 * <0x82> only, so U+00E9 (C3 A9) has its bytes, U+00E8 (C3 A8) and U+20AC (E2 82 AC) do not. Ids
 * by hand from that code; the text is "\u2581" + input (Prepend, Replace). */
static slate_tokenizer *partial_bytes_json(const char *model_extra) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true}],"
             " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\","
             " \"prepend\": \"\xE2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\":"
             " \" \"}, \"content\": \"\xE2\x96\x81\"}]}, \"pre_tokenizer\": null,"
             " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, %s"
             " \"vocab\": {\"<unk>\": 0, \"\xE2\x96\x81\": 1, \"a\": 2, \"\xE2\x96\x81" "a\": 3,"
             " \"<0xC3>\": 4, \"<0xA9>\": 5, \"<0xE2>\": 6, \"<0x82>\": 7},"
             " \"merges\": [\"\xE2\x96\x81 a\"]}}",
             model_extra);
    slate_tokenizer *tok = NULL;
    slate_error err;
    slate_status s = slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err);
    if (s != SLATE_OK) fprintf(stderr, "%s\n", err.message);
    assert_int_equal(s, SLATE_OK);
    return tok;
}

#define E_ACUTE "\xC3\xA9" /* bytes C3 A9: both byte tokens there */
#define E_GRAVE "\xC3\xA8" /* C3 A8: no <0xA8> */
#define EURO "\xE2\x82\xAC" /* E2 82 AC: no <0xAC> */

static void byte_fallback_with_missing_byte_tokens_gives_one_unk_per_character(void **st) {
    (void)st;
    for (int fuse = 0; fuse < 2; fuse++) {
        slate_tokenizer *tok =
            partial_bytes_json(fuse ? "\"unk_token\": \"<unk>\", \"fuse_unk\": true,"
                                    : "\"unk_token\": \"<unk>\", \"fuse_unk\": false,");
        for (int trip = 0; trip < 2; trip++) {
            slate_tokenizer *t = tok;
            if (trip) {
                slate__buf b = {0};
                slate__tok_serialize(tok, &b);
                t = NULL;
                assert_int_equal(slate__tok_deserialize(b.data, b.len, &t, NULL), SLATE_OK);
                slate__buf_free(&b);
            }
            expect_ids(t, E_ACUTE "a", (const int32_t[]){1, 4, 5, 2}, 4);
            expect_ids(t, E_GRAVE, (const int32_t[]){1, 0}, 2); /* not 1 4 0 */
            expect_ids(t, EURO, (const int32_t[]){1, 0}, 2);    /* not 6 7 0 */
            expect_ids(t, E_GRAVE "a", (const int32_t[]){1, 0, 2}, 3);
            /* The pending <unk> waits over a byte-fallback character. */
            expect_ids(t, E_GRAVE E_ACUTE, (const int32_t[]){1, 4, 5, 0}, 4);
            if (fuse) {
                expect_ids(t, E_GRAVE EURO, (const int32_t[]){1, 0}, 2);
                expect_ids(t, E_GRAVE E_ACUTE EURO "a", (const int32_t[]){1, 4, 5, 0, 2}, 5);
            } else {
                expect_ids(t, E_GRAVE EURO, (const int32_t[]){1, 0, 0}, 3);
                expect_ids(t, E_GRAVE E_ACUTE EURO "a", (const int32_t[]){1, 4, 5, 0, 0, 2}, 6);
            }
            if (trip) slate_tokenizer_free(t);
        }
        slate_tokenizer_free(tok);
    }
    /* No unk_token: the character is dropped whole (no lone <0xC3>). */
    slate_tokenizer *tok = partial_bytes_json("");
    expect_ids(tok, E_GRAVE "a", (const int32_t[]){1, 2}, 2);
    expect_ids(tok, "a" E_GRAVE, (const int32_t[]){3}, 1);
    slate_tokenizer_free(tok);
}

/* spm.c merges word by word only where that cannot change an id (slate__tok_spm_words_apart):
 * every shipped SentencePiece vocabulary qualifies, and on them the word-by-word ids equal the
 * whole-text ids (the old way, forced by clearing the flag on a private copy) for llama.cpp's
 * test texts and random mixes of their pieces with runs of spaces. */
static void words_are_merged_apart_with_the_same_ids(void **st) {
    (void)st;
    static const char *const files[] = {
        "stories260K/tok512.bin", "llama2c-vocab/tokenizer.bin",
        "tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf",
        "tokenizers/gguf-vocab/ggml-vocab-phi-3.gguf"};
    static const char *const bits[] = {"Hello", " ", "  ", "   world", "\n", "\xE2\x96\x81",
                                       "\xF0\x9F\xA6\x99", "\xE1\x80\xA1", " \xC3\xA9t\xC3\xA9",
                                       "\xFF", "1234", "\t", "(", " a"};
    int seen = 0;
    uint64_t seed = tu_seed();
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        slate_tokenizer *tok = tu_tok_load(files[f]);
        if (!tok) continue;
        seen++;
        assert_true(tok->spm_words_apart);
        static int32_t ids[2][4096];
        for (int round = 0; round < 200; round++) {
            char text[1024];
            size_t len = 0;
            while (len < 900) {
                const char *b = bits[tu_rand(&seed) % (sizeof bits / sizeof bits[0])];
                memcpy(text + len, b, strlen(b));
                len += strlen(b);
            }
            size_t n[2];
            for (int v = 0; v < 2; v++) {
                tok->spm_words_apart = v == 1;
                assert_int_equal(slate_tokenizer_encode(tok, text, len, 0, ids[v], 4096, &n[v],
                                                        NULL),
                                 SLATE_OK);
            }
            tok->spm_words_apart = true;
            if (n[0] != n[1] || memcmp(ids[0], ids[1], n[0] * sizeof(int32_t)) != 0)
                fail_msg("%s: word-by-word ids differ on \"%.*s\"", files[f], (int)len, text);
        }
        slate_tokenizer_free(tok);
    }
    if (!seen) skip();
}

/* A token with the mark after another character ("a\u2581") makes merges cross a word start, so
 * the text is merged whole: "a a" is "\u2581a\u2581a", and "a\u2581" (rank 0) goes before
 * "\u2581a" (rank 1): 1 4 2, where words merged apart would give 5 5. */
static void a_mark_inside_a_token_keeps_the_text_whole(void **st) {
    (void)st;
    static const char json[] =
        "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\","
        " \"prepend\": \"\xE2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": {\"String\":"
        " \" \"}, \"content\": \"\xE2\x96\x81\"}]}, \"pre_tokenizer\": null,"
        " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {\"<unk>\": 0,"
        " \"\xE2\x96\x81\": 1, \"a\": 2, \"b\": 3, \"a\xE2\x96\x81\": 4, \"\xE2\x96\x81" "a\": 5},"
        " \"merges\": [\"a \xE2\x96\x81\", \"\xE2\x96\x81 a\"]}}";
    slate_tokenizer *tok = NULL;
    assert_int_equal(slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, NULL), SLATE_OK);
    assert_false(tok->spm_words_apart);
    expect_ids(tok, "a a", (const int32_t[]){1, 4, 2}, 3);
    expect_ids(tok, "a", (const int32_t[]){5}, 1);
    slate_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tok512_encodes_like_llama2c_run_c),
        cmocka_unit_test(llama2c_vocab_has_bos_eos_and_adds_bos),
        cmocka_unit_test(empty_text_gives_no_ids_or_just_bos),
        cmocka_unit_test(invalid_utf8_bytes_fall_back_to_byte_tokens_and_round_trip),
        cmocka_unit_test(whitespace_emoji_and_other_scripts_round_trip),
        cmocka_unit_test(random_bytes_round_trip),
        cmocka_unit_test(short_buffer_reports_the_needed_count),
        cmocka_unit_test(pieces_map_bytes_and_hide_control_tokens),
        cmocka_unit_test(decode_strips_only_the_dummy_prefix_space),
        cmocka_unit_test(special_tokens_match_only_with_parse_special),
        cmocka_unit_test(phi3_user_defined_token_is_always_matched),
        cmocka_unit_test(phi3_chat_markers_strip_the_following_newline),
        cmocka_unit_test(llama2_style_tokenizer_json_encodes_like_tokenizer_bin),
        cmocka_unit_test(metaspace_prefix_follows_hf_prepend_scheme),
        cmocka_unit_test(metaspace_split_merges_each_marked_piece_alone),
        cmocka_unit_test(spm_tokenizer_json_applies_its_nfc_normalizer),
        cmocka_unit_test(fuse_unk_gives_one_unk_per_run_of_unknown_characters),
        cmocka_unit_test(byte_fallback_with_missing_byte_tokens_gives_one_unk_per_character),
        cmocka_unit_test(words_are_merged_apart_with_the_same_ids),
        cmocka_unit_test(a_mark_inside_a_token_keeps_the_text_whole),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
