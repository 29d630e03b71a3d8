/* tests/unit/test_md_moe.c — the MoE executor: grouping by expert gives each row exactly what the
 * expert computes for it alone (bit for bit), PARTIAL sums in the given order with
 * md_moe_accumulate, EXACT returns unweighted rows, results match a double reference, bad
 * assignments are errors, weight bytes are counted once per expert and batch. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_moe.h"

enum { W = 40, F = 24, NE = 5, ROWS = 7 };

typedef struct bank {
    float gate[NE][F * W], up[NE][F * W], down[NE][W * F];
    float gb[NE][F], ub[NE][F], db[NE][W];
    kn_expert e[NE];
    int lookups;
} bank;

static kn_mat f32(const float *d, int64_t rows, int64_t cols) {
    return (kn_mat){.type = KN_F32,
                    .rows = rows,
                    .cols = cols,
                    .row_bytes = (size_t)cols * sizeof(float),
                    .data = d};
}

static void make_bank(bank *b) {
    memset(b, 0, sizeof *b);
    for (int e = 0; e < NE; e++) {
        for (int i = 0; i < F * W; i++) {
            b->gate[e][i] = 0.3f * sinf(0.7f * (float)(i + 131 * e));
            b->up[e][i] = 0.3f * cosf(0.3f * (float)(i + 17 * e));
            b->down[e][i] = 0.2f * sinf(0.11f * (float)(i * 3 + e));
        }
        for (int i = 0; i < F; i++) {
            b->gb[e][i] = 0.1f * (float)(i % 5) - 0.2f;
            b->ub[e][i] = 0.05f * (float)e;
        }
        for (int i = 0; i < W; i++) b->db[e][i] = 0.01f * (float)(i - e);
        b->e[e] = (kn_expert){.gate = f32(b->gate[e], F, W),
                              .up = f32(b->up[e], F, W),
                              .down = f32(b->down[e], W, F),
                              .gate_b = f32(b->gb[e], 1, F),
                              .up_b = f32(b->ub[e], 1, F),
                              .down_b = f32(b->db[e], 1, W)};
    }
}

static const kn_expert *lookup(void *ctx, int layer, int expert, mw_err *err) {
    bank *b = ctx;
    b->lookups++;
    if (expert >= NE) {
        mw_errf(err, "no expert %d in layer %d", expert, layer);
        return NULL;
    }
    return &b->e[expert];
}

static const kn_glu glu = {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f};

/* y = down · glu(gate x + gb, up x + ub) + db in double */
static void reference(const bank *b, int e, const float *x, double *y) {
    double a[F];
    for (int f = 0; f < F; f++) {
        double g = b->gb[e][f], u = b->ub[e][f];
        for (int i = 0; i < W; i++) {
            g += (double)b->gate[e][f * W + i] * x[i];
            u += (double)b->up[e][f * W + i] * x[i];
        }
        g = fmin(g, 7.0);
        u = fmax(-7.0, fmin(u, 7.0));
        a[f] = g / (1 + exp(-1.702 * g)) * (u + 1);
    }
    for (int i = 0; i < W; i++) {
        y[i] = b->db[e][i];
        for (int f = 0; f < F; f++) y[i] += (double)b->down[e][i * F + f] * a[f];
    }
}

static float X[ROWS * W];
/* rows route to overlapping experts; row 3 uses expert 2 twice-removed order, row 6 none */
static const md_assignment assign[] = {
    {0, 1, 0.6f}, {0, 3, 0.4f}, {1, 1, 0.9f},  {1, 0, 0.1f},  {2, 4, 0.5f}, {2, 1, 0.5f},
    {3, 2, 0.7f}, {3, 4, 0.3f}, {4, 1, 0.25f}, {4, 2, 0.75f}, {5, 0, 1.0f},
};
#define N_ASSIGN (int64_t)(sizeof assign / sizeof assign[0])

static md_moe_exec_args args(bank *b, md_moe_output mode, md_moe_ws *ws) {
    for (int i = 0; i < ROWS * W; i++) X[i] = cosf(0.37f * (float)i) * 1.5f;
    return (md_moe_exec_args){.layer = 3,
                              .rows = ROWS,
                              .width = W,
                              .x = X,
                              .assign = assign,
                              .n_assign = N_ASSIGN,
                              .mode = mode,
                              .glu = &glu,
                              .numerics = KN_NUM_F32,
                              .lookup = lookup,
                              .lookup_ctx = b,
                              .ws = ws};
}

static void test_exact_rows_equal_single_row_runs(void **state) {
    (void)state;
    static bank b;
    make_bank(&b);
    md_moe_exec_args a = args(&b, MD_MOE_EXACT, NULL);
    float out[N_ASSIGN * W];
    uint64_t bytes = 0;
    mw_err e;
    if (md_moe_exec(&a, out, &bytes, &e)) fail_msg("%s", e.msg);
    for (int64_t i = 0; i < N_ASSIGN; i++) {
        float y[W];
        assert_int_equal(kn_expert_run(&b.e[assign[i].expert], &glu, X + assign[i].row * W, 1, y,
                                       KN_NUM_F32, NULL, NULL),
                         0);
        assert_memory_equal(out + i * W, y, sizeof y);
        double ref[W];
        reference(&b, assign[i].expert, X + assign[i].row * W, ref);
        for (int j = 0; j < W; j++) assert_float_equal(out[i * W + j], ref[j], 1e-5);
    }
    /* 5 distinct experts, each read once */
    uint64_t want = 0;
    for (int x = 0; x < NE; x++) want += kn_expert_weight_bytes(&b.e[x]);
    assert_int_equal(bytes, want);
    assert_int_equal(b.lookups, NE);
}

static void test_partial_sums_in_given_order(void **state) {
    (void)state;
    static bank b;
    make_bank(&b);
    md_moe_ws *ws = md_moe_ws_new();
    float exact[N_ASSIGN * W], out[ROWS * W];
    md_moe_exec_args a = args(&b, MD_MOE_EXACT, ws);
    assert_int_equal(md_moe_exec(&a, exact, NULL, NULL), 0);
    a.mode = MD_MOE_PARTIAL;
    memset(out, 0x7f, sizeof out); /* overwritten, not accumulated into */
    assert_int_equal(md_moe_exec(&a, out, NULL, NULL), 0);
    float want[ROWS * W] = {0};
    for (int64_t i = 0; i < N_ASSIGN; i++)
        md_moe_accumulate(want + assign[i].row * W, exact + i * W, assign[i].weight, W);
    assert_memory_equal(out, want, sizeof out);
    for (int j = 0; j < W; j++) assert_float_equal(out[6 * W + j], 0, 0); /* row 6: no experts */
    /* the same workspace serves a smaller call, and matches a call without one */
    a.n_assign = 3;
    float o2[ROWS * W], o3[ROWS * W];
    assert_int_equal(md_moe_exec(&a, o2, NULL, NULL), 0);
    a.ws = NULL;
    assert_int_equal(md_moe_exec(&a, o3, NULL, NULL), 0);
    assert_memory_equal(o2, o3, sizeof o2);
    md_moe_ws_free(ws);
}

/* A lookup that hands out the same storage every time (as a remote-view cache may) and a 2-thread
 * pool give the same bits: the executor copies each view before looking up the next. */
static const kn_expert *lookup_reused(void *ctx, int layer, int expert, mw_err *err) {
    static kn_expert view;
    const kn_expert *e = lookup(ctx, layer, expert, err);
    if (!e) return NULL;
    view = *e;
    return &view;
}

static void test_lookup_storage_reused_and_threads(void **state) {
    (void)state;
    static bank b;
    make_bank(&b);
    float want[N_ASSIGN * W], out[N_ASSIGN * W];
    md_moe_exec_args a = args(&b, MD_MOE_EXACT, NULL);
    assert_int_equal(md_moe_exec(&a, want, NULL, NULL), 0);
    kn_pool *pool = kn_pool_create(2);
    md_moe_ws *ws = md_moe_ws_new();
    a.lookup = lookup_reused;
    a.pool = pool;
    a.ws = ws;
    for (int rep = 0; rep < 2; rep++) {
        memset(out, 0x7f, sizeof out);
        assert_int_equal(md_moe_exec(&a, out, NULL, NULL), 0);
        assert_memory_equal(out, want, sizeof out);
    }
    md_moe_ws_free(ws);
    kn_pool_destroy(pool);
}

static void test_accumulate_is_plain_float(void **state) {
    (void)state;
    float acc[3] = {1.0f, 0.0f, -2.0f};
    const float y[3] = {0.1f, 3.0f, 1e-8f};
    md_moe_accumulate(acc, y, 0.3f, 3);
    assert_true(acc[0] == 1.0f + 0.3f * 0.1f);
    assert_true(acc[1] == 0.3f * 3.0f);
    assert_true(acc[2] == -2.0f + 0.3f * 1e-8f);
    /* every width, the vector blocks and the tail: bit for bit one rounded multiply and one
     * rounded add per element (subnormals, signed zeros and large values included) */
    enum { N = 67 };
    float a[N], b[N], y2[N];
    uint32_t st = 12345u;
    for (int width = 0; width <= N; width++) {
        for (int i = 0; i < N; i++) {
            st = st * 1664525u + 1013904223u;
            const float v[6] = {(float)(st >> 8) * 1e-5f, -0.0f, 1e-40f, -3.0e38f, 7.5f, 1e-45f};
            a[i] = b[i] = v[st % 6] * (i % 2 ? -1.0f : 1.0f);
            y2[i] = v[(st >> 4) % 6] + (float)i;
        }
        volatile float w = 0.37f; /* the reference loop's operations stay scalar */
        md_moe_accumulate(a, y2, w, width);
        for (int i = 0; i < width; i++) {
            volatile float p = w * y2[i];
            volatile float q = b[i] + p;
            b[i] = q;
        }
        assert_memory_equal(a, b, sizeof a);
    }
}

static void test_bad_assignments(void **state) {
    (void)state;
    static bank b;
    make_bank(&b);
    float out[N_ASSIGN * W];
    mw_err e;
    md_assignment bad[2] = {{0, 1, 0.5f}, {ROWS, 1, 0.5f}};
    md_moe_exec_args a = args(&b, MD_MOE_PARTIAL, NULL);
    a.assign = bad;
    a.n_assign = 2;
    assert_int_equal(md_moe_exec(&a, out, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "row 7"));
    bad[1] = (md_assignment){0, -1, 0.5f};
    assert_int_equal(md_moe_exec(&a, out, NULL, &e), -1);
    bad[1] = (md_assignment){0, NE, 0.5f}; /* the lookup refuses it */
    assert_int_equal(md_moe_exec(&a, out, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "no expert 5"));
    bad[1] = (md_assignment){0, 1, NAN};
    assert_int_equal(md_moe_exec(&a, out, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "non-finite"));
    a = args(&b, (md_moe_output)7, NULL);
    assert_int_equal(md_moe_exec(&a, out, NULL, &e), -1);
    a = args(&b, MD_MOE_EXACT, NULL);
    a.width = 0;
    assert_int_equal(md_moe_exec(&a, out, NULL, &e), -1);
    a.width = W;
    a.rows = 1LL << 40;
    assert_int_equal(md_moe_exec(&a, out, NULL, &e), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_rows_equal_single_row_runs),
        cmocka_unit_test(test_partial_sums_in_given_order),
        cmocka_unit_test(test_lookup_storage_reused_and_threads),
        cmocka_unit_test(test_accumulate_is_plain_float),
        cmocka_unit_test(test_bad_assignments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
