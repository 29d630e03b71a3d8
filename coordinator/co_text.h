/* coordinator/co_text.h — the server's view of the model's text side: prompt text and chat
 * messages to token ids, generated ids back to text as they stream, token names for logprobs, the
 * model's end-of-generation ids. A model without a tokenizer serves token-id prompts only. */
#ifndef CO_TEXT_H
#define CO_TEXT_H

#include <jansson.h>
#include <stdint.h>

#include "coordinator/co_buf.h"
#include "coordinator/co_sched.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"

typedef struct co_text co_text;

/* *out = NULL (and 0) when the source carries no tokenizer. */
int co_text_open(const vx_source *src, co_text **out, mw_err *err);
void co_text_free(co_text *t);

/* Plain text to ids (special-token text is not matched; BOS as the model asks). */
int co_text_encode(co_text *t, const char *s, size_t n, int32_t **ids, int64_t *n_ids, mw_err *err);
/* An OpenAI message list through the model's chat template, ready for the assistant's turn. */
int co_text_chat(co_text *t, json_t *messages, int32_t **ids, int64_t *n_ids, mw_err *err);
/* Incremental detokenization for the scheduler. */
co_text_ops co_text_stream_ops(co_text *t);
/* A token's text (bytes as stored; logprobs). */
void co_text_token_name(void *t, int32_t token, co_buf *out);
/* The ids that end a generation. */
int co_text_eos(const co_text *t, const int32_t **ids);

#endif
