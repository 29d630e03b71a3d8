/* coordinator/co_remote_members.c — who is serving: a node going down (a disconnect — its
 * heartbeats unanswered — a missed deadline, a failed send), and a node coming back: libzmq
 * reconnects its socket on its own; once the monitor reports the new connection's handshake, the
 * node is greeted again (Hello/Welcome: protocol version, model fingerprint, shape, numerics,
 * owned set) and, when it still fits, used again from the next layer on. A node that comes back
 * serving another model is refused by name and stays down. Each change rebuilds the ownership
 * map over the live nodes (co__remote_owners, co_remote_handshake.c). */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "coordinator/co_remote.h"
#include "coordinator/co_remote_internal.h"
#include "util/mw_time.h"
#include "wire/wr_live.h"
#include "wire/wr_zmq.h"

/* The MoE cells node i owned that no live node owns now, as "layer:e0-e1, ..." ranges. */
static long orphaned(const co__remote *r, int i, char *out, size_t cap) {
    const int L = r->o.n_layers, E = r->o.n_experts;
    const co__node *n = &r->nodes[i];
    size_t len = 0;
    long count = 0;
    out[0] = '\0';
    for (int l = 0; l < L && n->owned; l++) {
        if (!r->layer_moe[l]) continue;
        for (int e = 0; e < E; e++) {
            size_t c = (size_t)l * E + (size_t)e;
            if (!((n->owned[c / 8] >> (c % 8)) & 1) || r->n_owner[c]) continue;
            int end = e;
            while (end + 1 < E && ((n->owned[(c + 1) / 8] >> ((c + 1) % 8)) & 1) &&
                   !r->n_owner[c + 1]) {
                end++;
                c++;
            }
            count += end - e + 1;
            if (len + 32 < cap)
                len += (size_t)(end > e ? snprintf(out + len, cap - len, "%s%d:%d-%d",
                                                   len ? ", " : "", l, e, end)
                                        : snprintf(out + len, cap - len, "%s%d:%d", len ? ", " : "",
                                                   l, e));
            else if (!strstr(out, "..."))
                len += (size_t)snprintf(out + len, cap - len, " ...");
            e = end;
        }
    }
    return count;
}

void co__remote_down(co__remote *r, int i, const char *why) {
    co__node *n = &r->nodes[i];
    if (n->down) return;
    n->down = true;
    n->down_ns = mw_now_ns();
    n->hello_seq = 0;
    snprintf(n->why, sizeof n->why, "%s", why);
    co__remote_owners(r);
    char lost[512];
    long k = orphaned(r, i, lost, sizeof lost);
    if (k)
        fprintf(stderr,
                "coordinator: %s is down (%s); %ld of its experts have no other owner (%s): "
                "requests that need them fail until it is back\n",
                n->name, why, k, lost);
    else
        fprintf(stderr, "coordinator: %s is down (%s); its experts go to their replicas\n", n->name,
                why);
}

/* Greets a node whose connection came back. */
static void send_rejoin_hello(co__remote *r, int i) {
    co__node *n = &r->nodes[i];
    wr_msg hello = {.kind = WR_MSG_HELLO,
                    .seq = ++r->seq,
                    .hello = {"coordinator", r->o.fingerprint ? r->o.fingerprint : ""}};
    mw_err e;
    if (wr_pack(&r->out, &hello, (wr_codec){WR_F32, false}, &e)) return;
    if (wr_send(n->sock, NULL, 0, &r->out, ZMQ_DONTWAIT, &e) == 0) n->hello_seq = hello.seq;
}

void co__remote_rejoin_msg(co__remote *r, int i, const wr_msg *m) {
    co__node *n = &r->nodes[i];
    if (!n->down || !n->hello_seq || m->seq != n->hello_seq) return; /* late, for a lost round */
    n->hello_seq = 0;
    if (m->kind == WR_MSG_ERROR) {
        snprintf(n->why, sizeof n->why, "it refused the handshake on rejoining: %s: %s",
                 wr_code_name(m->error.code), m->error.message);
        fprintf(stderr, "coordinator: %s came back but %s; not used\n", n->name, n->why);
        n->connected = false; /* no new Hello on this connection */
        return;
    }
    if (m->kind != WR_MSG_WELCOME) return;
    mw_err e;
    if (co__remote_welcome(r, i, &m->welcome, &e)) {
        snprintf(n->why, sizeof n->why, "came back refused: %s", e.msg);
        fprintf(stderr, "coordinator: %s; not used\n", e.msg);
        n->connected = false;
        return;
    }
    n->down = false;
    n->why[0] = '\0';
    co__remote_owners(r);
    if (n->joining)
        fprintf(stderr, "coordinator: %s joined (%s, %s): used from the next layer\n", n->name,
                n->node_id, n->backend);
    else
        fprintf(stderr, "coordinator: %s is back (%s, %s) after %.1f s: used again\n", n->name,
                n->node_id, n->backend, (double)(mw_now_ns() - n->down_ns) * 1e-9);
    n->joining = false;
}

/* The liveness channel's verdicts (co_remote_live.c pings): marking down lives here, with every
 * other way a node goes down. */
bool co__live_check(co__remote *r) {
    if (!r->live) return false;
    wr_live_prober_ack(r->live);
    bool any = false;
    for (int i = 0; i < r->o.n_nodes; i++) {
        co__node *n = &r->nodes[i];
        const wr_live_state st = wr_live_prober_state(r->live, i);
        if (st.silences == n->live_seen) continue;
        n->live_seen = st.silences;
        if (n->down || n->drained) continue;
        char why[128];
        snprintf(why, sizeof why, "no answer on its liveness channel for %u ms", st.silent_ms);
        co__acct_failed(&r->acct, i);
        co__remote_down(r, i, why);
        any = true;
    }
    return any;
}

/* Every monitor is read at least this often, signalled or not (see co__remote_tend). */
#define MON_READ_ALL_NS 100000000ull

void co__remote_tend(co__remote *r) {
    /* A live node's monitor is read when its descriptor says something came, and the liveness
     * channel when its pipe does (one poll for all, instead of a receive each: a system call per
     * node and layer); every monitor is only ever read until it has nothing, which keeps that
     * signal true, and all are read anyway now and then. */
    const int N = r->o.n_nodes;
    struct pollfd fds[N + 1];
    const uint64_t now = mw_now_ns();
    const bool all = now - r->mon_read_ns >= MON_READ_ALL_NS;
    for (int i = 0; i < N; i++) {
        const co__node *n = &r->nodes[i];
        fds[i] = (struct pollfd){n->drained ? -1 : wr_socket_fd(n->mon), POLLIN, 0};
    }
    fds[N] = (struct pollfd){co__live_fd(r), POLLIN, 0};
    if (all)
        r->mon_read_ns = now;
    else if (poll(fds, (nfds_t)N + 1, 0) < 0)
        for (int i = 0; i <= N; i++) fds[i].revents = POLLIN;
    if (all || fds[N].revents) co__live_check(r);
    for (int i = 0; i < N; i++) {
        co__node *n = &r->nodes[i];
        if (n->drained) continue;
        if ((all || n->down || fds[i].revents) && co__remote_read_monitor(r, i))
            co__remote_down(r, i, "disconnected");
        if (!n->down) continue;
        if (n->connected && !n->hello_seq) send_rejoin_hello(r, i);
        /* take what it sent: its Welcome, an Error, or late replies of a lost round */
        while (n->down && wr_recv(n->sock, &r->rx, false, ZMQ_DONTWAIT, NULL) == 0) {
            wr_msg m;
            wr_code code;
            if (wr_parse(&r->in, r->rx.parts, r->rx.n_parts, r->rx.truncated, &m, &code, NULL))
                continue;
            co__remote_rejoin_msg(r, i, &m);
        }
    }
}

/* ---- joining and draining ------------------------------------------------------------------- */

void co__remote_close_node(co__node *n) {
    if (n->sock) {
        zmq_socket_monitor(n->sock, NULL, 0);
        zmq_close(n->sock);
    }
    if (n->mon) zmq_close(n->mon);
    n->sock = n->mon = NULL;
}

/* The node whose endpoint (with its "#KEY", as given) is ep, or -1. */
static int node_of(const co__remote *r, const char *ep) {
    for (int i = 0; i < r->o.n_nodes; i++)
        if (!strcmp(r->endpoints[i], ep)) return i;
    return -1;
}

static bool listed(const char *const *eps, int n, const char *ep) {
    for (int k = 0; k < n; k++)
        if (!strcmp(eps[k], ep)) return true;
    return false;
}

/* Whether taking the nodes marked `leave` out keeps every expert that has a live owner now owned;
 * else err names what would be lost. */
static int drain_keeps_coverage(co__remote *r, const bool *leave, mw_err *err) {
    const size_t cells = (size_t)r->o.n_layers * (size_t)r->o.n_experts;
    int32_t *before = malloc(cells * sizeof *before);
    if (!before) return mw_errf(err, "out of memory");
    memcpy(before, r->n_owner, cells * sizeof *before);
    bool *was = calloc((size_t)r->o.n_nodes, sizeof *was);
    for (int i = 0; was && i < r->o.n_nodes; i++)
        if (leave[i]) was[i] = r->nodes[i].down, r->nodes[i].down = true;
    co__remote_owners(r);
    long lost = 0, first = -1;
    for (size_t c = 0; c < cells; c++)
        if (before[c] && !r->n_owner[c] && lost++ == 0) first = (long)c;
    for (int i = 0; was && i < r->o.n_nodes; i++)
        if (leave[i]) r->nodes[i].down = was[i];
    co__remote_owners(r);
    free(before);
    free(was);
    if (!lost) return 0;
    return mw_errf(err,
                   "draining would leave %ld expert(s) without a live owner (the first: layer %ld "
                   "expert %ld): add a node that owns them first",
                   lost, first / r->o.n_experts, first % r->o.n_experts);
}

/* A new node at ep in the next slot (or a drained one's again): connected, greeted once it is. */
static int join_node(co__remote *r, const char *ep, FILE *log, mw_err *err) {
    int i = node_of(r, ep);
    if (i < 0) {
        if (r->o.n_nodes == r->cap_nodes)
            return mw_errf(err, "no room for another node (%d; restart the coordinator with them)",
                           r->cap_nodes);
        i = r->o.n_nodes;
        if (!(r->endpoints[i] = strdup(ep))) return mw_errf(err, "out of memory");
        co__node *n = &r->nodes[i];
        memset(n, 0, sizeof *n);
        const char *hash = strchr(ep, '#');
        snprintf(n->endpoint, sizeof n->endpoint, "%.*s", hash ? (int)(hash - ep) : (int)strlen(ep),
                 ep);
        if (hash) snprintf(n->key, sizeof n->key, "%s", hash + 1);
        snprintf(n->name, sizeof n->name, "node %d (%s)", i, n->endpoint);
        r->o.n_nodes++;
    }
    co__node *n = &r->nodes[i];
    n->drained = false;
    n->joining = true;
    n->down = true;
    n->connected = false;
    n->hello_seq = 0;
    n->down_ns = mw_now_ns();
    snprintf(n->why, sizeof n->why, "joining");
    if (co__remote_connect(r, i, err)) {
        co__remote_close_node(n);
        n->drained = true;
        return -1;
    }
    int t = -1;
    zmq_setsockopt(n->sock, ZMQ_SNDTIMEO, &t, sizeof t);
    if (log)
        fprintf(log, "coordinator: %s joins: it is used once it answers the handshake\n", n->name);
    return 0;
}

int co_remote_set_nodes(md_expert_backend *b, const char *const *eps, int n_eps, FILE *log,
                        mw_err *err) {
    co__remote *r = b->impl;
    bool *leave = calloc((size_t)r->cap_nodes, sizeof *leave);
    if (!leave) return mw_errf(err, "out of memory");
    int n_leave = 0;
    for (int i = 0; i < r->o.n_nodes; i++)
        if (!r->nodes[i].drained && !listed(eps, n_eps, r->endpoints[i]))
            leave[i] = true, n_leave++;
    int rc = n_leave ? drain_keeps_coverage(r, leave, err) : 0;
    for (int i = 0; !rc && i < r->o.n_nodes; i++) {
        if (!leave[i]) continue;
        co__node *n = &r->nodes[i];
        n->down = n->drained = true;
        n->joining = false;
        snprintf(n->why, sizeof n->why, "drained");
        co__live_forget(r, i);
        co__remote_close_node(n);
        if (log)
            fprintf(log, "coordinator: %s is drained: its work goes to its replicas\n", n->name);
    }
    if (!rc && n_leave) co__remote_owners(r);
    for (int k = 0; !rc && k < n_eps; k++) {
        const int i = node_of(r, eps[k]);
        if (i < 0 || r->nodes[i].drained) rc = join_node(r, eps[k], log, err);
    }
    free(leave);
    return rc;
}

/* ---- the public read-outs for the server's health ------------------------------------------- */

co_remote_health co_remote_get_health(md_expert_backend *b) {
    co__remote *r = b->impl;
    co__remote_tend(r);
    co_remote_health h = {.skipped = r->skipped, .failovers = r->failovers};
    for (int i = 0; i < r->o.n_nodes; i++) {
        h.n_nodes += !r->nodes[i].drained;
        h.n_up += !r->nodes[i].drained && !r->nodes[i].down;
    }
    for (int l = 0; l < r->o.n_layers; l++) {
        if (!r->layer_moe[l]) continue;
        for (int e = 0; e < r->o.n_experts; e++) {
            h.cells++;
            h.covered += r->n_owner[(size_t)l * (size_t)r->o.n_experts + (size_t)e] > 0;
        }
    }
    return h;
}
