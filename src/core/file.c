/*
 * file.c - whole-file reads, read-only mappings, and the atomic writer that makes a half-written
 * output impossible: a temp file path.tmp.<unique> created exclusively beside the target (so two
 * writers of one path, or a planted path.tmp symlink, cannot mix or redirect bytes), flushed,
 * fsynced and renamed over the target; removed on any failure, and by
 * slate_remove_partial_outputs() from a signal handler. A target that exists must be a regular
 * file (a device, FIFO or directory is refused, never replaced); a symbolic link is followed,
 * so the file it points to is replaced and the link stays. Inputs are opened with O_NONBLOCK:
 * a FIFO given as a file fails its regular-file check instead of blocking in open().
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *slate__fopen_read(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return fp;
}

size_t slate__file_head(const char *path, void *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    size_t n = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        while (n < cap) {
            ssize_t r = read(fd, (char *)buf + n, cap - n);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            n += (size_t)r;
        }
    }
    close(fd);
    return n;
}

slate_status slate__read_file(const char *path, size_t max_bytes, char **out, size_t *len_out,
                              slate_error *err) {
    *out = NULL;
    FILE *fp = slate__fopen_read(path);
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
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
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

/* Temp files being written, for slate_remove_partial_outputs(): a slot holds a path while its
 * `used` flag is 1. A slot is claimed before the path is copied in and published after, so a
 * signal handler reads only complete paths. */
enum { PENDING_SLOTS = 16 };
static struct {
    atomic_int used; /* 0 free, 1 published, 2 being filled or emptied */
    char path[PATH_MAX];
} g_pending[PENDING_SLOTS];

static int pending_add(const char *path) {
    if (strlen(path) >= PATH_MAX) return -1;
    for (int i = 0; i < PENDING_SLOTS; i++) {
        int z = 0;
        if (atomic_compare_exchange_strong(&g_pending[i].used, &z, 2)) {
            strcpy(g_pending[i].path, path);
            atomic_store(&g_pending[i].used, 1);
            return i;
        }
    }
    return -1; /* more than 16 at once: those are not removed on a signal */
}

static void pending_remove(int slot) {
    if (slot < 0) return;
    atomic_store(&g_pending[slot].used, 2);
    atomic_store(&g_pending[slot].used, 0);
}

void slate_remove_partial_outputs(void) {
    for (int i = 0; i < PENDING_SLOTS; i++) {
        int one = 1;
        if (atomic_compare_exchange_strong(&g_pending[i].used, &one, 2)) {
            unlink(g_pending[i].path); /* async-signal-safe */
            atomic_store(&g_pending[i].used, 0);
        }
    }
}

slate_status slate__atomic_open(const char *path, slate__atomic_file *f, slate_error *err) {
    memset(f, 0, sizeof *f);
    f->pending = -1;
    struct stat st;
    mode_t mode = 0666; /* a new file: as fopen would make it (the umask applies) */
    bool keep_mode = false;
    char *target = NULL;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode)) { /* replace the file the link points to; keep the link */
            target = realpath(path, NULL);
            if (!target || stat(target, &st) != 0)
                return slate__fail(err, SLATE_E_IO, "'%s' is a symbolic link to a missing file",
                                   path);
        }
        if (!S_ISREG(st.st_mode)) {
            free(target);
            return slate__fail(err, SLATE_E_IO, "'%s' exists and is not a regular file; it is "
                               "not replaced", path);
        }
        mode = st.st_mode & 07777;
        keep_mode = true;
    }
    const char *final = target ? target : path;
    size_t n = strlen(final);
    f->final_path = slate__strdup(final);
    f->tmp_path = slate__malloc(n + 32);
    free(target);
    if (!f->final_path || !f->tmp_path) {
        slate__free(f->final_path);
        slate__free(f->tmp_path);
        memset(f, 0, sizeof *f);
        return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    }
    static atomic_uint counter;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(f->tmp_path, n + 32, "%s.tmp.%ld.%u", f->final_path, (long)getpid(),
                 atomic_fetch_add(&counter, 1));
        fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd >= 0) {
        f->pending = pending_add(f->tmp_path);
        if (keep_mode) (void)fchmod(fd, mode);
        f->fp = fdopen(fd, "wb");
        if (!f->fp) close(fd);
    }
    if (!f->fp) {
        slate_status s = slate__fail(err, SLATE_E_IO, "cannot create '%s': %s", f->tmp_path,
                                     strerror(errno));
        if (fd >= 0) remove(f->tmp_path);
        pending_remove(f->pending);
        slate__free(f->final_path);
        slate__free(f->tmp_path);
        memset(f, 0, sizeof *f);
        return s;
    }
    return SLATE_OK;
}

void slate__atomic_write(slate__atomic_file *f, const void *data, size_t len) {
    if (f->failed || !f->fp || len == 0) return;
    if (fwrite(data, 1, len, f->fp) != len) {
        f->failed = true;
        f->error = errno ? errno : EIO; /* commit reports it: errno will have moved on */
    }
}

void slate__atomic_abort(slate__atomic_file *f) {
    if (f->fp) fclose(f->fp);
    if (f->tmp_path) remove(f->tmp_path);
    pending_remove(f->pending);
    slate__free(f->final_path);
    slate__free(f->tmp_path);
    memset(f, 0, sizeof *f);
}

/* Makes a rename into the folder of path durable: without it, a power loss soon after a commit
 * can bring back the old file (and the complete temp beside it). Best effort: a folder that
 * cannot be opened or synced (some file systems refuse fsync on directories) changes nothing,
 * the new file is in place either way. */
static void sync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

slate_status slate__atomic_commit(slate__atomic_file *f, slate_error *err) {
    FILE *fp = f->fp;
    bool ok = !f->failed && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    int e = f->failed ? f->error : errno;
    if (!ok) {
        slate_status st = slate__fail(err, SLATE_E_IO, "writing '%s' failed: %s", f->final_path,
                                      strerror(e));
        slate__atomic_abort(f);
        return st;
    }
    f->fp = NULL;
    if (fclose(fp) != 0 || rename(f->tmp_path, f->final_path) != 0) {
        e = errno;
        slate_status st = slate__fail(err, SLATE_E_IO, "cannot move '%s' into place: %s",
                                      f->tmp_path, strerror(e));
        slate__atomic_abort(f);
        return st;
    }
    sync_parent(f->final_path);
    pending_remove(f->pending);
    slate__free(f->final_path);
    slate__free(f->tmp_path);
    memset(f, 0, sizeof *f);
    return SLATE_OK;
}

/* ---- the public face of the atomic writer -------------------------------------------------- */

struct slate_output {
    slate__atomic_file f;
};

slate_status slate_output_open(const char *path, slate_output **out, slate_error *err) {
    if (out) *out = NULL;
    if (!path || !out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "path and out must not be NULL");
    slate_output *o = slate__malloc(sizeof *o);
    if (!o) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    slate_status s = slate__atomic_open(path, &o->f, err);
    if (s) {
        slate__free(o);
        return s;
    }
    *out = o;
    return SLATE_OK;
}

slate_status slate_output_write(slate_output *out, const void *data, size_t len,
                                slate_error *err) {
    if (!out || (!data && len))
        return slate__fail(err, SLATE_E_INVALID_ARG, "out must not be NULL and data must hold "
                           "len bytes");
    slate__atomic_write(&out->f, data, len);
    if (out->f.failed)
        return slate__fail(err, SLATE_E_IO, "writing '%s' failed: %s", out->f.tmp_path,
                           strerror(out->f.error));
    return SLATE_OK;
}

slate_status slate_output_commit(slate_output *out, slate_error *err) {
    if (!out) return slate__fail(err, SLATE_E_INVALID_ARG, "out must not be NULL");
    slate_status s = slate__atomic_commit(&out->f, err);
    slate__free(out);
    return s;
}

void slate_output_discard(slate_output *out) {
    if (!out) return;
    slate__atomic_abort(&out->f);
    slate__free(out);
}
