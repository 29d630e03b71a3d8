/* coordinator/co_routes.h — the server's endpoints: /v1/completions, /v1/chat/completions
 * (whole or streamed as Server-Sent Events), /v1/models, /health, /metrics, and llama-server's
 * /tokenize, /detokenize and /props (co_info.h). A generation
 * request is prepared on a worker thread (co_prep.h: parsed, checked, tokenized) and becomes
 * scheduler jobs; their output is written to the connection as it arrives, a stream whose client
 * falls behind pauses its jobs, and a connection that closes cancels them. Runs on the loop
 * thread. */
#ifndef CO_ROUTES_H
#define CO_ROUTES_H

#include "coordinator/co_auth.h"
#include "coordinator/co_http.h"
#include "coordinator/co_metrics.h"
#include "coordinator/co_oai.h"
#include "coordinator/co_sched.h"
#include "coordinator/co_serve_text.h"

typedef struct co_routes_params {
    uv_loop_t *loop; /* the preparation's workers report back on it */
    co_sched *sched;
    co_metrics *metrics;
    co_stext *text;       /* NULL: the model has no tokenizer (prompts as token ids only) */
    const char *model_id; /* what "model" must name */
    long long created;    /* unix time the model was loaded */
    int64_t n_ctx;        /* positions per sequence */
    int64_t n_vocab;      /* token ids are below this */
    int retry_after_s;    /* Retry-After of a 503 when the server is full */
    int thinking;         /* chat default for formats with a thinking switch (--think; -1) */
    const co_auth *auth;  /* API keys the /v1/ routes need (NULL: open) */
    co_oai_limits limits; /* what one request may ask */
    /* for /props */
    const md_config *cfg; /* NULL: no model facts */
    int n_slots, max_queue;
    uint64_t cache_bytes; /* the prompt cache's bound (0: off) */
} co_routes_params;

typedef struct co_routes co_routes;

int co_routes_new(const co_routes_params *p, co_routes **out, mw_err *err);
/* Once the loop has run to its end (no preparation in flight). */
void co_routes_free(co_routes *r);
/* The co_http_handler (ud = the co_routes). */
void co_routes_handle(void *ud, co_http_req *req);
/* The server's own refusals (co_http_server_on_refuse; ud = the co_routes), counted under the
 * route their target names. */
void co_routes_refused(void *ud, const char *path, int status);
/* The server whose connections and held bytes /metrics shows. */
void co_routes_set_http(co_routes *r, co_http_server *http);

#endif
