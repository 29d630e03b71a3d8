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

#include <stdint.h>

#include "expert-node/en_opts.h"
#include "util/mw_err.h"

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

/* Where the serve loop's time went so far (ns, summed) and the batches it answered: receiving,
 * parsing + checking + grouping, executing, encoding the replies, sending them. Read it once
 * en_node_serve has returned (bench/bench_rows.c). */
typedef struct en_node_timing {
    uint64_t batches, recv_ns, handle_ns, compute_ns, encode_ns, send_ns;
} en_node_timing;
en_node_timing en_node_get_timing(const en_node *n);

#endif
