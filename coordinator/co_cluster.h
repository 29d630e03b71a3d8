/* coordinator/co_cluster.h — the remote expert backend (co_remote.h) built from a cluster's
 * options: over the nodes it is given, or over a loopback cluster it starts (co_loopback.h) and
 * hands to the backend, which stops it when it is destroyed, whatever path that is. The options
 * are the cluster's own, so the coordinator's command line (co_backend.c) and the benchmarks fill
 * the same struct; what comes back is the remote backend itself (co_remote_summarize,
 * co_remote_endpoints, co_remote_report take it as it is). */
#ifndef CO_CLUSTER_H
#define CO_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "model/md_moe.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"
#include "wire/wr_codec.h"

typedef struct co_cluster_opts {
    /* The nodes: n_nodes endpoints in node order, or, with endpoints NULL, `loopback` nodes
     * started on 127.0.0.1 that open `model` and split the experts evenly. */
    const char *const *endpoints;
    int n_nodes;
    int loopback;
    const char *model;  /* vindex directory or GGUF file, as loopback nodes open it */
    int node_threads;   /* per loopback node; 0 = one per CPU */
    bool node_pin;      /* loopback nodes copy their experts onto huge pages */
    bool node_affinity; /* loopback nodes bind their threads to CPUs (co_loopback_opts) */
    int ready_ms;       /* for loopback nodes to become ready; 0 = from the source's size */
    /* CURVE: the coordinator's key pair file (nodes are pinned by "#KEY" on their endpoints);
     * `curve` with a loopback cluster runs it on CURVE with keys made for the run. */
    const char *curve_secret;
    bool curve;
    /* The wire. */
    wr_codec codec;       /* rows in both directions */
    bool exact;           /* per-assignment replies reduced here in selection order */
    int deadline_ms;      /* per layer */
    int down_ms;          /* co_remote_opts; 0: 750 */
    bool on_missing_skip; /* co_remote_opts */
    int replicas;         /* loopback: owners per expert (0 or 1: one) */
    int connect_ms;       /* for the handshake; 0 = the deadline, at least 10 s */
    /* The model the nodes must serve, and the trunk that will call the backend. */
    const vx_source *src; /* fingerprint and MoE shape */
    int64_t width;        /* of the experts' rows (md_expert_width) */
    const kn_glu *glu;    /* the experts' GLU policy: every node must run it */
    kn_numerics numerics;
    kn_pool *pool; /* the trunk's pool, parked while replies are awaited (may be NULL) */
} co_cluster_opts;

/* The remote backend over the cluster (co_remote_new), its loopback nodes its own. */
int co_cluster_create(const co_cluster_opts *o, md_expert_backend **out, mw_err *err);

#endif
