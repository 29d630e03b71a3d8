/* wire/wr_guard.h — bounds the memory the peers of one listening ZeroMQ socket can make it hold.
 *
 * libzmq queues a multipart message until its last part has arrived, and counts only whole
 * messages against its high-water marks, so a peer that streams parts flagged MORE and never
 * ends the message grows the receiver by as many bytes as it sends (ZMQ_MAXMSGSIZE bounds one
 * part, not a message), and tiny parts cost ~30 bytes of memory per byte sent. The application
 * never sees such a message, so the guard watches below libzmq: a thread follows every accepted
 * TCP connection (socket monitor: ZMQ_EVENT_ACCEPTED carries the descriptor) and, every few
 * milliseconds, the bytes libzmq has read from it (TCP_INFO's bytes received minus what still
 * waits in the kernel) against the bytes at its last delivered message (the owner reports each
 * delivery, ZMQ_SRCFD naming the connection). A connection that holds more than `peer_bytes`
 * beyond its last delivered message, or the largest holder when all together pass `total_bytes`
 * or the process heap passes its owner's own use by `total_bytes` (malloc statistics), is cut
 * off: the TCP connection is reset at once and what the kernel holds of it discarded (connect()
 * to AF_UNSPEC; where that fails, shutdown() of its receiving side and a zero linger), after which
 * libzmq sees the connection fail, drops it and frees the unfinished message. One line on stderr
 * names the peer and the limit. The kernel's receive buffer of every accepted connection is fixed
 * (ZMQ_RCVBUF, 1 MiB) so that what the kernel queued unseen cannot reach libzmq in one burst bigger
 * than that, and a cut discards it with the connection.
 *
 * Memory held for peers then stays under total_bytes plus what arrives in one check interval
 * (the kernel buffer bounds what a starved node's libzmq reads at once when it gets a CPU back).
 * Linux only (TCP_INFO, mallinfo2); elsewhere wr_guard_start fails and the owner runs without it.
 */
#ifndef WR_GUARD_H
#define WR_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "util/mw_err.h"
#include "wire/wr_zmq.h"

typedef struct wr_guard_opts {
    uint64_t peer_bytes;  /* most wire bytes one connection may have libzmq hold beyond its last
                             delivered message */
    uint64_t total_bytes; /* most bytes held for all connections together (and heap beyond the
                             owner's own use) */
    int interval_ms;      /* check period (default 10) */
    const char *name;     /* prefix of log lines, e.g. "expert-node n1" */
    bool quiet;           /* no log lines */
} wr_guard_opts;

typedef struct wr_guard wr_guard;

/* Watches the connections accepted by `sock` (a bound socket of ctx) and fixes their kernel
 * receive buffer (ZMQ_RCVBUF, unless sock has a smaller one). Call from the thread that owns sock,
 * before it binds; the guard's thread owns only the monitor socket. */
int wr_guard_start(void *ctx, void *sock, const wr_guard_opts *o, wr_guard **out, mw_err *err);
/* Stops the thread and frees the guard (NULL is fine). */
void wr_guard_stop(wr_guard *g);

/* The descriptor of the connection a received message came from (ZMQ_SRCFD), or -1. */
int wr_rx_fd(const wr_rx *rx);
/* The owner received a whole message from the connection `fd`: what it held is delivered. */
void wr_guard_delivered(wr_guard *g, int fd);
/* Changes the prefix of the guard's log lines. */
void wr_guard_rename(wr_guard *g, const char *name);
/* The owner's own heap use beyond what it had at wr_guard_start (its buffers), for the heap rule;
 * callable from any thread. */
void wr_guard_set_own(wr_guard *g, uint64_t bytes);
/* Cuts a connection off now (a peer that broke a rule the owner enforces), with `why` logged. */
void wr_guard_cut(wr_guard *g, int fd, const char *why);
/* The peer's address "IP:PORT" of connection fd (into buf), or "" when unknown. */
const char *wr_guard_peer(wr_guard *g, int fd, char *buf, size_t cap);

/* Bytes the peer's TCP has acknowledged on connection fd (sent, received by its kernel); -1 when
 * fd is no TCP socket or on platforms without TCP_INFO. */
int wr_tcp_acked(int fd, uint64_t *acked);

typedef struct wr_guard_stats {
    uint64_t connections; /* accepted so far */
    uint64_t cut;         /* connections cut off */
    uint64_t peak_held;   /* most bytes held for all connections at one check */
} wr_guard_stats;

wr_guard_stats wr_guard_get_stats(wr_guard *g);

#endif
