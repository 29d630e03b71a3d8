/* tests/unit/test_kn_expert.c — the fused expert operation (against its own composition of
 * kn_matmul calls, bit for bit, and a float64 reference), several experts in one call (against
 * one call each, bit for bit), GLU policies, the deterministic exp, shape validation, and the
 * thread pool. */
#include "tests/unit/kn_test_util.h"
#include "util/mw_err.h"

#include <pthread.h>

typedef struct expert_fx {
    kn_expert e;
    float *gb, *ub, *db;
} expert_fx;

static expert_fx make_expert(kt_rng *r, kn_type t, int64_t hidden, int64_t ff, bool bias) {
    expert_fx f = {0};
    f.e.gate = kt_random_mat(r, t, ff, hidden, 0.05f);
    f.e.up = kt_random_mat(r, t, ff, hidden, 0.05f);
    f.e.down = kt_random_mat(r, t, hidden, ff, 0.05f);
    if (bias) {
        f.gb = kt_gauss_vec(r, ff, 0.5f);
        f.ub = kt_gauss_vec(r, ff, 0.5f);
        f.db = kt_gauss_vec(r, hidden, 0.5f);
        f.e.gate_b = (kn_mat){KN_F32, 1, ff, ff * 4, f.gb, NULL};
        f.e.up_b = (kn_mat){KN_F32, 1, ff, ff * 4, f.ub, NULL};
        f.e.down_b = (kn_mat){KN_F32, 1, hidden, hidden * 4, f.db, NULL};
    }
    return f;
}

static void free_expert(expert_fx *f) {
    kt_free_mat(&f->e.gate), kt_free_mat(&f->e.up), kt_free_mat(&f->e.down);
    free(f->gb), free(f->ub), free(f->db);
}

/* The expert op spelled out with kn_matmul: must give the same bits. */
static void composed(const kn_expert *e, const kn_glu *glu, const float *X, int64_t T, float *Y,
                     kn_numerics num) {
    const int64_t hidden = e->gate.cols, ff = e->gate.rows;
    float *G = malloc(T * ff * 4), *U = malloc(T * ff * 4);
    kn_matmul(&e->gate, X, T, G, num, NULL);
    kn_matmul(&e->up, X, T, U, num, NULL);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < ff; i++) {
            if (e->gate_b.data) G[t * ff + i] += ((const float *)e->gate_b.data)[i];
            if (e->up_b.data) U[t * ff + i] += ((const float *)e->up_b.data)[i];
        }
    kn_glu_apply(glu, G, U, G, T * ff);
    kn_matmul(&e->down, G, T, Y, num, NULL);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < hidden && e->down_b.data; i++)
            Y[t * hidden + i] += ((const float *)e->down_b.data)[i];
    free(G), free(U);
}

/* float64 reference: the same math with dequantized weights and (Q8) rounded activations. */
static double glu64(const kn_glu *g, double a, double b) {
    if (g->kind == KN_GLU_SWIGLU) return a / (1 + exp(-a)) * b;
    if (g->kind == KN_GLU_SITU) {
        const double up = g->lbeta > 0 ? g->lbeta * tanh(b / g->lbeta) : b;
        return g->beta * tanh(a / g->beta) / (1 + exp(-a)) * up;
    }
    a = a > g->limit ? g->limit : a;
    b = b < -g->limit ? -g->limit : b > g->limit ? g->limit : b;
    return a / (1 + exp(-g->alpha * a)) * (b + 1);
}

static void reference(const kn_expert *e, const kn_glu *glu, const float *X, int64_t T, float *Y,
                      kn_numerics num) {
    const int64_t hidden = e->gate.cols, ff = e->gate.rows;
    float *xv = malloc(hidden * 4), *G = malloc(ff * 4), *U = malloc(ff * 4), *A = malloc(ff * 4);
    for (int64_t t = 0; t < T; t++) {
        if (num == KN_NUM_Q8)
            kt_q8_view(e->gate.type, X + t * hidden, hidden, xv);
        else
            memcpy(xv, X + t * hidden, hidden * 4);
        kt_ref_matmul(&e->gate, xv, 1, G);
        kt_ref_matmul(&e->up, xv, 1, U);
        for (int64_t i = 0; i < ff; i++) {
            const double g = G[i] + (e->gate_b.data ? ((const float *)e->gate_b.data)[i] : 0);
            const double u = U[i] + (e->up_b.data ? ((const float *)e->up_b.data)[i] : 0);
            A[i] = (float)glu64(glu, g, u);
        }
        if (num == KN_NUM_Q8) kt_q8_view(e->down.type, A, ff, A);
        kt_ref_matmul(&e->down, A, 1, Y + t * hidden);
        for (int64_t i = 0; i < hidden && e->down_b.data; i++)
            Y[t * hidden + i] += ((const float *)e->down_b.data)[i];
    }
    free(xv), free(G), free(U), free(A);
}

static void test_expert_matches_composition_and_reference(void **state) {
    (void)state;
    kt_rng r = {4242};
    const kn_glu glus[3] = {{.kind = KN_GLU_SWIGLU},
                            {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f},
                            {.kind = KN_GLU_SITU, .beta = 2.0f, .lbeta = 1.5f}};
    const kn_type types[] = {KN_MXFP4, KN_Q6_K, KN_Q8_0, KN_F32};
    kn_pool *pool = kn_pool_create(2);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const kn_type t = types[ti];
        const int64_t hidden = t == KN_Q6_K ? 512 : 1440, ff = t == KN_Q6_K ? 256 : 96;
        expert_fx f = make_expert(&r, t, hidden, ff, t != KN_Q6_K);
        const int64_t T = 5;
        float *X = kt_gauss_vec(&r, T * hidden, 1.0f);
        float *Y = malloc(T * hidden * 4), *C = malloc(T * hidden * 4), *R = malloc(T * hidden * 4);
        for (int num = 0; num < 2; num++) {
            const kn_glu *glu = &glus[(ti + num) % 3];
            mw_err err;
            assert_int_equal(kn_expert_run(&f.e, glu, X, T, Y, (kn_numerics)num, pool, &err), 0);
            composed(&f.e, glu, X, T, C, (kn_numerics)num);
            assert_true(kt_same_bits("expert vs composition", Y, C, T * hidden));
            reference(&f.e, glu, X, T, R, (kn_numerics)num);
            const double rel = kt_rel_to_max(Y, R, T * hidden);
            /* Q8: an intermediate on an int8 rounding boundary may move one value a little */
            if (rel > (num ? 2e-3 : 1e-5))
                fail_msg("%s %s: %.2e from float64", kn_type_name(t), kn_numerics_name(num), rel);
            /* batch invariance through the fused op: row 3 alone */
            float one[2880];
            assert_int_equal(
                kn_expert_run(&f.e, glu, X + 3 * hidden, 1, one, (kn_numerics)num, NULL, &err), 0);
            assert_true(kt_same_bits("expert row alone", one, Y + 3 * hidden, hidden));
        }
        free(X), free(Y), free(C), free(R);
        free_expert(&f);
    }
    kn_pool_destroy(pool);
}

/* An expert read from its matrices' packed copies (kn_pack, where a copy replaces the stored rows:
 * a pinned model's and an expert node's MXFP4 experts) gives the stored rows' bits on every ISA, at
 * every T from 1 to 17 (the few-token passes, the batch tile), with 1 and 2 threads: gate and up at
 * K = 2880 (11 full groups and a tail) into ff = 288 rows, down at K = 288 (one full group and a
 * tail). The stored bytes are overwritten after packing, so only the copies are read. */
static void test_packed_expert_equals_stored(void **state) {
    (void)state;
    kt_rng r = {5150};
    const int64_t hidden = 2880, ff = 288;
    enum { TMAX = 17 };
    expert_fx f = make_expert(&r, KN_MXFP4, hidden, ff, true);
    float *X = kt_gauss_vec(&r, TMAX * hidden, 1.0f);
    float *want = malloc(TMAX * hidden * 4), *got = malloc(TMAX * hidden * 4);
    const kn_glu glu = {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f};
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    kn_pool *pool = kn_pool_create(2);
    mw_err err;
    kn_isa_force(KN_ISA_SCALAR);
    assert_int_equal(kn_expert_run(&f.e, &glu, X, TMAX, want, KN_NUM_Q8, NULL, &err), 0);
    for (int i = 0; i < nisa; i++) {
        kt_use(&isas[i]);
        if (!kn_pack_replaces(&f.e.gate)) continue;
        kn_expert P = f.e;
        kn_mat *const m[3] = {&P.gate, &P.up, &P.down};
        void *buf[3];
        for (int j = 0; j < 3; j++) {
            const size_t bytes = (size_t)m[j]->rows * m[j]->row_bytes;
            void *copy = malloc(bytes);
            memcpy(copy, m[j]->data, bytes);
            m[j]->data = copy;
            assert_int_equal(posix_memalign(&buf[j], 64, kn_pack_bytes(m[j])), 0);
            kn_pack(m[j], buf[j]);
            memset(copy, 0xA5, bytes);
        }
        for (int64_t T = 1; T <= TMAX; T++)
            for (int th = 0; th < 2; th++) {
                memset(got, 0xff, T * hidden * 4);
                assert_int_equal(
                    kn_expert_run(&P, &glu, X, T, got, KN_NUM_Q8, th ? pool : NULL, &err), 0);
                char what[96];
                snprintf(what, sizeof what, "%s packed expert T=%lld %d thread(s)", isas[i].name,
                         (long long)T, th + 1);
                assert_true(kt_same_bits(what, got, want, T * hidden));
            }
        for (int j = 0; j < 3; j++) free((void *)m[j]->data), free(buf[j]);
    }
    kn_isa_force(prev);
    kn_pool_destroy(pool);
    free(X), free(want), free(got);
    free_expert(&f);
}

static void test_expert_rejects_bad_shapes(void **state) {
    (void)state;
    kt_rng r = {1};
    expert_fx f = make_expert(&r, KN_MXFP4, 64, 32, true);
    float X[64], Y[64];
    mw_err err;
    const kn_glu glu = {.kind = KN_GLU_SWIGLU};
    kn_expert e = f.e;
    e.up.rows = 31;
    assert_int_equal(kn_expert_run(&e, &glu, X, 1, Y, KN_NUM_Q8, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "up"));
    e = f.e;
    e.down.cols = 64;
    assert_int_equal(kn_expert_run(&e, &glu, X, 1, Y, KN_NUM_Q8, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "down"));
    e = f.e;
    e.down_b.cols = 32;
    e.down_b.row_bytes = 128;
    assert_int_equal(kn_expert_run(&e, &glu, X, 1, Y, KN_NUM_Q8, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "down bias"));
    e = f.e;
    e.gate.type = KN_Q4_0;
    assert_int_equal(kn_expert_run(&e, &glu, X, 1, Y, KN_NUM_Q8, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "q4_0"));
    e = f.e;
    e.gate.row_bytes = 10;
    assert_int_equal(kn_expert_run(&e, &glu, X, 1, Y, KN_NUM_Q8, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "stride"));
    const kn_glu bad = {.kind = (kn_glu_kind)7};
    assert_int_equal(kn_expert_run(&f.e, &bad, X, 1, Y, KN_NUM_Q8, NULL, &err), -1);
    assert_int_equal(kn_expert_run(&f.e, &glu, X, 0, Y, KN_NUM_Q8, NULL, &err), 0);
    /* bytes read: packed MXFP4 + f32 biases */
    assert_int_equal(kn_expert_weight_bytes(&f.e), 2 * 32 * kn_row_size(KN_MXFP4, 64) +
                                                       64 * kn_row_size(KN_MXFP4, 32) +
                                                       (32 + 32 + 64) * 4);
    free_expert(&f);
}

/* kn_experts_run = one kn_expert_run per call, bit for bit: calls sharing an input (decode: one
 * row, k experts), calls with their own rows, zero-row calls, an expert of another width and type,
 * experts with and without biases, more calls than fit the small path; 1 and 2 threads, both
 * numerics modes. */
static void test_experts_run_equals_single_calls(void **state) {
    (void)state;
    kt_rng r = {777};
    const int64_t hidden = 320;
    enum { NE = 5, NC = 11 };
    expert_fx f[NE];
    for (int i = 0; i < NE; i++)
        f[i] = make_expert(&r, i == 3 ? KN_Q8_0 : KN_MXFP4, hidden,
                           i == 4   ? 96
                           : i == 1 ? 288
                                    : 160,
                           i != 2);
    /* calls 0-3 share one row; call 6 is large enough that preparation and GLU run in parallel */
    const int64_t Ts_[NC] = {1, 1, 1, 1, 3, 0, 110, 2, 1, 5, 1};
    const int ex[NC] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0};
    int64_t off[NC + 1] = {0};
    for (int i = 0; i < NC; i++) off[i + 1] = off[i] + Ts_[i];
    float *X = kt_gauss_vec(&r, off[NC] * hidden, 1.0f);
    float *Y = malloc(off[NC] * hidden * 4), *S = malloc(off[NC] * hidden * 4);
    const kn_glu glu = {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f};
    kn_pool *pool = kn_pool_create(2);
    mw_err err;
    for (int num = 0; num < 2; num++) {
        for (int i = 0; i < NC; i++)
            assert_int_equal(kn_expert_run(&f[ex[i]].e, &glu, X + off[i < 4 ? 0 : i] * hidden,
                                           Ts_[i], S + off[i] * hidden, (kn_numerics)num, NULL,
                                           &err),
                             0);
        for (int n = 4; n <= NC; n += NC - 4) { /* the decode case alone, then everything */
            for (int p = 0; p < 2; p++) {
                kn_expert_call calls[NC];
                for (int i = 0; i < n; i++)
                    calls[i] = (kn_expert_call){&f[ex[i]].e, X + off[i < 4 ? 0 : i] * hidden,
                                                Ts_[i], Y + off[i] * hidden};
                memset(Y, 0xff, off[NC] * hidden * 4);
                assert_int_equal(
                    kn_experts_run(calls, n, &glu, (kn_numerics)num, p ? pool : NULL, &err), 0);
                char what[80];
                snprintf(what, sizeof what, "%d experts, %s, %d thread(s)", n,
                         kn_numerics_name(num), p + 1);
                assert_true(kt_same_bits(what, Y, S, off[n] * hidden));
            }
        }
    }
    /* a bad expert anywhere fails the whole call with its message */
    kn_expert bad = f[1].e;
    bad.down.cols = 64;
    kn_expert_call calls[2] = {{&f[0].e, X, 1, Y}, {&bad, X, 1, Y + hidden}};
    assert_int_equal(kn_experts_run(calls, 2, &glu, KN_NUM_Q8, pool, &err), -1);
    assert_non_null(strstr(err.msg, "down"));
    assert_int_equal(kn_experts_run(calls, 0, &glu, KN_NUM_Q8, pool, &err), 0);
    kn_pool_destroy(pool);
    free(X), free(Y), free(S);
    for (int i = 0; i < NE; i++) free_expert(&f[i]);
}

/* A batch's experts, each with its own few rows (1 to 6, as a decode step routes them), handed to
 * the threads from both ends of the job sorted by rows: still one kn_expert_run per call, bit for
 * bit, with the parts sorted on the stack (8 calls) and in a heap copy (40 calls: 80 parts of
 * gate and up). */
static void test_experts_of_a_batch_from_both_ends(void **state) {
    (void)state;
    kt_rng r = {4711};
    const int64_t hidden = 2880, ff = 288;
    enum { NE = 6, NC = 40 };
    expert_fx f[NE];
    for (int i = 0; i < NE; i++) f[i] = make_expert(&r, KN_MXFP4, hidden, ff, true);
    int64_t Ts_[NC], off[NC + 1] = {0};
    for (int i = 0; i < NC; i++) {
        Ts_[i] = 1 + (i * 7 + i / 6) % 6;
        off[i + 1] = off[i] + Ts_[i];
    }
    float *X = kt_gauss_vec(&r, off[NC] * hidden, 1.0f);
    float *Y = malloc(off[NC] * hidden * 4), *S = malloc(off[NC] * hidden * 4);
    const kn_glu glu = {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f};
    kn_pool *pool = kn_pool_create(2);
    mw_err err;
    for (int i = 0; i < NC; i++)
        assert_int_equal(kn_expert_run(&f[i % NE].e, &glu, X + off[i] * hidden, Ts_[i],
                                       S + off[i] * hidden, KN_NUM_Q8, NULL, &err),
                         0);
    for (int n = 8; n <= NC; n += NC - 8) {
        kn_expert_call calls[NC];
        for (int i = 0; i < n; i++)
            calls[i] =
                (kn_expert_call){&f[i % NE].e, X + off[i] * hidden, Ts_[i], Y + off[i] * hidden};
        memset(Y, 0xff, off[NC] * hidden * 4);
        assert_int_equal(kn_experts_run(calls, n, &glu, KN_NUM_Q8, pool, &err), 0);
        char what[64];
        snprintf(what, sizeof what, "%d experts of a batch, 2 threads", n);
        assert_true(kt_same_bits(what, Y, S, off[n] * hidden));
    }
    kn_pool_destroy(pool);
    free(X), free(Y), free(S);
    for (int i = 0; i < NE; i++) free_expert(&f[i]);
}

static void test_glu_policies(void **state) {
    (void)state;
    const kn_glu sw = {.kind = KN_GLU_SWIGLU},
                 oai = {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f};
    const float g[] = {-3.0f, -0.5f, 0.0f, 0.7f, 6.9f, 7.5f, 100.0f, -100.0f, NAN};
    const float u[] = {2.0f, -9.0f, 1.0f, 0.3f, 8.0f, -7.5f, 1.0f, 1.0f, 1.0f};
    const int n = sizeof g / sizeof g[0];
    float out[16];
    kn_glu_apply(&sw, g, u, out, n);
    for (int i = 0; i < n - 1; i++) {
        const double want = glu64(&sw, g[i], u[i]);
        assert_true(fabs(out[i] - want) <= 1e-6 * fabs(want) + 1e-30);
    }
    assert_true(isnan(out[n - 1]));
    kn_glu_apply(&oai, g, u, out, n);
    for (int i = 0; i < n - 1; i++) {
        const double want = glu64(&oai, g[i], u[i]);
        assert_true(fabs(out[i] - want) <= 1e-6 * fabs(want) + 1e-30);
    }
    /* the clamps: g above the limit acts as the limit; u is clamped on both sides */
    assert_true(out[6] == out[6] && fabs(out[6] - glu64(&oai, 7.0, 1.0)) < 1e-5);
    kn_glu_apply(&oai, (const float[]){7.5f}, (const float[]){-7.5f}, out, 1);
    kn_glu_apply(&oai, (const float[]){7.0f}, (const float[]){-7.0f}, out + 1, 1);
    assert_true(out[0] == out[1]);
    assert_string_equal(kn_glu_name(KN_GLU_SWIGLU_OAI), "swiglu_oai");
    assert_int_equal(kn_glu_from_name("swiglu"), KN_GLU_SWIGLU);
    assert_int_equal(kn_glu_from_name("situ"), KN_GLU_SITU);
    assert_int_equal(kn_glu_from_name("geglu"), -1);
}

/* SiTU against float64 over a dense sweep, the up branch soft-capped (linear_beta > 0) and linear
 * (linear_beta 0 and negative): within a few float roundings of the value (each tanh, exp and
 * product adds one), and the two up branches really differ. */
static void test_situ_against_float64(void **state) {
    (void)state;
    const kn_glu glus[] = {{.kind = KN_GLU_SITU, .beta = 4.0f, .lbeta = 2.5f},
                           {.kind = KN_GLU_SITU, .beta = 0.75f, .lbeta = 0.0f},
                           {.kind = KN_GLU_SITU, .beta = 3.0f, .lbeta = -1.0f}};
    enum { N = 20001 };
    float *g = malloc(N * 4), *u = malloc(N * 4), *out = malloc(N * 4), *lin = malloc(N * 4);
    kt_rng r = {35};
    for (int i = 0; i < N; i++) {
        g[i] = (float)(i - N / 2) * 0.004f; /* -40 .. 40 */
        u[i] = kt_gauss(&r, 5.0f);
    }
    for (size_t k = 0; k < sizeof glus / sizeof glus[0]; k++) {
        kn_glu_apply(&glus[k], g, u, out, N);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            const double want = glu64(&glus[k], g[i], u[i]);
            const double e = fabs(out[i] - want) / (fabs(want) + 1e-30);
            if (e > worst && fabs(want) > 1e-30) worst = e;
        }
        printf("  situ(beta=%g, linear_beta=%g): worst relative error %.2e\n", (double)glus[k].beta,
               (double)glus[k].lbeta, worst);
        assert_true(worst < 6e-7);
    }
    /* the linear up branch is u itself: the same as beta's gate times u */
    const kn_glu capped = {.kind = KN_GLU_SITU, .beta = 3.0f, .lbeta = 2.0f};
    const kn_glu linear = {.kind = KN_GLU_SITU, .beta = 3.0f, .lbeta = 0.0f};
    kn_glu_apply(&capped, g, u, out, N);
    kn_glu_apply(&linear, g, u, lin, N);
    assert_true(memcmp(out, lin, N * 4) != 0);
    const float gate = (float)glu64(&linear, 1.0, 1.0);
    kn_glu_apply(&linear, (const float[]){1.0f}, (const float[]){1.0f}, out, 1);
    assert_true(fabsf(out[0] - gate) <= 1e-6f * gate);
    /* specials: NaN stays NaN; the gate saturates at beta above and at -0 below */
    kn_glu_apply(&capped, (const float[]){NAN, INFINITY, -INFINITY, 0.0f},
                 (const float[]){1.0f, 1.0f, 1.0f, NAN}, out, 4);
    assert_true(isnan(out[0]) && isnan(out[3]));
    assert_true(fabsf(out[1] - 3.0f * 2.0f * tanhf(0.5f)) <= 1e-6f);
    assert_true(out[2] == 0.0f);
    free(g), free(u), free(out), free(lin);
}

/* kn_tanhf: a few ulp of tanh everywhere, exact where tanh is 0, +-1 or odd. */
static void test_tanhf_accuracy(void **state) {
    (void)state;
    double worst = 0;
    for (float x = -12.0f; x < 12.0f; x += 0.00071f) {
        const double want = tanh((double)x);
        const double ulp = ldexp(1.0, ilogb(want) - 23);
        const double err = fabs(kn_tanhf(x) - want) / ulp;
        if (err > worst) worst = err;
    }
    for (float x = 1e-30f; x < 1.0f; x *= 1.37f) { /* tiny values: the polynomial's x */
        const double ulp = ldexp(1.0, ilogb(tanh((double)x)) - 23);
        const double err = fabs(kn_tanhf(x) - tanh((double)x)) / ulp;
        if (err > worst) worst = err;
    }
    printf("  kn_tanhf: worst error %.3f ulp\n", worst);
    assert_true(worst <= 2.5);
    assert_true(kn_tanhf(0.0f) == 0.0f && signbit(kn_tanhf(-0.0f)));
    assert_true(kn_tanhf(INFINITY) == 1.0f && kn_tanhf(-INFINITY) == -1.0f);
    assert_true(kn_tanhf(20.0f) == 1.0f && kn_tanhf(-20.0f) == -1.0f);
    assert_true(isnan(kn_tanhf(NAN)));
    for (float x = 0.01f; x < 9.0f; x *= 1.1f) assert_true(kn_tanhf(-x) == -kn_tanhf(x));
}

/* Parameters as the handshake carries them: in the row's order, checked, compared bit for bit. */
static void test_glu_params(void **state) {
    (void)state;
    const kn_glu situ = {.kind = KN_GLU_SITU, .beta = 4.0f, .lbeta = -1.0f};
    float p[KN_GLU_MAX_PARAMS];
    assert_int_equal(kn_glu_params(&situ, p), 2);
    assert_true(p[0] == 4.0f && p[1] == -1.0f);
    kn_glu back;
    mw_err err;
    assert_int_equal(kn_glu_make(KN_GLU_SITU, p, 2, &back, &err), 0);
    assert_true(kn_glu_same(&back, &situ));
    char buf[128];
    assert_string_equal(kn_glu_format(&situ, buf, sizeof buf), "situ(beta=4, linear_beta=-1)");
    const kn_glu sw = {.kind = KN_GLU_SWIGLU, .alpha = 1.0f, .limit = 2.0f},
                 sw2 = {.kind = KN_GLU_SWIGLU};
    assert_int_equal(kn_glu_params(&sw, p), 0);
    assert_true(kn_glu_same(&sw, &sw2)); /* parameters it does not take do not count */
    assert_string_equal(kn_glu_format(&sw, buf, sizeof buf), "swiglu");
    const kn_glu other = {.kind = KN_GLU_SITU, .beta = 4.0f, .lbeta = 0.0f};
    assert_false(kn_glu_same(&other, &situ));
    const kn_glu oai = {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f};
    assert_false(kn_glu_same(&oai, &situ));
    /* out of range, wrong counts, unknown kinds */
    assert_int_equal(kn_glu_make(KN_GLU_SITU, (const float[]){0.0f, 1.0f}, 2, &back, &err), -1);
    assert_non_null(strstr(err.msg, "beta"));
    assert_int_equal(kn_glu_make(KN_GLU_SITU, (const float[]){1.0f, NAN}, 2, &back, &err), -1);
    assert_int_equal(kn_glu_make(KN_GLU_SITU, p, 1, &back, &err), -1);
    assert_int_equal(kn_glu_make(KN_GLU_SWIGLU_OAI, (const float[]){1.0f, -7.0f}, 2, &back, &err),
                     -1);
    assert_int_equal(kn_glu_make(9, p, 0, &back, &err), -1);
    assert_int_equal(kn_glu_check(&(kn_glu){.kind = KN_GLU_SITU, .beta = -2.0f}, &err), -1);
}

/* The SIMD GLU kernels give the scalar bits for every value: a dense sweep, specials, values
 * around the limit, and odd lengths (SIMD body plus scalar tail). */
static void test_glu_same_bits_on_every_isa(void **state) {
    (void)state;
    enum { N = 4099 };
    float *g = malloc(N * 4), *u = malloc(N * 4), *want = malloc(N * 4), *got = malloc(N * 4);
    kt_rng r = {17};
    for (int i = 0; i < N; i++) {
        g[i] = (float)(i - N / 2) * 0.06f; /* -123 .. 123: overflow, underflow, everything */
        u[i] = kt_gauss(&r, 6.0f);
    }
    const float special[] = {NAN,    INFINITY, -INFINITY, 0.0f,    -0.0f,  7.0f,   -7.0f,
                             88.72f, 88.8f,    -103.9f,   -104.0f, 1e-40f, 3.4e38f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        g[7 * i] = special[i];
        u[7 * i + 3] = special[i];
    }
    const kn_glu glus[] = {{.kind = KN_GLU_SWIGLU},
                           {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f},
                           {.kind = KN_GLU_SWIGLU_OAI, .alpha = 60.0f, .limit = 7.0f},
                           {.kind = KN_GLU_SITU, .beta = 4.0f, .lbeta = 2.5f},
                           {.kind = KN_GLU_SITU, .beta = 0.3f, .lbeta = 0.0f},
                           {.kind = KN_GLU_SITU, .beta = 7.0f, .lbeta = -1.0f}};
    kt_variant v[KT_MAX_VARIANTS];
    const int nv = kt_variants(v);
    const kn_isa prev = kn_isa_active();
    for (size_t k = 0; k < sizeof glus / sizeof glus[0]; k++) {
        kn__glu_apply_ref(&glus[k], g, u, want, N);
        for (int i = 0; i < nv; i++) {
            kt_use(&v[i]);
            for (int len = N - 3; len <= N; len++) {
                memset(got, 0, N * 4);
                kn_glu_apply(&glus[k], g, u, got, len);
                assert_true(kt_same_bits(v[i].name, got, want, (size_t)len));
            }
        }
    }
    kn_isa_force(prev);
    free(g), free(u), free(want), free(got);
}

static void test_expf_accuracy_and_specials(void **state) {
    (void)state;
    double worst = 0;
    for (float x = -103.0f; x < 88.7f; x += 0.0037f) {
        const double want = exp((double)x);
        const float got = kn_expf(x);
        const double ulp = want < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(want) - 23);
        const double err = fabs(got - want) / ulp;
        if (err > worst) worst = err;
    }
    printf("  kn_expf: worst error %.3f ulp\n", worst);
    assert_true(worst <= 1.5);
    assert_true(kn_expf(0.0f) == 1.0f);
    assert_true(kn_expf(-INFINITY) == 0.0f);
    assert_true(kn_expf(INFINITY) == INFINITY);
    assert_true(isnan(kn_expf(NAN)));
    assert_true(kn_expf(88.8f) == INFINITY);
    assert_true(kn_expf(88.72f) < INFINITY);
    assert_true(kn_expf(-110.0f) == 0.0f);
    assert_true(kn_expf(-100.0f) > 0.0f); /* subnormal result, not flushed */
}

typedef struct count_arg {
    int hits[64];
    int nth_seen;
} count_arg;

static void count_task(void *arg, int ith, int nth) {
    count_arg *c = arg;
    __atomic_fetch_add(&c->hits[ith], 1, __ATOMIC_RELAXED);
    c->nth_seen = nth;
}

static void test_pool_runs_every_task_once(void **state) {
    (void)state;
    for (int n = 0; n <= 3; n++) {
        kn_pool *p = n == 0 ? NULL : kn_pool_create(n);
        const int size = kn_pool_size(p);
        assert_int_equal(size, n == 0 ? 1 : n);
        for (int rep = 0; rep < 2000; rep++) {
            count_arg c = {{0}, 0};
            kn_pool_run(p, count_task, &c);
            assert_int_equal(c.nth_seen, size);
            for (int i = 0; i < size; i++) assert_int_equal(c.hits[i], 1);
            assert_int_equal(c.hits[size], 0);
        }
        kn_pool_destroy(p);
    }
}

/* Two callers sharing one pool are serialized, and both get correct results. */
typedef struct caller_arg {
    kn_pool *pool;
    const kn_mat *W;
    const float *X;
    const float *want;
    int ok;
} caller_arg;

static void *caller(void *vp) {
    caller_arg *a = vp;
    float *Y = malloc(a->W->rows * 4 * 4);
    a->ok = 1;
    for (int i = 0; i < 50; i++) {
        kn_matmul(a->W, a->X, 4, Y, KN_NUM_Q8, a->pool);
        if (memcmp(Y, a->want, a->W->rows * 4 * 4) != 0) a->ok = 0;
    }
    free(Y);
    return NULL;
}

static void test_pool_shared_by_two_callers(void **state) {
    (void)state;
    kt_rng r = {3};
    kn_mat W = kt_random_mat(&r, KN_MXFP4, 256, 1024, 0.05f);
    float *X = kt_gauss_vec(&r, 4 * 1024, 1.0f), *want = malloc(256 * 4 * 4);
    kn_matmul(&W, X, 4, want, KN_NUM_Q8, NULL);
    kn_pool *pool = kn_pool_create(2);
    caller_arg a = {pool, &W, X, want, 0}, b = a;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, caller, &a);
    pthread_create(&tb, NULL, caller, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_true(a.ok && b.ok);
    kn_pool_destroy(pool);
    kt_free_mat(&W);
    free(X), free(want);
}

/* A task of a pool that calls back into the same pool (a matmul inside a pool job) runs inline
 * rather than deadlocking, and gets the right result. */
typedef struct nested_arg {
    kn_pool *pool;
    const kn_mat *W;
    const float *X;
    float *Y[4];
    int inner_hits;
} nested_arg;

static void inner_task(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    __atomic_fetch_add(&((nested_arg *)arg)->inner_hits, 1, __ATOMIC_RELAXED);
}

static void nested_task(void *arg, int ith, int nth) {
    nested_arg *a = arg;
    (void)nth;
    kn_matmul(a->W, a->X, 3, a->Y[ith], KN_NUM_Q8, a->pool);
    kn_pool_run(a->pool, inner_task, a);
}

static void test_pool_nested_use_runs_inline(void **state) {
    (void)state;
    kt_rng r = {5};
    kn_mat W = kt_random_mat(&r, KN_MXFP4, 300, 1024, 0.05f);
    float *X = kt_gauss_vec(&r, 3 * 1024, 1.0f), *want = malloc(300 * 3 * 4);
    kn_matmul(&W, X, 3, want, KN_NUM_Q8, NULL);
    kn_pool *pool = kn_pool_create(2);
    nested_arg a = {pool, &W, X, {0}, 0};
    for (int i = 0; i < 2; i++) a.Y[i] = malloc(300 * 3 * 4);
    kn_pool_run(pool, nested_task, &a);
    for (int i = 0; i < 2; i++) {
        assert_memory_equal(a.Y[i], want, 300 * 3 * 4);
        free(a.Y[i]);
    }
    assert_int_equal(a.inner_hits, 4); /* two outer tasks, each running the 2 inner tasks */
    kn_pool_destroy(pool);
    kt_free_mat(&W);
    free(X), free(want);
}

static void test_mat_check(void **state) {
    (void)state;
    uint8_t buf[64];
    mw_err err;
    kn_mat m = {KN_MXFP4, 1, 30, 17, buf, NULL};
    assert_int_equal(kn_mat_check(&m, "w", &err), -1);
    assert_non_null(strstr(err.msg, "multiple of"));
    m = (kn_mat){(kn_type)99, 1, 32, 17, buf, NULL};
    assert_int_equal(kn_mat_check(&m, "w", &err), -1);
    assert_non_null(strstr(err.msg, "unknown"));
    m = (kn_mat){KN_MXFP4, 2, 32, 17, NULL, NULL};
    assert_int_equal(kn_mat_check(&m, "w", &err), -1);
    m = (kn_mat){KN_MXFP4, 2, 32, 17, buf, NULL};
    assert_int_equal(kn_mat_check(&m, "w", &err), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expert_matches_composition_and_reference),
        cmocka_unit_test(test_packed_expert_equals_stored),
        cmocka_unit_test(test_expert_rejects_bad_shapes),
        cmocka_unit_test(test_experts_run_equals_single_calls),
        cmocka_unit_test(test_experts_of_a_batch_from_both_ends),
        cmocka_unit_test(test_glu_policies),
        cmocka_unit_test(test_situ_against_float64),
        cmocka_unit_test(test_tanhf_accuracy),
        cmocka_unit_test(test_glu_params),
        cmocka_unit_test(test_glu_same_bits_on_every_isa),
        cmocka_unit_test(test_expf_accuracy_and_specials),
        cmocka_unit_test(test_pool_runs_every_task_once),
        cmocka_unit_test(test_pool_shared_by_two_callers),
        cmocka_unit_test(test_pool_nested_use_runs_inline),
        cmocka_unit_test(test_mat_check),
    };
    return cmocka_run_group_tests_name("kernels_expert", tests, NULL, NULL);
}
