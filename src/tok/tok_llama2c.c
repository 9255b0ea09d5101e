/*
 * tok_llama2c.c - reader for llama2.c tokenizer files (tokenizer.bin, tok512.bin; written by
 * karpathy/llama2.c tokenizer.py, read by run.c build_tokenizer).
 *
 * Layout, little-endian: int32 max_token_length, then until the end of the file one record per
 * token: float32 score, int32 byte length, the bytes (no terminator). The token count is not
 * stored (run.c takes it from the checkpoint), so the file must end exactly at a record
 * boundary. Every record is checked against max_token_length and the bytes left; a file that
 * does not parse is refused with E_FORMAT naming the token and offset.
 *
 * Conventions of the exporter: id 0 "<unk>", 1 BOS ("\n<s>\n"), 2 EOS ("\n</s>\n"), "<0xXX>"
 * byte tokens (byte b is id b + 3 in practice; we look them up by text), U+2581 stored as a
 * plain space (detected: a vocabulary that contains U+2581 keeps it). Encoding adds the dummy
 * prefix and BOS as run.c does.
 */
#include "tok/tok.h"

#include <math.h>
#include <string.h>

#define MAX_FILE_BYTES ((size_t)1 << 30)

static int byte_token(const uint8_t *s, uint32_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return 0;
    for (int i = 3; i < 5; i++) {
        uint8_t c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'))) return 0;
    }
    return 1;
}

slate_status slate__tok_load_llama2c_mem(const uint8_t *data, size_t len, const char *name,
                                         slate_tokenizer **out, slate_error *err) {
    if (out) *out = NULL;
    if (!out || (!data && len > 0))
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate__tok_load_llama2c_mem: NULL argument");
    if (!name) name = "<memory>";
    slate__rd r = {data, len, 0, false};
    int32_t max_len = slate__rd_i32(&r);
    if (r.failed)
        return slate__fail_at(err, SLATE_E_FORMAT, 0,
                              "'%s': %zu bytes, too short for a llama2.c tokenizer header (4)",
                              name, len);
    if (max_len < 1 || max_len > SLATE__TOK_MAX_TOKEN_BYTES)
        return slate__fail_at(
            err, SLATE_E_FORMAT, 0,
            "'%s': max_token_length %d: expected 1..%d (not a llama2.c tokenizer?)", name,
            (int)max_len, SLATE__TOK_MAX_TOKEN_BYTES);
    /* First pass: count and validate the records. */
    int32_t n = 0;
    bool plain_space = true;
    while (r.pos < len) {
        size_t at = r.pos;
        if (n >= SLATE__TOK_MAX_TOKENS)
            return slate__fail_at(err, SLATE_E_FORMAT, at, "'%s': more than %d tokens", name,
                                  SLATE__TOK_MAX_TOKENS);
        float score = slate__rd_f32(&r);
        int32_t tl = slate__rd_i32(&r);
        if (r.failed)
            return slate__fail_at(err, SLATE_E_FORMAT, at,
                                  "'%s': token %d: record header needs 8 bytes at offset %zu, file "
                                  "ends at %zu (truncated?)",
                                  name, (int)n, at, len);
        if (isnan(score))
            return slate__fail_at(err, SLATE_E_FORMAT, at, "'%s': token %d has a NaN score", name,
                                  (int)n);
        if (tl < 0 || tl > max_len)
            return slate__fail_at(err, SLATE_E_FORMAT, at + 4,
                                  "'%s': token %d has length %d: expected 0..%d (max_token_length)",
                                  name, (int)n, (int)tl, (int)max_len);
        const uint8_t *b = slate__rd_bytes(&r, (size_t)tl);
        if (!b)
            return slate__fail_at(err, SLATE_E_FORMAT, at + 8,
                                  "'%s': token %d needs %d bytes at offset %zu, file ends at %zu "
                                  "(truncated?)",
                                  name, (int)n, (int)tl, at + 8, len);
        for (int32_t i = 0; i + 3 <= tl; i++)
            if (memcmp(b + i, "\xE2\x96\x81", 3) == 0) plain_space = false;
        n++;
    }
    if (n < 3)
        return slate__fail_at(err, SLATE_E_FORMAT, len,
                              "'%s': %d tokens: a llama2.c vocabulary has at least <unk>, BOS, EOS",
                              name, (int)n);
    const char **tokens = slate__malloc((size_t)n * sizeof *tokens);
    uint32_t *lens = slate__malloc((size_t)n * sizeof *lens);
    float *scores = slate__malloc((size_t)n * sizeof *scores);
    uint8_t *types = slate__malloc((size_t)n);
    slate_status st;
    if (!tokens || !lens || !scores || !types) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory reading %d tokens of '%s'", (int)n,
                         name);
        goto done;
    }
    r.pos = 4;
    for (int32_t i = 0; i < n; i++) {
        scores[i] = slate__rd_f32(&r);
        lens[i] = (uint32_t)slate__rd_i32(&r);
        tokens[i] = (const char *)slate__rd_bytes(&r, lens[i]);
        if (i == 0)
            types[i] = SLATE__TOKT_UNKNOWN;
        else if (i <= 2)
            types[i] = SLATE__TOKT_CONTROL;
        else if (byte_token((const uint8_t *)tokens[i], lens[i]))
            types[i] = SLATE__TOKT_BYTE;
        else
            types[i] = SLATE__TOKT_NORMAL;
    }
    slate__tok_spec spec = {
        .kind = SLATE__TOK_SPM,
        .n_tokens = n,
        .tokens = tokens,
        .token_lens = lens,
        .scores = scores,
        .types = types,
        .bos_id = 1,
        .eos_id = 2,
        .unk_id = 0,
        .pad_id = -1,
        .eot_id = -1,
        .add_bos = true,
        .add_space_prefix = true,
        .byte_fallback = true,
        .space_is_plain = plain_space,
    };
    st = slate__tok_create(&spec, out, err);
done:
    slate__free(tokens);
    slate__free(lens);
    slate__free(scores);
    slate__free(types);
    return st;
}

slate_status slate__tok_load_llama2c(const char *path, slate_tokenizer **out, slate_error *err) {
    if (out) *out = NULL;
    if (!path || !out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate__tok_load_llama2c: %s is NULL",
                           !path ? "path" : "out");
    char *data = NULL;
    size_t len = 0;
    slate_status st = slate__read_file(path, MAX_FILE_BYTES, &data, &len, err);
    if (st != SLATE_OK) return st;
    st = slate__tok_load_llama2c_mem((const uint8_t *)data, len, path, out, err);
    slate__free(data);
    return st;
}
