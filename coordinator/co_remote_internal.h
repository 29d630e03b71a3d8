/* coordinator/co_remote_internal.h — what the remote backend's three files share: the node and
 * backend state, the handshake (co_remote_handshake.c), and the accounting that dispatch and
 * combine (co_remote.c) feed and the report (co_remote_stats.c) reads. Not for other modules. */
#ifndef CO_REMOTE_INTERNAL_H
#define CO_REMOTE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "coordinator/co_loopback.h"
#include "coordinator/co_remote_opts.h"
#include "model/md_moe.h"
#include "wire/wr_curve.h"
#include "wire/wr_msg.h"
#include "wire/wr_stats.h"
#include "wire/wr_zmq.h"

/* One expert node: its connection, what its Welcome announced, and whether it is serving. */
typedef struct co__node {
    char name[320]; /* "node 1 (tcp://h:p)" for messages */
    char endpoint[256];
    char key[48];      /* the node's pinned CURVE public key; "" = plain */
    char refused[160]; /* why the CURVE handshake failed, from the monitor; "" = it did not */
    char node_id[128], backend[32], numerics[32];
    uint32_t capacity, threads;
    float read_gbps;  /* its backend's measured read bandwidth (0: not announced) */
    void *sock, *mon; /* DEALER, and the PAIR its connection events arrive on */
    uint8_t *owned;   /* its owned (layer, expert) bitmap, from its last Welcome */
    /* Membership (co_remote_members.c): a node is down from a disconnect, a missed deadline or a
     * failed send until a fresh handshake succeeds on its reconnected socket. */
    bool down;
    bool drained;       /* taken out of the fleet (co_remote_set_nodes): no socket, not counted */
    bool joining;       /* added while serving, not greeted yet */
    char why[200];      /* why it went down */
    uint64_t down_ns;   /* when */
    bool connected;     /* the monitor saw a (re)connection since it went down */
    uint64_t hello_seq; /* the rejoin Hello in flight; 0 = none */
    int pending;        /* pieces in flight */
    uint32_t live_seen; /* the liveness channel's silences already acted on */
} co__node;

/* One node's share of the layer being served: its rows (ascending batch rows, encoded straight
 * from the batch), its assignments (rows counted in its own rows) with their index t·k + j in the
 * batch, and its reply rows. Work i < n_nodes is node i's own; a node lost mid-layer hands the
 * assignments of its unanswered pieces to rescue works of the replicas, appended after those. */
typedef struct co__work {
    int node;
    int32_t *rows;
    wr_assign *assign;
    int64_t *src;
    float *y;
    size_t rows_cap, assign_cap, src_cap, y_cap;
    int64_t n_rows, n_assign;
} co__work;

/* One ExpertBatch in flight: rows [r0, r1) and assignments [a0, a1) of a work. */
typedef struct co__piece {
    int node, work;
    uint64_t seq, t_send;
    int64_t r0, r1, a0, a1;
    bool done, lost; /* answered; or its node was lost before it was */
} co__piece;

/* Where a layer call's time goes in the coordinator, in the order of the story in co_remote.c. */
typedef enum co__phase {
    CO__SPLIT,   /* splitting the rows by node */
    CO__ENCODE,  /* packing the batches */
    CO__SEND,    /* handing them to ZeroMQ */
    CO__WAIT,    /* blocked in zmq_poll */
    CO__DECODE,  /* receiving and checking the replies */
    CO__COMBINE, /* the fixed-order sum */
    CO__PHASES
} co__phase;

/* The backend's accounting: wire traffic per node × layer, rows and time per layer, time per
 * phase, and the critical path's tail (the reply that completed each layer call). */
typedef struct co__acct {
    wr_stats wire;
    int64_t *layer_rows;  /* [layer]: rows through the layer */
    uint64_t *layer_wall; /* [layer]: first send to last reply, summed */
    uint64_t *layer_calls;
    uint64_t phase_ns[CO__PHASES];  /* all layers */
    uint64_t tail_ns;               /* summed over layer calls */
    uint32_t tail_log[CO_TAIL_LOG]; /* the last CO_TAIL_LOG layer calls' tails (us) */
    uint64_t n_tail;
    int n_nodes;
    uint64_t *node_errors; /* [node]: failed exchanges */
    uint64_t *node_rtt;    /* [node × (CO_RTT_LOG2 + 1)]: round trips by powers of two us */
} co__acct;

/* A layer call's own state, parked while another is the backend's (co_remote_calls.c): the
 * fields of co__remote of the same names, and each node's pieces in flight for it. The rows
 * lost by the last failed call (lost_rows) stay the backend's: row_lost answers for it whichever
 * call is the backend's afterwards. */
typedef struct co__call {
    co__work *works;
    int n_works, n_works_alloc;
    size_t works_cap;
    co__piece *pieces;
    size_t pieces_cap;
    int n_pieces;
    wr_out *outs;
    size_t outs_cap, outs_init;
    wr_assign *scratch;
    size_t scratch_cap;
    const float **yptr;
    size_t yptr_cap;
    float *weights;
    size_t weights_cap;
    bool in_flight;
    uint64_t t_submit, last_tail;
    const md_moe_batch *batch;
    int *pending; /* [cap_nodes] */
} co__call;

/* Layer calls in flight at once (ping-pong micro-batches): the backend's own and the parked. */
#define CO_CALLS 4

typedef struct co__remote {
    co_remote_opts o;      /* endpoints, curve and loopback point into what follows */
    char **endpoints;      /* the endpoints as given ("#KEY" included), in node order */
    wr_keypair key;        /* the coordinator's CURVE pair, when it has one */
    co_loopback *loopback; /* nodes started for this backend, stopped after its sockets close */
    kn_glu glu;            /* a copy of *o.glu: every node's experts must run it */
    co__node *nodes;       /* cap_nodes slots, o.n_nodes of them used (joins take the next) */
    int cap_nodes;
    void *zctx;
    bool own_zctx;    /* made here (co_remote_opts.zctx was NULL): terminated with the backend */
    int32_t *owner;   /* [cell × cap_nodes + i]: owners of cell = layer × n_experts + expert */
    int32_t *n_owner; /* [cell] */
    uint64_t seq;
    wr_out out; /* control messages */
    wr_in in;
    wr_rx rx;
    co__piece *pieces;
    size_t pieces_cap;
    int n_pieces;
    wr_out *outs; /* [piece]: its packed ExpertBatch */
    size_t outs_cap, outs_init;
    wr_assign *scratch; /* a piece's assignments with rows relative to its first row */
    size_t scratch_cap;
    const float **yptr; /* exact mode: output row of assignment t·k + j */
    size_t yptr_cap;
    uint64_t last_tail; /* this layer call's last reply: round trip minus node queue and compute */
    uint8_t *layer_moe; /* [layer]: 1 = routes to experts (a copy of the option; all 1 without) */
    co__work *works;    /* this layer's: [0, n_nodes) the nodes' own, then rescue works */
    int n_works, n_works_alloc;
    size_t works_cap;
    float *weights; /* this layer's router weights, renormalised where experts are skipped */
    size_t weights_cap;
    uint64_t skipped;    /* assignments skipped for want of a live owner (--on-missing skip) */
    uint32_t *row_skips; /* [row] of the current forward pass: its skipped assignments */
    size_t row_skips_cap;
    int skip_layer;     /* the last layer call's layer: one not above it starts a new pass */
    uint8_t *lost_rows; /* [row] of the last call that failed for want of a live owner: 1 = it
                           needed a lost expert */
    size_t lost_cap;
    int64_t n_lost_rows; /* rows of that call (0: the last call did not fail so) */
    uint64_t failovers;  /* pieces re-sent to a replica */
    /* replicas' load (co_remote_share.c) */
    uint64_t *share_recent; /* [layer × cap_nodes]: decaying sum of assignments served */
    uint64_t *share_now;    /* [cap_nodes]: assignments given in this layer call */
    int32_t *chosen;        /* the nodes the current row's earlier selections went to */
    size_t chosen_cap;
    /* the batch submitted and not yet waited for (submit → wait) */
    bool in_flight;
    const md_moe_batch *call_batch; /* the batch of the call that is the backend's */
    co__call park[CO_CALLS - 1];    /* the other calls, in flight or idle */
    bool serving;                   /* past the first handshake: membership changes are reported */
    uint64_t t_submit;
    uint64_t mon_read_ns; /* when co__remote_tend last read every monitor, signalled or not */
    co__acct acct;
    struct wr_live_prober *live; /* pings the nodes' liveness channels; NULL: heartbeats alone */
} co__remote;

/* ---- co_remote_handshake.c: greeting the nodes, the ownership map ---- */

/* Creates node i's DEALER and the monitor that reports its disconnects, and connects it. */
int co__remote_connect(co__remote *r, int i, mw_err *err);
/* Drains node i's monitor: a handshake notes it connected again, a failed one why; a disconnect
 * notes it unconnected and, before serving, down. Returns whether a node that was up while
 * serving disconnected: the caller marks it down (co__remote_down). */
bool co__remote_read_monitor(co__remote *r, int i);
/* Hello to every node, each Welcome checked against the model and folded into the ownership
 * map; then every (layer, expert) must have an owner. */
int co__remote_handshake(co__remote *r, mw_err *err);
/* The node serving (layer, expert), -1 when none owns it. */
int co__remote_route(const co__remote *r, int layer, int expert);
/* Rebuilds the ownership map from the live nodes' owned sets. */
void co__remote_owners(co__remote *r);

/* ---- co_remote_share.c: which live owner serves an assignment ---- */

int co__share_init(co__remote *r);
void co__share_free(co__remote *r);
/* A layer call starts, its assignments are picked (chosen: where the row's selections 0 .. j-1
 * went) and each pick is taken, then the call's load is folded into the layer's recent load. */
void co__share_begin(co__remote *r);
int co__share_pick(co__remote *r, const md_moe_batch *b, int64_t t, int j, const int32_t *chosen);
void co__share_took(co__remote *r, int node);
void co__share_end(co__remote *r, int layer);

/* ---- co_remote_members.c: who is serving ---- */

/* Marks node i down (once) with a reason, says so on stderr, rebuilds the ownership map. */
void co__remote_down(co__remote *r, int i, const char *why);
/* Closes a node's sockets (its slot stays): when it is drained, and at the end. */
void co__remote_close_node(co__node *n);

/* Non-blocking housekeeping before a layer: drains every monitor, greets nodes that reconnected
 * after going down, and takes their Welcomes (re-admitting them, or refusing another model). */
void co__remote_tend(co__remote *r);
/* A message from a down node that is rejoining (its Welcome, or an Error to its Hello). */
void co__remote_rejoin_msg(co__remote *r, int i, const wr_msg *m);
/* Checks node i's Welcome against the model and keeps what it announced (owned set included);
 * -1 with err naming the node when it does not fit. */
int co__remote_welcome(co__remote *r, int i, const wr_welcome *w, mw_err *err);

/* ---- co_remote_live.c: the liveness channel ---- */

/* Starts the pinging thread (-1, said on stderr, when it cannot: heartbeats alone then). */
int co__live_start(co__remote *r);
void co__live_stop(co__remote *r);
/* The ZMTP heartbeat timeout for a node at endpoint: down_ms where it can have no liveness
 * channel (not tcp://, or no pinging thread), a longer backstop where it can. */
int co__heartbeat_ms(const co__remote *r, const char *endpoint);
/* Node i's Welcome: its liveness channel is pinged from now on (or, announcing none, not). */
void co__live_welcome(co__remote *r, int i, const wr_welcome *w);
/* Node i is drained: no more pings. */
void co__live_forget(co__remote *r, int i);
/* Marks down every serving node that fell silent since the last check; whether one did
 * (co_remote_members.c, which marks nodes down). */
bool co__live_check(co__remote *r);
/* The descriptor that becomes readable when a node falls silent (-1: none). */
int co__live_fd(const co__remote *r);

/* ---- co_remote_calls.c: several layer calls in flight ---- */

int co__calls_init(co__remote *r);
/* Frees the parked calls' state with free_state (which frees the backend's own call state). */
void co__calls_free(co__remote *r, void (*free_state)(co__remote *r));
/* Makes parked call c the backend's, and the backend's the parked (again: undone). */
void co__call_swap(co__remote *r, co__call *c);
/* A parked call not in flight (to park the backend's own in), or NULL. */
co__call *co__call_idle(co__remote *r);
/* The parked call in flight for batch b, or NULL. */
co__call *co__call_of_batch(co__remote *r, const md_moe_batch *b);
/* The parked call with piece (node, seq) unanswered, or NULL. */
co__call *co__call_of_piece(co__remote *r, int node, uint64_t seq);

/* ---- co_remote_stats.c: the accounting ---- */

int co__acct_init(co__acct *a, int n_nodes, int n_layers, mw_err *err);
void co__acct_free(co__acct *a);
/* An ExpertBatch of `bytes` carrying `rows` rows and `assign` assignments went to a node. */
void co__acct_sent(co__acct *a, int node, int layer, uint64_t bytes, int64_t rows, int64_t assign);
/* Its reply arrived: `bytes` on the wire, `rtt_ns` after the send. */
void co__acct_reply(co__acct *a, int node, int layer, uint64_t bytes, const wr_partial *y,
                    uint64_t rtt_ns);
/* An exchange with a node failed (an Error reply, a bad reply, a missed deadline, a disconnect). */
void co__acct_failed(co__acct *a, int node);
/* A layer call of `rows` rows finished `wall_ns` after its first send; `tail_ns` is the
 * critical path's wire and wake-up time (the last reply's round trip minus the node's time). */
void co__acct_layer(co__acct *a, int layer, int64_t rows, uint64_t wall_ns, uint64_t tail_ns);

#endif
