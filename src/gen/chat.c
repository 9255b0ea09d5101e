/*
 * chat.c - slate_chat_render and slate_chat_tokenize: the public face of the chat templates
 * (src/gen/template.c) for callers that keep their own conversation, such as the HTTP server.
 * render gives the template's text; tokenize gives the ids, with the template's special tokens
 * parsed and the messages' text kept as text (as sessions do), so a message cannot forge a turn.
 */
#include "gen/template.h"
#include "plan/model.h"
#include "tok/tok.h"

#include <string.h>

/* Renders msgs into text (and the message spans into spans). */
static slate_status render(const slate_model *model, const char *template_name,
                           const slate_chat_message *msgs, int32_t n, bool add_generation_prompt,
                           slate__buf *text, slate__buf *spans, slate_error *err) {
    slate__tmpl t;
    slate_status s = slate__tmpl_choose(model->chat_template, template_name, &t, err);
    if (s) return s;
    slate__chat_msg *cm = slate__calloc((size_t)(n ? n : 1), sizeof *cm);
    char *bos = NULL, *eos = NULL;
    if (!cm) return slate__fail(err, SLATE_E_NOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        if ((unsigned)msgs[i].role > SLATE_ROLE_ASSISTANT || (!msgs[i].text && msgs[i].len)) {
            s = slate__fail(err, SLATE_E_INVALID_ARG, "message %d: role %d or text invalid", i,
                            (int)msgs[i].role);
            goto done;
        }
        cm[i].role = msgs[i].role;
        cm[i].text = msgs[i].text ? msgs[i].text : "";
        cm[i].len = msgs[i].len;
    }
    if ((s = slate__tmpl_token_text(model->tok, slate_tokenizer_bos(model->tok), &bos, err)) ||
        (s = slate__tmpl_token_text(model->tok, slate_tokenizer_eos(model->tok), &eos, err)) ||
        (s = slate__tmpl_render_spans(t, cm, n, bos, eos, add_generation_prompt, text, spans,
                                      err)))
        goto done;
    if (text->failed || (spans && spans->failed))
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory rendering the chat");
done:
    slate__free(bos);
    slate__free(eos);
    slate__free(cm);
    return s;
}

static slate_status check_args(const slate_model *model, const slate_chat_message *msgs,
                               int32_t n, const void *buf, size_t cap, const size_t *len_out,
                               slate_error *err) {
    if (!model || !len_out || (!msgs && n > 0) || n < 0 || (!buf && cap))
        return slate__fail(err, SLATE_E_INVALID_ARG, "model, the output count and msgs (for "
                           "n > 0) must not be NULL; n >= 0; a NULL buffer needs cap 0");
    return SLATE_OK;
}

slate_status slate_chat_render(const slate_model *model, const char *template_name,
                               const slate_chat_message *msgs, int32_t n,
                               bool add_generation_prompt, char *buf, size_t cap,
                               size_t *len_out, slate_error *err) {
    slate_status s = check_args(model, msgs, n, buf, cap, len_out, err);
    if (s) return s;
    slate__buf text = {0};
    if ((s = render(model, template_name, msgs, n, add_generation_prompt, &text, NULL, err)))
        goto done;
    *len_out = text.len;
    if (cap < text.len) {
        s = slate__fail(err, SLATE_E_BUFFER_TOO_SMALL, "rendered chat is %zu bytes, buffer has "
                        "%zu", text.len, cap);
        goto done;
    }
    if (text.len) memcpy(buf, text.data, text.len);
done:
    slate__buf_free(&text);
    return s;
}

slate_status slate_chat_tokenize(const slate_model *model, const char *template_name,
                                 const slate_chat_message *msgs, int32_t n,
                                 bool add_generation_prompt, int32_t *ids, size_t cap,
                                 size_t *n_out, slate_error *err) {
    slate_status s = check_args(model, msgs, n, ids, cap, n_out, err);
    if (s) return s;
    *n_out = 0;
    slate__buf text = {0}, spans = {0};
    if (!(s = render(model, template_name, msgs, n, add_generation_prompt, &text, &spans, err)))
        s = slate__tok_encode_spans(model->tok, text.data ? (const char *)text.data : "",
                                    text.len, SLATE_ENCODE_PARSE_SPECIAL,
                                    (const size_t *)spans.data,
                                    spans.len / (2 * sizeof(size_t)), ids, cap, n_out, err);
    slate__buf_free(&text);
    slate__buf_free(&spans);
    return s;
}
