/*
 * kvmem.c - a state's cache arena and scratch: lazily committed anonymous mappings.
 *
 * The cache reserves address space for n_ctx positions of every state tensor (one page-aligned
 * block per tensor in the state's cache dtype) with MAP_NORESERVE, so Linux
 * commits a page only when a row in it is first written: a 100-token chat on a 4096-context
 * state costs about 100 positions of memory, not 4096 (bench/RESULTS.md "Lazy KV"). The
 * scratch (activations and logits) is a second mapping. Page-aligned blocks let memory pressure
 * hand pages back with madvise(MADV_DONTNEED): the tail of each block past the state's length,
 * or everything when a state is spilled or reset. Private anonymous pages read back as zeros
 * after that, and nothing reads a row before writing it, so this never changes a result.
 *
 * Inside a block the cache is head-major: one region [n_ctx][head bytes] per kv head, one after
 * the other (a tensor read by no attention, or by two with different head sizes, is one region
 * [n_ctx][row bytes]). The program still sees a state tensor as [n_ctx][width] rows; the layout
 * is the runtime's: attention reads one head over many positions, and a head's rows side by
 * side make that one sequential stream instead of 128-byte pieces 512 bytes apart (TinyLlama
 * shape, depth 2048, one thread, cache from DRAM: 30 -> 15 ns per position and kv head). A
 * position's row is scattered over the regions by kv_write and gathered back by the state file
 * and slate_state_read_tensor (slate__kv_get_rows / slate__kv_put_rows).
 *
 * Sizes come from the planner's arithmetic (slate__kv_row_bytes, blocks rounded up to a page):
 * plan.kv_bytes equals what is reserved here. Mappings are not counted by the heap allocator;
 * slate_state_get_memory reports them (reserved and resident, via mincore).
 */
#define _DEFAULT_SOURCE
#include "plan/model.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *map_lazy(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
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
    size_t arrays = n1 * (3 * sizeof(size_t) + sizeof(slate_dtype) + sizeof(int32_t));
    uint8_t *blk = slate__malloc(arrays);
    if (!blk) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    st->kv_row_bytes = (size_t *)blk;
    st->kv_off = st->kv_row_bytes + n1;
    st->kv_head_span = st->kv_off + n1;
    st->kv_dtype = (slate_dtype *)(st->kv_head_span + n1);
    st->kv_heads = (int32_t *)(st->kv_dtype + n1);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        const slate__tensor *t = &p->tensors[p->states[i]];
        slate_dtype dt = params->kv_dtype_set ? params->kv_dtype : t->dtype;
        size_t row = slate__kv_row_bytes(dt, t->width, m->state_group[i]), block;
        if (row == 0 || !slate__mul_size(row, (size_t)st->n_ctx, &block)) {
            slate__free(blk);
            st->kv_row_bytes = NULL;
            return slate__fail(err, SLATE_E_INTERNAL, "cache '%s': no layout for %s", t->name,
                               slate_dtype_name(dt));
        }
        int32_t g = m->state_group[i];
        st->kv_dtype[i] = dt;
        st->kv_row_bytes[i] = row;
        st->kv_heads[i] = g > 0 && t->width % g == 0 ? (int32_t)(t->width / g) : 1;
        st->kv_head_span[i] = (size_t)st->n_ctx * (row / (size_t)st->kv_heads[i]);
        st->kv_off[i] = total;
        total += slate__align_up(block, page);
    }
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
    return SLATE_OK;
}

void slate__kv_free(slate_state *st) {
    if (st->kv) munmap(st->kv, st->kv_bytes);
    if (st->scratch) munmap(st->scratch, st->scratch_bytes);
    slate__free(st->kv_row_bytes); /* the block that also holds the other per-tensor arrays */
    st->kv = st->scratch = NULL;
    st->kv_row_bytes = st->kv_off = st->kv_head_span = NULL;
    st->kv_dtype = NULL;
    st->kv_heads = NULL;
}

void slate__kv_get_rows(const slate_state *st, int32_t i, int32_t r0, int32_t n, uint8_t *dst) {
    size_t hb = slate__kv_head_bytes(st, i);
    for (int32_t r = r0; r < r0 + n; r++)
        for (int32_t g = 0; g < st->kv_heads[i]; g++, dst += hb) memcpy(dst, slate__kv_at(st, i, g, r), hb);
}

void slate__kv_put_rows(slate_state *st, int32_t i, int32_t r0, int32_t n, const uint8_t *src) {
    size_t hb = slate__kv_head_bytes(st, i);
    for (int32_t r = r0; r < r0 + n; r++)
        for (int32_t g = 0; g < st->kv_heads[i]; g++, src += hb) memcpy(slate__kv_at(st, i, g, r), src, hb);
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
        size_t end = st->kv_off[i] + slate__align_up((size_t)st->n_ctx * st->kv_row_bytes[i], page);
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
