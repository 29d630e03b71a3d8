/* bench/bench_model.c — the coordinator's in-process forward pass on gpt-oss-20b-width models:
 * decode and prefill (128-token prompt) tokens/s with 1 and 2 threads, weight bytes read per token
 * and that as a fraction of the memory bandwidth measured in the same run; with --llama-bench,
 * llama.cpp's llama-bench on the same GGUF file with the same thread counts, the two taking turns
 * round after round, and the ratio of each round (MXFP4 experts, Q8_0 attention and LM head).
 * `bench_model --help` lists the options (the table in parse()).
 *
 * Models come from `vindex synth` (random weights, written to build/bench-models/ when absent).
 * --pin copies the dense matrices and the experts out of the file mapping onto transparent huge
 * pages (md_model_pin_dense, md_local_backend_pin); auto does so when the model file is under a
 * third of the memory. llama-bench then reads its weights into memory too (-mmp 0), else maps them.
 * --profile also times the phases of the decode steps (wall clock between the layer loop's probe
 * points) and prints where a step's time goes, each phase's weight bytes and multiply-adds, and
 * the rates: GB/s (against the read bandwidth: memory-bound) and the fraction of the int8
 * dot-product peak measured just before (compute-bound); --profile-seqs 1,16 does so for each
 * number of sequences decoding together (one row each per step, each after a prompt of its own),
 * which shows what a batched step spends its time on against a one-row step; with 1 first in the
 * list, each larger batch's tokens/s over one sequence's (the batching gain a serving step gets).
 * --llama-bench runs, per round, `llama-bench -p PROMPT -n 0` (prefill from an empty context, best
 * of 2 repetitions, like ours) and `-p 0 -n DECODE -d PROMPT` (decode after the prompt, like ours);
 * llama.cpp keeps its defaults otherwise (weight repacking on, its thread pool's polling). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bench/bench_llama.h"
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

#define MAX_THREADS 4
#define MAX_ROUNDS  32
/* A read pass between decode steps: far past the last-level cache, and about a step's reading
 * time of a few-layer model, so that the pass and the step see the memory in the same mode. */
#define PASS_BYTES ((size_t)512 << 20)

typedef struct opts {
    int layers[8], n_layers;
    int threads[MAX_THREADS], n_threads;
    int prompt, decode, rounds;
    const char *dir, *vindex_bin, *model, *llama_bench;
    kn_numerics numerics;
    bool profile;
    int seqs[8], n_seqs; /* --profile-seqs: batches of sequences decoding together */
    int pin;             /* -1 auto, 0 no, 1 yes */
    int llama_fa;        /* llama-bench -fa: 1 on, 0 off, -1 auto */
    /* GB/s read by threads[i] threads: measured at the start, raised to what the probe reaches
     * after each model's rounds (the machine's ceiling is the best the probe saw in the run) */
    double bw[MAX_THREADS];
    /* the probes' median 8 MB slice, the largest of them: what the memory sustains over a run of
     * matmul-sized reads, where bw is what it reaches in its best slice */
    double bw_med[MAX_THREADS];
} opts;

/* The read bandwidth measured for `threads` threads (0 when not measured). */
static double bw_of(const opts *o, int threads) {
    for (int i = 0; i < o->n_threads; i++)
        if (o->threads[i] == threads) return o->bw[i];
    return 0;
}

/* --pin and --llama-fa: the word's index in the option table, as -1 auto, 1 yes / on, 0 no / off */
static const int TRI[3] = {-1, 1, 0};

static const char ABOUT[] =
    "The in-process forward pass on gpt-oss-20b-width models (vindex synth, random weights):\n"
    "decode and prefill tok/s, weight bytes read per token and their share of the read "
    "bandwidth\nmeasured in the same run; llama-bench on the same file, taking turns, with "
    "--llama-bench.";

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.layers = {4, 8, 24},
                .n_layers = 3,
                .threads = {1, 2},
                .n_threads = 2,
                .prompt = 128,
                .decode = 32,
                .rounds = 0,
                .dir = "build/bench-models",
                .vindex_bin = "bin/vindex"};
    int numerics = 0, pin = 0, fa = 1;
    const bu_opt opt[] = {
        BU_OPT_INTS("--layers", o->layers, &o->n_layers, 8, "4,8,24",
                    "layer counts of the synthetic models", 1, 4096),
        BU_OPT_INTS("--threads", o->threads, &o->n_threads, MAX_THREADS, "1,2", "thread counts", 1,
                    4096),
        BU_OPT_IN("--prompt", BU_INT, &o->prompt, "128", "prompt tokens, prefilled in one batch", 1,
                  1 << 20),
        BU_OPT_IN("--decode", BU_INT, &o->decode, "32", "greedy decode steps after the prompt", 2,
                  1 << 20),
        BU_OPT_IN("--rounds", BU_INT, &o->rounds, "N",
                  "rounds (default 3 with --llama-bench, else 1)", 1, MAX_ROUNDS),
        BU_OPT("--dir", BU_STR, &o->dir, "DIR", "where the synthetic models are kept"),
        BU_OPT("--vindex", BU_STR, &o->vindex_bin, "PATH", "the vindex program (bin/vindex)"),
        BU_OPT("--model", BU_STR, &o->model, "PATH", "measure this GGUF file or vindex instead"),
        BU_OPT("--numerics", BU_CHOICE, &numerics, "q8|f32", "activation numerics (q8)"),
        BU_OPT("--pin", BU_CHOICE, &pin, "auto|yes|no",
               "weights onto huge pages (auto: when under a third of memory)"),
        BU_OPT("--profile", BU_FLAG, &o->profile, "", "time the phases of the decode steps"),
        BU_OPT_INTS("--profile-seqs", o->seqs, &o->n_seqs, 8, "1,16",
                    "profile these numbers of sequences decoding together", 1, 4096),
        BU_OPT("--llama-bench", BU_STR, &o->llama_bench, "PATH",
               "llama.cpp's llama-bench, run on the same file"),
        BU_OPT("--llama-fa", BU_CHOICE, &fa, "auto|on|off", "llama-bench's flash attention (on)"),
    };
    const bu_cli cli = {"bench_model", ABOUT, NULL, NULL, opt, (int)(sizeof opt / sizeof opt[0])};
    const int rc = bu_args(argc, argv, &cli, NULL);
    if (rc != BU_RUN) return rc;
    o->numerics = numerics ? KN_NUM_F32 : KN_NUM_Q8;
    o->pin = TRI[pin];
    o->llama_fa = TRI[fa];
    if (o->n_seqs) o->profile = true;
    if (!o->rounds) o->rounds = o->llama_bench ? 3 : 1;
    if (o->llama_bench && access(o->llama_bench, X_OK))
        return fprintf(stderr, "bench_model: --llama-bench %s: not an executable file\n",
                       o->llama_bench),
               2;
    return BU_RUN;
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

/* Page faults the process has taken (a VM can charge tens of microseconds for each). */
static long minor_faults(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt + ru.ru_majflt : 0;
}

static double mat_bytes(const kn_mat *w) {
    return (double)w->row_bytes * (double)w->rows;
}

/* Multiply-adds of one row against w (0 for a matrix the model does not have). */
static double mat_macs(const kn_mat *w) {
    return w->data ? (double)w->rows * (double)w->cols : 0;
}

/* The multiply-adds a decode step of B rows does per phase: every row meets every dense matrix
 * and each of its n_expert_used experts per MoE layer (gate, up and down); the coordinator's FFN
 * (a dense layer's, or a MoE layer's shared experts) is counted with the experts. */
static void step_macs(const md_model *m, int B, double macs[PH_COUNT]) {
    const md_config *c = &m->cfg;
    for (int il = 0; il < c->n_layer; il++) {
        const md_layer *w = &m->layers[il];
        macs[PH_QKV] += B * (mat_macs(&w->wq) + mat_macs(&w->wk) + mat_macs(&w->wv));
        macs[PH_WO] += B * mat_macs(&w->wo);
        macs[PH_ROUTER] += B * mat_macs(&w->router);
        macs[PH_EXPERTS] +=
            B * (mat_macs(&w->ffn.gate) + mat_macs(&w->ffn.up) + mat_macs(&w->ffn.down));
        if (md_layer_is_moe(c, il))
            macs[PH_EXPERTS] +=
                (double)B * c->n_expert_used * 3.0 * (double)c->n_embd * (double)c->n_ff_exp;
    }
    macs[PH_HEAD] = B * mat_macs(&m->output);
}

/* A phase's roofline: the longer of reading its weights at the measured bandwidth and doing its
 * multiply-adds at the int8 peak (0 for a phase with neither counted, e.g. attention over the KV
 * cache, the norms). */
static double phase_bound(double bytes, double macs, double bw_gbs, double peak) {
    const double mem = bw_gbs > 0 ? bytes / (bw_gbs * 1e9) : 0;
    const double cpu = peak > 0 ? macs / peak : 0;
    return mem > cpu ? mem : cpu;
}

/* The step against its roofline: the sum of the phases' bounds over the mean step. `slice` names
 * the probe's figure the bytes are read at: its best 8 MB slice, or its median one. */
static void print_roofline(const double *bytes, const double *macs, const double *sum, int steps,
                           double total, double bw_gbs, double peak, const char *slice) {
    double roof = 0, roofed = 0; /* the bounds, and the time of the phases that have one */
    for (int i = 0; i < PH_COUNT; i++) {
        const double bound = phase_bound(bytes[i], macs[i], bw_gbs, peak);
        if (bound > 0) roof += bound, roofed += sum[i] / steps;
    }
    printf("     roofline, the %s slice (max of bytes / %.1f GB/s and MACs / %.0f GMAC/s per "
           "phase): %.3f ms per step; the step's %.3f ms is %.2fx it (%.0f%% of roofline); the "
           "bounded phases' %.3f ms is %.2fx it\n",
           slice, bw_gbs, peak / 1e9, 1e3 * roof, 1e3 * total / steps,
           roof > 0 ? total / steps / roof : 0, total > 0 ? 100 * roof * steps / total : 0,
           1e3 * roofed, roof > 0 ? roofed / roof : 0);
    printf("{\"bench\":\"model_profile_roofline\",\"slice\":\"%s\",\"read_bw_gbps\":%.3f,"
           "\"int8_peak_gmacs\":%.2f,\"roofline_ms\":%.4f,\"step_ms\":%.4f,"
           "\"step_over_roofline\":%.3f,\"bounded_phases_ms\":%.4f}\n",
           slice, bw_gbs, peak / 1e9, 1e3 * roof, 1e3 * total / steps,
           roof > 0 ? total / steps / roof : 0, 1e3 * roofed);
}

/* Each step against the roofline at the read bandwidth of the passes just before and after it:
 * the median over the steps of that step's bounds over its time. */
static double paired_roofline(const double *bytes, const double *macs, const double *step_t,
                              const double *pass, int steps, double peak) {
    double *f = malloc((size_t)steps * sizeof *f);
    if (!f) return 0;
    for (int k = 0; k < steps; k++) {
        const double around = (pass[k] + pass[k + 1]) / 2;
        double roof = 0;
        for (int i = 0; i < PH_COUNT; i++) roof += phase_bound(bytes[i], macs[i], around, peak);
        f[k] = step_t[k] > 0 ? roof / step_t[k] : 0;
    }
    const double med = bu_median(f, steps);
    free(f);
    return med;
}

/* Decodes `steps` more tokens in each of sequences 0..B-1 (one row each per step: tok[s] at
 * position pos[s]) with the observer timing each phase, and a read pass of `reader` before the
 * first step and after each; prints ms per step and per token and the rate at which each phase
 * reads its weights; *step_s: the mean step. */
static int profile_decode(md_ctx *c, const md_model *m, const md_expert_backend *be, int B,
                          const int *pos, int32_t *tok, int steps, float *logits, int threads,
                          double bw_gbs, kn_numerics numerics, bu_reader *reader, double *step_s,
                          mw_err *e) {
    profile p = {0};
    double bytes[PH_COUNT] = {0};
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const md_layer *w = &m->layers[il];
        bytes[PH_QKV] += mat_bytes(&w->wq) + mat_bytes(&w->wk) + mat_bytes(&w->wv);
        bytes[PH_WO] += mat_bytes(&w->wo);
        bytes[PH_ROUTER] += mat_bytes(&w->router);
    }
    bytes[PH_HEAD] = mat_bytes(&m->output);
    const int64_t V = m->cfg.n_vocab;
    md_row *rows = malloc((size_t)B * sizeof *rows);
    double *pass = malloc((size_t)(steps + 1) * sizeof *pass);
    double *step_t = malloc((size_t)steps * sizeof *step_t);
    if (!rows || !pass || !step_t)
        return free(rows), free(pass), free(step_t), mw_errf(e, "out of memory"), -1;
    const uint64_t eb0 = md_local_backend_weight_bytes(be);
    double macs[PH_COUNT] = {0};
    step_macs(m, B, macs);
    /* the ceiling of the compute-bound phases, measured just before them (int8: Q8 numerics) */
    const char *dot = "none";
    const double peak = numerics == KN_NUM_Q8 ? bu_int8_dot_peak(threads, &dot) : 0;
    /* and the memory-bound phases': the read probe again, the better of it and the run's start */
    const bu_bw probe = bu_read_probe((size_t)1 << 30, threads, 3);
    const double bw_start = bw_gbs, bw_now = probe.best;
    if (bw_now > bw_gbs) bw_gbs = bw_now;
    for (int i = 0; i < PH_COUNT; i++) p.min[i] = 1e30;
    md_ctx_set_observer(c, on_probe, &p);
    const long faults0 = minor_faults();
    pass[0] = bu_reader_pass(reader);
    double total = 0, min_total = 0;
    for (int k = 0; k < steps; k++) {
        for (int s = 0; s < B; s++) rows[s] = (md_row){s, pos[s] + k, tok[s], 1};
        memset(p.step, 0, sizeof p.step);
        const double s0 = p.last = bu_now();
        if (md_forward(c, rows, B, logits, e)) return free(rows), free(pass), free(step_t), -1;
        mark(&p, PH_HEAD);
        for (int s = 0; s < B; s++) tok[s] = md_argmax(logits + (size_t)s * (size_t)V, V);
        mark(&p, PH_SAMPLE);
        step_t[k] = bu_now() - s0;
        total += step_t[k];
        for (int i = 0; i < PH_COUNT; i++) {
            p.sum[i] += p.step[i];
            if (p.step[i] < p.min[i]) p.min[i] = p.step[i];
        }
        pass[k + 1] = bu_reader_pass(reader);
    }
    const double faults = (double)(minor_faults() - faults0) / steps;
    for (int i = 0; i < PH_COUNT; i++) min_total += p.min[i];
    md_ctx_set_observer(c, NULL, NULL);
    free(rows);
    bytes[PH_EXPERTS] = (double)(md_local_backend_weight_bytes(be) - eb0) / steps;
    const double paired = paired_roofline(bytes, macs, step_t, pass, steps, peak);
    const double pass_med = bu_median(pass, steps + 1); /* sorts pass */
    free(step_t);
    free(pass);
    *step_s = total / steps;
    printf(
        "   profile, %d layers, %d thread(s), %d sequence(s), %d decode steps: %.2f ms per step, "
        "%.2f ms per token (sum of each phase's best step: %.2f ms); %.1f page faults per step\n",
        m->cfg.n_layer, threads, B, steps, 1e3 * total / steps, 1e3 * total / steps / B,
        1e3 * min_total, faults);
    if (peak > 0)
        printf("     int8 dot peak, %d thread(s): %.0f GMAC/s (%s, measured now); GMAC: the "
               "phase's multiply-adds per step; of peak: GMAC / mean ms against it\n",
               threads, peak / 1e9, dot);
    printf("     read bandwidth, %d thread(s): %.1f GB/s now (median slice %.1f), %.1f at the "
           "start; the bounds use the larger; the read passes between the steps: median %.1f GB/s "
           "(of pass: the bound at it over the mean)\n",
           threads, bw_now, probe.median, bw_start, pass_med);
    printf("     %-34s %8s %6s %8s %9s %8s %9s %8s %8s %8s %7s %7s\n", "phase", "mean ms", "share",
           "MB", "GB/s", "best ms", "GB/s", "GMAC", "of peak", "bound ms", "of roof", "of pass");
    double bound[PH_COUNT];
    for (int i = 0; i < PH_COUNT; i++) {
        const double mean = p.sum[i] / steps;
        bound[i] = phase_bound(bytes[i], macs[i], bw_gbs, peak);
        const double at_pass = phase_bound(bytes[i], macs[i], pass_med, peak);
        char of_peak[16] = "-", of_roof[16] = "-", of_pass[16] = "-";
        if (peak > 0 && macs[i] > 0 && mean > 0)
            snprintf(of_peak, sizeof of_peak, "%.0f%%", 100 * macs[i] / mean / peak);
        if (bound[i] > 0 && mean > 0)
            snprintf(of_roof, sizeof of_roof, "%.0f%%", 100 * bound[i] / mean);
        if (at_pass > 0 && mean > 0)
            snprintf(of_pass, sizeof of_pass, "%.0f%%", 100 * at_pass / mean);
        printf("     %-34s %8.3f %5.1f%% %8.1f %9.1f %8.3f %9.1f %8.4g %8s %8.3f %7s %7s\n",
               phase_names[i], 1e3 * mean, 100 * p.sum[i] / total, bytes[i] / 1e6,
               p.sum[i] > 0 ? bytes[i] * steps / p.sum[i] / 1e9 : 0, 1e3 * p.min[i],
               p.min[i] > 0 ? bytes[i] / p.min[i] / 1e9 : 0, macs[i] / 1e9, of_peak, 1e3 * bound[i],
               of_roof, of_pass);
    }
    print_roofline(bytes, macs, p.sum, steps, total, bw_gbs, peak, "best");
    /* the same against what the memory sustained just before: on a VM whose speed moves from one
     * moment to the next, the best slice is a moment's, the median the run's */
    print_roofline(bytes, macs, p.sum, steps, total, probe.median, peak, "median");
    /* and each step against the memory of its own moment: the passes just before and after it */
    printf("     roofline, the read passes between the steps (median %.1f GB/s; each step's bounds "
           "at the mean of the passes around it over its time): median over the steps %.0f%% of "
           "roofline\n",
           pass_med, 100 * paired);
    printf("{\"bench\":\"model_profile_roofline\",\"slice\":\"pass\",\"read_bw_gbps\":%.3f,"
           "\"int8_peak_gmacs\":%.2f,\"roofline_fraction_paired\":%.3f}\n",
           pass_med, peak / 1e9, paired);
    return 0;
}

/* ---- one measurement ------------------------------------------------------------------------ */

typedef struct result {
    double prefill_tps, decode_tps;
    double step_min, step_median; /* seconds per decode step */
    double bytes_per_token;       /* decode */
    double prefill_bytes;         /* per prompt */
    /* the read passes between the decode steps: their median GB/s, and the median over the steps
     * of each step's GB/s over the mean of the passes just before and after it */
    double pass_gbs, frac_pass;
} result;

static uint64_t bytes_read(md_ctx *c, const md_expert_backend *b) {
    return md_ctx_dense_bytes(c) + md_local_backend_weight_bytes(b);
}

/* The prompt: pseudo-random token ids, logits of the last row only. */
static void prompt_rows(md_row *rows, int n, int n_vocab) {
    uint64_t s = 12345;
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        rows[i] = (md_row){0, i, (int32_t)((s >> 33) % (uint64_t)n_vocab), i == n - 1};
    }
}

/* The profile of B sequences decoding together (--profile-seqs): a context of B sequences, each
 * prefilled with its own prompt in one batch, then profile_decode. */
static int profile_seqs(const opts *o, const md_model *m, md_expert_backend *be, kn_pool *pool,
                        bu_reader *reader, int threads, int B, double *step_s, mw_err *e) {
    md_ctx_params p = {.numerics = o->numerics,
                       .pool = pool,
                       .experts = be,
                       .n_seq = B,
                       .n_ctx = o->prompt + o->decode + 1};
    md_ctx *c = NULL;
    const int64_t V = m->cfg.n_vocab;
    md_row *rows = malloc((size_t)B * (size_t)o->prompt * sizeof *rows);
    float *logits = malloc((size_t)B * (size_t)V * sizeof *logits);
    int *pos = malloc((size_t)B * sizeof *pos);
    int32_t *tok = malloc((size_t)B * sizeof *tok);
    int rc = -1;
    if (!rows || !logits || !pos || !tok) {
        mw_errf(e, "out of memory");
        goto out;
    }
    if (md_ctx_new(m, &p, &c, e)) goto out;
    for (int s = 0; s < B; s++) {
        prompt_rows(rows + (size_t)s * o->prompt, o->prompt, (int)V);
        for (int i = 0; i < o->prompt; i++) {
            md_row *r = &rows[(size_t)s * o->prompt + i];
            r->seq = s;
            r->token = (int32_t)((r->token + 7919 * s) % V); /* a prompt of its own */
        }
        pos[s] = o->prompt;
    }
    if (md_forward(c, rows, B * o->prompt, logits, e)) goto out;
    for (int s = 0; s < B; s++) tok[s] = md_argmax(logits + (size_t)s * (size_t)V, V);
    rc = profile_decode(c, m, be, B, pos, tok, o->decode, logits, threads, bw_of(o, threads),
                        o->numerics, reader, step_s, e);
out:
    md_ctx_free(c);
    free(rows);
    free(logits);
    free(pos);
    free(tok);
    return rc;
}

/* Best of two prefills (the first one may also page the weights in), then `decode` greedy steps
 * continuing the prompt, with a read pass of `reader` (when not NULL) before the first step and
 * after each: tok/s is then over the steps' own time. */
static int prefill_decode(const opts *o, md_ctx *c, const md_model *m, const md_expert_backend *be,
                          bu_reader *reader, float *logits, result *r, mw_err *e) {
    md_row *rows = malloc((size_t)o->prompt * sizeof *rows);
    double *steps = malloc((size_t)o->decode * sizeof *steps);
    double *pass = malloc((size_t)(o->decode + 1) * sizeof *pass);
    int rc = -1;
    if (!rows || !steps || !pass) goto out;
    prompt_rows(rows, o->prompt, m->cfg.n_vocab);
    double best = 1e30;
    for (int rep = 0; rep < 2; rep++) {
        if (md_seq_truncate(c, 0, 0, e)) goto out;
        uint64_t b0 = bytes_read(c, be);
        double t0 = bu_now();
        if (md_forward(c, rows, o->prompt, logits, e)) goto out;
        double dt = bu_now() - t0;
        if (dt < best) best = dt;
        r->prefill_bytes = (double)(bytes_read(c, be) - b0);
    }
    r->prefill_tps = o->prompt / best;
    int32_t tok = md_argmax(logits, m->cfg.n_vocab);
    uint64_t b0 = bytes_read(c, be);
    pass[0] = reader ? bu_reader_pass(reader) : 0;
    double t0 = bu_now(), in_steps = 0;
    for (int k = 0; k < o->decode; k++) {
        md_row row = {0, o->prompt + k, tok, 1};
        double s0 = bu_now();
        if (md_forward(c, &row, 1, logits, e)) goto out;
        tok = md_argmax(logits, m->cfg.n_vocab);
        steps[k] = bu_now() - s0;
        in_steps += steps[k];
        pass[k + 1] = reader ? bu_reader_pass(reader) : 0;
    }
    r->decode_tps = o->decode / (reader ? in_steps : bu_now() - t0);
    r->bytes_per_token = (double)(bytes_read(c, be) - b0) / o->decode;
    r->frac_pass = bu_pass_fraction(r->bytes_per_token, steps, pass, o->decode);
    r->pass_gbs = bu_median(pass, o->decode + 1);
    r->step_min = bu_min(steps, o->decode);
    r->step_median = bu_median(steps, o->decode);
    rc = 0;
out:
    free(rows);
    free(steps);
    free(pass);
    return rc;
}

static int measure(const opts *o, const md_model *m, const vx_source *src, bool pin, int threads,
                   bool with_profile, result *r) {
    mw_err e = {0};
    kn_pool *pool = kn_pool_create(threads);
    md_expert_backend *be = NULL;
    md_ctx *c = NULL;
    bu_reader *reader = NULL;
    int rc = -1;
    float *logits = malloc((size_t)m->cfg.n_vocab * sizeof *logits);
    if (!logits) goto out;
    if (md_local_backend_new(src, &m->cfg, pool, &be, &e) || (pin && md_local_backend_pin(be, &e)))
        goto fail;
    md_ctx_params p = {.numerics = o->numerics,
                       .pool = pool,
                       .experts = be,
                       .n_seq = 1,
                       .n_ctx = o->prompt + 2 * o->decode + 1};
    reader = bu_reader_new(PASS_BYTES, pool);
    if (!reader) {
        mw_errf(&e, "out of memory for the read passes");
        goto fail;
    }
    if (md_ctx_new(m, &p, &c, &e) || prefill_decode(o, c, m, be, reader, logits, r, &e)) goto fail;
    int32_t tok = md_argmax(logits, m->cfg.n_vocab);
    const int pos = o->prompt + o->decode;
    double step_s = 0, one_s = 0; /* one sequence's mean step, when profiled first */
    if (with_profile && !o->n_seqs &&
        profile_decode(c, m, be, 1, &pos, &tok, o->decode, logits, threads, bw_of(o, threads),
                       o->numerics, reader, &step_s, &e))
        goto fail;
    for (int i = 0; with_profile && i < o->n_seqs; i++) {
        const int B = o->seqs[i];
        if (profile_seqs(o, m, be, pool, reader, threads, B, &step_s, &e)) goto fail;
        if (B == 1 && i == 0) one_s = step_s;
        /* the batching gain: B sequences' tokens/s over one sequence's, same run */
        if (B > 1 && one_s > 0 && step_s > 0)
            printf("   batch gain, %d sequences: %.2fx one sequence's tokens/s (%d x %.3g ms / "
                   "%.3g ms per step)\n",
                   B, B * one_s / step_s, B, 1e3 * one_s, 1e3 * step_s);
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "bench_model: %s\n", e.msg);
out:
    md_ctx_free(c);
    if (be) be->destroy(be);
    bu_reader_free(reader);
    kn_pool_destroy(pool);
    free(logits);
    return rc;
}

/* ---- llama.cpp on the same file ------------------------------------------------------------- */

/* Per round and thread count: our figures and llama-bench's (0 where it did not run). */
typedef struct rounds {
    result ours[MAX_ROUNDS][MAX_THREADS];
    double llama_prefill[MAX_ROUNDS][MAX_THREADS], llama_decode[MAX_ROUNDS][MAX_THREADS];
    bl_info info;
    bool llama_ok;
} rounds;

/* llama-bench's result for a thread count, or 0. */
static double pick(const bl_result *res, int n, int threads, bool best) {
    for (int i = 0; i < n; i++)
        if (res[i].threads == threads) return best ? res[i].best_ts : res[i].avg_ts;
    return 0;
}

/* One round of llama-bench: prefill from an empty context (best of 2, as ours), then decode after
 * the prompt (one run of o->decode tokens, as ours). */
static int llama_round(const opts *o, const char *path, bool pin, int r, rounds *rs) {
    bl_params p = {.bin = o->llama_bench,
                   .model = path,
                   .threads = o->threads,
                   .n_threads = o->n_threads,
                   .n_prompt = o->prompt,
                   .reps = 2,
                   .flash_attn = o->llama_fa,
                   .mmap = !pin};
    bl_result res[MAX_THREADS];
    char err[512];
    int n = bl_run(&p, res, MAX_THREADS, r == 0 ? &rs->info : NULL, err, sizeof err);
    for (int t = 0; n > 0 && t < o->n_threads; t++)
        rs->llama_prefill[r][t] = pick(res, n, o->threads[t], true);
    p.n_prompt = 0, p.n_gen = o->decode, p.n_depth = o->prompt, p.reps = 1;
    if (n > 0) n = bl_run(&p, res, MAX_THREADS, NULL, err, sizeof err);
    for (int t = 0; n > 0 && t < o->n_threads; t++)
        rs->llama_decode[r][t] = pick(res, n, o->threads[t], false);
    if (n <= 0) fprintf(stderr, "bench_model: llama-bench failed: %s\n", err);
    return n > 0 ? 0 : -1;
}

/* Rounds of our measurement and llama-bench's, taking turns (llama-bench first in odd rounds, so
 * neither always runs right after the other's warm caches or in the same part of a drift). */
static int run_rounds(const opts *o, const char *path, const md_model *m, const vx_source *src,
                      bool pin, rounds *rs) {
    rs->llama_ok = o->llama_bench != NULL;
    for (int r = 0; r < o->rounds; r++) {
        if (rs->llama_ok && r % 2 == 1 && llama_round(o, path, pin, r, rs)) rs->llama_ok = false;
        for (int t = 0; t < o->n_threads; t++)
            if (measure(o, m, src, pin, o->threads[t], o->profile && r == 0, &rs->ours[r][t]))
                return -1;
        if (rs->llama_ok && r % 2 == 0 && llama_round(o, path, pin, r, rs)) rs->llama_ok = false;
    }
    return 0;
}

/* ---- report --------------------------------------------------------------------------------- */

/* Median over the rounds of ours, of llama.cpp's, and of the ratio of each round (min, max). */
typedef struct summary {
    double ours, llama, ratio, ratio_min, ratio_max;
} summary;

static summary summarize(const double *ours, const double *llama, int n) {
    double o[MAX_ROUNDS], l[MAX_ROUNDS], q[MAX_ROUNDS];
    int nl = 0;
    for (int i = 0; i < n; i++) {
        o[i] = ours[i];
        if (llama[i] > 0) l[nl] = llama[i], q[nl++] = ours[i] / llama[i];
    }
    summary s = {.ours = bu_median(o, n)};
    if (nl) s.llama = bu_median(l, nl), s.ratio = bu_median(q, nl);
    if (nl) s.ratio_min = bu_min(q, nl), s.ratio_max = q[nl - 1]; /* bu_min sorted q */
    return s;
}

static void print_cell(const summary *s) {
    printf(" %9.2f", s->ours);
    if (s->llama > 0)
        printf(" %9.2f %6.2fx (%4.2f-%4.2f)", s->llama, s->ratio, s->ratio_min, s->ratio_max);
    else
        printf(" %9s %19s", "-", "-");
}

static void print_json(const opts *o, int layers, int threads, const summary *d, const summary *p,
                       const result *r, const double bw[6], const rounds *rs) {
    printf("{\"bench\":\"model\",\"arch\":\"gpt-oss\",\"layers\":%d,\"threads\":%d,"
           "\"numerics\":\"%s\",\"prompt\":%d,\"decode\":%d,\"rounds\":%d,\"decode_tok_s\":%.3f,"
           "\"prefill_tok_s\":%.3f,\"bytes_per_token\":%.0f,\"prefill_bytes\":%.0f,"
           "\"bandwidth_gb_s\":%.2f,\"bandwidth_fraction\":%.3f,\"bandwidth_median_gb_s\":%.2f,"
           "\"bandwidth_fraction_median\":%.3f,\"decode_step_ms_min\":%.3f,"
           "\"decode_step_ms_median\":%.3f,\"pass_gb_s\":%.2f,\"bandwidth_fraction_pass\":%.3f",
           layers, threads, kn_numerics_name(o->numerics), o->prompt, o->decode, o->rounds, d->ours,
           p->ours, r->bytes_per_token, r->prefill_bytes, bw[0], bw[1], bw[2], bw[3],
           1e3 * r->step_min, 1e3 * r->step_median, bw[4], bw[5]);
    if (d->llama > 0 && p->llama > 0)
        printf(",\"llama_commit\":\"%s\",\"llama_flash_attn\":\"%s\",\"llama_load\":\"%s\","
               "\"llama_decode_tok_s\":%.3f,\"llama_prefill_tok_s\":%.3f,\"decode_ratio\":%.4f,"
               "\"decode_ratio_min\":%.4f,\"decode_ratio_max\":%.4f,\"prefill_ratio\":%.4f,"
               "\"prefill_ratio_min\":%.4f,\"prefill_ratio_max\":%.4f",
               rs->info.commit, rs->info.flash_attn, rs->info.load, d->llama, p->llama, d->ratio,
               d->ratio_min, d->ratio_max, p->ratio, p->ratio_min, p->ratio_max);
    printf("}\n");
}

static void report(const opts *o, int layers, int t, const rounds *rs, double bw_gbs) {
    double od[MAX_ROUNDS], op[MAX_ROUNDS], ld[MAX_ROUNDS], lp[MAX_ROUNDS];
    double pg[MAX_ROUNDS], pf[MAX_ROUNDS]; /* the rounds' read passes and fractions of them */
    for (int r = 0; r < o->rounds; r++) {
        od[r] = rs->ours[r][t].decode_tps, op[r] = rs->ours[r][t].prefill_tps;
        pg[r] = rs->ours[r][t].pass_gbs, pf[r] = rs->ours[r][t].frac_pass;
        ld[r] = rs->llama_ok ? rs->llama_decode[r][t] : 0;
        lp[r] = rs->llama_ok ? rs->llama_prefill[r][t] : 0;
    }
    summary d = summarize(od, ld, o->rounds), p = summarize(op, lp, o->rounds);
    const result *r = &rs->ours[o->rounds - 1][t]; /* bytes and step times of the last round */
    const double gbs = r->bytes_per_token * d.ours / 1e9, med = o->bw_med[t];
    const double frac = bw_gbs > 0 ? gbs / bw_gbs : 0, frac_med = med > 0 ? gbs / med : 0;
    const double pass = bu_median(pg, o->rounds), frac_pass = bu_median(pf, o->rounds);
    printf("%6d %7d", layers, o->threads[t]);
    print_cell(&d);
    print_cell(&p);
    printf(" %8.1f %6.1f %5.0f%% %5.0f%% %6.1f %6.0f%%\n", r->bytes_per_token / 1e6, gbs,
           100 * frac, 100 * frac_med, pass, 100 * frac_pass);
    print_json(o, layers, o->threads[t], &d, &p, r,
               (double[6]){bw_gbs, frac, med, frac_med, pass, frac_pass}, rs);
    fflush(stdout);
}

static void print_table_header(void) {
    printf("%6s %7s %9s %9s %19s %9s %9s %19s %8s %6s %6s %6s %6s %7s\n", "layers", "threads",
           "decode/s", "l.cpp", "ratio", "prefill/s", "l.cpp", "ratio", "MB/token", "GB/s", "of bw",
           "of med", "pass", "of pass");
}

static void print_llama_settings(const opts *o, const rounds *rs, bool pin) {
    if (!o->llama_bench) {
        printf("   llama.cpp comparison skipped: no --llama-bench PATH (make bench: "
               "LLAMA_BENCH=PATH)\n");
        return;
    }
    if (!rs->llama_ok) {
        printf("   llama.cpp comparison failed (see above): our figures only\n");
        return;
    }
    char threads[64] = "";
    for (int t = 0; t < o->n_threads; t++)
        snprintf(threads + strlen(threads), sizeof threads - strlen(threads), t ? ",%d" : "%d",
                 o->threads[t]);
    printf("   llama.cpp %s (%s) on the same file: llama-bench -t %s -fa %s (ran %s), -mmp %d "
           "(%s), weight repacking and thread polling at its defaults; model read as %s\n",
           rs->info.commit, o->llama_bench, threads,
           o->llama_fa < 0 ? "auto"
           : o->llama_fa   ? "on"
                           : "off",
           rs->info.flash_attn, !pin, rs->info.load, rs->info.model_type);
}

/* The read probe again after a model's rounds: bw[t] becomes the larger of it and the value
 * before. On a VM the probe moves by half from minute to minute (other tenants' traffic); the
 * fraction of the bandwidth is taken against the best it reached, never a bad moment's. */
static void reprobe(opts *o, double *bw) {
    for (int t = 0; t < o->n_threads; t++) {
        const bu_bw b = bu_read_probe((size_t)1 << 30, o->threads[t], 3);
        printf("   read bandwidth after the rounds, %d thread(s): %.1f GB/s, median slice %.1f (at "
               "the start %.1f; of bw below: the largest on as many threads or fewer)\n",
               o->threads[t], b.best, b.median, bw[t]);
        if (b.best > bw[t]) bw[t] = b.best;
        if (b.median > o->bw_med[t]) o->bw_med[t] = b.median;
    }
    /* what fewer threads read, more can (the others may idle), though a probe on more threads
     * can come out lower (a neighbour's traffic, vCPUs sharing a core) */
    for (int t = 0; t < o->n_threads; t++)
        for (int u = 0; u < o->n_threads; u++)
            if (o->threads[u] < o->threads[t]) {
                if (bw[u] > bw[t]) bw[t] = bw[u];
                if (o->bw_med[u] > o->bw_med[t]) o->bw_med[t] = o->bw_med[u];
            }
}

static int run_model(opts *o, const char *path, double *bw) {
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
    rounds *rs = calloc(1, sizeof *rs);
    int rc = -1;
    if (!rs) goto out;
    if (pin && md_model_pin_dense(m, &e)) {
        fprintf(stderr, "bench_model: %s\n", e.msg);
        goto out;
    }
    printf("   %s: %d layers; weights %s; %d round(s)\n", path, m->cfg.n_layer,
           pin ? "copied onto transparent huge pages (--pin)" : "read from the file mapping",
           o->rounds);
    if (run_rounds(o, path, m, src, pin, rs)) goto out;
    reprobe(o, bw);
    print_llama_settings(o, rs, pin);
    print_table_header();
    for (int t = 0; t < o->n_threads; t++) report(o, m->cfg.n_layer, t, rs, bw[t]);
    rc = rs->llama_ok || !o->llama_bench ? 0 : -1;
out:
    free(rs);
    md_model_free(m);
    vx_source_close(src);
    return rc;
}

static void print_header(opts *o, double *bw) {
    printf(
        "== bench_model: coordinator forward pass, in-process experts (%s numerics, ISA %s, %s)\n",
        kn_numerics_name(o->numerics), kn_isa_name(kn_isa_active()), bu_cpu_name());
    if (!o->model)
        printf(
            "   gpt-oss-20b widths: hidden %d, %d/%d heads of %d, %d experts top-%d, expert ff %d, "
            "window %d on alternate layers, YaRN, vocab %d; MXFP4 experts, Q8_0 attention + LM "
            "head. Prefill: %d-token prompt; decode: %d greedy steps after it.\n",
            HIDDEN, HEADS, KV_HEADS, HEAD_DIM, EXPERTS, TOP_K, EXPERT_FF, WINDOW, VOCAB, o->prompt,
            o->decode);
    for (int t = 0; t < o->n_threads; t++) {
        const bu_bw b = bu_read_probe((size_t)1 << 30, o->threads[t], 3);
        bw[t] = b.best;
        o->bw_med[t] = b.median;
        printf("   read bandwidth, %d thread(s): %.1f GB/s, median slice %.1f (measured now)\n",
               o->threads[t], bw[t], b.median);
    }
    printf("   tok/s: median over the rounds; l.cpp: llama-bench's median on the same file and "
           "threads; ratio: median over the rounds of ours / llama.cpp's in the same round "
           "(min-max); MB/token: weight bytes read per decode step; GB/s: MB/token x decode tok/s; "
           "of bw: that / the read bandwidth (the largest of the probes at the start and after the "
           "rounds, on as many threads or fewer: their best 8 MB slice); of med: that / the "
           "largest of the probes' median slices; pass: the median GB/s of the read passes "
           "(512 MB each, same threads) between the decode steps; of pass: the median over the "
           "steps of a step's GB/s over the passes just before and after it.\n");
}

int main(int argc, char **argv) {
    opts o;
    const int status = parse(argc, argv, &o);
    if (status != BU_RUN) return status;
    double *bw = o.bw;
    print_header(&o, bw);
    if (o.model) return run_model(&o, o.model, bw) ? 1 : 0;
    mkdir("build", 0755);
    if (mkdir(o.dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "bench_model: cannot create %s\n", o.dir);
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < o.n_layers; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/gpt-oss-20bw-%dL.gguf", o.dir, o.layers[i]);
        if (access(path, R_OK) && synthesize(&o, o.layers[i], path)) continue;
        if (run_model(&o, path, bw)) rc = 1;
    }
    return rc;
}
