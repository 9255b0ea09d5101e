/* test_tok_serialize.c - the STOK blob: deserialize(serialize(t)) encodes the vector inputs
 * exactly like t and serializes to the same bytes; broken blobs (magic, version, counts, ids,
 * types, NaN, regex, trailing bytes, truncation at every length) are refused with E_FORMAT (or
 * E_UNSUPPORTED for a future version), an offset and no leak; allocation failures are clean. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = 0;
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = '\0';
    fclose(f);
    return b;
}

/* Every vector input (and every flag combination) encodes and decodes the same way. */
static void assert_same_behaviour(const slate_tokenizer *a, const slate_tokenizer *b) {
    size_t len = 0;
    char *inp = slurp(tu_model_path("tokenizers/vectors/ggml-vocab-qwen2.gguf.inp"), &len);
    assert_non_null(inp);
    assert_int_equal(slate_tokenizer_n_vocab(a), slate_tokenizer_n_vocab(b));
    assert_int_equal(slate_tokenizer_bos(a), slate_tokenizer_bos(b));
    assert_int_equal(slate_tokenizer_eos(a), slate_tokenizer_eos(b));
    for (int32_t id = 0; id < slate_tokenizer_n_vocab(a); id++)
        assert_int_equal(slate_tokenizer_is_eog(a, id), slate_tokenizer_is_eog(b, id));
    static const char extra[] = "<|im_start|>x<|im_end|><s></s><|endoftext|> \xFF end"
                                "<|user|>\nHi<|end|>\n<|assistant|>\n";
    for (int pass = 0; pass < 2; pass++) {
        const char *p = pass == 0 ? inp : extra;
        size_t l = pass == 0 ? len : sizeof extra - 1;
        for (uint32_t flags = 0; flags < 4; flags++) {
            static int32_t ia[1 << 14], ib[1 << 14];
            size_t na = 0, nb = 0;
            assert_int_equal(slate_tokenizer_encode(a, p, l, flags, ia, 1 << 14, &na, NULL),
                             SLATE_OK);
            assert_int_equal(slate_tokenizer_encode(b, p, l, flags, ib, 1 << 14, &nb, NULL),
                             SLATE_OK);
            assert_int_equal(na, nb);
            assert_memory_equal(ia, ib, na * sizeof *ia);
            static char da[1 << 16], db[1 << 16];
            size_t la = 0, lb = 0;
            assert_int_equal(slate_tokenizer_decode(a, ia, na, flags & 1, da, sizeof da, &la, NULL),
                             SLATE_OK);
            assert_int_equal(slate_tokenizer_decode(b, ib, nb, flags & 1, db, sizeof db, &lb, NULL),
                             SLATE_OK);
            assert_int_equal(la, lb);
            assert_memory_equal(da, db, la);
        }
    }
    free(inp);
}

static void round_trip_keeps_behaviour_and_bytes(void **st) {
    (void)st;
    const char *vocabs[] = {"stories260K/tok512.bin",
                            "llama2c-vocab/tokenizer.bin",
                            "tokenizers/gguf-vocab/ggml-vocab-phi-3.gguf",
                            "tokenizers/gguf-vocab/ggml-vocab-falcon.gguf",
                            "tokenizers/qwen3/tokenizer.json",
                            "tokenizers/llama3/tokenizer.json"};
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        long long live = slate__alloc_live_bytes();
        slate_tokenizer *tok = tu_tok_load(vocabs[v]);
        if (!tok) continue;
        slate__buf b = {0};
        slate__tok_serialize(tok, &b);
        assert_false(b.failed);
        assert_memory_equal(b.data, "STOK\x01\x00\x00\x00", 8);
        slate_tokenizer *back = NULL;
        slate_error err;
        slate_status s = slate__tok_deserialize(b.data, b.len, &back, &err);
        if (s != SLATE_OK) fprintf(stderr, "%s: %s\n", vocabs[v], err.message);
        assert_int_equal(s, SLATE_OK);
        assert_same_behaviour(tok, back);
        slate__buf b2 = {0};
        slate__tok_serialize(back, &b2);
        assert_int_equal(b2.len, b.len);
        assert_memory_equal(b2.data, b.data, b.len);
        fprintf(stderr, "[serialize] %-48s %zu bytes\n", vocabs[v], b.len);
        slate__buf_free(&b);
        slate__buf_free(&b2);
        slate_tokenizer_free(back);
        slate_tokenizer_free(tok);
        assert_int_equal(slate__alloc_live_bytes(), live);
    }
}

/* ---- broken blobs ------------------------------------------------------------------------ */

typedef struct blob {
    uint8_t *data;
    size_t len;
} blob;

static blob tok512_blob(void) {
    slate_tokenizer *tok = tu_tok_load("stories260K/tok512.bin");
    blob r = {NULL, 0};
    if (!tok) return r;
    slate__buf b = {0};
    slate__tok_serialize(tok, &b);
    r.data = malloc(b.len);
    memcpy(r.data, b.data, b.len);
    r.len = b.len;
    slate__buf_free(&b);
    slate_tokenizer_free(tok);
    return r;
}

/* A tiny BPE tokenizer: bytes as tokens plus one merge, so merges and regexes are covered. */
static blob tiny_bpe_blob(void) {
    const char *tokens[258];
    char store[256][4];
    for (int b = 0; b < 256; b++) {
        size_t n = slate__tok_utf8_put(slate__tok_gpt2_byte_to_cp((uint8_t)b), store[b]);
        store[b][n] = '\0';
        tokens[b] = store[b];
    }
    tokens[256] = "ab";
    tokens[257] = "<|endoftext|>";
    uint8_t types[258];
    memset(types, SLATE__TOKT_NORMAL, sizeof types);
    types[257] = SLATE__TOKT_CONTROL;
    const char *merges[] = {"a b"};
    slate__tok_spec spec = {.kind = SLATE__TOK_BPE,
                            .n_tokens = 258,
                            .tokens = tokens,
                            .types = types,
                            .n_merges = 1,
                            .merges = merges,
                            .bos_id = -1,
                            .eos_id = 257,
                            .unk_id = -1,
                            .pad_id = -1,
                            .eot_id = -1};
    slate_tokenizer *tok = NULL;
    assert_int_equal(slate__tok_create(&spec, &tok, NULL), SLATE_OK);
    int32_t ids[4];
    size_t n = 0;
    assert_int_equal(slate_tokenizer_encode(tok, "ab", 2, 0, ids, 4, &n, NULL), SLATE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 256);
    slate__buf b = {0};
    slate__tok_serialize(tok, &b);
    blob r = {malloc(b.len), b.len};
    memcpy(r.data, b.data, b.len);
    slate__buf_free(&b);
    slate_tokenizer_free(tok);
    return r;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void expect_refused(const uint8_t *data, size_t len, slate_status want, const char *needle,
                           bool want_offset) {
    long long live = slate__alloc_live_bytes();
    slate_tokenizer *tok = (slate_tokenizer *)&live;
    slate_error err;
    slate__error_clear(&err);
    slate_status s = slate__tok_deserialize(data, len, &tok, &err);
    if (s != want || (needle && !strstr(err.message, needle)))
        fprintf(stderr, "got %s \"%s\", wanted %s with \"%s\"\n", slate_status_name(s), err.message,
                slate_status_name(want), needle ? needle : "");
    assert_int_equal(s, want);
    assert_null(tok);
    if (needle) assert_non_null(strstr(err.message, needle));
    if (want_offset) assert_true(err.has_offset);
    assert_int_equal(slate__alloc_live_bytes(), live);
}

static void broken_headers_are_refused_with_offsets(void **st) {
    (void)st;
    blob b = tok512_blob();
    if (!b.data) skip();
    uint8_t *c = malloc(b.len);
    struct {
        size_t at;
        uint32_t value;
        slate_status want;
        const char *needle;
    } cases[] = {
        {0, 0x4b4f5458, SLATE_E_FORMAT, "magic"}, /* "XTOK" */
        {4, 2, SLATE_E_UNSUPPORTED, "version 2"},
        {4, 0, SLATE_E_FORMAT, "version 0"},
        {8, 3, SLATE_E_FORMAT, "kind 3"},
        {12, 1u << 15, SLATE_E_FORMAT, "flag"}, /* the first unknown bit */
        /* decode_added_marks (bit 12) in a vocabulary that spells spaces plainly (bit 3) */
        {12, 0x100f, SLATE_E_FORMAT, "decode_added_marks"},
        {16, 512, SLATE_E_FORMAT, "bos_id 512"},
        {20, (uint32_t)-2, SLATE_E_FORMAT, "eos_id -2"},
        {36, 0, SLATE_E_FORMAT, "n_tokens 0"},
        {36, 0x7fffffff, SLATE_E_FORMAT, "n_tokens"},
        {36, 100000, SLATE_E_FORMAT, "truncated"}, /* more tokens than bytes */
        {40, 5, SLATE_E_FORMAT, "n_merges 5"},     /* SPM has none without bit 13 */
        {44, 1, SLATE_E_FORMAT, "n_pre 1"},
        {48, 0x7fc00000, SLATE_E_FORMAT, "NaN"},        /* token 0's score */
        {52, 0x00000009, SLATE_E_FORMAT, "type 9"},     /* token 0's type byte = 9 */
        {53, 0xffffffff, SLATE_E_FORMAT, "bytes long"}, /* token 0's length */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(c, b.data, b.len);
        if (cases[i].at == 52)
            c[52] = 9;
        else
            put_u32(c + cases[i].at, cases[i].value);
        expect_refused(c, b.len, cases[i].want, cases[i].needle, true);
    }
    /* Trailing garbage. */
    uint8_t *longer = malloc(b.len + 3);
    memcpy(longer, b.data, b.len);
    memset(longer + b.len, 0, 3);
    expect_refused(longer, b.len + 3, SLATE_E_FORMAT, "3 unexpected bytes", true);
    free(longer);
    expect_refused((const uint8_t *)"", 0, SLATE_E_FORMAT, "magic", true);
    slate_tokenizer *tok;
    assert_int_equal(slate__tok_deserialize(NULL, 5, &tok, NULL), SLATE_E_INVALID_ARG);
    free(c);
    free(b.data);
}

static void every_truncation_is_refused(void **st) {
    (void)st;
    blob blobs[2] = {tok512_blob(), tiny_bpe_blob()};
    for (int k = 0; k < 2; k++) {
        if (!blobs[k].data) continue;
        for (size_t len = 0; len < blobs[k].len; len++)
            expect_refused(blobs[k].data, len, SLATE_E_FORMAT, NULL, true);
        free(blobs[k].data);
    }
}

static void bad_merges_and_regexes_are_refused(void **st) {
    (void)st;
    blob b = tiny_bpe_blob();
    /* Layout: header 48, 258 token records, 1 merge (8), 1 regex (4 + len). */
    size_t tok_end = 48;
    for (int i = 0; i < 258; i++) {
        uint32_t len = (uint32_t)b.data[tok_end + 5] | (uint32_t)b.data[tok_end + 6] << 8;
        tok_end += 9 + len;
    }
    uint8_t *c = malloc(b.len);
    memcpy(c, b.data, b.len);
    put_u32(c + tok_end, 258);
    expect_refused(c, b.len, SLATE_E_FORMAT, "merge 0", true);
    memcpy(c, b.data, b.len);
    put_u32(c + tok_end + 4, 'a'); /* "a" + "a" = "aa" is no token */
    expect_refused(c, b.len, SLATE_E_FORMAT, "not in the vocabulary", false);
    /* A regex that does not compile: "(" in place of the first byte of the pattern. */
    memcpy(c, b.data, b.len);
    c[tok_end + 8 + 4] = '(';
    expect_refused(c, b.len, SLATE_E_FORMAT, "regex", false);
    memcpy(c, b.data, b.len);
    put_u32(c + tok_end + 8, 0); /* empty regex */
    expect_refused(c, b.len, SLATE_E_FORMAT, "regex 0", true);
    free(c);
    free(b.data);
}

/* Byte tokens 0..255, "<R>" (256, CONTROL, rstrip), "<L>" (257, USER_DEFINED, lstrip),
 * "<N>" (258, CONTROL, no attributes). */
static slate_tokenizer *strip_tok(void) {
    const char *tokens[259];
    char store[256][4];
    for (int b = 0; b < 256; b++) {
        size_t n = slate__tok_utf8_put(slate__tok_gpt2_byte_to_cp((uint8_t)b), store[b]);
        store[b][n] = '\0';
        tokens[b] = store[b];
    }
    tokens[256] = "<R>";
    tokens[257] = "<L>";
    tokens[258] = "<N>";
    uint8_t types[259], attrs[259] = {0};
    memset(types, SLATE__TOKT_NORMAL, sizeof types);
    types[256] = types[258] = SLATE__TOKT_CONTROL;
    types[257] = SLATE__TOKT_USER_DEFINED;
    attrs[256] = SLATE__TOK_ATTR_RSTRIP;
    attrs[257] = SLATE__TOK_ATTR_LSTRIP;
    slate__tok_spec spec = {.kind = SLATE__TOK_BPE, .n_tokens = 259, .tokens = tokens,
                            .types = types, .attrs = attrs, .bos_id = -1, .eos_id = 258,
                            .unk_id = -1, .pad_id = -1, .eot_id = -1};
    slate_tokenizer *tok = NULL;
    assert_int_equal(slate__tok_create(&spec, &tok, NULL), SLATE_OK);
    return tok;
}

static void expect_strips(const slate_tokenizer *tok) {
    int32_t ids[16];
    /* "<R> \n x <L>y": " \n " after <R> and " " before <L> give nothing. */
    size_t n = tu_encode(tok, "<R> \n x <L>y", 12, SLATE_ENCODE_PARSE_SPECIAL, ids, 16);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 256);
    assert_int_equal(ids[1], 'x');
    assert_int_equal(ids[2], 257);
    assert_int_equal(ids[3], 'y');
}

/* Strip attributes survive the blob (flag bit 8 + attribute table); a tokenizer without them
 * keeps the old layout (bit 8 clear, nothing after the regexes); broken tables are refused. */
static void strip_attributes_round_trip(void **st) {
    (void)st;
    long long live = slate__alloc_live_bytes();
    slate_tokenizer *tok = strip_tok();
    expect_strips(tok);
    slate__buf b = {0};
    slate__tok_serialize(tok, &b);
    assert_false(b.failed);
    uint32_t flags = (uint32_t)b.data[12] | (uint32_t)b.data[13] << 8;
    assert_int_equal(flags & 0x100, 0x100);
    /* The table ends the blob: count 2, then (256, rstrip), (257, lstrip). */
    const uint8_t table[] = {2, 0, 0, 0, 0, 1, 0, 0, 2, 1, 1, 0, 0, 1};
    assert_true(b.len > sizeof table);
    assert_memory_equal(b.data + b.len - sizeof table, table, sizeof table);
    slate_tokenizer *back = NULL;
    assert_int_equal(slate__tok_deserialize(b.data, b.len, &back, NULL), SLATE_OK);
    expect_strips(back);
    for (int32_t id = 0; id < 259; id++)
        assert_int_equal(slate__tok_attrs(back, id), slate__tok_attrs(tok, id));
    slate__buf b2 = {0};
    slate__tok_serialize(back, &b2);
    assert_int_equal(b2.len, b.len);
    assert_memory_equal(b2.data, b.data, b.len);
    slate_tokenizer_free(back);
    slate__buf_free(&b2);

    size_t t = b.len - sizeof table; /* offset of the table */
    uint8_t *c = malloc(b.len);
#define BREAK(stmt, needle)                                                                        \
    do {                                                                                           \
        memcpy(c, b.data, b.len);                                                                  \
        stmt;                                                                                      \
        expect_refused(c, b.len, SLATE_E_FORMAT, needle, true);                                   \
    } while (0)
    BREAK(put_u32(c + t, 0), "attribute table");
    BREAK(put_u32(c + t, 3), "attribute table"); /* more records than bytes */
    BREAK(c[t + 8] = 0, "attributes 0x0");
    BREAK(c[t + 8] = 8, "attributes 0x8");
    BREAK(put_u32(c + t + 9, 256), "ascending");
    BREAK(put_u32(c + t + 9, 259), "ascending");
    BREAK(put_u32(c + t + 4, 'x'), "type 1"); /* a NORMAL token cannot strip */
    BREAK(c[13] &= (uint8_t)~1u, "unexpected bytes"); /* the table without bit 8 */
#undef BREAK
    /* Without the table but with bit 8: truncated. */
    memcpy(c, b.data, b.len);
    expect_refused(c, t, SLATE_E_FORMAT, "attribute table", true);
    free(c);
    slate__buf_free(&b);
    slate_tokenizer_free(tok);

    /* No attributes: bit 8 clear, so the blob reads in builds older than the table. */
    slate_tokenizer *plain = tu_tok_load("stories260K/tok512.bin");
    if (plain) {
        slate__buf p = {0};
        slate__tok_serialize(plain, &p);
        assert_int_equal(p.data[13] & 1, 0);
        slate__buf_free(&p);
        slate_tokenizer_free(plain);
    }
    assert_int_equal(slate__alloc_live_bytes(), live);
}

static void allocation_failures_are_clean(void **st) {
    (void)st;
    blob b = tiny_bpe_blob();
    long long live = slate__alloc_live_bytes();
    int n;
    for (n = 1; n < 10000; n++) {
        slate_tokenizer *tok = NULL;
        slate__alloc_fail_after(n);
        slate_status s = slate__tok_deserialize(b.data, b.len, &tok, NULL);
        slate__alloc_fail_after(0);
        if (s == SLATE_OK) {
            slate_tokenizer_free(tok);
            break;
        }
        assert_int_equal(s, SLATE_E_NOMEM);
        assert_null(tok);
        assert_int_equal(slate__alloc_live_bytes(), live);
    }
    assert_true(n > 3 && n < 10000);
    /* Encoding under allocation failure: E_NOMEM, never a crash. */
    slate_tokenizer *tok = NULL;
    assert_int_equal(slate__tok_deserialize(b.data, b.len, &tok, NULL), SLATE_OK);
    for (n = 1; n < 100; n++) {
        int32_t ids[16];
        size_t k = 0;
        slate__alloc_fail_after(n);
        slate_status s = slate_tokenizer_encode(tok, "ab ab ab", 8, 0, ids, 16, &k, NULL);
        slate__alloc_fail_after(0);
        if (s == SLATE_OK) break;
        assert_int_equal(s, SLATE_E_NOMEM);
    }
    slate_tokenizer_free(tok);
    assert_int_equal(slate__alloc_live_bytes(), live);
    free(b.data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_keeps_behaviour_and_bytes),
        cmocka_unit_test(broken_headers_are_refused_with_offsets),
        cmocka_unit_test(every_truncation_is_refused),
        cmocka_unit_test(bad_merges_and_regexes_are_refused),
        cmocka_unit_test(strip_attributes_round_trip),
        cmocka_unit_test(allocation_failures_are_clean),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
