/* kernels/isa.c — run-time instruction-set selection: the best the CPU and build support, unless
 * MOEWIRE_ISA=scalar|avx2|neon or kn_isa_force says otherwise. Every ISA computes the same bits
 * (the canonical order), so the choice changes speed only. */
#include "kernels/kn_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* Stubs for the ISAs this build does not compile (the Makefile builds *_avx2.c / *_avxvnni.c
 * on x86-64 and *_neon.c on aarch64 only). */
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
void kn_glu_apply_avx2(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n) {
    kn_glu_apply_ref(glu, g, u, out, n);
}
int kn_isa_vnni(int on) {
    (void)on;
    return 0;
}
bool kn_isa_avx512_usable(void) {
    return false;
}
int kn_isa_avx512(int on) {
    (void)on;
    return 0;
}
#endif
#if !defined(__aarch64__)
const kn_kernel *kn_kernel_neon(kn_type t, kn_numerics num) {
    (void)t, (void)num;
    return NULL;
}
bool kn_isa_neon_usable(void) {
    return false;
}
void kn_glu_apply_neon(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n) {
    kn_glu_apply_ref(glu, g, u, out, n);
}
#endif

/* One row per ISA: its name, whether this CPU and build can run it, its kernel table (NULL for
 * the scalar reference, which every other table falls back to). */
static const struct {
    const char *name;
    bool (*usable)(void);
    const kn_kernel *(*kernel)(kn_type t, kn_numerics num);
} isas[KN_ISA_COUNT] = {
    [KN_ISA_SCALAR] = {"scalar", NULL, NULL},
    [KN_ISA_AVX2] = {"avx2", kn_isa_avx2_usable, kn_kernel_avx2},
    [KN_ISA_NEON] = {"neon", kn_isa_neon_usable, kn_kernel_neon},
};

static atomic_int active_isa = -1;

const char *kn_isa_name(kn_isa isa) {
    return (int)isa >= 0 && isa < KN_ISA_COUNT ? isas[isa].name : "unknown";
}

static bool usable(kn_isa isa) {
    if ((int)isa < 0 || isa >= KN_ISA_COUNT) return false;
    return !isas[isa].usable || isas[isa].usable();
}

kn_isa kn_isa_active(void) {
    int isa = atomic_load(&active_isa);
    if (isa >= 0) return (kn_isa)isa;
    isa = usable(KN_ISA_AVX2) ? KN_ISA_AVX2 : usable(KN_ISA_NEON) ? KN_ISA_NEON : KN_ISA_SCALAR;
    const char *env = getenv("MOEWIRE_ISA");
    if (env && *env) {
        int want = -1;
        for (int i = 0; i < KN_ISA_COUNT; i++)
            if (strcmp(env, isas[i].name) == 0) want = i;
        if (want < 0 || !usable((kn_isa)want))
            fprintf(stderr, "moewire kernels: MOEWIRE_ISA=%s is not available here; using %s\n",
                    env, isas[isa].name);
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
    const kn_isa isa = kn_isa_active();
    const kn_kernel *k = isas[isa].kernel ? isas[isa].kernel(t, num) : NULL;
    return k ? k : kn_kernel_ref(t, num);
}
