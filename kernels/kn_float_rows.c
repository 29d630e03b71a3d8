/* kernels/kn_float_rows.c — rows of F32, F16 and BF16: conversions to and from float32. */
#include "kernels/kn_internal.h"

void kn__dequant_f32(const void *src, float *dst, int64_t k) {
    memcpy(dst, src, (size_t)k * 4);
}
void kn__quant_f32(const float *src, void *dst, int64_t k) {
    memcpy(dst, src, (size_t)k * 4);
}

void kn__dequant_f16(const void *src, float *dst, int64_t k) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < k; i++) dst[i] = kn__half_to_float(kn__rd16(p + 2 * i));
}

void kn__quant_f16(const float *src, void *dst, int64_t k) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < k; i++) kn__wr16(p + 2 * i, kn_f32_to_fp16(src[i]));
}

void kn__dequant_bf16(const void *src, float *dst, int64_t k) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < k; i++) dst[i] = kn_bf16_to_f32(kn__rd16(p + 2 * i));
}

void kn__quant_bf16(const float *src, void *dst, int64_t k) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < k; i++) kn__wr16(p + 2 * i, kn_f32_to_bf16(src[i]));
}
