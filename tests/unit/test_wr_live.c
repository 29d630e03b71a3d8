/* tests/unit/test_wr_live.c — the liveness channel in one process: endpoints split, a responder
 * keeps its node armed and never silent, a node that stops answering is called silent within
 * down_ms and a ping interval, a wrong token gets no answer, a slot set again forgets the old. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoint_split),
        cmocka_unit_test(test_answering_node_stays_up_then_falls_silent),
        cmocka_unit_test(test_wrong_token_gets_no_answer),
        cmocka_unit_test(test_port_taken_elsewhere),
    };
    return cmocka_run_group_tests_name("wr_live", tests, NULL, NULL);
}
