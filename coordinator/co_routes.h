/* coordinator/co_routes.h — the server's endpoints: /v1/completions, /v1/chat/completions
 * (whole or streamed as Server-Sent Events), /v1/models, /health and /metrics. A generation
 * request becomes a scheduler job; its output is written to the connection as it arrives, and a
 * connection that closes cancels its job. Runs on the loop thread. */
#ifndef CO_ROUTES_H
#define CO_ROUTES_H

#include "coordinator/co_auth.h"
#include "coordinator/co_http.h"
#include "coordinator/co_metrics.h"
#include "coordinator/co_sched.h"
#include "coordinator/co_serve_text.h"

typedef struct co_routes_params {
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
} co_routes_params;

typedef struct co_routes co_routes;

int co_routes_new(const co_routes_params *p, co_routes **out, mw_err *err);
void co_routes_free(co_routes *r);
/* The co_http_handler (ud = the co_routes). */
void co_routes_handle(void *ud, co_http_req *req);

#endif
