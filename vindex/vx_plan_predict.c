/* vindex/vx_plan_predict.c — what a plan predicts: each layer's balance (and the balance even
 * expert ranges would have), the hosts a row reaches, a one-token step's round trip per layer, the
 * bytes on the wire and read per token, and the decode speed they bound.
 *
 * The model is the plan's own: a copy of expert e serves load_e / copies rows per token; a row
 * reaches a host with the probability that any of its copies is chosen (experts taken as
 * independent); a touched host answers after its link's round trip, the row both ways at the
 * link's rate and its expected extent bytes for that row at its read bandwidth; a layer waits for
 * its slowest touched host; a token is the sum of its layers plus the coordinator's dense bytes at
 * the coordinator's read bandwidth. Envelopes, queueing and the coordinator's own compute beyond
 * its reads are left out. */
#include <math.h>

#include "vindex/vx_plan_internal.h"

double vx__worst(const vx_plan_in *in, const double *L) {
    double w = 0;
    for (int h = 0; h < in->n_host; h++) w = fmax(w, L[h] / vx__speed(in, h));
    return w;
}

double vx__balance(const vx_plan_in *in, const double *L) {
    double sum = 0, v = 0;
    for (int h = 0; h < in->n_host; h++) sum += L[h], v += vx__speed(in, h);
    const double worst = vx__worst(in, L);
    return worst > 0 ? sum / v / worst : 1;
}

double vx__range_balance(const vx_plan_in *in, const double *w) {
    double L[VX_PLAN_MAX_HOSTS] = {0};
    const int E = in->n_expert, H = in->n_host;
    for (int h = 0; h < H; h++) {
        /* expert ranges as even as integers allow, the first ones a bit longer */
        const int lo = h * (E / H) + (h < E % H ? h : E % H);
        const int n = E / H + (h < E % H);
        for (int e = lo; e < lo + n; e++) L[h] += w[e];
    }
    return vx__balance(in, L);
}

void vx__predict_layer(const vx_plan_in *in, const vx__layer *y, vx_plan *p) {
    const int H = in->n_host;
    const double s = (double)in->extent_bytes[y->l];
    const double row = (double)in->width * in->wire_bytes;
    double miss[VX_PLAN_MAX_HOSTS], bytes[VX_PLAN_MAX_HOSTS];
    for (int h = 0; h < H; h++) miss[h] = 1, bytes[h] = 0;
    for (int i = 0; i < y->n_items; i++) {
        const vx__item *it = &y->items[i];
        miss[it->host] *= 1 - fmin(1, it->share);
        bytes[it->host] += it->share * s;
    }
    vx_plan_layer *pl = &p->layers[y->l];
    double rt = 0, per_row = 0;
    for (int h = 0; h < H; h++) {
        const double touched = 1 - miss[h];
        if (touched <= 0) continue;
        const vx_plan_host *ph = &in->hosts[h];
        const double us =
            ph->rtt_us + 2 * row * 8 / (ph->gbit * 1e3) + bytes[h] / touched / (ph->read_gbs * 1e3);
        rt = fmax(rt, us);
        per_row += touched;
    }
    pl->rt_us = rt;
    pl->nodes_per_row = per_row;
    p->wire_per_token += per_row * 2 * row;
    for (int e = 0; e < in->n_expert; e++) p->read_per_token += y->w[e] * s;
}

void vx__predict_total(const vx_plan_in *in, vx_plan *p) {
    double us = 0, sum = 0, sum_range = 0;
    int n = 0;
    p->balance_min = 1;
    for (int l = 0; l < p->n_layer; l++) {
        const vx_plan_layer *pl = &p->layers[l];
        if (!pl->moe) continue;
        us += pl->rt_us;
        sum += pl->balance;
        sum_range += pl->range_balance;
        p->balance_min = fmin(p->balance_min, pl->balance);
        n++;
    }
    if (in->coord_gbs > 0) us += (double)in->dense_bytes / (in->coord_gbs * 1e3);
    p->tok_s = us > 0 ? 1e6 / us : 0;
    p->balance_mean = n ? sum / n : 1;
    p->range_balance_mean = n ? sum_range / n : 1;
}
