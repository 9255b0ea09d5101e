/*
 * request.c - parsing and validation of `slate serve` request bodies (OpenAI chat completion and
 * completion requests): every field is checked for type and range before anything runs, and
 * the first problem is reported with the field's name, an HTTP status and an OpenAI error code.
 * Pure: no sockets, no model; the HTTP fuzz target drives it directly.
 */
#include "server.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *srv_utf8_clip(char *dst, size_t cap, const char *src, size_t max) {
    size_t i = 0, k = 0;
    while (i < max && src[i]) {
        /* What src holds before its NUL, up to a character's 4 bytes: a character cut short by
         * the NUL is invalid, one cut by max is left out below. */
        size_t avail = 1;
        while (avail < 4 && src[i + avail]) avail++;
        size_t n = slate_utf8_char_len(src + i, avail);
        const char *bytes = src + i;
        size_t out = n;
        if (n == 0) {
            bytes = "\xEF\xBF\xBD";
            out = 3;
            n = 1;
        }
        if (i + n > max || k + out + 1 > cap) break;
        memcpy(dst + k, bytes, out);
        k += out;
        i += n;
    }
    dst[k] = '\0';
    return dst;
}

static bool fail(srv_parsed *p, unsigned status, const char *param, const char *code,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static bool fail(srv_parsed *p, unsigned status, const char *param, const char *code,
                 const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->bad_msg, sizeof p->bad_msg, fmt, ap);
    va_end(ap);
    p->status = status;
    p->bad_param = param;
    p->code = code;
    return false;
}

/* True if the JSON text holds a \u0000 escape: cJSON stores strings NUL-terminated, so such a
 * string would silently end at the NUL. In valid JSON a backslash only appears inside strings;
 * the "\u" is an escape when the run of backslashes ending at it is odd ("\\u0000" is a
 * backslash followed by the text "u0000"). Hex digits are case-insensitive, but '0' has no
 * case, so only the 'u' matters and JSON spells it lowercase. */
static bool has_nul_escape(const char *body, size_t len) {
    for (size_t i = 0; i + 6 <= len; i++) {
        if (body[i] != '\\' || body[i + 1] != 'u' || memcmp(body + i + 2, "0000", 4) != 0)
            continue;
        size_t run = 1;
        while (run <= i && body[i - run] == '\\') run++;
        if (run % 2 == 1) return true;
    }
    return false;
}

static bool num_field(srv_parsed *p, const char *key, double lo, double hi, bool integer,
                      double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->json, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v))
        return fail(p, 400, key, "invalid_type", "'%s' must be a number", key);
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi || (integer && d != floor(d)))
        return fail(p, 400, key, "invalid_value", "'%s' is %g; expected %s in [%g, %g]", key, d,
                    integer ? "an integer" : "a number", lo, hi);
    *out = d;
    return true;
}

/* Content given as parts ([{"type": "text", "text": ...}, ...]): the text parts joined with
 * nothing between them; any other part (image_url, input_audio...) is refused, naming it. The
 * joined string replaces the message's content in the JSON tree, which owns it. */
static bool join_text_parts(srv_parsed *p, int i, cJSON *msg, const cJSON *content,
                            const char **text) {
    size_t len = 0;
    int k = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type))
            return fail(p, 400, "messages", "invalid_type", "messages[%d].content[%d] must be "
                        "an object with a string 'type'", i, k);
        if (strcmp(type->valuestring, "text") != 0) {
            char clip[64];
            return fail(p, 400, "messages", "invalid_value", "messages[%d].content[%d] has type "
                        "'%s'; this server takes only text parts", i, k,
                        srv_utf8_clip(clip, sizeof clip, type->valuestring, 40));
        }
        if (!cJSON_IsString(t))
            return fail(p, 400, "messages", "invalid_type", "messages[%d].content[%d].text must "
                        "be a string", i, k);
        len += strlen(t->valuestring);
        k++;
    }
    if (k == 0)
        return fail(p, 400, "messages", "invalid_value", "messages[%d].content has no parts", i);
    char *joined = malloc(len + 1);
    if (!joined) return fail(p, 500, NULL, NULL, "out of memory");
    size_t at = 0;
    cJSON_ArrayForEach(part, content) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t n = strlen(t);
        memcpy(joined + at, t, n);
        at += n;
    }
    joined[at] = '\0';
    cJSON *str = cJSON_CreateString(joined);
    free(joined);
    if (!str || !cJSON_ReplaceItemInObjectCaseSensitive(msg, "content", str)) {
        cJSON_Delete(str);
        return fail(p, 500, NULL, NULL, "out of memory");
    }
    *text = str->valuestring;
    return true;
}

/* True if the field asks for something: present, not null, and not one of its no-op values
 * (false, 0, 1 for best_of, an empty object or array, "none", {"type": "text"}). */
static bool asks_for(const cJSON *v, const char *key) {
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return false;
    if (cJSON_IsNumber(v)) return v->valuedouble != (strcmp(key, "best_of") == 0 ? 1 : 0);
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        if (strcmp(key, "response_format") == 0) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "type");
            return !(cJSON_IsString(t) && strcmp(t->valuestring, "text") == 0);
        }
        return cJSON_GetArraySize(v) > 0;
    }
    if (cJSON_IsString(v)) return strcmp(v->valuestring, "none") != 0;
    return true;
}

/* OpenAI fields for things this server does not do: silently ignoring them would hand the
 * client something other than what it asked for, so a request that asks is refused. */
static bool refuse_unsupported(srv_parsed *p) {
    static const char *const keys[] = {"logprobs", "top_logprobs", "echo", "best_of",
                                       "logit_bias", "tools", "tool_choice", "response_format",
                                       "functions", "function_call"};
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(p->json, "tools");
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->json, keys[i]);
        /* tool_choice "auto" without tools is a no-op too. */
        if (strcmp(keys[i], "tool_choice") == 0 && cJSON_IsString(v) &&
            strcmp(v->valuestring, "auto") == 0 && !asks_for(tools, "tools"))
            continue;
        if (asks_for(v, keys[i]))
            return fail(p, 400, keys[i], "unsupported_parameter", "'%s' is not supported by "
                        "this server (only its no-op value is accepted)", keys[i]);
    }
    return true;
}

bool srv_parse_request(const srv_config *cfg, atomic_ulong *seed_counter, srv_parsed *p,
                       const char *body, size_t len, bool chat) {
    memset(&p->req, 0, sizeof p->req);
    srv_request *r = &p->req;
    r->chat = chat;
    const char *end = NULL;
    p->json = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!p->json)
        return fail(p, 400, NULL, "invalid_json", "request body is not valid JSON (error near "
                    "byte %zu)", end ? (size_t)(end - body) : 0);
    if (!cJSON_IsObject(p->json))
        return fail(p, 400, NULL, "invalid_json", "request body must be a JSON object");
    /* A raw NUL byte is not valid inside a JSON string either, but cJSON copies it. */
    if (memchr(body, '\0', len) || has_nul_escape(body, len))
        return fail(p, 400, NULL, "invalid_value", "strings must not contain NUL (\\u0000)");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(p->json, "model");
    if (model && !cJSON_IsNull(model)) {
        if (!cJSON_IsString(model))
            return fail(p, 400, "model", "invalid_type", "'model' must be a string");
        char clip[128];
        if (strcmp(model->valuestring, cfg->model_id) != 0)
            return fail(p, 404, "model", "model_not_found", "the model '%s' does not exist; "
                        "this server serves '%s'",
                        srv_utf8_clip(clip, sizeof clip, model->valuestring, 100), cfg->model_id);
    }
    if (chat) {
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(p->json, "messages");
        if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) < 1)
            return fail(p, 400, "messages", "invalid_type", "'messages' must be a non-empty array");
        int n = cJSON_GetArraySize(msgs);
        if (n > 4096) return fail(p, 400, "messages", "invalid_value", "at most 4096 messages");
        r->messages = calloc((size_t)n, sizeof *r->messages);
        if (!r->messages) return fail(p, 500, NULL, NULL, "out of memory");
        const cJSON *m;
        cJSON_ArrayForEach(m, msgs) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
            if (!cJSON_IsObject(m) || !cJSON_IsString(role))
                return fail(p, 400, "messages", "invalid_type", "messages[%d].role must be a "
                            "string", r->n_messages);
            char clip[64];
            if (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") &&
                strcmp(role->valuestring, "assistant") && strcmp(role->valuestring, "developer"))
                return fail(p, 400, "messages", "invalid_value", "messages[%d].role '%s' is "
                            "not one of system, developer, user, assistant", r->n_messages,
                            srv_utf8_clip(clip, sizeof clip, role->valuestring, 40));
            const char *text = NULL;
            if (cJSON_IsString(content)) {
                text = content->valuestring;
            } else if (cJSON_IsNull(content) && strcmp(role->valuestring, "assistant") == 0) {
                text = ""; /* an assistant turn that only called tools, as clients resend it */
            } else if (cJSON_IsArray(content)) {
                if (!join_text_parts(p, r->n_messages, (cJSON *)m, content, &text)) return false;
            } else {
                return fail(p, 400, "messages", "invalid_type", "messages[%d].content must be "
                            "a string or an array of text parts", r->n_messages);
            }
            r->messages[r->n_messages].role =
                strcmp(role->valuestring, "developer") == 0 ? "system" : role->valuestring;
            r->messages[r->n_messages].content = text;
            r->n_messages++;
        }
    } else {
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(p->json, "prompt");
        if (cJSON_IsArray(prompt) && cJSON_GetArraySize(prompt) == 1 &&
            cJSON_IsString(cJSON_GetArrayItem(prompt, 0)))
            prompt = cJSON_GetArrayItem(prompt, 0);
        if (!cJSON_IsString(prompt))
            return fail(p, 400, "prompt", "invalid_type", "'prompt' must be a string");
        r->prompt = prompt->valuestring;
    }
    if (!refuse_unsupported(p)) return false;
    double d;
    r->sampler = slate_sampler_default_params();
    /* OpenAI's defaults: temperature 1, top_p 1, no top-k/min-p. */
    r->sampler.temperature = 1.0f;
    r->sampler.top_p = 1.0f;
    r->sampler.top_k = 0;
    r->sampler.min_p = 0.0f;
    r->max_tokens = 256;
    if (r->max_tokens > cfg->max_tokens_limit) r->max_tokens = cfg->max_tokens_limit;
    /* max_completion_tokens (the newer name) wins, but only when given: a client that sends
     * it as null still means max_tokens. */
    const cJSON *mct = cJSON_GetObjectItemCaseSensitive(p->json, "max_completion_tokens");
    const char *mt_key = mct && !cJSON_IsNull(mct) ? "max_completion_tokens" : "max_tokens";
    d = -1;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(p->json, mt_key);
    if (mt && cJSON_IsNumber(mt) && mt->valuedouble > cfg->max_tokens_limit &&
        mt->valuedouble == floor(mt->valuedouble))
        return fail(p, 400, mt_key, "invalid_value", "'%s' is %g, more than this server's limit "
                    "of %d", mt_key, mt->valuedouble, cfg->max_tokens_limit);
    if (!num_field(p, mt_key, 1, cfg->max_tokens_limit, true, &d)) return false;
    if (d > 0) r->max_tokens = (int32_t)d;
    d = -1;
    if (!num_field(p, "temperature", 0, 2, false, &d)) return false;
    if (d >= 0) r->sampler.temperature = (float)d;
    d = -1;
    if (!num_field(p, "top_p", 0, 1, false, &d)) return false;
    if (d >= 0) {
        if (d == 0) return fail(p, 400, "top_p", "invalid_value", "'top_p' must be in (0, 1]");
        r->sampler.top_p = (float)d;
    }
    d = -1;
    if (!num_field(p, "top_k", 0, 1 << 20, true, &d)) return false;
    if (d >= 0) r->sampler.top_k = (int32_t)d;
    d = -1;
    if (!num_field(p, "min_p", 0, 1, false, &d)) return false;
    if (d >= 0) r->sampler.min_p = (float)d;
    d = NAN;
    if (!num_field(p, "presence_penalty", -2, 2, false, &d)) return false;
    if (!isnan(d)) r->sampler.presence_penalty = (float)d;
    d = NAN;
    if (!num_field(p, "frequency_penalty", -2, 2, false, &d)) return false;
    if (!isnan(d)) r->sampler.frequency_penalty = (float)d;
    d = -1;
    if (!num_field(p, "seed", 0, 9007199254740991.0, true, &d)) return false;
    if (d >= 0) r->sampler.seed = (uint64_t)d;
    else r->sampler.seed = (uint64_t)atomic_fetch_add(seed_counter, 1) * 0x9e3779b97f4a7c15ull;
    d = 1;
    if (!num_field(p, "n", 1, 1e9, true, &d)) return false;
    if (d != 1) return fail(p, 400, "n", "invalid_value", "'n' is %g; this server generates one "
                            "choice per request (n must be 1)", d);
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(p->json, "stop");
    if (cJSON_IsString(stop)) {
        if (!stop->valuestring[0]) return fail(p, 400, "stop", "invalid_value", "'stop' strings must not be empty");
        r->stops[r->n_stops++] = stop->valuestring;
    } else if (cJSON_IsArray(stop)) {
        const cJSON *x;
        if (cJSON_GetArraySize(stop) > 4)
            return fail(p, 400, "stop", "invalid_value", "'stop' holds at most 4 strings");
        cJSON_ArrayForEach(x, stop) {
            if (!cJSON_IsString(x) || !x->valuestring[0])
                return fail(p, 400, "stop", "invalid_type", "'stop' must be a string or an "
                            "array of non-empty strings");
            r->stops[r->n_stops++] = x->valuestring;
        }
    } else if (stop && !cJSON_IsNull(stop)) {
        return fail(p, 400, "stop", "invalid_type", "'stop' must be a string or an array");
    }
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(p->json, "stream");
    if (stream && !cJSON_IsBool(stream) && !cJSON_IsNull(stream))
        return fail(p, 400, "stream", "invalid_type", "'stream' must be a boolean");
    r->stream = cJSON_IsTrue(stream);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(p->json, "stream_options");
    r->include_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(so, "include_usage"));
    const cJSON *ie = cJSON_GetObjectItemCaseSensitive(p->json, "ignore_eos");
    if (ie && !cJSON_IsBool(ie))
        return fail(p, 400, "ignore_eos", "invalid_type", "'ignore_eos' must be a boolean");
    r->ignore_eos = cJSON_IsTrue(ie);
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(p->json, "conversation_id");
    if (conv && !cJSON_IsNull(conv)) {
        if (!cJSON_IsString(conv) || strlen(conv->valuestring) >= sizeof r->conv_id)
            return fail(p, 400, "conversation_id", "invalid_type", "'conversation_id' must be a "
                        "string of at most %zu bytes", sizeof r->conv_id - 1);
        strcpy(r->conv_id, conv->valuestring);
    }
    return true;
}

void srv_parsed_free(srv_parsed *p) {
    free(p->req.messages);
    cJSON_Delete(p->json);
    p->req.messages = NULL;
    p->json = NULL;
}
