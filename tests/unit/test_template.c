/* test_template.c - chat-template families: exact renderings of known conversations, detection
 * from real template sources, and refusals.
 *
 * Expected strings: each is the output of the family's official Jinja template (the source is
 * named in src/gen/template.c beside each renderer: Qwen3 and Llama 3 from
 * ../shared/models/tokenizers/{qwen3,llama3}/tokenizer_config.json, the others from the Hugging
 * Face tokenizer_config.json of OpenHermes-2.5-Mistral-7B (ChatML), Llama-3.1-8B-Instruct,
 * Llama-2-7b-chat-hf, Mistral-7B-Instruct-v0.2, gemma-3-1b-it, Phi-3.5-mini-instruct and
 * zephyr-7b-beta), rendered with jinja2 3.1.6 as transformers' apply_chat_template does
 * (trim_blocks, lstrip_blocks, add_generation_prompt=True, tools=None) on the conversation
 * below. The conversation is the one llama.cpp's tests/test-chat-template.cpp uses; its padded
 * assistant reply shows which families trim. The one exception is Mistral with a system
 * message, which its template refuses: that expectation is slate's documented choice. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "gen/template.h"

#define SYS "You are a helpful assistant"
/* microsoft/Phi-4-mini-instruct tokenizer_config.json's chat_template. */
static const char k_phi4_mini_src[] =
    "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
    "message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + "
    "'<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + "
    "message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}";

static const slate__chat_msg CONV[] = {
    {SLATE_ROLE_SYSTEM, SYS, sizeof SYS - 1},
    {SLATE_ROLE_USER, "Hello", 5},
    {SLATE_ROLE_ASSISTANT, "Hi there", 8},
    {SLATE_ROLE_USER, "Who are you", 11},
    {SLATE_ROLE_ASSISTANT, "   I am an assistant   ", 23},
    {SLATE_ROLE_USER, "Another question", 16},
};

typedef struct family_case {
    const char *name;
    const char *bos, *eos; /* the model's BOS / EOS text */
    const char *with_system, *without_system, *one_message;
} family_case;

static const family_case CASES[] = {
    {"chatml", "", "<|im_end|>",
     "<|im_start|>system\n"
     "You are a helpful assistant<|im_end|>\n"
     "<|im_start|>user\n"
     "Hello<|im_end|>\n"
     "<|im_start|>assistant\n"
     "Hi there<|im_end|>\n"
     "<|im_start|>user\n"
     "Who are you<|im_end|>\n"
     "<|im_start|>assistant\n"
     "   I am an assistant   <|im_end|>\n"
     "<|im_start|>user\n"
     "Another question<|im_end|>\n"
     "<|im_start|>assistant\n",
     "<|im_start|>user\n"
     "Hello<|im_end|>\n"
     "<|im_start|>assistant\n"
     "Hi there<|im_end|>\n"
     "<|im_start|>user\n"
     "Who are you<|im_end|>\n"
     "<|im_start|>assistant\n"
     "   I am an assistant   <|im_end|>\n"
     "<|im_start|>user\n"
     "Another question<|im_end|>\n"
     "<|im_start|>assistant\n",
     "<|im_start|>user\n"
     "Hello<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"qwen3", "", "<|im_end|>",
     "<|im_start|>system\n"
     "You are a helpful assistant<|im_end|>\n"
     "<|im_start|>user\n"
     "Hello<|im_end|>\n"
     "<|im_start|>assistant\n"
     "Hi there<|im_end|>\n"
     "<|im_start|>user\n"
     "Who are you<|im_end|>\n"
     "<|im_start|>assistant\n"
     "   I am an assistant   <|im_end|>\n"
     "<|im_start|>user\n"
     "Another question<|im_end|>\n"
     "<|im_start|>assistant\n",
     "<|im_start|>user\n"
     "Hello<|im_end|>\n"
     "<|im_start|>assistant\n"
     "Hi there<|im_end|>\n"
     "<|im_start|>user\n"
     "Who are you<|im_end|>\n"
     "<|im_start|>assistant\n"
     "   I am an assistant   <|im_end|>\n"
     "<|im_start|>user\n"
     "Another question<|im_end|>\n"
     "<|im_start|>assistant\n",
     "<|im_start|>user\n"
     "Hello<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"llama3", "<|begin_of_text|>", "<|eot_id|>",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
     "\n"
     "You are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "Hi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Who are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "I am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Another question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n",
     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "Hi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Who are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "I am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Another question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n",
     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"},
    {"llama31", "<|begin_of_text|>", "<|eot_id|>",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
     "\n"
     "Cutting Knowledge Date: December 2023\n"
     "Today Date: 26 Jul 2024\n"
     "\n"
     "You are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "Hi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Who are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "I am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Another question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
     "\n"
     "Cutting Knowledge Date: December 2023\n"
     "Today Date: 26 Jul 2024\n"
     "\n"
     "<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "Hi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Who are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"
     "I am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Another question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n",
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
     "\n"
     "Cutting Knowledge Date: December 2023\n"
     "Today Date: 26 Jul 2024\n"
     "\n"
     "<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
     "\n"
     "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
     "\n"},
    {"llama2", "<s>", "</s>",
     "<s>[INST] <<SYS>>\n"
     "You are a helpful assistant\n"
     "<</SYS>>\n"
     "\n"
     "Hello [/INST] Hi there </s><s>[INST] Who are you [/INST] I am an assistant </s><s>[INST] "
     "Another question [/INST]",
     "<s>[INST] Hello [/INST] Hi there </s><s>[INST] Who are you [/INST] I am an assistant "
     "</s><s>[INST] Another question [/INST]",
     "<s>[INST] Hello [/INST]"},
    {"mistral", "<s>", "</s>",
     /* slate's choice (the template refuses system messages): see template.c */
     "<s>[INST] You are a helpful assistant\n"
     "\n"
     "Hello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] "
     "Another question [/INST]",
     "<s>[INST] Hello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   "
     "</s>[INST] Another question [/INST]",
     "<s>[INST] Hello [/INST]"},
    {"gemma", "<bos>", "<eos>",
     "<bos><start_of_turn>user\n"
     "You are a helpful assistant\n"
     "\n"
     "Hello<end_of_turn>\n"
     "<start_of_turn>model\n"
     "Hi there<end_of_turn>\n"
     "<start_of_turn>user\n"
     "Who are you<end_of_turn>\n"
     "<start_of_turn>model\n"
     "I am an assistant<end_of_turn>\n"
     "<start_of_turn>user\n"
     "Another question<end_of_turn>\n"
     "<start_of_turn>model\n",
     "<bos><start_of_turn>user\n"
     "Hello<end_of_turn>\n"
     "<start_of_turn>model\n"
     "Hi there<end_of_turn>\n"
     "<start_of_turn>user\n"
     "Who are you<end_of_turn>\n"
     "<start_of_turn>model\n"
     "I am an assistant<end_of_turn>\n"
     "<start_of_turn>user\n"
     "Another question<end_of_turn>\n"
     "<start_of_turn>model\n",
     "<bos><start_of_turn>user\n"
     "Hello<end_of_turn>\n"
     "<start_of_turn>model\n"},
    {"phi3", "<s>", "<|endoftext|>",
     "<|system|>\n"
     "You are a helpful assistant<|end|>\n"
     "<|user|>\n"
     "Hello<|end|>\n"
     "<|assistant|>\n"
     "Hi there<|end|>\n"
     "<|user|>\n"
     "Who are you<|end|>\n"
     "<|assistant|>\n"
     "   I am an assistant   <|end|>\n"
     "<|user|>\n"
     "Another question<|end|>\n"
     "<|assistant|>\n",
     "<|user|>\n"
     "Hello<|end|>\n"
     "<|assistant|>\n"
     "Hi there<|end|>\n"
     "<|user|>\n"
     "Who are you<|end|>\n"
     "<|assistant|>\n"
     "   I am an assistant   <|end|>\n"
     "<|user|>\n"
     "Another question<|end|>\n"
     "<|assistant|>\n",
     "<|user|>\n"
     "Hello<|end|>\n"
     "<|assistant|>\n"},
    {"zephyr", "<s>", "</s>",
     "<|system|>\n"
     "You are a helpful assistant</s>\n"
     "<|user|>\n"
     "Hello</s>\n"
     "<|assistant|>\n"
     "Hi there</s>\n"
     "<|user|>\n"
     "Who are you</s>\n"
     "<|assistant|>\n"
     "   I am an assistant   </s>\n"
     "<|user|>\n"
     "Another question</s>\n"
     "<|assistant|>\n",
     "<|user|>\n"
     "Hello</s>\n"
     "<|assistant|>\n"
     "Hi there</s>\n"
     "<|user|>\n"
     "Who are you</s>\n"
     "<|assistant|>\n"
     "   I am an assistant   </s>\n"
     "<|user|>\n"
     "Another question</s>\n"
     "<|assistant|>\n",
     "<|user|>\n"
     "Hello</s>\n"
     "<|assistant|>\n"},
    /* The template mistralai put on Mistral-7B-Instruct-v0.1/v0.2 in 2024 (quoted in the
     * detection test below): a space before each [INST] and before each reply, system message
     * allowed. Derived by hand from that source (no jinja2 here), not rendered with jinja2. */
    {"mistral-v1", "<s>", "</s>",
     "<s> [INST] You are a helpful assistant\n"
     "\n"
     "Hello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] "
     "Another question [/INST]",
     "<s> [INST] Hello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   "
     "</s> [INST] Another question [/INST]",
     "<s> [INST] Hello [/INST]"},
};

/* Renders msgs in family `name` and compares with `want`, showing both on a mismatch. */
static void expect_render(const char *name, const char *bos, const char *eos,
                          const slate__chat_msg *msgs, int32_t n, const char *want) {
    slate__tmpl t = slate__tmpl_by_name(name);
    assert_int_not_equal(t, SLATE__TMPL_NONE);
    slate__buf b = {0};
    slate_error e;
    assert_int_equal(slate__tmpl_render(t, msgs, n, bos, eos, true, &b, &e), SLATE_OK);
    slate__buf_append(&b, "", 1);
    if (strcmp((const char *)b.data, want) != 0)
        fail_msg("%s (%d messages):\n--- got ---\n%s\n--- want ---\n%s", name, (int)n,
                 (const char *)b.data, want);
    slate__buf_free(&b);
}

static void each_family_renders_known_conversations_exactly(void **unused) {
    (void)unused;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const family_case *c = &CASES[i];
        expect_render(c->name, c->bos, c->eos, CONV, 6, c->with_system);
        expect_render(c->name, c->bos, c->eos, CONV + 1, 5, c->without_system);
        expect_render(c->name, c->bos, c->eos, CONV + 1, 1, c->one_message);
    }
}

/* Whitespace rules at the edges, also checked against the official templates with jinja2. */
static void trimming_follows_each_template(void **unused) {
    (void)unused;
    const slate__chat_msg l2[] = {{SLATE_ROLE_SYSTEM, "S", 1}, {SLATE_ROLE_USER, "  Hello  ", 9}};
    expect_render("llama2", "<s>", "</s>", l2, 2, "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\n  Hello [/INST]");
    const slate__chat_msg l2ws[] = {{SLATE_ROLE_SYSTEM, "S", 1}, {SLATE_ROLE_USER, " \n ", 3}};
    expect_render("llama2", "<s>", "</s>", l2ws, 2, "<s>[INST] <<SYS>>\nS\n<</SYS>> [/INST]");
    const slate__chat_msg g[] = {{SLATE_ROLE_SYSTEM, " S ", 3}, {SLATE_ROLE_USER, "  Hi  ", 6}};
    expect_render("gemma", "<bos>", "<eos>", g, 2,
                  "<bos><start_of_turn>user\n S \n\nHi<end_of_turn>\n<start_of_turn>model\n");
}

/* A prompt of a system message alone: families that put the system message inside the first
 * user message refuse it with a message naming the fix (rendered, it would leave the system
 * text out); the others render it; without a generation prompt (a prefix the session
 * measures) every family renders it. */
static void system_message_alone(void **unused) {
    (void)unused;
    const slate__chat_msg sys[] = {{SLATE_ROLE_SYSTEM, "Be brief.", 9}};
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const char *name = CASES[i].name;
        bool folds = !strcmp(name, "llama2") || !strcmp(name, "mistral") ||
                     !strcmp(name, "gemma") || !strcmp(name, "mistral-v1");
        slate__buf b = {0};
        slate_error e = {0};
        slate_status st = slate__tmpl_render(slate__tmpl_by_name(name), sys, 1, "<s>", "</s>",
                                             true, &b, &e);
        if (folds) {
            assert_int_equal(st, SLATE_E_INVALID_ARG);
            if (!strstr(e.message, name) || !strstr(e.message, "add a user message"))
                fail_msg("%s: %s", name, e.message);
        } else {
            assert_int_equal(st, SLATE_OK);
            slate__buf_append(&b, "", 1);
            if (!strstr((const char *)b.data, "Be brief."))
                fail_msg("%s left the system text out: %s", name, (const char *)b.data);
        }
        slate__buf_free(&b);
        assert_int_equal(slate__tmpl_render(slate__tmpl_by_name(name), sys, 1, "<s>", "</s>",
                                            false, &b, &e), SLATE_OK);
        slate__buf_free(&b);
    }
}

static void qwen3_drops_reasoning_of_earlier_replies(void **unused) {
    (void)unused;
    const slate__chat_msg a[] = {
        {SLATE_ROLE_USER, "What is 2+2?", 12},
        {SLATE_ROLE_ASSISTANT, "<think>\nadd them\n</think>\n\n4", 28},
        {SLATE_ROLE_USER, "And 3+3?", 8},
    };
    expect_render("qwen3", "", "<|im_end|>", a, 3,
                  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
                  "<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n");
    const slate__chat_msg b[] = {
        {SLATE_ROLE_USER, "q", 1},
        {SLATE_ROLE_ASSISTANT, "<think>a</think>b</think>\n\nc", 28},
        {SLATE_ROLE_USER, "r", 1},
    };
    expect_render("qwen3", "", "<|im_end|>", b, 3,
                  "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nc<|im_end|>\n"
                  "<|im_start|>user\nr<|im_end|>\n<|im_start|>assistant\n");
    /* A reply after the last user message keeps its reasoning, rewritten as the template does. */
    const slate__chat_msg c[] = {
        {SLATE_ROLE_USER, "q", 1},
        {SLATE_ROLE_ASSISTANT, "x<think>\n\nr1\n</think>\n\nans", 26},
    };
    expect_render("qwen3", "", "<|im_end|>", c, 2,
                  "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr1\n</think>\n\n"
                  "ans<|im_end|>\n<|im_start|>assistant\n");
    /* A user message that is a whole tool result does not count as the last query (the
     * template's multi_step_tool scan), so the reply before it keeps its reasoning. */
    const slate__chat_msg d[] = {
        {SLATE_ROLE_USER, "q", 1},
        {SLATE_ROLE_ASSISTANT, "<think>\nr\n</think>\n\na", 21},
        {SLATE_ROLE_USER, "<tool_response>\nx\n</tool_response>", 34},
    };
    expect_render("qwen3", "", "<|im_end|>", d, 3,
                  "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\n"
                  "a<|im_end|>\n<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n"
                  "<|im_start|>assistant\n");
}

static char *config_template(const char *path) {
    char *text = NULL;
    size_t len = 0;
    if (slate__read_file(path, 1 << 24, &text, &len, NULL) != SLATE_OK) return NULL;
    cJSON *j = cJSON_Parse(text);
    slate__free(text);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
    char *out = cJSON_IsString(ct) ? strdup(ct->valuestring) : NULL;
    cJSON_Delete(j);
    return out;
}

static void families_are_detected_from_real_tokenizer_configs(void **unused) {
    (void)unused;
    const struct {
        const char *file;
        slate__tmpl want;
    } real[] = {{"tokenizers/qwen3/tokenizer_config.json", SLATE__TMPL_QWEN3},
                {"tokenizers/llama3/tokenizer_config.json", SLATE__TMPL_LLAMA3}};
    for (int i = 0; i < 2; i++) {
        const char *path = tu_model_path(real[i].file);
        if (!tu_exists(path)) {
            printf("skipping %s: not found\n", path);
            continue;
        }
        char *t = config_template(path);
        assert_non_null(t);
        assert_int_equal(slate__tmpl_detect(t), real[i].want);
        free(t);
    }
}

/* Template sources as the models ship them (see the file comment for where each comes from). */
static void families_are_detected_from_official_template_sources(void **unused) {
    (void)unused;
    const struct {
        const char *src;
        slate__tmpl want;
    } t[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
         "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
         "{{ '<|im_start|>assistant\\n' }}{% endif %}", SLATE__TMPL_CHATML},
        {"{{- bos_token }}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
         "{{- \"Cutting Knowledge Date: December 2023\\n\" }}", SLATE__TMPL_LLAMA31},
        {"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
         "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
         "{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
         "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
         "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
         "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + "
         "'[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
         "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
         SLATE__TMPL_LLAMA2},
        {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ "
         "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' "
         "%}{{ message['content'] + eos_token}}{% endif %}{% endfor %}", SLATE__TMPL_MISTRAL},
        {"{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]"
         "['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set "
         "loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in "
         "loop_messages %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first "
         "and system_message is defined %}\n            {{- ' [INST] ' + system_message + "
         "'\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' "
         "[INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif "
         "message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}"
         "\n    {%- endif %}\n{%- endfor %}\n", SLATE__TMPL_MISTRAL_V1},
        {"{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + "
         "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}", SLATE__TMPL_GEMMA},
        {"{% for message in messages %}{% if message['role'] == 'system' and message['content'] "
         "%}{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == "
         "'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}",
         SLATE__TMPL_PHI3},
        {"{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
         "message['content'] + eos_token }}\n{% endif %}\n{% endfor %}", SLATE__TMPL_ZEPHYR},
        {k_phi4_mini_src, SLATE__TMPL_PHI4_MINI},
        /* Refused: markers of a known family but another layout, or no markers at all. */
        {"{%- for message in messages %}{%- if message.role == \"assistant\" %}{%- set content "
         "= message.content.split('</think>')[-1].lstrip('\\n') %}{{- '<|im_start|>' + "
         "message.role + '\\n' + content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}\n{%- if "
         "add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif "
         "%}\n", SLATE__TMPL_NONE}, /* QwQ: the generation prompt opens <think> */
        /* SmolLM3 (HuggingFaceTB/SmolLM3-3B's chat_template, its reasoning-mode, system-header
         * and generation-prompt parts): chatml markers and a </think>, but its own layout. It was
         * detected as qwen3. */
        {"{%- if enable_thinking -%}\n  {%- set reasoning_mode = \"/think\" -%}\n{%- else "
         "-%}\n  {%- set reasoning_mode = \"/no_think\" -%}\n{%- endif -%}\n{{- "
         "\"<|im_start|>system\\n\" -}}\n{{- \"## Metadata\\n\\n\" -}}\n{{- \"Knowledge "
         "Cutoff Date: June 2025\\n\" -}}\n{%- set today = strftime_now(\"%d %B %Y\") -%}\n"
         "{{- \"Reasoning Mode: \" + reasoning_mode + \"\\n\\n\" -}}\n{%- if "
         "add_generation_prompt -%}\n  {%- if reasoning_mode == \"/think\" -%}\n    {{ "
         "\"<|im_start|>assistant\\n\" }}\n  {%- else -%}\n    {{ \"<|im_start|>assistant\\n"
         "\" + \"<think>\\n\\n</think>\\n\"  }}\n  {%- endif -%}\n{%- endif -%}",
         SLATE__TMPL_NONE},
        /* Granite 3.x (ibm-granite/granite-3.1-2b-instruct's chat_template, abridged: its
         * default system message with today's date and its turns): no family's layout. */
        {"{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = "
         "messages[0]['content'] %}\n{%- else %}\n    {%- set system_message = \"Knowledge "
         "Cutoff Date: April 2024.\\nToday's Date: \" + strftime_now('%B %d, %Y') + "
         "\".\\nYou are Granite, developed by IBM. You are a helpful AI assistant.\" %}\n"
         "{%- endif %}\n{{- '<|start_of_role|>system<|end_of_role|>' + system_message + "
         "'<|end_of_text|>\\n' }}\n{%- for message in loop_messages %}\n    {{- "
         "'<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + "
         "'<|end_of_text|>\\n' }}\n    {%- if loop.last and add_generation_prompt %}\n"
         "        {{- '<|start_of_role|>assistant<|end_of_role|>' }}\n    {%- endif %}\n"
         "{%- endfor %}", SLATE__TMPL_NONE},
        {"{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + '[/INST]' }}"
         "{% endfor %}", SLATE__TMPL_NONE}, /* Mistral v0.3: no space before [/INST] */
        {"{% for m in messages %}<|{{ m['role'] }}|>\n {{ m['content'] }}{% endfor %}"
         "{% if add_generation_prompt %}<|assistant|>{% endif %}<|user|>", SLATE__TMPL_NONE},
        {"{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}",
         SLATE__TMPL_NONE},
        {"", SLATE__TMPL_NONE},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (slate__tmpl_detect(t[i].src) != t[i].want)
            fail_msg("case %zu: detected %s, want %s", i, slate__tmpl_name(slate__tmpl_detect(t[i].src)),
                     slate__tmpl_name(t[i].want));
    assert_int_equal(slate__tmpl_detect(NULL), SLATE__TMPL_NONE);
}

static void names_round_trip_and_unknown_names_are_refused(void **unused) {
    (void)unused;
    const char *names[] = {"chatml", "qwen3", "llama3", "llama31", "llama2", "mistral",
                           "gemma", "phi3", "zephyr", "mistral-v1", "phi3-v1", "phi4-mini"};
    for (int i = 0; i < 12; i++) {
        slate__tmpl t = slate__tmpl_by_name(names[i]);
        assert_int_not_equal(t, SLATE__TMPL_NONE);
        assert_string_equal(slate__tmpl_name(t), names[i]);
        assert_non_null(strstr(slate__tmpl_names(), names[i]));
    }
    assert_int_equal(slate__tmpl_by_name("ChatML"), SLATE__TMPL_NONE);
    assert_int_equal(slate__tmpl_by_name("vicuna"), SLATE__TMPL_NONE);
    assert_int_equal(slate__tmpl_by_name(NULL), SLATE__TMPL_NONE);
    slate__buf b = {0};
    slate_error e;
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_NONE, CONV, 2, "", "", true, &b, &e),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "chatml, qwen3"));
    slate__buf_free(&b);
}

static void malformed_conversations_are_refused_naming_the_message(void **unused) {
    (void)unused;
    slate_error e;
    slate__buf b = {0};
    const slate__chat_msg assistant_first[] = {{SLATE_ROLE_ASSISTANT, "x", 1}};
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_CHATML, assistant_first, 1, "", "", true, &b, &e),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "message 0 is assistant"));
    const slate__chat_msg two_users[] = {{SLATE_ROLE_USER, "a", 1}, {SLATE_ROLE_USER, "b", 1}};
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_GEMMA, two_users, 2, "", "", true, &b, &e),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "message 1 is user"));
    const slate__chat_msg late_system[] = {{SLATE_ROLE_USER, "a", 1}, {SLATE_ROLE_SYSTEM, "s", 1}};
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_LLAMA3, late_system, 2, "", "", true, &b, &e),
                     SLATE_E_INVALID_ARG);
    const slate__chat_msg bad_role[] = {{(slate_role)7, "a", 1}};
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_PHI3, bad_role, 1, "", "", true, &b, &e),
                     SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "unknown"));
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_CHATML, NULL, 1, "", "", true, &b, &e),
                     SLATE_E_INVALID_ARG);
    slate__buf_free(&b);
}

/* Without add_generation_prompt (the session asks for it only to find message boundaries). */
static void without_generation_prompt_no_assistant_header_is_written(void **unused) {
    (void)unused;
    const struct {
        const char *name, *want;
    } t[] = {
        {"chatml", "<|im_start|>user\nHello<|im_end|>\n"},
        {"llama3", "<s><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"},
        {"gemma", "<s><start_of_turn>user\nHello<end_of_turn>\n"},
        {"phi3", "<|user|>\nHello<|end|>\n</s>"}, /* the template then writes eos_token */
        {"zephyr", "<|user|>\nHello</s>\n"},
        {"phi4-mini", "<|user|>Hello<|end|></s>"}, /* eos_token, as phi3 */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        slate__buf b = {0};
        assert_int_equal(slate__tmpl_render(slate__tmpl_by_name(t[i].name), CONV + 1, 1, "<s>",
                                            "</s>", false, &b, NULL), SLATE_OK);
        slate__buf_append(&b, "", 1);
        if (strcmp((const char *)b.data, t[i].want) != 0)
            fail_msg("%s: got '%s'", t[i].name, (const char *)b.data);
        slate__buf_free(&b);
    }
}

/* Phi-3's first template, as llama.cpp's phi-3 vocabulary file carries it: BOS, the assistant
 * header after every user message (generation prompt or not), system messages dropped by the
 * source, so refused here. It was detected as "phi3" and rendered without BOS. */
static void phi3_v1_renders_the_first_phi3_template(void **unused) {
    (void)unused;
    static const char src[] =
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}"
        "{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + "
        "'\n'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + "
        "'\n'}}{% endif %}{% endfor %}";
    assert_int_equal(slate__tmpl_detect(src), SLATE__TMPL_PHI3_V1);
    static const char want[] = "<s><|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
                               "<|user|>\nWho are you<|end|>\n<|assistant|>\n";
    for (int gen = 0; gen < 2; gen++) {
        slate__buf b = {0};
        assert_int_equal(slate__tmpl_render(SLATE__TMPL_PHI3_V1, CONV + 1, 3, "<s>", "</s>",
                                            gen, &b, NULL), SLATE_OK);
        slate__buf_append(&b, "", 1);
        assert_string_equal((const char *)b.data, want);
        slate__buf_free(&b);
    }
    slate__buf b = {0};
    slate_error e;
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_PHI3_V1, CONV, 4, "<s>", "</s>", true, &b,
                                        &e), SLATE_E_INVALID_ARG);
    assert_non_null(strstr(e.message, "phi3-v1 template (Phi-3's first) has no system role"));
    slate__buf_free(&b);
    const slate__chat_msg empty_sys[] = {{SLATE_ROLE_SYSTEM, "", 0}, CONV[1]};
    memset(&b, 0, sizeof b);
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_PHI3_V1, empty_sys, 2, "<s>", "</s>", true,
                                        &b, NULL), SLATE_OK);
    slate__buf_free(&b);
    assert_string_equal(slate__tmpl_end_of_turn(SLATE__TMPL_PHI3_V1), "<|end|>");
}

/* Phi-4-mini's template, derived by hand from its source (no whitespace outside the tags, so
 * trim_blocks changes nothing): no newline after the role header or <|end|>, an empty system
 * message kept. Detected as phi3 it would have gained those newlines; it has no literal
 * <|user|>, so it was detected as nothing and refused. */
static void phi4_mini_renders_without_newlines(void **unused) {
    (void)unused;
    assert_int_equal(slate__tmpl_detect(k_phi4_mini_src), SLATE__TMPL_PHI4_MINI);
    slate__buf b = {0};
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_PHI4_MINI, CONV, 6, "<s>", "<|endoftext|>",
                                        true, &b, NULL), SLATE_OK);
    slate__buf_append(&b, "", 1);
    assert_string_equal((const char *)b.data,
                        "<|system|>You are a helpful assistant<|end|><|user|>Hello<|end|>"
                        "<|assistant|>Hi there<|end|><|user|>Who are you<|end|><|assistant|>   I "
                        "am an assistant   <|end|><|user|>Another question<|end|><|assistant|>");
    slate__buf_free(&b);
    const slate__chat_msg empty_sys[] = {{SLATE_ROLE_SYSTEM, "", 0}, CONV[1]};
    memset(&b, 0, sizeof b);
    assert_int_equal(slate__tmpl_render(SLATE__TMPL_PHI4_MINI, empty_sys, 2, "<s>",
                                        "<|endoftext|>", true, &b, NULL), SLATE_OK);
    slate__buf_append(&b, "", 1);
    assert_string_equal((const char *)b.data, "<|system|><|end|><|user|>Hello<|end|><|assistant|>");
    slate__buf_free(&b);
    assert_string_equal(slate__tmpl_end_of_turn(SLATE__TMPL_PHI4_MINI), "<|end|>");
}

static void end_of_turn_markers_match_each_family(void **unused) {
    (void)unused;
    assert_string_equal(slate__tmpl_end_of_turn(SLATE__TMPL_CHATML), "<|im_end|>");
    assert_string_equal(slate__tmpl_end_of_turn(SLATE__TMPL_QWEN3), "<|im_end|>");
    assert_string_equal(slate__tmpl_end_of_turn(SLATE__TMPL_LLAMA3), "<|eot_id|>");
    assert_string_equal(slate__tmpl_end_of_turn(SLATE__TMPL_GEMMA), "<end_of_turn>");
    assert_string_equal(slate__tmpl_end_of_turn(SLATE__TMPL_PHI3), "<|end|>");
    assert_null(slate__tmpl_end_of_turn(SLATE__TMPL_LLAMA2));
    assert_null(slate__tmpl_end_of_turn(SLATE__TMPL_ZEPHYR));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_family_renders_known_conversations_exactly),
        cmocka_unit_test(trimming_follows_each_template),
        cmocka_unit_test(system_message_alone),
        cmocka_unit_test(qwen3_drops_reasoning_of_earlier_replies),
        cmocka_unit_test(families_are_detected_from_real_tokenizer_configs),
        cmocka_unit_test(families_are_detected_from_official_template_sources),
        cmocka_unit_test(names_round_trip_and_unknown_names_are_refused),
        cmocka_unit_test(malformed_conversations_are_refused_naming_the_message),
        cmocka_unit_test(without_generation_prompt_no_assistant_header_is_written),
        cmocka_unit_test(end_of_turn_markers_match_each_family),
        cmocka_unit_test(phi3_v1_renders_the_first_phi3_template),
        cmocka_unit_test(phi4_mini_renders_without_newlines),
    };
    return TU_RUN_TESTS_NO_LEAK(tests, NULL, NULL);
}
