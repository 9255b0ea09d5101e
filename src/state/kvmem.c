/*
 * kvmem.c - a state's cache arena and scratch: lazily committed anonymous mappings.
 *
 * The cache reserves address space for n_ctx positions (rounded up to 16: slate__kv_ctx_rows)
 * of every state tensor (one page-aligned block per tensor in the state's cache dtype) with
 * MAP_NORESERVE, so Linux commits a page only when a row in it is first written: a 100-token
 * chat on a 4096-context state costs about 100 positions of memory, not 4096 (bench/RESULTS.md
 * "Lazy KV"). The scratch (activations and logits) is a second mapping. Page-aligned blocks let
 * memory pressure hand pages back with madvise(MADV_DONTNEED): the tail of each block past the
 * state's length, or everything when a state is spilled or reset. Private anonymous pages read
 * back as zeros after that, and nothing reads a row before writing it, so this never changes a
 * result.
 *
 * Inside a block the cache is head-major: one region [C][head bytes] per kv head, one after the
 * other, C = slate__kv_ctx_rows(n_ctx) (a tensor read by no attention, or by two with different
 * head sizes, is one region [C][row bytes]). The program still sees a state tensor as
 * [n_ctx][width] rows; the layout is the runtime's: attention reads one head over many
 * positions, and a head's rows side by side make that one sequential stream instead of 128-byte
 * pieces 512 bytes apart (TinyLlama shape, depth 2048, one thread, cache from DRAM: 30 -> 15 ns
 * per position and kv head). A position's row is scattered over the regions by kv_write and
 * gathered back by the state file and slate_state_read_tensor (slate__kv_get_rows /
 * slate__kv_put_rows).
 *
 * K16: with the AVX-512 tables, an f16 K cache of head_dim 64 or 128 is stored dim-major inside
 * each block of 16 positions of its head's region (choose_k16 below says when), so attention
 * loads a dim of 16 positions as one vector. A region takes the same bytes in either layout, and
 * a block the bytes of its 16 rows; a position's piece is read and written only through
 * slate__kv_piece_get / put (and kv_write), so the state file and exports see rows either way.
 *
 * Sliding windows: a cache read only by attention with window w (model->state_window) needs,
 * for a query at position L, the rows L-w+1..L. After each predict the rows below
 * cut = length - w - R + 1 (R: the state's rollback reach, so a truncate may still go back R
 * positions) are no longer needed by any call the state accepts; once a release step of them
 * (rows filling SLATE__KV_RELEASE_PAGES pages of a head region: one madvise per head per step,
 * not per token) has accumulated, the whole pages of each head region below the cut go back
 * with MADV_DONTNEED and kv_first[i] becomes the cut. Invariant: rows [kv_first[i], length) of
 * every tensor are intact; nothing reads a row below kv_first (attention starts at L-w+1 >=
 * cut, truncate refuses to go where it would, the state file and read_tensor skip or refuse
 * them). Memory per windowed tensor is then bounded by slate__kv_window_rows rows per head
 * (the planner counts it), not by the context.
 *
 * Sizes come from the planner's arithmetic (slate__kv_row_bytes, blocks rounded up to a page):
 * plan.kv_bytes equals what is reserved here. Mappings are not counted by the heap allocator;
 * slate_state_get_memory reports them (reserved and resident, via mincore).
 */
#define _DEFAULT_SOURCE
#include "plan/model.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static_assert(sizeof(_Atomic int32_t) == sizeof(int32_t) &&
                  _Alignof(_Atomic int32_t) <= _Alignof(int32_t),
              "kv_first shares the per-tensor block with the int32 arrays");

static void *map_lazy(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Huge pages for a deep cache. Decode attention at depth reads every row of a layer's cache
 * once per token, after the layer's weights have streamed through the caches and evicted the
 * page-table entries of the cache's 4 KiB pages: each new page then costs a page walk from
 * DRAM, and the hardware prefetchers stop at page boundaries. On the target VM (TinyLlama
 * shape, pal4, depth 2048, one thread pinned, each layer's attention timed in the model) that
 * took 23-26 ns per position and kv head where the same call repeated on the now cached rows
 * took 13-16; with the cache in 2 MiB pages the first call took 15-16 (bench/RESULTS.md,
 * "Huge pages for the cache"). Huge pages from the first touch would commit 2 MiB at a time
 * and undo the lazy cache (a head region is often smaller than 2 MiB, so the first token
 * would touch every chunk). So a whole 2 MiB chunk of the mapping is backed by a huge page
 * (MADV_HUGEPAGE, then MADV_COLLAPSE, which copies its pages into one huge page now) only
 * once at least half of its bytes hold rows below the length: the cache then commits at most
 * twice the bytes its rows fill. Rows of sliding-window caches count as empty (they are
 * released behind the window). Emptying the cache (slate__kv_trim to 0) advises the chunks
 * back to small pages, so a reused state is lazy again. A trim past the length (memory
 * pressure) splits the huge pages it cuts into (Linux does) and also advises every chunk back,
 * and no chunk is advised again until the cache is emptied: khugepaged collapses advised
 * ranges that hold any page, and the next call would advise the still half-full chunks again,
 * either of which would commit again what the trim handed back. Without MADV_COLLAPSE (Linux
 * before 6.1) the advice alone still gives later faults huge pages. */
enum { KV_HUGE = 2u << 20 };
/* Chunks advised per call: KV_HUGE_PER_CALL, and one more per KV_HUGE_ROWS rows the call
 * added. Every head region fills at the same rate, so all chunks cross half in the same call,
 * and MADV_COLLAPSE copies each one (about 1 ms: on the target VM the decode step that crossed
 * took 33-40 ms against 12, TinyLlama shape, 22 chunks). A decode step therefore advises two
 * and leaves the rest to the next steps. A prefill advises as many as its rows allow: 16 rows
 * of TinyLlama take ~40 ms to prefill, so a collapse adds at most a few percent to it, and the
 * decode steps after a long prompt no longer pay the copies (with two per call, `slate bench`'s
 * 32 steps after a 2048-token prefill spent about the first dozen collapsing chunks, and its
 * depth-2048 share fell from 87-88 % to 79-84 % for int4-b32 and pal4). */
enum { KV_HUGE_PER_CALL = 2, KV_HUGE_ROWS = 16 };
#ifdef MADV_HUGEPAGE
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older kernels answer EINVAL, and the advice stays */
#endif

/* The first whole chunk of the cache mapping. */
static uint8_t *huge_base(const slate_state *st) {
    return (uint8_t *)(((uintptr_t)st->kv + KV_HUGE - 1) & ~(uintptr_t)(KV_HUGE - 1));
}

/* Adds [a, b) (byte offsets in kv) to the fill of the chunks it overlaps; chunk c covers
 * [off0 + c * KV_HUGE, off0 + (c + 1) * KV_HUGE). */
static void huge_fill(slate_state *st, size_t off0, size_t a, size_t b) {
    if (b <= off0) return;
    if (a < off0) a = off0;
    for (size_t c = (a - off0) / KV_HUGE; a < b && c < st->kv_huge_n; c++) {
        size_t end = off0 + (c + 1) * KV_HUGE, e = b < end ? b : end;
        st->kv_huge_fill[c] += e - a;
        a = e;
    }
}
#endif

static void huge_create(slate_state *st) {
    st->kv_huge = NULL;
    st->kv_huge_fill = NULL;
    st->kv_huge_n = st->kv_huge_done = 0;
#ifdef MADV_HUGEPAGE
    if (!st->kv || getenv("SLATE_NO_HUGEPAGES")) return;
    uintptr_t a = (uintptr_t)huge_base(st), e = (uintptr_t)st->kv + st->kv_bytes;
    size_t n = e > a ? (size_t)(e - a) / KV_HUGE : 0;
    if (n == 0) return;
    /* Without this block the cache only keeps its small pages: not an error. */
    uint8_t *blk = slate__malloc(n * (sizeof(size_t) + 1));
    if (!blk) return;
    st->kv_huge_fill = (size_t *)blk;
    st->kv_huge = blk + n * sizeof(size_t);
    memset(st->kv_huge, 0, n);
    st->kv_huge_n = n;
#endif
}

void slate__kv_huge_update(slate_state *st, int64_t n_new) {
#if defined(MADV_HUGEPAGE)
    if (!st->kv_huge || st->kv_huge_hold || st->kv_huge_done == st->kv_huge_n) return;
    size_t n = st->kv_huge_n;
    const slate_model *m = st->model;
    uint8_t *base = huge_base(st);
    size_t off0 = (size_t)(base - st->kv), len = (size_t)st->length;
    memset(st->kv_huge_fill, 0, n * sizeof *st->kv_huge_fill);
    for (int32_t i = 0; i < m->prog.n_states; i++) {
        if (m->state_window[i] > 0) continue;
        size_t hb = slate__kv_head_bytes(st, i);
        size_t rows = st->kv_k16[i] ? (len + 15) / 16 * 16 : len; /* K16: whole blocks */
        for (int32_t g = 0; g < st->kv_heads[i]; g++) {
            size_t r = st->kv_off[i] + (size_t)g * st->kv_head_span[i];
            huge_fill(st, off0, r, r + rows * hb);
        }
    }
    size_t allow = KV_HUGE_PER_CALL + (n_new > 0 ? (size_t)n_new / KV_HUGE_ROWS : 0);
    for (size_t c = 0, done = 0; c < n && done < allow; c++) {
        if (st->kv_huge[c] || st->kv_huge_fill[c] * 2 < KV_HUGE) continue;
        done++;
        uint8_t *p = base + c * KV_HUGE;
        st->kv_huge[c] = 1; /* tried once: a refusal (no huge page free) is not retried */
        st->kv_huge_done++;
        if (madvise(p, KV_HUGE, MADV_HUGEPAGE) != 0) continue;
        (void)madvise(p, KV_HUGE, MADV_COLLAPSE);
    }
#else
    (void)st;
    (void)n_new;
#endif
}

/* Every chunk back to small pages (the cache was emptied). */
static void huge_undo(slate_state *st) {
#ifdef MADV_HUGEPAGE
    if (!st->kv_huge || st->kv_huge_done == 0) return;
    (void)madvise(huge_base(st), st->kv_huge_n * KV_HUGE, MADV_NOHUGEPAGE);
    memset(st->kv_huge, 0, st->kv_huge_n);
    st->kv_huge_done = 0;
#else
    (void)st;
#endif
}

/* K16 (src/kernels/kernels.h): K caches that only attention_k16 reads are stored dim-major in
 * blocks of 16 positions, so the AVX-512 kernel loads each dim of a block as one vector instead
 * of transposing 16 rows in registers (about 10 % of the kernel: docs/design.md, "Kernels").
 * Only where the rest of this file needs no change: the table has attention_k16; the tensor is
 * read by attention ops only as K, each with head_dim 64 or 128, one region per kv head, no
 * window (the release of rows behind a window works in rows), and an f16 V. A head's region
 * holds whole blocks (slate__kv_ctx_rows), so the next region starts on a block; a page
 * holds whole blocks, so the pages trim hands back past a length hold only blocks past it (it
 * keeps the page holding the last row, hence its block). Everything that reads or writes a
 * position goes through slate__kv_piece_get / put or kv_write, which know the layout. */
static void choose_k16(slate_state *st) {
    const slate_model *m = st->model;
    const slate__program *p = &m->prog;
    size_t page = slate__page_size();
    for (int32_t i = 0; i < p->n_states; i++) st->kv_k16[i] = false;
    if (!m->k->attention_k16) return;
    /* candidates first; then any use that rules a tensor out */
    for (int32_t o = 0; o < p->n_ops; o++)
        if (p->ops[o].kind == SLATE__OP_ATTENTION)
            st->kv_k16[m->state_slot[p->ops[o].in[1]]] = true;
    for (int32_t o = 0; o < p->n_ops; o++) {
        const slate__op *op = &p->ops[o];
        if (op->kind != SLATE__OP_ATTENTION) continue;
        int32_t ks = m->state_slot[op->in[1]], vs = m->state_slot[op->in[2]];
        size_t hb = (size_t)op->head_dim * 2;
        bool ok = (op->head_dim == 64 || op->head_dim == 128) && op->window == 0 &&
                  m->state_window[ks] == 0 && st->kv_dtype[ks] == SLATE_DTYPE_F16 &&
                  st->kv_dtype[vs] == SLATE_DTYPE_F16 && st->kv_heads[ks] == op->n_kv_heads &&
                  st->kv_heads[vs] == op->n_kv_heads &&
                  slate__kv_head_bytes(st, ks) == hb && page % (16 * hb) == 0;
        if (!ok) st->kv_k16[ks] = false;
        st->kv_k16[vs] = false; /* read as V: rows */
    }
}

slate_status slate__kv_create(slate_state *st, const slate_state_params *params,
                              slate_error *err) {
    const slate_model *m = st->model;
    const slate__program *p = &m->prog;
    int32_t n = p->n_states;
    size_t page = slate__page_size();
    /* One heap block holds the three per-tensor arrays. It is also the allocation a
     * fault-injection test fails first, before any mapping exists. */
    size_t n1 = (size_t)(n ? n : 1);
    size_t arrays =
        n1 * (3 * sizeof(size_t) + sizeof(slate_dtype) + 2 * sizeof(int32_t) + sizeof(bool));
    uint8_t *blk = slate__malloc(arrays);
    if (!blk) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    st->kv_row_bytes = (size_t *)blk;
    st->kv_off = st->kv_row_bytes + n1;
    st->kv_head_span = st->kv_off + n1;
    st->kv_dtype = (slate_dtype *)(st->kv_head_span + n1);
    st->kv_heads = (int32_t *)(st->kv_dtype + n1);
    /* Same size and alignment as int32_t (the static_assert at the top). */
    st->kv_first = (_Atomic int32_t *)(st->kv_heads + n1);
    st->kv_k16 = (bool *)(st->kv_first + n1);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        const slate__tensor *t = &p->tensors[p->states[i]];
        slate_dtype dt = params->kv_dtype_set ? params->kv_dtype : t->dtype;
        size_t row = slate__kv_row_bytes(dt, t->width, m->state_group[i]), block;
        if (row == 0 || !slate__mul_size(row, slate__kv_ctx_rows(st->n_ctx), &block)) {
            slate__free(blk);
            st->kv_row_bytes = NULL;
            return slate__fail(err, SLATE_E_INTERNAL, "cache '%s': no layout for %s", t->name,
                               slate_dtype_name(dt));
        }
        int32_t g = m->state_group[i];
        st->kv_dtype[i] = dt;
        st->kv_row_bytes[i] = row;
        st->kv_heads[i] = g > 0 && t->width % g == 0 ? (int32_t)(t->width / g) : 1;
        st->kv_first[i] = 0;
        st->kv_head_span[i] = slate__kv_ctx_rows(st->n_ctx) * (row / (size_t)st->kv_heads[i]);
        st->kv_off[i] = total;
        total += slate__align_up(block, page);
    }
    choose_k16(st);
    st->kv_bytes = total;
    st->scratch_bytes = slate__align_up(p->scratch_bytes ? p->scratch_bytes : 1, page);
    st->kv = total ? map_lazy(total) : NULL;
    st->scratch = map_lazy(st->scratch_bytes);
    if ((total && !st->kv) || !st->scratch) {
        int e = errno;
        slate__kv_free(st);
        return slate__fail(err, SLATE_E_NOMEM, "cannot reserve %zu bytes of address space for "
                           "the state (cache %zu + scratch %zu): %s",
                           total + st->scratch_bytes, total, st->scratch_bytes, strerror(e));
    }
    huge_create(st);
    return SLATE_OK;
}

void slate__kv_free(slate_state *st) {
    slate__free(st->kv_huge_fill); /* the block that also holds kv_huge */
    st->kv_huge = NULL;
    st->kv_huge_fill = NULL;
    st->kv_huge_n = st->kv_huge_done = 0;
    if (st->kv) munmap(st->kv, st->kv_bytes);
    if (st->scratch) munmap(st->scratch, st->scratch_bytes);
    slate__free(st->kv_row_bytes); /* the block that also holds the other per-tensor arrays */
    st->kv = st->scratch = NULL;
    st->kv_row_bytes = st->kv_off = st->kv_head_span = NULL;
    st->kv_dtype = NULL;
    st->kv_heads = NULL;
    st->kv_first = NULL;
    st->kv_k16 = NULL;
}

/* A K16 block: position pos's f16 value of dim d at (pos / 16) * 16 * head_dim + d * 16 +
 * pos % 16 of the head's region. */
void slate__kv_piece_get(const slate_state *st, int32_t i, int32_t g, int64_t pos, uint8_t *dst) {
    size_t hb = slate__kv_head_bytes(st, i);
    if (!st->kv_k16[i]) {
        memcpy(dst, slate__kv_at(st, i, g, pos), hb);
        return;
    }
    const uint16_t *b = (const uint16_t *)slate__kv_at(st, i, g, pos / 16 * 16) + pos % 16;
    for (size_t d = 0; d < hb / 2; d++) memcpy(dst + 2 * d, b + 16 * d, 2);
}

void slate__kv_piece_put(const slate_state *st, int32_t i, int32_t g, int64_t pos,
                         const uint8_t *src) {
    size_t hb = slate__kv_head_bytes(st, i);
    if (!st->kv_k16[i]) {
        memcpy(slate__kv_at(st, i, g, pos), src, hb);
        return;
    }
    uint16_t *b = (uint16_t *)slate__kv_at(st, i, g, pos / 16 * 16) + pos % 16;
    for (size_t d = 0; d < hb / 2; d++) memcpy(b + 16 * d, src + 2 * d, 2);
}

/* Rows [r0, r0 + n) of K16 tensor i, head g, from the cache into rows (get) or back (put):
 * head g's piece of position r at rows + (r - r0) * row_bytes + g * head_bytes. Whole blocks go
 * through the kernel table's transpose16 per 16 dims (a piece at a time, 64 scattered values,
 * made one copy of a TinyLlama cache at depth 2048 ~3 ms slower than the rows' memcpy); the
 * partial blocks at either end value by value. */
static void k16_rows(const slate_state *st, int32_t i, int32_t g, int32_t r0, int32_t n,
                     const uint8_t *in, uint8_t *out) {
    const slate__kernels *k = st->model->k;
    size_t hb = slate__kv_head_bytes(st, i), rb = st->kv_row_bytes[i];
    int64_t hd = (int64_t)(hb / 2), rs = (int64_t)(rb / 2); /* elements */
    for (int64_t b0 = r0 / 16 * 16; b0 < (int64_t)r0 + n; b0 += 16) {
        uint16_t *blk = (uint16_t *)slate__kv_at(st, i, g, b0);
        int64_t t0 = b0 < r0 ? r0 - b0 : 0, t1 = b0 + 16 > r0 + n ? r0 + n - b0 : 16;
        size_t at = (size_t)(b0 + t0 - r0) * rb + (size_t)g * hb; /* row b0 + t0's piece */
        /* (rows at an odd address, as a state file's after an odd-sized user blob, go value by
         * value: transpose16 takes 16-bit pointers) */
        if (t0 == 0 && t1 == 16 && (uintptr_t)(in ? in + at : out + at) % 2 == 0) {
            for (int64_t c = 0; c < hd; c += 16) {
                if (in) k->transpose16(blk + c * 16, 16, (const uint16_t *)(in + at) + c, rs);
                else k->transpose16((uint16_t *)(out + at) + c, rs, blk + c * 16, 16);
            }
            continue;
        }
        for (int64_t t = t0; t < t1; t++, at += rb) {
            if (in) slate__kv_piece_put(st, i, g, b0 + t, in + at);
            else slate__kv_piece_get(st, i, g, b0 + t, out + at);
        }
    }
}

void slate__kv_get_rows(const slate_state *st, int32_t i, int32_t r0, int32_t n, uint8_t *dst) {
    size_t hb = slate__kv_head_bytes(st, i);
    if (st->kv_k16[i]) {
        for (int32_t g = 0; g < st->kv_heads[i]; g++) k16_rows(st, i, g, r0, n, NULL, dst);
        return;
    }
    for (int32_t r = r0; r < r0 + n; r++)
        for (int32_t g = 0; g < st->kv_heads[i]; g++, dst += hb)
            slate__kv_piece_get(st, i, g, r, dst);
}

void slate__kv_put_rows(slate_state *st, int32_t i, int32_t r0, int32_t n, const uint8_t *src) {
    size_t hb = slate__kv_head_bytes(st, i);
    if (st->kv_k16[i]) {
        for (int32_t g = 0; g < st->kv_heads[i]; g++) k16_rows(st, i, g, r0, n, src, NULL);
        return;
    }
    for (int32_t r = r0; r < r0 + n; r++)
        for (int32_t g = 0; g < st->kv_heads[i]; g++, src += hb)
            slate__kv_piece_put(st, i, g, r, src);
}

/* Resident bytes of [p, p + len) (page-aligned p). No allocation: mincore in chunks. */
static size_t resident(const uint8_t *p, size_t len) {
    size_t page = slate__page_size(), done = 0, res = 0;
    unsigned char vec[1024];
    while (done < len) {
        size_t chunk = len - done < page * sizeof vec ? len - done : page * sizeof vec;
        size_t n_pages = (chunk + page - 1) / page;
        if (mincore((void *)(p + done), chunk, vec) != 0) return res;
        for (size_t i = 0; i < n_pages; i++) res += (vec[i] & 1) ? page : 0;
        done += chunk;
    }
    return res;
}

/* Releases [a, b) (page-aligned); returns the resident bytes handed back. */
static size_t release(uint8_t *base, size_t a, size_t b) {
    if (b <= a) return 0;
    size_t r = resident(base + a, b - a);
    if (r) madvise(base + a, b - a, MADV_DONTNEED);
    return r;
}

size_t slate__kv_trim(slate_state *st, int32_t n_keep) {
    const slate__program *p = &st->model->prog;
    size_t page = slate__page_size(), freed = 0;
    for (int32_t i = 0; i < p->n_states && st->kv; i++) {
        size_t end = st->kv_off[i] +
                     slate__align_up(slate__kv_ctx_rows(st->n_ctx) * st->kv_row_bytes[i], page);
        if (n_keep <= 0) { /* the whole block */
            freed += release(st->kv, st->kv_off[i], end);
            continue;
        }
        /* Each head region's tail past n_keep: the pages wholly inside it (a page shared with
         * the next region's live rows stays); the last region's tail runs to the block's end. */
        size_t hb = slate__kv_head_bytes(st, i);
        for (int32_t g = 0; g < st->kv_heads[i]; g++) {
            size_t r = st->kv_off[i] + (size_t)g * st->kv_head_span[i];
            size_t a = slate__align_up(r + (size_t)n_keep * hb, page);
            size_t b = g + 1 < st->kv_heads[i] ? (r + st->kv_head_span[i]) / page * page : end;
            freed += release(st->kv, a, b);
        }
    }
    /* Emptied: lazy again. Trimmed past the length: small pages until then, or khugepaged
     * (which collapses advised ranges with any page present) or the next call's advice would
     * commit again what the trim handed back. */
    huge_undo(st);
    st->kv_huge_hold = n_keep > 0;
    /* Scratch: only the last logits are live between calls (a caller may hold a pointer to
     * them), so keep the pages they touch and release the others. */
    size_t lo = (size_t)p->tensors[p->logits].offset;
    size_t hi = lo + (size_t)st->n_logit_rows * (size_t)p->n_vocab * sizeof(float);
    if (hi > lo) {
        freed += release(st->scratch, 0, lo / page * page);
        freed += release(st->scratch, slate__align_up(hi, page), st->scratch_bytes);
    } else {
        freed += release(st->scratch, 0, st->scratch_bytes);
    }
    return freed;
}

void slate__kv_resident(const slate_state *st, size_t *kv, size_t *scratch) {
    *kv = st->kv ? resident(st->kv, st->kv_bytes) : 0;
    *scratch = st->scratch ? resident(st->scratch, st->scratch_bytes) : 0;
}

/* ---- sliding-window release ---------------------------------------------------------------- */

int32_t slate__kv_window_cut(const slate_state *st, int32_t i) {
    int32_t w = st->model->state_window[i];
    if (!st->kv_release || w <= 0) return 0;
    int64_t cut = (int64_t)st->length - w - st->kv_rollback + 1;
    return cut > 0 ? (int32_t)cut : 0;
}

int32_t slate__kv_release_step(size_t head_bytes, size_t page) {
    if (head_bytes == 0) return 1;
    size_t rows = (SLATE__KV_RELEASE_PAGES * page + head_bytes - 1) / head_bytes;
    return rows > 0 && rows < INT32_MAX ? (int32_t)rows : rows ? INT32_MAX : 1;
}

int64_t slate__kv_window_rows(int32_t window, int32_t rollback, int32_t step, int32_t max_query) {
    /* After a predict, fewer than `step` rows lie between kv_first and the cut (else they would
     * have gone): length - kv_first <= window + rollback + step - 2. The next call writes up to
     * max_query more before its own release. */
    return (int64_t)window + rollback + step + max_query - 2;
}

void slate__kv_release_range(size_t region, size_t head_bytes, size_t page, int32_t first,
                             int32_t cut, size_t *a, size_t *b) {
    /* Pages before the region's first whole page may hold the previous region's rows; the page
     * holding row `cut` (or the end of row cut-1) still holds kept rows unless the cut falls on
     * a page boundary. Pages below row `first` went at an earlier release, except the one it
     * fell in, which starts this range. */
    size_t lo = slate__align_up(region, page);
    size_t from = (region + (size_t)first * head_bytes) / page * page;
    *a = from > lo ? from : lo;
    *b = (region + (size_t)cut * head_bytes) / page * page;
}

/* Hands back the whole pages of tensor i's head regions below row `cut` (those below row
 * `from` went before) and makes cut its first held position. count: return the resident bytes
 * released (a mincore pass), else 0. */
static size_t release_rows(slate_state *st, int32_t i, int32_t from, int32_t cut, bool count) {
    size_t page = slate__page_size(), hb = slate__kv_head_bytes(st, i), freed = 0;
    for (int32_t g = 0; st->kv && g < st->kv_heads[i]; g++) {
        size_t a, b;
        slate__kv_release_range(st->kv_off[i] + (size_t)g * st->kv_head_span[i], hb, page, from,
                                cut, &a, &b);
        if (b <= a) continue;
        if (count) freed += resident(st->kv + a, b - a);
        madvise(st->kv + a, b - a, MADV_DONTNEED);
    }
    st->kv_first[i] = cut;
    return freed;
}

size_t slate__kv_release_window(slate_state *st, bool force) {
    const slate__program *p = &st->model->prog;
    if (!st->kv_release || !st->kv) return 0;
    size_t page = slate__page_size(), freed = 0;
    for (int32_t i = 0; i < p->n_states; i++) {
        int32_t cut = slate__kv_window_cut(st, i), first = st->kv_first[i];
        if (cut <= first) continue;
        if (!force && cut - first < slate__kv_release_step(slate__kv_head_bytes(st, i), page))
            continue;
        freed += release_rows(st, i, first, cut, force);
    }
    return freed;
}

void slate__kv_drop_below(slate_state *st, int32_t i, int32_t first) {
    if (first > 0) release_rows(st, i, 0, first, false);
    else st->kv_first[i] = 0;
}

void slate__kv_first_clear(slate_state *st) {
    for (int32_t i = 0; st->kv_first && i < st->model->prog.n_states; i++) st->kv_first[i] = 0;
}
