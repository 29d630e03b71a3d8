/* wire/wr_live.h — liveness off the compute path: a node answers small UDP pings from a thread of
 * its own, and a coordinator's thread of its own sends them and says which node fell silent.
 *
 * Why not only ZMTP heartbeats: they travel the data connection, behind megabytes of rows, and
 * are answered by libzmq's I/O threads, which a node runs under SCHED_BATCH with its compute
 * (never preempting anything): on a loaded machine an answer can wait a full time slice of every
 * runnable thread, so a bound of 1 s on a hung node made healthy ones look dead. The responder's
 * thread runs under the default policy whatever the process's, sleeps in one blocking receive,
 * and does nothing but echo; the prober reads every answer that has arrived before it calls a
 * node silent, so its own starvation cannot make one.
 *
 * Pings and pongs are authenticated: an HMAC (libsodium crypto_auth) keyed by a key derived from
 * the token the node announced in its Welcome (over the authenticated, under CURVE encrypted, data
 * connection); the token itself never travels in a datagram. The node answers only a ping with a
 * valid MAC whose counter it has not seen from that prober (a window per prober), so it reflects
 * no traffic to strangers and a recorded ping played back gets nothing; the coordinator takes only
 * a pong with a valid MAC, its own prober id and an outstanding sequence number, so a forged or
 * replayed pong cannot keep a dead node up. The channel says only "this process runs": a node is
 * marked down by its silence, brought back by a fresh handshake on the data connection. */
#ifndef WR_LIVE_H
#define WR_LIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/mw_err.h"
#include "wire/wr_msg.h"

/* Splits "tcp://HOST:PORT" ("[v6]" hosts unbracketed; port "*", a bind's wildcard, is 0) into
 * host and port; -1 for other transports or a malformed endpoint. */
int wr_live_endpoint(const char *endpoint, char *host, size_t cap, int *port);

/* ---- the node's side ---- */

typedef struct wr_live_responder wr_live_responder;

/* Binds a UDP socket on the host and port of the node's data endpoint (another free port when that
 * one is taken) and starts the answering thread. *port_out: the bound port, for the Welcome. */
int wr_live_responder_start(const char *endpoint, const uint8_t token[WR_LIVE_TOKEN],
                            wr_live_responder **out, int *port_out, mw_err *err);
/* Pings answered so far. */
uint64_t wr_live_responder_answered(wr_live_responder *r);
/* Datagrams left unanswered so far: malformed, a MAC that does not verify, or a replay. */
uint64_t wr_live_responder_refused(wr_live_responder *r);
void wr_live_responder_stop(wr_live_responder *r);

/* ---- the coordinator's side ---- */

typedef struct wr_live_prober wr_live_prober;

/* A thread pinging up to cap nodes every interval (down_ms / 10, 10 .. 100 ms); a node armed (it
 * answered once) that leaves every ping sent in the last down_ms unanswered is silent. Messages
 * (a node that never answers) go to stderr prefixed with name. */
int wr_live_prober_start(int cap, int down_ms, const char *name, wr_live_prober **out, mw_err *err);
void wr_live_prober_stop(wr_live_prober *p);
/* Slot i pings host:port with token from now on (its earlier state forgotten); label names the
 * node in messages. -1 when the host does not resolve. */
int wr_live_prober_set(wr_live_prober *p, int i, const char *host, int port,
                       const uint8_t token[WR_LIVE_TOKEN], const char *label, mw_err *err);
/* Slot i pings no more. */
void wr_live_prober_clear(wr_live_prober *p, int i);
/* Readable when a node fell silent: poll it, then wr_live_prober_ack. */
int wr_live_prober_fd(const wr_live_prober *p);
void wr_live_prober_ack(wr_live_prober *p);

typedef struct wr_live_state {
    bool pinged;        /* the slot is set */
    bool armed;         /* it answered at least once */
    bool silent;        /* silent now */
    uint32_t silences;  /* times it fell silent since set: compare to notice a new one */
    uint32_t silent_ms; /* at the last fall: how long since the oldest unanswered ping */
    uint64_t pings, pongs;
} wr_live_state;
wr_live_state wr_live_prober_state(wr_live_prober *p, int i);

#endif
