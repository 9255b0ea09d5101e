/* test_detok.c - streaming detokenizer: a multi-token emoji comes out whole and only once
 * complete, invalid bytes become U+FFFD at once, flush turns a dangling sequence into U+FFFD,
 * the SentencePiece dummy prefix is dropped once, a short buffer consumes nothing, and the
 * streamed text equals decode() for valid text. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"

#define FFFD "\xEF\xBF\xBD"

/* Streams ids through a detokenizer; returns the concatenated output (static buffer); each
 * pushed piece must be valid UTF-8 on its own. */
static const char *stream(const slate_tokenizer *tok, const int32_t *ids, size_t n, size_t *len) {
    static char all[1 << 16];
    size_t pos = 0;
    slate_detok *d = NULL;
    assert_int_equal(slate_detok_create(tok, &d, NULL), SLATE_OK);
    for (size_t i = 0; i < n; i++) {
        char buf[256];
        size_t got = 0;
        assert_int_equal(slate_detok_push(d, ids[i], buf, sizeof buf, &got, NULL), SLATE_OK);
        for (size_t k = 0; k < got;) {
            size_t cl = slate__tok_utf8_len((const uint8_t *)buf + k, got - k);
            assert_true(cl > 0); /* never a split or invalid character */
            k += cl;
        }
        memcpy(all + pos, buf, got);
        pos += got;
    }
    char buf[16];
    size_t got = 0;
    assert_int_equal(slate_detok_flush(d, buf, sizeof buf, &got, NULL), SLATE_OK);
    memcpy(all + pos, buf, got);
    pos += got;
    slate_detok_free(d);
    *len = pos;
    return all;
}

static void multi_token_emoji_comes_out_whole_when_complete(void **st) {
    (void)st;
    const char *vocabs[] = {"stories260K/tok512.bin", "tokenizers/qwen3/tokenizer.json"};
    for (int v = 0; v < 2; v++) {
        slate_tokenizer *tok = tu_tok_load(vocabs[v]);
        if (!tok) continue;
        static const char emoji[] = "\xF0\x9F\xAB\xA8"; /* U+1FAE8: several tokens in both */
        int32_t ids[16];
        size_t n = 0;
        assert_int_equal(slate_tokenizer_encode(tok, emoji, 4, 0, ids, 16, &n, NULL), SLATE_OK);
        assert_true(n >= 2);
        slate_detok *d = NULL;
        assert_int_equal(slate_detok_create(tok, &d, NULL), SLATE_OK);
        char out[64];
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
            char buf[32];
            size_t got = 99;
            assert_int_equal(slate_detok_push(d, ids[i], buf, sizeof buf, &got, NULL), SLATE_OK);
            if (i + 1 < n && got > 0) {
                /* Only the dummy-prefix space of SPM may come before the emoji is complete. */
                assert_true(got == 1 && buf[0] == ' ');
            }
            memcpy(out + total, buf, got);
            total += got;
        }
        size_t got = 99;
        char buf[8];
        assert_int_equal(slate_detok_flush(d, buf, sizeof buf, &got, NULL), SLATE_OK);
        assert_int_equal(got, 0);
        assert_int_equal(total, 4);
        assert_memory_equal(out, emoji, 4);
        slate_detok_free(d);
        slate_tokenizer_free(tok);
    }
}

static void invalid_byte_is_replaced_at_once_and_flush_ends_dangling_sequence(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    slate_detok *d = NULL;
    assert_int_equal(slate_detok_create(tok, &d, NULL), SLATE_OK);
    char buf[32];
    size_t got;
    /* <0xFF> can never start a character: U+FFFD right away. */
    assert_int_equal(slate_detok_push(d, 0xFF + 3, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 3);
    assert_memory_equal(buf, FFFD, 3);
    /* <0xE4><0xBD> is the start of U+4F60: held back. */
    assert_int_equal(slate_detok_push(d, 0xE4 + 3, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 0);
    assert_int_equal(slate_detok_push(d, 0xBD + 3, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 0);
    /* "a" breaks it: one U+FFFD for the broken prefix, then "a". */
    int32_t a = slate__tok_find(tok, "a", 1);
    assert_true(a >= 0);
    assert_int_equal(slate_detok_push(d, a, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 4);
    assert_memory_equal(buf, FFFD "a", 4);
    /* A dangling lead byte at the end: flush gives U+FFFD, then nothing. */
    assert_int_equal(slate_detok_push(d, 0xF0 + 3, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 0);
    assert_int_equal(slate_detok_flush(d, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 3);
    assert_memory_equal(buf, FFFD, 3);
    assert_int_equal(slate_detok_flush(d, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 0);
    slate_detok_free(d);
    slate_tokenizer_free(tok);
}

static void short_buffer_consumes_nothing(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    slate_detok *d = NULL;
    assert_int_equal(slate_detok_create(tok, &d, NULL), SLATE_OK);
    char buf[32];
    size_t got = 0;
    slate_error err;
    /* " Once" at the start: the dummy space goes, "Once" (4 bytes) stays. */
    assert_int_equal(slate_detok_push(d, 403, buf, 2, &got, &err), SLATE_E_BUFFER_TOO_SMALL);
    assert_int_equal(got, 4);
    assert_int_equal(slate_detok_push(d, 403, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 4);
    assert_memory_equal(buf, "Once", 4);
    /* The strip happened once: the next " upon" keeps its space. */
    assert_int_equal(slate_detok_push(d, 407, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 5);
    assert_memory_equal(buf, " upon", 5);
    assert_int_equal(slate_detok_push(d, 512, buf, sizeof buf, &got, &err), SLATE_E_INVALID_ARG);
    assert_int_equal(slate_detok_push(NULL, 3, buf, sizeof buf, &got, &err), SLATE_E_INVALID_ARG);
    slate_detok *none = (slate_detok *)&err;
    assert_int_equal(slate_detok_create(NULL, &none, &err), SLATE_E_INVALID_ARG);
    assert_null(none);
    slate_detok_free(d);
    slate_detok_free(NULL);
    slate_tokenizer_free(tok);
}

/* A completion's text continues its prompt: after slate_detok_continue the first " Once" keeps
 * its space; the call is refused once text has come out. */
static void continue_keeps_the_first_space(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    slate_detok *d = NULL;
    assert_int_equal(slate_detok_create(tok, &d, NULL), SLATE_OK);
    char buf[32];
    size_t got = 0;
    slate_error err;
    assert_int_equal(slate_detok_continue(d, &err), SLATE_OK);
    assert_int_equal(slate_detok_push(d, 1, buf, sizeof buf, &got, NULL), SLATE_OK); /* BOS */
    assert_int_equal(got, 0);
    assert_int_equal(slate_detok_continue(d, &err), SLATE_OK); /* still no text: allowed */
    assert_int_equal(slate_detok_push(d, 403, buf, sizeof buf, &got, NULL), SLATE_OK);
    assert_int_equal(got, 5);
    assert_memory_equal(buf, " Once", 5);
    assert_int_equal(slate_detok_continue(d, &err), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(err.message, "already produced text"));
    assert_int_equal(slate_detok_continue(NULL, &err), SLATE_E_INVALID_ARG);
    slate_detok_free(d);
    slate_tokenizer_free(tok);
}

static void control_tokens_produce_nothing_and_bos_does_not_block_the_strip(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    if (!tok) skip();
    int32_t ids[] = {1, 403, 407, 2};
    size_t len;
    const char *s = stream(tok, ids, 4, &len);
    assert_int_equal(len, 9);
    assert_memory_equal(s, "Once upon", 9);
    slate_tokenizer_free(tok);
}

static void streamed_text_equals_decode_for_valid_text(void **st) {
    (void)st;
    static const char text[] =
        "Hello, world! \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD caf\xC3\xA9 "
        "\xE4\xBD\xA0\xE5\xA5\xBD \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82  \n\t x";
    const char *vocabs[] = {"stories260K/tok512.bin", "llama2c-vocab/tokenizer.bin",
                            "tokenizers/qwen3/tokenizer.json",
                            "tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf"};
    for (int v = 0; v < 4; v++) {
        slate_tokenizer *tok = tu_tok_load(vocabs[v]);
        if (!tok) continue;
        int32_t ids[256];
        size_t n = 0;
        assert_int_equal(slate_tokenizer_encode(tok, text, sizeof text - 1, SLATE_ENCODE_ADD_BOS,
                                                ids, 256, &n, NULL),
                         SLATE_OK);
        size_t len;
        const char *s = stream(tok, ids, n, &len);
        assert_int_equal(len, sizeof text - 1);
        assert_memory_equal(s, text, len);
        slate_tokenizer_free(tok);
    }
}

static void random_ids_always_stream_valid_utf8(void **st) {
    (void)st;
    slate_tokenizer *tok = tu_tok_load("tokenizers/qwen3/tokenizer.json");
    if (!tok) skip();
    uint64_t seed = tu_seed();
    int32_t ids[200];
    for (int iter = 0; iter < 50; iter++) {
        for (int i = 0; i < 200; i++)
            ids[i] = (int32_t)(tu_rand(&seed) % 2 ? tu_rand(&seed) % 256 /* byte-ish tokens */
                                                  : tu_rand(&seed) % 151669);
        size_t len;
        const char *s = stream(tok, ids, 200, &len);
        for (size_t k = 0; k < len;) {
            size_t cl = slate__tok_utf8_len((const uint8_t *)s + k, len - k);
            assert_true(cl > 0);
            k += cl;
        }
    }
    slate_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(multi_token_emoji_comes_out_whole_when_complete),
        cmocka_unit_test(invalid_byte_is_replaced_at_once_and_flush_ends_dangling_sequence),
        cmocka_unit_test(short_buffer_consumes_nothing),
        cmocka_unit_test(continue_keeps_the_first_space),
        cmocka_unit_test(control_tokens_produce_nothing_and_bos_does_not_block_the_strip),
        cmocka_unit_test(streamed_text_equals_decode_for_valid_text),
        cmocka_unit_test(random_ids_always_stream_valid_utf8),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
