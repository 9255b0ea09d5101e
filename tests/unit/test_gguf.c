/* test_gguf.c - the GGUF reader: real files from ../shared/models (stories260K in four tensor
 * types, vocab-only GGUFs), a handcrafted tiny file and its broken variants (each refused with
 * the exact status, a message naming the culprit, and no leak), truncation at every byte, and
 * allocation fault injection. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/gguf.h"
#include "core/core.h"

/* ---- a generator for tiny GGUF files -------------------------------------------------------- */

/* Knobs that break one thing each; a zeroed spec gives the valid file:
 *   v3, 12 pairs (general.architecture "llama", general.alignment 32, test.u8 200, test.i16 -5,
 *   test.u64 5e9, test.i32 -7, test.f32 0.5, test.f64 2.25, test.bool true,
 *   test.tokens ["a", "bc", ""], test.scores [1.5, -2], test.bools [true, false]),
 *   2 tensors: "tok.weight" F32 [32, 2] at 0 (256 bytes), "blk.0.q" Q8_0 [32, 1] at 256
 *   (34 bytes), data byte i = (i * 7) & 0xff, the last tensor ending at the end of the file. */
typedef struct gspec {
    const char *magic;            /* NULL: "GGUF" */
    uint32_t version;             /* 0: 3 */
    uint64_t n_tensors, n_kv;     /* claimed counts; 0: the real ones */
    uint64_t arch_len;            /* claimed length of the architecture string; 0: real */
    uint64_t tokens_count;        /* claimed count of test.tokens; 0: real */
    uint64_t scores_count;        /* claimed count of test.scores; 0: real */
    uint32_t i32_vtype;           /* value type written for test.i32; 0: i32 */
    bool scores_nested;           /* test.scores written as an array of arrays */
    uint8_t bool_byte;            /* byte of test.bool; 0: 1 */
    const char *i32_key;          /* key written instead of "test.i32" */
    uint32_t alignment;           /* general.alignment; 0: 32 */
    bool no_alignment_key;        /* leave general.alignment out (default 32 applies) */
    const char *t1_name;          /* name of tensor 1; NULL: "blk.0.q" */
    bool t1_dims_set;             /* use t1_n_dims / t1_ne */
    uint32_t t1_n_dims;
    uint64_t t1_ne[5];
    bool t1_type_set;
    uint32_t t1_type;
    bool t1_offset_set;
    uint64_t t1_offset;
    bool t0_type_set;             /* use t0_type for "tok.weight" (its offset stays 0) */
    uint32_t t0_type;
} gspec;

#define DATA_BYTES 290

static void put_str(slate__buf *b, const char *s, uint64_t claimed) {
    size_t n = strlen(s);
    slate__buf_u64(b, claimed ? claimed : n);
    slate__buf_append(b, s, n);
}

static void put_key(slate__buf *b, const char *key, uint32_t type) {
    put_str(b, key, 0);
    slate__buf_u32(b, type);
}

static void put_u16(slate__buf *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    slate__buf_append(b, x, 2);
}

/* Builds the file into b (caller frees with slate__buf_free). */
static void build(const gspec *s, slate__buf *b) {
    memset(b, 0, sizeof *b);
    uint32_t align = s->alignment ? s->alignment : 32;
    uint64_t n_kv = s->no_alignment_key ? 11 : 12;
    slate__buf_append(b, s->magic ? s->magic : "GGUF", 4);
    slate__buf_u32(b, s->version ? s->version : 3);
    slate__buf_u64(b, s->n_tensors ? s->n_tensors : 2);
    slate__buf_u64(b, s->n_kv ? s->n_kv : n_kv);

    put_key(b, "general.architecture", SLATE__GGUF_STRING);
    put_str(b, "llama", s->arch_len);
    if (!s->no_alignment_key) {
        put_key(b, "general.alignment", SLATE__GGUF_U32);
        slate__buf_u32(b, align);
    }
    put_key(b, "test.u8", SLATE__GGUF_U8);
    slate__buf_append(b, "\xc8", 1); /* 200 */
    put_key(b, "test.i16", SLATE__GGUF_I16);
    put_u16(b, (uint16_t)-5);
    put_key(b, "test.u64", SLATE__GGUF_U64);
    slate__buf_u64(b, 5000000000ull);
    put_key(b, s->i32_key ? s->i32_key : "test.i32", s->i32_vtype ? s->i32_vtype : SLATE__GGUF_I32);
    slate__buf_i32(b, -7);
    put_key(b, "test.f32", SLATE__GGUF_F32);
    slate__buf_f32(b, 0.5f);
    put_key(b, "test.f64", SLATE__GGUF_F64);
    double f64 = 2.25;
    uint64_t f64_bits;
    memcpy(&f64_bits, &f64, 8);
    slate__buf_u64(b, f64_bits);
    put_key(b, "test.bool", SLATE__GGUF_BOOL);
    uint8_t bv = s->bool_byte ? s->bool_byte : 1;
    slate__buf_append(b, &bv, 1);
    put_key(b, "test.tokens", SLATE__GGUF_ARRAY);
    slate__buf_u32(b, SLATE__GGUF_STRING);
    slate__buf_u64(b, s->tokens_count ? s->tokens_count : 3);
    put_str(b, "a", 0);
    put_str(b, "bc", 0);
    put_str(b, "", 0);
    put_key(b, "test.scores", SLATE__GGUF_ARRAY);
    slate__buf_u32(b, s->scores_nested ? SLATE__GGUF_ARRAY : SLATE__GGUF_F32);
    slate__buf_u64(b, s->scores_count ? s->scores_count : 2);
    slate__buf_f32(b, 1.5f);
    slate__buf_f32(b, -2.0f);
    put_key(b, "test.bools", SLATE__GGUF_ARRAY);
    slate__buf_u32(b, SLATE__GGUF_BOOL);
    slate__buf_u64(b, 2);
    slate__buf_append(b, "\x01\x00", 2);

    put_str(b, "tok.weight", 0);
    slate__buf_u32(b, 2);
    slate__buf_u64(b, 32);
    slate__buf_u64(b, 2);
    slate__buf_u32(b, s->t0_type_set ? s->t0_type : SLATE__GGML_F32);
    slate__buf_u64(b, 0);

    put_str(b, s->t1_name ? s->t1_name : "blk.0.q", 0);
    uint32_t nd = s->t1_dims_set ? s->t1_n_dims : 2;
    slate__buf_u32(b, nd);
    for (uint32_t j = 0; j < nd && j < 5; j++)
        slate__buf_u64(b, s->t1_dims_set ? s->t1_ne[j] : (j == 0 ? 32 : 1));
    slate__buf_u32(b, s->t1_type_set ? s->t1_type : SLATE__GGML_Q8_0);
    slate__buf_u64(b, s->t1_offset_set ? s->t1_offset : 256);

    while (b->len % align) slate__buf_append(b, "", 1);
    for (int i = 0; i < DATA_BYTES; i++) {
        uint8_t x = (uint8_t)(i * 7);
        slate__buf_append(b, &x, 1);
    }
    assert_false(b->failed);
}

/* Opens a private copy of exactly `size` bytes (so ASan sees any read past the end). */
static slate_status open_copy(const uint8_t *data, size_t size, slate__gguf **g, slate_error *e,
                              uint8_t **copy) {
    *copy = malloc(size ? size : 1);
    assert_non_null(*copy);
    if (size) memcpy(*copy, data, size);
    return slate__gguf_open_mem(*copy, size, g, e);
}

/* ---- real files ------------------------------------------------------------------------------ */

typedef struct real_case {
    const char *file;
    int n_f32, n_f16, n_q4_0, n_q8_0; /* tensor counts per type (SOURCES.md) */
    uint32_t attn_q_type;
} real_case;

static const real_case real_cases[] = {
    {"stories260K/stories260K.gguf", 48, 0, 0, 0, SLATE__GGML_F32},
    {"stories260K/stories260K.ggml-org.gguf", 48, 0, 0, 0, SLATE__GGML_F32},
    {"stories260K/stories260K-f16.gguf", 11, 37, 0, 0, SLATE__GGML_F16},
    {"stories260K/stories260K-q8_0.gguf", 11, 5, 0, 32, SLATE__GGML_Q8_0},
    {"stories260K/stories260K-q4_0.gguf", 11, 5, 31, 1, SLATE__GGML_Q4_0},
};

static void real_stories260K_files_open_with_expected_types_and_shapes(void **st) {
    (void)st;
    for (size_t c = 0; c < sizeof real_cases / sizeof real_cases[0]; c++) {
        const real_case *rc = &real_cases[c];
        const char *path = tu_model_path(rc->file);
        if (!tu_exists(path)) {
            fprintf(stderr, "[skip] %s missing\n", path);
            continue;
        }
        long long live = slate__alloc_live_bytes();
        slate__gguf *g = NULL;
        slate_error e;
        slate_status s = slate__gguf_open(path, &g, &e);
        if (s) fprintf(stderr, "%s: %s\n", rc->file, e.message);
        assert_int_equal(s, SLATE_OK);
        assert_int_equal(slate__gguf_version(g), 3);
        assert_int_equal(slate__gguf_n_tensors(g), 48);
        int counts[4] = {0};
        for (int64_t i = 0; i < 48; i++) {
            const slate__gguf_tensor *t = slate__gguf_tensor_at(g, i);
            counts[t->type == SLATE__GGML_F32    ? 0
                   : t->type == SLATE__GGML_F16  ? 1
                   : t->type == SLATE__GGML_Q4_0 ? 2
                                                 : 3]++;
            assert_int_equal(t->file_offset % 32, 0);
            assert_ptr_equal(slate__gguf_find_tensor(g, t->name), t);
        }
        assert_int_equal(counts[0], rc->n_f32);
        assert_int_equal(counts[1], rc->n_f16);
        assert_int_equal(counts[2], rc->n_q4_0);
        assert_int_equal(counts[3], rc->n_q8_0);

        const slate__gguf_tensor *q = slate__gguf_find_tensor(g, "blk.0.attn_q.weight");
        assert_non_null(q);
        assert_int_equal(q->n_dims, 2);
        assert_int_equal(q->ne[0], 64);
        assert_int_equal(q->ne[1], 64);
        assert_int_equal(q->ne[2], 1);
        assert_int_equal(q->n_elements, 4096);
        assert_int_equal(q->type, rc->attn_q_type);
        uint64_t want = rc->attn_q_type == SLATE__GGML_F32    ? 4096 * 4
                        : rc->attn_q_type == SLATE__GGML_F16  ? 4096 * 2
                        : rc->attn_q_type == SLATE__GGML_Q8_0 ? 4096 / 32 * 34
                                                              : 4096 / 32 * 18;
        assert_int_equal(q->nbytes, want);
        const slate__gguf_tensor *down = slate__gguf_find_tensor(g, "blk.4.ffn_down.weight");
        assert_non_null(down);
        assert_int_equal(down->ne[0], 172);
        assert_int_equal(down->ne[1], 64);
        assert_null(slate__gguf_find_tensor(g, "blk.5.attn_q.weight"));

        const char *arch;
        uint64_t len;
        assert_true(slate__gguf_get_str(g, "general.architecture", &arch, &len));
        assert_int_equal(len, 5);
        assert_memory_equal(arch, "llama", 5);
        slate__gguf_vtype et;
        uint64_t n;
        assert_true(slate__gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n));
        assert_int_equal(et, SLATE__GGUF_STRING);
        assert_int_equal(n, 512);
        const char *tok;
        assert_true(slate__gguf_arr_str(g, "tokenizer.ggml.tokens", 0, &tok, &len));
        assert_int_equal(len, 5);
        assert_memory_equal(tok, "<unk>", 5);
        assert_true(slate__gguf_arr_str(g, "tokenizer.ggml.tokens", 3, &tok, &len));
        assert_int_equal(len, 6);
        assert_memory_equal(tok, "<0x00>", 6);
        assert_false(slate__gguf_arr_str(g, "tokenizer.ggml.tokens", 512, &tok, &len));
        double score;
        assert_true(slate__gguf_arr_num(g, "tokenizer.ggml.scores", 260, &score));
        assert_true(score == -1.0);
        uint32_t u;
        assert_true(slate__gguf_get_u32(g, "llama.embedding_length", &u));
        assert_int_equal(u, 64);
        assert_true(slate__gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &u));
        assert_int_equal(u, 1);
        float eps;
        assert_true(slate__gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps));
        assert_true(fabsf(eps - 1e-5f) < 1e-10f);
        slate__gguf_close(g);
        assert_int_equal(slate__alloc_live_bytes(), live);
    }
}

static void real_f32_embedding_matches_llama2c_checkpoint_bytes(void **st) {
    (void)st;
    char gpath[4096], bpath[4096]; /* tu_model_path reuses one buffer */
    snprintf(gpath, sizeof gpath, "%s", tu_model_path("stories260K/stories260K.gguf"));
    if (!tu_exists(gpath)) return;
    snprintf(bpath, sizeof bpath, "%s", tu_model_path("stories260K/stories260K.bin"));
    if (!tu_exists(bpath)) return;
    char *bin;
    size_t bin_len;
    assert_int_equal(slate__read_file(bpath, 2u << 20, &bin, &bin_len, NULL), SLATE_OK);
    slate__gguf *g;
    assert_int_equal(slate__gguf_open(gpath, &g, NULL), SLATE_OK);
    const slate__gguf_tensor *t = slate__gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->nbytes, 512 * 64 * 4);
    assert_true(bin_len >= 28 + t->nbytes);
    /* llama2.c: 7 int32 of header, then token_embedding [512][64] f32. */
    assert_memory_equal(t->data, bin + 28, t->nbytes);
    slate__gguf_close(g);
    slate__free(bin);
}

typedef struct vocab_case {
    const char *file;
    const char *arch, *model;
    uint64_t n_tokens, n_merges; /* 0 merges: key absent */
} vocab_case;

static const vocab_case vocab_cases[] = {
    {"tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf", "gpt2", "gpt2", 50257, 50000},
    {"tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf", "llama", "llama", 32000, 0},
    {"tokenizers/gguf-vocab/ggml-vocab-phi-3.gguf", "phi3", "llama", 32064, 0},
    {"tokenizers/gguf-vocab/ggml-vocab-falcon.gguf", "falcon", "gpt2", 65024, 64784},
};

static bool str_is(const char *s, uint64_t len, const char *want) {
    return len == strlen(want) && memcmp(s, want, len) == 0;
}

static void vocab_only_ggufs_open_with_no_tensors_and_indexed_tokens(void **st) {
    (void)st;
    for (size_t c = 0; c < sizeof vocab_cases / sizeof vocab_cases[0]; c++) {
        const vocab_case *vc = &vocab_cases[c];
        const char *path = tu_model_path(vc->file);
        if (!tu_exists(path)) {
            fprintf(stderr, "[skip] %s missing\n", path);
            continue;
        }
        long long live = slate__alloc_live_bytes();
        slate__gguf *g = NULL;
        slate_error e;
        slate_status s = slate__gguf_open(path, &g, &e);
        if (s) fprintf(stderr, "%s: %s\n", vc->file, e.message);
        assert_int_equal(s, SLATE_OK);
        assert_int_equal(slate__gguf_n_tensors(g), 0);
        assert_null(slate__gguf_tensor_at(g, 0));
        const char *v;
        uint64_t len, n;
        assert_true(slate__gguf_get_str(g, "general.architecture", &v, &len));
        if (!str_is(v, len, vc->arch)) fprintf(stderr, "%s: arch '%.*s'\n", vc->file, (int)len, v);
        assert_true(str_is(v, len, vc->arch));
        assert_true(slate__gguf_get_str(g, "tokenizer.ggml.model", &v, &len));
        assert_true(str_is(v, len, vc->model));
        slate__gguf_vtype et;
        assert_true(slate__gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n));
        assert_int_equal(n, vc->n_tokens);
        /* Every token is reachable by index, and the last one ends inside the file. */
        uint64_t total = 0;
        for (uint64_t i = 0; i < n; i++) {
            assert_true(slate__gguf_arr_str(g, "tokenizer.ggml.tokens", i, &v, &len));
            total += len;
        }
        assert_true(total > n);
        if (vc->n_merges) {
            assert_true(slate__gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n));
            assert_int_equal(et, SLATE__GGUF_STRING);
            assert_int_equal(n, vc->n_merges);
            assert_true(slate__gguf_arr_str(g, "tokenizer.ggml.merges", n - 1, &v, &len));
        } else {
            assert_int_equal(slate__gguf_find_key(g, "tokenizer.ggml.merges"), -1);
        }
        slate__gguf_close(g);
        assert_int_equal(slate__alloc_live_bytes(), live);
    }
}

/* ---- the handcrafted file --------------------------------------------------------------------- */

static void handcrafted_file_opens_and_getters_check_types(void **st) {
    (void)st;
    gspec spec = {0};
    slate__buf b;
    build(&spec, &b);
    long long live = slate__alloc_live_bytes();
    slate__gguf *g = NULL;
    slate_error e;
    assert_int_equal(slate__gguf_open_mem(b.data, b.len, &g, &e), SLATE_OK);
    assert_int_equal(slate__gguf_version(g), 3);
    assert_int_equal(slate__gguf_alignment(g), 32);
    assert_int_equal(slate__gguf_n_kv(g), 12);
    assert_int_equal(slate__gguf_data_offset(g) % 32, 0);
    assert_int_equal(slate__gguf_data_offset(g) + DATA_BYTES, b.len);
    for (int64_t i = 0; i < 12; i++) {
        const char *k = slate__gguf_key_at(g, i);
        assert_non_null(k);
        assert_int_equal(slate__gguf_find_key(g, k), i);
    }
    assert_null(slate__gguf_key_at(g, 12));
    assert_null(slate__gguf_key_at(g, -1));
    assert_int_equal(slate__gguf_key_type(g, 12), SLATE__GGUF_NONE);
    assert_int_equal(slate__gguf_key_type(g, slate__gguf_find_key(g, "test.tokens")),
                     SLATE__GGUF_ARRAY);
    assert_int_equal(slate__gguf_find_key(g, "test.nope"), -1);
    assert_int_equal(slate__gguf_find_key(g, "test"), -1);

    uint32_t u;
    int32_t i;
    float f;
    bool bo;
    assert_true(slate__gguf_get_u32(g, "test.u8", &u));
    assert_int_equal(u, 200);
    assert_true(slate__gguf_get_i32(g, "test.i16", &i));
    assert_int_equal(i, -5);
    assert_false(slate__gguf_get_u32(g, "test.i16", &u));  /* negative */
    assert_false(slate__gguf_get_u32(g, "test.u64", &u));  /* 5e9 > u32 */
    assert_false(slate__gguf_get_i32(g, "test.u64", &i));
    f = -1;
    /* float keys: f32 only, as llama.cpp's loader (an integer or an f64 is "wrong type") */
    assert_false(slate__gguf_get_f32(g, "test.u64", &f));
    assert_false(slate__gguf_get_f32(g, "test.i32", &f));
    assert_false(slate__gguf_get_f32(g, "test.f64", &f));
    assert_false(slate__gguf_get_f32(g, "test.bool", &f));
    assert_true(f == -1); /* untouched */
    char v[64]; /* what the importer's refusal names */
    assert_string_equal(slate__gguf_value_str(g, "test.f64", v, sizeof v), "2.25 (f64)");
    assert_string_equal(slate__gguf_value_str(g, "test.u64", v, sizeof v), "5000000000 (u64)");
    assert_true(slate__gguf_get_i32(g, "test.i32", &i));
    assert_int_equal(i, -7);
    assert_true(slate__gguf_get_f32(g, "test.f32", &f));
    assert_true(f == 0.5f);
    assert_false(slate__gguf_get_u32(g, "test.f32", &u)); /* a float is not an integer */
    assert_true(slate__gguf_get_bool(g, "test.bool", &bo));
    assert_true(bo);
    assert_false(slate__gguf_get_u32(g, "test.bool", &u));
    assert_false(slate__gguf_get_bool(g, "test.u8", &bo));
    assert_false(slate__gguf_get_u32(g, "general.architecture", &u)); /* a string */
    assert_false(slate__gguf_get_u32(g, "absent", &u));
    assert_true(slate__gguf_get_u32(g, "general.alignment", &u));
    assert_int_equal(u, 32);

    const char *s;
    uint64_t len, n;
    slate__gguf_vtype et;
    assert_false(slate__gguf_get_str(g, "test.u8", &s, &len));
    assert_true(slate__gguf_get_arr(g, "test.tokens", &et, &n));
    assert_int_equal(et, SLATE__GGUF_STRING);
    assert_int_equal(n, 3);
    const char *want[] = {"a", "bc", ""};
    for (uint64_t k = 0; k < 3; k++) {
        assert_true(slate__gguf_arr_str(g, "test.tokens", k, &s, &len));
        assert_true(str_is(s, len, want[k]));
    }
    assert_false(slate__gguf_arr_str(g, "test.tokens", 3, &s, &len));
    assert_false(slate__gguf_arr_str(g, "test.scores", 0, &s, &len));
    double d;
    assert_false(slate__gguf_arr_num(g, "test.tokens", 0, &d));
    assert_true(slate__gguf_arr_num(g, "test.scores", 1, &d));
    assert_true(d == -2.0);
    assert_false(slate__gguf_arr_num(g, "test.scores", 2, &d));
    assert_true(slate__gguf_arr_num(g, "test.bools", 0, &d));
    assert_true(d == 1.0);
    assert_true(slate__gguf_arr_num(g, "test.bools", 1, &d));
    assert_true(d == 0.0);
    assert_false(slate__gguf_get_arr(g, "test.u8", &et, &n));

    assert_int_equal(slate__gguf_n_tensors(g), 2);
    const slate__gguf_tensor *t0 = slate__gguf_tensor_at(g, 0), *t1 = slate__gguf_tensor_at(g, 1);
    assert_string_equal(t0->name, "tok.weight");
    assert_int_equal(t0->nbytes, 256);
    assert_int_equal(t0->file_offset, slate__gguf_data_offset(g));
    assert_ptr_equal(t0->data, b.data + t0->file_offset);
    assert_string_equal(t1->name, "blk.0.q");
    assert_int_equal(t1->type, SLATE__GGML_Q8_0);
    assert_int_equal(t1->nbytes, 34);
    assert_int_equal(t1->data[0], (uint8_t)(256 * 7));
    assert_ptr_equal(slate__gguf_find_tensor(g, "blk.0.q"), t1);
    assert_null(slate__gguf_find_tensor(g, "blk.0"));
    assert_null(slate__gguf_tensor_at(g, 2));
    assert_string_equal(slate__ggml_type_name(t1->type), "Q8_0");
    assert_string_equal(slate__ggml_type_name(12), "Q4_K");
    assert_string_equal(slate__ggml_type_name(40), "NVFP4");
    assert_string_equal(slate__ggml_type_name(43), "?");
    slate__gguf_close(g);
    assert_int_equal(slate__alloc_live_bytes(), live);
    slate__buf_free(&b);
}

static void getters_and_close_accept_null_handle(void **st) {
    (void)st;
    uint32_t u;
    const char *s;
    uint64_t len;
    assert_int_equal(slate__gguf_find_key(NULL, "x"), -1);
    assert_false(slate__gguf_get_u32(NULL, "x", &u));
    assert_false(slate__gguf_get_str(NULL, "x", &s, &len));
    assert_int_equal(slate__gguf_n_tensors(NULL), 0);
    assert_null(slate__gguf_find_tensor(NULL, "x"));
    assert_int_equal(slate__gguf_key_type(NULL, 0), SLATE__GGUF_NONE);
    slate__gguf_close(NULL);
}

static void open_reports_bad_arguments_and_missing_file(void **st) {
    (void)st;
    slate_error e;
    slate__gguf *g = (slate__gguf *)&e;
    assert_int_equal(slate__gguf_open_mem(NULL, 10, &g, &e), SLATE_E_INVALID_ARG);
    assert_null(g);
    assert_int_equal(slate__gguf_open_mem((const uint8_t *)"GGUF", 4, NULL, &e),
                     SLATE_E_INVALID_ARG);
    assert_int_equal(slate__gguf_open("/nonexistent/x.gguf", &g, &e), SLATE_E_IO);
    assert_non_null(strstr(e.message, "/nonexistent/x.gguf"));
    assert_null(g);
}

typedef struct good_case {
    const char *what;
    gspec spec;
    uint32_t version, alignment;
} good_case;

static void valid_variants_open_v2_other_alignment_and_default_alignment(void **st) {
    (void)st;
    static const good_case cases[] = {
        {"version 2", {.version = 2}, 2, 32},
        {"alignment 64", {.alignment = 64}, 3, 64},
        {"alignment 1", {.alignment = 1}, 3, 1},
        {"no alignment key: 32", {.no_alignment_key = true}, 3, 32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        slate__buf b;
        build(&cases[c].spec, &b);
        slate__gguf *g;
        slate_error e;
        slate_status s = slate__gguf_open_mem(b.data, b.len, &g, &e);
        if (s) fprintf(stderr, "%s: %s\n", cases[c].what, e.message);
        assert_int_equal(s, SLATE_OK);
        assert_int_equal(slate__gguf_version(g), cases[c].version);
        assert_int_equal(slate__gguf_alignment(g), cases[c].alignment);
        assert_int_equal(slate__gguf_data_offset(g) % cases[c].alignment, 0);
        slate__gguf_close(g);
        slate__buf_free(&b);
    }
}

/* The handle is immutable after open: several threads look up the same keys and tensors at
 * once and must all see the same answers (run under TSan to check for races). */
typedef struct reader_arg {
    const slate__gguf *g;
    int ok;
} reader_arg;

static void *reader(void *p) {
    reader_arg *a = p;
    a->ok = 1;
    for (int round = 0; round < 200; round++) {
        const char *s;
        uint64_t len;
        uint32_t u;
        a->ok &= slate__gguf_arr_str(a->g, "test.tokens", 1, &s, &len) && str_is(s, len, "bc");
        a->ok &= slate__gguf_get_u32(a->g, "test.u8", &u) && u == 200;
        a->ok &= slate__gguf_find_tensor(a->g, "blk.0.q") == slate__gguf_tensor_at(a->g, 1);
    }
    return NULL;
}

static void lookups_from_several_threads_agree(void **st) {
    (void)st;
    gspec spec = {0};
    slate__buf b;
    build(&spec, &b);
    slate__gguf *g;
    assert_int_equal(slate__gguf_open_mem(b.data, b.len, &g, NULL), SLATE_OK);
    pthread_t th[4];
    reader_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (reader_arg){g, 0};
        assert_int_equal(pthread_create(&th[i], NULL, reader, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_true(args[i].ok);
    }
    slate__gguf_close(g);
    slate__buf_free(&b);
}

/* ---- broken files ------------------------------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    gspec spec;
    slate_status status;
    const char *msg1, *msg2; /* substrings the message must contain (msg2 may be NULL) */
} bad_case;

static const bad_case bad_cases[] = {
    {"bad magic", {.magic = "GGUX"}, SLATE_E_FORMAT, "bad magic", "'GGUX'"},
    {"version 1", {.version = 1}, SLATE_E_UNSUPPORTED, "version 1 ", "2 and 3"},
    {"version 99", {.version = 99}, SLATE_E_UNSUPPORTED, "version 99 ", "2 and 3"},
    {"big-endian v3", {.version = 0x03000000}, SLATE_E_UNSUPPORTED, "big-endian", NULL},
    {"huge n_tensors", {.n_tensors = 1ull << 40}, SLATE_E_FORMAT, "n_tensors is 1099511627776",
     "limit 1048576"},
    {"n_tensors at the limit but past the bytes", {.n_tensors = 1u << 20}, SLATE_E_FORMAT,
     "n_tensors is 1048576", "at most"},
    {"huge n_kv", {.n_kv = 1ull << 63}, SLATE_E_FORMAT, "n_kv is 9223372036854775808",
     "limit 1048576"},
    {"n_kv past the bytes", {.n_kv = 1000}, SLATE_E_FORMAT, "n_kv is 1000", "at most"},
    {"string length past the end", {.arch_len = 100000}, SLATE_E_FORMAT,
     "key 'general.architecture'", "string length 100000"},
    {"string length over the limit", {.arch_len = 1ull << 40}, SLATE_E_FORMAT,
     "key 'general.architecture'", "more than the limit"},
    {"string array count lying", {.tokens_count = 1000}, SLATE_E_FORMAT, "key 'test.tokens'",
     "array of 1000 strings"},
    {"f32 array count lying", {.scores_count = 1ull << 62}, SLATE_E_FORMAT, "key 'test.scores'",
     "array of 4611686018427387904 f32"},
    {"unknown value type", {.i32_vtype = 13}, SLATE_E_FORMAT, "key 'test.i32'",
     "value type 13 is unknown"},
    {"array of arrays", {.scores_nested = true}, SLATE_E_UNSUPPORTED, "key 'test.scores'",
     "arrays of arrays"},
    {"bool not 0 or 1", {.bool_byte = 2}, SLATE_E_FORMAT, "key 'test.bool'", "bool value 2"},
    {"duplicate key", {.i32_key = "test.u8"}, SLATE_E_FORMAT, "duplicate key 'test.u8'",
     "pairs 2 and 5"},
    {"empty key", {.i32_key = ""}, SLATE_E_FORMAT, "key 5 of 12 is empty", NULL},
    {"alignment not a power of two", {.alignment = 48}, SLATE_E_FORMAT,
     "general.alignment is 48", "power of two"},
    {"tensor with 0 dims", {.t1_dims_set = true, .t1_n_dims = 0}, SLATE_E_FORMAT,
     "tensor 'blk.0.q'", "n_dims is 0"},
    {"tensor with 5 dims", {.t1_dims_set = true, .t1_n_dims = 5, .t1_ne = {32, 1, 1, 1, 1}},
     SLATE_E_FORMAT, "tensor 'blk.0.q'", "n_dims is 5"},
    {"tensor with a zero-size dim", {.t1_dims_set = true, .t1_n_dims = 2, .t1_ne = {32, 0}},
     SLATE_E_FORMAT, "tensor 'blk.0.q'", "ne[1] is 0"},
    {"tensor dim above int64", {.t1_dims_set = true, .t1_n_dims = 1, .t1_ne = {1ull << 63}},
     SLATE_E_FORMAT, "tensor 'blk.0.q'", "ne[0] is 9223372036854775808"},
    {"element count overflow",
     {.t1_dims_set = true, .t1_n_dims = 3, .t1_ne = {32, 1ull << 40, 1ull << 40}},
     SLATE_E_FORMAT, "tensor 'blk.0.q'", "element count overflows at ne[2]"},
    {"byte size overflow",
     {.t1_dims_set = true, .t1_n_dims = 2, .t1_ne = {1ull << 31, 1ull << 31}, .t1_type_set = true,
      .t1_type = SLATE__GGML_F32},
     SLATE_E_FORMAT, "tensor 'blk.0.q'", "overflows"},
    {"ggml type slate does not read", {.t1_type_set = true, .t1_type = 16}, SLATE_E_UNSUPPORTED,
     "tensor 'blk.0.q' is IQ2_XXS, which slate does not read", "Hugging Face folder"},
    {"unknown ggml type", {.t1_type_set = true, .t1_type = 43}, SLATE_E_UNSUPPORTED,
     "tensor 'blk.0.q': ggml type 43 is unknown", "0..42"},
    {"Q8_0 row not a multiple of 32", {.t1_dims_set = true, .t1_n_dims = 2, .t1_ne = {48, 1}},
     SLATE_E_FORMAT, "tensor 'blk.0.q': Q8_0 needs ne[0] to be a multiple of 32", "found 48"},
    {"offset not aligned", {.t1_offset_set = true, .t1_offset = 257}, SLATE_E_FORMAT,
     "tensor 'blk.0.q': data offset 257", "alignment 32"},
    {"data past the end", {.t1_offset_set = true, .t1_offset = 1024}, SLATE_E_FORMAT,
     "tensor 'blk.0.q': data [offset ", ", 34 bytes] ends past the end of the file"},
    {"offset near 2^64", {.t1_offset_set = true, .t1_offset = 0xffffffffffffffe0ull},
     SLATE_E_FORMAT, "tensor 'blk.0.q': data [offset ", "ends past the end of the file"},
    {"overlapping tensors", {.t1_offset_set = true, .t1_offset = 224}, SLATE_E_FORMAT,
     "tensor 'blk.0.q' (Q8_0, 34 bytes) at data offset 224", "expected 256"},
    /* llama.cpp's layout rule: a flipped type byte shrinks tensor 0 and leaves a gap. */
    {"gap after a tensor whose type was flipped", {.t0_type_set = true, .t0_type = SLATE__GGML_F16},
     SLATE_E_FORMAT, "tensor 'blk.0.q' (Q8_0, 34 bytes) at data offset 256", "expected 128"},
    {"duplicate tensor name", {.t1_name = "tok.weight"}, SLATE_E_FORMAT,
     "duplicate tensor name 'tok.weight'", "tensors 0 and 1"},
    {"unprintable name is escaped", {.t1_name = "a\x01", .t1_type_set = true, .t1_type = 99},
     SLATE_E_UNSUPPORTED, "tensor 'a\\x01'", NULL},
};

static void each_broken_file_is_refused_with_status_and_culprit(void **st) {
    (void)st;
    for (size_t c = 0; c < sizeof bad_cases / sizeof bad_cases[0]; c++) {
        const bad_case *bc = &bad_cases[c];
        slate__buf b;
        build(&bc->spec, &b);
        long long live = slate__alloc_live_bytes();
        slate__gguf *g = (slate__gguf *)&b;
        slate_error e;
        uint8_t *copy;
        slate_status s = open_copy(b.data, b.len, &g, &e, &copy);
        bool ok = s == bc->status && e.code == bc->status && strstr(e.message, bc->msg1) &&
                  (!bc->msg2 || strstr(e.message, bc->msg2)) && e.has_offset;
        if (!ok)
            fprintf(stderr, "case '%s': got %s '%s'; want %s with '%s' / '%s'\n", bc->what,
                    slate_status_name(s), s ? e.message : "", slate_status_name(bc->status),
                    bc->msg1, bc->msg2 ? bc->msg2 : "");
        assert_true(ok);
        assert_true(e.offset < b.len);
        assert_null(g);
        assert_int_equal(slate__alloc_live_bytes(), live);
        free(copy);
        slate__buf_free(&b);
    }
}

/* Occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void write_bytes(const char *path, const slate__buf *b) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (b->len) /* an empty buffer's data may be NULL, which fwrite must not get */
        assert_int_equal(fwrite(b->data, 1, b->len, f), b->len);
    assert_int_equal(fclose(f), 0);
}

/* The parser sees only bytes; slate__gguf_open puts the file's name in front of each of its
 * messages ("'PATH': tensor 'w': ..."), once, with the same status and offset. */
static void each_broken_file_opened_by_path_names_the_file_once(void **st) {
    (void)st;
    for (size_t c = 0; c < sizeof bad_cases / sizeof bad_cases[0]; c++) {
        const bad_case *bc = &bad_cases[c];
        slate__buf b;
        build(&bc->spec, &b);
        slate__gguf *g = NULL;
        slate_error mem, file;
        assert_int_equal(slate__gguf_open_mem(b.data, b.len, &g, &mem), bc->status);
        const char *path = tu_tmp("broken.gguf");
        write_bytes(path, &b);
        long long live = slate__alloc_live_bytes();
        assert_int_equal(slate__gguf_open(path, &g, &file), bc->status);
        assert_null(g);
        assert_int_equal(slate__alloc_live_bytes(), live);
        char want[1024]; /* path + message; both fit in 511 here */
        snprintf(want, sizeof want, "'%s': %s", path, mem.message);
        if (strcmp(file.message, want) != 0)
            fprintf(stderr, "case '%s': got '%s', want '%s'\n", bc->what, file.message, want);
        assert_string_equal(file.message, want);
        assert_int_equal(file.code, bc->status);
        assert_true(file.has_offset && file.offset == mem.offset);
        slate__buf_free(&b);
    }
}

/* Messages that already quote the path (the file cannot be opened, is empty) keep it once, and
 * a GGUF without a tokenizer is refused by slate_tokenizer_open naming the file. */
static void open_and_tokenizer_errors_do_not_double_the_path(void **st) {
    (void)st;
    slate_error e;
    slate__gguf *g = NULL;
    assert_int_equal(slate__gguf_open("/nonexistent/x.gguf", &g, &e), SLATE_E_IO);
    assert_int_equal(count_of(e.message, "/nonexistent/x.gguf"), 1);
    const char *empty = tu_tmp("empty.gguf");
    slate__buf none = {0};
    write_bytes(empty, &none);
    assert_int_equal(slate__gguf_open(empty, &g, &e), SLATE_E_FORMAT);
    assert_int_equal(count_of(e.message, empty), 1);

    gspec spec = {0}; /* valid, with no tokenizer.ggml.* keys */
    slate__buf b;
    build(&spec, &b);
    const char *path = tu_tmp("no_vocab.gguf");
    write_bytes(path, &b);
    slate__buf_free(&b);
    slate_tokenizer *tok = NULL;
    slate_status s = slate_tokenizer_open(path, &tok, &e);
    assert_int_not_equal(s, SLATE_OK);
    assert_null(tok);
    char head[600];
    snprintf(head, sizeof head, "'%s': ", path);
    if (strncmp(e.message, head, strlen(head)) != 0 || count_of(e.message, path) != 1)
        fprintf(stderr, "tokenizer: '%s'\n", e.message);
    assert_memory_equal(e.message, head, strlen(head));
    assert_int_equal(count_of(e.message, path), 1);
}

static void every_truncation_is_refused_cleanly(void **st) {
    (void)st;
    gspec spec = {0};
    slate__buf b;
    build(&spec, &b);
    long long live = slate__alloc_live_bytes();
    for (size_t n = 0; n < b.len; n++) {
        slate__gguf *g = NULL;
        slate_error e;
        uint8_t *copy;
        slate_status s = open_copy(b.data, n, &g, &e, &copy);
        if (s != SLATE_E_FORMAT) fprintf(stderr, "prefix %zu: %s\n", n, slate_status_name(s));
        assert_int_equal(s, SLATE_E_FORMAT);
        assert_null(g);
        assert_true(e.message[0] != '\0');
        assert_true(e.has_offset && e.offset <= n);
        assert_int_equal(slate__alloc_live_bytes(), live);
        free(copy);
    }
    slate__buf_free(&b);
}

/* Fails allocation N for N = 1, 2, ... until open succeeds; each earlier attempt must return
 * E_NOMEM and leave nothing behind. */
static void fault_injection(const uint8_t *data, size_t size, const char *path) {
    long long live = slate__alloc_live_bytes();
    for (long n = 1;; n++) {
        assert_true(n < 1000);
        slate__gguf *g = NULL;
        slate_error e;
        slate__alloc_fail_after(n);
        slate_status s = path ? slate__gguf_open(path, &g, &e)
                              : slate__gguf_open_mem(data, size, &g, &e);
        slate__alloc_fail_after(0);
        if (s == SLATE_OK) {
            assert_true(n > 3);
            slate__gguf_close(g);
            break;
        }
        if (s != SLATE_E_NOMEM) fprintf(stderr, "N=%ld: %s %s\n", n, slate_status_name(s), e.message);
        assert_int_equal(s, SLATE_E_NOMEM);
        assert_null(g);
        assert_int_equal(slate__alloc_live_bytes(), live);
    }
    assert_int_equal(slate__alloc_live_bytes(), live);
}

static void each_failed_allocation_returns_nomem_without_leak(void **st) {
    (void)st;
    gspec spec = {0};
    slate__buf b;
    build(&spec, &b);
    fault_injection(b.data, b.len, NULL);
    slate__buf_free(&b);
    const char *path = tu_model_path("stories260K/stories260K-q4_0.gguf");
    if (tu_exists(path)) fault_injection(NULL, 0, path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(real_stories260K_files_open_with_expected_types_and_shapes),
        cmocka_unit_test(real_f32_embedding_matches_llama2c_checkpoint_bytes),
        cmocka_unit_test(vocab_only_ggufs_open_with_no_tensors_and_indexed_tokens),
        cmocka_unit_test(handcrafted_file_opens_and_getters_check_types),
        cmocka_unit_test(getters_and_close_accept_null_handle),
        cmocka_unit_test(open_reports_bad_arguments_and_missing_file),
        cmocka_unit_test(valid_variants_open_v2_other_alignment_and_default_alignment),
        cmocka_unit_test(lookups_from_several_threads_agree),
        cmocka_unit_test(each_broken_file_is_refused_with_status_and_culprit),
        cmocka_unit_test(each_broken_file_opened_by_path_names_the_file_once),
        cmocka_unit_test(open_and_tokenizer_errors_do_not_double_the_path),
        cmocka_unit_test(every_truncation_is_refused_cleanly),
        cmocka_unit_test(each_failed_allocation_returns_nomem_without_leak),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
