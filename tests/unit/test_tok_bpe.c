/* test_tok_bpe.c - byte-level BPE: special tokens and BOS of Qwen3 / Llama 3 tokenizer.json,
 * NFC, digit splitting per pre-tokenizer, invalid UTF-8 and random bytes round trips, long
 * inputs, the GPT-2 byte alphabet. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"

#include <uninorm.h>

static void assert_round_trip(const slate_tokenizer *tok, const char *text, size_t len) {
    size_t cap = len + 8;
    int32_t *ids = malloc(cap * sizeof *ids);
    size_t n = tu_encode(tok, text, len, SLATE_ENCODE_ADD_BOS, ids, cap);
    char *back = malloc(len + 16);
    size_t blen = 0;
    assert_int_equal(slate_tokenizer_decode(tok, ids, n, false, back, len + 16, &blen, NULL),
                     SLATE_OK);
    if (blen != len || memcmp(back, text, len) != 0)
        fprintf(stderr, "round trip failed: \"%.*s\" -> \"%.*s\"\n", (int)len, text, (int)blen,
                back);
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    free(ids);
    free(back);
}

/* Whether every byte of text has a token (Falcon's vocabulary lacks 28 byte values, e.g. 0xFF:
 * those bytes are dropped, as llama.cpp does, so they cannot round-trip). */
static bool spells(const slate_tokenizer *tok, const char *text, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (tok->byte_id[(uint8_t)text[i]] < 0) return false;
    return true;
}

static const char *const k_bpe_vocabs[] = {
    "tokenizers/qwen3/tokenizer.json", "tokenizers/llama3/tokenizer.json",
    "tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf", "tokenizers/gguf-vocab/ggml-vocab-falcon.gguf"};

static void gpt2_byte_alphabet_is_a_bijection(void **st) {
    (void)st;
    bool seen[324] = {false};
    for (int b = 0; b < 256; b++) {
        uint32_t cp = slate__tok_gpt2_byte_to_cp((uint8_t)b);
        assert_true(cp < 324);
        assert_false(seen[cp]);
        seen[cp] = true;
        assert_int_equal(slate__tok_gpt2_cp_to_byte(cp), b);
    }
    assert_int_equal(slate__tok_gpt2_byte_to_cp(' '), 0x120);  /* 'Ġ' */
    assert_int_equal(slate__tok_gpt2_byte_to_cp('\n'), 0x10A); /* 'Ċ' */
    assert_int_equal(slate__tok_gpt2_cp_to_byte(0x144), -1);
}

static void qwen3_has_no_bos_and_ends_turns_with_im_end(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("tokenizers/qwen3/tokenizer.json");
    if (!tok) skip();
    assert_int_equal(slate__tok_kind_of(tok), SLATE__TOK_BPE);
    assert_int_equal(slate_tokenizer_n_vocab(tok), 151669);
    assert_int_equal(slate_tokenizer_bos(tok), -1);
    assert_int_equal(slate_tokenizer_eos(tok), 151645); /* <|im_end|> from tokenizer_config */
    assert_true(slate_tokenizer_is_eog(tok, 151645));
    assert_true(slate_tokenizer_is_eog(tok, 151643));  /* <|endoftext|> */
    assert_false(slate_tokenizer_is_eog(tok, 151644)); /* <|im_start|> */
    int32_t ids[8];
    assert_int_equal(tu_encode(tok, "", 0, SLATE_ENCODE_ADD_BOS, ids, 8), 0);
    assert_int_equal(tu_encode(tok, "Hi", 2, SLATE_ENCODE_ADD_BOS, ids, 8), 1);
    assert_int_equal(slate__tok_find(tok, "<|im_start|>", 12), 151644);
    slate_tokenizer_free(tok);
}

static void qwen3_chat_markup_needs_parse_special_but_think_tags_do_not(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("tokenizers/qwen3/tokenizer.json");
    if (!tok) skip();
    static const char chat[] = "<|im_start|>user\nHi<|im_end|>\n<think>\n";
    int32_t ids[64];
    size_t n = tu_encode(tok, chat, sizeof chat - 1, SLATE_ENCODE_PARSE_SPECIAL, ids, 64);
    assert_int_equal(ids[0], 151644);
    bool saw_end = false, saw_think = false;
    for (size_t i = 0; i < n; i++) {
        saw_end |= ids[i] == 151645;
        saw_think |= ids[i] == 151667;
    }
    assert_true(saw_end && saw_think);
    /* Without the flag the control markup is plain text; <think> (special: false in
     * tokenizer.json, so USER_DEFINED) is still one token, as in HF tokenizers. */
    n = tu_encode(tok, chat, sizeof chat - 1, 0, ids, 64);
    saw_end = saw_think = false;
    for (size_t i = 0; i < n; i++) {
        assert_true(ids[i] != 151644);
        saw_end |= ids[i] == 151645;
        saw_think |= ids[i] == 151667;
    }
    assert_false(saw_end);
    assert_true(saw_think);
    /* Pieces: control text only when asked. */
    char buf[32];
    size_t len;
    assert_int_equal(slate_tokenizer_piece(tok, 151645, false, buf, sizeof buf, &len, NULL),
                     SLATE_OK);
    assert_int_equal(len, 0);
    assert_int_equal(slate_tokenizer_piece(tok, 151645, true, buf, sizeof buf, &len, NULL),
                     SLATE_OK);
    assert_int_equal(len, 10);
    assert_memory_equal(buf, "<|im_end|>", 10);
    slate_tokenizer_free(tok);
}

static void llama3_adds_begin_of_text_and_knows_eot(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("tokenizers/llama3/tokenizer.json");
    if (!tok) skip();
    assert_int_equal(slate_tokenizer_bos(tok), 128000);
    assert_int_equal(slate_tokenizer_eos(tok), 128001);
    assert_true(slate_tokenizer_is_eog(tok, 128009)); /* <|eot_id|> */
    int32_t ids[8];
    assert_int_equal(tu_encode(tok, "Hello", 5, SLATE_ENCODE_ADD_BOS, ids, 8), 2);
    assert_int_equal(ids[0], 128000);
    assert_int_equal(ids[1], 9906);
    slate_tokenizer_free(tok);
}

static size_t digit_groups(const slate_tokenizer *tok, const char *digits) {
    int32_t ids[64];
    return tu_encode(tok, digits, strlen(digits), 0, ids, 64);
}

static void digits_split_per_pre_tokenizer(void **st) {
    (void)st;
    slate_tokenizer *qwen = tu_tok_load("tokenizers/qwen3/tokenizer.json");
    slate_tokenizer *llama = tu_tok_load("tokenizers/llama3/tokenizer.json");
    if (!qwen || !llama) {
        slate_tokenizer_free(qwen);
        slate_tokenizer_free(llama);
        skip();
    }
    assert_int_equal(digit_groups(qwen, "1234567"), 7);  /* \p{N}: one digit each */
    assert_int_equal(digit_groups(llama, "1234567"), 3); /* \p{N}{1,3}: 123 456 7 */
    int32_t a[8], b[8];
    size_t na = tu_encode(llama, "1234567", 7, 0, a, 8);
    size_t nb = tu_encode(llama, "123", 3, 0, b, 8);
    nb += tu_encode(llama, "456", 3, 0, b + nb, 8 - nb);
    nb += tu_encode(llama, "7", 1, 0, b + nb, 8 - nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    slate_tokenizer_free(qwen);
    slate_tokenizer_free(llama);
}

static void qwen3_normalizes_to_nfc(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("tokenizers/qwen3/tokenizer.json");
    if (!tok) skip();
    int32_t a[16], b[16];
    size_t na = tu_encode(tok, "caf\xC3\xA9", 5, 0, a, 16);  /* precomposed U+00E9 */
    size_t nb = tu_encode(tok, "cafe\xCC\x81", 6, 0, b, 16); /* e + U+0301 */
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    /* Invalid bytes inside the text keep NFC from failing and survive as themselves. */
    assert_round_trip(tok, "\xC3\xA9\xFF\xC3\xA9", 5);
    slate_tokenizer_free(tok);
}

static void texts_and_invalid_utf8_round_trip_on_every_bpe_vocab(void **st) {
    (void)st;
    static const char *const texts[] = {
        " ",
        "   ",
        "\t\n\r\n",
        "  leading and trailing  ",
        "\n\n\n\n",
        "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
        "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96",
        "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
        "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",
        "I'm can't WE'LL it's",
        "x = a->b[3] * 2.5e-3; // ok?!",
        "\xFF\xFE\x80\xC3",
        "a\xC3(b",
        "\xED\xA0\x80 surrogate \xF4\x90\x80\x80 too big",
        "<|im_end|>",
        "<|endoftext|>",
    };
    for (size_t v = 0; v < sizeof k_bpe_vocabs / sizeof k_bpe_vocabs[0]; v++) {
        slate_tokenizer *tok = tu_tok_load(k_bpe_vocabs[v]);
        if (!tok) continue;
        int n_checked = 0;
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            if (!spells(tok, texts[i], strlen(texts[i]))) continue;
            assert_round_trip(tok, texts[i], strlen(texts[i]));
            n_checked++;
        }
        assert_true(n_checked >= 12);
        slate_tokenizer_free(tok);
    }
}

static void random_bytes_round_trip(void **st) {
    (void)st;
    uint64_t seed = tu_seed();
    char text[200];
    for (size_t v = 0; v < sizeof k_bpe_vocabs / sizeof k_bpe_vocabs[0]; v++) {
        slate_tokenizer *tok = tu_tok_load(k_bpe_vocabs[v]);
        if (!tok) continue;
        for (int iter = 0; iter < 200; iter++) {
            size_t len = tu_rand(&seed) % sizeof text;
            for (size_t i = 0; i < len; i++) {
                uint64_t r = tu_rand(&seed);
                do {
                    text[i] = (char)(r % 3 == 0   ? ' '
                                     : r % 3 == 1 ? 'a' + (int)(r >> 8) % 26
                                                  : (int)(r >> 16));
                    r = tu_rand(&seed);
                } while (!spells(tok, text + i, 1));
            }
            if (tok->nfc) {
                /* NFC vocabularies (Qwen) normalize their input, so random bytes round-trip
                 * to their NFC form, not to themselves (e.g. U+0340 becomes U+0300). */
                size_t nlen = 0;
                uint8_t *nfc = u8_normalize(UNINORM_NFC, (const uint8_t *)text, len, NULL, &nlen);
                assert_non_null(nfc);
                if (nlen != len || memcmp(nfc, text, len) != 0) {
                    free(nfc);
                    continue;
                }
                free(nfc);
            }
            assert_round_trip(tok, text, len);
        }
        slate_tokenizer_free(tok);
    }
}

static void long_inputs_encode_and_round_trip(void **st) {
    (void)st;
    size_t len = 200000;
    char *text = malloc(len);
    static const char word[] = "lorem ipsum  dolor\tsit\n";
    for (size_t i = 0; i < len; i++) text[i] = word[i % (sizeof word - 1)];
    char *spaces = malloc(len);
    memset(spaces, ' ', len);
    for (size_t v = 0; v < sizeof k_bpe_vocabs / sizeof k_bpe_vocabs[0]; v++) {
        slate_tokenizer *tok = tu_tok_load(k_bpe_vocabs[v]);
        if (!tok) continue;
        assert_round_trip(tok, text, len);
        assert_round_trip(tok, spaces, len); /* one huge whitespace piece */
        slate_tokenizer_free(tok);
    }
    slate_tokenizer *spm = tu_tok_load("llama2c-vocab/tokenizer.bin");
    if (spm) {
        int32_t *ids = malloc((len + 8) * sizeof *ids);
        size_t n = tu_encode(spm, spaces, len, 0, ids, len + 8);
        assert_true(n > 0 && n < len);
        free(ids);
        slate_tokenizer_free(spm);
    }
    free(text);
    free(spaces);
}

static void encode_refuses_bad_arguments(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf");
    if (!tok) skip();
    int32_t ids[4];
    size_t n = 0;
    slate_error err;
    assert_int_equal(slate_tokenizer_encode(NULL, "a", 1, 0, ids, 4, &n, &err),
                     SLATE_E_INVALID_ARG);
    assert_int_equal(slate_tokenizer_encode(tok, NULL, 1, 0, ids, 4, &n, &err),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(err.message, "text"));
    assert_int_equal(slate_tokenizer_encode(tok, "a", 1, 0, NULL, 4, &n, &err),
                     SLATE_E_INVALID_ARG);
    assert_int_equal(slate_tokenizer_encode(tok, "a", 1, 0, ids, 4, NULL, &err),
                     SLATE_E_INVALID_ARG);
    assert_int_equal(slate_tokenizer_encode(tok, "a", 1, 0x80, ids, 4, &n, &err),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(err.message, "0x80"));
    /* cap 0 with ids NULL: a size query. */
    assert_int_equal(slate_tokenizer_encode(tok, "hello world", 11, 0, NULL, 0, &n, &err),
                     SLATE_E_BUFFER_TOO_SMALL);
    assert_int_equal(n, 2);
    assert_int_equal(slate_tokenizer_n_vocab(NULL), 0);
    assert_int_equal(slate_tokenizer_bos(NULL), -1);
    assert_false(slate_tokenizer_is_eog(NULL, 0));
    slate_tokenizer_free(NULL);
    slate_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_byte_alphabet_is_a_bijection),
        cmocka_unit_test(qwen3_has_no_bos_and_ends_turns_with_im_end),
        cmocka_unit_test(qwen3_chat_markup_needs_parse_special_but_think_tags_do_not),
        cmocka_unit_test(llama3_adds_begin_of_text_and_knows_eot),
        cmocka_unit_test(digits_split_per_pre_tokenizer),
        cmocka_unit_test(qwen3_normalizes_to_nfc),
        cmocka_unit_test(texts_and_invalid_utf8_round_trip_on_every_bpe_vocab),
        cmocka_unit_test(random_bytes_round_trip),
        cmocka_unit_test(long_inputs_encode_and_round_trip),
        cmocka_unit_test(encode_refuses_bad_arguments),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
