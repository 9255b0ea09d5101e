/*
 * convert.c - slate_convert: detects the source format (a directory is a Hugging Face folder;
 * a file starting with "GGUF" is GGUF; a slate package, a state file, a JSON or a safetensors
 * file is refused by name; anything else is tried as a llama2.c checkpoint, whose header is
 * validated against the file size) and runs the importer, then the builder. An existing
 * output is replaced only when it is a package (or empty), never the source.
 */
#include "convert.h"
#include "pkg/format.h"
#include "pkg/pkg.h"

#include <errno.h>
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
    /* Checked before the conversion, which can take minutes: an empty path would only fail
     * when the finished temp file (".tmp.<pid>.<n>" in the working folder) is renamed. */
    if (!out[0])
        return slate__fail(err, SLATE_E_INVALID_ARG, "the output path is empty");
    slate_convert_params dp = slate_convert_default_params();
    if (!params) params = &dp;
    struct stat st, ost;
    if (stat(src, &st) != 0)
        return slate__fail(err, SLATE_E_IO, "cannot open '%s': %s", src,
                           errno == ENOENT ? "no such file or directory" : strerror(errno));
    /* The output replaces only a package (or an empty file, or a damaged one shorter than the
     * magic that starts like it): never the source itself (`-o model.gguf` for model.gguf) nor
     * any other file named by mistake, which would be lost once the package was renamed over it. */
    if (stat(out, &ost) == 0 && S_ISREG(ost.st_mode)) {
        if (ost.st_dev == st.st_dev && ost.st_ino == st.st_ino)
            return slate__fail(err, SLATE_E_INVALID_ARG, "the output '%s' is the source; convert "
                               "writes a new package beside it (choose another output path)",
                               out);
        char head[8];
        size_t n = slate__file_head(out, head, sizeof head);
        if (n > 0 && memcmp(head, SLATE__PKG_MAGIC, n) != 0)
            return slate__fail(err, SLATE_E_INVALID_ARG, "the output '%s' exists and is not a "
                               "slate package; it is not replaced (remove it first or choose "
                               "another output path)", out);
    }
    slate__import imp;
    slate_status s;
    /* A tokenizer path is read from llama2.c checkpoints only (the other formats carry their
     * tokenizer): given with another source it would be ignored, so it is refused. */
    const char *kind = NULL;
    if (S_ISDIR(st.st_mode)) {
        kind = "a Hugging Face folder (its tokenizer is tokenizer.json)";
    } else {
        uint8_t head[32];
        FILE *f = fopen(src, "rb");
        if (!f) return slate__fail(err, SLATE_E_IO, "cannot open '%s': %s", src, strerror(errno));
        size_t got = fread(head, 1, sizeof head, f);
        fclose(f);
        switch (slate__pkg_file_kind(head, got, (uint64_t)st.st_size)) {
        case SLATE__FILE_GGUF: kind = "a GGUF file (its tokenizer is in its metadata)"; break;
        case SLATE__FILE_PACKAGE:
            return slate__fail(err, SLATE_E_INVALID_ARG, "'%s' is a slate package already; "
                               "convert reads a Hugging Face folder, a GGUF file or a llama2.c "
                               "checkpoint", src);
        case SLATE__FILE_STATE:
            return slate__fail(err, SLATE_E_INVALID_ARG, "'%s' is a slate state file (a saved "
                               "conversation), not a checkpoint", src);
        case SLATE__FILE_JSON:
            return slate__fail(err, SLATE_E_INVALID_ARG, "'%s' looks like JSON; convert reads "
                               "the Hugging Face folder it belongs to (slate convert DIR -o "
                               "OUT.slate)", src);
        case SLATE__FILE_SAFETENSORS:
            return slate__fail(err, SLATE_E_INVALID_ARG, "'%s' is a safetensors file; convert "
                               "reads the Hugging Face folder it belongs to (slate convert DIR "
                               "-o OUT.slate)", src);
        default: break; /* anything else is tried as a llama2.c checkpoint */
        }
    }
    if (kind && params->tokenizer_path)
        return slate__fail(err, SLATE_E_INVALID_ARG, "a tokenizer path ('%s') applies to "
                           "llama2.c checkpoints only; '%s' is %s", params->tokenizer_path, src,
                           kind);
    if (S_ISDIR(st.st_mode))
        s = slate__import_hf(src, &imp, err);
    else if (kind)
        s = slate__import_gguf(src, &imp, err);
    else
        s = slate__import_llama2c(src, params->tokenizer_path, &imp, err);
    if (s) return s;
    s = slate__build_package(&imp, params, out, err);
    slate__import_free(&imp);
    return s;
}
