/* kernels/expert.c — the fused expert operation: y = down · glu(gate·x + gate_b, up·x + up_b)
 * + down_b for T rows at once. In Q8 mode x is quantized once and shared by gate and up, and the
 * GLU output is quantized before down, as ggml does. Gate and up run as one pool job (their rows
 * split together across threads), then down. */
#include "kernels/kn_internal.h"
#include "util/mw_err.h"

#include <stdlib.h>

static int check_bias(const kn_mat *b, int64_t n, const char *what, mw_err *err) {
    if (!b->data) return 0;
    if (kn_mat_check(b, what, err) != 0) return -1;
    if (b->rows != 1 || b->cols != n)
        return mw_errf(err, "expert: %s is %lld x %lld, expected 1 x %lld", what,
                       (long long)b->rows, (long long)b->cols, (long long)n);
    return 0;
}

static int check_expert(const kn_expert *e, const kn_glu *glu, mw_err *err) {
    if (!e || !glu) return mw_errf(err, "expert: missing expert or GLU policy");
    if ((int)glu->kind < 0 || glu->kind >= KN_GLU_COUNT)
        return mw_errf(err, "expert: unknown GLU kind %d", (int)glu->kind);
    if (kn_mat_check(&e->gate, "expert gate", err) || kn_mat_check(&e->up, "expert up", err) ||
        kn_mat_check(&e->down, "expert down", err))
        return -1;
    const int64_t hidden = e->gate.cols, ff = e->gate.rows;
    if (e->up.rows != ff || e->up.cols != hidden)
        return mw_errf(err, "expert: up is %lld x %lld but gate is %lld x %lld",
                       (long long)e->up.rows, (long long)e->up.cols, (long long)ff,
                       (long long)hidden);
    if (e->down.rows != hidden || e->down.cols != ff)
        return mw_errf(err, "expert: down is %lld x %lld, expected %lld x %lld",
                       (long long)e->down.rows, (long long)e->down.cols, (long long)hidden,
                       (long long)ff);
    if (ff == 0) return mw_errf(err, "expert: no rows in gate");
    return check_bias(&e->gate_b, ff, "gate bias", err) ||
                   check_bias(&e->up_b, ff, "up bias", err) ||
                   check_bias(&e->down_b, hidden, "down bias", err)
               ? -1
               : 0;
}

/* Y[t][i] += b[i] for every row; b is dequantized into tmp first. */
static void add_bias(const kn_mat *b, float *tmp, float *Y, int64_t T, int64_t n) {
    if (!b->data) return;
    kn_mat_row(b, 0, tmp);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < n; i++) Y[t * n + i] += tmp[i];
}

size_t kn_expert_weight_bytes(const kn_expert *e) {
    const kn_mat *m[6] = {&e->gate, &e->up, &e->down, &e->gate_b, &e->up_b, &e->down_b};
    size_t total = 0;
    for (int i = 0; i < 6; i++)
        if (m[i]->data) total += (size_t)m[i]->rows * kn_row_size(m[i]->type, m[i]->cols);
    return total;
}

int kn_expert_run(const kn_expert *e, const kn_glu *glu, const float *X, int64_t T, float *Y,
                  kn_numerics num, kn_pool *caller_pool, mw_err *err) {
    if (check_expert(e, glu, err) != 0) return -1;
    if (T < 0) return mw_errf(err, "expert: negative row count %lld", (long long)T);
    if (T == 0) return 0;
    const int64_t hidden = e->gate.cols, ff = e->gate.rows;
    const kn_kernel *kg = kn_kernel_for(e->gate.type, num), *ku = kn_kernel_for(e->up.type, num),
                    *kd = kn_kernel_for(e->down.type, num);
    /* gate and up share one prepared input when they want the same preparation */
    const bool shared = kg->act_prep == ku->act_prep;

    kn_part gu[2] = {{.W = &e->gate, .kern = kg, .ldy = ff}, {.W = &e->up, .kern = ku, .ldy = ff}};
    kn_part dn = {.W = &e->down, .kern = kd, .ldy = hidden};
    gu[0].x.T = gu[1].x.T = dn.x.T = T;

    kn_pool *pool = kn_pool_acquire(caller_pool);
    const int nth_gu = kn_parts_threads(gu, 2, pool), nth_dn = kn_parts_threads(&dn, 1, pool);
    const size_t sz_xg = kn_act_scratch(kg, hidden, T);
    const size_t sz_xu = shared ? 0 : kn_act_scratch(ku, hidden, T);
    const size_t sz_g = kn_align64((size_t)(T * ff) * sizeof(float));
    const size_t sz_a = kn_act_scratch(kd, ff, T);
    const size_t sz_bias = kn_align64((size_t)(ff > hidden ? ff : hidden) * sizeof(float));
    size_t sz_thr = kn_parts_scratch(gu, 2, nth_gu), sz_thr_dn = kn_parts_scratch(&dn, 1, nth_dn);
    if (sz_thr_dn > sz_thr) sz_thr = sz_thr_dn;
    void *tmp;
    uint8_t *buf = kn_pool_scratch(pool, sz_xg + sz_xu + 2 * sz_g + sz_a + sz_bias + sz_thr, &tmp);
    if (!buf) {
        kn_pool_release(pool);
        return mw_errf(err, "expert: out of memory for %lld rows (%lld x %lld)", (long long)T,
                       (long long)ff, (long long)hidden);
    }
    uint8_t *xg = buf, *xu = xg + sz_xg, *a = xu + sz_xu + 2 * sz_g, *thr = a + sz_a + sz_bias;
    float *G = (float *)(xu + sz_xu), *U = (float *)(xu + sz_xu + sz_g);
    float *bias = (float *)(a + sz_a);

    kn_act_prepare(kg, X, hidden, T, xg, pool, &gu[0].x);
    if (shared)
        gu[1].x = gu[0].x;
    else
        kn_act_prepare(ku, X, hidden, T, xu, pool, &gu[1].x);
    gu[0].Y = G;
    gu[1].Y = U;
    kn_run_parts(gu, 2, pool, thr);

    add_bias(&e->gate_b, bias, G, T, ff);
    add_bias(&e->up_b, bias, U, T, ff);
    kn_glu_apply(glu, G, U, G, T * ff);

    kn_act_prepare(kd, G, ff, T, a, pool, &dn.x);
    dn.Y = Y;
    kn_run_parts(&dn, 1, pool, thr);
    add_bias(&e->down_b, bias, Y, T, hidden);

    kn_pool_release(pool);
    free(tmp);
    return 0;
}
