/*
 * eval.c - `slate eval MODEL.slate --ref REF.slate --text FILE [--ctx N] [--max-tokens N]
 * [-t N] [--json]`: how far MODEL (e.g. a quantized package) is from REF (e.g. the fp32 one).
 *
 * The text is tokenized with MODEL's tokenizer (BOS added when the vocabulary adds one); REF
 * must have the same vocabulary (every token's bytes, and the logits width), else the command
 * refuses. The tokens are cut into consecutive windows of --ctx tokens (default min(512, both
 * contexts)); each window starts from an empty state and is fed in chunks with every position's
 * logits. At every position that has a next token in its window:
 *   KL(p_ref || p_model) = sum_i p_ref(i) (log p_ref(i) - log p_model(i))   (nats)
 *   top-1 agreement      = argmax of both logits equal
 *   NLL of each          = -log p(next token); perplexity = exp(mean NLL)
 * Log-softmax is computed in double from the float logits, so a package against itself gives
 * KL exactly 0 and agreement 1. The CLI uses only slate.h.
 */
#define _POSIX_C_SOURCE 200809L /* fileno */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EVAL_CHUNK 128            /* rows per predict call: bounds the copied logits */
#define MAX_TEXT_BYTES (64u << 20)

typedef struct side {
    const char *path;
    slate_model *m;
    slate_state *st;
    slate_model_info info;
    const slate_tokenizer *tok;
} side;

static double log_sum_exp(const float *x, int32_t n) {
    float mx = x[0];
    for (int32_t i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Same vocabulary: sizes, special ids and every token's bytes. Prints the difference. */
static bool same_vocab(const side *a, const side *b) {
    int32_t na = slate_tokenizer_n_vocab(a->tok), nb = slate_tokenizer_n_vocab(b->tok);
    if (na != nb || a->info.n_vocab != b->info.n_vocab) {
        fprintf(stderr, "slate eval: the vocabularies differ: %s has %d tokens (%d logits), %s "
                        "has %d tokens (%d logits)\n", a->path, na, a->info.n_vocab, b->path, nb,
                b->info.n_vocab);
        return false;
    }
    if (slate_tokenizer_bos(a->tok) != slate_tokenizer_bos(b->tok) ||
        slate_tokenizer_eos(a->tok) != slate_tokenizer_eos(b->tok)) {
        fprintf(stderr, "slate eval: the vocabularies differ: bos/eos are %d/%d in %s, %d/%d in "
                        "%s\n", slate_tokenizer_bos(a->tok), slate_tokenizer_eos(a->tok), a->path,
                slate_tokenizer_bos(b->tok), slate_tokenizer_eos(b->tok), b->path);
        return false;
    }
    char pa[512], pb[512];
    for (int32_t id = 0; id < na; id++) {
        size_t la = 0, lb = 0;
        slate_status sa = slate_tokenizer_piece(a->tok, id, true, pa, sizeof pa, &la, NULL);
        slate_status sb = slate_tokenizer_piece(b->tok, id, true, pb, sizeof pb, &lb, NULL);
        if (sa != sb || la != lb || (sa == SLATE_OK && memcmp(pa, pb, la) != 0)) {
            fprintf(stderr, "slate eval: the vocabularies differ at token %d: '%.*s' in %s, "
                            "'%.*s' in %s\n", id, sa ? 0 : (int)(la < 64 ? la : 64), pa, a->path,
                    sb ? 0 : (int)(lb < 64 ? lb : 64), pb, b->path);
            return false;
        }
    }
    return true;
}

/* v printed with fmt, or null when it is not finite (JSON has no inf or nan). */
static void json_num(char *buf, size_t cap, const char *fmt, double v) {
    if (isfinite(v)) snprintf(buf, cap, fmt, v);
    else snprintf(buf, cap, "null");
}

static void json_str(const char *key, const char *v) {
    printf("\"%s\": \"", key);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\') printf("\\%c", *v);
        else if ((unsigned char)*v < 0x20) printf("\\u%04x", *v);
        else putchar(*v);
    }
    printf("\", ");
}

/* The text file, at most MAX_TEXT_BYTES; NULL with the reason printed. A directory is named as
 * such (fopen opens one; the read then fails with EISDIR). */
static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "slate eval: cannot open --text '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "slate eval: --text '%s' is a directory, not a text file\n", path);
        fclose(f);
        return NULL;
    }
    char *buf = malloc(MAX_TEXT_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_TEXT_BYTES + 1, f) : 0;
    int e = errno;
    if (!buf)
        fprintf(stderr, "slate eval: out of memory for --text '%s'\n", path);
    else if (ferror(f))
        fprintf(stderr, "slate eval: cannot read --text '%s': %s\n", path, strerror(e));
    else if (n > MAX_TEXT_BYTES)
        fprintf(stderr, "slate eval: --text '%s' is over %u bytes (64 MiB), the most eval "
                        "reads\n", path, MAX_TEXT_BYTES);
    bool bad = !buf || ferror(f) || n > MAX_TEXT_BYTES;
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int slate_cli_eval(int argc, char **argv) {
    side s_m = {0}, s_r = {0};
    const char *text_path = NULL;
    slate_model_params mp = slate_model_default_params();
    long long ctx_arg = 0, max_tokens = 0;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (strcmp(a, "--ref") == 0 && v) {
            s_r.path = v;
            i++;
        } else if (strcmp(a, "--text") == 0 && v) {
            text_path = v;
            i++;
        } else if (strcmp(a, "--ctx") == 0 && v) {
            if (!cli_parse_int(v, 2, 1 << 24, &ctx_arg)) {
                fprintf(stderr, "slate eval: --ctx must be an integer in 2..%d\n", 1 << 24);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--max-tokens") == 0 && v) {
            if (!cli_parse_int(v, 2, 1LL << 40, &max_tokens)) {
                fprintf(stderr, "slate eval: --max-tokens must be an integer in 2..%lld, not "
                                "'%s'\n", 1LL << 40, v);
                return 2;
            }
            i++;
        } else if ((strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) && v) {
            if (!cli_parse_int(v, 1, 1024, &n)) {
                fprintf(stderr, "slate eval: %s must be an integer in 1..1024\n", a);
                return 2;
            }
            mp.n_threads = (int32_t)n;
            i++;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (a[0] != '-' && !s_m.path) {
            s_m.path = a;
        } else {
            return cli_bad_option("eval", a);
        }
    }
    if (!s_m.path || !s_r.path || !text_path) return cli_usage("eval");
    int rc = 1;
    slate_error err;
    slate_status s = SLATE_OK;
    char *text = NULL;
    int32_t *ids = NULL;
    float *ref_rows = NULL;
    side *sides[2] = {&s_m, &s_r};
    for (int k = 0; k < 2; k++) {
        side *sd = sides[k];
        if ((s = slate_model_open(sd->path, &mp, &sd->m, &err))) {
            fprintf(stderr, "slate eval: cannot open '%s':\n", sd->path);
            goto fail;
        }
        slate_model_get_info(sd->m, &sd->info);
        sd->tok = slate_model_tokenizer(sd->m);
    }
    if (!same_vocab(&s_m, &s_r)) goto out;
    /* The window: a position is scored against the next token of its window, so a window of
     * fewer than 2 tokens scores nothing (a package converted with --context 1). */
    int32_t ctx = s_m.info.n_ctx < s_r.info.n_ctx ? s_m.info.n_ctx : s_r.info.n_ctx;
    if (ctx_arg) {
        if (ctx_arg > ctx) {
            fprintf(stderr, "slate eval: --ctx %lld exceeds the smaller context of the two "
                            "packages (%d)\n", ctx_arg, ctx);
            goto out;
        }
        ctx = (int32_t)ctx_arg;
    } else if (ctx < 2) {
        fprintf(stderr, "slate eval: the smaller context of the two packages is %d ('%s': %d, "
                        "'%s': %d); eval needs windows of at least 2 tokens\n", ctx, s_m.path,
                s_m.info.n_ctx, s_r.path, s_r.info.n_ctx);
        goto out;
    } else if (ctx > 512) {
        ctx = 512;
    }
    size_t text_len = 0;
    if (!(text = read_text(text_path, &text_len))) goto out;
    size_t n_ids = 0;
    s = slate_tokenizer_encode(s_m.tok, text, text_len, SLATE_ENCODE_ADD_BOS, NULL, 0, &n_ids,
                               &err);
    if (s != SLATE_OK && s != SLATE_E_BUFFER_TOO_SMALL) goto fail;
    ids = malloc((n_ids ? n_ids : 1) * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "slate eval: out of memory for %zu tokens\n", n_ids);
        goto out;
    }
    if ((s = slate_tokenizer_encode(s_m.tok, text, text_len, SLATE_ENCODE_ADD_BOS, ids, n_ids,
                                    &n_ids, &err)))
        goto fail;
    if (max_tokens && n_ids > (size_t)max_tokens) n_ids = (size_t)max_tokens;
    if (n_ids < 2) {
        fprintf(stderr, "slate eval: '%s' gives %zu token(s); at least 2 are needed\n",
                text_path, n_ids);
        goto out;
    }
    int32_t chunk = EVAL_CHUNK;
    if (chunk > s_m.info.max_query) chunk = s_m.info.max_query;
    if (chunk > s_r.info.max_query) chunk = s_r.info.max_query;
    int32_t V = s_m.info.n_vocab;
    slate_state_params sp = slate_state_default_params();
    sp.n_ctx = ctx;
    for (int k = 0; k < 2; k++)
        if ((s = slate_state_create(sides[k]->m, &sp, &sides[k]->st, &err))) goto fail;
    ref_rows = malloc((size_t)chunk * (size_t)V * sizeof *ref_rows);
    if (!ref_rows) {
        fprintf(stderr, "slate eval: out of memory for %d rows of %d logits\n", chunk, V);
        goto out;
    }
    slate_predict_params pp = slate_predict_default_params();
    pp.all_logits = true;
    double kl_sum = 0, kl_max = 0, nll_m = 0, nll_r = 0;
    long long n_pos = 0, n_agree = 0, n_windows = 0;
    for (size_t w0 = 0; w0 + 1 < n_ids; w0 += (size_t)ctx) {
        int32_t wlen = n_ids - w0 < (size_t)ctx ? (int32_t)(n_ids - w0) : ctx;
        if (wlen < 2) break;
        n_windows++;
        const int32_t *win = ids + w0;
        slate_state_reset(s_m.st);
        slate_state_reset(s_r.st);
        for (int32_t c0 = 0; c0 < wlen; c0 += chunk) {
            int32_t k = wlen - c0 < chunk ? wlen - c0 : chunk;
            if ((s = slate_state_predict(s_r.st, win + c0, k, &pp, &err))) goto fail;
            memcpy(ref_rows, slate_state_logits(s_r.st, NULL), (size_t)k * (size_t)V * sizeof *ref_rows);
            if ((s = slate_state_predict(s_m.st, win + c0, k, &pp, &err))) goto fail;
            const float *mrows = slate_state_logits(s_m.st, NULL);
            for (int32_t r = 0; r < k && c0 + r + 1 < wlen; r++) {
                const float *lr = ref_rows + (size_t)r * V, *lm = mrows + (size_t)r * V;
                double zr = log_sum_exp(lr, V), zm = log_sum_exp(lm, V), kl = 0;
                /* A NaN or infinite logit makes every figure meaningless (and NaN is not JSON):
                 * say where, instead of printing nan. */
                if (!isfinite(zr) || !isfinite(zm)) {
                    fprintf(stderr, "slate eval: %s gives non-finite logits at token %zu of the "
                                    "text\n", isfinite(zr) ? s_m.path : s_r.path,
                            w0 + (size_t)c0 + (size_t)r);
                    goto out;
                }
                for (int32_t i = 0; i < V; i++) {
                    double a = (double)lr[i] - zr, b = (double)lm[i] - zm;
                    kl += exp(a) * (a - b);
                }
                int32_t next = win[c0 + r + 1];
                nll_r -= (double)lr[next] - zr;
                nll_m -= (double)lm[next] - zm;
                kl_sum += kl;
                if (kl > kl_max) kl_max = kl;
                n_agree += argmax(lr, V) == argmax(lm, V);
                n_pos++;
            }
        }
    }
    if (n_pos == 0) { /* cannot happen with >= 2 tokens and windows >= 2; never print NaN */
        fprintf(stderr, "slate eval: no position was scored ('%s' gives %zu tokens, windows of "
                        "%d)\n", text_path, n_ids, ctx);
        goto out;
    }
    double kl_mean = kl_sum / (double)n_pos, top1 = (double)n_agree / (double)n_pos;
    /* The cache dtype of each side (the package's default; it changes the logits too). */
    const char *kv[2] = {"-", "-"};
    for (int k = 0; k < 2; k++) {
        slate_tensor_info ti;
        if (slate_state_n_tensors(sides[k]->st) > 0 &&
            slate_state_tensor_info(sides[k]->st, 0, &ti) == SLATE_OK)
            kv[k] = slate_dtype_name(ti.dtype);
    }
    double ppl_m = exp(nll_m / (double)n_pos), ppl_r = exp(nll_r / (double)n_pos);
    if (json) {
        /* A perplexity (or KL) past double's range is infinite, which JSON cannot say: null,
         * and a note on stderr. */
        char f_klm[32], f_klx[32], f_pm[32], f_pr[32];
        json_num(f_klm, sizeof f_klm, "%.9g", kl_mean);
        json_num(f_klx, sizeof f_klx, "%.9g", kl_max);
        json_num(f_pm, sizeof f_pm, "%.6f", ppl_m);
        json_num(f_pr, sizeof f_pr, "%.6f", ppl_r);
        if (!isfinite(kl_mean) || !isfinite(kl_max) || !isfinite(ppl_m) || !isfinite(ppl_r))
            fprintf(stderr, "slate eval: a figure is infinite (past double's range); --json "
                            "gives it as null\n");
        printf("{");
        json_str("model", s_m.path);
        json_str("ref", s_r.path);
        json_str("text", text_path);
        printf("\"tokens\": %zu, \"windows\": %lld, \"ctx\": %d, \"positions\": %lld, "
               "\"kl_mean\": %s, \"kl_max\": %s, \"top1_agreement\": %.6f, "
               "\"ppl_model\": %s, \"ppl_ref\": %s, \"kv_dtype_model\": \"%s\", "
               "\"kv_dtype_ref\": \"%s\"}\n", n_ids, n_windows, ctx, n_pos, f_klm, f_klx,
               top1, f_pm, f_pr, kv[0], kv[1]);
    } else {
        printf("model      %s (cache %s)\nreference  %s (cache %s)\n", s_m.path, kv[0], s_r.path,
               kv[1]);
        printf("text       %s: %zu tokens in %lld window%s of at most %d, %lld positions "
               "scored\n", text_path, n_ids, n_windows, n_windows == 1 ? "" : "s", ctx, n_pos);
        printf("KL         mean %.6g nats, max %.6g  (KL(p_ref || p_model) per position)\n",
               kl_mean, kl_max);
        printf("top-1      %.4f agreement\n", top1);
        printf("perplexity model %.4f, reference %.4f\n", ppl_m, ppl_r);
    }
    rc = 0;
    goto out;
fail:
    cli_error("eval", s, &err);
out:
    free(ref_rows);
    free(ids);
    free(text);
    for (int k = 0; k < 2; k++) {
        slate_state_free(sides[k]->st);
        slate_model_close(sides[k]->m);
    }
    return rc;
}
