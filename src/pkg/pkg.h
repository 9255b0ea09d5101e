/*
 * pkg.h - the .slate package: reader and writer (internal). Byte layout in format.h and
 * docs/format.md.
 */
#ifndef SLATE_PKG_H
#define SLATE_PKG_H

#include "core/core.h"

/* Reads only the tokenizer section of a package (used by slate_tokenizer_open). Returns OK,
 * E_IO, E_FORMAT, E_UNSUPPORTED, E_NOMEM. */
slate_status slate__pkg_read_tokenizer(const char *path, slate_tokenizer **out, slate_error *err);

#endif /* SLATE_PKG_H */
