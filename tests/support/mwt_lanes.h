/* tests/support/mwt_lanes.h — one run of several sequences through md_forward with a backend and
 * a micro-batch setting (mwt_lanes.c). */
#ifndef MWT_LANES_H
#define MWT_LANES_H

#include <stddef.h>

#include "model/md_model.h"

#define MWT_LANES_SEQS  5
#define MWT_LANES_STEPS 4

/* The logits of a prefill step (MWT_LANES_SEQS prompts of 1 .. 9 tokens, rows interleaved), then
 * MWT_LANES_STEPS decode steps of one row per sequence, concatenated (malloc'ed, n_floats long);
 * st gets the context's micro-batch counts. */
float *mwt_lanes_run(const md_model *model, md_expert_backend *experts, int micro_batches,
                     size_t *n_floats, md_lane_stats *st);

#endif
