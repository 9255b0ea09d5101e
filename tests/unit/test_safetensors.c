/* test_safetensors.c - the safetensors reader: a generator writes a small valid file (header
 * JSON + data), then each case breaks one thing (header length, JSON, entry fields, shapes,
 * offsets, overlaps, duplicates); each must be refused with the exact status, a message naming
 * the culprit, and no leak. Also: truncation at every byte and allocation fault injection. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/safetensors.h"
#include "core/core.h"

/* ---- a generator for small safetensors files ---------------------------------------------- */

/* The valid file: metadata {"format": "pt"} and four tensors over a 40-byte data area,
 *   w F32 [2, 3] at [0, 24), b F16 [3] at [24, 30), s I64 [] (a scalar) at [32, 40) (a 2-byte
 *   gap before it is allowed), e U8 [0, 4] at [40, 40) (empty),
 * the header padded with spaces to a multiple of 8 like the reference writer does, data byte
 * i = i * 3. Fields hold raw JSON text so a case can put anything there. */
typedef struct entry {
    const char *name, *dtype, *shape, *offs;
} entry;

static const entry base[4] = {
    {"w", "\"F32\"", "[2, 3]", "[0, 24]"},
    {"b", "\"F16\"", "[3]", "[24, 30]"},
    {"s", "\"I64\"", "[]", "[32, 40]"},
    {"e", "\"U8\"", "[0, 4]", "[40, 40]"},
};
#define DATA_BYTES 40

typedef struct sspec {
    const char *raw_header;  /* the whole header text instead of the generated one */
    uint64_t hdr_len;        /* claimed header length; 0: the real one */
    const char *meta;        /* raw __metadata__ value; NULL: {"format": "pt"}; "": none */
    int which;               /* entry to change (0..3); its fields below override when set */
    const char *name, *dtype, *shape, *offs;
    const char *value;       /* raw value of the entry instead of {dtype, shape, offsets} */
    bool no_dtype, no_shape, no_offs;
    const char *extra;       /* raw text appended after the last entry: ', "k": v' */
    const char *trailing;    /* raw text after the closing brace */
} sspec;

static void build(const sspec *s, slate__buf *b) {
    char hdr[4096];
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(hdr + n, sizeof hdr - n, __VA_ARGS__)
    if (s->raw_header) {
        PUT("%s", s->raw_header);
    } else {
        PUT("{");
        const char *meta = s->meta ? s->meta : "{\"format\": \"pt\"}";
        bool first = true;
        if (meta[0]) {
            PUT("\"__metadata__\": %s", meta);
            first = false;
        }
        for (int i = 0; i < 4; i++) {
            entry e = base[i];
            bool mine = i == s->which;
            if (mine && s->name) e.name = s->name;
            if (mine && s->dtype) e.dtype = s->dtype;
            if (mine && s->shape) e.shape = s->shape;
            if (mine && s->offs) e.offs = s->offs;
            PUT("%s\"%s\": ", first ? "" : ", ", e.name);
            first = false;
            if (mine && s->value) {
                PUT("%s", s->value);
                continue;
            }
            const char *sep = "";
            PUT("{");
            if (!(mine && s->no_dtype)) PUT("%s\"dtype\": %s", sep, e.dtype), sep = ", ";
            if (!(mine && s->no_shape)) PUT("%s\"shape\": %s", sep, e.shape), sep = ", ";
            if (!(mine && s->no_offs)) PUT("%s\"data_offsets\": %s", sep, e.offs);
            PUT("}");
        }
        if (s->extra) PUT("%s", s->extra);
        PUT("}");
        if (s->trailing) PUT("%s", s->trailing);
        while (n % 8) PUT(" ");
    }
#undef PUT
    assert_true(n < sizeof hdr);
    memset(b, 0, sizeof *b);
    slate__buf_u64(b, s->hdr_len ? s->hdr_len : n);
    slate__buf_append(b, hdr, n);
    for (int i = 0; i < DATA_BYTES; i++) {
        uint8_t x = (uint8_t)(i * 3);
        slate__buf_append(b, &x, 1);
    }
    assert_false(b->failed);
}

static slate_status open_copy(const uint8_t *data, size_t size, slate__st **st, slate_error *e,
                              uint8_t **copy) {
    *copy = malloc(size ? size : 1);
    assert_non_null(*copy);
    if (size) memcpy(*copy, data, size);
    return slate__st_open_mem(*copy, size, st, e);
}

/* ---- valid files ------------------------------------------------------------------------- */

static void valid_file_opens_with_shapes_offsets_and_lookup(void **unused) {
    (void)unused;
    sspec spec = {.which = -1};
    slate__buf b;
    build(&spec, &b);
    uint64_t data_start = b.len - DATA_BYTES;
    long long live = slate__alloc_live_bytes();
    slate__st *st = NULL;
    slate_error e;
    slate_status s = slate__st_open_mem(b.data, b.len, &st, &e);
    if (s) fprintf(stderr, "%s\n", e.message);
    assert_int_equal(s, SLATE_OK);
    assert_int_equal(slate__st_n_tensors(st), 4);

    const slate__st_tensor *w = slate__st_tensor_at(st, 0);
    assert_string_equal(w->name, "w");
    assert_int_equal(w->dtype, SLATE__ST_F32);
    assert_int_equal(w->n_dims, 2);
    assert_int_equal(w->shape[0], 2);
    assert_int_equal(w->shape[1], 3);
    assert_int_equal(w->n_elements, 6);
    assert_int_equal(w->nbytes, 24);
    assert_int_equal(w->file_offset, data_start);
    assert_ptr_equal(w->data, b.data + data_start);

    const slate__st_tensor *t = slate__st_find(st, "b");
    assert_ptr_equal(t, slate__st_tensor_at(st, 1));
    assert_int_equal(t->dtype, SLATE__ST_F16);
    assert_int_equal(t->nbytes, 6);
    assert_int_equal(t->data[0], (uint8_t)(24 * 3));

    t = slate__st_find(st, "s");
    assert_int_equal(t->n_dims, 0);
    assert_int_equal(t->n_elements, 1);
    assert_int_equal(t->nbytes, 8);
    assert_int_equal(t->file_offset, data_start + 32);

    t = slate__st_find(st, "e");
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->n_elements, 0);
    assert_int_equal(t->nbytes, 0);

    assert_null(slate__st_find(st, "__metadata__"));
    assert_null(slate__st_find(st, "x"));
    assert_null(slate__st_tensor_at(st, 4));
    assert_null(slate__st_tensor_at(st, -1));
    slate__st_close(st);
    assert_int_equal(slate__alloc_live_bytes(), live);

    /* The same bytes through a file. */
    const char *path = tu_tmp("valid.safetensors");
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b.data, 1, b.len, fp), b.len);
    fclose(fp);
    assert_int_equal(slate__st_open(path, &st, &e), SLATE_OK);
    assert_int_equal(slate__st_n_tensors(st), 4);
    assert_int_equal(slate__st_find(st, "w")->file_offset, data_start);
    slate__st_close(st);
    assert_int_equal(slate__alloc_live_bytes(), live);
    slate__buf_free(&b);
}

typedef struct good_case {
    const char *what;
    sspec spec;
    int64_t n_tensors;
} good_case;

static void valid_variants_open(void **unused) {
    (void)unused;
    static const good_case cases[] = {
        {"empty header object", {.raw_header = "{}", .which = -1}, 0},
        {"only metadata", {.raw_header = "{\"__metadata__\": {}}", .which = -1}, 0},
        {"no metadata", {.meta = "", .which = -1}, 4},
        {"unknown entry field is ignored",
         {.which = 1, .value = "{\"dtype\": \"F16\", \"shape\": [3], \"data_offsets\": [24, 30], "
                               "\"note\": [1, {}]}"},
         4},
        {"integer written as 2e0", {.which = 0, .shape = "[2e0, 3]"}, 4},
        {"empty tensor inside another's range", {.which = 3, .offs = "[10, 10]"}, 4},
        {"no trailing padding", {.raw_header = "{\"a\": {\"dtype\": \"U8\", \"shape\": [40], "
                                               "\"data_offsets\": [0, 40]}}",
                                 .which = -1},
         1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        slate__buf b;
        build(&cases[c].spec, &b);
        slate__st *st;
        slate_error e;
        slate_status s = slate__st_open_mem(b.data, b.len, &st, &e);
        if (s) fprintf(stderr, "%s: %s\n", cases[c].what, e.message);
        assert_int_equal(s, SLATE_OK);
        assert_int_equal(slate__st_n_tensors(st), cases[c].n_tensors);
        slate__st_close(st);
        slate__buf_free(&b);
    }
}

static void every_dtype_has_its_name_and_size(void **unused) {
    (void)unused;
    static const struct {
        const char *name;
        slate__st_dtype dtype;
        size_t size;
    } dts[] = {
        {"F32", SLATE__ST_F32, 4}, {"F16", SLATE__ST_F16, 2}, {"BF16", SLATE__ST_BF16, 2},
        {"F64", SLATE__ST_F64, 8}, {"I64", SLATE__ST_I64, 8}, {"I32", SLATE__ST_I32, 4},
        {"I16", SLATE__ST_I16, 2}, {"I8", SLATE__ST_I8, 1},   {"U8", SLATE__ST_U8, 1},
        {"BOOL", SLATE__ST_BOOL, 1},
    };
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        assert_string_equal(slate__st_dtype_name(dts[i].dtype), dts[i].name);
        assert_int_equal(slate__st_dtype_size(dts[i].dtype), dts[i].size);
        char hdr[256];
        snprintf(hdr, sizeof hdr,
                 "{\"t\": {\"dtype\": \"%s\", \"shape\": [5], \"data_offsets\": [0, %zu]}}",
                 dts[i].name, 5 * dts[i].size);
        sspec spec = {.raw_header = hdr, .which = -1};
        slate__buf b;
        build(&spec, &b);
        slate__st *st;
        assert_int_equal(slate__st_open_mem(b.data, b.len, &st, NULL), SLATE_OK);
        assert_int_equal(slate__st_tensor_at(st, 0)->dtype, dts[i].dtype);
        assert_int_equal(slate__st_tensor_at(st, 0)->nbytes, 5 * dts[i].size);
        slate__st_close(st);
        slate__buf_free(&b);
    }
    assert_string_equal(slate__st_dtype_name((slate__st_dtype)99), "?");
    assert_int_equal(slate__st_dtype_size((slate__st_dtype)99), 0);
}

static void getters_close_and_open_handle_bad_arguments(void **unused) {
    (void)unused;
    assert_int_equal(slate__st_n_tensors(NULL), 0);
    assert_null(slate__st_tensor_at(NULL, 0));
    assert_null(slate__st_find(NULL, "w"));
    slate__st_close(NULL);
    slate_error e;
    slate__st *st = (slate__st *)&e;
    assert_int_equal(slate__st_open_mem(NULL, 8, &st, &e), SLATE_E_INVALID_ARG);
    assert_null(st);
    assert_int_equal(slate__st_open_mem((const uint8_t *)"x", 1, NULL, &e), SLATE_E_INVALID_ARG);
    assert_int_equal(slate__st_open("/nonexistent/m.safetensors", &st, &e), SLATE_E_IO);
    assert_non_null(strstr(e.message, "/nonexistent/m.safetensors"));
}

/* ---- broken files --------------------------------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    sspec spec;
    slate_status status;
    const char *msg1, *msg2;
} bad_case;

#define W0 .which = 0
#define W1 .which = 1
static const bad_case bad_cases[] = {
    {"header length past the file", {.hdr_len = 4000, .which = -1}, SLATE_E_FORMAT,
     "header length 4000", "past the end of the file"},
    {"header length over 100 MB", {.hdr_len = 1ull << 40, .which = -1}, SLATE_E_FORMAT,
     "header length 1099511627776", "limit 100000000"},
    {"not JSON", {.raw_header = "{\"w\": {\"dtype\": F32}}", .which = -1}, SLATE_E_FORMAT,
     "not valid JSON", "near 'F32}}'"},
    {"bytes after the JSON", {.trailing = "x", .which = -1}, SLATE_E_FORMAT,
     "bytes after its JSON value", NULL},
    {"not an object", {.raw_header = "[1, 2]", .which = -1}, SLATE_E_FORMAT,
     "header is an array, expected a JSON object", NULL},
    {"entry not an object", {W0, .value = "5"}, SLATE_E_FORMAT, "tensor 'w': entry is a number",
     NULL},
    {"missing dtype", {W0, .no_dtype = true}, SLATE_E_FORMAT, "tensor 'w': missing \"dtype\"",
     NULL},
    {"missing shape", {W1, .no_shape = true}, SLATE_E_FORMAT, "tensor 'b': missing \"shape\"",
     NULL},
    {"missing data_offsets", {W1, .no_offs = true}, SLATE_E_FORMAT,
     "tensor 'b': missing \"data_offsets\"", NULL},
    {"dtype not a string", {W0, .dtype = "7"}, SLATE_E_FORMAT,
     "tensor 'w': dtype is a number, expected a string", NULL},
    {"unknown dtype", {W0, .dtype = "\"F8_E4M3\""}, SLATE_E_UNSUPPORTED,
     "tensor 'w': dtype 'F8_E4M3' is not supported", NULL},
    {"dtype field twice",
     {W1, .value = "{\"dtype\": \"F16\", \"dtype\": \"F32\", \"shape\": [3], "
                   "\"data_offsets\": [24, 30]}"},
     SLATE_E_FORMAT, "tensor 'b': field \"dtype\" appears twice", NULL},
    {"shape not an array", {W0, .shape = "\"2x3\""}, SLATE_E_FORMAT,
     "tensor 'w': shape is a string, expected an array", NULL},
    {"negative dim", {W0, .shape = "[2, -3]"}, SLATE_E_FORMAT, "tensor 'w': shape[1] is -3",
     "non-negative integer"},
    {"fractional dim", {W0, .shape = "[2, 1.5]"}, SLATE_E_FORMAT, "tensor 'w': shape[1] is 1.5",
     NULL},
    {"dim not a number", {W0, .shape = "[2, \"3\"]"}, SLATE_E_FORMAT,
     "tensor 'w': shape[1] is a string", NULL},
    {"dim beyond 2^53", {W0, .shape = "[18446744073709551616]"}, SLATE_E_FORMAT,
     "tensor 'w': shape[0] is 1.8446744073709552e+19", NULL},
    {"nine dims", {W0, .shape = "[1, 1, 1, 1, 1, 1, 1, 2, 3]"}, SLATE_E_UNSUPPORTED,
     "tensor 'w': shape has 9 dims", "at most 8"},
    {"element count overflow", {W0, .shape = "[1, 4294967296, 4294967296]"},
     SLATE_E_FORMAT, "tensor 'w': element count overflows at shape[2]", NULL},
    {"byte size overflow", {W0, .shape = "[9007199254740992, 1024]"}, SLATE_E_FORMAT,
     "tensor 'w': size of 9223372036854775808 F32 elements overflows", NULL},
    {"shape and offsets disagree", {W0, .shape = "[2, 4]"}, SLATE_E_FORMAT,
     "tensor 'w': shape [2, 4] of F32 needs 32 bytes", "data_offsets [0, 24] hold 24"},
    {"offsets reversed", {W1, .offs = "[30, 24]"}, SLATE_E_FORMAT,
     "tensor 'b': data_offsets [30, 24] are reversed", NULL},
    {"offsets past the data", {W1, .offs = "[40, 46]"}, SLATE_E_FORMAT,
     "tensor 'b': data_offsets [40, 46] end past the end of the data area", "40 bytes"},
    {"offsets not a pair", {W1, .offs = "[24]"}, SLATE_E_FORMAT,
     "tensor 'b': data_offsets has 1 values, expected [begin, end]", NULL},
    {"negative offset", {W1, .offs = "[-6, 0]"}, SLATE_E_FORMAT,
     "tensor 'b': data_offsets[0] is -6", NULL},
    {"offsets not an array", {W1, .offs = "{}"}, SLATE_E_FORMAT,
     "tensor 'b': data_offsets is an object", NULL},
    {"overlapping tensors", {W1, .offs = "[20, 26]"}, SLATE_E_FORMAT,
     "tensors 'w' [data 0..24) and 'b' [data 20..26) overlap", NULL},
    {"duplicate names",
     {.which = -1,
      .extra = ", \"w\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [30, 32]}"},
     SLATE_E_FORMAT, "duplicate tensor name 'w'", "entries 0 and 4"},
    {"empty header", {.raw_header = "", .which = -1}, SLATE_E_FORMAT, "not valid JSON", NULL},
    {"duplicate __metadata__", {.which = -1, .extra = ", \"__metadata__\": {}"}, SLATE_E_FORMAT,
     "duplicate entry \"__metadata__\"", NULL},
    {"metadata not an object", {.which = -1, .meta = "5"}, SLATE_E_FORMAT,
     "__metadata__ is a number", NULL},
    {"metadata value not a string", {.which = -1, .meta = "{\"epoch\": 3}"}, SLATE_E_FORMAT,
     "__metadata__ entry 'epoch' is a number", NULL},
    {"unprintable name is escaped", {W0, .name = "a\\u0001b", .dtype = "\"Q4\""},
     SLATE_E_UNSUPPORTED, "tensor 'a\\x01b'", NULL},
};

static void each_broken_file_is_refused_with_status_and_culprit(void **unused) {
    (void)unused;
    for (size_t c = 0; c < sizeof bad_cases / sizeof bad_cases[0]; c++) {
        const bad_case *bc = &bad_cases[c];
        slate__buf b;
        build(&bc->spec, &b);
        long long live = slate__alloc_live_bytes();
        slate__st *st = (slate__st *)&b;
        slate_error e;
        uint8_t *copy;
        slate_status s = open_copy(b.data, b.len, &st, &e, &copy);
        bool ok = s == bc->status && e.code == bc->status && strstr(e.message, bc->msg1) &&
                  (!bc->msg2 || strstr(e.message, bc->msg2)) && e.has_offset;
        if (!ok)
            fprintf(stderr, "case '%s': got %s '%s'; want %s with '%s' / '%s'\n", bc->what,
                    slate_status_name(s), s ? e.message : "", slate_status_name(bc->status),
                    bc->msg1, bc->msg2 ? bc->msg2 : "");
        assert_true(ok);
        assert_true(e.offset < b.len);
        assert_null(st);
        assert_int_equal(slate__alloc_live_bytes(), live);
        free(copy);
        slate__buf_free(&b);
    }
}

static void error_offset_points_at_the_entry_name(void **unused) {
    (void)unused;
    sspec spec = {W1, .dtype = "\"Q4\""};
    slate__buf b;
    build(&spec, &b);
    slate__st *st;
    slate_error e;
    assert_int_equal(slate__st_open_mem(b.data, b.len, &st, &e), SLATE_E_UNSUPPORTED);
    assert_true(e.has_offset);
    assert_memory_equal(b.data + e.offset, "\"b\"", 3);
    slate__buf_free(&b);

    /* A duplicate is located at its second occurrence. */
    sspec dup = {.which = -1,
                 .extra = ", \"w\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [30, 32]}"};
    build(&dup, &b);
    assert_int_equal(slate__st_open_mem(b.data, b.len, &st, &e), SLATE_E_FORMAT);
    assert_memory_equal(b.data + e.offset, "\"w\": {\"dtype\": \"U8\"", 17);
    slate__buf_free(&b);
}

static void every_truncation_is_refused_cleanly(void **unused) {
    (void)unused;
    sspec spec = {.which = -1};
    slate__buf b;
    build(&spec, &b);
    long long live = slate__alloc_live_bytes();
    for (size_t n = 0; n < b.len; n++) {
        slate__st *st = NULL;
        slate_error e;
        uint8_t *copy;
        slate_status s = open_copy(b.data, n, &st, &e, &copy);
        if (s != SLATE_E_FORMAT) fprintf(stderr, "prefix %zu: %s\n", n, slate_status_name(s));
        assert_int_equal(s, SLATE_E_FORMAT);
        assert_null(st);
        assert_true(e.message[0] != '\0');
        assert_true(e.has_offset && e.offset <= n);
        assert_int_equal(slate__alloc_live_bytes(), live);
        free(copy);
    }
    slate__buf_free(&b);
}

static void each_failed_allocation_returns_nomem_without_leak(void **unused) {
    (void)unused;
    sspec spec = {.which = -1};
    slate__buf b;
    build(&spec, &b);
    long long live = slate__alloc_live_bytes();
    for (long n = 1;; n++) {
        assert_true(n < 100);
        slate__st *st = NULL;
        slate_error e;
        slate__alloc_fail_after(n);
        slate_status s = slate__st_open_mem(b.data, b.len, &st, &e);
        slate__alloc_fail_after(0);
        if (s == SLATE_OK) {
            assert_true(n > 3);
            slate__st_close(st);
            break;
        }
        if (s != SLATE_E_NOMEM) fprintf(stderr, "N=%ld: %s %s\n", n, slate_status_name(s), e.message);
        assert_int_equal(s, SLATE_E_NOMEM);
        assert_null(st);
        assert_int_equal(slate__alloc_live_bytes(), live);
    }
    assert_int_equal(slate__alloc_live_bytes(), live);
    slate__buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_file_opens_with_shapes_offsets_and_lookup),
        cmocka_unit_test(valid_variants_open),
        cmocka_unit_test(every_dtype_has_its_name_and_size),
        cmocka_unit_test(getters_close_and_open_handle_bad_arguments),
        cmocka_unit_test(each_broken_file_is_refused_with_status_and_culprit),
        cmocka_unit_test(error_offset_points_at_the_entry_name),
        cmocka_unit_test(every_truncation_is_refused_cleanly),
        cmocka_unit_test(each_failed_allocation_returns_nomem_without_leak),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
