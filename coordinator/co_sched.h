/* coordinator/co_sched.h — the serving scheduler: continuous batching of many generation jobs
 * through one md_ctx on a model thread of its own.
 *
 * Every step is one md_forward batch holding the decode row of every sequence that is generating
 * plus chunks of the prompts being prefilled (at most `chunk` prompt rows per step, so a long
 * prompt never stalls the others' decoding for more than a chunk). Jobs join and leave between
 * steps. Each job owns one KV slot (a sequence of the context) from admission to its end; a
 * bounded queue holds jobs waiting for a slot and submissions beyond it are refused (the caller
 * answers 503). Sampling is per job and seeded; stop ids and stop strings end a job, text comes
 * from an incremental detokenizer the caller supplies (co_text_ops).
 *
 * Threads: the model thread never touches the event loop except through uv_async_send, and the
 * loop never waits for a step: co_sched_submit and co_job_cancel only take a mutex. A job's new
 * output (tokens, text, logprobs, its end) is handed over with co_job_take in the job's callback,
 * which runs on the loop thread. */
#ifndef CO_SCHED_H
#define CO_SCHED_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "coordinator/co_buf.h"
#include "coordinator/co_metrics.h"
#include "model/md_model.h"
#include "model/md_sampler.h"
#include "util/mw_err.h"

#define CO_TOP_LOGPROBS_MAX 20

/* The text side of a job, supplied by whoever holds the tokenizer: a per-job state and these
 * calls, made on the model thread. */
typedef struct co_text_ops {
    /* Appends what token adds to the visible text and to the reasoning (chat formats with a
     * reasoning channel); bytes of an unfinished character may be held back. Returns 1 when the
     * token ends the generation (the model's or the chat format's stop token), else 0. */
    int (*piece)(void *state, int32_t token, co_buf *content, co_buf *reasoning);
    /* The generation ended: appends whatever was held back. */
    void (*flush)(void *state, co_buf *content, co_buf *reasoning);
    void (*end)(void *state); /* frees the state */
} co_text_ops;

/* What a job may sample (a response format, a forced tool call), supplied like the text side: per
 * step `mask` sets the logits of the tokens it refuses to -inf (returning how many it allows:
 * 0 ends the job with an error), then `accept` learns the token sampled (-1: refused, an error).
 * Called on the model thread. */
typedef struct co_constraint_ops {
    int64_t (*mask)(void *state, float *logits, int64_t n);
    int (*accept)(void *state, int32_t token);
    void (*end)(void *state); /* frees the state */
} co_constraint_ops;

/* A bias added to one token's logit before sampling (OpenAI's logit_bias). */
typedef struct co_logit_bias {
    int32_t token;
    float bias;
} co_logit_bias;

typedef struct co_sched_params {
    md_ctx *ctx; /* n_seq slots of n_ctx positions (not owned; used only by the model thread) */
    int n_slots;
    int64_t n_ctx;
    int64_t n_vocab;
    int n_layer;        /* for the unique-experts figure */
    int chunk;          /* prompt rows per step (>= 1) */
    int max_queue;      /* jobs waiting for a slot; submissions beyond are refused */
    const int32_t *eos; /* end-of-generation ids of jobs without text ops (copied) */
    int n_eos;
    co_metrics *metrics; /* may be NULL */
    /* Called on the model thread after every step (backend figures for the metrics). */
    void (*after_step)(void *ud);
    void *after_step_ud;
    /* With nothing to run, the model thread still calls after_step every idle_ms (0: never), so
     * what it reads out of the backend stays current on an idle server: a node lost or back
     * shows on /health without a request to notice it. */
    int idle_ms;
    /* The ctx's expert backend (may be NULL): after a step failed, its row_lost names the rows
     * to blame (they needed experts no live node serves). When some rows are, only their jobs
     * fail and the others run again next step; without it, or none: every job of the step
     * fails. */
    const md_expert_backend *experts;
    uint64_t kv_bytes_per_pos_full; /* KV bytes a position holds on full-attention layers */
    uint64_t kv_bytes_per_pos_ring; /* and on ring layers (each holds at most kv_ring positions) */
    int64_t kv_ring;
    uint64_t kv_bytes_per_seq; /* and a sequence whatever its length (KDA layers' state) */
    uint64_t cache_bytes;      /* the prompt cache's budget (co_pcache.h); 0: no cache */
} co_sched_params;

typedef struct co_sched co_sched;
typedef struct co_job co_job;

/* Starts the model thread; its wake-ups reach `loop` through an async handle. */
int co_sched_new(uv_loop_t *loop, const co_sched_params *p, co_sched **out, mw_err *err);
/* Stops the model thread after its current step; every job still running ends with an error.
 * Closes the async handle (the loop must run on to free it). */
void co_sched_free(co_sched *s);

typedef struct co_gen_params {
    const int32_t *prompt; /* copied */
    int64_t n_prompt;
    int64_t max_tokens;
    md_sampler_opts sampling; /* temperature, top-p/k, min-p, penalties (the prompt counts for
                                 the repetition penalty), seed */
    const char *const *stop;  /* copied */
    int n_stop;
    const int32_t *stop_ids; /* copied; end the job like the model's own */
    int n_stop_ids;
    const co_logit_bias *logit_bias; /* copied; added to the logits the job samples from (the
                                        logprobs and kept logits are the model's own) */
    int n_logit_bias;
    bool ignore_eos;  /* the model's end ids do not end the job */
    int top_logprobs; /* -1: no logprobs; 0..CO_TOP_LOGPROBS_MAX: the chosen token's and as many
                         alternatives */
    bool keep_logits; /* keep every sampled row's logits (co_job_logits: tests) */
    double t_arrival; /* co_now() when the request arrived (time to first token) */
    /* Text (NULL: ids only, ended by the eos ids of the scheduler). The state passes to the
     * scheduler, which ends it, also when the submission fails. */
    const co_text_ops *text;
    void *text_state;
    /* A constraint (NULL: none): the row the job samples from is a masked copy (the logprobs
     * and kept logits stay the model's own). Its state passes to the scheduler as text_state. */
    const co_constraint_ops *constraint;
    void *constraint_state;
} co_gen_params;

typedef enum co_finish {
    CO_FINISH_NONE = 0,
    CO_FINISH_STOP,      /* a stop id or stop string */
    CO_FINISH_LENGTH,    /* max_tokens */
    CO_FINISH_ERROR,     /* the step failed (a node) or the server stopped */
    CO_FINISH_CANCELLED, /* co_job_cancel */
} co_finish;

typedef struct co_logprob {
    int32_t token;
    float logprob;
    int n_top;
    int32_t top_id[CO_TOP_LOGPROBS_MAX];
    float top_lp[CO_TOP_LOGPROBS_MAX];
} co_logprob;

/* Output handed over by co_job_take: what the job produced since the last take. */
typedef struct co_job_out {
    const int32_t *tokens;
    int64_t n_tokens;
    const co_logprob *logprobs; /* n_tokens entries when asked for, else NULL */
    const char *text;           /* text of those tokens, stop strings removed */
    size_t text_len;
    const char *reasoning; /* their reasoning text (chat formats that have it) */
    size_t reasoning_len;
    co_finish finish;          /* set once, with the last output */
    int64_t prompt_tokens;     /* the prompt's length */
    int64_t cached_tokens;     /* of them, restored from the prompt cache */
    int64_t completion_tokens; /* generated so far (a stop id counts) */
    /* (layer, expert) assignments of its rows left out for want of a live owner, their gate
     * weights renormalised over the rest (--on-missing skip) */
    int64_t skipped_assignments;
    const char *error; /* CO_FINISH_ERROR: what failed */
} co_job_out;

typedef void (*co_job_cb)(void *ud, co_job *job);

typedef enum co_submit_rc {
    CO_SUBMIT_OK = 0,
    CO_SUBMIT_FULL = 1,     /* every slot busy and the queue full: 503 */
    CO_SUBMIT_INVALID = 2,  /* the request cannot run (err says why): 400 */
    CO_SUBMIT_STOPPING = 3, /* the server is shutting down: 503 */
} co_submit_rc;

/* Queues a job. cb runs on the loop thread whenever it has new output, until the output with a
 * finish reason has been taken; then the caller releases the job (co_job_release). */
co_submit_rc co_sched_submit(co_sched *s, const co_gen_params *p, co_job_cb cb, void *ud,
                             co_job **out, mw_err *err);
/* n choices of one prompt (1 .. the slots): n jobs queued together (all or none) and admitted
 * together, the prompt prefilled once by the first and its cache copied into the others' slots
 * (md_seq_copy), each then sampling its own tokens from the same last prompt row. Choice i's
 * params are p's with text state text_states[i] (every one ended by the scheduler, also when the
 * submission fails) and, for i > 0, a seed derived from p's seed and i (co_choice_seed), so that
 * each choice is its own stream and choice 0 is what a request of one choice gets. */
co_submit_rc co_sched_submit_n(co_sched *s, const co_gen_params *p, int n, void *const *text_states,
                               co_job_cb cb, void *const *uds, co_job **out, mw_err *err);
uint64_t co_choice_seed(uint64_t seed, int i);

/* Takes the pending output; the pointers stay valid until the next take or the release. */
void co_job_take(co_job *j, co_job_out *o);
/* The job's client is gone: the job ends before the next step and frees its slot; no more
 * callbacks. Releases the caller's reference. */
void co_job_cancel(co_job *j);
/* The job's client has fallen behind (paused) or caught up: a paused job leaves the batch from
 * the next step on, keeping its slot and everything it has computed, until it is resumed or
 * cancelled. */
void co_job_pause(co_job *j, bool paused);
void co_job_release(co_job *j);
/* Kept logits (keep_logits): rows × n_vocab floats, one row per sampled token. */
const float *co_job_logits(const co_job *j, int64_t *rows);

/* Refuse further submissions (SIGTERM). */
void co_sched_drain(co_sched *s);
/* Jobs running or queued. */
int co_sched_jobs(co_sched *s);
/* Jobs queued, waiting for a slot. */
int co_sched_waiting(co_sched *s);
/* Jobs it can hold at once, running and queued (slots + queue). */
int co_sched_capacity(const co_sched *s);
/* Ends every job with an error (the grace period is over). */
void co_sched_fail_all(co_sched *s, const char *why);

/* Seconds on the project's monotonic clock (mw_now_s). */
double co_now(void);

#endif
