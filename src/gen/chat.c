/*
 * chat.c - slate_chat_render: the public face of the chat templates (src/gen/template.c) for
 * callers that keep their own conversation, such as the HTTP server: messages in, the
 * template's text out, ready for slate_tokenizer_encode with SLATE_ENCODE_PARSE_SPECIAL.
 */
#include "gen/template.h"
#include "plan/model.h"

#include <string.h>

slate_status slate_chat_render(const slate_model *model, const char *template_name,
                               const slate_chat_message *msgs, int32_t n,
                               bool add_generation_prompt, char *buf, size_t cap,
                               size_t *len_out, slate_error *err) {
    if (!model || !len_out || (!msgs && n > 0) || n < 0 || (!buf && cap))
        return slate__fail(err, SLATE_E_INVALID_ARG, "model, len_out and msgs (for n > 0) must "
                           "not be NULL; n >= 0");
    slate__tmpl t;
    slate_status s = slate__tmpl_choose(model->chat_template, template_name, &t, err);
    if (s) return s;
    slate__chat_msg *cm = slate__calloc((size_t)(n ? n : 1), sizeof *cm);
    char *bos = NULL, *eos = NULL;
    slate__buf text = {0};
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
        (s = slate__tmpl_render(t, cm, n, bos, eos, add_generation_prompt, &text, err)))
        goto done;
    if (text.failed) {
        s = slate__fail(err, SLATE_E_NOMEM, "out of memory rendering the chat");
        goto done;
    }
    *len_out = text.len;
    if (cap < text.len) {
        s = slate__fail(err, SLATE_E_BUFFER_TOO_SMALL, "rendered chat is %zu bytes, buffer has "
                        "%zu", text.len, cap);
        goto done;
    }
    if (text.len) memcpy(buf, text.data, text.len);
done:
    slate__buf_free(&text);
    slate__free(bos);
    slate__free(eos);
    slate__free(cm);
    return s;
}
