/* model/md_rope.c — RoPE angles and rotation, reproducing ggml's rope (FORMATS.md §4): the base
 * angle is the position times powf(base, -2/n_rot) multiplied in pair by pair in float32, YaRN
 * mixes interpolated and extrapolated angles over a ramp between the correction dims, and cos/sin
 * carry the magnitude. */
#include "model/md_rope.h"

#include <math.h>

/* ggml's correction dimension: the pair index whose wavelength fits n_rot_b turns into n_ctx_orig.
 */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot_b, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot_b * 2 * (float)M_PI)) / (2 * logf(base));
}

/* The ramp's ends: the pairs whose wavelengths fit beta_fast and beta_slow turns into the
 * original context, rounded outwards to whole pairs unless the config keeps them fractional (HF's
 * truncate = false), then clamped to [0, n_rot - 1] either way (as both llama.cpp and HF do). */
static void yarn_corr_dims(md_rope *r) {
    float lo = yarn_corr_dim(r->n_rot, r->n_ctx_orig, r->beta_fast, r->freq_base);
    float hi = yarn_corr_dim(r->n_rot, r->n_ctx_orig, r->beta_slow, r->freq_base);
    if (!r->yarn_fractional) {
        lo = floorf(lo);
        hi = ceilf(hi);
    }
    r->corr_dims[0] = fmaxf(0.0f, lo);
    r->corr_dims[1] = fminf((float)(r->n_rot - 1), hi);
}

/* The magnitude llama.cpp ends up with for YaRN: its context divides out ggml's own
 * 1 + 0.1 ln(1/freq_scale) and multiplies in mscale(factor) = 1 + 0.1 ln(factor) (1 for
 * factor <= 1), times the config's attention factor. Evaluated the same way, in float. */
static float yarn_mscale(float factor, float m) {
    return factor <= 1.0f ? 1.0f : 0.1f * m * logf(factor) + 1.0f;
}

/* With a log multiplier (deepseek2's mscale_all_dim) llama.cpp takes mscale(factor, mscale) /
 * mscale(factor, mscale_all_dim) instead, where the rope's mscale is 1 when mscale_all_dim is 1
 * and mscale_all_dim otherwise: a ratio of 1, the YaRN factor moving into the attention scale. */
static float yarn_magnitude(const md_rope *r) {
    float factor = 1.0f / r->freq_scale;
    float mscale_f = yarn_mscale(factor, 1.0f);
    if (r->yarn_log_mul != 0.0f) {
        const float m = r->yarn_log_mul == 1.0f ? 1.0f : r->yarn_log_mul;
        mscale_f = yarn_mscale(factor, m) / yarn_mscale(factor, r->yarn_log_mul);
    }
    float ctx_attn = mscale_f / (1.0f + 0.1f * logf(factor)) * r->attn_factor;
    return ctx_attn * (1.0f + 0.1f * logf(1.0f / r->freq_scale));
}

/* The llama3 per-frequency factors, as the GGUF converter computes them (rope_freqs). */
static void llama3_factors(md_rope *r) {
    int n_pairs = r->n_rot / 2;
    double low_wavelen = r->n_ctx_orig / (double)r->low_freq_factor;
    double high_wavelen = r->n_ctx_orig / (double)r->high_freq_factor;
    for (int i = 0; i < n_pairs; i++) {
        float freq = 1.0f / powf(r->freq_base, (float)(2 * i) / (float)r->n_rot);
        double wavelen = 2 * M_PI / freq;
        double f;
        if (wavelen < high_wavelen) {
            f = 1.0;
        } else if (wavelen > low_wavelen) {
            f = r->factor;
        } else {
            double smooth = (r->n_ctx_orig / wavelen - r->low_freq_factor) /
                            (r->high_freq_factor - r->low_freq_factor);
            f = 1.0 / ((1.0 - smooth) / r->factor + smooth);
        }
        r->freq_factors[i] = (float)f;
    }
    r->has_freq_factors = true;
}

int md_rope_init(md_rope *r, mw_err *err) {
    if (r->n_rot < 2 || r->n_rot % 2 || r->n_rot > 2 * MD_ROPE_MAX_PAIRS)
        return mw_errf(err, "rotated dimensions %d must be even and in [2, %d]", r->n_rot,
                       2 * MD_ROPE_MAX_PAIRS);
    if (!(r->freq_base > 0.0f) || !isfinite(r->freq_base))
        return mw_errf(err, "frequency base %g must be a positive number", r->freq_base);
    if (!(r->yarn_log_mul >= 0.0f) || !isfinite(r->yarn_log_mul))
        return mw_errf(err, "YaRN log multiplier %g must be a non-negative number",
                       r->yarn_log_mul);
    if (!(r->factor > 0.0f) || !isfinite(r->factor) || !(r->attn_factor > 0.0f))
        return mw_errf(err, "scaling factor %g / attention factor %g must be positive", r->factor,
                       r->attn_factor);
    r->theta_scale = powf(r->freq_base, -2.0f / (float)r->n_rot);
    r->freq_scale = 1.0f;
    r->ext_factor = 0.0f;
    r->corr_dims[0] = r->corr_dims[1] = 0.0f;
    r->mscale = r->attn_factor;
    r->has_freq_factors = false;
    switch (r->scaling) {
    case MD_ROPE_SCALING_NONE:
        break;
    case MD_ROPE_SCALING_LINEAR:
        r->freq_scale = 1.0f / r->factor;
        break;
    case MD_ROPE_SCALING_YARN:
        if (r->n_ctx_orig < 1 || !(r->beta_fast > 0.0f) || !(r->beta_slow > 0.0f))
            return mw_errf(err, "YaRN needs an original context and positive beta_fast/slow");
        r->freq_scale = 1.0f / r->factor;
        r->ext_factor = 1.0f;
        yarn_corr_dims(r);
        r->mscale = yarn_magnitude(r);
        break;
    case MD_ROPE_SCALING_LLAMA3:
        if (r->n_ctx_orig < 1 || !(r->low_freq_factor > 0.0f) ||
            !(r->high_freq_factor > r->low_freq_factor))
            return mw_errf(err, "llama3 RoPE needs an original context and low < high factors");
        llama3_factors(r);
        break;
    default:
        return mw_errf(err, "unknown RoPE scaling %d", (int)r->scaling);
    }
    return 0;
}

float md_rope_attn_mscale(const md_rope *r) {
    const float ln = logf(1.0f / r->freq_scale);
    /* llama.cpp's attn_factor before its YaRN adjustment: the rope magnitude for YaRN, otherwise
     * the attention factor times 1 + 0.1 ln(1 / freq_scale) */
    const float org =
        r->scaling == MD_ROPE_SCALING_YARN ? r->mscale : r->mscale * (1.0f + 0.1f * ln);
    return org * (1.0f + 0.1f * r->yarn_log_mul * ln);
}

void md_rope_angles(const md_rope *r, int64_t pos, float *cs) {
    if (r->layout == MD_ROPE_NONE) return; /* nothing is rotated: no angles to compute */
    int n_pairs = r->n_rot / 2;
    float theta = (float)pos;
    float span = fmaxf(0.001f, r->corr_dims[1] - r->corr_dims[0]);
    for (int i = 0; i < n_pairs; i++) {
        float extrap = r->has_freq_factors ? theta / r->freq_factors[i] : theta;
        float interp = r->freq_scale * extrap;
        float angle = interp;
        if (r->ext_factor != 0.0f) {
            float y = ((float)i - r->corr_dims[0]) / span;
            float ramp = (1 - fminf(1.0f, fmaxf(0.0f, y))) * r->ext_factor;
            angle = interp * (1 - ramp) + extrap * ramp;
        }
        cs[2 * i] = cosf(angle) * r->mscale;
        cs[2 * i + 1] = sinf(angle) * r->mscale;
        theta *= r->theta_scale;
    }
}

void md_rope_apply(const md_rope *r, const float *cs, float *x) {
    if (r->layout == MD_ROPE_NONE) return;
    int n_pairs = r->n_rot / 2;
    /* NEOX pairs i with i + n_rot/2; NORM pairs 2i with 2i + 1 */
    int stride = r->layout == MD_ROPE_NEOX ? 1 : 2;
    int offset = r->layout == MD_ROPE_NEOX ? n_pairs : 1;
    for (int i = 0; i < n_pairs; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        float *a = x + (size_t)i * stride;
        float x0 = a[0], x1 = a[offset];
        a[0] = x0 * c - x1 * s;
        a[offset] = x0 * s + x1 * c;
    }
}
