/* test_tok_vectors.c - llama.cpp's tokenizer test vectors (shared/models/tokenizers/vectors,
 * llama.cpp commit 81ff7abe, see the README there): every input must encode to exactly the
 * recorded ids (no BOS, no special-token parsing) and decode back to the input, for every
 * vocabulary we can load: llama2.c tokenizer.bin and GGUF for Llama 2 SPM, GGUF for Phi-3,
 * GPT-2 and Falcon, tokenizer.json for Llama 3 and Qwen3, encoder.json + vocab.bpe for GPT-2.
 * The same fixtures also run on 4 threads sharing one tokenizer. Failures print the case. */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/gguf.h"
#include "tok/tok.h"

#define MAX_CASES 64

typedef struct vcase {
    char *text;
    size_t len;
    int32_t *ids;
    size_t n_ids;
} vcase;

typedef struct vset {
    char *inp, *out; /* file contents */
    vcase c[MAX_CASES];
    int n;
} vset;

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    b[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return b;
}

static void vset_free(vset *v) {
    for (int i = 0; i < v->n; i++) free(v->c[i].ids);
    free(v->inp);
    free(v->out);
}

/* Loads X.inp / X.out; false if the files are missing. */
static bool vset_load(vset *v, const char *name) {
    memset(v, 0, sizeof *v);
    char rel[256];
    size_t inp_len = 0;
    snprintf(rel, sizeof rel, "tokenizers/vectors/%s.inp", name);
    v->inp = slurp(tu_model_path(rel), &inp_len);
    snprintf(rel, sizeof rel, "tokenizers/vectors/%s.out", name);
    v->out = slurp(tu_model_path(rel), NULL);
    if (!v->inp || !v->out) {
        vset_free(v);
        return false;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *p = v->inp, *end = v->inp + inp_len;
    while (p < end && v->n < MAX_CASES) {
        char *s = strstr(p, sep);
        if (!s) break;
        v->c[v->n].text = p;
        v->c[v->n].len = (size_t)(s - p);
        v->n++;
        p = s + sizeof sep - 1;
    }
    char *line = v->out;
    for (int i = 0; i < v->n; i++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        v->c[i].ids = malloc(1024 * sizeof(int32_t));
        char *q = line;
        for (;;) {
            char *e;
            long x = strtol(q, &e, 10);
            if (e == q) break;
            v->c[i].ids[v->c[i].n_ids++] = (int32_t)x;
            q = e;
        }
        line = nl ? nl + 1 : line + strlen(line);
    }
    return true;
}

/* Runs every case; returns the number that failed (printing them when verbose). */
static int run_cases(const slate_tokenizer *tok, const vset *v, bool verbose) {
    int failed = 0;
    int32_t ids[1024];
    char back[4096];
    for (int i = 0; i < v->n; i++) {
        size_t n = 0, blen = 0;
        slate_error err;
        slate_status st =
            slate_tokenizer_encode(tok, v->c[i].text, v->c[i].len, 0, ids, 1024, &n, &err);
        bool ok =
            st == SLATE_OK && n == v->c[i].n_ids && memcmp(ids, v->c[i].ids, n * sizeof *ids) == 0;
        if (!ok && verbose) {
            fprintf(stderr, "  case %d FAILED: \"%.*s\"\n    expected:", i, (int)v->c[i].len,
                    v->c[i].text);
            for (size_t k = 0; k < v->c[i].n_ids; k++) fprintf(stderr, " %d", v->c[i].ids[k]);
            fprintf(stderr, "\n    got:     ");
            for (size_t k = 0; k < n && k < 1024; k++) fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, " (status %s)\n", slate_status_name(st));
        }
        if (ok) {
            st = slate_tokenizer_decode(tok, ids, n, false, back, sizeof back, &blen, &err);
            if (st != SLATE_OK || blen != v->c[i].len || memcmp(back, v->c[i].text, blen) != 0) {
                ok = false;
                if (verbose)
                    fprintf(stderr, "  case %d: decode(encode(x)) != x: \"%.*s\" -> \"%.*s\"\n", i,
                            (int)v->c[i].len, v->c[i].text, (int)blen, back);
            }
        }
        if (!ok) failed++;
    }
    return failed;
}

static void check_vectors(const char *what, const slate_tokenizer *tok, const char *vname) {
    vset v;
    assert_true(vset_load(&v, vname));
    int failed = run_cases(tok, &v, true);
    fprintf(stderr, "[vectors] %-48s %d/%d passed\n", what, v.n - failed, v.n);
    assert_int_equal(v.n, 46);
    assert_int_equal(failed, 0);
    vset_free(&v);
}

static slate_tokenizer *open_or_skip(const char *rel) {
    const char *path = tu_model_path(rel);
    if (!tu_exists(path)) {
        fprintf(stderr, "missing %s: skipped\n", path);
        return NULL;
    }
    slate_tokenizer *tok = NULL;
    slate_error err;
    slate_status st = slate_tokenizer_open(path, &tok, &err);
    if (st != SLATE_OK) fprintf(stderr, "open %s: %s\n", path, err.message);
    assert_int_equal(st, SLATE_OK);
    return tok;
}

#define VECTOR_TEST(fn, rel, vname)                                                                \
    static void fn(void **st) {                                                                    \
        (void)st;                                                                                  \
        long long live = slate__alloc_live_bytes();                                                \
        slate_tokenizer *tok = open_or_skip(rel);                                                  \
        if (!tok) skip();                                                                          \
        check_vectors(rel, tok, vname);                                                            \
        slate_tokenizer_free(tok);                                                                 \
        assert_int_equal(slate__alloc_live_bytes(), live);                                         \
    }

VECTOR_TEST(llama2c_tokenizer_bin_matches_llama_spm_vectors, "llama2c-vocab/tokenizer.bin",
            "ggml-vocab-llama-spm.gguf")
VECTOR_TEST(gguf_llama_spm_matches_its_vectors, "tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf",
            "ggml-vocab-llama-spm.gguf")
VECTOR_TEST(gguf_phi3_matches_its_vectors, "tokenizers/gguf-vocab/ggml-vocab-phi-3.gguf",
            "ggml-vocab-phi-3.gguf")
VECTOR_TEST(gguf_gpt2_matches_its_vectors, "tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf",
            "ggml-vocab-gpt-2.gguf")
VECTOR_TEST(gguf_falcon_matches_its_vectors, "tokenizers/gguf-vocab/ggml-vocab-falcon.gguf",
            "ggml-vocab-falcon.gguf")
VECTOR_TEST(llama3_tokenizer_json_matches_llama_bpe_vectors, "tokenizers/llama3/tokenizer.json",
            "ggml-vocab-llama-bpe.gguf")
VECTOR_TEST(qwen3_tokenizer_json_matches_qwen2_vectors, "tokenizers/qwen3/tokenizer.json",
            "ggml-vocab-qwen2.gguf")

static void gpt2_encoder_json_and_vocab_bpe_match_gpt2_vectors(void **st) {
    (void)st;
    char enc[1024], bpe[1024];
    snprintf(enc, sizeof enc, "%s", tu_model_path("tokenizers/gpt2/encoder.json"));
    snprintf(bpe, sizeof bpe, "%s", tu_model_path("tokenizers/gpt2/vocab.bpe"));
    if (!tu_exists(enc) || !tu_exists(bpe)) skip();
    long long live = slate__alloc_live_bytes();
    slate_tokenizer *tok = NULL;
    slate_error err;
    slate_status s = slate__tok_load_gpt2(enc, bpe, &tok, &err);
    if (s != SLATE_OK) fprintf(stderr, "%s\n", err.message);
    assert_int_equal(s, SLATE_OK);
    check_vectors("tokenizers/gpt2/{encoder.json,vocab.bpe}", tok, "ggml-vocab-gpt-2.gguf");
    assert_int_equal(slate_tokenizer_eos(tok), 50256);
    slate_tokenizer_free(tok);
    assert_int_equal(slate__alloc_live_bytes(), live);
}

/* ---- the same fixtures on several threads sharing one tokenizer ------------------------------ */

typedef struct job {
    const slate_tokenizer *tok;
    const vset *v;
    int rounds;
    int failed;
} job;

static void *worker(void *arg) {
    job *j = arg;
    for (int r = 0; r < j->rounds; r++) j->failed += run_cases(j->tok, j->v, false);
    return NULL;
}

static void run_threaded(const char *rel, const char *vname) {
    slate_tokenizer *tok = open_or_skip(rel);
    if (!tok) return;
    vset v;
    assert_true(vset_load(&v, vname));
    enum { N_THREADS = 4 };
    pthread_t th[N_THREADS];
    job jobs[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        jobs[i] = (job){tok, &v, 20, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    }
    int failed = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        failed += jobs[i].failed;
    }
    fprintf(stderr, "[threads] %s: %d threads x 20 rounds x %d cases, %d failures\n", rel,
            N_THREADS, v.n, failed);
    assert_int_equal(failed, 0);
    vset_free(&v);
    slate_tokenizer_free(tok);
}

static void vectors_pass_on_four_threads_sharing_one_tokenizer(void **st) {
    (void)st;
    long long live = slate__alloc_live_bytes();
    run_threaded("llama2c-vocab/tokenizer.bin", "ggml-vocab-llama-spm.gguf");
    run_threaded("tokenizers/qwen3/tokenizer.json", "ggml-vocab-qwen2.gguf");
    run_threaded("tokenizers/gguf-vocab/ggml-vocab-falcon.gguf", "ggml-vocab-falcon.gguf");
    assert_int_equal(slate__alloc_live_bytes(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama2c_tokenizer_bin_matches_llama_spm_vectors),
        cmocka_unit_test(gguf_llama_spm_matches_its_vectors),
        cmocka_unit_test(gguf_phi3_matches_its_vectors),
        cmocka_unit_test(gguf_gpt2_matches_its_vectors),
        cmocka_unit_test(gpt2_encoder_json_and_vocab_bpe_match_gpt2_vectors),
        cmocka_unit_test(gguf_falcon_matches_its_vectors),
        cmocka_unit_test(llama3_tokenizer_json_matches_llama_bpe_vectors),
        cmocka_unit_test(qwen3_tokenizer_json_matches_qwen2_vectors),
        cmocka_unit_test(vectors_pass_on_four_threads_sharing_one_tokenizer),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
