/* tests/unit/test_md_rope.c — RoPE angles against an independent double-precision evaluation of
 * the rules in FORMATS.md §4 (plain, YaRN with its ramp and magnitude, with and without rounding
 * of the correction range, llama3 bands), and the NEOX / NORM pairings. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/md_rope.h"

static md_rope yarn_gptoss(void) {
    md_rope r = {.layout = MD_ROPE_NEOX,
                 .n_rot = 64,
                 .freq_base = 150000.0f,
                 .scaling = MD_ROPE_SCALING_YARN,
                 .factor = 32.0f,
                 .n_ctx_orig = 4096,
                 .beta_fast = 32.0f,
                 .beta_slow = 1.0f,
                 .attn_factor = 1.0f};
    assert_int_equal(md_rope_init(&r, NULL), 0);
    return r;
}

/* The YaRN angle of pair i at position p, in double. */
static double yarn_ref(double p, int i, int n_rot, double base, double factor, double low,
                       double high) {
    double extrap = p * pow(base, -2.0 * i / n_rot);
    double interp = extrap / factor;
    double y = (i - low) / fmax(0.001, high - low);
    double ramp = 1 - fmin(1, fmax(0, y));
    return interp * (1 - ramp) + extrap * ramp;
}

static void test_yarn_derived_values(void **state) {
    (void)state;
    md_rope r = yarn_gptoss();
    /* hparams.json derived: corr dims [8, 18], magnitude 1 + 0.1 ln 32 */
    assert_float_equal(r.corr_dims[0], 8.0f, 0);
    assert_float_equal(r.corr_dims[1], 18.0f, 0);
    assert_float_equal(r.mscale, 1.3465735902799727, 1e-6);
    assert_float_equal(r.ext_factor, 1.0f, 0);
}

static void test_yarn_angles_match_reference(void **state) {
    (void)state;
    md_rope r = yarn_gptoss();
    float cs[64];
    const int64_t positions[] = {0, 1, 7, 39, 127, 1000, 4095};
    for (size_t pi = 0; pi < sizeof positions / sizeof positions[0]; pi++) {
        md_rope_angles(&r, positions[pi], cs);
        for (int i = 0; i < 32; i++) {
            double a = yarn_ref((double)positions[pi], i, 64, 150000.0, 32.0, 8, 18);
            double m = 1 + 0.1 * log(32.0);
            /* float32 angles drift with position: allow a relative angle error of 1e-6 */
            double tol = 1e-5 + 2e-6 * fabs(a) * m;
            assert_float_equal(cs[2 * i], cos(a) * m, tol);
            assert_float_equal(cs[2 * i + 1], sin(a) * m, tol);
        }
    }
}

/* HF's correction dim, evaluated in double: the pair whose wavelength fits `beta` turns into the
 * original context. */
static double corr_dim_ref(double beta, int n_rot, double ctx, double base) {
    return n_rot * log(ctx / (beta * 2 * M_PI)) / (2 * log(base));
}

/* rope_scaling.truncate = false keeps the range fractional: for base 150000, context 4096 and 64
 * rotated dims that is about [8.09, 17.40] where rounding gives [8, 18]; the ramp then differs
 * in the pairs at both ends and nowhere else. */
static void test_yarn_without_truncation(void **state) {
    (void)state;
    md_rope rounded = yarn_gptoss();
    md_rope r = rounded;
    r.yarn_fractional = true;
    assert_int_equal(md_rope_init(&r, NULL), 0);
    const double lo = corr_dim_ref(32, 64, 4096, 150000), hi = corr_dim_ref(1, 64, 4096, 150000);
    printf("    corr dims: rounded [%g, %g], fractional [%.6f, %.6f] (double %.6f, %.6f)\n",
           rounded.corr_dims[0], rounded.corr_dims[1], r.corr_dims[0], r.corr_dims[1], lo, hi);
    assert_true(lo > 8 && lo < 9 && hi > 17 && hi < 18); /* rounding moves both ends */
    assert_float_equal(r.corr_dims[0], lo, 1e-5);
    assert_float_equal(r.corr_dims[1], hi, 1e-5);
    assert_float_equal(r.mscale, rounded.mscale, 0);

    float cs[64], cr[64];
    const int64_t pos = 1000;
    md_rope_angles(&r, pos, cs);
    md_rope_angles(&rounded, pos, cr);
    int differ = 0;
    for (int i = 0; i < 32; i++) {
        double a = yarn_ref((double)pos, i, 64, 150000.0, 32.0, lo, hi);
        double m = 1 + 0.1 * log(32.0);
        double tol = 1e-5 + 2e-6 * fabs(a) * m;
        assert_float_equal(cs[2 * i], cos(a) * m, tol);
        assert_float_equal(cs[2 * i + 1], sin(a) * m, tol);
        differ += cs[2 * i] != cr[2 * i];
        /* outside the ramp both are pure interpolation or extrapolation */
        if (i <= 8 || i >= 18) assert_memory_equal(&cs[2 * i], &cr[2 * i], 2 * sizeof(float));
    }
    assert_true(differ >= 8);

    /* the clamp to [0, n_rot - 1] applies either way: a tiny original context puts beta_fast's
     * dim below 0 */
    md_rope t = r;
    t.n_ctx_orig = 64;
    t.n_rot = 16;
    assert_int_equal(md_rope_init(&t, NULL), 0);
    assert_float_equal(t.corr_dims[0], 0, 0);
    assert_float_equal(t.corr_dims[1], corr_dim_ref(1, 16, 64, 150000), 1e-5);
}

static void test_plain_rope_has_unit_magnitude(void **state) {
    (void)state;
    md_rope r = {
        .layout = MD_ROPE_NEOX, .n_rot = 64, .freq_base = 1e6f, .factor = 1, .attn_factor = 1};
    assert_int_equal(md_rope_init(&r, NULL), 0);
    float cs[64];
    md_rope_angles(&r, 25, cs);
    for (int i = 0; i < 32; i++) {
        double a = 25.0 * pow(1e6, -2.0 * i / 64);
        assert_float_equal(cs[2 * i], cos(a), 1e-5);
        assert_float_equal(cs[2 * i + 1], sin(a), 1e-5);
    }
}

static void test_linear_scaling_divides_positions(void **state) {
    (void)state;
    md_rope a = {.n_rot = 16,
                 .freq_base = 10000,
                 .scaling = MD_ROPE_SCALING_LINEAR,
                 .factor = 4,
                 .attn_factor = 1};
    md_rope b = {.n_rot = 16, .freq_base = 10000, .factor = 1, .attn_factor = 1};
    assert_int_equal(md_rope_init(&a, NULL), 0);
    assert_int_equal(md_rope_init(&b, NULL), 0);
    float ca[16], cb[16];
    md_rope_angles(&a, 40, ca);
    md_rope_angles(&b, 10, cb);
    for (int i = 0; i < 16; i++) assert_float_equal(ca[i], cb[i], 1e-5);
}

static void test_llama3_bands(void **state) {
    (void)state;
    md_rope r = {.n_rot = 128,
                 .freq_base = 500000,
                 .scaling = MD_ROPE_SCALING_LLAMA3,
                 .factor = 8,
                 .n_ctx_orig = 8192,
                 .low_freq_factor = 1,
                 .high_freq_factor = 4,
                 .attn_factor = 1};
    assert_int_equal(md_rope_init(&r, NULL), 0);
    assert_true(r.has_freq_factors);
    int n_one = 0, n_factor = 0, n_mid = 0;
    for (int i = 0; i < 64; i++) {
        double freq = pow(500000.0, -2.0 * i / 128);
        double wl = 2 * M_PI / freq;
        float f = r.freq_factors[i];
        if (wl < 8192 / 4.0) {
            assert_float_equal(f, 1.0f, 0);
            n_one++;
        } else if (wl > 8192 / 1.0) {
            assert_float_equal(f, 8.0f, 0);
            n_factor++;
        } else {
            double smooth = (8192 / wl - 1) / (4 - 1);
            assert_float_equal(f, 1 / ((1 - smooth) / 8 + smooth), 1e-5);
            n_mid++;
        }
    }
    /* every band is exercised */
    assert_true(n_one > 0 && n_factor > 0 && n_mid > 0);
    float cs[128];
    md_rope_angles(&r, 100, cs);
    double a = 100.0 * pow(500000.0, -2.0 * 63 / 128) / r.freq_factors[63];
    assert_float_equal(cs[126], cos(a), 1e-5);
}

static void test_neox_and_norm_pairings(void **state) {
    (void)state;
    md_rope r = {
        .layout = MD_ROPE_NEOX, .n_rot = 4, .freq_base = 10000, .factor = 1, .attn_factor = 1};
    assert_int_equal(md_rope_init(&r, NULL), 0);
    const float cs[4] = {0.0f, 1.0f, 1.0f, 0.0f}; /* pair 0: 90 degrees, pair 1: identity */
    float x[6] = {1, 2, 3, 4, 5, 6};              /* head of 6, the last 2 pass through */
    md_rope_apply(&r, cs, x);
    /* NEOX: pair 0 = (x0, x2), pair 1 = (x1, x3) */
    const float neox[6] = {-3, 2, 1, 4, 5, 6};
    assert_memory_equal(x, neox, sizeof x);
    r.layout = MD_ROPE_NORM;
    float y[6] = {1, 2, 3, 4, 5, 6};
    md_rope_apply(&r, cs, y);
    /* NORM: pair 0 = (y0, y1), pair 1 = (y2, y3) */
    const float norm[6] = {-2, 1, 3, 4, 5, 6};
    assert_memory_equal(y, norm, sizeof y);
}

static void test_bad_parameters_are_errors(void **state) {
    (void)state;
    mw_err e;
    md_rope r = {.n_rot = 3, .freq_base = 10000, .factor = 1, .attn_factor = 1};
    assert_int_equal(md_rope_init(&r, &e), -1);
    assert_non_null(strstr(e.msg, "even"));
    md_rope y = {.n_rot = 64,
                 .freq_base = 10000,
                 .scaling = MD_ROPE_SCALING_YARN,
                 .factor = 4,
                 .attn_factor = 1};
    assert_int_equal(md_rope_init(&y, &e), -1); /* no original context */
    md_rope z = {.n_rot = 64, .freq_base = -1, .factor = 1, .attn_factor = 1};
    assert_int_equal(md_rope_init(&z, &e), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yarn_derived_values),
        cmocka_unit_test(test_yarn_angles_match_reference),
        cmocka_unit_test(test_yarn_without_truncation),
        cmocka_unit_test(test_plain_rope_has_unit_magnitude),
        cmocka_unit_test(test_linear_scaling_divides_positions),
        cmocka_unit_test(test_llama3_bands),
        cmocka_unit_test(test_neox_and_norm_pairings),
        cmocka_unit_test(test_bad_parameters_are_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
