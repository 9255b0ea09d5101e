/*
 * plan.c - `slate plan MODEL [--context N] [--kv-dtype fp16|fp32|int8] [--states K]
 * [--device NAME | --budget BYTES] [--mmap] [--kv-rollback N | --kv-keep-all]`: the memory plan of a package (read without its
 * weights) against a device's budget (default: this machine), the largest context that fits,
 * and which cache or weight dtype would fit more. `slate plan --devices` lists the table.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *human(size_t b, char *buf, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024.0 && i < 4) {
        v /= 1024.0;
        i++;
    }
    snprintf(buf, cap, i ? "%.2f %s" : "%.0f %s", v, u[i]);
    return buf;
}

/* "4096", "512M", "4G", "4GiB", "1.5G" (binary units) -> bytes. */
static bool parse_bytes(const char *s, size_t *out) {
    if (!s || !*s) return false;
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return false;
    double mul = 1;
    switch (*end) {
    case 'K': case 'k': mul = 1024.0; end++; break;
    case 'M': case 'm': mul = 1024.0 * 1024; end++; break;
    case 'G': case 'g': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': case 't': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0) end += strlen(end);
    if (*end || v * mul > 1.8e19) return false;
    *out = (size_t)(v * mul);
    return *out > 0;
}

static bool parse_kv(const char *v, slate_dtype *out) {
    if (!v) return false;
    if (!strcmp(v, "fp32") || !strcmp(v, "f32")) *out = SLATE_DTYPE_F32;
    else if (!strcmp(v, "fp16") || !strcmp(v, "f16")) *out = SLATE_DTYPE_F16;
    else if (!strcmp(v, "int8") || !strcmp(v, "i8")) *out = SLATE_DTYPE_I8;
    else return false;
    return true;
}

static void list_devices(void) {
    slate_device d;
    char a[32], b[32], c[32];
    printf("%-14s %10s %10s %10s  note\n", "device", "RAM", "reserved", "budget");
    for (int32_t i = 0; slate_device_get(i, &d) == SLATE_OK; i++)
        printf("%-14s %10s %10s %10s  %s\n", d.name, human(d.ram_bytes, a, sizeof a),
               human(d.reserved_bytes, b, sizeof b), human(d.budget_bytes, c, sizeof c), d.note);
    slate_error err;
    if (slate_device_this_machine(&d, &err) == SLATE_OK)
        printf("%-14s %10s %10s %10s  %s\n", d.name, human(d.ram_bytes, a, sizeof a),
               human(d.reserved_bytes, b, sizeof b), human(d.budget_bytes, c, sizeof c), d.note);
}

/* "int8 KV would fit 2.0x the context" lines. */
static void suggest(const slate_plan *p, const char *what, int32_t fit) {
    if (fit <= p->n_ctx_fit) return;
    if (p->n_ctx_fit > 0)
        printf("  %s would fit %.1fx the context (%d)%s\n", what,
               (double)fit / (double)p->n_ctx_fit, fit,
               fit == p->n_ctx_max ? ", the package's maximum" : "");
    else
        printf("  %s would fit a context of %d\n", what, fit);
}

int slate_cli_plan(int argc, char **argv) {
    const char *path = NULL, *device = NULL;
    slate_plan_params pp = slate_plan_default_params();
    bool have_budget = false;
    /* --devices is a command of its own: anything beside it would be ignored, so it is refused. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--devices") != 0) continue;
        if (argc == 2) {
            list_devices();
            return 0;
        }
        fprintf(stderr, "slate plan: --devices takes no other argument, not '%s' (slate plan "
                        "--devices: the device table)\n", argv[i == 1 ? 2 : 1]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (strcmp(a, "--context") == 0) {
            if (!cli_parse_int(v, 1, 1 << 24, &n)) {
                fprintf(stderr, "slate plan: --context must be an integer in 1..%d\n", 1 << 24);
                return 2;
            }
            pp.n_ctx = (int32_t)n;
            i++;
        } else if (strcmp(a, "--kv-dtype") == 0) {
            if (!parse_kv(v, &pp.kv_dtype)) {
                fprintf(stderr, "slate plan: --kv-dtype must be fp16, fp32 or int8\n");
                return 2;
            }
            pp.kv_dtype_set = true;
            i++;
        } else if (strcmp(a, "--states") == 0) {
            if (!cli_parse_int(v, 1, 4096, &n)) {
                fprintf(stderr, "slate plan: --states must be an integer in 1..4096\n");
                return 2;
            }
            pp.n_states = (int32_t)n;
            i++;
        } else if (strcmp(a, "--device") == 0 && v) {
            device = v;
            i++;
        } else if (strcmp(a, "--budget") == 0) {
            if (!parse_bytes(v, &pp.budget_bytes)) {
                fprintf(stderr, "slate plan: --budget must be a size in bytes (suffixes K, M, G, "
                                "T: binary units), e.g. 3.5G\n");
                return 2;
            }
            have_budget = true;
            i++;
        } else if (strcmp(a, "--mmap") == 0) {
            pp.use_mmap = true;
        } else if (strcmp(a, "--kv-rollback") == 0) {
            if (!cli_kv_rollback_parse("plan", v, &pp.kv_rollback_tokens)) return 2;
            i++;
        } else if (strcmp(a, "--kv-keep-all") == 0) {
            pp.kv_keep_all = true;
        } else if (a[0] != '-' && !path) {
            path = a;
        } else {
            return cli_bad_option("plan", a);
        }
    }
    if (device && have_budget) {
        fprintf(stderr, "slate plan: --device and --budget both set a budget: give one\n");
        return 2;
    }
    if (!path) return cli_usage("plan");
    slate_error err;
    slate_device dev;
    memset(&dev, 0, sizeof dev);
    slate_status s;
    if (!have_budget) {
        if ((s = slate_device_find(device ? device : "this-machine", &dev, &err)))
            return cli_error("plan", s, &err);
        pp.budget_bytes = dev.budget_bytes;
    }
    slate_plan p;
    memset(&p, 0, sizeof p);
    if (pp.n_ctx || pp.kv_rollback_tokens) {
        /* --context against the package's, --kv-rollback against the context: usage errors,
         * not a failed plan */
        slate_plan_params p0 = pp;
        p0.n_ctx = 0;
        p0.kv_rollback_tokens = 0;
        if ((s = slate_plan_file(path, &p0, &p, &err))) return cli_error("plan", s, &err);
        if (pp.n_ctx > p.n_ctx_max) {
            fprintf(stderr, "slate plan: --context must be in 1..%d (the package's context), not "
                            "%d\n", p.n_ctx_max, pp.n_ctx);
            return 2;
        }
    }
    if (!cli_kv_options_ok("plan", pp.kv_rollback_tokens, pp.kv_keep_all, pp.n_ctx, p.n_ctx_max))
        return 2;
    if ((s = slate_plan_file(path, &pp, &p, &err))) return cli_error("plan", s, &err);
    char b1[32], b2[32], b3[32];
    printf("%s: context %d (package maximum %d), max query %d, %d state(s), cache %s\n", path,
           p.n_ctx, p.n_ctx_max, p.max_query, p.n_states, slate_dtype_name(p.kv_dtype));
    printf("  weights          %12s  %s\n", human(p.weights_bytes, b1, sizeof b1),
           p.weights_mapped ? "mapped from the file (counted: decoding touches every page)"
                            : "read into memory (--mmap: mapped from the file)");
    printf("  KV per token     %12s  program's state tensors", human(p.kv_bytes_per_token, b1,
                                                                     sizeof b1));
    if (p.kv_formula_bytes_per_token)
        printf("; 2 x %d layers x %d kv heads x %d head_dim x %s = %zu bytes (%s)\n", p.n_layers,
               p.n_kv_heads, p.head_dim,
               p.kv_dtype == SLATE_DTYPE_F32   ? "4"
               : p.kv_dtype == SLATE_DTYPE_F16 ? "2"
                                               : "(1 + scale/head)",
               p.kv_formula_bytes_per_token,
               p.kv_formula_bytes_per_token == p.kv_bytes_per_token ? "agrees" : "DIFFERS");
    else
        printf(" (the package declares no n_kv_heads/head_dim to check against)\n");
    if (p.kv_bytes != p.kv_reserved_bytes)
        printf("  KV per state     %12s  at context %d: resident bound, sliding-window caches "
               "keep about window + %d rollback positions (reserved %s; --kv-keep-all or "
               "SLATE_KV_KEEP_ALL=1 keeps every row)\n", human(p.kv_bytes, b1, sizeof b1), p.n_ctx,
               p.kv_rollback_tokens, human(p.kv_reserved_bytes, b2, sizeof b2));
    else if (p.n_window_caches && !p.kv_rollback_tokens)
        printf("  KV per state     %12s  at context %d: sliding-window caches counted whole, "
               "every row kept (%s)\n", human(p.kv_bytes, b1, sizeof b1), p.n_ctx,
               pp.kv_keep_all ? "--kv-keep-all" : "SLATE_KV_KEEP_ALL=1");
    else if (p.n_window_caches)
        printf("  KV per state     %12s  at context %d: sliding-window caches counted whole, "
               "window + %d rollback positions (and a release step) cover the context\n",
               human(p.kv_bytes, b1, sizeof b1), p.n_ctx, p.kv_rollback_tokens);
    else
        printf("  KV per state     %12s  at context %d\n", human(p.kv_bytes, b1, sizeof b1),
               p.n_ctx);
    printf("  scratch/state    %12s  activations + logits for %d query rows\n",
           human(p.scratch_bytes, b1, sizeof b1), p.max_query);
    printf("  per state        %12s\n", human(p.state_bytes, b1, sizeof b1));
    printf("  total            %12s  weights + %d x state\n", human(p.total_bytes, b1, sizeof b1),
           p.n_states);
    if (have_budget)
        printf("budget             %12s  (--budget)\n", human(p.budget_bytes, b1, sizeof b1));
    else
        printf("budget %-11s %12s  of %s RAM, %s reserved: %s\n", dev.name,
               human(dev.budget_bytes, b1, sizeof b1), human(dev.ram_bytes, b2, sizeof b2),
               human(dev.reserved_bytes, b3, sizeof b3), dev.note);
    if (p.fits)
        printf("fits: yes, %s to spare\n", human(p.budget_bytes - p.total_bytes, b1, sizeof b1));
    else
        printf("fits: NO, %s over\n", human(p.total_bytes - p.budget_bytes, b1, sizeof b1));
    if (p.n_ctx_fit > 0)
        printf("largest context that fits: %d%s\n", p.n_ctx_fit,
               p.n_ctx_fit == p.n_ctx_max ? " (the package's maximum)" : "");
    else
        printf("largest context that fits: none (weights + scratch alone exceed the budget)\n");
    printf("by cache dtype: f32 %d, f16 %d, int8 %d positions\n", p.n_ctx_fit_f32,
           p.n_ctx_fit_f16, p.n_ctx_fit_i8);
    if (p.kv_dtype != SLATE_DTYPE_I8) suggest(&p, "int8 KV", p.n_ctx_fit_i8);
    if (p.kv_dtype == SLATE_DTYPE_F32) suggest(&p, "f16 KV", p.n_ctx_fit_f16);
    if (p.weights_bytes_16bit < p.weights_bytes)
        suggest(&p, "f16/bf16 weights (convert --dtype fp16)", p.n_ctx_fit_16bit);
    return p.fits ? 0 : 3;
}
