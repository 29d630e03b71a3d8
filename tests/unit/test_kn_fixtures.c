/* tests/unit/test_kn_fixtures.c — parity with llama.cpp's ggml on a kernel fixture directory
 * (tests/fixtures/llamacpp/kernels, or $MW_KERNEL_FIXTURES: `make check-kernels FIXTURES=DIR`),
 * on every ISA this machine runs:
 *  - dequantization of <type>_blocks.bin equals <type>_dequant.bin bit for bit;
 *  - activation quantization equals ggml's (<case>_x_<act>.bin) byte for byte;
 *  - float-mode matvec within 1e-5 of <case>_y_ref, Q8-mode within 1e-6 of <case>_y_q8ref,
 *    both relative to max |y| (near-zero entries are judged against the vector's scale);
 *  - Q8-mode matvec from the packed copy, where one replaces the rows, equals the stored rows'. */
#include "tests/unit/kn_test_util.h"

#include <jansson.h>

static char dir[4096];

static void *read_fixture(const char *name, size_t *len) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    void *p = mwt_read_file(path, len);
    if (!p) fprintf(stderr, "fixture %s is missing\n", path);
    return p;
}

static void test_dequant_bit_exact(void **state) {
    (void)state;
    int checked = 0;
    for (size_t i = 0; i < KT_NTYPES; i++) {
        const kn_type t = kt_compute_types[i];
        const kn_type_traits *tr = kn_traits(t);
        char name[128], path[4400];
        snprintf(name, sizeof name, "%s_blocks.bin", tr->name);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        size_t nb_bytes, nf_bytes;
        uint8_t *blocks = mwt_read_file(path, &nb_bytes);
        if (!blocks) continue;
        snprintf(name, sizeof name, "%s_dequant.bin", tr->name);
        float *want = read_fixture(name, &nf_bytes);
        assert_non_null(want);
        const size_t nblk = nb_bytes / (size_t)tr->type_size;
        assert_int_equal(nb_bytes % (size_t)tr->type_size, 0);
        assert_int_equal(nf_bytes, nblk * (size_t)tr->blck_size * sizeof(float));
        float *got = malloc(nf_bytes);
        tr->to_float(blocks, got, (int64_t)(nblk * (size_t)tr->blck_size));
        assert_true(kt_same_bits(tr->name, got, want, nf_bytes / sizeof(float)));
        /* the same through kn_mat_row, one block per row */
        kn_mat m = {t, (int64_t)nblk, tr->blck_size, (size_t)tr->type_size, blocks, NULL};
        for (size_t r = 0; r < nblk; r++) {
            kn_mat_row(&m, (int64_t)r, got);
            assert_true(kt_same_bits(tr->name, got, want + r * (size_t)tr->blck_size,
                                     (size_t)tr->blck_size));
        }
        printf("  %s: %zu blocks bit-exact\n", tr->name, nblk);
        free(got);
        free(want);
        free(blocks);
        checked++;
    }
    assert_true(checked > 0);
}

typedef struct mv_case {
    const char *name;
    kn_type type, act;
    int64_t rows, cols;
} mv_case;

static int load_cases(mv_case *cases, int max, json_t **root) {
    char path[4400];
    snprintf(path, sizeof path, "%s/kernels.json", dir);
    json_error_t jerr;
    *root = json_load_file(path, 0, &jerr);
    if (!*root) {
        fprintf(stderr, "%s: %s\n", path, jerr.text);
        return -1;
    }
    json_t *mv = json_object_get(*root, "matvec");
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(mv, i, c) {
        if (n == max) break;
        mv_case *m = &cases[n++];
        m->name = json_string_value(json_object_get(c, "name"));
        m->type = (kn_type)kn_type_from_name(json_string_value(json_object_get(c, "type")));
        m->act = (kn_type)kn_type_from_name(json_string_value(json_object_get(c, "act_type")));
        m->rows = json_integer_value(json_object_get(c, "rows_N"));
        m->cols = json_integer_value(json_object_get(c, "cols_K"));
        if (!m->name || (int)m->type < 0 || (int)m->act < 0 || m->rows <= 0 || m->cols <= 0) {
            fprintf(stderr, "kernels.json: malformed matvec entry %zu\n", i);
            return -1;
        }
    }
    return n;
}

static void test_matvec_parity(void **state) {
    (void)state;
    mv_case cases[64];
    json_t *root;
    const int n = load_cases(cases, 64, &root);
    assert_true(n > 0);
    kt_variant isas[KT_MAX_VARIANTS];
    const int nisa = kt_variants(isas);
    const kn_isa prev = kn_isa_active();
    for (int c = 0; c < n; c++) {
        const mv_case *m = &cases[c];
        char fn[512];
        size_t wlen, xlen, xqlen, rlen, qlen, glen;
        snprintf(fn, sizeof fn, "%s_W.bin", m->name);
        uint8_t *W = read_fixture(fn, &wlen);
        snprintf(fn, sizeof fn, "%s_x.bin", m->name);
        float *x = read_fixture(fn, &xlen);
        snprintf(fn, sizeof fn, "%s_x_%s.bin", m->name, kn_type_name(m->act));
        uint8_t *xq = read_fixture(fn, &xqlen);
        snprintf(fn, sizeof fn, "%s_y_ref.bin", m->name);
        float *yref = read_fixture(fn, &rlen);
        snprintf(fn, sizeof fn, "%s_y_q8ref.bin", m->name);
        float *yq8 = read_fixture(fn, &qlen);
        snprintf(fn, sizeof fn, "%s_y_ggml.bin", m->name);
        float *yggml = read_fixture(fn, &glen);
        assert_true(W && x && xq && yref && yq8 && yggml);
        const size_t rs = kn_row_size(m->type, m->cols);
        assert_int_equal(wlen, rs * (size_t)m->rows);
        assert_int_equal(xlen, (size_t)m->cols * sizeof(float));
        assert_int_equal(rlen, (size_t)m->rows * sizeof(float));
        assert_int_equal(qlen, rlen);

        /* the weight type's activation format, rounded as ggml's AVX2 build rounds it */
        assert_int_equal(kn_traits(m->type)->vec_dot_type, m->act);
        assert_int_equal(xqlen, kn_row_size(m->act, m->cols));
        uint8_t *myq = malloc(xqlen);
        kn_traits(m->act)->from_float(x, myq, m->cols);
        assert_memory_equal(myq, xq, xqlen);

        kn_mat Wm = {m->type, m->rows, m->cols, rs, W, NULL};
        float *y = malloc(rlen);
        for (int i = 0; i < nisa; i++) {
            kt_use(&isas[i]);
            kn_matmul(&Wm, x, 1, y, KN_NUM_F32, NULL);
            const double ef = kt_rel_to_max(y, yref, (size_t)m->rows);
            kn_matmul(&Wm, x, 1, y, KN_NUM_Q8, NULL);
            const double eq = kt_rel_to_max(y, yq8, (size_t)m->rows);
            const double eg = kt_rel_to_max(y, yggml, (size_t)m->rows);
            printf("  %s [%s]: f32 vs y_ref %.2e, q8 vs y_q8ref %.2e, q8 vs y_ggml %.2e\n", m->name,
                   isas[i].name, ef, eq, eg);
            assert_true(ef <= 1e-5);
            assert_true(eq <= 1e-6);
            assert_true(eg <= 1e-6);
            /* read from the packed copy where it replaces the rows (a pinned model's MXFP4
             * experts): the bits of the stored rows */
            if (kn_pack_replaces(&Wm)) {
                void *pb = NULL;
                assert_int_equal(posix_memalign(&pb, 64, kn_pack_bytes(&Wm)), 0);
                kn_mat P = Wm;
                kn_pack(&P, pb);
                float *yp = malloc(rlen);
                kn_matmul(&P, x, 1, yp, KN_NUM_Q8, NULL);
                assert_memory_equal(yp, y, rlen);
                free(yp);
                free(pb);
            }
        }
        free(y);
        free(myq);
        free(W);
        free(x);
        free(xq);
        free(yref);
        free(yq8);
        free(yggml);
    }
    kn_isa_force(prev);
    json_decref(root);
}

int main(void) {
    const char *env = getenv("MW_KERNEL_FIXTURES");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : mwt_fixture("llamacpp/kernels"));
    printf("kernel fixtures: %s\n", dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dequant_bit_exact),
        cmocka_unit_test(test_matvec_parity),
    };
    return cmocka_run_group_tests_name("kernels_fixtures", tests, NULL, NULL);
}
