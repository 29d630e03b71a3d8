/* tests/unit/test_md_ops.c — RMSNorm and softmax (with and without a sink) against double
 * references, including a row whose sink dominates; attention's inner loops (md_vec) against md_dot
 * and plain sums; and every instruction set's md_vec against the scalar one bit for bit: dots and
 * sums (widths that are and are not multiples of 8, 16 and 64, head groups odd and even, key
 * counts not multiples of 8), softmax, RMSNorm and adds at lengths 1 to 40 and long odd ones,
 * scores spanning exp's whole range down to subnormal and zero results. */
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

/* dots of q (g heads) with n rows of k, then the rows weighted into g sums, each in two calls (as
 * attention feeds them blocks of keys), with the active table. */
static void run_vec(const float *q, const float *k, int64_t d, int g, int64_t n, float *scores,
                    float *sums) {
    const md_vec *v = md_vec_active();
    const float **rows = malloc((size_t)n * sizeof *rows);
    for (int64_t r = 0; r < n; r++) rows[r] = k + r * d;
    const int64_t h = n / 3;
    v->dots(q, g, rows, h, d, 0.125f, scores, n);
    v->dots(q, g, rows + h, n - h, d, 0.125f, scores + h, n);
    for (int64_t i = 0; i < g * d; i++) sums[i] = (float)i * 0.01f;
    v->wsums(sums, g, rows, n / 2, d, scores, n);
    v->wsums(sums, g, rows + n / 2, n - n / 2, d, scores + n / 2, n);
    free(rows);
}

static void vec_isas_agree(int64_t N) {
    const kn_isa best = kn_isa_active();
    static const int64_t ds[] = {1, 7, 8, 13, 16, 24, 64, 72, 130};
    static const int gs[] = {1, 2, 3, 4, 8, 9};
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
            /* the definition: md_dot for scores, fused multiply-adds in row order for sums */
            for (int j = 0; j < g; j++)
                for (int64_t r = 0; r < N; r++) {
                    assert_true(s0[j * N + r] == md_dot(q + j * d, k + r * d, d) * 0.125f);
                    for (int64_t i = 0; i < d; i++) {
                        float y = (float)(j * d + i) * 0.01f;
                        for (int64_t rr = 0; rr < N; rr++)
                            y = fmaf(s0[j * N + rr], k[rr * d + i], y);
                        assert_true(y == y0[j * d + i]);
                    }
                }
            for (int isa = KN_ISA_SCALAR + 1; isa < KN_ISA_COUNT; isa++) {
                if (kn_isa_force((kn_isa)isa)) continue;
                run_vec(q, k, d, g, N, s1, y1);
                if (memcmp(s0, s1, (size_t)(g * N) * 4) || memcmp(y0, y1, (size_t)(g * d) * 4))
                    fail_msg("%s differs from scalar at d %lld, g %d, %lld keys",
                             kn_isa_name((kn_isa)isa), (long long)d, g, (long long)N);
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

static void test_vec_isas_agree(void **state) {
    (void)state;
    static const int64_t ns[] = {1, 5, 8, 11, 16, 37};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) vec_isas_agree(ns[i]);
}

/* Scores whose differences to the max span kn_expf's range (-inf, subnormal and zero results
 * included), a sink or none; RMSNorm rows with and without a weight, in place. */
static void fill_scores(float *x, int64_t n, int variant) {
    for (int64_t i = 0; i < n; i++) {
        const float t = (float)fmod((double)i * 0.6180339887498949 + 0.1 * variant, 1.0);
        x[i] = variant % 3 == 0 ? 5.0f * sinf(0.9f * (float)i) : 2.0f - 110.0f * t;
    }
    if (variant % 4 == 1 && n > 3) x[n / 2] = -INFINITY;
}

static void norms_isas_agree(int64_t n) {
    const kn_isa best = kn_isa_active();
    float *x0 = malloc((size_t)n * 4), *x1 = malloc((size_t)n * 4), *w = malloc((size_t)n * 4);
    float *y0 = malloc((size_t)n * 4), *y1 = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) w[i] = 1.0f + 0.37f * cosf((float)i);
    for (int variant = 0; variant < 6; variant++) {
        const float sink = variant % 2 ? 1.5f : -30.0f;
        const float *sp = variant < 2 ? NULL : &sink;
        fill_scores(x0, n, variant);
        assert_int_equal(kn_isa_force(KN_ISA_SCALAR), 0);
        md_softmax(x0, n, sp);
        md_rmsnorm(y0, x0, variant % 2 ? w : NULL, n, 1e-5f);
        md_add(y0, w, n);
        for (int isa = KN_ISA_SCALAR + 1; isa < KN_ISA_COUNT; isa++) {
            if (kn_isa_force((kn_isa)isa)) continue;
            fill_scores(x1, n, variant);
            md_softmax(x1, n, sp);
            if (memcmp(x0, x1, (size_t)n * 4))
                fail_msg("%s softmax differs from scalar at n %lld, variant %d",
                         kn_isa_name((kn_isa)isa), (long long)n, variant);
            memcpy(y1, x1, (size_t)n * 4);
            md_rmsnorm(y1, y1, variant % 2 ? w : NULL, n, 1e-5f); /* in place */
            md_add(y1, w, n);
            if (memcmp(y0, y1, (size_t)n * 4))
                fail_msg("%s rmsnorm or add differs from scalar at n %lld, variant %d",
                         kn_isa_name((kn_isa)isa), (long long)n, variant);
        }
    }
    kn_isa_force(best);
    free(x0);
    free(x1);
    free(w);
    free(y0);
    free(y1);
}

static void test_softmax_rmsnorm_isas_agree(void **state) {
    (void)state;
    for (int64_t n = 1; n <= 40; n++) norms_isas_agree(n);
    static const int64_t ns[] = {127, 129, 151, 2880, 2883, 4097, 65537};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) norms_isas_agree(ns[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_softmax_and_sink),
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_vec_isas_agree),
        cmocka_unit_test(test_softmax_rmsnorm_isas_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
