/* expert-node/en_selftest.c — `expert-node --self-test`: the device's experts against the scalar
 * reference of kernels/ on the standard synthetic bank (metal/mt_bank.h: every format, both
 * numerics, batches of 1 to 64 rows routed to several experts), one line per case, then the
 * device's matvec rate per format over weights larger than any cache. On a Mac this is the check
 * of the Metal kernels on real hardware; the emulator checks the same cases on every commit.
 *
 * A case passes bit-identical, or within tolerance: max |difference| over the case's outputs at
 * most TOL times their max |value| (a Q8 case's tolerance is wider: a difference of one ulp in a
 * GLU output may move one activation code by one before down). */
#include "expert-node/en_tools.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "metal/mt_bank.h"
#include "metal/mt_dev.h"
#include "util/mw_time.h"

#define TOL_F32 1e-4
#define TOL_Q8  2e-2

/* What runs the experts under test: the GPU, or the CPU's active kernels on a pool. */
typedef struct st_dev {
    mt_dev *mt;
    kn_pool *pool;
    kn_isa isa;
} st_dev;

typedef struct diff {
    size_t differ;
    double max_abs, max_ref;
} diff;

static void compare(const float *got, const float *ref, size_t n, diff *d) {
    *d = (diff){0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        if (fabsf(ref[i]) > d->max_ref && isfinite(ref[i])) d->max_ref = fabsf(ref[i]);
        if (!memcmp(&got[i], &ref[i], 4) || (isnan(got[i]) && isnan(ref[i]))) continue;
        d->differ++;
        const double a = fabs((double)got[i] - (double)ref[i]);
        d->max_abs = isfinite(a) && a > d->max_abs ? a : isfinite(a) ? d->max_abs : INFINITY;
    }
}

/* One case: layer l, numerics num, T rows. Returns 1 when beyond tolerance, -1 on an error. */
static int run_case(st_dev *dv, mt_bank *b, int l, kn_numerics num, int64_t T, FILE *out,
                    mw_err *err) {
    const mt_bank_layer *L = &mt_bank_layers[l];
    uint64_t s = 0x5eed + (uint64_t)(l * 131 + (int)num * 17) + (uint64_t)T;
    float *x = malloc((size_t)(T * L->hidden) * sizeof(float));
    md_assignment *as = malloc((size_t)(T * 3) * sizeof *as);
    float *ref = malloc((size_t)(T * L->hidden) * sizeof(float));
    float *got = malloc((size_t)(T * L->hidden) * sizeof(float));
    int rc = -1;
    if (!x || !as || !ref || !got) {
        mw_errf(err, "out of memory");
        goto done;
    }
    mt_bank_rows(x, T, L->hidden, &s);
    static const kn_glu glus[] = {{.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f},
                                  {.kind = KN_GLU_SWIGLU},
                                  {.kind = KN_GLU_SITU, .beta = 4.0f, .lbeta = 2.5f}};
    const kn_glu glu = glus[l % 3]; /* every policy, on different layers */
    md_moe_exec_args a = {.layer = l,
                          .rows = T,
                          .width = L->hidden,
                          .x = x,
                          .assign = as,
                          .n_assign = mt_bank_route(as, T, 3, L->n_experts, &s),
                          .glu = &glu,
                          .numerics = num,
                          .lookup = mt_bank_lookup,
                          .lookup_ctx = b};
    kn_isa_force(KN_ISA_SCALAR);
    if (md_moe_exec(&a, ref, NULL, err)) goto done;
    kn_isa_force(dv->isa);
    a.pool = dv->pool;
    if (dv->mt ? mt_moe_exec(dv->mt, &a, got, NULL, err) : md_moe_exec(&a, got, NULL, err))
        goto done;
    diff d;
    compare(got, ref, (size_t)(T * L->hidden), &d);
    const double rel = d.max_ref > 0 ? d.max_abs / d.max_ref : d.max_abs;
    rc = rel > (num == KN_NUM_Q8 ? TOL_Q8 : TOL_F32);
    if (!d.differ)
        fprintf(out, "  %-11s %-3s T=%-3lld bit-identical\n", L->name, kn_numerics_name(num),
                (long long)T);
    else
        fprintf(out, "  %-11s %-3s T=%-3lld %zu of %lld differ, max |d| %.3g = %.3g of max |y|%s\n",
                L->name, kn_numerics_name(num), (long long)T, d.differ, (long long)(T * L->hidden),
                d.max_abs, rel, rc ? "  BEYOND TOLERANCE" : "");
done:
    free(x);
    free(as);
    free(ref);
    free(got);
    return rc;
}

/* The device's matvec rate on one format: every matrix of a bank of about `bytes` read once
 * per pass at T = 1 in Q8 numerics; the second of two passes counts. */
static int rate(st_dev *dv, kn_type t, size_t bytes, FILE *out, mw_err *err) {
    const int64_t K = 4096;
    const size_t per = 3 * kn_row_size(t, K) * (size_t)K;
    mt_bank_layer L = {kn_type_name(t), t, t, K, K, (int)(bytes / per) + 1, -1, true};
    mt_bank b;
    if (mt_bank_make(&b, &L, 1, 99, err)) return -1;
    mt_dev *d = NULL;
    float *x = malloc((size_t)K * sizeof(float)), *y = malloc((size_t)K * sizeof(float));
    uint64_t s = 7, ns = 0, read = 0;
    int rc = x && y ? 0 : mw_errf(err, "out of memory");
    for (int64_t k = 0; rc == 0 && k < K; k++) x[k] = mt_bank_rand(&s);
    if (rc == 0 && dv->mt) rc = mt_dev_open(mt_backend_gpu(), &b.table, 0, &d, err);
    for (int pass = 0; rc == 0 && pass < 2; pass++) {
        ns = read = 0;
        for (int e = 0; rc == 0 && e < L.n_experts; e++) {
            const kn_expert *ex = md_expert_table_at(&b.table, 0, e);
            const kn_mat *m[3] = {&ex->gate, &ex->up, &ex->down};
            for (int w = 0; rc == 0 && w < 3; w++) {
                const uint64_t t0 = mw_now_ns();
                uint64_t dt;
                if (d)
                    rc = mt_matmul(d, 0, e, w, x, 1, y, KN_NUM_Q8, MT_MATVEC, &dt, err);
                else
                    kn_matmul(m[w], x, 1, y, KN_NUM_Q8, dv->pool), dt = mw_now_ns() - t0;
                ns += dt;
                read += (uint64_t)(m[w]->rows * (int64_t)m[w]->row_bytes);
            }
        }
    }
    if (rc == 0) {
        fprintf(out, "  matvec %-6s %d x %lld x %lld: %.1f MB in %.3f ms = %.1f GB/s", L.name,
                L.n_experts * 3, (long long)K, (long long)K, (double)read * 1e-6, (double)ns * 1e-6,
                ns ? (double)read / (double)ns : 0.0);
        if (d && mt_dev_read_gbps(dv->mt) > 0)
            fprintf(out, " (%.0f%% of the read bandwidth)",
                    100.0 * (double)read / (double)ns / mt_dev_read_gbps(dv->mt));
        fprintf(out, "\n");
    }
    mt_dev_close(d);
    mt_bank_free(&b);
    free(x);
    free(y);
    return rc;
}

static int open_device(const en_opts *o, st_dev *dv, const mt_bank *b, FILE *out, mw_err *err) {
    const char *want = o->device && strcmp(o->device, "auto") ? o->device
                       : mt_backend_gpu()                     ? "metal"
                                                              : "cpu";
    dv->isa = kn_isa_active();
    if (!strcmp(want, "metal")) {
        if (mt_dev_open(mt_backend_gpu(), &b->table, (size_t)256 << 20, &dv->mt, err))
            return mw_err_wrap(err, "--device metal");
        fprintf(out, "self-test: device metal (%s), read bandwidth %.1f GB/s\n",
                mt_dev_name(dv->mt), mt_dev_read_gbps(dv->mt));
        return 0;
    }
    if (strcmp(want, "cpu")) return mw_errf(err, "--device %s: expected metal, cpu or auto", want);
    dv->pool = kn_pool_create(o->threads);
    fprintf(out, "self-test: device cpu (%s, %d thread%s)\n", kn_isa_name(dv->isa), o->threads,
            o->threads == 1 ? "" : "s");
    return 0;
}

int en_self_test(const en_opts *o, FILE *out) {
    mt_bank b;
    mw_err err;
    st_dev dv = {0};
    int beyond = 0, rc = 0;
    if (mt_bank_make(&b, mt_bank_layers, mt_bank_n_layers, 42, &err) ||
        open_device(o, &dv, &b, out, &err))
        rc = -1;
    const int64_t Ts[] = {1, 5, 40, 64};
    for (int l = 0; rc == 0 && l < mt_bank_n_layers; l++)
        for (int num = 0; rc == 0 && num < KN_NUM_COUNT; num++)
            for (size_t i = 0; rc == 0 && i < sizeof Ts / sizeof Ts[0]; i++) {
                const int r = run_case(&dv, &b, l, (kn_numerics)num, Ts[i], out, &err);
                if (r < 0) rc = -1;
                beyond += r > 0;
            }
    const kn_type rated[] = {KN_MXFP4, KN_Q8_0, KN_Q4_K, KN_Q6_K};
    for (size_t i = 0; rc == 0 && i < sizeof rated / sizeof rated[0]; i++)
        rc = rate(&dv, rated[i], (size_t)128 << 20, out, &err);
    kn_isa_force(dv.isa);
    mt_dev_close(dv.mt);
    kn_pool_destroy(dv.pool);
    mt_bank_free(&b);
    if (rc) {
        fprintf(stderr, "expert-node: --self-test: %s\n", err.msg);
        return 1;
    }
    if (beyond)
        fprintf(out, "result: FAILED: %d case(s) beyond tolerance\n", beyond);
    else
        fprintf(out,
                "result: every case within tolerance (F32 %g, Q8 %g of max |y|); a case "
                "that is not bit-identical means exact mode must keep this device and the "
                "CPU apart (the coordinator does)\n",
                TOL_F32, TOL_Q8);
    return beyond ? 1 : 0;
}
