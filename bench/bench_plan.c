/* bench/bench_plan.c — the placement planner's time on a Kimi-K3-sized bank: 93 MoE layers × 896
 * experts (MXFP4 extents of 3 × 3584 × 3072, about 1.46 TB in all) on 8 hosts (5 x86 servers of
 * 640 GiB at 300 GB/s and 3 Macs of 440 GiB at 700 GB/s, deploy/topologies/lab-8.json), with
 * uniform loads and with skewed ones (each layer's loads Zipf-like with exponent --skew under its
 * own permutation, and its 256 top pairs), with one and two copies at least. Prints the time, the
 * balance reached and the even ranges' balance on the same loads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "vindex/vx_plan.h"

#define L 93
#define E 896
#define K 16
#define H 8

typedef struct opts {
    double skew;
    int rounds;
} opts;

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.skew = 1.0, .rounds = 3};
    const bu_opt opt[] = {
        BU_OPT_IN("--skew", BU_NUM, &o->skew, "1.0", "Zipf exponent of the skewed loads", 0, 4),
        BU_OPT_IN("--rounds", BU_INT, &o->rounds, "3", "plans timed per case (the best)", 1, 100),
    };
    const bu_cli cli = {
        "bench_plan", "vindex plan's planner on a K3-sized bank (93 layers x 896 experts, 8 hosts)",
        NULL,         NULL,
        opt,          (int)(sizeof opt / sizeof opt[0])};
    return bu_args(argc, argv, &cli, NULL);
}

/* Loads of one layer: 1 / (rank + 1)^s under a permutation of the layer's own, summing to K. */
static void skewed(double *w, int layer, double s) {
    double sum = 0;
    const int step = 2 * layer + 1 + (E % (2 * layer + 1) == 0 ? 2 : 0); /* odd: coprime to 896 */
    for (int r = 0; r < E; r++) sum += (w[(r * step + 7 * layer) % E] = 1 / pow(r + 1, s));
    for (int e = 0; e < E; e++) w[e] *= K / sum;
}

static void run_case(const opts *o, const char *name, bool skew, int min_owners) {
    static double load[L * E];
    static vx_rstats_layer st[L];
    static vx_rstats_pair pairs[L][256];
    static uint64_t ext[L];
    static const char *names[H] = {"epyc1", "epyc2", "epyc3", "epyc4",
                                   "epyc5", "mac1",  "mac2",  "mac3"};
    vx_plan_host hosts[H];
    for (int h = 0; h < H; h++)
        hosts[h] = h < 5 ? (vx_plan_host){names[h], 640.0 * (1 << 30), 300, 40, 100}
                         : (vx_plan_host){names[h], 440.0 * (1 << 30), 700, 120, 10};
    for (int l = 0; l < L; l++) {
        ext[l] = (uint64_t)3 * 3584 * 3072 * 17 / 32;
        if (skew)
            skewed(load + l * E, l, o->skew);
        else
            for (int e = 0; e < E; e++) load[l * E + e] = (double)K / E;
        for (int p = 0; p < 256; p++)
            pairs[l][p] = (vx_rstats_pair){p, p + 256, 1000 - (uint64_t)p};
        st[l] = (vx_rstats_layer){.rows = 100000, .top = pairs[l], .n_top = 256};
    }
    vx_plan_in in = {.n_layer = L,
                     .n_expert = E,
                     .k = K,
                     .extent_bytes = ext,
                     .load = load,
                     .stats = st,
                     .n_host = H,
                     .hosts = hosts,
                     .min_owners = min_owners,
                     .max_owners = 4,
                     .replica_memory = 1,
                     .dense_bytes = 110ull << 30,
                     .coord_gbs = 300,
                     .width = 3584,
                     .wire_bytes = 2};
    double best = 1e30;
    vx_plan p = {0};
    for (int r = 0; r < o->rounds; r++) {
        vx_plan_free(&p);
        mw_err err;
        double t0 = bu_now();
        if (vx_plan_run(&in, &p, &err)) {
            fprintf(stderr, "bench_plan: %s\n", err.msg);
            return;
        }
        best = fmin(best, bu_now() - t0);
    }
    int replicas = 0;
    for (int l = 0; l < L; l++) replicas += p.layers[l].replicas;
    printf("%-22s min_owners %d: %.3f s; balance %.4f at worst, %.4f mean (even ranges %.4f); "
           "%d replicas; predicted %.1f tok/s\n",
           name, min_owners, best, p.balance_min, p.balance_mean, p.range_balance_mean, replicas,
           p.tok_s);
    printf("{\"bench\":\"plan\",\"case\":\"%s\",\"min_owners\":%d,\"seconds\":%.4f,"
           "\"balance_min\":%.4f,\"balance_mean\":%.4f,\"range_balance\":%.4f}\n",
           name, min_owners, best, p.balance_min, p.balance_mean, p.range_balance_mean);
    vx_plan_free(&p);
}

int main(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc != BU_RUN) return rc;
    printf("K3-sized bank: %d layers x %d experts, top-%d, %d hosts (5 x86 + 3 Mac)\n", L, E, K, H);
    run_case(&o, "uniform", false, 1);
    run_case(&o, "skewed", true, 1);
    run_case(&o, "skewed", true, 2);
    return 0;
}
