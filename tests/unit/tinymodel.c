/* tinymodel.c - see tinymodel.h. Builds an import by hand (canonical tensor names, random
 * weights) and runs the real package builder on it. */
#include "tinymodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "convert/ggml_quants.h"
#include "exec/program.h"
#include "tok/tok.h"

tm_opts tm_default(void) {
    tm_opts o;
    memset(&o, 0, sizeof o);
    o.n_layers = 2;
    o.dim = 32;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.ffn_dim = 48;
    o.n_ctx = 64;
    o.max_query = 16;
    o.tied = true;
    o.dtype = SLATE_DTYPE_F32;
    o.seed = 1234;
    return o;
}

static uint64_t rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

typedef struct blob {
    float *data;
    size_t used, cap;
    uint64_t seed;
    int32_t src_type;
} blob;

/* Byte offsets of the f16 scales / minimums of a ggml block (the others are codes), and the
 * largest |code * sub-block scale| factor, so that f16 fields of scale / mult keep values near
 * scale (ggml_quants.h). */
static int ggml_fields(slate__src_type t, int at[2], float *mult) {
    switch (t) {
    case SLATE__SRC_Q8_0: at[0] = 0, *mult = 127; return 1;
    case SLATE__SRC_Q4_0: at[0] = 0, *mult = 8; return 1;
    case SLATE__SRC_Q4_1: at[0] = 0, at[1] = 2, *mult = 15; return 2;
    case SLATE__SRC_Q5_0: at[0] = 0, *mult = 16; return 1;
    case SLATE__SRC_Q5_1: at[0] = 0, at[1] = 2, *mult = 31; return 2;
    case SLATE__SRC_IQ4_NL: at[0] = 0, *mult = 127; return 1;
    case SLATE__SRC_Q2_K: at[0] = 80, at[1] = 82, *mult = 45; return 2;
    case SLATE__SRC_Q3_K: at[0] = 108, *mult = 128; return 1;
    case SLATE__SRC_Q4_K: at[0] = 0, at[1] = 2, *mult = 945; return 2;
    case SLATE__SRC_Q5_K: at[0] = 0, at[1] = 2, *mult = 1953; return 2;
    case SLATE__SRC_Q6_K: at[0] = 208, *mult = 4096; return 1;
    case SLATE__SRC_IQ4_XS: at[0] = 0, *mult = 4064; return 1;
    default: return 0;
    }
}

static void add(slate__import *imp, blob *b, const char *name, int64_t d0, int64_t d1, float base,
                float scale) {
    slate__src_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.type = SLATE__SRC_F32;
    t.n_dims = d1 ? 2 : 1;
    t.dims[0] = d0;
    t.dims[1] = d1;
    size_t n = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    float *p = b->data + b->used;
    int32_t elems = 0, bytes = 0;
    slate__ggml_block((slate__src_type)b->src_type, &elems, &bytes);
    if (d1 && elems && d1 % elems == 0) { /* random blocks of the source type */
        uint8_t *q = (uint8_t *)p;
        size_t nb = n / (size_t)elems;
        int at[2];
        float mult = 1;
        int nf = ggml_fields((slate__src_type)b->src_type, at, &mult);
        for (size_t i = 0; i < nb * (size_t)bytes; i++) q[i] = (uint8_t)(rnd(&b->seed) >> 32);
        for (size_t k = 0; k < nb; k++)
            for (int f = 0; f < nf; f++) {
                uint16_t h = slate__f32_to_f16(scale / mult *
                                               (0.5f + (float)(rnd(&b->seed) >> 40) / (float)(1 << 25)));
                q[k * (size_t)bytes + (size_t)at[f]] = (uint8_t)h;
                q[k * (size_t)bytes + (size_t)at[f] + 1] = (uint8_t)(h >> 8);
            }
        t.type = (slate__src_type)b->src_type;
        t.data = q;
        t.nbytes = nb * (size_t)bytes;
        b->used += (nb * (size_t)bytes + 3) / 4;
        slate__import_add(imp, &t, NULL);
        return;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = base + scale * ((float)(rnd(&b->seed) >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
    b->used += n;
    t.data = (const uint8_t *)p;
    t.nbytes = n * 4;
    slate__import_add(imp, &t, NULL);
}

slate_convert_params tm_params(const tm_opts *o, slate_convert_keep rules[2]) {
    slate_convert_params cp = slate_convert_default_params();
    cp.dtype = o->dtype;
    cp.block_size = o->block_size;
    cp.asym = o->asym;
    if (o->quantize_all) rules[cp.n_keep++] = (slate_convert_keep){o->dtype, "*.weight"};
    if (o->keep_f16) rules[cp.n_keep++] = (slate_convert_keep){SLATE_DTYPE_F16, o->keep_f16};
    cp.keep = rules;
    cp.n_ctx = o->n_ctx;
    cp.max_query = o->max_query;
    return cp;
}

void tm_import_free(slate__import *imp) { slate__import_free(imp); }

slate_status tm_import(const tm_opts *o, slate__import *imp_out, slate_error *err) {
    slate__import imp;
    memset(&imp, 0, sizeof imp);
    slate__arch *a = &imp.a;
    snprintf(a->name, sizeof a->name, "llama");
    a->n_vocab = TM_VOCAB;
    a->dim = o->dim;
    a->n_layers = o->n_layers;
    a->n_heads = o->n_heads;
    a->n_kv_heads = o->n_kv_heads;
    a->head_dim = o->dim / o->n_heads;
    a->ffn_dim = o->ffn_dim;
    a->n_ctx = o->n_ctx;
    a->norm_eps = 1e-5f;
    a->rope_theta = 10000.0f;
    a->rope_mode = o->half_rope ? 1 : 0;
    a->rope_dim = a->head_dim;
    a->qkv_bias = o->qkv_bias;
    a->qk_norm = o->qk_norm;
    a->tied = o->tied;
    a->sliding_window = o->window;
    if (o->window > 0 && o->window_layers) {
        a->per_layer_sliding = true; /* rope_local_theta stays 0: one RoPE base for all layers */
        for (int l = 0; l < o->n_layers && l < 32; l++) a->layer_sliding[l] = o->window_layers >> l & 1u;
    }
    int64_t hd = a->head_dim, qw = (int64_t)o->n_heads * hd, kw = (int64_t)o->n_kv_heads * hd;
    blob b = {0};
    b.cap = (size_t)TM_VOCAB * o->dim * 2 +
            (size_t)o->n_layers * (size_t)(4 * o->dim * o->dim + 3 * o->dim * o->ffn_dim +
                                           8 * o->dim + 4 * hd + 3 * qw) + o->dim + 64;
    b.data = calloc(b.cap, sizeof(float));
    b.seed = o->seed ? o->seed : 1;
    b.src_type = o->src_type;
    imp.cleanup = free; /* the tensors' data */
    imp.cleanup_ctx = b.data;
    char n[96];
    add(&imp, &b, "token_embd.weight", TM_VOCAB, o->dim, 0, 1.0f);
    for (int l = 0; l < o->n_layers; l++) {
        float s = 1.0f / sqrtf((float)o->dim);
#define T(fmt, d0, d1, base, sc) (snprintf(n, sizeof n, fmt, l), add(&imp, &b, n, d0, d1, base, sc))
        T("blk.%d.attn_norm.weight", o->dim, 0, 1.0f, 0.1f);
        T("blk.%d.attn_q.weight", qw, o->dim, 0, s);
        T("blk.%d.attn_k.weight", kw, o->dim, 0, s);
        T("blk.%d.attn_v.weight", kw, o->dim, 0, s);
        if (o->qkv_bias) {
            T("blk.%d.attn_q.bias", qw, 0, 0, 0.1f);
            T("blk.%d.attn_k.bias", kw, 0, 0, 0.1f);
            T("blk.%d.attn_v.bias", kw, 0, 0, 0.1f);
        }
        if (o->qk_norm) {
            T("blk.%d.attn_q_norm.weight", hd, 0, 1.0f, 0.1f);
            T("blk.%d.attn_k_norm.weight", hd, 0, 1.0f, 0.1f);
        }
        T("blk.%d.attn_output.weight", o->dim, qw, 0, s);
        T("blk.%d.ffn_norm.weight", o->dim, 0, 1.0f, 0.1f);
        T("blk.%d.ffn_gate.weight", o->ffn_dim, o->dim, 0, s);
        T("blk.%d.ffn_up.weight", o->ffn_dim, o->dim, 0, s);
        T("blk.%d.ffn_down.weight", o->dim, o->ffn_dim, 0, 1.0f / sqrtf((float)o->ffn_dim));
#undef T
    }
    add(&imp, &b, "output_norm.weight", o->dim, 0, 1.0f, 0.1f);
    if (!o->tied) add(&imp, &b, "output.weight", TM_VOCAB, o->dim, 0, 0.2f);

    /* Tokenizer: SPM with byte fallback over the 256 byte tokens. */
    char *texts[TM_VOCAB];
    float scores[TM_VOCAB];
    uint8_t types[TM_VOCAB];
    const char *fixed[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < TM_VOCAB; i++) {
        texts[i] = malloc(8);
        if (i < 3) snprintf(texts[i], 8, "%s", fixed[i]);
        else snprintf(texts[i], 8, "<0x%02X>", i - 3);
        scores[i] = 0;
        types[i] = i == 0 ? SLATE__TOKT_UNKNOWN : i < 3 ? SLATE__TOKT_CONTROL : SLATE__TOKT_BYTE;
    }
    slate__tok_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.kind = SLATE__TOK_SPM;
    spec.n_tokens = TM_VOCAB;
    spec.tokens = (const char *const *)texts;
    spec.scores = scores;
    spec.types = types;
    spec.bos_id = 1;
    spec.eos_id = 2;
    spec.unk_id = 0;
    spec.pad_id = -1;
    spec.eot_id = -1;
    spec.add_bos = true;
    spec.byte_fallback = true;
    slate_status s = slate__tok_create(&spec, &imp.tok, err);
    for (int i = 0; i < TM_VOCAB; i++) free(texts[i]);
    if (s != SLATE_OK) {
        slate__import_free(&imp);
        return s;
    }
    *imp_out = imp;
    return SLATE_OK;
}

slate_status tm_write(const char *path, const tm_opts *o, slate_error *err) {
    slate__import imp;
    slate_status s = tm_import(o, &imp, err);
    if (s != SLATE_OK) return s;
    slate_convert_keep rules[2];
    slate_convert_params cp = tm_params(o, rules);
    s = slate__build_package(&imp, &cp, path, err);
    slate__import_free(&imp);
    return s;
}
