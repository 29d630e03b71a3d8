/* tests/unit/test_wr_curve.c — CURVE keys and allow-lists (wire/wr_curve.h): a key pair written
 * and read back (secret file 0600, never overwritten), public halves derived and checked, allow
 * lists of bare keys and concatenated .pub files with comments (and '#' inside a key), malformed
 * keys refused by line; the ZAP handler admitting a listed key and refusing others; which
 * endpoints count as this machine's. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "wire/wr_curve.h"

static void test_keypair_files(void **state) {
    const char *dir = *state;
    char prefix[4200], key[4300], pub[4300];
    snprintf(prefix, sizeof prefix, "%s/n0", dir);
    snprintf(key, sizeof key, "%s.key", prefix);
    snprintf(pub, sizeof pub, "%s.pub", prefix);
    wr_keypair k, back;
    mw_err e;
    assert_int_equal(wr_keypair_new(&k, &e), 0);
    assert_true(wr_key_valid(k.pub) && wr_key_valid(k.sec));
    assert_int_equal(wr_keypair_write(&k, prefix, &e), 0);
    struct stat st;
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(wr_keypair_read(key, &back, &e), 0);
    assert_string_equal(back.pub, k.pub);
    assert_string_equal(back.sec, k.sec);
    /* never replaced */
    assert_int_equal(wr_keypair_write(&k, prefix, &e), -1);
    assert_non_null(strstr(e.msg, "cannot create"));
    /* a .pub file is no key pair */
    assert_int_equal(wr_keypair_read(pub, &back, &e), -1);
    assert_non_null(strstr(e.msg, "no secret-key"));
    /* a public-key line that does not belong to the secret */
    wr_keypair other;
    assert_int_equal(wr_keypair_new(&other, &e), 0);
    char text[256], bad[4300];
    snprintf(bad, sizeof bad, "%s/mixed.key", dir);
    snprintf(text, sizeof text, "public-key = \"%s\"\nsecret-key = \"%s\"\n", other.pub, k.sec);
    assert_int_equal(mwt_write_file(bad, text, strlen(text)), 0);
    assert_int_equal(wr_keypair_read(bad, &back, &e), -1);
    assert_non_null(strstr(e.msg, "does not belong"));
    snprintf(text, sizeof text, "secret-key = \"%.39s\"\n", k.sec);
    assert_int_equal(mwt_write_file(bad, text, strlen(text)), 0);
    assert_int_equal(wr_keypair_read(bad, &back, &e), -1);
    assert_non_null(strstr(e.msg, ":1: not a 40-character Z85 key"));
}

static void test_allow_list(void **state) {
    const char *dir = *state;
    char path[4200], text[1024];
    snprintf(path, sizeof path, "%s/allow", dir);
    /* a key with '#' in it (Z85 has it), a bare key, a concatenated .pub, comments, blanks */
    const char *k1 = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7",
               *k2 = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
    char k3[WR_KEY_Z85 + 1], sec[WR_KEY_Z85 + 1];
    for (int i = 0; i < 1000; i++) { /* a key with '#' and '=' in it (about one in six) */
        assert_int_equal(zmq_curve_keypair(k3, sec), 0);
        if (strchr(k3 + 1, '#') && strchr(k3, '=')) break;
    }
    assert_true(strchr(k3 + 1, '#') && strchr(k3, '='));
    snprintf(text, sizeof text,
             "# coordinators of the cluster\n%s\n\n# moewire CURVE public key\npublic-key = \"%s\""
             "   # the second\n  %s  \n",
             k1, k2, k3);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
    wr_allow a;
    mw_err e;
    if (wr_allow_read(path, &a, &e)) fail_msg("%s", e.msg);
    assert_int_equal(a.n, 3);
    assert_true(wr_allow_has(&a, k1) && wr_allow_has(&a, k2) && wr_allow_has(&a, k3));
    assert_false(wr_allow_has(&a, sec));
    wr_allow_free(&a);
    snprintf(text, sizeof text, "%s\nnot-a-key\n", k1);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
    assert_int_equal(wr_allow_read(path, &a, &e), -1);
    assert_non_null(strstr(e.msg, ":2: not a 40-character Z85 public key"));
    assert_int_equal(mwt_write_file(path, "# nobody\n", 9), 0);
    assert_int_equal(wr_allow_read(path, &a, &e), -1);
    assert_non_null(strstr(e.msg, "no public keys"));
}

/* A CURVE server in this process behind the ZAP handler: the listed client gets a Pong-like
 * echo, an unlisted one and a plain one get nothing. */
static int exchange(void *ctx, const char *ep, const wr_keypair *client, const char *server_pub) {
    void *c = zmq_socket(ctx, ZMQ_DEALER);
    int t = 700, zero = 0;
    zmq_setsockopt(c, ZMQ_RCVTIMEO, &t, sizeof t);
    zmq_setsockopt(c, ZMQ_LINGER, &zero, sizeof zero);
    mw_err e;
    if (client) assert_int_equal(wr_curve_client(c, client, server_pub, &e), 0);
    assert_int_equal(zmq_connect(c, ep), 0);
    zmq_send(c, "hi", 2, ZMQ_DONTWAIT);
    char buf[8];
    int n = zmq_recv(c, buf, sizeof buf, 0);
    zmq_close(c);
    return n;
}

static void test_zap_admits_only_listed_keys(void **state) {
    const char *dir = *state;
    wr_keypair server, ok, stranger;
    mw_err e;
    assert_int_equal(
        wr_keypair_new(&server, &e) || wr_keypair_new(&ok, &e) || wr_keypair_new(&stranger, &e), 0);
    char path[4200], text[128];
    snprintf(path, sizeof path, "%s/allow-zap", dir);
    snprintf(text, sizeof text, "%s\n", ok.pub);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
    wr_allow a;
    assert_int_equal(wr_allow_read(path, &a, &e), 0);
    void *ctx = zmq_ctx_new();
    wr_zap *zap;
    assert_int_equal(wr_zap_start(ctx, &a, "test", &zap, &e), 0);
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(wr_curve_server(s, &server, &e), 0);
    assert_int_equal(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len);
    /* the server echoes whatever reaches it, from its own thread of control: poll here */
    void *cli = zmq_socket(ctx, ZMQ_DEALER);
    int t = 3000;
    zmq_setsockopt(cli, ZMQ_RCVTIMEO, &t, sizeof t);
    zmq_setsockopt(cli, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(wr_curve_client(cli, &ok, server.pub, &e), 0);
    assert_int_equal(zmq_connect(cli, ep), 0);
    assert_int_equal(zmq_send(cli, "hi", 2, 0), 2);
    char id[256], buf[8];
    int idn = zmq_recv(s, id, sizeof id, 0);
    assert_true(idn > 0);
    assert_int_equal(zmq_recv(s, buf, sizeof buf, 0), 2);
    zmq_send(s, id, (size_t)idn, ZMQ_SNDMORE);
    zmq_send(s, "ok", 2, 0);
    assert_int_equal(zmq_recv(cli, buf, sizeof buf, 0), 2);
    zmq_close(cli);
    /* strangers: nothing reaches the server */
    assert_int_equal(exchange(ctx, ep, &stranger, server.pub), -1);
    assert_int_equal(exchange(ctx, ep, NULL, NULL), -1);
    int rcv = 200;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &rcv, sizeof rcv);
    assert_int_equal(zmq_recv(s, id, sizeof id, 0), -1);
    unsigned long admitted, refused;
    wr_zap_counts(zap, &admitted, &refused);
    assert_int_equal(admitted, 1);
    assert_true(refused >= 1);
    zmq_close(s);
    wr_zap_stop(zap);
    zmq_ctx_term(ctx);
    wr_allow_free(&a);
}

static void test_local_endpoints(void **state) {
    (void)state;
    static const char *const local[] = {"tcp://127.0.0.1:*", "tcp://127.3.4.5:5555",
                                        "tcp://localhost:1", "tcp://[::1]:5555",
                                        "tcp://lo:5555",     "ipc:///tmp/x",
                                        "inproc://n",        "tcp://127.0.0.1;10.0.0.2:5"};
    static const char *const remote[] = {
        "tcp://*:5555",    "tcp://0.0.0.0:5555", "tcp://10.0.0.2:5555",    "tcp://eth0:5555",
        "tcp://[::]:5555", "tcp://128.0.0.1:1",  "tcp://127.0.0.1.evil:1", "udp://127.0.0.1:1"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        if (!wr_endpoint_is_local(local[i])) fail_msg("%s is this machine's", local[i]);
    for (size_t i = 0; i < sizeof remote / sizeof remote[0]; i++)
        if (wr_endpoint_is_local(remote[i])) fail_msg("%s is not only this machine's", remote[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keypair_files),
        cmocka_unit_test(test_allow_list),
        cmocka_unit_test(test_zap_admits_only_listed_keys),
        cmocka_unit_test(test_local_endpoints),
    };
    return cmocka_run_group_tests_name("wire: CURVE", tests, mwt_tmp_setup, mwt_tmp_teardown);
}
