/* coordinator/co_routes.c — the endpoints (co_routes.h). An exchange (one generation request)
 * lives from the request to the end of its response or its client's disconnect, whichever comes
 * first; its job's output arrives through co_sched's callback, already coalesced per wake-up. */
#include "coordinator/co_routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coordinator/co_info.h"
#include "coordinator/co_oai.h"
#include "coordinator/co_prep.h"
#include "coordinator/co_serve_grammar.h"
#include "coordinator/co_serve_text.h"
#include "coordinator/co_toolcall.h"
#include "coordinator/co_sse.h"
#include "util/mw_grow.h"

#define JSON_TYPE    "application/json"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct co_routes {
    co_routes_params p;
    co_prep_queue *prep;
    co_http_server *http; /* for the /metrics gauges (NULL until set) */
    struct exch *paused;  /* streams whose jobs are paused: their clients are behind */
    uint64_t n_requests;
    uint64_t seed_base;
};

/* One choice of an exchange: a job, and (when not streaming) its whole answer so far. */
typedef struct choice {
    struct exch *x;
    co_job *job; /* NULL once released */
    int index;
    bool started; /* streamed: a chunk of it has gone out */
    co_buf text, reasoning;
    int32_t *toks;
    co_logprob *lps;
    size_t toks_cap, lps_cap;
    int64_t n_toks;
    co_finish finish;
    co_toolcall *tc; /* the chat's tool calls read out of its text (NULL: no tools) */
    json_t *calls;   /* not streamed: the calls so far */
    int n_calls;
    co_buf tc_text; /* this output's text once the calls are out */
} choice;

/* One generation request: a choice per prompt (chat: one), answered together. */
typedef struct exch {
    co_routes *r;
    co_http_conn *conn;
    co_oai_kind kind;
    const char *route;
    bool stream, include_usage, logprobs;
    char id[64];
    co_oai_meta meta;
    int n, n_done;
    int per_prompt;                           /* choices of each prompt ('n') */
    int64_t prompt_tokens, completion_tokens; /* of the choices done (a prompt counted once) */
    choice *ch;
    co_buf out, frame;
    bool paused; /* on r->paused since paused_at (co_now) */
    double paused_at;
    struct exch *prev_paused, *next_paused;
} exch;

int co_routes_new(const co_routes_params *p, co_routes **out, mw_err *err) {
    co_routes *r = calloc(1, sizeof *r);
    if (!r) return mw_errf(err, "out of memory");
    r->p = *p;
    const co_prep_params pp = {.text = p->text,
                               .model_id = p->model_id,
                               .n_ctx = p->n_ctx,
                               .n_vocab = p->n_vocab,
                               .thinking = p->thinking,
                               .limits = p->limits};
    if (co_prep_queue_new(p->loop, &pp, &r->prep, err)) {
        free(r);
        return -1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->seed_base = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
    *out = r;
    return 0;
}

void co_routes_free(co_routes *r) {
    if (!r) return;
    co_prep_queue_free(r->prep);
    free(r);
}

/* ---- plain answers -------------------------------------------------------------------------- */

static void answer(co_routes *r, co_http_conn *c, const char *route, int status, const char *ctype,
                   const char *extra, const char *body, size_t len) {
    co_metrics_request(r->p.metrics, route, status);
    co_http_respond(c, status, ctype, extra, body, len);
}

static void answer_error(co_routes *r, co_http_conn *c, const char *route, const co_oai_error *e,
                         const char *extra) {
    co_buf b = {0};
    co_oai_error_json(e, &b);
    answer(r, c, route, e->status, JSON_TYPE, extra ? extra : "", b.p ? b.p : "{}", b.len);
    co_buf_free(&b);
}

static void answer_json(co_routes *r, co_http_conn *c, const char *route, int status, json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    answer(r, c, route, status, JSON_TYPE, "", s ? s : "{}", s ? strlen(s) : 2);
    free(s);
}

static json_t *model_object(const co_routes *r) {
    return json_pack("{s:s, s:s, s:I, s:s, s:I}", "id", r->p.model_id, "object", "model", "created",
                     (json_int_t)r->p.created, "owned_by", "moewire", "max_model_len",
                     (json_int_t)r->p.n_ctx);
}

static void route_models(co_routes *r, co_http_req *q) {
    const char *prefix = "/v1/models/";
    if (!strncmp(q->path, prefix, strlen(prefix))) {
        const char *id = q->path + strlen(prefix);
        if (strcmp(id, r->p.model_id)) {
            co_oai_error e;
            co_oai_fail(&e, 404, "model", "model_not_found", "The model '%.200s' does not exist",
                        id);
            answer_error(r, q->conn, "/v1/models", &e, NULL);
            return;
        }
        answer_json(r, q->conn, "/v1/models", 200, model_object(r));
        return;
    }
    json_t *data = json_array();
    json_array_append_new(data, model_object(r));
    answer_json(r, q->conn, "/v1/models", 200,
                json_pack("{s:s, s:o}", "object", "list", "data", data));
}

/* ok: every node up; degraded (still 200): a node down, every expert still on a live replica;
 * unavailable (503): some expert has no live owner, or no node is up — a load balancer must stop
 * sending work that cannot complete. */
static void route_health(co_routes *r, co_http_req *q) {
    bool ready = co_metrics_ready(r->p.metrics);
    int up, n;
    co_metrics_nodes_up(r->p.metrics, &up, &n);
    const bool unavailable = !ready || (n > 0 && up == 0);
    const char *status = unavailable ? "unavailable" : up < n ? "degraded" : "ok";
    json_t *j = json_pack("{s:s, s:b}", "status", status, "experts_reachable", ready);
    if (n > 0) {
        json_object_set_new(j, "nodes", json_integer(n));
        json_object_set_new(j, "nodes_up", json_integer(up));
    }
    answer_json(r, q->conn, "/health", unavailable ? 503 : 200, j);
}

static void route_metrics(co_routes *r, co_http_req *q) {
    /* counted before writing, so the page includes this request */
    co_metrics_request(r->p.metrics, "/metrics", 200);
    if (r->http)
        co_metrics_http(r->p.metrics, co_http_server_conns(r->http),
                        (uint64_t)co_http_server_held(r->http));
    co_buf b = {0};
    co_metrics_write(r->p.metrics, &b);
    if (b.failed) {
        co_buf_free(&b);
        co_http_respond(q->conn, 500, "text/plain", "", "out of memory\n", 14);
        return;
    }
    co_http_respond(q->conn, 200, METRICS_TYPE, "", b.p ? b.p : "", b.len);
    co_buf_free(&b);
}

/* ---- tokenizer and server facts (llama-server's shapes) ------------------------------------- */

static void route_tokenize(co_routes *r, co_http_req *q) {
    json_t *o;
    co_oai_error e;
    if (co_info_tokenize(r->p.text, q->body, q->body_len, &o, &e))
        answer_error(r, q->conn, "/tokenize", &e, NULL);
    else
        answer_json(r, q->conn, "/tokenize", 200, o);
}

static void route_detokenize(co_routes *r, co_http_req *q) {
    json_t *o;
    co_oai_error e;
    if (co_info_detokenize(r->p.text, r->p.n_vocab, q->body, q->body_len, &o, &e))
        answer_error(r, q->conn, "/detokenize", &e, NULL);
    else
        answer_json(r, q->conn, "/detokenize", 200, o);
}

static void route_props(co_routes *r, co_http_req *q) {
    const co_info_props p = {.text = r->p.text,
                             .cfg = r->p.cfg,
                             .model_id = r->p.model_id,
                             .n_ctx = r->p.n_ctx,
                             .n_vocab = r->p.n_vocab,
                             .n_slots = r->p.n_slots,
                             .max_queue = r->p.max_queue,
                             .max_n = CO_OAI_MAX_N,
                             .cache_bytes = r->p.cache_bytes,
                             .limits = r->p.limits};
    json_t *o = co_info_props_json(&p);
    if (!o) {
        co_oai_error e;
        co_oai_fail(&e, 500, NULL, NULL, "out of memory");
        answer_error(r, q->conn, "/props", &e, NULL);
        return;
    }
    answer_json(r, q->conn, "/props", 200, o);
}

/* ---- generation ----------------------------------------------------------------------------- */

static void paused_remove(exch *x) {
    if (!x->paused) return;
    if (x->prev_paused)
        x->prev_paused->next_paused = x->next_paused;
    else
        x->r->paused = x->next_paused;
    if (x->next_paused) x->next_paused->prev_paused = x->prev_paused;
    x->paused = false;
    x->prev_paused = x->next_paused = NULL;
}

static void exch_free(exch *x) {
    paused_remove(x);
    for (int i = 0; i < x->n; i++) {
        choice *c = &x->ch[i];
        co_buf_free(&c->text);
        co_buf_free(&c->reasoning);
        co_toolcall_free(c->tc);
        json_decref(c->calls);
        co_buf_free(&c->tc_text);
        free(c->toks);
        free(c->lps);
    }
    free(x->ch);
    co_buf_free(&x->out);
    co_buf_free(&x->frame);
    free(x);
}

/* Ends the jobs still running (no more callbacks from them) and frees the exchange. */
static void exch_drop(exch *x) {
    for (int i = 0; i < x->n; i++)
        if (x->ch[i].job) co_job_cancel(x->ch[i].job);
    exch_free(x);
}

/* The client went away: the jobs end before the next step. */
static void on_abort(void *ud) {
    exch *x = ud;
    co_metrics_request(x->r->p.metrics, x->route, 499);
    exch_drop(x);
}

static void send_chunk(exch *x, const co_oai_piece *p) {
    co_buf_clear(&x->frame);
    co_oai_chunk(x->kind, &x->meta, p, &x->frame);
    co_sse_event(&x->out, x->frame.p ? x->frame.p : "{}", x->frame.len);
}

/* A choice failed (a node, the server stopping, memory): the request ends with the error (an
 * error event and [DONE] when streaming, else a 500) and the other choices are cancelled. */
static void fail_exchange(exch *x, const char *why) {
    co_oai_error e;
    co_oai_fail(&e, 500, NULL, NULL, "generation failed: %s", why ? why : "");
    if (x->stream) {
        co_buf_clear(&x->out);
        co_buf_clear(&x->frame);
        co_oai_error_json(&e, &x->frame);
        co_sse_event(&x->out, x->frame.p, x->frame.len);
        co_sse_done(&x->out);
        co_http_stream_send(x->conn, x->out.p, x->out.len);
        co_http_stream_end(x->conn);
        co_metrics_request(x->r->p.metrics, x->route, 500);
    } else {
        answer_error(x->r, x->conn, x->route, &e, NULL);
    }
    exch_drop(x);
}

/* Every choice has ended: the usage and [DONE], or the whole response. */
static void finish(exch *x) {
    if (x->stream) {
        if (x->include_usage) {
            co_buf_clear(&x->frame);
            co_oai_usage_chunk(x->kind, &x->meta, x->prompt_tokens, x->completion_tokens,
                               &x->frame);
            co_sse_event(&x->out, x->frame.p, x->frame.len);
        }
        co_sse_done(&x->out);
        co_http_stream_send(x->conn, x->out.p, x->out.len);
        co_http_stream_end(x->conn);
        co_metrics_request(x->r->p.metrics, x->route, 200);
        exch_free(x);
        return;
    }
    co_oai_piece *all = calloc((size_t)x->n, sizeof *all);
    co_buf b = {0};
    if (all) {
        for (int i = 0; i < x->n; i++) {
            const choice *c = &x->ch[i];
            all[i] = (co_oai_piece){.content = c->text.p,
                                    .content_len = c->text.len,
                                    .reasoning = c->reasoning.len ? c->reasoning.p : NULL,
                                    .reasoning_len = c->reasoning.len,
                                    .tokens = c->toks,
                                    .n_tokens = c->n_toks,
                                    .logprobs = x->logprobs ? c->lps : NULL,
                                    .finish = c->finish,
                                    .index = c->index,
                                    .tool_calls = json_array_size(c->calls) ? c->calls : NULL,
                                    .called = c->n_calls > 0};
        }
        co_oai_response(x->kind, &x->meta, all, x->n, x->prompt_tokens, x->completion_tokens, &b);
    }
    const int status = all && !b.failed ? 200 : 500;
    co_metrics_request(x->r->p.metrics, x->route, status);
    co_http_respond(x->conn, status, JSON_TYPE, "", status == 200 && b.p ? b.p : "{}",
                    status == 200 ? b.len : 2);
    co_buf_free(&b);
    free(all);
    exch_free(x);
}

/* A non-streamed choice keeps what arrived; -1: out of memory. */
static int keep_output(choice *c, const co_job_out *o) {
    co_buf_add(&c->text, o->text, o->text_len);
    co_buf_add(&c->reasoning, o->reasoning, o->reasoning_len);
    if (c->text.failed || c->reasoning.failed) return -1;
    if (!o->n_tokens) return 0;
    const size_t need = (size_t)(c->n_toks + o->n_tokens);
    if (mw_grow((void **)&c->toks, &c->toks_cap, need, sizeof *c->toks) ||
        (o->logprobs && mw_grow((void **)&c->lps, &c->lps_cap, need, sizeof *c->lps)))
        return -1;
    memcpy(c->toks + c->n_toks, o->tokens, (size_t)o->n_tokens * sizeof *c->toks);
    if (o->logprobs) memcpy(c->lps + c->n_toks, o->logprobs, (size_t)o->n_tokens * sizeof *c->lps);
    c->n_toks += o->n_tokens;
    return 0;
}

/* The output's text through the choice's tool-call reader: the content left replaces it, the
 * calls completed go to fresh, and (deltas non-NULL) what a stream sends of the calls to deltas.
 * -1: out of memory. */
static int read_calls(choice *c, co_job_out *o, json_t *fresh, json_t *deltas) {
    co_buf_clear(&c->tc_text);
    if (co_toolcall_feed(c->tc, o->text, o->text_len, &c->tc_text, fresh, deltas) ||
        (o->finish && co_toolcall_finish(c->tc, &c->tc_text, fresh, deltas)))
        return -1;
    o->text = c->tc_text.p ? c->tc_text.p : "";
    o->text_len = c->tc_text.len;
    return 0;
}

/* Streamed calls as OpenAI streams them: a chunk per delta (the id and name first, then the
 * arguments as they arrive). */
static void send_calls(exch *x, choice *c, json_t *deltas) {
    size_t i;
    json_t *d;
    json_array_foreach(deltas, i, d) {
        json_t *one = json_pack("[O]", d);
        co_oai_piece p = {.tool_calls = one, .first = !c->started, .index = c->index};
        send_chunk(x, &p);
        c->started = true;
        json_decref(one);
    }
}

static void on_output(void *ud, co_job *job) {
    choice *c = ud;
    exch *x = c->x;
    co_job_out o;
    co_job_take(job, &o);
    if (o.finish == CO_FINISH_ERROR) {
        co_job_release(job);
        c->job = NULL;
        fail_exchange(x, o.error);
        return;
    }
    json_t *fresh = c->tc ? json_array() : NULL;
    json_t *deltas = c->tc && x->stream ? json_array() : NULL;
    if (c->tc && (!fresh || (x->stream && !deltas) || read_calls(c, &o, fresh, deltas))) {
        json_decref(fresh);
        json_decref(deltas);
        fail_exchange(x, "out of memory");
        return;
    }
    if (fresh) c->n_calls += (int)json_array_size(fresh);
    if (fresh && !x->stream) json_array_extend(c->calls, fresh);
    if (x->stream) {
        co_buf_clear(&x->out);
        if (o.text_len || o.reasoning_len ||
            (o.n_tokens && (x->logprobs || x->meta.return_token_ids))) {
            co_oai_piece p = {.content = o.text,
                              .content_len = o.text_len,
                              .reasoning = o.reasoning_len ? o.reasoning : NULL,
                              .reasoning_len = o.reasoning_len,
                              .tokens = o.tokens,
                              .n_tokens = o.n_tokens,
                              .logprobs = o.logprobs,
                              .first = !c->started,
                              .index = c->index};
            send_chunk(x, &p);
            c->started = true;
        }
        if (deltas) send_calls(x, c, deltas);
        if (o.finish) {
            co_oai_piece end = {
                .finish = o.finish, .first = !c->started, .index = c->index, .called = c->n_calls};
            send_chunk(x, &end);
        }
    } else if (keep_output(c, &o)) {
        json_decref(fresh);
        fail_exchange(x, "out of memory");
        return;
    }
    json_decref(fresh);
    json_decref(deltas);
    if (!o.finish) {
        if (x->stream && x->out.len) co_http_stream_send(x->conn, x->out.p, x->out.len);
        return;
    }
    c->finish = o.finish;
    if (c->index % x->per_prompt == 0) { /* the choices of a prompt share it */
        x->prompt_tokens += o.prompt_tokens;
        x->meta.cached_tokens += o.cached_tokens;
    }
    x->completion_tokens += o.completion_tokens;
    x->meta.skipped_assignments += o.skipped_assignments;
    co_job_release(job);
    c->job = NULL;
    if (++x->n_done < x->n) {
        if (x->stream && x->out.len) co_http_stream_send(x->conn, x->out.p, x->out.len);
        return;
    }
    finish(x);
}

/* The exchange of an accepted request with k choices: its id, the response's metadata; NULL:
 * out of memory. */
static exch *exch_new(co_routes *r, co_http_conn *conn, co_oai_kind kind, const char *route,
                      const co_oai_req *req, uint64_t n, int k) {
    exch *x = calloc(1, sizeof *x);
    choice *ch = calloc((size_t)k, sizeof *ch);
    if (!x || !ch) {
        free(x);
        free(ch);
        return NULL;
    }
    x->r = r;
    x->conn = conn;
    x->kind = kind;
    x->route = route;
    x->stream = req->stream;
    x->include_usage = req->include_usage;
    x->logprobs = req->top_logprobs >= 0;
    x->n = k;
    x->per_prompt = 1;
    x->ch = ch;
    const char *chat = r->p.text ? co_stext_format_name(r->p.text) : NULL;
    const bool tools =
        kind == CO_OAI_CHAT && req->fmt.tools && req->fmt.tool_choice != CO_TOOLS_NONE;
    for (int i = 0; i < k; i++) {
        ch[i] = (choice){.x = x, .index = i};
        if (tools && (!(ch[i].tc = co_toolcall_new(chat, r->seed_base ^ (n + (uint64_t)i))) ||
                      !(ch[i].calls = json_array()))) {
            x->n = k;
            x->ch = ch;
            exch_free(x);
            return NULL;
        }
    }
    snprintf(x->id, sizeof x->id, "%s-%016llx%08llx", kind == CO_OAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)(r->seed_base ^ (n * 0x9E3779B97F4A7C15ull)),
             (unsigned long long)n);
    x->meta = (co_oai_meta){.id = x->id,
                            .model = r->p.model_id,
                            .created = (long long)time(NULL),
                            .token_name = r->p.text ? co_stext_token_name : NULL,
                            .token_ud = r->p.text,
                            .return_token_ids = req->return_token_ids};
    return x;
}

/* The scheduler's parameters of a checked request (pointers into req and ids). */
static co_gen_params gen_params(const co_routes *r, const co_oai_req *req, const int32_t *ids,
                                int64_t n_ids, int64_t max_tokens, uint64_t n, double t_arrival,
                                void *text_state) {
    return (co_gen_params){
        .prompt = ids,
        .n_prompt = n_ids,
        .max_tokens = max_tokens,
        .sampling = {.temperature = (float)req->temperature,
                     .top_p = (float)req->top_p,
                     .top_k = req->top_k > 0 ? (int32_t)req->top_k : 0,
                     .min_p = (float)req->min_p,
                     .presence_penalty = (float)req->presence_penalty,
                     .frequency_penalty = (float)req->frequency_penalty,
                     .repetition_penalty = (float)req->repetition_penalty,
                     .seed = req->has_seed ? req->seed : r->seed_base + n * 0x2545F4914F6CDD1Dull},
        .stop = req->stop,
        .n_stop = req->n_stop,
        .stop_ids = req->stop_ids,
        .n_stop_ids = req->n_stop_ids,
        .logit_bias = req->logit_bias,
        .n_logit_bias = req->n_logit_bias,
        .ignore_eos = req->ignore_eos,
        .top_logprobs = req->top_logprobs,
        .t_arrival = t_arrival,
        .text = text_state ? &co_stext_ops : NULL,
        .text_state = text_state};
}

/* A response format's constraint for a job (none for text); the text state passes to the
 * scheduler all the same: a failure here ends it. */
static int constrain(const co_routes *r, const co_oai_req *req, co_gen_params *gp,
                     co_oai_error *e) {
    if (req->fmt.format == CO_FORMAT_TEXT && !req->fmt.call_tools) return 0;
    mw_err err = {{0}};
    void *st = r->p.text
                   ? co_stext_constraint(r->p.text, req->fmt.schema, req->fmt.call_tools, &err)
                   : NULL;
    if (!st) {
        if (gp->text && gp->text->end) gp->text->end(gp->text_state);
        return co_oai_fail(e, r->p.text ? 500 : 400, "response_format", NULL, "%s",
                           r->p.text ? err.msg : "this model has no tokenizer to constrain");
    }
    gp->constraint = &co_grammar_constraint_ops;
    gp->constraint_state = st;
    return 0;
}

/* A refused submission (prompt pi of k): 400 for a request the scheduler finds invalid, else
 * 503 with Retry-After (written into extra). */
static void refused(const co_routes *r, co_submit_rc rc, const mw_err *err, int pi, int k,
                    co_oai_error *e, char *extra, size_t cap) {
    if (rc == CO_SUBMIT_INVALID) {
        if (k > 1)
            co_oai_fail(e, 400, NULL, NULL, "prompt[%d]: %s", pi, err->msg);
        else
            co_oai_fail(e, 400, NULL, NULL, "%s", err->msg);
        return;
    }
    co_oai_fail(e, 503, NULL, rc == CO_SUBMIT_FULL ? "server_full" : "shutting_down",
                "%s; try again later", err->msg);
    snprintf(extra, cap, "Retry-After: %d\r\n", r->p.retry_after_s);
}

/* While requests wait for a slot, a paused stream keeps its slots this long at most. */
#define STALL_CONTENDED_MS 1000

/* Requests wait for slots: the paused streams, which hold theirs doing nothing, get at most the
 * short deadline. */
static void press_paused(co_routes *r) {
    if (!r->paused || co_sched_waiting(r->p.sched) == 0) return;
    for (exch *x = r->paused; x; x = x->next_paused)
        co_http_stall_within(x->conn, STALL_CONTENDED_MS);
}

/* The client fell behind its stream (co_http's flow): its jobs leave the batch, keeping their
 * slots, until it catches up; one that stays behind (--stall-timeout-ms, less while others wait
 * for a slot) is cancelled: the connection closes and the abort ends the jobs, freeing their
 * slots. */
static void on_flow(void *ud, co_http_flow ev, size_t unsent) {
    exch *x = ud;
    co_routes *r = x->r;
    if (ev == CO_HTTP_FLOW_STALL) {
        fprintf(stderr,
                "coordinator serve: %s %s cancelled: its client read nothing for %.0f ms, %zu "
                "bytes unsent\n",
                x->route, x->id, (co_now() - x->paused_at) * 1e3, unsent);
        co_metrics_stream_stalled(r->p.metrics);
        return;
    }
    const bool pause = ev == CO_HTTP_FLOW_PAUSE;
    for (int i = 0; i < x->n; i++)
        if (x->ch[i].job) co_job_pause(x->ch[i].job, pause);
    if (!pause) {
        paused_remove(x);
        return;
    }
    co_metrics_stream_paused(r->p.metrics);
    x->paused = true;
    x->paused_at = co_now();
    x->next_paused = r->paused;
    if (r->paused) r->paused->prev_paused = x;
    r->paused = x;
    press_paused(r);
}

/* A request being prepared off the loop (co_prep): its connection is held until the worker is
 * done with the body. */
typedef struct pending {
    co_routes *r;
    co_http_conn *conn;
    co_oai_kind kind;
    const char *route;
    double t_arrival;
    co_prep_job *job;
} pending;

/* The client went away during the preparation: its result will be dropped. */
static void pending_abort(void *ud) {
    pending *pd = ud;
    co_metrics_request(pd->r->p.metrics, pd->route, 499);
    co_prep_cancel(pd->job);
}

/* The n text states of a prompt's choices (NULL without a tokenizer); -1 with e set (those made
 * are ended). */
static int text_states(co_routes *r, const pending *pd, co_prep_result *res, int n, void **out,
                       co_oai_error *e) {
    mw_err err = {{0}};
    for (int c = 0; c < n; c++) {
        out[c] = NULL;
        if (!r->p.text) continue;
        out[c] = co_stext_job(r->p.text, pd->kind == CO_OAI_CHAT ? &res->chat_opts : NULL, &err);
        if (!out[c]) {
            for (int i = 0; i < c; i++) co_stext_ops.end(out[i]);
            return co_oai_fail(e, 500, NULL, NULL, "%s", err.msg);
        }
    }
    return 0;
}

/* Submits the prepared request's jobs (all or none: n choices of each prompt, which share its
 * prefill) and starts its answer; status 0 in e when it is on its way. */
static void submit_prepared(pending *pd, co_prep_result *res, co_oai_error *e, char *extra,
                            size_t cap) {
    co_routes *r = pd->r;
    const co_oai_req *req = &res->req;
    const int n = req->n > 0 ? req->n : 1, k = res->k;
    mw_err err = {{0}};
    if (k * n > co_sched_capacity(r->p.sched)) {
        co_oai_fail(e, 400, n > 1 ? "n" : "prompt", NULL,
                    "%d prompts of %d choices are %d sequences; this server takes at most %d at "
                    "once (running and queued)",
                    k, n, k * n, co_sched_capacity(r->p.sched));
        return;
    }
    const uint64_t n0 = r->n_requests + 1;
    r->n_requests += (uint64_t)k;
    exch *x = exch_new(r, pd->conn, pd->kind, pd->route, req, n0, k * n);
    if (!x) {
        co_oai_fail(e, 500, NULL, NULL, "out of memory");
        return;
    }
    x->per_prompt = n;
    for (int i = 0; i < k; i++) {
        void *texts[CO_OAI_MAX_N], *uds[CO_OAI_MAX_N];
        co_job *jobs[CO_OAI_MAX_N];
        if (text_states(r, pd, res, n, texts, e)) {
            exch_drop(x); /* the jobs already submitted are withdrawn */
            return;
        }
        for (int c = 0; c < n; c++) uds[c] = &x->ch[i * n + c];
        const co_prep_prompt *pp = &res->prompts[i];
        co_gen_params gp =
            gen_params(r, req, pp->ids, pp->n_ids, pp->max_tokens, n0 + i, pd->t_arrival, texts[0]);
        if (constrain(r, req, &gp, e)) { /* (a constraint: one choice, texts[0] ended) */
            exch_drop(x);
            return;
        }
        const co_submit_rc rc =
            co_sched_submit_n(r->p.sched, &gp, n, texts, on_output, uds, jobs, &err);
        if (rc != CO_SUBMIT_OK) {
            refused(r, rc, &err, i, k, e, extra, cap);
            exch_drop(x);
            return;
        }
        for (int c = 0; c < n; c++) x->ch[i * n + c].job = jobs[c];
    }
    co_http_on_abort(pd->conn, on_abort, x);
    if (x->stream) {
        co_http_on_flow(pd->conn, on_flow, x);
        co_http_stream_start(pd->conn, 200, CO_SSE_CONTENT_TYPE, CO_SSE_HEADERS);
    }
    press_paused(r); /* this request may be waiting for a slot */
}

/* The preparation is over (res NULL: the client went away meanwhile). */
static void prepared(void *ud, co_prep_result *res) {
    pending *pd = ud;
    co_http_conn *conn = pd->conn;
    if (res) {
        co_http_on_abort(conn, NULL, NULL);
        co_http_drop_body(conn); /* the body's work is done: its buffer goes now */
        co_oai_error e = res->e;
        char extra[64] = "";
        if (!e.status) submit_prepared(pd, res, &e, extra, sizeof extra);
        if (e.status) answer_error(pd->r, conn, pd->route, &e, extra);
    }
    free(pd);
    co_http_release(conn);
}

/* A request becomes one job per prompt (chat: one), submitted together once a worker has parsed,
 * checked and tokenized it: when one is refused the others are cancelled and the request is
 * refused as a whole. */
static void route_generate(co_routes *r, co_http_req *q, co_oai_kind kind) {
    const char *route = kind == CO_OAI_CHAT ? "/v1/chat/completions" : "/v1/completions";
    pending *pd = calloc(1, sizeof *pd);
    if (pd) {
        *pd =
            (pending){.r = r, .conn = q->conn, .kind = kind, .route = route, .t_arrival = co_now()};
        co_http_hold(q->conn);
        pd->job = co_prep_submit(r->prep, q->body, q->body_len, kind, prepared, pd);
        if (pd->job) {
            co_http_on_abort(q->conn, pending_abort, pd);
            return;
        }
        co_http_release(q->conn);
        free(pd);
    }
    co_oai_error e;
    co_oai_fail(&e, 500, NULL, NULL, "out of memory");
    answer_error(r, q->conn, route, &e, NULL);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static void method_not_allowed(co_routes *r, co_http_req *q, const char *route, const char *allow) {
    co_oai_error e;
    co_oai_fail(&e, 405, NULL, NULL, "%s takes %s, not %.20s", q->path, allow, q->method);
    char extra[64];
    snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
    answer_error(r, q->conn, route, &e, extra);
}

static void route_chat(co_routes *r, co_http_req *q) {
    route_generate(r, q, CO_OAI_CHAT);
}

static void route_completions(co_routes *r, co_http_req *q) {
    route_generate(r, q, CO_OAI_COMPLETION);
}

/* /admin/nodes: the fleet's node list changed while serving (joins, drains), from this machine
 * only — a node list names where the coordinator sends activations, so a remote client must not
 * set it even with an API key. */
static void route_admin_nodes(co_routes *r, co_http_req *q) {
    co_oai_error e;
    if (!q->peer_local) {
        co_oai_fail(&e, 403, NULL, NULL, "/admin/ answers clients on this machine only");
        return answer_error(r, q->conn, "/admin/nodes", &e, NULL);
    }
    if (!r->p.nodes_set) {
        co_oai_fail(&e, 404, NULL, NULL,
                    "this server has no node list to change (it runs without --nodes or "
                    "--topology)");
        return answer_error(r, q->conn, "/admin/nodes", &e, NULL);
    }
    if (strcmp(q->method, "POST")) {
        char *st = r->p.nodes_state(r->p.nodes_ud);
        answer(r, q->conn, "/admin/nodes", st ? 200 : 500, JSON_TYPE, "", st ? st : "{}",
               st ? strlen(st) : 2);
        free(st);
        return;
    }
    mw_err err;
    long long id = r->p.nodes_set(r->p.nodes_ud, q->body, &err);
    if (id < 0) {
        co_oai_fail(&e, 400, NULL, NULL, "%s", err.msg);
        return answer_error(r, q->conn, "/admin/nodes", &e, NULL);
    }
    answer_json(r, q->conn, "/admin/nodes", 202,
                json_pack("{s:I, s:s}", "request", (json_int_t)id, "state", "queued"));
}

/* The routes: a path (or a path prefix), the name requests are counted under, whether it takes
 * POST (else GET and HEAD), and its handler. */
static const struct route {
    const char *path;
    bool prefix;
    const char *name;
    bool post;
    void (*handle)(co_routes *r, co_http_req *q);
} routes[] = {
    {"/v1/chat/completions", false, "/v1/chat/completions", true, route_chat},
    {"/v1/completions", false, "/v1/completions", true, route_completions},
    {"/v1/models", false, "/v1/models", false, route_models},
    {"/v1/models/", true, "/v1/models", false, route_models},
    {"/health", false, "/health", false, route_health},
    {"/metrics", false, "/metrics", false, route_metrics},
    {"/tokenize", false, "/tokenize", true, route_tokenize},
    {"/detokenize", false, "/detokenize", true, route_detokenize},
    {"/props", false, "/props", false, route_props},
    {"/admin/nodes", false, "/admin/nodes", true, route_admin_nodes},
};

static const struct route *find_route(const char *path) {
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (routes[i].prefix ? !strncmp(path, routes[i].path, strlen(routes[i].path))
                             : !strcmp(path, routes[i].path))
            return &routes[i];
    return NULL;
}

void co_routes_set_http(co_routes *r, co_http_server *http) {
    r->http = http;
}

void co_routes_refused(void *ud, const char *path, int status) {
    co_routes *r = ud;
    const struct route *rt = find_route(path);
    co_metrics_request(r->p.metrics, rt ? rt->name : "other", status);
}

void co_routes_handle(void *ud, co_http_req *q) {
    co_routes *r = ud;
    const struct route *rt = find_route(q->path);
    if (!rt) {
        co_oai_error e;
        co_oai_fail(&e, 404, NULL, NULL, "no route for %.200s", q->path);
        answer_error(r, q->conn, "other", &e, NULL);
        return;
    }
    const char *allow = rt->handle == route_admin_nodes ? "GET, HEAD, POST, OPTIONS"
                        : rt->post                      ? "POST, OPTIONS"
                                                        : "GET, HEAD, OPTIONS";
    /* OPTIONS: a browser's CORS preflight, or a client asking what the route takes */
    if (!strcmp(q->method, "OPTIONS")) {
        co_metrics_request(r->p.metrics, rt->name, co_http_respond_options(q->conn, allow));
        return;
    }
    /* every route that computes needs a key: /v1/, /tokenize, /detokenize, /admin/ */
    if ((!strncmp(q->path, "/v1/", 4) || rt->post || !strncmp(q->path, "/admin/", 7)) &&
        !co_auth_ok(r->p.auth, q->authorization)) {
        co_oai_error e;
        co_oai_fail(&e, 401, NULL, "invalid_api_key", "%s",
                    q->authorization[0] ? "Incorrect API key provided"
                                        : "Missing API key: send the header 'Authorization: "
                                          "Bearer YOUR_KEY'");
        answer_error(r, q->conn, rt->name, &e, "WWW-Authenticate: Bearer\r\n");
        return;
    }
    /* HEAD answers as GET does, without the body (co_http drops it) */
    const bool get = !strcmp(q->method, "GET") || !strcmp(q->method, "HEAD");
    const bool ok = rt->handle == route_admin_nodes ? get || !strcmp(q->method, "POST")
                    : rt->post                      ? !strcmp(q->method, "POST")
                                                    : get;
    if (!ok) {
        method_not_allowed(r, q, rt->name, allow);
        return;
    }
    rt->handle(r, q);
}
