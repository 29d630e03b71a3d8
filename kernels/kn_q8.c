/* kernels/kn_q8.c — 8-bit blocks: Q8_0 (type 8; a weight format and the activation format of MXFP4
 * and Q8_0 weights) and Q8_K (type 15; the activation format of the K-quants). Quantization is
 * ggml's activation rounding in its AVX2 build (FORMATS.md §2). */
#include "kernels/kn_internal.h"

void kn__quant_q8_0_block(const float *x, kn__block_q8_0 *y) {
    float amax = 0.0f;
    for (int j = 0; j < KN__QK32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y->d = kn_f32_to_fp16(d);
    for (int j = 0; j < KN__QK32; j++) y->qs[j] = kn__round_q8(x[j] * id);
}

void kn__quant_q8_0(const float *src, void *dst, int64_t k) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < k / KN__QK32; i++) {
        kn__block_q8_0 blk;
        kn__quant_q8_0_block(src + i * KN__QK32, &blk);
        memcpy(b + i * KN__Q8_0_BYTES, &blk, KN__Q8_0_BYTES);
    }
}

void kn__dequant_q8_0(const void *src, float *dst, int64_t k) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < k / KN__QK32; i++, b += KN__Q8_0_BYTES, dst += KN__QK32) {
        const float d = kn__half_to_float(kn__rd16(b));
        for (int j = 0; j < KN__QK32; j++) dst[j] = (float)(int8_t)b[2 + j] * d;
    }
}

/* Per 256 values: the element of largest magnitude (first wins) sets iscale = -127 / max, so that
 * element becomes -127 and d = 1 / iscale is negative when max is positive. */
void kn__quant_q8_K(const float *src, void *dst, int64_t k) {
    uint8_t *out = dst;
    for (int64_t i = 0; i < k / KN__QK_K; i++, src += KN__QK_K, out += KN__Q8_K_BYTES) {
        kn__block_q8_K y;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < KN__QK_K; j++) {
            if (fabsf(src[j]) > amax) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y, 0, sizeof y);
        } else {
            const float iscale = -127.0f / max;
            for (int j = 0; j < KN__QK_K; j++) y.qs[j] = kn__round_q8(iscale * src[j]);
            for (int g = 0; g < KN__QK_K / 16; g++) {
                int s = 0;
                for (int j = 0; j < 16; j++) s += y.qs[16 * g + j];
                y.bsums[g] = (int16_t)s;
            }
            y.d = 1.0f / iscale;
        }
        memcpy(out, &y, KN__Q8_K_BYTES);
    }
}

void kn__dequant_q8_K(const void *src, float *dst, int64_t k) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < k / KN__QK_K; i++, b += KN__Q8_K_BYTES, dst += KN__QK_K) {
        float d;
        memcpy(&d, b, 4);
        for (int j = 0; j < KN__QK_K; j++) dst[j] = d * (float)(int8_t)b[4 + j];
    }
}
