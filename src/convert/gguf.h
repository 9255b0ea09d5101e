/*
 * gguf.h - validating reader for GGUF files (v2 and v3, little-endian). Untrusted input: every
 * count is checked against a sane limit and against the bytes left, every string and array
 * length with overflow-safe arithmetic, every tensor's type, dims, alignment and data range
 * against the file size; duplicate keys or tensor names are refused. The file is mapped
 * read-only; tensor data pointers point into the mapping.
 * Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
 */
#ifndef SLATE_GGUF_H
#define SLATE_GGUF_H

#include "core/core.h"

typedef enum slate__gguf_vtype { /* GGUF metadata value types */
    SLATE__GGUF_U8 = 0, SLATE__GGUF_I8 = 1, SLATE__GGUF_U16 = 2, SLATE__GGUF_I16 = 3,
    SLATE__GGUF_U32 = 4, SLATE__GGUF_I32 = 5, SLATE__GGUF_F32 = 6, SLATE__GGUF_BOOL = 7,
    SLATE__GGUF_STRING = 8, SLATE__GGUF_ARRAY = 9, SLATE__GGUF_U64 = 10, SLATE__GGUF_I64 = 11,
    SLATE__GGUF_F64 = 12,
    SLATE__GGUF_NONE = -1, /* slate__gguf_key_type() of an index out of range */
} slate__gguf_vtype;

/* ggml tensor types that slate reads (ggml.h, enum ggml_type). The parser refuses every other
 * type by name (slate__ggml_type_name). Layouts: convert/ggml_quants.h. */
typedef enum slate__ggml_type {
    SLATE__GGML_F32 = 0, SLATE__GGML_F16 = 1, SLATE__GGML_Q4_0 = 2, SLATE__GGML_Q4_1 = 3,
    SLATE__GGML_Q5_0 = 6, SLATE__GGML_Q5_1 = 7, SLATE__GGML_Q8_0 = 8, SLATE__GGML_Q2_K = 10,
    SLATE__GGML_Q3_K = 11, SLATE__GGML_Q4_K = 12, SLATE__GGML_Q5_K = 13, SLATE__GGML_Q6_K = 14,
    SLATE__GGML_IQ4_NL = 20, SLATE__GGML_IQ4_XS = 23, SLATE__GGML_BF16 = 30,
} slate__ggml_type;
/* ggml type ids run 0..SLATE__GGML_N_TYPES - 1 (some of them retired upstream), as of
 * llama.cpp 81ff7abe (the commit ../shared/models was made with; NVFP4, Q1_0, Q2_0 newest). */
#define SLATE__GGML_N_TYPES 43

typedef struct slate__gguf slate__gguf;

typedef struct slate__gguf_tensor {
    const char *name;      /* NUL-terminated copy */
    uint32_t type;         /* ggml type number (only the slate__ggml_type values are accepted;
                              the block formats need ne[0] to be whole blocks: 32 elements,
                              256 for the K types and IQ4_XS) */
    uint32_t n_dims;       /* 1..4 */
    uint64_t ne[4];        /* ne[0] is the innermost (contiguous) dimension; unused dims are 1 */
    uint64_t n_elements;
    uint64_t nbytes;
    uint64_t file_offset;  /* absolute byte offset of the data in the file */
    const uint8_t *data;   /* into the mapping */
} slate__gguf_tensor;

/* Opens and validates path. Returns OK, E_IO, E_FORMAT (with offset), E_UNSUPPORTED (version,
 * tensor type), E_NOMEM; every failure's message names path once ("'PATH': ..."). */
slate_status slate__gguf_open(const char *path, slate__gguf **out, slate_error *err);
/* The same over bytes in memory (the fuzz target uses it); data must outlive the handle. The
 * messages name no file (the caller knows it: slate__error_name_file). */
slate_status slate__gguf_open_mem(const uint8_t *data, size_t size, slate__gguf **out,
                                  slate_error *err);
void slate__gguf_close(slate__gguf *g);

uint32_t slate__gguf_version(const slate__gguf *g);
/* general.alignment (32 when absent) and the absolute file offset of the data section. */
uint32_t slate__gguf_alignment(const slate__gguf *g);
uint64_t slate__gguf_data_offset(const slate__gguf *g);
/* Number of metadata pairs, and the key of pair i (0 <= i < n_kv; NUL-terminated copy owned by
 * the handle, valid until close; NULL out of range). Keys are unique and contain no NUL. */
int64_t slate__gguf_n_kv(const slate__gguf *g);
const char *slate__gguf_key_at(const slate__gguf *g, int64_t i);
/* Metadata lookups: return -1 if the key is absent. */
int64_t slate__gguf_find_key(const slate__gguf *g, const char *key);
/* Value type of pair i; SLATE__GGUF_NONE when i is out of range. */
slate__gguf_vtype slate__gguf_key_type(const slate__gguf *g, int64_t i);
/* Typed getters; false if absent or of another kind (a string for a number, say) or out of
 * range for the target type. The integer getters convert between integer widths (u8..i64),
 * range-checked. get_f32 takes only an f32 value, as llama.cpp's loader requires for its float
 * keys (an integer or an f64 there is "wrong type"); bools are not numbers here. */
bool slate__gguf_get_u32(const slate__gguf *g, const char *key, uint32_t *out);
bool slate__gguf_get_i32(const slate__gguf *g, const char *key, int32_t *out);
bool slate__gguf_get_f32(const slate__gguf *g, const char *key, float *out);
bool slate__gguf_get_bool(const slate__gguf *g, const char *key, bool *out);
/* Describes the value of key for messages into buf: "4294967295 (u32)", "inf (f32)",
 * "true (bool)", "a string", "an array of 32 u32", "absent". Returns buf. */
const char *slate__gguf_value_str(const slate__gguf *g, const char *key, char *buf, size_t cap);
/* String value: borrowed pointer into the mapping (NOT NUL-terminated) and its length. */
bool slate__gguf_get_str(const slate__gguf *g, const char *key, const char **s, uint64_t *len);
/* Arrays: element type and count; then element access. */
bool slate__gguf_get_arr(const slate__gguf *g, const char *key, slate__gguf_vtype *elem_type,
                         uint64_t *n);
/* i-th string of a string array (borrowed, not terminated). */
bool slate__gguf_arr_str(const slate__gguf *g, const char *key, uint64_t i, const char **s,
                         uint64_t *len);
/* i-th numeric element of an array converted to double (ints, floats, bool). */
bool slate__gguf_arr_num(const slate__gguf *g, const char *key, uint64_t i, double *out);

/* Tensors in file order. Pointers stay valid until close. */
int64_t slate__gguf_n_tensors(const slate__gguf *g);
const slate__gguf_tensor *slate__gguf_tensor_at(const slate__gguf *g, int64_t i);
const slate__gguf_tensor *slate__gguf_find_tensor(const slate__gguf *g, const char *name);

/* Static name of a ggml type as ggml spells it ("F32", "Q4_K", "IQ2_XXS", "MXFP4", ...) for
 * every id of ggml's enum, read or not (retired ids too: "Q4_0_4_4"; the newest "NVFP4", "Q1_0",
 * "Q2_0"); "?" past the enum. */
const char *slate__ggml_type_name(uint32_t type);

/* Builds a tokenizer from tokenizer.ggml.* keys (model "llama" -> SPM, "gpt2" -> BPE, with the
 * pre-tokenizer chosen from tokenizer.ggml.pre). Implemented in src/tok/tok_gguf.c. Its messages
 * name no file: callers add it (slate__error_name_file). */
slate_status slate__tok_from_gguf(const slate__gguf *g, slate_tokenizer **out, slate_error *err);

#endif /* SLATE_GGUF_H */
