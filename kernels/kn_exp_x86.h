/* kernels/kn_exp_x86.h — kn_expf on eight AVX2 lanes: its correctly rounded steps (fma, as fmaf)
 * in its order, 2^n in at most two exact steps, then its special cases (inf above, 0 below, NaN
 * kept), so every lane equals kn_expf. One definition for the kernels' GLU (kn_simd_avx2.c) and the
 * model's softmax (model/md_ops_x86.h, and its sixteen-lane form for md_ops_avx512.c); include
 * only from files built with AVX2 and FMA. */
#ifndef KN_EXP_X86_H
#define KN_EXP_X86_H

#include <immintrin.h>
#include <math.h>

#include "kernels/kn_exp.h"

static inline __m256 kn_x86_exp8(__m256 x) {
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(KN_EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KN_EXP_LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KN_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(KN_EXP_C7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN_EXP_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^e in at most two exact steps, as the scalar code (a step of x 1.0 changes nothing) */
    __m256i e = _mm256_cvtps_epi32(n);
    const __m256i big = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(127));
    const __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(-126), e);
    __m256 first = _mm256_blendv_ps(
        _mm256_set1_ps(1.0f),
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(253)), 23)),
        _mm256_castsi256_ps(tiny));
    first = _mm256_blendv_ps(first, _mm256_set1_ps(0x1p127f), _mm256_castsi256_ps(big));
    e = _mm256_blendv_epi8(e, _mm256_sub_epi32(e, _mm256_set1_epi32(127)), big);
    e = _mm256_blendv_epi8(e, _mm256_set1_epi32(-126), tiny);
    __m256 y = _mm256_mul_ps(
        _mm256_mul_ps(p, first),
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23)));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY),
                         _mm256_cmp_ps(x, _mm256_set1_ps(KN_EXP_MAX), _CMP_GT_OQ));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(),
                         _mm256_cmp_ps(x, _mm256_set1_ps(KN_EXP_MIN), _CMP_LT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN in, the same NaN out */
}

/* The same steps on sixteen lanes, for files built with AVX-512F (the model's softmax). */
#ifdef __AVX512F__
static inline __m512 kn_x86_exp16(__m512 x) {
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(KN_EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-KN_EXP_LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-KN_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(KN_EXP_C7);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KN_EXP_C6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KN_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KN_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KN_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KN_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_cvtps_epi32(n);
    const __mmask16 big = _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(127));
    const __mmask16 tiny = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(-126), e);
    __m512 first = _mm512_mask_mov_ps(
        _mm512_set1_ps(1.0f), tiny,
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(253)), 23)));
    first = _mm512_mask_mov_ps(first, big, _mm512_set1_ps(0x1p127f));
    e = _mm512_mask_sub_epi32(e, big, e, _mm512_set1_epi32(127));
    e = _mm512_mask_mov_epi32(e, tiny, _mm512_set1_epi32(-126));
    __m512 y = _mm512_mul_ps(
        _mm512_mul_ps(p, first),
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23)));
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(KN_EXP_MAX), _CMP_GT_OQ),
                           _mm512_set1_ps(INFINITY));
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(KN_EXP_MIN), _CMP_LT_OQ),
                           _mm512_setzero_ps());
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}
#endif

#endif
