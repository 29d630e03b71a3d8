/* coordinator/co_prep.h — a generation request made ready off the event loop: its body parsed and
 * checked (co_oai), its prompts rendered and tokenized (co_serve_text) on libuv's worker threads,
 * so that the loop only moves bytes while a large request is being read.
 *
 * What a request may ask is bounded before the costly steps: the messages, logit biases and
 * prompt token ids are counted by co_oai's limits, and a text prompt is refused before it is
 * tokenized when its bytes alone mean more tokens than the context or the request's token budget
 * hold (a token stands for at most co_stext_max_token_bytes bytes). Requests with a large body
 * take at most CO_PREP_LARGE_LANES worker threads at once (the others wait their turn), so small
 * requests always find a worker free. */
#ifndef CO_PREP_H
#define CO_PREP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "coordinator/co_oai.h"
#include "coordinator/co_serve_text.h"
#include "util/mw_err.h"

#define CO_PREP_LARGE_BODY  65536 /* bytes: a body beyond is a large one */
#define CO_PREP_LARGE_LANES 2     /* large bodies prepared at once */

/* What the preparation needs to know of the server (read from the worker threads: the text side
 * must outlive the queue). */
typedef struct co_prep_params {
    co_stext *text;       /* NULL: prompts as token ids only */
    const char *model_id; /* what "model" must name */
    int64_t n_ctx;        /* positions per sequence */
    int64_t n_vocab;
    int thinking; /* chat default (--think; -1) */
    co_oai_limits limits;
} co_prep_params;

/* One prompt, ready to submit. */
typedef struct co_prep_prompt {
    int32_t *ids; /* owned */
    int64_t n_ids, max_tokens;
} co_prep_prompt;

/* A prepared request: accepted (e.status 0: req detached from its JSON, the prompts' ids) or
 * refused (e: the answer). */
typedef struct co_prep_result {
    co_oai_req req;
    co_oai_error e;
    co_stext_chat_opts chat_opts;
    co_prep_prompt *prompts;
    int k; /* prompts (chat: 1) */
} co_prep_result;

/* The whole preparation on the calling thread (what the workers run): 0, or -1 with res->e set
 * and nothing else held. stop (NULL: none) withdraws it, also in the middle of the JSON. */
int co_prep_run(const co_prep_params *p, const char *body, size_t len, co_oai_kind kind,
                const atomic_bool *stop, co_prep_result *res);
void co_prep_result_free(co_prep_result *res);

typedef struct co_prep_queue co_prep_queue;
typedef struct co_prep_job co_prep_job;

/* Called on the loop thread once a job is done: res is the job's (the callee owns what it takes
 * out of it; the rest is freed after), or NULL when the job was cancelled. */
typedef void (*co_prep_done)(void *ud, co_prep_result *res);

int co_prep_queue_new(uv_loop_t *loop, const co_prep_params *p, co_prep_queue **out, mw_err *err);
/* After the loop has run every job to its end (nothing in flight). */
void co_prep_queue_free(co_prep_queue *q);
/* Prepares body[0..len) (which must stay valid until done is called); NULL when memory runs out.
 */
co_prep_job *co_prep_submit(co_prep_queue *q, const char *body, size_t len, co_oai_kind kind,
                            co_prep_done done, void *ud);
/* Its result is no longer wanted: done is called with NULL (at once for a job still waiting its
 * turn, else when its worker has stopped: its JSON parse stops early). */
void co_prep_cancel(co_prep_job *j);

#endif
