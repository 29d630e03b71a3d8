/* kernels/simd_avx512.c — AVX-512 (F, BW, VL, VNNI, VBMI) variants of the streaming T = 1 integer
 * kernels, chosen at run time on CPUs that have them (Ice Lake and later) unless MOEWIRE_AVX512=0.
 * The weights are decoded with byte permutes straight into the interleaved layout of
 * simd_x86.h, 512 bits at a time, and the integer sums are exact, so every block's isum and every
 * lane's float work is the canonical one: the bits equal the scalar reference's. Batches (T > 1)
 * use the AVX2 / AVX-VNNI tile kernels, whose cost is in the per-token dots, not the decode. */
#include "kernels/simd_x86.h"

bool kn_isa_avx512_usable(void) {
    __builtin_cpu_init();
    return kn_isa_avx2_usable() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
}

static atomic_int avx512_on = -1;

int kn_isa_avx512(int on) {
    return kn_x86_variant(&avx512_on, on, kn_isa_avx512_usable, "MOEWIRE_AVX512");
}

/* ---- MXFP4 ----------------------------------------------------------------------------------- */

/* Byte p = 32h + 4j + i of a permute picks byte i of dword h of block j's qs (at 17j + 1 + 4h + i
 * in the window): dwords 0 and 1 of the 8 blocks from a window at the group's start, dwords 2
 * and 3 with the same indices from a window 8 bytes later (both windows stay inside the group's
 * 136 bytes: the last byte is 135). */
static const uint8_t mxfp4_qs_idx[64] = {
#define Q4(j, h) 17 * j + 1 + 4 * h, 17 * j + 2 + 4 * h, 17 * j + 3 + 4 * h, 17 * j + 4 + 4 * h
#define Q32(h)   Q4(0, h), Q4(1, h), Q4(2, h), Q4(3, h), Q4(4, h), Q4(5, h), Q4(6, h), Q4(7, h)
    Q32(0), Q32(1)
#undef Q32
#undef Q4
};
/* Byte 4j picks e of block j (at 17j); the other bytes of each dword are zeroed by the mask. */
static const uint8_t mxfp4_e_idx[64] = {0, 0,  0, 0, 17, 0,  0, 0, 34, 0,   0, 0, 51, 0,  0,
                                        0, 68, 0, 0, 0,  85, 0, 0, 0,  102, 0, 0, 0,  119};
#define KN_MASK_BYTE0_OF_8_DWORDS 0x11111111ull

/* The biased codes (kvalue + 12) repeated 4 times: vpermb reads 6 index bits, so the nibble's
 * neighbours in bits 4-5 select the same value and no mask is needed. */
static const int8_t mxfp4_lut64[64] = {
#define LUT 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0
    LUT, LUT, LUT, LUT
#undef LUT
};

/* One full group of 8 blocks: the exact per-block sums minus the bias (lane j = block j), and
 * the scales d_x * h(e). vscalef computes d_x * 2^(e - 128) with one rounding, which is the
 * correctly rounded product d_x * h(e) (h is exact for every e, subnormals included). */
static inline void mxfp4_group(const uint8_t *row, const __m512i *x, const float *dx,
                               const int32_t *xs, __m256i *isum, __m256 *scale) {
    const __m512i qidx = _mm512_loadu_si512(mxfp4_qs_idx), lut = _mm512_loadu_si512(mxfp4_lut64);
    const __m512i w0 = _mm512_loadu_si512(row), w1 = _mm512_loadu_si512(row + 64);
    const __m512i za = _mm512_permutex2var_epi8(w0, qidx, w1); /* dwords 0, 1 */
    const __m512i zb = _mm512_permutex2var_epi8(_mm512_loadu_si512(row + 8), qidx,
                                                _mm512_loadu_si512(row + 72)); /* dwords 2, 3 */
    const __m512i lo_a = _mm512_permutexvar_epi8(za, lut), lo_b = _mm512_permutexvar_epi8(zb, lut);
    const __m512i hi_a = _mm512_permutexvar_epi8(_mm512_srli_epi16(za, 4), lut);
    const __m512i hi_b = _mm512_permutexvar_epi8(_mm512_srli_epi16(zb, 4), lut);
    /* two chains (latency); the first starts from the bias, -12 * sum(q) per block */
    __m512i s0 = _mm512_zextsi256_si512(_mm256_load_si256((const __m256i *)xs));
    s0 = _mm512_dpbusd_epi32(s0, lo_a, _mm512_load_si512(x));
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo_b, _mm512_load_si512(x + 1));
    s0 = _mm512_dpbusd_epi32(s0, hi_a, _mm512_load_si512(x + 2));
    s1 = _mm512_dpbusd_epi32(s1, hi_b, _mm512_load_si512(x + 3));
    const __m512i s = _mm512_add_epi32(s0, s1); /* lanes j and 8 + j: block j */
    *isum = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    const __m512i e = _mm512_maskz_permutex2var_epi8(KN_MASK_BYTE0_OF_8_DWORDS, w0,
                                                     _mm512_loadu_si512(mxfp4_e_idx), w1);
    const __m256 ef =
        _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm512_castsi512_si256(e), _mm256_set1_epi32(128)));
    *scale = _mm256_scalef_ps(_mm256_load_ps(dx), ef);
}

static float dot_mxfp4_row(const uint8_t *row, const uint8_t *x, int64_t nb, const uint8_t *end) {
    const int64_t ng = (nb + 7) / 8, full = nb / 8;
    const float *dx = (const float *)(x + ng * KN_X86_GROUP_QS);
    const int32_t *xs = (const int32_t *)(dx + ng * 8);
    __m256 acc = _mm256_setzero_ps();
    __m256i isum;
    __m256 scale;
    for (int64_t g = 0; g < full; g++, row += 8 * KN_MXFP4_BYTES) {
        kn_x86_prefetch(row, 8 * KN_MXFP4_BYTES);
        mxfp4_group(row, (const __m512i *)(x + g * KN_X86_GROUP_QS), dx + 8 * g, xs + 8 * g, &isum,
                    &scale);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
    }
    if (full == ng) return kn_x86_tree8(acc);
    /* The tail group reads its window in place when it lies before `end`: blocks past the row
     * meet zero activations (isum 0) and d_x = 0 (scale 0, or a subnormal-free 0 * 2^k). */
    const uint8_t *xt = x + full * KN_X86_GROUP_QS;
    if (end - row >= 8 * KN_MXFP4_BYTES) {
        mxfp4_group(row, (const __m512i *)xt, dx + 8 * full, xs + 8 * full, &isum, &scale);
    } else {
        _Alignas(64) uint8_t pad[8 * KN_MXFP4_BYTES + 56] = {0};
        memcpy(pad, row, (size_t)(nb - 8 * full) * KN_MXFP4_BYTES);
        mxfp4_group(pad, (const __m512i *)xt, dx + 8 * full, xs + 8 * full, &isum, &scale);
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
    return kn_x86_tree8(acc);
}

/* ---- row loops and the kernel table ---------------------------------------------------------- */

static void rows_mxfp4(const kn_mat *W, const kn_act *x, float *Y, int64_t ldy, int64_t n0,
                       int64_t n1, void *scratch) {
    if (x->T > 1) {
        kn_kernel_x86_int8(KN_MXFP4)->rows(W, x, Y, ldy, n0, n1, scratch);
        return;
    }
    const uint8_t *end = kn_x86_mat_end(W);
    for (int64_t n = n0; n < n1; n++)
        Y[n] = dot_mxfp4_row((const uint8_t *)W->data + (size_t)n * W->row_bytes, x->data,
                             W->cols / KN_QK32, end);
}

static size_t scratch_mxfp4(const kn_mat *W, int64_t T) {
    const kn_kernel *k = kn_kernel_x86_int8(KN_MXFP4);
    return T > 1 && k->scratch_bytes ? k->scratch_bytes(W, T) : 0;
}

static const kn_kernel k_mxfp4 = {"avx512-mxfp4-q8_0p", kn_x86_q8_0p_bytes, kn_x86_prep_q8_0p,
                                  scratch_mxfp4, rows_mxfp4};

static const kn_kernel *const kernels[KN_TYPE_COUNT] = {[KN_MXFP4] = &k_mxfp4};

const kn_kernel *kn_kernel_avx512(kn_type t, kn_numerics num) {
    if ((int)t < 0 || t >= KN_TYPE_COUNT || num != KN_NUM_Q8) return NULL;
    return kernels[t];
}
