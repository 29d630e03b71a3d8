/* kernels/simd_avx2.c — AVX2+FMA kernels (x86-64), chosen at run time. */
#include "kernels/kn_internal.h"

#include <immintrin.h>

bool kn_isa_avx2_usable(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
}

bool kn_isa_avxvnni_usable(void) {
    __builtin_cpu_init();
    return kn_isa_avx2_usable() && __builtin_cpu_supports("avxvnni");
}

const kn_kernel *kn_kernel_avx2(kn_type t, kn_numerics num) {
    (void)t, (void)num;
    return NULL;
}
