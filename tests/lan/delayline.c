/* tests/lan/delayline.c — a TCP delay line for the emulated LAN (tests/lan/lan.sh) on kernels
 * without the netem qdisc: it accepts connections on one address, connects each to a target, and
 * forwards the bytes both ways, each chunk leaving a fixed one-way delay after it arrived. A link's
 * rate is left to the kernel (tbf on the namespace's interface); this adds only the propagation
 * delay netem would. One thread. A chunk is due `delay` after the kernel received it (the socket's
 * receive timestamp, so the line's own late wake-up to read it does not add to the delay); the
 * line sleeps until its running estimate of how late the scheduler wakes it before the due time
 * and then releases what it woke for, so on a loaded host the delay stays near its setting on
 * average (a spin to the exact due time would take the CPU the nodes on the same cores need).
 * It also measures links (bench/bench_lan.sh): --echo answers every byte at once, --ping sends a
 * message to each endpoint at the same time and times until every echo is back (a fan-out round
 * trip, as a layer's call to its nodes), printing one JSON line.
 *   delayline --listen IP:PORT --to IP:PORT --delay-us D
 *   delayline --echo --listen IP:PORT
 *   delayline --ping IP:PORT[,IP:PORT...] [--count N] [--bytes B] [--label L]
 * and the host: --cores MS spins P processes (default one per online CPU) for MS ms and prints
 * the CPU time they got over the wall time: the cores free at that moment to a fleet of P
 * runnable threads (the scheduler shares the CPUs by thread, so a fleet of 17 threads gets more
 * of a loaded host than 2 would).
 *   delayline --cores MS [--procs P] [--label L] */
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
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
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
static uint64_t late_ns; /* running mean of how late a timed sleep ends */

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

static uint64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
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

/* Reads what `from` has into a chunk due delay_ns after the kernel received it (its receive
 * timestamp, realtime, taken back to the monotonic clock); -1 when the pair must close. */
static int pull(dir *d) {
    chunk *c = malloc(sizeof *c + CHUNK);
    if (!c) return -1;
    char ctl[CMSG_SPACE(sizeof(struct timespec))];
    struct iovec iov = {c->data, CHUNK};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(d->from, &mh, 0);
    if (n <= 0) {
        free(c);
        if (n == 0) d->eof = 1;
        return n == 0 || errno == EAGAIN || errno == EINTR ? 0 : -1;
    }
    uint64_t now = now_ns(), arrived = now;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
        if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(h), sizeof ts);
            uint64_t rx = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec, re = real_ns();
            if (rx <= re && re - rx < now) arrived = now - (re - rx);
        }
    *c = (chunk){.due = arrived + delay_ns, .len = (size_t)n};
    if (d->tail)
        d->tail->next = c;
    else
        d->head = c;
    d->tail = c;
    d->queued += (size_t)n;
    return 0;
}

/* Writes the chunks due by `now`; -1 when the pair must close. */
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
    /* sleep until the next due time less the usual lateness of a wake-up */
    struct timespec ts = {0}, *tp = NULL;
    uint64_t want = 0;
    if (next != UINT64_MAX) {
        want = next > now + late_ns ? next - late_ns : now;
        uint64_t w = want - now;
        ts = (struct timespec){.tv_sec = (time_t)(w / 1000000000u),
                               .tv_nsec = (long)(w % 1000000000u)};
        tp = &ts;
    }
    int rc = ppoll(fds, (nfds_t)nf, tp, NULL);
    if (rc < 0 && errno != EINTR) exit(1);
    uint64_t t = now_ns(), horizon = t;
    if (rc == 0 && tp) { /* the timer woke it: learn how late, release what it woke for */
        if (want > now) {
            uint64_t over = t > want ? t - want : 0;
            /* bounded by a quarter of the delay: a stall must not make chunks leave early */
            over = over > delay_ns / 4 ? delay_ns / 4 : over;
            late_ns = late_ns - late_ns / 8 + over / 8;
        }
        horizon = next > t ? next : t; /* early by less than another sleep would be late */
    }
    if (fds[0].revents & POLLIN) accept_one(lfd, to);
    for (int i = 1; i < nf; i++) {
        dir *d = who[i];
        pair *p = &pairs[whose[i]];
        if (!p->used) continue;
        int bad = 0;
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && fds[i].fd == d->from) bad = pull(d);
        if (!bad) bad = push(d, horizon > now_ns() ? horizon : now_ns());
        if (bad || (p->d[0].eof == 2 && p->d[1].eof == 2)) close_pair(p);
    }
    for (int i = 0; i < MAX_PAIRS; i++) /* due chunks of directions nothing woke */
        for (int k = 0; pairs[i].used && k < 2; k++) {
            uint64_t h = now_ns();
            if (push(&pairs[i].d[k], horizon > h ? horizon : h)) close_pair(&pairs[i]);
        }
}

/* ---- link probes ----------------------------------------------------------------------------- */

static int listen_on(const struct sockaddr_in *a, const char *s) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (const struct sockaddr *)a, sizeof *a) || listen(fd, 64)) {
        fprintf(stderr, "delayline: cannot listen on %s: %s\n", s, strerror(errno));
        exit(1);
    }
    return fd;
}

/* Answers every byte on every connection at once. */
static int echo(const struct sockaddr_in *a, const char *s) {
    struct pollfd fds[1 + MAX_PAIRS] = {{.fd = listen_on(a, s), .events = POLLIN}};
    int nf = 1;
    static char buf[CHUNK];
    for (;;) {
        if (poll(fds, (nfds_t)nf, -1) < 0 && errno != EINTR) return 1;
        if ((fds[0].revents & POLLIN) && nf < 1 + MAX_PAIRS) {
            int c = accept(fds[0].fd, NULL, NULL), one = 1;
            if (c >= 0) {
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                fds[nf++] = (struct pollfd){.fd = c, .events = POLLIN};
            }
        }
        for (int i = 1; i < nf; i++) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = read(fds[i].fd, buf, sizeof buf), w = 0;
            while (n > 0 && w < n) {
                ssize_t k = write(fds[i].fd, buf + w, (size_t)(n - w));
                if (k <= 0) break;
                w += k;
            }
            if (n <= 0 || w < n) {
                close(fds[i].fd);
                fds[i--] = fds[--nf];
            }
        }
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sends `bytes` to every endpoint at once and waits for all the echoes, `count` times (after a
 * few unrecorded); prints the round trip's median, mean and 90th percentile. */
static int ping(char *list, int count, int bytes, const char *label) {
    int fd[64], n = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t && n < 64;
         t = strtok_r(NULL, ",", &save)) {
        struct sockaddr_in a;
        int one = 1;
        if (parse_addr(t, &a)) return fprintf(stderr, "delayline: bad endpoint %s\n", t), 2;
        fd[n] = socket(AF_INET, SOCK_STREAM, 0);
        if (fd[n] < 0 || connect(fd[n], (struct sockaddr *)&a, sizeof a))
            return fprintf(stderr, "delayline: cannot reach %s: %s\n", t, strerror(errno)), 1;
        setsockopt(fd[n++], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    char *buf = calloc(1, (size_t)bytes);
    uint64_t *rtt = malloc((size_t)count * sizeof *rtt);
    if (!n || !buf || !rtt) return 1;
    const int warm = 5;
    for (int it = 0; it < warm + count; it++) {
        uint64_t t0 = now_ns();
        int got[64] = {0}, left = n;
        for (int i = 0; i < n; i++)
            if (write(fd[i], buf, (size_t)bytes) != bytes) return 1;
        while (left) {
            struct pollfd p[64];
            for (int i = 0; i < n; i++) p[i] = (struct pollfd){.fd = fd[i], .events = POLLIN};
            if (poll(p, (nfds_t)n, 10000) <= 0) return fprintf(stderr, "delayline: no echo\n"), 1;
            for (int i = 0; i < n; i++) {
                if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                ssize_t k = read(fd[i], buf, (size_t)(bytes - got[i]));
                if (k <= 0) return fprintf(stderr, "delayline: echo closed\n"), 1;
                if ((got[i] += (int)k) == bytes) left--;
            }
        }
        if (it >= warm) rtt[it - warm] = now_ns() - t0;
    }
    double sum = 0;
    for (int i = 0; i < count; i++) sum += (double)rtt[i];
    qsort(rtt, (size_t)count, sizeof *rtt, cmp_u64);
    printf("{\"bench\":\"lan_link\",\"label\":\"%s\",\"endpoints\":%d,\"bytes\":%d,"
           "\"count\":%d,\"rtt_us_median\":%.1f,\"rtt_us_mean\":%.1f,\"rtt_us_p90\":%.1f}\n",
           label, n, bytes, count, (double)rtt[count / 2] * 1e-3, sum / count * 1e-3,
           (double)rtt[count * 9 / 10] * 1e-3);
    free(buf);
    free(rtt);
    return 0;
}

/* `n` spinning children (0: one per online CPU) for `ms` wall: the CPU time they got, in cores. */
static int cores(long ms, long n, const char *label) {
    if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1 || n > 1024) n = 1;
    const uint64_t t0 = now_ns(), end = t0 + (uint64_t)ms * 1000000u;
    for (long i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0) return 1;
        if (p == 0) {
            while (now_ns() < end) {
            }
            _exit(0);
        }
    }
    while (wait(NULL) > 0) {
    }
    const double wall = (double)(now_ns() - t0);
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    const double cpu = ((double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec) * 1e9 +
                       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e3;
    printf("{\"bench\":\"lan_cores\",\"label\":\"%s\",\"procs\":%ld,\"ms\":%ld,"
           "\"cores_free\":%.2f}\n",
           label, n, ms, cpu / wall);
    return 0;
}

int main(int argc, char **argv) {
    struct sockaddr_in from, to;
    const char *listen_s = NULL, *to_s = NULL, *label = "link";
    char *ping_s = NULL;
    long us = -1, count = 200, bytes = 512, cores_ms = 0, procs = 0;
    int echo_mode = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--echo")) {
            echo_mode = 1;
            continue;
        }
        if (i + 1 >= argc) break;
        if (!strcmp(argv[i], "--ping"))
            ping_s = argv[++i];
        else if (!strcmp(argv[i], "--count"))
            count = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--bytes"))
            bytes = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--procs"))
            procs = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--cores"))
            cores_ms = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--label"))
            label = argv[++i];
        else if (!strcmp(argv[i], "--listen"))
            listen_s = argv[++i];
        else if (!strcmp(argv[i], "--to"))
            to_s = argv[++i];
        else if (!strcmp(argv[i], "--delay-us"))
            us = strtol(argv[++i], NULL, 10);
    }
    signal(SIGPIPE, SIG_IGN);
    if (cores_ms)
        return cores_ms > 0 && cores_ms <= 60000 && procs >= 0 && procs <= 1024
                   ? cores(cores_ms, procs, label)
                   : 2;
    if (ping_s) {
        if (count < 1 || count > 100000 || bytes < 1 || bytes > CHUNK) {
            fprintf(stderr, "delayline: --count 1..100000, --bytes 1..%d\n", CHUNK);
            return 2;
        }
        return ping(ping_s, (int)count, (int)bytes, label);
    }
    if (echo_mode) {
        if (!listen_s || parse_addr(listen_s, &from)) {
            fprintf(stderr, "usage: delayline --echo --listen IP:PORT\n");
            return 2;
        }
        return echo(&from, listen_s);
    }
    if (!listen_s || !to_s || us < 0 || us > 10000000 || parse_addr(listen_s, &from) ||
        parse_addr(to_s, &to)) {
        fprintf(stderr, "usage: delayline --listen IP:PORT --to IP:PORT --delay-us D (0..1e7)\n");
        return 2;
    }
    delay_ns = (uint64_t)us * 1000u;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* the default 50 us slack is half a 0.1 ms link */
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&from, sizeof from) || listen(lfd, 64)) {
        fprintf(stderr, "delayline: cannot listen on %s: %s\n", listen_s, strerror(errno));
        return 1;
    }
    for (;;) round_trip(lfd, &to);
}
