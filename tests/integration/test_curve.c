/* tests/integration/test_curve.c — CURVE between real processes: `expert-node keygen` and
 * `coordinator keygen` (secret file 0600); a coordinator whose key is on the node's allow-list
 * generates the same tokens as in-process experts, over a pinned node key and over a loopback
 * cluster on CURVE; an unlisted key, a wrong pinned key and no key at all are each refused at
 * once, named; raw clients (a hand-written ZMTP NULL client, a plain libzmq DEALER, a CURVE
 * DEALER with an unlisted key) get no byte back and queue no work (the node served 0 batches);
 * and a node bound beyond loopback without keys refuses to start. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_node.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "tests/support/mwt_zmtp.h"
#include "wire/wr_curve.h"
#include "wire/wr_zmq.h"

#define PROMPT "1,2,3,4,5,6,7,8,9,10,11,12"

static char *dir;
static char model[4096];
static char node_pub[WR_KEY_Z85 + 1], coord_key[4200], stranger_key[4200], allow[4200];
static char local_tokens[512];

static void keygen(const char *prog, const char *prefix, char *pub_out) {
    char *argv[] = {(char *)mwt_bin(prog), "keygen", "--out", (char *)prefix, NULL};
    char *out = NULL, *err = NULL;
    int rc = mwt_run(argv, &out, &err, 30000);
    if (rc != 0) fail_msg("%s keygen: exit %d: %s", prog, rc, err);
    out[strcspn(out, "\n")] = '\0';
    assert_true(wr_key_valid(out));
    if (pub_out) snprintf(pub_out, WR_KEY_Z85 + 1, "%s", out);
    char path[4300];
    snprintf(path, sizeof path, "%s.key", prefix);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    snprintf(path, sizeof path, "%s.pub", prefix);
    char *pub = mwt_read_file(path, NULL);
    assert_non_null(strstr(pub, out));
    free(pub);
    free(out);
    free(err);
}

/* `coordinator generate` with extra options: the exit status, the "tokens:" line in *tokens. */
static int generate(const char *const *extra, char *tokens, size_t cap, char **err_out) {
    char *argv[40] = {(char *)mwt_bin("coordinator"),
                      "generate",
                      "--model",
                      model,
                      "--tokens",
                      PROMPT,
                      "--max-tokens",
                      "6",
                      "--threads",
                      "1"};
    int n = 10;
    for (int i = 0; extra && extra[i]; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    char *out = NULL, *err = NULL;
    int rc = mwt_run(argv, &out, &err, 120000);
    const char *t = out ? strstr(out, "tokens:") : NULL;
    if (tokens) snprintf(tokens, cap, "%.*s", t ? (int)strcspn(t, "\n") : 0, t ? t : "");
    if (err_out)
        *err_out = err;
    else
        free(err);
    free(out);
    return rc;
}

static int setup(void **state) {
    (void)state;
    dir = mwt_tmpdir("curve");
    snprintf(model, sizeof model, "%s", mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"));
    char p[4200];
    snprintf(p, sizeof p, "%s/node", dir);
    keygen("expert-node", p, node_pub);
    snprintf(p, sizeof p, "%s/coordinator", dir);
    char coord_pub[WR_KEY_Z85 + 1];
    keygen("coordinator", p, coord_pub);
    snprintf(coord_key, sizeof coord_key, "%s.key", p);
    snprintf(p, sizeof p, "%s/stranger", dir);
    keygen("coordinator", p, NULL);
    snprintf(stranger_key, sizeof stranger_key, "%s.key", p);
    /* the allow-list: the coordinator's .pub file as it is */
    snprintf(allow, sizeof allow, "%s/coordinator.pub", dir);
    assert_int_equal(generate(NULL, local_tokens, sizeof local_tokens, NULL), 0);
    assert_true(strlen(local_tokens) > 8);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    mwt_rmrf(dir);
    free(dir);
    return 0;
}

typedef mwt_node node;

static node start_node(const char *tag) {
    char key[4300];
    snprintf(key, sizeof key, "%s/node.key", dir);
    const char *args[] = {"--threads", "1", "--curve-secret", key, "--allow", allow, NULL};
    return mwt_node_up(model, dir, tag, args, 30000);
}

/* Stops the node (SIGTERM: it prints its summary) and returns its log. */
static char *stop_node(node *n) {
    assert_int_equal(mwt_node_stop(n, 10000), 0);
    return mwt_read_file(n->log, NULL);
}

static void test_allowed_key_same_tokens(void **state) {
    (void)state;
    node n = start_node("allowed");
    char nodes[512], tokens[512];
    snprintf(nodes, sizeof nodes, "%s#%s", n.endpoint, node_pub);
    const char *extra[] = {"--nodes", nodes, "--curve-secret", coord_key, "--exact", NULL};
    char *err = NULL;
    if (generate(extra, tokens, sizeof tokens, &err) != 0) fail_msg("%s", err);
    free(err);
    assert_string_equal(tokens, local_tokens);
    char *l = stop_node(&n);
    if (!strstr(l, "CURVE, admitting the keys of") || !strstr(l, "CURVE: 1 client(s) admitted"))
        fail_msg("%s", l);
    free(l);
    /* a loopback cluster on CURVE, keys made for the run */
    const char *lo[] = {"--loopback", "2", "--curve", "--exact", NULL};
    if (generate(lo, tokens, sizeof tokens, &err) != 0) fail_msg("%s", err);
    free(err);
    assert_string_equal(tokens, local_tokens);
}

static void test_refusals_are_named(void **state) {
    (void)state;
    node n = start_node("refusals");
    char pinned[512], wrong[512], plain[512];
    snprintf(pinned, sizeof pinned, "%s#%s", n.endpoint, node_pub);
    /* a wrong pinned key: a valid key, not the node's */
    wr_keypair other;
    mw_err e;
    assert_int_equal(wr_keypair_new(&other, &e), 0);
    snprintf(wrong, sizeof wrong, "%s#%s", n.endpoint, other.pub);
    snprintf(plain, sizeof plain, "%s", n.endpoint);
    static const struct {
        const char *nodes_fmt, *key, *needle;
    } cases[3] = {{"pinned", "stranger", "refused this coordinator's CURVE key"},
                  {"wrong", "coordinator", "the CURVE handshake failed"},
                  {"plain", NULL, "does the node require CURVE keys"}};
    for (int i = 0; i < 3; i++) {
        const char *nodes = i == 0 ? pinned : i == 1 ? wrong : plain;
        const char *key = !cases[i].key ? NULL : i == 0 ? stranger_key : coord_key;
        const char *extra[] = {"--nodes", nodes, key ? "--curve-secret" : NULL, key, NULL};
        char *err = NULL;
        long long t0 = 0;
        (void)t0;
        int rc = generate(extra, NULL, 0, &err);
        if (rc != 1 || !strstr(err, "node 0 (") || !strstr(err, cases[i].needle))
            fail_msg("case %d: exit %d: %s", i, rc, err);
        free(err);
    }
    char *l = stop_node(&n);
    if (!strstr(l, "is not on the allow-list") || !strstr(l, "served 0 batches")) fail_msg("%s", l);
    free(l);
}

/* Sends a Hello and an ExpertBatch on s; true when anything came back within 1.5 s. */
static bool answered(void *s) {
    wr_out o;
    wr_out_init(&o);
    mw_err e;
    wr_msg h = {.kind = WR_MSG_HELLO, .seq = 1, .hello = {"raw", ""}};
    assert_int_equal(wr_pack(&o, &h, (wr_codec){WR_F32, false}, &e), 0);
    wr_send(s, NULL, 0, &o, ZMQ_DONTWAIT, &e);
    static float x[256];
    wr_assign a = {0, 1, 1.0f};
    wr_msg b = {.kind = WR_MSG_EXPERT_BATCH,
                .seq = 2,
                .batch = {.layer = 0,
                          .rows = 1,
                          .width = 256,
                          .n_assign = 1,
                          .reply = {WR_F32, false},
                          .x = x,
                          .assign = &a}};
    assert_int_equal(wr_pack(&o, &b, (wr_codec){WR_F32, false}, &e), 0);
    wr_send(s, NULL, 0, &o, ZMQ_DONTWAIT, &e);
    wr_out_free(&o);
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    return zmq_poll(&it, 1, 1500) > 0;
}

static void test_raw_clients_get_nothing(void **state) {
    (void)state;
    node n = start_node("raw");
    /* a hand-written ZMTP client: the NULL handshake meets a CURVE greeting */
    assert_int_equal(mwt_zmtp_connect(n.endpoint, 3000), -1);
    void *ctx = zmq_ctx_new();
    int zero = 0;
    /* a plain libzmq DEALER (queues its messages until a connection that never completes) */
    void *plain = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(plain, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(plain, n.endpoint), 0);
    assert_false(answered(plain));
    /* a CURVE DEALER with the right node key but an unlisted client key */
    void *stranger = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(stranger, ZMQ_LINGER, &zero, sizeof zero);
    wr_keypair k;
    mw_err e;
    assert_int_equal(wr_keypair_read(stranger_key, &k, &e), 0);
    assert_int_equal(wr_curve_client(stranger, &k, node_pub, &e), 0);
    assert_int_equal(zmq_connect(stranger, n.endpoint), 0);
    assert_false(answered(stranger));
    zmq_close(plain);
    zmq_close(stranger);
    zmq_ctx_term(ctx);
    char *l = stop_node(&n);
    if (!strstr(l, "served 0 batches") || !strstr(l, "0 client(s) admitted")) fail_msg("%s", l);
    free(l);
}

static void test_no_keys_beyond_loopback(void **state) {
    (void)state;
    char key[4300];
    snprintf(key, sizeof key, "%s/node.key", dir);
    static const struct {
        const char *bind, *opt, *val, *needle;
    } cases[] = {{"tcp://*:0", NULL, NULL, "refusing to serve on tcp://*:0 without CURVE keys"},
                 {"tcp://0.0.0.0:0", NULL, NULL, "--insecure"},
                 {"tcp://127.0.0.1:*", "--allow", NULL, "--allow needs --curve-secret"},
                 {"tcp://127.0.0.1:*", "--curve-secret", NULL, "--curve-secret needs --allow"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *val = cases[i].opt && !strcmp(cases[i].opt, "--allow") ? allow : key;
        char *argv[] = {(char *)mwt_bin("expert-node"), "--vindex",           model,       "--bind",
                        (char *)cases[i].bind,          (char *)cases[i].opt, (char *)val, NULL};
        char *err = NULL;
        int rc = mwt_run(argv, NULL, &err, 60000);
        if (rc != 1 || !strstr(err, cases[i].needle)) fail_msg("case %zu: exit %d: %s", i, rc, err);
        free(err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowed_key_same_tokens),
        cmocka_unit_test(test_refusals_are_named),
        cmocka_unit_test(test_raw_clients_get_nothing),
        cmocka_unit_test(test_no_keys_beyond_loopback),
    };
    return cmocka_run_group_tests_name("CURVE", tests, setup, teardown);
}
