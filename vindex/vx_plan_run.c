/* vindex/vx_plan_run.c — vx_plan_run: the plan of every MoE layer (slots, copies, packing,
 * local search, pairs, prediction), with fewer hot replicas tried where the full count leaves a
 * layer uneven, and the plan's totals. */
#include "vindex/vx_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_plan_internal.h"

#define RETRY_BELOW 0.99 /* a layer less even than this tries fewer hot replicas */

/* ---- one layer, the whole plan -------------------------------------------------------------- */

static int check_in(const vx_plan_in *in, mw_err *err) {
    if (in->n_host < 1 || in->n_host > VX_PLAN_MAX_HOSTS)
        return mw_errf(err, "a plan needs 1 .. %d hosts, not %d", VX_PLAN_MAX_HOSTS, in->n_host);
    if (in->n_expert < 1 || in->k < 1 || in->k > in->n_expert || in->n_layer < 1)
        return mw_errf(err, "a plan needs experts (%d layers, %d experts, top-%d)", in->n_layer,
                       in->n_expert, in->k);
    if (in->min_owners < 1 || in->min_owners > in->n_host || in->max_owners < in->min_owners)
        return mw_errf(err,
                       "min_owners %d needs 1 .. %d (the hosts) and max_owners (%d) at least it",
                       in->min_owners, in->n_host, in->max_owners);
    for (int h = 0; h < in->n_host; h++)
        if (!(in->hosts[h].read_gbs > 0) || !(in->hosts[h].memory_bytes >= 0))
            return mw_errf(err, "host %s: its speed and memory must be positive",
                           in->hosts[h].name);
    for (int i = 0; in->load && i < in->n_layer * in->n_expert; i++)
        if (!isfinite(in->load[i]) || in->load[i] < 0)
            return mw_errf(err, "the load of expert %d of layer %d is not a finite number >= 0",
                           i % in->n_expert, i / in->n_expert);
    return 0;
}

/* The copies of a layer's experts, largest share first. */
static int make_items(const vx_plan_in *in, vx__layer *y, int R, mw_err *err) {
    const int E = in->n_expert;
    int *r = malloc((size_t)E * sizeof *r);
    if (!r || vx__replicate(in, y->w, R, r)) {
        free(r);
        return mw_errf(err, "out of memory");
    }
    int n = 0;
    for (int e = 0; e < E; e++) n += r[e];
    y->items = calloc((size_t)n, sizeof *y->items);
    if (!y->items) {
        free(r);
        return mw_errf(err, "out of memory");
    }
    for (int e = 0; e < E; e++)
        for (int j = 0; j < r[e]; j++)
            y->items[y->n_items++] = (vx__item){e, -1, y->w[e] / r[e], false};
    qsort(y->items, (size_t)y->n_items, sizeof *y->items, vx__by_share);
    free(r);
    return 0;
}

static void keep_layer(const vx_plan_in *in, const vx__layer *y, vx_plan *p) {
    const int l = y->l, E = in->n_expert, H = in->n_host;
    memcpy(p->owners + (size_t)l * E, y->own, (size_t)E * sizeof *y->own);
    memcpy(p->load_share + (size_t)l * H, y->L, (size_t)H * sizeof *y->L);
    for (int i = 0; i < y->n_items; i++) p->host_bytes[y->items[i].host] += in->extent_bytes[l];
    vx_plan_layer *pl = &p->layers[l];
    pl->moe = true;
    pl->balance = vx__balance(in, y->L);
    pl->range_balance = vx__range_balance(in, y->w);
    pl->replicas = y->n_items - E;
    vx__predict_layer(in, y, p);
}

static void free_layer(vx__layer *y) {
    free(y->L);
    free(y->free);
    free(y->own);
    free(y->items);
    memset(y, 0, sizeof *y);
}

/* One placement of a layer with R hot replicas: copies, packing, local search. */
static int trial(const vx_plan_in *in, const int *slots_l, int R, vx__layer *y, mw_err *err) {
    const int E = in->n_expert, H = in->n_host;
    y->L = calloc((size_t)H, sizeof *y->L);
    y->free = malloc((size_t)H * sizeof *y->free);
    y->own = calloc((size_t)E, sizeof *y->own);
    if (!y->L || !y->free || !y->own) return mw_errf(err, "out of memory");
    memcpy(y->free, slots_l, (size_t)H * sizeof *y->free);
    if (make_items(in, y, R, err) || vx__pack(in, y, err)) return -1;
    vx__refine(in, y);
    return 0;
}

/* Hot replicas fill the memory left after min_owners copies (replica_memory of it), unless fewer
 * balance the layer better: with every slot filled, each host must hold as many copies as it has
 * slots, whatever its speed, so hosts of unequal speed may need free slots. Fewer replicas are
 * tried (3/4, 1/2, 1/4, ... of them) only when the full count leaves the layer uneven. */
static int plan_layer(const vx_plan_in *in, int l, const int *slots_l, double *uniform, vx_plan *p,
                      mw_err *err) {
    const int E = in->n_expert;
    int spare = -E * in->min_owners;
    for (int h = 0; h < in->n_host; h++) spare += slots_l[h];
    const int R_max = (int)floor(spare * in->replica_memory);
    const double *w = in->load ? in->load + (size_t)l * E : uniform;
    vx__layer best = {.l = l, .w = w}, t = {.l = l, .w = w};
    int rc = trial(in, slots_l, R_max, &best, err);
    double bal = rc ? 0 : vx__balance(in, best.L);
    int tries[40], n = 0;
    tries[n++] = R_max * 3 / 4;
    for (int R = R_max / 2; R > 0; R /= 2) tries[n++] = R;
    tries[n++] = 0;
    for (int i = 0; i < n && !rc && bal < RETRY_BELOW; i++) {
        if (tries[i] >= (i ? tries[i - 1] : R_max)) continue;
        free_layer(&t);
        t = (vx__layer){.l = l, .w = w};
        rc = trial(in, slots_l, tries[i], &t, err);
        if (!rc && vx__balance(in, t.L) > bal + 1e-9) {
            vx__layer x = best;
            best = t;
            t = x;
            bal = vx__balance(in, best.L);
        }
    }
    if (!rc) {
        if (in->stats && !in->no_colocate) vx__colocate(in, &best, &in->stats[l], &p->layers[l]);
        keep_layer(in, &best, p);
    }
    free_layer(&best);
    free_layer(&t);
    return rc;
}

static int alloc_plan(const vx_plan_in *in, vx_plan *p, mw_err *err) {
    const size_t L = (size_t)in->n_layer, E = (size_t)in->n_expert, H = (size_t)in->n_host;
    memset(p, 0, sizeof *p);
    p->n_layer = in->n_layer;
    p->n_expert = in->n_expert;
    p->n_host = in->n_host;
    p->owners = calloc(L * E, sizeof *p->owners);
    p->load_share = calloc(L * H, sizeof *p->load_share);
    p->host_bytes = calloc(H, sizeof *p->host_bytes);
    p->layers = calloc(L, sizeof *p->layers);
    return p->owners && p->load_share && p->host_bytes && p->layers
               ? 0
               : mw_errf(err, "out of memory for a plan of %zu layers × %zu experts", L, E);
}

int vx_plan_run(const vx_plan_in *in, vx_plan *p, mw_err *err) {
    if (check_in(in, err) || alloc_plan(in, p, err)) return -1;
    const int H = in->n_host, E = in->n_expert;
    int *slots = calloc((size_t)in->n_layer * H, sizeof *slots);
    double *uniform = malloc((size_t)E * sizeof *uniform);
    int rc =
        !slots || !uniform ? mw_errf(err, "out of memory") : vx__allocate_slots(in, slots, err);
    for (int e = 0; uniform && e < E; e++) uniform[e] = (double)in->k / E;
    for (int l = 0; !rc && l < in->n_layer; l++) {
        if (in->extent_bytes[l]) rc = plan_layer(in, l, slots + (size_t)l * H, uniform, p, err);
        if (in->progress) in->progress(in->progress_ctx, (uint64_t)l + 1, (uint64_t)in->n_layer);
    }
    if (!rc) vx__predict_total(in, p);
    free(slots);
    free(uniform);
    if (rc) vx_plan_free(p);
    return rc;
}
