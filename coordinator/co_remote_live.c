/* coordinator/co_remote_live.c — the remote backend's use of the liveness channel (wire/wr_live.h):
 * each node that announced one in its Welcome is pinged by a thread of the backend's own; a node
 * that leaves the pings of down_ms unanswered is marked down (co__live_check, with the other
 * membership changes in co_remote_members.c) by the thread that runs the backend, between layers
 * or at once while it waits for replies, its work going to replicas. ZMTP heartbeats stay on the
 * data connections as the backstop, with a longer timeout. */
#include <stdio.h>
#include <string.h>

#include "coordinator/co_remote_internal.h"
#include "wire/wr_live.h"

/* The backstop's timeout never goes below this: a node's I/O threads, which answer ZMTP
 * heartbeats, share its compute policy, and on a loaded machine their answers come late. */
#define BACKSTOP_MS 5000

int co__live_start(co__remote *r) {
    mw_err e;
    if (wr_live_prober_start(r->cap_nodes, r->o.down_ms, "coordinator", &r->live, &e) == 0)
        return 0;
    fprintf(stderr, "coordinator: %s: hung nodes are found by heartbeats alone\n", e.msg);
    r->live = NULL;
    return -1;
}

void co__live_stop(co__remote *r) {
    wr_live_prober_stop(r->live);
    r->live = NULL;
}

int co__heartbeat_ms(const co__remote *r, const char *endpoint) {
    if (!r->live || strncmp(endpoint, "tcp://", 6)) return r->o.down_ms; /* no channel there */
    const int ms = 4 * r->o.down_ms;
    return ms > BACKSTOP_MS ? ms : BACKSTOP_MS;
}

void co__live_welcome(co__remote *r, int i, const wr_welcome *w) {
    co__node *n = &r->nodes[i];
    char host[256];
    int port;
    n->live_seen = 0;
    if (!r->live) return;
    if (!w->live_port || wr_live_endpoint(n->endpoint, host, sizeof host, &port)) {
        wr_live_prober_clear(r->live, i);
        return;
    }
    mw_err e;
    if (wr_live_prober_set(r->live, i, host, (int)w->live_port, w->live_token, n->name, &e)) {
        fprintf(stderr, "coordinator: %s: %s\n", n->name, e.msg);
        wr_live_prober_clear(r->live, i);
    }
}

void co__live_forget(co__remote *r, int i) {
    wr_live_prober_clear(r->live, i);
}

int co__live_fd(const co__remote *r) {
    return wr_live_prober_fd(r->live);
}
