/* expert-node/main.c — the expert node program: the option table, signals, and the serve loop
 * (en_node). Add an option by adding a row (and a setter when none of the kinds fits); the usage
 * text is generated from the table. */
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expert-node/en_device.h"
#include "expert-node/en_node.h"
#include "expert-node/en_tools.h"
#include "kernels/kn.h"
#include "util/mw_notify.h"
#include "util/mw_platform.h"
#include "vindex/vx_source.h"
#include "wire/wr_curve.h"

/* One row per option: its name, the value it takes (NULL for a flag), its help text (a '\n'
 * starts a continuation line) and its setter. Setters of one kind share the code and take the
 * field they write and an integer's bounds from the row. A setter returns 0, 1 to stop with the
 * usage on stdout, or -1 after printing its error. */
typedef struct option {
    const char *name, *arg, *help;
    int (*set)(en_opts *o, const struct option *opt, const char *v);
    size_t field; /* offsetof(en_opts, ...) */
    long lo, hi;
} option;

#define FIELD(o, opt, type) ((type *)((char *)(o) + (opt)->field))

/* v as an integer in the row's bounds; -1 after printing the error. */
static int parse_int(const option *opt, const char *v, long *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < opt->lo || x > opt->hi) {
        fprintf(stderr, "expert-node: %s %s: expected an integer in %ld .. %ld\n", opt->name, v,
                opt->lo, opt->hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int set_text(en_opts *o, const option *opt, const char *v) {
    *FIELD(o, opt, const char *) = v;
    return 0;
}

static int set_flag(en_opts *o, const option *opt, const char *v) {
    (void)v;
    *FIELD(o, opt, bool) = true;
    return 0;
}

static int set_int(en_opts *o, const option *opt, const char *v) {
    long x;
    return parse_int(opt, v, &x) ? -1 : (*FIELD(o, opt, int) = (int)x, 0);
}

static int set_u32(en_opts *o, const option *opt, const char *v) {
    long x;
    return parse_int(opt, v, &x) ? -1 : (*FIELD(o, opt, uint32_t) = (uint32_t)x, 0);
}

/* A size given in MiB, kept in bytes. */
static int set_mib(en_opts *o, const option *opt, const char *v) {
    long x;
    return parse_int(opt, v, &x) ? -1 : (*FIELD(o, opt, uint64_t) = (uint64_t)x << 20, 0);
}

static int set_affinity(en_opts *o, const option *opt, const char *v) {
    long x = 0;
    o->bind_cpus = strcmp(v, "off") != 0;
    if (o->bind_cpus && parse_int(opt, v, &x)) return -1;
    o->cpu_first = (int)x;
    return 0;
}

/* --group-window-us N, or auto (EN_WINDOW_AUTO): half the held coordinator's own token. */
static int set_window(en_opts *o, const option *opt, const char *v) {
    if (strcmp(v, "auto")) return set_int(o, opt, v);
    o->group_window_us = EN_WINDOW_AUTO;
    return 0;
}

static int set_recv_bound(en_opts *o, const option *opt, const char *v) {
    if (strcmp(v, "relay") && strcmp(v, "off")) {
        fprintf(stderr, "expert-node: %s %s: expected relay or off\n", opt->name, v);
        return -1;
    }
    o->recv_unbounded = !strcmp(v, "off");
    return 0;
}

static int set_numerics(en_opts *o, const option *opt, const char *v) {
    o->numerics = !strcmp(v, "any") ? -1 : kn_numerics_from_name(v);
    if (o->numerics < 0 && strcmp(v, "any")) {
        fprintf(stderr, "expert-node: %s %s: expected f32, q8 or any\n", opt->name, v);
        return -1;
    }
    return 0;
}

static int set_device(en_opts *o, const option *opt, const char *v) {
    if (strcmp(v, "auto") && !en__device_find(v)) {
        fprintf(stderr, "expert-node: %s %s: expected %s or auto\n", opt->name, v,
                en__device_names());
        return -1;
    }
    o->device = v;
    return 0;
}

static int show_help(en_opts *o, const option *opt, const char *v) {
    (void)o, (void)opt, (void)v;
    return 1;
}

#define F(x) offsetof(en_opts, x)
static const option options[] = {
    {"--vindex", "PATH", "vindex directory or GGUF file (required)", .set = set_text,
     .field = F(vindex)},
    {"--experts", "SPEC", "owned extents: all | L0-L1:E0-E1[,...] | @shard.json (default all)",
     .set = set_text, .field = F(experts)},
    {"--bind", "ENDPOINT",
     "ZeroMQ endpoint to serve on (required), e.g. tcp://127.0.0.1:5555;\n"
     "beyond this machine it needs --curve-secret and --allow",
     .set = set_text, .field = F(bind)},
    {"--threads", "N", "compute threads (default: one per online CPU)", .set = set_int,
     .field = F(threads), .lo = 1, .hi = 1024},
    {"--numerics", "NAME", "f32 | q8 | any: kernels' numerics served (default any)",
     .set = set_numerics},
    {"--capacity", "N", "most rows per batch (default 4096)", .set = set_u32, .field = F(capacity),
     .lo = 1, .hi = 1 << 16},
    {"--node-id", "NAME", "name in the handshake and logs (default: the endpoint)", .set = set_text,
     .field = F(node_id)},
    {"--ready-file", "PATH", "write the bound endpoint there once serving", .set = set_text,
     .field = F(ready_file)},
    {"--pin", NULL, "copy the owned experts out of the file mapping onto huge pages",
     .set = set_flag, .field = F(pin)},
    {"--affinity", "N|off", "bind compute thread i to allowed CPU N+i (wrapping; default off)",
     .set = set_affinity, .lo = 0, .hi = 1 << 20},
    {"--group-window-us", "N|auto",
     "with several coordinators connected, a layer's rows wait up to N us for another\n"
     "coordinator predicted (from its measured pace) to send that layer, run with them as\n"
     "one grouped execution; auto: up to half the waiting coordinator's own token\n"
     "(default 0: only what is queued together)",
     .set = set_window, .field = F(group_window_us), .lo = 0, .hi = 100000},
    {"--poll-us", "N", "idle compute threads poll N us before sleeping (default 200)",
     .set = set_int, .field = F(poll_us), .lo = 0, .hi = 1000000},
    {"--peer-limit", "MIB",
     "most one peer may have sent beyond its last whole message\n"
     "(default: twice the largest message the limits allow)",
     .set = set_mib, .field = F(peer_limit), .lo = 1, .hi = 1 << 20},
    {"--recv-limit", "MIB",
     "most memory held for all peers together (default 1024, at\n"
     "least 4 peer limits); beyond either the peer is cut off",
     .set = set_mib, .field = F(recv_limit), .lo = 1, .hi = 1 << 20},
    {"--recv-bound", "relay|off",
     "relay: TCP peers are read through the receive relay, which holds\n"
     "the two limits above (default); off: libzmq reads them directly,\n"
     "no memory bound per peer at all (a trusted private link only)",
     .set = set_recv_bound},
    {"--curve-secret", "F",
     "this node's CURVE key pair (expert-node keygen): peers must use\n"
     "CURVE with its public key",
     .set = set_text, .field = F(curve_secret)},
    {"--allow", "FILE",
     "coordinator public keys admitted (one per line); required with\n"
     "--curve-secret",
     .set = set_text, .field = F(allow)},
    {"--insecure", NULL, "serve a non-loopback address without CURVE (anyone may connect)",
     .set = set_flag, .field = F(insecure)},
    {"--quiet", NULL, "no per-request log lines", .set = set_flag, .field = F(quiet)},
    {"--device", "NAME",
     "metal | cpu | auto: where the experts run (default auto: the\n"
     "GPU where the build has Metal and the model's formats allow)",
     .set = set_device},
    {"--self-test", NULL,
     "run the device's kernels against the scalar reference on\n"
     "synthetic experts, print differences and GB/s, exit",
     .set = set_flag, .field = F(self_test)},
    {"--probe", NULL, "print this machine's figures for a topology file, exit", .set = set_flag,
     .field = F(probe)},
    {"--help", NULL, "this text (also -h)", .set = show_help},
};
#undef F
#define N_OPTIONS (sizeof options / sizeof options[0])

/* Width of the "--name ARG" column of the usage; help text starts two columns after it. */
enum { HEAD_WIDTH = 18 };

static void usage(FILE *f) {
    fprintf(f, "usage: expert-node --vindex PATH --bind ENDPOINT [options]\n"
               "       expert-node --self-test | --probe [--device NAME] [--threads N]\n"
               "       expert-node keygen [--out PREFIX]   writes PREFIX.key / PREFIX.pub\n"
               "\n"
               "Serves the experts it owns to every coordinator that connects, until SIGTERM or "
               "SIGINT.\n"
               "\n"
               "options:\n");
    for (const option *r = options; r < options + N_OPTIONS; r++) {
        int w = fprintf(f, "  %s %s", r->name, r->arg ? r->arg : "");
        fprintf(f, "%*s", w < HEAD_WIDTH + 3 ? HEAD_WIDTH + 3 - w : 1, "");
        for (const char *h = r->help; *h;) {
            size_t n = strcspn(h, "\n");
            fprintf(f, "%.*s\n", (int)n, h);
            h += n;
            if (*h) fprintf(f, "%*s", HEAD_WIDTH + 3, ""), h++;
        }
    }
    fprintf(f, "\n"
               "examples:\n"
               "  on this machine (a loopback address needs no keys):\n"
               "    expert-node --vindex MODEL --bind tcp://127.0.0.1:5555\n"
               "  for other machines (keys from expert-node keygen and coordinator keygen):\n"
               "    expert-node --vindex MODEL --experts 0-23:0-15 --bind tcp://*:5555 \\\n"
               "        --curve-secret node.key --allow coordinator.pub\n");
}

static const option *find_option(const char *name) {
    if (!strcmp(name, "-h")) name = "--help";
    for (size_t j = 0; j < N_OPTIONS; j++)
        if (!strcmp(options[j].name, name)) return &options[j];
    return NULL;
}

/* Parses the command line into o: 0 to run, 1 when the help was printed, -1 after an error. */
static int parse_args(int argc, char **argv, en_opts *o) {
    for (int i = 1; i < argc; i++) {
        const option *opt = find_option(argv[i]);
        if (!opt) {
            fprintf(stderr, "expert-node: unknown option %s\n", argv[i]);
            usage(stderr);
            return -1;
        }
        const char *v = NULL;
        if (opt->arg) {
            if (i + 1 >= argc) {
                fprintf(stderr, "expert-node: %s needs a value\n", opt->name);
                return -1;
            }
            v = argv[++i];
        }
        int rc = opt->set(o, opt, v);
        if (rc > 0) usage(stdout);
        if (rc) return rc;
    }
    if (!o->self_test && !o->probe && (!o->vindex || !o->bind)) {
        fprintf(stderr, "expert-node: --vindex and --bind are required\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

static en_node *volatile g_node;

static void on_signal(int sig) {
    (void)sig;
    if (g_node) en_node_stop(g_node);
}

/* Opens the node and serves until SIGTERM / SIGINT; the exit status. */
static int run(const en_opts *o) {
    /* SCHED_BATCH (inherited by the pool's and ZeroMQ's threads): a node's threads never preempt
     * a running thread when they wake. A node sharing cores with a coordinator (loopback, or a
     * coordinator host that also serves experts) must not interrupt it between the batches it
     * sends to the nodes of one layer; on a dedicated host the cores are idle when a batch
     * arrives, so nothing changes. Switching to SCHED_BATCH needs no privilege. */
    struct sched_param sp = {.sched_priority = 0};
    if (mw_batch_policy() >= 0 && sched_setscheduler(0, mw_batch_policy(), &sp) != 0 && !o->quiet)
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
    mw_notify_init();
    if (argc > 1 && !strcmp(argv[1], "keygen"))
        return wr_keygen_cli("expert-node", "node", argc - 2, argv + 2);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    en_opts o = {
        .threads = cpus > 0 && cpus <= 1024 ? (int)cpus : 1, .numerics = -1, .poll_us = -1};
    const int parsed = parse_args(argc, argv, &o);
    if (parsed) return parsed < 0 ? 2 : 0;
    if (o.self_test) return en_self_test(&o, stdout);
    if (o.probe) return en_probe(&o, stdout);
    return run(&o);
}
