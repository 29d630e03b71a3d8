/* kernels/kn_q4_K.c — Q4_K super-blocks (ggml type 12): 256 4-bit codes in 8 groups of 32, each
 * group with a 6-bit scale and a 6-bit min under fp16 d and dmin: w = d*sc*q - dmin*m.
 * Dequantization is ggml's; the quantizer is our own least-squares fit. */
#include "kernels/kn_internal.h"

void kn__dequant_q4_K(const void *src, float *dst, int64_t k) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < k / KN__QK_K; i++, b += KN__Q4_K_BYTES) {
        const float d = kn__half_to_float(kn__rd16(b));
        const float dmin = kn__half_to_float(kn__rd16(b + 2));
        const uint8_t *scales = b + 4, *q = b + 16;
        for (int j = 0; j < 4; j++, q += 32) {
            uint8_t sc, m;
            kn__q4k_scale_min(2 * j, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            kn__q4k_scale_min(2 * j + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Fits x ~ s*q - m with q in 0..15, s >= 0, m >= 0 for one group of 32: starts from the group's
 * range, tries nearby scales and refits (s, m) by weighted least squares, keeping the best. */
static void fit_group(const float *x, float *s_out, float *m_out) {
    float lo = 0.0f, hi = -INFINITY;
    for (int i = 0; i < 32; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    *s_out = 0.0f;
    *m_out = -lo;
    if (!(hi > lo)) return;
    float best_err = INFINITY;
    for (int step = -6; step <= 6; step++) {
        const float iscale = (15.0f + 0.25f * (float)step) / (hi - lo);
        float sw = 0, swq = 0, swqq = 0, swx = 0, swxq = 0;
        float q[32];
        for (int i = 0; i < 32; i++) {
            q[i] = fminf(fmaxf(nearbyintf(iscale * (x[i] - lo)), 0.0f), 15.0f);
            const float w = 1.0f + x[i] * x[i];
            sw += w;
            swq += w * q[i];
            swqq += w * q[i] * q[i];
            swx += w * x[i];
            swxq += w * x[i] * q[i];
        }
        const float det = sw * swqq - swq * swq;
        if (!(det > 0.0f)) continue;
        float s = (sw * swxq - swq * swx) / det;
        float m = (swq * swxq - swqq * swx) / det; /* x = s q - m */
        if (m < 0.0f) { /* mins are stored unsigned: refit the scale alone with m = 0 */
            m = 0.0f;
            s = swqq > 0.0f ? swxq / swqq : 0.0f;
        }
        if (s < 0.0f) continue;
        float err = 0.0f;
        for (int i = 0; i < 32; i++) {
            const float e = x[i] - (s * q[i] - m);
            err += (1.0f + x[i] * x[i]) * e * e;
        }
        if (err < best_err) {
            best_err = err;
            *s_out = s;
            *m_out = m;
        }
    }
}

static uint8_t quant6(float v, float inv) {
    float r = fminf(fmaxf(nearbyintf(v * inv), 0.0f), 63.0f);
    return (uint8_t)r;
}

void kn__quant_q4_K(const float *src, void *dst, int64_t k) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < k / KN__QK_K; i++, b += KN__Q4_K_BYTES, src += KN__QK_K) {
        float s[8], m[8], smax = 0.0f, mmax = 0.0f;
        for (int g = 0; g < 8; g++) {
            fit_group(src + 32 * g, &s[g], &m[g]);
            smax = fmaxf(smax, s[g]);
            mmax = fmaxf(mmax, m[g]);
        }
        const uint16_t dh = kn_f32_to_fp16(smax / 63.0f), mh = kn_f32_to_fp16(mmax / 63.0f);
        const float d = kn__half_to_float(dh), dmin = kn__half_to_float(mh);
        uint8_t sc[8], mn[8];
        for (int g = 0; g < 8; g++) {
            sc[g] = d > 0.0f ? quant6(s[g], 1.0f / d) : 0;
            mn[g] = dmin > 0.0f ? quant6(m[g], 1.0f / dmin) : 0;
        }
        kn__wr16(b, dh);
        kn__wr16(b + 2, mh);
        uint8_t *scales = b + 4, *qs = b + 16;
        memset(scales, 0, 12);
        for (int j = 0; j < 8; j++) {
            if (j < 4) {
                scales[j] = sc[j];
                scales[j + 4] = mn[j];
            } else {
                scales[j + 4] = (uint8_t)((sc[j] & 0xF) | (mn[j] & 0xF) << 4);
                scales[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
                scales[j] |= (uint8_t)((mn[j] >> 4) << 6);
            }
        }
        /* requantize against the stored scales and mins */
        for (int g = 0; g < 8; g++) {
            const float gd = d * (float)sc[g], gm = dmin * (float)mn[g];
            for (int l = 0; l < 32; l++) {
                float r = gd > 0.0f ? nearbyintf((src[32 * g + l] + gm) / gd) : 0.0f;
                const uint8_t qv = (uint8_t)fminf(fmaxf(r, 0.0f), 15.0f);
                uint8_t *byte = &qs[32 * (g / 2) + l];
                *byte = (g & 1) ? (uint8_t)((*byte & 0x0F) | qv << 4) : qv;
            }
        }
    }
}
