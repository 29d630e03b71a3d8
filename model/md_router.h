/* model/md_router.h — turns router logits into (expert, weight) selections per the family's
 * policy (FORMATS.md §4, §5, §7). */
#ifndef MD_ROUTER_H
#define MD_ROUTER_H

#include <stdint.h>

#include "model/md_config.h"

/* For each of T rows of n_expert logits (any logit bias already added):
 *   scores[t]  = the gated scores (softmax / sigmoid / the logits themselves), n_expert each;
 *   ids[t]     = the k experts with the largest scores (+ select_bias when non-NULL), best first,
 *                ties to the lowest id;
 *   weights[t] = per the policy (softmax over the selected, or the selected scores; normalized
 *                and scaled when the policy says so).
 * scores may alias logits. */
void md_route(const md_router_policy *p, const float *logits, const float *select_bias, int64_t T,
              int n_expert, int k, float *scores, int32_t *ids, float *weights);

/* The clamp llama.cpp applies to the sum of the selected weights before dividing by it. */
#define MD_ROUTER_NORM_MIN 6.103515625e-5f

#endif
