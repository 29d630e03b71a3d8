/* kernels/kn_glu.c — GLU policies as data: one row per kind. A family declares its kind, alpha and
 * limit from the model config; nothing here guesses. exp is our own (kn_expf), so an expert's
 * output is the same on every ISA and libm (exact mode across heterogeneous nodes). */
#include "kernels/kn_internal.h"

/* exp(x) for float x: n = round(x / ln2), r = x - n ln2 in two parts (Cody-Waite), a degree-7
 * polynomial for exp(r) on |r| <= ln2/2 evaluated with fmaf, and 2^n applied in at most two exact
 * steps so subnormal results round once. */
float kn_expf(float x) {
    if (x != x) return x;
    if (x > KN_EXP_MAX) return INFINITY;
    if (x < KN_EXP_MIN) return 0.0f;
    const float n = nearbyintf(x * KN_EXP_LOG2E);
    float r = fmaf(n, -KN_EXP_LN2_HI, x);
    r = fmaf(n, -KN_EXP_LN2_LO, r);
    float p = KN_EXP_C7;
    p = fmaf(p, r, KN_EXP_C6);
    p = fmaf(p, r, KN_EXP_C5);
    p = fmaf(p, r, KN_EXP_C4);
    p = fmaf(p, r, KN_EXP_C3);
    p = fmaf(p, r, KN_EXP_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int e = (int)n;
    if (e > 127) {
        p *= 0x1p127f;
        e -= 127;
    } else if (e < -126) {
        p *= kn__bits_f32((uint32_t)(e + 126 + 127) << 23);
        e = -126;
    }
    return p * kn__bits_f32((uint32_t)(e + 127) << 23);
}

static float silu_mul(float g, float u, const kn_glu *glu) {
    (void)glu;
    return g / (1.0f + kn_expf(-g)) * u;
}

/* gpt-oss: the gate is clamped above only, the up projection on both sides; comparisons keep a
 * NaN a NaN (as ggml's std::min / std::clamp do). */
static float swiglu_oai(float g, float u, const kn_glu *glu) {
    const float lim = glu->limit;
    const float gc = g > lim ? lim : g;
    const float uc = u < -lim ? -lim : u > lim ? lim : u;
    return gc / (1.0f + kn_expf(-(glu->alpha * gc))) * (uc + 1.0f);
}

static const struct {
    const char *name;
    float (*fn)(float g, float u, const kn_glu *glu);
} glu_table[KN_GLU_COUNT] = {
    [KN_GLU_SWIGLU] = {"swiglu", silu_mul},
    [KN_GLU_SWIGLU_OAI] = {"swiglu_oai", swiglu_oai},
};

const char *kn_glu_name(kn_glu_kind kind) {
    return (int)kind >= 0 && kind < KN_GLU_COUNT ? glu_table[kind].name : "unknown";
}

int kn_glu_from_name(const char *name) {
    for (int k = 0; name && k < KN_GLU_COUNT; k++)
        if (strcmp(glu_table[k].name, name) == 0) return k;
    return -1;
}

void kn__glu_apply_ref(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n) {
    float (*fn)(float, float, const kn_glu *) = glu_table[glu->kind].fn;
    for (int64_t i = 0; i < n; i++) out[i] = fn(g[i], u[i], glu);
}
