/* coordinator/co_http.c — the HTTP/1.1 server (see co_http.h): libuv TCP handles, llhttp parsing,
 * one exchange at a time per connection, limits and deadlines, graceful closing.
 *
 * A connection buffers what it reads; the parser runs over the buffer until a request is complete
 * (on_message_complete pauses it), the handler gets the request, and parsing resumes only when the
 * response has been handed to libuv — so pipelined requests are answered in order. Closing after
 * an error response shuts the write side down first and drains what the client still sends for a
 * moment: closing at once with unread data would reset the connection and could discard the
 * answer before the client reads it. */
#include "coordinator/co_http.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "coordinator/co_cors.h"
#include "util/mw_grow.h"

#define READ_CHUNK 65536
#define LINGER_MS  2000
#define FIELD_MAX  64
#define VALUE_MAX  256
#define ACRH_MAX   512  /* an Access-Control-Request-Headers list echoed to a preflight */
#define HEAD_MAX   2048 /* a response head: the status line and every header line */
#define AUTH_MAX   512  /* an Authorization value (a bearer token is at most 256) */

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
    llhttp_t parser;
    char *rbuf; /* [roff, rlen) read, not parsed yet */
    size_t rlen, rcap, roff;
    bool read_paused, eof, in_process;
    int handles; /* open libuv handles (tcp, timer) */
    int pending_writes;
    bool close_after_write;
    /* the request being parsed */
    char method[24];
    char *url;
    size_t url_len, url_cap;
    char field[FIELD_MAX + 1], value[VALUE_MAX + 1];
    size_t field_len, value_len;
    char content_type[VALUE_MAX + 1];
    char origin[VALUE_MAX + 1];     /* Origin ("" when absent) */
    char acr_headers[ACRH_MAX + 1]; /* Access-Control-Request-Headers */
    size_t acr_len;
    char authorization[AUTH_MAX + 1]; /* Authorization ("" when absent) */
    size_t auth_len;
    bool acr_method; /* Access-Control-Request-Method present: a CORS preflight */
    bool expect_continue;
    size_t head_bytes, raw_head;
    int n_headers;
    bool head_done;
    char *body;
    size_t body_len, body_cap;
    int fail_status;
    const char *fail_msg;
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
    llhttp_settings_t settings;
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

const char *co_http_reason(int status) {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 417:
        return "Expectation Failed";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
    }
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
    if (n < cap) n += co_cors_headers(c->srv->cors, c->origin, h + n, cap - n);
    if (n < cap)
        n += (size_t)snprintf(h + n, cap - n, "Connection: %s\r\n%s\r\n",
                              c->keep_alive ? "keep-alive" : "close", extra ? extra : "");
    return n < cap ? n : cap - 1;
}

/* ---- request state -------------------------------------------------------------------------- */

static void reset_request(co_http_conn *c) {
    c->method[0] = 0;
    c->url_len = 0;
    c->field_len = c->value_len = 0;
    c->content_type[0] = 0;
    c->origin[0] = c->acr_headers[0] = 0;
    c->acr_len = 0;
    c->authorization[0] = 0;
    c->auth_len = 0;
    c->acr_method = false;
    c->expect_continue = false;
    c->head_bytes = c->raw_head = 0;
    c->n_headers = 0;
    c->head_done = false;
    c->body_len = 0;
    c->fail_status = 0;
    c->fail_msg = NULL;
    c->streaming = c->chunked = false;
    c->abort_fn = NULL;
    c->abort_ud = NULL;
}

static co_http_conn *conn_of(llhttp_t *p) {
    return p->data;
}

static int fail(co_http_conn *c, int status, const char *msg) {
    c->fail_status = status;
    c->fail_msg = msg;
    return HPE_USER;
}

static int count_head(co_http_conn *c, size_t n) {
    c->head_bytes += n;
    if (c->head_bytes > c->srv->lim.max_head_bytes)
        return fail(c, 431, "the request head is larger than the server accepts");
    return 0;
}

static void on_timer(uv_timer_t *t);

static int on_message_begin(llhttp_t *p) {
    co_http_conn *c = conn_of(p);
    reset_request(c);
    c->state = CONN_READING;
    uv_timer_start(&c->timer, on_timer, (uint64_t)c->srv->lim.request_ms, 0);
    return 0;
}

static int on_method(llhttp_t *p, const char *at, size_t n) {
    co_http_conn *c = conn_of(p);
    size_t have = strlen(c->method);
    if (have + n >= sizeof c->method) return fail(c, 501, "unknown method");
    memcpy(c->method + have, at, n);
    c->method[have + n] = 0;
    return count_head(c, n);
}

static int on_url(llhttp_t *p, const char *at, size_t n) {
    co_http_conn *c = conn_of(p);
    if (c->url_len + n > c->srv->lim.max_head_bytes)
        return fail(c, 414, "the request target is longer than the server accepts");
    if (mw_grow((void **)&c->url, &c->url_cap, c->url_len + n + 1, 1))
        return fail(c, 500, "out of memory");
    memcpy(c->url + c->url_len, at, n);
    c->url_len += n;
    c->url[c->url_len] = 0;
    return count_head(c, n);
}

/* Header names and values are kept up to a fixed size (longer ones match nothing we read). */
static void append_capped(char *dst, size_t *len, size_t cap, const char *at, size_t n) {
    size_t take = *len + n > cap ? cap - *len : n;
    memcpy(dst + *len, at, take);
    *len += take;
    dst[*len] = 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n) {
    co_http_conn *c = conn_of(p);
    append_capped(c->field, &c->field_len, FIELD_MAX, at, n);
    return count_head(c, n);
}

static int on_header_value(llhttp_t *p, const char *at, size_t n) {
    co_http_conn *c = conn_of(p);
    append_capped(c->value, &c->value_len, VALUE_MAX, at, n);
    if (!strcasecmp(c->field, "access-control-request-headers")) /* may be longer than a value */
        append_capped(c->acr_headers, &c->acr_len, ACRH_MAX, at, n);
    else if (!strcasecmp(c->field, "authorization"))
        append_capped(c->authorization, &c->auth_len, AUTH_MAX, at, n);
    return count_head(c, n);
}

static int on_header_value_complete(llhttp_t *p) {
    co_http_conn *c = conn_of(p);
    if (++c->n_headers > c->srv->lim.max_headers)
        return fail(c, 431, "the request has more header lines than the server accepts");
    if (!strcasecmp(c->field, "content-type"))
        memcpy(c->content_type, c->value, c->value_len + 1);
    else if (!strcasecmp(c->field, "origin"))
        memcpy(c->origin, c->value, c->value_len + 1);
    else if (!strcasecmp(c->field, "access-control-request-method"))
        c->acr_method = true;
    else if (!strcasecmp(c->field, "content-encoding") && strcasecmp(c->value, "identity"))
        return fail(c, 415, "compressed request bodies (Content-Encoding) are not supported");
    else if (!strcasecmp(c->field, "expect")) {
        if (strcasecmp(c->value, "100-continue")) return fail(c, 417, "unsupported Expect header");
        c->expect_continue = true;
    }
    c->field_len = c->value_len = 0;
    c->field[0] = c->value[0] = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *p) {
    co_http_conn *c = conn_of(p);
    c->head_done = true;
    if (p->upgrade) {
        if (p->method == HTTP_CONNECT) return fail(c, 400, "CONNECT is not supported");
        /* HTTP/1.1 it stays: a server may ignore Upgrade (RFC 9110, 7.8), so `curl --http2`'s h2c
         * offer or a WebSocket handshake gets a plain answer instead of an error */
        p->upgrade = 0;
    }
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->srv->lim.max_body_bytes)
        return fail(c, 413, "the request body is larger than the server accepts");
    if (c->expect_continue) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        const char *parts[] = {cont};
        size_t lens[] = {sizeof cont - 1};
        conn_write(c, parts, lens, 1);
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
    co_http_conn *c = conn_of(p);
    if (c->body_len + n > c->srv->lim.max_body_bytes)
        return fail(c, 413, "the request body is larger than the server accepts");
    if (mw_grow((void **)&c->body, &c->body_cap, c->body_len + n + 1, 1))
        return fail(c, 500, "out of memory");
    memcpy(c->body + c->body_len, at, n);
    c->body_len += n;
    return 0;
}

static int on_message_complete(llhttp_t *p) {
    (void)p;
    return HPE_PAUSED;
}

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
    uv_timer_stop(&c->timer);
    c->state = CONN_BUSY;
    c->keep_alive = llhttp_should_keep_alive(&c->parser) && !s->draining && !s->closing;
    c->chunked = c->parser.http_major == 1 && c->parser.http_minor >= 1;
    if (mw_grow((void **)&c->body, &c->body_cap, c->body_len + 1, 1) ||
        mw_grow((void **)&c->url, &c->url_cap, c->url_len + 1, 1)) {
        error_reply(c, 500, "out of memory");
        return;
    }
    c->body[c->body_len] = 0;
    c->url[c->url_len] = 0;
    char *q = strchr(c->url, '?');
    if (q) *q++ = 0;
    c->head_only = !strcmp(c->method, "HEAD");
    c->req = (co_http_req){.method = c->method,
                           .path = c->url,
                           .query = q ? q : "",
                           .content_type = c->content_type,
                           .origin = c->origin,
                           .authorization = c->authorization,
                           .body = c->body,
                           .body_len = c->body_len,
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
    reset_request(c);
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
    const bool preflight = c->origin[0] && c->acr_method;
    if (preflight && !co_cors_allowed(c->srv->cors, c->origin)) {
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
        co_cors_preflight_headers(allow, c->acr_headers, extra + n, sizeof extra - n);
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
 * up, or the request is bad. */
static void conn_process(co_http_conn *c) {
    c->in_process = true;
    while (c->state == CONN_IDLE || c->state == CONN_READING) {
        if (c->roff >= c->rlen) break;
        const char *p = c->rbuf + c->roff;
        size_t n = c->rlen - c->roff;
        llhttp_errno_t e = llhttp_execute(&c->parser, p, n);
        if (e == HPE_OK) {
            if (c->state == CONN_READING && !c->head_done) {
                c->raw_head += n;
                if (c->raw_head > c->srv->lim.max_head_bytes + 4096) {
                    error_reply(c, 431, "the request head is larger than the server accepts");
                    break;
                }
            }
            c->roff = c->rlen;
            break;
        }
        if (e == HPE_PAUSED) {
            const char *pos = llhttp_get_error_pos(&c->parser);
            c->roff += pos && pos >= p && pos <= p + n ? (size_t)(pos - p) : n;
            llhttp_resume(&c->parser);
            dispatch(c);
            continue;
        }
        int status = c->fail_status ? c->fail_status : 400;
        char msg[200];
        if (c->fail_msg)
            snprintf(msg, sizeof msg, "%s", c->fail_msg);
        else
            snprintf(msg, sizeof msg, "malformed HTTP request (%s)", llhttp_errno_name(e));
        if (e == HPE_INVALID_VERSION) status = 505;
        c->roff = c->rlen;
        error_reply(c, status, msg);
        break;
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
    free(c->url);
    free(c->body);
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
    llhttp_init(&c->parser, HTTP_REQUEST, &s->settings);
    c->parser.data = c;
    reset_request(c);
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
    llhttp_settings_init(&s->settings);
    s->settings.on_message_begin = on_message_begin;
    s->settings.on_method = on_method;
    s->settings.on_url = on_url;
    s->settings.on_header_field = on_header_field;
    s->settings.on_header_value = on_header_value;
    s->settings.on_header_value_complete = on_header_value_complete;
    s->settings.on_headers_complete = on_headers_complete;
    s->settings.on_body = on_body;
    s->settings.on_message_complete = on_message_complete;
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
