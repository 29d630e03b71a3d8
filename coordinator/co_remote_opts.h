/* coordinator/co_remote_opts.h — what the remote backend (co_remote.h) is built from, and the
 * sizes of its read-outs: shared by its public header and the files that implement it
 * (co_remote_internal.h). */
#ifndef CO_REMOTE_OPTS_H
#define CO_REMOTE_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "wire/wr_codec.h"

/* Layer calls whose critical-path tail is kept for its percentiles (co_remote_summary). */
#define CO_TAIL_LOG 4096
/* Nodes that may join a backend while it serves (co_remote_set_nodes), beyond those it began with.
 */
#define CO_JOIN_ROOM 16
/* Per-node round trips by powers of two microseconds: CO_RTT_LOG2 buckets and one for the rest. */
#define CO_RTT_LOG2 24

struct co_loopback;
struct wr_keypair;

typedef struct co_remote_opts {
    /* One ZeroMQ endpoint per node, in node order; "tcp://h:p#KEY" pins the node's CURVE public
     * key (Z85): that node is spoken to over CURVE with `curve`, the coordinator's key pair. */
    const char *const *endpoints; /* copied */
    /* Required when an endpoint names a key; NULL = none. Copied. */
    const struct wr_keypair *curve;
    int n_nodes;
    wr_codec codec;          /* rows in both directions */
    bool exact;              /* per-assignment replies, reduced here in selection order */
    int deadline_ms;         /* per piece: a node that has not answered within it is lost */
    int down_ms;             /* liveness: a node silent this long is down (0 = 750) */
    bool on_missing_skip;    /* experts with no live owner: skipped, gate weights renormalised over
                                the reachable ones (counted, reported), instead of an error */
    int connect_ms;          /* for the handshake */
    const char *fingerprint; /* the coordinator's model */
    int n_layers, n_experts; /* MoE shape of the model */
    /* n_layers flags, 1 where the layer routes to experts (0: a dense layer no node serves, whose
     * experts the coverage check does not ask for); NULL = every layer. Copied. */
    const uint8_t *layer_moe;
    int64_t width;        /* of the experts' rows (md_expert_width): hidden size, or latent */
    const kn_glu *glu;    /* the model's experts' GLU policy (required): a node must run it */
    kn_numerics numerics; /* what the trunk will ask for */
    /* The trunk's thread pool (may be NULL): parked while a layer's replies are awaited, woken as
     * the last ones become readable so its workers are up when the trunk resumes. NULL parks
     * every pool of the process and wakes none. */
    kn_pool *pool;
    /* The ZeroMQ context to connect from; NULL makes one of its own. A caller's context makes its
     * inproc:// endpoints reachable (an expert node in the same process, the unit tests); it
     * must outlive the backend. */
    void *zctx;
    /* Loopback nodes (co_loopback.h) the backend takes over: stopped once its sockets are closed,
     * also when co_remote_new fails. NULL: none. */
    struct co_loopback *loopback;
} co_remote_opts;

#endif
