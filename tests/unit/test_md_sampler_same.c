/* tests/unit/test_md_sampler_same.c — md_sample draws, seed for seed, the token the sampler drew
 * when it sorted every candidate: the old algorithm is kept here as the reference and both run in
 * step over rows with ties, masked (-inf) and NaN tokens, flat and peaked, at many vocabulary
 * sizes and temperature / top-k / top-p / min-p settings. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_sampler.h"

struct ref_cand {
    float p;
    int32_t id;
};

static int ref_cmp(const void *pa, const void *pb) {
    const struct ref_cand *a = pa, *b = pb;
    if (a->p != b->p) return a->p > b->p ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The sampler before partial sorting: every candidate sorted (the top k of them with top-k), the
 * nucleus, min-p, then the draw. rng supplies the generator only. */
static int32_t ref_sample(md_sampler *rng, const md_sampler_opts *o, const float *logits, int64_t n,
                          float *probs, struct ref_cand *cand) {
    if (!(o->temperature > 0)) return md_argmax(logits, n);
    float max = logits[md_argmax(logits, n)];
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        float p = expf((logits[i] - max) / o->temperature);
        if (!(p >= 0)) p = 0;
        probs[i] = p;
        sum += p;
    }
    for (int64_t i = 0; i < n; i++) probs[i] = (float)(probs[i] / sum);
    const bool top_k = o->top_k > 0 && o->top_k < n;
    int64_t m = 0;
    const double cutoff = !top_k && n > 1 ? (1.0 - o->top_p) / (double)(n - 1) : 0;
    for (int64_t i = 0; i < n; i++)
        if (probs[i] >= cutoff && probs[i] > 0) cand[m++] = (struct ref_cand){probs[i], (int32_t)i};
    if (m == 0) return md_argmax(logits, n);
    qsort(cand, (size_t)m, sizeof *cand, ref_cmp); /* a total order: the ids differ */
    if (top_k && m > o->top_k) m = o->top_k;
    double target = o->top_p;
    if (top_k) {
        double z = 0;
        for (int64_t i = 0; i < m; i++) z += cand[i].p;
        target *= z;
    }
    double mass = 0;
    int64_t keep = m;
    for (int64_t i = 0; i < m; i++) {
        mass += cand[i].p;
        if (mass >= target) {
            keep = i + 1;
            break;
        }
    }
    if (keep == m) {
        mass = 0;
        for (int64_t i = 0; i < m; i++) mass += cand[i].p;
    }
    if (o->min_p > 0) {
        const float floor_p = o->min_p * cand[0].p;
        int64_t k = keep;
        while (k > 1 && cand[k - 1].p < floor_p) k--;
        if (k < keep) {
            keep = k;
            mass = 0;
            for (int64_t i = 0; i < keep; i++) mass += cand[i].p;
        }
    }
    double r = md_sampler_uniform(rng) * mass, acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        acc += cand[i].p;
        if (r < acc) return cand[i].id;
    }
    return cand[keep - 1].id;
}

static uint64_t rnd_state = 0x243f6a8885a308d3ULL;
static uint32_t rnd(void) { /* the rows' own generator, apart from the samplers' */
    rnd_state ^= rnd_state << 13, rnd_state ^= rnd_state >> 7, rnd_state ^= rnd_state << 17;
    return (uint32_t)(rnd_state >> 32);
}
static float unit(void) {
    return (float)(rnd() >> 8) * 0x1p-24f;
}

/* Row shapes: spread logits (peaked to flat), few distinct values (ties), all equal, a masked
 * majority (-inf, as a grammar leaves it), a few NaNs, and one allowed token. */
static void fill(float *x, int64_t n, int shape) {
    for (int64_t i = 0; i < n; i++) {
        const float g = unit() + unit() + unit() - 1.5f;
        switch (shape) {
        case 0:
            x[i] = g * 12;
            break;
        case 1:
            x[i] = g * 0.5f;
            break;
        case 2:
            x[i] = (float)(rnd() % 4);
            break;
        case 3:
            x[i] = 1.25f;
            break;
        case 4:
            x[i] = rnd() % 8 ? -INFINITY : g * 4;
            break;
        case 5:
            x[i] = rnd() % 50 == 0 ? NAN : g * 6;
            break;
        default:
            x[i] = -INFINITY;
            break;
        }
    }
    if (shape == 6) x[rnd() % n] = 0.5f;
    if (shape == 4 && n > 3) x[1] = x[2] = 7; /* two tied leaders among the masked */
}

static void test_same_tokens_as_full_sort(void **state) {
    (void)state;
    static const int64_t vocab[] = {1, 2, 3, 7, 64, 257, 1000, 4099, 32000};
    static const float temps[] = {0, 0.3f, 1, 2.5f};
    static const float top_ps[] = {1, 0.9999f, 0.95f, 0.5f, 1e-6f};
    static const float min_ps[] = {0, 0.001f, 0.2f, 1};
    const int64_t vmax = 32000;
    float *row = malloc((size_t)vmax * sizeof *row), *probs = malloc((size_t)vmax * sizeof *probs);
    struct ref_cand *cand = malloc((size_t)vmax * sizeof *cand);
    assert_non_null(row), assert_non_null(probs), assert_non_null(cand);
    long compared = 0;
    for (size_t vi = 0; vi < sizeof vocab / sizeof *vocab; vi++) {
        const int64_t n = vocab[vi];
        const int32_t top_ks[] = {0, 1, 5, (int32_t)(n > 1 ? n - 1 : 1), (int32_t)n, 300};
        const int steps = n >= 32000 ? 2 : n >= 4099 ? 4 : 12;
        for (int combo = 0; combo < 4 * 5 * 4 * 6; combo++) {
            md_sampler_opts o = md_sampler_defaults();
            o.temperature = temps[combo % 4];
            o.top_p = top_ps[combo / 4 % 5];
            o.min_p = min_ps[combo / 20 % 4];
            o.top_k = top_ks[combo / 80];
            if (n >= 32000 && combo % 3) continue; /* a third of the settings at the largest */
            o.seed = (uint64_t)combo * 7919 + (uint64_t)n;
            md_sampler s, ref;
            assert_int_equal(md_sampler_init(&s, n, &o, NULL), 0);
            assert_int_equal(md_sampler_init(&ref, n, &o, NULL), 0);
            for (int step = 0; step < steps; step++) {
                fill(row, n, (combo + step) % 7);
                const int32_t want = ref_sample(&ref, &o, row, n, probs, cand);
                const int32_t got = md_sample(&s, row);
                if (got != want)
                    fail_msg("vocab %lld T %g top-p %g top-k %d min-p %g step %d shape %d: %d, "
                             "full sort %d",
                             (long long)n, o.temperature, o.top_p, o.top_k, o.min_p, step,
                             (combo + step) % 7, got, want);
                compared++;
            }
            /* the generators advanced alike */
            assert_true(md_sampler_uniform(&s) == md_sampler_uniform(&ref));
            md_sampler_free(&s), md_sampler_free(&ref);
        }
    }
    assert_true(compared > 5000);
    free(row), free(probs), free(cand);
}

/* Many seeds on few rows: the draws sweep every share, the edges between them included. */
static void test_many_seeds(void **state) {
    (void)state;
    static const int64_t vocab[] = {50, 3000, 20000};
    const int64_t vmax = 20000;
    float *row = malloc((size_t)vmax * sizeof *row), *probs = malloc((size_t)vmax * sizeof *probs);
    struct ref_cand *cand = malloc((size_t)vmax * sizeof *cand);
    assert_non_null(row), assert_non_null(probs), assert_non_null(cand);
    for (size_t vi = 0; vi < 3; vi++) {
        const int64_t n = vocab[vi];
        for (int shape = 0; shape < 3; shape++) {
            fill(row, n, shape);
            for (uint64_t seed = 0; seed < (n > 5000 ? 150u : 1500u); seed++) {
                md_sampler_opts o = md_sampler_defaults();
                o.temperature = 1, o.seed = seed;
                o.top_p = seed % 3 == 0 ? 1.0f : seed % 3 == 1 ? 0.9f : 0.6f;
                md_sampler s, ref;
                assert_int_equal(md_sampler_init(&s, n, &o, NULL), 0);
                assert_int_equal(md_sampler_init(&ref, n, &o, NULL), 0);
                for (int k = 0; k < 4; k++) {
                    const int32_t want = ref_sample(&ref, &o, row, n, probs, cand);
                    assert_int_equal(md_sample(&s, row), want);
                }
                md_sampler_free(&s), md_sampler_free(&ref);
            }
        }
    }
    free(row), free(probs), free(cand);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_tokens_as_full_sort),
        cmocka_unit_test(test_many_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
