/* kernels/kn_types.c — the block-format table: one row per ggml type id (ggml's type-traits idea).
 * Formats we only recognise carry their exact block geometry, so files holding them can be named
 * and sized, but no functions. */
#include "kernels/kn_internal.h"

#define ROW(id, nm, bs, ts) [id] = {.name = nm, .blck_size = bs, .type_size = ts}
#define COMPUTE(id, nm, bs, ts, vdt, to, from)                                                     \
    [id] = {.name = nm,                                                                            \
            .blck_size = bs,                                                                       \
            .type_size = ts,                                                                       \
            .can_compute = true,                                                                   \
            .vec_dot_type = vdt,                                                                   \
            .to_float = to,                                                                        \
            .from_float = from}

static const kn_type_traits traits[KN_TYPE_COUNT] = {
    COMPUTE(KN_F32, "f32", 1, 4, KN_F32, kn__dequant_f32, kn__quant_f32),
    COMPUTE(KN_F16, "f16", 1, 2, KN_F16, kn__dequant_f16, kn__quant_f16),
    ROW(KN_Q4_0, "q4_0", 32, 18),
    ROW(KN_Q4_1, "q4_1", 32, 20),
    ROW(KN_Q5_0, "q5_0", 32, 22),
    ROW(KN_Q5_1, "q5_1", 32, 24),
    COMPUTE(KN_Q8_0, "q8_0", 32, KN__Q8_0_BYTES, KN_Q8_0, kn__dequant_q8_0, kn__quant_q8_0),
    ROW(KN_Q8_1, "q8_1", 32, 36),
    ROW(KN_Q2_K, "q2_K", 256, 84),
    ROW(KN_Q3_K, "q3_K", 256, 110),
    COMPUTE(KN_Q4_K, "q4_K", 256, KN__Q4_K_BYTES, KN_Q8_K, kn__dequant_q4_K, kn__quant_q4_K),
    ROW(KN_Q5_K, "q5_K", 256, 176),
    COMPUTE(KN_Q6_K, "q6_K", 256, KN__Q6_K_BYTES, KN_Q8_K, kn__dequant_q6_K, kn__quant_q6_K),
    /* An activation format; as a weight it multiplies float activations in either mode. */
    COMPUTE(KN_Q8_K, "q8_K", 256, KN__Q8_K_BYTES, KN_F32, kn__dequant_q8_K, kn__quant_q8_K),
    ROW(KN_IQ2_XXS, "iq2_xxs", 256, 66),
    ROW(KN_IQ2_XS, "iq2_xs", 256, 74),
    ROW(KN_IQ3_XXS, "iq3_xxs", 256, 98),
    ROW(KN_IQ1_S, "iq1_s", 256, 50),
    ROW(KN_IQ4_NL, "iq4_nl", 32, 18),
    ROW(KN_IQ3_S, "iq3_s", 256, 110),
    ROW(KN_IQ2_S, "iq2_s", 256, 82),
    ROW(KN_IQ4_XS, "iq4_xs", 256, 136),
    ROW(KN_I8, "i8", 1, 1),
    ROW(KN_I16, "i16", 1, 2),
    ROW(KN_I32, "i32", 1, 4),
    ROW(KN_I64, "i64", 1, 8),
    ROW(KN_F64, "f64", 1, 8),
    ROW(KN_IQ1_M, "iq1_m", 256, 56),
    COMPUTE(KN_BF16, "bf16", 1, 2, KN_BF16, kn__dequant_bf16, kn__quant_bf16),
    ROW(KN_TQ1_0, "tq1_0", 256, 54),
    ROW(KN_TQ2_0, "tq2_0", 256, 66),
    COMPUTE(KN_MXFP4, "mxfp4", 32, KN__MXFP4_BYTES, KN_Q8_0, kn__dequant_mxfp4, kn__quant_mxfp4),
    /* to_float / from_float: one row, its codes then its scale bytes */
    [KN_MXFP4_CT] = {.name = "mxfp4_ct",
                     .blck_size = 32,
                     .type_size = KN__MXFP4_BYTES,
                     .can_compute = true,
                     .vec_dot_type = KN_Q8_0,
                     .planar = true,
                     .to_float = kn__dequant_mxfp4_ct,
                     .from_float = kn__quant_mxfp4_ct},
};

const kn_type_traits *kn_traits(kn_type t) {
    if ((int)t < 0 || (int)t >= KN_TYPE_COUNT || !traits[t].name) return NULL;
    return &traits[t];
}

const char *kn_type_name(kn_type t) {
    const kn_type_traits *tr = kn_traits(t);
    return tr ? tr->name : "unknown";
}

int kn_type_from_name(const char *name) {
    if (!name) return -1;
    for (int t = 0; t < KN_TYPE_COUNT; t++)
        if (traits[t].name && strcmp(traits[t].name, name) == 0) return t;
    return -1;
}

size_t kn_row_size(kn_type t, int64_t k) {
    const kn_type_traits *tr = kn_traits(t);
    if (!tr || k < 0 || k % tr->blck_size) return 0;
    return (size_t)(k / tr->blck_size) * (size_t)tr->type_size;
}
