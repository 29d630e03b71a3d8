/* wire/wr_zmq.h — moving moewire messages over ZeroMQ sockets.
 *
 * Nodes bind a ROUTER (every received message starts with the peer's routing id); coordinators
 * connect one DEALER per node. Received parts stay in zmq_msg_t (no copy) until the next receive;
 * wr_parse reads them in place. Sends copy each part once into libzmq. */
#ifndef WR_ZMQ_H
#define WR_ZMQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "util/mw_err.h"
#include "wire/wr_msg.h"

#define WR_MAX_ROUTING_ID 255

/* One received message. */
typedef struct wr_rx {
    zmq_msg_t msg[WR_MAX_PARTS];
    int n_msg; /* initialised entries of msg */
    wr_part parts[WR_MAX_PARTS];
    int n_parts;   /* parts after the routing id */
    int truncated; /* parts beyond WR_MAX_PARTS that were received and dropped */
    uint8_t id[WR_MAX_ROUTING_ID];
    size_t id_len; /* 0 unless received on a ROUTER */
} wr_rx;

void wr_rx_init(wr_rx *rx);
void wr_rx_free(wr_rx *rx); /* releases the parts; rx can receive again */
/* Moves the message in src into dst (dst must be empty: initialised or freed); src is left empty.
 * The parts are not copied. */
void wr_rx_move(wr_rx *dst, wr_rx *src);

/* Receives one whole multipart message. `routed`: the socket is a ROUTER, so the first part is the
 * sender's routing id. flags: 0 or ZMQ_DONTWAIT. Returns 0, or -1 with errno from libzmq (EAGAIN,
 * EINTR, ETERM, ...) and err set. */
int wr_recv(void *sock, wr_rx *rx, bool routed, int flags, mw_err *err);
/* The descriptor of the connection a received message came from (ZMQ_SRCFD), or -1. */
int wr_rx_fd(const wr_rx *rx);

/* Sends the packed message o, prefixed by routing id (id, id_len) when id_len > 0 (ROUTER).
 * flags: 0 or ZMQ_DONTWAIT. Returns 0, or -1 with errno from libzmq and err set. */
int wr_send(void *sock, const void *id, size_t id_len, const wr_out *o, int flags, mw_err *err);

/* The largest part libzmq accepts on a socket set up with lim (ZMQ_MAXMSGSIZE): twice the largest
 * frame lim allows, so a frame just over the limit is answered (ERROR_TOO_LARGE), not cut off. */
int64_t wr_part_limit(const wr_limits *lim);

/* Sets the options every moewire socket uses: ZMQ_LINGER 0 and ZMQ_MAXMSGSIZE (wr_part_limit).
 * DEALERs also get ZMQ_IMMEDIATE; ROUTERs ZMQ_ROUTER_MANDATORY so a reply to a vanished peer fails
 * instead of blocking. */
int wr_socket_setup(void *sock, const wr_limits *lim, mw_err *err);

/* The descriptor libzmq signals a socket's events on (ZMQ_FD), or -1. It becomes readable when
 * something arrives after the socket was last received from until EAGAIN; a send, or a look at
 * ZMQ_EVENTS, may take that signal, so after either the socket is read until EAGAIN before its
 * descriptor is trusted again. Polling it instead of the socket spares zmq_poll's look at every
 * socket's ZMQ_EVENTS (a system call each) before and after it sleeps. */
int wr_socket_fd(void *sock);

/* Takes the next event off a socket monitor (the PAIR connected to zmq_socket_monitor's
 * endpoint) without waiting: its id (ZMQ_EVENT_*) and value (a descriptor, an error or status
 * code), the endpoint part read and dropped. Returns false when none is queued. */
bool wr_monitor_event(void *mon, uint16_t *id, uint32_t *value);

#endif
