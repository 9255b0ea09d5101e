/* pkgutil.c - see pkgutil.h. */
#include "pkgutil.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "pkg/format.h"

uint32_t pu_rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
uint64_t pu_rd64(const uint8_t *p) { return pu_rd32(p) | (uint64_t)pu_rd32(p + 4) << 32; }
void pu_wr32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }
void pu_wr64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i); }

const uint8_t *pu_section(const uint8_t *pkg, uint32_t kind) {
    uint32_t n = pu_rd32(pkg + 12);
    for (uint32_t i = 0; i < n; i++)
        if (pu_rd32(pkg + 64 + 32 * i) == kind) return pkg + 64 + 32 * i;
    return NULL;
}

/* The package bytes with META replaced (CRCs and offsets recomputed). */
uint8_t *pu_rebuild(const uint8_t *pkg, const char *meta, size_t *len_out) {
    const uint8_t *tok = pu_section(pkg, SLATE__SEC_TOKENIZER), *dat = pu_section(pkg, SLATE__SEC_DATA);
    uint64_t tok_off = pu_rd64(tok + 8), tok_len = pu_rd64(tok + 16);
    uint64_t dat_off = pu_rd64(dat + 8), dat_len = pu_rd64(dat + 16);
    size_t ml = strlen(meta), off_meta = 64 + 96, off_tok = off_meta + ml;
    size_t off_dat = (off_tok + tok_len + 63) / 64 * 64, total = off_dat + dat_len;
    uint8_t *b = calloc(1, total);
    memcpy(b, SLATE__PKG_MAGIC, 8);
    pu_wr32(b + 8, SLATE__PKG_VERSION);
    pu_wr32(b + 12, 3);
    pu_wr64(b + 16, total);
    uint32_t kinds[3] = {SLATE__SEC_META, SLATE__SEC_TOKENIZER, SLATE__SEC_DATA};
    uint64_t offs[3] = {off_meta, off_tok, off_dat}, lens[3] = {ml, tok_len, dat_len};
    memcpy(b + off_meta, meta, ml);
    memcpy(b + off_tok, pkg + tok_off, tok_len);
    memcpy(b + off_dat, pkg + dat_off, dat_len);
    for (int i = 0; i < 3; i++) {
        uint8_t *e = b + 64 + 32 * i;
        pu_wr32(e, kinds[i]);
        pu_wr32(e + 4, i == 2 ? SLATE__SEC_NO_CRC : 0);
        pu_wr64(e + 8, offs[i]);
        pu_wr64(e + 16, lens[i]);
        pu_wr32(e + 24, i == 2 ? 0 : slate__crc32(0, b + offs[i], lens[i]));
    }
    pu_wr32(b + 24, slate__crc32(0, b + 64, 96));
    *len_out = total;
    return b;
}


/* Opens pkg with one tensor entry edited by `edit`; expects the status and the culprit. */
void pu_expect_edit(const uint8_t *pkg, const char *tensor, void (*edit)(cJSON *e),
                        slate_status want, const char *msg) {
    const uint8_t *ms = pu_section(pkg, SLATE__SEC_META);
    cJSON *j = cJSON_ParseWithLength((const char *)pkg + pu_rd64(ms + 8), pu_rd64(ms + 16));
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "tensors")) {
        if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, tensor) == 0) edit(e);
    }
    char *text = cJSON_PrintUnformatted(j);
    size_t len;
    uint8_t *b = pu_rebuild(pkg, text, &len);
    long long live = slate__alloc_live_bytes();
    slate_model *m = NULL;
    slate_error err;
    memset(&err, 0, sizeof err);
    slate_status s = slate__model_open_mem(b, len, NULL, &m, &err);
    if (s != want || !strstr(err.message, msg) || !strstr(err.message, tensor))
        fail_msg("expected %s naming '%s' and '%s', got %s: %s", slate_status_name(want), tensor,
                 msg, slate_status_name(s), err.message);
    assert_null(m);
    assert_int_equal(slate__alloc_live_bytes(), live);
    free(b);
    cJSON_free(text);
    cJSON_Delete(j);
}

cJSON *pu_meta(const uint8_t *pkg) {
    const uint8_t *m = pu_section(pkg, SLATE__SEC_META);
    return cJSON_ParseWithLength((const char *)pkg + pu_rd64(m + 8), pu_rd64(m + 16));
}

void pu_view_open(pkgview *v, const char *path) {
    assert_int_equal(slate__read_file(path, (size_t)1 << 30, &v->file, &v->len, NULL), SLATE_OK);
    assert_int_equal(slate__pkg_open_mem((const uint8_t *)v->file, v->len, &v->pkg, NULL), SLATE_OK);
}
void pu_view_close(pkgview *v) {
    slate__pkg_close(&v->pkg);
    slate__free(v->file);
}
const cJSON *pu_view_tensor(const pkgview *v, const char *name) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(v->pkg.json, "tensors")) {
        if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, name) == 0) return e;
    }
    return NULL;
}
const uint8_t *pu_view_data(const pkgview *v, const cJSON *e) {
    return (const uint8_t *)v->file + v->pkg.data_offset +
           (uint64_t)cJSON_GetObjectItem(e, "offset")->valuedouble;
}
