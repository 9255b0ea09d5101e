/*
 * tok_hf.c - reader for Hugging Face tokenizer.json files with model.type "BPE" (format of the
 * `tokenizers` library: tokenizers/src/models/bpe/serialization.rs, pre_tokenizers/, normalizers/),
 * plus tokenizer_config.json beside it for bos/eos/pad and add_bos_token.
 *
 * Which kind of BPE a file is: a ByteLevel pre-tokenizer means byte-level BPE (GPT-2, Llama 3,
 * Qwen): its Split regexes (behaviour "Isolated") become our pre-tokenizer, in order, and a
 * ByteLevel with use_regex adds the GPT-2 regex at its place. byte_fallback, a Metaspace
 * pre-tokenizer or a Replace(' ' -> U+2581) normalizer mean SentencePiece-style BPE (Llama 2,
 * TinyLlama, Mistral): we run the SPM algorithm (spm.c) with merge_ranks, so that, as HF's BPE
 * model does, only the pairs that the merges list merge, lowest rank first (a pair listed twice
 * counts at its last rank). On files converted from a sentencepiece model the merges list every
 * split of every piece ordered by the piece's score, so this also reproduces sentencepiece; on
 * others (merges in another order, or vocabulary tokens that no merge makes) HF and
 * sentencepiece differ, and we follow HF. Each token still gets a score for the package and
 * slate__tok_score: -(rank of the first merge that produces it); tokens no merge produces score
 * below all of them.
 *
 * Anything we would have to guess at is refused with E_UNSUPPORTED naming it (other model types,
 * pre-tokenizers such as Digits or Punctuation, normalizers other than NFC / Prepend / Replace,
 * Split with another behaviour). Wrong JSON types are E_FORMAT naming the key. Ids must cover
 * 0..n-1 exactly once (vocab and added_tokens together; an added token may repeat a vocab entry
 * with the same text).
 *
 * The decoder matters to SentencePiece-style files only, for how decode drops the dummy-prefix
 * mark and whether added tokens' U+2581 decode to spaces (read_decoder). Added tokens:
 * "special" true makes a CONTROL token, else USER_DEFINED; lstrip / rstrip /
 * normalized become SLATE__TOK_ATTR_* (applied when matching, encode.c); single_word: true is
 * refused (added_token_attrs says why), and so is normalized: true where our normalizer model
 * would not reproduce HF's (check_normalized).
 *
 * JSON parsing uses cJSON (its allocations are outside the counted allocator; every cJSON tree is
 * deleted before return).
 */
#include "tok/tok.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_JSON_BYTES ((size_t)1 << 30)
#define NO_SPLIT_REGEX "[\\s\\S]+" /* ByteLevel without any regex: the whole text is one piece */

/* ---- a local text -> id hash over the gathered tokens ---------------------------------------- */

typedef struct idmap {
    int32_t *slots;
    uint32_t mask;
    const char *const *tokens;
} idmap;

static bool idmap_init(idmap *m, const char *const *tokens, int32_t n) {
    uint32_t size = 16;
    while (size < (uint64_t)n * 2) size <<= 1;
    m->slots = slate__malloc((size_t)size * sizeof *m->slots);
    if (!m->slots) return false;
    memset(m->slots, 0xff, (size_t)size * sizeof *m->slots);
    m->mask = size - 1;
    m->tokens = tokens;
    for (int32_t id = 0; id < n; id++) {
        const char *t = tokens[id];
        size_t len = strlen(t);
        uint32_t i = slate__tok_hash_bytes(t, len) & m->mask;
        while (m->slots[i] >= 0 && strcmp(tokens[m->slots[i]], t) != 0) i = (i + 1) & m->mask;
        if (m->slots[i] < 0) m->slots[i] = id;
    }
    return true;
}

static int32_t idmap_get(const idmap *m, const char *s, size_t len) {
    uint32_t i = slate__tok_hash_bytes(s, len) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        int32_t id = m->slots[i];
        if (id < 0) return -1;
        if (strncmp(m->tokens[id], s, len) == 0 && m->tokens[id][len] == '\0') return id;
    }
}

/* ---- JSON helpers ------------------------------------------------------------------------------
 */

static const char *type_name(const cJSON *j) {
    if (!j) return "missing";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "invalid";
}

static bool get_id_value(const cJSON *j, int32_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double v = j->valuedouble;
    if (!(v >= 0 && v < SLATE__TOK_MAX_TOKENS) || v != floor(v)) return false;
    *out = (int32_t)v;
    return true;
}

/* A special-token entry of tokenizer_config.json: "text", {"content": "text"} or null. */
static slate_status config_token(const cJSON *cfg, const char *key, const char **text,
                                 slate_error *err) {
    *text = NULL;
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!j || cJSON_IsNull(j)) return SLATE_OK;
    if (cJSON_IsString(j)) {
        *text = j->valuestring;
        return SLATE_OK;
    }
    const cJSON *c = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "content") : NULL;
    if (cJSON_IsString(c)) {
        *text = c->valuestring;
        return SLATE_OK;
    }
    return slate__fail(err, SLATE_E_FORMAT,
                       "tokenizer_config.json: \"%s\" is %s, expected a string, {\"content\": "
                       "string} or null",
                       key, type_name(j));
}

/* ---- the loader --------------------------------------------------------------------------------
 */

typedef struct hf {
    cJSON *root, *cfg;
    int32_t n;
    const char **tokens; /* [n] borrowed from the cJSON trees */
    uint8_t *types;
    uint8_t *attrs; /* [n] SLATE__TOK_ATTR_* from the added tokens' lstrip / rstrip */
    float *scores;
    const char **pre; /* regex sources (borrowed) */
    int32_t n_pre;
    int32_t *merge_ids; /* [n_merges][2] */
    int32_t n_merges;
    idmap map;
} hf;

/* An added token's options: lstrip / rstrip / normalized become SLATE__TOK_ATTR_* bits (applied
 * when the token is matched, encode.c; normalized is checked against the normalizer in
 * check_normalized). single_word: true is refused: HF then matches the token only between
 * non-word characters (Rust regex \w, Unicode), and a match it rejects also hides any other
 * added token overlapping it; we have no Unicode \w table to reproduce that exactly, and
 * ignoring the flag would split words HF keeps whole. No shipped vocabulary sets it. A missing
 * option is false (HF's serializer always writes all of them). */
static slate_status added_token_attrs(const cJSON *e, int id, const char *text, uint8_t *attrs,
                                      slate_error *err) {
    static const char *const keys[] = {"lstrip", "rstrip", "single_word", "normalized"};
    bool on[4];
    for (int i = 0; i < 4; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(e, keys[i]);
        if (j && !cJSON_IsBool(j) && !cJSON_IsNull(j))
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: added token %d \"%.64s\": %s is %s, expected a "
                               "boolean",
                               id, text, keys[i], type_name(j));
        on[i] = cJSON_IsTrue(j);
    }
    if (on[2])
        return slate__fail(err, SLATE_E_UNSUPPORTED,
                           "tokenizer.json: added token %d \"%.64s\" has single_word: true, "
                           "which is not supported (HF would match it only as a whole word)",
                           id, text);
    *attrs = (uint8_t)((on[0] ? SLATE__TOK_ATTR_LSTRIP : 0) | (on[1] ? SLATE__TOK_ATTR_RSTRIP : 0) |
                       (on[3] ? SLATE__TOK_ATTR_NORMALIZED : 0));
    return SLATE_OK;
}

static slate_status gather_tokens(hf *h, const cJSON *model, slate_error *err) {
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab))
        return slate__fail(err, SLATE_E_FORMAT,
                           "tokenizer.json: model.vocab is %s, expected an "
                           "object {token: id}",
                           type_name(vocab));
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(h->root, "added_tokens");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added))
        return slate__fail(err, SLATE_E_FORMAT,
                           "tokenizer.json: added_tokens is %s, expected an "
                           "array",
                           type_name(added));
    int32_t max_id = -1, id;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!get_id_value(e, &id))
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: model.vocab[\"%.64s\"] is %s, expected an integer "
                               "id in 0..%d",
                               e->string, type_name(e), SLATE__TOK_MAX_TOKENS - 1);
        if (id > max_id) max_id = id;
    }
    int k = 0;
    cJSON_ArrayForEach(e, added) {
        const cJSON *jid = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsObject(e) || !get_id_value(jid, &id) || !cJSON_IsString(content))
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: added_tokens[%d] needs an integer \"id\" in 0..%d "
                               "and a string \"content\" (id is %s, content is %s)",
                               k, SLATE__TOK_MAX_TOKENS - 1, type_name(jid), type_name(content));
        if (id > max_id) max_id = id;
        k++;
    }
    if (max_id < 0)
        return slate__fail(err, SLATE_E_FORMAT, "tokenizer.json: the vocabulary is empty");
    h->n = max_id + 1;
    h->tokens = slate__calloc((size_t)h->n, sizeof *h->tokens);
    h->types = slate__malloc((size_t)h->n);
    h->attrs = slate__calloc((size_t)h->n, 1);
    h->scores = slate__calloc((size_t)h->n, sizeof *h->scores);
    if (!h->tokens || !h->types || !h->attrs || !h->scores)
        return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d tokens", (int)h->n);
    memset(h->types, SLATE__TOKT_NORMAL, (size_t)h->n);
    cJSON_ArrayForEach(e, vocab) {
        get_id_value(e, &id);
        if (h->tokens[id])
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: id %d is used by both \"%.64s\" and \"%.64s\" in "
                               "model.vocab",
                               (int)id, h->tokens[id], e->string);
        h->tokens[id] = e->string;
    }
    cJSON_ArrayForEach(e, added) {
        get_id_value(cJSON_GetObjectItemCaseSensitive(e, "id"), &id);
        const char *text = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        if (h->tokens[id] && strcmp(h->tokens[id], text) != 0)
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: added token %d \"%.64s\" clashes with \"%.64s\"",
                               (int)id, text, h->tokens[id]);
        h->tokens[id] = text;
        const cJSON *special = cJSON_GetObjectItemCaseSensitive(e, "special");
        h->types[id] = cJSON_IsTrue(special) ? SLATE__TOKT_CONTROL : SLATE__TOKT_USER_DEFINED;
        slate_status st = added_token_attrs(e, (int)id, text, &h->attrs[id], err);
        if (st != SLATE_OK) return st;
    }
    for (id = 0; id < h->n; id++)
        if (!h->tokens[id])
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: token id %d has no entry in model.vocab or "
                               "added_tokens (ids must be 0..%d without gaps)",
                               (int)id, (int)h->n - 1);
    if (!idmap_init(&h->map, h->tokens, h->n))
        return slate__fail(err, SLATE_E_NOMEM, "out of memory for the vocabulary map");
    return SLATE_OK;
}

/* HF's BPE collects the merges into a map, so a pair listed again takes the rank of its last
 * entry (models/bpe/model.rs BpeBuilder::build); llama.cpp, and slate__tok_create for BPE,
 * keep the first. Dropping the earlier entries of such a pair gives HF's order (ranks only
 * compare), for both kinds, in the package too. */
static slate_status drop_earlier_duplicates(hf *h, slate_error *err) {
    if (h->n_merges < 2) return SLATE_OK;
    uint32_t size = 16;
    while (size < (uint64_t)h->n_merges * 2) size <<= 1;
    uint64_t *seen = slate__malloc((size_t)size * sizeof *seen);
    if (!seen) return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d merges", h->n_merges);
    memset(seen, 0xff, (size_t)size * sizeof *seen);
    int32_t kept = h->n_merges; /* walk from the last merge; kept ones move to the end */
    for (int32_t r = h->n_merges - 1; r >= 0; r--) {
        uint64_t key = (uint64_t)(uint32_t)h->merge_ids[2 * r] << 32 |
                       (uint32_t)h->merge_ids[2 * r + 1];
        uint32_t i = slate__tok_hash_bytes(&key, sizeof key) & (size - 1);
        while (seen[i] != UINT64_MAX && seen[i] != key) i = (i + 1) & (size - 1);
        if (seen[i] == key) continue;
        seen[i] = key;
        kept--;
        h->merge_ids[2 * kept] = h->merge_ids[2 * r];
        h->merge_ids[2 * kept + 1] = h->merge_ids[2 * r + 1];
    }
    slate__free(seen);
    if (kept > 0)
        memmove(h->merge_ids, h->merge_ids + 2 * kept,
                (size_t)(h->n_merges - kept) * 2 * sizeof *h->merge_ids);
    h->n_merges -= kept;
    return SLATE_OK;
}

static slate_status gather_merges(hf *h, const cJSON *model, slate_error *err) {
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!merges || cJSON_IsNull(merges)) return SLATE_OK;
    if (!cJSON_IsArray(merges))
        return slate__fail(err, SLATE_E_FORMAT,
                           "tokenizer.json: model.merges is %s, expected an "
                           "array",
                           type_name(merges));
    int n = cJSON_GetArraySize(merges);
    if (n > SLATE__TOK_MAX_MERGES)
        return slate__fail(err, SLATE_E_FORMAT, "tokenizer.json: %d merges, at most %d", n,
                           SLATE__TOK_MAX_MERGES);
    h->merge_ids = slate__malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof *h->merge_ids);
    if (!h->merge_ids) return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d merges", n);
    const cJSON *m;
    int r = 0;
    cJSON_ArrayForEach(m, merges) {
        const char *a, *b;
        size_t la, lb;
        if (cJSON_IsString(m)) { /* legacy "left right" */
            const char *s = m->valuestring;
            size_t len = strlen(s);
            const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
            if (!sp)
                return slate__fail(
                    err, SLATE_E_FORMAT,
                    "tokenizer.json: model.merges[%d] \"%.64s\" is not \"left right\"", r, s);
            a = s;
            la = (size_t)(sp - s);
            b = sp + 1;
            lb = len - la - 1;
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
            a = cJSON_GetArrayItem(m, 0)->valuestring;
            b = cJSON_GetArrayItem(m, 1)->valuestring;
            la = strlen(a);
            lb = strlen(b);
        } else {
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: model.merges[%d] is %s, expected \"left right\" or "
                               "[\"left\", \"right\"]",
                               r, type_name(m));
        }
        int32_t l = idmap_get(&h->map, a, la), rr = idmap_get(&h->map, b, lb);
        if (l < 0 || rr < 0)
            return slate__fail(
                err, SLATE_E_FORMAT,
                "tokenizer.json: model.merges[%d]: \"%.*s\" is not in the vocabulary", r,
                (int)(l < 0 ? (la < 64 ? la : 64) : (lb < 64 ? lb : 64)), l < 0 ? a : b);
        h->merge_ids[2 * r] = l;
        h->merge_ids[2 * r + 1] = rr;
        r++;
    }
    h->n_merges = r;
    return drop_earlier_duplicates(h, err);
}

/* SPM scores from merge ranks (see the top of the file). */
static slate_status derive_scores(hf *h, slate_error *err) {
    bool *set = slate__calloc((size_t)h->n, sizeof *set);
    char *cat = slate__malloc(2 * SLATE__TOK_MAX_TOKEN_BYTES + 1);
    slate_status st = SLATE_OK;
    if (!set || !cat) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory deriving scores");
        goto done;
    }
    for (int32_t r = 0; r < h->n_merges; r++) {
        const char *a = h->tokens[h->merge_ids[2 * r]], *b = h->tokens[h->merge_ids[2 * r + 1]];
        size_t la = strlen(a), lb = strlen(b);
        if (la > SLATE__TOK_MAX_TOKEN_BYTES || lb > SLATE__TOK_MAX_TOKEN_BYTES) continue;
        memcpy(cat, a, la);
        memcpy(cat + la, b, lb);
        int32_t id = idmap_get(&h->map, cat, la + lb);
        if (id < 0) {
            st = slate__fail(err, SLATE_E_FORMAT,
                             "tokenizer.json: model.merges[%d] (\"%.64s\" + \"%.64s\") makes a "
                             "token that is not in the vocabulary",
                             (int)r, a, b);
            goto done;
        }
        if (!set[id]) {
            set[id] = true;
            h->scores[id] = -(float)r;
        }
    }
    for (int32_t id = 0; id < h->n; id++)
        if (!set[id]) h->scores[id] = -(float)h->n_merges - 1.0f;
done:
    slate__free(set);
    slate__free(cat);
    return st;
}

typedef struct pipeline {
    bool byte_level, metaspace, prepend_space, replace_space, nfc;
    bool prepend_first;      /* Metaspace prepend_scheme "first" */
    bool prepend_normalizer; /* prepend_space comes (also) from a Prepend normalizer */
    bool split_marks;        /* Metaspace split: true */
} pipeline;

static slate_status read_pre_tokenizer(hf *h, const cJSON *pt, pipeline *p, slate_error *err) {
    if (!pt || cJSON_IsNull(pt)) return SLATE_OK;
    const cJSON *list = pt, *one;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pt, "type");
    if (!cJSON_IsObject(pt) || !cJSON_IsString(type))
        return slate__fail(err, SLATE_E_FORMAT,
                           "tokenizer.json: pre_tokenizer is %s without a string \"type\"",
                           type_name(pt));
    bool seq = strcmp(type->valuestring, "Sequence") == 0;
    if (seq) {
        list = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
        if (!cJSON_IsArray(list))
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: pre_tokenizer.pretokenizers is %s, expected an "
                               "array",
                               type_name(list));
    }
    int n = seq ? cJSON_GetArraySize(list) : 1;
    h->pre = slate__calloc((size_t)(n > 0 ? n : 1), sizeof *h->pre);
    if (!h->pre) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        one = seq ? cJSON_GetArrayItem(list, i) : pt;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(one, "type");
        if (!cJSON_IsString(t))
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: pre_tokenizer %d has no string \"type\"", i);
        const char *ty = t->valuestring;
        if (strcmp(ty, "Split") == 0) {
            const cJSON *pat = cJSON_GetObjectItemCaseSensitive(one, "pattern");
            const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
            const cJSON *beh = cJSON_GetObjectItemCaseSensitive(one, "behavior");
            const cJSON *inv = cJSON_GetObjectItemCaseSensitive(one, "invert");
            if (!cJSON_IsString(re))
                return slate__fail(err, cJSON_IsObject(pat) ? SLATE_E_UNSUPPORTED : SLATE_E_FORMAT,
                                   "tokenizer.json: pre_tokenizer Split needs pattern {\"Regex\": "
                                   "string} (only regex patterns are supported)");
            if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") != 0 ||
                cJSON_IsTrue(inv))
                return slate__fail(err, SLATE_E_UNSUPPORTED,
                                   "tokenizer.json: pre_tokenizer Split with behavior '%s'%s: only "
                                   "\"Isolated\" without invert is supported",
                                   cJSON_IsString(beh) ? beh->valuestring : "?",
                                   cJSON_IsTrue(inv) ? " and invert" : "");
            if (h->n_pre >= SLATE__TOK_MAX_PRE)
                return slate__fail(err, SLATE_E_UNSUPPORTED,
                                   "tokenizer.json: more than %d Split "
                                   "pre-tokenizers",
                                   SLATE__TOK_MAX_PRE);
            h->pre[h->n_pre++] = re->valuestring;
        } else if (strcmp(ty, "ByteLevel") == 0) {
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(one, "add_prefix_space")))
                return slate__fail(err, SLATE_E_UNSUPPORTED,
                                   "tokenizer.json: ByteLevel pre_tokenizer with add_prefix_space "
                                   "true is not supported");
            p->byte_level = true;
            const cJSON *use = cJSON_GetObjectItemCaseSensitive(one, "use_regex");
            if (!cJSON_IsFalse(use)) { /* default true: GPT-2's regex */
                const char *const *gpt2;
                slate__tok_pre_regexes("gpt-2", &gpt2);
                if (h->n_pre >= SLATE__TOK_MAX_PRE)
                    return slate__fail(err, SLATE_E_UNSUPPORTED,
                                       "tokenizer.json: too many "
                                       "pre-tokenizers");
                h->pre[h->n_pre++] = gpt2[0];
            }
        } else if (strcmp(ty, "Metaspace") == 0) {
            const cJSON *rep = cJSON_GetObjectItemCaseSensitive(one, "replacement");
            const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(one, "prepend_scheme");
            const cJSON *aps = cJSON_GetObjectItemCaseSensitive(one, "add_prefix_space");
            if (cJSON_IsString(rep) && strcmp(rep->valuestring, "\xE2\x96\x81") != 0)
                return slate__fail(err, SLATE_E_UNSUPPORTED,
                                   "tokenizer.json: Metaspace replacement '%s': only U+2581",
                                   rep->valuestring);
            /* HF reads a missing "split" as true: cut before every mark (spm.c word_end). */
            const cJSON *split = cJSON_GetObjectItemCaseSensitive(one, "split");
            if (split && !cJSON_IsBool(split))
                return slate__fail(err, SLATE_E_FORMAT,
                                   "tokenizer.json: Metaspace split is %s, expected a boolean",
                                   type_name(split));
            p->metaspace = true;
            p->split_marks = !cJSON_IsFalse(split);
            if (cJSON_IsString(scheme)) {
                p->prepend_space = strcmp(scheme->valuestring, "never") != 0;
                p->prepend_first = strcmp(scheme->valuestring, "first") == 0;
            } else
                p->prepend_space = !cJSON_IsFalse(aps);
        } else {
            return slate__fail(err, SLATE_E_UNSUPPORTED,
                               "tokenizer.json: pre_tokenizer type '%.40s' is not supported "
                               "(supported: Split, ByteLevel, Metaspace)",
                               ty);
        }
    }
    return SLATE_OK;
}

static slate_status read_normalizer(const cJSON *nm, pipeline *p, slate_error *err) {
    if (!nm || cJSON_IsNull(nm)) return SLATE_OK;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(nm, "type");
    if (!cJSON_IsObject(nm) || !cJSON_IsString(type))
        return slate__fail(err, SLATE_E_FORMAT,
                           "tokenizer.json: normalizer is %s without a string \"type\"",
                           type_name(nm));
    if (strcmp(type->valuestring, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(nm, "normalizers"), *e;
        if (!cJSON_IsArray(list))
            return slate__fail(err, SLATE_E_FORMAT,
                               "tokenizer.json: normalizer.normalizers is %s, expected an array",
                               type_name(list));
        cJSON_ArrayForEach(e, list) {
            if (cJSON_IsObject(e) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "type")) &&
                strcmp(cJSON_GetObjectItemCaseSensitive(e, "type")->valuestring, "Sequence") == 0)
                return slate__fail(err, SLATE_E_UNSUPPORTED,
                                   "tokenizer.json: nested normalizer "
                                   "sequences are not supported");
            slate_status st = read_normalizer(e, p, err);
            if (st != SLATE_OK) return st;
        }
        return SLATE_OK;
    }
    const char *ty = type->valuestring;
    if (strcmp(ty, "NFC") == 0) {
        p->nfc = true;
    } else if (strcmp(ty, "Prepend") == 0) {
        const cJSON *pre = cJSON_GetObjectItemCaseSensitive(nm, "prepend");
        if (!cJSON_IsString(pre) || strcmp(pre->valuestring, "\xE2\x96\x81") != 0)
            return slate__fail(err, SLATE_E_UNSUPPORTED,
                               "tokenizer.json: Prepend normalizer must prepend U+2581");
        p->prepend_space = true;
        p->prepend_normalizer = true;
    } else if (strcmp(ty, "Replace") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(nm, "pattern");
        const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(nm, "content");
        if (!cJSON_IsString(str) || strcmp(str->valuestring, " ") != 0 ||
            !cJSON_IsString(content) || strcmp(content->valuestring, "\xE2\x96\x81") != 0)
            return slate__fail(err, SLATE_E_UNSUPPORTED,
                               "tokenizer.json: only the Replace normalizer ' ' -> U+2581 is "
                               "supported");
        p->replace_space = true;
    } else {
        return slate__fail(err, SLATE_E_UNSUPPORTED,
                           "tokenizer.json: normalizer type '%.40s' is not supported (supported: "
                           "NFC, Prepend, Replace, Sequence)",
                           ty);
    }
    return SLATE_OK;
}

/* Normalized added tokens (HF normalized: true) are matched in the text as slate__tok_normalize
 * leaves it, which for SentencePiece-style files is the normalizer of a Llama 2 style file
 * (Prepend and Replace ' ' -> U+2581, or Replace alone) or of a Metaspace file (none, NFC or
 * Replace). Two cases would need more than that and are refused where they would change ids:
 * a Metaspace pre-tokenizer together with a Prepend normalizer (the normalized text carries the
 * Prepend mark, but HF's Metaspace then also marks each piece that a normalized token leaves
 * behind it, which encode.c does not model; without normalized tokens the pair is supported:
 * the Prepend rules decide), and a normalizer without
 * Replace when the token contains a space or U+2581 or strips white space (slate__tok_normalize
 * always turns spaces into U+2581 for SPM, which HF's normalizer then would not). */
static slate_status check_normalized(const hf *h, const pipeline *p, slate__tok_kind kind,
                                     slate_error *err) {
    if (kind != SLATE__TOK_SPM) return SLATE_OK; /* byte-level: NFC or nothing, as HF */
    for (int32_t id = 0; id < h->n; id++) {
        uint8_t a = h->attrs[id];
        if (!(a & SLATE__TOK_ATTR_NORMALIZED)) continue;
        const char *t = h->tokens[id];
        if (p->metaspace && p->prepend_normalizer)
            return slate__fail(err, SLATE_E_UNSUPPORTED,
                               "tokenizer.json: added token %d \"%.64s\" has normalized: true "
                               "in a file with both a Metaspace pre-tokenizer and a Prepend "
                               "normalizer, which is not supported",
                               (int)id, t);
        if (!p->replace_space && (strchr(t, ' ') || strstr(t, "\xE2\x96\x81") ||
                                  (a & (SLATE__TOK_ATTR_LSTRIP | SLATE__TOK_ATTR_RSTRIP))))
            return slate__fail(err, SLATE_E_UNSUPPORTED,
                               "tokenizer.json: added token %d \"%.64s\" has normalized: true "
                               "and %s, which is not supported without a Replace ' ' -> U+2581 "
                               "normalizer",
                               (int)id, t,
                               (a & (SLATE__TOK_ATTR_LSTRIP | SLATE__TOK_ATTR_RSTRIP))
                                   ? "lstrip/rstrip"
                                   : "a space or U+2581 in its text");
    }
    return SLATE_OK;
}

/* A Metaspace decoder: prepend_scheme "never" (or, in older files without it, add_prefix_space
 * false) keeps every mark as a space; otherwise the first token loses all of its marks. */
static slate_status metaspace_decoder(const cJSON *d, uint8_t *mode, slate_error *err) {
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(d, "replacement");
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(d, "prepend_scheme");
    if (cJSON_IsString(rep) && strcmp(rep->valuestring, "\xE2\x96\x81") != 0)
        return slate__fail(err, SLATE_E_UNSUPPORTED,
                           "tokenizer.json: Metaspace decoder replacement '%.16s': only U+2581",
                           rep->valuestring);
    bool prepends = cJSON_IsString(scheme)
                        ? strcmp(scheme->valuestring, "never") != 0
                        : !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(d, "add_prefix_space"));
    *mode = prepends ? SLATE__TOK_DSTRIP_METASPACE : SLATE__TOK_DSTRIP_NONE;
    return SLATE_OK;
}

/* How the decoder of a SentencePiece-style file drops the dummy-prefix mark (slate__tok_dstrip,
 * HF tokenizers decoders/): a Metaspace decoder (alone or in a Sequence), or a Sequence whose
 * Strip(' ', 1, 0) comes after Fuse (so it strips the whole output once: Llama 2's Replace,
 * ByteFallback, Fuse, Strip); a Sequence or a single Replace / ByteFallback / Fuse without
 * either strips nothing. A Strip we would have to guess at (another character, a right side,
 * more than one, or per token before Fuse) is refused. A missing decoder, or one of another
 * type, keeps sentencepiece's rule. */
/* Whether decoder d turns U+2581 into ' ' in the token strings it is given: a Metaspace decoder,
 * or Replace(U+2581 -> ' '). HF's decoder gets every token's string, added tokens' too
 * (tokenizer/mod.rs decode). */
static bool replaces_marks(const cJSON *d) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(d, "type");
    if (!cJSON_IsString(t)) return false;
    if (strcmp(t->valuestring, "Metaspace") == 0) return true;
    if (strcmp(t->valuestring, "Replace") != 0) return false;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d,
                                                        "pattern"), "String");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(d, "content");
    return cJSON_IsString(pat) && strcmp(pat->valuestring, "\xE2\x96\x81") == 0 &&
           cJSON_IsString(content) && strcmp(content->valuestring, " ") == 0;
}

static slate_status read_decoder(const cJSON *dec, uint8_t *mode, bool *added_marks,
                                 slate_error *err) {
    *mode = SLATE__TOK_DSTRIP_SPM;
    *added_marks = false;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(dec, "type");
    if (!cJSON_IsObject(dec) || !cJSON_IsString(type)) return SLATE_OK;
    const char *ty = type->valuestring;
    *added_marks = replaces_marks(dec);
    if (strcmp(ty, "Metaspace") == 0) return metaspace_decoder(dec, mode, err);
    if (strcmp(ty, "Replace") == 0 || strcmp(ty, "ByteFallback") == 0 ||
        strcmp(ty, "Fuse") == 0) {
        *mode = SLATE__TOK_DSTRIP_NONE;
        return SLATE_OK;
    }
    if (strcmp(ty, "Sequence") != 0) return SLATE_OK;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(dec, "decoders"), *e;
    if (!cJSON_IsArray(list))
        return slate__fail(err, SLATE_E_FORMAT,
                           "tokenizer.json: decoder.decoders is %s, expected an array",
                           type_name(list));
    *mode = SLATE__TOK_DSTRIP_NONE;
    bool fused = false;
    cJSON_ArrayForEach(e, list) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "type");
        if (!cJSON_IsString(t)) continue;
        if (replaces_marks(e)) *added_marks = true;
        if (strcmp(t->valuestring, "Fuse") == 0) {
            fused = true;
        } else if (strcmp(t->valuestring, "Metaspace") == 0) {
            slate_status st = metaspace_decoder(e, mode, err);
            if (st != SLATE_OK) return st;
        } else if (strcmp(t->valuestring, "Strip") == 0) {
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
            const cJSON *start = cJSON_GetObjectItemCaseSensitive(e, "start");
            const cJSON *stop = cJSON_GetObjectItemCaseSensitive(e, "stop");
            double n_start = cJSON_IsNumber(start) ? start->valuedouble : -1;
            double n_stop = cJSON_IsNumber(stop) ? stop->valuedouble : 0;
            if (n_start == 0 && n_stop == 0) continue; /* strips nothing */
            if (!cJSON_IsString(content) || strcmp(content->valuestring, " ") != 0 ||
                n_start != 1 || n_stop != 0 || !fused)
                return slate__fail(err, SLATE_E_UNSUPPORTED,
                                   "tokenizer.json: Strip decoder: only content ' ', start 1, "
                                   "stop 0 after a Fuse decoder is supported");
            *mode = SLATE__TOK_DSTRIP_LEADING;
        }
    }
    return SLATE_OK;
}

static slate_status find_named(const hf *h, const char *what, const char *text, int32_t *id,
                               slate_error *err) {
    *id = -1;
    if (!text) return SLATE_OK;
    *id = idmap_get(&h->map, text, strlen(text));
    if (*id < 0)
        return slate__fail(err, SLATE_E_FORMAT, "%s \"%.64s\" is not a token of the vocabulary",
                           what, text);
    return SLATE_OK;
}

static void hf_free(hf *h) {
    cJSON_Delete(h->root);
    cJSON_Delete(h->cfg);
    slate__free(h->tokens);
    slate__free(h->types);
    slate__free(h->attrs);
    slate__free(h->scores);
    slate__free(h->pre);
    slate__free(h->merge_ids);
    slate__free(h->map.slots);
}

slate_status slate__tok_load_hf_mem(const char *data, size_t len, const char *config_json,
                                    size_t config_len, slate_tokenizer **out, slate_error *err) {
    if (out) *out = NULL;
    if (!out || (!data && len > 0))
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate__tok_load_hf_mem: NULL argument");
    hf h = {0};
    slate_status st = SLATE_OK;
    const char *end = NULL;
    h.root = cJSON_ParseWithLengthOpts(data ? data : "", len, &end, false);
    if (!h.root) {
        size_t at = end && end >= data ? (size_t)(end - data) : 0;
        return slate__fail_at(err, SLATE_E_FORMAT, at,
                              "tokenizer.json: invalid JSON near byte %zu (or out of memory)", at);
    }
    if (config_json) {
        h.cfg = cJSON_ParseWithLengthOpts(config_json, config_len, &end, false);
        if (!h.cfg || !cJSON_IsObject(h.cfg)) {
            size_t at = h.cfg ? 0 : (end && end >= config_json ? (size_t)(end - config_json) : 0);
            st = slate__fail_at(err, SLATE_E_FORMAT, at,
                                "tokenizer_config.json: not a JSON object (error near byte %zu)",
                                at);
            goto done;
        }
    }
    if (!cJSON_IsObject(h.root)) {
        st = slate__fail(err, SLATE_E_FORMAT,
                         "tokenizer.json: the top level is %s, expected an "
                         "object",
                         type_name(h.root));
        goto done;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(h.root, "model");
    if (!cJSON_IsObject(model)) {
        st = slate__fail(err, SLATE_E_FORMAT, "tokenizer.json: \"model\" is %s, expected an object",
                         type_name(model));
        goto done;
    }
    const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (mtype && !cJSON_IsString(mtype)) {
        st = slate__fail(err, SLATE_E_FORMAT, "tokenizer.json: model.type is %s, expected a string",
                         type_name(mtype));
        goto done;
    }
    if (mtype && strcmp(mtype->valuestring, "BPE") != 0) {
        st = slate__fail(err, SLATE_E_UNSUPPORTED,
                         "tokenizer.json: model.type '%.40s' is not supported (only BPE)",
                         mtype->valuestring);
        goto done;
    }
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(model, affix[i]);
        if (cJSON_IsString(a) && a->valuestring[0]) {
            st = slate__fail(err, SLATE_E_UNSUPPORTED,
                             "tokenizer.json: model.%s '%.20s' is not "
                             "supported",
                             affix[i], a->valuestring);
            goto done;
        }
    }
    if ((st = gather_tokens(&h, model, err)) != SLATE_OK) goto done;
    if ((st = gather_merges(&h, model, err)) != SLATE_OK) goto done;

    pipeline p = {0};
    if ((st = read_pre_tokenizer(&h, cJSON_GetObjectItemCaseSensitive(h.root, "pre_tokenizer"), &p,
                                 err)) != SLATE_OK)
        goto done;
    if ((st = read_normalizer(cJSON_GetObjectItemCaseSensitive(h.root, "normalizer"), &p, err)) !=
        SLATE_OK)
        goto done;
    bool byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    /* fuse_unk (HF default false): with byte-level BPE every byte is a token, so no <unk>. */
    const cJSON *fuse_unk = cJSON_GetObjectItemCaseSensitive(model, "fuse_unk");
    if (fuse_unk && !cJSON_IsBool(fuse_unk) && !cJSON_IsNull(fuse_unk)) {
        st = slate__fail(err, SLATE_E_FORMAT,
                         "tokenizer.json: model.fuse_unk is %s, expected a boolean",
                         type_name(fuse_unk));
        goto done;
    }
    slate__tok_kind kind;
    if (p.byte_level) {
        kind = SLATE__TOK_BPE;
        if (p.metaspace || p.replace_space || p.prepend_space || byte_fallback) {
            st = slate__fail(err, SLATE_E_UNSUPPORTED,
                             "tokenizer.json mixes ByteLevel with SentencePiece-style parts "
                             "(Metaspace, Replace/Prepend or byte_fallback)");
            goto done;
        }
    } else if (byte_fallback || p.metaspace || p.replace_space) {
        kind = SLATE__TOK_SPM;
        if (h.n_pre > 0) {
            st = slate__fail(err, SLATE_E_UNSUPPORTED,
                             "tokenizer.json: Split pre-tokenizers with a SentencePiece-style BPE "
                             "are not supported");
            goto done;
        }
    } else {
        st = slate__fail(err, SLATE_E_UNSUPPORTED,
                         "tokenizer.json: cannot tell the BPE flavour: expected a ByteLevel "
                         "pre_tokenizer (byte-level BPE) or byte_fallback / Metaspace / Replace "
                         "(SentencePiece-style)");
        goto done;
    }

    if ((st = check_normalized(&h, &p, kind, err)) != SLATE_OK) goto done;

    slate__tok_spec spec = {
        .kind = kind, .n_tokens = h.n, .tokens = h.tokens, .types = h.types, .attrs = h.attrs};
    spec.unk_id = -1;
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(unk)) {
        if ((st = find_named(&h, "tokenizer.json: model.unk_token", unk->valuestring, &spec.unk_id,
                             err)) != SLATE_OK)
            goto done;
        h.types[spec.unk_id] = SLATE__TOKT_UNKNOWN;
    }
    if (kind == SLATE__TOK_SPM) {
        if ((st = derive_scores(&h, err)) != SLATE_OK) goto done;
        spec.scores = h.scores;
        spec.merge_ranks = true;
        spec.n_merges = h.n_merges;
        spec.merge_ids = h.merge_ids;
        if (byte_fallback)
            for (int32_t i = 0; i < h.n; i++) {
                const char *s = h.tokens[i];
                if (h.types[i] == SLATE__TOKT_NORMAL && strlen(s) == 6 &&
                    memcmp(s, "<0x", 3) == 0 && s[5] == '>')
                    h.types[i] = SLATE__TOKT_BYTE;
            }
        spec.byte_fallback = byte_fallback;
        spec.add_space_prefix = p.prepend_space;
        /* Metaspace (unlike the Prepend normalizer) adds no mark to text that starts with one,
         * and with prepend_scheme "first" none to text after an added token. With a Prepend
         * normalizer as well, the normalizer runs first (on every stretch between added
         * tokens, HF normalizers/prepend.rs) and Metaspace then finds the mark already there
         * (pre_tokenizers/metaspace.rs adds one only to text that does not start with it): the
         * Prepend rules alone decide, whatever the prepend_scheme. */
        spec.prefix_unless_spaced = p.metaspace && !p.prepend_normalizer;
        spec.prefix_first_only = p.metaspace && !p.prepend_normalizer && p.prepend_first;
        spec.fuse_unk = cJSON_IsTrue(fuse_unk);
        spec.split_marks = p.split_marks;
        if ((st = read_decoder(cJSON_GetObjectItemCaseSensitive(h.root, "decoder"),
                               &spec.decode_strip, &spec.decode_added_marks, err)) != SLATE_OK)
            goto done;
    } else {
        spec.n_merges = h.n_merges;
        spec.merge_ids = h.merge_ids;
        spec.pre_regexes = h.pre;
        spec.n_pre_regexes = h.n_pre;
        if (h.n_pre == 0) { /* ByteLevel without regex and no Split: no split at all */
            static const char *const no_split[] = {NO_SPLIT_REGEX};
            spec.pre_regexes = no_split;
            spec.n_pre_regexes = 1;
        }
        spec.ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    }
    spec.nfc = p.nfc;

    /* Special tokens: tokenizer_config.json when present, else the conventional names. */
    const char *bos = NULL, *eos = NULL, *pad = NULL;
    spec.eot_id = -1;
    if (h.cfg) {
        if ((st = config_token(h.cfg, "bos_token", &bos, err)) != SLATE_OK ||
            (st = config_token(h.cfg, "eos_token", &eos, err)) != SLATE_OK ||
            (st = config_token(h.cfg, "pad_token", &pad, err)) != SLATE_OK)
            goto done;
        if ((st = find_named(&h, "tokenizer_config.json: bos_token", bos, &spec.bos_id, err)) !=
                SLATE_OK ||
            (st = find_named(&h, "tokenizer_config.json: eos_token", eos, &spec.eos_id, err)) !=
                SLATE_OK ||
            (st = find_named(&h, "tokenizer_config.json: pad_token", pad, &spec.pad_id, err)) !=
                SLATE_OK)
            goto done;
        const cJSON *ab = cJSON_GetObjectItemCaseSensitive(h.cfg, "add_bos_token");
        if (ab && !cJSON_IsBool(ab) && !cJSON_IsNull(ab)) {
            st = slate__fail(err, SLATE_E_FORMAT,
                             "tokenizer_config.json: add_bos_token is %s, expected a boolean",
                             type_name(ab));
            goto done;
        }
        spec.add_bos = cJSON_IsBool(ab) ? cJSON_IsTrue(ab) : spec.bos_id >= 0;
    } else {
        spec.bos_id = kind == SLATE__TOK_SPM ? idmap_get(&h.map, "<s>", 3) : -1;
        spec.eos_id = kind == SLATE__TOK_SPM ? idmap_get(&h.map, "</s>", 4)
                                             : idmap_get(&h.map, "<|endoftext|>", 13);
        spec.pad_id = -1;
        spec.add_bos = spec.bos_id >= 0;
    }
    st = slate__tok_create(&spec, out, err);
done:
    hf_free(&h);
    return st;
}

slate_status slate__tok_load_hf(const char *path, slate_tokenizer **out, slate_error *err) {
    if (out) *out = NULL;
    if (!path || !out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate__tok_load_hf: %s is NULL",
                           !path ? "path" : "out");
    char *data = NULL, *cfg = NULL, *cfg_path = NULL;
    size_t len = 0, cfg_len = 0;
    slate_status st = slate__read_file(path, MAX_JSON_BYTES, &data, &len, err);
    if (st != SLATE_OK) return st;
    /* tokenizer_config.json in the same folder, if there is one. */
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    static const char cfg_name[] = "tokenizer_config.json";
    cfg_path = slate__malloc(dir_len + sizeof cfg_name);
    if (!cfg_path) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory");
        goto done;
    }
    memcpy(cfg_path, path, dir_len);
    memcpy(cfg_path + dir_len, cfg_name, sizeof cfg_name);
    FILE *fp = fopen(cfg_path, "rb");
    if (fp) {
        fclose(fp);
        if ((st = slate__read_file(cfg_path, MAX_JSON_BYTES, &cfg, &cfg_len, err)) != SLATE_OK)
            goto done;
    }
    st = slate__tok_load_hf_mem(data, len, cfg, cfg_len, out, err);
    if (st != SLATE_OK && err && strncmp(err->message, "tokenizer", 9) == 0) {
        /* Say which file: messages start with "tokenizer.json" or "tokenizer_config.json". */
        char msg[1024];
        snprintf(msg, sizeof msg, "%.400s (%.500s)", err->message,
                 strncmp(err->message, "tokenizer_config", 16) == 0 ? cfg_path : path);
        memcpy(err->message, msg, sizeof err->message - 1);
        err->message[sizeof err->message - 1] = '\0';
    }
done:
    slate__free(data);
    slate__free(cfg);
    slate__free(cfg_path);
    return st;
}
