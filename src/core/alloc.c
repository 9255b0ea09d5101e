/*
 * alloc.c - the one heap wrapper. Every allocation carries a 64-byte header holding its size,
 * so live bytes can be counted exactly and aligned blocks come from the same path. A test can
 * make the Nth call fail to walk every error path (fault injection); the counters are the only
 * process-wide mutable data in slate and are atomics, so states on several threads may allocate
 * concurrently (they only do so at creation).
 */
#include "core.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define HDR 64 /* keeps user pointers 64-byte aligned when the block itself is */

static atomic_long g_calls;
static atomic_long g_fail_at; /* fail when g_calls reaches this; 0 = never */
static atomic_llong g_live;

void slate__alloc_fail_after(long n) {
    atomic_store(&g_fail_at, n > 0 ? atomic_load(&g_calls) + n : 0);
}
long slate__alloc_calls(void) { return atomic_load(&g_calls); }
long long slate__alloc_live_bytes(void) { return atomic_load(&g_live); }

static bool should_fail(void) {
    long c = atomic_fetch_add(&g_calls, 1) + 1;
    long f = atomic_load(&g_fail_at);
    return f != 0 && c >= f;
}

void *slate__malloc(size_t size) {
    /* size + HDR rounded up to HDR must not wrap (it did for the top 64 sizes). */
    if (should_fail() || size > SIZE_MAX - 2 * HDR) return NULL;
    uint8_t *p = aligned_alloc(HDR, slate__align_up(size + HDR, HDR));
    if (!p) return NULL;
    memcpy(p, &size, sizeof size);
    atomic_fetch_add(&g_live, (long long)size);
    return p + HDR;
}

void *slate__calloc(size_t n, size_t size) {
    size_t total;
    if (!slate__mul_size(n, size, &total)) return NULL;
    void *p = slate__malloc(total);
    if (p) memset(p, 0, total);
    return p;
}

void slate__free(void *ptr) {
    if (!ptr) return;
    uint8_t *p = (uint8_t *)ptr - HDR;
    size_t size;
    memcpy(&size, p, sizeof size);
    atomic_fetch_sub(&g_live, (long long)size);
    free(p);
}

void *slate__realloc(void *ptr, size_t size) {
    if (!ptr) return slate__malloc(size);
    size_t old;
    memcpy(&old, (uint8_t *)ptr - HDR, sizeof old);
    void *q = slate__malloc(size);
    if (!q) return NULL;
    memcpy(q, ptr, old < size ? old : size);
    slate__free(ptr);
    return q;
}

void *slate__malloc_aligned(size_t size) { return slate__malloc(size); }
void slate__free_aligned(void *ptr) { slate__free(ptr); }

char *slate__strndup(const char *s, size_t n) {
    char *d = slate__malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *slate__strdup(const char *s) { return slate__strndup(s, strlen(s)); }
