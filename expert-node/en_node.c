/* expert-node/en_node.c — opening an expert node: the owned set, the mount, per-expert checks, the
 * handshake data (fingerprint, owned bitmap, backend), the receive limits and the bound socket. */
#include "expert-node/en_node.h"
#include "expert-node/en_client.h"
#include "expert-node/en_device.h"
#include "expert-node/en_internal.h"

#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/md_expert_table.h"
#include "util/mw_notify.h"
#include "util/mw_platform.h"
#include "util/mw_progress.h"

_Static_assert((int)WR_NUM_F32 == (int)KN_NUM_F32 && (int)WR_NUM_Q8 == (int)KN_NUM_Q8,
               "wire numerics are kernel numerics");

#define EN_DEFAULT_CAPACITY 4096

const kn_expert *en__lookup(void *ctx, int layer, int expert, mw_err *err) {
    en_node *n = ctx;
    if (layer < 0 || layer >= n->n_layers || expert < 0 || expert >= n->n_experts ||
        !vx_expert_set_has(&n->owned, layer, expert)) {
        mw_errf(err, "expert (%d, %d) is not owned by this node", layer, expert);
        return NULL;
    }
    return md_expert_table_at(&n->table, layer, expert);
}

/* Parses the owned set against the model's shape, which only an opening of the source tells: a
 * first, unverified opening reads it (nothing is checked or read from the extents). */
static int read_owned_set(en_node *n, mw_err *err) {
    vx_source_opts probe = {.experts = NULL, .dense = false, .verify_on_mount = false};
    vx_source *p;
    if (vx_source_open(n->opts.vindex, &probe, &p, err)) return -1;
    n->n_layers = vx_source_n_layers(p);
    n->n_experts = vx_source_n_experts(p);
    const char *spec = n->opts.experts ? n->opts.experts : "all";
    int rc = n->n_layers < 1 || n->n_experts < 1
                 ? mw_errf(err, "%s: not a mixture-of-experts model (%d layers × %d experts)",
                           n->opts.vindex, n->n_layers, n->n_experts)
             : vx_expert_set_parse(spec, n->n_layers, n->n_experts, &n->owned, err)
                 ? mw_err_wrap(err, "--experts %s", spec)
                 : 0;
    /* a range over a model's leading dense layers names no experts there */
    for (int l = 0; rc == 0 && l < n->n_layers; l++)
        for (int e = 0; !vx_source_layer_has_experts(p, l) && e < n->n_experts; e++)
            vx_expert_set_put(&n->owned, l, e, false);
    vx_source_close(p);
    if (rc) return -1;
    if (vx_expert_set_count(&n->owned) == 0)
        return mw_errf(err, "--experts %s: the set is empty", spec);
    n->spec = vx_expert_set_format(&n->owned);
    return n->spec ? 0 : mw_errf(err, "out of memory");
}

/* The start-up's long steps (mount, fingerprint, pin) on stderr (a bar on a terminal, lines in a
 * log) and as the service manager's STATUS. */
typedef struct progress {
    const en_node *n;
    const char *step;
    mw_progress p;
} progress;

static void on_progress(void *ctx, const char *step, uint64_t done, uint64_t total) {
    progress *pr = ctx;
    if (pr->step != step && (!pr->step || strcmp(pr->step, step))) {
        char what[96];
        snprintf(what, sizeof what, "expert-node %s: %s",
                 pr->n->opts.node_id ? pr->n->opts.node_id : pr->n->opts.bind, step);
        mw_progress_init(&pr->p, pr->n->opts.quiet ? NULL : stderr, what, true);
        if (pr->n->opts.quiet) pr->p.out = NULL;
        pr->step = step;
    }
    mw_progress_update(&pr->p, done, total);
    mw_notify_status("%s: %.0f%% of %.1f GB", step,
                     total ? 100.0 * (double)done / (double)total : 100.0, (double)total / 1e9);
}

static void on_pin(void *ctx, uint64_t done, uint64_t total) {
    on_progress(ctx, "pin", done, total);
}

/* Mounts the owned extents and loads them into the expert table, each checked against the config
 * (and, with --pin, copied onto huge pages as the in-process backend's are), so a bad file fails
 * at start. */
static int mount(en_node *n, mw_err *err) {
    progress pr = {.n = n};
    vx_source_opts so = {.experts = &n->owned,
                         .dense = false,
                         .verify_on_mount = true,
                         .progress = on_progress,
                         .progress_ctx = &pr};
    mw_notify_status("mounting %zu extents of %s", vx_expert_set_count(&n->owned), n->opts.vindex);
    if (vx_source_open(n->opts.vindex, &so, &n->src, err)) return -1;
    /* The Welcome carries the fingerprint. A vindex has it in its manifest; for a GGUF file it
     * reads every tensor once (seconds per GB). Done now, before the socket is bound, so the
     * first Hello is not kept waiting past the coordinator's handshake deadline. */
    const uint64_t fp_bytes = vx_source_fingerprint_cost(n->src);
    if (fp_bytes && !n->opts.quiet)
        fprintf(stderr,
                "expert-node: fingerprinting %s (%.2f GB to read; a vindex directory has it "
                "precomputed)\n",
                n->opts.vindex, (double)fp_bytes / 1e9);
    if (fp_bytes) mw_notify_status("fingerprinting %s", n->opts.vindex);
    if (!(n->fingerprint = vx_source_fingerprint(n->src)))
        return mw_errf(err, "%s: out of memory computing the model fingerprint", n->opts.vindex);
    if (md_config_read(vx_source_meta(n->src), &n->cfg, err))
        return mw_err_wrap(err, "%s", n->opts.vindex);
    n->cfg_ok = true;
    n->width = md_expert_width(&n->cfg); /* the experts' rows: hidden size, or a latent's */
    if (md_expert_table_load(&n->table, n->src, &n->cfg, &n->owned, false, err))
        return mw_err_wrap(err, "%s", n->opts.vindex);
    n->table.pin.copied = on_pin;
    n->table.pin.copied_ctx = &pr;
    const int pinned = n->opts.pin ? md_expert_table_pin(&n->table, "experts", err) : 0;
    n->table.pin.copied = NULL; /* pr ends with this call */
    if (pinned) return mw_err_wrap(err, "%s", n->opts.vindex);
    size_t cells = (size_t)n->n_layers * (size_t)n->n_experts;
    n->expert_bytes = calloc(cells, sizeof *n->expert_bytes);
    n->owned_bits = calloc(wr_owned_bytes((uint32_t)n->n_layers, (uint32_t)n->n_experts), 1);
    n->stamp = calloc((size_t)n->n_experts, sizeof *n->stamp);
    n->layer_served = calloc((size_t)n->n_layers, sizeof *n->layer_served);
    if (!n->expert_bytes || !n->owned_bits || !n->stamp || !n->layer_served)
        return mw_errf(err, "out of memory");
    for (int l = 0; l < n->n_layers; l++) {
        for (int e = 0; e < n->n_experts; e++) {
            if (!vx_expert_set_has(&n->owned, l, e)) continue;
            size_t i = (size_t)l * (size_t)n->n_experts + (size_t)e;
            n->expert_bytes[i] = kn_expert_weight_bytes(md_expert_table_at(&n->table, l, e));
            n->owned_bits[i / 8] |= (uint8_t)(1u << (i % 8));
            n->layer_served[l] = true;
        }
    }
    return 0;
}

/* What --bind, --curve-secret, --allow and --insecure allow together: checked before anything
 * is opened. */
static int check_security(const en_opts *o, mw_err *err) {
    if (!o->curve_secret) {
        if (o->allow) return mw_errf(err, "--allow needs --curve-secret (the node's own key pair)");
        if (!wr_endpoint_is_local(o->bind) && !o->insecure)
            return mw_errf(err,
                           "refusing to serve on %s without CURVE keys: anybody who reaches it "
                           "could send work and read the results. Give --curve-secret NODE.key "
                           "--allow COORDINATORS.pub (`expert-node keygen` makes a pair), or "
                           "--insecure",
                           o->bind);
        return 0;
    }
    if (!o->allow)
        return mw_errf(err, "--curve-secret needs --allow FILE: the coordinator public keys "
                            "this node admits");
    return 0;
}

/* CURVE, or the reason there is none: with --curve-secret the node is a CURVE server and its
 * ZAP handler (started before the bind) admits only the keys of --allow; without, it may bind only
 * to this machine's addresses, or anywhere with --insecure, said loudly. */
static int secure_socket(en_node *n, mw_err *err) {
    const en_opts *o = &n->opts;
    if (!o->curve_secret) {
        if (!wr_endpoint_is_local(o->bind))
            fprintf(stderr,
                    "expert-node: WARNING: --insecure: serving on %s without CURVE: any peer "
                    "that reaches it can send work and read the results\n",
                    o->bind);
        return 0;
    }
    if (wr_keypair_read(o->curve_secret, &n->key, err) || wr_allow_read(o->allow, &n->allow, err) ||
        wr_zap_start(n->zctx, &n->allow, "expert-node", &n->zap, err) ||
        wr_curve_server(n->router, &n->key, err))
        return -1;
    return 0;
}

/* The liveness channel (wire/wr_live.h) on the data endpoint's host and port: without it (another
 * transport, no UDP) the node still serves, and coordinators fall back on ZMTP heartbeats. */
static void start_liveness(en_node *n) {
    if (strncmp(n->endpoint, "tcp://", 6)) return;
    mw_err e;
    if (sodium_init() < 0) {
        fprintf(stderr, "expert-node: no liveness channel: libsodium does not start\n");
        return;
    }
    randombytes_buf(n->live_token, sizeof n->live_token);
    if (wr_live_responder_start(n->endpoint, n->live_token, &n->live, &n->live_port, &e) != 0)
        fprintf(stderr, "expert-node: no liveness channel: %s\n", e.msg);
}

static int bind_socket(en_node *n, mw_err *err) {
    n->zctx = zmq_ctx_new();
    /* With --affinity, ZeroMQ's I/O thread (started with the first socket) shares the serving
     * thread's CPU: a request or reply passes between them as one thread blocks and the other
     * runs, without waking another core (on a VM, possibly a halted vCPU). */
    if (n->zctx && n->opts.bind_cpus)
        zmq_ctx_set(n->zctx, ZMQ_THREAD_AFFINITY_CPU_ADD, kn_cpu_at(n->opts.cpu_first));
    n->router = n->zctx ? zmq_socket(n->zctx, ZMQ_ROUTER) : NULL;
    if (!n->router) return mw_errf(err, "cannot create a ZeroMQ socket: %s", zmq_strerror(errno));
    if (wr_socket_setup(n->router, &n->lim, err)) return -1;
    if (secure_socket(n, err)) return -1;
    /* Messages queued per peer, each way (bytes are bounded by the relay and en_client.h): a
     * coordinator has a few batches in flight, never hundreds. */
    int hwm = EN__PEER_HWM;
    zmq_setsockopt(n->router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(n->router, ZMQ_RCVHWM, &hwm, sizeof hwm);
    /* TCP peers are read by the relay, within their budgets (wire/wr_relay.h); libzmq listens
     * on an ipc:// endpoint of the relay's. Other transports (ipc://, inproc://) have no remote
     * peers. With --recv-bound off the operator chose libzmq's own read path: no bound. */
    if (!strncmp(n->opts.bind, "tcp://", 6) && n->opts.recv_unbounded) {
        fprintf(stderr, "expert-node: --recv-bound off: no memory bound per peer\n");
    } else if (!strncmp(n->opts.bind, "tcp://", 6)) {
        /* with --affinity, beside libzmq's I/O thread (above) */
        wr_relay_opts ro = {.peer_bytes = n->opts.peer_limit,
                            .total_bytes = n->opts.recv_limit,
                            .name = "expert-node",
                            .bind_cpu = n->opts.bind_cpus,
                            .cpu = n->opts.bind_cpus ? kn_cpu_at(n->opts.cpu_first) : 0};
        mw_err re;
        if (wr_relay_start(n->router, n->opts.bind, &ro, &n->relay, n->endpoint, sizeof n->endpoint,
                           &re) == 0)
            goto bound;
        if (strstr(re.msg, "cannot bind")) return mw_errf(err, "%s", re.msg);
        fprintf(stderr, "expert-node: running without receive limits: %s\n", re.msg);
    }
    if (zmq_bind(n->router, n->opts.bind) != 0)
        return mw_errf(err, "cannot bind %s: %s", n->opts.bind, zmq_strerror(errno));
    size_t len = sizeof n->endpoint;
    if (zmq_getsockopt(n->router, ZMQ_LAST_ENDPOINT, n->endpoint, &len) != 0)
        snprintf(n->endpoint, sizeof n->endpoint, "%s", n->opts.bind);
bound:
    start_liveness(n);
    return 0;
}

int en_node_open(const en_opts *opts, en_node **out, mw_err *err) {
    *out = NULL;
    if (!opts->vindex || !opts->bind) return mw_errf(err, "--vindex and --bind are required");
    if (check_security(opts, err)) return -1;
    if (opts->threads < 1 || opts->threads > 1024)
        return mw_errf(err, "--threads %d: must be 1 .. 1024", opts->threads);
    if (opts->numerics < -1 || opts->numerics > KN_NUM_Q8)
        return mw_errf(err, "unknown numerics %d", opts->numerics);
    en_node *n = calloc(1, sizeof *n);
    if (!n) return mw_errf(err, "out of memory");
    n->opts = *opts;
    if (!n->opts.capacity) n->opts.capacity = EN_DEFAULT_CAPACITY;
    n->wake[0] = n->wake[1] = -1;
    atomic_init(&n->stopping, false);
    wr_rx_init(&n->rx);
    wr_out_init(&n->out);
    if (read_owned_set(n, err) || mount(n, err)) goto fail;

    /* Receive limits: rows up to capacity, exactly our width, at most every expert per row. */
    n->lim = wr_limits_default();
    n->lim.max_rows = n->opts.capacity;
    n->lim.max_width = (uint32_t)n->width;
    uint64_t max_assign = (uint64_t)n->opts.capacity * (uint64_t)n->n_experts;
    if (max_assign < n->lim.max_assign) n->lim.max_assign = (uint32_t)max_assign;
    uint64_t rows_bytes = (uint64_t)n->opts.capacity * (uint64_t)n->width * 4;
    uint64_t assign_bytes = (uint64_t)n->lim.max_assign * sizeof(wr_assign);
    uint64_t frame = rows_bytes > assign_bytes ? rows_bytes : assign_bytes;
    if (frame < n->lim.max_frame_bytes) n->lim.max_frame_bytes = frame;
    wr_in_init(&n->in, &n->lim);
    /* The largest message the limits let through: an envelope, a rows and an assignments frame
     * (and their framing). A peer may have one being delivered and the next arriving. */
    n->max_message = WR_MAX_ENVELOPE + rows_bytes + assign_bytes + 4096;
    if (!n->opts.peer_limit) n->opts.peer_limit = 2 * n->max_message;
    if (!n->opts.recv_limit) {
        n->opts.recv_limit = 1ull << 30;
        if (n->opts.recv_limit < 4 * n->opts.peer_limit)
            n->opts.recv_limit = 4 * n->opts.peer_limit;
    }

    if (en__device_open(n, err)) goto fail;
    if (opts->numerics < 0) /* any: every numerics, as a list */
        snprintf(n->numerics, sizeof n->numerics, "%s,%s", kn_numerics_name(KN_NUM_F32),
                 kn_numerics_name(KN_NUM_Q8));
    else
        snprintf(n->numerics, sizeof n->numerics, "%s", kn_numerics_name(opts->numerics));
    n->pool = kn_pool_create(opts->threads);
    if (opts->poll_us >= 0) kn_pool_set_poll(n->pool, opts->poll_us);
    n->ws = md_moe_ws_new();
    if (!n->ws || wr_stats_init(&n->stats, 1, n->n_layers, err)) {
        mw_errf(err, "out of memory");
        goto fail;
    }
    if (mw_pipe_nonblock(n->wake) != 0) {
        mw_errf(err, "cannot create the wake pipe");
        goto fail;
    }
    if (bind_socket(n, err)) goto fail;
    /* After the socket, so ZeroMQ's threads are not started from a thread bound already. */
    if (opts->bind_cpus) {
        mw_err e;
        if (kn_pool_bind_cpus(n->pool, opts->cpu_first, &e) != 0 && !opts->quiet)
            fprintf(stderr, "expert-node: --affinity %d ignored: %s\n", opts->cpu_first, e.msg);
    }
    snprintf(n->node_id, sizeof n->node_id, "%s", opts->node_id ? opts->node_id : n->endpoint);
    char name[300];
    snprintf(name, sizeof name, "expert-node %s", n->node_id);
    wr_relay_rename(n->relay, name);
    *out = n;
    return 0;
fail:
    en_node_close(n);
    return -1;
}

void en_node_stop(en_node *n) {
    atomic_store(&n->stopping, true);
    if (n->wake[1] >= 0) {
        ssize_t w = write(n->wake[1], "x", 1);
        (void)w; /* a full pipe already wakes the loop */
    }
}

const char *en_node_endpoint(const en_node *n) {
    return n->endpoint;
}

void en_node_close(en_node *n) {
    if (!n) return;
    wr_rx_free(&n->rx);
    en__clients_free(n);
    wr_live_responder_stop(n->live);
    wr_relay_stop(n->relay);
    if (n->router) zmq_close(n->router);
    wr_zap_stop(n->zap);
    if (n->zctx) zmq_ctx_term(n->zctx);
    wr_allow_free(&n->allow);
    memset(&n->key, 0, sizeof n->key);
    if (n->wake[0] >= 0) close(n->wake[0]);
    if (n->wake[1] >= 0) close(n->wake[1]);
    for (int g = 0; g < EN__MAX_PENDING; g++) {
        free(n->group[g].x);
        free(n->group[g].assign);
    }
    free(n->y);
    wr_in_free(&n->in);
    wr_out_free(&n->out);
    wr_stats_free(&n->stats);
    md_moe_ws_free(n->ws);
    kn_pool_destroy(n->pool);
    if (n->dev) n->dev->close(n); /* before the experts it holds go */
    md_expert_table_free(&n->table);
    free(n->expert_bytes);
    free(n->owned_bits);
    free(n->stamp);
    free(n->layer_served);
    if (n->cfg_ok) md_config_free(&n->cfg);
    vx_source_close(n->src);
    vx_expert_set_free(&n->owned);
    free(n->spec);
    free(n);
}
