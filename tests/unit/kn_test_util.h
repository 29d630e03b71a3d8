/* tests/unit/kn_test_util.h — helpers shared by the cmocka kernel tests (included, not a test
 * program): the test data of kn_test_data.h plus the ISA variants to loop over. */
#ifndef KN_TEST_UTIL_H
#define KN_TEST_UTIL_H

#include "tests/support/mw_test.h"
#include "tests/unit/kn_test_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Instruction-set variants this machine can run, scalar first: each ISA, and on x86 AVX2 with
 * and without its AVX-VNNI kernels and its AVX-512 kernels. */
typedef struct kt_variant {
    kn_isa isa;
    int vnni, avx512;
    char name[40];
} kt_variant;

#define KT_MAX_VARIANTS (4 * KN_ISA_COUNT)

static inline int kt_variants(kt_variant out[KT_MAX_VARIANTS]) {
    int n = 0;
    const kn_isa prev = kn_isa_active();
    const int prev_vnni = kn_isa_vnni(-1), prev_avx512 = kn_isa_avx512(-1);
    for (int i = 0; i < KN_ISA_COUNT; i++) {
        if (kn_isa_force((kn_isa)i) != 0) continue;
        for (int v = 0; v < 4; v++) {
            const int vnni = v & 1, avx512 = v >> 1;
            if (vnni && (i != KN_ISA_AVX2 || !kn_isa_avxvnni_usable())) continue;
            if (avx512 && (i != KN_ISA_AVX2 || !kn_isa_avx512_usable())) continue;
            out[n].isa = (kn_isa)i;
            out[n].vnni = vnni;
            out[n].avx512 = avx512;
            snprintf(out[n].name, sizeof out[n].name, "%s%s%s", kn_isa_name((kn_isa)i),
                     vnni ? "+vnni" : "", avx512 ? "+avx512" : "");
            n++;
        }
    }
    kn_isa_force(prev);
    kn_isa_vnni(prev_vnni);
    kn_isa_avx512(prev_avx512);
    return n;
}

static inline void kt_use(const kt_variant *v) {
    assert_int_equal(kn_isa_force(v->isa), 0);
    kn_isa_vnni(v->vnni);
    kn_isa_avx512(v->avx512);
}

#endif
