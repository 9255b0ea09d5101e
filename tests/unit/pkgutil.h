/* pkgutil.h - helpers for tests that break packages on purpose: find a section, rebuild a
 * package with its META replaced (checksums and offsets recomputed, so the program validator is
 * what must catch the change), and expect a tensor-entry edit to be refused. */
#ifndef SLATE_PKGUTIL_H
#define SLATE_PKGUTIL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "slate.h"
#include "pkg/pkg.h"

uint32_t pu_rd32(const uint8_t *p);
uint64_t pu_rd64(const uint8_t *p);
void pu_wr32(uint8_t *p, uint32_t v);
void pu_wr64(uint8_t *p, uint64_t v);
/* The section-table entry of `kind` (SLATE__SEC_*), or NULL. */
const uint8_t *pu_section(const uint8_t *pkg, uint32_t kind);
/* A malloc'd copy of pkg with META replaced by `meta`; *len_out its size. */
uint8_t *pu_rebuild(const uint8_t *pkg, const char *meta, size_t *len_out);
/* pkg's META, parsed (cJSON_Delete it). */
cJSON *pu_meta(const uint8_t *pkg);
/* Opens pkg with the tensor entry named `tensor` changed by `edit`; fails the test unless the
 * open returns `want` with a message naming both `msg` and the tensor, and leaks nothing. */
void pu_expect_edit(const uint8_t *pkg, const char *tensor, void (*edit)(cJSON *e),
                    slate_status want, const char *msg);

/* A package file read whole and opened (slate__pkg_open_mem) to look at its tensor table and
 * bytes; the helpers fail the test when the file cannot be read or opened. */
typedef struct pkgview {
    char *file;
    size_t len;
    slate__pkg pkg;
} pkgview;
void pu_view_open(pkgview *v, const char *path);
void pu_view_close(pkgview *v);
/* The META tensor entry named `name`, or NULL. */
const cJSON *pu_view_tensor(const pkgview *v, const char *name);
/* The bytes of tensor entry e in the DATA section. */
const uint8_t *pu_view_data(const pkgview *v, const cJSON *e);

slate_status slate__model_open_mem(const uint8_t *data, size_t size,
                                   const slate_model_params *params, slate_model **out,
                                   slate_error *err);

#endif
