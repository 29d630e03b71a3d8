/* coordinator/co_http.c — the HTTP/1.1 server (see co_http.h): libuv TCP handles, one exchange at
 * a time per connection, deadlines, graceful closing, the limits across connections; requests are
 * parsed by co_http_parse.h.
 *
 * Every read lands in one buffer the server shares (libuv reads a stream and hands the bytes over
 * before it reads the next), and the parser runs over it directly until a request is complete
 * (it stops there); only bytes left behind that request (pipelined) are copied into a buffer of
 * the connection's own, so an idle connection holds no read buffer. The handler gets the request,
 * and parsing resumes only when the response has been handed to libuv — so pipelined requests are
 * answered in order. Closing after an error response shuts the write side down first and drains
 * what the client still sends for a moment: closing at once with unread data would reset the
 * connection and could discard the answer before the client reads it. */
#include "coordinator/co_http.h"

#include <netinet/in.h>
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
    char *rbuf; /* [roff, rlen) read, not parsed yet (bytes behind a request being answered) */
    size_t rlen, rcap, roff;
    size_t held; /* what this connection counts in srv->held */
    bool read_paused, eof, in_process;
    bool fresh;     /* no request yet: the request deadline runs from the opening */
    uint64_t since; /* uv_now when it last became idle (or opened): the oldest idle goes first */
    int handles;    /* open libuv handles (tcp, timer) */
    int holds;      /* co_http_hold: the struct outlives the handles until released */
    int pending_writes;
    bool close_after_write;
    /* the exchange */
    bool keep_alive, chunked, streaming;
    bool head_only; /* a HEAD request: answers carry the head of the GET answer, no body */
    bool paused;    /* the stream's client is behind: the handler was told to pause */
    co_http_req req;
    void (*abort_fn)(void *);
    void *abort_ud;
    void (*flow_fn)(void *, co_http_flow, size_t);
    void *flow_ud;
};

struct co_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listening, listener_open, closing, draining;
    co_http_limits lim;
    co_http_handler handler;
    void *ud;
    void (*refuse_fn)(void *, const char *, int);
    void *refuse_ud;
    int port;
    int n_conns; /* in the list (closing ones and held ones included) */
    int n_live;  /* not closing */
    size_t held; /* request bytes, every connection together */
    co_http_conn *conns;
    co_cors *cors;         /* NULL: no CORS headers */
    char rbuf[READ_CHUNK]; /* every read lands here first */
};

co_http_limits co_http_default_limits(void) {
    return (co_http_limits){.max_head_bytes = 32 * 1024,
                            .max_body_bytes = 8 * 1024 * 1024,
                            .max_held_bytes = 64 * 1024 * 1024,
                            .max_headers = 100,
                            .request_ms = 30000,
                            .idle_ms = 60000,
                            .max_conns = 1024,
                            .max_unsent_bytes = 16 * 1024,
                            .stall_ms = 10000,
                            .retry_after_s = 1};
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
static void on_timer(uv_timer_t *t);
static void conn_close(co_http_conn *c);
static void conn_linger(co_http_conn *c);

/* ---- memory held ---------------------------------------------------------------------------- */

/* What the connection holds now (its unparsed bytes, the request's buffers), in the server's
 * total. */
static void conn_account(co_http_conn *c) {
    const size_t now = c->rcap + (c->parser ? co_http_parser_held(c->parser) : 0);
    c->srv->held = c->srv->held - c->held + now;
    c->held = now;
}

/* Whether the connection's request may not grow: the server is over its budget and this request
 * is not a small one. */
static bool over_budget(const co_http_conn *c) {
    return c->srv->held > c->srv->lim.max_held_bytes && c->held > CO_HTTP_SMALL_REQUEST;
}

/* The bytes behind a request being answered are kept (a pipelined request). */
static int keep_unparsed(co_http_conn *c, const char *data, size_t n) {
    if (!n) return 0;
    if (c->roff > 0) {
        memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
        c->rlen -= c->roff;
        c->roff = 0;
    }
    if (mw_grow((void **)&c->rbuf, &c->rcap, c->rlen + n, 1)) return -1;
    memcpy(c->rbuf + c->rlen, data, n);
    c->rlen += n;
    conn_account(c);
    return 0;
}

static void free_unparsed(co_http_conn *c) {
    free(c->rbuf);
    c->rbuf = NULL;
    c->rlen = c->rcap = c->roff = 0;
    conn_account(c);
}

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct wreq {
    uv_write_t req;
    co_http_conn *conn;
    size_t len;
    char data[];
} wreq;

static size_t unsent(co_http_conn *c) {
    return uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
}

static void flow(co_http_conn *c, co_http_flow ev) {
    if (c->flow_fn) c->flow_fn(c->flow_ud, ev, unsent(c));
}

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
    /* a stream held back resumes once its client has taken half of what waited */
    if (c->paused && unsent(c) <= c->srv->lim.max_unsent_bytes / 2) {
        c->paused = false;
        if (c->state == CONN_BUSY) {
            uv_timer_stop(&c->timer);
            flow(c, CO_HTTP_FLOW_RESUME);
        }
    }
    if (c->pending_writes == 0 && c->close_after_write) conn_linger(c);
}

/* A stream's client is behind by more than the server keeps for it: the handler pauses, and the
 * stream has stall_ms to catch up. */
static void check_unsent(co_http_conn *c) {
    if (!c->streaming || c->paused || c->state != CONN_BUSY) return;
    if (unsent(c) <= c->srv->lim.max_unsent_bytes) return;
    c->paused = true;
    uv_timer_start(&c->timer, on_timer, (uint64_t)c->srv->lim.stall_ms, 0);
    flow(c, CO_HTTP_FLOW_PAUSE);
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
    check_unsent(c);
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

/* ---- the exchange --------------------------------------------------------------------------- */

static void reset_exchange(co_http_conn *c) {
    c->streaming = c->chunked = c->paused = false;
    c->abort_fn = NULL;
    c->abort_ud = NULL;
    c->flow_fn = NULL;
    c->flow_ud = NULL;
}

/* OpenAI's error shape around one of this file's own messages (plain text, no quotes). */
static int error_body(char *body, size_t cap, const char *msg) {
    return snprintf(body, cap,
                    "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\","
                    "\"param\":null,\"code\":null}}",
                    msg);
}

/* The server's own answer to a request it refuses (counted through the refuse hook): the request
 * is over, its buffers freed, and the connection closes after the answer. */
static void error_reply(co_http_conn *c, int status, const char *msg) {
    co_http_server *s = c->srv;
    if (s->refuse_fn) s->refuse_fn(s->refuse_ud, co_http_parser_request(c->parser).path, status);
    char body[512], extra[64] = "";
    int n = error_body(body, sizeof body, msg);
    if (status == 503) snprintf(extra, sizeof extra, "Retry-After: %d\r\n", s->lim.retry_after_s);
    c->keep_alive = false;
    c->chunked = false;
    char head[HEAD_MAX];
    size_t hn = format_head(head, sizeof head, c, status, "application/json", extra, n);
    const char *parts[] = {head, body};
    size_t lens[] = {hn, (size_t)n};
    conn_write(c, parts, lens, 2);
    uv_timer_stop(&c->timer);
    co_http_parser_trim(c->parser);
    free_unparsed(c);
    c->close_after_write = true;
    if (c->pending_writes == 0) conn_linger(c);
}

/* Whether the connection's peer is on this machine (127.0.0.0/8, ::1, or IPv4-mapped 127/8). */
static bool peer_is_local(co_http_conn *c) {
    struct sockaddr_storage ss;
    int len = (int)sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0) return false;
    if (ss.ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family != AF_INET6) return false;
    const uint8_t *a = ((const struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr;
    static const uint8_t loop6[16] = {[15] = 1}, mapped[12] = {[10] = 0xff, [11] = 0xff};
    return !memcmp(a, loop6, 16) || (!memcmp(a, mapped, 12) && a[12] == 127);
}

static void dispatch(co_http_conn *c) {
    co_http_server *s = c->srv;
    const co_http_parsed q = co_http_parser_request(c->parser);
    uv_timer_stop(&c->timer);
    c->state = CONN_BUSY;
    c->fresh = false;
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
                           .peer_local = peer_is_local(c),
                           .conn = c};
    s->handler(s->ud, &c->req);
}

/* The handler is done with the exchange: the request's buffers go, and the connection is kept for
 * the next request or closed. */
static void finish_exchange(co_http_conn *c) {
    if (c->state != CONN_BUSY) return;
    const bool paused = c->paused;
    reset_exchange(c);
    co_http_parser_trim(c->parser);
    conn_account(c);
    c->state = CONN_IDLE;
    c->since = uv_now(c->srv->loop);
    if (paused) uv_timer_stop(&c->timer); /* the stall deadline was the stream's */
    if (!c->keep_alive) {
        c->close_after_write = true;
        if (c->pending_writes == 0) conn_linger(c);
        return;
    }
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
    /* The kernel's send buffer bounded too (it grows to megabytes on its own): what a client
     * that stops reading leaves unread is then at most twice max_unsent_bytes, and it is noticed
     * within that many bytes on any machine. */
    int sndbuf =
        c->srv->lim.max_unsent_bytes < (1u << 30) ? (int)c->srv->lim.max_unsent_bytes : 1 << 30;
    uv_send_buffer_size((uv_handle_t *)&c->tcp, &sndbuf);
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

void co_http_on_flow(co_http_conn *c, void (*fn)(void *ud, co_http_flow ev, size_t unsent),
                     void *ud) {
    c->flow_fn = fn;
    c->flow_ud = ud;
}

void co_http_stall_within(co_http_conn *c, int ms) {
    if (c->state != CONN_BUSY || !c->paused) return;
    if (uv_timer_get_due_in(&c->timer) > (uint64_t)ms)
        uv_timer_start(&c->timer, on_timer, (uint64_t)ms, 0);
}

void co_http_drop_body(co_http_conn *c) {
    if (c->state != CONN_BUSY && c->state != CONN_CLOSING) return;
    co_http_parser_drop_body(c->parser);
    c->req.body = "";
    c->req.body_len = 0;
    conn_account(c);
}

/* ---- reading and parsing -------------------------------------------------------------------- */

/* The next request of the connection is refused: it would hold more than the server's budget. */
static void refuse_over_budget(co_http_conn *c) {
    error_reply(c, 503,
                "the server holds as many request bytes as it takes (--max-held-bytes); try "
                "again later");
}

/* Parses data[0..n) until a request is dispatched (and not answered yet), the bytes are used up,
 * or the request is refused; returns how many bytes it took. */
static size_t feed(co_http_conn *c, const char *data, size_t n) {
    size_t off = 0;
    while ((c->state == CONN_IDLE || c->state == CONN_READING) && off < n) {
        size_t used;
        const co_http_parse_rc rc = co_http_parser_feed(c->parser, data + off, n - off, &used);
        off += used;
        conn_account(c);
        if (c->state == CONN_IDLE && co_http_parser_reading(c->parser)) {
            c->state = CONN_READING; /* a request began: it must arrive within request_ms */
            if (!c->fresh) uv_timer_start(&c->timer, on_timer, (uint64_t)c->srv->lim.request_ms, 0);
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
            error_reply(c, status, why);
            return n;
        } else if (over_budget(c)) {
            refuse_over_budget(c);
            return n;
        }
    }
    return off;
}

/* After a feed: a connection left idle closes at the client's end, or waits for its next request
 * (a new one still within its first deadline). */
static void after_feed(co_http_conn *c) {
    if (c->state != CONN_IDLE || c->rlen > c->roff) return;
    if (c->eof) {
        conn_close(c);
        return;
    }
    if (!c->fresh) uv_timer_start(&c->timer, on_timer, (uint64_t)c->srv->lim.idle_ms, 0);
}

/* Parses the connection's own buffered bytes (those behind the request just answered). */
static void conn_process(co_http_conn *c) {
    c->in_process = true;
    const size_t used = feed(c, c->rbuf + c->roff, c->rlen - c->roff);
    c->in_process = false;
    if (c->state == CONN_LINGER || c->state == CONN_CLOSING) {
        free_unparsed(c); /* nothing more is read from this connection */
        return;
    }
    c->roff += used;
    if (c->roff == c->rlen && c->rbuf) free_unparsed(c);
    after_feed(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    co_http_conn *c = h->data;
    *buf = uv_buf_init(c->srv->rbuf, sizeof c->srv->rbuf);
}

/* Bytes read while the handler owns the response (a pipelined request) are kept for later;
 * reading stops when they pile up or the server is over its budget. */
static void keep_for_later(co_http_conn *c, const char *data, size_t n) {
    if (keep_unparsed(c, data, n)) {
        conn_close(c);
        return;
    }
    const co_http_limits *l = &c->srv->lim;
    if (c->rlen - c->roff > l->max_head_bytes + l->max_body_bytes + READ_CHUNK ||
        c->srv->held > l->max_held_bytes) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->read_paused = true;
    }
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
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
    if (c->state == CONN_LINGER || c->state == CONN_CLOSING) return; /* drained and dropped */
    if (c->state == CONN_BUSY || c->rlen > c->roff) {
        keep_for_later(c, buf->base, (size_t)n);
        return;
    }
    if (c->state == CONN_IDLE && !c->fresh) uv_timer_stop(&c->timer);
    c->in_process = true;
    const size_t used = feed(c, buf->base, (size_t)n); /* straight from the shared buffer */
    c->in_process = false;
    if (c->state == CONN_BUSY && used < (size_t)n) {
        keep_for_later(c, buf->base + used, (size_t)n - used);
        return;
    }
    after_feed(c);
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
    case CONN_BUSY: /* a stream whose client stopped reading */
        if (c->paused) {
            flow(c, CO_HTTP_FLOW_STALL);
            conn_close(c);
        }
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

static void conn_free(co_http_conn *c) {
    co_http_server *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->n_conns--;
    free(c->rbuf);
    c->rcap = 0;
    co_http_parser_free(c->parser);
    c->parser = NULL;
    conn_account(c);
    free(c);
    maybe_free_server(s);
}

static void conn_handle_closed(uv_handle_t *h) {
    co_http_conn *c = h->data;
    if (--c->handles > 0 || c->holds > 0) return;
    conn_free(c);
}

void co_http_hold(co_http_conn *c) {
    c->holds++;
}

void co_http_release(co_http_conn *c) {
    if (--c->holds > 0 || c->handles > 0) return;
    conn_free(c);
}

static void conn_close(co_http_conn *c) {
    if (c->state == CONN_CLOSING) return;
    bool busy = c->state == CONN_BUSY;
    c->state = CONN_CLOSING;
    c->srv->n_live--;
    if (busy && c->abort_fn) {
        void (*fn)(void *) = c->abort_fn;
        c->abort_fn = NULL;
        fn(c->abort_ud);
    }
    c->flow_fn = NULL;
    if (!c->holds) co_http_parser_trim(c->parser); /* a holder still reads the request */
    free_unparsed(c);
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
    c->since = uv_now(c->srv->loop);
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

/* The connection to close for a new one when the server is full: one already closing its
 * exchange, else the one idle the longest, else the one that has been sending its request the
 * longest; NULL when every connection waits for its answer. */
static co_http_conn *eviction_victim(co_http_server *s) {
    static const conn_state order[] = {CONN_LINGER, CONN_IDLE, CONN_READING};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        co_http_conn *best = NULL;
        for (co_http_conn *c = s->conns; c; c = c->next)
            if (c->state == order[k] && (!best || c->since < best->since)) best = c;
        if (best) return best;
    }
    return NULL;
}

static void on_connection(uv_stream_t *ls, int status) {
    co_http_server *s = ls->data;
    if (status < 0 || s->closing) return;
    co_http_conn *victim = s->n_live >= s->lim.max_conns ? eviction_victim(s) : NULL;
    if (victim) conn_close(victim);
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
    s->n_live++;
    c->state = CONN_IDLE;
    c->fresh = true;
    c->since = uv_now(s->loop);
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
    if (s->n_live > s->lim.max_conns) {
        c->state = CONN_BUSY;
        error_reply(c, 503, "too many connections, every one waiting for its answer");
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    uv_timer_start(&c->timer, on_timer, (uint64_t)s->lim.request_ms, 0);
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

void co_http_server_on_refuse(co_http_server *s, void (*fn)(void *ud, const char *path, int status),
                              void *ud) {
    s->refuse_fn = fn;
    s->refuse_ud = ud;
}

int co_http_server_port(const co_http_server *s) {
    return s->port;
}
int co_http_server_conns(const co_http_server *s) {
    return s->n_conns;
}
size_t co_http_server_held(const co_http_server *s) {
    return s->held;
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
