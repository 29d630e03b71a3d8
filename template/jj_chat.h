/* template/jj_chat.h — the variables a Hugging Face chat template is rendered with, built the way
 * transformers' apply_chat_template builds them: messages, tools (None when absent), documents
 * (None), add_generation_prompt, bos_token / eos_token, then the caller's chat_template_kwargs. */
#ifndef JJ_CHAT_H
#define JJ_CHAT_H

#include <stdbool.h>

#include "util/mw_err.h"

struct json_t;

typedef struct jj_chat_in {
    const struct json_t *messages; /* an array of message objects */
    const struct json_t *tools;    /* an array, or NULL */
    bool add_generation_prompt;
    const char *bos_token, *eos_token; /* NULL: not defined */
    const struct json_t *kwargs;       /* an object, or NULL: added last, overriding */
} jj_chat_in;

/* A new context object (the caller json_decref's it); the messages are shared, not copied. */
struct json_t *jj_chat_context(const jj_chat_in *in, mw_err *err);

/* OpenAI clients send a tool call's arguments as JSON text; templates expect the object
 * (transformers' documented form, and what vLLM and llama.cpp hand them). Returns a copy of
 * messages with every assistant tool call's "arguments" that parses as a JSON object replaced by
 * it, and the content of a message with tool calls "" where the client sent null or none (as
 * llama.cpp hands it: gpt-oss's template tests `"..." in message.content`); other messages are
 * shared. */
struct json_t *jj_chat_args_to_objects(const struct json_t *messages, mw_err *err);

#endif
