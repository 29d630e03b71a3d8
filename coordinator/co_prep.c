/* coordinator/co_prep.c — generation requests prepared on libuv's worker threads (co_prep.h): the
 * checks, the bounds before tokenizing, the prompts' ids, and the lanes that keep large bodies
 * from taking every worker. */
#include "coordinator/co_prep.h"

#include "coordinator/co_serve_text.h"
#include "coordinator/co_toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "util/mw_platform.h"

#define PREP_NICE 5 /* the workers' nice value */
/* Bytes above glibc's threshold for shrinking a heap when freed (64 KiB) and below serve's mmap
 * threshold: served from the arena's top. */
#define TOP_NUDGE (128 * 1024)

/* ---- one request ---------------------------------------------------------------------------- */

/* The parameter prompt pi is named by in errors. */
static void prompt_param(const co_oai_req *req, int pi, char *param, size_t cap) {
    if (req->kind == CO_OAI_CHAT || req->n_prompts == 1)
        snprintf(param, cap, "%s", req->kind == CO_OAI_CHAT ? "messages" : "prompt");
    else
        snprintf(param, cap, "prompt[%d]", pi);
}

/* Bytes of text the chat's messages hold (their content strings and text parts). */
static size_t messages_bytes(json_t *messages) {
    size_t n = 0, i, k;
    json_t *m, *part;
    json_array_foreach(messages, i, m) {
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c)) n += json_string_length(c);
        json_array_foreach(c, k, part) n += json_string_length(json_object_get(part, "text"));
    }
    return n;
}

/* The fewest tokens prompt pi can have: its ids, or its text's bytes over the most one token
 * stands for. */
static int64_t prompt_floor(const co_prep_params *p, const co_oai_req *req, int pi) {
    if (req->kind == CO_OAI_COMPLETION && req->prompts[pi].ids) return req->prompts[pi].n_ids;
    if (!p->text) return 0;
    const size_t bytes =
        req->kind == CO_OAI_CHAT ? messages_bytes(req->messages) : strlen(req->prompts[pi].text);
    return (int64_t)(bytes / co_stext_max_token_bytes(p->text));
}

/* Before anything is tokenized: a prompt whose text alone means more tokens than the context, or
 * prompts that together mean more than the request may hold, are refused. */
static int bound_prompts(const co_prep_params *p, const co_oai_req *req, int k, co_oai_error *e) {
    int64_t total = 0;
    for (int i = 0; i < k; i++) {
        const int64_t least = prompt_floor(p, req, i);
        char param[32];
        prompt_param(req, i, param, sizeof param);
        if (least >= p->n_ctx)
            return co_oai_fail(e, 400, param, "context_length_exceeded",
                               "%s has at least %lld tokens; this server's context is %lld "
                               "tokens, prompt and completion together",
                               param, (long long)least, (long long)p->n_ctx);
        total += least;
    }
    if (total > p->limits.max_prompt_tokens)
        return co_oai_fail(e, 400, "prompt", NULL,
                           "the prompts have at least %lld tokens together; this server takes "
                           "at most %lld in one request (--max-prompt-tokens)",
                           (long long)total, (long long)p->limits.max_prompt_tokens);
    return 0;
}

/* Prompt pi of the request as token ids (its own array, taken over, or the text encoded) and the
 * completion's length, checked against the context; -1 with e set when the request is refused. */
static int gen_prompt(const co_prep_params *p, co_oai_req *req, int pi,
                      const co_stext_chat_opts *chat_opts, co_prep_prompt *out, co_oai_error *e) {
    mw_err err = {{0}};
    const bool chat = req->kind == CO_OAI_CHAT;
    co_oai_prompt *q = chat ? NULL : &req->prompts[pi];
    char param[32];
    prompt_param(req, pi, param, sizeof param);
    if (q && q->ids) {
        out->ids = q->ids;
        out->n_ids = q->n_ids;
        q->ids = NULL;
    } else if (!p->text) {
        return co_oai_fail(e, 400, param, NULL,
                           "the model has no tokenizer: give 'prompt' as an array of token ids");
    } else if (chat ? co_stext_chat(p->text, req->messages, chat_opts, &out->ids, &out->n_ids, &err)
                    : co_stext_encode(p->text, q->text, strlen(q->text), &out->ids, &out->n_ids,
                                      &err)) {
        return co_oai_fail(e, 400, param, NULL, "%s: %s", param, err.msg);
    }
    const int64_t n = out->n_ids, ctx = p->n_ctx;
    if (n >= ctx)
        return co_oai_fail(e, 400, param, "context_length_exceeded",
                           "%s has %lld tokens; this server's context is %lld tokens, "
                           "prompt and completion together",
                           param, (long long)n, (long long)ctx);
    int64_t max_tokens = req->max_tokens;
    if (max_tokens < 0) max_tokens = chat ? ctx - n + 1 : 16;
    if (max_tokens > ctx - n + 1)
        return co_oai_fail(e, 400, req->max_tokens >= 0 ? "max_tokens" : param,
                           "context_length_exceeded",
                           "%lld tokens of %s and max_tokens %lld do not fit the context of "
                           "%lld tokens",
                           (long long)n, param, (long long)max_tokens, (long long)ctx);
    out->max_tokens = max_tokens;
    return 0;
}

/* The checks that need the server: the model's name, the biased ids in the vocabulary, tools
 * only with a chat format whose calls can be read. */
static int check_request(const co_prep_params *p, const co_oai_req *req, co_oai_error *e) {
    const char *chat = p->text ? co_stext_format_name(p->text) : NULL;
    if (req->fmt.tools && !co_toolcall_known(chat))
        return co_oai_fail(e, 400, "tools", NULL,
                           "'tools' with the chat format %s is not supported (qwen3, deepseek-v3, "
                           "deepseek-r1, kimi-k2, kimi-k3 and harmony are)",
                           chat ? chat : "(none)");
    if ((req->fmt.format != CO_FORMAT_TEXT || req->fmt.call_tools) && !p->text)
        return co_oai_fail(e, 400, "response_format", NULL,
                           "this model has no tokenizer: its output cannot be constrained");
    mw_err err = {{0}};
    /* the vocabulary's trie is built once, here on a worker rather than on the loop */
    if ((req->fmt.format != CO_FORMAT_TEXT || req->fmt.call_tools) &&
        !co_stext_vocab(p->text, &err))
        return co_oai_fail(e, 500, "response_format", NULL, "%s", err.msg);
    if (strcmp(req->model, p->model_id))
        return co_oai_fail(e, 404, "model", "model_not_found",
                           "The model '%.200s' does not exist (this server serves '%s')",
                           req->model, p->model_id);
    for (int i = 0; i < req->n_logit_bias; i++)
        if (req->logit_bias[i].token >= p->n_vocab)
            return co_oai_fail(e, 400, "logit_bias", NULL,
                               "'logit_bias' names token %d; the vocabulary has %lld tokens",
                               req->logit_bias[i].token, (long long)p->n_vocab);
    return 0;
}

/* Every prompt tokenized, and the request's prompt tokens within their budget. */
static int gen_prompts(const co_prep_params *p, co_prep_result *res) {
    co_oai_req *req = &res->req;
    if (!(res->prompts = calloc((size_t)res->k, sizeof *res->prompts)))
        return co_oai_fail(&res->e, 500, NULL, NULL, "out of memory");
    int64_t total = 0;
    for (int i = 0; i < res->k; i++) {
        if (gen_prompt(p, req, i, &res->chat_opts, &res->prompts[i], &res->e)) return -1;
        total += res->prompts[i].n_ids;
    }
    if (total > p->limits.max_prompt_tokens)
        return co_oai_fail(&res->e, 400, "prompt", NULL,
                           "the prompts have %lld tokens together; this server takes at most "
                           "%lld in one request (--max-prompt-tokens)",
                           (long long)total, (long long)p->limits.max_prompt_tokens);
    return 0;
}

int co_prep_run(const co_prep_params *p, const char *body, size_t len, co_oai_kind kind,
                const atomic_bool *stop, co_prep_result *res) {
    memset(res, 0, sizeof *res);
    co_oai_req *req = &res->req;
    if (co_oai_parse_stoppable(body, len, kind, &p->limits, stop, req, &res->e)) return -1;
    res->k = kind == CO_OAI_CHAT ? 1 : req->n_prompts;
    const char *chat = p->text ? co_stext_format_name(p->text) : NULL;
    /* the family's own name for the switch (Kimi K3's thinking), so the reply is parsed as the
     * template rendered the prompt */
    const int kw_think =
        co_stext_thinking(p->text, json_object_get(req->root, "chat_template_kwargs"));
    res->chat_opts =
        (co_stext_chat_opts){.reasoning_effort = req->reasoning_effort,
                             .thinking = req->thinking >= 0 ? req->thinking
                                         : kw_think >= 0    ? kw_think
                                                            : p->thinking,
                             .tools = req->fmt.tools ? json_object_get(req->root, "tools") : NULL,
                             .kwargs = json_object_get(req->root, "chat_template_kwargs"),
                             .answer_open = req->fmt.format != CO_FORMAT_TEXT ||
                                            (req->fmt.call_tools && co_toolcall_in_answer(chat)),
                             .tools_text = req->fmt.tools};
    if (check_request(p, req, &res->e) || bound_prompts(p, req, res->k, &res->e) ||
        gen_prompts(p, res) || co_oai_req_detach(req, &res->e)) {
        const co_oai_error e = res->e;
        co_prep_result_free(res);
        res->e = e;
        return -1;
    }
    /* (the effort's string is co_oai's own now: the request's JSON is gone) */
    res->chat_opts.reasoning_effort = req->reasoning_effort;
    res->chat_opts.tools = res->chat_opts.kwargs = NULL;
    return 0;
}

void co_prep_result_free(co_prep_result *res) {
    for (int i = 0; res->prompts && i < res->k; i++) free(res->prompts[i].ids);
    free(res->prompts);
    co_oai_req_free(&res->req);
    memset(res, 0, sizeof *res);
}

/* ---- the queue ------------------------------------------------------------------------------ */

struct co_prep_job {
    uv_work_t work;
    co_prep_queue *q;
    const char *body;
    size_t len;
    co_oai_kind kind;
    co_prep_done done;
    void *ud;
    bool large, started;
    atomic_bool cancelled; /* the worker's parse stops at it */
    co_prep_result res;
    co_prep_job *next; /* waiting its turn */
};

struct co_prep_queue {
    uv_loop_t *loop;
    co_prep_params p;
    int large_running;
    co_prep_job *wait_head, *wait_tail;
};

int co_prep_queue_new(uv_loop_t *loop, const co_prep_params *p, co_prep_queue **out, mw_err *err) {
    co_prep_queue *q = calloc(1, sizeof *q);
    if (!q) return mw_errf(err, "out of memory");
    q->loop = loop;
    q->p = *p;
    *out = q;
    return 0;
}

void co_prep_queue_free(co_prep_queue *q) {
    free(q);
}

#ifdef __GLIBC__
/* A large body's JSON was millions of small blocks in this worker's malloc arena, now free, and
 * glibc keeps free pages unless asked: the server would stay at its peak after every large
 * request. malloc_trim gives back the free pages inside every arena but not the free top of a
 * thread's own arena, which glibc shrinks only when a block freed there joins it: a block taken
 * from the top and freed makes it do so, in this thread, under its arena's lock alone (the loop
 * allocates in another, and never waits for this). */
static void give_back(void) {
    void *volatile top = malloc(TOP_NUDGE); /* (volatile: the pair is not optimised away) */
    free(top);
    malloc_trim(0);
}
#endif

/* The workers yield to the loop and the model thread: preparing a request is never more urgent
 * than answering /health or the next step (where a thread's nice value is its own: Linux). */
static void yield_to_loop(void) {
    static _Thread_local bool niced;
    if (!niced) mw_thread_nice(PREP_NICE);
    niced = true;
}

static void on_work(uv_work_t *w) {
    co_prep_job *j = w->data;
    yield_to_loop();
    co_prep_run(&j->q->p, j->body, j->len, j->kind, &j->cancelled, &j->res);
#ifdef __GLIBC__
    if (j->large) give_back();
#endif
}

static void start(co_prep_job *j);

static void on_done(uv_work_t *w, int status) {
    co_prep_job *j = w->data;
    co_prep_queue *q = j->q;
    if (j->large) {
        q->large_running--;
        co_prep_job *next = q->wait_head;
        if (next) {
            q->wait_head = next->next;
            if (!q->wait_head) q->wait_tail = NULL;
            start(next);
        }
    }
    j->done(j->ud, atomic_load(&j->cancelled) || status ? NULL : &j->res);
    co_prep_result_free(&j->res);
    free(j);
}

static void start(co_prep_job *j) {
    j->started = true;
    if (j->large) j->q->large_running++;
    uv_queue_work(j->q->loop, &j->work, on_work, on_done);
}

co_prep_job *co_prep_submit(co_prep_queue *q, const char *body, size_t len, co_oai_kind kind,
                            co_prep_done done, void *ud) {
    co_prep_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->q = q;
    j->body = body;
    j->len = len;
    j->kind = kind;
    j->done = done;
    j->ud = ud;
    j->large = len > CO_PREP_LARGE_BODY;
    atomic_init(&j->cancelled, false);
    j->work.data = j;
    if (j->large && q->large_running >= CO_PREP_LARGE_LANES) {
        if (q->wait_tail)
            q->wait_tail->next = j;
        else
            q->wait_head = j;
        q->wait_tail = j;
    } else {
        start(j);
    }
    return j;
}

void co_prep_cancel(co_prep_job *j) {
    if (j->started) {
        atomic_store(&j->cancelled, true);
        return;
    }
    co_prep_queue *q = j->q;
    co_prep_job **pp = &q->wait_head, *prev = NULL;
    while (*pp != j) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = j->next;
    if (q->wait_tail == j) q->wait_tail = prev;
    j->done(j->ud, NULL);
    free(j);
}
