/* model/md_sampler.h — choosing the next token: greedy (ties to the lowest id) or sampled with
 * temperature and top-p from a seeded generator (same seed, same logits → same tokens). */
#ifndef MD_SAMPLER_H
#define MD_SAMPLER_H

#include <stdint.h>

#include "util/mw_err.h"

typedef struct md_sampler {
    int64_t n_vocab;
    float temperature;    /* <= 0: greedy */
    float top_p;          /* (0, 1]; 1 keeps every token */
    uint64_t s[4];        /* xoshiro256** state */
    float *probs;         /* n_vocab scratch */
    struct md_cand *cand; /* n_vocab scratch */
} md_sampler;

/* temperature must be finite and >= 0, top_p in (0, 1]. */
int md_sampler_init(md_sampler *s, int64_t n_vocab, float temperature, float top_p, uint64_t seed,
                    mw_err *err);
void md_sampler_free(md_sampler *s);
int32_t md_sample(md_sampler *s, const float *logits);

/* Index of the largest value, the lowest index among equals (NaNs never win). */
int32_t md_argmax(const float *x, int64_t n);

/* Next value of the sampler's generator in [0, 1). */
double md_sampler_uniform(md_sampler *s);

#endif
