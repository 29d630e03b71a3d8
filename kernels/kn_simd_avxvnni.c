/* kernels/kn_simd_avxvnni.c — the AVX-VNNI row of the ISA table: the Q8-mode integer kernels
 * (kn_simd_x86_int8.h) with vpdpbusd / vpdpwssd fusing the multiply-adds that AVX2 does in two
 * steps; everything else comes from the AVX2 row. The integer sums are exact, so the bits equal
 * the AVX2 and scalar kernels'. Preparation and decoding are shared with kn_simd_avx2.c.
 *
 * Built a second time, for tests only, with KN__VNNI_EVEX_TWIN (Makefile: VNNI_TWIN_O): the same
 * kernels with the multiply-adds as their EVEX-encoded 256-bit twins (AVX512-VNNI + AVX512-VL,
 * the same arithmetic), usable where those are. test_kn_avxvnni links that object ahead of the
 * library, so the row's two symbols below come from it and AVX512 machines without AVX-VNNI run
 * this row's source (docs/kernels.md, "ISA dispatch"). */
#include "kernels/kn_simd_x86.h"

#ifdef KN__VNNI_EVEX_TWIN
bool kn__isa_avxvnni_usable(void) {
    __builtin_cpu_init();
    return kn__isa_avx2_usable() && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("avx512vl");
}

#define KN__X86_LABEL         "avxvnni-evex"
#define KN__DPBUSD(acc, a, b) _mm256_dpbusd_epi32((acc), (a), (b))
#define KN__DPWSSD(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
#else
bool kn__isa_avxvnni_usable(void) {
    __builtin_cpu_init();
    return kn__isa_avx2_usable() && kn__x86_cpuid_bit(7, 1, 0, 4); /* AVX-VNNI */
}

#define KN__X86_LABEL         "avxvnni"
#define KN__DPBUSD(acc, a, b) _mm256_dpbusd_avx_epi32((acc), (a), (b))
#define KN__DPWSSD(acc, a, b) _mm256_dpwssd_avx_epi32((acc), (a), (b))
#endif

#define KN__X86_NAME(id) id##_vnni
#include "kernels/kn_simd_x86_int8.h"
#include "kernels/kn_simd_x86_stream.h"

const kn__kernel *kn__kernel_avxvnni(kn_type t, kn_numerics num) {
    if ((int)t < 0 || t >= KN_TYPE_COUNT || num != KN_NUM_Q8) return NULL;
    return xs_kernel_vnni(t);
}
