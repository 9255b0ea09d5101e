/* convert.c - `slate convert SRC -o OUT.slate [...]`. */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int slate_cli_convert(int argc, char **argv) {
    slate_convert_params p = slate_convert_default_params();
    const char *src = NULL, *out = NULL;
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
        } else if (strcmp(a, "--dtype") == 0 && v) {
            if (strcmp(v, "f32") == 0 || strcmp(v, "fp32") == 0) p.dtype = SLATE_DTYPE_F32;
            else if (strcmp(v, "f16") == 0 || strcmp(v, "fp16") == 0) p.dtype = SLATE_DTYPE_F16;
            else if (strcmp(v, "bf16") == 0) p.dtype = SLATE_DTYPE_BF16;
            else {
                fprintf(stderr, "slate convert: --dtype must be fp32, fp16 or bf16, not '%s'\n", v);
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
            fprintf(stderr, "slate convert: unknown or incomplete option '%s'\n", a);
            return 2;
        }
    }
    if (!src || !out) {
        fprintf(stderr, "usage: slate convert SRC -o OUT.slate [--tokenizer FILE] [--dtype "
                        "fp32|fp16|bf16] [--context N] [--max-query N]\n");
        return 2;
    }
    slate_error err;
    slate_status s = slate_convert(src, out, &p, &err);
    if (s) return cli_error("convert", s, &err);
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
