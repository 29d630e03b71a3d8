/* wire/wr_stats.c — movement accounting tables (see wr_stats.h for the definition). */
#include "wire/wr_stats.h"

#include <stdlib.h>
#include <string.h>

int wr_stats_init(wr_stats *s, int n_nodes, int n_layers, mw_err *err) {
    memset(s, 0, sizeof *s);
    if (n_nodes < 1 || n_layers < 1 || n_nodes > (1 << 16) || n_layers > (1 << 16))
        return mw_errf(err, "movement stats: bad shape %d nodes × %d layers", n_nodes, n_layers);
    s->cell = calloc((size_t)n_nodes * (size_t)n_layers, sizeof *s->cell);
    s->ctrl = calloc((size_t)n_nodes, sizeof *s->ctrl);
    if (!s->cell || !s->ctrl) {
        wr_stats_free(s);
        return mw_errf(err, "movement stats: out of memory");
    }
    s->n_nodes = n_nodes;
    s->n_layers = n_layers;
    return 0;
}

void wr_stats_free(wr_stats *s) {
    free(s->cell);
    free(s->ctrl);
    memset(s, 0, sizeof *s);
}

void wr_stats_reset(wr_stats *s) {
    if (s->cell) memset(s->cell, 0, (size_t)s->n_nodes * (size_t)s->n_layers * sizeof *s->cell);
    if (s->ctrl) memset(s->ctrl, 0, (size_t)s->n_nodes * sizeof *s->ctrl);
}

wr_counters *wr_stats_at(wr_stats *s, int node, int layer) {
    if (node < 0 || node >= s->n_nodes || layer < 0 || layer >= s->n_layers) return NULL;
    return &s->cell[(size_t)node * (size_t)s->n_layers + (size_t)layer];
}

wr_counters *wr_stats_ctrl(wr_stats *s, int node) {
    return node >= 0 && node < s->n_nodes ? &s->ctrl[node] : NULL;
}

void wr_counters_add(wr_counters *d, const wr_counters *c) {
    d->tx_bytes += c->tx_bytes;
    d->rx_bytes += c->rx_bytes;
    d->tx_msgs += c->tx_msgs;
    d->rx_msgs += c->rx_msgs;
    d->weight_bytes += c->weight_bytes;
    d->batches += c->batches;
    d->rows += c->rows;
    d->assignments += c->assignments;
    d->compute_ns += c->compute_ns;
    d->queue_ns += c->queue_ns;
    d->rtt_ns += c->rtt_ns;
    if (c->rtt_max_ns > d->rtt_max_ns) d->rtt_max_ns = c->rtt_max_ns;
}

wr_counters wr_stats_sum(const wr_stats *s, int node, int layer) {
    wr_counters sum = {0};
    for (int n = 0; n < s->n_nodes; n++) {
        if (node >= 0 && n != node) continue;
        for (int l = 0; l < s->n_layers; l++) {
            if (layer >= 0 && l != layer) continue;
            wr_counters_add(&sum, &s->cell[(size_t)n * (size_t)s->n_layers + (size_t)l]);
        }
    }
    return sum;
}

double wr_movement_ratio(const wr_counters *c) {
    if (!c->weight_bytes) return 0.0;
    return (double)(c->tx_bytes + c->rx_bytes) / (double)c->weight_bytes;
}
