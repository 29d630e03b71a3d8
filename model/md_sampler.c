/* model/md_sampler.c — greedy and nucleus sampling. The generator is xoshiro256** seeded through
 * splitmix64, so a run is reproducible from its seed on every platform. */
#include "model/md_sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct md_cand {
    float p;
    int32_t id;
};

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t next(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double md_sampler_uniform(md_sampler *s) {
    return (double)(next(s->s) >> 11) * 0x1.0p-53;
}

int md_sampler_init(md_sampler *s, int64_t n_vocab, float temperature, float top_p, uint64_t seed,
                    mw_err *err) {
    memset(s, 0, sizeof *s);
    if (n_vocab < 1 || n_vocab > INT32_MAX) return mw_errf(err, "sampler: bad vocabulary size");
    if (!isfinite(temperature) || temperature < 0)
        return mw_errf(err, "sampler: temperature %g must be a finite number >= 0", temperature);
    if (!(top_p > 0 && top_p <= 1))
        return mw_errf(err, "sampler: top-p %g must be in (0, 1]", top_p);
    s->n_vocab = n_vocab;
    s->temperature = temperature;
    s->top_p = top_p;
    for (int i = 0; i < 4; i++) s->s[i] = splitmix64(&seed);
    if (temperature > 0) {
        s->probs = malloc((size_t)n_vocab * sizeof *s->probs);
        s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
        if (!s->probs || !s->cand) {
            md_sampler_free(s);
            return mw_errf(err, "sampler: out of memory");
        }
    }
    return 0;
}

void md_sampler_free(md_sampler *s) {
    free(s->probs);
    free(s->cand);
    s->probs = NULL;
    s->cand = NULL;
}

/* Two passes over the vocabulary: the maximum in 8 independent lanes (NaN never compares greater,
 * so it never enters; the compiler keeps the lanes in one vector), then the first index holding it.
 * Equal values (+0 and -0 included) resolve to the lowest index, as a single scan with `>` would.
 */
int32_t md_argmax(const float *x, int64_t n) {
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                  -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    float best = m[0];
    for (int j = 1; j < 8; j++) best = m[j] > best ? m[j] : best;
    for (i = 0; i < n; i++)
        if (x[i] == best) return (int32_t)i;
    return 0; /* every value NaN */
}

static int cmp_desc(const void *pa, const void *pb) {
    const struct md_cand *a = pa, *b = pb;
    if (a->p != b->p) return a->p > b->p ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

int32_t md_sample(md_sampler *s, const float *logits) {
    const int64_t n = s->n_vocab;
    if (s->temperature <= 0) return md_argmax(logits, n);
    /* softmax of logits / T in double for the sum */
    float max = logits[md_argmax(logits, n)];
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        float p = expf((logits[i] - max) / s->temperature);
        if (!(p >= 0)) p = 0; /* NaN logits never get sampled */
        s->probs[i] = p;
        sum += p;
    }
    for (int64_t i = 0; i < n; i++) s->probs[i] = (float)(s->probs[i] / sum);
    /* Only tokens with p >= (1 - top_p) / (n - 1) can be in the nucleus: sort just those. */
    int64_t m = 0;
    const double cutoff = n > 1 ? (1.0 - s->top_p) / (double)(n - 1) : 0;
    for (int64_t i = 0; i < n; i++)
        if (s->probs[i] >= cutoff && s->probs[i] > 0)
            s->cand[m++] = (struct md_cand){s->probs[i], (int32_t)i};
    if (m == 0) return md_argmax(logits, n);
    qsort(s->cand, (size_t)m, sizeof *s->cand, cmp_desc);
    /* the nucleus: the shortest prefix whose mass reaches top_p */
    double mass = 0;
    int64_t keep = m;
    for (int64_t i = 0; i < m; i++) {
        mass += s->cand[i].p;
        if (mass >= s->top_p) {
            keep = i + 1;
            break;
        }
    }
    if (keep == m) {
        mass = 0;
        for (int64_t i = 0; i < m; i++) mass += s->cand[i].p;
    }
    double r = md_sampler_uniform(s) * mass, acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        acc += s->cand[i].p;
        if (r < acc) return s->cand[i].id;
    }
    return s->cand[keep - 1].id;
}
