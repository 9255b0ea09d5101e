/* fuzz_tokenizer_json.c - libFuzzer target for the Hugging Face tokenizer.json reader
 * (slate__tok_load_hf_mem). The input is split at the first NUL byte: what comes before is
 * tokenizer.json, what comes after (if anything) is tokenizer_config.json. Accepted tokenizers
 * encode and decode a fixed text, every id must be in range, and a leak of counted allocations
 * aborts. Corpus: corpus/tokenizer_json/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"

static const char k_text[] = "Hi <|endoftext|> there, \xE4\xBD\xA0\xE5\xA5\xBD 42 \xFF!";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    long long live = slate__alloc_live_bytes();
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    const char *cfg = nul ? (const char *)nul + 1 : NULL;
    size_t cfg_len = nul ? size - json_len - 1 : 0;
    slate_tokenizer *tok = NULL;
    slate_error err;
    if (slate__tok_load_hf_mem((const char *)data, json_len, cfg, cfg_len, &tok, &err) ==
        SLATE_OK) {
        int32_t ids[128];
        size_t n = 0;
        slate_status s = slate_tokenizer_encode(tok, k_text, sizeof k_text - 1,
                                                SLATE_ENCODE_ADD_BOS | SLATE_ENCODE_PARSE_SPECIAL,
                                                ids, 128, &n, NULL);
        if (s == SLATE_OK) {
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= slate_tokenizer_n_vocab(tok)) abort();
            static char buf[1 << 16];
            size_t len = 0;
            s = slate_tokenizer_decode(tok, ids, n, false, buf, sizeof buf, &len, NULL);
            if (s != SLATE_OK && s != SLATE_E_BUFFER_TOO_SMALL) abort();
        } else if (s != SLATE_E_BUFFER_TOO_SMALL && s != SLATE_E_NOMEM) {
            abort();
        }
        slate_tokenizer_free(tok);
    } else if (tok) {
        abort();
    }
    if (slate__alloc_live_bytes() != live) abort();
    return 0;
}
