/* kernels/kn_simd_avx512.c — the AVX-512 (F, BW, VL, VNNI, VBMI) row of the ISA table, the default
 * on CPUs that have them (Ice Lake and later) unless MOEWIRE_AVX512=0: its Q8-mode kernel per
 * format and its packers. The kernels live in a file per format: MXFP4 and Q8_0 (one streaming
 * kernel and register tile) in kn_simd_mxfp4_q8_0_avx512.c, Q6_K in kn_simd_q6_K_avx512.c, Q4_K in
 * kn_simd_q4_K_avx512.c; Q4_K batches take the 256-bit integer kernels of kn_simd_x86_int8.h
 * built here with the AVX-512 VNNI instructions; float kernels come from the AVX2 row. */
#include "kernels/kn_simd_avx512.h"

bool kn__isa_avx512_usable(void) {
    __builtin_cpu_init();
    return kn__isa_avx2_usable() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
}

/* ---- the 256-bit integer kernels (kn_simd_x86_int8.h) with AVX-512 VNNI ---------------------- */

#define KN__X86_NAME(id)      id##_v512
#define KN__X86_LABEL         "avx512vnni"
#define KN__DPBUSD(acc, a, b) _mm256_dpbusd_epi32((acc), (a), (b))
#define KN__DPWSSD(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
#include "kernels/kn_simd_x86_int8.h"

const kn__kernel *kn__avx512_int8_kernel(kn_type t) {
    return int8_kernels_v512[t];
}

/* ---- the kernel table ------------------------------------------------------------------------ */

static const kn__kernel *const kernels[KN_TYPE_COUNT] = {[KN_MXFP4] = &kn__avx512_mxfp4,
                                                         [KN_Q8_0] = &kn__avx512_q8_0,
                                                         [KN_Q6_K] = &kn__avx512_q6_K,
                                                         [KN_Q4_K] = &kn__avx512_q4_K};

const kn__kernel *kn__kernel_avx512(kn_type t, kn_numerics num) {
    if ((int)t < 0 || t >= KN_TYPE_COUNT || num != KN_NUM_Q8) return NULL;
    return kernels[t] ? kernels[t] : int8_kernels_v512[t];
}

const kn__packer *kn__packer_avx512(kn_type t) {
    return t == KN_Q8_0 ? &kn__avx512_pack_q8_0 : t == KN_MXFP4 ? &kn__avx512_pack_mxfp4 : NULL;
}
