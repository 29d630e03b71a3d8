/* tests/integration/test_node_limits.c — an expert node under abuse, each fault of issue 16's
 * "Limits" with its own case, against a real expert-node process (the gpt-oss fixture):
 *  - a raw ZMTP client streaming 1 MiB parts flagged MORE that never end the message, and one
 *    streaming empty parts (64 bytes of memory per 2 bytes sent): cut off at the stated limits,
 *    the node's peak memory within them, the next client served; the same with every thread of
 *    the node but libzmq's I/O thread stopped (ptrace): the bound holds because the receive
 *    relay reads no more than the budget, whenever it runs;
 *  - a message of 100 parts: dropped, its sender cut off;
 *  - a client that floods batches and never reads the replies: its requests discarded once its
 *    unread replies pass the peer limit, one log line per interval, and another client's round
 *    trips stay short (a round takes at most a quota of one client's requests);
 *  - the model file truncated under a serving node: one line naming the file, exit status 1, not
 *    a death by SIGBUS. */
#include "tests/support/mw_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sys/ptrace.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/mwt_node.h"
#include "tests/support/mwt_zmtp.h"
#include "wire/wr_zmq.h"

typedef mwt_node node;

static char *dir;
static void *ctx;

static int setup(void **state) {
    (void)state;
    dir = mwt_tmpdir("node-limits");
    ctx = zmq_ctx_new();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    zmq_ctx_term(ctx);
    mwt_rmrf(dir);
    free(dir);
    return 0;
}

/* Starts an expert node on model (all experts) with the extra options (NULL-terminated). */
static node start_node(const char *model, const char *tag, const char *const *extra) {
    const char *args[32] = {"--threads", "1"};
    int k = 2;
    for (int i = 0; extra && extra[i] && k < 31; i++) args[k++] = extra[i];
    args[k] = NULL;
    return mwt_node_up(model, dir, tag, args, 30000);
}

static void stop_node(node *n) {
    mwt_node_kill(n);
}

static void *dealer(const node *n, int timeout_ms) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    mw_err e;
    assert_int_equal(wr_socket_setup(s, NULL, &e), 0);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeout_ms, sizeof timeout_ms);
    assert_int_equal(zmq_connect(s, n->endpoint), 0);
    return s;
}

enum { ROWS = 4, NA = 6, WIDTH = 256 };

/* Sends a valid batch for layer (all 8 experts of the fixture touched) and returns the reply's
 * kind (WR_MSG_NONE when none came). */
static wr_kind batch(void *s, uint64_t seq, int layer) {
    static float x[ROWS * WIDTH];
    static wr_assign a[NA];
    for (int i = 0; i < ROWS * WIDTH; i++) x[i] = sinf(0.01f * (float)(i + 7 * (int)seq));
    for (int j = 0; j < NA; j++) a[j] = (wr_assign){j % ROWS, (j + (int)seq) % 8, 0.25f};
    wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                .seq = seq,
                .batch = {.layer = (uint32_t)layer,
                          .rows = ROWS,
                          .width = WIDTH,
                          .n_assign = NA,
                          .reply = {WR_F32, false},
                          .x = x,
                          .assign = a}};
    wr_out o;
    wr_out_init(&o);
    mw_err e;
    assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F32, false}, &e), 0);
    assert_int_equal(wr_send(s, NULL, 0, &o, 0, &e), 0);
    wr_out_free(&o);
    wr_rx rx;
    wr_rx_init(&rx);
    if (wr_recv(s, &rx, false, 0, &e) != 0) return WR_MSG_NONE;
    wr_in in;
    wr_in_init(&in, NULL);
    wr_msg r;
    wr_code code;
    wr_kind k =
        wr_parse(&in, rx.parts, rx.n_parts, rx.truncated, &r, &code, &e) ? WR_MSG_NONE : r.kind;
    if (k == WR_MSG_ERROR)
        fprintf(stderr, "batch %llu: %s\n", (unsigned long long)seq, r.error.message);
    wr_in_free(&in);
    wr_rx_free(&rx);
    return k;
}

/* A "Vm..." line of /proc/PID/status, in KiB. */
static long proc_kb(pid_t pid, const char *field) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field)) && line[strlen(field)] == ':')
            v = atol(line + strlen(field) + 1);
    if (f) fclose(f);
    return v;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static const char *gguf(void) {
    static char p[4096];
    snprintf(p, sizeof p, "%s", mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"));
    return p;
}

/* The node's memory is measured as resident bytes: under ASan, freed blocks would stay resident
 * in its quarantine, so the measured nodes run without one. */
static void no_quarantine(void) {
    const char *o = getenv("ASAN_OPTIONS");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s%squarantine_size_mb=0:thread_local_quarantine_size_kb=0",
             o ? o : "", o && *o ? ":" : "");
    setenv("ASAN_OPTIONS", buf, 1);
}

/* ---- receive limits --------------------------------------------------------------------- */

/* Streams frames of `part` bytes flagged MORE from a raw client until the node cuts it off or
 * `budget` bytes went out; returns the bytes sent. */
static size_t stream_unfinished(const node *n, size_t part, size_t budget) {
    int fd = mwt_zmtp_connect(n->endpoint, 5000);
    assert_true(fd >= 0);
    /* frames packed into one buffer, written as a block */
    size_t frame = part + (part < 256 ? 2 : 9), per = part >= (1u << 16) ? 1 : (1u << 16) / frame;
    uint8_t *buf = calloc(per, frame);
    for (size_t i = 0; i < per; i++) {
        uint8_t *f = buf + i * frame;
        if (part < 256) {
            f[0] = 1;
            f[1] = (uint8_t)part;
        } else {
            f[0] = 3;
            for (int k = 0; k < 8; k++) f[1 + k] = (uint8_t)((uint64_t)part >> (56 - 8 * k));
        }
    }
    size_t sent = 0;
    while (sent < budget && mwt_zmtp_write(fd, buf, per * frame) == 0) sent += per * frame;
    free(buf);
    close(fd);
    return sent;
}

static void check_flood(size_t part, size_t budget, const char *limit_arg, const char *needle,
                        long max_growth_kb) {
    static int k;
    char tag[32];
    snprintf(tag, sizeof tag, "flood-%d", k++);
    const char *opts[] = {"--peer-limit", "16", "--recv-limit", limit_arg, NULL};
    node n = start_node(gguf(), tag, opts);
    long rss0 = proc_kb(n.pid, "VmRSS");
    size_t sent = stream_unfinished(&n, part, budget);
    long growth = proc_kb(n.pid, "VmHWM") - rss0;
    char *l = mwt_read_file(n.log, NULL);
    fprintf(stderr, "    %zu-byte parts: cut after %zu bytes sent; node peak +%ld KiB\n", part,
            sent, growth);
    if (sent >= budget || !strstr(l, "cut off peer") || !strstr(l, needle))
        fail_msg("not cut off (%zu bytes sent):\n%s", sent, l);
    if (growth > max_growth_kb) fail_msg("node grew by %ld KiB:\n%s", growth, l);
    free(l);
    /* and it serves the next client */
    void *s = dealer(&n, 10000);
    assert_int_equal(batch(s, 5, 1), WR_MSG_PARTIAL_BATCH);
    zmq_close(s);
    stop_node(&n);
}

/* 1 MiB parts: the per-peer limit (16 MiB) cuts the stream; without it the node grows by all
 * 600 MiB sent. The node may hold that limit and libzmq's own overhead: 32 MiB in all, not the
 * recv limit (64 MiB). */
static void test_unfinished_message_is_cut_off(void **state) {
    (void)state;
    check_flood(1u << 20, 600u << 20, "64", "the limit per peer is 16777216", 32 << 10);
}

/* The same flood with two spinning processes per core beside the node (and whatever else the
 * machine runs): the node's growth stays within the same 32 MiB when CPUs are scarce, and a
 * flood of empty parts (counted at WR_RELAY_PART_COST each) within it too. */
static void test_unfinished_message_cut_off_under_load(void **state) {
    (void)state;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nb = cpus > 0 && cpus < 16 ? 2 * (int)cpus : 4;
    pid_t burners[32];
    for (int i = 0; i < nb; i++)
        if ((burners[i] = fork()) == 0)
            for (volatile unsigned long x = 0;; x++) {
            }
    check_flood(1u << 20, 600u << 20, "64", "the limit per peer is 16777216", 32 << 10);
    check_flood(0, 40u << 20, "64", "the limit per peer is 16777216", 32 << 10);
    for (int i = 0; i < nb; i++) {
        kill(burners[i], SIGKILL);
        waitpid(burners[i], NULL, 0);
    }
}

/* Empty parts: 2 bytes each on the wire, a 64-byte message slot each in libzmq: counted per part,
 * the per-peer limit cuts it; uncut, the 40 MB sent would cost the node over 1 GB. */
static void test_empty_parts_are_cut_off(void **state) {
    (void)state;
    check_flood(0, 40u << 20, "64", "the limit per peer is 16777216", 32 << 10);
}

/* Stops (freeze) or resumes every thread of pid but libzmq's I/O threads ("ZMQbg/IO/..."), each
 * on its own through ptrace: starvation taken to its limit. Returns the threads stopped. */
static int freeze_node(pid_t pid, bool freeze) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid <= 0) continue;
        char comm[64] = "", cp[128];
        snprintf(cp, sizeof cp, "/proc/%d/task/%d/comm", (int)pid, (int)tid);
        FILE *f = fopen(cp, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
            fclose(f);
        }
        if (!strncmp(comm, "ZMQbg/IO", 8)) continue;
        if (!freeze) {
            if (ptrace(PTRACE_DETACH, tid, NULL, NULL) == 0) n++;
            continue;
        }
        int st;
        if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) == 0 &&
            ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) == 0 && waitpid(tid, &st, __WALL) == tid)
            n++;
    }
    closedir(d);
    return n;
}

/* The node's receive path starved: every thread of the node but libzmq's I/O thread stopped
 * (ptrace) while a raw client streams 1 MiB parts that never end a message for 3 s. A watchdog
 * that cuts a connection after libzmq has read it (the receive guard this replaced) cannot run
 * then, and libzmq reads the flood as fast as it comes: hundreds of MiB. The receive relay reads
 * a peer only under its budget, when it runs at all, so the node holds at most the peer limit
 * (16 MiB) and libzmq's overhead; once its threads run again the peer is cut off and the next
 * client served. */
static void test_flood_bounded_with_receive_path_starved(void **state) {
    (void)state;
    char *saved = getenv("ASAN_OPTIONS") ? strdup(getenv("ASAN_OPTIONS")) : NULL;
    no_quarantine();
    const char *opts[] = {"--peer-limit", "16", "--recv-limit", "64", NULL};
    node n = start_node(gguf(), "starved", opts);
    if (saved) setenv("ASAN_OPTIONS", saved, 1);
    free(saved);
    int fd = mwt_zmtp_connect(n.endpoint, 5000);
    assert_true(fd >= 0);
    long rss0 = proc_kb(n.pid, "VmRSS");
    assert_true(freeze_node(n.pid, true) > 0);
    /* 1 MiB parts flagged MORE, for 3 s, without blocking on a peer that stopped reading */
    enum { PART = 1 << 20 };
    uint8_t *buf = calloc(1, 9 + PART);
    buf[0] = 3;
    for (int k = 0; k < 8; k++) buf[1 + k] = (uint8_t)((uint64_t)PART >> (56 - 8 * k));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    size_t sent = 0, off = 0;
    long peak = 0;
    const double t0 = now_ms();
    bool gone = false;
    while (now_ms() - t0 < 3000 && !gone) {
        struct pollfd pf = {fd, POLLOUT, 0};
        if (poll(&pf, 1, 50) == 1) {
            ssize_t w = write(fd, buf + off, 9 + PART - off);
            if (w > 0) {
                sent += (size_t)w;
                off = (off + (size_t)w) % (9 + PART);
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                gone = true;
            }
        }
        long g = proc_kb(n.pid, "VmHWM") - rss0;
        if (g > peak) peak = g;
    }
    fprintf(stderr, "    stopped: %zu MiB sent in 3 s, node peak +%ld KiB%s\n", sent >> 20, peak,
            gone ? " (cut off meanwhile)" : "");
    /* running again: the paused peer is found holding an unfinished message and cut off */
    assert_true(freeze_node(n.pid, false) > 0);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    /* the flood goes on (the rest of the part, then whole parts) until the node cuts it off */
    size_t more = 0;
    if (!gone && off) gone = mwt_zmtp_write(fd, buf + off, 9 + PART - off) != 0;
    while (!gone && more < (600u << 20)) {
        gone = mwt_zmtp_write(fd, buf, 9 + PART) != 0;
        more += 9 + PART;
    }
    close(fd);
    free(buf);
    char *l = mwt_read_file(n.log, NULL);
    long after = proc_kb(n.pid, "VmHWM") - rss0;
    fprintf(stderr, "    then %zu MiB more until cut off, node peak +%ld KiB\n", more >> 20, after);
    if (peak > (32 << 10)) {
        stop_node(&n);
        fail_msg("the node grew by %ld KiB with its receive path starved (limit per peer 16 MiB):"
                 "\n%s",
                 peak, l);
    }
    if (!gone || !strstr(l, "cut off peer") || !strstr(l, "the limit per peer is 16777216"))
        fail_msg("the flooding peer was not cut off:\n%s", l);
    if (after > (32 << 10)) fail_msg("the node grew by %ld KiB:\n%s", after, l);
    free(l);
    void *s = dealer(&n, 10000);
    assert_int_equal(batch(s, 5, 1), WR_MSG_PARTIAL_BATCH);
    zmq_close(s);
    stop_node(&n);
}

/* A whole message of 100 parts: not answered, its sender cut off. */
static void test_hundred_parts_cut_off(void **state) {
    (void)state;
    node n = start_node(gguf(), "parts", NULL);
    int fd = mwt_zmtp_connect(n.endpoint, 5000);
    assert_true(fd >= 0);
    for (int i = 0; i < 100; i++) assert_int_equal(mwt_zmtp_frame(fd, "x", 1, i < 99), 0);
    assert_true(mwt_zmtp_closed(fd, 5000));
    close(fd);
    char *l = mwt_read_file(n.log, NULL);
    if (!strstr(l, "sent a message of 100 parts")) fail_msg("%s", l);
    free(l);
    stop_node(&n);
}

/* A batch of `rows` rows (the first `na` routed to experts (j * 3) % 8), layer 2. */
static wr_msg big_batch(uint64_t seq, uint32_t rows, uint32_t na, float *x, wr_assign *as) {
    for (uint32_t i = 0; i < rows * WIDTH; i++) x[i] = cosf(0.003f * (float)i);
    for (uint32_t j = 0; j < na; j++)
        as[j] = (wr_assign){(int32_t)(j % rows), (int32_t)(j * 3) % 8, 0.25f};
    return (wr_msg){.kind = WR_MSG_EXPERT_BATCH,
                    .seq = seq,
                    .batch = {.layer = 2,
                              .rows = rows,
                              .width = WIDTH,
                              .n_assign = na,
                              .reply = {WR_F32, false},
                              .x = x,
                              .assign = as}};
}

/* A DEALER that reads (almost) nothing: one message queued, a 64 KiB kernel buffer. */
static void *non_reader(const node *n) {
    void *a = zmq_socket(ctx, ZMQ_DEALER);
    int one = 1, small = 1 << 16, zero = 0;
    zmq_setsockopt(a, ZMQ_RCVHWM, &one, sizeof one);
    zmq_setsockopt(a, ZMQ_RCVBUF, &small, sizeof small);
    zmq_setsockopt(a, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(a, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(a, n->endpoint), 0);
    return a;
}

/* Client A sends 100 batches whose replies are 1 MiB each (1024 rows in partial mode, one
 * assignment: cheap to compute) and never reads them: once its unread replies pass the peer limit
 * its requests are discarded unexecuted, in one log line per interval, and the node holds no
 * more than that limit for it. Another client is served meanwhile. */
/* bound: --recv-bound's value (the unread replies are counted from the TCP connection either
 * way: the relay's, or libzmq's own with the relay off). */
static void client_that_never_reads(const char *bound) {
    const char *opts[] = {"--peer-limit", "8", "--capacity", "1024", "--recv-bound", bound, NULL};
    char *saved = getenv("ASAN_OPTIONS") ? strdup(getenv("ASAN_OPTIONS")) : NULL;
    no_quarantine();
    char tag[32];
    snprintf(tag, sizeof tag, "noread-%s", bound);
    node n = start_node(gguf(), tag, opts);
    if (saved) setenv("ASAN_OPTIONS", saved, 1);
    free(saved);
    long rss0 = proc_kb(n.pid, "VmRSS");
    void *a = non_reader(&n);
    double t_start = now_ms();
    enum { AR = 1024, AN = 100 };
    float *x = calloc((size_t)AR * WIDTH, sizeof *x);
    wr_assign as[1];
    wr_out o;
    wr_out_init(&o);
    mw_err e;
    for (int i = 0; i < AN; i++) {
        wr_msg m = big_batch(1000 + (uint64_t)i, AR, 1, x, as);
        assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F16, false}, &e), 0); /* 512 KiB out */
        assert_int_equal(wr_send(a, NULL, 0, &o, 0, &e), 0);
    }
    double t_sent = now_ms();
    void *b = dealer(&n, 20000);
    for (int i = 0; i < 10; i++)
        assert_int_equal(batch(b, 10 + (uint64_t)i, i % 4), WR_MSG_PARTIAL_BATCH);
    double t_b = now_ms();
    usleep(1500000); /* A's stream drained meanwhile */
    double elapsed_s = (now_ms() - t_start) / 1e3;
    long growth = proc_kb(n.pid, "VmHWM") - rss0;
    kill(n.pid, SIGTERM); /* the summary line, with the counts */
    assert_int_equal(mwt_wait(n.pid, 10000), 0);
    n.pid = 0;
    wr_out_free(&o);
    free(x);
    zmq_close(a);
    zmq_close(b);
    char *l = mwt_read_file(n.log, NULL);
    fprintf(stderr, "    A sent in %.0f ms, B served in %.0f ms; node peak +%ld KiB\n",
            t_sent - t_start, t_b - t_sent, growth);
    /* one line when it starts, one per 10 s after, one at exit */
    int lines = count(l, "it does not take its replies"), most = 2 + (int)(elapsed_s / 10);
    const char *sum = strstr(l, " reply(ies) dropped, ");
    long discarded = sum ? atol(sum + strlen(" reply(ies) dropped, ")) : 0;
    if (lines < 1 || lines > most || discarded < AN / 2)
        fail_msg("%d lines (at most %d) about the client that does not read, %ld of its requests "
                 "discarded:\n%s",
                 lines, most, discarded, l);
    if (growth > (64 << 10)) fail_msg("node grew by %ld KiB:\n%s", growth, l);
    free(l);
}

static void test_client_that_never_reads(void **state) {
    (void)state;
    client_that_never_reads("relay");
}

static void test_client_that_never_reads_relay_off(void **state) {
    (void)state;
    client_that_never_reads("off");
}

/* Client A queues 60 compute-heavy batches at once; client B's one batch, sent just after, waits
 * for at most a quota of A's per round (4: two rounds, B's and the one running), not for a round
 * filled with A's (up to 63 requests). A's requests beyond its quota and queue (20) are dropped,
 * which a coordinator never comes near (it has a piece or two in flight per node). */
static void test_fair_service(void **state) {
    (void)state;
    node n = start_node(gguf(), "fair", NULL);
    void *a = dealer(&n, 60000), *b = dealer(&n, 60000);
    enum { AR = 64, AK = 4, AN = 60 };
    static float x[AR * WIDTH];
    static wr_assign as[AR * AK];
    wr_out o;
    wr_out_init(&o);
    mw_err e;
    wr_rx rx;
    wr_rx_init(&rx);
    /* one batch of A alone, twice: what one costs */
    wr_msg m = big_batch(1, AR, AR * AK, x, as);
    assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F32, false}, &e), 0);
    double one = 1e9;
    for (int i = 0; i < 2; i++) {
        double t0 = now_ms();
        assert_int_equal(wr_send(a, NULL, 0, &o, 0, &e), 0);
        assert_int_equal(wr_recv(a, &rx, false, 0, &e), 0);
        if (now_ms() - t0 < one) one = now_ms() - t0;
    }
    wr_rx_free(&rx);
    for (int i = 0; i < AN; i++) {
        m.seq = 100 + (uint64_t)i;
        assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_F32, false}, &e), 0);
        assert_int_equal(wr_send(a, NULL, 0, &o, 0, &e), 0);
    }
    usleep(20000);
    double t0 = now_ms();
    wr_kind k = batch(b, 7, 1);
    double waited = now_ms() - t0;
    wr_out_free(&o);
    zmq_close(a);
    zmq_close(b);
    stop_node(&n);
    fprintf(stderr, "    one batch of A: %.1f ms; B behind %d of them: %.1f ms\n", one, AN, waited);
    assert_int_equal(k, WR_MSG_PARTIAL_BATCH);
    if (waited > 20 * one) fail_msg("B waited %.1f ms, %.1f batches of A", waited, waited / one);
}

/* ---- --recv-bound relay | off -----------------------------------------------------------------
 */

/* Whether process pid listens on the receive relay's unix socket (its path names the pid). */
static bool relay_listening(pid_t pid) {
    char want[64];
    snprintf(want, sizeof want, "/moewire-relay-%d-", (int)pid);
    /* read line by line: a /proc file has no size to read it by */
    FILE *f = fopen("/proc/net/unix", "r");
    assert_non_null(f);
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, want) != NULL;
    fclose(f);
    return found;
}

/* Both modes serve a batch; only relay runs the relay, and off says there is no bound. */
static void test_recv_bound_modes_serve(void **state) {
    (void)state;
    const char *modes[] = {"relay", "off"};
    for (int i = 0; i < 2; i++) {
        const char *extra[] = {"--recv-bound", modes[i], NULL};
        char tag[32];
        snprintf(tag, sizeof tag, "bound-%s", modes[i]);
        node n = start_node(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), tag, extra);
        void *s = dealer(&n, 5000);
        assert_int_equal(batch(s, 1, 3), WR_MSG_PARTIAL_BATCH);
        const bool relayed = relay_listening(n.pid);
        zmq_close(s);
        stop_node(&n);
        char *l = mwt_read_file(n.log, NULL);
        const bool said_off = strstr(l, "--recv-bound off: no memory bound per peer") != NULL;
        free(l);
        if (relayed != (i == 0) || said_off != (i == 1))
            fail_msg("--recv-bound %s: relay listening %d, 'no bound' logged %d", modes[i], relayed,
                     said_off);
    }
}

/* ---- a model file truncated under the node ------------------------------------------------ */

static void test_truncated_model_is_named(void **state) {
    (void)state;
    char model[4200];
    snprintf(model, sizeof model, "%s/truncated.gguf", dir);
    size_t len;
    void *data = mwt_read_file(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), &len);
    assert_non_null(data);
    assert_int_equal(mwt_write_file(model, data, len), 0);
    free(data);
    node n = start_node(model, "truncated", NULL);
    void *s = dealer(&n, 3000);
    assert_int_equal(batch(s, 1, 3), WR_MSG_PARTIAL_BATCH);
    assert_int_equal(truncate(model, 4096), 0);
    assert_int_equal(batch(s, 2, 3), WR_MSG_NONE); /* the node is gone */
    int st = mwt_wait(n.pid, 10000);
    n.pid = 0;
    char *l = mwt_read_file(n.log, NULL);
    char want[4400];
    snprintf(want, sizeof want, "expert-node: %s changed under this process", model);
    if (st != 1 || !strstr(l, want)) fail_msg("exit %d, log:\n%s", st, l);
    free(l);
    zmq_close(s);
    stop_node(&n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unfinished_message_is_cut_off),
        cmocka_unit_test(test_unfinished_message_cut_off_under_load),
        cmocka_unit_test(test_empty_parts_are_cut_off),
        cmocka_unit_test(test_flood_bounded_with_receive_path_starved),
        cmocka_unit_test(test_hundred_parts_cut_off),
        cmocka_unit_test(test_client_that_never_reads),
        cmocka_unit_test(test_client_that_never_reads_relay_off),
        cmocka_unit_test(test_fair_service),
        cmocka_unit_test(test_truncated_model_is_named),
        cmocka_unit_test(test_recv_bound_modes_serve),
    };
    return cmocka_run_group_tests_name("expert node limits", tests, setup, teardown);
}
