/* tests/unit/test_vx_plan.c — the placement planner on crafted statistics: every expert owned,
 * memory budgets held, copies on distinct hosts, balance against DeepSeek's EPLB (its global
 * policy, re-implemented here from its description: replicate the expert with the largest load per
 * copy, then pack copies largest first into the least loaded pack with room) and against even
 * ranges, hosts of unequal speed, hot replicas, pairs kept together, and refusing a fleet too small
 * for the model with the numbers. */
#include "tests/support/mw_test.h"
#include "vindex/vx_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXT 1000000ull /* bytes of one extent */

typedef struct fleet {
    vx_plan_host hosts[VX_PLAN_MAX_HOSTS];
    char names[VX_PLAN_MAX_HOSTS][16];
    uint64_t ext[8];
    vx_plan_in in;
} fleet;

/* H hosts, each with room for `slots` extents per layer of L layers, speed 1. */
static void make_fleet(fleet *f, int L, int E, int k, int H, int slots) {
    memset(f, 0, sizeof *f);
    for (int h = 0; h < H; h++) {
        snprintf(f->names[h], sizeof f->names[h], "n%d", h);
        f->hosts[h] = (vx_plan_host){f->names[h], (double)slots * EXT * L, 1.0, 100, 10};
    }
    for (int l = 0; l < L; l++) f->ext[l] = EXT;
    f->in = (vx_plan_in){.n_layer = L,
                         .n_expert = E,
                         .k = k,
                         .extent_bytes = f->ext,
                         .n_host = H,
                         .hosts = f->hosts,
                         .min_owners = 1,
                         .max_owners = H,
                         .replica_memory = 1,
                         .dense_bytes = 1000000,
                         .coord_gbs = 10,
                         .width = 1024,
                         .wire_bytes = 2};
}

static void plan_ok(const fleet *f, vx_plan *p) {
    mw_err err;
    if (vx_plan_run(&f->in, p, &err)) fail_msg("%s", err.msg);
}

/* Every expert of every MoE layer has at least min_owners owners; budgets hold. */
static void check_plan(const fleet *f, const vx_plan *p) {
    const vx_plan_in *in = &f->in;
    for (int l = 0; l < in->n_layer; l++)
        for (int e = 0; in->extent_bytes[l] && e < in->n_expert; e++) {
            uint64_t m = p->owners[l * in->n_expert + e];
            if (__builtin_popcountll(m) < in->min_owners)
                fail_msg("layer %d expert %d: %d owner(s)", l, e, __builtin_popcountll(m));
        }
    for (int h = 0; h < in->n_host; h++)
        if ((double)p->host_bytes[h] > in->hosts[h].memory_bytes)
            fail_msg("host %d holds %llu bytes, its budget is %.0f", h,
                     (unsigned long long)p->host_bytes[h], in->hosts[h].memory_bytes);
}

/* ---- DeepSeek EPLB's global policy ---------------------------------------------------------- */

/* Balance (mean / max pack load) of EPLB on one layer: E experts, H packs of `per` copies each. */
static double eplb_balance(const double *w, int E, int H, int per) {
    int n = H * per, cnt[256];
    double copy[512];
    int owner[512];
    for (int e = 0; e < E; e++) cnt[e] = 1;
    for (int i = E; i < n; i++) { /* replicate the expert with the largest load per copy */
        int best = 0;
        for (int e = 1; e < E; e++)
            if (w[e] / cnt[e] > w[best] / cnt[best]) best = e;
        cnt[best]++;
    }
    int m = 0;
    for (int e = 0; e < E; e++)
        for (int c = 0; c < cnt[e]; c++) owner[m] = e, copy[m++] = w[e] / cnt[e];
    for (int i = 1; i < m; i++) /* sort copies by load, largest first */
        for (int j = i; j > 0 && copy[j] > copy[j - 1]; j--) {
            double t = copy[j];
            copy[j] = copy[j - 1];
            copy[j - 1] = t;
            int o = owner[j];
            owner[j] = owner[j - 1];
            owner[j - 1] = o;
        }
    double load[64] = {0};
    int items[64] = {0};
    for (int i = 0; i < m; i++) { /* into the least loaded pack with room */
        int best = -1;
        for (int h = 0; h < H; h++)
            if (items[h] < per && (best < 0 || load[h] < load[best])) best = h;
        load[best] += copy[i];
        items[best]++;
    }
    double sum = 0, mx = 0;
    for (int h = 0; h < H; h++) sum += load[h], mx = fmax(mx, load[h]);
    return sum / H / mx;
}

/* Zipf-like loads summing to k: expert e gets 1 / (e + 1)^s, shuffled by a fixed permutation. */
static void zipf(double *w, int E, int k, double s) {
    double sum = 0;
    for (int e = 0; e < E; e++) sum += (w[(e * 37 + 11) % E] = 1 / pow(e + 1, s));
    for (int e = 0; e < E; e++) w[e] *= k / sum;
}

static void test_uniform_is_even(void **state) {
    (void)state;
    fleet f;
    make_fleet(&f, 3, 16, 4, 4, 4); /* exactly one copy of each expert fits */
    vx_plan p;
    plan_ok(&f, &p);
    check_plan(&f, &p);
    for (int l = 0; l < 3; l++) {
        assert_true(fabs(p.layers[l].balance - 1) < 1e-12);
        assert_int_equal(p.layers[l].replicas, 0);
    }
    assert_true(p.tok_s > 0);
    assert_true(p.wire_per_token > 0 && p.read_per_token == 3 * 4 * (double)EXT);
    vx_plan_free(&p);
}

/* The skewed synth: some experts ten times hotter than the rest. */
static void test_hot_experts_get_replicas(void **state) {
    (void)state;
    fleet f;
    make_fleet(&f, 1, 16, 4, 4, 6); /* 24 slots: 8 replicas */
    double w[16];
    for (int e = 0; e < 16; e++) w[e] = e == 0 || e == 1 || e == 6 || e == 7 ? 10 : 1;
    double sum = 0;
    for (int e = 0; e < 16; e++) sum += w[e];
    for (int e = 0; e < 16; e++) w[e] *= 4 / sum;
    f.in.load = w;
    vx_plan p;
    plan_ok(&f, &p);
    check_plan(&f, &p);
    assert_true(p.layers[0].balance >= 0.95);
    assert_true(p.layers[0].balance >= eplb_balance(w, 16, 4, 6) - 1e-9);
    assert_true(p.layers[0].range_balance < 0.6); /* ranges put 0, 1 and 6, 7 together */
    assert_int_equal(p.layers[0].replicas, 8);
    for (int e = 0; e < 16; e++) /* the hot ones are the replicated ones */
        assert_true(__builtin_popcountll(p.owners[e]) >= 2 || w[e] < w[0]);
    vx_plan_free(&p);
}

static void test_zipf_against_eplb(void **state) {
    (void)state;
    const double skews[] = {0.6, 1.0, 1.4};
    for (int s = 0; s < 3; s++) {
        fleet f;
        make_fleet(&f, 1, 64, 8, 8, 10); /* 80 slots: 16 replicas */
        double w[64];
        zipf(w, 64, 8, skews[s]);
        f.in.load = w;
        vx_plan p;
        plan_ok(&f, &p);
        check_plan(&f, &p);
        double ours = p.layers[0].balance, eplb = eplb_balance(w, 64, 8, 10);
        print_message("zipf s=%.1f: balance %.4f, EPLB %.4f, even ranges %.4f\n", skews[s], ours,
                      eplb, p.layers[0].range_balance);
        assert_true(ours >= eplb - 1e-9);
        if (eplb >= 0.95) assert_true(ours >= 0.95);
        vx_plan_free(&p);
    }
}

/* A Mac and an EPYC box are not equal: load follows speed. */
static void test_unequal_speeds(void **state) {
    (void)state;
    fleet f;
    make_fleet(&f, 2, 32, 4, 4, 20);
    f.hosts[0].read_gbs = 400;
    f.hosts[1].read_gbs = 200;
    f.hosts[2].read_gbs = 100;
    f.hosts[3].read_gbs = 100;
    vx_plan p;
    plan_ok(&f, &p);
    check_plan(&f, &p);
    for (int l = 0; l < 2; l++) {
        print_message("layer %d: balance %.4f, shares %.3f %.3f %.3f %.3f\n", l,
                      p.layers[l].balance, p.load_share[l * 4], p.load_share[l * 4 + 1],
                      p.load_share[l * 4 + 2], p.load_share[l * 4 + 3]);
        assert_true(p.layers[l].balance >= 0.95);
        /* the fast host serves about four times the rows of a slow one */
        double r = p.load_share[l * 4 + 0] / p.load_share[l * 4 + 2];
        assert_true(r > 3.5 && r < 4.5);
    }
    vx_plan_free(&p);
}

static void test_min_owners_and_distinct_hosts(void **state) {
    (void)state;
    fleet f;
    make_fleet(&f, 2, 16, 4, 3, 12);
    f.in.min_owners = 2;
    f.in.max_owners = 2;
    vx_plan p;
    plan_ok(&f, &p);
    check_plan(&f, &p);
    for (int i = 0; i < 2 * 16; i++) assert_int_equal(__builtin_popcountll(p.owners[i]), 2);
    vx_plan_free(&p);
}

static void test_refuses_a_fleet_too_small(void **state) {
    (void)state;
    fleet f;
    make_fleet(&f, 4, 16, 4, 2, 7); /* 14 of 16 extents per layer fit */
    vx_plan p;
    mw_err err = {{0}};
    assert_int_equal(vx_plan_run(&f.in, &p, &err), -1);
    assert_non_null(strstr(err.msg, "cannot hold the model"));
    assert_non_null(strstr(err.msg, "short"));
    assert_non_null(strstr(err.msg, "n1 0.026")); /* each host's budget, in GiB */
    make_fleet(&f, 4, 16, 4, 2, 9);               /* one copy fits, two do not */
    f.in.min_owners = 2;
    assert_int_equal(vx_plan_run(&f.in, &p, &err), -1);
    assert_non_null(strstr(err.msg, "2 copies"));
    f.in.min_owners = 3;
    assert_int_equal(vx_plan_run(&f.in, &p, &err), -1);
    assert_non_null(strstr(err.msg, "min_owners 3"));
}

/* Pairs that fire together end on one host when it costs the balance nothing. */
static void test_pairs_kept_together(void **state) {
    (void)state;
    fleet f;
    make_fleet(&f, 1, 16, 2, 4, 4);
    vx_rstats_pair top[8];
    for (int i = 0; i < 8; i++) top[i] = (vx_rstats_pair){i, 15 - i, 100 - (uint64_t)i};
    vx_rstats_layer st = {.rows = 1000, .top = top, .n_top = 8};
    f.in.stats = &st;
    vx_plan p, q;
    plan_ok(&f, &p);
    check_plan(&f, &p);
    assert_int_equal(p.layers[0].pairs_total, 8);
    assert_int_equal(p.layers[0].pairs_kept, 8);
    for (int i = 0; i < 8; i++) assert_true(p.owners[i] & p.owners[15 - i]);
    assert_true(fabs(p.layers[0].balance - 1) < 1e-12);
    f.in.no_colocate = true;
    plan_ok(&f, &q);
    int together = 0;
    for (int i = 0; i < 8; i++) together += (q.owners[i] & q.owners[15 - i]) != 0;
    assert_true(together < 8); /* the pass is what put them together */
    vx_plan_free(&p);
    vx_plan_free(&q);
}

/* Largest-first packing alone ends {3, 2, 2} against {3, 2}; the local search swaps to 6 and 6. */
static void test_search_beats_greedy(void **state) {
    (void)state;
    fleet f;
    make_fleet(&f, 1, 5, 1, 2, 3);
    f.in.max_owners = 1;
    double w[5] = {0.25, 0.25, 2.0 / 12, 2.0 / 12, 2.0 / 12};
    f.in.load = w;
    vx_plan p;
    plan_ok(&f, &p);
    check_plan(&f, &p);
    assert_true(fabs(p.layers[0].balance - 1) < 1e-9);
    vx_plan_free(&p);
}

static void test_deterministic(void **state) {
    (void)state;
    fleet f;
    make_fleet(&f, 2, 64, 8, 8, 10);
    double w[128];
    zipf(w, 64, 8, 1.1);
    zipf(w + 64, 64, 8, 0.7);
    f.in.load = w;
    vx_plan a, b;
    plan_ok(&f, &a);
    plan_ok(&f, &b);
    assert_memory_equal(a.owners, b.owners, 2 * 64 * sizeof *a.owners);
    vx_plan_free(&a);
    vx_plan_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_is_even),
        cmocka_unit_test(test_hot_experts_get_replicas),
        cmocka_unit_test(test_zipf_against_eplb),
        cmocka_unit_test(test_unequal_speeds),
        cmocka_unit_test(test_min_owners_and_distinct_hosts),
        cmocka_unit_test(test_refuses_a_fleet_too_small),
        cmocka_unit_test(test_pairs_kept_together),
        cmocka_unit_test(test_search_beats_greedy),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
