/* kernels/simd_avx512.c — the AVX-512 (F, BW, VL, VNNI, VBMI) row of the ISA table, the default
 * on CPUs that have them (Ice Lake and later) unless MOEWIRE_AVX512=0: MXFP4 up to 8 tokens
 * streamed (each stored row read once, its weights decoded with byte permutes straight into the
 * interleaved layout of simd_x86.h and applied to every token in registers: an expert's few rows
 * of a decode batch cost little more than one), MXFP4 and Q8_0 batches beyond that (a tile of rows
 * decoded once, two tokens per 512-bit vector), Q6_K at T = 1 (codes decoded in registers, 512 bits
 * at a time) and Q6_K batches (weights decoded to scaled int16 once per tile, 4 x 4 register tiles
 * of vpdpwssd). The other Q8-mode integer kernels are simd_x86_int8.h with the 256-bit AVX-512
 * VNNI instructions; float kernels come from the AVX2 row. The integer sums are exact, so every
 * block's isum and every lane's float work is the canonical one: the bits equal the scalar
 * reference's. */
#include "kernels/simd_x86.h"

bool kn_isa_avx512_usable(void) {
    __builtin_cpu_init();
    return kn_isa_avx2_usable() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
}

/* ---- the 256-bit integer kernels (simd_x86_int8.h) with AVX-512 VNNI ------------------------- */

#define KN_X86_NAME(id)      id##_v512
#define KN_X86_LABEL         "avx512vnni"
#define KN_DPBUSD(acc, a, b) _mm256_dpbusd_epi32((acc), (a), (b))
#define KN_DPWSSD(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
#include "kernels/simd_x86_int8.h"

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

/* One full group of 8 blocks decoded in registers: the biased codes in the interleaved layout of
 * simd_x86.h (w[0] = [dwords 0 | 1] of the 8 blocks' low nibbles, w[1] = [2 | 3], w[2] and w[3]
 * the high nibbles alike: the 256 bytes of kn_x86_decode_mxfp4's group, in order) and the
 * exponents e - 128 as floats (lane j = block j). */
static inline __attribute__((always_inline)) void mxfp4_codes(const uint8_t *row, __m512i w[4],
                                                              __m256 *ef) {
    const __m512i qidx = _mm512_loadu_si512(mxfp4_qs_idx), lut = _mm512_loadu_si512(mxfp4_lut64);
    const __m512i w0 = _mm512_loadu_si512(row), w1 = _mm512_loadu_si512(row + 64);
    const __m512i za = _mm512_permutex2var_epi8(w0, qidx, w1); /* dwords 0, 1 */
    const __m512i zb = _mm512_permutex2var_epi8(_mm512_loadu_si512(row + 8), qidx,
                                                _mm512_loadu_si512(row + 72)); /* dwords 2, 3 */
    w[0] = _mm512_permutexvar_epi8(za, lut);
    w[1] = _mm512_permutexvar_epi8(zb, lut);
    w[2] = _mm512_permutexvar_epi8(_mm512_srli_epi16(za, 4), lut);
    w[3] = _mm512_permutexvar_epi8(_mm512_srli_epi16(zb, 4), lut);
    const __m512i e = _mm512_maskz_permutex2var_epi8(KN_MASK_BYTE0_OF_8_DWORDS, w0,
                                                     _mm512_loadu_si512(mxfp4_e_idx), w1);
    *ef = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm512_castsi512_si256(e), _mm256_set1_epi32(128)));
}

/* A decoded group against one token: the exact per-block sums minus the bias (lane j = block j)
 * and the scales d_x * h(e). vscalef computes d_x * 2^(e - 128) with one rounding, which is the
 * correctly rounded product d_x * h(e) (h is exact for every e, subnormals included). */
static inline __attribute__((always_inline)) void mxfp4_apply(const __m512i w[4], __m256 ef,
                                                              const __m512i *x, const float *dx,
                                                              const int32_t *xs, __m256i *isum,
                                                              __m256 *scale) {
    /* two chains (latency); the first starts from the bias, -12 * sum(q) per block */
    __m512i s0 = _mm512_zextsi256_si512(_mm256_load_si256((const __m256i *)xs));
    s0 = _mm512_dpbusd_epi32(s0, w[0], _mm512_load_si512(x));
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], _mm512_load_si512(x + 1));
    s0 = _mm512_dpbusd_epi32(s0, w[2], _mm512_load_si512(x + 2));
    s1 = _mm512_dpbusd_epi32(s1, w[3], _mm512_load_si512(x + 3));
    const __m512i s = _mm512_add_epi32(s0, s1); /* lanes j and 8 + j: block j */
    *isum = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    *scale = _mm256_scalef_ps(_mm256_load_ps(dx), ef);
}

/* kn_x86_decode_mxfp4 with the byte permutes above: codes, then h(e) = 2^(e - 128) per block
 * (exact: vscalef of 1). The tail group is read in place when its window lies before `end`, as the
 * streaming kernel reads it: its blocks past the row meet zero activations and d_x = 0, so their
 * codes add 0 to the block sums and their scales give d_x * h(e) = 0, as the zero-padded copy
 * (used at the matrix's end) gives. */
static void decode_mxfp4_v512(const uint8_t *row, int64_t k, const uint8_t *end, void *dst) {
    const int64_t nb = k / KN_QK32, ng = kn_x86_groups(k), full = nb / 8;
    uint8_t *q = dst;
    float *sc = (float *)(q + ng * KN_X86_GROUP_QS);
    const __m256 one = _mm256_set1_ps(1.0f);
    __m512i w[4];
    __m256 ef;
    for (int64_t g = 0; g < full; g++, row += 8 * KN_MXFP4_BYTES, q += KN_X86_GROUP_QS) {
        kn_x86_prefetch(row, 8 * KN_MXFP4_BYTES);
        mxfp4_codes(row, w, &ef);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) _mm512_storeu_si512(q + 64 * i, w[i]);
        _mm256_store_ps(sc + 8 * g, _mm256_scalef_ps(one, ef));
    }
    if (full == ng) return;
    _Alignas(64) uint8_t pad[8 * KN_MXFP4_BYTES + 56];
    if (end - row >= 8 * KN_MXFP4_BYTES) {
        mxfp4_codes(row, w, &ef);
    } else {
        memset(pad, 0, sizeof pad);
        memcpy(pad, row, (size_t)(nb - 8 * full) * KN_MXFP4_BYTES);
        mxfp4_codes(pad, w, &ef);
    }
    for (int i = 0; i < 4; i++) _mm512_storeu_si512(q + 64 * i, w[i]);
    _mm256_store_ps(sc + 8 * full, _mm256_scalef_ps(one, ef));
}

/* ---- MXFP4 rows against a few tokens: the stored row streamed once ---------------------------
 *
 * Each group of 8 blocks is decoded in registers once and applied to every token (nt = 1 .. 8):
 * the weights are read from memory once whatever nt, and nothing is stored, so a few tokens (an
 * expert's share of a decode batch) cost little more than one. acc[t] holds token t's block lanes;
 * every block's sum and fma are the canonical ones. */

#define MX_FEW 8 /* tokens the streaming kernel takes at once */

/* One group (decoded from `row`) against nt tokens: g indexes the group in the prepared rows. */
static inline __attribute__((always_inline)) void mx_few_group(const uint8_t *row,
                                                               const uint8_t *const *x, int64_t ng,
                                                               int64_t g, __m256 *acc,
                                                               const int nt) {
    __m512i w[4];
    __m256 ef;
    mxfp4_codes(row, w, &ef);
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const float *dx = (const float *)(x[t] + ng * KN_X86_GROUP_QS);
        const int32_t *xs = (const int32_t *)(dx + ng * 8);
        __m256i isum;
        __m256 scale;
        mxfp4_apply(w, ef, (const __m512i *)(x[t] + g * KN_X86_GROUP_QS), dx + 8 * g, xs + 8 * g,
                    &isum, &scale);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[t]);
    }
}

/* out[t] = row . token t for t < nt (inlined per nt, so the token loops unroll to constants). */
static inline __attribute__((always_inline)) void mx_few_row(const uint8_t *row,
                                                             const uint8_t *const *x, int64_t nb,
                                                             const uint8_t *end, float *out,
                                                             const int nt) {
    const int64_t ng = (nb + 7) / 8, full = nb / 8;
    __m256 acc[MX_FEW];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t g = 0; g < full; g++, row += 8 * KN_MXFP4_BYTES) {
        kn_x86_prefetch(row, 8 * KN_MXFP4_BYTES);
        mx_few_group(row, x, ng, g, acc, nt);
    }
    if (full < ng) {
        /* The tail group reads its window in place when it lies before `end`: blocks past the row
         * meet zero activations (isum 0) and d_x = 0 (scale 0, or a subnormal-free 0 * 2^k). */
        if (end - row >= 8 * KN_MXFP4_BYTES) {
            mx_few_group(row, x, ng, full, acc, nt);
        } else {
            _Alignas(64) uint8_t pad[8 * KN_MXFP4_BYTES + 56] = {0};
            memcpy(pad, row, (size_t)(nb - 8 * full) * KN_MXFP4_BYTES);
            mx_few_group(pad, x, ng, full, acc, nt);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) out[t] = kn_x86_tree8(acc[t]);
}

#define MX_FEW_ROWS(n)                                                                             \
    static void mx_few_rows##n(const kn_mat *W, const uint8_t *const *x, float *Y, int64_t ldy,    \
                               int64_t n0, int64_t n1) {                                           \
        const uint8_t *end = kn_x86_mat_end(W);                                                    \
        for (int64_t r = n0; r < n1; r++) {                                                        \
            float out[MX_FEW];                                                                     \
            mx_few_row((const uint8_t *)W->data + (size_t)r * W->row_bytes, x, W->cols / KN_QK32,  \
                       end, out, n);                                                               \
            for (int t = 0; t < n; t++) Y[t * ldy + r] = out[t];                                   \
        }                                                                                          \
    }
MX_FEW_ROWS(1)
MX_FEW_ROWS(2)
MX_FEW_ROWS(3)
MX_FEW_ROWS(4)
MX_FEW_ROWS(5)
MX_FEW_ROWS(6)
MX_FEW_ROWS(7)
MX_FEW_ROWS(8)
#undef MX_FEW_ROWS

typedef void (*mx_few_fn)(const kn_mat *, const uint8_t *const *, float *, int64_t, int64_t,
                          int64_t);
static const mx_few_fn mx_few[MX_FEW + 1] = {NULL,         mx_few_rows1, mx_few_rows2,
                                             mx_few_rows3, mx_few_rows4, mx_few_rows5,
                                             mx_few_rows6, mx_few_rows7, mx_few_rows8};

/* Rows n0 .. n1 of W against all of x's tokens (x->T <= MX_FEW). */
static void mx_rows_few(const kn_mat *W, const kn_act *x, float *Y, int64_t ldy, int64_t n0,
                        int64_t n1) {
    const uint8_t *xt[MX_FEW];
    for (int64_t t = 0; t < x->T; t++) xt[t] = (const uint8_t *)x->data + (size_t)t * x->stride;
    mx_few[x->T](W, xt, Y, ldy, n0, n1);
}

/* ---- Q6_K batches ------------------------------------------------------------------------------
 *
 * A super-block's weights are decoded once per tile into int16 (code - 32) * scale_g, which is
 * exact (|w| <= 4096), and the activations are kept as int16 too, so one vpdpwssd adds 32
 * products of a (row, token) pair with its group scales already applied: 8 of them per
 * super-block and pair, no bsum correction. The sum of the 16 dword lanes is the block's exact
 * isum (the canonical one), and the float step is the canonical fma into lane b % 8. A micro-tile
 * is 4 rows x 4 tokens: 16 accumulators, reduced together into one vector whose lane 4t + r holds
 * pair (r, t), so the 16 fmas of a super-block are one vector fma. */

#define Q6_R 4 /* rows of a micro-tile */
#define Q6_T 4 /* tokens of a micro-tile */

/* Prepared activation row: the Q8_K blocks as simd_x86.h lays them out, then the same q values
 * as int16 (the batch kernel), then the blocks' d as floats, zero-padded to a multiple of 8 (the
 * T = 1 kernel loads 8 at a time). */
static size_t q6k_q16_off(int64_t k) {
    return kn_align64(kn_x86_q8_K_bytes(k));
}
static size_t q6k_dx_off(int64_t k) {
    return q6k_q16_off(k) + (size_t)(k / KN_QK_K) * KN_QK_K * 2;
}
static size_t q6k_act_bytes(int64_t k) {
    return q6k_dx_off(k) + (size_t)(k / KN_QK_K + 7) / 8 * 8 * sizeof(float);
}

static const int16_t *q6k_act_q16(const void *x, int64_t k) {
    return (const int16_t *)((const uint8_t *)x + q6k_q16_off(k));
}

static void q6k_act_prep(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / KN_QK_K;
    kn_x86_prep_q8_K(x, dst, k);
    const kn_block_q8_K *blk = dst;
    int16_t *q = (int16_t *)q6k_act_q16(dst, k);
    float *dx = (float *)((uint8_t *)dst + q6k_dx_off(k));
    for (int64_t b = 0; b < nb; b++) {
        for (int c = 0; c < 8; c++)
            _mm512_storeu_si512(
                q + KN_QK_K * b + 32 * c,
                _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c))));
        dx[b] = blk[b].d;
    }
    for (int64_t b = nb; b < (nb + 7) / 8 * 8; b++) dx[b] = 0.0f;
}

/* ---- Q6_K at T = 1: the stored row streamed once, decoded in registers -------------------------
 *
 * Per super-block: the 256 codes (0..63) in natural order as four 512-bit vectors, vpmaddubsw
 * against q, vpdpwssd by the group scales, starting from -32 * sum(scale * bsum): 16 dword lanes
 * whose total is the block's exact isum. Eight blocks' vectors are reduced together into lane
 * b % 8 of one vector, and one fma adds isum_b * (d_w * d_x) to each block lane. */

/* Lanes j = 0..7 of the result: the sum of the 16 dwords of a[j] (exact). */
static inline __m256i q6k_reduce8(const __m512i a[8]) {
    __m512i c[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* 128-bit lanes 0-1: a[2i]'s halves summed, 2-3: a[2i + 1]'s */
        c[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(a[2 * i], a[2 * i + 1], 0x44),
                                _mm512_shuffle_i64x2(a[2 * i], a[2 * i + 1], 0xEE));
    /* 128-bit lane k of e0: 4 partial sums of a[k]; of e1: of a[4 + k] */
    const __m512i e0 = _mm512_add_epi32(_mm512_shuffle_i64x2(c[0], c[1], 0x88),
                                        _mm512_shuffle_i64x2(c[0], c[1], 0xDD));
    const __m512i e1 = _mm512_add_epi32(_mm512_shuffle_i64x2(c[2], c[3], 0x88),
                                        _mm512_shuffle_i64x2(c[2], c[3], 0xDD));
    /* lane k: two partials of a[k], then two of a[4 + k] */
    const __m512 g = _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_unpacklo_epi64(e0, e1), _mm512_unpackhi_epi64(e0, e1)));
    /* lane k: a[k], a[4 + k], a[k], a[4 + k] */
    const __m512i h = _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(g, g, 0x88)),
                                       _mm512_castps_si512(_mm512_shuffle_ps(g, g, 0xDD)));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, h));
}

/* One stored super-block against a token: 16 dword lanes summing to its exact isum. */
static inline __m512i q6k_block_sum(const uint8_t *blk, const kn_block_q8_K *x) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    kn_x86_prefetch(blk, KN_Q6_K_BYTES);
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
    const __m512i scz = _mm512_castsi256_si512(sc);
    __m512i acc =
        _mm512_zextsi256_si512(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums),
                                                 _mm256_mullo_epi16(sc, _mm256_set1_epi16(-32))));
#pragma GCC unroll 2
    for (int n = 0; n < 2; n++) {
        /* codes 128n + 0..63: low nibbles of ql[64n ..] with qh bits 0-1 (first 32) and 2-3;
         * codes 128n + 64..127: high nibbles with qh bits 4-5 and 6-7 */
        const __m512i l = _mm512_loadu_si512(blk + 64 * n);
        const __m256i h = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * n));
        const __m512i hz =
            _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
        const __m512i c0 = _mm512_or_si512(_mm512_and_si512(l, m4),
                                           _mm512_and_si512(_mm512_slli_epi16(hz, 4), m30));
        const __m512i c1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                           _mm512_and_si512(hz, m30));
#pragma GCC unroll 2
        for (int j = 0; j < 2; j++) {
            const int q = 2 * n + j; /* elements 64q .. 64q + 63: groups 4q .. 4q + 3 */
            const __m512i p = _mm512_maddubs_epi16(
                j ? c1 : c0, _mm512_loadu_si512((const __m512i *)(x->qs + 64 * q)));
            const __m512i idx = _mm512_add_epi16(
                _mm512_set1_epi16((short)(4 * q)),
                _mm512_srli_epi16(_mm512_set_epi32(0x001f001e, 0x001d001c, 0x001b001a, 0x00190018,
                                                   0x00170016, 0x00150014, 0x00130012, 0x00110010,
                                                   0x000f000e, 0x000d000c, 0x000b000a, 0x00090008,
                                                   0x00070006, 0x00050004, 0x00030002, 0x00010000),
                                  3));
            acc = _mm512_dpwssd_epi32(acc, p, _mm512_permutexvar_epi16(idx, scz));
        }
    }
    return acc;
}

static float q6k_dot_row(const uint8_t *row, const void *xp, int64_t k) {
    const int64_t nb = k / KN_QK_K;
    const kn_block_q8_K *x = xp;
    const float *dx = (const float *)((const uint8_t *)xp + q6k_dx_off(k));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 8, row += 8 * KN_Q6_K_BYTES) {
        const int n = nb - b0 < 8 ? (int)(nb - b0) : 8;
        __m512i s[8];
        _Alignas(16) uint16_t d[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) { /* blocks past the row: isum 0, d_w 0 (and d_x 0) */
            s[i] =
                i < n ? q6k_block_sum(row + i * KN_Q6_K_BYTES, x + b0 + i) : _mm512_setzero_si512();
            d[i] = i < n ? kn_rd16(row + i * KN_Q6_K_BYTES + 208) : 0;
        }
        const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(_mm_load_si128((const __m128i *)d)),
                                           _mm256_loadu_ps(dx + b0));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q6k_reduce8(s)), scale, acc);
    }
    return kn_x86_tree8(acc);
}

/* Decoded tile of Q6_R rows: per super-block b and 32-value chunk c, the rows' 32 int16 weights
 * side by side (w[((8b + c) * Q6_R + r) * 32]), then d_w as float [b][Q6_R]. */
static size_t q6k_tile_bytes(int64_t nb) {
    return (size_t)nb * (8 * Q6_R * 64 + Q6_R * 4);
}

/* Super-block blk of a row into the tile: w points at its chunk 0, chunks Q6_R * 32 apart. */
static inline void q6k_decode16(const uint8_t *blk, int16_t *w) {
    __m256i c[8];
    kn_x86_q6k_codes(blk, c);
    const __m512i sc =
        _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192))));
    /* chunk i: scale 2i in lanes 0..15, 2i + 1 in lanes 16..31 */
    const __m512i half = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    const __m512i off = _mm512_set1_epi16(32);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        const __m512i s =
            _mm512_permutexvar_epi16(_mm512_add_epi16(half, _mm512_set1_epi16((short)(2 * i))), sc);
        const __m512i v = _mm512_sub_epi16(_mm512_cvtepu8_epi16(c[i]), off);
        _mm512_store_si512(w + Q6_R * 32 * i, _mm512_mullo_epi16(v, s));
    }
}

/* The 16 dword lanes of each of a[0..15] summed (exact): lane 4k + m of the result is a[4m + k]. */
static inline __m512i q6k_reduce16(const __m512i a[16]) {
    __m512i c[8], e[4];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) /* 128-bit lanes 0-1: a[2i]'s halves summed, 2-3: a[2i + 1]'s */
        c[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(a[2 * i], a[2 * i + 1], 0x44),
                                _mm512_shuffle_i64x2(a[2 * i], a[2 * i + 1], 0xEE));
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) /* 128-bit lane k: 4 partial sums of a[4j + k] */
        e[j] = _mm512_add_epi32(_mm512_shuffle_i64x2(c[2 * j], c[2 * j + 1], 0x88),
                                _mm512_shuffle_i64x2(c[2 * j], c[2 * j + 1], 0xDD));
    /* lane k: dwords 0-1 partials of a[k] (from e0) / a[8 + k] (e2), 2-3 of a[4 + k] / a[12 + k] */
    const __m512i g0 =
        _mm512_add_epi32(_mm512_unpacklo_epi64(e[0], e[1]), _mm512_unpackhi_epi64(e[0], e[1]));
    const __m512i g1 =
        _mm512_add_epi32(_mm512_unpacklo_epi64(e[2], e[3]), _mm512_unpackhi_epi64(e[2], e[3]));
    const __m512 f0 = _mm512_castsi512_ps(g0), f1 = _mm512_castsi512_ps(g1);
    return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(f0, f1, 0x88)),
                            _mm512_castps_si512(_mm512_shuffle_ps(f0, f1, 0xDD)));
}

/* A micro-tile: Q6_R decoded rows against Q6_T tokens (int16 q and the Q8_K blocks for d_x);
 * out[4t + r] = dot(row r, token t) in the canonical order. */
static void q6k_micro(const int16_t *wt, const float *dw, const int16_t *const xq[Q6_T],
                      const kn_block_q8_K *const xb[Q6_T], int64_t nb, float out[16],
                      kn_x86_pf *pf) {
    __m512 lane[KN_QLANES];
    for (int l = 0; l < KN_QLANES; l++) lane[l] = _mm512_setzero_ps();
    const __m512i tok_idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    for (int64_t b = 0; b < nb; b++) {
        kn_x86_pf_step(pf);
        __m512i acc[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            const int16_t *w = wt + (8 * b + c) * Q6_R * 32;
            __m512i wv[Q6_R], xv[Q6_T];
#pragma GCC unroll 4
            for (int r = 0; r < Q6_R; r++) wv[r] = _mm512_load_si512(w + 32 * r);
#pragma GCC unroll 4
            for (int t = 0; t < Q6_T; t++) xv[t] = _mm512_loadu_si512(xq[t] + KN_QK_K * b + 32 * c);
#pragma GCC unroll 4
            for (int r = 0; r < Q6_R; r++)
#pragma GCC unroll 4
                for (int t = 0; t < Q6_T; t++)
                    acc[Q6_T * r + t] = _mm512_dpwssd_epi32(acc[Q6_T * r + t], wv[r], xv[t]);
        }
        const __m512i isum = q6k_reduce16(acc); /* lane 4t + r: pair (r, t) */
        const __m512 dwv = _mm512_broadcast_f32x4(_mm_loadu_ps(dw + Q6_R * b));
        const __m512 dxv = _mm512_permutexvar_ps(
            tok_idx,
            _mm512_castps128_ps512(_mm_setr_ps(xb[0][b].d, xb[1][b].d, xb[2][b].d, xb[3][b].d)));
        __m512 *l = &lane[b % KN_QLANES];
        *l = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dwv, dxv), *l);
    }
    const __m512 s = _mm512_add_ps(
        _mm512_add_ps(_mm512_add_ps(lane[0], lane[4]), _mm512_add_ps(lane[2], lane[6])),
        _mm512_add_ps(_mm512_add_ps(lane[1], lane[5]), _mm512_add_ps(lane[3], lane[7])));
    _mm512_storeu_ps(out, s);
}

static void q6k_rows_tiled(const kn_mat *W, const kn_act *x, float *Y, int64_t ldy, int64_t n0,
                           int64_t n1, void *scratch) {
    const int64_t nb = W->cols / KN_QK_K;
    int16_t *wt = scratch;
    float *dw = (float *)(wt + nb * 8 * Q6_R * 32);
    for (int64_t r0 = n0; r0 < n1; r0 += Q6_R) {
        const int rn = n1 - r0 < Q6_R ? (int)(n1 - r0) : Q6_R;
        for (int r = 0; r < Q6_R; r++) { /* missing rows repeat the last; not stored */
            const uint8_t *src =
                (const uint8_t *)W->data + (size_t)(r0 + (r < rn ? r : rn - 1)) * W->row_bytes;
            for (int64_t b = 0; b < nb; b++, src += KN_Q6_K_BYTES) {
                q6k_decode16(src, wt + 8 * b * Q6_R * 32 + 32 * r);
                dw[Q6_R * b + r] = kn_x86_half(src + 208);
            }
        }
        const int64_t r2 = n1 - (r0 + rn) < Q6_R ? n1 : r0 + rn + Q6_R; /* the next tile */
        kn_x86_pf pf = kn_x86_pf_rows(W, r0 + rn, r2, (x->T + Q6_T - 1) / Q6_T * nb);
        for (int64_t t0 = 0; t0 < x->T; t0 += Q6_T) {
            const int tn = x->T - t0 < Q6_T ? (int)(x->T - t0) : Q6_T;
            const int16_t *xq[Q6_T];
            const kn_block_q8_K *xb[Q6_T];
            for (int t = 0; t < Q6_T; t++) { /* missing tokens repeat the last; not stored */
                const uint8_t *p =
                    (const uint8_t *)x->data + (size_t)(t0 + (t < tn ? t : tn - 1)) * x->stride;
                xb[t] = (const kn_block_q8_K *)p;
                xq[t] = q6k_act_q16(p, W->cols);
            }
            _Alignas(64) float out[16];
            q6k_micro(wt, dw, xq, xb, nb, out, &pf);
            for (int t = 0; t < tn; t++)
                for (int r = 0; r < rn; r++) Y[(t0 + t) * ldy + r0 + r] = out[Q6_T * t + r];
        }
    }
}

static void rows_q6_K(const kn_mat *W, const kn_act *x, float *Y, int64_t ldy, int64_t n0,
                      int64_t n1, void *scratch) {
    if (x->T > 1) {
        q6k_rows_tiled(W, x, Y, ldy, n0, n1, scratch);
        return;
    }
    for (int64_t n = n0; n < n1; n++)
        Y[n] = q6k_dot_row((const uint8_t *)W->data + (size_t)n * W->row_bytes, x->data, W->cols);
}

static size_t scratch_q6_K(const kn_mat *W, int64_t T) {
    return T > 1 ? q6k_tile_bytes(W->cols / KN_QK_K) : 0;
}

/* ---- MXFP4 batches ------------------------------------------------------------------------------
 *
 * Rows are decoded once per tile into the interleaved layout of simd_x86.h
 * (kn_x86_decode_mxfp4). A 512-bit vector holds one row's group vector in both halves against two
 * tokens' group vectors side by side, so lanes 0..7 are the block lanes of (row, token a) and
 * 8..15 those of (row, token b): vpdpbusd leaves each block's exact sum in its canonical lane, and
 * the float step is one fma for both pairs. Register tile: 4 rows x 2 token pairs. */

#define MX_R 4 /* rows of a register tile */
#define MX_T 4 /* tokens of a register tile (two pairs) */

/* 32 bytes at a and 32 at b as one vector. */
static inline __m512i mx_pair(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

/* 32 bytes at a in both halves. */
static inline __m512i mx_both(const void *a) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)a));
}

/* MX_R decoded rows against 2 * np prepared tokens (np = 1 or 2 pairs): out[r][t] in the
 * canonical order. Inlined into one function per np, so the loops are unrolled to constants. */
static inline __attribute__((always_inline)) void mx_tile(const uint8_t *const w[MX_R],
                                                          const uint8_t *const x[MX_T], int64_t ng,
                                                          float out[MX_R][MX_T], kn_x86_pf *pf,
                                                          const int np) {
    const size_t sc_off = (size_t)ng * KN_X86_GROUP_QS;            /* h(e) of a decoded row */
    const size_t xs_off = sc_off + (size_t)ng * 8 * sizeof(float); /* -12 * sum(q) of a token */
    __m512 acc[MX_R][MX_T / 2];
    for (int r = 0; r < MX_R; r++)
        for (int p = 0; p < np; p++) acc[r][p] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const size_t qo = (size_t)g * KN_X86_GROUP_QS, so = (size_t)g * 8 * sizeof(float);
        kn_x86_pf_step(pf);
        __m512i s[MX_R][MX_T / 2];
#pragma GCC unroll 2
        for (int p = 0; p < np; p++) {
            const __m512i xs = mx_pair(x[2 * p] + xs_off + so, x[2 * p + 1] + xs_off + so);
#pragma GCC unroll 4
            for (int r = 0; r < MX_R; r++) s[r][p] = xs;
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            __m512i xv[MX_T / 2], wv[MX_R];
#pragma GCC unroll 2
            for (int p = 0; p < np; p++)
                xv[p] = mx_pair(x[2 * p] + qo + 32 * k, x[2 * p + 1] + qo + 32 * k);
#pragma GCC unroll 4
            for (int r = 0; r < MX_R; r++) wv[r] = mx_both(w[r] + qo + 32 * k);
#pragma GCC unroll 4
            for (int r = 0; r < MX_R; r++)
#pragma GCC unroll 2
                for (int p = 0; p < np; p++) s[r][p] = _mm512_dpbusd_epi32(s[r][p], wv[r], xv[p]);
        }
#pragma GCC unroll 2
        for (int p = 0; p < np; p++) {
            const __m512 dx =
                _mm512_castsi512_ps(mx_pair(x[2 * p] + sc_off + so, x[2 * p + 1] + sc_off + so));
#pragma GCC unroll 4
            for (int r = 0; r < MX_R; r++)
                acc[r][p] = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(s[r][p]),
                    _mm512_mul_ps(dx, _mm512_castsi512_ps(mx_both(w[r] + sc_off + so))), acc[r][p]);
        }
    }
    for (int r = 0; r < MX_R; r++)
        for (int p = 0; p < np; p++) {
            out[r][2 * p] = kn_x86_tree8(_mm512_castps512_ps256(acc[r][p]));
            out[r][2 * p + 1] = kn_x86_tree8(
                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][p]), 1)));
        }
}

static void mx_micro4(const uint8_t *const w[MX_R], const uint8_t *const x[MX_T], int64_t ng,
                      float out[MX_R][MX_T], kn_x86_pf *pf) {
    mx_tile(w, x, ng, out, pf, 2);
}

/* One or two tokens left: a tile of one pair does half the work of a padded one. */
static void mx_micro2(const uint8_t *const w[MX_R], const uint8_t *const x[MX_T], int64_t ng,
                      float out[MX_R][MX_T], kn_x86_pf *pf) {
    mx_tile(w, x, ng, out, pf, 1);
}

/* Rows of a decoded tile: a multiple of MX_R that keeps it within ~24 KiB of L1. */
static int mx_tile_rows(size_t row_bytes) {
    return kn_x86_tile_rows_by(row_bytes, MX_R);
}

/* Rows n0 .. n1 of W (T > 1): decode(row, k, dst) writes a row's unsigned codes and weight
 * scales in the interleaved layout; the tokens' prepared rows carry the matching bias per block. */
static void mx_rows_tiled(const kn_mat *W, const kn_act *x, float *Y, int64_t ldy, int64_t n0,
                          int64_t n1, void *scratch,
                          void (*decode)(const uint8_t *, int64_t, const uint8_t *, void *)) {
    const int64_t ng = kn_x86_groups(W->cols);
    const size_t rb = kn_x86_mxfp4_row_bytes(W->cols); /* = kn_x86_q8_0_row_bytes */
    const int R = mx_tile_rows(rb);
    const uint8_t *end = kn_x86_mat_end(W);
    for (int64_t r0 = n0; r0 < n1; r0 += R) {
        const int rn = n1 - r0 < R ? (int)(n1 - r0) : R;
        for (int r = 0; r < rn; r++)
            decode((const uint8_t *)W->data + (size_t)(r0 + r) * W->row_bytes, W->cols, end,
                   (uint8_t *)scratch + (size_t)r * rb);
        const int64_t r2 = n1 - (r0 + rn) < R ? n1 : r0 + rn + R; /* the next tile */
        /* the next tile, a few lines per group of the register tiles in between */
        kn_x86_pf pf = kn_x86_pf_rows(W, r0 + rn, r2,
                                      (x->T + MX_T - 1) / MX_T * ((rn + MX_R - 1) / MX_R) * ng);
        for (int64_t t0 = 0; t0 < x->T; t0 += MX_T) {
            const int tn = x->T - t0 < MX_T ? (int)(x->T - t0) : MX_T;
            const uint8_t *xt[MX_T];
            for (int t = 0; t < MX_T; t++) /* missing tokens repeat the last; not stored */
                xt[t] = (const uint8_t *)x->data + (size_t)(t0 + (t < tn ? t : tn - 1)) * x->stride;
            for (int r = 0; r < rn; r += MX_R) {
                const uint8_t *w[MX_R];
                for (int i = 0; i < MX_R; i++) /* missing rows repeat the first; not stored */
                    w[i] = (const uint8_t *)scratch + (size_t)(r + i < rn ? r + i : r) * rb;
                float out[MX_R][MX_T];
                if (tn > 2)
                    mx_micro4(w, xt, ng, out, &pf);
                else
                    mx_micro2(w, xt, ng, out, &pf);
                for (int t = 0; t < tn; t++)
                    for (int i = 0; i < MX_R && r + i < rn; i++)
                        Y[(t0 + t) * ldy + r0 + r + i] = out[i][t];
            }
        }
    }
}

/* ---- row loops and the kernel table ---------------------------------------------------------- */

static void rows_mxfp4(const kn_mat *W, const kn_act *x, float *Y, int64_t ldy, int64_t n0,
                       int64_t n1, void *scratch) {
    if (x->T <= MX_FEW) {
        mx_rows_few(W, x, Y, ldy, n0, n1);
        return;
    }
    mx_rows_tiled(W, x, Y, ldy, n0, n1, scratch, decode_mxfp4_v512);
}

/* A decoded tile's bytes (MXFP4 and Q8_0 decode to layouts of the same size). */
static size_t mx_tile_scratch(const kn_mat *W) {
    const size_t rb = kn_x86_mxfp4_row_bytes(W->cols);
    return rb * (size_t)mx_tile_rows(rb);
}

static size_t scratch_mxfp4(const kn_mat *W, int64_t T) {
    return T > MX_FEW ? mx_tile_scratch(W) : 0; /* the few-token path keeps nothing */
}

/* ---- Q8_0 batches: the MXFP4 register tile with weights made unsigned -------------------------
 *
 * vpdpbusd wants unsigned weights: the decoded int8 weights get +128 (a flip of the sign bit) and
 * the prepared tokens carry -128 * sum(q) per block in place of MXFP4's -12 * sum(q), so every
 * block's sum is still exact. T = 1 uses the 256-bit streaming kernel of simd_x86_int8.h, which
 * reads the same prepared rows and ignores the bias. */

/* One full group of 8 stored Q8_0 blocks (272 bytes) to the interleaved layout, weights made
 * unsigned: the 8 x 8 transpose of the blocks' dwords, 4 blocks' halves per 128-bit lane. */
static inline void q8_0_group_u8(const uint8_t *row, uint8_t *q) {
    __m512i a[4], t[4], v[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) { /* lanes: block j bytes 0..15, 16..31, block j + 4 alike */
        const uint8_t *b = row + KN_Q8_0_BYTES * j + 2;
        a[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b)),
                                  _mm256_loadu_si256((const __m256i *)(b + 4 * KN_Q8_0_BYTES)), 1);
    }
    t[0] = _mm512_unpacklo_epi32(a[0], a[1]);
    t[1] = _mm512_unpackhi_epi32(a[0], a[1]);
    t[2] = _mm512_unpacklo_epi32(a[2], a[3]);
    t[3] = _mm512_unpackhi_epi32(a[2], a[3]);
    v[0] = _mm512_unpacklo_epi64(t[0], t[2]); /* lane L: dword k of the 4 blocks of lane L */
    v[1] = _mm512_unpackhi_epi64(t[0], t[2]);
    v[2] = _mm512_unpacklo_epi64(t[1], t[3]);
    v[3] = _mm512_unpackhi_epi64(t[1], t[3]);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    /* w[k] = lanes 0 and 2 of v[k], w[k + 4] = lanes 1 and 3: stored as [w0 w1] [w2 w3] ... */
    const __m512i o[4] = {_mm512_shuffle_i64x2(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i64x2(v[2], v[3], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i64x2(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)),
                          _mm512_shuffle_i64x2(v[2], v[3], _MM_SHUFFLE(3, 1, 3, 1))};
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) _mm512_storeu_si512(q + 64 * i, _mm512_xor_si512(o[i], flip));
}

/* kn_x86_decode_q8_0 with weights made unsigned: the same layout. The tail group is read in place
 * when it lies before `end`: its blocks past the row meet zero activations (block sums 0) and get
 * scale 0, as in the zero-padded copy used at the matrix's end. */
static void q8_0_decode_u8(const uint8_t *row, int64_t k, const uint8_t *end, void *dst) {
    const int64_t nb = k / KN_QK32, ng = kn_x86_groups(k), full = nb / 8;
    uint8_t *q = dst;
    float *sc = (float *)(q + ng * KN_X86_GROUP_QS);
    for (int64_t g = 0; g < full; g++, row += 8 * KN_Q8_0_BYTES, q += KN_X86_GROUP_QS) {
        kn_x86_prefetch(row, 8 * KN_Q8_0_BYTES);
        q8_0_group_u8(row, q);
        _mm256_store_ps(sc + 8 * g, kn_x86_q8_0_d(row));
    }
    if (full == ng) return;
    const int left = (int)(nb - 8 * full);
    _Alignas(64) uint8_t pad[8 * KN_Q8_0_BYTES];
    if (end - row < 8 * KN_Q8_0_BYTES) {
        memset(pad, 0, sizeof pad);
        memcpy(pad, row, (size_t)left * KN_Q8_0_BYTES);
        row = pad;
    }
    q8_0_group_u8(row, q);
    _mm256_store_ps(sc + 8 * full, _mm256_and_ps(kn_x86_q8_0_d(row), kn_x86_live_lanes(left)));
}

static void q8_0_act_prep(const float *x, void *dst, int64_t k) {
    kn_x86_prep_q8_0p(x, dst, k);
    const int64_t ng = kn_x86_groups(k);
    int32_t *xs = (int32_t *)((uint8_t *)dst + ng * KN_X86_GROUP_QS + ng * 8 * sizeof(float));
    for (int64_t b = 0; b < ng * 8; b++) /* -12 * sum(q) -> -128 * sum(q), exactly */
        xs[b] = xs[b] / KN_X86_MXFP4_BIAS * 128;
}

static void rows_q8_0(const kn_mat *W, const kn_act *x, float *Y, int64_t ldy, int64_t n0,
                      int64_t n1, void *scratch) {
    if (x->T > 1)
        mx_rows_tiled(W, x, Y, ldy, n0, n1, scratch, q8_0_decode_u8);
    else
        rows_q8_0_v512(W, x, Y, ldy, n0, n1, scratch);
}

static size_t scratch_q8_0(const kn_mat *W, int64_t T) {
    if (T > 1) return mx_tile_scratch(W);
    return scratch_q8_0_v512(W, T);
}

static const kn_kernel k_mxfp4 = {"avx512-mxfp4-q8_0p", kn_x86_q8_0p_bytes, kn_x86_prep_q8_0p,
                                  scratch_mxfp4, rows_mxfp4};

static const kn_kernel k_q6_K = {"avx512-q6_K-q8_K16", q6k_act_bytes, q6k_act_prep, scratch_q6_K,
                                 rows_q6_K};

static const kn_kernel k_q8_0 = {"avx512-q8_0-q8_0p", kn_x86_q8_0p_bytes, q8_0_act_prep,
                                 scratch_q8_0, rows_q8_0};

static const kn_kernel *const kernels[KN_TYPE_COUNT] = {
    [KN_MXFP4] = &k_mxfp4, [KN_Q8_0] = &k_q8_0, [KN_Q6_K] = &k_q6_K};

const kn_kernel *kn_kernel_avx512(kn_type t, kn_numerics num) {
    if ((int)t < 0 || t >= KN_TYPE_COUNT || num != KN_NUM_Q8) return NULL;
    return kernels[t] ? kernels[t] : int8_kernels_v512[t];
}
