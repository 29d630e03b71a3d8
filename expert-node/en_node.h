/* expert-node/en_node.h — an expert node: mounts the (layer, expert) extents it owns, binds a
 * ZeroMQ ROUTER and serves ExpertBatch requests from any number of coordinators with the shared
 * MoE executor (md_moe_exec), answering Hello with Welcome and Ping with Pong.
 *
 * Every request is untrusted: a fault gets an Error reply naming it (and the request's seq), and
 * the node goes on serving everyone else. Work queued by all clients is executed together, one
 * md_moe_exec per (layer, mode, numerics), so an expert's weights are read once for all of them;
 * kernels are batch-invariant, so merging never changes a row's result. */
#ifndef EN_NODE_H
#define EN_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/mw_err.h"

typedef struct en_opts {
    const char *vindex;     /* vindex directory or GGUF file */
    const char *experts;    /* owned set (vx_expert_set_parse syntax); NULL = "all" */
    const char *bind;       /* ZeroMQ endpoint (a wildcard port is resolved) */
    const char *node_id;    /* name in Welcome and logs; NULL = the bound endpoint */
    const char *ready_file; /* written with the bound endpoint once serving; NULL = none */
    int threads;            /* compute threads (>= 1) */
    int numerics;           /* kn_numerics served, or -1 for both */
    int poll_us; /* idle compute threads poll this long before sleeping; -1 = the pool's default */
    bool bind_cpus; /* bind compute thread i to allowed CPU cpu_first + i (kn_pool_bind_cpus) */
    int cpu_first;
    uint32_t capacity; /* most rows per batch (0 = 4096) */
    bool quiet;        /* no per-error log lines */
    bool pin; /* copy the owned experts out of the file mapping onto huge pages (md_pin.h) */
    /* receive limits (wire/wr_guard.h), 0 = defaults: bytes one peer may have received beyond
     * its last whole message (2 × the largest message), and held for all peers (1 GiB, at least
     * 4 × the peer limit) */
    uint64_t peer_limit, recv_limit;
    /* CURVE (wire/wr_curve.h): this node's key pair file and the coordinator keys it admits.
     * Without them a node binds only to this machine's addresses, unless insecure. */
    const char *curve_secret, *allow;
    bool insecure;
} en_opts;

typedef struct en_node en_node;

/* Opens the source restricted to the owned extents (checksums verified), checks every owned
 * expert against the model config and binds the socket. */
int en_node_open(const en_opts *opts, en_node **out, mw_err *err);
/* Serves until en_node_stop. Returns 0 after a stop, -1 on a socket failure. */
int en_node_serve(en_node *n, mw_err *err);
/* Asks en_node_serve to return; async-signal-safe (a byte on a pipe the loop polls). */
void en_node_stop(en_node *n);
void en_node_close(en_node *n);

/* The endpoint actually bound (wildcard ports resolved). */
const char *en_node_endpoint(const en_node *n);

#endif
