/* coordinator/co_cluster.c — wires the options, the model and an optional loopback cluster to the
 * remote expert backend. The backend it returns owns the loopback nodes: destroying it closes the
 * sockets first, then stops the nodes. */
#include "coordinator/co_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_loopback.h"
#include "coordinator/co_remote.h"

#define MAX_NODES 1024

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
    char *list; /* --nodes, split in place */
} cluster;

static int run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    md_expert_backend *r = ((cluster *)b->impl)->remote;
    return r->run(r, batch, out, err);
}

static void destroy(md_expert_backend *b) {
    if (!b) return;
    cluster *c = b->impl;
    if (c) {
        if (c->remote) c->remote->destroy(c->remote);
        co_loopback_stop(c->loopback);
        free(c->list);
        free(c);
    }
    free(b);
}

/* Splits "tcp://a:1,tcp://b:2" into endpoints (pointers into c->list). */
static int split_nodes(cluster *c, const char *nodes, const char **ep, int *n, mw_err *err) {
    if (!(c->list = strdup(nodes))) return mw_errf(err, "out of memory");
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(c->list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        if (!*tok) continue;
        if (*n == MAX_NODES) return mw_errf(err, "--nodes: more than %d nodes", MAX_NODES);
        ep[(*n)++] = tok;
    }
    if (!*n) return mw_errf(err, "--nodes '%s': no endpoints", nodes);
    return 0;
}

int co_cluster_create(const co_backend_env *env, md_expert_backend **out, mw_err *err) {
    *out = NULL;
    const co_opts *o = env->opts;
    md_expert_backend *b = calloc(1, sizeof *b);
    cluster *c = calloc(1, sizeof *c);
    const char **ep = calloc(MAX_NODES, sizeof *ep);
    if (!b || !c || !ep) {
        free(b);
        free(c);
        free(ep);
        return mw_errf(err, "out of memory");
    }
    b->name = "remote";
    b->run = run;
    b->destroy = destroy;
    b->impl = c;
    int n_layers = vx_source_n_layers(env->src), n_experts = vx_source_n_experts(env->src);
    const uint64_t fp_bytes = vx_source_fingerprint_cost(env->src);
    int n = 0, rc = -1;
    if (o->loopback > 0) {
        co_loopback_opts lo = {.model = o->model,
                               .n_nodes = o->loopback,
                               .n_layers = n_layers,
                               .n_experts = n_experts,
                               .threads = o->node_threads,
                               .pin = o->pin,
                               .bind_cpus = o->node_affinity,
                               .timeout_ms = ready_timeout_ms(fp_bytes)};
        if (co_loopback_start(&lo, &c->loopback, err)) goto done;
        n = o->loopback;
        memcpy(ep, co_loopback_endpoints(c->loopback), (size_t)n * sizeof *ep);
    } else if (!o->nodes) {
        mw_errf(err, "--experts remote needs --nodes or --loopback");
        goto done;
    } else if (split_nodes(c, o->nodes, ep, &n, err)) {
        goto done;
    }
    if (fp_bytes)
        fprintf(stderr,
                "coordinator: fingerprinting %s for the handshake (%.2f GB to read; a vindex "
                "directory has it precomputed)\n",
                o->model, (double)fp_bytes / 1e9);
    co_remote_opts ro = {.endpoints = ep,
                         .n_nodes = n,
                         .codec = o->wire,
                         .exact = o->exact,
                         .deadline_ms = o->deadline_ms,
                         .connect_ms = o->deadline_ms > 10000 ? o->deadline_ms : 10000,
                         .fingerprint = vx_source_fingerprint(env->src),
                         .n_layers = n_layers,
                         .n_experts = n_experts,
                         .width = env->model->cfg.n_embd,
                         .numerics = o->numerics,
                         .pool = env->pool};
    rc = co_remote_new(&ro, &c->remote, err);
done:
    free(ep);
    if (rc) {
        destroy(b);
        return -1;
    }
    *out = b;
    return 0;
}

void co_cluster_report(const md_expert_backend *b, FILE *f) {
    co_remote_report(((const cluster *)b->impl)->remote, f);
}
