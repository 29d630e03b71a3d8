/* coordinator/co_remote.h — the remote expert backend: the MoE step of every layer goes to expert
 * nodes over ZeroMQ (one DEALER per node).
 *
 * At creation every node is greeted (Hello/Welcome): protocol version, model fingerprint, the
 * experts' width and GLU policy, numerics and the owned (layer, expert) sets are checked, and the
 * ownership map is built: an expert nobody owns is an error naming it; an expert several nodes own
 * is served by its replicas in turn (co_remote_share.c: the least loaded in exact mode, by the
 * row's own selection in partial mode), deterministically.
 *
 * Per layer, one ExpertBatch per involved node (more only when a batch exceeds a node's capacity)
 * goes out before any reply is awaited: the backend's submit half sends them and returns, so the
 * trunk computes the shared experts while they are on the wire, and its wait half collects the
 * replies (run is both); replies are combined in a fixed order: node order for
 * partial sums, selection order (md_moe_accumulate) in exact mode, which makes exact mode
 * bit-identical to the in-process backend for any topology. A node that misses the per-layer
 * deadline, disconnects or answers with an Error ends the request with an error naming it. */
#ifndef CO_REMOTE_H
#define CO_REMOTE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "coordinator/co_remote_opts.h"
#include "model/md_moe.h"
#include "util/mw_err.h"
#include "wire/wr_stats.h"

int co_remote_new(const co_remote_opts *o, md_expert_backend **out, mw_err *err);

/* Totals so far. */
typedef struct co_remote_summary {
    int64_t tokens;         /* rows through the MoE layers */
    wr_counters total;      /* every node and layer */
    double layer_rtt_us;    /* per layer call: first send to last reply, mean */
    double node_compute_us; /* node compute per batch, mean */
    double node_queue_us;   /* node receipt to execution per batch, mean */
    double node_rtt_us;     /* send to reply per batch, mean: compute + wire + wake-ups */
    /* where a layer call's time goes, mean per call (us): splitting the rows by node, encoding
     * and sending the batches, blocked in zmq_poll, receiving and decoding the replies,
     * combining them */
    double split_us, encode_us, send_us, wait_us, decode_us, combine_us;
    /* the reply that completed a layer: its round trip minus the node's queue and compute time,
     * i.e. wire, encode/decode and wake-ups on the critical path (mean per layer call, us) */
    double tail_us;
    double tail_p50_us, tail_p90_us, tail_p99_us; /* its distribution over the last CO_TAIL_LOG */
} co_remote_summary;

co_remote_summary co_remote_summarize(const md_expert_backend *b);

/* Movement accounting so far: n_nodes × n_layers cells (see wire/wr_stats.h). */
const wr_stats *co_remote_stats(const md_expert_backend *b);
/* Tokens (rows) that went through the MoE layers so far. */
int64_t co_remote_tokens(const md_expert_backend *b);
/* Clears the counters (e.g. after a warm-up). */
void co_remote_reset_stats(md_expert_backend *b);

/* Per node, for the server's metrics: its endpoint, whether it is up (connected), its failed
 * exchanges (an Error reply, a bad reply, a missed deadline, a disconnect), and its batch round
 * trips by powers of two microseconds (bucket i: under 2^i us for i < CO_RTT_LOG2; the last
 * bucket: the rest). */
typedef struct co_remote_node_info {
    const char *endpoint; /* NULL for a slot no node has taken */
    bool member;          /* in the fleet: not drained (co_remote_set_nodes) */
    bool up;
    uint64_t errors;
    uint64_t rtt_log2[CO_RTT_LOG2 + 1];
} co_remote_node_info;
int co_remote_n_nodes(const md_expert_backend *b);
/* Node slots: those the backend began with and room for nodes that join (CO_JOIN_ROOM); per-node
 * read-outs may be sized for this many. */
int co_remote_max_nodes(const md_expert_backend *b);

/* Makes the fleet the given endpoints ("#KEY" pinning a node's key, as at creation): a node the
 * list leaves out is drained — no work from the next layer on, its connection closed — unless
 * that would leave an expert that has a live owner without one (then nothing changes and err says
 * which); an endpoint not in the fleet joins — connected now, greeted, and used from the layer
 * after its Welcome (a drained one comes back). The nodes that stay keep their order; new ones
 * come after. Call from the thread that runs the backend, between layers; one line per change
 * goes to log (may be NULL). */
int co_remote_set_nodes(md_expert_backend *b, const char *const *endpoints, int n, FILE *log,
                        mw_err *err);
void co_remote_node(const md_expert_backend *b, int i, co_remote_node_info *out);

/* The cluster's state for a server's /health: nodes up, MoE (layer, expert) cells with a live
 * owner, assignments skipped (--on-missing skip) and pieces re-sent to replicas so far. Reads the
 * nodes' connection events first (non-blocking), so call it from the thread that runs the
 * backend. Degraded: n_up < n_nodes; experts unreachable: covered < cells. */
typedef struct co_remote_health {
    int n_nodes, n_up;
    long cells, covered;
    uint64_t skipped, failovers;
} co_remote_health;
co_remote_health co_remote_get_health(md_expert_backend *b);

/* The endpoints the backend was given, in node order ("#KEY" included; n_nodes of them): to
 * build another backend over the same nodes (e.g. with another codec) or to reach a node
 * directly. */
const char *const *co_remote_endpoints(const md_expert_backend *b, int *n_nodes);

/* The end-of-run report: wire bytes/token, expert weight bytes/token, movement ratio, per-node
 * compute and round-trip time, and round trip per layer. */
void co_remote_report(const md_expert_backend *b, FILE *f);

#endif
