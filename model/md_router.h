/* model/md_router.h — turns router logits into (expert, weight) selections per the family's
 * policy (FORMATS.md §4, §5, §7): gating, an optional selection-only bias, group-limited
 * selection, top-k, and the weights from the unbiased scores (normalized, scaled). */
#ifndef MD_ROUTER_H
#define MD_ROUTER_H

#include <stdint.h>

#include "model/md_config.h"

/* Where md_route_rows writes, per row t (arrays of T rows). scores, select, ids and weights are
 * required; the others are the intermediate stages (llama.cpp's names), NULL when not wanted. */
typedef struct md_route_out {
    float *scores;  /* n_expert: gated scores (softmax / sigmoid / the logits); may alias logits */
    float *select;  /* n_expert: what top-k is taken on: scores + select_bias, other groups -inf */
    int32_t *ids;   /* k: selected experts, best first, ties to the lowest id */
    float *weights; /* k: the routing weights */
    float *biased; /* n_expert: scores + select_bias before the group mask (ffn_moe_probs_biased) */
    int32_t *groups; /* n_group_used: the kept groups, best first (ffn_moe_group_topk) */
    float *selected; /* k: the selected unbiased scores (ffn_moe_weights) */
    float *normed;   /* k: after normalization (ffn_moe_weights_norm) */
    void *scratch;   /* md_route_scratch_bytes(n_expert) bytes, shared by all rows */
} md_route_out;

/* Scratch md_route_rows needs for rows of n_expert logits. */
size_t md_route_scratch_bytes(int n_expert);

/* For each of T rows of n_expert logits (any logit bias already added): scores by the gate;
 * selection scores = scores + select_bias (when non-NULL); with groups, each group's score is the
 * sum of its two largest selection scores and the experts outside the n_group_used best groups
 * get -inf; ids = the k largest selection scores; weights = the selected unbiased scores (softmax
 * over them for MD_GATE_SOFTMAX_SELECTED), divided by their sum when the policy normalizes (the
 * sum clamped below), times the scale unless it is 0 or 1. */
void md_route_rows(const md_router_policy *p, const float *logits, const float *select_bias,
                   int64_t T, int n_expert, int k, const md_route_out *out);

/* The same with only the required outputs (select and scratch allocated here). */
void md_route(const md_router_policy *p, const float *logits, const float *select_bias, int64_t T,
              int n_expert, int k, float *scores, int32_t *ids, float *weights);

/* The clamp llama.cpp applies to the sum of the selected weights before dividing by it. */
#define MD_ROUTER_NORM_MIN 6.103515625e-5f

#endif
