/* tests/unit/test_co_http.c — the HTTP/1.1 server's two halves without the rest of serve:
 *  - the request parser (co_http_parse) fed bytes directly: a request's pieces (method, target
 *    and query, the headers the server reads, body by length or in chunks), the same request fed
 *    one byte at a time, pipelined requests, keep-alive by version and Connection, and every
 *    refusal with its status: head, header lines, target and body beyond their limits (a body
 *    refused from its Content-Length before it arrives), compressed bodies, Expect, CONNECT,
 *    malformed input; 100-continue once per request, Upgrade ignored;
 *  - the server (co_http) on a loop of its own thread, spoken to over a socket: whole answers
 *    with their length, HEAD without a body, streamed answers chunked (HTTP/1.1) or ended by the
 *    close (HTTP/1.0), pipelined requests answered in order on one connection, 100 Continue
 *    before the body, an error answer closing the connection, the request deadline (408), the
 *    connection limit (503), CORS headers and preflights; and the reason phrases. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_http.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "coordinator/co_http.h"
#include "coordinator/co_http_parse.h"

/* ---- the parser ----------------------------------------------------------------------------- */

#define MAX_HEAD 1024
#define MAX_BODY 64

static co_http_parser *parser(void) {
    co_http_parser *p = co_http_parser_new(MAX_HEAD, MAX_BODY, 8);
    assert_non_null(p);
    return p;
}

/* Feeds the whole string: it must be one complete request, every byte taken. */
static co_http_parsed one_request(co_http_parser *p, const char *text) {
    size_t used;
    const co_http_parse_rc rc = co_http_parser_feed(p, text, strlen(text), &used);
    if (rc != CO_HTTP_PARSE_REQUEST) {
        const char *why = "";
        if (rc == CO_HTTP_PARSE_REFUSED) co_http_parser_refusal(p, &why);
        fail_msg("not one request (rc %d: %s): %s", rc, why, text);
    }
    assert_int_equal(used, strlen(text));
    assert_false(co_http_parser_reading(p));
    return co_http_parser_request(p);
}

/* Feeds the string in one piece: refused with `status`, the reason holding `needle`. */
static void refused(const char *text, size_t len, int status, const char *needle) {
    co_http_parser *p = parser();
    size_t used;
    const co_http_parse_rc rc = co_http_parser_feed(p, text, len, &used);
    const char *why = "";
    const int got = rc == CO_HTTP_PARSE_REFUSED ? co_http_parser_refusal(p, &why) : 0;
    if (got != status || !strstr(why, needle))
        fail_msg("%.60s...: rc %d, status %d '%s'; expected %d '%s'", text, rc, got, why, status,
                 needle);
    co_http_parser_free(p);
}

static void refused_str(const char *text, int status, const char *needle) {
    refused(text, strlen(text), status, needle);
}

static void test_parse_request(void **st) {
    (void)st;
    co_http_parser *p = parser();
    co_http_parsed q = one_request(p, "POST /v1/completions?a=1&b=2 HTTP/1.1\r\n"
                                      "Host: x\r\ncontent-TYPE: application/json\r\n"
                                      "Origin: https://a.example\r\n"
                                      "AUTHORIZATION: Bearer k3y\r\n"
                                      "Content-Length: 11\r\n\r\n{\"a\": true}");
    assert_string_equal(q.method, "POST");
    assert_string_equal(q.path, "/v1/completions");
    assert_string_equal(q.query, "a=1&b=2");
    assert_string_equal(q.content_type, "application/json");
    assert_string_equal(q.origin, "https://a.example");
    assert_string_equal(q.authorization, "Bearer k3y");
    assert_int_equal(q.body_len, 11);
    assert_string_equal(q.body, "{\"a\": true}"); /* NUL-terminated */
    assert_true(q.keep_alive);
    assert_true(q.http11);
    assert_false(q.acr_method);
    /* the next request on the same parser starts clean */
    q = one_request(p, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_string_equal(q.method, "GET");
    assert_string_equal(q.path, "/health");
    assert_string_equal(q.query, "");
    assert_string_equal(q.content_type, "");
    assert_string_equal(q.origin, "");
    assert_string_equal(q.authorization, "");
    assert_int_equal(q.body_len, 0);
    assert_string_equal(q.body, "");
    co_http_parser_free(p);
}

/* One byte at a time: nothing until the last byte, a request in progress from the first. */
static void test_parse_byte_by_byte(void **st) {
    (void)st;
    const char *text = "POST /x?q HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    co_http_parser *p = parser();
    const size_t n = strlen(text);
    for (size_t i = 0; i < n; i++) {
        size_t used;
        const co_http_parse_rc rc = co_http_parser_feed(p, text + i, 1, &used);
        assert_int_equal(used, 1);
        if (i + 1 < n) {
            assert_int_equal(rc, CO_HTTP_PARSE_MORE);
            assert_true(co_http_parser_reading(p));
        } else {
            assert_int_equal(rc, CO_HTTP_PARSE_REQUEST);
        }
    }
    const co_http_parsed q = co_http_parser_request(p);
    assert_string_equal(q.path, "/x");
    assert_string_equal(q.query, "q");
    assert_string_equal(q.content_type, "text/plain");
    assert_int_equal(q.body_len, 5);
    assert_string_equal(q.body, "abcde");
    co_http_parser_free(p);
}

/* Pipelined requests: each feed stops after one, the rest is the next one's. */
static void test_parse_pipelined(void **st) {
    (void)st;
    const char *a = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
               *b = "\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
    char both[256];
    snprintf(both, sizeof both, "%s%s", a, b);
    co_http_parser *p = parser();
    size_t used;
    assert_int_equal(co_http_parser_feed(p, both, strlen(both), &used), CO_HTTP_PARSE_REQUEST);
    assert_int_equal(used, strlen(a));
    assert_string_equal(co_http_parser_request(p).path, "/a");
    size_t used2;
    assert_int_equal(co_http_parser_feed(p, both + used, strlen(both) - used, &used2),
                     CO_HTTP_PARSE_REQUEST);
    assert_int_equal(used + used2, strlen(both));
    const co_http_parsed q = co_http_parser_request(p);
    assert_string_equal(q.path, "/b");
    assert_string_equal(q.body, "hi");
    co_http_parser_free(p);
}

/* Whether the connection stays open: HTTP/1.1 unless Connection: close, HTTP/1.0 only with
 * Connection: keep-alive; chunked answers need HTTP/1.1. */
static void test_parse_keep_alive(void **st) {
    (void)st;
    static const struct {
        const char *text;
        bool keep, http11;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", true, true},
        {"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false, true},
        {"GET / HTTP/1.0\r\n\r\n", false, false},
        {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        co_http_parser *p = parser();
        const co_http_parsed q = one_request(p, cases[i].text);
        if (q.keep_alive != cases[i].keep || q.http11 != cases[i].http11)
            fail_msg("%s: keep_alive %d http11 %d", cases[i].text, q.keep_alive, q.http11);
        co_http_parser_free(p);
    }
}

/* Header values are kept up to a size; what the CORS preflight and the API key need is kept in
 * full up to theirs. */
static void test_parse_header_values(void **st) {
    (void)st;
    char text[1024], longv[300], auth[400];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    memset(auth, 'k', sizeof auth - 1);
    auth[sizeof auth - 1] = 0;
    snprintf(text, sizeof text,
             "OPTIONS /v1/models HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nAuthorization: %s\r\n"
             "Access-Control-Request-Method: POST\r\n"
             "Access-Control-Request-Headers: authorization, content-type\r\n\r\n",
             longv, auth);
    co_http_parser *p = co_http_parser_new(4096, MAX_BODY, 8);
    const co_http_parsed q = one_request(p, text);
    assert_int_equal(strlen(q.content_type), 256); /* capped */
    assert_string_equal(q.authorization, auth);    /* whole */
    assert_true(q.acr_method);
    assert_string_equal(q.acr_headers, "authorization, content-type");
    co_http_parser_free(p);
}

/* 100-continue: due once, as soon as the head is accepted (before the body arrives); never for a
 * body refused from its length. */
static void test_parse_expect_continue(void **st) {
    (void)st;
    const char *head =
        "POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
    co_http_parser *p = parser();
    size_t used;
    assert_false(co_http_parser_take_continue(p));
    assert_int_equal(co_http_parser_feed(p, head, strlen(head), &used), CO_HTTP_PARSE_MORE);
    assert_true(co_http_parser_take_continue(p));
    assert_false(co_http_parser_take_continue(p));
    assert_int_equal(co_http_parser_feed(p, "body", 4, &used), CO_HTTP_PARSE_REQUEST);
    assert_false(co_http_parser_take_continue(p));
    assert_string_equal(co_http_parser_request(p).body, "body");
    co_http_parser_free(p);
    p = parser();
    const char *big =
        "POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 65\r\n\r\n";
    assert_int_equal(co_http_parser_feed(p, big, strlen(big), &used), CO_HTTP_PARSE_REFUSED);
    assert_false(co_http_parser_take_continue(p));
    co_http_parser_free(p);
}

static void test_parse_refusals(void **st) {
    (void)st;
    char text[8192];
    /* the head: its bytes, its header lines, its target */
    int n = snprintf(text, sizeof text, "GET / HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 6; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "X-Pad-%d: %0200d\r\n", i, 0);
    snprintf(text + n, sizeof text - (size_t)n, "\r\n");
    refused_str(text, 431, "head is larger");
    n = snprintf(text, sizeof text, "GET / HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 9; i++) n += snprintf(text + n, sizeof text - (size_t)n, "X-%d: y\r\n", i);
    snprintf(text + n, sizeof text - (size_t)n, "\r\n");
    refused_str(text, 431, "more header lines");
    n = snprintf(text, sizeof text, "GET /");
    memset(text + n, 'a', MAX_HEAD + 10);
    snprintf(text + n + MAX_HEAD + 10, sizeof text - (size_t)n - MAX_HEAD - 10,
             " HTTP/1.1\r\nHost: x\r\n\r\n");
    refused_str(text, 414, "target is longer");
    /* whitespace that reaches no callback counts as head too */
    n = snprintf(text, sizeof text, "GET / HTTP/1.1\r\nHost: x\r\nX-A:");
    memset(text + n, ' ', 6000);
    refused(text, (size_t)n + 6000, 431, "head is larger");
    /* the body: refused from its length before it arrives, or as its chunks add up */
    refused_str("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 65\r\n\r\n", 413, "body is larger");
    n = snprintf(text, sizeof text,
                 "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 5; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "10\r\n%016d\r\n", i);
    refused_str(text, 413, "body is larger");
    /* what this server does not take */
    refused_str(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\nx", 415,
        "Content-Encoding");
    refused_str("POST / HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n", 417, "Expect");
    refused_str("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n", 400, "CONNECT");
    /* malformed */
    refused_str("GARBAGE\r\n\r\n", 400, "malformed HTTP request");
    refused_str("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
                "malformed HTTP request");
    refused_str("GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400, "malformed HTTP request");
    refused_str("GET / HTTP/3.7\r\n\r\n", 505, "malformed HTTP request");
    /* a refused request still shows its Origin, for the CORS headers of the answer */
    co_http_parser *p = parser();
    const char *o =
        "POST / HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\nContent-Length: 99\r\n\r\n";
    size_t used;
    assert_int_equal(co_http_parser_feed(p, o, strlen(o), &used), CO_HTTP_PARSE_REFUSED);
    assert_string_equal(co_http_parser_request(p).origin, "https://a.example");
    co_http_parser_free(p);
}

/* The versions, the Host header and the target forms RFC 9112 asks for: a request line without a
 * version is HTTP/0.9's (400), versions other than 1.x get 505 (llhttp itself takes 0.9 and 2.0),
 * HTTP/1.1 needs exactly one Host (1.0 none); an absolute-form target is served by its path;
 * bytes in the target that are not visible ASCII are refused (400), never taken as a path. */
static void test_parse_versions_and_targets(void **st) {
    (void)st;
    refused_str("GET /health\r\n\r\n", 400, "no HTTP version");
    refused_str("GET /health\r\nHost: x\r\n\r\n", 400, "");
    refused_str("GET /health HTTP/0.9\r\n\r\n", 505, "HTTP/0.9 is not supported");
    refused_str("GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505, "HTTP/2.0 is not supported");
    refused_str("GET /health HTTP/1.2\r\nHost: x\r\n\r\n", 505, "");
    refused_str("GET /health HTTP/9.9\r\nHost: x\r\n\r\n", 505, "");
    refused_str("GET /health HTTP/1.1\r\n\r\n", 400, "must have a Host header");
    refused_str("GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "more than one Host");
    co_http_parser *p = parser();
    co_http_parsed q = one_request(p, "GET /health HTTP/1.0\r\n\r\n"); /* 1.0: Host optional */
    assert_string_equal(q.path, "/health");
    co_http_parser_free(p); /* (1.0 without keep-alive: nothing follows on that connection) */
    p = parser();
    q = one_request(p, "POST http://127.0.0.1:8080/v1/completions?a=b HTTP/1.1\r\n"
                       "Host: 127.0.0.1:8080\r\nContent-Length: 2\r\n\r\n{}");
    assert_string_equal(q.path, "/v1/completions");
    assert_string_equal(q.query, "a=b");
    assert_string_equal(q.body, "{}");
    q = one_request(p, "GET HTTPS://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_string_equal(q.path, "/");
    q = one_request(p, "GET http://example.com?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_string_equal(q.path, "/");
    assert_string_equal(q.query, "x=1");
    q = one_request(p, "GET /a%C3%A9 HTTP/1.1\r\nHost: x\r\n\r\n"); /* percent-encoded */
    assert_string_equal(q.path, "/a%C3%A9");
    co_http_parser_free(p);
    refused_str("GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", 400,
                "0xff, which is not visible ASCII");
    refused_str("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "not visible ASCII");
    refused_str("GET /a\x7f HTTP/1.1\r\nHost: x\r\n\r\n", 400, "");
}

/* The body's buffer: never past its announced length (plus the terminator), held until dropped,
 * and freed with the request (the target's too when large). */
static void test_parse_body_memory(void **st) {
    (void)st;
    co_http_parser *p = co_http_parser_new(MAX_HEAD, 1 << 20, 8);
    assert_int_equal(co_http_parser_held(p), 0);
    const char *head = "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n";
    size_t used;
    assert_int_equal(co_http_parser_feed(p, head, strlen(head), &used), CO_HTTP_PARSE_MORE);
    char chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    for (int i = 0; i < 3; i++)
        assert_int_equal(co_http_parser_feed(p, chunk, sizeof chunk, &used),
                         i < 2 ? CO_HTTP_PARSE_MORE : CO_HTTP_PARSE_REQUEST);
    co_http_parsed q = co_http_parser_request(p);
    assert_int_equal(q.body_len, 3000);
    const size_t held = co_http_parser_held(p);
    assert_true(held >= 3001 && held <= 3001 + 64); /* the body and the short target's */
    co_http_parser_drop_body(p);
    q = co_http_parser_request(p);
    assert_int_equal(q.body_len, 0);
    assert_string_equal(q.body, "");
    assert_string_equal(q.path, "/x"); /* the rest of the request stays */
    assert_true(co_http_parser_held(p) <= 64);
    co_http_parser_trim(p);
    assert_true(co_http_parser_held(p) <= 64); /* a short target's buffer is kept */
    char *longt = malloc(4096);
    int n = snprintf(longt, 4096, "GET /");
    memset(longt + n, 'b', 2000);
    snprintf(longt + n + 2000, 4096 - (size_t)n - 2000, " HTTP/1.1\r\nHost: x\r\n\r\n");
    co_http_parser *big = co_http_parser_new(4096, 64, 8);
    one_request(big, longt);
    assert_true(co_http_parser_held(big) >= 2001);
    co_http_parser_trim(big);
    assert_int_equal(co_http_parser_held(big), 0);
    one_request(big, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_string_equal(co_http_parser_request(big).path, "/again");
    co_http_parser_free(big);
    free(longt);
    co_http_parser_free(p);
}

/* Identity encoding is no encoding; an Upgrade offer is ignored (the request stays HTTP/1.1). */
static void test_parse_accepted_oddities(void **st) {
    (void)st;
    co_http_parser *p = parser();
    co_http_parsed q = one_request(
        p,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Encoding: identity\r\nContent-Length: 1\r\n\r\nx");
    assert_string_equal(q.body, "x");
    q = one_request(
        p, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
           "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n");
    assert_string_equal(q.path, "/");
    q = one_request(p, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n"); /* and the connection goes on */
    assert_string_equal(q.path, "/after");
    co_http_parser_free(p);
}

/* ---- the server ----------------------------------------------------------------------------- */

typedef struct server {
    uv_loop_t loop;
    uv_async_t stop;
    co_http_server *http;
    pthread_t thread;
    int port;
} server;

/* What the server told the handlers, read by the test's thread. */
static co_http_server *cur_http; /* the server running now */
static int n_refused[600];       /* the refuse hook's count per status */
static int n_flow[3];            /* CO_HTTP_FLOW_* events */
static int n_aborts;

static void on_refuse(void *ud, const char *path, int status) {
    (void)ud, (void)path;
    if (status >= 0 && status < 600) __atomic_add_fetch(&n_refused[status], 1, __ATOMIC_SEQ_CST);
}

static int counted(const int *x) {
    return __atomic_load_n(x, __ATOMIC_SEQ_CST);
}

static void on_abort_count(void *ud) {
    (void)ud;
    __atomic_add_fetch(&n_aborts, 1, __ATOMIC_SEQ_CST);
}

static bool press; /* /flood?press: a paused stream gets 100 ms (co_http_stall_within) */

/* /flood's flow: a stream that caught up again ends. */
static void on_flow_event(void *ud, co_http_flow ev, size_t unsent) {
    (void)unsent;
    __atomic_add_fetch(&n_flow[ev], 1, __ATOMIC_SEQ_CST);
    if (ev == CO_HTTP_FLOW_RESUME) co_http_stream_end(ud);
    if (ev == CO_HTTP_FLOW_PAUSE && press) co_http_stall_within(ud, 100);
}

/* /flood: 2 MiB at once into a stream, which the client may or may not read. */
static void flood(co_http_req *q) {
    static char piece[65536];
    memset(piece, 'f', sizeof piece);
    co_http_on_abort(q->conn, on_abort_count, NULL);
    co_http_on_flow(q->conn, on_flow_event, q->conn);
    co_http_stream_start(q->conn, 200, "text/plain", "");
    for (int i = 0; i < 32; i++) co_http_stream_send(q->conn, piece, sizeof piece);
}

/* The handler: /echo answers with what it got, /stream streams two pieces, /options answers an
 * OPTIONS, /hang never answers, /held says how many request bytes the server holds, /flood (see
 * flood), anything else 404. */
static void handle(void *ud, co_http_req *q) {
    (void)ud;
    char body[512];
    if (!strcmp(q->path, "/stream")) {
        co_http_stream_start(q->conn, 200, "text/plain", "X-Streamed: yes\r\n");
        co_http_stream_send(q->conn, "hello ", 6);
        co_http_stream_send(q->conn, "world", 5);
        co_http_stream_end(q->conn);
    } else if (!strcmp(q->path, "/options")) {
        co_http_respond_options(q->conn, "POST, OPTIONS");
    } else if (!strcmp(q->path, "/echo")) {
        const int n = snprintf(body, sizeof body, "%s %s ?%s ct=%s auth=%s body=%s", q->method,
                               q->path, q->query, q->content_type, q->authorization, q->body);
        co_http_respond(q->conn, 200, "text/plain", "", body, (size_t)n);
    } else if (!strcmp(q->path, "/held")) {
        const int n =
            snprintf(body, sizeof body, "%zu %zu", co_http_server_held(cur_http), q->body_len);
        co_http_respond(q->conn, 200, "text/plain", "", body, (size_t)n);
    } else if (!strcmp(q->path, "/flood")) {
        press = !strcmp(q->query, "press");
        flood(q);
    } else if (strcmp(q->path, "/hang")) {
        co_http_respond(q->conn, 404, "text/plain", "", "no\n", 3);
    }
}

static void on_stop(uv_async_t *a) {
    server *s = a->data;
    co_http_server_close(s->http);
    uv_close((uv_handle_t *)&s->stop, NULL);
}

static void *run_loop(void *arg) {
    server *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void server_start(server *s, const co_http_limits *lim, const char *cors) {
    memset(s, 0, sizeof *s);
    assert_int_equal(uv_loop_init(&s->loop), 0);
    mw_err err;
    if (co_http_server_new(&s->loop, "127.0.0.1", 0, lim, handle, NULL, &s->http, &err))
        fail_msg("%s", err.msg);
    if (cors) {
        co_cors *c;
        if (co_cors_new(cors, &c, &err)) fail_msg("%s", err.msg);
        co_http_server_set_cors(s->http, c);
    }
    s->port = co_http_server_port(s->http);
    assert_true(s->port > 0);
    cur_http = s->http;
    co_http_server_on_refuse(s->http, on_refuse, NULL);
    memset(n_refused, 0, sizeof n_refused);
    memset(n_flow, 0, sizeof n_flow);
    n_aborts = 0;
    uv_async_init(&s->loop, &s->stop, on_stop);
    s->stop.data = s;
    assert_int_equal(pthread_create(&s->thread, NULL, run_loop, s), 0);
}

static void server_stop(server *s) {
    uv_async_send(&s->stop);
    pthread_join(s->thread, NULL);
    assert_int_equal(uv_loop_close(&s->loop), 0);
}

static int connect_to(const server *s) {
    const int fd = mwt_http_connect(s->port);
    assert_true(fd >= 0);
    return fd;
}

static void send_str(int fd, const char *text) {
    assert_int_equal(mwt_http_send(fd, text, strlen(text)), 0);
}

static void read_resp(int fd, mwt_resp *r) {
    if (mwt_http_read(fd, r, 10000)) fail_msg("no response");
}

/* Whole answers with their length, the request's pieces reaching the handler; HEAD answers carry
 * the head only; pipelined requests are answered in order on one connection. */
static void test_server_answers(void **st) {
    (void)st;
    server s;
    server_start(&s, NULL, NULL);
    int fd = connect_to(&s);
    send_str(fd, "POST /echo?x=1 HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nAuthorization: "
                 "Bearer t\r\n"
                 "Content-Length: 3\r\n\r\nabc"
                 "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n");
    mwt_resp r;
    read_resp(fd, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "POST /echo ?x=1 ct=text/plain auth=Bearer t body=abc");
    assert_string_equal(mwt_resp_header(&r, "Content-Length"), "52");
    assert_string_equal(mwt_resp_header(&r, "Connection"), "keep-alive");
    assert_false(r.closed);
    mwt_resp_free(&r);
    read_resp(fd, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "GET /echo ? ct= auth= body=");
    mwt_resp_free(&r);
    read_resp(fd, &r);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.head, "HTTP/1.1 404 Not Found\r\n"));
    mwt_resp_free(&r);
    send_str(fd, "HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\nGET /echo HTTP/1.1\r\nHost: "
                 "x\r\nConnection: close\r\n\r\n");
    assert_int_equal(mwt_http_read_head(fd, &r, 10000), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(mwt_resp_header(&r, "Content-Length"), "28"); /* "HEAD /echo ? ..." */
    mwt_resp_free(&r);
    read_resp(fd, &r); /* the next answer follows the head at once: no body in between */
    assert_string_equal(r.body, "GET /echo ? ct= auth= body=");
    assert_string_equal(mwt_resp_header(&r, "Connection"), "close");
    mwt_resp_free(&r);
    assert_true(mwt_http_eof(fd, 5000));
    close(fd);
    server_stop(&s);
}

/* A streamed answer: chunked on HTTP/1.1 (the connection kept), ended by the close on HTTP/1.0. */
static void test_server_streams(void **st) {
    (void)st;
    server s;
    server_start(&s, NULL, NULL);
    int fd = connect_to(&s);
    send_str(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    mwt_resp r;
    read_resp(fd, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(mwt_resp_header(&r, "Transfer-Encoding"), "chunked");
    assert_null(mwt_resp_header(&r, "Content-Length"));
    assert_string_equal(mwt_resp_header(&r, "X-Streamed"), "yes");
    assert_string_equal(r.body, "hello world");
    assert_false(r.closed);
    mwt_resp_free(&r);
    close(fd);
    fd = connect_to(&s);
    send_str(fd, "GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    read_resp(fd, &r);
    assert_null(mwt_resp_header(&r, "Transfer-Encoding"));
    assert_string_equal(r.body, "hello world");
    assert_true(r.closed);
    mwt_resp_free(&r);
    close(fd);
    server_stop(&s);
}

/* Reads whatever arrives within ms into buf (NUL-terminated); returns its length. */
static size_t read_some(int fd, char *buf, size_t cap, int ms) {
    size_t len = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (len + 1 < cap && poll(&p, 1, ms) > 0) {
        const ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n <= 0) break;
        len += (size_t)n;
        ms = 50; /* the rest of what was sent together */
    }
    buf[len] = 0;
    return len;
}

/* 100 Continue goes out when the head is accepted, before the client sends its body. */
static void test_server_continue(void **st) {
    (void)st;
    server s;
    server_start(&s, NULL, NULL);
    const int fd = connect_to(&s);
    send_str(fd,
             "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    char buf[1024];
    read_some(fd, buf, sizeof buf, 5000);
    assert_string_equal(buf, "HTTP/1.1 100 Continue\r\n\r\n");
    send_str(fd, "ok");
    mwt_resp r;
    read_resp(fd, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "POST /echo ? ct= auth= body=ok");
    mwt_resp_free(&r);
    close(fd);
    server_stop(&s);
}

/* An error answer in OpenAI's shape, then the connection closes; a request that does not arrive
 * in time gets 408; both go through the refuse hook. */
static void test_server_errors_and_limits(void **st) {
    (void)st;
    co_http_limits lim = co_http_default_limits();
    lim.max_body_bytes = 16;
    lim.request_ms = 200;
    server s;
    server_start(&s, &lim, NULL);
    int fd = connect_to(&s);
    send_str(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n");
    mwt_resp r;
    read_resp(fd, &r);
    assert_int_equal(r.status, 413);
    assert_non_null(strstr(r.body, "\"error\":{\"message\":\"the request body is larger"));
    assert_string_equal(mwt_resp_header(&r, "Connection"), "close");
    mwt_resp_free(&r);
    assert_true(mwt_http_eof(fd, 5000));
    close(fd);
    fd = connect_to(&s);
    send_str(fd, "GET /echo HTTP/1.1\r\nHost: x\r\n"); /* and nothing more */
    read_resp(fd, &r);
    assert_int_equal(r.status, 408);
    mwt_resp_free(&r);
    close(fd);
    server_stop(&s);
    assert_int_equal(counted(&n_refused[413]), 1); /* the server's own answers are counted */
    assert_int_equal(counted(&n_refused[408]), 1);
}

/* Polls until *x reaches want (the server's loop runs on its own thread). */
static void wait_count(const int *x, int want, int ms) {
    for (int i = 0; i < ms / 10 && counted(x) < want; i++) usleep(10000);
    if (counted(x) < want) fail_msg("count %d, expected %d", counted(x), want);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The connection limit: a new connection takes the place of the one idle the longest (a
 * connection that sends nothing counts as idle, and is closed at the request deadline anyway);
 * 503 with Retry-After only when every connection waits for its answer. */
static void test_server_connection_limit(void **st) {
    (void)st;
    co_http_limits lim = co_http_default_limits();
    lim.max_conns = 3;
    lim.request_ms = 1500;
    server s;
    server_start(&s, &lim, NULL);
    mwt_resp r;
    int a = connect_to(&s), b = connect_to(&s);
    send_str(a, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"); /* a, then b, idle after */
    read_resp(a, &r);
    mwt_resp_free(&r);
    usleep(20000);
    send_str(b, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(b, &r);
    mwt_resp_free(&r);
    int c = connect_to(&s); /* the third: room still */
    int d = connect_to(&s); /* the fourth: a (idle the longest) makes room */
    send_str(d, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(d, &r);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
    assert_true(mwt_http_eof(a, 5000));
    send_str(b, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"); /* b is still served */
    read_resp(b, &r);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
    /* c sent nothing: closed at its request deadline, though the limit no longer presses */
    const double t0 = now_s();
    assert_true(mwt_http_eof(c, 5000));
    const double waited = now_s() - t0;
    if (waited < 0.5 || waited > 4) fail_msg("an idle new connection closed after %.2f s", waited);
    close(a), close(b), close(c), close(d);
    /* every connection waiting for its answer: the next one gets 503, counted */
    int busy[3];
    for (int i = 0; i < 3; i++) {
        busy[i] = connect_to(&s);
        send_str(busy[i], "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    usleep(100000);
    const int e = connect_to(&s);
    read_resp(e, &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "too many connections"));
    assert_string_equal(mwt_resp_header(&r, "Retry-After"), "1");
    mwt_resp_free(&r);
    wait_count(&n_refused[503], 1, 5000);
    close(e);
    for (int i = 0; i < 3; i++) close(busy[i]);
    server_stop(&s);
}

/* Sends a POST head announcing len body bytes and `send` of them. */
static void send_partial_body(int fd, size_t len, size_t send) {
    char head[256];
    snprintf(head, sizeof head, "POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
             len);
    send_str(fd, head);
    char *b = malloc(send);
    memset(b, 'b', send);
    assert_int_equal(mwt_http_send(fd, b, send), 0);
    free(b);
}

/* The request bytes the server holds now (asked on a connection of its own). */
static size_t held_now(const server *s) {
    const int fd = connect_to(s);
    send_str(fd, "GET /held HTTP/1.1\r\nHost: x\r\n\r\n");
    mwt_resp r;
    read_resp(fd, &r);
    size_t held = 0;
    sscanf(r.body, "%zu", &held);
    mwt_resp_free(&r);
    close(fd);
    return held;
}

/* The budget for request bytes held across connections: a body that would take the total beyond
 * it gets 503 + Retry-After while small requests still pass; a body's buffer goes as soon as its
 * request ends (answered, refused, timed out), whatever its client does after. */
static void test_server_held_budget(void **st) {
    (void)st;
    co_http_limits lim = co_http_default_limits();
    lim.max_body_bytes = 300000;
    lim.max_held_bytes = 400000;
    lim.request_ms = 1500;
    server s;
    server_start(&s, &lim, NULL);
    int a = connect_to(&s), b = connect_to(&s);
    send_partial_body(a, 300000, 250000);
    usleep(200000);
    assert_true(held_now(&s) >= 250000);
    send_partial_body(b, 300000, 250000); /* over the budget: refused */
    mwt_resp r;
    read_resp(b, &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(mwt_resp_header(&r, "Retry-After"), "1");
    mwt_resp_free(&r);
    close(b);
    assert_true(held_now(&s) < 300000); /* b's bytes are gone; small requests pass */
    char *rest = malloc(50000);
    memset(rest, 'b', 50000);
    assert_int_equal(mwt_http_send(a, rest, 50000), 0); /* a completes its body */
    free(rest);
    read_resp(a, &r);
    assert_int_equal(r.status, 200);
    size_t held_then = 0, body_len = 0;
    sscanf(r.body, "%zu %zu", &held_then, &body_len);
    assert_int_equal(body_len, 300000);
    mwt_resp_free(&r);
    assert_true(held_now(&s) < 16384); /* answered: a's body is freed, a still open */
    /* a body that never completes: 408, and its bytes go at once though the client stays */
    send_partial_body(a, 300000, 250000);
    read_resp(a, &r);
    assert_int_equal(r.status, 408);
    mwt_resp_free(&r);
    assert_true(held_now(&s) < 16384);
    close(a);
    assert_true(counted(&n_refused[503]) == 1 && counted(&n_refused[408]) == 1);
    server_stop(&s);
}

/* A client that stops reading a stream: the handler is told to pause once more than
 * max_unsent_bytes wait, to resume when the client has caught up, and the connection is closed
 * (STALL, then the abort) when it stays behind for stall_ms, or sooner when pressed. */
static void test_server_stream_flow(void **st) {
    (void)st;
    co_http_limits lim = co_http_default_limits();
    lim.max_unsent_bytes = 65536;
    lim.stall_ms = 2000;
    server s;
    server_start(&s, &lim, NULL);
    int fd = connect_to(&s);
    send_str(fd, "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_count(&n_flow[CO_HTTP_FLOW_PAUSE], 1, 5000);
    usleep(300000); /* paused, within stall_ms */
    mwt_resp r;
    read_resp(fd, &r); /* reading it all: resumed, then ended */
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 32 * 65536);
    mwt_resp_free(&r);
    assert_int_equal(counted(&n_flow[CO_HTTP_FLOW_RESUME]), 1);
    assert_int_equal(counted(&n_flow[CO_HTTP_FLOW_STALL]), 0);
    close(fd);
    /* never read */
    fd = connect_to(&s);
    send_str(fd, "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_count(&n_flow[CO_HTTP_FLOW_STALL], 1, 10000);
    wait_count(&n_aborts, 1, 5000); /* the first stream ended normally */
    assert_int_equal(counted(&n_flow[CO_HTTP_FLOW_PAUSE]), 2);
    close(fd);
    /* a paused stream pressed to end sooner (others need its slots) */
    fd = connect_to(&s);
    const double t0 = now_s();
    send_str(fd, "GET /flood?press HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_count(&n_flow[CO_HTTP_FLOW_STALL], 2, 10000);
    if (now_s() - t0 > 1.8)
        fail_msg("stalled after %.2f s, not at the 0.1 s pressed", now_s() - t0);
    close(fd);
    server_stop(&s);
}

/* The CORS policy: answers to an allowed page carry its origin, preflights are answered with
 * their headers, a preflight from a page the policy refuses gets 403. */
static void test_server_cors(void **st) {
    (void)st;
    server s;
    server_start(&s, NULL, "https://a.example");
    const int fd = connect_to(&s);
    send_str(fd, "GET /echo HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\n\r\n");
    mwt_resp r;
    read_resp(fd, &r);
    assert_string_equal(mwt_resp_header(&r, "Access-Control-Allow-Origin"), "https://a.example");
    mwt_resp_free(&r);
    send_str(fd, "OPTIONS /options HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\n"
                 "Access-Control-Request-Method: POST\r\n"
                 "Access-Control-Request-Headers: authorization\r\n\r\n");
    read_resp(fd, &r);
    assert_int_equal(r.status, 204);
    assert_string_equal(mwt_resp_header(&r, "Allow"), "POST, OPTIONS");
    assert_non_null(mwt_resp_header(&r, "Access-Control-Allow-Methods"));
    assert_non_null(strstr(mwt_resp_header(&r, "Access-Control-Allow-Headers"), "authorization"));
    mwt_resp_free(&r);
    send_str(fd, "OPTIONS /options HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example\r\n"
                 "Access-Control-Request-Method: POST\r\n\r\n");
    read_resp(fd, &r);
    assert_int_equal(r.status, 403);
    assert_null(mwt_resp_header(&r, "Access-Control-Allow-Origin"));
    mwt_resp_free(&r);
    close(fd);
    server_stop(&s);
}

static void test_reasons(void **st) {
    (void)st;
    assert_string_equal(co_http_reason(200), "OK");
    assert_string_equal(co_http_reason(413), "Payload Too Large");
    assert_string_equal(co_http_reason(431), "Request Header Fields Too Large");
    assert_string_equal(co_http_reason(505), "HTTP Version Not Supported");
    assert_string_equal(co_http_reason(299), "OK");
    assert_string_equal(co_http_reason(499), "Bad Request");
    assert_string_equal(co_http_reason(599), "Internal Server Error");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_request),
        cmocka_unit_test(test_parse_byte_by_byte),
        cmocka_unit_test(test_parse_pipelined),
        cmocka_unit_test(test_parse_keep_alive),
        cmocka_unit_test(test_parse_header_values),
        cmocka_unit_test(test_parse_expect_continue),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_parse_accepted_oddities),
        cmocka_unit_test(test_parse_versions_and_targets),
        cmocka_unit_test(test_parse_body_memory),
        cmocka_unit_test(test_server_answers),
        cmocka_unit_test(test_server_streams),
        cmocka_unit_test(test_server_continue),
        cmocka_unit_test(test_server_errors_and_limits),
        cmocka_unit_test(test_server_connection_limit),
        cmocka_unit_test(test_server_held_budget),
        cmocka_unit_test(test_server_stream_flow),
        cmocka_unit_test(test_server_cors),
        cmocka_unit_test(test_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
