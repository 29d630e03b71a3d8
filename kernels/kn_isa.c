/* kernels/kn_isa.c — run-time instruction-set selection: the best the CPU and build support, unless
 * MOEWIRE_ISA=scalar|avx2|avxvnni|avx512|neon, a row's switch or kn_isa_force says otherwise.
 * Every ISA computes the same bits (the canonical order), so the choice changes speed only. */
#include "kernels/kn_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* Stubs for the ISAs this build does not compile (the Makefile builds *_avx2.c, *_avxvnni.c and
 * *_avx512.c on x86-64 and *_neon.c on aarch64 only). */
#if !defined(__x86_64__)
const kn__kernel *kn__kernel_avx2(kn_type t, kn_numerics num) {
    (void)t, (void)num;
    return NULL;
}
bool kn__isa_avx2_usable(void) {
    return false;
}
bool kn__isa_avxvnni_usable(void) {
    return false;
}
const kn__kernel *kn__kernel_avxvnni(kn_type t, kn_numerics num) {
    (void)t, (void)num;
    return NULL;
}
bool kn__isa_avx512_usable(void) {
    return false;
}
const kn__kernel *kn__kernel_avx512(kn_type t, kn_numerics num) {
    (void)t, (void)num;
    return NULL;
}
const kn__packer *kn__packer_avx512(kn_type t) {
    (void)t;
    return NULL;
}
const kn__packer *kn__packer_avx2(kn_type t) {
    (void)t;
    return NULL;
}
void kn__glu_apply_avx2(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n) {
    kn__glu_apply_ref(glu, g, u, out, n);
}
#endif
#if !defined(__aarch64__)
const kn__kernel *kn__kernel_neon(kn_type t, kn_numerics num) {
    (void)t, (void)num;
    return NULL;
}
bool kn__isa_neon_usable(void) {
    return false;
}
void kn__glu_apply_neon(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n) {
    kn__glu_apply_ref(glu, g, u, out, n);
}
#endif

/* One row per ISA (ggml's type-traits idea applied to instruction sets): its name, whether this
 * CPU and build can run it, its kernel table and GLU, the ISA whose kernels fill in what it has
 * none of (the scalar row's NULL table means the reference), and the environment variable that
 * switches it off ("=0") where there is one. AVX-VNNI and AVX-512 are rows of their own that
 * build on AVX2, so the name of the active ISA says which kernels run. */
typedef void (*glu_fn)(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n);
static const struct {
    const char *name;
    bool (*usable)(void);
    const kn__kernel *(*kernel)(kn_type t, kn_numerics num);
    const kn__packer *(*packer)(kn_type t); /* NULL: the ISA packs nothing */
    glu_fn glu;
    kn_isa base;
    const char *off_env;
} isas[KN_ISA_COUNT] = {
    [KN_ISA_SCALAR] = {"scalar", NULL, NULL, NULL, kn__glu_apply_ref, KN_ISA_SCALAR, NULL},
    [KN_ISA_AVX2] = {"avx2", kn__isa_avx2_usable, kn__kernel_avx2, kn__packer_avx2,
                     kn__glu_apply_avx2, KN_ISA_SCALAR, NULL},
    [KN_ISA_NEON] = {"neon", kn__isa_neon_usable, kn__kernel_neon, NULL, kn__glu_apply_neon,
                     KN_ISA_SCALAR, NULL},
    /* AVX-VNNI's kernels read the AVX2 row's packed layout (kn_simd_x86_stream.h, shared) */
    [KN_ISA_AVXVNNI] = {"avxvnni", kn__isa_avxvnni_usable, kn__kernel_avxvnni, kn__packer_avx2,
                        NULL, KN_ISA_AVX2, "MOEWIRE_VNNI"},
    [KN_ISA_AVX512] = {"avx512", kn__isa_avx512_usable, kn__kernel_avx512, kn__packer_avx512, NULL,
                       KN_ISA_AVX2, "MOEWIRE_AVX512"},
};

/* The default is the first of these that is usable and not switched off. */
static const kn_isa preference[] = {KN_ISA_AVX512, KN_ISA_AVXVNNI, KN_ISA_AVX2, KN_ISA_NEON,
                                    KN_ISA_SCALAR};

static atomic_int active_isa = -1;
static atomic_int enabled[KN_ISA_COUNT] = {-1, -1, -1, -1, -1}; /* -1: not decided yet */

const char *kn_isa_name(kn_isa isa) {
    return (int)isa >= 0 && isa < KN_ISA_COUNT ? isas[isa].name : "unknown";
}

static bool usable(kn_isa isa) {
    if ((int)isa < 0 || isa >= KN_ISA_COUNT) return false;
    return !isas[isa].usable || isas[isa].usable();
}

int kn__isa_enable(kn_isa isa, int on) {
    if ((int)isa < 0 || isa >= KN_ISA_COUNT) return 0;
    if (on >= 0) atomic_store(&enabled[isa], on && usable(isa));
    if (atomic_load(&enabled[isa]) < 0) {
        const char *env = isas[isa].off_env ? getenv(isas[isa].off_env) : NULL;
        int expected = -1;
        atomic_compare_exchange_strong(&enabled[isa], &expected,
                                       usable(isa) && !(env && strcmp(env, "0") == 0));
    }
    return atomic_load(&enabled[isa]);
}

kn_isa kn_isa_active(void) {
    int isa = atomic_load(&active_isa);
    if (isa >= 0) return (kn_isa)isa;
    isa = KN_ISA_SCALAR;
    for (size_t i = 0; i < sizeof preference / sizeof preference[0]; i++)
        if (kn__isa_enable(preference[i], -1)) {
            isa = preference[i];
            break;
        }
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

bool kn_isa_uses(kn_isa isa) {
    for (kn_isa i = kn_isa_active();; i = isas[i].base) {
        if (i == isa) return true;
        if (i == KN_ISA_SCALAR) return false;
    }
}

void kn_glu_apply(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n) {
    kn_isa i = kn_isa_active();
    while (!isas[i].glu) i = isas[i].base;
    isas[i].glu(glu, g, u, out, n);
}

/* The packer of the ISA whose Q8-mode kernel kn__kernel_isa picks for t, if it has one. */
const kn__packer *kn__packer_isa(kn_type t) {
    for (kn_isa i = kn_isa_active(); i != KN_ISA_SCALAR; i = isas[i].base) {
        if (!isas[i].kernel(t, KN_NUM_Q8)) continue;
        return isas[i].packer ? isas[i].packer(t) : NULL;
    }
    return NULL;
}

const kn__kernel *kn__kernel_isa(kn_type t, kn_numerics num) {
    for (kn_isa i = kn_isa_active(); i != KN_ISA_SCALAR; i = isas[i].base) {
        const kn__kernel *k = isas[i].kernel(t, num);
        if (k) return k;
    }
    return kn__kernel_scalar(t, num);
}
