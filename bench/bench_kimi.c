/* bench/bench_kimi.c — the kimi-k3 family at Kimi K3's widths: decode and prefill tok/s in process
 * and over a 2-node loopback cluster, side by side with llama.cpp's llama-bench on the same GGUF;
 * the wire's bytes and movement ratio with the latent MoE against the same shape without it; the
 * KDA delta rule's prefill in chunks against its token-by-token path; the bytes of state a slot
 * holds (KDA and convolution state, the latent attention's cache per position) against what
 * llama.cpp reports for the same file.
 *
 * The model (`vindex synth --arch kimi-k3`, random weights, in build/bench-models/ when absent):
 * hidden 7168, routed experts of input width 3584 (the latent) and ff 3072, top-16, one shared
 * expert of ff 3072 at the full width, 64 KDA heads of 128, latent attention with q_lora 1536,
 * kv_lora 512, nope 128 + pe 64, v 128, every fourth layer latent attention, attention residuals
 * every 2 layers (K3's 8 is more than these models' layers), SiTU — with fewer layers (default 4:
 * one dense lead of ff 27648, then MoE layers), fewer experts per layer (default 32 of 896) and a
 * smaller vocabulary (32768) so that it fits this machine; MXFP4 routed experts, Q8_0 dense
 * matrices, F32 norms, router and taps.
 *
 * Rounds alternate the runs (in process, loopback, llama-bench), each round starting one further
 * along; every figure is the best round, with the median of the rounds' ratios beside it (a shared
 * machine's bandwidth drifts from minute to minute). Decode: greedy steps after a prompt of
 * --prompt tokens, as llama-bench's -n after -d (its prefill: -p from an empty context).
 *
 * `bench_kimi --help` lists the options (the table in parse()); run it from the repository root.
 * LLAMA_BENCH in the environment names llama-bench when --llama-bench is not given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench_llama.h"
#include "bench/bench_synth.h"
#include "bench/bench_util.h"
#include "coordinator/co_remote.h"
#include "model/md_kda.h"
#include "model/md_kda_state.h"
#include "model/md_kv.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "model/md_sampler.h"
#include "vindex/vx_source.h"

/* Kimi K3's widths (docs/model.md, Kimi K3, says where each comes from) */
#define HIDDEN    7168
#define HEADS     64
#define KDA_DIM   128
#define Q_LORA    1536
#define KV_LORA   512
#define ROPE      64
#define NOPE      128
#define V_DIM     128
#define EXPERT_FF 3072
#define LATENT    3584
#define DENSE_FF  (9 * EXPERT_FF)
#define TOP_K     16
#define VOCAB     32768
#define ATTN_RES  2 /* layers per residual block (K3: 8 of 93; at most the layers here) */

#define MAX_ROUNDS 16

typedef struct opts {
    int layers, experts, threads, prompt, decode, rounds, scan_tokens, move_experts;
    const char *llama, *model, *dir;
} opts;

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.layers = 4,
                .experts = 32,
                .threads = 2,
                .prompt = 128,
                .decode = 32,
                .rounds = 3,
                .scan_tokens = 512,
                .move_experts = 16,
                .llama = getenv("LLAMA_BENCH"),
                .dir = "build/bench-models"};
    const bu_opt opt[] = {
        BU_OPT_IN("--layers", BU_INT, &o->layers, "4", "layers: one dense, then MoE layers", 2, 8),
        BU_OPT_IN("--experts", BU_INT, &o->experts, "32", "routed experts per layer", TOP_K, 896),
        BU_OPT_IN("--threads", BU_INT, &o->threads, "2", "threads of each side", 1, 4096),
        BU_OPT_IN("--prompt", BU_INT, &o->prompt, "128", "prompt tokens", 1, 1 << 20),
        BU_OPT_IN("--decode", BU_INT, &o->decode, "32", "greedy decode steps after it", 2, 1 << 20),
        BU_OPT_IN("--rounds", BU_INT, &o->rounds, "3", "rounds of the runs in turn", 1, MAX_ROUNDS),
        BU_OPT_IN("--scan-tokens", BU_INT, &o->scan_tokens, "512",
                  "positions of the KDA scan's chunked / token-by-token comparison", 16, 1 << 16),
        BU_OPT_IN("--move-experts", BU_INT, &o->move_experts, "16",
                  "routed experts of the latent / no-latent pair (2 layers) for the wire", TOP_K,
                  896),
        BU_OPT("--llama-bench", BU_STR, &o->llama, "PATH",
               "llama.cpp's llama-bench (default: $LLAMA_BENCH)"),
        BU_OPT("--model", BU_STR, &o->model, "PATH", "this GGUF file instead of the synthetic one"),
        BU_OPT("--dir", BU_STR, &o->dir, "DIR", "where the synthetic models are kept"),
    };
    const bu_cli cli = {"bench_kimi",
                        "The kimi-k3 family at Kimi K3's widths (fewer layers and experts): decode "
                        "and prefill tok/s\nin process and over a 2-node loopback cluster beside "
                        "llama-bench on the same file; the wire\nwith and without the latent MoE; "
                        "the KDA scan chunked and token by token; state bytes per\nslot beside "
                        "llama.cpp's. Run from the repository root.",
                        NULL,
                        NULL,
                        opt,
                        (int)(sizeof opt / sizeof opt[0])};
    return bu_args(argc, argv, &cli, NULL);
}

/* ---- the models ----------------------------------------------------------------------------- */

/* Bytes of a synthetic model: `layers` (one dense) with `experts` routed experts of width w. */
static double model_bytes(int layers, int experts, int w) {
    const double q8 = 34.0 / 32, xf = 17.0 / 32, D = (double)HEADS * KDA_DIM;
    const double kda = 4.0 * HIDDEN * D + 2.0 * D * KDA_DIM + D * HIDDEN;
    const double expert = 3.0 * w * EXPERT_FF;
    const double trunk = 3.0 * HIDDEN * EXPERT_FF + (w < HIDDEN ? 2.0 * HIDDEN * w : 0);
    return layers * kda * q8 + 3.0 * HIDDEN * DENSE_FF * q8 +
           (layers - 1) * (experts * expert * xf + trunk * q8) + 2.0 * VOCAB * HIDDEN * q8;
}

static int synthesize(const opts *o, const char *path, int layers, int experts, int latent) {
    const double need = model_bytes(layers, experts, latent ? latent : HIDDEN);
    if (bs_fits("bench_kimi", o->dir, need)) return -1;
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "bin/vindex synth --arch kimi-k3 --layers %d --hidden %d --heads %d --head-dim %d "
             "--rope-dim %d --v-dim %d --q-lora %d --kv-lora %d --kda-head-dim %d --experts %d "
             "--top-k %d --expert-ff %d --expert-latent %d --shared-experts 1 --dense-layers 1 "
             "--attn-res-block %d "
             "--dense-ff %d --vocab %d --expert-format mxfp4 --dense-format q8_0 --seed 3 "
             "--format gguf %s.tmp >&2 && mv %s.tmp %s",
             layers, HIDDEN, HEADS, NOPE, ROPE, V_DIM, Q_LORA, KV_LORA, KDA_DIM, experts, TOP_K,
             EXPERT_FF, latent, ATTN_RES, DENSE_FF, VOCAB, path, path, path);
    fprintf(stderr, "bench_kimi: synthesizing %s (%.1f GB, random weights)\n  %s\n", path,
            need / 1e9, cmd);
    return system(cmd) == 0 ? 0 : -1;
}

/* The GGUF file (synthesized into o->dir when absent) in path and the vindex the nodes mount,
 * extracted from it, in vx: 0, 1 on a failed extract, -1 when skipped. */
static int prepare(const opts *o, const char *given, int layers, int experts, int latent,
                   char *path, size_t path_len, char *vx, size_t vx_len) {
    if (given) {
        snprintf(path, path_len, "%s", given);
    } else {
        mkdir("build", 0755);
        mkdir(o->dir, 0755);
        snprintf(path, path_len, "%s/kimi-k3-w%d-l%d-%dL-%de-mxfp4.gguf", o->dir, HIDDEN, latent,
                 layers, experts);
        if (access(path, R_OK) && synthesize(o, path, layers, experts, latent)) return -1;
    }
    return bs_extract("bench_kimi", path, vx, vx_len);
}

/* ---- the sides --------------------------------------------------------------------------------
 */

/* The model with its dense weights pinned, the in-process backend on the GGUF file (local: true)
 * and a 2-node loopback cluster on the vindex. */
typedef struct sides {
    vx_source *src, *vsrc;
    md_model *m;
    md_expert_backend *local, *cluster;
    kn_pool *pool;
} sides;

static int open_sides(const opts *o, const char *path, const char *vx, bool local, sides *sd,
                      mw_err *e) {
    sd->pool = kn_pool_create(o->threads);
    vx_source_opts so = {.dense = true};
    if (vx_source_open(path, &so, &sd->src, e) || md_model_load(sd->src, &sd->m, e) ||
        md_model_pin_dense(sd->m, e))
        return -1;
    if (local && (md_local_backend_new(sd->src, &sd->m->cfg, sd->pool, &sd->local, e) ||
                  md_local_backend_pin(sd->local, e)))
        return -1;
    return bs_loopback2(vx, sd->m, o->threads, sd->pool, &sd->vsrc, &sd->cluster, e);
}

static void close_sides(sides *sd) {
    if (sd->cluster) sd->cluster->destroy(sd->cluster);
    if (sd->local) sd->local->destroy(sd->local);
    md_model_free(sd->m);
    vx_source_close(sd->src);
    vx_source_close(sd->vsrc);
    kn_pool_destroy(sd->pool);
    *sd = (sides){0};
}

/* ---- one run -------------------------------------------------------------------------------- */

typedef struct result {
    double prefill_tps, decode_tps;
    co_remote_summary wire; /* decode steps, cluster runs */
} result;

static int run_once(const opts *o, const md_model *m, md_expert_backend *be,
                    md_expert_backend *remote, kn_pool *pool, int prompt, result *r, mw_err *e) {
    md_ctx_params p = {.numerics = KN_NUM_Q8,
                       .pool = pool,
                       .experts = be,
                       .n_seq = 1,
                       .n_ctx = prompt + o->decode + 1,
                       .kv_type = KN_F16};
    md_ctx *c;
    if (md_ctx_new(m, &p, &c, e)) return -1;
    md_row *rows = malloc((size_t)prompt * sizeof *rows);
    float *logits = malloc((size_t)m->cfg.n_vocab * sizeof *logits);
    uint64_t s = 777;
    for (int i = 0; i < prompt; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        rows[i] = (md_row){0, i, (int32_t)((s >> 33) % (uint64_t)m->cfg.n_vocab), i == prompt - 1};
    }
    int rc = -1;
    double t0 = bu_now();
    if (md_forward(c, rows, prompt, logits, e)) goto out;
    r->prefill_tps = prompt / (bu_now() - t0);
    if (remote) co_remote_reset_stats(remote);
    int32_t tok = md_argmax(logits, m->cfg.n_vocab);
    t0 = bu_now();
    for (int k = 0; k < o->decode; k++) {
        md_row row = {0, prompt + k, tok, 1};
        if (md_forward(c, &row, 1, logits, e)) goto out;
        tok = md_argmax(logits, m->cfg.n_vocab);
    }
    r->decode_tps = o->decode / (bu_now() - t0);
    if (remote) r->wire = co_remote_summarize(remote);
    rc = 0;
out:
    free(rows);
    free(logits);
    md_ctx_free(c);
    return rc;
}

/* ---- the throughput rounds ---------------------------------------------------------------------
 */

enum { R_LOCAL, R_LOOP, R_LLAMA, R_COUNT };
static const char *const run_names[R_COUNT] = {"in-process", "loopback-2", "llama-bench"};

typedef struct rounds {
    result best[R_COUNT];
    double ratios[R_COUNT][2][MAX_ROUNDS];
    double med[R_COUNT][2];
    bool have_llama;
    bl_info info;
} rounds;

static void keep_best(result *best, const result *cur) {
    if (cur->decode_tps > best->decode_tps) {
        const double pre = best->prefill_tps;
        *best = *cur;
        if (pre > best->prefill_tps) best->prefill_tps = pre;
    } else if (cur->prefill_tps > best->prefill_tps) {
        best->prefill_tps = cur->prefill_tps;
    }
}

static int run_round(const opts *o, const char *path, sides *sd, int r, rounds *rs, mw_err *e) {
    result cur[R_COUNT] = {{0}};
    for (int q = 0; q < R_COUNT; q++) {
        const int k = (q + r) % R_COUNT;
        if (k == R_LLAMA) {
            if (rs->have_llama &&
                bl_prefill_decode(o->llama, path, o->threads, o->prompt, o->decode,
                                  &cur[k].prefill_tps, &cur[k].decode_tps,
                                  r == 0 ? &rs->info : NULL, "bench_kimi") != 0) {
                fprintf(stderr, "bench_kimi: llama-bench failed on %s: skipped\n", path);
                rs->have_llama = false;
            }
        } else if (run_once(o, sd->m, k == R_LOCAL ? sd->local : sd->cluster,
                            k == R_LOOP ? sd->cluster : NULL, sd->pool, o->prompt, &cur[k], e)) {
            return -1;
        }
        keep_best(&rs->best[k], &cur[k]);
    }
    for (int k = 0; k < R_LLAMA && rs->have_llama; k++) {
        rs->ratios[k][0][r] = cur[k].decode_tps / cur[R_LLAMA].decode_tps;
        rs->ratios[k][1][r] = cur[k].prefill_tps / cur[R_LLAMA].prefill_tps;
    }
    printf("   round %d: decode %.2f / %.2f / %.2f, prefill %.1f / %.1f / %.1f tok/s "
           "(in-process / loopback-2 / llama-bench)\n",
           r + 1, cur[0].decode_tps, cur[1].decode_tps, cur[2].decode_tps, cur[0].prefill_tps,
           cur[1].prefill_tps, cur[2].prefill_tps);
    fflush(stdout);
    return 0;
}

static void print_rounds(const rounds *rs) {
    printf("%-14s %10s %10s %16s %16s\n", "run", "decode/s", "prefill/s", "decode vs lc",
           "prefill vs lc");
    for (int k = 0; k < R_COUNT; k++) {
        if (k == R_LLAMA && !rs->have_llama) continue;
        const result *b = &rs->best[k], *l = &rs->best[R_LLAMA];
        printf("%-14s %10.2f %10.2f", run_names[k], b->decode_tps, b->prefill_tps);
        if (rs->have_llama && k != R_LLAMA)
            printf("    %5.2fx (%4.2f)    %5.2fx (%4.2f)\n", b->decode_tps / l->decode_tps,
                   rs->med[k][0], b->prefill_tps / l->prefill_tps, rs->med[k][1]);
        else
            printf("\n");
    }
    if (rs->have_llama)
        printf("   llama-bench: commit %s, flash attention %s, %s, read the model as %s\n",
               rs->info.commit, rs->info.flash_attn, rs->info.load, rs->info.model_type);
    else
        printf(
            "   llama-bench: not given or failed (--llama-bench PATH or LLAMA_BENCH): skipped\n");
}

/* A warm-up of our runs (untimed: it faults the pages in on every side), then the rounds. */
static int run_rounds(const opts *o, const char *path, sides *sd, rounds *rs, mw_err *e) {
    result warm;
    rs->have_llama = o->llama && access(o->llama, X_OK) == 0;
    if (run_once(o, sd->m, sd->local, NULL, sd->pool, o->prompt, &warm, e) ||
        run_once(o, sd->m, sd->cluster, sd->cluster, sd->pool, o->prompt, &warm, e))
        return -1;
    for (int r = 0; r < o->rounds; r++)
        if (run_round(o, path, sd, r, rs, e)) return -1;
    for (int k = 0; k < R_LLAMA && rs->have_llama; k++)
        for (int a = 0; a < 2; a++) rs->med[k][a] = bu_median(rs->ratios[k][a], o->rounds);
    print_rounds(rs);
    return 0;
}

/* ---- the KDA scan: chunked against token by token ---------------------------------------------
 */

typedef struct scan_bufs {
    float *q, *k, *v, *g, *beta, *out;
} scan_bufs;

/* Random inputs for T positions of one KDA layer: unit q and k per head, v, a log decay in
 * (-0.2, 0), beta in (0, 1). */
static void scan_inputs(const md_config *cfg, int64_t T, scan_bufs *b) {
    const int H = cfg->kda.n_head, d = cfg->kda.head_dim;
    const int64_t D = (int64_t)H * d;
    uint64_t s = 99;
#define RND()                                                                                      \
    (s = s * 6364136223846793005ULL + 1442695040888963407ULL,                                      \
     (double)(s >> 11) / 9007199254740992.0)
    for (int64_t i = 0; i < T * D; i++) {
        b->q[i] = (float)(RND() * 2 - 1), b->k[i] = (float)(RND() * 2 - 1);
        b->v[i] = (float)(RND() * 2 - 1), b->g[i] = (float)(-0.2 * RND());
    }
    for (int64_t i = 0; i < T * H; i++) b->beta[i] = (float)RND();
#undef RND
    md_kda_l2norm(b->q, T, H, d, 1e-6f);
    md_kda_l2norm(b->k, T, H, d, 1e-6f);
}

/* The scan of layer `layer` over T positions of one sequence, in passes of `step` positions
 * (T: one chunked pass; 1: token by token); seconds, outputs in b->out. */
static double scan_run(const md_config *cfg, int layer, int64_t T, int64_t step, scan_bufs *b,
                       kn_pool *pool, mw_err *e) {
    md_kv kv;
    md_kda_state st;
    if (md_kv_init(&kv, cfg, 1, T, true, KN_F32, e)) return -1;
    if (md_kda_state_init(&st, cfg, 1, e)) return md_kv_free(&kv), -1;
    md_row *rows = malloc((size_t)step * sizeof *rows);
    const int64_t D = (int64_t)cfg->kda.n_head * cfg->kda.head_dim;
    double t = -1, t0 = bu_now();
    for (int64_t p = 0; p < T; p += step) {
        const int64_t n = T - p < step ? T - p : step;
        for (int64_t i = 0; i < n; i++) rows[i] = (md_row){0, (int32_t)(p + i), 0, 0};
        if (md_kv_begin(&kv, rows, n, e) || md_kda_begin(&st, &kv, kn_pool_size(pool), e)) goto out;
        md_kda_scan(&st, layer, b->q + p * D, b->k + p * D, b->v + p * D, b->g + p * D,
                    b->beta + p * cfg->kda.n_head, b->out + p * D, pool);
        md_kda_commit(&st);
        md_kv_commit(&kv);
    }
    t = bu_now() - t0;
out:
    free(rows);
    md_kda_state_free(&st);
    md_kv_free(&kv);
    return t;
}

/* Best of alternated runs of both ways; whether they give the same bits. */
static int scan_bench(const opts *o, const md_model *m, kn_pool *pool, mw_err *e) {
    const md_config *cfg = &m->cfg;
    int layer = 0;
    while (layer < cfg->n_layer && !md_layer_is_kda(cfg, layer)) layer++;
    if (layer == cfg->n_layer) return printf("   KDA scan: the model has no KDA layer\n"), 0;
    const int64_t T = o->scan_tokens, D = (int64_t)cfg->kda.n_head * cfg->kda.head_dim;
    scan_bufs b;
    float **all[] = {&b.q, &b.k, &b.v, &b.g, &b.out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) *all[i] = malloc((size_t)(T * D) * 4);
    b.beta = malloc((size_t)(T * cfg->kda.n_head) * 4);
    float *ref = malloc((size_t)(T * D) * 4);
    scan_inputs(cfg, T, &b);
    double best[2] = {1e30, 1e30}, ratio[MAX_ROUNDS];
    bool same = true;
    int rc = 0;
    for (int r = 0; r < o->rounds && rc == 0; r++) {
        double t[2];
        for (int q = 0; q < 2 && rc == 0; q++) {
            const int w = (q + r) % 2; /* 0 chunked, 1 token by token */
            t[w] = scan_run(cfg, layer, T, w ? 1 : T, &b, pool, e);
            if (t[w] < 0) rc = -1;
            if (w == 0)
                memcpy(ref, b.out, (size_t)(T * D) * 4);
            else if (r || q)
                same = same && !memcmp(ref, b.out, (size_t)(T * D) * 4);
            if (t[w] < best[w]) best[w] = t[w];
        }
        ratio[r] = t[1] / t[0];
    }
    if (rc == 0) {
        const double med = bu_median(ratio, o->rounds);
        printf("   KDA scan (layer %d, %d heads × %d, %lld positions, chunks of %d): chunked %.0f "
               "tok/s, token by token %.0f tok/s: %.2fx (median %.2f); outputs %s\n",
               layer, cfg->kda.n_head, cfg->kda.head_dim, (long long)T, MD_KDA_CHUNK, T / best[0],
               T / best[1], best[1] / best[0], med, same ? "bit-identical" : "DIFFER");
        printf("{\"bench\":\"kimi_kda_scan\",\"tokens\":%lld,\"chunked_tok_s\":%.1f,"
               "\"token_by_token_tok_s\":%.1f,\"ratio\":%.3f,\"ratio_round_median\":%.3f,"
               "\"bit_identical\":%s}\n",
               (long long)T, T / best[0], T / best[1], best[1] / best[0], med,
               same ? "true" : "false");
    }
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(*all[i]);
    free(b.beta);
    free(ref);
    return rc;
}

/* ---- the wire: the latent MoE against the same shape without it -------------------------------
 */

typedef struct move {
    double wire_per_token, weight_per_token, ratio;
} move;

/* Decode steps of a 2-layer model (one dense, one MoE) of latent width `latent` (0: none) over
 * the loopback cluster. */
static int move_run(const opts *o, int latent, move *mv, mw_err *e) {
    char path[1024], vx[1100];
    const int prep = prepare(o, NULL, 2, o->move_experts, latent, path, sizeof path, vx, sizeof vx);
    if (prep) return prep < 0 ? 1 : -1;
    sides sd = {0};
    result r = {0};
    int rc = open_sides(o, path, vx, false, &sd, e) ||
                     run_once(o, sd.m, sd.cluster, sd.cluster, sd.pool, 16, &r, e)
                 ? -1
                 : 0;
    close_sides(&sd);
    if (rc) return -1;
    const double per = r.wire.tokens ? 1.0 / (double)r.wire.tokens : 0;
    *mv = (move){(double)(r.wire.total.tx_bytes + r.wire.total.rx_bytes) * per,
                 (double)r.wire.total.weight_bytes * per, wr_movement_ratio(&r.wire.total)};
    return 0;
}

static int move_bench(const opts *o, mw_err *e) {
    move with, without;
    int rc = move_run(o, LATENT, &with, e);
    if (rc == 0) rc = move_run(o, 0, &without, e);
    if (rc > 0) return printf("   wire: the pair of models was skipped\n"), 0;
    if (rc) return -1;
    printf("   wire (2 layers, %d experts, top-%d, f16 rows, decode): latent %d: %.0f bytes/token "
           "on the wire, %.0f expert weight bytes read, movement ratio %.3g; no latent (%d): "
           "%.0f, %.0f, %.3g; wire bytes %.3fx, movement ratio %.3fx of the no-latent model's\n",
           o->move_experts, TOP_K, LATENT, with.wire_per_token, with.weight_per_token, with.ratio,
           HIDDEN, without.wire_per_token, without.weight_per_token, without.ratio,
           with.wire_per_token / without.wire_per_token, with.ratio / without.ratio);
    printf("{\"bench\":\"kimi_wire\",\"experts\":%d,\"latent_wire_bytes_per_token\":%.0f,"
           "\"latent_weight_bytes_per_token\":%.0f,\"latent_movement_ratio\":%.4g,"
           "\"full_wire_bytes_per_token\":%.0f,\"full_weight_bytes_per_token\":%.0f,"
           "\"full_movement_ratio\":%.4g,\"wire_latent_vs_full\":%.4f}\n",
           o->move_experts, with.wire_per_token, with.weight_per_token, with.ratio,
           without.wire_per_token, without.weight_per_token, without.ratio,
           with.wire_per_token / without.wire_per_token);
    return 0;
}

/* ---- state per slot ------------------------------------------------------------------------- */

/* llama.cpp's own memory report at load (llama-bench -v on the same file, the same prompt): its
 * recurrent state per sequence (R and S) and its KV cache per cell, in bytes; 0 when absent. */
static int llama_memory(const opts *o, const char *path, double *rs_seq, double *kv_cell) {
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "'%s' -v -m '%s' -t %d -p %d -n 0 -r 1 -fa 1 -mmp 0 2>&1 >/dev/null",
             o->llama, path, o->threads, o->prompt);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    char line[1024];
    *rs_seq = *kv_cell = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p;
        double mib;
        unsigned cells, seqs;
        int layers;
        if ((p = strstr(line, "llama_memory_recurrent: size =")) &&
            sscanf(p, "llama_memory_recurrent: size = %lf MiB (%u cells, %d layers, %u seqs", &mib,
                   &cells, &layers, &seqs) == 4 &&
            seqs)
            *rs_seq = mib * 1048576.0 / seqs;
        else if ((p = strstr(line, "llama_kv_cache: size =")) &&
                 sscanf(p, "llama_kv_cache: size = %lf MiB (%u cells", &mib, &cells) == 2 && cells)
            *kv_cell = mib * 1048576.0 / cells;
    }
    return pclose(f) == 0 && (*rs_seq > 0 || *kv_cell > 0) ? 0 : -1;
}

static void state_report(const opts *o, const md_model *m, const char *path, bool have_llama) {
    const md_seq_cost f16 = md_seq_cost_of(&m->cfg, o->prompt, KN_F16);
    const md_seq_cost f32 = md_seq_cost_of(&m->cfg, o->prompt, KN_F32);
    double rs = 0, kv = 0;
    const bool lc = have_llama && llama_memory(o, path, &rs, &kv) == 0;
    printf("   state per slot: KDA + conv %.0f bytes (%d KDA layers, both banks and the open "
           "chunk), latent cache %llu bytes per position (f16; f32 %llu)",
           (double)f16.fixed, m->cfg.n_kda, (unsigned long long)f16.per_pos_full,
           (unsigned long long)f32.per_pos_full);
    if (lc)
        printf("; llama.cpp: recurrent %.0f bytes per sequence (%.2fx ours), KV %.0f bytes per "
               "cell (%.2fx ours)\n",
               rs, (double)f16.fixed / rs, kv, kv > 0 ? (double)f16.per_pos_full / kv : 0);
    else
        printf("; llama.cpp's report: skipped\n");
    printf("{\"bench\":\"kimi_state\",\"kda_conv_bytes\":%llu,\"cache_bytes_per_position\":%llu",
           (unsigned long long)f16.fixed, (unsigned long long)f16.per_pos_full);
    if (lc)
        printf(",\"llama_recurrent_bytes\":%.0f,\"llama_kv_bytes_per_cell\":%.0f,"
               "\"recurrent_vs_llama\":%.3f,\"cache_vs_llama\":%.3f",
               rs, kv, (double)f16.fixed / rs, kv > 0 ? (double)f16.per_pos_full / kv : 0);
    printf("}\n");
}

/* ---- the report ----------------------------------------------------------------------------- */

static void print_header(const opts *o) {
    printf("== bench_kimi: kimi-k3 at Kimi K3 widths (hidden %d, expert latent %d, expert ff %d, "
           "top-%d, one shared expert of ff %d; %d KDA heads of %d, latent attention q_lora %d, "
           "kv_lora %d, nope %d + pe %d, v %d, every 4th layer; attention residuals every %d); "
           "%d layers (1 dense, ff %d), %d experts per layer, vocab %d; MXFP4 experts, Q8_0 "
           "dense; %d threads; q8 numerics (ISA %s, %s)\n",
           HIDDEN, LATENT, EXPERT_FF, TOP_K, EXPERT_FF, HEADS, KDA_DIM, Q_LORA, KV_LORA, NOPE, ROPE,
           V_DIM, ATTN_RES, o->layers, DENSE_FF, o->experts, VOCAB, o->threads,
           kn_isa_name(kn_isa_active()), bu_cpu_name());
    printf("   prefill: %d-token prompt; decode: %d greedy steps after it; best of %d alternated "
           "rounds, (median of the rounds' ratios)\n",
           o->prompt, o->decode, o->rounds);
}

static void print_json(const opts *o, const rounds *rs) {
    const result *b = rs->best;
    printf("{\"bench\":\"kimi\",\"layers\":%d,\"experts\":%d,\"threads\":%d,\"prompt\":%d,"
           "\"decode\":%d,\"rounds\":%d,\"local_decode_tok_s\":%.3f,\"local_prefill_tok_s\":%.3f,"
           "\"loopback2_decode_tok_s\":%.3f,\"loopback2_prefill_tok_s\":%.3f",
           o->layers, o->experts, o->threads, o->prompt, o->decode, o->rounds,
           b[R_LOCAL].decode_tps, b[R_LOCAL].prefill_tps, b[R_LOOP].decode_tps,
           b[R_LOOP].prefill_tps);
    if (rs->have_llama)
        printf(",\"llama_decode_tok_s\":%.3f,\"llama_prefill_tok_s\":%.3f,"
               "\"local_vs_llama_decode\":%.3f,\"local_vs_llama_decode_round_median\":%.3f,"
               "\"loopback2_vs_llama_decode\":%.3f,\"local_vs_llama_prefill\":%.3f",
               b[R_LLAMA].decode_tps, b[R_LLAMA].prefill_tps,
               b[R_LOCAL].decode_tps / b[R_LLAMA].decode_tps, rs->med[R_LOCAL][0],
               b[R_LOOP].decode_tps / b[R_LLAMA].decode_tps,
               b[R_LOCAL].prefill_tps / b[R_LLAMA].prefill_tps);
    printf("}\n");
    fflush(stdout);
}

/* The main model's sections: the rounds, the KDA scan, the state per slot. */
static int main_model(const opts *o, mw_err *e) {
    char path[1024], vx[1100];
    const int prep =
        prepare(o, o->model, o->layers, o->experts, LATENT, path, sizeof path, vx, sizeof vx);
    if (prep) return prep < 0 ? 0 : prep;
    print_header(o);
    sides sd = {0};
    rounds *rs = calloc(1, sizeof *rs);
    int rc = open_sides(o, path, vx, true, &sd, e) || run_rounds(o, path, &sd, rs, e) ? 1 : 0;
    if (rc == 0) {
        print_json(o, rs);
        state_report(o, sd.m, path, rs->have_llama);
        rc = scan_bench(o, sd.m, sd.pool, e) ? 1 : 0;
    }
    close_sides(&sd);
    free(rs);
    return rc;
}

int main(int argc, char **argv) {
    opts o;
    const int status = parse(argc, argv, &o);
    if (status != BU_RUN) return status;
    if (access("bin/vindex", X_OK) || access("bin/expert-node", X_OK)) {
        fprintf(stderr, "bench_kimi: run from the repository root after make: skipped\n");
        return 0;
    }
    setenv("MOEWIRE_EXPERT_NODE", "bin/expert-node", 0); /* the loopback nodes */
    mw_err e = {{0}};
    int rc = main_model(&o, &e);
    if (rc == 0 && !o.model) rc = move_bench(&o, &e) ? 1 : 0;
    if (rc) fprintf(stderr, "bench_kimi: %s\n", e.msg);
    return rc;
}
