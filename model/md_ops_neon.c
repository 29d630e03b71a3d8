/* model/md_ops_neon.c — the trunk's loops with NEON (aarch64: Mac and Linux nodes, a coordinator
 * on an M-series Mac). md_dot's eight partial sums are two q-registers (lanes 0-3 and 4-7, fused
 * multiply-adds as the scalar definition's fmaf), four keys at a time; the softmax's kn_expf on
 * four lanes (kernels/kn_exp_neon.h) and its eight double lanes in four registers, as RMSNorm's.
 * Tails shorter than a register finish in the scalar definition's own steps on the stored lanes.
 * The same bits as md_ops.c's scalar code (tests/unit/test_md_ops.c, run under qemu by
 * tests/arm64-check.sh). */
#include <arm_neon.h>
#include <math.h>

#include "kernels/kn_exp.h"
#include "kernels/kn_exp_neon.h"
#include "model/md_ops_internal.h"

/* ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)), md_dot's combining order */
static inline float combine8f(const float s[8]) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static inline double combine8d(const double s[8]) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* md_dot(q, k[r], d) for the four keys k[0..4) into out[0..4) */
static void dot4(const float *q, const float *const *k, int64_t d, float out[4]) {
    float32x4_t lo[4], hi[4];
    for (int r = 0; r < 4; r++) lo[r] = hi[r] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        const float32x4_t qa = vld1q_f32(q + i), qb = vld1q_f32(q + i + 4);
        for (int r = 0; r < 4; r++) {
            lo[r] = vfmaq_f32(lo[r], qa, vld1q_f32(k[r] + i));
            hi[r] = vfmaq_f32(hi[r], qb, vld1q_f32(k[r] + i + 4));
        }
    }
    for (int r = 0; r < 4; r++) {
        float s[8];
        vst1q_f32(s, lo[r]);
        vst1q_f32(s + 4, hi[r]);
        for (int64_t j = 0; i + j < d; j++) s[j] = fmaf(q[i + j], k[r][i + j], s[j]);
        out[r] = combine8f(s);
    }
}

static void dots(const float *q, int g, const float *const *k, int64_t n, int64_t d, float scale,
                 float *s, int64_t stride) {
    for (int64_t r0 = 0; r0 < n; r0 += 4) {
        const int nk = n - r0 < 4 ? (int)(n - r0) : 4;
        const float *kp[4];
        for (int r = 0; r < 4; r++) kp[r] = k[r0 + (r < nk ? r : nk - 1)]; /* a short block */
        for (int j = 0; j < g; j++) {
            float v[4];
            dot4(q + j * d, kp, d, v);
            for (int r = 0; r < nk; r++) s[j * stride + r0 + r] = v[r] * scale;
        }
    }
}

/* Each output's 16-float stretch stays in four registers while the n rows are added into it, in
 * row order; narrower tails go four, then one float at a time (the same per-element sums). */
static void wsums(float *y, int g, const float *const *x, int64_t n, int64_t d, const float *p,
                  int64_t stride) {
    for (int j = 0; j < g; j++) {
        float *yj = y + j * d;
        const float *pj = p + j * stride;
        int64_t i = 0;
        for (; i + 16 <= d; i += 16) {
            float32x4_t a[4];
            for (int c = 0; c < 4; c++) a[c] = vld1q_f32(yj + i + 4 * c);
            for (int64_t r = 0; r < n; r++) {
                const float32x4_t w = vdupq_n_f32(pj[r]);
                for (int c = 0; c < 4; c++) a[c] = vfmaq_f32(a[c], w, vld1q_f32(x[r] + i + 4 * c));
            }
            for (int c = 0; c < 4; c++) vst1q_f32(yj + i + 4 * c, a[c]);
        }
        for (; i + 4 <= d; i += 4) {
            float32x4_t a = vld1q_f32(yj + i);
            for (int64_t r = 0; r < n; r++)
                a = vfmaq_f32(a, vdupq_n_f32(pj[r]), vld1q_f32(x[r] + i));
            vst1q_f32(yj + i, a);
        }
        for (; i < d; i++)
            for (int64_t r = 0; r < n; r++) yj[i] = fmaf(pj[r], x[r][i], yj[i]);
    }
}

/* Eight double lanes in four registers: lanes 0-1, 2-3, 4-5, 6-7. */
typedef struct lanes8 {
    float64x2_t v[4];
} lanes8;

/* lanes 0-7 += the floats of a (lanes 0-3) and b (lanes 4-7), widened exactly */
static inline void add8(lanes8 *s, float32x4_t a, float32x4_t b) {
    s->v[0] = vaddq_f64(s->v[0], vcvt_f64_f32(vget_low_f32(a)));
    s->v[1] = vaddq_f64(s->v[1], vcvt_high_f64_f32(a));
    s->v[2] = vaddq_f64(s->v[2], vcvt_f64_f32(vget_low_f32(b)));
    s->v[3] = vaddq_f64(s->v[3], vcvt_high_f64_f32(b));
}

static inline void store8(const lanes8 *s, double out[8]) {
    for (int c = 0; c < 4; c++) vst1q_f64(out + 2 * c, s->v[c]);
}

/* the scalar definition's max: x > m ? x : m (NaN never wins) */
static inline float32x4_t max4(float32x4_t m, float32x4_t x) {
    return vbslq_f32(vcgtq_f32(x, m), x, m);
}

static void softmax(float *x, int64_t n, const float *sink) {
    float32x4_t mv = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) mv = max4(mv, vld1q_f32(x + i));
    float lanes[4], max = -INFINITY;
    vst1q_f32(lanes, mv);
    for (int j = 0; j < 4; j++) max = lanes[j] > max ? lanes[j] : max;
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    if (sink && *sink > max) max = *sink;
    const float32x4_t m = vdupq_n_f32(max);
    lanes8 acc = {{vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)}};
    for (i = 0; i + 8 <= n; i += 8) {
        const float32x4_t a = kn_neon_exp4(vsubq_f32(vld1q_f32(x + i), m));
        const float32x4_t b = kn_neon_exp4(vsubq_f32(vld1q_f32(x + i + 4), m));
        vst1q_f32(x + i, a);
        vst1q_f32(x + i + 4, b);
        add8(&acc, a, b);
    }
    double s[8];
    store8(&acc, s);
    for (int64_t j = 0; i + j < n; j++) {
        const float e = kn_expf(x[i + j] - max);
        s[j] += (double)e;
        x[i + j] = e;
    }
    double sum = combine8d(s);
    if (sink) sum += (double)kn_expf(*sink - max);
    const float inv = (float)(1.0 / sum);
    const float32x4_t iv = vdupq_n_f32(inv);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), iv));
    for (; i < n; i++) x[i] *= inv;
}

static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    lanes8 acc = {{vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)}};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
        add8(&acc, vmulq_f32(a, a), vmulq_f32(b, b));
    }
    double s[8];
    store8(&acc, s);
    for (int64_t j = 0; i + j < n; j++) s[j] += (double)(x[i + j] * x[i + j]);
    const float mean = (float)(combine8d(s) / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    const float32x4_t sc = vdupq_n_f32(scale);
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t v = vmulq_f32(vld1q_f32(x + i), sc);
        if (w) v = vmulq_f32(v, vld1q_f32(w + i));
        vst1q_f32(y + i, v);
    }
    for (; i < n; i++) y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

static void add(float *x, const float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vaddq_f32(vld1q_f32(x + i), vld1q_f32(y + i)));
    for (; i < n; i++) x[i] = x[i] + y[i];
}

const md_vec md_vec_neon = {dots, wsums, softmax, rmsnorm, add};
