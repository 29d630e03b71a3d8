/* model/md_router.c — gating, top-k selection and routing weights. The arithmetic follows ggml:
 * softmax as in md_softmax, the normalizing sum accumulated in double and rounded to float, then
 * clamped and divided. */
#include "model/md_router.h"

#include <math.h>
#include <string.h>

#include "model/md_ops.h"

/* Top-k by value, best first; ties (and NaNs, which never win a comparison) go to the lowest id. */
static void top_k(const float *v, const float *bias, int n, int k, int32_t *ids) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        float bv = 0;
        for (int e = 0; e < n; e++) {
            bool taken = false;
            for (int i = 0; i < j && !taken; i++) taken = ids[i] == e;
            if (taken) continue;
            float x = bias ? v[e] + bias[e] : v[e];
            if (best < 0 || x > bv) best = e, bv = x;
        }
        ids[j] = best;
    }
}

static void route_row(const md_router_policy *p, const float *logits, const float *select_bias,
                      int n, int k, float *scores, int32_t *ids, float *w) {
    if (scores != logits) memcpy(scores, logits, (size_t)n * sizeof *scores);
    switch (p->gate) {
    case MD_GATE_SOFTMAX:
        md_softmax(scores, n, NULL);
        break;
    case MD_GATE_SIGMOID:
        for (int e = 0; e < n; e++) scores[e] = 1.0f / (1.0f + expf(-scores[e]));
        break;
    case MD_GATE_SOFTMAX_SELECTED:
    case MD_GATE_COUNT:
        break;
    }
    top_k(scores, select_bias, n, k, ids);
    for (int j = 0; j < k; j++) w[j] = scores[ids[j]];
    if (p->gate == MD_GATE_SOFTMAX_SELECTED) md_softmax(w, k, NULL);
    if (p->norm) {
        double sum = 0.0;
        for (int j = 0; j < k; j++) sum += (double)w[j];
        float s = fmaxf((float)sum, MD_ROUTER_NORM_MIN);
        for (int j = 0; j < k; j++) w[j] = w[j] / s;
    }
    if (p->scale != 0.0f && p->scale != 1.0f)
        for (int j = 0; j < k; j++) w[j] *= p->scale;
}

void md_route(const md_router_policy *p, const float *logits, const float *select_bias, int64_t T,
              int n_expert, int k, float *scores, int32_t *ids, float *weights) {
    for (int64_t t = 0; t < T; t++)
        route_row(p, logits + t * n_expert, select_bias, n_expert, k, scores + t * n_expert,
                  ids + t * k, weights + t * k);
}
