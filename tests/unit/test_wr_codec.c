/* tests/unit/test_wr_codec.c — row codecs (f32, f16, bf16) on every ISA path, the `--wire` names,
 * the non-finite scan and the LZ4 10 % rule. */
#include "tests/support/mw_test.h"

#include <lz4.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "wire/wr_codec.h"

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static float float_of(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Values that exercise every rounding case: random bit patterns (all exponents, subnormals, NaN,
 * Inf), ties, and values near each format's range limits. */
static float *mixed_values(size_t n) {
    static const float specials[] = {0.0f,          -0.0f,         1.0f,          -1.0f,
                                     65504.0f,      65519.99f,     65520.0f,      -65520.0f,
                                     5.9604645e-8f, 2.9802322e-8f, 4.4703484e-8f, 6.103515625e-5f,
                                     1e-40f,        -1e-45f,       3.4028235e38f, 1.0009765625f};
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        if (i % 5 == 0)
            x[i] = specials[(i / 5) % (sizeof specials / sizeof specials[0])];
        else if (i % 5 == 1)
            x[i] = float_of(rng()); /* anything, NaN and Inf included */
        else                        /* halfway cases of both 16-bit formats */
            x[i] = float_of((rng() & 0xffff0000u) | (i % 2 ? 0x8000u : 0x1000u));
    }
    return x;
}

/* The scalar kernels' conversion is the reference for every path. */
static uint16_t ref_enc(wr_dtype d, float f) {
    return d == WR_F16 ? kn_f32_to_fp16(f) : kn_f32_to_bf16(f);
}
static float ref_dec(wr_dtype d, uint16_t h) {
    return d == WR_F16 ? kn_fp16_to_f32(h) : kn_bf16_to_f32(h);
}

static bool is_nan16(wr_dtype d, uint16_t h) {
    return d == WR_F16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff)
                       : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

static void check_half_paths(wr_dtype d) {
    static const size_t widths[] = {1, 7, 8, 9, 15, 16, 17, 31, 255, 257, 2880, 2881, 4099};
    kn_isa best = kn_isa_active();
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        size_t n = widths[w];
        float *x = mixed_values(n);
        uint16_t *h = malloc(n * 2);
        float *y = malloc(n * 4);
        for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
            if (kn_isa_force((kn_isa)isa) != 0) continue;
            wr_encode(d, x, n, h);
            wr_decode(d, h, n, y);
            for (size_t i = 0; i < n; i++) {
                uint16_t r = ref_enc(d, x[i]);
                if (is_nan16(d, r)) { /* NaN payloads may differ between ISAs; NaN must stay NaN */
                    assert_true(is_nan16(d, h[i]));
                    assert_true(isnan(y[i]));
                    continue;
                }
                if (h[i] != r)
                    fail_msg("%s isa %s n %zu: element %zu (%a) encodes to %04x, reference %04x",
                             wr_dtype_name(d), kn_isa_name((kn_isa)isa), n, i, x[i], h[i], r);
                assert_int_equal(bits_of(y[i]), bits_of(ref_dec(d, r)));
            }
        }
        kn_isa_force(best);
        free(x);
        free(h);
        free(y);
    }
}

static void test_f16_paths_match_reference(void **state) {
    (void)state;
    check_half_paths(WR_F16);
}

static void test_bf16_paths_match_reference(void **state) {
    (void)state;
    check_half_paths(WR_BF16);
}

/* Every 16-bit pattern decodes and re-encodes to itself (NaNs stay NaN), on every path. */
static void check_all_patterns(wr_dtype d) {
    enum { N = 65536 };
    uint16_t *h = malloc(N * 2), *h2 = malloc(N * 2);
    float *y = malloc(N * 4);
    for (uint32_t i = 0; i < N; i++) h[i] = (uint16_t)i;
    kn_isa best = kn_isa_active();
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
        if (kn_isa_force((kn_isa)isa) != 0) continue;
        wr_decode(d, h, N, y);
        wr_encode(d, y, N, h2);
        for (uint32_t i = 0; i < N; i++) {
            if (is_nan16(d, h[i])) {
                assert_true(isnan(y[i]));
                assert_true(is_nan16(d, h2[i]));
            } else if (h2[i] != h[i]) {
                fail_msg("%s isa %s: pattern %04x → %a → %04x", wr_dtype_name(d),
                         kn_isa_name((kn_isa)isa), i, y[i], h2[i]);
            }
        }
    }
    kn_isa_force(best);
    free(h);
    free(h2);
    free(y);
}

static void test_all_f16_patterns_round_trip(void **state) {
    (void)state;
    check_all_patterns(WR_F16);
}

static void test_all_bf16_patterns_round_trip(void **state) {
    (void)state;
    check_all_patterns(WR_BF16);
}

/* Known answers, independent of any implementation: ties go to even, range ends, subnormals. */
static void test_known_roundings(void **state) {
    (void)state;
    static const struct {
        wr_dtype d;
        float in;
        uint16_t out;
    } cases[] = {
        {WR_F16, 1.0f, 0x3c00},
        {WR_F16, 1.00048828125f, 0x3c00}, /* 1 + 2^-11: tie → even (1) */
        {WR_F16, 1.00146484375f, 0x3c02}, /* 1 + 3·2^-11: tie → even (1 + 2^-9) */
        {WR_F16, 1.0005f, 0x3c01},        /* just above the tie */
        {WR_F16, -0.0f, 0x8000},
        {WR_F16, 65504.0f, 0x7bff},
        {WR_F16, 65519.0f, 0x7bff},
        {WR_F16, 65520.0f, 0x7c00},         /* tie between max and 2^16 → Inf */
        {WR_F16, 5.9604645e-8f, 0x0001},    /* 2^-24, smallest subnormal */
        {WR_F16, 2.98023224e-8f, 0x0000},   /* 2^-25: tie → even (0) */
        {WR_F16, 4.47034836e-8f, 0x0001},   /* 1.5 · 2^-25 */
        {WR_F16, 8.94069672e-8f, 0x0002},   /* 1.5 · 2^-24: tie → even (2 · 2^-24) */
        {WR_F16, -6.103515625e-5f, 0x8400}, /* smallest normal */
        {WR_F16, INFINITY, 0x7c00},
        {WR_BF16, 1.0f, 0x3f80},
        {WR_BF16, 1.00390625f, 0x3f80}, /* 1 + 2^-8: tie → even */
        {WR_BF16, 1.01171875f, 0x3f82}, /* 1 + 3·2^-8: tie → even */
        {WR_BF16, -0.0f, 0x8000},
        {WR_BF16, 3.4028235e38f, 0x7f80},   /* f32 max rounds up to Inf */
        {WR_BF16, 9.18354962e-41f, 0x0001}, /* a subnormal bf16 */
        {WR_BF16, -INFINITY, 0xff80},
    };
    kn_isa best = kn_isa_active();
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
        if (kn_isa_force((kn_isa)isa) != 0) continue;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            /* Put the value in a 24-element row so SIMD bodies and scalar tails both see it. */
            float row[24];
            uint16_t out[24];
            for (int pos = 0; pos < 24; pos++) {
                for (int j = 0; j < 24; j++) row[j] = 0.5f;
                row[pos] = cases[i].in;
                wr_encode(cases[i].d, row, 24, out);
                if (out[pos] != cases[i].out)
                    fail_msg("%s isa %s: %a at %d encodes to %04x, expected %04x",
                             wr_dtype_name(cases[i].d), kn_isa_name((kn_isa)isa), cases[i].in, pos,
                             out[pos], cases[i].out);
            }
        }
    }
    kn_isa_force(best);
}

static void test_f32_is_bit_exact(void **state) {
    (void)state;
    size_t n = 2881;
    float *x = mixed_values(n);
    uint8_t *b = malloc(n * 4 + 1);
    float *y = malloc(n * 4);
    wr_encode(WR_F32, x, n, b + 1); /* unaligned destination */
    wr_decode(WR_F32, b + 1, n, y);
    assert_memory_equal(x, y, n * 4);
    free(x);
    free(b);
    free(y);
}

static void test_codec_names(void **state) {
    (void)state;
    static const struct {
        const char *s;
        wr_dtype d;
        bool lz4;
    } ok[] = {{"f32", WR_F32, false},    {"f16", WR_F16, false},    {"bf16", WR_BF16, false},
              {"f32+lz4", WR_F32, true}, {"f16+lz4", WR_F16, true}, {"bf16+lz4", WR_BF16, true}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        wr_codec c = {0};
        mw_err e;
        assert_int_equal(wr_codec_parse(ok[i].s, &c, &e), 0);
        assert_int_equal(c.dtype, ok[i].d);
        assert_int_equal(c.lz4, ok[i].lz4);
        char buf[16];
        assert_string_equal(wr_codec_format(c, buf, sizeof buf), ok[i].s);
    }
    static const char *bad[] = {"",     "f8",           "F16", "f16+", "f16+zstd",
                                "+lz4", "bf16+lz4+lz4", "f1",  "f320"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wr_codec c;
        mw_err e = {{0}};
        assert_int_equal(wr_codec_parse(bad[i], &c, &e), -1);
        assert_non_null(strstr(e.msg, "--wire"));
    }
    assert_int_equal(wr_codec_parse(NULL, &(wr_codec){0}, NULL), -1);
    assert_int_equal(wr_dtype_size(WR_F16), 2);
    assert_int_equal(wr_dtype_size((wr_dtype)0), 0);
    assert_false(wr_dtype_valid(4));
}

static void test_first_nonfinite(void **state) {
    (void)state;
    size_t n = 300;
    float *x = calloc(n, sizeof *x);
    assert_int_equal(wr_first_nonfinite(x, n), n);
    assert_int_equal(wr_first_nonfinite(x, 0), 0);
    x[299] = -INFINITY;
    assert_int_equal(wr_first_nonfinite(x, n), 299);
    x[130] = NAN;
    assert_int_equal(wr_first_nonfinite(x, n), 130);
    x[3] = 3.4028235e38f; /* finite */
    x[4] = 1e-45f;
    assert_int_equal(wr_first_nonfinite(x, n), 130);
    free(x);
    /* every ISA's scan (the vector ones work in blocks of 8 and 32): each position of each
     * length, for every kind of non-finite value, with the largest finite values around it */
    static const uint32_t bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffffffffu, 0x7f800001u};
    const kn_isa best = kn_isa_active();
    float y[100];
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
        if (kn_isa_force((kn_isa)isa) != 0) continue;
        for (size_t len = 0; len <= 100; len++) {
            for (size_t i = 0; i < len; i++) y[i] = i % 2 ? 3.4028235e38f : -3.4028235e38f;
            if (wr_first_nonfinite(y, len) != len)
                fail_msg("isa %s: %zu finite values scanned as bad", kn_isa_name((kn_isa)isa), len);
            for (size_t at = 0; at < len; at++)
                for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
                    memcpy(&y[at], &bad[b], 4);
                    if (at + 1 < len) memcpy(&y[len - 1], &bad[(b + 1) % 5], 4); /* a later one */
                    size_t got = wr_first_nonfinite(y, len);
                    if (got != at)
                        fail_msg("isa %s: %08x at %zu of %zu found at %zu",
                                 kn_isa_name((kn_isa)isa), bad[b], at, len, got);
                    y[at] = 1.0f;
                    y[len - 1] = 1.0f;
                }
        }
    }
    kn_isa_force(best);
}

/* wr_decode_checked: wr_decode's floats, and the index wr_first_nonfinite finds in them, for every
 * dtype and ISA, with a NaN or an infinity at each position of each length (the vector paths
 * decode 8 at a time), and none. */
static void test_decode_checked(void **state) {
    (void)state;
    const kn_isa best = kn_isa_active();
    float x[48], want[48], got[48];
    uint8_t enc[48 * 4];
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
        if (kn_isa_force((kn_isa)isa) != 0) continue;
        for (int d = WR_F32; d < WR_DTYPE_END; d++)
            for (size_t len = 0; len <= 48; len++)
                for (size_t at = 0; at <= len; at++) /* at == len: all finite */
                    for (int kind = 0; kind < 3; kind++) {
                        for (size_t i = 0; i < len; i++) x[i] = (float)i * 0.7f - 11.0f;
                        if (at < len) x[at] = kind == 0 ? NAN : kind == 1 ? INFINITY : -INFINITY;
                        wr_encode((wr_dtype)d, x, len, enc);
                        wr_decode((wr_dtype)d, enc, len, want);
                        const size_t w = wr_first_nonfinite(want, len);
                        const size_t g = wr_decode_checked((wr_dtype)d, enc, len, got);
                        if (g != w || g != at || memcmp(got, want, len * sizeof(float)))
                            fail_msg("%s isa %s len %zu: bad value at %zu found at %zu (want %zu)",
                                     wr_dtype_name((wr_dtype)d), kn_isa_name((kn_isa)isa), len, at,
                                     g, w);
                    }
    }
    kn_isa_force(best);
}

/* Random bytes with a run of zeros of `zeros` bytes at the front. */
static uint8_t *partly_compressible(size_t n, size_t zeros) {
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = i < zeros ? 0 : (uint8_t)rng();
    return b;
}

static void test_lz4_ten_percent_rule(void **state) {
    (void)state;
    assert_int_equal(wr_lz4_limit(100), 90);
    assert_int_equal(wr_lz4_limit(101), 90); /* 101 - ceil(10.1) */
    assert_int_equal(wr_lz4_limit(10), 9);
    size_t n = 10000;
    uint8_t *dst = malloc(LZ4_compressBound((int)n));
    /* 5 % compressible: LZ4 makes it smaller, but not by 10 % → sent raw. */
    uint8_t *five = partly_compressible(n, 500);
    int plain =
        LZ4_compress_default((const char *)five, (char *)dst, (int)n, LZ4_compressBound((int)n));
    assert_true(plain > 0 && (size_t)plain < n);
    assert_int_equal(wr_lz4_compress(five, n, dst, n), 0);
    /* 20 % compressible → compressed, and it decompresses back. */
    uint8_t *twenty = partly_compressible(n, 2000);
    size_t c = wr_lz4_compress(twenty, n, dst, n);
    assert_true(c > 0 && c <= wr_lz4_limit(n));
    uint8_t *back = malloc(n);
    mw_err e;
    assert_int_equal(wr_lz4_decompress(dst, c, back, n, &e), 0);
    assert_memory_equal(back, twenty, n);
    /* Wrong declared length, corrupt data, empty input → errors, never overruns. */
    assert_int_equal(wr_lz4_decompress(dst, c, back, n - 1, &e), -1);
    assert_int_equal(wr_lz4_decompress(dst, c - 1, back, n, &e), -1);
    assert_int_equal(wr_lz4_decompress(dst, 0, back, n, &e), -1);
    memset(dst, 0xff, 64);
    assert_int_equal(wr_lz4_decompress(dst, c, back, n, &e), -1);
    /* Tiny and empty frames are never compressed. */
    assert_int_equal(wr_lz4_compress(twenty, 0, dst, n), 0);
    assert_int_equal(wr_lz4_compress("\0\0\0\0", 4, dst, n), 0);
    free(dst);
    free(five);
    free(twenty);
    free(back);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_paths_match_reference),
        cmocka_unit_test(test_bf16_paths_match_reference),
        cmocka_unit_test(test_all_f16_patterns_round_trip),
        cmocka_unit_test(test_all_bf16_patterns_round_trip),
        cmocka_unit_test(test_known_roundings),
        cmocka_unit_test(test_f32_is_bit_exact),
        cmocka_unit_test(test_codec_names),
        cmocka_unit_test(test_first_nonfinite),
        cmocka_unit_test(test_decode_checked),
        cmocka_unit_test(test_lz4_ten_percent_rule),
    };
    return cmocka_run_group_tests_name("wire codec", tests, NULL, NULL);
}
