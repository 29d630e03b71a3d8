/* kernels/kn_mxfp4.c — MXFP4 blocks (ggml type 39): 32 e2m1 codes sharing one E8M0 exponent.
 * Dequantization and quantization follow ggml exactly (FORMATS.md §1). */
#include "kernels/kn_internal.h"

const int8_t kn__mxfp4_kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* h(e) = 2^(e-128): bit pattern (e-1) << 23 for e >= 2, the subnormals 2^-127 and 2^-128 below. */
#define H1(e)  ((e) >= 2 ? ((uint32_t)(e) << 23) - (1u << 23) : 0x00200000u << ((e) % 2))
#define H4(e)  H1(e), H1((e) + 1), H1((e) + 2), H1((e) + 3)
#define H16(e) H4(e), H4((e) + 4), H4((e) + 8), H4((e) + 12)
const uint32_t kn__e8m0_half_bits[256] = {
    H16(0),   H16(16),  H16(32),  H16(48),  H16(64),  H16(80),  H16(96),  H16(112),
    H16(128), H16(144), H16(160), H16(176), H16(192), H16(208), H16(224), H16(240)};

void kn__dequant_mxfp4(const void *src, float *dst, int64_t k) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < k / KN__QK32; i++, b += KN__MXFP4_BYTES, dst += KN__QK32) {
        const float h = kn__e8m0_half(b[0]);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)kn__mxfp4_kvalues[b[1 + j] & 0xF] * h;
            dst[j + 16] = (float)kn__mxfp4_kvalues[b[1 + j] >> 4] * h;
        }
    }
}

/* The code whose value is nearest to v (first minimum wins, so 0 encodes as code 0). */
static int nearest_code(float v, float h) {
    int best = 0;
    float best_err = fabsf((float)kn__mxfp4_kvalues[0] * h - v);
    for (int c = 1; c < 16; c++) {
        float err = fabsf((float)kn__mxfp4_kvalues[c] * h - v);
        if (err < best_err) {
            best = c;
            best_err = err;
        }
    }
    return best;
}

/* ggml's rule: e = floor(log2(amax)) - 2 + 127 (0 for an all-zero block), computed with log2f as
 * ggml does so the same libm gives the same bytes. Out-of-range exponents (non-finite or
 * extremely small inputs) are clamped instead of overflowing the byte. */
void kn__quant_mxfp4(const float *src, void *dst, int64_t k) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < k / KN__QK32; i++, b += KN__MXFP4_BYTES, src += KN__QK32) {
        float amax = 0.0f;
        for (int j = 0; j < KN__QK32; j++)
            if (fabsf(src[j]) > amax) amax = fabsf(src[j]);
        uint8_t e = 0;
        if (amax > 0.0f) {
            float fe = floorf(log2f(amax)) - 2.0f + 127.0f;
            e = !(fe >= 0.0f) ? 0 : fe > 255.0f ? 255 : (uint8_t)fe;
        }
        const float h = kn__e8m0_half(e);
        b[0] = e;
        for (int j = 0; j < 16; j++)
            b[1 + j] = (uint8_t)(nearest_code(src[j], h) | nearest_code(src[j + 16], h) << 4);
    }
}
