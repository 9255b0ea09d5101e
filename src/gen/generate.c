/*
 * generate.c - the generation loop outside the model: prefill the prompt (in chunks of the
 * package's max query length), then sample, stream and decode one token per call. Text goes
 * through the streaming detokenizer (whole UTF-8 characters only) and the stop-string matcher
 * (text that might begin a stop string is held back until it is known not to), so a stop string
 * split across tokens still stops and is never emitted. The last sampled token is not fed back
 * into the state (nothing would read its logits).
 */
#include "plan/model.h"
#include "stop.h"
#include "tok/tok.h"

#include <string.h>

slate_generate_params slate_generate_default_params(void) {
    slate_generate_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = 128;
    p.sampler = slate_sampler_default_params();
    return p;
}

const char *slate_finish_reason_str(slate_finish_reason r) {
    switch (r) {
    case SLATE_FINISH_NONE: return "none";
    case SLATE_FINISH_LENGTH: return "length";
    case SLATE_FINISH_EOS: return "eos";
    case SLATE_FINISH_STOP_STRING: return "stop";
    case SLATE_FINISH_CONTEXT_FULL: return "context_full";
    case SLATE_FINISH_CANCELLED: return "cancelled";
    case SLATE_FINISH_MEMORY_PRESSURE: return "memory_pressure";
    }
    return "?";
}

enum { PIECE_CAP = 4096 };

typedef struct emitter {
    slate__stop *stop;
    const slate_generate_params *p;
    char *buf; /* PIECE_CAP + stop max len */
    bool cancelled;
} emitter;

/* Passes text through the stop matcher and on to the callback; true if a stop string hit. */
static bool emit(emitter *e, const char *text, size_t len) {
    size_t n = 0;
    bool hit = slate__stop_feed(e->stop, text, len, e->buf, &n);
    if (n && e->p->on_piece && !e->p->on_piece(e->p->user, e->buf, n)) e->cancelled = true;
    return hit;
}

slate_status slate_generate(slate_state *st, const int32_t *prompt, int32_t n_prompt,
                            const slate_generate_params *p, slate_generate_result *res,
                            slate_error *err) {
    if (!st || !p || !res || (!prompt && n_prompt > 0) || n_prompt < 0)
        return slate__fail(err, SLATE_E_INVALID_ARG, "state, params and result must not be NULL; "
                           "prompt must hold n_prompt >= 0 ids");
    if (p->n_stop < 0 || (p->n_stop > 0 && !p->stop_strings) || p->n_stop_tokens < 0 ||
        (p->n_stop_tokens > 0 && !p->stop_tokens) || p->tokens_cap < 0 ||
        (p->tokens_cap > 0 && !p->tokens_out))
        return slate__fail(err, SLATE_E_INVALID_ARG, "stop strings/tokens: count and array "
                           "disagree");
    if (p->dump_logits_cap < 0 || (p->dump_logits_cap > 0) != (p->dump_logits != NULL))
        return slate__fail(err, SLATE_E_INVALID_ARG, "dump_logits and dump_logits_cap disagree "
                           "(cap %d): give both (the rows the buffer holds, >= 1) or neither",
                           (int)p->dump_logits_cap);
    if (p->text_before != SLATE_TEXT_BEFORE_AUTO && p->text_before != SLATE_TEXT_BEFORE_NONE &&
        p->text_before != SLATE_TEXT_BEFORE_SOME)
        return slate__fail(err, SLATE_E_INVALID_ARG, "text_before %d: expected AUTO (0), NONE (1) "
                           "or SOME (2)", (int)p->text_before);
    memset(res, 0, sizeof *res);
    const slate_model *m = st->model;
    const slate_tokenizer *tok = m->tok;
    int32_t n_vocab = m->prog.n_vocab, max_q = m->prog.max_query;
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= n_vocab)
            return slate__fail(err, SLATE_E_INVALID_ARG, "prompt token %d (at index %d) is "
                               "outside the vocabulary 0..%d; nothing was fed", prompt[i], i,
                               n_vocab - 1);
    /* Models often pad their vocabulary past the tokenizer's (Qwen: 151936 rows for 151669
     * tokens). Padding ids have no text, so sampling only considers the tokenizer's ids; they
     * are always the leading rows. */
    int32_t n_text = slate_tokenizer_n_vocab(tok);
    /* Held for the whole call: between two steps no other call (another thread, or on_piece
     * calling back) may change or free the state under the loop. */
    if (!slate__state_acquire(st))
        return slate__fail(err, SLATE_E_BUSY, "another call is running on this state");
    slate_sampler *smp = NULL;
    slate_detok *dt = NULL;
    emitter e = {0};
    e.p = p;
    /* A reset that memory pressure made while the state was idle is reported first (as any
     * call reports it), and a spilled state is read back before its logits are looked at. */
    slate_status s = slate__state_enter(st, true, err);
    if (s) goto done;
    if ((int64_t)slate_state_length(st) + n_prompt > slate_state_n_ctx(st)) {
        s = slate__fail(err, SLATE_E_CONTEXT_FULL, "prompt of %d tokens does not fit: %d of %d "
                        "positions are used", n_prompt, slate_state_length(st),
                        slate_state_n_ctx(st));
        goto done;
    }
    if (n_prompt == 0 && !slate_state_logits(st, NULL)) {
        s = slate__fail(err, SLATE_E_INVALID_ARG, "empty prompt and no logits in the state to "
                        "continue from");
        goto done;
    }
    s = slate_sampler_create(&p->sampler, n_text, &smp, err);
    if (!s) s = slate_detok_create(tok, &dt, err);
    /* Whether the output continues text (slate_text_before): then the detokenizer keeps the
     * first token's leading space. AUTO counts what the state held before this call as text. */
    bool text_before = p->text_before == SLATE_TEXT_BEFORE_SOME;
    if (p->text_before == SLATE_TEXT_BEFORE_AUTO) {
        text_before = slate_state_length(st) > 0;
        for (int32_t i = 0; i < n_prompt && !text_before; i++) {
            size_t len = 0;
            if (prompt[i] >= n_text) continue; /* a padding row: no text */
            slate__tok_piece_bytes(tok, prompt[i], false, &len);
            text_before = len > 0;
        }
    }
    if (!s && text_before) s = slate_detok_continue(dt, err);
    if (!s) s = slate__stop_create(p->stop_strings, p->n_stop, &e.stop, err);
    if (!s && !(e.buf = slate__malloc(PIECE_CAP + slate__stop_max_len(e.stop) + 8)))
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory");
    if (s) goto done;

    double t0 = slate__now_ms();
    for (int32_t i = 0; i < n_prompt; i += max_q) {
        int32_t n = n_prompt - i < max_q ? n_prompt - i : max_q;
        if ((s = slate__state_predict_held(st, prompt + i, n, NULL, err))) goto done;
    }
    for (int32_t i = 0; i < n_prompt; i++) slate_sampler_accept(smp, prompt[i]);
    res->n_prompt = n_prompt;
    double t_prefill = slate__now_ms();
    res->prefill_ms = t_prefill - t0;
    char piece[PIECE_CAP];
    if (p->n_predict == 0) res->finish = SLATE_FINISH_LENGTH; /* prefill only */
    while (p->n_predict != 0) {
        /* The last position's row: a caller's predict with all_logits (continued here with an
         * empty prompt) leaves one row per position of its call. */
        int32_t n_rows = 0;
        const float *logits = slate_state_logits(st, &n_rows);
        if (!logits || n_rows < 1) {
            s = SLATE__INTERNAL(err, "no logits to sample from");
            goto done;
        }
        logits += (size_t)(n_rows - 1) * (size_t)n_vocab;
        int32_t next;
        if ((s = slate_sampler_sample(smp, logits, n_text, &next, err))) goto done;
        if (p->tokens_out && res->n_generated < p->tokens_cap) p->tokens_out[res->n_generated] = next;
        if (p->dump_logits && res->n_generated < p->dump_logits_cap)
            memcpy(p->dump_logits + (size_t)res->n_generated * (size_t)n_vocab, logits,
                   (size_t)n_vocab * sizeof(float));
        res->n_generated++;
        if (res->n_generated == 1) res->ttft_ms = slate__now_ms() - t0;
        bool eog = !p->ignore_eos && slate_tokenizer_is_eog(tok, next);
        for (int32_t i = 0; i < m->n_stop_ids && !eog && !p->ignore_eos; i++)
            eog = m->stop_ids[i] == next;
        for (int32_t i = 0; i < p->n_stop_tokens && !eog; i++) eog = p->stop_tokens[i] == next;
        if (eog) {
            res->finish = SLATE_FINISH_EOS;
            break;
        }
        size_t len = 0;
        if ((s = slate_detok_push(dt, next, piece, sizeof piece, &len, err))) goto done;
        if (emit(&e, piece, len)) {
            res->finish = SLATE_FINISH_STOP_STRING;
            break;
        }
        if (e.cancelled) {
            res->finish = SLATE_FINISH_CANCELLED;
            break;
        }
        if (p->n_predict >= 0 && res->n_generated >= p->n_predict) {
            res->finish = SLATE_FINISH_LENGTH;
            break;
        }
        if (slate_state_length(st) >= slate_state_n_ctx(st)) {
            res->finish = SLATE_FINISH_CONTEXT_FULL;
            break;
        }
        if ((s = slate__state_predict_held(st, &next, 1, NULL, err))) goto done;
    }
    if (res->finish != SLATE_FINISH_STOP_STRING && res->finish != SLATE_FINISH_CANCELLED) {
        size_t len = 0, n = 0;
        if (slate_detok_flush(dt, piece, sizeof piece, &len, NULL) == SLATE_OK && len &&
            emit(&e, piece, len))
            res->finish = SLATE_FINISH_STOP_STRING;
        if (res->finish != SLATE_FINISH_STOP_STRING) {
            slate__stop_flush(e.stop, e.buf, &n);
            if (n && p->on_piece) p->on_piece(p->user, e.buf, n);
        }
    }
    res->decode_ms = slate__now_ms() - t_prefill - (res->ttft_ms - res->prefill_ms);
done:
    slate__state_release(st);
    slate__free(e.buf);
    slate__stop_free(e.stop);
    slate_detok_free(dt);
    slate_sampler_free(smp);
    return s;
}
