/* bench/bench_lan.c — decode on a cluster over a (possibly emulated) network: aggregate tok/s of S
 * streams with and without ping-pong micro-batches, where a token's time goes (trunk, blocked on
 * the experts, node compute, wire), coordinator bytes on the wire per token, the movement ratio,
 * and the batch-union curve (distinct experts a layer's step touches at B rows) against
 * E·(1 − (1 − k/E)^B). bench/bench_lan.sh runs it inside the namespaces of tests/lan/lan.sh; on
 * its own (make bench) it uses a loopback cluster of two nodes on the kimi-k3 fixture.
 *   bench_lan [--model M] [--nodes EPS | --loopback N | --local] [--exact] [--streams 1,16,64]
 *             [--micro 1,2] [--steps N] [--rounds R] [--union MAXB] [--threads T] [--label L]
 *             [--first-stream F] [--node-pids P,..] [--line-pids P,..]
 * --node-pids and --line-pids name processes (the nodes', the delay lines') whose CPU time (their
 * CPU clocks, every thread) is taken over each decode as the coordinator's own is: what a layer
 * call costs the cores they share (docs/scale.md's check).
 * --first-stream F numbers the streams from F: their tokens (hence their experts) are not another
 * run's, as two coordinators' requests are not (bench/bench_lan_pool.sh).
 * Rounds alternate the micro-batch settings; each keeps its best and worst round (the spread:
 * the machine is shared). One JSON line per measurement. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "coordinator/co_cluster.h"
#include "coordinator/co_remote.h"
#include "model/md_lanes.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "util/mw_time.h"
#include "vindex/vx_source.h"

#define MAX_LIST 8
#define PROMPT   4
#define MAX_PIDS 64

typedef struct opts {
    const char *model, *nodes, *label;
    int loopback, steps, rounds, union_max, threads, first_stream;
    bool exact, local;
    int streams[MAX_LIST], n_streams, micro[MAX_LIST], n_micro;
    int node_pids[MAX_PIDS], n_node_pids, line_pids[MAX_PIDS], n_line_pids;
} opts;

typedef struct result {
    double best, worst; /* tok/s */
    co_remote_summary sum;
    md_moe_timing t;
    md_lane_stats lanes;
    double step_us;
    double cpu_ns[3]; /* the nodes', the delay lines', the coordinator's CPU over the decode */
} result;

static int parse_list(const char *s, int *v, int *n) {
    *n = 0;
    for (char *end; *s && *n < MAX_LIST; s = *end ? end + 1 : end) {
        long x = strtol(s, &end, 10);
        if (end == s || x < 1 || x > 4096) return -1;
        v[(*n)++] = (int)x;
    }
    return *n ? 0 : -1;
}

static int parse_pids(const char *s, int *v, int *n) {
    *n = 0;
    for (char *end; *s; s = *end ? end + 1 : end) {
        long x = strtol(s, &end, 10);
        if (end == s || x < 1 || x > 1 << 22 || *n >= MAX_PIDS || (*end && *end != ',')) return -1;
        v[(*n)++] = (int)x;
    }
    return 0;
}

/* CPU time (ns) of the n processes (0: this one): their CPU clocks, every thread's time, those
 * that ended included; a process that is gone is left out. */
static double cpu_ns_of(const int *pids, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) {
        clockid_t id = CLOCK_PROCESS_CPUTIME_ID;
        struct timespec ts;
        if ((pids[i] && clock_getcpuclockid(pids[i], &id)) || clock_gettime(id, &ts)) continue;
        sum += (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
    }
    return sum;
}

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.model = "tests/fixtures/llamacpp/kimi-k3-tiny/model.gguf",
                .label = "loopback",
                .loopback = 2,
                .steps = 8,
                .rounds = 2,
                .threads = 1,
                .streams = {1, 16},
                .n_streams = 2,
                .micro = {1, 2},
                .n_micro = 2};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf(
                "usage: bench_lan [--model M] [--nodes EPS | --loopback N | --local] [--exact]\n"
                "                 [--streams 1,16,64] [--micro 1,2] [--steps N] [--rounds R]\n"
                "                 [--union MAXB] [--threads T] [--label L] [--first-stream F]\n"
                "                 [--node-pids P,..] [--line-pids P,..]\n"
                "decode of S streams on a cluster with each micro-batch setting in turn; the\n"
                "union curve up to MAXB rows (bench/bench_lan.sh runs it on the emulated LAN)\n");
            exit(0);
        }
        if (!strcmp(a, "--exact") || !strcmp(a, "--local")) {
            *(a[2] == 'e' ? &o->exact : &o->local) = true;
            continue;
        }
        if (!v)
            bad = 1;
        else if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--nodes"))
            o->nodes = v, o->loopback = 0;
        else if (!strcmp(a, "--label"))
            o->label = v;
        else if (!strcmp(a, "--loopback"))
            o->loopback = atoi(v);
        else if (!strcmp(a, "--steps"))
            o->steps = atoi(v);
        else if (!strcmp(a, "--rounds"))
            o->rounds = atoi(v);
        else if (!strcmp(a, "--union"))
            o->union_max = atoi(v);
        else if (!strcmp(a, "--threads"))
            o->threads = atoi(v);
        else if (!strcmp(a, "--first-stream"))
            bad = (o->first_stream = atoi(v)) < 0;
        else if (!strcmp(a, "--node-pids"))
            bad = parse_pids(v, o->node_pids, &o->n_node_pids);
        else if (!strcmp(a, "--line-pids"))
            bad = parse_pids(v, o->line_pids, &o->n_line_pids);
        else if (!strcmp(a, "--streams"))
            bad = parse_list(v, o->streams, &o->n_streams);
        else if (!strcmp(a, "--micro"))
            bad = parse_list(v, o->micro, &o->n_micro);
        else
            bad = 1;
        if (bad || o->steps < 1 || o->rounds < 1 || o->threads < 1) {
            fprintf(stderr, "bench_lan: bad argument %s (see the comment at the top)\n", a);
            return -1;
        }
        i++;
    }
    return 0;
}

typedef struct bench {
    opts o;
    vx_source *src;
    md_model *m;
    md_expert_backend *be;
    kn_pool *pool;
} bench;

static int open_all(bench *b, mw_err *err) {
    if (vx_source_open(b->o.model, NULL, &b->src, err) || md_model_load(b->src, &b->m, err))
        return -1;
    b->pool = kn_pool_create(b->o.threads);
    if (b->o.local) return md_local_backend_new(b->src, &b->m->cfg, b->pool, &b->be, err);
    co_cluster_opts co = {.loopback = b->o.loopback,
                          .model = b->o.model,
                          .node_threads = 1,
                          .exact = b->o.exact,
                          .deadline_ms = 600000,
                          .down_ms = 60000,
                          .connect_ms = 60000,
                          .ready_ms = 600000,
                          .src = b->src,
                          .width = md_expert_width(&b->m->cfg),
                          .glu = &b->m->cfg.glu,
                          .numerics = KN_NUM_Q8,
                          .pool = b->pool};
    wr_codec_parse("f16", &co.codec, NULL);
    char *list = b->o.nodes ? strdup(b->o.nodes) : NULL;
    const char *ep[64];
    for (char *save = NULL, *t = list ? strtok_r(list, ",", &save) : NULL; t && co.n_nodes < 64;
         t = strtok_r(NULL, ",", &save))
        ep[co.n_nodes++] = t;
    if (list) co.endpoints = ep;
    int rc = co_cluster_create(&co, &b->be, err);
    free(list);
    return rc;
}

/* S sequences: a prompt step of PROMPT tokens each, then `steps` timed decode steps; tok/s. */
static int decode(bench *b, int S, int micro, result *res, mw_err *err) {
    md_ctx_params p = {.numerics = KN_NUM_Q8,
                       .pool = b->pool,
                       .experts = b->be,
                       .n_seq = S,
                       .n_ctx = PROMPT + b->o.steps + 1,
                       .micro_batches = micro};
    md_ctx *c;
    if (md_ctx_new(b->m, &p, &c, err)) return -1;
    const int64_t V = b->m->cfg.n_vocab;
    const int F = b->o.first_stream;
    md_row *rows = malloc((size_t)S * PROMPT * sizeof *rows);
    float *logits = malloc((size_t)S * (size_t)V * sizeof *logits);
    int rc = -1;
    if (!rows || !logits) goto done;
    for (int s = 0, t = 0; s < S; s++)
        for (int i = 0; i < PROMPT; i++)
            rows[t++] =
                (md_row){s, i, ((s + F) * 131 + i * 17) % (int)(V - 3) + 3, i + 1 == PROMPT};
    if (md_forward(c, rows, (int64_t)S * PROMPT, logits, err)) goto done;
    if (!b->o.local) co_remote_reset_stats(b->be);
    md_ctx_reset_moe_timing(c);
    const int self = 0;
    const double cpu0[3] = {cpu_ns_of(b->o.node_pids, b->o.n_node_pids),
                            cpu_ns_of(b->o.line_pids, b->o.n_line_pids), cpu_ns_of(&self, 1)};
    const double t0 = bu_now();
    for (int k = 0; k < b->o.steps; k++) {
        for (int s = 0; s < S; s++)
            rows[s] = (md_row){s, PROMPT + k, ((s + F) * 7 + k * 29) % (int)(V - 3) + 3, 1};
        if (md_forward(c, rows, S, logits, err)) goto done;
    }
    const double dt = bu_now() - t0, tok_s = (double)S * b->o.steps / dt;
    const double cpu1[3] = {cpu_ns_of(b->o.node_pids, b->o.n_node_pids),
                            cpu_ns_of(b->o.line_pids, b->o.n_line_pids), cpu_ns_of(&self, 1)};
    if (!res->best || tok_s > res->best) {
        for (int i = 0; i < 3; i++) res->cpu_ns[i] = cpu1[i] - cpu0[i];
        res->best = tok_s;
        if (!b->o.local) res->sum = co_remote_summarize(b->be);
        res->t = md_ctx_moe_timing(c);
        res->lanes = md_ctx_lane_stats(c);
        res->step_us = dt * 1e6 / b->o.steps;
    }
    if (!res->worst || tok_s < res->worst) res->worst = tok_s;
    rc = 0;
done:
    if (rc && !err->msg[0]) mw_errf(err, "out of memory");
    free(rows);
    free(logits);
    md_ctx_free(c);
    return rc;
}

static void print_result(const bench *b, int S, int micro, const result *r) {
    const md_config *cfg = &b->m->cfg;
    int moe = 0;
    for (int l = 0; l < cfg->n_layer; l++) moe += md_layer_is_moe(cfg, l);
    /* per layer of a step, whatever the lanes: a step's blocked time is every lane's waits */
    const double layers = moe, n = (double)moe * b->o.steps;
    const double tokens = (double)S * b->o.steps;
    const wr_counters *w = &r->sum.total;
    const double wire = (double)(w->tx_bytes + w->rx_bytes);
    printf("{\"bench\":\"lan\",\"label\":\"%s\",\"arch\":\"%s\",\"moe_layers\":%.0f,"
           "\"experts\":%d,\"top_k\":%d,\"streams\":%d,\"micro_batches\":%d,"
           "\"tok_s\":%.1f,\"tok_s_worst\":%.1f,\"step_us\":%.0f,\"split_steps\":%llu,"
           "\"trunk_us_per_layer\":%.1f,\"blocked_us_per_layer\":%.1f,"
           "\"shared_us_per_layer\":%.1f,\"layer_rtt_us\":%.1f,\"node_compute_us\":%.1f,"
           "\"node_queue_us\":%.1f,\"tail_us\":%.1f,\"wire_bytes_per_token\":%.0f,"
           "\"movement_ratio\":%.3g",
           b->o.label, cfg->arch, layers, cfg->n_expert, cfg->n_expert_used, S, micro, r->best,
           r->worst, r->step_us, (unsigned long long)r->lanes.split_steps,
           (r->step_us * b->o.steps * 1e3 - (double)r->t.wait_ns) / n * 1e-3,
           (double)r->t.wait_ns / n * 1e-3, (double)r->t.shared_ns / n * 1e-3, r->sum.layer_rtt_us,
           r->sum.node_compute_us, r->sum.node_queue_us, r->sum.tail_us, wire / tokens,
           w->weight_bytes ? wire / (double)w->weight_bytes : 0.0);
    /* CPU per MoE layer call of a step, whatever the lanes (the coordinator's holds its trunk) */
    const char *name[3] = {"node_cpu_us", "line_cpu_us", "coordinator_cpu_us"};
    const int asked[3] = {b->o.n_node_pids, b->o.n_line_pids, 1};
    for (int i = 0; i < 3; i++)
        if (asked[i]) printf(",\"%s\":%.1f", name[i], r->cpu_ns[i] / n * 1e-3);
    printf("}\n");
}

/* ---- the batch-union curve ------------------------------------------------------------------ */

typedef struct union_sink {
    int n_expert;
    uint8_t *seen;
    double sum;
    int layers;
} union_sink;

static void on_layer(void *ud, int layer, int64_t T, int k, const int32_t *ids, const float *w) {
    (void)layer;
    (void)w;
    union_sink *u = ud;
    memset(u->seen, 0, (size_t)u->n_expert);
    int distinct = 0;
    for (int64_t i = 0; i < T * k; i++)
        if (ids[i] >= 0 && ids[i] < u->n_expert && !u->seen[ids[i]]++) distinct++;
    u->sum += distinct;
    u->layers++;
}

static int union_curve(bench *b, mw_err *err) {
    const md_config *cfg = &b->m->cfg;
    const double E = cfg->n_expert, k = cfg->n_expert_used;
    union_sink u = {.n_expert = cfg->n_expert, .seen = malloc((size_t)cfg->n_expert)};
    md_row *rows = malloc((size_t)b->o.union_max * sizeof *rows);
    float *logits = malloc((size_t)cfg->n_vocab * sizeof *logits);
    int rc = -1;
    if (!u.seen || !rows || !logits) goto done;
    for (int B = 1; B <= b->o.union_max; B *= 2) {
        md_ctx_params p = {.numerics = KN_NUM_Q8,
                           .pool = b->pool,
                           .experts = b->be,
                           .n_seq = B,
                           .n_ctx = 4,
                           .micro_batches = 1};
        md_ctx *c;
        if (md_ctx_new(b->m, &p, &c, err)) goto done;
        md_route_sink sink = {.layer = on_layer, .ud = &u};
        md_ctx_set_route_sink(c, &sink);
        u.sum = 0;
        u.layers = 0;
        for (int s = 0; s < B; s++)
            rows[s] = (md_row){s, 0, (s * 7919 + 13) % (int)(cfg->n_vocab - 3) + 3, s + 1 == B};
        int f = md_forward(c, rows, B, logits, err);
        md_ctx_free(c);
        if (f) goto done;
        const double got = u.sum / (u.layers ? u.layers : 1);
        const double want = E * (1 - pow(1 - k / E, B));
        printf("{\"bench\":\"lan_union\",\"label\":\"%s\",\"rows\":%d,\"distinct_experts\":%.1f,"
               "\"uniform_model\":%.1f,\"ratio\":%.3f}\n",
               b->o.label, B, got, want, got / want);
    }
    rc = 0;
done:
    if (rc && !err->msg[0]) mw_errf(err, "out of memory");
    free(u.seen);
    free(rows);
    free(logits);
    return rc;
}

static int run(bench *b, mw_err *err) {
    for (int si = 0; si < b->o.n_streams; si++) {
        const int S = b->o.streams[si];
        result res[MAX_LIST] = {0};
        for (int r = 0; r < b->o.rounds; r++)
            for (int q = 0; q < b->o.n_micro; q++) { /* each round starts at another setting */
                const int mi = (q + r) % b->o.n_micro;
                if (decode(b, S, b->o.micro[mi], &res[mi], err)) return -1;
            }
        for (int mi = 0; mi < b->o.n_micro; mi++) print_result(b, S, b->o.micro[mi], &res[mi]);
        for (int mi = 1; mi < b->o.n_micro; mi++)
            printf("{\"bench\":\"lan_pingpong\",\"label\":\"%s\",\"streams\":%d,"
                   "\"micro_batches\":%d,\"vs\":%d,\"ratio_best\":%.3f,\"ratio_worst\":%.3f}\n",
                   b->o.label, S, b->o.micro[mi], b->o.micro[0], res[mi].best / res[0].best,
                   res[mi].worst / res[0].worst);
        fflush(stdout);
    }
    return b->o.union_max > 0 ? union_curve(b, err) : 0;
}

int main(int argc, char **argv) {
    bench b = {0};
    if (parse(argc, argv, &b.o)) return 2;               /* (--help exits 0 there) */
    setenv("MOEWIRE_EXPERT_NODE", "bin/expert-node", 0); /* loopback nodes: run from the tree */
    mw_err err = {{0}};
    int rc = open_all(&b, &err) || run(&b, &err) ? 1 : 0;
    if (rc) fprintf(stderr, "bench_lan: %s\n", err.msg);
    if (b.be) b.be->destroy(b.be);
    md_model_free(b.m);
    if (b.src) vx_source_close(b.src);
    kn_pool_destroy(b.pool);
    return rc;
}
