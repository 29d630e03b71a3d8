/* tests/support/mwt_lanes.c — a step of several sequences' prompts then decode steps through
 * md_forward with a given expert backend and micro-batch setting, for the micro-batch tests
 * (tests/unit/test_md_lanes.c in process, tests/integration/test_lanes_cluster.c and
 * test_lanes_loss.c on nodes). */
#include "tests/support/mwt_lanes.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/co_cluster.h"
#include "tests/support/mw_test.h"

md_ctx *mwt_lanes_ctx(const md_model *model, md_expert_backend *experts, int micro_batches,
                      int n_seq) {
    mw_err e;
    md_ctx_params p = {.numerics = KN_NUM_Q8,
                       .experts = experts,
                       .n_seq = n_seq,
                       .n_ctx = 64,
                       .micro_batches = micro_batches};
    md_ctx *c;
    if (md_ctx_new(model, &p, &c, &e)) fail_msg("%s", e.msg);
    return c;
}

md_expert_backend *mwt_lanes_cluster(const md_model *model, const vx_source *src, const char *path,
                                     const char *const *endpoints, int n_nodes, int loopback) {
    setenv("MOEWIRE_EXPERT_NODE", mwt_bin("expert-node"), 1);
    co_cluster_opts co = {.endpoints = endpoints,
                          .n_nodes = n_nodes,
                          .loopback = loopback,
                          .model = path,
                          .node_threads = 1,
                          .exact = true,
                          .deadline_ms = 120000,
                          .down_ms = 60000,
                          .connect_ms = 60000,
                          .src = src,
                          .width = md_expert_width(&model->cfg),
                          .glu = &model->cfg.glu,
                          .numerics = KN_NUM_Q8};
    wr_codec_parse("f32", &co.codec, NULL);
    md_expert_backend *b;
    mw_err e;
    if (co_cluster_create(&co, &b, &e)) fail_msg("%s", e.msg);
    return b;
}

float *mwt_lanes_run(const md_model *model, md_expert_backend *experts, int micro_batches,
                     size_t *n_floats, md_lane_stats *st) {
    mw_err e;
    md_ctx *c = mwt_lanes_ctx(model, experts, micro_batches, MWT_LANES_SEQS + 2);
    const int64_t V = model->cfg.n_vocab;
    md_row rows[64];
    int len[MWT_LANES_SEQS] = {9, 1, 4, 7, 2}, T = 0;
    /* sequence ids 1 .. SEQS (0 unused): interleaved, each in position order */
    for (int i = 0; i < 9; i++)
        for (int s = 0; s < MWT_LANES_SEQS; s++)
            if (i < len[s])
                rows[T++] =
                    (md_row){s + 1, i, (s * 37 + i * 11) % 200 + 3, i % 2 || i + 1 == len[s]};
    int n_out = 0;
    for (int t = 0; t < T; t++) n_out += rows[t].logits != 0;
    *n_floats = (size_t)(n_out + MWT_LANES_STEPS * MWT_LANES_SEQS) * (size_t)V;
    float *out = malloc(*n_floats * sizeof *out);
    assert_non_null(out);
    if (md_forward(c, rows, T, out, &e)) fail_msg("%s", e.msg);
    float *at = out + (size_t)n_out * (size_t)V;
    for (int step = 0; step < MWT_LANES_STEPS; step++) {
        for (int s = 0; s < MWT_LANES_SEQS; s++)
            rows[s] = (md_row){s + 1, len[s] + step, (step * 13 + s * 7) % 200 + 5, 1};
        if (md_forward(c, rows, MWT_LANES_SEQS, at, &e)) fail_msg("%s", e.msg);
        at += (size_t)MWT_LANES_SEQS * (size_t)V;
    }
    *st = md_ctx_lane_stats(c);
    md_ctx_free(c);
    return out;
}
