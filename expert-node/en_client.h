/* expert-node/en_client.h — what the node keeps per client (a routing id of its ROUTER socket):
 * the connection it speaks on, the reply bytes it has not taken yet, the requests deferred to a
 * later round, and the counters behind its rate-limited log lines.
 *
 * Fair service: one client contributes at most EN_ROUND_QUOTA requests to a round; what it sends
 * beyond waits in its own queue (at most EN_CLIENT_QUEUE requests and the peer limit in bytes;
 * beyond, requests are dropped), so a client with a deep backlog delays another client's request
 * by at most that quota. A client that does not take its replies — the bytes handed to libzmq for
 * it minus those its TCP acknowledged exceed the peer limit — gets its further requests discarded
 * unexecuted until it reads again; replies libzmq refuses (its queue full) are dropped. Each
 * client's faults are logged at most once per EN_LOG_INTERVAL_S with the count since. */
#ifndef EN_CLIENT_H
#define EN_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "wire/wr_zmq.h"

#define EN_ROUND_QUOTA    4
#define EN_CLIENT_QUEUE   16
#define EN_MAX_CLIENTS    4096
#define EN_LOG_INTERVAL_S 10
#define EN_CLIENT_IDLE_S  60 /* a client silent that long may be forgotten */

typedef struct en_held {
    wr_rx rx;
    uint64_t t_rx;
    uint64_t bytes;
} en_held;

typedef struct en_client {
    uint8_t id[WR_MAX_ROUTING_ID];
    size_t id_len;
    int fd;
    char peer[64];
    uint64_t sent;    /* reply payload bytes handed to libzmq (a lower bound of what TCP carries) */
    uint64_t last_ns; /* last message from it */
    int in_round;     /* its requests in the round being gathered */
    en_held q[EN_CLIENT_QUEUE];
    int q_head, q_n;
    uint64_t q_bytes;
    /* since its last log line */
    uint64_t log_ns;
    uint64_t n_errors, n_dropped, n_discarded, n_overflow;
    char first_error[320];
} en_client;

struct en_node;

/* The client of the message in rx (from connection fd), created on first sight. NULL only when
 * out of memory. */
en_client *en_client_of(struct en_node *n, const wr_rx *rx, int fd);
/* The client with this routing id, or NULL. */
en_client *en_client_find(struct en_node *n, const uint8_t *id, size_t id_len);
/* Whether c has more reply bytes outstanding than the peer limit. */
bool en_client_stalled(struct en_node *n, en_client *c);
/* Moves rx into c's queue (rx is left empty); false when the queue is full. */
bool en_client_defer(struct en_node *n, en_client *c, wr_rx *rx, uint64_t t_rx);
/* Moves c's oldest deferred request into rx; false when none. */
bool en_client_take(en_client *c, wr_rx *rx, uint64_t *t_rx);

typedef enum en_fault { EN_F_ERROR, EN_F_DROPPED, EN_F_DISCARDED, EN_F_OVERFLOW } en_fault;
/* Counts a fault of c (msg: the error sent, for EN_F_ERROR) and logs, at most once per interval,
 * what was counted since the last line. */
void en_client_note(struct en_node *n, en_client *c, en_fault f, const char *msg);
/* Logs what every client has counted since its last line (at exit). */
void en_clients_flush(struct en_node *n);
/* Every client's round quota back to zero. */
void en_clients_new_round(struct en_node *n);
/* Whether any client has deferred requests. */
bool en_clients_pending(const struct en_node *n);
void en_clients_free(struct en_node *n);

#endif
