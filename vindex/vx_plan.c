/* vindex/vx_plan.c — the placement (vx_plan.h): memory turned into extent slots per layer and
 * host, then per MoE layer the copies of each expert (hot replicas by load per copy, as DeepSeek's
 * EPLB replicates), packed largest first onto the host whose load over speed stays lowest, a
 * local search that moves or swaps copies off the worst host, and the pass that keeps co-activated
 * pairs on one host where that leaves the worst host no worse. */
#include "vindex/vx_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_plan_internal.h"

#define GIB         1073741824.0
#define RETRY_BELOW 0.99 /* a layer less even than this tries fewer hot replicas */

/* ---- memory --------------------------------------------------------------------------------- */

static double model_bytes(const vx_plan_in *in) {
    double b = 0;
    for (int l = 0; l < in->n_layer; l++) b += (double)in->extent_bytes[l] * in->n_expert;
    return b;
}

static int refuse(const vx_plan_in *in, double need, double have, mw_err *err) {
    char list[512];
    size_t at = 0;
    for (int h = 0; h < in->n_host && at < sizeof list - 40; h++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s %.4g", h ? ", " : "",
                               in->hosts[h].name, in->hosts[h].memory_bytes / GIB);
    return mw_errf(err,
                   "the fleet cannot hold the model: %d cop%s of its experts take %.1f GiB, the "
                   "hosts' budgets add up to %.1f GiB (%s): %.1f GiB short",
                   in->min_owners, in->min_owners == 1 ? "y" : "ies", need / GIB, have / GIB, list,
                   (need - have) / GIB);
}

/* The host with the most bytes left that can take one more extent of layer l, or -1. */
static int roomiest(const vx_plan_in *in, const int *slots_l, const double *left, int l) {
    int g = -1;
    for (int h = 0; h < in->n_host; h++)
        if (slots_l[h] < in->n_expert && left[h] >= (double)in->extent_bytes[l] &&
            (g < 0 || left[h] > left[g]))
            g = h;
    return g;
}

/* Each host's budget spread over the layers in proportion to their bytes, whole extents; layers
 * short of min_owners copies then take extents where bytes are left; what is still left becomes
 * replica slots, a layer at a time. */
static int allocate_slots(const vx_plan_in *in, int *slots, mw_err *err) {
    const int H = in->n_host, E = in->n_expert;
    const double total = model_bytes(in);
    double have = 0, *left = calloc((size_t)H, sizeof *left);
    if (!left) return mw_errf(err, "out of memory");
    for (int h = 0; h < H; h++) have += (left[h] = in->hosts[h].memory_bytes);
    if (in->min_owners * total > have) {
        free(left);
        return refuse(in, in->min_owners * total, have, err);
    }
    for (int l = 0; l < in->n_layer; l++)
        for (int h = 0; in->extent_bytes[l] && h < H; h++) {
            double s = (double)in->extent_bytes[l];
            int n = (int)floor(in->hosts[h].memory_bytes * (E * s / total) / s);
            slots[l * H + h] = n < E ? n : E;
            left[h] -= slots[l * H + h] * s;
        }
    int rc = 0;
    for (int l = 0; l < in->n_layer && !rc; l++) {
        int have_l = 0;
        for (int h = 0; in->extent_bytes[l] && h < H; h++) have_l += slots[l * H + h];
        for (; in->extent_bytes[l] && have_l < E * in->min_owners; have_l++) {
            int g = roomiest(in, slots + l * H, left, l);
            if (g < 0) {
                rc = refuse(in, in->min_owners * total, have, err);
                break;
            }
            slots[l * H + g]++;
            left[g] -= (double)in->extent_bytes[l];
        }
    }
    for (bool more = !rc; more;) {
        more = false;
        for (int l = 0; l < in->n_layer; l++) {
            int g = in->extent_bytes[l] ? roomiest(in, slots + l * H, left, l) : -1;
            if (g < 0) continue;
            slots[l * H + g]++;
            left[g] -= (double)in->extent_bytes[l];
            more = true;
        }
    }
    free(left);
    return rc;
}

/* ---- copies per expert ---------------------------------------------------------------------- */

/* Whether expert a should get a copy before b: the larger load per copy, then the lower id. */
static bool before(const double *w, const int *r, int a, int b) {
    double ka = w[a] / r[a], kb = w[b] / r[b];
    return ka > kb || (ka == kb && a < b);
}

static void sift(int *heap, int n, int i, const double *w, const int *r) {
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && before(w, r, heap[c + 1], heap[c])) c++;
        if (!before(w, r, heap[c], heap[i])) return;
        int t = heap[c];
        heap[c] = heap[i];
        heap[i] = t;
        i = c;
    }
}

/* r[e] copies: min_owners each, then R more one at a time to the expert with the largest load per
 * copy, up to max_owners (and the number of hosts). */
static int replicate(const vx_plan_in *in, const double *w, int R, int *r) {
    const int E = in->n_expert;
    const int cap = in->max_owners < in->n_host ? in->max_owners : in->n_host;
    for (int e = 0; e < E; e++) r[e] = in->min_owners;
    if (cap <= in->min_owners || R <= 0) return 0;
    int *heap = malloc((size_t)E * sizeof *heap), n = E;
    if (!heap) return -1;
    for (int e = 0; e < E; e++) heap[e] = e;
    for (int i = n / 2 - 1; i >= 0; i--) sift(heap, n, i, w, r);
    while (R-- > 0 && n > 0) {
        int e = heap[0];
        if (++r[e] == cap) heap[0] = heap[--n];
        sift(heap, n, 0, w, r);
    }
    free(heap);
    return 0;
}

/* ---- packing -------------------------------------------------------------------------------- */

static int by_share(const void *x, const void *z) {
    const vx__item *a = x, *b = z;
    if (a->share != b->share) return a->share < b->share ? 1 : -1;
    return a->expert - b->expert;
}

/* No host with a free slot lacks the copy's expert: a host h that lacks it gives one of its
 * copies to the host g with the free slot, and takes this one. */
static int repair(const vx_plan_in *in, vx__layer *y, int i, mw_err *err) {
    const int e = y->items[i].expert;
    int g = 0;
    while (g < in->n_host && y->free[g] <= 0) g++;
    int best = -1;
    double best_v = 0;
    for (int j = 0; g < in->n_host && j < y->n_items; j++) {
        const vx__item *c = &y->items[j];
        if (c->host < 0 || c->host == g || vx__holds(y, c->host, e) || vx__holds(y, g, c->expert))
            continue;
        double v = fmax((y->L[g] + c->share) / vx__speed(in, g),
                        (y->L[c->host] - c->share + y->items[i].share) / vx__speed(in, c->host));
        if (best < 0 || v < best_v) best = j, best_v = v;
    }
    if (best < 0)
        return mw_errf(err, "layer %d: no way to put the %d copies of expert %d on distinct hosts",
                       y->l, __builtin_popcountll(y->own[e]) + 1, e);
    int h = y->items[best].host;
    vx__take(y, best);
    vx__put(y, best, g);
    vx__put(y, i, h);
    return 0;
}

/* Largest copy first, each onto the host with a free slot, without that expert, whose load over
 * speed ends lowest (ties: the lower host). */
static int pack(const vx_plan_in *in, vx__layer *y, mw_err *err) {
    for (int i = 0; i < y->n_items; i++) {
        const vx__item *it = &y->items[i];
        int best = -1;
        double best_v = 0;
        for (int h = 0; h < in->n_host; h++) {
            if (y->free[h] <= 0 || vx__holds(y, h, it->expert)) continue;
            double v = (y->L[h] + it->share) / vx__speed(in, h);
            if (best < 0 || v < best_v) best = h, best_v = v;
        }
        if (best >= 0)
            vx__put(y, i, best);
        else if (repair(in, y, i, err))
            return -1;
    }
    return 0;
}

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
    if (!r || replicate(in, y->w, R, r)) {
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
    qsort(y->items, (size_t)y->n_items, sizeof *y->items, by_share);
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
    if (make_items(in, y, R, err) || pack(in, y, err)) return -1;
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
    int rc = !slots || !uniform ? mw_errf(err, "out of memory") : allocate_slots(in, slots, err);
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

void vx_plan_free(vx_plan *p) {
    free(p->owners);
    free(p->load_share);
    free(p->host_bytes);
    free(p->layers);
    memset(p, 0, sizeof *p);
}
