/* model/md_ops.c — RMSNorm, softmax and dot products as ggml's CPU backend evaluates them
 * (FORMATS.md §4: the sum of squares in double, the scale in float; softmax multiplies by the
 * float-rounded reciprocal of a double sum), dot products, and the scalar definition of attention's
 * inner loops with the dispatch to their SIMD versions. */
#include "model/md_ops.h"

#include <math.h>

#include "kernels/kn.h"
#include "model/md_ops_internal.h"

void md_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) {
        for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
    }
}

/* fmaxf's result where it matters (NaN never wins, the max starts at -inf), inlined; a zero's sign
 * cannot change expf(x - max). */
static inline float max_of(float m, float x) {
    return x > m ? x : m;
}

void md_softmax(float *x, int64_t n, const float *sink) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) max = max_of(max, x[i]);
    if (sink) max = max_of(max, *sink);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(x[i] - max);
        sum += (double)e;
        x[i] = e;
    }
    if (sink) sum += (double)expf(*sink - max);
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

/* Eight interleaved partial sums combined pairwise: one fixed order (the result depends only on
 * the two vectors) that keeps eight independent chains in flight. */
float md_dot(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    for (int j = 0; i < n; i++, j++) s[j] += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static void dots_ref(const float *q, int g, const float *k, int64_t d, float scale, float *s,
                     int64_t stride) {
    for (int j = 0; j < g; j++) s[j * stride] = md_dot(q + j * d, k, d) * scale;
}

static void wsums_ref(float *y, int g, const float *const *x, int64_t n, int64_t d, const float *p,
                      int64_t stride) {
    for (int j = 0; j < g; j++) {
        float *yj = y + j * d;
        for (int64_t r = 0; r < n; r++) {
            const float w = p[j * stride + r];
            for (int64_t i = 0; i < d; i++) yj[i] = yj[i] + w * x[r][i];
        }
    }
}

static const md_vec vec_ref = {dots_ref, wsums_ref};

const md_vec *md_vec_active(void) {
#if defined(__x86_64__)
    if (kn_isa_uses(KN_ISA_AVX2)) return &md_vec_avx2;
#endif
    return &vec_ref;
}
