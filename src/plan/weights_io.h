/*
 * weights_io.h - reading a package's DATA into anonymous memory (weights_io.c): O_DIRECT for
 * the chunks that are not in the page cache, buffered reads for those that are.
 */
#ifndef SLATE_WEIGHTS_IO_H
#define SLATE_WEIGHTS_IO_H

#include "core/core.h"

#include <stdint.h>

typedef struct slate__weights_buf {
    uint8_t *alloc;        /* free with slate__free_aligned */
    uint8_t *data;         /* DATA's first byte (64-aligned), inside alloc */
    uint64_t direct_bytes; /* bytes of DATA read with O_DIRECT */
    uint64_t cached_bytes; /* bytes of DATA read through the page cache */
} slate__weights_buf;

/* Reads the size bytes at file offset off (64-aligned) of the open file fd, named path (opened
 * again with O_DIRECT), whose size is file_size, into new memory. On failure nothing is left
 * allocated and err says what went wrong (SLATE_E_NOMEM, SLATE_E_IO). */
slate_status slate__read_weights(int fd, const char *path, uint64_t file_size, uint64_t off,
                                 uint64_t size, slate__weights_buf *out, slate_error *err);

#endif /* SLATE_WEIGHTS_IO_H */
