/* coordinator/co_metrics.h — the server's figures and their /metrics page in the Prometheus text
 * exposition format 0.0.4, written by hand: counters, gauges and fixed-bucket histograms.
 *
 * Writers are the loop thread (requests by status) and the model thread (tokens, latencies, the
 * step, the backend's snapshot); one mutex guards it all, held for a few additions at a time. */
#ifndef CO_METRICS_H
#define CO_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "coordinator/co_buf.h"
#include "util/mw_err.h"

typedef struct co_metrics co_metrics;

/* n_nodes: per-node series for that many nodes (0: in-process experts); the model's MoE shape
 * (layers, experts, experts per token) for the unique-experts figures. */
int co_metrics_new(int n_nodes, int n_layers, int n_expert, int k, co_metrics **out, mw_err *err);
void co_metrics_free(co_metrics *m);

/* A finished HTTP exchange: the route ("/v1/completions", or "other") and its status. */
void co_metrics_request(co_metrics *m, const char *route, int status);
/* The HTTP front now: connections open and request bytes held (co_http's budget). */
void co_metrics_http(co_metrics *m, int conns, uint64_t held_bytes);
/* A stream whose client fell behind: its sequence paused, or cancelled for staying behind. */
void co_metrics_stream_paused(co_metrics *m);
void co_metrics_stream_stalled(co_metrics *m);

/* Per job: the prompt when it is admitted, each generated token, its first-token latency and each
 * gap between tokens (seconds). */
void co_metrics_prompt_tokens(co_metrics *m, int64_t n);
void co_metrics_generated_tokens(co_metrics *m, int64_t n);
void co_metrics_ttft(co_metrics *m, double s);
void co_metrics_itl(co_metrics *m, double s);

/* One scheduler step. */
typedef struct co_step_stats {
    int64_t rows, prefill_rows, decode_rows;
    int active, queued;
    uint64_t kv_bytes, kv_used_bytes;
    double seconds;
    const int32_t *unique_experts; /* per layer: distinct experts the step's rows chose */
    int n_layers;
    bool failed;
    /* ping-pong micro-batches (model/md_lanes.h): the step's count (1: run whole; 0: not known)
     * and each one's rows */
    int micro_batches;
    const int64_t *micro_rows;
    /* its MoE layers' exchanges, submit to results in hand, and the part the step sat blocked on
     * them (md_moe_timing; both 0 with in-process experts) */
    double exchange_s, blocked_s;
} co_step_stats;
/* Micro-batches a step is counted in at most (MD_LANES_MAX). */
#define CO_MICRO_MAX 4
void co_metrics_step(co_metrics *m, const co_step_stats *st);
/* Queue and activity between steps (submission, admission). */
void co_metrics_queue(co_metrics *m, int active, int queued);
/* KV bytes holding live positions, set again once finished sequences have left (a step sets it
 * too, but none runs once the server is idle). */
void co_metrics_kv_used(co_metrics *m, uint64_t bytes);
/* The prompt cache's figures (co_pcache.h), as they stand. */
typedef struct co_prefix_cache_stats {
    uint64_t lookups, hits, tokens_reused, evicted_blocks, bytes, blocks, budget;
} co_prefix_cache_stats;
void co_metrics_prefix_cache(co_metrics *m, const co_prefix_cache_stats *st);

/* The expert backend's totals so far (a snapshot, replacing the last). */
/* Round trips by powers of two microseconds: bucket i holds those under 2^i us (i < 24), the last
 * the rest. */
#define CO_RTT_BUCKETS 24
typedef struct co_node_stats {
    const char *endpoint; /* NULL: a slot no node has taken (nothing is written for it) */
    bool member;          /* in the fleet (a drained node is not: /health does not count it) */
    bool up;
    uint64_t tx_bytes, rx_bytes, weight_bytes, rows, batches, errors;
    uint64_t rtt_buckets[CO_RTT_BUCKETS + 1]; /* per-bucket counts (not cumulative), last +Inf */
    double rtt_sum_s;
} co_node_stats;
/* One node's share of one layer: rows and (row, expert) assignments sent, traffic each way, expert
 * weight bytes read. */
typedef struct co_cell_stats {
    uint64_t rows, assignments, tx_bytes, rx_bytes, weight_bytes;
} co_cell_stats;
typedef struct co_backend_stats {
    uint64_t tx_bytes, rx_bytes; /* expert traffic, every node */
    uint64_t weight_bytes;       /* expert weight bytes read */
    const co_node_stats *nodes;  /* n_nodes given at creation, or NULL */
    /* n_nodes × n_layers cells, node-major: room the caller gives the backend to fill (NULL:
     * none), read by co_metrics_backend */
    co_cell_stats *cells;
    uint64_t failovers; /* batches re-sent to replicas of a lost node */
    uint64_t skipped;   /* assignments left out for want of a live owner (--on-missing skip) */
} co_backend_stats;
void co_metrics_backend(co_metrics *m, const co_backend_stats *b);

/* Health: whether every expert has a live owner (or experts are in process). */
void co_metrics_set_ready(co_metrics *m, bool ready);
bool co_metrics_ready(co_metrics *m);
/* Expert nodes up, of n_nodes (both 0 with experts in process), from the last backend figures. */
void co_metrics_nodes_up(co_metrics *m, int *up, int *n_nodes);

/* The whole page. */
void co_metrics_write(co_metrics *m, co_buf *out);

#endif
