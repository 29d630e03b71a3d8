/* coordinator/co_http.c — the HTTP/1.1 server (see co_http.h): libuv TCP handles, one exchange at
 * a time per connection, deadlines, graceful closing; requests are parsed by co_http_parse.h.
 *
 * A connection buffers what it reads; the parser runs over the buffer until a request is complete
 * (it stops there), the handler gets the request, and parsing resumes only when the response has
 * been handed to libuv — so pipelined requests are answered in order. Closing after an error
 * response shuts the write side down first and drains what the client still sends for a moment:
 * closing at once with unread data would reset the connection and could discard the answer
 * before the client reads it. */
#include "coordinator/co_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_cors.h"
#include "coordinator/co_http_parse.h"
#include "util/mw_grow.h"

#define READ_CHUNK 65536
#define LINGER_MS  2000
#define HEAD_MAX   2048 /* a response head: the status line and every header line */

typedef enum conn_state {
    CONN_IDLE,    /* waiting for a request */
    CONN_READING, /* a request is arriving */
    CONN_BUSY,    /* the handler owns the response */
    CONN_LINGER,  /* write side shut, draining the client's bytes before closing */
    CONN_CLOSING,
} conn_state;

struct co_http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    co_http_server *srv;
    co_http_conn *prev, *next;
    conn_state state;
    co_http_parser *parser;
    char *rbuf; /* [roff, rlen) read, not parsed yet */
    size_t rlen, rcap, roff;
    bool read_paused, eof, in_process;
    int handles; /* open libuv handles (tcp, timer) */
    int pending_writes;
    bool close_after_write;
    /* the exchange */
    bool keep_alive, chunked, streaming;
    bool head_only; /* a HEAD request: answers carry the head of the GET answer, no body */
    co_http_req req;
    void (*abort_fn)(void *);
    void *abort_ud;
};

struct co_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listening, listener_open, closing, draining;
    co_http_limits lim;
    co_http_handler handler;
    void *ud;
    int port;
    int n_conns;
    co_http_conn *conns;
    co_cors *cors; /* NULL: no CORS headers */
};

co_http_limits co_http_default_limits(void) {
    return (co_http_limits){.max_head_bytes = 32 * 1024,
                            .max_body_bytes = 8 * 1024 * 1024,
                            .max_headers = 100,
                            .request_ms = 30000,
                            .idle_ms = 120000,
                            .max_conns = 1024};
}

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    {100, "Continue"},
    {200, "OK"},
    {204, "No Content"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {411, "Length Required"},
    {413, "Payload Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {417, "Expectation Failed"},
    {422, "Unprocessable Entity"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {505, "HTTP Version Not Supported"},
};

const char *co_http_reason(int status) {
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].status == status) return reasons[i].reason;
    return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
}

static void conn_process(co_http_conn *c);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);
static void conn_close(co_http_conn *c);
static void conn_linger(co_http_conn *c);

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct wreq {
    uv_write_t req;
    co_http_conn *conn;
    size_t len;
    char data[];
} wreq;

static void write_done(uv_write_t *req, int status) {
    wreq *w = (wreq *)req;
    co_http_conn *c = w->conn;
    free(w);
    c->pending_writes--;
    if (c->state == CONN_CLOSING) return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->pending_writes == 0 && c->close_after_write) conn_linger(c);
}

/* Queues the concatenation of n pieces as one write. */
static void conn_write(co_http_conn *c, const char *const *parts, const size_t *lens, int n) {
    if (c->state == CONN_CLOSING || c->state == CONN_LINGER) return;
    size_t len = 0;
    for (int i = 0; i < n; i++) len += lens[i];
    if (!len) return;
    wreq *w = malloc(sizeof *w + len);
    if (!w) {
        conn_close(c);
        return;
    }
    w->conn = c;
    w->len = len;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(w->data + off, parts[i], lens[i]);
        off += lens[i];
    }
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, write_done)) {
        free(w);
        conn_close(c);
        return;
    }
    c->pending_writes++;
}

static size_t format_head(char *h, size_t cap, co_http_conn *c, int status, const char *ctype,
                          const char *extra, long long content_length) {
    size_t n = (size_t)snprintf(h, cap, "HTTP/1.1 %d %s\r\nServer: moewire\r\n", status,
                                co_http_reason(status));
    if (ctype && *ctype && n < cap)
        n += (size_t)snprintf(h + n, cap - n, "Content-Type: %s\r\n", ctype);
    const bool bodiless = status == 204 || status < 200; /* no length (RFC 9110, 8.6) */
    if (!bodiless && content_length >= 0 && n < cap)
        n += (size_t)snprintf(h + n, cap - n, "Content-Length: %lld\r\n", content_length);
    else if (!bodiless && c->chunked && n < cap)
        n += (size_t)snprintf(h + n, cap - n, "Transfer-Encoding: chunked\r\n");
    if (n < cap)
        n +=
            co_cors_headers(c->srv->cors, co_http_parser_request(c->parser).origin, h + n, cap - n);
    if (n < cap)
        n += (size_t)snprintf(h + n, cap - n, "Connection: %s\r\n%s\r\n",
                              c->keep_alive ? "keep-alive" : "close", extra ? extra : "");
    return n < cap ? n : cap - 1;
}

/* ---- exchange state ------------------------------------------------------------------------ */

static void reset_exchange(co_http_conn *c) {
    c->streaming = c->chunked = false;
    c->abort_fn = NULL;
    c->abort_ud = NULL;
}

static void on_timer(uv_timer_t *t);

/* ---- the exchange --------------------------------------------------------------------------- */

/* OpenAI's error shape around one of this file's own messages (plain text, no quotes). */
static int error_body(char *body, size_t cap, const char *msg) {
    return snprintf(body, cap,
                    "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\","
                    "\"param\":null,\"code\":null}}",
                    msg);
}

static void error_reply(co_http_conn *c, int status, const char *msg) {
    char body[512];
    int n = error_body(body, sizeof body, msg);
    c->keep_alive = false;
    c->chunked = false;
    char head[HEAD_MAX];
    size_t hn = format_head(head, sizeof head, c, status, "application/json", "", n);
    const char *parts[] = {head, body};
    size_t lens[] = {hn, (size_t)n};
    conn_write(c, parts, lens, 2);
    uv_timer_stop(&c->timer);
    c->close_after_write = true;
    if (c->pending_writes == 0) conn_linger(c);
}

static void dispatch(co_http_conn *c) {
    co_http_server *s = c->srv;
    const co_http_parsed q = co_http_parser_request(c->parser);
    uv_timer_stop(&c->timer);
    c->state = CONN_BUSY;
    c->keep_alive = q.keep_alive && !s->draining && !s->closing;
    c->chunked = q.http11;
    c->head_only = !strcmp(q.method, "HEAD");
    c->req = (co_http_req){.method = q.method,
                           .path = q.path,
                           .query = q.query,
                           .content_type = q.content_type,
                           .origin = q.origin,
                           .authorization = q.authorization,
                           .body = q.body,
                           .body_len = q.body_len,
                           .conn = c};
    s->handler(s->ud, &c->req);
}

/* The handler is done with the exchange: keep the connection for the next request or close it. */
static void finish_exchange(co_http_conn *c) {
    c->abort_fn = NULL;
    c->abort_ud = NULL;
    if (c->state != CONN_BUSY) return;
    if (!c->keep_alive) {
        c->state = CONN_IDLE;
        c->close_after_write = true;
        if (c->pending_writes == 0) conn_linger(c);
        return;
    }
    c->state = CONN_IDLE;
    reset_exchange(c);
    if (c->read_paused && !c->eof) {
        c->read_paused = false;
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    }
    if (!c->in_process) conn_process(c);
}

void co_http_respond(co_http_conn *c, int status, const char *content_type,
                     const char *extra_headers, const char *body, size_t len) {
    if (c->state != CONN_BUSY) return;
    char head[HEAD_MAX];
    size_t hn =
        format_head(head, sizeof head, c, status, content_type, extra_headers, (long long)len);
    const char *parts[] = {head, body};
    size_t lens[] = {hn, c->head_only || status == 204 ? 0 : len};
    conn_write(c, parts, lens, 2);
    finish_exchange(c);
}

int co_http_respond_options(co_http_conn *c, const char *allow) {
    if (c->state != CONN_BUSY) return 0;
    const co_http_parsed q = co_http_parser_request(c->parser);
    const bool preflight = q.origin[0] && q.acr_method;
    if (preflight && !co_cors_allowed(c->srv->cors, q.origin)) {
        char body[512];
        int n = error_body(body, sizeof body,
                           "this server does not answer pages from that origin (see serve "
                           "--cors-origins)");
        co_http_respond(c, 403, "application/json", "", body, (size_t)n);
        return 403;
    }
    char extra[HEAD_MAX / 2];
    size_t n = (size_t)snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
    if (preflight && n < sizeof extra)
        co_cors_preflight_headers(allow, q.acr_headers, extra + n, sizeof extra - n);
    co_http_respond(c, 204, NULL, extra, "", 0);
    return 204;
}

void co_http_stream_start(co_http_conn *c, int status, const char *content_type,
                          const char *extra_headers) {
    if (c->state != CONN_BUSY || c->streaming) return;
    c->streaming = true;
    if (!c->chunked) c->keep_alive = false; /* HTTP/1.0: the end of the body is the close */
    char head[HEAD_MAX];
    size_t hn = format_head(head, sizeof head, c, status, content_type, extra_headers, -1);
    const char *parts[] = {head};
    size_t lens[] = {hn};
    conn_write(c, parts, lens, 1);
}

void co_http_stream_send(co_http_conn *c, const char *data, size_t len) {
    if (c->state != CONN_BUSY || !c->streaming || !len) return;
    if (!c->chunked) {
        const char *parts[] = {data};
        conn_write(c, parts, &len, 1);
        return;
    }
    char size[24];
    int n = snprintf(size, sizeof size, "%zx\r\n", len);
    const char *parts[] = {size, data, "\r\n"};
    size_t lens[] = {(size_t)n, len, 2};
    conn_write(c, parts, lens, 3);
}

void co_http_stream_end(co_http_conn *c) {
    if (c->state != CONN_BUSY || !c->streaming) return;
    if (c->chunked) {
        const char *parts[] = {"0\r\n\r\n"};
        size_t lens[] = {5};
        conn_write(c, parts, lens, 1);
    }
    finish_exchange(c);
}

void co_http_on_abort(co_http_conn *c, void (*fn)(void *ud), void *ud) {
    c->abort_fn = fn;
    c->abort_ud = ud;
}

/* ---- reading and parsing -------------------------------------------------------------------- */

/* Parses buffered bytes until a request is dispatched (and not answered yet), the buffer is used
 * up, or the request is refused. */
static void conn_process(co_http_conn *c) {
    c->in_process = true;
    while ((c->state == CONN_IDLE || c->state == CONN_READING) && c->roff < c->rlen) {
        size_t used;
        const co_http_parse_rc rc =
            co_http_parser_feed(c->parser, c->rbuf + c->roff, c->rlen - c->roff, &used);
        c->roff += used;
        if (c->state == CONN_IDLE && co_http_parser_reading(c->parser)) {
            c->state = CONN_READING; /* a request began: it must arrive within request_ms */
            uv_timer_start(&c->timer, on_timer, (uint64_t)c->srv->lim.request_ms, 0);
        }
        if (co_http_parser_take_continue(c->parser)) {
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            const char *parts[] = {cont};
            size_t lens[] = {sizeof cont - 1};
            conn_write(c, parts, lens, 1);
        }
        if (rc == CO_HTTP_PARSE_REQUEST) {
            dispatch(c);
        } else if (rc == CO_HTTP_PARSE_REFUSED) {
            const char *why;
            const int status = co_http_parser_refusal(c->parser, &why);
            c->roff = c->rlen;
            error_reply(c, status, why);
        }
    }
    c->in_process = false;
    if (c->roff == c->rlen) c->roff = c->rlen = 0;
    if (c->state == CONN_IDLE && c->rlen == 0) {
        if (c->eof) {
            conn_close(c);
            return;
        }
        uv_timer_start(&c->timer, on_timer, (uint64_t)c->srv->lim.idle_ms, 0);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    co_http_conn *c = h->data;
    if (c->roff > 0 && c->roff == c->rlen) c->roff = c->rlen = 0;
    if (c->roff > 0 && c->rcap - c->rlen < READ_CHUNK) {
        memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
        c->rlen -= c->roff;
        c->roff = 0;
    }
    if (mw_grow((void **)&c->rbuf, &c->rcap, c->rlen + READ_CHUNK, 1)) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
    (void)buf;
    co_http_conn *c = st->data;
    if (n == 0) return;
    if (n < 0) {
        c->eof = true;
        uv_read_stop(st);
        /* A client gone before its answer is complete aborts the exchange. */
        if (c->state == CONN_BUSY || c->state == CONN_LINGER || c->state == CONN_READING ||
            n != UV_EOF)
            conn_close(c);
        else if (c->state == CONN_IDLE && c->rlen == c->roff)
            conn_close(c);
        return;
    }
    if (c->state == CONN_LINGER || c->state == CONN_CLOSING) {
        c->rlen = c->roff = 0; /* drained and dropped */
        return;
    }
    c->rlen += (size_t)n;
    if (c->state == CONN_BUSY) {
        /* pipelined bytes wait for the response; stop reading when they pile up */
        const co_http_limits *l = &c->srv->lim;
        if (c->rlen - c->roff > l->max_head_bytes + l->max_body_bytes + READ_CHUNK) {
            uv_read_stop(st);
            c->read_paused = true;
        }
        return;
    }
    if (c->state == CONN_IDLE) uv_timer_stop(&c->timer);
    conn_process(c);
}

static void on_timer(uv_timer_t *t) {
    co_http_conn *c = t->data;
    switch (c->state) {
    case CONN_READING:
        error_reply(c, 408, "the request did not arrive in time");
        break;
    case CONN_IDLE:
    case CONN_LINGER:
        conn_close(c);
        break;
    default:
        break;
    }
}

/* ---- connection lifetime -------------------------------------------------------------------- */

static void maybe_free_server(co_http_server *s) {
    if (s->closing && !s->listener_open && s->n_conns == 0) {
        co_cors_free(s->cors);
        free(s);
    }
}

static void conn_handle_closed(uv_handle_t *h) {
    co_http_conn *c = h->data;
    if (--c->handles > 0) return;
    co_http_server *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->n_conns--;
    free(c->rbuf);
    co_http_parser_free(c->parser);
    free(c);
    maybe_free_server(s);
}

static void conn_close(co_http_conn *c) {
    if (c->state == CONN_CLOSING) return;
    bool busy = c->state == CONN_BUSY;
    c->state = CONN_CLOSING;
    if (busy && c->abort_fn) {
        void (*fn)(void *) = c->abort_fn;
        c->abort_fn = NULL;
        fn(c->abort_ud);
    }
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
}

static void shutdown_done(uv_shutdown_t *req, int status) {
    co_http_conn *c = req->data;
    free(req);
    if (c->state == CONN_CLOSING) return;
    if (status < 0 || c->eof) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timer, LINGER_MS, 0);
}

static void conn_linger(co_http_conn *c) {
    if (c->state == CONN_CLOSING || c->state == CONN_LINGER) return;
    bool busy = c->state == CONN_BUSY;
    if (busy && c->abort_fn) {
        void (*fn)(void *) = c->abort_fn;
        c->abort_fn = NULL;
        fn(c->abort_ud);
    }
    c->state = CONN_LINGER;
    uv_timer_stop(&c->timer);
    uv_shutdown_t *req = malloc(sizeof *req);
    if (!req) {
        conn_close(c);
        return;
    }
    req->data = c;
    if (uv_shutdown(req, (uv_stream_t *)&c->tcp, shutdown_done)) {
        free(req);
        conn_close(c);
        return;
    }
    if (!c->eof && c->read_paused) {
        c->read_paused = false;
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    }
}

static void on_connection(uv_stream_t *ls, int status) {
    co_http_server *s = ls->data;
    if (status < 0 || s->closing) return;
    co_http_conn *c = calloc(1, sizeof *c);
    if (!c) return;
    c->srv = s;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    c->state = CONN_IDLE;
    if (uv_accept(ls, (uv_stream_t *)&c->tcp)) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->parser =
        co_http_parser_new(s->lim.max_head_bytes, s->lim.max_body_bytes, s->lim.max_headers);
    if (!c->parser) {
        conn_close(c);
        return;
    }
    if (s->n_conns > s->lim.max_conns) {
        c->state = CONN_BUSY;
        error_reply(c, 503, "too many connections");
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    uv_timer_start(&c->timer, on_timer, (uint64_t)s->lim.idle_ms, 0);
}

/* ---- the server ----------------------------------------------------------------------------- */

static void listener_closed(uv_handle_t *h) {
    co_http_server *s = h->data;
    s->listener_open = false;
    maybe_free_server(s);
}

int co_http_server_new(uv_loop_t *loop, const char *host, int port, const co_http_limits *lim,
                       co_http_handler handler, void *ud, co_http_server **out, mw_err *err) {
    *out = NULL;
    co_http_server *s = calloc(1, sizeof *s);
    if (!s) return mw_errf(err, "out of memory");
    s->loop = loop;
    s->lim = lim ? *lim : co_http_default_limits();
    s->handler = handler;
    s->ud = ud;
    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(host, port, (struct sockaddr_in *)&addr);
    if (rc) rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr);
    if (rc) {
        free(s);
        return mw_errf(err, "--listen: '%s' is not an IP address", host);
    }
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    s->listener_open = true;
    if ((rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0)) ||
        (rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection))) {
        mw_errf(err, "cannot listen on %s:%d: %s", host, port, uv_strerror(rc));
        s->closing = true;
        uv_close((uv_handle_t *)&s->listener, listener_closed);
        return -1;
    }
    s->listening = true;
    struct sockaddr_storage bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len);
    s->port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                          : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    *out = s;
    return 0;
}

void co_http_server_set_cors(co_http_server *s, co_cors *cors) {
    co_cors_free(s->cors);
    s->cors = cors;
}

int co_http_server_port(const co_http_server *s) {
    return s->port;
}
int co_http_server_conns(const co_http_server *s) {
    return s->n_conns;
}

static void stop_listening(co_http_server *s) {
    if (!s->listening) return;
    s->listening = false;
    uv_close((uv_handle_t *)&s->listener, listener_closed);
}

void co_http_server_drain(co_http_server *s) {
    s->draining = true;
    stop_listening(s);
    for (co_http_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == CONN_BUSY)
            c->keep_alive = false;
        else if (c->state == CONN_IDLE)
            conn_close(c);
    }
}

void co_http_server_close(co_http_server *s) {
    if (!s) return;
    s->closing = true;
    stop_listening(s);
    for (co_http_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        conn_close(c);
    }
    maybe_free_server(s);
}
