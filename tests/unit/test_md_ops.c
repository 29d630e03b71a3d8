/* tests/unit/test_md_ops.c — RMSNorm and softmax (with and without a sink) against double
 * references, including a row whose sink dominates; attention's inner loops (md_vec) against
 * md_dot and plain sums, and every instruction set's version against the scalar one bit for bit
 * (widths that are and are not multiples of 8 and 64, head groups not multiples of 4). */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "model/md_ops.h"

static void test_rmsnorm(void **state) {
    (void)state;
    float x[37], w[37], y[37];
    double ss = 0;
    for (int i = 0; i < 37; i++) {
        x[i] = (float)(i - 18) * 0.37f;
        w[i] = 1.0f + 0.01f * (float)i;
        ss += (double)x[i] * x[i];
    }
    md_rmsnorm(y, x, w, 37, 1e-5f);
    double scale = 1 / sqrt(ss / 37 + 1e-5);
    for (int i = 0; i < 37; i++) assert_float_equal(y[i], x[i] * scale * w[i], 1e-6);
    md_rmsnorm(x, x, NULL, 37, 1e-5f); /* in place, no weight */
    for (int i = 0; i < 37; i++) assert_float_equal(x[i], (float)(i - 18) * 0.37 * scale, 1e-6);
}

static void test_softmax_and_sink(void **state) {
    (void)state;
    float x[4] = {1, 2, 3, 4};
    md_softmax(x, 4, NULL);
    double z = exp(1) + exp(2) + exp(3) + exp(4);
    for (int i = 0; i < 4; i++) assert_float_equal(x[i], exp(i + 1) / z, 1e-7);
    float y[4] = {1, 2, 3, 4};
    const float sink = 6.0f; /* larger than every score: the max comes from the sink */
    md_softmax(y, 4, &sink);
    double zs = z + exp(6);
    double total = 0;
    for (int i = 0; i < 4; i++) {
        assert_float_equal(y[i], exp(i + 1) / zs, 1e-7);
        total += y[i];
    }
    assert_float_equal(total, z / zs, 1e-6); /* the sink takes mass, returns no value */
}

static void test_dot(void **state) {
    (void)state;
    float a[67], b[67];
    double ref = 0;
    for (int i = 0; i < 67; i++) {
        a[i] = cosf((float)i);
        b[i] = sinf((float)i * 0.5f);
        ref += (double)a[i] * b[i];
    }
    assert_float_equal(md_dot(a, b, 67), ref, 1e-5);
    assert_float_equal(md_dot(a, b, 3), (double)a[0] * b[0] + a[1] * b[1] + a[2] * b[2], 1e-6);
}

/* dots of q (g heads) with n rows of k, then the rows weighted into g sums (in two blocks, as
 * attention feeds them), with the active table. */
static void run_vec(const float *q, const float *k, int64_t d, int g, int64_t n, float *scores,
                    float *sums) {
    const md_vec *v = md_vec_active();
    const float **rows = malloc((size_t)n * sizeof *rows);
    for (int64_t r = 0; r < n; r++) {
        v->dots(q, g, k + r * d, d, 0.125f, scores + r, n);
        rows[r] = k + r * d;
    }
    for (int64_t i = 0; i < g * d; i++) sums[i] = (float)i * 0.01f;
    v->wsums(sums, g, rows, n / 2, d, scores, n);
    v->wsums(sums, g, rows + n / 2, n - n / 2, d, scores + n / 2, n);
    free(rows);
}

static void test_vec_isas_agree(void **state) {
    (void)state;
    const kn_isa best = kn_isa_active();
    static const int64_t ds[] = {1, 7, 8, 13, 64, 72, 130};
    static const int gs[] = {1, 3, 4, 8, 9};
    enum { N = 11 };
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
        for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++) {
            const int64_t d = ds[di];
            const int g = gs[gi];
            float *q = malloc((size_t)(g * d) * 4), *k = malloc((size_t)(N * d) * 4);
            for (int64_t i = 0; i < g * d; i++)
                q[i] = sinf(0.7f * (float)i) * (i % 13 == 0 ? 1e3f : 1);
            for (int64_t i = 0; i < N * d; i++)
                k[i] = cosf(0.3f * (float)i) - (i % 29 == 0 ? 0 : 0.5f);
            float *s0 = malloc((size_t)(g * N) * 4), *y0 = malloc((size_t)(g * d) * 4);
            float *s1 = malloc((size_t)(g * N) * 4), *y1 = malloc((size_t)(g * d) * 4);
            assert_int_equal(kn_isa_force(KN_ISA_SCALAR), 0);
            run_vec(q, k, d, g, N, s0, y0);
            /* the definition: md_dot for scores, plain multiply-adds in row order for sums */
            for (int j = 0; j < g; j++)
                for (int64_t r = 0; r < N; r++) {
                    assert_true(s0[j * N + r] == md_dot(q + j * d, k + r * d, d) * 0.125f);
                    for (int64_t i = 0; i < d; i++) {
                        float y = (float)(j * d + i) * 0.01f;
                        for (int64_t rr = 0; rr < N; rr++) y = y + s0[j * N + rr] * k[rr * d + i];
                        assert_true(y == y0[j * d + i]);
                    }
                }
            for (int isa = KN_ISA_SCALAR + 1; isa < KN_ISA_COUNT; isa++) {
                if (kn_isa_force((kn_isa)isa)) continue;
                run_vec(q, k, d, g, N, s1, y1);
                if (memcmp(s0, s1, (size_t)(g * N) * 4) || memcmp(y0, y1, (size_t)(g * d) * 4))
                    fail_msg("%s differs from scalar at d %lld, g %d", kn_isa_name((kn_isa)isa),
                             (long long)d, g);
            }
            free(q);
            free(k);
            free(s0);
            free(y0);
            free(s1);
            free(y1);
        }
    kn_isa_force(best);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_softmax_and_sink),
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_vec_isas_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
