/*
 * write.c - the atomic package writer. Offsets of every section and tensor are computed before
 * a byte is written (so META, which holds the tensor table, can be written first), then the data
 * is streamed tensor by tensor: a converter never holds more than one converted tensor in
 * memory. Everything goes to a temp file beside path (slate__atomic_open); only a complete,
 * flushed file is renamed into place.
 */
#include "pkg.h"
#include "format.h"
#include "kernels/quant.h"

#include <stdio.h>
#include <string.h>

size_t slate__dtype_size(slate_dtype dtype) {
    switch (dtype) {
    case SLATE_DTYPE_F32: return 4;
    case SLATE_DTYPE_F16: return 2;
    case SLATE_DTYPE_BF16: return 2;
    case SLATE_DTYPE_I32: return 4;
    case SLATE_DTYPE_I8: return 1; /* values only; caches add a scale per head */
    case SLATE_DTYPE_Q8_0: /* blocked formats have no element size: slate__wmat_bytes */
    case SLATE_DTYPE_Q4:
    case SLATE_DTYPE_Q8_C:
    case SLATE_DTYPE_PAL:
    case SLATE_DTYPE_Q4_K:
    case SLATE_DTYPE_Q6_K:
    case SLATE_DTYPE_Q5_K:
    case SLATE_DTYPE_Q3_K:
    case SLATE_DTYPE_Q2_K:
    case SLATE_DTYPE_IQ4_NL:
    case SLATE_DTYPE_IQ4_XS: return 0;
    }
    return 0;
}

bool slate__dtype_parse(const char *name, slate_dtype *out) {
    static const slate_dtype all[] = {SLATE_DTYPE_F32,  SLATE_DTYPE_F16, SLATE_DTYPE_BF16,
                                      SLATE_DTYPE_I32,  SLATE_DTYPE_Q8_0, SLATE_DTYPE_Q4,
                                      SLATE_DTYPE_Q8_C, SLATE_DTYPE_PAL, SLATE_DTYPE_Q4_K,
                                      SLATE_DTYPE_Q6_K, SLATE_DTYPE_Q5_K, SLATE_DTYPE_Q3_K,
                                      SLATE_DTYPE_Q2_K, SLATE_DTYPE_IQ4_NL, SLATE_DTYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, slate_dtype_name(all[i])) == 0) {
            *out = all[i];
            return true;
        }
    return false;
}

/* A weight's layout attributes ("block", "asym"; "bits" and "group" for PAL). false when cJSON
 * runs out of memory. */
static bool layout_attrs(cJSON *entry, const slate__pkg_wtensor *t) {
    if (t->dtype == SLATE_DTYPE_PAL) /* block holds the packed layout (kernels/quant.h) */
        return cJSON_AddNumberToObject(entry, "bits", slate__pal_bits(t->block)) &&
               cJSON_AddNumberToObject(entry, "group", slate__pal_group(t->block));
    return (!t->block || cJSON_AddNumberToObject(entry, "block", t->block)) &&
           (!t->asym || cJSON_AddBoolToObject(entry, "asym", true));
}

/* Appends item to the array, or adds it to the object under key; NULL item (a failed create) or
 * a failed add deletes it and gives false, so the caller owns nothing either way. */
static bool add_item(cJSON *parent, const char *key, cJSON *item) {
    if (item && (key ? cJSON_AddItemToObject(parent, key, item)
                     : cJSON_AddItemToArray(parent, item)))
        return true;
    cJSON_Delete(item);
    return false;
}

/* {"name", "dtype", layout attributes, "shape", "offset", "size"}: the key order of every
 * package written so far. NULL when cJSON runs out of memory. */
static cJSON *table_entry(const slate__pkg_wtensor *t, uint64_t offset) {
    cJSON *e = cJSON_CreateObject();
    bool ok = e && cJSON_AddStringToObject(e, "name", t->name) &&
              cJSON_AddStringToObject(e, "dtype", slate_dtype_name(t->dtype)) &&
              layout_attrs(e, t);
    cJSON *shape = ok ? cJSON_CreateArray() : NULL;
    for (int d = 0; shape && d < t->n_dims; d++)
        if (!add_item(shape, NULL, cJSON_CreateNumber((double)t->dims[d]))) {
            cJSON_Delete(shape);
            shape = NULL;
        }
    ok = add_item(e, "shape", shape) &&
         cJSON_AddNumberToObject(e, "offset", (double)offset) &&
         cJSON_AddNumberToObject(e, "size", (double)t->nbytes);
    if (!ok) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

cJSON *slate__pkg_meta_with_table(const cJSON *meta, const slate__pkg_wtensor *tensors,
                                  size_t n_tensors, uint64_t *data_size) {
    *data_size = 0;
    cJSON *copy = cJSON_Duplicate(meta, 1);
    cJSON *table = copy ? cJSON_AddArrayToObject(copy, "tensors") : NULL;
    if (!table) goto fail;
    uint64_t off = 0; /* each tensor 64-aligned inside DATA */
    for (size_t i = 0; i < n_tensors; i++) {
        if (!add_item(table, NULL, table_entry(&tensors[i], off))) goto fail;
        off += slate__align_up(tensors[i].nbytes, SLATE__PKG_ALIGN);
    }
    *data_size = off;
    return copy;
fail:
    cJSON_Delete(copy);
    return NULL;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

slate_status slate__pkg_write(const char *path, cJSON *meta, const uint8_t *tok_blob,
                              size_t tok_len, const slate__pkg_wtensor *tensors, size_t n_tensors,
                              bool progress, slate_error *err) {
    slate_status st = SLATE_OK;
    char *json = NULL;
    uint8_t *scratch = NULL;
    slate__atomic_file f = {0};
    uint64_t data_size;
    cJSON *meta_copy = slate__pkg_meta_with_table(meta, tensors, n_tensors, &data_size);
    if (!meta_copy) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory building the tensor table");
        goto done;
    }
    size_t max_tensor = 0;
    for (size_t i = 0; i < n_tensors; i++)
        if (tensors[i].nbytes > max_tensor) max_tensor = tensors[i].nbytes;
    json = cJSON_PrintUnformatted(meta_copy);
    if (!json) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory printing package metadata");
        goto done;
    }
    size_t meta_len = strlen(json);

    const uint32_t n_sections = 3;
    uint64_t off_meta = 64 + 32 * n_sections;
    uint64_t off_tok = off_meta + meta_len;
    uint64_t off_data = slate__align_up(off_tok + tok_len, SLATE__PKG_ALIGN);
    uint64_t file_size = off_data + data_size;

    uint8_t table_bytes[3 * 32];
    memset(table_bytes, 0, sizeof table_bytes);
    const uint32_t kinds[3] = {SLATE__SEC_META, SLATE__SEC_TOKENIZER, SLATE__SEC_DATA};
    const uint64_t offs[3] = {off_meta, off_tok, off_data};
    const uint64_t sizes[3] = {meta_len, tok_len, data_size};
    const uint32_t crcs[3] = {slate__crc32(0, json, meta_len), slate__crc32(0, tok_blob, tok_len),
                              0};
    for (int i = 0; i < 3; i++) {
        uint8_t *e = table_bytes + 32 * i;
        put_u32(e, kinds[i]);
        put_u32(e + 4, kinds[i] == SLATE__SEC_DATA ? SLATE__SEC_NO_CRC : 0);
        put_u64(e + 8, offs[i]);
        put_u64(e + 16, sizes[i]);
        put_u32(e + 24, crcs[i]);
    }
    uint8_t header[64];
    memset(header, 0, sizeof header);
    memcpy(header, SLATE__PKG_MAGIC, 8);
    put_u32(header + 8, SLATE__PKG_VERSION);
    put_u32(header + 12, n_sections);
    put_u64(header + 16, file_size);
    put_u32(header + 24, slate__crc32(0, table_bytes, sizeof table_bytes));

    scratch = slate__malloc_aligned(max_tensor ? max_tensor : 1);
    if (!scratch) {
        st = slate__fail(err, SLATE_E_NOMEM, "out of memory: %zu bytes for the largest tensor",
                         max_tensor);
        goto done;
    }
    if ((st = slate__atomic_open(path, &f, err)) != SLATE_OK) goto done;
    static const uint8_t zeros[SLATE__PKG_ALIGN];
    slate__atomic_write(&f, header, sizeof header);
    slate__atomic_write(&f, table_bytes, sizeof table_bytes);
    slate__atomic_write(&f, json, meta_len);
    slate__atomic_write(&f, tok_blob, tok_len);
    slate__atomic_write(&f, zeros, off_data - (off_tok + tok_len));
    double t0 = slate__now_ms();
    uint64_t written = 0;
    for (size_t i = 0; i < n_tensors && !f.failed; i++) { /* a failed write: commit says why */
        const slate__pkg_wtensor *t = &tensors[i];
        if ((st = t->produce(t->ctx, scratch, err)) != SLATE_OK) {
            slate__atomic_abort(&f);
            goto done;
        }
        slate__atomic_write(&f, scratch, t->nbytes);
        slate__atomic_write(&f, zeros, slate__align_up(t->nbytes, SLATE__PKG_ALIGN) - t->nbytes);
        written += t->nbytes;
        if (progress) {
            double el = (slate__now_ms() - t0) / 1000.0;
            double eta = written ? el * (double)(data_size - written) / (double)written : 0;
            fprintf(stderr, "\r[%zu/%zu] %-40.40s %8.1f MiB  eta %5.1fs", i + 1, n_tensors,
                    t->name, (double)written / (1 << 20), eta);
        }
    }
    if (progress) fprintf(stderr, "\n");
    st = slate__atomic_commit(&f, err);
done:
    slate__free_aligned(scratch);
    cJSON_free(json);
    cJSON_Delete(meta_copy);
    return st;
}
