/* coordinator/co_backend.c — the backend table. "local" runs the experts in this process through
 * the same executor an expert node runs (model/md_local.h); "remote" sends them to expert nodes
 * (coordinator/co_remote.h), built through co_cluster.h from the options it was given. */
#include "coordinator/co_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_cluster.h"
#include "coordinator/co_remote.h"
#include "model/md_local.h"
#include "util/mw_names.h"

#define MAX_NODES 1024

/* A node's round trips go to /metrics bucket for bucket. */
_Static_assert(CO_RTT_BUCKETS == CO_RTT_LOG2, "co_node_stats and co_remote_node_info buckets");

/* ---- local ---------------------------------------------------------------------------------- */

static int create_local(const co_backend_env *env, md_expert_backend **out, mw_err *err) {
    if (md_local_backend_new(env->src, &env->model->cfg, env->pool, out, err)) return -1;
    return env->opts->pin ? md_local_backend_pin(*out, err) : 0;
}

static bool local_metrics(md_expert_backend *b, co_backend_stats *st, co_node_stats *nodes) {
    (void)nodes;
    *st = (co_backend_stats){.weight_bytes = md_local_backend_weight_bytes(b)};
    return true;
}

/* ---- remote --------------------------------------------------------------------------------- */

/* Splits --nodes "tcp://a:1,tcp://b:2" in place (list is a copy) into ep[0 .. *n). */
static int split_nodes(char *list, const char *nodes, const char **ep, int *n, mw_err *err) {
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        if (!*tok) continue;
        if (*n == MAX_NODES) return mw_errf(err, "--nodes: more than %d nodes", MAX_NODES);
        ep[(*n)++] = tok;
    }
    if (!*n) return mw_errf(err, "--nodes '%s': no endpoints", nodes);
    return 0;
}

/* The command line's cluster: --nodes or --loopback, --wire, --exact, --deadline-ms and the
 * loopback nodes' options. */
static int create_remote(const co_backend_env *env, md_expert_backend **out, mw_err *err) {
    const co_backend_opts *o = env->opts;
    *out = NULL;
    if (o->loopback < 1 && !o->nodes)
        return mw_errf(err, "--experts remote needs --nodes or --loopback");
    co_cluster_opts co = {.loopback = o->loopback,
                          .model = o->model,
                          .node_threads = o->node_threads,
                          .node_pin = o->pin,
                          .node_affinity = o->node_affinity,
                          .codec = o->wire,
                          .exact = o->exact,
                          .deadline_ms = o->deadline_ms,
                          .curve_secret = o->curve_secret,
                          .curve = o->curve,
                          .down_ms = o->down_ms,
                          .on_missing_skip = o->on_missing_skip,
                          .replicas = o->replicas,
                          .src = env->src,
                          .width = md_expert_width(&env->model->cfg),
                          .glu = &env->model->cfg.glu,
                          .numerics = o->numerics,
                          .pool = env->pool};
    char *list = NULL;
    const char **ep = NULL;
    int rc = -1;
    if (o->loopback < 1) {
        list = strdup(o->nodes);
        ep = calloc(MAX_NODES, sizeof *ep);
        if (!list || !ep) {
            mw_errf(err, "out of memory");
            goto done;
        }
        if (split_nodes(list, o->nodes, ep, &co.n_nodes, err)) goto done;
        co.endpoints = ep;
    }
    rc = co_cluster_create(&co, out, err);
done:
    free(list);
    free(ep);
    return rc;
}

/* The wire totals, every node's figures, and whether every expert has a live owner (a node down
 * with replicas is degraded, not unready). */
static bool remote_metrics(md_expert_backend *b, co_backend_stats *st, co_node_stats *nodes) {
    const wr_stats *ws = co_remote_stats(b);
    const wr_counters all = wr_stats_sum(ws, -1, -1);
    co_cell_stats *cells = st->cells;
    const co_remote_health h = co_remote_get_health(b);
    *st = (co_backend_stats){.tx_bytes = all.tx_bytes,
                             .rx_bytes = all.rx_bytes,
                             .weight_bytes = all.weight_bytes,
                             .nodes = nodes,
                             .cells = cells,
                             .failovers = h.failovers,
                             .skipped = h.skipped};
    for (int i = 0; cells && i < ws->n_nodes; i++)
        for (int y = 0; y < ws->n_layers; y++) {
            const wr_counters *c = &ws->cell[i * ws->n_layers + y];
            cells[i * ws->n_layers + y] =
                (co_cell_stats){c->rows, c->assignments, c->tx_bytes, c->rx_bytes, c->weight_bytes};
        }
    for (int i = 0, n = co_remote_max_nodes(b); i < n; i++) {
        const wr_counters c = wr_stats_sum(ws, i, -1);
        co_remote_node_info info;
        co_remote_node(b, i, &info);
        co_node_stats *ns = &nodes[i];
        *ns = (co_node_stats){.endpoint = info.endpoint,
                              .member = info.member,
                              .up = info.up,
                              .errors = info.errors,
                              .tx_bytes = c.tx_bytes,
                              .rx_bytes = c.rx_bytes,
                              .weight_bytes = c.weight_bytes,
                              .rows = c.rows,
                              .batches = c.batches,
                              .rtt_sum_s = (double)c.rtt_ns * 1e-9};
        memcpy(ns->rtt_buckets, info.rtt_log2, sizeof ns->rtt_buckets);
    }
    return h.covered == h.cells;
}

static int remote_set_nodes(md_expert_backend *b, const char *nodes, FILE *log, mw_err *err) {
    char *list = strdup(nodes);
    const char **ep = calloc(MAX_NODES, sizeof *ep);
    int n = 0;
    int rc = !list || !ep                            ? mw_errf(err, "out of memory")
             : split_nodes(list, nodes, ep, &n, err) ? -1
                                                     : co_remote_set_nodes(b, ep, n, log, err);
    free(list);
    free(ep);
    return rc;
}

/* ---- the table ------------------------------------------------------------------------------ */

static const co_backend_kind kinds[] = {
    {"local", "experts run in this process", true, create_local, NULL, NULL, local_metrics, NULL},
    {"remote", "experts run on expert nodes (--nodes or --loopback)", false, create_remote,
     co_remote_report, co_remote_max_nodes, remote_metrics, remote_set_nodes},
};

const co_backend_kind *co_backend_find(const char *name) {
    const int i = mw_names_find(name, MW_NAMES(kinds, name));
    return i < 0 ? NULL : &kinds[i];
}

const char *co_backend_names(void) {
    static char names[256];
    return names[0] ? names : mw_names_join(names, sizeof names, MW_NAMES(kinds, name));
}
