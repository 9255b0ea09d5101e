/*
 * synth.c - `slate synth --shape NAME|--dims K=V,... -o DIR [--seed S] [--dtype f32|f16|bf16]`:
 * writes a Hugging Face folder with seeded random weights of a realistic shape (see
 * slate_synth in slate.h). --dims alone describes a custom Llama; with --shape it overrides
 * the named shape's dims (e.g. a 2-layer TinyLlama).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* "hidden=64,layers=2,..." into p; false (with a message) on a malformed list. */
static bool parse_dims(const char *s, slate_synth_params *p) {
    static const struct { const char *key; size_t off; } keys[] = {
        {"hidden", offsetof(slate_synth_params, dim)},
        {"layers", offsetof(slate_synth_params, n_layers)},
        {"heads", offsetof(slate_synth_params, n_heads)},
        {"kv_heads", offsetof(slate_synth_params, n_kv_heads)},
        {"ffn", offsetof(slate_synth_params, ffn_dim)},
        {"vocab", offsetof(slate_synth_params, n_vocab)},
        {"ctx", offsetof(slate_synth_params, n_ctx)},
    };
    char buf[512];
    if (strlen(s) >= sizeof buf) {
        fprintf(stderr, "slate synth: --dims is too long\n");
        return false;
    }
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            fprintf(stderr, "slate synth: --dims entry '%s' is not KEY=VALUE\n", tok);
            return false;
        }
        *eq = '\0';
        size_t k = 0;
        while (k < sizeof keys / sizeof keys[0] && strcmp(keys[k].key, tok) != 0) k++;
        if (k == sizeof keys / sizeof keys[0]) {
            fprintf(stderr, "slate synth: unknown --dims key '%s' (known: hidden, layers, heads, "
                            "kv_heads, ffn, vocab, ctx)\n", tok);
            return false;
        }
        long long v;
        if (!cli_parse_int(eq + 1, 1, 1 << 24, &v)) {
            fprintf(stderr, "slate synth: --dims %s must be an integer in 1..%d, not '%s'\n", tok,
                    1 << 24, eq + 1);
            return false;
        }
        *(int32_t *)((char *)p + keys[k].off) = (int32_t)v;
    }
    return true;
}

int slate_cli_synth(int argc, char **argv) {
    slate_synth_params p = slate_synth_default_params();
    const char *out = NULL;
    bool have_dims = false;
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
            if (!parse_dims(v, &p)) return 2;
            have_dims = true;
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
    if (!out || (!p.shape && !have_dims)) return cli_usage("synth");
    slate_error err;
    slate_status s = slate_synth(out, &p, &err);
    if (s) return cli_error("synth", s, &err);
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
