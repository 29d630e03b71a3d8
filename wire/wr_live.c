/* wire/wr_live.c — the liveness channel (see wr_live.h): the node's answering thread and the
 * coordinator's pinging one, over UDP.
 *
 * A packet is 68 bytes: "MWLV", kind (1 ping, 2 pong), version (2), two zero bytes, the prober's
 * random id (u64), the slot, the slot's generation and the ping's sequence number (u32), the
 * prober's packet counter (u64, one for all its slots), all little-endian, then an HMAC
 * (crypto_auth, HMAC-SHA-512-256) of the first 36 bytes. Its key is derived from the node's token,
 * which travelled inside the Welcome on the authenticated data connection and never appears in a
 * datagram: a stranger who sees pings can neither forge one nor learn the token. A pong is its
 * ping with the kind changed and the MAC recomputed.
 *
 * Replays: the responder remembers, per prober id (RESPONDER_PROBERS of them, the least recently
 * heard forgotten first), the highest counter seen and which of the WINDOW below it were; a ping
 * that is older or seen already gets no answer. The prober takes a pong only for a ping of the
 * slot's generation still remembered and newer than the last one answered, with its own id. */
#include "wire/wr_live.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "util/mw_platform.h"
#include "util/mw_thread.h"
#include "util/mw_time.h"

#define SIGNED            36 /* bytes the MAC covers */
#define PACKET            (SIGNED + crypto_auth_BYTES)
#define VERSION           2
#define KIND_PING         1
#define KIND_PONG         2
#define HISTORY           64 /* pings remembered per slot: sent times by sequence number */
#define WINDOW            64 /* counters below the highest a responder still accepts once */
#define RESPONDER_PROBERS 64 /* probers whose replay windows a responder keeps */

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put64(uint8_t *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get64(const uint8_t *p) {
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* The MAC key of a node's token: a key of its own, not the token itself, so the token could be
 * given other uses without the two meeting. */
static void derive_key(uint8_t key[crypto_auth_KEYBYTES], const uint8_t token[WR_LIVE_TOKEN]) {
    static const char label[] = "moewire liveness v2";
    crypto_generichash(key, crypto_auth_KEYBYTES, (const uint8_t *)label, sizeof label - 1, token,
                       WR_LIVE_TOKEN);
}

typedef struct packet {
    int kind;
    uint64_t prober, counter;
    uint32_t slot, gen, seq;
} packet;

static void pack(uint8_t *b, const packet *k, const uint8_t *key) {
    memcpy(b, "MWLV", 4);
    b[4] = (uint8_t)k->kind;
    b[5] = VERSION;
    b[6] = b[7] = 0;
    put64(b + 8, k->prober);
    put32(b + 16, k->slot);
    put32(b + 20, k->gen);
    put32(b + 24, k->seq);
    put64(b + 28, k->counter);
    crypto_auth(b + SIGNED, b, SIGNED, key);
}

/* Whether b is a packet of this kind under key (the MAC checked in constant time); its fields in
 * *k. */
static bool unpack(const uint8_t *b, ssize_t n, int kind, const uint8_t *key, packet *k) {
    if (n != PACKET || memcmp(b, "MWLV", 4) || b[4] != kind || b[5] != VERSION || b[6] || b[7] ||
        crypto_auth_verify(b + SIGNED, b, SIGNED, key) != 0)
        return false;
    *k = (packet){.kind = kind,
                  .prober = get64(b + 8),
                  .slot = get32(b + 16),
                  .gen = get32(b + 20),
                  .seq = get32(b + 24),
                  .counter = get64(b + 28)};
    return true;
}

int wr_live_endpoint(const char *endpoint, char *host, size_t cap, int *port) {
    if (strncmp(endpoint, "tcp://", 6)) return -1;
    const char *h = endpoint + 6, *colon = strrchr(h, ':'), *end = colon;
    if (!colon || colon == h) return -1;
    if (*h == '[') {
        if (colon[-1] != ']') return -1;
        h++, end--;
    }
    char *stop;
    long p = strtol(colon + 1, &stop, 10);
    const char *hash = strchr(colon + 1, '#'); /* a pinned key after the port */
    if (colon[1] == '*' && !colon[2])          /* any port: a bind's wildcard */
        p = 0, stop = (char *)colon + 2;
    if (stop == colon + 1 || (*stop && stop != hash) || p < 0 || p > 65535) return -1;
    if ((size_t)(end - h) >= cap) return -1;
    memcpy(host, h, (size_t)(end - h));
    host[end - h] = '\0';
    *port = (int)p;
    return 0;
}

/* The first address host:port resolves to for a datagram socket (passive: for binding; "*" and
 * "" are any address). */
static int resolve(const char *host, int port, bool passive, struct sockaddr_storage *out,
                   socklen_t *len, mw_err *err) {
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_DGRAM,
                             .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
    const bool any = !*host || !strcmp(host, "*");
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(any ? NULL : host, service, &hints, &ai);
    if (rc != 0 || !ai) return mw_errf(err, "%s: %s", host, rc ? gai_strerror(rc) : "no address");
    memcpy(out, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

static uint16_t port_of(const struct sockaddr_storage *ss) {
    if (ss->ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    if (ss->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return 0;
}

static void set_port(struct sockaddr_storage *ss, int port) {
    if (ss->ss_family == AF_INET) ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    if (ss->ss_family == AF_INET6) ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
}

static void drain_pipe(int fd) {
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0) {
    }
}

/* ---- responder ------------------------------------------------------------------------------ */

/* What a responder remembers of one prober's counters. */
typedef struct window {
    uint64_t prober, top, seen; /* bit i of seen: counter top - i answered */
    uint64_t heard_ns;
    bool used;
} window;

struct wr_live_responder {
    int fd, wake[2];
    pthread_t th;
    uint8_t key[crypto_auth_KEYBYTES];
    window win[RESPONDER_PROBERS];
    _Atomic uint64_t answered, refused;
};

/* Whether counter c of prober id is new (then it is remembered). A prober not known yet takes the
 * slot of the one heard least recently. */
static bool fresh(wr_live_responder *r, uint64_t id, uint64_t c, uint64_t now) {
    window *w = NULL, *old = &r->win[0];
    for (int i = 0; i < RESPONDER_PROBERS && !w; i++) {
        window *x = &r->win[i];
        if (x->used && x->prober == id) w = x;
        if (!x->used || (old->used && x->heard_ns < old->heard_ns)) old = x;
    }
    if (!w) {
        *old = (window){.prober = id, .top = c, .seen = 1, .heard_ns = now, .used = true};
        return true;
    }
    if (c > w->top) {
        const uint64_t shift = c - w->top;
        w->seen = shift >= WINDOW ? 1 : (w->seen << shift) | 1;
        w->top = c;
    } else {
        const uint64_t back = w->top - c;
        if (back >= WINDOW || (w->seen >> back) & 1) return false;
        w->seen |= 1ull << back;
    }
    w->heard_ns = now;
    return true;
}

static void *respond(void *arg) {
    wr_live_responder *r = arg;
    struct pollfd pf[2] = {{r->fd, POLLIN, 0}, {r->wake[0], POLLIN, 0}};
    for (;;) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR) break;
        if (pf[1].revents) break;
        uint8_t b[PACKET + 1];
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        ssize_t n;
        while ((n = recvfrom(r->fd, b, sizeof b, MSG_DONTWAIT, (struct sockaddr *)&from, &fl)) >=
               0) {
            packet k;
            if (unpack(b, n, KIND_PING, r->key, &k) && fresh(r, k.prober, k.counter, mw_now_ns())) {
                k.kind = KIND_PONG;
                pack(b, &k, r->key);
                if (sendto(r->fd, b, PACKET, MSG_DONTWAIT, (struct sockaddr *)&from, fl) == PACKET)
                    atomic_fetch_add(&r->answered, 1);
            } else {
                atomic_fetch_add(&r->refused, 1);
            }
            fl = sizeof from;
        }
    }
    return NULL;
}

int wr_live_responder_start(const char *endpoint, const uint8_t token[WR_LIVE_TOKEN],
                            wr_live_responder **out, int *port_out, mw_err *err) {
    *out = NULL;
    char host[256];
    int port;
    if (wr_live_endpoint(endpoint, host, sizeof host, &port))
        return mw_errf(err, "liveness: %s is not a tcp:// endpoint", endpoint);
    struct sockaddr_storage ss;
    socklen_t len;
    if (resolve(host, port, true, &ss, &len, err)) return mw_err_wrap(err, "liveness");
    if (sodium_init() < 0) return mw_errf(err, "liveness: libsodium does not start");
    wr_live_responder *r = calloc(1, sizeof *r);
    if (!r) return mw_errf(err, "out of memory");
    r->wake[0] = r->wake[1] = -1;
    derive_key(r->key, token);
    r->fd = socket(ss.ss_family, SOCK_DGRAM, 0);
    if (r->fd < 0) goto fail;
    if (bind(r->fd, (struct sockaddr *)&ss, len) != 0) {
        set_port(&ss, 0); /* the data port's number is taken for UDP: any other, announced */
        if (bind(r->fd, (struct sockaddr *)&ss, len) != 0) goto fail;
    }
    len = sizeof ss;
    if (getsockname(r->fd, (struct sockaddr *)&ss, &len) != 0 || mw_pipe_nonblock(r->wake) != 0)
        goto fail;
    if (mw_thread_start_normal(&r->th, respond, r)) goto fail;
    *port_out = port_of(&ss);
    *out = r;
    return 0;
fail:
    mw_errf(err, "liveness: cannot listen on udp %s:%d: %s", host, port, strerror(errno));
    if (r->fd >= 0) close(r->fd);
    if (r->wake[0] >= 0) close(r->wake[0]), close(r->wake[1]);
    free(r);
    return -1;
}

uint64_t wr_live_responder_answered(wr_live_responder *r) {
    return r ? atomic_load(&r->answered) : 0;
}

uint64_t wr_live_responder_refused(wr_live_responder *r) {
    return r ? atomic_load(&r->refused) : 0;
}

void wr_live_responder_stop(wr_live_responder *r) {
    if (!r) return;
    ssize_t w = write(r->wake[1], "x", 1);
    (void)w;
    pthread_join(r->th, NULL);
    close(r->fd);
    close(r->wake[0]);
    close(r->wake[1]);
    sodium_memzero(r->key, sizeof r->key);
    free(r);
}

/* ---- prober --------------------------------------------------------------------------------- */

typedef struct slot {
    bool used, armed, silent, warned;
    struct sockaddr_storage addr;
    socklen_t alen;
    uint8_t key[crypto_auth_KEYBYTES];
    char label[128];
    uint32_t gen, seq;         /* the last ping's */
    uint64_t sent[HISTORY];    /* by seq % HISTORY */
    uint64_t set_ns;           /* when the slot was set */
    uint64_t unanswered_since; /* the oldest ping after the newest answered one; 0: none */
    uint32_t answered_seq;     /* the newest answered */
    uint32_t silences, silent_ms;
    uint64_t pings, pongs;
} slot;

struct wr_live_prober {
    int fd4, fd6, wake[2], event[2];
    int cap, down_ms, ivl_ms;
    char name[64];
    pthread_t th;
    pthread_mutex_t lock;
    atomic_bool stop;
    uint64_t id, counter; /* this prober's random id; packets sent, all slots */
    slot *s;
};

/* A node that never answers is told of once, this long after it was set. */
#define NEVER_MS 3000

static void take_pong(wr_live_prober *p, const uint8_t *b, ssize_t n) {
    if (n != PACKET) return;
    const uint32_t i = get32(b + 16);
    if (i >= (uint32_t)p->cap) return;
    slot *s = &p->s[i];
    packet k;
    /* a pong of this generation, for a ping still remembered, newer than the last answered */
    if (!s->used || !unpack(b, n, KIND_PONG, s->key, &k) || k.prober != p->id || k.gen != s->gen ||
        s->seq - k.seq >= HISTORY || (s->armed && (int32_t)(k.seq - s->answered_seq) <= 0))
        return;
    const uint32_t seq = k.seq;
    s->pongs++;
    s->armed = true;
    s->answered_seq = seq;
    s->silent = false;
    /* pings after this one that are still out: the oldest of them */
    s->unanswered_since = seq == s->seq ? 0 : s->sent[(seq + 1) % HISTORY];
}

static void drain(wr_live_prober *p, int fd) {
    uint8_t b[PACKET + 1];
    ssize_t n;
    while (fd >= 0 && (n = recv(fd, b, sizeof b, MSG_DONTWAIT)) >= 0) take_pong(p, b, n);
}

static void ping_all(wr_live_prober *p, uint64_t now) {
    uint8_t b[PACKET];
    for (int i = 0; i < p->cap; i++) {
        slot *s = &p->s[i];
        if (!s->used) continue;
        s->seq++;
        s->sent[s->seq % HISTORY] = now;
        if (!s->unanswered_since) s->unanswered_since = now;
        const packet k = {.kind = KIND_PING,
                          .prober = p->id,
                          .slot = (uint32_t)i,
                          .gen = s->gen,
                          .seq = s->seq,
                          .counter = ++p->counter};
        pack(b, &k, s->key);
        const int fd = s->addr.ss_family == AF_INET6 ? p->fd6 : p->fd4;
        if (fd >= 0 &&
            sendto(fd, b, PACKET, MSG_DONTWAIT, (struct sockaddr *)&s->addr, s->alen) == PACKET)
            s->pings++;
    }
}

/* After every answer that arrived is taken: who fell silent (then the event pipe says so). */
static void judge(wr_live_prober *p, uint64_t now) {
    const uint64_t down = (uint64_t)p->down_ms * 1000000ull;
    bool fell = false;
    for (int i = 0; i < p->cap; i++) {
        slot *s = &p->s[i];
        if (!s->used) continue;
        if (!s->armed && !s->warned && now - s->set_ns > (uint64_t)NEVER_MS * 1000000ull) {
            s->warned = true;
            fprintf(stderr,
                    "%s: %s has not answered on its liveness channel within %d ms (is UDP to it "
                    "filtered?): a hung node is found by heartbeats alone, later\n",
                    p->name, s->label, NEVER_MS);
        }
        if (!s->armed || s->silent || !s->unanswered_since || now - s->unanswered_since <= down)
            continue;
        s->silent = true;
        s->silences++;
        s->silent_ms = (uint32_t)((now - s->unanswered_since) / 1000000ull);
        fell = true;
    }
    if (fell) {
        ssize_t w = write(p->event[1], "x", 1);
        (void)w; /* a full pipe is readable already */
    }
}

/* The earliest of the next ping and the moment an armed slot's oldest unanswered ping is down_ms
 * old: judged then, not a ping interval later. */
static uint64_t next_wake(wr_live_prober *p, uint64_t next) {
    const uint64_t down = (uint64_t)p->down_ms * 1000000ull;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->cap; i++) {
        const slot *s = &p->s[i];
        if (s->used && s->armed && !s->silent && s->unanswered_since &&
            s->unanswered_since + down + 1 < next)
            next = s->unanswered_since + down + 1;
    }
    pthread_mutex_unlock(&p->lock);
    return next;
}

static void *probe(void *arg) {
    wr_live_prober *p = arg;
    uint64_t next = mw_now_ns();
    while (!atomic_load(&p->stop)) {
        uint64_t now = mw_now_ns(), wake = next_wake(p, next);
        int wait = wake > now ? (int)((wake - now + 999999ull) / 1000000ull) : 0;
        struct pollfd pf[3] = {{p->wake[0], POLLIN, 0}, {p->fd4, POLLIN, 0}, {p->fd6, POLLIN, 0}};
        if (poll(pf, 3, wait) < 0 && errno != EINTR) break;
        drain_pipe(p->wake[0]);
        pthread_mutex_lock(&p->lock);
        drain(p, p->fd4);
        drain(p, p->fd6);
        now = mw_now_ns();
        judge(p, now);
        if (now >= next) {
            ping_all(p, now);
            const uint64_t ivl = (uint64_t)p->ivl_ms * 1000000ull;
            next = next + ivl > now ? next + ivl : now + ivl;
        }
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

int wr_live_prober_start(int cap, int down_ms, const char *name, wr_live_prober **out,
                         mw_err *err) {
    *out = NULL;
    if (cap < 1 || down_ms < 1) return mw_errf(err, "liveness: bad options");
    if (sodium_init() < 0) return mw_errf(err, "liveness: libsodium does not start");
    wr_live_prober *p = calloc(1, sizeof *p);
    if (!p || !(p->s = calloc((size_t)cap, sizeof *p->s))) {
        free(p);
        return mw_errf(err, "out of memory");
    }
    p->cap = cap;
    p->down_ms = down_ms;
    randombytes_buf(&p->id, sizeof p->id);
    p->ivl_ms = down_ms / 10 < 10 ? 10 : down_ms / 10 > 100 ? 100 : down_ms / 10;
    snprintf(p->name, sizeof p->name, "%s", name ? name : "moewire");
    p->wake[0] = p->wake[1] = p->event[0] = p->event[1] = -1;
    atomic_init(&p->stop, false);
    pthread_mutex_init(&p->lock, NULL);
    p->fd4 = socket(AF_INET, SOCK_DGRAM, 0);
    p->fd6 = socket(AF_INET6, SOCK_DGRAM, 0);
    if ((p->fd4 < 0 && p->fd6 < 0) || mw_pipe_nonblock(p->wake) || mw_pipe_nonblock(p->event) ||
        mw_thread_start_normal(&p->th, probe, p)) {
        mw_errf(err, "liveness: cannot start: %s", strerror(errno));
        if (p->fd4 >= 0) close(p->fd4);
        if (p->fd6 >= 0) close(p->fd6);
        for (int k = 0; k < 2; k++) {
            if (p->wake[k] >= 0) close(p->wake[k]);
            if (p->event[k] >= 0) close(p->event[k]);
        }
        pthread_mutex_destroy(&p->lock);
        free(p->s);
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void wr_live_prober_stop(wr_live_prober *p) {
    if (!p) return;
    atomic_store(&p->stop, true);
    ssize_t w = write(p->wake[1], "x", 1);
    (void)w;
    pthread_join(p->th, NULL);
    if (p->fd4 >= 0) close(p->fd4);
    if (p->fd6 >= 0) close(p->fd6);
    for (int k = 0; k < 2; k++) close(p->wake[k]), close(p->event[k]);
    pthread_mutex_destroy(&p->lock);
    free(p->s);
    free(p);
}

int wr_live_prober_set(wr_live_prober *p, int i, const char *host, int port,
                       const uint8_t token[WR_LIVE_TOKEN], const char *label, mw_err *err) {
    if (!p || i < 0 || i >= p->cap || port < 1 || port > 65535)
        return mw_errf(err, "liveness: bad slot or port");
    struct sockaddr_storage ss;
    socklen_t len;
    if (resolve(host, port, false, &ss, &len, err)) return mw_err_wrap(err, "liveness");
    pthread_mutex_lock(&p->lock);
    slot *s = &p->s[i];
    const uint32_t gen = s->gen + 1;
    memset(s, 0, sizeof *s);
    s->gen = gen; /* pongs to the slot's earlier pings are not this node's */
    s->used = true;
    s->addr = ss;
    s->alen = len;
    derive_key(s->key, token);
    snprintf(s->label, sizeof s->label, "%s", label ? label : host);
    s->set_ns = mw_now_ns();
    pthread_mutex_unlock(&p->lock);
    ssize_t w = write(p->wake[1], "x", 1); /* pinged at once */
    (void)w;
    return 0;
}

void wr_live_prober_clear(wr_live_prober *p, int i) {
    if (!p || i < 0 || i >= p->cap) return;
    pthread_mutex_lock(&p->lock);
    p->s[i].used = false;
    pthread_mutex_unlock(&p->lock);
}

int wr_live_prober_fd(const wr_live_prober *p) {
    return p ? p->event[0] : -1;
}

void wr_live_prober_ack(wr_live_prober *p) {
    if (p) drain_pipe(p->event[0]);
}

wr_live_state wr_live_prober_state(wr_live_prober *p, int i) {
    wr_live_state st = {0};
    if (!p || i < 0 || i >= p->cap) return st;
    pthread_mutex_lock(&p->lock);
    const slot *s = &p->s[i];
    st = (wr_live_state){.pinged = s->used,
                         .armed = s->armed,
                         .silent = s->silent,
                         .silences = s->silences,
                         .silent_ms = s->silent_ms,
                         .pings = s->pings,
                         .pongs = s->pongs};
    pthread_mutex_unlock(&p->lock);
    return st;
}
