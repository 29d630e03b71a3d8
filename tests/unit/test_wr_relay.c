/* tests/unit/test_wr_relay.c — the receive relay in one process: messages pass both ways through
 * it and each names its TCP peer (address, acknowledged bytes); a peer that speaks no ZMTP 3 is
 * cut off at its first bytes; an unfinished message past the peer budget pauses the peer and,
 * the owner waiting, cuts it off, with the bytes libzmq was handed held to the budget; a bad
 * endpoint is refused by name. */
#include "tests/support/mw_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/mwt_zmtp.h"
#include "util/mw_time.h"
#include "wire/wr_relay.h"
#include "wire/wr_zmq.h"

typedef struct side {
    void *ctx, *router;
    wr_relay *relay;
    char endpoint[128];
} side;

/* A relay for a ROUTER bound at endpoint; its bound endpoint must start with want. */
static side open_side_at(uint64_t peer_bytes, const char *endpoint, const char *want) {
    side s = {.ctx = zmq_ctx_new()};
    s.router = zmq_socket(s.ctx, ZMQ_ROUTER);
    mw_err e;
    assert_int_equal(wr_socket_setup(s.router, NULL, &e), 0);
    wr_relay_opts o = {
        .peer_bytes = peer_bytes, .total_bytes = 4 * peer_bytes, .name = "test", .quiet = true};
    if (wr_relay_start(s.router, endpoint, &o, &s.relay, s.endpoint, sizeof s.endpoint, &e))
        fail_msg("%s: %s", endpoint, e.msg);
    if (strncmp(s.endpoint, want, strlen(want)))
        fail_msg("%s bound %s, not %s...", endpoint, s.endpoint, want);
    return s;
}

static side open_side(uint64_t peer_bytes) {
    return open_side_at(peer_bytes, "tcp://127.0.0.1:*", "tcp://127.0.0.1:");
}

static void close_side(side *s) {
    wr_relay_stop(s->relay);
    zmq_close(s->router);
    zmq_ctx_term(s->ctx);
}

/* Waits up to ms for a whole message on s->router (the owner's loop: waiting, then receiving). */
static int owner_recv(side *s, wr_rx *rx, int ms) {
    zmq_pollitem_t it = {s->router, 0, ZMQ_POLLIN, 0};
    wr_relay_waiting(s->relay, true);
    int rc = zmq_poll(&it, 1, ms);
    wr_relay_waiting(s->relay, false);
    mw_err e;
    if (rc == 1 && wr_recv(s->router, rx, true, ZMQ_DONTWAIT, &e) == 0) return 0;
    wr_relay_idle(s->relay);
    return -1;
}

static void test_messages_pass_both_ways(void **state) {
    (void)state;
    side s = open_side(1u << 20);
    void *d = zmq_socket(s.ctx, ZMQ_DEALER);
    mw_err e;
    assert_int_equal(wr_socket_setup(d, NULL, &e), 0);
    int t = 5000;
    zmq_setsockopt(d, ZMQ_RCVTIMEO, &t, sizeof t);
    assert_int_equal(zmq_connect(d, s.endpoint), 0);
    wr_rx rx;
    wr_rx_init(&rx);
    for (int i = 0; i < 3; i++) {
        char big[100000];
        memset(big, 'a' + i, sizeof big);
        assert_int_equal(zmq_send(d, "hello", 5, ZMQ_SNDMORE), 5);
        assert_int_equal(zmq_send(d, big, sizeof big, 0), (int)sizeof big);
        assert_int_equal(owner_recv(&s, &rx, 5000), 0);
        assert_int_equal(rx.n_parts, 2);
        assert_int_equal(rx.parts[1].len, sizeof big);
        assert_int_equal(((const char *)rx.parts[1].data)[99999], 'a' + i);
        const int fd = wr_rx_fd(&rx);
        wr_relay_delivered(s.relay, fd);
        char peer[64];
        wr_relay_peer(s.relay, fd, peer, sizeof peer);
        assert_true(!strncmp(peer, "127.0.0.1:", 10));
        uint64_t acked = 0;
        assert_int_equal(wr_relay_acked(s.relay, fd, &acked), 0);
        assert_int_equal(zmq_send(s.router, rx.id, rx.id_len, ZMQ_SNDMORE), (int)rx.id_len);
        assert_int_equal(zmq_send(s.router, big, sizeof big, 0), (int)sizeof big);
        char back[100001];
        assert_int_equal(zmq_recv(d, back, sizeof back, 0), (int)sizeof big);
        assert_int_equal(back[0], 'a' + i);
    }
    /* a descriptor that is no relayed connection names nobody */
    char peer[64];
    assert_string_equal(wr_relay_peer(s.relay, 0, peer, sizeof peer), "");
    uint64_t acked;
    assert_int_equal(wr_relay_acked(s.relay, -1, &acked), -1);
    wr_rx_free(&rx);
    zmq_close(d);
    wr_relay_stats st = wr_relay_get_stats(s.relay);
    assert_int_equal(st.connections, 1);
    assert_int_equal(st.cut, 0);
    close_side(&s);
}

/* A TCP connection to 127.0.0.1 at the endpoint's port. */
static int raw_connect(const char *endpoint) {
    int port = atoi(strrchr(endpoint, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void test_no_zmtp_is_cut_off(void **state) {
    (void)state;
    side s = open_side(1u << 20);
    int fd = raw_connect(s.endpoint);
    const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(write(fd, req, sizeof req - 1), (ssize_t)sizeof req - 1);
    assert_true(mwt_zmtp_closed(fd, 5000));
    close(fd);
    const uint64_t t0 = mw_now_ns();
    while (wr_relay_get_stats(s.relay).cut < 1 && mw_now_ns() - t0 < 5000000000ull) usleep(1000);
    assert_int_equal(wr_relay_get_stats(s.relay).cut, 1);
    close_side(&s);
}

/* Parts of 64 KiB flagged MORE, never ending the message: the relay stops reading the peer at the
 * budget (1 MiB), and with the owner waiting for messages, cuts it off a second later. */
static void test_unfinished_message_paused_then_cut(void **state) {
    (void)state;
    side s = open_side(1u << 20);
    int fd = mwt_zmtp_connect(s.endpoint, 5000);
    assert_true(fd >= 0);
    enum { PART = 1 << 16 };
    static uint8_t frame[9 + PART];
    frame[0] = 3; /* MORE, long size */
    for (int k = 0; k < 8; k++) frame[1 + k] = (uint8_t)((uint64_t)PART >> (56 - 8 * k));
    size_t sent = 0;
    wr_rx rx;
    wr_rx_init(&rx);
    bool cut = false;
    const uint64_t t0 = mw_now_ns();
    /* the writer blocks once the relay stops reading; the owner loop runs meanwhile */
    struct pollfd pf = {fd, POLLOUT, 0};
    while (!cut && mw_now_ns() - t0 < 10000000000ull) {
        if (poll(&pf, 1, 0) == 1 && !(pf.revents & (POLLERR | POLLHUP))) {
            ssize_t w = send(fd, frame, sizeof frame, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0) sent += (size_t)w;
            if (w < 0 && errno != EAGAIN) cut = true;
            if (w > 0 && (size_t)w < sizeof frame) { /* finish the frame, blocking */
                if (mwt_zmtp_write(fd, frame + w, sizeof frame - (size_t)w) != 0) cut = true;
                sent += sizeof frame - (size_t)w;
            }
        }
        assert_int_equal(owner_recv(&s, &rx, 20), -1); /* never a whole message */
        cut |= wr_relay_get_stats(s.relay).cut > 0;
    }
    close(fd);
    wr_relay_stats st = wr_relay_get_stats(s.relay);
    print_message("sent %zu KiB before the cut; most held at once %llu B\n", sent >> 10,
                  (unsigned long long)st.peak_held);
    assert_int_equal(st.cut, 1);
    /* the budget, and at most one small read past it (a read never takes more than the room
     * left could pay for, but 64 bytes) */
    assert_true(st.peak_held < (1u << 20) + 4096);
    wr_rx_free(&rx);
    close_side(&s);
}

/* Hosts as libzmq took them in a bind: "*" (every IPv4 address) and an interface's name; a
 * message passes through each from 127.0.0.1. */
static void test_any_host_and_interface_names_bind(void **state) {
    (void)state;
    const char *ep[][2] = {{"tcp://*:*", "tcp://0.0.0.0:"},
                           {"tcp://lo:0", "tcp://127.0.0.1:"},
                           {"tcp://[::1]:*", "tcp://[::1]:"},
                           {"tcp://localhost:*", "tcp://"}};
    for (int i = 0; i < 4; i++) {
        side s = open_side_at(1u << 20, ep[i][0], ep[i][1]);
        /* to the address it bound, or to loopback when that is every address */
        char to[160];
        const bool v6 = strchr(s.endpoint, '[') != NULL;
        if (v6 || !strncmp(s.endpoint, "tcp://127.", 10))
            snprintf(to, sizeof to, "%s", s.endpoint);
        else
            snprintf(to, sizeof to, "tcp://127.0.0.1%s", strrchr(s.endpoint, ':'));
        void *d = zmq_socket(s.ctx, ZMQ_DEALER);
        mw_err e;
        assert_int_equal(wr_socket_setup(d, NULL, &e), 0);
        if (v6) {
            int on = 1;
            zmq_setsockopt(d, ZMQ_IPV6, &on, sizeof on);
        }
        assert_int_equal(zmq_connect(d, to), 0);
        assert_int_equal(zmq_send(d, "hi", 2, 0), 2);
        wr_rx rx;
        wr_rx_init(&rx);
        if (owner_recv(&s, &rx, 5000)) fail_msg("%s (bound %s): nothing came", ep[i][0], to);
        assert_int_equal(rx.parts[rx.n_parts - 1].len, 2);
        wr_rx_free(&rx);
        zmq_close(d);
        close_side(&s);
    }
}

static void test_bad_endpoint_is_refused(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new(), *r = zmq_socket(ctx, ZMQ_ROUTER);
    wr_relay_opts o = {.peer_bytes = 1 << 20, .total_bytes = 4 << 20, .quiet = true};
    wr_relay *relay;
    char bound[128];
    mw_err e;
    assert_int_equal(wr_relay_start(r, "tcp://nowhere:x", &o, &relay, bound, sizeof bound, &e), -1);
    assert_non_null(strstr(e.msg, "tcp://nowhere:x"));
    assert_null(relay);
    /* no such interface, and no such host either */
    assert_int_equal(wr_relay_start(r, "tcp://nosuchif9:*", &o, &relay, bound, sizeof bound, &e),
                     -1);
    assert_non_null(strstr(e.msg, "nosuchif9"));
    zmq_close(r);
    zmq_ctx_term(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_pass_both_ways),
        cmocka_unit_test(test_no_zmtp_is_cut_off),
        cmocka_unit_test(test_unfinished_message_paused_then_cut),
        cmocka_unit_test(test_any_host_and_interface_names_bind),
        cmocka_unit_test(test_bad_endpoint_is_refused),
    };
    return cmocka_run_group_tests_name("wr_relay", tests, NULL, NULL);
}
