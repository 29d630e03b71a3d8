/* vindex/vx_plan.h — expert placement: which hosts hold which (layer, expert) extents.
 *
 * The planner works per MoE layer on the expected load of each expert (rows per token, from
 * routing statistics, or k/E each without them): every expert gets at least min_owners copies on
 * distinct hosts, the hottest get more (hot replicas, while the memory budgets and the policy
 * allow), and the copies are packed onto hosts so that each host's expected load over its speed
 * (its read bandwidth) is as even as the layer allows; then experts that fire together are moved
 * onto one host where a swap leaves the layer's worst host no worse. A copy of an expert serves
 * an equal share of its rows (the coordinator spreads each expert's rows over its live owners).
 * The model's numbers (layers, extent sizes) and the fleet's (memory, speed, links) are plain
 * inputs, so the algorithm is tested on crafted statistics without any file. Docs:
 * docs/fleet.md, "Placement". */
#ifndef VX_PLAN_H
#define VX_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"
#include "vindex/vx_rstats.h"

#define VX_PLAN_MAX_HOSTS 64

typedef struct vx_plan_host {
    const char *name;
    double memory_bytes; /* budget for expert extents */
    double read_gbs;     /* speed: GB/s of weights it streams */
    double rtt_us, gbit; /* its link to the coordinator */
} vx_plan_host;

typedef struct vx_plan_in {
    int n_layer, n_expert, k;
    const uint64_t *extent_bytes; /* n_layer: one extent's bytes (0: a layer without experts) */
    const double *load; /* n_layer × n_expert: rows per token routed to the expert (NULL: k/E) */
    const vx_rstats_layer *stats; /* n_layer, for the pairs to keep together (may be NULL) */
    int n_host;
    const vx_plan_host *hosts;
    int min_owners, max_owners;
    double replica_memory; /* 0 .. 1: share of the memory left after min_owners copies */
    /* the prediction: the coordinator's trunk and the rows on the wire */
    uint64_t dense_bytes;
    double coord_gbs; /* the coordinator's read bandwidth (0: unknown, no tok/s predicted) */
    int64_t width;    /* values per row on the wire */
    int wire_bytes;   /* bytes per value (f32 4, f16 / bf16 2) */
    bool no_colocate; /* skip the pass that keeps pairs together (tests) */
    void (*progress)(void *ctx, uint64_t done, uint64_t total); /* per layer placed; may be NULL */
    void *progress_ctx;
} vx_plan_in;

/* What the plan predicts for one layer. */
typedef struct vx_plan_layer {
    bool moe;
    double balance;       /* (Σ load / Σ speed) / max_h (load_h / speed_h): 1 is perfect */
    double range_balance; /* the same for contiguous expert ranges split by memory (reference) */
    int replicas;         /* copies beyond one per expert */
    int pairs_kept, pairs_total; /* top pairs that share a host, of those considered */
    double rt_us;                /* predicted round trip of a one-token step */
    double nodes_per_row;        /* expected hosts a row goes to */
} vx_plan_layer;

typedef struct vx_plan {
    int n_layer, n_expert, n_host;
    uint64_t *owners;      /* n_layer × n_expert host masks (bit h: host h holds it) */
    double *load_share;    /* n_layer × n_host: expected rows per token each host serves */
    uint64_t *host_bytes;  /* n_host: bytes of extents assigned */
    vx_plan_layer *layers; /* n_layer */
    double tok_s;          /* predicted one-sequence decode speed (0 when not predicted) */
    double wire_per_token, read_per_token; /* bytes; their quotient is the movement ratio */
    double balance_min, balance_mean, range_balance_mean;
} vx_plan;

/* Plans; -1 with the numbers when the fleet cannot hold the model (or min_owners copies of it). */
int vx_plan_run(const vx_plan_in *in, vx_plan *out, mw_err *err);
void vx_plan_free(vx_plan *p);

/* ---- `vindex plan`: a topology file and a model in, a fleet's files out ---------------------- */

typedef struct vx_fleet_opts {
    const char *topology; /* the topology file (vindex/vx_topology.h) */
    const char *model;    /* the model (vindex or GGUF) to plan for; NULL: the topology's */
    const char *stats;    /* a routing trace or `routing-stats --json` output; NULL: uniform */
    const char *out;      /* the directory written */
    void (*progress)(void *ctx, uint64_t done, uint64_t total); /* layers planned; may be NULL */
    void *progress_ctx;
} vx_fleet_opts;

/* Plans the fleet and writes into out (created when missing; the plan's own files replaced): one
 * shard file per host (`expert-node --experts @shard-NAME.json`), plan.json, report.txt (also
 * printed on `report`), nodes.tsv, coordinator.tsv and coordinator.nodes (what deploy/moewire
 * and `coordinator serve --nodes @FILE` read). */
int vx_fleet_plan(const vx_fleet_opts *o, FILE *report, mw_err *err);

#endif
