/* tests/unit/test_kn_mxfp4_ct.c — MXFP4 in compressed-tensors' planar layout (KN_MXFP4_CT): the
 * planes written from block_mxfp4 and back are the same bytes; to_float, kn_mat_row, kn_matmul
 * (both numerics, every ISA this machine runs, T from 1 to 17, 1 and 2 threads) and the fused
 * expert give the block_mxfp4 twin's results bit for bit; the type's rules (a whole matrix, no
 * GGUF id, the traits row) hold. */
#include "tests/unit/kn_test_util.h"
#include "util/mw_err.h"

static const int64_t Ts[] = {1, 2, 3, 4, 5, 8, 9, 16, 17};
#define NTS (sizeof Ts / sizeof Ts[0])

/* The planar twin of a block_mxfp4 matrix (dense rows). */
static kn_mat planar_of(const kn_mat *B) {
    const size_t bytes = (size_t)B->rows * B->row_bytes;
    void *d = malloc(bytes);
    kn_mxfp4_ct_from_blocks(B->data, B->rows, B->cols, d);
    return (kn_mat){.type = KN_MXFP4_CT,
                    .rows = B->rows,
                    .cols = B->cols,
                    .row_bytes = kn_row_size(KN_MXFP4_CT, B->cols),
                    .data = d};
}

static void test_planes_round_trip(void **state) {
    (void)state;
    kt_rng r = {31};
    const int64_t rows = 7, cols = 96;
    kn_mat B = kt_weights(&r, KN_MXFP4, rows, cols, true);
    kn_mat P = planar_of(&B);
    const uint8_t *p = P.data;
    /* the planes' geometry: row 3's first scale byte is block (3, 0)'s E8M0 byte; its first code
     * byte holds elements 0 (low) and 1 (high) */
    const uint8_t *b3 = (const uint8_t *)B.data + 3 * B.row_bytes;
    assert_int_equal(p[rows * cols / 2 + 3 * (cols / 32)], b3[0]);
    assert_int_equal(p[3 * cols / 2] & 15, b3[1] & 15);
    assert_int_equal(p[3 * cols / 2] >> 4, b3[2] & 15);
    uint8_t *back = malloc((size_t)rows * B.row_bytes);
    kn_mxfp4_ct_rows_to_blocks(&P, 0, rows, back);
    assert_memory_equal(back, B.data, (size_t)rows * B.row_bytes);
    kn_mxfp4_ct_rows_to_blocks(&P, 4, 2, back);
    assert_memory_equal(back, (const uint8_t *)B.data + 4 * B.row_bytes, 2 * B.row_bytes);
    free(back);
    kt_free_mat(&B);
    free((void *)P.data);
}

static void test_values_equal_blocks(void **state) {
    (void)state;
    kt_rng r = {5};
    const int64_t rows = 9, cols = 2880;
    kn_mat B = kt_weights(&r, KN_MXFP4, rows, cols, true);
    kn_mat P = planar_of(&B);
    float *a = malloc(cols * 4), *b = malloc(cols * 4);
    for (int64_t n = 0; n < rows; n++) {
        kn_mat_row(&B, n, a);
        kn_mat_row(&P, n, b);
        assert_true(kt_same_bits("kn_mat_row", b, a, (size_t)cols));
    }
    /* the traits row: one row's codes then its scales */
    kn_mat one = planar_of(&(kn_mat){KN_MXFP4, 1, cols, B.row_bytes, B.data, NULL});
    kn_traits(KN_MXFP4_CT)->to_float(one.data, b, cols);
    kn_mat_row(&B, 0, a);
    assert_true(kt_same_bits("to_float", b, a, (size_t)cols));
    /* from_float gives MXFP4's codes and exponents */
    float *x = kt_gauss_vec(&r, cols, 0.3f);
    uint8_t *qb = malloc(B.row_bytes), *qp = malloc(B.row_bytes), *qb2 = malloc(B.row_bytes);
    kn_traits(KN_MXFP4)->from_float(x, qb, cols);
    kn_traits(KN_MXFP4_CT)->from_float(x, qp, cols);
    kn_mxfp4_ct_rows_to_blocks(&(kn_mat){KN_MXFP4_CT, 1, cols, B.row_bytes, qp, NULL}, 0, 1, qb2);
    assert_memory_equal(qb2, qb, B.row_bytes);
    free(x), free(qb), free(qp), free(qb2), free(a), free(b);
    free((void *)one.data);
    kt_free_mat(&B);
    free((void *)P.data);
}

/* kn_matmul on the planar matrix = on the blocks, bit for bit, for every ISA, T, thread count
 * and numerics. */
static void test_matmul_equals_blocks(void **state) {
    (void)state;
    kt_rng r = {11};
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    kn_pool *pool2 = kn_pool_create(2);
    const int64_t rows = 37, cols = 3584 + 64;
    kn_mat B = kt_weights(&r, KN_MXFP4, rows, cols, true);
    kn_mat P = planar_of(&B);
    float *X = kt_gauss_vec(&r, 17 * cols, 1.0f), *Yb = malloc(17 * rows * 4);
    float *Yp = malloc(17 * rows * 4);
    for (int v = 0; v < nisa; v++) {
        kt_use(&isas[v]);
        for (int num = 0; num < KN_NUM_COUNT; num++)
            for (size_t ti = 0; ti < NTS; ti++)
                for (int th = 0; th < 2; th++) {
                    kn_pool *pool = th ? pool2 : NULL;
                    kn_matmul(&B, X, Ts[ti], Yb, (kn_numerics)num, pool);
                    kn_matmul(&P, X, Ts[ti], Yp, (kn_numerics)num, pool);
                    char what[96];
                    snprintf(what, sizeof what, "%s %s T=%lld threads=%d", isas[v].name,
                             kn_numerics_name((kn_numerics)num), (long long)Ts[ti], th + 1);
                    if (!kt_same_bits(what, Yp, Yb, (size_t)(Ts[ti] * rows))) fail_msg("%s", what);
                }
    }
    kn_isa_force(prev);
    kn_pool_destroy(pool2);
    free(X), free(Yb), free(Yp);
    kt_free_mat(&B);
    free((void *)P.data);
}

/* The fused expert (K3's SiTU) with planar gate, up and down = with block_mxfp4 ones. */
static void test_expert_equals_blocks(void **state) {
    (void)state;
    kt_rng r = {19};
    const int64_t H = 256, F = 192, T = 5;
    kn_expert eb = {0}, ep = {0};
    eb.gate = kt_weights(&r, KN_MXFP4, F, H, false);
    eb.up = kt_weights(&r, KN_MXFP4, F, H, false);
    eb.down = kt_weights(&r, KN_MXFP4, H, F, false);
    ep.gate = planar_of(&eb.gate), ep.up = planar_of(&eb.up), ep.down = planar_of(&eb.down);
    const kn_glu glu = {.kind = KN_GLU_SITU, .beta = 2.0f, .lbeta = 2.5f};
    float *X = kt_gauss_vec(&r, T * H, 1.0f), *Yb = malloc(T * H * 4), *Yp = malloc(T * H * 4);
    for (int num = 0; num < KN_NUM_COUNT; num++) {
        assert_int_equal(kn_expert_run(&eb, &glu, X, T, Yb, (kn_numerics)num, NULL, NULL), 0);
        assert_int_equal(kn_expert_run(&ep, &glu, X, T, Yp, (kn_numerics)num, NULL, NULL), 0);
        assert_true(kt_same_bits("expert", Yp, Yb, (size_t)(T * H)));
    }
    assert_int_equal(kn_expert_weight_bytes(&ep), kn_expert_weight_bytes(&eb));
    free(X), free(Yb), free(Yp);
    kt_free_mat(&eb.gate), kt_free_mat(&eb.up), kt_free_mat(&eb.down);
    free((void *)ep.gate.data), free((void *)ep.up.data), free((void *)ep.down.data);
}

static void test_type_rules(void **state) {
    (void)state;
    const kn_type_traits *tr = kn_traits(KN_MXFP4_CT);
    assert_non_null(tr);
    assert_true(tr->planar && tr->can_compute);
    assert_false(kn_traits(KN_MXFP4)->planar);
    assert_int_equal(kn_type_from_name("mxfp4_ct"), KN_MXFP4_CT);
    assert_int_equal(kn_row_size(KN_MXFP4_CT, 3584), kn_row_size(KN_MXFP4, 3584));
    uint8_t data[2 * 17] = {0};
    kn_mat W = {KN_MXFP4_CT, 2, 32, 17, data, NULL};
    mw_err err;
    assert_int_equal(kn_mat_check(&W, "w", &err), 0);
    W.row_bytes = 64; /* a strided view is not a planar matrix */
    assert_int_equal(kn_mat_check(&W, "w", &err), -1);
    assert_non_null(strstr(err.msg, "one whole"));
    W.row_bytes = 17;
    assert_int_equal(kn_pack_bytes(&W), 0); /* read as stored */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planes_round_trip),    cmocka_unit_test(test_values_equal_blocks),
        cmocka_unit_test(test_matmul_equals_blocks), cmocka_unit_test(test_expert_equals_blocks),
        cmocka_unit_test(test_type_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
