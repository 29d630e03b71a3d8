/* kernels/kn_glu.c — GLU policies as data: one row per kind, with the parameters it takes. A
 * family declares its kind and reads the parameters from the model config; nothing here guesses.
 * exp and tanh are our own (kn_expf, kn_tanhf), so an expert's output is the same on every ISA and
 * libm (exact mode across heterogeneous nodes). */
#include "kernels/kn_internal.h"

#include <stddef.h>
#include <stdio.h>

#include "util/mw_err.h"

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

float kn_tanhf(float x) {
    const float a = fabsf(x); /* tanh is odd: computed for |x|, the sign put back at the end */
    float r;
    if (a < KN_TANH_SMALL) {
        const float a2 = a * a;
        float p = KN_TANH_C15;
        p = fmaf(p, a2, KN_TANH_C13);
        p = fmaf(p, a2, KN_TANH_C11);
        p = fmaf(p, a2, KN_TANH_C9);
        p = fmaf(p, a2, KN_TANH_C7);
        p = fmaf(p, a2, KN_TANH_C5);
        p = fmaf(p, a2, KN_TANH_C3);
        r = fmaf(a2 * a, p, a);
    } else {
        r = 1.0f - 2.0f / (kn_expf(a + a) + 1.0f); /* NaN: kn_expf keeps a's NaN to the end */
    }
    return copysignf(r, x);
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

/* Kimi K3: the gate's soft cap beta * tanh(g / beta) times sigmoid(g) (as a division, like silu),
 * times the up branch, itself soft-capped when linear_beta > 0. */
static float situ(float g, float u, const kn_glu *glu) {
    const float gate = glu->beta * kn_tanhf(g / glu->beta) / (1.0f + kn_expf(-g));
    return gate * (glu->lbeta > 0.0f ? glu->lbeta * kn_tanhf(u / glu->lbeta) : u);
}

/* A parameter: its name in messages, where it lives, and whether it must be > 0 (else any
 * finite value). */
typedef struct glu_param {
    const char *name;
    size_t off;
    bool positive;
} glu_param;

static const struct {
    const char *name;
    float (*fn)(float g, float u, const kn_glu *glu);
    int n_params;
    glu_param params[KN_GLU_MAX_PARAMS];
} glu_table[KN_GLU_COUNT] = {
    [KN_GLU_SWIGLU] = {"swiglu", silu_mul, 0, {{0}}},
    [KN_GLU_SWIGLU_OAI] = {"swiglu_oai",
                           swiglu_oai,
                           2,
                           {{"alpha", offsetof(kn_glu, alpha), false},
                            {"limit", offsetof(kn_glu, limit), true}}},
    [KN_GLU_SITU] = {"situ",
                     situ,
                     2,
                     {{"beta", offsetof(kn_glu, beta), true},
                      {"linear_beta", offsetof(kn_glu, lbeta), false}}},
};

const char *kn_glu_name(kn_glu_kind kind) {
    return (int)kind >= 0 && kind < KN_GLU_COUNT ? glu_table[kind].name : "unknown";
}

int kn_glu_from_name(const char *name) {
    for (int k = 0; name && k < KN_GLU_COUNT; k++)
        if (strcmp(glu_table[k].name, name) == 0) return k;
    return -1;
}

static float *param_at(kn_glu *glu, int i) {
    return (float *)((char *)glu + glu_table[glu->kind].params[i].off);
}

static float param_of(const kn_glu *glu, int i) {
    float v;
    memcpy(&v, (const char *)glu + glu_table[glu->kind].params[i].off, sizeof v);
    return v;
}

int kn_glu_params(const kn_glu *glu, float p[KN_GLU_MAX_PARAMS]) {
    if ((int)glu->kind < 0 || glu->kind >= KN_GLU_COUNT) return 0;
    for (int i = 0; i < glu_table[glu->kind].n_params; i++) p[i] = param_of(glu, i);
    return glu_table[glu->kind].n_params;
}

int kn_glu_check(const kn_glu *glu, mw_err *err) {
    if ((int)glu->kind < 0 || glu->kind >= KN_GLU_COUNT)
        return mw_errf(err, "unknown GLU kind %d", (int)glu->kind);
    for (int i = 0; i < glu_table[glu->kind].n_params; i++) {
        const glu_param *q = &glu_table[glu->kind].params[i];
        const float v = param_of(glu, i);
        if (!isfinite(v) || (q->positive && !(v > 0.0f)))
            return mw_errf(err, "GLU %s: %s = %g must be finite%s", glu_table[glu->kind].name,
                           q->name, (double)v, q->positive ? " and > 0" : "");
    }
    return 0;
}

int kn_glu_make(int kind, const float *p, int n, kn_glu *out, mw_err *err) {
    if (kind < 0 || kind >= KN_GLU_COUNT) return mw_errf(err, "unknown GLU kind %d", kind);
    if (n != glu_table[kind].n_params)
        return mw_errf(err, "GLU %s takes %d parameters, not %d", glu_table[kind].name,
                       glu_table[kind].n_params, n);
    kn_glu g = {.kind = (kn_glu_kind)kind};
    for (int i = 0; i < n; i++) *param_at(&g, i) = p[i];
    if (kn_glu_check(&g, err)) return -1;
    *out = g;
    return 0;
}

bool kn_glu_same(const kn_glu *a, const kn_glu *b) {
    if (a->kind != b->kind || (int)a->kind < 0 || a->kind >= KN_GLU_COUNT) return false;
    for (int i = 0; i < glu_table[a->kind].n_params; i++) {
        const float x = param_of(a, i), y = param_of(b, i);
        if (memcmp(&x, &y, sizeof x) != 0) return false;
    }
    return true;
}

const char *kn_glu_format(const kn_glu *glu, char *buf, size_t cap) {
    if (!cap) return buf;
    const bool known = (int)glu->kind >= 0 && glu->kind < KN_GLU_COUNT;
    size_t len = (size_t)snprintf(buf, cap, "%s", kn_glu_name(glu->kind));
    for (int i = 0; known && i < glu_table[glu->kind].n_params && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s=%.9g", i ? ", " : "(",
                                glu_table[glu->kind].params[i].name, (double)param_of(glu, i));
    if (known && glu_table[glu->kind].n_params && len < cap) snprintf(buf + len, cap - len, ")");
    return buf;
}

void kn__glu_apply_ref(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n) {
    float (*fn)(float, float, const kn_glu *) = glu_table[glu->kind].fn;
    for (int64_t i = 0; i < n; i++) out[i] = fn(g[i], u[i], glu);
}
