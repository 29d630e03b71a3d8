/* wire/wr_relay.h — bounds, in its receive path, the memory the peers of a listening ZeroMQ
 * socket can make it hold.
 *
 * libzmq queues a multipart message until its last part has arrived, and counts only whole
 * messages against its high-water marks, so a peer that streams parts flagged MORE and never
 * ends the message grows the receiver by as many bytes as it sends (ZMQ_MAXMSGSIZE bounds one
 * part, not a message), and tiny parts cost ~30 bytes of memory per byte sent. libzmq has no hook
 * in its read path, and a thread that watches what it has read (TCP_INFO) and cuts a connection
 * after the fact is only as prompt as the scheduler lets it be: on a starved machine libzmq's I/O
 * thread read a flood of 87–120 MiB past a 64 MiB bound before such a watchdog ran.
 *
 * So libzmq reads no peer directly. The relay accepts the TCP connections itself and hands each
 * one's bytes on, unchanged, over a unix-domain connection of its own to the socket, which is
 * bound to an ipc:// endpoint in a directory only this user can enter (mkdtemp under $TMPDIR,
 * removed at stop), so no other user's process reaches it past the relay; ZMTP and CURVE run end
 * to end, through the relay. It reads a peer only while what it has passed on for it beyond its
 * last delivered message is under the peer's budget, and all peers together under the total: the
 * cost of what is passed on is counted frame by frame (the ZMTP framing is plain text, under CURVE
 * too) as the frame's bytes plus what libzmq keeps per part (WR_RELAY_PART_COST), so a flood of
 * empty parts is bounded in memory, not in bytes (ALLOWANCE_PER_S since its last message is not
 * counted: an idle connection's heartbeats). A peer at its budget is not read any more (TCP stops
 * it); when no message came from it for WR_RELAY_STALL_MS since it first reached the budget, and
 * the owner has looked for messages meanwhile (wr_relay_waiting, wr_relay_idle), it holds an
 * unfinished message, and it is cut off: the TCP connection is reset, the unix one closed (libzmq
 * drops it and frees the message), one line on stderr names the peer and the limit. No timing
 * decides the bound: a relay thread that waits for a CPU reads nothing meanwhile. The kernel's
 * receive buffer of each connection is fixed (1 MiB).
 *
 * The owner reports each message it receives (wr_relay_delivered with its ZMQ_SRCFD, the unix
 * connection, whose peer address names the relayed connection). Replies travel back the same
 * way; a peer that does not read them stops the relay from reading libzmq's side (TCP's
 * acknowledgement of what reached the peer: wr_relay_acked). Linux only (epoll, abstract unix
 * addresses); elsewhere wr_relay_start fails and the owner binds its socket directly. */
#ifndef WR_RELAY_H
#define WR_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/mw_err.h"

/* What libzmq holds per part beyond its bytes (a zmq_msg_t in its pipe, and a content header
 * when the part is not stored inside it): counted per frame against the budgets. */
#define WR_RELAY_PART_COST 128
/* A peer at its budget, and no message from it delivered for this long after the owner looked,
 * holds an unfinished message. */
#define WR_RELAY_STALL_MS 1000

typedef struct wr_relay_opts {
    uint64_t peer_bytes;  /* most memory one peer may make libzmq hold beyond its last delivered
                             message */
    uint64_t total_bytes; /* for all peers together */
    const char *name;     /* prefix of log lines, e.g. "expert-node n1" */
    bool quiet;           /* no log lines */
    bool bind_cpu;        /* run the relay's thread on CPU `cpu` (the one libzmq's I/O thread is
                             bound to: a message passes between them without waking a core) */
    int cpu;
} wr_relay_opts;

typedef struct wr_relay wr_relay;

/* Binds sock (a ROUTER, from the thread that owns it) to an ipc:// endpoint of its own, listens on
 * the tcp:// endpoint, and starts relaying. Its host is what libzmq takes: "*" (every IPv4
 * address), an interface's name ("eth0", "lo": its IPv4 address, else its IPv6 one), an IPv4 or
 * [IPv6] literal, or a host name; its port a number, or "*" or 0 for any. The bound TCP endpoint
 * ("tcp://IP:PORT") goes to bound. */
int wr_relay_start(void *sock, const char *endpoint, const wr_relay_opts *o, wr_relay **out,
                   char *bound, size_t cap, mw_err *err);
/* Stops the relay thread, closes every connection, frees the relay (NULL is fine). */
void wr_relay_stop(wr_relay *r);

/* The owner received a whole message from connection fd (its ZMQ_SRCFD): what it held is
 * delivered. */
void wr_relay_delivered(wr_relay *r, int fd);
/* The owner found no message waiting (a receive said EAGAIN). */
void wr_relay_idle(wr_relay *r);
/* The owner blocks waiting for messages (true) or is back at work (false): a blocked owner is
 * woken by any whole message, so a peer paused meanwhile holds an unfinished one. */
void wr_relay_waiting(wr_relay *r, bool waiting);
/* Cuts connection fd off (a peer that broke a rule the owner enforces), with `why` logged. */
void wr_relay_cut(wr_relay *r, int fd, const char *why);
/* The peer's address "IP:PORT" of connection fd (into buf), or "" when unknown. */
const char *wr_relay_peer(wr_relay *r, int fd, char *buf, size_t cap);
/* Bytes the peer's TCP has acknowledged on the connection behind fd; -1 when unknown. */
int wr_relay_acked(wr_relay *r, int fd, uint64_t *acked);
/* Changes the prefix of the relay's log lines. */
void wr_relay_rename(wr_relay *r, const char *name);

typedef struct wr_relay_stats {
    uint64_t connections; /* accepted so far */
    uint64_t cut;         /* connections cut off */
    uint64_t peak_held;   /* most counted for all connections at once */
} wr_relay_stats;

wr_relay_stats wr_relay_get_stats(wr_relay *r);

#endif
