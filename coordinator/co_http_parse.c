/* coordinator/co_http_parse.c — the request parser (co_http_parse.h): llhttp's callbacks keep the
 * request's pieces, bounded as they arrive; on_message_complete pauses llhttp, so a feed returns
 * at the end of each request and the bytes after it wait for the next feed. */
#include "coordinator/co_http_parse.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/mw_grow.h"

#define FIELD_MAX 64
#define VALUE_MAX 256
#define ACRH_MAX  512 /* an Access-Control-Request-Headers list echoed to a preflight */
#define AUTH_MAX  512 /* an Authorization value (a bearer token is at most 256) */
/* Bytes of a head that reach no callback (whitespace, line ends) allowed beyond max_head_bytes. */
#define HEAD_SLACK 4096

struct co_http_parser {
    llhttp_t ll;
    llhttp_settings_t settings;
    size_t max_head, max_body;
    int max_headers;
    /* the request being parsed */
    char method[24];
    char *url;
    size_t url_len, url_cap;
    char field[FIELD_MAX + 1], value[VALUE_MAX + 1];
    size_t field_len, value_len;
    char content_type[VALUE_MAX + 1];
    char origin[VALUE_MAX + 1];
    char acr_headers[ACRH_MAX + 1];
    size_t acr_len;
    char authorization[AUTH_MAX + 1];
    size_t auth_len;
    bool acr_method;
    bool expect_continue, continue_due;
    size_t head_bytes, raw_head;
    int n_headers;
    bool reading, head_done;
    bool complete; /* the request is whole (its target split at '?') */
    size_t query;  /* where the query starts in url (complete, has_query) */
    bool has_query;
    bool keep_alive, http11; /* of the complete request */
    char *body;
    size_t body_len, body_cap;
    int fail_status;
    const char *fail_msg;
    char why[200];
};

static co_http_parser *parser_of(llhttp_t *ll) {
    return ll->data;
}

static void reset_request(co_http_parser *p) {
    p->method[0] = 0;
    p->url_len = 0;
    if (p->url) p->url[0] = 0;
    p->complete = p->has_query = p->keep_alive = p->http11 = false;
    p->field_len = p->value_len = 0;
    p->field[0] = p->value[0] = 0;
    p->content_type[0] = p->origin[0] = p->acr_headers[0] = p->authorization[0] = 0;
    p->acr_len = p->auth_len = 0;
    p->acr_method = p->expect_continue = p->continue_due = false;
    p->head_bytes = p->raw_head = 0;
    p->n_headers = 0;
    p->head_done = false;
    p->body_len = 0;
    p->fail_status = 0;
    p->fail_msg = NULL;
}

static int fail(co_http_parser *p, int status, const char *msg) {
    p->fail_status = status;
    p->fail_msg = msg;
    return HPE_USER;
}

static int count_head(co_http_parser *p, size_t n) {
    p->head_bytes += n;
    if (p->head_bytes > p->max_head)
        return fail(p, 431, "the request head is larger than the server accepts");
    return 0;
}

/* ---- llhttp's callbacks --------------------------------------------------------------------- */

static int on_message_begin(llhttp_t *ll) {
    co_http_parser *p = parser_of(ll);
    reset_request(p);
    p->reading = true;
    return 0;
}

static int on_method(llhttp_t *ll, const char *at, size_t n) {
    co_http_parser *p = parser_of(ll);
    size_t have = strlen(p->method);
    if (have + n >= sizeof p->method) return fail(p, 501, "unknown method");
    memcpy(p->method + have, at, n);
    p->method[have + n] = 0;
    return count_head(p, n);
}

static int on_url(llhttp_t *ll, const char *at, size_t n) {
    co_http_parser *p = parser_of(ll);
    if (p->url_len + n > p->max_head)
        return fail(p, 414, "the request target is longer than the server accepts");
    if (mw_grow((void **)&p->url, &p->url_cap, p->url_len + n + 1, 1))
        return fail(p, 500, "out of memory");
    memcpy(p->url + p->url_len, at, n);
    p->url_len += n;
    p->url[p->url_len] = 0;
    return count_head(p, n);
}

/* Header names and values are kept up to a fixed size (longer ones match nothing we read). */
static void append_capped(char *dst, size_t *len, size_t cap, const char *at, size_t n) {
    size_t take = *len + n > cap ? cap - *len : n;
    memcpy(dst + *len, at, take);
    *len += take;
    dst[*len] = 0;
}

static int on_header_field(llhttp_t *ll, const char *at, size_t n) {
    co_http_parser *p = parser_of(ll);
    append_capped(p->field, &p->field_len, FIELD_MAX, at, n);
    return count_head(p, n);
}

static int on_header_value(llhttp_t *ll, const char *at, size_t n) {
    co_http_parser *p = parser_of(ll);
    append_capped(p->value, &p->value_len, VALUE_MAX, at, n);
    if (!strcasecmp(p->field, "access-control-request-headers")) /* may be longer than a value */
        append_capped(p->acr_headers, &p->acr_len, ACRH_MAX, at, n);
    else if (!strcasecmp(p->field, "authorization"))
        append_capped(p->authorization, &p->auth_len, AUTH_MAX, at, n);
    return count_head(p, n);
}

static int on_header_value_complete(llhttp_t *ll) {
    co_http_parser *p = parser_of(ll);
    if (++p->n_headers > p->max_headers)
        return fail(p, 431, "the request has more header lines than the server accepts");
    if (!strcasecmp(p->field, "content-type"))
        memcpy(p->content_type, p->value, p->value_len + 1);
    else if (!strcasecmp(p->field, "origin"))
        memcpy(p->origin, p->value, p->value_len + 1);
    else if (!strcasecmp(p->field, "access-control-request-method"))
        p->acr_method = true;
    else if (!strcasecmp(p->field, "content-encoding") && strcasecmp(p->value, "identity"))
        return fail(p, 415, "compressed request bodies (Content-Encoding) are not supported");
    else if (!strcasecmp(p->field, "expect")) {
        if (strcasecmp(p->value, "100-continue")) return fail(p, 417, "unsupported Expect header");
        p->expect_continue = true;
    }
    p->field_len = p->value_len = 0;
    p->field[0] = p->value[0] = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *ll) {
    co_http_parser *p = parser_of(ll);
    p->head_done = true;
    if (ll->upgrade) {
        if (ll->method == HTTP_CONNECT) return fail(p, 400, "CONNECT is not supported");
        /* HTTP/1.1 it stays: a server may ignore Upgrade (RFC 9110, 7.8), so `curl --http2`'s h2c
         * offer or a WebSocket handshake gets a plain answer instead of an error */
        ll->upgrade = 0;
    }
    if ((ll->flags & F_CONTENT_LENGTH) && ll->content_length > p->max_body)
        return fail(p, 413, "the request body is larger than the server accepts");
    p->continue_due = p->expect_continue;
    return 0;
}

static int on_body(llhttp_t *ll, const char *at, size_t n) {
    co_http_parser *p = parser_of(ll);
    if (p->body_len + n > p->max_body)
        return fail(p, 413, "the request body is larger than the server accepts");
    if (mw_grow((void **)&p->body, &p->body_cap, p->body_len + n + 1, 1))
        return fail(p, 500, "out of memory");
    memcpy(p->body + p->body_len, at, n);
    p->body_len += n;
    return 0;
}

static int on_message_complete(llhttp_t *ll) {
    (void)ll;
    return HPE_PAUSED;
}

/* ---- the parser ----------------------------------------------------------------------------- */

co_http_parser *co_http_parser_new(size_t max_head_bytes, size_t max_body_bytes, int max_headers) {
    co_http_parser *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->max_head = max_head_bytes;
    p->max_body = max_body_bytes;
    p->max_headers = max_headers;
    llhttp_settings_init(&p->settings);
    p->settings.on_message_begin = on_message_begin;
    p->settings.on_method = on_method;
    p->settings.on_url = on_url;
    p->settings.on_header_field = on_header_field;
    p->settings.on_header_value = on_header_value;
    p->settings.on_header_value_complete = on_header_value_complete;
    p->settings.on_headers_complete = on_headers_complete;
    p->settings.on_body = on_body;
    p->settings.on_message_complete = on_message_complete;
    llhttp_init(&p->ll, HTTP_REQUEST, &p->settings);
    p->ll.data = p;
    reset_request(p);
    return p;
}

void co_http_parser_free(co_http_parser *p) {
    if (!p) return;
    free(p->url);
    free(p->body);
    free(p);
}

static co_http_parse_rc refuse(co_http_parser *p, int status, const char *why) {
    p->fail_status = status;
    snprintf(p->why, sizeof p->why, "%s", why);
    p->reading = false;
    return CO_HTTP_PARSE_REFUSED;
}

/* A whole request: its target and body as strings, the target split at '?'. */
static co_http_parse_rc complete(co_http_parser *p) {
    if (mw_grow((void **)&p->url, &p->url_cap, p->url_len + 1, 1) ||
        mw_grow((void **)&p->body, &p->body_cap, p->body_len + 1, 1))
        return refuse(p, 500, "out of memory");
    p->url[p->url_len] = 0;
    p->body[p->body_len] = 0;
    char *q = strchr(p->url, '?');
    if ((p->has_query = q != NULL)) {
        *q = 0;
        p->query = (size_t)(q + 1 - p->url);
    }
    p->keep_alive = llhttp_should_keep_alive(&p->ll);
    p->http11 = p->ll.http_major == 1 && p->ll.http_minor >= 1;
    p->complete = true;
    p->reading = false;
    return CO_HTTP_PARSE_REQUEST;
}

co_http_parse_rc co_http_parser_feed(co_http_parser *p, const char *data, size_t n, size_t *used) {
    *used = 0;
    const llhttp_errno_t e = llhttp_execute(&p->ll, data, n);
    if (e == HPE_OK) {
        *used = n;
        /* a head that grows without reaching a callback (whitespace, line ends) is bounded too */
        if (p->reading && !p->head_done && (p->raw_head += n) > p->max_head + HEAD_SLACK)
            return refuse(p, 431, "the request head is larger than the server accepts");
        return CO_HTTP_PARSE_MORE;
    }
    if (e == HPE_PAUSED) {
        const char *pos = llhttp_get_error_pos(&p->ll);
        *used = pos && pos >= data && pos <= data + n ? (size_t)(pos - data) : n;
        llhttp_resume(&p->ll);
        return complete(p);
    }
    *used = n;
    char why[200];
    if (p->fail_msg)
        snprintf(why, sizeof why, "%s", p->fail_msg);
    else
        snprintf(why, sizeof why, "malformed HTTP request (%s)", llhttp_errno_name(e));
    return refuse(p, e == HPE_INVALID_VERSION ? 505 : p->fail_status ? p->fail_status : 400, why);
}

bool co_http_parser_reading(const co_http_parser *p) {
    return p->reading;
}

bool co_http_parser_take_continue(co_http_parser *p) {
    const bool due = p->continue_due;
    p->continue_due = false;
    return due;
}

co_http_parsed co_http_parser_request(const co_http_parser *p) {
    const bool whole = p->complete;
    return (co_http_parsed){.method = p->method,
                            .path = p->url ? p->url : "",
                            .query = whole && p->has_query ? p->url + p->query : "",
                            .content_type = p->content_type,
                            .origin = p->origin,
                            .authorization = p->authorization,
                            .acr_headers = p->acr_headers,
                            .acr_method = p->acr_method,
                            .body = whole ? p->body : "",
                            .body_len = whole ? p->body_len : 0,
                            .keep_alive = whole && p->keep_alive,
                            .http11 = whole && p->http11};
}

int co_http_parser_refusal(const co_http_parser *p, const char **why) {
    *why = p->why;
    return p->fail_status;
}
