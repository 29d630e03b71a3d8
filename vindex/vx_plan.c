/* vindex/vx_plan.c — the placement's first steps (vx_plan.h): memory turned into extent slots per
 * layer and host, the copies of each expert (hot replicas by load per copy, as DeepSeek's EPLB
 * replicates), and the packing of copies largest first onto the host whose load over speed stays
 * lowest. vx_plan_run.c drives them layer by layer, with the local search and the pairs
 * (vx_plan_search.c) and the prediction (vx_plan_predict.c). */
#include "vindex/vx_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_plan_internal.h"

#define GIB 1073741824.0

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
int vx__allocate_slots(const vx_plan_in *in, int *slots, mw_err *err) {
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
int vx__replicate(const vx_plan_in *in, const double *w, int R, int *r) {
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

int vx__by_share(const void *x, const void *z) {
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
int vx__pack(const vx_plan_in *in, vx__layer *y, mw_err *err) {
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

void vx_plan_free(vx_plan *p) {
    free(p->owners);
    free(p->load_share);
    free(p->host_bytes);
    free(p->layers);
    memset(p, 0, sizeof *p);
}
