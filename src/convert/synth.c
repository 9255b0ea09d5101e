/*
 * synth.c - slate_synth: writes a Hugging Face folder (config.json, safetensors weights,
 * tokenizer.json, tokenizer_config.json) with seeded random weights of a realistic shape, so the
 * benchmarks can measure a 1B-parameter model on a machine that cannot download one.
 *
 * Key ideas:
 *   - Shapes: each named shape copies one published config.json (SHAPES, with its source) and
 *     its family fixes the checkpoint's tensor layout, as transformers' modeling code names and
 *     shapes them: Llama / Mistral (q/k/v/o, gate/up/down, two norms), Qwen2 (+ q/k/v biases),
 *     Phi-3 (fused self_attn.qkv_proj = q | k | v rows and mlp.gate_up_proj = gate | up rows),
 *     Gemma 2 (four norms per layer: input, post-attention, pre- and post-feed-forward),
 *     Gemma 3 (Gemma 2's + q/k norms over head_dim), SmolLM3 (Llama's tensors; its config
 *     lists the NoPE layers) and Granite (Llama's tensors; its config gives granite-3.1-2b's
 *     embedding, attention, residual and logits multipliers). `like` gives a custom shape one of these
 *     architectures with other dims (tests make tiny ones); its config says "custom".
 *   - Streaming: each tensor is generated in chunks of CHUNK elements and written at once, so
 *     memory use is a few MiB whatever the model size. Each tensor has its own random stream,
 *     seeded from (seed, name), so the bytes do not depend on shard boundaries or order.
 *   - Values: "normal-ish" = the sum of four 16-bit uniforms, centred and scaled to std 1
 *     (Irwin-Hall, n = 4: within 1 % of a normal's quantiles up to 3 sigma, and bounded), times
 *     STD_WEIGHT = 0.02 (transformers' initializer_range). Norm weights are 1 + 0.02 * that
 *     (Gemma: 0.02 * that, the stored w of its x / rms(x) * (1 + w)). With norms ~1 every matmul
 *     output has std ~0.02 * sqrt(n_in) ~ 0.5..1.5, the residual stream grows like a random
 *     walk over the layers and the logits have std ~1: finite and not degenerate.
 *   - The tokenizer is byte-level BPE (GPT-2 byte-to-unicode map, ByteLevel pre-tokenizer) with
 *     exactly n_vocab tokens: the 256 byte symbols (ids 0..255 in GPT-2 order), then merges in
 *     breadth-first order over the alphabet {" ", a..z}: level 2 is every symbol + a letter
 *     (27 * 26 tokens: " a", "ab", ...), level 3 every level-2 token + a letter, and so on; each
 *     merge "prefix letter" makes a token no other merge makes. The last three ids are the
 *     special tokens. It depends only on n_vocab.
 *   - Atomic folder: everything goes into out_dir.tmp, and the folder is renamed at the end. A
 *     failure removes what was written. Each file goes through the library's atomic writer
 *     (a temp NAME.tmp.<pid>.<n> inside out_dir.tmp, which slate_remove_partial_outputs
 *     unlinks when a signal kills the program), is flushed and fsynced when complete, and is
 *     renamed to NAME only once every file is complete: a run interrupted by a signal while
 *     writing leaves at most an empty out_dir.tmp, which the next run removes. At most
 *     MAX_HELD files wait uncommitted (the writer tracks 16 in flight); with more shards the
 *     oldest files are committed early, and an interrupt leaves those in out_dir.tmp.
 * Formats: safetensors (huggingface/safetensors README, "Format": u64 header length, JSON header
 * padded with spaces, data), the sharded index (model.safetensors.index.json: weight_map), and
 * tokenizer.json as written by the `tokenizers` library (model.type "BPE").
 */
#define _POSIX_C_SOURCE 200809L
#include "core/core.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK ((size_t)1 << 20)            /* elements generated per write */
#define STD_WEIGHT 0.02f                   /* matrices, embeddings, biases */
#define STD_NORM 0.02f                     /* norm weights: 1 + this * noise */
#define N_SPECIAL 3
#define MIN_VOCAB (256 + N_SPECIAL)
#define MAX_VOCAB (1 << 22)                /* the tokenizer loader's limit */
#define DEFAULT_SHARD_BYTES ((size_t)1 << 32)
#define PATH_CAP 4096
#define MAX_HELD 12                        /* files written but not yet renamed into place */

static const char *const SPECIALS[N_SPECIAL] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

/* The families synth writes: each has its own tensor list and config keys. */
typedef enum family {
    FAM_LLAMA,
    FAM_QWEN2,
    FAM_MISTRAL,
    FAM_PHI3,
    FAM_GEMMA2,
    FAM_GEMMA3,
    FAM_SMOLLM3, /* Llama's tensors; config.json lists the NoPE layers */
    FAM_GRANITE, /* Llama's tensors; config.json gives the four multipliers */
} family;

typedef struct shape {
    const char *name, *arch, *model_type;
    const char *source; /* the Hugging Face repository whose config.json the shape copies */
    family fam;
    int32_t dim, n_layers, n_heads, n_kv_heads, ffn_dim, n_vocab, n_ctx;
    int32_t head_dim;   /* 0: dim / n_heads */
    bool head_dim_key;  /* the published config states head_dim (else written only when it is
                           not dim / n_heads) */
    double rope_theta, norm_eps;
    bool tied, qkv_bias;
    /* Llama 3.1 "llama3" rope scaling when factor > 0 */
    double rope_factor, rope_low, rope_high;
    int32_t rope_orig_ctx;
    int32_t window;         /* sliding window in positions (Mistral, Phi-3: every layer; Gemma 2:
                               even layers; Gemma 3: all but every window_pattern-th); 0: none */
    int32_t window_pattern; /* Gemma 3: layer i is global when (i + 1) % pattern == 0 */
    double rope_local_theta; /* Gemma 3: RoPE base of the sliding layers */
    double attn_cap, final_cap; /* Gemma 2's soft-caps */
    slate_dtype published;  /* the dtype of the published weights (documentation: the default
                               output dtype is BF16 for every shape) */
} shape;

/* From the published config.json files of each model (`source`). */
static const shape SHAPES[] = {
    {.name = "tinyllama-1.1b", .arch = "LlamaForCausalLM", .model_type = "llama",
     .source = "TinyLlama/TinyLlama-1.1B-Chat-v1.0", .fam = FAM_LLAMA, .dim = 2048,
     .n_layers = 22, .n_heads = 32, .n_kv_heads = 4, .ffn_dim = 5632, .n_vocab = 32000,
     .n_ctx = 2048, .head_dim_key = true, .rope_theta = 10000.0, .norm_eps = 1e-5,
     .published = SLATE_DTYPE_BF16},
    {.name = "smollm2-135m", .arch = "LlamaForCausalLM", .model_type = "llama",
     .source = "HuggingFaceTB/SmolLM2-135M", .fam = FAM_LLAMA, .dim = 576, .n_layers = 30,
     .n_heads = 9, .n_kv_heads = 3, .ffn_dim = 1536, .n_vocab = 49152, .n_ctx = 8192,
     .head_dim_key = true, .rope_theta = 100000.0, .norm_eps = 1e-5, .tied = true,
     .published = SLATE_DTYPE_BF16},
    {.name = "llama-3.2-1b", .arch = "LlamaForCausalLM", .model_type = "llama",
     .source = "meta-llama/Llama-3.2-1B", .fam = FAM_LLAMA, .dim = 2048, .n_layers = 16,
     .n_heads = 32, .n_kv_heads = 8, .ffn_dim = 8192, .n_vocab = 128256, .n_ctx = 131072,
     .head_dim_key = true, .rope_theta = 500000.0, .norm_eps = 1e-5, .tied = true,
     .rope_factor = 32.0, .rope_low = 1.0, .rope_high = 4.0, .rope_orig_ctx = 8192,
     .published = SLATE_DTYPE_BF16},
    {.name = "qwen2.5-0.5b", .arch = "Qwen2ForCausalLM", .model_type = "qwen2",
     .source = "Qwen/Qwen2.5-0.5B", .fam = FAM_QWEN2, .dim = 896, .n_layers = 24, .n_heads = 14,
     .n_kv_heads = 2, .ffn_dim = 4864, .n_vocab = 151936, .n_ctx = 32768, .head_dim_key = true,
     .rope_theta = 1000000.0, .norm_eps = 1e-6, .tied = true, .qkv_bias = true,
     .published = SLATE_DTYPE_BF16},
    /* Phi-3-mini-4k: fused self_attn.qkv_proj and mlp.gate_up_proj, no head_dim key (96),
     * original_max_position_embeddings = max_position_embeddings, no rope scaling. */
    {.name = "phi-3-mini-4k", .arch = "Phi3ForCausalLM", .model_type = "phi3",
     .source = "microsoft/Phi-3-mini-4k-instruct", .fam = FAM_PHI3, .dim = 3072,
     .n_layers = 32, .n_heads = 32, .n_kv_heads = 32, .ffn_dim = 8192, .n_vocab = 32064,
     .n_ctx = 4096, .rope_theta = 10000.0, .norm_eps = 1e-5, .window = 2047,
     .published = SLATE_DTYPE_BF16},
    /* Gemma-2-2B: head_dim 256 (not hidden / heads), query_pre_attn_scalar = head_dim, soft-caps
     * 50 / 30, window 4096 on the even layers, four norms per layer, tied; published in f32. */
    {.name = "gemma-2-2b", .arch = "Gemma2ForCausalLM", .model_type = "gemma2",
     .source = "google/gemma-2-2b", .fam = FAM_GEMMA2, .dim = 2304, .n_layers = 26,
     .n_heads = 8, .n_kv_heads = 4, .ffn_dim = 9216, .n_vocab = 256000, .n_ctx = 8192,
     .head_dim = 256, .head_dim_key = true, .rope_theta = 10000.0, .norm_eps = 1e-6,
     .tied = true, .window = 4096, .attn_cap = 50.0, .final_cap = 30.0,
     .published = SLATE_DTYPE_F32},
    /* Gemma-3-1B (text only): head_dim 256, query_pre_attn_scalar = head_dim, q/k norms, window
     * 512 on five layers of six (sliding_window_pattern 6), local RoPE base 1e4, global 1e6, no
     * soft-caps, tied. */
    {.name = "gemma-3-1b", .arch = "Gemma3ForCausalLM", .model_type = "gemma3_text",
     .source = "google/gemma-3-1b-pt", .fam = FAM_GEMMA3, .dim = 1152, .n_layers = 26,
     .n_heads = 4, .n_kv_heads = 1, .ffn_dim = 6912, .n_vocab = 262144, .n_ctx = 32768,
     .head_dim = 256, .head_dim_key = true, .rope_theta = 1000000.0, .norm_eps = 1e-6,
     .tied = true, .window = 512, .window_pattern = 6, .rope_local_theta = 10000.0,
     .published = SLATE_DTYPE_BF16},
    /* Mistral-7B v0.1: GQA 32/8, window 4096 on every layer, untied, no head_dim key. */
    {.name = "mistral-7b", .arch = "MistralForCausalLM", .model_type = "mistral",
     .source = "mistralai/Mistral-7B-v0.1", .fam = FAM_MISTRAL, .dim = 4096, .n_layers = 32,
     .n_heads = 32, .n_kv_heads = 8, .ffn_dim = 14336, .n_vocab = 32000, .n_ctx = 32768,
     .rope_theta = 10000.0, .norm_eps = 1e-5, .window = 4096, .published = SLATE_DTYPE_BF16},
    /* SmolLM3-3B: Llama's tensors, GQA 16/4, tied, theta 5e6, no head_dim key; every fourth
     * layer (3, 7, ..., 35) is NoPE (config.json's no_rope_layers, written for the shape's
     * layer count by no_rope_layer_interval 4). */
    {.name = "smollm3-3b", .arch = "SmolLM3ForCausalLM", .model_type = "smollm3",
     .source = "HuggingFaceTB/SmolLM3-3B", .fam = FAM_SMOLLM3, .dim = 2048, .n_layers = 36,
     .n_heads = 16, .n_kv_heads = 4, .ffn_dim = 11008, .n_vocab = 128256, .n_ctx = 65536,
     .rope_theta = 5000000.0, .norm_eps = 1e-6, .tied = true, .published = SLATE_DTYPE_BF16},
    /* granite-3.1-2b: Llama's tensors, GQA 32/8, tied, theta 5e6, no head_dim key; multipliers
     * embedding 12, attention 0.015625 (1 / head_dim), residual 0.22, logits_scaling 8. */
    {.name = "granite-3.1-2b", .arch = "GraniteForCausalLM", .model_type = "granite",
     .source = "ibm-granite/granite-3.1-2b-instruct", .fam = FAM_GRANITE, .dim = 2048,
     .n_layers = 40, .n_heads = 32, .n_kv_heads = 8, .ffn_dim = 8192, .n_vocab = 49155,
     .n_ctx = 131072, .rope_theta = 5000000.0, .norm_eps = 1e-5, .tied = true,
     .published = SLATE_DTYPE_BF16},
};
#define N_SHAPES ((int32_t)(sizeof SHAPES / sizeof SHAPES[0]))

slate_synth_params slate_synth_default_params(void) {
    slate_synth_params p;
    memset(&p, 0, sizeof p);
    p.dtype = SLATE_DTYPE_BF16;
    return p;
}

const char *slate_synth_shape_name(int32_t index) {
    return index >= 0 && index < N_SHAPES ? SHAPES[index].name : NULL;
}

/* The dims a caller may set and their limits (slate_synth_dim): make_plan checks them here, the
 * CLI's --dims reads the same table. Every named shape lies within them. */
#define DIM(f, k, lo, hi, req, why) {#f, k, offsetof(slate_synth_params, f), lo, hi, req, why}
static const slate_synth_dim DIMS[] = {
    DIM(dim, "hidden", 2, 1 << 16, true, NULL),
    DIM(n_layers, "layers", 1, 1024, true, NULL),
    DIM(n_heads, "heads", 1, 1024, true, NULL),
    DIM(n_kv_heads, "kv_heads", 1, 1024, false, NULL),
    DIM(ffn_dim, "ffn", 1, 1 << 20, true, NULL),
    DIM(n_vocab, "vocab", MIN_VOCAB, MAX_VOCAB, true, "256 byte tokens + 3 special tokens at least"),
    DIM(n_ctx, "ctx", 1, 1 << 24, false, NULL),
    DIM(head_dim, "head_dim", 2, 512, false, NULL),
    DIM(sliding_window, "window", 1, 1 << 24, false, NULL),
};
#undef DIM
#define N_DIMS ((int32_t)(sizeof DIMS / sizeof DIMS[0]))

const slate_synth_dim *slate_synth_dim_get(int32_t index) {
    return index >= 0 && index < N_DIMS ? &DIMS[index] : NULL;
}

static int32_t dim_value(const slate_synth_params *sp, const slate_synth_dim *d) {
    int32_t v;
    memcpy(&v, (const char *)sp + d->offset, sizeof v);
    return v;
}

/* ---- random numbers ------------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct rng {
    uint64_t s[2];
} rng;

static rng rng_for(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the tensor name */
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
    uint64_t s = seed ^ h;
    rng r = {{splitmix64(&s), splitmix64(&s)}};
    if (!r.s[0] && !r.s[1]) r.s[0] = 1;
    return r;
}

static inline uint64_t rng_next(rng *r) { /* xorshift128+ */
    uint64_t a = r->s[0];
    const uint64_t b = r->s[1];
    r->s[0] = b;
    a ^= a << 23;
    r->s[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
    return r->s[1] + b;
}

/* Sum of four 16-bit uniforms, centred, std 1 (the variance of one U(0,1) is 1/12). */
static inline float normalish(rng *r) {
    uint64_t x = rng_next(r);
    float sum = (float)(x & 0xffff) + (float)((x >> 16) & 0xffff) + (float)((x >> 32) & 0xffff) +
                (float)(x >> 48);
    return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f; /* sqrt(12 / 4) */
}

/* ---- the tensor list ----------------------------------------------------------------------- */

typedef enum tkind { T_MATRIX, T_NORM, T_BIAS } tkind;

typedef struct tdesc {
    char name[96];
    int32_t n_dims;
    int64_t dims[2];
    tkind kind;
    uint64_t nbytes;
    int32_t shard;
    uint64_t begin; /* offset in its shard's data area */
} tdesc;

typedef struct plan {
    shape s;
    const char *like; /* the named shape a custom one takes its architecture from, or NULL */
    int32_t head_dim;
    float norm_base;  /* norm weights are norm_base + STD_NORM * noise */
    slate_dtype dtype;
    size_t esize;
    tdesc *t;
    int32_t n_t;
    int32_t n_shards;
    uint64_t total_bytes;
} plan;

static void add_t(plan *p, const char *name, int64_t d0, int64_t d1, tkind kind) {
    tdesc *t = &p->t[p->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = d1 ? 2 : 1;
    t->dims[0] = d0;
    t->dims[1] = d1;
    t->kind = kind;
    t->nbytes = (uint64_t)d0 * (uint64_t)(d1 ? d1 : 1) * p->esize;
}

/* Finds a named shape; E_INVALID_ARG listing the known ones if there is none. `what` names the
 * parameter in the message ("shape", "like"). */
static slate_status find_shape(const char *name, const char *what, const shape **out,
                               slate_error *err) {
    for (int32_t i = 0; i < N_SHAPES; i++)
        if (strcmp(SHAPES[i].name, name) == 0) {
            *out = &SHAPES[i];
            return SLATE_OK;
        }
    char list[512] = "";
    for (int32_t j = 0; j < N_SHAPES; j++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "",
                 SHAPES[j].name);
    return slate__fail(err, SLATE_E_INVALID_ARG, "unknown %s '%.64s' (known: %s)", what, name,
                       list);
}

static slate_status make_plan(const slate_synth_params *sp, plan *p, slate_error *err) {
    memset(p, 0, sizeof *p);
    shape *s = &p->s;
    const shape *named = NULL;
    slate_status st;
    if (sp->shape && sp->like)
        return slate__fail(err, SLATE_E_INVALID_ARG, "shape '%.64s' and like '%.64s' both given: "
                           "like makes a custom shape of a named shape's architecture, shape "
                           "takes the named shape itself", sp->shape, sp->like);
    if (sp->shape) {
        if ((st = find_shape(sp->shape, "shape", &named, err))) return st;
        *s = *named;
    } else {
        for (int32_t i = 0; i < N_DIMS; i++)
            if (DIMS[i].required && dim_value(sp, &DIMS[i]) == 0)
                return slate__fail(err, SLATE_E_INVALID_ARG, "custom shape: %s is required (no "
                                   "named shape given)", DIMS[i].field);
        if (sp->like) {
            if ((st = find_shape(sp->like, "like", &named, err))) return st;
            *s = *named; /* the architecture; the dims are all replaced below */
            p->like = named->name;
        } else {
            *s = (shape){.name = "custom", .arch = "LlamaForCausalLM", .model_type = "llama",
                         .fam = FAM_LLAMA, .head_dim_key = true, .rope_theta = 10000.0,
                         .norm_eps = 1e-5, .published = SLATE_DTYPE_BF16};
        }
        s->name = "custom";
        s->source = NULL;
        s->published = SLATE_DTYPE_BF16;
        s->n_kv_heads = sp->n_heads;
        s->n_ctx = 2048;
        s->head_dim = 0;
    }
    /* A value given is checked as given: the shape's own values lie within the limits. */
    for (int32_t i = 0; i < N_DIMS; i++) {
        const slate_synth_dim *d = &DIMS[i];
        int32_t v = dim_value(sp, d);
        if (v != 0 && (v < d->lo || v > d->hi))
            return slate__fail(err, SLATE_E_INVALID_ARG, "%s is %d, expected %d..%d%s%s%s",
                               d->field, v, d->lo, d->hi, d->why ? " (" : "",
                               d->why ? d->why : "", d->why ? ")" : "");
    }
    if (sp->dim) s->dim = sp->dim;
    if (sp->n_layers) s->n_layers = sp->n_layers;
    if (sp->n_heads) s->n_heads = sp->n_heads;
    if (sp->n_kv_heads) s->n_kv_heads = sp->n_kv_heads;
    if (sp->ffn_dim) s->ffn_dim = sp->ffn_dim;
    if (sp->n_vocab) s->n_vocab = sp->n_vocab;
    if (sp->n_ctx) s->n_ctx = sp->n_ctx;
    /* A named shape's own head size stays only with its own dim and heads (Gemma's 256 is not
     * hidden / heads); other dims give dim / n_heads unless head_dim is given. */
    if (sp->dim || sp->n_heads) s->head_dim = 0;
    if (sp->head_dim) s->head_dim = sp->head_dim;
    if (sp->sliding_window) {
        if (!s->window)
            return slate__fail(err, SLATE_E_INVALID_ARG, "sliding_window %d: %s '%s' has no "
                               "sliding window (mistral-7b, phi-3-mini-4k, gemma-2-2b and "
                               "gemma-3-1b have one)", sp->sliding_window,
                               sp->like ? "like" : "shape", p->like ? p->like : s->name);
        s->window = sp->sliding_window;
    }
    /* A named shape given other dims is no longer that shape: its config says "custom", like
     * the named one (what the CLI's --like writes), so a folder never claims a shape it does not
     * have. The CLI refuses --shape with --dims; this is the API's way. */
    if (sp->shape && (s->dim != named->dim || s->n_layers != named->n_layers ||
                      s->n_heads != named->n_heads || s->n_kv_heads != named->n_kv_heads ||
                      s->ffn_dim != named->ffn_dim || s->n_vocab != named->n_vocab ||
                      s->n_ctx != named->n_ctx || s->head_dim != named->head_dim ||
                      s->window != named->window)) {
        p->like = named->name;
        s->name = "custom";
        s->source = NULL;
        s->published = SLATE_DTYPE_BF16;
    }
    if (s->head_dim) {
        if (s->head_dim % 2 != 0)
            return slate__fail(err, SLATE_E_INVALID_ARG, "head_dim %d must be even (RoPE "
                               "rotates pairs)", s->head_dim);
        p->head_dim = s->head_dim;
    } else {
        if (s->dim % s->n_heads != 0 || (s->dim / s->n_heads) % 2 != 0 ||
            s->dim / s->n_heads > 512)
            return slate__fail(err, SLATE_E_INVALID_ARG, "dim %d / n_heads %d must give an even "
                               "head_dim of at most 512", s->dim, s->n_heads);
        p->head_dim = s->dim / s->n_heads;
    }
    if (s->n_heads % s->n_kv_heads != 0)
        return slate__fail(err, SLATE_E_INVALID_ARG, "n_heads %d must be a multiple of "
                           "n_kv_heads %d", s->n_heads, s->n_kv_heads);
    if (sp->dtype != SLATE_DTYPE_F32 && sp->dtype != SLATE_DTYPE_F16 &&
        sp->dtype != SLATE_DTYPE_BF16)
        return slate__fail(err, SLATE_E_INVALID_ARG, "dtype %s (%d): expected f32, f16 or bf16",
                           slate_dtype_name(sp->dtype), (int)sp->dtype);
    p->dtype = sp->dtype;
    p->esize = sp->dtype == SLATE_DTYPE_F32 ? 4 : 2;
    bool gemma = s->fam == FAM_GEMMA2 || s->fam == FAM_GEMMA3;
    /* Gemma's norms compute x / rms(x) * (1 + w) and its checkpoints store w ~ 0. */
    p->norm_base = gemma ? 0.0f : 1.0f;
    int32_t n_max = 3 + 16 * s->n_layers;
    p->t = slate__calloc((size_t)n_max, sizeof *p->t);
    if (!p->t) return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d tensors", n_max);
    int64_t D = s->dim, Q = (int64_t)s->n_heads * p->head_dim, H = p->head_dim;
    int64_t KV = (int64_t)s->n_kv_heads * p->head_dim, F = s->ffn_dim;
    char name[96];
    /* The names, shapes ([out][in] for matrices) and layouts of the published checkpoints:
     * transformers' modeling_llama / _qwen2 / _mistral / _phi3 / _gemma2 / _gemma3 modules. */
    add_t(p, "model.embed_tokens.weight", s->n_vocab, D, T_MATRIX);
    for (int32_t l = 0; l < s->n_layers; l++) {
#define L(suffix, d0, d1, kind)                                                  \
    do {                                                                         \
        snprintf(name, sizeof name, "model.layers.%d.%s", (int)l, suffix);      \
        add_t(p, name, d0, d1, kind);                                            \
    } while (0)
        L("input_layernorm.weight", D, 0, T_NORM);
        if (s->fam == FAM_PHI3) {
            /* one matrix: q rows, then k, then v */
            L("self_attn.qkv_proj.weight", Q + 2 * KV, D, T_MATRIX);
        } else {
            L("self_attn.q_proj.weight", Q, D, T_MATRIX);
            L("self_attn.k_proj.weight", KV, D, T_MATRIX);
            L("self_attn.v_proj.weight", KV, D, T_MATRIX);
        }
        if (s->qkv_bias) {
            L("self_attn.q_proj.bias", Q, 0, T_BIAS);
            L("self_attn.k_proj.bias", KV, 0, T_BIAS);
            L("self_attn.v_proj.bias", KV, 0, T_BIAS);
        }
        if (s->fam == FAM_GEMMA3) {
            L("self_attn.q_norm.weight", H, 0, T_NORM);
            L("self_attn.k_norm.weight", H, 0, T_NORM);
        }
        L("self_attn.o_proj.weight", D, Q, T_MATRIX);
        /* Gemma 2/3: the attention output's norm; elsewhere the feed-forward's input norm */
        L("post_attention_layernorm.weight", D, 0, T_NORM);
        if (gemma) L("pre_feedforward_layernorm.weight", D, 0, T_NORM);
        if (s->fam == FAM_PHI3) {
            /* one matrix: gate rows, then up */
            L("mlp.gate_up_proj.weight", 2 * F, D, T_MATRIX);
        } else {
            L("mlp.gate_proj.weight", F, D, T_MATRIX);
            L("mlp.up_proj.weight", F, D, T_MATRIX);
        }
        L("mlp.down_proj.weight", D, F, T_MATRIX);
        if (gemma) L("post_feedforward_layernorm.weight", D, 0, T_NORM);
#undef L
    }
    add_t(p, "model.norm.weight", D, 0, T_NORM);
    if (!s->tied) add_t(p, "lm_head.weight", s->n_vocab, D, T_MATRIX);
    /* Shards: consecutive tensors while they fit; a tensor larger than the limit gets its own. */
    size_t limit = sp->shard_bytes ? sp->shard_bytes : DEFAULT_SHARD_BYTES;
    uint64_t in_shard = 0;
    for (int32_t i = 0; i < p->n_t; i++) {
        tdesc *t = &p->t[i];
        if (i > 0 && in_shard + t->nbytes > limit) {
            p->n_shards++;
            in_shard = 0;
        }
        t->shard = p->n_shards;
        t->begin = in_shard;
        in_shard += t->nbytes;
        p->total_bytes += t->nbytes;
    }
    p->n_shards++;
    return SLATE_OK;
}

slate_status slate_synth_describe(const slate_synth_params *params, slate_synth_info *info,
                                  slate_error *err) {
    if (!info) return slate__fail(err, SLATE_E_INVALID_ARG, "info must not be NULL");
    memset(info, 0, sizeof *info);
    slate_synth_params dp = slate_synth_default_params();
    if (!params) params = &dp;
    plan p;
    slate_status s = make_plan(params, &p, err);
    if (!s) {
        for (int32_t i = 0; i < p.n_t; i++)
            info->n_params += p.t[i].dims[0] * (p.t[i].n_dims == 2 ? p.t[i].dims[1] : 1);
        info->weights_bytes = p.total_bytes;
        info->n_tensors = p.n_t;
        info->n_shards = p.n_shards;
        info->head_dim = p.head_dim;
        info->source = p.s.source;
        info->published_dtype = p.s.published;
    }
    slate__free(p.t);
    return s;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* One file of the folder, written through the atomic writer (a tracked temp beside its name). */
typedef struct out {
    slate__atomic_file f;
    slate_status s; /* the first error of the file */
    slate_error *err;
} out;

/* The folder being written: files[0..n) are complete (synced) or being written, none renamed
 * into place yet. */
typedef struct folder {
    const char *dir;
    out files[MAX_HELD];
    int n;
    slate_error *err;
} folder;

static void out_write(out *o, const void *data, size_t len) {
    if (o->s || !len) return;
    slate__atomic_write(&o->f, data, len);
    if (o->f.failed)
        o->s = slate__fail(o->err, SLATE_E_IO, "writing '%s' failed: %s", o->f.final_path,
                           strerror(errno));
}

static void out_printf(out *o, const char *fmt, ...) SLATE__PRINTF(2, 3);
static void out_printf(out *o, const char *fmt, ...) {
    if (o->s) return;
    char small[1024], *buf = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        o->s = slate__fail(o->err, SLATE_E_INTERNAL, "formatting '%s' failed", o->f.final_path);
        return;
    }
    if ((size_t)n >= sizeof small) {
        if (!(buf = slate__malloc((size_t)n + 1))) {
            o->s = slate__fail(o->err, SLATE_E_NOMEM, "out of memory writing '%s'",
                               o->f.final_path);
            return;
        }
        va_start(ap, fmt);
        vsnprintf(buf, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    out_write(o, buf, (size_t)n);
    if (buf != small) slate__free(buf);
}

static bool path_join(char *buf, const char *dir, const char *name) {
    int n = snprintf(buf, PATH_CAP, "%s/%s", dir, name);
    return n > 0 && n < PATH_CAP;
}

/* Commits the oldest file (renames it into place): makes room for one more. */
static slate_status folder_commit_oldest(folder *fo) {
    slate_status s = slate__atomic_commit(&fo->files[0].f, fo->err);
    memmove(&fo->files[0], &fo->files[1], (size_t)(fo->n - 1) * sizeof fo->files[0]);
    fo->n--;
    return s;
}

/* Opens dir/name for writing; NULL (with the status in *s) on failure. */
static out *folder_open(folder *fo, const char *name, slate_status *s) {
    char path[PATH_CAP];
    if (!path_join(path, fo->dir, name)) {
        *s = slate__fail(fo->err, SLATE_E_INVALID_ARG, "path too long: '%s/%s'", fo->dir, name);
        return NULL;
    }
    if (fo->n == MAX_HELD && (*s = folder_commit_oldest(fo))) return NULL;
    out *o = &fo->files[fo->n];
    memset(o, 0, sizeof *o);
    o->err = fo->err;
    if ((*s = slate__atomic_open(path, &o->f, fo->err))) return NULL;
    fo->n++;
    return o;
}

/* The file is complete: flush and fsync it now, so that committing the folder at the end is
 * only renames (a signal then finds every file still a temp, or the folder done). Returns the
 * file's first error. */
static slate_status out_done(out *o) {
    FILE *fp = o->f.fp;
    if (!o->s && (fflush(fp) != 0 || fsync(fileno(fp)) != 0))
        o->s = slate__fail(o->err, SLATE_E_IO, "writing '%s' failed: %s", o->f.final_path,
                           strerror(errno));
    return o->s;
}

/* Renames every complete file into place, oldest first. */
static slate_status folder_commit(folder *fo) {
    slate_status s = SLATE_OK;
    while (fo->n > 0 && !s) s = folder_commit_oldest(fo);
    return s;
}

/* Removes the temps of the files not committed. */
static void folder_abort(folder *fo) {
    for (int i = 0; i < fo->n; i++) slate__atomic_abort(&fo->files[i].f);
    fo->n = 0;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A name synth writes: *.json, *.safetensors, or the atomic writer's temp of one
 * (NAME.tmp.<pid>.<n>, left by a run killed with SIGKILL). */
static bool synth_file_name(const char *name) {
    return ends_with(name, ".json") || ends_with(name, ".safetensors") ||
           strstr(name, ".json.tmp.") || strstr(name, ".safetensors.tmp.");
}

/* Removes a (stale or half-written) synth folder: the files synth writes, then the folder. A
 * symbolic link or a file at dir is refused, never followed. */
static slate_status remove_tmp_dir(const char *dir, slate_error *err) {
    struct stat st;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? SLATE_OK
                               : slate__fail(err, SLATE_E_IO, "cannot inspect '%s': %s", dir,
                                             strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return slate__fail(err, SLATE_E_IO, "'%s' exists and is not a folder (%s); synth "
                           "writes its temp folder there: remove it by hand", dir,
                           S_ISLNK(st.st_mode) ? "a symbolic link" : "a file");
    DIR *d = opendir(dir);
    if (!d) return slate__fail(err, SLATE_E_IO, "cannot open '%s': %s", dir, strerror(errno));
    struct dirent *e;
    char path[PATH_CAP];
    while ((e = readdir(d)) != NULL)
        if (synth_file_name(e->d_name) && path_join(path, dir, e->d_name)) unlink(path);
    closedir(d);
    if (rmdir(dir) != 0)
        return slate__fail(err, SLATE_E_IO, "cannot remove the stale folder '%s': %s (it holds "
                           "files synth did not write; remove it by hand)", dir, strerror(errno));
    return SLATE_OK;
}

/* ---- config.json ------------------------------------------------------------------------------ */

static slate_status write_config(folder *fo, const plan *p) {
    slate_status st;
    out *o = folder_open(fo, "config.json", &st);
    if (!o) return st;
    const shape *s = &p->s;
    bool gemma = s->fam == FAM_GEMMA2 || s->fam == FAM_GEMMA3;
    int32_t eot = s->n_vocab - N_SPECIAL;
    const char *torch_dtype = p->dtype == SLATE_DTYPE_F32   ? "float32"
                              : p->dtype == SLATE_DTYPE_F16 ? "float16"
                                                            : "bfloat16";
    out_printf(o, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", s->arch,
               s->model_type);
    out_printf(o, "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
               "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
               "  \"num_key_value_heads\": %d,\n", s->dim, s->ffn_dim, s->n_layers, s->n_heads,
               s->n_kv_heads);
    /* Phi-3's and Mistral v0.1's configs have no head_dim (hidden / heads): written there only
     * when the head size is another. */
    if (s->head_dim_key || p->head_dim != s->dim / s->n_heads || s->dim % s->n_heads != 0)
        out_printf(o, "  \"head_dim\": %d,\n", p->head_dim);
    out_printf(o, "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n", s->n_vocab,
               s->n_ctx);
    out_printf(o, "  \"rms_norm_eps\": %g,\n  \"rope_theta\": %.1f,\n", s->norm_eps,
               s->rope_theta);
    /* Gemma: GeGLU with the tanh GELU, named by hidden_activation; its configs leave
     * tie_word_embeddings out (GemmaConfig's default: true). */
    if (gemma)
        out_printf(o, "  \"hidden_act\": \"gelu_pytorch_tanh\",\n"
                   "  \"hidden_activation\": \"gelu_pytorch_tanh\",\n");
    else
        out_printf(o, "  \"hidden_act\": \"silu\",\n  \"tie_word_embeddings\": %s,\n",
                   s->tied ? "true" : "false");
    out_printf(o, "  \"torch_dtype\": \"%s\",\n"
               "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"initializer_range\": %g,\n",
               torch_dtype, eot, eot, (double)STD_WEIGHT);
    switch (s->fam) {
    case FAM_QWEN2:
        out_printf(o, "  \"sliding_window\": %d,\n  \"use_sliding_window\": false,\n", s->n_ctx);
        break;
    case FAM_MISTRAL:
        out_printf(o, "  \"sliding_window\": %d,\n", s->window);
        break;
    case FAM_PHI3:
        out_printf(o, "  \"sliding_window\": %d,\n  \"original_max_position_embeddings\": %d,\n"
                   "  \"rope_scaling\": null,\n  \"attention_bias\": false,\n"
                   "  \"attention_dropout\": 0.0,\n  \"embd_pdrop\": 0.0,\n"
                   "  \"resid_pdrop\": 0.0,\n", s->window, s->n_ctx);
        break;
    case FAM_GEMMA2:
    case FAM_GEMMA3:
        /* query_pre_attn_scalar is the head size in both published configs (256) */
        out_printf(o, "  \"query_pre_attn_scalar\": %d,\n  \"sliding_window\": %d,\n"
                   "  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n"
                   "  \"cache_implementation\": \"hybrid\",\n  \"pad_token_id\": %d,\n",
                   p->head_dim, s->window, eot);
        if (s->fam == FAM_GEMMA2)
            out_printf(o, "  \"attn_logit_softcapping\": %.1f,\n"
                       "  \"final_logit_softcapping\": %.1f,\n", s->attn_cap, s->final_cap);
        else
            out_printf(o, "  \"sliding_window_pattern\": %d,\n"
                       "  \"rope_local_base_freq\": %.1f,\n  \"rope_scaling\": null,\n"
                       "  \"attn_logit_softcapping\": null,\n"
                       "  \"final_logit_softcapping\": null,\n",
                       s->window_pattern, s->rope_local_theta);
        break;
    case FAM_SMOLLM3:
        /* SmolLM3-3B's keys: layer l has RoPE (1) unless (l + 1) % 4 == 0 (NoPE, 0); no
         * window and no biases */
        out_printf(o, "  \"no_rope_layer_interval\": 4,\n  \"no_rope_layers\": [");
        for (int32_t l = 0; l < s->n_layers; l++)
            out_printf(o, "%s%d", l ? ", " : "", (l + 1) % 4 != 0);
        out_printf(o, "],\n  \"use_sliding_window\": false,\n  \"sliding_window\": null,\n"
                   "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n"
                   "  \"rope_scaling\": null,\n");
        break;
    case FAM_GRANITE:
        /* granite-3.1-2b-instruct's keys (the published values whatever the dims) */
        out_printf(o, "  \"embedding_multiplier\": 12.0,\n  \"attention_multiplier\": 0.015625,\n"
                   "  \"residual_multiplier\": 0.22,\n  \"logits_scaling\": 8.0,\n"
                   "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n"
                   "  \"rope_scaling\": null,\n");
        break;
    case FAM_LLAMA:
        break;
    }
    if (s->rope_factor > 0)
        out_printf(o, "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.1f, "
                   "\"low_freq_factor\": %.1f, \"high_freq_factor\": %.1f, "
                   "\"original_max_position_embeddings\": %d},\n",
                   s->rope_factor, s->rope_low, s->rope_high, s->rope_orig_ctx);
    if (p->like)
        out_printf(o, "  \"slate_synth\": {\"shape\": \"custom\", \"like\": \"%s\", "
                   "\"note\": \"random weights\"}\n}\n", p->like);
    else
        out_printf(o, "  \"slate_synth\": {\"shape\": \"%s\", \"note\": \"random weights\"}\n}\n",
                   s->name);
    return out_done(o);
}

/* ---- tokenizer ------------------------------------------------------------------------------ */

/* GPT-2's bytes_to_unicode: id order of the 256 byte symbols and each byte's code point. */
static void byte_map(uint8_t byte_of_id[256], uint32_t cp_of_byte[256]) {
    bool printable[256] = {false};
    int n = 0;
    for (int b = 0; b < 256; b++)
        printable[b] = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    for (int b = 0; b < 256; b++)
        if (printable[b]) {
            byte_of_id[n++] = (uint8_t)b;
            cp_of_byte[b] = (uint32_t)b;
        }
    int extra = 0;
    for (int b = 0; b < 256; b++)
        if (!printable[b]) {
            byte_of_id[n++] = (uint8_t)b;
            cp_of_byte[b] = 256u + (uint32_t)extra++;
        }
}

/* One byte symbol as JSON string content (UTF-8 of its code point, escaped). */
static void put_symbol(out *o, const uint32_t cp_of_byte[256], uint8_t byte) {
    uint32_t cp = cp_of_byte[byte];
    char u[4];
    if (cp == '"' || cp == '\\') {
        u[0] = '\\';
        u[1] = (char)cp;
        out_write(o, u, 2);
    } else if (cp < 0x80) {
        u[0] = (char)cp;
        out_write(o, u, 1);
    } else {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        out_write(o, u, 2);
    }
}

/* Alphabet of the merged tokens: index 0 is the space, 1..26 the letters. */
static uint8_t alpha(uint32_t i) { return i == 0 ? (uint8_t)' ' : (uint8_t)('a' + i - 1); }

/* Bytes of merged token m (0-based): level L >= 2 holds 27 * 26^(L-1) tokens; token k of a level
 * is symbol k / 26^(L-1) followed by the base-26 digits of k % 26^(L-1). Returns the length. */
static int merged_text(uint64_t m, uint8_t *buf) {
    uint64_t per = 26, k = m;
    int level = 2;
    while (k >= 27 * per) {
        k -= 27 * per;
        per *= 26;
        level++;
    }
    buf[0] = alpha((uint32_t)(k / per));
    uint64_t rest = k % per;
    for (int i = level - 1; i >= 1; i--) {
        buf[i] = alpha(1 + (uint32_t)(rest % 26));
        rest /= 26;
    }
    return level;
}

static slate_status write_tokenizer(folder *fo, const plan *p) {
    slate_status s;
    out *o = folder_open(fo, "tokenizer.json", &s);
    if (!o) return s;
    uint8_t byte_of_id[256];
    uint32_t cp[256];
    byte_map(byte_of_id, cp);
    int32_t n_vocab = p->s.n_vocab, first_special = n_vocab - N_SPECIAL;
    out_printf(o, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n"
               "  \"added_tokens\": [\n");
    for (int i = 0; i < N_SPECIAL; i++)
        out_printf(o, "    {\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": "
                   "false, \"rstrip\": false, \"normalized\": false, \"special\": true}%s\n",
                   first_special + i, SPECIALS[i], i + 1 < N_SPECIAL ? "," : "");
    out_printf(o, "  ],\n  \"normalizer\": null,\n"
               "  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
               "\"trim_offsets\": true, \"use_regex\": true},\n"
               "  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
               "\"trim_offsets\": false, \"use_regex\": true},\n"
               "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
               "\"trim_offsets\": true, \"use_regex\": true},\n"
               "  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
               "\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", "
               "\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false,\n"
               "    \"vocab\": {");
    for (int id = 0; id < 256; id++) {
        out_printf(o, "%s\"", id ? ", " : "");
        put_symbol(o, cp, byte_of_id[id]);
        out_printf(o, "\": %d", id);
    }
    uint8_t text[16];
    for (int32_t m = 0; m < first_special - 256; m++) {
        int len = merged_text((uint64_t)m, text);
        out_printf(o, ",%s\"", m % 8 == 0 ? "\n      " : " ");
        for (int i = 0; i < len; i++) put_symbol(o, cp, text[i]);
        out_printf(o, "\": %d", 256 + m);
    }
    out_printf(o, "},\n    \"merges\": [");
    for (int32_t m = 0; m < first_special - 256; m++) {
        int len = merged_text((uint64_t)m, text);
        out_printf(o, "%s\"", m == 0 ? "\n      " : m % 8 == 0 ? ",\n      " : ", ");
        for (int i = 0; i < len - 1; i++) put_symbol(o, cp, text[i]);
        out_printf(o, " ");
        put_symbol(o, cp, text[len - 1]);
        out_printf(o, "\"");
    }
    out_printf(o, "]\n  }\n}\n");
    if ((s = out_done(o))) return s;

    if (!(o = folder_open(fo, "tokenizer_config.json", &s))) return s;
    out_printf(o, "{\n  \"add_bos_token\": false,\n  \"add_prefix_space\": false,\n"
               "  \"added_tokens_decoder\": {\n");
    for (int i = 0; i < N_SPECIAL; i++)
        out_printf(o, "    \"%d\": {\"content\": \"%s\", \"single_word\": false, \"lstrip\": "
                   "false, \"rstrip\": false, \"normalized\": false, \"special\": true}%s\n",
                   first_special + i, SPECIALS[i], i + 1 < N_SPECIAL ? "," : "");
    out_printf(o, "  },\n  \"bos_token\": null,\n  \"eos_token\": \"%s\",\n"
               "  \"pad_token\": \"%s\",\n  \"unk_token\": null,\n", SPECIALS[0], SPECIALS[0]);
    out_printf(o, "  \"chat_template\": \"{%% for message in messages %%}{{ '<|im_start|>' + "
               "message['role'] + '\\\\n' + message['content'] + '<|im_end|>' + '\\\\n' }}"
               "{%% endfor %%}{%% if add_generation_prompt %%}{{ '<|im_start|>assistant\\\\n' }}"
               "{%% endif %%}\",\n");
    out_printf(o, "  \"clean_up_tokenization_spaces\": false,\n  \"model_max_length\": %d,\n"
               "  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n", p->s.n_ctx);
    return out_done(o);
}

/* ---- weights -------------------------------------------------------------------------------- */

static void shard_name(char *buf, size_t cap, const plan *p, int32_t shard) {
    if (p->n_shards == 1)
        snprintf(buf, cap, "model.safetensors");
    else
        snprintf(buf, cap, "model-%05d-of-%05d.safetensors", (int)shard + 1, (int)p->n_shards);
}

typedef struct progress {
    bool on;
    uint64_t done, total;
    int last_pct;
} progress;

static slate_status write_tensor_data(out *o, const plan *p, const tdesc *t, uint64_t seed,
                                      float *f, uint8_t *bytes, progress *pr) {
    rng r = rng_for(seed, t->name);
    uint64_t n = t->nbytes / p->esize;
    for (uint64_t at = 0; at < n && !o->s; at += CHUNK) {
        size_t k = (size_t)(n - at < CHUNK ? n - at : CHUNK);
        for (size_t i = 0; i < k; i++) {
            float z = normalish(&r);
            f[i] = t->kind == T_NORM ? p->norm_base + STD_NORM * z : STD_WEIGHT * z;
        }
        if (p->dtype == SLATE_DTYPE_F32) {
            out_write(o, f, k * 4);
        } else {
            for (size_t i = 0; i < k; i++) {
                uint16_t h = p->dtype == SLATE_DTYPE_F16 ? slate__f32_to_f16(f[i])
                                                         : slate__f32_to_bf16(f[i]);
                bytes[2 * i] = (uint8_t)h;
                bytes[2 * i + 1] = (uint8_t)(h >> 8);
            }
            out_write(o, bytes, k * 2);
        }
        pr->done += k * p->esize;
        int pct = pr->total ? (int)(pr->done * 100 / pr->total) : 100;
        if (pr->on && pct / 5 != pr->last_pct / 5) {
            fprintf(stderr, "\rsynth: %3d%% of %.2f GB", pct, (double)pr->total / 1e9);
            pr->last_pct = pct;
        }
    }
    return o->s;
}

static slate_status write_shard(folder *fo, const plan *p, int32_t shard, uint64_t seed,
                                float *f, uint8_t *bytes, progress *pr) {
    char name[64];
    shard_name(name, sizeof name, p, shard);
    const char *dt = p->dtype == SLATE_DTYPE_F32 ? "F32" : p->dtype == SLATE_DTYPE_F16 ? "F16"
                                                                                       : "BF16";
    slate__buf h = {0};
    char line[256];
    const char *open = "{\"__metadata__\":{\"format\":\"pt\"}";
    slate__buf_append(&h, open, strlen(open));
    for (int32_t i = 0; i < p->n_t; i++) {
        const tdesc *t = &p->t[i];
        if (t->shard != shard) continue;
        int n = t->n_dims == 2
                    ? snprintf(line, sizeof line, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],"
                               "\"data_offsets\":[%llu,%llu]}", t->name, dt,
                               (long long)t->dims[0], (long long)t->dims[1],
                               (unsigned long long)t->begin,
                               (unsigned long long)(t->begin + t->nbytes))
                    : snprintf(line, sizeof line, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],"
                               "\"data_offsets\":[%llu,%llu]}", t->name, dt,
                               (long long)t->dims[0], (unsigned long long)t->begin,
                               (unsigned long long)(t->begin + t->nbytes));
        slate__buf_append(&h, line, (size_t)n);
    }
    slate__buf_append(&h, "}", 1);
    while (!h.failed && h.len % 8) slate__buf_append(&h, " ", 1); /* data area 8-aligned */
    if (h.failed) {
        slate__buf_free(&h);
        return slate__fail(fo->err, SLATE_E_NOMEM, "out of memory for the safetensors header");
    }
    slate_status s;
    out *o = folder_open(fo, name, &s);
    if (!o) {
        slate__buf_free(&h);
        return s;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    out_write(o, len8, 8);
    out_write(o, h.data, h.len);
    slate__buf_free(&h);
    for (int32_t i = 0; i < p->n_t && !o->s; i++)
        if (p->t[i].shard == shard) write_tensor_data(o, p, &p->t[i], seed, f, bytes, pr);
    return out_done(o);
}

static slate_status write_index(folder *fo, const plan *p) {
    char name[64];
    slate_status s;
    out *o = folder_open(fo, "model.safetensors.index.json", &s);
    if (!o) return s;
    out_printf(o, "{\n  \"metadata\": {\"total_size\": %llu},\n  \"weight_map\": {\n",
               (unsigned long long)p->total_bytes);
    for (int32_t i = 0; i < p->n_t; i++) {
        shard_name(name, sizeof name, p, p->t[i].shard);
        out_printf(o, "    \"%s\": \"%s\"%s\n", p->t[i].name, name, i + 1 < p->n_t ? "," : "");
    }
    out_printf(o, "  }\n}\n");
    return out_done(o);
}

static slate_status write_weights(folder *fo, const plan *p, const slate_synth_params *sp) {
    float *f = slate__malloc(CHUNK * sizeof *f);
    uint8_t *bytes = slate__malloc(CHUNK * 2);
    slate_status s = SLATE_OK;
    if (!f || !bytes)
        s = slate__fail(fo->err, SLATE_E_NOMEM, "out of memory for the write buffers");
    progress pr = {sp->progress, 0, p->total_bytes, 0};
    for (int32_t i = 0; i < p->n_shards && !s; i++)
        s = write_shard(fo, p, i, sp->seed, f, bytes, &pr);
    if (!s && p->n_shards > 1) s = write_index(fo, p);
    if (pr.on) fprintf(stderr, "\n");
    slate__free(f);
    slate__free(bytes);
    return s;
}

slate_status slate_synth(const char *out_dir, const slate_synth_params *params,
                         slate_error *err) {
    if (!out_dir || !out_dir[0])
        return slate__fail(err, SLATE_E_INVALID_ARG, "out_dir must not be NULL or empty");
    slate_synth_params dp = slate_synth_default_params();
    if (!params) params = &dp;
    size_t n = strlen(out_dir);
    while (n > 1 && out_dir[n - 1] == '/') n--; /* "dir/" and "dir" name the same folder */
    if (n + 16 >= PATH_CAP)
        return slate__fail(err, SLATE_E_INVALID_ARG, "out_dir is %zu bytes long, at most %d", n,
                           PATH_CAP - 17);
    char dir[PATH_CAP], tmp[PATH_CAP];
    memcpy(dir, out_dir, n);
    dir[n] = '\0';
    memcpy(tmp, dir, n);
    memcpy(tmp + n, ".tmp", 5);
    /* The parameters first: a bad shape is the caller's mistake whatever is at out_dir. */
    plan p;
    slate_status s = make_plan(params, &p, err);
    if (s) {
        slate__free(p.t);
        return s;
    }
    /* lstat: anything at out_dir, a dangling symbolic link included, would make the final
     * rename fail after every weight was written. */
    struct stat stt;
    if (lstat(dir, &stt) == 0) {
        s = S_ISLNK(stt.st_mode) && stat(dir, &stt) != 0
                ? slate__fail(err, SLATE_E_INVALID_ARG, "'%s' already exists (a symbolic link "
                              "to a missing target); synth writes a new folder (remove it "
                              "first)", dir)
                : slate__fail(err, SLATE_E_INVALID_ARG, "'%s' already exists; synth writes a "
                              "new folder (remove it first)", dir);
        goto done;
    }
    if ((s = remove_tmp_dir(tmp, err))) goto done;
    if (mkdir(tmp, 0755) != 0) {
        s = slate__fail(err, SLATE_E_IO, "cannot create '%s': %s", tmp, strerror(errno));
        goto done;
    }
    folder fo = {.dir = tmp, .err = err};
    if (!(s = write_config(&fo, &p)) && !(s = write_tokenizer(&fo, &p)) &&
        !(s = write_weights(&fo, &p, params)) && !(s = folder_commit(&fo)) &&
        rename(tmp, dir) != 0)
        s = slate__fail(err, SLATE_E_IO, "cannot rename '%s' to '%s': %s", tmp, dir,
                        strerror(errno));
    if (s) {
        folder_abort(&fo);
        slate_error ignored;
        remove_tmp_dir(tmp, &ignored);
    }
done:
    slate__free(p.t);
    return s;
}
