/* coordinator/co_generate.c — `coordinator generate`: the prompt goes through the model as one
 * batch, then each generated token is fed back as a one-row batch through the same forward pass.
 * A text or chat prompt (co_textcmd.h) streams the generated text to stdout as each token comes and
 * stops at the model's end-of-generation tokens; --tokens prints the generated ids as one line.
 * Progress and timings go to stderr. */
#include "coordinator/co_generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_backend.h"
#include "coordinator/co_textcmd.h"
#include "coordinator/co_trace.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "model/md_sampler.h"
#include "vindex/vx_source.h"
#include "util/mw_time.h"

typedef struct gen {
    const co_opts *o;
    kn_pool *pool;
    vx_source *src;
    md_model *model;
    md_expert_backend *experts;
    md_ctx *ctx;
    co_trace *trace; /* --trace-routing */
    md_sampler sampler;
    FILE *logits_file;
    float *logits; /* P rows with --logits-out, else 1 */
    md_row *rows;
    int32_t *out;
    const int32_t *tokens; /* the prompt: --tokens, or what co_textcmd built */
    int64_t n_tokens;
    bool text; /* a text or chat prompt */
    co_textcmd tx;
    tk_ids prompt;
    int64_t n_out; /* tokens generated so far: printed even when the run fails later */
} gen;

static int write_rows(gen *g, const float *rows, int64_t n, mw_err *err) {
    if (!g->logits_file) return 0;
    size_t count = (size_t)(n * g->model->cfg.n_vocab);
    if (fwrite(rows, sizeof(float), count, g->logits_file) != count)
        return mw_errf(err, "%s: write failed", g->o->logits_out);
    return 0;
}

/* The generated ids on stdout, one line; after a failure, those produced before it. */
static void print_tokens(const gen *g) {
    printf("tokens:");
    for (int64_t k = 0; k < g->n_out; k++) printf(" %d", g->out[k]);
    printf("\n");
    fflush(stdout);
}

static int open_all(gen *g, mw_err *err) {
    const co_opts *o = g->o;
    const co_backend_kind *kind = co_backend_find(o->experts);
    if (!kind) return mw_errf(err, "unknown expert backend '%s'", o->experts);
    g->pool = kn_pool_create(o->threads);
    vx_expert_set none = {0};
    vx_source_opts so = {.experts = kind->needs_local_experts ? NULL : &none,
                         .dense = true,
                         .verify_on_mount = true};
    if (vx_source_open(o->model, &so, &g->src, err)) return -1;
    if (md_model_load(g->src, &g->model, err) || (o->pin && md_model_pin_dense(g->model, err)))
        return -1;
    const md_config *c = &g->model->cfg;
    g->text = !o->tokens;
    g->tokens = o->tokens;
    g->n_tokens = o->n_tokens;
    if (g->text) {
        if (co_textcmd_open(&g->tx, o, g->src, &g->prompt, err)) return -1;
        if (tk_n_vocab(g->tx.tok) > c->n_vocab)
            return mw_errf(err, "the tokenizer has %d tokens, the model's output only %lld",
                           tk_n_vocab(g->tx.tok), (long long)c->n_vocab);
        g->tokens = g->prompt.v;
        g->n_tokens = (int64_t)g->prompt.n;
        if (g->n_tokens > o->n_ctx && o->n_ctx)
            return mw_errf(err, "the prompt is %lld tokens, more than --ctx %lld",
                           (long long)g->n_tokens, (long long)o->n_ctx);
    }
    for (int64_t i = 0; i < g->n_tokens; i++)
        if (g->tokens[i] >= c->n_vocab)
            return mw_errf(err,
                           "--tokens: token id %d (position %lld) is out of range: the "
                           "vocabulary has %lld ids",
                           g->tokens[i], (long long)i, (long long)c->n_vocab);
    int64_t n_ctx = o->n_ctx ? o->n_ctx : g->n_tokens + o->max_tokens;
    if (n_ctx < g->n_tokens + o->max_tokens - 1 || n_ctx > c->n_ctx_train)
        return mw_errf(err,
                       "%lld prompt + %lld generated tokens need %lld positions; the context "
                       "allows %lld (model context_length %lld)",
                       (long long)g->n_tokens, (long long)o->max_tokens,
                       (long long)(g->n_tokens + o->max_tokens - 1), (long long)n_ctx,
                       (long long)c->n_ctx_train);
    const co_backend_opts bo = co_cli_backend_opts(o);
    co_backend_env env = {.opts = &bo, .src = g->src, .model = g->model, .pool = g->pool};
    if (kind->create(&env, &g->experts, err)) return -1;
    md_ctx_params cp = {.numerics = o->numerics,
                        .pool = g->pool,
                        .experts = g->experts,
                        .n_seq = 1,
                        .n_ctx = n_ctx,
                        .kv_type = o->kv_type,
                        .micro_batches = o->micro_batches};
    if (md_ctx_new(g->model, &cp, &g->ctx, err)) return -1;
    if (o->trace_routing && co_trace_open(o->trace_routing, g->src, g->model, &g->trace, err))
        return -1;
    co_trace_attach(g->trace, g->ctx);
    if (md_sampler_init(&g->sampler, c->n_vocab, &o->sampling, err)) return -1;
    if (md_sampler_feed(&g->sampler, g->tokens, g->n_tokens, false, err)) return -1;
    int64_t P = g->n_tokens;
    g->rows = malloc((size_t)P * sizeof *g->rows);
    /* every prompt row is kept only when they are all written out */
    g->logits = malloc((size_t)((o->logits_out ? P : 1) * c->n_vocab) * sizeof *g->logits);
    g->out = malloc((size_t)o->max_tokens * sizeof *g->out);
    if (!g->rows || !g->logits || !g->out) return mw_errf(err, "out of memory");
    if (o->logits_out && !(g->logits_file = fopen(o->logits_out, "wb")))
        return mw_errf(err, "%s: cannot create the logits file", o->logits_out);
    return 0;
}

/* A text prompt prints each token as it comes; 1 when it ends generation. */
static int emit(gen *g, int64_t k, mw_err *err) {
    return g->text ? co_textcmd_emit(&g->tx, g->o, g->out[k], stdout, err) : 0;
}

/* A single stream's decode steps cannot be split into micro-batches: what hides its experts'
 * round trip is the trunk work the family lets run while they are out (the shared experts), and
 * in a prompt cut into micro-batches the other micro-batches' work. The share hidden is that of
 * the exchanges, submit to results in hand, not spent blocked (md_moe_timing). */
static void report_overlap(const gen *g) {
    const md_moe_timing t = md_ctx_moe_timing(g->ctx);
    if (!t.layers || !g->experts->submit) return;
    const double n = (double)t.layers * 1e3, sh = (double)t.shared_ns / n,
                 wait = (double)t.wait_ns / n, ex = (double)t.exchange_ns / n;
    fprintf(stderr,
            "overlap: per MoE layer an exchange of %.1f us, %.1f us of it blocked, %.1f us of "
            "shared experts run meanwhile: %.0f%% of the round trip hidden\n",
            ex, wait, sh, ex > 0 ? 100.0 * (1.0 - wait / ex) : 0.0);
}

static int run(gen *g, mw_err *err) {
    const co_opts *o = g->o;
    const int64_t P = g->n_tokens, V = g->model->cfg.n_vocab;
    int64_t N = o->max_tokens;
    const bool all = g->logits_file != NULL;
    for (int64_t i = 0; i < P; i++)
        g->rows[i] = (md_row){
            .seq = 0, .pos = (int32_t)i, .token = g->tokens[i], .logits = all || i == P - 1};
    double t0 = mw_now_s();
    if (md_forward(g->ctx, g->rows, P, g->logits, err)) return mw_err_wrap(err, "prefill");
    double t1 = mw_now_s();
    float *last = all ? g->logits + (P - 1) * V : g->logits;
    if (write_rows(g, g->logits, all ? P : 0, err)) return -1;
    g->out[0] = md_sample(&g->sampler, last);
    if (md_sampler_feed(&g->sampler, g->out, 1, true, err)) return -1;
    g->n_out = 1;
    int st = emit(g, 0, err);
    if (st < 0) return -1;
    if (st == 1) N = 1;
    for (int64_t k = 1; k < N; k++) {
        md_row r = {.seq = 0, .pos = (int32_t)(P + k - 1), .token = g->out[k - 1], .logits = 1};
        if (md_forward(g->ctx, &r, 1, g->logits, err))
            return mw_err_wrap(err, "decode step %lld", (long long)k);
        if (write_rows(g, g->logits, 1, err)) return -1;
        g->out[k] = md_sample(&g->sampler, g->logits);
        if (md_sampler_feed(&g->sampler, &g->out[k], 1, true, err)) return -1;
        g->n_out = k + 1;
        if ((st = emit(g, k, err)) < 0) return -1;
        if (st == 1) N = k + 1;
    }
    double t2 = mw_now_s();
    if (g->logits_file) {
        if (fclose(g->logits_file)) {
            g->logits_file = NULL;
            return mw_errf(err, "%s: write failed", o->logits_out);
        }
        g->logits_file = NULL;
    }
    if (g->text) {
        if (co_textcmd_finish(&g->tx, o, stdout, err)) return -1;
        fprintf(stderr, "generate: %s prompt of %lld tokens%s%s; %lld tokens generated%s\n",
                g->tx.chat ? "chat" : "text", (long long)P, g->tx.chat ? ", template " : "",
                g->tx.chat ? tk_chat_name(g->tx.chat) : "", (long long)N,
                g->tx.n_stop ? " (ended by a stop token)" : "");
    } else {
        print_tokens(g);
    }
    fprintf(stderr,
            "generate: %s (%s, %d layers), experts %s, numerics %s, %d thread(s)\n"
            "prefill: %lld tokens in %.3f s (%.1f tok/s); decode: %lld tokens in %.3f s "
            "(%.1f tok/s)\n",
            o->model, g->model->cfg.arch, g->model->cfg.n_layer, g->experts->name,
            kn_numerics_name(o->numerics), kn_pool_size(g->pool), (long long)P, t1 - t0,
            (double)P / (t1 - t0), (long long)(N - 1), t2 - t1,
            N > 1 ? (double)(N - 1) / (t2 - t1) : 0.0);
    report_overlap(g);
    const co_backend_kind *kind = co_backend_find(o->experts);
    if (kind && kind->report) kind->report(g->experts, stderr);
    co_trace *t = g->trace;
    g->trace = NULL;
    return co_trace_close(t, stderr, err);
}

static void close_all(gen *g) {
    if (g->logits_file) fclose(g->logits_file);
    md_sampler_free(&g->sampler);
    co_trace_close(g->trace, stderr, NULL);
    md_ctx_free(g->ctx);
    if (g->experts) g->experts->destroy(g->experts);
    md_model_free(g->model);
    if (g->src) vx_source_close(g->src);
    kn_pool_destroy(g->pool);
    free(g->logits);
    free(g->rows);
    free(g->out);
    co_textcmd_close(&g->tx);
    tk_ids_free(&g->prompt);
}

int co_generate(const co_opts *o) {
    gen g = {.o = o};
    mw_err err = {{0}};
    int rc = open_all(&g, &err) || run(&g, &err) ? 1 : 0;
    if (rc && g.n_out > 0) {
        /* What was generated before the failure is kept: the ids on stdout as on success (text
         * was printed as it came), and the error says how far the run got. */
        if (!g.text) print_tokens(&g);
        mw_err_wrap(&err, "after %lld of %lld token(s)", (long long)g.n_out,
                    (long long)o->max_tokens);
    }
    if (rc) fprintf(stderr, "coordinator generate: %s\n", err.msg);
    close_all(&g);
    return rc;
}
