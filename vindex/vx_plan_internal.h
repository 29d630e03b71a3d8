/* vindex/vx_plan_internal.h — the planner's per-layer working state, shared by its steps
 * (vx_plan.c), its search (vx_plan_search.c), its prediction (vx_plan_predict.c) and the driver
 * that runs them (vx_plan_run.c). Private to vindex/. */
#ifndef VX_PLAN_INTERNAL_H
#define VX_PLAN_INTERNAL_H

#include "vindex/vx_plan.h"

/* One copy of an expert in a layer: it serves `share` rows per token. */
typedef struct vx__item {
    int expert, host;
    double share;
    bool pinned; /* placed to keep a pair together: the refinement leaves it */
} vx__item;

typedef struct vx__layer {
    int l, n_items;
    vx__item *items;
    double *L;       /* n_host: expected rows per token on each host */
    int *free;       /* n_host: slots still open in this layer */
    uint64_t *own;   /* n_expert: host masks */
    const double *w; /* n_expert: loads */
} vx__layer;

static inline double vx__speed(const vx_plan_in *in, int h) {
    return in->hosts[h].read_gbs;
}
static inline bool vx__holds(const vx__layer *y, int h, int e) {
    return (y->own[e] >> h) & 1;
}

/* Puts copy i on host h / takes it off its host. */
static inline void vx__put(vx__layer *y, int i, int h) {
    vx__item *it = &y->items[i];
    it->host = h;
    y->L[h] += it->share;
    y->free[h]--;
    y->own[it->expert] |= 1ull << h;
}

static inline void vx__take(vx__layer *y, int i) {
    vx__item *it = &y->items[i];
    y->L[it->host] -= it->share;
    y->free[it->host]++;
    y->own[it->expert] &= ~(1ull << it->host);
    it->host = -1;
}

/* The first steps (vx_plan.c): extent slots per layer × host from the memory budgets (-1 with the
 * numbers when the fleet cannot hold min_owners copies), the copies per expert with R hot
 * replicas, the order copies are packed in (largest share first), and the packing. */
int vx__allocate_slots(const vx_plan_in *in, int *slots, mw_err *err);
int vx__replicate(const vx_plan_in *in, const double *w, int R, int *r);
int vx__by_share(const void *x, const void *z);
int vx__pack(const vx_plan_in *in, vx__layer *y, mw_err *err);

/* Moves or swaps copies off the worst host while that lowers it (vx_plan_search.c). Copies are
 * sorted by share, largest first. */
void vx__refine(const vx_plan_in *in, vx__layer *y);
/* Brings the top pairs of st onto one host where a move or a swap leaves the layer's worst host
 * no worse; counts the pairs kept. */
void vx__colocate(const vx_plan_in *in, vx__layer *y, const vx_rstats_layer *st,
                  vx_plan_layer *out);

/* The layer's worst host: max_h L_h / speed_h. */
double vx__worst(const vx_plan_in *in, const double *L);
/* (Σ L / Σ speed) / worst: 1 when every host is loaded in proportion to its speed. */
double vx__balance(const vx_plan_in *in, const double *L);
/* The balance of contiguous, even expert ranges (what --loopback N does), for the report. */
double vx__range_balance(const vx_plan_in *in, const double *w);
/* The layer's prediction (round trip, hosts per row) and its share of the token's bytes. */
void vx__predict_layer(const vx_plan_in *in, const vx__layer *y, vx_plan *p);
/* The plan's totals (tok/s, balances) once every layer is placed. */
void vx__predict_total(const vx_plan_in *in, vx_plan *p);

#endif
