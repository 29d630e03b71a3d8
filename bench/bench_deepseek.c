/* bench/bench_deepseek.c — the deepseek2 family at DeepSeek-V3's widths: decode and prefill tok/s
 * in process and over a 2-node loopback cluster, side by side with llama.cpp's llama-bench on the
 * same GGUF file; the weight bytes a decode step reads in process and their rate against the read
 * bandwidth measured at the start on the same threads (the decode's fraction of the bound); the
 * latent KV cache's bytes per position; the shared expert's overlap with the routed experts'
 * exchange; wire bytes and the movement ratio.
 *
 * The model (`vindex synth --arch deepseek2`, random weights, in build/bench-models/ when absent):
 * hidden 7168, 128 heads, q_lora 1536, kv_lora 512, rope 64, nope 128, v 128, expert ff 2048, top-8
 * in 8 groups keeping 4, one shared expert, YaRN ×40 — DeepSeek-V3's — with fewer layers (default
 * 4: one dense layer of ff 18432, then MoE layers), fewer experts per layer (default 32 of 256) and
 * a smaller vocabulary (32768 of 129280) so that it fits this machine's memory; MXFP4 (or Q6_K)
 * routed experts, Q8_0 dense matrices (attn_k_b / attn_v_b included), F32 norms and router.
 *
 * Rounds alternate the runs (in process, loopback overlapped, loopback serial, llama-bench), each
 * starting one further along, and every figure is the best round with the median of the rounds'
 * ratios beside it (a shared machine's bandwidth drifts from minute to minute). Decode: greedy
 * steps after a prompt of --prompt tokens, as llama-bench's -n after -d (its prefill: -p from an
 * empty context). The "serial" cluster runs the routed experts whole before the shared expert (a
 * backend without the submit / wait halves): its MoE step is exchange + shared; overlapped, the
 * shared expert runs while the batches are out, so the step approaches max(exchange, shared). On
 * one machine the nodes and the coordinator share the cores, so the overlap here is smaller than
 * across machines.
 *
 * `bench_deepseek --help` lists the options (the table in parse()); run it from the repository
 * root. LLAMA_BENCH in the environment names llama-bench when --llama-bench is not given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench_llama.h"
#include "bench/bench_synth.h"
#include "bench/bench_util.h"
#include "coordinator/co_remote.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "model/md_sampler.h"
#include "vindex/vx_source.h"

/* DeepSeek-V3's widths */
#define HIDDEN    7168
#define HEADS     128
#define Q_LORA    1536
#define KV_LORA   512
#define ROPE      64
#define NOPE      128
#define V_DIM     128
#define EXPERT_FF 2048
#define DENSE_FF  18432
#define TOP_K     8
#define GROUPS    8
#define GROUPS_K  4
#define VOCAB     32768

#define MAX_ROUNDS 16

typedef struct opts {
    int layers, experts, threads, prompt, decode, rounds;
    const char *format, *llama, *model, *dir;
} opts;

static const char *const FORMATS[] = {"mxfp4", "q6_K"};

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.layers = 4,
                .experts = 32,
                .threads = 2,
                .prompt = 128,
                .decode = 32,
                .rounds = 3,
                .llama = getenv("LLAMA_BENCH"),
                .dir = "build/bench-models"};
    int format = 0;
    const bu_opt opt[] = {
        BU_OPT_IN("--layers", BU_INT, &o->layers, "4", "layers: one dense, then MoE layers", 2, 61),
        BU_OPT_IN("--experts", BU_INT, &o->experts, "32", "routed experts per layer (8 groups)",
                  GROUPS * 2, 256),
        BU_OPT("--expert-format", BU_CHOICE, &format, "mxfp4|q6_K", "the routed experts' format"),
        BU_OPT_IN("--threads", BU_INT, &o->threads, "2", "threads of each side", 1, 4096),
        BU_OPT_IN("--prompt", BU_INT, &o->prompt, "128", "prompt tokens", 1, 1 << 20),
        BU_OPT_IN("--decode", BU_INT, &o->decode, "32", "greedy decode steps after it", 2, 1 << 20),
        BU_OPT_IN("--rounds", BU_INT, &o->rounds, "3", "rounds of the runs in turn", 1, MAX_ROUNDS),
        BU_OPT("--llama-bench", BU_STR, &o->llama, "PATH",
               "llama.cpp's llama-bench (default: $LLAMA_BENCH)"),
        BU_OPT("--model", BU_STR, &o->model, "PATH", "this GGUF file instead of the synthetic one"),
        BU_OPT("--dir", BU_STR, &o->dir, "DIR", "where the synthetic model is kept"),
    };
    const bu_cli cli = {"bench_deepseek",
                        "The deepseek2 family at DeepSeek-V3's widths (fewer layers and experts): "
                        "decode and prefill tok/s\nin process and over a 2-node loopback cluster, "
                        "beside llama-bench on the same file. Run from the\nrepository root.",
                        NULL,
                        NULL,
                        opt,
                        (int)(sizeof opt / sizeof opt[0])};
    const int rc = bu_args(argc, argv, &cli, NULL);
    if (rc != BU_RUN) return rc;
    o->format = FORMATS[format];
    if (o->experts % GROUPS)
        return fprintf(stderr, "bench_deepseek: --experts must be a multiple of %d\n", GROUPS), 2;
    return BU_RUN;
}

/* ---- the model ------------------------------------------------------------------------------ */

static double model_bytes(const opts *o) {
    const double q8 = 34.0 / 32, xf = strcmp(o->format, "mxfp4") ? 210.0 / 256 : 17.0 / 32;
    const double attn = (double)HIDDEN * Q_LORA + (double)Q_LORA * HEADS * (NOPE + ROPE) +
                        (double)HIDDEN * (KV_LORA + ROPE) + 2.0 * HEADS * KV_LORA * NOPE +
                        (double)HEADS * V_DIM * HIDDEN;
    const double expert = 3.0 * HIDDEN * EXPERT_FF;
    return o->layers * attn * q8 + 3.0 * HIDDEN * DENSE_FF * q8 +
           (o->layers - 1) * (o->experts * expert * xf + expert * q8) + 2.0 * VOCAB * HIDDEN * q8;
}

static int synthesize(const opts *o, const char *path) {
    const double need = model_bytes(o);
    if (bs_fits("bench_deepseek", o->dir, need)) return -1;
    char cmd[2048];
    snprintf(
        cmd, sizeof cmd,
        "bin/vindex synth --arch deepseek2 --layers %d --hidden %d --heads %d --head-dim %d "
        "--rope-dim %d --v-dim %d --q-lora %d --kv-lora %d --experts %d --top-k %d --groups %d "
        "--groups-used %d --expert-ff %d --shared-experts 1 --dense-layers 1 --dense-ff %d "
        "--vocab %d --expert-format %s --dense-format q8_0 --seed 3 --format gguf %s.tmp >&2 "
        "&& mv %s.tmp %s",
        o->layers, HIDDEN, HEADS, NOPE, ROPE, V_DIM, Q_LORA, KV_LORA, o->experts, TOP_K, GROUPS,
        GROUPS_K, EXPERT_FF, DENSE_FF, VOCAB, o->format, path, path, path);
    fprintf(stderr, "bench_deepseek: synthesizing %s (%.1f GB, random weights)\n  %s\n", path,
            need / 1e9, cmd);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- one run -------------------------------------------------------------------------------- */

/* The cluster without its halves: md_expert_submit then runs the whole exchange before the shared
 * expert (the serial reference). */
typedef struct whole {
    md_expert_backend be;
    md_expert_backend *inner;
} whole;

static int whole_run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    md_expert_backend *in = ((whole *)b->impl)->inner;
    return in->run(in, batch, out, err);
}

typedef struct result {
    double prefill_tps, decode_tps;
    double bytes_per_token; /* weights read per decode step: dense here, experts by the backend */
    md_moe_timing t;        /* decode steps */
    /* in process: the read passes between the decode steps, their median GB/s, and the median
     * over the steps of a step's GB/s over the mean of the passes around it */
    double pass_gbs, frac_pass;
    uint64_t kv_bytes;
    co_remote_summary wire; /* decode steps, cluster runs */
} result;

/* One prefill and `decode` greedy steps; with a reader, a read pass before the first step and
 * after each (tok/s is then over the steps' own time). */
static int run_once(const opts *o, const md_model *m, md_expert_backend *be,
                    md_expert_backend *remote, kn_pool *pool, bu_reader *reader, result *r,
                    mw_err *e) {
    md_ctx_params p = {.numerics = KN_NUM_Q8,
                       .pool = pool,
                       .experts = be,
                       .n_seq = 1,
                       .n_ctx = o->prompt + o->decode + 1};
    md_ctx *c;
    if (md_ctx_new(m, &p, &c, e)) return -1;
    md_row *rows = malloc((size_t)o->prompt * sizeof *rows);
    float *logits = malloc((size_t)m->cfg.n_vocab * sizeof *logits);
    double *steps = malloc((size_t)o->decode * sizeof *steps);
    double *pass = malloc((size_t)(o->decode + 1) * sizeof *pass);
    int rc = -1;
    if (!rows || !logits || !steps || !pass) {
        mw_errf(e, "out of memory");
        goto out;
    }
    uint64_t s = 777;
    for (int i = 0; i < o->prompt; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        rows[i] =
            (md_row){0, i, (int32_t)((s >> 33) % (uint64_t)m->cfg.n_vocab), i == o->prompt - 1};
    }
    double t0 = bu_now();
    if (md_forward(c, rows, o->prompt, logits, e)) goto out;
    r->prefill_tps = o->prompt / (bu_now() - t0);
    md_ctx_reset_moe_timing(c);
    if (remote) co_remote_reset_stats(remote);
    int32_t tok = md_argmax(logits, m->cfg.n_vocab);
    const uint64_t d0 = md_ctx_dense_bytes(c), w0 = remote ? 0 : md_local_backend_weight_bytes(be);
    pass[0] = reader ? bu_reader_pass(reader) : 0;
    double in_steps = 0;
    for (int k = 0; k < o->decode; k++) {
        md_row row = {0, o->prompt + k, tok, 1};
        t0 = bu_now();
        if (md_forward(c, &row, 1, logits, e)) goto out;
        tok = md_argmax(logits, m->cfg.n_vocab);
        in_steps += steps[k] = bu_now() - t0;
        pass[k + 1] = reader ? bu_reader_pass(reader) : 0;
    }
    r->decode_tps = o->decode / in_steps;
    if (!remote) /* the cluster's expert bytes are the nodes' (the wire summary counts them) */
        r->bytes_per_token =
            (double)(md_ctx_dense_bytes(c) - d0 + md_local_backend_weight_bytes(be) - w0) /
            o->decode;
    if (reader) {
        r->frac_pass = bu_pass_fraction(r->bytes_per_token, steps, pass, o->decode);
        r->pass_gbs = bu_median(pass, o->decode + 1);
    }
    r->t = md_ctx_moe_timing(c);
    r->kv_bytes = md_ctx_kv_bytes(c);
    if (remote) r->wire = co_remote_summarize(remote);
    rc = 0;
out:
    free(rows);
    free(logits);
    free(steps);
    free(pass);
    md_ctx_free(c);
    return rc;
}

/* ---- the report ----------------------------------------------------------------------------- */

enum { R_LOCAL, R_OVERLAP, R_SERIAL, R_LLAMA, R_COUNT };
static const char *const run_names[R_COUNT] = {"in-process", "loopback-2 overlapped",
                                               "loopback-2 serial", "llama-bench"};

static double per_layer_us(uint64_t ns, const md_moe_timing *t) {
    return t->layers ? (double)ns / 1e3 / (double)t->layers : 0;
}

static void report(const opts *o, const result best[R_COUNT], double ratio_med[R_COUNT][2],
                   int have_llama, double bw_gbs) {
    printf("%-24s %10s %10s %12s %12s\n", "run", "decode/s", "prefill/s", "decode vs lc",
           "prefill vs lc");
    for (int k = 0; k < R_COUNT; k++) {
        if (k == R_LLAMA && !have_llama) continue;
        printf("%-24s %10.2f %10.2f", run_names[k], best[k].decode_tps, best[k].prefill_tps);
        if (have_llama && k != R_LLAMA)
            printf(" %5.2fx (%4.2f) %5.2fx (%4.2f)\n",
                   best[k].decode_tps / best[R_LLAMA].decode_tps, ratio_med[k][0],
                   best[k].prefill_tps / best[R_LLAMA].prefill_tps, ratio_med[k][1]);
        else
            printf("\n");
    }
    if (!have_llama)
        printf("   llama-bench: not given (--llama-bench PATH or LLAMA_BENCH): skipped\n");
    const md_moe_timing *ov = &best[R_OVERLAP].t, *se = &best[R_SERIAL].t;
    const double exch = per_layer_us(se->submit_ns, se), shared = per_layer_us(se->shared_ns, se);
    const double moe_ov = per_layer_us(ov->submit_ns + ov->shared_ns + ov->wait_ns, ov);
    const double larger = exch > shared ? exch : shared;
    printf(
        "   MoE step per layer (decode, us): serial = exchange %.0f + shared expert %.0f = %.0f; "
        "overlapped %.0f (submit %.0f, shared %.0f, wait %.0f) = %.2f x max(exchange, shared), "
        "%.2f x their sum\n",
        exch, shared, exch + shared, moe_ov, per_layer_us(ov->submit_ns, ov),
        per_layer_us(ov->shared_ns, ov), per_layer_us(ov->wait_ns, ov), moe_ov / larger,
        moe_ov / (exch + shared));
    /* in process every weight byte is read here: its rate against the probe's */
    const result *lo = &best[R_LOCAL];
    const double gbs = lo->bytes_per_token * lo->decode_tps / 1e9;
    const double frac = bw_gbs > 0 ? gbs / bw_gbs : 0;
    printf("   in process: %.1f MB of weights per decode step x %.2f tok/s = %.1f GB/s, %.0f%% of "
           "the read bandwidth (%.1f GB/s on %d thread(s), the probe's best in the run); %.0f%% "
           "of the read passes between its steps (median %.1f GB/s; per step against the passes "
           "around it, the median)\n",
           lo->bytes_per_token / 1e6, lo->decode_tps, gbs, 100 * frac, bw_gbs, o->threads,
           100 * lo->frac_pass, lo->pass_gbs);
    const co_remote_summary *w = &best[R_OVERLAP].wire;
    const double per = w->tokens ? 1.0 / (double)w->tokens : 0;
    const double kv_pos = (double)(KV_LORA + ROPE) * 4 * o->layers;
    printf("   KV cache: %.0f bytes per position (%d layers × (kv_lora %d + rope %d) f32; "
           "llama.cpp's F16 cache: %.0f); the context held %.1f MB\n",
           kv_pos, o->layers, KV_LORA, ROPE, kv_pos / 2, (double)best[R_LOCAL].kv_bytes / 1e6);
    printf("   wire: %.0f bytes/token, expert weights read %.0f bytes/token, movement ratio %.3g\n",
           (double)(w->total.tx_bytes + w->total.rx_bytes) * per,
           (double)w->total.weight_bytes * per, wr_movement_ratio(&w->total));
    printf("{\"bench\":\"deepseek\",\"layers\":%d,\"experts\":%d,\"expert_format\":\"%s\","
           "\"threads\":%d,\"prompt\":%d,\"decode\":%d,\"rounds\":%d",
           o->layers, o->experts, o->format, o->threads, o->prompt, o->decode, o->rounds);
    static const char *const keys[R_COUNT] = {"local", "loopback2", "loopback2_serial", "llama"};
    for (int k = 0; k < R_COUNT; k++)
        if (k != R_LLAMA || have_llama)
            printf(",\"%s_decode_tok_s\":%.3f,\"%s_prefill_tok_s\":%.3f", keys[k],
                   best[k].decode_tps, keys[k], best[k].prefill_tps);
    if (have_llama)
        printf(",\"local_vs_llama_decode\":%.3f,\"local_vs_llama_decode_round_median\":%.3f,"
               "\"loopback2_vs_llama_decode\":%.3f",
               best[R_LOCAL].decode_tps / best[R_LLAMA].decode_tps, ratio_med[R_LOCAL][0],
               best[R_OVERLAP].decode_tps / best[R_LLAMA].decode_tps);
    printf(",\"bytes_per_token\":%.0f,\"read_bw_gbps\":%.2f,\"bandwidth_fraction\":%.3f,"
           "\"pass_gb_s\":%.2f,\"bandwidth_fraction_pass\":%.3f",
           lo->bytes_per_token, bw_gbs, frac, lo->pass_gbs, lo->frac_pass);
    printf(",\"kv_bytes_per_position\":%.0f,\"exchange_us\":%.1f,\"shared_us\":%.1f,"
           "\"moe_overlapped_us\":%.1f,\"overlap_vs_max\":%.3f,\"wire_bytes_per_token\":%.0f,"
           "\"movement_ratio\":%.4g}\n",
           kv_pos, exch, shared, moe_ov, moe_ov / larger,
           (double)(w->total.tx_bytes + w->total.rx_bytes) * per, wr_movement_ratio(&w->total));
    fflush(stdout);
}

/* ---- the sides and the rounds ---------------------------------------------------------------- */

/* What the rounds compare: the model, the in-process backend, the loopback cluster and the serial
 * view of it, and llama-bench when it runs. */
typedef struct sides {
    vx_source *src, *vsrc;
    md_model *m;
    md_expert_backend *local, *cluster;
    whole serial;
    kn_pool *pool;
    bu_reader *reader; /* the in-process run's read passes */
    int have_llama;
    bl_info info;
    double bw; /* GB/s the read probe reaches on o->threads threads (start and end of the run) */
} sides;

/* The GGUF file (o->model, or synthesized into o->dir when absent) in path and the vindex the
 * nodes mount, extracted from it, in vx: 0, 1 on a failed extract, -1 when skipped. */
static int prepare_model(const opts *o, char *path, size_t path_len, char *vx, size_t vx_len) {
    if (o->model) {
        snprintf(path, path_len, "%s", o->model);
    } else {
        mkdir("build", 0755);
        mkdir(o->dir, 0755);
        snprintf(path, path_len, "%s/deepseek2-v3w-%dL-%de-%s.gguf", o->dir, o->layers, o->experts,
                 o->format);
        if (access(path, R_OK) && synthesize(o, path)) return -1;
    }
    return bs_extract("bench_deepseek", path, vx, vx_len);
}

static void print_header(const opts *o) {
    printf(
        "== bench_deepseek: deepseek2 at DeepSeek-V3 widths (hidden %d, %d heads, q_lora %d, "
        "kv_lora %d, rope %d, nope %d, v %d, expert ff %d, top-%d in %d groups keeping %d, one "
        "shared expert); %d layers (1 dense, ff %d), %d experts per layer, vocab %d; %s experts, "
        "Q8_0 dense; %d threads; q8 numerics (ISA %s, %s)\n",
        HIDDEN, HEADS, Q_LORA, KV_LORA, ROPE, NOPE, V_DIM, EXPERT_FF, TOP_K, GROUPS, GROUPS_K,
        o->layers, DENSE_FF, o->experts, VOCAB, o->format, o->threads, kn_isa_name(kn_isa_active()),
        bu_cpu_name());
    printf("   prefill: %d-token prompt; decode: %d greedy steps after it; best of %d alternated "
           "rounds, (median of the rounds' ratios)\n",
           o->prompt, o->decode, o->rounds);
}

/* The model with its dense weights pinned, the in-process backend on the GGUF file, and a 2-node
 * loopback cluster on the vindex. */
static int open_sides(const opts *o, const char *path, const char *vx, sides *sd, mw_err *e) {
    sd->pool = kn_pool_create(o->threads);
    sd->reader = bu_reader_new((size_t)512 << 20, sd->pool);
    if (!sd->reader) return mw_errf(e, "out of memory for the read passes"), -1;
    vx_source_opts so = {.dense = true};
    if (vx_source_open(path, &so, &sd->src, e) || md_model_load(sd->src, &sd->m, e) ||
        md_local_backend_new(sd->src, &sd->m->cfg, sd->pool, &sd->local, e) ||
        md_model_pin_dense(sd->m, e) || md_local_backend_pin(sd->local, e))
        return -1;
    if (bs_loopback2(vx, sd->m, o->threads, sd->pool, &sd->vsrc, &sd->cluster, e)) return -1;
    sd->serial = (whole){.be = {.name = "remote-serial", .run = whole_run}, .inner = sd->cluster};
    sd->serial.be.impl = &sd->serial;
    return 0;
}

static void close_sides(sides *sd) {
    if (sd->cluster) sd->cluster->destroy(sd->cluster);
    if (sd->local) sd->local->destroy(sd->local);
    md_model_free(sd->m);
    vx_source_close(sd->src);
    vx_source_close(sd->vsrc);
    bu_reader_free(sd->reader);
    kn_pool_destroy(sd->pool);
}

/* One of our runs (in process, overlapped or serial cluster). */
static int run_side(const opts *o, sides *sd, int k, result *r, mw_err *e) {
    md_expert_backend *be[R_LLAMA] = {sd->local, sd->cluster, &sd->serial.be};
    return run_once(o, sd->m, be[k], k ? sd->cluster : NULL, sd->pool, k ? NULL : sd->reader, r, e);
}

/* A run's best decode keeps its figures; the best prefill of any round is kept beside it. */
static void keep_best(result *best, const result *cur) {
    if (cur->decode_tps > best->decode_tps) {
        const double pre = best->prefill_tps;
        *best = *cur;
        if (pre > best->prefill_tps) best->prefill_tps = pre;
    } else if (cur->prefill_tps > best->prefill_tps) {
        best->prefill_tps = cur->prefill_tps;
    }
}

/* One round, each run in turn starting r further along; ratios[k][0|1][r] against llama-bench. */
static int run_round(const opts *o, const char *path, sides *sd, int r, result best[R_COUNT],
                     double ratios[R_COUNT][2][MAX_ROUNDS], mw_err *e) {
    result cur[R_COUNT] = {{0}};
    for (int q = 0; q < R_COUNT; q++) {
        const int k = (q + r) % R_COUNT;
        if (k == R_LLAMA) {
            if (sd->have_llama &&
                bl_prefill_decode(o->llama, path, o->threads, o->prompt, o->decode,
                                  &cur[k].prefill_tps, &cur[k].decode_tps,
                                  r == 0 ? &sd->info : NULL, "bench_deepseek") != 0) {
                fprintf(stderr, "bench_deepseek: llama-bench failed on %s: skipped\n", path);
                sd->have_llama = 0;
            }
        } else if (run_side(o, sd, k, &cur[k], e)) {
            return -1;
        }
        keep_best(&best[k], &cur[k]);
    }
    for (int k = 0; k < R_LLAMA && sd->have_llama; k++) {
        ratios[k][0][r] = cur[k].decode_tps / cur[R_LLAMA].decode_tps;
        ratios[k][1][r] = cur[k].prefill_tps / cur[R_LLAMA].prefill_tps;
    }
    printf("   round %d: decode %.2f / %.2f / %.2f / %.2f, prefill %.1f / %.1f / %.1f / %.1f "
           "tok/s (in-process / overlapped / serial / llama-bench)\n",
           r + 1, cur[0].decode_tps, cur[1].decode_tps, cur[2].decode_tps, cur[3].decode_tps,
           cur[0].prefill_tps, cur[1].prefill_tps, cur[2].prefill_tps, cur[3].prefill_tps);
    fflush(stdout);
    return 0;
}

/* A warm-up of our runs (untimed: it faults the pages in on every side), the rounds, the report. */
static int run_rounds(const opts *o, const char *path, sides *sd, mw_err *e) {
    result best[R_COUNT] = {{0}}, warm;
    double ratios[R_COUNT][2][MAX_ROUNDS] = {{{0}}}, med[R_COUNT][2] = {{0}};
    sd->have_llama = o->llama && access(o->llama, X_OK) == 0;
    memset(&sd->info, 0, sizeof sd->info);
    for (int k = 0; k < R_LLAMA; k++)
        if (run_side(o, sd, k, &warm, e)) return -1;
    const int rounds = o->rounds;
    for (int r = 0; r < rounds; r++)
        if (run_round(o, path, sd, r, best, ratios, e)) return -1;
    for (int k = 0; k < R_LLAMA && sd->have_llama; k++)
        for (int a = 0; a < 2; a++) med[k][a] = bu_median(ratios[k][a], rounds);
    if (sd->have_llama)
        printf("   llama-bench: commit %s, flash attention %s, %s, read the model as %s\n",
               sd->info.commit, sd->info.flash_attn, sd->info.load, sd->info.model_type);
    /* the probe again: the machine's ceiling is the best it reached in the run (on a VM it moves
     * by half from minute to minute), never a bad moment's */
    double bw_end = bu_read_bandwidth((size_t)1 << 30, o->threads, 3);
    /* what one thread reads, more can (the others may idle), though a probe on more threads can
     * come out lower (a neighbour's traffic, vCPUs sharing a core) */
    const double bw_one = o->threads > 1 ? bu_read_bandwidth((size_t)1 << 30, 1, 3) : 0;
    if (bw_one > bw_end) bw_end = bw_one;
    printf("   read bandwidth after the rounds, %d thread(s) or one: %.1f GB/s (at the start %.1f; "
           "the fraction below: against the larger)\n",
           o->threads, bw_end, sd->bw);
    if (bw_end > sd->bw) sd->bw = bw_end;
    report(o, best, med, sd->have_llama, sd->bw);
    return 0;
}

int main(int argc, char **argv) {
    opts o;
    const int status = parse(argc, argv, &o);
    if (status != BU_RUN) return status;
    if (access("bin/vindex", X_OK) || access("bin/expert-node", X_OK)) {
        fprintf(stderr, "bench_deepseek: run from the repository root after make: skipped\n");
        return 0;
    }
    setenv("MOEWIRE_EXPERT_NODE", "bin/expert-node", 0); /* the loopback nodes */
    char path[1024], vx[1100];
    const int prep = prepare_model(&o, path, sizeof path, vx, sizeof vx);
    if (prep) return prep < 0 ? 0 : prep;
    print_header(&o);
    mw_err e = {{0}};
    sides sd = {0};
    sd.bw = bu_read_bandwidth((size_t)1 << 30, o.threads, 3);
    printf("   read bandwidth, %d thread(s): %.1f GB/s (measured now)\n", o.threads, sd.bw);
    const int rc = open_sides(&o, path, vx, &sd, &e) || run_rounds(&o, path, &sd, &e) ? 1 : 0;
    if (rc) fprintf(stderr, "bench_deepseek: %s\n", e.msg);
    close_sides(&sd);
    return rc;
}
