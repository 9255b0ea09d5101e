/* info.c - `slate info MODEL [--kv-rollback N | --kv-keep-all]`: program summary, states,
 * memory plan (sliding-window caches counted with that reach, or whole), tokenizer. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int slate_cli_info(int argc, char **argv) {
    const char *path = NULL;
    slate_model_params mp = slate_model_default_params();
    mp.use_mmap = true; /* info reads no weights */
    int32_t rollback = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--kv-rollback") == 0) {
            if (!cli_kv_rollback_parse("info", i + 1 < argc ? argv[i + 1] : NULL, &rollback))
                return 2;
            i++;
            continue;
        }
        if (strcmp(argv[i], "--kv-keep-all") == 0) {
            mp.kv_keep_all = true;
            continue;
        }
        if (argv[i][0] == '-') return cli_bad_option("info", argv[i]);
        if (path) {
            fprintf(stderr, "slate info: unexpected argument '%s' (info takes one package, "
                            "'%s' was the first)\n", argv[i], path);
            return 2;
        }
        path = argv[i];
    }
    if (!path) return cli_usage("info");
    slate_error err;
    slate_model *m = NULL;
    slate_status s = slate_model_open(path, &mp, &m, &err);
    if (s) return cli_error("info", s, &err);
    slate_model_info mi;
    slate_model_get_info(m, &mi);
    if (!cli_kv_options_ok("info", rollback, mp.kv_keep_all, 0, mi.n_ctx)) {
        slate_model_close(m);
        return 2;
    }
    if (rollback) { /* checked against the package's context: open again with that reach */
        slate_model_close(m);
        m = NULL;
        mp.kv_rollback_tokens = rollback;
        if ((s = slate_model_open(path, &mp, &m, &err))) return cli_error("info", s, &err);
    }
    size_t len = 0;
    slate_model_describe(m, NULL, 0, &len);
    char *buf = malloc(len); /* the size needed, with the NUL */
    if (!buf || slate_model_describe(m, buf, len, &len) != SLATE_OK) {
        free(buf);
        slate_model_close(m);
        fprintf(stderr, "slate info: out of memory\n");
        return 1;
    }
    fputs(buf, stdout);
    const slate_tokenizer *t = slate_model_tokenizer(m);
    printf("tokenizer: %d tokens, bos %d, eos %d\n", slate_tokenizer_n_vocab(t),
           slate_tokenizer_bos(t), slate_tokenizer_eos(t));
    free(buf);
    slate_model_close(m);
    return 0;
}
