/* tests/soak/soak.c — `make soak`: concurrent requests against `coordinator serve` over three
 * expert nodes on loopback where every expert has two owners, while a random node is killed
 * (SIGKILL) every ~20 s and started again on its address after a random outage, so that now and
 * then two nodes are down at once. At the end every request must have either completed with the
 * tokens it gets on a quiet cluster, or failed with an error while both owners of some expert
 * were down: 0 hung, 0 lost, 0 wrong. Every kill must be seen by the coordinator and every
 * restarted node taken back. The resident memory of every process is sampled once a second and
 * must show no growth trend; with the ASan programs (--bin build/asan/bin) the processes stopped
 * at the end must exit LSan-clean.
 *
 *   soak [--minutes M] [--clients K] [--interval S] [--down MIN-MAX] [--bin DIR] [--model PATH]
 *        [--partial] [--seed N] [--hang S]
 *
 * "Down" is counted from the kill until the coordinator says the restarted node is back (its
 * log line), so a request that fails while the coordinator could not yet use a restarted node
 * is not blamed on the cluster; a restarted node it does not take back within 15 s is a failure.
 * Node i serves the expert shares i and i+1 (mod 3) of every layer; the server runs exact mode
 * (bit-identical whatever node serves a layer) unless --partial (same tokens). Greedy decoding;
 * half the requests streamed (SSE), a random max_tokens, one prompt longer than a prefill chunk.
 *
 * Memory trend: least-squares slope of the anonymous resident memory (RssAnon: the mapped model's
 * pages are bounded by its file) over time. The coordinator lives the whole run: its
 * second half is fitted (the first is warm-up). Nodes are restarted: all their lives' samples
 * older than 10 s are fitted against the process's age. A trend is growth (slope x the span
 * fitted) beyond 1 MiB + 2 % of the median. ASan's quarantine grows by design, so under ASan the
 * figures are printed, not judged (LSan judges leaks there). */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_node.h"
#include "tests/support/mwt_http.h"
#include "vindex/vx_gguf.h"
#include "vindex/vx_meta.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define N_NODES     3
#define MAX_TOK     32
#define MAX_OUTAGES 4096
#define REJOIN_S    15.0 /* a restarted node must be taken back within this */

typedef struct opts {
    double minutes;
    int clients, interval_s, down_min_s, down_max_s, hang_s;
    const char *bin, *model;
    bool partial;
    unsigned seed;
} opts;

static opts O = {.minutes = 10,
                 .clients = 4,
                 .interval_s = 20,
                 .down_min_s = 1,
                 .down_max_s = 24,
                 .hang_s = 60,
                 .bin = "bin",
                 .model = NULL};
static char *dir;
static double t_zero;
static mwt_server srv;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool stopping;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - t_zero;
}

/* ---- prompts and what a quiet cluster answers ----------------------------------------------- */

#define N_PROMPTS 12
static const char *const short_prompts[N_PROMPTS - 1] = {
    "The quick brown fox", "Once upon a time", "In the beginning",
    "Numbers: 1, 2, 3,",   "Hello, world",     "The capital of France",
    "def main():",         "Water boils at",   "A list of colours:",
    "Dear Sir,",           "SELECT * FROM"};
static char *prompts[N_PROMPTS];
typedef struct ids {
    int n;
    int v[MAX_TOK];
} ids;
static ids reference[N_PROMPTS]; /* MAX_TOK greedy tokens (fewer when it stopped) */

/* ---- nodes and their outages ---------------------------------------------------------------- */

typedef struct node {
    int port, lives;
    pid_t pid;       /* 0 while down */
    double born;     /* this life's start */
    double up_at;    /* while down: when to start it again */
    int open_outage; /* index into outages while down or not yet back, else -1 */
    bool restarted;  /* started again, not yet said back by the coordinator */
    char log[4200];
} node;
static node nodes[N_NODES];
static char shares[N_NODES][256]; /* --experts spec of share j */

typedef struct outage {
    int node;
    double kill, seen_down, restart, back; /* 0: not yet */
} outage;
static outage outages[MAX_OUTAGES];
static int n_outages;

/* Whether, at some moment of [t0, t1], two nodes were out at once (killed and not yet back in the
 * coordinator's use): then some expert had no live owner, since with two owners per expert over
 * three nodes any two nodes share a share. */
static bool double_outage(double t0, double t1) {
    pthread_mutex_lock(&lock);
    bool any = false;
    const double open = 1e30;
    for (int a = 0; a < n_outages && !any; a++)
        for (int b = a + 1; b < n_outages && !any; b++) {
            const outage *x = &outages[a], *y = &outages[b];
            if (x->node == y->node) continue;
            double s = fmax(x->kill, y->kill);
            double e = fmin(x->back ? x->back : open, y->back ? y->back : open);
            any = s < e && s <= t1 && e >= t0;
        }
    pthread_mutex_unlock(&lock);
    return any;
}

static const char *bin(const char *name) {
    static __thread char p[4200];
    snprintf(p, sizeof p, "%s/%s", O.bin, name);
    return p;
}

/* Starts node i on its port (retried while the port is briefly unavailable); 0 or -1. */
static int start_node(int i) {
    node *n = &nodes[i];
    char spec[600], bind[64];
    snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", n->port);
    snprintf(spec, sizeof spec, "%s,%s", shares[i], shares[(i + 1) % N_NODES]);
    const char *args[] = {"--experts", spec, "--bind", bind, "--threads", "1", "--quiet", NULL};
    for (int attempt = 0; attempt < 20; attempt++) {
        char tag[64];
        snprintf(tag, sizeof tag, "node-%d-life-%d", i, n->lives + 1);
        mwt_node m;
        if (mwt_node_start(&m, bin("expert-node"), O.model, dir, tag, args, 120000) == 0) {
            pthread_mutex_lock(&lock);
            n->pid = m.pid;
            n->lives++;
            n->born = now_s();
            snprintf(n->log, sizeof n->log, "%s", m.log);
            pthread_mutex_unlock(&lock);
            return 0;
        }
        char *text = mwt_read_file(m.log, NULL);
        fprintf(stderr, "soak: node %d did not start (attempt %d): %s\n", i, attempt + 1,
                text ? text : "");
        free(text);
        usleep(500000);
    }
    return -1;
}

/* VmRSS and RssAnon of pid in KiB; -1 when gone. */
static long rss_kb(pid_t pid, long *anon) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    *anon = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            v = atol(line + 6);
        else if (!strncmp(line, "RssAnon:", 8))
            *anon = atol(line + 8);
    if (f) fclose(f);
    return *anon >= 0 ? v : -1;
}

/* ---- requests ------------------------------------------------------------------------------- */

typedef enum outcome { OK, FAILED_EXPECTED, WRONG, FAILED, HUNG, LOST, N_OUTCOMES } outcome;
static const char *const outcome_name[N_OUTCOMES] = {
    "completed with the quiet cluster's tokens",
    "failed with an error while both owners of an expert were down",
    "completed with other tokens (wrong)",
    "failed with an error while every expert had a live owner",
    "hung (no whole answer in the hang time)",
    "lost (connection closed without a whole answer)"};
static atomic_long counts[N_OUTCOMES], streamed, tokens_out;
static char first_error[3][512];
static int n_first_errors;

typedef struct answer {
    int status;
    ids toks;
    bool error, done, overflow;
    char message[512];
} answer;

/* Adds one response object's choice (token ids) or error to *a. */
static void take_object(json_t *j, answer *a) {
    json_t *err = json_object_get(j, "error");
    if (err) {
        a->error = true;
        snprintf(a->message, sizeof a->message, "%s",
                 json_string_value(json_object_get(err, "message"))
                     ? json_string_value(json_object_get(err, "message"))
                     : "(no message)");
        return;
    }
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *t = json_object_get(c, "token_ids");
    for (size_t i = 0; i < json_array_size(t); i++) {
        if (a->toks.n == MAX_TOK) {
            a->overflow = true;
            break;
        }
        a->toks.v[a->toks.n++] = (int)json_integer_value(json_array_get(t, i));
    }
    const char *fin = json_string_value(json_object_get(c, "finish_reason"));
    if (fin) a->done = true;
}

/* Parses a whole response body (JSON or SSE events). */
static void parse_body(const char *body, bool stream, answer *a) {
    if (!stream || a->status != 200) {
        json_t *j = json_loads(body, 0, NULL);
        if (j)
            take_object(j, a);
        else
            snprintf(a->message, sizeof a->message, "unparsable body: %.200s", body);
        if (a->status != 200) a->error = true;
        json_decref(j);
        return;
    }
    bool saw_done = false;
    for (const char *p = body; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n >= 6 && !strncmp(p, "data: ", 6)) {
            if (n >= 12 && !strncmp(p + 6, "[DONE]", 6))
                saw_done = true;
            else {
                json_t *j = json_loadb(p + 6, n - 6, 0, NULL);
                if (j) take_object(j, a);
                json_decref(j);
            }
        }
        p = end ? end + 1 : NULL;
    }
    a->done = a->done && saw_done;
    if (a->error) a->done = saw_done;
}

/* Whether buf holds a whole response: its head, then Content-Length bytes or the last chunk. */
static bool complete(const char *buf, size_t len) {
    const char *end = strstr(buf, "\r\n\r\n");
    if (!end) return false;
    const char *cl = strcasestr(buf, "\r\ncontent-length:");
    if (cl && cl < end) return (size_t)(end + 4 - buf) + strtoull(cl + 17, NULL, 10) <= len;
    return len >= 5 && !memcmp(buf + len - 5, "0\r\n\r\n", 5);
}

/* De-chunks a chunked body in place; its length. */
static size_t dechunk(char *p, size_t len) {
    size_t in = 0, out = 0;
    while (in < len) {
        char *crlf = memmem(p + in, len - in, "\r\n", 2);
        if (!crlf) break;
        size_t sz = (size_t)strtoull(p + in, NULL, 16);
        size_t at = (size_t)(crlf + 2 - p);
        if (sz == 0 || at + sz > len) break;
        memmove(p + out, p + at, sz);
        out += sz;
        in = at + sz + 2;
    }
    p[out] = '\0';
    return out;
}

/* Reads a whole response within timeout_s: its status (0: none), the body de-chunked. On a
 * timeout *raw keeps what arrived, for the report. */
static int read_response(int fd, double timeout_s, char **body, bool *timed_out, char **raw) {
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    buf[0] = '\0';
    *body = *raw = NULL;
    *timed_out = false;
    const double deadline = now_s() + timeout_s;
    bool whole = false;
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        int left = (int)((deadline - now_s()) * 1e3);
        int rc = left > 0 ? poll(&pf, 1, left) : 0;
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) {
            *timed_out = true;
            break;
        }
        if (len + 65536 > cap) buf = realloc(buf, (cap *= 2) + 1);
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        buf[len] = '\0';
        if ((whole = complete(buf, len))) break;
    }
    if (*timed_out || !whole) {
        *raw = buf;
        return 0;
    }
    int status = 0;
    char *end = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.1 %d", &status) != 1) {
        *raw = buf;
        return 0;
    }
    *end = '\0';
    bool chunked = strcasestr(buf, "\r\ntransfer-encoding: chunked") != NULL;
    size_t blen = (size_t)(buf + len - (end + 4));
    char *out = malloc(blen + 1);
    memcpy(out, end + 4, blen);
    out[blen] = '\0';
    if (chunked) dechunk(out, blen);
    *body = out;
    free(buf);
    return status;
}

static void note_error(const char *msg) {
    pthread_mutex_lock(&lock);
    bool seen = false;
    for (int i = 0; i < n_first_errors; i++) seen |= !strncmp(first_error[i], msg, 40);
    if (!seen && n_first_errors < 3) snprintf(first_error[n_first_errors++], 512, "%s", msg);
    pthread_mutex_unlock(&lock);
}

/* One request: prompt k, max_tokens m; its outcome (the tokens in *a). */
static outcome request(int k, int m, bool stream, answer *a) {
    memset(a, 0, sizeof *a);
    json_t *j =
        json_pack("{s:s, s:s, s:i, s:i, s:b, s:b}", "model", "soak", "prompt", prompts[k],
                  "max_tokens", m, "temperature", 0, "stream", stream, "return_token_ids", 1);
    char *body = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    size_t cap = strlen(body) + 256;
    char *req = malloc(cap);
    int n =
        snprintf(req, cap,
                 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                 strlen(body), body);
    free(body);
    int fd = mwt_http_connect(srv.port);
    if (fd < 0) {
        free(req);
        snprintf(a->message, sizeof a->message, "cannot connect");
        return LOST;
    }
    char *resp = NULL, *raw = NULL;
    bool timed_out = false;
    int status = mwt_http_send(fd, req, (size_t)n)
                     ? 0
                     : read_response(fd, O.hang_s, &resp, &timed_out, &raw);
    free(req);
    close(fd);
    if (!status) {
        snprintf(a->message, sizeof a->message, "after %zu bytes: %.400s", raw ? strlen(raw) : 0,
                 raw ? raw : "");
        free(raw);
        return timed_out ? HUNG : LOST;
    }
    a->status = status;
    parse_body(resp, stream, a);
    free(resp);
    if (a->error) return FAILED;
    if (!a->done) {
        snprintf(a->message, sizeof a->message, "a whole response without a finish");
        return LOST;
    }
    return OK;
}

/* The first hang keeps what the server says of itself then: /metrics and its threads' stacks
 * (when gdb is there), in the run's directory. */
static void snapshot(void) {
    static atomic_bool done;
    if (atomic_exchange(&done, true)) return;
    char path[4300];
    mwt_resp r;
    if (mwt_http_request(srv.port, "GET", "/metrics", NULL, &r) == 0) {
        snprintf(path, sizeof path, "%s/metrics-at-hang.txt", dir);
        mwt_write_file(path, r.body ? r.body : "", r.body ? strlen(r.body) : 0);
        mwt_resp_free(&r);
    }
    char cmd[4400];
    snprintf(cmd, sizeof cmd,
             "command -v gdb >/dev/null && gdb -p %d -batch -ex 'thread apply all bt' "
             ">%s/stacks-at-hang.txt 2>&1",
             (int)srv.pid, dir);
    if (system(cmd)) { /* no gdb: the metrics alone */
    }
    fprintf(stderr, "soak: the server's metrics and stacks at the first hang are in %s\n", dir);
}

static void *client(void *arg) {
    unsigned seed = O.seed + (unsigned)(uintptr_t)arg * 7919u;
    while (!atomic_load(&stopping)) {
        int k = (int)(rand_r(&seed) % N_PROMPTS);
        int m = 1 + (int)(rand_r(&seed) % MAX_TOK);
        bool stream = rand_r(&seed) & 1;
        double t0 = now_s();
        answer a;
        outcome o = request(k, m, stream, &a);
        double t1 = now_s();
        if (o == OK) {
            int want = reference[k].n < m ? reference[k].n : m;
            if (a.overflow || a.toks.n != want ||
                memcmp(a.toks.v, reference[k].v, (size_t)want * sizeof(int)))
                o = WRONG;
            atomic_fetch_add(&tokens_out, a.toks.n);
        }
        if (o == FAILED && double_outage(t0, t1)) o = FAILED_EXPECTED;
        if (o == FAILED_EXPECTED) note_error(a.message);
        if (o != OK && o != FAILED_EXPECTED)
            fprintf(stderr, "soak: %s: prompt %d, max_tokens %d, %s, %.1f-%.1f s: %s\n",
                    outcome_name[o], k, m, stream ? "streamed" : "whole", t0, t1,
                    o == WRONG ? "tokens differ" : a.message);
        if (o == HUNG) snapshot();
        atomic_fetch_add(&counts[o], 1);
        if (stream) atomic_fetch_add(&streamed, 1);
        if (o != OK) usleep(250000); /* a client waits a little before it tries again */
    }
    return NULL;
}

/* ---- chaos: kill a random live node every ~interval, start it again after a random outage --- */

static double uniform(unsigned *seed, double lo, double hi) {
    return lo + (hi - lo) * (double)(rand_r(seed) % 10000) / 10000.0;
}

static int kills, restart_failures;

static void *chaos(void *arg) {
    (void)arg;
    unsigned seed = O.seed ^ 0x5eedu;
    double next = now_s() + uniform(&seed, 0.75, 1.25) * O.interval_s;
    while (!atomic_load(&stopping)) {
        usleep(50000);
        for (int i = 0; i < N_NODES; i++) {
            if (nodes[i].pid || now_s() < nodes[i].up_at) continue;
            if (start_node(i)) {
                restart_failures++;
                nodes[i].up_at = now_s() + 5; /* the port was taken: tried again */
                continue;
            }
            pthread_mutex_lock(&lock);
            nodes[i].restarted = true;
            outages[nodes[i].open_outage].restart = now_s();
            pthread_mutex_unlock(&lock);
            fprintf(stderr, "soak: %6.1f s  node %d started again\n", now_s(), i);
        }
        if (now_s() < next) continue;
        next = now_s() + uniform(&seed, 0.75, 1.25) * O.interval_s;
        int live[N_NODES], n_live = 0;
        for (int i = 0; i < N_NODES; i++)
            if (nodes[i].pid) live[n_live++] = i;
        if (n_live < 2) continue; /* two down already */
        int i = live[rand_r(&seed) % (unsigned)n_live];
        pthread_mutex_lock(&lock);
        if (n_outages == MAX_OUTAGES) {
            pthread_mutex_unlock(&lock);
            continue;
        }
        const int o = n_outages++;
        outages[o] = (outage){.node = i, .kill = now_s()};
        kill(nodes[i].pid, SIGKILL);
        pid_t dead = nodes[i].pid;
        nodes[i].pid = 0;
        nodes[i].open_outage = o;
        nodes[i].restarted = false;
        nodes[i].up_at = now_s() + uniform(&seed, O.down_min_s, O.down_max_s);
        pthread_mutex_unlock(&lock);
        mwt_wait(dead, 10000);
        kills++;
        fprintf(stderr, "soak: %6.1f s  node %d killed, down for %.1f s\n", outages[o].kill, i,
                nodes[i].up_at - outages[o].kill);
    }
    return NULL;
}

/* ---- the coordinator's log: when it saw a node down and took it back ------------------------ */

static size_t log_seen;
static char log_line[1024];
static size_t log_line_len;

static void log_event(const char *line) {
    int i;
    if (sscanf(line, "coordinator: node %d (", &i) != 1 || i < 0 || i >= N_NODES) return;
    const bool down = strstr(line, " is down ") != NULL, back = strstr(line, " is back ") != NULL;
    pthread_mutex_lock(&lock);
    node *n = &nodes[i];
    if (n->open_outage >= 0) {
        outage *o = &outages[n->open_outage];
        if (down && !o->seen_down) o->seen_down = now_s();
        if (back && n->restarted) {
            o->back = now_s();
            n->open_outage = -1;
            n->restarted = false;
        }
    }
    pthread_mutex_unlock(&lock);
}

static void follow_log(void) {
    size_t len = 0;
    char *text = mwt_read_file(srv.log, &len);
    for (size_t k = log_seen; text && k < len; k++) {
        if (text[k] != '\n') {
            if (log_line_len + 1 < sizeof log_line) log_line[log_line_len++] = text[k];
            continue;
        }
        log_line[log_line_len] = '\0';
        log_event(log_line);
        log_line_len = 0;
    }
    if (text) log_seen = len;
    free(text);
}

/* ---- resident memory ------------------------------------------------------------------------ */

typedef struct series {
    double *t;  /* time (coordinator) or the process's age (nodes) */
    long *anon; /* RssAnon: what a leak grows (the mapped model's pages are bounded by its file) */
    int n, cap;
    long first, last, max; /* VmRSS */
} series;
static series rss[1 + N_NODES]; /* coordinator, nodes */

static void add(series *s, double t, long kb, long anon) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->t = realloc(s->t, (size_t)s->cap * sizeof *s->t);
        s->anon = realloc(s->anon, (size_t)s->cap * sizeof *s->anon);
    }
    s->t[s->n] = t;
    s->anon[s->n++] = anon;
    if (!s->first) s->first = kb;
    s->last = kb;
    if (kb > s->max) s->max = kb;
}

static void sample(void) {
    long anon, kb = rss_kb(srv.pid, &anon);
    if (kb > 0) add(&rss[0], now_s(), kb, anon);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < N_NODES; i++)
        if (nodes[i].pid && (kb = rss_kb(nodes[i].pid, &anon)) > 0)
            add(&rss[1 + i], now_s() - nodes[i].born, kb, anon);
    pthread_mutex_unlock(&lock);
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Least-squares slope (KiB per second) over the samples with t in [from, inf); the span and
 * median through the pointers. */
static double slope(const series *s, double from, double *span, long *median) {
    double st = 0, sk = 0, n = 0, lo = 1e30, hi = -1e30;
    long *v = malloc((size_t)(s->n + 1) * sizeof *v);
    int nv = 0;
    for (int i = 0; i < s->n; i++)
        if (s->t[i] >= from) {
            st += s->t[i];
            sk += (double)s->anon[i];
            n++;
            lo = fmin(lo, s->t[i]);
            hi = fmax(hi, s->t[i]);
            v[nv++] = s->anon[i];
        }
    qsort(v, (size_t)nv, sizeof *v, cmp_long);
    *median = nv ? v[nv / 2] : 0;
    free(v);
    *span = n ? hi - lo : 0;
    if (n < 8) return 0;
    double mt = st / n, mk = sk / n, sxy = 0, sxx = 0;
    for (int i = 0; i < s->n; i++)
        if (s->t[i] >= from) {
            sxy += (s->t[i] - mt) * ((double)s->anon[i] - mk);
            sxx += (s->t[i] - mt) * (s->t[i] - mt);
        }
    return sxx > 0 ? sxy / sxx : 0;
}

/* Prints one process's memory; whether it shows a growth trend (judged unless under ASan). */
static bool grows(int p, double half_way, bool judge) {
    const series *s = &rss[p];
    double span;
    long median;
    const double from = p == 0 ? half_way : 10.0;
    const double k = slope(s, from, &span, &median);
    const double growth = k * span, bound = 1024 + 0.02 * (double)median;
    const bool bad = judge && growth > bound;
    char name[32];
    if (p == 0)
        snprintf(name, sizeof name, "coordinator");
    else
        snprintf(name, sizeof name, "node %d (%d lives)", p - 1, nodes[p - 1].lives);
    printf("  %-20s RSS first %6ld KiB, last %6ld KiB, max %6ld KiB; anonymous: slope %+7.1f "
           "KiB/min over %s %.0f s: %+6.0f KiB (bound %.0f)%s\n",
           name, s->first, s->last, s->max, k * 60, p == 0 ? "the second half," : "ages >10 s,",
           span, growth, bound, bad ? "  << GROWS" : "");
    return bad;
}

/* ---- the run -------------------------------------------------------------------------------- */

static int parse(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--partial")) {
            O.partial = true;
            continue;
        }
        if (!v) return -1;
        i++;
        if (!strcmp(a, "--minutes"))
            O.minutes = atof(v);
        else if (!strcmp(a, "--clients"))
            O.clients = atoi(v);
        else if (!strcmp(a, "--interval"))
            O.interval_s = atoi(v);
        else if (!strcmp(a, "--down")) {
            if (sscanf(v, "%d-%d", &O.down_min_s, &O.down_max_s) != 2) return -1;
        } else if (!strcmp(a, "--bin"))
            O.bin = v;
        else if (!strcmp(a, "--model"))
            O.model = v;
        else if (!strcmp(a, "--seed"))
            O.seed = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--hang"))
            O.hang_s = atoi(v);
        else
            return -1;
    }
    return O.minutes > 0 && O.clients >= 1 && O.clients <= 64 && O.interval_s >= 2 &&
                   O.down_min_s >= 0 && O.down_max_s >= O.down_min_s && O.hang_s >= 5
               ? 0
               : -1;
}

/* Whether a log shows a sanitizer report. */
static bool sanitizer_report(const char *path) {
    char *l = mwt_read_file(path, NULL);
    bool bad = l && (strstr(l, "LeakSanitizer") || strstr(l, "AddressSanitizer") ||
                     strstr(l, "runtime error:"));
    if (bad) fprintf(stderr, "soak: sanitizer report in %s:\n%s\n", path, l);
    free(l);
    return bad;
}

/* The expert shares from the model's layer and expert counts: share j of every layer. */
static int make_shares(void) {
    vx_gguf *g;
    mw_err err = {0};
    if (vx_gguf_open(O.model, &g, &err)) {
        fprintf(stderr, "soak: %s: %s\n", O.model, err.msg);
        return -1;
    }
    const vx_meta *m = vx_gguf_meta(g);
    const char *arch;
    char key[160];
    int64_t layers = 0, experts = 0;
    /* the getters return 1 when the key is there */
    bool ok = vx_meta_get_str(m, "general.architecture", &arch, &err) == 1;
    if (ok) {
        snprintf(key, sizeof key, "%s.block_count", arch);
        ok = vx_meta_get_i64(m, key, &layers, &err) == 1;
    }
    if (ok) {
        snprintf(key, sizeof key, "%s.expert_count", arch);
        ok = vx_meta_get_i64(m, key, &experts, &err) == 1;
    }
    vx_gguf_close(g);
    if (!ok || experts < N_NODES || layers < 1) {
        fprintf(stderr, "soak: %s: %s\n", O.model,
                !ok ? (err.msg[0] ? err.msg : "no layer or expert count")
                    : "fewer experts than nodes");
        return -1;
    }
    for (int j = 0; j < N_NODES; j++)
        snprintf(shares[j], sizeof shares[j], "0-%lld:%lld-%lld", (long long)layers - 1,
                 (long long)(j * experts / N_NODES), (long long)((j + 1) * experts / N_NODES - 1));
    return 0;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (parse(argc, argv)) {
        fprintf(stderr, "usage: soak [--minutes M] [--clients K] [--interval S] [--down MIN-MAX] "
                        "[--bin DIR] [--model PATH] [--partial] [--seed N] [--hang S]\n");
        return 2;
    }
    t_zero = 0;
    t_zero = now_s();
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    if (!O.seed) O.seed = (unsigned)time(NULL);
    if (!O.model) O.model = strdup(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"));
    const bool asan = strstr(O.bin, "asan") != NULL;
    setenv("MW_BIN", O.bin, 1); /* mwt_serve_start starts this coordinator */
    dir = mwt_tmpdir("soak");
    if (!dir || make_shares()) return 1;
    for (int k = 0; k < N_PROMPTS - 1; k++) prompts[k] = strdup(short_prompts[k]);
    /* longer than a prefill chunk (256 tokens): prefilled over several steps */
    size_t cap = 8192, len = 0;
    prompts[N_PROMPTS - 1] = malloc(cap);
    for (int r = 0; r < 60; r++)
        len += (size_t)snprintf(prompts[N_PROMPTS - 1] + len, cap - len,
                                "Step %d: the node holds its experts. ", r);
    for (int i = 0; i < N_NODES; i++) {
        nodes[i].port = mwt_free_port();
        nodes[i].open_outage = -1;
        if (start_node(i)) return 1;
    }
    char list[512];
    snprintf(list, sizeof list, "tcp://127.0.0.1:%d,tcp://127.0.0.1:%d,tcp://127.0.0.1:%d",
             nodes[0].port, nodes[1].port, nodes[2].port);
    const char *extra[] = {"--nodes",
                           list,
                           "--threads",
                           "1",
                           "--served-model-name",
                           "soak",
                           O.partial ? NULL : "--exact",
                           NULL};
    if (mwt_serve_start(&srv, O.model, extra, 300000)) return 1;
    /* the quiet cluster's answers */
    for (int k = 0; k < N_PROMPTS; k++) {
        answer a;
        if (request(k, MAX_TOK, false, &a) != OK) {
            fprintf(stderr, "soak: prompt %d failed on a quiet cluster: %s\n", k, a.message);
            return 1;
        }
        reference[k] = a.toks;
    }
    printf("soak: %d client(s) for %.1f min against %s; a random node killed every ~%d s, down "
           "%d-%d s; %s mode; programs in %s; seed %u\n",
           O.clients, O.minutes, O.model, O.interval_s, O.down_min_s, O.down_max_s,
           O.partial ? "partial" : "exact", O.bin, O.seed);
    const double t_start = now_s(), t_end = t_start + O.minutes * 60;
    pthread_t th[64], ch;
    for (int i = 0; i < O.clients; i++) pthread_create(&th[i], NULL, client, (void *)(uintptr_t)i);
    pthread_create(&ch, NULL, chaos, NULL);
    double next_sample = t_start;
    while (now_s() < t_end) {
        follow_log();
        if (now_s() >= next_sample) {
            sample();
            next_sample += 1.0;
        }
        usleep(20000);
    }
    atomic_store(&stopping, true);
    pthread_join(ch, NULL);
    for (int i = 0; i < O.clients; i++) pthread_join(th[i], NULL);
    const double run_s = now_s() - t_start;
    /* the nodes still down start again: the cluster ends whole, and each must be taken back */
    for (int i = 0; i < N_NODES; i++)
        if (!nodes[i].pid) {
            if (start_node(i))
                restart_failures++;
            else {
                pthread_mutex_lock(&lock);
                nodes[i].restarted = true;
                outages[nodes[i].open_outage].restart = now_s();
                pthread_mutex_unlock(&lock);
            }
        }
    for (double t = now_s(); now_s() < t + REJOIN_S;) {
        follow_log();
        bool all = true;
        for (int i = 0; i < N_NODES; i++) all &= nodes[i].open_outage < 0;
        if (all) break;
        usleep(20000);
    }
    follow_log();
    sample();

    /* ---- the report ---- */
    long total = 0;
    for (int o = 0; o < N_OUTCOMES; o++) total += atomic_load(&counts[o]);
    printf("soak: %ld requests (%ld streamed, %ld tokens) in %.1f min, %d kills:\n", total,
           atomic_load(&streamed), atomic_load(&tokens_out), run_s / 60, kills);
    for (int o = 0; o < N_OUTCOMES; o++)
        printf("  %7ld  %s\n", atomic_load(&counts[o]), outcome_name[o]);
    for (int i = 0; i < n_first_errors; i++) printf("  error seen: %s\n", first_error[i]);
    /* outages: how fast the coordinator saw each kill, how fast it took each node back */
    double det[MAX_OUTAGES], rej[MAX_OUTAGES];
    int nd = 0, nr = 0, unseen = 0, not_back = 0, doubles = 0;
    for (int o = 0; o < n_outages; o++) {
        const outage *x = &outages[o];
        if (x->seen_down)
            det[nd++] = x->seen_down - x->kill;
        else
            unseen++;
        if (x->back)
            rej[nr++] = x->back - x->restart;
        else
            not_back++;
        for (int b = o + 1; b < n_outages; b++)
            doubles += outages[b].node != x->node && outages[b].kill < (x->back ? x->back : 1e30);
    }
    qsort(det, (size_t)nd, sizeof *det, compare_double);
    qsort(rej, (size_t)nr, sizeof *rej, compare_double);
    printf("  kill to marked down (coordinator's log, polled every 20 ms): %d seen", nd);
    if (nd)
        printf(", min %.0f ms, median %.0f ms, max %.0f ms", 1e3 * det[0], 1e3 * det[nd / 2],
               1e3 * det[nd - 1]);
    printf("; %d never seen\n", unseen);
    printf("  restart to taken back: %d", nr);
    if (nr) printf(", median %.0f ms, max %.0f ms", 1e3 * rej[nr / 2], 1e3 * rej[nr - 1]);
    printf("; %d not taken back; %d restarts failed; %d times two nodes down at once\n", not_back,
           restart_failures, doubles);
    bool bad = atomic_load(&counts[WRONG]) || atomic_load(&counts[FAILED]) ||
               atomic_load(&counts[HUNG]) || atomic_load(&counts[LOST]) ||
               !atomic_load(&counts[OK]) || unseen || not_back || restart_failures;
    for (int p = 0; p < 1 + N_NODES; p++) bad |= grows(p, t_start + run_s / 2, !asan);
    if (asan) printf("  (ASan programs: memory reported, not judged; LSan judges leaks)\n");

    /* a clean stop: the coordinator and the live nodes exit 0 (and LSan-clean under ASan) */
    char kept[4300];
    snprintf(kept, sizeof kept, "%s/coordinator.log", dir);
    kill(srv.pid, SIGTERM);
    int st = mwt_wait(srv.pid, 60000);
    srv.pid = 0;
    char *slog = mwt_read_file(srv.log, NULL);
    if (slog) mwt_write_file(kept, slog, strlen(slog));
    free(slog);
    mwt_serve_stop(&srv, 1000);
    if (st != 0) printf("soak: the coordinator exited %d\n", st);
    bad |= st != 0 || sanitizer_report(kept);
    for (int i = 0; i < N_NODES; i++) {
        kill(nodes[i].pid, SIGTERM);
        int ns = mwt_wait(nodes[i].pid, 30000);
        if (ns != 0) printf("soak: node %d exited %d\n", i, ns);
        bad |= ns != 0 || sanitizer_report(nodes[i].log);
    }
    printf("soak: %s\n", bad ? "FAILED" : "passed");
    if (!bad)
        mwt_rmrf(dir);
    else
        printf("soak: logs kept in %s\n", dir);
    return bad ? 1 : 0;
}
