/* tests/unit/test_md_router.c — the routing policies on hand-computed cases: gpt-oss (top-k of the
 * biased logits, softmax over the k), qwen3moe (softmax over all, top-k, renormalized), and the
 * sigmoid / selection-bias / scale policy a DeepSeek-style family declares. */
#include "tests/support/mw_test.h"

#include <math.h>

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
        cmocka_unit_test(test_nan_logits_still_select_distinct_experts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
