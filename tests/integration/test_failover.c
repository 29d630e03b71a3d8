/* tests/integration/test_failover.c — a coordinator keeps generating through a lost node, with
 * three expert nodes where every expert of the gpt-oss fixture has two owners (node 0: experts
 * 0-5, node 1: 3-7, node 2: 6-7 and 0-2):
 *  - node 1 killed mid-generation, exact mode, f32 wire: marked down at once, its unanswered
 *    pieces re-sent to the replicas, logits bit-identical to in-process experts;
 *  - node 1 stopped (SIGSTOP: connected, silent), partial mode: marked down by its liveness
 *    channel within 1 s (measured and printed), the same tokens as an undisturbed cluster run;
 *  - node 1 killed and restarted on its address: greeted again and used again (it serves batches
 *    after it is back), logits still bit-identical; restarted serving another model instead:
 * refused by name and never used;
 *  - without a replica (two nodes, disjoint experts): the run ends with status 1 within 2 s, the
 *    error naming the node and the experts nobody serves, the tokens produced before printed;
 *    with --on-missing skip it completes and the report counts the skipped assignments;
 *  - an idle server (no request to notice it) says degraded on /health within 1.5 s of a kill
 *    and ok again once the restarted node is back;
 *  - a --loopback node stopped mid-generation, replicas on: down within 1 s, logits bit-identical;
 *  - a busy --loopback cluster beside spinning processes: no node taken for dead. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_node.h"
#include "tests/support/mwt_http.h"

#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROMPT     "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"
#define PROMPT_LEN 16
#define GEN        "400"
#define TINY_VOCAB 512 /* gpt-oss-tiny's: a logits row is 2 KiB */

static char *dir;
static char gguf[4096], qwen[4096];

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef mwt_node node;

/* The port node n listens on (kept when it is stopped, for a restart there). */
static int port_of(const node *n) {
    const char *c = strrchr(n->endpoint, ':');
    return c ? atoi(c + 1) : 0;
}

static node start_node_at(const char *model, const char *spec, int port, const char *tag) {
    char bind[64];
    snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", port);
    const char *args[] = {"--experts", spec, "--bind", bind, "--threads", "1", NULL};
    return mwt_node_up(model, dir, tag, args, 60000);
}

static void stop_node(node *n) {
    mwt_node_stop(n, 5000);
}

static const char *const specs[3] = {"0-3:0-5", "0-3:3-7", "0-3:6-7,0-3:0-2"};

static void start_three(node n[3], const char *tag) {
    for (int i = 0; i < 3; i++) {
        char t[64];
        snprintf(t, sizeof t, "%s-%d", tag, i);
        n[i] = start_node_at(gguf, specs[i], mwt_free_port(), t);
    }
}

static void nodes_arg(const node *n, int k, char *out, size_t cap) {
    size_t len = 0;
    for (int i = 0; i < k; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", n[i].endpoint);
}

/* Starts `coordinator generate` in the background; output (stdout and stderr) goes to log. */
/* The logits file of generate_bg's latest coordinator (its own --logits-out, or one beside its
 * log): a row per step, so the file's size says how far it has decoded. */
static char bg_logits[4400];

static pid_t generate_bg(const char *const *extra, const char *log) {
    char *argv[40] = {(char *)mwt_bin("coordinator"),
                      "generate",
                      "--model",
                      gguf,
                      "--tokens",
                      PROMPT,
                      "--max-tokens",
                      GEN,
                      "--threads",
                      "1"};
    int k = 10;
    snprintf(bg_logits, sizeof bg_logits, "%s.logits", log);
    bool own = false;
    for (int i = 0; extra[i]; i++) {
        if (!strcmp(extra[i], "--logits-out") && extra[i + 1]) {
            snprintf(bg_logits, sizeof bg_logits, "%s", extra[i + 1]);
            own = true;
        }
        argv[k++] = (char *)extra[i];
    }
    if (!own) {
        argv[k++] = "--logits-out";
        argv[k++] = bg_logits;
    }
    argv[k] = NULL;
    pid_t pid = mwt_spawn(argv, log);
    assert_true(pid > 0);
    return pid;
}

/* Waits until `needle` appears in the file (or the timeout); the ms it took, -1 on timeout. */
static long long wait_for(const char *path, const char *needle, int timeout_ms) {
    long long t0 = now_ms();
    while (now_ms() - t0 < timeout_ms) {
        char *l = mwt_read_file(path, NULL);
        bool found = l && strstr(l, needle);
        free(l);
        if (found) return now_ms() - t0;
        usleep(5000);
    }
    return -1;
}

/* Waits until the coordinator has decoded 20 of its 400 tokens (its logits file holds the prompt's
 * rows and 20 more), so a fault falls mid-generation on a machine of any speed: a fixed 1.5 s let a
 * fast one finish first. */
static void wait_decoding(pid_t co) {
    const char *path = bg_logits;
    const long long want = (long long)(PROMPT_LEN + 20) * TINY_VOCAB * (long long)sizeof(float);
    const long long t0 = now_ms();
    for (;;) {
        struct stat st;
        if (stat(path, &st) == 0 && st.st_size >= want) return;
        if (mwt_wait(co, 1) != -2) fail_msg("the coordinator ended before decoding 20 tokens");
        if (now_ms() - t0 > 120000) fail_msg("the coordinator decoded no 20 tokens in 120 s");
        usleep(2000);
    }
}

static char *tokens_line(const char *log) {
    char *l = mwt_read_file(log, NULL);
    assert_non_null(l);
    char *t = strstr(l, "tokens:");
    if (!t) fail_msg("no tokens in:\n%s", l);
    char *line = strndup(t, strcspn(t, "\n"));
    free(l);
    return line;
}

static int setup(void **state) {
    (void)state;
    dir = mwt_tmpdir("failover");
    snprintf(gguf, sizeof gguf, "%s", mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"));
    snprintf(qwen, sizeof qwen, "%s", mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf"));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    mwt_rmrf(dir);
    free(dir);
    return 0;
}

/* Logits with --experts local (the reference of exact mode), computed once. */
static const char *local_logits(void) {
    static char path[4300];
    if (path[0]) return path;
    snprintf(path, sizeof path, "%s/local.bin", dir);
    char log[4300];
    snprintf(log, sizeof log, "%s/local.log", dir);
    const char *extra[] = {"--numerics", "f32", "--logits-out", path, NULL};
    pid_t co = generate_bg(extra, log);
    assert_int_equal(mwt_wait(co, 600000), 0);
    return path;
}

static void same_file(const char *a, const char *b) {
    size_t na, nb;
    void *x = mwt_read_file(a, &na), *y = mwt_read_file(b, &nb);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(na, nb);
    if (memcmp(x, y, na)) fail_msg("%s and %s differ", a, b);
    free(x);
    free(y);
}

static void test_killed_replica_exact_bit_identical(void **state) {
    (void)state;
    const char *ref = local_logits();
    node n[3];
    start_three(n, "kill");
    char nodes[1024], logits[4300], log[4300];
    nodes_arg(n, 3, nodes, sizeof nodes);
    snprintf(logits, sizeof logits, "%s/kill.bin", dir);
    snprintf(log, sizeof log, "%s/kill-co.log", dir);
    const char *extra[] = {"--nodes", nodes,          "--exact", "--numerics",
                           "f32",     "--logits-out", logits,    NULL};
    pid_t co = generate_bg(extra, log);
    wait_decoding(co);
    kill(n[1].pid, SIGKILL);
    long long dt = wait_for(log, "is down (disconnected)", 10000);
    n[1].pid = 0;
    int st = mwt_wait(co, 600000);
    char *l = mwt_read_file(log, NULL);
    fprintf(stderr, "    killed node marked down after %lld ms\n", dt);
    if (st != 0 || dt < 0 || !strstr(l, "its experts go to their replicas") ||
        !strstr(l, "rescue batch(es) sent to replicas"))
        fail_msg("exit %d:\n%s", st, l);
    free(l);
    same_file(ref, logits);
    for (int i = 0; i < 3; i++) stop_node(&n[i]);
}

static void test_stopped_replica_partial_same_tokens(void **state) {
    (void)state;
    node n[3];
    start_three(n, "stop");
    char nodes[1024], quiet[4300], log[4300];
    nodes_arg(n, 3, nodes, sizeof nodes);
    snprintf(quiet, sizeof quiet, "%s/stop-ref.log", dir);
    snprintf(log, sizeof log, "%s/stop-co.log", dir);
    const char *extra[] = {"--nodes", nodes, NULL};
    pid_t co = generate_bg(extra, quiet); /* undisturbed, same topology */
    assert_int_equal(mwt_wait(co, 600000), 0);
    co = generate_bg(extra, log);
    wait_decoding(co);
    kill(n[1].pid, SIGSTOP);
    long long dt = wait_for(log, "is down (no answer on its liveness channel", 10000);
    int st = mwt_wait(co, 600000);
    fprintf(stderr, "    stopped node marked down after %lld ms (liveness, --down-ms 750)\n", dt);
    if (st != 0 || dt < 0) fail_msg("exit %d:\n%s", st, mwt_read_file(log, NULL));
    if (dt > 1000) fail_msg("a stopped node took %lld ms to be marked down", dt);
    char *a = tokens_line(quiet), *b = tokens_line(log);
    assert_string_equal(a, b);
    free(a);
    free(b);
    for (int i = 0; i < 3; i++) stop_node(&n[i]);
}

/* Node 1 killed, then started again on its address with `model`; returns the coordinator log. */
static char *kill_and_restart(node n[3], const char *model, const char *tag, const char *logits) {
    char nodes[1024], log[4300];
    nodes_arg(n, 3, nodes, sizeof nodes);
    snprintf(log, sizeof log, "%s/%s-co.log", dir, tag);
    const char *extra[] = {"--nodes", nodes,          "--exact", "--numerics",
                           "f32",     "--logits-out", logits,    NULL};
    pid_t co = generate_bg(extra, log);
    wait_decoding(co);
    kill(n[1].pid, SIGKILL);
    mwt_wait(n[1].pid, 5000);
    assert_true(wait_for(log, "is down", 10000) >= 0);
    char t[64];
    snprintf(t, sizeof t, "%s-again", tag);
    /* another model's node serves all of its own experts (qwen3moe-tiny has 3 layers) */
    n[1] = start_node_at(model, model == gguf ? specs[1] : "all", port_of(&n[1]), t);
    int st = mwt_wait(co, 600000);
    char *l = mwt_read_file(log, NULL);
    if (st != 0) fail_msg("exit %d:\n%s", st, l);
    return l;
}

static void test_restarted_node_rejoins(void **state) {
    (void)state;
    const char *ref = local_logits();
    node n[3];
    start_three(n, "rejoin");
    char logits[4300];
    snprintf(logits, sizeof logits, "%s/rejoin.bin", dir);
    char *l = kill_and_restart(n, gguf, "rejoin", logits);
    if (!strstr(l, "node 1 (") || !strstr(l, "is back")) fail_msg("not back:\n%s", l);
    free(l);
    same_file(ref, logits);
    node again = n[1];
    stop_node(&n[1]);
    char *nl = mwt_read_file(again.log, NULL);
    if (strstr(nl, "served 0 batches")) fail_msg("the rejoined node was not used:\n%s", nl);
    free(nl);
    stop_node(&n[0]);
    stop_node(&n[2]);
}

static void test_rejoin_with_another_model_refused(void **state) {
    (void)state;
    node n[3];
    start_three(n, "other");
    char logits[4300];
    snprintf(logits, sizeof logits, "%s/other.bin", dir);
    char *l = kill_and_restart(n, qwen, "other", logits);
    if (!strstr(l, "came back") || !strstr(l, "fingerprint") || strstr(l, "is back"))
        fail_msg("another model's node was not refused by name:\n%s", l);
    free(l);
    node again = n[1];
    stop_node(&n[1]);
    char *nl = mwt_read_file(again.log, NULL);
    if (!strstr(nl, "served 0 batches")) fail_msg("another model's node was used:\n%s", nl);
    free(nl);
    stop_node(&n[0]);
    stop_node(&n[2]);
}

static void test_without_replica(void **state) {
    (void)state;
    for (int skip = 0; skip < 2; skip++) {
        node n[2] = {start_node_at(gguf, "0-3:0-3", mwt_free_port(), "solo-0"),
                     start_node_at(gguf, "0-3:4-7", mwt_free_port(), "solo-1")};
        char nodes[1024], log[4300];
        nodes_arg(n, 2, nodes, sizeof nodes);
        snprintf(log, sizeof log, "%s/solo-%d.log", dir, skip);
        const char *extra[] = {"--nodes", nodes, skip ? "--on-missing" : NULL, "skip", NULL};
        pid_t co = generate_bg(extra, log);
        wait_decoding(co);
        long long t0 = now_ms();
        kill(n[1].pid, SIGKILL);
        n[1].pid = 0;
        int st = mwt_wait(co, skip ? 600000 : 2000);
        long long dt = now_ms() - t0;
        if (st == -2) {
            kill(co, SIGKILL);
            mwt_wait(co, 5000);
        }
        char *l = mwt_read_file(log, NULL);
        if (!skip && (st != 1 || !strstr(l, "have no live owner") || !strstr(l, "node 1 (") ||
                      !strstr(l, "is down (disconnected)") || !strstr(l, "tokens: ")))
            fail_msg("exit %d after %lld ms:\n%s", st, dt, l);
        if (skip && (st != 0 || !strstr(l, "--on-missing skip") ||
                     strstr(l, " 0 expert assignment(s) skipped")))
            fail_msg("--on-missing skip: exit %d:\n%s", st, l);
        free(l);
        stop_node(&n[0]);
    }
}

/* Polls /health until its body holds `needle`; the ms it took, -1 after timeout_ms. */
static long long health_becomes(int port, const char *needle, int timeout_ms, char *last,
                                size_t cap) {
    long long t0 = now_ms();
    while (now_ms() - t0 < timeout_ms) {
        mwt_resp r;
        if (mwt_http_request(port, "GET", "/health", NULL, &r) == 0) {
            snprintf(last, cap, "%d %s", r.status, r.body ? r.body : "");
            bool found = r.body && strstr(r.body, needle);
            mwt_resp_free(&r);
            if (found) return now_ms() - t0;
        }
        usleep(20000);
    }
    return -1;
}

static void test_idle_server_health(void **state) {
    (void)state;
    node n[3];
    start_three(n, "idle");
    char nodes[1024], last[1024];
    nodes_arg(n, 3, nodes, sizeof nodes);
    const char *extra[] = {"--nodes", nodes, "--threads", "1", NULL};
    mwt_server s;
    assert_int_equal(mwt_serve_start(&s, gguf, extra, 300000), 0);
    if (health_becomes(s.port, "\"ok\"", 5000, last, sizeof last) < 0) fail_msg("%s", last);
    long long t0 = now_ms();
    kill(n[1].pid, SIGKILL);
    mwt_wait(n[1].pid, 5000);
    if (health_becomes(s.port, "\"degraded\"", 3000, last, sizeof last) < 0)
        fail_msg("/health of an idle server after a kill: %s", last);
    print_message("idle server: degraded on /health %lld ms after the kill\n", now_ms() - t0);
    assert_true(now_ms() - t0 <= 1500);
    /* two owners per expert: every expert still has a live one */
    if (!strstr(last, "\"experts_reachable\":true") || !strstr(last, "\"nodes_up\":2"))
        fail_msg("%s", last);
    n[1] = start_node_at(gguf, specs[1], port_of(&n[1]), "idle-1-again");
    if (health_becomes(s.port, "\"ok\"", 5000, last, sizeof last) < 0)
        fail_msg("/health of an idle server once the node is back: %s", last);
    char *l = mwt_read_file(s.log, NULL);
    if (!strstr(l, "node 1 (") || !strstr(l, "is back")) fail_msg("not back:\n%s", l);
    free(l);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
    for (int i = 0; i < 3; i++) stop_node(&n[i]);
}

/* /proc/PID/NAME read whole into buf (NULs as spaces; /proc files have no size to ask for). */
static const char *proc_text(pid_t pid, const char *name, char *buf, size_t cap) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    for (size_t i = 0; i < n; i++)
        if (!buf[i]) buf[i] = ' ';
    buf[n] = '\0';
    return buf;
}

/* The child of `parent` whose command line holds `needle`, or 0. */
static pid_t child_with(pid_t parent, const char *needle) {
    DIR *d = opendir("/proc");
    pid_t found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        pid_t pid = (pid_t)atoi(e->d_name);
        char st[1024], cmd[4096];
        const char *paren = pid > 0 ? strrchr(proc_text(pid, "stat", st, sizeof st), ')') : NULL;
        int ppid = 0; /* "pid (comm) state ppid ..." */
        if (paren && sscanf(paren + 1, " %*c %d", &ppid) == 1 && ppid == (int)parent &&
            strstr(proc_text(pid, "cmdline", cmd, sizeof cmd), needle))
            found = pid;
    }
    if (d) closedir(d);
    return found;
}

/* promtool check metrics on a page, when make test provides promtool. */
static void promtool_check(const char *page) {
    const char *promtool = getenv("MW_PROMTOOL");
    if (!promtool || access(promtool, X_OK)) {
        print_message("promtool not given (MW_PROMTOOL): the page's format is not checked\n");
        return;
    }
    char path[4300], cmd[9000];
    snprintf(path, sizeof path, "%s/skip-metrics.txt", dir);
    assert_int_equal(mwt_write_file(path, page, strlen(page)), 0);
    snprintf(cmd, sizeof cmd, "%s check metrics < %s > /dev/null 2>&1", promtool, path);
    if (system(cmd) != 0) fail_msg("promtool check metrics failed on:\n%s", page);
}

/* The value of a metric line starting with name (no labels), -1 when absent. */
static double metric(const char *page, const char *name) {
    char want[160];
    snprintf(want, sizeof want, "\n%s ", name);
    const char *at = strstr(page, want);
    return at ? atof(at + strlen(want)) : -1;
}

/* serve --on-missing skip with a node lost and no replica: a request completes, its usage says
 * how many of its assignments were skipped (usage.moewire.skipped_assignments), /metrics counts
 * them, and a request before the loss reports none. */
static void test_serve_skip_reported_per_request(void **state) {
    (void)state;
    node n[2] = {start_node_at(gguf, "0-3:0-3", mwt_free_port(), "skip-0"),
                 start_node_at(gguf, "0-3:4-7", mwt_free_port(), "skip-1")};
    char nodes[1024];
    nodes_arg(n, 2, nodes, sizeof nodes);
    const char *extra[] = {"--nodes", nodes, "--on-missing", "skip", "--threads", "1", NULL};
    mwt_server s;
    assert_int_equal(mwt_serve_start(&s, gguf, extra, 120000), 0);
    const char *req = "{\"model\":\"model\",\"prompt\":[1,2,3,4,5,6,7,8],\"max_tokens\":8}";
    mwt_resp r;
    assert_int_equal(mwt_http_request(s.port, "POST", "/v1/completions", req, &r), 0);
    if (r.status != 200 || strstr(r.body, "skipped_assignments"))
        fail_msg("before the loss: %d %s", r.status, r.body);
    mwt_resp_free(&r);
    kill(n[1].pid, SIGKILL);
    mwt_wait(n[1].pid, 5000);
    n[1].pid = 0;
    char last[512];
    assert_true(health_becomes(s.port, "unavailable", 10000, last, sizeof last) >= 0);
    assert_int_equal(mwt_http_request(s.port, "POST", "/v1/completions", req, &r), 0);
    if (r.status != 200) fail_msg("with experts skipped: %d %s", r.status, r.body);
    json_t *j = json_loads(r.body, 0, NULL);
    json_t *u = json_object_get(json_object_get(j, "usage"), "moewire");
    const long long skipped = json_integer_value(json_object_get(u, "skipped_assignments"));
    print_message("one request: %lld assignments skipped\n", skipped);
    if (skipped <= 0) fail_msg("no skip in the usage: %s", r.body);
    json_decref(j);
    mwt_resp_free(&r);
    assert_int_equal(mwt_http_request(s.port, "GET", "/metrics", NULL, &r), 0);
    assert_true(metric(r.body, "moewire_skipped_assignments_total") >= (double)skipped);
    assert_true(metric(r.body, "moewire_failover_batches_total") >= 0);
    promtool_check(r.body);
    mwt_resp_free(&r);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
    stop_node(&n[0]);
}

/* A loopback node stopped mid-generation (SIGSTOP: its process hung, its connection up) where
 * every expert has two owners (--replicas 2), exact mode: marked down by its liveness channel
 * within 1 s, the generation goes on through the replicas with logits bit-identical to
 * in-process experts; continued (SIGCONT), it is greeted again and used again. */
static void test_loopback_stopped_node_exact(void **state) {
    (void)state;
    const char *ref = local_logits();
    char log[4300], logits[4300];
    snprintf(log, sizeof log, "%s/lb-stop-co.log", dir);
    snprintf(logits, sizeof logits, "%s/lb-stop.bin", dir);
    const char *extra[] = {"--loopback", "3",   "--replicas",   "2",    "--exact",
                           "--numerics", "f32", "--logits-out", logits, NULL};
    pid_t co = generate_bg(extra, log);
    wait_decoding(co);
    pid_t lb1 = child_with(co, "loopback-1");
    assert_true(lb1 > 0);
    assert_int_equal(kill(lb1, SIGSTOP), 0);
    long long dt = wait_for(log, "is down (no answer on its liveness channel", 10000);
    fprintf(stderr, "    stopped loopback node marked down after %lld ms\n", dt);
    usleep(300000);
    assert_int_equal(kill(lb1, SIGCONT), 0);
    int st = mwt_wait(co, 600000);
    char *l = mwt_read_file(log, NULL);
    if (st != 0 || dt < 0 || dt > 1000 || !strstr(l, "its experts go to their replicas"))
        fail_msg("exit %d, marked down after %lld ms:\n%s", st, dt, l);
    free(l);
    same_file(ref, logits);
}

/* Spinning processes that load every core until stopped. */
static int burn(pid_t *pids, int n) {
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            volatile unsigned long x = 0;
            for (;;) x++;
        }
        if (pids[i] < 0) return i;
    }
    return n;
}

static void unburn(pid_t *pids, int n) {
    for (int i = 0; i < n; i++) {
        kill(pids[i], SIGKILL);
        mwt_wait(pids[i], 5000);
    }
}

/* No false alarms: a loopback cluster whose nodes compute long batches (a 384-token prompt, then
 * decoding) with two spinning processes per core beside them, and whatever else the machine runs,
 * marks no node down at the default --down-ms: the nodes' liveness threads answer while their
 * compute threads, SCHED_BATCH, queue behind everything. */
static void test_loopback_busy_no_false_alarm(void **state) {
    (void)state;
    char prompt[4096];
    size_t len = 0;
    for (int i = 0; i < 384; i++)
        len += (size_t)snprintf(prompt + len, sizeof prompt - len, "%s%d", i ? "," : "",
                                1 + (i * 37) % 500);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nb = cpus > 0 && cpus < 16 ? 2 * (int)cpus : 4;
    pid_t burners[32];
    nb = burn(burners, nb);
    char log[4300];
    snprintf(log, sizeof log, "%s/busy-co.log", dir);
    const char *extra[] = {"--loopback", "3", "--replicas", "2",    "--node-threads", "2",
                           "--threads",  "2", "--tokens",   prompt, "--max-tokens",   "200",
                           NULL};
    const long long t0 = now_ms();
    pid_t co = generate_bg(extra, log);
    int st = mwt_wait(co, 900000);
    const long long took = now_ms() - t0;
    unburn(burners, nb);
    char *l = mwt_read_file(log, NULL);
    fprintf(stderr, "    %lld ms of serving beside %d spinning processes: %s\n", took, nb,
            strstr(l, "is down") ? "a node marked down" : "no node marked down");
    if (st != 0 || strstr(l, "is down")) fail_msg("exit %d:\n%s", st, l);
    free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_server_health),
        cmocka_unit_test(test_killed_replica_exact_bit_identical),
        cmocka_unit_test(test_stopped_replica_partial_same_tokens),
        cmocka_unit_test(test_restarted_node_rejoins),
        cmocka_unit_test(test_rejoin_with_another_model_refused),
        cmocka_unit_test(test_without_replica),
        cmocka_unit_test(test_serve_skip_reported_per_request),
        cmocka_unit_test(test_loopback_stopped_node_exact),
        cmocka_unit_test(test_loopback_busy_no_false_alarm),
    };
    return cmocka_run_group_tests_name("failover", tests, setup, teardown);
}
