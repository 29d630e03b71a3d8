/* coordinator/co_cluster.c — a cluster's options made into the remote backend's: the coordinator's
 * CURVE key pair, the loopback nodes when asked for (started here, handed to the backend), the
 * model's fingerprint and MoE shape, and the timeouts. */
#include "coordinator/co_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_loopback.h"
#include "coordinator/co_remote.h"
#include "wire/wr_curve.h"

#define MAX_NODES 1024

/* How long loopback nodes may take to become ready: mapping and checking their experts, plus the
 * fingerprint where it must be computed (a GGUF file: every node reads all of it, sharing the
 * cores), so the allowance grows with the bytes that reads. */
static int ready_timeout_ms(uint64_t fp_bytes) {
    const double ms = 120000 + (double)fp_bytes / 1e9 * 5000;
    return ms < 3600000 ? (int)ms : 3600000;
}

/* The coordinator's key pair: its own (curve_secret), or a fresh one for a loopback cluster on
 * CURVE; *has stays false without CURVE. */
static int cluster_key(const co_cluster_opts *o, wr_keypair *key, bool *has, mw_err *err) {
    *has = false;
    if (o->curve_secret) {
        if (wr_keypair_read(o->curve_secret, key, err)) return -1;
    } else if (o->curve && !o->endpoints) {
        if (wr_keypair_new(key, err)) return -1;
    } else if (o->curve) {
        return mw_errf(err, "--curve with --nodes needs --curve-secret (the coordinator's key "
                            "pair) and each node's key (--nodes tcp://h:p#KEY)");
    } else {
        return 0;
    }
    *has = true;
    return 0;
}

static int start_loopback(const co_cluster_opts *o, const wr_keypair *key, co_loopback **lb,
                          mw_err *err) {
    const uint64_t fp_bytes = vx_source_fingerprint_cost(o->src);
    co_loopback_opts lo = {.model = o->model,
                           .n_nodes = o->loopback,
                           .n_layers = vx_source_n_layers(o->src),
                           .n_experts = vx_source_n_experts(o->src),
                           .threads = o->node_threads,
                           .pin = o->node_pin,
                           .bind_cpus = o->node_affinity,
                           .timeout_ms = o->ready_ms ? o->ready_ms : ready_timeout_ms(fp_bytes),
                           .curve_client = o->curve && key ? key->pub : NULL,
                           .replicas = o->replicas};
    return co_loopback_start(&lo, lb, err);
}

/* The remote backend's options from the cluster's; the nodes, the key and the loopback are the
 * caller's to add. */
static co_remote_opts remote_opts(const co_cluster_opts *o, const uint8_t *moe) {
    return (co_remote_opts){.codec = o->codec,
                            .exact = o->exact,
                            .deadline_ms = o->deadline_ms,
                            .down_ms = o->down_ms, /* the liveness channel's: loopback too */
                            .on_missing_skip = o->on_missing_skip,
                            .connect_ms = o->connect_ms            ? o->connect_ms
                                          : o->deadline_ms > 10000 ? o->deadline_ms
                                                                   : 10000,
                            .fingerprint = vx_source_fingerprint(o->src),
                            .n_layers = vx_source_n_layers(o->src),
                            .n_experts = vx_source_n_experts(o->src),
                            .layer_moe = moe,
                            .width = o->width,
                            .glu = o->glu,
                            .numerics = o->numerics,
                            .pool = o->pool};
}

int co_cluster_create(const co_cluster_opts *o, md_expert_backend **out, mw_err *err) {
    *out = NULL;
    const int n = o->endpoints ? o->n_nodes : o->loopback;
    if (!o->endpoints && o->loopback < 1)
        return mw_errf(err, "a cluster needs nodes or a loopback count");
    if (n < 1 || n > MAX_NODES)
        return mw_errf(err, "a cluster has 1 to %d nodes, not %d", MAX_NODES, n);
    /* the layers that route to experts: a model's leading dense layers have none to serve */
    const int n_layers = vx_source_n_layers(o->src);
    uint8_t *moe = malloc(n_layers > 0 ? (size_t)n_layers : 1);
    if (!moe) return mw_errf(err, "out of memory");
    for (int l = 0; l < n_layers; l++) moe[l] = vx_source_layer_has_experts(o->src, l);
    wr_keypair key;
    bool has_key;
    co_loopback *lb = NULL;
    int rc = cluster_key(o, &key, &has_key, err);
    if (!rc && !o->endpoints) rc = start_loopback(o, has_key ? &key : NULL, &lb, err);
    if (!rc) {
        const uint64_t fp_bytes = vx_source_fingerprint_cost(o->src);
        if (fp_bytes)
            fprintf(stderr,
                    "coordinator: fingerprinting %s for the handshake (%.2f GB to read; a vindex "
                    "directory has it precomputed)\n",
                    o->model ? o->model : "the model", (double)fp_bytes / 1e9);
        co_remote_opts ro = remote_opts(o, moe);
        ro.endpoints = lb ? co_loopback_endpoints(lb) : o->endpoints;
        ro.n_nodes = n;
        ro.curve = has_key ? &key : NULL;
        ro.loopback = lb; /* the backend's from here on, also when it fails */
        rc = co_remote_new(&ro, out, err);
    }
    free(moe);
    memset(&key, 0, sizeof key);
    return rc;
}
