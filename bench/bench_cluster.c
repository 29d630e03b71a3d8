/* bench/bench_cluster.c — decode speed of a 2-node loopback cluster against the in-process
 * backend, measured in the same run on the same model, with the per-layer round trip, wire bytes
 * per token and movement ratio of every wire codec.
 *
 * Models: synthetic gpt-oss-20b-width models (hidden 2880, 64 query / 8 KV heads of 64, 32
 * experts top-4, expert ff 2880, MXFP4 experts, q8_0 dense, vocab 32000, window 128: the shapes
 * bench_model measures), 4 and 8 layers, made with `bin/vindex synth` as vindex directories (what
 * nodes mount in production) in build/bench-models/ on first use; their weights are random. Every
 * configuration decodes the same teacher-forced tokens after the same prompt, so each does the
 * same work; the configurations take turns, round after round (each round starting one further
 * along), and each reports its best round ("vs_local": best over best) and the median over the
 * rounds of its speed over the in-process speed of the same round ("vs_local_round_median":
 * pairs runs a second apart, so a shared machine's minute-to-minute bandwidth drift cancels out).
 * Then every backend decodes 2 × --steps more steps in its own context, each of its own tokens
 * (with the same tokens, a configuration would find the step's experts still cached from the one
 * that decoded it just before: the nodes serve all of them), the backends taking turns in a fresh
 * random order each turn, two steps a turn of which the second is timed (the first pays for the
 * switch from another backend, which continuous serving never does):
 * "vs_local_interleaved", the in-process time over its time, with the minimum, median and maximum
 * over blocks of 8 timed steps. Compared steps are tens of milliseconds apart, so the host's
 * second-to-second load hits all alike: the least noisy of the three figures. Ping → Pong through
 * a node, back to back and after a trunk-like sweep of 24 MiB on the pool ("ping_after_trunk"):
 * the bare round trip under a layer's conditions.
 * Nodes get --node-threads threads each (default: as many as the in-process run, --threads, which
 * defaults to the online CPUs). Per cluster configuration: where a layer's time goes in the
 * coordinator (split, encode, send, wait, decode, combine) and, from the replies, node queueing
 * and compute per batch; the nodes print their own per-phase times when they stop. Prints one
 * JSON object per line.
 *
 * --pin copies the weights onto huge pages on both sides (md_model_pin_dense and
 * md_local_backend_pin in process, expert-node --pin on the nodes); auto does so when the model
 * fits twice in a third of memory.
 *
 * --node-affinity (default on) binds node i's threads to CPUs from i·CPUs/2 on, as `coordinator
 * --loopback` does (co_loopback.h says why); off leaves placement to the scheduler.
 *
 * --curve adds the f32 partial configuration on CURVE (two more loopback nodes, keys made for
 * the run) and prints CURVE over plain ZMTP in the same run: decode tok/s (interleaved steps and
 * per-round ratios: median and spread) and the per-layer round trip.
 *
 * `bench_cluster --help` lists the options (the table in main); run it from the repository root.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "coordinator/co_cluster.h"
#include "coordinator/co_remote.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "vindex/vx_source.h"
#include "wire/wr_zmq.h"

#define PROMPT 4

static int make_model(const char *path, int layers) {
    struct stat st;
    char manifest[4200];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", path);
    if (stat(manifest, &st) == 0) return 0;
    char tmp[4200], cmd[8800];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && bin/vindex synth --arch gpt-oss --layers %d --hidden 2880 --heads 64 "
             "--kv-heads 8 --head-dim 64 --experts 32 --top-k 4 --expert-ff 2880 --vocab 32000 "
             "--sliding-window 128 --dense-format q8_0 --expert-format mxfp4 --seed 1 "
             "--format vindex '%s' >&2 && mv '%s' '%s'",
             tmp, layers, tmp, tmp, path);
    fprintf(stderr, "bench_cluster: making %s (random weights)\n", path);
    return system(cmd) == 0 ? 0 : -1;
}

/* A pool job that reads a buffer much larger than the caches, as a layer's trunk streams its
 * weights: the caches and the cores are then as a layer's exchange finds them. */
typedef struct sweep {
    const uint64_t *p;
    size_t n;
    uint64_t sum[64];
} sweep;

static void sweep_task(void *arg, int ith, int nth) {
    sweep *s = arg;
    size_t a = s->n * (size_t)ith / (size_t)nth, b = s->n * (size_t)(ith + 1) / (size_t)nth;
    uint64_t x = 0;
    for (size_t i = a; i < b; i += 8) x += s->p[i];
    s->sum[ith % 64] += x;
}

/* Median Ping → Pong time through a node's serve loop: the bare cost of one round trip between
 * two processes (socket, wake-ups, envelope), the floor under every layer's exchange. With
 * `trunk` set, each ping follows a sweep of 24 MiB (a layer's attention weights) on that pool,
 * which is then parked, as before a layer's batches go out: the round trip a layer pays. */
static double ping_us(const char *endpoint, int n, kn_pool *trunk) {
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    wr_socket_setup(s, NULL, NULL);
    zmq_connect(s, endpoint);
    wr_out o;
    wr_in in;
    wr_rx rx;
    wr_out_init(&o);
    wr_in_init(&in, NULL);
    wr_rx_init(&rx);
    sweep sw = {.n = trunk ? (24u << 20) / sizeof(uint64_t) : 0};
    uint64_t *buf = sw.n ? malloc(sw.n * sizeof *buf) : NULL;
    if (buf) memset(buf, 1, sw.n * sizeof *buf); /* real pages, not the shared zero page */
    sw.p = buf;
    double *t = calloc((size_t)n, sizeof *t), med = 0;
    int ok = 0;
    for (int i = 0; i < n + 10 && t && (!trunk || buf); i++) { /* 10 untimed first */
        wr_msg m = {.kind = WR_MSG_PING, .seq = (uint64_t)i + 1}, r;
        wr_code code;
        if (trunk) {
            kn_pool_run(trunk, sweep_task, &sw);
            kn_pool_park(trunk);
        }
        double t0 = bu_now();
        if (wr_pack(&o, &m, (wr_codec){WR_F32, false}, NULL) || wr_send(s, NULL, 0, &o, 0, NULL) ||
            wr_recv(s, &rx, false, 0, NULL) ||
            wr_parse(&in, rx.parts, rx.n_parts, rx.truncated, &r, &code, NULL) ||
            r.kind != WR_MSG_PONG)
            break;
        if (i >= 10) t[ok++] = (bu_now() - t0) * 1e6;
    }
    if (ok) med = bu_median(t, ok);
    free(t);
    free(buf);
    wr_rx_free(&rx);
    wr_in_free(&in);
    wr_out_free(&o);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return med;
}

/* The in-process backend with a stopwatch: its time per layer call is what a cluster's layer
 * round trip replaces. */
typedef struct timed {
    md_expert_backend *inner;
    double sec;
    long calls;
} timed;

static int timed_run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    timed *t = b->impl;
    double t0 = bu_now();
    int rc = t->inner->run(t->inner, batch, out, err);
    t->sec += bu_now() - t0;
    t->calls++;
    return rc;
}

static void timed_reset(md_expert_backend *b) {
    timed *t = b->impl;
    t->sec = 0;
    t->calls = 0;
}

static void cluster_reset(md_expert_backend *b) {
    co_remote_reset_stats(b);
}

/* A context decoding through `experts`, the PROMPT tokens already decoded (logits: n_vocab). */
static int prompted_ctx(const md_model *m, md_expert_backend *experts, kn_pool *pool, int64_t n_ctx,
                        float *logits, md_ctx **out, mw_err *err) {
    md_ctx_params cp = {
        .numerics = KN_NUM_Q8, .pool = pool, .experts = experts, .n_seq = 1, .n_ctx = n_ctx};
    md_row rows[PROMPT];
    for (int i = 0; i < PROMPT; i++)
        rows[i] = (md_row){.seq = 0, .pos = i, .token = 17 + 31 * i, .logits = i == PROMPT - 1};
    if (md_ctx_new(m, &cp, out, err)) return -1;
    return md_forward(*out, rows, PROMPT, logits, err);
}

/* Decode step k after the prompt, teacher-forced, of token stream `stream`: the rounds all decode
 * stream 0, the same tokens. The interleaved pass gives every backend a stream of its own: the
 * nodes' expert copies serve all five wire configurations, so with the same tokens a step's
 * experts would still be in the last-level cache from the configuration that
 * decoded that step just before, a gain the in-process backend, with its own copy, never
 * gets. */
static md_row step_row(int k, int stream) {
    return (md_row){
        .seq = 0, .pos = PROMPT + k, .token = (101 + 53 * k + 7919 * stream) % 32000, .logits = 1};
}

/* One decode: prefill PROMPT tokens, one warm-up step, then `n` timed steps; returns tokens/s.
 * `reset` (may be NULL) is called after the warm-up so counters cover the timed steps only. */
static int decode(const md_model *m, md_expert_backend *experts, kn_pool *pool, int n,
                  void (*reset)(md_expert_backend *), double *tok_s, mw_err *err) {
    md_ctx *ctx = NULL;
    float *logits = malloc((size_t)m->cfg.n_vocab * sizeof *logits);
    int rc = logits ? prompted_ctx(m, experts, pool, PROMPT + n + 2, logits, &ctx, err)
                    : mw_errf(err, "out of memory");
    double t0 = 0;
    for (int k = 0; rc == 0 && k <= n; k++) {
        if (k == 1) { /* step 0 is the warm-up */
            if (reset) reset(experts);
            t0 = bu_now();
        }
        md_row r = step_row(k, 0);
        rc = md_forward(ctx, &r, 1, logits, err);
    }
    *tok_s = rc == 0 ? (double)n / (bu_now() - t0) : 0;
    free(logits);
    md_ctx_free(ctx);
    return rc;
}

/* Every backend decodes teacher-forced steps in its own context, of its own token stream (so no
 * backend finds another's experts still cached, step_row says why). The backends take
 * turns, in a fresh random order each turn, and each turn a backend decodes two steps of which
 * only the second is timed: the first takes what switching from another backend costs (the
 * nodes idle meanwhile, the caches holding the other backend's weights), which continuous
 * serving never pays. Compared steps are then tens of milliseconds apart, so a change in the
 * machine's speed (other tenants of the host) hits all backends alike. sec[b] gets backend b's
 * time over its `steps` timed steps, blocks[b * stride + j] its time over timed steps
 * [j·block, (j + 1)·block). */
#define MAX_BACKENDS 16
static int interleave(const md_model *m, md_expert_backend **be, int n_be, kn_pool *pool, int steps,
                      int block, int stride, double *sec, double *blocks, mw_err *err) {
    md_ctx *ctx[MAX_BACKENDS] = {0};
    if (n_be > MAX_BACKENDS) return mw_errf(err, "at most %d backends", MAX_BACKENDS);
    float *logits = malloc((size_t)m->cfg.n_vocab * sizeof *logits);
    int rc = logits ? 0 : mw_errf(err, "out of memory");
    for (int b = 0; rc == 0 && b < n_be; b++) {
        rc = prompted_ctx(m, be[b], pool, PROMPT + 2 * steps + 2, logits, &ctx[b], err);
        sec[b] = 0;
        for (int j = 0; j < stride; j++) blocks[b * stride + j] = 0;
    }
    uint32_t rng = 12345;
    int order[MAX_BACKENDS];
    for (int b = 0; b < n_be; b++) order[b] = b;
    for (int k = 0; rc == 0 && k < steps; k++) {
        for (int q = n_be - 1; q > 0; q--) { /* Fisher-Yates with a fixed-seed LCG */
            rng = rng * 1664525u + 1013904223u;
            int j = (int)((rng >> 16) % (uint32_t)(q + 1)), t = order[q];
            order[q] = order[j];
            order[j] = t;
        }
        for (int q = 0; rc == 0 && q < n_be; q++) {
            const int b = order[q];
            double dt = 0;
            for (int h = 0; rc == 0 && h < 2; h++) {
                md_row r = step_row(2 * k + h, b);
                double t0 = bu_now();
                rc = md_forward(ctx[b], &r, 1, logits, err);
                dt = bu_now() - t0;
            }
            sec[b] += dt;
            blocks[b * stride + k / block] += dt;
        }
    }
    for (int b = 0; b < n_be; b++) md_ctx_free(ctx[b]);
    free(logits);
    return rc;
}

/* The last row, CURVE between coordinator and nodes (a loopback cluster of its own with keys made
 * for the run), is measured with --curve only; it is compared with the first row, the same
 * codec and mode in plain ZMTP. */
static const struct {
    const char *codec;
    bool exact, curve;
} configs[] = {{"f32", false, false},  {"f32", true, false},       {"f16", false, false},
               {"bf16", false, false}, {"bf16+lz4", false, false}, {"f32", false, true}};
#define MAX_CONFIGS (int)(sizeof configs / sizeof configs[0])
static int N_CONFIGS = MAX_CONFIGS - 1; /* MAX_CONFIGS with --curve */

#define MAX_ROUNDS 256
#define MAX_STEPS  4096
#define BLOCK      8 /* steps per block of the interleaved comparison */

/* A configuration's accumulated figures over the rounds. */
typedef struct cfg_result {
    md_expert_backend *be;
    double best_tok_s;
    double ratio[MAX_ROUNDS]; /* per round: its tok/s over the in-process tok/s of that round */
    co_remote_summary sum;    /* of the round with the best speed */
    double interleaved;       /* in-process time over its time, steps taken in turn */
    double block_min, block_median, block_max; /* the same over blocks of steps */
} cfg_result;

static void print_config(int layers, int k, cfg_result *c, double base, int rounds) {
    const co_remote_summary *s = &c->sum;
    double per = s->tokens ? 1.0 / (double)s->tokens : 0;
    char inter[96] = "null,\"vs_local_interleaved_blocks_min_median_max\":null"; /* --steps 0 */
    if (c->interleaved > 0)
        snprintf(inter, sizeof inter,
                 "%.3f,\"vs_local_interleaved_blocks_min_median_max\":[%.3f,%.3f,%.3f]",
                 c->interleaved, c->block_min, c->block_median, c->block_max);
    printf("{\"bench\":\"cluster\",\"layers\":%d,\"backend\":\"loopback-2\",\"codec\":\"%s\","
           "\"mode\":\"%s\",\"curve\":%s,\"decode_tok_s\":%.3f,\"vs_local\":%.3f,"
           "\"vs_local_round_median\":%.3f,\"vs_local_interleaved\":%s,\"layer_rtt_us\":%.1f,"
           "\"node_queue_us\":%.1f,\"node_compute_us\":%.1f,\"node_rtt_us\":%.1f,"
           "\"phases_us\":{\"split\":%.1f,\"encode\":%.1f,\"send\":%.1f,\"wait\":%.1f,"
           "\"decode\":%.1f,\"combine\":%.1f,\"last_reply_tail\":%.1f},"
           "\"last_reply_tail_p50_p90_p99_us\":[%.0f,%.0f,%.0f],"
           "\"wire_bytes_per_token\":%.0f,"
           "\"weight_bytes_per_token\":%.0f,\"movement_ratio\":%.3g}\n",
           layers, configs[k].codec, configs[k].exact ? "exact" : "partial",
           configs[k].curve ? "true" : "false", c->best_tok_s, c->best_tok_s / base,
           bu_median(c->ratio, rounds), inter, s->layer_rtt_us, s->node_queue_us,
           s->node_compute_us, s->node_rtt_us, s->split_us, s->encode_us, s->send_us, s->wait_us,
           s->decode_us, s->combine_us, s->tail_us, s->tail_p50_us, s->tail_p90_us, s->tail_p99_us,
           (double)(s->total.tx_bytes + s->total.rx_bytes) * per,
           (double)s->total.weight_bytes * per, wr_movement_ratio(&s->total));
}

/* CURVE's cost: the CURVE cluster over the plain one with the same codec and mode, in the same
 * run: decode speed (interleaved steps, the least noisy; and the median over rounds of the
 * per-round ratio) and the per-layer round trip. */
static void print_curve(int layers, const cfg_result *plain, const cfg_result *curve, int rounds) {
    double r[MAX_ROUNDS];
    for (int i = 0; i < rounds; i++) r[i] = curve->ratio[i] / plain->ratio[i];
    char inter[160] = "null";
    if (plain->interleaved > 0)
        snprintf(inter, sizeof inter, "%.3f,\"curve_vs_plain_interleaved_blocks_median\":%.3f",
                 curve->interleaved / plain->interleaved,
                 curve->block_median / plain->block_median);
    const double rmin = bu_min(r, rounds), rmed = bu_median(r, rounds); /* sorts r */
    printf(
        "{\"bench\":\"cluster\",\"layers\":%d,\"curve\":{\"codec\":\"%s\",\"mode\":\"%s\","
        "\"plain_layer_rtt_us\":%.1f,\"curve_layer_rtt_us\":%.1f,\"curve_vs_plain_layer_rtt\":%.3f,"
        "\"curve_vs_plain_tok_s_interleaved\":%s,"
        "\"curve_vs_plain_tok_s_rounds_min_median_max\":[%.3f,%.3f,%.3f]}}\n",
        layers, configs[0].codec, configs[0].exact ? "exact" : "partial", plain->sum.layer_rtt_us,
        curve->sum.layer_rtt_us,
        plain->sum.layer_rtt_us > 0 ? curve->sum.layer_rtt_us / plain->sum.layer_rtt_us : 0, inter,
        rmin, rmed, r[rounds - 1]);
}

/* Bytes of the regular files under a vindex directory (or of a file). */
static double tree_bytes;
static int add_file(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)p, (void)f;
    if (flag == FTW_F && S_ISREG(st->st_mode)) tree_bytes += (double)st->st_size;
    return 0;
}

/* --pin auto: the in-process copy and the nodes' copies (the model twice) within a third of
 * memory. */
static bool pin_fits(const char *path) {
    tree_bytes = 0;
    if (nftw(path, add_file, 16, FTW_PHYS) != 0) return false;
    const double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    return 2 * tree_bytes < mem / 3;
}

/* One model's run: the in-process backend (with its stopwatch) and every cluster configuration,
 * and what they measured. */
typedef struct bench_run {
    const md_model *m;
    kn_pool *pool;
    int n; /* timed steps per decode */
    md_expert_backend *local;
    timed tl;
    md_expert_backend timed_local;
    cfg_result res[MAX_CONFIGS];
    double base;           /* the in-process backend's best tok/s */
    double local_layer_us; /* its time per layer call in that round */
    double local_interleaved_tok_s;
} bench_run;

/* One cluster per configuration: the first starts the loopback nodes (and stops them when
 * destroyed, last), the others connect to the same nodes. */
static int start_clusters(bench_run *b, const char *path, const vx_source *src, bool pin,
                          int node_threads, bool node_affinity, mw_err *err) {
    co_cluster_opts co = {.loopback = 2,
                          .model = path,
                          .node_threads = node_threads,
                          .node_pin = pin,
                          .node_affinity = node_affinity,
                          .ready_ms = 600000,
                          .deadline_ms = 600000,
                          .down_ms = 60000, /* a loaded host may starve the heartbeats */
                          .connect_ms = 60000,
                          .src = src,
                          .width = md_expert_width(&b->m->cfg),
                          .glu = &b->m->cfg.glu,
                          .numerics = KN_NUM_Q8,
                          .pool = b->pool};
    for (int k = 0; k < N_CONFIGS; k++) {
        co.exact = configs[k].exact;
        co.curve = configs[k].curve;
        if (co.curve) { /* nodes of its own, on CURVE */
            co.endpoints = NULL;
            co.n_nodes = 0;
        }
        wr_codec_parse(configs[k].codec, &co.codec, NULL);
        if (co_cluster_create(&co, &b->res[k].be, err)) return -1;
        if (!co.curve) co.endpoints = co_remote_endpoints(b->res[0].be, &co.n_nodes);
    }
    return 0;
}

/* The rounds: in-process and every configuration decode in turn, `rounds` times, so a burst of
 * load from elsewhere hits all of them alike; each keeps its best round (noise only slows a run).
 * Round r starts at a different configuration (in-process is -1), so none always follows the
 * same one. */
static int run_rounds(bench_run *b, int rounds, mw_err *err) {
    double tok_s;
    for (int r = 0; r < rounds; r++) {
        double round_tok_s[MAX_CONFIGS], round_local = 0;
        for (int q = 0; q <= N_CONFIGS; q++) {
            int k = (q + r) % (N_CONFIGS + 1) - 1;
            if (k < 0) {
                if (decode(b->m, &b->timed_local, b->pool, b->n, timed_reset, &tok_s, err))
                    return -1;
                round_local = tok_s;
                if (tok_s > b->base) {
                    b->base = tok_s;
                    b->local_layer_us = b->tl.calls ? b->tl.sec * 1e6 / (double)b->tl.calls : 0;
                }
                continue;
            }
            cfg_result *c = &b->res[k];
            if (decode(b->m, c->be, b->pool, b->n, cluster_reset, &tok_s, err)) return -1;
            round_tok_s[k] = tok_s;
            if (tok_s > c->best_tok_s) {
                c->best_tok_s = tok_s;
                c->sum = co_remote_summarize(c->be);
            }
        }
        for (int k = 0; k < N_CONFIGS; k++) b->res[k].ratio[r] = round_tok_s[k] / round_local;
    }
    return 0;
}

/* The interleaved comparison (interleave()), and its ratios per configuration: the whole run and
 * the minimum, median and maximum over blocks of BLOCK steps. */
static int run_interleaved(bench_run *b, int steps, mw_err *err) {
    md_expert_backend *be[MAX_CONFIGS + 1] = {b->local};
    for (int k = 0; k < N_CONFIGS; k++) be[k + 1] = b->res[k].be;
    const int nb = steps / BLOCK + 1, full = steps / BLOCK;
    double sec[MAX_CONFIGS + 1],
        *blocks = calloc((size_t)(N_CONFIGS + 1) * (size_t)nb, sizeof *blocks);
    double *ratios = calloc((size_t)nb, sizeof *ratios);
    int rc = blocks && ratios ? 0 : mw_errf(err, "out of memory");
    if (!rc) rc = interleave(b->m, be, N_CONFIGS + 1, b->pool, steps, BLOCK, nb, sec, blocks, err);
    for (int k = 0; !rc && k < N_CONFIGS; k++) {
        cfg_result *c = &b->res[k];
        c->interleaved = sec[0] / sec[k + 1];
        for (int j = 0; j < full; j++) ratios[j] = blocks[j] / blocks[(k + 1) * nb + j];
        /* whole blocks only; with fewer steps than a block, the whole run is the one block */
        c->block_median = full ? bu_median(ratios, full) : c->interleaved;
        c->block_min = full ? bu_min(ratios, full) : c->interleaved; /* sorted */
        c->block_max = full ? ratios[full - 1] : c->interleaved;
    }
    if (!rc) b->local_interleaved_tok_s = steps / sec[0];
    free(blocks);
    free(ratios);
    return rc;
}

static int bench_model(const char *path, int layers, int n, int rounds, int steps, int threads,
                       int node_threads, int pin_opt, bool node_affinity) {
    mw_err err = {{0}};
    vx_source *src = NULL;
    md_model *m = NULL;
    bench_run b = {.pool = kn_pool_create(threads), .n = n};
    b.timed_local = (md_expert_backend){.name = "local", .run = timed_run, .impl = &b.tl};
    int rc = -1;
    double tok_s;
    /* --pin: the trunk's dense matrices, the in-process experts and every node's experts are
     * copied onto huge pages (md_pin.h), each side as fast as it can stream them. */
    const bool pin = pin_opt > 0 || (pin_opt < 0 && pin_fits(path));
    if (vx_source_open(path, NULL, &src, &err) || md_model_load(src, &m, &err) ||
        md_local_backend_new(src, &m->cfg, b.pool, &b.local, &err) ||
        (pin && (md_model_pin_dense(m, &err) || md_local_backend_pin(b.local, &err))))
        goto done;
    b.m = m;
    b.tl.inner = b.local;
    if (start_clusters(&b, path, src, pin, node_threads, node_affinity, &err)) goto done;
    int n_nodes;
    const char *node0 = co_remote_endpoints(b.res[0].be, &n_nodes)[0];
    const double ping_hot = ping_us(node0, 200, NULL), ping_trunk = ping_us(node0, 200, b.pool);
    printf("{\"bench\":\"cluster\",\"layers\":%d,\"ping_rtt_us_median\":%.1f,"
           "\"ping_after_trunk_us_median\":%.1f}\n",
           layers, ping_hot, ping_trunk);
    /* Untimed first passes fault the touched experts' pages in (the nodes keep their mappings). */
    if (decode(m, &b.timed_local, b.pool, n, NULL, &tok_s, &err)) goto done;
    for (int k = 0; k < N_CONFIGS; k++)
        if (decode(m, b.res[k].be, b.pool, n, NULL, &tok_s, &err)) goto done;
    if (run_rounds(&b, rounds, &err) || (steps > 0 && run_interleaved(&b, steps, &err))) goto done;
    char local_inter[32] = "null"; /* --steps 0 */
    if (b.local_interleaved_tok_s > 0)
        snprintf(local_inter, sizeof local_inter, "%.3f", b.local_interleaved_tok_s);
    printf("{\"bench\":\"cluster\",\"layers\":%d,\"backend\":\"local\",\"threads\":%d,"
           "\"node_threads\":%d,\"node_affinity\":%s,\"rounds\":%d,\"pinned\":%s,"
           "\"decode_tok_s\":%.3f,\"experts_per_layer_us\":%.1f,\"steps\":%d,"
           "\"interleaved_tok_s\":%s}\n",
           layers, threads, node_threads, node_affinity ? "true" : "false", rounds,
           pin ? "true" : "false", b.base, b.local_layer_us, steps, local_inter);
    for (int k = 0; k < N_CONFIGS; k++) print_config(layers, k, &b.res[k], b.base, rounds);
    if (N_CONFIGS == MAX_CONFIGS) print_curve(layers, &b.res[0], &b.res[MAX_CONFIGS - 1], rounds);
    fflush(stdout);
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_cluster: %s\n", err.msg);
    for (int k = N_CONFIGS - 1; k >= 0; k--) /* the first one owns the nodes */
        if (b.res[k].be) b.res[k].be->destroy(b.res[k].be);
    if (b.local) b.local->destroy(b.local);
    md_model_free(m);
    vx_source_close(src);
    kn_pool_destroy(b.pool);
    return rc;
}

static const char ABOUT[] =
    "Decode speed of a 2-node loopback cluster against the in-process backend, same run, same "
    "model,\nfor every wire codec: the interleaved and per-round ratios, the layer round trip, "
    "wire bytes per\ntoken and the movement ratio. Run from the repository root after make.";

int main(int argc, char **argv) {
    const char *dir = "build/bench-models";
    int layers[8] = {4, 8}, n_layers = 2, n = 8, rounds = 5, steps = 48, pin = 0, affinity = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus > 0 ? (int)cpus : 1, node_threads = 0;
    bool curve = false;
    const bu_opt opt[] = {
        BU_OPT_INTS("--layers", layers, &n_layers, 8, "4,8", "layer counts of the models", 1, 4096),
        BU_OPT_IN("--tokens", BU_INT, &n, "8", "timed decode steps per round", 1, 1 << 20),
        BU_OPT_IN("--rounds", BU_INT, &rounds, "5", "rounds of the configurations in turn", 1,
                  MAX_ROUNDS),
        BU_OPT_IN("--steps", BU_INT, &steps, "48", "timed steps of the interleaved comparison", 0,
                  MAX_STEPS),
        BU_OPT_IN("--threads", BU_INT, &threads, "N", "in-process threads (default: the CPUs)", 1,
                  4096),
        BU_OPT_IN("--node-threads", BU_INT, &node_threads, "N",
                  "threads per node (default: --threads)", 1, 4096),
        BU_OPT("--node-affinity", BU_CHOICE, &affinity, "on|off",
               "bind node i's threads from CPU i*CPUs/2 on (on)"),
        BU_OPT("--pin", BU_CHOICE, &pin, "auto|yes|no",
               "weights onto huge pages on both sides (auto: when they fit)"),
        BU_OPT("--dir", BU_STR, &dir, "DIR", "where the models are kept (build/bench-models)"),
        BU_OPT("--curve", BU_FLAG, &curve, "", "add the f32 partial configuration on CURVE"),
    };
    const bu_cli cli = {"bench_cluster", ABOUT, NULL, NULL, opt, (int)(sizeof opt / sizeof opt[0])};
    const int status = bu_args(argc, argv, &cli, NULL);
    if (status != BU_RUN) return status;
    if (curve) N_CONFIGS = MAX_CONFIGS;
    pin = (const int[]){-1, 1, 0}[pin];
    if (access("bin/vindex", X_OK) || access("bin/expert-node", X_OK)) {
        fprintf(stderr, "bench_cluster: run from the repository root after `make`\n");
        return 2;
    }
    setenv("MOEWIRE_EXPERT_NODE", "bin/expert-node", 0);
    mkdir("build", 0755);
    mkdir(dir, 0755);
    int rc = 0;
    for (int l = 0; l < n_layers; l++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/gpt-oss-20bw-%dL.vindex", dir, layers[l]);
        if (make_model(path, layers[l]) ||
            bench_model(path, layers[l], n, rounds, steps, threads,
                        node_threads ? node_threads : threads, pin, affinity == 0))
            rc = 1;
    }
    return rc;
}
