/* tests/unit/test_en_group.c — several coordinators on one expert node (expert-node/en_serve.c's
 * group window and per-client queues), with the node serving on a thread of this process and each
 * coordinator a DEALER socket: rows of two clients for the same layer within the window run as one
 * grouped execution (one read of the experts' weights, counted); a client that does not come holds
 * a round for the window at most (measured), and once it has let a window pass it holds none
 * until it sends again, so a dead coordinator does not slow the others' every token; a client
 * flooding the node gets its quota per round and cannot push another client's request behind its
 * backlog. */
#include "tests/support/mw_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "expert-node/en_client.h"
#include "expert-node/en_internal.h"
#include "expert-node/en_node.h"
#include "model/md_model.h"
#include "util/mw_time.h"
#include "vindex/vx_source.h"
#include "wire/wr_msg.h"
#include "wire/wr_zmq.h"

#define MAX_CLIENTS 3
#define ROWS        4

typedef struct client {
    void *sock;
    wr_out out;
    wr_in in;
    wr_rx rx;
    uint64_t seq;
} client;

static en_node *node;
static pthread_t serve_thread;
static void *zctx;
static client cl[MAX_CLIENTS];
static int64_t width;
static float *x;
static wr_assign assign[ROWS * 2];

static void *serve_main(void *arg) {
    (void)arg;
    mw_err err;
    if (en_node_serve(node, &err)) fprintf(stderr, "en_node_serve: %s\n", err.msg);
    return NULL;
}

/* A node owning experts 0-3 of layers 0-3 with this group window, and n connected clients. */
static void start(int window_us, int n) {
    char path[4096];
    snprintf(path, sizeof path, "%s", mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"));
    en_opts o = {.vindex = path,
                 .experts = "0-3:0-3",
                 .bind = "tcp://127.0.0.1:*",
                 .threads = 1,
                 .numerics = -1,
                 .poll_us = -1,
                 .group_window_us = window_us,
                 .quiet = true};
    mw_err err;
    if (en_node_open(&o, &node, &err)) fail_msg("en_node_open: %s", err.msg);
    width = node->width;
    x = malloc((size_t)(ROWS * width) * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < ROWS * width; i++) x[i] = (float)((i * 37) % 101) / 41.0f - 1.2f;
    for (int i = 0; i < ROWS * 2; i++) assign[i] = (wr_assign){i / 2, i % 2 ? 3 : 1, 0.5f};
    assert_int_equal(pthread_create(&serve_thread, NULL, serve_main, NULL), 0);
    zctx = zmq_ctx_new();
    for (int i = 0; i < n; i++) {
        client *c = &cl[i];
        *c = (client){.sock = zmq_socket(zctx, ZMQ_DEALER)};
        assert_non_null(c->sock);
        assert_int_equal(wr_socket_setup(c->sock, NULL, NULL), 0);
        assert_int_equal(zmq_connect(c->sock, en_node_endpoint(node)), 0);
        int t = 20000;
        zmq_setsockopt(c->sock, ZMQ_RCVTIMEO, &t, sizeof t);
        wr_out_init(&c->out);
        wr_in_init(&c->in, NULL);
        wr_rx_init(&c->rx);
    }
}

static void close_client(client *c) {
    if (!c->sock) return;
    wr_rx_free(&c->rx);
    wr_in_free(&c->in);
    wr_out_free(&c->out);
    int zero = 0;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(c->sock);
    c->sock = NULL;
}

/* Stops the node; *layer gets its counters of that layer (read once its loop has ended). */
static void stop(int layer_of_interest, wr_counters *layer) {
    en_node_stop(node);
    pthread_join(serve_thread, NULL);
    if (layer) *layer = wr_stats_sum(&node->stats, 0, layer_of_interest);
    for (int i = 0; i < MAX_CLIENTS; i++) close_client(&cl[i]);
    zmq_ctx_term(zctx);
    en_node_close(node);
    node = NULL;
    free(x);
}

/* Client c sends a batch of ROWS rows for layer l (experts 1 and 3). */
static void send_batch(client *c, int l) {
    wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                .seq = ++c->seq,
                .batch = {.layer = (uint32_t)l,
                          .rows = ROWS,
                          .width = (uint32_t)width,
                          .n_assign = ROWS * 2,
                          .mode = WR_MODE_PARTIAL,
                          .reply = {WR_F32, false},
                          .numerics = WR_NUM_F32,
                          .x = x,
                          .assign = assign}};
    mw_err err;
    if (wr_pack(&c->out, &m, (wr_codec){WR_F32, false}, &err) ||
        wr_send(c->sock, NULL, 0, &c->out, 0, &err))
        fail_msg("send: %s", err.msg);
}

/* Client c's next reply, a PartialBatch. */
static wr_partial recv_partial(client *c) {
    mw_err err;
    wr_code code;
    wr_msg r;
    if (wr_recv(c->sock, &c->rx, false, 0, &err)) fail_msg("no answer: %s", err.msg);
    if (wr_parse(&c->in, c->rx.parts, c->rx.n_parts, c->rx.truncated, &r, &code, &err))
        fail_msg("bad answer: %s", err.msg);
    if (r.kind == WR_MSG_ERROR) fail_msg("error: %s", r.error.message);
    assert_int_equal(r.kind, WR_MSG_PARTIAL_BATCH);
    return r.partial;
}

/* A batch's round trip for client c, in ms. */
static double round_trip_ms(client *c, int l, wr_partial *p) {
    const uint64_t t0 = mw_now_ns();
    send_batch(c, l);
    *p = recv_partial(c);
    return (double)(mw_now_ns() - t0) * 1e-6;
}

static void sleep_ms(int ms) {
    const struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Every client answered once on layer 0, one after another: each has a last layer, so the node
 * knows it is due for layer 1 next. */
static void warm_up(int n) {
    wr_partial p;
    for (int i = 0; i < n; i++) round_trip_ms(&cl[i], 0, &p);
}

/* Two clients' rows for layer 1, the second sent 100 ms after the first: one execution (both
 * replies carry its compute time), the weights read once (the layer's read bytes are one
 * request's distinct experts'), the first held only until the second came. */
static void test_rows_within_the_window_run_as_one(void **state) {
    (void)state;
    const int window_ms = 2000;
    start(window_ms * 1000, 2);
    warm_up(2);
    const uint64_t t0 = mw_now_ns();
    send_batch(&cl[0], 1);
    sleep_ms(100);
    send_batch(&cl[1], 1);
    wr_partial a = recv_partial(&cl[0]), b = recv_partial(&cl[1]);
    const double held_ms = (double)(mw_now_ns() - t0) * 1e-6;
    wr_counters l1;
    stop(1, &l1);
    print_message("grouped: first client held %.1f ms for the second (sent after 100 ms), "
                  "compute %.3f ms\n",
                  (double)a.queue_ns * 1e-6, (double)a.compute_ns * 1e-6);
    assert_int_equal(a.compute_ns, b.compute_ns);
    assert_true(a.queue_ns >= 50 * 1000000ull); /* held for the second, however loaded the box */
    assert_true(held_ms < window_ms / 2);
    assert_int_equal(l1.batches, 2);
    assert_int_equal(l1.rows, 2 * ROWS);
    assert_true(a.weight_bytes > 0);
    assert_int_equal(a.weight_bytes, b.weight_bytes);
    assert_int_equal(l1.weight_bytes, a.weight_bytes); /* one read for both */
}

/* Without the window the same two batches run apart: two reads. (The count above can fail.) */
static void test_without_a_window_two_reads(void **state) {
    (void)state;
    start(0, 2);
    warm_up(2);
    send_batch(&cl[0], 1);
    wr_partial a = recv_partial(&cl[0]);
    send_batch(&cl[1], 1);
    recv_partial(&cl[1]);
    wr_counters l1;
    stop(1, &l1);
    assert_int_equal(l1.batches, 2);
    assert_int_equal(l1.weight_bytes, 2 * a.weight_bytes);
}

/* A due client that never sends: the round waits for the window and no longer (measured), the
 * late client's own batch later runs at once, and a client that let a window pass is not waited
 * for again until it sends: a dead coordinator costs the others one window, not one per token. */
static void test_a_late_client_waits_the_window_at_most(void **state) {
    (void)state;
    const int window_ms = 300;
    start(window_ms * 1000, 2);
    warm_up(2);
    wr_partial p;
    const double held = round_trip_ms(&cl[0], 1, &p);
    /* the next token of the first client, its layers 1 .. 3 and 0, then layer 1 again */
    double again = 0;
    for (int l = 2; l <= 5; l++) {
        const double rt = round_trip_ms(&cl[0], l % 4, &p);
        if (l == 5) again = rt;
    }
    /* the late one's batch comes: nobody it could wait for is due, it runs at once */
    const double late = round_trip_ms(&cl[1], 1, &p);
    /* it sent again: it is waited for again */
    const double rearmed = round_trip_ms(&cl[0], 2, &p);
    stop(0, NULL);
    print_message("late client: window %d ms, round held %.1f ms (%.1f past the window); the "
                  "next token's same layer %.1f ms; the late batch %.1f ms; after it sent, "
                  "held again %.1f ms\n",
                  window_ms, held, held - window_ms, again, late, rearmed);
    assert_true(held >= window_ms * 0.95);
    assert_true(held < window_ms + 250); /* the window, a loaded box's scheduling at most */
    assert_true(again < window_ms / 2.0);
    assert_true(late < window_ms / 2.0);
    assert_true(rearmed >= window_ms * 0.95);
}

/* A coordinator gone (its socket closed) after its first layer: the other's rounds wait for it
 * one window at most in all. */
static void test_a_dead_client_blocks_nobody(void **state) {
    (void)state;
    const int window_ms = 300;
    start(window_ms * 1000, 2);
    warm_up(2);
    close_client(&cl[1]);
    wr_partial p;
    double total = 0, worst = 0;
    const int steps = 12;
    for (int s = 0; s < steps; s++) {
        const double rt = round_trip_ms(&cl[0], 1 + s % 3, &p);
        total += rt;
        worst = rt > worst ? rt : worst;
    }
    stop(0, NULL);
    print_message("dead client: %d batches of the live one took %.1f ms (worst %.1f, window %d)\n",
                  steps, total, worst, window_ms);
    assert_true(worst < window_ms + 250);
    assert_true(total < 2 * window_ms + 300); /* held once; each token would be 4 windows */
}

/* One client sends a backlog of batches (its quota per round and its queue's worth), then another
 * client sends one: the other's reply comes before most of the backlog's, not after all of it. */
static void test_a_flooding_client_cannot_starve_another(void **state) {
    (void)state;
    start(100 * 1000, 2);
    warm_up(2);
    const int flood = EN__ROUND_QUOTA + EN__CLIENT_QUEUE;
    for (int i = 0; i < flood; i++) send_batch(&cl[0], 1 + i % 3);
    send_batch(&cl[1], 1);
    recv_partial(&cl[1]);
    /* the flooder's replies already here: those executed in rounds before (or with) the other's */
    int before = 0;
    int t = 0;
    zmq_setsockopt(cl[0].sock, ZMQ_RCVTIMEO, &t, sizeof t);
    mw_err err;
    while (before < flood && wr_recv(cl[0].sock, &cl[0].rx, false, 0, &err) == 0) before++;
    t = 20000;
    zmq_setsockopt(cl[0].sock, ZMQ_RCVTIMEO, &t, sizeof t);
    for (int i = before; i < flood; i++) recv_partial(&cl[0]);
    stop(0, NULL);
    print_message("flood: %d of the flooder's %d batches were answered before the other's one\n",
                  before, flood);
    /* fair: at most two rounds' quota ahead of it (the round it arrived in, the next) */
    assert_true(before <= 2 * EN__ROUND_QUOTA);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_within_the_window_run_as_one),
        cmocka_unit_test(test_without_a_window_two_reads),
        cmocka_unit_test(test_a_late_client_waits_the_window_at_most),
        cmocka_unit_test(test_a_dead_client_blocks_nobody),
        cmocka_unit_test(test_a_flooding_client_cannot_starve_another),
    };
    return cmocka_run_group_tests_name("en_group", tests, NULL, NULL);
}
