/* vindex/vx_fleet_report.c — the plan's report for people: what went in (topology, model,
 * statistics and their sha256), per host what it holds against its budget and the share of the
 * load it serves against its share of the speed, per layer the balance beside even ranges', the
 * replicas, the pairs kept together, the hosts a row reaches and the round trip, then the
 * predicted decode speed and movement ratio. */
#include <stdlib.h>

#include "vindex/vx_fleet_internal.h"

#define GIB 1073741824.0

/* Bytes in GiB, or MiB below one GiB. */
static const char *size_text(double b, char buf[32]) {
    if (b >= GIB)
        snprintf(buf, 32, "%.2f GiB", b / GIB);
    else
        snprintf(buf, 32, "%.2f MiB", b / (1 << 20));
    return buf;
}

static void inputs(const vx__fleet *f, FILE *r) {
    uint64_t bytes = 0;
    int moe = 0;
    for (int l = 0; l < f->in.n_layer; l++) bytes += f->ext[l] * f->in.n_expert, moe += !!f->ext[l];
    fprintf(r, "plan: topology %s (%s, sha256 %.16s…), %d host(s), %d coordinator(s)\n",
            f->topo.path, f->topo.name, f->topo.sha256, f->topo.n_hosts, f->topo.n_coords);
    char b[32];
    fprintf(r, "model: %s, %s %.16s…, %d MoE layers × %d experts, top-%d, %s of experts\n",
            f->model, f->family, f->fingerprint, moe, f->in.n_expert, f->in.k,
            size_text((double)bytes, b));
    if (!f->have_stats) fprintf(r, "statistics: none (each expert expected at k/E of the rows)\n");
    for (size_t i = 0; f->have_stats && i < f->stats.n_src; i++)
        fprintf(r, "statistics: %s, trace sha256 %s\n", f->o->stats, f->stats.src[i].sha256);
    fprintf(r, "policy: %d .. %d owner(s) per expert, hot replicas in %.0f%% of the spare memory\n",
            f->topo.min_owners, f->topo.max_owners, 100 * f->topo.replica_memory);
}

static void hosts(const vx__fleet *f, FILE *r) {
    const vx_plan *p = &f->plan;
    double total = 0, speed = 0;
    for (int i = 0; i < p->n_layer * p->n_host; i++) total += p->load_share[i];
    for (int h = 0; h < p->n_host; h++) speed += f->hosts[h].read_gbs;
    fprintf(r, "hosts:\n");
    for (int h = 0; h < p->n_host; h++) {
        const vx_topo_host *th = &f->topo.hosts[h];
        double share = 0;
        long extents = 0;
        char b1[32], b2[32];
        for (int l = 0; l < p->n_layer; l++) {
            share += p->load_share[(size_t)l * p->n_host + h];
            for (int e = 0; e < p->n_expert; e++)
                extents += (p->owners[(size_t)l * p->n_expert + e] >> h) & 1;
        }
        fprintf(r,
                "  %-12s %-24s %-13s %7.1f GB/s  %6ld extents, %s of %s (%3.0f%%)  "
                "load %5.1f%% (speed %5.1f%%)%s\n",
                th->name, th->endpoint, th->platform->name, th->read_gbs, extents,
                size_text((double)p->host_bytes[h], b1), size_text(th->memory_bytes, b2),
                th->memory_bytes > 0 ? 100 * p->host_bytes[h] / th->memory_bytes : 0,
                total > 0 ? 100 * share / total : 0, 100 * th->read_gbs / speed,
                p->host_bytes[h] ? "" : "  (holds nothing: no node runs there)");
    }
}

static void layers(const vx__fleet *f, FILE *r) {
    fprintf(r, "layers (balance: the mean of load over speed / its max; 1 is even):\n"
               "  layer  balance  even ranges  replicas  pairs kept  hosts/row  round trip\n");
    for (int l = 0; l < f->plan.n_layer; l++) {
        const vx_plan_layer *pl = &f->plan.layers[l];
        if (!pl->moe) continue;
        char pairs[32] = "-";
        if (pl->pairs_total)
            snprintf(pairs, sizeof pairs, "%d/%d", pl->pairs_kept, pl->pairs_total);
        fprintf(r, "  %5d  %7.4f  %11.4f  %8d  %10s  %9.2f  %7.0f us\n", l, pl->balance,
                pl->range_balance, pl->replicas, pairs, pl->nodes_per_row, pl->rt_us);
    }
}

static void summary(const vx__fleet *f, FILE *r) {
    const vx_plan *p = &f->plan;
    int replicas = 0;
    double rt = 0;
    for (int l = 0; l < p->n_layer; l++)
        replicas += p->layers[l].replicas, rt += p->layers[l].rt_us;
    fprintf(r,
            "balance: %.4f at worst, %.4f on average (even expert ranges: %.4f); %d replica(s)\n",
            p->balance_min, p->balance_mean, p->range_balance_mean, replicas);
    fprintf(r, "predicted, one sequence decoding: %.2f ms of expert round trips per token",
            rt / 1e3);
    if (f->in.coord_gbs > 0)
        fprintf(r, " + %.2f ms of the coordinator's dense reads: %.1f tok/s",
                (double)f->in.dense_bytes / (f->in.coord_gbs * 1e6), p->tok_s);
    else
        fprintf(r,
                ": at most %.1f tok/s (the coordinator's read_gbs is not given: its trunk is "
                "not counted)",
                p->tok_s);
    fprintf(r, "\n  wire %.3f MB and experts %.3f GB read per token: movement ratio %.3g\n",
            p->wire_per_token / 1e6, p->read_per_token / 1e9,
            p->read_per_token > 0 ? p->wire_per_token / p->read_per_token : 0);
    fprintf(r, "planned in %.3f s\n", f->seconds);
}

char *vx__fleet_report(const vx__fleet *f) {
    char *text = NULL;
    size_t n = 0;
    FILE *r = open_memstream(&text, &n);
    if (!r) return NULL;
    inputs(f, r);
    hosts(f, r);
    layers(f, r);
    summary(f, r);
    fclose(r);
    return text;
}
