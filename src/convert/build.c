/*
 * build.c - from an import (hyper-parameters + canonical tensors + tokenizer) to a package.
 *
 * The architecture is expressed in the program, never as `if (arch == ...)` in the runtime:
 *   - qkv bias: the q/k/v matmuls take a third (bias) input;
 *   - q/k norm (Qwen3): an rms_norm with group = head_dim on q and k before rope;
 *   - rope layout: "adjacent" pairs (llama2.c, GGUF llama) or "half" (HF rotate_half);
 *   - partial rotary (Phi-4-mini): rope's rope_dim below head_dim, the first rope_dim dims of
 *     each head rotated (pairs i, i + rope_dim / 2 in the "half" layout), the rest copied;
 *   - rope scaling (linear, Llama 3.1, LongRoPE): folded into the "rope.freqs" tensor written
 *     here. LongRoPE's attention factor m multiplies cos and sin (transformers, llama.cpp), so
 *     the rotated dims of q and k are scaled by m and the pass-through dims are not. With the
 *     whole head rotated that scales q.k by exactly m^2, which is folded into the attention
 *     op's scale; with partial rotary (rope_dim < head_dim) no scale does that, and rope's
 *     "mscale" attribute (m on cos and sin) is written instead. Both are exact. The fold is
 *     kept for whole heads because it leaves every package of a model that needs no mscale
 *     byte-identical to before the attribute existed: a reader that predates mscale ignores
 *     unknown attributes, so only packages that need it (partial rotary with LongRoPE) can be
 *     misread by such a reader, never the Phi-3 ones it already ran;
 *   - tied head: the final matmul reads token_embd.weight;
 *   - GQA: attention's n_kv_heads; sliding window: attention's window;
 *   - Gemma: a "scale" op after the embedding (sqrt(hidden), computed by the importer), RMSNorm
 *     weights stored as w + 1 (HF keeps w and computes x * (1 + w); the sum is taken here in
 *     f32, before any rounding to the package dtype, which for norms is f32 anyway), "geglu"
 *     instead of "swiglu", attention's scale from query_pre_attn_scalar (Gemma 3);
 *   - Gemma 3: an rms_norm on the attention output and one on the feed-forward output before
 *     each residual add; per-layer attention: the sliding layers' attention has the window and
 *     their rope ops read "rope_local.freqs" (the local base, unscaled), the global layers'
 *     read "rope.freqs" (rope_theta with the scaling). Each computed tensor is written only
 *     when some op reads it;
 *   - Gemma 2: Gemma 3's layout without q/k norms or the local RoPE tensor; its attention score
 *     cap makes every attention op "attention_softcap" (with attribute softcap: a reader that
 *     predates it refuses the op, where it would ignore an attribute) and its final logit cap
 *     is a "softcap" op on the logits;
 *   - Granite: its embedding multiplier is the "scale" op after the embedding (as Gemma's
 *     scale), its attention multiplier the attention op's scale (replacing 1 / sqrt(head_dim)),
 *     its residual multiplier a "scale" op on the attention and the feed-forward outputs
 *     before each residual add, and its logits_scaling a "scale" op by 1 / logits_scaling on
 *     the logits. Existing ops only, so no reader needs to learn anything; nothing is folded
 *     into weights (GGUF blocks stay byte for byte, and a tied head shares the embedding).
 *     The logits are multiplied by the f32 reciprocal where transformers and llama.cpp
 *     divide: the same for a power of two (granite-3.x's 8, 16), within an ulp otherwise;
 *   - SmolLM3: NoPE layers (slate__arch.layer_nope) get no rope op on q and k, and keep the
 *     plain attention scale where LongRoPE folds m^2 into the rotated layers' (their q and k
 *     are not scaled by m).
 * Every tensor the architecture needs must be present with the exact shape; a source tensor
 * the program does not use is an error (never skipped silently).
 */
#include "convert.h"
#include "convert/ggml_quants.h"
#include "exec/program.h"
#include "kernels/kernels.h"
#include "pkg/pkg.h"
#include "tok/tok.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

size_t slate__src_nbytes(slate__src_type type, uint64_t n, bool *ok) {
    *ok = true;
    switch (type) {
    case SLATE__SRC_F32: return n > SIZE_MAX / 4 ? (*ok = false, 0) : (size_t)n * 4;
    case SLATE__SRC_F16:
    case SLATE__SRC_BF16: return n > SIZE_MAX / 2 ? (*ok = false, 0) : (size_t)n * 2;
    default: break;
    }
    int32_t elems, bytes;
    slate__ggml_block(type, &elems, &bytes);
    if (elems == 0 || n % (uint64_t)elems || n / (uint64_t)elems > SIZE_MAX / (uint64_t)bytes) {
        *ok = false;
        return 0;
    }
    return (size_t)(n / (uint64_t)elems) * (size_t)bytes;
}

void slate__src_to_f32(slate__src_type type, const uint8_t *src, float *dst, int64_t n) {
    switch (type) {
    case SLATE__SRC_F32:
        memcpy(dst, src, (size_t)n * 4);
        break;
    case SLATE__SRC_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = slate__f16_to_f32(h);
        }
        break;
    case SLATE__SRC_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = slate__bf16_to_f32(h);
        }
        break;
    default: /* the ggml block formats */
        slate__ggml_dequantize(type, src, dst, n);
        break;
    }
}

void slate__import_free(slate__import *imp) {
    if (!imp) return;
    slate__free(imp->tensors);
    slate_tokenizer_free(imp->tok);
    slate__free(imp->chat_template);
    if (imp->cleanup) imp->cleanup(imp->cleanup_ctx);
    memset(imp, 0, sizeof *imp);
}

slate_status slate__import_add(slate__import *imp, const slate__src_tensor *t, slate_error *err) {
    for (int32_t i = 0; i < imp->n_tensors; i++)
        if (strcmp(imp->tensors[i].name, t->name) == 0)
            return slate__fail(err, SLATE_E_FORMAT, "tensor '%s' appears twice", t->name);
    slate__src_tensor *n = slate__realloc(imp->tensors, sizeof *n * (size_t)(imp->n_tensors + 1));
    if (!n) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    imp->tensors = n;
    imp->tensors[imp->n_tensors++] = *t;
    return SLATE_OK;
}

static_assert(SLATE__MAX_ROPE_FACTORS == SLATE__MAX_HEAD_DIM / 2,
              "a LongRoPE list holds one factor per rotated pair of the largest head");

const char *slate__src_desc(const slate__src_tensor *t, char *buf, size_t cap) {
    if (!t->src_name[0])
        snprintf(buf, cap, "tensor '%s'", t->name);
    else if (!t->part)
        snprintf(buf, cap, "tensor '%s' (%s)", t->src_name, t->name);
    else
        snprintf(buf, cap, "tensor '%s' (rows %lld..%lld of it are %s)", t->src_name,
                 (long long)t->src_row0, (long long)(t->src_row0 + t->dims[0] - 1), t->name);
    return buf;
}

slate_status slate__import_add_split(slate__import *imp, const slate__src_tensor *t,
                                     const char *src_name, int32_t n, const char *const *names,
                                     const int64_t *rows, slate_error *err) {
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) total += rows[i];
    bool ok = t->n_dims == 2 && t->dims[0] == total;
    size_t row_bytes = ok ? slate__src_nbytes(t->type, (uint64_t)t->dims[1], &ok) : 0;
    /* The importers checked nbytes == rows * row_bytes for their types; recheck the product. */
    if (!ok || (uint64_t)row_bytes * (uint64_t)total != t->nbytes)
        return slate__fail(err, SLATE_E_FORMAT, "fused tensor '%s' (%lld rows, %llu bytes) "
                           "cannot be split into %d parts of %lld rows in all", t->name,
                           (long long)t->dims[0], (unsigned long long)t->nbytes, (int)n,
                           (long long)total);
    int64_t r0 = 0;
    for (int32_t i = 0; i < n; i++) {
        slate__src_tensor part = *t;
        snprintf(part.name, sizeof part.name, "%s", names[i]);
        snprintf(part.src_name, sizeof part.src_name, "%s", src_name);
        part.part = true;
        part.src_row0 = r0;
        part.dims[0] = rows[i];
        part.data = t->data + (size_t)r0 * row_bytes;
        part.nbytes = (uint64_t)rows[i] * row_bytes;
        slate_status s = slate__import_add(imp, &part, err);
        if (s) return s;
        r0 += rows[i];
    }
    return SLATE_OK;
}

slate_status slate__import_add_fused(slate__import *imp, const slate__src_tensor *t, bool qkv,
                                     const char *blk, const char *path, const char *src_name,
                                     const slate__fused_keys *keys, slate_error *err) {
    const slate__arch *a = &imp->a;
    char names[3][96];
    int64_t rows[3] = {0, 0, 0};
    if (qkv) {
        rows[0] = (int64_t)a->n_heads * a->head_dim;
        rows[1] = rows[2] = (int64_t)a->n_kv_heads * a->head_dim;
        snprintf(names[0], sizeof names[0], "%s.attn_q.weight", blk);
        snprintf(names[1], sizeof names[1], "%s.attn_k.weight", blk);
        snprintf(names[2], sizeof names[2], "%s.attn_v.weight", blk);
    } else {
        rows[0] = rows[1] = a->ffn_dim;
        snprintf(names[0], sizeof names[0], "%s.ffn_gate.weight", blk);
        snprintf(names[1], sizeof names[1], "%s.ffn_up.weight", blk);
    }
    int64_t total = rows[0] + rows[1] + rows[2];
    if (t->n_dims != 2 || t->dims[0] != total || t->dims[1] != a->dim) {
        char has[48];
        if (t->n_dims == 2)
            snprintf(has, sizeof has, "[%lld][%lld]", (long long)t->dims[0],
                     (long long)t->dims[1]);
        else
            snprintf(has, sizeof has, "[%lld]", (long long)t->dims[0]);
        if (qkv)
            return slate__fail(err, SLATE_E_FORMAT, "'%s': tensor '%s' has shape %s (rows by "
                               "inputs), expected [%lld][%d]: q %lld + k %lld + v %lld rows "
                               "(%s %d, %s %d, %s %d) by %s %d", path, src_name, has,
                               (long long)total, a->dim, (long long)rows[0], (long long)rows[1],
                               (long long)rows[2], keys->heads, a->n_heads, keys->kv_heads,
                               a->n_kv_heads, keys->head_dim, a->head_dim, keys->dim, a->dim);
        return slate__fail(err, SLATE_E_FORMAT, "'%s': tensor '%s' has shape %s (rows by "
                           "inputs), expected [%lld][%d]: gate %d + up %d rows (%s %d) by %s %d",
                           path, src_name, has, (long long)total, a->dim, a->ffn_dim, a->ffn_dim,
                           keys->ffn, a->ffn_dim, keys->dim, a->dim);
    }
    const char *const pn[3] = {names[0], names[1], names[2]};
    return slate__import_add_split(imp, t, src_name, qkv ? 3 : 2, pn, rows, err);
}

/* ---- tensor producers -------------------------------------------------------------------- */

typedef struct producer {
    const slate__src_tensor *src; /* NULL: computed data in `computed` */
    const float *computed;
    int64_t n;
    slate_dtype dst;
    slate__qspec q;               /* dst compressed: the matrix and its layout */
    /* SLATE__ROUTE_COPY: the source bytes are already dst's bytes; _TRANSCODE: dst is the
     * source's nearest slate layout, rewritten block by block (slate__ggml_transcode); else
     * the values go through f32 (dequantized, then quantized where dst is compressed). */
    slate__ggml_route route;
    bool add_one;                 /* f32 source norm: write w + 1 (slate__arch.norm_add_one) */
    slate__pool *pool;            /* quantization threads */
} producer;

/* Transcoding one tensor on the pool's threads, each a range of whole source blocks (every
 * source block becomes whole slate blocks: out_bytes each). */
typedef struct tjob {
    const slate__src_tensor *src;
    uint8_t *dst;
    int64_t n_blocks;
    int32_t elems, bytes;
    size_t out_bytes;
    int64_t bad_block[SLATE__QMAX_THREADS]; /* per thread: first block that failed, or -1 */
    float bad_val[SLATE__QMAX_THREADS];
} tjob;

static void transcode_blocks(void *ctx, int ith, int nth) {
    tjob *j = ctx;
    int64_t b0 = j->n_blocks * ith / nth, b1 = j->n_blocks * (ith + 1) / nth;
    int64_t b = slate__ggml_transcode(j->src->type, j->src->data + (size_t)b0 * (size_t)j->bytes,
                                      (b1 - b0) * j->elems, j->dst + (size_t)b0 * j->out_bytes,
                                      &j->bad_val[ith]);
    j->bad_block[ith] = b < 0 ? -1 : b0 + b;
}

/* The first block of p's source whose transcode fails (*bad: the scale), or -1. */
static int64_t transcode_tensor(const producer *p, void *dst, float *bad) {
    tjob j;
    memset(&j, 0, sizeof j);
    j.src = p->src;
    j.dst = dst;
    slate__ggml_block(p->src->type, &j.elems, &j.bytes);
    j.n_blocks = p->n / j.elems;
    j.out_bytes = (size_t)slate__wmat_bytes(p->dst, p->q.block, p->q.asym, 1, j.elems);
    int nth = p->pool ? slate__pool_size(p->pool) : 1;
    if (nth > SLATE__QMAX_THREADS) nth = 1; /* the builder caps its pool at this */
    if (p->pool && nth > 1) slate__pool_run(p->pool, transcode_blocks, &j);
    else transcode_blocks(&j, 0, 1), nth = 1;
    int64_t first = -1;
    for (int t = 0; t < nth; t++)
        if (j.bad_block[t] >= 0 && (first < 0 || j.bad_block[t] < first)) {
            first = j.bad_block[t];
            *bad = j.bad_val[t];
        }
    return first;
}

static slate_status produce(const void *ctx, void *dst, slate_error *err) {
    const producer *p = ctx;
    if (p->src && slate__ggml_is_block(p->src->type)) {
        /* A ggml block with a scale or minimum that is not finite (whatever the route: every
         * value of a block with finite f16 scales is finite, see ggml_quants.h). */
        int32_t elems, bytes;
        slate__ggml_block(p->src->type, &elems, &bytes);
        int64_t cols = p->src->n_dims == 2 ? p->src->dims[1] : p->src->dims[0];
        float bad;
        char what[SLATE__SRC_DESC_CAP];
        int64_t b = slate__ggml_first_nonfinite(p->src->type, p->src->data, p->src->nbytes, &bad);
        if (b >= 0)
            return slate__fail(err, SLATE_E_FORMAT, "%s: the %s block of %d at element "
                               "[%lld][%lld] has a scale that is not finite (%g)",
                               slate__src_desc(p->src, what, sizeof what),
                               slate__src_type_name(p->src->type), (int)elems,
                               (long long)(p->src->src_row0 + b * elems / cols),
                               (long long)(b * elems % cols), bad);
        if (p->route == SLATE__ROUTE_TRANSCODE) {
            b = transcode_tensor(p, dst, &bad);
            /* --keep matches slate's tensor names (a fused matrix's parts), so the hint names
             * the part. */
            if (b >= 0)
                return slate__fail(err, SLATE_E_UNSUPPORTED, "%s: the %s block of %d at "
                                   "element [%lld][%lld] has a sub-block scale %g that does not "
                                   "fit the f16 scale of %s; keep the tensor as f32 (--keep "
                                   "f32:%s)", slate__src_desc(p->src, what, sizeof what),
                                   slate__src_type_name(p->src->type), (int)elems,
                                   (long long)(p->src->src_row0 + b * elems / cols),
                                   (long long)(b * elems % cols), bad, slate_dtype_name(p->dst),
                                   p->src->name);
            return SLATE_OK;
        }
    }
    if (p->route == SLATE__ROUTE_COPY) {
        memcpy(dst, p->src->data, (size_t)p->src->nbytes);
        return SLATE_OK;
    }
    if (p->dst == SLATE_DTYPE_PAL) return slate__palettize_tensor(&p->q, dst, p->pool, err);
    if (slate__wdtype_quantized(p->dst)) return slate__quantize_tensor(&p->q, dst, p->pool, err);
    enum { CHUNK = 4096 }; /* multiple of 256: ggml blocks never straddle chunks */
    float buf[CHUNK];
    char what[SLATE__SRC_DESC_CAP];
    /* Element i of a fused matrix's part is element first + i of the matrix (whole rows). */
    int64_t first = p->src && p->src->n_dims == 2 ? p->src->src_row0 * p->src->dims[1] : 0;
    for (int64_t i = 0; i < p->n; i += CHUNK) {
        int64_t m = p->n - i < CHUNK ? p->n - i : CHUNK;
        if (p->src) {
            bool ok;
            size_t off = slate__src_nbytes(p->src->type, (uint64_t)i, &ok);
            slate__src_to_f32(p->src->type, p->src->data + off, buf, m);
        } else {
            memcpy(buf, p->computed + i, (size_t)m * 4);
        }
        for (int64_t j = 0; j < m; j++) {
            if (!isfinite(buf[j]) && p->src)
                return slate__fail(err, SLATE_E_FORMAT, "%s: element %lld is not finite (%g)",
                                   slate__src_desc(p->src, what, sizeof what),
                                   (long long)(first + i + j), buf[j]);
            if (p->add_one) buf[j] += 1.0f; /* finite + 1 stays finite */
        }
        switch (p->dst) {
        case SLATE_DTYPE_F32:
            memcpy((float *)dst + i, buf, (size_t)m * 4);
            break;
        case SLATE_DTYPE_F16:
        case SLATE_DTYPE_BF16: { /* source tensors only: computed ones are f32 */
            bool f16 = p->dst == SLATE_DTYPE_F16;
            uint16_t inf = f16 ? 0x7c00 : 0x7f80; /* exponent all ones */
            for (int64_t j = 0; j < m; j++) {
                uint16_t h = f16 ? slate__f32_to_f16(buf[j]) : slate__f32_to_bf16(buf[j]);
                /* a finite value past the largest finite half rounds to infinity */
                if ((h & inf) == inf)
                    return slate__fail(err, SLATE_E_UNSUPPORTED, "%s: element %lld = %g does "
                                       "not fit %s (largest finite %g); keep the tensor as "
                                       "f32 (--keep f32:%s)",
                                       slate__src_desc(p->src, what, sizeof what),
                                       (long long)(first + i + j), buf[j],
                                       slate_dtype_name(p->dst), f16 ? 65504.0 : 3.3895314e38,
                                       p->src->name);
                ((uint16_t *)dst)[i + j] = h;
            }
            break;
        }
        case SLATE_DTYPE_I32:
        case SLATE_DTYPE_I8:
        case SLATE_DTYPE_Q8_0: /* compressed dtypes returned above */
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
            return SLATE__INTERNAL(err, "i32/i8/compressed weights");
        }
    }
    return SLATE_OK;
}

/* ---- the builder ------------------------------------------------------------------------- */

typedef struct builder {
    const slate__import *imp;
    const slate_convert_params *cp;
    cJSON *meta, *prog, *acts;
    slate__pkg_wtensor *wt;
    producer *prod;
    bool *used;
    int32_t n_wt;
    float *freqs, *freqs_local;
    int32_t n_ctx;         /* the package's context (LongRoPE picks its factors from it) */
    slate__pool *pool;     /* quantization threads (NULL while nothing is quantized) */
    bool *keep_hit;        /* [n_keep]: the rule matched some matrix */
    /* Matrices written as f16 because their rows are not whole blocks of the dtype chosen for
     * them: one entry per (dtype, block), summarized on stderr after the write. */
    struct fallback {
        slate_dtype dtype;
        int32_t block, n;
        const slate__src_tensor *first;
    } fallback[8];
    int32_t n_fallback;
    /* Source matrices in a ggml block format that the default policy transcoded or
     * requantized into their nearest slate layout (slate__ggml_layout): one entry per source
     * type, summarized on stderr after the write. */
    struct rewritten {
        slate__src_type type;
        slate__ggml_route route;
        slate_dtype dtype;
        int32_t block, n;
        bool asym;
    } rewritten[16];
    int32_t n_rewritten;
    slate_error *err;
} builder;

/* Counts a matrix that falls back to f16 from dtype/block. */
static void note_fallback(builder *b, const slate__src_tensor *t, slate_dtype dt, int32_t block) {
    if (b->cp->progress)
        fprintf(stderr, "note: tensor '%s': rows of %lld are not a multiple of the %s block %d: "
                "written as f16\n", t->name, (long long)t->dims[1], slate_dtype_name(dt),
                (int)block);
    int32_t i = 0;
    while (i < b->n_fallback && !(b->fallback[i].dtype == dt && b->fallback[i].block == block))
        i++;
    if (i == b->n_fallback) {
        /* (dtype, block) pairs: Q8_0/32 and Q4 with the source's block and block_size. */
        if (i == (int32_t)(sizeof b->fallback / sizeof b->fallback[0])) return;
        b->fallback[i] = (struct fallback){dt, block, 0, t};
        b->n_fallback++;
    }
    b->fallback[i].n++;
}

/* A compressed layout in the words of `slate convert --dtype` ("int4-b32 asym", "int8-b32")
 * into buf; returns buf. */
static const char *layout_str(char *buf, size_t cap, slate_dtype dt, int32_t block, bool asym) {
    if (dt == SLATE_DTYPE_Q4)
        snprintf(buf, cap, "int4-b%d%s", (int)block, asym ? " asym" : "");
    else if (dt == SLATE_DTYPE_Q8_0)
        snprintf(buf, cap, "int8-b32");
    else
        snprintf(buf, cap, "%s", slate_dtype_name(dt));
    return buf;
}

/* What a route did to the values, for the notes. */
static const char *route_str(slate__src_type t, slate__ggml_route r) {
    if (r == SLATE__ROUTE_REQUANT) return "requantized: a second rounding, up to half a step";
    return slate__ggml_transcode_exact(t) ? "transcoded, exact"
                                          : "transcoded, sub-block scales rounded to f16";
}

/* Counts a matrix that the default policy rewrote into its nearest slate layout. */
static void note_rewritten(builder *b, const slate__src_tensor *t, const producer *p) {
    char lay[32];
    if (b->cp->progress)
        fprintf(stderr, "note: tensor '%s': %s -> %s (%s)\n", t->name,
                slate__src_type_name(t->type),
                layout_str(lay, sizeof lay, p->dst, p->q.block, p->q.asym),
                route_str(t->type, p->route));
    int32_t i = 0;
    while (i < b->n_rewritten && b->rewritten[i].type != t->type) i++;
    if (i == b->n_rewritten) {
        if (i == (int32_t)(sizeof b->rewritten / sizeof b->rewritten[0])) return;
        b->rewritten[i] = (struct rewritten){t->type, p->route, p->dst, p->q.block, 0, p->q.asym};
        b->n_rewritten++;
    }
    b->rewritten[i].n++;
}

static int32_t block_of(const slate_convert_params *cp, slate_dtype dt) {
    if (dt == SLATE_DTYPE_PAL) /* the packed layout (kernels/quant.h) */
        return slate__pal_layout(cp->pal_bits ? cp->pal_bits : 4,
                                 cp->pal_group ? cp->pal_group : 16);
    return dt == SLATE_DTYPE_Q4 ? (cp->block_size ? cp->block_size : 32)
           : dt == SLATE_DTYPE_Q8_0 ? 32
                                    : 0;
}

/* The dtype of a matrix (module comment of slate_convert_params in slate.h): the source's
 * nearest slate layout (slate__ggml_layout) or `dtype`, the Q8_0 default for the embedding and
 * the head, then the keep rules (last match wins), then F16 for rows that are not whole blocks.
 * Sets p's layout and its route: the source bytes copied or transcoded when the layout is the
 * source's own, transcoded when it is the layout the source transcodes to (Q4_K as q4 b32 asym,
 * slate__ggml_transcode_layout), else through f32. */
static void choose_matrix(builder *b, const slate__src_tensor *t, producer *p) {
    const slate_convert_params *cp = b->cp;
    slate_dtype sdt = SLATE_DTYPE_F32, dt = cp->dtype;
    int32_t sblock = 0;
    bool sasym = false;
    slate__ggml_route route = slate__ggml_layout(t->type, &sdt, &sblock, &sasym);
    bool src_q = route != SLATE__ROUTE_NONE;
    bool asym = cp->asym;
    if (src_q && !cp->convert_quantized) {
        dt = sdt;
        asym = sasym;
    } else if (slate__wdtype_quantized(cp->dtype) &&
               (strcmp(t->name, "token_embd.weight") == 0 || strcmp(t->name, "output.weight") == 0)) {
        dt = SLATE_DTYPE_Q8_0;
    }
    bool kept = false; /* a keep rule chose dt: it gets the layout of the options */
    for (int32_t i = 0; i < cp->n_keep; i++)
        if (fnmatch(cp->keep[i].pattern, t->name, 0) == 0) {
            dt = cp->keep[i].dtype;
            asym = cp->asym;
            kept = true;
            b->keep_hit[i] = true;
        }
    /* The source's block only where its own layout is kept; a keep rule's int4 has
     * block_size like its asym (the bytes are still copied when that is the source's). */
    int32_t block = src_q && !cp->convert_quantized && !kept ? sblock : block_of(cp, dt);
    if (dt != SLATE_DTYPE_Q4) asym = false;
    if (block && dt != SLATE_DTYPE_PAL && t->dims[1] % block) { /* PAL: any row length */
        note_fallback(b, t, dt, block);
        dt = SLATE_DTYPE_F16;
        block = 0;
        asym = false;
    }
    p->dst = dt;
    bool own = src_q && dt == sdt && block == sblock && asym == sasym;
    slate_dtype tdt;
    int32_t tblock;
    bool tasym;
    p->route = own ? route : SLATE__ROUTE_NONE;
    /* Another layout the source transcodes to, asked for (Q4_K as q4 b32 asym): the codes
     * moved, not dequantized and rounded again. */
    if (!own && src_q && slate__ggml_transcode_layout(t->type, &tdt, &tblock, &tasym) &&
        dt == tdt && block == tblock && asym == tasym)
        p->route = SLATE__ROUTE_TRANSCODE;
    p->q.src = t;
    p->q.dtype = dt;
    p->q.block = block;
    p->q.asym = asym;
    p->q.rows = t->dims[0];
    p->q.cols = t->dims[1];
    p->pool = b->pool;
    /* The converter's own choice (nothing asked for this matrix) changed the values' encoding:
     * say so. */
    if (own && !cp->convert_quantized && !kept && route != SLATE__ROUTE_COPY)
        note_rewritten(b, t, p);
}

static const slate__src_tensor *find(const builder *b, const char *name, int32_t *idx) {
    for (int32_t i = 0; i < b->imp->n_tensors; i++)
        if (strcmp(b->imp->tensors[i].name, name) == 0) {
            *idx = i;
            return &b->imp->tensors[i];
        }
    return NULL;
}

/* "[d0][d1]..." for n_dims dims into buf; returns buf. */
static const char *fmt_shape(char *buf, size_t cap, int32_t n_dims, const int64_t *dims) {
    size_t len = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < n_dims && len < cap; i++) {
        int n = snprintf(buf + len, cap - len, "[%lld]", (long long)dims[i]);
        if (n < 0) break;
        len += (size_t)n;
    }
    return buf;
}

/* Declares weight `name` from the source, checking its shape (d1 = 0 for 1-D). */
static slate_status weight(builder *b, const char *name, int64_t d0, int64_t d1, bool matrix) {
    int32_t idx = -1;
    const slate__src_tensor *t = find(b, name, &idx);
    if (!t)
        return slate__fail(b->err, SLATE_E_FORMAT, "tensor '%s' is missing from the source "
                           "(architecture %s needs it)", name, b->imp->a.name);
    if (b->used[idx]) return SLATE_OK; /* tied head: already declared */
    int32_t nd = d1 ? 2 : 1;
    if (t->n_dims != nd || t->dims[0] != d0 || (nd == 2 && t->dims[1] != d1)) {
        const int64_t want[2] = {d0, d1};
        char has[64], needs[64];
        return slate__fail(b->err, SLATE_E_FORMAT, "tensor '%s' has shape %s, the architecture "
                           "needs %s", name, fmt_shape(has, sizeof has, t->n_dims, t->dims),
                           fmt_shape(needs, sizeof needs, nd, want));
    }
    b->used[idx] = true;
    slate__pkg_wtensor *w = &b->wt[b->n_wt];
    producer *p = &b->prod[b->n_wt];
    p->src = t;
    p->n = d0 * (d1 ? d1 : 1);
    p->dst = SLATE_DTYPE_F32;
    if (matrix) choose_matrix(b, t, p);
    w->name = t->name; /* stable: `name` may be a caller's reused buffer */
    w->dtype = p->dst;
    w->block = p->q.block;
    w->asym = p->q.asym;
    w->n_dims = nd;
    w->dims[0] = d0;
    w->dims[1] = d1;
    w->nbytes = slate__wdtype_quantized(p->dst)
                    ? (size_t)slate__wmat_bytes(p->dst, p->q.block, p->q.asym, d0, d1)
                    : (size_t)p->n * slate__dtype_size(p->dst);
    w->produce = produce;
    w->ctx = p;
    b->n_wt++;
    return SLATE_OK;
}

static void act(builder *b, const char *name, int64_t width, bool out_rows) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "name", name);
    cJSON_AddNumberToObject(a, "width", (double)width);
    if (out_rows) cJSON_AddStringToObject(a, "rows", "out");
    cJSON_AddItemToArray(b->acts, a);
}

static cJSON *op(builder *b, const char *kind, const char *out, int n_in, ...) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", kind);
    cJSON *in = cJSON_AddArrayToObject(o, "in");
    va_list ap;
    va_start(ap, n_in);
    for (int i = 0; i < n_in; i++) cJSON_AddItemToArray(in, cJSON_CreateString(va_arg(ap, const char *)));
    va_end(ap);
    if (out) cJSON_AddStringToObject(o, "out", out);
    cJSON_AddItemToArray(b->prog, o);
    return o;
}

/* The local layers' (Gemma 3's sliding layers): rope_local_theta^(-2i/d), never scaled (HF
 * builds their rotary embedding from rope_local_base_freq with rope type "default"). */
static void rope_freqs_local(const slate__arch *a, float *out) {
    for (int32_t i = 0; i < a->rope_dim / 2; i++)
        out[i] = (float)(1.0 / pow((double)a->rope_local_theta, (double)(2 * i) /
                                   (double)a->rope_dim));
}

/* Inverse frequencies theta^(-2i/d), then the scaling. Llama 3.1 scaling follows
 * transformers' _compute_llama3_parameters: high frequencies kept, low ones divided by factor,
 * a smooth blend between. LongRoPE (transformers' _compute_longrope_parameters, llama.cpp's
 * rope_factors_long/short) divides frequency i by factor i of one list: the long one when the
 * package's context n_ctx exceeds the original context, else the short one. transformers
 * switches per call on the sequence length instead; llama.cpp, like this, picks once from the
 * context it was given, so the two agree whenever the sequence and the context are on the same
 * side of the original context. */
static void rope_freqs(const slate__arch *a, int32_t n_ctx, float *out) {
    int32_t half = a->rope_dim / 2;
    for (int32_t i = 0; i < half; i++) {
        double f = 1.0 / pow((double)a->rope_theta, (double)(2 * i) / (double)a->rope_dim);
        if (a->rope_scaling == SLATE__ROPE_SCALING_LINEAR) {
            f /= a->rope_factor;
        } else if (a->rope_scaling == SLATE__ROPE_SCALING_LLAMA3) {
            double orig = a->rope_orig_ctx, lo = a->rope_low_freq, hi = a->rope_high_freq;
            double wavelen = 2.0 * 3.14159265358979323846 / f;
            if (wavelen < orig / hi) {
                /* keep */
            } else if (wavelen > orig / lo) {
                f /= a->rope_factor;
            } else {
                double s = (orig / wavelen - lo) / (hi - lo);
                f = (1.0 - s) * f / a->rope_factor + s * f;
            }
        } else if (a->rope_scaling == SLATE__ROPE_SCALING_LONGROPE) {
            f /= n_ctx > a->rope_orig_ctx ? a->rope_long[i] : a->rope_short[i];
        }
        out[i] = (float)f;
    }
}

static slate_status check_arch(const slate__arch *a, slate_error *err) {
    if (a->n_vocab < 1 || a->n_vocab > SLATE__MAX_VOCAB || a->dim < 1 || a->dim > SLATE__MAX_DIM ||
        a->n_layers < 1 || a->n_layers > SLATE__MAX_LAYERS || a->n_heads < 1 ||
        a->n_heads > SLATE__MAX_HEADS || a->n_kv_heads < 1 || a->n_heads % a->n_kv_heads ||
        a->head_dim < 2 || a->head_dim > SLATE__MAX_HEAD_DIM || a->ffn_dim < 1 ||
        a->ffn_dim > SLATE__MAX_FFN ||
        a->rope_dim < 2 || a->rope_dim > a->head_dim || a->rope_dim % 2 ||
        !(a->norm_eps > 0 && a->norm_eps < 1) || !(isfinite(a->rope_theta) && a->rope_theta > 0) ||
        a->n_ctx < 1)
        return slate__fail(err, SLATE_E_FORMAT, "implausible %s hyper-parameters: vocab %d, dim "
                           "%d, layers %d, heads %d/%d, head_dim %d, ffn %d, rope_dim %d, eps %g, "
                           "theta %g, context %d", a->name, a->n_vocab, a->dim, a->n_layers,
                           a->n_heads, a->n_kv_heads, a->head_dim, a->ffn_dim, a->rope_dim,
                           a->norm_eps, a->rope_theta, a->n_ctx);
    if (a->rope_scaling != SLATE__ROPE_SCALING_NONE &&
        (!(isfinite(a->rope_factor) && a->rope_factor > 0) ||
         (a->rope_scaling == SLATE__ROPE_SCALING_LLAMA3 &&
          (!(isfinite(a->rope_high_freq) && a->rope_high_freq > a->rope_low_freq) ||
           !(a->rope_low_freq > 0) || a->rope_orig_ctx < 1))))
        return slate__fail(err, SLATE_E_FORMAT, "rope scaling parameters are inconsistent "
                           "(factor %g, low %g, high %g, original context %d)", a->rope_factor,
                           a->rope_low_freq, a->rope_high_freq, a->rope_orig_ctx);
    if ((a->ffn_act != SLATE__FFN_SWIGLU && a->ffn_act != SLATE__FFN_GEGLU) ||
        !(isfinite(a->embd_scale) && a->embd_scale >= 0 && a->embd_scale <= 1e6f) ||
        !(isfinite(a->attn_scale) && a->attn_scale >= 0 && a->attn_scale <= 1e6f) ||
        !(isfinite(a->rope_local_theta) && a->rope_local_theta >= 0) ||
        !(a->attn_softcap >= 0 && a->attn_softcap <= 1e6f) ||
        !(a->final_softcap >= 0 && a->final_softcap <= 1e6f) ||
        !(isfinite(a->residual_scale) && a->residual_scale >= 0 && a->residual_scale <= 1e6f) ||
        /* 1 / logit_scale is the scale op's factor, which must be <= 1e6 */
        !(a->logit_scale == 0 || (a->logit_scale >= 1e-6f && a->logit_scale <= 1e6f)))
        return slate__fail(err, SLATE_E_FORMAT, "implausible %s parameters: feed-forward %d, "
                           "embedding scale %g, attention scale %g, local rope theta %g, "
                           "soft-caps %g / %g (attention / logits), residual scale %g, logit "
                           "scale %g (accepted: 0 for none, else 1e-6..1e6)",
                           a->name, a->ffn_act, a->embd_scale, a->attn_scale,
                           a->rope_local_theta, a->attn_softcap, a->final_softcap,
                           a->residual_scale, a->logit_scale);
    if (a->rope_scaling == SLATE__ROPE_SCALING_LONGROPE) {
        if (a->n_rope_factors != a->rope_dim / 2)
            return slate__fail(err, SLATE_E_FORMAT, "LongRoPE needs %d factors per list (one "
                               "per rotated pair: rope_dim %d / 2), found %d", a->rope_dim / 2,
                               a->rope_dim, a->n_rope_factors);
        if (!(isfinite(a->rope_attn_factor) && a->rope_attn_factor > 0) || a->rope_orig_ctx < 1)
            return slate__fail(err, SLATE_E_FORMAT, "LongRoPE attention factor %g or original "
                               "context %d is not positive", a->rope_attn_factor,
                               a->rope_orig_ctx);
        for (int32_t i = 0; i < a->n_rope_factors; i++)
            if (!(isfinite(a->rope_short[i]) && a->rope_short[i] > 0 &&
                  isfinite(a->rope_long[i]) && a->rope_long[i] > 0))
                return slate__fail(err, SLATE_E_FORMAT, "LongRoPE factor %d is not a positive "
                                   "finite number (short %g, long %g)", i, a->rope_short[i],
                                   a->rope_long[i]);
    }
    return SLATE_OK;
}

/* An RMSNorm weight [n]: f32, plus one where the source stores w - 1 (Gemma). */
static slate_status norm_weight(builder *b, const char *name, int64_t n) {
    slate_status s = weight(b, name, n, 0, false);
    if (!s && b->imp->a.norm_add_one) b->prod[b->n_wt - 1].add_one = true;
    return s;
}

/* rms_norm out = x * w (eps of the architecture; group: per group of that many, 0: per row). */
static void rms_norm_op(builder *b, const char *out, const char *x, const char *w, int32_t group) {
    cJSON *o = op(b, "rms_norm", out, 2, x, w);
    cJSON_AddNumberToObject(o, "eps", b->imp->a.norm_eps);
    if (group) cJSON_AddNumberToObject(o, "group", group);
}

/* Declares a computed f32 tensor [n] (data owned by the builder). */
static void computed(builder *b, const char *name, const float *data, int64_t n) {
    slate__pkg_wtensor *w = &b->wt[b->n_wt];
    producer *p = &b->prod[b->n_wt];
    p->computed = data;
    p->n = n;
    p->dst = SLATE_DTYPE_F32;
    w->name = name;
    w->dtype = SLATE_DTYPE_F32;
    w->n_dims = 1;
    w->dims[0] = n;
    w->nbytes = (size_t)n * 4;
    w->produce = produce;
    w->ctx = p;
    b->n_wt++;
}

static slate_status build_program(builder *b) {
    const slate__arch *a = &b->imp->a;
    slate_status s;
    char n[96], n2[96], n3[96], kc[64], vc[64];
    int64_t qw = (int64_t)a->n_heads * a->head_dim, kw = (int64_t)a->n_kv_heads * a->head_dim;
    /* LongRoPE's attention factor m: folded into the scale as m^2 for whole heads, rope's
     * mscale for partial rotary (module comment). */
    double m = a->rope_scaling == SLATE__ROPE_SCALING_LONGROPE ? a->rope_attn_factor : 1.0;
    double base_scale = a->attn_scale > 0 ? a->attn_scale : 1.0 / sqrt((double)a->head_dim);
    bool whole = a->rope_dim == a->head_dim;
    float mscale = whole ? 1.0f : (float)m;
    double attn_scale = (whole ? m * m : 1.0) * base_scale;
    bool use_global = false, use_local = false; /* which rope tensors some op reads */
    if ((s = weight(b, "token_embd.weight", a->n_vocab, a->dim, true))) return s;
    op(b, "embedding", "x", 2, "token_embd.weight", "tokens");
    if (a->embd_scale > 0)
        cJSON_AddNumberToObject(op(b, "scale", "x", 1, "x"), "factor", a->embd_scale);
    act(b, "x", a->dim, false);
    act(b, "xn", a->dim, false);
    act(b, "q", qw, false);
    act(b, "k", kw, false);
    act(b, "v", kw, false);
    act(b, "att", qw, false);
    act(b, "ao", a->dim, false);
    act(b, "gate", a->ffn_dim, false);
    act(b, "up", a->ffn_dim, false);
    cJSON *states = cJSON_GetObjectItemCaseSensitive(b->meta, "states");
    const char *kv_dtype = slate_dtype_name(b->cp->kv_dtype); /* checked: f32 or f16 */
    for (int32_t l = 0; l < a->n_layers; l++) {
        /* Gemma 3's sliding layers (or every layer of a windowed model) */
        bool sliding = !a->per_layer_sliding || a->layer_sliding[l];
        bool local_rope = a->per_layer_sliding && a->layer_sliding[l] && a->rope_local_theta > 0;
        bool nope = a->layer_nope[l]; /* SmolLM3's NoPE layers: no rope op at all */
        const char *freqs = local_rope ? "rope_local.freqs" : "rope.freqs";
        use_local |= local_rope && !nope;
        use_global |= !local_rope && !nope;
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l);
        if ((s = norm_weight(b, n, a->dim))) return s;
        rms_norm_op(b, "xn", "x", n, 0);
        const char *names[3] = {"q", "k", "v"};
        int64_t widths[3] = {qw, kw, kw};
        for (int i = 0; i < 3; i++) {
            snprintf(n, sizeof n, "blk.%d.attn_%s.weight", l, names[i]);
            if ((s = weight(b, n, widths[i], a->dim, true))) return s;
            if (a->qkv_bias) {
                snprintf(n2, sizeof n2, "blk.%d.attn_%s.bias", l, names[i]);
                if ((s = weight(b, n2, widths[i], 0, false))) return s;
                op(b, "matmul", names[i], 3, "xn", n, n2);
            } else {
                op(b, "matmul", names[i], 2, "xn", n);
            }
        }
        if (a->qk_norm) {
            for (int i = 0; i < 2; i++) {
                snprintf(n, sizeof n, "blk.%d.attn_%s_norm.weight", l, names[i]);
                if ((s = norm_weight(b, n, a->head_dim))) return s;
                rms_norm_op(b, names[i], names[i], n, a->head_dim);
            }
        }
        for (int i = 0; i < 2 && !nope; i++) {
            cJSON *o = op(b, "rope", names[i], 2, names[i], freqs);
            cJSON_AddNumberToObject(o, "n_heads", i == 0 ? a->n_heads : a->n_kv_heads);
            cJSON_AddNumberToObject(o, "head_dim", a->head_dim);
            cJSON_AddNumberToObject(o, "rope_dim", a->rope_dim);
            cJSON_AddStringToObject(o, "mode", a->rope_mode == SLATE__ROPE_HALF ? "half" : "adjacent");
            if (mscale != 1.0f) cJSON_AddNumberToObject(o, "mscale", mscale);
        }
        snprintf(kc, sizeof kc, "cache.%d.k", l);
        snprintf(vc, sizeof vc, "cache.%d.v", l);
        for (int i = 0; i < 2; i++) {
            cJSON *st = cJSON_CreateObject();
            cJSON_AddStringToObject(st, "name", i ? vc : kc);
            cJSON_AddStringToObject(st, "dtype", kv_dtype);
            cJSON_AddNumberToObject(st, "width", (double)kw);
            cJSON_AddItemToArray(states, st);
        }
        op(b, "kv_write", NULL, 2, "k", kc);
        op(b, "kv_write", NULL, 2, "v", vc);
        cJSON *o = op(b, a->attn_softcap > 0 ? "attention_softcap" : "attention", "att", 3, "q",
                      kc, vc);
        if (a->attn_softcap > 0) cJSON_AddNumberToObject(o, "softcap", a->attn_softcap);
        cJSON_AddNumberToObject(o, "n_heads", a->n_heads);
        cJSON_AddNumberToObject(o, "n_kv_heads", a->n_kv_heads);
        cJSON_AddNumberToObject(o, "head_dim", a->head_dim);
        /* LongRoPE's m^2 only where q and k were rotated (scaled by m): a NoPE layer's are not */
        cJSON_AddNumberToObject(o, "scale", nope ? base_scale : attn_scale);
        if (a->sliding_window > 0 && sliding)
            cJSON_AddNumberToObject(o, "window", a->sliding_window);
        snprintf(n, sizeof n, "blk.%d.attn_output.weight", l);
        if ((s = weight(b, n, a->dim, qw, true))) return s;
        op(b, "matmul", "ao", 2, "att", n);
        if (a->post_norms) {
            snprintf(n, sizeof n, "blk.%d.post_attention_norm.weight", l);
            if ((s = norm_weight(b, n, a->dim))) return s;
            rms_norm_op(b, "ao", "ao", n, 0);
        }
        if (a->residual_scale > 0)
            cJSON_AddNumberToObject(op(b, "scale", "ao", 1, "ao"), "factor", a->residual_scale);
        op(b, "add", "x", 2, "x", "ao");
        snprintf(n, sizeof n, "blk.%d.ffn_norm.weight", l);
        if ((s = norm_weight(b, n, a->dim))) return s;
        rms_norm_op(b, "xn", "x", n, 0);
        snprintf(n, sizeof n, "blk.%d.ffn_gate.weight", l);
        snprintf(n2, sizeof n2, "blk.%d.ffn_up.weight", l);
        snprintf(n3, sizeof n3, "blk.%d.ffn_down.weight", l);
        if ((s = weight(b, n, a->ffn_dim, a->dim, true)) ||
            (s = weight(b, n2, a->ffn_dim, a->dim, true)) ||
            (s = weight(b, n3, a->dim, a->ffn_dim, true)))
            return s;
        op(b, "matmul", "gate", 2, "xn", n);
        op(b, "matmul", "up", 2, "xn", n2);
        op(b, a->ffn_act == SLATE__FFN_GEGLU ? "geglu" : "swiglu", "gate", 2, "gate", "up");
        op(b, "matmul", "ao", 2, "gate", n3);
        if (a->post_norms) {
            snprintf(n, sizeof n, "blk.%d.post_ffw_norm.weight", l);
            if ((s = norm_weight(b, n, a->dim))) return s;
            rms_norm_op(b, "ao", "ao", n, 0);
        }
        if (a->residual_scale > 0)
            cJSON_AddNumberToObject(op(b, "scale", "ao", 1, "ao"), "factor", a->residual_scale);
        op(b, "add", "x", 2, "x", "ao");
    }
    act(b, "xl", a->dim, true);
    act(b, "logits", a->n_vocab, true);
    op(b, "last_rows", "xl", 1, "x");
    if ((s = norm_weight(b, "output_norm.weight", a->dim))) return s;
    rms_norm_op(b, "xl", "xl", "output_norm.weight", 0);
    const char *head = a->tied ? "token_embd.weight" : "output.weight";
    if (!a->tied && (s = weight(b, head, a->n_vocab, a->dim, true))) return s;
    op(b, "matmul", "logits", 2, "xl", head);
    if (a->final_softcap > 0)
        cJSON_AddNumberToObject(op(b, "softcap", "logits", 1, "logits"), "cap", a->final_softcap);
    if (a->logit_scale > 0)
        cJSON_AddNumberToObject(op(b, "scale", "logits", 1, "logits"), "factor",
                                (double)(1.0f / a->logit_scale));
    /* rope.freqs (and rope_local.freqs): computed here, not read from the source. */
    size_t nf = (size_t)(a->rope_dim / 2);
    if (use_global) {
        if (!(b->freqs = slate__malloc(sizeof(float) * nf)))
            return slate__fail(b->err, SLATE_E_NOMEM, "out of memory");
        rope_freqs(a, b->n_ctx, b->freqs);
        computed(b, "rope.freqs", b->freqs, (int64_t)nf);
    }
    if (use_local) {
        if (!(b->freqs_local = slate__malloc(sizeof(float) * nf)))
            return slate__fail(b->err, SLATE_E_NOMEM, "out of memory");
        rope_freqs_local(a, b->freqs_local);
        computed(b, "rope_local.freqs", b->freqs_local, (int64_t)nf);
    }
    for (int32_t i = 0; i < b->imp->n_tensors; i++)
        if (!b->used[i])
            return slate__fail(b->err, SLATE_E_UNSUPPORTED, "source tensor '%s' is not used by "
                               "the %s program (refusing to drop weights silently)",
                               b->imp->tensors[i].name, a->name);
    return SLATE_OK;
}

/* The dtypes a matrix can be converted to. Not the super-block ones (q4_k, q5_k, q6_k, q3_k,
 * q2_k, iq4_xs) nor iq4_nl: slate has no quantizer for them, their packages hold GGUF
 * tensors' own bytes (the default for those tensors). */
static bool matrix_dtype_ok(slate_dtype d) {
    return d == SLATE_DTYPE_F32 || d == SLATE_DTYPE_F16 || d == SLATE_DTYPE_BF16 ||
           (slate__wdtype_quantized(d) && !slate__wdtype_superblock(d) &&
            d != SLATE_DTYPE_IQ4_NL);
}

/* Why dtype d is not a conversion target, for the messages below: for a super-block dtype,
 * where such tensors come from; "" for the others. */
static const char *not_target_why(slate_dtype d) {
    switch ((int)d) {
    case SLATE_DTYPE_Q4_K: return "; q4_k is only copied from GGUF Q4_K tensors, by default";
    case SLATE_DTYPE_Q5_K: return "; q5_k is only copied from GGUF Q5_K tensors, by default";
    case SLATE_DTYPE_Q6_K: return "; q6_k is only copied from GGUF Q6_K tensors, by default";
    case SLATE_DTYPE_Q3_K: return "; q3_k is only copied from GGUF Q3_K tensors, by default";
    case SLATE_DTYPE_Q2_K: return "; q2_k is only copied from GGUF Q2_K tensors, by default";
    case SLATE_DTYPE_IQ4_NL: return "; iq4_nl is only copied from GGUF IQ4_NL tensors, by default";
    case SLATE_DTYPE_IQ4_XS: return "; iq4_xs is only copied from GGUF IQ4_XS tensors, by default";
    default: return "";
    }
}

/* The compression parameters (slate_convert_params in slate.h). */
static slate_status check_compression(const slate_convert_params *cp, slate_error *err) {
    if (!matrix_dtype_ok(cp->dtype))
        return slate__fail(err, SLATE_E_INVALID_ARG, "weight dtype %s: expected f32, f16, bf16, "
                           "q8_0, q4, q8_c or pal%s", slate_dtype_name(cp->dtype),
                           not_target_why(cp->dtype));
    if (cp->pal_bits != 0 && cp->pal_bits != 2 && cp->pal_bits != 3 && cp->pal_bits != 4 &&
        cp->pal_bits != 6 && cp->pal_bits != 8)
        return slate__fail(err, SLATE_E_INVALID_ARG, "pal bits %d: expected 2, 3, 4, 6 or 8",
                           cp->pal_bits);
    if (cp->pal_group < 0 || cp->pal_group > SLATE__PAL_GROUP_MAX)
        return slate__fail(err, SLATE_E_INVALID_ARG, "pal group %d: expected 1..%d rows (0: 16)",
                           cp->pal_group, SLATE__PAL_GROUP_MAX);
    if (cp->block_size != 0 && cp->block_size != 16 && cp->block_size != 32 &&
        cp->block_size != 64 && cp->block_size != 128)
        return slate__fail(err, SLATE_E_INVALID_ARG, "block size %d: expected 16, 32, 64 or 128",
                           cp->block_size);
    if (cp->n_keep < 0 || cp->n_keep > 4096 || (cp->n_keep && !cp->keep))
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_keep %d: expected 0..4096 rules in keep",
                           cp->n_keep);
    for (int32_t i = 0; i < cp->n_keep; i++) {
        if (!cp->keep[i].pattern || !cp->keep[i].pattern[0])
            return slate__fail(err, SLATE_E_INVALID_ARG, "keep rule %d has no pattern", i);
        if (!matrix_dtype_ok(cp->keep[i].dtype))
            return slate__fail(err, SLATE_E_INVALID_ARG, "keep rule %d (%s): dtype %s is not a "
                               "dtype a matrix can be converted to (f32, f16, bf16, q8_0, "
                               "q4, q8_c, pal%s)", i, cp->keep[i].pattern,
                               slate_dtype_name(cp->keep[i].dtype),
                               not_target_why(cp->keep[i].dtype));
    }
    if (cp->n_threads < 0 || cp->n_threads > 1024)
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_threads %d outside 0..1024", cp->n_threads);
    /* A layout parameter of a dtype no matrix gets would be ignored silently: refuse it. */
    bool q4 = cp->dtype == SLATE_DTYPE_Q4, pal = cp->dtype == SLATE_DTYPE_PAL;
    for (int32_t i = 0; i < cp->n_keep; i++) {
        q4 |= cp->keep[i].dtype == SLATE_DTYPE_Q4;
        pal |= cp->keep[i].dtype == SLATE_DTYPE_PAL;
    }
    const char *dn = slate_dtype_name(cp->dtype);
    if (!q4 && (cp->asym || cp->block_size))
        return slate__fail(err, SLATE_E_INVALID_ARG, "%s applies to q4 (int4) weights only, but "
                           "the dtype is %s and no keep rule is q4",
                           cp->asym ? "asym" : "block size", dn);
    if (!pal && (cp->pal_bits || cp->pal_group))
        return slate__fail(err, SLATE_E_INVALID_ARG, "%s applies to pal (palettized) weights "
                           "only, but the dtype is %s and no keep rule is pal",
                           cp->pal_bits ? "pal bits" : "pal group", dn);
    return SLATE_OK;
}

slate_status slate__build_package(const slate__import *imp, const slate_convert_params *cp,
                                  const char *out_path, slate_error *err) {
    const slate__arch *a = &imp->a;
    slate_status s = check_arch(a, err);
    if (s) return s;
    if (!cp->n_ctx && a->n_ctx > SLATE__MAX_CTX)
        return slate__fail(err, SLATE_E_INVALID_ARG, "the source's context length %d is more "
                           "than slate's maximum %d: give a smaller one (slate convert "
                           "--context N)", a->n_ctx, SLATE__MAX_CTX);
    int32_t n_ctx = cp->n_ctx ? cp->n_ctx : a->n_ctx;
    int32_t max_query = cp->max_query ? cp->max_query : (n_ctx < 512 ? n_ctx : 512);
    if (n_ctx < 1 || n_ctx > SLATE__MAX_CTX || max_query < 1 || max_query > n_ctx)
        return slate__fail(err, SLATE_E_INVALID_ARG, "context %d and max query %d: need 1 <= "
                           "max_query <= context <= %d", n_ctx, max_query, SLATE__MAX_CTX);
    if ((s = check_compression(cp, err))) return s;
    if (cp->kv_dtype != SLATE_DTYPE_F32 && cp->kv_dtype != SLATE_DTYPE_F16)
        return slate__fail(err, SLATE_E_INVALID_ARG, "kv_dtype %s: a package declares f32 or f16 "
                           "caches (int8 is chosen per state)", slate_dtype_name(cp->kv_dtype));
    builder b = {0};
    b.imp = imp;
    b.cp = cp;
    b.n_ctx = n_ctx;
    b.err = err;
    size_t cap = (size_t)imp->n_tensors + 2; /* + rope.freqs and rope_local.freqs */
    b.wt = slate__calloc(cap, sizeof *b.wt);
    b.prod = slate__calloc(cap, sizeof *b.prod);
    b.used = slate__calloc(cap, sizeof *b.used);
    b.keep_hit = slate__calloc((size_t)cp->n_keep + 1, sizeof *b.keep_hit);
    b.meta = cJSON_CreateObject();
    slate__buf tok = {0};
    if (!b.wt || !b.prod || !b.used || !b.keep_hit || !b.meta) {
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
        goto done;
    }
    {
        int nth = cp->n_threads ? cp->n_threads : slate__n_cores();
        if ((s = slate__pool_create(nth < SLATE__QMAX_THREADS ? nth : SLATE__QMAX_THREADS, &b.pool,
                                    err)))
            goto done;
    }
    cJSON_AddStringToObject(b.meta, "format", "slate");
    cJSON_AddStringToObject(b.meta, "arch", a->name);
    cJSON *hp = cJSON_AddObjectToObject(b.meta, "hparams");
    cJSON_AddNumberToObject(hp, "n_vocab", a->n_vocab);
    cJSON_AddNumberToObject(hp, "dim", a->dim);
    cJSON_AddNumberToObject(hp, "n_layers", a->n_layers);
    cJSON_AddNumberToObject(hp, "n_heads", a->n_heads);
    cJSON_AddNumberToObject(hp, "n_kv_heads", a->n_kv_heads);
    cJSON_AddNumberToObject(hp, "head_dim", a->head_dim);
    cJSON_AddNumberToObject(hp, "ffn_dim", a->ffn_dim);
    cJSON_AddNumberToObject(hp, "norm_eps", a->norm_eps);
    cJSON_AddNumberToObject(hp, "rope_theta", a->rope_theta);
    cJSON_AddNumberToObject(hp, "n_ctx_train", a->n_ctx);
    cJSON *shapes = cJSON_AddObjectToObject(b.meta, "shapes");
    cJSON_AddNumberToObject(shapes, "n_ctx", n_ctx);
    cJSON_AddNumberToObject(shapes, "max_query", max_query);
    cJSON *inputs = cJSON_AddArrayToObject(b.meta, "inputs");
    cJSON *tin = cJSON_CreateObject();
    cJSON_AddStringToObject(tin, "name", "tokens");
    cJSON_AddStringToObject(tin, "dtype", "i32");
    cJSON_AddItemToArray(inputs, tin);
    cJSON *outputs = cJSON_AddArrayToObject(b.meta, "outputs");
    cJSON_AddItemToArray(outputs, cJSON_CreateString("logits"));
    cJSON_AddArrayToObject(b.meta, "states");
    b.acts = cJSON_AddArrayToObject(b.meta, "activations");
    b.prog = cJSON_AddArrayToObject(b.meta, "program");
    if (imp->chat_template) cJSON_AddStringToObject(b.meta, "chat_template", imp->chat_template);
    cJSON *special = cJSON_AddObjectToObject(b.meta, "special");
    cJSON_AddNumberToObject(special, "bos", slate_tokenizer_bos(imp->tok));
    cJSON_AddNumberToObject(special, "eos", slate_tokenizer_eos(imp->tok));
    cJSON *stop_ids = cJSON_AddArrayToObject(special, "stop_ids");
    for (int32_t i = 0; i < imp->n_stop_ids; i++)
        cJSON_AddItemToArray(stop_ids, cJSON_CreateNumber(imp->stop_ids[i]));
    if ((s = build_program(&b))) goto done;
    for (int32_t i = 0; i < cp->n_keep; i++)
        if (!b.keep_hit[i]) {
            s = slate__fail(err, SLATE_E_INVALID_ARG, "keep rule %d (%s:%s) matches no matrix of "
                            "this model (names look like 'blk.0.ffn_down.weight')", i,
                            slate_dtype_name(cp->keep[i].dtype), cp->keep[i].pattern);
            goto done;
        }
    if (slate_tokenizer_n_vocab(imp->tok) > a->n_vocab) {
        s = slate__fail(err, SLATE_E_FORMAT, "tokenizer has %d tokens, more than the model's "
                        "vocabulary of %d", slate_tokenizer_n_vocab(imp->tok), a->n_vocab);
        goto done;
    }
    slate__tok_serialize(imp->tok, &tok);
    if (tok.failed) {
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory serializing the tokenizer");
        goto done;
    }
    /* Validate the program we are about to write with the same compiler the runtime uses, so a
     * converter bug can never produce a package that will not open. */
    {
        uint64_t off;
        cJSON *probe = slate__pkg_meta_with_table(b.meta, b.wt, (size_t)b.n_wt, &off);
        if (!probe) {
            s = slate__fail(err, SLATE_E_NOMEM, "out of memory building the tensor table");
            goto done;
        }
        slate__program prog;
        s = slate__program_compile(probe, off, &prog, err);
        cJSON_Delete(probe);
        if (s) goto done;
        slate__program_free(&prog);
    }
    s = slate__pkg_write(out_path, b.meta, tok.data, tok.len, b.wt, (size_t)b.n_wt, cp->progress,
                         err);
    /* Always said, not only with progress: the user asked for another dtype. */
    for (int32_t i = 0; !s && i < b.n_fallback; i++) {
        const struct fallback *f = &b.fallback[i];
        fprintf(stderr, "note: %d matri%s written as f16 instead of %s: rows not a multiple of "
                "the %s block %d (e.g. '%s', rows of %lld)\n", (int)f->n,
                f->n == 1 ? "x" : "ces", slate_dtype_name(f->dtype), slate_dtype_name(f->dtype),
                (int)f->block, f->first->name, (long long)f->first->dims[1]);
    }
    for (int32_t i = 0; !s && i < b.n_rewritten; i++) {
        const struct rewritten *r = &b.rewritten[i];
        char lay[32];
        fprintf(stderr, "note: %d matri%s %s -> %s (%s)\n", (int)r->n, r->n == 1 ? "x" : "ces",
                slate__src_type_name(r->type),
                layout_str(lay, sizeof lay, r->dtype, r->block, r->asym),
                route_str(r->type, r->route));
    }
done:
    slate__buf_free(&tok);
    cJSON_Delete(b.meta);
    slate__free(b.wt);
    slate__free(b.prod);
    slate__free(b.used);
    slate__free(b.keep_hit);
    slate__pool_free(b.pool);
    slate__free(b.freqs);
    slate__free(b.freqs_local);
    return s;
}
