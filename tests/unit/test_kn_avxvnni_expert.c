/* tests/unit/test_kn_avxvnni_expert.c — test_kn_expert's checks (the fused expert op against its
 * composition and the reference, batches, GLU on every ISA) with the AVX-VNNI row's EVEX twin as
 * the default ISA, where AVX-VNNI itself is missing (see test_kn_avxvnni.c and the Makefile). */
#define main kt_expert_main /* test_kn_expert.c's main, called through kt_twin_run */
#include "tests/unit/test_kn_expert.c"
#undef main

#include "tests/unit/kn_test_twin.h"

int main(void) {
    return kt_twin_run("kernels_avxvnni_twin_expert", kt_expert_main);
}
