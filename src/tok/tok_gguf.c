/*
 * tok_gguf.c - tokenizer from a GGUF file's tokenizer.ggml.* metadata (llama.cpp
 * src/llama-vocab.cpp, llama_vocab::impl::load; keys in ggml docs/gguf.md).
 *
 * tokenizer.ggml.model "llama" -> SPM (scores; byte fallback when <0xXX> BYTE tokens exist;
 * add_space_prefix from the key, default true), "gpt2" -> byte-level BPE (merges "a b";
 * pre-tokenizer regexes chosen by tokenizer.ggml.pre). Other models (bert, t5, rwkv, ...) are
 * E_UNSUPPORTED, naming the model.
 *
 * tokenizer.ggml.pre for gpt2 models: "gpt-2", "llama-bpe" (Llama 3; also turns on
 * ignore_merges, as llama.cpp does), "qwen2", "falcon". The key missing or "default" means
 * GPT-2: GGUF files written before the key existed are GPT-2-style, and llama.cpp's own
 * "default" BPE regex set is a legacy mix we have no vectors for, so the documented GPT-2 regex
 * is the predictable choice. Any other name is refused with E_UNSUPPORTED naming it: a wrong
 * split would silently give the model token ids it was never trained on.
 *
 * add_bos: tokenizer.ggml.add_bos_token when present; else true for SPM and for "llama-bpe",
 * false otherwise (llama.cpp's defaults).
 *
 * Added-token strip flags are not stored in GGUF. Phi-3's tokenizer.json marks its chat tokens
 * (<|user|>, <|assistant|>, <|end|>, <|system|>, ...) and "</s>" rstrip, so HF drops the "\n"
 * after them; llama.cpp reproduces that by name (llama-vocab.cpp, load: general.name, lowercased,
 * containing "phi-3" or "phi3" -> RSTRIP on every CONTROL / USER_DEFINED / UNKNOWN token and on
 * "</s>", but not on "<unk>", "<s>", "<|endoftext|>"). We apply the same rule to SPM
 * vocabularies whose general.name says so or whose general.architecture is "phi3": the
 * architecture catches Phi-3 files named otherwise (e.g. "Phi 3.5 Mini"), and limiting it to
 * SPM keeps byte-level phi3-architecture vocabularies (Phi-4-mini) as they are. Only added
 * tokens can carry the flag here ("</s>" is USER_DEFINED in Phi-3 GGUFs).
 */
#include "tok/tok.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#include "convert/gguf.h"

/* Whether the GGUF is a Phi-3 model by llama.cpp's name rule or by its architecture. */
static bool is_phi3(const slate__gguf *g) {
    const char *s;
    uint64_t len;
    if (slate__gguf_get_str(g, "general.architecture", &s, &len) && len == 4 &&
        memcmp(s, "phi3", 4) == 0)
        return true;
    if (!slate__gguf_get_str(g, "general.name", &s, &len)) return false;
    for (uint64_t i = 0; i + 4 <= len; i++) {
        char c[5];
        for (int k = 0; k < 5; k++)
            c[k] = i + (uint64_t)k < len ? (char)tolower((unsigned char)s[i + (uint64_t)k]) : '\0';
        if (memcmp(c, "phi3", 4) == 0 || memcmp(c, "phi-3", 5) == 0) return true;
    }
    return false;
}

/* llama.cpp's Phi-3 RSTRIP rule (see the file comment) over types[n] / tokens[n]. */
static void phi3_rstrip(int32_t n, const char *const *tokens, const uint32_t *lens,
                        const uint8_t *types, uint8_t *attrs) {
    static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (int32_t i = 0; i < n; i++) {
        if (types[i] != SLATE__TOKT_CONTROL && types[i] != SLATE__TOKT_USER_DEFINED &&
            types[i] != SLATE__TOKT_UNKNOWN)
            continue;
        attrs[i] = SLATE__TOK_ATTR_RSTRIP;
        for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++)
            if (lens[i] == strlen(keep[k]) && memcmp(tokens[i], keep[k], lens[i]) == 0)
                attrs[i] = 0;
    }
}

/* A special token id: absent, -1, or u32 0xFFFFFFFF (how llama.cpp writes "none") mean none. */
static int32_t get_id(const slate__gguf *g, const char *key, int32_t n_tokens, const char **bad) {
    if (slate__gguf_find_key(g, key) < 0) return -1;
    uint32_t u;
    int32_t v;
    if (slate__gguf_get_u32(g, key, &u)) {
        if (u == UINT32_MAX) return -1;
        if (u < (uint32_t)n_tokens) return (int32_t)u;
    } else if (slate__gguf_get_i32(g, key, &v) && v == -1) {
        return -1;
    }
    *bad = key;
    return -1;
}

slate_status slate__tok_from_gguf(const slate__gguf *g, slate_tokenizer **out, slate_error *err) {
    if (out) *out = NULL;
    if (!g || !out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate__tok_from_gguf: %s is NULL",
                           !g ? "g" : "out");
    const char *model;
    uint64_t model_len;
    if (!slate__gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len))
        return slate__fail(err, SLATE_E_FORMAT,
                           "GGUF has no string tokenizer.ggml.model (no vocabulary in this file?)");
    slate__tok_kind kind;
    if (model_len == 5 && memcmp(model, "llama", 5) == 0) {
        kind = SLATE__TOK_SPM;
    } else if (model_len == 4 && memcmp(model, "gpt2", 4) == 0) {
        kind = SLATE__TOK_BPE;
    } else {
        return slate__fail(err, SLATE_E_UNSUPPORTED,
                           "GGUF tokenizer.ggml.model '%.*s': only 'llama' (SentencePiece) and "
                           "'gpt2' (byte-level BPE) are supported",
                           (int)(model_len < 64 ? model_len : 64), model);
    }

    slate__gguf_vtype et;
    uint64_t n64;
    if (!slate__gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n64) || et != SLATE__GGUF_STRING)
        return slate__fail(err, SLATE_E_FORMAT,
                           "GGUF tokenizer.ggml.tokens is missing or not an "
                           "array of strings");
    if (n64 < 1 || n64 > SLATE__TOK_MAX_TOKENS)
        return slate__fail(err, SLATE_E_FORMAT,
                           "GGUF tokenizer.ggml.tokens has %llu entries: "
                           "expected 1..%d",
                           (unsigned long long)n64, SLATE__TOK_MAX_TOKENS);
    int32_t n = (int32_t)n64;
    uint64_t n_scores = 0, n_types = 0, n_merges = 0;
    bool has_scores = slate__gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n_scores);
    if (has_scores && (n_scores != n64 || (et != SLATE__GGUF_F32 && et != SLATE__GGUF_F64)))
        return slate__fail(err, SLATE_E_FORMAT,
                           "GGUF tokenizer.ggml.scores: %llu values of type %d, expected %d floats",
                           (unsigned long long)n_scores, (int)et, (int)n);
    bool has_types = slate__gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n_types);
    if (has_types && (n_types != n64 || et == SLATE__GGUF_STRING || et == SLATE__GGUF_ARRAY))
        return slate__fail(err, SLATE_E_FORMAT,
                           "GGUF tokenizer.ggml.token_type: %llu values of type %d, expected %d "
                           "integers",
                           (unsigned long long)n_types, (int)et, (int)n);
    bool has_merges =
        kind == SLATE__TOK_BPE && slate__gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n_merges);
    if (has_merges && (et != SLATE__GGUF_STRING || n_merges > SLATE__TOK_MAX_MERGES))
        return slate__fail(
            err, SLATE_E_FORMAT,
            "GGUF tokenizer.ggml.merges: %llu values of type %d, expected at most %d "
            "strings",
            (unsigned long long)n_merges, (int)et, SLATE__TOK_MAX_MERGES);

    slate__tok_spec spec = {.kind = kind, .n_tokens = n};
    const char *bad = NULL;
    spec.bos_id = get_id(g, "tokenizer.ggml.bos_token_id", n, &bad);
    spec.eos_id = get_id(g, "tokenizer.ggml.eos_token_id", n, &bad);
    spec.unk_id = get_id(g, "tokenizer.ggml.unknown_token_id", n, &bad);
    spec.pad_id = get_id(g, "tokenizer.ggml.padding_token_id", n, &bad);
    spec.eot_id = get_id(g, "tokenizer.ggml.eot_token_id", n, &bad);
    if (bad)
        return slate__fail(err, SLATE_E_FORMAT, "GGUF %s is not a token id (-1..%d)", bad,
                           (int)n - 1);

    const char *pre = NULL;
    uint64_t pre_len = 0;
    bool llama3 = false;
    if (kind == SLATE__TOK_BPE) {
        char name[64] = "gpt-2";
        if (slate__gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len)) {
            if (pre_len >= sizeof name)
                return slate__fail(
                    err, SLATE_E_UNSUPPORTED,
                    "GGUF tokenizer.ggml.pre '%.40s...' is not a known pre-tokenizer", pre);
            memcpy(name, pre, pre_len);
            name[pre_len] = '\0';
            if (strcmp(name, "default") == 0) strcpy(name, "gpt-2");
        }
        spec.n_pre_regexes = slate__tok_pre_regexes(name, &spec.pre_regexes);
        if (spec.n_pre_regexes == 0)
            return slate__fail(err, SLATE_E_UNSUPPORTED,
                               "GGUF tokenizer.ggml.pre '%s': unknown pre-tokenizer (known: gpt-2, "
                               "llama-bpe, qwen2, falcon)",
                               name);
        llama3 = strcmp(name, "llama-bpe") == 0 || strcmp(name, "llama3") == 0;
        spec.ignore_merges = llama3;
    }

    const char **tokens = slate__calloc((size_t)n, sizeof *tokens);
    uint32_t *lens = slate__calloc((size_t)n, sizeof *lens);
    float *scores = slate__calloc((size_t)n, sizeof *scores);
    uint8_t *types = slate__malloc((size_t)n);
    uint8_t *attrs = NULL;
    const char **merges = NULL;
    char *merge_pool = NULL;
    slate_status st = SLATE_OK;
    if (!tokens || !lens || !scores || !types) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory reading %d GGUF tokens", (int)n);
        goto done;
    }
    bool any_byte = false;
    for (int32_t i = 0; i < n; i++) {
        const char *s;
        uint64_t len;
        if (!slate__gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &s, &len) ||
            len > SLATE__TOK_MAX_TOKEN_BYTES) {
            st = slate__fail(err, SLATE_E_FORMAT, "GGUF token %d: missing or longer than %d bytes",
                             (int)i, SLATE__TOK_MAX_TOKEN_BYTES);
            goto done;
        }
        tokens[i] = s;
        lens[i] = (uint32_t)len;
        double v = 0;
        if (has_scores) {
            if (!slate__gguf_arr_num(g, "tokenizer.ggml.scores", (uint64_t)i, &v) || isnan(v)) {
                st = slate__fail(err, SLATE_E_FORMAT, "GGUF token %d: score is not a number",
                                 (int)i);
                goto done;
            }
            scores[i] = (float)v;
        }
        types[i] = SLATE__TOKT_NORMAL;
        if (has_types) {
            if (!slate__gguf_arr_num(g, "tokenizer.ggml.token_type", (uint64_t)i, &v) ||
                !(v >= SLATE__TOKT_NORMAL && v <= SLATE__TOKT_BYTE) || v != floor(v)) {
                st = slate__fail(err, SLATE_E_FORMAT,
                                 "GGUF token %d ('%.*s'): token_type %g, expected 1..6", (int)i,
                                 (int)(len < 40 ? len : 40), s, v);
                goto done;
            }
            types[i] = (uint8_t)v;
        }
        if (types[i] == SLATE__TOKT_BYTE) any_byte = true;
    }
    if (has_merges && n_merges > 0) {
        size_t total = 0;
        for (uint64_t i = 0; i < n_merges; i++) {
            const char *s;
            uint64_t len;
            if (!slate__gguf_arr_str(g, "tokenizer.ggml.merges", i, &s, &len) ||
                len > 2 * SLATE__TOK_MAX_TOKEN_BYTES + 1) {
                st = slate__fail(err, SLATE_E_FORMAT, "GGUF merge %llu is missing or too long",
                                 (unsigned long long)i);
                goto done;
            }
            total += len + 1;
        }
        merges = slate__malloc(n_merges * sizeof *merges);
        merge_pool = slate__malloc(total);
        if (!merges || !merge_pool) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory for %llu GGUF merges",
                             (unsigned long long)n_merges);
            goto done;
        }
        size_t off = 0;
        for (uint64_t i = 0; i < n_merges; i++) {
            const char *s;
            uint64_t len;
            slate__gguf_arr_str(g, "tokenizer.ggml.merges", i, &s, &len);
            if (memchr(s, '\0', len)) {
                st = slate__fail(err, SLATE_E_FORMAT, "GGUF merge %llu contains a NUL byte",
                                 (unsigned long long)i);
                goto done;
            }
            memcpy(merge_pool + off, s, len);
            merge_pool[off + len] = '\0';
            merges[i] = merge_pool + off;
            off += len + 1;
        }
        spec.n_merges = (int32_t)n_merges;
        spec.merges = merges;
    }
    spec.tokens = tokens;
    spec.token_lens = lens;
    spec.scores = scores;
    spec.types = types;
    if (kind == SLATE__TOK_SPM && is_phi3(g)) {
        attrs = slate__calloc((size_t)n, 1);
        if (!attrs) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory for %d token attributes", (int)n);
            goto done;
        }
        phi3_rstrip(n, tokens, lens, types, attrs);
        spec.attrs = attrs;
    }
    bool flag;
    spec.add_bos = slate__gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &flag)
                       ? flag
                       : (kind == SLATE__TOK_SPM || llama3);
    spec.add_space_prefix =
        kind == SLATE__TOK_SPM &&
        (slate__gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &flag) ? flag : true);
    spec.byte_fallback = kind == SLATE__TOK_SPM && any_byte;
    spec.space_is_plain = false;
    st = slate__tok_create(&spec, out, err);
done:
    slate__free(tokens);
    slate__free(lens);
    slate__free(scores);
    slate__free(types);
    slate__free(attrs);
    slate__free(merges);
    slate__free(merge_pool);
    return st;
}
