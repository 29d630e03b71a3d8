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

/* Instruction-set variants this machine can run, scalar first: each ISA, and on x86 AVX2 both
 * without and with its AVX-VNNI kernels. */
typedef struct kt_variant {
    kn_isa isa;
    int vnni;
    char name[32];
} kt_variant;

static inline int kt_variants(kt_variant out[2 * KN_ISA_COUNT]) {
    int n = 0;
    const kn_isa prev = kn_isa_active();
    const int prev_vnni = kn_isa_vnni(-1);
    for (int i = 0; i < KN_ISA_COUNT; i++) {
        if (kn_isa_force((kn_isa)i) != 0) continue;
        for (int v = 0; v < 2; v++) {
            if (v && (i != KN_ISA_AVX2 || !kn_isa_avxvnni_usable())) continue;
            out[n].isa = (kn_isa)i;
            out[n].vnni = v;
            snprintf(out[n].name, sizeof out[n].name, "%s%s", kn_isa_name((kn_isa)i),
                     v ? "+vnni" : "");
            n++;
        }
    }
    kn_isa_force(prev);
    kn_isa_vnni(prev_vnni);
    return n;
}

static inline void kt_use(const kt_variant *v) {
    assert_int_equal(kn_isa_force(v->isa), 0);
    kn_isa_vnni(v->vnni);
}

#endif
