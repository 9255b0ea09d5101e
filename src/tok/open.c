/*
 * open.c - slate_tokenizer_open: picks the reader from the file's first bytes, never from its
 * name: "SLATEPKG" -> a .slate package (its tokenizer section), "GGUF" -> the tokenizer.ggml.*
 * keys of a GGUF file, '{' after optional whitespace -> a Hugging Face tokenizer.json, anything
 * else -> a llama2.c tokenizer .bin (which has no magic; its reader validates the whole file, so
 * garbage is refused with E_FORMAT there).
 */
#include "tok/tok.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "convert/gguf.h"
#include "pkg/pkg.h"

typedef enum fmt { FMT_LLAMA2C, FMT_PKG, FMT_GGUF, FMT_JSON } fmt;

static slate_status sniff(const char *path, fmt *f, slate_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return slate__fail(err, SLATE_E_IO, "cannot open '%s': %s", path, strerror(errno));
    uint8_t head[8];
    size_t n = fread(head, 1, sizeof head, fp);
    *f = FMT_LLAMA2C;
    if (n == 8 && memcmp(head, "SLATEPKG", 8) == 0) {
        *f = FMT_PKG;
    } else if (n >= 4 && memcmp(head, "GGUF", 4) == 0) {
        *f = FMT_GGUF;
    } else {
        /* JSON: the first byte that is not JSON whitespace is '{'. */
        rewind(fp);
        int c;
        do c = fgetc(fp);
        while (c == ' ' || c == '\t' || c == '\n' || c == '\r');
        if (c == '{') *f = FMT_JSON;
    }
    fclose(fp);
    return SLATE_OK;
}

slate_status slate_tokenizer_open(const char *path, slate_tokenizer **out, slate_error *err) {
    if (out) *out = NULL;
    if (!path || !out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "slate_tokenizer_open: %s is NULL",
                           !path ? "path" : "out");
    fmt f = FMT_LLAMA2C;
    slate_status st = sniff(path, &f, err);
    if (st != SLATE_OK) return st;
    switch (f) {
    case FMT_PKG: return slate__pkg_read_tokenizer(path, out, err);
    case FMT_GGUF: {
        slate__gguf *g = NULL;
        st = slate__gguf_open(path, &g, err);
        if (st != SLATE_OK) return st;
        st = slate__tok_from_gguf(g, out, err);
        slate__gguf_close(g);
        if (st != SLATE_OK) slate__error_name_file(err, path);
        return st;
    }
    case FMT_JSON: return slate__tok_load_hf(path, out, err);
    case FMT_LLAMA2C: break;
    }
    return slate__tok_load_llama2c(path, out, err);
}
