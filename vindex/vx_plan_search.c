/* vindex/vx_plan_search.c — the planner's two passes after packing: a local search that lowers
 * the layer's worst host (load over speed) by moving one of its copies to a host with a free slot
 * or swapping it for a smaller copy elsewhere, and the pass that brings co-activated pairs onto
 * one host where a move or a swap leaves the worst host no worse than it was. */
#include <math.h>
#include <stdlib.h>

#include "vindex/vx_plan_internal.h"

#define MAX_REFINE   64 /* local-search steps per layer */
#define GOOD_ENOUGH  0.9999
#define MAX_COLOCATE 256 /* pairs considered per layer */
#define WINDOW       64  /* copies looked at per swap candidate */

static int worst_host(const vx_plan_in *in, const double *L) {
    int m = 0;
    for (int h = 1; h < in->n_host; h++)
        if (L[h] / vx__speed(in, h) > L[m] / vx__speed(in, m)) m = h;
    return m;
}

/* ---- local search --------------------------------------------------------------------------- */

typedef struct move {
    int i, j, g; /* copy i goes to host g; j >= 0: copy j comes back in exchange */
    double to;   /* the larger of the two hosts' loads over speed afterwards */
} move;

/* The first copy whose share is below s (copies are sorted by share, largest first). */
static int first_below(const vx__layer *y, double s) {
    int lo = 0, hi = y->n_items;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (y->items[mid].share < s)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Copy i of the worst host m: to a free slot elsewhere, or swapped for a smaller copy. The swap
 * that helps most takes about `excess` (m's load above its share of the ideal) off m, so only the
 * copies whose share is near share_i − excess are looked at (a window of the sorted copies). */
static void try_copy(const vx_plan_in *in, const vx__layer *y, int i, int m, double excess,
                     move *best) {
    const vx__item *a = &y->items[i];
    const double vm = vx__speed(in, m);
    for (int g = 0; g < in->n_host; g++) {
        if (g == m || y->free[g] <= 0 || vx__holds(y, g, a->expert)) continue;
        double to = fmax((y->L[m] - a->share) / vm, (y->L[g] + a->share) / vx__speed(in, g));
        if (to < best->to) *best = (move){i, -1, g, to};
    }
    const int lo = first_below(y, a->share), mid = first_below(y, a->share - excess);
    const int from = mid - WINDOW / 2 > lo ? mid - WINDOW / 2 : lo;
    for (int j = from; j < y->n_items && j < from + WINDOW; j++) {
        const vx__item *b = &y->items[j];
        const int g = b->host;
        if (g == m || b->pinned || vx__holds(y, g, a->expert) || vx__holds(y, m, b->expert))
            continue;
        double to = fmax((y->L[m] - a->share + b->share) / vm,
                         (y->L[g] - b->share + a->share) / vx__speed(in, g));
        if (to < best->to) *best = (move){i, j, g, to};
    }
}

void vx__refine(const vx_plan_in *in, vx__layer *y) {
    double sum = 0, speed = 0;
    for (int h = 0; h < in->n_host; h++) sum += y->L[h], speed += vx__speed(in, h);
    for (int step = 0; step < MAX_REFINE && vx__balance(in, y->L) < GOOD_ENOUGH; step++) {
        const int m = worst_host(in, y->L);
        const double cur = y->L[m] / vx__speed(in, m);
        const double excess = y->L[m] - sum / speed * vx__speed(in, m);
        move best = {-1, -1, -1, cur * (1 - 1e-9)};
        for (int i = 0; i < y->n_items; i++)
            if (y->items[i].host == m && !y->items[i].pinned) try_copy(in, y, i, m, excess, &best);
        if (best.i < 0) return;
        vx__take(y, best.i);
        if (best.j >= 0) {
            vx__take(y, best.j);
            vx__put(y, best.j, m);
        }
        vx__put(y, best.i, best.g);
    }
}

/* ---- pairs ---------------------------------------------------------------------------------- */

/* The one copy of expert e, or -1 when it has several (replicas are left where they are). */
static int only_copy(const vx__layer *y, int e) {
    if (__builtin_popcountll(y->own[e]) != 1) return -1;
    for (int i = 0; i < y->n_items; i++)
        if (y->items[i].expert == e) return i;
    return -1;
}

/* Brings copy c onto host h (next to copy `anchor`): into a free slot, or in exchange for the copy
 * of h whose share is nearest, when neither host then passes `limit` (load over speed). */
static bool bring_together(const vx_plan_in *in, vx__layer *y, int c, int anchor, int h,
                           double limit) {
    const vx__item *a = &y->items[c];
    const int from = a->host;
    if (a->pinned || vx__holds(y, h, a->expert)) return false;
    if (y->free[h] > 0 && (y->L[h] + a->share) / vx__speed(in, h) <= limit) {
        vx__take(y, c);
        vx__put(y, c, h);
        return true;
    }
    int best = -1;
    for (int j = 0; j < y->n_items; j++) {
        const vx__item *b = &y->items[j];
        if (b->host != h || j == anchor || b->pinned || vx__holds(y, from, b->expert)) continue;
        if ((y->L[h] - b->share + a->share) / vx__speed(in, h) > limit ||
            (y->L[from] - a->share + b->share) / vx__speed(in, from) > limit)
            continue;
        if (best < 0 || fabs(b->share - a->share) < fabs(y->items[best].share - a->share)) best = j;
    }
    if (best < 0) return false;
    vx__take(y, c);
    vx__take(y, best);
    vx__put(y, best, from);
    vx__put(y, c, h);
    return true;
}

void vx__colocate(const vx_plan_in *in, vx__layer *y, const vx_rstats_layer *st,
                  vx_plan_layer *out) {
    const double limit = vx__worst(in, y->L);
    for (size_t p = 0; p < st->n_top && p < MAX_COLOCATE; p++) {
        const int a = st->top[p].a, b = st->top[p].b;
        out->pairs_total++;
        if (y->own[a] & y->own[b]) {
            out->pairs_kept++;
            continue;
        }
        const int ia = only_copy(y, a), ib = only_copy(y, b);
        if (ia < 0 || ib < 0) continue;
        if (bring_together(in, y, ib, ia, y->items[ia].host, limit) ||
            bring_together(in, y, ia, ib, y->items[ib].host, limit)) {
            y->items[ia].pinned = y->items[ib].pinned = true;
            out->pairs_kept++;
        }
    }
}
