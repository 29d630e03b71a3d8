/* tests/unit/test_en_serve.c — the expert node's serve loop (expert-node/en_node.h) in this
 * process: a node opened on the gpt-oss-tiny fixture owning part of its experts serves on a thread,
 * and a DEALER in the test talks to it. The Welcome states what the node owns and runs, a batch's
 * output is the in-process backend's bit for bit, every fault gets the Error naming it, Ping gets
 * Pong, and en_node_stop ends the loop. (tests/integration/test_node_malformed.c covers the
 * program with hostile input.) */
#include "tests/support/mw_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "expert-node/en_node.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "util/mw_time.h"
#include "vindex/vx_source.h"
#include "wire/wr_msg.h"
#include "wire/wr_zmq.h"

#define OWNED "0-3:0-3" /* experts 0-3 of every layer; 4-7 belong to someone else */

static en_node *node;
static pthread_t serve_thread;
static int serve_rc = -2;
static void *ctx, *sock;
static wr_out out;
static wr_in in;
static wr_rx rx;
static vx_source *src;
static md_model *model;

static void *serve_main(void *arg) {
    (void)arg;
    mw_err err;
    serve_rc = en_node_serve(node, &err);
    return NULL;
}

static int setup(void **state) {
    (void)state;
    const char *path = mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf");
    char model_path[4096];
    snprintf(model_path, sizeof model_path, "%s", path);
    en_opts o = {.vindex = model_path,
                 .experts = OWNED,
                 .bind = "tcp://127.0.0.1:*",
                 .threads = 2,
                 .numerics = -1,
                 .poll_us = -1,
                 .quiet = true};
    mw_err err;
    if (en_node_open(&o, &node, &err)) {
        fprintf(stderr, "en_node_open: %s\n", err.msg);
        return -1;
    }
    if (vx_source_open(model_path, NULL, &src, &err) || md_model_load(src, &model, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    if (pthread_create(&serve_thread, NULL, serve_main, NULL)) return -1;
    ctx = zmq_ctx_new();
    sock = zmq_socket(ctx, ZMQ_DEALER);
    if (!sock || wr_socket_setup(sock, NULL, NULL) || zmq_connect(sock, en_node_endpoint(node)))
        return -1;
    int t = 10000;
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &t, sizeof t);
    wr_out_init(&out);
    wr_in_init(&in, NULL);
    wr_rx_init(&rx);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    wr_rx_free(&rx);
    wr_in_free(&in);
    wr_out_free(&out);
    if (sock) zmq_close(sock);
    if (ctx) zmq_ctx_term(ctx);
    if (node) {
        en_node_stop(node);
        pthread_join(serve_thread, NULL);
        en_node_close(node);
    }
    md_model_free(model);
    vx_source_close(src);
    return 0;
}

/* Sends m (rows in f32) and parses the answer into *reply (valid until the next exchange). */
static void exchange(const wr_msg *m, wr_msg *reply) {
    mw_err err;
    wr_code code;
    if (wr_pack(&out, m, (wr_codec){WR_F32, false}, &err) || wr_send(sock, NULL, 0, &out, 0, &err))
        fail_msg("send: %s", err.msg);
    if (wr_recv(sock, &rx, false, 0, &err)) fail_msg("no answer: %s", err.msg);
    if (wr_parse(&in, rx.parts, rx.n_parts, rx.truncated, reply, &code, &err))
        fail_msg("bad answer: %s", err.msg);
    assert_int_equal(reply->seq, m->seq);
}

static void test_welcome_states_the_node(void **state) {
    (void)state;
    wr_msg hello = {.kind = WR_MSG_HELLO, .seq = 7, .hello = {"test", ""}}, r;
    exchange(&hello, &r);
    assert_int_equal(r.kind, WR_MSG_WELCOME);
    const wr_welcome *w = &r.welcome;
    assert_string_equal(w->fingerprint, vx_source_fingerprint(src));
    assert_string_equal(w->node_id, en_node_endpoint(node));
    char backend[32];
    snprintf(backend, sizeof backend, "cpu-%s", kn_isa_name(kn_isa_active()));
    assert_string_equal(w->backend, backend);
    assert_string_equal(w->numerics, "f32,q8");
    assert_int_equal(w->width, model->cfg.n_embd);
    /* the experts' GLU policy as the config declares it: gpt-oss's clamped SwiGLU */
    assert_string_equal(w->glu, "swiglu_oai");
    assert_int_equal(w->n_glu_params, 2);
    kn_glu g;
    assert_int_equal(kn_glu_make(kn_glu_from_name(w->glu), w->glu_params, 2, &g, NULL), 0);
    assert_true(kn_glu_same(&g, &model->cfg.glu));
    assert_true(g.alpha == 1.702f && g.limit == 7.0f);
    assert_int_equal(w->n_layers, model->cfg.n_layer);
    assert_int_equal(w->n_experts, model->cfg.n_expert);
    assert_int_equal(w->capacity, 4096);
    assert_int_equal(w->threads, 2);
    for (uint32_t l = 0; l < w->n_layers; l++)
        for (uint32_t e = 0; e < w->n_experts; e++)
            assert_int_equal(wr_owned_get(w->owned, w->n_experts, l, e), e < 4);
    /* a Hello for another model is refused */
    hello.seq = 8;
    hello.hello.fingerprint = "another-model";
    exchange(&hello, &r);
    assert_int_equal(r.kind, WR_MSG_ERROR);
    assert_int_equal(r.error.code, WR_E_FINGERPRINT);
    assert_non_null(strstr(r.error.message, "another-model"));
}

/* Rows 0..T-1 selecting owned experts in varied order; the node's partial sums equal the
 * in-process backend's (the same executor), bit for bit, in both numerics. */
static void test_batch_output_is_the_in_process_backends(void **state) {
    (void)state;
    enum { T = 3, K = 2 };
    const int64_t w = model->cfg.n_embd;
    float *x = malloc((size_t)(T * w) * sizeof *x), *want = malloc((size_t)(T * w) * sizeof *x);
    for (int64_t i = 0; i < T * w; i++) x[i] = (float)((i * 29) % 97) / 31.0f - 1.5f;
    const int32_t experts[T * K] = {2, 0, 3, 1, 0, 3};
    const float weights[T * K] = {0.75f, 0.25f, 0.6f, 0.4f, 0.55f, 0.45f};
    wr_assign assign[T * K];
    for (int i = 0; i < T * K; i++) assign[i] = (wr_assign){i / K, experts[i], weights[i]};
    md_expert_backend *local;
    mw_err err;
    if (md_local_backend_new(src, &model->cfg, NULL, &local, &err)) fail_msg("%s", err.msg);
    for (int num = 0; num < KN_NUM_COUNT; num++) {
        md_moe_batch b = {.layer = 2,
                          .T = T,
                          .width = w,
                          .x = x,
                          .k = K,
                          .experts = experts,
                          .weights = weights,
                          .numerics = (kn_numerics)num};
        if (local->run(local, &b, want, &err)) fail_msg("%s", err.msg);
        wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                    .seq = 100 + (uint64_t)num,
                    .batch = {.layer = 2,
                              .rows = T,
                              .width = (uint32_t)w,
                              .n_assign = T * K,
                              .mode = WR_MODE_PARTIAL,
                              .reply = {WR_F32, false},
                              .numerics = (wr_numerics)num,
                              .x = x,
                              .assign = assign}},
               r;
        exchange(&m, &r);
        if (r.kind == WR_MSG_ERROR) fail_msg("error: %s", r.error.message);
        assert_int_equal(r.kind, WR_MSG_PARTIAL_BATCH);
        assert_int_equal(r.partial.layer, 2);
        assert_int_equal(r.partial.rows, T);
        assert_true(r.partial.weight_bytes > 0);
        assert_memory_equal(r.partial.y, want, (size_t)(T * w) * sizeof(float));
    }
    local->destroy(local);
    free(x);
    free(want);
}

static void test_faults_get_errors_and_ping_a_pong(void **state) {
    (void)state;
    const int64_t w = model->cfg.n_embd;
    static float x[4096];
    assert_true(w <= 4096);
    wr_assign a = {0, 5, 1.0f}; /* expert 5: not owned */
    wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                .seq = 200,
                .batch = {.layer = 1,
                          .rows = 1,
                          .width = (uint32_t)w,
                          .n_assign = 1,
                          .mode = WR_MODE_EXACT,
                          .reply = {WR_F32, false},
                          .x = x,
                          .assign = &a}},
           r;
    exchange(&m, &r);
    assert_int_equal(r.kind, WR_MSG_ERROR);
    assert_int_equal(r.error.code, WR_E_NOT_OWNED);
    assert_non_null(strstr(r.error.message, "expert 5 of layer 1 is not owned"));
    a.expert = 1;
    m.seq = 201;
    m.batch.layer = 9; /* the model has 4 layers */
    exchange(&m, &r);
    assert_int_equal(r.kind, WR_MSG_ERROR);
    assert_int_equal(r.error.code, WR_E_LAYER);
    /* a Pong is not something a node accepts */
    wr_msg pong = {.kind = WR_MSG_PONG, .seq = 202};
    exchange(&pong, &r);
    assert_int_equal(r.kind, WR_MSG_ERROR);
    assert_int_equal(r.error.code, WR_E_UNEXPECTED);
    wr_msg ping = {.kind = WR_MSG_PING, .seq = 203, .ping = {.t_ns = 123456789}};
    exchange(&ping, &r);
    assert_int_equal(r.kind, WR_MSG_PONG);
    assert_int_equal(r.ping.t_ns, 123456789);
}

/* en_node_stop (what SIGTERM calls) ends the loop at once with status 0. */
static void test_stop_ends_the_loop(void **state) {
    (void)state;
    const int64_t t0 = mw_now_ms();
    en_node_stop(node);
    assert_int_equal(pthread_join(serve_thread, NULL), 0);
    assert_int_equal(serve_rc, 0);
    assert_true(mw_now_ms() - t0 < 2000);
    en_node_close(node);
    node = NULL;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_welcome_states_the_node),
        cmocka_unit_test(test_batch_output_is_the_in_process_backends),
        cmocka_unit_test(test_faults_get_errors_and_ping_a_pong),
        cmocka_unit_test(test_stop_ends_the_loop),
    };
    return cmocka_run_group_tests_name("en_serve", tests, setup, teardown);
}
