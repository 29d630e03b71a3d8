/* tests/unit/test_mw_test.c — the shared test helpers themselves: the paths mwt_bin and
 * mwt_fixture hand out can be used together (two in one argv) and stay valid. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_tail(const char *path, const char *tail) {
    size_t n = strlen(path), k = strlen(tail);
    assert_true(n > k);
    assert_string_equal(path + n - k, tail);
}

static void test_paths_used_together(void **state) {
    (void)state;
    const char *argv[] = {mwt_bin("coordinator"), mwt_bin("vindex"), mwt_fixture("vocab/a.gguf"),
                          mwt_fixture("vocab/b.gguf")};
    check_tail(argv[0], "/coordinator");
    check_tail(argv[1], "/vindex");
    check_tail(argv[2], "/vocab/a.gguf");
    check_tail(argv[3], "/vocab/b.gguf");
    /* many other paths later, the first ones still read the same; asking again gives the same */
    char name[32];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "prog-%d", i);
        check_tail(mwt_bin(name), name);
        check_tail(mwt_fixture(name), name);
    }
    check_tail(argv[0], "/coordinator");
    check_tail(argv[3], "/vocab/b.gguf");
    assert_ptr_equal(mwt_bin("vindex"), argv[1]);
    assert_ptr_equal(mwt_fixture("vocab/a.gguf"), argv[2]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_used_together),
    };
    return cmocka_run_group_tests_name("mw_test", tests, NULL, NULL);
}
