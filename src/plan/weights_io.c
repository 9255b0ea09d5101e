/*
 * weights_io.c - reads a package's DATA section into anonymous memory (slate_model_open's
 * default; load.c). Two ways to read a file, chosen per chunk of 64 MiB:
 *   - buffered pread, where the chunk's pages are in the page cache (a warm open): a copy at
 *     memory speed;
 *   - O_DIRECT reads of whole aligned blocks, where they are not (a cold open): the disk's
 *     bandwidth, with no second copy of the weights left in the page cache.
 * Residency comes from mincore() on a read-only mapping of the file (it faults nothing in).
 *
 * Why: buffered reads of a cold file go through the kernel's readahead in small requests. On
 * the target VM that read a 0.69 GB package at 0.5-0.9 GB/s, where 4 MiB O_DIRECT reads ran at
 * 1.4 GB/s. The VM's host also pages out cold, unmapped page-cache pages (DAMON, pageout of
 * pages unused for about 6 s, up to 128 MB/s). So a "warm" second open found part of the file
 * gone and took 1.1 s. Reading uncached chunks directly keeps a cold or half-evicted open near
 * the disk's bandwidth. It also leaves no redundant page-cache copy competing with the weights
 * for RAM on a small device. Chunks with at least half of their pages cached are copied.
 *
 * O_DIRECT needs the buffer, the file offset and the length aligned to the device's logical
 * block: the buffer starts on a 4096-aligned address that stands for the 4096-aligned file
 * offset at or before DATA, and has room for the last block rounded up. A file system that
 * refuses O_DIRECT (open or read fails with EINVAL) falls back to buffered reads.
 * SLATE_LOAD_IO=buffered|direct|auto (default auto) forces one way, for tests and benchmarks.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include "plan/weights_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALIGN ((uint64_t)4096)          /* O_DIRECT alignment (any logical block up to 4 KiB) */
#define CHUNK ((uint64_t)64 << 20)      /* residency is decided per chunk */

typedef enum io_mode { IO_AUTO, IO_BUFFERED, IO_DIRECT } io_mode;

static io_mode mode_from_env(void) {
    const char *e = getenv("SLATE_LOAD_IO");
    if (e && strcmp(e, "buffered") == 0) return IO_BUFFERED;
    if (e && strcmp(e, "direct") == 0) return IO_DIRECT;
    return IO_AUTO;
}

/* Reads at least need bytes at off into dst through fd, asking for up to want (>= need): 0, or
 * an errno (EIO for a file that ends early). direct: fd is O_DIRECT, off and want are aligned,
 * and a short read that stops off the alignment is EINVAL (the file system wants another
 * alignment or no O_DIRECT at all; a file may still end inside the last block). */
static int read_range(int fd, uint8_t *dst, uint64_t off, uint64_t want, uint64_t need,
                      bool direct) {
    uint64_t done = 0;
    while (done < need) {
        ssize_t n = pread(fd, dst + done, (size_t)(want - done), (off_t)(off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno;
        if (n == 0) return EIO;
        done += (uint64_t)n;
        if (direct && done < need && done % ALIGN) return EINVAL;
    }
    return 0;
}

/* Share of the pages of [off, off + len) in the page cache, from a mapping of the file (NULL:
 * unknown, counted as cached so the read stays buffered as before). */
static double resident_share(const uint8_t *map, uint64_t off, uint64_t len, long page) {
    if (!map) return 1.0;
    uint64_t a = off & ~(uint64_t)(page - 1), n = (off + len - a + (uint64_t)page - 1) / (uint64_t)page;
    unsigned char vec[4096];
    uint64_t in = 0, seen = 0;
    while (seen < n) {
        uint64_t k = n - seen < sizeof vec ? n - seen : sizeof vec;
        if (mincore((void *)(map + a + seen * (uint64_t)page), (size_t)(k * (uint64_t)page), vec))
            return 1.0;
        for (uint64_t i = 0; i < k; i++) in += vec[i] & 1;
        seen += k;
    }
    return n ? (double)in / (double)n : 1.0;
}

slate_status slate__read_weights(int fd, const char *path, uint64_t file_size, uint64_t off,
                                 uint64_t size, slate__weights_buf *out, slate_error *err) {
    memset(out, 0, sizeof *out);
    uint64_t head = off % ALIGN;             /* bytes of the first block before DATA */
    uint64_t total = head + size + ALIGN;    /* + the last block rounded up */
    if (total < size || total > SIZE_MAX - ALIGN)
        return slate__fail(err, SLATE_E_NOMEM, "weights of %llu bytes do not fit in memory",
                           (unsigned long long)size);
    out->alloc = slate__malloc_aligned((size_t)(total + ALIGN));
    if (!out->alloc)
        return slate__fail(err, SLATE_E_NOMEM, "out of memory: %llu bytes for the weights",
                           (unsigned long long)size);
    uint8_t *base = (uint8_t *)(((uintptr_t)out->alloc + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    out->data = base + head;
#ifdef MADV_HUGEPAGE
    if (!getenv("SLATE_NO_HUGEPAGES")) {
        /* Transparent huge pages for the whole 2 MiB pages inside the buffer (the kernel's
         * default mode here is "madvise"), asked before the pages are first touched. */
        uintptr_t a = ((uintptr_t)base + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1);
        uintptr_t e = ((uintptr_t)base + total) & ~(uintptr_t)((2u << 20) - 1);
        if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
#endif
    io_mode mode = mode_from_env();
    int dfd = -1;
    if (mode != IO_BUFFERED && size > 0) {
        dfd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        struct stat a, b;
        if (dfd >= 0 && (fstat(dfd, &a) || fstat(fd, &b) || a.st_dev != b.st_dev ||
                         a.st_ino != b.st_ino)) { /* not the file we validated: do not use it */
            close(dfd);
            dfd = -1;
        }
    }
    const uint8_t *map = NULL;
    long page = sysconf(_SC_PAGESIZE);
    if (dfd >= 0 && mode == IO_AUTO && page > 0) {
        void *p = mmap(NULL, (size_t)file_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) map = p;
    }
    uint64_t start = off - head, end = off + size;
    /* Every chunk's way is decided before the first read: a buffered read of one chunk lets
     * the kernel's readahead pull in the start of the next (8 MiB on the VMs here), which
     * would then look cached and be read through the page cache. */
    uint64_t nchunks = (end - start + CHUNK - 1) / CHUNK;
    bool *direct_at = NULL;
    if (dfd >= 0 && nchunks > 0) {
        direct_at = slate__calloc((size_t)nchunks, sizeof *direct_at);
        if (!direct_at) {
            close(dfd);
            if (map) munmap((void *)map, (size_t)file_size);
            slate__free_aligned(out->alloc);
            memset(out, 0, sizeof *out);
            return slate__fail(err, SLATE_E_NOMEM, "out of memory reading the weights");
        }
        for (uint64_t i = 0; i < nchunks; i++) {
            uint64_t c = start + i * CHUNK, len = end - c < CHUNK ? end - c : CHUNK;
            direct_at[i] = mode == IO_DIRECT || resident_share(map, c, len, page) < 0.5;
        }
    }
    if (map) munmap((void *)map, (size_t)file_size);
    int e = 0;
    for (uint64_t c = start; c < end && !e; c += CHUNK) {
        uint64_t len = end - c < CHUNK ? end - c : CHUNK;
        uint8_t *dst = base + (c - start);
        bool direct = dfd >= 0 && direct_at[(c - start) / CHUNK];
        if (direct) {
            e = read_range(dfd, dst, c, (len + ALIGN - 1) & ~(ALIGN - 1), len, true);
            if (e == EINVAL) { /* the file system wants none of it: buffered from here on */
                close(dfd);
                dfd = -1;
                direct = false;
                e = 0;
            }
        }
        uint64_t from = c < off ? off : c; /* DATA's part of the chunk starts here */
        if (!direct) /* buffered reads skip the first chunk's head */
            e = read_range(fd, base + (from - start), from, c + len - from, c + len - from,
                           false);
        if (!e) *(direct ? &out->direct_bytes : &out->cached_bytes) += c + len - from;
    }
    slate__free(direct_at);
    if (dfd >= 0) close(dfd);
    if (e) {
        slate__free_aligned(out->alloc);
        memset(out, 0, sizeof *out);
        return slate__fail(err, SLATE_E_IO, "reading the weights of '%s' failed: %s", path,
                           e == EIO ? "the file ends early or the device failed" : strerror(e));
    }
    return SLATE_OK;
}
