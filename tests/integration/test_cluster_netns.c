/* tests/integration/test_cluster_netns.c — a multi-host cluster on one machine: the coordinator and
 * two expert nodes each in their own network namespace, joined by veth pairs, so every message
 * crosses a real (virtual) link between separate addresses:
 *
 *   coordinator ns  10.231.1.1 ── veth ── 10.231.1.2  node A ns
 *                   10.231.2.1 ── veth ── 10.231.2.2  node B ns
 *
 * The nodes, on non-loopback addresses, run CURVE (keys made by `keygen`, the coordinator's on
 * their allow-lists, theirs pinned by the coordinator). Exact mode must give the logits of
 * --experts local bit for bit. Then, with both nodes owning every expert, node B's link goes down
 * mid-generation: the heartbeats mark it down, node A takes its work, the logits stay the same.
 * Needs root (ip netns); where
 * namespaces cannot be created the test is skipped with a message saying so.
 *
 * Whatever way the test ends — passing, failing an assertion, crashing or killed — the nodes, the
 * veth pairs and the namespaces go: the test's teardown removes them, and a guardian process
 * forked at setup removes them when the test process dies before it could. */
#include "tests/support/mw_test.h"

#include <signal.h>
#include <stdarg.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROMPT "1,2,3,4,5,6,7,8,9,10,11,12"

static char ns[3][32], ip_path[64], *dir;
static bool made[3];
static pid_t node_pid[3];      /* [k]: the node in namespace k, 0 when none */
static pid_t guardian;         /* cleans up if this process dies first */
static int guardian_pipe = -1; /* its write end: closing it (or dying) wakes the guardian */

/* Runs `ip ARGS...` (a NULL-terminated list); 0 on success. */
static int ip(const char *first, ...) {
    char *argv[24];
    int n = 0;
    argv[n++] = ip_path;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 23; a = va_arg(ap, const char *)) argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    char *err = NULL;
    int rc = mwt_run(argv, NULL, &err, 10000);
    if (rc != 0) fprintf(stderr, "ip %s ... failed: %s", first, err ? err : "");
    free(err);
    return rc;
}

/* Kills every process inside namespace k (`ip netns pids`), deletes the coordinator's veth ends
 * (each takes its peer with it) and the namespace. Quiet: pieces may be gone already. */
static void remove_netns(int k) {
    char *pids = NULL;
    char *list[] = {ip_path, "netns", "pids", ns[k], NULL};
    if (mwt_run(list, &pids, NULL, 10000) == 0 && pids)
        for (char *p = pids, *end; *p; p = end) {
            long pid = strtol(p, &end, 10);
            if (end == p) break;
            if (pid > 1) kill((pid_t)pid, SIGKILL);
        }
    free(pids);
    if (k == 0)
        for (int i = 1; i <= 2; i++) {
            char co_if[16];
            snprintf(co_if, sizeof co_if, "%.12sv%d", ns[0], i);
            char *del[] = {ip_path, "-n", ns[0], "link", "del", co_if, NULL};
            mwt_run(del, NULL, NULL, 10000);
        }
    char *del[] = {ip_path, "netns", "del", ns[k], NULL};
    mwt_run(del, NULL, NULL, 10000);
}

static void teardown_netns(void) {
    for (int k = 0; k < 3; k++)
        if (node_pid[k] > 0) {
            kill(node_pid[k], SIGKILL);
            mwt_wait(node_pid[k], 5000);
            node_pid[k] = 0;
        }
    for (int k = 2; k >= 0; k--)
        if (made[k]) {
            remove_netns(k);
            made[k] = false;
        }
    if (guardian > 0) { /* nothing left for it: it exits when the pipe closes */
        close(guardian_pipe);
        guardian_pipe = -1;
        waitpid(guardian, NULL, 0);
        guardian = 0;
    }
}

/* A child that waits for this process to end (its pipe reaches end-of-file, whether this process
 * closed it, exited or was killed) and then removes whatever namespaces are still there. */
static int start_guardian(void) {
    int fd[2];
    /* close-on-exec: the nodes this process starts must not hold the guardian's pipe open */
    if (pipe2(fd, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[1]);
        char c;
        while (read(fd[0], &c, 1) > 0) {
        }
        for (int k = 2; k >= 0; k--) {
            char path[64];
            snprintf(path, sizeof path, "/run/netns/%s", ns[k]);
            struct stat st;
            if (stat(path, &st) == 0) remove_netns(k);
        }
        _exit(0);
    }
    close(fd[0]);
    guardian = pid;
    guardian_pipe = fd[1];
    return 0;
}

/* Creates the namespaces and links; returns 0, or -1 when this machine does not allow it. */
static int setup_netns(void) {
    static const char *cands[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0] && !ip_path[0]; i++)
        if (access(cands[i], X_OK) == 0) snprintf(ip_path, sizeof ip_path, "%s", cands[i]);
    if (!ip_path[0] || geteuid() != 0) return -1;
    static const char *tag[3] = {"c", "a", "b"};
    for (int i = 0; i < 3; i++) snprintf(ns[i], sizeof ns[i], "mw%d%s", (int)getpid(), tag[i]);
    if (start_guardian() != 0) return -1;
    for (int i = 0; i < 3; i++) {
        if (ip("netns", "add", ns[i], NULL)) return -1;
        made[i] = true;
        if (ip("-n", ns[i], "link", "set", "lo", "up", NULL)) return -1;
    }
    for (int k = 1; k <= 2; k++) {
        char co_if[16], node_if[16], co_addr[32], node_addr[32];
        snprintf(co_if, sizeof co_if, "%.12sv%d", ns[0], k);
        snprintf(node_if, sizeof node_if, "%.12sv%d", ns[k], k);
        snprintf(co_addr, sizeof co_addr, "10.231.%d.1/24", k);
        snprintf(node_addr, sizeof node_addr, "10.231.%d.2/24", k);
        /* the pair is made in the coordinator's namespace with its peer end in the node's */
        if (ip("-n", ns[0], "link", "add", co_if, "type", "veth", "peer", "name", node_if, "netns",
               ns[k], NULL) ||
            ip("-n", ns[0], "addr", "add", co_addr, "dev", co_if, NULL) ||
            ip("-n", ns[k], "addr", "add", node_addr, "dev", node_if, NULL) ||
            ip("-n", ns[0], "link", "set", co_if, "up", NULL) ||
            ip("-n", ns[k], "link", "set", node_if, "up", NULL))
            return -1;
    }
    return 0;
}

/* `PROG keygen --out dir/NAME`; the public key it prints goes to pub. */
static void keygen(const char *prog, const char *name, char pub[64]) {
    char prefix[4300];
    snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
    char *argv[] = {(char *)mwt_bin(prog), "keygen", "--out", prefix, NULL};
    char *out = NULL;
    assert_int_equal(mwt_run(argv, &out, NULL, 30000), 0);
    snprintf(pub, 64, "%.*s", (int)strcspn(out, "\n"), out);
    free(out);
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Node k in its namespace, on a non-loopback address: with its CURVE key pair (dir/nodeK.key),
 * admitting the coordinator's key (dir/coordinator.pub). */
static pid_t start_node(int k, const char *model, const char *spec, const char *bind) {
    char ready[4300], log[4300], key[4300], allow[4300];
    snprintf(ready, sizeof ready, "%s/ready-%d", dir, k);
    snprintf(log, sizeof log, "%s/node-%d.log", dir, k);
    snprintf(key, sizeof key, "%s/node%d.key", dir, k);
    snprintf(allow, sizeof allow, "%s/coordinator.pub", dir);
    unlink(ready);
    char *argv[] = {ip_path,
                    "netns",
                    "exec",
                    ns[k],
                    (char *)mwt_bin("expert-node"),
                    "--vindex",
                    (char *)model,
                    "--experts",
                    (char *)spec,
                    "--bind",
                    (char *)bind,
                    "--ready-file",
                    ready,
                    "--curve-secret",
                    key,
                    "--allow",
                    allow,
                    NULL};
    pid_t pid = mwt_spawn(argv, log);
    assert_true(pid > 0);
    node_pid[k] = pid;
    char *ep = mwt_wait_ready(ready, pid, 60000);
    if (ep) {
        free(ep);
        return pid;
    }
    char *l = mwt_read_file(log, NULL);
    fail_msg("node %d did not start in its namespace:\n%s", k, l ? l : "");
    return -1;
}

/* The two logits files hold the same bits. */
static void same_logits(const char *local, const char *remote) {
    size_t n1, n2;
    float *l1 = mwt_read_file(local, &n1), *l2 = mwt_read_file(remote, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(l1, l2, n1);
    free(l1);
    free(l2);
}

/* A network drop: both nodes own every expert; node B's link goes down mid-generation. Its
 * connection falls silent (no reset, no FIN): the heartbeats mark it down, its unanswered
 * work goes to node A, and the logits stay bit-identical. */
static void network_drop(const char *model, char **lo, char **co, char *nodes, size_t nodes_cap,
                         const char *pub1, const char *pub2) {
    start_node(1, model, "all", "tcp://10.231.1.2:5556");
    start_node(2, model, "all", "tcp://10.231.2.2:5556");
    snprintf(nodes, nodes_cap, "tcp://10.231.1.2:5556#%s,tcp://10.231.2.2:5556#%s", pub1, pub2);
    /* long enough to be still decoding when the link goes down 1.5 s in, on a loaded machine
     * too (300 tokens could finish first) */
    lo[7] = "1500";
    co[11] = "1500";
    assert_int_equal(mwt_run(lo, NULL, NULL, 300000), 0);
    char log[4300];
    snprintf(log, sizeof log, "%s/drop.log", dir);
    pid_t c = mwt_spawn(co, log);
    usleep(1500000);
    char co_if[16];
    snprintf(co_if, sizeof co_if, "%.12sv%d", ns[0], 2);
    assert_int_equal(ip("-n", ns[0], "link", "set", co_if, "down", NULL), 0);
    long long t0 = now_ms(), seen = -1;
    while (seen < 0 && now_ms() - t0 < 10000) {
        char *l = mwt_read_file(log, NULL);
        if (l && strstr(l, "node 1 (tcp://10.231.2.2:5556) is down")) seen = now_ms() - t0;
        free(l);
        usleep(5000);
    }
    int st = mwt_wait(c, 300000);
    char *out = mwt_read_file(log, NULL);
    fprintf(stderr, "    node cut off the network marked down after %lld ms\n", seen);
    if (st != 0 || seen < 0) fail_msg("exit %d:\n%s", st, out);
    free(out);
}

static void test_two_hosts_exact_mode(void **state) {
    (void)state;
    if (setup_netns() != 0) {
        teardown_netns();
        fprintf(stderr, "SKIPPED: network namespaces are not available here (needs root and "
                        "'ip netns'); the multi-host test did not run\n");
        skip();
    }
    dir = mwt_tmpdir("netns");
    const char *model = mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf");
    char pub1[64], pub2[64], coord_pub[64];
    keygen("expert-node", "node1", pub1);
    keygen("expert-node", "node2", pub2);
    keygen("coordinator", "coordinator", coord_pub);
    char coord_key[4300], nodes[512];
    snprintf(coord_key, sizeof coord_key, "%s/coordinator.key", dir);
    snprintf(nodes, sizeof nodes, "tcp://10.231.1.2:5555#%s,tcp://10.231.2.2:5555#%s", pub1, pub2);
    pid_t a = start_node(1, model, "0-3:0-3", "tcp://10.231.1.2:5555");
    pid_t b = start_node(2, model, "0-3:4-7", "tcp://10.231.2.2:5555");

    char local[4300], remote[4300];
    snprintf(local, sizeof local, "%s/local.bin", dir);
    snprintf(remote, sizeof remote, "%s/remote.bin", dir);
    char *lo[] = {(char *)mwt_bin("coordinator"),
                  "generate",
                  "--model",
                  (char *)model,
                  "--tokens",
                  PROMPT,
                  "--max-tokens",
                  "4",
                  "--threads",
                  "1",
                  "--logits-out",
                  local,
                  NULL};
    assert_int_equal(mwt_run(lo, NULL, NULL, 300000), 0);
    char *co[] = {
        ip_path,        "netns",   "exec",           ns[0],      (char *)mwt_bin("coordinator"),
        "generate",     "--model", (char *)model,    "--tokens", PROMPT,
        "--max-tokens", "4",       "--threads",      "1",        "--exact",
        "--nodes",      nodes,     "--curve-secret", coord_key,  "--logits-out",
        remote,         NULL};
    char *err = NULL;
    int rc = mwt_run(co, NULL, &err, 300000);
    if (rc != 0) fail_msg("coordinator in its namespace exited %d:\n%s", rc, err);
    if (!strstr(err, "node 0 (tcp://10.231.1.2:5555)") || strstr(err, pub1) ||
        !strstr(err, "node 1 (tcp://10.231.2.2:5555)"))
        fail_msg("report does not name both hosts:\n%s", err);
    free(err);
    same_logits(local, remote);
    kill(a, SIGTERM);
    kill(b, SIGTERM);
    assert_int_equal(mwt_wait(a, 5000), 0);
    assert_int_equal(mwt_wait(b, 5000), 0);
    node_pid[1] = node_pid[2] = 0;

    network_drop(model, lo, co, nodes, sizeof nodes, pub1, pub2);
    same_logits(local, remote);
}

/* Whether a live process (not a zombie) runs `sleep ARG`. */
static bool sleeping(const char *arg) {
    char want[64];
    int wn = snprintf(want, sizeof want, "sleep%c%s", 0, arg) + 1;
    bool found = false;
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        size_t len = 0;
        char *c = mwt_read_file(path, &len);
        if (c && len == (size_t)wn && !memcmp(c, want, len)) {
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            char *st = mwt_read_file(path, NULL);
            const char *paren = st ? strrchr(st, ')') : NULL;
            found = paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
            free(st);
        }
        free(c);
    }
    if (d) closedir(d);
    return found;
}

/* Whether namespace name exists. */
static bool netns_exists(const char *name) {
    char path[64];
    snprintf(path, sizeof path, "/run/netns/%s", name);
    struct stat st;
    return stat(path, &st) == 0;
}

/* A test process that dies mid-test (here: abort() with a node running in its namespace) leaves
 * nothing behind: its guardian kills the node and removes the links and namespaces. */
static void test_a_crash_leaves_no_namespaces(void **state) {
    (void)state;
    int fd[2];
    assert_int_equal(pipe2(fd, O_CLOEXEC), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) { /* the crashing test */
        close(fd[0]);
        signal(SIGABRT, SIG_DFL);
        if (setup_netns() != 0) _exit(3);
        char arg[32]; /* a duration no other process sleeps, to find it by */
        snprintf(arg, sizeof arg, "600.%d", (int)getpid());
        char *argv[] = {ip_path, "netns", "exec", ns[1], "sleep", arg, NULL};
        pid_t sleeper = mwt_spawn(argv, "/dev/null");
        char line[128];
        int n = snprintf(line, sizeof line, "%s %s %s %s\n", ns[0], ns[1], ns[2], arg);
        if (sleeper <= 0 || write(fd[1], line, (size_t)n) != n) _exit(4);
        usleep(200000); /* the sleeper is in its namespace */
        abort();
    }
    close(fd[1]);
    char line[128] = "";
    ssize_t got = read(fd[0], line, sizeof line - 1);
    close(fd[0]);
    int st;
    assert_int_equal(waitpid(child, &st, 0), child);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
        fprintf(stderr, "SKIPPED: network namespaces are not available here\n");
        skip();
    }
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    assert_true(got > 0);
    char names[3][32];
    char arg[32];
    line[got] = 0;
    assert_int_equal(sscanf(line, "%31s %31s %31s %31s", names[0], names[1], names[2], arg), 4);
    bool gone = false;
    for (int t = 0; t < 200 && !gone; t++) { /* the guardian works after the crash: up to 10 s */
        gone = !netns_exists(names[0]) && !netns_exists(names[1]) && !netns_exists(names[2]) &&
               !sleeping(arg);
        if (!gone) usleep(50000);
    }
    if (!gone)
        fail_msg("after the crash: namespaces %s %s %s %s, the process in one %s", names[0],
                 netns_exists(names[0]) ? "remain" : "gone", names[1], names[2],
                 sleeping(arg) ? "still runs" : "is gone");
}

static int teardown(void **state) {
    (void)state;
    teardown_netns();
    if (dir) {
        mwt_rmrf(dir);
        free(dir);
        dir = NULL;
    }
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_two_hosts_exact_mode, teardown),
        cmocka_unit_test(test_a_crash_leaves_no_namespaces),
    };
    int rc = cmocka_run_group_tests_name("cluster in network namespaces", tests, NULL, NULL);
    teardown_netns();
    return rc;
}
