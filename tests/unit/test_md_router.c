/* tests/unit/test_md_router.c — the routing policies on hand-computed cases: gpt-oss (top-k of the
 * biased logits, softmax over the k), qwen3moe (softmax over all, top-k, renormalized), and the
 * sigmoid / selection-bias / scale policy a DeepSeek-style family declares. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdbool.h>

#include "model/md_router.h"

static void test_softmax_over_selected(void **state) {
    (void)state;
    md_router_policy p = {.gate = MD_GATE_SOFTMAX_SELECTED, .logit_bias = true, .scale = 1};
    const float logits[2][5] = {{0.5f, 2.0f, -1.0f, 1.5f, 1.9f}, {3, 3, 1, 0, 3}};
    float scores[10];
    int32_t ids[4];
    float w[4];
    md_route(&p, &logits[0][0], NULL, 2, 5, 2, scores, ids, w);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 4);
    double e = exp(1.9 - 2.0);
    assert_float_equal(w[0], 1 / (1 + e), 1e-7);
    assert_float_equal(w[1], e / (1 + e), 1e-7);
    /* scores are the logits themselves (what top-k was taken on) */
    assert_float_equal(scores[3], 1.5f, 0);
    /* ties go to the lowest id */
    assert_int_equal(ids[2], 0);
    assert_int_equal(ids[3], 1);
    assert_float_equal(w[2], 0.5f, 1e-7);
}

static void test_softmax_all_then_renormalize(void **state) {
    (void)state;
    md_router_policy p = {.gate = MD_GATE_SOFTMAX, .norm = true, .scale = 1};
    const float logits[4] = {1.0f, 0.0f, 2.0f, -1.0f};
    float scores[4];
    int32_t ids[2];
    float w[2];
    md_route(&p, logits, NULL, 1, 4, 2, scores, ids, w);
    double z = exp(1) + exp(0) + exp(2) + exp(-1);
    assert_float_equal(scores[2], exp(2) / z, 1e-7);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 0);
    assert_float_equal(w[0], exp(2) / (exp(2) + exp(1)), 1e-6);
    assert_float_equal(w[1], exp(1) / (exp(2) + exp(1)), 1e-6);
    /* without normalization the weights are the probabilities */
    p.norm = false;
    md_route(&p, logits, NULL, 1, 4, 2, scores, ids, w);
    assert_float_equal(w[0], exp(2) / z, 1e-7);
}

static void test_normalizing_sum_is_clamped(void **state) {
    (void)state;
    md_router_policy p = {.gate = MD_GATE_SIGMOID, .norm = true, .scale = 1};
    const float logits[3] = {-20.0f, -21.0f, -30.0f}; /* sigmoids ~2e-9: their sum hits the clamp */
    float scores[3];
    int32_t ids[2];
    float w[2];
    md_route(&p, logits, NULL, 1, 3, 2, scores, ids, w);
    assert_float_equal(w[0], scores[0] / MD_ROUTER_NORM_MIN, 1e-9);
    assert_true(w[0] + w[1] < 1e-3);
}

static void test_selection_bias_and_scale(void **state) {
    (void)state;
    md_router_policy p = {
        .gate = MD_GATE_SIGMOID, .select_bias = true, .norm = true, .scale = 2.5f};
    const float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f};
    const float bias[4] = {0.0f, 0.0f, 0.0f, 5.0f}; /* chooses expert 3, not its weight */
    float scores[4];
    int32_t ids[2];
    float w[2];
    md_route(&p, logits, bias, 1, 4, 2, scores, ids, w);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 0);
    double s3 = 1 / (1 + exp(1.0)), s0 = 1 / (1 + exp(-2.0));
    assert_float_equal(w[0], 2.5 * s3 / (s3 + s0), 1e-6);
    assert_float_equal(w[1], 2.5 * s0 / (s3 + s0), 1e-6);
}

/* deepseek2's group limit: 8 experts in 4 groups of 2; a group scores the sum of its two biased
 * scores; the best 2 groups stay, the others go to -inf — even the single best expert when its
 * group loses — and weights come from the unbiased sigmoid. */
static void test_group_limited_selection(void **state) {
    (void)state;
    md_router_policy p = {.gate = MD_GATE_SIGMOID,
                          .select_bias = true,
                          .norm = true,
                          .scale = 2.0f,
                          .n_group = 4,
                          .n_group_used = 2};
    /* group scores (b = s + bias): g0 = s0 + s1 + 4, g1 = s2 + s3, g2 = s4 + s5 + 1, g3 = s6 + s7
     * with expert 6 the best unbiased score but g3's sum the lowest */
    const float logits[8] = {-1.0f, -2.0f, 0.5f, 0.4f, 0.0f, -0.5f, 6.0f, -9.0f};
    const float bias[8] = {2.0f, 2.0f, 0.0f, 0.0f, 0.3f, 0.3f, 0.0f, 0.0f};
    float scores[8], sel[8], biased[8], picked[3], normed[3], w[3];
    int32_t ids[3], groups[2];
    uint8_t scratch[256];
    assert_true(md_route_scratch_bytes(8) <= sizeof scratch);
    md_route_out o = {.scores = scores,
                      .select = sel,
                      .ids = ids,
                      .weights = w,
                      .biased = biased,
                      .groups = groups,
                      .selected = picked,
                      .normed = normed,
                      .scratch = scratch};
    md_route_rows(&p, logits, bias, 1, 8, 3, &o);
    double s[8];
    for (int e = 0; e < 8; e++) s[e] = 1 / (1 + exp(-(double)logits[e]));
    /* g0 = s0 + s1 + 4 ≈ 4.39, g2 = s4 + s5 + 0.6 ≈ 1.48, g1 ≈ 1.22, g3 ≈ 1.00 */
    assert_int_equal(groups[0], 0);
    assert_int_equal(groups[1], 2);
    assert_true(isinf(sel[6]) && sel[6] < 0 && isinf(sel[2]) && isinf(sel[7]));
    assert_float_equal(biased[6], s[6], 1e-6);
    /* selection: e0 (s0 + 2), e1 (s1 + 2), then e4 (s4 + 0.3 = 0.8), not e6 (0.998) */
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 1);
    assert_int_equal(ids[2], 4);
    assert_float_equal(picked[2], s[4], 1e-6);
    const double sum = s[0] + s[1] + s[4];
    for (int j = 0; j < 3; j++) {
        assert_float_equal(normed[j], s[ids[j]] / sum, 1e-6);
        assert_float_equal(w[j], 2.0 * s[ids[j]] / sum, 1e-6);
    }
    /* without the groups e6 is the third */
    p.n_group = 0;
    md_route(&p, logits, bias, 1, 8, 3, scores, ids, w);
    assert_int_equal(ids[2], 6);
    /* softmax gating with groups (DeepSeek-V2 style): weights are the selected probabilities */
    p = (md_router_policy){.gate = MD_GATE_SOFTMAX, .n_group = 4, .n_group_used = 1};
    md_route_rows(&p, logits, NULL, 1, 8, 2, &o);
    assert_int_equal(groups[0], 3); /* e6 + e7 */
    assert_int_equal(ids[0], 6);
    assert_int_equal(ids[1], 7);
    assert_float_equal(w[0], scores[6], 0);
    assert_float_equal(w[1], scores[7], 0);
}

/* Large expert banks (896, top-16 in 8 groups, K3's shape): the selection is the top-k of the
 * masked scores, in order. */
static void test_large_bank(void **state) {
    (void)state;
    enum { N = 896, K = 16 };
    md_router_policy p = {.gate = MD_GATE_SIGMOID, .n_group = 8, .n_group_used = 4};
    static float logits[N], scores[N], sel[N], w[K];
    static uint8_t scratch[N * 9 + 64];
    int32_t ids[K], groups[4];
    for (int e = 0; e < N; e++) logits[e] = (float)((e * 7919) % 1009) / 100.0f - 5.0f;
    assert_true(md_route_scratch_bytes(N) <= sizeof scratch);
    md_route_out o = {.scores = scores,
                      .select = sel,
                      .ids = ids,
                      .weights = w,
                      .groups = groups,
                      .scratch = scratch};
    md_route_rows(&p, logits, NULL, 1, N, K, &o);
    for (int j = 0; j < K; j++) {
        assert_true(ids[j] >= 0 && ids[j] < N);
        assert_true(isfinite(sel[ids[j]]));
        if (j) assert_true(sel[ids[j]] <= sel[ids[j - 1]]);
        int in = 0;
        for (int g = 0; g < 4; g++) in |= ids[j] / (N / 8) == groups[g];
        assert_true(in);
    }
    /* nothing finite outside the kept groups is better than the last pick */
    for (int e = 0; e < N; e++) {
        bool picked = false;
        for (int j = 0; j < K; j++) picked |= ids[j] == e;
        if (!picked && isfinite(sel[e])) assert_true(sel[e] <= sel[ids[K - 1]]);
    }
}

static void test_nan_logits_still_select_distinct_experts(void **state) {
    (void)state;
    md_router_policy p = {.gate = MD_GATE_SOFTMAX_SELECTED, .scale = 1};
    const float logits[4] = {NAN, NAN, NAN, NAN};
    float scores[4];
    int32_t ids[3];
    float w[3];
    md_route(&p, logits, NULL, 1, 4, 3, scores, ids, w);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 1);
    assert_int_equal(ids[2], 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_over_selected),
        cmocka_unit_test(test_softmax_all_then_renormalize),
        cmocka_unit_test(test_normalizing_sum_is_clamped),
        cmocka_unit_test(test_selection_bias_and_scale),
        cmocka_unit_test(test_group_limited_selection),
        cmocka_unit_test(test_large_bank),
        cmocka_unit_test(test_nan_logits_still_select_distinct_experts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
