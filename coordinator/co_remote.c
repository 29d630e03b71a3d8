/* coordinator/co_remote.c — the remote expert backend (see co_remote.h): its lifetime and one
 * layer's story, run(): split the rows by owning node, pack every node's batches, send them all,
 * wait for every reply (deadline, disconnects), combine in a fixed order. The handshake and the
 * ownership map are in co_remote_handshake.c, which replica serves an assignment in
 * co_remote_share.c, the accounting and the report in co_remote_stats.c. */
#include "coordinator/co_remote.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "coordinator/co_loopback.h"
#include "coordinator/co_remote_internal.h"
#include "util/mw_grow.h"
#include "util/mw_platform.h"
#include "util/mw_time.h"
#include "wire/wr_zmq.h"

/* ---- split ---------------------------------------------------------------------------------- */

/* Work w, started empty for `node` when w == n_works (its buffers are kept across layers). */
static co__work *work_at(co__remote *r, int w, int node) {
    if (w == r->n_works) {
        if (w == r->n_works_alloc) {
            if (mw_grow((void **)&r->works, &r->works_cap, (size_t)w + 1, sizeof *r->works))
                return NULL;
            memset(&r->works[w], 0, sizeof r->works[w]);
            r->n_works_alloc++;
        }
        r->works[w].node = node;
        r->works[w].n_rows = r->works[w].n_assign = 0;
        r->n_works++;
    }
    return &r->works[w];
}

/* Adds batch row t to work k unless it is already its last row. Only its index: the row is
 * encoded straight from the batch when the work is packed (wr_batch.x_rows). */
static int take_row(co__work *k, int64_t t) {
    if (k->n_rows && k->rows[k->n_rows - 1] == (int32_t)t) return 0;
    if (mw_grow((void **)&k->rows, &k->rows_cap, (size_t)k->n_rows + 1, sizeof *k->rows)) return -1;
    k->rows[k->n_rows++] = (int32_t)t;
    return 0;
}

/* Appends selection s = t·k + j (expert e, weight) to work k. Rows must come in ascending order. */
static int take_assignment(co__work *k, int64_t t, int64_t s, int32_t e, float weight) {
    if (take_row(k, t) ||
        mw_grow((void **)&k->assign, &k->assign_cap, (size_t)k->n_assign + 1, sizeof *k->assign) ||
        mw_grow((void **)&k->src, &k->src_cap, (size_t)k->n_assign + 1, sizeof *k->src))
        return -1;
    k->assign[k->n_assign] = (wr_assign){(int32_t)(k->n_rows - 1), e, weight};
    k->src[k->n_assign++] = s;
    return 0;
}

/* The experts of this batch that no live node owns, as "layer:e0-e1, ..." (for messages). */
static void lost_experts(const co__remote *r, const md_moe_batch *b, char *out, size_t cap) {
    size_t len = 0;
    out[0] = '\0';
    for (int e = 0; e < r->o.n_experts; e++) {
        if (co__remote_route(r, b->layer, e) >= 0) continue;
        bool used = false;
        for (int64_t s = 0; s < b->T * b->k && !used; s++) used = b->experts[s] == e;
        if (!used) continue;
        if (len + 16 < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%d:%d", len ? ", " : "", b->layer, e);
    }
}

/* Which down nodes own any of this batch's lost experts, for the message. */
static void lost_owners(const co__remote *r, char *out, size_t cap) {
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < r->o.n_nodes; i++)
        if (r->nodes[i].down && len + 64 < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s is down (%s)", len ? "; " : "",
                                    r->nodes[i].name, r->nodes[i].why);
}

/* Notes which rows of the batch need an expert no live node owns, for the caller to fail only
 * the requests they belong to (row_lost). */
static void mark_lost_rows(co__remote *r, const md_moe_batch *b) {
    if (mw_grow((void **)&r->lost_rows, &r->lost_cap, (size_t)b->T, 1)) return;
    for (int64_t t = 0; t < b->T; t++) {
        r->lost_rows[t] = 0;
        for (int j = 0; j < b->k; j++)
            if (co__remote_route(r, b->layer, b->experts[t * b->k + j]) < 0) r->lost_rows[t] = 1;
    }
    r->n_lost_rows = b->T;
}

/* md_expert_backend.row_skipped: what split counted for the row over the last pass. */
static uint32_t row_skipped(const md_expert_backend *be, int64_t row) {
    const co__remote *r = be->impl;
    return row >= 0 && (size_t)row < r->row_skips_cap ? r->row_skips[row] : 0;
}

/* md_expert_backend.row_lost: what mark_lost_rows noted for the last call. */
static bool row_lost(const md_expert_backend *be, int64_t row) {
    const co__remote *r = be->impl;
    return row >= 0 && row < r->n_lost_rows && r->lost_rows[row];
}

/* Splits the batch into the live nodes' works (selection order kept). Experts no live node owns
 * end the call with an error naming the lost nodes and experts, or with --on-missing skip are left
 * out and the row's remaining gate weights renormalised. */
static int distribute(co__remote *r, const md_moe_batch *b, mw_err *err) {
    const int64_t n_sel = b->T * b->k;
    r->n_works = 0;
    for (int i = 0; i < r->o.n_nodes; i++) {
        if (!work_at(r, i, i)) return mw_errf(err, "out of memory");
    }
    if (mw_grow((void **)&r->weights, &r->weights_cap, (size_t)n_sel, sizeof *r->weights) ||
        mw_grow((void **)&r->chosen, &r->chosen_cap, (size_t)b->k, sizeof *r->chosen))
        return mw_errf(err, "out of memory");
    co__share_begin(r);
    memcpy(r->weights, b->weights, (size_t)n_sel * sizeof *r->weights);
    if (mw_grow((void **)&r->row_skips, &r->row_skips_cap, (size_t)b->T, sizeof *r->row_skips))
        return mw_errf(err, "out of memory");
    if (b->layer <= r->skip_layer) /* layers run in ascending order: a new forward pass */
        memset(r->row_skips, 0, r->row_skips_cap * sizeof *r->row_skips);
    r->skip_layer = b->layer;
    for (int64_t t = 0; t < b->T; t++) {
        float kept = 0, all = 0;
        int skipped = 0;
        for (int j = 0; j < b->k; j++) {
            int64_t s = t * b->k + j;
            int32_t e = b->experts[s];
            if (e < 0 || e >= r->o.n_experts)
                return mw_errf(err, "layer %d: row %lld selected expert %d of %d", b->layer,
                               (long long)t, e, r->o.n_experts);
            all += b->weights[s];
            if (co__remote_route(r, b->layer, e) >= 0) {
                kept += b->weights[s];
                continue;
            }
            if (!r->o.on_missing_skip) {
                mark_lost_rows(r, b);
                char lost[512], owners[1024];
                lost_experts(r, b, lost, sizeof lost);
                lost_owners(r, owners, sizeof owners);
                return mw_errf(err, "layer %d: experts %s have no live owner%s%s", b->layer, lost,
                               owners[0] ? ": " : "", owners);
            }
            r->weights[s] = 0; /* skipped */
            skipped++;
        }
        if (skipped) {
            if (!r->skipped)
                fprintf(stderr,
                        "coordinator: layer %d: experts with no live owner are skipped and the "
                        "gate weights renormalised over the reachable ones (--on-missing skip); "
                        "the count is in the report\n",
                        b->layer);
            r->skipped += (uint64_t)skipped;
            r->row_skips[t] += (uint32_t)skipped;
            for (int j = 0; j < b->k; j++) /* renormalised over the reachable experts */
                if (r->weights[t * b->k + j] != 0 && kept > 0)
                    r->weights[t * b->k + j] = r->weights[t * b->k + j] * (all / kept);
        }
        for (int j = 0; j < b->k; j++) {
            int64_t s = t * b->k + j;
            int ni = r->chosen[j] = co__share_pick(r, b, t, j, r->chosen);
            if (ni < 0) continue;
            co__share_took(r, ni);
            if (take_assignment(&r->works[ni], t, s, b->experts[s], r->weights[s]))
                return mw_errf(err, "out of memory");
        }
    }
    co__share_end(r, b->layer);
    return 0;
}

/* ---- pack and send -------------------------------------------------------------------------- */

/* The packing buffers of piece q (kept across layers). */
static wr_out *piece_out(co__remote *r, int q) {
    if (mw_grow((void **)&r->outs, &r->outs_cap, (size_t)q + 1, sizeof *r->outs)) return NULL;
    for (; r->outs_init <= (size_t)q; r->outs_init++) wr_out_init(&r->outs[r->outs_init]);
    return &r->outs[q];
}

/* The assignments of work k's piece [r0, r1) × [a0, a1), rows counted from the piece's first. */
static const wr_assign *piece_assign(co__remote *r, const co__work *k, int64_t r0, int64_t a0,
                                     int64_t a1) {
    if (!r0) return k->assign + a0;
    if (mw_grow((void **)&r->scratch, &r->scratch_cap, (size_t)(a1 - a0), sizeof *r->scratch))
        return NULL;
    for (int64_t q = a0; q < a1; q++)
        r->scratch[q - a0] =
            (wr_assign){(int32_t)(k->assign[q].row - r0), k->assign[q].expert, k->assign[q].weight};
    return r->scratch;
}

/* Packs work wi's rows [r0, r1) with their assignments [a0, a1) as the next piece. */
static int pack_piece(co__remote *r, const md_moe_batch *b, int wi, int64_t r0, int64_t r1,
                      int64_t a0, int64_t a1, mw_err *err) {
    co__work *k = &r->works[wi];
    co__node *n = &r->nodes[k->node];
    const wr_assign *a = piece_assign(r, k, r0, a0, a1);
    wr_out *o = piece_out(r, r->n_pieces);
    if (!a || !o ||
        mw_grow((void **)&r->pieces, &r->pieces_cap, (size_t)r->n_pieces + 1, sizeof *r->pieces))
        return mw_errf(err, "out of memory");
    co__piece *p = &r->pieces[r->n_pieces++];
    *p = (co__piece){
        .node = k->node, .work = wi, .seq = ++r->seq, .r0 = r0, .r1 = r1, .a0 = a0, .a1 = a1};
    wr_msg m = {.kind = WR_MSG_EXPERT_BATCH,
                .seq = p->seq,
                .batch = {.layer = (uint32_t)b->layer,
                          .rows = (uint32_t)(r1 - r0),
                          .width = (uint32_t)b->width,
                          .n_assign = (uint32_t)(a1 - a0),
                          .mode = r->o.exact ? WR_MODE_EXACT : WR_MODE_PARTIAL,
                          .reply = r->o.codec,
                          .numerics = (wr_numerics)b->numerics,
                          .x = b->x,
                          .assign = a,
                          .x_rows = k->rows + r0}};
    uint64_t t0 = mw_now_ns();
    if (wr_pack(o, &m, r->o.codec, err)) return mw_err_wrap(err, "%s", n->name);
    r->acct.phase_ns[CO__ENCODE] += mw_now_ns() - t0;
    co__acct_sent(&r->acct, k->node, b->layer, o->bytes, r1 - r0, a1 - a0);
    n->pending++;
    return 0;
}

/* Cuts works [w0, n_works) into pieces of at most their node's capacity rows and packs them. */
static int pack_works(co__remote *r, const md_moe_batch *b, int w0, mw_err *err) {
    for (int wi = w0; wi < r->n_works; wi++) {
        co__work *k = &r->works[wi];
        if (!k->n_rows) continue;
        const co__node *n = &r->nodes[k->node];
        int64_t out_rows = r->o.exact ? k->n_assign : k->n_rows;
        if (mw_grow((void **)&k->y, &k->y_cap, (size_t)(out_rows * b->width), sizeof *k->y))
            return mw_errf(err, "out of memory");
        for (int64_t r0 = 0, a0 = 0; r0 < k->n_rows;) {
            int64_t r1 = r0 + n->capacity < k->n_rows ? r0 + n->capacity : k->n_rows, a1 = a0;
            while (a1 < k->n_assign && k->assign[a1].row < r1) a1++;
            if (pack_piece(r, b, wi, r0, r1, a0, a1, err)) return -1;
            r0 = r1;
            a0 = a1;
        }
    }
    return 0;
}

/* Sends pieces [q0, n_pieces) back to back: the first send wakes the ZeroMQ I/O thread and,
 * through it, the nodes, and on a shared machine any of them may take this thread's core;
 * nothing is left to encode by then. A node that cannot take its piece (no connection) is lost:
 * 1 is returned for the caller to fail it over. */
static int send_pieces(co__remote *r, const md_moe_batch *b, int q0, mw_err *err) {
    int lost = 0;
    for (int q = q0; q < r->n_pieces; q++) {
        co__piece *p = &r->pieces[q];
        co__node *n = &r->nodes[p->node];
        if (n->down) continue; /* lost by an earlier piece of this round */
        p->t_send = mw_now_ns();
        if (wr_send(n->sock, NULL, 0, &r->outs[q], ZMQ_DONTWAIT, err)) {
            char why[128];
            snprintf(why, sizeof why, "not connected (layer %d)", b->layer);
            co__acct_failed(&r->acct, p->node);
            co__remote_down(r, p->node, why);
            lost = 1;
            continue;
        }
        r->acct.phase_ns[CO__SEND] += mw_now_ns() - p->t_send;
    }
    return lost;
}

/* ---- failover ------------------------------------------------------------------------------- */

/* Node i is lost with pieces in flight: the assignments of each unanswered piece go to rescue
 * works of live replicas (one per replica), which are packed and sent at once. The answered
 * pieces of node i stay. Batch invariance and the fixed combine order keep the result: bit for
 * bit in exact mode, within rounding of the partial sums' grouping in partial mode. */
static int fail_over(co__remote *r, const md_moe_batch *b, int i, mw_err *err) {
    const int w0 = r->n_works, q0 = r->n_pieces, n_pieces = r->n_pieces;
    for (int q = 0; q < n_pieces; q++) {
        co__piece *p = &r->pieces[q];
        if (p->node != i || p->done || p->lost) continue;
        p->lost = true;
        const co__work *k = &r->works[p->work];
        for (int64_t a = p->a0; a < p->a1; a++) {
            const int32_t e = k->assign[a].expert;
            const int64_t t = k->rows[k->assign[a].row];
            int to = co__remote_route(r, b->layer, e);
            if (to < 0) {
                if (r->o.on_missing_skip) continue; /* counted when the next layer splits */
                mark_lost_rows(r, b);
                char lost[512], owners[1024];
                lost_experts(r, b, lost, sizeof lost);
                lost_owners(r, owners, sizeof owners);
                return mw_errf(err, "layer %d: experts %s have no live owner: %s", b->layer, lost,
                               owners);
            }
            int wi = w0;
            while (wi < r->n_works && r->works[wi].node != to) wi++;
            co__work *rk = work_at(r, wi, to);
            if (!rk) return mw_errf(err, "out of memory");
            /* rows of a failed piece come in ascending order, pieces in row order */
            if (take_assignment(rk, t, k->src[a], e, k->assign[a].weight))
                return mw_errf(err, "out of memory");
        }
        r->nodes[i].pending--;
    }
    for (int wi = w0; wi < r->n_works; wi++) r->failovers++;
    if (pack_works(r, b, w0, err)) return -1;
    if (send_pieces(r, b, q0, err) == 1) {
        /* a replica was lost too while taking over: over again */
        for (int j = 0; j < r->o.n_nodes; j++)
            if (r->nodes[j].down && r->nodes[j].pending && fail_over(r, b, j, err)) return -1;
    }
    return 0;
}

/* ---- wait ----------------------------------------------------------------------------------- */

/* Checks a reply against its piece and stores its rows. */
static int take_reply(co__remote *r, int ni, const md_moe_batch *b, const wr_msg *m, mw_err *err) {
    co__node *n = &r->nodes[ni];
    if (n->down) { /* a node being re-admitted, or a late answer of a lost one */
        co__remote_rejoin_msg(r, ni, m);
        return 0;
    }
    if (m->kind == WR_MSG_ERROR) {
        co__acct_failed(&r->acct, ni);
        return mw_errf(err, "%s failed layer %d: %s: %s", n->name, b->layer,
                       wr_code_name(m->error.code), m->error.message);
    }
    if (m->kind != WR_MSG_PARTIAL_BATCH) return 0; /* a stray Pong or Welcome */
    co__piece *p = NULL;
    for (int q = 0; q < r->n_pieces && !p; q++)
        if (r->pieces[q].node == ni && r->pieces[q].seq == m->seq && !r->pieces[q].done &&
            !r->pieces[q].lost)
            p = &r->pieces[q];
    if (!p) { /* a parked call's (its state taken in for the reply), or one abandoned earlier */
        co__call *c = co__call_of_piece(r, ni, m->seq);
        if (!c) return 0;
        co__call_swap(r, c);
        int rc = take_reply(r, ni, r->call_batch, m, err);
        co__call_swap(r, c);
        return rc;
    }
    co__work *k = &r->works[p->work];
    const wr_partial *y = &m->partial;
    int64_t off = r->o.exact ? p->a0 : p->r0, rows = r->o.exact ? p->a1 - p->a0 : p->r1 - p->r0;
    if ((int)y->layer != b->layer || (int64_t)y->width != b->width || (int64_t)y->rows != rows ||
        (y->mode == WR_MODE_EXACT) != r->o.exact)
        return mw_errf(err,
                       "%s answered layer %d seq %" PRIu64 " with %u rows × %u of layer %u, "
                       "expected %lld × %lld of layer %d",
                       n->name, b->layer, m->seq, y->rows, y->width, y->layer, (long long)rows,
                       (long long)b->width, b->layer);
    if (rows == (r->o.exact ? k->n_assign : k->n_rows) &&
        y->y == (const float *)(const void *)r->in.rows.p) {
        /* the work's only piece (mostly): the work takes the buffer the rows were decoded
         * into, and the parser the work's old one, instead of copying every row */
        float *old = k->y;
        const size_t cap = k->y_cap;
        k->y = (float *)(void *)r->in.rows.p;
        k->y_cap = r->in.rows.cap / sizeof(float);
        r->in.rows = (wr_buf){.p = (uint8_t *)old, .cap = cap * sizeof(float)};
    } else {
        memcpy(k->y + off * b->width, y->y, (size_t)(rows * b->width) * sizeof(float));
    }
    uint64_t rtt = mw_now_ns() - p->t_send;
    co__acct_reply(&r->acct, ni, b->layer, r->in.bytes, y, rtt);
    p->done = true;
    n->pending--;
    uint64_t node_ns = y->queue_ns + y->compute_ns;
    r->last_tail = rtt > node_ns ? rtt - node_ns : 0;
    return 0;
}

/* Receives and takes every message node i has ready. */
static int read_replies(co__remote *r, int i, const md_moe_batch *b, mw_err *err) {
    co__node *n = &r->nodes[i];
    for (;;) {
        if (wr_recv(n->sock, &r->rx, false, ZMQ_DONTWAIT, err)) {
            if (errno == EAGAIN) return 0;
            return mw_err_wrap(err, "%s", n->name);
        }
        wr_msg m;
        wr_code code;
        if (wr_parse(&r->in, r->rx.parts, r->rx.n_parts, r->rx.truncated, &m, &code, err)) {
            if (n->down) continue; /* a lost node's garbage changes nothing */
            co__acct_failed(&r->acct, i);
            return mw_err_wrap(err, "%s sent a bad reply for layer %d", n->name, b->layer);
        }
        if (take_reply(r, i, b, &m, err)) return -1;
    }
}

/* The earliest deadline of a piece in flight. */
static uint64_t next_deadline(const co__remote *r) {
    uint64_t d = UINT64_MAX;
    const uint64_t ms = (uint64_t)r->o.deadline_ms * 1000000ull;
    for (int q = 0; q < r->n_pieces; q++) {
        const co__piece *p = &r->pieces[q];
        if (!p->done && !p->lost && p->t_send + ms < d) d = p->t_send + ms;
    }
    return d;
}

/* Waits for every piece. A node that disconnects (its heartbeats unanswered: dead, hung or cut off
 * the network) or lets a piece miss the deadline is lost, and its unanswered pieces go to
 * replicas. It sleeps in poll on the sockets' and monitors' descriptors (wr_socket_fd): a wake-up
 * costs one system call and a receive per socket that signalled, not a look at all 2N sockets
 * before and after the sleep. Sends may have taken a reply's signal (this call's, a fail-over's,
 * the other micro-batch's), so every socket is read until it has nothing first, and again after a
 * fail-over; the monitors are only ever read until they have nothing (co__remote_read_monitor). */
static int wait_all(co__remote *r, const md_moe_batch *b, mw_err *err) {
    const int N = r->o.n_nodes;
    struct pollfd fds[2 * N + 1];
    bool sweep = true, live = true; /* live: the liveness channel's pipe may have news */
    for (;;) {
        if (live && co__live_check(r)) /* a node fell silent: its pieces go to replicas now */
            for (int i = 0; i < N; i++)
                if (r->nodes[i].down && r->nodes[i].pending && fail_over(r, b, i, err)) return -1;
        int left = 0;
        for (int i = 0; i < N; i++) left += r->nodes[i].down ? 0 : r->nodes[i].pending;
        if (!left) return 0;
        uint64_t t = mw_now_ns(), deadline = next_deadline(r);
        if (t >= deadline) {
            for (int q = 0; q < r->n_pieces; q++) {
                co__piece *p = &r->pieces[q];
                if (p->done || p->lost || p->t_send + (uint64_t)r->o.deadline_ms * 1000000ull > t)
                    continue;
                char why[160];
                snprintf(why, sizeof why, "no answer for layer %d within the %d ms deadline",
                         b->layer, r->o.deadline_ms);
                co__acct_failed(&r->acct, p->node);
                co__remote_down(r, p->node, why);
                if (fail_over(r, b, p->node, err)) return -1;
                sweep = true;
            }
            continue;
        }
        for (int i = 0; i < N; i++) {
            const bool gone = r->nodes[i].drained; /* no sockets: nothing to poll */
            fds[2 * i] = (struct pollfd){gone ? -1 : wr_socket_fd(r->nodes[i].sock), POLLIN, 0};
            fds[2 * i + 1] = (struct pollfd){gone ? -1 : wr_socket_fd(r->nodes[i].mon), POLLIN, 0};
            if (sweep && !gone) fds[2 * i].revents = POLLIN; /* read it, signalled or not */
        }
        fds[2 * N] = (struct pollfd){co__live_fd(r), POLLIN, 0};
        uint64_t t1 = t;
        live = false;
        if (!sweep) {
            long wait = (long)((deadline - t) / 1000000ull) + 1;
            int rc = poll(fds, (nfds_t)(2 * N + 1), wait > INT32_MAX ? INT32_MAX : (int)wait);
            t1 = mw_now_ns();
            r->acct.phase_ns[CO__WAIT] += t1 - t;
            if (rc < 0) {
                if (errno == EINTR) continue;
                return mw_errf(err, "poll: %s", strerror(errno));
            }
            live = fds[2 * N].revents != 0;
            /* Every reply still missing has signalled: the trunk resumes after decoding and
             * combining them, so its workers get up now, in parallel with that. */
            bool all_in = true;
            for (int i = 0; i < N && all_in; i++)
                all_in = !r->nodes[i].pending || r->nodes[i].down || fds[2 * i].revents;
            if (all_in) kn_pool_wake(r->o.pool);
        }
        sweep = false;
        for (int i = 0; i < N; i++) {
            co__node *n = &r->nodes[i];
            const bool was_down = n->down;
            if (fds[2 * i + 1].revents && co__remote_read_monitor(r, i))
                co__remote_down(r, i, "disconnected");
            if (fds[2 * i].revents && read_replies(r, i, b, err)) return -1;
            if (n->down && !was_down) co__acct_failed(&r->acct, i);
            if (n->down && n->pending) {
                if (fail_over(r, b, i, err)) return -1;
                sweep = true;
            }
        }
        r->acct.phase_ns[CO__DECODE] += mw_now_ns() - t1;
    }
}

/* ---- combine -------------------------------------------------------------------------------- */

/* out = the batch's expert output, combined in a fixed order: the answered pieces in work order
 * (the nodes' own works in node order, then rescue works) in partial mode; selection order in
 * exact mode, exactly as the in-process executor reduces. */
static int combine(co__remote *r, const md_moe_batch *b, float *out, mw_err *err) {
    const int64_t w = b->width, n_sel = b->T * b->k;
    memset(out, 0, (size_t)(b->T * w) * sizeof(float));
    if (!r->o.exact) {
        for (int wi = 0; wi < r->n_works; wi++)
            for (int q = 0; q < r->n_pieces; q++) {
                const co__piece *p = &r->pieces[q];
                if (p->work != wi || !p->done) continue;
                const co__work *k = &r->works[wi];
                for (int64_t x = p->r0; x < p->r1; x++)
                    md_moe_accumulate(out + (int64_t)k->rows[x] * w, k->y + x * w, 1.0f, w);
            }
        return 0;
    }
    if (mw_grow((void **)&r->yptr, &r->yptr_cap, (size_t)n_sel, sizeof *r->yptr))
        return mw_errf(err, "out of memory");
    memset(r->yptr, 0, (size_t)n_sel * sizeof *r->yptr);
    for (int q = 0; q < r->n_pieces; q++) {
        const co__piece *p = &r->pieces[q];
        if (!p->done) continue;
        const co__work *k = &r->works[p->work];
        for (int64_t a = p->a0; a < p->a1; a++) r->yptr[k->src[a]] = k->y + a * w;
    }
    for (int64_t t = 0; t < b->T; t++)
        for (int j = 0; j < b->k; j++)
            if (r->yptr[t * b->k + j]) /* NULL: skipped (--on-missing skip) */
                md_moe_accumulate(out + t * w, r->yptr[t * b->k + j], r->weights[t * b->k + j], w);
    return 0;
}

/* ---- one layer ------------------------------------------------------------------------------ */

/* The first half: split, pack and send; the trunk computes what it can (the shared experts) while
 * the batches are on the wire and the nodes work. */
static int submit(md_expert_backend *be, const md_moe_batch *b, mw_err *err) {
    co__remote *r = be->impl;
    if (b->layer < 0 || b->layer >= r->o.n_layers || b->width != r->o.width || b->T < 0 ||
        b->k < 1 || b->k > r->o.n_experts || !r->layer_moe[b->layer])
        return mw_errf(err, "remote experts: bad batch (layer %d, %lld rows × %lld, k %d)",
                       b->layer, (long long)b->T, (long long)b->width, b->k);
    if (b->T == 0) return 0;
    if (r->in_flight) { /* another call is in flight: parked while this one goes out */
        co__call *idle = co__call_idle(r);
        if (!idle)
            return mw_errf(err, "remote experts: more than %d layer calls in flight", CO_CALLS);
        co__call_swap(r, idle);
    }
    r->in_flight = false;
    r->call_batch = b;
    co__remote_tend(r);
    r->n_lost_rows = 0;
    r->t_submit = mw_now_ns();
    for (int i = 0; i < r->o.n_nodes; i++) r->nodes[i].pending = 0;
    if (distribute(r, b, err)) return -1;
    r->acct.phase_ns[CO__SPLIT] += mw_now_ns() - r->t_submit;
    r->n_pieces = 0;
    if (pack_works(r, b, 0, err)) return -1;
    if (send_pieces(r, b, 0, err) == 1)
        for (int i = 0; i < r->o.n_nodes; i++)
            if (r->nodes[i].down && r->nodes[i].pending && fail_over(r, b, i, err)) return -1;
    r->in_flight = true;
    return 0;
}

/* The second half: every reply, combined in the fixed order. */
static int wait(md_expert_backend *be, const md_moe_batch *b, float *out, mw_err *err) {
    co__remote *r = be->impl;
    if (!r->in_flight || r->call_batch != b) {
        co__call *c = co__call_of_batch(r, b);
        if (c) co__call_swap(r, c);
    }
    if (!r->in_flight || r->call_batch != b) return 0; /* an empty batch */
    r->in_flight = false;
    /* pieces on nodes lost while another call was awaited go to replicas first */
    for (int i = 0; i < r->o.n_nodes; i++)
        if (r->nodes[i].down && r->nodes[i].pending && fail_over(r, b, i, err)) return -1;
    /* The trunk's pool has nothing to do until the replies are in: its workers sleep instead of
     * spinning on the cores the nodes are computing on. */
    kn_pool_park(r->o.pool);
    const uint64_t t0 = r->t_submit;
    if (wait_all(r, b, err)) return -1;
    const uint64_t t1 = mw_now_ns();
    if (combine(r, b, out, err)) return -1;
    const uint64_t t2 = mw_now_ns();
    r->acct.phase_ns[CO__COMBINE] += t2 - t1;
    co__acct_layer(&r->acct, b->layer, b->T, t2 - t0, r->last_tail);
    return 0;
}

static int run(md_expert_backend *be, const md_moe_batch *b, float *out, mw_err *err) {
    if (b->T == 0) return 0; /* (out has no rows) */
    return submit(be, b, err) || wait(be, b, out, err) ? -1 : 0;
}

/* ---- lifetime ------------------------------------------------------------------------------- */

static void free_node(co__node *n) {
    co__remote_close_node(n);
    free(n->owned);
}

static void free_work(co__work *k) {
    free(k->rows);
    free(k->assign);
    free(k->src);
    free(k->y);
}

/* The backend's own layer call's buffers (each parked call's in turn, co__calls_free). */
static void free_call_state(co__remote *r) {
    free(r->pieces);
    for (size_t q = 0; q < r->outs_init; q++) wr_out_free(&r->outs[q]);
    free(r->outs);
    free(r->scratch);
    free(r->yptr);
    for (int k = 0; k < r->n_works_alloc; k++) free_work(&r->works[k]);
    free(r->works);
    free(r->weights);
    r->pieces = NULL;
    r->outs = NULL;
    r->outs_init = 0;
    r->scratch = NULL;
    r->yptr = NULL;
    r->works = NULL;
    r->n_works_alloc = 0;
    r->weights = NULL;
}

static void destroy(md_expert_backend *be) {
    if (!be) return;
    co__remote *r = be->impl;
    if (r) {
        co__live_stop(r);
        if (r->nodes) co__calls_free(r, free_call_state);
        for (int i = 0; r->nodes && i < r->o.n_nodes; i++) free_node(&r->nodes[i]);
        wr_rx_free(&r->rx);
        if (r->zctx && r->own_zctx) zmq_ctx_term(r->zctx);
        wr_in_free(&r->in);
        wr_out_free(&r->out);
        co__acct_free(&r->acct);
        free(r->nodes);
        free(r->owner);
        free(r->n_owner);
        free_call_state(r);
        free(r->lost_rows);
        free(r->chosen);
        co__share_free(r);
        free(r->row_skips);
        free(r->layer_moe);
        co_loopback_stop(r->loopback); /* its nodes, once no socket is connected to them */
        for (int i = 0; r->endpoints && i < r->o.n_nodes; i++) free(r->endpoints[i]);
        free(r->endpoints);
        memset(&r->key, 0, sizeof r->key);
        free(r);
    }
    free(be);
}

/* n strings copied into an array of cap (>= n) of their own; NULL when memory runs out. */
static char **copy_strings(const char *const *v, int n, int cap) {
    char **c = calloc((size_t)cap, sizeof *c);
    for (int i = 0; c && i < n; i++)
        if (!(c[i] = strdup(v[i]))) {
            while (i-- > 0) free(c[i]);
            free(c);
            c = NULL;
        }
    return c;
}

/* Allocates the backend's state for o's shape, taking the loopback nodes over (also when it
 * returns NULL); the nodes are not contacted yet. */
static co__remote *remote_alloc(const co_remote_opts *o) {
    co__remote *r = calloc(1, sizeof *r);
    if (!r) {
        co_loopback_stop(o->loopback);
        return NULL;
    }
    r->skip_layer = INT32_MAX; /* the first layer call starts a pass */
    r->o = *o;
    r->loopback = o->loopback;
    r->o.loopback = NULL;
    if (o->curve) r->key = *o->curve;
    r->o.curve = o->curve ? &r->key : NULL;
    /* room for nodes that join while serving (co_remote_set_nodes) */
    r->cap_nodes = o->n_nodes + CO_JOIN_ROOM < 1024 ? o->n_nodes + CO_JOIN_ROOM : 1024;
    r->endpoints = copy_strings(o->endpoints, o->n_nodes, r->cap_nodes);
    r->o.endpoints = (const char *const *)r->endpoints;
    r->glu = *o->glu;
    r->o.glu = &r->glu;
    if (r->o.down_ms <= 0) r->o.down_ms = 750;
    size_t cells = (size_t)o->n_layers * (size_t)o->n_experts;
    r->nodes = calloc((size_t)r->cap_nodes, sizeof *r->nodes);
    r->owner = malloc(cells * (size_t)r->cap_nodes * sizeof *r->owner);
    r->n_owner = calloc(cells, sizeof *r->n_owner);
    if ((r->layer_moe = malloc((size_t)o->n_layers)))
        for (int l = 0; l < o->n_layers; l++) r->layer_moe[l] = o->layer_moe ? o->layer_moe[l] : 1;
    wr_out_init(&r->out);
    wr_rx_init(&r->rx);
    wr_limits lim = wr_limits_default();
    lim.max_width = (uint32_t)o->width;
    wr_in_init(&r->in, &lim);
    r->own_zctx = !o->zctx;
    r->zctx = o->zctx ? o->zctx : zmq_ctx_new();
    /* The I/O thread (started with the first socket) is SCHED_BATCH: woken to push a batch out,
     * it takes a free core or waits until this thread blocks in zmq_poll, instead of preempting
     * it before the batches for the other nodes are queued. Only from the default policy: libzmq
     * aborts if the change fails (a real-time caller's priority is invalid for SCHED_BATCH). */
    if (r->zctx && r->own_zctx && sched_getscheduler(0) == SCHED_OTHER && mw_batch_policy() >= 0)
        zmq_ctx_set(r->zctx, ZMQ_THREAD_SCHED_POLICY, mw_batch_policy());
    for (int i = 0; r->nodes && i < o->n_nodes; i++) {
        co__node *n = &r->nodes[i];
        const char *ep = o->endpoints[i], *hash = strchr(ep, '#');
        const int len = hash ? (int)(hash - ep) : (int)strlen(ep);
        snprintf(n->endpoint, sizeof n->endpoint, "%.*s", len, ep);
        if (hash) snprintf(n->key, sizeof n->key, "%s", hash + 1);
        snprintf(n->name, sizeof n->name, "node %d (%s)", i, n->endpoint);
    }
    return r;
}

/* Whether a bad options struct: its loopback nodes stopped, err set. */
static bool bad_opts(const co_remote_opts *o, mw_err *err) {
    if (o->n_nodes < 1 || o->n_nodes > 1024)
        mw_errf(err, "remote experts: %d nodes (1 .. 1024)", o->n_nodes);
    else if (o->n_layers < 1 || o->n_experts < 1 || o->width < 1 || o->deadline_ms < 1 ||
             o->connect_ms < 1 || !wr_dtype_valid(o->codec.dtype))
        mw_errf(err, "remote experts: bad options");
    else if (!o->glu)
        mw_errf(err, "remote experts: the experts' GLU policy is required");
    else if (kn_glu_check(o->glu, err))
        mw_err_wrap(err, "remote experts");
    else
        return false;
    co_loopback_stop(o->loopback);
    return true;
}

int co_remote_new(const co_remote_opts *o, md_expert_backend **out, mw_err *err) {
    *out = NULL;
    if (bad_opts(o, err)) return -1;
    md_expert_backend *be = calloc(1, sizeof *be);
    if (!be) {
        co_loopback_stop(o->loopback);
        return mw_errf(err, "out of memory");
    }
    be->name = "remote";
    be->run = run;
    be->submit = submit;
    be->wait = wait;
    be->row_lost = row_lost;
    be->row_skipped = o->on_missing_skip ? row_skipped : NULL; /* NULL: never skips */
    be->destroy = destroy;
    be->in_flight = CO_CALLS;
    co__remote *r = be->impl = remote_alloc(o);
    if (!r || !r->endpoints || !r->nodes || !r->owner || !r->n_owner || !r->layer_moe || !r->zctx ||
        co__share_init(r) || co__calls_init(r) ||
        co__acct_init(&r->acct, r->cap_nodes, o->n_layers, err)) {
        destroy(be);
        return mw_errf(err, "out of memory");
    }
    co__live_start(r); /* without it, heartbeats alone (said on stderr) */
    for (int i = 0; i < o->n_nodes; i++)
        if (co__remote_connect(r, i, err)) {
            destroy(be);
            return -1;
        }
    if (co__remote_handshake(r, err)) {
        destroy(be);
        return -1;
    }
    for (int i = 0; i < o->n_nodes; i++) { /* the handshake's send timeout no longer applies */
        int t = -1;
        zmq_setsockopt(r->nodes[i].sock, ZMQ_SNDTIMEO, &t, sizeof t);
    }
    *out = be;
    return 0;
}

const char *const *co_remote_endpoints(const md_expert_backend *b, int *n_nodes) {
    const co__remote *r = b->impl;
    *n_nodes = r->o.n_nodes;
    return r->o.endpoints;
}
