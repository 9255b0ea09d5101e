/* info.c - `slate info MODEL`: program summary, states, memory plan, tokenizer. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

int slate_cli_info(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
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
    slate_model_params mp = slate_model_default_params();
    mp.use_mmap = true; /* info reads no weights */
    slate_status s = slate_model_open(path, &mp, &m, &err);
    if (s) return cli_error("info", s, &err);
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
