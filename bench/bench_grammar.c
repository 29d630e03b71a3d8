/* bench/bench_grammar.c — what constrained sampling (response_format json_schema) adds to a decode
 * step: 16 streams each generate a value of a schema over a real vocabulary, and per step each
 * stream's masked copy of its logits row (copy, mask, accept) is timed against its free sampling
 * of the same row (md_sample, temperature 1, top-p 1). With --model, one 16-sequence decode
 * step of that model (in process) is timed too, and the overhead is given against a whole free
 * step (the forward pass and 16 samples).
 *
 * The streams follow their masks: the token each keeps is the free sample when the mask allows
 * it, else a random allowed token, so the walk meets the states a real generation meets (string
 * bodies, keys, numbers, the end). Rows are random logits: what a mask costs depends on the
 * grammar's state, not on the values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "coordinator/co_serve_grammar.h"
#include "grammar/gr.h"
#include "kernels/kn.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "model/md_sampler.h"
#include "tokenizer/tk.h"
#include "vindex/vx_source.h"

#define STREAMS 16

static const char *const SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":48},"
    "\"age\":{\"type\":\"integer\"},"
    "\"email\":{\"type\":[\"string\",\"null\"]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"admin\",\"user\",\"guest\"]},"
    "\"maxItems\":4},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\","
    "\"maxLength\":64},\"zip\":{\"type\":\"string\",\"maxLength\":10}},\"required\":[\"street\","
    "\"zip\"],\"additionalProperties\":false},"
    "\"score\":{\"type\":\"number\"}},"
    "\"required\":[\"name\",\"age\",\"email\",\"tags\",\"address\",\"score\"],"
    "\"additionalProperties\":false}";

typedef struct opts {
    int steps, threads;
    const char *model;
} opts;

/* One 16-row decode step of the model (each row its own sequence), the best of `reps`. */
static double model_step(const char *path, int threads, int reps) {
    mw_err e = {{0}};
    vx_source *src = NULL;
    md_model *m = NULL;
    kn_pool *pool = kn_pool_create(threads);
    md_expert_backend *be = NULL;
    md_ctx *c = NULL;
    float *logits = NULL;
    double best = -1;
    if (vx_source_open(path, NULL, &src, &e) || md_model_load(src, &m, &e) ||
        md_local_backend_new(src, &m->cfg, pool, &be, &e))
        goto out;
    md_ctx_params p = {.pool = pool, .experts = be, .n_seq = STREAMS, .n_ctx = reps + 2};
    logits = malloc((size_t)STREAMS * (size_t)m->cfg.n_vocab * sizeof *logits);
    if (!logits || md_ctx_new(m, &p, &c, &e)) goto out;
    md_row rows[STREAMS];
    for (int r = 0; r < reps; r++) {
        for (int s = 0; s < STREAMS; s++) rows[s] = (md_row){s, r, (s * 7 + r) % 100 + 1, 1};
        const double t0 = bu_now();
        if (md_forward(c, rows, STREAMS, logits, &e)) goto out;
        const double dt = bu_now() - t0;
        if (best < 0 || dt < best) best = dt;
    }
out:
    if (best < 0) fprintf(stderr, "bench_grammar: --model %s: %s\n", path, e.msg);
    free(logits);
    md_ctx_free(c);
    if (be) be->destroy(be);
    kn_pool_destroy(pool);
    md_model_free(m);
    vx_source_close(src);
    return best;
}

static void random_row(float *x, int64_t n, uint64_t *s) {
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((*s >> 40) & 0xffff) / 4096.0f;
    }
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    opts o = {.steps = 200, .threads = 2};
    const bu_opt table[] = {
        BU_OPT_IN("--steps", BU_INT, &o.steps, "N", "decode steps per stream (200)", 10, 100000),
        BU_OPT("--model", BU_STR, &o.model, "PATH",
               "also time a 16-sequence decode step of this model (GGUF or vindex)"),
        BU_OPT_IN("--threads", BU_INT, &o.threads, "N", "threads of that step (2)", 1, 256),
    };
    const bu_cli cli = {
        "bench_grammar", "constrained sampling's cost per step against free sampling",
        "[VOCAB.gguf]",  NULL,
        table,           sizeof table / sizeof *table};
    int first;
    const int rc = bu_args(argc, argv, &cli, &first);
    if (rc != BU_RUN) return rc;
    const char *vpath =
        first < argc ? argv[first] : "tests/fixtures/vocab/ggml-vocab-deepseek-llm.gguf";
    mw_err e = {{0}};
    tk_tokenizer *tok = NULL;
    if (tk_load_path(vpath, &tok, &e)) return fprintf(stderr, "bench_grammar: %s\n", e.msg), 1;
    const int64_t V = tk_n_vocab(tok);
    double t0 = bu_now();
    gr_vocab *gv = co_grammar_vocab_new(tok, NULL, &e);
    const double build_s = bu_now() - t0;
    if (!gv) return fprintf(stderr, "bench_grammar: %s\n", e.msg), 1;
    gr_grammar *g = NULL;
    if (gr_compile_text(SCHEMA, strlen(SCHEMA), &g, &e))
        return fprintf(stderr, "bench_grammar: %s\n", e.msg), 1;
    gr_matcher *m[STREAMS];
    md_sampler smp[STREAMS];
    md_sampler_opts so = md_sampler_defaults();
    so.temperature = 1.0f;
    so.top_p = 1.0f; /* OpenAI's default: sampling is one pass over the row, masked or not */
    for (int s = 0; s < STREAMS; s++) {
        so.seed = (uint64_t)s + 1;
        if (gr_matcher_new(g, gv, &m[s], &e) || md_sampler_init(&smp[s], V, &so, &e))
            return fprintf(stderr, "bench_grammar: %s\n", e.msg), 1;
    }
    float *row = malloc((size_t)V * sizeof *row), *masked = malloc((size_t)V * sizeof *masked);
    /* per step, all 16 streams: the mask (copy, mask, accept), the sample from the masked row,
     * the free sample from the row itself */
    double *mask_t = calloc((size_t)o.steps, sizeof *mask_t);
    double *msamp_t = calloc((size_t)o.steps, sizeof *msamp_t);
    double *free_t = calloc((size_t)o.steps, sizeof *free_t);
    if (!row || !masked || !mask_t || !msamp_t || !free_t)
        return fprintf(stderr, "out of memory\n"), 1;
    uint64_t rs = 42;
    int64_t tokens = 0, ends = 0;
    for (int step = 0; step < o.steps; step++) {
        for (int s = 0; s < STREAMS; s++) {
            random_row(row, V, &rs);
            t0 = bu_now();
            md_sample(&smp[s], row);
            free_t[step] += bu_now() - t0;
            t0 = bu_now();
            memcpy(masked, row, (size_t)V * sizeof *row);
            const int64_t allowed = gr_matcher_apply(m[s], masked, V);
            mask_t[step] += bu_now() - t0;
            if (allowed <= 0) return fprintf(stderr, "bench_grammar: a dead end\n"), 1;
            t0 = bu_now();
            const int32_t tok_s = md_sample(&smp[s], masked);
            msamp_t[step] += bu_now() - t0;
            t0 = bu_now();
            const int ended = gr_matcher_accept(m[s], tok_s);
            mask_t[step] += bu_now() - t0;
            if (ended < 0) return fprintf(stderr, "bench_grammar: a refused token\n"), 1;
            tokens++;
            if (ended == 1) { /* the value is done: the stream starts another */
                ends++;
                gr_matcher_free(m[s]);
                if (gr_matcher_new(g, gv, &m[s], &e)) return 1;
            }
        }
    }
    double mask_sum = 0, msamp_sum = 0, free_sum = 0;
    for (int i = 0; i < o.steps; i++)
        mask_sum += mask_t[i], msamp_sum += msamp_t[i], free_sum += free_t[i];
    qsort(mask_t, (size_t)o.steps, sizeof *mask_t, cmp_d);
    const double k50 = mask_t[o.steps / 2], k90 = mask_t[o.steps * 9 / 10];
    const double kmax = mask_t[o.steps - 1], kmean = mask_sum / o.steps;
    printf("bench_grammar: %s, vocabulary %lld tokens (%s), trie built in %.0f ms\n", bu_cpu_name(),
           (long long)V, vpath, build_s * 1e3);
    printf("  %d streams x %d steps, %lld tokens, %lld values completed\n", STREAMS, o.steps,
           (long long)tokens, (long long)ends);
    printf("  mask per step (16 streams: copy, mask, accept): median %.3f ms, p90 %.3f ms, max "
           "%.3f ms, mean %.3f ms\n",
           k50 * 1e3, k90 * 1e3, kmax * 1e3, kmean * 1e3);
    printf("  sampling per step (16 streams): free %.3f ms, from the masked rows %.3f ms (means)\n",
           free_sum / o.steps * 1e3, msamp_sum / o.steps * 1e3);
    double step = -1, free_step = 0, cons_step = 0;
    if (o.model && (step = model_step(o.model, o.threads, 8)) > 0) {
        free_step = step + free_sum / o.steps;
        cons_step = step + (msamp_sum + mask_sum) / o.steps;
        printf("  %s: 16-sequence forward %.2f ms (best of 8); free step (forward + samples) "
               "%.2f ms, constrained %.2f ms: x%.3f (mean); the mask alone is %.1f %% of a "
               "free step (mean), %.1f %% (p90)\n",
               o.model, step * 1e3, free_step * 1e3, cons_step * 1e3, cons_step / free_step,
               100 * kmean / free_step, 100 * k90 / free_step);
    }
    printf("{\"bench\":\"grammar\",\"vocab\":%lld,\"streams\":%d,\"steps\":%d,"
           "\"trie_build_ms\":%.1f,\"mask_ms_median\":%.3f,\"mask_ms_p90\":%.3f,"
           "\"mask_ms_max\":%.3f,\"mask_ms_mean\":%.3f,\"free_sample_ms\":%.3f,"
           "\"masked_sample_ms\":%.3f,\"forward_ms\":%.3f,\"mask_over_free_step\":%.4f}\n",
           (long long)V, STREAMS, o.steps, build_s * 1e3, k50 * 1e3, k90 * 1e3, kmax * 1e3,
           kmean * 1e3, free_sum / o.steps * 1e3, msamp_sum / o.steps * 1e3,
           step > 0 ? step * 1e3 : -1.0, step > 0 ? kmean / free_step : -1.0);
    for (int s = 0; s < STREAMS; s++) gr_matcher_free(m[s]), md_sampler_free(&smp[s]);
    gr_free(g);
    gr_vocab_free(gv);
    tk_free(tok);
    free(row), free(masked), free(mask_t), free(msamp_t), free(free_t);
    return 0;
}
