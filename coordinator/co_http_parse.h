/* coordinator/co_http_parse.h — an HTTP/1.1 request parser without a socket (llhttp underneath):
 * bytes in, out a request (method, target, the headers the server reads, the body) or a refusal
 * with the status to answer it with. Everything it is fed is untrusted: the head, the header lines
 * and the body are bounded as they arrive, a header value is kept only up to a fixed size, and a
 * request the server cannot take is refused before its body is read where the head says so. It
 * takes HTTP/1.1 and HTTP/1.0 (an HTTP/1.1 request with exactly one Host header), a target in
 * origin form ("/path?query") or absolute form ("http://host/path"), in visible ASCII.
 * co_http.c feeds it what a connection reads; nothing here touches the loop, so it can be fed
 * from any thread that owns it. */
#ifndef CO_HTTP_PARSE_H
#define CO_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* A request as parsed. Strings are NUL-terminated, "" when absent; they point into the parser
 * and stay valid until it is fed again. */
typedef struct co_http_parsed {
    const char *method;        /* "GET", "POST", ... */
    const char *path;          /* the target up to '?' (an absolute URL's path: "/v1/models") */
    const char *query;         /* after '?' */
    const char *content_type;  /* Content-Type */
    const char *origin;        /* Origin (a browser page's) */
    const char *authorization; /* Authorization */
    const char *acr_headers;   /* Access-Control-Request-Headers */
    bool acr_method;           /* Access-Control-Request-Method present: a CORS preflight */
    const char *body;          /* NUL-terminated (the terminator is not counted) */
    size_t body_len;
    bool keep_alive; /* the client lets the connection stay open after the answer */
    bool http11;     /* HTTP/1.1 or later: the answer may be chunked */
} co_http_parsed;

typedef struct co_http_parser co_http_parser;

/* A parser for the requests of one connection, within these limits (431, 413 and 431 beyond);
 * NULL when memory runs out. */
co_http_parser *co_http_parser_new(size_t max_head_bytes, size_t max_body_bytes, int max_headers);
void co_http_parser_free(co_http_parser *p);

typedef enum co_http_parse_rc {
    CO_HTTP_PARSE_MORE,    /* every byte taken; the request (if one began) is not complete */
    CO_HTTP_PARSE_REQUEST, /* a request is complete (co_http_parser_request); *used ends at its
                              last byte, and what follows is the next request's */
    CO_HTTP_PARSE_REFUSED, /* the request is refused (co_http_parser_refusal); the connection's
                              bytes cannot be read any further */
} co_http_parse_rc;

/* Parses up to n bytes; *used: how many it took. */
co_http_parse_rc co_http_parser_feed(co_http_parser *p, const char *data, size_t n, size_t *used);
/* Whether a request has begun and is not complete yet (its deadline runs). */
bool co_http_parser_reading(const co_http_parser *p);
/* Whether the client waits for "100 Continue" before it sends the body: true once per request,
 * as soon as its head is accepted. */
bool co_http_parser_take_continue(co_http_parser *p);
/* The request: whole after CO_HTTP_PARSE_REQUEST; otherwise the head as far as it arrived (the
 * Origin, for the CORS headers of an error answer) without a body. */
co_http_parsed co_http_parser_request(const co_http_parser *p);
/* After CO_HTTP_PARSE_REFUSED: the status to answer with and why (plain text). */
int co_http_parser_refusal(const co_http_parser *p, const char **why);

/* Bytes the parser holds for the request (its target and body buffers), for the server's budget. */
size_t co_http_parser_held(const co_http_parser *p);
/* The body is no longer needed: its buffer is freed now (the request's body reads "" after). */
void co_http_parser_drop_body(co_http_parser *p);
/* The request is over: its body is freed, and its target's buffer unless it is small. */
void co_http_parser_trim(co_http_parser *p);

#endif
