/* expert-node/en_serve.c — the serve loop. Each round drains every queued message (up to a round's
 * capacity): Hello, Ping and faulty requests are answered at once; accepted ExpertBatches are
 * appended to the group of their (layer, mode, numerics). Then each group runs through md_moe_exec
 * once and every request gets its PartialBatch. The loop sleeps in zmq_poll on the socket and the
 * wake pipe, so a stop never waits for traffic. */
#include "expert-node/en_node.h"
#include "expert-node/en_client.h"
#include "expert-node/en_device.h"
#include "expert-node/en_group.h"
#include "expert-node/en_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/mw_grow.h"
#include "util/mw_notify.h"
#include "util/mw_time.h"

/* Hands a reply to libzmq. A client whose queue is full (it does not read) loses it: counted
 * and logged once per interval, not per reply. */
static void send_to(en_node *n, const uint8_t *id, size_t id_len, const wr_out *o) {
    mw_err e;
    en__client *c = en__client_find(n, id, id_len);
    if (wr_send(n->router, id, id_len, o, ZMQ_DONTWAIT, &e) != 0) {
        if (c) en__client_note(n, c, EN__F_DROPPED, NULL);
        n->replies_dropped++;
    } else if (c) {
        c->sent += o->bytes;
    }
}

static void reply_error(en_node *n, const uint8_t *id, size_t id_len, uint64_t seq, wr_code code,
                        const char *msg) {
    n->errors_sent++;
    en__client *c = en__client_find(n, id, id_len);
    if (c) {
        char line[WR_MAX_STRING + 32];
        snprintf(line, sizeof line, "%s: %s", wr_code_name(code), msg);
        en__client_note(n, c, EN__F_ERROR, line);
    }
    mw_err e;
    if (wr_pack_error(&n->out, seq, code, msg, &e) == 0) send_to(n, id, id_len, &n->out);
}

/* The Welcome: what the node owns and serves, its rows' width and the GLU policy of its config,
 * which the coordinator compares with its own model's. */
static void reply_welcome(en_node *n, uint64_t seq) {
    float glu[KN_GLU_MAX_PARAMS];
    const int n_glu = kn_glu_params(&n->cfg.glu, glu);
    wr_msg m = {.kind = WR_MSG_WELCOME,
                .seq = seq,
                .welcome = {.node_id = n->node_id,
                            .fingerprint = n->fingerprint,
                            .backend = n->backend,
                            .numerics = n->numerics,
                            .capacity = n->opts.capacity,
                            .threads = (uint32_t)n->opts.threads,
                            .n_layers = (uint32_t)n->n_layers,
                            .n_experts = (uint32_t)n->n_experts,
                            .width = (uint32_t)n->width,
                            .owned = n->owned_bits,
                            .glu = kn_glu_name(n->cfg.glu.kind),
                            .n_glu_params = (uint32_t)n_glu,
                            .glu_params = glu,
                            .read_gbps = (float)n->read_gbps,
                            .live_port = n->live ? (uint32_t)n->live_port : 0,
                            .live_token = n->live ? n->live_token : NULL}};
    mw_err e;
    if (wr_pack(&n->out, &m, (wr_codec){WR_F32, false}, &e) == 0)
        send_to(n, n->rx.id, n->rx.id_len, &n->out);
}

/* Node-level checks of a parsed batch (the wire checked its structure). -1 with code and err. */
static int check_batch(en_node *n, uint64_t seq, const wr_batch *b, wr_code *code, mw_err *err) {
    const char *k = "expert_batch";
    if (n->opts.numerics >= 0 && (int)b->numerics != n->opts.numerics)
        return *code = WR_E_UNEXPECTED,
               mw_errf(err, "%s seq %" PRIu64 ": numerics %s is not served (this node: %s)", k, seq,
                       kn_numerics_name((kn_numerics)b->numerics), n->numerics);
    if ((int64_t)b->width != n->width)
        return *code = WR_E_SHAPE,
               mw_errf(err, "%s seq %" PRIu64 ": width %u, the experts' is %lld", k, seq, b->width,
                       (long long)n->width);
    if (b->layer >= (uint32_t)n->n_layers)
        return *code = WR_E_LAYER, mw_errf(err, "%s seq %" PRIu64 ": layer %u, the model has %d", k,
                                           seq, b->layer, n->n_layers);
    for (uint32_t j = 0; j < b->n_assign; j++) {
        int32_t e = b->assign[j].expert;
        if (e >= n->n_experts)
            return *code = WR_E_EXPERT,
                   mw_errf(err,
                           "%s seq %" PRIu64 ": assignment %u names expert %d, the model has %d", k,
                           seq, j, e, n->n_experts);
        if (!vx_expert_set_has(&n->owned, (int)b->layer, e))
            return *code = WR_E_NOT_OWNED,
                   mw_errf(err,
                           "%s seq %" PRIu64 ": expert %d of layer %u is not owned by %s (owns %s)",
                           k, seq, e, b->layer, n->node_id, n->spec);
    }
    return 0;
}

static int find_group(en_node *n, int layer, md_moe_output mode, kn_numerics num) {
    for (int g = 0; g < n->n_group; g++)
        if (n->group[g].layer == layer && n->group[g].mode == mode && n->group[g].numerics == num)
            return g;
    en__group *g = &n->group[n->n_group];
    g->layer = layer;
    g->mode = mode;
    g->numerics = num;
    g->rows = g->n_assign = 0;
    return n->n_group++;
}

/* Stored bytes of the distinct experts a request uses: what serving it alone reads. */
static uint64_t request_weight_bytes(en_node *n, const wr_batch *b) {
    if (++n->stamp_now == 0) {
        memset(n->stamp, 0, (size_t)n->n_experts * sizeof *n->stamp);
        n->stamp_now = 1;
    }
    uint64_t sum = 0;
    const uint64_t *bytes = n->expert_bytes + (size_t)b->layer * (size_t)n->n_experts;
    for (uint32_t j = 0; j < b->n_assign; j++) {
        int32_t e = b->assign[j].expert;
        if (n->stamp[e] != n->stamp_now) {
            n->stamp[e] = n->stamp_now;
            sum += bytes[e];
        }
    }
    return sum;
}

/* Appends an accepted batch of client c (NULL: unknown) to its group. */
static int enqueue(en_node *n, en__client *c, uint64_t seq, const wr_batch *b) {
    int gi = find_group(n, (int)b->layer, (md_moe_output)b->mode, (kn_numerics)b->numerics);
    en__group *g = &n->group[gi];
    size_t w = (size_t)n->width;
    if (!g->rows) {
        g->t_first = n->rx_at;
        g->held = false;
    } else if (g->held) {
        n->held_joined++;
    }
    if (!g->rows && b->x == (const float *)(const void *)n->in.rows.p) {
        /* the group's first request (mostly its only one): it takes the buffer its rows were
         * decoded into, and the parser the group's old one, instead of copying every row */
        float *x = g->x;
        const size_t cap = g->x_cap;
        g->x = (float *)(void *)n->in.rows.p;
        g->x_cap = n->in.rows.cap / sizeof(float);
        n->in.rows = (wr_buf){.p = (uint8_t *)x, .cap = cap * sizeof(float)};
    } else if (mw_grow((void **)&g->x, &g->x_cap, (size_t)(g->rows + b->rows) * w, sizeof(float))) {
        return -1;
    } else {
        memcpy(g->x + (size_t)g->rows * w, b->x, (size_t)b->rows * w * sizeof(float));
    }
    if (mw_grow((void **)&g->assign, &g->assign_cap, (size_t)(g->n_assign + b->n_assign),
                sizeof(md_assignment)))
        return -1;
    for (uint32_t j = 0; j < b->n_assign; j++)
        g->assign[g->n_assign + j] = (md_assignment){(int32_t)(g->rows + b->assign[j].row),
                                                     b->assign[j].expert, b->assign[j].weight};
    en__req *r = &n->req[n->n_req++];
    memcpy(r->id, n->rx.id, n->rx.id_len);
    r->id_len = n->rx.id_len;
    r->seq = seq;
    r->group = gi;
    r->row_off = g->rows;
    r->rows = b->rows;
    r->assign_off = g->n_assign;
    r->n_assign = b->n_assign;
    r->reply = b->reply;
    r->weight_bytes = request_weight_bytes(n, b);
    r->rx_bytes = n->in.bytes;
    r->t_rx = n->rx_at;
    g->rows += b->rows;
    g->n_assign += b->n_assign;
    n->pending_rows += b->rows;
    if (c) en__group_arrived(n, c, g->layer, n->rx_at);
    return 0;
}

/* Handles the message in n->rx from client c (NULL: unknown): answers it now, or queues it for
 * the round. */
static void handle(en_node *n, en__client *c) {
    wr_msg m;
    wr_code code;
    mw_err e;
    const uint8_t *id = n->rx.id;
    size_t id_len = n->rx.id_len;
    if (wr_parse(&n->in, n->rx.parts, n->rx.n_parts, n->rx.truncated, &m, &code, &e) != 0) {
        reply_error(n, id, id_len, m.seq, code, e.msg);
        return;
    }
    switch (m.kind) {
    case WR_MSG_HELLO:
        if (m.hello.fingerprint[0] && strcmp(m.hello.fingerprint, n->fingerprint)) {
            char msg[512];
            snprintf(msg, sizeof msg, "hello: the client's model %.64s is not this node's %.64s",
                     m.hello.fingerprint, n->fingerprint);
            reply_error(n, id, id_len, m.seq, WR_E_FINGERPRINT, msg);
        } else {
            reply_welcome(n, m.seq);
        }
        return;
    case WR_MSG_PING: {
        wr_msg pong = {.kind = WR_MSG_PONG, .seq = m.seq, .ping = m.ping};
        if (wr_pack(&n->out, &pong, (wr_codec){WR_F32, false}, &e) == 0)
            send_to(n, id, id_len, &n->out);
        return;
    }
    case WR_MSG_EXPERT_BATCH:
        if (check_batch(n, m.seq, &m.batch, &code, &e) != 0) {
            reply_error(n, id, id_len, m.seq, code, e.msg);
        } else if (enqueue(n, c, m.seq, &m.batch) != 0) {
            reply_error(n, id, id_len, m.seq, WR_E_INTERNAL, "out of memory queueing the batch");
        }
        return;
    default: {
        char msg[128];
        snprintf(msg, sizeof msg, "%s seq %" PRIu64 ": an expert node does not accept a %s",
                 wr_kind_name(m.kind), m.seq, wr_kind_name(m.kind));
        reply_error(n, id, id_len, m.seq, WR_E_UNEXPECTED, msg);
    }
    }
}

static bool round_open(const en_node *n) {
    return n->n_req < EN__MAX_PENDING && n->pending_rows < (int64_t)n->opts.capacity &&
           !atomic_load(&n->stopping);
}

static void handle_timed(en_node *n, en__client *c) {
    if (c) c->in_round++;
    uint64_t t0 = mw_now_ns();
    handle(n, c);
    n->t_handle += mw_now_ns() - t0;
}

/* The message just received in n->rx: answered or queued for this round, deferred to a later
 * one when its client used its quota, or dropped (see en_client.h). */
static void admit(en_node *n) {
    const int fd = wr_rx_fd(&n->rx);
    wr_relay_delivered(n->relay, fd);
    if (n->rx.n_parts + n->rx.truncated > EN__MAX_MESSAGE_PARTS) {
        /* no client of ours sends that: drained, dropped, and the peer cut off */
        char why[128];
        snprintf(why, sizeof why, "sent a message of %d parts (a moewire message has %d)",
                 n->rx.n_parts + n->rx.truncated, WR_MAX_PARTS);
        wr_relay_cut(n->relay, fd, why);
        return;
    }
    en__client *c = en__client_of(n, &n->rx, fd); /* NULL: out of memory, served all the same */
    if (c && en__client_stalled(n, c)) {
        en__client_note(n, c, EN__F_DISCARDED, NULL);
        n->requests_discarded++;
        return;
    }
    if (c && c->in_round >= EN__ROUND_QUOTA) {
        if (!en__client_defer(n, c, &n->rx, n->rx_at)) {
            en__client_note(n, c, EN__F_OVERFLOW, NULL);
            n->requests_discarded++;
        }
        return;
    }
    handle_timed(n, c);
}

/* Requests deferred from earlier rounds, up to each client's quota, oldest first. */
static void take_deferred(en_node *n) {
    for (int i = 0; i < n->n_clients && round_open(n); i++) {
        en__client *c = n->clients[i];
        while (c->in_round < EN__ROUND_QUOTA && round_open(n) &&
               en__client_take(c, &n->rx, &n->rx_at)) {
            if (en__client_stalled(n, c)) {
                en__client_note(n, c, EN__F_DISCARDED, NULL);
                n->requests_discarded++;
                continue;
            }
            handle_timed(n, c);
        }
    }
}

/* Runs group g into n->y: 0, or -1 with e set. *read gets the expert weight bytes read. */
static int run_group(en_node *n, const en__group *g, uint64_t *read, mw_err *e) {
    const int64_t out_rows = g->mode == MD_MOE_EXACT ? g->n_assign : g->rows;
    if (mw_grow((void **)&n->y, &n->y_cap, (size_t)out_rows * (size_t)n->width, sizeof(float)))
        return mw_errf(e, "out of memory for %lld output rows", (long long)out_rows);
    md_moe_exec_args a = {.layer = g->layer,
                          .rows = g->rows,
                          .width = n->width,
                          .x = g->x,
                          .assign = g->assign,
                          .n_assign = g->n_assign,
                          .mode = g->mode,
                          .glu = &n->cfg.glu,
                          .numerics = g->numerics,
                          .pool = n->pool,
                          .lookup = en__lookup,
                          .lookup_ctx = n,
                          .ws = n->ws};
    return n->dev->exec(n, &a, n->y, read, e);
}

/* Answers request r of group g with its rows of n->y: the group ran from t0 for dt ns. */
static void reply_partial(en_node *n, const en__group *g, const en__req *r, uint64_t t0,
                          uint64_t dt, wr_counters *c) {
    const size_t w = (size_t)n->width;
    int64_t off = g->mode == MD_MOE_EXACT ? r->assign_off : r->row_off;
    int64_t rows = g->mode == MD_MOE_EXACT ? r->n_assign : r->rows;
    wr_msg m = {.kind = WR_MSG_PARTIAL_BATCH,
                .seq = r->seq,
                .partial = {.layer = (uint32_t)g->layer,
                            .rows = (uint32_t)rows,
                            .width = (uint32_t)w,
                            .mode = (wr_mode)g->mode,
                            .compute_ns = dt,
                            .weight_bytes = r->weight_bytes,
                            .queue_ns = t0 > r->t_rx ? t0 - r->t_rx : 0,
                            .y = n->y + (size_t)off * w}};
    mw_err pe;
    uint64_t t1 = mw_now_ns();
    if (wr_pack(&n->out, &m, r->reply, &pe) != 0) {
        reply_error(n, r->id, r->id_len, r->seq, WR_E_INTERNAL, pe.msg);
        return;
    }
    uint64_t t2 = mw_now_ns();
    send_to(n, r->id, r->id_len, &n->out);
    n->t_encode += t2 - t1;
    n->t_send += mw_now_ns() - t2;
    c->tx_bytes += n->out.bytes;
    c->tx_msgs++;
}

/* Runs group gi and answers its requests: their rows, or the group's error. */
static void execute_group(en_node *n, int gi) {
    const en__group *g = &n->group[gi];
    mw_err e;
    uint64_t read = 0, t0 = mw_now_ns();
    const int rc = run_group(n, g, &read, &e);
    uint64_t dt = mw_now_ns() - t0;
    n->t_compute += dt;
    if (g->held) n->held_ns += t0 - g->t_first;
    wr_counters *c = wr_stats_at(&n->stats, 0, g->layer);
    c->weight_bytes += read;
    c->compute_ns += dt;
    c->rows += (uint64_t)g->rows;
    c->assignments += (uint64_t)g->n_assign;
    const en__req *first = NULL;
    int n_in = 0;
    bool shared = false;
    for (int ri = 0; ri < n->n_req; ri++) {
        const en__req *r = &n->req[ri];
        if (r->group != gi) continue;
        if (!first) first = r;
        shared |= r->id_len != first->id_len || memcmp(r->id, first->id, r->id_len);
        n_in++;
    }
    n->groups_run++;
    if (shared) {
        n->groups_shared++;
        n->requests_shared += (uint64_t)n_in;
    }
    for (int ri = 0; ri < n->n_req; ri++) {
        en__req *r = &n->req[ri];
        if (r->group != gi) continue;
        c->rx_bytes += r->rx_bytes;
        c->rx_msgs++;
        c->batches++;
        if (rc == 0) {
            reply_partial(n, g, r, t0, dt, c);
        } else {
            char msg[WR_MAX_STRING];
            snprintf(msg, sizeof msg, "expert_batch seq %" PRIu64 ": %s", r->seq, e.msg);
            reply_error(n, r->id, r->id_len, r->seq, WR_E_INTERNAL, msg);
        }
        en__client *cl = en__client_find(n, r->id, r->id_len);
        if (cl) en__group_answered(cl, r->t_rx, mw_now_ns());
    }
}

/* Runs every group that does not wait for another client's rows (en_group.h), all of them when
 * the round is full or the node stops; the waiting groups and their requests stay for the next
 * round, and n->wake_at says when the first of them stops waiting. */
static void execute_round(en_node *n) {
    const bool all = !round_open(n);
    const uint64_t now = mw_now_ns();
    bool wait[EN__MAX_PENDING];
    n->wake_at = 0;
    en__group_mark_held(n);
    for (int gi = 0; gi < n->n_group; gi++) {
        uint64_t until = 0;
        wait[gi] = !all && en__group_waits(n, gi, now, &until);
        if (wait[gi] && (!n->wake_at || until < n->wake_at)) n->wake_at = until;
    }
    int map[EN__MAX_PENDING], kept = 0;
    for (int gi = 0; gi < n->n_group; gi++) {
        if (!wait[gi]) {
            execute_group(n, gi);
            continue;
        }
        /* the waiting group moves to the front, with its buffers; the run one's go behind */
        if (gi != kept) {
            const en__group t = n->group[kept];
            n->group[kept] = n->group[gi];
            n->group[gi] = t;
        }
        map[gi] = kept++;
    }
    int kept_req = 0;
    n->pending_rows = 0;
    for (int ri = 0; ri < n->n_req; ri++) {
        en__req *r = &n->req[ri];
        if (!wait[r->group]) continue;
        r->group = map[r->group];
        n->pending_rows += r->rows;
        if (ri != kept_req) n->req[kept_req] = *r;
        kept_req++;
    }
    n->n_req = kept_req;
    n->n_group = kept;
}

static int write_ready_file(const en_node *n, mw_err *err) {
    if (!n->opts.ready_file) return 0;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", n->opts.ready_file);
    FILE *f = fopen(tmp, "w");
    if (!f) return mw_errf(err, "cannot write %s", tmp);
    fprintf(f, "%s\n", n->endpoint);
    if (fclose(f) != 0 || rename(tmp, n->opts.ready_file) != 0)
        return mw_errf(err, "cannot write %s", n->opts.ready_file);
    return 0;
}

static void print_summary(en_node *n) {
    wr_counters t = wr_stats_sum(&n->stats, -1, -1);
    fprintf(stderr,
            "expert-node %s: served %" PRIu64 " batches (%" PRIu64 " rows, %" PRIu64
            " assignments), %" PRIu64 " errors; wire in %" PRIu64 " B, out %" PRIu64
            " B; expert weights read %" PRIu64 " B; compute %.3f s\n",
            n->node_id, t.batches, t.rows, t.assignments, n->errors_sent, t.rx_bytes, t.tx_bytes,
            t.weight_bytes, (double)t.compute_ns * 1e-9);
    double per = t.batches ? 1e-3 / (double)t.batches : 0.0;
    fprintf(stderr,
            "expert-node %s: per batch (us): receive %.1f, parse+check+group %.1f, compute %.1f, "
            "encode %.1f, send %.1f\n",
            n->node_id, (double)n->t_recv * per, (double)n->t_handle * per,
            (double)n->t_compute * per, (double)n->t_encode * per, (double)n->t_send * per);
    wr_relay_stats g = wr_relay_get_stats(n->relay);
    fprintf(stderr,
            "expert-node %s: peers: %" PRIu64 " connection(s), %" PRIu64 " cut off at a limit "
            "(peer %" PRIu64 " MiB, all %" PRIu64 " MiB), most held at once %" PRIu64 " B; %" PRIu64
            " reply(ies) dropped, %" PRIu64 " request(s) discarded\n",
            n->node_id, g.connections, g.cut, n->opts.peer_limit >> 20, n->opts.recv_limit >> 20,
            g.peak_held, n->replies_dropped, n->requests_discarded);
    fprintf(stderr,
            "expert-node %s: executions with several clients' rows: %" PRIu64 " of %" PRIu64
            ", with %" PRIu64 " requests\n",
            n->node_id, n->groups_shared, n->groups_run, n->requests_shared);
    if (n->opts.group_window_us)
        fprintf(stderr,
                "expert-node %s: groups held for another coordinator's rows: %" PRIu64
                ", requests that joined them: %" PRIu64 ", holds that gave up on one: %" PRIu64
                ", held %.3f s in all\n",
                n->node_id, n->held_groups, n->held_joined, n->held_missed,
                (double)n->held_ns * 1e-9);
    if (n->zap) {
        unsigned long ok, no;
        wr_zap_counts(n->zap, &ok, &no);
        fprintf(stderr, "expert-node %s: CURVE: %lu client(s) admitted, %lu refused\n", n->node_id,
                ok, no);
    }
}

en_node_timing en_node_get_timing(const en_node *n) {
    return (en_node_timing){.batches = wr_stats_sum(&n->stats, -1, -1).batches,
                            .recv_ns = n->t_recv,
                            .handle_ns = n->t_handle,
                            .compute_ns = n->t_compute,
                            .encode_ns = n->t_encode,
                            .send_ns = n->t_send};
}

int en_node_serve(en_node *n, mw_err *err) {
    /* The banner first: whoever waits for the ready file finds it in the log. */
    if (!n->opts.quiet)
        fprintf(stderr,
                "expert-node %s: serving %zu experts (%s of %d layers × %d) of %s on %s, %s, "
                "%d thread(s), %s%s%s; model fingerprint %s\n",
                n->node_id, vx_expert_set_count(&n->owned), n->spec, n->n_layers, n->n_experts,
                n->opts.vindex, n->endpoint, n->backend, n->opts.threads,
                n->zap ? "CURVE, admitting the keys of " : "no CURVE", n->zap ? n->allow.path : "",
                n->zap             ? ""
                : n->opts.insecure ? " (--insecure)"
                                   : "",
                n->fingerprint);
    if (write_ready_file(n, err)) return -1;
    mw_notify_status("serving %zu experts on %s", vx_expert_set_count(&n->owned), n->endpoint);
    mw_notify("READY=1");
    /* with a service manager's watchdog, the loop wakes at least twice per interval to say it
     * is alive: a node stuck in a round misses it and is restarted */
    const int wd_ms = (int)(mw_notify_watchdog_usec() / 2000);
    int64_t next_wd = mw_now_ms() + wd_ms;
    int rc = 0;
    while (!atomic_load(&n->stopping)) {
        if (wd_ms && mw_now_ms() >= next_wd) {
            mw_notify("WATCHDOG=1");
            next_wd = mw_now_ms() + wd_ms;
        }
        /* requests deferred to this round: do not sleep; a held group: not past its wait (the
         * poll counts whole ms, the last one is napped in short steps) */
        int timeout = en__clients_pending(n) ? 0 : wd_ms ? wd_ms : -1;
        uint64_t nap = 0;
        if (n->wake_at) {
            const uint64_t now = mw_now_ns();
            const uint64_t left = n->wake_at > now ? n->wake_at - now : 0;
            if (left < 1000000) {
                timeout = 0;
                nap = left < 50000 ? left : 50000;
            } else if (timeout < 0 || (uint64_t)timeout > left / 1000000) {
                timeout = (int)(left / 1000000);
            }
        }
        /* The socket's descriptor signals only what comes after it was last read until EAGAIN
         * (wr_socket_fd), and the replies' sends may have taken a signal since: one look at its
         * events first, then a sleep on the descriptor and the wake pipe (zmq_poll would look at
         * the events before and after the sleep too: two more system calls per request). */
        int events = 0;
        size_t len = sizeof events;
        if (zmq_getsockopt(n->router, ZMQ_EVENTS, &events, &len) != 0) {
            if (errno == EINTR) continue;
            rc = mw_errf(err, "poll: %s", zmq_strerror(errno));
            break;
        }
        struct pollfd fds[2] = {{wr_socket_fd(n->router), POLLIN, 0}, {n->wake[0], POLLIN, 0}};
        bool in = events & ZMQ_POLLIN;
        if (!in) {
            wr_relay_waiting(n->relay, true);
            const int polled = poll(fds, 2, timeout);
            wr_relay_waiting(n->relay, false);
            if (polled < 0) {
                if (errno == EINTR) continue;
                rc = mw_errf(err, "poll: %s", strerror(errno));
                break;
            }
            if (!polled && nap) {
                const struct timespec t = {0, (long)nap};
                nanosleep(&t, NULL);
            }
            if (fds[1].revents & POLLIN) break;
            in = fds[0].revents != 0;
        }
        /* A request is in: the workers get up now, while it is received and parsed, instead of
         * when the first kernel starts (a wake-up costs tens of microseconds). */
        if (in || en__clients_pending(n)) kn_pool_wake(n->pool);
        /* A round: first what clients left waiting in their queues (a quota each), then what
         * is queued in the socket, up to one round, then execute it. */
        en__clients_new_round(n);
        take_deferred(n);
        while (round_open(n)) {
            mw_err e;
            uint64_t t0 = mw_now_ns();
            if (wr_recv(n->router, &n->rx, true, ZMQ_DONTWAIT, &e) != 0) {
                if (errno == EAGAIN) wr_relay_idle(n->relay);
                if (errno == EAGAIN || errno == EINTR) break;
                rc = mw_errf(err, "%s", e.msg);
                goto out;
            }
            n->rx_at = mw_now_ns();
            n->t_recv += n->rx_at - t0;
            admit(n);
        }
        if (n->n_req) execute_round(n);
        /* The next batch is a network round trip away at best: the workers sleep meanwhile
         * instead of spinning on a core the coordinator (or another node) is computing on. */
        kn_pool_park(n->pool);
    }
out:
    /* held groups are not left unanswered: the stop runs them (round_open is false now) */
    if (n->n_req && atomic_load(&n->stopping)) execute_round(n);
    mw_notify("STOPPING=1");
    en__clients_flush(n);
    print_summary(n);
    if (n->opts.ready_file) unlink(n->opts.ready_file);
    return rc;
}
