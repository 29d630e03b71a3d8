/* tests/unit/test_mw_notify.c — the service manager's notify datagrams: sent to a socket bound
 * here (a path and an abstract name), nothing without a socket, a socket that is not a valid
 * address ignored, the watchdog interval only for this process. */
#include "tests/support/mw_test.h"
#include "util/mw_notify.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A datagram socket bound at name ("/path" or "@abstract"). */
static int bind_at(const char *name) {
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(a.sun_path, name, n);
    if (name[0] == '@') a.sun_path[0] = 0;
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
    assert_int_equal(bind(fd, (struct sockaddr *)&a, len), 0);
    return fd;
}

static void expect(int fd, const char *msg) {
    char buf[600];
    ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    assert_true(n >= 0);
    buf[n] = 0;
    assert_string_equal(buf, msg);
}

static void test_path_socket(void **state) {
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/notify", mwt_tmp);
    int fd = bind_at(path);
    mw_notify_setup(path, NULL, NULL);
    assert_int_equal(mw_notify("READY=1"), 1);
    expect(fd, "READY=1");
    assert_int_equal(mw_notify_status("mounting %d extents", 48), 1);
    expect(fd, "STATUS=mounting 48 extents");
    assert_int_equal(mw_notify("STOPPING=1"), 1);
    expect(fd, "STOPPING=1");
    close(fd);
    unlink(path);
    assert_int_equal(mw_notify("READY=1"), -1); /* nobody listens any more */
}

static void test_abstract_socket(void **state) {
    (void)state;
    char name[64];
    snprintf(name, sizeof name, "@moewire-test-notify-%d", (int)getpid());
    int fd = bind_at(name);
    mw_notify_setup(name, NULL, NULL);
    assert_int_equal(mw_notify("WATCHDOG=1"), 1);
    expect(fd, "WATCHDOG=1");
    close(fd);
}

static void test_no_socket_and_bad_ones(void **state) {
    (void)state;
    mw_notify_setup(NULL, NULL, NULL);
    assert_int_equal(mw_notify("READY=1"), 0);
    mw_notify_setup("relative/path", NULL, NULL); /* not an address: nothing is sent */
    assert_int_equal(mw_notify("READY=1"), 0);
    mw_notify_setup("@", NULL, NULL);
    assert_int_equal(mw_notify("READY=1"), 0);
}

static void test_watchdog(void **state) {
    (void)state;
    char me[32];
    snprintf(me, sizeof me, "%d", (int)getpid());
    mw_notify_setup(NULL, "2000000", me);
    assert_int_equal(mw_notify_watchdog_usec(), 2000000);
    mw_notify_setup(NULL, "2000000", NULL);
    assert_int_equal(mw_notify_watchdog_usec(), 2000000);
    mw_notify_setup(NULL, "2000000", "1"); /* another process's watchdog */
    assert_int_equal(mw_notify_watchdog_usec(), 0);
    mw_notify_setup(NULL, NULL, NULL);
    assert_int_equal(mw_notify_watchdog_usec(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_socket),
        cmocka_unit_test(test_abstract_socket),
        cmocka_unit_test(test_no_socket_and_bad_ones),
        cmocka_unit_test(test_watchdog),
    };
    return cmocka_run_group_tests(tests, mwt_tmp_setup, mwt_tmp_teardown);
}
