/* coordinator/co_jinja.h — chat prompts through the model's own Jinja chat template
 * (tokenizer.chat_template in a GGUF, chat_template.jinja or tokenizer_config.json's
 * chat_template in a Hugging Face checkpoint, carried into the vindex with the tokenizer).
 *
 * The default whenever the model ships a template that parses; the C renderers
 * (tokenizer/tk_chat.h) are used when --chat-template names one, or when the model ships none.
 * The rendered text is encoded with special-token text matched (as transformers, vLLM and
 * llama.cpp do) and no BOS added: the template writes bos_token itself. */
#ifndef CO_JINJA_H
#define CO_JINJA_H

#include <jansson.h>
#include <stdbool.h>

#include "template/jj.h"
#include "tokenizer/tk.h"
#include "tokenizer/tk_chat.h"
#include "util/mw_err.h"

typedef struct co_jinja co_jinja;

/* *out = NULL (and 0) when a named format is asked for (name non-NULL) or the model has no
 * template. A template that does not parse is reported on stderr, *out NULL: the caller falls
 * back to the C renderers. */
int co_jinja_open(const tk_tokenizer *tok, const char *name, co_jinja **out, mw_err *err);
/* A template given as text (--chat-template-file); one that does not parse is an error naming
 * its line and column. */
int co_jinja_open_text(const tk_tokenizer *tok, const char *src, size_t n, co_jinja **out,
                       mw_err *err);
void co_jinja_free(co_jinja *j);

typedef struct co_jinja_opts {
    const json_t *tools;  /* a list of tool definitions, or NULL */
    const json_t *kwargs; /* chat_template_kwargs: an object, or NULL */
    int thinking;         /* -1 the template's default; else thinking_kwarg's value */
    /* the boolean kwarg the template reads to think or not (the family's: tk_chat_thinking_kwarg);
     * NULL: enable_thinking, the name most templates with a switch read */
    const char *thinking_kwarg;
    const char *reasoning_effort; /* NULL: the template's default */
    bool no_generation_prompt;
} co_jinja_opts;

/* messages (an OpenAI message list) rendered and encoded, appended to out. */
int co_jinja_prompt(const co_jinja *j, const json_t *messages, const co_jinja_opts *o, tk_ids *out,
                    mw_err *err);

/* The message list of --chat (role and content of each). */
json_t *co_jinja_msgs_json(const tk_msgs *m);

#endif
