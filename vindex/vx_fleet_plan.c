/* vindex/vx_fleet_plan.c — `vindex plan`: reads the topology, the model's shape (layers, extent
 * sizes, width, dense bytes, fingerprint) and the routing statistics, checks that they describe
 * the same model, turns them into the planner's inputs (each expert's load as rows per token,
 * uniform k/E for a layer without statistics), runs the planner and hands the result to the
 * writer. */
#include <stdlib.h>
#include <string.h>

#include "util/mw_progress.h"
#include "util/mw_time.h"
#include "vindex/vx_fleet_internal.h"

/* Bytes per value of the topology's wire codec ("f16", "bf16+lz4", ...). */
static int wire_bytes(const char *wire, mw_err *err) {
    static const struct {
        const char *name;
        int bytes;
    } codecs[] = {{"f32", 4}, {"f16", 2}, {"bf16", 2}};
    size_t n = strcspn(wire, "+");
    if (wire[n] && strcmp(wire + n, "+lz4")) n = 0;
    for (size_t i = 0; n && i < sizeof codecs / sizeof codecs[0]; i++)
        if (strlen(codecs[i].name) == n && !strncmp(codecs[i].name, wire, n))
            return codecs[i].bytes;
    return mw_errf(err, "model.wire '%s' is not f32, f16 or bf16 (optionally +lz4)", wire), -1;
}

/* A GGUF model's fingerprint reads the whole file: its progress on stderr. */
static void on_fingerprint(void *ctx, const char *what, uint64_t done, uint64_t total) {
    vx__fleet *f = ctx;
    if (!f->progress_on) {
        char name[64];
        snprintf(name, sizeof name, "vindex plan: %s", what);
        mw_progress_init(&f->progress, stderr, name, true);
        f->progress_on = true;
    }
    mw_progress_update(&f->progress, done, total);
}

static int open_model(vx__fleet *f, mw_err *err) {
    vx_expert_set none = {0};
    const vx_source_opts so = {.experts = &none,
                               .dense = false,
                               .verify_on_mount = false,
                               .progress = on_fingerprint,
                               .progress_ctx = f};
    if (!f->model) f->model = f->topo.model_path;
    if (vx_source_open(f->model, &so, &f->src, err)) return -1;
    const uint64_t cost = vx_source_fingerprint_cost(f->src);
    if (cost)
        fprintf(stderr, "vindex plan: fingerprinting %s (%.2f GB to read)\n", f->model,
                (double)cost / 1e9);
    f->fingerprint = vx_source_fingerprint(f->src);
    f->family = vx_source_arch(f->src);
    if (!f->fingerprint) return mw_errf(err, "%s: no fingerprint (out of memory)", f->model);
    if (f->topo.fingerprint[0] && strcmp(f->topo.fingerprint, f->fingerprint))
        return mw_errf(err, "%s: the topology pins model %.16s…, %s is %.16s…", f->topo.path,
                       f->topo.fingerprint, f->model, f->fingerprint);
    return 0;
}

static int open_stats(vx__fleet *f, int L, int E, int k, mw_err *err) {
    if (!f->o->stats) return 0;
    if (vx_rstats_load(f->o->stats, &f->stats, err)) return -1;
    f->have_stats = true;
    const vx_trace_info *i = &f->stats.info;
    if (strcmp(i->fingerprint, f->fingerprint) || (int)i->n_layer != L || (int)i->n_expert != E ||
        (int)i->k != k)
        return mw_errf(err,
                       "%s: statistics of model %.16s… (%u layers, %u experts, top-%u), the model "
                       "is %.16s… (%d, %d, top-%d)",
                       f->o->stats, i->fingerprint, i->n_layer, i->n_expert, i->k, f->fingerprint,
                       L, E, k);
    return 0;
}

/* Rows per token for each expert: count / rows where the layer was traced, k/E elsewhere. */
static void loads(vx__fleet *f, int L, int E, int k) {
    for (int l = 0; l < L; l++) {
        const vx_rstats_layer *sl = f->have_stats ? &f->stats.layers[l] : NULL;
        for (int e = 0; e < E; e++)
            f->load[(size_t)l * E + e] =
                sl && sl->rows ? (double)sl->count[e] / (double)sl->rows : (double)k / E;
    }
}

static int build_in(vx__fleet *f, mw_err *err) {
    const vx_source *s = f->src;
    const int L = vx_source_n_layers(s), E = vx_source_n_experts(s), k = vx_source_experts_used(s);
    if (L < 1 || E < 1 || k < 1)
        return mw_errf(err, "%s: not a mixture of experts (%d layers, %d experts, top-%d)",
                       f->model, L, E, k);
    const int wb = wire_bytes(f->topo.wire, err);
    if (wb < 0 || open_stats(f, L, E, k, err)) return -1;
    f->ext = calloc((size_t)L, sizeof *f->ext);
    f->load = malloc((size_t)L * E * sizeof *f->load);
    if (!f->ext || !f->load) return mw_errf(err, "out of memory");
    for (int l = 0; l < L; l++) f->ext[l] = vx_source_extent_bytes(s, l);
    loads(f, L, E, k);
    for (int h = 0; h < f->topo.n_hosts; h++) {
        const vx_topo_host *th = &f->topo.hosts[h];
        f->hosts[h] = (vx_plan_host){th->name, th->memory_bytes, th->read_gbs, th->link.rtt_us,
                                     th->link.gbit};
    }
    f->in = (vx_plan_in){.n_layer = L,
                         .n_expert = E,
                         .k = k,
                         .extent_bytes = f->ext,
                         .load = f->load,
                         .stats = f->have_stats ? f->stats.layers : NULL,
                         .n_host = f->topo.n_hosts,
                         .hosts = f->hosts,
                         .min_owners = f->topo.min_owners,
                         .max_owners = f->topo.max_owners,
                         .replica_memory = f->topo.replica_memory,
                         .dense_bytes = vx_source_dense_bytes(s),
                         .coord_gbs = f->topo.coords[0].read_gbs,
                         .width = vx_source_width(s),
                         .wire_bytes = wb,
                         .progress = f->o->progress,
                         .progress_ctx = f->o->progress_ctx};
    return 0;
}

int vx_fleet_plan(const vx_fleet_opts *o, FILE *report, mw_err *err) {
    vx__fleet f = {.o = o, .model = o->model};
    int rc = vx_topology_load(o->topology, &f.topo, err) || open_model(&f, err) || build_in(&f, err)
                 ? -1
                 : 0;
    if (!rc) {
        const double t0 = mw_now_s();
        rc = vx_plan_run(&f.in, &f.plan, err);
        f.seconds = mw_now_s() - t0;
    }
    if (!rc) rc = vx__fleet_write(&f, report, err);
    vx_plan_free(&f.plan);
    free(f.ext);
    free(f.load);
    if (f.have_stats) vx_rstats_free(&f.stats);
    if (f.src) vx_source_close(f.src);
    vx_topology_free(&f.topo);
    return rc;
}
