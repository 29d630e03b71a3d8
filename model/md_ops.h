/* model/md_ops.h — the small float operations of the trunk, in ggml's arithmetic order: RMSNorm
 * (sum of squares in double, scale in float), softmax (sum in double, optional sink logit in the
 * denominator), dot products and attention's inner loops. */
#ifndef MD_OPS_H
#define MD_OPS_H

#include <stdint.h>

/* y = (x * (1 / sqrtf(mean(x²) + eps))) * w, w == NULL for no weight. y may alias x. */
void md_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);

/* In-place softmax of x[0..n); when sink is non-NULL, *sink is an extra logit that joins the max
 * and the denominator but receives no probability (attention sinks). */
void md_softmax(float *x, int64_t n, const float *sink);

/* Eight interleaved partial sums (lane j takes elements j, j + 8, ... in order, multiply then
 * add), combined as ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)). */
float md_dot(const float *a, const float *b, int64_t n);

/* Attention's inner loops over one key / value row for the g query heads that share it. The
 * scalar code in md_ops.c is the definition; every ISA's version gives the same bits. */
typedef struct md_vec {
    /* s[j·stride] = md_dot(q + j·d, k, d) · scale, for j < g */
    void (*dots)(const float *q, int g, const float *k, int64_t d, float scale, float *s,
                 int64_t stride);
    /* for j < g, then r < n in order: y[j·d + i] = y[j·d + i] + p[j·stride + r] · x[r][i]
     * (multiply, then add) for i < d — n value rows weighted into g outputs */
    void (*wsums)(float *y, int g, const float *const *x, int64_t n, int64_t d, const float *p,
                  int64_t stride);
} md_vec;

/* The versions for the kernels' active instruction set (kn_isa_active). */
const md_vec *md_vec_active(void);

#endif
