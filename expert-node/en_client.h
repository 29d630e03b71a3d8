/* expert-node/en_client.h — what the node keeps per client (a routing id of its ROUTER socket):
 * the connection it speaks on, the reply bytes it has not taken yet, the requests deferred to a
 * later round, and the counters behind its rate-limited log lines. Shared by the node's files
 * only (en__ names).
 *
 * Fair service: one client contributes at most EN__ROUND_QUOTA requests to a round; what it sends
 * beyond waits in its own queue (at most EN__CLIENT_QUEUE requests and the peer limit in bytes;
 * beyond, requests are dropped), so a client with a deep backlog delays another client's request
 * by at most that quota. A client that does not take its replies — the bytes handed to libzmq for
 * it minus those its TCP acknowledged exceed the peer limit — gets its further requests discarded
 * unexecuted until it reads again; replies libzmq refuses (its queue full) are dropped. Each
 * client's faults are logged at most once per EN__LOG_INTERVAL_S with the count since. */
#ifndef EN_CLIENT_H
#define EN_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "wire/wr_zmq.h"

#define EN__ROUND_QUOTA    4
#define EN__CLIENT_QUEUE   16
#define EN__MAX_CLIENTS    4096
#define EN__LOG_INTERVAL_S 10
#define EN__CLIENT_IDLE_S  60 /* a client silent that long may be forgotten */

typedef struct en__held {
    wr_rx rx;
    uint64_t t_rx;
    uint64_t bytes;
} en__held;

typedef struct en__client {
    uint8_t id[WR_MAX_ROUTING_ID];
    size_t id_len;
    int fd;
    char peer[64];
    uint64_t sent;    /* reply payload bytes handed to libzmq (a lower bound of what TCP carries) */
    uint64_t acked;   /* what connection acked_fd had acknowledged at the last look */
    int acked_fd;     /* -1: not looked at yet */
    uint64_t last_ns; /* last message from it */
    int in_round;     /* its requests in the round being gathered */
    /* what the group window knows of it (en_group.h) */
    int last_layer;      /* of its last request (-1: none yet) */
    int outstanding;     /* its requests received and not answered yet */
    bool held_here;      /* some of them are in a held group */
    int in_group1;       /* 1 + the round's group being judged, when it has rows in it */
    bool missed;         /* a group waited for it in vain: not waited for until it sends */
    uint64_t replied_ns; /* when its last request was answered (0: never) */
    uint64_t svc_ns;     /* from a request's arrival to its answer, averaged */
    uint64_t *lag_ns;    /* per layer l, averaged: from the answer to its request of the layer
                          * served before l to its request of l (0: not seen yet) */
    en__held q[EN__CLIENT_QUEUE];
    int q_head, q_n;
    uint64_t q_bytes;
    /* since its last log line */
    uint64_t log_ns;
    uint64_t n_errors, n_dropped, n_discarded, n_overflow;
    char first_error[320];
} en__client;

struct en_node;

/* The client of the message in rx (from connection fd), created on first sight. NULL only when
 * out of memory. */
en__client *en__client_of(struct en_node *n, const wr_rx *rx, int fd);
/* The client with this routing id, or NULL. */
en__client *en__client_find(struct en_node *n, const uint8_t *id, size_t id_len);
/* Whether c has more reply bytes outstanding than the peer limit. */
bool en__client_stalled(struct en_node *n, en__client *c);
/* Moves rx into c's queue (rx is left empty); false when the queue is full. */
bool en__client_defer(struct en_node *n, en__client *c, wr_rx *rx, uint64_t t_rx);
/* Moves c's oldest deferred request into rx; false when none. */
bool en__client_take(en__client *c, wr_rx *rx, uint64_t *t_rx);

typedef enum en__fault { EN__F_ERROR, EN__F_DROPPED, EN__F_DISCARDED, EN__F_OVERFLOW } en__fault;
/* Counts a fault of c (msg: the error sent, for EN__F_ERROR) and logs, at most once per interval,
 * what was counted since the last line. */
void en__client_note(struct en_node *n, en__client *c, en__fault f, const char *msg);
/* Logs what every client has counted since its last line (at exit). */
void en__clients_flush(struct en_node *n);
/* Every client's round quota back to zero. */
void en__clients_new_round(struct en_node *n);
/* Whether any client has deferred requests. */
bool en__clients_pending(const struct en_node *n);
void en__clients_free(struct en_node *n);

#endif
