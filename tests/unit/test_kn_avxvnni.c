/* tests/unit/test_kn_avxvnni.c — the AVX-VNNI row's source run where AVX-VNNI itself is missing:
 * on x86-64 the Makefile links this test with kn_simd_avxvnni.c built once more with the EVEX twins
 * of its multiply-adds (AVX512-VNNI + VL, KN__VNNI_EVEX_TWIN) in place of the library's AVX-VNNI
 * object. The row then counts as usable where AVX512-VNNI and VL are, and test_kn_matmul's checks
 * (included below, not copied: every ISA variant against the scalar reference bit for bit, T = 1,
 * the few-token passes and batches, tails, inf / NaN / subnormal scales, extreme K-quant sums) run
 * with it as one of the variants and as the default ISA. test_kn_avxvnni_expert and
 * test_kn_avxvnni_fixtures do the same with the fused expert op's and llama.cpp's fixtures' checks.
 * Without AVX512-VNNI + VL, or off x86-64, the row is not usable here and the test skips. */
#define main kt_matmul_main /* test_kn_matmul.c's main, called through kt_twin_run */
#include "tests/unit/test_kn_matmul.c"
#undef main

#include "tests/unit/kn_test_twin.h"

int main(void) {
    return kt_twin_run("kernels_avxvnni_twin", kt_matmul_main);
}
