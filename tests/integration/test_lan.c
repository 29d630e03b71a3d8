/* tests/integration/test_lan.c — the emulated LAN (tests/lan/lan.sh): eight expert nodes, each in
 * a network namespace of its own behind a bridge, every link with the default delay and rate;
 * generate from a ninth namespace in exact mode gives the same logits, bit for bit, as the
 * in-process experts. Then the LAN is taken down and nothing of it remains. Skipped, saying why,
 * where namespaces cannot be made (no root, no ip/tc). */
#include <libgen.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/mw_test.h"

#define PROMPT "1,2,3,4,5,6,7,8,9,10,11,12"

static char name[32];
static char *dir;

static const char *lan_sh(void) {
    return mwt_repo_path("tests/lan/lan.sh");
}

static void lan_down(void) {
    if (!name[0]) return;
    char *argv[] = {(char *)lan_sh(), "down", name, NULL};
    mwt_run(argv, NULL, NULL, 60000);
}

static bool netns_left(void) {
    char *argv[] = {"/bin/sh", "-c", "ip netns list | awk '{print $1}'", NULL};
    char *out = NULL;
    mwt_run(argv, &out, NULL, 10000);
    char pre[40];
    snprintf(pre, sizeof pre, "%s-", name);
    bool left = out && strstr(out, pre);
    free(out);
    return left;
}

static void same_file(const char *a, const char *b) {
    size_t n1, n2;
    void *x = mwt_read_file(a, &n1), *y = mwt_read_file(b, &n2);
    assert_non_null(x);
    assert_non_null(y);
    assert_true(n1 > 0);
    assert_int_equal(n1, n2);
    assert_memory_equal(x, y, n1);
    free(x);
    free(y);
}

static void test_eight_nodes_exact(void **state) {
    (void)state;
    char *check[] = {(char *)lan_sh(), "check", NULL}, *why = NULL;
    if (mwt_run(check, &why, NULL, 30000) != 0) {
        fprintf(stderr, "SKIPPED: the emulated LAN cannot run here: %s", why ? why : "?\n");
        free(why);
        skip();
    }
    free(why);
    snprintf(name, sizeof name, "mwt%d", (int)getpid());
    dir = mwt_tmpdir("lan");
    const char *model = mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf");
    char bindir[4096], owner[16];
    snprintf(bindir, sizeof bindir, "%s", mwt_bin("expert-node"));
    snprintf(owner, sizeof owner, "%d", (int)getpid());
    /* each node one expert of every layer: every MoE layer's rows reach all eight */
    char *up[] = {(char *)lan_sh(),
                  "up",
                  name,
                  "--nodes",
                  "8",
                  "--model",
                  (char *)model,
                  "--bin",
                  dirname(bindir),
                  "--owner",
                  owner,
                  "--specs",
                  "0-3:0 0-3:1 0-3:2 0-3:3 0-3:4 0-3:5 0-3:6 0-3:7",
                  NULL};
    char *out = NULL, *err = NULL;
    if (mwt_run(up, &out, &err, 600000) != 0) fail_msg("lan.sh up:\n%s%s", out, err);
    const char *eps = strstr(out, "nodes: ");
    assert_non_null(eps);
    char nodes[1024];
    snprintf(nodes, sizeof nodes, "%.*s", (int)strcspn(eps + 7, "\n"), eps + 7);
    fprintf(stderr, "    %.*s\n", (int)strcspn(out, "\n"), out);
    free(out);
    free(err);

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
                  "6",
                  "--logits-out",
                  local,
                  NULL};
    assert_int_equal(mwt_run(lo, NULL, NULL, 300000), 0);
    char *co[] = {
        (char *)lan_sh(), "exec",    name,          "c0",       (char *)mwt_bin("coordinator"),
        "generate",       "--model", (char *)model, "--tokens", PROMPT,
        "--max-tokens",   "6",       "--exact",     "--nodes",  nodes,
        "--logits-out",   remote,    NULL};
    err = NULL;
    int rc = mwt_run(co, NULL, &err, 300000);
    if (rc != 0) fail_msg("coordinator in the LAN exited %d:\n%s", rc, err);
    for (int k = 0; k < 8; k++) {
        char want[64];
        snprintf(want, sizeof want, "node %d (tcp://10.77.0.%d:5555)", k, 11 + k);
        if (!strstr(err, want)) fail_msg("the report does not name %s:\n%s", want, err);
    }
    free(err);
    same_file(local, remote);

    lan_down();
    assert_false(netns_left());
}

static int teardown(void **state) {
    (void)state;
    lan_down();
    if (dir) {
        mwt_rmrf(dir);
        free(dir);
        dir = NULL;
    }
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_eight_nodes_exact, teardown),
    };
    return cmocka_run_group_tests_name("the emulated LAN", tests, NULL, NULL);
}
