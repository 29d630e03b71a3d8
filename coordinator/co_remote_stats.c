/* coordinator/co_remote_stats.c — the remote backend's accounting and its report: movement per
 * node and layer (wire/wr_stats.h), rows and round trip per layer, where a layer call's time goes
 * in the coordinator, and the distribution of the critical path's tail. Dispatch and combine
 * (co_remote.c) only feed it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_remote.h"
#include "coordinator/co_remote_internal.h"

int co__acct_init(co__acct *a, int n_nodes, int n_layers, mw_err *err) {
    memset(a, 0, sizeof *a);
    a->layer_rows = calloc((size_t)n_layers, sizeof *a->layer_rows);
    a->layer_wall = calloc((size_t)n_layers, sizeof *a->layer_wall);
    a->layer_calls = calloc((size_t)n_layers, sizeof *a->layer_calls);
    a->n_nodes = n_nodes;
    a->node_errors = calloc((size_t)n_nodes, sizeof *a->node_errors);
    a->node_rtt = calloc((size_t)n_nodes * (CO_RTT_LOG2 + 1), sizeof *a->node_rtt);
    if (!a->layer_rows || !a->layer_wall || !a->layer_calls || !a->node_errors || !a->node_rtt)
        return mw_errf(err, "out of memory");
    return wr_stats_init(&a->wire, n_nodes, n_layers, err);
}

void co__acct_free(co__acct *a) {
    wr_stats_free(&a->wire);
    free(a->layer_rows);
    free(a->layer_wall);
    free(a->layer_calls);
    free(a->node_errors);
    free(a->node_rtt);
    memset(a, 0, sizeof *a);
}

void co__acct_sent(co__acct *a, int node, int layer, uint64_t bytes, int64_t rows, int64_t assign) {
    wr_counters *c = wr_stats_at(&a->wire, node, layer);
    c->tx_bytes += bytes;
    c->tx_msgs++;
    c->rows += (uint64_t)rows;
    c->assignments += (uint64_t)assign;
}

void co__acct_reply(co__acct *a, int node, int layer, uint64_t bytes, const wr_partial *y,
                    uint64_t rtt_ns) {
    wr_counters *c = wr_stats_at(&a->wire, node, layer);
    c->rx_bytes += bytes;
    c->rx_msgs++;
    c->batches++;
    c->weight_bytes += y->weight_bytes;
    c->compute_ns += y->compute_ns;
    c->queue_ns += y->queue_ns;
    c->rtt_ns += rtt_ns;
    if (rtt_ns > c->rtt_max_ns) c->rtt_max_ns = rtt_ns;
    int bucket = 0;
    while (bucket < CO_RTT_LOG2 && rtt_ns / 1000 >= (1ull << bucket)) bucket++;
    a->node_rtt[(size_t)node * (CO_RTT_LOG2 + 1) + (size_t)bucket]++;
}

void co__acct_failed(co__acct *a, int node) {
    if (node >= 0 && node < a->n_nodes) a->node_errors[node]++;
}

void co__acct_layer(co__acct *a, int layer, int64_t rows, uint64_t wall_ns, uint64_t tail_ns) {
    a->tail_ns += tail_ns;
    const uint64_t tail_us = tail_ns / 1000;
    a->tail_log[a->n_tail++ % CO_TAIL_LOG] = tail_us > UINT32_MAX ? UINT32_MAX : (uint32_t)tail_us;
    a->layer_rows[layer] += rows;
    a->layer_wall[layer] += wall_ns;
    a->layer_calls[layer]++;
}

/* ---- the public read-outs (co_remote.h) ----------------------------------------------------- */

int co_remote_n_nodes(const md_expert_backend *b) {
    return ((const co__remote *)b->impl)->o.n_nodes;
}

int co_remote_max_nodes(const md_expert_backend *b) {
    return ((const co__remote *)b->impl)->cap_nodes;
}

void co_remote_node(const md_expert_backend *b, int i, co_remote_node_info *out) {
    const co__remote *r = b->impl;
    memset(out, 0, sizeof *out);
    if (i >= r->o.n_nodes) return; /* a slot for a node that may join */
    out->endpoint = r->nodes[i].endpoint;
    out->member = !r->nodes[i].drained;
    out->up = !r->nodes[i].down;
    out->errors = r->acct.node_errors[i];
    memcpy(out->rtt_log2, r->acct.node_rtt + (size_t)i * (CO_RTT_LOG2 + 1), sizeof out->rtt_log2);
}

const wr_stats *co_remote_stats(const md_expert_backend *b) {
    return &((const co__remote *)b->impl)->acct.wire;
}

int64_t co_remote_tokens(const md_expert_backend *b) {
    const co__remote *r = b->impl;
    int64_t t = 0;
    for (int l = 0; l < r->o.n_layers; l++)
        if (r->acct.layer_rows[l] > t) t = r->acct.layer_rows[l];
    return t;
}

void co_remote_reset_stats(md_expert_backend *b) {
    co__acct *a = &((co__remote *)b->impl)->acct;
    wr_stats_reset(&a->wire);
    for (int l = 0; l < a->wire.n_layers; l++)
        a->layer_rows[l] = a->layer_wall[l] = a->layer_calls[l] = 0;
    memset(a->phase_ns, 0, sizeof a->phase_ns);
    a->tail_ns = 0;
    a->n_tail = 0;
}

static int cmp_u32(const void *a, const void *b) {
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The tail's median, 90th and 99th percentiles over the logged layer calls. */
static void tail_percentiles(const co__acct *a, co_remote_summary *s) {
    const size_t nt = a->n_tail < CO_TAIL_LOG ? (size_t)a->n_tail : CO_TAIL_LOG;
    if (!nt) return;
    uint32_t sorted[CO_TAIL_LOG];
    memcpy(sorted, a->tail_log, nt * sizeof *sorted);
    qsort(sorted, nt, sizeof *sorted, cmp_u32);
    s->tail_p50_us = sorted[nt / 2];
    s->tail_p90_us = sorted[nt * 9 / 10];
    s->tail_p99_us = sorted[nt * 99 / 100];
}

co_remote_summary co_remote_summarize(const md_expert_backend *b) {
    const co__remote *r = b->impl;
    const co__acct *a = &r->acct;
    co_remote_summary s = {.tokens = co_remote_tokens(b), .total = wr_stats_sum(&a->wire, -1, -1)};
    uint64_t wall = 0, calls = 0;
    for (int l = 0; l < r->o.n_layers; l++) {
        wall += a->layer_wall[l];
        calls += a->layer_calls[l];
    }
    const double pc = calls ? 1e-3 / (double)calls : 0.0;
    s.layer_rtt_us = (double)wall * pc;
    s.split_us = (double)a->phase_ns[CO__SPLIT] * pc;
    s.encode_us = (double)a->phase_ns[CO__ENCODE] * pc;
    s.send_us = (double)a->phase_ns[CO__SEND] * pc;
    s.wait_us = (double)a->phase_ns[CO__WAIT] * pc;
    s.decode_us = (double)a->phase_ns[CO__DECODE] * pc;
    s.combine_us = (double)a->phase_ns[CO__COMBINE] * pc;
    s.tail_us = (double)a->tail_ns * pc;
    tail_percentiles(a, &s);
    double nb = s.total.batches ? 1e-3 / (double)s.total.batches : 0.0;
    s.node_compute_us = (double)s.total.compute_ns * nb;
    s.node_queue_us = (double)s.total.queue_ns * nb;
    s.node_rtt_us = (double)s.total.rtt_ns * nb;
    return s;
}

/* One line per node: what it announced, its batches, queueing, compute and round trip. */
static void report_nodes(const co__remote *r, FILE *f) {
    for (int i = 0; i < r->o.n_nodes; i++) {
        const co__node *n = &r->nodes[i];
        wr_counters c = wr_stats_sum(&r->acct.wire, i, -1);
        double nb = c.batches ? 1.0 / (double)c.batches : 0.0;
        char bw[32] = "";
        if (n->read_gbps > 0) snprintf(bw, sizeof bw, " (%.0f GB/s)", (double)n->read_gbps);
        fprintf(f,
                "  %s %s, %s%s, %u thread(s): %" PRIu64 " batches, queued %.1f + compute %.1f "
                "us/batch, round trip %.1f us/batch (worst %.1f), movement ratio %.3g\n",
                n->name, n->node_id, n->backend, bw, n->threads, c.batches,
                (double)c.queue_ns * 1e-3 * nb, (double)c.compute_ns * 1e-3 * nb,
                (double)c.rtt_ns * 1e-3 * nb, (double)c.rtt_max_ns * 1e-3, wr_movement_ratio(&c));
    }
}

void co_remote_report(const md_expert_backend *b, FILE *f) {
    const co__remote *r = b->impl;
    const co_remote_opts *o = &r->o;
    co_remote_summary s = co_remote_summarize(b);
    double per = s.tokens ? 1.0 / (double)s.tokens : 0.0;
    char codec[16];
    int n_moe = 0;
    for (int l = 0; l < o->n_layers; l++) n_moe += r->layer_moe[l] != 0;
    fprintf(f,
            "cluster: %d node(s), wire %s, %s mode, deadline %d ms; %lld token(s) through %d MoE "
            "layers\n",
            o->n_nodes, wr_codec_format(o->codec, codec, sizeof codec),
            o->exact ? "exact" : "partial", o->deadline_ms, (long long)s.tokens, n_moe);
    int up = 0;
    for (int i = 0; i < o->n_nodes; i++) up += !r->nodes[i].down;
    if (r->failovers || r->skipped || up < o->n_nodes)
        fprintf(f,
                "  failover: %d of %d node(s) up at the end; %" PRIu64
                " rescue batch(es) sent to replicas; %" PRIu64
                " expert assignment(s) skipped (no live owner, --on-missing skip)\n",
                up, o->n_nodes, r->failovers, r->skipped);
    for (int i = 0; i < o->n_nodes; i++)
        if (r->nodes[i].down) fprintf(f, "  %s is down: %s\n", r->nodes[i].name, r->nodes[i].why);
    fprintf(f, "  wire bytes/token: %.0f (sent %.0f, received %.0f)\n",
            (double)(s.total.tx_bytes + s.total.rx_bytes) * per, (double)s.total.tx_bytes * per,
            (double)s.total.rx_bytes * per);
    fprintf(f, "  expert weight bytes/token: %.0f\n", (double)s.total.weight_bytes * per);
    fprintf(f, "  movement ratio: %.3g\n", wr_movement_ratio(&s.total));
    report_nodes(r, f);
    fprintf(
        f,
        "  per layer (us): split %.1f, encode %.1f, send %.1f, wait %.1f, receive+decode %.1f, "
        "combine %.1f; last reply's wire and wake-ups %.1f (median %.0f, 90th %.0f, 99th %.0f)\n",
        s.split_us, s.encode_us, s.send_us, s.wait_us, s.decode_us, s.combine_us, s.tail_us,
        s.tail_p50_us, s.tail_p90_us, s.tail_p99_us);
    /* a dense layer (deepseek2's leading ones) has no exchange: it says so rather than 0.0 */
    fprintf(f, "  round trip per layer (us, mean %.1f):", s.layer_rtt_us);
    const co__acct *a = &r->acct;
    for (int l = 0; l < o->n_layers; l++)
        if (!r->layer_moe[l])
            fprintf(f, " %d:dense", l);
        else
            fprintf(f, " %d:%.1f", l,
                    a->layer_calls[l] ? (double)a->layer_wall[l] * 1e-3 / (double)a->layer_calls[l]
                                      : 0.0);
    fprintf(f, "\n");
}
