/* coordinator/co_metrics.c — the server's figures and the /metrics page (co_metrics.h), in the
 * Prometheus text format 0.0.4: "# HELP" and "# TYPE" per family, counters ending in _total,
 * histograms as cumulative _bucket{le=...} series with +Inf, _sum and _count. */
#include "coordinator/co_metrics.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUTES   12
#define MAX_STATUSES 24

typedef struct hist {
    const double *bounds;
    int n;            /* bounds; counts has n + 1 (the last: +Inf) */
    uint64_t *counts; /* per bucket, not cumulative */
    double sum;
    uint64_t count;
} hist;

static const double ttft_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                     1,     2.5,  5,     10,   30,  60};
static const double itl_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                    0.1,   0.25,   0.5,   1,    2.5,   10};
static const double rows_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
static const double step_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                     0.1,   0.25,   0.5,   1,    2.5,   10};
#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

typedef struct route_count {
    char route[32];
    int status[MAX_STATUSES];
    uint64_t count[MAX_STATUSES];
    int n;
} route_count;

struct co_metrics {
    pthread_mutex_t mu;
    int n_nodes, n_layers;
    route_count routes[MAX_ROUTES];
    int n_routes;
    int http_conns;
    uint64_t http_held, streams_paused, streams_stalled;
    uint64_t prompt_tokens, gen_tokens;
    hist ttft, itl, rows, step_s, unique;
    double *unique_bounds;
    double rtt_bounds[CO_RTT_BUCKETS];
    double unique_uniform_sum; /* E(1-(1-k/E)^B) over the same observations */
    int n_expert, k;
    uint64_t steps_failed;
    uint64_t micro_steps[CO_MICRO_MAX + 1]; /* steps by micro-batch count (index 1 .. MAX) */
    hist micro_rows;                        /* rows per micro-batch of split steps */
    double exchange_s, blocked_s;
    int active, queued;
    uint64_t kv_bytes, kv_used;
    co_prefix_cache_stats pc;
    co_backend_stats backend;
    co_node_stats *nodes;
    co_cell_stats *cells; /* n_nodes × n_layers, node-major */
    char **endpoints;
    bool ready;
};

static int hist_init(hist *h, const double *bounds, int n) {
    h->bounds = bounds;
    h->n = n;
    h->counts = calloc((size_t)n + 1, sizeof *h->counts);
    return h->counts ? 0 : -1;
}

static void hist_add(hist *h, double v) {
    int i = 0;
    while (i < h->n && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

int co_metrics_new(int n_nodes, int n_layers, int n_expert, int k, co_metrics **out, mw_err *err) {
    *out = NULL;
    co_metrics *m = calloc(1, sizeof *m);
    if (!m) return mw_errf(err, "out of memory");
    m->n_nodes = n_nodes;
    m->n_layers = n_layers;
    m->n_expert = n_expert;
    m->k = k;
    pthread_mutex_init(&m->mu, NULL);
    for (int i = 0; i < CO_RTT_BUCKETS; i++) m->rtt_bounds[i] = ldexp(1e-6, i);
    /* unique experts: powers of two up to the expert count, which is the last bound */
    int nb = 0;
    m->unique_bounds = calloc(32, sizeof *m->unique_bounds);
    if (m->unique_bounds) {
        for (double b = 1; b < n_expert && nb < 30; b *= 2) m->unique_bounds[nb++] = b;
        m->unique_bounds[nb++] = n_expert > 0 ? n_expert : 1;
    }
    m->nodes = calloc((size_t)(n_nodes > 0 ? n_nodes : 1), sizeof *m->nodes);
    m->endpoints = calloc((size_t)(n_nodes > 0 ? n_nodes : 1), sizeof *m->endpoints);
    m->cells = calloc((size_t)(n_nodes > 0 ? n_nodes : 1) * (size_t)(n_layers > 0 ? n_layers : 1),
                      sizeof *m->cells);
    if (!m->unique_bounds || !m->nodes || !m->endpoints || !m->cells ||
        hist_init(&m->ttft, ttft_bounds, N_OF(ttft_bounds)) ||
        hist_init(&m->itl, itl_bounds, N_OF(itl_bounds)) ||
        hist_init(&m->rows, rows_bounds, N_OF(rows_bounds)) ||
        hist_init(&m->step_s, step_bounds, N_OF(step_bounds)) ||
        hist_init(&m->unique, m->unique_bounds, nb) ||
        hist_init(&m->micro_rows, rows_bounds, N_OF(rows_bounds))) {
        co_metrics_free(m);
        return mw_errf(err, "out of memory");
    }
    *out = m;
    return 0;
}

void co_metrics_free(co_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m->ttft.counts);
    free(m->itl.counts);
    free(m->rows.counts);
    free(m->step_s.counts);
    free(m->unique.counts);
    free(m->micro_rows.counts);
    free(m->unique_bounds);
    for (int i = 0; m->endpoints && i < m->n_nodes; i++) free(m->endpoints[i]);
    free(m->endpoints);
    free(m->nodes);
    free(m->cells);
    free(m);
}

void co_metrics_request(co_metrics *m, const char *route, int status) {
    pthread_mutex_lock(&m->mu);
    route_count *r = NULL;
    for (int i = 0; i < m->n_routes && !r; i++)
        if (!strcmp(m->routes[i].route, route)) r = &m->routes[i];
    if (!r && m->n_routes < MAX_ROUTES) {
        r = &m->routes[m->n_routes++];
        snprintf(r->route, sizeof r->route, "%s", route);
    }
    if (r) {
        int i = 0;
        while (i < r->n && r->status[i] != status) i++;
        if (i == r->n && r->n < MAX_STATUSES) r->status[r->n++] = status;
        if (i < r->n) r->count[i]++;
    }
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_http(co_metrics *m, int conns, uint64_t held_bytes) {
    pthread_mutex_lock(&m->mu);
    m->http_conns = conns;
    m->http_held = held_bytes;
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_stream_paused(co_metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->streams_paused++;
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_stream_stalled(co_metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->streams_stalled++;
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_prompt_tokens(co_metrics *m, int64_t n) {
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += (uint64_t)n;
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_generated_tokens(co_metrics *m, int64_t n) {
    pthread_mutex_lock(&m->mu);
    m->gen_tokens += (uint64_t)n;
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_ttft(co_metrics *m, double s) {
    pthread_mutex_lock(&m->mu);
    hist_add(&m->ttft, s);
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_itl(co_metrics *m, double s) {
    pthread_mutex_lock(&m->mu);
    hist_add(&m->itl, s);
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_step(co_metrics *m, const co_step_stats *st) {
    pthread_mutex_lock(&m->mu);
    hist_add(&m->rows, (double)st->rows);
    hist_add(&m->step_s, st->seconds);
    if (st->failed) m->steps_failed++;
    if (st->micro_batches >= 1 && st->micro_batches <= CO_MICRO_MAX) {
        m->micro_steps[st->micro_batches]++;
        for (int i = 0; st->micro_batches > 1 && st->micro_rows && i < st->micro_batches; i++)
            hist_add(&m->micro_rows, (double)st->micro_rows[i]);
    }
    m->exchange_s += st->exchange_s;
    m->blocked_s += st->blocked_s;
    m->active = st->active;
    m->kv_bytes = st->kv_bytes;
    m->kv_used = st->kv_used_bytes;
    if (st->unique_experts && m->n_expert > 0) {
        const double E = m->n_expert, p = 1.0 - (double)m->k / E;
        const double expect = E * (1.0 - pow(p, (double)st->rows));
        for (int l = 0; l < st->n_layers; l++) {
            hist_add(&m->unique, st->unique_experts[l]);
            m->unique_uniform_sum += expect;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_queue(co_metrics *m, int active, int queued) {
    pthread_mutex_lock(&m->mu);
    if (active >= 0) m->active = active;
    if (queued >= 0) m->queued = queued;
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_kv_used(co_metrics *m, uint64_t bytes) {
    pthread_mutex_lock(&m->mu);
    m->kv_used = bytes;
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_prefix_cache(co_metrics *m, const co_prefix_cache_stats *st) {
    pthread_mutex_lock(&m->mu);
    m->pc = *st;
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_backend(co_metrics *m, const co_backend_stats *b) {
    pthread_mutex_lock(&m->mu);
    m->backend.tx_bytes = b->tx_bytes;
    m->backend.rx_bytes = b->rx_bytes;
    m->backend.weight_bytes = b->weight_bytes;
    m->backend.failovers = b->failovers;
    m->backend.skipped = b->skipped;
    if (b->cells)
        memcpy(m->cells, b->cells, (size_t)m->n_nodes * (size_t)m->n_layers * sizeof *m->cells);
    for (int i = 0; b->nodes && i < m->n_nodes; i++) {
        if (!m->endpoints[i] && b->nodes[i].endpoint)
            m->endpoints[i] = strdup(b->nodes[i].endpoint);
        m->nodes[i] = b->nodes[i];
        m->nodes[i].endpoint = m->endpoints[i];
    }
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_set_ready(co_metrics *m, bool ready) {
    pthread_mutex_lock(&m->mu);
    m->ready = ready;
    pthread_mutex_unlock(&m->mu);
}

bool co_metrics_ready(co_metrics *m) {
    pthread_mutex_lock(&m->mu);
    bool r = m->ready;
    pthread_mutex_unlock(&m->mu);
    return r;
}

/* ---- the page ------------------------------------------------------------------------------- */

static void family(co_buf *o, const char *name, const char *type, const char *help) {
    co_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \, " and newlines escaped. */
static void label_value(co_buf *o, const char *v) {
    for (; v && *v; v++) {
        if (*v == '\\')
            co_buf_puts(o, "\\\\");
        else if (*v == '"')
            co_buf_puts(o, "\\\"");
        else if (*v == '\n')
            co_buf_puts(o, "\\n");
        else
            co_buf_add(o, v, 1);
    }
}

static void number(co_buf *o, double v) {
    if (isnan(v))
        co_buf_puts(o, "NaN");
    else if (isinf(v))
        co_buf_puts(o, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        co_buf_printf(o, "%.0f", v);
    else
        co_buf_printf(o, "%.9g", v);
}

static void sample(co_buf *o, const char *name, const char *labels, double v) {
    co_buf_puts(o, name);
    if (labels && *labels) co_buf_printf(o, "{%s}", labels);
    co_buf_puts(o, " ");
    number(o, v);
    co_buf_puts(o, "\n");
}

static void one(co_buf *o, const char *name, const char *type, const char *help, double v) {
    family(o, name, type, help);
    sample(o, name, NULL, v);
}

/* labels: "" or `a="b"` (without braces) put before le. */
static void hist_series(co_buf *o, const char *name, const char *labels, const uint64_t *counts,
                        const double *bounds, int n, double sum, uint64_t count) {
    uint64_t cum = 0;
    for (int i = 0; i <= n; i++) {
        cum += counts[i];
        co_buf_printf(o, "%s_bucket{%s%sle=\"", name, labels, *labels ? "," : "");
        if (i < n)
            number(o, bounds[i]);
        else
            co_buf_puts(o, "+Inf");
        co_buf_printf(o, "\"} %llu\n", (unsigned long long)cum);
    }
    co_buf_printf(o, "%s_sum%s%s%s ", name, *labels ? "{" : "", labels, *labels ? "}" : "");
    number(o, sum);
    co_buf_printf(o, "\n%s_count%s%s%s %llu\n", name, *labels ? "{" : "", labels,
                  *labels ? "}" : "", (unsigned long long)count);
}

static void hist_one(co_buf *o, const char *name, const char *help, const hist *h) {
    family(o, name, "histogram", help);
    hist_series(o, name, "", h->counts, h->bounds, h->n, h->sum, h->count);
}

static void node_labels(char *l, size_t cap, const co_metrics *m, int i) {
    co_buf b = {0};
    co_buf_printf(&b, "node=\"%d\",endpoint=\"", i);
    label_value(&b, m->nodes[i].endpoint ? m->nodes[i].endpoint : "");
    co_buf_puts(&b, "\"");
    snprintf(l, cap, "%s", b.p ? b.p : "");
    co_buf_free(&b);
}

/* The request side: requests by route and status, tokens, latencies. */
static void write_requests(const co_metrics *m, co_buf *o) {
    family(o, "moewire_http_requests_total", "counter",
           "HTTP requests answered, by route and status");
    for (int r = 0; r < m->n_routes; r++)
        for (int i = 0; i < m->routes[r].n; i++) {
            co_buf_puts(o, "moewire_http_requests_total{route=\"");
            label_value(o, m->routes[r].route);
            co_buf_printf(o, "\",status=\"%d\"} %llu\n", m->routes[r].status[i],
                          (unsigned long long)m->routes[r].count[i]);
        }
    one(o, "moewire_http_connections", "gauge", "HTTP connections open", (double)m->http_conns);
    one(o, "moewire_http_held_bytes", "gauge",
        "request bytes the HTTP connections hold (bodies, targets, unparsed input)",
        (double)m->http_held);
    one(o, "moewire_streams_paused_total", "counter",
        "times a stream's sequence left the batch because its client fell behind",
        (double)m->streams_paused);
    one(o, "moewire_streams_stalled_total", "counter",
        "streams cancelled because their client stayed behind (the slot freed)",
        (double)m->streams_stalled);
    one(o, "moewire_prompt_tokens_total", "counter", "prompt tokens prefilled",
        (double)m->prompt_tokens);
    one(o, "moewire_generation_tokens_total", "counter", "tokens generated", (double)m->gen_tokens);
    hist_one(o, "moewire_time_to_first_token_seconds",
             "from a request's arrival to its first generated token", &m->ttft);
    hist_one(o, "moewire_inter_token_latency_seconds",
             "between consecutive generated tokens of a request", &m->itl);
}

/* Ping-pong micro-batches: steps by how many they ran in, the rows of each, and the share of the
 * experts' round trips hidden behind the coordinator's other work. */
static void write_micro(const co_metrics *m, co_buf *o) {
    family(o, "moewire_step_micro_batches_total", "counter",
           "scheduler steps that ran, by the micro-batches they were split into (1: whole)");
    char l[32];
    for (int n = 1; n <= CO_MICRO_MAX; n++) {
        snprintf(l, sizeof l, "micro_batches=\"%d\"", n);
        sample(o, "moewire_step_micro_batches_total", l, (double)m->micro_steps[n]);
    }
    hist_one(o, "moewire_micro_batch_rows", "rows per micro-batch of the steps that were split",
             &m->micro_rows);
    one(o, "moewire_expert_exchange_seconds_total", "counter",
        "MoE layers' expert exchanges, each from its submit to its results in hand", m->exchange_s);
    one(o, "moewire_expert_blocked_seconds_total", "counter",
        "of those, the time the coordinator sat blocked waiting for the results", m->blocked_s);
    one(o, "moewire_expert_exchange_hidden_ratio", "gauge",
        "share of the expert exchanges hidden behind other work so far: 1 - blocked / exchange",
        m->exchange_s > 0 ? 1.0 - m->blocked_s / m->exchange_s : 0);
}

/* The scheduler's steps: queue, sequences, rows, durations, KV memory, experts per step. */
static void write_steps(const co_metrics *m, co_buf *o) {
    one(o, "moewire_queue_depth", "gauge", "requests waiting for a sequence slot",
        (double)m->queued);
    one(o, "moewire_active_sequences", "gauge", "sequences holding a KV slot", (double)m->active);
    hist_one(o, "moewire_batch_rows", "rows (decode rows and prompt rows) per scheduler step",
             &m->rows);
    hist_one(o, "moewire_step_duration_seconds", "one forward pass of the scheduler", &m->step_s);
    one(o, "moewire_step_failures_total", "counter",
        "scheduler steps whose forward pass failed (their requests ended with an error)",
        (double)m->steps_failed);
    write_micro(m, o);
    one(o, "moewire_kv_cache_bytes", "gauge", "KV cache memory allocated", (double)m->kv_bytes);
    one(o, "moewire_kv_cache_used_bytes", "gauge", "KV cache memory holding live positions",
        (double)m->kv_used);
    one(o, "moewire_prompt_cache_lookups_total", "counter",
        "admitted requests that looked for a cached prefix", (double)m->pc.lookups);
    one(o, "moewire_prompt_cache_hits_total", "counter",
        "admitted requests that started from a cached prefix", (double)m->pc.hits);
    one(o, "moewire_prompt_cache_tokens_reused_total", "counter",
        "prompt positions restored from the prompt cache instead of computed",
        (double)m->pc.tokens_reused);
    one(o, "moewire_prompt_cache_evicted_blocks_total", "counter",
        "prompt cache blocks evicted (least recently used) to make room",
        (double)m->pc.evicted_blocks);
    one(o, "moewire_prompt_cache_bytes", "gauge", "bytes the prompt cache holds",
        (double)m->pc.bytes);
    one(o, "moewire_prompt_cache_blocks", "gauge", "blocks the prompt cache holds",
        (double)m->pc.blocks);
    one(o, "moewire_prompt_cache_budget_bytes", "gauge", "the prompt cache's bound (--cache-mb)",
        (double)m->pc.budget);
    hist_one(o, "moewire_step_unique_experts",
             "distinct experts chosen in one layer by one step's rows", &m->unique);
    one(o, "moewire_step_unique_experts_uniform_total", "counter",
        "E*(1-(1-k/E)^rows) summed over the same (layer, step) observations: the unique "
        "experts random routing would touch",
        m->unique_uniform_sum);
}

/* The backend's traffic and weight reads, the movement ratio, readiness. */
static void write_wire(const co_metrics *m, co_buf *o) {
    one(o, "moewire_wire_sent_bytes_total", "counter",
        "expert traffic sent to the nodes (envelopes and frames as sent)",
        (double)m->backend.tx_bytes);
    one(o, "moewire_wire_received_bytes_total", "counter", "expert traffic received from the nodes",
        (double)m->backend.rx_bytes);
    one(o, "moewire_expert_weight_read_bytes_total", "counter",
        "expert weight bytes read to serve the MoE layers (as stored)",
        (double)m->backend.weight_bytes);
    const double wb = (double)m->backend.weight_bytes;
    one(o, "moewire_movement_ratio", "gauge",
        "wire bytes (both directions) over expert weight bytes read, so far",
        wb > 0 ? (double)(m->backend.tx_bytes + m->backend.rx_bytes) / wb : 0);
    one(o, "moewire_ready", "gauge", "1 when every expert has a live owner", m->ready ? 1 : 0);
}

/* Per node: up, counters, the round-trip histogram. */
static void write_nodes(const co_metrics *m, co_buf *o) {
    char l[512];
    family(o, "moewire_node_up", "gauge", "1 while the node answers");
    for (int i = 0; i < m->n_nodes; i++) {
        if (!m->nodes[i].endpoint) continue;
        node_labels(l, sizeof l, m, i);
        sample(o, "moewire_node_up", l, m->nodes[i].up ? 1 : 0);
    }
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"moewire_node_rows_total", "activation rows sent to the node",
         offsetof(co_node_stats, rows)},
        {"moewire_node_batches_total", "expert batches exchanged with the node",
         offsetof(co_node_stats, batches)},
        {"moewire_node_errors_total", "failed exchanges with the node (deadline, Error)",
         offsetof(co_node_stats, errors)},
        {"moewire_node_sent_bytes_total", "expert traffic sent to the node",
         offsetof(co_node_stats, tx_bytes)},
        {"moewire_node_received_bytes_total", "expert traffic received from the node",
         offsetof(co_node_stats, rx_bytes)},
        {"moewire_node_expert_weight_read_bytes_total", "expert weight bytes the node read",
         offsetof(co_node_stats, weight_bytes)},
    };
    for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++) {
        family(o, counters[c].name, "counter", counters[c].help);
        for (int i = 0; i < m->n_nodes; i++) {
            if (!m->nodes[i].endpoint) continue;
            node_labels(l, sizeof l, m, i);
            uint64_t v;
            memcpy(&v, (const char *)&m->nodes[i] + counters[c].off, sizeof v);
            sample(o, counters[c].name, l, (double)v);
        }
    }
    family(o, "moewire_node_rtt_seconds", "histogram",
           "send to reply of one expert batch, per node");
    for (int i = 0; i < m->n_nodes; i++) {
        if (!m->nodes[i].endpoint) continue;
        node_labels(l, sizeof l, m, i);
        uint64_t count = 0;
        for (int b = 0; b <= CO_RTT_BUCKETS; b++) count += m->nodes[i].rtt_buckets[b];
        hist_series(o, "moewire_node_rtt_seconds", l, m->nodes[i].rtt_buckets, m->rtt_bounds,
                    CO_RTT_BUCKETS, m->nodes[i].rtt_sum_s, count);
    }
}

/* Per node and layer: rows, assignments, traffic and weight reads; per layer the movement ratio
 * and the balance (the mean of the nodes' assignments over the largest: 1 when every node
 * computed as many, the measure `vindex plan` balances). */
static void write_layers(const co_metrics *m, co_buf *o) {
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"moewire_node_layer_rows_total", "activation rows sent to the node for the layer",
         offsetof(co_cell_stats, rows)},
        {"moewire_node_layer_assignments_total",
         "(row, expert) assignments the node computed for the layer",
         offsetof(co_cell_stats, assignments)},
        {"moewire_node_layer_sent_bytes_total", "expert traffic sent to the node for the layer",
         offsetof(co_cell_stats, tx_bytes)},
        {"moewire_node_layer_received_bytes_total", "expert traffic received for the layer",
         offsetof(co_cell_stats, rx_bytes)},
        {"moewire_node_layer_expert_weight_read_bytes_total",
         "expert weight bytes the node read for the layer", offsetof(co_cell_stats, weight_bytes)},
    };
    char l[600], nl[512];
    for (size_t c = 0; c < sizeof counters / sizeof counters[0]; c++) {
        family(o, counters[c].name, "counter", counters[c].help);
        for (int i = 0; i < m->n_nodes; i++) {
            if (!m->nodes[i].endpoint) continue;
            node_labels(nl, sizeof nl, m, i);
            for (int y = 0; y < m->n_layers; y++) {
                uint64_t v;
                memcpy(&v, (const char *)&m->cells[i * m->n_layers + y] + counters[c].off, 8);
                snprintf(l, sizeof l, "%s,layer=\"%d\"", nl, y);
                sample(o, counters[c].name, l, (double)v);
            }
        }
    }
    family(o, "moewire_layer_balance", "gauge",
           "assignments per node in the layer so far: their mean over their largest (1: even)");
    family(o, "moewire_layer_movement_ratio", "gauge",
           "the layer's wire bytes (both directions) over its expert weight bytes read");
    for (int y = 0; y < m->n_layers; y++) {
        uint64_t sum = 0, mx = 0, wire = 0, wb = 0;
        int members = 0;
        for (int i = 0; i < m->n_nodes; i++) {
            const co_cell_stats *c = &m->cells[i * m->n_layers + y];
            wire += c->tx_bytes + c->rx_bytes;
            wb += c->weight_bytes;
            if (!m->nodes[i].member) continue; /* the balance is over the fleet as it is */
            members++;
            sum += c->assignments;
            mx = c->assignments > mx ? c->assignments : mx;
        }
        if (!mx) continue; /* a dense layer, or none served yet */
        snprintf(l, sizeof l, "layer=\"%d\"", y);
        sample(o, "moewire_layer_balance", l, (double)sum / members / (double)mx);
        sample(o, "moewire_layer_movement_ratio", l, wb ? (double)wire / (double)wb : 0);
    }
    one(o, "moewire_failover_batches_total", "counter",
        "expert batches re-sent to replicas of a lost node", (double)m->backend.failovers);
    one(o, "moewire_skipped_assignments_total", "counter",
        "(row, expert) assignments left out for want of a live owner (--on-missing skip)",
        (double)m->backend.skipped);
}

void co_metrics_write(co_metrics *m, co_buf *o) {
    pthread_mutex_lock(&m->mu);
    write_requests(m, o);
    write_steps(m, o);
    write_wire(m, o);
    if (m->n_nodes > 0) write_nodes(m, o);
    if (m->n_nodes > 0) write_layers(m, o);
    pthread_mutex_unlock(&m->mu);
}

void co_metrics_nodes_up(co_metrics *m, int *up, int *n_nodes) {
    pthread_mutex_lock(&m->mu);
    *n_nodes = *up = 0;
    for (int i = 0; i < m->n_nodes; i++) {
        *n_nodes += m->nodes[i].member;
        *up += m->nodes[i].member && m->nodes[i].up;
    }
    pthread_mutex_unlock(&m->mu);
}
