/* tests/unit/test_co_admin.c — the /admin/nodes queue: a list is trimmed and numbered, a later one
 * replaces one not taken yet, bad lists are refused naming why, the outcome reads back as JSON. */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_admin.h"

static void test_queue_take_done(void **state) {
    (void)state;
    co_admin *a = co_admin_new();
    assert_non_null(a);
    mw_err e;
    long long id;
    assert_null(co_admin_take(a, &id)); /* nothing queued */
    assert_int_equal(co_admin_queue(a, "  tcp://h:1,tcp://h:2\n", &e), 1);
    assert_int_equal(co_admin_queue(a, "tcp://h:3", &e), 2); /* replaces the first */
    char *l = co_admin_take(a, &id);
    assert_string_equal(l, "tcp://h:3");
    assert_int_equal(id, 2);
    free(l);
    assert_null(co_admin_take(a, &id));
    co_admin_done(a, 2, false, "draining would leave 3 expert(s) without a live owner");
    char *js = co_admin_state(a);
    json_t *j = json_loads(js, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "queued")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "applied")), 2);
    assert_true(json_is_false(json_object_get(j, "ok")));
    assert_non_null(strstr(json_string_value(json_object_get(j, "message")), "live owner"));
    json_decref(j);
    free(js);
    co_admin_free(a);
}

static void test_bad_lists_refused(void **state) {
    (void)state;
    co_admin *a = co_admin_new();
    mw_err e;
    assert_int_equal(co_admin_queue(a, " \r\n\t", &e), -1);
    assert_non_null(strstr(e.msg, "empty"));
    assert_int_equal(co_admin_queue(a, "tcp://h:1\ntcp://h:2", &e), -1);
    assert_non_null(strstr(e.msg, "control character at byte 9"));
    char *big = malloc(CO_ADMIN_MAX_LIST + 2);
    memset(big, 'a', CO_ADMIN_MAX_LIST + 1);
    big[CO_ADMIN_MAX_LIST + 1] = '\0';
    assert_int_equal(co_admin_queue(a, big, &e), -1);
    assert_non_null(strstr(e.msg, "at most"));
    free(big);
    long long id;
    assert_null(co_admin_take(a, &id)); /* nothing was queued */
    co_admin_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_take_done),
        cmocka_unit_test(test_bad_lists_refused),
    };
    return cmocka_run_group_tests_name("co_admin", tests, NULL, NULL);
}
