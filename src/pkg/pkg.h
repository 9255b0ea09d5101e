/*
 * pkg.h - the .slate package: validating reader and atomic writer (internal). Byte layout in
 * format.h and docs/format.md.
 */
#ifndef SLATE_PKG_H
#define SLATE_PKG_H

#include "core/core.h"

#include <cjson/cJSON.h>

/* ---- reader ------------------------------------------------------------------------------ */

/* Where package bytes come from: a file (read with pread) or memory (fuzzing, tests). */
typedef struct slate__pkg {
    int fd;                   /* -1 for memory */
    const uint8_t *mem;       /* memory source, or NULL */
    uint64_t file_size;
    char *meta;               /* META section, NUL-terminated heap copy */
    size_t meta_len;
    uint8_t *tok;             /* TOKENIZER section, heap copy */
    size_t tok_len;
    uint64_t data_offset;     /* DATA section, absolute offset (multiple of 64) */
    uint64_t data_size;
    cJSON *json;              /* parsed META */
} slate__pkg;

/* Opens and validates the container: header, section table, CRCs of META and TOKENIZER, and
 * parses META as JSON (its content is validated by the program compiler). On failure p is
 * left closed. Returns OK, E_IO, E_FORMAT (with offset), E_UNSUPPORTED (version), E_NOMEM. */
slate_status slate__pkg_open(const char *path, slate__pkg *p, slate_error *err);
slate_status slate__pkg_open_mem(const uint8_t *data, size_t size, slate__pkg *p,
                                 slate_error *err);
void slate__pkg_close(slate__pkg *p);

/* What a file is, judged from its first bytes (head[0..n), up to 32 of them are looked at) and
 * its size: slate's own files and the formats `slate convert` reads, so that a file given in
 * the wrong place can be named. LLAMA2C is a plausible header only; OTHER: none of these. */
typedef enum slate__file_kind {
    SLATE__FILE_OTHER = 0,
    SLATE__FILE_PACKAGE,
    SLATE__FILE_STATE,
    SLATE__FILE_GGUF,
    SLATE__FILE_SAFETENSORS,
    SLATE__FILE_JSON,
    SLATE__FILE_LLAMA2C,
} slate__file_kind;
slate__file_kind slate__pkg_file_kind(const uint8_t *head, size_t n, uint64_t size);

/* Reads only the tokenizer section of a package (used by slate_tokenizer_open). */
slate_status slate__pkg_read_tokenizer(const char *path, slate_tokenizer **out, slate_error *err);

/* ---- writer ------------------------------------------------------------------------------ */

/* One tensor to write. The writer asks `produce` to fill exactly nbytes at dst (64-aligned). */
typedef struct slate__pkg_wtensor {
    const char *name;
    slate_dtype dtype;
    int32_t block;   /* Q4: 16/32/64/128 and Q8_0: 32, written as "block"; PAL: the packed
                        layout slate__pal_layout(bits, group), written as "bits" and "group";
                        else 0 */
    bool asym;       /* Q4: written as "asym": true */
    int32_t n_dims;
    int64_t dims[4]; /* outermost first */
    size_t nbytes;
    slate_status (*produce)(const void *ctx, void *dst, slate_error *err);
    const void *ctx;
} slate__pkg_wtensor;

/* Writes a package atomically (an exclusive temp beside path, fsync, rename; removed on any
 * failure). meta is the
 * META object without "tensors": the writer adds the tensor table (offsets assigned here) and
 * owns nothing of the caller's. tok_blob: the serialized tokenizer. progress: one stderr line
 * per tensor. Returns OK, E_IO, E_NOMEM, or what a producer returns. */
slate_status slate__pkg_write(const char *path, cJSON *meta, const uint8_t *tok_blob,
                              size_t tok_len, const slate__pkg_wtensor *tensors, size_t n_tensors,
                              bool progress, slate_error *err);

/* A copy of meta (the caller keeps its own) with the tensor table "tensors" appended: for each
 * tensor in order its name, dtype, layout attributes ("block", "asym"; "bits" and "group" for
 * PAL), shape, offset inside DATA (each 64-aligned) and size; *data_size is DATA's size. The
 * table slate__pkg_write writes (the converter also compiles the program against it first).
 * NULL when an allocation fails; nothing is then left allocated. cJSON_Delete the result. */
cJSON *slate__pkg_meta_with_table(const cJSON *meta, const slate__pkg_wtensor *tensors,
                                  size_t n_tensors, uint64_t *data_size);

/* Bytes of one element row: n elements of dtype (F32 4, F16/BF16 2, I32 4); 0 for unknown and
 * for the block formats (Q8_0, Q4, Q8_C: slate__wmat_bytes in kernels/quant.h). */
size_t slate__dtype_size(slate_dtype dtype);
/* Parses "f32" / "f16" / "bf16" / "i32" / "q8_0" / "q4" / "q8_c"; false if unknown. */
bool slate__dtype_parse(const char *name, slate_dtype *out);

#endif /* SLATE_PKG_H */
