/* wire/wr_codec_internal.h — the per-ISA bulk converters behind wr_encode / wr_decode. Not for
 * other modules. */
#ifndef WR_CODEC_INTERNAL_H
#define WR_CODEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* AVX2 + F16C versions (wire/wr_codec_avx2.c); only called when kn_isa_active() is AVX2. Each
 * produces exactly the bits of the scalar kernels' conversions (NaN payloads aside). */
void wr__f32_to_f16_avx2(const float *src, size_t n, uint8_t *dst);
void wr__f16_to_f32_avx2(const uint8_t *src, size_t n, float *dst);
void wr__f32_to_bf16_avx2(const float *src, size_t n, uint8_t *dst);
void wr__bf16_to_f32_avx2(const uint8_t *src, size_t n, float *dst);
/* Decode as the two above, and whether any element is NaN or ±Inf (exponent all ones). */
bool wr__f16_to_f32_checked_avx2(const uint8_t *src, size_t n, float *dst);
bool wr__bf16_to_f32_checked_avx2(const uint8_t *src, size_t n, float *dst);
/* wr_first_nonfinite: the same index, 32 values a step. */
size_t wr__first_nonfinite_avx2(const float *x, size_t n);

#endif
