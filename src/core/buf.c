/*
 * buf.c - a growable byte buffer for writers and a bounds-checked little-endian reader for
 * untrusted bytes. The reader never reads past its end: a short read sets `failed` and yields
 * zeros, so a parser can read a whole record and check `failed` once.
 */
#include "core.h"

#include <string.h>

void slate__buf_append(slate__buf *b, const void *data, size_t len) {
    if (b->failed) return;
    if (len > SIZE_MAX - b->len) {
        b->failed = true;
        return;
    }
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len) cap = cap > SIZE_MAX / 2 ? b->len + len : cap * 2;
        uint8_t *d = slate__realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
}

void slate__buf_u32(slate__buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    slate__buf_append(b, x, 4);
}
void slate__buf_i32(slate__buf *b, int32_t v) { slate__buf_u32(b, (uint32_t)v); }
void slate__buf_u64(slate__buf *b, uint64_t v) {
    slate__buf_u32(b, (uint32_t)v);
    slate__buf_u32(b, (uint32_t)(v >> 32));
}
void slate__buf_f32(slate__buf *b, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    slate__buf_u32(b, u);
}
void slate__buf_free(slate__buf *b) {
    slate__free(b->data);
    memset(b, 0, sizeof *b);
}

const uint8_t *slate__rd_bytes(slate__rd *r, size_t n) {
    if (r->failed || r->pos > r->len || n > r->len - r->pos) {
        r->failed = true;
        return NULL;
    }
    const uint8_t *p = r->data + r->pos;
    r->pos += n;
    return p;
}
uint8_t slate__rd_u8(slate__rd *r) {
    const uint8_t *p = slate__rd_bytes(r, 1);
    return p ? p[0] : 0;
}
uint32_t slate__rd_u32(slate__rd *r) {
    const uint8_t *p = slate__rd_bytes(r, 4);
    return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
             : 0;
}
int32_t slate__rd_i32(slate__rd *r) { return (int32_t)slate__rd_u32(r); }
uint64_t slate__rd_u64(slate__rd *r) {
    uint64_t lo = slate__rd_u32(r);
    uint64_t hi = slate__rd_u32(r);
    return lo | hi << 32;
}
float slate__rd_f32(slate__rd *r) {
    uint32_t u = slate__rd_u32(r);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
