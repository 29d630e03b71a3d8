/* kernels/simd_avxvnni.c — the AVX-VNNI instantiation of the Q8-mode kernels (simd_x86_int8.h):
 * vpdpbusd / vpdpwssd fuse the multiply-adds that AVX2 does in two steps. The integer sums are
 * exact, so the bits equal the AVX2 and scalar kernels'. Preparation and decoding are shared
 * with simd_avx2.c. */
#include "kernels/simd_x86.h"

#define KN_X86_NAME(id)      id##_vnni
#define KN_X86_LABEL         "avxvnni"
#define KN_DPWSSD(acc, a, b) _mm256_dpwssd_avx_epi32((acc), (a), (b))

/* Sum over k of w[k] . x[k] per block lane: two chains of four vpdpbusd. */
static inline __m256i sum8_small_vnni(const __m256i *w, const __m256i *x) {
    __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        a = _mm256_dpbusd_avx_epi32(a, _mm256_load_si256(w + k), _mm256_load_si256(x + k));
        b = _mm256_dpbusd_avx_epi32(b, _mm256_load_si256(w + 4 + k), _mm256_load_si256(x + 4 + k));
    }
    return _mm256_add_epi32(a, b);
}

/* Signed int8 weights: |w| against sign(x, w). */
static inline __m256i sum8_signed_vnni(const __m256i *w, const __m256i *x) {
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const __m256i wk = _mm256_load_si256(w + k);
        acc[k % 2] = _mm256_dpbusd_avx_epi32(acc[k % 2], _mm256_sign_epi8(wk, wk),
                                             _mm256_sign_epi8(_mm256_load_si256(x + k), wk));
    }
    return _mm256_add_epi32(acc[0], acc[1]);
}
#include "kernels/simd_x86_int8.h"

const kn_kernel *kn_kernel_avxvnni(kn_type t, kn_numerics num) {
    if ((int)t < 0 || t >= KN_TYPE_COUNT || num != KN_NUM_Q8) return NULL;
    return int8_kernels_vnni[t];
}
