/* tests/lan/delayline.c — a TCP delay line for the emulated LAN (tests/lan/lan.sh) on kernels
 * without the netem qdisc: it accepts connections on one address, connects each to a target, and
 * forwards the bytes both ways, each chunk leaving a fixed one-way delay after it arrived. A link's
 * rate is left to the kernel (tbf on the namespace's interface); this adds only the propagation
 * delay netem would. One thread, nanosecond ppoll timeouts.
 *   delayline --listen IP:PORT --to IP:PORT --delay-us D */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 128
#define CHUNK     (256 * 1024)
/* a direction stops reading while this much waits in its queue: the sender's TCP window then
 * pushes back, as a full link's would */
#define QUEUE_LIMIT (32u << 20)

typedef struct chunk {
    struct chunk *next;
    uint64_t due;
    size_t len, off;
    char data[];
} chunk;

/* One direction of a pair: bytes read from `from`, written to `to` when due. */
typedef struct dir {
    int from, to;
    chunk *head, *tail;
    size_t queued;
    int eof; /* `from` ended: shut `to`'s writing side once the queue drains */
} dir;

typedef struct pair {
    int used;
    dir d[2];
} pair;

static pair pairs[MAX_PAIRS];
static uint64_t delay_ns;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int parse_addr(const char *s, struct sockaddr_in *a) {
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host) return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port > 65535) return -1;
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void close_pair(pair *p) {
    for (int i = 0; i < 2; i++)
        for (chunk *c = p->d[i].head, *n; c; c = n) {
            n = c->next;
            free(c);
        }
    close(p->d[0].from);
    close(p->d[0].to);
    memset(p, 0, sizeof *p);
}

static void accept_one(int lfd, const struct sockaddr_in *to) {
    int a = accept(lfd, NULL, NULL);
    if (a < 0) return;
    pair *p = NULL;
    for (int i = 0; i < MAX_PAIRS && !p; i++)
        if (!pairs[i].used) p = &pairs[i];
    int b = socket(AF_INET, SOCK_STREAM, 0);
    /* a blocking connect: the target is in the same namespace, on loopback */
    if (!p || b < 0 || connect(b, (const struct sockaddr *)to, sizeof *to) != 0) {
        close(a);
        if (b >= 0) close(b);
        return;
    }
    tune(a);
    tune(b);
    p->used = 1;
    p->d[0] = (dir){.from = a, .to = b};
    p->d[1] = (dir){.from = b, .to = a};
}

/* Reads what `from` has into a chunk due delay_ns from now; -1 when the pair must close. */
static int pull(dir *d) {
    chunk *c = malloc(sizeof *c + CHUNK);
    if (!c) return -1;
    ssize_t n = read(d->from, c->data, CHUNK);
    if (n <= 0) {
        free(c);
        if (n == 0) d->eof = 1;
        return n == 0 || errno == EAGAIN || errno == EINTR ? 0 : -1;
    }
    *c = (chunk){.due = now_ns() + delay_ns, .len = (size_t)n};
    if (d->tail)
        d->tail->next = c;
    else
        d->head = c;
    d->tail = c;
    d->queued += (size_t)n;
    return 0;
}

/* Writes the chunks that are due; -1 when the pair must close. */
static int push(dir *d, uint64_t now) {
    while (d->head && d->head->due <= now) {
        chunk *c = d->head;
        ssize_t n = write(d->to, c->data + c->off, c->len - c->off);
        if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->off += (size_t)n;
        if (c->off < c->len) return 0;
        d->queued -= c->len;
        d->head = c->next;
        if (!d->head) d->tail = NULL;
        free(c);
    }
    if (!d->head && d->eof == 1) {
        shutdown(d->to, SHUT_WR);
        d->eof = 2;
    }
    return 0;
}

/* One round: poll the listener and every direction, with a timeout at the next due chunk. */
static void round_trip(int lfd, const struct sockaddr_in *to) {
    struct pollfd fds[1 + 2 * MAX_PAIRS];
    dir *who[1 + 2 * MAX_PAIRS];
    int whose[1 + 2 * MAX_PAIRS]; /* the pair of entry i */
    int nf = 0;
    uint64_t now = now_ns(), next = UINT64_MAX;
    fds[nf++] = (struct pollfd){.fd = lfd, .events = POLLIN};
    for (int i = 0; i < MAX_PAIRS; i++)
        for (int k = 0; pairs[i].used && k < 2; k++) {
            dir *d = &pairs[i].d[k];
            short ev = 0;
            if (!d->eof && d->queued < QUEUE_LIMIT) ev |= POLLIN;
            if (d->head && d->head->due <= now) ev |= POLLOUT;
            if (d->head && d->head->due > now && d->head->due < next) next = d->head->due;
            who[nf] = d;
            whose[nf] = i;
            fds[nf++] = (struct pollfd){.fd = ev & POLLIN ? d->from : d->to, .events = ev};
            if ((ev & POLLIN) && (ev & POLLOUT)) { /* both ends: a second entry for the writer */
                fds[nf - 1].events = POLLIN;
                who[nf] = d;
                whose[nf] = i;
                fds[nf++] = (struct pollfd){.fd = d->to, .events = POLLOUT};
            }
        }
    struct timespec ts = {0}, *tp = NULL;
    if (next != UINT64_MAX) {
        uint64_t w = next - now;
        ts = (struct timespec){.tv_sec = (time_t)(w / 1000000000u),
                               .tv_nsec = (long)(w % 1000000000u)};
        tp = &ts;
    }
    if (ppoll(fds, (nfds_t)nf, tp, NULL) < 0 && errno != EINTR) exit(1);
    if (fds[0].revents & POLLIN) accept_one(lfd, to);
    for (int i = 1; i < nf; i++) {
        dir *d = who[i];
        pair *p = &pairs[whose[i]];
        if (!p->used) continue;
        int bad = 0;
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && fds[i].fd == d->from) bad = pull(d);
        if (!bad) bad = push(d, now_ns());
        if (bad || (p->d[0].eof == 2 && p->d[1].eof == 2)) close_pair(p);
    }
    for (int i = 0; i < MAX_PAIRS; i++) /* due chunks of directions nothing woke */
        for (int k = 0; pairs[i].used && k < 2; k++)
            if (push(&pairs[i].d[k], now_ns())) close_pair(&pairs[i]);
}

int main(int argc, char **argv) {
    struct sockaddr_in from, to;
    const char *listen_s = NULL, *to_s = NULL;
    long us = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--listen"))
            listen_s = argv[i + 1];
        else if (!strcmp(argv[i], "--to"))
            to_s = argv[i + 1];
        else if (!strcmp(argv[i], "--delay-us"))
            us = strtol(argv[i + 1], NULL, 10);
    }
    if (!listen_s || !to_s || us < 0 || us > 10000000 || parse_addr(listen_s, &from) ||
        parse_addr(to_s, &to)) {
        fprintf(stderr, "usage: delayline --listen IP:PORT --to IP:PORT --delay-us D (0..1e7)\n");
        return 2;
    }
    delay_ns = (uint64_t)us * 1000u;
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&from, sizeof from) || listen(lfd, 64)) {
        fprintf(stderr, "delayline: cannot listen on %s: %s\n", listen_s, strerror(errno));
        return 1;
    }
    for (;;) round_trip(lfd, &to);
}
