/*
 * read.c - the validating package reader. The container is checked before any content is
 * trusted: size against header.file_size (truncation), magic, version, reserved bytes, the
 * section table's CRC, each section's range (overflow-safe) and alignment, overlaps, duplicate
 * or missing kinds, then the CRC of META and TOKENIZER. META is parsed as JSON here; what it
 * says (tensors, program) is validated by the program compiler (src/exec/program.c).
 * Bytes come from a file through pread (weights are not touched here) or from memory.
 */
#define _POSIX_C_SOURCE 200809L
#include "pkg.h"
#include "format.h"
#include "tok/tok.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool read_at(const slate__pkg *p, uint64_t off, size_t len, void *dst) {
    if (off > p->file_size || len > p->file_size - off) return false;
    if (p->mem) {
        memcpy(dst, p->mem + off, len);
        return true;
    }
    uint8_t *d = dst;
    while (len > 0) {
        ssize_t n = pread(p->fd, d, len, (off_t)off);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            if (n == 0) errno = 0; /* end of file: no system error */
            return false;
        }
        d += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return true;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

static const char *kind_name(uint32_t k) {
    switch (k) {
    case SLATE__SEC_META: return "META";
    case SLATE__SEC_TOKENIZER: return "TOKENIZER";
    case SLATE__SEC_DATA: return "DATA";
    }
    return "?";
}

slate__file_kind slate__pkg_file_kind(const uint8_t *h, size_t n, uint64_t size) {
    if (n >= 8 && memcmp(h, SLATE__PKG_MAGIC, 8) == 0) return SLATE__FILE_PACKAGE;
    if (n >= 8 && memcmp(h, SLATE__STATE_MAGIC, 8) == 0) return SLATE__FILE_STATE;
    if (n >= 4 && memcmp(h, "GGUF", 4) == 0) return SLATE__FILE_GGUF;
    /* safetensors: a little-endian u64 header length that fits the file, then '{'. */
    if (n >= 9 && le64(h) >= 2 && size >= 9 && le64(h) <= size - 8 && h[8] == '{')
        return SLATE__FILE_SAFETENSORS;
    /* '{' then a quote, white space or '}': a llama2.c dim whose low byte is '{' is not JSON. */
    if (n >= 2 && h[0] == '{' && memchr("\" \t\r\n}", h[1], 6)) return SLATE__FILE_JSON;
    /* llama2.c: seven int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, whose
     * sign says whether the classifier is shared, seq_len). */
    if (n < 28) return SLATE__FILE_OTHER;
    int32_t v[7];
    for (int i = 0; i < 7; i++) v[i] = (int32_t)le32(h + 4 * i);
    int32_t vocab = v[5] < 0 && v[5] != INT32_MIN ? -v[5] : v[5];
    if (v[0] > 0 && v[0] <= 65536 && v[1] > 0 && v[1] <= 1 << 20 && v[2] > 0 && v[2] <= 1024 &&
        v[3] > 0 && v[3] <= 1024 && v[4] > 0 && v[4] <= v[3] && vocab > 0 && vocab <= 1 << 22 &&
        v[6] > 0 && v[6] <= 1 << 24)
        return SLATE__FILE_LLAMA2C;
    return SLATE__FILE_OTHER;
}

/* The end of the bad-magic message: what the file is when slate knows the kind. */
static const char *foreign_hint(const uint8_t *h, uint64_t size) {
    switch (slate__pkg_file_kind(h, 64, size)) {
    case SLATE__FILE_GGUF:
        return "; it is a GGUF file: convert it first (slate convert FILE -o OUT.slate)";
    case SLATE__FILE_STATE:
        return "; it is a slate state file (a saved conversation or prompt cache), not a model";
    case SLATE__FILE_SAFETENSORS:
        return "; it is a safetensors file: convert its Hugging Face folder first (slate "
               "convert DIR -o OUT.slate)";
    case SLATE__FILE_JSON:
        return "; it looks like JSON: convert the Hugging Face folder it belongs to first (slate "
               "convert DIR -o OUT.slate)";
    case SLATE__FILE_LLAMA2C:
        return "; it looks like a llama2.c checkpoint: convert it first (slate convert FILE -o "
               "OUT.slate)";
    default: return "";
    }
}

static slate_status parse(slate__pkg *p, const char *path, slate_error *err) {
    uint8_t h[64];
    if (p->file_size < 64 || !read_at(p, 0, 64, h))
        return slate__fail_at(err, SLATE_E_FORMAT, 0,
                              "package is %llu bytes, smaller than its 64-byte header",
                              (unsigned long long)p->file_size);
    if (memcmp(h, SLATE__PKG_MAGIC, 8) != 0)
        return slate__fail_at(err, SLATE_E_FORMAT, 0, "%s%.256s%snot a slate package: bad magic "
                              "(expected \"SLATEPKG\")%s", path ? "'" : "", path ? path : "",
                              path ? "' is " : "", foreign_hint(h, p->file_size));
    uint32_t version = le32(h + 8);
    if (version != SLATE__PKG_VERSION)
        return slate__fail_at(err, SLATE_E_UNSUPPORTED, 8,
                              "package format version %u is not supported (this slate reads "
                              "version %u)",
                              version, SLATE__PKG_VERSION);
    uint32_t n_sections = le32(h + 12);
    uint64_t file_size = le64(h + 16);
    if (file_size != p->file_size)
        return slate__fail_at(err, SLATE_E_FORMAT, 16,
                              "package header says %llu bytes but the file has %llu (%s)",
                              (unsigned long long)file_size, (unsigned long long)p->file_size,
                              file_size > p->file_size ? "truncated?" : "trailing garbage?");
    for (int i = 28; i < 64; i++)
        if (h[i] != 0)
            return slate__fail_at(err, SLATE_E_FORMAT, (uint64_t)i,
                                  "reserved header byte %d is %u, expected 0", i, h[i]);
    if (n_sections < 1 || n_sections > SLATE__PKG_MAX_SECTIONS)
        return slate__fail_at(err, SLATE_E_FORMAT, 12, "section count %u outside 1..%u",
                              n_sections, SLATE__PKG_MAX_SECTIONS);
    uint8_t table[SLATE__PKG_MAX_SECTIONS * 32];
    size_t table_len = (size_t)n_sections * 32;
    if (!read_at(p, 64, table_len, table))
        return slate__fail_at(err, SLATE_E_FORMAT, 64, "section table (%zu bytes) runs past the "
                              "end of the file", table_len);
    uint32_t crc = slate__crc32(0, table, table_len);
    if (crc != le32(h + 24))
        return slate__fail_at(err, SLATE_E_FORMAT, 24,
                              "section table checksum mismatch: stored %08x, computed %08x "
                              "(corrupt package)",
                              le32(h + 24), crc);
    uint64_t offs[4] = {0}, sizes[4] = {0};
    uint32_t crcs[4] = {0}, flags[4] = {0};
    bool seen[4] = {false};
    uint64_t table_end = 64 + table_len;
    for (uint32_t i = 0; i < n_sections; i++) {
        const uint8_t *e = table + 32 * i;
        uint64_t at = 64 + 32 * (uint64_t)i;
        uint32_t kind = le32(e);
        if (kind < SLATE__SEC_META || kind > SLATE__SEC_DATA)
            return slate__fail_at(err, SLATE_E_FORMAT, at, "section %u has unknown kind %u", i,
                                  kind);
        if (seen[kind])
            return slate__fail_at(err, SLATE_E_FORMAT, at, "section %s appears twice",
                                  kind_name(kind));
        seen[kind] = true;
        flags[kind] = le32(e + 4);
        offs[kind] = le64(e + 8);
        sizes[kind] = le64(e + 16);
        crcs[kind] = le32(e + 24);
        if (le32(e + 28) != 0 || (flags[kind] & ~(uint32_t)SLATE__SEC_NO_CRC))
            return slate__fail_at(err, SLATE_E_FORMAT, at, "section %s has reserved bits set",
                                  kind_name(kind));
        if (offs[kind] < table_end || offs[kind] > p->file_size ||
            sizes[kind] > p->file_size - offs[kind])
            return slate__fail_at(err, SLATE_E_FORMAT, at,
                                  "section %s [offset %llu, %llu bytes] lies outside the file "
                                  "body [%llu, %llu)",
                                  kind_name(kind), (unsigned long long)offs[kind],
                                  (unsigned long long)sizes[kind], (unsigned long long)table_end,
                                  (unsigned long long)p->file_size);
    }
    for (uint32_t k = SLATE__SEC_META; k <= SLATE__SEC_DATA; k++)
        if (!seen[k])
            return slate__fail_at(err, SLATE_E_FORMAT, 64, "section %s is missing", kind_name(k));
    for (uint32_t a = 1; a <= 3; a++)
        for (uint32_t b = a + 1; b <= 3; b++)
            if (offs[a] < offs[b] + sizes[b] && offs[b] < offs[a] + sizes[a])
                return slate__fail_at(err, SLATE_E_FORMAT, 64, "sections %s and %s overlap",
                                      kind_name(a), kind_name(b));
    if (offs[SLATE__SEC_DATA] % SLATE__PKG_ALIGN != 0)
        return slate__fail_at(err, SLATE_E_FORMAT, offs[SLATE__SEC_DATA],
                              "DATA section offset %llu is not a multiple of %u",
                              (unsigned long long)offs[SLATE__SEC_DATA], SLATE__PKG_ALIGN);
    if (sizes[SLATE__SEC_META] > SLATE__PKG_MAX_META)
        return slate__fail_at(err, SLATE_E_FORMAT, offs[SLATE__SEC_META],
                              "META section is %llu bytes, more than the %u allowed",
                              (unsigned long long)sizes[SLATE__SEC_META], SLATE__PKG_MAX_META);
    if (sizes[SLATE__SEC_TOKENIZER] > SLATE__PKG_MAX_TOKENIZER)
        return slate__fail_at(err, SLATE_E_FORMAT, offs[SLATE__SEC_TOKENIZER],
                              "TOKENIZER section is %llu bytes, more than the %u allowed",
                              (unsigned long long)sizes[SLATE__SEC_TOKENIZER],
                              SLATE__PKG_MAX_TOKENIZER);
    if (flags[SLATE__SEC_META] || flags[SLATE__SEC_TOKENIZER])
        return slate__fail_at(err, SLATE_E_FORMAT, 64, "META and TOKENIZER must be checksummed");

    p->meta_len = (size_t)sizes[SLATE__SEC_META];
    p->meta = slate__malloc(p->meta_len + 1);
    p->tok_len = (size_t)sizes[SLATE__SEC_TOKENIZER];
    p->tok = slate__malloc(p->tok_len);
    if (!p->meta || !p->tok) return slate__fail(err, SLATE_E_NOMEM, "out of memory reading "
                                                "package metadata");
    errno = 0; /* read_at leaves it 0 when the file ends early */
    if (!read_at(p, offs[SLATE__SEC_META], p->meta_len, p->meta) ||
        !read_at(p, offs[SLATE__SEC_TOKENIZER], p->tok_len, p->tok))
        return slate__fail(err, SLATE_E_IO, "cannot read the package's META / TOKENIZER "
                           "sections (bytes %llu.. and %llu..): %s", (unsigned long long)
                           offs[SLATE__SEC_META], (unsigned long long)offs[SLATE__SEC_TOKENIZER],
                           errno ? strerror(errno) : "the file is shorter than its header says "
                           "(changed while it was read?)");
    p->meta[p->meta_len] = '\0';
    if ((crc = slate__crc32(0, p->meta, p->meta_len)) != crcs[SLATE__SEC_META])
        return slate__fail_at(err, SLATE_E_FORMAT, offs[SLATE__SEC_META],
                              "META checksum mismatch: stored %08x, computed %08x (corrupt "
                              "package)",
                              crcs[SLATE__SEC_META], crc);
    if ((crc = slate__crc32(0, p->tok, p->tok_len)) != crcs[SLATE__SEC_TOKENIZER])
        return slate__fail_at(err, SLATE_E_FORMAT, offs[SLATE__SEC_TOKENIZER],
                              "TOKENIZER checksum mismatch: stored %08x, computed %08x (corrupt "
                              "package)",
                              crcs[SLATE__SEC_TOKENIZER], crc);
    if (strlen(p->meta) != p->meta_len)
        return slate__fail_at(err, SLATE_E_FORMAT, offs[SLATE__SEC_META],
                              "META section contains a NUL byte");
    const char *end = NULL;
    p->json = cJSON_ParseWithOpts(p->meta, &end, 1);
    if (!p->json || !cJSON_IsObject(p->json)) {
        size_t at = end ? (size_t)(end - p->meta) : 0;
        return slate__fail_at(err, SLATE_E_FORMAT, offs[SLATE__SEC_META] + at,
                              "META section is not a JSON object (error near byte %zu of it)",
                              at);
    }
    p->data_offset = offs[SLATE__SEC_DATA];
    p->data_size = sizes[SLATE__SEC_DATA];
    return SLATE_OK;
}

void slate__pkg_close(slate__pkg *p) {
    if (!p) return;
    if (p->fd >= 0) close(p->fd);
    slate__free(p->meta);
    slate__free(p->tok);
    cJSON_Delete(p->json);
    memset(p, 0, sizeof *p);
    p->fd = -1;
}

slate_status slate__pkg_open(const char *path, slate__pkg *p, slate_error *err) {
    memset(p, 0, sizeof *p);
    p->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO fails the check below */
    if (p->fd < 0) return slate__fail(err, SLATE_E_IO, "cannot open '%s': %s", path,
                                      strerror(errno));
    struct stat st;
    if (fstat(p->fd, &st) != 0) {
        int e = errno;
        slate__pkg_close(p);
        return slate__fail(err, SLATE_E_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        bool dir = S_ISDIR(st.st_mode);
        slate__pkg_close(p);
        if (dir)
            return slate__fail(err, SLATE_E_IO, "'%s' is a directory, not a slate package (a "
                               "Hugging Face folder is converted first: slate convert DIR -o "
                               "OUT.slate)", path);
        return slate__fail(err, SLATE_E_IO, "'%s' is not a regular file", path);
    }
    p->file_size = (uint64_t)st.st_size;
    slate_status s = parse(p, path, err);
    if (s != SLATE_OK) slate__pkg_close(p);
    return s;
}

slate_status slate__pkg_open_mem(const uint8_t *data, size_t size, slate__pkg *p,
                                 slate_error *err) {
    memset(p, 0, sizeof *p);
    p->fd = -1;
    p->mem = data;
    p->file_size = size;
    slate_status s = parse(p, NULL, err);
    if (s != SLATE_OK) slate__pkg_close(p);
    return s;
}

slate_status slate__pkg_read_tokenizer(const char *path, slate_tokenizer **out,
                                       slate_error *err) {
    *out = NULL;
    slate__pkg p;
    slate_status s = slate__pkg_open(path, &p, err);
    if (s != SLATE_OK) return s;
    s = slate__tok_deserialize(p.tok, p.tok_len, out, err);
    slate__pkg_close(&p);
    return s;
}
