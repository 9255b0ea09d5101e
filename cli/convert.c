/* convert.c - `slate convert SRC -o OUT.slate [...]`. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Weight dtype names of --dtype, --quantize and --keep: int8 = linear symmetric int8 with one
 * scale per output channel (Q8_C, as issue 3 defines --quantize int8; int8c is kept as an alias),
 * int8-b32 = int8 in blocks of 32 with an f16 scale each (Q8_0, GGUF's layout), int4 = Q4
 * (--block-size, --asym); "int4-b64" also sets the block size (*block, when not NULL). */
static bool parse_wdtype(const char *v, bool floats, slate_dtype *out, int32_t *block) {
    if (strcmp(v, "int8") == 0 || strcmp(v, "int8c") == 0) *out = SLATE_DTYPE_Q8_C;
    else if (strcmp(v, "int8-b32") == 0 || strcmp(v, "q8_0") == 0) *out = SLATE_DTYPE_Q8_0;
    else if (strcmp(v, "int4") == 0) *out = SLATE_DTYPE_Q4;
    else if (strcmp(v, "pal") == 0) *out = SLATE_DTYPE_PAL; /* --palettize / --group-size */
    else if (block && strncmp(v, "int4-b", 6) == 0 &&
             (!strcmp(v + 6, "16") || !strcmp(v + 6, "32") || !strcmp(v + 6, "64") ||
              !strcmp(v + 6, "128"))) {
        *out = SLATE_DTYPE_Q4;
        *block = (int32_t)atoi(v + 6);
    }
    else if (floats && (strcmp(v, "f32") == 0 || strcmp(v, "fp32") == 0)) *out = SLATE_DTYPE_F32;
    else if (floats && (strcmp(v, "f16") == 0 || strcmp(v, "fp16") == 0)) *out = SLATE_DTYPE_F16;
    else if (floats && strcmp(v, "bf16") == 0) *out = SLATE_DTYPE_BF16;
    else return false;
    return true;
}

enum { MAX_KEEP = 64 };

int slate_cli_convert(int argc, char **argv) {
    slate_convert_params p = slate_convert_default_params();
    const char *src = NULL, *out = NULL;
    slate_convert_keep keep[MAX_KEEP];
    bool dtype_given = false;
    const char *dtype_opt = NULL; /* the last --dtype/--quantize, for messages */
    bool pal_given = false, group_given = false, block_given = false, block_from_dtype = false;
    p.progress = isatty(2);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (strcmp(a, "-o") == 0 && v) {
            out = v;
            i++;
        } else if (strcmp(a, "--tokenizer") == 0 && v) {
            p.tokenizer_path = v;
            i++;
        } else if ((strcmp(a, "--dtype") == 0 || strcmp(a, "--quantize") == 0) && v) {
            /* One setting: --quantize int4 and --dtype int4 mean the same; the last one wins. */
            bool q = strcmp(a, "--quantize") == 0;
            int32_t blk = 0;
            if (!parse_wdtype(v, !q, &p.dtype, &blk)) {
                fprintf(stderr, "slate convert: %s must be %sint8, int8-b32, int4 or int4-b16|b32|b64|"
                        "b128, not '%s'\n", a, q ? "" : "fp32, fp16, bf16, ", v);
                return 2;
            }
            /* int4-bN sets the block size; a later --dtype without one takes back a block
             * size that only an earlier int4-bN set (the last --dtype wins, whole). */
            if (blk) {
                p.block_size = blk;
                block_from_dtype = true;
            } else if (block_from_dtype) {
                p.block_size = 0;
                block_from_dtype = false;
            }
            dtype_given = true;
            dtype_opt = a;
            i++;
        } else if (strcmp(a, "--block-size") == 0 && v) {
            if (!cli_parse_int(v, 16, 128, &n) || (n != 16 && n != 32 && n != 64 && n != 128)) {
                fprintf(stderr, "slate convert: --block-size must be 16, 32, 64 or 128, not '%s'\n",
                        v);
                return 2;
            }
            p.block_size = (int32_t)n;
            block_given = true;
            block_from_dtype = false;
            i++;
        } else if (strcmp(a, "--palettize") == 0 && v) {
            if (!cli_parse_int(v, 2, 8, &n) || n == 5 || n == 7) {
                fprintf(stderr, "slate convert: --palettize must be 2, 3, 4, 6 or 8 (bits), not "
                                "'%s'\n", v);
                return 2;
            }
            p.dtype = SLATE_DTYPE_PAL;
            p.pal_bits = (int32_t)n;
            dtype_given = true;
            pal_given = true;
            i++;
        } else if (strcmp(a, "--group-size") == 0 && v) {
            if (!cli_parse_int(v, 1, 4096, &n)) {
                fprintf(stderr, "slate convert: --group-size must be an integer in 1..4096 (output "
                                "rows per palette), not '%s'\n", v);
                return 2;
            }
            p.pal_group = (int32_t)n;
            group_given = true;
            i++;
        } else if (strcmp(a, "--asym") == 0) {
            p.asym = true;
        } else if (strcmp(a, "--keep") == 0 && v) {
            const char *colon = strchr(v, ':');
            char name[16];
            size_t len = colon ? (size_t)(colon - v) : 0;
            if (!colon || len >= sizeof name || !colon[1]) {
                fprintf(stderr, "slate convert: --keep takes DTYPE:PATTERN (e.g. "
                                "f16:'blk.*.ffn_down.weight'), not '%s'\n", v);
                return 2;
            }
            memcpy(name, v, len);
            name[len] = '\0';
            if (p.n_keep >= MAX_KEEP || !parse_wdtype(name, true, &keep[p.n_keep].dtype, NULL)) {
                fprintf(stderr, "slate convert: --keep '%s': DTYPE must be f32, f16, bf16, int8, "
                                "int8-b32, int4 or pal (at most %d rules)\n", v, MAX_KEEP);
                return 2;
            }
            keep[p.n_keep++].pattern = colon + 1;
            i++;
        } else if (strcmp(a, "--threads") == 0 && v) {
            if (!cli_parse_int(v, 1, 1024, &n)) {
                fprintf(stderr, "slate convert: --threads must be an integer in 1..1024\n");
                return 2;
            }
            p.n_threads = (int32_t)n;
            i++;
        } else if (strcmp(a, "--kv-dtype") == 0 && v) {
            if (strcmp(v, "f32") == 0 || strcmp(v, "fp32") == 0) p.kv_dtype = SLATE_DTYPE_F32;
            else if (strcmp(v, "f16") == 0 || strcmp(v, "fp16") == 0) p.kv_dtype = SLATE_DTYPE_F16;
            else {
                fprintf(stderr, "slate convert: --kv-dtype must be fp16 or fp32 (int8 is chosen "
                                "per state: slate run --kv-dtype int8), not '%s'\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--context") == 0 && v) {
            if (!cli_parse_int(v, 1, 1 << 24, &n)) {
                fprintf(stderr, "slate convert: --context must be an integer in 1..%d\n", 1 << 24);
                return 2;
            }
            p.n_ctx = (int32_t)n;
            i++;
        } else if (strcmp(a, "--max-query") == 0 && v) {
            if (!cli_parse_int(v, 1, 1 << 24, &n)) {
                fprintf(stderr, "slate convert: --max-query must be an integer in 1..%d\n", 1 << 24);
                return 2;
            }
            p.max_query = (int32_t)n;
            i++;
        } else if (strcmp(a, "--progress") == 0) {
            p.progress = true;
        } else if (a[0] != '-' && !src) {
            src = a;
        } else {
            return cli_bad_option("convert", a);
        }
    }
    /* An explicit dtype converts quantized source tensors too (their bytes are copied where
     * the format is already the requested one). */
    p.convert_quantized = dtype_given;
    p.keep = keep;
    if (!src || !out) return cli_usage("convert");
    /* Options that would be ignored (or overridden) silently are refused. */
    bool keep_q4 = false, keep_pal = false;
    for (int32_t k = 0; k < p.n_keep; k++) {
        keep_q4 |= keep[k].dtype == SLATE_DTYPE_Q4;
        keep_pal |= keep[k].dtype == SLATE_DTYPE_PAL;
    }
    if (pal_given && dtype_opt) {
        fprintf(stderr, "slate convert: --palettize and %s both set the weight dtype: give one "
                        "(--keep DTYPE:PATTERN mixes dtypes)\n", dtype_opt);
        return 2;
    }
    if ((p.asym || block_given) && p.dtype != SLATE_DTYPE_Q4 && !keep_q4) {
        fprintf(stderr, "slate convert: %s applies to int4 weights only: add --quantize int4 (or "
                        "a --keep int4:PATTERN rule)\n", p.asym ? "--asym" : "--block-size");
        return 2;
    }
    if (group_given && p.dtype != SLATE_DTYPE_PAL && !keep_pal) {
        fprintf(stderr, "slate convert: --group-size applies to palettized weights only: add "
                        "--palettize BITS (or a --keep pal:PATTERN rule)\n");
        return 2;
    }
    slate_error err;
    slate_status s = slate_convert(src, out, &p, &err);
    if (s) return cli_error("convert", s, &err);
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
