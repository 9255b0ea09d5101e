/*
 * synth.c - `slate synth --shape NAME|--dims K=V,... [--like NAME] -o DIR [--seed S]
 * [--dtype f32|f16|bf16]`: writes a Hugging Face folder with seeded random weights of a
 * realistic shape (see slate_synth in slate.h). --dims describes a custom shape: a Llama, or
 * with --like the architecture of a named shape (a tiny Gemma 2, say). It cannot be combined
 * with --shape (the folder would be labelled with a named shape it does not have). The dims
 * are checked here against slate_synth's limits, so a bad one is a usage error (exit 2) named
 * before -o is looked at. --dry-run prints what would be written (parameters, tensors, bytes:
 * slate_synth_describe) and writes nothing.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The --dims keys, their fields and limits: slate_synth's own table (slate_synth_dim_get),
 * checked here so that a bad value is a usage error (exit 2), named before anything else
 * happens. */
static int32_t *dim_field(slate_synth_params *p, const slate_synth_dim *d) {
    return (int32_t *)(void *)((char *)p + d->offset);
}

/* "hidden=64,layers=2,..." into p: every item KEY=VALUE (no empty one), each key at most once,
 * each value within its limit, the required keys present and the heads consistent with the
 * hidden size. false (with a message) otherwise. */
static bool parse_dims(const char *s, slate_synth_params *p) {
    char buf[512], known[256] = "";
    if (strlen(s) >= sizeof buf) {
        fprintf(stderr, "slate synth: --dims is too long (%zu bytes, at most %zu)\n", strlen(s),
                sizeof buf - 1);
        return false;
    }
    strcpy(buf, s);
    const slate_synth_dim *d;
    for (int32_t k = 0; (d = slate_synth_dim_get(k)); k++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "",
                 d->key);
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
        int32_t k = 0;
        while ((d = slate_synth_dim_get(k)) && strcmp(d->key, tok) != 0) k++;
        if (!d) {
            fprintf(stderr, "slate synth: unknown --dims key '%s' (known: %s)\n", tok, known);
            return false;
        }
        /* Given before: every dim of p is 0 until given (no --shape beside --dims), and no
         * limit admits 0. */
        if (*dim_field(p, d) != 0) {
            fprintf(stderr, "slate synth: --dims gives %s twice (%d, then %s)\n", tok,
                    *dim_field(p, d), eq + 1);
            return false;
        }
        long long v;
        if (!(eq[1] >= '0' && eq[1] <= '9') || !cli_parse_int(eq + 1, d->lo, d->hi, &v)) {
            fprintf(stderr, "slate synth: --dims %s must be an integer in %d..%d%s%s%s, not '%s'\n",
                    tok, d->lo, d->hi, d->why ? " (" : "", d->why ? d->why : "",
                    d->why ? ")" : "", eq + 1);
            return false;
        }
        *dim_field(p, d) = (int32_t)v;
    }
    for (int32_t k = 0; (d = slate_synth_dim_get(k)); k++)
        if (d->required && *dim_field(p, d) == 0) {
            fprintf(stderr, "slate synth: --dims needs %s (hidden, layers, heads, ffn and vocab "
                            "are required; kv_heads defaults to heads, ctx to 2048, head_dim "
                            "to hidden / heads)\n",
                    d->key);
            return false;
        }
    int32_t kv = p->n_kv_heads ? p->n_kv_heads : p->n_heads;
    if (p->head_dim && p->head_dim % 2 != 0) {
        fprintf(stderr, "slate synth: --dims head_dim %d must be even\n", p->head_dim);
        return false;
    }
    if (!p->head_dim &&
        (p->dim % p->n_heads != 0 || (p->dim / p->n_heads) % 2 != 0 || p->dim / p->n_heads > 512)) {
        fprintf(stderr, "slate synth: --dims hidden %d / heads %d must give an even head size of "
                        "at most 512 (or give head_dim)\n", p->dim, p->n_heads);
        return false;
    }
    if (p->n_heads % kv != 0) {
        fprintf(stderr, "slate synth: --dims heads %d must be a multiple of kv_heads %d\n",
                p->n_heads, kv);
        return false;
    }
    return true;
}

static const char *dtype_arg(slate_dtype d) {
    return d == SLATE_DTYPE_F32 ? "f32" : d == SLATE_DTYPE_F16 ? "f16" : "bf16";
}

/* --dry-run: what slate_synth would write, on stdout, one "key value" line each. */
static int describe(const slate_synth_params *p) {
    slate_synth_info info;
    slate_error err;
    slate_status s = slate_synth_describe(p, &info, &err);
    if (s) return cli_error("synth", s, &err);
    if (p->like)
        printf("shape       custom (like %s)\n", p->like);
    else if (p->shape)
        printf("shape       %s (%s)\n", p->shape, info.source);
    else
        printf("shape       custom\n");
    printf("parameters  %lld (%.3f B)\n", (long long)info.n_params, (double)info.n_params / 1e9);
    printf("tensors     %d in %d safetensors file%s\n", info.n_tensors, info.n_shards,
           info.n_shards == 1 ? "" : "s");
    printf("head_dim    %d\n", info.head_dim);
    printf("bytes       %llu (%.2f GB of %s", (unsigned long long)info.weights_bytes,
           (double)info.weights_bytes / 1e9, dtype_arg(p->dtype));
    if (p->shape && info.published_dtype != p->dtype)
        printf("; the published weights are %s", dtype_arg(info.published_dtype));
    printf(")\n");
    return 0;
}

int slate_cli_synth(int argc, char **argv) {
    slate_synth_params p = slate_synth_default_params();
    const char *out = NULL;
    const char *dims = NULL;
    bool dry_run = false;
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
        } else if (strcmp(a, "--like") == 0 && v) {
            p.like = v;
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
        } else if (strcmp(a, "--dry-run") == 0) {
            dry_run = true;
        } else {
            return cli_bad_option("synth", a);
        }
    }
    if (p.like && !dims) {
        fprintf(stderr, "slate synth: --like %s needs --dims (it gives a custom shape that "
                        "architecture; --shape %s is the named shape itself)\n", p.like, p.like);
        return 2;
    }
    if ((!out && !dry_run) || (!p.shape && !dims)) return cli_usage("synth");
    /* The folder's config names the shape it was made from: a named shape with other dims would
     * carry a name it does not have. */
    if (p.shape && dims) {
        fprintf(stderr, "slate synth: --shape and --dims both given: give one (--dims describes a "
                        "whole custom shape; a named shape's dims cannot be changed; --like NAME "
                        "--dims ... gives a custom shape of NAME's architecture)\n");
        return 2;
    }
    if (dims && !parse_dims(dims, &p)) return 2;
    if (dry_run) return describe(&p);
    slate_error err;
    slate_status s = slate_synth(out, &p, &err);
    if (s) return cli_error("synth", s, &err);
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
