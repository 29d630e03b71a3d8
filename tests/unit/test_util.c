/* tests/unit/test_util.c — mw_err formatting and wrapping. */
#include "tests/support/mw_test.h"
#include "util/mw_err.h"

#include <string.h>

static void test_errf_returns_minus_one_and_formats(void **state) {
    (void)state;
    mw_err e;
    assert_int_equal(mw_errf(&e, "file %s: bad count %d", "x.gguf", 7), -1);
    assert_string_equal(e.msg, "file x.gguf: bad count 7");
    assert_int_equal(mw_errf(NULL, "ignored"), -1);
}

static void test_wrap_prefixes(void **state) {
    (void)state;
    mw_err e;
    mw_errf(&e, "truncated");
    mw_err_wrap(&e, "reading %s", "m.gguf");
    assert_string_equal(e.msg, "reading m.gguf: truncated");
    mw_err_clear(&e);
    assert_string_equal(e.msg, "");
}

static void test_long_messages_are_truncated_not_overflowed(void **state) {
    (void)state;
    mw_err e;
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mw_errf(&e, "%s", big);
    assert_int_equal(strlen(e.msg), MW_ERR_MAX - 1);
    mw_err_wrap(&e, "%s", big);
    assert_int_equal(strlen(e.msg), MW_ERR_MAX - 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errf_returns_minus_one_and_formats),
        cmocka_unit_test(test_wrap_prefixes),
        cmocka_unit_test(test_long_messages_are_truncated_not_overflowed),
    };
    return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
