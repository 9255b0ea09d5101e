/* fuzz_tokenizer.c - libFuzzer target for the tokenizer blob reader (slate__tok_deserialize,
 * the TOKENIZER section of packages). When the bytes are accepted, the tokenizer must behave:
 * a fixed text (with special-token parsing, BOS, invalid UTF-8) is encoded, every id is checked
 * to be in range, decoded, streamed through a detokenizer, and serialized again, which must give
 * back the same bytes. A leak of counted allocations aborts. Corpus: corpus/tokenizer/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"

static const char k_text[] = "Hello, world! <|im_end|> <s> \xF0\x9F\x98\x80 12345 \xFF\xC3 end";

static void exercise(const slate_tokenizer *tok) {
    int32_t ids[256];
    size_t n = 0;
    slate_status s = slate_tokenizer_encode(tok, k_text, sizeof k_text - 1,
                                            SLATE_ENCODE_ADD_BOS | SLATE_ENCODE_PARSE_SPECIAL, ids,
                                            256, &n, NULL);
    if (s != SLATE_OK && s != SLATE_E_BUFFER_TOO_SMALL && s != SLATE_E_NOMEM) abort();
    if (s != SLATE_OK) return;
    int32_t n_vocab = slate_tokenizer_n_vocab(tok);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) abort();
    static char buf[1 << 20];
    size_t len = 0;
    s = slate_tokenizer_decode(tok, ids, n, true, buf, sizeof buf, &len, NULL);
    if (s != SLATE_OK && s != SLATE_E_BUFFER_TOO_SMALL) abort();
    slate_detok *d = NULL;
    if (slate_detok_create(tok, &d, NULL) == SLATE_OK) {
        for (size_t i = 0; i < n; i++) slate_detok_push(d, ids[i], buf, sizeof buf, &len, NULL);
        slate_detok_flush(d, buf, sizeof buf, &len, NULL);
        slate_detok_free(d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    long long live = slate__alloc_live_bytes();
    slate_tokenizer *tok = NULL;
    slate_error err;
    if (slate__tok_deserialize(data, size, &tok, &err) == SLATE_OK) {
        exercise(tok);
        slate__buf b = {0};
        slate__tok_serialize(tok, &b);
        if (!b.failed && (b.len != size || memcmp(b.data, data, size) != 0)) abort();
        slate__buf_free(&b);
        slate_tokenizer_free(tok);
    } else if (tok) {
        abort(); /* *out must be NULL on failure */
    }
    if (slate__alloc_live_bytes() != live) abort();
    return 0;
}
