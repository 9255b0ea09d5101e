/* tokenize.c - `slate tokenize SOURCE [--no-bos] [--parse-special] < text`: the ids of stdin's
 * bytes on one line, separated by spaces. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int slate_cli_tokenize(int argc, char **argv) {
    const char *src = NULL;
    uint32_t flags = SLATE_ENCODE_ADD_BOS;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-bos") == 0) flags &= ~(uint32_t)SLATE_ENCODE_ADD_BOS;
        else if (strcmp(argv[i], "--parse-special") == 0) flags |= SLATE_ENCODE_PARSE_SPECIAL;
        else if (argv[i][0] != '-' && !src) src = argv[i];
        else return cli_bad_option("tokenize", argv[i]);
    }
    if (!src) return cli_usage("tokenize");
    /* The tokenizer first: a missing SOURCE is reported at once, not after stdin's EOF. */
    slate_error err;
    slate_tokenizer *tok = NULL;
    slate_status s = slate_tokenizer_open(src, &tok, &err);
    if (s) return cli_error("tokenize", s, &err);
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    for (size_t n; text && (n = fread(text + len, 1, cap - len, stdin)) > 0;) {
        len += n;
        if (len == cap) {
            char *t = realloc(text, cap *= 2);
            if (!t) free(text);
            text = t;
        }
    }
    if (!text) {
        slate_tokenizer_free(tok);
        fprintf(stderr, "slate tokenize: out of memory reading stdin (%zu bytes read)\n", len);
        return 1;
    }
    if (ferror(stdin)) { /* e.g. stdin is a directory (EISDIR): not an empty text */
        fprintf(stderr, "slate tokenize: cannot read stdin: %s\n", strerror(errno));
        free(text);
        slate_tokenizer_free(tok);
        return 1;
    }
    size_t n = 0;
    s = slate_tokenizer_encode(tok, text, len, flags, NULL, 0, &n, &err);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (s == SLATE_E_BUFFER_TOO_SMALL || s == SLATE_OK)
        s = ids ? slate_tokenizer_encode(tok, text, len, flags, ids, n, &n, &err) : SLATE_E_NOMEM;
    free(text);
    slate_tokenizer_free(tok);
    if (s) {
        free(ids);
        return cli_error("tokenize", s, &err);
    }
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    return 0;
}
