/* model/md_ops.h — the small float operations of the trunk in one fixed arithmetic order each:
 * RMSNorm (sum of squares in double, scale in float), softmax (the kernels' deterministic exp,
 * a double sum, optional sink logit in the denominator), dot products and attention's inner loops.
 * The scalar code in md_ops.c is the definition; every ISA's version (md_vec) gives the same bits.
 */
#ifndef MD_OPS_H
#define MD_OPS_H

#include <stdint.h>

/* y = (x * (1 / sqrtf(mean(x²) + eps))) * w, w == NULL for no weight. y may alias x. The squares
 * are rounded to float and summed in double in md_dot's eight lanes and combining order. */
void md_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);

/* In-place softmax of x[0..n): e = kn_expf(x - max) (the exp of the GLU kernels: our own, within
 * 1 ulp, the same bits on every ISA and libm), summed in double in md_dot's eight lanes and
 * combining order, times the float-rounded reciprocal of the sum. When sink is non-NULL, *sink is
 * an extra logit that joins the max and the denominator (added last) but receives no probability
 * (attention sinks). */
void md_softmax(float *x, int64_t n, const float *sink);

/* x[i] = x[i] + y[i] for i < n (the residual adds and biases). */
void md_add(float *x, const float *y, int64_t n);

/* Eight interleaved partial sums (lane j takes elements j, j + 8, ... in order, s = fmaf(a, b, s)),
 * combined as ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)). */
float md_dot(const float *a, const float *b, int64_t n);

/* The trunk's inner loops per instruction set. The scalar code in md_ops.c is the definition;
 * every ISA's version gives the same bits. */
typedef struct md_vec {
    /* s[j·stride + r] = md_dot(q + j·d, k[r], d) · scale, for j < g, r < n: n keys for the g
     * query heads that share them */
    void (*dots)(const float *q, int g, const float *const *k, int64_t n, int64_t d, float scale,
                 float *s, int64_t stride);
    /* for j < g, then r < n in order: y[j·d + i] = fmaf(p[j·stride + r], x[r][i], y[j·d + i])
     * for i < d — n value rows weighted into g outputs */
    void (*wsums)(float *y, int g, const float *const *x, int64_t n, int64_t d, const float *p,
                  int64_t stride);
    void (*softmax)(float *x, int64_t n, const float *sink);
    void (*rmsnorm)(float *y, const float *x, const float *w, int64_t n, float eps);
    void (*add)(float *x, const float *y, int64_t n);
} md_vec;

/* The versions for the kernels' active instruction set (kn_isa_active). */
const md_vec *md_vec_active(void);

#endif
