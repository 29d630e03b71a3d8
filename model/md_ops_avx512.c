/* model/md_ops_avx512.c — the trunk's loops with AVX-512F. A dot keeps md_dot's eight lanes, so a
 * 16-lane register holds two query heads' partial sums against one key (the key's eight floats
 * broadcast to both halves); eight keys' registers are reduced together, both heads at once. The
 * weighted value sums keep two heads' 64-float outputs in eight registers; the softmax (kn_expf
 * on sixteen lanes) and RMSNorm take sixteen floats a step into md_dot's eight double lanes. The
 * same bits as md_ops.c's scalar code (fused multiply-adds as its fmaf, in its order). */
#include "model/md_ops_x86.h"

/* the key's eight floats in both halves */
static inline __m512 bcast8(__m256 v) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(v)));
}

static inline __m512 halves(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

/* per 128-bit chunk (x0 + x1, x2 + x3, y0 + y1, y2 + y3), as _mm256_hadd_ps */
static inline __m512 hadd(__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* a0..a7 = (head A's eight lanes, head B's) for keys 0..7, reduced as md_dot combines them: the
 * result is (A's scores of keys 0..7, B's). */
static inline __m512 reduce2x8x8(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 a4, __m512 a5,
                                 __m512 a6, __m512 a7) {
    /* per key and head: lanes 0-3 plus lanes 4-7; chunks (A x, B x, A y, B y) */
#define HALVES(x, y)                                                                               \
    _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)),                             \
                  _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)))
    const __m512 s04 = HALVES(a0, a4), s15 = HALVES(a1, a5);
    const __m512 s26 = HALVES(a2, a6), s37 = HALVES(a3, a7);
#undef HALVES
    /* chunks (A keys 0-3, B keys 0-3, A keys 4-7, B keys 4-7) */
    const __m512 f = hadd(hadd(s04, s15), hadd(s26, s37));
    return _mm512_shuffle_f32x4(f, f, _MM_SHUFFLE(3, 1, 2, 0));
}

/* md_dot of heads q and q + d with the eight keys k[0..8); the accumulators are written out one
 * by one so that they stay in registers */
static inline __m512 dot2x8(const float *q, const float *const *k, int64_t d) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const float *k0 = k[0], *k1 = k[1], *k2 = k[2], *k3 = k[3], *k4 = k[4], *k5 = k[5], *k6 = k[6],
                *k7 = k[7];
#define STEP(r, load) a##r = _mm512_fmadd_ps(qv, bcast8(load(k##r + i)), a##r)
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        const __m512 qv = halves(_mm256_loadu_ps(q + i), _mm256_loadu_ps(q + d + i));
#define LOAD(p) _mm256_loadu_ps(p)
        STEP(0, LOAD), STEP(1, LOAD), STEP(2, LOAD), STEP(3, LOAD);
        STEP(4, LOAD), STEP(5, LOAD), STEP(6, LOAD), STEP(7, LOAD);
#undef LOAD
    }
    if (i < d) {
        /* zero lanes add +0 to sums that are never -0 (they start at +0) */
        const __mmask8 m = (__mmask8)((1u << (d - i)) - 1);
        const __m512 qv =
            halves(_mm256_maskz_loadu_ps(m, q + i), _mm256_maskz_loadu_ps(m, q + d + i));
#define LOAD(p) _mm256_maskz_loadu_ps(m, p)
        STEP(0, LOAD), STEP(1, LOAD), STEP(2, LOAD), STEP(3, LOAD);
        STEP(4, LOAD), STEP(5, LOAD), STEP(6, LOAD), STEP(7, LOAD);
#undef LOAD
    }
#undef STEP
    return reduce2x8x8(a0, a1, a2, a3, a4, a5, a6, a7);
}

static void dots(const float *q, int g, const float *const *k, int64_t n, int64_t d, float scale,
                 float *s, int64_t stride) {
    const __m512 sc = _mm512_set1_ps(scale);
    const float *kp[8];
    for (int64_t r0 = 0; r0 < n; r0 += 8) {
        const int nk = md__key_block(k, n, r0, kp);
        const __mmask8 m = (__mmask8)((1u << nk) - 1);
        int j = 0;
        for (; j + 2 <= g; j += 2) {
            const __m512 v = _mm512_mul_ps(dot2x8(q + j * d, kp, d), sc);
            _mm256_mask_storeu_ps(s + j * stride + r0, m, _mm512_castps512_ps256(v));
            _mm256_mask_storeu_ps(s + (j + 1) * stride + r0, m,
                                  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        }
        if (j < g)
            _mm256_mask_storeu_ps(s + j * stride + r0, m,
                                  _mm256_mul_ps(md__dot8(q + j * d, kp, d), _mm256_set1_ps(scale)));
    }
}

static inline __mmask16 tail16(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
}

/* Two outputs' (b = 1) or one output's (b = 0) 64-float stretch from i stays in registers while
 * the n rows are added into it, in row order (the same per-element sums as the scalar code);
 * lanes at or past d are masked off. Written out register by register: the compiler keeps these
 * in registers, not an array of them. */
static inline __attribute__((always_inline)) void wsums_stretch(int two, float *y, int64_t d,
                                                                const float *const *x, int64_t n,
                                                                const float *p, int64_t stride,
                                                                int64_t i) {
    const __mmask16 m0 = tail16(d - i), m1 = tail16(d - i - 16), m2 = tail16(d - i - 32),
                    m3 = tail16(d - i - 48);
    float *y0 = y + i, *y1 = y + d + i;
    __m512 a0 = _mm512_maskz_loadu_ps(m0, y0), a1 = _mm512_maskz_loadu_ps(m1, y0 + 16);
    __m512 a2 = _mm512_maskz_loadu_ps(m2, y0 + 32), a3 = _mm512_maskz_loadu_ps(m3, y0 + 48);
    __m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    if (two) {
        b0 = _mm512_maskz_loadu_ps(m0, y1), b1 = _mm512_maskz_loadu_ps(m1, y1 + 16);
        b2 = _mm512_maskz_loadu_ps(m2, y1 + 32), b3 = _mm512_maskz_loadu_ps(m3, y1 + 48);
    }
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x[r] + i;
        const __m512 x0 = _mm512_maskz_loadu_ps(m0, xr), x1 = _mm512_maskz_loadu_ps(m1, xr + 16);
        const __m512 x2 = _mm512_maskz_loadu_ps(m2, xr + 32),
                     x3 = _mm512_maskz_loadu_ps(m3, xr + 48);
        const __m512 w = _mm512_set1_ps(p[r]);
        a0 = _mm512_fmadd_ps(w, x0, a0);
        a1 = _mm512_fmadd_ps(w, x1, a1);
        a2 = _mm512_fmadd_ps(w, x2, a2);
        a3 = _mm512_fmadd_ps(w, x3, a3);
        if (two) {
            const __m512 v = _mm512_set1_ps(p[stride + r]);
            b0 = _mm512_fmadd_ps(v, x0, b0);
            b1 = _mm512_fmadd_ps(v, x1, b1);
            b2 = _mm512_fmadd_ps(v, x2, b2);
            b3 = _mm512_fmadd_ps(v, x3, b3);
        }
    }
    _mm512_mask_storeu_ps(y0, m0, a0), _mm512_mask_storeu_ps(y0 + 16, m1, a1);
    _mm512_mask_storeu_ps(y0 + 32, m2, a2), _mm512_mask_storeu_ps(y0 + 48, m3, a3);
    if (two) {
        _mm512_mask_storeu_ps(y1, m0, b0), _mm512_mask_storeu_ps(y1 + 16, m1, b1);
        _mm512_mask_storeu_ps(y1 + 32, m2, b2), _mm512_mask_storeu_ps(y1 + 48, m3, b3);
    }
}

static void wsums(float *y, int g, const float *const *x, int64_t n, int64_t d, const float *p,
                  int64_t stride) {
    int j = 0;
    for (; j + 2 <= g; j += 2)
        for (int64_t i = 0; i < d; i += 64)
            wsums_stretch(1, y + j * d, d, x, n, p + j * stride, stride, i);
    for (; j < g; j++)
        for (int64_t i = 0; i < d; i += 64)
            wsums_stretch(0, y + j * d, d, x, n, p + j * stride, stride, i);
}

/* the eight double lanes += the sixteen floats of v (elements i..i+7, then i+8..i+15) */
static inline __m512d add_lanes(__m512d s, __m512 v) {
    s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    return _mm512_add_pd(
        s, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

static inline double combine(__m512d s) {
    return md__combine8d(_mm512_castpd512_pd256(s), _mm512_extractf64x4_pd(s, 1));
}

static void softmax(float *x, int64_t n, const float *sink) {
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) /* NaN never wins; lanes past n keep -inf */
        mv = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail16(n - i), x + i),
                           mv);
    float lanes[16], max = -INFINITY;
    _mm512_storeu_ps(lanes, mv);
    for (int j = 0; j < 16; j++) max = lanes[j] > max ? lanes[j] : max;
    if (sink && *sink > max) max = *sink;
    const __m512 m = _mm512_set1_ps(max);
    __m512d s = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 t = tail16(n - i);
        const __m512 e =
            _mm512_maskz_mov_ps(t, kn_x86_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, x + i), m)));
        _mm512_mask_storeu_ps(x + i, t, e);
        s = add_lanes(s, e); /* +0 in the lanes past n */
    }
    double sum = combine(s);
    if (sink) sum += (double)md__exp1(*sink - max);
    const __m512 iv = _mm512_set1_ps((float)(1.0 / sum));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 t = tail16(n - i);
        _mm512_mask_storeu_ps(x + i, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, x + i), iv));
    }
}

static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m512d s = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_maskz_loadu_ps(tail16(n - i), x + i);
        s = add_lanes(s, _mm512_mul_ps(v, v));
    }
    const float mean = (float)(combine(s) / (double)n);
    const __m512 sc = _mm512_set1_ps(1.0f / sqrtf(mean + eps));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 t = tail16(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(t, x + i), sc);
        if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(t, w + i));
        _mm512_mask_storeu_ps(y + i, t, v);
    }
}

static void add(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 t = tail16(n - i);
        _mm512_mask_storeu_ps(
            x + i, t,
            _mm512_add_ps(_mm512_maskz_loadu_ps(t, x + i), _mm512_maskz_loadu_ps(t, y + i)));
    }
}

const md_vec md_vec_avx512 = {dots, wsums, softmax, rmsnorm, add};
