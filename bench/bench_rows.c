/* bench/bench_rows.c — the messaging stack's cost per row: what a layer call of R rows on N
 * expert nodes costs in each part of the coordinator's and the nodes' message path, from the code
 * the cluster runs.
 *
 * Two measurements per (R, N), R = rows of the layer call, N = nodes (node i owns the i-th of N
 * even ranges of every MoE layer's experts, random top-k routing):
 *   rows_codec   one thread, no sockets: the call's messages through wire/wr_msg.c as the
 *                coordinator and the nodes pack and parse them (ExpertBatch packed, parsed by its
 *                node; PartialBatch packed by the node, parsed by the coordinator), summed over
 *                the N nodes of one call.
 *   rows_call    one process over loopback TCP: N expert nodes (expert-node/en_node.h, each its
 *                own thread, socket and compute pool) serving the coordinator's remote backend
 *                (coordinator/co_remote.c), with the receive relay (wire/wr_relay.c) as nodes
 *                run by default ("relay") and without it ("direct", --recv-bound off). Per call:
 *                the coordinator's phases (split, encode, send, blocked in poll, receive +
 *                decode, combine), the nodes' (receive, parse + check + group, compute, encode,
 *                send: summed over the call's batches), the layer's round trip and its tail
 *                (the completing reply's round trip less its node's queue and compute: wire,
 *                codec and wake-ups on the critical path).
 * Every part is printed per call and per row (÷ R). At the end, per transport and N, the per-row
 * slope of the tail and of the call's wall time less its node compute between the smallest and
 * the largest R: the stack's cost per row that docs/scale.md's model adds to W.
 *   bench_rows [--model M] [--rows 1,16,64,256] [--nodes 1,8] [--calls C] [--node-threads T]
 *              [--node-poll-us U] [--transport both|relay|direct] [--codec-only [--width W]]
 * One JSON object per line. The machine may be shared: compare builds by alternating whole runs
 * (farm-bench --vs), and read the CPU times (cpu_us, stack_cpu_us) before the wall times. */
#include <math.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "coordinator/co_cluster.h"
#include "coordinator/co_remote.h"
#include "expert-node/en_node.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "model/md_moe.h"
#include "util/mw_time.h"
#include "vindex/vx_source.h"
#include "wire/wr_msg.h"

#define MAX_LIST  8
#define MAX_NODES 64

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float rndf(void) {
    return ((float)rnd() / 2147483648.0f) * 2.0f - 1.0f;
}

/* A layer call's input: R rows, top-k distinct random experts per row. */
typedef struct call_in {
    int64_t R, width;
    int k, E;
    float *x, *w;
    int32_t *ex;
} call_in;

static int call_make(call_in *c, int64_t R, int64_t width, int k, int E) {
    *c = (call_in){.R = R, .width = width, .k = k, .E = E};
    c->x = malloc((size_t)(R * width) * sizeof *c->x);
    c->w = malloc((size_t)(R * k) * sizeof *c->w);
    c->ex = malloc((size_t)(R * k) * sizeof *c->ex);
    if (!c->x || !c->w || !c->ex) return -1;
    for (int64_t i = 0; i < R * width; i++) c->x[i] = rndf();
    for (int64_t t = 0; t < R; t++) {
        float sum = 0;
        for (int j = 0; j < k; j++) {
            int32_t e;
            bool dup;
            do { /* distinct within the row, as a router's top-k */
                e = (int32_t)(rnd() % (uint32_t)E);
                dup = false;
                for (int q = 0; q < j; q++) dup |= c->ex[t * k + q] == e;
            } while (dup);
            c->ex[t * k + j] = e;
            sum += c->w[t * k + j] = 0.1f + (float)(rnd() % 1000) / 1000.0f;
        }
        for (int j = 0; j < k; j++) c->w[t * k + j] /= sum;
    }
    return 0;
}

static void call_free(call_in *c) {
    free(c->x);
    free(c->w);
    free(c->ex);
}

/* ---- rows_codec: the call's messages packed and parsed in one thread ----------------------- */

/* Node i's share of a call: its rows (each once, ascending) and assignments. */
typedef struct share {
    int64_t rows, n_assign;
    float *x;
    wr_assign *a;
    int32_t *t; /* the call's row of each of its rows */
} share;

static int split(const call_in *c, int N, share *s) {
    int64_t last[MAX_NODES]; /* the call's row each node took last */
    for (int i = 0; i < N; i++) s[i] = (share){0};
    for (int i = 0; i < N; i++) {
        last[i] = -1;
        s[i].x = malloc((size_t)(c->R * c->width) * sizeof(float));
        s[i].a = malloc((size_t)(c->R * c->k) * sizeof(wr_assign));
        s[i].t = malloc((size_t)c->R * sizeof(int32_t));
        if (!s[i].x || !s[i].a || !s[i].t) return -1;
    }
    for (int64_t t = 0; t < c->R; t++)
        for (int j = 0; j < c->k; j++) {
            const int32_t e = c->ex[t * c->k + j];
            const int i = (int)((int64_t)e * N / c->E);
            share *h = &s[i];
            if (last[i] != t) { /* a row goes to a node once, however many of its experts */
                memcpy(h->x + h->rows * c->width, c->x + t * c->width,
                       (size_t)c->width * sizeof(float));
                h->t[h->rows++] = (int32_t)t;
                last[i] = t;
            }
            h->a[h->n_assign++] = (wr_assign){(int32_t)(h->rows - 1), e, c->w[t * c->k + j]};
        }
    return 0;
}

typedef struct codec_run {
    int N;
    int64_t width;
    share *s;
    wr_codec codec;
    wr_out out;
    wr_in in;
    float *sum; /* R × width: the combined output */
    int64_t R;
    double t[5]; /* ns: pack batch, parse batch, pack reply, parse reply, combine */
    uint64_t bytes_out, bytes_back;
} codec_run;

static int parse_out(codec_run *r, wr_msg *m) {
    wr_part parts[WR_MAX_PARTS];
    for (int i = 0; i < r->out.n_parts; i++)
        parts[i] = (wr_part){r->out.part[i], r->out.part_len[i]};
    wr_code code;
    mw_err err;
    return wr_parse(&r->in, parts, r->out.n_parts, 0, m, &code, &err);
}

/* One call's messages, each part timed on its own. */
static int codec_call(codec_run *r) {
    r->bytes_out = r->bytes_back = 0;
    uint64_t c0 = mw_now_ns();
    memset(r->sum, 0, (size_t)(r->R * r->width) * sizeof(float));
    r->t[4] += (double)(mw_now_ns() - c0);
    for (int i = 0; i < r->N; i++) {
        const share *h = &r->s[i];
        if (!h->rows) continue;
        mw_err err;
        wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                    .seq = 1,
                    .batch = {.layer = 1,
                              .rows = (uint32_t)h->rows,
                              .width = (uint32_t)r->width,
                              .n_assign = (uint32_t)h->n_assign,
                              .reply = r->codec,
                              .x = h->x,
                              .assign = h->a}},
               got;
        uint64_t t0 = mw_now_ns();
        if (wr_pack(&r->out, &m, r->codec, &err)) return -1;
        uint64_t t1 = mw_now_ns();
        if (parse_out(r, &got)) return -1;
        uint64_t t2 = mw_now_ns();
        r->bytes_out += r->out.bytes;
        wr_msg y = {.kind = WR_MSG_PARTIAL_BATCH,
                    .seq = 1,
                    .partial = {.layer = 1,
                                .rows = (uint32_t)h->rows,
                                .width = (uint32_t)r->width,
                                .y = got.batch.x}};
        uint64_t t3 = mw_now_ns();
        if (wr_pack(&r->out, &y, r->codec, &err)) return -1;
        uint64_t t4 = mw_now_ns();
        if (parse_out(r, &got)) return -1;
        uint64_t t5 = mw_now_ns();
        /* the partial mode's combine (co_remote.c): each answered row into its row of the sum */
        for (int64_t x = 0; x < h->rows; x++)
            md_moe_accumulate(r->sum + (int64_t)h->t[x] * r->width, got.partial.y + x * r->width,
                              1.0f, r->width);
        r->t[4] += (double)(mw_now_ns() - t5);
        r->bytes_back += r->out.bytes;
        r->t[0] += (double)(t1 - t0);
        r->t[1] += (double)(t2 - t1);
        r->t[2] += (double)(t4 - t3);
        r->t[3] += (double)(t5 - t4);
    }
    return 0;
}

static int bench_codec(const call_in *c, int N, wr_codec codec, double seconds) {
    share s[MAX_NODES] = {{0}};
    codec_run r = {.N = N, .width = c->width, .s = s, .codec = codec, .R = c->R};
    wr_out_init(&r.out);
    wr_in_init(&r.in, NULL);
    int rc = -1;
    r.sum = malloc((size_t)(c->R * c->width) * sizeof(float));
    if (!r.sum || split(c, N, s)) goto done;
    if (codec_call(&r)) goto done; /* warm the buffers */
    double best[5] = {1e30, 1e30, 1e30, 1e30, 1e30};
    for (int round = 0; round < 3; round++) { /* best of 3 rounds, each part on its own */
        memset(r.t, 0, sizeof r.t);
        long calls = 0;
        const double t0 = bu_now();
        do {
            if (codec_call(&r)) goto done;
            calls++;
        } while (bu_now() - t0 < seconds / 3);
        for (int p = 0; p < 5; p++)
            if (r.t[p] / (double)calls < best[p]) best[p] = r.t[p] / (double)calls;
    }
    int64_t rows = 0;
    for (int i = 0; i < N; i++) rows += s[i].rows;
    const double R = (double)c->R;
    /* per row: the coordinator's side (its rows' batches packed, the answers parsed and
     * combined) per row of the call; a node's (parse, reply) per row it was sent */
    const double co_us = (best[0] + best[3] + best[4]) * 1e-3, node_us = (best[1] + best[2]) * 1e-3;
    printf("{\"bench\":\"rows_codec\",\"rows\":%lld,\"nodes\":%d,\"width\":%lld,"
           "\"node_rows\":%lld,\"bytes_out\":%llu,\"bytes_back\":%llu,"
           "\"pack_us\":%.2f,\"node_parse_us\":%.2f,\"reply_pack_us\":%.2f,"
           "\"reply_parse_us\":%.2f,\"combine_us\":%.2f,\"total_us\":%.2f,"
           "\"total_us_per_row\":%.3f,\"coordinator_us_per_row\":%.3f,"
           "\"node_us_per_node_row\":%.3f}\n",
           (long long)c->R, N, (long long)c->width, (long long)rows,
           (unsigned long long)r.bytes_out, (unsigned long long)r.bytes_back, best[0] * 1e-3,
           best[1] * 1e-3, best[2] * 1e-3, best[3] * 1e-3, best[4] * 1e-3, co_us + node_us,
           (co_us + node_us) / R, co_us / R, rows ? node_us / (double)rows : 0.0);
    rc = 0;
done:
    for (int i = 0; i < N; i++) {
        free(s[i].x);
        free(s[i].a);
        free(s[i].t);
    }
    free(r.sum);
    wr_out_free(&r.out);
    wr_in_free(&r.in);
    return rc;
}

/* The load average "1 5 15" for the JSON lines (the machine is shared). */
static const char *load(void) {
    static char buf[64];
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = '\0';
    if (f) {
        float a = 0, b = 0, c = 0;
        if (fscanf(f, "%f %f %f", &a, &b, &c) == 3)
            snprintf(buf, sizeof buf, "%.2f %.2f %.2f", a, b, c);
        fclose(f);
    }
    return buf;
}

/* CPU time of every thread of this process so far (user + system), ns; with csw, its threads'
 * context switches (voluntary and not: each a hand-off or a wait for a core). */
static uint64_t cpu_ns_csw(uint64_t *csw) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
    if (csw) *csw = (uint64_t)u.ru_nvcsw + (uint64_t)u.ru_nivcsw;
    return (uint64_t)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000000ull +
           (uint64_t)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1000ull;
}

static uint64_t cpu_ns(void) {
    return cpu_ns_csw(NULL);
}

/* The layer call's batch for call q (the MoE layers in turn). */
static md_moe_batch batch_of(const call_in *c, int first, int last, int q) {
    return (md_moe_batch){.layer = first + q % (last - first + 1),
                          .T = c->R,
                          .width = c->width,
                          .x = c->x,
                          .k = c->k,
                          .experts = c->ex,
                          .weights = c->w,
                          .numerics = KN_NUM_Q8};
}

/* ---- rows_call: a cluster of in-process nodes over loopback TCP ----------------------------- */

typedef struct node_th {
    en_node *n;
    pthread_t th;
    int rc;
} node_th;

static void *serve(void *arg) {
    node_th *t = arg;
    mw_err err;
    t->rc = en_node_serve(t->n, &err);
    return NULL;
}

typedef struct cluster {
    node_th nodes[MAX_NODES];
    int n;
    char ep[MAX_NODES][256];
    const char *eps[MAX_NODES];
    char spec[MAX_NODES][64];
    md_expert_backend *be;
} cluster;

static void cluster_stop(cluster *cl, en_node_timing *sum) {
    if (cl->be) cl->be->destroy(cl->be);
    cl->be = NULL;
    *sum = (en_node_timing){0};
    for (int i = 0; i < cl->n; i++) {
        en_node_stop(cl->nodes[i].n);
        pthread_join(cl->nodes[i].th, NULL);
        en_node_timing t = en_node_get_timing(cl->nodes[i].n);
        sum->batches += t.batches;
        sum->recv_ns += t.recv_ns;
        sum->handle_ns += t.handle_ns;
        sum->compute_ns += t.compute_ns;
        sum->encode_ns += t.encode_ns;
        sum->send_ns += t.send_ns;
        en_node_close(cl->nodes[i].n);
    }
    cl->n = 0;
}

typedef struct setup {
    const char *model;
    vx_source *src;
    md_model *m;
    kn_pool *pool;
    int node_threads, node_poll_us, first_moe, last_moe;
} setup;

static int cluster_start(const setup *su, int N, bool relay, cluster *cl, mw_err *err) {
    memset(cl, 0, sizeof *cl);
    const int E = su->m->cfg.n_expert;
    for (int i = 0; i < N; i++) {
        snprintf(cl->spec[i], sizeof cl->spec[i], "%d-%d:%d-%d", su->first_moe, su->last_moe,
                 i * E / N, (i + 1) * E / N - 1);
        en_opts o = {.vindex = su->model,
                     .experts = cl->spec[i],
                     .bind = "tcp://127.0.0.1:*",
                     .threads = su->node_threads,
                     .numerics = -1,
                     .poll_us = su->node_poll_us,
                     .quiet = true,
                     .recv_unbounded = !relay};
        if (en_node_open(&o, &cl->nodes[i].n, err)) {
            en_node_timing t;
            cluster_stop(cl, &t);
            return -1;
        }
        snprintf(cl->ep[i], sizeof cl->ep[i], "%s", en_node_endpoint(cl->nodes[i].n));
        cl->eps[i] = cl->ep[i];
        pthread_create(&cl->nodes[i].th, NULL, serve, &cl->nodes[i]);
        cl->n++;
    }
    co_cluster_opts co = {.endpoints = cl->eps,
                          .n_nodes = N,
                          .model = su->model,
                          .deadline_ms = 600000,
                          .down_ms = 60000,
                          .connect_ms = 60000,
                          .src = su->src,
                          .width = md_expert_width(&su->m->cfg),
                          .glu = &su->m->cfg.glu,
                          .numerics = KN_NUM_Q8,
                          .pool = su->pool};
    wr_codec_parse("f16", &co.codec, NULL);
    if (co_cluster_create(&co, &cl->be, err)) {
        en_node_timing t;
        cluster_stop(cl, &t);
        return -1;
    }
    return 0;
}

typedef struct call_res {
    double call_us, node_compute_per_call_us, tail_us, stack_cpu_us;
} call_res;

/* The same calls on the in-process expert backend, one thread: the experts' own CPU time per
 * call, which the cluster's CPU time per call less is the messaging stack's. */
static int bench_local(const setup *su, md_expert_backend *local, const call_in *c, int calls,
                       double *us, mw_err *err) {
    float *out = malloc((size_t)(c->R * c->width) * sizeof *out);
    if (!out) return mw_errf(err, "out of memory");
    const int warm = calls / 10 + 2;
    uint64_t t0 = 0;
    for (int q = 0; q < warm + calls; q++) {
        if (q == warm) t0 = cpu_ns();
        md_moe_batch b = batch_of(c, su->first_moe, su->last_moe, q);
        if (local->run(local, &b, out, err)) {
            free(out);
            return -1;
        }
    }
    *us = (double)(cpu_ns() - t0) / calls * 1e-3;
    free(out);
    printf("{\"bench\":\"rows_local\",\"rows\":%lld,\"calls\":%d,\"load\":\"%s\","
           "\"cpu_us\":%.1f,\"cpu_us_per_row\":%.3f}\n",
           (long long)c->R, calls, load(), *us, *us / (double)c->R);
    return 0;
}

static int bench_call(const setup *su, const call_in *c, int N, bool relay, int calls,
                      double local_us, call_res *res, mw_err *err) {
    cluster cl;
    if (cluster_start(su, N, relay, &cl, err)) return -1;
    float *out = malloc((size_t)(c->R * c->width) * sizeof *out);
    int rc = -1;
    if (!out) goto done;
    const int warm = calls / 10 + 2;
    double wall = 0;
    uint64_t cpu0 = 0, csw0 = 0, csw1 = 0;
    for (int q = 0; q < warm + calls; q++) {
        if (q == warm) {
            co_remote_reset_stats(cl.be);
            cpu0 = cpu_ns_csw(&csw0);
        }
        md_moe_batch b = batch_of(c, su->first_moe, su->last_moe, q);
        const uint64_t t0 = mw_now_ns();
        if (cl.be->run(cl.be, &b, out, err)) goto done;
        if (q >= warm) wall += (double)(mw_now_ns() - t0);
    }
    const double cpu_us = (double)(cpu_ns_csw(&csw1) - cpu0) / calls * 1e-3;
    const double csw = (double)(csw1 - csw0) / calls;
    const co_remote_summary s = co_remote_summarize(cl.be);
    const double batches_per_call = (double)s.total.batches / calls;
    en_node_timing nt;
    cluster_stop(&cl, &nt);
    /* the nodes' counters include the warm-up calls: means per batch, times the call's batches */
    const double per_call = nt.batches ? batches_per_call / (double)nt.batches * 1e-3 : 0;
    const double call_us = wall / calls * 1e-3, R = (double)c->R;
    const double node[5] = {(double)nt.recv_ns * per_call, (double)nt.handle_ns * per_call,
                            (double)nt.compute_ns * per_call, (double)nt.encode_ns * per_call,
                            (double)nt.send_ns * per_call};
    const double co[6] = {s.split_us, s.encode_us, s.send_us, s.wait_us, s.decode_us, s.combine_us};
    printf("{\"bench\":\"rows_call\",\"transport\":\"%s\",\"rows\":%lld,\"nodes\":%d,"
           "\"calls\":%d,\"batches_per_call\":%.2f,\"load\":\"%s\",\"call_us\":%.1f,"
           "\"cpu_us\":%.1f,\"stack_cpu_us\":%.1f,\"switches\":%.1f,"
           "\"layer_rtt_us\":%.1f,\"tail_us\":%.1f,\"tail_p50_us\":%.1f,"
           "\"split_us\":%.1f,\"encode_us\":%.1f,\"send_us\":%.1f,\"wait_us\":%.1f,"
           "\"decode_us\":%.1f,\"combine_us\":%.1f,"
           "\"node_recv_us\":%.1f,\"node_handle_us\":%.1f,\"node_compute_us\":%.1f,"
           "\"node_encode_us\":%.1f,\"node_send_us\":%.1f,"
           "\"per_row_us\":{\"call\":%.2f,\"stack_cpu\":%.3f,\"tail\":%.2f,\"split\":%.3f,"
           "\"encode\":%.3f,"
           "\"send\":%.3f,\"decode\":%.3f,\"combine\":%.3f,\"node_recv\":%.3f,"
           "\"node_handle\":%.3f,\"node_compute\":%.3f,\"node_encode\":%.3f,"
           "\"node_send\":%.3f}}\n",
           relay ? "relay" : "direct", (long long)c->R, N, calls, batches_per_call, load(), call_us,
           cpu_us, cpu_us - local_us, csw, s.layer_rtt_us, s.tail_us, s.tail_p50_us, co[0], co[1],
           co[2], co[3], co[4], co[5], node[0], node[1], node[2], node[3], node[4], call_us / R,
           (cpu_us - local_us) / R, s.tail_us / R, co[0] / R, co[1] / R, co[2] / R, co[4] / R,
           co[5] / R, node[0] / R, node[1] / R, node[2] / R, node[3] / R, node[4] / R);
    fflush(stdout);
    *res = (call_res){call_us, node[2], s.tail_us, cpu_us - local_us};
    rc = 0;
done:
    if (cl.n) cluster_stop(&cl, &nt);
    free(out);
    return rc;
}

int main(int argc, char **argv) {
    const char *model = "tests/fixtures/llamacpp/kimi-k3-tiny/model.gguf";
    int rows[MAX_LIST] = {1, 16, 64, 256}, n_rows = 4, nodes[MAX_LIST] = {1, 8}, n_nodes = 2;
    int calls = 200, node_threads = 1, node_poll_us = 0, transport = 0;
    double seconds = 0.3;
    bool no_cluster = false;
    int width_opt = 0;
    const bu_opt opt[] = {
        BU_OPT("--model", BU_STR, &model, "M", "vindex directory or GGUF file"),
        BU_OPT_INTS("--rows", rows, &n_rows, MAX_LIST, "1,16,64,256", "rows per layer call", 1,
                    4096),
        BU_OPT_INTS("--nodes", nodes, &n_nodes, MAX_LIST, "1,8", "expert nodes", 1, MAX_NODES),
        BU_OPT_IN("--calls", BU_INT, &calls, "200", "timed layer calls per measurement", 1,
                  1000000),
        BU_OPT_IN("--node-threads", BU_INT, &node_threads, "1", "compute threads per node", 1, 256),
        BU_OPT_IN("--node-poll-us", BU_INT, &node_poll_us, "0",
                  "idle node compute threads poll this long (-1: expert-node's default; 0, as "
                  "loopback nodes)",
                  -1, 1000000),
        BU_OPT("--transport", BU_CHOICE, &transport, "both|relay|direct",
               "nodes behind the receive relay, bound directly, or both in turn"),
        BU_OPT_IN("--seconds", BU_NUM, &seconds, "0.3", "time budget per codec measurement", 0.001,
                  3600),
        BU_OPT("--codec-only", BU_FLAG, &no_cluster, NULL, "only rows_codec (no sockets)"),
        BU_OPT_IN("--width", BU_INT, &width_opt, "0",
                  "with --codec-only: rows of this width (0: the model's), e.g. a larger model's",
                  0, 65536),
    };
    const bu_cli cli = {"bench_rows",
                        "The messaging stack's cost per row of a layer call: each part of the "
                        "coordinator's and the\nnodes' message path at R rows × N nodes, packed "
                        "and parsed in one thread, and through a\ncluster of in-process nodes "
                        "over loopback TCP (with and without the receive relay).",
                        NULL,
                        NULL,
                        opt,
                        (int)(sizeof opt / sizeof opt[0])};
    const int status = bu_args(argc, argv, &cli, NULL);
    if (status != BU_RUN) return status;
    setup su = {.model = model,
                .node_threads = node_threads,
                .node_poll_us = node_poll_us,
                .first_moe = -1};
    mw_err err = {{0}};
    int rc = 1;
    if (vx_source_open(model, NULL, &su.src, &err) || md_model_load(su.src, &su.m, &err)) goto out;
    for (int l = 0; l < vx_source_n_layers(su.src); l++)
        if (vx_source_layer_has_experts(su.src, l)) {
            if (su.first_moe < 0) su.first_moe = l;
            su.last_moe = l;
        }
    if (su.first_moe < 0) {
        mw_errf(&err, "%s has no MoE layer", model);
        goto out;
    }
    su.pool = kn_pool_create(1);
    md_expert_backend *local = NULL;
    if (!no_cluster && md_local_backend_new(su.src, &su.m->cfg, su.pool, &local, &err)) goto out;
    const md_config *cfg = &su.m->cfg;
    const int64_t width = no_cluster && width_opt ? width_opt : md_expert_width(cfg);
    wr_codec f16;
    wr_codec_parse("f16", &f16, NULL);
    call_res res[2][MAX_LIST][MAX_LIST] = {{{{0}}}};
    for (int ni = 0; ni < n_nodes; ni++)
        for (int ri = 0; ri < n_rows; ri++) {
            call_in c;
            if (call_make(&c, rows[ri], width, cfg->n_expert_used, cfg->n_expert)) {
                mw_errf(&err, "out of memory");
                call_free(&c);
                goto out;
            }
            int f = bench_codec(&c, nodes[ni], f16, seconds);
            double local_us = 0;
            if (!f && !no_cluster) f = bench_local(&su, local, &c, calls, &local_us, &err);
            for (int tr = 0; !f && !no_cluster && tr < 2; tr++)
                if (transport == 0 || transport == tr + 1)
                    f = bench_call(&su, &c, nodes[ni], tr == 0, calls, local_us, &res[tr][ni][ri],
                                   &err);
            call_free(&c);
            if (f) {
                if (!err.msg[0]) mw_errf(&err, "a codec measurement failed");
                goto out;
            }
        }
    /* the per-row slope between the smallest and the largest row count */
    for (int tr = 0; !no_cluster && n_rows > 1 && tr < 2; tr++)
        for (int ni = 0; ni < n_nodes; ni++) {
            if (transport && transport != tr + 1) continue;
            int lo = 0, hi = 0;
            for (int ri = 1; ri < n_rows; ri++) {
                if (rows[ri] < rows[lo]) lo = ri;
                if (rows[ri] > rows[hi]) hi = ri;
            }
            const call_res *a = &res[tr][ni][lo], *b = &res[tr][ni][hi];
            const double dR = rows[hi] - rows[lo];
            printf("{\"bench\":\"rows_slope\",\"transport\":\"%s\",\"nodes\":%d,\"rows\":[%d,%d],"
                   "\"tail_us_per_row\":%.3f,\"call_less_compute_us_per_row\":%.3f,"
                   "\"stack_cpu_us_per_row\":%.3f}\n",
                   tr == 0 ? "relay" : "direct", nodes[ni], rows[lo], rows[hi],
                   (b->tail_us - a->tail_us) / dR,
                   ((b->call_us - b->node_compute_per_call_us) -
                    (a->call_us - a->node_compute_per_call_us)) /
                       dR,
                   (b->stack_cpu_us - a->stack_cpu_us) / dR);
        }
    rc = 0;
out:
    if (rc) fprintf(stderr, "bench_rows: %s\n", err.msg);
    if (local) local->destroy(local);
    md_model_free(su.m);
    if (su.src) vx_source_close(su.src);
    kn_pool_destroy(su.pool);
    return rc;
}
