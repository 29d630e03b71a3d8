/* model/md_sampler.c — greedy and sampled choice of the next token: penalties for what was seen,
 * temperature, top-k, nucleus (top-p) and min-p. The generator is xoshiro256** seeded through
 * splitmix64, so a run is reproducible from its seed on every platform. */
#include "model/md_sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/mw_grow.h"

struct md_touched {
    int32_t id;
    float saved; /* its logit, while penalized */
};

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

md_sampler_opts md_sampler_defaults(void) {
    return (md_sampler_opts){.temperature = 0, .top_p = 1, .repetition_penalty = 1};
}

static bool penalized(const md_sampler_opts *o) {
    return o->presence_penalty != 0 || o->frequency_penalty != 0 || o->repetition_penalty != 1;
}

int md_sampler_check(int64_t n_vocab, const md_sampler_opts *o, mw_err *err) {
    if (n_vocab < 1 || n_vocab > INT32_MAX) return mw_errf(err, "sampler: bad vocabulary size");
    if (!isfinite(o->temperature) || o->temperature < 0)
        return mw_errf(err, "sampler: temperature %g must be a finite number >= 0", o->temperature);
    if (!(o->top_p > 0 && o->top_p <= 1))
        return mw_errf(err, "sampler: top-p %g must be in (0, 1]", o->top_p);
    if (!(o->min_p >= 0 && o->min_p <= 1))
        return mw_errf(err, "sampler: min-p %g must be in [0, 1]", o->min_p);
    if (!(fabsf(o->presence_penalty) <= 2) || !(fabsf(o->frequency_penalty) <= 2))
        return mw_errf(err,
                       "sampler: presence penalty %g and frequency penalty %g must be in [-2, 2]",
                       o->presence_penalty, o->frequency_penalty);
    if (!(isfinite(o->repetition_penalty) && o->repetition_penalty > 0))
        return mw_errf(err, "sampler: repetition penalty %g must be a finite number > 0",
                       o->repetition_penalty);
    return 0;
}

int md_sampler_init(md_sampler *s, int64_t n_vocab, const md_sampler_opts *o, mw_err *err) {
    memset(s, 0, sizeof *s);
    if (md_sampler_check(n_vocab, o, err)) return -1;
    s->n_vocab = n_vocab;
    s->o = *o;
    uint64_t seed = o->seed;
    for (int i = 0; i < 4; i++) s->s[i] = splitmix64(&seed);
    if (o->temperature > 0) {
        s->probs = malloc((size_t)n_vocab * sizeof *s->probs);
        s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
        if (!s->probs || !s->cand) goto oom;
    }
    if (penalized(o) && !(s->seen = calloc((size_t)n_vocab, sizeof *s->seen))) goto oom;
    return 0;
oom:
    md_sampler_free(s);
    return mw_errf(err, "sampler: out of memory");
}

void md_sampler_free(md_sampler *s) {
    free(s->probs);
    free(s->cand);
    free(s->seen);
    free(s->touched);
    s->probs = NULL;
    s->cand = NULL;
    s->seen = NULL;
    s->touched = NULL;
    s->n_touched = 0;
    s->cap_touched = 0;
}

#define SEEN_IN_PROMPT 0x80000000u
#define SEEN_COUNT     0x7FFFFFFFu

int md_sampler_feed(md_sampler *s, const int32_t *ids, int64_t n, bool sampled, mw_err *err) {
    if (!s->seen) return 0;
    for (int64_t i = 0; i < n; i++) {
        const int32_t id = ids[i];
        if (id < 0 || id >= s->n_vocab) continue;
        uint32_t *c = &s->seen[id];
        if (*c == 0) { /* each id enters the list once: it never holds more than n_vocab */
            if (mw_grow((void **)&s->touched, &s->cap_touched, (size_t)s->n_touched + 1,
                        sizeof *s->touched))
                return mw_errf(err, "sampler: out of memory for the penalties' seen tokens");
            s->touched[s->n_touched++].id = id;
        }
        if (!sampled)
            *c |= SEEN_IN_PROMPT;
        else if ((*c & SEEN_COUNT) != SEEN_COUNT)
            (*c)++;
    }
    return 0;
}

/* The penalties on the row's seen tokens, their logits saved; undone by unpenalize. */
static void penalize(md_sampler *s, float *logits) {
    const float rep = s->o.repetition_penalty;
    for (int64_t i = 0; i < s->n_touched; i++) {
        const int32_t id = s->touched[i].id;
        const uint32_t c = s->seen[id], count = c & SEEN_COUNT;
        float l = s->touched[i].saved = logits[id];
        if (rep != 1) l = l > 0 ? l / rep : l * rep;
        if (count) l -= (float)count * s->o.frequency_penalty + s->o.presence_penalty;
        logits[id] = l;
    }
}

static void unpenalize(const md_sampler *s, float *logits) {
    for (int64_t i = 0; i < s->n_touched; i++) logits[s->touched[i].id] = s->touched[i].saved;
}

/* The vocabulary in blocks of ARGMAX_BLOCK values: the first pass keeps each block's largest (in 8
 * independent lanes, which the compiler keeps in one vector; NaN never compares greater, so it
 * never enters) and where the first block holding the overall largest starts; only the values from
 * there are compared with it. A block whose largest is below the overall one holds no equal value,
 * so equal values (+0 and -0 included) resolve to the lowest index, as a single scan with `>`
 * would, and a vocabulary's row is read about once, not twice. */
#define ARGMAX_BLOCK 512

static float block_max(const float *x) {
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                  -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (int i = 0; i < ARGMAX_BLOCK; i += 8)
        for (int j = 0; j < 8; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    float best = m[0];
    for (int j = 1; j < 8; j++) best = m[j] > best ? m[j] : best;
    return best;
}

int32_t md_argmax(const float *x, int64_t n) {
    float best = -INFINITY;
    int64_t from = 0, i = 0;
    for (; i + ARGMAX_BLOCK <= n; i += ARGMAX_BLOCK) {
        const float m = block_max(x + i);
        if (m > best) best = m, from = i;
    }
    for (int64_t j = i; j < n; j++)
        if (x[j] > best) best = x[j], from = i;
    for (i = from; i < n; i++)
        if (x[i] == best) return (int32_t)i;
    return 0; /* every value NaN */
}

static int cmp_desc(const void *pa, const void *pb) {
    const struct md_cand *a = pa, *b = pb;
    if (a->p != b->p) return a->p > b->p ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Moves the k first candidates in cmp_desc's order (the k most likely) to the front, in any order:
 * a quickselect with a median-of-three pivot. */
static void select_first(struct md_cand *a, int64_t m, int64_t k) {
    int64_t lo = 0, hi = m - 1;
    while (lo < hi) {
        struct md_cand x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi], piv;
        if (cmp_desc(&x, &y) > 0) piv = x, x = y, y = piv;
        piv = cmp_desc(&y, &z) <= 0 ? y : cmp_desc(&x, &z) <= 0 ? z : x;
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (cmp_desc(&a[i], &piv) < 0) i++;
            while (cmp_desc(&a[j], &piv) > 0) j--;
            if (i <= j) {
                const struct md_cand t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

/* The token a draw u in [0, 1) picks from m candidates sorted in cmp_desc's order: the nucleus is
 * the shortest prefix whose mass (summed in that order) reaches target, min-p then drops its tail
 * below min_p × the first one's p, and u × the kept mass falls in one token's share. */
static int32_t pick(const struct md_cand *c, int64_t m, double target, float min_p, double u) {
    double mass = 0;
    int64_t keep = m;
    for (int64_t i = 0; i < m; i++) {
        mass += c[i].p;
        if (mass >= target) {
            keep = i + 1;
            break;
        }
    }
    if (keep == m) {
        mass = 0;
        for (int64_t i = 0; i < m; i++) mass += c[i].p;
    }
    if (min_p > 0) { /* p / p_max >= min_p: the same whatever the renormalization */
        const float floor_p = min_p * c[0].p;
        int64_t k = keep;
        while (k > 1 && c[k - 1].p < floor_p) k--;
        if (k < keep) {
            keep = k;
            mass = 0;
            for (int64_t i = 0; i < keep; i++) mass += c[i].p;
        }
    }
    double r = u * mass, acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        acc += c[i].p;
        if (r < acc) return c[i].id;
    }
    return c[keep - 1].id;
}

#define FIRST_RUN 256 /* candidates sorted first: the draw lands among them but for a flat row */

/* pick(c, m, target, 0, u) without sorting all m candidates (the min-p tail already dropped):
 * the most likely ones are sorted a run at a time (a quickselect brings the next run to the
 * front), their prefix sums being exactly pick's. Once the nucleus closes inside the sorted part,
 * pick runs on it. Before, the kept mass pick would reach lies within an interval: the sum of all
 * m (in any order) bounds it within the rounding of two m-term sums of non-negative terms, and a
 * nucleus closing in the unsorted rest overshoots target by at most the rest's largest p. When u
 * times every mass of that interval falls in the same sorted token's share, that token is pick's.
 * Otherwise the sort goes on; a draw within rounding of a share's edge sorts everything. */
static int32_t pick_partial(struct md_cand *c, int64_t m, double target, float min_p, double u) {
    double total = 0;
    for (int64_t i = 0; i < m; i++) total += c[i].p;
    const double eps = 0x1p-53;
    const double err = 4.0 * ((double)m + 2) * eps * (total > 1 ? total : 1);
    const double lo = total - err, hi = total + err;
    double prefix = 0;
    int64_t s = 0, run = FIRST_RUN;
    for (;;) {
        const int64_t n = run < m - s ? run : m - s;
        if (n < m - s) select_first(c + s, m - s, n);
        qsort(c + s, (size_t)n, sizeof *c, cmp_desc);
        for (int64_t i = s; i < s + n; i++) {
            prefix += c[i].p;
            if (prefix >= target) return pick(c, s + n, target, min_p, u);
        }
        s += n;
        if (s == m) return pick(c, m, target, min_p, u);
        const double rest_max = c[s - 1].p; /* the rest is no larger */
        const double m_lo = lo < target ? lo : target;
        double m_hi = hi;
        if (lo >= target) { /* the nucleus surely closes in the rest */
            const double over = (target + rest_max) * (1 + 4 * eps);
            if (over < m_hi) m_hi = over;
        }
        const double r_lo = u * m_lo, r_hi = u * m_hi; /* rounding is monotonic */
        if (r_hi < prefix) {
            double acc = 0;
            int64_t i = 0;
            while (!(r_lo < acc + c[i].p)) acc += c[i++].p;
            const int64_t j = i;
            while (!(r_hi < acc + c[i].p)) acc += c[i++].p;
            if (i == j) return c[j].id;
            run = m - s; /* at a share's edge within rounding: the exact sums decide */
        } else {
            run *= 8;
        }
    }
}

/* A token drawn from softmax(logits / T) restricted to the top k, the nucleus and min-p. */
static int32_t draw(md_sampler *s, const float *logits) {
    const int64_t n = s->n_vocab;
    /* softmax of logits / T in double for the sum */
    float max = logits[md_argmax(logits, n)];
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        float p = expf((logits[i] - max) / s->o.temperature);
        if (!(p >= 0)) p = 0; /* NaN logits never get sampled */
        s->probs[i] = p;
        sum += p;
    }
    for (int64_t i = 0; i < n; i++) s->probs[i] = (float)(s->probs[i] / sum);
    /* Without top-k only tokens with p >= (1 - top_p) / (n - 1) can be in the nucleus. With it the
     * nucleus is taken of the top k's mass, so any token may be a candidate. */
    const bool top_k = s->o.top_k > 0 && s->o.top_k < n;
    int64_t m = 0;
    const double cutoff = !top_k && n > 1 ? (1.0 - s->o.top_p) / (double)(n - 1) : 0;
    float p_max = 0;
    for (int64_t i = 0; i < n; i++)
        if (s->probs[i] >= cutoff && s->probs[i] > 0) {
            s->cand[m++] = (struct md_cand){s->probs[i], (int32_t)i};
            p_max = s->probs[i] > p_max ? s->probs[i] : p_max;
        }
    if (m == 0) return md_argmax(logits, n);
    if (top_k) {
        if (m > s->o.top_k) {
            select_first(s->cand, m, s->o.top_k);
            m = s->o.top_k;
        }
        qsort(s->cand, (size_t)m, sizeof *s->cand, cmp_desc);
        double z = 0;
        for (int64_t i = 0; i < m; i++) z += s->cand[i].p;
        return pick(s->cand, m, s->o.top_p * z, s->o.min_p, md_sampler_uniform(s));
    }
    /* Min-p keeps a prefix of the sorted order, and a nucleus closing past it is cut to it: the
     * candidates below the floor never matter. */
    if (s->o.min_p > 0) {
        const float floor_p = s->o.min_p * p_max;
        int64_t k = 0;
        for (int64_t i = 0; i < m; i++)
            if (!(s->cand[i].p < floor_p)) s->cand[k++] = s->cand[i];
        m = k;
    }
    return pick_partial(s->cand, m, s->o.top_p, s->o.min_p, md_sampler_uniform(s));
}

int32_t md_sample(md_sampler *s, float *logits) {
    if (s->n_touched) penalize(s, logits);
    const int32_t tok = s->o.temperature > 0 ? draw(s, logits) : md_argmax(logits, s->n_vocab);
    if (s->n_touched) unpenalize(s, logits);
    return tok;
}
