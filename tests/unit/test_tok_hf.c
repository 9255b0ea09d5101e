/* test_tok_hf.c - HF tokenizer.json semantics that differ from llama.cpp's: added tokens with
 * normalized: true, and how the decoder drops the dummy-prefix mark; and the shape of Gemma's
 * files (a Replace normalizer without Prepend, so no dummy prefix, and no Strip decoder).
 *
 * Expected ids are derived by hand from HF tokenizers' source (huggingface/tokenizers,
 * tokenizers/src/tokenizer/added_vocabulary.rs, extract_and_normalize): (1) added tokens with
 * normalized: false are split out of the raw input (leftmost longest); (2) each stretch left
 * between them is normalized, and the normalized tokens are found in it, each spelled as the
 * normalizer spells its content (refresh_added_tokens); (3) the pre-tokenizer and the model run
 * on what is left. Every comment gives the normalized text the ids come from. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"

static slate_tokenizer *load(const char *json) {
    slate_tokenizer *tok = NULL;
    slate_error err;
    slate_status s = slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err);
    if (s != SLATE_OK) fprintf(stderr, "%s\n", err.message);
    assert_int_equal(s, SLATE_OK);
    return tok;
}

#define EXPECT_IDS TU_EXPECT_IDS

/* The same tokenizer after a trip through the package blob. */
static slate_tokenizer *round_trip(const slate_tokenizer *tok) {
    slate__buf b = {0};
    slate__tok_serialize(tok, &b);
    slate_tokenizer *back = NULL;
    assert_int_equal(slate__tok_deserialize(b.data, b.len, &back, NULL), SLATE_OK);
    slate__buf_free(&b);
    return back;
}

#define SP "\xE2\x96\x81" /* U+2581 */
#define SPM_VOCAB                                                                                  \
    "\"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"" SP "\": 3, \"H\": 4, \"i\": 5,"       \
    " \"" SP "H\": 6, \"" SP "Hi\": 7, \"Hi\": 8, \"<\": 9, \"/\": 10, \"s\": 11, \">\": 12,"      \
    " \"a b\": 13, \"a\": 14, \"b\": 15, \"<x>\": 16},"                                            \
    " \"merges\": [\"" SP " H\", \"" SP "H i\", \"H i\"]"

/* A Llama 2 style file (Prepend + Replace normalizer, no pre-tokenizer) whose <unk> <s> </s>
 * have normalized: true, as the tokenizer.json of huggyllama/llama-7b and early Llama 2 copies
 * have (transformers issue 23818: "ok</s>" encodes as "\u2581ok" "</" "s" ">"). Prepend puts a
 * mark in front of each token's spelling too: </s> is found only as "\u2581</s>". "a b" is a
 * user-defined normalized token (spelled "\u2581a\u2581b"), <x> a control token with normalized:
 * false. */
static const char k_llama2_json[] =
    "{\"added_tokens\": ["
    "{\"id\": 0, \"content\": \"<unk>\", \"special\": true, \"normalized\": true},"
    "{\"id\": 1, \"content\": \"<s>\", \"special\": true, \"normalized\": true},"
    "{\"id\": 2, \"content\": \"</s>\", \"special\": true, \"normalized\": true},"
    "{\"id\": 13, \"content\": \"a b\", \"special\": false, \"normalized\": true},"
    "{\"id\": 16, \"content\": \"<x>\", \"special\": true, \"normalized\": false}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\","
    " \"prepend\": \"" SP "\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"},"
    " \"content\": \"" SP "\"}]}, \"pre_tokenizer\": null,"
    " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\", " SPM_VOCAB
    "}}";

static void expect_llama2_normalized(const slate_tokenizer *tok) {
    const uint32_t ps = SLATE_ENCODE_PARSE_SPECIAL;
    EXPECT_IDS(tok, "Hi</s>", ps, 7, 9, 10, 11, 12); /* "\u2581Hi</s>": no "\u2581</s>" in it */
    EXPECT_IDS(tok, "Hi </s>", ps, 7, 2);           /* "\u2581Hi" "\u2581</s>" */
    EXPECT_IDS(tok, "</s>Hi", ps, 2, 8);            /* "\u2581</s>" "Hi": no second mark */
    EXPECT_IDS(tok, "Hi </s>", 0, 7, 3, 9, 10, 11, 12); /* not special: plain text */
    EXPECT_IDS(tok, "a b", 0, 13);                      /* "\u2581a\u2581b" */
    EXPECT_IDS(tok, "Hi a b", 0, 7, 13);                /* "\u2581Hi" "\u2581a\u2581b" */
    EXPECT_IDS(tok, "Hia b", 0, 7, 14, 3, 15);          /* "\u2581Hia\u2581b": no match */
    /* <x> splits the raw text first; the stretch after it gets its own mark. */
    EXPECT_IDS(tok, "Hi<x></s>", ps, 7, 16, 2); /* "\u2581Hi" <x> "\u2581</s>" */
    EXPECT_IDS(tok, "<x>Hi", ps, 16, 7);        /* <x> "\u2581Hi" */
}

static void normalized_added_tokens_match_the_normalized_text(void **st) {
    (void)st;
    slate_tokenizer *tok = load(k_llama2_json);
    assert_int_equal(slate__tok_attrs(tok, 2), SLATE__TOK_ATTR_NORMALIZED);
    assert_int_equal(slate__tok_attrs(tok, 16), 0);
    expect_llama2_normalized(tok);
    slate_tokenizer *back = round_trip(tok);
    expect_llama2_normalized(back);
    assert_int_equal(slate__tok_attrs(back, 13), SLATE__TOK_ATTR_NORMALIZED);
    slate_tokenizer_free(back);
    /* Chat template spans: the control token is found in the template's text ("\u2581</s>"
     * from " </s>") after a message ("Hi"), which is normalized on its own ("\u2581Hi"). */
    const char *chat = "Hi </s>";
    size_t span[2] = {0, 2};
    int32_t ids[16];
    size_t n = 0;
    assert_int_equal(slate__tok_encode_spans(tok, chat, strlen(chat), SLATE_ENCODE_PARSE_SPECIAL,
                                             span, 1, ids, 16, &n, NULL),
                     SLATE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 7);
    assert_int_equal(ids[1], 2);
    const char *forged = "Hi </s>";
    size_t all[2] = {0, strlen(forged)}; /* all message: "</s>" stays text */
    assert_int_equal(slate__tok_encode_spans(tok, forged, strlen(forged),
                                             SLATE_ENCODE_PARSE_SPECIAL, all, 1, ids, 16, &n,
                                             NULL),
                     SLATE_OK);
    assert_int_equal(n, 6);
    assert_int_equal(ids[1], 3);
    slate_tokenizer_free(tok);
}

/* A Metaspace file (prepend_scheme "first", split false) with a Replace normalizer, as
 * transformers converts Llama with legacy=false. The normalizer makes spaces U+2581 before
 * added tokens are found, so "a b" (spelled "a\u2581b") also matches a literal U+2581; the
 * Metaspace mark is added afterwards, only to the piece at offset 0 of the input. */
static void normalized_added_tokens_with_metaspace(void **st) {
    (void)st;
    static const char json[] =
        "{\"added_tokens\": ["
        "{\"id\": 2, \"content\": \"</s>\", \"special\": true, \"normalized\": false},"
        "{\"id\": 13, \"content\": \"a b\", \"special\": false, \"normalized\": true}],"
        " \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\":"
        " \"" SP "\"}, \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"" SP "\","
        " \"prepend_scheme\": \"first\", \"split\": false},"
        " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\", " SPM_VOCAB
        "}}";
    slate_tokenizer *tok = load(json);
    EXPECT_IDS(tok, "Hi a" SP "b", 0, 7, 3, 13); /* "Hi\u2581" "a\u2581b" -> "\u2581Hi\u2581" */
    EXPECT_IDS(tok, "Hi a b", 0, 7, 3, 13);
    EXPECT_IDS(tok, "a bHi", 0, 13, 8); /* "Hi" is not at offset 0: no mark */
    slate_tokenizer *back = round_trip(tok);
    EXPECT_IDS(back, "Hi a" SP "b", 0, 7, 3, 13);
    slate_tokenizer_free(back);
    slate_tokenizer_free(tok);
}

/* A Metaspace pre-tokenizer together with a Prepend normalizer (HF normalizers/prepend.rs,
 * pre_tokenizers/metaspace.rs): the normalizer runs first, on each stretch between added tokens,
 * and puts its mark in front of any non-empty stretch; Metaspace then turns the spaces into
 * marks and adds none of its own, since the text already starts with one. So the Prepend rules
 * decide, whatever the prepend_scheme: " Hi" is "\u2581\u2581Hi", and the stretch after an added
 * token is marked even with "first". */
static void metaspace_with_a_prepend_normalizer_follows_the_normalizer(void **st) {
    (void)st;
    static const char *const schemes[] = {"first", "always", "never"};
    for (size_t i = 0; i < 3; i++) {
        char json[2048];
        snprintf(json, sizeof json,
                 "{\"added_tokens\": [{\"id\": 16, \"content\": \"<x>\", \"special\": true,"
                 " \"normalized\": false}],"
                 " \"normalizer\": {\"type\": \"Prepend\", \"prepend\": \"" SP "\"},"
                 " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"" SP "\","
                 " \"prepend_scheme\": \"%s\", \"split\": false},"
                 " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true,"
                 " \"unk_token\": \"<unk>\", " SPM_VOCAB "}}",
                 schemes[i]);
        slate_tokenizer *tok = load(json);
        const uint32_t ps = SLATE_ENCODE_PARSE_SPECIAL;
        for (int trip = 0; trip < 2; trip++) {
            slate_tokenizer *t = trip ? round_trip(tok) : tok;
            EXPECT_IDS(t, "Hi", 0, 7);             /* "\u2581Hi" */
            EXPECT_IDS(t, " Hi", 0, 3, 7);         /* "\u2581\u2581Hi": the mark and the space */
            EXPECT_IDS(t, SP "Hi", 0, 3, 7);       /* a literal mark is no space either */
            EXPECT_IDS(t, "<x>Hi", ps, 16, 7);     /* <x> "\u2581Hi" */
            EXPECT_IDS(t, "Hi<x> Hi", ps, 7, 16, 3, 7);
            if (trip) slate_tokenizer_free(t);
        }
        slate_tokenizer_free(tok);
    }
}

/* Byte-level BPE with an NFC normalizer (as Qwen's files have), and no normalizer at all. The
 * GPT-2 alphabet spells the bytes of U+00E9 (C3 A9) as U+00C3 U+00A9. */
static void normalized_added_tokens_in_byte_level_files(void **st) {
    (void)st;
    char json[2048];
    static const char fmt[] =
        "{\"added_tokens\": ["
        "{\"id\": 6, \"content\": \"e\xCC\x81\", \"special\": false, \"normalized\": true},"
        "{\"id\": 7, \"content\": \"xy\", \"special\": false, \"normalized\": true},"
        "{\"id\": 8, \"content\": \"yz\", \"special\": false, \"normalized\": false}],"
        " \"normalizer\": %s,"
        " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\":"
        " false}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"\xC3\x83\": 0, \"\xC2\xA9\": 1,"
        " \"x\": 2, \"y\": 3, \"z\": 4, \"e\": 5}, \"merges\": []}}";
    snprintf(json, sizeof json, fmt, "{\"type\": \"NFC\"}");
    slate_tokenizer *tok = load(json);
    /* "e\u0301" is spelled "\u00e9" after NFC; the input is NFC'd before it is searched. */
    EXPECT_IDS(tok, "\xC3\xA9", 0, 6);
    EXPECT_IDS(tok, "e\xCC\x81", 0, 6);
    /* Non-normalized tokens go first: "xyz" is "x" + yz, not xy + "z". */
    EXPECT_IDS(tok, "xyz", 0, 2, 8);
    EXPECT_IDS(tok, "xyxy", 0, 7, 7);
    slate_tokenizer_free(tok);
    snprintf(json, sizeof json, fmt, "null");
    tok = load(json);
    EXPECT_IDS(tok, "xyz", 0, 2, 8);
    EXPECT_IDS(tok, "\xC3\xA9", 0, 0, 1); /* no normalizer: "e\u0301" only as itself */
    EXPECT_IDS(tok, "e\xCC\x81", 0, 6);
    slate_tokenizer_free(tok);
}

/* Where slate__tok_normalize does not model the file's normalizer, a normalized token that it
 * would affect is refused, never tokenized differently. */
static void unsupported_normalized_tokens_are_refused(void **st) {
    (void)st;
    static const char *const cases[][3] = {
        /* Metaspace without Replace: spaces stay spaces before added tokens are found. */
        {"null", "{\"type\": \"Metaspace\", \"replacement\": \"" SP "\", \"prepend_scheme\":"
                 " \"first\", \"split\": false}",
         "\"content\": \"a b\", \"normalized\": true"},
        {"null", "{\"type\": \"Metaspace\", \"replacement\": \"" SP "\", \"prepend_scheme\":"
                 " \"first\", \"split\": false}",
         "\"content\": \"<x>\", \"normalized\": true, \"rstrip\": true"},
        /* Metaspace and a Prepend normalizer. */
        {"{\"type\": \"Prepend\", \"prepend\": \"" SP "\"}",
         "{\"type\": \"Metaspace\", \"replacement\": \"" SP "\", \"prepend_scheme\": \"first\","
         " \"split\": false}",
         "\"content\": \"<x>\", \"normalized\": true"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[2048];
        snprintf(json, sizeof json,
                 "{\"added_tokens\": [{\"id\": 16, %s, \"special\": true}], \"normalizer\": %s,"
                 " \"pre_tokenizer\": %s, \"model\": {\"type\": \"BPE\", \"byte_fallback\": true,"
                 " \"unk_token\": \"<unk>\", " SPM_VOCAB "}}",
                 cases[i][2], cases[i][0], cases[i][1]);
        /* "a b" is token 13 in the vocabulary: give the added token its id. */
        if (strstr(cases[i][2], "a b")) memcpy(strstr(json, "16"), "13", 2);
        slate_tokenizer *tok = NULL;
        slate_error err;
        slate_status s = slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err);
        if (s != SLATE_E_UNSUPPORTED) fprintf(stderr, "case %zu: %s\n", i, err.message);
        assert_int_equal(s, SLATE_E_UNSUPPORTED);
        assert_null(tok);
        assert_non_null(strstr(err.message, "normalized: true"));
    }
}

/* Encoding with normalized tokens allocates (the normalized text of each stretch): every failed
 * allocation is E_NOMEM with nothing leaked, and the call then succeeds with the same ids. */
static void normalized_encode_fails_cleanly_at_every_allocation(void **st) {
    (void)st;
    slate_tokenizer *tok = load(k_llama2_json);
    const char *text = "Hi<x> </s>a b";
    long long live = slate__alloc_live_bytes();
    int n;
    for (n = 1; n < 100; n++) {
        int32_t ids[32];
        size_t n_ids = 0;
        slate__alloc_fail_after(n);
        slate_status s = slate_tokenizer_encode(tok, text, strlen(text), SLATE_ENCODE_PARSE_SPECIAL,
                                                ids, 32, &n_ids, NULL);
        slate__alloc_fail_after(0);
        assert_int_equal(slate__alloc_live_bytes(), live);
        if (s == SLATE_OK) {
            /* "\u2581Hi" <x> "\u2581" "\u2581</s>" "a\u2581b": 7 16 3 2 14 3 15 */
            assert_int_equal(n_ids, 7);
            assert_int_equal(ids[3], 2);
            break;
        }
        assert_int_equal(s, SLATE_E_NOMEM);
    }
    assert_true(n > 1 && n < 100);
    slate_tokenizer_free(tok);
}

/* The shipped Llama 3 and Qwen3 files mark every added token normalized: false, so nothing
 * about them changes. */
static void shipped_files_have_no_normalized_tokens(void **st) {
    (void)st;
    static const char *const files[] = {"tokenizers/llama3/tokenizer.json",
                                        "tokenizers/qwen3/tokenizer.json"};
    int seen = 0;
    for (size_t f = 0; f < 2; f++) {
        slate_tokenizer *tok = tu_tok_load(files[f]);
        if (!tok) continue;
        seen++;
        for (int32_t id = 0; id < slate_tokenizer_n_vocab(tok); id++)
            assert_int_equal(slate__tok_attrs(tok, id) & SLATE__TOK_ATTR_NORMALIZED, 0);
        slate_tokenizer_free(tok);
    }
    if (!seen) skip();
}

/* ---- the decoder ---------------------------------------------------------------------------- */

/* A SentencePiece-style file with the given decoder. Ids: 3 "\u2581", 4 "\u2581\u2581Hello",
 * 5 "Hello", 6 <0x20>, 8 "\u2581Hello". */
static slate_tokenizer *decoder_json(const char *decoder, const char *pre_tokenizer,
                                     const char *normalizer) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
             " {\"id\": 1, \"content\": \"<s>\", \"special\": true}],"
             " \"normalizer\": %s, \"pre_tokenizer\": %s, \"decoder\": %s,"
             " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\","
             " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"" SP "\": 3, \"" SP SP
             "Hello\": 4, \"Hello\": 5, \"<0x20>\": 6, \"<0x41>\": 7, \"" SP "Hello\": 8},"
             " \"merges\": []}}",
             normalizer, pre_tokenizer, decoder);
    return load(json);
}

/* decode(ids) with and without special tokens equals want (NULL: the same as without), and the
 * streaming detokenizer (which shows no special tokens) gives the same text. */
static void expect_text(const slate_tokenizer *tok, const int32_t *ids, size_t n,
                        const char *want, const char *want_special) {
    char buf[64];
    size_t len = 0;
    assert_int_equal(slate_tokenizer_decode(tok, ids, n, false, buf, sizeof buf, &len, NULL),
                     SLATE_OK);
    if (len != strlen(want) || memcmp(buf, want, len) != 0)
        fprintf(stderr, "decoded \"%.*s\", wanted \"%s\"\n", (int)len, buf, want);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(buf, want, len);
    if (want_special) {
        assert_int_equal(slate_tokenizer_decode(tok, ids, n, true, buf, sizeof buf, &len, NULL),
                         SLATE_OK);
        assert_int_equal(len, strlen(want_special));
        assert_memory_equal(buf, want_special, len);
    }
    slate_detok *d = NULL;
    assert_int_equal(slate_detok_create(tok, &d, NULL), SLATE_OK);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t got = 0;
        assert_int_equal(slate_detok_push(d, ids[i], buf + total, sizeof buf - total, &got, NULL),
                         SLATE_OK);
        total += got;
    }
    size_t got = 0;
    assert_int_equal(slate_detok_flush(d, buf + total, sizeof buf - total, &got, NULL), SLATE_OK);
    total += got;
    assert_int_equal(total, strlen(want));
    assert_memory_equal(buf, want, total);
    slate_detok_free(d);
}
#define TEXT(tok, want, want_special, ...)                                                        \
    do {                                                                                           \
        const int32_t ids_[] = {__VA_ARGS__};                                                      \
        expect_text(tok, ids_, sizeof ids_ / sizeof ids_[0], want, want_special);                  \
    } while (0)

static const char k_prepend_replace[] =
    "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"" SP
    "\"}, {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" SP "\"}]}";
static const char k_metaspace_first[] = "{\"type\": \"Metaspace\", \"replacement\": \"" SP
                                        "\", \"prepend_scheme\": \"first\", \"split\": false}";

/* Llama 2's decoder: Replace("\u2581", " "), ByteFallback, Fuse, Strip(" ", 1, 0). The Strip
 * runs on the fused text, so it takes one space from the start of the output whichever token
 * gave it, a byte token <0x20> too (decoders/strip.rs, fuse.rs). */
static void strip_decoder_strips_one_space_from_the_output(void **st) {
    (void)st;
    static const char dec[] =
        "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\":"
        " \"" SP "\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
        " {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}";
    slate_tokenizer *tok = decoder_json(dec, "null", k_prepend_replace);
    TEXT(tok, "Hello", NULL, 6, 5);             /* " " "Hello" -> " Hello" -> "Hello" */
    TEXT(tok, " Hello", NULL, 4);               /* "  Hello" -> " Hello" */
    TEXT(tok, " Hello", NULL, 3, 8);            /* "  Hello" -> " Hello" */
    TEXT(tok, "Hello", "<s> Hello", 1, 8);      /* with <s> shown nothing starts with a space */
    TEXT(tok, "Hello Hello", NULL, 8, 8);
    slate_tokenizer *back = round_trip(tok);
    TEXT(back, "Hello", NULL, 6, 5);
    slate_tokenizer_free(back);
    slate_tokenizer_free(tok);
    /* The same with a Metaspace pre-tokenizer (transformers' legacy=false Llama files). */
    tok = decoder_json(dec, k_metaspace_first, "null");
    TEXT(tok, "Hello", NULL, 6, 5);
    slate_tokenizer_free(tok);
}

/* HF's Metaspace decoder (decoders/metaspace.rs decode_chain): in the first token every mark
 * is dropped (not just one), in the others each becomes a space; prepend_scheme "never" (or
 * add_prefix_space false in older files) keeps them all as spaces. */
static void metaspace_decoder_drops_every_mark_of_the_first_token(void **st) {
    (void)st;
    static const char *const prepending[] = {
        "{\"type\": \"Metaspace\", \"replacement\": \"" SP "\", \"prepend_scheme\": \"first\","
        " \"split\": false}",
        "{\"type\": \"Metaspace\", \"replacement\": \"" SP "\", \"prepend_scheme\": \"always\","
        " \"split\": true}",
        "{\"type\": \"Metaspace\", \"replacement\": \"" SP "\", \"add_prefix_space\": true}",
    };
    for (size_t i = 0; i < 3; i++) {
        slate_tokenizer *tok = decoder_json(prepending[i], k_metaspace_first, "null");
        TEXT(tok, "Hello", NULL, 4);                /* "\u2581\u2581Hello" first: "Hello" */
        TEXT(tok, " Hello", NULL, 3, 8);            /* "\u2581" first gives "" */
        TEXT(tok, "Hello  Hello", NULL, 8, 4);      /* not first: both marks are spaces */
        TEXT(tok, "Hello", "<s> Hello", 1, 8);      /* <s> shown is the first token */
        if (i == 0) {
            slate_tokenizer *back = round_trip(tok);
            TEXT(back, "Hello", NULL, 4);
            slate_tokenizer_free(back);
        }
        slate_tokenizer_free(tok);
    }
    static const char *const keeping[] = {
        "{\"type\": \"Metaspace\", \"replacement\": \"" SP "\", \"prepend_scheme\": \"never\","
        " \"split\": false}",
        "{\"type\": \"Metaspace\", \"replacement\": \"" SP "\", \"add_prefix_space\": false}",
        /* Gemma-like: no Strip, nothing stripped. */
        "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\":"
        " \"" SP "\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]}",
    };
    for (size_t i = 0; i < 3; i++) {
        /* A Prepend normalizer, so that the encoder does prefix: only the decoder decides. */
        slate_tokenizer *tok = decoder_json(keeping[i], "null", k_prepend_replace);
        TEXT(tok, " Hello", NULL, 8);
        TEXT(tok, "  Hello", NULL, 4);
        slate_tokenizer_free(tok);
    }
}

/* Added tokens go through the decoder like any other token (HF tokenizers, tokenizer/mod.rs
 * decode: the decoder gets every token's string, special ones unless skipped), so a Replace or
 * Metaspace decoder makes their U+2581 spaces too, and Strip / Metaspace's first-token rule apply
 * to them. The string of a normalized: true token is its normalized spelling (tokenizers 0.23,
 * AddedVocabulary::simple_id_to_token): "a b" is "\u2581a\u2581b" under Prepend + Replace and
 * "a\u2581b" under Replace alone. Ids: 4 "Hello", 5 "\u2581Hello", 6 "\u2581<x>" (user-defined),
 * 7 "<y>\u2581" (control), 8 "a b" (user-defined, normalized), 9 "c d" (user-defined, not
 * normalized: its space is no mark). */
static slate_tokenizer *added_json(const char *decoder, const char *pre_tokenizer,
                                   const char *normalizer) {
    char json[4096];
    snprintf(json, sizeof json,
             "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
             " {\"id\": 1, \"content\": \"<s>\", \"special\": true},"
             " {\"id\": 6, \"content\": \"" SP "<x>\", \"special\": false, \"normalized\": false},"
             " {\"id\": 7, \"content\": \"<y>" SP "\", \"special\": true, \"normalized\": false},"
             " {\"id\": 8, \"content\": \"a b\", \"special\": false, \"normalized\": true},"
             " {\"id\": 9, \"content\": \"c d\", \"special\": false, \"normalized\": false}],"
             " \"normalizer\": %s, \"pre_tokenizer\": %s, \"decoder\": %s,"
             " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\","
             " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"" SP "\": 3, \"Hello\": 4,"
             " \"" SP "Hello\": 5, \"" SP "<x>\": 6, \"<y>" SP "\": 7, \"a b\": 8, \"c d\": 9},"
             " \"merges\": []}}",
             normalizer, pre_tokenizer, decoder);
    return load(json);
}

static void added_tokens_go_through_the_decoder(void **st) {
    (void)st;
    static const char llama2_dec[] =
        "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\":"
        " \"" SP "\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
        " {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}";
    slate_tokenizer *tok = added_json(llama2_dec, "null", k_prepend_replace);
    for (int trip = 0; trip < 2; trip++) {
        slate_tokenizer *t = trip ? round_trip(tok) : tok;
        TEXT(t, "Hello <x>", NULL, 4, 6);        /* "Hello" " <x>" */
        TEXT(t, "<x>", NULL, 6);                 /* " <x>": Strip takes its space */
        TEXT(t, "Hello", "<y> Hello", 7, 4);     /* shown: "<y> " "Hello" */
        TEXT(t, "Hello a b", NULL, 4, 8);        /* "\u2581a\u2581b": " a b" */
        TEXT(t, "a b", NULL, 8);                 /* " a b" stripped */
        TEXT(t, "Helloc d", NULL, 4, 9);         /* "c d" as it is */
        if (trip) slate_tokenizer_free(t);
    }
    slate_tokenizer_free(tok);
    /* A Metaspace decoder: the first token loses its marks, an added one too, but not the
     * literal space of "c d". */
    tok = added_json(k_metaspace_first, k_metaspace_first,
                     "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" SP
                     "\"}");
    for (int trip = 0; trip < 2; trip++) {
        slate_tokenizer *t = trip ? round_trip(tok) : tok;
        TEXT(t, "<x>", NULL, 6);                 /* "\u2581<x>" first: "<x>" */
        TEXT(t, "Hello <x>", NULL, 5, 6);
        TEXT(t, "<x>", "<s> <x>", 1, 6);         /* <s> shown is the first token */
        TEXT(t, "c d", NULL, 9);
        TEXT(t, "ab", NULL, 8);                  /* "a\u2581b" first: its mark goes */
        TEXT(t, "Helloa b", NULL, 5, 8);
        TEXT(t, "Hello", "<y> Hello", 7, 5);
        if (trip) slate_tokenizer_free(t);
    }
    slate_tokenizer_free(tok);
    /* No decoder: sentencepiece's and llama.cpp's rule, added tokens decode as they are. */
    tok = added_json("null", "null", k_prepend_replace);
    TEXT(tok, "Hello" SP "<x>", NULL, 4, 6);
    TEXT(tok, "Helloa b", NULL, 4, 8);
    slate_tokenizer_free(tok);
}

/* The shape of Gemma's tokenizer.json (Gemma 1, 2 and 3): SentencePiece-style BPE with
 * byte_fallback, the normalizer Replace(' ' -> U+2581) alone (no Prepend: no dummy prefix),
 * pre_tokenizer null, the decoder Replace(U+2581 -> ' '), ByteFallback, Fuse (no Strip), and
 * added control tokens <start_of_turn> / <end_of_turn>. A hand-made vocabulary; the expected ids
 * follow HF tokenizers' BPE (models/bpe/word.rs merge_all): the whole normalized text is one
 * word (no pre-tokenizer), split into characters, and the adjacent pair of lowest merge rank is
 * merged until none is left; a character with no token takes its <0xXX> byte tokens, or one
 * <unk> when they are not all there (byte_fallback). Merge ranks: 1 "H e", 2 "l l", 3 "ll o",
 * 4 "He llo", 5 "\u2581 w", 6 "o r", 7 "\u2581w or", 8 "l d", 9 "\u2581wor ld", 10 "\u2581 \u2581".
 */
static const char k_gemma_json[] =
    "{\"version\": \"1.0\", \"added_tokens\": ["
    "{\"id\": 0, \"content\": \"<pad>\", \"special\": true, \"normalized\": false},"
    "{\"id\": 1, \"content\": \"<eos>\", \"special\": true, \"normalized\": false},"
    "{\"id\": 2, \"content\": \"<bos>\", \"special\": true, \"normalized\": false},"
    "{\"id\": 3, \"content\": \"<unk>\", \"special\": true, \"normalized\": false},"
    "{\"id\": 4, \"content\": \"<start_of_turn>\", \"special\": true, \"normalized\": false},"
    "{\"id\": 5, \"content\": \"<end_of_turn>\", \"special\": true, \"normalized\": false}],"
    " \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \""
    SP "\"}, \"pre_tokenizer\": null,"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\":"
    " {\"id\": \"<bos>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}],"
    " \"pair\": [], \"special_tokens\": {\"<bos>\": {\"id\": \"<bos>\", \"ids\": [2],"
    " \"tokens\": [\"<bos>\"]}}},"
    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\":"
    " {\"String\": \"" SP "\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"},"
    " {\"type\": \"Fuse\"}]},"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\","
    " \"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false,"
    " \"byte_fallback\": true, \"ignore_merges\": false, \"vocab\": {\"<pad>\": 0, \"<eos>\": 1,"
    " \"<bos>\": 2, \"<unk>\": 3, \"<start_of_turn>\": 4, \"<end_of_turn>\": 5, \"<0xE2>\": 6,"
    " \"<0x82>\": 7, \"<0xAC>\": 8, \"" SP "\": 9, \"H\": 10, \"e\": 11, \"l\": 12, \"o\": 13,"
    " \"w\": 14, \"r\": 15, \"d\": 16, \"He\": 17, \"ll\": 18, \"llo\": 19, \"Hello\": 20,"
    " \"" SP "w\": 21, \"or\": 22, \"" SP "wor\": 23, \"ld\": 24, \"" SP "world\": 25,"
    " \"" SP SP "\": 26},"
    " \"merges\": [\"H e\", \"l l\", \"ll o\", \"He llo\", \"" SP " w\", \"o r\", \"" SP
    "w or\", \"l d\", \"" SP "wor ld\", \"" SP " " SP "\"]}}";

static void expect_gemma(const slate_tokenizer *tok) {
    const uint32_t ps = SLATE_ENCODE_PARSE_SPECIAL;
    EXPECT_IDS(tok, "Hello world", 0, 20, 25);     /* "Hello\u2581world": no dummy prefix */
    EXPECT_IDS(tok, " Hello", 0, 9, 20);           /* "\u2581Hello": no "\u2581 H" merge */
    EXPECT_IDS(tok, "Hello  world", 0, 20, 9, 25); /* "\u2581 w" (5) before "\u2581 \u2581" (10) */
    EXPECT_IDS(tok, "   ", 0, 26, 9);              /* "\u2581\u2581" then the third */
    EXPECT_IDS(tok, "\xE2\x82\xAC", 0, 6, 7, 8);   /* U+20AC: its three byte tokens */
    EXPECT_IDS(tok, "Hellox", 0, 20, 3);           /* x: no token, no <0x78>: one <unk> */
    EXPECT_IDS(tok, "<start_of_turn>Hello world<end_of_turn>", ps, 4, 20, 25, 5);
    TEXT(tok, "Hello world", NULL, 20, 25);
    TEXT(tok, " Hello", NULL, 9, 20);              /* no Strip: the leading space stays */
    TEXT(tok, "Hello  world", NULL, 20, 26, 14, 22, 24);
    TEXT(tok, "\xE2\x82\xAC", NULL, 6, 7, 8);
    TEXT(tok, "Hello", "<start_of_turn>Hello", 4, 20);
}

/* Gemma's tokenizer_config.json: <bos> added, <eos> its end. */
static const char k_gemma_config[] =
    "{\"add_bos_token\": true, \"add_eos_token\": false, \"bos_token\": \"<bos>\","
    " \"eos_token\": \"<eos>\", \"pad_token\": \"<pad>\", \"unk_token\": \"<unk>\"}";

static void gemma_shaped_tokenizer_json_encodes_and_decodes_as_hf(void **st) {
    (void)st;
    slate_tokenizer *tok = NULL;
    slate_error err;
    assert_int_equal(slate__tok_load_hf_mem(k_gemma_json, strlen(k_gemma_json), k_gemma_config,
                                            strlen(k_gemma_config), &tok, &err),
                     SLATE_OK);
    expect_gemma(tok);
    assert_int_equal(slate_tokenizer_bos(tok), 2);
    assert_int_equal(slate_tokenizer_eos(tok), 1);
    EXPECT_IDS(tok, "Hello world", SLATE_ENCODE_ADD_BOS, 2, 20, 25); /* <bos>, no prefix */
    slate_tokenizer *back = round_trip(tok);
    expect_gemma(back);
    slate_tokenizer_free(back);
    slate_tokenizer_free(tok);
}

/* A Strip decoder we would have to guess at is refused. */
static void unsupported_strip_decoders_are_refused(void **st) {
    (void)st;
    static const char *const decs[] = {
        "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, {\"type\": \"Strip\","
        " \"content\": \" \", \"start\": 2, \"stop\": 0}]}",
        "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, {\"type\": \"Strip\","
        " \"content\": \" \", \"start\": 1, \"stop\": 1}]}",
        "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Strip\", \"content\": \" \","
        " \"start\": 1, \"stop\": 0}, {\"type\": \"Fuse\"}]}",
    };
    for (size_t i = 0; i < 3; i++) {
        char json[2048];
        snprintf(json, sizeof json,
                 "{\"normalizer\": %s, \"decoder\": %s, \"model\": {\"type\": \"BPE\","
                 " \"byte_fallback\": true, \"vocab\": {\"" SP "\": 0}, \"merges\": []}}",
                 k_prepend_replace, decs[i]);
        slate_tokenizer *tok = NULL;
        slate_error err;
        assert_int_equal(slate__tok_load_hf_mem(json, strlen(json), NULL, 0, &tok, &err),
                         SLATE_E_UNSUPPORTED);
        assert_null(tok);
        assert_non_null(strstr(err.message, "Strip"));
    }
}

/* Phi-4-mini's tokenizer.json shape: byte-level BPE whose pre_tokenizer is a Sequence of a Split
 * (behavior Isolated) with tiktoken's o200k regex (case-insensitive contractions (?i:'s|...),
 * upper/lower-case runs with \p{Lu}/\p{Lt}/\p{Lm}/\p{Lo}/\p{M}, digits in threes, punctuation
 * keeping a trailing newline or slash) and a ByteLevel with use_regex false (no second split).
 * Vocabulary: GPT-2 byte spellings (U+0120 for a space, U+010A for a newline, 0xCC is U+00CC,
 * 0x81 is U+0123) of the characters used, then 13 merges placed so that each would cross a
 * piece boundary of a wrong split (GPT-2's regex, or none). Expected ids by hand: the split
 * by the regex's alternatives, then the merges by rank within each piece. */
static const char k_o200k_regex[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

#define G_SP "\xC4\xA0" /* GPT-2's spelling of byte 0x20 */
#define G_NL "\xC4\x8A" /* of 0x0A */
#define G_CC "\xC3\x8C" /* of 0xCC */
#define G_81 "\xC4\xA3" /* of 0x81 */

static char *o200k_json(void) {
    static const char *const singles[] = {"H", "E", "L", "O", "'", "S", G_SP, "w", "o", "r", "l",
                                          "d", "e", "C", "a", "f", G_CC, G_81, "1", "2", "3",
                                          "4", "5", "x", "!", G_NL, "b", "W", "t", "h", "y", "R"};
    static const char *const merges[][2] = {
        {"'", "S"},     {"O", "'S"},    {"o", "W"},    {"3", "4"},   {"e", G_CC},
        {"e" G_CC, G_81}, {"!", G_NL},  {G_NL, G_NL},  {G_SP, G_SP}, {"'", "R"},
        {"'R", "E"},    {"y", "'RE"},   {G_SP, "b"}};
    cJSON *j = cJSON_CreateObject();
    cJSON_AddArrayToObject(j, "added_tokens");
    cJSON_AddNullToObject(j, "normalizer");
    cJSON *pt = cJSON_AddObjectToObject(j, "pre_tokenizer");
    cJSON_AddStringToObject(pt, "type", "Sequence");
    cJSON *list = cJSON_AddArrayToObject(pt, "pretokenizers");
    cJSON *split = cJSON_CreateObject();
    cJSON_AddStringToObject(split, "type", "Split");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(split, "pattern"), "Regex", k_o200k_regex);
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddFalseToObject(split, "invert");
    cJSON_AddItemToArray(list, split);
    cJSON *bl = cJSON_CreateObject();
    cJSON_AddStringToObject(bl, "type", "ByteLevel");
    cJSON_AddFalseToObject(bl, "add_prefix_space");
    cJSON_AddTrueToObject(bl, "trim_offsets");
    cJSON_AddFalseToObject(bl, "use_regex");
    cJSON_AddItemToArray(list, bl);
    cJSON *dec = cJSON_AddObjectToObject(j, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON *model = cJSON_AddObjectToObject(j, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    cJSON *ml = cJSON_AddArrayToObject(model, "merges");
    int id = 0;
    for (size_t i = 0; i < sizeof singles / sizeof *singles; i++)
        cJSON_AddNumberToObject(vocab, singles[i], id++);
    for (size_t i = 0; i < sizeof merges / sizeof *merges; i++) {
        char both[32], pair[40];
        snprintf(both, sizeof both, "%s%s", merges[i][0], merges[i][1]);
        snprintf(pair, sizeof pair, "%s %s", merges[i][0], merges[i][1]);
        cJSON_AddNumberToObject(vocab, both, id++); /* ids 32..44, in merge order */
        cJSON_AddItemToArray(ml, cJSON_CreateString(pair));
    }
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return text;
}

static void o200k_split_regex_in_a_sequence_with_byte_level(void **st) {
    (void)st;
    char *json = o200k_json();
    slate_tokenizer *tok = load(json);
    cJSON_free(json);
    for (int pass = 0; pass < 2; pass++) {
        /* "HELLO'S" (upper run + case-insensitive 's: "'" S merge, then O 'S) | " world".
         * GPT-2's regex: HELLO | ' | S | " world" = 0 1 2 2 3 4 5 6 ... */
        EXPECT_IDS(tok, "HELLO'S world", 0, 0, 1, 2, 2, 33, 6, 7, 8, 9, 10, 11);
        /* "they'RE": lower run + 'RE ("'" R, then 'R E, then y 'RE). */
        EXPECT_IDS(tok, "they'RE", 0, 28, 29, 12, 43);
        /* Camel case splits before the upper-case letter: "Hello" | "World" (no o W merge). */
        EXPECT_IDS(tok, "HelloWorld", 0, 0, 12, 10, 10, 8, 27, 8, 9, 10, 11);
        /* Digits in threes: "123" | "45" (no 3 4 merge). */
        EXPECT_IDS(tok, "12345", 0, 18, 19, 20, 21, 22);
        /* A combining mark (U+0301, bytes CC 81) stays in its word: e + CC, then + 81. */
        EXPECT_IDS(tok, "Cafe\xCC\x81", 0, 13, 14, 15, 37);
        /* Punctuation keeps its trailing newline: "x" | "!!\n" (! then !\n). */
        EXPECT_IDS(tok, "x!!\n", 0, 23, 24, 38);
        /* Newline runs: "a" | "\n\n" | "b". */
        EXPECT_IDS(tok, "a\n\nb", 0, 14, 39, 26);
        /* Spaces: the last one goes with the word: "a" | "  " | " b". */
        EXPECT_IDS(tok, "a   b", 0, 14, 40, 44);
        TEXT(tok, "HELLO'S world", NULL, 0, 1, 2, 2, 33, 6, 7, 8, 9, 10, 11);
        slate_tokenizer *back = round_trip(tok);
        slate_tokenizer_free(tok);
        tok = back; /* the second pass runs on the package's copy */
    }
    slate_tokenizer_free(tok);
}

/* ---- merge ranks: HF's BPE merges only listed pairs, lowest rank first ----------------------
 * Expected ids follow HF tokenizers' models/bpe (model.rs BpeBuilder::build collects the merges
 * into a map, so a pair listed twice has its last rank; word.rs merge_all pops the lowest rank,
 * then the leftmost position, and merges only pairs in that map). The score-based SentencePiece
 * algorithm gives other ids for every case below but the tie. */

/* A SentencePiece-style file (Replace normalizer, byte_fallback, no pre-tokenizer) with tokens
 * <unk> <s> </s> U+2581 then `vocab` (a JSON fragment "tok": id, ... from id 4) and `merges`
 * (a JSON array). */
static char *rank_json(const char *vocab, const char *merges) {
    static const char head[] =
        "{\"added_tokens\": [], \"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\":"
        " \" \"}, \"content\": \"" SP "\"}, \"pre_tokenizer\": null, \"model\": {\"type\": \"BPE\","
        " \"byte_fallback\": true, \"unk_token\": \"<unk>\", \"vocab\": {\"<unk>\": 0, \"<s>\": 1,"
        " \"</s>\": 2, \"" SP "\": 3, ";
    size_t n = sizeof head + strlen(vocab) + strlen(merges) + 32;
    char *j = malloc(n);
    snprintf(j, n, "%s%s}, \"merges\": %s}}", head, vocab, merges);
    return j;
}

static slate_tokenizer *load_ranks(const char *vocab, const char *merges) {
    char *j = rank_json(vocab, merges);
    slate_tokenizer *tok = load(j);
    free(j);
    return tok;
}

#define ABC "\"a\": 4, \"b\": 5, \"c\": 6, \"ab\": 7, \"bc\": 8, \"abc\": 9"

/* Each expectation on the tokenizer and on its copy from the package blob. */
#define EXPECT_BOTH(tok, text, ...)                                                                \
    do {                                                                                           \
        slate_tokenizer *back_ = round_trip(tok);                                                  \
        EXPECT_IDS(tok, text, 0, __VA_ARGS__);                                                     \
        EXPECT_IDS(back_, text, 0, __VA_ARGS__);                                                   \
        slate_tokenizer_free(back_);                                                               \
    } while (0)

static void spm_json_merges_only_listed_pairs_by_rank(void **st) {
    (void)st;
    /* The repro: "a b" merges first; "ab c" is no merge, although "abc" is a token (and "a bc"
     * would make it): HF gives ab c, sentencepiece's scores abc. Both merge spellings. */
    const char *forms[] = {"[\"a b\", \"b c\", \"a bc\"]",
                           "[[\"a\", \"b\"], [\"b\", \"c\"], [\"a\", \"bc\"]]"};
    for (int f = 0; f < 2; f++) {
        slate_tokenizer *tok = load_ranks(ABC, forms[f]);
        EXPECT_BOTH(tok, "abc", 7, 6);
        EXPECT_BOTH(tok, "bc", 8);
        EXPECT_BOTH(tok, "abc abc", 7, 6, 3, 7, 6);
        slate_tokenizer_free(tok);
    }
    /* A token made by two merges merges at the rank of the pair at hand: "a bc" (rank 0) would
     * make abc, but a b (1) comes first, then c d (2) before ab c (3). Scores (abc: 0) give
     * abc d. */
    slate_tokenizer *tok =
        load_ranks(ABC ", \"d\": 10, \"cd\": 11",
                   "[\"a bc\", \"a b\", \"c d\", \"ab c\", \"b c\"]");
    EXPECT_BOTH(tok, "abcd", 7, 11);
    EXPECT_BOTH(tok, "bcd", 5, 11); /* c d (2) before b c (4) */
    slate_tokenizer_free(tok);
}

static void spm_json_vocab_pairs_without_a_merge_stay_apart(void **st) {
    (void)st;
    /* "ab" and "bc" are tokens, but only "b c" is a merge. */
    slate_tokenizer *tok = load_ranks(ABC, "[\"b c\"]");
    EXPECT_BOTH(tok, "abc", 4, 8);
    EXPECT_BOTH(tok, "ab", 4, 5);
    slate_tokenizer_free(tok);
    /* No merges at all: characters only. */
    tok = load_ranks(ABC, "[]");
    EXPECT_BOTH(tok, "abc", 4, 5, 6);
    slate_tokenizer_free(tok);
}

static void spm_json_duplicate_merges_take_the_last_rank(void **st) {
    (void)st;
    /* "a b" is listed at ranks 0 and 2: HF keeps 2, so "b c" (1) wins. */
    slate_tokenizer *tok = load_ranks(ABC, "[\"a b\", \"b c\", \"a b\"]");
    EXPECT_BOTH(tok, "abc", 4, 8);
    EXPECT_BOTH(tok, "ab", 7);
    slate_tokenizer_free(tok);
}

/* The same rule in a byte-level file (llama.cpp's GGUF keeps the first rank instead). */
static void byte_level_json_duplicate_merges_take_the_last_rank(void **st) {
    (void)st;
    static const char json[] =
        "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\":"
        " true}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3,"
        " \"bc\": 4}, \"merges\": [\"a b\", \"b c\", \"a b\", \"b c\"]}}";
    slate_tokenizer *tok = load(json);
    EXPECT_BOTH(tok, "abc", 3, 2); /* a b: 2, b c: 3 */
    slate_tokenizer_free(tok);
    static const char json2[] =
        "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\":"
        " true}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3,"
        " \"bc\": 4}, \"merges\": [\"a b\", \"b c\", \"a b\"]}}";
    tok = load(json2);
    EXPECT_BOTH(tok, "abc", 0, 4); /* a b: 2, b c: 1 */
    EXPECT_BOTH(tok, "ab", 3);
    slate_tokenizer_free(tok);
}

static void spm_json_equal_ranks_merge_leftmost_first(void **st) {
    (void)st;
    /* "aaa" is a token, but no merge makes it. */
    slate_tokenizer *tok = load_ranks("\"a\": 4, \"aa\": 5, \"aaa\": 6", "[\"a a\"]");
    EXPECT_BOTH(tok, "aaa", 5, 4); /* (a a) at 0 and at 1: the left one */
    EXPECT_BOTH(tok, "aaaa", 5, 5);
    EXPECT_BOTH(tok, "aaaaa", 5, 5, 4);
    slate_tokenizer_free(tok);
}

static void spm_json_merges_must_make_tokens(void **st) {
    (void)st;
    /* HF refuses such a file (MergeTokenOutOfVocabulary). */
    const char *bad[] = {"[\"a c\"]", "[\"a x\"]", "[[\"a\"]]"};
    for (int i = 0; i < 3; i++) {
        char *j = rank_json(ABC, bad[i]);
        slate_tokenizer *tok = NULL;
        slate_error err;
        assert_int_equal(slate__tok_load_hf_mem(j, strlen(j), NULL, 0, &tok, &err),
                         SLATE_E_FORMAT);
        assert_null(tok);
        assert_non_null(strstr(err.message, "merges[0]"));
        free(j);
    }
}

/* The word cache and word-by-word merging (spm.c) give what the whole text gives. Under ranks
 * only the tokens merges make decide whether words are apart: "a\u2581" is a token but no
 * merge makes it; with the merge "a \u2581" words are no longer apart, and the merge crosses
 * the word mark as in HF. */
static void spm_json_ranks_merge_word_by_word(void **st) {
    (void)st;
    slate_tokenizer *tok =
        load_ranks(ABC ", \"" SP "a\": 10, \"" SP "ab\": 11, \"a" SP "\": 12",
                   "[\"" SP " a\", \"b c\", \"" SP "a b\", \"a b\"]");
    assert_true(tok->spm_words_apart);
    /* "abc abc ...": 40 words (the cache starts at 32): a bc, then \u2581a bc each time. */
    char text[200] = "abc";
    for (int i = 1; i < 40; i++) strcat(text, " abc");
    int32_t ids[128];
    size_t n = 0;
    assert_int_equal(slate_tokenizer_encode(tok, text, strlen(text), 0, ids, 128, &n, NULL),
                     SLATE_OK);
    assert_int_equal(n, 80);
    for (size_t i = 0; i < n; i += 2) {
        assert_int_equal(ids[i], i == 0 ? 4 : 10);
        assert_int_equal(ids[i + 1], 8);
    }
    slate_tokenizer_free(tok);
    tok = load_ranks(ABC ", \"a" SP "\": 10", "[\"a " SP "\", \"a b\"]");
    assert_false(tok->spm_words_apart);
    EXPECT_BOTH(tok, "a b", 10, 5);
    EXPECT_BOTH(tok, "ab b", 7, 3, 5);
    slate_tokenizer_free(tok);
}

/* A package tokenizer with ranks sets flag bit 13, which builds before it refuse ("unknown flag
 * bits 0x2000") rather than merge by score; without the bit an SPM blob may not hold merges. */
static void spm_json_ranks_set_their_package_flag(void **st) {
    (void)st;
    slate_tokenizer *tok = load_ranks(ABC, "[\"a b\", \"b c\", \"a bc\"]");
    slate__buf b = {0};
    slate__tok_serialize(tok, &b);
    uint32_t flags = (uint32_t)b.data[12] | (uint32_t)b.data[13] << 8;
    assert_int_equal(flags & 0x2000, 0x2000);
    assert_int_equal(b.data[40], 3); /* n_merges */
    b.data[13] &= (uint8_t)~0x20;
    slate_tokenizer *back = NULL;
    slate_error err;
    assert_int_equal(slate__tok_deserialize(b.data, b.len, &back, &err), SLATE_E_FORMAT);
    assert_non_null(strstr(err.message, "n_merges 3"));
    assert_null(back);
    slate__buf_free(&b);
    slate_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(normalized_added_tokens_match_the_normalized_text),
        cmocka_unit_test(normalized_added_tokens_with_metaspace),
        cmocka_unit_test(metaspace_with_a_prepend_normalizer_follows_the_normalizer),
        cmocka_unit_test(normalized_added_tokens_in_byte_level_files),
        cmocka_unit_test(unsupported_normalized_tokens_are_refused),
        cmocka_unit_test(normalized_encode_fails_cleanly_at_every_allocation),
        cmocka_unit_test(shipped_files_have_no_normalized_tokens),
        cmocka_unit_test(strip_decoder_strips_one_space_from_the_output),
        cmocka_unit_test(metaspace_decoder_drops_every_mark_of_the_first_token),
        cmocka_unit_test(added_tokens_go_through_the_decoder),
        cmocka_unit_test(unsupported_strip_decoders_are_refused),
        cmocka_unit_test(gemma_shaped_tokenizer_json_encodes_and_decodes_as_hf),
        cmocka_unit_test(o200k_split_regex_in_a_sequence_with_byte_level),
        cmocka_unit_test(spm_json_merges_only_listed_pairs_by_rank),
        cmocka_unit_test(spm_json_vocab_pairs_without_a_merge_stay_apart),
        cmocka_unit_test(spm_json_duplicate_merges_take_the_last_rank),
        cmocka_unit_test(byte_level_json_duplicate_merges_take_the_last_rank),
        cmocka_unit_test(spm_json_equal_ranks_merge_leftmost_first),
        cmocka_unit_test(spm_json_merges_must_make_tokens),
        cmocka_unit_test(spm_json_ranks_merge_word_by_word),
        cmocka_unit_test(spm_json_ranks_set_their_package_flag),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
