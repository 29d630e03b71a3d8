/* wire/wr_codec_avx2.c — f16 and bf16 bulk conversion with AVX2 + F16C, for wire/wr_codec.c.
 *
 * f16 uses the F16C instructions (round to nearest even, subnormals kept). bf16 rounds in integer
 * arithmetic exactly as kn_f32_to_bf16 does: add 0x7fff plus the lowest kept bit, keep the upper
 * half; a NaN keeps its upper half with the quiet bit set. Tails go through the scalar kernels. */
#include "wire/wr_codec_internal.h"

#include <immintrin.h>
#include <string.h>

#include "kernels/kn.h"

/* Elements [i, n) one at a time, as the scalar kernels convert them. */
static void enc_tail(const float *src, size_t i, size_t n, uint8_t *dst, uint16_t (*cvt)(float)) {
    for (; i < n; i++) {
        uint16_t h = cvt(src[i]);
        memcpy(dst + 2 * i, &h, 2);
    }
}

static void dec_tail(const uint8_t *src, size_t i, size_t n, float *dst, float (*cvt)(uint16_t)) {
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = cvt(h);
    }
}

void wr__f32_to_f16_avx2(const float *src, size_t n, uint8_t *dst) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(dst + 2 * i), h);
    }
    enc_tail(src, i, n, dst, kn_f32_to_fp16);
}

void wr__f16_to_f32_avx2(const uint8_t *src, size_t n, float *dst) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + 2 * i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    dec_tail(src, i, n, dst, kn_fp16_to_f32);
}

/* 8 floats → 8 bf16 values, each in the low half of a 32-bit lane. */
static inline __m256i bf16_round8(__m256i x) {
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, lsb)), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    __m256i quieted = _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet);
    return _mm256_blendv_epi8(rounded, quieted, nan);
}

void wr__f32_to_bf16_avx2(const float *src, size_t n, uint8_t *dst) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = bf16_round8(_mm256_loadu_si256((const __m256i *)(src + i)));
        __m256i b = bf16_round8(_mm256_loadu_si256((const __m256i *)(src + i + 8)));
        /* packus interleaves 128-bit lanes: a0-3 b0-3 a4-7 b4-7; put them back in order. */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256((__m256i *)(dst + 2 * i), p);
    }
    enc_tail(src, i, n, dst, kn_f32_to_bf16);
}

void wr__bf16_to_f32_avx2(const uint8_t *src, size_t n, float *dst) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + 2 * i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(w, 16));
    }
    dec_tail(src, i, n, dst, kn_bf16_to_f32);
}

/* The lanes of 8 floats whose exponent is all ones (NaN or ±Inf). */
static inline __m256i nonfinite8(const float *x) {
    const __m256i exp = _mm256_set1_epi32(0x7f800000);
    __m256i v = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)x), exp);
    return _mm256_cmpeq_epi32(v, exp);
}

size_t wr__first_nonfinite_avx2(const float *x, size_t n) {
    size_t i = 0;
    /* 32 at a time while all are finite (every received row passes here), then the block that
     * holds the first bad one is searched 8 at a time */
    for (; i + 32 <= n; i += 32) {
        __m256i m =
            _mm256_or_si256(_mm256_or_si256(nonfinite8(x + i), nonfinite8(x + i + 8)),
                            _mm256_or_si256(nonfinite8(x + i + 16), nonfinite8(x + i + 24)));
        if (!_mm256_testz_si256(m, m)) break;
    }
    for (; i + 8 <= n; i += 8) {
        const int bits = _mm256_movemask_ps(_mm256_castsi256_ps(nonfinite8(x + i)));
        if (bits) return i + (size_t)__builtin_ctz((unsigned)bits);
    }
    for (; i < n; i++) {
        uint32_t b;
        memcpy(&b, x + i, 4);
        if ((b & 0x7f800000u) == 0x7f800000u) return i;
    }
    return n;
}

/* 8 half-width values at src decoded into dst; returns the lanes whose exponent (bits `exp`) is
 * all ones. f16 converts with F16C, bf16 is the upper half of its float. */
static inline __m128i dec8_checked(const uint8_t *src, float *dst, bool bf16) {
    const __m128i h = _mm_loadu_si128((const __m128i *)src);
    const __m128i exp = _mm_set1_epi16(bf16 ? 0x7f80 : 0x7c00);
    if (bf16)
        _mm256_storeu_si256((__m256i *)dst, _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else
        _mm256_storeu_ps(dst, _mm256_cvtph_ps(h));
    return _mm_cmpeq_epi16(_mm_and_si128(h, exp), exp);
}

static bool dec_checked(const uint8_t *src, size_t n, float *dst, bool bf16,
                        float (*cvt)(uint16_t)) {
    __m128i bad = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) bad = _mm_or_si128(bad, dec8_checked(src + 2 * i, dst + i, bf16));
    bool any = !_mm_testz_si128(bad, bad);
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = cvt(h);
        any |= (h & (bf16 ? 0x7f80 : 0x7c00)) == (bf16 ? 0x7f80 : 0x7c00);
    }
    return any;
}

bool wr__f16_to_f32_checked_avx2(const uint8_t *src, size_t n, float *dst) {
    return dec_checked(src, n, dst, false, kn_fp16_to_f32);
}

bool wr__bf16_to_f32_checked_avx2(const uint8_t *src, size_t n, float *dst) {
    return dec_checked(src, n, dst, true, kn_bf16_to_f32);
}
