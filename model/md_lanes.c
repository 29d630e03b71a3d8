/* model/md_lanes.c — ping-pong micro-batches: the number of lanes from measured times, and the
 * rows' placement in them (see md_lanes.h). */
#include "model/md_lanes.h"

void md_lanes_measure(md_lanes_clock *k, uint64_t step_ns, uint64_t wait_ns, uint64_t moe_layers) {
    if (!moe_layers || wait_ns > step_ns) return;
    const double trunk = (double)(step_ns - wait_ns) / (double)moe_layers;
    const double wait = (double)wait_ns / (double)moe_layers;
    const double a = k->samples ? 0.2 : 1.0; /* the first sample stands alone */
    k->trunk_ns += a * (trunk - k->trunk_ns);
    k->wait_ns += a * (wait - k->wait_ns);
    k->samples++;
    k->split_run = 0;
}

void md_lanes_measure_split(md_lanes_clock *k, uint64_t step_ns, uint64_t moe_layers) {
    if (!moe_layers || !k->samples) return;
    k->split_samples++;
    k->split_ns += ((double)step_ns / (double)moe_layers - k->split_ns) / (double)k->split_samples;
    if (k->split_samples < MD_LANES_VERDICT) return;
    /* against a whole step's time per layer, its trunk and wait as the unsplit steps measure them
     */
    if (k->split_ns >= k->trunk_ns + k->wait_ns) k->hold = MD_LANES_HOLD;
    k->split_samples = 0;
    k->split_ns = 0;
}

int md_lanes_choose(md_lanes_clock *k, int mode, int in_flight, int n_units) {
    int cap = in_flight < MD_LANES_MAX ? in_flight : MD_LANES_MAX;
    if (n_units < cap) cap = n_units;
    if (cap < 2 || mode == 1) return 1;
    if (mode > 1) return mode < cap ? mode : cap;
    /* auto: measure first, and now and then again on an unsplit step */
    if (!k->samples || k->trunk_ns <= 0 || k->split_run >= MD_LANES_REMEASURE) return 1;
    if (k->hold) { /* splitting was measured to gain nothing: whole for a while */
        k->hold--;
        return 1;
    }
    const double fill = k->wait_ns / (MD_LANES_MARGIN * k->trunk_ns);
    int n = fill >= (double)(cap - 1) ? cap : 1 + (int)fill;
    if (n > 1) k->split_run++;
    return n;
}

void md_lanes_cut(const md_row *rows, int64_t T, int n, int32_t *lane_of, int32_t *seq_at,
                  int64_t *seq_rows) {
    for (int64_t t = 0; t < T; t++) seq_rows[rows[t].seq]++;
    int64_t next = 0;
    for (int64_t t = 0; t < T; t++) {
        const int32_t s = rows[t].seq;
        if (seq_at[s] < 0) {
            seq_at[s] = (int32_t)next;
            next += seq_rows[s];
        }
    }
    /* rows of a sequence come in position order, so its i-th row is its i-th position */
    for (int64_t t = 0; t < T; t++) lane_of[t] = (int32_t)((int64_t)seq_at[rows[t].seq]++ * n / T);
    for (int64_t t = 0; t < T; t++) {
        seq_rows[rows[t].seq] = 0;
        seq_at[rows[t].seq] = -1;
    }
}
