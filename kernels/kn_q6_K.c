/* kernels/kn_q6_K.c — Q6_K super-blocks (ggml type 14): 256 6-bit codes in 16 groups of 16 with
 * int8 group scales under one fp16 scale. Dequantization is ggml's (FORMATS.md §1); the quantizer
 * is our own weighted least-squares search (vindex synth uses it), not bit-identical to ggml's. */
#include "kernels/kn_internal.h"

void kn__dequant_q6_K(const void *src, float *dst, int64_t k) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < k / KN__QK_K; i++, b += KN__Q6_K_BYTES, dst += KN__QK_K) {
        const float d = kn__half_to_float(kn__rd16(b + 208));
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int j = 0; j < KN__QK_K; j++)
            dst[j] = d * (float)sc[j / 16] * (float)(kn__q6k_code(b, j) - 32);
    }
}

/* Best scale s for x[0..n) quantized to integers in [lo, hi]: tries scales around amax/|limit|
 * and keeps the one with the least x^2-weighted squared error after a least-squares refit (large
 * weights matter most in a dot product). Returns s; q receives the integers. */
static float fit_symmetric(const float *x, int n, int lo, int hi, int8_t *q) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-30f) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    float best_s = 0.0f, best_err = INFINITY;
    for (int step = -10; step <= 10; step++) {
        /* map max to lo (the wider end), scaled slightly around it */
        const float iscale = ((float)lo + 0.1f * (float)step) / max;
        float sxq = 0.0f, sqq = 0.0f;
        int8_t t[KN__QK_K];
        for (int i = 0; i < n; i++) {
            float r = nearbyintf(iscale * x[i]);
            r = fminf(fmaxf(r, (float)lo), (float)hi);
            t[i] = (int8_t)r;
            const float w = x[i] * x[i];
            sxq += w * x[i] * r;
            sqq += w * r * r;
        }
        if (sqq <= 0.0f) continue;
        const float s = sxq / sqq;
        float err = 0.0f;
        for (int i = 0; i < n; i++) {
            const float e = x[i] - s * (float)t[i];
            err += x[i] * x[i] * e * e;
        }
        if (err < best_err) {
            best_err = err;
            best_s = s;
            memcpy(q, t, (size_t)n);
        }
    }
    return best_s;
}

void kn__quant_q6_K(const float *src, void *dst, int64_t k) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < k / KN__QK_K; i++, b += KN__Q6_K_BYTES, src += KN__QK_K) {
        float gs[16], smax = 0.0f;
        int8_t q[KN__QK_K];
        for (int g = 0; g < 16; g++) {
            gs[g] = fit_symmetric(src + 16 * g, 16, -32, 31, q + 16 * g);
            if (fabsf(gs[g]) > fabsf(smax)) smax = gs[g];
        }
        int8_t *sc = (int8_t *)(b + 192);
        uint16_t dh = 0;
        if (smax != 0.0f) {
            const float iscale = -128.0f / smax;
            dh = kn_f32_to_fp16(1.0f / iscale);
            for (int g = 0; g < 16; g++) sc[g] = kn__round_q8(iscale * gs[g]);
        } else {
            memset(sc, 0, 16);
        }
        kn__wr16(b + 208, dh);
        /* requantize every weight against the scales as stored */
        const float d = kn__half_to_float(dh);
        int code[KN__QK_K];
        for (int j = 0; j < KN__QK_K; j++) {
            const float gd = d * (float)sc[j / 16];
            float r = gd != 0.0f ? nearbyintf(src[j] / gd) : 0.0f;
            r = fminf(fmaxf(r, -32.0f), 31.0f);
            code[j] = (int)r + 32; /* fmaxf/fminf already mapped NaN into range */
        }
        uint8_t *ql = b, *qh = b + 128;
        for (int n = 0; n < 2; n++)
            for (int l = 0; l < 32; l++) {
                const int *c = code + 128 * n + l;
                ql[64 * n + l] = (uint8_t)((c[0] & 0xF) | (c[64] & 0xF) << 4);
                ql[64 * n + l + 32] = (uint8_t)((c[32] & 0xF) | (c[96] & 0xF) << 4);
                qh[32 * n + l] = (uint8_t)((c[0] >> 4) | (c[32] >> 4) << 2 | (c[64] >> 4) << 4 |
                                           (c[96] >> 4) << 6);
            }
    }
}
