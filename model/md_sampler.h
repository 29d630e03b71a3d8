/* model/md_sampler.h — choosing the next token: greedy (ties to the lowest id) or sampled with
 * temperature, top-k, top-p and min-p from a seeded generator (same seed, same logits → same
 * tokens), after the repetition, frequency and presence penalties of the tokens seen so far. */
#ifndef MD_SAMPLER_H
#define MD_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "util/mw_err.h"

/* How a sampler chooses. The order is vLLM's: penalties on the logits, then temperature, then
 * top-k, top-p (over the top-k's renormalized mass) and min-p on the probabilities. */
typedef struct md_sampler_opts {
    float temperature;        /* <= 0: greedy (after the penalties) */
    float top_p;              /* (0, 1]; 1 keeps every token */
    int32_t top_k;            /* <= 0: every token; k: the k most likely */
    float min_p;              /* [0, 1]: drops tokens below min_p × the most likely one's p */
    float presence_penalty;   /* [-2, 2], OpenAI's: subtracted once from every sampled token */
    float frequency_penalty;  /* [-2, 2], OpenAI's: subtracted per time a token was sampled */
    float repetition_penalty; /* > 0, 1: none; the logit of a token of the prompt or sampled is
                                 divided by it when positive, multiplied when not */
    uint64_t seed;
} md_sampler_opts;

/* Greedy, top-p 1, no top-k, min-p or penalty, seed 0. */
md_sampler_opts md_sampler_defaults(void);

typedef struct md_sampler {
    int64_t n_vocab;
    md_sampler_opts o;
    uint64_t s[4];        /* xoshiro256** state */
    float *probs;         /* n_vocab scratch */
    struct md_cand *cand; /* n_vocab scratch */
    /* penalties: per token, the times it was sampled (low 31 bits) and whether the prompt holds
     * it (the top bit); the tokens with either, in first-seen order, each with its logit saved
     * while a sample runs. Allocated only when a penalty is on. */
    uint32_t *seen;
    struct md_touched *touched;
    int64_t n_touched;
    size_t cap_touched;
} md_sampler;

/* Checks o (temperature finite and >= 0, top_p in (0, 1], min_p in [0, 1], the frequency and
 * presence penalties finite in [-2, 2], the repetition penalty finite and > 0) for a vocabulary of
 * n_vocab: what md_sampler_init refuses, without allocating anything. */
int md_sampler_check(int64_t n_vocab, const md_sampler_opts *o, mw_err *err);
/* md_sampler_check, then the sampler's memory: about 12 bytes per vocabulary entry when sampling
 * (temperature > 0) and 4 more with a penalty on. */
int md_sampler_init(md_sampler *s, int64_t n_vocab, const md_sampler_opts *o, mw_err *err);
void md_sampler_free(md_sampler *s);

/* Records tokens for the penalties: the prompt's (sampled = false: the repetition penalty only)
 * or sampled ones (all penalties). Ids outside the vocabulary are ignored; without a penalty on
 * this does nothing. Returns 0, or -1 with err set when the list of seen tokens cannot grow (the
 * penalties would then miss a token: the caller ends the run). */
int md_sampler_feed(md_sampler *s, const int32_t *ids, int64_t n, bool sampled, mw_err *err);

/* The next token from a row of logits. The penalties are applied to the row in place and undone
 * before this returns: the row holds the same bits again. */
int32_t md_sample(md_sampler *s, float *logits);

/* Index of the largest value, the lowest index among equals (NaNs never win). */
int32_t md_argmax(const float *x, int64_t n);

/* Next value of the sampler's generator in [0, 1). */
double md_sampler_uniform(md_sampler *s);

#endif
