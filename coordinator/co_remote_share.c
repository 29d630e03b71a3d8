/* coordinator/co_remote_share.c — which live owner serves an assignment when an expert has
 * replicas. Every choice is a function of what the backend was asked so far, never of timing, so
 * a run is reproducible; which replica computes an expert never changes its output (the kernels
 * are batch-invariant), so exact mode stays bit-identical whatever is chosen.
 *
 * Exact mode balances load: the owner with the least work in this layer — what it was given in
 * this call plus a decaying sum of what it served in the layer's recent calls, so one-row decode
 * steps alternate over replicas too — and, among equals, one the row already goes to (the row then
 * travels once), then a rotation by (layer, expert, row).
 *
 * Partial mode adds each node's share of a row as a partial sum, so which node serves which of a
 * row's experts decides the order of its float additions: the choice must depend on the row
 * alone, or a row's result would depend on the rows beside it. There an owner the row already goes
 * to is taken, else one picked by a hash of the row's selected experts: rows spread over the
 * replicas, each row always the same way. */
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_remote_internal.h"
#include "util/mw_grow.h"

#define DECAY 16 /* a layer's recent load: R = R − R/DECAY + this call's assignments */

int co__share_init(co__remote *r) {
    const size_t n = (size_t)r->o.n_layers * (size_t)r->cap_nodes;
    r->share_recent = calloc(n ? n : 1, sizeof *r->share_recent);
    r->share_now = calloc((size_t)r->cap_nodes, sizeof *r->share_now);
    return r->share_recent && r->share_now ? 0 : -1;
}

void co__share_free(co__remote *r) {
    free(r->share_recent);
    free(r->share_now);
}

void co__share_begin(co__remote *r) {
    memset(r->share_now, 0, (size_t)r->o.n_nodes * sizeof *r->share_now);
}

void co__share_end(co__remote *r, int layer) {
    uint64_t *R = r->share_recent + (size_t)layer * (size_t)r->cap_nodes;
    for (int i = 0; i < r->o.n_nodes; i++) R[i] = R[i] - R[i] / DECAY + r->share_now[i] * DECAY;
}

/* Whether one of the row's earlier selections went to node i. */
static bool row_goes_to(const int32_t *chosen, int j, int i) {
    for (int x = 0; x < j; x++)
        if (chosen[x] == i) return true;
    return false;
}

static uint32_t row_hash(const int32_t *experts, int k) {
    uint32_t h = 2166136261u;
    for (int j = 0; j < k; j++) h = (h ^ (uint32_t)experts[j]) * 16777619u;
    return h;
}

int co__share_pick(co__remote *r, const md_moe_batch *b, int64_t t, int j, const int32_t *chosen) {
    const int e = b->experts[t * b->k + j];
    const size_t c = (size_t)b->layer * (size_t)r->o.n_experts + (size_t)e;
    const int n = r->n_owner[c];
    if (n <= 1) return n ? r->owner[c * (size_t)r->cap_nodes] : -1;
    const int32_t *own = r->owner + c * (size_t)r->cap_nodes;
    if (!r->o.exact) {
        for (int x = 0; x < n; x++)
            if (row_goes_to(chosen, j, own[x])) return own[x];
        return own[(row_hash(b->experts + t * b->k, b->k) + (uint32_t)e) % (uint32_t)n];
    }
    const uint64_t *R = r->share_recent + (size_t)b->layer * (size_t)r->cap_nodes;
    const int start = (int)(((uint64_t)b->layer + (uint64_t)e + (uint64_t)t) % (uint64_t)n);
    int best = -1;
    uint64_t best_load = 0;
    bool best_row = false;
    for (int x = 0; x < n; x++) {
        const int i = own[(start + x) % n];
        const uint64_t load = R[i] + r->share_now[i] * DECAY;
        const bool on_row = row_goes_to(chosen, j, i);
        if (best < 0 || load < best_load || (load == best_load && on_row && !best_row))
            best = i, best_load = load, best_row = on_row;
    }
    return best;
}

void co__share_took(co__remote *r, int node) {
    r->share_now[node]++;
}
