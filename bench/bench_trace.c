/* bench/bench_trace.c — what `--trace-routing` costs: (1) the writer alone, per decode step of a
 * Kimi-K3-shaped model (92 MoE layers, 896 experts, top-16) and of a 64-row batch, in ns per step
 * and MB/s handed to it; (2) greedy decode tok/s of a model in process with and without the trace,
 * the two taking turns round after round, and the ratio of each round. The default model is a
 * small many-layer one (vindex synth, random weights) whose steps are fast, so the writer's share
 * is as large as it gets; --model measures another. `bench_trace --help` lists the options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "kernels/kn.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "model/md_sampler.h"
#include "vindex/vx_source.h"
#include "vindex/vx_trace.h"

#define MAX_ROUNDS 64

typedef struct opts {
    const char *model, *dir, *vindex_bin;
    int decode, rounds, threads, steps;
} opts;

static const char ABOUT[] =
    "The routing trace's cost: the writer per step of a K3-shaped model, and decode tok/s in\n"
    "process with and without --trace-routing, taking turns.";

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.dir = "build/bench-models",
                .vindex_bin = "bin/vindex",
                .decode = 64,
                .rounds = 11,
                .threads = 1,
                .steps = 5000};
    const bu_opt opt[] = {
        BU_OPT("--model", BU_STR, &o->model, "PATH", "decode this model (default: a synth one)"),
        BU_OPT("--dir", BU_STR, &o->dir, "DIR", "where the synthetic model is kept"),
        BU_OPT("--vindex", BU_STR, &o->vindex_bin, "PATH", "the vindex program (bin/vindex)"),
        BU_OPT_IN("--decode", BU_INT, &o->decode, "64", "decode steps per round", 2, 1 << 20),
        BU_OPT_IN("--rounds", BU_INT, &o->rounds, "11", "rounds of each side", 1, MAX_ROUNDS),
        BU_OPT_IN("--threads", BU_INT, &o->threads, "1", "threads of the forward pass", 1, 256),
        BU_OPT_IN("--steps", BU_INT, &o->steps, "5000", "writer-only steps timed", 100, 6000),
    };
    const bu_cli cli = {"bench_trace", ABOUT, NULL, NULL, opt, (int)(sizeof opt / sizeof opt[0])};
    return bu_args(argc, argv, &cli, NULL);
}

/* ---- the writer alone ----------------------------------------------------------------------- */

/* This thread's CPU time: what the decode thread spends in the writer, whoever else runs. */
static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void writer_only(const opts *o, int T) {
    enum { L = 92, E = 896, K = 16 };
    vx_trace_info info = {.n_layer = L, .n_expert = E, .k = K};
    memset(info.fingerprint, '0', 64);
    snprintf(info.family, sizeof info.family, "kimi-k3");
    int32_t *rows = calloc((size_t)T * 3, sizeof *rows), *ids = malloc((size_t)T * K * 4);
    float *w = malloc((size_t)T * K * sizeof *w);
    for (int i = 0; i < T * K; i++) ids[i] = (i * 37) % E, w[i] = 1.0f / K;
    char path[256];
    snprintf(path, sizeof path, "/tmp/bench_trace-%d.trace", (int)getpid());
    vx_trace_writer *wr;
    mw_err err;
    if (vx_trace_create(path, &info, (size_t)128 << 20, &wr, &err)) {
        fprintf(stderr, "bench_trace: %s\n", err.msg);
        return;
    }
    /* within the ring (128 MiB): what a decode step pays, not what dropping costs */
    const int steps = T == 1 ? o->steps : o->steps / 50 + 1;
    double t0 = bu_now(), c0 = thread_cpu_s();
    for (int s = 0; s < steps; s++) {
        vx_trace_step(wr, T, rows, rows + 1, rows + 2, 3);
        for (int l = 0; l < L; l++) vx_trace_layer(wr, l, T, K, ids, w);
    }
    double dt = thread_cpu_s() - c0;
    vx_trace_counts c;
    if (vx_trace_finish(wr, &c, &err)) fprintf(stderr, "bench_trace: %s\n", err.msg);
    double total = bu_now() - t0; /* the drain thread's too: its checksum and the disk */
    unlink(path);
    printf("writer, K3 shape (92 layers, 896 experts, top-16), %d row(s) per step: %.0f ns of the "
           "decode thread's CPU per step (%.0f MB/s handed over); %.1f MB on disk %.2f s after the "
           "first step (%.0f "
           "MB/s), %llu record(s) dropped\n",
           T, dt / steps * 1e9, (double)c.body_bytes / dt / 1e6, (double)c.body_bytes / 1e6, total,
           (double)c.body_bytes / total / 1e6, (unsigned long long)c.dropped);
    printf("{\"bench\":\"trace_writer\",\"rows\":%d,\"ns_per_step\":%.0f,\"mb_per_s\":%.0f,"
           "\"dropped\":%llu}\n",
           T, dt / steps * 1e9, (double)c.body_bytes / dt / 1e6, (unsigned long long)c.dropped);
    free(rows);
    free(ids);
    free(w);
}

/* ---- decode with and without ---------------------------------------------------------------- */

static const char *default_model(const opts *o) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/trace-24l.vindex", o->dir);
    if (access(path, R_OK) == 0) return path;
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && %s synth --arch qwen3moe --layers 24 --hidden 512 --heads 8 "
             "--kv-heads 2 --head-dim 64 --experts 64 --top-k 8 --expert-ff 256 --vocab 2000 "
             "--seed 3 --format vindex %s.tmp >/dev/null && mv %s.tmp %s",
             o->dir, o->vindex_bin, path, path, path);
    return system(cmd) == 0 ? path : NULL;
}

typedef struct run_ctx {
    md_ctx *c;
    const md_model *m;
    float *logits;
    int decode;
} run_ctx;

static void on_step(void *ud, const md_row *rows, int64_t T) {
    vx_trace_step(ud, T, &rows[0].seq, &rows[0].pos, &rows[0].token, 4);
}
static void on_layer(void *ud, int l, int64_t T, int k, const int32_t *ids, const float *w) {
    vx_trace_layer(ud, l, T, k, ids, w);
}

/* One round: a 16-token prompt then `decode` greedy steps; tok/s of the steps. */
static double round_tps(run_ctx *r, vx_trace_writer *w, mw_err *e) {
    md_route_sink s = {on_step, on_layer, w};
    md_ctx_set_route_sink(r->c, w ? &s : NULL);
    if (md_seq_truncate(r->c, 0, 0, e)) return -1;
    md_row rows[16];
    for (int i = 0; i < 16; i++) rows[i] = (md_row){0, i, (i * 7 + 1) % 100, i == 15};
    if (md_forward(r->c, rows, 16, r->logits, e)) return -1;
    int32_t tok = md_argmax(r->logits, r->m->cfg.n_vocab);
    double t0 = bu_now();
    for (int k = 0; k < r->decode; k++) {
        md_row row = {0, 16 + k, tok, 1};
        if (md_forward(r->c, &row, 1, r->logits, e)) return -1;
        tok = md_argmax(r->logits, r->m->cfg.n_vocab);
    }
    double tps = r->decode / (bu_now() - t0);
    md_ctx_set_route_sink(r->c, NULL);
    return tps;
}

static int decode_rounds(const opts *o, const char *model, vx_source *src, md_model *m) {
    mw_err e = {{0}};
    kn_pool *pool = kn_pool_create(o->threads);
    md_expert_backend *be = NULL;
    md_ctx *c = NULL;
    vx_trace_writer *w = NULL;
    const md_config *cfg = &m->cfg;
    vx_trace_info info = {.n_layer = (uint32_t)cfg->n_layer,
                          .n_expert = (uint32_t)cfg->n_expert,
                          .k = (uint32_t)cfg->n_expert_used};
    snprintf(info.fingerprint, sizeof info.fingerprint, "%s", vx_source_fingerprint(src));
    snprintf(info.family, sizeof info.family, "%s", cfg->arch);
    char path[256];
    snprintf(path, sizeof path, "/tmp/bench_trace-%d-decode.trace", (int)getpid());
    md_ctx_params cp = {.numerics = KN_NUM_Q8, .pool = pool, .n_seq = 1, .n_ctx = 16 + o->decode};
    run_ctx r = {.m = m, .decode = o->decode, .logits = malloc(cfg->n_vocab * sizeof(float))};
    double with[MAX_ROUNDS], without[MAX_ROUNDS], ratio[MAX_ROUNDS];
    int rc = md_local_backend_new(src, cfg, pool, &be, &e) || (cp.experts = be, 0) ||
             md_ctx_new(m, &cp, &c, &e) || vx_trace_create(path, &info, 0, &w, &e);
    r.c = c;
    round_tps(&r, NULL, &e); /* warm-up: pages in, caches */
    for (int i = 0; !rc && i < o->rounds; i++) {
        /* each side first in every other round: drift in the machine's speed cancels */
        if (i % 2) with[i] = round_tps(&r, w, &e);
        without[i] = round_tps(&r, NULL, &e);
        if (!(i % 2)) with[i] = round_tps(&r, w, &e);
        ratio[i] = with[i] / without[i];
        rc = without[i] < 0 || with[i] < 0;
    }
    vx_trace_counts n = {0};
    if (w && vx_trace_finish(w, &n, &e)) rc = 1;
    unlink(path);
    if (rc) fprintf(stderr, "bench_trace: %s\n", e.msg);
    if (!rc) {
        double mw = bu_median(with, o->rounds), mo = bu_median(without, o->rounds),
               mr = bu_median(ratio, o->rounds);
        printf("decode, %s (%s, %d layers, %d experts, top-%d), %d thread(s), %d rounds of %d "
               "steps: %.1f tok/s without the trace, %.1f with; median ratio %.4f (%+.2f%%), "
               "rounds %.4f .. %.4f; %.2f MB traced\n",
               model, cfg->arch, cfg->n_layer, cfg->n_expert, cfg->n_expert_used, o->threads,
               o->rounds, o->decode, mo, mw, mr, (mr - 1) * 100, ratio[0], ratio[o->rounds - 1],
               (double)n.body_bytes / 1e6);
        printf("{\"bench\":\"trace_decode\",\"tps_without\":%.1f,\"tps_with\":%.1f,\"ratio\":%.4f}"
               "\n",
               mo, mw, mr);
    }
    md_ctx_free(c);
    if (be) be->destroy(be);
    kn_pool_destroy(pool);
    free(r.logits);
    return rc;
}

int main(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc != BU_RUN) return rc;
    writer_only(&o, 1);
    writer_only(&o, 64);
    const char *model = o.model ? o.model : default_model(&o);
    if (!model) return fprintf(stderr, "bench_trace: cannot synthesize the model\n"), 1;
    mw_err e;
    vx_source *src;
    md_model *m;
    if (vx_source_open(model, NULL, &src, &e) || md_model_load(src, &m, &e))
        return fprintf(stderr, "bench_trace: %s\n", e.msg), 1;
    rc = decode_rounds(&o, model, src, m);
    md_model_free(m);
    vx_source_close(src);
    return rc;
}
