/* tests/unit/test_md_sampler.c — greedy ties (within and across md_argmax's blocks), seeded
 * reproducibility, top-p, top-k and min-p truncation and the sampled distribution, the penalties
 * (and the row restored after them). */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_sampler.h"

static int init(md_sampler *s, int64_t n, float temp, float top_p, uint64_t seed, mw_err *err) {
    md_sampler_opts o = md_sampler_defaults();
    o.temperature = temp;
    o.top_p = top_p;
    o.seed = seed;
    return md_sampler_init(s, n, &o, err);
}

static void test_argmax_ties_to_lowest_and_skips_nan(void **state) {
    (void)state;
    float a[5] = {1, 3, 3, 2, 3};
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
    assert_int_equal(init(&s, 5, 0.0f, 1.0f, 1, NULL), 0);
    assert_int_equal(md_sample(&s, a), 1);
    md_sampler_free(&s);
}

/* The lowest index of the largest non-NaN value by one plain scan (0 when every value is NaN). */
static int32_t argmax_ref(const float *x, int64_t n) {
    float best = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > best) best = x[i];
    for (int64_t i = 0; i < n; i++)
        if (x[i] == best) return (int32_t)i;
    return 0;
}

/* md_argmax reads a row in blocks: the largest tied across blocks, at their edges, in the tail
 * after the last whole block, NaNs and -inf spread over whole blocks. */
static void test_argmax_across_blocks(void **state) {
    (void)state;
    enum { N = 3 * 512 + 37 };
    static const int64_t lens[] = {1, 17, 511, 512, 513, 1024, 1025, N};
    float *v = malloc(N * sizeof *v);
    assert_non_null(v);
    uint64_t r = 7;
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        const int64_t n = lens[li];
        for (int trial = 0; trial < 64; trial++) {
            for (int64_t i = 0; i < n; i++) v[i] = sinf(0.7f * (float)i + (float)trial);
            const int64_t spots[] = {0, 511, 512, 1023, 1024, 1535, 1536, n - 1};
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            const int64_t a = spots[(r >> 33) % 8] % n, b = spots[(r >> 40) % 8] % n;
            const int64_t c = (int64_t)((r >> 20) % (uint64_t)n);
            switch (trial % 8) {
            case 0: /* two equal winners, possibly in different blocks */
                v[a] = v[b] = 2;
                break;
            case 1: /* one winner, the other a negative zero against zeros */
                for (int64_t i = 0; i < n; i++) v[i] = v[i] > 0 ? -v[i] : v[i];
                v[a] = -0.0f, v[c] = 0.0f;
                break;
            case 2: /* NaNs everywhere but a few values */
                for (int64_t i = 0; i < n; i++) v[i] = NAN;
                v[c] = -INFINITY, v[b] = -5;
                break;
            case 3: /* every value NaN but -infs in a later block */
                for (int64_t i = 0; i < n; i++) v[i] = i < b ? NAN : -INFINITY;
                break;
            case 4: /* the winner past the last whole block */
                v[n - 1] = 3, v[c] = 3;
                break;
            case 5: /* a NaN beside the winner */
                v[a] = NAN, v[c] = 2;
                break;
            default:
                break;
            }
            if (md_argmax(v, n) != argmax_ref(v, n))
                fail_msg("n %lld trial %d: %d, want %d", (long long)n, trial, md_argmax(v, n),
                         argmax_ref(v, n));
        }
    }
    free(v);
}

static void test_same_seed_same_tokens(void **state) {
    (void)state;
    float logits[64];
    for (int i = 0; i < 64; i++) logits[i] = sinf((float)i) * 2;
    int32_t a[50], b[50], c[50];
    md_sampler s;
    for (int run = 0; run < 3; run++) {
        assert_int_equal(init(&s, 64, 0.8f, 0.95f, run == 2 ? 8 : 7, NULL), 0);
        for (int i = 0; i < 50; i++) (run == 0 ? a : run == 1 ? b : c)[i] = md_sample(&s, logits);
        md_sampler_free(&s);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
}

static void test_top_p_keeps_the_nucleus(void **state) {
    (void)state;
    /* probabilities 0.5, 0.3, 0.2 at T = 1 */
    float logits[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    md_sampler s;
    int counts[3] = {0};
    assert_int_equal(init(&s, 3, 1.0f, 0.7f, 42, NULL), 0);
    for (int i = 0; i < 4000; i++) counts[md_sample(&s, logits)]++;
    md_sampler_free(&s);
    assert_int_equal(counts[2], 0); /* 0.5 + 0.3 >= 0.7: the third token is outside */
    assert_true(fabs(counts[0] / 4000.0 - 0.625) < 0.03);

    memset(counts, 0, sizeof counts);
    assert_int_equal(init(&s, 3, 1.0f, 1.0f, 43, NULL), 0);
    for (int i = 0; i < 20000; i++) counts[md_sample(&s, logits)]++;
    md_sampler_free(&s);
    assert_true(fabs(counts[0] / 20000.0 - 0.5) < 0.02);
    assert_true(fabs(counts[1] / 20000.0 - 0.3) < 0.02);
    assert_true(fabs(counts[2] / 20000.0 - 0.2) < 0.02);

    /* a tiny top-p is greedy */
    assert_int_equal(init(&s, 3, 5.0f, 1e-6f, 44, NULL), 0);
    for (int i = 0; i < 100; i++) assert_int_equal(md_sample(&s, logits), 0);
    md_sampler_free(&s);
}

/* Draws `n` tokens from logits with o (seeded) into counts. */
static void draw_counts(const md_sampler_opts *o, float *logits, int64_t v, int n, int *counts) {
    md_sampler s;
    assert_int_equal(md_sampler_init(&s, v, o, NULL), 0);
    for (int i = 0; i < n; i++) counts[md_sample(&s, logits)]++;
    md_sampler_free(&s);
}

static void test_top_k_and_min_p(void **state) {
    (void)state;
    float logits[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    md_sampler_opts o = md_sampler_defaults();
    o.temperature = 1, o.seed = 5, o.top_k = 2;
    int c[4] = {0};
    draw_counts(&o, logits, 4, 20000, c);
    assert_int_equal(c[2] + c[3], 0);
    assert_true(fabs(c[0] / 20000.0 - 0.4 / 0.7) < 0.02);
    /* top-p over the top k's mass: 0.4 + 0.3 < 0.75 of all, but 0.7 / 0.9 >= 0.75 of the top 3 */
    o.top_k = 0, o.top_p = 0.75f;
    memset(c, 0, sizeof c);
    draw_counts(&o, logits, 4, 20000, c);
    assert_true(c[2] > 0 && c[3] == 0);
    o.top_k = 3;
    memset(c, 0, sizeof c);
    draw_counts(&o, logits, 4, 20000, c);
    assert_true(c[0] > 0 && c[1] > 0 && c[2] == 0 && c[3] == 0);
    /* min-p: 0.35 x 0.4 = 0.14 keeps 0.4, 0.3 and 0.2 */
    o.top_k = 0, o.top_p = 1, o.min_p = 0.35f;
    memset(c, 0, sizeof c);
    draw_counts(&o, logits, 4, 20000, c);
    assert_true(c[2] > 0 && c[3] == 0);
    assert_true(fabs(c[2] / 20000.0 - 0.2 / 0.9) < 0.02);
    o.min_p = 1; /* only the most likely */
    memset(c, 0, sizeof c);
    draw_counts(&o, logits, 4, 1000, c);
    assert_int_equal(c[0], 1000);
    /* a large vocabulary: every draw among the true top k (the selection against a full sort) */
    enum { V = 5000, K = 37 };
    float *big = malloc(V * sizeof *big), *sorted = malloc(V * sizeof *sorted);
    int *cnt = calloc(V, sizeof *cnt);
    for (int i = 0; i < V; i++) big[i] = sinf((float)i * 12.9898f) * 3 + (float)(i % 7) * 0.25f;
    memcpy(sorted, big, V * sizeof *big);
    for (int i = 1; i < V; i++) /* descending insertion sort */
        for (int k = i; k > 0 && sorted[k] > sorted[k - 1]; k--) {
            const float t = sorted[k];
            sorted[k] = sorted[k - 1], sorted[k - 1] = t;
        }
    o = md_sampler_defaults();
    o.temperature = 3, o.top_k = K, o.seed = 11;
    draw_counts(&o, big, V, 5000, cnt);
    int distinct = 0;
    for (int i = 0; i < V; i++) {
        if (cnt[i]) assert_true(big[i] >= sorted[K - 1]);
        distinct += cnt[i] > 0;
    }
    assert_true(distinct > K / 2); /* a high temperature spreads the draws over the k */
    o.top_k = 1;
    memset(cnt, 0, V * sizeof *cnt);
    draw_counts(&o, big, V, 200, cnt);
    assert_int_equal(cnt[md_argmax(big, V)], 200);
    free(big), free(sorted), free(cnt);
}

static void test_penalties(void **state) {
    (void)state;
    float logits[4] = {2.0f, 1.9f, 1.0f, -1.0f}, orig[4];
    memcpy(orig, logits, sizeof logits);
    md_sampler s;
    md_sampler_opts o = md_sampler_defaults();
    /* frequency: 0.5 per time sampled; presence: once */
    o.frequency_penalty = 0.5f;
    assert_int_equal(md_sampler_init(&s, 4, &o, NULL), 0);
    const int32_t t0 = 0, p3 = 3;
    assert_int_equal(md_sampler_feed(&s, &t0, 1, false, NULL),
                     0); /* the prompt does not count for these */
    assert_int_equal(md_sample(&s, logits), 0);
    assert_int_equal(md_sampler_feed(&s, &t0, 1, true, NULL), 0); /* 2.0 - 0.5 = 1.5 < 1.9 */
    assert_int_equal(md_sample(&s, logits), 1);
    assert_memory_equal(logits, orig, sizeof logits); /* the row is the model's own again */
    float two[4] = {2.0f, 1.2f, -5, -5};              /* once: 1.5 > 1.2; twice: 1.0 < 1.2 */
    assert_int_equal(md_sample(&s, two), 0);
    assert_int_equal(md_sampler_feed(&s, &t0, 1, true, NULL), 0);
    assert_int_equal(md_sample(&s, two), 1);
    md_sampler_free(&s);
    o = md_sampler_defaults();
    o.presence_penalty = 0.05f; /* 1.95 > 1.9, whatever the count */
    assert_int_equal(md_sampler_init(&s, 4, &o, NULL), 0);
    for (int i = 0; i < 5; i++) assert_int_equal(md_sampler_feed(&s, &t0, 1, true, NULL), 0);
    assert_int_equal(md_sample(&s, logits), 0);
    md_sampler_free(&s);
    o.presence_penalty = -2; /* a negative penalty favours what was said */
    const int32_t t2 = 2;
    assert_int_equal(md_sampler_init(&s, 4, &o, NULL), 0);
    assert_int_equal(md_sampler_feed(&s, &t2, 1, true, NULL), 0);
    assert_int_equal(md_sample(&s, logits), 2);
    md_sampler_free(&s);
    /* repetition: prompt tokens count; positive logits divided, negative ones multiplied */
    o = md_sampler_defaults();
    o.repetition_penalty = 2;
    assert_int_equal(md_sampler_init(&s, 4, &o, NULL), 0);
    assert_int_equal(md_sampler_feed(&s, &t0, 1, false, NULL), 0);
    assert_int_equal(md_sampler_feed(&s, &p3, 1, false, NULL), 0);
    assert_int_equal(md_sample(&s, logits), 1);
    float one[4] = {-1.0f, -1.5f, -30, -30}; /* -1 x 2 = -2 < -1.5 */
    assert_int_equal(md_sample(&s, one), 1);
    assert_true(one[0] == -1.0f);
    md_sampler_free(&s);
    /* sampled with penalties: the same seed gives the same tokens, the row stays the same */
    float v[64], v0[64];
    for (int i = 0; i < 64; i++) v[i] = v0[i] = cosf((float)i) * 2;
    int32_t a[40], b[40];
    o = md_sampler_defaults();
    o.temperature = 0.7f, o.top_k = 20, o.min_p = 0.01f, o.frequency_penalty = 0.4f;
    o.presence_penalty = 0.3f, o.repetition_penalty = 1.3f, o.seed = 99;
    for (int run = 0; run < 2; run++) {
        int32_t *out = run ? b : a;
        assert_int_equal(md_sampler_init(&s, 64, &o, NULL), 0);
        assert_int_equal(md_sampler_feed(&s, (const int32_t[]){3, 9, 3, 70, -1}, 5, false, NULL),
                         0); /* 70, -1: ignored */
        for (int i = 0; i < 40; i++) {
            out[i] = md_sample(&s, v);
            assert_int_equal(md_sampler_feed(&s, &out[i], 1, true, NULL), 0);
        }
        md_sampler_free(&s);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(v, v0, sizeof v);
    int distinct = 0, seen[64] = {0};
    for (int i = 0; i < 40; i++) distinct += !seen[a[i]]++;
    assert_true(distinct > 10); /* the penalties push the draws apart */
}

static void test_bad_settings(void **state) {
    (void)state;
    md_sampler s;
    mw_err e;
    assert_int_equal(init(&s, 10, -1.0f, 1.0f, 0, &e), -1);
    assert_int_equal(init(&s, 10, NAN, 1.0f, 0, &e), -1);
    assert_int_equal(init(&s, 10, 1.0f, 0.0f, 0, &e), -1);
    assert_int_equal(init(&s, 10, 1.0f, 1.5f, 0, &e), -1);
    md_sampler_opts o = md_sampler_defaults();
    o.min_p = 1.5f;
    assert_int_equal(md_sampler_init(&s, 10, &o, &e), -1);
    o = md_sampler_defaults();
    o.presence_penalty = 2.5f;
    assert_int_equal(md_sampler_init(&s, 10, &o, &e), -1);
    o.presence_penalty = 0, o.frequency_penalty = NAN;
    assert_int_equal(md_sampler_init(&s, 10, &o, &e), -1);
    o.frequency_penalty = 0, o.repetition_penalty = 0;
    assert_int_equal(md_sampler_init(&s, 10, &o, &e), -1);
    o.repetition_penalty = INFINITY;
    assert_int_equal(md_sampler_init(&s, 10, &o, &e), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argmax_ties_to_lowest_and_skips_nan),
        cmocka_unit_test(test_argmax_across_blocks),
        cmocka_unit_test(test_same_seed_same_tokens),
        cmocka_unit_test(test_top_p_keeps_the_nucleus),
        cmocka_unit_test(test_top_k_and_min_p),
        cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_bad_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
