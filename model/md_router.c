/* model/md_router.c — gating, group-limited top-k selection and routing weights. The arithmetic
 * follows ggml: softmax as in md_softmax, a group's score as the sum of its two best selection
 * scores, the normalizing sum accumulated in double and rounded to float, then clamped and
 * divided. */
#include "model/md_router.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_ops.h"

/* The scratch of md_route_out: per expert a mark, per group a score and a kept id. */
typedef struct scratch {
    uint8_t *taken; /* n bytes, zero between uses */
    float *group_score;
    int32_t *kept;
} scratch;

size_t md_route_scratch_bytes(int n_expert) {
    const size_t n = n_expert > 0 ? (size_t)n_expert : 1;
    return n * (sizeof(float) + sizeof(int32_t)) + n;
}

static scratch scratch_at(void *buf, int n_expert) {
    const size_t n = n_expert > 0 ? (size_t)n_expert : 1;
    scratch s = {.group_score = buf, .kept = (int32_t *)((float *)buf + n)};
    s.taken = (uint8_t *)(s.kept + n);
    memset(s.taken, 0, n);
    return s;
}

/* The k largest of v[0..n), best first; ties (and NaNs, which never win a comparison) go to the
 * lowest index. `taken` is n bytes of scratch, left zeroed. */
static void top_k(const float *v, int n, int k, int32_t *ids, uint8_t *taken) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        float bv = 0;
        for (int e = 0; e < n; e++) {
            if (taken[e]) continue;
            if (best < 0 || v[e] > bv) best = e, bv = v[e];
        }
        ids[j] = best;
        if (best >= 0) taken[best] = 1;
    }
    for (int j = 0; j < k; j++)
        if (ids[j] >= 0) taken[ids[j]] = 0;
}

/* Keeps the n_group_used groups whose two best selection scores sum highest; every expert of the
 * other groups gets -inf (llama.cpp's mask: a kept expert wins even with a negative score). */
static void limit_groups(const md_router_policy *p, float *sel, int n, int32_t *groups,
                         scratch *w) {
    const int G = p->n_group, per = n / G;
    for (int g = 0; g < G; g++) {
        int32_t two[2];
        top_k(sel + g * per, per, 2, two, w->taken);
        w->group_score[g] = sel[g * per + two[0]] + sel[g * per + two[1]];
    }
    top_k(w->group_score, G, p->n_group_used, w->kept, w->taken);
    for (int i = 0; i < p->n_group_used; i++) w->taken[w->kept[i]] = 1;
    for (int g = 0; g < G; g++)
        if (!w->taken[g])
            for (int e = 0; e < per; e++) sel[g * per + e] = -INFINITY;
    for (int i = 0; i < p->n_group_used; i++) w->taken[w->kept[i]] = 0;
    if (groups) memcpy(groups, w->kept, (size_t)p->n_group_used * sizeof *groups);
}

static void route_row(const md_router_policy *p, const float *logits, const float *select_bias,
                      int n, int k, int64_t t, const md_route_out *o, scratch *ws) {
    float *scores = o->scores + t * n, *sel = o->select + t * n, *w = o->weights + t * k;
    int32_t *ids = o->ids + t * k;
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
    for (int e = 0; e < n; e++) sel[e] = select_bias ? scores[e] + select_bias[e] : scores[e];
    if (o->biased) memcpy(o->biased + t * n, sel, (size_t)n * sizeof *sel);
    if (p->n_group > 1)
        limit_groups(p, sel, n, o->groups ? o->groups + t * p->n_group_used : NULL, ws);
    top_k(sel, n, k, ids, ws->taken);
    for (int j = 0; j < k; j++) w[j] = scores[ids[j]];
    if (o->selected) memcpy(o->selected + t * k, w, (size_t)k * sizeof *w);
    if (p->gate == MD_GATE_SOFTMAX_SELECTED) md_softmax(w, k, NULL);
    if (p->norm) {
        double sum = 0.0;
        for (int j = 0; j < k; j++) sum += (double)w[j];
        float s = fmaxf((float)sum, MD_ROUTER_NORM_MIN);
        for (int j = 0; j < k; j++) w[j] = w[j] / s;
        if (o->normed) memcpy(o->normed + t * k, w, (size_t)k * sizeof *w);
    }
    if (p->scale != 0.0f && p->scale != 1.0f)
        for (int j = 0; j < k; j++) w[j] *= p->scale;
}

void md_route_rows(const md_router_policy *p, const float *logits, const float *select_bias,
                   int64_t T, int n_expert, int k, const md_route_out *out) {
    scratch ws = scratch_at(out->scratch, n_expert);
    for (int64_t t = 0; t < T; t++)
        route_row(p, logits + t * n_expert, select_bias, n_expert, k, t, out, &ws);
}

void md_route(const md_router_policy *p, const float *logits, const float *select_bias, int64_t T,
              int n_expert, int k, float *scores, int32_t *ids, float *weights) {
    float *sel = malloc((size_t)(T * n_expert) * sizeof *sel);
    void *scr = malloc(md_route_scratch_bytes(n_expert));
    md_route_out o = {
        .scores = scores, .select = sel, .ids = ids, .weights = weights, .scratch = scr};
    if (sel && scr) md_route_rows(p, logits, select_bias, T, n_expert, k, &o);
    free(sel);
    free(scr);
}
