/* tests/unit/test_co_sched.c — the serving scheduler on gpt-oss-tiny (window 8, so prompts and
 * generations run past the ring): batch invariance (a prompt alone and among 7 others gives the
 * same tokens and bit-identical logits, f32 and q8), seeded sampling, stop ids, cancellation
 * freeing the slot, a paused job keeping its slot out of the batch, admission limits, a failed step
 * failing only the jobs of the rows its backend names; and stop strings over split text (co_stop).
 * Invariance and cancellation also on kimi-linear-tiny, whose KDA layers keep a recurrent state per
 * slot: prompt chunks end anywhere in the delta rule's chunks, and a cancelled job's slot starts
 * the next one afresh; invariance on kimi-k3-tiny too (attention residuals, latent MoE). */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "coordinator/co_sched.h"
#include "coordinator/co_stop.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "model/md_sampler.h"

#define MAX_GEN 64

/* the model the scheduler runs (a llama.cpp fixture) */
static const char *fixture_model = "llamacpp/gpt-oss-tiny/model.gguf";

typedef struct result {
    int32_t tok[MAX_GEN];
    int64_t n;
    co_finish finish;
    float *logits; /* copied at the end */
    int64_t rows;
    co_job *job;
    bool done;
} result;

typedef struct env {
    vx_source *src;
    md_model *model;
    md_expert_backend *experts;
    kn_pool *pool;
    md_ctx *ctx;
    uv_loop_t loop;
    co_sched *s;
} env;

static void on_output(void *ud, co_job *job) {
    result *r = ud;
    co_job_out o;
    co_job_take(job, &o);
    for (int64_t i = 0; i < o.n_tokens && r->n < MAX_GEN; i++) r->tok[r->n++] = o.tokens[i];
    if (o.finish) {
        r->finish = o.finish;
        int64_t rows;
        const float *l = co_job_logits(job, &rows);
        if (rows) {
            size_t bytes = (size_t)rows * 512 * sizeof(float);
            r->logits = malloc(bytes);
            memcpy(r->logits, l, bytes);
            r->rows = rows;
        }
        r->done = true;
        co_job_release(job);
    }
}

/* The fixture model, its local experts and a context of `slots` sequences of n_ctx positions. */
static void model_open(env *e, kn_numerics num, kn_pool *pool, int slots, int64_t n_ctx) {
    mw_err err = {{0}};
    memset(e, 0, sizeof *e);
    e->pool = pool;
    if (vx_source_open(mwt_fixture(fixture_model), NULL, &e->src, &err) ||
        md_model_load(e->src, &e->model, &err) ||
        md_local_backend_new(e->src, &e->model->cfg, pool, &e->experts, &err))
        fail_msg("%s", err.msg);
    md_ctx_params cp = {
        .numerics = num, .pool = pool, .experts = e->experts, .n_seq = slots, .n_ctx = n_ctx};
    if (md_ctx_new(e->model, &cp, &e->ctx, &err)) fail_msg("%s", err.msg);
}

static void model_close(env *e) {
    md_ctx_free(e->ctx);
    e->experts->destroy(e->experts);
    md_model_free(e->model);
    vx_source_close(e->src);
    kn_pool_destroy(e->pool);
}

static void env_open_with(env *e, kn_numerics num, int slots, int chunk, int queue,
                          void (*after_step)(void *)) {
    mw_err err = {{0}};
    model_open(e, num, kn_pool_create(2), slots, 200);
    uv_loop_init(&e->loop);
    static const int32_t eos[] = {511};
    co_sched_params sp = {.ctx = e->ctx,
                          .n_slots = slots,
                          .n_ctx = 200,
                          .n_vocab = e->model->cfg.n_vocab,
                          .n_layer = e->model->cfg.n_layer,
                          .chunk = chunk,
                          .max_queue = queue,
                          .eos = eos,
                          .n_eos = 1,
                          .after_step = after_step};
    if (co_sched_new(&e->loop, &sp, &e->s, &err)) fail_msg("%s", err.msg);
}

static void env_open(env *e, kn_numerics num, int slots, int chunk, int queue) {
    env_open_with(e, num, slots, chunk, queue, NULL);
}

static void env_close(env *e) {
    co_sched_free(e->s);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_loop_close(&e->loop);
    model_close(e);
}

static void prompt_of(int32_t *p, int n, int salt) {
    for (int i = 0; i < n; i++) p[i] = (int32_t)((i * 37 + salt * 101 + 5) % 500);
}

/* Top-k, min-p and the penalties of the requests submit_biased makes (none unless a test sets
 * them). */
static md_sampler_opts sampling_extra = {.repetition_penalty = 1};

static void submit_biased(env *e, result *r, const int32_t *prompt, int n, int max_tokens,
                          float temp, uint64_t seed, const co_logit_bias *bias, int n_bias) {
    memset(r, 0, sizeof *r);
    md_sampler_opts so = sampling_extra;
    so.temperature = temp;
    so.top_p = temp > 0 ? 0.9f : 1.0f;
    so.seed = seed;
    co_gen_params gp = {.prompt = prompt,
                        .n_prompt = n,
                        .max_tokens = max_tokens,
                        .sampling = so,
                        .top_logprobs = -1,
                        .logit_bias = bias,
                        .n_logit_bias = n_bias,
                        .ignore_eos = true,
                        .keep_logits = true};
    mw_err err = {{0}};
    assert_int_equal(co_sched_submit(e->s, &gp, on_output, r, &r->job, &err), CO_SUBMIT_OK);
}

static void submit(env *e, result *r, const int32_t *prompt, int n, int max_tokens, float temp,
                   uint64_t seed) {
    submit_biased(e, r, prompt, n, max_tokens, temp, seed, NULL, 0);
}

static void run_until(env *e, result *rs, int n) {
    for (;;) {
        bool all = true;
        for (int i = 0; i < n; i++) all = all && rs[i].done;
        if (all) return;
        uv_run(&e->loop, UV_RUN_ONCE);
    }
}

static void invariance(kn_numerics num, float temp) {
    int32_t pa[30], po[7][40];
    prompt_of(pa, 30, 0);
    for (int k = 0; k < 7; k++) prompt_of(po[k], 3 + 5 * k, k + 1);
    env e;
    /* alone: the prompt in chunks of 7 rows, then decoding alone */
    env_open(&e, num, 8, 7, 8);
    result alone;
    submit(&e, &alone, pa, 30, 40, temp, 1234);
    run_until(&e, &alone, 1);
    env_close(&e);
    /* among 7 others: three started before it (decoding while it prefills), four with it, of
     * other lengths and chunks of 5 rows, some ending before it */
    env_open(&e, num, 8, 5, 8);
    result r[8];
    for (int k = 0; k < 3; k++) submit(&e, &r[k + 1], po[k], 3 + 5 * k, 10 + 20 * k, 0.7f, k);
    while (r[1].n < 2) uv_run(&e.loop, UV_RUN_ONCE);
    submit(&e, &r[0], pa, 30, 40, temp, 1234);
    for (int k = 3; k < 7; k++) submit(&e, &r[k + 1], po[k], 3 + 5 * k, 5 + 7 * k, 0.0f, k);
    run_until(&e, r, 8);
    env_close(&e);
    assert_int_equal(alone.n, 40);
    assert_int_equal(r[0].n, 40);
    assert_memory_equal(alone.tok, r[0].tok, 40 * sizeof(int32_t));
    assert_int_equal(alone.rows, 40);
    assert_int_equal(r[0].rows, 40);
    /* bit for bit */
    assert_memory_equal(alone.logits, r[0].logits, 40 * 512 * sizeof(float));
    for (int k = 0; k < 8; k++) {
        assert_int_equal(r[k].finish, CO_FINISH_LENGTH);
        free(r[k].logits);
    }
    free(alone.logits);
}

static void test_invariance_f32_greedy(void **st) {
    (void)st;
    invariance(KN_NUM_F32, 0.0f);
}

static void test_invariance_q8_sampled(void **st) {
    (void)st;
    invariance(KN_NUM_Q8, 0.8f);
    /* with top-k, min-p and every penalty on (each request's own history) */
    sampling_extra = (md_sampler_opts){.top_k = 40,
                                       .min_p = 0.02f,
                                       .presence_penalty = 0.4f,
                                       .frequency_penalty = 0.3f,
                                       .repetition_penalty = 1.2f};
    invariance(KN_NUM_Q8, 0.8f);
    sampling_extra = (md_sampler_opts){.repetition_penalty = 1};
}

/* A test's setup and teardown that run it on kimi-linear-tiny (the teardown restores the
 * default even when the test fails). */
static int on_kimi_linear(void **st) {
    (void)st;
    fixture_model = "llamacpp/kimi-linear-tiny/model.gguf";
    return 0;
}

static int on_kimi_k3(void **st) {
    (void)st;
    fixture_model = "llamacpp/kimi-k3-tiny/model.gguf";
    return 0;
}

static int on_gpt_oss(void **st) {
    (void)st;
    fixture_model = "llamacpp/gpt-oss-tiny/model.gguf";
    return 0;
}

static void test_invariance_kimi(void **st) {
    (void)st;
    invariance(KN_NUM_F32, 0.0f);
    invariance(KN_NUM_Q8, 0.8f);
}

/* Greedy with penalties: every token is the argmax of the model's row (kept as the model's own)
 * after the penalties of the prompt and of the tokens before it; and they change the reply. The
 * penalized prompt ends with the first tokens of the plain reply, which a random model's greedy
 * loop would say again: the prompt's penalty then matters as well. */
static void test_penalties(void **st) {
    (void)st;
    enum { P0 = 10, G = 8, P = P0 + G, N = 40, V = 512 };
    int32_t p[P];
    prompt_of(p, P0, 4);
    env e;
    env_open(&e, KN_NUM_Q8, 2, 16, 2);
    result r[2];
    submit(&e, &r[0], p, P0, N, 0.0f, 0);
    run_until(&e, r, 1);
    memcpy(p + P0, r[0].tok, G * sizeof(int32_t));
    const float rep = 1.5f, freq = 0.6f, pres = 0.4f;
    sampling_extra = (md_sampler_opts){
        .presence_penalty = pres, .frequency_penalty = freq, .repetition_penalty = rep};
    submit(&e, &r[1], p, P, N, 0.0f, 0);
    sampling_extra = (md_sampler_opts){.repetition_penalty = 1};
    run_until(&e, r, 2);
    env_close(&e);
    const result plain = r[0], pen = r[1];
    assert_int_equal(pen.n, N);
    assert_int_equal(pen.rows, N);
    int count[V] = {0}, differs = 0, prompt_counts = 0;
    bool in_prompt[V] = {0};
    for (int i = 0; i < P; i++) in_prompt[p[i]] = true;
    for (int k = 0; k < N; k++) {
        float row[V], unprompted[V];
        memcpy(row, pen.logits + (size_t)k * V, sizeof row);
        differs += md_argmax(row, V) != pen.tok[k];
        for (int t = 0; t < V; t++) {
            const float l = row[t], rl = l > 0 ? l / rep : l * rep;
            const float sampled = count[t] ? (float)count[t] * freq + pres : 0;
            row[t] = (in_prompt[t] || count[t] ? rl : l) - sampled;
            unprompted[t] = (count[t] ? rl : l) - sampled;
        }
        assert_int_equal(md_argmax(row, V), pen.tok[k]);
        prompt_counts += md_argmax(unprompted, V) != pen.tok[k];
        count[pen.tok[k]]++;
    }
    assert_true(differs > 0);
    assert_true(prompt_counts > 0); /* the prompt's tokens were penalized too */
    assert_memory_not_equal(plain.tok + G, pen.tok, (N - G) * sizeof(int32_t));
    free(plain.logits);
    free(pen.logits);
}

/* Greedy through the scheduler = one sequence fed token by token (the generate path). */
static void test_matches_plain_decode(void **st) {
    (void)st;
    int32_t p[12];
    prompt_of(p, 12, 9);
    env e;
    env_open(&e, KN_NUM_Q8, 2, 4, 2);
    result r;
    submit(&e, &r, p, 12, 20, 0.0f, 0);
    run_until(&e, &r, 1);
    env_close(&e);
    /* reference: a context of its own */
    mw_err err = {{0}};
    env x;
    model_open(&x, KN_NUM_Q8, NULL, 1, 64);
    md_row rows[12];
    for (int i = 0; i < 12; i++) rows[i] = (md_row){0, i, p[i], i == 11};
    float logits[512];
    assert_int_equal(md_forward(x.ctx, rows, 12, logits, &err), 0);
    for (int k = 0; k < 20; k++) {
        int32_t t = md_argmax(logits, 512);
        assert_int_equal(t, r.tok[k]);
        md_row row = {0, 12 + k, t, 1};
        assert_int_equal(md_forward(x.ctx, &row, 1, logits, &err), 0);
    }
    model_close(&x);
    free(r.logits);
}

static void test_stop_ids_and_limits(void **st) {
    (void)st;
    int32_t p[6];
    prompt_of(p, 6, 3);
    env e;
    env_open(&e, KN_NUM_Q8, 1, 16, 1);
    /* learn the third greedy token, then stop on it */
    result a;
    submit(&e, &a, p, 6, 5, 0.0f, 0);
    run_until(&e, &a, 1);
    free(a.logits);
    result b = {0};
    co_gen_params gp = {.prompt = p,
                        .n_prompt = 6,
                        .max_tokens = 5,
                        .sampling = {.top_p = 1, .repetition_penalty = 1},
                        .top_logprobs = 3,
                        .stop_ids = &a.tok[2],
                        .n_stop_ids = 1};
    mw_err err = {{0}};
    assert_int_equal(co_sched_submit(e.s, &gp, on_output, &b, &b.job, &err), CO_SUBMIT_OK);
    /* one slot, one queue place: b holds one of them, so at most one more is taken */
    result extra[3];
    memset(extra, 0, sizeof extra);
    gp.stop_ids = NULL;
    gp.n_stop_ids = 0;
    int ok = 0;
    co_submit_rc rc;
    while ((rc = co_sched_submit(e.s, &gp, on_output, &extra[ok], &extra[ok].job, &err)) ==
           CO_SUBMIT_OK)
        ok++;
    assert_int_equal(rc, CO_SUBMIT_FULL);
    assert_in_range(ok, 0, 1);
    assert_non_null(strstr(err.msg, "capacity"));
    run_until(&e, extra, ok);
    for (int i = 0; i < ok; i++) free(extra[i].logits);
    run_until(&e, &b, 1);
    assert_int_equal(b.finish, CO_FINISH_STOP);
    assert_int_equal(b.n, 3);
    result d = {0};
    /* invalid requests */
    int32_t big = 512;
    gp.prompt = &big;
    gp.n_prompt = 1;
    assert_int_equal(co_sched_submit(e.s, &gp, on_output, &d, &d.job, &err), CO_SUBMIT_INVALID);
    assert_non_null(strstr(err.msg, "vocabulary"));
    gp.prompt = p;
    gp.n_prompt = 6;
    gp.max_tokens = 196;
    assert_int_equal(co_sched_submit(e.s, &gp, on_output, &d, &d.job, &err), CO_SUBMIT_INVALID);
    assert_non_null(strstr(err.msg, "positions"));
    co_sched_drain(e.s);
    gp.max_tokens = 2;
    assert_int_equal(co_sched_submit(e.s, &gp, on_output, &d, &d.job, &err), CO_SUBMIT_STOPPING);
    free(b.logits);
    env_close(&e);
}

/* A cancelled job ends at the next step (after `after` tokens) and its slot serves the next
 * request as a fresh one. */
static void cancel_frees_slot(int after) {
    int32_t p[8];
    prompt_of(p, 8, 4);
    env e;
    env_open(&e, KN_NUM_Q8, 1, 16, 4);
    result a, b;
    submit(&e, &a, p, 8, 150, 0.0f, 0);
    submit(&e, &b, p, 8, 4, 0.0f, 0);
    while (a.n < after) uv_run(&e.loop, UV_RUN_ONCE);
    co_job_cancel(a.job);
    run_until(&e, &b, 1);
    assert_false(a.done); /* no callback after the cancel */
    assert_int_equal(b.finish, CO_FINISH_LENGTH);
    assert_int_equal(b.n, 4);
    assert_memory_equal(a.tok, b.tok, 3 * sizeof(int32_t));
    assert_int_equal(co_sched_jobs(e.s), 0);
    free(b.logits);
    env_close(&e);
}

static void test_cancel_frees_slot(void **st) {
    (void)st;
    cancel_frees_slot(3);
}

/* The cancelled job ran past a delta-rule chunk (8 + 12 positions > 16), so its slot's recurrent
 * state moved on: the next request must not see it. */
static void test_cancel_frees_state_kimi_linear(void **st) {
    (void)st;
    cancel_frees_slot(12);
}

/* logit_bias: -100 on the greedy token makes another one win; +100 forces a token at every step;
 * a bias on a token that never wins changes nothing, and the kept logits (the model's own) are
 * the unbiased run's bit for bit, so the row is restored after sampling. Ids outside the
 * vocabulary and non-finite biases are refused. */
static void test_logit_bias(void **st) {
    (void)st;
    enum { N = 10 };
    int32_t p[9];
    prompt_of(p, 9, 6);
    env e;
    env_open(&e, KN_NUM_F32, 4, 16, 4);
    result plain, banned, forced, idle;
    submit(&e, &plain, p, 9, N, 0.0f, 0);
    run_until(&e, &plain, 1);
    const co_logit_bias ban = {plain.tok[0], -100.0f}, force = {77, 100.0f};
    /* a token no step chose, lowered: it cannot win */
    int32_t unused = 0;
    for (int i = 0; i < N; i++)
        if (plain.tok[i] == unused) unused++, i = -1;
    const co_logit_bias low = {unused, -100.0f};
    submit_biased(&e, &banned, p, 9, N, 0.0f, 0, &ban, 1);
    submit_biased(&e, &forced, p, 9, N, 0.0f, 0, &force, 1);
    submit_biased(&e, &idle, p, 9, N, 0.0f, 0, &low, 1);
    result *all[] = {&banned, &forced, &idle};
    for (int k = 0; k < 3; k++) run_until(&e, all[k], 1);
    assert_int_equal(banned.n, N);
    assert_true(banned.tok[0] != plain.tok[0]);
    assert_memory_equal(banned.logits, plain.logits, 512 * sizeof(float)); /* the first row */
    for (int i = 0; i < N; i++) assert_int_equal(forced.tok[i], 77);
    assert_memory_equal(idle.tok, plain.tok, N * sizeof(int32_t));
    assert_memory_equal(idle.logits, plain.logits, (size_t)N * 512 * sizeof(float));
    /* refused */
    result d = {0};
    mw_err err = {{0}};
    co_logit_bias bad = {512, 1.0f};
    co_gen_params gp = {.prompt = p,
                        .n_prompt = 9,
                        .max_tokens = 2,
                        .sampling = {.top_p = 1, .repetition_penalty = 1},
                        .top_logprobs = -1,
                        .logit_bias = &bad,
                        .n_logit_bias = 1};
    assert_int_equal(co_sched_submit(e.s, &gp, on_output, &d, &d.job, &err), CO_SUBMIT_INVALID);
    assert_non_null(strstr(err.msg, "vocabulary"));
    bad = (co_logit_bias){3, NAN};
    assert_int_equal(co_sched_submit(e.s, &gp, on_output, &d, &d.job, &err), CO_SUBMIT_INVALID);
    result *frees[] = {&plain, &banned, &forced, &idle};
    for (int k = 0; k < 4; k++) free(frees[k]->logits);
    env_close(&e);
}

static void feed(co_stop *s, const char *const *pieces, int n, co_buf *out, int *hit_at) {
    *hit_at = -1;
    for (int i = 0; i < n; i++)
        if (co_stop_feed(s, pieces[i], strlen(pieces[i]), out)) {
            *hit_at = i;
            return;
        }
    co_stop_flush(s, out);
}

static void test_stop_strings(void **st) {
    (void)st;
    const char *stops[] = {"</end>", "STOP"};
    co_stop s;
    mw_err err = {{0}};
    assert_int_equal(co_stop_init(&s, stops, 2, &err), 0);
    co_buf out = {0};
    int hit;
    const char *a[] = {"hello <", "/e", "nd> never"};
    feed(&s, a, 3, &out, &hit);
    assert_int_equal(hit, 2);
    assert_string_equal(out.p, "hello ");
    co_stop_free(&s);
    /* a false start is released; text before a possible start is not held */
    assert_int_equal(co_stop_init(&s, stops, 2, &err), 0);
    co_buf_clear(&out);
    const char *b[] = {"ST", "OR", "E </e", "x"};
    co_buf step = {0};
    assert_false(co_stop_feed(&s, b[0], 2, &step));
    assert_int_equal(step.len, 0); /* "ST" may start STOP */
    assert_false(co_stop_feed(&s, b[1], 2, &step));
    assert_string_equal(step.p, "STOR");
    feed(&s, b + 2, 2, &out, &hit);
    assert_int_equal(hit, -1);
    assert_string_equal(out.p, "E </ex");
    co_stop_free(&s);
    /* the earliest stop string wins, even when another completes in the same piece */
    assert_int_equal(co_stop_init(&s, stops, 2, &err), 0);
    co_buf_clear(&out);
    const char *c[] = {"aSTO", "P</end>"};
    feed(&s, c, 2, &out, &hit);
    assert_int_equal(hit, 1);
    assert_string_equal(out.p, "a");
    co_stop_free(&s);
    const char *empty[] = {""};
    assert_int_equal(co_stop_init(&s, empty, 1, &err), -1);
    co_buf_free(&out);
    co_buf_free(&step);
}

/* A loop that is slow to take output (a busy HTTP connection): each callback returns only after
 * the model thread has finished one more step, so the model thread marks the jobs ready again
 * while the loop is still walking the ready list it took, and jobs end at different steps, so the
 * new list skips some of the old one's. Every job still gets each of its tokens, ends once and is
 * freed (LeakSanitizer checks that at exit: a walk that followed a rewritten link skipped a job
 * and leaked its reference, or released another's twice). */
static atomic_int steps_done;

static void count_step(void *ud) {
    (void)ud;
    atomic_fetch_add(&steps_done, 1);
}

static void on_output_slowly(void *ud, co_job *job) {
    const int seen = atomic_load(&steps_done);
    const double give_up = co_now() + 5;
    while (atomic_load(&steps_done) == seen && co_now() < give_up) usleep(100);
    on_output(ud, job);
}

static void test_slow_loop_takes_every_output(void **st) {
    (void)st;
    enum { N = 8 };
    int32_t p[N][6];
    env e;
    env_open_with(&e, KN_NUM_Q8, N, 16, N, count_step);
    result r[N];
    for (int k = 0; k < N; k++) {
        prompt_of(p[k], 6, k);
        memset(&r[k], 0, sizeof r[k]);
        co_gen_params gp = {.prompt = p[k],
                            .n_prompt = 6,
                            .max_tokens = 6 + 3 * k, /* ending at different steps */
                            .sampling = {.top_p = 1, .repetition_penalty = 1},
                            .top_logprobs = -1,
                            .ignore_eos = true};
        mw_err err = {{0}};
        assert_int_equal(co_sched_submit(e.s, &gp, on_output_slowly, &r[k], &r[k].job, &err),
                         CO_SUBMIT_OK);
    }
    const double give_up = co_now() + 120;
    for (;;) {
        bool all = true;
        for (int k = 0; k < N; k++) all = all && r[k].done;
        if (all) break;
        if (co_now() > give_up) fail_msg("a job's output never reached the loop");
        uv_run(&e.loop, UV_RUN_NOWAIT);
        usleep(200);
    }
    for (int k = 0; k < N; k++) {
        assert_int_equal(r[k].n, 6 + 3 * k);
        assert_int_equal(r[k].finish, CO_FINISH_LENGTH);
    }
    assert_int_equal(co_sched_jobs(e.s), 0);
    env_close(&e);
}

/* An idle scheduler still calls after_step every idle_ms (the server's /health reads the
 * backend there), and none without idle_ms. */
static void test_idle_ticks(void **st) {
    (void)st;
    for (int idle_ms = 0; idle_ms <= 20; idle_ms += 20) {
        env e;
        mw_err err = {{0}};
        model_open(&e, KN_NUM_Q8, kn_pool_create(1), 1, 200);
        uv_loop_init(&e.loop);
        co_sched_params sp = {.ctx = e.ctx,
                              .n_slots = 1,
                              .n_ctx = 200,
                              .n_vocab = e.model->cfg.n_vocab,
                              .n_layer = e.model->cfg.n_layer,
                              .chunk = 16,
                              .max_queue = 1,
                              .after_step = count_step,
                              .idle_ms = idle_ms};
        atomic_store(&steps_done, 0);
        if (co_sched_new(&e.loop, &sp, &e.s, &err)) fail_msg("%s", err.msg);
        usleep(300000);
        const int ticks = atomic_load(&steps_done);
        if (idle_ms) {
            if (ticks < 5 || ticks > 16) fail_msg("%d idle ticks in 300 ms of 20", ticks);
        } else {
            assert_int_equal(ticks, 0);
        }
        env_close(&e);
    }
}

/* Runs the loop for about ms milliseconds (outputs arrive meanwhile). */
static void run_for(env *e, int ms) {
    for (int i = 0; i < ms / 5; i++) {
        uv_run(&e->loop, UV_RUN_NOWAIT);
        usleep(5000);
    }
}

/* A paused job (its client fell behind) leaves the batch but keeps its slot: no tokens, no steps
 * spent on it, the job queued behind it still waiting; resumed, it goes on to the same tokens a
 * job never paused gives. Cancelled while paused, its slot serves the next job. */
static void test_pause_keeps_slot(void **st) {
    (void)st;
    int32_t p[8];
    prompt_of(p, 8, 6);
    env e;
    env_open_with(&e, KN_NUM_Q8, 1, 16, 4, count_step);
    result ref, a, b;
    submit(&e, &ref, p, 8, 40, 0.0f, 0);
    run_until(&e, &ref, 1);
    submit(&e, &a, p, 8, 40, 0.0f, 0);
    submit(&e, &b, p, 8, 4, 0.0f, 0);
    while (a.n < 3) uv_run(&e.loop, UV_RUN_ONCE);
    co_job_pause(a.job, true);
    run_for(&e, 100); /* a step under way when it paused may still give a token */
    const int64_t n_paused = a.n;
    const int steps = atomic_load(&steps_done);
    run_for(&e, 300);
    assert_int_equal(a.n, n_paused);
    assert_int_equal(b.n, 0);                           /* the slot stays a's */
    assert_true(atomic_load(&steps_done) - steps <= 1); /* the model thread is not spinning */
    assert_int_equal(co_sched_jobs(e.s), 2);
    co_job_pause(a.job, false);
    run_until(&e, &a, 1);
    run_until(&e, &b, 1);
    assert_int_equal(a.finish, CO_FINISH_LENGTH);
    assert_int_equal(a.n, 40);
    assert_memory_equal(a.tok, ref.tok, 40 * sizeof(int32_t));
    assert_int_equal(b.n, 4);
    /* cancelled while paused */
    result c, d;
    submit(&e, &c, p, 8, 40, 0.0f, 0);
    submit(&e, &d, p, 8, 4, 0.0f, 0);
    while (c.n < 2) uv_run(&e.loop, UV_RUN_ONCE);
    co_job_pause(c.job, true);
    run_for(&e, 100);
    assert_int_equal(d.n, 0);
    co_job_cancel(c.job);
    run_until(&e, &d, 1);
    assert_int_equal(d.finish, CO_FINISH_LENGTH);
    assert_int_equal(co_sched_jobs(e.s), 0);
    free(ref.logits);
    free(a.logits);
    free(b.logits);
    free(d.logits);
    env_close(&e);
}

/* An expert backend that runs the local one, except that once armed it fails the first batch of
 * two rows or more the way a remote backend fails when experts have no live owner, naming the
 * batch's last row as the one that needed them (row_lost). */
typedef struct losing {
    md_expert_backend be;
    md_expert_backend *inner;
    bool armed;  /* set before the jobs are submitted (the submission's mutex orders it) */
    bool failed; /* the last batch failed (model thread) */
    int64_t lost;
} losing;

static int losing_run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    losing *l = b->impl;
    l->failed = l->armed && batch->T >= 2;
    if (!l->failed) return l->inner->run(l->inner, batch, out, err);
    l->armed = false;
    l->lost = batch->T - 1;
    return mw_errf(err, "layer %d: experts have no live owner", batch->layer);
}

static bool losing_row_lost(const md_expert_backend *b, int64_t row) {
    const losing *l = b->impl;
    return l->failed && row == l->lost;
}

/* Job a (a one-token prompt, 30 tokens) and job b (a 5-token prompt) through the losing backend:
 * whether b is admitted with a or once a decodes, the first step of two rows or more holds b's
 * prompt last. */
static void lost_rows_run(bool armed, bool names_rows, result *a, result *b) {
    env e;
    mw_err err = {{0}};
    model_open(&e, KN_NUM_Q8, kn_pool_create(2), 2, 200);
    losing l = {.be = {.name = "losing",
                       .run = losing_run,
                       .row_lost = names_rows ? losing_row_lost : NULL,
                       .impl = &l},
                .inner = e.experts,
                .armed = armed};
    md_ctx_free(e.ctx);
    md_ctx_params cp = {
        .numerics = KN_NUM_Q8, .pool = e.pool, .experts = &l.be, .n_seq = 2, .n_ctx = 200};
    if (md_ctx_new(e.model, &cp, &e.ctx, &err)) fail_msg("%s", err.msg);
    uv_loop_init(&e.loop);
    co_sched_params sp = {.ctx = e.ctx,
                          .n_slots = 2,
                          .n_ctx = 200,
                          .n_vocab = e.model->cfg.n_vocab,
                          .n_layer = e.model->cfg.n_layer,
                          .chunk = 16,
                          .max_queue = 2,
                          .experts = &l.be};
    if (co_sched_new(&e.loop, &sp, &e.s, &err)) fail_msg("%s", err.msg);
    int32_t pa[1], pb[5];
    prompt_of(pa, 1, 3);
    prompt_of(pb, 5, 4);
    submit(&e, a, pa, 1, 30, 0.0f, 1);
    submit(&e, b, pb, 5, 10, 0.0f, 2);
    while (!a->done || !b->done) uv_run(&e.loop, UV_RUN_ONCE);
    env_close(&e);
}

/* A step that fails because some rows needed lost experts fails only their jobs: the backend's
 * row_lost names them; the other jobs run the step again and end as if nothing happened. A
 * backend that names no rows fails every job of the step. */
static void test_lost_rows_fail_their_jobs_only(void **st) {
    (void)st;
    result ref_a, ref_b, a, b;
    lost_rows_run(false, true, &ref_a, &ref_b);
    assert_int_equal(ref_a.finish, CO_FINISH_LENGTH);
    assert_int_equal(ref_b.finish, CO_FINISH_LENGTH);
    lost_rows_run(true, true, &a, &b);
    assert_int_equal(b.finish, CO_FINISH_ERROR);
    assert_int_equal(a.finish, CO_FINISH_LENGTH);
    assert_int_equal(a.n, 30);
    assert_memory_equal(a.tok, ref_a.tok, 30 * sizeof(int32_t));
    assert_memory_equal(a.logits, ref_a.logits, 30 * 512 * sizeof(float));
    free(a.logits);
    free(b.logits);
    lost_rows_run(true, false, &a, &b);
    assert_int_equal(a.finish, CO_FINISH_ERROR);
    assert_int_equal(b.finish, CO_FINISH_ERROR);
    free(a.logits);
    free(b.logits);
    free(ref_a.logits);
    free(ref_b.logits);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_invariance_f32_greedy),
        cmocka_unit_test(test_invariance_q8_sampled),
        cmocka_unit_test_setup_teardown(test_invariance_kimi, on_kimi_linear, on_gpt_oss),
        cmocka_unit_test_setup_teardown(test_invariance_kimi, on_kimi_k3, on_gpt_oss),
        cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_matches_plain_decode),
        cmocka_unit_test(test_stop_ids_and_limits),
        cmocka_unit_test(test_cancel_frees_slot),
        cmocka_unit_test_setup_teardown(test_cancel_frees_state_kimi_linear, on_kimi_linear,
                                        on_gpt_oss),
        cmocka_unit_test(test_slow_loop_takes_every_output),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_idle_ticks),
        cmocka_unit_test(test_pause_keeps_slot),
        cmocka_unit_test(test_lost_rows_fail_their_jobs_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
