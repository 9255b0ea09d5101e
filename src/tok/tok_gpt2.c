/*
 * tok_gpt2.c - OpenAI's original GPT-2 tokenizer files (openai/gpt-2 src/encoder.py):
 * encoder.json maps each token (GPT-2 byte-to-unicode alphabet) to its id; vocab.bpe has a
 * "#version: ..." first line and then one merge "left right" per line, in rank order. The
 * pre-tokenizer is GPT-2's regex; "<|endoftext|>" is a control token and both BOS and EOS, and
 * GPT-2 adds no BOS when encoding.
 */
#include "tok/tok.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#define MAX_FILE_BYTES ((size_t)1 << 28)

slate_status slate__tok_load_gpt2(const char *encoder_json_path, const char *vocab_bpe_path,
                                  slate_tokenizer **out, slate_error *err) {
    if (out) *out = NULL;
    if (!encoder_json_path || !vocab_bpe_path || !out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate__tok_load_gpt2: NULL argument");
    char *json = NULL, *bpe = NULL;
    size_t json_len = 0, bpe_len = 0;
    cJSON *root = NULL;
    const char **tokens = NULL, **merges = NULL;
    uint8_t *types = NULL;
    slate_status st = slate__read_file(encoder_json_path, MAX_FILE_BYTES, &json, &json_len, err);
    if (st != SLATE_OK) return st;
    if ((st = slate__read_file(vocab_bpe_path, MAX_FILE_BYTES, &bpe, &bpe_len, err)) != SLATE_OK)
        goto done;
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(json, json_len, &end, false);
    if (!cJSON_IsObject(root)) {
        size_t at = !root && end >= json ? (size_t)(end - json) : 0;
        st = slate__fail_at(err, SLATE_E_FORMAT, at,
                            "'%s': not a JSON object {token: id} (error near byte %zu)",
                            encoder_json_path, at);
        goto done;
    }
    int n = cJSON_GetArraySize(root);
    if (n < 1 || n > SLATE__TOK_MAX_TOKENS) {
        st = slate__fail(err, SLATE_E_FORMAT, "'%s': %d tokens, expected 1..%d", encoder_json_path,
                         n, SLATE__TOK_MAX_TOKENS);
        goto done;
    }
    tokens = slate__calloc((size_t)n, sizeof *tokens);
    types = slate__malloc((size_t)n);
    if (!tokens || !types) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory for %d tokens", n);
        goto done;
    }
    memset(types, SLATE__TOKT_NORMAL, (size_t)n);
    const cJSON *e;
    int32_t eot = -1;
    cJSON_ArrayForEach(e, root) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(v >= 0 && v < n) || v != floor(v) || tokens[(int32_t)v]) {
            st = slate__fail(err, SLATE_E_FORMAT,
                             "'%s': \"%.64s\" has id %s: ids must be distinct integers in 0..%d",
                             encoder_json_path, e->string,
                             cJSON_IsNumber(e) ? "out of range or "
                                                 "repeated"
                                               : "not a number",
                             n - 1);
            goto done;
        }
        tokens[(int32_t)v] = e->string;
        if (strcmp(e->string, "<|endoftext|>") == 0) {
            eot = (int32_t)v;
            types[eot] = SLATE__TOKT_CONTROL;
        }
    }
    /* vocab.bpe: split into lines in place (the buffer is ours). */
    size_t n_lines = 0;
    for (size_t i = 0; i < bpe_len; i++) n_lines += bpe[i] == '\n';
    merges = slate__malloc((n_lines + 1) * sizeof *merges);
    if (!merges) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory for %zu merges", n_lines + 1);
        goto done;
    }
    int32_t n_merges = 0;
    char *line = bpe;
    bool first = true;
    while (line < bpe + bpe_len) {
        char *nl = memchr(line, '\n', (size_t)(bpe + bpe_len - line));
        char *stop = nl ? nl : bpe + bpe_len;
        if (stop > line && stop[-1] == '\r') stop[-1] = '\0';
        *stop = '\0';
        if (!(first && line[0] == '#') && line[0] != '\0') merges[n_merges++] = line;
        first = false;
        line = stop + 1;
    }
    const char *const *pre;
    int32_t n_pre = slate__tok_pre_regexes("gpt-2", &pre);
    slate__tok_spec spec = {
        .kind = SLATE__TOK_BPE,
        .n_tokens = n,
        .tokens = tokens,
        .types = types,
        .n_merges = n_merges,
        .merges = merges,
        .pre_regexes = pre,
        .n_pre_regexes = n_pre,
        .bos_id = eot,
        .eos_id = eot,
        .unk_id = -1,
        .pad_id = -1,
        .eot_id = -1,
    };
    st = slate__tok_create(&spec, out, err);
done:
    cJSON_Delete(root);
    slate__free(tokens);
    slate__free(types);
    slate__free(merges);
    slate__free(json);
    slate__free(bpe);
    return st;
}
