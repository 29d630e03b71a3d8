/* coordinator/co_backend.h — the expert backends the coordinator can run with, as a table:
 * --experts NAME picks a row, and the row builds an md_expert_backend for the loaded model,
 * reports on it at the end of a run and reads out its figures for a server's /metrics. Its
 * options are its own; the command line fills them (co_cli_backend_opts). */
#ifndef CO_BACKEND_H
#define CO_BACKEND_H

#include <stdbool.h>
#include <stdio.h>

#include "coordinator/co_metrics.h"
#include "kernels/kn.h"
#include "model/md_model.h"
#include "model/md_moe.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"
#include "wire/wr_codec.h"

/* What the backends are configured with. */
typedef struct co_backend_opts {
    const char *model;    /* GGUF file or vindex directory, as loopback nodes open it */
    kn_numerics numerics; /* the trunk's */
    bool pin;             /* experts (local, or the loopback nodes') onto huge pages */
    /* remote: the nodes */
    const char *nodes;  /* comma-separated endpoints, or NULL */
    int loopback;       /* or this many nodes started on 127.0.0.1 */
    int node_threads;   /* per loopback node; 0 = one per CPU */
    bool node_affinity; /* loopback nodes bind their threads to CPUs */
    int replicas;       /* loopback: owners per expert */
    /* remote: the wire */
    wr_codec wire;
    bool exact;
    int deadline_ms;
    int down_ms;
    bool on_missing_skip;
    const char *curve_secret; /* the coordinator's CURVE key pair file */
    bool curve;               /* loopback nodes on CURVE, with keys made for the run */
} co_backend_opts;

/* What a backend may use to build itself. */
typedef struct co_backend_env {
    const co_backend_opts *opts;
    const vx_source *src;
    const md_model *model;
    kn_pool *pool;
} co_backend_env;

typedef struct co_backend_kind {
    const char *name;
    const char *help;
    /* Whether the coordinator must map the source's experts (true for in-process execution). */
    bool needs_local_experts;
    int (*create)(const co_backend_env *env, md_expert_backend **out, mw_err *err);
    /* Optional end-of-run report (wire and movement figures); NULL when there is none. */
    void (*report)(const md_expert_backend *b, FILE *f);
    /* The expert nodes behind the backend, for per-node series (NULL: none). */
    int (*n_nodes)(const md_expert_backend *b);
    /* Its totals so far into *st (and nodes[0 .. n_nodes), pointed to by st->nodes); returns
     * whether every expert can be reached. Called from the thread that runs the backend. */
    bool (*metrics)(md_expert_backend *b, co_backend_stats *st, co_node_stats *nodes);
    /* Optional: makes the nodes those of the --nodes list given (co_remote_set_nodes: missing
     * ones drained, new ones joining); one line per change on log. NULL: no nodes to change. */
    int (*set_nodes)(md_expert_backend *b, const char *list, FILE *log, mw_err *err);
} co_backend_kind;

const co_backend_kind *co_backend_find(const char *name);
const char *co_backend_names(void);

#endif
