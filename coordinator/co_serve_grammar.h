/* coordinator/co_serve_grammar.h — constrained decoding for the server: the model's vocabulary as
 * the grammar's trie (grammar/gr.h), built once on first use, and a job's constraint (a
 * co_constraint_ops state) from a response format's schema. */
#ifndef CO_SERVE_GRAMMAR_H
#define CO_SERVE_GRAMMAR_H

#include <pthread.h>

#include "coordinator/co_sched.h"
#include "grammar/gr.h"
#include "util/mw_err.h"

typedef struct co_stext co_stext;
struct tk_tokenizer;
struct tk_chat;

/* The trie of a co_stext, built under its lock by the first request that needs it. */
typedef struct co__stext_vocab {
    pthread_mutex_t mu;
    gr_vocab *v;
    char err[MW_ERR_MAX]; /* a build that failed, said again to every request after */
} co__stext_vocab;
void co__stext_vocab_init(co__stext_vocab *v);
void co__stext_vocab_free(co__stext_vocab *v);

/* The built-in chat format that parses the replies ("qwen3", "harmony", ...), NULL: none. */
const char *co_stext_format_name(const co_stext *t);

/* co_serve_text's parts this file reads. */
const struct tk_tokenizer *co__stext_tokenizer(const co_stext *t);
const struct tk_chat *co__stext_chat(const co_stext *t);
co__stext_vocab *co__stext_vocab_of(co_stext *t);

/* A tokenizer's vocabulary as the grammar's: each token's bytes as it decodes (control tokens:
 * none), the ends the chat format's stop tokens (chat NULL: the model's end-of-generation ids). */
gr_vocab *co_grammar_vocab_new(const struct tk_tokenizer *tok, const struct tk_chat *chat,
                               mw_err *err);

/* The vocabulary's trie: token bytes as they decode, the model's end-of-generation ids and the
 * chat format's stop ids as the ends. NULL with err set when it cannot be built. */
const gr_vocab *co_stext_vocab(co_stext *t, mw_err *err);

/* A job's constraint: the output is a value of schema (JSON text; NULL: any JSON object) between
 * the literal texts before and after (NULL: none), then an end token. NULL with err set. Owned
 * by the scheduler once submitted. */
void *co_stext_constraint(co_stext *t, const char *schema, const char *before, const char *after,
                          mw_err *err);
extern const co_constraint_ops co_stext_constraint_ops;

#endif
