/* coordinator/co_remote.c — the remote expert backend (see co_remote.h): handshake and ownership
 * map, per-layer dispatch (all batches in flight at once), deadline and disconnect detection,
 * fixed-order combine, movement accounting and the report. */
#include "coordinator/co_remote.h"

#include <errno.h>
#include <sched.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "util/mw_grow.h"
#include "util/mw_time.h"
#include "wire/wr_msg.h"
#include "wire/wr_zmq.h"

typedef struct node {
    char name[320]; /* "node 1 (tcp://h:p)" for messages */
    char endpoint[256];
    char node_id[128], backend[32], numerics[32];
    uint32_t capacity, threads;
    void *sock, *mon;
    bool down;
    /* this layer's work, rebuilt every call */
    int32_t *rows; /* batch row of each local row, ascending */
    wr_assign *assign;
    int64_t *src; /* exact mode: index t·k + j of each assignment */
    float *x, *y;
    size_t rows_cap, assign_cap, src_cap, x_cap, y_cap;
    int64_t n_rows, n_assign;
    int pending; /* pieces in flight */
} node;

/* One ExpertBatch in flight: rows [r0, r1) and assignments [a0, a1) of a node's work. */
typedef struct piece {
    int node;
    uint64_t seq, t_send;
    int64_t r0, r1, a0, a1;
    bool done;
} piece;

typedef struct remote {
    co_remote_opts o;
    node *nodes;
    void *zctx;
    int32_t *owner;   /* [cell × n_nodes + i]: owners of cell = layer × n_experts + expert */
    int32_t *n_owner; /* [cell] */
    uint64_t seq;
    wr_out out;
    wr_in in;
    wr_rx rx;
    piece *pieces;
    size_t pieces_cap;
    int n_pieces;
    wr_out *outs; /* [piece]: its packed ExpertBatch */
    size_t outs_cap, outs_init;
    wr_assign *scratch; /* a piece's assignments with rows relative to its first row */
    size_t scratch_cap;
    const float **yptr; /* exact mode: output row of assignment t·k + j */
    size_t yptr_cap;
    wr_stats stats;
    int64_t *layer_rows;  /* [layer]: rows through the layer */
    uint64_t *layer_wall; /* [layer]: first send to last reply, summed */
    uint64_t *layer_calls;
    uint64_t t_split, t_encode, t_send, t_wait, t_decode, t_combine; /* ns, all layers */
    uint64_t t_tail; /* the last reply of each layer: round trip minus node queue and compute */
    uint64_t last_tail;
    uint32_t tail_log[CO_TAIL_LOG]; /* the last CO_TAIL_LOG layers' tails (us), for percentiles */
    uint64_t n_tail;
} remote;

/* ---- sockets ------------------------------------------------------------------------------- */

static int open_node(remote *r, int i, mw_err *err) {
    node *n = &r->nodes[i];
    n->sock = zmq_socket(r->zctx, ZMQ_DEALER);
    n->mon = zmq_socket(r->zctx, ZMQ_PAIR);
    if (!n->sock || !n->mon) return mw_errf(err, "%s: cannot create a socket", n->name);
    if (wr_socket_setup(n->sock, &r->in.lim, err)) return mw_err_wrap(err, "%s", n->name);
    /* Disconnects are watched so a dead node fails the layer at once, not at the deadline. */
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://co-remote-%p-%d", (void *)r, i);
    if (zmq_socket_monitor(n->sock, addr, ZMQ_EVENT_DISCONNECTED) != 0 ||
        zmq_connect(n->mon, addr) != 0)
        return mw_errf(err, "%s: cannot monitor the socket: %s", n->name, zmq_strerror(errno));
    int t = r->o.connect_ms;
    zmq_setsockopt(n->sock, ZMQ_SNDTIMEO, &t, sizeof t);
    if (zmq_connect(n->sock, n->endpoint) != 0)
        return mw_errf(err, "%s: cannot connect: %s", n->name, zmq_strerror(errno));
    return 0;
}

/* Drains a node's monitor; marks it down on a disconnect. */
static void read_monitor(node *n) {
    for (;;) {
        zmq_msg_t ev, ep;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, n->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t id = 0;
        if (zmq_msg_size(&ev) >= 2) memcpy(&id, zmq_msg_data(&ev), 2);
        bool more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) {
            zmq_msg_init(&ep);
            zmq_msg_recv(&ep, n->mon, 0);
            zmq_msg_close(&ep);
        }
        if (id == ZMQ_EVENT_DISCONNECTED) n->down = true;
    }
}

/* ---- handshake and ownership ---------------------------------------------------------------- */

/* Whether the comma-separated list `have` contains `want`. */
static bool list_has(const char *have, const char *want) {
    size_t w = strlen(want);
    for (const char *p = have; *p;) {
        size_t l = strcspn(p, ",");
        if (l == w && !strncmp(p, want, w)) return true;
        p += l + (p[l] == ',');
    }
    return false;
}

static int take_welcome(remote *r, int i, const wr_welcome *w, mw_err *err) {
    node *n = &r->nodes[i];
    const co_remote_opts *o = &r->o;
    if (o->fingerprint && o->fingerprint[0] && strcmp(w->fingerprint, o->fingerprint))
        return mw_errf(err, "%s serves model %.64s, the coordinator's is %.64s", n->name,
                       w->fingerprint, o->fingerprint);
    if ((int64_t)w->width != o->width || (int)w->n_layers != o->n_layers ||
        (int)w->n_experts != o->n_experts)
        return mw_errf(
            err, "%s serves width %u, %u layers × %u experts; the model has %lld, %d × %d", n->name,
            w->width, w->n_layers, w->n_experts, (long long)o->width, o->n_layers, o->n_experts);
    if (!list_has(w->numerics, kn_numerics_name(o->numerics)))
        return mw_errf(err, "%s serves numerics %s, the coordinator runs %s", n->name, w->numerics,
                       kn_numerics_name(o->numerics));
    if (w->capacity < 1) return mw_errf(err, "%s announces capacity 0", n->name);
    snprintf(n->node_id, sizeof n->node_id, "%s", w->node_id);
    snprintf(n->backend, sizeof n->backend, "%s", w->backend);
    snprintf(n->numerics, sizeof n->numerics, "%s", w->numerics);
    n->capacity = w->capacity;
    n->threads = w->threads;
    size_t cells = (size_t)o->n_layers * (size_t)o->n_experts;
    for (size_t c = 0; c < cells; c++)
        if ((w->owned[c / 8] >> (c % 8)) & 1)
            r->owner[c * (size_t)o->n_nodes + r->n_owner[c]++] = i;
    return 0;
}

static int handshake(remote *r, mw_err *err) {
    const co_remote_opts *o = &r->o;
    wr_msg hello = {.kind = WR_MSG_HELLO, .hello = {"coordinator", o->fingerprint}};
    for (int i = 0; i < o->n_nodes; i++) {
        hello.seq = ++r->seq;
        if (wr_pack(&r->out, &hello, (wr_codec){WR_F32, false}, err)) return -1;
        if (wr_send(r->nodes[i].sock, NULL, 0, &r->out, 0, err))
            return mw_errf(err, "%s: cannot connect within %d ms", r->nodes[i].name, o->connect_ms);
        r->nodes[i].pending = 1;
        wr_stats_ctrl(&r->stats, i)->tx_bytes += r->out.bytes;
    }
    uint64_t deadline = mw_now_ns() + (uint64_t)o->connect_ms * 1000000ull;
    for (int left = o->n_nodes; left > 0;) {
        zmq_pollitem_t items[o->n_nodes];
        for (int i = 0; i < o->n_nodes; i++)
            items[i] = (zmq_pollitem_t){r->nodes[i].sock, 0, ZMQ_POLLIN, 0};
        uint64_t t = mw_now_ns();
        long wait = t >= deadline ? 0 : (long)((deadline - t) / 1000000ull) + 1;
        int rc = wait ? zmq_poll(items, o->n_nodes, wait) : 0;
        if (rc < 0 && errno != EINTR) return mw_errf(err, "poll: %s", zmq_strerror(errno));
        if (rc == 0 && mw_now_ns() >= deadline) {
            for (int i = 0; i < o->n_nodes; i++)
                if (r->nodes[i].pending)
                    return mw_errf(err, "%s: no answer to the handshake within %d ms",
                                   r->nodes[i].name, o->connect_ms);
        }
        for (int i = 0; i < o->n_nodes; i++) {
            node *n = &r->nodes[i];
            if (!(items[i].revents & ZMQ_POLLIN)) continue;
            if (wr_recv(n->sock, &r->rx, false, 0, err)) return mw_err_wrap(err, "%s", n->name);
            wr_msg m;
            wr_code code;
            if (wr_parse(&r->in, r->rx.parts, r->rx.n_parts, r->rx.truncated, &m, &code, err))
                return mw_err_wrap(err, "%s sent a malformed answer", n->name);
            wr_stats_ctrl(&r->stats, i)->rx_bytes += r->in.bytes;
            if (m.kind == WR_MSG_ERROR)
                return mw_errf(err, "%s refused the handshake: %s: %s", n->name,
                               wr_code_name(m.error.code), m.error.message);
            if (m.kind != WR_MSG_WELCOME || !n->pending) continue; /* stray: ignore */
            if (take_welcome(r, i, &m.welcome, err)) return -1;
            n->pending = 0;
            left--;
        }
    }
    return 0;
}

/* Every (layer, expert) must have an owner; the error lists the missing ones as layer:experts
 * ranges. */
static int check_coverage(const remote *r, mw_err *err) {
    const int L = r->o.n_layers, E = r->o.n_experts;
    char list[MW_ERR_MAX / 2] = "";
    size_t len = 0;
    long missing = 0;
    for (int l = 0; l < L; l++) {
        for (int e = 0; e < E; e++) {
            if (r->n_owner[(size_t)l * E + e]) continue;
            int end = e;
            while (end + 1 < E && !r->n_owner[(size_t)l * E + end + 1]) end++;
            missing += end - e + 1;
            char item[40];
            if (end > e)
                snprintf(item, sizeof item, "%s%d:%d-%d", len ? ", " : "", l, e, end);
            else
                snprintf(item, sizeof item, "%s%d:%d", len ? ", " : "", l, e);
            if (len + strlen(item) < sizeof list - 4)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s", item);
            else if (!strstr(list, "..."))
                len += (size_t)snprintf(list + len, sizeof list - len, " ...");
            e = end;
        }
    }
    if (missing)
        return mw_errf(err, "%ld experts are owned by no node (layer:experts): %s", missing, list);
    return 0;
}

/* ---- one layer ------------------------------------------------------------------------------ */

/* The node serving (layer, expert): one of its owners, chosen from the pair so that a layer's
 * experts spread over replicas. */
static int route(const remote *r, int layer, int expert) {
    size_t c = (size_t)layer * (size_t)r->o.n_experts + (size_t)expert;
    int k = r->n_owner[c];
    return k ? r->owner[c * (size_t)r->o.n_nodes + (size_t)((layer + expert) % k)] : -1;
}

/* Splits the batch into each node's rows and assignments (selection order kept). */
static int distribute(remote *r, const md_moe_batch *b, mw_err *err) {
    const int64_t w = b->width;
    for (int i = 0; i < r->o.n_nodes; i++) r->nodes[i].n_rows = r->nodes[i].n_assign = 0;
    for (int64_t t = 0; t < b->T; t++) {
        for (int j = 0; j < b->k; j++) {
            int64_t s = t * b->k + j;
            int32_t e = b->experts[s];
            if (e < 0 || e >= r->o.n_experts)
                return mw_errf(err, "layer %d: row %lld selected expert %d of %d", b->layer,
                               (long long)t, e, r->o.n_experts);
            int ni = route(r, b->layer, e);
            if (ni < 0) return mw_errf(err, "layer %d: expert %d is owned by no node", b->layer, e);
            node *n = &r->nodes[ni];
            if (!n->n_rows || n->rows[n->n_rows - 1] != (int32_t)t) {
                if (mw_grow((void **)&n->rows, &n->rows_cap, (size_t)n->n_rows + 1,
                            sizeof *n->rows) ||
                    mw_grow((void **)&n->x, &n->x_cap, (size_t)(n->n_rows + 1) * (size_t)w,
                            sizeof *n->x))
                    return mw_errf(err, "out of memory");
                memcpy(n->x + n->n_rows * w, b->x + t * w, (size_t)w * sizeof(float));
                n->rows[n->n_rows++] = (int32_t)t;
            }
            if (mw_grow((void **)&n->assign, &n->assign_cap, (size_t)n->n_assign + 1,
                        sizeof *n->assign) ||
                mw_grow((void **)&n->src, &n->src_cap, (size_t)n->n_assign + 1, sizeof *n->src))
                return mw_errf(err, "out of memory");
            n->assign[n->n_assign] = (wr_assign){(int32_t)(n->n_rows - 1), e, b->weights[s]};
            n->src[n->n_assign++] = s;
        }
    }
    return 0;
}

/* The packing buffers of piece q (kept across layers). */
static wr_out *piece_out(remote *r, int q) {
    if (mw_grow((void **)&r->outs, &r->outs_cap, (size_t)q + 1, sizeof *r->outs)) return NULL;
    for (; r->outs_init <= (size_t)q; r->outs_init++) wr_out_init(&r->outs[r->outs_init]);
    return &r->outs[q];
}

/* Cuts each node's work into pieces of at most its capacity rows, packs them all, then sends them
 * back to back: the first send wakes the ZeroMQ I/O thread and, through it, the nodes, and on a
 * shared machine any of them may take this thread's core; nothing is left to encode by then. */
static int send_all(remote *r, const md_moe_batch *b, mw_err *err) {
    r->n_pieces = 0;
    const wr_mode mode = r->o.exact ? WR_MODE_EXACT : WR_MODE_PARTIAL;
    for (int i = 0; i < r->o.n_nodes; i++) {
        node *n = &r->nodes[i];
        n->pending = 0;
        int64_t out_rows = r->o.exact ? n->n_assign : n->n_rows;
        if (!n->n_rows) continue;
        if (n->down) return mw_errf(err, "%s is disconnected", n->name);
        if (mw_grow((void **)&n->y, &n->y_cap, (size_t)(out_rows * b->width), sizeof *n->y))
            return mw_errf(err, "out of memory");
        for (int64_t r0 = 0, a0 = 0; r0 < n->n_rows;) {
            int64_t r1 = r0 + n->capacity < n->n_rows ? r0 + n->capacity : n->n_rows, a1 = a0;
            while (a1 < n->n_assign && n->assign[a1].row < r1) a1++;
            const wr_assign *a = n->assign + a0;
            if (r0) { /* rows of a later piece count from its first row */
                if (mw_grow((void **)&r->scratch, &r->scratch_cap, (size_t)(a1 - a0),
                            sizeof *r->scratch))
                    return mw_errf(err, "out of memory");
                for (int64_t q = a0; q < a1; q++)
                    r->scratch[q - a0] = (wr_assign){(int32_t)(n->assign[q].row - r0),
                                                     n->assign[q].expert, n->assign[q].weight};
                a = r->scratch;
            }
            if (mw_grow((void **)&r->pieces, &r->pieces_cap, (size_t)r->n_pieces + 1,
                        sizeof *r->pieces))
                return mw_errf(err, "out of memory");
            piece *p = &r->pieces[r->n_pieces++];
            *p = (piece){.node = i, .seq = ++r->seq, .r0 = r0, .r1 = r1, .a0 = a0, .a1 = a1};
            wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                        .seq = p->seq,
                        .batch = {.layer = (uint32_t)b->layer,
                                  .rows = (uint32_t)(r1 - r0),
                                  .width = (uint32_t)b->width,
                                  .n_assign = (uint32_t)(a1 - a0),
                                  .mode = mode,
                                  .reply = r->o.codec,
                                  .numerics = (wr_numerics)b->numerics,
                                  .x = n->x + r0 * b->width,
                                  .assign = a}};
            wr_out *o = piece_out(r, r->n_pieces - 1);
            if (!o) return mw_errf(err, "out of memory");
            uint64_t t0 = mw_now_ns();
            if (wr_pack(o, &m, r->o.codec, err)) return mw_err_wrap(err, "%s", n->name);
            r->t_encode += mw_now_ns() - t0;
            wr_counters *c = wr_stats_at(&r->stats, i, b->layer);
            c->tx_bytes += o->bytes;
            c->tx_msgs++;
            c->rows += (uint64_t)(r1 - r0);
            c->assignments += (uint64_t)(a1 - a0);
            n->pending++;
            r0 = r1;
            a0 = a1;
        }
    }
    for (int q = 0; q < r->n_pieces; q++) {
        piece *p = &r->pieces[q];
        node *n = &r->nodes[p->node];
        p->t_send = mw_now_ns();
        if (wr_send(n->sock, NULL, 0, &r->outs[q], ZMQ_DONTWAIT, err))
            return mw_errf(err, "%s is not connected (layer %d)", n->name, b->layer);
        r->t_send += mw_now_ns() - p->t_send;
    }
    return 0;
}

/* Checks a reply against its piece and stores its rows. */
static int take_reply(remote *r, int ni, const md_moe_batch *b, const wr_msg *m, mw_err *err) {
    node *n = &r->nodes[ni];
    if (m->kind == WR_MSG_ERROR)
        return mw_errf(err, "%s failed layer %d: %s: %s", n->name, b->layer,
                       wr_code_name(m->error.code), m->error.message);
    if (m->kind != WR_MSG_PARTIAL_BATCH) return 0; /* a stray Pong or Welcome */
    piece *p = NULL;
    for (int q = 0; q < r->n_pieces && !p; q++)
        if (r->pieces[q].node == ni && r->pieces[q].seq == m->seq && !r->pieces[q].done)
            p = &r->pieces[q];
    if (!p) return 0; /* an answer to a request abandoned earlier */
    const wr_partial *y = &m->partial;
    int64_t off = r->o.exact ? p->a0 : p->r0, rows = r->o.exact ? p->a1 - p->a0 : p->r1 - p->r0;
    if ((int)y->layer != b->layer || (int64_t)y->width != b->width || (int64_t)y->rows != rows ||
        (y->mode == WR_MODE_EXACT) != r->o.exact)
        return mw_errf(err,
                       "%s answered layer %d seq %" PRIu64 " with %u rows × %u of layer %u, "
                       "expected %lld × %lld of layer %d",
                       n->name, b->layer, m->seq, y->rows, y->width, y->layer, (long long)rows,
                       (long long)b->width, b->layer);
    memcpy(n->y + off * b->width, y->y, (size_t)(rows * b->width) * sizeof(float));
    uint64_t rtt = mw_now_ns() - p->t_send;
    wr_counters *c = wr_stats_at(&r->stats, ni, b->layer);
    c->rx_bytes += r->in.bytes;
    c->rx_msgs++;
    c->batches++;
    c->weight_bytes += y->weight_bytes;
    c->compute_ns += y->compute_ns;
    c->queue_ns += y->queue_ns;
    c->rtt_ns += rtt;
    if (rtt > c->rtt_max_ns) c->rtt_max_ns = rtt;
    p->done = true;
    n->pending--;
    uint64_t node_ns = y->queue_ns + y->compute_ns;
    r->last_tail = rtt > node_ns ? rtt - node_ns : 0;
    return 0;
}

/* Waits for every piece, the per-layer deadline and disconnects. */
static int wait_all(remote *r, const md_moe_batch *b, uint64_t t0, mw_err *err) {
    const int N = r->o.n_nodes;
    uint64_t deadline = t0 + (uint64_t)r->o.deadline_ms * 1000000ull;
    zmq_pollitem_t items[2 * N];
    for (;;) {
        int left = 0;
        for (int i = 0; i < N; i++) left += r->nodes[i].pending;
        if (!left) return 0;
        for (int i = 0; i < N; i++) {
            items[2 * i] =
                (zmq_pollitem_t){r->nodes[i].sock, 0, r->nodes[i].pending ? ZMQ_POLLIN : 0, 0};
            items[2 * i + 1] = (zmq_pollitem_t){r->nodes[i].mon, 0, ZMQ_POLLIN, 0};
        }
        uint64_t t = mw_now_ns();
        if (t >= deadline) {
            for (int i = 0; i < N; i++)
                if (r->nodes[i].pending)
                    return mw_errf(err, "%s: no answer for layer %d within the %d ms deadline",
                                   r->nodes[i].name, b->layer, r->o.deadline_ms);
        }
        long wait = (long)((deadline - t) / 1000000ull) + 1;
        int rc = zmq_poll(items, 2 * N, wait);
        uint64_t t1 = mw_now_ns();
        r->t_wait += t1 - t;
        if (rc < 0) {
            if (errno == EINTR) continue;
            return mw_errf(err, "poll: %s", zmq_strerror(errno));
        }
        /* Every reply still missing is readable: the trunk resumes after decoding and combining
         * them, so its workers get up now, in parallel with that. */
        bool all_in = true;
        for (int i = 0; i < N && all_in; i++)
            all_in = !r->nodes[i].pending || (items[2 * i].revents & ZMQ_POLLIN);
        if (all_in) kn_pool_wake(r->o.pool);
        for (int i = 0; i < N; i++) {
            node *n = &r->nodes[i];
            if (items[2 * i + 1].revents & ZMQ_POLLIN) read_monitor(n);
            while (n->pending && (items[2 * i].revents & ZMQ_POLLIN)) {
                if (wr_recv(n->sock, &r->rx, false, ZMQ_DONTWAIT, err)) {
                    if (errno == EAGAIN) break;
                    return mw_err_wrap(err, "%s", n->name);
                }
                wr_msg m;
                wr_code code;
                if (wr_parse(&r->in, r->rx.parts, r->rx.n_parts, r->rx.truncated, &m, &code, err))
                    return mw_err_wrap(err, "%s sent a bad reply for layer %d", n->name, b->layer);
                if (take_reply(r, i, b, &m, err)) return -1;
            }
            if (n->down && n->pending)
                return mw_errf(err, "%s disconnected during layer %d", n->name, b->layer);
        }
        r->t_decode += mw_now_ns() - t1;
    }
}

/* out = the batch's expert output, combined in a fixed order. */
static int combine(remote *r, const md_moe_batch *b, float *out, mw_err *err) {
    const int64_t w = b->width, n_sel = b->T * b->k;
    memset(out, 0, (size_t)(b->T * w) * sizeof(float));
    if (!r->o.exact) {
        /* node order, each node's partial sum added once per row */
        for (int i = 0; i < r->o.n_nodes; i++) {
            const node *n = &r->nodes[i];
            for (int64_t q = 0; q < n->n_rows; q++)
                md_moe_accumulate(out + (int64_t)n->rows[q] * w, n->y + q * w, 1.0f, w);
        }
        return 0;
    }
    /* selection order, exactly as the in-process executor reduces */
    if (mw_grow((void **)&r->yptr, &r->yptr_cap, (size_t)n_sel, sizeof *r->yptr))
        return mw_errf(err, "out of memory");
    for (int i = 0; i < r->o.n_nodes; i++) {
        const node *n = &r->nodes[i];
        for (int64_t a = 0; a < n->n_assign; a++) r->yptr[n->src[a]] = n->y + a * w;
    }
    for (int64_t t = 0; t < b->T; t++)
        for (int j = 0; j < b->k; j++)
            md_moe_accumulate(out + t * w, r->yptr[t * b->k + j], b->weights[t * b->k + j], w);
    return 0;
}

static int run(md_expert_backend *be, const md_moe_batch *b, float *out, mw_err *err) {
    remote *r = be->impl;
    if (b->layer < 0 || b->layer >= r->o.n_layers || b->width != r->o.width || b->T < 0 ||
        b->k < 1 || b->k > r->o.n_experts)
        return mw_errf(err, "remote experts: bad batch (layer %d, %lld rows × %lld, k %d)",
                       b->layer, (long long)b->T, (long long)b->width, b->k);
    if (b->T == 0) return 0;
    /* The trunk's pool has nothing to do until the replies are in: its workers sleep instead of
     * spinning on the cores the nodes are computing on. */
    kn_pool_park(r->o.pool);
    uint64_t t0 = mw_now_ns();
    if (distribute(r, b, err)) return -1;
    r->t_split += mw_now_ns() - t0;
    if (send_all(r, b, err) || wait_all(r, b, t0, err)) return -1;
    r->t_tail += r->last_tail; /* the reply that completed the layer */
    const uint64_t tail_us = r->last_tail / 1000;
    r->tail_log[r->n_tail++ % CO_TAIL_LOG] = tail_us > UINT32_MAX ? UINT32_MAX : (uint32_t)tail_us;
    uint64_t t1 = mw_now_ns();
    if (combine(r, b, out, err)) return -1;
    uint64_t t2 = mw_now_ns();
    r->t_combine += t2 - t1;
    r->layer_rows[b->layer] += b->T;
    r->layer_wall[b->layer] += t2 - t0;
    r->layer_calls[b->layer]++;
    return 0;
}

/* ---- lifetime ------------------------------------------------------------------------------- */

static void destroy(md_expert_backend *be) {
    if (!be) return;
    remote *r = be->impl;
    if (r) {
        for (int i = 0; r->nodes && i < r->o.n_nodes; i++) {
            node *n = &r->nodes[i];
            if (n->sock) {
                zmq_socket_monitor(n->sock, NULL, 0);
                zmq_close(n->sock);
            }
            if (n->mon) zmq_close(n->mon);
            free(n->rows);
            free(n->assign);
            free(n->src);
            free(n->x);
            free(n->y);
        }
        wr_rx_free(&r->rx);
        if (r->zctx) zmq_ctx_term(r->zctx);
        wr_in_free(&r->in);
        wr_out_free(&r->out);
        wr_stats_free(&r->stats);
        free(r->nodes);
        free(r->owner);
        free(r->n_owner);
        free(r->pieces);
        for (size_t q = 0; q < r->outs_init; q++) wr_out_free(&r->outs[q]);
        free(r->outs);
        free(r->scratch);
        free(r->yptr);
        free(r->layer_rows);
        free(r->layer_wall);
        free(r->layer_calls);
        free(r);
    }
    free(be);
}

int co_remote_new(const co_remote_opts *o, md_expert_backend **out, mw_err *err) {
    *out = NULL;
    if (o->n_nodes < 1 || o->n_nodes > 1024)
        return mw_errf(err, "remote experts: %d nodes (1 .. 1024)", o->n_nodes);
    if (o->n_layers < 1 || o->n_experts < 1 || o->width < 1 || o->deadline_ms < 1 ||
        o->connect_ms < 1 || !wr_dtype_valid(o->codec.dtype))
        return mw_errf(err, "remote experts: bad options");
    md_expert_backend *be = calloc(1, sizeof *be);
    remote *r = calloc(1, sizeof *r);
    if (!be || !r) {
        free(be);
        free(r);
        return mw_errf(err, "out of memory");
    }
    be->name = "remote";
    be->run = run;
    be->destroy = destroy;
    be->impl = r;
    r->o = *o;
    size_t cells = (size_t)o->n_layers * (size_t)o->n_experts;
    r->nodes = calloc((size_t)o->n_nodes, sizeof *r->nodes);
    r->owner = malloc(cells * (size_t)o->n_nodes * sizeof *r->owner);
    r->n_owner = calloc(cells, sizeof *r->n_owner);
    r->layer_rows = calloc((size_t)o->n_layers, sizeof *r->layer_rows);
    r->layer_wall = calloc((size_t)o->n_layers, sizeof *r->layer_wall);
    r->layer_calls = calloc((size_t)o->n_layers, sizeof *r->layer_calls);
    wr_out_init(&r->out);
    wr_rx_init(&r->rx);
    wr_limits lim = wr_limits_default();
    lim.max_width = (uint32_t)o->width;
    wr_in_init(&r->in, &lim);
    r->zctx = zmq_ctx_new();
    /* The I/O thread (started with the first socket) is SCHED_BATCH: woken to push a batch out,
     * it takes a free core or waits until this thread blocks in zmq_poll, instead of preempting
     * it before the batches for the other nodes are queued. Only from the default policy: libzmq
     * aborts if the change fails (a real-time caller's priority is invalid for SCHED_BATCH). */
    if (r->zctx && sched_getscheduler(0) == SCHED_OTHER)
        zmq_ctx_set(r->zctx, ZMQ_THREAD_SCHED_POLICY, SCHED_BATCH);
    if (!r->nodes || !r->owner || !r->n_owner || !r->layer_rows || !r->layer_wall ||
        !r->layer_calls || !r->zctx || wr_stats_init(&r->stats, o->n_nodes, o->n_layers, err)) {
        destroy(be);
        return mw_errf(err, "out of memory");
    }
    r->o.endpoints = NULL; /* not kept: copied into the nodes */
    for (int i = 0; i < o->n_nodes; i++) {
        node *n = &r->nodes[i];
        snprintf(n->endpoint, sizeof n->endpoint, "%s", o->endpoints[i]);
        snprintf(n->name, sizeof n->name, "node %d (%s)", i, o->endpoints[i]);
        if (open_node(r, i, err)) {
            destroy(be);
            return -1;
        }
    }
    if (handshake(r, err) || check_coverage(r, err)) {
        destroy(be);
        return -1;
    }
    for (int i = 0; i < o->n_nodes; i++) {
        int t = -1;
        zmq_setsockopt(r->nodes[i].sock, ZMQ_SNDTIMEO, &t, sizeof t);
    }
    *out = be;
    return 0;
}

/* ---- accounting ----------------------------------------------------------------------------- */

const wr_stats *co_remote_stats(const md_expert_backend *b) {
    return &((remote *)b->impl)->stats;
}

int64_t co_remote_tokens(const md_expert_backend *b) {
    const remote *r = b->impl;
    int64_t t = 0;
    for (int l = 0; l < r->o.n_layers; l++)
        if (r->layer_rows[l] > t) t = r->layer_rows[l];
    return t;
}

void co_remote_reset_stats(md_expert_backend *b) {
    remote *r = b->impl;
    wr_stats_reset(&r->stats);
    for (int l = 0; l < r->o.n_layers; l++)
        r->layer_rows[l] = r->layer_wall[l] = r->layer_calls[l] = 0;
    r->t_split = r->t_encode = r->t_send = r->t_wait = r->t_decode = r->t_combine = 0;
    r->t_tail = 0;
    r->n_tail = 0;
}

static int cmp_u32(const void *a, const void *b) {
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

co_remote_summary co_remote_summarize(const md_expert_backend *b) {
    const remote *r = b->impl;
    co_remote_summary s = {.tokens = co_remote_tokens(b), .total = wr_stats_sum(&r->stats, -1, -1)};
    uint64_t wall = 0, calls = 0;
    for (int l = 0; l < r->o.n_layers; l++) {
        wall += r->layer_wall[l];
        calls += r->layer_calls[l];
    }
    const double pc = calls ? 1e-3 / (double)calls : 0.0;
    s.layer_rtt_us = (double)wall * pc;
    s.split_us = (double)r->t_split * pc;
    s.encode_us = (double)r->t_encode * pc;
    s.send_us = (double)r->t_send * pc;
    s.wait_us = (double)r->t_wait * pc;
    s.decode_us = (double)r->t_decode * pc;
    s.combine_us = (double)r->t_combine * pc;
    s.tail_us = (double)r->t_tail * pc;
    const size_t nt = r->n_tail < CO_TAIL_LOG ? (size_t)r->n_tail : CO_TAIL_LOG;
    if (nt) {
        uint32_t sorted[CO_TAIL_LOG];
        memcpy(sorted, r->tail_log, nt * sizeof *sorted);
        qsort(sorted, nt, sizeof *sorted, cmp_u32);
        s.tail_p50_us = sorted[nt / 2];
        s.tail_p90_us = sorted[nt * 9 / 10];
        s.tail_p99_us = sorted[nt * 99 / 100];
    }
    double nb = s.total.batches ? 1e-3 / (double)s.total.batches : 0.0;
    s.node_compute_us = (double)s.total.compute_ns * nb;
    s.node_queue_us = (double)s.total.queue_ns * nb;
    s.node_rtt_us = (double)s.total.rtt_ns * nb;
    return s;
}

void co_remote_report(const md_expert_backend *b, FILE *f) {
    const remote *r = b->impl;
    const co_remote_opts *o = &r->o;
    co_remote_summary s = co_remote_summarize(b);
    double per = s.tokens ? 1.0 / (double)s.tokens : 0.0;
    char codec[16];
    fprintf(f,
            "cluster: %d node(s), wire %s, %s mode, deadline %d ms; %lld token(s) through %d MoE "
            "layers\n",
            o->n_nodes, wr_codec_format(o->codec, codec, sizeof codec),
            o->exact ? "exact" : "partial", o->deadline_ms, (long long)s.tokens, o->n_layers);
    fprintf(f, "  wire bytes/token: %.0f (sent %.0f, received %.0f)\n",
            (double)(s.total.tx_bytes + s.total.rx_bytes) * per, (double)s.total.tx_bytes * per,
            (double)s.total.rx_bytes * per);
    fprintf(f, "  expert weight bytes/token: %.0f\n", (double)s.total.weight_bytes * per);
    fprintf(f, "  movement ratio: %.3g\n", wr_movement_ratio(&s.total));
    for (int i = 0; i < o->n_nodes; i++) {
        const node *n = &r->nodes[i];
        wr_counters c = wr_stats_sum(&r->stats, i, -1);
        double nb = c.batches ? 1.0 / (double)c.batches : 0.0;
        fprintf(f,
                "  %s %s, %s, %u thread(s): %" PRIu64 " batches, queued %.1f + compute %.1f "
                "us/batch, round trip %.1f us/batch (worst %.1f), movement ratio %.3g\n",
                n->name, n->node_id, n->backend, n->threads, c.batches,
                (double)c.queue_ns * 1e-3 * nb, (double)c.compute_ns * 1e-3 * nb,
                (double)c.rtt_ns * 1e-3 * nb, (double)c.rtt_max_ns * 1e-3, wr_movement_ratio(&c));
    }
    fprintf(
        f,
        "  per layer (us): split %.1f, encode %.1f, send %.1f, wait %.1f, receive+decode %.1f, "
        "combine %.1f; last reply's wire and wake-ups %.1f (median %.0f, 90th %.0f, 99th %.0f)\n",
        s.split_us, s.encode_us, s.send_us, s.wait_us, s.decode_us, s.combine_us, s.tail_us,
        s.tail_p50_us, s.tail_p90_us, s.tail_p99_us);
    fprintf(f, "  round trip per layer (us, mean %.1f):", s.layer_rtt_us);
    for (int l = 0; l < o->n_layers; l++)
        fprintf(f, " %d:%.1f", l,
                r->layer_calls[l] ? (double)r->layer_wall[l] * 1e-3 / (double)r->layer_calls[l]
                                  : 0.0);
    fprintf(f, "\n");
}
