/* tests/integration/test_cluster_netns.c — a multi-host cluster on one machine: the coordinator and
 * two expert nodes each in their own network namespace, joined by veth pairs, so every message
 * crosses a real (virtual) link between separate addresses:
 *
 *   coordinator ns  10.231.1.1 ── veth ── 10.231.1.2  node A ns
 *                   10.231.2.1 ── veth ── 10.231.2.2  node B ns
 *
 * Exact mode must give the logits of --experts local bit for bit. Needs root (ip netns); where
 * namespaces cannot be created the test is skipped with a message saying so. */
#include "tests/support/mw_test.h"

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROMPT "1,2,3,4,5,6,7,8,9,10,11,12"

static char ns[3][32], ip_path[64], *dir;
static bool made[3];

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

static void teardown_netns(void) {
    for (int i = 0; i < 3; i++)
        if (made[i]) {
            char *argv[] = {ip_path, "netns", "del", ns[i], NULL};
            mwt_run(argv, NULL, NULL, 10000);
            made[i] = false;
        }
}

/* Creates the namespaces and links; returns 0, or -1 when this machine does not allow it. */
static int setup_netns(void) {
    static const char *cands[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0] && !ip_path[0]; i++)
        if (access(cands[i], X_OK) == 0) snprintf(ip_path, sizeof ip_path, "%s", cands[i]);
    if (!ip_path[0] || geteuid() != 0) return -1;
    static const char *tag[3] = {"c", "a", "b"};
    for (int i = 0; i < 3; i++) {
        snprintf(ns[i], sizeof ns[i], "mw%d%s", (int)getpid(), tag[i]);
        if (ip("netns", "add", ns[i], NULL)) return -1;
        made[i] = true;
        if (ip("-n", ns[i], "link", "set", "lo", "up", NULL)) return -1;
    }
    for (int k = 1; k <= 2; k++) {
        char co_if[16], node_if[16], co_addr[32], node_addr[32];
        snprintf(co_if, sizeof co_if, "mw%d%c", (int)getpid() % 1000000, k == 1 ? 'x' : 'y');
        snprintf(node_if, sizeof node_if, "mw%d%c", (int)getpid() % 1000000, k == 1 ? 'p' : 'q');
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

static pid_t start_node(int k, const char *model, const char *spec, const char *bind) {
    char ready[4300], log[4300];
    snprintf(ready, sizeof ready, "%s/ready-%d", dir, k);
    snprintf(log, sizeof log, "%s/node-%d.log", dir, k);
    char *argv[] = {
        ip_path,      "netns",        "exec",      ns[k],        (char *)mwt_bin("expert-node"),
        "--vindex",   (char *)model,  "--experts", (char *)spec, "--bind",
        (char *)bind, "--ready-file", ready,       NULL};
    pid_t pid = mwt_spawn(argv, log);
    assert_true(pid > 0);
    char *ep = mwt_wait_ready(ready, pid, 60000);
    if (ep) {
        free(ep);
        return pid;
    }
    char *l = mwt_read_file(log, NULL);
    fail_msg("node %d did not start in its namespace:\n%s", k, l ? l : "");
    return -1;
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
    char model_copy[4096];
    snprintf(model_copy, sizeof model_copy, "%s", model);
    pid_t a = start_node(1, model_copy, "0-3:0-3", "tcp://10.231.1.2:5555");
    pid_t b = start_node(2, model_copy, "0-3:4-7", "tcp://10.231.2.2:5555");

    char local[4300], remote[4300];
    snprintf(local, sizeof local, "%s/local.bin", dir);
    snprintf(remote, sizeof remote, "%s/remote.bin", dir);
    char *lo[] = {(char *)mwt_bin("coordinator"),
                  "generate",
                  "--model",
                  model_copy,
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
    char *co[] = {ip_path,
                  "netns",
                  "exec",
                  ns[0],
                  (char *)mwt_bin("coordinator"),
                  "generate",
                  "--model",
                  model_copy,
                  "--tokens",
                  PROMPT,
                  "--max-tokens",
                  "4",
                  "--threads",
                  "1",
                  "--exact",
                  "--nodes",
                  "tcp://10.231.1.2:5555,tcp://10.231.2.2:5555",
                  "--logits-out",
                  remote,
                  NULL};
    char *err = NULL;
    int rc = mwt_run(co, NULL, &err, 300000);
    if (rc != 0) fail_msg("coordinator in its namespace exited %d:\n%s", rc, err);
    if (!strstr(err, "node 0 (tcp://10.231.1.2:5555)") ||
        !strstr(err, "node 1 (tcp://10.231.2.2:5555)"))
        fail_msg("report does not name both hosts:\n%s", err);
    free(err);
    size_t n1, n2;
    float *l1 = mwt_read_file(local, &n1), *l2 = mwt_read_file(remote, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(l1, l2, n1);
    free(l1);
    free(l2);
    kill(a, SIGTERM);
    kill(b, SIGTERM);
    assert_int_equal(mwt_wait(a, 5000), 0);
    assert_int_equal(mwt_wait(b, 5000), 0);
    teardown_netns();
    mwt_rmrf(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_hosts_exact_mode),
    };
    int rc = cmocka_run_group_tests_name("cluster in network namespaces", tests, NULL, NULL);
    teardown_netns();
    return rc;
}
