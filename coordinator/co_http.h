/* coordinator/co_http.h — an HTTP/1.1 server on a libuv loop: connections, keep-alive, pipelining
 * and the request limits; requests are parsed by co_http_parse.h.
 *
 * One request of a connection is handled at a time: bytes that follow it (a pipelined request)
 * stay buffered until its response is complete. Every response is either whole (co_http_respond)
 * or streamed (co_http_stream_*, chunked transfer encoding). Everything here runs on the loop's
 * thread. Whatever the client sends is untrusted: the request head and body are bounded, a request
 * must arrive within a deadline (slow clients get 408), and a malformed request gets a 4xx answer
 * and the connection is closed; the server itself never stops for a client's fault. */
#ifndef CO_HTTP_H
#define CO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "coordinator/co_cors.h"
#include "util/mw_err.h"

typedef struct co_http_limits {
    size_t max_head_bytes; /* request line and headers (431 beyond) */
    size_t max_body_bytes; /* body (413 beyond) */
    int max_headers;       /* header lines (431 beyond) */
    int request_ms;        /* from a request's first byte to its last (408 beyond) */
    int idle_ms;           /* a keep-alive connection with no request in progress is closed */
    int max_conns;         /* connections beyond are answered 503 and closed */
} co_http_limits;

/* Defaults: head 32 KiB, body 8 MiB, 100 headers, 30 s per request, 120 s idle, 1024 conns. */
co_http_limits co_http_default_limits(void);

typedef struct co_http_server co_http_server;
typedef struct co_http_conn co_http_conn;

/* A request as the handler sees it; valid until its response is complete (or aborted). */
typedef struct co_http_req {
    const char *method;        /* "GET", "POST", ... */
    const char *path;          /* the URL up to '?' */
    const char *query;         /* after '?', "" when none */
    const char *content_type;  /* "" when absent */
    const char *origin;        /* Origin (a browser page's), "" when absent */
    const char *authorization; /* Authorization, "" when absent */
    const char *body;          /* NUL-terminated (the terminator is not counted) */
    size_t body_len;
    co_http_conn *conn;
} co_http_req;

typedef void (*co_http_handler)(void *ud, co_http_req *req);

/* Binds host:port (port 0: any free port; co_http_server_port tells which) and starts accepting.
 */
int co_http_server_new(uv_loop_t *loop, const char *host, int port, const co_http_limits *lim,
                       co_http_handler handler, void *ud, co_http_server **out, mw_err *err);
int co_http_server_port(const co_http_server *s);
/* The CORS policy answers carry (the server owns it from here on; NULL: none). */
void co_http_server_set_cors(co_http_server *s, co_cors *cors);
/* Connections open now. */
int co_http_server_conns(const co_http_server *s);
/* Stops accepting; connections stay until their exchange ends, then close (no keep-alive). */
void co_http_server_drain(co_http_server *s);
/* Closes the listener and every connection (aborting exchanges in progress); frees the server
 * once libuv has released every handle (the loop must run on). */
void co_http_server_close(co_http_server *s);

/* A whole response. extra_headers: "" or lines each ending in "\r\n". Ends the exchange. */
void co_http_respond(co_http_conn *c, int status, const char *content_type,
                     const char *extra_headers, const char *body, size_t len);
/* The answer to OPTIONS on a route taking `allow` (e.g. "POST, OPTIONS"): 204 with Allow and, for
 * a CORS preflight from an allowed origin, the preflight's headers; a preflight from an origin the
 * policy refuses gets 403. Returns the status sent. A HEAD request's answers (co_http_respond)
 * carry the head only. */
int co_http_respond_options(co_http_conn *c, const char *allow);
/* A streamed response: the head now, then any number of pieces, then the end. */
void co_http_stream_start(co_http_conn *c, int status, const char *content_type,
                          const char *extra_headers);
void co_http_stream_send(co_http_conn *c, const char *data, size_t len);
void co_http_stream_end(co_http_conn *c);
/* Called (once) when the connection closes before the response is complete: the client went
 * away, or the server is closing. The handler must not use the connection afterwards. */
void co_http_on_abort(co_http_conn *c, void (*fn)(void *ud), void *ud);

/* Reason phrase of a status ("Not Found"). */
const char *co_http_reason(int status);

#endif
