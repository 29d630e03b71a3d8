/* expert-node/en_opts.h — what an expert node is asked to serve and how: the options
 * en_node_open takes (main.c fills them from its option table, tests directly). */
#ifndef EN_OPTS_H
#define EN_OPTS_H

#include <stdbool.h>
#include <stdint.h>

/* --group-window-us auto */
#define EN_WINDOW_AUTO (-1)

typedef struct en_opts {
    const char *vindex;     /* vindex directory or GGUF file */
    const char *experts;    /* owned set (vx_expert_set_parse syntax); NULL = "all" */
    const char *bind;       /* ZeroMQ endpoint (a wildcard port is resolved) */
    const char *node_id;    /* name in Welcome and logs; NULL = the bound endpoint */
    const char *ready_file; /* written with the bound endpoint once serving; NULL = none */
    int threads;            /* compute threads (>= 1) */
    int numerics;           /* kn_numerics served, or -1 for both */
    int poll_us; /* idle compute threads poll this long before sleeping; -1 = the pool's default */
    bool bind_cpus; /* bind compute thread i to allowed CPU cpu_first + i (kn_pool_bind_cpus) */
    int cpu_first;
    uint32_t capacity; /* most rows per batch (0 = 4096) */
    /* with several coordinators connected: how long a layer's rows may wait for another
     * coordinator predicted to send that layer, so one grouped execution reads each expert once
     * for all (en_group.h; 0 = no wait; EN_WINDOW_AUTO = half the waiting one's own token) */
    int group_window_us;
    bool quiet; /* no per-error log lines */
    bool pin;   /* copy the owned experts out of the file mapping onto huge pages (md_pin.h) */
    /* receive limits (wire/wr_relay.h), 0 = defaults: memory one peer may make the node hold
     * beyond its last whole message (2 × the largest message), and for all peers (1 GiB, at
     * least 4 × the peer limit) */
    uint64_t peer_limit, recv_limit;
    /* --recv-bound off: libzmq reads TCP peers itself, without the relay: no per-peer memory
     * bound at all, for a trusted private link where the relay's latency matters more */
    bool recv_unbounded;
    /* CURVE (wire/wr_curve.h): this node's key pair file and the coordinator keys it admits.
     * Without them a node binds only to this machine's addresses, unless insecure. */
    const char *curve_secret, *allow;
    bool insecure;
    const char *device; /* "metal", "cpu" or "auto"; NULL = auto (en_device.h) */
    bool self_test;     /* run --self-test instead of serving (en_tools.h) */
    bool probe;         /* print --probe's figures instead of serving */
} en_opts;

#endif
