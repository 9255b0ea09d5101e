/*
 * template.h - chat templates (internal). A package carries its chat template as Jinja source
 * (chat_template.jinja, tokenizer_config.json "chat_template" or GGUF
 * tokenizer.chat_template); slate does not run
 * Jinja. It recognizes the template's family by markers in that source and renders the family
 * in C, byte for byte as the official template does (template.c cites each source). A template
 * with no recognizable markers is refused, never guessed.
 *
 * Conversations handed to the renderer are well formed: an optional first system message, then
 * user and assistant messages alternating, starting with user (every family here requires or
 * assumes that order; the session enforces it when messages are added).
 */
#ifndef SLATE_TEMPLATE_H
#define SLATE_TEMPLATE_H

#include "core/core.h"

typedef enum slate__tmpl {
    SLATE__TMPL_NONE = 0,
    SLATE__TMPL_CHATML,  /* <|im_start|>role\n...<|im_end|>\n (Qwen2/2.5, SmolLM, OpenHermes) */
    SLATE__TMPL_QWEN3,   /* ChatML; earlier assistant replies lose their <think> block */
    SLATE__TMPL_LLAMA3,  /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    SLATE__TMPL_LLAMA31, /* Llama 3 + the "Cutting Knowledge Date" system block (3.1, 3.2) */
    SLATE__TMPL_LLAMA2,  /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s> */
    SLATE__TMPL_MISTRAL, /* <s>[INST] ... [/INST]...</s> */
    SLATE__TMPL_GEMMA,   /* <bos><start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n */
    SLATE__TMPL_PHI3,    /* <|user|>\n...<|end|>\n<|assistant|>\n */
    SLATE__TMPL_ZEPHYR,  /* <|user|>\n...</s>\n<|assistant|>\n */
    SLATE__TMPL_MISTRAL_V1, /* <s> [INST] ... [/INST] ...</s> (Mistral's 2024 v0.1/v0.2 template) */
    SLATE__TMPL_PHI3_V1, /* <s><|user|>\n...<|end|>\n<|assistant|>\n (Phi-3's first template) */
    SLATE__TMPL_PHI4_MINI, /* <|user|>...<|end|><|assistant|> (Phi-4-mini: no newlines) */
    SLATE__TMPL_COUNT
} slate__tmpl;

typedef struct slate__chat_msg {
    slate_role role;
    const char *text; /* UTF-8, need not be terminated */
    size_t len;
} slate__chat_msg;

/* The family named `name` ("chatml", "qwen3", "llama3", "llama31", "llama2", "mistral",
 * "gemma", "phi3", "zephyr", "mistral-v1", "phi3-v1", "phi4-mini"), or SLATE__TMPL_NONE. */
slate__tmpl slate__tmpl_by_name(const char *name);
/* Static name of a family ("?" for NONE or out of range). */
const char *slate__tmpl_name(slate__tmpl t);
/* Static list of the names for messages: "chatml, qwen3, llama3, ...". */
const char *slate__tmpl_names(void);
/* The family whose markers appear in a Jinja template source (NUL-terminated), or NONE. */
slate__tmpl slate__tmpl_detect(const char *jinja);
/* Text that ends an assistant turn in this family ("<|im_end|>"), or NULL where the turn ends
 * with the EOS token (llama2, mistral, zephyr, mistral-v1). Static. */
const char *slate__tmpl_end_of_turn(slate__tmpl t);

/* Renders msgs[0..n) in family t and appends the text to out. bos, eos: the tokenizer's BOS and
 * EOS text ("<s>", "</s>"; "" when it has none), placed where the family's template puts
 * bos_token / eos_token. add_generation_prompt: end with the header that opens the assistant's
 * reply (families without one, like llama2 and mistral, end at "[/INST]" anyway).
 * Returns OK, E_INVALID_ARG (unknown family, or a conversation that is not well formed: the
 * message names the index and the role found), E_NOMEM. On failure out may hold a partial
 * rendering (callers discard it). */
slate_status slate__tmpl_render(slate__tmpl t, const slate__chat_msg *msgs, int32_t n,
                                const char *bos, const char *eos, bool add_generation_prompt,
                                slate__buf *out, slate_error *err);

/* slate__tmpl_render that also appends to spans (when not NULL) a pair of size_t {start, end}
 * for each stretch of message text in out (offsets into out->data, ascending): the stretches
 * whose special-token spellings must stay plain text (slate__tok_encode_spans). */
slate_status slate__tmpl_render_spans(slate__tmpl t, const slate__chat_msg *msgs, int32_t n,
                                      const char *bos, const char *eos,
                                      bool add_generation_prompt, slate__buf *out,
                                      slate__buf *spans, slate_error *err);

/* The family for a model: `name` if given (E_INVALID_ARG if unknown), else the one detected in
 * the model's Jinja template (E_UNSUPPORTED if the model has none or it matches no family; the
 * message lists the known names). Never guesses. */
slate_status slate__tmpl_choose(const char *model_template, const char *name, slate__tmpl *out,
                                slate_error *err);
/* The text of special token `id` (BOS/EOS) as templates spell it, malloc'd; "" for id < 0. */
slate_status slate__tmpl_token_text(const slate_tokenizer *tok, int32_t id, char **out,
                                    slate_error *err);

#endif /* SLATE_TEMPLATE_H */
