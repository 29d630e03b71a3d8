/* coordinator/co_http.h — an HTTP/1.1 server on a libuv loop: connections, keep-alive, pipelining
 * and the limits that keep one client from hurting the others; requests are parsed by
 * co_http_parse.h.
 *
 * One request of a connection is handled at a time: bytes that follow it (a pipelined request)
 * stay buffered until its response is complete. Every response is either whole (co_http_respond)
 * or streamed (co_http_stream_*, chunked transfer encoding). Everything here runs on the loop's
 * thread. Whatever the client sends is untrusted: the request head and body are bounded, a request
 * must arrive within a deadline (slow clients get 408, a connection that sends nothing is closed),
 * and a malformed request gets a 4xx answer and the connection is closed; the server itself never
 * stops for a client's fault. Across connections: the bytes of requests held at once have a
 * budget (beyond it a request gets 503), a connection beyond the limit takes the place of the one
 * idle the longest, and a streamed answer whose client stops reading is held back, then closed. */
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
    /* Request bytes every connection together holds (bodies, targets, unparsed input): a request
     * whose bytes would take the total beyond it gets 503 with Retry-After, except a small one
     * (up to CO_HTTP_SMALL_REQUEST bytes held), which is always read. */
    size_t max_held_bytes;
    int max_headers; /* header lines (431 beyond) */
    /* A request must arrive whole within this: from its first byte on a kept-alive connection,
     * from the connection's opening on a new one (which is closed if it sends nothing; 408 when
     * a request has begun). */
    int request_ms;
    int idle_ms; /* a kept-alive connection that starts no next request is closed */
    /* Connections at once. Beyond, the connection idle the longest (no request in progress) is
     * closed to make room, or one still sending its request if none is idle; 503 only when every
     * connection is waiting for its answer. */
    int max_conns;
    /* A streamed answer's bytes the client has not taken yet (queued past the kernel's buffer):
     * beyond, the handler is told to pause (CO_HTTP_FLOW_PAUSE) until they are down to half, and
     * a stream paused for stall_ms is closed (CO_HTTP_FLOW_STALL, then the abort). */
    size_t max_unsent_bytes;
    int stall_ms;
    int retry_after_s; /* Retry-After of the 503s above */
} co_http_limits;

/* A request holding no more than this is never refused for the server's byte budget. */
#define CO_HTTP_SMALL_REQUEST 16384

/* Defaults: head 32 KiB, body 8 MiB, 64 MiB held, 100 headers, 30 s per request, 60 s idle, 1024
 * connections, 16 KiB unsent per stream, 10 s stalled, Retry-After 1 s. */
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
    bool peer_local; /* the client connected from this machine (a loopback address) */
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
/* Called for every request the server answers itself, without the handler (408, 413, 414, 415,
 * 431, 505, a malformed request, the 503s of the limits): the request's target as far as it
 * arrived ("" when none) and the status. */
void co_http_server_on_refuse(co_http_server *s, void (*fn)(void *ud, const char *path, int status),
                              void *ud);
/* Connections open now (closing ones included). */
int co_http_server_conns(const co_http_server *s);
/* Request bytes held now, every connection together (max_held_bytes' count). */
size_t co_http_server_held(const co_http_server *s);
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
 * away, or the server is closing. The handler must not use the connection afterwards (unless it
 * holds it: then until co_http_release, and only co_http_release). */
void co_http_on_abort(co_http_conn *c, void (*fn)(void *ud), void *ud);

/* A streamed answer's client falling behind (max_unsent_bytes): PAUSE, then RESUME once it has
 * caught up, or STALL after stall_ms paused, just before the connection closes (the abort
 * follows). */
typedef enum co_http_flow {
    CO_HTTP_FLOW_PAUSE,
    CO_HTTP_FLOW_RESUME,
    CO_HTTP_FLOW_STALL
} co_http_flow;
void co_http_on_flow(co_http_conn *c, void (*fn)(void *ud, co_http_flow ev, size_t unsent),
                     void *ud);
/* A paused stream is to be closed within ms from now, if its stall deadline is later (others
 * need what it holds); nothing when it is not paused. */
void co_http_stall_within(co_http_conn *c, int ms);

/* The handler works on the request off the loop: the request (its strings, its body) stays valid
 * until co_http_release even if the connection closes meanwhile (co_http_on_abort still says
 * so). */
void co_http_hold(co_http_conn *c);
void co_http_release(co_http_conn *c);
/* The handler no longer needs the request's body: its buffer is freed now (req->body reads ""). */
void co_http_drop_body(co_http_conn *c);

/* Reason phrase of a status ("Not Found"). */
const char *co_http_reason(int status);

#endif
