/*
 * convert.c - slate_convert: detects the source format (a directory is a Hugging Face folder;
 * a file starting with "GGUF" is GGUF; anything else is tried as a llama2.c checkpoint, whose
 * header is validated against the file size) and runs the importer, then the builder.
 */
#include "convert.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

slate_convert_params slate_convert_default_params(void) {
    slate_convert_params p;
    memset(&p, 0, sizeof p);
    p.dtype = SLATE_DTYPE_F32;
    p.kv_dtype = SLATE_DTYPE_F16; /* issue 4: half the cache memory; states may override */
    return p;
}

slate_status slate_convert(const char *src, const char *out, const slate_convert_params *params,
                           slate_error *err) {
    if (!src || !out)
        return slate__fail(err, SLATE_E_INVALID_ARG, "source and output paths must not be NULL");
    slate_convert_params dp = slate_convert_default_params();
    if (!params) params = &dp;
    struct stat st;
    if (stat(src, &st) != 0)
        return slate__fail(err, SLATE_E_IO, "cannot open '%s': no such file or directory", src);
    slate__import imp;
    slate_status s;
    if (S_ISDIR(st.st_mode)) {
        s = slate__import_hf(src, &imp, err);
    } else {
        char magic[4] = {0};
        FILE *f = fopen(src, "rb");
        if (!f) return slate__fail(err, SLATE_E_IO, "cannot open '%s'", src);
        size_t got = fread(magic, 1, 4, f);
        fclose(f);
        if (got == 4 && memcmp(magic, "GGUF", 4) == 0)
            s = slate__import_gguf(src, &imp, err);
        else
            s = slate__import_llama2c(src, params->tokenizer_path, &imp, err);
    }
    if (s) return s;
    s = slate__build_package(&imp, params, out, err);
    slate__import_free(&imp);
    return s;
}
