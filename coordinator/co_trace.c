/* coordinator/co_trace.c — the routing trace of a generate or serve run: the writer for the
 * model, and the route sink that hands it each step's rows and each MoE layer's selections. */
#include "coordinator/co_trace.h"

#include <stdlib.h>
#include <string.h>

#include "vindex/vx_trace.h"

struct co_trace {
    char *path;
    vx_trace_writer *w;
    md_ctx *ctx;
};

static void on_step(void *ud, const md_row *rows, int64_t T) {
    co_trace *t = ud;
    const size_t stride = sizeof(md_row) / sizeof(int32_t);
    vx_trace_step(t->w, T, &rows[0].seq, &rows[0].pos, &rows[0].token, stride);
}

static void on_layer(void *ud, int layer, int64_t T, int k, const int32_t *ids,
                     const float *weights) {
    co_trace *t = ud;
    vx_trace_layer(t->w, layer, T, k, ids, weights);
}

int co_trace_open(const char *path, const vx_source *src, const md_model *m, co_trace **out,
                  mw_err *err) {
    *out = NULL;
    const md_config *c = &m->cfg;
    if (c->n_expert < 1) return mw_errf(err, "--trace-routing: %s has no routed experts", c->arch);
    vx_trace_info info = {.n_layer = (uint32_t)c->n_layer,
                          .n_expert = (uint32_t)c->n_expert,
                          .k = (uint32_t)c->n_expert_used};
    snprintf(info.family, sizeof info.family, "%s", c->arch);
    const uint64_t cost = vx_source_fingerprint_cost(src);
    if (cost)
        fprintf(stderr, "coordinator: fingerprinting %s for the routing trace (%.2f GB to read)\n",
                vx_source_path(src), (double)cost / 1e9);
    const char *fp = vx_source_fingerprint(src);
    if (!fp) return mw_errf(err, "--trace-routing: out of memory computing the fingerprint");
    snprintf(info.fingerprint, sizeof info.fingerprint, "%s", fp);
    co_trace *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return mw_errf(err, "out of memory");
    }
    if (vx_trace_create(path, &info, 0, &t->w, err)) {
        free(t->path);
        free(t);
        return mw_err_wrap(err, "--trace-routing");
    }
    *out = t;
    return 0;
}

void co_trace_attach(co_trace *t, md_ctx *ctx) {
    if (!t) return;
    md_route_sink s = {.step = on_step, .layer = on_layer, .ud = t};
    md_ctx_set_route_sink(ctx, &s);
    t->ctx = ctx;
}

int co_trace_close(co_trace *t, FILE *report, mw_err *err) {
    if (!t) return 0;
    if (t->ctx) md_ctx_set_route_sink(t->ctx, NULL);
    vx_trace_counts n;
    int rc = vx_trace_finish(t->w, &n, err);
    if (!rc && report) {
        fprintf(report,
                "routing trace: %s: %llu step(s), %llu row(s), %llu layer record(s), %.1f MB",
                t->path, (unsigned long long)n.steps, (unsigned long long)n.rows,
                (unsigned long long)n.layer_records, (double)n.body_bytes / 1e6);
        if (n.dropped)
            fprintf(report, "; %llu layer record(s) dropped (the disk fell behind)",
                    (unsigned long long)n.dropped);
        fputc('\n', report);
    }
    free(t->path);
    free(t);
    return rc;
}
