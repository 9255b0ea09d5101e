/*
 * file.c - whole-file reads, read-only mappings, and the atomic writer (path.tmp, flush, fsync,
 * rename; the temp file is removed on any failure) that makes a half-written output impossible.
 */
#define _POSIX_C_SOURCE 200809L
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

slate_status slate__read_file(const char *path, size_t max_bytes, char **out, size_t *len_out,
                              slate_error *err) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return slate__fail(err, SLATE_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return slate__fail(err, SLATE_E_IO, "'%s' is not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size > max_bytes) {
        fclose(fp);
        return slate__fail(err, SLATE_E_FORMAT, "'%s' is %zu bytes, more than the %zu allowed",
                           path, size, max_bytes);
    }
    char *buf = slate__malloc(size + 1);
    if (!buf) {
        fclose(fp);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory reading '%s' (%zu bytes)", path,
                           size);
    }
    size_t got = fread(buf, 1, size, fp);
    fclose(fp);
    if (got != size) {
        slate__free(buf);
        return slate__fail(err, SLATE_E_IO, "short read on '%s': %zu of %zu bytes", path, got,
                           size);
    }
    buf[size] = '\0';
    *out = buf;
    if (len_out) *len_out = size;
    return SLATE_OK;
}

slate_status slate__map_open(const char *path, slate__map *m, slate_error *err) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return slate__fail(err, SLATE_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return slate__fail(err, SLATE_E_IO, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return slate__fail(err, SLATE_E_FORMAT, "'%s' is empty", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return slate__fail(err, SLATE_E_IO, "cannot map '%s': %s", path, strerror(errno));
    m->data = p;
    m->size = (size_t)st.st_size;
    return SLATE_OK;
}

void slate__map_close(slate__map *m) {
    if (m->data) munmap((void *)m->data, m->size);
    memset(m, 0, sizeof *m);
}

slate_status slate__atomic_open(const char *path, slate__atomic_file *f, slate_error *err) {
    memset(f, 0, sizeof *f);
    size_t n = strlen(path);
    f->final_path = slate__strdup(path);
    f->tmp_path = slate__malloc(n + 5);
    if (!f->final_path || !f->tmp_path) {
        slate__free(f->final_path);
        slate__free(f->tmp_path);
        memset(f, 0, sizeof *f);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    }
    memcpy(f->tmp_path, path, n);
    memcpy(f->tmp_path + n, ".tmp", 5);
    f->fp = fopen(f->tmp_path, "wb");
    if (!f->fp) {
        slate_status st = slate__fail(err, SLATE_E_IO, "cannot create '%s': %s", f->tmp_path,
                                      strerror(errno));
        slate__free(f->final_path);
        slate__free(f->tmp_path);
        memset(f, 0, sizeof *f);
        return st;
    }
    return SLATE_OK;
}

void slate__atomic_write(slate__atomic_file *f, const void *data, size_t len) {
    if (f->failed || !f->fp || len == 0) return;
    if (fwrite(data, 1, len, f->fp) != len) f->failed = true;
}

void slate__atomic_abort(slate__atomic_file *f) {
    if (f->fp) fclose(f->fp);
    if (f->tmp_path) remove(f->tmp_path);
    slate__free(f->final_path);
    slate__free(f->tmp_path);
    memset(f, 0, sizeof *f);
}

slate_status slate__atomic_commit(slate__atomic_file *f, slate_error *err) {
    FILE *fp = f->fp;
    bool ok = !f->failed && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    int e = errno;
    if (!ok) {
        slate__atomic_abort(f);
        return slate__fail(err, SLATE_E_IO, "writing failed: %s", strerror(e));
    }
    f->fp = NULL;
    if (fclose(fp) != 0 || rename(f->tmp_path, f->final_path) != 0) {
        e = errno;
        slate_status st = slate__fail(err, SLATE_E_IO, "cannot move '%s' into place: %s",
                                      f->tmp_path, strerror(e));
        slate__atomic_abort(f);
        return st;
    }
    slate__free(f->final_path);
    slate__free(f->tmp_path);
    memset(f, 0, sizeof *f);
    return SLATE_OK;
}
