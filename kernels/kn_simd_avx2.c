/* kernels/kn_simd_avx2.c — AVX2+FMA kernels (x86-64), chosen at run time: activation preparation,
 * weight decoding, the float-lane kernels and the AVX2 instantiation of the Q8-mode kernels
 * (kn_simd_x86_int8.h). Every function follows the canonical order of kn_internal.h, so its bits
 * equal the scalar reference's; tests/unit/test_kn_matmul.c checks that with memcmp. */
#include "kernels/kn_exp_x86.h"
#include "kernels/kn_simd_x86.h"

#include <stdatomic.h>
#include <stdlib.h>

bool kn__isa_avx2_usable(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           kn__x86_cpuid_bit(1, 0, 2, 29); /* F16C */
}

/* ---- activation preparation ------------------------------------------------------------------ */

/* Rounds 32 floats v[i] * scale to int8 as kn__round_q8 does: NaN -> 0, saturate to +-127, round
 * half to even (the default MXCSR mode); natural order. */
static inline __m256i round_q8_32(const __m256 v[4], __m256 scale) {
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    __m256i iv[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m256 s = _mm256_mul_ps(v[i], scale);
        s = _mm256_and_ps(s, _mm256_cmp_ps(s, s, _CMP_ORD_Q));
        s = _mm256_min_ps(_mm256_max_ps(s, lo), hi);
        iv[i] = _mm256_cvtps_epi32(s);
    }
    const __m256i p =
        _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* max |v| over n vectors, ignoring NaN (vmaxps returns its second operand when the first is NaN,
 * so the running maximum is never replaced by a NaN) — fmaxf's rule, as the scalar code. */
static inline float amax_ps(const __m256 *v, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i++) m = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), m);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

/* ggml's AVX2 Q8_0 rounding for one block (kn__quant_q8_0_block): d = amax/127 through fp16,
 * q = round-half-even(x * 127/amax). Returns fp16(d) as a float. */
static float quant_block_q8_0(const float *x, __m256i *q) {
    __m256 v[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(x + 8 * i);
    const float amax = amax_ps(v, 4);
    const float d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(amax / 127.0f), 0)));
    *q = round_q8_32(v, _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f));
    return d;
}

static int32_t sum_i8(__m256i q) {
    const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
    return kn__x86_hsum_i32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
}

size_t kn__x86_q8_0p_bytes(int64_t k) {
    return (size_t)kn__x86_groups(k) * (KN__X86_GROUP_QS + 64);
}

/* kn__x86_prep_q8_0p with each block's sum as -bias * sum(q) (bias: the weights' offset, MXFP4's
 * 12 or a flipped Q8_0 sign bit's 128); with m, also each group's 320 bytes of
 * kn__x86_prep_q8_0m at m. */
static void prep_q8_0(const float *x, void *dst, int64_t k, uint8_t *m, int bias) {
    const int64_t nb = k / KN__QK32, ng = kn__x86_groups(k);
    uint8_t *qs = dst;
    float *dx = (float *)(qs + ng * KN__X86_GROUP_QS);
    int32_t *xs = (int32_t *)(dx + ng * 8);
    if (nb % 8) { /* zero the tail group's padding blocks */
        memset(qs + (ng - 1) * KN__X86_GROUP_QS, 0, KN__X86_GROUP_QS);
        for (int64_t b = nb; b < ng * 8; b++) dx[b] = 0.0f, xs[b] = 0;
        if (m) memset(m + (ng - 1) * KN__X86_Q8_0M_GROUP, 0, KN__X86_GROUP_QS);
    }
    for (int64_t b = 0; b < nb; b++) {
        __m256i q;
        dx[b] = quant_block_q8_0(x + b * KN__QK32, &q);
        xs[b] = -bias * sum_i8(q);
        /* dword k of block b goes to lane b % 8 of vector k of its group */
        _Alignas(32) uint32_t d[8];
        _mm256_store_si256((__m256i *)d, q);
        uint8_t *grp = qs + (b / 8) * KN__X86_GROUP_QS + 4 * (b % 8);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) memcpy(grp + 32 * i, &d[i], 4);
        if (m) { /* block j's 8-byte runs into its qword of its set's 4 vectors */
            const int j = (int)(b % 8);
            uint8_t *p =
                m + (b / 8) * KN__X86_Q8_0M_GROUP + 128 * (j / 4) + 16 * (j % 2) + 8 * (j / 2 % 2);
            _mm_storel_epi64((__m128i *)p, _mm256_castsi256_si128(q));             /* 0..7 */
            _mm_storel_epi64((__m128i *)(p + 32), _mm256_extracti128_si256(q, 1)); /* 16..23 */
            _mm_storeh_pd((double *)(p + 64), _mm_castsi128_pd(_mm256_castsi256_si128(q)));
            _mm_storeh_pd((double *)(p + 96),
                          _mm_castsi128_pd(_mm256_extracti128_si256(q, 1))); /* 8..15, 24..31 */
        }
    }
    for (int64_t g = 0; m && g < ng; g++) {
        float *mdx = (float *)(m + g * KN__X86_Q8_0M_GROUP + KN__X86_GROUP_QS);
        int32_t *mxs = (int32_t *)(mdx + 8);
        for (int l = 0; l < 8; l++) {
            mdx[l] = dx[8 * g + kn__x86_pair_lanes[l]];
            mxs[l] = xs[8 * g + kn__x86_pair_lanes[l]];
        }
    }
}

void kn__x86_prep_q8_0p(const float *x, void *dst, int64_t k) {
    prep_q8_0(x, dst, k, NULL, KN__X86_MXFP4_BIAS);
}

size_t kn__x86_q8_0n_bytes(int64_t k) {
    return kn__x86_q8_0p_bytes(k) + (size_t)kn__x86_groups(k) * KN__X86_GROUP_QS;
}

/* After a prepared row's interleaved q, the same q in natural order (block b's 32 at 32 b; zero
 * past the row): the interleaving undone, dword by dword. Always inlined: as a function of its
 * own, GCC 12.2 at -O2 dropped the calls to it (the preparations tail-called prep_q8_0 and the
 * copy was never written). */
static inline __attribute__((always_inline)) void natural_q8_0(void *dst, int64_t k) {
    const int64_t ng = kn__x86_groups(k);
    const uint8_t *qs = dst;
    uint8_t *nat = (uint8_t *)dst + kn__x86_q8_0p_bytes(k);
    for (int64_t b = 0; b < 8 * ng; b++)
        for (int i = 0; i < 8; i++)
            memcpy(nat + 32 * b + 4 * i, qs + (b / 8) * KN__X86_GROUP_QS + 32 * i + 4 * (b % 8), 4);
}

/* kn__x86_prep_q8_0p, then the natural copy of q (AVX2's one-token Q8_0 rows). */
void kn__x86_prep_q8_0n(const float *x, void *dst, int64_t k) {
    kn__x86_prep_q8_0p(x, dst, k);
    natural_q8_0(dst, k);
}

/* The same with each block's sum as -128 * sum(q): AVX-VNNI's Q8_0 rows, whose vpdpbusd takes the
 * weights with their sign bit flipped (w + 128, unsigned) and this sum takes the 128 back. */
void kn__x86_prep_q8_0v(const float *x, void *dst, int64_t k) {
    prep_q8_0(x, dst, k, NULL, 128);
    natural_q8_0(dst, k);
}

size_t kn__x86_q8_0m_bytes(int64_t k) {
    return kn__x86_q8_0p_bytes(k) + (size_t)kn__x86_groups(k) * KN__X86_Q8_0M_GROUP;
}

/* kn__x86_prep_q8_0p, then each group's q in block pairs and its d_x and sums in pair lane order
 * (its tail group's padding zero). */
void kn__x86_prep_q8_0m(const float *x, void *dst, int64_t k) {
    prep_q8_0(x, dst, k, (uint8_t *)dst + kn__x86_q8_0p_bytes(k), KN__X86_MXFP4_BIAS);
}

/* ggml's Q8_K rounding (kn__quant_q8_K): the first element of largest magnitude sets
 * iscale = -127 / max; d = 1 / iscale; bsums per 16 values. */
void kn__x86_prep_q8_K(const float *x, void *dst, int64_t k) {
    kn__block_q8_K *y = dst;
    for (int64_t b = 0; b < k / KN__QK_K; b++, x += KN__QK_K, y++) {
        __m256 v[32];
        for (int i = 0; i < 32; i++) v[i] = _mm256_loadu_ps(x + 8 * i);
        const float amax = amax_ps(v, 32);
        if (amax == 0.0f) {
            memset(y, 0, sizeof *y);
            continue;
        }
        float max = 0.0f;
        const __m256 sign = _mm256_set1_ps(-0.0f), am = _mm256_set1_ps(amax);
        for (int i = 0; i < 32; i++) {
            const int m =
                _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v[i]), am, _CMP_EQ_OQ));
            if (m) {
                max = x[8 * i + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 sc = _mm256_set1_ps(iscale);
        for (int c = 0; c < 8; c++) {
            const __m256i q = round_q8_32(v + 4 * c, sc);
            _mm256_storeu_si256((__m256i *)(y->qs + 32 * c), q);
            /* sums of 16: pairs, then quads, then two horizontal steps per 128-bit half */
            __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q),
                                          _mm256_set1_epi16(1));
            s = _mm256_hadd_epi32(s, s);
            s = _mm256_hadd_epi32(s, s);
            y->bsums[2 * c] = (int16_t)_mm256_cvtsi256_si32(s);
            y->bsums[2 * c + 1] = (int16_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(s, 1));
        }
        y->d = 1.0f / iscale;
    }
}

size_t kn__x86_q8_Ki_bytes(int64_t k) {
    return kn__x86_q8_Ki_qs(k) + (size_t)(k / KN__QK_K) * KN__QK_K;
}

/* kn__x86_prep_q8_K, then each block's q group-interleaved (the Q6_K batch kernels' layout). */
void kn__x86_prep_q8_Ki(const float *x, void *dst, int64_t k) {
    kn__x86_prep_q8_K(x, dst, k);
    const kn__block_q8_K *blk = dst;
    uint8_t *qi = (uint8_t *)dst + kn__x86_q8_Ki_qs(k);
    for (int64_t b = 0; b < k / KN__QK_K; b++) {
        __m256i q[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            q[i] = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * i));
        kn__x86_q6k_interleave(q);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            _mm256_store_si256((__m256i *)(qi + KN__QK_K * b + 32 * i), q[i]);
    }
}

/* The blocks' d of a Q8_K row of k values contiguous at dx, zero-padded to a multiple of 8 (a
 * chunk's 8 in one load): d_bytes(k) bytes. */
static size_t d_bytes(int64_t k) {
    return (size_t)(k / KN__QK_K + 7) / 8 * 8 * sizeof(float);
}
static void copy_d(const kn__block_q8_K *blk, int64_t k, float *dx) {
    const int64_t nb = k / KN__QK_K;
    for (int64_t b = 0; b < (nb + 7) / 8 * 8; b++) dx[b] = b < nb ? blk[b].d : 0.0f;
}

size_t kn__x86_q8_Kn_bytes(int64_t k) {
    return kn__x86_q8_Kn_qp(k) + (size_t)(k / KN__QK_K) * KN__X86_Q8_KN_BLOCK;
}

/* kn__x86_prep_q8_K, then each block's q and bsums again, aligned, the blocks' d, and the blocks
 * again with their q in the packed Q4_K copy's order (the AVX2 Q4_K kernels' layout,
 * kn_simd_x86.h). */
void kn__x86_prep_q8_Kn(const float *x, void *dst, int64_t k) {
    kn__x86_prep_q8_K(x, dst, k);
    const kn__block_q8_K *blk = dst;
    uint8_t *qn = (uint8_t *)dst + kn__x86_q8_Ki_qs(k), *qp = (uint8_t *)dst + kn__x86_q8_Kn_qp(k);
    for (int64_t b = 0; b < k / KN__QK_K;
         b++, qn += KN__X86_Q8_KN_BLOCK, qp += KN__X86_Q8_KN_BLOCK) {
        memcpy(qn, blk[b].qs, KN__QK_K);
        memcpy(qn + KN__QK_K, blk[b].bsums, sizeof blk[b].bsums);
        for (int j = 0; j < 4; j++) {
            __m256i lo, hi;
            kn__x86_q4kp_order(_mm256_loadu_si256((const __m256i *)(blk[b].qs + 64 * j)),
                               _mm256_loadu_si256((const __m256i *)(blk[b].qs + 64 * j + 32)), &lo,
                               &hi);
            _mm256_store_si256((__m256i *)(qp + 64 * j), lo);
            _mm256_store_si256((__m256i *)(qp + 64 * j + 32), hi);
        }
        int16_t gs[16] = {0};
        for (int g = 0; g < 8; g++)
            gs[g] = (int16_t)(blk[b].bsums[2 * g] + blk[b].bsums[2 * g + 1]);
        memcpy(qp + KN__QK_K, gs, sizeof gs);
    }
    copy_d(blk, k, (float *)((uint8_t *)dst + kn__x86_q8_Kn_dx(k)));
}

size_t kn__x86_q8_Kd_bytes(int64_t k) {
    return kn__x86_q8_Ki_bytes(k) + d_bytes(k);
}

/* kn__x86_prep_q8_Ki, then the blocks' d contiguous (the Q6_K streaming kernel's layout). */
void kn__x86_prep_q8_Kd(const float *x, void *dst, int64_t k) {
    kn__x86_prep_q8_Ki(x, dst, k);
    copy_d(dst, k, (float *)((uint8_t *)dst + kn__x86_q8_Ki_bytes(k)));
}

/* ---- weight decoding ------------------------------------------------------------------------- */

size_t kn__x86_mxfp4_row_bytes(int64_t k) {
    return (size_t)kn__x86_groups(k) * (KN__X86_GROUP_QS + 32);
}

/* What decode_groups reads: stored MXFP4 or Q8_0 rows, or a packed MXFP4 copy's (kn_simd_x86.h;
 * its exponents as stored, or as e - 1). */
enum { DEC_MXFP4, DEC_MXFP4P, DEC_MXFP4Q, DEC_Q8_0 };

/* Full groups decoded in registers and stored; a tail group through a zero-padded copy, its
 * missing blocks given scale 0. */
static inline __attribute__((always_inline)) void decode_groups(const uint8_t *row, int64_t k,
                                                                void *dst, const int kind) {
    const int bytes = kind == DEC_Q8_0 ? KN__Q8_0_BYTES : KN__MXFP4_BYTES;
    const bool packed = kind == DEC_MXFP4P || kind == DEC_MXFP4Q, e1 = kind == DEC_MXFP4Q;
    const int64_t nb = k / KN__QK32, ng = kn__x86_groups(k), full = nb / 8;
    __m256i *w = dst;
    float *sc = (float *)((uint8_t *)dst + ng * KN__X86_GROUP_QS);
    for (int64_t g = 0; g < full; g++, row += 8 * bytes, w += 8) {
        __m256i v[8];
        __m256 s;
        if (kind == DEC_Q8_0) {
            kn__x86_q8_0_group(row, v);
            s = kn__x86_q8_0_d(row);
        } else if (packed) {
            kn__x86_mxfp4p_group(row, v);
            s = kn__x86_mxfp4p_h(row, e1);
        } else {
            kn__x86_mxfp4_group(row, v);
            s = kn__x86_mxfp4_h(row);
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) _mm256_store_si256(w + i, v[i]);
        _mm256_store_ps(sc + 8 * g, s);
    }
    if (full < ng) {
        _Alignas(32) uint8_t pad[8 * KN__Q8_0_BYTES] = {0};
        const int left = (int)(nb - 8 * full);
        memcpy(pad, row, (size_t)left * bytes);
        __m256i v[8];
        __m256 s;
        if (kind == DEC_Q8_0) {
            kn__x86_q8_0_group(pad, v);
            s = kn__x86_q8_0_d(pad);
        } else if (packed) {
            kn__x86_mxfp4p_codes(pad, 4 * left, v);
            s = kn__x86_mxfp4p_h8(pad + 16 * left, e1);
        } else {
            kn__x86_mxfp4_group(pad, v);
            s = kn__x86_mxfp4_h(pad);
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) _mm256_store_si256(w + i, v[i]);
        _mm256_store_ps(sc + 8 * full, _mm256_and_ps(s, kn__x86_live_lanes(left)));
    }
}

void kn__x86_decode_mxfp4(const uint8_t *row, int64_t k, void *dst) {
    decode_groups(row, k, dst, DEC_MXFP4);
}

void kn__x86_decode_mxfp4p(const uint8_t *row, int64_t k, void *dst) {
    decode_groups(row, k, dst, DEC_MXFP4P);
}

void kn__x86_decode_mxfp4q(const uint8_t *row, int64_t k, void *dst) {
    decode_groups(row, k, dst, DEC_MXFP4Q);
}

size_t kn__x86_q8_0_row_bytes(int64_t k) {
    return (size_t)kn__x86_groups(k) * (KN__X86_GROUP_QS + 32);
}

/* Q8_0 rows interleaved: an 8 x 8 transpose of each group's blocks' dwords (signed weights). */
void kn__x86_decode_q8_0(const uint8_t *row, int64_t k, void *dst) {
    decode_groups(row, k, dst, DEC_Q8_0);
}

void kn__x86_decode_q6_K(const uint8_t *row, int64_t k, kn__x86_q6k *dst) {
    for (int64_t b = 0; b < k / KN__QK_K; b++, row += KN__Q6_K_BYTES, dst++) {
        __m256i c[8];
        kn__x86_q6k_codes(row, c);
        kn__x86_q6k_interleave(c);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) _mm256_store_si256((__m256i *)(dst->codes + 32 * i), c[i]);
        _mm256_store_si256((__m256i *)dst->sg, kn__x86_q6k_group_scales(row));
        _mm256_store_si256(
            (__m256i *)dst->scm32,
            _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(row + 192))),
                               _mm256_set1_epi16(-32)));
        dst->d = kn__x86_half(row + 208);
    }
}

/* A stored row's super-blocks (or, with `packed`, a packed copy's row, kn_simd_x86.h: its codes
 * back in natural order, kn__x86_q4kp_order undone) as kn__x86_q4k. */
static inline __attribute__((always_inline)) void decode_q4_K(const uint8_t *row, int64_t k,
                                                              kn__x86_q4k *dst, const bool packed) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    /* per 128-bit lane: the even words, then the odd words */
    const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0,
                                           1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    const int64_t nb = k / KN__QK_K;
    for (int64_t b = 0; b < nb; b++, dst++) {
        const uint8_t *blk = row + b * KN__Q4_K_BYTES, *ch = row + b / 8 * 8 * KN__Q4_K_BYTES;
        const int n = nb - b / 8 * 8 < 8 ? (int)(nb - b / 8 * 8) : 8, i = (int)(b % 8);
        const uint8_t *codes = packed ? ch + 16 * n + 128 * i : blk + 16;
        const uint8_t *lo4 = ch + 4 * n + 8 * i, *hb = ch + 12 * n + 4 * i; /* packed scales */
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(codes + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4),
                    hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (packed) { /* lo's even words and hi's are group 2j's, the odd ones group 2j + 1's */
                const __m256i l = _mm256_shuffle_epi8(lo, split),
                              h = _mm256_shuffle_epi8(hi, split);
                lo = _mm256_unpacklo_epi64(l, h);
                hi = _mm256_unpackhi_epi64(l, h);
            }
            __m256i *out = (__m256i *)(dst->codes + 64 * j);
            _mm256_store_si256(out, lo);
            _mm256_store_si256(out + 1, hi);
        }
        uint8_t sc[8], m[8];
        if (packed) kn__x86_q4kp_scales_mins(lo4, hb, sc, m);
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            if (!packed) kn__q4k_scale_min(g, blk + 4, &sc[g], &m[g]);
#pragma GCC unroll 16
            for (int l = 0; l < 16; l++) dst->sc16[g][l] = sc[g];
            dst->m16[2 * g] = dst->m16[2 * g + 1] = m[g];
        }
        dst->d = kn__x86_half(packed ? ch + 2 * i : blk);
        dst->dmin = kn__x86_half(packed ? ch + 2 * n + 2 * i : blk + 2);
    }
}

void kn__x86_decode_q4_K(const uint8_t *row, int64_t k, kn__x86_q4k *dst) {
    decode_q4_K(row, k, dst, false);
}

void kn__x86_decode_q4_Kp(const uint8_t *row, int64_t k, kn__x86_q4k *dst) {
    decode_q4_K(row, k, dst, true);
}

/* ---- MXFP4's packed copy (the AVX2 and AVX-VNNI rows') ------------------------------------- */

/* Part of a stored group's decode exists only because a block is 17 bytes long: the nibble bytes
 * arranged (loads, inserts, unpacks) and the exponents gathered. The packed copy (kn_simd_x86.h)
 * stores each group as kn__x86_mxfp4_gather leaves it and its exponents together, so every T
 * decodes it into the batch layout at once (kn__x86_mxfp4p_codes), and pinned models read it in
 * place of the stored rows (kn_pack_replaces). */

size_t kn__x86_mxfp4p_bytes(const kn_mat *W) {
    return sizeof(kn__pack_hdr) + (size_t)W->rows * W->row_bytes;
}

/* Whether every exponent of W is at least 2 (the packed copy then keeps e - 1). */
static bool exponents_e2(const kn_mat *W) {
    for (int64_t r = 0; r < W->rows; r++) {
        const uint8_t *src = (const uint8_t *)W->data + (size_t)r * W->row_bytes;
        for (int64_t b = 0; b < W->cols / KN__QK32; b++)
            if (src[b * KN__MXFP4_BYTES] < 2) return false;
    }
    return true;
}

/* n blocks (8: a full group) at in in the packed layout at out, dword k of block j at 4nk + 4j
 * (a full group's is kn__x86_mxfp4_gather's order), then the exponents (ctx: as e - 1). */
static void pack_blocks(const uint8_t *in, uint8_t *out, int n, const void *ctx) {
    const uint8_t e1 = *(const bool *)ctx;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < n; j++)
            memcpy(out + 4 * n * k + 4 * j, in + KN__MXFP4_BYTES * j + 1 + 4 * k, 4);
    for (int j = 0; j < n; j++) out[16 * n + j] = (uint8_t)(in[j * KN__MXFP4_BYTES] - e1);
}
static void pack_group(const uint8_t *in, uint8_t *out, const void *ctx) {
    pack_blocks(in, out, 8, ctx);
}

void kn__x86_mxfp4p_pack(const kn_mat *W, void *dst) {
    const bool e1 = exponents_e2(W);
    kn__pack_groups(W, dst, e1 ? KN__X86_MXFP4Q_MAGIC : KN__X86_MXFP4P_MAGIC, KN__MXFP4_BYTES,
                    pack_group, pack_blocks, &e1);
}

static const kn__packer pack_mxfp4 = {kn__x86_mxfp4p_bytes, kn__x86_mxfp4p_pack, true};

/* ---- Q4_K's packed copy (the AVX2 and AVX-VNNI rows') -------------------------------------- */

/* The stored codes take 8 vpmaddwd a super-block, one per group, each with its scale broadcast
 * to every word, and the stored scales' unpack and copy about a fifth of the instructions. The
 * packed copy (kn_simd_x86.h) orders the codes so that one vpmaddwd scales two groups and keeps
 * each chunk's scales, mins, d and dmin together, and pinned models read it in place of the
 * stored rows (kn_pack_replaces). */

size_t kn__x86_q4kp_bytes(const kn_mat *W) {
    return sizeof(kn__pack_hdr) + (size_t)W->rows * W->row_bytes;
}

/* A chunk of n stored super-blocks at in in the packed layout at out. */
static void q4kp_chunk(const uint8_t *in, uint8_t *out, int n) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int i = 0; i < n; i++, in += KN__Q4_K_BYTES) {
        memcpy(out + 2 * i, in, 2);
        memcpy(out + 2 * n + 2 * i, in + 2, 2);
        uint8_t *lo = out + 4 * n + 8 * i, *hb = out + 12 * n + 4 * i;
        memset(hb, 0, 4);
        for (int g = 0; g < 8; g++) {
            uint8_t sc, m;
            kn__q4k_scale_min(g, in + 4, &sc, &m);
            lo[g] = (uint8_t)((sc & 0xF) | (m & 0xF) << 4);
            hb[g % 4] |= (uint8_t)((sc >> 4) << (2 * (g / 4)) | (m >> 4) << (4 + 2 * (g / 4)));
        }
        for (int j = 0; j < 4; j++) {
            const __m256i c = _mm256_loadu_si256((const __m256i *)(in + 16 + 32 * j));
            __m256i a, b;
            kn__x86_q4kp_order(_mm256_and_si256(c, m4),
                               _mm256_and_si256(_mm256_srli_epi16(c, 4), m4), &a, &b);
            _mm256_storeu_si256((__m256i *)(out + 16 * n + 128 * i + 32 * j),
                                _mm256_or_si256(a, _mm256_slli_epi16(b, 4)));
        }
    }
}

void kn__x86_q4kp_pack(const kn_mat *W, void *dst) {
    uint8_t *rows = kn__pack_start(W, dst, KN__X86_Q4KP_MAGIC);
    const int64_t nb = W->cols / KN__QK_K;
    const size_t stored = kn_row_size(W->type, W->cols);
    for (int64_t r = 0; r < W->rows; r++) {
        uint8_t *q = rows + (size_t)r * W->row_bytes;
        const uint8_t *src = (const uint8_t *)W->data + (size_t)r * W->row_bytes;
        for (int64_t b = 0; b < nb; b += 8)
            q4kp_chunk(src + b * KN__Q4_K_BYTES, q + b * KN__Q4_K_BYTES,
                       nb - b < 8 ? (int)(nb - b) : 8);
        memset(q + stored, 0, W->row_bytes - stored);
    }
}

static const kn__packer pack_q4_K = {kn__x86_q4kp_bytes, kn__x86_q4kp_pack, true};

const kn__packer *kn__packer_avx2(kn_type t) {
    return t == KN_MXFP4 ? &pack_mxfp4 : t == KN_Q4_K ? &pack_q4_K : NULL;
}

/* ---- the AVX2 instantiation of the Q8-mode kernels ------------------------------------------- */

#define KN__X86_NAME(id)      id##_avx2
#define KN__X86_LABEL         "avx2"
#define KN__DPWSSD(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))

/* Sum over k of w[k] . x[k] per block lane for MXFP4 codes (u8 <= 24): each vpmaddubsw lane is at
 * most 2 * 24 * 127 = 6096, so four of them add in int16 before one vpmaddwd. */
static inline __m256i sum8_small_avx2(const __m256i *w, const __m256i *x) {
    const __m256i one = _mm256_set1_epi16(1);
    __m256i h[2];
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        const __m256i *a = w + 4 * i, *b = x + 4 * i;
        const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(a[0], _mm256_load_si256(b)),
                                             _mm256_maddubs_epi16(a[1], _mm256_load_si256(b + 1)));
        const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(a[2], _mm256_load_si256(b + 2)),
                                             _mm256_maddubs_epi16(a[3], _mm256_load_si256(b + 3)));
        h[i] = _mm256_madd_epi16(_mm256_add_epi16(s01, s23), one);
    }
    return _mm256_add_epi32(h[0], h[1]);
}

/* The same for signed int8 weights: |w| against sign(x, w), one vpmaddwd per vector. */
static inline __m256i sum8_signed_avx2(const __m256i *w, const __m256i *x) {
    const __m256i one = _mm256_set1_epi16(1);
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const __m256i wk = _mm256_load_si256(w + k);
        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wk, wk),
                                               _mm256_sign_epi8(_mm256_load_si256(x + k), wk));
        acc[k % 2] = _mm256_add_epi32(acc[k % 2], _mm256_madd_epi16(p, one));
    }
    return _mm256_add_epi32(acc[0], acc[1]);
}
#include "kernels/kn_simd_x86_int8.h"
#include "kernels/kn_simd_x86_stream.h"

/* ---- float lanes ----------------------------------------------------------------------------- */

/* Loads 8 floats of w or x at k .. k+7, zero past n (no read beyond n). */
static inline __m256 load_tail(const float *p, int64_t k, int64_t n) {
    const int64_t left = n - k;
    if (left >= 8) return _mm256_loadu_ps(p + k);
    if (left <= 0) return _mm256_setzero_ps();
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), idx);
    return _mm256_maskload_ps(p + k, mask);
}

/* kn__lanes2_fn: elements [k0, k1) of w against nt <= 2 tokens into their 32-lane arrays; four
 * accumulators per token hold lanes 0..7, 8..15, 16..23, 24..31. */
static void lanes2_avx2(const float *w, const float *const *x, int nt, int64_t k0, int64_t k1,
                        int64_t n, float *const *acc) {
    __m256 a[2][4];
#pragma GCC unroll 2
    for (int t = 0; t < 2; t++)
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) a[t][i] = _mm256_loadu_ps(acc[t] + 8 * i);
    int64_t k = k0;
    if (nt == 2) {
        for (; k + 32 <= k1; k += 32)
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const __m256 wv = _mm256_loadu_ps(w + k + 8 * i);
                a[0][i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[0] + k + 8 * i), a[0][i]);
                a[1][i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[1] + k + 8 * i), a[1][i]);
            }
    } else {
        for (; k + 32 <= k1; k += 32)
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                a[0][i] = _mm256_fmadd_ps(_mm256_loadu_ps(w + k + 8 * i),
                                          _mm256_loadu_ps(x[0] + k + 8 * i), a[0][i]);
    }
    if (k < k1) /* the last, partial 32 of the row: zeros past n leave the lanes unchanged */
        for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                a[t][i] = _mm256_fmadd_ps(load_tail(w, k + 8 * i, n), load_tail(x[t], k + 8 * i, n),
                                          a[t][i]);
    for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) _mm256_storeu_ps(acc[t] + 8 * i, a[t][i]);
}

/* kn__row_f32_fn: a stored row of n values of `type` as floats (exact: the type's dequantization).
 */
static void row_to_f32(const uint8_t *src, kn_type type, int64_t n, float *dst) {
    int64_t k = 0;
    switch (type) {
    case KN_F16:
        for (; k + 8 <= n; k += 8)
            _mm256_storeu_ps(dst + k,
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * k))));
        for (; k < n; k++) dst[k] = kn__half_to_float(kn__rd16(src + 2 * k));
        break;
    case KN_BF16:
        for (; k + 8 <= n; k += 8) {
            const __m256i v =
                _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + 2 * k)));
            _mm256_storeu_ps(dst + k, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
        }
        for (; k < n; k++) dst[k] = kn_bf16_to_f32(kn__rd16(src + 2 * k));
        break;
    case KN_MXFP4: {
        const __m128i tbl = _mm_loadu_si128((const __m128i *)kn__mxfp4_kvalues);
        const __m128i m4 = _mm_set1_epi8(0x0F);
        for (int64_t b = 0; b < n / KN__QK32; b++, src += KN__MXFP4_BYTES) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(src + 1));
            const __m128i v[2] = {_mm_shuffle_epi8(tbl, _mm_and_si128(q, m4)),
                                  _mm_shuffle_epi8(tbl, _mm_and_si128(_mm_srli_epi16(q, 4), m4))};
            const __m256 h = _mm256_set1_ps(kn__e8m0_half(src[0]));
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const __m128i part = i & 1 ? _mm_srli_si128(v[i / 2], 8) : v[i / 2];
                const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part));
                _mm256_storeu_ps(dst + 32 * b + 8 * i, _mm256_mul_ps(f, h));
            }
        }
        break;
    }
    default:
        kn_traits(type)->to_float(src, dst, n);
        break;
    }
}

/* Float lanes: each row (as floats: directly for F32, converted into scratch otherwise) against
 * the tokens two at a time. */
KN__ROWS_FLOAT(rows_float_avx2, row_to_f32, lanes2_avx2)

static void prep_round_f16(const float *x, void *dst, int64_t k) {
    float *y = dst;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), 0)));
    for (; i < k; i++) y[i] = kn__half_to_float(kn_f32_to_fp16(x[i]));
}

/* ---- GLU: kn_expf, kn_tanhf and the policies of kn_glu.c, 8 values at a time, the same steps */

/* kn_tanhf: both branches computed, the scalar one's selected. */
static inline __m256 tanh8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f), a = _mm256_andnot_ps(sign, x);
    const __m256 a2 = _mm256_mul_ps(a, a);
    __m256 p = _mm256_set1_ps(KN_TANH_C15);
    p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(KN_TANH_C13));
    p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(KN_TANH_C11));
    p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(KN_TANH_C9));
    p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(KN_TANH_C7));
    p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(KN_TANH_C5));
    p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(KN_TANH_C3));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(a2, a), p, a);
    const __m256 e = kn_x86_exp8(_mm256_add_ps(a, a));
    const __m256 big =
        _mm256_sub_ps(_mm256_set1_ps(1.0f),
                      _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    const __m256 r =
        _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(KN_TANH_SMALL), _CMP_LT_OQ));
    return _mm256_or_ps(_mm256_andnot_ps(sign, r), _mm256_and_ps(sign, x)); /* copysignf */
}

static __m256 silu8(__m256 g, __m256 u, const kn_glu *glu) {
    (void)glu;
    const __m256 ex = kn_x86_exp8(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), ex)), u);
}

/* compare-and-select keeps NaN a NaN, as the scalar ternaries */
static __m256 swiglu_oai8(__m256 g, __m256 u, const kn_glu *glu) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 lim = _mm256_set1_ps(glu->limit), nlim = _mm256_set1_ps(-glu->limit);
    g = _mm256_blendv_ps(g, lim, _mm256_cmp_ps(g, lim, _CMP_GT_OQ));
    const __m256 below = _mm256_cmp_ps(u, nlim, _CMP_LT_OQ);
    u = _mm256_blendv_ps(u, lim, _mm256_cmp_ps(u, lim, _CMP_GT_OQ));
    u = _mm256_blendv_ps(u, nlim, below); /* the lower clamp wins, as in kn_glu.c */
    const __m256 ex = kn_x86_exp8(
        _mm256_xor_ps(_mm256_mul_ps(_mm256_set1_ps(glu->alpha), g), _mm256_set1_ps(-0.0f)));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, ex)), _mm256_add_ps(u, one));
}

static __m256 situ8(__m256 g, __m256 u, const kn_glu *glu) {
    const __m256 beta = _mm256_set1_ps(glu->beta), lbeta = _mm256_set1_ps(glu->lbeta);
    const __m256 ex = kn_x86_exp8(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));
    const __m256 gate = _mm256_div_ps(_mm256_mul_ps(beta, tanh8(_mm256_div_ps(g, beta))),
                                      _mm256_add_ps(_mm256_set1_ps(1.0f), ex));
    if (glu->lbeta > 0.0f) u = _mm256_mul_ps(lbeta, tanh8(_mm256_div_ps(u, lbeta)));
    return _mm256_mul_ps(gate, u);
}

/* One loop per kind, so each body is inlined into its own loop. */
#define GLU8_LOOP(name, body)                                                                      \
    static void name(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n8) {  \
        for (int64_t i = 0; i < n8; i += 8)                                                        \
            _mm256_storeu_ps(out + i, body(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i), glu));  \
    }
GLU8_LOOP(silu_rows, silu8)
GLU8_LOOP(swiglu_oai_rows, swiglu_oai8)
GLU8_LOOP(situ_rows, situ8)

static void (*const glu_rows[KN_GLU_COUNT])(const kn_glu *, const float *, const float *, float *,
                                            int64_t) = {
    [KN_GLU_SWIGLU] = silu_rows, [KN_GLU_SWIGLU_OAI] = swiglu_oai_rows, [KN_GLU_SITU] = situ_rows};

void kn__glu_apply_avx2(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n) {
    const int64_t n8 = n / 8 * 8;
    glu_rows[glu->kind](glu, g, u, out, n8);
    kn__glu_apply_ref(glu, g + n8, u + n8, out + n8, n - n8);
}

/* ---- the AVX2 kernel table ------------------------------------------------------------------- */

KN__FLOAT_KERNELS(avx2, kn__scratch_float, rows_float_avx2, prep_round_f16);
static const kn__kernel *const rounded_kernels[KN_TYPE_COUNT] = {KN__ROUNDED_ROWS(avx2)};

const kn__kernel *kn__kernel_avx2(kn_type t, kn_numerics num) {
    const kn_type_traits *tr = kn_traits(t);
    if (!tr || !tr->can_compute) return NULL;
    if (num == KN_NUM_Q8) {
        if (xs_kernel_avx2(t)) return xs_kernel_avx2(t);
        if (rounded_kernels[t]) return rounded_kernels[t];
    }
    return &avx2_float;
}
