/* coordinator/co_serve.c — `coordinator serve` (co_serve.h): opens the model, the backend and one
 * context of N sequence slots, starts the scheduler's model thread, and runs the HTTP listener on
 * a libuv loop until a signal. SIGTERM / SIGINT: stop accepting, let in-flight requests finish
 * within the grace period, fail what is left, stop the loopback nodes, exit 0. */
#include "coordinator/co_serve.h"

#include <libgen.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "coordinator/co_admin.h"
#include "coordinator/co_backend.h"
#include "coordinator/co_http.h"
#include "coordinator/co_metrics.h"
#include "coordinator/co_routes.h"
#include "coordinator/co_sched.h"
#include "coordinator/co_serve_text.h"
#include "coordinator/co_topo.h"
#include "coordinator/co_trace.h"
#include "model/md_kv.h"
#include "model/md_model.h"
#include "util/mw_notify.h"
#include "vindex/vx_source.h"

#define DEFAULT_SLOTS  16
#define DEFAULT_CTX    4096
#define MAX_SLOTS      4096
#define FD_RESERVE     128 /* files besides the connections: the model, sockets to nodes, logs */
#define MMAP_THRESHOLD (256 * 1024)

typedef struct serve {
    const co_opts *o;
    const co_backend_kind *kind;
    kn_pool *pool;
    vx_source *src;
    md_model *model;
    md_expert_backend *experts;
    md_ctx *ctx;
    co_trace *trace; /* --trace-routing */
    co_stext *text;
    co_metrics *metrics;
    co_sched *sched;
    co_routes *routes;
    co_auth *auth; /* API keys (NULL: the API is open) */
    co_http_server *http;
    uv_loop_t loop;
    bool loop_ok;
    uv_signal_t sigterm, sigint, sighup;
    atomic_bool reload; /* SIGHUP: read the --nodes file again at the next step (model thread) */
    char *reload_buf;   /* the file's text, read on the model thread */
    co_admin *admin;    /* node lists from /admin/nodes (NULL: no node list to change) */
    uv_timer_t drain_timer;
    uv_timer_t wd_timer; /* the service manager's watchdog (mw_notify.h), when it asks */
    bool handles_ok, draining, failed_all, done;
    double t_drain, t_fail;
    char model_id[256];
    char url[300];
    int n_slots;
    int64_t n_ctx;
    md_seq_cost cost; /* one sequence's cache: per position, and fixed (recurrent state) */
    int n_nodes;
    co_node_stats *nodes;
    co_cell_stats *cells; /* per node and layer, for /metrics */
} serve;

/* ---- the KV budget -------------------------------------------------------------------------- */

static int plan_slots(serve *s, mw_err *err) {
    const co_opts *o = s->o;
    const md_config *c = &s->model->cfg;
    s->n_ctx = o->n_ctx ? o->n_ctx : (c->n_ctx_train < DEFAULT_CTX ? c->n_ctx_train : DEFAULT_CTX);
    if (s->n_ctx > c->n_ctx_train)
        return mw_errf(err, "--ctx %lld is more than the model's context_length %lld",
                       (long long)s->n_ctx, (long long)c->n_ctx_train);
    if (s->n_ctx < 2) return mw_errf(err, "--ctx must be at least 2");
    s->cost = md_seq_cost_of(c, s->n_ctx, o->kv_type); /* per position in the cache's type */
    const uint64_t slot = s->cost.per_pos_full * (uint64_t)s->n_ctx +
                          s->cost.per_pos_ring * (uint64_t)s->cost.ring + s->cost.fixed;
    if (o->kv_mb) {
        const uint64_t budget = (uint64_t)o->kv_mb << 20;
        uint64_t n = budget / slot;
        if (n == 0)
            return mw_errf(err,
                           "--kv-mb %lld holds no sequence of %lld positions (one needs %.1f MiB)",
                           (long long)o->kv_mb, (long long)s->n_ctx, (double)slot / (1 << 20));
        s->n_slots = n > MAX_SLOTS ? MAX_SLOTS : (int)n;
    } else {
        s->n_slots = o->max_seqs ? o->max_seqs : DEFAULT_SLOTS;
    }
    return 0;
}

/* ---- backend figures for /metrics (model thread, after every step) -------------------------- */

/* Model thread: the --nodes file or the --topology file again, the backend's nodes made its
 * list (joins, drains). */
static void reload_nodes(serve *s) {
    const co_opts *o = s->o;
    mw_err err;
    const char *list = NULL, *file = o->topology_file ? o->topology_file : o->nodes_file;
    if (!file || !s->kind->set_nodes) {
        fprintf(stderr, "coordinator serve: SIGHUP: nothing to reload (serve runs without --nodes "
                        "@FILE or --topology)\n");
        return;
    }
    const int rc = o->topology_file ? co_topo_nodes(file, &s->reload_buf, &list, &err)
                                    : co_cli_read_nodes(file, &s->reload_buf, &list, &err);
    if (rc || s->kind->set_nodes(s->experts, list, stderr, &err))
        fprintf(stderr, "coordinator serve: SIGHUP: %s: the nodes stay as they were\n", err.msg);
    else
        fprintf(stderr, "coordinator serve: SIGHUP: the nodes are those of %s\n", file);
}

/* Model thread: the list /admin/nodes queued last, made the backend's nodes. */
static void admin_nodes(serve *s) {
    long long id;
    char *list = s->admin ? co_admin_take(s->admin, &id) : NULL;
    if (!list) return;
    mw_err err;
    if (s->kind->set_nodes(s->experts, list, stderr, &err)) {
        fprintf(stderr, "coordinator serve: /admin/nodes %lld: %s: the nodes stay as they were\n",
                id, err.msg);
        co_admin_done(s->admin, id, false, err.msg);
    } else {
        fprintf(stderr, "coordinator serve: /admin/nodes %lld: the nodes are %s\n", id, list);
        co_admin_done(s->admin, id, true, "applied");
    }
    free(list);
}

static long long admin_queue(void *ud, const char *list, mw_err *err) {
    return co_admin_queue(((serve *)ud)->admin, list, err);
}

static char *admin_state(void *ud) {
    return co_admin_state(((serve *)ud)->admin);
}

static void after_step(void *ud) {
    serve *s = ud;
    if (atomic_exchange(&s->reload, false)) reload_nodes(s);
    admin_nodes(s);
    co_backend_stats b = {.cells = s->cells};
    const bool ready = s->kind->metrics(s->experts, &b, s->nodes);
    co_metrics_backend(s->metrics, &b);
    co_metrics_set_ready(s->metrics, ready);
}

/* ---- shutdown ------------------------------------------------------------------------------- */

static void handle_closed(uv_handle_t *h) {
    (void)h;
}

static void finish(serve *s) {
    if (s->done) return;
    s->done = true;
    uv_timer_stop(&s->drain_timer);
    co_sched_free(s->sched); /* every job still there ends; their answers go out */
    s->sched = NULL;
    co_http_server_close(s->http);
    s->http = NULL;
    uv_close((uv_handle_t *)&s->sigterm, handle_closed);
    uv_close((uv_handle_t *)&s->sigint, handle_closed);
    uv_close((uv_handle_t *)&s->sighup, handle_closed);
    uv_close((uv_handle_t *)&s->drain_timer, handle_closed);
    uv_timer_stop(&s->wd_timer);
    uv_close((uv_handle_t *)&s->wd_timer, handle_closed);
}

/* The loop notes it; the model thread acts on it between steps (the backend is its alone). An idle
 * server's scheduler ticks every 100 ms, so the change follows within that. */
static void on_sighup(uv_signal_t *h, int signum) {
    (void)signum;
    serve *s = h->data;
    atomic_store(&s->reload, true);
}

static void on_watchdog(uv_timer_t *t) {
    (void)t;
    mw_notify("WATCHDOG=1");
}

static void on_drain_tick(uv_timer_t *t) {
    serve *s = t->data;
    const double now = co_now();
    const int jobs = co_sched_jobs(s->sched), conns = co_http_server_conns(s->http);
    if (jobs == 0 && conns == 0) {
        finish(s);
        return;
    }
    if (!s->failed_all && now - s->t_drain >= s->o->grace_ms * 1e-3) {
        fprintf(stderr, "coordinator serve: grace period over; failing %d request(s)\n", jobs);
        co_sched_fail_all(s->sched, "the server is shutting down");
        s->failed_all = true;
        s->t_fail = now;
    }
    /* answers written, clients slow to close: stop waiting for them */
    if ((s->failed_all && now - s->t_fail > 3.0) || (jobs == 0 && now - s->t_drain > 5.0))
        finish(s);
}

static void on_signal(uv_signal_t *h, int signum) {
    serve *s = h->data;
    if (s->draining) {
        if (!s->failed_all) {
            co_sched_fail_all(s->sched, "the server is shutting down");
            s->failed_all = true;
            s->t_fail = co_now();
        }
        return;
    }
    mw_notify("STOPPING=1");
    fprintf(stderr,
            "coordinator serve: %s: no new requests; finishing %d in flight (grace %d ms)\n",
            signum == SIGTERM ? "SIGTERM" : "SIGINT", co_sched_jobs(s->sched), s->o->grace_ms);
    s->draining = true;
    s->t_drain = co_now();
    co_http_server_drain(s->http);
    co_sched_drain(s->sched);
    uv_timer_start(&s->drain_timer, on_drain_tick, 0, 50);
}

/* ---- start ---------------------------------------------------------------------------------- */

static void model_id(serve *s) {
    if (s->o->served_name) {
        snprintf(s->model_id, sizeof s->model_id, "%s", s->o->served_name);
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s", s->o->model);
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') path[--n] = 0;
    snprintf(s->model_id, sizeof s->model_id, "%s", basename(path));
    char *dot = strrchr(s->model_id, '.');
    if (dot && (!strcmp(dot, ".gguf") || !strcmp(dot, ".vindex"))) *dot = 0;
}

static int write_ready_file(const serve *s, mw_err *err) {
    if (!s->o->ready_file) return 0;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->o->ready_file);
    FILE *f = fopen(tmp, "w");
    if (!f) return mw_errf(err, "cannot write %s", tmp);
    fprintf(f, "%s\n", s->url);
    if (fclose(f) || rename(tmp, s->o->ready_file))
        return mw_errf(err, "cannot write %s", s->o->ready_file);
    return 0;
}

/* The model, its KV slots, the tokenizer, the expert backend and the context. */
static int open_model(serve *s, mw_err *err) {
    const co_opts *o = s->o;
    s->kind = co_backend_find(o->experts);
    if (!s->kind) return mw_errf(err, "unknown expert backend '%s'", o->experts);
    s->pool = kn_pool_create(o->threads);
    vx_expert_set none = {0};
    vx_source_opts so = {.experts = s->kind->needs_local_experts ? NULL : &none,
                         .dense = true,
                         .verify_on_mount = true};
    if (vx_source_open(o->model, &so, &s->src, err)) return -1;
    if (md_model_load(s->src, &s->model, err) || (o->pin && md_model_pin_dense(s->model, err)))
        return -1;
    if (plan_slots(s, err)) return -1;
    if (co_stext_open(s->src, o->chat_template, &s->text, err)) return -1;
    if (o->chat_template_file && !s->text)
        return mw_errf(err, "--chat-template-file: the model has no tokenizer");
    if (o->chat_template_file && co_stext_template_file(s->text, o->chat_template_file, err))
        return -1;
    const co_backend_opts bo = co_cli_backend_opts(o);
    co_backend_env env = {.opts = &bo, .src = s->src, .model = s->model, .pool = s->pool};
    if (s->kind->create(&env, &s->experts, err)) return -1;
    md_ctx_params cp = {.numerics = o->numerics,
                        .pool = s->pool,
                        .experts = s->experts,
                        .n_seq = s->n_slots,
                        .n_ctx = s->n_ctx,
                        .kv_type = o->kv_type,
                        .micro_batches = o->micro_batches};
    if (md_ctx_new(s->model, &cp, &s->ctx, err)) return -1;
    if (o->trace_routing && co_trace_open(o->trace_routing, s->src, s->model, &s->trace, err))
        return -1;
    co_trace_attach(s->trace, s->ctx);
    return 0;
}

/* The per-node stats, the metrics, the event loop and the scheduler. */
static int open_scheduler(serve *s, mw_err *err) {
    const co_opts *o = s->o;
    const md_config *c = &s->model->cfg;
    s->n_nodes = s->kind->n_nodes ? s->kind->n_nodes(s->experts) : 0;
    if (s->n_nodes &&
        (!(s->nodes = calloc((size_t)s->n_nodes, sizeof *s->nodes)) ||
         !(s->cells = calloc((size_t)s->n_nodes * (size_t)c->n_layer, sizeof *s->cells))))
        return mw_errf(err, "out of memory");
    if (co_metrics_new(s->n_nodes, c->n_layer, c->n_expert, c->n_expert_used, &s->metrics, err))
        return -1;
    after_step(s);
    if (uv_loop_init(&s->loop)) return mw_errf(err, "cannot start the event loop");
    s->loop_ok = true;
    co_sched_params sp = {.ctx = s->ctx,
                          .n_slots = s->n_slots,
                          .n_ctx = s->n_ctx,
                          .n_vocab = c->n_vocab,
                          .n_layer = c->n_layer,
                          .chunk = o->chunk,
                          .max_queue = o->max_queue,
                          .metrics = s->metrics,
                          .after_step = after_step,
                          .after_step_ud = s,
                          .idle_ms = 100, /* a lost or returning node shows on /health */
                          .experts = s->experts,
                          .kv_bytes_per_pos_full = s->cost.per_pos_full,
                          .kv_bytes_per_pos_ring = s->cost.per_pos_ring,
                          .kv_ring = s->cost.ring,
                          .kv_bytes_per_seq = s->cost.fixed,
                          .cache_bytes = (uint64_t)o->cache_mb << 20};
    if (co_sched_new(&s->loop, &sp, &s->sched, err)) return -1;
    return 0;
}

/* Connections need a file descriptor each: the open-file limit is raised as far as it goes, and
 * --max-conns lowered (with a warning) to what it allows beside the server's own files. */
static int conn_limit(int want) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return want;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    const rlim_t room = rl.rlim_cur > FD_RESERVE ? rl.rlim_cur - FD_RESERVE : 1;
    if (rl.rlim_cur == RLIM_INFINITY || (rlim_t)want <= room) return want;
    fprintf(stderr,
            "coordinator serve: --max-conns %d lowered to %llu: the open-file limit is %llu\n",
            want, (unsigned long long)room, (unsigned long long)rl.rlim_cur);
    return (int)room;
}

static co_http_limits http_limits(const co_opts *o) {
    co_http_limits lim = co_http_default_limits();
    lim.max_body_bytes = (size_t)o->max_body;
    lim.max_head_bytes = (size_t)o->max_head;
    lim.max_headers = o->max_headers;
    lim.max_held_bytes = (size_t)o->max_held;
    lim.request_ms = o->request_timeout_ms;
    lim.idle_ms = o->idle_timeout_ms;
    lim.max_conns = conn_limit(o->max_conns);
    lim.max_unsent_bytes = (size_t)o->max_unsent;
    lim.stall_ms = o->stall_timeout_ms;
    lim.retry_after_s = 1;
    return lim;
}

/* The routes, the listening socket (its URL) and the signal handlers. */
static int open_http(serve *s, mw_err *err) {
    const co_opts *o = s->o;
    const md_config *c = &s->model->cfg;
    model_id(s);
    co_routes_params rp = {.loop = &s->loop,
                           .sched = s->sched,
                           .metrics = s->metrics,
                           .text = s->text,
                           .model_id = s->model_id,
                           .created = (long long)time(NULL),
                           .n_ctx = s->n_ctx,
                           .n_vocab = c->n_vocab,
                           .retry_after_s = 1,
                           .thinking = o->thinking,
                           .auth = s->auth,
                           .limits = {.max_messages = o->max_messages,
                                      .max_logit_bias = o->max_logit_bias,
                                      .max_prompt_tokens = o->max_prompt_tokens},
                           .cfg = c,
                           .n_slots = s->n_slots,
                           .max_queue = o->max_queue,
                           .cache_bytes = (uint64_t)o->cache_mb << 20};
    if (s->kind->set_nodes && (o->nodes || o->loopback)) {
        if (!(s->admin = co_admin_new())) return mw_errf(err, "out of memory");
        rp.nodes_set = admin_queue;
        rp.nodes_state = admin_state;
        rp.nodes_ud = s;
    }
    if (co_routes_new(&rp, &s->routes, err)) return -1;
    char host[256];
    const char *colon = strrchr(o->listen, ':');
    snprintf(host, sizeof host, "%.*s", (int)(colon - o->listen), o->listen);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = 0;
    }
    const co_http_limits lim = http_limits(o);
    co_cors *cors;
    if (co_cors_new(o->cors, &cors, err)) return -1;
    if (co_http_server_new(&s->loop, host, atoi(colon + 1), &lim, co_routes_handle, s->routes,
                           &s->http, err)) {
        co_cors_free(cors);
        return -1;
    }
    co_http_server_set_cors(s->http, cors);
    co_http_server_on_refuse(s->http, co_routes_refused, s->routes);
    co_routes_set_http(s->routes, s->http);
    snprintf(s->url, sizeof s->url, strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host,
             co_http_server_port(s->http));
    uv_signal_init(&s->loop, &s->sigterm);
    uv_signal_init(&s->loop, &s->sigint);
    uv_signal_init(&s->loop, &s->sighup);
    uv_timer_init(&s->loop, &s->drain_timer);
    uv_timer_init(&s->loop, &s->wd_timer);
    s->sigterm.data = s->sigint.data = s->sighup.data = s->drain_timer.data = s->wd_timer.data = s;
    s->handles_ok = true;
    const uint64_t wd_ms = mw_notify_watchdog_usec() / 2000;
    if (wd_ms) uv_timer_start(&s->wd_timer, on_watchdog, wd_ms, wd_ms);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sighup, on_sighup, SIGHUP);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static void print_banner(const serve *s) {
    const co_opts *o = s->o;
    char keys[64];
    snprintf(keys, sizeof keys, s->auth ? "%d API key(s)" : "no API key (open to any client)",
             co_auth_count(s->auth));
    const md_config *c = &s->model->cfg;
    fprintf(stderr,
            "coordinator serve: %s — model '%s' (%s, %d layers), %d slot(s) x %lld positions, "
            "prompt chunk %d, queue %d, experts %s, %d thread(s), chat %s, %s\n",
            s->url, s->model_id, c->arch, c->n_layer, s->n_slots, (long long)s->n_ctx, o->chunk,
            o->max_queue, s->experts->name, kn_pool_size(s->pool),
            !s->text                      ? "none (no tokenizer: token-id prompts)"
            : co_stext_chat_name(s->text) ? co_stext_chat_name(s->text)
                                          : "none (no chat format)",
            keys);
}

static int open_all(serve *s, mw_err *err) {
    /* the keys first: a bad key file stops serve before the model loads */
    mw_notify_status("loading %s", s->o->model);
    if (co_auth_new(s->o->api_key, s->o->api_key_file, getenv("MOEWIRE_API_KEY"), &s->auth, err) ||
        open_model(s, err) || open_scheduler(s, err) || open_http(s, err))
        return -1;
    print_banner(s);
    if (write_ready_file(s, err)) return -1;
    mw_notify_status("serving %s on %s", s->model_id, s->url);
    mw_notify("READY=1");
    return 0;
}

static void close_all(serve *s) {
    if (s->handles_ok) {
        finish(s);
    } else {
        co_sched_free(s->sched);
        co_http_server_close(s->http);
    }
    if (s->loop_ok) {
        uv_run(&s->loop, UV_RUN_DEFAULT); /* until every handle is released */
        uv_loop_close(&s->loop);
    }
    co_routes_free(s->routes);
    co_auth_free(s->auth);
    co_metrics_free(s->metrics);
    free(s->nodes);
    free(s->cells);
    free(s->reload_buf);
    co_admin_free(s->admin);
    mw_err terr;
    if (co_trace_close(s->trace, stderr, &terr))
        fprintf(stderr, "coordinator serve: %s\n", terr.msg);
    md_ctx_free(s->ctx);
    if (s->experts) s->experts->destroy(s->experts); /* stops loopback nodes */
    co_stext_free(s->text);
    md_model_free(s->model);
    if (s->src) vx_source_close(s->src);
    kn_pool_destroy(s->pool);
    if (s->o->ready_file) unlink(s->o->ready_file);
}

int co_serve(const co_opts *o) {
    serve s = {.o = o};
    mw_err err = {{0}};
    int rc = 0;
#ifdef __GLIBC__
    /* Request bodies of megabytes come and go, and the server must shrink back after them.
     * glibc raises its mmap threshold to the size of each large block freed, so the next ones
     * come from the heap and their pages stay: a fixed threshold keeps large blocks mapped,
     * given back when freed (the JSON they hold is co_prep's to give back). */
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
#endif
    if (open_all(&s, &err)) {
        fprintf(stderr, "coordinator serve: %s\n", err.msg);
        rc = 1;
    } else {
        uv_run(&s.loop, UV_RUN_DEFAULT);
        fprintf(stderr, "coordinator serve: stopped\n");
    }
    close_all(&s);
    return rc;
}
