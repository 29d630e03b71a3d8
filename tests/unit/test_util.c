/* tests/unit/test_util.c — mw_err formatting and wrapping; the monotonic clock; table names; the
 * platform calls (a mapping grown with its contents, the allowed CPUs and binding to one, a TCP
 * connection's counts where the system keeps them). */
#include "tests/support/mw_test.h"
#include "util/mw_err.h"
#include "util/mw_names.h"
#include "util/mw_platform.h"
#include "util/mw_time.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
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

static void test_map_grow_keeps_contents(void **state) {
    (void)state;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *p = mw_map_grow(NULL, 0, 3 * page);
    assert_non_null(p);
    for (size_t i = 0; i < 3 * page; i++) p[i] = (unsigned char)(i * 7 + 1);
    unsigned char *q = mw_map_grow(p, 3 * page, 40 * page);
    assert_non_null(q);
    for (size_t i = 0; i < 3 * page; i++) assert_int_equal(q[i], (unsigned char)(i * 7 + 1));
    for (size_t i = 3 * page; i < 40 * page; i += 97) assert_int_equal(q[i], 0);
    q[40 * page - 1] = 5;
    munmap(q, 40 * page);
}

/* Binding to an allowed CPU succeeds (a no-op where threads cannot be bound); the allowed CPUs
 * are in increasing order. */
static void test_cpus_and_binding(void **state) {
    (void)state;
    int ids[1024];
    const int n = mw_cpus_allowed(ids, 1024);
    assert_true(n >= 0);
    for (int i = 1; i < n; i++) assert_true(ids[i] > ids[i - 1]);
    if (n == 0) return;
    assert_int_equal(mw_thread_bind_cpu(pthread_self(), ids[n - 1]), 0);
    assert_int_equal(mw_thread_bind_cpu(pthread_self(), ids[0]), 0);
    int all[1024];
    assert_int_equal(mw_cpus_allowed(all, 1024), 1); /* bound to one now */
    assert_int_equal(all[0], ids[0]);
    cpu_set_t set; /* put back */
    CPU_ZERO(&set);
    for (int i = 0; i < n; i++) CPU_SET(ids[i], &set);
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
}

/* What the reader has taken from a loopback connection and what the peer acknowledged, counted
 * by the kernel (where it does; -1 on a descriptor that is no TCP socket). */
static void test_tcp_counts(void **state) {
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    uint64_t v = 0;
    assert_int_equal(mw_tcp_received(fds[0], &v), -1);
    close(fds[0]);
    close(fds[1]);
    if (!mw_tcp_counts()) skip();
    const int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    const int c = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
    const int s = accept(l, NULL, NULL);
    assert_true(s >= 0);
    /* the counts start where the handshake left them (Linux counts the SYN as acknowledged) */
    uint64_t acked0 = 0, received0 = 0, acked = 0;
    if (mw_tcp_acked(c, &acked0) != 0 || mw_tcp_received(s, &received0) != 0) {
        /* a kernel without these TCP_INFO fields, or qemu-user, which does not pass TCP_INFO on */
        fprintf(stderr, "    TCP_INFO not available here: skipped\n");
        close(s), close(c), close(l);
        skip();
    }
    char buf[1000] = {0};
    assert_int_equal(send(c, buf, sizeof buf, 0), (ssize_t)sizeof buf);
    assert_int_equal(recv(s, buf, 600, MSG_WAITALL), 600);
    for (int i = 0; i < 1000 && (mw_tcp_acked(c, &acked) != 0 || acked < acked0 + 1000); i++)
        usleep(1000);
    assert_int_equal(acked - acked0, 1000); /* the kernel has it all; the reader took 600 */
    assert_int_equal(mw_tcp_received(s, &v), 0);
    assert_int_equal(v - received0, 600);
    assert_int_equal(recv(s, buf, 400, MSG_WAITALL), 400);
    assert_int_equal(mw_tcp_received(s, &v), 0);
    assert_int_equal(v - received0, 1000);
    close(s);
    close(c);
    close(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errf_returns_minus_one_and_formats),
        cmocka_unit_test(test_wrap_prefixes),
        cmocka_unit_test(test_long_messages_are_truncated_not_overflowed),
        cmocka_unit_test(test_clock_is_monotonic_in_every_unit),
        cmocka_unit_test(test_names_find_and_join),
        cmocka_unit_test(test_map_grow_keeps_contents),
        cmocka_unit_test(test_cpus_and_binding),
        cmocka_unit_test(test_tcp_counts),
    };
    return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
