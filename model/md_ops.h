/* model/md_ops.h — the small float operations of the trunk, in ggml's arithmetic order: RMSNorm
 * (sum of squares in double, scale in float), softmax (sum in double, optional sink logit in the
 * denominator), dot products. */
#ifndef MD_OPS_H
#define MD_OPS_H

#include <stdint.h>

/* y = (x * (1 / sqrtf(mean(x²) + eps))) * w, w == NULL for no weight. y may alias x. */
void md_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);

/* In-place softmax of x[0..n); when sink is non-NULL, *sink is an extra logit that joins the max
 * and the denominator but receives no probability (attention sinks). */
void md_softmax(float *x, int64_t n, const float *sink);

float md_dot(const float *a, const float *b, int64_t n);

#endif
