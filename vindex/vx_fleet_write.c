/* vindex/vx_fleet_write.c — the files of a fleet plan: one shard file per host (the JSON map
 * `expert-node --experts @FILE` reads), plan.json (everything the plan decided and predicted,
 * with the topology's and the statistics' sha256), report.txt, and for deploy/moewire nodes.tsv
 * (one line per host) and coordinator.nodes (serve's --nodes). Each file is written whole to a
 * temporary name and renamed into place. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vindex/vx_fleet_internal.h"

#define GIB 1073741824.0

static int put_file(const char *dir, const char *name, const char *text, mw_err *err) {
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return mw_errf(err, "%s: cannot create: %s", tmp, strerror(errno));
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        remove(tmp);
        return mw_errf(err, "%s: cannot write", path);
    }
    return 0;
}

static int put_json(const char *dir, const char *name, json_t *j, mw_err *err) {
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text) return mw_errf(err, "out of memory writing %s", name);
    size_t n = strlen(text);
    char *t = realloc(text, n + 2);
    if (t) t[n] = '\n', t[n + 1] = 0, text = t;
    int rc = put_file(dir, name, text, err);
    free(text);
    return rc;
}

/* ---- shard files ---------------------------------------------------------------------------- */

/* A layer's experts on host h as numbers and "a-b" ranges; NULL when it holds none. */
static json_t *layer_experts(const vx_plan *p, int l, int h) {
    json_t *arr = NULL;
    for (int e = 0; e < p->n_expert;) {
        if (!((p->owners[(size_t)l * p->n_expert + e] >> h) & 1)) {
            e++;
            continue;
        }
        int e1 = e;
        while (e1 + 1 < p->n_expert && ((p->owners[(size_t)l * p->n_expert + e1 + 1] >> h) & 1))
            e1++;
        if (!arr) arr = json_array();
        char r[32];
        snprintf(r, sizeof r, "%d-%d", e, e1);
        json_array_append_new(arr, e == e1 ? json_integer(e) : json_string(r));
        e = e1 + 1;
    }
    return arr;
}

static int write_shards(const vx__fleet *f, mw_err *err) {
    for (int h = 0; h < f->topo.n_hosts; h++) {
        json_t *map = json_object();
        for (int l = 0; l < f->plan.n_layer; l++) {
            json_t *arr = layer_experts(&f->plan, l, h);
            char key[16];
            snprintf(key, sizeof key, "%d", l);
            if (arr) json_object_set_new(map, key, arr);
        }
        if (json_object_size(map) == 0) { /* a host with no room: it runs no node */
            json_decref(map);
            continue;
        }
        char name[VX_TOPO_NAME_MAX + 16];
        snprintf(name, sizeof name, "shard-%s.json", f->topo.hosts[h].name);
        json_t *j = json_pack("{ss ss ss so}", "host", f->topo.hosts[h].name, "fingerprint",
                              f->fingerprint, "topology_sha256", f->topo.sha256, "experts", map);
        if (put_json(f->o->out, name, j, err)) return -1;
    }
    return 0;
}

/* ---- plan.json ------------------------------------------------------------------------------ */

static json_t *stats_json(const vx__fleet *f) {
    if (!f->have_stats) return json_null();
    json_t *sha = json_array();
    for (size_t i = 0; i < f->stats.n_src; i++)
        json_array_append_new(sha, json_string(f->stats.src[i].sha256));
    return json_pack("{ss so}", "path", f->o->stats, "trace_sha256", sha);
}

static json_t *hosts_json(const vx__fleet *f) {
    json_t *arr = json_array();
    double total = 0;
    for (int h = 0; h < f->topo.n_hosts; h++)
        for (int l = 0; l < f->plan.n_layer; l++)
            total += f->plan.load_share[(size_t)l * f->plan.n_host + h];
    for (int h = 0; h < f->topo.n_hosts; h++) {
        const vx_topo_host *th = &f->topo.hosts[h];
        double share = 0;
        for (int l = 0; l < f->plan.n_layer; l++)
            share += f->plan.load_share[(size_t)l * f->plan.n_host + h];
        json_array_append_new(arr, json_pack("{ss ss ss sI sf sf}", "name", th->name, "endpoint",
                                             th->endpoint, "platform", th->platform->name, "bytes",
                                             (json_int_t)f->plan.host_bytes[h], "memory_bytes",
                                             th->memory_bytes, "load_share",
                                             total > 0 ? share / total : 0));
    }
    return arr;
}

static json_t *layers_json(const vx__fleet *f) {
    json_t *arr = json_array();
    for (int l = 0; l < f->plan.n_layer; l++) {
        const vx_plan_layer *pl = &f->plan.layers[l];
        if (!pl->moe) continue;
        json_t *share = json_array();
        for (int h = 0; h < f->plan.n_host; h++)
            json_array_append_new(share,
                                  json_real(f->plan.load_share[(size_t)l * f->plan.n_host + h]));
        json_array_append_new(arr,
                              json_pack("{si sf sf si si si sf sf so}", "layer", l, "balance",
                                        pl->balance, "range_balance", pl->range_balance, "replicas",
                                        pl->replicas, "pairs_kept", pl->pairs_kept, "pairs_total",
                                        pl->pairs_total, "round_trip_us", pl->rt_us,
                                        "hosts_per_row", pl->nodes_per_row, "load_share", share));
    }
    return arr;
}

static int write_plan(const vx__fleet *f, mw_err *err) {
    const vx_plan *p = &f->plan;
    json_t *model =
        json_pack("{ss ss ss si si si}", "path", f->model, "fingerprint", f->fingerprint, "family",
                  f->family, "n_layer", f->in.n_layer, "n_expert", f->in.n_expert, "k", f->in.k);
    json_t *pred =
        json_pack("{sf sf sf sf sf sf}", "tok_s", p->tok_s, "wire_bytes_per_token",
                  p->wire_per_token, "expert_bytes_per_token", p->read_per_token, "movement_ratio",
                  p->read_per_token > 0 ? p->wire_per_token / p->read_per_token : 0, "balance_min",
                  p->balance_min, "balance_mean", p->balance_mean);
    json_t *j =
        json_pack("{ss si so s{ss ss} so so so so sf}", "format", "moewire-plan", "version", 1,
                  "model", model, "topology", "path", f->topo.path, "sha256", f->topo.sha256,
                  "routing_stats", stats_json(f), "hosts", hosts_json(f), "layers", layers_json(f),
                  "predicted", pred, "planner_seconds", f->seconds);
    return put_json(f->o->out, "plan.json", j, err);
}

/* ---- deploy/moewire's lines ----------------------------------------------------------------- */

/* One line per coordinator: name, address, listen, model, wire, whether it is this machine. */
static int write_coords(const vx__fleet *f, mw_err *err) {
    char *text = NULL;
    size_t n = 0;
    FILE *a = open_memstream(&text, &n);
    if (!a) return mw_errf(err, "out of memory");
    for (int c = 0; c < f->topo.n_coords; c++) {
        const vx_topo_coord *tc = &f->topo.coords[c];
        const bool local = !strncmp(tc->address, "127.", 4) || !strcmp(tc->address, "localhost") ||
                           !strcmp(tc->address, "::1");
        fprintf(a, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", tc->name, tc->address, tc->listen,
                f->topo.model_path, f->topo.wire, tc->key[0] ? tc->key : "-", local);
    }
    fclose(a);
    int rc = put_file(f->o->out, "coordinator.tsv", text, err);
    free(text);
    return rc;
}

static int write_nodes(const vx__fleet *f, mw_err *err) {
    char *tsv = NULL, *nodes = NULL;
    size_t n1 = 0, n2 = 0;
    FILE *a = open_memstream(&tsv, &n1), *b = open_memstream(&nodes, &n2);
    if (!a || !b) {
        if (a) fclose(a);
        if (b) fclose(b);
        free(tsv);
        free(nodes);
        return mw_errf(err, "out of memory");
    }
    char abs[PATH_MAX];
    const char *dir = realpath(f->o->out, abs) ? abs : f->o->out;
    for (int h = 0, first = 1; h < f->topo.n_hosts; h++) {
        const vx_topo_host *th = &f->topo.hosts[h];
        if (!f->plan.host_bytes[h]) continue;
        long extents = 0;
        for (int i = 0; i < f->plan.n_layer * f->plan.n_expert; i++)
            extents += (f->plan.owners[i] >> h) & 1;
        fprintf(a, "%s\t%s\t%s\t%s\t%s\t%s/shard-%s.json\t%d\t%s\t%d\t%ld\n", th->name,
                th->endpoint, th->platform->name, th->platform->service, th->vindex, dir, th->name,
                th->cores, th->key[0] ? th->key : "-", vx_topo_is_local(th), extents);
        fprintf(b, "%s%s%s%s", first ? "" : ",", th->endpoint, th->key[0] ? "#" : "", th->key);
        first = 0;
    }
    fputc('\n', b);
    fclose(a);
    fclose(b);
    int rc = put_file(f->o->out, "nodes.tsv", tsv, err) ||
                     put_file(f->o->out, "coordinator.nodes", nodes, err) || write_coords(f, err)
                 ? -1
                 : 0;
    free(tsv);
    free(nodes);
    return rc;
}

int vx__fleet_write(const vx__fleet *f, FILE *report, mw_err *err) {
    if (mkdir(f->o->out, 0755) && errno != EEXIST)
        return mw_errf(err, "%s: cannot create: %s", f->o->out, strerror(errno));
    char *text = vx__fleet_report(f);
    if (!text) return mw_errf(err, "out of memory");
    int rc = write_shards(f, err) || write_plan(f, err) || write_nodes(f, err) ||
                     put_file(f->o->out, "report.txt", text, err)
                 ? -1
                 : 0;
    if (!rc && report) fputs(text, report);
    free(text);
    return rc;
}
