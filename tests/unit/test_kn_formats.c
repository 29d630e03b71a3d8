/* tests/unit/test_kn_formats.c — the block-format table, fp16/bf16 conversions (against the
 * F16C instructions where the CPU has them), E8M0 decoding, and every quantizer: ggml's rules for
 * MXFP4 and the Q8 activation formats, accuracy bounds for the weight quantizers. */
#include "tests/unit/kn_test_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("f16c"))) static uint16_t hw_f32_to_fp16(float f) {
    return (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0);
}
__attribute__((target("f16c"))) static float hw_fp16_to_f32(uint16_t h) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
#endif

static void test_traits_table(void **state) {
    (void)state;
    static const struct {
        kn_type t;
        const char *name;
        int bs, ts;
    } want[] = {{KN_F32, "f32", 1, 4},
                {KN_F16, "f16", 1, 2},
                {KN_Q4_0, "q4_0", 32, 18},
                {KN_Q4_1, "q4_1", 32, 20},
                {KN_Q5_0, "q5_0", 32, 22},
                {KN_Q5_1, "q5_1", 32, 24},
                {KN_Q8_0, "q8_0", 32, 34},
                {KN_Q8_1, "q8_1", 32, 36},
                {KN_Q2_K, "q2_K", 256, 84},
                {KN_Q3_K, "q3_K", 256, 110},
                {KN_Q4_K, "q4_K", 256, 144},
                {KN_Q5_K, "q5_K", 256, 176},
                {KN_Q6_K, "q6_K", 256, 210},
                {KN_Q8_K, "q8_K", 256, 292},
                {KN_IQ2_XXS, "iq2_xxs", 256, 66},
                {KN_IQ2_XS, "iq2_xs", 256, 74},
                {KN_IQ3_XXS, "iq3_xxs", 256, 98},
                {KN_IQ1_S, "iq1_s", 256, 50},
                {KN_IQ4_NL, "iq4_nl", 32, 18},
                {KN_IQ3_S, "iq3_s", 256, 110},
                {KN_IQ2_S, "iq2_s", 256, 82},
                {KN_IQ4_XS, "iq4_xs", 256, 136},
                {KN_I8, "i8", 1, 1},
                {KN_I16, "i16", 1, 2},
                {KN_I32, "i32", 1, 4},
                {KN_I64, "i64", 1, 8},
                {KN_F64, "f64", 1, 8},
                {KN_IQ1_M, "iq1_m", 256, 56},
                {KN_BF16, "bf16", 1, 2},
                {KN_TQ1_0, "tq1_0", 256, 54},
                {KN_TQ2_0, "tq2_0", 256, 66},
                {KN_MXFP4, "mxfp4", 32, 17}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const kn_type_traits *tr = kn_traits(want[i].t);
        assert_non_null(tr);
        assert_string_equal(tr->name, want[i].name);
        assert_int_equal(tr->blck_size, want[i].bs);
        assert_int_equal(tr->type_size, want[i].ts);
        assert_int_equal(kn_type_from_name(want[i].name), want[i].t);
        assert_string_equal(kn_type_name(want[i].t), want[i].name);
    }
    /* removed / never-assigned ids */
    const int gaps[] = {4, 5, 31, 32, 33, 36, 37, 38, -1, KN_TYPE_COUNT, 1000};
    for (size_t i = 0; i < sizeof gaps / sizeof gaps[0]; i++) {
        assert_null(kn_traits((kn_type)gaps[i]));
        assert_string_equal(kn_type_name((kn_type)gaps[i]), "unknown");
        assert_int_equal(kn_row_size((kn_type)gaps[i], 32), 0);
    }
    assert_int_equal(kn_type_from_name("q6_k"), -1); /* names are case-sensitive, as ggml's */
    assert_int_equal(kn_type_from_name(NULL), -1);
    /* computable formats and their activation formats */
    for (size_t i = 0; i < KT_NTYPES; i++) {
        const kn_type_traits *tr = kn_traits(kt_compute_types[i]);
        assert_true(tr->can_compute && tr->to_float && tr->from_float);
    }
    assert_int_equal(kn_traits(KN_MXFP4)->vec_dot_type, KN_Q8_0);
    assert_int_equal(kn_traits(KN_Q8_0)->vec_dot_type, KN_Q8_0);
    assert_int_equal(kn_traits(KN_Q6_K)->vec_dot_type, KN_Q8_K);
    assert_int_equal(kn_traits(KN_Q4_K)->vec_dot_type, KN_Q8_K);
    assert_int_equal(kn_traits(KN_F16)->vec_dot_type, KN_F16);
    assert_int_equal(kn_traits(KN_BF16)->vec_dot_type, KN_BF16);
    assert_false(kn_traits(KN_Q4_0)->can_compute);
    /* row sizes */
    assert_int_equal(kn_row_size(KN_MXFP4, 2880), 90 * 17);
    assert_int_equal(kn_row_size(KN_Q6_K, 3072), 12 * 210);
    assert_int_equal(kn_row_size(KN_Q6_K, 2880), 0);
    assert_int_equal(kn_row_size(KN_F32, 7), 28);
    assert_int_equal(kn_row_size(KN_F32, -1), 0);
}

/* The numerics names the CLI, the handshake and the reports share. */
static void test_numerics_names(void **state) {
    (void)state;
    assert_string_equal(kn_numerics_name(KN_NUM_F32), "f32");
    assert_string_equal(kn_numerics_name(KN_NUM_Q8), "q8");
    assert_string_equal(kn_numerics_name((kn_numerics)7), "unknown");
    for (int i = 0; i < KN_NUM_COUNT; i++)
        assert_int_equal(kn_numerics_from_name(kn_numerics_name((kn_numerics)i)), i);
    assert_int_equal(kn_numerics_from_name("Q8"), -1);
    assert_int_equal(kn_numerics_from_name("any"), -1);
    assert_int_equal(kn_numerics_from_name(NULL), -1);
}

static void test_fp16_all_values_round_trip(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = kn_fp16_to_f32((uint16_t)h);
        const bool nan = ((h >> 10) & 0x1F) == 0x1F && (h & 0x3FF);
        if (nan) {
            assert_true(f != f);
            assert_int_equal(kn_f32_to_fp16(f), h | 0x200); /* quieted, payload kept */
        } else {
            assert_int_equal(kn_f32_to_fp16(f), h);
        }
#if defined(__x86_64__)
        if (__builtin_cpu_supports("f16c")) {
            const float hw = hw_fp16_to_f32((uint16_t)h);
            if (!nan) assert_memory_equal(&f, &hw, 4);
        }
#endif
    }
    assert_true(kn_fp16_to_f32(0x0001) == 0x1p-24f); /* smallest subnormal */
    assert_true(kn_fp16_to_f32(0x7BFF) == 65504.0f);
    assert_true(kn_fp16_to_f32(0xFC00) == -INFINITY);
}

static void test_fp16_rounding_matches_f16c(void **state) {
    (void)state;
    /* ties to even at every exponent, the overflow threshold, subnormal ties */
    const float edge[] = {65519.99f, 65520.0f,   65504.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
                          0x1p-25f,  0x1.8p-25f, 0x1p-26f, 3 * 0x1p-25f,    0x1p-14f - 0x1p-25f,
                          -0.0f,     1e-30f,     INFINITY, -1e10f};
    const uint16_t want[] = {0x7BFF, 0x7C00, 0x7BFF, 0x3C00, 0x3C02, 0x0000, 0x0001,
                             0x0000, 0x0002, 0x0400, 0x8000, 0x0000, 0x7C00, 0xFC00};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        assert_int_equal(kn_f32_to_fp16(edge[i]), want[i]);
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("f16c")) return;
    kt_rng r = {42};
    for (int i = 0; i < 2000000; i++) {
        uint32_t bits = (uint32_t)kt_next(&r);
        if (i & 1) bits = (bits & 0x80000000u) | (0x30000000u + (bits & 0x1FFFFFFFu) % 0x10000000u);
        const float f = kn__bits_f32(bits);
        if (f != f) continue;
        const uint16_t sw = kn_f32_to_fp16(f), hw = hw_f32_to_fp16(f);
        if (sw != hw) fail_msg("fp16(%a): 0x%04x, F16C says 0x%04x", (double)f, sw, hw);
    }
#endif
}

static void test_bf16(void **state) {
    (void)state;
    assert_int_equal(kn_f32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(kn_f32_to_bf16(kn__bits_f32(0x3F808000u)), 0x3F80); /* tie to even (down) */
    assert_int_equal(kn_f32_to_bf16(kn__bits_f32(0x3F818000u)), 0x3F82); /* tie to even (up) */
    assert_int_equal(kn_f32_to_bf16(kn__bits_f32(0x3F808001u)), 0x3F81);
    assert_int_equal(kn_f32_to_bf16(kn__bits_f32(0x7F800001u)), 0x7FC0); /* NaN stays NaN */
    assert_int_equal(kn_f32_to_bf16(kn__bits_f32(0x00000001u)), 0x0000); /* subnormal rounds */
    for (uint32_t b = 0; b < 65536; b++) {
        const float f = kn_bf16_to_f32((uint16_t)b);
        if (f == f) assert_int_equal(kn_f32_to_bf16(f), b);
    }
}

static void test_e8m0_half(void **state) {
    (void)state;
    for (int e = 0; e < 256; e++) {
        const float h = kn__e8m0_half((uint8_t)e);
        assert_true(h == ldexpf(1.0f, e - 128)); /* no flush to zero, no NaN for 0xFF */
    }
    assert_int_equal(kn__f32_bits(kn__e8m0_half(0)), 0x00200000u);
    assert_int_equal(kn__f32_bits(kn__e8m0_half(1)), 0x00400000u);
    assert_true(kn__e8m0_half(0xFF) == 0x1p127f);
}

/* ggml's MXFP4 rule, checked block by block: the exponent from amax, each code nearest. */
static void test_mxfp4_quantizer_rule(void **state) {
    (void)state;
    kt_rng r = {7};
    float x[64 * 32], back[64 * 32];
    uint8_t q[64 * 17];
    for (int i = 0; i < 64 * 32; i++) x[i] = kt_gauss(&r, i < 32 * 32 ? 0.05f : 300.0f);
    for (int j = 0; j < 32; j++) x[5 * 32 + j] = 0.0f; /* an all-zero block */
    x[6 * 32 + 3] = 4.0f;                              /* amax exactly a power of two */
    kn__quant_mxfp4(x, q, 64 * 32);
    kn__dequant_mxfp4(q, back, 64 * 32);
    for (int b = 0; b < 64; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        const int e = amax > 0 ? (int)(floorf(log2f(amax)) - 2 + 127) : 0;
        assert_int_equal(q[17 * b], e);
        const float h = kn__e8m0_half((uint8_t)e);
        for (int j = 0; j < 32; j++) {
            const float v = x[32 * b + j];
            const uint8_t byte = q[17 * b + 1 + (j % 16)];
            const int code = j < 16 ? byte & 0xF : byte >> 4;
            int best = 0; /* exhaustive search, first minimum wins */
            for (int c = 1; c < 16; c++)
                if (fabsf(kn__mxfp4_kvalues[c] * h - v) < fabsf(kn__mxfp4_kvalues[best] * h - v))
                    best = c;
            assert_int_equal(code, best);
            assert_true(back[32 * b + j] == kn__mxfp4_kvalues[code] * h);
        }
    }
    for (int j = 0; j < 17; j++) assert_int_equal(q[5 * 17 + j], 0); /* zero block: all zero */
    /* non-finite input does not overflow the exponent byte */
    float bad[32] = {INFINITY};
    kn__quant_mxfp4(bad, q, 32);
    assert_int_equal(q[0], 255);
}

/* Q8_0 activations: d = amax/127 as fp16, q = round-half-even(x * 127/amax). */
static void test_q8_0_activation_rounding(void **state) {
    (void)state;
    float x[32] = {0};
    x[0] = 127.0f; /* id = 1 exactly: the other entries round as they are */
    x[1] = 2.5f;
    x[2] = 3.5f;
    x[3] = -2.5f;
    x[4] = -0.5f;
    x[5] = 1.5f;
    x[6] = 126.5f;
    kn__block_q8_0 y;
    kn__quant_q8_0(x, &y, 32);
    assert_int_equal(y.d, kn_f32_to_fp16(1.0f));
    const int8_t want[] = {127, 2, 4, -2, 0, 2, 126};
    for (int i = 0; i < 7; i++) assert_int_equal(y.qs[i], want[i]);
    /* an all-zero block */
    memset(x, 0, sizeof x);
    kn__quant_q8_0(x, &y, 32);
    assert_int_equal(y.d, 0);
    for (int i = 0; i < 32; i++) assert_int_equal(y.qs[i], 0);
    /* q uses 127/amax, not 1/fp16(d) (the portable reference's rule) */
    kt_rng r = {99};
    int differs = 0;
    for (int trial = 0; trial < 2000; trial++) {
        for (int i = 0; i < 32; i++) x[i] = kt_gauss(&r, 1.0f);
        kn__quant_q8_0(x, &y, 32);
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
        const float id = 127.0f / amax, idd = 1.0f / kn_fp16_to_f32(y.d);
        for (int i = 0; i < 32; i++) {
            assert_int_equal(y.qs[i], (int)nearbyintf(x[i] * id));
            differs += (int)nearbyintf(x[i] * idd) != y.qs[i];
        }
    }
    assert_true(differs > 0); /* the two rules are distinguishable on this data */
}

static void test_q8_K_activation_rounding(void **state) {
    (void)state;
    kt_rng r = {5};
    float x[512];
    for (int i = 0; i < 512; i++) x[i] = kt_gauss(&r, 2.0f);
    x[17] = 10.0f;  /* block 0: positive max */
    x[300] = -9.0f; /* block 1: negative max */
    x[301] = 9.0f;  /* same magnitude later: the first one wins */
    kn__block_q8_K y[2];
    kn__quant_q8_K(x, y, 512);
    assert_true(y[0].d == 1.0f / (-127.0f / 10.0f));
    assert_true(y[0].d < 0);
    assert_int_equal(y[0].qs[17], -127);
    assert_true(y[1].d == 1.0f / (-127.0f / -9.0f));
    assert_int_equal(y[1].qs[300 - 256], -127);
    assert_int_equal(y[1].qs[301 - 256], 127);
    for (int b = 0; b < 2; b++) {
        const float mx = b == 0 ? 10.0f : -9.0f;
        for (int j = 0; j < 256; j++) {
            int v = (int)nearbyintf((-127.0f / mx) * x[256 * b + j]);
            assert_int_equal(y[b].qs[j], v > 127 ? 127 : v);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y[b].qs[16 * g + j];
            assert_int_equal(y[b].bsums[g], s);
        }
    }
    memset(x, 0, sizeof x);
    kn__quant_q8_K(x, y, 256);
    assert_true(y[0].d == 0.0f);
}

/* Weight quantizers: dequant(quant(x)) is close to x (relative RMS error bounds per format). */
static void test_weight_quantizer_accuracy(void **state) {
    (void)state;
    const struct {
        kn_type t;
        double max_rel_rms;
    } cases[] = {{KN_MXFP4, 0.20}, {KN_Q4_K, 0.12}, {KN_Q6_K, 0.03}, {KN_Q8_0, 0.01},
                 {KN_F16, 1e-3},   {KN_BF16, 5e-3}, {KN_F32, 0},     {KN_Q8_K, 0.01}};
    kt_rng r = {11};
    const int64_t k = 256 * 16;
    float *x = kt_gauss_vec(&r, k, 0.05f), *back = malloc(k * sizeof(float));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const kn_type_traits *tr = kn_traits(cases[c].t);
        void *q = malloc(kn_row_size(cases[c].t, k));
        tr->from_float(x, q, k);
        tr->to_float(q, back, k);
        double se = 0, sx = 0;
        for (int64_t i = 0; i < k; i++) {
            se += (double)(back[i] - x[i]) * (back[i] - x[i]);
            sx += (double)x[i] * x[i];
        }
        const double rel = sqrt(se / sx);
        printf("  %s: relative rms error %.4f\n", tr->name, rel);
        assert_true(rel <= cases[c].max_rel_rms);
        free(q);
    }
    /* Q6_K and Q4_K keep the exact values they can represent: zeros stay zero */
    memset(x, 0, k * sizeof(float));
    const kn_type zt[] = {KN_Q6_K, KN_Q4_K, KN_MXFP4, KN_Q8_0};
    for (size_t i = 0; i < sizeof zt / sizeof zt[0]; i++) {
        void *q = malloc(kn_row_size(zt[i], k));
        kn_traits(zt[i])->from_float(x, q, k);
        kn_traits(zt[i])->to_float(q, back, k);
        for (int64_t j = 0; j < k; j++) assert_true(back[j] == 0.0f);
        free(q);
    }
    free(x);
    free(back);
}

/* Every ISA's activation preparation gives ggml's rounding bit for bit, edge values included:
 * Q8_K kernels keep ggml's block layout; the AVX2 Q8_0 kernels interleave blocks (8 per group,
 * dword k of block j at byte 32k + 4j, then 8 float d and 8 int32 12 * sum(q) per group). */
static void test_activation_prep_all_isas(void **state) {
    (void)state;
    kt_rng r = {1234};
    const int64_t k = 256 * 3 + 0; /* 24 Q8_0 blocks: 3 groups; and 3 Q8_K blocks */
    const int64_t k0 = 32 * 13;    /* 13 Q8_0 blocks: a partial last group */
    float x[768];
    kn__block_q8_K want_k[3];
    kn__block_q8_0 want_0[24];
    const kn_isa prev = kn_isa_active();
    for (int trial = 0; trial < 400; trial++) {
        for (int i = 0; i < k; i++) x[i] = kt_gauss(&r, trial % 3 ? 1.0f : 1e-3f);
        if (trial % 5 == 1) x[kt_range(&r, 0, 767)] = NAN;
        if (trial % 7 == 2) x[kt_range(&r, 0, 767)] = INFINITY;
        if (trial % 11 == 3)
            for (int i = 0; i < 32; i++) x[i] = 1e-41f * (float)(i - 16); /* subnormal amax */
        if (trial % 13 == 4)
            for (int i = 0; i < 256; i++) x[256 + i] = (float)(i % 5) - 2.0f; /* ties and zeros */
        if (trial % 13 == 4) x[300] = -3.0f, x[301] = 3.0f; /* equal magnitudes: the first wins */
        if (trial % 17 == 5) memset(x + 512, 0, 256 * sizeof(float));
        kn__quant_q8_K(x, want_k, k);
        kn__quant_q8_0(x, want_0, k);
        for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
            if (kn_isa_force((kn_isa)isa) != 0) continue;
            const kn__kernel *kk = kn__kernel_for(KN_Q6_K, KN_NUM_Q8);
            _Alignas(64) uint8_t buf[4096]; /* as the kernels' scratch is */
            kk->act_prep(x, buf, k);
            assert_memory_equal(buf, want_k, sizeof want_k);
            if (isa == KN_ISA_NEON) { /* then the blocks' d as floats, zero padded to 8 */
                const float *nd = (const float *)(buf + sizeof want_k);
                for (int b = 0; b < 8; b++) assert_true(nd[b] == (b < 3 ? want_k[b].d : 0.0f));
            }
            const kn__kernel *k8 = kn__kernel_for(KN_MXFP4, KN_NUM_Q8);
            for (int pass = 0; pass < 2; pass++) {
                const int64_t n = pass ? k0 : k, nb = n / 32, ng = (nb + 7) / 8;
                memset(buf, 0xAB, sizeof buf);
                k8->act_prep(x, buf, n);
                if (isa == KN_ISA_SCALAR) {
                    assert_memory_equal(buf, want_0, nb * sizeof(kn__block_q8_0));
                    continue;
                }
                if (isa == KN_ISA_NEON) { /* the blocks' quants in order, then 8 * ng scales */
                    const float *nd = (const float *)(buf + 32 * nb);
                    for (int64_t b = 0; b < 8 * ng; b++) {
                        if (b < nb) assert_memory_equal(buf + 32 * b, want_0[b].qs, 32);
                        assert_true(nd[b] == (b < nb ? kn_fp16_to_f32(want_0[b].d) : 0.0f));
                    }
                    continue;
                }
                const float *dx = (const float *)(buf + 256 * ng);
                const int32_t *xs = (const int32_t *)(dx + 8 * ng);
                for (int64_t b = 0; b < 8 * ng; b++) {
                    int32_t sum = 0;
                    for (int j = 0; j < 32; j++) {
                        const int8_t q =
                            (int8_t)buf[256 * (b / 8) + 32 * (j / 4) + 4 * (b % 8) + j % 4];
                        assert_int_equal(q, b < nb ? want_0[b].qs[j] : 0);
                        sum += q;
                    }
                    assert_true(dx[b] == (b < nb ? kn_fp16_to_f32(want_0[b].d) : 0.0f));
                    assert_int_equal(xs[b], -12 * sum); /* the MXFP4 bias, negated */
                }
            }
        }
    }
    kn_isa_force(prev);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traits_table),
        cmocka_unit_test(test_numerics_names),
        cmocka_unit_test(test_fp16_all_values_round_trip),
        cmocka_unit_test(test_fp16_rounding_matches_f16c),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_e8m0_half),
        cmocka_unit_test(test_mxfp4_quantizer_rule),
        cmocka_unit_test(test_q8_0_activation_rounding),
        cmocka_unit_test(test_q8_K_activation_rounding),
        cmocka_unit_test(test_weight_quantizer_accuracy),
        cmocka_unit_test(test_activation_prep_all_isas),
    };
    return cmocka_run_group_tests_name("kernels_formats", tests, NULL, NULL);
}
