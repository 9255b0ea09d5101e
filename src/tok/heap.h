/*
 * heap.h - the binary heap of merge candidates that bpe.c and spm.c share: SLATE__TOK_HEAP(T,
 * BEFORE) defines, in the file that expands it, `heap` (an array v of n elements of type T, the
 * caller's storage) with heap_push and heap_pop, where BEFORE(a, b) is true when *a must come out
 * before *b. Both tokenizers key it by (rank or score, position), so ties pop leftmost first.
 */
#ifndef SLATE_TOK_HEAP_H
#define SLATE_TOK_HEAP_H

#include <stddef.h>

#define SLATE__TOK_HEAP(T, BEFORE)                                                                 \
    typedef struct heap {                                                                          \
        T *v;                                                                                      \
        size_t n;                                                                                  \
    } heap;                                                                                        \
                                                                                                   \
    static void heap_push(heap *h, T c) {                                                          \
        size_t i = h->n++;                                                                         \
        while (i > 0) {                                                                            \
            size_t p = (i - 1) / 2;                                                                \
            if (!BEFORE(&c, &h->v[p])) break;                                                      \
            h->v[i] = h->v[p];                                                                     \
            i = p;                                                                                 \
        }                                                                                          \
        h->v[i] = c;                                                                               \
    }                                                                                              \
                                                                                                   \
    static T heap_pop(heap *h) {                                                                   \
        T top = h->v[0], last = h->v[--h->n];                                                      \
        size_t i = 0;                                                                              \
        for (;;) {                                                                                 \
            size_t l = 2 * i + 1, r = l + 1, m = i;                                                \
            const T *best = &last;                                                                 \
            if (l < h->n && BEFORE(&h->v[l], best)) {                                              \
                m = l;                                                                             \
                best = &h->v[l];                                                                   \
            }                                                                                      \
            if (r < h->n && BEFORE(&h->v[r], best)) m = r;                                         \
            if (m == i) break;                                                                     \
            h->v[i] = h->v[m];                                                                     \
            i = m;                                                                                 \
        }                                                                                          \
        if (h->n > 0) h->v[i] = last;                                                              \
        return top;                                                                                \
    }

#endif
