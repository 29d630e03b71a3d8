/* tests/fuzz/fuzz_http.c — the server's request path as untrusted input: the fuzz input is what a
 * client sends on one connection (any number of pipelined requests, malformed or not). It goes
 * over a real socket into the HTTP server (co_http: llhttp, limits, keep-alive, pipelining), and
 * every request to a completion route has its body checked and mapped by co_oai and answered with
 * the response, chunk, usage or error JSON the routes build (co_sse framing when streamed), with a
 * CORS policy answering Origin headers and OPTIONS preflights (HEAD answers without a body). The
 * connection must end (the server answers and closes, or the client's end is reached) and nothing
 * may leak or crash. The model is left out: what a request asks of it is co_sched's (tested in
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
#include "coordinator/co_sse.h"
#include "util/mw_time.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static co_http_server *srv;

static void answer(co_http_req *q, co_oai_kind kind) {
    co_oai_req r;
    co_oai_error e = {0};
    co_buf b = {0}, frame = {0};
    if (co_oai_parse(q->body, q->body_len, kind, NULL, &r, &e)) {
        co_oai_error_json(&e, &b);
        co_http_respond(q->conn, e.status, "application/json", "", b.p ? b.p : "", b.len);
    } else {
        /* what the routes would send for this request, with its own ids and stop strings as
         * the generated tokens and text */
        co_logprob lp[4] = {{.token = 1, .logprob = -0.5f, .n_top = 1, .top_id = {2}}};
        /* the last prompt's ids, when it has some (a list's choices all answer alike here) */
        const co_oai_prompt *last = r.n_prompts ? &r.prompts[r.n_prompts - 1] : NULL;
        const int32_t *ids = last ? last->ids : NULL;
        const int64_t n_ids = last ? last->n_ids : 0;
        co_oai_meta m = {.id = "cmpl-fuzz",
                         .model = r.model,
                         .created = 1,
                         .return_token_ids = r.return_token_ids};
        co_oai_piece p = {.content = r.n_stop ? r.stop[0] : "text",
                          .content_len = strlen(r.n_stop ? r.stop[0] : "text"),
                          .reasoning = kind == CO_OAI_CHAT ? "why" : NULL,
                          .reasoning_len = 3,
                          .tokens = ids ? ids : r.stop_ids,
                          .n_tokens =
                              ids ? (n_ids < 4 ? n_ids : 4) : (r.n_stop_ids < 4 ? r.n_stop_ids : 4),
                          .logprobs = r.top_logprobs >= 0 ? lp : NULL,
                          .first = true};
        if (r.stream) {
            co_http_stream_start(q->conn, 200, CO_SSE_CONTENT_TYPE, CO_SSE_HEADERS);
            co_oai_chunk(kind, &m, &p, &frame);
            co_sse_event(&b, frame.p, frame.len);
            co_buf_clear(&frame);
            if (r.include_usage) {
                co_oai_usage_chunk(kind, &m, 3, 4, &frame);
                co_sse_event(&b, frame.p, frame.len);
            }
            co_sse_done(&b);
            co_http_stream_send(q->conn, b.p, b.len);
            co_http_stream_end(q->conn);
        } else {
            p.finish = CO_FINISH_LENGTH;
            co_oai_response(kind, &m, &p, 1, 3, 4, &b);
            co_http_respond(q->conn, 200, "application/json", "", b.p ? b.p : "", b.len);
        }
        co_oai_req_free(&r);
    }
    co_buf_free(&b);
    co_buf_free(&frame);
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
    lim.request_ms = 500;
    lim.idle_ms = 500;
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
