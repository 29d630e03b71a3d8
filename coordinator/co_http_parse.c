/* coordinator/co_http_parse.c — the request parser (co_http_parse.h): llhttp's callbacks keep the
 * request's pieces, bounded as they arrive; on_message_complete pauses llhttp, so a feed returns
 * at the end of each request and the bytes after it wait for the next feed. What llhttp lets
 * through and RFC 9112 does not (a request line without a version, versions other than 1.x,
 * HTTP/1.1 without Host, bytes in the target that are not visible ASCII) is refused here. */
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
/* A target buffer up to this size is kept for the connection's next request. */
#define TRIM_KEEP 1024
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
    bool has_version, has_host;
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
    char fail_buf[120]; /* a refusal's reason with figures in it (fail_msg points here) */
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
    p->has_version = p->has_host = false;
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
    /* the target is visible ASCII (RFC 9112, 3.2); other bytes go percent-encoded */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)at[i] <= 0x20 || (unsigned char)at[i] >= 0x7f) {
            snprintf(p->fail_buf, sizeof p->fail_buf,
                     "the request target has byte 0x%02x, which is not visible ASCII "
                     "(percent-encode it)",
                     (unsigned char)at[i]);
            return fail(p, 400, p->fail_buf);
        }
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

static int on_version(llhttp_t *ll, const char *at, size_t n) {
    co_http_parser *p = parser_of(ll);
    p->has_version = true;
    return count_head(p, n);
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
    else if (!strcasecmp(p->field, "host")) {
        if (p->has_host) return fail(p, 400, "the request has more than one Host header");
        p->has_host = true;
    } else if (!strcasecmp(p->field, "content-encoding") && strcasecmp(p->value, "identity"))
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
    /* HTTP/0.9's bare request line, and versions this server does not speak: llhttp takes
     * 0.9 and 2.0 as well as 1.x */
    if (!p->has_version)
        return fail(p, 400, "the request line has no HTTP version (this server speaks HTTP/1.1)");
    if (ll->http_major != 1) {
        snprintf(p->fail_buf, sizeof p->fail_buf,
                 "HTTP/%d.%d is not supported: this server speaks HTTP/1.1 and HTTP/1.0",
                 ll->http_major, ll->http_minor);
        return fail(p, 505, p->fail_buf);
    }
    if ((ll->flags & F_CONTENT_LENGTH) && ll->content_length > p->max_body)
        return fail(p, 413, "the request body is larger than the server accepts");
    if (ll->http_minor >= 1 && !p->has_host) /* RFC 9112, 3.2 */
        return fail(p, 400, "an HTTP/1.1 request must have a Host header");
    p->continue_due = p->expect_continue;
    return 0;
}

/* Room for `need` body bytes and the terminator: the buffer doubles, but never past a
 * Content-Length's size, so what a body holds is at most its announced length plus one. */
static int grow_body(co_http_parser *p, size_t need) {
    if (need + 1 <= p->body_cap) return 0;
    size_t cap = p->body_cap * 2 > need + 1 ? p->body_cap * 2 : need + 1;
    /* content_length: what is still to come (after these bytes, or with them: either bounds) */
    if ((p->ll.flags & F_CONTENT_LENGTH) && need + p->ll.content_length + 1 < cap)
        cap = need + (size_t)p->ll.content_length + 1;
    if (cap < need + 1) cap = need + 1;
    char *b = realloc(p->body, cap);
    if (!b) return -1;
    p->body = b;
    p->body_cap = cap;
    return 0;
}

static int on_body(llhttp_t *ll, const char *at, size_t n) {
    co_http_parser *p = parser_of(ll);
    if (p->body_len + n > p->max_body)
        return fail(p, 413, "the request body is larger than the server accepts");
    if (grow_body(p, p->body_len + n)) return fail(p, 500, "out of memory");
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
    p->settings.on_version = on_version;
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

/* An absolute-form target ("http://host:port/path?q", which a server must accept: RFC 9112,
 * 3.2.2) becomes its origin form ("/path?q"; "/" when it names no path) in place: the scheme and
 * authority it drops are longer than the '/' it may add. */
static void origin_form(co_http_parser *p) {
    size_t skip = !strncasecmp(p->url, "http://", 7)    ? 7
                  : !strncasecmp(p->url, "https://", 8) ? 8
                                                        : 0;
    if (!skip) return;
    const size_t auth = strcspn(p->url + skip, "/?");
    const size_t from = skip + auth, rest = p->url_len - from;
    const bool slash = p->url[from] == '/';
    memmove(p->url + !slash, p->url + from, rest + 1);
    if (!slash) p->url[0] = '/';
    p->url_len = rest + !slash;
}

/* A whole request: its target and body as strings, the target split at '?'. */
static co_http_parse_rc complete(co_http_parser *p) {
    if (mw_grow((void **)&p->url, &p->url_cap, p->url_len + 1, 1) || grow_body(p, p->body_len))
        return refuse(p, 500, "out of memory");
    p->url[p->url_len] = 0;
    p->body[p->body_len] = 0;
    origin_form(p);
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
                            .body = whole && p->body ? p->body : "",
                            .body_len = whole ? p->body_len : 0,
                            .keep_alive = whole && p->keep_alive,
                            .http11 = whole && p->http11};
}

int co_http_parser_refusal(const co_http_parser *p, const char **why) {
    *why = p->why;
    return p->fail_status;
}

size_t co_http_parser_held(const co_http_parser *p) {
    return p->url_cap + p->body_cap;
}

void co_http_parser_drop_body(co_http_parser *p) {
    free(p->body);
    p->body = NULL;
    p->body_len = p->body_cap = 0;
}

void co_http_parser_trim(co_http_parser *p) {
    co_http_parser_drop_body(p);
    if (p->url_cap > TRIM_KEEP) {
        free(p->url);
        p->url = NULL;
        p->url_len = p->url_cap = 0;
    }
}
