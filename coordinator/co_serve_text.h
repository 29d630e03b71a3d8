/* coordinator/co_serve_text.h — the server's view of the model's text side (tokenizer/tk.h):
 * prompt text and chat messages to token ids, per-request streaming detokenization for the
 * scheduler (co_text_ops), token names for logprobs. A model without a tokenizer serves token-id
 * prompts only. */
#ifndef CO_SERVE_TEXT_H
#define CO_SERVE_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "coordinator/co_buf.h"
#include "coordinator/co_sched.h"
#include "grammar/gr.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"

typedef struct co_stext co_stext;

/* *out = NULL (and 0) when the source carries no tokenizer; a tokenizer that is there but cannot
 * be loaded is an error. chat_template: a format name, or NULL to recognise the model's. */
int co_stext_open(const vx_source *src, const char *chat_template, co_stext **out, mw_err *err);
/* Renders chat prompts with the Jinja template in the file at path instead of the model's
 * (--chat-template-file; at most 1 MiB); replies are parsed as before (the format named or the
 * model's family's). */
int co_stext_template_file(co_stext *t, const char *path, mw_err *err);
/* The most bytes of text one token stands for (the vocabulary's longest piece, at least 4): a
 * text of n bytes encodes to at least n / this many tokens, which bounds a prompt's length before
 * it is tokenized. */
size_t co_stext_max_token_bytes(const co_stext *t);
/* The chat format's name, or NULL when the model has none (chat requests are then refused). */
const char *co_stext_chat_name(const co_stext *t);
void co_stext_free(co_stext *t);

/* A completion prompt to ids: special-token text is matched (as llama.cpp's server does), BOS
 * added when the model asks for it. *ids is malloc'ed. */
int co_stext_encode(co_stext *t, const char *s, size_t n, int32_t **ids, int64_t *n_ids,
                    mw_err *err);
/* A chat request's rendering options (they also decide how the reply is parsed). */
typedef struct co_stext_chat_opts {
    const char *reasoning_effort; /* harmony: "low", "medium", "high"; NULL: the default */
    int thinking;                 /* formats with a thinking switch: 1 on, 0 off, -1 default */
    const json_t *tools;          /* the model's template: the request's tools, or NULL */
    const json_t *kwargs;         /* the model's template: chat_template_kwargs, or NULL */
    bool answer_open; /* the prompt opens the answer (no reasoning first): a constrained output */
    const char *tools_text; /* the C renderers: the tools list's JSON text, NULL: none */
} co_stext_chat_opts;
/* The thinking switch a request's chat_template_kwargs set by the name the family's template
 * reads (tk_chat_thinking_kwarg: Kimi K3's thinking, Qwen3's enable_thinking): 1, 0, or -1 when
 * they do not set it (or t is NULL, or the format has no switch). */
int co_stext_thinking(const co_stext *t, const json_t *kwargs);
/* An OpenAI message list (already checked by co_oai) through the model's chat template, opened
 * for the assistant's turn. */
int co_stext_chat(co_stext *t, json_t *messages, const co_stext_chat_opts *o, int32_t **ids,
                  int64_t *n_ids, mw_err *err);

/* A job's text state: plain detokenization ended by the model's end-of-generation ids, or (chat
 * non-NULL: the options the prompt was rendered with) the chat format's parser, which splits
 * reasoning from the visible text and knows the format's stop tokens. Owned by the scheduler once
 * submitted (co_gen_params.text_state). */
void *co_stext_job(co_stext *t, const co_stext_chat_opts *chat, mw_err *err);
extern const co_text_ops co_stext_ops;

/* The tokenizer itself (/tokenize, /detokenize, /props read it). */
struct tk_tokenizer;
const struct tk_tokenizer *co_stext_tokenizer(const co_stext *t);

/* A token's bytes as the vocabulary stores them (logprobs); ud is the co_stext. */
void co_stext_token_name(void *ud, int32_t token, co_buf *out);

/* The built-in chat format that parses the replies ("qwen3", "harmony", ...), NULL: none. */
const char *co_stext_format_name(const co_stext *t);

/* The vocabulary as constrained decoding's trie (co_serve_grammar.h), built on first use: token
 * bytes as they decode, the model's end-of-generation ids and the chat format's stop ids as the
 * ends. NULL with err set when it cannot be built. */
const gr_vocab *co_stext_vocab(co_stext *t, mw_err *err);

/* A job's constraint over co_stext_vocab: with call_tools (a JSON list's text of [{"name",
 * "parameters"}]) a call of one of those tools in the chat format's syntax
 * (co_grammar_call_constraint), else a value of schema (JSON text; NULL: any JSON object); then
 * an end token. NULL with err set. The state is co_grammar_constraint_ops's. */
void *co_stext_constraint(co_stext *t, const char *schema, const char *call_tools, mw_err *err);

#endif
