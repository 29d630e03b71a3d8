/* coordinator/co_loopback.h — a local cluster for `--loopback N`: starts N expert-node processes on
 * 127.0.0.1 that split the experts evenly (node i owns experts [i·E/N, (i+1)·E/N) of every
 * layer), waits until each is serving, and stops them all again, also on error paths. The nodes
 * die with the coordinator (PR_SET_PDEATHSIG) should it be killed. */
#ifndef CO_LOOPBACK_H
#define CO_LOOPBACK_H

#include <stdbool.h>

#include "util/mw_err.h"

typedef struct co_loopback_opts {
    const char *model; /* vindex directory or GGUF file, as the nodes will open it */
    int n_nodes;
    int n_layers, n_experts;
    int threads;    /* per node; 0 = one per online CPU (the nodes' compute overlaps little with
                       the coordinator's: each side sleeps while the other works) */
    int timeout_ms; /* for every node to become ready */
    bool pin;       /* nodes copy their experts onto huge pages (expert-node --pin) */
    /* Node i binds its threads to CPUs from i·C/N on (expert-node --affinity), C the CPUs this
     * process may use. Nodes sharing a machine each run a full pool; left to itself the scheduler
     * often queues a node's woken workers behind its own busy thread while another core idles.
     * Bound, every core holds one thread of each node, so a node that finishes first leaves whole
     * cores to the other. */
    bool bind_cpus;
    /* (Loopback nodes always run with --poll-us 0: an idle thread of one node polling for its
     * next job would take time from the other node's threads on the same core.) */
    const char *program; /* expert-node binary; NULL = next to this executable, or
                            $MOEWIRE_EXPERT_NODE */
    /* CURVE: each node gets a fresh key pair and admits only this coordinator public key (Z85);
     * its endpoint then carries its public key, "tcp://127.0.0.1:P#KEY" (co_remote_opts). NULL:
     * plain loopback. */
    const char *curve_client;
    /* Owners per expert: node i serves the shares of nodes i .. i+R-1 (mod N); 0 or 1 = one. */
    int replicas;
} co_loopback_opts;

typedef struct co_loopback co_loopback;

int co_loopback_start(const co_loopback_opts *o, co_loopback **out, mw_err *err);
/* The nodes' bound endpoints, in node order ("#KEY" appended with CURVE). */
const char *const *co_loopback_endpoints(const co_loopback *lb);
/* SIGTERM, up to 2 s for a clean exit, then SIGKILL; removes the ready files. NULL is a no-op. */
void co_loopback_stop(co_loopback *lb);

#endif
