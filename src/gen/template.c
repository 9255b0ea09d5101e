/*
 * template.c - chat-template families rendered in C (contract in template.h). Each renderer
 * reproduces one official Jinja template byte for byte for the conversations the session
 * builds (optional system message, then user/assistant alternating), with the whitespace
 * handling Hugging Face's apply_chat_template uses (jinja2 trim_blocks + lstrip_blocks). The
 * source of each family is named beside its renderer; tests/unit/test_template.c holds the
 * expected strings, which were checked by rendering those sources with jinja2 3.1.6 (except
 * mistral-v1's, derived by hand from its source; the conversation with a system message equals
 * llama.cpp's test-chat-template expectation for the same template and messages, phi3-v1's,
 * derived by hand from the template in llama.cpp's phi-3 vocabulary file, and phi4-mini's,
 * derived by hand from microsoft/Phi-4-mini-instruct's template).
 *
 * Detection looks for markers no other family uses. Templates with markers but a different
 * layout (Mistral v0.3 "[INST]" without the spaces, ChatGLM "<|user|>" without an end token)
 * are refused rather than rendered in a family they do not follow.
 *
 * Deliberate differences from the sources, all where a source cannot express a conversation
 * the session allows:
 *  - mistral (Mistral-7B-Instruct-v0.1/v0.2) raises on a system message; it is put in front of
 *    the first user message followed by "\n\n", as mistralai's later template for the same
 *    model does.
 *  - Jinja's trim / Python's strip() remove Unicode whitespace; here only ASCII whitespace
 *    (space, \t, \n, \v, \f, \r) is trimmed.
 *  - llama2, mistral, mistral-v1 and gemma put the system message inside the first user
 *    message, so a prompt (generation prompt requested) of a system message alone is refused:
 *    the sources render it as nothing (llama2) or leave the system text out.
 *  - phi3-v1 (Phi-3's first template) drops system messages; a non-empty one is refused.
 *  - llama31: date_string is the template's own default "26 Jul 2024"; Llama 3.2 templates call
 *    strftime_now() for today's date, which would make a rendering (and every cached prefix)
 *    change at midnight.
 */
#include "gen/template.h"

#include <string.h>

static const char *const NAMES[SLATE__TMPL_COUNT] = {
    [SLATE__TMPL_NONE] = "?",         [SLATE__TMPL_CHATML] = "chatml",
    [SLATE__TMPL_QWEN3] = "qwen3",    [SLATE__TMPL_LLAMA3] = "llama3",
    [SLATE__TMPL_LLAMA31] = "llama31", [SLATE__TMPL_LLAMA2] = "llama2",
    [SLATE__TMPL_MISTRAL] = "mistral", [SLATE__TMPL_GEMMA] = "gemma",
    [SLATE__TMPL_PHI3] = "phi3",      [SLATE__TMPL_ZEPHYR] = "zephyr",
    [SLATE__TMPL_MISTRAL_V1] = "mistral-v1", [SLATE__TMPL_PHI3_V1] = "phi3-v1",
    [SLATE__TMPL_PHI4_MINI] = "phi4-mini",
};

slate__tmpl slate__tmpl_by_name(const char *name) {
    if (!name) return SLATE__TMPL_NONE;
    for (int t = 1; t < SLATE__TMPL_COUNT; t++)
        if (strcmp(name, NAMES[t]) == 0) return (slate__tmpl)t;
    return SLATE__TMPL_NONE;
}

const char *slate__tmpl_name(slate__tmpl t) {
    return t > SLATE__TMPL_NONE && t < SLATE__TMPL_COUNT ? NAMES[t] : "?";
}

const char *slate__tmpl_names(void) {
    return "chatml, qwen3, llama3, llama31, llama2, mistral, gemma, phi3, zephyr, mistral-v1, "
           "phi3-v1, phi4-mini";
}

const char *slate__tmpl_end_of_turn(slate__tmpl t) {
    switch (t) {
    case SLATE__TMPL_CHATML:
    case SLATE__TMPL_QWEN3: return "<|im_end|>";
    case SLATE__TMPL_LLAMA3:
    case SLATE__TMPL_LLAMA31: return "<|eot_id|>";
    case SLATE__TMPL_GEMMA: return "<end_of_turn>";
    case SLATE__TMPL_PHI3:
    case SLATE__TMPL_PHI3_V1:
    case SLATE__TMPL_PHI4_MINI: return "<|end|>";
    default: return NULL;
    }
}

slate__tmpl slate__tmpl_detect(const char *j) {
    if (!j) return SLATE__TMPL_NONE;
    /* IBM Granite 3.x: '<|start_of_role|>' + role + '<|end_of_role|>' ... '<|end_of_text|>'
     * turns and, without a system message, a default one with today's date (strftime_now): no
     * family renders it, and whatever other family's marker its tool or document sections
     * might carry, it is refused first. */
    if (strstr(j, "<|start_of_role|>")) return SLATE__TMPL_NONE;
    if (strstr(j, "<|im_start|>")) {
        /* A generation prompt that opens the reasoning block itself (QwQ, Qwen3.5 and other
         * reasoning models: '<|im_start|>assistant\n<think>\n') is neither family's layout:
         * refused, so that the user names one knowingly. */
        if (strstr(j, "<|im_start|>assistant\\n<think>\\n'")) return SLATE__TMPL_NONE;
        /* SmolLM3's template writes a system block of its own (metadata with today's date from
         * strftime_now, a default system prompt, "Reasoning Mode: /think" or "/no_think" from
         * flags in the system message) and, in /no_think mode, "<think>\n\n</think>\n" after
         * the generation prompt: neither chatml nor qwen3, and its date changes every day (the
         * llama31 note above), so it is refused rather than rendered in a family it does not follow. */
        if (strstr(j, "/no_think") || strstr(j, "reasoning_mode")) return SLATE__TMPL_NONE;
        return strstr(j, "</think>") ? SLATE__TMPL_QWEN3 : SLATE__TMPL_CHATML;
    }
    if (strstr(j, "<|start_header_id|>"))
        return strstr(j, "Cutting Knowledge Date") ? SLATE__TMPL_LLAMA31 : SLATE__TMPL_LLAMA3;
    if (strstr(j, "<start_of_turn>")) return SLATE__TMPL_GEMMA;
    /* Phi-4-mini builds the role header from the role's name, with no newline after it or
     * after <|end|> (so there is no literal <|user|> in it). */
    if (strstr(j, "'<|' + message['role'] + '|>' + message['content'] + '<|end|>'"))
        return SLATE__TMPL_PHI4_MINI;
    if (strstr(j, "<|user|>")) {
        /* Phi-3's first template (April 2024, still in many GGUF files) starts with bos_token,
         * has no system role and writes the assistant header after every user message; the
         * later one (Phi-3.5, Phi-3 since mid-2024) has a system role and no BOS. */
        if (strstr(j, "<|end|>"))
            return strstr(j, "bos_token") && !strstr(j, "system") ? SLATE__TMPL_PHI3_V1
                                                                  : SLATE__TMPL_PHI3;
        if (strstr(j, "eos_token") || strstr(j, "</s>")) return SLATE__TMPL_ZEPHYR;
        return SLATE__TMPL_NONE;
    }
    /* Both Llama 2 and Mistral v0.1/v0.2 close the user turn with ' [/INST]' (a space before);
     * later Mistral templates do not, and render differently. The template mistralai put on
     * v0.1/v0.2 in 2024 also opens each user turn with ' [INST] ' (a space before; the first
     * one writes ' [INST] ' + system_message) and a reply with a space. */
    if (strstr(j, "[INST]") && strstr(j, " [/INST]")) {
        if (strstr(j, "<<SYS>>")) return SLATE__TMPL_LLAMA2;
        return strstr(j, "' [INST] '") || strstr(j, "\" [INST] \"") ? SLATE__TMPL_MISTRAL_V1
                                                                     : SLATE__TMPL_MISTRAL;
    }
    return SLATE__TMPL_NONE;
}

/* ---- rendering helpers --------------------------------------------------------------------- */

static bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* text[0..*len) without leading/trailing ASCII whitespace (Jinja trim, Python strip()). */
static const char *trim(const char *text, size_t *len) {
    size_t a = 0, b = *len;
    while (a < b && is_ws(text[a])) a++;
    while (b > a && is_ws(text[b - 1])) b--;
    *len = b - a;
    return text + a;
}

/* Python s.strip('\n') pieces. */
static const char *lstrip_nl(const char *t, size_t *len) {
    while (*len && *t == '\n') t++, (*len)--;
    return t;
}
static void rstrip_nl(const char *t, size_t *len) {
    while (*len && t[*len - 1] == '\n') (*len)--;
}

/* A renderer's output: the text, and optionally where message text lies in it. put() writes
 * the template's own text; put_n() and put_trim() write message text (every call of theirs
 * below does), whose spans are recorded when asked, so the encoder can keep special-token
 * spellings inside messages as plain text. */
typedef struct rout {
    slate__buf *b;
    slate__buf *spans; /* NULL, or size_t pairs {start, end} of message text in b */
} rout;

static void put(rout *o, const char *s) { slate__buf_append(o->b, s, strlen(s)); }
static void put_n(rout *o, const char *s, size_t n) {
    if (o->spans && n) {
        size_t se[2] = {o->b->len, o->b->len + n};
        slate__buf_append(o->spans, se, sizeof se);
    }
    slate__buf_append(o->b, s, n);
}
static void put_trim(rout *o, const slate__chat_msg *m) {
    size_t n = m->len;
    const char *t = trim(m->text, &n);
    put_n(o, t, n);
}

static const char *role_name(slate_role r) {
    return r == SLATE_ROLE_SYSTEM ? "system" : r == SLATE_ROLE_USER ? "user" : "assistant";
}

/* Last occurrence of needle in hay[0..n), or NULL. */
static const char *find_last(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    if (k > n) return NULL;
    for (size_t i = n - k + 1; i-- > 0;)
        if (memcmp(hay + i, needle, k) == 0) return hay + i;
    return NULL;
}
static const char *find_first(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; k <= n && i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0) return hay + i;
    return NULL;
}

/* ---- families ------------------------------------------------------------------------------ */

/* ChatML. Source: teknium/OpenHermes-2.5-Mistral-7B and Qwen2-Instruct tokenizer_config.json
 * ({{'<|im_start|>' + role + '\n' + content + '<|im_end|>' + '\n'}} per message, then
 * '<|im_start|>assistant\n'); tests/tools/hfmodel.py writes the same template. Qwen2.5 and
 * SmolLM2 templates add a default system message when there is none; that text is model
 * specific and is not injected here (pass it as the system message). */
static void render_chatml(const slate__chat_msg *m, int32_t n, bool gen, rout *o) {
    for (int32_t i = 0; i < n; i++) {
        put(o, "<|im_start|>");
        put(o, role_name(m[i].role));
        put(o, "\n");
        put_n(o, m[i].text, m[i].len);
        put(o, "<|im_end|>\n");
    }
    if (gen) put(o, "<|im_start|>assistant\n");
}

/* Qwen3. Source: Qwen3 tokenizer_config.json (../shared/models/tokenizers/qwen3): ChatML, but
 * an assistant message before the last user message (not counting user messages that are
 * a whole '<tool_response>...</tool_response>') keeps only the text after its last
 * "</think>" (leading newlines dropped); one after it is written with its reasoning as
 * "<think>\n" + reasoning + "\n</think>\n\n" + answer when it is the last message or has
 * reasoning. No tools, no enable_thinking switch. */
static bool is_tool_response(const slate__chat_msg *m) {
    static const char open[] = "<tool_response>", close[] = "</tool_response>";
    return m->len >= sizeof close - 1 && memcmp(m->text, open, sizeof open - 1) == 0 &&
           memcmp(m->text + m->len - (sizeof close - 1), close, sizeof close - 1) == 0;
}

static void render_qwen3(const slate__chat_msg *m, int32_t n, bool gen, rout *o) {
    /* The last user message that is not a tool result ('<tool_response>...</tool_response>',
     * which the template skips here), else the last message. */
    int32_t last_query = n - 1;
    for (int32_t i = n - 1; i >= 0; i--)
        if (m[i].role == SLATE_ROLE_USER && !is_tool_response(&m[i])) {
            last_query = i;
            break;
        }
    for (int32_t i = 0; i < n; i++) {
        if (m[i].role != SLATE_ROLE_ASSISTANT) {
            put(o, "<|im_start|>");
            put(o, role_name(m[i].role));
            put(o, "\n");
            put_n(o, m[i].text, m[i].len);
            put(o, "<|im_end|>\n");
            continue;
        }
        const char *content = m[i].text, *reasoning = "";
        size_t clen = m[i].len, rlen = 0;
        const char *end_think = find_last(m[i].text, m[i].len, "</think>");
        if (end_think) {
            content = end_think + 8;
            clen = m[i].len - (size_t)(content - m[i].text);
            content = lstrip_nl(content, &clen);
            /* reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1]
             *             .lstrip('\n') */
            const char *first_end = find_first(m[i].text, m[i].len, "</think>");
            size_t head = (size_t)(first_end - m[i].text);
            rstrip_nl(m[i].text, &head);
            const char *open = find_last(m[i].text, head, "<think>");
            reasoning = open ? open + 7 : m[i].text;
            rlen = head - (size_t)(reasoning - m[i].text);
            reasoning = lstrip_nl(reasoning, &rlen);
        }
        put(o, "<|im_start|>assistant\n");
        if (i > last_query && (i == n - 1 || rlen > 0)) {
            /* reasoning.strip('\n') and content.lstrip('\n') */
            reasoning = lstrip_nl(reasoning, &rlen);
            rstrip_nl(reasoning, &rlen);
            content = lstrip_nl(content, &clen);
            put(o, "<think>\n");
            put_n(o, reasoning, rlen);
            put(o, "\n</think>\n\n");
        }
        put_n(o, content, clen);
        put(o, "<|im_end|>\n");
    }
    if (gen) put(o, "<|im_start|>assistant\n");
}

/* Llama 3. Source: Meta-Llama-3-8B-Instruct tokenizer_config.json
 * (../shared/models/tokenizers/llama3): bos_token before the first message; each message is
 * '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + content|trim + '<|eot_id|>'; then
 * the assistant header. That template writes the header even without add_generation_prompt;
 * here `gen` false leaves it out, which only the session's search for reusable message
 * boundaries asks for (its prompts always have gen true). */
static void render_llama3(const slate__chat_msg *m, int32_t n, const char *bos, bool gen,
                          rout *o) {
    for (int32_t i = 0; i < n; i++) {
        if (i == 0) put(o, bos);
        put(o, "<|start_header_id|>");
        put(o, role_name(m[i].role));
        put(o, "<|end_header_id|>\n\n");
        put_trim(o, &m[i]);
        put(o, "<|eot_id|>");
    }
    if (gen) put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama 3.1 (and 3.2, see the file comment on the date). Source: Llama-3.1-8B-Instruct
 * tokenizer_config.json without tools: bos_token, then a system block that is always present:
 * '<|start_header_id|>system<|end_header_id|>\n\n' + 'Cutting Knowledge Date: December 2023\n'
 * + 'Today Date: 26 Jul 2024\n\n' + system|trim + '<|eot_id|>', then the messages as in Llama 3
 * and the assistant header when add_generation_prompt. */
static void render_llama31(const slate__chat_msg *m, int32_t n, const char *bos, bool gen,
                           rout *o) {
    put(o, bos);
    put(o, "<|start_header_id|>system<|end_header_id|>\n\n"
           "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
    int32_t i = 0;
    if (n > 0 && m[0].role == SLATE_ROLE_SYSTEM) put_trim(o, &m[i++]);
    put(o, "<|eot_id|>");
    for (; i < n; i++) {
        put(o, "<|start_header_id|>");
        put(o, role_name(m[i].role));
        put(o, "<|end_header_id|>\n\n");
        put_trim(o, &m[i]);
        put(o, "<|eot_id|>");
    }
    if (gen) put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama 2. Source: meta-llama/Llama-2-7b-chat-hf tokenizer_config.json: the system message
 * goes into the first user message as '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + content; a user
 * message is bos_token + '[INST] ' + content.strip() + ' [/INST]'; an assistant message is
 * ' ' + content.strip() + ' ' + eos_token. No generation prompt: the prompt ends at [/INST]. */
static void render_llama2(const slate__chat_msg *m, int32_t n, const char *bos, const char *eos,
                          rout *o) {
    int32_t i = 0;
    const slate__chat_msg *sys = NULL;
    if (n > 0 && m[0].role == SLATE_ROLE_SYSTEM) sys = &m[i++];
    for (int32_t k = 0; i < n; i++, k++) {
        if (m[i].role == SLATE_ROLE_USER) {
            put(o, bos);
            put(o, "[INST] ");
            if (k == 0 && sys) {
                /* strip() applies to the whole '<<SYS>>...' + content string: its start is
                 * '<<SYS>>', so only the end of the user text is trimmed. */
                put(o, "<<SYS>>\n");
                put_n(o, sys->text, sys->len);
                put(o, "\n<</SYS>>");
                size_t len = m[i].len;
                const char *t = m[i].text;
                while (len && is_ws(t[len - 1])) len--;
                /* With an all-whitespace user text, strip() also removes the "\n\n". */
                if (len) put(o, "\n\n");
                put_n(o, t, len);
            } else {
                put_trim(o, &m[i]);
            }
            put(o, " [/INST]");
        } else {
            put(o, " ");
            put_trim(o, &m[i]);
            put(o, " ");
            put(o, eos);
        }
    }
}

/* Mistral. Source: mistralai/Mistral-7B-Instruct-v0.2 tokenizer_config.json (original):
 * bos_token, then '[INST] ' + content + ' [/INST]' for a user message and content + eos_token
 * for an assistant message. System message: see the file comment.
 * Mistral v1 (spaced; mistral-common's name for the v0.1/v0.2 tokenizer): the template the same
 * tokenizer_config.json carries since 2024 writes ' [INST] ' (a space before) for a user
 * message, the first one with system_message + '\n\n' in front, and ' ' + content + eos_token
 * for an assistant message. Neither has a generation prompt: the prompt ends at [/INST]. */
static void render_mistral(const slate__chat_msg *m, int32_t n, const char *bos, const char *eos,
                           bool spaced, rout *o) {
    put(o, bos);
    int32_t i = 0;
    const slate__chat_msg *sys = NULL;
    if (n > 0 && m[0].role == SLATE_ROLE_SYSTEM) sys = &m[i++];
    for (int32_t k = 0; i < n; i++, k++) {
        if (m[i].role == SLATE_ROLE_USER) {
            put(o, spaced ? " [INST] " : "[INST] ");
            if (k == 0 && sys) {
                put_n(o, sys->text, sys->len);
                put(o, "\n\n");
            }
            put_n(o, m[i].text, m[i].len);
            put(o, " [/INST]");
        } else {
            if (spaced) put(o, " ");
            put_n(o, m[i].text, m[i].len);
            put(o, eos);
        }
    }
}

/* Gemma. Source: google/gemma-3-1b-it tokenizer_config.json (Gemma 1 and 2 render the same
 * without a system message, which they refuse): bos_token; the system text + '\n\n' opens the
 * first user turn; each message is '<start_of_turn>' + (user | model) + '\n' + content|trim +
 * '<end_of_turn>\n'; the generation prompt is '<start_of_turn>model\n'. */
static void render_gemma(const slate__chat_msg *m, int32_t n, const char *bos, bool gen,
                         rout *o) {
    put(o, bos);
    int32_t i = 0;
    const slate__chat_msg *sys = NULL;
    if (n > 0 && m[0].role == SLATE_ROLE_SYSTEM) sys = &m[i++];
    for (int32_t k = 0; i < n; i++, k++) {
        put(o, m[i].role == SLATE_ROLE_USER ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
        if (k == 0 && sys) {
            put_n(o, sys->text, sys->len);
            put(o, "\n\n");
        }
        put_trim(o, &m[i]);
        put(o, "<end_of_turn>\n");
    }
    if (gen) put(o, "<start_of_turn>model\n");
}

/* Phi-3. Source: microsoft/Phi-3.5-mini-instruct tokenizer_config.json (also Phi-3-mini after
 * its 2024-07 update): '<|' + role + '|>\n' + content + '<|end|>\n' per message (an empty system
 * message is skipped), then '<|assistant|>\n' with add_generation_prompt, else eos_token. The
 * first Phi-3-mini template began with bos_token and dropped system messages. */
static void render_phi3(const slate__chat_msg *m, int32_t n, const char *eos, bool gen,
                        rout *o) {
    for (int32_t i = 0; i < n; i++) {
        if (m[i].role == SLATE_ROLE_SYSTEM && m[i].len == 0) continue;
        put(o, "<|");
        put(o, role_name(m[i].role));
        put(o, "|>\n");
        put_n(o, m[i].text, m[i].len);
        put(o, "<|end|>\n");
    }
    put(o, gen ? "<|assistant|>\n" : eos);
}

/* Phi-3 v1. Source: microsoft/Phi-3-mini-4k-instruct tokenizer_config.json as first published
 * (April 2024; the template llama.cpp's phi-3 vocabulary file carries): bos_token, then for a
 * user message '<|user|>\n' + content + '<|end|>\n<|assistant|>\n' (the assistant header is
 * written whether or not a generation prompt is asked for), for an assistant message content +
 * '<|end|>\n'. It drops system messages: a non-empty one is refused before rendering. */
static void render_phi3_v1(const slate__chat_msg *m, int32_t n, const char *bos, rout *o) {
    put(o, bos);
    for (int32_t i = 0; i < n; i++) {
        if (m[i].role == SLATE_ROLE_USER) {
            put(o, "<|user|>\n");
            put_n(o, m[i].text, m[i].len);
            put(o, "<|end|>\n<|assistant|>\n");
        } else if (m[i].role == SLATE_ROLE_ASSISTANT) {
            put_n(o, m[i].text, m[i].len);
            put(o, "<|end|>\n");
        }
    }
}

/* Phi-4-mini. Source: microsoft/Phi-4-mini-instruct tokenizer_config.json: '<|' + role + '|>'
 * + content + '<|end|>' per message, with no newline anywhere and an empty system message kept
 * (unlike Phi-3.5's), then '<|assistant|>' with add_generation_prompt, else eos_token. Its
 * branch for a system message with 'tools' (a <|tool|>...<|/tool|> block) is not reached: the
 * session's messages carry no tools. */
static void render_phi4_mini(const slate__chat_msg *m, int32_t n, const char *eos, bool gen,
                             rout *o) {
    for (int32_t i = 0; i < n; i++) {
        put(o, "<|");
        put(o, role_name(m[i].role));
        put(o, "|>");
        put_n(o, m[i].text, m[i].len);
        put(o, "<|end|>");
    }
    put(o, gen ? "<|assistant|>" : eos);
}

/* Zephyr. Source: HuggingFaceH4/zephyr-7b-beta tokenizer_config.json: '<|' + role + '|>\n' +
 * content + eos_token, each followed by the newline the template keeps after the expression
 * (trim_blocks removes only the ones after block tags); then '<|assistant|>\n'. */
static void render_zephyr(const slate__chat_msg *m, int32_t n, const char *eos, bool gen,
                          rout *o) {
    for (int32_t i = 0; i < n; i++) {
        put(o, "<|");
        put(o, role_name(m[i].role));
        put(o, "|>\n");
        put_n(o, m[i].text, m[i].len);
        put(o, eos);
        put(o, "\n");
    }
    if (gen && n > 0) put(o, "<|assistant|>\n");
}

slate_status slate__tmpl_render(slate__tmpl t, const slate__chat_msg *msgs, int32_t n,
                                const char *bos, const char *eos, bool gen, slate__buf *out,
                                slate_error *err) {
    return slate__tmpl_render_spans(t, msgs, n, bos, eos, gen, out, NULL, err);
}

slate_status slate__tmpl_render_spans(slate__tmpl t, const slate__chat_msg *msgs, int32_t n,
                                      const char *bos, const char *eos, bool gen,
                                      slate__buf *out, slate__buf *spans, slate_error *err) {
    if (t <= SLATE__TMPL_NONE || t >= SLATE__TMPL_COUNT)
        return slate__fail(err, SLATE_E_INVALID_ARG, "chat template %d is not known; known: %s",
                           (int)t, slate__tmpl_names());
    if (!out || n < 0 || (n > 0 && !msgs))
        return slate__fail(err, SLATE_E_INVALID_ARG, "render: out must not be NULL and msgs must "
                           "hold n >= 0 messages (n = %d)", (int)n);
    if (!bos) bos = "";
    if (!eos) eos = "";
    for (int32_t i = 0; i < n; i++) {
        int32_t first = n > 0 && msgs[0].role == SLATE_ROLE_SYSTEM ? 1 : 0;
        slate_role want = i < first ? SLATE_ROLE_SYSTEM
                                    : (i - first) % 2 == 0 ? SLATE_ROLE_USER : SLATE_ROLE_ASSISTANT;
        if (msgs[i].role != want || (!msgs[i].text && msgs[i].len))
            return slate__fail(err, SLATE_E_INVALID_ARG, "message %d is %s (role %d) but the %s "
                               "template needs %s there: an optional first system message, then "
                               "user and assistant alternating", (int)i,
                               (unsigned)msgs[i].role <= SLATE_ROLE_ASSISTANT
                                   ? role_name(msgs[i].role) : "unknown",
                               (int)msgs[i].role, NAMES[t], role_name(want));
    }
    /* Llama 2, Mistral (both) and Gemma put the system message inside the first user message: a
     * prompt of a system message alone would silently leave it out (llama2: an empty prompt;
     * gemma: only the model turn's header). A render without a generation prompt (a prefix
     * the session measures) is allowed: there, nothing is generated from it. */
    if (gen && n == 1 && msgs[0].role == SLATE_ROLE_SYSTEM &&
        (t == SLATE__TMPL_LLAMA2 || t == SLATE__TMPL_MISTRAL || t == SLATE__TMPL_GEMMA ||
         t == SLATE__TMPL_MISTRAL_V1))
        return slate__fail(err, SLATE_E_INVALID_ARG, "the %s template has no place for a system "
                           "message without a user message (it goes inside the first user "
                           "message): add a user message", NAMES[t]);
    /* Phi-3's first template drops system messages: refused rather than left out unseen. */
    if (t == SLATE__TMPL_PHI3_V1)
        for (int32_t i = 0; i < n; i++)
            if (msgs[i].role == SLATE_ROLE_SYSTEM && msgs[i].len > 0)
                return slate__fail(err, SLATE_E_INVALID_ARG, "the phi3-v1 template (Phi-3's "
                                   "first) has no system role and its source drops system "
                                   "messages: remove the system message, or name the phi3 "
                                   "template (Phi-3.5's layout, with a <|system|> turn)");
    rout o = {out, spans};
    switch (t) {
    case SLATE__TMPL_CHATML: render_chatml(msgs, n, gen, &o); break;
    case SLATE__TMPL_QWEN3: render_qwen3(msgs, n, gen, &o); break;
    case SLATE__TMPL_LLAMA3: render_llama3(msgs, n, bos, gen, &o); break;
    case SLATE__TMPL_LLAMA31: render_llama31(msgs, n, bos, gen, &o); break;
    case SLATE__TMPL_LLAMA2: render_llama2(msgs, n, bos, eos, &o); break;
    case SLATE__TMPL_MISTRAL: render_mistral(msgs, n, bos, eos, false, &o); break;
    case SLATE__TMPL_GEMMA: render_gemma(msgs, n, bos, gen, &o); break;
    case SLATE__TMPL_PHI3: render_phi3(msgs, n, eos, gen, &o); break;
    case SLATE__TMPL_ZEPHYR: render_zephyr(msgs, n, eos, gen, &o); break;
    case SLATE__TMPL_MISTRAL_V1: render_mistral(msgs, n, bos, eos, true, &o); break;
    case SLATE__TMPL_PHI3_V1: render_phi3_v1(msgs, n, bos, &o); break;
    case SLATE__TMPL_PHI4_MINI: render_phi4_mini(msgs, n, eos, gen, &o); break;
    default: break;
    }
    if (out->failed || (spans && spans->failed))
        return slate__fail(err, SLATE_E_NOMEM, "out of memory rendering the chat");
    return SLATE_OK;
}

static void template_excerpt(const char *t, char *out, size_t cap) {
    size_t n = 0;
    for (; t[n] && n + 4 < cap && n < 48; n++) out[n] = t[n] >= 32 && t[n] < 127 ? t[n] : '.';
    out[n] = '\0';
    if (t[n]) memcpy(out + (n < cap - 4 ? n : cap - 4), "...", 4);
}

slate_status slate__tmpl_choose(const char *model_template, const char *name, slate__tmpl *out,
                                slate_error *err) {
    *out = SLATE__TMPL_NONE;
    if (name) {
        if (!(*out = slate__tmpl_by_name(name)))
            return slate__fail(err, SLATE_E_INVALID_ARG, "chat template '%.64s' is not known; "
                               "known: %s", name, slate__tmpl_names());
    } else if (!model_template) {
        return slate__fail(err, SLATE_E_UNSUPPORTED, "the model has no chat template; name one "
                           "of: %s (session template_name, CLI --template)", slate__tmpl_names());
    } else if (!(*out = slate__tmpl_detect(model_template))) {
        char ex[64];
        template_excerpt(model_template, ex, sizeof ex);
        return slate__fail(err, SLATE_E_UNSUPPORTED, "the model's chat template (\"%s\") matches "
                           "none of the known families; name one of: %s (session template_name, "
                           "CLI --template)", ex, slate__tmpl_names());
    }
    return SLATE_OK;
}

slate_status slate__tmpl_token_text(const slate_tokenizer *tok, int32_t id, char **out,
                                    slate_error *err) {
    char buf[256];
    size_t len = 0;
    if (id < 0 || slate_tokenizer_piece(tok, id, true, buf, sizeof buf - 1, &len, NULL) != SLATE_OK)
        len = 0;
    *out = slate__strndup(buf, len);
    return *out ? SLATE_OK : slate__fail(err, SLATE_E_NOMEM, "out of memory");
}
