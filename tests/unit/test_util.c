/* tests/unit/test_util.c — mw_err formatting and wrapping; the monotonic clock; table names. */
#include "tests/support/mw_test.h"
#include "util/mw_err.h"
#include "util/mw_names.h"
#include "util/mw_time.h"

#include <string.h>
#include <unistd.h>

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

/* The three units read one clock: it never goes back, and 20 ms of sleep show in each. */
static void test_clock_is_monotonic_in_every_unit(void **state) {
    (void)state;
    uint64_t ns0 = mw_now_ns();
    int64_t ms0 = mw_now_ms();
    double s0 = mw_now_s();
    usleep(20000);
    uint64_t ns1 = mw_now_ns();
    int64_t ms1 = mw_now_ms();
    double s1 = mw_now_s();
    assert_true(ns1 - ns0 >= 20000000u);
    assert_true(ms1 - ms0 >= 19); /* truncated to whole milliseconds */
    assert_true(s1 - s0 >= 0.0199);
    assert_true(ns1 >= ns0 && ms1 >= ms0 && s1 >= s0);
    /* the same clock: seconds and milliseconds agree with nanoseconds read around them */
    uint64_t a = mw_now_ns();
    double s = mw_now_s();
    int64_t ms = mw_now_ms();
    uint64_t b = mw_now_ns();
    assert_true(s * 1e9 >= (double)a - 1e3 && s * 1e9 <= (double)b + 1e3);
    assert_true(ms >= (int64_t)(a / 1000000) && ms <= (int64_t)(b / 1000000));
}

/* Rows of a table with the name field not first, so the stride matters. */
static void test_names_find_and_join(void **state) {
    (void)state;
    static const struct {
        int x;
        const char *name;
        double y;
    } rows[] = {{1, "local", 0}, {2, "remote", 0}, {3, "remote-2", 0}};
    assert_int_equal(mw_names_find("remote", MW_NAMES(rows, name)), 1);
    assert_int_equal(mw_names_find("remote-2", MW_NAMES(rows, name)), 2);
    assert_int_equal(mw_names_find("remot", MW_NAMES(rows, name)), -1);
    assert_int_equal(mw_names_find(NULL, MW_NAMES(rows, name)), -1);
    char buf[64];
    assert_string_equal(mw_names_join(buf, sizeof buf, MW_NAMES(rows, name)),
                        "local, remote, remote-2");
    char small[9];
    assert_string_equal(mw_names_join(small, sizeof small, MW_NAMES(rows, name)), "local, r");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errf_returns_minus_one_and_formats),
        cmocka_unit_test(test_wrap_prefixes),
        cmocka_unit_test(test_long_messages_are_truncated_not_overflowed),
        cmocka_unit_test(test_clock_is_monotonic_in_every_unit),
        cmocka_unit_test(test_names_find_and_join),
    };
    return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
