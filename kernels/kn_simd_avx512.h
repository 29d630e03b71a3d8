/* kernels/kn_simd_avx512.h — internal: what the AVX-512 kernel files share: the kernels each
 * format's file gives the ISA row's table (kn_simd_avx512.c), and the parts of the K-quants'
 * streaming kernels that Q6_K (kn_simd_q6_K_avx512.c) and Q4_K (kn_simd_q4_K_avx512.c) both use:
 * the block-sum tree and the row functions per token count. Include only from *_avx512.c. */
#ifndef KN_SIMD_AVX512_H
#define KN_SIMD_AVX512_H

#include "kernels/kn_simd_x86.h"

/* Each format's Q8-mode kernel (kn_simd_mxfp4_q8_0_avx512.c, kn_simd_q6_K_avx512.c,
 * kn_simd_q4_K_avx512.c) and the packers of the MXFP4 and Q8_0 copies. */
extern const kn__kernel kn__avx512_mxfp4, kn__avx512_q8_0, kn__avx512_q6_K, kn__avx512_q4_K;
extern const kn__packer kn__avx512_pack_mxfp4, kn__avx512_pack_q8_0;

/* The 256-bit integer kernels of kn_simd_x86_int8.h built for this row, by type (Q4_K's batches
 * take its tile). */
const kn__kernel *kn__avx512_int8_kernel(kn_type t);

#define KN__AVX512_FEW 8 /* tokens the K-quants' streaming kernels take at once */
_Static_assert(KN__AVX512_FEW <= KN__X86_PASS_MAX, "kn__x86_few_passes takes up to 16 a pass");

/* The sums of 8 super-blocks' 16 dword lanes each, lane j = block j (exact: any order gives the
 * same value), reduced as the blocks come (kn__avx512_tree_add) rather than all at the end: a token
 * then keeps at most three vectors of them, not eight, and a few tokens' sums stay in registers. */
typedef struct kn__avx512_tree {
    __m512i a, c, e; /* block 2i's sums; blocks 4j, 4j + 1 reduced; blocks 0-3 reduced */
    __m512i s[8];    /* late: every block's sums */
} kn__avx512_tree;

/* 128-bit lanes 0-1: the halves of a summed, 2-3: b's. */
static inline __m512i kn__avx512_red1(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xEE));
}
/* From two red1 results (blocks k, k + 1 and k + 2, k + 3): 128-bit lane i holds 4 partial sums
 * of block k + i. */
static inline __m512i kn__avx512_red2(__m512i c0, __m512i c1) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(c0, c1, 0x88), _mm512_shuffle_i64x2(c0, c1, 0xDD));
}
/* From blocks 0-3 (e0) and 4-7 (e1) as red2 leaves them: lane j = block j. */
static inline __m256i kn__avx512_red3(__m512i e0, __m512i e1) {
    /* lane k: two partials of block k, then two of block 4 + k */
    const __m512 g = _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_unpacklo_epi64(e0, e1), _mm512_unpackhi_epi64(e0, e1)));
    /* lane k: block k, 4 + k, k, 4 + k */
    const __m512i h = _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(g, g, 0x88)),
                                       _mm512_castps_si512(_mm512_shuffle_ps(g, g, 0xDD)));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, h));
}

/* Block i's (0 .. 7, a constant once unrolled) 16 lanes s into the tree; after block 7, *out gets
 * the 8 block sums. `late`: all of it after block 7, which measured faster with one or two tokens
 * (their sums fit in registers, and the reduction does not sit between the blocks' decodes). */
static inline __attribute__((always_inline)) void
kn__avx512_tree_add(kn__avx512_tree *tr, __m512i s, const int i, __m256i *out, const bool late) {
    if (late) {
        tr->s[i] = s;
        if (i == 7)
            *out = kn__avx512_red3(kn__avx512_red2(kn__avx512_red1(tr->s[0], tr->s[1]),
                                                   kn__avx512_red1(tr->s[2], tr->s[3])),
                                   kn__avx512_red2(kn__avx512_red1(tr->s[4], tr->s[5]),
                                                   kn__avx512_red1(tr->s[6], tr->s[7])));
        return;
    }
    if (i % 2 == 0) {
        tr->a = s;
        return;
    }
    const __m512i c = kn__avx512_red1(tr->a, s);
    if (i % 4 == 1) {
        tr->c = c;
        return;
    }
    const __m512i e = kn__avx512_red2(tr->c, c);
    if (i == 3)
        tr->e = e;
    else
        *out = kn__avx512_red3(tr->e, e);
}

/* <kind>_few_rows<n>: rows n0 .. n1 of W against n tokens, one row at a time by <kind>_few_row (the
 * K-quants' streaming kernels), and the table <kind>_few of them by n. */
#define KN__AVX512_FEW_ROWS(kind, n)                                                               \
    static void kind##_few_rows##n(const kn_mat *W, const uint8_t *const *x, float *Y,             \
                                   int64_t ldy, int64_t n0, int64_t n1) {                          \
        for (int64_t r = n0; r < n1; r++) {                                                        \
            float out[KN__AVX512_FEW];                                                             \
            kind##_few_row((const uint8_t *)W->data + (size_t)r * W->row_bytes, x, W->cols, out,   \
                           n);                                                                     \
            for (int t = 0; t < n; t++) Y[t * ldy + r] = out[t];                                   \
        }                                                                                          \
    }
#define KN__AVX512_FEW_KIND(kind)                                                                  \
    KN__AVX512_FEW_ROWS(kind, 1)                                                                   \
    KN__AVX512_FEW_ROWS(kind, 2)                                                                   \
    KN__AVX512_FEW_ROWS(kind, 3)                                                                   \
    KN__AVX512_FEW_ROWS(kind, 4)                                                                   \
    KN__AVX512_FEW_ROWS(kind, 5)                                                                   \
    KN__AVX512_FEW_ROWS(kind, 6)                                                                   \
    KN__AVX512_FEW_ROWS(kind, 7)                                                                   \
    KN__AVX512_FEW_ROWS(kind, 8)                                                                   \
    static const kn__x86_few_fn kind##_few[KN__AVX512_FEW + 1] = {NULL,                            \
                                                                  kind##_few_rows1,                \
                                                                  kind##_few_rows2,                \
                                                                  kind##_few_rows3,                \
                                                                  kind##_few_rows4,                \
                                                                  kind##_few_rows5,                \
                                                                  kind##_few_rows6,                \
                                                                  kind##_few_rows7,                \
                                                                  kind##_few_rows8};

#endif
