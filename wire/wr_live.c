/* wire/wr_live.c — the liveness channel (see wr_live.h): the node's answering thread and the
 * coordinator's pinging one, over UDP.
 *
 * A packet is 36 bytes: "MWLV", kind (1 ping, 2 pong), version (1), two zero bytes, the slot, the
 * slot's generation and the ping's sequence number (u32, little-endian), the node's token. A pong
 * is its ping with the kind changed. */
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

#include "util/mw_platform.h"
#include "util/mw_thread.h"
#include "util/mw_time.h"

#define PACKET    36
#define KIND_PING 1
#define KIND_PONG 2
#define HISTORY   64 /* pings remembered per slot: sent times by sequence number */

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void pack(uint8_t *b, int kind, uint32_t slot, uint32_t gen, uint32_t seq,
                 const uint8_t *token) {
    memcpy(b, "MWLV", 4);
    b[4] = (uint8_t)kind;
    b[5] = 1;
    b[6] = b[7] = 0;
    put32(b + 8, slot);
    put32(b + 12, gen);
    put32(b + 16, seq);
    memcpy(b + 20, token, WR_LIVE_TOKEN);
}

static bool well_formed(const uint8_t *b, ssize_t n, int kind) {
    return n == PACKET && !memcmp(b, "MWLV", 4) && b[4] == kind && b[5] == 1 && !b[6] && !b[7];
}

/* Token comparison in time independent of where they differ. */
static bool same_token(const uint8_t *a, const uint8_t *b) {
    uint8_t d = 0;
    for (int i = 0; i < WR_LIVE_TOKEN; i++) d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
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

struct wr_live_responder {
    int fd, wake[2];
    pthread_t th;
    uint8_t token[WR_LIVE_TOKEN];
    _Atomic uint64_t answered;
};

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
            if (well_formed(b, n, KIND_PING) && same_token(b + 20, r->token)) {
                b[4] = KIND_PONG;
                if (sendto(r->fd, b, PACKET, MSG_DONTWAIT, (struct sockaddr *)&from, fl) == PACKET)
                    atomic_fetch_add(&r->answered, 1);
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
    wr_live_responder *r = calloc(1, sizeof *r);
    if (!r) return mw_errf(err, "out of memory");
    r->wake[0] = r->wake[1] = -1;
    memcpy(r->token, token, WR_LIVE_TOKEN);
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

void wr_live_responder_stop(wr_live_responder *r) {
    if (!r) return;
    ssize_t w = write(r->wake[1], "x", 1);
    (void)w;
    pthread_join(r->th, NULL);
    close(r->fd);
    close(r->wake[0]);
    close(r->wake[1]);
    free(r);
}

/* ---- prober --------------------------------------------------------------------------------- */

typedef struct slot {
    bool used, armed, silent, warned;
    struct sockaddr_storage addr;
    socklen_t alen;
    uint8_t token[WR_LIVE_TOKEN];
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
    slot *s;
};

/* A node that never answers is told of once, this long after it was set. */
#define NEVER_MS 3000

static void take_pong(wr_live_prober *p, const uint8_t *b) {
    uint32_t i = get32(b + 8), gen = get32(b + 12), seq = get32(b + 16);
    if (i >= (uint32_t)p->cap) return;
    slot *s = &p->s[i];
    /* a pong of this generation, for a ping still remembered, newer than the last answered */
    if (!s->used || gen != s->gen || !same_token(b + 20, s->token) || s->seq - seq >= HISTORY ||
        (s->armed && (int32_t)(seq - s->answered_seq) <= 0))
        return;
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
    while (fd >= 0 && (n = recv(fd, b, sizeof b, MSG_DONTWAIT)) >= 0)
        if (well_formed(b, n, KIND_PONG)) take_pong(p, b);
}

static void ping_all(wr_live_prober *p, uint64_t now) {
    uint8_t b[PACKET];
    for (int i = 0; i < p->cap; i++) {
        slot *s = &p->s[i];
        if (!s->used) continue;
        s->seq++;
        s->sent[s->seq % HISTORY] = now;
        if (!s->unanswered_since) s->unanswered_since = now;
        pack(b, KIND_PING, (uint32_t)i, s->gen, s->seq, s->token);
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
    wr_live_prober *p = calloc(1, sizeof *p);
    if (!p || !(p->s = calloc((size_t)cap, sizeof *p->s))) {
        free(p);
        return mw_errf(err, "out of memory");
    }
    p->cap = cap;
    p->down_ms = down_ms;
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
    memcpy(s->token, token, WR_LIVE_TOKEN);
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
