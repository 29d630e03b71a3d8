/* tests/unit/test_md_lanes.c — ping-pong micro-batches (model/md_lanes.h): a step of several
 * sequences run in 2, 3 or 4 lanes gives the same logits, bit for bit, as the step run whole, for
 * every family's tiny model (shared experts, KDA layers, attention residuals, sliding windows),
 * over a prefill step and decode steps; a long prompt of one sequence splits by rows with the same
 * bits on every family (sliding-window rings and KDA layers too), and so does a step continuing
 * two sequences in lanes shorter than a window and a KDA chunk; the rows are cut into equal lanes;
 * the auto choice splits only when the measured wait outgrows the trunk's time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/md_lanes.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "tests/support/mw_test.h"
#include "tests/support/mwt_lanes.h"
#include "tests/support/mwt_model.h"
#include "vindex/vx_source.h"

/* The run of mwt_lanes_run on the in-process experts of a fixture. */
static float *run(const char *name, int micro_batches, size_t *n_floats, md_lane_stats *st) {
    mwt_model f = mwt_model_fixture(name);
    float *out = mwt_lanes_run(f.model, f.experts, micro_batches, n_floats, st);
    mwt_model_close(&f);
    return out;
}

static void same_in_lanes(const char *name) {
    size_t n1, n;
    md_lane_stats st;
    float *whole = run(name, 1, &n1, &st);
    assert_int_equal(st.split_steps, 0);
    for (int lanes = 2; lanes <= MD_LANES_MAX; lanes++) {
        float *split = run(name, lanes, &n, &st);
        assert_int_equal(n, n1);
        if (memcmp(whole, split, n * sizeof *split))
            fail_msg("%s: %d micro-batches change the logits", name, lanes);
        assert_int_equal(st.split_steps, 1 + MWT_LANES_STEPS);
        assert_int_equal(st.lanes, (uint64_t)lanes * (1 + MWT_LANES_STEPS));
        free(split);
    }
    free(whole);
}

static void test_gptoss(void **state) {
    (void)state;
    same_in_lanes("gpt-oss-tiny");
}

static void test_qwen3moe(void **state) {
    (void)state;
    same_in_lanes("qwen3moe-tiny");
}

static void test_deepseek2(void **state) {
    (void)state;
    same_in_lanes("deepseek2-tiny");
}

static void test_kimi_linear(void **state) {
    (void)state;
    same_in_lanes("kimi-linear-tiny");
}

static void test_kimi_k3(void **state) {
    (void)state;
    same_in_lanes("kimi-k3-tiny");
}

/* A backend over the in-process one that notes, per call of one layer, the rows it was given and
 * the experts they chose. */
#define PROBE_LAYER 1
typedef struct probe {
    md_expert_backend be, *inner;
    int n_calls;
    int64_t rows[8];
    uint64_t chose[8][64]; /* per call and row: the experts (mod 64) it chose */
    int32_t unique[16];    /* md_ctx_unique_experts of the prompt's step, per layer */
} probe;

static int probe_run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    probe *p = b->impl;
    if (batch->layer == PROBE_LAYER && p->n_calls < 8) {
        p->rows[p->n_calls] = batch->T;
        for (int64_t i = 0; i < batch->T * batch->k && i / batch->k < 64; i++)
            p->chose[p->n_calls][i / batch->k] |= 1ull << (batch->experts[i] & 63);
        p->n_calls++;
    }
    return p->inner->run(p->inner, batch, out, err);
}

/* One long prompt of a single sequence (logits at every position), then two decode steps, then a
 * step continuing it by MIX_ROWS rows (past a KDA chunk boundary) interleaved with a new
 * sequence's MIX_NEW, then a decode step of each, with `micro_batches`; the calls of layer
 * PROBE_LAYER in the prefill go to *pr. */
#define LONG_PROMPT 45
#define MIX_ROWS    16
#define MIX_NEW     6
#define LONG_OUT    (LONG_PROMPT + 2 + MIX_ROWS + MIX_NEW + 2)
static float *run_long(md_model *model, md_expert_backend *inner, int micro_batches, size_t *n,
                       md_lane_stats *st, probe *pr) {
    mw_err e;
    *pr = (probe){.be = {.name = "probe", .run = probe_run}, .inner = inner};
    pr->be.impl = pr;
    md_ctx *c = mwt_lanes_ctx(model, &pr->be, micro_batches, 2);
    const int64_t V = model->cfg.n_vocab;
    *n = (size_t)LONG_OUT * (size_t)V;
    float *out = malloc(*n * sizeof *out);
    assert_non_null(out);
    md_row rows[LONG_PROMPT];
    for (int i = 0; i < LONG_PROMPT; i++) rows[i] = (md_row){1, i, (i * 53 + 7) % 250 + 3, 1};
    if (md_ctx_count_unique(c, &e)) fail_msg("%s", e.msg);
    if (md_forward(c, rows, LONG_PROMPT, out, &e)) fail_msg("%s", e.msg);
    assert_true(model->cfg.n_layer <= 16);
    memcpy(pr->unique, md_ctx_unique_experts(c), (size_t)model->cfg.n_layer * sizeof *pr->unique);
    const int calls = pr->n_calls;
    for (int step = 0; step < 2; step++) {
        md_row r = {1, LONG_PROMPT + step, 17 + step * 29, 1};
        if (md_forward(c, &r, 1, out + (size_t)(LONG_PROMPT + step) * (size_t)V, &e))
            fail_msg("%s", e.msg);
    }
    /* sequence 0 first (the cut takes it first), then the two alternating: lanes of 5 or 6 rows,
     * the continued sequence's rows not first in its lane */
    md_row mix[MIX_ROWS + MIX_NEW];
    int64_t m = 0;
    for (int i = 0; i < MIX_ROWS || i < MIX_NEW; i++) {
        if (i < MIX_NEW) mix[m++] = (md_row){0, i, (i * 31 + 5) % 250 + 3, 1};
        if (i < MIX_ROWS) mix[m++] = (md_row){1, LONG_PROMPT + 2 + i, (i * 67 + 11) % 250 + 3, 1};
    }
    float *at = out + (size_t)(LONG_PROMPT + 2) * (size_t)V;
    if (md_forward(c, mix, m, at, &e)) fail_msg("%s", e.msg);
    at += (size_t)m * (size_t)V;
    md_row last[2] = {{0, MIX_NEW, 9, 1}, {1, LONG_PROMPT + 2 + MIX_ROWS, 41, 1}};
    if (md_forward(c, last, 2, at, &e)) fail_msg("%s", e.msg);
    pr->n_calls = calls;
    *st = md_ctx_lane_stats(c);
    md_ctx_free(c);
    return out;
}

/* A long prompt of one sequence splits by rows: lane after lane, each lane's attention reading
 * the lower lanes' keys of the same layer (from the cache, or from a window filled from the lower
 * lane's staged ring rows), each lane's KDA starting from the state the lower lane left, the same
 * bits as the prompt whole; the lanes' rows are equal within one, and rows of different lanes
 * choose different experts. */
static void long_prompt(const char *name) {
    mwt_model f = mwt_model_fixture(name);
    md_model *model = f.model;
    md_expert_backend *inner = f.experts;
    size_t n1, n;
    md_lane_stats st;
    probe pr;
    float *whole = run_long(model, inner, 1, &n1, &st, &pr);
    const probe one = pr;
    assert_int_equal(pr.n_calls, 1);
    assert_int_equal(pr.rows[0], LONG_PROMPT);
    for (int lanes = 2; lanes <= MD_LANES_MAX; lanes++) {
        float *split = run_long(model, inner, lanes, &n, &st, &pr);
        assert_int_equal(n, n1);
        /* the distinct experts per layer counted over the lanes: the whole step's */
        assert_memory_equal(pr.unique, one.unique, sizeof pr.unique);
        assert_true(one.unique[PROBE_LAYER] > model->cfg.n_expert_used);
        if (memcmp(whole, split, n * sizeof *split))
            fail_msg("%s: a prompt in %d micro-batches changes the logits", name, lanes);
        free(split);
        /* the prompt and the mixed step split, the last step's two rows in two lanes; the
         * decode steps of one row cannot */
        assert_int_equal(st.split_steps, 3);
        assert_int_equal(st.lanes, (uint64_t)(2 * lanes + 2));
        assert_int_equal(pr.n_calls, lanes);
        /* rows of each lane chose other experts than rows of the lane before */
        for (int i = 0; i < lanes; i++) {
            assert_in_range(pr.rows[i], LONG_PROMPT / lanes, LONG_PROMPT / lanes + 1);
            if (i == 0) continue;
            bool differ = false;
            for (int a = 0; a < pr.rows[i - 1]; a++)
                for (int b = 0; b < pr.rows[i]; b++) differ |= pr.chose[i - 1][a] != pr.chose[i][b];
            assert_true(differ);
        }
    }
    free(whole);
    mwt_model_close(&f);
}

static void test_long_prompt_qwen3moe(void **state) {
    (void)state;
    long_prompt("qwen3moe-tiny");
}

static void test_long_prompt_deepseek2(void **state) {
    (void)state;
    long_prompt("deepseek2-tiny");
}

/* window 8: lanes of 11 or 12 rows in the prompt, of 5 or 6 in the mixed step */
static void test_long_prompt_gptoss(void **state) {
    (void)state;
    long_prompt("gpt-oss-tiny");
}

/* KDA chunks of 16 positions: lane boundaries inside chunks, lanes completing none or two */
static void test_long_prompt_kimi_linear(void **state) {
    (void)state;
    long_prompt("kimi-linear-tiny");
}

static void test_long_prompt_kimi_k3(void **state) {
    (void)state;
    long_prompt("kimi-k3-tiny");
}

/* The cut: equal lanes, each sequence's rows in position order across lanes. */
static void test_cut(void **state) {
    (void)state;
    md_row rows[12];
    const int seq[12] = {3, 3, 0, 3, 3, 0, 5, 3, 0, 5, 3, 7};
    int pos[8] = {0};
    for (int t = 0; t < 12; t++) rows[t] = (md_row){seq[t], pos[seq[t]]++, 1, 1};
    int32_t lane_of[12], seq_at[8];
    int64_t seq_rows[8] = {0};
    for (int i = 0; i < 8; i++) seq_at[i] = -1;
    md_lanes_cut(rows, 12, 3, lane_of, seq_at, seq_rows);
    /* sequence-major: 3 (6 rows: 0-5), 0 (3: 6-8), 5 (2: 9-10), 7 (1: 11); lanes of 4 */
    const int32_t want[12] = {0, 0, 1, 0, 0, 1, 2, 1, 2, 2, 1, 2};
    assert_memory_equal(lane_of, want, sizeof want);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(seq_at[i], -1);
        assert_int_equal(seq_rows[i], 0);
    }
}

/* A backend over the in-process one that fails its `fail_at`-th call (counted from 1; 0 never). */
typedef struct failing {
    md_expert_backend be, *inner;
    int calls, fail_at;
} failing;

static int failing_run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    failing *f = b->impl;
    if (++f->calls == f->fail_at) return mw_errf(err, "call %d fails", f->calls);
    return f->inner->run(f->inner, batch, out, err);
}

/* A prompt of 20 tokens, a step of 25 more (whose `fail_at`-th expert call fails, and which then
 * runs again), two decode steps; in 4 lanes. The logits of the steps that succeed. */
#define FAIL_HEAD 20
#define FAIL_STEP 25
static float *run_failing(md_model *model, md_expert_backend *inner, int fail_at, size_t *n) {
    mw_err e;
    failing f = {.be = {.name = "failing", .run = failing_run}, .inner = inner};
    f.be.impl = &f;
    md_ctx *c = mwt_lanes_ctx(model, &f.be, MD_LANES_MAX, 2);
    const int64_t V = model->cfg.n_vocab, rows_n = FAIL_HEAD + FAIL_STEP + 2;
    *n = (size_t)rows_n * (size_t)V;
    float *out = malloc(*n * sizeof *out);
    assert_non_null(out);
    md_row rows[FAIL_HEAD + FAIL_STEP + 2];
    for (int i = 0; i < rows_n; i++) rows[i] = (md_row){1, i, (i * 41 + 13) % 250 + 3, 1};
    if (md_forward(c, rows, FAIL_HEAD, out, &e)) fail_msg("%s", e.msg);
    f.calls = 0;
    f.fail_at = fail_at;
    float *at = out + (size_t)FAIL_HEAD * (size_t)V;
    if (fail_at) {
        assert_int_equal(md_forward(c, rows + FAIL_HEAD, FAIL_STEP, at, &e), -1);
        assert_int_equal(md_seq_len(c, 1), FAIL_HEAD);
    }
    if (md_forward(c, rows + FAIL_HEAD, FAIL_STEP, at, &e)) fail_msg("%s", e.msg);
    for (int i = FAIL_HEAD + FAIL_STEP; i < rows_n; i++)
        if (md_forward(c, rows + i, 1, out + (size_t)i * (size_t)V, &e)) fail_msg("%s", e.msg);
    md_ctx_free(c);
    return out;
}

/* A split step that fails part-way (after lanes 0 and 1 ran a layer past the one that fails in
 * lane 2) leaves the sequence as it was: its rings and KDA states untouched until the commits, the
 * step run again gives the bits of a run that never failed. */
static void failed_step_changes_nothing(const char *name) {
    mwt_model f = mwt_model_fixture(name);
    md_model *model = f.model;
    md_expert_backend *inner = f.experts;
    size_t n1, n;
    float *clean = run_failing(model, inner, 0, &n1);
    /* the second MoE layer's call of lane 2 (each layer calls lanes 0 .. 3 in order) */
    float *retried = run_failing(model, inner, MD_LANES_MAX + 3, &n);
    assert_int_equal(n, n1);
    if (memcmp(clean, retried, n * sizeof *clean))
        fail_msg("%s: a failed split step changed the sequence", name);
    free(clean);
    free(retried);
    mwt_model_close(&f);
}

static void test_failed_step_gptoss(void **state) {
    (void)state;
    failed_step_changes_nothing("gpt-oss-tiny");
}

static void test_failed_step_kimi_k3(void **state) {
    (void)state;
    failed_step_changes_nothing("kimi-k3-tiny");
}

/* A backend over the in-process one whose experts 0 .. 3 have no live owner: a batch that selects
 * one fails, and row_lost names its rows that did. */
typedef struct lossy {
    md_expert_backend be, *inner;
    uint8_t lost[256];
    int64_t n_lost;
} lossy;

static int lossy_run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    lossy *l = b->impl;
    bool any = false;
    l->n_lost = batch->T;
    for (int64_t t = 0; t < batch->T; t++) {
        l->lost[t] = 0;
        for (int j = 0; j < batch->k; j++) l->lost[t] |= batch->experts[t * batch->k + j] < 4;
        any |= l->lost[t];
    }
    if (any) return mw_errf(err, "experts 0-3 have no live owner");
    l->n_lost = 0;
    return l->inner->run(l->inner, batch, out, err);
}

static bool lossy_row_lost(const md_expert_backend *b, int64_t row) {
    const lossy *l = b->impl;
    return row >= 0 && row < l->n_lost && l->lost[row];
}

/* A split step that fails for want of experts names the step's rows, as a whole step does. */
static void test_lost_rows_are_the_steps(void **state) {
    (void)state;
    mw_err e;
    vx_source *src;
    md_model *model;
    md_expert_backend *inner;
    if (vx_source_open(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), NULL, &src, &e) ||
        md_model_load(src, &model, &e) || md_local_backend_new(src, &model->cfg, NULL, &inner, &e))
        fail_msg("%s", e.msg);
    lossy l = {.be = {.name = "lossy", .run = lossy_run, .row_lost = lossy_row_lost},
               .inner = inner};
    l.be.impl = &l;
    bool lost[2][16];
    for (int mb = 1; mb <= 2; mb++) {
        md_ctx_params p = {
            .numerics = KN_NUM_Q8, .experts = &l.be, .n_seq = 16, .n_ctx = 8, .micro_batches = mb};
        md_ctx *c;
        if (md_ctx_new(model, &p, &c, &e)) fail_msg("%s", e.msg);
        md_row rows[16];
        for (int s = 0; s < 16; s++) rows[s] = (md_row){s, 0, s * 13 + 5, 1};
        float *out = malloc(16 * (size_t)model->cfg.n_vocab * sizeof *out);
        assert_int_equal(md_forward(c, rows, 16, out, &e), -1);
        int n = 0;
        for (int r = 0; r < 16; r++) n += lost[mb - 1][r] = l.be.row_lost(&l.be, r);
        assert_in_range(n, 1, 15); /* some rows, not all: the check can tell them apart */
        free(out);
        md_ctx_free(c);
    }
    assert_memory_equal(lost[0], lost[1], sizeof lost[0]);
    inner->destroy(inner);
    md_model_free(model);
    vx_source_close(src);
}

static uint32_t never_skipped(const md_expert_backend *b, int64_t row) {
    (void)b, (void)row;
    return 0;
}

/* A backend that skips experts counts each row's skips per call: its steps stay whole, even when
 * the split is asked for, so that a request's count is its own rows'. */
static void test_skipping_backend_keeps_steps_whole(void **state) {
    (void)state;
    mw_err e;
    vx_source *src;
    md_model *model;
    md_expert_backend *experts;
    if (vx_source_open(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), NULL, &src, &e) ||
        md_model_load(src, &model, &e) ||
        md_local_backend_new(src, &model->cfg, NULL, &experts, &e))
        fail_msg("%s", e.msg);
    size_t n1, n;
    md_lane_stats st;
    float *split = mwt_lanes_run(model, experts, 2, &n1, &st);
    assert_int_equal(st.split_steps, 1 + MWT_LANES_STEPS);
    experts->row_skipped = never_skipped;
    float *whole = mwt_lanes_run(model, experts, 2, &n, &st);
    assert_int_equal(st.split_steps, 0);
    assert_int_equal(n, n1);
    assert_memory_equal(whole, split, n * sizeof *whole);
    free(split), free(whole);
    experts->destroy(experts);
    md_model_free(model);
    vx_source_close(src);
}

/* Auto: nothing before a measurement; one lane while the trunk outweighs the wait; more as the
 * wait grows, never more than the sequences or the backend's batches in flight; an unsplit step
 * now and then to measure again. */
static void test_choose(void **state) {
    (void)state;
    md_lanes_clock k = {0};
    assert_int_equal(md_lanes_choose(&k, 0, 4, 8), 1);
    md_lanes_measure(&k, 10000, 4000, 1); /* trunk 6 us, wait 4 us */
    assert_int_equal(md_lanes_choose(&k, 0, 4, 8), 1);
    k = (md_lanes_clock){0};
    md_lanes_measure(&k, 10000, 8000, 1); /* trunk 2, wait 8: 1 + 8 / 2.4 = 4 */
    assert_int_equal(md_lanes_choose(&k, 0, 4, 8), 4);
    assert_int_equal(md_lanes_choose(&k, 0, 2, 8), 2);
    assert_int_equal(md_lanes_choose(&k, 0, 4, 3), 3);
    assert_int_equal(md_lanes_choose(&k, 0, 4, 1), 1);
    assert_int_equal(md_lanes_choose(&k, 1, 4, 8), 1);
    assert_int_equal(md_lanes_choose(&k, 3, 4, 8), 3);
    assert_int_equal(md_lanes_choose(&k, 3, 1, 8), 1);
    int unsplit = 0;
    for (int i = 0; i < 3 * MD_LANES_REMEASURE; i++) {
        int n = md_lanes_choose(&k, 0, 4, 8);
        if (n == 1) {
            unsplit++;
            md_lanes_measure(&k, 10000, 8000, 1);
        }
    }
    assert_in_range(unsplit, 2, 3);
}

/* Auto judges its split steps: when they take no less per MoE layer than a whole step's measured
 * trunk + wait (nodes sharing the coordinator's cores), it keeps steps whole for MD_LANES_HOLD
 * steps, then tries again; split steps that are faster keep it splitting. */
static void test_choose_judges_splits(void **state) {
    (void)state;
    md_lanes_clock k = {0};
    md_lanes_measure(&k, 10000, 8000, 1); /* trunk 2, wait 8: auto splits */
    for (int i = 0; i < 2 * MD_LANES_VERDICT; i++) {
        assert_int_equal(md_lanes_choose(&k, 0, 2, 8), 2);
        md_lanes_measure_split(&k, 2 * 7000, 2); /* 7 a layer: faster than 10 */
    }
    for (int i = 0; i < MD_LANES_VERDICT; i++) {
        assert_int_equal(md_lanes_choose(&k, 0, 2, 8), 2);
        md_lanes_measure_split(&k, 2 * 10500, 2); /* 10.5 a layer: no gain */
    }
    int whole = 0;
    for (int i = 0; i < MD_LANES_HOLD; i++) {
        const int n = md_lanes_choose(&k, 0, 2, 8);
        whole += n == 1;
        if (n == 1) md_lanes_measure(&k, 10000, 8000, 1);
    }
    assert_int_equal(whole, MD_LANES_HOLD);
    assert_int_equal(md_lanes_choose(&k, 0, 2, 8), 2); /* tried again */
    assert_int_equal(md_lanes_choose(&k, 2, 2, 8), 2); /* a fixed count is not judged */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_choose_judges_splits),
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_long_prompt_qwen3moe),
        cmocka_unit_test(test_long_prompt_deepseek2),
        cmocka_unit_test(test_long_prompt_gptoss),
        cmocka_unit_test(test_long_prompt_kimi_linear),
        cmocka_unit_test(test_long_prompt_kimi_k3),
        cmocka_unit_test(test_gptoss),
        cmocka_unit_test(test_qwen3moe),
        cmocka_unit_test(test_deepseek2),
        cmocka_unit_test(test_kimi_linear),
        cmocka_unit_test(test_kimi_k3),
        cmocka_unit_test(test_lost_rows_are_the_steps),
        cmocka_unit_test(test_failed_step_gptoss),
        cmocka_unit_test(test_failed_step_kimi_k3),
        cmocka_unit_test(test_skipping_backend_keeps_steps_whole),
    };
    return cmocka_run_group_tests_name("micro-batches", tests, NULL, NULL);
}
