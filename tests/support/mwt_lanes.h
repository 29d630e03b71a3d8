/* tests/support/mwt_lanes.h — one run of several sequences through md_forward with a backend and
 * a micro-batch setting, and the context and expert-node backend such runs use (mwt_lanes.c). */
#ifndef MWT_LANES_H
#define MWT_LANES_H

#include <stddef.h>

#include "model/md_model.h"
#include "vindex/vx_source.h"

#define MWT_LANES_SEQS  5
#define MWT_LANES_STEPS 4

/* The logits of a prefill step (MWT_LANES_SEQS prompts of 1 .. 9 tokens, rows interleaved), then
 * MWT_LANES_STEPS decode steps of one row per sequence, concatenated (malloc'ed, n_floats long);
 * st gets the context's micro-batch counts. */
float *mwt_lanes_run(const md_model *model, md_expert_backend *experts, int micro_batches,
                     size_t *n_floats, md_lane_stats *st);

/* A context of n_seq sequences of 64 positions over experts, q8 numerics, with micro_batches
 * (fails the test when it cannot be made). */
md_ctx *mwt_lanes_ctx(const md_model *model, md_expert_backend *experts, int micro_batches,
                      int n_seq);

/* The remote backend in exact mode (f32 rows, q8 numerics, deadlines of minutes: only a lost
 * connection fails a call) over n_nodes endpoints, or with endpoints NULL over `loopback` nodes it
 * starts on the model at path (fails the test when it cannot be made). */
md_expert_backend *mwt_lanes_cluster(const md_model *model, const vx_source *src, const char *path,
                                     const char *const *endpoints, int n_nodes, int loopback);

#endif
