/* tests/unit/test_co_expert_width.c — an expert bank narrower than its model: a latent MoE's
 * experts take and return rows of L values while the model is E wide (Kimi K3's
 * expert_latent_length). A synthetic qwen3moe file of hidden L stands for the bank; the
 * coordinator's config says the model is E wide with experts at L (n_expert_latent). The
 * in-process backend loads and runs the bank at L and refuses rows of E; two expert nodes in this
 * process serve it over TCP, the handshake agreeing on L and refusing a coordinator that expects E;
 * exact mode is bit-identical to in process, and the wire carries L-wide rows, not E-wide ones. */
#include "tests/support/mw_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_remote.h"
#include "expert-node/en_node.h"
#include "model/md_config.h"
#include "model/md_local.h"
#include "vindex/vx_source.h"
#include "vindex/vx_synth.h"

#define L_WIDTH 64  /* the bank's width (the synthetic file's hidden size) */
#define E_WIDTH 160 /* the model's, as the coordinator's config says */
#define N_ROWS  7
#define TOP_K   2

static char path[4200];
static vx_source *src;
static md_config cfg; /* the bank's file as read; the tests adjust copies */
static en_node *nodes[2];
static pthread_t threads[2];

static void *serve_main(void *arg) {
    mw_err err;
    en_node_serve(arg, &err);
    return NULL;
}

static int setup(void **state) {
    (void)state;
    char *dir = mwt_tmpdir("expert-width");
    snprintf(path, sizeof path, "%s/bank.gguf", dir);
    free(dir);
    const char *kv[] = {"arch",          "qwen3moe", "layers",    "2",  "hidden", "64",
                        "heads",         "2",        "experts",   "8",  "top-k",  "2",
                        "vocab",         "300",      "expert-ff", "64", "seed",   "35",
                        "expert-format", "mxfp4",    NULL};
    vx_input *in;
    mw_err err;
    if (vx_synth_input_kv(kv, &in, &err) || vx_input_write_gguf(in, path, NULL, NULL, &err)) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return -1;
    }
    vx_input_close(in);
    if (vx_source_open(path, NULL, &src, &err) || md_config_read(vx_source_meta(src), &cfg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    const char *owned[2] = {"0-1:0-3", "0-1:4-7"};
    for (int i = 0; i < 2; i++) {
        en_opts o = {.vindex = path,
                     .experts = owned[i],
                     .bind = "tcp://127.0.0.1:*",
                     .threads = 1,
                     .numerics = -1,
                     .poll_us = -1,
                     .quiet = true};
        if (en_node_open(&o, &nodes[i], &err) ||
            pthread_create(&threads[i], NULL, serve_main, nodes[i])) {
            fprintf(stderr, "node %d: %s\n", i, err.msg);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) {
        if (!nodes[i]) continue;
        en_node_stop(nodes[i]);
        pthread_join(threads[i], NULL);
        en_node_close(nodes[i]);
    }
    md_config_free(&cfg);
    vx_source_close(src);
    return 0;
}

/* The coordinator's view: a model E wide whose experts run at L. */
static md_config latent_cfg(void) {
    md_config c = cfg; /* shallow: the tables stay cfg's */
    c.n_embd = E_WIDTH;
    c.n_expert_latent = L_WIDTH;
    return c;
}

/* N_ROWS rows of `width` values routed to TOP_K experts each, spread over both nodes. */
typedef struct batch {
    float x[N_ROWS * E_WIDTH];
    int32_t experts[N_ROWS * TOP_K];
    float weights[N_ROWS * TOP_K];
    md_moe_batch b;
} batch;

static void make_batch(batch *bt, int layer, int64_t width) {
    for (int i = 0; i < N_ROWS * E_WIDTH; i++) bt->x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int t = 0; t < N_ROWS; t++)
        for (int j = 0; j < TOP_K; j++) {
            bt->experts[t * TOP_K + j] = (t + 5 * j) % 8;
            bt->weights[t * TOP_K + j] = 0.75f - 0.5f * (float)j + 0.01f * (float)t;
        }
    bt->b = (md_moe_batch){.layer = layer,
                           .T = N_ROWS,
                           .width = width,
                           .x = bt->x,
                           .k = TOP_K,
                           .experts = bt->experts,
                           .weights = bt->weights,
                           .numerics = KN_NUM_F32};
}

static co_remote_opts remote_opts(const md_config *c, const char **eps) {
    for (int i = 0; i < 2; i++) eps[i] = en_node_endpoint(nodes[i]);
    return (co_remote_opts){.endpoints = eps,
                            .n_nodes = 2,
                            .codec = {WR_F32, false},
                            .exact = true,
                            .deadline_ms = 20000,
                            .connect_ms = 20000,
                            .fingerprint = vx_source_fingerprint(src),
                            .n_layers = c->n_layer,
                            .n_experts = c->n_expert,
                            .width = md_expert_width(c),
                            .glu = &c->glu,
                            .numerics = KN_NUM_F32};
}

/* In process: the bank loads at its own width, not the model's, and takes rows of that width. */
static void test_local_backend_runs_at_the_bank_width(void **state) {
    (void)state;
    md_config c = latent_cfg();
    assert_int_equal(md_expert_width(&c), L_WIDTH);
    md_expert_backend *be;
    mw_err err;
    if (md_local_backend_new(src, &c, NULL, &be, &err)) fail_msg("%s", err.msg);
    batch bt;
    float out[N_ROWS * E_WIDTH];
    make_batch(&bt, 1, L_WIDTH);
    if (be->run(be, &bt.b, out, &err)) fail_msg("%s", err.msg);
    make_batch(&bt, 1, E_WIDTH); /* the model's width: not what the experts take */
    assert_int_equal(be->run(be, &bt.b, out, &err), -1);
    assert_non_null(strstr(err.msg, "rows of 160 values, the experts take 64"));
    be->destroy(be);
    /* without the latent width the same bank does not fit an E-wide model: the width is the
     * config's, not guessed from the tensors */
    c.n_expert_latent = 0;
    assert_int_equal(md_local_backend_new(src, &c, NULL, &be, &err), -1);
    assert_non_null(strstr(err.msg, "expected 64 × 160"));
}

/* Over two nodes: the handshake agrees on L (a coordinator expecting E is refused), exact mode
 * gives the in-process bits, and the replies carry L floats per assignment. */
static void test_cluster_carries_latent_rows(void **state) {
    (void)state;
    const md_config c = latent_cfg();
    md_expert_backend *local, *remote;
    mw_err err;
    if (md_local_backend_new(src, &c, NULL, &local, &err)) fail_msg("%s", err.msg);
    const char *eps[2];
    co_remote_opts o = remote_opts(&c, eps);
    o.width = E_WIDTH;
    assert_int_equal(co_remote_new(&o, &remote, &err), -1);
    assert_non_null(strstr(err.msg, "serves width 64"));
    o.width = md_expert_width(&c);
    if (co_remote_new(&o, &remote, &err)) fail_msg("%s", err.msg);
    for (int layer = 0; layer < 2; layer++) {
        batch bt;
        make_batch(&bt, layer, L_WIDTH);
        float want[N_ROWS * L_WIDTH], got[N_ROWS * L_WIDTH];
        if (local->run(local, &bt.b, want, &err) || remote->run(remote, &bt.b, got, &err))
            fail_msg("layer %d: %s", layer, err.msg);
        if (memcmp(want, got, sizeof want))
            fail_msg("layer %d: exact mode differs from in process (max |diff| %g)", layer,
                     mwt_max_abs_diff(got, want, N_ROWS * L_WIDTH));
        /* every reply row is an assignment's L floats (plus a small envelope per message) */
        const wr_counters w = wr_stats_sum(co_remote_stats(remote), -1, layer);
        const uint64_t rows_bytes = (uint64_t)N_ROWS * TOP_K * L_WIDTH * sizeof(float);
        printf("  layer %d: %llu bytes received for %llu of L-wide rows (E-wide: %llu)\n", layer,
               (unsigned long long)w.rx_bytes, (unsigned long long)rows_bytes,
               (unsigned long long)(rows_bytes / L_WIDTH * E_WIDTH));
        assert_true(w.rx_bytes >= rows_bytes && w.rx_bytes < rows_bytes + 64 * w.rx_msgs);
    }
    batch bt;
    make_batch(&bt, 0, E_WIDTH);
    float out[N_ROWS * E_WIDTH];
    assert_int_equal(remote->run(remote, &bt.b, out, &err), -1);
    remote->destroy(remote);
    local->destroy(local);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_backend_runs_at_the_bank_width),
        cmocka_unit_test(test_cluster_carries_latent_rows),
    };
    return cmocka_run_group_tests_name("co_expert_width", tests, setup, teardown);
}
