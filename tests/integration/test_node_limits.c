/* tests/integration/test_node_limits.c — an expert node under abuse, each fault of issue 16's
 * "Limits" with its own case, against a real expert-node process (the gpt-oss fixture):
 *  - the model file truncated under a serving node: one line naming the file, exit status 1, not
 *    a death by SIGBUS. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire/wr_zmq.h"

typedef struct node {
    pid_t pid;
    char endpoint[256];
    char log[4200];
} node;

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
    node n = {0};
    char ready[4200];
    snprintf(ready, sizeof ready, "%s/%s.ready", dir, tag);
    snprintf(n.log, sizeof n.log, "%s/%s.log", dir, tag);
    char *argv[32] = {(char *)mwt_bin("expert-node"),
                      "--vindex",
                      (char *)model,
                      "--bind",
                      "tcp://127.0.0.1:*",
                      "--ready-file",
                      ready,
                      "--threads",
                      "1"};
    int k = 9;
    for (int i = 0; extra && extra[i] && k < 31; i++) argv[k++] = (char *)extra[i];
    argv[k] = NULL;
    n.pid = mwt_spawn(argv, n.log);
    assert_true(n.pid > 0);
    char *ep = mwt_wait_ready(ready, n.pid, 30000);
    if (!ep) {
        char *l = mwt_read_file(n.log, NULL);
        fail_msg("expert-node %s did not become ready:\n%s", tag, l ? l : "");
    }
    snprintf(n.endpoint, sizeof n.endpoint, "%s", ep);
    free(ep);
    return n;
}

static void stop_node(node *n) {
    if (n->pid > 0) {
        kill(n->pid, SIGKILL);
        mwt_wait(n->pid, 5000);
    }
    n->pid = 0;
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
        cmocka_unit_test(test_truncated_model_is_named),
    };
    return cmocka_run_group_tests_name("expert node limits", tests, setup, teardown);
}
