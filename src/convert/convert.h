/*
 * convert.h - importers and the package builder (internal). Each importer reads one source
 * format into a slate__import: the architecture's hyper-parameters, its tensors under
 * canonical (GGUF-style) names with shapes [out][in], and a tokenizer. The builder checks every
 * tensor against the architecture, writes the program that expresses the architecture's
 * differences (qkv bias, q/k norm, rope layout and scaling, tied head, GQA, sliding window;
 * Gemma's embedding scale, (1 + w) norms, GeGLU, norms of the block outputs, per-layer windows
 * and RoPE bases; SmolLM3's layers without RoPE), and streams the weights, converted to the
 * requested dtype, into the package. Fused source matrices (Phi-3's qkv and gate_up
 * projections) are split by the importers into the separate q/k/v and gate/up tensors the
 * program uses (slate__import_add_split): views of the source rows, so quantized blocks are
 * kept byte for byte.
 */
#ifndef SLATE_CONVERT_H
#define SLATE_CONVERT_H

#include "core/core.h"

typedef enum slate__src_type {
    SLATE__SRC_F32,
    SLATE__SRC_F16,
    SLATE__SRC_BF16,
    SLATE__SRC_Q8_0, /* ggml: blocks of 32: f16 scale + 32 int8 */
    SLATE__SRC_Q4_0, /* ggml: blocks of 32: f16 scale + 16 bytes of nibbles, value q - 8 */
    SLATE__SRC_Q4_1, /* ggml: blocks of 32: f16 scale d, f16 offset m, 16 bytes of nibbles,
                        value d * q + m */
    /* More ggml block formats (GGUF K-quant mixes); layouts in convert/ggml_quants.h. */
    SLATE__SRC_Q5_0,   /* blocks of 32 */
    SLATE__SRC_Q5_1,   /* blocks of 32 */
    SLATE__SRC_Q2_K,   /* super-blocks of 256 */
    SLATE__SRC_Q3_K,   /* super-blocks of 256 */
    SLATE__SRC_Q4_K,   /* super-blocks of 256 */
    SLATE__SRC_Q5_K,   /* super-blocks of 256 */
    SLATE__SRC_Q6_K,   /* super-blocks of 256 */
    SLATE__SRC_IQ4_NL, /* blocks of 32 */
    SLATE__SRC_IQ4_XS, /* super-blocks of 256 */
} slate__src_type;

typedef struct slate__src_tensor {
    char name[96];        /* canonical: token_embd.weight, blk.N.attn_q.weight, ... */
    slate__src_type type;
    int32_t n_dims;       /* 1 or 2 */
    int64_t dims[2];      /* outermost first: matrices [out][in] */
    const uint8_t *data;  /* borrowed from the importer's mapping */
    uint64_t nbytes;
    /* The file's own name of this tensor where it differs from `name` ('\0' where it does not):
     * an HF tensor ("model.layers.1.self_attn.q_proj.weight"), or, with `part`, the fused
     * source matrix ("blk.1.attn_qkv.weight", Phi-3) that this tensor is rows src_row0.. of
     * (slate__import_add_split). Messages about elements name it (slate__src_desc): the file
     * has no tensor called `name`. */
    char src_name[160];
    bool part;
    int64_t src_row0;     /* 0 unless part */
} slate__src_tensor;

/* For messages about t's elements: "tensor 'NAME'"; "tensor 'SRC' (NAME)" when the file
 * names it SRC; for a part of a fused matrix "tensor 'SRC' (rows A..B of it are NAME)". Into
 * buf (truncated to cap); returns buf. Rows of t are rows t->src_row0 + r of the tensor
 * named. */
/* A buffer that always holds slate__src_desc's text whole: "tensor '" + src_name + "' (rows
 * " + two int64 + " of it are " + name + ")". */
#define SLATE__SRC_DESC_CAP 384
const char *slate__src_desc(const slate__src_tensor *t, char *buf, size_t cap);

enum {
    SLATE__ROPE_SCALING_NONE,
    SLATE__ROPE_SCALING_LINEAR,
    SLATE__ROPE_SCALING_LLAMA3,
    SLATE__ROPE_SCALING_LONGROPE, /* Phi-3 128k / Phi-3.5: per-frequency divisors + attention
                                     factor (build.c, rope_freqs) */
};

/* Most LongRoPE factors per list: one per rotated pair, rope_dim / 2 <= SLATE__MAX_HEAD_DIM / 2
 * (build.c checks the two agree). */
#define SLATE__MAX_ROPE_FACTORS 256

/* Plausibility limits of slate__arch, checked by the builder (and by importers, which name the
 * source's key): a larger value is a corrupt header rather than a model. */
#define SLATE__MAX_VOCAB (1 << 22)
#define SLATE__MAX_DIM (1 << 16)
#define SLATE__MAX_LAYERS 1024
#define SLATE__MAX_HEADS 1024
#define SLATE__MAX_FFN (1 << 20)
#define SLATE__MAX_CTX (1 << 24) /* largest context a package declares (--context) */

/* The feed-forward's gate activation. */
enum {
    SLATE__FFN_SWIGLU, /* down(silu(gate) * up) */
    SLATE__FFN_GEGLU,  /* down(gelu_tanh(gate) * up), PyTorch's tanh approximation (Gemma) */
};

typedef struct slate__arch {
    char name[32];        /* "llama", "qwen2", "qwen3", "mistral", "phi3", "gemma", "gemma2",
                             "gemma3", "smollm3", "granite" */
    int32_t n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim;
    int32_t n_ctx;        /* the source's context length (may exceed SLATE__MAX_CTX: the
                             builder then needs an explicit n_ctx) */
    float norm_eps, rope_theta;
    int32_t rope_mode;    /* SLATE__ROPE_ADJACENT (llama2.c, GGUF llama) or _HALF (HF) */
    int32_t rope_dim;     /* rotated dims per head, even: head_dim, or fewer for partial
                             rotary (Phi-4-mini, GGUF rope.dimension_count) */
    int32_t rope_scaling; /* SLATE__ROPE_SCALING_* */
    float rope_factor, rope_low_freq, rope_high_freq;
    int32_t rope_orig_ctx;
    /* LongRoPE: divisors of each inverse frequency [rope_dim / 2], the short list for packages
     * whose context is at most rope_orig_ctx, the long one beyond (chosen once by the builder,
     * as llama.cpp does); rope_attn_factor multiplies cos and sin (1: none). */
    float rope_short[SLATE__MAX_ROPE_FACTORS], rope_long[SLATE__MAX_ROPE_FACTORS];
    int32_t n_rope_factors;
    float rope_attn_factor;
    bool qkv_bias, qk_norm, tied;
    int32_t sliding_window; /* 0: none */
    /* Gemma. All zero / false for the other architectures. */
    int32_t ffn_act;        /* SLATE__FFN_* */
    float embd_scale;       /* multiplies the embedding output (0: no scale op) */
    float attn_scale;       /* attention's score scale (0: 1 / sqrt(head_dim)) */
    bool norm_add_one;      /* the source stores every RMSNorm weight as w - 1 (HF Gemma computes
                               x * (1 + w)): the builder writes w + 1, computed in f32 */
    bool post_norms;        /* Gemma 2/3: blk.N.post_attention_norm / post_ffw_norm normalize the
                               attention and feed-forward outputs before the residual add */
    /* Per-layer attention (Gemma 3): with per_layer_sliding, only the layers l with
     * layer_sliding[l] use sliding_window, and their RoPE base is rope_local_theta (no scaling;
     * 0: rope_theta with the scaling, as the global layers); without it sliding_window applies
     * to every layer. */
    bool per_layer_sliding;
    bool layer_sliding[SLATE__MAX_LAYERS];
    float rope_local_theta;
    /* Gemma 2's soft-caps, cap * tanh(x / cap) (0: none): attn_softcap on the attention scores
     * (after the scale, before the mask), final_softcap on the logits. */
    float attn_softcap, final_softcap;
    /* NoPE layers (SmolLM3): layer l with layer_nope[l] rotates neither q nor k (no rope op;
     * attention sees the unrotated vectors, so only the causal mask orders positions). False
     * for every layer of the other architectures. */
    bool layer_nope[SLATE__MAX_LAYERS];
    /* Granite's multipliers (0: none; embd_scale and attn_scale above carry its embedding and
     * attention multipliers): residual_scale multiplies the attention and feed-forward outputs
     * before each residual add, the logits are divided by logit_scale. */
    float residual_scale, logit_scale;
} slate__arch;

typedef struct slate__import {
    slate__arch a;
    slate__src_tensor *tensors;
    int32_t n_tensors;
    slate_tokenizer *tok;
    char *chat_template;  /* may be NULL */
    /* Extra ids that end generation besides the tokenizer's EOS/EOT set (llama2.c models end a
     * story by producing BOS). */
    int32_t stop_ids[4];
    int32_t n_stop_ids;
    /* Importer-owned resources (mappings), released by cleanup. */
    void (*cleanup)(void *ctx);
    void *cleanup_ctx;
} slate__import;

void slate__import_free(slate__import *imp);
/* Appends a tensor (grows the array). */
slate_status slate__import_add(slate__import *imp, const slate__src_tensor *t, slate_error *err);
/* Appends the parts of a fused matrix t ([sum of rows][cols]) as n tensors: part i is the next
 * rows[i] rows, named names[i], borrowing t's data (whole rows, so quantized blocks are copied
 * byte for byte); each part records src_name (the source's name of t) and its first row there
 * (slate__src_tensor.src_name, part) for messages. The caller has checked t's shape against the
 * architecture (naming the source key); a mismatch here is E_FORMAT naming t. */
slate_status slate__import_add_split(slate__import *imp, const slate__src_tensor *t,
                                     const char *src_name, int32_t n, const char *const *names,
                                     const int64_t *rows, slate_error *err);
/* The source's names of the hyper-parameters a fused matrix's shape comes from, for messages. */
typedef struct slate__fused_keys {
    const char *heads, *kv_heads, *head_dim, *dim, *ffn;
} slate__fused_keys;
/* Splits a fused Phi-3 matrix t: q/k/v rows (qkv) or gate/up rows into blk.attn_q/k/v.weight or
 * blk.ffn_gate/up.weight (blk: "blk.N"), after checking t's shape against imp->a; a mismatch
 * is E_FORMAT naming path, src_name and the keys the expected rows come from. */
slate_status slate__import_add_fused(slate__import *imp, const slate__src_tensor *t, bool qkv,
                                     const char *blk, const char *path, const char *src_name,
                                     const slate__fused_keys *keys, slate_error *err);
size_t slate__src_nbytes(slate__src_type type, uint64_t n_elements, bool *ok);

slate_status slate__import_llama2c(const char *path, const char *tokenizer_path,
                                   slate__import *imp, slate_error *err);
/* Header and weights only (no tokenizer): the fuzz target's entry; data must outlive imp. */
slate_status slate__import_llama2c_mem(const uint8_t *data, size_t size, slate__import *imp,
                                       slate_error *err);
slate_status slate__import_gguf(const char *path, slate__import *imp, slate_error *err);
/* config.json alone (the fuzz target's entry): architecture and hyper-parameters. */
slate_status slate__hf_parse_config(const char *text, size_t len, slate__arch *a,
                                    slate_error *err);
slate_status slate__import_hf(const char *dir, slate__import *imp, slate_error *err);

/* Checks the import against its architecture and writes the package. */
slate_status slate__build_package(const slate__import *imp, const slate_convert_params *params,
                                  const char *out_path, slate_error *err);

/* Dequantizes / converts n source elements to f32. */
void slate__src_to_f32(slate__src_type type, const uint8_t *src, float *dst, int64_t n);

/* ---- compression (quantize.c) ---------------------------------------------------------------
 * Reference quantizers for the formats of kernels/quant.h; false when a scale does not fit f16.
 * n is a multiple of the block. */
bool slate__quantize_q8_0(const float *x, int64_t n, void *dst);
bool slate__quantize_q4(const float *x, int64_t n, int32_t block, bool asym, void *dst);
/* One Q8_C row: q[0..n) and its scale (max|x| / 127). */
void slate__quantize_q8_c_row(const float *x, int64_t n, int8_t *q, float *scale);

#define SLATE__QMAX_THREADS 256

/* A source matrix [rows][cols] to quantize into dtype (Q8_0, Q4 with block/asym, Q8_C). */
typedef struct slate__qspec {
    const slate__src_tensor *src;
    slate_dtype dtype;
    int32_t block;
    bool asym;
    int64_t rows, cols;
} slate__qspec;

/* Writes the whole tensor (slate__wmat_bytes of the layout) to dst, rows split over the pool's
 * threads (pool may be NULL: this thread). Returns OK, E_FORMAT (a non-finite element, named
 * with its row and column), E_UNSUPPORTED (an element too large for an f16 scale), E_NOMEM. */
slate_status slate__quantize_tensor(const slate__qspec *spec, void *dst, slate__pool *pool,
                                    slate_error *err);

/* ---- palettization (palettize.c) ------------------------------------------------------------
 * Scratch of one thread for groups of up to n values, up to bits bits and up to bins_max bins
 * in the exact start: the sorted values and their prefix sums, and the dynamic programme
 * (memory ~ 20 n + (2^bits * 4 + 24) bins_max bytes). Returns OK, E_INVALID_ARG (n < 1, bits
 * outside 1..8, bins_max outside 2..SLATE__PAL_BINS_MAX), E_NOMEM. */
#define SLATE__PAL_BINS_MAX 65536
typedef struct slate__pal_work slate__pal_work;
slate_status slate__pal_work_create(int64_t n, int32_t bits, int32_t bins_max,
                                    slate__pal_work **out, slate_error *err);
void slate__pal_work_free(slate__pal_work *w); /* NULL: nothing */
/* The bins of the exact start the converter uses at bits bits (the measurements behind the
 * choice are in palettize.c). */
int32_t slate__pal_bins(int32_t bits);
/* k-means of one group: x[0..n) (1 <= n <= the work's n, bits <= the work's bits) ->
 * lut[1 << bits] sorted f16 centroids and idx[0..n) the nearest centroid of each value; the
 * start is the exact optimum over n_bins bins of the sorted values (2 <= n_bins <= the work's
 * bins_max; every distinct value is a bin when there are at most n_bins: then the start is the
 * exact k-means optimum), refined by Lloyd. Tests pass fewer bins than slate__pal_bins to
 * exercise the binned case on small groups. False when a centroid does not fit f16.
 * Deterministic: a function of x, bits and n_bins. */
bool slate__palettize_group(const float *x, int64_t n, int32_t bits, int32_t n_bins,
                            uint16_t *lut, uint8_t *idx, slate__pal_work *w);
/* The fit behind slate__palettize_group, before f16 rounding: c[1 << bits] the sorted centroids
 * (in double); returns the squared error of x about them (each value to its cluster's centroid),
 * in double. Same arguments and limits as slate__palettize_group; allocates nothing. */
double slate__pal_fit(const float *x, int64_t n, int32_t bits, int32_t n_bins, double *c,
                      slate__pal_work *w);
/* Packs idx[0..n) (each < 2^bits) into one PAL row: LSB-first, ceil(n * bits / 8) bytes. */
void slate__pal_pack_row(const uint8_t *idx, int64_t n, int32_t bits, uint8_t *row);
/* The PAL tensor of spec (dtype PAL, block = slate__pal_layout(bits, group)) into dst
 * (slate__wmat_bytes), groups split over the pool's threads (pool may be NULL). Returns OK,
 * E_FORMAT (a non-finite element, named), E_UNSUPPORTED (a centroid overflows f16), E_NOMEM. */
slate_status slate__palettize_tensor(const slate__qspec *spec, void *dst, slate__pool *pool,
                                     slate_error *err);

#endif /* SLATE_CONVERT_H */
