/* coordinator/co_remote_handshake.c — the remote backend meets its nodes: one DEALER per node
 * with a monitor for disconnects, Hello/Welcome with every node at once, each Welcome checked
 * against the coordinator's model (fingerprint, shape, GLU policy, numerics, capacity), and the
 * ownership map built from the owned sets: an expert nobody owns is an error naming it, an expert
 * several nodes own is a replica (co_remote_share.c picks which one serves an assignment). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "coordinator/co_remote_internal.h"
#include "kernels/kn.h"
#include "util/mw_time.h"
#include "wire/wr_zmq.h"

/* ---- sockets ------------------------------------------------------------------------------- */

int co__remote_connect(co__remote *r, int i, mw_err *err) {
    co__node *n = &r->nodes[i];
    n->sock = zmq_socket(r->zctx, ZMQ_DEALER);
    n->mon = zmq_socket(r->zctx, ZMQ_PAIR);
    if (!n->sock || !n->mon) return mw_errf(err, "%s: cannot create a socket", n->name);
    if (wr_socket_setup(n->sock, &r->in.lim, err)) return mw_err_wrap(err, "%s", n->name);
    if (n->key[0]) {
        if (!r->o.curve)
            return mw_errf(err,
                           "%s: the node's CURVE key is pinned, but the coordinator has no "
                           "key pair (--curve-secret)",
                           n->name);
        if (wr_curve_client(n->sock, r->o.curve, n->key, err))
            return mw_err_wrap(err, "%s", n->name);
    }
    /* Disconnects are watched so a dead node fails the layer at once, not at the deadline;
     * failed CURVE handshakes so a refused key is named at once, not after the handshake's
     * deadline. */
    char addr[64];
    /* unique per connection: a node that joins again gets a new monitor */
    snprintf(addr, sizeof addr, "inproc://co-remote-%p-%d-%llu", (void *)r, i,
             (unsigned long long)++r->seq);
    const int events = ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (zmq_socket_monitor(n->sock, addr, events) != 0 || zmq_connect(n->mon, addr) != 0)
        return mw_errf(err, "%s: cannot monitor the socket: %s", n->name, zmq_strerror(errno));
    int t = r->o.connect_ms;
    zmq_setsockopt(n->sock, ZMQ_SNDTIMEO, &t, sizeof t);
    /* ZMTP heartbeats, answered by the node's I/O thread: a node that dies, hangs (SIGSTOP) or
     * drops off the network stops answering, and libzmq drops the connection — the disconnect the
     * monitor reports. They are the backstop of the liveness channel (co_remote_live.c), which
     * marks a silent node down within down_ms: that thread sleeps, where the I/O threads share
     * the node's compute policy and a loaded machine delays their answers. The node, told a TTL,
     * drops a coordinator that vanished the same way. Then libzmq reconnects every reconnect
     * interval on its own, which is how a node that comes back is found. */
    int down = co__heartbeat_ms(r, n->endpoint), ivl = down / 5 > 1 ? down / 5 : 1, ttl = 4 * down,
        rec = 100;
    zmq_setsockopt(n->sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(n->sock, ZMQ_HEARTBEAT_TIMEOUT, &down, sizeof down);
    zmq_setsockopt(n->sock, ZMQ_HEARTBEAT_TTL, &ttl, sizeof ttl);
    zmq_setsockopt(n->sock, ZMQ_RECONNECT_IVL, &rec, sizeof rec);
    if (zmq_connect(n->sock, n->endpoint) != 0)
        return mw_errf(err, "%s: cannot connect: %s", n->name, zmq_strerror(errno));
    return 0;
}

bool co__remote_read_monitor(co__remote *r, int i) {
    co__node *n = &r->nodes[i];
    bool lost = false;
    uint16_t id;
    uint32_t value;
    while (wr_monitor_event(n->mon, &id, &value)) {
        if (id == ZMQ_EVENT_DISCONNECTED) {
            n->connected = false;
            n->hello_seq = 0; /* a rejoin Hello went with that connection: the next one greets */
            if (r->serving)
                lost = lost || !n->down;
            else
                n->down = true;
        }
        if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            n->connected = true;
            n->refused[0] = '\0';
        }
        if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            snprintf(n->refused, sizeof n->refused,
                     "the node refused this coordinator's CURVE key (status %u: not on its "
                     "allow-list)",
                     value);
        else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                 id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            snprintf(n->refused, sizeof n->refused,
                     "the %s handshake failed (%s; protocol error 0x%x)",
                     n->key[0] ? "CURVE" : "ZeroMQ",
                     n->key[0] ? "is the pinned key the node's, and does it run CURVE?"
                               : "does the node require CURVE keys?",
                     value);
    }
    return lost;
}

/* ---- Hello / Welcome ------------------------------------------------------------------------ */

/* Whether the comma-separated list `have` contains `want`. */
static bool list_has(const char *have, const char *want) {
    size_t w = strlen(want);
    for (const char *p = have; *p;) {
        size_t l = strcspn(p, ",");
        if (l == w && !strncmp(p, want, w)) return true;
        p += l + (p[l] == ',');
    }
    return false;
}

static bool is_metal(const char *backend) {
    return !strncmp(backend, "metal", 5);
}

/* Exact mode promises the same bits whichever owner serves an expert. The Metal kernels keep the
 * CPU's reduction order, but whether a GPU rounds each step as the CPU does only a node's
 * --self-test on its own hardware shows (docs/kernels.md): so in exact mode no expert may have a
 * Metal owner and a CPU owner. Checked against every node that has announced its experts. */
static int check_exact_owners(const co__remote *r, int i, const wr_welcome *w, mw_err *err) {
    const size_t cells = (size_t)w->n_layers * (size_t)w->n_experts;
    for (int j = 0; r->o.exact && j < r->o.n_nodes; j++) {
        const co__node *o = &r->nodes[j];
        if (j == i || !o->owned || o->drained || is_metal(o->backend) == is_metal(w->backend))
            continue;
        for (size_t c = 0; c < cells; c++)
            if ((w->owned[c / 8] >> (c % 8)) & (o->owned[c / 8] >> (c % 8)) & 1)
                return mw_errf(err,
                               "exact mode: expert %zu:%zu is owned by %s (%s) and by %s (%s); "
                               "Metal is not proven bit-identical to the CPU kernels, so exact "
                               "mode does not mix them as owners of one expert",
                               c / w->n_experts, c % w->n_experts, r->nodes[i].name, w->backend,
                               o->name, o->backend);
    }
    return 0;
}

/* The node's experts must run the model's GLU policy: the same kind, the same parameter bits. A
 * node that announces none (an older build) is refused rather than assumed to agree. */
static int check_glu(const co__remote *r, const co__node *n, const wr_welcome *w, mw_err *err) {
    char want[128], got[128];
    kn_glu_format(&r->glu, want, sizeof want);
    if (!w->glu[0])
        return mw_errf(err, "%s announces no GLU policy; the model's experts run %s", n->name,
                       want);
    const int kind = kn_glu_from_name(w->glu);
    if (kind < 0)
        return mw_errf(err,
                       "%s runs experts with GLU '%.64s', which this coordinator does not "
                       "know; the model's is %s",
                       n->name, w->glu, want);
    kn_glu g;
    if (kn_glu_make(kind, w->glu_params, (int)w->n_glu_params, &g, err))
        return mw_err_wrap(err, "%s announces a GLU policy that cannot run", n->name);
    if (!kn_glu_same(&g, &r->glu))
        return mw_errf(err, "%s runs experts with GLU %s; the model's is %s", n->name,
                       kn_glu_format(&g, got, sizeof got), want);
    return 0;
}

int co__remote_welcome(co__remote *r, int i, const wr_welcome *w, mw_err *err) {
    co__node *n = &r->nodes[i];
    const co_remote_opts *o = &r->o;
    if (o->fingerprint && o->fingerprint[0] && strcmp(w->fingerprint, o->fingerprint))
        return mw_errf(err, "%s serves model %.64s, the coordinator's is %.64s", n->name,
                       w->fingerprint, o->fingerprint);
    if ((int64_t)w->width != o->width || (int)w->n_layers != o->n_layers ||
        (int)w->n_experts != o->n_experts)
        return mw_errf(
            err, "%s serves width %u, %u layers × %u experts; the model has %lld, %d × %d", n->name,
            w->width, w->n_layers, w->n_experts, (long long)o->width, o->n_layers, o->n_experts);
    if (check_glu(r, n, w, err)) return -1;
    if (!list_has(w->numerics, kn_numerics_name(o->numerics)))
        return mw_errf(err, "%s serves numerics %s, the coordinator runs %s", n->name, w->numerics,
                       kn_numerics_name(o->numerics));
    if (w->capacity < 1) return mw_errf(err, "%s announces capacity 0", n->name);
    if (check_exact_owners(r, i, w, err)) return -1;
    const size_t bytes = wr_owned_bytes(w->n_layers, w->n_experts);
    if (!n->owned && !(n->owned = malloc(bytes))) return mw_errf(err, "out of memory");
    memcpy(n->owned, w->owned, bytes);
    snprintf(n->node_id, sizeof n->node_id, "%s", w->node_id);
    snprintf(n->backend, sizeof n->backend, "%s", w->backend);
    snprintf(n->numerics, sizeof n->numerics, "%s", w->numerics);
    n->capacity = w->capacity;
    n->threads = w->threads;
    n->read_gbps = w->read_gbps;
    co__live_welcome(r, i, w);
    return 0;
}

/* Hands node i's Hello to libzmq if its connection is up (ZMQ_IMMEDIATE: not before): 1 sent, 0
 * not yet, -1 with err when the node cannot be spoken to (a refused CURVE key, a mechanism
 * mismatch: configuration errors, named at once). */
static int try_hello(co__remote *r, int i, mw_err *err) {
    co__node *n = &r->nodes[i];
    wr_msg hello = {
        .kind = WR_MSG_HELLO, .seq = ++r->seq, .hello = {"coordinator", r->o.fingerprint}};
    if (wr_pack(&r->out, &hello, (wr_codec){WR_F32, false}, err)) return -1;
    if (wr_send(n->sock, NULL, 0, &r->out, ZMQ_DONTWAIT, err) == 0) {
        n->pending = 1;
        wr_stats_ctrl(&r->acct.wire, i)->tx_bytes += r->out.bytes;
        return 1;
    }
    if (errno != EAGAIN) return mw_err_wrap(err, "%s", n->name);
    co__remote_read_monitor(r, i);
    if (n->refused[0]) return mw_errf(err, "%s: %s", n->name, n->refused);
    return 0;
}

/* Reads one answer from node i: 1 when it was the node's Welcome, 0 for a stray message. */
static int read_welcome(co__remote *r, int i, mw_err *err) {
    co__node *n = &r->nodes[i];
    if (wr_recv(n->sock, &r->rx, false, 0, err)) return mw_err_wrap(err, "%s", n->name);
    wr_msg m;
    wr_code code;
    if (wr_parse(&r->in, r->rx.parts, r->rx.n_parts, r->rx.truncated, &m, &code, err))
        return mw_err_wrap(err, "%s sent a malformed answer", n->name);
    wr_stats_ctrl(&r->acct.wire, i)->rx_bytes += r->in.bytes;
    if (m.kind == WR_MSG_ERROR)
        return mw_errf(err, "%s refused the handshake: %s: %s", n->name, wr_code_name(m.error.code),
                       m.error.message);
    if (m.kind != WR_MSG_WELCOME || !n->pending) return 0; /* stray: ignore */
    if (co__remote_welcome(r, i, &m.welcome, err)) return -1;
    n->pending = 0;
    return 1;
}

/* Greets every node whose connection comes up before the deadline and takes its Welcome: sent[i]
 * when its Hello went, pending while its Welcome is awaited. Returns once every node answered or
 * at the deadline; the others are absent at start. */
static int greet_all(co__remote *r, bool *sent, uint64_t deadline, mw_err *err) {
    const int N = r->o.n_nodes;
    for (;;) {
        int left = 0;
        for (int i = 0; i < N; i++) {
            if (!sent[i]) {
                const int got = try_hello(r, i, err);
                if (got < 0) return -1;
                sent[i] = got == 1;
            }
            left += !sent[i] || r->nodes[i].pending;
        }
        const uint64_t t = mw_now_ns();
        if (!left || t >= deadline) return 0;
        zmq_pollitem_t it[2 * N];
        for (int i = 0; i < N; i++) {
            it[i] = (zmq_pollitem_t){r->nodes[i].sock, 0, sent[i] ? ZMQ_POLLIN : ZMQ_POLLOUT, 0};
            it[N + i] = (zmq_pollitem_t){r->nodes[i].mon, 0, ZMQ_POLLIN, 0};
        }
        /* an unconnected socket can poll writable (ZMQ_IMMEDIATE refuses the send): at most
         * 10 ms between attempts */
        long wait = (long)((deadline - t) / 1000000ull) + 1;
        int rc = zmq_poll(it, 2 * N, wait < 10 ? wait : 10);
        if (rc < 0 && errno != EINTR) return mw_errf(err, "poll: %s", zmq_strerror(errno));
        for (int i = 0; i < N; i++) {
            if (it[N + i].revents & ZMQ_POLLIN) co__remote_read_monitor(r, i);
            if (r->nodes[i].pending && r->nodes[i].refused[0])
                return mw_errf(err, "%s: %s", r->nodes[i].name, r->nodes[i].refused);
            if (sent[i] && (it[i].revents & ZMQ_POLLIN) && read_welcome(r, i, err) < 0) return -1;
        }
    }
}

/* Every (layer, expert) must have an owner; the error lists the missing ones as layer:experts
 * ranges. */
static int check_coverage(const co__remote *r, mw_err *err) {
    const int L = r->o.n_layers, E = r->o.n_experts;
    char list[MW_ERR_MAX / 2] = "";
    size_t len = 0;
    long missing = 0;
    for (int l = 0; l < L; l++) {
        for (int e = 0; r->layer_moe[l] && e < E; e++) {
            if (r->n_owner[(size_t)l * E + e]) continue;
            int end = e;
            while (end + 1 < E && !r->n_owner[(size_t)l * E + end + 1]) end++;
            missing += end - e + 1;
            char item[40];
            if (end > e)
                snprintf(item, sizeof item, "%s%d:%d-%d", len ? ", " : "", l, e, end);
            else
                snprintf(item, sizeof item, "%s%d:%d", len ? ", " : "", l, e);
            if (len + strlen(item) < sizeof list - 4)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s", item);
            else if (!strstr(list, "..."))
                len += (size_t)snprintf(list + len, sizeof list - len, " ...");
            e = end;
        }
    }
    if (missing)
        return mw_errf(err, "%ld experts are owned by no node (layer:experts): %s", missing, list);
    return 0;
}

void co__remote_owners(co__remote *r) {
    const co_remote_opts *o = &r->o;
    const size_t cells = (size_t)o->n_layers * (size_t)o->n_experts;
    memset(r->n_owner, 0, cells * sizeof *r->n_owner);
    for (int i = 0; i < o->n_nodes; i++) {
        const co__node *n = &r->nodes[i];
        if (n->down || !n->owned) continue;
        for (size_t c = 0; c < cells; c++)
            if ((n->owned[c / 8] >> (c % 8)) & 1)
                r->owner[c * (size_t)r->cap_nodes + (size_t)r->n_owner[c]++] = i;
    }
}

/* The nodes that did not answer at start, for the coverage error. */
static void absent_list(const co__remote *r, char *out, size_t cap) {
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < r->o.n_nodes && len + 64 < cap; i++)
        if (r->nodes[i].down)
            len += (size_t)snprintf(out + len, cap - len, "%s%s (%s)", len ? ", " : "",
                                    r->nodes[i].name, r->nodes[i].why);
}

/* Hello to every node at once; the ones that answer within connect_ms serve from the start, the
 * others join when they answer (co_remote_members.c), as long as every expert has a live owner
 * now. */
int co__remote_handshake(co__remote *r, mw_err *err) {
    const int N = r->o.n_nodes;
    const uint64_t deadline = mw_now_ns() + (uint64_t)r->o.connect_ms * 1000000ull;
    bool *sent = calloc((size_t)N, sizeof *sent);
    if (!sent) return mw_errf(err, "out of memory");
    int rc = greet_all(r, sent, deadline, err);
    for (int i = 0; rc == 0 && i < N; i++) {
        co__node *n = &r->nodes[i];
        n->down = !sent[i] || n->pending;
        if (!n->down) continue;
        n->down_ns = mw_now_ns();
        snprintf(n->why, sizeof n->why, "%s within %d ms at start",
                 sent[i] ? "no answer to the handshake" : "no connection", r->o.connect_ms);
        n->pending = 0;
    }
    free(sent);
    if (rc) return -1;
    co__remote_owners(r);
    if (check_coverage(r, err)) {
        char absent[MW_ERR_MAX / 2], msg[MW_ERR_MAX];
        absent_list(r, absent, sizeof absent);
        if (!absent[0] || !err) return -1;
        snprintf(msg, sizeof msg, "%s", err->msg);
        return mw_errf(err, "%s; not answering at start: %s", msg, absent);
    }
    r->serving = true;
    for (int i = 0; i < N; i++)
        if (r->nodes[i].down)
            fprintf(stderr,
                    "coordinator: %s: %s; serving without it (its experts are on replicas), it "
                    "joins when it answers\n",
                    r->nodes[i].name, r->nodes[i].why);
    return 0;
}

/* One of the owners (-1: none is live): where a lost node's unanswered assignments go, chosen from
 * the pair so that they spread over the replicas; the layer's own split is co__share_pick's. */
int co__remote_route(const co__remote *r, int layer, int expert) {
    size_t c = (size_t)layer * (size_t)r->o.n_experts + (size_t)expert;
    int k = r->n_owner[c];
    return k ? r->owner[c * (size_t)r->cap_nodes + (size_t)((layer + expert) % k)] : -1;
}
