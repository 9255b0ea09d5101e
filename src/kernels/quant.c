/*
 * quant.c - layout rules and sizes of the weight formats of quant.h, shared by the program
 * compiler (validation of the tensor table), the converter (what it writes) and exec (the
 * descriptor it hands to the kernels). One place, so the three cannot disagree.
 */
#include "kernels/quant.h"

#include <stdio.h>

bool slate__wdtype_valid(slate_dtype dt) {
    switch ((int)dt) {
    case SLATE_DTYPE_F32:
    case SLATE_DTYPE_F16:
    case SLATE_DTYPE_BF16:
    case SLATE_DTYPE_Q8_0:
    case SLATE_DTYPE_Q4:
    case SLATE_DTYPE_Q8_C:
    case SLATE_DTYPE_PAL:
    case SLATE_DTYPE_Q4_K:
    case SLATE_DTYPE_Q6_K:
    case SLATE_DTYPE_Q5_K:
    case SLATE_DTYPE_Q3_K:
    case SLATE_DTYPE_Q2_K:
    case SLATE_DTYPE_IQ4_NL:
    case SLATE_DTYPE_IQ4_XS:
        return true;
    default:
        return false;
    }
}

bool slate__wdtype_quantized(slate_dtype dt) {
    return dt == SLATE_DTYPE_Q8_0 || dt == SLATE_DTYPE_Q4 || dt == SLATE_DTYPE_Q8_C ||
           dt == SLATE_DTYPE_PAL || dt == SLATE_DTYPE_IQ4_NL || slate__wdtype_superblock(dt);
}

bool slate__wlayout_check(slate_dtype dt, int32_t block, bool asym, int64_t n_in, char *why,
                          size_t cap) {
    if (!slate__wdtype_valid(dt)) {
        snprintf(why, cap, "dtype %d is not a weight format", (int)dt);
        return false;
    }
    if (asym && dt != SLATE_DTYPE_Q4) {
        snprintf(why, cap, "\"asym\" applies only to q4, not %s", slate_dtype_name(dt));
        return false;
    }
    int32_t need = 0;
    if (dt == SLATE_DTYPE_PAL) {
        int32_t bits = slate__pal_bits(block), group = slate__pal_group(block);
        if (block < 0 || (bits != 2 && bits != 3 && bits != 4 && bits != 6 && bits != 8)) {
            snprintf(why, cap, "pal bits %d is not one of 2, 3, 4, 6, 8", (int)bits);
            return false;
        }
        if (group < 1 || group > SLATE__PAL_GROUP_MAX) {
            snprintf(why, cap, "pal group %d is outside 1..%d", (int)group, SLATE__PAL_GROUP_MAX);
            return false;
        }
    } else if (dt == SLATE_DTYPE_Q8_0 || dt == SLATE_DTYPE_IQ4_NL) {
        need = 32;
        if (block != 32) {
            snprintf(why, cap, "%s has blocks of 32, not %d", slate_dtype_name(dt), (int)block);
            return false;
        }
    } else if (dt == SLATE_DTYPE_Q4) {
        if (block != 16 && block != 32 && block != 64 && block != 128) {
            snprintf(why, cap, "q4 block %d is not one of 16, 32, 64, 128", (int)block);
            return false;
        }
        need = block;
    } else if (slate__wdtype_superblock(dt)) {
        need = SLATE__SUPERBLOCK;
        if (block != SLATE__SUPERBLOCK) {
            snprintf(why, cap, "%s has super-blocks of %d, not %d", slate_dtype_name(dt),
                     SLATE__SUPERBLOCK, (int)block);
            return false;
        }
    } else if (block != 0) {
        snprintf(why, cap, "%s has no blocks (block %d given)", slate_dtype_name(dt), (int)block);
        return false;
    }
    if (n_in < 1 || (need && n_in % need)) {
        snprintf(why, cap, "row length %lld is not a positive multiple of the block %d",
                 (long long)n_in, (int)need);
        return false;
    }
    return true;
}

static size_t row_bytes(slate_dtype dt, int32_t block, bool asym, int64_t n_in) {
    switch ((int)dt) {
    case SLATE_DTYPE_F32: return (size_t)n_in * 4;
    case SLATE_DTYPE_F16:
    case SLATE_DTYPE_BF16: return (size_t)n_in * 2;
    case SLATE_DTYPE_Q8_0: return (size_t)(n_in / 32) * sizeof(slate__block_q8_0);
    case SLATE_DTYPE_Q4: return (size_t)(n_in / block) * slate__q4_block_bytes(block, asym);
    case SLATE_DTYPE_Q8_C: return (size_t)n_in;
    case SLATE_DTYPE_PAL: return ((size_t)n_in * (size_t)slate__pal_bits(block) + 7) / 8;
    case SLATE_DTYPE_Q4_K: return (size_t)(n_in / 256) * sizeof(slate__block_q4_k);
    case SLATE_DTYPE_Q6_K: return (size_t)(n_in / 256) * sizeof(slate__block_q6_k);
    case SLATE_DTYPE_Q5_K: return (size_t)(n_in / 256) * sizeof(slate__block_q5_k);
    case SLATE_DTYPE_Q3_K: return (size_t)(n_in / 256) * sizeof(slate__block_q3_k);
    case SLATE_DTYPE_Q2_K: return (size_t)(n_in / 256) * sizeof(slate__block_q2_k);
    case SLATE_DTYPE_IQ4_NL: return (size_t)(n_in / 32) * sizeof(slate__block_iq4_nl);
    case SLATE_DTYPE_IQ4_XS: return (size_t)(n_in / 256) * sizeof(slate__block_iq4_xs);
    default: return 0;
    }
}

/* Q8_C: the scales start at the rows' size rounded up to 64, so they are aligned like the
 * tensor itself (the package aligns every tensor to 64). */
static uint64_t q8c_scales_offset(int64_t n_out, int64_t n_in) {
    return ((uint64_t)n_out * (uint64_t)n_in + 63) / 64 * 64;
}

uint64_t slate__wmat_bytes(slate_dtype dt, int32_t block, bool asym, int64_t n_out,
                           int64_t n_in) {
    const uint64_t lim = (uint64_t)1 << 62;
    if (n_out < 1 || n_in < 1 || (uint64_t)n_out > lim || (uint64_t)n_in > lim) return 0;
    /* Both factors are below 2^40 for any shape the compiler accepts (dims <= 1e12); check the
     * product anyway. */
    uint64_t rb = row_bytes(dt, block, asym, n_in);
    if (rb == 0 || (uint64_t)n_out > lim / rb) return 0;
    if (dt == SLATE_DTYPE_Q8_C) return q8c_scales_offset(n_out, n_in) + 4 * (uint64_t)n_out;
    if (dt == SLATE_DTYPE_PAL) {
        uint64_t n_groups = ((uint64_t)n_out + (uint64_t)slate__pal_group(block) - 1) /
                            (uint64_t)slate__pal_group(block);
        return ((uint64_t)n_out * rb + 63) / 64 * 64 +
               n_groups * ((uint64_t)2 << slate__pal_bits(block));
    }
    return (uint64_t)n_out * rb;
}

void slate__wmat_init(slate__wmat *w, const void *data, slate_dtype dt, int32_t block, bool asym,
                      int64_t n_out, int64_t n_in) {
    w->data = data;
    w->dtype = dt;
    w->block = block;
    w->asym = asym;
    w->n_out = n_out;
    w->n_in = n_in;
    w->row_bytes = row_bytes(dt, block, asym, n_in);
    w->scales = dt == SLATE_DTYPE_Q8_C && data
                    ? (const float *)((const uint8_t *)data + q8c_scales_offset(n_out, n_in))
                    : NULL;
    w->bits = dt == SLATE_DTYPE_PAL ? slate__pal_bits(block) : 0;
    w->group = dt == SLATE_DTYPE_PAL ? slate__pal_group(block) : 0;
    /* PAL: the tables start at the rows' size rounded up to 64 (docs/format.md). */
    w->lut = dt == SLATE_DTYPE_PAL && data
                 ? (const uint16_t *)((const uint8_t *)data +
                                      ((size_t)n_out * w->row_bytes + 63) / 64 * 64)
                 : NULL;
}
