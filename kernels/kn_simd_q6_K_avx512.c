/* kernels/kn_simd_q6_K_avx512.c — the AVX-512 Q6_K kernels: up to 12 tokens the stored rows
 * streamed (codes decoded in registers once per super-block and applied to every token of a pass
 * of up to 8), batches beyond that by a tile of rows decoded to scaled int16 once (4 x 4 register
 * tiles of vpdpwssd). The integer sums are exact and every lane's float work is the canonical
 * one: the bits equal the scalar reference's. */
#include "kernels/kn_simd_avx512.h"

/* ---- Q6_K: the activation rows --------------------------------------------------------------- */

/* Prepared activation row: the Q8_K blocks as kn_simd_x86.h lays them out, then the same q values
 * as int16 (the batch tile), then the blocks' d as floats, zero-padded to a multiple of 8 (the
 * streaming kernel loads 8 at a time). */
static size_t q6k_q16_off(int64_t k) {
    return kn__align64(kn__x86_q8_K_bytes(k));
}
static size_t q6k_dx_off(int64_t k) {
    return q6k_q16_off(k) + (size_t)(k / KN__QK_K) * KN__QK_K * 2;
}
static size_t q6k_act_bytes(int64_t k) {
    return q6k_dx_off(k) + (size_t)(k / KN__QK_K + 7) / 8 * 8 * sizeof(float);
}

static const int16_t *q6k_act_q16(const void *x, int64_t k) {
    return (const int16_t *)((const uint8_t *)x + q6k_q16_off(k));
}

static void q6k_act_prep(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / KN__QK_K;
    kn__x86_prep_q8_K(x, dst, k);
    const kn__block_q8_K *blk = dst;
    int16_t *q = (int16_t *)q6k_act_q16(dst, k);
    float *dx = (float *)((uint8_t *)dst + q6k_dx_off(k));
    for (int64_t b = 0; b < nb; b++) {
        for (int c = 0; c < 8; c++)
            _mm512_storeu_si512(
                q + KN__QK_K * b + 32 * c,
                _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c))));
        dx[b] = blk[b].d;
    }
    for (int64_t b = nb; b < (nb + 7) / 8 * 8; b++) dx[b] = 0.0f;
}

/* ---- Q6_K against a few tokens: the stored row streamed once, decoded in registers ----------- */

/* Per super-block: the 256 codes (0..63) in natural order as four 512-bit vectors and the group
 * scales spread to match, decoded once and applied to every token (nt = 1 .. 8): vpmaddubsw
 * against the token's q, vpdpwssd by the scales, starting from -32 * sum(scale * bsum): 16 dword
 * lanes whose total is the block's exact isum. Eight blocks' vectors of a token are reduced
 * together into lane b % 8 of one vector, and one fma adds isum_b * (d_w * d_x) to each block
 * lane: the canonical order, so a row gets the same bits at any nt. The weights are read from
 * memory once whatever nt, so an expert's few rows of a decode batch cost little more than one
 * (the batch tile below pays its int16 decode per tile of 4 rows and computes whole blocks of 4
 * tokens, which a few tokens do not repay). */

/* Tokens up to which it runs (in two passes beyond KN__AVX512_FEW) rather than the batch tile: up
 * to here the rows read once per pass cost less than the tile's decode and padded token blocks; by
 * 16 tokens the tile's reuse pays for them. */
#define Q6_FEW_MAX 12

/* One stored super-block against nt tokens' block b: s[t] gets 16 dword lanes summing to the
 * exact isum of token t. */
static inline __attribute__((always_inline)) void q6k_block_sums(const uint8_t *blk,
                                                                 const kn__block_q8_K *const *x,
                                                                 int64_t b, __m512i *s,
                                                                 const int nt) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    kn__x86_prefetch(blk, KN__Q6_K_BYTES);
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
    const __m256i scm = _mm256_mullo_epi16(sc, _mm256_set1_epi16(-32));
    const __m512i scz = _mm512_castsi256_si512(sc);
    __m512i c[4], sv[4];
#pragma GCC unroll 2
    for (int n = 0; n < 2; n++) {
        /* codes 128n + 0..63: low nibbles of ql[64n ..] with qh bits 0-1 (first 32) and 2-3;
         * codes 128n + 64..127: high nibbles with qh bits 4-5 and 6-7 */
        const __m512i l = _mm512_loadu_si512(blk + 64 * n);
        const __m256i h = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * n));
        const __m512i hz =
            _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
        c[2 * n] = _mm512_or_si512(_mm512_and_si512(l, m4),
                                   _mm512_and_si512(_mm512_slli_epi16(hz, 4), m30));
        c[2 * n + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                       _mm512_and_si512(hz, m30));
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) { /* elements 64q .. 64q + 63: groups 4q .. 4q + 3 */
        const __m512i idx = _mm512_add_epi16(
            _mm512_set1_epi16((short)(4 * q)),
            _mm512_srli_epi16(_mm512_set_epi32(0x001f001e, 0x001d001c, 0x001b001a, 0x00190018,
                                               0x00170016, 0x00150014, 0x00130012, 0x00110010,
                                               0x000f000e, 0x000d000c, 0x000b000a, 0x00090008,
                                               0x00070006, 0x00050004, 0x00030002, 0x00010000),
                              3));
        sv[q] = _mm512_permutexvar_epi16(idx, scz);
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        const kn__block_q8_K *xb = x[t] + b;
        __m512i acc = _mm512_zextsi256_si512(
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), scm));
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++)
            acc = _mm512_dpwssd_epi32(
                acc,
                _mm512_maddubs_epi16(c[q], _mm512_loadu_si512((const __m512i *)(xb->qs + 64 * q))),
                sv[q]);
        s[t] = acc;
    }
}

/* A stored row against nt prepared tokens: out[t] = row . token t. */
static inline __attribute__((always_inline)) void
q6k_few_row(const uint8_t *row, const uint8_t *const *xp, int64_t k, float *out, const int nt) {
    const int64_t nb = k / KN__QK_K;
    const kn__block_q8_K *x[KN__AVX512_FEW];
    const float *dx[KN__AVX512_FEW];
    __m256 acc[KN__AVX512_FEW];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        x[t] = (const kn__block_q8_K *)xp[t];
        dx[t] = (const float *)(xp[t] + q6k_dx_off(k));
        acc[t] = _mm256_setzero_ps();
    }
    for (int64_t b0 = 0; b0 < nb; b0 += 8, row += 8 * KN__Q6_K_BYTES) {
        const int n = nb - b0 < 8 ? (int)(nb - b0) : 8;
        kn__avx512_tree tr[KN__AVX512_FEW];
        __m256i isum[KN__AVX512_FEW];
        _Alignas(16) uint16_t d[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) { /* blocks past the row: isum 0, d_w 0 (and d_x 0) */
            __m512i s[KN__AVX512_FEW];
            if (i < n) {
                q6k_block_sums(row + i * KN__Q6_K_BYTES, x, b0 + i, s, nt);
                d[i] = kn__rd16(row + i * KN__Q6_K_BYTES + 208);
            } else {
                for (int t = 0; t < nt; t++) s[t] = _mm512_setzero_si512();
                d[i] = 0;
            }
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++) kn__avx512_tree_add(&tr[t], s[t], i, &isum[t], nt <= 2);
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)d));
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m256 scale = _mm256_mul_ps(dw, _mm256_loadu_ps(dx[t] + b0));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), scale, acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) out[t] = kn__x86_tree8(acc[t]);
}

KN__AVX512_FEW_KIND(q6k)

/* ---- Q6_K batches beyond 12 tokens ----------------------------------------------------------- */

/* A super-block's weights are decoded once per tile into int16 (code - 32) * scale_g, which is
 * exact (|w| <= 4096), and the activations are kept as int16 too, so one vpdpwssd adds 32
 * products of a (row, token) pair with its group scales already applied: 8 of them per
 * super-block and pair, no bsum correction. The sum of the 16 dword lanes is the block's exact
 * isum (the canonical one), and the float step is the canonical fma into lane b % 8. A micro-tile
 * is 4 rows x 4 tokens: 16 accumulators, reduced together into one vector whose lane 4t + r holds
 * pair (r, t), so the 16 fmas of a super-block are one vector fma. */

#define Q6_R 4 /* rows of a micro-tile */
#define Q6_T 4 /* tokens of a micro-tile */

/* Decoded tile of Q6_R rows: per super-block b and 32-value chunk c, the rows' 32 int16 weights
 * side by side (w[((8b + c) * Q6_R + r) * 32]), then d_w as float [b][Q6_R]. */
static size_t q6k_tile_bytes(int64_t nb) {
    return (size_t)nb * (8 * Q6_R * 64 + Q6_R * 4);
}

/* Super-block blk of a row into the tile: w points at its chunk 0, chunks Q6_R * 32 apart. */
static inline void q6k_decode16(const uint8_t *blk, int16_t *w) {
    __m256i c[8];
    kn__x86_q6k_codes(blk, c);
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
                      const kn__block_q8_K *const xb[Q6_T], int64_t nb, float out[16],
                      kn__x86_pf *pf) {
    __m512 lane[KN__QLANES];
    for (int l = 0; l < KN__QLANES; l++) lane[l] = _mm512_setzero_ps();
    const __m512i tok_idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    for (int64_t b = 0; b < nb; b++) {
        kn__x86_pf_step(pf);
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
            for (int t = 0; t < Q6_T; t++)
                xv[t] = _mm512_loadu_si512(xq[t] + KN__QK_K * b + 32 * c);
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
        __m512 *l = &lane[b % KN__QLANES];
        *l = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dwv, dxv), *l);
    }
    const __m512 s = _mm512_add_ps(
        _mm512_add_ps(_mm512_add_ps(lane[0], lane[4]), _mm512_add_ps(lane[2], lane[6])),
        _mm512_add_ps(_mm512_add_ps(lane[1], lane[5]), _mm512_add_ps(lane[3], lane[7])));
    _mm512_storeu_ps(out, s);
}

static void q6k_rows_tiled(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                           int64_t n1, void *scratch) {
    const int64_t nb = W->cols / KN__QK_K;
    int16_t *wt = scratch;
    float *dw = (float *)(wt + nb * 8 * Q6_R * 32);
    for (int64_t r0 = n0; r0 < n1; r0 += Q6_R) {
        const int rn = n1 - r0 < Q6_R ? (int)(n1 - r0) : Q6_R;
        for (int r = 0; r < Q6_R; r++) { /* missing rows repeat the last; not stored */
            const uint8_t *src =
                (const uint8_t *)W->data + (size_t)(r0 + (r < rn ? r : rn - 1)) * W->row_bytes;
            for (int64_t b = 0; b < nb; b++, src += KN__Q6_K_BYTES) {
                q6k_decode16(src, wt + 8 * b * Q6_R * 32 + 32 * r);
                dw[Q6_R * b + r] = kn__x86_half(src + 208);
            }
        }
        const int64_t r2 = n1 - (r0 + rn) < Q6_R ? n1 : r0 + rn + Q6_R; /* the next tile */
        kn__x86_pf pf = kn__x86_pf_rows(W, r0 + rn, r2, (x->T + Q6_T - 1) / Q6_T * nb);
        for (int64_t t0 = 0; t0 < x->T; t0 += Q6_T) {
            const int tn = x->T - t0 < Q6_T ? (int)(x->T - t0) : Q6_T;
            const int16_t *xq[Q6_T];
            const kn__block_q8_K *xb[Q6_T];
            for (int t = 0; t < Q6_T; t++) { /* missing tokens repeat the last; not stored */
                const uint8_t *p =
                    (const uint8_t *)x->data + (size_t)(t0 + (t < tn ? t : tn - 1)) * x->stride;
                xb[t] = (const kn__block_q8_K *)p;
                xq[t] = q6k_act_q16(p, W->cols);
            }
            _Alignas(64) float out[16];
            q6k_micro(wt, dw, xq, xb, nb, out, &pf);
            for (int t = 0; t < tn; t++)
                for (int r = 0; r < rn; r++) Y[(t0 + t) * ldy + r0 + r] = out[Q6_T * t + r];
        }
    }
}

static void rows_q6_K(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                      int64_t n1, void *scratch) {
    if (x->T <= Q6_FEW_MAX)
        kn__x86_few_passes(W, x, Y, ldy, n0, n1, q6k_few, KN__AVX512_FEW);
    else
        q6k_rows_tiled(W, x, Y, ldy, n0, n1, scratch);
}

static size_t scratch_q6_K(const kn_mat *W, int64_t T) {
    return T > Q6_FEW_MAX ? q6k_tile_bytes(W->cols / KN__QK_K) : 0;
}

const kn__kernel kn__avx512_q6_K = {"avx512-q6_K-q8_K16", q6k_act_bytes, q6k_act_prep, scratch_q6_K,
                                    rows_q6_K};
