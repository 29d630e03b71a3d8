/* tests/integration/test_serve_abuse.c — `coordinator serve` on gpt-oss-tiny against the clients
 * that try to hurt everyone else, each on a server of its own with limits small enough to run
 * fast:
 *  - idle connections beyond --max-conns: /health and a completion are still answered (the oldest
 *    idle connection makes room), connections that send nothing close at the request deadline,
 *    and 503 (counted) comes only when every connection waits for its answer;
 *  - requests of the largest accepted size (ten thousands of messages, a logit_bias as large as
 *    the body allows, megabytes of prompt text, a million prompt ids) at once: each refused with
 *    a 400 naming its limit, while /health answers quickly (median over many probes) and a normal
 *    request is served; clients that leave while theirs is being prepared hurt nothing;
 *  - bodies that never complete, more than --max-held-bytes of them: the ones beyond get 503 with
 *    Retry-After at once, the bytes held stay within the budget, and every body's bytes are freed
 *    at its 408 though its client keeps the connection;
 *  - streams whose clients never read: paused past --max-unsent-bytes (their tokens stop), then,
 *    a request waiting for their slots, cancelled within a second (not --stall-timeout-ms) with a
 *    logged reason, counted, their slots serving the request that waited. */
#include "tests/support/mw_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "coordinator/co_buf.h"
#include "tests/support/mwt_http.h"

#define MODEL "llamacpp/gpt-oss-tiny/model.gguf"

static mwt_server srv; /* each test's own server; the teardown stops it should the test fail */

static int teardown(void **st) {
    (void)st;
    return mwt_serve_stop(&srv, 30000) == 0 ? 0 : -1;
}

static void start(const char *const *extra) {
    assert_int_equal(mwt_serve_start(&srv, mwt_fixture(MODEL), extra, 120000), 0);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A value of /metrics (a name with its labels), -1 when absent. */
static double metric(const char *name) {
    mwt_resp r;
    /* (a 503 while the connections the test just closed still count: asked again) */
    for (int tries = 0;; tries++) {
        assert_int_equal(mwt_http_request(srv.port, "GET", "/metrics", NULL, &r), 0);
        if (r.status != 503 || tries == 100) break;
        mwt_resp_free(&r);
        sleep_ms(50);
    }
    assert_int_equal(r.status, 200);
    double v = -1;
    char key[256];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(r.body, key);
    if (p) v = strtod(p + strlen(key), NULL);
    mwt_resp_free(&r);
    return v;
}

/* Waits up to ms for a metric to reach at least want; returns its value. */
static double metric_reaches(const char *name, double want, int ms) {
    double v = metric(name);
    for (int i = 0; i < ms / 50 && v < want; i++) {
        sleep_ms(50);
        v = metric(name);
    }
    return v;
}

/* One GET /health on a fresh connection: its latency in ms (-1 when it is not a 200). */
static double health_ms(void) {
    const double t0 = now_ms();
    mwt_resp r;
    const int rc = mwt_http_request(srv.port, "GET", "/health", NULL, &r);
    const double t = now_ms() - t0;
    const int status = rc ? 0 : r.status;
    if (!rc) mwt_resp_free(&r);
    return status == 200 ? t : -1;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-quantile (0..1) of n values (sorted in place). */
static double quantile(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)(p * (n - 1) + 0.5)];
}

static void completion_ok(const char *body) {
    mwt_resp r;
    assert_int_equal(mwt_http_request(srv.port, "POST", "/v1/completions", body, &r), 0);
    if (r.status != 200) fail_msg("%d %s", r.status, r.body);
    mwt_resp_free(&r);
}

static const char *small_completion =
    "{\"model\":\"model\",\"prompt\":[1,2,3],\"max_tokens\":4,\"temperature\":0}";

/* Sends a POST head for /v1/completions announcing len body bytes (extra: header lines). */
static void send_head(int fd, size_t len, const char *extra) {
    char head[512];
    const int n = snprintf(
        head, sizeof head,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\n%sContent-Length: %zu\r\n\r\n", extra, len);
    assert_int_equal(mwt_http_send(fd, head, (size_t)n), 0);
}

/* ---- idle connections ----------------------------------------------------------------------- */

/* A streamed completion that runs long, on a connection of its own (not read). */
static int long_stream(void) {
    const char *body =
        "{\"model\":\"model\",\"prompt\":[3,4,5],\"max_tokens\":3000,\"stream\":true,"
        "\"ignore_eos\":true}";
    const int fd = mwt_http_connect(srv.port);
    assert_true(fd >= 0);
    send_head(fd, strlen(body), "");
    assert_int_equal(mwt_http_send(fd, body, strlen(body)), 0);
    return fd;
}

static void test_idle_connections(void **st) {
    (void)st;
    static const char *const extra[] = {
        "--threads",   "1",  "--max-conns", "16", "--request-timeout-ms", "2000", "--max-seqs", "4",
        "--max-queue", "12", NULL};
    start(extra);
    enum { IDLE = 40 };
    int idle[IDLE];
    for (int i = 0; i < IDLE; i++) {
        idle[i] = mwt_http_connect(srv.port);
        assert_true(idle[i] >= 0);
    }
    sleep_ms(200);
    for (int i = 0; i < 5; i++) assert_true(health_ms() >= 0);
    completion_ok(small_completion);
    assert_true(metric("moewire_http_connections") <= 16);
    /* whatever was not closed to make room closes at the request deadline */
    for (int i = 0; i < IDLE; i++) {
        assert_true(mwt_http_eof(idle[i], 10000));
        close(idle[i]);
    }
    /* every connection waiting for its answer (4 decoding, 12 queued): the next one gets 503 */
    int busy[16];
    for (int i = 0; i < 15; i++) busy[i] = long_stream();
    metric_reaches("moewire_queue_depth", 11, 30000);
    busy[15] = long_stream();
    sleep_ms(300);
    const int fd = mwt_http_connect(srv.port);
    mwt_resp r;
    assert_int_equal(mwt_http_read(fd, &r, 10000), 0);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "too many connections"));
    assert_non_null(mwt_resp_header(&r, "Retry-After"));
    mwt_resp_free(&r);
    close(fd);
    for (int i = 0; i < 16; i++) close(busy[i]);
    assert_true(metric_reaches("moewire_http_requests_total{route=\"other\",status=\"503\"}", 1,
                               10000) >= 1);
    for (int i = 0; i < 100 && metric("moewire_active_sequences") > 0; i++) sleep_ms(50);
    assert_int_equal(metric("moewire_active_sequences"), 0);
}

/* ---- requests of the largest size ----------------------------------------------------------- */

typedef struct big {
    const char *path;
    co_buf body;
    int status;
    char answer[600];
    int done; /* (read by the probing thread) */
} big;

/* Sends the body and reads the answer to its end (the server closes: Connection: close). */
static void *send_big(void *arg) {
    big *b = arg;
    const int fd = mwt_http_connect(srv.port);
    if (fd < 0) return NULL;
    char head[256];
    const int n = snprintf(head, sizeof head,
                           "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                           "Content-Length: %zu\r\n\r\n",
                           b->path, b->body.len);
    if (mwt_http_send(fd, head, (size_t)n) || mwt_http_send(fd, b->body.p, b->body.len)) {
        close(fd);
        __atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 120000) <= 0) break;
        const ssize_t k = recv(fd, b->answer + got, sizeof b->answer - 1 - got, 0);
        if (k <= 0) break;
        got += (size_t)k;
        if (got == sizeof b->answer - 1) break;
    }
    b->answer[got] = 0;
    sscanf(b->answer, "HTTP/1.1 %d", &b->status);
    close(fd);
    __atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* Four bodies near the 8 MiB the server accepts, each beyond a limit that is cheap to check. */
static void big_bodies(big *b) {
    b[0].path = "/v1/chat/completions"; /* 100 000 messages */
    co_buf_puts(&b[0].body, "{\"model\":\"model\",\"messages\":[");
    for (int i = 0; i < 100000; i++)
        co_buf_puts(&b[0].body, i ? ",{\"role\":\"user\",\"content\":\"hi\"}"
                                  : "{\"role\":\"user\",\"content\":\"hi\"}");
    co_buf_puts(&b[0].body, "]}");
    b[1].path = "/v1/completions"; /* 700 000 logit biases */
    co_buf_puts(&b[1].body, "{\"model\":\"model\",\"prompt\":[1],\"logit_bias\":{");
    for (int i = 0; i < 700000; i++) co_buf_printf(&b[1].body, "%s\"%d\":1", i ? "," : "", i);
    co_buf_puts(&b[1].body, "}}");
    b[2].path = "/v1/completions"; /* 7 MiB of prompt text */
    co_buf_puts(&b[2].body, "{\"model\":\"model\",\"prompt\":\"");
    for (int i = 0; i < 7 << 18; i++) co_buf_puts(&b[2].body, "abc ");
    co_buf_puts(&b[2].body, "\"}");
    b[3].path = "/v1/completions"; /* 2 million prompt ids */
    co_buf_puts(&b[3].body, "{\"model\":\"model\",\"prompt\":[");
    for (int i = 0; i < 2000000; i++) co_buf_puts(&b[3].body, i ? ",7" : "7");
    co_buf_puts(&b[3].body, "]}");
    for (int i = 0; i < 4; i++) {
        assert_false(b[i].body.failed);
        assert_true(b[i].body.len < 8 << 20);
    }
}

static void test_largest_requests(void **st) {
    (void)st;
    static const char *const extra[] = {"--threads", "1", "--max-seqs", "2", NULL};
    start(extra);
    big b[4] = {{0}};
    big_bodies(b);
    double lat[400];
    int n = 0, failed = 0;
    pthread_t th[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, send_big, &b[i]), 0);
    /* /health, probed while the four are read and parsed */
    const double t0 = now_ms();
    bool normal = false;
    for (;;) {
        bool all = true;
        for (int i = 0; i < 4; i++) all = all && __atomic_load_n(&b[i].done, __ATOMIC_SEQ_CST);
        if (all || now_ms() - t0 > 120000 || n == 400) break;
        const double ms = health_ms();
        if (ms < 0)
            failed++;
        else
            lat[n++] = ms;
        if (!normal && n == 5) { /* and a normal request among them */
            completion_ok(small_completion);
            normal = true;
        }
        sleep_ms(10);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    /* clients gone while their requests are prepared: the server drops the results */
    for (int k = 0; k < 3; k++) {
        const int fd = mwt_http_connect(srv.port);
        send_head(fd, b[1].body.len, "");
        assert_int_equal(mwt_http_send(fd, b[1].body.p, b[1].body.len), 0);
        close(fd);
    }
    sleep_ms(2000);
    assert_true(health_ms() >= 0);
    static const char *const needles[] = {"--max-messages", "--max-logit-bias", "at least",
                                          "--max-prompt-tokens"};
    for (int i = 0; i < 4; i++) {
        if (b[i].status != 400 || !strstr(b[i].answer, needles[i]))
            fail_msg("body %d (%zu bytes): %s", i, b[i].body.len, b[i].answer);
        co_buf_free(&b[i].body);
    }
    assert_int_equal(failed, 0);
    assert_true(n >= 5);
    const double p50 = quantile(lat, n, 0.5), p90 = quantile(lat, n, 0.9);
    printf("# /health while four 4-8 MB requests were parsed: %d probes, median %.1f ms, p90 "
           "%.1f ms, max %.1f ms\n",
           n, p50, p90, lat[n - 1]);
    /* the target is 50 ms; a loaded machine running sanitized builds gets more room */
    assert_true(p50 < 250);
    assert_true(p90 < 1000);
    if (!normal) completion_ok(small_completion);
}

/* ---- bodies held ---------------------------------------------------------------------------- */

/* The server's resident memory in KiB (VmRSS), for the record. */
static long rss_kib(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kib;
}

/* Whether an answer with this status has arrived on fd within ms (read and discarded). */
static bool answered(int fd, int status, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) return false;
    char buf[1024];
    const ssize_t k = recv(fd, buf, sizeof buf - 1, 0);
    if (k <= 0) return false;
    buf[k] = 0;
    int got = 0;
    sscanf(buf, "HTTP/1.1 %d", &got);
    if (got == 503 && !strstr(buf, "Retry-After: ")) fail_msg("503 without Retry-After: %s", buf);
    return got == status;
}

static void test_held_bodies(void **st) {
    (void)st;
    static const char *const extra[] = {"--threads",
                                        "1",
                                        "--max-body-bytes",
                                        "1048576",
                                        "--max-held-bytes",
                                        "4194304",
                                        "--request-timeout-ms",
                                        "3000",
                                        NULL};
    start(extra);
    enum { N = 8, BODY = 1 << 20 };
    const long rss0 = rss_kib(srv.pid);
    char *bytes = malloc(BODY);
    memset(bytes, ' ', BODY);
    int fd[N];
    for (int i = 0; i < N; i++) { /* each one byte short */
        fd[i] = mwt_http_connect(srv.port);
        send_head(fd[i], BODY, "");
        assert_int_equal(mwt_http_send(fd[i], bytes, BODY - 1), 0);
    }
    free(bytes);
    int refused = 0;
    bool held[N];
    for (int i = 0; i < N; i++) {
        held[i] = !answered(fd[i], 503, 500);
        refused += !held[i];
    }
    const long rss_peak = rss_kib(srv.pid);
    const double held_bytes = metric("moewire_http_held_bytes");
    assert_true(refused >= N - 4); /* at most four bodies fit the budget */
    assert_true(held_bytes <= 4194304 + 65536);
    assert_true(health_ms() >= 0); /* small requests still pass */
    completion_ok(small_completion);
    /* the held ones time out; their bytes go though their clients keep the connections */
    for (int i = 0; i < N; i++)
        if (held[i]) assert_true(answered(fd[i], 408, 10000));
    const double held_after = metric("moewire_http_held_bytes");
    const long rss_after = rss_kib(srv.pid);
    printf("# %d bodies of 1 MiB - 1 held against a 4 MiB budget: %d refused (503); held bytes "
           "%.0f, after the 408s %.0f; RSS %ld -> %ld -> %ld KiB\n",
           N, refused, held_bytes, held_after, rss0, rss_peak, rss_after);
    assert_true(held_after < 65536);
    assert_true(metric("moewire_http_requests_total{route=\"/v1/completions\",status=\"503\"}") >=
                refused);
    for (int i = 0; i < N; i++) close(fd[i]);
}

/* ---- streams nobody reads ------------------------------------------------------------------- */

/* A streamed completion from a client with a small receive buffer that never reads. */
static int unread_stream(void) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *body = "{\"model\":\"model\",\"prompt\":[3,4,5],\"max_tokens\":4000,"
                       "\"stream\":true,\"ignore_eos\":true,\"return_token_ids\":true}";
    send_head(fd, strlen(body), "");
    assert_int_equal(mwt_http_send(fd, body, strlen(body)), 0);
    return fd;
}

static void test_unread_streams(void **st) {
    (void)st;
    static const char *const extra[] = {
        "--threads",          "1",    "--max-seqs",         "2",    "--max-queue", "2",
        "--max-unsent-bytes", "4096", "--stall-timeout-ms", "2000", NULL};
    start(extra);
    const int a = unread_stream(), b = unread_stream();
    assert_true(metric_reaches("moewire_streams_paused_total", 2, 60000) >= 2);
    /* paused: no tokens are generated for them */
    const double tokens = metric("moewire_generation_tokens_total");
    sleep_ms(500);
    const double tokens_later = metric("moewire_generation_tokens_total");
    assert_true(metric("moewire_active_sequences") == 2); /* (the slots stay theirs) */
    /* a request that waits for a slot gets one once they are cancelled */
    const double t0 = now_ms();
    completion_ok(small_completion);
    const double waited = now_ms() - t0;
    printf("# two unread streams paused after %.0f tokens; a request waited %.0f ms for a slot\n",
           tokens, waited);
    assert_true(tokens_later <= tokens + 2); /* a step under way at the pause may end */
    assert_true(waited < 20000); /* not the 60 s: paused streams yield to waiting requests */
    assert_int_equal(metric("moewire_streams_stalled_total"), 2);
    assert_true(tokens < 4000); /* far from the 2 x 4000 they asked for */
    char *log = mwt_read_file(srv.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "cancelled: its client read nothing for "));
    free(log);
    for (int i = 0; i < 100 && metric("moewire_active_sequences") > 0; i++) sleep_ms(50);
    assert_int_equal(metric("moewire_active_sequences"), 0);
    close(a);
    close(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_idle_connections, teardown),
        cmocka_unit_test_teardown(test_largest_requests, teardown),
        cmocka_unit_test_teardown(test_held_bodies, teardown),
        cmocka_unit_test_teardown(test_unread_streams, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
