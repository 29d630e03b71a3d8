/* tests/unit/kn_test_twin.h — the runner shared by the test_kn_avxvnni* programs (included, not a
 * test program): each includes one kernel test file with its main renamed and hands that main to
 * kt_twin_run, which checks that the AVX-VNNI row is the EVEX twin the Makefile linked ahead of the
 * library (kn_simd_avxvnni.c built with KN__VNNI_EVEX_TWIN), makes it the default ISA and runs the
 * included test's checks with it. Without AVX512-VNNI + VL, or off x86-64, it skips, saying so. */
#ifndef KN_TEST_TWIN_H
#define KN_TEST_TWIN_H

#include "kernels/kn_internal.h"
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <string.h>

/* The row's kernel for every format it holds is the twin's (labelled "avxvnni-evex-..."): the
 * substitution happened and the included checks run its code, not the AVX2 row's. */
static void kt_twin_row_is_the_evex_twin(void **state) {
    (void)state;
    if (kn_isa_force(KN_ISA_AVXVNNI) != 0) {
        fprintf(stderr, "the AVX-VNNI row's EVEX twin needs AVX512-VNNI and AVX512-VL on x86-64, "
                        "which this machine lacks: skipped\n");
        skip();
    }
    static const kn_type types[] = {KN_MXFP4, KN_Q8_0, KN_Q6_K, KN_Q4_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const kn__kernel *k = kn__kernel_for(types[i], KN_NUM_Q8);
        if (strncmp(k->name, "avxvnni-evex-", 13) != 0)
            fail_msg("%s: kernel %s, not the AVX-VNNI row's EVEX twin", kn_type_name(types[i]),
                     k->name);
    }
}

/* Runs the twin check as group `name`, then, with the twin the default ISA, the included test's
 * main (`checks`). */
static inline int kt_twin_run(const char *name, int (*checks)(void)) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(kt_twin_row_is_the_evex_twin)};
    const int failed = cmocka_run_group_tests_name(name, tests, NULL, NULL);
    if (failed || kn_isa_active() != KN_ISA_AVXVNNI) return failed;
    return checks();
}

#endif
