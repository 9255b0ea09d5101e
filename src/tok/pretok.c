/*
 * pretok.c - the byte-level BPE pre-tokenizer: split text into pieces with a sequence of
 * regexes before any merge happens (HF tokenizers "Split" with behaviour "Isolated"; llama.cpp's
 * unicode_regex_split). Each regex runs over each piece of the previous one as its own subject
 * (lookaheads do not see past the piece); the matches and the gaps between them both become
 * pieces, in order, so the pieces always tile the input exactly.
 *
 * Regexes are PCRE2 with PCRE2_UTF | PCRE2_UCP (\p{L}, \s and friends are Unicode-aware) and
 * PCRE2_MATCH_INVALID_UTF: invalid UTF-8 in the input never matches anything, so each run of
 * invalid bytes ends up in a gap piece of its own and is encoded byte by byte. JIT-compiled when
 * the platform has a JIT; a match that hits the JIT stack limit is retried by the interpreter.
 * PCRE2's memory goes through slate__malloc (a general context), so it is counted like ours.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tok/tok.h"

#include <pcre2.h>
#include <string.h>

static void *pcre_malloc(PCRE2_SIZE size, void *data) {
    (void)data;
    return slate__malloc(size);
}
static void pcre_free(void *p, void *data) {
    (void)data;
    slate__free(p);
}

slate_status slate__tok_pretok_compile(slate_tokenizer *tok, const char *const *src, int32_t n,
                                       slate_error *err) {
    if (n < 1 || n > SLATE__TOK_MAX_PRE)
        return slate__fail(err, SLATE_E_FORMAT, "%d pre-tokenizer regexes: expected 1..%d", (int)n,
                           SLATE__TOK_MAX_PRE);
    pcre2_general_context *gctx = pcre2_general_context_create(pcre_malloc, pcre_free, NULL);
    if (!gctx) return slate__fail(err, SLATE_E_NOMEM, "out of memory for the regex context");
    tok->pcre_gctx = gctx;
    tok->pre_src = slate__calloc((size_t)n, sizeof *tok->pre_src);
    tok->pre_code = slate__calloc((size_t)n, sizeof *tok->pre_code);
    if (!tok->pre_src || !tok->pre_code)
        return slate__fail(err, SLATE_E_NOMEM, "out of memory for %d regexes", (int)n);
    tok->n_pre = n;
    pcre2_compile_context *cctx = pcre2_compile_context_create(gctx);
    if (!cctx) return slate__fail(err, SLATE_E_NOMEM, "out of memory for a regex compile context");
    slate_status st = SLATE_OK;
    for (int32_t i = 0; i < n && st == SLATE_OK; i++) {
        if (!src[i]) {
            st = slate__fail(err, SLATE_E_FORMAT, "pre-tokenizer regex %d is missing", (int)i);
            break;
        }
        size_t len = strlen(src[i]);
        if (len == 0 || len > SLATE__TOK_MAX_REGEX_BYTES) {
            st = slate__fail(err, SLATE_E_FORMAT,
                             "pre-tokenizer regex %d is %zu bytes: expected 1..%d", (int)i, len,
                             SLATE__TOK_MAX_REGEX_BYTES);
            break;
        }
        tok->pre_src[i] = slate__strndup(src[i], len);
        if (!tok->pre_src[i]) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory for regex %d", (int)i);
            break;
        }
        int ecode = 0;
        PCRE2_SIZE eoff = 0;
        pcre2_code *code =
            pcre2_compile((PCRE2_SPTR)src[i], len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                          &ecode, &eoff, cctx);
        if (!code) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ecode, msg, sizeof msg);
            bool oom = ecode == PCRE2_ERROR_HEAP_FAILED || ecode == PCRE2_ERROR_NOMEMORY ||
                       ecode == PCRE2_ERROR_HEAPLIMIT;
            st = slate__fail(err, oom ? SLATE_E_NOMEM : SLATE_E_FORMAT,
                             "pre-tokenizer regex %d ('%.80s'): %s at offset %zu", (int)i, src[i],
                             (const char *)msg, (size_t)eoff);
            break;
        }
        tok->pre_code[i] = code;
        /* No JIT (or no memory for it) only makes matching slower: ignore the result. */
        (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    }
    pcre2_compile_context_free(cctx);
    return st;
}

void slate__tok_pretok_free(slate_tokenizer *tok) {
    for (int32_t i = 0; i < tok->n_pre; i++) {
        if (tok->pre_code) pcre2_code_free((pcre2_code *)tok->pre_code[i]);
        if (tok->pre_src) slate__free(tok->pre_src[i]);
    }
    slate__free(tok->pre_code);
    slate__free(tok->pre_src);
    pcre2_general_context_free((pcre2_general_context *)tok->pcre_gctx);
    tok->pre_code = NULL;
    tok->pre_src = NULL;
    tok->pcre_gctx = NULL;
    tok->n_pre = 0;
}

typedef struct split_ctx {
    const slate_tokenizer *tok;
    pcre2_match_data *md[SLATE__TOK_MAX_PRE];
    slate__tok_pretok_fn fn;
    void *user;
    slate_error *err;
} split_ctx;

static slate_status split(split_ctx *c, int32_t stage, const char *s, size_t len);

static slate_status emit(split_ctx *c, int32_t stage, const char *s, size_t len) {
    if (len == 0) return SLATE_OK;
    if (stage + 1 == c->tok->n_pre) return c->fn(c->user, s, len);
    return split(c, stage + 1, s, len);
}

static slate_status split(split_ctx *c, int32_t stage, const char *s, size_t len) {
    const pcre2_code *code = c->tok->pre_code[stage];
    pcre2_match_data *md = c->md[stage];
    size_t start = 0, done = 0; /* search from start; s[0..done) has been emitted */
    while (start < len) {
        int rc = pcre2_match(code, (PCRE2_SPTR)s, len, start, 0, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(code, (PCRE2_SPTR)s, len, start, PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return slate__fail(c->err,
                               rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAPLIMIT
                                   ? SLATE_E_NOMEM
                                   : SLATE_E_INTERNAL,
                               "pre-tokenizer regex %d failed at byte %zu of a %zu-byte piece: %s",
                               (int)stage, start, len, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) {
            /* An empty match splits nothing: step over one character and search again. */
            start = ms + 1;
            while (start < len && ((uint8_t)s[start] & 0xC0) == 0x80) start++;
            continue;
        }
        slate_status st = emit(c, stage, s + done, ms - done); /* the gap before the match */
        if (st == SLATE_OK) st = emit(c, stage, s + ms, me - ms);
        if (st != SLATE_OK) return st;
        done = start = me;
    }
    return emit(c, stage, s + done, len - done);
}

slate_status slate__tok_pretok_split(const slate_tokenizer *tok, const char *text, size_t len,
                                     slate__tok_pretok_fn fn, void *ctx, slate_error *err) {
    split_ctx c = {.tok = tok, .fn = fn, .user = ctx, .err = err};
    slate_status st = SLATE_OK;
    for (int32_t i = 0; i < tok->n_pre; i++) {
        c.md[i] = pcre2_match_data_create_from_pattern((const pcre2_code *)tok->pre_code[i],
                                                       (pcre2_general_context *)tok->pcre_gctx);
        if (!c.md[i]) {
            st = slate__fail(err, SLATE_E_NOMEM, "out of memory for regex match data");
            break;
        }
    }
    if (st == SLATE_OK && len > 0) st = split(&c, 0, text, len);
    for (int32_t i = 0; i < tok->n_pre; i++) pcre2_match_data_free(c.md[i]);
    return st;
}
