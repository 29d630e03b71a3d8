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

/* Instruction-set variants this machine can run, scalar first: every row of the ISA table the CPU
 * and build support (on x86 AVX2, AVX-VNNI and AVX-512 each). */
typedef struct kt_variant {
    kn_isa isa;
    char name[40];
} kt_variant;

#define KT_MAX_VARIANTS KN_ISA_COUNT

static inline int kt_variants(kt_variant out[KT_MAX_VARIANTS]) {
    int n = 0;
    const kn_isa prev = kn_isa_active();
    for (int i = 0; i < KN_ISA_COUNT; i++) {
        if (kn_isa_force((kn_isa)i) != 0) continue;
        out[n].isa = (kn_isa)i;
        snprintf(out[n].name, sizeof out[n].name, "%s", kn_isa_name((kn_isa)i));
        n++;
    }
    kn_isa_force(prev);
    return n;
}

static inline void kt_use(const kt_variant *v) {
    assert_int_equal(kn_isa_force(v->isa), 0);
}

#endif
