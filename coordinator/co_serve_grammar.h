/* coordinator/co_serve_grammar.h — constrained decoding for the server: a tokenizer's vocabulary
 * as the grammar's trie (grammar/gr.h), kept built once on first use, and a job's constraint (a
 * co_constraint_ops state) from a response format's schema. It knows nothing of the server's text
 * side (co_serve_text.h), which holds one trie and hands it the tokenizer and chat format. */
#ifndef CO_SERVE_GRAMMAR_H
#define CO_SERVE_GRAMMAR_H

#include <pthread.h>

#include "coordinator/co_sched.h"
#include "grammar/gr.h"
#include "util/mw_err.h"

struct tk_tokenizer;
struct tk_chat;

/* A trie built under its lock by the first request that needs it. */
typedef struct co_grammar_trie {
    pthread_mutex_t mu;
    gr_vocab *v;
    char err[MW_ERR_MAX]; /* a build that failed, said again to every request after */
} co_grammar_trie;
void co_grammar_trie_init(co_grammar_trie *t);
void co_grammar_trie_free(co_grammar_trie *t);

/* The trie of tok's vocabulary (built now if it is not yet): token bytes as they decode, the
 * model's end-of-generation ids and the chat format's stop ids as the ends. NULL with err set
 * when it cannot be built. */
const gr_vocab *co_grammar_trie_get(co_grammar_trie *t, const struct tk_tokenizer *tok,
                                    const struct tk_chat *chat, mw_err *err);

/* The byte that opens a marker token's bytes in the vocabulary: never in UTF-8, so no JSON value
 * holds a marker, and a raw byte token cannot spell one. */
#define CO_GRAMMAR_MARK '\xff'

/* A tokenizer's vocabulary as the grammar's: each token's bytes as it decodes (control tokens:
 * none, except the chat format's tool-call markers, co_toolcall_specials, which are MARK and
 * their text: a forced call's text names them so, and nothing else can match them), the ends the
 * chat format's stop tokens (chat NULL: the model's end-of-generation ids). A token holding the
 * byte MARK (a raw byte token) is never allowed. */
gr_vocab *co_grammar_vocab_new(const struct tk_tokenizer *tok, const struct tk_chat *chat,
                               mw_err *err);

/* A job's constraint over vocabulary v: the output is a value of schema (JSON text; NULL: any JSON
 * object), then an end token. NULL with err set. Owned by the scheduler once submitted. */
void *co_grammar_constraint(const gr_vocab *v, const char *schema, mw_err *err);
/* The same for a forced tool call in the chat format `chat` (co_toolcall.h): tools is a JSON
 * list's text of [{"name", "parameters"}] (the tools the call may be of); the output is a call of
 * one of them, its arguments a value of that tool's parameters. */
void *co_grammar_call_constraint(const gr_vocab *v, const char *chat, const char *tools,
                                 mw_err *err);
extern const co_constraint_ops co_grammar_constraint_ops;

#endif
