/* bench/bench_relay.c — what the receive relay (wire/wr_relay.h) costs a round trip: a ROUTER that
 * echoes every message, bound on loopback TCP directly and behind a relay in the same process,
 * against a DEALER sending one message and waiting for its echo. The two take turns round after
 * round (R rounds of N round trips each, at each message size), so a shared machine's load hits
 * both alike. The echo side does what an expert node does per message (wr_relay_delivered with
 * the message's connection, wr_relay_waiting around its poll). Prints one JSON object per size:
 * the median round trip of each (median over rounds of each round's median), the relay's over
 * the direct one per round (median, minimum, maximum over rounds), and the process's CPU time per
 * round trip of each (client, echo and relay threads together). --affinity binds each echo side
 * (its thread, libzmq's I/O thread, the relay's thread) to the last CPU and the client to the
 * others, as an expert node with --affinity binds itself. `bench_relay --help` lists the
 * options. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "util/mw_platform.h"
#include "wire/wr_relay.h"
#include "wire/wr_zmq.h"

typedef struct echo {
    void *ctx, *sock;
    wr_relay *relay; /* NULL: bound directly */
    char endpoint[128];
    pthread_t th;
    atomic_bool stop;
} echo;

static int echo_cpu = -1; /* --affinity: the CPU of the echo sides */

static void *echo_loop(void *arg) {
    echo *e = arg;
    if (echo_cpu >= 0) mw_thread_bind_cpu(pthread_self(), echo_cpu);
    wr_rx rx;
    wr_rx_init(&rx);
    zmq_pollitem_t it = {e->sock, 0, ZMQ_POLLIN, 0};
    while (!atomic_load(&e->stop)) {
        wr_relay_waiting(e->relay, true);
        int rc = zmq_poll(&it, 1, 100);
        wr_relay_waiting(e->relay, false);
        if (rc <= 0) continue;
        mw_err err;
        while (wr_recv(e->sock, &rx, true, ZMQ_DONTWAIT, &err) == 0) {
            wr_relay_delivered(e->relay, wr_rx_fd(&rx));
            zmq_send(e->sock, rx.id, rx.id_len, ZMQ_SNDMORE);
            for (int i = 0; i < rx.n_parts; i++)
                zmq_send(e->sock, rx.parts[i].data, rx.parts[i].len,
                         i + 1 < rx.n_parts ? ZMQ_SNDMORE : 0);
        }
        wr_relay_idle(e->relay);
    }
    wr_rx_free(&rx);
    return NULL;
}

static int echo_start(echo *e, bool relay) {
    memset(e, 0, sizeof *e);
    e->ctx = zmq_ctx_new();
    if (echo_cpu >= 0) zmq_ctx_set(e->ctx, ZMQ_THREAD_AFFINITY_CPU_ADD, echo_cpu);
    e->sock = zmq_socket(e->ctx, ZMQ_ROUTER);
    mw_err err;
    if (!e->sock || wr_socket_setup(e->sock, NULL, &err)) return -1;
    if (relay) {
        wr_relay_opts o = {.peer_bytes = 64u << 20,
                           .total_bytes = 256u << 20,
                           .name = "bench",
                           .bind_cpu = echo_cpu >= 0,
                           .cpu = echo_cpu};
        if (wr_relay_start(e->sock, "tcp://127.0.0.1:0", &o, &e->relay, e->endpoint,
                           sizeof e->endpoint, &err)) {
            fprintf(stderr, "bench_relay: %s\n", err.msg);
            return -1;
        }
    } else {
        size_t len = sizeof e->endpoint;
        if (zmq_bind(e->sock, "tcp://127.0.0.1:*") ||
            zmq_getsockopt(e->sock, ZMQ_LAST_ENDPOINT, e->endpoint, &len))
            return -1;
    }
    atomic_init(&e->stop, false);
    return pthread_create(&e->th, NULL, echo_loop, e);
}

static void echo_stop(echo *e) {
    atomic_store(&e->stop, true);
    pthread_join(e->th, NULL);
    wr_relay_stop(e->relay);
    zmq_close(e->sock);
    zmq_ctx_term(e->ctx);
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* n round trips of a `size`-byte message on s: the median (µs) and the CPU seconds they took. */
static double round_trips(void *s, size_t size, int n, double *cpu) {
    static uint8_t buf[1 << 20];
    double *t = malloc((size_t)n * sizeof *t);
    const double c0 = cpu_s();
    for (int i = 0; i < n; i++) {
        const double t0 = bu_now();
        zmq_send(s, buf, size, 0);
        zmq_msg_t m;
        zmq_msg_init(&m);
        zmq_msg_recv(&m, s, 0);
        zmq_msg_close(&m);
        t[i] = (bu_now() - t0) * 1e6;
    }
    *cpu += cpu_s() - c0;
    double med = bu_median(t, n);
    free(t);
    return med;
}

int main(int argc, char **argv) {
    int rounds = 9, n = 2000, sizes[4] = {64, 65536, 1 << 20}, n_sizes = 3;
    bool affinity = false;
    const bu_opt opts[] = {
        BU_OPT_IN("--rounds", BU_INT, &rounds, "R", "rounds, direct and relayed taking turns", 1,
                  1000),
        BU_OPT_IN("--n", BU_INT, &n, "N", "round trips per round and size", 10, 1000000),
        BU_OPT_INTS("--sizes", sizes, &n_sizes, 4, "64,65536,1048576", "message bytes", 1, 1 << 20),
        BU_OPT("--affinity", BU_FLAG, &affinity, NULL,
               "echo sides on the last CPU (with the relay), the client on the others"),
    };
    const bu_cli cli = {
        "bench_relay", "the receive relay's cost on a loopback round trip, against a direct bind",
        NULL,          NULL,
        opts,          (int)(sizeof opts / sizeof opts[0])};
    int first;
    const int status = bu_args(argc, argv, &cli, &first);
    if (status != BU_RUN) return status;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (affinity && cpus > 1) {
        echo_cpu = (int)cpus - 1;
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int c = 0; c < echo_cpu && c < CPU_SETSIZE; c++) CPU_SET(c, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    echo e[2];
    if (echo_start(&e[0], false) || echo_start(&e[1], true)) {
        fprintf(stderr, "bench_relay: cannot start the echo sockets\n");
        return 1;
    }
    void *ctx = zmq_ctx_new(), *s[2];
    for (int k = 0; k < 2; k++) {
        s[k] = zmq_socket(ctx, ZMQ_DEALER);
        mw_err err;
        wr_socket_setup(s[k], NULL, &err);
        zmq_connect(s[k], e[k].endpoint);
    }
    for (int z = 0; z < n_sizes; z++) {
        double med[2][1000], ratio[1000], cpu[2] = {0, 0};
        const int count = sizes[z] >= (1 << 20) ? (n / 10 > 10 ? n / 10 : 10) : n;
        for (int k = 0; k < 2; k++)
            round_trips(s[k], (size_t)sizes[z], count / 10 + 1, &(double){0});
        for (int r = 0; r < rounds; r++) {
            for (int j = 0; j < 2; j++) { /* the order alternates round by round */
                const int k = (r + j) % 2;
                med[k][r] = round_trips(s[k], (size_t)sizes[z], count, &cpu[k]);
            }
            ratio[r] = med[1][r] / med[0][r];
        }
        const double rt = (double)rounds * count;
        const double d = bu_median(med[0], rounds), rl = bu_median(med[1], rounds);
        const double lo = bu_min(ratio, rounds), mid = bu_median(ratio, rounds);
        printf("{\"bench\":\"relay\",\"affinity\":%s,\"bytes\":%d,\"round_trips\":%d,\"direct_us\":"
               "%.1f,"
               "\"relay_us\":%.1f,\"relay_over_direct\":%.3f,\"relay_over_direct_min\":%.3f,"
               "\"relay_over_direct_max\":%.3f,\"direct_cpu_us\":%.1f,\"relay_cpu_us\":%.1f}\n",
               echo_cpu >= 0 ? "true" : "false", sizes[z], (int)rt, d, rl, mid, lo,
               ratio[rounds - 1], 1e6 * cpu[0] / rt, 1e6 * cpu[1] / rt);
        fflush(stdout);
    }
    for (int k = 0; k < 2; k++) zmq_close(s[k]);
    zmq_ctx_term(ctx);
    echo_stop(&e[0]);
    echo_stop(&e[1]);
    return 0;
}
