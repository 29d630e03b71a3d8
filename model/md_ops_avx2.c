/* model/md_ops_avx2.c — the trunk's loops with AVX2: md_dot's eight partial sums are the eight
 * lanes of one register (fused multiply-adds, as the scalar definition's fmaf), eight keys'
 * registers reduced together; the softmax's kn_expf on eight lanes and its eight double lanes in
 * two registers, as RMSNorm's. The same bits as md_ops.c's scalar code. */
#include "model/md_ops_x86.h"

/* eight keys at a time for each head, the scores stored as one register */
static void dots(const float *q, int g, const float *const *k, int64_t n, int64_t d, float scale,
                 float *s, int64_t stride) {
    const __m256 sc = _mm256_set1_ps(scale);
    const float *kp[8];
    for (int64_t r0 = 0; r0 < n; r0 += 8) {
        const int nk = md__key_block(k, n, r0, kp);
        for (int j = 0; j < g; j++) {
            const __m256 v = _mm256_mul_ps(md__dot8(q + j * d, kp, d), sc);
            if (nk == 8)
                _mm256_storeu_ps(s + j * stride + r0, v);
            else
                _mm256_maskstore_ps(s + j * stride + r0, md__mask8(nk), v);
        }
    }
}

/* Each output's 64-float stretch stays in eight registers while the n rows are added into it, in
 * row order; narrower tails go eight, then one float at a time (the same per-element sums). */
static void wsums(float *y, int g, const float *const *x, int64_t n, int64_t d, const float *p,
                  int64_t stride) {
    for (int j = 0; j < g; j++) {
        float *yj = y + j * d;
        const float *pj = p + j * stride;
        int64_t i = 0;
        for (; i + 64 <= d; i += 64) {
            __m256 a[8];
            for (int c = 0; c < 8; c++) a[c] = _mm256_loadu_ps(yj + i + 8 * c);
            for (int64_t r = 0; r < n; r++) {
                const __m256 w = _mm256_set1_ps(pj[r]);
                const float *xr = x[r] + i;
                for (int c = 0; c < 8; c++)
                    a[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(xr + 8 * c), a[c]);
            }
            for (int c = 0; c < 8; c++) _mm256_storeu_ps(yj + i + 8 * c, a[c]);
        }
        for (; i + 8 <= d; i += 8) {
            __m256 a = _mm256_loadu_ps(yj + i);
            for (int64_t r = 0; r < n; r++)
                a = _mm256_fmadd_ps(_mm256_set1_ps(pj[r]), _mm256_loadu_ps(x[r] + i), a);
            _mm256_storeu_ps(yj + i, a);
        }
        for (; i < d; i++)
            for (int64_t r = 0; r < n; r++) yj[i] = fmaf(pj[r], x[r][i], yj[i]);
    }
}

/* s_lo/s_hi (the eight double lanes) += the eight floats of v */
static inline void add_lanes(__m256d *lo, __m256d *hi, __m256 v) {
    *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

static void softmax(float *x, int64_t n, const float *sink) {
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(_mm256_loadu_ps(x + i), mv); /* NaN never wins */
    float lanes[8], max = -INFINITY;
    _mm256_storeu_ps(lanes, mv);
    for (int j = 0; j < 8; j++) max = lanes[j] > max ? lanes[j] : max;
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    if (sink && *sink > max) max = *sink;
    const __m256 m = _mm256_set1_ps(max);
    __m256d lo = _mm256_setzero_pd(), hi = lo;
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = kn_x86_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        add_lanes(&lo, &hi, e);
    }
    if (i < n) {
        const __m256i mask = md__mask8(n - i);
        const __m256 e =
            _mm256_and_ps(kn_x86_exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), m)),
                          _mm256_castsi256_ps(mask));
        _mm256_maskstore_ps(x + i, mask, e);
        add_lanes(&lo, &hi, e); /* +0 in the lanes past n */
    }
    double sum = md__combine8d(lo, hi);
    if (sink) sum += (double)md__exp1(*sink - max);
    const float inv = (float)(1.0 / sum);
    const __m256 iv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
    for (; i < n; i++) x[i] *= inv;
}

static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m256d lo = _mm256_setzero_pd(), hi = lo;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        add_lanes(&lo, &hi, _mm256_mul_ps(v, v));
    }
    if (i < n) {
        const __m256 v = _mm256_maskload_ps(x + i, md__mask8(n - i));
        add_lanes(&lo, &hi, _mm256_mul_ps(v, v));
    }
    const float mean = (float)(md__combine8d(lo, hi) / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    const __m256 sc = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), sc);
        if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

static void add(float *x, const float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) x[i] = x[i] + y[i];
}

const md_vec md_vec_avx2 = {dots, wsums, softmax, rmsnorm, add};
