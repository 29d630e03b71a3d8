/* tests/unit/test_wr_live.c — the liveness channel in one process: endpoints split, a responder
 * keeps its node armed and never silent, a node that stops answering is called silent within
 * down_ms and a ping interval, a wrong token gets no answer, a slot set again forgets the old, a
 * forged or replayed ping gets no answer and a forged pong keeps no silent node up. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "util/mw_time.h"
#include "wire/wr_live.h"

static const uint8_t token[WR_LIVE_TOKEN] = "0123456789abcdef";

static void test_endpoint_split(void **state) {
    (void)state;
    char host[64];
    int port = 0;
    assert_int_equal(wr_live_endpoint("tcp://127.0.0.1:5555", host, sizeof host, &port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 5555);
    assert_int_equal(wr_live_endpoint("tcp://[::1]:7#KEYKEY", host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7);
    assert_int_equal(wr_live_endpoint("tcp://*:80", host, sizeof host, &port), 0);
    assert_string_equal(host, "*");
    assert_int_equal(wr_live_endpoint("tcp://127.0.0.1:*", host, sizeof host, &port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 0);
    assert_int_equal(wr_live_endpoint("tcp://h:*1", host, sizeof host, &port), -1);
    assert_int_equal(wr_live_endpoint("ipc:///tmp/x", host, sizeof host, &port), -1);
    assert_int_equal(wr_live_endpoint("tcp://h:99999", host, sizeof host, &port), -1);
    assert_int_equal(wr_live_endpoint("tcp://h:1x", host, sizeof host, &port), -1);
    assert_int_equal(wr_live_endpoint("tcp://:1", host, sizeof host, &port), -1);
    assert_int_equal(wr_live_endpoint("tcp://[::1:1", host, sizeof host, &port), -1);
}

/* Waits up to ms for slot i's state to satisfy want; the ms it took, -1 when it never did. */
static long wait_state(wr_live_prober *p, int i, bool (*want)(const wr_live_state *), long ms) {
    const uint64_t t0 = mw_now_ns();
    for (;;) {
        wr_live_state st = wr_live_prober_state(p, i);
        long el = (long)((mw_now_ns() - t0) / 1000000ull);
        if (want(&st)) return el;
        if (el > ms) return -1;
        usleep(2000);
    }
}

static bool armed(const wr_live_state *s) {
    return s->armed;
}
static bool silent(const wr_live_state *s) {
    return s->silent;
}

static void test_answering_node_stays_up_then_falls_silent(void **state) {
    (void)state;
    mw_err e;
    wr_live_responder *r;
    int port = 0;
    assert_int_equal(wr_live_responder_start("tcp://127.0.0.1:0", token, &r, &port, &e), 0);
    assert_true(port > 0);
    wr_live_prober *p;
    const int down = 200;
    assert_int_equal(wr_live_prober_start(4, down, "test", &p, &e), 0);
    assert_int_equal(wr_live_prober_set(p, 2, "127.0.0.1", port, token, "n2", &e), 0);
    assert_true(wait_state(p, 2, armed, 2000) >= 0);
    usleep(1000 * 1000); /* five times down_ms, answered all along */
    wr_live_state st = wr_live_prober_state(p, 2);
    assert_false(st.silent);
    assert_int_equal(st.silences, 0);
    assert_true(st.pongs >= 5);
    assert_true(wr_live_responder_answered(r) >= st.pongs);
    const uint64_t t0 = mw_now_ns();
    wr_live_responder_stop(r);
    assert_true(wait_state(p, 2, silent, 2000) >= 0);
    const long took = (long)((mw_now_ns() - t0) / 1000000ull);
    print_message("silent %ld ms after the responder stopped (down_ms %d)\n", took, down);
    assert_true(took >= down - 30);
    assert_true(took <= down + 250);
    st = wr_live_prober_state(p, 2);
    assert_int_equal(st.silences, 1);
    assert_true(st.silent_ms >= (uint32_t)down);
    /* readable once it fell */
    int fd = wr_live_prober_fd(p);
    assert_true(fd >= 0);
    char c;
    assert_true(read(fd, &c, 1) == 1);
    wr_live_prober_ack(p);
    /* set again (a node that came back): armed afresh, the count starts over */
    assert_int_equal(wr_live_responder_start("tcp://127.0.0.1:0", token, &r, &port, &e), 0);
    assert_int_equal(wr_live_prober_set(p, 2, "127.0.0.1", port, token, "n2", &e), 0);
    assert_true(wait_state(p, 2, armed, 2000) >= 0);
    st = wr_live_prober_state(p, 2);
    assert_int_equal(st.silences, 0);
    assert_false(st.silent);
    wr_live_prober_stop(p);
    wr_live_responder_stop(r);
}

static void test_wrong_token_gets_no_answer(void **state) {
    (void)state;
    mw_err e;
    wr_live_responder *r;
    int port = 0;
    assert_int_equal(wr_live_responder_start("tcp://127.0.0.1:0", token, &r, &port, &e), 0);
    wr_live_prober *p;
    assert_int_equal(wr_live_prober_start(1, 100, "test", &p, &e), 0);
    uint8_t other[WR_LIVE_TOKEN];
    memcpy(other, token, sizeof other);
    other[15] ^= 1;
    assert_int_equal(wr_live_prober_set(p, 0, "127.0.0.1", port, other, "n0", &e), 0);
    usleep(400 * 1000);
    wr_live_state st = wr_live_prober_state(p, 0);
    assert_true(st.pings >= 2);
    assert_int_equal(st.pongs, 0);
    assert_false(st.armed);
    assert_false(st.silent); /* never armed: never called silent either */
    assert_int_equal(wr_live_responder_answered(r), 0);
    assert_int_equal(wr_live_prober_set(p, 0, "no.such.host.invalid", port, token, "x", &e), -1);
    wr_live_prober_stop(p);
    wr_live_responder_stop(r);
}

/* The data port's number taken for UDP too: the responder takes another and says which. */
static void test_port_taken_elsewhere(void **state) {
    (void)state;
    mw_err e;
    wr_live_responder *a, *b;
    int pa = 0, pb = 0;
    assert_int_equal(wr_live_responder_start("tcp://127.0.0.1:0", token, &a, &pa, &e), 0);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", pa);
    assert_int_equal(wr_live_responder_start(ep, token, &b, &pb, &e), 0);
    assert_true(pb > 0 && pb != pa);
    wr_live_responder *c;
    int pc = 0;
    assert_int_equal(wr_live_responder_start("ipc:///tmp/x", token, &c, &pc, &e), -1);
    assert_null(c);
    wr_live_responder_stop(a);
    wr_live_responder_stop(b);
}

/* A UDP socket on 127.0.0.1 (its port in *port). */
static int udp_socket(int *port) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* The next datagram on fd within ms (its length, -1 when none came). */
static ssize_t next_datagram(int fd, uint8_t *b, size_t cap, int ms) {
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, ms) != 1) return -1;
    return recv(fd, b, cap, 0);
}

/* Sends b to 127.0.0.1:port from fd and returns the answer's length (-1: none within 100 ms). */
static ssize_t ask(int fd, int port, const uint8_t *b, size_t n, uint8_t *reply, size_t cap) {
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)port)};
    assert_int_equal(sendto(fd, b, n, 0, (struct sockaddr *)&to, sizeof to), (ssize_t)n);
    return next_datagram(fd, reply, cap, 100);
}

/* A real ping, captured on its way (the prober pointed at the test's socket), is answered once;
 * played back, or with one bit changed anywhere, or in the old form carrying the token in clear,
 * it gets nothing. A pong forged from the ping (the kind byte changed, the MAC kept) does not arm
 * the prober; the real pong does; played back over and over after that, it does not keep the node
 * from being called silent. */
static void test_forged_and_replayed_pings(void **state) {
    (void)state;
    mw_err e;
    wr_live_responder *r;
    int port = 0, tap_port = 0, out_port = 0;
    assert_int_equal(wr_live_responder_start("tcp://127.0.0.1:0", token, &r, &port, &e), 0);
    int tap = udp_socket(&tap_port), out = udp_socket(&out_port);
    wr_live_prober *p;
    /* a ping every 100 ms: the captured one is still remembered when its pong comes back */
    assert_int_equal(wr_live_prober_start(1, 1000, "test", &p, &e), 0);
    assert_int_equal(wr_live_prober_set(p, 0, "127.0.0.1", tap_port, token, "tap", &e), 0);
    uint8_t ping[128], pong[128], b[128];
    struct sockaddr_storage pa; /* the prober's address */
    socklen_t pl = sizeof pa;
    struct pollfd pf = {tap, POLLIN, 0};
    assert_int_equal(poll(&pf, 1, 2000), 1);
    const ssize_t n = recvfrom(tap, ping, sizeof ping, 0, (struct sockaddr *)&pa, &pl);
    assert_true(n > 0);
    for (ssize_t i = 0; i + WR_LIVE_TOKEN <= n; i++) /* the token never travels */
        assert_memory_not_equal(ping + i, token, WR_LIVE_TOKEN);
    /* a pong forged from the ping: the kind changed, the MAC kept */
    memcpy(b, ping, (size_t)n);
    b[4] = 2;
    assert_int_equal(sendto(tap, b, (size_t)n, 0, (struct sockaddr *)&pa, pl), n);
    /* the real ping is answered once */
    const ssize_t m = ask(out, port, ping, (size_t)n, pong, sizeof pong);
    assert_int_equal(m, n);
    assert_int_equal(pong[4], 2);
    /* played back: nothing */
    assert_int_equal(ask(out, port, ping, (size_t)n, b, sizeof b), -1);
    /* one bit changed anywhere: nothing */
    int changed = 0;
    for (ssize_t i = 0; i < n; i += 5, changed++) {
        memcpy(b, ping, (size_t)n);
        b[i] ^= 0x10;
        uint8_t junk[128];
        assert_int_equal(ask(out, port, b, (size_t)n, junk, sizeof junk), -1);
    }
    /* the old form (36 bytes, version 1, the token in clear): nothing */
    uint8_t old[36] = {'M', 'W', 'L', 'V', 1, 1};
    memcpy(old + 20, token, WR_LIVE_TOKEN);
    assert_int_equal(ask(out, port, old, sizeof old, b, sizeof b), -1);
    assert_int_equal(wr_live_responder_answered(r), 1);
    assert_int_equal(wr_live_responder_refused(r), 2 + (uint64_t)changed);
    /* the prober: the forged pong did not arm it, the real one does */
    wr_live_state st = wr_live_prober_state(p, 0);
    assert_false(st.armed);
    assert_int_equal(st.pongs, 0);
    assert_int_equal(sendto(tap, pong, (size_t)m, 0, (struct sockaddr *)&pa, pl), m);
    assert_true(wait_state(p, 0, armed, 1000) >= 0);
    /* the real pong played back every 10 ms: it answers no later ping, the node falls silent */
    const uint64_t t0 = mw_now_ns();
    while (!wr_live_prober_state(p, 0).silent && mw_now_ns() - t0 < 4000000000ull) {
        assert_int_equal(sendto(tap, pong, (size_t)m, 0, (struct sockaddr *)&pa, pl), m);
        usleep(10000);
    }
    st = wr_live_prober_state(p, 0);
    assert_true(st.silent);
    assert_int_equal(st.pongs, 1);
    wr_live_prober_stop(p);
    wr_live_responder_stop(r);
    close(tap);
    close(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoint_split),
        cmocka_unit_test(test_answering_node_stays_up_then_falls_silent),
        cmocka_unit_test(test_wrong_token_gets_no_answer),
        cmocka_unit_test(test_port_taken_elsewhere),
        cmocka_unit_test(test_forged_and_replayed_pings),
    };
    return cmocka_run_group_tests_name("wr_live", tests, NULL, NULL);
}
