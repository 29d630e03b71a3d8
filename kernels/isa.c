/* kernels/isa.c — run-time instruction-set selection: the best the CPU and build support, unless
 * MOEWIRE_ISA=scalar|avx2|neon or kn_isa_force says otherwise. Every ISA computes the same bits
 * (the canonical order), so the choice changes speed only. */
#include "kernels/kn_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#if !defined(__x86_64__)
const kn_kernel *kn_kernel_avx2(kn_type t, kn_numerics num) {
    (void)t, (void)num;
    return NULL;
}
bool kn_isa_avx2_usable(void) {
    return false;
}
bool kn_isa_avxvnni_usable(void) {
    return false;
}
#endif
#if !defined(__aarch64__)
const kn_kernel *kn_kernel_neon(kn_type t, kn_numerics num) {
    (void)t, (void)num;
    return NULL;
}
static bool neon_usable(void) {
    return false;
}
#else
static bool neon_usable(void) {
    return true;
} /* Advanced SIMD is part of AArch64 */
#endif

static const char *const isa_names[KN_ISA_COUNT] = {"scalar", "avx2", "neon"};

static atomic_int active_isa = -1;

const char *kn_isa_name(kn_isa isa) {
    return (int)isa >= 0 && isa < KN_ISA_COUNT ? isa_names[isa] : "unknown";
}

static bool usable(kn_isa isa) {
    switch (isa) {
    case KN_ISA_SCALAR:
        return true;
    case KN_ISA_AVX2:
        return kn_isa_avx2_usable();
    case KN_ISA_NEON:
        return neon_usable();
    default:
        return false;
    }
}

kn_isa kn_isa_active(void) {
    int isa = atomic_load(&active_isa);
    if (isa >= 0) return (kn_isa)isa;
    isa = usable(KN_ISA_AVX2) ? KN_ISA_AVX2 : usable(KN_ISA_NEON) ? KN_ISA_NEON : KN_ISA_SCALAR;
    const char *env = getenv("MOEWIRE_ISA");
    if (env && *env) {
        int want = -1;
        for (int i = 0; i < KN_ISA_COUNT; i++)
            if (strcmp(env, isa_names[i]) == 0) want = i;
        if (want < 0 || !usable((kn_isa)want))
            fprintf(stderr, "moewire kernels: MOEWIRE_ISA=%s is not available here; using %s\n",
                    env, isa_names[isa]);
        else
            isa = want;
    }
    int expected = -1;
    atomic_compare_exchange_strong(&active_isa, &expected, isa);
    return (kn_isa)atomic_load(&active_isa);
}

int kn_isa_force(kn_isa isa) {
    if (!usable(isa)) return -1;
    atomic_store(&active_isa, (int)isa);
    return 0;
}

const kn_kernel *kn_kernel_for(kn_type t, kn_numerics num) {
    const kn_kernel *k = NULL;
    switch (kn_isa_active()) {
    case KN_ISA_AVX2:
        k = kn_kernel_avx2(t, num);
        break;
    case KN_ISA_NEON:
        k = kn_kernel_neon(t, num);
        break;
    default:
        break;
    }
    return k ? k : kn_kernel_ref(t, num);
}
