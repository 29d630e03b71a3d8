/* bench/bench_model.c — the coordinator's in-process forward pass on gpt-oss-20b-width models:
 * decode and prefill (128-token prompt) tokens/s with 1 and 2 threads, weight bytes read per token,
 * and that as a fraction of the memory bandwidth measured in the same run, next to llama.cpp's
 * figures on this kind of machine (MXFP4 experts, Q8_0 attention and LM head).
 *
 * Models come from `vindex synth` (random weights, written to build/bench-models/ when absent).
 *   bench_model [--layers 4,8,24] [--threads 1,2] [--prompt 128] [--decode 32] [--dir DIR]
 *               [--vindex PATH] [--numerics q8|f32] [--model PATH] [--profile] [--pin auto|yes|no]
 * --pin copies the dense matrices and the experts out of the file mapping onto transparent huge
 * pages (md_model_pin_dense, md_local_backend_pin; llama.cpp's --no-mmap); auto does so when the
 * model file is under a third of the memory.
 * --profile also times the phases of the decode steps (wall clock between the layer loop's probe
 * points) and prints where a step's time goes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "kernels/kn.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "model/md_sampler.h"
#include "vindex/vx_source.h"

/* gpt-oss-20b's widths */
#define HIDDEN    2880
#define HEADS     64
#define KV_HEADS  8
#define HEAD_DIM  64
#define EXPERTS   32
#define TOP_K     4
#define EXPERT_FF 2880
#define WINDOW    128
#define VOCAB     32000

/* llama.cpp on this kind of machine (issue 4), same weight formats; 0 = no figure */
typedef struct reference {
    int layers;
    double decode[2]; /* 1 and 2 threads */
    double prefill[2];
} reference;

static const reference refs[] = {
    {4, {26.7, 49.0}, {0, 93.0}},
    {8, {14.9, 26.5}, {0, 0}},
};

static const reference *ref_for(int layers) {
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
        if (refs[i].layers == layers) return &refs[i];
    return NULL;
}

typedef struct opts {
    int layers[8], n_layers;
    int threads[4], n_threads;
    int prompt, decode;
    const char *dir, *vindex_bin, *model;
    kn_numerics numerics;
    bool profile;
    int pin; /* -1 auto, 0 no, 1 yes */
} opts;

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    for (char *p = (char *)s, *end; *p && n < max; p = *end ? end + 1 : end) {
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 4096) return -1;
        out[n++] = (int)v;
    }
    return n;
}

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.layers = {4, 8, 24},
                .n_layers = 3,
                .threads = {1, 2},
                .n_threads = 2,
                .prompt = 128,
                .decode = 32,
                .dir = "build/bench-models",
                .vindex_bin = "bin/vindex",
                .numerics = KN_NUM_Q8,
                .pin = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--profile")) {
            o->profile = true;
            continue;
        }
        if (!v) return fprintf(stderr, "bench_model: %s needs a value\n", a), -1;
        if (!strcmp(a, "--layers"))
            o->n_layers = parse_list(v, o->layers, 8);
        else if (!strcmp(a, "--threads"))
            o->n_threads = parse_list(v, o->threads, 4);
        else if (!strcmp(a, "--prompt"))
            o->prompt = atoi(v);
        else if (!strcmp(a, "--decode"))
            o->decode = atoi(v);
        else if (!strcmp(a, "--dir"))
            o->dir = v;
        else if (!strcmp(a, "--vindex"))
            o->vindex_bin = v;
        else if (!strcmp(a, "--model"))
            o->model = v, o->n_layers = 1;
        else if (!strcmp(a, "--numerics"))
            o->numerics = strcmp(v, "f32") ? KN_NUM_Q8 : KN_NUM_F32;
        else if (!strcmp(a, "--pin"))
            o->pin = !strcmp(v, "yes") ? 1 : !strcmp(v, "no") ? 0 : -1;
        else
            return fprintf(stderr, "bench_model: unknown option %s\n", a), -1;
        i++;
    }
    if (o->n_layers < 1 || o->n_threads < 1 || o->prompt < 1 || o->decode < 2)
        return fprintf(stderr, "bench_model: bad options\n"), -1;
    return 0;
}

/* ---- models --------------------------------------------------------------------------------- */

/* Stored bytes of one layer (MXFP4 experts and biases, Q8_0 attention, f32 rest), to check disk. */
static double layer_bytes(void) {
    const double mx = 17.0 / 32, q8 = 34.0 / 32;
    double experts = (double)EXPERTS * 3 * HIDDEN * EXPERT_FF * mx;
    double attn = (double)HIDDEN * (2 * HEADS * HEAD_DIM + 2 * KV_HEADS * HEAD_DIM) * q8;
    return experts + attn + 4.0 * EXPERTS * (2 * EXPERT_FF + HIDDEN + HIDDEN);
}

static int synthesize(const opts *o, int layers, const char *path) {
    struct statvfs fs;
    double need = layers * layer_bytes() + 2.0 * VOCAB * HIDDEN * 34 / 32;
    if (statvfs(o->dir, &fs) == 0 && (double)fs.f_bavail * fs.f_frsize < need * 1.2) {
        fprintf(stderr, "bench_model: %d layers need %.1f GB of disk, %.1f GB free: skipped\n",
                layers, need / 1e9, (double)fs.f_bavail * fs.f_frsize / 1e9);
        return -1;
    }
    /* read through the page cache, the model must fit in memory (compute, not disk, is measured) */
    double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (mem > 0 && need > 0.8 * mem) {
        fprintf(stderr,
                "bench_model: %d layers need %.1f GB, more than 80%% of the %.1f GB of "
                "memory: skipped\n",
                layers, need / 1e9, mem / 1e9);
        return -1;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s synth --arch gpt-oss --layers %d --hidden %d --heads %d --kv-heads %d "
             "--head-dim %d --experts %d --top-k %d --expert-ff %d --vocab %d --sliding-window %d "
             "--dense-format q8_0 --expert-format mxfp4 --seed 1 --format gguf %s.tmp && "
             "mv %s.tmp %s",
             o->vindex_bin, layers, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, EXPERTS, TOP_K, EXPERT_FF,
             VOCAB, WINDOW, path, path, path);
    fprintf(stderr, "bench_model: synthesizing %s (%.1f GB, random weights)\n  %s\n", path,
            need / 1e9, cmd);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_model: vindex synth failed for %d layers: skipped\n", layers);
        return -1;
    }
    return 0;
}

/* ---- phase profile (--profile) -------------------------------------------------------------- */

typedef enum phase {
    PH_QKV,
    PH_ATTN,
    PH_WO,
    PH_ROUTER,
    PH_ROUTE,
    PH_EXPERTS,
    PH_OTHER,
    PH_HEAD,
    PH_SAMPLE,
    PH_COUNT
} phase;

static const char *const phase_names[PH_COUNT] = {
    "q k v matmuls + RoPE",
    "KV store + attention",
    "output projection",
    "router matmul",
    "routing (top-k, softmax)",
    "experts (backend)",
    "embedding, norms, residual adds",
    "LM head",
    "sampling (argmax)",
};

/* The phase that ends at each probe: the time since the previous probe is charged to it. */
static const phase probe_phase[MD_PROBE_COUNT] = {
    [MD_PROBE_ATTN_NORM] = PH_OTHER,      [MD_PROBE_Q_NORMED] = PH_QKV,
    [MD_PROBE_K_NORMED] = PH_QKV,         [MD_PROBE_Q_ROPE] = PH_QKV,
    [MD_PROBE_K_ROPE] = PH_QKV,           [MD_PROBE_V] = PH_QKV,
    [MD_PROBE_KQV_OUT] = PH_ATTN,         [MD_PROBE_ATTN_OUT] = PH_WO,
    [MD_PROBE_FFN_INP] = PH_OTHER,        [MD_PROBE_FFN_NORM] = PH_OTHER,
    [MD_PROBE_ROUTER_LOGITS] = PH_ROUTER, [MD_PROBE_ROUTER_SCORES] = PH_ROUTE,
    [MD_PROBE_TOPK] = PH_ROUTE,           [MD_PROBE_WEIGHTS] = PH_ROUTE,
    [MD_PROBE_MOE_OUT] = PH_EXPERTS,      [MD_PROBE_L_OUT] = PH_OTHER,
    [MD_PROBE_RESULT_NORM] = PH_OTHER,
};

typedef struct profile {
    double last;
    double step[PH_COUNT];               /* this step */
    double sum[PH_COUNT], min[PH_COUNT]; /* over the steps */
} profile;

static void mark(profile *p, phase ph) {
    double now = bu_now();
    p->step[ph] += now - p->last;
    p->last = now;
}

static void on_probe(void *ud, int layer, md_probe pr, const void *data, int64_t rows,
                     int64_t cols) {
    (void)layer, (void)data, (void)rows, (void)cols;
    mark(ud, probe_phase[pr]);
}

static double mat_bytes(const kn_mat *w) {
    return (double)w->row_bytes * (double)w->rows;
}

/* Decodes `steps` more tokens with the observer timing each phase; prints ms per token and the
 * rate at which each phase reads its weights. */
static int profile_decode(md_ctx *c, const md_model *m, const md_expert_backend *be, int pos,
                          int32_t tok, int steps, float *logits, int threads, mw_err *e) {
    profile p = {0};
    double bytes[PH_COUNT] = {0};
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const md_layer *w = &m->layers[il];
        bytes[PH_QKV] += mat_bytes(&w->wq) + mat_bytes(&w->wk) + mat_bytes(&w->wv);
        bytes[PH_WO] += mat_bytes(&w->wo);
        bytes[PH_ROUTER] += mat_bytes(&w->router);
    }
    bytes[PH_HEAD] = mat_bytes(&m->output);
    const uint64_t eb0 = md_local_backend_weight_bytes(be);
    for (int i = 0; i < PH_COUNT; i++) p.min[i] = 1e30;
    md_ctx_set_observer(c, on_probe, &p);
    double t0 = bu_now();
    for (int k = 0; k < steps; k++) {
        md_row row = {0, pos + k, tok, 1};
        memset(p.step, 0, sizeof p.step);
        p.last = bu_now();
        if (md_forward(c, &row, 1, logits, e)) return -1;
        mark(&p, PH_HEAD);
        tok = md_argmax(logits, m->cfg.n_vocab);
        mark(&p, PH_SAMPLE);
        for (int i = 0; i < PH_COUNT; i++) {
            p.sum[i] += p.step[i];
            if (p.step[i] < p.min[i]) p.min[i] = p.step[i];
        }
    }
    double total = bu_now() - t0, min_total = 0;
    for (int i = 0; i < PH_COUNT; i++) min_total += p.min[i];
    md_ctx_set_observer(c, NULL, NULL);
    bytes[PH_EXPERTS] = (double)(md_local_backend_weight_bytes(be) - eb0) / steps;
    printf("   profile, %d layers, %d thread(s), %d decode steps: %.2f ms per token (sum of each "
           "phase's best step: %.2f ms)\n",
           m->cfg.n_layer, threads, steps, 1e3 * total / steps, 1e3 * min_total);
    printf("     %-34s %8s %6s %8s %9s %8s %9s\n", "phase", "mean ms", "share", "MB", "GB/s",
           "best ms", "GB/s");
    for (int i = 0; i < PH_COUNT; i++)
        printf("     %-34s %8.3f %5.1f%% %8.1f %9.1f %8.3f %9.1f\n", phase_names[i],
               1e3 * p.sum[i] / steps, 100 * p.sum[i] / total, bytes[i] / 1e6,
               p.sum[i] > 0 ? bytes[i] * steps / p.sum[i] / 1e9 : 0, 1e3 * p.min[i],
               p.min[i] > 0 ? bytes[i] / p.min[i] / 1e9 : 0);
    return 0;
}

/* ---- one measurement ------------------------------------------------------------------------ */

typedef struct result {
    double prefill_tps, decode_tps;
    double step_min, step_median; /* seconds per decode step */
    double bytes_per_token;       /* decode */
    double prefill_bytes;         /* per prompt */
} result;

static uint64_t bytes_read(md_ctx *c, const md_expert_backend *b) {
    return md_ctx_dense_bytes(c) + md_local_backend_weight_bytes(b);
}

static int measure(const opts *o, const md_model *m, const vx_source *src, bool pin, int threads,
                   result *r) {
    mw_err e;
    kn_pool *pool = kn_pool_create(threads);
    md_expert_backend *be = NULL;
    md_ctx *c = NULL;
    int rc = -1;
    md_row *rows = malloc((size_t)o->prompt * sizeof *rows);
    float *logits = malloc((size_t)m->cfg.n_vocab * sizeof *logits);
    double *steps = malloc((size_t)o->decode * sizeof *steps);
    if (!rows || !logits || !steps) goto out;
    if (md_local_backend_new(src, &m->cfg, pool, &be, &e) || (pin && md_local_backend_pin(be, &e)))
        goto fail;
    md_ctx_params p = {.numerics = o->numerics,
                       .pool = pool,
                       .experts = be,
                       .n_seq = 1,
                       .n_ctx = o->prompt + 2 * o->decode + 1};
    if (md_ctx_new(m, &p, &c, &e)) goto fail;
    uint64_t s = 12345;
    for (int i = 0; i < o->prompt; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        rows[i] =
            (md_row){0, i, (int32_t)((s >> 33) % (uint64_t)m->cfg.n_vocab), i == o->prompt - 1};
    }
    /* best of two prefills (the first one may also page the weights in) */
    double best = 1e30;
    for (int rep = 0; rep < 2; rep++) {
        if (md_seq_truncate(c, 0, 0, &e)) goto fail;
        uint64_t b0 = bytes_read(c, be);
        double t0 = bu_now();
        if (md_forward(c, rows, o->prompt, logits, &e)) goto fail;
        double dt = bu_now() - t0;
        if (dt < best) best = dt;
        r->prefill_bytes = (double)(bytes_read(c, be) - b0);
    }
    r->prefill_tps = o->prompt / best;
    /* decode: greedy continuation of the prompt */
    int32_t tok = md_argmax(logits, m->cfg.n_vocab);
    uint64_t b0 = bytes_read(c, be);
    double t0 = bu_now();
    for (int k = 0; k < o->decode; k++) {
        md_row row = {0, o->prompt + k, tok, 1};
        double s0 = bu_now();
        if (md_forward(c, &row, 1, logits, &e)) goto fail;
        tok = md_argmax(logits, m->cfg.n_vocab);
        steps[k] = bu_now() - s0;
    }
    double dt = bu_now() - t0;
    r->step_min = bu_min(steps, o->decode);
    r->step_median = bu_median(steps, o->decode);
    r->decode_tps = o->decode / dt;
    r->bytes_per_token = (double)(bytes_read(c, be) - b0) / o->decode;
    if (o->profile &&
        profile_decode(c, m, be, o->prompt + o->decode, tok, o->decode, logits, threads, &e))
        goto fail;
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "bench_model: %s\n", e.msg);
out:
    md_ctx_free(c);
    if (be) be->destroy(be);
    kn_pool_destroy(pool);
    free(rows);
    free(logits);
    free(steps);
    return rc;
}

static void ratio(double v, double ref) {
    if (ref > 0)
        printf(" %6.2fx", v / ref);
    else
        printf(" %7s", "-");
}

static void report(const opts *o, int layers, int threads, const result *r, double bw_gbs) {
    const reference *ref = ref_for(layers);
    int ti = threads == 1 ? 0 : threads == 2 ? 1 : -1;
    double rd = ref && ti >= 0 ? ref->decode[ti] : 0, rp = ref && ti >= 0 ? ref->prefill[ti] : 0;
    double frac = bw_gbs > 0 ? r->bytes_per_token * r->decode_tps / (bw_gbs * 1e9) : 0;
    printf("%6d %7d %9.2f", layers, threads, r->decode_tps);
    ratio(r->decode_tps, rd);
    printf(" %9.2f", r->prefill_tps);
    ratio(r->prefill_tps, rp);
    printf(" %9.1f %7.1f %6.0f%%\n", r->bytes_per_token / 1e6,
           r->bytes_per_token * r->decode_tps / 1e9, 100 * frac);
    printf("{\"bench\":\"model\",\"arch\":\"gpt-oss\",\"layers\":%d,\"threads\":%d,"
           "\"numerics\":\"%s\",\"prompt\":%d,\"decode_tok_s\":%.3f,\"prefill_tok_s\":%.3f,"
           "\"bytes_per_token\":%.0f,\"prefill_bytes\":%.0f,\"bandwidth_gb_s\":%.2f,"
           "\"bandwidth_fraction\":%.3f,\"ref_decode_tok_s\":%.1f,\"ref_prefill_tok_s\":%.1f,"
           "\"decode_step_ms_min\":%.3f,\"decode_step_ms_median\":%.3f}\n",
           layers, threads, o->numerics == KN_NUM_Q8 ? "q8" : "f32", o->prompt, r->decode_tps,
           r->prefill_tps, r->bytes_per_token, r->prefill_bytes, bw_gbs, frac, rd, rp,
           1e3 * r->step_min, 1e3 * r->step_median);
    fflush(stdout);
}

static int run_model(const opts *o, const char *path, const double *bw) {
    mw_err e;
    vx_source *src;
    md_model *m;
    vx_source_opts so = {.dense = true}; /* the bench measures speed, not integrity */
    if (vx_source_open(path, &so, &src, &e)) return fprintf(stderr, "bench_model: %s\n", e.msg), -1;
    if (md_model_load(src, &m, &e)) {
        fprintf(stderr, "bench_model: %s\n", e.msg);
        vx_source_close(src);
        return -1;
    }
    struct stat st;
    const double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    const bool pin = o->pin == 1 || (o->pin < 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
                                     (double)st.st_size < mem / 3);
    if (pin && md_model_pin_dense(m, &e)) {
        fprintf(stderr, "bench_model: %s\n", e.msg);
        md_model_free(m);
        vx_source_close(src);
        return -1;
    }
    printf("   %s: %d layers; weights %s\n", path, m->cfg.n_layer,
           pin ? "copied onto transparent huge pages (--pin)" : "read from the file mapping");
    for (int t = 0; t < o->n_threads; t++) {
        result r = {0};
        if (measure(o, m, src, pin, o->threads[t], &r) == 0)
            report(o, m->cfg.n_layer, o->threads[t], &r, bw[t]);
    }
    md_model_free(m);
    vx_source_close(src);
    return 0;
}

int main(int argc, char **argv) {
    opts o;
    if (parse(argc, argv, &o)) return 2;
    printf(
        "== bench_model: coordinator forward pass, in-process experts (%s numerics, ISA %s, %s)\n",
        o.numerics == KN_NUM_Q8 ? "q8" : "f32", kn_isa_name(kn_isa_active()), bu_cpu_name());
    printf("   gpt-oss-20b widths: hidden %d, %d/%d heads of %d, %d experts top-%d, expert ff %d, "
           "window %d on alternate layers, YaRN, vocab %d; MXFP4 experts, Q8_0 attention + LM "
           "head. Prefill: %d-token prompt; decode: %d greedy steps after it.\n",
           HIDDEN, HEADS, KV_HEADS, HEAD_DIM, EXPERTS, TOP_K, EXPERT_FF, WINDOW, VOCAB, o.prompt,
           o.decode);
    double bw[4];
    for (int t = 0; t < o.n_threads; t++) {
        bw[t] = bu_read_bandwidth((size_t)1 << 30, o.threads[t], 3);
        printf("   read bandwidth, %d thread(s): %.1f GB/s (measured now)\n", o.threads[t], bw[t]);
    }
    printf(
        "   x llama.cpp: tok/s divided by llama.cpp's on this kind of machine (decode 4 layers "
        "26.7 / 49, 8 layers 14.9 / 26.5 tok/s at 1 / 2 threads; prefill 93 tok/s at 4 layers, "
        "2 threads); MB/token: weight bytes read per decode step; GB/s: MB/token x decode tok/s; "
        "of bw: that / the bandwidth above.\n");
    printf("%6s %7s %9s %7s %9s %7s %9s %7s %7s\n", "layers", "threads", "decode/s", "x l.cpp",
           "prefill/s", "x l.cpp", "MB/token", "GB/s", "of bw");
    if (o.model) return run_model(&o, o.model, bw) ? 1 : 0;
    mkdir("build", 0755);
    if (mkdir(o.dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "bench_model: cannot create %s\n", o.dir);
        return 1;
    }
    for (int i = 0; i < o.n_layers; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/gpt-oss-20bw-%dL.gguf", o.dir, o.layers[i]);
        if (access(path, R_OK) && synthesize(&o, o.layers[i], path)) continue;
        run_model(&o, path, bw);
    }
    return 0;
}
