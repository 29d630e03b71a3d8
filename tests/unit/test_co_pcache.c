/* tests/unit/test_co_pcache.c — the prompt cache through the scheduler, on the fixture models of
 * four families (gpt-oss-tiny: sliding-window layers with a window of 8, restored from
 * snapshots; qwen3moe-tiny: full attention, any block a restore point; deepseek2-tiny: MLA's
 * latent rows; kimi-linear-tiny: KDA layers' recurrent and convolution states): a request that
 * shares a prefix ending mid-block with an earlier one, the same request again, and a second turn
 * that continues the first one's prompt and reply each give bit-identical logits in f32 to a
 * server without the cache, while reporting the positions they reused. A budget too small for
 * everything evicts and still never changes a result. n choices of one prompt share its prefill
 * (its slot copied, ring and KDA states included) and give each what a request of its own with
 * the choice's seed gives. */
#include "tests/support/mw_test.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "coordinator/co_pcache.h"
#include "coordinator/co_sched.h"
#include "model/md_local.h"
#include "model/md_model.h"

#define V       512
#define MAX_GEN 32
#define N_CTX   256

typedef struct result {
    int32_t tok[MAX_GEN];
    int64_t n, cached;
    float *logits;
    int64_t rows;
    bool done;
} result;

typedef struct env {
    vx_source *src;
    md_model *model;
    md_expert_backend *experts;
    md_ctx *ctx;
    uv_loop_t loop;
    co_sched *s;
    co_metrics *metrics;
} env;

static void on_output(void *ud, co_job *job) {
    result *r = ud;
    co_job_out o;
    co_job_take(job, &o);
    for (int64_t i = 0; i < o.n_tokens && r->n < MAX_GEN; i++) r->tok[r->n++] = o.tokens[i];
    if (!o.finish) return;
    if (o.finish != CO_FINISH_LENGTH)
        fail_msg("finished with %d: %s", o.finish, o.error ? o.error : "");
    r->cached = o.cached_tokens;
    const float *l = co_job_logits(job, &r->rows);
    r->logits = malloc((size_t)r->rows * V * sizeof(float));
    memcpy(r->logits, l, (size_t)r->rows * V * sizeof(float));
    r->done = true;
    co_job_release(job);
}

static void env_open_n(env *e, const char *model, uint64_t cache_bytes, int chunk, int slots) {
    mw_err err = {{0}};
    memset(e, 0, sizeof *e);
    if (vx_source_open(mwt_fixture(model), NULL, &e->src, &err) ||
        md_model_load(e->src, &e->model, &err) ||
        md_local_backend_new(e->src, &e->model->cfg, NULL, &e->experts, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(e->model->cfg.n_vocab, V);
    md_ctx_params cp = {
        .numerics = KN_NUM_F32, .experts = e->experts, .n_seq = slots, .n_ctx = N_CTX};
    if (md_ctx_new(e->model, &cp, &e->ctx, &err)) fail_msg("%s", err.msg);
    if (co_metrics_new(0, e->model->cfg.n_layer, e->model->cfg.n_expert,
                       e->model->cfg.n_expert_used, &e->metrics, &err))
        fail_msg("%s", err.msg);
    uv_loop_init(&e->loop);
    co_sched_params sp = {.ctx = e->ctx,
                          .n_slots = slots,
                          .n_ctx = N_CTX,
                          .n_vocab = V,
                          .n_layer = e->model->cfg.n_layer,
                          .chunk = chunk,
                          .max_queue = 4,
                          .metrics = e->metrics,
                          .cache_bytes = cache_bytes};
    if (co_sched_new(&e->loop, &sp, &e->s, &err)) fail_msg("%s", err.msg);
}

static void env_open(env *e, const char *model, uint64_t cache_bytes, int chunk) {
    env_open_n(e, model, cache_bytes, chunk, 2);
}

static void env_open_slots(env *e, const char *model, int slots) {
    env_open_n(e, model, 0, 8, slots);
}

static void env_close(env *e) {
    co_sched_free(e->s);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_loop_close(&e->loop);
    md_ctx_free(e->ctx);
    e->experts->destroy(e->experts);
    md_model_free(e->model);
    vx_source_close(e->src);
    co_metrics_free(e->metrics);
}

/* Greedy, kept logits, run to its end. */
static void run(env *e, result *r, const int32_t *prompt, int64_t n, int max_tokens) {
    memset(r, 0, sizeof *r);
    co_gen_params gp = {.prompt = prompt,
                        .n_prompt = n,
                        .max_tokens = max_tokens,
                        .sampling = {.temperature = 0, .top_p = 1, .repetition_penalty = 1},
                        .top_logprobs = -1,
                        .ignore_eos = true,
                        .keep_logits = true};
    co_job *job;
    mw_err err = {{0}};
    assert_int_equal(co_sched_submit(e->s, &gp, on_output, r, &job, &err), CO_SUBMIT_OK);
    while (!r->done) uv_run(&e->loop, UV_RUN_ONCE);
}

static void same(const result *a, const result *b) {
    assert_int_equal(a->n, b->n);
    assert_memory_equal(a->tok, b->tok, (size_t)a->n * sizeof(int32_t));
    assert_int_equal(a->rows, b->rows);
    assert_memory_equal(a->logits, b->logits, (size_t)a->rows * V * sizeof(float));
}

enum { NA = 150, GEN = 20, SHARED = 77, NB = 100, NT = NA + GEN + 9 };

typedef struct prompts {
    int32_t a[NA], b[NB], turn2[NT];
} prompts;

static void make_prompts(prompts *p) {
    for (int i = 0; i < NA; i++) p->a[i] = (int32_t)((i * 37 + 5) % 500);
    /* b shares a's first SHARED tokens: the prefix ends in the middle of a block */
    memcpy(p->b, p->a, SHARED * sizeof(int32_t));
    for (int i = SHARED; i < NB; i++) p->b[i] = (int32_t)((i * 53 + 11) % 500);
}

/* turn2: a, a's reply, then new tokens */
static void make_turn2(prompts *p, const result *a) {
    memcpy(p->turn2, p->a, NA * sizeof(int32_t));
    memcpy(p->turn2 + NA, a->tok, GEN * sizeof(int32_t));
    for (int i = NA + GEN; i < NT; i++) p->turn2[i] = (int32_t)((i * 7 + 3) % 500);
}

static void free_results(result *r, int n) {
    for (int i = 0; i < n; i++) free(r[i].logits);
}

/* snaps: the model needs snapshots (sliding-window or KDA layers), which exist only where a step
 * ended: a prompt step ends on a block boundary, so with a chunk beyond the shared prefix the
 * prefix's blocks are no restore point. */
static void bit_identical(const char *model, int chunk, bool snaps) {
    prompts p;
    make_prompts(&p);
    env e;
    /* without the cache */
    result ref[4];
    env_open(&e, model, 0, chunk);
    run(&e, &ref[0], p.b, NB, GEN);
    run(&e, &ref[1], p.a, NA, GEN);
    make_turn2(&p, &ref[1]);
    run(&e, &ref[2], p.turn2, NT, 8);
    env_close(&e);
    /* with it */
    result got[4];
    env_open(&e, model, 64u << 20, chunk);
    run(&e, &got[0], p.b, NB, GEN);
    assert_int_equal(got[0].cached, 0);
    run(&e, &got[1], p.a, NA, GEN); /* the blocks before the mid-block divergence */
    assert_int_equal(got[1].cached,
                     snaps && chunk > SHARED ? 0 : SHARED / CO_PCACHE_BLOCK * CO_PCACHE_BLOCK);
    run(&e, &got[3], p.a, NA, GEN); /* the same again: all but the last position's block */
    assert_int_equal(got[3].cached, (NA - 1) / CO_PCACHE_BLOCK * CO_PCACHE_BLOCK);
    run(&e, &got[2], p.turn2, NT, 8); /* the prompt and the reply, up to the last block */
    assert_int_equal(got[2].cached, (NA + GEN) / CO_PCACHE_BLOCK * CO_PCACHE_BLOCK);
    env_close(&e);
    same(&ref[0], &got[0]);
    same(&ref[1], &got[1]);
    same(&ref[1], &got[3]);
    same(&ref[2], &got[2]);
    free_results(ref, 3);
    free_results(got, 4);
}

static void test_gpt_oss(void **st) {
    (void)st;
    bit_identical("llamacpp/gpt-oss-tiny/model.gguf", 7, true);
    bit_identical("llamacpp/gpt-oss-tiny/model.gguf", 256, true);
}

static void test_qwen3moe(void **st) {
    (void)st;
    bit_identical("llamacpp/qwen3moe-tiny/model.gguf", 7, false);
    bit_identical("llamacpp/qwen3moe-tiny/model.gguf", 256, false);
}

static void test_deepseek2(void **st) {
    (void)st;
    bit_identical("llamacpp/deepseek2-tiny/model.gguf", 40, false);
}

static void test_kimi_linear(void **st) {
    (void)st;
    bit_identical("llamacpp/kimi-linear-tiny/model.gguf", 7, true);
    bit_identical("llamacpp/kimi-linear-tiny/model.gguf", 256, true);
}

/* A budget of a few blocks: blocks are evicted (never one a running sequence continues), what is
 * held stays within it, and every result is still the uncached one. */
static void test_eviction(void **st) {
    (void)st;
    const char *model = "llamacpp/gpt-oss-tiny/model.gguf";
    prompts p;
    make_prompts(&p);
    env e;
    result ref[2], got[3];
    env_open(&e, model, 0, 16);
    run(&e, &ref[0], p.a, NA, GEN);
    run(&e, &ref[1], p.b, NB, GEN);
    env_close(&e);
    /* room for about three blocks with their snapshots */
    md_ctx *probe = NULL;
    env_open(&e, model, 1, 16);
    probe = e.ctx;
    const uint64_t blk = CO_PCACHE_BLOCK * md_seq_pos_bytes(probe) + md_seq_snap_bytes(probe) + 256;
    env_close(&e);
    env_open(&e, model, 3 * blk, 16);
    run(&e, &got[0], p.a, NA, GEN);
    run(&e, &got[1], p.b, NB, GEN);
    run(&e, &got[2], p.a, NA, GEN);
    co_buf page = {0};
    co_metrics_write(e.metrics, &page);
    env_close(&e);
    same(&ref[0], &got[0]);
    same(&ref[1], &got[1]);
    same(&ref[0], &got[2]);
    /* the page's figures: evictions happened, the bytes stayed within the bound */
    const char *ev = strstr(page.p, "\nmoewire_prompt_cache_evicted_blocks_total ");
    const char *by = strstr(page.p, "\nmoewire_prompt_cache_bytes ");
    assert_non_null(ev);
    assert_non_null(by);
    assert_true(atof(ev + strlen("\nmoewire_prompt_cache_evicted_blocks_total ")) > 0);
    assert_true(atof(by + strlen("\nmoewire_prompt_cache_bytes ")) <= (double)(3 * blk));
    co_buf_free(&page);
    free_results(ref, 2);
    free_results(got, 3);
}

/* n choices of one prompt: prefilled once (the prompt tokens counted once), each choice's
 * tokens and logits bit-identical to a request of its own with the choice's seed; the choices
 * differ from each other. */
static void choices(const char *model) {
    enum { N = 3, NP = 45, G = 16 };
    int32_t prompt[NP];
    for (int i = 0; i < NP; i++) prompt[i] = (int32_t)((i * 29 + 7) % 500);
    const uint64_t seed = 99;
    co_gen_params gp = {
        .prompt = prompt,
        .n_prompt = NP,
        .max_tokens = G,
        .sampling = {.temperature = 0.9f, .top_p = 1, .repetition_penalty = 1, .seed = seed},
        .top_logprobs = -1,
        .ignore_eos = true,
        .keep_logits = true};
    env e;
    result alone[N];
    env_open(&e, model, 0, 8);
    for (int i = 0; i < N; i++) {
        memset(&alone[i], 0, sizeof alone[i]);
        co_gen_params one = gp;
        one.sampling.seed = co_choice_seed(seed, i);
        co_job *job;
        mw_err err = {{0}};
        assert_int_equal(co_sched_submit(e.s, &one, on_output, &alone[i], &job, &err),
                         CO_SUBMIT_OK);
        while (!alone[i].done) uv_run(&e.loop, UV_RUN_ONCE);
    }
    env_close(&e);
    env_open(&e, model, 0, 8);
    result r[N] = {0};
    void *uds[N] = {&r[0], &r[1], &r[2]};
    co_job *jobs[N];
    mw_err err = {{0}};
    /* more choices than slots: refused */
    void *four[4] = {&r[0], &r[1], &r[2], &r[0]};
    co_job *jobs4[4];
    assert_int_equal(co_sched_submit_n(e.s, &gp, 4, NULL, on_output, four, jobs4, &err),
                     CO_SUBMIT_INVALID);
    env_close(&e);
    env_open_slots(&e, model, N);
    assert_int_equal(co_sched_submit_n(e.s, &gp, N, NULL, on_output, uds, jobs, &err),
                     CO_SUBMIT_OK);
    while (!r[0].done || !r[1].done || !r[2].done) uv_run(&e.loop, UV_RUN_ONCE);
    co_buf page = {0};
    co_metrics_write(e.metrics, &page);
    env_close(&e);
    const char *pt = strstr(page.p, "\nmoewire_prompt_tokens_total ");
    assert_non_null(pt);
    assert_int_equal(atoi(pt + strlen("\nmoewire_prompt_tokens_total ")), NP);
    co_buf_free(&page);
    for (int i = 0; i < N; i++) same(&alone[i], &r[i]);
    assert_memory_not_equal(r[0].tok, r[1].tok, G * sizeof(int32_t));
    assert_memory_not_equal(r[1].tok, r[2].tok, G * sizeof(int32_t));
    free_results(alone, N);
    free_results(r, N);
}

static void test_choices(void **st) {
    (void)st;
    choices("llamacpp/gpt-oss-tiny/model.gguf");
    choices("llamacpp/kimi-linear-tiny/model.gguf");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_oss),   cmocka_unit_test(test_qwen3moe),
        cmocka_unit_test(test_deepseek2), cmocka_unit_test(test_kimi_linear),
        cmocka_unit_test(test_eviction),  cmocka_unit_test(test_choices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
