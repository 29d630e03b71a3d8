/* model/md_lanes.h — ping-pong micro-batches: how many lanes a step runs in and which sequences go
 * to each. A step of several sequences is split by sequence into lanes that the layer loop
 * (md_forward.c) interleaves: while one lane's ExpertBatch is on the wire and on the nodes, the
 * coordinator runs the next lane's attention, router and shared experts. A row's arithmetic does
 * not change (every kernel is batch-invariant), so the logits are the same bits as one batch.
 *
 * A long prompt splits too: lanes run a layer in lane order, so a lane's rows may continue a
 * sequence whose earlier positions a lower lane holds (their keys and values of a layer are in the
 * cache before the later lane's attention of that layer runs). Cutting the step's rows into lanes
 * of equal size, sequence after sequence, keeps that order (md_lanes_cut). A family whose layers
 * keep state a later lane cannot read before the commit (sliding-window rings stage their rows, a
 * KDA layer's recurrent state flips banks at the commit) keeps each sequence in one lane instead
 * (md_lanes_plan).
 *
 * The auto choice. Per MoE layer the trunk computes for C and then sits blocked for W waiting for
 * its experts (both measured on unsplit steps). Each extra lane costs at most another C (a small
 * batch's matmuls read the same weights as a larger one's) and can only fill blocked time, so the
 * step runs in 1 + floor(W / (margin · C)) lanes: none while the trunk is busier than the link,
 * which is where small models and loopback clusters sit. */
#ifndef MD_LANES_H
#define MD_LANES_H

#include <stdint.h>

#include "model/md_model.h"

/* an extra lane must be expected to fill this much more than it costs */
#define MD_LANES_MARGIN 1.2
/* auto mode re-measures an unsplit step this often while it splits */
#define MD_LANES_REMEASURE 32

/* The measured per-layer times the auto choice reads (exponential averages). */
typedef struct md_lanes_clock {
    double trunk_ns, wait_ns;
    uint64_t samples;
    uint64_t split_run; /* split steps since the last unsplit one */
} md_lanes_clock;

/* Folds in an unsplit step: its time, the part blocked waiting for experts, its MoE layers. */
void md_lanes_measure(md_lanes_clock *k, uint64_t step_ns, uint64_t wait_ns, uint64_t moe_layers);

/* Lanes for a step of n_units pieces that may go to separate lanes (rows, or whole sequences):
 * `mode` 0 = auto, else fixed (clamped to what the step and the backend allow: in_flight batches
 * at once, one piece per lane at least). */
int md_lanes_choose(md_lanes_clock *k, int mode, int in_flight, int n_units);

/* Assigns the T rows' sequences to n lanes, the largest first onto the lane with fewest rows (ties
 * to the lower lane): lane_of[t] for every row. seq_lane (n_seq entries, -1 on entry, left -1) and
 * seqs (T entries) are scratch. Returns the distinct sequences. */
int md_lanes_plan(const md_row *rows, int64_t T, int n, int32_t *lane_of, int32_t *seq_lane,
                  int64_t *seq_rows, int32_t *seqs);

/* Cuts the T rows into n lanes of equal size (within a row): the rows taken sequence after
 * sequence (in order of first appearance), each sequence's in position order, lane i the i-th
 * n-th of them, so a sequence split between lanes has its earlier positions in the lower lane.
 * lane_of[t] for every row. seq_at (n_seq entries, -1 on entry, left -1) and seq_rows (zero on
 * entry, left zero) are scratch. */
void md_lanes_cut(const md_row *rows, int64_t T, int n, int32_t *lane_of, int32_t *seq_at,
                  int64_t *seq_rows);

/* The distinct sequences of a batch (seq_rows: n_seq counters, zero on entry and on return). */
int md_lanes_count_seqs(const md_row *rows, int64_t T, int64_t *seq_rows);

#endif
