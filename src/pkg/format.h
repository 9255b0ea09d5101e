/*
 * format.h - the bytes of a .slate package (version 1). docs/format.md says the same in prose.
 *
 * All integers little-endian. Layout:
 *
 *   offset 0    header, 64 bytes (slate__pkg_header)
 *   offset 64   section table: n_sections x 32 bytes (slate__pkg_section)
 *   ...         sections, each at the offset its table entry gives; they do not overlap
 *
 * Section kinds (each exactly once):
 *   1 META       UTF-8 JSON: architecture, hyper-parameters, allowed shapes, inputs, outputs,
 *                states, activations, tensor table (name, dtype, shape, offset in DATA, size),
 *                program (ordered ops over named tensors), special tokens (bos, eos, stop ids),
 *                chat template. CRC-32 checked at open.
 *   2 TOKENIZER  binary blob, layout in src/tok/serialize.c and docs/format.md. CRC-32 checked.
 *   3 DATA       weight bytes. Starts at a multiple of 64; every tensor's offset (relative to the
 *                section start) is a multiple of 64 so kernels read weights in place. Not
 *                checksummed (flag SLATE__SEC_NO_CRC): hashing gigabytes at every open would
 *                cost the open-time budget; sizes and ranges are checked instead.
 *
 * header.table_crc is the CRC-32 (zlib polynomial) of the section table bytes. header.file_size
 * must equal the file's size, which catches truncation before anything else is read.
 * Readers refuse versions they do not know (E_UNSUPPORTED) and any reserved byte that is not 0.
 */
#ifndef SLATE_PKG_FORMAT_H
#define SLATE_PKG_FORMAT_H

#include <assert.h>
#include <stdint.h>

#define SLATE__PKG_MAGIC "SLATEPKG"
#define SLATE__STATE_MAGIC "SLATESTA" /* state files (src/state/persist.c, docs/format.md) */
#define SLATE__PKG_VERSION 1u
#define SLATE__PKG_ALIGN 64u
#define SLATE__PKG_MAX_SECTIONS 16u
#define SLATE__PKG_MAX_META (64u << 20)  /* 64 MiB of JSON is far beyond any real program */
#define SLATE__PKG_MAX_TOKENIZER (256u << 20)

enum {
    SLATE__SEC_META = 1,
    SLATE__SEC_TOKENIZER = 2,
    SLATE__SEC_DATA = 3,
};
enum { SLATE__SEC_NO_CRC = 1u << 0 };

typedef struct slate__pkg_header {
    char magic[8];        /* "SLATEPKG" */
    uint32_t version;     /* SLATE__PKG_VERSION */
    uint32_t n_sections;  /* 1..SLATE__PKG_MAX_SECTIONS */
    uint64_t file_size;   /* total bytes of the file */
    uint32_t table_crc;   /* CRC-32 of the section table */
    uint32_t reserved0;   /* 0 */
    uint8_t reserved[32]; /* 0 */
} slate__pkg_header;
static_assert(sizeof(slate__pkg_header) == 64, "package header is 64 bytes");

typedef struct slate__pkg_section {
    uint32_t kind;     /* SLATE__SEC_* */
    uint32_t flags;    /* SLATE__SEC_NO_CRC or 0 */
    uint64_t offset;   /* absolute, from the start of the file */
    uint64_t size;     /* bytes */
    uint32_t crc;      /* CRC-32 of the section bytes (0 with SLATE__SEC_NO_CRC) */
    uint32_t reserved; /* 0 */
} slate__pkg_section;
static_assert(sizeof(slate__pkg_section) == 32, "section entry is 32 bytes");

#endif /* SLATE_PKG_FORMAT_H */
