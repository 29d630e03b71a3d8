/* tests/unit/test_kn_avxvnni_fixtures.c — test_kn_fixtures' checks (dequantization and matvec
 * against llama.cpp's outputs) with the AVX-VNNI row's EVEX twin usable and the default ISA, where
 * AVX-VNNI itself is missing (see test_kn_avxvnni.c and the Makefile). */
#define main kt_fixtures_main /* test_kn_fixtures.c's main, called through kt_twin_run */
#include "tests/unit/test_kn_fixtures.c"
#undef main

#include "tests/unit/kn_test_twin.h"

int main(void) {
    return kt_twin_run("kernels_avxvnni_twin_fixtures", kt_fixtures_main);
}
