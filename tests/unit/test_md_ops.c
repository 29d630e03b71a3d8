/* tests/unit/test_md_ops.c — RMSNorm and softmax (with and without a sink) against double
 * references, including a row whose sink dominates. */
#include "tests/support/mw_test.h"

#include <math.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_softmax_and_sink),
        cmocka_unit_test(test_dot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
