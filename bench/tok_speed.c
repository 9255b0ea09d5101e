/* tok_speed.c - encode speed of a tokenizer, A/B in one process: SentencePiece-style BPE merged
 * over the whole text at once ("whole", the old way) and word by word with the call's word cache
 * ("words", spm.c when slate__tok_spm_words_apart holds), on the same text, with the ids
 * compared (they must be equal; the program exits 1 otherwise).
 *
 * The text is a file: llama.cpp's tokenizer test strings (../shared/models/tokenizers/vectors/
 * X.inp, separator lines removed) or plain text (bench/eval_text.txt), repeated up to [MiB]
 * (default 4) and encoded as one call, without
 * special-token parsing. Variants run interleaved, [rounds] rounds (default 3), best time of
 * each (the shared machine's load moves single runs). MB/s = text bytes / time (1 MB = 1e6 B).
 * Built with the project (not installed, not run by the tests):
 *   build/bench_tok_speed ../shared/models/llama2c-vocab/tokenizer.bin \
 *      ../shared/models/tokenizers/vectors/ggml-vocab-llama-spm.gguf.inp [MiB] [rounds] [words]
 * A fifth argument "words" runs only the word-by-word variant (for a profiler).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "tok/tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER TEXTS.inp [MiB] [rounds]\n", argv[0]);
        return 2;
    }
    size_t mib = argc > 3 ? (size_t)atoi(argv[3]) : 4;
    size_t rounds = argc > 4 ? (size_t)atoi(argv[4]) : 3;
    bool only_words = argc > 5 && strcmp(argv[5], "words") == 0;
    slate_tokenizer *tok = NULL;
    slate_error err;
    if (slate_tokenizer_open(argv[1], &tok, &err) != SLATE_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    size_t raw_len;
    char *raw = read_all(argv[2], &raw_len);
    if (!raw) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    /* Drop the separator lines: the strings joined by newlines. */
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t k = 0;
    for (size_t i = 0; i < raw_len;) {
        if (raw_len - i >= sizeof sep - 1 && memcmp(raw + i, sep, sizeof sep - 1) == 0) {
            raw[k++] = '\n';
            i += sizeof sep - 1;
        } else {
            raw[k++] = raw[i++];
        }
    }
    size_t len = mib << 20;
    char *text = malloc(len);
    for (size_t i = 0; i < len; i++) text[i] = raw[i % k];
    size_t cap = len + 16;
    int32_t *ids[2] = {malloc(cap * sizeof(int32_t)), malloc(cap * sizeof(int32_t))};
    size_t n_ids[2] = {0, 0};
    double best[2] = {1e30, 1e30};
    bool apart = tok->spm_words_apart;
    static const char *const name[2] = {"whole", "words"};
    for (size_t r = 0; r < rounds; r++)
        for (int v = 0; v < 2; v++) {
            if ((v == 1 && !apart) || (v == 0 && only_words)) continue;
            tok->spm_words_apart = v == 1; /* the bench's own copy: no other thread uses it */
            double t0 = now_s();
            if (slate_tokenizer_encode(tok, text, len, 0, ids[v], cap, &n_ids[v], &err) !=
                SLATE_OK) {
                fprintf(stderr, "%s\n", err.message);
                return 1;
            }
            double dt = now_s() - t0;
            if (dt < best[v]) best[v] = dt;
        }
    tok->spm_words_apart = apart;
    printf("%s: %zu bytes (%.1f MiB), %zu ids\n", argv[1], len, (double)len / (1 << 20), n_ids[0]);
    for (int v = 0; v < 2; v++) {
        if (v == 1 && !apart) {
            printf("%-5s  n/a: the vocabulary has a mark inside a token\n", name[v]);
            continue;
        }
        if (v == 0 && only_words) continue;
        printf("%-5s  %8.3f s  %8.2f MB/s\n", name[v], best[v], (double)len / best[v] / 1e6);
    }
    int rc = 0;
    if (apart && !only_words) {
        bool same = n_ids[0] == n_ids[1] &&
                    memcmp(ids[0], ids[1], n_ids[0] * sizeof(int32_t)) == 0;
        printf("ids equal: %s\n", same ? "yes" : "NO");
        rc = same ? 0 : 1;
    }
    slate_tokenizer_free(tok);
    free(ids[0]);
    free(ids[1]);
    free(text);
    free(raw);
    return rc;
}
