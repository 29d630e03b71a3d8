/* wire/wr_zmq.c — multipart send and zero-copy receive of moewire messages over libzmq. */
#include "wire/wr_zmq.h"

#include <errno.h>
#include <string.h>

void wr_rx_init(wr_rx *rx) {
    memset(rx, 0, sizeof *rx);
}

void wr_rx_free(wr_rx *rx) {
    for (int i = 0; i < rx->n_msg; i++) zmq_msg_close(&rx->msg[i]);
    rx->n_msg = rx->n_parts = rx->truncated = 0;
    rx->id_len = 0;
}

void wr_rx_move(wr_rx *dst, wr_rx *src) {
    for (int i = 0; i < src->n_msg; i++) {
        zmq_msg_init(&dst->msg[i]);
        zmq_msg_move(&dst->msg[i], &src->msg[i]);
        zmq_msg_close(&src->msg[i]);
        /* a small part lives inside the zmq_msg_t itself: its address moved with it */
        dst->parts[i] = (wr_part){zmq_msg_data(&dst->msg[i]), zmq_msg_size(&dst->msg[i])};
    }
    dst->n_msg = src->n_msg;
    dst->n_parts = src->n_parts;
    dst->truncated = src->truncated;
    memcpy(dst->id, src->id, src->id_len);
    dst->id_len = src->id_len;
    src->n_msg = src->n_parts = src->truncated = 0;
    src->id_len = 0;
}

static int zmq_fail(mw_err *err, const char *what) {
    int e = errno;
    mw_errf(err, "%s: %s", what, zmq_strerror(e));
    errno = e;
    return -1;
}

int wr_recv(void *sock, wr_rx *rx, bool routed, int flags, mw_err *err) {
    wr_rx_free(rx);
    bool first = true, more = true;
    zmq_msg_t spill; /* the routing id, and parts beyond WR_MAX_PARTS */
    while (more) {
        bool keep = !(first && routed) && rx->n_msg < WR_MAX_PARTS;
        zmq_msg_t *m = keep ? &rx->msg[rx->n_msg] : &spill;
        zmq_msg_init(m);
        /* Only the first part can fail with EAGAIN: a multipart message arrives all at once. */
        if (zmq_msg_recv(m, sock, first ? flags : 0) < 0) {
            int e = errno;
            zmq_msg_close(m);
            wr_rx_free(rx);
            errno = e;
            return zmq_fail(err, "receive");
        }
        more = zmq_msg_more(m);
        if (keep) {
            rx->n_msg++;
        } else {
            if (first && routed) {
                size_t n = zmq_msg_size(m);
                rx->id_len = n < sizeof rx->id ? n : sizeof rx->id;
                memcpy(rx->id, zmq_msg_data(m), rx->id_len);
            } else {
                rx->truncated++;
            }
            zmq_msg_close(m);
        }
        first = false;
    }
    for (int i = 0; i < rx->n_msg; i++)
        rx->parts[i] = (wr_part){zmq_msg_data(&rx->msg[i]), zmq_msg_size(&rx->msg[i])};
    rx->n_parts = rx->n_msg;
    return 0;
}

int wr_rx_fd(const wr_rx *rx) {
    if (rx->n_msg < 1) return -1;
    return zmq_msg_get((zmq_msg_t *)&rx->msg[0], ZMQ_SRCFD);
}

int wr_send(void *sock, const void *id, size_t id_len, const wr_out *o, int flags, mw_err *err) {
    if (id_len > 0 && zmq_send(sock, id, id_len, flags | ZMQ_SNDMORE) < 0)
        return zmq_fail(err, "send routing id");
    for (int i = 0; i < o->n_parts; i++) {
        int more = i + 1 < o->n_parts ? ZMQ_SNDMORE : 0;
        /* After the first part the message is committed; later parts never block. */
        int f = (i == 0 && id_len == 0) ? flags : (flags & ~ZMQ_DONTWAIT);
        if (zmq_send(sock, o->part_len[i] ? (const void *)o->part[i] : (const void *)"",
                     o->part_len[i], f | more) < 0)
            return zmq_fail(err, "send");
    }
    return 0;
}

int64_t wr_part_limit(const wr_limits *lim) {
    /* Twice the larger of one raw tensor frame and the envelope limit: a message a little over
     * the receiver's limits still reaches wr_parse, which answers it with ERROR_TOO_LARGE naming
     * the limit; only a part far beyond them is cut off by libzmq (the connection is dropped). */
    uint64_t m = lim->max_frame_bytes > WR_MAX_ENVELOPE ? lim->max_frame_bytes : WR_MAX_ENVELOPE;
    return (int64_t)(2 * m);
}

int wr_socket_setup(void *sock, const wr_limits *lim, mw_err *err) {
    int type = 0, zero = 0, one = 1;
    size_t tl = sizeof type;
    if (zmq_getsockopt(sock, ZMQ_TYPE, &type, &tl) != 0) return zmq_fail(err, "socket type");
    wr_limits l = lim ? *lim : wr_limits_default();
    int64_t max = wr_part_limit(&l);
    if (zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max, sizeof max) != 0)
        return zmq_fail(err, "socket options");
    if (type == ZMQ_DEALER && zmq_setsockopt(sock, ZMQ_IMMEDIATE, &one, sizeof one) != 0)
        return zmq_fail(err, "ZMQ_IMMEDIATE");
    if (type == ZMQ_ROUTER && zmq_setsockopt(sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) != 0)
        return zmq_fail(err, "ZMQ_ROUTER_MANDATORY");
    return 0;
}

int wr_socket_fd(void *sock) {
    int fd = -1;
    size_t len = sizeof fd;
    if (!sock || zmq_getsockopt(sock, ZMQ_FD, &fd, &len) != 0) return -1;
    return fd;
}

bool wr_monitor_event(void *mon, uint16_t *id, uint32_t *value) {
    zmq_msg_t ev;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return false;
    }
    *id = 0;
    *value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(id, zmq_msg_data(&ev), 2);
        memcpy(value, (const uint8_t *)zmq_msg_data(&ev) + 2, 4);
    }
    bool more = zmq_msg_more(&ev);
    zmq_msg_close(&ev);
    while (more) { /* the endpoint */
        zmq_msg_t ep;
        zmq_msg_init(&ep);
        if (zmq_msg_recv(&ep, mon, 0) < 0)
            more = false;
        else
            more = zmq_msg_more(&ep);
        zmq_msg_close(&ep);
    }
    return true;
}
