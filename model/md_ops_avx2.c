/* model/md_ops_avx2.c — attention's inner loops with AVX2: the eight partial sums of md_dot are
 * the eight lanes of one register (multiply, then add: no FMA, as in the scalar definition), and
 * a short tail is a masked load whose zero lanes add +0 to lanes that are never -0. The same bits
 * as md_ops.c's scalar code, eight times wider. */
#include <immintrin.h>

#include "model/md_ops_internal.h"

static __m256 tail_mask(int64_t r) {
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(m + 8 - r)));
}

/* (s0 + s4, s1 + s5, s2 + s6, s3 + s7), then (v0 + v1) + (v2 + v3) */
static float hsum(__m256 acc) {
    const __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    const __m128 w = _mm_add_ps(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_movehl_ps(w, w)));
}

static __m256 madd(__m256 acc, const float *a, const float *b) {
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b)));
}

static __m256 madd_tail(__m256 acc, const float *a, const float *b, int64_t r) {
    const __m256i m = _mm256_castps_si256(tail_mask(r));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_maskload_ps(a, m), _mm256_maskload_ps(b, m)));
}

/* Four heads at once: four independent chains over the same key (each is md_dot's lane order). */
static void dots4(const float *q, const float *k, int64_t d, float scale, float *s,
                  int64_t stride) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        a0 = madd(a0, q + i, k + i);
        a1 = madd(a1, q + d + i, k + i);
        a2 = madd(a2, q + 2 * d + i, k + i);
        a3 = madd(a3, q + 3 * d + i, k + i);
    }
    if (i < d) {
        a0 = madd_tail(a0, q + i, k + i, d - i);
        a1 = madd_tail(a1, q + d + i, k + i, d - i);
        a2 = madd_tail(a2, q + 2 * d + i, k + i, d - i);
        a3 = madd_tail(a3, q + 3 * d + i, k + i, d - i);
    }
    s[0] = hsum(a0) * scale;
    s[stride] = hsum(a1) * scale;
    s[2 * stride] = hsum(a2) * scale;
    s[3 * stride] = hsum(a3) * scale;
}

static void dots(const float *q, int g, const float *k, int64_t d, float scale, float *s,
                 int64_t stride) {
    int j = 0;
    for (; j + 4 <= g; j += 4) dots4(q + j * d, k, d, scale, s + j * stride, stride);
    for (; j < g; j++) {
        __m256 acc = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 8 <= d; i += 8) acc = madd(acc, q + j * d + i, k + i);
        if (i < d) acc = madd_tail(acc, q + j * d + i, k + i, d - i);
        s[j * stride] = hsum(acc) * scale;
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
                    a[c] = _mm256_add_ps(a[c], _mm256_mul_ps(w, _mm256_loadu_ps(xr + 8 * c)));
            }
            for (int c = 0; c < 8; c++) _mm256_storeu_ps(yj + i + 8 * c, a[c]);
        }
        for (; i + 8 <= d; i += 8) {
            __m256 a = _mm256_loadu_ps(yj + i);
            for (int64_t r = 0; r < n; r++)
                a = _mm256_add_ps(a,
                                  _mm256_mul_ps(_mm256_set1_ps(pj[r]), _mm256_loadu_ps(x[r] + i)));
            _mm256_storeu_ps(yj + i, a);
        }
        for (; i < d; i++)
            for (int64_t r = 0; r < n; r++) yj[i] = yj[i] + pj[r] * x[r][i];
    }
}

const md_vec md_vec_avx2 = {dots, wsums};
