/* tests/metal/test_mt_emu.c — the Metal kernels (metal/mt_kernels.metal) run by the emulator
 * (metal/emu/: the .metal source compiled as C++, 32-lane SIMD-groups as coroutines) against the
 * scalar reference of kernels/, bit for bit:
 *  - every kernel variant (matvec, tiled, float lanes) of every format in both numerics, for every
 *    T from 1 to 64, on rows whose count is not a multiple of a tile and rows of more than 8
 *    blocks, with inputs that take the quantizers' edge paths (zeros, a tie of +max and -max,
 *    subnormals, NaN);
 *  - the whole Metal executor (mt_moe_exec) against md_moe_exec on every layer of the standard
 *    bank: several experts, rows routed to different experts (and some to none), partial and
 *    exact mode, every GLU policy, biases in place and converted;
 *  - the bandwidth kernel, the region planner's use by the device, refusals (an unsupported type,
 *    an expert the device does not hold). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metal/mt_bank.h"
#include "metal/mt_dev.h"
#include "model/md_moe.h"
#include "tests/support/mw_test.h"

extern const mt_backend mt_backend_emu;
int mt_emu_has_kernel(const char *name);

#define ROWS 19 /* not a multiple of the tiles' rows (16 and 8) */
#define TMAX 64

/* Inputs: random rows, then rows that take the quantizers' edge paths. */
static void make_inputs(float *X, int64_t K, uint64_t seed) {
    uint64_t s = seed | 1;
    for (int64_t t = 0; t < TMAX; t++)
        for (int64_t k = 0; k < K; k++) X[t * K + k] = mt_bank_rand(&s) * (1.0f + (float)(t % 5));
    memset(X, 0, (size_t)K * sizeof(float)); /* row 0: zeros (amax 0) */
    X[K + 5] = 3.0f, X[K + 100] = -3.0f;     /* row 1: +max first, -max later in a block */
    X[2 * K + 7] = -3.0f, X[2 * K + 9] = 3.0f;
    for (int64_t k = 0; k < K; k++) X[3 * K + k] = 1e-41f * (float)(k % 7); /* subnormals */
    X[4 * K + K / 2] = NAN; /* quantized to 0; float lanes carry it */
}

/* A table of one layer whose expert e has the test matrix of format fmts[e] as gate, up and down
 * (mt_matmul reads one matrix; the executor never sees this table). */
static const kn_type fmts[4] = {KN_MXFP4, KN_Q8_0, KN_Q4_K, KN_Q6_K};

static int64_t width_of(kn_type t) {
    return kn_traits(t)->blck_size == 32 ? 32 * 19 : 256 * 9; /* 19 or 9 blocks: lanes wrap */
}

static void test_kernels_every_t(void **state) {
    (void)state;
    kn_isa prev = kn_isa_active();
    kn_isa_force(KN_ISA_SCALAR);
    kn_expert ex[4];
    void *mem[4];
    uint64_t s = 7;
    for (int f = 0; f < 4; f++) {
        const int64_t K = width_of(fmts[f]);
        kn_mat W = {.type = fmts[f], .rows = ROWS, .cols = K, .row_bytes = kn_row_size(fmts[f], K)};
        assert_int_equal(posix_memalign(&mem[f], 16384, 16384 + ROWS * W.row_bytes), 0);
        float *tmp = malloc((size_t)K * sizeof(float));
        for (int r = 0; r < ROWS; r++) {
            for (int64_t k = 0; k < K; k++) tmp[k] = mt_bank_rand(&s) * 0.25f;
            kn_traits(W.type)->from_float(tmp, (uint8_t *)mem[f] + r * W.row_bytes, K);
        }
        free(tmp);
        if (W.type == KN_MXFP4) ((uint8_t *)mem[f])[17] = 0x01; /* a subnormal scale */
        W.data = mem[f];
        ex[f] = (kn_expert){W, W, W, {0}, {0}, {0}};
    }
    md_expert_table t = {.n_layers = 1, .n_experts = 4, .experts = ex};
    mw_err err;
    mt_dev *d;
    assert_int_equal(mt_dev_open(&mt_backend_emu, &t, 0, &d, &err), 0);
    for (int f = 0; f < 4; f++) {
        const int64_t K = width_of(fmts[f]);
        float *X = malloc((size_t)(TMAX * K) * sizeof(float));
        float *ref = malloc((size_t)TMAX * ROWS * sizeof(float));
        float *Y = malloc((size_t)TMAX * ROWS * sizeof(float));
        make_inputs(X, K, 11 + (uint64_t)f);
        for (int num = 0; num < KN_NUM_COUNT; num++) {
            kn_matmul(&ex[f].gate, X, TMAX, ref, (kn_numerics)num, NULL);
            const int variants = num == KN_NUM_Q8 ? 2 : 1;
            for (int v = 0; v < variants; v++) {
                const mt_variant var = num == KN_NUM_F32 ? MT_AUTO : v ? MT_TILED : MT_MATVEC;
                for (int64_t T = 1; T <= TMAX; T++) {
                    if (mt_matmul(d, 0, f, 0, X, T, Y, (kn_numerics)num, var, NULL, &err))
                        fail_msg("%s", err.msg);
                    if (memcmp(Y, ref, (size_t)(T * ROWS) * sizeof(float))) {
                        for (int64_t i = 0; i < T * ROWS; i++)
                            if (memcmp(&Y[i], &ref[i], 4))
                                fail_msg("%s %s variant %d T=%lld: output %lld (token %lld row "
                                         "%lld) is %.9g, the CPU's %.9g",
                                         kn_type_name(fmts[f]), kn_numerics_name(num), v,
                                         (long long)T, (long long)i, (long long)(i / ROWS),
                                         (long long)(i % ROWS), Y[i], ref[i]);
                    }
                }
            }
        }
        free(X);
        free(ref);
        free(Y);
    }
    mt_dev_close(d);
    for (int f = 0; f < 4; f++) free(mem[f]);
    kn_isa_force(prev);
}

typedef struct exec_case {
    int layer;
    kn_numerics num;
    md_moe_output mode;
    kn_glu glu;
    int64_t T;
} exec_case;

static void check_exec(mt_dev *d, mt_bank *b, const exec_case *c, uint64_t seed) {
    const mt_bank_layer *L = &mt_bank_layers[c->layer];
    const int64_t w = L->hidden;
    uint64_t s = seed | 1;
    float *x = malloc((size_t)(c->T * w) * sizeof(float));
    mt_bank_rows(x, c->T, w, &s);
    md_assignment *as = malloc((size_t)(c->T * 3) * sizeof *as);
    const int64_t n = mt_bank_route(as, c->T, 3, L->n_experts, &s);
    const size_t out_floats = (size_t)((c->mode == MD_MOE_PARTIAL ? c->T : n) * w);
    float *ref = malloc(out_floats * sizeof(float) + 4),
          *got = malloc(out_floats * sizeof(float) + 4);
    md_moe_exec_args a = {.layer = c->layer,
                          .rows = c->T,
                          .width = w,
                          .x = x,
                          .assign = as,
                          .n_assign = n,
                          .mode = c->mode,
                          .glu = &c->glu,
                          .numerics = c->num,
                          .lookup = mt_bank_lookup,
                          .lookup_ctx = b};
    mw_err err;
    uint64_t bytes_cpu = 0, bytes_mt = 0;
    assert_int_equal(md_moe_exec(&a, ref, &bytes_cpu, &err), 0);
    if (mt_moe_exec(d, &a, got, &bytes_mt, &err)) fail_msg("%s", err.msg);
    assert_true(bytes_mt == bytes_cpu);
    for (size_t i = 0; i < out_floats; i++)
        if (memcmp(&got[i], &ref[i], 4))
            fail_msg("layer %s, %s, %s, %s, T=%lld: output %zu (row %zu) is %.9g, the CPU's %.9g",
                     L->name, kn_numerics_name(c->num), c->mode ? "exact" : "partial",
                     kn_glu_name(c->glu.kind), (long long)c->T, i, i / (size_t)w, got[i], ref[i]);
    free(x);
    free(as);
    free(ref);
    free(got);
}

static void test_exec_every_layer(void **state) {
    (void)state;
    kn_isa prev = kn_isa_active();
    kn_isa_force(KN_ISA_SCALAR);
    mt_bank b;
    mw_err err;
    assert_int_equal(mt_bank_make(&b, mt_bank_layers, mt_bank_n_layers, 42, &err), 0);
    mt_dev *d;
    if (mt_dev_open(&mt_backend_emu, &b.table, 0, &d, &err)) fail_msg("%s", err.msg);
    const kn_glu oai = {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f};
    const kn_glu silu = {.kind = KN_GLU_SWIGLU};
    const kn_glu situ = {.kind = KN_GLU_SITU, .beta = 4.0f, .lbeta = 2.5f};
    const kn_glu situ_linear = {.kind = KN_GLU_SITU, .beta = 3.0f, .lbeta = 0.0f};
    const int64_t Ts[] = {1, 5, 40};
    uint64_t seed = 1;
    for (int l = 0; l < mt_bank_n_layers; l++)
        for (int num = 0; num < KN_NUM_COUNT; num++)
            for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
                const exec_case c = {l, (kn_numerics)num, MD_MOE_PARTIAL, oai, Ts[i]};
                check_exec(d, &b, &c, seed++);
            }
    /* the mode and the GLU do not depend on the format: two layers run the other ones */
    for (int l = 0; l < 3; l += 2)
        for (int num = 0; num < KN_NUM_COUNT; num++) {
            exec_case c = {l, (kn_numerics)num, MD_MOE_EXACT, silu, 9};
            check_exec(d, &b, &c, seed++);
            c.glu = oai;
            check_exec(d, &b, &c, seed++);
            c.mode = MD_MOE_PARTIAL;
            c.glu = silu;
            check_exec(d, &b, &c, seed++);
            c.glu = situ;
            check_exec(d, &b, &c, seed++);
            c.glu = situ_linear;
            check_exec(d, &b, &c, seed++);
        }
    mt_dev_close(d);
    mt_bank_free(&b);
    kn_isa_force(prev);
}

/* An expert the lookup does not give, a view that is not the device's, no assignments. */
static void test_exec_refusals(void **state) {
    (void)state;
    mt_bank b;
    mw_err err;
    assert_int_equal(mt_bank_make(&b, mt_bank_layers, 2, 5, &err), 0);
    mt_dev *d;
    assert_int_equal(mt_dev_open(&mt_backend_emu, &b.table, 0, &d, &err), 0);
    float x[352] = {0}, out[352];
    md_assignment as = {0, 9, 1.0f};
    const kn_glu glu = {.kind = KN_GLU_SWIGLU};
    md_moe_exec_args a = {.layer = 0,
                          .rows = 1,
                          .width = 352,
                          .x = x,
                          .assign = &as,
                          .n_assign = 1,
                          .glu = &glu,
                          .lookup = mt_bank_lookup,
                          .lookup_ctx = &b};
    assert_int_equal(mt_moe_exec(d, &a, out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "expert 9"));
    as.expert = 1;
    a.layer = 1; /* width 288 there: the same x is too wide for the bank's layer 1 */
    assert_int_equal(mt_moe_exec(d, &a, out, NULL, &err), -1);
    a.layer = 0;
    a.n_assign = 0;
    out[0] = 1.0f;
    assert_int_equal(mt_moe_exec(d, &a, out, NULL, &err), 0);
    assert_true(out[0] == 0.0f); /* partial mode: a row without assignments is zero */
    mt_dev_close(d);
    /* a format without Metal kernels */
    kn_expert *e = md_expert_table_at(&b.table, 1, 0);
    e->down.type = KN_F16;
    assert_int_equal(mt_dev_open(&mt_backend_emu, &b.table, 0, &d, &err), -1);
    assert_non_null(strstr(err.msg, "f16"));
    mt_bank_free(&b);
    /* a GLU policy without a kernel is named */
    const kn_glu bad = {.kind = KN_GLU_COUNT};
    assert_int_equal(mt_glu_check(&bad, &err), -1);
}

/* Every kernel the host's tables name is in the source (the Darwin backend compiles them all). */
static void test_every_kernel_exists(void **state) {
    (void)state;
    const char *names[64];
    const int n = mt_kernel_names(names, 64);
    assert_true(n > 10 && n <= 64);
    for (int i = 0; i < n; i++)
        if (!mt_emu_has_kernel(names[i])) fail_msg("no kernel %s in mt_kernels.metal", names[i]);
    assert_false(mt_emu_has_kernel("mt_no_such_kernel"));
}

static void test_bandwidth_kernel(void **state) {
    (void)state;
    md_expert_table t = {.n_layers = 1, .n_experts = 1};
    kn_expert none = {0};
    t.experts = &none;
    mw_err err;
    mt_dev *d;
    assert_int_equal(mt_dev_open(&mt_backend_emu, &t, 1 << 16, &d, &err), 0);
    assert_true(mt_dev_read_gbps(d) > 0);
    assert_non_null(strstr(mt_dev_name(d), "emulator"));
    mt_dev_close(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_every_t),  cmocka_unit_test(test_exec_every_layer),
        cmocka_unit_test(test_exec_refusals),    cmocka_unit_test(test_every_kernel_exists),
        cmocka_unit_test(test_bandwidth_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
