/* kernels/kn_simd_q4_K_avx512.c — the AVX-512 Q4_K kernels: up to 16 tokens the stored rows
 * streamed (codes decoded in registers once per super-block and applied to every token of a pass
 * of up to 8, with Q6_K's block-sum tree of kn_simd_avx512.h); batches beyond that take the
 * decoded tile of kn_simd_x86_int8.h (256-bit, AVX-512 VNNI). The integer sums are exact and
 * every lane's float work is the canonical one: the bits equal the scalar reference's. */
#include "kernels/kn_simd_avx512.h"

/* ---- Q4_K against a few tokens: the stored row streamed once, decoded in registers ----------- */

/* Word w of the scale vector of code vector q: the scale of the group it holds (q4k_block_sums),
 * taken from a pair of blocks' words (q4k_scales4): [0] the even block's (words 0..7), [1] the odd
 * block's (words 16..23). */
#define Q4_IDX(g) g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g
static const _Alignas(64) uint16_t q4k_scale_idx[2][4][32] = {{{Q4_IDX(0), Q4_IDX(2)},
                                                               {Q4_IDX(1), Q4_IDX(3)},
                                                               {Q4_IDX(4), Q4_IDX(6)},
                                                               {Q4_IDX(5), Q4_IDX(7)}},
                                                              {{Q4_IDX(16), Q4_IDX(18)},
                                                               {Q4_IDX(17), Q4_IDX(19)},
                                                               {Q4_IDX(20), Q4_IDX(22)},
                                                               {Q4_IDX(21), Q4_IDX(23)}}};
#undef Q4_IDX

/* Prepared activation row: the Q8_K blocks as kn_simd_x86.h lays them out (the batch tile of
 * kn_simd_x86_int8.h reads them), then each block's 256 q reordered to meet the codes as they come
 * out of the stored bytes (per 128 values: 0..31, 64..95, 32..63, 96..127: a 64-byte vector of
 * codes holds the low nibbles of two 32-byte runs, groups 2j and 2j + 2, or their high nibbles),
 * then the blocks' d as floats, zero-padded to a multiple of 8, then per 8 blocks (a chunk) the
 * group sums of q the mins multiply, bs_g = bsums[2g] + bsums[2g + 1] (|bs| <= 4064: int16),
 * transposed: vector k (32 bytes; k = 0..3, two to a 64-byte line) holds in dword j the pair
 * (bs_2k, bs_2k+1) of the chunk's block j (zero past the row), so one vpdpwssd multiplies them by
 * 8 blocks' min pairs at once. */
static size_t q4k_qs_off(int64_t k) {
    return kn__align64(kn__x86_q8_K_bytes(k));
}
static size_t q4k_dx_off(int64_t k) {
    return q4k_qs_off(k) + (size_t)(k / KN__QK_K) * KN__QK_K;
}
#define Q4_BS_CHUNK 128 /* bytes of a chunk's group sums */
static size_t q4k_bs_off(int64_t k) {
    return kn__align64(q4k_dx_off(k) + (size_t)(k / KN__QK_K + 7) / 8 * 8 * sizeof(float));
}
static size_t q4k_act_bytes(int64_t k) {
    return q4k_bs_off(k) + (size_t)(k / KN__QK_K + 7) / 8 * Q4_BS_CHUNK;
}

static void q4k_act_prep(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / KN__QK_K;
    kn__x86_prep_q8_K(x, dst, k);
    const kn__block_q8_K *blk = dst;
    uint8_t *q = (uint8_t *)dst + q4k_qs_off(k);
    float *dx = (float *)((uint8_t *)dst + q4k_dx_off(k));
    for (int64_t b = 0; b < nb; b++) {
        static const int from[8] = {0, 2, 1, 3, 4, 6, 5, 7}; /* 32-value runs in kernel order */
        for (int c = 0; c < 8; c++)
            _mm256_storeu_si256((__m256i *)(q + KN__QK_K * b + 32 * c),
                                _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * from[c])));
        dx[b] = blk[b].d;
    }
    for (int64_t b = nb; b < (nb + 7) / 8 * 8; b++) dx[b] = 0.0f;
    uint8_t *bs = (uint8_t *)dst + q4k_bs_off(k);
    memset(bs, 0, (size_t)(nb + 7) / 8 * Q4_BS_CHUNK);
    for (int64_t b = 0; b < nb; b++)
        for (int g = 0; g < 8; g++) {
            const int16_t v = (int16_t)(blk[b].bsums[2 * g] + blk[b].bsums[2 * g + 1]);
            memcpy(bs + Q4_BS_CHUNK * (b / 8) + 32 * (g / 2) + 4 * (b % 8) + 2 * (g % 2), &v,
                   sizeof v);
        }
}

/* The scales and mins of m (1..4) stored super-blocks from blk, four 128-bit lanes at a time (the
 * rule of q4k_scales_mins_v512, which is lane-wise), widened to words: w[0] holds block 0's 8
 * scales (words 0..7) and 8 mins (8..15), then block 1's (16..31); w[1] blocks 2 and 3. Lanes of
 * blocks past m are 0. One unpack for four blocks: the scale work is a good part of a block's
 * instructions at one token. */
static inline __attribute__((always_inline)) void q4k_scales4(const uint8_t *blk, const int m,
                                                              __m512i w[2]) {
    __m512i v = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)(blk + 4)));
    if (m > 1)
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(blk + KN__Q4_K_BYTES + 4)), 1);
    if (m > 2)
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(blk + 2 * KN__Q4_K_BYTES + 4)),
                               2);
    if (m > 3)
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(blk + 3 * KN__Q4_K_BYTES + 4)),
                               3);
    const __m512i lo = _mm512_and_si512(
        _mm512_srlv_epi32(_mm512_shuffle_epi32(v, _MM_PERM_CBCA), _mm512_set4_epi32(4, 0, 0, 0)),
        _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m512i hi =
        _mm512_and_si512(_mm512_srli_epi32(_mm512_shuffle_epi32(v, _MM_PERM_BBAA), 2),
                         _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0));
    const __m512i sm = _mm512_or_si512(lo, hi);
    w[0] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(sm));
    w[1] = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(sm, 1));
}

/* One stored super-block against nt tokens' block b: s[t] gets 16 dword lanes summing to the
 * exact scaled code sum of token t (codes x q by vpmaddubsw, times the group scales by vpdpwssd).
 * w: the words of the block's pair (q4k_scales4), odd: which of the two it is; the scales are
 * spread to the words of the groups they multiply (vpermw). */
static inline __attribute__((always_inline)) void q4k_block_sums(const uint8_t *blk,
                                                                 const uint8_t *const *xq,
                                                                 int64_t b, __m512i *s, __m512i w,
                                                                 const int odd, const int nt) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    kn__x86_prefetch(blk, KN__Q4_K_BYTES);
    /* the 128 bytes of codes loaded once each (the compiler would fold a load into both the mask
     * and the shift of each vector: twice the loads, three of four of them across cache lines) */
    __m512i l0 = _mm512_loadu_si512(blk + 16), l1 = _mm512_loadu_si512(blk + 80);
    __asm__("" : "+v"(l0), "+v"(l1));
    /* c[q]: groups g(q) (bytes 0..31) and g(q) + 2 (32..63), g = 0, 1, 4, 5 */
    const __m512i c[4] = {_mm512_and_si512(l0, m4), _mm512_and_si512(_mm512_srli_epi16(l0, 4), m4),
                          _mm512_and_si512(l1, m4), _mm512_and_si512(_mm512_srli_epi16(l1, 4), m4)};
    __m512i sv[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++)
        sv[q] = _mm512_permutexvar_epi16(_mm512_load_si512(q4k_scale_idx[odd][q]), w);
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m512i *q = (const __m512i *)(xq[t] + KN__QK_K * b);
        /* one or two tokens: two chains of two, so a block's sum waits for half the latency;
         * each chain starts with a plain multiply-add (no zeroed accumulator) */
        __m512i acc = _mm512_madd_epi16(_mm512_maddubs_epi16(c[0], _mm512_load_si512(q)), sv[0]);
        __m512i acc2 =
            nt <= 2 ? _mm512_madd_epi16(_mm512_maddubs_epi16(c[1], _mm512_load_si512(q + 1)), sv[1])
                    : _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int i = nt <= 2 ? 2 : 1; i < 4; i++) {
            const __m512i p = _mm512_maddubs_epi16(c[i], _mm512_load_si512(q + i));
            if (nt <= 2 && i % 2)
                acc2 = _mm512_dpwssd_epi32(acc2, p, sv[i]);
            else
                acc = _mm512_dpwssd_epi32(acc, p, sv[i]);
        }
        s[t] = nt <= 2 ? _mm512_add_epi32(acc, acc2) : acc;
    }
}

/* The 8 blocks' min pairs transposed to meet the tokens' group sums (q4k_act_prep): dword j of
 * p[h] holds pair 2h (mins 4h, 4h + 1) of block j, dword 8 + j pair 2h + 1; w[k] holds blocks 2k
 * and 2k + 1 as q4k_scales4 leaves them (their pairs at dwords 4..7 and 12..15). */
static inline __attribute__((always_inline)) void q4k_min_pairs(const __m512i w[4], __m512i p[2]) {
    /* blocks 4h .. 4h + 3: dword 4k + j holds pair k of block 4h + j */
    const __m512i i4 =
        _mm512_setr_epi32(4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31);
    const __m512i lo = _mm512_permutex2var_epi32(w[0], i4, w[1]);
    const __m512i hi = _mm512_permutex2var_epi32(w[2], i4, w[3]);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) { /* pairs 2h and 2h + 1 */
        const int a = 8 * h, c = 8 * h + 4;
        const __m512i idx =
            _mm512_setr_epi32(a, a + 1, a + 2, a + 3, 16 + a, 17 + a, 18 + a, 19 + a, c, c + 1,
                              c + 2, c + 3, 16 + c, 17 + c, 18 + c, 19 + c);
        p[h] = _mm512_permutex2var_epi32(lo, idx, hi);
    }
}

/* A stored row against nt prepared tokens: out[t] = row . token t. Eight super-blocks' sums of a
 * token are reduced together into lanes b % 8, then the two canonical fmas run 8 lanes at once
 * (d * d_x by the code sums, then -(dmin * d_x) by the min sums). Blocks past the row: sums 0, d
 * and dmin 0, which leave a lane (never -0) unchanged. */
static inline __attribute__((always_inline)) void
q4k_few_chunk(const uint8_t *row, const uint8_t *const *xq, const uint8_t *const *bs,
              const float *const *dx, int64_t b0, __m256 *acc, const int nt, const int n) {
    kn__avx512_tree tr[KN__AVX512_FEW];
    __m256i isum[KN__AVX512_FEW];
    __m512i w[4]; /* scales and mins as words, two blocks to a vector */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        if (i % 4 == 0) {
            if (i < n) {
                q4k_scales4(row + i * KN__Q4_K_BYTES, n - i, &w[i / 2]);
            } else {
                w[i / 2] = w[i / 2 + 1] = _mm512_setzero_si512();
            }
        }
        __m512i s[KN__AVX512_FEW];
        if (i < n) {
            q4k_block_sums(row + i * KN__Q4_K_BYTES, xq, b0 + i, s, w[i / 2], i % 2, nt);
        } else {
            for (int t = 0; t < nt; t++) s[t] = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) kn__avx512_tree_add(&tr[t], s[t], i, &isum[t], nt <= 2);
    }
    /* the mins against the group sums: lane j of a token's msum = block j's exact min sum */
    __m512i mp[2];
    q4k_min_pairs(w, mp);
    __m256i msum[KN__AVX512_FEW];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const uint8_t *v = bs[t] + Q4_BS_CHUNK * (b0 / 8);
        const __m512i ms = _mm512_dpwssd_epi32(_mm512_madd_epi16(mp[0], _mm512_load_si512(v)),
                                               mp[1], _mm512_load_si512(v + 64));
        msum[t] = _mm256_add_epi32(_mm512_castsi512_si256(ms), _mm512_extracti64x4_epi64(ms, 1));
    }
    /* d (low half) and dmin (high half) of the n blocks in one gather; 0 past the row */
    const __m256i off = _mm256_setr_epi32(
        0, 1 * KN__Q4_K_BYTES, 2 * KN__Q4_K_BYTES, 3 * KN__Q4_K_BYTES, 4 * KN__Q4_K_BYTES,
        5 * KN__Q4_K_BYTES, 6 * KN__Q4_K_BYTES, 7 * KN__Q4_K_BYTES);
    const __m256i dd = n == 8 ? _mm256_i32gather_epi32((const int *)row, off, 1)
                              : _mm256_mmask_i32gather_epi32(
                                    _mm256_setzero_si256(), (__mmask8)((1u << n) - 1), off, row, 1);
    const __m256 dw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dd));
    const __m256 dmw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dd, 16)));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const __m256 xd = _mm256_loadu_ps(dx[t] + b0);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dw, xd), acc[t]);
        acc[t] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[t]),
                            _mm256_xor_ps(_mm256_mul_ps(dmw, xd), _mm256_set1_ps(-0.0f)), acc[t]);
    }
}

static inline __attribute__((always_inline)) void
q4k_few_row(const uint8_t *row, const uint8_t *const *xp, int64_t k, float *out, const int nt) {
    const int64_t nb = k / KN__QK_K;
    const uint8_t *xq[KN__AVX512_FEW], *bs[KN__AVX512_FEW];
    const float *dx[KN__AVX512_FEW];
    __m256 acc[KN__AVX512_FEW];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        bs[t] = xp[t] + q4k_bs_off(k);
        xq[t] = xp[t] + q4k_qs_off(k);
        dx[t] = (const float *)(xp[t] + q4k_dx_off(k));
        acc[t] = _mm256_setzero_ps();
    }
    int64_t b0 = 0;
    for (; b0 + 8 <= nb; b0 += 8, row += 8 * KN__Q4_K_BYTES)
        q4k_few_chunk(row, xq, bs, dx, b0, acc, nt, 8); /* constant n: no branches, no masks */
    if (b0 < nb) q4k_few_chunk(row, xq, bs, dx, b0, acc, nt, (int)(nb - b0));
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) out[t] = kn__x86_tree8(acc[t]);
}

KN__AVX512_FEW_KIND(q4k)

/* Tokens up to which Q4_K streams its rows (in passes of KN__AVX512_FEW) rather than taking the
 * decoded tile of kn_simd_x86_int8.h. */
#define Q4_FEW_MAX 16

static void rows_q4_K(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                      int64_t n1, void *scratch) {
    if (x->T <= Q4_FEW_MAX)
        kn__x86_few_passes(W, x, Y, ldy, n0, n1, q4k_few, KN__AVX512_FEW);
    else
        kn__avx512_int8_kernel(KN_Q4_K)->rows(W, x, Y, ldy, n0, n1, scratch);
}

static size_t scratch_q4_K(const kn_mat *W, int64_t T) {
    return T > Q4_FEW_MAX ? kn__avx512_int8_kernel(KN_Q4_K)->scratch_bytes(W, T) : 0;
}

const kn__kernel kn__avx512_q4_K = {"avx512-q4_K-q8_K4", q4k_act_bytes, q4k_act_prep, scratch_q4_K,
                                    rows_q4_K};
