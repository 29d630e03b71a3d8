/* kernels/kn_fp16.c — exact IEEE binary16 and bfloat16 conversions (subnormals, infinities and NaN
 * included), written with integer arithmetic so every ISA and compiler gives the same bits. */
#include "kernels/kn_internal.h"

float kn_fp16_to_f32(uint16_t h) {
    return kn__half_to_float(h);
}

uint16_t kn_f32_to_fp16(float f) {
    uint32_t x = kn__f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xFFu;
    uint32_t man = x & 0x7FFFFFu;
    if (exp == 0xFF) /* inf stays inf; NaN stays a quiet NaN with its top payload bits (as F16C) */
        return (uint16_t)(sign | 0x7C00u | (man ? 0x200u | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1F) return (uint16_t)(sign | 0x7C00u); /* too large: inf */
    if (e <= 0) {
        /* subnormal half (or zero): shift the full significand, round to nearest even */
        if (e < -10) return sign; /* below half the smallest subnormal: +-0 */
        uint32_t m = man | 0x800000u;
        int shift = 14 - e; /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q); /* q may carry into the smallest normal: still correct */
    }
    uint32_t q = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++; /* may round up to inf: correct */
    return (uint16_t)(sign | q);
}

float kn_bf16_to_f32(uint16_t b) {
    return kn__bits_f32((uint32_t)b << 16);
}

uint16_t kn_f32_to_bf16(float f) {
    uint32_t x = kn__f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
