/* tests/unit/test_kn_avxvnni.c — the AVX-VNNI row's source run where AVX-VNNI itself is missing:
 * on x86-64 the Makefile links this test with kn_simd_avxvnni.c built once more with the EVEX twins
 * of its multiply-adds (AVX512-VNNI + VL, KN__VNNI_EVEX_TWIN) in place of the library's AVX-VNNI
 * object. The row then counts as usable where AVX512-VNNI and VL are, and test_kn_matmul's checks
 * (included below, not copied: every ISA variant against the scalar reference bit for bit, T = 1,
 * the few-token passes and batches, tails, inf / NaN / subnormal scales, extreme K-quant sums) run
 * with it as one of the variants and as the default ISA. Without AVX512-VNNI + VL, or off x86-64,
 * the row is not usable here and the test skips, saying so. */
#define main kt_matmul_main /* test_kn_matmul.c's main, called from the one below */
#include "tests/unit/test_kn_matmul.c"
#undef main

/* The row's kernel for every format it holds is the twin's (labelled "avxvnni-evex-..."): the
 * substitution happened and the checks above run its code, not the AVX2 row's. */
static void test_row_is_the_evex_twin(void **state) {
    (void)state;
    if (kn_isa_force(KN_ISA_AVXVNNI) != 0) {
        fprintf(stderr, "test_kn_avxvnni: the AVX-VNNI row's EVEX twin needs AVX512-VNNI and "
                        "AVX512-VL on x86-64, which this machine lacks: skipped\n");
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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_row_is_the_evex_twin)};
    const int failed = cmocka_run_group_tests_name("kernels_avxvnni_twin", tests, NULL, NULL);
    if (failed || kn_isa_active() != KN_ISA_AVXVNNI) return failed;
    return kt_matmul_main();
}
