/* coordinator/co_cors.h — cross-origin resource sharing for the HTTP server: which web pages
 * (browser origins) may read the API's answers, set by `serve --cors-origins`, and the response
 * headers that tell the browser so. Without them a page served from elsewhere (a chat UI, a
 * notebook) cannot call the server from the browser; llama.cpp's server and vLLM answer such
 * pages by default, and so does moewire ("*").
 *
 * The policy is one of: "*" (any origin), "localhost" (pages served from localhost, 127.0.0.1 or
 * [::1], any scheme and port), "none" (no CORS headers: browsers refuse cross-origin reads), or a
 * comma-separated list of exact origins ("https://chat.example.com,http://127.0.0.1:3000"). */
#ifndef CO_CORS_H
#define CO_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/mw_err.h"

typedef struct co_cors co_cors;

/* Parses a policy; NULL spec is "*". A malformed list entry is an error naming it. */
int co_cors_new(const char *spec, co_cors **out, mw_err *err);
void co_cors_free(co_cors *c);

/* May a page from `origin` (the request's Origin header; "" when absent) read the answers? */
bool co_cors_allowed(const co_cors *c, const char *origin);

/* Header lines (each ending in "\r\n") for an answer to a request from `origin` ("" when it has
 * none): Access-Control-Allow-Origin when the origin is allowed, and Vary: Origin whenever the
 * answer depends on it (a list or localhost). Returns the bytes written (at most cap - 1, NUL
 * terminated). */
size_t co_cors_headers(const co_cors *c, const char *origin, char *buf, size_t cap);

/* The extra lines of an allowed preflight (OPTIONS with Access-Control-Request-Method): the
 * methods the route takes, the request headers asked for (req_headers: the
 * Access-Control-Request-Headers value, echoed when it is a plain list of header names; NULL or
 * unusable: the headers OpenAI clients send), and how long the browser may cache the answer. */
size_t co_cors_preflight_headers(const char *methods, const char *req_headers, char *buf,
                                 size_t cap);

#endif
