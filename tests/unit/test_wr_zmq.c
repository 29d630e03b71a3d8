/* tests/unit/test_wr_zmq.c — messages over real ZeroMQ sockets (inproc and tcp): a DEALER sends
 * an ExpertBatch, the ROUTER sees the routing id and replies; oversized multipart messages are cut
 * and reported; socket options are set. */
#include "tests/support/mw_test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wr_zmq.h"

/* A ROUTER bound to an endpoint and a DEALER connected to it, with 5 s timeouts. */
typedef struct pair {
    void *ctx, *router, *dealer;
} pair;

static pair pair_open(const char *endpoint) {
    pair p = {.ctx = zmq_ctx_new()};
    p.router = zmq_socket(p.ctx, ZMQ_ROUTER), p.dealer = zmq_socket(p.ctx, ZMQ_DEALER);
    mw_err e;
    assert_int_equal(wr_socket_setup(p.router, NULL, &e), 0);
    assert_int_equal(wr_socket_setup(p.dealer, NULL, &e), 0);
    int timeout = 5000;
    zmq_setsockopt(p.router, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(p.dealer, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(p.dealer, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
    assert_int_equal(zmq_bind(p.router, endpoint), 0);
    char ep[256];
    size_t el = sizeof ep;
    zmq_getsockopt(p.router, ZMQ_LAST_ENDPOINT, ep, &el);
    assert_int_equal(zmq_connect(p.dealer, ep), 0);
    return p;
}

static void pair_close(pair *p) {
    zmq_close(p->router);
    zmq_close(p->dealer);
    zmq_ctx_term(p->ctx);
}

enum { R = 3, W = 2881, NA = 6 };

/* The DEALER sends an ExpertBatch (bf16 + LZ4); the ROUTER receives it with the routing id and
 * parses the same rows. */
static void send_batch(pair *p, const float *x, wr_in *in, wr_rx *rx, wr_msg *r) {
    mw_err e;
    wr_assign a[NA];
    for (int j = 0; j < NA; j++) a[j] = (wr_assign){j % R, j, 0.5f};
    wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                .seq = 77,
                .batch = {.layer = 1,
                          .rows = R,
                          .width = W,
                          .n_assign = NA,
                          .reply = {WR_F16, true},
                          .x = x,
                          .assign = a}};
    wr_out o;
    wr_out_init(&o);
    assert_int_equal(wr_pack(&o, &m, (wr_codec){WR_BF16, true}, &e), 0);
    assert_int_equal(wr_send(p->dealer, NULL, 0, &o, 0, &e), 0);
    assert_int_equal(wr_recv(p->router, rx, true, 0, &e), 0);
    assert_true(rx->id_len > 0);
    assert_int_equal(rx->n_parts, 3);
    wr_code code;
    if (wr_parse(in, rx->parts, rx->n_parts, rx->truncated, r, &code, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(r->seq, 77);
    assert_memory_equal(r->batch.x, x, sizeof(float) * R * W); /* small integers survive bf16 */
    assert_int_equal(in->bytes, o.bytes);
    wr_out_free(&o);
}

/* The ROUTER replies on the routing id with the codec the batch asked for; ro keeps the reply. */
static void reply(pair *p, const float *x, wr_in *in, const wr_rx *rx, wr_msg *r, wr_out *ro) {
    mw_err e;
    wr_msg rep = {.kind = WR_MSG_PARTIAL_BATCH,
                  .seq = r->seq,
                  .partial = {1, R, W, WR_MODE_PARTIAL, 10, 20, 0, r->batch.x}};
    assert_int_equal(wr_pack(ro, &rep, r->batch.reply, &e), 0);
    assert_int_equal(wr_send(p->router, rx->id, rx->id_len, ro, ZMQ_DONTWAIT, &e), 0);
    wr_rx drx;
    wr_rx_init(&drx);
    assert_int_equal(wr_recv(p->dealer, &drx, false, 0, &e), 0);
    assert_int_equal(drx.id_len, 0);
    wr_code code;
    if (wr_parse(in, drx.parts, drx.n_parts, drx.truncated, r, &code, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(r->kind, WR_MSG_PARTIAL_BATCH);
    assert_int_equal(r->partial.weight_bytes, 20);
    assert_memory_equal(r->partial.y, x, sizeof(float) * R * W);
    wr_rx_free(&drx);
}

/* Too many parts, an unknown peer, nothing queued, and the linger the setup sets. */
static void edges(pair *p, wr_in *in, wr_rx *rx, const wr_out *ro) {
    mw_err e;
    wr_msg r;
    wr_code code;
    /* A message of 9 parts: the receiver keeps WR_MAX_PARTS, counts the rest, parse refuses. */
    for (int i = 0; i < 9; i++) zmq_send(p->dealer, "abc", 3, i < 8 ? ZMQ_SNDMORE : 0);
    assert_int_equal(wr_recv(p->router, rx, true, 0, &e), 0);
    assert_int_equal(rx->n_parts, WR_MAX_PARTS);
    assert_int_equal(rx->truncated, 9 - WR_MAX_PARTS);
    assert_int_equal(wr_parse(in, rx->parts, rx->n_parts, rx->truncated, &r, &code, &e), -1);

    /* Replying to a peer that does not exist fails at once (ROUTER_MANDATORY), never blocks. */
    assert_int_equal(wr_send(p->router, "nobody", 6, ro, ZMQ_DONTWAIT, &e), -1);
    assert_int_equal(errno, EHOSTUNREACH);

    /* Nothing queued: a non-blocking receive says EAGAIN. */
    assert_int_equal(wr_recv(p->router, rx, true, ZMQ_DONTWAIT, &e), -1);
    assert_int_equal(errno, EAGAIN);

    int linger = -1;
    size_t ll = sizeof linger;
    zmq_getsockopt(p->dealer, ZMQ_LINGER, &linger, &ll);
    assert_int_equal(linger, 0);
}

static void exchange(const char *endpoint) {
    pair p = pair_open(endpoint);
    static float x[R * W];
    for (int i = 0; i < R * W; i++) x[i] = (float)(i % 13) - 6.0f;
    wr_rx rx;
    wr_rx_init(&rx);
    wr_in in;
    wr_in_init(&in, NULL);
    wr_out ro;
    wr_out_init(&ro);
    wr_msg r;
    send_batch(&p, x, &in, &rx, &r);
    reply(&p, x, &in, &rx, &r, &ro);
    edges(&p, &in, &rx, &ro);
    wr_rx_free(&rx);
    wr_in_free(&in);
    wr_out_free(&ro);
    pair_close(&p);
}

static void test_inproc_exchange(void **state) {
    (void)state;
    exchange("inproc://wire-test");
}

static void test_tcp_exchange(void **state) {
    (void)state;
    exchange("tcp://127.0.0.1:*");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inproc_exchange),
        cmocka_unit_test(test_tcp_exchange),
    };
    return cmocka_run_group_tests_name("wire over zmq", tests, NULL, NULL);
}
