/* wire/wr_stats.h — movement accounting: wire bytes of expert traffic against expert weight bytes
 * read, per node and per layer.
 *
 * movement_ratio (docs/architecture.md) = expert wire bytes (both directions, every part as sent:
 * envelope and frames, compressed size when compressed) ÷ expert weight bytes read to serve them
 * (as stored). Handshakes and pings are control traffic, counted apart and outside the ratio. */
#ifndef WR_STATS_H
#define WR_STATS_H

#include <stdint.h>

#include "util/mw_err.h"

typedef struct wr_counters {
    uint64_t tx_bytes, rx_bytes; /* wire bytes sent / received */
    uint64_t tx_msgs, rx_msgs;
    uint64_t weight_bytes;       /* expert weight bytes read, as stored */
    uint64_t batches;            /* request / reply exchanges */
    uint64_t rows, assignments;  /* activation rows and (row, expert) pairs carried */
    uint64_t compute_ns;         /* node time executing the batches */
    uint64_t queue_ns;           /* node time from receiving a batch to executing it */
    uint64_t rtt_ns, rtt_max_ns; /* sender's send-to-reply time (sum, worst) */
} wr_counters;

/* n_nodes × n_layers cells of expert traffic plus one control cell per node. */
typedef struct wr_stats {
    int n_nodes, n_layers;
    wr_counters *cell; /* [node * n_layers + layer] */
    wr_counters *ctrl; /* [node] */
} wr_stats;

int wr_stats_init(wr_stats *s, int n_nodes, int n_layers, mw_err *err);
void wr_stats_free(wr_stats *s);
void wr_stats_reset(wr_stats *s);

/* The cell of (node, layer); NULL when out of range. */
wr_counters *wr_stats_at(wr_stats *s, int node, int layer);
wr_counters *wr_stats_ctrl(wr_stats *s, int node);

/* Sums cells: node < 0 means every node, layer < 0 every layer. Control traffic is not included. */
wr_counters wr_stats_sum(const wr_stats *s, int node, int layer);
void wr_counters_add(wr_counters *dst, const wr_counters *src);

/* (tx + rx) / weight_bytes; 0 when no weights were read. */
double wr_movement_ratio(const wr_counters *c);

#endif
