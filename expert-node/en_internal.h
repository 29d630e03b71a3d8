/* expert-node/en_internal.h — the node's state, shared by en_node.c (mount, handshake data),
 * en_serve.c (the serve loop and the batched executor) and en_client.c (per-client bookkeeping).
 * Not for other modules. It defines the struct en_node that en_node.h leaves opaque, and includes
 * none of those files' headers (they include it), so the dependency runs one way. */
#ifndef EN_INTERNAL_H
#define EN_INTERNAL_H

#include <stdatomic.h>

#include "expert-node/en_opts.h"
#include "kernels/kn.h"
#include "model/md_config.h"
#include "model/md_moe.h"
#include "model/md_expert_table.h"
#include "vindex/vx_source.h"
#include "wire/wr_curve.h"
#include "wire/wr_relay.h"
#include "wire/wr_live.h"
#include "wire/wr_msg.h"
#include "wire/wr_stats.h"
#include "wire/wr_zmq.h"

/* Parts beyond which a message is not answered but its sender cut off (WR_MAX_PARTS are
 * accepted; a few more get ERROR_FRAME). */
#define EN__MAX_MESSAGE_PARTS 64

/* ZMQ_SNDHWM and ZMQ_RCVHWM of the node's socket: messages queued per peer each way. */
#define EN__PEER_HWM 64

/* Requests executed together in one round, at most. */
#define EN__MAX_PENDING 64

/* One accepted ExpertBatch waiting for the round's execution. */
typedef struct en__req {
    uint8_t id[WR_MAX_ROUTING_ID];
    size_t id_len;
    uint64_t seq;
    int group;
    int64_t row_off, rows;        /* its rows in the group's x */
    int64_t assign_off, n_assign; /* its assignments in the group's list */
    wr_codec reply;
    uint64_t weight_bytes; /* its distinct experts' stored bytes */
    uint64_t rx_bytes;
    uint64_t t_rx; /* when it was received (monotonic ns) */
} en__req;

/* Requests of one (layer, mode, numerics), concatenated. */
typedef struct en__group {
    int layer;
    md_moe_output mode;
    kn_numerics numerics;
    int64_t rows, n_assign;
    float *x;
    size_t x_cap; /* floats */
    md_assignment *assign;
    size_t assign_cap;
    uint64_t t_first; /* when its first request arrived */
    bool held;        /* kept past a round for another client's rows (en_group.h) */
} en__group;

struct en_node {
    en_opts opts;
    char *spec; /* canonical text of the owned set */
    vx_source *src;
    const char *fingerprint; /* the model's, computed at open (the Welcome carries it) */
    md_config cfg;
    bool cfg_ok;
    vx_expert_set owned;
    int n_layers, n_experts;
    int64_t width;          /* of the experts' rows (md_expert_width) */
    md_expert_table table;  /* the owned experts (pinned with --pin) */
    uint64_t *expert_bytes; /* stored bytes per expert; 0 when not owned */
    uint8_t *owned_bits;    /* the Welcome bitmap */
    bool *layer_served;     /* n_layers: whether it owns any expert of the layer */
    uint32_t *stamp;        /* n_experts: distinct-expert marks per request */
    uint32_t stamp_now;
    char node_id[256], backend[32], numerics[16];
    const struct en__device *dev; /* where the experts run (en_device.h) */
    struct mt_dev *mt;            /* the GPU's state when dev is Metal */
    double read_gbps;             /* the device's measured read bandwidth (0: not measured) */
    kn_pool *pool;
    md_moe_ws *ws;
    /* sockets */
    void *zctx, *router;
    char endpoint[256];
    int wake[2]; /* self-pipe: en_node_stop writes, the loop polls */
    atomic_bool stopping;
    wr_limits lim;
    wr_relay *relay;         /* reads the peers, within their budgets (NULL: bound directly) */
    wr_live_responder *live; /* answers liveness pings off the serve loop (NULL: none) */
    uint8_t live_token[WR_LIVE_TOKEN];
    int live_port;
    wr_keypair key;              /* --curve-secret */
    wr_allow allow;              /* --allow */
    wr_zap *zap;                 /* admits only allowed coordinator keys; NULL without CURVE */
    uint64_t max_message;        /* wire bytes of the largest message the limits allow */
    struct en__client **clients; /* every client seen lately (en_client.h) */
    int n_clients, clients_cap;
    wr_rx rx;
    wr_in in;
    wr_out out;
    /* the round being gathered */
    en__req req[EN__MAX_PENDING];
    int n_req;
    en__group group[EN__MAX_PENDING];
    int n_group;
    int64_t pending_rows;
    float *y;
    size_t y_cap;
    wr_stats stats; /* 1 node × n_layers: this node's expert traffic */
    /* the group window (en_group.h): groups held for another client's rows, requests that joined
     * them, held groups that ran without someone awaited, the time groups were held in all */
    uint64_t held_groups, held_joined, held_missed, held_ns;
    /* executions, and those whose rows came from several clients (with their requests) */
    uint64_t groups_run, groups_shared, requests_shared;
    uint64_t wake_at; /* the earliest end of a held group's wait (0: none held) */
    uint64_t errors_sent;
    uint64_t replies_dropped, requests_discarded; /* clients that do not read, or flood */
    /* where the serve loop's time goes (ns): receiving, parsing + checking + grouping, executing,
     * encoding replies, sending them */
    uint64_t t_recv, t_handle, t_compute, t_encode, t_send;
    uint64_t rx_at; /* when the message in rx arrived */
};

/* Looks an owned expert up for md_moe_exec. */
const kn_expert *en__lookup(void *ctx, int layer, int expert, mw_err *err);

#endif
