/* coordinator/co_sched.c — the serving scheduler (co_sched.h): admission, the step loop on the
 * model thread, sampling and stop conditions per job, and the handoff of output to the loop.
 *
 * Locking: s->mu guards the submission queue, the flags and every job's pending output and
 * reference count. The model thread keeps its own list of admitted jobs (no lock needed to read
 * them) and takes the mutex once per step to publish what the step produced. */
#include "coordinator/co_sched.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coordinator/co_pcache.h"
#include "coordinator/co_stop.h"
#include "model/md_sampler.h"
#include "util/mw_grow.h"
#include "util/mw_time.h"

#define ERR_MAX 512

struct co_job {
    co_sched *s;
    int refs; /* under s->mu: the caller's, the scheduler's, one per pending callback */
    co_job_cb cb;
    void *ud;
    bool cancelled; /* under s->mu */
    bool pause_req; /* under s->mu: the loop's co_job_pause */
    bool paused;    /* model thread: out of the batch (pause_req as of the last admission) */
    /* parameters (owned copies) */
    int32_t *prompt; /* then, with the prompt cache, the generated tokens fed after it */
    size_t prompt_cap;
    int64_t n_prompt, max_tokens;
    int32_t *stop_ids;
    int n_stop_ids;
    bool ignore_eos, keep_logits;
    int top_logprobs;
    co_logit_bias *bias; /* sorted by token */
    float *bias_saved;   /* the biased tokens' own logits during a sample */
    int n_bias;
    double t_arrival;
    co_stop stop;
    /* model-thread state */
    int slot;
    int64_t n_fed;  /* prompt rows through the model */
    int64_t n_past; /* positions in the slot */
    int64_t n_gen;
    int64_t n_cached;        /* prompt positions restored from the prompt cache */
    bool prompt_counted;     /* in the metrics' prompt tokens */
    co_pcache_cursor cursor; /* the slot's blocks in the prompt cache */
    int n_group;             /* choices of the prompt this job leads the prefill of (1: alone) */
    co_job *leader;          /* model thread: the job prefilling this one's prompt, until forked */
    bool forked;             /* its slot is a copy of the leader's prefilled one */
    bool restore;    /* admitted: its prompt is looked up in the prompt cache before its step */
    int64_t skipped; /* its rows' assignments skipped for want of a live owner */
    int32_t next;    /* sampled, to be fed */
    md_sampler_opts sampling; /* checked at submission; the sampler is made at admission, so a
                                 queued request holds none of its memory */
    md_sampler sampler;
    bool sampler_ok;
    const co_text_ops *text;
    void *text_state;
    const co_constraint_ops *cons;
    void *cons_state;
    float *masked; /* with a constraint: the row it samples from */
    double t_last;
    co_buf piece, rpiece, shown; /* this token's text and reasoning; the text after stop strings */
    bool done;                   /* finished on the model thread (removed at the step's end) */
    co_finish finish;
    char error[ERR_MAX];
    float *logits; /* keep_logits */
    size_t logits_cap;
    int64_t logits_rows;
    co_job *next_active, *next_wait;
    /* pending output (under s->mu) */
    int32_t *p_tok;
    co_logprob *p_lp;
    size_t p_tok_cap, p_lp_cap;
    int64_t p_n;
    co_buf p_text, p_reason;
    co_finish p_finish;
    bool p_ready; /* on the ready list */
    co_job *next_ready;
    co_job *next_taken; /* the loop's walk of a ready list it took (loop thread only) */
    /* taken output (the loop's copy) */
    int32_t *t_tok;
    co_logprob *t_lp;
    size_t t_tok_cap, t_lp_cap;
    co_buf t_text, t_reason;
    char t_error[ERR_MAX];
    bool finish_taken;
};

struct co_sched {
    co_sched_params p;
    int32_t *eos;
    uv_async_t async;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, draining;
    char fail_all[ERR_MAX]; /* non-empty: end every job with this error */
    co_job *wait_head, *wait_tail;
    int n_wait;
    co_job *ready; /* jobs with output for the loop */
    /* model thread */
    co_job *active; /* admission order */
    int n_active;
    int *free_slots; /* under mu (submission counts them) */
    int n_free;
    co_job **slot_job; /* [slot]: the admitted job holding it, NULL while free */
    md_row *rows;
    co_job **row_job; /* per logits row: its job */
    size_t rows_cap, row_job_cap;
    float *logits;
    size_t logits_cap;
    co_pcache *cache; /* the prompt cache (model thread), NULL: none */
    float *fork_row;  /* n_vocab: a leader's last prompt row, sampled by each choice it leads */
};

double co_now(void) {
    return mw_now_s();
}

/* ---- jobs ----------------------------------------------------------------------------------- */

static void job_end_text(co_job *j) {
    if (j->text && j->text->end && j->text_state) j->text->end(j->text_state);
    j->text_state = NULL;
}

static void job_free(co_job *j) {
    job_end_text(j);
    if (j->cons && j->cons->end && j->cons_state) j->cons->end(j->cons_state);
    free(j->masked);
    free(j->prompt);
    free(j->stop_ids);
    free(j->bias);
    free(j->bias_saved);
    co_stop_free(&j->stop);
    if (j->sampler_ok) md_sampler_free(&j->sampler);
    co_buf_free(&j->piece);
    co_buf_free(&j->rpiece);
    co_buf_free(&j->shown);
    co_buf_free(&j->p_reason);
    co_buf_free(&j->t_reason);
    free(j->logits);
    free(j->p_tok);
    free(j->p_lp);
    co_buf_free(&j->p_text);
    free(j->t_tok);
    free(j->t_lp);
    co_buf_free(&j->t_text);
    free(j);
}

/* Under s->mu; returns true when the job is to be freed (outside the lock). */
static bool unref_locked(co_job *j) {
    return --j->refs == 0;
}

void co_job_release(co_job *j) {
    co_sched *s = j->s;
    pthread_mutex_lock(&s->mu);
    bool last = unref_locked(j);
    pthread_mutex_unlock(&s->mu);
    if (last) job_free(j);
}

void co_job_cancel(co_job *j) {
    co_sched *s = j->s;
    pthread_mutex_lock(&s->mu);
    j->cancelled = true;
    bool last = unref_locked(j);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (last) job_free(j);
}

void co_job_pause(co_job *j, bool paused) {
    co_sched *s = j->s;
    pthread_mutex_lock(&s->mu);
    j->pause_req = paused;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void co_job_take(co_job *j, co_job_out *o) {
    co_sched *s = j->s;
    pthread_mutex_lock(&s->mu);
    /* swap the pending buffers into the taken ones */
    int32_t *tt = j->t_tok;
    size_t ttc = j->t_tok_cap;
    j->t_tok = j->p_tok;
    j->t_tok_cap = j->p_tok_cap;
    j->p_tok = tt;
    j->p_tok_cap = ttc;
    co_logprob *tl = j->t_lp;
    size_t tlc = j->t_lp_cap;
    j->t_lp = j->p_lp;
    j->t_lp_cap = j->p_lp_cap;
    j->p_lp = tl;
    j->p_lp_cap = tlc;
    co_buf tx = j->t_text;
    j->t_text = j->p_text;
    j->p_text = tx;
    co_buf_clear(&j->p_text);
    tx = j->t_reason;
    j->t_reason = j->p_reason;
    j->p_reason = tx;
    co_buf_clear(&j->p_reason);
    *o = (co_job_out){.reasoning = j->t_reason.p ? j->t_reason.p : "",
                      .reasoning_len = j->t_reason.len,
                      .tokens = j->t_tok,
                      .n_tokens = j->p_n,
                      .logprobs = j->top_logprobs >= 0 && j->p_n ? j->t_lp : NULL,
                      .text = j->t_text.p ? j->t_text.p : "",
                      .text_len = j->t_text.len,
                      .finish = j->finish_taken ? CO_FINISH_NONE : j->p_finish,
                      .prompt_tokens = j->n_prompt,
                      .cached_tokens = j->n_cached,
                      .completion_tokens = j->n_gen,
                      .skipped_assignments = j->skipped};
    if (o->finish) {
        j->finish_taken = true;
        memcpy(j->t_error, j->error, ERR_MAX);
        o->error = j->finish == CO_FINISH_ERROR ? j->t_error : NULL;
    }
    j->p_n = 0;
    pthread_mutex_unlock(&s->mu);
}

const float *co_job_logits(const co_job *j, int64_t *rows) {
    *rows = j->logits_rows;
    return j->logits;
}

/* ---- the loop side -------------------------------------------------------------------------- */

static void on_async(uv_async_t *a) {
    co_sched *s = a->data;
    /* The walk follows next_taken, which only this thread writes: once p_ready is false the
     * model thread may put a job on the next ready list (rewriting next_ready) while it is
     * still on this one. */
    pthread_mutex_lock(&s->mu);
    co_job *list = s->ready;
    s->ready = NULL;
    for (co_job *j = list; j; j = j->next_ready) {
        j->p_ready = false;
        j->next_taken = j->next_ready;
    }
    pthread_mutex_unlock(&s->mu);
    while (list) {
        co_job *j = list;
        list = j->next_taken;
        pthread_mutex_lock(&s->mu);
        bool live = !j->cancelled && !j->finish_taken;
        pthread_mutex_unlock(&s->mu);
        if (live) j->cb(j->ud, j);
        co_job_release(j); /* the ready list's reference */
    }
}

/* Under s->mu: puts the job on the ready list (one reference while there). */
static void mark_ready(co_sched *s, co_job *j) {
    if (j->p_ready) return;
    j->p_ready = true;
    j->refs++;
    j->next_ready = s->ready;
    s->ready = j;
}

/* ---- submission ----------------------------------------------------------------------------- */

/* The request's own checks: lengths against the context, ids against the vocabulary. */
static bool params_ok(const co_sched *s, const co_gen_params *p, mw_err *err) {
    if (p->n_prompt < 1) {
        mw_errf(err, "the prompt is empty");
        return false;
    }
    if (p->n_prompt >= s->p.n_ctx) {
        mw_errf(err,
                "the prompt has %lld tokens; this server's context holds %lld positions per "
                "sequence, prompt and completion together",
                (long long)p->n_prompt, (long long)s->p.n_ctx);
        return false;
    }
    if (p->max_tokens < 1 || p->n_prompt + p->max_tokens - 1 > s->p.n_ctx) {
        mw_errf(err,
                "max_tokens %lld with a prompt of %lld tokens needs %lld positions; the context "
                "holds %lld",
                (long long)p->max_tokens, (long long)p->n_prompt,
                (long long)(p->n_prompt + p->max_tokens - 1), (long long)s->p.n_ctx);
        return false;
    }
    for (int64_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= s->p.n_vocab) {
            mw_errf(err, "token id %d (prompt position %lld) is not in the vocabulary of %lld",
                    p->prompt[i], (long long)i, (long long)s->p.n_vocab);
            return false;
        }
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] < 0 || p->stop_ids[i] >= s->p.n_vocab) {
            mw_errf(err, "stop token id %d is not in the vocabulary of %lld", p->stop_ids[i],
                    (long long)s->p.n_vocab);
            return false;
        }
    if (p->n_logit_bias < 0 || p->n_logit_bias > s->p.n_vocab) {
        mw_errf(err, "%d logit biases for a vocabulary of %lld", p->n_logit_bias,
                (long long)s->p.n_vocab);
        return false;
    }
    for (int i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].token < 0 || p->logit_bias[i].token >= s->p.n_vocab ||
            !isfinite(p->logit_bias[i].bias)) {
            mw_errf(err,
                    "logit bias %g for token %d: not a finite bias of a token in the "
                    "vocabulary of %lld",
                    (double)p->logit_bias[i].bias, p->logit_bias[i].token, (long long)s->p.n_vocab);
            return false;
        }
    if (p->top_logprobs > CO_TOP_LOGPROBS_MAX) {
        mw_errf(err, "at most %d top logprobs", CO_TOP_LOGPROBS_MAX);
        return false;
    }
    return true;
}

/* A job holding copies of the request (and, from *taken on, its text state: job_free ends it),
 * or NULL. */
static co_job *job_new(co_sched *s, const co_gen_params *p, co_job_cb cb, void *ud, bool *taken,
                       mw_err *err) {
    co_job *j = calloc(1, sizeof *j);
    if (!j) {
        mw_errf(err, "out of memory");
        return NULL;
    }
    j->s = s;
    j->cb = cb;
    j->ud = ud;
    j->n_prompt = p->n_prompt;
    j->max_tokens = p->max_tokens;
    j->ignore_eos = p->ignore_eos;
    j->keep_logits = p->keep_logits;
    j->top_logprobs = p->top_logprobs;
    j->t_arrival = p->t_arrival ? p->t_arrival : co_now();
    j->slot = -1;
    j->text = p->text;
    j->text_state = p->text_state;
    j->cons = p->constraint;
    j->cons_state = p->constraint_state;
    *taken = true;
    j->prompt_cap = (size_t)p->n_prompt;
    j->prompt = malloc((size_t)p->n_prompt * sizeof *j->prompt);
    j->stop_ids = malloc(((size_t)p->n_stop_ids + 1) * sizeof *j->stop_ids);
    if (!j->prompt || !j->stop_ids) {
        job_free(j);
        mw_errf(err, "out of memory");
        return NULL;
    }
    if (p->n_logit_bias) {
        j->bias = malloc((size_t)p->n_logit_bias * sizeof *j->bias);
        j->bias_saved = malloc((size_t)p->n_logit_bias * sizeof *j->bias_saved);
        if (!j->bias || !j->bias_saved) {
            job_free(j);
            mw_errf(err, "out of memory");
            return NULL;
        }
        memcpy(j->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *j->bias);
        j->n_bias = p->n_logit_bias;
    }
    memcpy(j->prompt, p->prompt, (size_t)p->n_prompt * sizeof *j->prompt);
    if (p->n_stop_ids) memcpy(j->stop_ids, p->stop_ids, (size_t)p->n_stop_ids * sizeof(int32_t));
    j->n_stop_ids = p->n_stop_ids;
    if (co_stop_init(&j->stop, p->stop, p->n_stop, err)) {
        job_free(j);
        return NULL;
    }
    if (md_sampler_check(s->p.n_vocab, &p->sampling, err)) {
        job_free(j);
        return NULL;
    }
    j->sampling = p->sampling;
    return j;
}

/* Queues the n jobs of one submission together (all or none: refused when shutting down or the
 * queue is full, and then freed). */
static co_submit_rc enqueue(co_sched *s, co_job **js, int n, mw_err *err) {
    pthread_mutex_lock(&s->mu);
    co_submit_rc rc = CO_SUBMIT_OK;
    if (s->draining || s->stop) {
        rc = CO_SUBMIT_STOPPING;
        mw_errf(err, "the server is shutting down");
    } else if (s->n_wait + n > s->p.max_queue + s->n_free) {
        rc = CO_SUBMIT_FULL;
        mw_errf(err, "the server is at capacity (%d sequences running, %d queued)", s->p.n_slots,
                s->n_wait);
    } else {
        for (int i = 0; i < n; i++) {
            js[i]->refs = 2;
            if (s->wait_tail)
                s->wait_tail->next_wait = js[i];
            else
                s->wait_head = js[i];
            s->wait_tail = js[i];
            s->n_wait++;
        }
        pthread_cond_signal(&s->cv);
    }
    int n_wait = s->n_wait;
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        for (int i = 0; i < n; i++) job_free(js[i]);
        return rc;
    }
    if (s->p.metrics) co_metrics_queue(s->p.metrics, -1, n_wait);
    return CO_SUBMIT_OK;
}

uint64_t co_choice_seed(uint64_t seed, int i) {
    if (i == 0) return seed;
    uint64_t z = seed + (uint64_t)i * 0x9E3779B97F4A7C15ull; /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The jobs of the n choices (the first leads the prefill); *taken: how many text states jobs
 * took (their own, or ended). */
static co_submit_rc make_jobs(co_sched *s, const co_gen_params *p, int n, void *const *texts,
                              co_job_cb cb, void *const *uds, co_job **js, int *taken,
                              mw_err *err) {
    if (n < 1 || n > s->p.n_slots) {
        mw_errf(err, "%d choices need as many sequence slots at once; this server has %d", n,
                s->p.n_slots);
        return CO_SUBMIT_INVALID;
    }
    if (!params_ok(s, p, err)) return CO_SUBMIT_INVALID;
    for (int i = 0; i < n; i++) {
        co_gen_params gp = *p;
        gp.text_state = texts ? texts[i] : NULL;
        gp.sampling.seed = co_choice_seed(p->sampling.seed, i);
        /* a constraint is one job's (a request with one takes a single choice: co_oai) */
        if (i > 0) gp.constraint = NULL, gp.constraint_state = NULL;
        bool took = false;
        js[i] = job_new(s, &gp, cb, uds[i], &took, err);
        if (took) *taken = i + 1;
        if (!js[i]) {
            for (int k = 0; k < i; k++) job_free(js[k]);
            return CO_SUBMIT_INVALID;
        }
    }
    js[0]->n_group = n;
    for (int i = 1; i < n; i++) js[i]->leader = js[0];
    return CO_SUBMIT_OK;
}

co_submit_rc co_sched_submit_n(co_sched *s, const co_gen_params *p, int n, void *const *texts,
                               co_job_cb cb, void *const *uds, co_job **out, mw_err *err) {
    co_job **js = calloc(n > 0 ? (size_t)n : 1, sizeof *js);
    int taken = 0;
    co_submit_rc rc = CO_SUBMIT_INVALID;
    if (!js)
        mw_errf(err, "out of memory");
    else if ((rc = make_jobs(s, p, n, texts, cb, uds, js, &taken, err)) == CO_SUBMIT_OK) {
        taken = n;
        rc = enqueue(s, js, n, err);
    }
    for (int i = 0; i < n; i++) out[i] = rc == CO_SUBMIT_OK ? js[i] : NULL;
    /* refused before a job took its text state (the first, its constraint): ended here */
    for (int i = taken; texts && i < n; i++)
        if (p->text && p->text->end && texts[i]) p->text->end(texts[i]);
    if (taken == 0 && p->constraint && p->constraint->end && p->constraint_state)
        p->constraint->end(p->constraint_state);
    free(js);
    return rc;
}

co_submit_rc co_sched_submit(co_sched *s, const co_gen_params *p, co_job_cb cb, void *ud,
                             co_job **out, mw_err *err) {
    void *text = p->text_state;
    return co_sched_submit_n(s, p, 1, &text, cb, &ud, out, err);
}

void co_sched_drain(co_sched *s) {
    pthread_mutex_lock(&s->mu);
    s->draining = true;
    pthread_mutex_unlock(&s->mu);
}

int co_sched_jobs(co_sched *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_wait + s->n_active;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int co_sched_waiting(co_sched *s) {
    pthread_mutex_lock(&s->mu);
    const int n = s->n_wait;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int co_sched_capacity(const co_sched *s) {
    return s->p.n_slots + s->p.max_queue;
}

void co_sched_fail_all(co_sched *s, const char *why) {
    pthread_mutex_lock(&s->mu);
    snprintf(s->fail_all, sizeof s->fail_all, "%s", why);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the model thread ----------------------------------------------------------------------- */

static void job_end(co_job *j, co_finish f, const char *error) {
    if (j->done) return;
    j->done = true;
    j->finish = f;
    if (error) snprintf(j->error, sizeof j->error, "%s", error);
}

static bool is_stop_id(const co_sched *s, const co_job *j, int32_t tok) {
    for (int i = 0; i < j->n_stop_ids; i++)
        if (j->stop_ids[i] == tok) return true;
    if (!j->ignore_eos)
        for (int i = 0; i < s->p.n_eos; i++)
            if (s->eos[i] == tok) return true;
    return false;
}

/* log-softmax of the chosen token and the best `n` alternatives. */
static void fill_logprob(const float *x, int64_t V, int32_t tok, int n, co_logprob *lp) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < V; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0;
    for (int64_t i = 0; i < V; i++) sum += exp((double)x[i] - mx);
    const double lse = mx + log(sum);
    lp->token = tok;
    lp->logprob = (float)(x[tok] - lse);
    lp->n_top = 0;
    for (int64_t i = 0; i < V && n > 0; i++) {
        float v = x[i];
        if (isnan(v)) continue;
        int k = lp->n_top;
        if (k == n && v <= lp->top_lp[k - 1]) continue;
        if (k < n)
            lp->n_top++;
        else
            k = n - 1;
        while (k > 0 && lp->top_lp[k - 1] < v) {
            lp->top_lp[k] = lp->top_lp[k - 1];
            lp->top_id[k] = lp->top_id[k - 1];
            k--;
        }
        lp->top_lp[k] = v;
        lp->top_id[k] = (int32_t)i;
    }
    for (int k = 0; k < lp->n_top; k++) lp->top_lp[k] = (float)(lp->top_lp[k] - lse);
}

/* Samples from the row with the job's logit biases added (then the sampler's penalties); the row is
 * the model's own again after (the same bits: the saved entries are put back in reverse, not the
 * biases subtracted). With a constraint the sample comes from a masked copy of the row. -1 with
 * err set when the sampler cannot record the token or the constraint leaves nothing. */
static int32_t sample(co_job *j, float *logits, int64_t V, mw_err *err) {
    if (j->cons) {
        if (!j->masked && !(j->masked = malloc((size_t)V * sizeof *j->masked)))
            return mw_errf(err, "out of memory");
        memcpy(j->masked, logits, (size_t)V * sizeof *logits);
        if (j->cons->mask(j->cons_state, j->masked, V) <= 0)
            return mw_errf(err, "the response format allows no token here");
        logits = j->masked;
    }
    for (int i = 0; i < j->n_bias; i++) {
        j->bias_saved[i] = logits[j->bias[i].token];
        logits[j->bias[i].token] += j->bias[i].bias;
    }
    const int32_t tok = md_sample(&j->sampler, logits);
    for (int i = j->n_bias - 1; i >= 0; i--) logits[j->bias[i].token] = j->bias_saved[i];
    if (j->cons && j->cons->accept(j->cons_state, tok) < 0)
        return mw_errf(err, "the response format refused token %d", tok);
    return md_sampler_feed(&j->sampler, &tok, 1, true, err) ? -1 : tok;
}

/* The sampled token counted: the job's length, its latencies, the logits row it came from
 * (keep_logits); false when that row could not be kept. */
static bool count_token(co_sched *s, co_job *j, const float *logits, double t) {
    const int64_t V = s->p.n_vocab;
    j->n_gen++;
    if (s->p.metrics) {
        if (j->n_gen == 1)
            co_metrics_ttft(s->p.metrics, t - j->t_arrival);
        else
            co_metrics_itl(s->p.metrics, t - j->t_last);
        co_metrics_generated_tokens(s->p.metrics, 1);
    }
    j->t_last = t;
    if (!j->keep_logits) return true;
    if (mw_grow((void **)&j->logits, &j->logits_cap, (size_t)(j->logits_rows + 1) * (size_t)V,
                sizeof(float)))
        return false;
    memcpy(j->logits + j->logits_rows * V, logits, (size_t)V * sizeof(float));
    j->logits_rows++;
    return true;
}

/* How a token ends its job (none of them: it goes on). */
typedef struct tok_end {
    bool stop_id;  /* a stop id, or the text's own end (unless ignore_eos) */
    bool stop_str; /* a stop string completed */
    bool length;   /* max_tokens reached */
} tok_end;

/* The token's text: its piece and reasoning from the detokenizer (all that was held back when
 * the job ends), then the stop strings, leaving in j->shown what the client sees of it. */
static tok_end token_text(const co_sched *s, co_job *j, int32_t tok) {
    tok_end e = {0};
    co_buf_clear(&j->piece);
    co_buf_clear(&j->rpiece);
    co_buf_clear(&j->shown);
    const bool stop_tok = j->text && j->text->piece(j->text_state, tok, &j->piece, &j->rpiece) == 1;
    e.stop_id = is_stop_id(s, j, tok) || (stop_tok && !j->ignore_eos);
    if (e.stop_id) co_buf_clear(&j->piece); /* a stop token shows no text */
    e.length = j->n_gen >= j->max_tokens;
    if ((e.stop_id || e.length) && j->text && j->text->flush)
        j->text->flush(j->text_state, &j->piece, &j->rpiece);
    e.stop_str = co_stop_feed(&j->stop, j->piece.p ? j->piece.p : "", j->piece.len, &j->shown);
    if (!e.stop_str && (e.stop_id || e.length)) co_stop_flush(&j->stop, &j->shown);
    return e;
}

/* Hands the token, its logprob (lp: NULL when not asked for) and its text to the loop: appended to
 * the job's pending output, the job marked ready. False when memory ran out (the job is marked
 * ready all the same: its error follows). */
static bool publish(co_sched *s, co_job *j, int32_t tok, const co_logprob *lp, bool stop_str) {
    bool ok = false;
    pthread_mutex_lock(&s->mu);
    if (!mw_grow((void **)&j->p_tok, &j->p_tok_cap, (size_t)j->p_n + 1, sizeof *j->p_tok) &&
        (!lp || !mw_grow((void **)&j->p_lp, &j->p_lp_cap, (size_t)j->p_n + 1, sizeof *j->p_lp))) {
        j->p_tok[j->p_n] = tok;
        if (lp) j->p_lp[j->p_n] = *lp;
        j->p_n++;
        co_buf_add(&j->p_text, j->shown.p ? j->shown.p : "", j->shown.len);
        if (!stop_str) co_buf_add(&j->p_reason, j->rpiece.p ? j->rpiece.p : "", j->rpiece.len);
        ok = !j->p_text.failed && !j->p_reason.failed;
    }
    mark_ready(s, j);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* A logits row for job j: sample and count the token, its text, hand it to the loop, and decide
 * whether the job ends. An allocation that fails ends the request with an error: a token,
 * logprob, logits row or piece of text is never dropped silently. */
static void job_token(co_sched *s, co_job *j, float *logits, double t) {
    mw_err err;
    const int32_t tok = sample(j, logits, s->p.n_vocab, &err);
    if (tok < 0) {
        job_end(j, CO_FINISH_ERROR, err.msg); /* leaves at the step's end, as any other */
        return;
    }
    bool ok = count_token(s, j, logits, t);
    co_logprob lp;
    if (j->top_logprobs >= 0) fill_logprob(logits, s->p.n_vocab, tok, j->top_logprobs, &lp);
    const tok_end e = token_text(s, j, tok);
    ok = ok && !j->piece.failed && !j->rpiece.failed && !j->shown.failed;
    /* (a job that fails here publishes nothing of this token: its end follows at the reap) */
    ok = ok && publish(s, j, tok, j->top_logprobs >= 0 ? &lp : NULL, e.stop_str);
    if (!ok)
        job_end(j, CO_FINISH_ERROR, "out of memory keeping the generated output");
    else if (e.stop_id || e.stop_str)
        job_end(j, CO_FINISH_STOP, NULL);
    else if (e.length)
        job_end(j, CO_FINISH_LENGTH, NULL);
    else
        j->next = tok;
    /* the cache keeps what the slot holds: the prompt, then the tokens fed after it */
    if (!j->done && s->cache &&
        !mw_grow((void **)&j->prompt, &j->prompt_cap, (size_t)(j->n_prompt + j->n_gen),
                 sizeof *j->prompt))
        j->prompt[j->n_prompt + j->n_gen - 1] = tok;
}

/* Under s->mu. */
static void release_slot(co_sched *s, co_job *j) {
    if (j->slot < 0) return;
    md_seq_truncate(s->p.ctx, j->slot, 0, NULL);
    s->slot_job[j->slot] = NULL;
    s->free_slots[s->n_free++] = j->slot;
    j->slot = -1;
}

/* Removes finished jobs from the active list, frees their slots and publishes their end. */
static void reap(co_sched *s) {
    co_job **pp = &s->active;
    while (*pp) {
        co_job *j = *pp;
        if (!j->done) {
            pp = &j->next_active;
            continue;
        }
        *pp = j->next_active;
        job_end_text(j);
        if (s->cache) co_pcache_release(s->cache, &j->cursor);
        /* a leader gone before its prompt was done: its choices prefill on their own */
        for (co_job *f = s->active; f; f = f->next_active)
            if (f->leader == j) f->leader = NULL;
        pthread_mutex_lock(&s->mu);
        s->n_active--;
        release_slot(s, j);
        j->p_finish = j->finish;
        mark_ready(s, j);
        bool last = unref_locked(j); /* the scheduler's reference */
        pthread_mutex_unlock(&s->mu);
        if (last) job_free(j);
    }
}

/* Under s->mu: cancellations, a pending fail-all, pauses, admissions into free slots. */
static void admit_locked(co_sched *s) {
    for (co_job *j = s->active; j; j = j->next_active) {
        if (j->cancelled)
            job_end(j, CO_FINISH_CANCELLED, NULL);
        else if (s->fail_all[0])
            job_end(j, CO_FINISH_ERROR, s->fail_all);
        j->paused = j->pause_req;
    }
    co_job **pp = &s->wait_head;
    co_job *prev = NULL;
    while (*pp) {
        co_job *j = *pp;
        bool drop = j->cancelled || s->fail_all[0];
        /* the choices of a prompt are admitted together: the leader waits for their slots */
        bool take = !drop && s->n_free >= (j->n_group > 1 ? j->n_group : 1);
        if (!drop && !take) break; /* first come, first served */
        *pp = j->next_wait;
        if (s->wait_tail == j) s->wait_tail = prev;
        s->n_wait--;
        j->next_wait = NULL;
        if (drop) {
            /* its choices prefill on their own */
            for (co_job *f = *pp; f && f->leader == j; f = f->next_wait) f->leader = NULL;
            /* never admitted: ends here */
            if (j->cancelled) {
                j->p_finish = CO_FINISH_CANCELLED;
            } else {
                j->finish = j->p_finish = CO_FINISH_ERROR;
                snprintf(j->error, sizeof j->error, "%s", s->fail_all);
            }
            mark_ready(s, j);
            if (unref_locked(j)) job_free(j); /* cannot be last: the ready list holds one */
            continue;
        }
        j->slot = s->free_slots[--s->n_free];
        s->slot_job[j->slot] = j;
        /* append to the active list, keeping admission order */
        co_job **tail = &s->active;
        while (*tail) tail = &(*tail)->next_active;
        *tail = j;
        s->n_active++;
        mw_err err;
        if (md_sampler_init(&j->sampler, s->p.n_vocab, &j->sampling, &err)) {
            job_end(j, CO_FINISH_ERROR, err.msg); /* leaves at the step's end, as any other */
            continue;
        }
        j->sampler_ok = true;
        if (md_sampler_feed(&j->sampler, j->prompt, j->n_prompt, false, &err))
            job_end(j, CO_FINISH_ERROR, err.msg);
        else
            j->restore = s->cache != NULL; /* after the lock: copies take a while */
    }
    if (!s->wait_head) s->wait_tail = NULL;
    s->fail_all[0] = 0;
}

static int grow_rows(co_sched *s, size_t n) {
    return mw_grow((void **)&s->rows, &s->rows_cap, n, sizeof *s->rows) ||
           mw_grow((void **)&s->row_job, &s->row_job_cap, n, sizeof *s->row_job);
}

static uint64_t used_kv(const co_sched *s) {
    uint64_t b = 0;
    for (co_job *j = s->active; j; j = j->next_active) {
        int64_t n = j->n_past;
        b += (uint64_t)n * s->p.kv_bytes_per_pos_full +
             (uint64_t)(n < s->p.kv_ring ? n : s->p.kv_ring) * s->p.kv_bytes_per_pos_ring +
             s->p.kv_bytes_per_seq;
    }
    return b;
}

/* One step's batch: s->rows, the job of each logits row (s->row_job), and how the rows split. */
typedef struct step_rows {
    size_t n_rows, n_logits;
    int64_t prefill, decode;
} step_rows;

/* With a prompt cache that needs snapshots, a prompt step ends on a block boundary when one lies
 * within its rows (the state there becomes a restore point); the batch split changes no result. */
static int64_t snap_take(const co_sched *s, const co_job *j, int64_t take) {
    if (!s->cache || !co_pcache_snapshots(s->cache)) return take;
    const int64_t end = (j->n_fed + take) / CO_PCACHE_BLOCK * CO_PCACHE_BLOCK;
    return end > j->n_fed ? end - j->n_fed : take;
}

/* The step's rows: every decoding job's next row first, then prompt chunks in admission order
 * within the chunk budget. -1: out of memory. */
static int gather(co_sched *s, step_rows *b) {
    *b = (step_rows){0};
    for (co_job *j = s->active; j; j = j->next_active) {
        if (j->done || j->paused || j->n_fed < j->n_prompt) continue;
        if (grow_rows(s, b->n_rows + 1)) return -1;
        s->rows[b->n_rows++] =
            (md_row){.seq = j->slot, .pos = (int32_t)j->n_past, .token = j->next, .logits = 1};
        s->row_job[b->n_logits++] = j;
        b->decode++;
    }
    int64_t budget = s->p.chunk;
    for (co_job *j = s->active; j && budget > 0; j = j->next_active) {
        if (j->done || j->paused || j->n_fed >= j->n_prompt || (j->leader && !j->forked)) continue;
        int64_t take = j->n_prompt - j->n_fed;
        if (take > budget) take = budget;
        take = snap_take(s, j, take);
        if (grow_rows(s, b->n_rows + (size_t)take)) return -1;
        for (int64_t i = 0; i < take; i++) {
            const int64_t pos = j->n_fed + i;
            const bool last = pos == j->n_prompt - 1;
            s->rows[b->n_rows++] = (md_row){
                .seq = j->slot, .pos = (int32_t)pos, .token = j->prompt[pos], .logits = last};
            if (last) s->row_job[b->n_logits++] = j;
        }
        if (!j->prompt_counted && s->p.metrics)
            co_metrics_prompt_tokens(s->p.metrics, j->n_prompt - j->n_cached);
        j->prompt_counted = true;
        budget -= take;
        b->prefill += take;
    }
    return 0;
}

/* Whether row r of the step that just failed needed experts no live node serves. */
static bool row_lost(const co_sched *s, size_t r) {
    const md_expert_backend *e = s->p.experts;
    return e && e->row_lost && e->row_lost(e, (int64_t)r);
}

/* A failed step changed nothing (a sequence's rows are written again, to the same values, when it
 * runs again). When the backend names the rows that needed lost experts, only their jobs fail and
 * the others run again next step; otherwise every job in it fails. */
static void fail_rows(co_sched *s, const step_rows *b, const char *why) {
    bool some_lost = false;
    for (size_t r = 0; r < b->n_rows && !some_lost; r++) some_lost = row_lost(s, r);
    for (size_t r = 0; r < b->n_rows; r++)
        if (!some_lost || row_lost(s, r))
            job_end(s->slot_job[s->rows[r].seq], CO_FINISH_ERROR, why);
}

/* The leader's prompt is done: each choice it leads takes a copy of its slot and samples its first
 * token from the same row (a copy: sampling may write to it). */
static void fork_choices(co_sched *s, co_job *lead, const float *row, double t) {
    for (co_job *f = s->active; f; f = f->next_active) {
        if (f->leader != lead || f->forked || f->done) continue;
        mw_err err;
        if (md_seq_copy(s->p.ctx, f->slot, lead->slot, &err)) {
            job_end(f, CO_FINISH_ERROR, err.msg);
            continue;
        }
        f->forked = true;
        f->prompt_counted = true;
        f->n_fed = f->n_prompt;
        f->n_past = lead->n_past;
        f->n_cached = lead->n_cached;
        memcpy(s->fork_row, row, (size_t)s->p.n_vocab * sizeof *row);
        job_token(s, f, s->fork_row, t);
    }
}

/* A step that ran: each row moves its job one position on, each logits row gives its job a
 * token. */
static void advance(co_sched *s, const step_rows *b, double t) {
    const md_expert_backend *e = s->p.experts;
    for (size_t r = 0; r < b->n_rows; r++) {
        co_job *j = s->slot_job[s->rows[r].seq];
        if (e && e->row_skipped) j->skipped += e->row_skipped(e, (int64_t)r);
        j->n_past++;
        if (j->n_fed < j->n_prompt) j->n_fed++;
    }
    for (size_t i = 0; i < b->n_logits; i++) {
        co_job *j = s->row_job[i];
        float *row = s->logits + i * (size_t)s->p.n_vocab;
        if (j->n_group > 1 && j->n_gen == 0) fork_choices(s, j, row, t);
        job_token(s, j, row, t);
    }
    if (s->cache)
        for (co_job *j = s->active; j; j = j->next_active)
            if (j->slot >= 0 && j->n_past > 0)
                co_pcache_save(s->cache, j->slot, j->prompt, j->n_past, &j->cursor);
}

_Static_assert(CO_MICRO_MAX == MD_LANES_MAX, "a step's micro-batches are counted one by one");

/* The context's micro-batch and MoE-timing counters (md_ctx_lane_stats, md_ctx_moe_timing): taken
 * before a step and after it, their difference is the step's. */
typedef struct step_clock {
    md_lane_stats lanes;
    md_moe_timing moe;
} step_clock;

static double ns_s(uint64_t ns) {
    return (double)ns * 1e-9;
}

static step_clock step_clock_now(const co_sched *s) {
    return (step_clock){md_ctx_lane_stats(s->p.ctx), md_ctx_moe_timing(s->p.ctx)};
}

static void step_metrics(co_sched *s, const step_rows *b, double seconds, bool failed,
                         const step_clock *before) {
    const step_clock after = step_clock_now(s);
    const bool split = after.lanes.split_steps > before->lanes.split_steps;
    /* in-process experts have no exchange to hide */
    const bool halves = s->p.experts && s->p.experts->submit;
    co_step_stats st = {.rows = (int64_t)b->n_rows,
                        .prefill_rows = b->prefill,
                        .decode_rows = b->decode,
                        .active = s->n_active,
                        .queued = -1,
                        .kv_bytes = md_ctx_kv_bytes(s->p.ctx),
                        .kv_used_bytes = used_kv(s),
                        .seconds = seconds,
                        .unique_experts = failed ? NULL : md_ctx_unique_experts(s->p.ctx),
                        .n_layers = s->p.n_layer,
                        .failed = failed,
                        .micro_batches = failed  ? 0
                                         : split ? after.lanes.last_lanes
                                                 : 1,
                        .micro_rows = after.lanes.last_rows,
                        .exchange_s =
                            halves ? ns_s(after.moe.exchange_ns - before->moe.exchange_ns) : 0,
                        .blocked_s = halves ? ns_s(after.moe.wait_ns - before->moe.wait_ns) : 0};
    co_metrics_step(s->p.metrics, &st);
}

/* One step over the active jobs: gather their rows, run them as one batch, advance the jobs. */
static void step(co_sched *s) {
    step_rows b;
    const int oom = gather(s, &b);
    if (!oom && b.n_rows == 0) return;
    if (oom || mw_grow((void **)&s->logits, &s->logits_cap, b.n_logits * (size_t)s->p.n_vocab,
                       sizeof(float))) {
        for (co_job *j = s->active; j; j = j->next_active)
            job_end(j, CO_FINISH_ERROR, "out of memory");
        return;
    }
    const step_clock before = step_clock_now(s);
    const double t0 = co_now();
    mw_err err = {{0}};
    const int rc = md_forward(s->p.ctx, s->rows, (int64_t)b.n_rows, s->logits, &err);
    const double t1 = co_now();
    if (rc)
        fail_rows(s, &b, err.msg);
    else
        advance(s, &b, t1);
    if (s->p.metrics) step_metrics(s, &b, t1 - t0, rc != 0, &before);
}

/* Under s->mu: whether a round would change anything. Paused jobs give no rows, and a job
 * waiting for a slot that paused jobs hold has nowhere to go: counted as work, they would spin
 * the model thread. (A cancelled job behind the queue's head leaves once the head moves.) */
static bool has_work(const co_sched *s) {
    if (s->stop || s->fail_all[0]) return true;
    if (s->wait_head && (s->n_free >= (s->wait_head->n_group > 1 ? s->wait_head->n_group : 1) ||
                         s->wait_head->cancelled))
        return true;
    for (const co_job *j = s->active; j; j = j->next_active)
        if (!j->pause_req || j->cancelled) return true;
    return false;
}

/* Under s->mu: waits for work; true when idle_ms passed first (time for an idle tick). */
static bool wait_work(co_sched *s) {
    if (s->p.idle_ms <= 0 || !s->p.after_step) {
        pthread_cond_wait(&s->cv, &s->mu);
        return false;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)s->p.idle_ms * 1000000LL;
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT;
}

/* The jobs just admitted start from the longest prefix of their prompt the cache holds. */
static void restore_prefixes(co_sched *s) {
    for (co_job *j = s->active; j; j = j->next_active) {
        if (!j->restore) continue;
        j->restore = false;
        if (!j->done && !j->leader)
            j->n_fed = j->n_past = j->n_cached =
                co_pcache_restore(s->cache, j->slot, j->prompt, j->n_prompt, &j->cursor);
    }
}

static void *model_thread(void *arg) {
    co_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool tick = false;
        while (!has_work(s) && !tick) tick = wait_work(s);
        if (!has_work(s)) { /* idle: only the backend read-out */
            pthread_mutex_unlock(&s->mu);
            s->p.after_step(s->p.after_step_ud);
            continue;
        }
        if (s->stop) snprintf(s->fail_all, sizeof s->fail_all, "the server stopped");
        admit_locked(s);
        bool stop = s->stop;
        int queued = s->n_wait;
        pthread_mutex_unlock(&s->mu);
        restore_prefixes(s);
        if (s->p.metrics) co_metrics_queue(s->p.metrics, s->n_active, queued);
        if (!stop) step(s);
        reap(s);
        if (s->p.metrics) {
            pthread_mutex_lock(&s->mu);
            int active = s->n_active, waiting = s->n_wait;
            pthread_mutex_unlock(&s->mu);
            co_metrics_queue(s->p.metrics, active, waiting);
            co_metrics_kv_used(s->p.metrics, used_kv(s)); /* without the reaped sequences */
            if (s->cache) {
                const co_pcache_stats pst = co_pcache_get_stats(s->cache);
                co_metrics_prefix_cache(s->p.metrics, &pst);
            }
        }
        if (s->p.after_step) s->p.after_step(s->p.after_step_ud);
        uv_async_send(&s->async);
        if (stop) break;
    }
    return NULL;
}

/* ---- lifetime ------------------------------------------------------------------------------- */

int co_sched_new(uv_loop_t *loop, const co_sched_params *p, co_sched **out, mw_err *err) {
    *out = NULL;
    if (p->n_slots < 1 || p->chunk < 1 || p->max_queue < 0 || p->n_ctx < 2 || p->n_vocab < 1)
        return mw_errf(err, "scheduler: bad parameters");
    co_sched *s = calloc(1, sizeof *s);
    if (!s) return mw_errf(err, "out of memory");
    s->p = *p;
    s->eos = malloc(((size_t)p->n_eos + 1) * sizeof *s->eos);
    s->free_slots = malloc((size_t)p->n_slots * sizeof *s->free_slots);
    s->slot_job = calloc((size_t)p->n_slots, sizeof *s->slot_job);
    s->fork_row = malloc((size_t)p->n_vocab * sizeof *s->fork_row);
    if (!s->eos || !s->free_slots || !s->slot_job || !s->fork_row) {
        free(s->fork_row);
        free(s->eos);
        free(s->free_slots);
        free(s->slot_job);
        free(s);
        return mw_errf(err, "out of memory");
    }
    if (p->n_eos) memcpy(s->eos, p->eos, (size_t)p->n_eos * sizeof *s->eos);
    s->p.eos = s->eos;
    for (int i = 0; i < p->n_slots; i++) s->free_slots[i] = p->n_slots - 1 - i;
    s->n_free = p->n_slots;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    uv_async_init(loop, &s->async, on_async);
    s->async.data = s;
    if (md_ctx_count_unique(p->ctx, err)) {
        co_sched_free(s);
        return -1;
    }
    if (p->cache_bytes && co_pcache_new(p->ctx, p->cache_bytes, &s->cache, err)) {
        co_sched_free(s);
        return -1;
    }
    if (pthread_create(&s->thread, NULL, model_thread, s)) {
        co_sched_free(s);
        return mw_errf(err, "cannot start the model thread");
    }
    s->thread_started = true;
    *out = s;
    return 0;
}

static void async_closed(uv_handle_t *h) {
    co_sched *s = h->data;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->eos);
    free(s->free_slots);
    free(s->slot_job);
    free(s->rows);
    free(s->row_job);
    free(s->logits);
    co_pcache_free(s->cache);
    free(s->fork_row);
    free(s);
}

void co_sched_free(co_sched *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->thread_started) pthread_join(s->thread, NULL);
    /* the last outputs (every job's end) go to their owners now */
    on_async(&s->async);
    uv_close((uv_handle_t *)&s->async, async_closed);
}
