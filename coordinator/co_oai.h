/* coordinator/co_oai.h — the OpenAI API's JSON: request bodies of /v1/completions and
 * /v1/chat/completions checked and mapped to generation parameters, and the response, chunk and
 * error objects built from a job's output.
 *
 * Every check names the field it rejects (OpenAI's error shape: message, type, param, code) and
 * says what was expected; nothing from the body is trusted (types, ranges, lengths, counts). */
#ifndef CO_OAI_H
#define CO_OAI_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "coordinator/co_buf.h"
#include "coordinator/co_oai_error.h"
#include "coordinator/co_oai_format.h"
#include "coordinator/co_sched.h"
#include "coordinator/co_stop.h"

#define CO_OAI_MAX_PROMPT_IDS (1 << 20)
#define CO_OAI_MAX_PROMPTS    256 /* prompts of one /v1/completions request */
#define CO_OAI_MAX_STOP_IDS   64
#define CO_OAI_MAX_N          16    /* choices of one request ('n') */
#define CO_OAI_LOGIT_BIAS_MAX 100.0 /* |bias| */

/* What one request may ask, so that checking and mapping it costs a bounded time (the server's
 * options; a request beyond one gets a 400 naming it). */
typedef struct co_oai_limits {
    int max_messages;          /* chat: messages (--max-messages) */
    int max_logit_bias;        /* entries of logit_bias (--max-logit-bias) */
    int64_t max_prompt_tokens; /* token ids of every prompt given as ids together
                                  (--max-prompt-tokens; text prompts are the caller's to count) */
} co_oai_limits;

/* Defaults: 2048 messages, 1024 biases, 65536 prompt tokens. */
co_oai_limits co_oai_default_limits(void);

typedef enum co_oai_kind { CO_OAI_COMPLETION = 0, CO_OAI_CHAT = 1 } co_oai_kind;

/* One completion prompt: text (pointing into the request's JSON) or token ids (owned). */
typedef struct co_oai_prompt {
    const char *text;
    int32_t *ids;
    int64_t n_ids;
} co_oai_prompt;

typedef struct co_oai_req {
    co_oai_kind kind;
    json_t *root; /* owned; the strings below point into it (until co_oai_req_detach) */
    const char *model;
    /* completions: one prompt or several (a choice each, as OpenAI's and vLLM's servers answer
     * a list of prompts); chat: the message list */
    co_oai_prompt *prompts; /* owned */
    int n_prompts;
    json_t *messages;
    bool stream, include_usage;
    int64_t max_tokens; /* -1: not given */
    double temperature, top_p;
    long long top_k; /* <= 0: off */
    double min_p, presence_penalty, frequency_penalty, repetition_penalty;
    bool has_seed;
    uint64_t seed;
    int n; /* choices per prompt, sharing its prefill (1 .. CO_OAI_MAX_N) */
    const char *stop[CO_STOP_MAX];
    int n_stop;
    int32_t stop_ids[CO_OAI_MAX_STOP_IDS];
    int n_stop_ids;
    int top_logprobs;          /* -1: none */
    co_logit_bias *logit_bias; /* owned; sorted by token, each token once */
    int n_logit_bias;
    const char *reasoning_effort; /* chat: "low" | "medium" | "high", NULL when absent */
    int thinking;                 /* chat_template_kwargs.enable_thinking: 1, 0, -1 absent */
    bool ignore_eos, return_token_ids;
    char *stop_store; /* owned: the stop strings once detached */
    co_oai_fmt fmt;   /* response_format and chat's tools (co_oai_format.h) */
} co_oai_req;

/* Parses and checks a body within lim (NULL: the defaults). 0, or -1 with e filled (a 400 naming
 * the field or the limit) and nothing held. */
int co_oai_parse(const char *body, size_t len, co_oai_kind kind, const co_oai_limits *lim,
                 co_oai_req *r, co_oai_error *e);
/* The same, giving up (status 499) as soon as *stop is true, also in the middle of the JSON: a
 * worker's parse of a large body whose client has gone. */
int co_oai_parse_stoppable(const char *body, size_t len, co_oai_kind kind, const co_oai_limits *lim,
                           const atomic_bool *stop, co_oai_req *r, co_oai_error *e);
/* Frees the JSON once the prompts and messages have been used (tokenized): the stop strings are
 * copied, and model, messages and text prompts read NULL after. -1 (e set) when memory runs out.
 * A request's JSON may be large; this lets whoever parsed it free it on the same thread. */
int co_oai_req_detach(co_oai_req *r, co_oai_error *e);
void co_oai_req_free(co_oai_req *r);

/* Names a token for logprobs: its text, or "token_id:N" without a tokenizer. */
typedef void (*co_oai_token_fn)(void *ud, int32_t token, co_buf *out);

/* What a response or a chunk carries. */
typedef struct co_oai_piece {
    const char *content; /* text (chat: the final channel) */
    size_t content_len;
    const char *reasoning; /* chat: reasoning_content (analysis channel), NULL when none */
    size_t reasoning_len;
    const int32_t *tokens;
    int64_t n_tokens;
    const co_logprob *logprobs; /* n_tokens entries or NULL */
    co_finish finish;           /* NONE in a chunk that does not end the choice */
    bool first;                 /* chat chunk: carries the role */
    /* chat: the tool calls (a message's, or a chunk's deltas), NULL: none; `called`: the choice
     * made calls, so that a stop is finish_reason "tool_calls" */
    json_t *tool_calls;
    bool called;
    int index; /* the choice's index (a completion's prompt) */
} co_oai_piece;

typedef struct co_oai_meta {
    const char *id; /* "cmpl-..." / "chatcmpl-..." */
    const char *model;
    long long created;
    co_oai_token_fn token_name;
    void *token_ud;
    bool return_token_ids;
    int64_t cached_tokens; /* usage.prompt_tokens_details.cached_tokens */
    /* usage's extension: the assignments skipped for want of a live expert owner over the
     * request (--on-missing skip); usage.moewire.skipped_assignments when above 0 */
    int64_t skipped_assignments;
} co_oai_meta;

/* A whole response of n choices (usage included: the choices' sums). */
void co_oai_response(co_oai_kind kind, const co_oai_meta *m, const co_oai_piece *p, int n,
                     int64_t prompt_tokens, int64_t completion_tokens, co_buf *out);
/* One streamed chunk (one choice). */
void co_oai_chunk(co_oai_kind kind, const co_oai_meta *m, const co_oai_piece *p, co_buf *out);
/* The last chunk of stream_options.include_usage: no choices, the usage. */
void co_oai_usage_chunk(co_oai_kind kind, const co_oai_meta *m, int64_t prompt_tokens,
                        int64_t completion_tokens, co_buf *out);

const char *co_oai_finish_name(co_finish f);

#endif
