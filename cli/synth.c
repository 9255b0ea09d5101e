/*
 * synth.c - `slate synth --shape NAME|--dims K=V,... -o DIR [--seed S] [--dtype f32|f16|bf16]`:
 * writes a Hugging Face folder with seeded random weights of a realistic shape (see
 * slate_synth in slate.h). --dims describes a custom Llama; it cannot be combined with --shape
 * (the folder would be labelled with a named shape it does not have). The dims are checked here
 * against slate_synth's limits, so a bad one is a usage error (exit 2) named before -o is
 * looked at.
 */
#include "cli.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The --dims keys, their fields and the limits slate_synth enforces (src/convert/synth.c,
 * make_plan), checked here too so that a bad value is a usage error (exit 2), named before
 * anything else happens. */
static const struct dim_key {
    const char *key;
    size_t off;
    long long lo, hi;
    bool required;
} KEYS[] = {
    {"hidden", offsetof(slate_synth_params, dim), 2, 1 << 16, true},
    {"layers", offsetof(slate_synth_params, n_layers), 1, 1024, true},
    {"heads", offsetof(slate_synth_params, n_heads), 1, 1024, true},
    {"kv_heads", offsetof(slate_synth_params, n_kv_heads), 1, 1024, false},
    {"ffn", offsetof(slate_synth_params, ffn_dim), 1, 1 << 20, true},
    {"vocab", offsetof(slate_synth_params, n_vocab), 259, 1 << 22, true},
    {"ctx", offsetof(slate_synth_params, n_ctx), 1, 1 << 24, false},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

/* "hidden=64,layers=2,..." into p: every item KEY=VALUE (no empty one), each key at most once,
 * each value within its limit, the required keys present and the heads consistent with the
 * hidden size. false (with a message) otherwise. */
static bool parse_dims(const char *s, slate_synth_params *p) {
    char buf[512];
    if (strlen(s) >= sizeof buf) {
        fprintf(stderr, "slate synth: --dims is too long (%zu bytes, at most %zu)\n", strlen(s),
                sizeof buf - 1);
        return false;
    }
    strcpy(buf, s);
    bool seen[N_KEYS] = {false};
    int item = 0;
    for (char *tok = buf, *next; tok; tok = next) {
        item++;
        next = strchr(tok, ',');
        if (next) *next++ = '\0';
        if (!*tok) {
            fprintf(stderr, "slate synth: --dims item %d is empty in '%s' (KEY=VALUE,... without "
                            "empty items or a trailing comma)\n", item, s);
            return false;
        }
        char *eq = strchr(tok, '=');
        if (!eq) {
            fprintf(stderr, "slate synth: --dims item '%s' is not KEY=VALUE\n", tok);
            return false;
        }
        *eq = '\0';
        size_t k = 0;
        while (k < N_KEYS && strcmp(KEYS[k].key, tok) != 0) k++;
        if (k == N_KEYS) {
            fprintf(stderr, "slate synth: unknown --dims key '%s' (known: hidden, layers, heads, "
                            "kv_heads, ffn, vocab, ctx)\n", tok);
            return false;
        }
        if (seen[k]) {
            fprintf(stderr, "slate synth: --dims gives %s twice (%d, then %s)\n", tok,
                    *(int32_t *)((char *)p + KEYS[k].off), eq + 1);
            return false;
        }
        long long v;
        if (!(eq[1] >= '0' && eq[1] <= '9') || !cli_parse_int(eq + 1, KEYS[k].lo, KEYS[k].hi, &v)) {
            fprintf(stderr, "slate synth: --dims %s must be an integer in %lld..%lld%s, not '%s'\n",
                    tok, KEYS[k].lo, KEYS[k].hi,
                    strcmp(tok, "vocab") == 0 ? " (256 byte tokens + 3 special tokens at least)" : "", eq + 1);
            return false;
        }
        seen[k] = true;
        *(int32_t *)((char *)p + KEYS[k].off) = (int32_t)v;
    }
    for (size_t k = 0; k < N_KEYS; k++)
        if (KEYS[k].required && !seen[k]) {
            fprintf(stderr, "slate synth: --dims needs %s (hidden, layers, heads, ffn and vocab "
                            "are required; kv_heads defaults to heads, ctx to 2048)\n",
                    KEYS[k].key);
            return false;
        }
    int32_t kv = p->n_kv_heads ? p->n_kv_heads : p->n_heads;
    if (p->dim % p->n_heads != 0 || (p->dim / p->n_heads) % 2 != 0 || p->dim / p->n_heads > 512) {
        fprintf(stderr, "slate synth: --dims hidden %d / heads %d must give an even head size of "
                        "at most 512\n", p->dim, p->n_heads);
        return false;
    }
    if (p->n_heads % kv != 0) {
        fprintf(stderr, "slate synth: --dims heads %d must be a multiple of kv_heads %d\n",
                p->n_heads, kv);
        return false;
    }
    return true;
}

int slate_cli_synth(int argc, char **argv) {
    slate_synth_params p = slate_synth_default_params();
    const char *out = NULL;
    const char *dims = NULL;
    p.progress = isatty(2);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (strcmp(a, "-o") == 0 && v) {
            out = v;
            i++;
        } else if (strcmp(a, "--shape") == 0 && v) {
            p.shape = v;
            i++;
        } else if (strcmp(a, "--dims") == 0 && v) {
            if (dims) {
                fprintf(stderr, "slate synth: --dims given twice ('%s', then '%s'): give one\n",
                        dims, v);
                return 2;
            }
            dims = v;
            i++;
        } else if (strcmp(a, "--seed") == 0 && v) {
            if (!cli_parse_int(v, 0, INT64_MAX, &n)) {
                fprintf(stderr, "slate synth: --seed must be a non-negative integer\n");
                return 2;
            }
            p.seed = (uint64_t)n;
            i++;
        } else if (strcmp(a, "--dtype") == 0 && v) {
            if (strcmp(v, "f32") == 0 || strcmp(v, "fp32") == 0) p.dtype = SLATE_DTYPE_F32;
            else if (strcmp(v, "f16") == 0 || strcmp(v, "fp16") == 0) p.dtype = SLATE_DTYPE_F16;
            else if (strcmp(v, "bf16") == 0) p.dtype = SLATE_DTYPE_BF16;
            else {
                fprintf(stderr, "slate synth: --dtype must be f32, f16 or bf16, not '%s'\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--shard-mib") == 0 && v) {
            if (!cli_parse_int(v, 1, 1 << 20, &n)) {
                fprintf(stderr, "slate synth: --shard-mib must be an integer in 1..%d\n", 1 << 20);
                return 2;
            }
            p.shard_bytes = (size_t)n << 20;
            i++;
        } else if (strcmp(a, "--progress") == 0) {
            p.progress = true;
        } else {
            return cli_bad_option("synth", a);
        }
    }
    if (!out || (!p.shape && !dims)) return cli_usage("synth");
    /* The folder's config names the shape it was made from: a named shape with other dims would
     * carry a name it does not have. */
    if (p.shape && dims) {
        fprintf(stderr, "slate synth: --shape and --dims both given: give one (--dims describes a "
                        "whole custom shape; a named shape's dims cannot be changed)\n");
        return 2;
    }
    if (dims && !parse_dims(dims, &p)) return 2;
    slate_error err;
    slate_status s = slate_synth(out, &p, &err);
    if (s) return cli_error("synth", s, &err);
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
