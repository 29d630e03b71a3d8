/* coordinator/co_cluster.c — builds the remote expert backend from the cluster's options, over
 * the given nodes or a loopback cluster. The backend it returns owns the loopback nodes:
 * destroying it closes the sockets first, then stops the nodes. */
#include "coordinator/co_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_loopback.h"
#include "coordinator/co_remote.h"
#include "wire/wr_curve.h"

#define MAX_NODES 1024

/* --down-ms on a loopback cluster unless given. Its nodes compute on the coordinator's own cores,
 * several threads to a core: a starved node's I/O thread, or the coordinator's, can leave a PING
 * unanswered past 750 ms on a loaded machine (a node went down mid-run in the serving benchmark
 * at the default). A dead loopback node is still seen at once (its connection resets); only a
 * hung one waits this long. Remote clusters keep co_remote's 750. */
#define LOOPBACK_DOWN_MS 5000

/* How long loopback nodes may take to become ready: mapping and checking their experts, plus the
 * fingerprint where it must be computed (a GGUF file: every node reads all of it, sharing the
 * cores): 2 minutes, and 5 seconds more per GB that reads. */
static int ready_timeout_ms(uint64_t fp_bytes) {
    const double ms = 120000 + (double)fp_bytes / 1e9 * 5000;
    return ms < 3600000 ? (int)ms : 3600000;
}

typedef struct cluster {
    md_expert_backend *remote;
    co_loopback *loopback;
    char **endpoints; /* copies, in node order */
    int n_nodes;
    wr_keypair key; /* the coordinator's CURVE pair: --curve-secret, or made for a loopback run */
    bool has_key;
} cluster;

static int run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    md_expert_backend *r = ((cluster *)b->impl)->remote;
    return r->run(r, batch, out, err);
}

static int submit(md_expert_backend *b, const md_moe_batch *batch, mw_err *err) {
    md_expert_backend *r = ((cluster *)b->impl)->remote;
    return r->submit(r, batch, err);
}

static int wait(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    md_expert_backend *r = ((cluster *)b->impl)->remote;
    return r->wait(r, batch, out, err);
}

static void destroy(md_expert_backend *b) {
    if (!b) return;
    cluster *c = b->impl;
    if (c) {
        if (c->remote) c->remote->destroy(c->remote);
        co_loopback_stop(c->loopback);
        for (int i = 0; c->endpoints && i < c->n_nodes; i++) free(c->endpoints[i]);
        free(c->endpoints);
        memset(&c->key, 0, sizeof c->key);
        free(c);
    }
    free(b);
}

/* The nodes: started here (loopback) or as given; their endpoints are copied into c. */
static int find_nodes(const co_cluster_opts *o, cluster *c, mw_err *err) {
    const char *const *ep = o->endpoints;
    int n = o->n_nodes;
    if (!ep) {
        if (o->loopback < 1) return mw_errf(err, "a cluster needs nodes or a loopback count");
        const uint64_t fp_bytes = vx_source_fingerprint_cost(o->src);
        co_loopback_opts lo = {.model = o->model,
                               .n_nodes = o->loopback,
                               .n_layers = vx_source_n_layers(o->src),
                               .n_experts = vx_source_n_experts(o->src),
                               .threads = o->node_threads,
                               .pin = o->node_pin,
                               .bind_cpus = o->node_affinity,
                               .timeout_ms = o->ready_ms ? o->ready_ms : ready_timeout_ms(fp_bytes),
                               .curve_client = o->curve && c->has_key ? c->key.pub : NULL,
                               .replicas = o->replicas};
        if (co_loopback_start(&lo, &c->loopback, err)) return -1;
        ep = co_loopback_endpoints(c->loopback);
        n = o->loopback;
    }
    if (n < 1 || n > MAX_NODES)
        return mw_errf(err, "a cluster has 1 to %d nodes, not %d", MAX_NODES, n);
    if (!(c->endpoints = calloc((size_t)n, sizeof *c->endpoints)))
        return mw_errf(err, "out of memory");
    c->n_nodes = n;
    for (int i = 0; i < n; i++)
        if (!(c->endpoints[i] = strdup(ep[i]))) return mw_errf(err, "out of memory");
    return 0;
}

int co_cluster_create(const co_cluster_opts *o, md_expert_backend **out, mw_err *err) {
    *out = NULL;
    md_expert_backend *b = calloc(1, sizeof *b);
    cluster *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return mw_errf(err, "out of memory");
    }
    b->name = "remote";
    b->run = run;
    b->submit = submit;
    b->wait = wait;
    b->destroy = destroy;
    b->impl = c;
    /* The coordinator's key pair: its own, or a fresh one for a loopback cluster on CURVE. */
    if (o->curve_secret) {
        if (wr_keypair_read(o->curve_secret, &c->key, err)) {
            destroy(b);
            return -1;
        }
        c->has_key = true;
    } else if (o->curve && !o->endpoints) {
        if (wr_keypair_new(&c->key, err)) {
            destroy(b);
            return -1;
        }
        c->has_key = true;
    } else if (o->curve) {
        destroy(b);
        return mw_errf(err, "--curve with --nodes needs --curve-secret (the coordinator's key "
                            "pair) and each node's key (--nodes tcp://h:p#KEY)");
    }
    if (find_nodes(o, c, err)) {
        destroy(b);
        return -1;
    }
    const uint64_t fp_bytes = vx_source_fingerprint_cost(o->src);
    if (fp_bytes)
        fprintf(stderr,
                "coordinator: fingerprinting %s for the handshake (%.2f GB to read; a vindex "
                "directory has it precomputed)\n",
                o->model ? o->model : "the model", (double)fp_bytes / 1e9);
    /* the layers that route to experts: a model's leading dense layers have none to serve */
    const int n_layers = vx_source_n_layers(o->src);
    uint8_t *moe = malloc(n_layers > 0 ? (size_t)n_layers : 1);
    if (!moe) {
        destroy(b);
        return mw_errf(err, "out of memory");
    }
    for (int l = 0; l < n_layers; l++) moe[l] = vx_source_layer_has_experts(o->src, l);
    co_remote_opts ro = {.endpoints = (const char *const *)c->endpoints,
                         .curve = c->has_key ? &c->key : NULL,
                         .n_nodes = c->n_nodes,
                         .codec = o->codec,
                         .exact = o->exact,
                         .deadline_ms = o->deadline_ms,
                         .down_ms = o->down_ms        ? o->down_ms
                                    : o->loopback > 0 ? LOOPBACK_DOWN_MS
                                                      : 0,
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
    const int rc = co_remote_new(&ro, &c->remote, err);
    free(moe);
    if (rc) {
        destroy(b);
        return -1;
    }
    *out = b;
    return 0;
}

md_expert_backend *co_cluster_remote(md_expert_backend *b) {
    return ((cluster *)b->impl)->remote;
}

const char *const *co_cluster_endpoints(const md_expert_backend *b, int *n_nodes) {
    const cluster *c = b->impl;
    *n_nodes = c->n_nodes;
    return (const char *const *)c->endpoints;
}

void co_cluster_report(const md_expert_backend *b, FILE *f) {
    co_remote_report(((const cluster *)b->impl)->remote, f);
}
