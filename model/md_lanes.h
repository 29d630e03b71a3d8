/* model/md_lanes.h — ping-pong micro-batches: how many lanes a step runs in and which rows go to
 * each. A step's rows are cut into lanes that the layer loop (md_forward.c) interleaves: while one
 * lane's ExpertBatch is on the wire and on the nodes, the coordinator runs the next lane's
 * attention, router and shared experts. A row's arithmetic does not change (every kernel is
 * batch-invariant), so the logits are the same bits as one batch.
 *
 * A long prompt splits too: lanes run a layer in lane order, so a lane's rows may continue a
 * sequence whose earlier positions a lower lane holds. What that lane left of a layer exists
 * before the later lane's attention of that layer runs: the full layers' keys and values are in
 * the cache (md_kv.h), a sliding-window layer's rows in the lane's staging, which the later lane
 * copies into a window of its own, and a KDA layer's new state in the lane's other bank, which the
 * later lane starts from (md_kda_state.h); the committed state changes only at the commits, lane
 * after lane. Cutting the step's rows into lanes of equal size, sequence after sequence, keeps that
 * order (md_lanes_cut). KDA's chunks are aligned to positions whatever the pass, so a cut inside a
 * chunk changes no bits.
 *
 * The auto choice. Per MoE layer the trunk computes for C and then sits blocked for W waiting for
 * its experts (both measured on unsplit steps). Each extra lane costs at most another C (a small
 * batch's matmuls read the same weights as a larger one's) and can only fill blocked time, so the
 * step runs in 1 + floor(W / (margin · C)) lanes: none while the trunk is busier than the link,
 * which is where small models and loopback clusters sit. That prediction assumes the wait is the
 * link's and the nodes' own time; where the nodes share the coordinator's cores (a loopback
 * cluster, nodes on the same host) the next lane's trunk competes with them instead of filling the
 * wait. So the split steps are timed too, and when they take no less per MoE layer than a whole
 * step's measured C + W, auto keeps steps whole for a while before it tries again. */
#ifndef MD_LANES_H
#define MD_LANES_H

#include <stdint.h>

#include "model/md_model.h"

/* an extra lane must be expected to fill this much more than it costs */
#define MD_LANES_MARGIN 1.2
/* auto mode re-measures an unsplit step this often while it splits */
#define MD_LANES_REMEASURE 32
/* split steps averaged before they are judged against whole ones */
#define MD_LANES_VERDICT 4
/* steps auto keeps whole after split ones measured no faster: a retry costs MD_LANES_VERDICT
 * slower steps in this many */
#define MD_LANES_HOLD 512

/* The measured per-layer times the auto choice reads (exponential averages). */
typedef struct md_lanes_clock {
    double trunk_ns, wait_ns;
    uint64_t samples;
    uint64_t split_run;     /* split steps since the last unsplit one */
    double split_ns;        /* split steps' mean time per MoE layer since the last verdict */
    uint64_t split_samples; /* the split steps in split_ns */
    uint64_t hold;          /* steps auto still keeps whole: splitting measured no gain */
} md_lanes_clock;

/* Folds in an unsplit step: its time, the part blocked waiting for experts, its MoE layers. */
void md_lanes_measure(md_lanes_clock *k, uint64_t step_ns, uint64_t wait_ns, uint64_t moe_layers);

/* Folds in a split step: its time and its MoE layers (each counted once, not once a lane). */
void md_lanes_measure_split(md_lanes_clock *k, uint64_t step_ns, uint64_t moe_layers);

/* Lanes for a step of n_units rows: `mode` 0 = auto, else fixed (clamped to what the step and the
 * backend allow: in_flight batches at once, one row per lane at least). */
int md_lanes_choose(md_lanes_clock *k, int mode, int in_flight, int n_units);

/* Cuts the T rows into n lanes of equal size (within a row): the rows taken sequence after
 * sequence (in order of first appearance), each sequence's in position order, lane i the i-th
 * n-th of them, so a sequence split between lanes has its earlier positions in the lower lane.
 * lane_of[t] for every row. seq_at (n_seq entries, -1 on entry, left -1) and seq_rows (zero on
 * entry, left zero) are scratch. */
void md_lanes_cut(const md_row *rows, int64_t T, int n, int32_t *lane_of, int32_t *seq_at,
                  int64_t *seq_rows);

#endif
