/* expert-node/main.c — the expert node program: options, signals, and the serve loop (en_node). */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expert-node/en_node.h"
#include "kernels/kn.h"
#include "vindex/vx_source.h"
#include "wire/wr_curve.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: expert-node --vindex PATH --experts SPEC --bind ENDPOINT [options]\n"
        "  --vindex PATH      vindex directory or GGUF file\n"
        "  --experts SPEC     owned extents: all | L0-L1:E0-E1[,...] | @shard.json (default all)\n"
        "  --bind ENDPOINT    ZeroMQ endpoint to serve on, e.g. tcp://*:5555\n"
        "  --threads N        compute threads (default: one per online CPU)\n"
        "  --numerics NAME    f32 | q8 | any: kernels' numerics served (default any)\n"
        "  --capacity N       most rows per batch (default 4096)\n"
        "  --node-id NAME     name in the handshake and logs (default: the endpoint)\n"
        "  --ready-file PATH  write the bound endpoint there once serving\n"
        "  --pin              copy the owned experts out of the file mapping onto huge pages\n"
        "  --affinity N|off   bind compute thread i to allowed CPU N+i (wrapping; default off)\n"
        "  --poll-us N        idle compute threads poll N us before sleeping (default 200)\n"
        "  --peer-limit MIB   most one peer may have sent beyond its last whole message\n"
        "                     (default: twice the largest message the limits allow)\n"
        "  --recv-limit MIB   most memory held for all peers together (default 1024, at\n"
        "                     least 4 peer limits); beyond either the peer is cut off\n"
        "  --curve-secret F   this node's CURVE key pair (expert-node keygen): peers must use\n"
        "                     CURVE with its public key\n"
        "  --allow FILE       coordinator public keys admitted (one per line); required with\n"
        "                     --curve-secret. Without keys a node binds only to loopback\n"
        "  --insecure         serve a non-loopback address without CURVE (anyone may connect)\n"
        "  --quiet            no per-request log lines\n"
        "       expert-node keygen [--out PREFIX]   writes PREFIX.key / PREFIX.pub\n");
}

static en_node *volatile g_node;

static void on_signal(int sig) {
    (void)sig;
    if (g_node) en_node_stop(g_node);
}

static int parse_int(const char *opt, const char *v, long lo, long hi, long *out) {
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "expert-node: %s %s: expected an integer in %ld .. %ld\n", opt,
                v ? v : "(missing)", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* Parses the command line into o: 0 to run, 1 when the help was printed, -1 after an error. */
static int parse_args(int argc, char **argv, en_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = true;
            continue;
        } else if (!strcmp(a, "--pin")) {
            o->pin = true;
            continue;
        } else if (!strcmp(a, "--insecure")) {
            o->insecure = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "expert-node: %s needs a value\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--vindex"))
            o->vindex = v;
        else if (!strcmp(a, "--experts"))
            o->experts = v;
        else if (!strcmp(a, "--bind"))
            o->bind = v;
        else if (!strcmp(a, "--node-id"))
            o->node_id = v;
        else if (!strcmp(a, "--ready-file"))
            o->ready_file = v;
        else if (!strcmp(a, "--curve-secret"))
            o->curve_secret = v;
        else if (!strcmp(a, "--allow"))
            o->allow = v;
        else if (!strcmp(a, "--threads")) {
            if (parse_int(a, v, 1, 1024, &x)) return -1;
            o->threads = (int)x;
        } else if (!strcmp(a, "--affinity")) {
            o->bind_cpus = strcmp(v, "off") != 0;
            if (o->bind_cpus && parse_int(a, v, 0, 1 << 20, &x)) return -1;
            o->cpu_first = o->bind_cpus ? (int)x : 0;
        } else if (!strcmp(a, "--poll-us")) {
            if (parse_int(a, v, 0, 1000000, &x)) return -1;
            o->poll_us = (int)x;
        } else if (!strcmp(a, "--peer-limit") || !strcmp(a, "--recv-limit")) {
            if (parse_int(a, v, 1, 1 << 20, &x)) return -1;
            *(a[2] == 'p' ? &o->peer_limit : &o->recv_limit) = (uint64_t)x << 20;
        } else if (!strcmp(a, "--capacity")) {
            if (parse_int(a, v, 1, 1 << 16, &x)) return -1;
            o->capacity = (uint32_t)x;
        } else if (!strcmp(a, "--numerics")) {
            o->numerics = !strcmp(v, "any") ? -1 : kn_numerics_from_name(v);
            if (o->numerics < 0 && strcmp(v, "any")) {
                fprintf(stderr, "expert-node: --numerics %s: expected f32, q8 or any\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "expert-node: unknown option %s\n", a);
            usage(stderr);
            return -1;
        }
    }
    if (!o->vindex || !o->bind) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* Opens the node and serves until SIGTERM / SIGINT; the exit status. */
static int run(const en_opts *o) {
    /* SCHED_BATCH (inherited by the pool's and ZeroMQ's threads): a node's threads never preempt
     * a running thread when they wake. A node sharing cores with a coordinator (loopback, or a
     * coordinator host that also serves experts) must not interrupt it between the batches it
     * sends to the nodes of one layer; on a dedicated host the cores are idle when a batch
     * arrives, so nothing changes. Switching to SCHED_BATCH needs no privilege. */
    struct sched_param sp = {.sched_priority = 0};
    if (sched_setscheduler(0, SCHED_BATCH, &sp) != 0 && !o->quiet)
        fprintf(stderr, "expert-node: cannot switch to SCHED_BATCH (ignored)\n");
    vx_catch_sigbus("expert-node"); /* a served file truncated under the node: named, exit 1 */
    mw_err err;
    en_node *n;
    if (en_node_open(o, &n, &err) != 0) {
        fprintf(stderr, "expert-node: %s\n", err.msg);
        return 1;
    }
    g_node = n;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = en_node_serve(n, &err);
    if (rc != 0) fprintf(stderr, "expert-node: %s\n", err.msg);
    g_node = NULL;
    en_node_close(n);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "keygen"))
        return wr_keygen_cli("expert-node", "node", argc - 2, argv + 2);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    en_opts o = {
        .threads = cpus > 0 && cpus <= 1024 ? (int)cpus : 1, .numerics = -1, .poll_us = -1};
    const int parsed = parse_args(argc, argv, &o);
    return parsed < 0 ? 2 : parsed > 0 ? 0 : run(&o);
}
