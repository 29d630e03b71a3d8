/* wire/wr_relay.c — the receive relay (see wr_relay.h): one thread that accepts a listening
 * socket's TCP connections and passes each one's bytes to libzmq over a unix connection, reading
 * a peer only while what libzmq holds for it is under its budget. */
#include "wire/wr_relay.h"

#ifdef __linux__

#include <zmq.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "util/mw_platform.h"
#include "util/mw_thread.h"
#include "util/mw_time.h"
#include "wire/wr_live.h"

/* Bytes read from a peer, or from libzmq for it, at once: each direction has one buffer. Large
 * enough that a big message passes in a few trips round the loop, not one per 128 KiB; the pages
 * a connection never fills are never touched (malloc maps a buffer this large on demand). */
#define CHUNK (512u << 10)
/* The kernel's receive buffer of each accepted connection (Linux doubles it for bookkeeping):
 * what a peer can have in flight towards a node that does not read it, and still the
 * bandwidth-delay product of a 10 Gbit/s link at 0.8 ms. */
#define KERNEL_RCVBUF (1 << 20)
/* The send buffer of each unix connection (Linux doubles it): at most about that much passed on
 * to libzmq that it has not read yet, which the cost ring below must cover to price a delivered
 * message. */
#define UNIX_SNDBUF (256 << 10)
/* The most a wire byte can cost: an empty part is 2 bytes on the wire. */
#define MAX_COST_PER_BYTE ((WR_RELAY_PART_COST + 2) / 2)
/* Cost marks per connection: (wire bytes passed on, their cost) at chunk ends; a mark closer than
 * MARK_STEP to the previous one replaces it, so they span at least RING * MARK_STEP bytes. */
#define RING      1024
#define MARK_STEP 1024
#define GREETING  64 /* ZMTP 3's greeting */
/* After accept() failed for want of descriptors or memory, the next try this much later. */
#define ACCEPT_RETRY_NS 100000000ull
/* Heartbeats are frames too, and no message follows them on an idle connection: this much a second
 * since a peer's last message is not counted (a flood gains nothing from it). */
#define ALLOWANCE_PER_S 1024
/* After handling events the thread polls this long (yielding the CPU between looks) before it
 * sleeps: the next segment of a message, or an answer that comes back at once, then finds it
 * awake instead of paying a wake-up (on a VM, possibly of a halted vCPU). Yielding leaves the CPU
 * to any runnable thread, libzmq's I/O thread and the node's own on a shared CPU included. */
#define SPIN_NS 50000
/* Only while polling pays: an expert node's answer comes after its compute, the next request
 * after the coordinator's trunk, and a poll that catches nothing burns CPU the node's own threads
 * (and, on a shared host, the other nodes') need. A poll that catches an event scores SPIN_HIT, one
 * that does not costs a point; at zero the thread sleeps at once, and every SPIN_PROBE-th batch of
 * events polls anyway to find out whether it pays again. */
#define SPIN_HIT   4
#define SPIN_MAX   16
#define SPIN_PROBE 32

typedef struct mark {
    uint64_t wire, cost;
} mark;

typedef struct conn conn;

typedef struct side {
    conn *c;
    int which; /* 0 the peer's TCP connection, 1 the unix one to libzmq */
} side;

struct conn {
    uint64_t id;
    int tcp, ux;
    side s[2];
    uint32_t ev[2]; /* the epoll events registered for each */
    char peer[64];
    uint8_t *in, *out; /* peer → libzmq, libzmq → peer */
    size_t in_off, in_len, out_off, out_len;
    /* the ZMTP framing of the peer's stream: greeting bytes still due, the frame header being
     * read, the body bytes still due */
    uint32_t greet_left;
    uint8_t hdr[9];
    uint32_t hdr_have, hdr_need;
    uint64_t body_left;
    /* accounting, shared with the owner under the lock */
    uint64_t read_bytes; /* read from the peer */
    uint64_t fwd;        /* of them, written to libzmq */
    uint64_t cost;       /* the cost of what was read */
    uint64_t base;       /* the cost at the last delivered message */
    uint64_t base_ns;    /* when it was taken */
    uint64_t allow;      /* what ZMTP's heartbeats and other commands may add between messages:
                            ALLOWANCE_PER_S since base_ns, as of the relay's last look */
    mark ring[RING];
    uint32_t ring_head, ring_n;
    bool delivered_any, dead, doomed;
    uint64_t paused_ns; /* when it reached a budget (0: under) */
    char why[200];      /* set with doomed: cut it off */
};

struct wr_relay {
    wr_relay_opts o;
    char name[256];
    int lfd, ep, wake;
    /* libzmq listens on a unix socket in a directory of its own (0700): no other user's
     * process can reach the socket past the relay */
    char dir[128], path[160];
    char client_prefix[64];
    pthread_t th;
    atomic_bool stop;
    pthread_mutex_t lock;
    conn **conns;
    size_t n, cap;
    uint64_t next_id;
    _Atomic uint64_t idle_ns; /* the owner's last receive that found nothing */
    atomic_bool waiting;      /* the owner blocks for messages now */
    atomic_bool nudged;       /* a delivery freed a paused connection */
    wr_relay_stats st;
};

static uint64_t held(const conn *c) {
    return c->cost > c->base + c->allow ? c->cost - c->base - c->allow : 0;
}

/* What it holds without the allowance: what a peer that stalled at its limit is judged by (the
 * allowance lets a few bytes in now and then, so held() hovers at the limit). */
static uint64_t raw_held(const conn *c) {
    return c->cost > c->base ? c->cost - c->base : 0;
}

static uint64_t total_held(const wr_relay *r) {
    uint64_t t = 0;
    for (size_t i = 0; i < r->n; i++) t += held(r->conns[i]);
    return t;
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

/* An abstract unix address for name (no leading NUL in name). */
static socklen_t abstract(struct sockaddr_un *a, const char *name) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n > sizeof a->sun_path - 1) n = sizeof a->sun_path - 1;
    memcpy(a->sun_path + 1, name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* The connection whose unix side libzmq holds as fd (the caller holds the lock): its peer
 * address is the name the relay bound that side to. */
static conn *by_zmq_fd(wr_relay *r, int fd) {
    struct sockaddr_un a;
    socklen_t len = sizeof a;
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&a, &len) != 0 || a.sun_family != AF_UNIX ||
        len <= offsetof(struct sockaddr_un, sun_path) + 1 || a.sun_path[0])
        return NULL;
    const size_t n = len - offsetof(struct sockaddr_un, sun_path) - 1,
                 pl = strlen(r->client_prefix);
    if (n <= pl || n >= sizeof a.sun_path || memcmp(a.sun_path + 1, r->client_prefix, pl))
        return NULL;
    char digits[32];
    if (n - pl >= sizeof digits) return NULL;
    memcpy(digits, a.sun_path + 1 + pl, n - pl);
    digits[n - pl] = '\0';
    const uint64_t id = strtoull(digits, NULL, 10);
    for (size_t i = 0; i < r->n; i++)
        if (r->conns[i]->id == id) return r->conns[i];
    return NULL;
}

/* ---- the ZMTP framing: the cost of what a peer sends ---------------------------------------- */

/* Accounts the n bytes at p read from c's peer; false when they are no ZMTP 3 stream. */
static bool account(conn *c, const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (c->greet_left) {
            const size_t at = GREETING - c->greet_left;
            /* the signature (0xFF, 8 bytes, 0x7F) and a major version of 3 or more */
            if ((at == 0 && p[i] != 0xFF) || (at == 9 && !(p[i] & 1)) || (at == 10 && p[i] < 3))
                return false;
            c->greet_left--;
            c->cost++;
            i++;
        } else if (c->body_left) {
            const uint64_t take = n - i < c->body_left ? n - i : c->body_left;
            c->body_left -= take;
            c->cost += take;
            i += (size_t)take;
        } else {
            c->hdr[c->hdr_have++] = p[i++];
            c->cost++;
            if (c->hdr_have == 1) c->hdr_need = (c->hdr[0] & 2) ? 9 : 2;
            if (c->hdr_have < c->hdr_need) continue;
            uint64_t size = 0;
            for (uint32_t k = 1; k < c->hdr_need; k++) size = size << 8 | c->hdr[k];
            c->body_left = size;
            c->cost += WR_RELAY_PART_COST;
            c->hdr_have = 0;
        }
    }
    /* a mark at the end of these bytes */
    const mark m = {c->read_bytes + n, c->cost};
    mark *last = c->ring_n ? &c->ring[(c->ring_head + c->ring_n - 1) % RING] : NULL;
    if (last && m.wire - last->wire < MARK_STEP && c->ring_n > 1) {
        /* close to the one before: it moves (a position between prices at the mark below, which
         * counts more as held, never less) */
        const mark *prev = &c->ring[(c->ring_head + c->ring_n - 2) % RING];
        if (m.wire - prev->wire < MARK_STEP) {
            *last = m;
            c->read_bytes += n;
            return true;
        }
    }
    if (c->ring_n == RING) c->ring_head = (c->ring_head + 1) % RING, c->ring_n--;
    c->ring[(c->ring_head + c->ring_n++) % RING] = m;
    c->read_bytes += n;
    return true;
}

/* The cost of the first `wire` bytes read, at the mark at or below it; false when the ring no
 * longer goes back that far. */
static bool cost_at(const conn *c, uint64_t wire, uint64_t *cost) {
    bool found = false;
    for (uint32_t k = 0; k < c->ring_n; k++) {
        const mark *m = &c->ring[(c->ring_head + k) % RING];
        if (m->wire > wire) break;
        *cost = m->cost;
        found = true;
    }
    return found;
}

/* ---- connections ---------------------------------------------------------------------------- */

static void set_events(wr_relay *r, conn *c, int which, uint32_t want) {
    if (c->ev[which] == want) return;
    struct epoll_event e = {.events = want, .data.ptr = &c->s[which]};
    epoll_ctl(r->ep, EPOLL_CTL_MOD, which ? c->ux : c->tcp, &e);
    c->ev[which] = want;
}

/* Whether c may be read now (the caller holds the lock); else when it first reached a budget
 * since its last delivered message is noted (the allowance may let a few more bytes in
 * meanwhile: the stall is counted from the first time). */
static bool may_read(wr_relay *r, conn *c, uint64_t total, uint64_t now) {
    if (c->in_len) return false; /* what was read is not passed on yet */
    if (held(c) < r->o.peer_bytes && total < r->o.total_bytes) return true;
    if (!c->paused_ns) c->paused_ns = now;
    return false;
}

static void arm(wr_relay *r, conn *c, uint64_t total, uint64_t now) {
    set_events(r, c, 0, (may_read(r, c, total, now) ? EPOLLIN : 0) | (c->out_len ? EPOLLOUT : 0));
    set_events(r, c, 1, (c->out_len ? 0 : EPOLLIN) | (c->in_len ? EPOLLOUT : 0));
}

static void close_conn(wr_relay *r, conn *c) {
    if (c->dead) return;
    c->dead = true;
    epoll_ctl(r->ep, EPOLL_CTL_DEL, c->tcp, NULL);
    epoll_ctl(r->ep, EPOLL_CTL_DEL, c->ux, NULL);
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n; i++)
        if (r->conns[i] == c) {
            r->conns[i] = r->conns[--r->n];
            break;
        }
    pthread_mutex_unlock(&r->lock);
    close(c->tcp);
    close(c->ux);
}

static void free_conn(conn *c) {
    free(c->in);
    free(c->out);
    free(c);
}

/* Cuts c off: its TCP connection reset at once and what the kernel holds of it discarded, the
 * unix one closed (libzmq drops it and frees the unfinished message). */
static void cut(wr_relay *r, conn *c, const char *why) {
    if (c->dead) return;
    pthread_mutex_lock(&r->lock);
    r->st.cut++;
    const bool quiet = r->o.quiet;
    char name[256];
    snprintf(name, sizeof name, "%s", r->name);
    pthread_mutex_unlock(&r->lock);
    if (!quiet) fprintf(stderr, "%s: cut off peer %s: %s\n", name, c->peer[0] ? c->peer : "?", why);
    mw_tcp_abort(c->tcp);
    close_conn(r, c);
}

/* Takes one connection; false when accepting fails for want of a resource (descriptors, memory):
 * the listening socket stays readable then, and is left alone a while. */
static bool accept_one(wr_relay *r) {
    int fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED || errno == EPROTO;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn *c = calloc(1, sizeof *c);
    int ux = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (!c || ux < 0 || !(c->in = malloc(CHUNK)) || !(c->out = malloc(CHUNK))) goto fail;
    c->id = ++r->next_id;
    char name[96];
    snprintf(name, sizeof name, "%s%" PRIu64, r->client_prefix, c->id);
    struct sockaddr_un a;
    socklen_t len = abstract(&a, name);
    int sndbuf = UNIX_SNDBUF;
    if (bind(ux, (struct sockaddr *)&a, len) != 0 ||
        setsockopt(ux, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) != 0)
        goto fail;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, r->path, strlen(r->path) + 1);
    len = (socklen_t)sizeof a;
    /* libzmq listens: a local connect completes at once */
    if (connect(ux, (struct sockaddr *)&a, len) != 0) goto fail;
    if (fcntl(ux, F_SETFL, fcntl(ux, F_GETFL) | O_NONBLOCK) != 0) goto fail;
    c->tcp = fd;
    c->ux = ux;
    c->greet_left = GREETING;
    c->base_ns = mw_now_ns();
    c->s[0] = (side){c, 0};
    c->s[1] = (side){c, 1};
    peer_of(fd, c->peer, sizeof c->peer);
    struct epoll_event e0 = {.events = EPOLLIN, .data.ptr = &c->s[0]};
    struct epoll_event e1 = {.events = EPOLLIN, .data.ptr = &c->s[1]};
    c->ev[0] = c->ev[1] = EPOLLIN;
    pthread_mutex_lock(&r->lock);
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        conn **p = realloc(r->conns, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&r->lock);
            goto fail;
        }
        r->conns = p;
        r->cap = cap;
    }
    r->conns[r->n++] = c;
    r->st.connections++;
    pthread_mutex_unlock(&r->lock);
    if (epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &e0) != 0 ||
        epoll_ctl(r->ep, EPOLL_CTL_ADD, ux, &e1) != 0) {
        close_conn(r, c);
        free_conn(c);
    }
    return true;
fail:
    /* refused, not queued: the peer sees the connection fail and may try again */
    if (c) free(c->in), free(c->out), free(c);
    if (ux >= 0) close(ux);
    close(fd);
    return true;
}

/* Reads what it may of the peer (the caller checked may_read); false when the connection ends. */
static bool from_peer(wr_relay *r, conn *c) {
    pthread_mutex_lock(&r->lock);
    const uint64_t total = total_held(r), h = held(c);
    pthread_mutex_unlock(&r->lock);
    if (h >= r->o.peer_bytes || total >= r->o.total_bytes) return true; /* at a limit: later */
    uint64_t room = r->o.peer_bytes - h;
    if (r->o.total_bytes - total < room) room = r->o.total_bytes - total;
    /* at most what the room can pay for were every byte an empty part */
    size_t want = room / MAX_COST_PER_BYTE < CHUNK ? (size_t)(room / MAX_COST_PER_BYTE) : CHUNK;
    if (want < 64) want = 64;
    ssize_t got = recv(c->tcp, c->in, want, 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return false;
    if (got < 0) return true;
    pthread_mutex_lock(&r->lock);
    const bool ok = account(c, c->in, (size_t)got);
    const uint64_t now_total = total_held(r);
    if (now_total > r->st.peak_held) r->st.peak_held = now_total;
    pthread_mutex_unlock(&r->lock);
    if (!ok) {
        cut(r, c, "it speaks no ZMTP 3");
        return true;
    }
    c->in_off = 0;
    c->in_len = (size_t)got;
    return true;
}

/* Passes what was read of the peer on to libzmq, as far as it takes it now. */
static bool to_zmq(wr_relay *r, conn *c) {
    ssize_t w = send(c->ux, c->in + c->in_off, c->in_len, MSG_NOSIGNAL);
    if (w < 0) return errno == EAGAIN || errno == EINTR;
    pthread_mutex_lock(&r->lock);
    c->fwd += (uint64_t)w;
    pthread_mutex_unlock(&r->lock);
    c->in_off += (size_t)w;
    c->in_len -= (size_t)w;
    return true;
}

/* libzmq's bytes for the peer (replies, handshake): read when the last are out. */
static bool from_zmq(conn *c) {
    ssize_t got = recv(c->ux, c->out, CHUNK, 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return false;
    if (got > 0) c->out_off = 0, c->out_len = (size_t)got;
    return true;
}

static bool to_peer(conn *c) {
    ssize_t w = send(c->tcp, c->out + c->out_off, c->out_len, MSG_NOSIGNAL);
    if (w < 0) return errno == EAGAIN || errno == EINTR;
    c->out_off += (size_t)w;
    c->out_len -= (size_t)w;
    return true;
}

/* libzmq closed its side (a refused key, a protocol error, its socket closing): what it said
 * last goes to the peer, then both close. */
static void zmq_closed(wr_relay *r, conn *c) {
    if (c->out_len) to_peer(c); /* what the socket does not take now is lost with it */
    pthread_mutex_lock(&r->lock);
    char name[256];
    snprintf(name, sizeof name, "%s", r->name);
    pthread_mutex_unlock(&r->lock);
    if (!c->delivered_any && !r->o.quiet)
        fprintf(stderr,
                "%s: peer %s dropped before its first message (a refused key, or no moewire "
                "client)\n",
                name, c->peer[0] ? c->peer : "?");
    close_conn(r, c);
}

/* Paused connections the owner has looked past: cut off (see wr_relay.h). */
static void judge(wr_relay *r, uint64_t now) {
    const uint64_t stall = (uint64_t)WR_RELAY_STALL_MS * 1000000ull;
    const bool waiting = atomic_load(&r->waiting);
    const uint64_t idle = atomic_load(&r->idle_ns);
    conn *victim = NULL;
    char why[200] = "";
    pthread_mutex_lock(&r->lock);
    uint64_t total = 0;
    for (size_t i = 0; i < r->n; i++) total += raw_held(r->conns[i]);
    for (size_t i = 0; i < r->n && !victim; i++) {
        conn *c = r->conns[i];
        if (c->doomed) {
            victim = c;
            snprintf(why, sizeof why, "%s", c->why);
            continue;
        }
        if (!c->paused_ns || now - c->paused_ns < stall ||
            (!waiting && idle < c->paused_ns + stall))
            continue;
        if (raw_held(c) >= r->o.peer_bytes) {
            victim = c;
            snprintf(why, sizeof why,
                     "%" PRIu64 " bytes received beyond its last whole message (the limit per "
                     "peer is %" PRIu64 ")",
                     raw_held(c), r->o.peer_bytes);
        }
    }
    if (!victim && total >= r->o.total_bytes) {
        /* all together at the limit, and stalled: the largest holder goes */
        for (size_t i = 0; i < r->n; i++) {
            conn *c = r->conns[i];
            if (c->paused_ns && now - c->paused_ns >= stall &&
                (waiting || idle >= c->paused_ns + stall) &&
                (!victim || raw_held(c) > raw_held(victim)))
                victim = c;
        }
        if (victim)
            snprintf(why, sizeof why,
                     "%" PRIu64 " bytes unfinished, the most of all peers, which hold %" PRIu64
                     " (the limit for all is %" PRIu64 ")",
                     raw_held(victim), total, r->o.total_bytes);
    }
    pthread_mutex_unlock(&r->lock);
    if (victim) {
        cut(r, victim, why);
        free_conn(victim); /* no event of it is pending: judged between batches */
    }
}

static void *loop(void *arg) {
    wr_relay *r = arg;
    struct epoll_event ev[64];
    conn **grave = NULL;
    size_t n_grave = 0, cap_grave = 0;
    uint64_t accept_at = 0; /* when to accept again after a failure (0: accepting) */
    uint64_t spin_until = 0;
    int spin_score = SPIN_MAX, since_probe = 0;
    while (!atomic_load(&r->stop)) {
        bool paused = accept_at != 0;
        const uint64_t now = mw_now_ns();
        if (spin_until && now >= spin_until) { /* a poll that caught nothing */
            spin_until = 0;
            if (spin_score > 0) spin_score--;
        }
        if (accept_at && now >= accept_at) {
            struct epoll_event el = {.events = EPOLLIN, .data.ptr = NULL};
            epoll_ctl(r->ep, EPOLL_CTL_MOD, r->lfd, &el);
            accept_at = 0;
        }
        pthread_mutex_lock(&r->lock);
        for (size_t i = 0; i < r->n; i++) {
            conn *c = r->conns[i];
            c->allow = (now - c->base_ns) / (1000000000ull / ALLOWANCE_PER_S);
        }
        const uint64_t total = total_held(r);
        for (size_t i = 0; i < r->n; i++) {
            arm(r, r->conns[i], total, now);
            paused |= r->conns[i]->paused_ns != 0 || r->conns[i]->doomed;
        }
        pthread_mutex_unlock(&r->lock);
        const bool spin = now < spin_until;
        int k = epoll_wait(r->ep, ev, 64, spin ? 0 : paused ? 100 : -1);
        if (k < 0 && errno != EINTR) break;
        if (k > 0) {
            if (spin)
                spin_score = spin_score + SPIN_HIT < SPIN_MAX ? spin_score + SPIN_HIT : SPIN_MAX;
            const bool probe = ++since_probe >= SPIN_PROBE;
            if (probe) since_probe = 0;
            spin_until = spin_score > 0 || probe ? mw_now_ns() + SPIN_NS : 0;
        }
        if (k == 0 && spin) {
            sched_yield();
            continue;
        }
        for (int i = 0; i < k; i++) {
            if (!ev[i].data.ptr) {
                if (!accept_one(r)) { /* EMFILE and the like: try again in a while */
                    struct epoll_event el = {.events = 0, .data.ptr = NULL};
                    epoll_ctl(r->ep, EPOLL_CTL_MOD, r->lfd, &el);
                    accept_at = mw_now_ns() + ACCEPT_RETRY_NS;
                }
                continue;
            }
            if (ev[i].data.ptr == (void *)r) {
                uint64_t v;
                ssize_t g = read(r->wake, &v, sizeof v);
                (void)g;
                continue;
            }
            const side *s = ev[i].data.ptr;
            conn *c = s->c;
            if (c->dead) continue;
            const uint32_t e = ev[i].events;
            bool ok = !(e & (EPOLLHUP | EPOLLERR)) || (s->which == 1 && !c->out_len);
            if (!ok) {
                /* reported whatever was asked for: the side is gone */
            } else if (s->which == 0) {
                if (e & EPOLLOUT) ok = to_peer(c);
                if (ok && (e & EPOLLIN) && (c->ev[0] & EPOLLIN)) ok = from_peer(r, c);
                if (ok && !c->dead && c->in_len) ok = to_zmq(r, c); /* at once, mostly */
            } else {
                if (e & EPOLLOUT) ok = to_zmq(r, c);
                if (ok && (e & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->out_len) {
                    if (!from_zmq(c)) {
                        zmq_closed(r, c);
                        ok = true;
                    } else if (c->out_len) {
                        ok = to_peer(c);
                    }
                }
            }
            if (!ok) close_conn(r, c);
            if (c->dead) {
                if (n_grave == cap_grave) {
                    cap_grave = cap_grave ? 2 * cap_grave : 16;
                    conn **p = realloc(grave, cap_grave * sizeof *p);
                    if (!p) break; /* leaked rather than freed under a pending event */
                    grave = p;
                }
                bool listed = false;
                for (size_t g = 0; g < n_grave; g++) listed |= grave[g] == c;
                if (!listed) grave[n_grave++] = c;
            }
        }
        atomic_store(&r->nudged, false);
        judge(r, mw_now_ns());
        /* closed in this batch: freed once its events are handled */
        for (size_t g = 0; g < n_grave; g++) free_conn(grave[g]);
        n_grave = 0;
    }
    free(grave);
    return NULL;
}

/* The address a bind's host names, read as libzmq reads one: "*" is every IPv4 address, then an
 * interface's name (its first IPv4 address, else its first IPv6 one), then an IP literal or a
 * host name. -1 with err when it names none. */
static int bind_addr(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len,
                     mw_err *err) {
    memset(ss, 0, sizeof *ss);
    if (!strcmp(host, "*")) {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons((uint16_t)port);
        *len = sizeof *a;
        return 0;
    }
    struct ifaddrs *ifs = NULL;
    const struct sockaddr *pick = NULL;
    if (getifaddrs(&ifs) == 0) {
        for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || strcmp(i->ifa_name, host)) continue;
            const int f = i->ifa_addr->sa_family;
            if (f == AF_INET) {
                pick = i->ifa_addr;
                break;
            }
            if (f == AF_INET6 && !pick) pick = i->ifa_addr;
        }
    }
    if (pick) {
        *len =
            pick->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        memcpy(ss, pick, *len);
        freeifaddrs(ifs);
    } else {
        if (ifs) freeifaddrs(ifs);
        char service[16];
        snprintf(service, sizeof service, "%d", port);
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        struct addrinfo *ai = NULL;
        const int rc = getaddrinfo(host, service, &hints, &ai);
        if (rc != 0 || !ai)
            return mw_errf(err, "no interface, address or host %s (%s)", host,
                           rc ? gai_strerror(rc) : "no address");
        *len = ai->ai_addrlen <= sizeof *ss ? ai->ai_addrlen : sizeof *ss;
        memcpy(ss, ai->ai_addr, *len);
        freeaddrinfo(ai);
    }
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    return 0;
}

static int listen_on(const char *endpoint, char *bound, size_t cap, mw_err *err) {
    char host[256];
    int p = 0;
    if (wr_live_endpoint(endpoint, host, sizeof host, &p))
        return mw_errf(err, "%s: not a tcp://HOST:PORT endpoint", endpoint);
    struct sockaddr_storage at;
    socklen_t at_len = 0;
    mw_err e;
    if (bind_addr(host, p, &at, &at_len, &e))
        return mw_errf(err, "cannot bind %s: %s", endpoint, e.msg);
    int fd = socket(at.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1, rcvbuf = KERNEL_RCVBUF;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0 ||
        (at.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(fd, (struct sockaddr *)&at, at_len) != 0 || listen(fd, 128) != 0) {
        mw_errf(err, "cannot bind %s: %s", endpoint, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    char ip[INET6_ADDRSTRLEN] = "?";
    p = 0;
    if (ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof ip);
        p = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        snprintf(bound, cap, "tcp://[%s]:%d", ip, p);
    } else {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip);
        p = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        snprintf(bound, cap, "tcp://%s:%d", ip, p);
    }
    return fd;
}

/* The directories of relays whose process is gone (killed: nobody removed them) go. */
static void sweep(const char *tmp) {
    DIR *d = opendir(tmp);
    if (!d) return;
    static const char prefix[] = "moewire-relay-";
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, sizeof prefix - 1)) continue;
        const long pid = strtol(e->d_name + sizeof prefix - 1, NULL, 10);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s/s", tmp, e->d_name);
        unlink(path);
        path[strlen(path) - 2] = '\0';
        rmdir(path);
    }
    closedir(d);
}

static void remove_dir(wr_relay *r) {
    if (!r->dir[0]) return;
    unlink(r->path);
    rmdir(r->dir);
    r->dir[0] = '\0';
}

int wr_relay_start(void *sock, const char *endpoint, const wr_relay_opts *o, wr_relay **out,
                   char *bound, size_t cap, mw_err *err) {
    *out = NULL;
    if (!o->peer_bytes || !o->total_bytes) return mw_errf(err, "relay: limits must be positive");
    wr_relay *r = calloc(1, sizeof *r);
    if (!r) return mw_errf(err, "out of memory");
    r->o = *o;
    r->lfd = r->ep = r->wake = -1;
    snprintf(r->name, sizeof r->name, "%s", o->name ? o->name : "moewire");
    pthread_mutex_init(&r->lock, NULL);
    atomic_init(&r->stop, false);
    atomic_init(&r->idle_ns, 0);
    atomic_init(&r->waiting, false);
    atomic_init(&r->nudged, false);
    uint64_t tag = mw_now_ns() ^ (uint64_t)(uintptr_t)r;
    const char *tmp = getenv("TMPDIR");
    sweep(tmp && *tmp ? tmp : "/tmp");
    snprintf(r->dir, sizeof r->dir, "%s/moewire-relay-%d-XXXXXX", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    if (!mkdtemp(r->dir)) {
        mw_errf(err, "relay: cannot create a directory in %s: %s", tmp && *tmp ? tmp : "/tmp",
                strerror(errno));
        r->dir[0] = '\0';
        goto fail;
    }
    snprintf(r->path, sizeof r->path, "%s/s", r->dir);
    if (strlen(r->path) >= sizeof((struct sockaddr_un *)0)->sun_path) {
        mw_errf(err, "relay: %s: too long a path for a unix socket (set TMPDIR)", r->path);
        goto fail;
    }
    snprintf(r->client_prefix, sizeof r->client_prefix, "moewire-%d-%016" PRIx64 "-c",
             (int)getpid(), tag);
    char ipc[192];
    snprintf(ipc, sizeof ipc, "ipc://%s", r->path);
    if (zmq_bind(sock, ipc) != 0) {
        mw_errf(err, "relay: cannot bind %s: %s", ipc, zmq_strerror(errno));
        goto fail;
    }
    if ((r->lfd = listen_on(endpoint, bound, cap, err)) < 0) goto fail;
    r->ep = epoll_create1(EPOLL_CLOEXEC);
    r->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event el = {.events = EPOLLIN, .data.ptr = NULL};
    struct epoll_event ew = {.events = EPOLLIN, .data.ptr = r};
    if (r->ep < 0 || r->wake < 0 || epoll_ctl(r->ep, EPOLL_CTL_ADD, r->lfd, &el) != 0 ||
        epoll_ctl(r->ep, EPOLL_CTL_ADD, r->wake, &ew) != 0) {
        mw_errf(err, "relay: %s", strerror(errno));
        goto fail;
    }
    /* the default policy, not the node's SCHED_BATCH: it is the node's receive path */
    if (mw_thread_start_normal(&r->th, loop, r) != 0) {
        mw_errf(err, "relay: cannot start its thread");
        goto fail;
    }
    if (o->bind_cpu && mw_thread_bind_cpu(r->th, o->cpu) != 0 && !o->quiet)
        fprintf(stderr, "%s: the receive relay's thread runs unbound: CPU %d refused\n", r->name,
                o->cpu);
    *out = r;
    return 0;
fail:
    remove_dir(r);
    if (r->lfd >= 0) close(r->lfd);
    if (r->ep >= 0) close(r->ep);
    if (r->wake >= 0) close(r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
    return -1;
}

static void nudge(wr_relay *r) {
    if (atomic_exchange(&r->nudged, true)) return; /* one wake-up is on its way */
    uint64_t one = 1;
    ssize_t w = write(r->wake, &one, sizeof one);
    (void)w;
}

void wr_relay_stop(wr_relay *r) {
    if (!r) return;
    atomic_store(&r->stop, true);
    uint64_t one = 1;
    ssize_t w = write(r->wake, &one, sizeof one);
    (void)w;
    pthread_join(r->th, NULL);
    while (r->n) {
        conn *c = r->conns[r->n - 1];
        close_conn(r, c);
        free_conn(c);
    }
    close(r->lfd);
    close(r->ep);
    close(r->wake);
    remove_dir(r); /* libzmq keeps listening on the descriptor; nobody connects any more */
    pthread_mutex_destroy(&r->lock);
    free(r->conns);
    free(r);
}

void wr_relay_delivered(wr_relay *r, int fd) {
    if (!r || fd < 0) return;
    int unread = 0;
    if (ioctl(fd, FIONREAD, &unread) != 0 || unread < 0) unread = 0;
    pthread_mutex_lock(&r->lock);
    conn *c = by_zmq_fd(r, fd);
    bool wake = false;
    if (c) {
        c->delivered_any = true;
        uint64_t cost;
        /* what libzmq has read of the stream: all passed on but what waits in its socket */
        const uint64_t read = c->fwd > (uint64_t)unread ? c->fwd - (uint64_t)unread : 0;
        if (cost_at(c, read, &cost) && cost > c->base) {
            c->base = cost;
            c->base_ns = mw_now_ns();
            c->allow = 0;
            wake = c->paused_ns != 0;
            c->paused_ns = 0;
        }
    }
    pthread_mutex_unlock(&r->lock);
    if (wake) nudge(r);
}

void wr_relay_idle(wr_relay *r) {
    if (r) atomic_store(&r->idle_ns, mw_now_ns());
}

void wr_relay_waiting(wr_relay *r, bool waiting) {
    if (r) atomic_store(&r->waiting, waiting);
}

void wr_relay_cut(wr_relay *r, int fd, const char *why) {
    if (!r || fd < 0) return;
    pthread_mutex_lock(&r->lock);
    conn *c = by_zmq_fd(r, fd);
    if (c && !c->doomed) {
        c->doomed = true;
        snprintf(c->why, sizeof c->why, "%s", why);
    }
    pthread_mutex_unlock(&r->lock);
    if (c) {
        uint64_t one = 1;
        ssize_t w = write(r->wake, &one, sizeof one);
        (void)w;
    }
}

const char *wr_relay_peer(wr_relay *r, int fd, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    if (!r || fd < 0 || !cap) return buf;
    pthread_mutex_lock(&r->lock);
    conn *c = by_zmq_fd(r, fd);
    if (c) snprintf(buf, cap, "%s", c->peer);
    pthread_mutex_unlock(&r->lock);
    return buf;
}

int wr_relay_acked(wr_relay *r, int fd, uint64_t *acked) {
    if (!r) return -1;
    pthread_mutex_lock(&r->lock);
    conn *c = by_zmq_fd(r, fd);
    int rc = c ? mw_tcp_acked(c->tcp, acked) : -1;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void wr_relay_rename(wr_relay *r, const char *name) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    snprintf(r->name, sizeof r->name, "%s", name);
    pthread_mutex_unlock(&r->lock);
}

wr_relay_stats wr_relay_get_stats(wr_relay *r) {
    wr_relay_stats s = {0};
    if (!r) return s;
    pthread_mutex_lock(&r->lock);
    s = r->st;
    pthread_mutex_unlock(&r->lock);
    return s;
}

#else /* no epoll, no abstract unix addresses (the relayed connections' names) */

#include <errno.h>
#include <string.h>

int wr_relay_start(void *sock, const char *endpoint, const wr_relay_opts *o, wr_relay **out,
                   char *bound, size_t cap, mw_err *err) {
    (void)sock, (void)endpoint, (void)o, (void)bound, (void)cap;
    *out = NULL;
    return mw_errf(err, "the receive relay needs Linux");
}
void wr_relay_stop(wr_relay *r) {
    (void)r;
}
void wr_relay_delivered(wr_relay *r, int fd) {
    (void)r, (void)fd;
}
void wr_relay_idle(wr_relay *r) {
    (void)r;
}
void wr_relay_waiting(wr_relay *r, bool waiting) {
    (void)r, (void)waiting;
}
void wr_relay_cut(wr_relay *r, int fd, const char *why) {
    (void)r, (void)fd, (void)why;
}
const char *wr_relay_peer(wr_relay *r, int fd, char *buf, size_t cap) {
    (void)r, (void)fd;
    if (cap) buf[0] = '\0';
    return buf;
}
int wr_relay_acked(wr_relay *r, int fd, uint64_t *acked) {
    (void)r, (void)fd, (void)acked;
    return -1;
}
void wr_relay_rename(wr_relay *r, const char *name) {
    (void)r, (void)name;
}
wr_relay_stats wr_relay_get_stats(wr_relay *r) {
    (void)r;
    wr_relay_stats s = {0};
    return s;
}

#endif
