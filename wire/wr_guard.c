/* wire/wr_guard.c — the receive guard (see wr_guard.h): a thread that follows a listening
 * socket's TCP connections through its monitor and cuts off those that make libzmq hold too much.
 */
#include "wire/wr_guard.h"
#include "util/mw_thread.h"
#include "util/mw_platform.h"
#include "util/mw_time.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* The heap rule cuts the largest holder only when it holds at least this much: a heap that grew
 * for another reason (the owner's own work) must not cost an idle peer its connection. */
#define MIN_ATTRIBUTABLE (64u << 10)

/* The kernel's receive buffer of each accepted connection (ZMQ_RCVBUF; Linux doubles it for its
 * bookkeeping). The guard sees only what libzmq has read, and left alone the kernel grows the
 * buffer to tcp_rmem's maximum (32 MiB here): a flooding peer fills it while the node's threads
 * wait for a CPU, and libzmq then reads it all in one go, past the limit before the next check.
 * With the buffer fixed, a peer delivers at most this much beyond what the guard has seen; 1 MiB
 * still covers the bandwidth-delay product of a 10 Gbit/s link at 0.8 ms. */
#define KERNEL_RCVBUF (1 << 20)

typedef struct conn {
    int fd;
    uint64_t base;    /* bytes libzmq had read from it at its last delivered message */
    uint64_t held;    /* at the last check */
    uint64_t base_ns; /* when base was taken */
    char peer[64];
    bool cut;
} conn;

struct wr_guard {
    wr_guard_opts o;
    char name[256];
    void *sock, *mon;
    pthread_t th;
    atomic_bool stop;
    pthread_mutex_t lock;
    conn *conns;
    size_t n, cap;
    uint64_t base_rss; /* anonymous resident bytes at start */
    _Atomic uint64_t own;
    bool trim; /* a connection was cut: hand freed memory back once it is gone */
    wr_guard_stats st;
};

int wr_tcp_acked(int fd, uint64_t *acked) {
    return mw_tcp_acked(fd, acked);
}

static void peer_of(int fd, char *buf, size_t cap) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    buf[0] = '\0';
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) return;
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        port = ntohs(a->sin6_port);
    }
    snprintf(buf, cap, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip, port);
}

static conn *find(wr_guard *g, int fd) {
    for (size_t i = 0; i < g->n; i++)
        if (g->conns[i].fd == fd) return &g->conns[i];
    return NULL;
}

static void add(wr_guard *g, int fd) {
    conn *c = find(g, fd);
    if (!c) {
        if (g->n == g->cap) {
            size_t cap = g->cap ? 2 * g->cap : 16;
            conn *p = realloc(g->conns, cap * sizeof *p);
            if (!p) return; /* not followed; the heap rule still sees what it makes us hold */
            g->conns = p;
            g->cap = cap;
        }
        c = &g->conns[g->n++];
    }
    memset(c, 0, sizeof *c);
    c->fd = fd;
    if (mw_tcp_received(fd, &c->base)) c->base = 0;
    c->base_ns = mw_now_ns();
    peer_of(fd, c->peer, sizeof c->peer);
    g->st.connections++;
}

static void drop(wr_guard *g, int fd) {
    conn *c = find(g, fd);
    if (!c) return;
    *c = g->conns[--g->n];
}

/* Cuts connection c off (the caller holds the lock). The descriptor still belongs to libzmq: a
 * shutdown makes its next read see the end of the stream, so it drops the connection and frees
 * the unfinished message itself. The peer address is checked first, so a descriptor libzmq has
 * closed and reused for another connection is left alone. */
static void cut(wr_guard *g, conn *c, const char *why) {
    if (c->cut) return;
    char now[64];
    peer_of(c->fd, now, sizeof now);
    c->cut = true; /* either way it is followed no more */
    if (strcmp(now, c->peer)) return;
    g->st.cut++;
    g->trim = true;
    if (!g->o.quiet)
        fprintf(stderr, "%s: cut off peer %s: %s\n", g->name, c->peer[0] ? c->peer : "?", why);
    /* A reset at once, and what the kernel still holds of the stream discarded (the descriptor
     * stays libzmq's, its next read fails with ECONNRESET and it drops the connection). */
    mw_tcp_abort(c->fd);
}

/* Returns whether some peer holds an eighth of a limit: checked again within a millisecond, not
 * the interval, while it grows. */
static bool check(wr_guard *g) {
    const uint64_t now = mw_now_ns();
    pthread_mutex_lock(&g->lock);
    uint64_t total = 0;
    conn *largest = NULL;
    for (size_t i = 0; i < g->n; i++) {
        conn *c = &g->conns[i];
        uint64_t r;
        if (c->cut || mw_tcp_received(c->fd, &r)) continue;
        if (r < c->base) c->base = r;
        /* what a peer's ZMTP heartbeats and other commands add between whole messages (a few
         * bytes a second) is no message: 1 KiB a second since the last one is not counted */
        const uint64_t allowance = (now - c->base_ns) / 1000000ull;
        c->held = r - c->base > allowance ? r - c->base - allowance : 0;
        if (c->held > g->o.peer_bytes) {
            char why[160];
            snprintf(why, sizeof why,
                     "%" PRIu64 " bytes received beyond its last whole message (the limit per "
                     "peer is %" PRIu64 ")",
                     c->held, g->o.peer_bytes);
            cut(g, c, why);
            continue;
        }
        total += c->held;
        if (!largest || c->held > largest->held) largest = c;
    }
    if (total > g->st.peak_held) g->st.peak_held = total;
    bool busy = total > g->o.total_bytes / 8 || (largest && largest->held > g->o.peer_bytes / 8);
    if (largest && total > g->o.total_bytes) {
        char why[160];
        snprintf(why, sizeof why,
                 "%" PRIu64 " bytes unfinished, the most of all peers, which hold %" PRIu64
                 " (the limit for all is %" PRIu64 ")",
                 largest->held, total, g->o.total_bytes);
        cut(g, largest, why);
    } else if (largest && largest->held >= MIN_ATTRIBUTABLE) {
        uint64_t rss = mw_anon_rss(), own = atomic_load(&g->own);
        /* tiny parts cost libzmq ~30 bytes of memory per byte received: the heap grows far
         * faster than the bytes held, so it is what decides how soon to look again */
        if (rss > g->base_rss + own + g->o.total_bytes / 8) busy = true;
        if (rss > g->base_rss + own + g->o.total_bytes) {
            char why[200];
            snprintf(why, sizeof why,
                     "the node holds %" PRIu64 " MiB for its peers, over the %" PRIu64
                     " MiB limit; this one has %" PRIu64 " bytes unfinished, the most",
                     (rss - g->base_rss - own) >> 20, g->o.total_bytes >> 20, largest->held);
            cut(g, largest, why);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return busy;
}

/* Drains the monitor: connections accepted and gone. */
static void read_events(wr_guard *g) {
    uint16_t id;
    uint32_t value;
    while (wr_monitor_event(g->mon, &id, &value)) {
        pthread_mutex_lock(&g->lock);
        if (id == ZMQ_EVENT_ACCEPTED)
            add(g, (int)value);
        else if (id == ZMQ_EVENT_DISCONNECTED || id == ZMQ_EVENT_CLOSED)
            drop(g, (int)value);
        bool trim = g->trim && id == ZMQ_EVENT_DISCONNECTED;
        if (trim) g->trim = false;
        pthread_mutex_unlock(&g->lock);
        if (trim) mw_heap_trim(); /* the cut message is freed: give its pages back */
    }
}

static void *loop(void *arg) {
    wr_guard *g = arg;
    zmq_pollitem_t it = {g->mon, 0, ZMQ_POLLIN, 0};
    bool busy = false;
    while (!atomic_load(&g->stop)) {
        if (zmq_poll(&it, 1, busy ? 1 : g->o.interval_ms) < 0 && errno == ETERM) break;
        read_events(g);
        busy = check(g);
    }
    return NULL;
}

int wr_guard_start(void *ctx, void *sock, const wr_guard_opts *o, wr_guard **out, mw_err *err) {
    *out = NULL;
    if (!mw_tcp_counts()) return mw_errf(err, "the receive guard needs Linux (TCP_INFO)");
    if (!o->peer_bytes || !o->total_bytes)
        return mw_errf(err, "receive guard: limits must be positive");
    /* the kernel's share of what a peer can deliver, fixed (see KERNEL_RCVBUF); a smaller buffer
     * the owner chose stays */
    int rcvbuf = -1, want = KERNEL_RCVBUF;
    size_t rl = sizeof rcvbuf;
    if ((zmq_getsockopt(sock, ZMQ_RCVBUF, &rcvbuf, &rl) != 0 || rcvbuf <= 0 || rcvbuf > want) &&
        zmq_setsockopt(sock, ZMQ_RCVBUF, &want, sizeof want) != 0) {
        return mw_errf(err, "receive guard: cannot set ZMQ_RCVBUF: %s", zmq_strerror(errno));
    }
    wr_guard *g = calloc(1, sizeof *g);
    if (!g) return mw_errf(err, "out of memory");
    g->o = *o;
    if (g->o.interval_ms <= 0) g->o.interval_ms = 10;
    snprintf(g->name, sizeof g->name, "%s", o->name ? o->name : "moewire");
    g->sock = sock;
    pthread_mutex_init(&g->lock, NULL);
    atomic_init(&g->stop, false);
    atomic_init(&g->own, 0);
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://wr-guard-%p", (void *)g);
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED;
    if (zmq_socket_monitor(sock, addr, events) != 0 || !(g->mon = zmq_socket(ctx, ZMQ_PAIR)) ||
        zmq_connect(g->mon, addr) != 0) {
        mw_errf(err, "receive guard: cannot monitor the socket: %s", zmq_strerror(errno));
        if (g->mon) zmq_close(g->mon);
        zmq_socket_monitor(sock, NULL, 0);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return -1;
    }
    g->base_rss = mw_anon_rss();
    /* the default policy, not the node's SCHED_BATCH: a flood is read by libzmq's I/O thread
     * while this one waits to be scheduled, and every millisecond it waits lets more in */
    if (mw_thread_start_normal(&g->th, loop, g) != 0) {
        zmq_close(g->mon);
        zmq_socket_monitor(sock, NULL, 0);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return mw_errf(err, "receive guard: cannot start its thread");
    }
    *out = g;
    return 0;
}

void wr_guard_stop(wr_guard *g) {
    if (!g) return;
    atomic_store(&g->stop, true);
    pthread_join(g->th, NULL);
    zmq_close(g->mon);
    zmq_socket_monitor(g->sock, NULL, 0);
    pthread_mutex_destroy(&g->lock);
    free(g->conns);
    free(g);
}

int wr_rx_fd(const wr_rx *rx) {
    if (rx->n_msg < 1) return -1;
    return zmq_msg_get((zmq_msg_t *)&rx->msg[0], ZMQ_SRCFD);
}

void wr_guard_delivered(wr_guard *g, int fd) {
    if (!g || fd < 0) return;
    pthread_mutex_lock(&g->lock);
    conn *c = find(g, fd);
    uint64_t r;
    if (c && mw_tcp_received(fd, &r) == 0) {
        c->base = r;
        c->base_ns = mw_now_ns();
        c->held = 0;
    }
    pthread_mutex_unlock(&g->lock);
}

void wr_guard_rename(wr_guard *g, const char *name) {
    if (!g) return;
    pthread_mutex_lock(&g->lock);
    snprintf(g->name, sizeof g->name, "%s", name);
    pthread_mutex_unlock(&g->lock);
}

void wr_guard_set_own(wr_guard *g, uint64_t bytes) {
    if (g) atomic_store(&g->own, bytes);
}

void wr_guard_cut(wr_guard *g, int fd, const char *why) {
    if (!g || fd < 0) return;
    pthread_mutex_lock(&g->lock);
    conn *c = find(g, fd);
    if (c) cut(g, c, why);
    pthread_mutex_unlock(&g->lock);
}

const char *wr_guard_peer(wr_guard *g, int fd, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    if (!g || fd < 0 || !cap) return buf;
    pthread_mutex_lock(&g->lock);
    conn *c = find(g, fd);
    if (c) snprintf(buf, cap, "%s", c->peer);
    pthread_mutex_unlock(&g->lock);
    return buf;
}

wr_guard_stats wr_guard_get_stats(wr_guard *g) {
    wr_guard_stats s = {0};
    if (!g) return s;
    pthread_mutex_lock(&g->lock);
    s = g->st;
    pthread_mutex_unlock(&g->lock);
    return s;
}
