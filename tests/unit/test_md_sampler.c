/* tests/unit/test_md_sampler.c — greedy ties, seeded reproducibility, top-p truncation and the
 * sampled distribution. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <string.h>

#include "model/md_sampler.h"

static void test_argmax_ties_to_lowest_and_skips_nan(void **state) {
    (void)state;
    const float a[5] = {1, 3, 3, 2, 3};
    assert_int_equal(md_argmax(a, 5), 1);
    const float b[3] = {NAN, -1, -1};
    assert_int_equal(md_argmax(b, 3), 1);
    const float c[3] = {NAN, NAN, NAN}, d[4] = {NAN, -INFINITY, NAN, -INFINITY};
    assert_int_equal(md_argmax(c, 3), 0);
    assert_int_equal(md_argmax(d, 4), 1);
    /* longer than the 8 lanes, the winner in the tail, in a lane, and tied across lanes */
    float v[37];
    for (int i = 0; i < 37; i++) v[i] = sinf((float)i);
    int want = 0;
    for (int i = 1; i < 37; i++)
        if (v[i] > v[want]) want = i;
    assert_int_equal(md_argmax(v, 37), want);
    v[36] = 5, v[35] = NAN;
    assert_int_equal(md_argmax(v, 37), 36);
    v[9] = 5, v[4] = -0.0f;
    assert_int_equal(md_argmax(v, 37), 9);
    float z[10] = {-1, -1, -1, -1, -1, -1, -1, -1, 0.0f, -0.0f};
    z[3] = -0.0f;
    assert_int_equal(md_argmax(z, 10), 3);
    md_sampler s;
    assert_int_equal(md_sampler_init(&s, 5, 0.0f, 1.0f, 1, NULL), 0);
    assert_int_equal(md_sample(&s, a), 1);
    md_sampler_free(&s);
}

static void test_same_seed_same_tokens(void **state) {
    (void)state;
    float logits[64];
    for (int i = 0; i < 64; i++) logits[i] = sinf((float)i) * 2;
    int32_t a[50], b[50], c[50];
    md_sampler s;
    for (int run = 0; run < 3; run++) {
        assert_int_equal(md_sampler_init(&s, 64, 0.8f, 0.95f, run == 2 ? 8 : 7, NULL), 0);
        for (int i = 0; i < 50; i++) (run == 0 ? a : run == 1 ? b : c)[i] = md_sample(&s, logits);
        md_sampler_free(&s);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
}

static void test_top_p_keeps_the_nucleus(void **state) {
    (void)state;
    /* probabilities 0.5, 0.3, 0.2 at T = 1 */
    const float logits[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    md_sampler s;
    int counts[3] = {0};
    assert_int_equal(md_sampler_init(&s, 3, 1.0f, 0.7f, 42, NULL), 0);
    for (int i = 0; i < 4000; i++) counts[md_sample(&s, logits)]++;
    md_sampler_free(&s);
    assert_int_equal(counts[2], 0); /* 0.5 + 0.3 >= 0.7: the third token is outside */
    assert_true(fabs(counts[0] / 4000.0 - 0.625) < 0.03);

    memset(counts, 0, sizeof counts);
    assert_int_equal(md_sampler_init(&s, 3, 1.0f, 1.0f, 43, NULL), 0);
    for (int i = 0; i < 20000; i++) counts[md_sample(&s, logits)]++;
    md_sampler_free(&s);
    assert_true(fabs(counts[0] / 20000.0 - 0.5) < 0.02);
    assert_true(fabs(counts[1] / 20000.0 - 0.3) < 0.02);
    assert_true(fabs(counts[2] / 20000.0 - 0.2) < 0.02);

    /* a tiny top-p is greedy */
    assert_int_equal(md_sampler_init(&s, 3, 5.0f, 1e-6f, 44, NULL), 0);
    for (int i = 0; i < 100; i++) assert_int_equal(md_sample(&s, logits), 0);
    md_sampler_free(&s);
}

static void test_bad_settings(void **state) {
    (void)state;
    md_sampler s;
    mw_err e;
    assert_int_equal(md_sampler_init(&s, 10, -1.0f, 1.0f, 0, &e), -1);
    assert_int_equal(md_sampler_init(&s, 10, NAN, 1.0f, 0, &e), -1);
    assert_int_equal(md_sampler_init(&s, 10, 1.0f, 0.0f, 0, &e), -1);
    assert_int_equal(md_sampler_init(&s, 10, 1.0f, 1.5f, 0, &e), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argmax_ties_to_lowest_and_skips_nan),
        cmocka_unit_test(test_same_seed_same_tokens),
        cmocka_unit_test(test_top_p_keeps_the_nucleus),
        cmocka_unit_test(test_bad_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
