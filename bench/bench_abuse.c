/* bench/bench_abuse.c — `coordinator serve` under the four attacks of the HTTP front, each measured
 * the same way: the server's resident memory (VmRSS) before, at its peak (sampled every 20 ms) and
 * after (the attack's clients gone, or for held bodies still connected after their answers), the
 * latency of GET /health probed every 50 ms on fresh connections, and that of a normal request
 * (a completion of 8 tokens) every 500 ms, each with its failures (non-200 answers).
 *
 *   idle     N connections opened and left silent (default 1030: past the old limit of 1024)
 *   parse    waves of four requests of the largest accepted size at once: 100 000 chat messages,
 *            700 000 logit biases, 7 MiB of prompt text, 2 million prompt ids
 *   bodies   N connections each sending a body of 8 MiB - 1 of an announced 8 MiB, never the last
 *            byte (the server's default --max-body-bytes is 8 MiB)
 *   streams  N streamed completions whose clients never read (with small receive windows, as a
 *            slow-read attack sets them: what they do not take waits in the server)
 *
 * Against a server already running (--port, --pid for its memory), or one it starts itself
 * (--coordinator, --model, --serve-args; by default bin/coordinator on the gpt-oss-tiny fixture).
 * Prints one JSON line per attack and a table, stamped with the machine and the commit. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "coordinator/co_buf.h"

#define MAX_SAMPLES 8192
#define WARM_SLOTS  16   /* serve's default --max-seqs */
#define WARM_PROMPT 4000 /* positions, of serve's default --ctx of 4096 */

typedef struct opts {
    int port, pid, conns, bodies, streams, max_tokens, rcvbuf;
    double hold_s, wait_s;
    const char *attack, *coordinator, *model, *serve_args;
} opts;

/* Latencies of one kind of probe (ms) and its failures. */
typedef struct lat {
    double v[MAX_SAMPLES];
    int n, fail;
} lat;

typedef struct probe {
    const opts *o;
    volatile int stop;
    long rss_peak, tcp_peak;
    lat health, normal;
    pthread_t th[3];
} probe;

static double now_ms(void) {
    return bu_now() * 1e3;
}

static void sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1e3),
                          (long)((ms - (double)(time_t)(ms / 1e3) * 1e3) * 1e6)};
    nanosleep(&ts, NULL);
}

static long rss_kib(int pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kib;
}

/* ---- a small blocking client ---------------------------------------------------------------- */

static int connect_to(int port, int rcvbuf) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (rcvbuf) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A request's head: method, path, the body's length (-1: none), Connection: close. */
static int head_of(char *h, size_t cap, const char *method, const char *path, long long len) {
    if (len < 0)
        return snprintf(h, cap, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", method,
                        path);
    return snprintf(h, cap,
                    "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
                    "application/json\r\nContent-Length: %lld\r\n\r\n",
                    method, path, len);
}

/* Reads the answer to its end (the server closes: Connection: close) or timeout_ms; its status,
 * 0 for none. The first bytes are kept in first (NUL-terminated) when given. */
static int read_answer(int fd, int timeout_ms, char *first, size_t cap) {
    char buf[65536];
    size_t kept = 0;
    int status = 0;
    const double end = now_ms() + timeout_ms;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        const double left = end - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
        const ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) break;
        if (!status) sscanf(buf, "HTTP/1.1 %d", &status);
        if (first && kept + 1 < cap) {
            const size_t take = (size_t)k < cap - 1 - kept ? (size_t)k : cap - 1 - kept;
            memcpy(first + kept, buf, take);
            kept += take;
        }
    }
    if (first) first[kept] = 0;
    return status;
}

/* One request on a fresh connection; its status (0: none within timeout_ms). */
static int request(int port, const char *method, const char *path, const char *body,
                   int timeout_ms) {
    const int fd = connect_to(port, 0);
    if (fd < 0) return 0;
    char h[512];
    const int n = head_of(h, sizeof h, method, path, body ? (long long)strlen(body) : -1);
    int status = 0;
    if (!send_all(fd, h, (size_t)n) && (!body || !send_all(fd, body, strlen(body))))
        status = read_answer(fd, timeout_ms, NULL, 0);
    close(fd);
    return status;
}

/* ---- the probes ----------------------------------------------------------------------------- */

static void record(lat *l, double ms, bool ok) {
    if (!ok)
        l->fail++;
    else if (l->n < MAX_SAMPLES)
        l->v[l->n++] = ms;
}

/* The kernel's TCP buffers in KiB, the whole machine's (the clients' side is in it too: on
 * loopback both ends are this kernel's). */
static long tcp_kib(void) {
    FILE *f = fopen("/proc/net/sockstat", "r");
    char line[256];
    long pages = -1;
    while (f && fgets(line, sizeof line, f)) {
        const char *m = strstr(line, " mem ");
        if (!strncmp(line, "TCP:", 4) && m) pages = strtol(m + 5, NULL, 10);
    }
    if (f) fclose(f);
    return pages < 0 ? -1 : pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *probe_rss(void *arg) {
    probe *p = arg;
    while (!p->stop) {
        const long k = rss_kib(p->o->pid), t = tcp_kib();
        if (k > p->rss_peak) p->rss_peak = k;
        if (t > p->tcp_peak) p->tcp_peak = t;
        sleep_ms(20);
    }
    return NULL;
}

static void *probe_health(void *arg) {
    probe *p = arg;
    while (!p->stop) {
        const double t0 = now_ms();
        const int status = request(p->o->port, "GET", "/health", NULL, 30000);
        record(&p->health, now_ms() - t0, status == 200);
        sleep_ms(50);
    }
    return NULL;
}

static const char *normal_body =
    "{\"model\":\"model\",\"prompt\":[1,2,3],\"max_tokens\":8,\"temperature\":0}";

static void *probe_normal(void *arg) {
    probe *p = arg;
    while (!p->stop) {
        const double t0 = now_ms();
        const int status = request(p->o->port, "POST", "/v1/completions", normal_body, 120000);
        record(&p->normal, now_ms() - t0, status == 200);
        sleep_ms(500);
    }
    return NULL;
}

static void probes_start(probe *p, const opts *o) {
    memset(p, 0, sizeof *p);
    p->o = o;
    p->rss_peak = rss_kib(o->pid);
    pthread_create(&p->th[0], NULL, probe_rss, p);
    pthread_create(&p->th[1], NULL, probe_health, p);
    pthread_create(&p->th[2], NULL, probe_normal, p);
}

static void probes_stop(probe *p) {
    p->stop = 1;
    for (int i = 0; i < 3; i++) pthread_join(p->th[i], NULL);
}

/* ---- the attacks ---------------------------------------------------------------------------- */

static void attack_idle(const opts *o, char *note, size_t cap) {
    int *fd = malloc((size_t)o->conns * sizeof *fd);
    int opened = 0;
    for (int i = 0; i < o->conns; i++)
        if ((fd[i] = connect_to(o->port, 0)) >= 0) opened++;
    sleep_ms(o->hold_s * 1e3);
    int closed_by_server = 0;
    for (int i = 0; i < o->conns; i++) {
        if (fd[i] < 0) continue;
        char c;
        closed_by_server += recv(fd[i], &c, 1, MSG_DONTWAIT) == 0;
        close(fd[i]);
    }
    snprintf(note, cap, "%d connections opened, %d closed by the server within %.0f s", opened,
             closed_by_server, o->hold_s);
    free(fd);
}

typedef struct big {
    int port;
    const co_buf *body;
    const char *path;
    int status;
} big;

static void *send_big(void *arg) {
    big *b = arg;
    const int fd = connect_to(b->port, 0);
    if (fd < 0) return NULL;
    char h[512];
    const int n = head_of(h, sizeof h, "POST", b->path, (long long)b->body->len);
    if (!send_all(fd, h, (size_t)n) && !send_all(fd, b->body->p, b->body->len))
        b->status = read_answer(fd, 300000, NULL, 0);
    close(fd);
    return NULL;
}

/* The four bodies of a wave (near the 8 MiB the server accepts by default). */
static void big_bodies(co_buf *b) {
    co_buf_puts(&b[0], "{\"model\":\"model\",\"messages\":[");
    for (int i = 0; i < 100000; i++)
        co_buf_puts(&b[0], i ? ",{\"role\":\"user\",\"content\":\"hi\"}"
                             : "{\"role\":\"user\",\"content\":\"hi\"}");
    co_buf_puts(&b[0], "]}");
    co_buf_puts(&b[1], "{\"model\":\"model\",\"prompt\":[1],\"logit_bias\":{");
    for (int i = 0; i < 700000; i++) co_buf_printf(&b[1], "%s\"%d\":1", i ? "," : "", i);
    co_buf_puts(&b[1], "}}");
    co_buf_puts(&b[2], "{\"model\":\"model\",\"prompt\":\"");
    for (int i = 0; i < 7 << 18; i++) co_buf_puts(&b[2], "abc ");
    co_buf_puts(&b[2], "\"}");
    co_buf_puts(&b[3], "{\"model\":\"model\",\"prompt\":[");
    for (int i = 0; i < 2000000; i++) co_buf_puts(&b[3], i ? ",7" : "7");
    co_buf_puts(&b[3], "]}");
}

static void attack_parse(const opts *o, char *note, size_t cap) {
    co_buf body[4] = {{0}};
    big_bodies(body);
    static const char *const paths[] = {"/v1/chat/completions", "/v1/completions",
                                        "/v1/completions", "/v1/completions"};
    const double end = now_ms() + o->hold_s * 1e3;
    int waves = 0, statuses[4] = {0};
    do {
        big b[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            b[i] = (big){.port = o->port, .body = &body[i], .path = paths[i]};
            pthread_create(&th[i], NULL, send_big, &b[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            statuses[i] = b[i].status;
        }
        waves++;
    } while (now_ms() < end);
    snprintf(note, cap, "%d waves of 4 (%.1f, %.1f, %.1f, %.1f MB), answered %d %d %d %d", waves,
             body[0].len / 1e6, body[1].len / 1e6, body[2].len / 1e6, body[3].len / 1e6,
             statuses[0], statuses[1], statuses[2], statuses[3]);
    for (int i = 0; i < 4; i++) co_buf_free(&body[i]);
}

/* Pushes every connection's head and body (all but the last byte) at once, nonblocking. */
static void push_bodies(const int *fd, int n, const char *head, size_t head_len, const char *body,
                        size_t body_len) {
    size_t *sent = calloc((size_t)n, sizeof *sent);
    const size_t total = head_len + body_len;
    for (int left = n; left > 0;) {
        left = 0;
        for (int i = 0; i < n; i++) {
            if (fd[i] < 0 || sent[i] == total) continue;
            const char *p = sent[i] < head_len ? head + sent[i] : body + (sent[i] - head_len);
            const size_t len = sent[i] < head_len ? head_len - sent[i] : total - sent[i];
            const ssize_t k = send(fd[i], p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0) sent[i] += (size_t)k;
            if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) sent[i] = total; /* closed */
            left += sent[i] < total;
        }
        if (left) sleep_ms(1);
    }
    free(sent);
}

/* The bodies attack keeps its clients after their answers: "after" is measured here. */
static long bodies_after_rss;

static void attack_bodies(const opts *o, char *note, size_t cap) {
    const size_t len = 8u << 20;
    char *body = malloc(len);
    memset(body, ' ', len);
    int *fd = malloc((size_t)o->bodies * sizeof *fd);
    for (int i = 0; i < o->bodies; i++) fd[i] = connect_to(o->port, 0);
    char h[512];
    const int hn = head_of(h, sizeof h, "POST", "/v1/completions", (long long)len);
    push_bodies(fd, o->bodies, h, (size_t)hn, body, len - 1);
    /* every connection answered (408 at the request deadline, 503 beyond the budget), the
     * clients still there */
    int n408 = 0, n503 = 0, other = 0;
    for (int i = 0; i < o->bodies; i++) {
        char first[64];
        const double left = o->wait_s * 1e3;
        const int status = fd[i] < 0 ? 0 : read_answer(fd[i], (int)left, first, sizeof first);
        n408 += status == 408;
        n503 += status == 503;
        other += status != 408 && status != 503;
    }
    sleep_ms(2000);
    bodies_after_rss = rss_kib(o->pid);
    for (int i = 0; i < o->bodies; i++)
        if (fd[i] >= 0) close(fd[i]);
    snprintf(note, cap, "%d bodies of 8 MiB - 1: %d got 408, %d got 503, %d other", o->bodies, n408,
             n503, other);
    free(fd);
    free(body);
}

static void attack_streams(const opts *o, char *note, size_t cap) {
    char body[256], h[512];
    snprintf(body, sizeof body,
             "{\"model\":\"model\",\"prompt\":[3,4,5],\"max_tokens\":%d,\"stream\":true,"
             "\"ignore_eos\":true,\"return_token_ids\":true}",
             o->max_tokens);
    const int hn = head_of(h, sizeof h, "POST", "/v1/completions", (long long)strlen(body));
    int *fd = malloc((size_t)o->streams * sizeof *fd);
    int opened = 0;
    for (int i = 0; i < o->streams; i++) {
        fd[i] = connect_to(o->port, o->rcvbuf);
        if (fd[i] >= 0 && !send_all(fd[i], h, (size_t)hn) && !send_all(fd[i], body, strlen(body)))
            opened++;
    }
    sleep_ms(o->hold_s * 1e3);
    for (int i = 0; i < o->streams; i++)
        if (fd[i] >= 0) close(fd[i]);
    snprintf(note, cap,
             "%d streams of %d tokens never read (receive buffers of %d bytes), held %.0f s",
             opened, o->max_tokens, o->rcvbuf, o->hold_s);
    free(fd);
}

/* ---- report --------------------------------------------------------------------------------- */

typedef struct row {
    const char *attack;
    long before, peak, after, tcp_peak;
    double h50, h99, hmax, n50, nmax;
    int hn, hfail, nn, nfail;
    char note[256];
} row;

static double q(double *v, int n, double p) {
    if (!n) return -1;
    bu_median(v, n); /* sorts */
    return v[(int)(p * (n - 1) + 0.5)];
}

/* Every slot's KV cache touched in full (a prompt of nearly the context in each, at once: a
 * prefill, quick), so that the memory long generations touch once in any server is not counted
 * against an attack. */
static void *warm_one(void *arg) {
    const opts *o = arg;
    co_buf b = {0};
    co_buf_puts(&b, "{\"model\":\"model\",\"max_tokens\":1,\"prompt\":[");
    for (int i = 0; i < WARM_PROMPT; i++) co_buf_printf(&b, "%s%d", i ? "," : "", 1 + i % 300);
    co_buf_puts(&b, "]}");
    request(o->port, "POST", "/v1/completions", b.p, 300000);
    co_buf_free(&b);
    return NULL;
}

static void warm_up(const opts *o) {
    pthread_t th[WARM_SLOTS];
    for (int i = 0; i < WARM_SLOTS; i++) pthread_create(&th[i], NULL, warm_one, (void *)o);
    for (int i = 0; i < WARM_SLOTS; i++) pthread_join(th[i], NULL);
}

static row run_attack(const opts *o, const char *name, void (*fn)(const opts *, char *, size_t)) {
    row r = {.attack = name};
    sleep_ms(1000);
    r.before = rss_kib(o->pid);
    static probe p;
    probes_start(&p, o);
    bodies_after_rss = -1;
    fn(o, r.note, sizeof r.note);
    probes_stop(&p);
    sleep_ms(2000); /* the clients are gone */
    r.peak = p.rss_peak;
    r.tcp_peak = p.tcp_peak;
    r.after = bodies_after_rss >= 0 ? bodies_after_rss : rss_kib(o->pid);
    r.hn = p.health.n;
    r.hfail = p.health.fail;
    r.h50 = q(p.health.v, p.health.n, 0.5);
    r.h99 = q(p.health.v, p.health.n, 0.99);
    r.hmax = q(p.health.v, p.health.n, 1.0);
    r.nn = p.normal.n;
    r.nfail = p.normal.fail;
    r.n50 = q(p.normal.v, p.normal.n, 0.5);
    r.nmax = q(p.normal.v, p.normal.n, 1.0);
    printf("{\"attack\":\"%s\",\"rss_kib\":{\"before\":%ld,\"peak\":%ld,\"after\":%ld},"
           "\"tcp_buffers_peak_kib\":%ld,"
           "\"health_ms\":{\"n\":%d,\"failed\":%d,\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f},"
           "\"normal_ms\":{\"n\":%d,\"failed\":%d,\"p50\":%.1f,\"max\":%.1f},\"note\":\"%s\"}\n",
           name, r.before, r.peak, r.after, r.tcp_peak, r.hn, r.hfail, r.h50, r.h99, r.hmax, r.nn,
           r.nfail, r.n50, r.nmax, r.note);
    fflush(stdout);
    return r;
}

static void table(const row *r, int n) {
    printf(
        "\n| attack | RSS before / peak / after (MB) | kernel TCP buffers, peak (MB) | /health "
        "p50 / p99 / max (ms), failed | normal request p50 / max (ms), failed | |\n| --- | --- | "
        "--- | --- | --- | --- |\n");
    for (int i = 0; i < n; i++)
        printf(
            "| %s | %.0f / %.0f / %.0f | %.0f | %.1f / %.1f / %.1f, %d of %d | %.0f / %.0f, %d of "
            "%d | %s |\n",
            r[i].attack, r[i].before / 1024.0, r[i].peak / 1024.0, r[i].after / 1024.0,
            r[i].tcp_peak / 1024.0, r[i].h50, r[i].h99, r[i].hmax, r[i].hfail, r[i].hn + r[i].hfail,
            r[i].n50, r[i].nmax, r[i].nfail, r[i].nn + r[i].nfail, r[i].note);
}

/* ---- the server ----------------------------------------------------------------------------- */

/* Starts `coordinator serve` on a free port; its pid in o->pid, its port in o->port. */
static int start_server(opts *o, char *dir) {
    char ready[256], log[256], cmd[4096];
    snprintf(ready, sizeof ready, "%s/ready", dir);
    snprintf(log, sizeof log, "%s/serve.log", dir);
    snprintf(cmd, sizeof cmd, "exec %s serve --model %s --listen 127.0.0.1:0 --ready-file %s %s",
             o->coordinator, o->model, ready, o->serve_args);
    const pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(log, "w", stderr)) _exit(127);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1200; i++) {
        FILE *f = fopen(ready, "r");
        char url[256] = "";
        if (f) {
            if (!fgets(url, sizeof url, f)) url[0] = 0;
            fclose(f);
        }
        const char *colon = strrchr(url, ':');
        if (colon && atoi(colon + 1) > 0) {
            o->port = atoi(colon + 1);
            o->pid = pid;
            return 0;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) break;
        sleep_ms(100);
    }
    fprintf(stderr, "bench_abuse: the server did not start (log: %s)\n", log);
    return -1;
}

static const char *commit(void) {
    static char c[64] = "unknown";
    FILE *f = popen("git rev-parse --short HEAD 2>/dev/null", "r");
    if (f) {
        if (fgets(c, sizeof c, f)) c[strcspn(c, "\n")] = 0;
        pclose(f);
    }
    return c;
}

int main(int argc, char **argv) {
    opts o = {.conns = 1030,
              .bodies = 100,
              .streams = 200,
              .max_tokens = 4000,
              .rcvbuf = 4096,
              .hold_s = 15,
              .wait_s = 45,
              .attack = "all",
              .coordinator = "bin/coordinator",
              .model = "tests/fixtures/llamacpp/gpt-oss-tiny/model.gguf",
              .serve_args = "--threads 2"};
    int first = argc;
    const bu_opt opt[] = {
        BU_OPT("--attack", BU_STR, &o.attack, "all",
               "all, or one of idle, parse, bodies, streams (comma-separated)"),
        BU_OPT_IN("--port", BU_INT, &o.port, "PORT",
                  "a server running on 127.0.0.1:PORT (else one is started)", 1, 65535),
        BU_OPT_IN("--pid", BU_INT, &o.pid, "PID", "that server's process (its memory)", 1, 1 << 30),
        BU_OPT("--coordinator", BU_STR, &o.coordinator, "PATH", "the server to start"),
        BU_OPT("--model", BU_STR, &o.model, "PATH", "its model"),
        BU_OPT("--serve-args", BU_STR, &o.serve_args, "ARGS", "its other options"),
        BU_OPT_IN("--conns", BU_INT, &o.conns, "1030", "idle: connections", 1, 100000),
        BU_OPT_IN("--bodies", BU_INT, &o.bodies, "100", "bodies: connections", 1, 10000),
        BU_OPT_IN("--streams", BU_INT, &o.streams, "200", "streams: connections", 1, 10000),
        BU_OPT_IN("--max-tokens", BU_INT, &o.max_tokens, "4000", "streams: tokens each asks for", 1,
                  1 << 20),
        BU_OPT_IN("--rcvbuf", BU_INT, &o.rcvbuf, "4096",
                  "streams: the clients' receive buffer (SO_RCVBUF; 0: the system's)", 0, 1 << 26),
        BU_OPT_IN("--hold-s", BU_NUM, &o.hold_s, "15", "seconds idle, parse and streams last", 1,
                  3600),
        BU_OPT_IN("--wait-s", BU_NUM, &o.wait_s, "45", "bodies: seconds to wait for each answer", 1,
                  3600),
    };
    const bu_cli cli = {"bench_abuse",
                        "The HTTP front under abuse: the server's memory, /health's latency and a "
                        "normal request's\nduring idle connections, the largest requests, bodies "
                        "never completed and streams never read.",
                        NULL,
                        NULL,
                        opt,
                        (int)(sizeof opt / sizeof opt[0])};
    const int status = bu_args(argc, argv, &cli, &first);
    if (status != BU_RUN) return status;
    signal(SIGPIPE, SIG_IGN);
    char dir[] = "/tmp/bench_abuse-XXXXXX";
    const bool own = !o.port;
    if (own && (!mkdtemp(dir) || start_server(&o, dir))) return 1;
    if (!o.pid) fprintf(stderr, "bench_abuse: no --pid: memory is not measured\n");
    printf("# bench_abuse: %s, commit %s, server %s (pid %d, port %d)\n", bu_cpu_name(), commit(),
           own ? o.coordinator : "given", o.pid, o.port);
    static const struct {
        const char *name;
        void (*fn)(const opts *, char *, size_t);
    } attacks[] = {{"idle", attack_idle},
                   {"parse", attack_parse},
                   {"bodies", attack_bodies},
                   {"streams", attack_streams}};
    warm_up(&o);
    row rows[4];
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (!strcmp(o.attack, "all") || strstr(o.attack, attacks[i].name))
            rows[n++] = run_attack(&o, attacks[i].name, attacks[i].fn);
    table(rows, n);
    if (own) {
        kill(o.pid, SIGTERM);
        waitpid(o.pid, NULL, 0);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) return 1;
    }
    return 0;
}
