/* model/md_ops.c — the scalar definitions of RMSNorm, softmax, dot products and attention's inner
 * loops, and the dispatch to their SIMD versions (which give the same bits).
 *
 * How they relate to ggml's CPU backend (FORMATS.md §4): ggml's RMSNorm adds the float squares
 * in double one after another, ours in eight double lanes (the same float result but for a rare
 * last-bit difference of the mean); ggml's softmax runs its own vectorized exp over blocks of 8
 * or 16 (libm's expf on the tail) and adds each block in float, then in double, ours runs
 * kn_expf (the GLU kernels' exp) on every element and adds in eight double lanes; both multiply
 * by the float-rounded reciprocal of the double sum. The differences are last-bit roundings, far
 * inside the fixtures' tolerances; what matters here is that one order is fixed, so every ISA and
 * every batch gives the same bits, and that it vectorizes (a sequential double sum is a chain of
 * dependent adds). */
#include "model/md_ops.h"

#include <math.h>

#include "kernels/kn.h"
#include "kernels/kn_exp.h"
#include "model/md_ops_internal.h"

/* md_dot's combining order, for eight double lanes */
static double combine8(const double s[8]) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static void rmsnorm_ref(float *y, const float *x, const float *w, int64_t n, float eps) {
    double s[8] = {0};
    for (int64_t i = 0; i < n; i++) s[i % 8] += (double)(x[i] * x[i]);
    const float mean = (float)(combine8(s) / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) {
        for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
    }
}

/* fmaxf's result where it matters (NaN never wins, the max starts at -inf), inlined; a zero's sign
 * cannot change kn_expf(x - max), so the order the maximum is taken in does not matter either. */
static inline float max_of(float m, float x) {
    return x > m ? x : m;
}

static void softmax_ref(float *x, int64_t n, const float *sink) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) max = max_of(max, x[i]);
    if (sink) max = max_of(max, *sink);
    double s[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        const float e = kn_expf(x[i] - max);
        s[i % 8] += (double)e;
        x[i] = e;
    }
    double sum = combine8(s);
    if (sink) sum += (double)kn_expf(*sink - max);
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

/* Eight interleaved partial sums combined pairwise: one fixed order (the result depends only on
 * the two vectors) that keeps eight independent chains in flight. Fused multiply-adds, as the
 * kernels' float dots: one rounding per element, and half the SIMD instructions of a multiply
 * and an add. */
float md_dot(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] = fmaf(a[i + j], b[i + j], s[j]);
    for (int j = 0; i < n; i++, j++) s[j] = fmaf(a[i], b[i], s[j]);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static void dots_ref(const float *q, int g, const float *const *k, int64_t n, int64_t d,
                     float scale, float *s, int64_t stride) {
    for (int j = 0; j < g; j++)
        for (int64_t r = 0; r < n; r++) s[j * stride + r] = md_dot(q + j * d, k[r], d) * scale;
}

static void wsums_ref(float *y, int g, const float *const *x, int64_t n, int64_t d, const float *p,
                      int64_t stride) {
    for (int j = 0; j < g; j++) {
        float *yj = y + j * d;
        for (int64_t r = 0; r < n; r++) {
            const float w = p[j * stride + r];
            for (int64_t i = 0; i < d; i++) yj[i] = fmaf(w, x[r][i], yj[i]);
        }
    }
}

static void add_ref(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] + y[i];
}

static const md_vec vec_ref = {dots_ref, wsums_ref, softmax_ref, rmsnorm_ref, add_ref};

const md_vec *md_vec_active(void) {
#if defined(__x86_64__)
    if (kn_isa_uses(KN_ISA_AVX512)) return &md_vec_avx512;
    if (kn_isa_uses(KN_ISA_AVX2)) return &md_vec_avx2;
#elif defined(__aarch64__)
    if (kn_isa_uses(KN_ISA_NEON)) return &md_vec_neon;
#endif
    return &vec_ref;
}

void md_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    md_vec_active()->rmsnorm(y, x, w, n, eps);
}

void md_add(float *x, const float *y, int64_t n) {
    md_vec_active()->add(x, y, n);
}

void md_softmax(float *x, int64_t n, const float *sink) {
    md_vec_active()->softmax(x, n, sink);
}
