/*
 * core.h - internal helpers shared by every module: error reporting, the counted allocator
 * (with fault injection for tests), arenas, half-precision conversion, CRC-32, time, files.
 * Internal: not part of the public API.
 */
#ifndef SLATE_CORE_H
#define SLATE_CORE_H

#include "slate.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__)
#define SLATE__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SLATE__PRINTF(a, b)
#endif

/* Fills err (if not NULL) with code and a formatted message; returns code. The natural place for
 * a breakpoint when chasing a failure. */
slate_status slate__fail(slate_error *err, slate_status code, const char *fmt, ...)
    SLATE__PRINTF(3, 4);
/* Same, with a byte offset into the input file. */
slate_status slate__fail_at(slate_error *err, slate_status code, uint64_t offset,
                            const char *fmt, ...) SLATE__PRINTF(4, 5);
/* Makes err's message name the file it is about: prefixes "'PATH': " unless the message already
 * quotes 'PATH' (as "cannot open 'PATH': ..." does), so a reader that only sees bytes (the GGUF
 * parser) and the caller that knows the path together name the file exactly once. Keeps the
 * code and offset; the end of a message near the size limit may be cut. No-op when err or path
 * is NULL, path is empty, or err holds SLATE_OK. */
void slate__error_name_file(slate_error *err, const char *path);
/* Resets err to SLATE_OK with an empty message. */
void slate__error_clear(slate_error *err);

/* Broken invariant of our own: E_INTERNAL naming file:line (never abort on release builds). */
#define SLATE__INTERNAL(err, what) \
    slate__fail((err), SLATE_E_INTERNAL, "internal error at %s:%d: %s", __FILE__, __LINE__, (what))

/* ---- counted allocator ------------------------------------------------------------------ */
/* All heap allocation goes through these. They count live bytes and calls, and can be told to
 * fail the Nth call (tests). slate__malloc(0) returns a unique non-NULL pointer. */
void *slate__malloc(size_t size);
void *slate__calloc(size_t n, size_t size);
void *slate__realloc(void *ptr, size_t size);
void slate__free(void *ptr);
char *slate__strdup(const char *s);
char *slate__strndup(const char *s, size_t n);
/* 64-byte aligned allocation (for tensors). Free with slate__free_aligned. */
void *slate__malloc_aligned(size_t size);
void slate__free_aligned(void *ptr);

/* Test hooks: fail the n-th allocation call from now on (1 = the next one), 0 = never. */
void slate__alloc_fail_after(long n);
long slate__alloc_calls(void);       /* allocation calls since start */
long long slate__alloc_live_bytes(void); /* bytes currently allocated */

/* Overflow-safe size arithmetic: returns false on overflow. */
static inline bool slate__mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}
static inline bool slate__add_size(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return false;
    *out = a + b;
    return true;
}
static inline size_t slate__align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ---- growable byte buffer (writers) ------------------------------------------------------ */
typedef struct slate__buf {
    uint8_t *data;
    size_t len, cap;
    bool failed; /* an append ran out of memory; later appends are no-ops */
} slate__buf;
void slate__buf_append(slate__buf *b, const void *data, size_t len);
void slate__buf_u32(slate__buf *b, uint32_t v);
void slate__buf_i32(slate__buf *b, int32_t v);
void slate__buf_u64(slate__buf *b, uint64_t v);
void slate__buf_f32(slate__buf *b, float v);
void slate__buf_free(slate__buf *b);

/* ---- little-endian reader over untrusted bytes ------------------------------------------ */
typedef struct slate__rd {
    const uint8_t *data;
    size_t len, pos;
    bool failed; /* a read ran past the end; values read after that are 0 */
} slate__rd;
uint8_t slate__rd_u8(slate__rd *r);
uint32_t slate__rd_u32(slate__rd *r);
int32_t slate__rd_i32(slate__rd *r);
uint64_t slate__rd_u64(slate__rd *r);
float slate__rd_f32(slate__rd *r);
/* Returns a pointer to the next n bytes and advances, or NULL (and failed) past the end. */
const uint8_t *slate__rd_bytes(slate__rd *r, size_t n);

/* ---- numbers ----------------------------------------------------------------------------- */
float slate__f16_to_f32(uint16_t h);
uint16_t slate__f32_to_f16(float f); /* round to nearest even; overflow -> inf */
static inline float slate__bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
uint16_t slate__f32_to_bf16(float f); /* round to nearest even, NaN stays NaN */

uint32_t slate__crc32(uint32_t crc, const void *data, size_t len); /* start with crc = 0 */

double slate__now_ms(void); /* monotonic milliseconds */

/* ---- files ------------------------------------------------------------------------------- */
/* Reads a whole file into a NUL-terminated heap buffer (free with slate__free). max_bytes caps
 * the size (E_FORMAT past it). */
slate_status slate__read_file(const char *path, size_t max_bytes, char **out, size_t *len_out,
                              slate_error *err);

/* A read-only mapping of a whole file (mmap). */
typedef struct slate__map {
    const uint8_t *data;
    size_t size;
} slate__map;
slate_status slate__map_open(const char *path, slate__map *m, slate_error *err);
void slate__map_close(slate__map *m);

/* Atomic writer (file.c): writes to an exclusive temp beside the target, then fsync + rename on
 * commit; abort removes the temp. An existing target must be a regular file (or a link to
 * one, which is followed). */
typedef struct slate__atomic_file {
    void *fp; /* FILE * */
    char *final_path;
    char *tmp_path;
    bool failed;
    int error;   /* errno of the first failed write (reported at commit), 0 before */
    int pending; /* slot in the list slate_remove_partial_outputs() empties, -1 for none */
} slate__atomic_file;
/* fopen(path, "rb") that cannot block (O_NONBLOCK: a FIFO opens and reads as empty). */
FILE *slate__fopen_read(const char *path);
/* The first bytes (up to cap) of path when it is a regular file: how many were read; 0 when
 * nothing is there, it is not a regular file, cannot be read or is empty. Never blocks. */
size_t slate__file_head(const char *path, void *buf, size_t cap);
slate_status slate__atomic_open(const char *path, slate__atomic_file *f, slate_error *err);
/* Appends len bytes; after a failed write (f->failed, f->error) the rest are skipped, so a
 * writer may write freely and check once, or stop early on f->failed. */
void slate__atomic_write(slate__atomic_file *f, const void *data, size_t len);
slate_status slate__atomic_commit(slate__atomic_file *f, slate_error *err);
void slate__atomic_abort(slate__atomic_file *f);

/* Most threads a pool runs (slate__pool_create refuses more). */
#define SLATE__MAX_THREADS 1024

/* Number of online cores, at least 1 and at most SLATE__MAX_THREADS: it is the default thread
 * count, which must always be a valid one. */
int slate__n_cores(void);

/* ---- thread pool -------------------------------------------------------------------------- */
/* A persistent pool: n_threads - 1 workers created once; slate__pool_run calls fn(ctx, i, n)
 * for i = 0..n-1 with the caller running i = 0, and returns when all are done. Calls on one
 * pool must not overlap (each state owns its pool). No thread is created per call. */
typedef struct slate__pool slate__pool;
typedef void (*slate__pool_fn)(void *ctx, int ith, int nth);
slate_status slate__pool_create(int n_threads, slate__pool **out, slate_error *err);
void slate__pool_free(slate__pool *pool);
int slate__pool_size(const slate__pool *pool);
void slate__pool_run(slate__pool *pool, slate__pool_fn fn, void *ctx);

#endif /* SLATE_CORE_H */
