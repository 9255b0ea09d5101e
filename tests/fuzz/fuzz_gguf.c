/* fuzz_gguf.c - libFuzzer target for the GGUF reader: opens the bytes with
 * slate__gguf_open_mem and, when they are accepted, reads every key through every getter and
 * every tensor's metadata and data bytes, so a wrong offset recorded at open shows up as an
 * out-of-bounds read under ASan. The first blocks of each tensor in a ggml block format are
 * dequantized and, where the converter can transcode them, transcoded: with finite scales
 * every value must be finite (ggml_quants.h), a transcode must give back the dequantized
 * values up to the f16 rounding of its scales, and the types the converter copies (Q8_0, Q4_0,
 * Q4_1, Q4_K, Q5_K, Q6_K) must read back through the runtime's reference dequantization of
 * their slate dtype (q8_0, q4, q4_k, q5_k, q6_k) as ggml's values bit for bit. A leak of
 * counted allocations aborts. The corpus is in corpus/gguf/; replay_main.c replays it in the
 * normal test run. */
#include <stdint.h>
#include <stdlib.h>

#include "convert/ggml_quants.h"
#include "convert/gguf.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"

#include <math.h>
#include <string.h>
#include "core/core.h"

static volatile uint64_t sink; /* keeps the reads from being optimised away */

static void touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint64_t h = 0;
    for (uint64_t i = 0; i < n; i++) h = h * 31 + b[i];
    sink += h;
}

static void walk_key(const slate__gguf *g, int64_t i) {
    const char *key = slate__gguf_key_at(g, i);
    if (!key || slate__gguf_find_key(g, key) != i) abort(); /* keys are unique */
    slate__gguf_vtype type = slate__gguf_key_type(g, i);
    uint32_t u;
    int32_t s32;
    float f;
    bool b;
    const char *s;
    uint64_t len, n;
    double d;
    slate__gguf_vtype et;
    sink += slate__gguf_get_u32(g, key, &u) ? u : 0;
    sink += slate__gguf_get_i32(g, key, &s32) ? (uint32_t)s32 : 0;
    sink += slate__gguf_get_f32(g, key, &f) ? (uint64_t)(f == f) : 0;
    sink += slate__gguf_get_bool(g, key, &b) ? b : 0;
    if (slate__gguf_get_str(g, key, &s, &len)) touch(s, len);
    if (slate__gguf_get_arr(g, key, &et, &n) != (type == SLATE__GGUF_ARRAY)) abort();
    if (type != SLATE__GGUF_ARRAY) return;
    for (uint64_t k = 0; k < n; k++) {
        if (slate__gguf_arr_str(g, key, k, &s, &len)) touch(s, len);
        if (slate__gguf_arr_num(g, key, k, &d)) sink += (uint64_t)(d == d);
    }
    if (slate__gguf_arr_str(g, key, n, &s, &len) || slate__gguf_arr_num(g, key, n, &d)) abort();
}

/* Up to MAX_BLOCKS blocks of a ggml block-format tensor: dequantized, read as the copied slate
 * dtype or transcoded into the layout its transcode writes; each checked. */
enum { MAX_BLOCKS = 8, MAX_ELEMS = MAX_BLOCKS * 256 };

static void decode(const slate__gguf_tensor *t) {
    slate__src_type st;
    if (!slate__ggml_src_type(t->type, &st) || !slate__ggml_is_block(st)) return;
    int32_t elems, bytes;
    slate__ggml_block(st, &elems, &bytes);
    int64_t nb = (int64_t)(t->nbytes / (uint64_t)bytes);
    if (nb > MAX_ELEMS / elems) nb = MAX_ELEMS / elems;
    if (nb == 0) return;
    static float x[MAX_ELEMS], y[MAX_ELEMS];
    static uint8_t q[MAX_ELEMS * 2];
    int64_t n = nb * elems;
    slate__ggml_dequantize(st, t->data, x, n);
    float bad;
    if (slate__ggml_first_nonfinite(st, t->data, (uint64_t)(nb * bytes), &bad) >= 0) return;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) abort(); /* finite scales, a value that is not */
    slate_dtype dt;
    int32_t block;
    bool asym;
    if (slate__ggml_layout(st, &dt, &block, &asym) == SLATE__ROUTE_COPY) {
        /* the package holds these bytes: the runtime must read ggml's values (one row) */
        slate__wmat w;
        slate__wmat_init(&w, t->data, dt, block, asym, 1, n);
        slate__ref_dequant(&w, 0, 0, n, y);
        if (memcmp(x, y, sizeof(float) * (size_t)n) != 0) abort();
    }
    /* Q4_K's transcode is not its default (a copy) but is reached by asking for q4 b32 asym. */
    if (!slate__ggml_transcode_layout(st, &dt, &block, &asym)) return;
    if ((size_t)slate__wmat_bytes(dt, block, asym, 1, n) > sizeof q) abort();
    if (slate__ggml_transcode(st, t->data, n, q, &bad) >= 0) return; /* a scale past f16 */
    slate__wmat w;
    slate__wmat_init(&w, q, dt, block, asym, 1, n);
    slate__ref_dequant(&w, 0, 0, n, y);
    /* Each slate block holds an f16 scale d' (and offset m') that differ from the source's
     * products by one f16 rounding (2^-11 relative, or 2^-25 absolute below f16's normal
     * range), times a code of at most max_code: the bound, per slate block, on |y - x|. */
    int32_t be = dt == SLATE_DTYPE_Q8_0 ? 32 : block; /* elements per slate block */
    size_t bb = (size_t)slate__wmat_bytes(dt, block, asym, 1, be);
    float max_code = dt == SLATE_DTYPE_Q8_0 ? 127.0f : asym ? 15.0f : 8.0f;
    for (int64_t b = 0; b < n / be; b++) {
        const uint8_t *blk = q + (size_t)b * bb;
        float d = slate__f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
        float m = asym ? slate__f16_to_f32((uint16_t)(blk[2] | blk[3] << 8)) : 0.0f;
        float tol = (fabsf(d) * max_code + fabsf(m)) * 0x1p-10f + max_code * 0x1p-24f;
        for (int64_t i = b * be; i < (b + 1) * be; i++)
            if (!(fabsf(y[i] - x[i]) <= tol)) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    long long live = slate__alloc_live_bytes();
    slate__gguf *g = NULL;
    slate_error err;
    if (slate__gguf_open_mem(data, size, &g, &err) == SLATE_OK) {
        sink += slate__gguf_version(g) + slate__gguf_alignment(g) + slate__gguf_data_offset(g);
        for (int64_t i = 0; i < slate__gguf_n_kv(g); i++) walk_key(g, i);
        if (slate__gguf_key_at(g, slate__gguf_n_kv(g))) abort();
        for (int64_t i = 0; i < slate__gguf_n_tensors(g); i++) {
            const slate__gguf_tensor *t = slate__gguf_tensor_at(g, i);
            if (slate__gguf_find_tensor(g, t->name) != t) abort(); /* names are unique */
            if (t->file_offset + t->nbytes > size || t->data != data + t->file_offset) abort();
            sink += t->type + t->n_dims + t->ne[0] + t->ne[3] + t->n_elements;
            touch(t->data, t->nbytes);
            sink += (uintptr_t)slate__ggml_type_name(t->type);
            decode(t);
        }
        slate__gguf_close(g);
    } else if (g != NULL || err.message[0] == '\0') {
        abort(); /* a refusal leaves *out NULL and says why */
    }
    if (slate__alloc_live_bytes() != live) abort(); /* leak of counted memory */
    return 0;
}
