/*
 * safetensors.h - validating reader for .safetensors files: u64 header length, JSON header
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
 * Untrusted input: header length against the file, JSON parsed with cJSON, each dtype known,
 * shape product * dtype size == end - begin (overflow-checked), offsets inside the data area,
 * no overlaps, no duplicate names. The file is mapped read-only.
 * Spec: https://github.com/huggingface/safetensors (README, "Format").
 */
#ifndef SLATE_SAFETENSORS_H
#define SLATE_SAFETENSORS_H

#include "core/core.h"

typedef enum slate__st_dtype {
    SLATE__ST_F32, SLATE__ST_F16, SLATE__ST_BF16, SLATE__ST_F64, SLATE__ST_I64, SLATE__ST_I32,
    SLATE__ST_I16, SLATE__ST_I8, SLATE__ST_U8, SLATE__ST_BOOL,
} slate__st_dtype;

typedef struct slate__st_tensor {
    const char *name;      /* NUL-terminated copy */
    slate__st_dtype dtype;
    uint32_t n_dims;       /* 0..8 */
    uint64_t shape[8];     /* outermost first (row-major, as PyTorch) */
    uint64_t n_elements;
    uint64_t nbytes;
    const uint8_t *data;   /* into the mapping */
    uint64_t file_offset;
} slate__st_tensor;

typedef struct slate__st slate__st;

slate_status slate__st_open(const char *path, slate__st **out, slate_error *err);
slate_status slate__st_open_mem(const uint8_t *data, size_t size, slate__st **out,
                                slate_error *err);
void slate__st_close(slate__st *st);
int64_t slate__st_n_tensors(const slate__st *st);
const slate__st_tensor *slate__st_tensor_at(const slate__st *st, int64_t i);
const slate__st_tensor *slate__st_find(const slate__st *st, const char *name);
size_t slate__st_dtype_size(slate__st_dtype d);
const char *slate__st_dtype_name(slate__st_dtype d);

#endif /* SLATE_SAFETENSORS_H */
