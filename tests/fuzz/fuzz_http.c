/* tests/fuzz/fuzz_http.c — the server's request path as untrusted input: the fuzz input is what a
 * client sends on one connection (any number of pipelined requests, malformed or not). It goes
 * over a real socket into the HTTP server (co_http: llhttp, limits, keep-alive, pipelining, the
 * budget for bytes held, version, Host and target checks), and every request to a completion
 * route is prepared as serve prepares it (co_prep: co_oai's checks under small limits on
 * messages, logit biases and prompt ids, the prompts' bounds, the JSON detached) and answered with
 * the response, chunk, usage or error JSON the routes build (co_sse framing when streamed: a
 * stream is written past the server's unsent-bytes limit, so its flow control runs), with a CORS
 * policy answering Origin headers and OPTIONS preflights (HEAD answers without a body). The
 * connection must end (the server answers and closes, or the client's end is reached) and nothing
 * may leak or crash. The model is left out (no tokenizer: text prompts are refused as serve
 * refuses them for a model without one): what a request asks of it is co_sched's (tested in
 * test_co_sched). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "coordinator/co_http.h"
#include "coordinator/co_oai.h"
#include "coordinator/co_prep.h"
#include "coordinator/co_sse.h"
#include "util/mw_time.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static co_http_server *srv;

/* Small limits, so that the inputs reach them. */
static const co_prep_params prep = {
    .model_id = "m",
    .n_ctx = 64,
    .n_vocab = 1000,
    .thinking = -1,
    .limits = {.max_messages = 8, .max_logit_bias = 8, .max_prompt_tokens = 96}};

static int flow_events; /* the server's flow calls, as the routes would pause and resume */

static void on_flow(void *ud, co_http_flow ev, size_t unsent) {
    (void)ud, (void)unsent;
    flow_events += ev == CO_HTTP_FLOW_PAUSE || ev == CO_HTTP_FLOW_RESUME;
}

/* A streamed answer: the chunk (written many times over: past the unsent-bytes limit when the
 * input's reader is slow), the usage, [DONE]. */
static void stream(co_http_req *q, co_oai_kind kind, const co_oai_meta *m, const co_oai_piece *p,
                   bool usage) {
    co_buf b = {0}, frame = {0};
    co_http_on_flow(q->conn, on_flow, NULL);
    co_http_stream_start(q->conn, 200, CO_SSE_CONTENT_TYPE, CO_SSE_HEADERS);
    co_oai_chunk(kind, m, p, &frame);
    co_sse_event(&b, frame.p, frame.len);
    for (int i = 0; i < 64; i++) co_http_stream_send(q->conn, b.p, b.len);
    co_buf_clear(&b);
    if (usage) {
        co_buf_clear(&frame);
        co_oai_usage_chunk(kind, m, 3, 4, &frame);
        co_sse_event(&b, frame.p, frame.len);
    }
    co_sse_done(&b);
    co_http_stream_send(q->conn, b.p, b.len);
    co_http_stream_end(q->conn);
    co_buf_free(&b);
    co_buf_free(&frame);
}

static void answer(co_http_req *q, co_oai_kind kind) {
    co_prep_result res;
    co_buf b = {0};
    if (co_prep_run(&prep, q->body, q->body_len, kind, NULL, &res)) {
        co_http_drop_body(q->conn);
        co_oai_error_json(&res.e, &b);
        co_http_respond(q->conn, res.e.status, "application/json", "", b.p ? b.p : "", b.len);
        co_buf_free(&b);
        return;
    }
    co_http_drop_body(q->conn); /* what serve does once a request is prepared */
    /* what the routes would send for this request, with its last prompt's ids and its stop
     * strings as the generated tokens and text */
    const co_oai_req *r = &res.req;
    co_logprob lp[4] = {{.token = 1, .logprob = -0.5f, .n_top = 1, .top_id = {2}}};
    const co_prep_prompt *last = &res.prompts[res.k - 1];
    co_oai_meta m = {.id = "cmpl-fuzz",
                     .model = prep.model_id,
                     .created = 1,
                     .return_token_ids = r->return_token_ids};
    co_oai_piece p = {.content = r->n_stop ? r->stop[0] : "text",
                      .content_len = strlen(r->n_stop ? r->stop[0] : "text"),
                      .reasoning = kind == CO_OAI_CHAT ? "why" : NULL,
                      .reasoning_len = 3,
                      .tokens = last->ids,
                      .n_tokens = last->n_ids < 4 ? last->n_ids : 4,
                      .logprobs = r->top_logprobs >= 0 ? lp : NULL,
                      .first = true};
    if (r->stream) {
        stream(q, kind, &m, &p, r->include_usage);
    } else {
        p.finish = CO_FINISH_LENGTH;
        co_oai_response(kind, &m, &p, 1, 3, 4, &b);
        co_http_respond(q->conn, 200, "application/json", "", b.p ? b.p : "", b.len);
    }
    co_buf_free(&b);
    co_prep_result_free(&res);
}

static void handler(void *ud, co_http_req *q) {
    (void)ud;
    if (!strcmp(q->method, "OPTIONS")) /* CORS preflights against the server's policy */
        co_http_respond_options(q->conn, "POST, OPTIONS");
    else if (!strcmp(q->path, "/v1/completions"))
        answer(q, CO_OAI_COMPLETION);
    else if (!strcmp(q->path, "/v1/chat/completions"))
        answer(q, CO_OAI_CHAT);
    else
        co_http_respond(q->conn, 404, "text/plain", "", "no\n", 3);
}

static void start(void) {
    uv_loop_init(&loop);
    co_http_limits lim = co_http_default_limits();
    lim.max_head_bytes = 4096;
    lim.max_body_bytes = 1 << 16;
    lim.max_held_bytes = 1 << 16; /* one body may fill it: the budget's refusals are reached */
    lim.request_ms = 500;
    lim.idle_ms = 500;
    lim.max_unsent_bytes = 4096;
    lim.stall_ms = 200;
    mw_err err;
    if (co_http_server_new(&loop, "127.0.0.1", 0, &lim, handler, NULL, &srv, &err)) abort();
    co_cors *cors; /* a list: the origin matching and the echoes run on what the input sends */
    if (co_cors_new("https://a.example,http://localhost:3000", &cors, &err)) abort();
    co_http_server_set_cors(srv, cors);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!srv) start();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)co_http_server_port(srv)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) && errno != EINPROGRESS) abort();
    size_t sent = 0;
    bool shut = false;
    char sink[65536];
    const double t0 = mw_now_s();
    for (;;) {
        uv_run(&loop, UV_RUN_NOWAIT);
        if (sent < size) {
            ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINPROGRESS && errno != ENOTCONN)
                break;
        } else if (!shut) {
            shutdown(fd, SHUT_WR);
            shut = true;
        }
        ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != ENOTCONN)) break; /* closed */
        if (mw_now_s() - t0 > 5) abort(); /* the server must end every connection */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 1);
    }
    close(fd);
    /* let the server release the connection before the next input */
    for (int i = 0; i < 200 && co_http_server_conns(srv) > 0; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
