/* kernels/kn_simd_avxvnni.c — the AVX-VNNI row of the ISA table: the Q8-mode integer kernels
 * (kn_simd_x86_int8.h) with vpdpbusd / vpdpwssd fusing the multiply-adds that AVX2 does in two
 * steps; everything else comes from the AVX2 row. The integer sums are exact, so the bits equal
 * the AVX2 and scalar kernels'. Preparation and decoding are shared with kn_simd_avx2.c. */
#include "kernels/kn_simd_x86.h"

bool kn__isa_avxvnni_usable(void) {
    __builtin_cpu_init();
    return kn__isa_avx2_usable() && kn__x86_cpuid_bit(7, 1, 0, 4); /* AVX-VNNI */
}

#define KN__X86_NAME(id)      id##_vnni
#define KN__X86_LABEL         "avxvnni"
#define KN__DPBUSD(acc, a, b) _mm256_dpbusd_avx_epi32((acc), (a), (b))
#define KN__DPWSSD(acc, a, b) _mm256_dpwssd_avx_epi32((acc), (a), (b))
#include "kernels/kn_simd_x86_int8.h"
#include "kernels/kn_simd_x86_stream.h"

const kn__kernel *kn__kernel_avxvnni(kn_type t, kn_numerics num) {
    if ((int)t < 0 || t >= KN_TYPE_COUNT || num != KN_NUM_Q8) return NULL;
    return xs_kernel_vnni(t);
}
