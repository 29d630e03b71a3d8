/* model/md_ops_x86.h — AVX2 pieces of the trunk's loops shared by md_ops_avx2.c and
 * md_ops_avx512.c (included only by files built with AVX2): md_dot of one
 * query head with eight keys (their eight-lane partial sums reduced together), the eight-lane
 * double sums' combining order, masks for short tails. Each is the scalar definition's arithmetic
 * lane for lane, in the same order: fused multiply-adds for dots and sums, kn_expf's fma steps
 * for exp (kernels/kn_exp_x86.h, the one the kernels' GLU uses). */
#ifndef MD_OPS_X86_H
#define MD_OPS_X86_H

#include <immintrin.h>
#include <math.h>

#include "kernels/kn_exp_x86.h"
#include "model/md_ops_internal.h"

/* The first r lanes (0 <= r <= 8). */
static inline __m256i md__mask8(int64_t r) {
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(m + 8 - r));
}

/* kn_expf(x) in a register (libm's nearbyintf and fmaf calls cost more than the lanes) */
static inline float md__exp1(float x) {
    return _mm256_cvtss_f32(kn_x86_exp8(_mm256_set1_ps(x)));
}

/* ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)) of lanes 0-3 in lo, 4-7 in hi */
static inline double md__combine8d(__m256d lo, __m256d hi) {
    const __m256d v = _mm256_add_pd(lo, hi);
    const __m128d a = _mm256_castpd256_pd128(v), b = _mm256_extractf128_pd(v, 1);
    const __m128d ab = _mm_hadd_pd(a, b); /* (v0 + v1, v2 + v3) */
    return _mm_cvtsd_f64(_mm_add_sd(ab, _mm_unpackhi_pd(ab, ab)));
}

/* Eight keys' eight-lane partial sums a0..a7 reduced as md_dot combines them, key r in lane r:
 * (lo + hi halves) per key, then two horizontal adds. */
static inline __m256 md__reduce8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                                   __m256 a6, __m256 a7) {
#define MD__HALVES(x, y)                                                                           \
    _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31))
    const __m256 s04 = MD__HALVES(a0, a4), s15 = MD__HALVES(a1, a5);
    const __m256 s26 = MD__HALVES(a2, a6), s37 = MD__HALVES(a3, a7);
#undef MD__HALVES
    return _mm256_hadd_ps(_mm256_hadd_ps(s04, s15), _mm256_hadd_ps(s26, s37));
}

/* md_dot(q, k[r], d) for the eight keys k[0..8), in lanes 0..7; the accumulators are written out
 * one by one so that they stay in registers */
static inline __m256 md__dot8(const float *q, const float *const *k, int64_t d) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const float *k0 = k[0], *k1 = k[1], *k2 = k[2], *k3 = k[3], *k4 = k[4], *k5 = k[5], *k6 = k[6],
                *k7 = k[7];
#define MD__STEP(r, load) a##r = _mm256_fmadd_ps(qv, load(k##r + i), a##r)
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
#define MD__LOAD(p) _mm256_loadu_ps(p)
        MD__STEP(0, MD__LOAD), MD__STEP(1, MD__LOAD), MD__STEP(2, MD__LOAD), MD__STEP(3, MD__LOAD);
        MD__STEP(4, MD__LOAD), MD__STEP(5, MD__LOAD), MD__STEP(6, MD__LOAD), MD__STEP(7, MD__LOAD);
#undef MD__LOAD
    }
    if (i < d) {
        /* zero lanes add +0 to sums that are never -0 (they start at +0) */
        const __m256i m = md__mask8(d - i);
        const __m256 qv = _mm256_maskload_ps(q + i, m);
#define MD__LOAD(p) _mm256_maskload_ps(p, m)
        MD__STEP(0, MD__LOAD), MD__STEP(1, MD__LOAD), MD__STEP(2, MD__LOAD), MD__STEP(3, MD__LOAD);
        MD__STEP(4, MD__LOAD), MD__STEP(5, MD__LOAD), MD__STEP(6, MD__LOAD), MD__STEP(7, MD__LOAD);
#undef MD__LOAD
    }
#undef MD__STEP
    return md__reduce8x8(a0, a1, a2, a3, a4, a5, a6, a7);
}

/* The n keys of a call in blocks of eight pointers; a short last block repeats its last key. */
static inline int md__key_block(const float *const *k, int64_t n, int64_t r0, const float **kp) {
    const int nk = n - r0 < 8 ? (int)(n - r0) : 8;
    for (int r = 0; r < 8; r++) kp[r] = k[r0 + (r < nk ? r : nk - 1)];
    return nk;
}

#endif
